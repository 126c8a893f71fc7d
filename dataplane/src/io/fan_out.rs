//! Opening and closing many ports at once: the per-port set-up and tear-down run on a handful of
//! short-lived threads instead of one port after the other.
//!
//! Most of a port's set-up and tear-down is spent asleep in the kernel, waiting for an RCU grace
//! period: AF_PACKET's PACKET_RX_RING and PACKET_TX_RING each call synchronize_net(), and the
//! socket's release (when its rings are unmapped) three more times; AF_XDP's socket release and
//! the attach and detach of its XDP program one each. A grace period took 8-40 ms on a 2-vCPU VM
//! (HZ 250), more under load, so one port after the other 509 ports with small rings took 12.5 s
//! to open and 19 s to close; now 0.3 s each. Callers that wait at the same time share the same grace periods: on
//! [`MAX_THREADS`] threads, 509 ports wait through a few of them together (docs/dataplane.md,
//! "Many ports"). The CPU work in between (the kernel zeroing each port's ring memory) is no
//! more than it was.
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

/// At most this many threads (the caller's included) work on the items at once: enough for 512
/// ports to wait through grace periods in 4 rounds, few enough that starting them costs little.
pub const MAX_THREADS: usize = 128;

/// `f` of every item, in the items' order, computed on up to [`MAX_THREADS`] threads at once: the
/// caller's and helpers started for the call and joined before it returns. A helper that cannot be
/// started leaves its share to the others (the caller's thread always works), so the result does
/// not depend on how many could start. Helpers run with normal scheduling, whatever the caller's
/// (the data-plane thread, real-time, closes the ports at its end). A panic in `f` is resumed in
/// the caller.
pub fn map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    // Each worker takes the next item not yet taken, until none is left.
    let work = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(item) = items.get(i) else { return done };
            done.push((i, f(item)));
        }
    };
    let mut results: Vec<Option<R>> = items.iter().map(|_| None).collect();
    std::thread::scope(|s| {
        let helpers: Vec<_> = (1..items.len().min(MAX_THREADS))
            .map_while(|_| {
                let helper = || {
                    normal_scheduling();
                    work()
                };
                std::thread::Builder::new().name("p4netem-ports".into()).spawn_scoped(s, helper).ok()
            })
            .collect();
        let mut all = work();
        for h in helpers {
            match h.join() {
                Ok(done) => all.extend(done),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        for (i, r) in all {
            results[i] = Some(r);
        }
    });
    results.into_iter().map(|r| r.expect("every item is taken by one worker")).collect()
}

/// Puts the calling thread in SCHED_OTHER, which a thread may always do (a thread inherits its
/// creator's policy, SCHED_FIFO for the data-plane thread's).
fn normal_scheduling() {
    let p = libc::sched_param { sched_priority: 0 };
    // SAFETY: sets the calling thread's policy; p is a valid sched_param.
    unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_OTHER, &p) };
}

/// Drops every item, on up to [`MAX_THREADS`] threads at once (as [`map`]); returns when all are
/// dropped.
pub fn drop_all<T: Send>(items: Vec<T>) {
    if items.len() < 2 {
        return; // dropped here: no thread to start for one
    }
    let slots: Vec<Mutex<Option<T>>> = items.into_iter().map(|t| Mutex::new(Some(t))).collect();
    map(&slots, |slot| drop(slot.lock().unwrap_or_else(PoisonError::into_inner).take()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Condvar};
    use std::time::Duration;

    /// Counts the items being worked on at the same time: each waits (up to a generous bound) for
    /// `want` to be in at once, so a run one item after the other is seen as a peak of 1, not as a
    /// hang or a timing.
    struct Rendezvous {
        inside: Mutex<(usize, usize)>, // (now, peak)
        changed: Condvar,
        want: usize,
    }

    impl Rendezvous {
        fn new(want: usize) -> Arc<Rendezvous> {
            Arc::new(Rendezvous { inside: Mutex::new((0, 0)), changed: Condvar::new(), want })
        }
        fn visit(&self) {
            let mut g = self.inside.lock().unwrap();
            g.0 += 1;
            g.1 = g.1.max(g.0);
            self.changed.notify_all();
            let (mut g, _) = self.changed.wait_timeout_while(g, Duration::from_secs(30), |g| g.1 < self.want).unwrap();
            g.0 -= 1;
        }
        fn peak(&self) -> usize {
            self.inside.lock().unwrap().1
        }
    }

    #[test]
    fn results_come_in_the_items_order_and_work_overlaps() {
        let items: Vec<usize> = (0..300).collect();
        let r = Rendezvous::new(MAX_THREADS);
        let out = map(&items, |&i| {
            r.visit();
            i * 2
        });
        assert_eq!(out, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        assert_eq!(r.peak(), MAX_THREADS, "items worked on at once");
    }

    #[test]
    fn no_more_threads_than_items() {
        let r = Rendezvous::new(3);
        assert_eq!(
            map(&[1, 2, 3], |&i| {
                r.visit();
                i
            }),
            vec![1, 2, 3]
        );
        assert_eq!(r.peak(), 3);
        assert_eq!(map(&[] as &[u8], |&i| i), Vec::<u8>::new());
    }

    #[test]
    fn drop_all_drops_every_item_at_once() {
        struct Item(Arc<Rendezvous>, Arc<AtomicUsize>);
        impl Drop for Item {
            fn drop(&mut self) {
                self.0.visit();
                self.1.fetch_add(1, Ordering::Relaxed);
            }
        }
        let (r, dropped) = (Rendezvous::new(50), Arc::new(AtomicUsize::new(0)));
        drop_all((0..50).map(|_| Item(r.clone(), dropped.clone())).collect());
        assert_eq!(dropped.load(Ordering::Relaxed), 50);
        assert_eq!(r.peak(), 50, "dropped at once, not one after the other");
    }

    #[test]
    fn helpers_of_a_real_time_caller_run_with_normal_scheduling() {
        std::thread::spawn(|| {
            let p = libc::sched_param { sched_priority: 1 };
            // SAFETY: sets this test thread's policy; p is a valid sched_param.
            if unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &p) } != 0 {
                eprintln!("SCHED_FIFO not permitted here: nothing to check");
                return;
            }
            let r = Rendezvous::new(4);
            let policies = map(&[0; 4], |_| {
                r.visit(); // four threads at once: the caller and three helpers
                           // SAFETY: reads the calling thread's policy.
                unsafe { libc::sched_getscheduler(0) }
            });
            let fifo = policies.iter().filter(|&&p| p == libc::SCHED_FIFO).count();
            let other = policies.iter().filter(|&&p| p == libc::SCHED_OTHER).count();
            assert_eq!((fifo, other), (1, 3), "{policies:?}");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_panic_in_a_worker_reaches_the_caller() {
        let items: Vec<usize> = (0..20).collect();
        let caught = std::panic::catch_unwind(|| map(&items, |&i| assert!(i != 13, "item 13")));
        let msg = caught.unwrap_err();
        let text = msg.downcast_ref::<String>().map(String::as_str).or(msg.downcast_ref::<&str>().copied());
        assert!(text.is_some_and(|t| t.contains("item 13")), "{text:?}");
    }
}
