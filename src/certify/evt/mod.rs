//! Extreme-value estimates for a `max` term: how likely one block, one
//! hour and a run as long as this one are to exceed the bound, from a GEV
//! fitted to the run's block maxima, with a confidence interval, and only
//! where the assumptions behind it are checked and hold.
//!
//! The method (Coles, 2001, ch. 3; as measurement-based timing analysis
//! uses it: Cucu-Grosjean et al., ECRTS 2012; Santinelli et al., RTAS
//! 2017):
//! - the per-second maxima of the run are grouped into blocks of equal
//!   length, at most [`MAX_BLOCKS`] of them, at least [`MIN_BLOCKS`];
//! - **independence**: the runs test on the block maxima in time order;
//! - **stationarity**: the two-sample Kolmogorov-Smirnov test between the
//!   first and second half of the run;
//! - **fit**: a GEV fitted by maximum likelihood to the even-numbered
//!   blocks, tested by Anderson-Darling on the odd-numbered ones (held
//!   out, so the test's distribution for a fully specified law applies);
//! - **the tail's shape**: a heavy tail (ξ > 0 at the confidence asked)
//!   has no upper end and a few more samples can move an extrapolation by
//!   orders of magnitude, so none is made;
//! - the estimate is the GEV fitted to all blocks; its interval is a
//!   parametric bootstrap (samples of the same size drawn from the fit
//!   and fitted again, as many as the confidence needs: [`resamples`]);
//! - **no drift**: KPSS on the ranks of the block maxima (a trend the
//!   halves' KS test misses when it is gradual).

pub mod checks;
pub mod gev;
pub mod gpd;
pub mod pot;
pub mod simplex;

use serde::{Deserialize, Serialize};

pub use checks::Test;
pub use gev::Gev;

/// The fewest blocks a fit is made from.
pub const MIN_BLOCKS: usize = 60;
/// The most blocks: longer runs take longer blocks (the fit's cost grows
/// with the blocks, its asymptotics improve with their length).
pub const MAX_BLOCKS: usize = 1000;
/// The fewest bootstrap resamples for the interval.
pub const MIN_RESAMPLES: usize = 200;
/// The most: each one is a fit, and the run waits for them.
pub const MAX_RESAMPLES: usize = 4000;
/// Resamples beyond the quantile a one-sided bound takes: fewer and the
/// bound is one or two resamples' chance.
pub const TAIL_RESAMPLES: usize = 20;

/// Resamples for a one-sided bound at `confidence`: enough that
/// [`TAIL_RESAMPLES`] lie beyond it, at least [`MIN_RESAMPLES`], at most
/// [`MAX_RESAMPLES`] (`None`: the confidence asks for more).
pub fn resamples(confidence: f64) -> Option<usize> {
    let tail = 1.0 - confidence;
    if tail <= 0.0 {
        return None;
    }
    let needed = (TAIL_RESAMPLES as f64 / tail - 1e-9).ceil() as usize;
    (needed <= MAX_RESAMPLES).then_some(needed.max(MIN_RESAMPLES))
}

/// The highest confidence the bootstrap can give a bound at.
pub fn max_confidence() -> f64 {
    1.0 - TAIL_RESAMPLES as f64 / MAX_RESAMPLES as f64
}
/// The bootstrap's seed: the same run gives the same interval.
pub(crate) const SEED: u64 = 0x5eed_ce27;

/// The probability that the largest sample over a horizon exceeds the
/// bound, with its one-sided bounds at the confidence asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exceedance {
    /// The horizon, seconds.
    pub horizon_s: f64,
    /// The estimate.
    pub estimate: f64,
    /// The lower bound.
    pub lower: f64,
    /// The upper bound.
    pub upper: f64,
}

/// One point of the fitted tail's confidence band: the probability that a
/// block maximum exceeds `x_ns`, each side a one-sided bound at the
/// confidence asked (the bootstrap's, as for the bound).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BandPoint {
    /// The value, ns.
    pub x_ns: f64,
    /// The lower bound of P(block maximum > x).
    pub lower: f64,
    /// The upper bound.
    pub upper: f64,
}

/// How many points the band has (where: see `band`).
const BAND_POINTS: usize = 60;

/// The latency a target exceedance probability gives (the probabilistic
/// WCET of measurement-based timing analysis): the `x` one block maximum
/// exceeds with the block's share of the target.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Pwcet {
    /// The probability that one block exceeds, the target brought to a
    /// block.
    pub block_probability: f64,
    /// The fitted GEV's latency at it, ns.
    pub latency_ns: f64,
    /// Its upper bound at the confidence asked (the bootstrap's), ns.
    pub upper_ns: f64,
}

/// What the extreme-value analysis of one CPU's run found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TailEstimate {
    /// Seconds per block.
    pub block_s: f64,
    /// Blocks.
    pub blocks: usize,
    /// The GEV fitted to all blocks (ns), when one could be fitted.
    pub fit: Option<Gev>,
    /// The shape's one-sided bounds at the confidence asked (bootstrap).
    pub xi_bounds: Option<(f64, f64)>,
    /// The runs test on the block maxima.
    pub independence: Option<Test>,
    /// The halves' two-sample Kolmogorov-Smirnov test.
    pub stationarity: Option<Test>,
    /// KPSS on the ranks of the block maxima: no drift through the run.
    #[serde(default)]
    pub trend: Option<Test>,
    /// Anderson-Darling of the odd blocks against the even blocks' fit.
    pub goodness_of_fit: Option<Test>,
    /// Why nothing is extrapolated, when nothing is.
    pub refused: Option<String>,
    /// What would let the term decide, when nothing is extrapolated.
    #[serde(default)]
    pub to_decide: Option<String>,
    /// Bootstrap resamples behind the bounds.
    #[serde(default)]
    pub resamples: usize,
    /// With a target: the latency at it, and its bound.
    #[serde(default)]
    pub pwcet: Option<Pwcet>,
    /// The second view of the tail, peaks over a threshold of the
    /// histogram ([`pot`]); a verdict extrapolates only where both agree.
    #[serde(default)]
    pub pot: Option<pot::PotEstimate>,
    /// One block, one hour, the run's duration (only when extrapolated).
    pub exceedance: Vec<Exceedance>,
    /// The fitted tail's band (whenever a fit and its bootstrap exist,
    /// extrapolated or not: the report draws it around the fit).
    #[serde(default)]
    pub band: Vec<BandPoint>,
}

impl TailEstimate {
    /// Whether the extrapolation may be believed.
    pub fn extrapolated(&self) -> bool {
        self.refused.is_none() && !self.exceedance.is_empty()
    }
}

/// Per-second maxima (ns, in time order) grouped into blocks of `k`
/// seconds, `k` the least that leaves at most [`MAX_BLOCKS`]; a partial
/// last block is left out.
pub fn blocks(per_second_ns: &[u64]) -> (usize, Vec<f64>) {
    let k = per_second_ns.len().div_ceil(MAX_BLOCKS).max(1);
    let maxima = per_second_ns
        .chunks_exact(k)
        .map(|c| c.iter().copied().max().unwrap_or(0) as f64)
        .collect();
    (k, maxima)
}

/// The analysis of one CPU's per-second maxima against `bound_ns`, for a
/// run of `run_s` seconds, at `confidence` (0 to 1).
pub fn estimate(per_second_ns: &[u64], bound_ns: u64, run_s: f64, confidence: f64) -> TailEstimate {
    estimate_at(per_second_ns, bound_ns, run_s, confidence, None)
}

/// [`estimate`], and where `target` is given the latency at it: `target`
/// brings the target to one block of the given seconds (the probability
/// one block may exceed with).
pub fn estimate_at(
    per_second_ns: &[u64],
    bound_ns: u64,
    run_s: f64,
    confidence: f64,
    target: Option<&dyn Fn(f64) -> f64>,
) -> TailEstimate {
    let (k, maxima) = blocks(per_second_ns);
    let mut est = TailEstimate {
        block_s: k as f64,
        blocks: maxima.len(),
        fit: None,
        xi_bounds: None,
        independence: None,
        stationarity: None,
        trend: None,
        goodness_of_fit: None,
        refused: None,
        to_decide: None,
        resamples: 0,
        pwcet: None,
        pot: None,
        exceedance: Vec::new(),
        band: Vec::new(),
    };
    let refuse = |est: &mut TailEstimate, why: String, next: &str| {
        est.refused = Some(why);
        est.to_decide = Some(next.to_string());
    };
    if maxima.len() < MIN_BLOCKS {
        refuse(
            &mut est,
            format!(
                "{} blocks of maxima, fewer than the {MIN_BLOCKS} a fit needs",
                maxima.len()
            ),
            &format!("a run of at least {MIN_BLOCKS} s"),
        );
        return est;
    }
    let Some(count) = resamples(confidence) else {
        refuse(
            &mut est,
            format!(
                "{MAX_RESAMPLES} bootstrap resamples cannot give a bound at {:.4} % confidence",
                confidence * 100.0
            ),
            &format!("a confidence of at most {:.2} %", max_confidence() * 100.0),
        );
        return est;
    };
    est.independence = Some(checks::runs(&maxima));
    let half = maxima.len() / 2;
    est.stationarity = Some(checks::two_sample_ks(&maxima[..half], &maxima[half..]));
    est.trend = Some(checks::kpss_ranks(&maxima));
    let held_out = held_out_a2(&maxima);
    est.fit = gev::mle(&maxima);
    let Some(fit) = est.fit else {
        refuse(
            &mut est,
            "no GEV could be fitted to the block maxima (no spread)".into(),
            "a finer histogram or a run whose maxima vary",
        );
        return est;
    };
    let boot = bootstrap(&fit, maxima.len(), bound_ns as f64, count);
    est.resamples = boot.len();
    let q = |v: &[f64], p: f64| quantile(v, p);
    let xis: Vec<f64> = boot.iter().map(|b| b.xi).collect();
    est.xi_bounds = Some((q(&xis, 1.0 - confidence), q(&xis, confidence)));
    est.goodness_of_fit = held_out.map(|a2| {
        let null: Vec<f64> = boot.iter().filter_map(|b| b.held_out_a2).collect();
        let at_least = null.iter().filter(|&&x| x >= a2).count();
        Test::new(a2, (at_least + 1) as f64 / (null.len() + 1) as f64)
    });
    est.band = band(&fit, &boot, &maxima, bound_ns as f64, confidence);
    if let Some((why, next)) = refusal(&est) {
        refuse(&mut est, why, next);
        return est;
    }
    est.pwcet = target.map(|to_block| pwcet(&fit, &boot, to_block(k as f64), confidence));
    let p = fit.exceedance(bound_ns as f64);
    let ps: Vec<f64> = boot.iter().map(|b| b.p).collect();
    let (p_lo, p_hi) = basic_interval(p, &ps, confidence);
    est.exceedance = [k as f64, 3600.0, run_s]
        .into_iter()
        .map(|h| {
            let over = |p: f64| over_horizon(p, h / k as f64);
            Exceedance {
                horizon_s: h,
                estimate: over(p),
                lower: over(p_lo),
                upper: over(p_hi),
            }
        })
        .collect();
    est
}

/// The latency one block exceeds with probability `q`, from the fit and
/// bounded by its resamples at `confidence`.
fn pwcet(fit: &Gev, boot: &[Resample], q: f64, confidence: f64) -> Pwcet {
    let xs: Vec<f64> = boot.iter().map(|b| b.fit.exceeded_with(q)).collect();
    Pwcet {
        block_probability: q,
        latency_ns: fit.exceeded_with(q),
        upper_ns: quantile(&xs, confidence),
    }
}

/// Why the checks forbid extrapolating, the first that fails, and what
/// would let the term decide.
fn refusal(est: &TailEstimate) -> Option<(String, &'static str)> {
    let failed = |name: &str, t: &Option<Test>, next: &'static str| match t {
        Some(t) if !t.passed => Some((
            format!("{name} rejected (p = {:.3} < {})", t.p_value, checks::LEVEL),
            next,
        )),
        _ => None,
    };
    if est.goodness_of_fit.is_none() {
        return Some((
            "no GEV could be fitted to the even blocks for the held-out test".into(),
            "a longer run",
        ));
    }
    let steadier = "a steadier machine and load through the run (it drifted), then a new run";
    failed(
        "independence of the block maxima (runs test)",
        &est.independence,
        "a longer run, whose longer blocks are closer to independent, or a load without periodic bursts",
    )
    .or_else(|| failed("the same distribution in both halves (KS)", &est.stationarity, steadier))
    .or_else(|| failed("no trend through the run (KPSS on ranks)", &est.trend, steadier))
    .or_else(|| {
        failed(
            "the GEV's fit to held-out maxima (Anderson-Darling)",
            &est.goodness_of_fit,
            "a longer run",
        )
    })
    .or_else(|| match est.xi_bounds {
        Some((lo, _)) if lo > 0.0 => Some((format!(
            "the tail is heavy (shape ξ above 0 at the confidence asked, at least {lo:.3}): no upper end to extrapolate towards"
        ), "what ends the tail: the boot half (cpushield boot: nohz_full, rcu_nocbs), a quieter load, or a percentile term instead of max")),
        _ => None,
    })
}

/// The probability that at least one of `blocks` independent blocks
/// exceeds, each with probability `p`: `1 − (1 − p)^blocks`.
pub fn over_horizon(p: f64, blocks: f64) -> f64 {
    -(blocks * (-p).ln_1p()).exp_m1()
}

/// Anderson-Darling's A² of the odd-numbered blocks against the GEV fitted
/// to the even-numbered ones.
fn held_out_a2(maxima: &[f64]) -> Option<f64> {
    let even: Vec<f64> = maxima.iter().step_by(2).copied().collect();
    let odd: Vec<f64> = maxima.iter().skip(1).step_by(2).copied().collect();
    let g = gev::mle(&even)?;
    Some(checks::anderson_darling(&odd, |x| g.cdf(x)).statistic)
}

/// One bootstrap sample's figures.
struct Resample {
    fit: Gev,
    xi: f64,
    p: f64,
    held_out_a2: Option<f64>,
}

/// For each bootstrap sample drawn from `fit` and fitted again: its shape,
/// its probability of one block exceeding `bound`, and its held-out A²
/// (the held-out test's distribution when the GEV holds: A² of a fit on
/// half the data runs larger than for a fully specified law, so its
/// p-value is the share of these at least as large).
fn bootstrap(fit: &Gev, n: usize, bound: f64, count: usize) -> Vec<Resample> {
    let mut rng = fastrand::Rng::with_seed(SEED);
    (0..count)
        .filter_map(|_| {
            let xs = fit.sample(n, &mut rng);
            let g = gev::mle(&xs)?;
            Some(Resample {
                fit: g,
                xi: g.xi,
                p: g.exceedance(bound),
                held_out_a2: held_out_a2(&xs),
            })
        })
        .collect()
}

/// The basic bootstrap's one-sided bounds on `p`, on the log scale where
/// the estimate's error is closer to symmetric: `2·ln p̂ − q`, `q` the
/// resamples' quantiles of `ln p` (the percentile bootstrap's upper bound
/// fell below the true probability in 12 % of simulated runs at 95 %;
/// this one in none of 87). Where the fit or more than `1 − confidence`
/// of the resamples put the bound past the tail's end (p = 0), the log
/// scale is undefined and the percentile bounds of `p` itself are taken:
/// an upper bound of 0 then says that at least `confidence` of the
/// resamples end below the bound.
pub(crate) fn basic_interval(p: f64, ps: &[f64], confidence: f64) -> (f64, f64) {
    if ps.is_empty() {
        return (0.0, 1.0);
    }
    let zeros = ps.iter().filter(|&&x| x <= 0.0).count() as f64;
    if p <= 0.0 || zeros >= (1.0 - confidence) * ps.len() as f64 {
        let upper = quantile(ps, confidence).clamp(p, 1.0);
        return (quantile(ps, 1.0 - confidence).min(p).max(0.0), upper);
    }
    let logs: Vec<f64> = ps.iter().map(|p| p.ln()).collect();
    let lp = p.ln();
    let lower = (2.0 * lp - quantile(&logs, confidence)).exp();
    let upper = (2.0 * lp - quantile(&logs, 1.0 - confidence)).exp();
    let upper = upper.max(quantile(ps, confidence));
    (lower.min(p), upper.max(p).min(1.0))
}

/// The fitted tail and its bootstrap bounds at [`BAND_POINTS`] values:
/// two thirds from the least block maximum to a tenth past the largest
/// (where the report's tail plot looks when the bound is far), the rest
/// from there to a tenth past the bound when it lies beyond.
fn band(
    fit: &Gev,
    boot: &[Resample],
    maxima: &[f64],
    bound: f64,
    confidence: f64,
) -> Vec<BandPoint> {
    let lo = maxima.iter().copied().fold(f64::INFINITY, f64::min);
    let top = maxima.iter().copied().fold(f64::NEG_INFINITY, f64::max) * 1.1;
    if boot.is_empty() || lo.is_nan() || lo >= top {
        return Vec::new();
    }
    let span = |from: f64, to: f64, n: usize| {
        (0..n).map(move |i| from + (to - from) * i as f64 / (n - 1).max(1) as f64)
    };
    let near = BAND_POINTS * 2 / 3;
    let xs: Vec<f64> = if bound * 1.1 > top {
        span(lo, top, near)
            .chain(span(top, bound * 1.1, BAND_POINTS - near + 1).skip(1))
            .collect()
    } else {
        span(lo, top, BAND_POINTS).collect()
    };
    xs.into_iter()
        .map(|x| {
            let ps: Vec<f64> = boot.iter().map(|b| b.fit.exceedance(x)).collect();
            let (lower, upper) = basic_interval(fit.exceedance(x), &ps, confidence);
            BandPoint {
                x_ns: x,
                lower,
                upper,
            }
        })
        .collect()
}

/// The `p` quantile of `v` (nearest rank: the `⌈p·n⌉`-th smallest, the
/// product taken to a billionth so that 0.05 · 200 is the 10th, not the
/// 11th); NaN when empty.
fn quantile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let rank = (p * s.len() as f64 - 1e-9).ceil();
    let i = (rank.max(1.0) as usize).min(s.len()) - 1;
    s[i]
}

#[cfg(test)]
mod tests;
