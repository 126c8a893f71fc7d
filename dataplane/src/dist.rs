//! The built-in jitter distribution tables of `dist_table` (normal, pareto, paretonormal, user).
//!
//! Like netem's tables, each holds `DIST_TABLE_LEN` int16 samples in units of sigma / 8192
//! (NETEM_DIST_SCALE); a uniform index picks a sample, so each table is the inverse CDF of a
//! zero-mean, unit-sigma distribution at `DIST_TABLE_LEN` evenly spaced probabilities. They are
//! computed here at start (not copied from iproute2's files):
//! - normal: the standard normal quantiles;
//! - pareto: Pareto with shape a = 3 (x_m = 1; mean 1.5, sigma sqrt(3)/2), standardised;
//! - paretonormal: 3/4 normal + 1/4 pareto (netem's mix), standardised, quantiles estimated from a
//!   fixed-seed sample so the table is the same on every start;
//! - user: zeros until the controller writes it.
//!
//! Samples beyond +/- 4 sigma (the int16 range) are clamped, as netem's tables are.
use crate::contract::{DIST_SCALE, DIST_TABLES, DIST_TABLE_LEN};

const N: usize = DIST_TABLE_LEN as usize;
const PARETO_A: f64 = 3.0;

/// Inverse of the standard normal CDF (Acklam's rational approximation, |rel err| < 1.2e-9).
#[allow(clippy::excessive_precision)] // published coefficients, kept verbatim
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969683028665376e1,
        2.209460984245205e2,
        -2.759285104469687e2,
        1.383577518672690e2,
        -3.066479806614716e1,
        2.506628277459239,
    ];
    const B: [f64; 5] =
        [-5.447609879822406e1, 1.615858368580409e2, -1.556989798598866e2, 6.680131188771972e1, -1.328068155288572e1];
    const C: [f64; 6] = [
        -7.784894002430293e-3,
        -3.223964580411365e-1,
        -2.400758277161838,
        -2.549732539343734,
        4.374664141464968,
        2.938163982698783,
    ];
    const D: [f64; 4] = [7.784695709041462e-3, 3.224671290700398e-1, 2.445134137142996, 3.754408661907416];
    let p_low = 0.02425;
    if p < p_low {
        let q = (-2.0 * p.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    } else if p <= 1.0 - p_low {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        -normal_quantile(1.0 - p)
    }
}

fn pareto_standard(u: f64) -> f64 {
    let x = (1.0 - u).powf(-1.0 / PARETO_A);
    let mean = PARETO_A / (PARETO_A - 1.0);
    let sigma = (PARETO_A / ((PARETO_A - 1.0).powi(2) * (PARETO_A - 2.0))).sqrt();
    (x - mean) / sigma
}

fn to_sample(z: f64) -> i16 {
    (z * DIST_SCALE as f64).round().clamp(i16::MIN as f64 + 1.0, i16::MAX as f64) as i16
}

fn prob(i: usize) -> f64 {
    (i as f64 + 0.5) / N as f64
}

pub fn normal_table() -> Vec<i16> {
    (0..N).map(|i| to_sample(normal_quantile(prob(i)))).collect()
}

pub fn pareto_table() -> Vec<i16> {
    (0..N).map(|i| to_sample(pareto_standard(prob(i)))).collect()
}

pub fn paretonormal_table() -> Vec<i16> {
    // Quantiles of 0.75 N + 0.25 P from a large fixed-seed sample.
    let mut rng = crate::rng::Prng::new(0x5eed_d157);
    let samples = 1 << 18;
    let sigma = (0.75f64 * 0.75 + 0.25 * 0.25).sqrt();
    let unit = |r: &mut crate::rng::Prng| ((r.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    let mut v: Vec<f64> = (0..samples)
        .map(|_| (0.75 * normal_quantile(unit(&mut rng)) + 0.25 * pareto_standard(unit(&mut rng))) / sigma)
        .collect();
    v.sort_by(|a, b| a.total_cmp(b));
    (0..N).map(|i| to_sample(v[((prob(i) * samples as f64) as usize).min(samples - 1)])).collect()
}

/// All four tables in `dist_table` order.
pub fn builtin_tables() -> Box<[i16]> {
    let mut all = Vec::with_capacity(N * DIST_TABLES as usize);
    all.extend(normal_table());
    all.extend(pareto_table());
    all.extend(paretonormal_table());
    all.extend(std::iter::repeat_n(0i16, N));
    all.into_boxed_slice()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moments(t: &[i16]) -> (f64, f64) {
        let n = t.len() as f64;
        let m = t.iter().map(|&v| v as f64).sum::<f64>() / n;
        let var = t.iter().map(|&v| (v as f64 - m).powi(2)).sum::<f64>() / n;
        (m / DIST_SCALE as f64, var.sqrt() / DIST_SCALE as f64)
    }

    #[test]
    fn tables_are_sorted_zero_mean_unit_sigma() {
        for (name, t) in
            [("normal", normal_table()), ("pareto", pareto_table()), ("paretonormal", paretonormal_table())]
        {
            assert!(t.windows(2).all(|w| w[0] <= w[1]), "{name} not monotone");
            let (m, s) = moments(&t);
            // Clamping at 4 sigma trims the tails a little (pareto most).
            assert!(m.abs() < 0.12, "{name} mean {m}");
            // Pareto's heavy tail (a = 3) loses most to the clamp and to quantile sampling.
            let low = if name == "pareto" { 0.65 } else { 0.8 };
            assert!((low..1.02).contains(&s), "{name} sigma {s}");
        }
        let (m, s) = moments(&normal_table());
        assert!(m.abs() < 1e-3 && (s - 1.0).abs() < 0.01, "normal {m} {s}");
        assert!((normal_quantile(0.975) - 1.959964).abs() < 1e-5);
        // Pareto is skewed right: median below the mean.
        assert!(pareto_table()[N / 2] < 0);
        assert_eq!(builtin_tables().len(), N * 4);
    }
}
