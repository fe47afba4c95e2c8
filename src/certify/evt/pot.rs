//! Peaks over a threshold, beside the block maxima: a generalised Pareto
//! distribution fitted to the excesses of the histogram's largest samples
//! over a threshold (Coles, 2001, ch. 4), so that a `max` term is judged
//! by two views of the tail and passes only where both allow it.
//!
//! - **The threshold** is the start of the histogram's bucket from which
//!   the largest `⌈√n⌉` samples lie above it, at least [`MIN_EXCESSES`]
//!   and at most [`MAX_EXCESSES`] (a fixed rule, stated, not tuned to the
//!   data); each sample is taken at its bucket's middle.
//! - **The fit** is the GPD's maximum likelihood ([`super::gpd::mle`]);
//!   its bounds a parametric bootstrap of as many resamples as the
//!   confidence needs ([`super::resamples`]); a tail heavy at the
//!   confidence asked (ξ above 0) is not extrapolated.
//! - **A deadline** exceeds the bound with probability `ζ·H̄(B − u)`, `ζ`
//!   the share of samples over the threshold; **a run** of `n` deadlines
//!   with probability `1 − exp(−n·p)` (each exceedance counted as its own
//!   cluster, the cautious side).

use serde::{Deserialize, Serialize};

use super::gpd::{self, Gpd};
use super::{basic_interval, quantile, resamples, SEED};

/// The fewest excesses a fit is made from.
pub const MIN_EXCESSES: u64 = 50;
/// The most: the largest samples only, where the tail's shape shows.
pub const MAX_EXCESSES: u64 = 250;

/// What the peaks-over-threshold view found on one CPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PotEstimate {
    /// The threshold, ns.
    pub threshold_ns: f64,
    /// Samples over it.
    pub excesses: u64,
    /// The GPD fitted to their excesses, ns.
    pub fit: Option<Gpd>,
    /// The shape's one-sided bounds at the confidence asked (bootstrap).
    pub xi_bounds: Option<(f64, f64)>,
    /// One deadline's probability of exceeding the bound: the estimate
    /// and its upper bound at the confidence asked.
    pub per_deadline: Option<(f64, f64)>,
    /// Why nothing is extrapolated, when nothing is.
    pub refused: Option<String>,
}

impl PotEstimate {
    /// The upper bound on a run of `deadlines` exceeding the bound.
    pub fn over(&self, deadlines: f64) -> Option<f64> {
        let (_, upper) = self.per_deadline?;
        Some(-(-deadlines * upper).exp_m1())
    }
}

/// The peaks-over-threshold view of a histogram (`counts` of `width_ns`
/// buckets, `overflows` past them, `n` samples) against `bound_ns`.
pub fn estimate(
    counts: &[u64],
    width_ns: u64,
    overflows: u64,
    bound_ns: u64,
    confidence: f64,
) -> PotEstimate {
    let n = (counts.iter().copied()).fold(overflows, u64::saturating_add);
    let w = width_ns.max(1) as f64;
    let wanted = ((n as f64).sqrt().ceil() as u64).clamp(MIN_EXCESSES, MAX_EXCESSES);
    let mut est = PotEstimate {
        threshold_ns: 0.0,
        excesses: 0,
        fit: None,
        xi_bounds: None,
        per_deadline: None,
        refused: None,
    };
    if overflows > 0 {
        est.refused = Some(format!(
            "{overflows} samples past the histogram: their excesses are not known"
        ));
        return est;
    }
    // From the top bucket down until `wanted` samples lie at or above.
    let (mut above, mut from) = (0u64, counts.len());
    while from > 0 && above < wanted {
        from -= 1;
        above = above.saturating_add(counts[from]);
    }
    // A bucket holding far more than the tail asks for (a narrow body, a
    // coarse histogram) is left below the threshold.
    if above > 4 * MAX_EXCESSES && from + 1 < counts.len() {
        above -= counts[from];
        from += 1;
    }
    if above > 4 * MAX_EXCESSES {
        est.refused = Some(format!(
            "{above} samples in the tail's first bucket: the histogram is too coarse for a threshold"
        ));
        return est;
    }
    if from == 0 || above < MIN_EXCESSES {
        est.refused = Some(format!(
            "{above} samples in the tail, fewer than the {MIN_EXCESSES} a fit needs"
        ));
        return est;
    }
    let u = from as f64 * w;
    est.threshold_ns = u;
    est.excesses = above;
    let ys: Vec<f64> = (from..counts.len())
        .flat_map(|i| std::iter::repeat_n((i - from) as f64 * w + w / 2.0, counts[i] as usize))
        .collect();
    let Some(fit) = gpd::mle(&ys) else {
        est.refused = Some("no GPD could be fitted to the excesses".into());
        return est;
    };
    est.fit = Some(fit);
    let Some(count) = resamples(confidence) else {
        est.refused = Some(format!(
            "the bootstrap cannot give a bound at {:.4} % confidence",
            confidence * 100.0
        ));
        return est;
    };
    let zeta = above as f64 / n as f64;
    let at = (bound_ns as f64 - u).max(0.0);
    let mut rng = fastrand::Rng::with_seed(SEED);
    let fits: Vec<Gpd> = (0..count)
        .filter_map(|_| gpd::mle(&sample(&fit, ys.len(), &mut rng)))
        .collect();
    let xis: Vec<f64> = fits.iter().map(|g| g.xi).collect();
    let (lo, hi) = (quantile(&xis, 1.0 - confidence), quantile(&xis, confidence));
    est.xi_bounds = Some((lo, hi));
    if lo > 0.0 {
        est.refused = Some(format!(
            "the tail over {:.1} µs is heavy (GPD shape ξ at least {lo:.3} at the confidence asked)",
            u / 1000.0
        ));
        return est;
    }
    let p = fit.exceedance(at);
    let ps: Vec<f64> = fits.iter().map(|g| g.exceedance(at)).collect();
    let (_, upper) = basic_interval(p, &ps, confidence);
    est.per_deadline = Some((zeta * p, zeta * upper));
    est
}

/// `n` excesses drawn from `g` (its quantile at a uniform draw).
fn sample(g: &Gpd, n: usize, rng: &mut fastrand::Rng) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let u = rng.f64().clamp(f64::EPSILON, 1.0 - f64::EPSILON);
            if g.xi.abs() < 1e-7 {
                -g.sigma * (1.0 - u).ln()
            } else {
                g.sigma / g.xi * ((1.0 - u).powf(-g.xi) - 1.0)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A histogram of 1 µs buckets: `n` samples of an exponential tail
    /// (scale 2 µs) over 10 µs, drawn with a fixed seed.
    fn exponential(n: usize, seed: u64) -> Vec<u64> {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut counts = vec![0u64; 200];
        for _ in 0..n {
            let x = 10_000.0 - 2_000.0 * (1.0 - rng.f64()).ln();
            counts[((x / 1000.0) as usize).min(199)] += 1;
        }
        counts
    }

    #[test]
    fn a_light_tail_bounds_a_far_bound_and_not_a_near_one() {
        let counts = exponential(100_000, 1);
        // 80 µs: 35 scales past the threshold region: tiny per deadline.
        let far = estimate(&counts, 1000, 0, 80_000, 0.95);
        assert!(far.refused.is_none(), "{far:?}");
        let (p, up) = far.per_deadline.unwrap();
        assert!(p <= up && up < 1e-9, "{far:?}");
        assert!(far.excesses >= MIN_EXCESSES);
        // Just above the largest sample: a run as long likely exceeds.
        let top = counts.iter().rposition(|&c| c > 0).unwrap() as u64;
        let near = estimate(&counts, 1000, 0, (top + 1) * 1000, 0.95);
        assert!(near.over(100_000.0).unwrap() > 0.05, "{near:?}");
    }

    #[test]
    fn a_heavy_tail_and_overflows_are_refused() {
        let mut rng = fastrand::Rng::with_seed(2);
        let mut counts = vec![0u64; 100_000];
        for _ in 0..100_000 {
            // Pareto with ξ = 0.5 over 10 µs.
            let x = 10_000.0 + 2_000.0 / 0.5 * ((1.0 - rng.f64()).powf(-0.5) - 1.0);
            counts[((x / 1000.0) as usize).min(99_999)] += 1;
        }
        let heavy = estimate(&counts, 1000, 0, 1_000_000, 0.95);
        assert!(
            heavy.refused.as_deref().unwrap_or("").contains("heavy"),
            "{heavy:?}"
        );
        let over = estimate(&exponential(1000, 3), 1000, 5, 80_000, 0.95);
        assert!(over.refused.unwrap().contains("past the histogram"));
        // A body in one bucket is not the tail: the threshold is above it.
        let mut narrow = vec![0u64; 50];
        narrow[2] = 600_000;
        narrow[30] = 60;
        let e = estimate(&narrow, 1000, 0, 80_000, 0.95);
        assert_eq!((e.threshold_ns, e.excesses), (3000.0, 60), "{e:?}");
    }
}
