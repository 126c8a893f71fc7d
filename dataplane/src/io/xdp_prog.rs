//! The XDP program that hands a port's frames to its AF_XDP socket, and the three `bpf(2)` calls
//! that set it up: an XSKMAP, the program, a bpf_link attaching it to the interface.
//!
//! Written as raw eBPF instructions rather than compiled C: the program is 19 instructions, and
//! building it with clang/libbpf would add a toolchain (and, for crates such as aya or libbpf-rs,
//! network access or a vendored libbpf) to every build for no gain. What it does, per frame:
//!
//! ```c
//! u64 now = bpf_ktime_get_ns();                      // CLOCK_MONOTONIC, as the data plane
//! if (bpf_xdp_adjust_meta(ctx, -8) == 0 && ctx->data_meta + 8 <= ctx->data)
//!     *(u64 *)ctx->data_meta = now;                  // copied into the UMEM before the frame
//! return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
//! ```
//!
//! The receive timestamp is what AF_PACKET's ring header gives the other path: delay and rate
//! count from when the frame reached the port, not from when the loop got to it. The link is
//! owned by a file descriptor: when the switch exits, however it exits, the kernel detaches the
//! program (no stale XDP program left on an interface).
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;

// Helper function ids (include/uapi/linux/bpf.h, __BPF_FUNC_MAPPER order).
const FN_KTIME_GET_NS: i32 = 5;
const FN_REDIRECT_MAP: i32 = 51;
const FN_XDP_ADJUST_META: i32 = 54;
const XDP_PASS: i32 = 2;

/// One eBPF instruction: opcode, dst/src registers, offset, immediate.
const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
    code as u64 | ((dst as u64 | (src as u64) << 4) << 8) | ((off as u16 as u64) << 16) | ((imm as u32 as u64) << 32)
}
const MOV64_X: u8 = 0xbf;
const MOV64_K: u8 = 0xb7;
const ADD64_K: u8 = 0x07;
const CALL: u8 = 0x85;
const EXIT: u8 = 0x95;
const JNE_K: u8 = 0x55;
const JGT_X: u8 = 0x2d;
const LDX_W: u8 = 0x61;
const STX_DW: u8 = 0x7b;
const LD_DW_IMM: u8 = 0x18;
const PSEUDO_MAP_FD: u8 = 1;
// struct xdp_md offsets
const MD_DATA: i16 = 0;
const MD_DATA_META: i16 = 8;
const MD_RX_QUEUE: i16 = 16;

/// The program with `map_fd` patched into its map load.
fn program(map_fd: i32) -> [u64; 19] {
    [
        insn(MOV64_X, 6, 1, 0, 0),               // 0: r6 = ctx
        insn(CALL, 0, 0, 0, FN_KTIME_GET_NS),    // 1: r0 = now
        insn(MOV64_X, 7, 0, 0, 0),               // 2: r7 = now
        insn(MOV64_X, 1, 6, 0, 0),               // 3: r1 = ctx
        insn(MOV64_K, 2, 0, 0, -8),              // 4: r2 = -8
        insn(CALL, 0, 0, 0, FN_XDP_ADJUST_META), // 5: adjust_meta(ctx, -8)
        insn(JNE_K, 0, 0, 6, 0),                 // 6: failed -> 13
        insn(LDX_W, 2, 6, MD_DATA_META, 0),      // 7: r2 = data_meta
        insn(LDX_W, 3, 6, MD_DATA, 0),           // 8: r3 = data
        insn(MOV64_X, 4, 2, 0, 0),               // 9: r4 = data_meta
        insn(ADD64_K, 4, 0, 0, 8),               // 10: r4 += 8
        insn(JGT_X, 4, 3, 1, 0),                 // 11: past data -> 13
        insn(STX_DW, 2, 7, 0, 0),                // 12: *data_meta = now
        insn(LDX_W, 2, 6, MD_RX_QUEUE, 0),       // 13: r2 = rx_queue_index
        insn(LD_DW_IMM, 1, PSEUDO_MAP_FD, 0, map_fd), // 14-15: r1 = &xsks
        0,
        insn(MOV64_K, 3, 0, 0, XDP_PASS),        // 16: r3 = XDP_PASS (no socket on that queue)
        insn(CALL, 0, 0, 0, FN_REDIRECT_MAP),    // 17: r0 = redirect_map(...)
        insn(EXIT, 0, 0, 0, 0),                  // 18
    ]
}

/// `union bpf_attr`, large enough for every command used here (the kernel zero-checks the tail).
#[repr(C, align(8))]
struct Attr([u8; 128]);

impl Attr {
    fn new() -> Attr {
        Attr([0; 128])
    }
    fn u32_at(&mut self, off: usize, v: u32) -> &mut Attr {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64_at(&mut self, off: usize, v: u64) -> &mut Attr {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
}

fn bpf(cmd: libc::c_long, attr: &mut Attr) -> io::Result<libc::c_long> {
    // SAFETY: attr is a valid, initialised bpf_attr-sized buffer for the duration of the call.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut Attr, std::mem::size_of::<Attr>() as u32) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn owned(fd: libc::c_long) -> OwnedFd {
    // SAFETY: fd is a fresh descriptor returned by bpf(2); ownership is taken here only.
    unsafe { OwnedFd::from_raw_fd(fd as i32) }
}

/// The program attached to one interface, redirecting queue 0 to one AF_XDP socket. Dropping it
/// detaches the program (the link fd closes) and frees the map.
pub struct XdpRedirect {
    _link: OwnedFd,
    _prog: OwnedFd,
    _map: OwnedFd,
}

impl XdpRedirect {
    /// Loads the program with an XSKMAP holding `xsk_fd` at queue 0 and attaches it to `ifindex`
    /// at the generic XDP hook.
    pub fn attach(ifindex: i32, xsk_fd: i32) -> io::Result<XdpRedirect> {
        let map = owned(bpf(
            BPF_MAP_CREATE,
            Attr::new().u32_at(0, BPF_MAP_TYPE_XSKMAP).u32_at(4, 4).u32_at(8, 4).u32_at(12, 1),
        )
        .map_err(|e| io::Error::new(e.kind(), format!("creating the XSKMAP: {e}")))?);
        let (key, value) = (0u32, xsk_fd as u32);
        let mut upd = Attr::new();
        upd.u32_at(0, map.as_raw_fd() as u32)
            .u64_at(8, &key as *const u32 as u64)
            .u64_at(16, &value as *const u32 as u64);
        bpf(BPF_MAP_UPDATE_ELEM, &mut upd).map_err(|e| io::Error::new(e.kind(), format!("XSKMAP update: {e}")))?;
        let insns = program(map.as_raw_fd());
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
            a.0[48..48 + 10].copy_from_slice(b"p4netem_xs");
            bpf(BPF_PROG_LOAD, &mut a)
        };
        let prog = match load(&mut []) {
            Ok(fd) => owned(fd),
            Err(e) => {
                // Load again with the verifier's log, for the error message only.
                let mut log = vec![0u8; 16 * 1024];
                if let Ok(fd) = load(&mut log) {
                    drop(owned(fd));
                }
                let text = String::from_utf8_lossy(&log[..log.iter().position(|&b| b == 0).unwrap_or(0)]).trim().to_string();
                return Err(io::Error::new(e.kind(), format!("loading the XDP program: {e} {text}")));
            }
        };
        // The generic (skb) hook, not the driver's: native XDP on a veth caps the MTU of its peer
        // (the user's host) at what fits a page and switches the pair to NAPI mode, side effects
        // a switch must not have on the hosts it serves. On veth both modes copy the frame anyway.
        let link = owned(
            bpf(
                BPF_LINK_CREATE,
                Attr::new().u32_at(0, prog.as_raw_fd() as u32).u32_at(4, ifindex as u32).u32_at(8, BPF_XDP).u32_at(12, XDP_FLAGS_SKB_MODE),
            )
            .map_err(|e| io::Error::new(e.kind(), format!("attaching XDP (generic mode): {e}")))?,
        );
        Ok(XdpRedirect { _link: link, _prog: prog, _map: map })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_encode_as_the_kernel_expects() {
        // r6 = r1: opcode 0xbf, dst 6, src 1.
        assert_eq!(insn(MOV64_X, 6, 1, 0, 0), 0x16bf);
        // r2 = -8: the immediate is sign-extended 32 bits in the high word.
        assert_eq!(insn(MOV64_K, 2, 0, 0, -8), 0xffff_fff8_0000_02b7);
        // if r4 > r3 goto +1
        assert_eq!(insn(JGT_X, 4, 3, 1, 0), 0x0001_342d);
        let p = program(7);
        assert_eq!(p[14] >> 32, 7, "map fd in the wide load");
        assert_eq!((p[14] >> 12) & 0xf, PSEUDO_MAP_FD as u64);
        // Both branches land on the redirect (instruction 13).
        assert_eq!(6 + 1 + ((p[6] >> 16) as i16) as usize, 13);
        assert_eq!(11 + 1 + ((p[11] >> 16) as i16) as usize, 13);
    }
}
