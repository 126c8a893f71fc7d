//! A per-port TX thread that asks the kernel to send what the data plane wrote into the TX ring.
//!
//! On a veth, `sendto` on a TX-ring socket does far more than hand frames over: the veth transmit
//! runs the receiving namespace's network stack (TCP receive, ACKs, the sender's next segments) in
//! the caller's context. With one data-plane thread calling it for every port, that thread carries
//! both hosts' stacks and becomes the bottleneck. Here each port's `sendto` runs on its own thread,
//! woken through an eventfd, so the work spreads over the CPUs (as a Linux bridge's softirq work
//! does) while the data-plane thread keeps receiving. The ring itself is the producer/consumer
//! protocol between the two: the data plane marks frames SEND_REQUEST, the kernel (in this thread)
//! sends every such frame from its own head.
//!
//! The thread is a data-plane thread: it beats its heartbeat (health.rs) on every wake and every
//! `sendto`, and its wait is bounded (1 s), so an idle port's thread beats too.
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::wake::Waker;
use crate::dataplane::monotonic_ns;
use crate::health::Heartbeat;

pub struct Kicker {
    wake: Arc<Waker>,
    stop: Arc<AtomicBool>,
    beat: Arc<Heartbeat>,
    thread: Option<JoinHandle<()>>,
}

impl Kicker {
    /// `fd` must stay open until the kicker is dropped (the port owns both and drops this first).
    pub fn start(fd: RawFd, name: &str) -> io::Result<Kicker> {
        let wake = Arc::new(Waker::new()?);
        let stop = Arc::new(AtomicBool::new(false));
        let beat = Arc::new(Heartbeat::new());
        let (w, s, b) = (wake.clone(), stop.clone(), beat.clone());
        let thread = std::thread::Builder::new().name(format!("p4netem-tx-{name}")).spawn(move || {
            let mut pfd = libc::pollfd { fd: w.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            while !s.load(Ordering::Acquire) {
                // SAFETY: one valid pollfd; blocks until the data plane writes the eventfd (at most
                // 1 s: the heartbeat of an idle port's thread).
                unsafe { libc::poll(&mut pfd, 1, 1000) };
                w.drain();
                // Send until the ring has nothing more (frames added meanwhile go out too).
                loop {
                    // Per sendto (a batch), not per frame: under a steady load this loop may not end.
                    b.beat(monotonic_ns());
                    // SAFETY: sendto with no buffer on a TX-ring socket sends the pending frames.
                    let r = unsafe { libc::sendto(fd, std::ptr::null(), 0, libc::MSG_DONTWAIT, std::ptr::null(), 0) };
                    if r <= 0 {
                        break;
                    }
                }
            }
        })?;
        Ok(Kicker { wake, stop, beat, thread: Some(thread) })
    }

    /// The TX thread's heartbeat (health.rs).
    pub fn heartbeat(&self) -> Arc<Heartbeat> {
        self.beat.clone()
    }

    #[inline]
    pub fn kick(&self) {
        self.wake.wake();
    }
}

impl Drop for Kicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.wake.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
