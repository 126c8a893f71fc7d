//! Rate stage: a virtual clock per pd and a finite, drop-tail queue, optionally managed by an AQM
//! (RED as a packet arrives, red.rs; PIE as it joins the queue, pie.rs; CoDel at its dequeue
//! instant, codel.rs). A profile with
//! bearers (`bearer_sched`) makes the pd a cell instead: the packet is checked against its UE's
//! bearer limits here and held (Verdict::Held) for the cell's scheduler (bearer.rs).
//!
//! `wire = max(0, len + overhead_bytes)` ([`wire_bytes`]; netem's overhead is signed);
//! `departure = max(ready, next_free_ns[pd]) + wire * q16 / 2^16`
//! (ready = arrival time unless the radio stage makes the packet wait; with netem's cells the
//! link time counts cells instead of wire bytes, [`service_ns`]);
//! `next_free_ns[pd] = departure`. The queue holds the admitted packets whose departure is still
//! ahead; `backlog_bytes`/`backlog_pkts` (registers) are its size, and a packet that would take
//! them past `queue_limit_bytes`/`queue_limit_pkts` is dropped (queue_full) without touching the
//! clock. Each pd keeps a ring of (departure, wire) so the backlog shrinks exactly at departure
//! times (p4src, bound to recirculation, does it up to one pass late).
//!
//! Rings are allocated when a profile entry with a rate is installed (the data plane calls
//! [`Rate::provision`] for every such pd when it sees a new snapshot), never per packet. Their
//! size is what the queue limits allow, capped by the packet pool (a queued packet holds a pool
//! buffer until it is released, so no more can ever be queued). A pd that gets a rate only through
//! the table's default action is provisioned on its first packet.
//!
//! With a trace (exact trace delivery, trace.rs) the trace's opportunities replace the clock: the
//! packet's dequeue instant is the opportunity of its first byte and its departure that of its
//! last; the limits and the AQM work as on the clock (Mahimahi's mm-link queues: drop-tail or
//! CoDel), and `next_free_ns` still records the last departure (RED's idle time, CoDel's "was it
//! queued at the last drop").
use std::collections::VecDeque;
use std::sync::atomic::Ordering::Relaxed;

use super::{bearer, codel, pie, red, trace, Ctx, Impairment, Pkt, Stage, Verdict};
use crate::contract::{DropReason, AQM_CODEL, AQM_PIE, AQM_RED};
use crate::state::Registers;

const MIN_FRAME: u32 = 14;

/// A packet's wire bytes: the frame plus netem's PACKETOVERHEAD, which may be negative (-14
/// strips the Ethernet header). netem adds it to a u64 length, so a frame shorter than -overhead
/// would wrap to an enormous link time there; here it has 0 wire bytes (p4src `wire_bytes`).
#[inline]
pub fn wire_bytes(frame: u32, overhead: i16) -> u32 {
    frame.saturating_add_signed(overhead as i32)
}

/// The bytes one cell takes on the link: cell_bytes + cell_overhead_bytes (netem's CELLOVERHEAD,
/// which may be negative), never below 0 (p4src `cell_link_bytes`; the control plane refuses a
/// cell of fewer than 1 byte).
#[inline]
fn cell_link_bytes(imp: &Impairment) -> u64 {
    (imp.cell_bytes as u64).saturating_add_signed(imp.cell_overhead_bytes as i64)
}

/// The link time of a packet of `wire` bytes ([`wire_bytes`]) at the profile's rate:
/// `wire * q16 / 2^16`, or with netem's cell framing (`cell_bytes != 0`) the same on
/// `ceil(wire / cell_bytes) * cell_link_bytes` bytes (Linux's `packet_time_ns`); the queue
/// limits and the backlog still count `wire`. p4src takes the quotient from `cell_recip` without
/// a division; the two agree for every wire below 2^32 (tests/unit/test_cell_profiles.py runs
/// p4src's steps).
#[inline]
pub fn service_ns(wire: u64, imp: &Impairment) -> u64 {
    let bytes = match imp.cell_bytes as u64 {
        0 => wire,
        cell => wire.div_ceil(cell) * cell_link_bytes(imp),
    };
    ((bytes as u128 * imp.ns_per_byte_q16 as u128) >> 16) as u64
}

#[inline]
fn pie_params(imp: &Impairment) -> pie::Params {
    pie::Params {
        target_ns: imp.pie_target_ns as u64,
        tupdate_ns: imp.pie_tupdate_ns as u64,
        alpha: imp.pie_alpha as u64,
        beta: imp.pie_beta as u64,
        max_burst_ns: imp.pie_max_burst_ns as u64,
        ecn: imp.ecn,
    }
}

#[inline]
fn red_params(imp: &Impairment) -> red::Params {
    red::Params {
        min_bytes: imp.red_min_bytes,
        max_bytes: imp.red_max_bytes,
        max_prob: imp.red_max_prob,
        wlog: imp.red_wlog,
        span_bytes: imp.red_span_bytes,
        gentle: imp.red_gentle,
        idle_q48: imp.red_idle_q48,
        ecn: imp.ecn,
    }
}

pub struct Rate {
    queues: Vec<VecDeque<(u64, u32)>>,
    max_queue: usize,
}

impl Rate {
    pub fn new(pds: usize, max_queue: usize) -> Self {
        Rate { queues: (0..pds).map(|_| VecDeque::new()).collect(), max_queue: max_queue.max(1) }
    }

    /// The most packets the queue of a profile can hold.
    pub fn capacity_for(&self, imp: &Impairment) -> usize {
        let mut cap = self.max_queue as u64;
        if imp.queue_limit_pkts != 0 {
            cap = cap.min(imp.queue_limit_pkts as u64);
        }
        if imp.queue_limit_bytes != 0 {
            // The smallest frame's wire bytes; 0 with a large negative overhead, when the byte
            // limit bounds nothing.
            match wire_bytes(MIN_FRAME, imp.overhead_bytes) {
                0 => {}
                w => cap = cap.min(imp.queue_limit_bytes as u64 / w as u64 + 1),
            }
        }
        cap as usize
    }

    /// Removes the packets that have departed by `now` from pd's queue and backlog registers.
    #[inline]
    pub fn drain(&mut self, pd: u32, now: u64, regs: &Registers) {
        let Some(q) = self.queues.get_mut(pd as usize) else { return };
        let Some(&(first, _)) = q.front() else { return };
        if first > now {
            return;
        }
        let (bcell, pcell) = (&regs.backlog_bytes[pd as usize], &regs.backlog_pkts[pd as usize]);
        let (mut bytes, mut pkts) = (bcell.load(Relaxed), pcell.load(Relaxed));
        while let Some(&(dep, wire)) = q.front() {
            if dep > now {
                break;
            }
            q.pop_front();
            // Saturate: the controller may have reset the registers meanwhile.
            bytes = bytes.saturating_sub(wire);
            pkts = pkts.saturating_sub(1);
        }
        bcell.store(bytes, Relaxed);
        pcell.store(pkts, Relaxed);
    }

    pub fn queued(&self, pd: u32) -> usize {
        self.queues.get(pd as usize).map_or(0, |q| q.len())
    }
}

impl Stage for Rate {
    /// Makes sure pd's ring can hold what `imp` allows (allocates only when it must grow).
    fn provision(&mut self, pd: u32, imp: &Impairment) {
        if (!imp.has_rate() && !imp.has_trace()) || bearer::is_cell(imp) {
            return;
        }
        let cap = self.capacity_for(imp);
        if let Some(q) = self.queues.get_mut(pd as usize) {
            if q.capacity() < cap {
                q.reserve_exact(cap - q.len());
            }
        }
    }

    /// Keeps the backlog registers exact when no new packet of this pd arrives.
    #[inline]
    fn dequeue(&mut self, pd: u32, now: u64, regs: &Registers) {
        self.drain(pd, now, regs);
    }

    /// Forgets every queued departure (after a control-plane reset of the registers).
    fn reset(&mut self) {
        for q in &mut self.queues {
            q.clear();
        }
    }

    #[inline]
    fn enqueue(&mut self, imp: &Impairment, ctx: &mut Ctx, pkt: &mut Pkt) -> Verdict {
        // A packet enters the rate queue when the radio can carry it (its ready time).
        pkt.departure = pkt.ready;
        if !imp.has_rate() && !imp.has_trace() {
            return Verdict::Pass;
        }
        let pd = ctx.pd as usize;
        let wire = wire_bytes(pkt.len, imp.overhead_bytes) as u64;
        let regs = ctx.regs;
        if bearer::is_cell(imp) {
            // A cell: the packet waits in its UE's bearer (bearer.rs); the loop stores it and
            // the cell's scheduler gives it the link later. Only the bearer's own limits apply.
            let b = &regs.bearers[bearer::bearer_index(pkt.ue, ctx.pd, regs.bearers.len())];
            if !bearer::admits(imp, b, wire) {
                return Verdict::Drop(DropReason::QueueFull);
            }
            return Verdict::Held;
        }
        self.drain(ctx.pd, ctx.now, ctx.regs);
        let bytes = regs.backlog_bytes[pd].load(Relaxed) as u64;
        let pkts = regs.backlog_pkts[pd].load(Relaxed);
        let bytes_full = imp.queue_limit_bytes != 0 && bytes + wire > imp.queue_limit_bytes as u64;
        let pkts_full = imp.queue_limit_pkts != 0 && pkts >= imp.queue_limit_pkts;
        let free_at = regs.next_free_ns[pd].load(Relaxed);
        let ect = pkt.ip.is_some_and(|ip| ip.ect());
        let mut decision = codel::Decision::Pass;
        if imp.aqm == AQM_RED {
            // RED as the packet arrives, before the limits (Linux: sch_red before its child fifo);
            // the link has been idle since free_at if it is free.
            let cell = &regs.red[pd];
            let mut vars = cell.load();
            let idle = (free_at <= pkt.ready).then(|| pkt.ready - free_at);
            decision = red::enqueue(&mut vars, &red_params(imp), bytes as u32, idle, ect, ctx.rng);
            cell.store(&vars);
            if decision == codel::Decision::Drop {
                // Dropped before the queue: no link time, no backlog.
                return Verdict::Drop(DropReason::AqmDrop);
            }
        } else if imp.aqm == AQM_PIE {
            // PIE as the packet joins the queue, once the updates due by then have run (pie.rs),
            // and after the limits (Linux's order; any drop restarts its de-randomisation).
            let cell = &regs.pie[pd];
            let mut vars = cell.load();
            let params = pie_params(imp);
            pie::catch_up(&mut vars, &params, pkt.ready, free_at);
            if bytes_full || pkts_full {
                vars.accu_prob = 0;
                cell.store(&vars);
                return Verdict::Drop(DropReason::QueueFull);
            }
            decision = pie::enqueue(&mut vars, &params, bytes, ect, ctx.rng);
            cell.store(&vars);
            if decision == codel::Decision::Drop {
                return Verdict::Drop(DropReason::AqmDrop);
            }
        }
        if bytes_full || pkts_full {
            return Verdict::Drop(DropReason::QueueFull);
        }
        // When the packet takes the link (its dequeue instant, `begin`) and leaves it: on the
        // rate's clock, or at the trace's opportunities (exact trace delivery, trace.rs), whose
        // new state is stored only if the packet is admitted.
        let (begin, departure, service, trace_vars) = if imp.has_trace() {
            let mut v = regs.trace[pd].load();
            let slot = trace::schedule(imp, regs, &mut v, pkt.ready, pkt.len);
            (slot.begin, slot.departure, 0, Some(v))
        } else {
            let begin = pkt.ready.max(free_at);
            let service = service_ns(wire, imp);
            (begin, begin.saturating_add(service), service, None)
        };
        if imp.aqm == AQM_CODEL {
            // CoDel at the packet's dequeue instant (`begin`); see codel.rs.
            let params =
                codel::Params { target_ns: imp.codel_target_ns, interval_ns: imp.codel_interval_ns, ecn: imp.ecn };
            let cell = &regs.codel[pd];
            let mut vars = cell.load();
            // "Queued when the last packet was dropped": on the clock that drop's instant was
            // free_at. On a trace it may be a later opportunity; a packet that arrived in between
            // has nothing ahead of it (everything left by free_at), so CoDel passes it and clears
            // first_above whichever way it counts, and decides the packets after it alike.
            decision = codel::dequeue(&mut vars, &params, begin, begin - pkt.ready, bytes, pkt.ready <= free_at, ect);
            cell.store(&vars);
            if decision == codel::Decision::Drop {
                // Dropped at dequeue: no link time, no backlog.
                return Verdict::Drop(DropReason::AqmDrop);
            }
        }
        if decision == codel::Decision::Mark {
            pkt.mark_ce(ctx);
        }
        let verdict = self.admit(imp, ctx, pkt, departure, wire, bytes, pkts);
        if verdict == Verdict::Pass {
            regs.next_free_ns[pd].store(departure, Relaxed);
            if let Some(v) = trace_vars {
                regs.trace[pd].store(&v);
            } else {
                // Behind another packet: its departure is the one before it plus its service, a
                // schedule the virtual clock keeps whenever the frame is handed to the kernel.
                pkt.coalescable = free_at > pkt.ready;
                pkt.service_ns = service;
            }
        }
        verdict
    }
}

impl Rate {
    /// Queues an admitted packet until `departure` (backlog registers and the ring of departures).
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn admit(
        &mut self,
        imp: &Impairment,
        ctx: &mut Ctx,
        pkt: &mut Pkt,
        departure: u64,
        wire: u64,
        bytes: u64,
        pkts: u32,
    ) -> Verdict {
        let pd = ctx.pd as usize;
        let regs = ctx.regs;
        if departure > ctx.now {
            if self.queues[pd].capacity() == 0 {
                // Default-action rate: first packet of this pd (see module docs).
                let cap = self.capacity_for(imp);
                self.queues[pd].reserve_exact(cap);
            }
            let q = &mut self.queues[pd];
            if q.len() == q.capacity() {
                // Only reachable if the pool is larger than the ring thought; never grow here.
                return Verdict::Drop(DropReason::QueueFull);
            }
            q.push_back((departure, wire as u32));
            regs.backlog_bytes[pd].store((bytes + wire).min(u32::MAX as u64) as u32, Relaxed);
            regs.backlog_pkts[pd].store(pkts.saturating_add(1), Relaxed);
        }
        pkt.departure = departure;
        Verdict::Pass
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Prng;
    use crate::state::{Capacities, Counters};

    fn setup() -> (Registers, Counters, Prng) {
        let caps = Capacities { profiles: 4, ..Default::default() };
        (Registers::new(&caps, vec![0; 16384].into(), 1), Counters::new(&caps), Prng::new(1))
    }

    /// 10 Mbit/s = 800 ns/byte.
    fn q16_for_bps(bps: f64) -> u64 {
        (8e9 / bps * 65536.0).round() as u64
    }

    /// netem's cells: tc-netem(8)'s `rate 5kbit 20 100 5` sends a 100-byte frame as 120 bytes in
    /// 2 cells of 105 (336 ms at 5 kbit/s), ATM's `rate 1mbit 0 48 5` a 100-byte frame as 3 cells
    /// of 53 (1272 us) and a 96-byte one as exactly 2 (848 us); without cells, the wire bytes.
    #[test]
    fn cells_count_whole_cells_with_their_overhead() {
        let cells = |bps: f64, overhead: i16, cell: u16, cell_overhead: i16| Impairment {
            ns_per_byte_q16: q16_for_bps(bps),
            overhead_bytes: overhead,
            cell_bytes: cell,
            cell_overhead_bytes: cell_overhead,
            ..Default::default()
        };
        let man = cells(5e3, 20, 100, 5);
        assert_eq!(service_ns(100 + 20, &man), 336_000_000);
        let atm = cells(1e6, 0, 48, 5);
        assert_eq!(service_ns(100, &atm), 1_272_000);
        assert_eq!(service_ns(96, &atm), 848_000);
        assert_eq!(service_ns(97, &atm), 1_272_000);
        assert_eq!(service_ns(100, &cells(1e6, 0, 0, 5)), 800_000);
    }

    /// (frame, overhead_bytes, cell_bytes, cell_overhead_bytes, wire bytes, bytes on the link), the
    /// overheads as their params' 16 bits (two's complement): tests/contract transcribes p4src's
    /// `wire_bytes`, `cell_link_bytes` and `service_ns` and must get the same on each row.
    pub const WIRE_VECTORS: [(u32, u16, u16, u16, u32, u64); 17] = [
        (1514, 0, 0, 0, 1514, 1514),
        (1514, 65522, 0, 0, 1500, 1500),
        (60, 24, 0, 0, 84, 84),
        (40, 65476, 0, 0, 0, 0),
        (60, 65476, 0, 0, 0, 0),
        (61, 65476, 0, 0, 1, 1),
        (1514, 32768, 0, 0, 0, 0),
        (1514, 32767, 0, 0, 34281, 34281),
        (100, 0, 53, 65531, 100, 96),
        (100, 20, 100, 5, 120, 210),
        (100, 65522, 48, 5, 86, 106),
        (1514, 0, 48, 65488, 1514, 0),
        (1514, 0, 48, 65436, 1514, 0),
        (30, 65522, 1, 65535, 16, 0),
        (65535, 32767, 65535, 32767, 98302, 196604),
        (96, 0, 48, 5, 96, 106),
        (97, 0, 48, 5, 97, 159),
    ];

    /// netem's negative overheads: PACKETOVERHEAD -14 strips the Ethernet header, a frame shorter
    /// than -overhead has no wire bytes (netem would wrap), CELLOVERHEAD -5 makes 53-byte cells
    /// carry 48 bytes, and a cell of 0 or fewer bytes (only a raw write) takes no link time.
    #[test]
    fn negative_overheads_strip_bytes() {
        for (frame, overhead, cell, cell_overhead, wire, link) in WIRE_VECTORS {
            let imp = Impairment {
                ns_per_byte_q16: 1 << 16, // 1 ns per byte: the link time is the byte count
                overhead_bytes: overhead as i16,
                cell_bytes: cell,
                cell_overhead_bytes: cell_overhead as i16,
                cell_recip: if cell == 0 { 0 } else { (1u64 << 32) / cell as u64 },
                ..Default::default()
            };
            assert_eq!(wire_bytes(frame, imp.overhead_bytes), wire, "{frame} {overhead}");
            assert_eq!(service_ns(wire as u64, &imp), link, "{frame} {overhead} {cell} {cell_overhead}");
        }
        // On the queue: 1514-byte frames with -14 take 1500 bytes' time (1.2 ms at 10 Mbit/s)
        // and the backlog counts 1500 bytes each.
        let (regs, counters, mut rng) = setup();
        let mut rate = Rate::new(8, 1024);
        let imp = Impairment { ns_per_byte_q16: q16_for_bps(10e6), overhead_bytes: -14, ..Default::default() };
        rate.provision(2, &imp);
        let now = 1_000_000;
        for k in 1..=2 {
            let mut ctx = Ctx { now, pd: 2, rng: &mut rng, regs: &regs, counters: &counters };
            let mut p = Pkt::new(1514, now);
            assert_eq!(rate.enqueue(&imp, &mut ctx, &mut p), Verdict::Pass);
            assert_eq!(p.departure, now + k * 1_200_000);
        }
        assert_eq!(regs.backlog_bytes[2].load(Relaxed), 3000);
        // A byte limit with wire bytes of 0 (overhead below -MIN_FRAME) bounds nothing.
        let zero = Impairment { queue_limit_bytes: 100, overhead_bytes: i16::MIN, ..imp };
        assert_eq!(rate.capacity_for(&zero), rate.capacity_for(&Impairment { queue_limit_bytes: 0, ..zero }));
    }

    /// p4src's steps (rate.p4 `service_ns`: the quotient from cell_recip, one correction, one
    /// rounding up) give the switch's cells for every frame size and cell size tried.
    #[test]
    fn p4src_cell_arithmetic_is_the_switchs() {
        for cell in [1u64, 2, 3, 7, 48, 53, 100, 1499, 1500, 9000, 65535] {
            let recip = (1u64 << 32) / cell;
            for wire in (0u64..20_000).chain([65_535 + 65_535, u32::MAX as u64]) {
                let mut q = (wire * recip) >> 32;
                if wire - q * cell >= cell {
                    q += 1;
                }
                if wire > q * cell {
                    q += 1;
                }
                assert_eq!(q, wire.div_ceil(cell), "wire {wire} cell {cell}");
            }
        }
    }

    /// PIE under a sender that does not back off (1500-byte frames at twice 10 Mbit/s, a
    /// 1000-packet queue): the drop share settles near 1/2 and the queue delay packets see near
    /// the 15 ms target, where tail drop holds the whole queue (1.2 s). Linux's defaults.
    #[test]
    fn pie_holds_an_overloaded_queue_near_its_target() {
        let (regs, counters, mut rng) = setup();
        let mut rate = Rate::new(8, 4096);
        let imp = Impairment {
            ns_per_byte_q16: q16_for_bps(10e6),
            queue_limit_pkts: 1000,
            aqm: AQM_PIE,
            pie_target_ns: 15_000_000,
            pie_tupdate_ns: 15_000_000,
            pie_alpha: 9007199,
            pie_beta: 90071992,
            pie_max_burst_ns: 150_000_000,
            ..Default::default()
        };
        rate.provision(2, &imp);
        let (gap, n) = (600_000u64, 100_000u64); // 60 s
        let (mut delays, mut drops, mut full) = (Vec::new(), 0u64, 0u64);
        for k in 0..n {
            let now = 1_000_000 + k * gap;
            let mut ctx = Ctx { now, pd: 2, rng: &mut rng, regs: &regs, counters: &counters };
            let mut p = Pkt::new(1500, now);
            match rate.enqueue(&imp, &mut ctx, &mut p) {
                // The queue delay: the wait before its 1.2 ms on the link.
                Verdict::Pass if k >= n / 4 => delays.push(p.departure - now - 1_200_000),
                Verdict::Pass => {}
                Verdict::Drop(DropReason::AqmDrop) => drops += (k >= n / 4) as u64,
                Verdict::Drop(DropReason::QueueFull) => full += 1,
                v => panic!("{v:?}"),
            }
        }
        delays.sort_unstable();
        let median_ms = delays[delays.len() / 2] as f64 / 1e6;
        let share = drops as f64 / (n - n / 4) as f64;
        assert!((10.0..20.0).contains(&median_ms), "median queue delay {median_ms} ms");
        eprintln!("PIE at 2x overload: median queue delay {median_ms:.2} ms, drop share {share:.4}");
        assert!((share - 0.5).abs() < 0.05, "drop share {share}");
        assert_eq!(full, 0, "PIE, not the limit, drops");
        assert!(regs.pie[2].load().prob > 0);
    }

    #[test]
    fn departures_follow_the_virtual_clock() {
        let (regs, counters, mut rng) = setup();
        let mut rate = Rate::new(8, 1024);
        let imp = Impairment { ns_per_byte_q16: q16_for_bps(10e6), overhead_bytes: 24, ..Default::default() };
        rate.provision(2, &imp);
        let now = 1_000_000;
        let mut deps = Vec::new();
        for _ in 0..3 {
            let mut ctx = Ctx { now, pd: 2, rng: &mut rng, regs: &regs, counters: &counters };
            let mut p = Pkt::new(1476, now);
            assert_eq!(rate.enqueue(&imp, &mut ctx, &mut p), Verdict::Pass);
            deps.push(p.departure);
        }
        // (1476 + 24) bytes * 800 ns = 1.2 ms each, back to back.
        assert_eq!(deps, vec![now + 1_200_000, now + 2_400_000, now + 3_600_000]);
        assert_eq!(regs.backlog_pkts[2].load(Relaxed), 3);
        assert_eq!(regs.backlog_bytes[2].load(Relaxed), 4500);
        rate.drain(2, now + 2_400_000, &regs);
        assert_eq!((regs.backlog_pkts[2].load(Relaxed), regs.backlog_bytes[2].load(Relaxed)), (1, 1500));
        rate.drain(2, now + 10_000_000, &regs);
        assert_eq!(regs.backlog_pkts[2].load(Relaxed), 0);
    }

    #[test]
    fn only_packets_behind_another_are_coalescable() {
        let (regs, counters, mut rng) = setup();
        let mut rate = Rate::new(8, 1024);
        let imp = Impairment { ns_per_byte_q16: q16_for_bps(10e6), ..Default::default() };
        rate.provision(1, &imp);
        let mut send = |at: u64| {
            let mut ctx = Ctx { now: at, pd: 1, rng: &mut rng, regs: &regs, counters: &counters };
            let mut p = Pkt::new(1000, at);
            assert_eq!(rate.enqueue(&imp, &mut ctx, &mut p), Verdict::Pass);
            assert_eq!(p.service_ns, 800_000, "its service on the link, for the automatic release slack");
            (p.departure, p.coalescable)
        };
        // 1000 bytes at 10 Mbit/s: 800 us each. An idle link: departure from the arrival, exact.
        assert_eq!(send(1_000_000), (1_800_000, false));
        // Arrives while the first is still on the link: queued behind it, coalescable.
        assert_eq!(send(1_100_000), (2_600_000, true));
        assert_eq!(send(1_200_000), (3_400_000, true));
        // After the queue drained: exact again.
        assert_eq!(send(5_000_000), (5_800_000, false));
        // No rate: the stage does not set it.
        let mut ctx = Ctx { now: 0, pd: 2, rng: &mut rng, regs: &regs, counters: &counters };
        let mut p = Pkt::new(1000, 0);
        assert_eq!(rate.enqueue(&Impairment::default(), &mut ctx, &mut p), Verdict::Pass);
        assert!(!p.coalescable);
    }

    #[test]
    fn drop_tail_on_packets_and_bytes() {
        let (regs, counters, mut rng) = setup();
        let mut rate = Rate::new(8, 1024);
        let imp = Impairment { ns_per_byte_q16: q16_for_bps(1e6), queue_limit_pkts: 5, ..Default::default() };
        rate.provision(0, &imp);
        let mut verdicts = Vec::new();
        for _ in 0..8 {
            let mut ctx = Ctx { now: 0, pd: 0, rng: &mut rng, regs: &regs, counters: &counters };
            verdicts.push(rate.enqueue(&imp, &mut ctx, &mut Pkt::new(1000, 0)));
        }
        assert_eq!(verdicts.iter().filter(|v| **v == Verdict::Pass).count(), 5);
        assert_eq!(verdicts[5], Verdict::Drop(DropReason::QueueFull));
        let free_after = regs.next_free_ns[0].load(Relaxed);
        assert_eq!(free_after, 5 * 8_000_000, "drops do not advance the clock");

        let imp_b = Impairment { ns_per_byte_q16: q16_for_bps(1e6), queue_limit_bytes: 2500, ..Default::default() };
        rate.provision(1, &imp_b);
        let passed = (0..5)
            .filter(|_| {
                let mut ctx = Ctx { now: 0, pd: 1, rng: &mut rng, regs: &regs, counters: &counters };
                rate.enqueue(&imp_b, &mut ctx, &mut Pkt::new(1000, 0)) == Verdict::Pass
            })
            .count();
        assert_eq!(passed, 2);
    }

    #[test]
    fn long_run_goodput_matches_rate() {
        // Offered load 2x the rate for 1 s of virtual time: departures pace at exactly the rate.
        let (regs, counters, mut rng) = setup();
        let mut rate = Rate::new(8, 100_000);
        for bps in [20e3, 1e6, 100e6, 1e9] {
            let imp = Impairment { ns_per_byte_q16: q16_for_bps(bps), ..Default::default() };
            rate.reset();
            regs.reset();
            rate.provision(3, &imp);
            let gap = (1500.0 * 8.0 / (2.0 * bps) * 1e9) as u64;
            let n = ((2.0 * bps / 12000.0) as u64).clamp(4, 50_000);
            let mut last = 0;
            for i in 0..n {
                let now = i * gap;
                let mut ctx = Ctx { now, pd: 3, rng: &mut rng, regs: &regs, counters: &counters };
                let mut p = Pkt::new(1500, now);
                rate.enqueue(&imp, &mut ctx, &mut p);
                last = p.departure;
            }
            let got = (n * 1500 * 8) as f64 / (last as f64 / 1e9);
            assert!((got - bps).abs() / bps < 0.01, "{bps}: got {got}");
        }
    }

    /// CoDel's drop schedule on a scripted arrival pattern, against drop times derived from RFC
    /// 8289's pseudocode with Linux's arithmetic (include/net/codel_impl.h: count, the Newton step
    /// of rec_inv_sqrt in 16 bits, control_law = t + interval * rec_inv_sqrt >> 32) run at the real
    /// dequeue instants of a FIFO, with Linux's backlog test (bytes left behind the packet):
    /// bench/codel_reference.py replays it step by step; the first drops by hand below.
    /// 1500-byte packets on 10 Mbit/s (1.2 ms each); target 5 ms, interval 100 ms. Phase A: one
    /// packet per ms for 400 ms (12 Mbit/s: the sojourn grows 0.2 ms per packet), then one per
    /// 3 ms to 697 ms (4 Mbit/s: the queue drains with packets still arriving behind), silence, and
    /// phase B: one per ms from 900 ms for 300 ms.
    /// - A: packet i starts at 1.2 i ms; i = 25 (t = 30 ms) is the first at >= 5 ms of sojourn:
    ///   first_above = 130 ms. The first dequeue after it, 130.8 ms (i = 109), is dropped: count 1,
    ///   rec_inv_sqrt 0xFFFF, drop_next = 130.8 ms + 100 ms * 0xFFFF0000 / 2^32 = 230.798474 ms.
    /// - The drop takes no link time: packet 110 starts at 130.8 ms, then every 1.2 ms; the first at
    ///   or after drop_next is 231.6 ms (packet 194): count 2, Newton step from 0xFFFF gives 32769
    ///   (x (3 - 2 x^2) / 2 from 1: 0.5), drop_next = 230.798474 + 50.001525 = 280.799999 ms.
    /// - From 231.6 ms every 1.2 ms: 280.8 ms (packet 236), 1 ns after drop_next: count 3,
    ///   rec_inv_sqrt 36864 (0.5625), drop_next = 280.799999 + 56.25 = 337.049999 ms -> 337.2 ms
    ///   (packet 284). (With the RFC's exact 1/sqrt(count) the third drop would be at 302.4 ms:
    ///   Linux's first Newton steps are rough, and the switch follows Linux.)
    /// - B re-enters dropping at 1030.8 ms (first_above 1030 ms, as in A) less than 16 intervals
    ///   after A's last drop_next: count restarts at count - lastcount = 8 - 1 = 7, not 1, so B's
    ///   drops come faster (38.4 ms apart at first, not 100).
    ///
    /// Linux keeps time in 1.024 us units, the switch in ns, so a drop_next within a microsecond of
    /// a dequeue instant could fall on the other side in Linux (280.8 ms above is such a case).
    /// Where the switch departs from Linux (codel.rs): it judges the backlog by the bytes queued
    /// *ahead* of the packet, known when it arrives, not those left behind it at its dequeue, so at
    /// the end of a burst (no arrivals behind) it may drop a packet Linux would pass. Replaying
    /// phase A without its 4 Mbit/s tail: Linux's last drop is 430.8 ms; the switch also drops
    /// packet 398 at 470.4 ms (1500 bytes behind it), and B then restarts at count 6, not 5.
    #[test]
    fn codel_drop_schedule_matches_the_rfc_pseudocode_with_linux_arithmetic() {
        const MS: u64 = 1_000_000;
        let (regs, counters, mut rng) = setup();
        let mut rate = Rate::new(8, 4096);
        let imp = Impairment {
            ns_per_byte_q16: 800 << 16,
            aqm: crate::contract::AQM_CODEL,
            codel_target_ns: 5 * MS,
            codel_interval_ns: 100 * MS,
            ..Default::default()
        };
        rate.provision(1, &imp);
        let arrivals = (0..400)
            .map(|i| i * MS)
            .chain((1..100).map(|i| 400 * MS + i * 3 * MS))
            .chain((0..300).map(|i| 900 * MS + i * MS));
        let mut drops = Vec::new();
        for now in arrivals {
            // The packet's dequeue instant: the link frees (a drop does not move it) or it arrives.
            let begin = regs.next_free_ns[1].load(Relaxed).max(now);
            let mut ctx = Ctx { now, pd: 1, rng: &mut rng, regs: &regs, counters: &counters };
            match rate.enqueue(&imp, &mut ctx, &mut Pkt::new(1500, now)) {
                Verdict::Drop(DropReason::AqmDrop) => drops.push((begin, now / MS)),
                Verdict::Pass => {}
                v => panic!("{v:?} at {now}"),
            }
        }
        // (dequeue instant in ns, arrival in ms) of each dropped packet.
        let want = [
            (130_800_000, 109),
            (231_600_000, 194),
            (280_800_000, 236),
            (337_200_000, 284),
            (386_400_000, 326),
            (430_800_000, 364),
            (470_400_000, 398),
            (508_800_000, 496),
            (1_030_800_000, 1009),
            (1_069_200_000, 1042),
            (1_104_000_000, 1072),
            (1_137_600_000, 1101),
            (1_168_800_000, 1128),
            (1_198_800_000, 1154),
            (1_227_600_000, 1179),
        ];
        assert_eq!(drops, want);
        let v = regs.codel[1].load();
        // A's 8 drops leave count 8, lastcount 1; B restarts at 8 - 1 = 7 and drops 6 more.
        assert_eq!((v.count, v.lastcount), (13, 7), "{v:?}");
    }

    /// 5 % more offered than a 10 Mbit/s link carries, 20 s of virtual time, 1000-packet queue:
    /// tail drop lets the queue grow toward its limit (0.5 s of sojourn and more); CoDel drops at the
    /// dequeue instants until the sojourn settles near its 5 ms target.
    #[test]
    fn codel_keeps_the_sojourn_near_target_where_tail_drop_stands() {
        let (regs, counters, mut rng) = setup();
        let mut rate = Rate::new(8, 4096);
        let q16 = q16_for_bps(10e6);
        let tail = Impairment { ns_per_byte_q16: q16, queue_limit_pkts: 1000, ..Default::default() };
        let codel = Impairment {
            aqm: crate::contract::AQM_CODEL,
            codel_target_ns: 5_000_000,
            codel_interval_ns: 100_000_000,
            ..tail
        };
        let gap = (1500.0 * 8.0 / 10.5e6 * 1e9) as u64; // 10.5 Mbit/s offered
        let mut p50 = Vec::new();
        for (pd, imp) in [(0u32, tail), (1, codel)] {
            rate.provision(pd, &imp);
            let (mut sojourns, mut aqm_drops) = (Vec::new(), 0);
            for i in 0..(20_000_000_000 / gap) {
                let now = i * gap;
                let mut ctx = Ctx { now, pd, rng: &mut rng, regs: &regs, counters: &counters };
                let mut p = Pkt::new(1500, now);
                match rate.enqueue(&imp, &mut ctx, &mut p) {
                    Verdict::Pass if now > 10_000_000_000 => sojourns.push(p.departure - 1_200_000 - now),
                    Verdict::Drop(DropReason::AqmDrop) => aqm_drops += 1,
                    _ => {}
                }
            }
            sojourns.sort();
            p50.push(sojourns[sojourns.len() / 2]);
            assert_eq!(aqm_drops > 0, pd == 1, "pd {pd}: {aqm_drops} AQM drops");
        }
        assert!(p50[0] > 500_000_000, "tail drop p50 sojourn {} ns", p50[0]);
        assert!((2_000_000..20_000_000).contains(&p50[1]), "CoDel p50 sojourn {} ns", p50[1]);
    }

    /// A trace of one opportunity every `period_ms` loaded at cell 0 (its index at 0..), and CoDel
    /// with RFC 8289's defaults on its 1000-packet queue.
    fn one_opportunity_trace(regs: &Registers, period_ms: u32) -> Impairment {
        regs.trace_opportunity_ms[0].store(period_ms, Relaxed);
        for m in 0..=period_ms as usize {
            regs.trace_first_at[m].store(0, Relaxed);
        }
        Impairment {
            trace_len: 1,
            trace_period_ms: period_ms,
            trace_period_recip: ((1u128 << 64) / (period_ms as u128 * 1_000_000)) as u64,
            queue_limit_pkts: 1000,
            aqm: crate::contract::AQM_CODEL,
            codel_target_ns: 5_000_000,
            codel_interval_ns: 100_000_000,
            ..Default::default()
        }
    }

    /// Mahimahi's `mm-link` with `--uplink-queue=codel`: a trace with one 1504-byte opportunity
    /// every millisecond (12 Mbit/s of 1514-byte frames) offered 5 % more, 20 s, 1000 packets.
    /// Tail drop stands near the limit; CoDel holds the sojourn to its first opportunity near its
    /// target; a packet CoDel drops uses no opportunity (the next admitted one takes it).
    #[test]
    fn codel_manages_a_trace_queue_and_its_drops_use_no_opportunity() {
        let (regs, counters, mut rng) = setup();
        let codel = one_opportunity_trace(&regs, 1);
        let tail = Impairment { aqm: 0, ..codel };
        let mut rate = Rate::new(8, 4096);
        const T0: u64 = 1_000_000_000;
        let gap = 1_000_000 * 100 / 105;
        let mut p50 = Vec::new();
        for (pd, imp) in [(0u32, tail), (1, codel)] {
            rate.provision(pd, &imp);
            let (mut sojourns, mut dropped, mut last) = (Vec::new(), Vec::new(), 0u64);
            for i in 0..(20_000_000_000 / gap) {
                let now = T0 + i * gap;
                let mut ctx = Ctx { now, pd, rng: &mut rng, regs: &regs, counters: &counters };
                let mut p = Pkt::new(1514, now);
                match rate.enqueue(&imp, &mut ctx, &mut p) {
                    Verdict::Pass => {
                        if now < last {
                            // Queued behind the last admitted packet: the very next opportunity.
                            assert_eq!(p.departure, last + 1_000_000, "pd {pd} packet {i}");
                        }
                        last = p.departure;
                        if now > T0 + 10_000_000_000 {
                            sojourns.push(p.departure - now);
                        }
                    }
                    Verdict::Drop(DropReason::AqmDrop) => dropped.push(i),
                    _ => {}
                }
            }
            sojourns.sort();
            p50.push(sojourns[sojourns.len() / 2]);
            if pd == 1 {
                // Mahimahi's link served by CoDel's dequeue, step by step (bench/codel_reference.py
                // replay_trace, on these arrivals): 992 drops, the first sixteen of these packets.
                let first = [185, 286, 337, 395, 445, 490, 531, 570, 606, 640, 672, 704, 733, 762, 790, 816];
                assert_eq!(dropped[..16], first, "CoDel's first drops on the trace");
                assert_eq!(dropped.len(), 992);
            } else {
                assert!(dropped.is_empty(), "drop-tail: {} AQM drops", dropped.len());
            }
        }
        assert!(p50[0] > 500_000_000, "tail drop p50 sojourn {} ns", p50[0]);
        assert!((2_000_000..20_000_000).contains(&p50[1]), "CoDel p50 sojourn {} ns", p50[1]);
    }

    /// A sparse trace (one 1504-byte opportunity every 20 ms, 0.6 Mbit/s) and 1514-byte frames at
    /// random gaps of 1..39 ms (an LCG; mean 20 ms): short queues whose sojourns exceed the target,
    /// where the backlog rule decides. The switch drops exactly what Mahimahi's link served by
    /// CoDel's dequeue drops with the switch's rule (bytes queued ahead at arrival), computed by
    /// `bench/codel_reference.py`'s `replay_trace(arrivals, [1514] * 3000, [20], arrivals[0],
    /// ahead=True)` on these arrivals: 144 drops. With Linux's rule (bytes left behind) the
    /// same replay also drops 144, each two packets earlier (21, 27, 38, ...): the documented
    /// difference (codel.rs).
    #[test]
    fn codel_on_a_sparse_trace_drops_what_the_reference_drops_with_its_backlog_rule() {
        let (regs, counters, mut rng) = setup();
        let imp = one_opportunity_trace(&regs, 20);
        let mut rate = Rate::new(8, 4096);
        rate.provision(1, &imp);
        let (mut x, mut now, mut dropped) = (12345u64, 1_000_000_000u64, Vec::new());
        for i in 0..3000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            now += 1_000_000 + (x >> 33) % 38_000_000;
            let mut ctx = Ctx { now, pd: 1, rng: &mut rng, regs: &regs, counters: &counters };
            let mut p = Pkt::new(1514, now);
            if rate.enqueue(&imp, &mut ctx, &mut p) == Verdict::Drop(DropReason::AqmDrop) {
                dropped.push(i);
            }
        }
        assert_eq!(dropped[..12], [23, 29, 40, 46, 50, 54, 102, 139, 165, 205, 211, 234]);
        assert_eq!(dropped[dropped.len() - 3..], [2902, 2908, 2912]);
        assert_eq!((dropped.len(), dropped.iter().sum::<u64>()), (144, 230_285));
    }
}
