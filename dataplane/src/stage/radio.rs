//! Radio (RRC) stage: the wake-up latency of a cellular radio, per UE, shared by both directions.
//!
//! Each UE (the classifier's UE id) has one radio state machine, kept in the contract's per-UE
//! registers (`radio_state`, `radio_state_since_ns`, `radio_last_activity_ns`,
//! `radio_promo_done_ns`, `radio_drx_ref_ns`, `radio_fach_free_ns`, `radio_promo_pkts`,
//! `radio_state_time_ns`). The model and its parameters come from the packet's profile
//! (`radio_profile` table). The stage gives the packet its *ready time*: when the radio can carry
//! it. The rate and delay stages then start from the ready time instead of the arrival time, and
//! the packet is held until release as for any delay (timing wheel here, recirculation on v1model).
//!
//! No timer runs per UE: timer demotions are evaluated lazily when the UE's next packet arrives
//! ([`Radio::apply`] first replays every timer that fired since the last packet, each at the time
//! it fired), so a million idle UEs cost nothing. State changes are reported as events (turned
//! into `radio_state_digest_t` digests by the data plane) carrying the time the change takes
//! effect; per UE they come in time order:
//!   - a promotion reports `old -> PROMOTING` (now) and `PROMOTING -> target` (completion time)
//!     when it starts; the register keeps PROMOTING until a later packet finds it complete, which
//!     then moves it to the target silently (already reported);
//!   - timer demotions are reported when the next packet replays them, with the time they fired;
//!   - a DRX wake-up reports `SHORT/LONG_DRX -> CONNECTED` at the packet's ready time.
//!
//! Models (state enum and timers as the contract states them):
//!   UMTS  IDLE -(packet, idle_to_dch)-> DCH -(dch_fach_timer)-> FACH -(fach_idle_timer)-> IDLE.
//!         In FACH a packet goes at the FACH rate (a virtual clock per UE and direction,
//!         `radio_fach_free_ns`) unless the direction's RLC buffer (bytes not yet sent at the
//!         FACH rate, plus this packet) exceeds its threshold: then FACH -(fach_to_dch)-> DCH.
//!   LTE   IDLE -(packet, idle_to_connected)-> CONNECTED; from the last activity L:
//!         SHORT_DRX at L + drx_inactivity, LONG_DRX after short_drx_time more, IDLE at L + tail.
//!         In DRX a downlink packet waits for the next on-duration (on-durations start at
//!         `radio_drx_ref_ns` + k * cycle and last drx_on); an uplink packet does not wait (the UE
//!         may send whenever it wants). Either returns the radio to CONNECTED.
//!   GPRS  IDLE -(packet, idle_to_connected)-> READY -(ready_timer)-> STANDBY
//!         -(packet, standby_to_ready)-> READY; STANDBY -(tail)-> IDLE.
//! Timers count inactivity: UMTS and GPRS timers from the later of entering the state and the last
//! activity, LTE's DRX and tail timers from the last activity. A timer of 0 never fires (DRX with
//! drx_inactivity 0, or with neither DRX cycle set, is off). A promotion lasts its base delay plus
//! a uniform draw in [0, promo_spread_ns]; packets that find the UE promoting wait for the same
//! completion (at most promo_queue_pkts of them, 0 = unlimited; more are dropped, reason radio).
//! The activity time of a packet is its ready time (when the radio carries it).
//!
//! Everything is integer arithmetic that p4src/include/radio.p4 reproduces exactly.
use std::sync::atomic::Ordering::Relaxed;

use super::{Ctx, Pkt, Stage, Verdict};
use crate::contract::{
    radio_model as model, radio_promo as kind, radio_state as st, DropReason, RADIO_PROMO_KINDS, RADIO_STATE_STRIDE,
};
use crate::state::{RadioRegisters, UeRadio};
use crate::tables::RadioParams;

/// One state change of one UE, effective at `at_ns` (data-plane clock).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RadioEvent {
    pub ue: u32,
    pub old: u8,
    pub new: u8,
    pub at_ns: u64,
}

/// Most events one packet can cause: 3 replayed timers (LTE CONNECTED -> SHORT -> LONG -> IDLE)
/// and a promotion (2). Room for a few more keeps the bound obviously safe.
pub const MAX_EVENTS: usize = 8;
/// Timer transitions replayed per packet at most; every chain of timers is shorter.
const MAX_STEPS: usize = 6;

const UPLINK: usize = 0;
const DOWNLINK: usize = 1;

/// The stage. Holds the events of the packet it processed last (no allocation per packet).
pub struct Radio {
    events: [RadioEvent; MAX_EVENTS],
    n: usize,
}

impl Default for Radio {
    fn default() -> Self {
        Self::new()
    }
}

/// One UE's registers, loaded for the duration of one packet.
#[derive(Debug, Clone, Copy)]
struct Ue {
    state: u8,
    since: u64,
    last: u64,
    done: u64,
    drx_ref: u64,
    promo_pkts: u32,
}

impl Ue {
    fn load(c: &UeRadio) -> Self {
        Ue {
            state: c.state.load(Relaxed),
            since: c.since_ns.load(Relaxed),
            last: c.last_activity_ns.load(Relaxed),
            done: c.promo_done_ns.load(Relaxed),
            drx_ref: c.drx_ref_ns.load(Relaxed),
            promo_pkts: c.promo_pkts.load(Relaxed),
        }
    }

    /// Writes back what changed (one cache line: the UE's own).
    fn store(&self, was: &Ue, c: &UeRadio) {
        if self.state != was.state {
            c.state.store(self.state, Relaxed);
        }
        if self.since != was.since {
            c.since_ns.store(self.since, Relaxed);
        }
        if self.last != was.last {
            c.last_activity_ns.store(self.last, Relaxed);
        }
        if self.done != was.done {
            c.promo_done_ns.store(self.done, Relaxed);
        }
        if self.drx_ref != was.drx_ref {
            c.drx_ref_ns.store(self.drx_ref, Relaxed);
        }
        if self.promo_pkts != was.promo_pkts {
            c.promo_pkts.store(self.promo_pkts, Relaxed);
        }
    }
}

/// The data-carrying state a promotion of `model` ends in.
pub fn promotion_target(m: u8) -> u8 {
    match m {
        model::UMTS => st::DCH,
        model::LTE => st::CONNECTED,
        _ => st::READY,
    }
}

fn lte_short_drx(p: &RadioParams) -> bool {
    p.short_drx_time_ns != 0 && p.short_drx_cycle_ns != 0
}

fn lte_long_drx(p: &RadioParams) -> bool {
    p.long_drx_cycle_ns != 0
}

fn lte_drx(p: &RadioParams) -> bool {
    p.drx_inactivity_ns != 0 && (lte_short_drx(p) || lte_long_drx(p))
}

/// The earlier of two optional timers; on a tie the second (the tail, IDLE) wins.
fn earliest(a: Option<(u64, u8)>, b: Option<(u64, u8)>) -> Option<(u64, u8)> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if y.0 <= x.0 { y } else { x }),
        (x, None) => x,
        (None, y) => y,
    }
}

/// The next timer transition of `u` (when it fires, the new state), if one is pending.
fn next_timer(p: &RadioParams, u: &Ue) -> Option<(u64, u8)> {
    let local = u.since.max(u.last); // UMTS/GPRS timers: inactivity within the state
    let lte_tail = (p.tail_ns != 0).then(|| (u.last.saturating_add(p.tail_ns), st::IDLE));
    let drx_start = u.last.saturating_add(p.drx_inactivity_ns);
    let long_start = if lte_short_drx(p) { drx_start.saturating_add(p.short_drx_time_ns) } else { drx_start };
    let next = match (p.model, u.state) {
        (_, st::PROMOTING) => Some((u.done, promotion_target(p.model))),
        (model::UMTS, st::DCH) if p.dch_fach_timer_ns != 0 => {
            Some((local.saturating_add(p.dch_fach_timer_ns), st::FACH))
        }
        (model::UMTS, st::FACH) if p.fach_idle_timer_ns != 0 => {
            Some((local.saturating_add(p.fach_idle_timer_ns), st::IDLE))
        }
        (model::LTE, st::CONNECTED) => {
            let first = if lte_short_drx(p) { st::SHORT_DRX } else { st::LONG_DRX };
            earliest(lte_drx(p).then_some((drx_start, first)), lte_tail)
        }
        (model::LTE, st::SHORT_DRX) => earliest(lte_long_drx(p).then_some((long_start, st::LONG_DRX)), lte_tail),
        (model::LTE, st::LONG_DRX) => lte_tail,
        (model::GPRS, st::READY) if p.ready_timer_ns != 0 => {
            Some((local.saturating_add(p.ready_timer_ns), st::STANDBY))
        }
        (model::GPRS, st::STANDBY) if p.tail_ns != 0 => Some((local.saturating_add(p.tail_ns), st::IDLE)),
        _ => None,
    };
    // Never before the current state began: keeps events in time order whatever the registers
    // hold (a controller may have written them).
    next.map(|(at, s)| (at.max(u.since), s))
}

/// Start of the next DRX on-duration at or after `t` (t itself if the receiver is awake).
fn next_on_duration(p: &RadioParams, u: &Ue, t: u64) -> u64 {
    let cycle = if u.state == st::SHORT_DRX { p.short_drx_cycle_ns } else { p.long_drx_cycle_ns };
    if cycle == 0 || t < u.drx_ref {
        return t;
    }
    let phase = (t - u.drx_ref) % cycle;
    if phase < p.drx_on_ns {
        t
    } else {
        t - phase + cycle
    }
}

impl Radio {
    pub fn new() -> Self {
        Radio { events: [RadioEvent::default(); MAX_EVENTS], n: 0 }
    }

    /// The state changes caused by the last packet, in time order.
    pub fn events(&self) -> &[RadioEvent] {
        &self.events[..self.n]
    }

    fn push(&mut self, ev: RadioEvent) {
        if self.n < MAX_EVENTS {
            self.events[self.n] = ev;
            self.n += 1;
        }
    }

    /// Moves `u` to `new` at `at`, accounting the time spent in the old state.
    fn change(&mut self, r: &RadioRegisters, ue: u32, u: &mut Ue, new: u8, at: u64, report: bool) {
        let old = u.state;
        let cell = ue as usize * RADIO_STATE_STRIDE as usize + (old as usize & (RADIO_STATE_STRIDE as usize - 1));
        // since == 0: a UE never seen before (registers start at 0); its idle time before the
        // first packet is unknown, not "since the clock's epoch".
        if u.since != 0 {
            if let Some(c) = r.state_time_ns.get(cell) {
                c.fetch_add(at.saturating_sub(u.since), Relaxed);
            }
        }
        u.state = new;
        u.since = at;
        if report {
            self.push(RadioEvent { ue, old, new, at_ns: at });
        }
    }

    /// Replays the timers that fired by `now`.
    fn advance(&mut self, p: &RadioParams, r: &RadioRegisters, ue: u32, u: &mut Ue, now: u64) {
        for _ in 0..MAX_STEPS {
            let Some((at, new)) = next_timer(p, u) else { break };
            if at > now {
                break;
            }
            let from = u.state;
            if from == st::CONNECTED && (new == st::SHORT_DRX || new == st::LONG_DRX) {
                u.drx_ref = at; // the DRX cycles' phase starts when DRX starts
            }
            // The completion of a promotion was reported when it started.
            self.change(r, ue, u, new, at, from != st::PROMOTING);
        }
    }

    /// Starts a promotion now; returns its completion time (the packet's ready time).
    #[allow(clippy::too_many_arguments)]
    fn promote(&mut self, p: &RadioParams, ctx: &mut Ctx, ue: u32, u: &mut Ue, base: u64, k: u32, now: u64) -> u64 {
        let spread = if p.promo_spread_ns != 0 { ctx.rng.up_to(p.promo_spread_ns) } else { 0 };
        let start = now.max(u.since);
        let done = start.saturating_add(base).saturating_add(spread);
        self.change(&ctx.regs.radio, ue, u, st::PROMOTING, start, true);
        self.push(RadioEvent { ue, old: st::PROMOTING, new: promotion_target(p.model), at_ns: done });
        u.done = done;
        u.promo_pkts = 1;
        ctx.counters.radio_promotions.add_packet((ue * RADIO_PROMO_KINDS + k) as usize);
        done
    }
}

impl Stage<RadioParams> for Radio {
    /// Sets `pkt.ready`; drops (reason radio) a packet beyond `promo_queue_pkts`.
    fn enqueue(&mut self, p: &RadioParams, ctx: &mut Ctx, pkt: &mut Pkt) -> Verdict {
        self.n = 0;
        let regs = ctx.regs;
        let r = &regs.radio;
        let ue = pkt.ue;
        let i = ue as usize;
        if i >= r.ues() || !p.active() {
            return Verdict::Pass; // the control plane rejects such UE ids; never index past the arrays
        }
        let now = ctx.now;
        let dir = (ctx.pd & 1) as usize;
        let cell = &r.ues[i];
        let was = Ue::load(cell);
        let mut u = was;
        self.advance(p, r, ue, &mut u, now);

        let ready = match (p.model, u.state) {
            (_, st::PROMOTING) => {
                if p.promo_queue_pkts != 0 && u.promo_pkts >= p.promo_queue_pkts {
                    u.store(&was, cell);
                    return Verdict::Drop(DropReason::Radio);
                }
                u.promo_pkts = u.promo_pkts.saturating_add(1);
                u.done.max(now)
            }
            (model::UMTS, st::DCH) | (model::LTE, st::CONNECTED) | (model::GPRS, st::READY) => now,
            (model::UMTS, st::FACH) => {
                let q = p.fach_ns_per_byte_q16 as u128;
                let threshold = if dir == UPLINK { p.rlc_ul_bytes } else { p.rlc_dl_bytes } as u128;
                let clock = &cell.fach_free_ns[dir];
                let free = clock.load(Relaxed);
                let tx = ((pkt.len as u128 * q) >> 16) as u64;
                // RLC buffer = bytes still to send at the FACH rate + this packet; compared in
                // time at that rate (P4 cannot divide), or in bytes when FACH has no rate.
                let over = if q == 0 {
                    pkt.len as u128 > threshold
                } else {
                    free.saturating_sub(now) as u128 + tx as u128 > (threshold * q) >> 16
                };
                if over {
                    self.promote(p, ctx, ue, &mut u, p.fach_to_dch_ns, kind::FACH_DCH, now)
                } else {
                    let fin = free.max(now).saturating_add(tx);
                    clock.store(fin, Relaxed);
                    fin
                }
            }
            (model::LTE, st::SHORT_DRX | st::LONG_DRX) => {
                let ready = if dir == DOWNLINK { next_on_duration(p, &u, now) } else { now };
                self.change(r, ue, &mut u, st::CONNECTED, ready, true);
                ready
            }
            (model::GPRS, st::STANDBY) => self.promote(p, ctx, ue, &mut u, p.standby_to_ready_ns, kind::TO_READY, now),
            // IDLE, or a state this model does not have (the profile's model changed): wake up.
            (model::UMTS, _) => self.promote(p, ctx, ue, &mut u, p.idle_to_dch_ns, kind::IDLE_DCH, now),
            (model::LTE, _) => self.promote(p, ctx, ue, &mut u, p.idle_to_connected_ns, kind::IDLE_CONNECTED, now),
            (_, _) => self.promote(p, ctx, ue, &mut u, p.idle_to_connected_ns, kind::TO_READY, now),
        };
        u.last = u.last.max(ready);
        u.store(&was, cell);
        pkt.ready = ready;
        Verdict::Pass
    }
}

#[cfg(test)]
mod tests;
