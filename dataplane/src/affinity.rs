//! Where the switch's threads may run (`--dataplane-cpu`): the data-plane thread alone on one CPU,
//! the switch's other threads (main, P4Runtime, TX threads) on the rest of the CPUs the process
//! was given.
//!
//! Why: on a kernel without full preemption (this VM's runs `preempt=none`), a task in a system
//! call on the data-plane thread's CPU holds off that SCHED_FIFO thread's wake-up until the call
//! yields, tens of microseconds for a veth `sendto` that runs a receiver's stack. A CPU of its own
//! keeps other work off it, as DPDK- and VPP-style switches pin their workers. What it cannot do
//! is make a hypervisor run that CPU (docs/benchmarks.md, "Where the late probes were").
use std::io;

/// The CPUs the calling thread may run on (its affinity mask), in ascending order.
pub fn allowed() -> io::Result<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is an empty set; sched_getaffinity fills at most its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is the calling thread; the size is the set's own.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: CPU_ISSET reads the set within CPU_SETSIZE.
    Ok((0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect())
}

/// Restricts the calling thread to `cpus` (threads it starts afterwards inherit the mask).
pub fn pin_current(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: as in `allowed`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        if c >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("CPU {c} out of range")));
        }
        // SAFETY: c is below CPU_SETSIZE.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: pid 0 is the calling thread; the set is initialised.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Where `--dataplane-cpu cpu` sends the switch's other threads: the CPUs the process may use
/// (`allowed`) but `cpu`; empty when `cpu` is the only one (they then share it, below the data
/// plane's real-time priority). A CPU outside `allowed` is an error naming the option and the
/// allowed list.
pub fn others(cpu: usize, allowed: &[usize]) -> Result<Vec<usize>, String> {
    if !allowed.contains(&cpu) {
        return Err(format!(
            "--dataplane-cpu {cpu}: not a CPU this process may run on (allowed: {})",
            cpu_list(allowed)
        ));
    }
    Ok(allowed.iter().copied().filter(|&c| c != cpu).collect())
}

/// A CPU list as the kernel writes one (`0-3,6`).
pub fn cpu_list(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if j == i { cpus[i].to_string() } else { format!("{}-{}", cpus[i], cpus[j]) });
        i = j + 1;
    }
    if out.is_empty() {
        "none".into()
    } else {
        out.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_read_as_the_kernel_writes_them() {
        assert_eq!(cpu_list(&[0, 1, 2, 3, 6]), "0-3,6");
        assert_eq!(cpu_list(&[1]), "1");
        assert_eq!(cpu_list(&[0, 2, 4]), "0,2,4");
        assert_eq!(cpu_list(&[]), "none");
    }

    #[test]
    fn placement_splits_the_allowed_cpus() {
        assert_eq!(others(1, &[0, 1, 2]).unwrap(), vec![0, 2]);
        assert_eq!(others(3, &[3]).unwrap(), Vec::<usize>::new());
        let e = others(5, &[0, 1]).unwrap_err();
        assert!(e.contains("--dataplane-cpu 5") && e.contains("allowed: 0-1"), "{e}");
    }

    #[test]
    fn a_thread_pinned_reports_its_mask() {
        let all = allowed().unwrap();
        assert!(!all.is_empty());
        let one = *all.last().unwrap();
        let got = std::thread::spawn(move || {
            pin_current(&[one]).unwrap();
            allowed().unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(got, vec![one]);
        assert_eq!(allowed().unwrap(), all, "pinning a thread leaves the others' masks alone");
    }
}
