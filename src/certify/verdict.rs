//! The verdict on a budget from the measured histograms: per term and CPU,
//! PASS, FAIL or INCONCLUSIVE, with the numbers behind it. Pure.

use serde::{Deserialize, Serialize};

use super::budget::{Statistic, Term};
use super::evt::{self, TailEstimate};
use super::stats;

/// What one CPU measured, as the histogram holds it: bucket `i` counts the
/// samples in `[i·w, (i+1)·w)` ns, `overflows` those at or past the last.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuTail {
    /// The CPU.
    pub cpu: u32,
    /// Bucket width `w`, ns.
    pub width_ns: u64,
    /// Number of buckets of the histogram (`counts` may omit trailing zeros).
    pub buckets: usize,
    /// The bucket counts.
    pub counts: Vec<u64>,
    /// Samples at or past `buckets·w`.
    pub overflows: u64,
    /// All samples.
    pub samples: u64,
    /// The largest sample, ns (exact).
    pub max_ns: u64,
    /// The largest sample of each whole second, ns, in time order.
    #[serde(default)]
    pub per_second_max_ns: Vec<u64>,
    /// How long the run lasted, seconds.
    #[serde(default)]
    pub elapsed_s: f64,
}

impl CpuTail {
    /// How many samples exceed `bound_ns`: (at least, at most). A bucket
    /// straddling the bound, and overflows when the bound lies past the
    /// histogram, may hold samples on either side.
    pub fn exceedances(&self, bound_ns: u64) -> (u64, u64) {
        let w = self.width_ns.max(1);
        let (mut low, mut high) = (0, 0);
        for (i, &c) in self.counts.iter().enumerate() {
            let start = i as u64 * w;
            if start > bound_ns {
                low += c;
                high += c;
            } else if start + w - 1 > bound_ns {
                high += c;
            }
        }
        let range_end = self.buckets as u64 * w;
        if range_end > bound_ns {
            low += self.overflows;
        }
        high += self.overflows;
        if self.max_ns > bound_ns {
            low = low.max(1);
        }
        (low, high)
    }
}

/// PASS, FAIL or INCONCLUSIVE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Outcome {
    /// The budget is met, at the confidence asked.
    Pass,
    /// Too few samples to tell at the confidence asked.
    Inconclusive,
    /// The budget is not met.
    Fail,
}

/// One term on one CPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuVerdict {
    /// The CPU.
    pub cpu: u32,
    /// The verdict.
    pub outcome: Outcome,
    /// Samples.
    pub samples: u64,
    /// Samples over the bound, at least and at most (a histogram bucket
    /// straddling the bound counts on either side).
    pub exceedances: (u64, u64),
    /// The observed maximum, ns.
    pub max_ns: u64,
    /// The confidence bounds on the probability that one sample exceeds
    /// the bound (Clopper-Pearson, one-sided each), low and high.
    pub exceed_probability: (f64, f64),
    /// With no sample over the bound, how many samples the term needs for
    /// PASS at the confidence asked (`None`: it has them, or it failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples_needed: Option<u64>,
    /// For a `max` term with no sample over its bound: the extreme-value
    /// analysis of the per-second maxima, with what it refused and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail: Option<TailEstimate>,
    /// Why, in words.
    pub why: String,
}

/// One term of the budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TermVerdict {
    /// The term.
    pub term: Term,
    /// The worst of its CPUs' outcomes.
    pub outcome: Outcome,
    /// Each CPU.
    pub cpus: Vec<CpuVerdict>,
}

/// The verdict on a whole budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// The confidence asked (0 to 1).
    pub confidence: f64,
    /// The worst of its terms' outcomes.
    pub outcome: Outcome,
    /// Each term.
    pub terms: Vec<TermVerdict>,
}

/// Judges `terms` on what each CPU measured, at `confidence`. A term
/// must hold on every CPU. A `max` term fails on one sample over its
/// bound; otherwise, where the extreme-value analysis of the per-second
/// maxima may be believed ([`evt::estimate`]), it passes when the upper
/// confidence bound on the probability that a run as long exceeds the
/// bound is below `1 − confidence`, and is inconclusive when not (a
/// repeat of the run could well fail); where the analysis is refused it
/// passes on what was observed and says why. A percentile term passes when the upper
/// confidence bound on the probability of exceeding is within what it
/// allows, fails when the lower one is above it, and is inconclusive in
/// between.
pub fn judge(terms: &[Term], tails: &[CpuTail], confidence: f64) -> Verdict {
    let terms: Vec<TermVerdict> = terms
        .iter()
        .map(|term| {
            let cpus: Vec<CpuVerdict> = tails
                .iter()
                .map(|t| judge_cpu(term, t, confidence))
                .collect();
            TermVerdict {
                term: term.clone(),
                outcome: worst(cpus.iter().map(|c| c.outcome)),
                cpus,
            }
        })
        .collect();
    Verdict {
        confidence,
        outcome: worst(terms.iter().map(|t| t.outcome)),
        terms,
    }
}

fn worst(outcomes: impl Iterator<Item = Outcome>) -> Outcome {
    outcomes.max().unwrap_or(Outcome::Inconclusive)
}

fn judge_cpu(term: &Term, tail: &CpuTail, confidence: f64) -> CpuVerdict {
    let (low, high) = tail.exceedances(term.bound_ns);
    let n = tail.samples;
    let probability = (
        stats::lower_bound(low, n, confidence),
        stats::upper_bound(high, n, confidence),
    );
    let pct = confidence * 100.0;
    let us = |ns: u64| ns as f64 / 1000.0;
    let mut tail_estimate = None;
    let (outcome, samples_needed, why) = match term.statistic {
        _ if n == 0 => (Outcome::Inconclusive, None, "no samples".to_string()),
        Statistic::Max if tail.max_ns > term.bound_ns => (
            Outcome::Fail,
            None,
            format!(
                "the largest of {n} samples, {:.1} µs, is over {:.1} µs ({low} samples over)",
                us(tail.max_ns),
                us(term.bound_ns)
            ),
        ),
        Statistic::Max => {
            let est = evt::estimate(
                &tail.per_second_max_ns,
                term.bound_ns,
                tail.elapsed_s,
                confidence,
            );
            let (outcome, why) = max_within(term, tail, &est, probability.1, confidence);
            tail_estimate = Some(est);
            (outcome, None, why)
        }
        Statistic::Percentile { .. } => {
            let allowed = term.allowed();
            if probability.1 <= allowed {
                (
                    Outcome::Pass,
                    None,
                    format!(
                        "{high} of {n} samples over {:.1} µs: at {pct:.0} % confidence one exceeds it with probability at most {:.2e}, within the {allowed:.2e} allowed",
                        us(term.bound_ns),
                        probability.1
                    ),
                )
            } else if probability.0 > allowed {
                (
                    Outcome::Fail,
                    None,
                    format!(
                        "{low} of {n} samples over {:.1} µs: at {pct:.0} % confidence one exceeds it with probability at least {:.2e}, more than the {allowed:.2e} allowed",
                        us(term.bound_ns),
                        probability.0
                    ),
                )
            } else {
                let needed = (high == 0).then(|| stats::samples_needed(allowed, confidence));
                (
                    Outcome::Inconclusive,
                    needed,
                    format!(
                        "{low} to {high} of {n} samples over {:.1} µs: the probability of exceeding lies between {:.2e} and {:.2e} at {pct:.0} % confidence, and {allowed:.2e} is allowed{}",
                        us(term.bound_ns),
                        probability.0,
                        probability.1,
                        needed
                            .map(|m| format!("; with none over it, {m} samples would decide"))
                            .unwrap_or_default()
                    ),
                )
            }
        }
    };
    CpuVerdict {
        cpu: tail.cpu,
        outcome,
        samples: n,
        exceedances: (low, high),
        max_ns: tail.max_ns,
        exceed_probability: probability,
        samples_needed,
        tail: tail_estimate,
        why,
    }
}

/// The smallest probability said as a figure: below it the model's
/// number (1e-300 past a bounded tail's end) means only "too small to
/// matter", and is said so.
pub const SMALLEST_SAID: f64 = 1e-12;

/// An upper bound on a probability for people: `at most 3.10e-5`, or
/// `less than 1e-12` below [`SMALLEST_SAID`]. `certify.json` keeps the
/// number itself.
pub fn probability(p: f64) -> String {
    if p < SMALLEST_SAID {
        format!("less than {SMALLEST_SAID:.0e}")
    } else {
        format!("at most {p:.2e}")
    }
}

/// The verdict of a `max` term no sample exceeded, and why.
fn max_within(
    term: &Term,
    tail: &CpuTail,
    est: &TailEstimate,
    observed_bound: f64,
    confidence: f64,
) -> (Outcome, String) {
    let us = |ns: u64| ns as f64 / 1000.0;
    let pct = confidence * 100.0;
    let seen = format!(
        "no sample of {} over {:.1} µs (largest {:.1} µs)",
        tail.samples,
        us(term.bound_ns),
        us(tail.max_ns)
    );
    let (Some(fit), [_, hour, run]) = (est.fit, est.exceedance.as_slice()) else {
        let why = est.refused.as_deref().unwrap_or("no estimate");
        return (
            Outcome::Pass,
            format!(
                "{seen}; on these samples alone, at {pct:.0} % confidence one sample exceeds it with probability at most {observed_bound:.2e}; no extrapolation beyond them: {why}"
            ),
        );
    };
    let fitted = format!(
        "a GEV fitted to {} maxima of {:.0} s (shape ξ {:.3}) gives at {pct:.0} % confidence {} that a run of {:.0} s exceeds it and {} that an hour does",
        est.blocks,
        est.block_s,
        fit.xi,
        probability(run.upper),
        run.horizon_s,
        probability(hour.upper)
    );
    if run.upper < 1.0 - confidence {
        (Outcome::Pass, format!("{seen}; {fitted}"))
    } else {
        (
            Outcome::Inconclusive,
            format!(
                "{seen}, but {fitted}: a repeat of the run could exceed it, more than the {:.0} % allowed",
                (1.0 - confidence) * 100.0
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::budget::parse;
    use super::*;

    /// `n` samples, all in the 1 µs buckets of `at` (µs, with counts),
    /// the rest at 2 µs; 200 buckets of 1 µs.
    fn tail(cpu: u32, n: u64, at: &[(usize, u64)], overflows: u64) -> CpuTail {
        let mut counts = vec![0u64; 200];
        let placed: u64 = at.iter().map(|(_, c)| c).sum();
        counts[2] = n - placed - overflows;
        for &(us, c) in at {
            counts[us] += c;
        }
        let max_ns = if overflows > 0 {
            250_000
        } else {
            at.iter()
                .map(|(us, _)| *us as u64 * 1000 + 999)
                .max()
                .unwrap_or(2_999)
        };
        CpuTail {
            cpu,
            width_ns: 1000,
            buckets: 200,
            counts,
            overflows,
            samples: n,
            max_ns,
            per_second_max_ns: Vec::new(),
            elapsed_s: 10.0,
        }
    }

    #[test]
    fn exceedances_count_a_straddling_bucket_on_either_side() {
        let t = tail(3, 1000, &[(50, 4), (60, 1)], 2);
        assert_eq!(t.exceedances(49_999), (7, 7));
        assert_eq!(
            t.exceedances(50_000),
            (3, 7),
            "bucket 50 holds 50.000-50.999"
        );
        assert_eq!(t.exceedances(50_999), (3, 3));
        assert_eq!(
            t.exceedances(300_000),
            (0, 2),
            "overflows past the range: unknown"
        );
        assert_eq!(t.exceedances(240_000), (1, 2), "the max says one is over");
    }

    #[test]
    fn a_percentile_passes_fails_or_asks_for_more_samples() {
        let terms = parse("p99.99<=50us").unwrap();
        // 100,000 samples with none over: 3e-5 < 1e-4 at 95 %.
        let pass = judge(&terms, &[tail(2, 100_000, &[], 0)], 0.95);
        assert_eq!(pass.outcome, Outcome::Pass, "{pass:?}");
        // 100,000 samples, 100 over: at least ~8e-4 > 1e-4.
        let fail = judge(&terms, &[tail(2, 100_000, &[(80, 100)], 0)], 0.95);
        assert_eq!(fail.outcome, Outcome::Fail, "{fail:?}");
        // 10,000 samples with none over: ≤ 3e-4, not yet ≤ 1e-4.
        let short = judge(&terms, &[tail(2, 10_000, &[], 0)], 0.95);
        assert_eq!(short.outcome, Outcome::Inconclusive);
        assert_eq!(short.terms[0].cpus[0].samples_needed, Some(29_956));
        assert!(short.terms[0].cpus[0]
            .why
            .contains("29956 samples would decide"));
    }

    #[test]
    fn a_max_term_fails_on_one_sample_and_every_cpu_must_hold() {
        let terms = parse("max<=100us,p99<=50us").unwrap();
        let good = tail(2, 10_000, &[(60, 5)], 0);
        let bad = tail(3, 10_000, &[(150, 1)], 0);
        let v = judge(&terms, &[good.clone(), bad], 0.95);
        assert_eq!(v.terms[0].cpus[0].outcome, Outcome::Pass);
        assert_eq!(v.terms[0].cpus[1].outcome, Outcome::Fail);
        assert!(
            v.terms[0].cpus[1].why.contains("150.999 µs")
                || v.terms[0].cpus[1].why.contains("151.0 µs"),
            "{}",
            v.terms[0].cpus[1].why
        );
        assert_eq!(v.terms[0].outcome, Outcome::Fail);
        assert_eq!(v.outcome, Outcome::Fail);
        // The percentile term alone holds on both.
        assert_eq!(v.terms[1].outcome, Outcome::Pass);
        let v = judge(&terms[1..], &[good], 0.95);
        assert_eq!(v.outcome, Outcome::Pass);
    }

    /// A run of `seconds` whose per-second maxima follow a GEV around
    /// 20 µs (σ 1 µs, ξ −0.1, so nothing past 30 µs).
    fn fitted_tail(seconds: usize) -> CpuTail {
        let g = evt::Gev {
            mu: 20_000.0,
            sigma: 1_000.0,
            xi: -0.1,
        };
        let maxima: Vec<u64> = g
            .sample(seconds, &mut fastrand::Rng::with_seed(4))
            .into_iter()
            .map(|x| x as u64)
            .collect();
        let mut t = tail(2, seconds as u64 * 1000, &[], 0);
        t.max_ns = *maxima.iter().max().unwrap();
        t.counts[(t.max_ns / 1000) as usize] += 1;
        t.counts[2] -= 1;
        t.per_second_max_ns = maxima;
        t.elapsed_s = seconds as f64;
        t
    }

    #[test]
    fn a_max_term_passes_on_its_fitted_tail_or_waits_for_a_longer_run() {
        let t = fitted_tail(600);
        // Far past the tail's end: a repeat of the run stays below.
        let far = judge(&parse("max<=40us").unwrap(), std::slice::from_ref(&t), 0.95);
        let c = &far.terms[0].cpus[0];
        assert_eq!(c.outcome, Outcome::Pass, "{}", c.why);
        assert!(c.tail.as_ref().unwrap().extrapolated());
        assert!(c.why.contains("a GEV fitted to 600 maxima"), "{}", c.why);
        // 40 µs lies far past the tail's end (20 µs + 10 µs): said, not printed as 1e-300.
        assert!(
            c.why
                .contains("confidence less than 1e-12 that a run of 600 s"),
            "{}",
            c.why
        );
        assert_eq!(probability(3.1e-5), "at most 3.10e-5");
        // Just above the largest sample: not a sample over, but a repeat
        // of the run would likely exceed it.
        let bound = format!("max<={}ns", t.max_ns + 1);
        let close = judge(&parse(&bound).unwrap(), &[t], 0.95);
        let c = &close.terms[0].cpus[0];
        assert_eq!(c.outcome, Outcome::Inconclusive, "{}", c.why);
        assert!(
            c.why.contains("a repeat of the run could exceed it"),
            "{}",
            c.why
        );
    }
}
