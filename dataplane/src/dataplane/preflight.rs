//! Checks made at start before anything is allocated or opened: the capacities the flags ask for
//! against the machine's memory (main.rs, before the packet pool exists), and the ports' offloads
//! (`DataPlane::open`, before any port opens). Apart from the loop: each runs once, and refuses
//! with an error naming the flag or the interface and its fix.
use anyhow::{bail, Context as _};

use super::PortSpec;
use crate::io::ethtool;

/// RAM plus swap, in bytes (sysinfo(2)): what the kernel's default overcommit heuristic lets one
/// allocation reserve at most. None when it cannot be read, or when the kernel overcommits
/// without a check (vm.overcommit_memory = 1).
pub fn system_memory() -> Option<u64> {
    if std::fs::read_to_string("/proc/sys/vm/overcommit_memory").is_ok_and(|m| m.trim() == "1") {
        return None;
    }
    // SAFETY: sysinfo fills the zeroed struct it is given.
    let mut si: libc::sysinfo = unsafe { std::mem::zeroed() };
    // SAFETY: si is a valid, writable struct sysinfo.
    if unsafe { libc::sysinfo(&mut si) } != 0 {
        return None;
    }
    let unit = si.mem_unit.max(1) as u64;
    Some((si.totalram as u64).saturating_add(si.totalswap as u64).saturating_mul(unit))
}

/// Refuses a capacity whose allocation (`needs`: what it is, bytes) exceeds `memory` bytes,
/// naming the flag and both sizes.
pub fn check_memory(needs: &[(&str, u128)], memory: u64) -> Result<(), String> {
    const GIB: f64 = (1u64 << 30) as f64;
    match needs.iter().find(|(_, bytes)| *bytes > memory as u128) {
        Some((what, bytes)) => Err(format!(
            "{what} would need {:.1} GiB in one allocation, more than this machine's memory ({:.1} GiB of RAM and \
             swap): lower it",
            *bytes as f64 / GIB,
            memory as f64 / GIB
        )),
        None => Ok(()),
    }
}

/// Checks the offloads of every port; one error naming every bad interface and its fix.
pub fn check_offloads(ports: &[PortSpec]) -> anyhow::Result<()> {
    let mut problems = Vec::new();
    for p in ports {
        let problem =
            ethtool::offload_problem(&p.ifname).with_context(|| format!("port {}: {}", p.number, p.ifname))?;
        problems.extend(problem);
    }
    if !problems.is_empty() {
        bail!("{}", problems.join("\n"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_memory_names_the_flag_that_asks_for_too_much() {
        let gib = 1u64 << 30;
        let needs = [("--buffers x --buffer-size", 128u128 << 20), ("--ue-ids", 64u128 << 30)];
        let e = check_memory(&needs, 23 * gib).unwrap_err();
        assert!(e.starts_with("--ue-ids would need 64.0 GiB"), "{e}");
        assert!(e.contains("(23.0 GiB of RAM and swap)"), "{e}");
        assert!(check_memory(&needs, 65 * gib).is_ok());
        let always = std::fs::read_to_string("/proc/sys/vm/overcommit_memory").is_ok_and(|m| m.trim() == "1");
        assert!(always || system_memory().is_some_and(|m| m > 0));
    }
}
