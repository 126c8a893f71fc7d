//! Corruption stage: with `corrupt_prob` one bit, uniform over bytes [14, len), is chosen to be
//! flipped when the frame is written out; counted in `profile_corrupt[pd]`. Like p4src, only the
//! first 9216 bytes (MAX_FRAME_BYTES) are candidates.
use super::{correlation, Ctx, Impairment, Pkt, Stage, Verdict};

const ETH_HDR_BYTES: u32 = 14;
const MAX_FRAME_BYTES: u32 = 9216;

pub struct Corrupt;

impl Stage for Corrupt {
    #[inline]
    fn enqueue(&mut self, imp: &Impairment, ctx: &mut Ctx, pkt: &mut Pkt) -> Verdict {
        if imp.corrupt_prob != 0
            && pkt.len > ETH_HDR_BYTES
            && correlation::chance(ctx, correlation::CORRUPT, imp.corrupt_corr, imp.corrupt_prob)
        {
            let end = pkt.len.min(MAX_FRAME_BYTES);
            let span = (end - ETH_HDR_BYTES) * 8;
            pkt.flip_bit = Some(ETH_HDR_BYTES * 8 + ctx.rng.up_to(span as u64 - 1) as u32);
            ctx.counters.profile_corrupt.add(ctx.pd as usize, pkt.len as u64);
        }
        Verdict::Pass
    }
}

/// Applies a chosen flip to the frame being written out.
#[inline]
pub fn flip(frame: &mut [u8], bit: Option<u32>) {
    if let Some(b) = bit {
        if let Some(byte) = frame.get_mut((b / 8) as usize) {
            *byte ^= 1 << (b % 8);
        }
    }
}
