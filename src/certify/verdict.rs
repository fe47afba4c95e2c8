//! The verdict on a budget from the measured histograms: per term and CPU,
//! PASS, FAIL or INCONCLUSIVE, with the numbers behind it. Pure.

use serde::{Deserialize, Serialize};

use super::budget::{Statistic, Target, Term};
use super::count::{self, Clusters};
use super::evt::{self, TailEstimate};
use super::stats;
pub use super::tail::CpuTail;

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
    /// Deadlines of the run: the samples and those the probe skipped
    /// after a stall (0 in a `certify.json` older than this field).
    #[serde(default)]
    pub deadlines: u64,
    /// Deadlines late past the bound, samples and skipped ones, at least
    /// and at most (a histogram bucket straddling the bound counts on
    /// either side).
    pub exceedances: (u64, u64),
    /// Of those, the skipped deadlines, at least and at most.
    #[serde(default)]
    pub skipped_over: (u64, u64),
    /// The exceedances grouped by the seconds they fell in (`None`: the
    /// run kept no per-second maxima).
    #[serde(default)]
    pub clusters: Option<Clusters>,
    /// The observed maximum, ns.
    pub max_ns: u64,
    /// The confidence bounds on the probability that one deadline is late
    /// past the bound (Clopper-Pearson, one-sided each; per cluster where
    /// that is wider), low and high.
    pub exceed_probability: (f64, f64),
    /// Whether the clusters widened those bounds (bursts, not independent
    /// exceedances).
    #[serde(default)]
    pub declustered: bool,
    /// With no deadline over the bound and the fitted tail believed: the
    /// upper bound it gives on one deadline's probability of exceeding.
    #[serde(default)]
    pub extrapolated_probability: Option<f64>,
    /// With no sample over the bound, how many samples the term needs for
    /// PASS at the confidence asked (`None`: it has them, or it failed).
    #[serde(default)]
    pub samples_needed: Option<u64>,
    /// With no deadline over the bound: the extreme-value analysis of the
    /// per-second maxima, with what it refused and why.
    #[serde(default)]
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
/// must hold on every CPU.
///
/// Late deadlines are the samples over the bound and the deadlines the
/// probe skipped after a stall ([`count::late`]); they are counted per
/// deadline and, where the per-second maxima show bursts, per cluster
/// ([`count::rate`]).
///
/// A percentile term passes when the upper confidence bound on the
/// probability of a late deadline is within what it allows, fails when
/// the lower one is above it; with no deadline over the bound and the
/// extreme-value analysis believed ([`evt::estimate`]), the fitted tail
/// may show it within; else it is inconclusive.
///
/// A `max` term fails on one deadline over its bound. Otherwise it passes
/// only where the extreme-value analysis is believed and gives, at the
/// confidence asked, less than `1 − confidence` that a run as long
/// exceeds the bound; where the analysis is refused it is inconclusive.
/// It is never more favourable than the percentile term allowing one
/// late deadline in the run, nor than any percentile term of the budget
/// with the same or a larger bound (which it implies).
///
/// With a `target`, a `max` term passes instead where the upper bound on
/// exceeding over the target's horizon is within it, and its latency at
/// the target (the pWCET) is given with its bound.
pub fn judge(
    terms: &[Term],
    tails: &[CpuTail],
    confidence: f64,
    target: Option<&Target>,
) -> Verdict {
    let mut terms: Vec<TermVerdict> = terms
        .iter()
        .map(|term| TermVerdict {
            term: term.clone(),
            outcome: Outcome::Inconclusive,
            cpus: tails
                .iter()
                .map(|t| judge_cpu(term, t, confidence, target))
                .collect(),
        })
        .collect();
    no_max_better_than_what_it_implies(&mut terms);
    for t in &mut terms {
        t.outcome = worst(t.cpus.iter().map(|c| c.outcome));
    }
    Verdict {
        confidence,
        outcome: worst(terms.iter().map(|t| t.outcome)),
        terms,
    }
}

fn worst(outcomes: impl Iterator<Item = Outcome>) -> Outcome {
    outcomes.max().unwrap_or(Outcome::Inconclusive)
}

/// A `max<=B` term claims more than any percentile term with a bound of
/// `B` or more: on each CPU it takes the worse of its verdict and theirs.
fn no_max_better_than_what_it_implies(terms: &mut [TermVerdict]) {
    let implied: Vec<(String, u64, Vec<Outcome>)> = terms
        .iter()
        .filter(|t| matches!(t.term.statistic, Statistic::Percentile { .. }))
        .map(|t| {
            let outcomes = t.cpus.iter().map(|c| c.outcome).collect();
            (t.term.text.clone(), t.term.bound_ns, outcomes)
        })
        .collect();
    for t in terms
        .iter_mut()
        .filter(|t| t.term.statistic == Statistic::Max)
    {
        for (text, bound, outcomes) in &implied {
            if *bound < t.term.bound_ns {
                continue;
            }
            for (c, &o) in t.cpus.iter_mut().zip(outcomes) {
                if o > c.outcome {
                    c.outcome = o;
                    c.why.push_str(&format!(
                        "; it claims more than {text}, which is {} on these samples",
                        o.word()
                    ));
                }
            }
        }
    }
}

impl Outcome {
    /// PASS, FAIL or INCONCLUSIVE.
    pub fn word(self) -> &'static str {
        match self {
            Outcome::Pass => "PASS",
            Outcome::Fail => "FAIL",
            Outcome::Inconclusive => "INCONCLUSIVE",
        }
    }
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

fn judge_cpu(term: &Term, tail: &CpuTail, confidence: f64, target: Option<&Target>) -> CpuVerdict {
    let late = count::late(tail, term.bound_ns);
    let deadlines = count::deadlines(tail);
    let clusters = count::clusters(tail, term.bound_ns, &late);
    let rate = count::rate(&late, clusters.as_ref(), deadlines, confidence);
    let mut v = CpuVerdict {
        cpu: tail.cpu,
        outcome: Outcome::Inconclusive,
        samples: tail.samples,
        deadlines,
        exceedances: late.total(),
        skipped_over: late.skipped,
        clusters,
        max_ns: tail.max_ns,
        exceed_probability: rate.bounds,
        declustered: rate.declustered,
        extrapolated_probability: None,
        samples_needed: None,
        tail: None,
        why: "no samples".into(),
    };
    if tail.samples == 0 {
        return v;
    }
    match term.statistic {
        Statistic::Max => judge_max(term, tail, &mut v, confidence, target),
        Statistic::Percentile { .. } => {
            let est = (late.total().1 == 0).then(|| tail_estimate(tail, term, confidence));
            let (outcome, needed, why) = percentile(
                term.bound_ns,
                term.allowed(),
                &v,
                est.as_ref(),
                tail,
                confidence,
            );
            v.extrapolated_probability = est.as_ref().and_then(|e| per_deadline(tail, e));
            (v.outcome, v.samples_needed, v.why) = (outcome, needed, why);
            v.tail = est;
        }
    }
    v
}

fn tail_estimate(tail: &CpuTail, term: &Term, confidence: f64) -> TailEstimate {
    let mut est = evt::estimate(
        &tail.per_second_max_ns,
        term.bound_ns,
        tail.elapsed_s,
        confidence,
    );
    // The second view only where the first would let the term pass.
    if gev_per_deadline(tail, &est).is_some_and(|p| p <= term.allowed().max(f64::MIN_POSITIVE)) {
        with_pot(&mut est, tail, term.bound_ns, confidence);
    }
    est
}

/// Adds the peaks-over-threshold view of the histogram to a believed fit.
fn with_pot(est: &mut TailEstimate, tail: &CpuTail, bound_ns: u64, confidence: f64) {
    if est.extrapolated() {
        est.pot = Some(evt::pot::estimate(
            &tail.counts,
            tail.width_ns,
            tail.overflows,
            bound_ns,
            confidence,
        ));
    }
}

/// Whether the peaks over a threshold agree with a passing block-maxima
/// fit: in words, `Ok` where they do and `Err` where they do not.
fn pot_agrees(
    est: &TailEstimate,
    tail: &CpuTail,
    target: Option<&Target>,
    confidence: f64,
) -> Result<String, String> {
    let Some(pot) = &est.pot else {
        return Err("no peaks-over-threshold view".into());
    };
    if let Some(why) = &pot.refused {
        return Err(format!("the peaks over a threshold cannot tell: {why}"));
    }
    let (Some(fit), Some((_, per_deadline))) = (pot.fit, pot.per_deadline) else {
        return Err("the peaks over a threshold give no bound".into());
    };
    let deadlines = count::deadlines(tail) as f64;
    let (said, within) = match target.map(|t| (t, t.horizon_s)) {
        Some((t, Some(h))) => {
            let n = deadlines / tail.elapsed_s.max(1.0) * h;
            let p = pot.over(n).unwrap_or(1.0);
            (
                format!("{} over {h:.0} s", probability(p)),
                p <= t.probability,
            )
        }
        Some((t, None)) => (
            format!("{} per activation", probability(per_deadline)),
            per_deadline <= t.probability,
        ),
        None => {
            let p = pot.over(deadlines).unwrap_or(1.0);
            (
                format!("{} that a run as long exceeds it", probability(p)),
                p < 1.0 - confidence,
            )
        }
    };
    let words = format!(
        "the GPD fitted to the {} samples over {:.1} µs (shape ξ {:.3}) gives {said}",
        pot.excesses,
        pot.threshold_ns / 1000.0,
        fit.xi
    );
    if within {
        Ok(words)
    } else {
        Err(words)
    }
}

/// How the deadlines over the bound were counted, for the why.
fn counted(v: &CpuVerdict, bound_ns: u64) -> String {
    let (low, high) = v.exceedances;
    let n = v.deadlines;
    let over = if low == high {
        format!("{low} of {n} deadlines over {:.1} µs", us(bound_ns))
    } else {
        format!(
            "{low} to {high} of {n} deadlines over {:.1} µs",
            us(bound_ns)
        )
    };
    let skipped = match v.skipped_over {
        (0, 0) => String::new(),
        (a, b) if a == b => format!(" ({a} of them skipped after a stall)"),
        (a, b) => format!(" ({a} to {b} of them skipped after a stall)"),
    };
    let clusters = match (&v.clusters, v.declustered) {
        (Some(c), true) => format!(
            ", in {} clusters (extremal index {:.2}: counted per cluster)",
            c.clusters,
            c.extremal_index.unwrap_or(1.0)
        ),
        _ => String::new(),
    };
    format!("{over}{skipped}{clusters}")
}

/// A percentile's verdict, `allowed` the probability of a late deadline
/// it allows: (outcome, samples that would decide, why).
fn percentile(
    bound_ns: u64,
    allowed: f64,
    v: &CpuVerdict,
    est: Option<&TailEstimate>,
    tail: &CpuTail,
    confidence: f64,
) -> (Outcome, Option<u64>, String) {
    let pct = confidence * 100.0;
    let (p_lo, p_hi) = v.exceed_probability;
    let seen = counted(v, bound_ns);
    if p_hi <= allowed {
        return (
            Outcome::Pass,
            None,
            format!("{seen}: at {pct:.0} % confidence a deadline is late past it with probability at most {p_hi:.2e}, within the {allowed:.2e} allowed"),
        );
    }
    if p_lo > allowed {
        return (
            Outcome::Fail,
            None,
            format!("{seen}: at {pct:.0} % confidence a deadline is late past it with probability at least {p_lo:.2e}, more than the {allowed:.2e} allowed"),
        );
    }
    let counts = format!("{seen}: the probability lies between {p_lo:.2e} and {p_hi:.2e} at {pct:.0} % confidence, and {allowed:.2e} is allowed");
    let extrapolated = est.and_then(|e| per_deadline(tail, e).map(|p| (e, p)));
    match extrapolated {
        Some((e, p)) if p <= allowed => (
            Outcome::Pass,
            None,
            format!(
                "{counts}; {}, so at most {p:.2e} per deadline",
                fitted_words(e, tail, confidence)
            ),
        ),
        _ => {
            let needed = (v.exceedances.1 == 0).then(|| stats::samples_needed(allowed, confidence));
            let why = match (est, extrapolated) {
                (Some(e), None) => format!("; nothing extrapolated: {}", refusal_words(e)),
                (_, Some((_, p))) => {
                    format!("; the fitted tail gives at most {p:.2e}, not within it")
                }
                (None, None) => String::new(),
            };
            let more = needed
                .map(|m| format!("; with none over it, {m} deadlines would decide"))
                .unwrap_or_default();
            (
                Outcome::Inconclusive,
                needed,
                format!("{counts}{why}{more}"),
            )
        }
    }
}

/// The fitted tail's upper bound on one deadline's probability of
/// exceeding, where it is believed: the bound on a block exceeding, as
/// expected clusters per block (`−ln(1 − P)`), times the mean cluster
/// size (`1/θ`, θ estimated where the run has exceedances to count),
/// per deadline of a block.
fn gev_per_deadline(tail: &CpuTail, est: &TailEstimate) -> Option<f64> {
    if !est.extrapolated() || tail.elapsed_s <= 0.0 {
        return None;
    }
    let block = est.exceedance.first()?;
    let per_block = count::deadlines(tail) as f64 / tail.elapsed_s * est.block_s;
    if per_block < 1.0 {
        return None;
    }
    let theta = count::extremal_index_of_body(tail).unwrap_or(1.0 / per_block);
    let clusters = -(-block.upper.min(1.0)).ln_1p();
    Some((clusters / (theta * per_block)).min(1.0))
}

/// The stricter of [`gev_per_deadline`] and the peaks over a threshold's
/// bound; none where the second view cannot tell (or was not asked: the
/// block maxima had already decided).
fn per_deadline(tail: &CpuTail, est: &TailEstimate) -> Option<f64> {
    let gev = gev_per_deadline(tail, est)?;
    let (_, pot) = est.pot.as_ref()?.per_deadline?;
    Some(gev.max(pot))
}

/// A `max` term: FAIL on one late deadline; else what the fitted tail
/// gives, never better than the percentile allowing one late deadline.
fn judge_max(
    term: &Term,
    tail: &CpuTail,
    v: &mut CpuVerdict,
    confidence: f64,
    target: Option<&Target>,
) {
    let bound = term.bound_ns;
    if tail.max_ns > bound || v.exceedances.0 > 0 {
        v.outcome = Outcome::Fail;
        v.why = format!(
            "the largest of {} samples, {:.1} µs, is over {:.1} µs ({})",
            tail.samples,
            us(tail.max_ns),
            us(bound),
            counted(v, bound)
        );
        return;
    }
    let to_block = target.map(|t| to_block(t, tail));
    let est = evt::estimate_at(
        &tail.per_second_max_ns,
        bound,
        tail.elapsed_s,
        confidence,
        to_block.as_ref().map(|f| f as &dyn Fn(f64) -> f64),
    );
    let mut est = est;
    let margin = (bound - tail.max_ns) as f64 / bound as f64 * 100.0;
    let seen = format!(
        "no sample of {} over {:.1} µs: the largest, {:.1} µs, is {margin:.1} % below it",
        tail.samples,
        us(bound),
        us(tail.max_ns)
    );
    let (mut outcome, mut why) = match (&est.refused, est.exceedance.as_slice(), target) {
        (None, [block, _, _], Some(t)) => {
            let pw = est.pwcet.expect("a target gives a pWCET where the fit holds");
            let said = target_words(t, &est, block.upper, tail, confidence);
            if block.upper <= pw.block_probability {
                (Outcome::Pass, format!("{seen}; {said}"))
            } else {
                (Outcome::Inconclusive, format!("{seen}, but {said}: the target is not shown"))
            }
        }
        (None, [_, _, run], None) if run.upper < 1.0 - confidence => (
            Outcome::Pass,
            format!("{seen}; {}", fitted_words(&est, tail, confidence)),
        ),
        (None, [_, _, _], None) => (
            Outcome::Inconclusive,
            format!(
                "{seen}, but {}: a repeat of the run could exceed it, more than the {:.0} % allowed",
                fitted_words(&est, tail, confidence),
                (1.0 - confidence) * 100.0
            ),
        ),
        _ => (
            Outcome::Inconclusive,
            format!(
                "{seen}; what a repeat of the run would reach is not known: nothing extrapolated: {}",
                refusal_words(&est)
            ),
        ),
    };
    if outcome == Outcome::Pass {
        with_pot(&mut est, tail, bound, confidence);
        match pot_agrees(&est, tail, target, confidence) {
            Ok(words) => why.push_str(&format!("; {words}")),
            Err(words) => {
                outcome = Outcome::Inconclusive;
                why.push_str(&format!(
                    "; but {words}: the two views of the tail do not agree, and the stricter wins"
                ));
            }
        }
    }
    // The percentile that allows one late deadline in a run as long.
    let one_in_run = 1.0 / v.deadlines.max(1) as f64;
    let (o, _, w) = percentile(bound, one_in_run, v, Some(&est), tail, confidence);
    if o > outcome {
        outcome = o;
        why.push_str(&format!(
            "; and a percentile allowing one late deadline in the run is {}: {w}",
            o.word()
        ));
    }
    v.extrapolated_probability = per_deadline(tail, &est);
    v.outcome = outcome;
    v.why = why;
    v.tail = Some(est);
}

/// The target brought to one block of `block_s` seconds: the probability
/// one block may exceed with. Over a horizon `H`: `1 − (1 − P)^(k/H)`;
/// per activation: `1 − exp(−P·θ·m)`, `m` the deadlines of a block and θ
/// the extremal index of the run's body (1/m where unknown).
fn to_block(t: &Target, tail: &CpuTail) -> impl Fn(f64) -> f64 {
    let (p, horizon) = (t.probability, t.horizon_s);
    let per_second = count::deadlines(tail) as f64 / tail.elapsed_s.max(1.0);
    let theta = count::extremal_index_of_body(tail);
    move |block_s: f64| match horizon {
        Some(h) => -((block_s / h) * (-p).ln_1p()).exp_m1(),
        None => {
            let m = (per_second * block_s).max(1.0);
            -(-p * theta.unwrap_or(1.0 / m) * m).exp_m1()
        }
    }
}

/// What the fit says against the target: its bound over the target's
/// horizon and the latency at the target.
fn target_words(
    t: &Target,
    est: &TailEstimate,
    block_upper: f64,
    tail: &CpuTail,
    confidence: f64,
) -> String {
    let pct = confidence * 100.0;
    let over = match t.horizon_s {
        Some(h) => format!(
            "{} over {h:.0} s",
            probability(evt::over_horizon(block_upper, h / est.block_s))
        ),
        None => match per_deadline(tail, est) {
            Some(p) => format!("{} per activation", probability(p)),
            None => "no bound per activation".into(),
        },
    };
    let pw = est.pwcet.map_or(String::new(), |pw| {
        format!(
            "; the latency at the target (pWCET) is {:.1} µs, at most {:.1} µs at {pct:.0} % confidence",
            pw.latency_ns / 1000.0,
            pw.upper_ns / 1000.0
        )
    });
    format!(
        "against the target of {t}, a GEV fitted to {} maxima of {:.0} s gives at {pct:.0} % confidence {over}{pw}",
        est.blocks, est.block_s
    )
}

/// What the believed fit says of a run as long and of an hour.
fn fitted_words(est: &TailEstimate, tail: &CpuTail, confidence: f64) -> String {
    let pct = confidence * 100.0;
    let (Some(fit), [_, hour, run]) = (est.fit, est.exceedance.as_slice()) else {
        return "no fit".into();
    };
    if run.upper == 0.0 {
        return format!(
            "the GEV fitted to {} maxima of {:.0} s (shape ξ {:.3}) ends below the bound in at least {pct:.0} % of {} resamples: nothing like this run reaches it (a rarer mode, under about one in {} deadlines, could not show in a run this long)",
            est.blocks,
            est.block_s,
            fit.xi,
            est.resamples,
            count::deadlines(tail)
        );
    }
    format!(
        "a GEV fitted to {} maxima of {:.0} s (shape ξ {:.3}) gives at {pct:.0} % confidence {} that a run of {:.0} s exceeds it and {} that an hour does",
        est.blocks,
        est.block_s,
        fit.xi,
        probability(run.upper),
        run.horizon_s,
        probability(hour.upper)
    )
}

/// Why nothing was extrapolated, and what would let the term decide.
fn refusal_words(est: &TailEstimate) -> String {
    let pot = est.pot.as_ref().and_then(|p| p.refused.as_deref());
    let why = match (est.refused.as_deref(), pot) {
        (Some(why), _) => why.to_string(),
        (None, Some(why)) => format!("the peaks over a threshold cannot tell: {why}"),
        (None, None) => "no estimate".into(),
    };
    match &est.to_decide {
        Some(next) => format!("{why} (to decide: {next})"),
        None => why,
    }
}

/// An upper bound on a probability for people: `at most 3.10e-5`; below
/// 1e-12 the figure rests on the fitted shape alone, and says so.
pub fn probability(p: f64) -> String {
    if p == 0.0 {
        "none (the fitted tail ends below the bound)".into()
    } else if p < 1e-12 {
        format!("at most {p:.1e} (a figure of the fitted shape alone)")
    } else {
        format!("at most {p:.2e}")
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
            missed: 0,
            interval_ns: None,
            skipped: count::Skipped::AtLeastOnePeriod,
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
        let pass = judge(&terms, &[tail(2, 100_000, &[], 0)], 0.95, None);
        assert_eq!(pass.outcome, Outcome::Pass, "{pass:?}");
        // 100,000 samples, 100 over: at least ~8e-4 > 1e-4.
        let fail = judge(&terms, &[tail(2, 100_000, &[(80, 100)], 0)], 0.95, None);
        assert_eq!(fail.outcome, Outcome::Fail, "{fail:?}");
        // 10,000 samples with none over: ≤ 3e-4, not yet ≤ 1e-4.
        let short = judge(&terms, &[tail(2, 10_000, &[], 0)], 0.95, None);
        assert_eq!(short.outcome, Outcome::Inconclusive);
        assert_eq!(short.terms[0].cpus[0].samples_needed, Some(29_956));
        assert!(short.terms[0].cpus[0]
            .why
            .contains("29956 deadlines would decide"));
    }

    #[test]
    fn a_max_term_fails_on_one_sample_and_every_cpu_must_hold() {
        let terms = parse("max<=100us,p99<=50us").unwrap();
        let good = tail(2, 10_000, &[(60, 5)], 0);
        let bad = tail(3, 10_000, &[(150, 1)], 0);
        let v = judge(&terms, &[good.clone(), bad], 0.95, None);
        // 10 s without per-second maxima: nothing says what a repeat reaches.
        assert_eq!(v.terms[0].cpus[0].outcome, Outcome::Inconclusive);
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
        let v = judge(&terms[1..], &[good], 0.95, None);
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
        // Each second's largest sample is in the histogram too.
        let mut t = tail(2, seconds as u64 * 1000, &[], 0);
        t.max_ns = *maxima.iter().max().unwrap();
        for &m in &maxima {
            t.counts[(m / 1000) as usize] += 1;
            t.counts[2] -= 1;
        }
        t.per_second_max_ns = maxima;
        t.elapsed_s = seconds as f64;
        t
    }

    #[test]
    fn a_max_term_passes_on_its_fitted_tail_or_waits_for_a_longer_run() {
        let t = fitted_tail(600);
        // Far past the tail's end: a repeat of the run stays below.
        let far = judge(
            &parse("max<=40us").unwrap(),
            std::slice::from_ref(&t),
            0.95,
            None,
        );
        let c = &far.terms[0].cpus[0];
        assert_eq!(c.outcome, Outcome::Pass, "{}", c.why);
        assert!(c.tail.as_ref().unwrap().extrapolated());
        assert!(c.why.contains("GEV fitted to 600 maxima"), "{}", c.why);
        // 40 µs lies far past the tail's end (20 µs + 10 µs): said as
        // what it is, not as a tiny probability.
        assert!(
            c.why
                .contains("ends below the bound in at least 95 % of 400 resamples"),
            "{}",
            c.why
        );
        assert!(!c.why.contains("1e-12"), "{}", c.why);
        assert_eq!(probability(3.1e-5), "at most 3.10e-5");
        // Just above the largest sample: not a sample over, but a repeat
        // of the run would likely exceed it.
        let bound = format!("max<={}ns", t.max_ns + 1);
        let close = judge(&parse(&bound).unwrap(), &[t], 0.95, None);
        let c = &close.terms[0].cpus[0];
        assert_eq!(c.outcome, Outcome::Inconclusive, "{}", c.why);
        assert!(
            c.why.contains("a repeat of the run could exceed it"),
            "{}",
            c.why
        );
    }
}
