//! Duplication stage: with `dup_prob` the packet is marked for a copy, counted in
//! `profile_dup[pd]`. The copy itself is never duplicated again.
use super::{correlation, Ctx, Impairment, Pkt, Stage, Verdict};

pub struct Duplicate;

impl Stage for Duplicate {
    #[inline]
    fn enqueue(&mut self, imp: &Impairment, ctx: &mut Ctx, pkt: &mut Pkt) -> Verdict {
        if !pkt.is_copy && imp.dup_prob != 0 && correlation::chance(ctx, correlation::DUP, imp.dup_corr, imp.dup_prob) {
            pkt.duplicate = true;
            ctx.counters.profile_dup.add(ctx.pd as usize, pkt.len as u64);
        }
        Verdict::Pass
    }
}
