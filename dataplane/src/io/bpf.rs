//! The `bpf(2)` calls and eBPF instruction encoding the switch's two XDP programs share
//! (xdp_prog.rs: the AF_XDP redirect; flow_cache.rs: the kernel fast path): map creation,
//! element updates, program load with the verifier's log on failure, attach through a bpf_link,
//! and a tiny assembler with named jump targets.
//!
//! Raw instructions instead of C compiled by clang: the programs are short, the build needs no
//! BPF toolchain, and loading needs no ELF relocation (the one map reference per load is patched
//! here). The kernel's verifier checks every program at load; the unit tests load them.
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

pub const BPF_MAP_CREATE: libc::c_long = 0;
pub const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
pub const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
pub const BPF_PROG_LOAD: libc::c_long = 5;
#[cfg(test)]
pub const BPF_PROG_TEST_RUN: libc::c_long = 10;
pub const BPF_LINK_CREATE: libc::c_long = 28;

pub const BPF_MAP_TYPE_ARRAY: u32 = 2;
pub const BPF_MAP_TYPE_LRU_HASH: u32 = 9;
pub const BPF_MAP_TYPE_XSKMAP: u32 = 17;
/// map_flags: the array's values can be mmap()ed by user space (kernel 5.5+).
pub const BPF_F_MMAPABLE: u32 = 1 << 10;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
pub const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;

// Helper function ids (include/uapi/linux/bpf.h, __BPF_FUNC_MAPPER order).
pub const FN_MAP_LOOKUP_ELEM: i32 = 1;
pub const FN_KTIME_GET_NS: i32 = 5;
pub const FN_REDIRECT: i32 = 23;
pub const FN_REDIRECT_MAP: i32 = 51;
pub const FN_XDP_ADJUST_META: i32 = 54;
pub const XDP_PASS: i32 = 2;

/// One eBPF instruction: opcode, dst/src registers, offset, immediate.
pub const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
    code as u64 | ((dst as u64 | (src as u64) << 4) << 8) | ((off as u16 as u64) << 16) | ((imm as u32 as u64) << 32)
}
pub const MOV64_X: u8 = 0xbf;
pub const MOV64_K: u8 = 0xb7;
pub const ADD64_K: u8 = 0x07;
pub const SUB64_X: u8 = 0x1f;
pub const AND64_K: u8 = 0x57;
pub const RSH64_K: u8 = 0x77;
pub const LSH64_K: u8 = 0x67;
pub const OR64_X: u8 = 0x4f;
pub const CALL: u8 = 0x85;
pub const EXIT: u8 = 0x95;
pub const JEQ_K: u8 = 0x15;
pub const JNE_K: u8 = 0x55;
pub const JNE_X: u8 = 0x5d;
pub const JGT_X: u8 = 0x2d;
pub const LDX_B: u8 = 0x71;
pub const LDX_H: u8 = 0x69;
pub const LDX_W: u8 = 0x61;
pub const STX_W: u8 = 0x63;
pub const STX_DW: u8 = 0x7b;
pub const ST_W: u8 = 0x62;
/// `lock *(u64 *)(dst + off) += src` (BPF_STX | BPF_ATOMIC | BPF_DW, imm BPF_ADD).
pub const ATOMIC_DW: u8 = 0xdb;
pub const LD_DW_IMM: u8 = 0x18;
pub const PSEUDO_MAP_FD: u8 = 1;
/// The frame pointer register (read-only; the stack grows down from it).
pub const FP: u8 = 10;

/// Instructions with forward jumps to named labels, resolved by [`Asm::finish`].
#[derive(Default)]
pub struct Asm {
    insns: Vec<u64>,
    labels: Vec<(&'static str, usize)>,
    fixups: Vec<(usize, &'static str)>,
}

impl Asm {
    pub fn op(&mut self, code: u8, dst: u8, src: u8, off: i16, imm: i32) -> &mut Asm {
        self.insns.push(insn(code, dst, src, off, imm));
        self
    }
    /// A conditional (or, with code 0x05, unconditional) jump to `label`.
    pub fn jmp(&mut self, code: u8, dst: u8, src: u8, imm: i32, label: &'static str) -> &mut Asm {
        self.fixups.push((self.insns.len(), label));
        self.op(code, dst, src, 0, imm)
    }
    /// `dst = &map` (the two-slot wide load the kernel patches with the map's address).
    pub fn ld_map(&mut self, dst: u8, map_fd: i32) -> &mut Asm {
        self.op(LD_DW_IMM, dst, PSEUDO_MAP_FD, 0, map_fd);
        self.insns.push(0);
        self
    }
    pub fn label(&mut self, name: &'static str) -> &mut Asm {
        self.labels.push((name, self.insns.len()));
        self
    }
    /// The program, every jump's offset set (relative to the next instruction).
    pub fn finish(mut self) -> Vec<u64> {
        for &(at, name) in &self.fixups {
            let target = self.labels.iter().find(|l| l.0 == name).unwrap_or_else(|| panic!("no label {name}")).1;
            let off = target as i64 - at as i64 - 1;
            assert!(off >= 0 && off <= i16::MAX as i64, "jump to {name} must go forward");
            self.insns[at] = (self.insns[at] & !(0xffff << 16)) | ((off as u16 as u64) << 16);
        }
        self.insns
    }
}

/// `union bpf_attr`, large enough for every command used here (the kernel zero-checks the tail).
#[repr(C, align(8))]
pub struct Attr(pub [u8; 128]);

impl Attr {
    pub fn new() -> Attr {
        Attr([0; 128])
    }
    pub fn u32_at(&mut self, off: usize, v: u32) -> &mut Attr {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    pub fn u64_at(&mut self, off: usize, v: u64) -> &mut Attr {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
}

pub fn bpf(cmd: libc::c_long, attr: &mut Attr) -> io::Result<libc::c_long> {
    // SAFETY: attr is a valid, initialised bpf_attr-sized buffer for the duration of the call.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut Attr, std::mem::size_of::<Attr>() as u32) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

pub fn owned(fd: libc::c_long) -> OwnedFd {
    // SAFETY: fd is a fresh descriptor returned by bpf(2); ownership is taken here only.
    unsafe { OwnedFd::from_raw_fd(fd as i32) }
}

/// Creates a map; `name` (at most 15 bytes) shows in bpftool.
pub fn map_create(
    kind: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    flags: u32,
    name: &str,
) -> io::Result<OwnedFd> {
    let mut a = Attr::new();
    a.u32_at(0, kind).u32_at(4, key_size).u32_at(8, value_size).u32_at(12, max_entries).u32_at(16, flags);
    let n = name.len().min(15);
    a.0[28..28 + n].copy_from_slice(&name.as_bytes()[..n]);
    bpf(BPF_MAP_CREATE, &mut a)
        .map(owned)
        .map_err(|e| io::Error::new(e.kind(), format!("creating BPF map {name}: {e}")))
}

/// `BPF_MAP_UPDATE_ELEM` with BPF_ANY (insert or replace).
pub fn map_update(map: &OwnedFd, key: &[u8], value: &[u8]) -> io::Result<()> {
    let mut a = Attr::new();
    a.u32_at(0, map.as_raw_fd() as u32).u64_at(8, key.as_ptr() as u64).u64_at(16, value.as_ptr() as u64);
    bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(|_| ())
}

/// `BPF_MAP_LOOKUP_ELEM` into `value` (its length must be the map's value size).
pub fn map_lookup(map: &OwnedFd, key: &[u8], value: &mut [u8]) -> io::Result<()> {
    let mut a = Attr::new();
    a.u32_at(0, map.as_raw_fd() as u32).u64_at(8, key.as_ptr() as u64).u64_at(16, value.as_mut_ptr() as u64);
    bpf(BPF_MAP_LOOKUP_ELEM, &mut a).map(|_| ())
}

/// Loads an XDP program (GPL-compatible licence: bpf_redirect* need it). On failure the error
/// carries the verifier's log.
pub fn prog_load_xdp(insns: &[u64], name: &str) -> io::Result<OwnedFd> {
    let license = c"Dual BSD/GPL";
    let load = |log: &mut [u8]| {
        let mut a = Attr::new();
        a.u32_at(0, BPF_PROG_TYPE_XDP)
            .u32_at(4, insns.len() as u32)
            .u64_at(8, insns.as_ptr() as u64)
            .u64_at(16, license.as_ptr() as u64)
            .u32_at(24, if log.is_empty() { 0 } else { 1 })
            .u32_at(28, log.len() as u32)
            // No buffer at all without a log: a pointer with size 0 is EINVAL.
            .u64_at(32, if log.is_empty() { 0 } else { log.as_mut_ptr() as u64 })
            .u32_at(68, BPF_XDP); // expected_attach_type (after prog_name[16], prog_ifindex)
        let n = name.len().min(15);
        a.0[48..48 + n].copy_from_slice(&name.as_bytes()[..n]);
        bpf(BPF_PROG_LOAD, &mut a)
    };
    match load(&mut []) {
        Ok(fd) => Ok(owned(fd)),
        Err(e) => {
            // Load again with the verifier's log, for the error message only.
            let mut log = vec![0u8; 64 * 1024];
            if let Ok(fd) = load(&mut log) {
                drop(owned(fd));
            }
            let text =
                String::from_utf8_lossy(&log[..log.iter().position(|&b| b == 0).unwrap_or(0)]).trim().to_string();
            Err(io::Error::new(e.kind(), format!("loading the XDP program {name}: {e} {text}")))
        }
    }
}

/// Attaches `prog` to `ifindex` at the generic (skb) XDP hook; the program stays attached as long
/// as the returned link fd is open (so the kernel detaches it however the switch exits).
pub fn link_xdp_generic(prog: &OwnedFd, ifindex: i32) -> io::Result<OwnedFd> {
    bpf(
        BPF_LINK_CREATE,
        Attr::new()
            .u32_at(0, prog.as_raw_fd() as u32)
            .u32_at(4, ifindex as u32)
            .u32_at(8, BPF_XDP)
            .u32_at(12, XDP_FLAGS_SKB_MODE),
    )
    .map(owned)
    .map_err(|e| io::Error::new(e.kind(), format!("attaching XDP (generic mode): {e}")))
}

/// Runs `prog` once on `frame` with an `xdp_md` whose ingress is `ifindex` (BPF_PROG_TEST_RUN):
/// the program's return value. A redirect is returned, not carried out.
#[cfg(test)]
pub fn test_run_xdp(prog: &OwnedFd, frame: &[u8], ifindex: u32) -> io::Result<u32> {
    // struct xdp_md: data, data_end, data_meta, ingress_ifindex, rx_queue_index, egress_ifindex.
    let ctx: [u32; 6] = [0, frame.len() as u32, 0, ifindex, 0, 0];
    let mut a = Attr::new();
    a.u32_at(0, prog.as_raw_fd() as u32)
        .u32_at(8, frame.len() as u32)
        .u64_at(16, frame.as_ptr() as u64)
        .u32_at(32, 1)
        .u32_at(40, std::mem::size_of_val(&ctx) as u32)
        .u64_at(48, ctx.as_ptr() as u64);
    bpf(BPF_PROG_TEST_RUN, &mut a)?;
    Ok(u32::from_ne_bytes(a.0[4..8].try_into().unwrap()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_resolve_to_relative_forward_offsets() {
        let mut a = Asm::default();
        a.jmp(JEQ_K, 1, 0, 0, "end").ld_map(1, 5).op(MOV64_K, 0, 0, 0, 1).label("end").op(EXIT, 0, 0, 0, 0);
        let p = a.finish();
        assert_eq!(p.len(), 5);
        // From instruction 0, the exit is 3 further on than the next instruction (the wide load is two).
        assert_eq!((p[0] >> 16) as i16, 3);
    }
}
