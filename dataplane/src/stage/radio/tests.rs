use std::collections::HashMap;

use super::*;
use crate::contract::radio_promo;
use crate::rng::Prng;
use crate::state::{Capacities, Counters, Registers};
use crate::tables::Impairment;

const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;
const UL: u32 = 0;
const DL: u32 = 1;

/// One switch's worth of radio state, and a way to send packets of one profile through the stage.
struct Harness {
    regs: Registers,
    counters: Counters,
    rng: Prng,
    radio: Radio,
    events: Vec<RadioEvent>,
}

impl Harness {
    fn new(ues: u32) -> Self {
        let caps = Capacities { profiles: 4, ue_ids: ues, ..Default::default() };
        Harness {
            regs: Registers::new(&caps, vec![0; 16384].into(), 1),
            counters: Counters::new(&caps),
            rng: Prng::new(7),
            radio: Radio::new(),
            events: Vec::new(),
        }
    }

    /// A packet of `len` bytes of UE `ue` in direction `dir` (profile 1) at `now`: its ready time.
    fn send(&mut self, p: &RadioParams, ue: u32, dir: u32, len: u32, now: u64) -> Result<u64, DropReason> {
        let mut ctx = Ctx { now, pd: 2 + dir, rng: &mut self.rng, regs: &self.regs, counters: &self.counters };
        let mut pkt = Pkt::new(len, now);
        pkt.ue = ue;
        let v = self.radio.enqueue(p, &mut ctx, &mut pkt);
        self.events.extend_from_slice(self.radio.events());
        match v {
            Verdict::Pass => Ok(pkt.ready),
            Verdict::Drop(r) => Err(r),
            Verdict::Held => unreachable!("the radio never holds a packet"),
        }
    }

    fn ready(&mut self, p: &RadioParams, ue: u32, dir: u32, now: u64) -> u64 {
        self.send(p, ue, dir, 100, now).expect("passes")
    }

    fn take_events(&mut self) -> Vec<(u8, u8, u64)> {
        self.events.drain(..).map(|e| (e.old, e.new, e.at_ns)).collect()
    }

    fn state(&self, ue: u32) -> u8 {
        self.regs.radio.ues[ue as usize].state.load(Relaxed)
    }

    fn time_in(&self, ue: u32, state: u8) -> u64 {
        self.regs.radio.state_time_ns[(ue * RADIO_STATE_STRIDE) as usize + state as usize].load(Relaxed)
    }

    fn promotions(&self, ue: u32, k: u32) -> u64 {
        self.counters.radio_promotions.get((ue * RADIO_PROMO_KINDS + k) as usize).1
    }
}

fn umts() -> RadioParams {
    RadioParams {
        model: model::UMTS,
        idle_to_dch_ns: 2 * S,
        fach_to_dch_ns: 1500 * MS,
        dch_fach_timer_ns: 4 * S,
        fach_idle_timer_ns: 10 * S,
        rlc_ul_bytes: 543,
        rlc_dl_bytes: 475,
        // 20 kbit/s: 400 us per byte.
        fach_ns_per_byte_q16: 400_000 * 65536,
        ..Default::default()
    }
}

fn lte() -> RadioParams {
    RadioParams {
        model: model::LTE,
        idle_to_connected_ns: 260 * MS,
        drx_inactivity_ns: 100 * MS,
        short_drx_time_ns: 20 * MS,
        short_drx_cycle_ns: 20 * MS,
        long_drx_cycle_ns: 40 * MS,
        drx_on_ns: MS,
        tail_ns: 10 * S,
        ..Default::default()
    }
}

fn gprs() -> RadioParams {
    RadioParams {
        model: model::GPRS,
        idle_to_connected_ns: 750 * MS,
        standby_to_ready_ns: 500 * MS,
        ready_timer_ns: 44 * S,
        tail_ns: 600 * S,
        ..Default::default()
    }
}

#[test]
fn umts_first_packet_waits_for_the_promotion_and_later_ones_for_the_same_completion() {
    let mut h = Harness::new(16);
    let p = umts();
    let t0 = 100 * S;
    assert_eq!(h.ready(&p, 3, UL, t0), t0 + 2 * S);
    assert_eq!(h.take_events(), vec![(st::IDLE, st::PROMOTING, t0), (st::PROMOTING, st::DCH, t0 + 2 * S)]);
    assert_eq!(h.state(3), st::PROMOTING);
    // Either direction, during the promotion: the same completion, no new event.
    assert_eq!(h.ready(&p, 3, DL, t0 + 500 * MS), t0 + 2 * S);
    assert_eq!(h.ready(&p, 3, UL, t0 + 1999 * MS), t0 + 2 * S);
    assert!(h.take_events().is_empty());
    // After completion: DCH, no wait, and the completion is not reported twice.
    assert_eq!(h.ready(&p, 3, DL, t0 + 3 * S), t0 + 3 * S);
    assert!(h.take_events().is_empty());
    assert_eq!(h.state(3), st::DCH);
    assert_eq!(h.promotions(3, radio_promo::IDLE_DCH), 1);
    assert_eq!(h.time_in(3, st::PROMOTING), 2 * S);
    // Other UEs are untouched.
    assert_eq!(h.state(2), st::IDLE);
}

#[test]
fn umts_timers_demote_lazily_with_the_time_they_fired() {
    let mut h = Harness::new(4);
    let p = umts();
    let t0 = 10 * S;
    h.ready(&p, 1, UL, t0);
    let up = t0 + 2 * S; // DCH from here; also the last activity
    h.take_events();
    // 3.9 s of inactivity: still DCH, no wait.
    assert_eq!(h.ready(&p, 1, DL, up + 3900 * MS), up + 3900 * MS);
    assert!(h.take_events().is_empty());
    let last = up + 3900 * MS;
    // 4 s + 10 s + a bit later: DCH -> FACH -> IDLE replayed, then a new promotion.
    let t = last + 14 * S + MS;
    assert_eq!(h.ready(&p, 1, DL, t), t + 2 * S);
    assert_eq!(
        h.take_events(),
        vec![
            (st::DCH, st::FACH, last + 4 * S),
            (st::FACH, st::IDLE, last + 14 * S),
            (st::IDLE, st::PROMOTING, t),
            (st::PROMOTING, st::DCH, t + 2 * S),
        ]
    );
    assert_eq!(h.time_in(1, st::DCH), 3900 * MS + 4 * S);
    assert_eq!(h.time_in(1, st::FACH), 10 * S);
    assert_eq!(h.time_in(1, st::IDLE), MS);
    assert_eq!(h.promotions(1, radio_promo::IDLE_DCH), 2);
}

#[test]
fn umts_fach_carries_small_bursts_at_the_fach_rate_and_promotes_above_the_rlc_threshold() {
    let mut h = Harness::new(4);
    let p = umts();
    h.ready(&p, 0, UL, S);
    let t = S + 2 * S + 5 * S; // DCH since 3 s, FACH from 7 s
                               // 100 bytes at 20 kbit/s = 40 ms.
    assert_eq!(h.ready(&p, 0, UL, t), t + 40 * MS);
    assert_eq!(h.take_events().last(), Some(&(st::DCH, st::FACH, 7 * S)));
    assert_eq!(h.state(0), st::FACH);
    // Back to back: the uplink buffer holds 100 + 4 * 100 = 500 B <= 543: still FACH, paced.
    for k in 2..=5u64 {
        assert_eq!(h.ready(&p, 0, UL, t), t + k * 40 * MS);
    }
    assert!(h.take_events().is_empty());
    // The downlink has its own buffer (threshold 475): 400 B pass...
    for k in 1..=4u64 {
        assert_eq!(h.send(&p, 0, DL, 100, t).unwrap(), t + k * 40 * MS);
    }
    // ... and a 6th uplink packet (600 B > 543) promotes FACH -> DCH.
    assert_eq!(h.ready(&p, 0, UL, t), t + 1500 * MS);
    assert_eq!(h.take_events(), vec![(st::FACH, st::PROMOTING, t), (st::PROMOTING, st::DCH, t + 1500 * MS)]);
    assert_eq!(h.promotions(0, radio_promo::FACH_DCH), 1);
    // A single packet above the downlink threshold promotes at once from FACH.
    let mut h = Harness::new(4);
    h.ready(&p, 0, UL, S);
    assert_eq!(h.send(&p, 0, DL, 476, 8 * S).unwrap(), 8 * S + 1500 * MS);
    let mut h = Harness::new(4);
    h.ready(&p, 0, UL, S);
    assert_eq!(h.send(&p, 0, DL, 475, 8 * S).unwrap(), 8 * S + 475 * 400_000);
}

#[test]
fn umts_fach_without_a_rate_compares_the_packet_alone() {
    let mut h = Harness::new(2);
    let p = RadioParams { fach_ns_per_byte_q16: 0, ..umts() };
    h.ready(&p, 0, UL, S);
    assert_eq!(h.send(&p, 0, UL, 543, 8 * S).unwrap(), 8 * S);
    assert_eq!(h.send(&p, 0, UL, 543, 8 * S).unwrap(), 8 * S);
    assert_eq!(h.send(&p, 0, UL, 544, 8 * S).unwrap(), 8 * S + 1500 * MS);
}

#[test]
fn lte_promotion_drx_and_tail() {
    let mut h = Harness::new(4);
    let p = lte();
    let t0 = 5 * S;
    assert_eq!(h.ready(&p, 2, DL, t0), t0 + 260 * MS);
    assert_eq!(h.take_events(), vec![(st::IDLE, st::PROMOTING, t0), (st::PROMOTING, st::CONNECTED, t0 + 260 * MS)]);
    assert_eq!(h.promotions(2, radio_promo::IDLE_CONNECTED), 1);
    let last = t0 + 260 * MS;
    // Within the DRX inactivity timer: continuous reception.
    assert_eq!(h.ready(&p, 2, DL, last + 50 * MS), last + 50 * MS);
    let last = last + 50 * MS;
    // 150 ms later: short DRX at +100 ms, long DRX at +120 ms; the downlink packet waits for the
    // next long-cycle on-duration (cycles start at the DRX start).
    let t = last + 150 * MS + 3 * MS;
    let drx_ref = last + 100 * MS;
    let next_on = drx_ref + 80 * MS; // on-durations at ref, ref+40, ref+80...; t = ref + 53 ms
    assert_eq!(h.ready(&p, 2, DL, t), next_on);
    assert_eq!(
        h.take_events(),
        vec![
            (st::CONNECTED, st::SHORT_DRX, drx_ref),
            (st::SHORT_DRX, st::LONG_DRX, drx_ref + 20 * MS),
            (st::LONG_DRX, st::CONNECTED, next_on),
        ]
    );
    assert_eq!(h.time_in(2, st::SHORT_DRX), 20 * MS);
    // Uplink in DRX does not wait.
    let last = next_on;
    let t = last + 200 * MS + 7 * MS;
    assert_eq!(h.ready(&p, 2, UL, t), t);
    assert_eq!(h.take_events().last(), Some(&(st::LONG_DRX, st::CONNECTED, t)));
    // A downlink packet inside an on-duration does not wait either.
    let last = t;
    let drx_ref = last + 100 * MS;
    let t = drx_ref + 120 * MS + MS / 2; // long cycle: on-duration [ref + 120, ref + 121)
    assert_eq!(h.ready(&p, 2, DL, t), t);
    assert_eq!(h.take_events().last(), Some(&(st::LONG_DRX, st::CONNECTED, t)));
    // Past the tail: LONG_DRX -> IDLE at last + 10 s, then a new promotion.
    let last = t;
    let t = last + 10 * S + 1;
    assert_eq!(h.ready(&p, 2, UL, t), t + 260 * MS);
    let ev = h.take_events();
    assert_eq!(ev.len(), 5, "{ev:?}");
    assert_eq!(ev[2], (st::LONG_DRX, st::IDLE, last + 10 * S));
    assert_eq!(&ev[3..], &[(st::IDLE, st::PROMOTING, t), (st::PROMOTING, st::CONNECTED, t + 260 * MS)]);
}

#[test]
fn lte_drx_wait_is_bounded_by_the_cycle() {
    let p = lte();
    let mut waits = Vec::new();
    let mut rng = Prng::new(11);
    for ue in 0..400u32 {
        let mut h = Harness::new(400);
        h.ready(&p, ue, UL, S);
        let last = S + 260 * MS;
        // Any time in long DRX (after 120 ms, before the 10 s tail).
        let t = last + 121 * MS + rng.up_to(9 * S);
        let ready = h.ready(&p, ue, DL, t);
        let wait = ready - t;
        assert!(wait < 40 * MS, "wait {wait} ns exceeds the long DRX cycle");
        let phase = (ready - (last + 100 * MS)) % (40 * MS);
        assert!(phase < MS, "released outside an on-duration (phase {phase})");
        waits.push(wait);
    }
    let max = *waits.iter().max().unwrap();
    let mean = waits.iter().sum::<u64>() as f64 / waits.len() as f64;
    assert!(max > 35 * MS, "max wait {max}: the draw should come close to a cycle");
    // Uniform arrival: mean wait (39 ms)^2 / (2 * 40 ms) ~ 19 ms.
    assert!((mean - 19.0e6).abs() < 3.0e6, "mean wait {mean}");
}

#[test]
fn lte_without_drx_stays_connected_until_the_tail() {
    let mut h = Harness::new(2);
    let p = RadioParams { drx_inactivity_ns: 0, ..lte() };
    h.ready(&p, 0, UL, S);
    let t = S + 260 * MS + 5 * S;
    assert_eq!(h.ready(&p, 0, DL, t), t);
    assert_eq!(h.take_events().len(), 2);
    let p = RadioParams { tail_ns: 0, drx_inactivity_ns: 0, ..lte() };
    assert_eq!(h.ready(&p, 0, DL, t + 3600 * S), t + 3600 * S);
    assert_eq!(h.state(0), st::CONNECTED);
}

#[test]
fn gprs_ready_standby_idle() {
    let mut h = Harness::new(2);
    let p = gprs();
    let t0 = 2 * S;
    assert_eq!(h.ready(&p, 1, UL, t0), t0 + 750 * MS);
    assert_eq!(h.take_events(), vec![(st::IDLE, st::PROMOTING, t0), (st::PROMOTING, st::READY, t0 + 750 * MS)]);
    let last = t0 + 750 * MS;
    assert_eq!(h.ready(&p, 1, DL, last + 43 * S), last + 43 * S);
    let last = last + 43 * S;
    let t = last + 50 * S;
    assert_eq!(h.ready(&p, 1, DL, t), t + 500 * MS);
    assert_eq!(
        h.take_events(),
        vec![
            (st::READY, st::STANDBY, last + 44 * S),
            (st::STANDBY, st::PROMOTING, t),
            (st::PROMOTING, st::READY, t + 500 * MS),
        ]
    );
    assert_eq!(h.promotions(1, radio_promo::TO_READY), 2);
    // STANDBY -> IDLE after the tail: the next wake-up is an IDLE -> READY one (750 ms).
    let last = t + 500 * MS;
    let t = last + 44 * S + 600 * S + 1;
    assert_eq!(h.ready(&p, 1, UL, t), t + 750 * MS);
    let ev = h.take_events();
    assert_eq!(ev[0], (st::READY, st::STANDBY, last + 44 * S));
    assert_eq!(ev[1], (st::STANDBY, st::IDLE, last + 644 * S));
}

#[test]
fn promotion_spread_is_uniform_in_its_range() {
    let p = RadioParams { promo_spread_ns: 100 * MS, ..lte() };
    let mut h = Harness::new(20_000);
    let n = 20_000u32;
    let extra: Vec<u64> = (0..n).map(|ue| h.ready(&p, ue, UL, S) - S - 260 * MS).collect();
    assert!(extra.iter().all(|e| *e <= 100 * MS));
    let min = *extra.iter().min().unwrap();
    let max = *extra.iter().max().unwrap();
    assert!(min < MS && max > 99 * MS, "range [{min}, {max}]");
    let mean = extra.iter().sum::<u64>() as f64 / n as f64;
    // Uniform on [0, 100 ms]: sigma of the mean = 28.9 ms / sqrt(n) = 0.2 ms.
    assert!((mean - 50e6).abs() < 1e6, "mean {mean}");
    // Packets waiting for a spread promotion wait for its drawn completion.
    let done = h.ready(&p, 0, DL, S + MS);
    assert_eq!(done, S + 260 * MS + extra[0]);
}

#[test]
fn promo_queue_limit_drops_excess_packets_with_reason_radio() {
    let mut h = Harness::new(2);
    let p = RadioParams { promo_queue_pkts: 3, ..umts() };
    assert_eq!(h.ready(&p, 0, UL, S), 3 * S);
    assert_eq!(h.ready(&p, 0, DL, S + 1), 3 * S);
    assert_eq!(h.ready(&p, 0, UL, S + 2), 3 * S);
    assert_eq!(h.send(&p, 0, DL, 100, S + 3), Err(DropReason::Radio));
    assert_eq!(h.send(&p, 0, UL, 100, S + 4), Err(DropReason::Radio));
    // The drops are not activity; after completion traffic flows.
    assert_eq!(h.regs.radio.ues[0].last_activity_ns.load(Relaxed), 3 * S);
    assert_eq!(h.ready(&p, 0, UL, 3 * S + 1), 3 * S + 1);
    // Unlimited (0): any number waits.
    let p = umts();
    let mut h = Harness::new(2);
    for i in 0..1000 {
        assert_eq!(h.ready(&p, 1, DL, S + i), 3 * S);
    }
}

#[test]
fn unknown_state_for_the_model_wakes_up_and_ue_ids_past_the_arrays_pass_untouched() {
    let mut h = Harness::new(4);
    // A UE left in DCH by a UMTS profile whose profile is now LTE.
    h.ready(&umts(), 0, UL, S);
    h.ready(&umts(), 0, UL, 3 * S + 1);
    assert_eq!(h.state(0), st::DCH);
    h.take_events();
    let t = 4 * S;
    assert_eq!(h.ready(&lte(), 0, UL, t), t + 260 * MS);
    assert_eq!(h.take_events(), vec![(st::DCH, st::PROMOTING, t), (st::PROMOTING, st::CONNECTED, t + 260 * MS)]);
    assert_eq!(h.ready(&umts(), 99, UL, t), t);
    assert!(h.take_events().is_empty());
    // model 0: no radio.
    assert_eq!(h.ready(&RadioParams::default(), 1, UL, t), t);
    assert_eq!(h.state(1), st::IDLE);
}

/// Per packet of one UE: its ready time and the events it caused.
type Trace = Vec<(u64, Vec<(u8, u8, u64)>)>;

/// A simple random workload: (time, ue, dir, len) sorted by time.
fn workload(ues: u32, per_ue: usize, seed: u64) -> Vec<(u64, u32, u32, u32)> {
    let mut rng = Prng::new(seed);
    let mut out = Vec::new();
    for ue in 0..ues {
        let mut t = S + rng.up_to(S);
        for _ in 0..per_ue {
            // Gaps from 1 ms to 30 s: every timer fires for some UEs, not for others.
            t += match rng.up_to(3) {
                0 => MS + rng.up_to(50 * MS),
                1 => rng.up_to(3 * S),
                _ => rng.up_to(30 * S),
            };
            out.push((t, ue, rng.up_to(1) as u32, 40 + rng.up_to(1400) as u32));
        }
    }
    out.sort();
    out
}

#[test]
fn a_thousand_ues_are_independent_of_each_other() {
    // GPRS with timers short enough for the workload's gaps to reach STANDBY and IDLE.
    for p in [umts(), lte(), RadioParams { ready_timer_ns: 8 * S, tail_ns: 40 * S, ..gprs() }] {
        let load = workload(1000, 12, 5 + p.model as u64);
        let mut all = Harness::new(1000);
        let mut shared: HashMap<u32, Trace> = HashMap::new();
        for &(t, ue, dir, len) in &load {
            let ready = all.send(&p, ue, dir, len, t).unwrap();
            shared.entry(ue).or_default().push((ready, all.take_events()));
        }
        for ue in (0..1000).step_by(37) {
            let mut alone = Harness::new(1000);
            let mine: Trace = load
                .iter()
                .filter(|x| x.1 == ue)
                .map(|&(t, ue, dir, len)| {
                    let ready = alone.send(&p, ue, dir, len, t).unwrap();
                    (ready, alone.take_events())
                })
                .collect();
            assert_eq!(mine, shared[&ue], "model {} ue {ue}", p.model);
            for k in 0..RADIO_STATE_STRIDE as u8 {
                assert_eq!(alone.time_in(ue, k), all.time_in(ue, k));
            }
        }
        // Per UE, events are in time order and chain (each starts where the previous ended).
        for (ue, rows) in &shared {
            let evs: Vec<&(u8, u8, u64)> = rows.iter().flat_map(|r| r.1.iter()).collect();
            for w in evs.windows(2) {
                assert!(w[0].2 <= w[1].2, "ue {ue}: events out of time order {w:?}");
                assert_eq!(w[0].1, w[1].0, "ue {ue}: {w:?} do not chain");
            }
        }
        let promotions: u64 = (0..1000).map(|ue| (0..4).map(|k| all.promotions(ue, k)).sum::<u64>()).sum();
        assert!(promotions > 1000, "model {}: {promotions} promotions", p.model);
    }
}

#[test]
fn rate_stage_starts_from_the_ready_time() {
    use crate::stage::Rate;
    let mut h = Harness::new(2);
    let imp = Impairment { ns_per_byte_q16: 800 * 65536, ..Default::default() }; // 10 Mbit/s
    let mut rate = Rate::new(8, 64);
    rate.provision(2, &imp);
    let p = lte();
    let mut deps = Vec::new();
    for i in 0..3 {
        let now = S + i * 1000;
        let mut ctx = Ctx { now, pd: 2, rng: &mut h.rng, regs: &h.regs, counters: &h.counters };
        let mut pkt = Pkt::new(1000, now);
        pkt.ue = 1;
        assert_eq!(h.radio.enqueue(&p, &mut ctx, &mut pkt), Verdict::Pass);
        assert_eq!(rate.enqueue(&imp, &mut ctx, &mut pkt), Verdict::Pass);
        deps.push(pkt.departure);
    }
    let ready = S + 260 * MS;
    assert_eq!(deps, vec![ready + 800_000, ready + 1_600_000, ready + 2_400_000]);
}

#[test]
fn lte_short_drx_wake_and_direct_demotions_to_idle() {
    let p = lte();
    // A downlink packet in short DRX waits for the short cycle's grid (20 ms from the DRX start).
    let mut h = Harness::new(2);
    h.ready(&p, 0, UL, S);
    let last = S + 260 * MS;
    let drx_ref = last + 100 * MS;
    let t = drx_ref + 5 * MS; // short DRX lasts 20 ms: on-durations at ref, ref + 20 ms
    assert_eq!(h.ready(&p, 0, DL, t), drx_ref + 20 * MS);
    let ev = h.take_events();
    assert_eq!(&ev[2..], &[(st::CONNECTED, st::SHORT_DRX, drx_ref), (st::SHORT_DRX, st::CONNECTED, drx_ref + 20 * MS)]);
    // An uplink packet in short DRX leaves at once.
    let last = drx_ref + 20 * MS;
    let t = last + 100 * MS + 3 * MS;
    assert_eq!(h.ready(&p, 0, UL, t), t);
    assert_eq!(h.take_events().last(), Some(&(st::SHORT_DRX, st::CONNECTED, t)));
    // Without DRX, CONNECTED goes straight to IDLE at the tail.
    let p = RadioParams { drx_inactivity_ns: 0, ..lte() };
    let mut h = Harness::new(2);
    h.ready(&p, 0, UL, S);
    let last = S + 260 * MS;
    let t = last + 10 * S + 5;
    assert_eq!(h.ready(&p, 0, DL, t), t + 260 * MS);
    assert_eq!(h.take_events()[2], (st::CONNECTED, st::IDLE, last + 10 * S));
    assert_eq!(h.time_in(0, st::CONNECTED), 10 * S);
    // A tail shorter than the short DRX phase ends short DRX in IDLE.
    let p = RadioParams { tail_ns: 110 * MS, ..lte() };
    let mut h = Harness::new(2);
    h.ready(&p, 0, UL, S);
    let last = S + 260 * MS;
    h.ready(&p, 0, UL, last + S);
    let ev = h.take_events();
    assert_eq!(
        &ev[2..4],
        &[(st::CONNECTED, st::SHORT_DRX, last + 100 * MS), (st::SHORT_DRX, st::IDLE, last + 110 * MS)]
    );
    // No long DRX: short DRX lasts until the tail.
    let p = RadioParams { long_drx_cycle_ns: 0, ..lte() };
    let mut h = Harness::new(2);
    h.ready(&p, 0, UL, S);
    let last = S + 260 * MS;
    h.ready(&p, 0, UL, last + 5 * S);
    assert_eq!(
        h.take_events()[2..4],
        [(st::CONNECTED, st::SHORT_DRX, last + 100 * MS), (st::SHORT_DRX, st::CONNECTED, last + 5 * S)]
    );
}
