//! Ports that change while the loop runs, checked once a second, off the packet path: a port
//! whose interface goes (deleted, or moved to another namespace) drops what it would send until an
//! interface of its name is back; then it, or a live AF_PACKET port whose MTU was raised above its
//! rings, is opened again by a worker thread (io/reopen.rs) and swapped in; packet buffers added
//! for a raised MTU are freed again once no port needs them.
use std::sync::atomic::Ordering;

use super::open::{busy_hint, open_port_io, Opened};
use super::sizing::warn_mtu_above_ring;
use super::{DataPlane, Sizing, ETH_HEADER};
use crate::contract::DropReason;
use crate::io::afpacket::ring_frame_size;
use crate::io::reopen;
use crate::io::{ethtool, IoMode, RingConfig};
use crate::pool::{self, NO_PD};

/// What opening a port again gave (io/reopen.rs), or why it did not open.
pub(super) type Reopened = Result<Opened, String>;

/// A gone port to open again, with what start gives a port: everything the worker thread needs
/// (io/reopen.rs), so that it shares nothing with the data-plane thread.
pub(super) struct ReopenJob {
    number: u16,
    ifname: String,
    mode: IoMode,
    rings: RingConfig,
    tx_threads: bool,
    buffer_limit: usize,
    check_offloads: bool,
    /// (count, size): packet buffers larger than the pool has, for this port's new MTU
    /// (`DataPlane::resize_for_mtu`) or the MTU its interface came back with
    /// (`DataPlane::reopen_job`), allocated here, off the data-plane thread.
    class: Option<(usize, usize)>,
}

impl ReopenJob {
    /// On the worker thread: the offload check as at start, then the port opened as at start
    /// (with the larger buffers it needs, and a receive limit they hold).
    pub(super) fn open(&self) -> Reopened {
        match self.check_offloads.then(|| ethtool::offload_problem(&self.ifname)) {
            Some(Ok(Some(problem))) => Err(problem),
            Some(Err(e)) => Err(format!("offload check: {e}")),
            _ => {
                let class = self.class.map(|(count, size)| pool::Class::new(count, size));
                let buffer_limit =
                    class.as_ref().map_or(self.buffer_limit, |c| self.buffer_limit.max(c.buffer_size() - 4));
                open_port_io(self.number, &self.ifname, &self.rings, self.mode, self.tx_threads, buffer_limit)
                    .map(|opened| Opened { class, ..opened })
                    .map_err(|e| format!("{e:#}"))
            }
        }
    }
}

/// What became of the `count` packet buffers of `size` bytes made for a port reopened for its MTU
/// (`resize_for_mtu`), for its log line: added to the pool, or not needed because another port
/// reopened at the same time added buffers as large first (the pool's largest are now `largest`
/// bytes), or refused for want of room for another size.
fn buffers_outcome(count: usize, size: usize, added: bool, largest: usize) -> String {
    if added {
        format!(" and {count} packet buffers of {size} bytes added")
    } else if largest >= size {
        format!(
            " (the {count} packet buffers of {size} bytes made for it were not needed: another port's, \
             of {largest} bytes, hold its frames; freed)"
        )
    } else {
        format!(
            " (the {count} packet buffers of {size} bytes made for it were not added: the pool has no room \
             for another size; its frames above {largest} bytes that must wait are dropped as buffer_exhausted)"
        )
    }
}

impl DataPlane {
    /// Once a second, off the packet path: each port's link, and whether its interface is gone;
    /// gone ports whose interfaces are back are handed to a worker thread to open again
    /// (io/reopen.rs). The port's state goes to the health metrics.
    pub(super) fn check_ports(&mut self) {
        let mut back = Vec::new();
        for pi in 0..self.ports.len() {
            if self.ports[pi].is_gone {
                if let Some(job) = self.reopen_job(pi) {
                    back.push((pi, job));
                }
            } else if self.ports[pi].check() {
                self.port_gone(pi);
            }
            let p = &self.ports[pi];
            if let Some(h) = self.health.ports.get(pi) {
                h.up.store(!p.is_gone && p.link_up, Ordering::Relaxed);
            }
        }
        self.reopen.open(back);
    }

    /// Port `pi`'s interface was deleted or moved to another namespace: its socket never carries
    /// a frame again. Logged once. What waits in its TX backlog is dropped as tx_error, as is what
    /// the delay line and the cells release to it until it is back (`unsendable`), so that every
    /// packet in is out or dropped (frames already in its TX ring were counted out when written
    /// there, as on any port). Its XDP programs are detached (one left on an interface moved away
    /// would refuse a new attach when it comes back) and fast-path entries made stale (they could
    /// redirect to an interface that is no more).
    pub(super) fn port_gone(&mut self, pi: usize) {
        let port = &mut self.ports[pi];
        if port.is_gone {
            return;
        }
        port.is_gone = true;
        port.link_up = false;
        port.rx_backlogged = false;
        port.reopen_blocked = None;
        // Detaching an XDP program waits for the kernel (RCU: 10-40 ms a port here; 60 AF_XDP ports
        // moved to another namespace at once held the loop 0.8 s): the worker does it, before it
        // opens the port again (it takes its jobs in order), so a new attach finds the hook free.
        let mut retired: Vec<Box<dyn Send>> = port.io.release().into_iter().collect();
        if let Some(h) = self.health.ports.get(pi) {
            h.up.store(false, Ordering::Relaxed);
        }
        tracing::error!(
            port = port.number,
            iface = %port.io.ifname(),
            "port error: the interface was deleted or moved to another namespace; this port drops what it would send \
             (tx_error) until an interface named {} is back in this namespace and up, then opens again on it (the \
             other ports go on)",
            port.io.ifname()
        );
        while let Some(h) = self.ports[pi].backlog.pop_front() {
            let m = self.pool.meta(h);
            if m.pd != NO_PD {
                self.drop_pkt(m.pd, DropReason::TxError, m.len as usize);
            }
            self.pool.free(h);
        }
        if let Some(fc) = &mut self.fast {
            retired.extend(fc.detach(pi).map(|link| Box::new(link) as Box<dyn Send>));
            fc.invalidate();
        }
        self.reopen.close(retired);
    }

    /// Gone port `pi` (once a second): to be opened again when an interface of its name is in this
    /// namespace, up with a carrier and, as at start, with its offloads off; on the path it chose
    /// at start (`PortIo::reopen_mode`), with what start gives a port (`open_port_io`). None while
    /// its interface is not back, or the worker is opening it already.
    fn reopen_job(&self, pi: usize) -> Option<ReopenJob> {
        let port = &self.ports[pi];
        if self.reopen.is_opening(pi) || !matches!(port.io.link_up(), Ok(true)) {
            return None; // not back yet, or not up: nothing to say
        }
        // Sized for the MTU of the interface back (read by name): one larger than the rings hold
        // gets rings (and buffers) for it now, as `resize_for_mtu` gives a live port, rather than
        // a second open a second later. (Unreadable: as at start; a larger MTU is then acted on
        // once the port is open.)
        let frame = port.io.mtu().map_or(0, |mtu| mtu as usize + ETH_HEADER);
        let (rings, class) = self.sizing_for(frame).unwrap_or((self.rings, None));
        Some(ReopenJob {
            number: port.number,
            ifname: port.io.ifname().to_string(),
            mode: port.io.reopen_mode(),
            rings,
            tx_threads: self.tx_threads,
            // Larger buffers may have been added since the start (`resize_for_mtu`).
            buffer_limit: self.pool.buffer_size() - 4,
            check_offloads: self.check_offloads,
            class,
        })
    }

    /// The rings and packet buffers an AF_PACKET port opened for frames of `frame` bytes (MTU +
    /// 14) needs: the rings in force when they hold it, else those scaled to the ring frame that
    /// does (`Sizing::scaled`: as many bytes, with `Sizing::for_mtu`'s floors), and, when no packet
    /// buffer holds it with a tag, a class of buffers of that ring frame's size (few sizes: each
    /// MTU raised does not add its own) of as many bytes as the start's buffers. None when no
    /// ring holds it.
    fn sizing_for(&self, frame: usize) -> Option<(RingConfig, Option<(usize, usize)>)> {
        let frame_size = ring_frame_size(frame.saturating_sub(ETH_HEADER))?.max(self.rings.frame_size);
        let (buffers, buffer_size) = self.pool.base();
        let scaled = Sizing { rings: self.rings, buffers, buffer_size }.scaled(frame_size, frame_size);
        let class = (self.pool.buffer_size() < frame + 4).then_some((scaled.buffers, frame_size));
        Some((scaled.rings, class))
    }

    /// Once a second, after the MTUs were read: an AF_PACKET port whose MTU was raised above what
    /// its rings (or the packet buffers) hold is opened again by the worker (io/reopen.rs) with
    /// rings sized for it, as `Sizing` sizes them at start, and with larger packet buffers when no
    /// buffer holds its frames, allocated there too; `install_reopened` swaps it in as it does a
    /// port whose interface came back (same number, lock, counters, pcap, fast path). Until then,
    /// and for what this cannot fix (an AF_XDP port, an MTU no ring holds: said once per MTU), its
    /// longer frames are malformed drops. A lowered MTU needs nothing: the rings are larger than
    /// needed, and what is sent is bounded by `max_frame`, read again each second.
    pub(super) fn resize_for_mtu(&mut self) {
        let mut jobs = Vec::new();
        for pi in 0..self.ports.len() {
            let port = &self.ports[pi];
            let frame = port.mtu_frame;
            if port.is_gone || frame <= port.rx_limit || frame == port.resized_for || self.reopen.is_opening(pi) {
                continue;
            }
            let mtu = frame - ETH_HEADER;
            let sized = self.sizing_for(frame).filter(|_| port.io.reopen_mode() == IoMode::AfPacket);
            let Some((rings, class)) = sized else {
                warn_mtu_above_ring(port.number, port.io.ifname(), frame, port.rx_limit);
                self.ports[pi].resized_for = frame;
                continue;
            };
            tracing::info!(port = port.number, iface = %port.io.ifname(), mtu,
                "MTU {mtu} is above the {} this port's rings were sized for: reopening the port with rings for it{} \
                 (its number, counters, pcap and fast path kept; frames in its old rings at the swap are lost)",
                port.rx_limit - ETH_HEADER,
                // Made now, added when the port is installed, unless another port's come first.
                class.map_or(String::new(), |(count, size)| format!(" and {count} packet buffers of {size} bytes")));
            jobs.push((
                pi,
                ReopenJob {
                    number: port.number,
                    ifname: port.io.ifname().to_string(),
                    mode: IoMode::AfPacket,
                    rings,
                    tx_threads: self.tx_threads,
                    buffer_limit: self.pool.buffer_size() - 4,
                    check_offloads: false, // a live port: its offloads were checked when it opened
                    class,
                },
            ));
            self.ports[pi].resized_for = frame;
        }
        self.reopen.open_serially(jobs);
    }

    /// Once a second, after `resize_for_mtu`: the larger packet buffers added for a raised MTU
    /// (`resize_for_mtu`) that no port needs any more (its MTU lowered again, or the port gone) are
    /// taken out of the pool once none of them holds a packet (held packets wait in delay and rate
    /// queues for seconds: such a class stays until the last one leaves), and freed off this
    /// thread, as they were allocated. A port's frames need a buffer of its MTU + 18 (a tag put
    /// back), or of what its path receives whole when that is less. Not while ports are being
    /// opened: one may bring (or count on) larger buffers. A port's receive limit then follows the
    /// buffers, as at open: a longer frame (above its MTU) is a malformed drop, and an MTU raised
    /// again has the port opened again with buffers for it (`resize_for_mtu`).
    pub(super) fn free_unneeded_buffers(&mut self) {
        if self.pool.classes() == 0 || self.reopen.busy() {
            return;
        }
        let needs: Vec<usize> =
            self.ports.iter().filter(|p| !p.is_gone).map(|p| p.mtu_frame.min(p.rx_limit) + 4).collect();
        let unneeded = self.pool.take_unneeded(&needs);
        if unneeded.is_empty() {
            return;
        }
        for class in &unneeded {
            tracing::info!(
                buffers = class.count(),
                size = class.buffer_size(),
                "packet buffers of {} bytes freed: no port's MTU needs them any more (an MTU raised again adds them \
                 again)",
                class.buffer_size()
            );
        }
        let limit = self.pool.buffer_size() - 4;
        for port in self.ports.iter_mut().filter(|p| p.rx_limit > limit) {
            port.rx_limit = limit;
            port.resized_for = 0; // the same MTU raised again is acted on
        }
        if let Some(fc) = &mut self.fast {
            fc.invalidate(); // entries carry a length bound from the receive limit
        }
        self.health.buffers.store(self.pool.capacity() as u64, Ordering::Relaxed);
        self.health.free_buffers.store(self.pool.available() as u64, Ordering::Relaxed);
        self.reopen.close(unneeded.into_iter().map(|c| Box::new(c) as Box<dyn Send>).collect());
    }

    /// Each turn while ports are being opened again: takes the ones the worker opened (at most
    /// `reopen::PER_TURN`, the rest next turn, so that a turn stays short however many came back)
    /// and puts each on its port, which keeps its number, lock, counters and pcap files, with the
    /// fast path's program; the old sockets are closed by the worker (that waits for the kernel too).
    /// What kept a port from opening is logged once per reason, and it is tried again a second on.
    pub(super) fn install_reopened(&mut self) {
        let mut old = Vec::new();
        // Larger packet buffers added: room for their handles before any packet is held in one.
        let mut added = false;
        for (pi, opened) in self.reopen.opened(reopen::PER_TURN) {
            let port = &mut self.ports[pi];
            let (number, ifname) = (port.number, port.io.ifname().to_string());
            let Opened { io, max_frame, rx_limit, mtu_frame, class } = match opened {
                Ok(opened) => opened,
                Err(why) => {
                    if port.reopen_blocked.as_ref() != Some(&why) {
                        tracing::warn!(port = number, iface = %ifname, "port not reopened yet (tried again every second): {why}");
                        port.reopen_blocked = Some(why);
                    }
                    continue;
                }
            };
            let ifindex = io.ifindex();
            // A live port opened again for its MTU (`resize_for_mtu`) rather than one that was gone:
            // same interface, whose fast-path program stays attached.
            let resized = !port.is_gone;
            old.push(Box::new(std::mem::replace(&mut port.io, io)) as Box<dyn Send>);
            port.max_frame = max_frame;
            port.rx_limit = rx_limit;
            port.mtu_frame = mtu_frame;
            if !resized {
                // Sized for the MTU the interface came back with (`reopen_job`); one changed since
                // is acted on next second (`resize_for_mtu`).
                port.resized_for = 0;
            }
            let mut buffers = String::new();
            if let Some(class) = class {
                let (count, size) = (class.count(), class.buffer_size());
                // Not added when another port's already gave buffers as large: freed off this thread.
                let handed_back = self.pool.add_class(class).map(|unused| old.push(Box::new(unused) as Box<dyn Send>));
                added |= handed_back.is_none();
                buffers = buffers_outcome(count, size, handed_back.is_none(), self.pool.buffer_size());
                self.health.buffers.store(self.pool.capacity() as u64, Ordering::Relaxed);
            }
            self.scratch_len = self.scratch_len.max(rx_limit + 8);
            port.is_gone = false;
            port.link_up = true;
            port.reopen_blocked = None;
            port.tx_failing = false;
            // A new interface: its own misconfigurations are logged again.
            (port.warned_truncated, port.warned_csum, port.warned_mtu) = (false, false, false);
            if let Some(h) = self.health.ports.get(pi) {
                h.set_io(port.io.kind());
                h.tx_beat.store(port.io.tx_heartbeat()); // the old port's thread ends with it
                h.up.store(true, Ordering::Relaxed);
            }
            if resized {
                tracing::info!(port = number, iface = %ifname, io = port.io.kind(), mtu = mtu_frame - ETH_HEADER,
                    "port reopened with rings for its MTU{buffers}: frames up to {rx_limit} bytes received whole");
                if let Some(fc) = &mut self.fast {
                    fc.invalidate(); // entries carry a length bound
                }
                continue;
            }
            tracing::info!(port = number, iface = %ifname, io = port.io.kind(), mtu = mtu_frame - ETH_HEADER,
                "port reopened{buffers}");
            if let Some(fc) = &mut self.fast {
                if let Err(e) = fc.attach(pi, ifindex).map_err(|e| busy_hint(e, &self.ports)) {
                    tracing::warn!(port = number, iface = %ifname,
                        "fast path: not attached to the reopened port ({e}): its frames take the data-plane thread");
                }
                // Entries name interfaces by index, and the port's is new.
                fc.invalidate();
            }
        }
        if added {
            self.grow_for_handles();
        }
        self.reopen.close(old);
    }

    /// Larger packet buffers were added (`install_reopened`): what is indexed by a buffer's handle
    /// (the delay line's wheels, the cells' bearers) gets room for theirs, which follow the
    /// others' (until 2026-12-01 it did not: the first packet held in one, a jumbo frame through a
    /// delay, stopped the data-plane thread on an index out of bounds). Once per class added, on
    /// this thread, as what waits must keep its place: a few hundred KiB written for the new
    /// handles (a large block grows in place, `mremap`), well under a millisecond.
    fn grow_for_handles(&mut self) {
        let handles = self.pool.handles();
        self.line.grow(handles);
        self.stages.grow(handles);
        let capacity = self.pool.capacity();
        self.due.reserve(capacity.saturating_sub(self.due.len()));
        self.served.reserve(capacity.saturating_sub(self.served.len()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_ports_reopened_at_once_say_whose_packet_buffers_were_added() {
        // Two ports' MTUs raised in the same second: each is reopened with buffers of the new
        // size; the first installed adds them, the second's are handed back (and freed). Before,
        // both log lines said "and packet buffers".
        let mut pool = crate::pool::Pool::new(64, 2048);
        let first = pool.add_class(crate::pool::Class::new(8, 16384));
        assert!(first.is_none());
        assert_eq!(buffers_outcome(8, 16384, true, pool.buffer_size()), " and 8 packet buffers of 16384 bytes added");
        let second = pool.add_class(crate::pool::Class::new(8, 16384));
        assert!(second.is_some());
        let said = buffers_outcome(8, 16384, false, pool.buffer_size());
        assert!(said.contains("were not needed: another port's, of 16384 bytes, hold its frames; freed"), "{said}");
        // Refused for want of room (larger than any, but no slot): said so, not "not needed".
        let said = buffers_outcome(8, 65536, false, pool.buffer_size());
        assert!(said.contains("were not added: the pool has no room for another size"), "{said}");
    }
}
