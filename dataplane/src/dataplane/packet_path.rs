//! The loop's per-packet path (dataplane.rs says what it may not do): frames from a port's RX ring
//! through the pipeline (`process`, `impair`) into the egress port's TX ring at once (`send_now`)
//! or into the delay line or a cell's bearer (`emit`, `hold_in_bearer`), and held packets out
//! again (`release_due`, `serve_cells`, `send_held`, `drain_backlog`). The hot functions stay
//! together in this one module, where the compiler inlines them into one another as it did when
//! the loop and they shared a file.
use std::sync::atomic::Ordering;

use super::clock::arrival_time;
use super::{monotonic_ns, DataPlane, ETH_HEADER, NO_PORT, PACKET_OUT_BATCH, RX_BATCH};
use crate::contract::{DropReason, DIGEST_MAC_LEARN, DIGEST_RADIO_STATE};
use crate::io::flow_cache::key_of;
use crate::parse::parse;
use crate::pool::{Handle, PktMeta, NO_PD, OUT_CPU};
use crate::release::Exactness;
use crate::stage::{Ctx, Edits, Impairment, Pkt, Stage, Verdict};
use crate::state::{DigestEvent, PacketIn};
use crate::tables::{Forward, Snapshot};

impl DataPlane {
    /// Takes up to RX_BATCH frames from port `pi` through the pipeline; `now` is the turn's clock
    /// read (a frame stamped after it gets a fresh one, `arrival_time`).
    pub(super) fn rx_port(&mut self, pi: usize, snap: &Snapshot, scratch: &mut [u8], now: u64) -> usize {
        let mut n = 0;
        let prompt_before = self.prompt;
        while n < RX_BATCH {
            let Some(f) = self.ports[pi].io.rx_peek() else { break };
            n += 1;
            // What the ring holds and a packet buffer takes (a frame longer than either is truncated
            // and dropped as malformed).
            let snaplen = f.snaplen.min(self.ports[pi].rx_limit);
            // SAFETY: the frame stays in the RX ring (ours, TP_STATUS_USER) until rx_release below.
            let raw = unsafe { std::slice::from_raw_parts(f.data, snaplen) };
            let truncated = f.len > snaplen;
            let frame: &[u8] = if f.status & crate::io::afpacket::VLAN_VALID != 0 && raw.len() >= 12 {
                let tpid = if f.status & crate::io::afpacket::VLAN_TPID_VALID != 0 { f.vlan_tpid } else { 0x8100 };
                let total = raw.len() + 4;
                scratch[..12].copy_from_slice(&raw[..12]);
                scratch[12..14].copy_from_slice(&tpid.to_be_bytes());
                scratch[14..16].copy_from_slice(&f.vlan_tci.to_be_bytes());
                scratch[16..total].copy_from_slice(&raw[12..]);
                &scratch[..total]
            } else {
                raw
            };
            let port = &mut self.ports[pi];
            if truncated && !port.warned_truncated {
                port.warned_truncated = true;
                tracing::warn!(iface = %port.io.ifname(), len = f.len,
                    "frames larger than {snaplen} bytes arrive (GRO/GSO/TSO on the sender, or an MTU above {}, the largest \
                     this switch was sized for at start?): dropped as malformed", port.rx_limit - ETH_HEADER);
            }
            if f.status & crate::io::afpacket::CSUM_NOT_READY != 0 && !port.warned_csum {
                port.warned_csum = true;
                tracing::warn!(iface = %port.io.ifname(),
                    "frames arrive with checksums not yet computed: turn tx checksum offload off on the sender (the veth peer)");
            }
            if let Some(w) = &mut port.pcap_in {
                let _ = w.record((now as i64 + self.wall_offset_ns) as u64, frame);
            }
            let number = port.number;
            // Time of arrival: the kernel's RX timestamp (wall clock) when it is plausible, so that
            // delay and rate count from when the frame reached the port, not from when this loop
            // got to it.
            let stamp = if f.monotonic { f.timestamp_ns as i64 } else { f.timestamp_ns as i64 - self.wall_offset_ns };
            let arrival = arrival_time(stamp, now, monotonic_ns);
            self.process(snap, number, frame, truncated, arrival);
            self.ports[pi].io.rx_release();
        }
        if n > 0 {
            self.ports[pi].rx_backlogged = self.prompt == prompt_before;
        }
        n
    }

    #[inline]
    pub(super) fn drop_pkt(&self, pd: u32, reason: DropReason, len: usize) {
        self.link.counters.count_drop(pd, reason, len as u64);
    }

    /// One received frame through the pipeline.
    fn process(&mut self, snap: &Snapshot, in_port: u16, frame: &[u8], truncated: bool, now: u64) {
        let len = frame.len();
        let parsed = parse(frame, in_port);
        if let Some(e) = parsed.error {
            self.link.counters.parser_errors.add(e as usize, len as u64);
        }
        // Forwarding: l2_fwd decides on a hit, otherwise port_map (forwarding.p4).
        let mut fwd = None;
        let mut learns = false;
        if parsed.l2_usable() {
            if snap.learn_on_miss && snap.l2_learn.get(parsed.src_mac).is_none() {
                learns = true;
                self.learn_mac(parsed.src_mac, in_port, now);
            }
            fwd = snap.l2_fwd.get(parsed.dst_mac);
        }
        let fwd = fwd.or_else(|| snap.port_map.get(in_port)).unwrap_or(snap.port_map_default);
        // Classification happens for every packet, so that route drops count against its profile.
        let mut sel = snap.classifier.lookup(&parsed.key).unwrap_or(snap.classifier_default);
        if sel.profile_id as u32 >= self.link.caps.profiles {
            sel.profile_id = 0; // as p4src: ids the arrays cannot index fall back to profile 0
        }
        let pd = sel.pd();
        self.link.counters.profile_in.add(pd as usize, len as u64);
        let out = match fwd {
            Forward::Drop => return self.drop_pkt(pd, DropReason::NoRoute, len),
            Forward::Cpu => OUT_CPU,
            Forward::Port(p) if Some(p) == self.cpu_port => OUT_CPU,
            Forward::Port(p) => match self.port_index.get(p as usize).copied().unwrap_or(NO_PORT) {
                NO_PORT => return self.drop_pkt(pd, DropReason::TxError, len),
                i => i,
            },
        };
        if truncated {
            return self.drop_pkt(pd, DropReason::Malformed, len);
        }
        let imp = snap.impairment(pd);
        let radio = snap.radio(sel.profile_id as u32);
        if imp.is_none() && radio.is_none() {
            if self.fast.is_some() && out != OUT_CPU && !learns && parsed.error.is_none() {
                self.offer_fast(snap, in_port, out, pd, frame, now);
            }
            return self.send_now(out, pd, in_port, frame, Edits::default());
        }
        let imp = imp.copied().unwrap_or_default();
        let mut pkt = Pkt::new(len as u32, now);
        pkt.ip = parsed.ip;
        if radio.is_some() || imp.bearer_sched != 0 {
            // The UE owns the radio and, in a cell, the bearer.
            pkt.ue = sel.ue(parsed.key.ipv4_src, parsed.key.ipv4_dst);
        }
        if let Some(radio) = radio {
            let mut ctx =
                Ctx { now, pd, rng: &mut self.rng, regs: &self.link.registers, counters: &self.link.counters };
            let verdict = self.stages.radio.enqueue(radio, &mut ctx, &mut pkt);
            self.report_radio_events();
            if let Verdict::Drop(reason) = verdict {
                return self.drop_pkt(pd, reason, len);
            }
        }
        self.impair(&imp, out, pd, in_port, frame, pkt, now);
    }

    /// Offers the kernel fast path an entry for `frame`'s flow: the pipeline forwards it to `out`
    /// unchanged, counted against `pd`, under this snapshot (the caller checked: no impairment,
    /// no radio, no learning, not to or from the CPU port).
    fn offer_fast(&mut self, snap: &Snapshot, in_port: u16, out: u16, pd: u32, frame: &[u8], now: u64) {
        let Some(&pi) = self.port_index.get(in_port as usize) else { return };
        let (Some(inp), Some(outp)) = (self.ports.get(pi as usize), self.ports.get(out as usize)) else { return };
        let max_len = inp.rx_limit.min(outp.max_frame);
        if frame.len() > max_len || outp.is_gone {
            return;
        }
        let Some(key) = key_of(inp.io.ifindex() as u32, frame) else { return };
        let out_ifindex = outp.io.ifindex();
        if let Some(fc) = &mut self.fast {
            fc.offer(key, snap.epoch, pd, max_len as u32, out_ifindex, (pi, out), now);
        }
    }

    /// The stages after the radio, for a packet and its duplicate.
    #[allow(clippy::too_many_arguments)]
    fn impair(&mut self, imp: &Impairment, out: u16, pd: u32, in_port: u16, frame: &[u8], mut pkt: Pkt, now: u64) {
        let len = frame.len();
        let mut ctx = Ctx { now, pd, rng: &mut self.rng, regs: &self.link.registers, counters: &self.link.counters };
        match self.stages.run(imp, &mut ctx, &mut pkt) {
            Verdict::Drop(reason) => self.drop_pkt(pd, reason, len),
            Verdict::Pass => self.emit(out, pd, in_port, frame, pkt.edits(), pkt.release, self.exactness(&pkt), now),
            Verdict::Held => self.hold_in_bearer(imp, out, pd, in_port, frame, pkt),
        }
        // The copy exists from the duplication stage on, whatever happens to the original after.
        if pkt.duplicate {
            let mut copy = pkt.copy_of(now);
            let mut ctx =
                Ctx { now, pd, rng: &mut self.rng, regs: &self.link.registers, counters: &self.link.counters };
            match self.stages.run(imp, &mut ctx, &mut copy) {
                Verdict::Drop(reason) => self.drop_pkt(pd, reason, len),
                Verdict::Pass => {
                    self.emit(out, pd, in_port, frame, copy.edits(), copy.release, self.exactness(&copy), now)
                }
                Verdict::Held => self.hold_in_bearer(imp, out, pd, in_port, frame, copy),
            }
        }
    }

    /// Which wheel of the delay line a packet waits in (release.rs): coalesced only when the rate
    /// stage queued it behind another and a release slack is set.
    #[inline]
    fn exactness(&self, pkt: &Pkt) -> Exactness {
        if pkt.coalescable && self.release_slack.coalesces(pkt.service_ns) {
            Exactness::Coalesced
        } else {
            Exactness::Precise
        }
    }

    /// A packet a cell's bearer holds (stage 6a): into a pool buffer (with its edits) and its bearer.
    fn hold_in_bearer(&mut self, imp: &Impairment, out: u16, pd: u32, in_port: u16, frame: &[u8], pkt: Pkt) {
        self.prompt += 1;
        let Some(h) = self.pool.alloc_for(frame.len()) else {
            return self.drop_pkt(pd, DropReason::BufferExhausted, frame.len());
        };
        self.pool.fill(h, frame, PktMeta { len: 0, out, in_port, pd });
        pkt.edits().apply(self.pool.frame_mut(h));
        self.stages.hold(pd, imp, h, pkt, &self.link.registers);
    }

    /// The cells' links: packets given the link get their release time (the stages after the
    /// rate) and wait in the wheel, or go now if it has come.
    pub(super) fn serve_cells(&mut self, snap: &Snapshot, now: u64) -> usize {
        let mut served = std::mem::take(&mut self.served);
        self.stages.serve(
            now,
            &self.link.registers,
            |pd| snap.impairment(pd).copied().unwrap_or_default(),
            &mut served,
        );
        let n = served.len();
        for s in served.iter_mut() {
            let imp = snap.impairment(s.pd).copied().unwrap_or_default();
            let mut ctx =
                Ctx { now, pd: s.pd, rng: &mut self.rng, regs: &self.link.registers, counters: &self.link.counters };
            match self.stages.after_link(&imp, &mut ctx, &mut s.pkt) {
                Verdict::Pass | Verdict::Held => {}
                Verdict::Drop(reason) => {
                    self.drop_pkt(s.pd, reason, self.pool.meta(s.handle).len as usize);
                    self.pool.free(s.handle);
                    continue;
                }
            }
            if s.pkt.release <= now {
                self.send_held(s.handle);
            } else {
                self.line.insert(s.handle, s.pkt.release, Exactness::Precise);
            }
        }
        served.clear();
        self.served = served;
        n
    }

    /// Radio state changes of the last packet become `radio_state_digest_t` messages (only when a
    /// client enabled the digest; a full queue drops them, as P4Runtime allows for digests).
    fn report_radio_events(&self) {
        let events = self.stages.radio.events();
        if events.is_empty() || !self.link.radio_digests.load(Ordering::Relaxed) {
            return;
        }
        for ev in events {
            let fields = vec![ev.ue as u128, ev.old as u128, ev.new as u128, ev.at_ns as u128];
            if self.link.digest_tx.try_send(DigestEvent { digest_id: DIGEST_RADIO_STATE, fields }).is_err() {
                tracing::debug!(ue = ev.ue, "digest queue full: radio state event dropped");
            }
        }
    }

    fn learn_mac(&mut self, mac: u64, port: u16, now: u64) {
        if self.learn.admit(mac, port, now) {
            let ev = DigestEvent { digest_id: DIGEST_MAC_LEARN, fields: vec![mac as u128, port as u128] };
            if self.link.digest_tx.try_send(ev).is_err() {
                tracing::debug!("digest queue full: learn event for {mac:012x} dropped");
            }
        }
    }

    /// Sends now if the release time has come, else holds the packet in the delay line.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn emit(
        &mut self,
        out: u16,
        pd: u32,
        in_port: u16,
        frame: &[u8],
        edits: Edits,
        release: u64,
        how: Exactness,
        now: u64,
    ) {
        if release <= now {
            return self.send_now(out, pd, in_port, frame, edits);
        }
        let Some(h) = self.pool.alloc_for(frame.len()) else {
            return self.drop_pkt(pd, DropReason::BufferExhausted, frame.len());
        };
        self.pool.fill(h, frame, PktMeta { len: 0, out, in_port, pd });
        edits.apply(self.pool.frame_mut(h));
        if how == Exactness::Precise {
            self.prompt += 1;
        }
        self.line.insert(h, release, how);
    }

    #[inline]
    fn count_out(&self, pd: u32, len: usize) {
        if pd != NO_PD {
            self.link.counters.profile_out.add(pd as usize, len as u64);
        }
    }

    fn packet_in(&self, pd: u32, in_port: u16, frame: &[u8], edits: Edits) {
        let mut payload = frame.to_vec();
        edits.apply(&mut payload);
        let len = payload.len();
        match self.link.packet_in_tx.try_send(PacketIn { ingress_port: in_port as u32, payload }) {
            Ok(()) => self.count_out(pd, len),
            Err(_) => {
                if pd != NO_PD {
                    self.drop_pkt(pd, DropReason::TxError, len);
                }
            }
        }
    }

    /// Transmits a frame from a slice (RX ring or PacketOut), straight into the TX ring when it
    /// has room and nothing is queued before it; else into the port's backlog.
    #[inline]
    fn send_now(&mut self, out: u16, pd: u32, in_port: u16, frame: &[u8], edits: Edits) {
        self.prompt += 1;
        if out == OUT_CPU {
            return self.packet_in(pd, in_port, frame, edits);
        }
        let port = &mut self.ports[out as usize];
        if port.is_gone || !port.fits(frame) {
            return self.unsendable(out, pd, frame.len());
        }
        let port = &mut self.ports[out as usize];
        if port.backlog.is_empty() && port.io.tx_push(frame, |d| edits.apply(d)) {
            if let Some(w) = &mut port.pcap_out {
                let _ = w.record((monotonic_ns() as i64 + self.wall_offset_ns) as u64, frame);
            }
            return self.count_out(pd, frame.len());
        }
        let Some(h) = self.pool.alloc_for(frame.len()) else {
            if pd != NO_PD {
                self.drop_pkt(pd, DropReason::BufferExhausted, frame.len());
            }
            return;
        };
        self.pool.fill(h, frame, PktMeta { len: 0, out, in_port, pd });
        edits.apply(self.pool.frame_mut(h));
        self.ports[out as usize].backlog.push_back(h);
    }

    /// A frame the egress port cannot send: its interface is gone (a tx_error drop, the port's
    /// state logged when it went), or the frame is too long (`oversized`).
    #[cold]
    fn unsendable(&mut self, out: u16, pd: u32, len: usize) {
        if !self.ports[out as usize].is_gone {
            return self.oversized(out, pd, len);
        }
        if pd != NO_PD {
            self.drop_pkt(pd, DropReason::TxError, len);
        }
    }

    /// A frame longer than the egress port takes: counted as a tx_error drop (Linux would drop it
    /// without telling us), logged once per port.
    #[cold]
    fn oversized(&mut self, out: u16, pd: u32, len: usize) {
        if pd != NO_PD {
            self.drop_pkt(pd, DropReason::TxError, len);
        }
        let port = &mut self.ports[out as usize];
        if !port.warned_mtu {
            port.warned_mtu = true;
            tracing::warn!(iface = %port.io.ifname(), len, max = port.max_frame,
                "frames longer than the egress MTU allows: dropped as tx_error (raise the MTU of this port or lower the sender's)");
        }
    }

    /// Transmits a held packet (its buffer is freed once the frame is in the TX ring).
    fn send_held(&mut self, h: Handle) {
        let m = self.pool.meta(h);
        if m.out == OUT_CPU {
            self.packet_in(m.pd, m.in_port, self.pool.frame(h), Edits::default());
            return self.pool.free(h);
        }
        let port = &mut self.ports[m.out as usize];
        if port.is_gone || !port.fits(self.pool.frame(h)) {
            // Its interface went while the frame was held, or the MTU shrank.
            self.unsendable(m.out, m.pd, self.pool.frame(h).len());
            return self.pool.free(h);
        }
        let port = &mut self.ports[m.out as usize];
        if port.backlog.is_empty() && port.io.tx_push(self.pool.frame(h), |_| {}) {
            if let Some(w) = &mut port.pcap_out {
                let _ = w.record((monotonic_ns() as i64 + self.wall_offset_ns) as u64, self.pool.frame(h));
            }
            self.count_out(m.pd, m.len as usize);
            self.pool.free(h);
        } else {
            port.backlog.push_back(h);
        }
    }

    pub(super) fn drain_backlog(&mut self, pi: usize) {
        while let Some(&h) = self.ports[pi].backlog.front() {
            let port = &mut self.ports[pi];
            if !port.io.tx_push(self.pool.frame(h), |_| {}) {
                break;
            }
            port.backlog.pop_front();
            if let Some(w) = &mut port.pcap_out {
                let _ = w.record((monotonic_ns() as i64 + self.wall_offset_ns) as u64, self.pool.frame(h));
            }
            let m = self.pool.meta(h);
            self.count_out(m.pd, m.len as usize);
            self.pool.free(h);
        }
    }

    pub(super) fn release_due(&mut self, now: u64) -> usize {
        let mut due = std::mem::take(&mut self.due);
        let polled = self.line.poll(now, &mut due);
        let n = due.len();
        self.prompt += polled.precise;
        if let Some(first) = polled.first_precise_ns {
            self.first_due_ns = first;
            self.lateness_at_release.observe(now.saturating_sub(first));
        }
        if let Some(first) = polled.first_coalesced_ns {
            self.lateness_coalesced.observe(now.saturating_sub(first));
        }
        for &h in &due {
            let pd = self.pool.meta(h).pd;
            if pd != NO_PD {
                self.stages.dequeue(pd, now, &self.link.registers);
            }
            self.send_held(h);
        }
        due.clear();
        self.due = due;
        n
    }

    pub(super) fn packet_outs(&mut self) -> usize {
        let mut n = 0;
        while n < PACKET_OUT_BATCH {
            let Ok((port_no, frame)) = self.link.packet_out_rx.try_recv() else { break };
            n += 1;
            match self.port_index.get(port_no as usize).copied() {
                Some(i) if i != NO_PORT => self.send_now(i, NO_PD, 0, &frame, Edits::default()),
                _ => tracing::warn!(port_no, "PacketOut to a port this switch does not have: dropped"),
            }
        }
        n
    }
}
