//! The statistics of a verdict: exact binomial confidence bounds on the
//! probability that one sample exceeds a bound (Clopper-Pearson), and how
//! many samples a bound needs. The Beta quantiles come from `statrs`.

use statrs::distribution::{Beta, ContinuousCDF};

/// The one-sided Clopper-Pearson upper bound, at `confidence` (0 to 1), on
/// the probability of an event seen `k` times in `n` independent trials:
/// the `confidence` quantile of Beta(k + 1, n − k). With `k = 0` it is
/// `1 − (1 − confidence)^(1/n)` exactly (about 3/n at 95 %).
pub fn upper_bound(k: u64, n: u64, confidence: f64) -> f64 {
    if n == 0 || k >= n {
        return 1.0;
    }
    if k == 0 {
        return 1.0 - (1.0 - confidence).powf(1.0 / n as f64);
    }
    beta_quantile(k as f64 + 1.0, (n - k) as f64, confidence)
}

/// The one-sided Clopper-Pearson lower bound: the `1 − confidence`
/// quantile of Beta(k, n − k + 1); 0 when `k = 0`.
pub fn lower_bound(k: u64, n: u64, confidence: f64) -> f64 {
    if n == 0 || k == 0 {
        return 0.0;
    }
    if k >= n {
        return (1.0 - confidence).powf(1.0 / n as f64);
    }
    beta_quantile(k as f64, (n - k + 1) as f64, 1.0 - confidence)
}

fn beta_quantile(a: f64, b: f64, p: f64) -> f64 {
    match Beta::new(a, b) {
        Ok(beta) => beta.inverse_cdf(p),
        // Parameters out of range cannot come from counts above; say nothing.
        Err(_) => 1.0,
    }
}

/// How many samples with no exceedance make the upper bound at
/// `confidence` reach `allowed` (the probability a term allows): the
/// least `n` with `1 − (1 − confidence)^(1/n) ≤ allowed`.
pub fn samples_needed(allowed: f64, confidence: f64) -> u64 {
    if allowed <= 0.0 {
        return u64::MAX;
    }
    if allowed >= 1.0 {
        return 1;
    }
    ((1.0 - confidence).ln() / (1.0 - allowed).ln()).ceil() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference values computed independently, by bisection on the
    /// binomial distribution function (exact sums of the probabilities):
    /// the bound `p` where P(X ≤ k; n, p) = 1 − confidence (upper) and
    /// P(X ≥ k; n, p) = 1 − confidence (lower). (1, 10, 95 %) is the
    /// 0.394 of the published one-sided tables.
    const REFERENCE: [(u64, u64, f64, f64, f64); 5] = [
        (1, 10, 0.95, 3.941_633_024e-1, 5.116_196_892e-3),
        (5, 10, 0.95, 7.775_588_990e-1, 2.224_411_010e-1),
        (0, 3000, 0.95, 9.980_790_120e-4, 0.0),
        (3, 1000, 0.99, 1.000_979_199e-2, 4.363_865_641e-4),
        (10, 100_000, 0.95, 1.696_162_876e-4, 5.425_502_673e-5),
    ];

    #[test]
    fn clopper_pearson_bounds_match_the_exact_binomial_reference() {
        for (k, n, c, up, low) in REFERENCE {
            let u = upper_bound(k, n, c);
            let l = lower_bound(k, n, c);
            // Six significant digits: the reference sums in double precision.
            assert!(
                (u - up).abs() <= up * 1e-5,
                "upper({k}, {n}, {c}) = {u}, want {up}"
            );
            assert!(
                (l - low).abs() <= low.max(1e-12) * 1e-5,
                "lower({k}, {n}, {c}) = {l}, want {low}"
            );
        }
    }

    #[test]
    fn the_bounds_hold_the_observed_rate_and_narrow_with_more_samples() {
        let mut last = 1.0;
        for n in [100u64, 1_000, 10_000, 100_000, 1_000_000] {
            let k = n / 100;
            let (l, u) = (lower_bound(k, n, 0.95), upper_bound(k, n, 0.95));
            assert!(l < 0.01 && 0.01 < u, "{l} < 1 % < {u} at n = {n}");
            assert!(u - l < last, "narrower at n = {n}");
            last = u - l;
        }
        assert_eq!(upper_bound(0, 0, 0.95), 1.0);
        assert_eq!(upper_bound(7, 7, 0.95), 1.0);
    }

    #[test]
    fn samples_needed_makes_the_zero_exceedance_bound_reach_what_is_allowed() {
        // p99.99 at 95 %: the rule of three, 3 / 1e-4 ≈ 29,956.
        let n = samples_needed(1e-4, 0.95);
        assert_eq!(n, 29_956);
        assert!(upper_bound(0, n, 0.95) <= 1e-4);
        assert!(upper_bound(0, n - 1, 0.95) > 1e-4);
        assert_eq!(samples_needed(0.0, 0.95), u64::MAX);
    }
}
