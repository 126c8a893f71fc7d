//! Opening ports again off the data-plane thread, when their interfaces come back
//! (dataplane/port_lifecycle.rs `DataPlane::install_reopened`).
//!
//! Opening a port and closing its old socket mostly wait in the kernel (io/fan_out.rs: RCU grace
//! periods for AF_PACKET's rings and AF_XDP's program, the ring memory zeroed): 20-70 ms a port
//! here. Done by the data-plane loop itself, one port after the other in one turn, 60 interfaces
//! back at once (a container runtime re-creating its veths) held the loop 3.9 s: no other port
//! forwarded, the delay line released nothing, and its heartbeat went past
//! `--heartbeat-timeout-ms`, so gRPC health said NOT_SERVING, rightly, since nothing moved.
//!
//! Refreshing the heartbeat inside that turn would only hide the stall, and reopening a few ports
//! per turn would still hold each of those turns for tens of milliseconds per port. Instead the
//! slow part leaves the loop: the loop hands the ports whose interfaces are back to a worker thread
//! (started with the data plane), which opens them at once (their waits overlap, as at start:
//! fan_out::map) and wakes the loop for each one opened; the loop then swaps the new socket in (a
//! pointer move, the fast path's attach: ~0.1 ms), at most [`PER_TURN`] ports a turn so that a turn
//! stays short however many come back, and hands the old sockets back to the worker to close. The
//! loop turns, forwards and beats all along.
//!
//! The same worker opens a live port again with larger rings when its MTU was raised
//! (dataplane/port_lifecycle.rs `resize_for_mtu`), and drops what a port that went lets go of (its XDP programs:
//! detaching one waits for RCU too, 10-40 ms a port); it takes its jobs in order, so a port's old
//! program is detached before the port is opened again.
//!
//! The worker keeps off the loop's CPU (the one the loop ran on when it last handed out work: a
//! real-time thread stays where it is woken): the kernel work of an open is not preemptible here
//! (`preempt=none`; affinity.rs), and that of a port opened again for a raised MTU is long: its new
//! rings, allocated and zeroed in one `setsockopt` (`packet_set_ring`, 95 % of the worker's time
//! in `clear_page_erms`), ~90 ms a port at 24 MiB. When that ran on the loop's CPU, the loop's
//! wake-ups waited for it: 60 ports raised to MTU 9000 at once held pings through an unchanged
//! port up to 67-71 ms; with the worker off the loop's CPU, 1-26 ms (docs/dataplane.md). The
//! threads the worker starts (fan_out) inherit its CPUs. With one CPU allowed, it shares it.
//!
//! The loop itself starts no thread for this, and joins none: starting one maps its stack, and the
//! process's memory map is what 60 ports opening and closing at once keep busy (their rings are
//! mapped and unmapped), so a loop that spawned a helper per batch still waited up to 2.3 s in
//! mmap. It only sends to and receives from channels (no lock, no wait).
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::fan_out;
use crate::affinity;

/// At most this many opened ports are swapped in per loop turn (each ~0.1-0.2 ms, mostly the fast
/// path's attach and the log line): a turn stays within a few milliseconds even when hundreds of
/// ports come back at once; the rest follow in the next turns.
pub const PER_TURN: usize = 16;

/// What the loop asks of the worker.
enum Job<J, T> {
    /// Open these ports (port index, what opening it needs), all at once.
    Open(Vec<(usize, J)>),
    /// Open these one after the other (`Reopener::open_serially`).
    OpenSerially(Vec<(usize, J)>),
    /// Close (drop) these, all at once: a port's old I/O, whose closing waits for the kernel as
    /// opening does.
    Close(Vec<T>),
}

/// The ports being opened again, and the worker thread that opens them (`J` what opening one
/// needs, `R` what it gives: the port's I/O, or why it did not open) and closes old sockets (`T`).
pub struct Reopener<J, R, T> {
    /// None once finished: the worker ends when it has done what was sent.
    jobs: Option<Sender<Job<J, T>>>,
    opened: Receiver<(usize, R)>,
    /// Per port index: the worker is opening it (it is not handed out again until its result is
    /// taken).
    opening: Vec<bool>,
    /// How many ports are being opened (`opening` set), so that an idle loop looks at nothing else.
    in_flight: usize,
    worker: Option<JoinHandle<()>>,
    /// The CPU the caller (the loop) last ran on when it handed out work, plus one (0: not
    /// known): the worker keeps off it ([`KeepOff`]).
    caller_cpu: Arc<AtomicUsize>,
}

/// The worker's side of `Reopener::caller_cpu`: before each job (and each port opened one after
/// the other), the worker's CPUs are the ones it was started with but the caller's.
struct KeepOff {
    caller_cpu: Arc<AtomicUsize>,
    /// The CPUs the worker was started with (None: unreadable, then it is left where it is).
    allowed: Option<Vec<usize>>,
    /// The `caller_cpu` the worker's CPUs were last set for.
    applied: usize,
}

impl KeepOff {
    fn apply(&mut self) {
        let cpu = self.caller_cpu.load(Ordering::Relaxed);
        let Some(allowed) = self.allowed.as_deref().filter(|_| cpu != self.applied) else { return };
        self.applied = cpu;
        let others: Vec<usize> = allowed.iter().copied().filter(|&c| c + 1 != cpu).collect();
        let cpus = if others.is_empty() { allowed } else { &others };
        if let Err(e) = affinity::pin_current(cpus) {
            tracing::debug!("the port reopening thread keeps its CPUs ({e})");
        }
    }
}

impl<J, R, T> Reopener<J, R, T>
where
    J: Send + Sync + 'static,
    R: Send + 'static,
    T: Send + 'static,
{
    /// Starts the worker for `ports` ports, which opens a port with `open` and calls `wake` after
    /// each one (to wake the loop out of its sleep).
    pub fn new(
        ports: usize,
        open: impl Fn(&J) -> R + Send + Sync + 'static,
        wake: impl Fn() + Send + Sync + 'static,
    ) -> std::io::Result<Reopener<J, R, T>> {
        let (jobs, todo) = channel::<Job<J, T>>();
        let (sent, opened) = channel();
        let caller_cpu = Arc::new(AtomicUsize::new(0));
        let mut keep_off = KeepOff { caller_cpu: caller_cpu.clone(), allowed: affinity::allowed().ok(), applied: 0 };
        let work = move || {
            for job in todo {
                keep_off.apply();
                match job {
                    Job::Open(ports) => {
                        fan_out::map(&ports, |(pi, job)| {
                            // The receiver outlives the worker (finish joins it first).
                            let _ = sent.send((*pi, open(job)));
                            wake();
                        });
                    }
                    Job::OpenSerially(ports) => {
                        for (pi, job) in &ports {
                            keep_off.apply(); // the loop may have moved meanwhile
                            let _ = sent.send((*pi, open(job)));
                            wake();
                        }
                    }
                    Job::Close(items) => fan_out::drop_all(items),
                }
            }
        };
        let worker = std::thread::Builder::new().name("p4netem-reopen".into()).spawn(work)?;
        Ok(Reopener {
            jobs: Some(jobs),
            opened,
            opening: vec![false; ports],
            in_flight: 0,
            worker: Some(worker),
            caller_cpu,
        })
    }

    /// Notes the CPU the caller runs on now, for the worker to keep off (once per hand-out:
    /// `sched_getcpu` reads it from the vDSO/rseq area, no system call).
    fn note_caller_cpu(&self) {
        // SAFETY: no arguments; -1 on failure.
        let cpu = unsafe { libc::sched_getcpu() };
        self.caller_cpu.store(if cpu >= 0 { cpu as usize + 1 } else { 0 }, Ordering::Relaxed);
    }

    /// Whether port index `pi` is being opened.
    pub fn is_opening(&self, pi: usize) -> bool {
        self.opening[pi]
    }

    /// Whether any port is being opened (or opened and not yet taken).
    pub fn busy(&self) -> bool {
        self.in_flight > 0
    }

    /// Has each job's port (`(port index, job)`, none of them being opened already) opened on the
    /// worker, all at once, and returns at once.
    pub fn open(&mut self, jobs: Vec<(usize, J)>) {
        self.hand_out(jobs, false);
    }

    /// As `open`, but the worker opens them one after the other: for opens whose cost is CPU work
    /// in the kernel (allocating and zeroing large rings) rather than waits, which, on many threads
    /// at once, would take every CPU for kernel code that a non-preemptible kernel does not
    /// interrupt for the data-plane thread (60 ports' rings of 24 MiB at once held it up to 0.1 s).
    pub fn open_serially(&mut self, jobs: Vec<(usize, J)>) {
        self.hand_out(jobs, true);
    }

    fn hand_out(&mut self, jobs: Vec<(usize, J)>, serially: bool) {
        // Also when there is nothing to hand out (the loop looks for ports to open once a second):
        // the loop may have moved since, and the worker may be opening ports one after the other.
        self.note_caller_cpu();
        if jobs.is_empty() {
            return;
        }
        for &(pi, _) in &jobs {
            debug_assert!(!self.opening[pi], "port index {pi} handed out twice");
            self.opening[pi] = true;
            self.in_flight += 1;
        }
        self.send(if serially { Job::OpenSerially(jobs) } else { Job::Open(jobs) });
    }

    /// The ports opened since the last call, at most `max` (the rest stay for the next call), each
    /// with what opening it gave. Empty (no allocation) when none is ready.
    pub fn opened(&mut self, max: usize) -> Vec<(usize, R)> {
        let mut out = Vec::new();
        while out.len() < max {
            let Ok((pi, r)) = self.opened.try_recv() else { break };
            self.opening[pi] = false;
            self.in_flight -= 1;
            out.push((pi, r));
        }
        out
    }

    /// Drops `items` on the worker, all at once.
    pub fn close(&mut self, items: Vec<T>) {
        if !items.is_empty() {
            self.note_caller_cpu();
            self.send(Job::Close(items));
        }
    }

    fn send(&self, job: Job<J, T>) {
        let sender = self.jobs.as_ref().expect("no job after finish");
        // The worker only ends when the sender goes (finish), or by a panic in `open`, which
        // finish resumes.
        if let Err(e) = sender.send(job) {
            drop(e.0); // closed here then
        }
    }

    /// Waits for the worker to do what it was sent, and hands back what was opened and not taken:
    /// at the data plane's end, before the port locks go (no socket of this switch may outlive
    /// them).
    pub fn finish(&mut self) -> Vec<R> {
        self.jobs = None;
        if let Some(w) = self.worker.take() {
            if let Err(panic) = w.join() {
                std::panic::resume_unwind(panic);
            }
        }
        self.opened(usize::MAX).into_iter().map(|(_, r)| r).collect()
    }
}

impl<J, R, T> Drop for Reopener<J, R, T> {
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::sync::{Condvar, Mutex};
    use std::time::Duration;

    /// Held shut until opened; counts who waits at it at once.
    struct Gate {
        state: Mutex<(bool, usize, usize)>, // (open, waiting now, most waiting at once)
        changed: Condvar,
    }

    impl Gate {
        fn new() -> Arc<Gate> {
            Arc::new(Gate { state: Mutex::new((false, 0, 0)), changed: Condvar::new() })
        }
        fn pass(&self) {
            let mut g = self.state.lock().unwrap();
            g.1 += 1;
            g.2 = g.2.max(g.1);
            self.changed.notify_all();
            let (mut g, _) = self.changed.wait_timeout_while(g, Duration::from_secs(60), |g| !g.0).unwrap();
            g.1 -= 1;
        }
        /// Waits (up to a generous bound) until `n` are waiting at once.
        fn wait_for(&self, n: usize) -> usize {
            let g = self.state.lock().unwrap();
            let (g, _) = self.changed.wait_timeout_while(g, Duration::from_secs(60), |g| g.1 < n).unwrap();
            g.1
        }
        fn open(&self) {
            self.state.lock().unwrap().0 = true;
            self.changed.notify_all();
        }
    }

    /// Takes results until `n` came (waiting for each), at most `max` per call, as the loop does
    /// per turn; returns them and the size of each call's take.
    fn take_all<R: Send + 'static>(
        r: &mut Reopener<String, R, ()>,
        n: usize,
        max: usize,
    ) -> (Vec<(usize, R)>, Vec<usize>) {
        let (mut all, mut takes) = (Vec::new(), Vec::new());
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while all.len() < n {
            assert!(std::time::Instant::now() < deadline, "only {} of {n} opened", all.len());
            let got = r.opened(max);
            if got.is_empty() {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
            takes.push(got.len());
            all.extend(got);
        }
        (all, takes)
    }

    #[test]
    fn ports_open_on_the_worker_at_once_while_the_caller_goes_on() {
        let wakes = Arc::new(AtomicUsize::new(0));
        let (gate, w) = (Gate::new(), wakes.clone());
        let g2 = gate.clone();
        // Every open blocks until the gate opens: open() returning at all shows that the caller
        // does not wait for them.
        let open = move |name: &String| {
            g2.pass();
            format!("{name} open")
        };
        let mut r = Reopener::<String, String, ()>::new(100, open, move || {
            w.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
        let n = 60;
        r.open((0..n).map(|pi| (pi, format!("port{pi}"))).collect());
        assert!(r.busy() && (0..n).all(|pi| r.is_opening(pi)) && !r.is_opening(n));
        // Their waits overlap (as at start): all 60 wait at once.
        assert_eq!(gate.wait_for(n), n);
        assert!(r.opened(PER_TURN).is_empty(), "nothing is opened yet");
        gate.open();
        let (mut all, takes) = take_all(&mut r, n, PER_TURN);
        assert!(takes.iter().all(|&t| t <= PER_TURN), "at most {PER_TURN} a turn: {takes:?}");
        all.sort();
        assert_eq!(all, (0..n).map(|pi| (pi, format!("port{pi} open"))).collect::<Vec<_>>(), "each port once");
        assert!(!r.busy() && (0..n).all(|pi| !r.is_opening(pi)));
        assert_eq!(wakes.load(Ordering::Relaxed), n, "the loop is woken for each port opened");
        // A port can be handed out again once its result is taken.
        r.open(vec![(3, "again".to_string())]);
        assert_eq!(take_all(&mut r, 1, PER_TURN).0, vec![(3, "again open".to_string())]);
        assert!(r.finish().is_empty());
    }

    #[test]
    fn finish_waits_for_the_worker_and_hands_back_what_was_not_taken() {
        struct Old(Arc<AtomicUsize>);
        impl Drop for Old {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
        let gate = Gate::new();
        let g = gate.clone();
        let mut r = Reopener::<usize, usize, Old>::new(
            8,
            move |&j| {
                g.pass();
                j
            },
            || {},
        )
        .unwrap();
        r.open(vec![(2, 20), (5, 50)]);
        gate.wait_for(2);
        let dropped = Arc::new(AtomicUsize::new(0));
        r.close((0..3).map(|_| Old(dropped.clone())).collect());
        assert_eq!(dropped.load(Ordering::Relaxed), 0, "closed on the worker, after the opens before them");
        gate.open();
        let mut left = r.finish();
        left.sort();
        assert_eq!(left, vec![20, 50]);
        assert_eq!(dropped.load(Ordering::Relaxed), 3, "the old items are dropped once finish returns");
        assert!(!r.busy());
    }

    #[test]
    fn the_worker_and_the_threads_it_starts_keep_off_the_callers_cpu() {
        // Run in a thread of its own, so that pinning it touches no other test.
        std::thread::spawn(|| {
            let allowed = affinity::allowed().unwrap();
            if allowed.len() < 2 {
                return; // one CPU: shared, nothing to check
            }
            // The caller (the loop) on the last allowed CPU, then on the first: the worker's own
            // CPUs (a serial open) and those of the threads it starts (opens at once) follow.
            let mut r = Reopener::<usize, Vec<usize>, ()>::new(4, |_| affinity::allowed().unwrap(), || {}).unwrap();
            for caller in [*allowed.last().unwrap(), allowed[0]] {
                affinity::pin_current(&[caller]).unwrap();
                r.open_serially(vec![(0, 0)]);
                r.open(vec![(1, 0), (2, 0), (3, 0)]);
                let all = take_all_cpus(&mut r, 4);
                let expected: Vec<usize> = allowed.iter().copied().filter(|&c| c != caller).collect();
                for (pi, cpus) in all {
                    assert_eq!(cpus, expected, "port {pi} opened on CPUs {cpus:?}, the caller on {caller}");
                }
            }
            assert!(r.finish().is_empty());
        })
        .join()
        .unwrap();
    }

    fn take_all_cpus(r: &mut Reopener<usize, Vec<usize>, ()>, n: usize) -> Vec<(usize, Vec<usize>)> {
        let mut all = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while all.len() < n {
            assert!(std::time::Instant::now() < deadline, "only {} of {n} opened", all.len());
            all.extend(r.opened(PER_TURN));
            std::thread::sleep(Duration::from_millis(5));
        }
        all
    }

    #[test]
    fn serial_opens_are_one_at_a_time_and_each_port_once() {
        let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (n2, m2) = (now.clone(), most.clone());
        let open = move |&j: &usize| {
            m2.fetch_max(n2.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(2));
            n2.fetch_sub(1, Ordering::SeqCst);
            j * 10
        };
        let mut r = Reopener::<usize, usize, ()>::new(40, open, || {}).unwrap();
        r.open_serially((0..40).map(|pi| (pi, pi)).collect());
        assert!(r.busy() && (0..40).all(|pi| r.is_opening(pi)));
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let mut all = Vec::new();
        while all.len() < 40 {
            assert!(std::time::Instant::now() < deadline, "only {} of 40 opened", all.len());
            all.extend(r.opened(PER_TURN));
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(all, (0..40).map(|pi| (pi, pi * 10)).collect::<Vec<_>>(), "in order, each once");
        assert_eq!(most.load(Ordering::SeqCst), 1, "never two at once");
        assert!(!r.busy());
    }
}
