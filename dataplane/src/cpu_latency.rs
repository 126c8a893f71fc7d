//! The switch's CPU wake-up latency request (Linux PM QoS, `/dev/cpu_dma_latency`), held for as
//! long as the switch runs.
//!
//! Why: every timed thing the switch does ends in a wake-up of a sleeping thread on an idle CPU:
//! the data-plane loop's sleep before a release, a P4Runtime request reaching the gRPC thread,
//! the reply reaching the controller. An idle CPU sits in an idle state, and leaving it costs its
//! exit latency; on a virtual machine the idle state is a halted vCPU that the hypervisor has to
//! schedule again. Measured on this project's 2-vCPU Firecracker VM (cpuidle driver `haltpoll`
//! with its guest polling off; docs/dataplane.md "CPU wake-up latency"), quiet machine, same
//! hour, without and with a request of 0 us: one-entry MODIFY round trip p99 1.15-3.38 ms against
//! 0.23-0.30 ms, netem-slot release error p99 2953 and 4201 us against a median of 41.5 us over 15
//! runs (31.6-539 us), and the kernel's steal time during those runs 4-26 % of the wall clock
//! against 0.1-1.7 %.
//!
//! This is the kernel's own interface for it (Documentation/power/pm_qos_interface.rst): the
//! request holds while the file stays open and is removed when it is closed, by us or by the
//! kernel when the process dies, so nothing outlives the switch. Requests of several processes
//! combine to their minimum. A request of 0 keeps idle CPUs in the polling state: they answer a
//! wake-up at once but draw full power, as `cyclictest` and tuned's latency profiles do. A larger
//! value allows the idle states that exit within it (on bare metal C1 exits in about 2 us).
use std::fs::{File, OpenOptions};
use std::io::Write as _;

const PM_QOS_DEVICE: &str = "/dev/cpu_dma_latency";

/// An open PM QoS request; dropping it (or the process ending) removes it.
#[derive(Debug)]
pub struct CpuLatencyRequest {
    _file: File,
}

/// Asks every CPU to wake within `us` microseconds for as long as the returned value lives.
pub fn hold(us: u64) -> std::io::Result<CpuLatencyRequest> {
    let us = i32::try_from(us).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let mut file = OpenOptions::new().write(true).open(PM_QOS_DEVICE)?;
    // The device takes a binary s32 (or a hex string); one write sets the request.
    file.write_all(&us.to_ne_bytes())?;
    Ok(CpuLatencyRequest { _file: file })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;

    /// The combined request in force (the kernel answers a read with it).
    fn in_force() -> Option<i32> {
        let mut buf = [0u8; 4];
        File::open(PM_QOS_DEVICE).and_then(|mut f| f.read_exact(&mut buf)).ok()?;
        Some(i32::from_ne_bytes(buf))
    }

    /// Ours is in force while held and gone when dropped (the value before comes back). Skipped
    /// where the device is missing or not writable (not root).
    #[test]
    fn a_held_request_is_in_force_until_dropped() {
        let Some(before) = in_force() else { return };
        let Ok(req) = hold(0) else { return };
        assert_eq!(in_force(), Some(0), "a request of 0 us is the minimum of all requests");
        drop(req);
        assert_eq!(in_force(), Some(before), "the request ends with its file");
    }
}
