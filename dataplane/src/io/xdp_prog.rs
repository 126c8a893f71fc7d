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
use std::os::fd::{AsRawFd, OwnedFd};

use super::bpf::*;

// struct xdp_md offsets
const MD_DATA: i16 = 0;
const MD_DATA_META: i16 = 8;
const MD_RX_QUEUE: i16 = 16;

/// The program with `map_fd` patched into its map load.
fn program(map_fd: i32) -> [u64; 19] {
    [
        insn(MOV64_X, 6, 1, 0, 0),                    // 0: r6 = ctx
        insn(CALL, 0, 0, 0, FN_KTIME_GET_NS),         // 1: r0 = now
        insn(MOV64_X, 7, 0, 0, 0),                    // 2: r7 = now
        insn(MOV64_X, 1, 6, 0, 0),                    // 3: r1 = ctx
        insn(MOV64_K, 2, 0, 0, -8),                   // 4: r2 = -8
        insn(CALL, 0, 0, 0, FN_XDP_ADJUST_META),      // 5: adjust_meta(ctx, -8)
        insn(JNE_K, 0, 0, 6, 0),                      // 6: failed -> 13
        insn(LDX_W, 2, 6, MD_DATA_META, 0),           // 7: r2 = data_meta
        insn(LDX_W, 3, 6, MD_DATA, 0),                // 8: r3 = data
        insn(MOV64_X, 4, 2, 0, 0),                    // 9: r4 = data_meta
        insn(ADD64_K, 4, 0, 0, 8),                    // 10: r4 += 8
        insn(JGT_X, 4, 3, 1, 0),                      // 11: past data -> 13
        insn(STX_DW, 2, 7, 0, 0),                     // 12: *data_meta = now
        insn(LDX_W, 2, 6, MD_RX_QUEUE, 0),            // 13: r2 = rx_queue_index
        insn(LD_DW_IMM, 1, PSEUDO_MAP_FD, 0, map_fd), // 14-15: r1 = &xsks
        0,
        insn(MOV64_K, 3, 0, 0, XDP_PASS), // 16: r3 = XDP_PASS (no socket on that queue)
        insn(CALL, 0, 0, 0, FN_REDIRECT_MAP), // 17: r0 = redirect_map(...)
        insn(EXIT, 0, 0, 0, 0),           // 18
    ]
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
        let map = map_create(BPF_MAP_TYPE_XSKMAP, 4, 4, 1, 0, "p4netem_xsks")?;
        let (key, value) = (0u32, xsk_fd as u32);
        map_update(&map, &key.to_ne_bytes(), &value.to_ne_bytes())
            .map_err(|e| io::Error::new(e.kind(), format!("XSKMAP update: {e}")))?;
        let prog = prog_load_xdp(&program(map.as_raw_fd()), "p4netem_xs")?;
        // The generic (skb) hook, not the driver's: native XDP on a veth caps the MTU of its peer
        // (the user's host) at what fits a page and switches the pair to NAPI mode, side effects
        // a switch must not have on the hosts it serves. On veth both modes copy the frame anyway.
        let link = link_xdp_generic(&prog, ifindex)?;
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
