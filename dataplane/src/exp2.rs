//! a * 2^-x in fixed point, without division or floating point: the arithmetic p4src's `Exp2Neg`
//! (p4src/include/exp2.p4) does, bit for bit. Used by the PF bearers' decaying average
//! (stage/bearer.rs `pf_decay`) and the on/off link (stage/onoff.rs).

/// 2^(-2^j/256) in Q32 for j = 0..7: the factors whose products make [`EXP2_Q32`]
/// (p4src/include/exp2.p4 multiplies the same constants in the same order, so both compute the
/// same bits; tests/contract checks the two lists against each other and 2^(-2^j/256)).
pub const EXP2_BITS_Q32: [u64; 8] =
    [4283353945, 4271771996, 4248701965, 4202935003, 4112874773, 3938502376, 3611622603, 3037000500];
/// ln 2 in Q32: the slope of 2^-x at 0, for the rest of a fraction below 1/256.
pub const EXP2_LN2_Q32: u64 = 2977044472;

/// 2^(-k/256) in Q32 for k = 0..255: the product of the `EXP2_BITS_Q32[j]` of k's set bits,
/// high bit first, each product truncated to Q32 (within 3e-9 of the exact value). A static, so
/// the fast path indexes one copy in read-only memory.
pub static EXP2_Q32: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut k = 0;
    while k < 256 {
        let mut x: u64 = 1 << 32;
        let mut j = 8;
        while j > 0 {
            j -= 1;
            if (k >> j) & 1 == 1 {
                x = ((x as u128 * EXP2_BITS_Q32[j] as u128) >> 32) as u64;
            }
        }
        t[k] = x;
        k += 1;
    }
    t
};

/// `a * 2^-(halvings + f)`, f = `f56` / 2^56 (`f56` < 2^56).
///
/// Whole halvings shift; f is split into its top 8 bits k, whose factor 2^(-k/256) comes from
/// [`EXP2_Q32`], and the rest r < 1/256, whose factor is the tangent 1 - r ln 2. The tangent is
/// exact to first order, so small steps compound to the true exponential; its error is at most
/// (r ln 2)^2 / 2 < 3.7e-6. (A chord between table entries instead would make tiny steps decay
/// like the chord's slope, and a table without interpolation would lose every step below 1/256.)
/// The two products round to nearest, so x = 0 gives `a` back.
#[inline]
pub fn exp2_neg(a: u64, halvings: u64, f56: u64) -> u64 {
    if halvings >= 64 {
        return 0;
    }
    let s = a >> halvings;
    let k = ((f56 >> 48) & 0xFF) as usize;
    let r = f56 & ((1u64 << 48) - 1);
    let x = ((s as u128 * EXP2_Q32[k] as u128 + (1 << 31)) >> 32) as u64;
    // r ln 2 in Q48 (r is Q56, ln 2 Q32: the product is Q88).
    let d = (EXP2_LN2_Q32 as u128 * r as u128) >> 40;
    x - ((x as u128 * d + (1 << 47)) >> 48) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_two_to_the_minus_k_over_256() {
        for (k, &t) in EXP2_Q32.iter().enumerate() {
            let exact = 2f64.powf(32.0 - k as f64 / 256.0);
            assert!((t as f64 - exact).abs() <= 8.0, "k {k}: {t} vs {exact}");
        }
        for (j, &c) in EXP2_BITS_Q32.iter().enumerate() {
            assert_eq!(c, 2f64.powf(32.0 - (1u32 << j) as f64 / 256.0).round() as u64, "j {j}");
        }
        assert_eq!(EXP2_LN2_Q32, (std::f64::consts::LN_2 * 2f64.powi(32)).round() as u64);
    }

    #[test]
    fn exp2_neg_against_floating_point() {
        let one = 1u64 << 32;
        assert_eq!(exp2_neg(one, 0, 0), one);
        assert_eq!(exp2_neg(one, 1, 0), one >> 1);
        assert_eq!(exp2_neg(one, 33, 0), 0);
        assert_eq!(exp2_neg(u64::MAX, 64, 0), 0);
        for (h, f) in [(0u64, 0.5f64), (0, 0.001), (0, 0.999), (3, 0.25), (10, 0.7)] {
            let got = exp2_neg(one, h, (f * 2f64.powi(56)) as u64) as f64;
            let want = 2f64.powf(32.0 - h as f64 - f);
            assert!((got / want - 1.0).abs() < 4e-6 || (got - want).abs() < 2.0, "h {h} f {f}: {got} vs {want}");
        }
    }
}
