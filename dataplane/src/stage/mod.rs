//! The impairment stages, one file each, all with one shape ([`Stage`]): take the profile's
//! immutable parameters ([`Impairment`]), the packet's per-pass state ([`Pkt`]) and the shared
//! context, and either pass the packet on or drop it with a reason; besides that per-packet
//! `enqueue` step a stage may act when a profile is installed, when a packet leaves, on the
//! loop's timer and on a reset (see [`Stage`]). Per-pd state lives in the
//! contract's registers (so the control plane reads and writes the same values the P4 program
//! would) or, for the rate queue's departure times, inside the stage.
//!
//! Order (contract "Stage semantics"): radio, loss, duplication, corruption, rate, delay, slot. A
//! duplicate runs corruption, rate and delay as a packet of its own (p4src: PASS_DUP), from the
//! ready time the radio gave the original. The radio stage takes the profile's radio parameters
//! ([`RadioParams`]) instead of its impairment, and runs only for profiles that have a radio.
pub mod bearer;
pub mod codel;
pub mod correlation;
pub mod corrupt;
pub mod delay;
pub mod duplicate;
pub mod loss;
pub mod onoff;
pub mod pie;
pub mod radio;
pub mod rate;
pub mod red;
pub mod slot;
pub mod trace;

use crate::contract::DropReason;
use crate::parse::IpHdr;
use crate::rng::Prng;
use crate::state::{Counters, Registers};
pub use crate::tables::{Impairment, RadioParams};

pub use bearer::{Bearers, Served};
pub use corrupt::Corrupt;
pub use delay::Delay;
pub use duplicate::Duplicate;
pub use loss::Loss;
pub use radio::{Radio, RadioEvent};
pub use rate::Rate;
pub use slot::Slot;

/// What every stage sees besides the packet.
pub struct Ctx<'a> {
    pub now: u64,
    pub pd: u32,
    pub rng: &'a mut Prng,
    pub regs: &'a Registers,
    pub counters: &'a Counters,
}

/// One packet's state through the stages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pkt {
    /// Frame length in bytes (what counters and the rate use).
    pub len: u32,
    /// This is the copy made by the duplication stage.
    pub is_copy: bool,
    /// Set by the duplication stage: make a copy.
    pub duplicate: bool,
    /// Set by the corruption stage: the bit (index from the frame start) to flip.
    pub flip_bit: Option<u32>,
    /// The packet's IP header (for ECN), from the parser.
    pub ip: Option<IpHdr>,
    /// Set by the AQM or the loss stage (netem's ecn): mark CE instead of dropping
    /// ([`Pkt::mark_ce`]).
    pub mark_ce: bool,
    /// The UE the packet belongs to (classifier), whose radio it uses.
    pub ue: u32,
    /// When the radio can carry the packet (arrival time unless the radio stage delays it);
    /// the rate and delay stages start from here.
    pub ready: u64,
    pub departure: u64,
    pub release: u64,
    /// Set by the delay stage: the packet skipped the delay line (netem "reorder"), so it does
    /// not wait for a slot either.
    pub skipped_line: bool,
    /// Set by the rate stage: the packet waited behind another in its rate queue, so the virtual
    /// clock, not its arrival, set its departure. Its release may then be coalesced with others
    /// (release.rs, `--release-slack-us`); the slot stage clears it (slots open on time).
    pub coalescable: bool,
    /// Set by the rate stage: the packet's service time on its shaped link (its wire bytes at the
    /// link's rate). The automatic release slack coalesces only packets of links fast enough to
    /// serve a batch of them within the slack (release.rs `Slack`).
    pub service_ns: u64,
}

impl Pkt {
    pub fn new(len: u32, now: u64) -> Self {
        Pkt { len, ready: now, departure: now, release: now, ..Default::default() }
    }

    /// The duplicate of a packet that passed the radio, loss and duplication stages: it waits for
    /// the same radio.
    pub fn copy_of(&self, now: u64) -> Self {
        Pkt {
            len: self.len,
            is_copy: true,
            ue: self.ue,
            ip: self.ip,
            ready: self.ready.max(now),
            departure: now,
            release: now,
            ..Default::default()
        }
    }
}

/// The changes the stages decided for a frame, made when it is written out: CE first (the
/// AQM acted before corruption would be visible), then the corruption's bit flip.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Edits {
    pub flip_bit: Option<u32>,
    pub ce: Option<IpHdr>,
}

impl Edits {
    #[inline]
    pub fn apply(&self, frame: &mut [u8]) {
        if let Some(ip) = self.ce {
            ip.mark_ce(frame);
        }
        corrupt::flip(frame, self.flip_bit);
    }
}

impl Pkt {
    /// Marks the packet CE (written when the frame goes out, [`Edits`]) and counts the mark in
    /// `profile_ecn_mark`, once per pass as p4src's one-bit `ecn_marked`: a packet that the loss
    /// stage and then the AQM both mark is one mark. A copy starts unmarked (p4src's clone is
    /// the frame as it arrived).
    #[inline]
    pub fn mark_ce(&mut self, ctx: &Ctx) {
        if !self.mark_ce {
            self.mark_ce = true;
            ctx.counters.profile_ecn_mark.add(ctx.pd as usize, self.len as u64);
        }
    }

    #[inline]
    pub fn edits(&self) -> Edits {
        Edits { flip_bit: self.flip_bit, ce: if self.mark_ce { self.ip } else { None } }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Drop(DropReason),
    /// The packet waits in a bearer of a cell (stage 6a): the loop stores it and hands it to
    /// [`Impairments::hold`]; the stages after the rate run when the cell gives it the link
    /// ([`Impairments::serve`], [`Impairments::after_link`]).
    Held,
}

/// Every stage: the profile's parameters (`P`), the shared context, the packet. A stage implements
/// the steps it needs; the others are no-ops. The data-plane loop runs every stage through these
/// steps (via [`Impairments`]) and never calls a stage by name for them:
/// - `provision`: a profile entry with these parameters was installed for `pd` (a new table
///   snapshot): allocate per-pd state here, never per packet;
/// - `enqueue`: a packet arrives at the stage: pass it on (possibly with new times) or drop it;
/// - `dequeue`: a packet of `pd` leaves the pipeline (its release time came): queue bookkeeping;
/// - `tick`: the loop's timer, at least once per loop turn, for state that changes with time alone;
/// - `reset`: the control plane reset the registers: forget per-pd state kept inside the stage.
pub trait Stage<P = Impairment> {
    fn provision(&mut self, _pd: u32, _params: &P) {}
    fn enqueue(&mut self, params: &P, ctx: &mut Ctx, pkt: &mut Pkt) -> Verdict;
    fn dequeue(&mut self, _pd: u32, _now: u64, _regs: &Registers) {}
    fn tick(&mut self, _now: u64, _regs: &Registers) {}
    fn reset(&mut self) {}
}

/// The stages composed in contract order.
pub struct Impairments {
    pub radio: Radio,
    pub loss: Loss,
    pub duplicate: Duplicate,
    pub corrupt: Corrupt,
    pub rate: Rate,
    pub delay: Delay,
    pub bearers: Bearers,
    pub slot: Slot,
}

impl Impairments {
    pub fn new(pds: usize, max_queue: usize) -> Self {
        Impairments {
            radio: Radio::new(),
            loss: Loss,
            duplicate: Duplicate,
            corrupt: Corrupt,
            rate: Rate::new(pds, max_queue),
            delay: Delay,
            bearers: Bearers::new(pds, max_queue),
            slot: Slot,
        }
    }

    /// The stages after the radio (which takes [`RadioParams`]), in contract order.
    #[inline]
    fn after_radio(&mut self) -> [&mut dyn Stage; 6] {
        [&mut self.loss, &mut self.duplicate, &mut self.corrupt, &mut self.rate, &mut self.delay, &mut self.slot]
    }

    /// Runs a packet (original or copy) through the stages after the radio; the first drop ends
    /// it, and so does a cell's bearer holding it (Verdict::Held).
    pub fn run(&mut self, imp: &Impairment, ctx: &mut Ctx, pkt: &mut Pkt) -> Verdict {
        for s in self.after_radio() {
            match s.enqueue(imp, ctx, pkt) {
                Verdict::Pass => {}
                v => return v,
            }
        }
        Verdict::Pass
    }

    /// Room for packets in the handles below `handles` (`Pool::handles`: larger packet buffers
    /// were added).
    pub fn grow(&mut self, handles: usize) {
        self.bearers.grow(handles);
    }

    /// A packet the rate stage held (Verdict::Held), now in pool buffer `h`: into its bearer.
    pub fn hold(&mut self, pd: u32, imp: &Impairment, h: crate::pool::Handle, pkt: Pkt, regs: &Registers) {
        self.bearers.push(pd, imp, h, pkt, regs);
    }

    /// The cells' scheduling at `now`: the packets that got the link are appended to `out`, with
    /// their departure; run [`after_link`](Self::after_link) on each.
    #[inline]
    pub fn serve(&mut self, now: u64, regs: &Registers, imp_of: impl Fn(u32) -> Impairment, out: &mut Vec<Served>) {
        self.bearers.serve(now, regs, imp_of, out);
    }

    /// The stages after the rate (delay, slot), for a packet a cell gave the link.
    pub fn after_link(&mut self, imp: &Impairment, ctx: &mut Ctx, pkt: &mut Pkt) -> Verdict {
        for s in [&mut self.delay as &mut dyn Stage, &mut self.slot] {
            match s.enqueue(imp, ctx, pkt) {
                Verdict::Pass => {}
                v => return v,
            }
        }
        Verdict::Pass
    }

    /// When the cells next need [`serve`](Self::serve) (the loop sleeps no longer).
    pub fn next_event(&self, regs: &Registers) -> Option<u64> {
        self.bearers.next_event(regs)
    }

    /// Every stage's `provision` for one installed profile entry.
    pub fn provision(&mut self, pd: u32, imp: &Impairment) {
        for s in self.after_radio() {
            s.provision(pd, imp);
        }
        if bearer::is_cell(imp) {
            self.bearers.provision(pd);
        }
    }

    /// Every stage's `dequeue` for a packet of `pd` released at `now`.
    #[inline]
    pub fn dequeue(&mut self, pd: u32, now: u64, regs: &Registers) {
        for s in self.after_radio() {
            s.dequeue(pd, now, regs);
        }
        Stage::<RadioParams>::dequeue(&mut self.radio, pd, now, regs);
    }

    /// Every stage's `tick`.
    #[inline]
    pub fn tick(&mut self, now: u64, regs: &Registers) {
        for s in self.after_radio() {
            s.tick(now, regs);
        }
        Stage::<RadioParams>::tick(&mut self.radio, now, regs);
    }

    /// Every stage's `reset`.
    pub fn reset(&mut self) {
        for s in self.after_radio() {
            s.reset();
        }
        Stage::<RadioParams>::reset(&mut self.radio);
    }
}
