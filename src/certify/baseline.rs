//! Against a baseline: an earlier `certify`'s verdict, figure by figure,
//! and what counts as a regression (a FAIL of the budget): events more
//! frequent now than chance explains, by an exact test whose false-alarm
//! rate is stated ([`FALSE_ALARM`]).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::verdict::{CpuTail, CpuVerdict, Outcome, Verdict};

/// The earlier run to compare with, and how much worse is a regression.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Baseline {
    /// Its directory.
    pub dir: PathBuf,
    /// Its verdict, as its `certify.json` holds it.
    pub verdict: Verdict,
    /// How much larger a maximum may grow before it is said (0.2: by a
    /// fifth); a single sample, so said, never judged a regression.
    pub max_growth: f64,
    /// What it measured, per CPU: its per-second maxima for the tests.
    pub tails: Vec<CpuTail>,
}

/// The largest `certify.json` read as a baseline: a day-long run's,
/// with its histograms and per-second maxima, is a few MiB.
pub const MAX_BYTES: u64 = 256 << 20;

/// The part of `certify.json` a baseline needs: its verdict, and what it
/// measured (`tails` since it was written; before, the measurement's
/// shielded phase).
#[derive(Deserialize)]
struct Earlier {
    verdict: Verdict,
    #[serde(default)]
    tails: Vec<CpuTail>,
    #[serde(default)]
    measurement: Option<serde_json::Value>,
}

impl Baseline {
    /// Reads `dir/certify.json`, a regular file of at most
    /// [`MAX_BYTES`] (a FIFO or a device there is refused, not waited on);
    /// the error names the file and what is wrong with it.
    pub fn read(dir: &Path, max_growth: f64) -> Result<Baseline, String> {
        let file = dir.join("certify.json");
        let text = crate::input::read_file(&file, MAX_BYTES).map_err(|e| {
            format!(
                "{}: {e} (give the directory of an earlier certify)",
                file.display()
            )
        })?;
        let earlier: Earlier = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not a certify.json ({e})", file.display()))?;
        let tails = if earlier.tails.is_empty() {
            earlier
                .measurement
                .as_ref()
                .map(super::source::shielded_tails_of_json)
                .unwrap_or_default()
        } else {
            earlier.tails
        };
        Ok(Baseline {
            dir: dir.to_path_buf(),
            verdict: earlier.verdict,
            max_growth,
            tails,
        })
    }
}

/// The chance, over every test of a comparison together, that two runs
/// of an unchanged machine are called a regression (Bonferroni: each of
/// `m` tests at this over `m`).
pub const FALSE_ALARM: f64 = 0.01;

/// One comparison on one CPU, then and now: a term's late deadlines, or
/// the per-second maxima over the baseline's 90th percentile of them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// The term, as written, or `seconds over X µs`.
    pub term: String,
    /// The CPU.
    pub cpu: u32,
    /// The verdicts, then and now (`None` for the per-second maxima).
    pub outcome: Option<(Outcome, Outcome)>,
    /// The largest sample, ns, then and now.
    pub max_ns: (u64, u64),
    /// Events counted and the trials they were counted in, then and now:
    /// clusters of late deadlines in seconds, or late deadlines in
    /// deadlines where no per-second maxima were kept.
    pub events: ((u64, u64), (u64, u64)),
    /// The one-sided p-value of "as often now as then" (1: now no more
    /// often than then).
    pub p_value: f64,
    /// The level this test rejects at: [`FALSE_ALARM`] over the tests.
    pub level: f64,
    /// Whether it regressed: more events now than chance explains.
    pub regression: bool,
    /// Why, or that it did not.
    pub why: String,
}

/// Each term and CPU both runs judged, and each CPU's per-second maxima,
/// compared by a one-sided test of whether events are more frequent now
/// ([`more_often`]): the term's clusters of late deadlines, and the
/// seconds (in clusters) whose maximum is over the baseline's 90th
/// percentile of them, where both runs kept them. A regression is a
/// p-value under [`FALSE_ALARM`] divided by the number of tests. A worse
/// verdict or a grown maximum is said, not judged: two runs of one
/// heavy-tailed machine differ in both by chance.
pub fn compare(base: &Baseline, now: &Verdict, now_tails: &[CpuTail]) -> Vec<Change> {
    let mut out = Vec::new();
    for t in &now.terms {
        let Some(then_t) = base
            .verdict
            .terms
            .iter()
            .find(|b| b.term.text == t.term.text)
        else {
            continue;
        };
        for c in &t.cpus {
            if let Some(b) = then_t.cpus.iter().find(|b| b.cpu == c.cpu) {
                out.push(term_change(&t.term.text, b, c));
            }
        }
    }
    for now_tail in now_tails {
        if let Some(then_tail) = base.tails.iter().find(|b| b.cpu == now_tail.cpu) {
            out.extend(maxima_change(then_tail, now_tail));
        }
    }
    let level = FALSE_ALARM / out.len().max(1) as f64;
    for c in &mut out {
        c.level = level;
        c.regression = c.p_value < level;
        c.why = words(c, base.max_growth);
    }
    out
}

/// A term's events: clusters in seconds where both runs kept them, else
/// late deadlines (the most the histogram allows) in deadlines.
fn events(c: &CpuVerdict) -> (u64, u64) {
    match &c.clusters {
        Some(k) if k.seconds > 0 => (k.clusters, k.seconds),
        _ => (c.exceedances.1, c.deadlines.max(c.samples)),
    }
}

fn term_change(term: &str, then: &CpuVerdict, now: &CpuVerdict) -> Change {
    let (a, b) = match (&then.clusters, &now.clusters) {
        (Some(_), Some(_)) => (events(then), events(now)),
        _ => (
            (then.exceedances.1, then.deadlines.max(then.samples)),
            (now.exceedances.0, now.deadlines.max(now.samples)),
        ),
    };
    Change::new(
        term.into(),
        now.cpu,
        Some((then.outcome, now.outcome)),
        (then.max_ns, now.max_ns),
        (a, b),
    )
}

impl Change {
    /// A comparison of `events` then and now, tested; judged against the
    /// level by [`compare`] once every test is known.
    fn new(
        term: String,
        cpu: u32,
        outcome: Option<(Outcome, Outcome)>,
        max_ns: (u64, u64),
        events: ((u64, u64), (u64, u64)),
    ) -> Change {
        Change {
            term,
            cpu,
            outcome,
            max_ns,
            events,
            p_value: more_often(events.0, events.1),
            level: FALSE_ALARM,
            regression: false,
            why: String::new(),
        }
    }
}

/// The seconds whose maximum is over the baseline's 90th percentile of
/// them, in clusters of consecutive seconds, then and now.
fn maxima_change(then: &CpuTail, now: &CpuTail) -> Option<Change> {
    if now.per_second_max_ns.is_empty() {
        return None;
    }
    let (threshold, _) = super::count::body_threshold(&then.per_second_max_ns)?;
    let runs = |t: &CpuTail| {
        let seconds = t.per_second_max_ns.len() as u64;
        (
            super::count::runs_over(&t.per_second_max_ns, threshold),
            seconds,
        )
    };
    Some(Change::new(
        format!("seconds over {:.1} µs", threshold as f64 / 1000.0),
        now.cpu,
        None,
        (then.max_ns, now.max_ns),
        (runs(then), runs(now)),
    ))
}

/// The one-sided p-value that events happen now at least as often as
/// `now` shows when their rate is the same as then: `x₁` events in `n₁`
/// trials then, `x₂` in `n₂` now; given `x₁ + x₂`, `x₂` is binomial with
/// `n₂ / (n₁ + n₂)` (the conditional test of two Poisson rates, exact).
pub fn more_often((x1, n1): (u64, u64), (x2, n2): (u64, u64)) -> f64 {
    let total = x1 + x2;
    if x2 == 0 || n1 == 0 || n2 == 0 {
        return 1.0;
    }
    let share = n2 as f64 / (n1 + n2) as f64;
    match statrs::distribution::Binomial::new(share, total) {
        Ok(b) => {
            use statrs::distribution::DiscreteCDF;
            (1.0 - b.cdf(x2 - 1)).clamp(0.0, 1.0)
        }
        Err(_) => 1.0,
    }
}

fn words(c: &Change, max_growth: f64) -> String {
    let us = |ns: u64| ns as f64 / 1000.0;
    let ((x1, n1), (x2, n2)) = c.events;
    let counted = format!(
        "{x1} in {n1} then, {x2} in {n2} now: p = {:.2e} against the {:.1e} a regression needs",
        c.p_value, c.level
    );
    let mut said = if c.regression {
        format!("more often now than chance explains ({counted})")
    } else {
        format!("no regression ({counted})")
    };
    if let Some((then, now)) = c.outcome.filter(|(a, b)| b > a) {
        said.push_str(&format!(
            "; the verdict went from {} to {}",
            then.word(),
            now.word()
        ));
    }
    if c.max_ns.1 as f64 > c.max_ns.0 as f64 * (1.0 + max_growth) {
        said.push_str(&format!(
            "; the largest sample grew from {:.1} µs to {:.1} µs, more than {:.0} % (said, not judged: one sample)",
            us(c.max_ns.0),
            us(c.max_ns.1),
            max_growth * 100.0
        ));
    }
    said
}

#[cfg(test)]
mod tests {
    use super::super::budget::parse;
    use super::super::verdict::{TermVerdict, Verdict};
    use super::*;

    /// A verdict on 600 s at 1 kHz with `clusters` events over the bound.
    fn cpu(outcome: Outcome, max_ns: u64, clusters: u64) -> CpuVerdict {
        CpuVerdict {
            cpu: 2,
            outcome,
            samples: 600_000,
            deadlines: 600_000,
            exceedances: (clusters, clusters),
            skipped_over: (0, 0),
            clusters: Some(super::super::count::Clusters {
                seconds: 600,
                seconds_over: clusters,
                clusters,
                extremal_index: None,
            }),
            max_ns,
            exceed_probability: (0.0, 0.003),
            declustered: false,
            extrapolated_probability: None,
            samples_needed: None,
            tail: None,
            why: String::new(),
        }
    }

    fn verdict(c: CpuVerdict) -> Verdict {
        Verdict {
            confidence: 0.95,
            outcome: c.outcome,
            terms: vec![TermVerdict {
                term: parse("p99<=50us").unwrap().remove(0),
                outcome: c.outcome,
                cpus: vec![c],
            }],
        }
    }

    #[test]
    fn more_events_than_chance_explains_regress_a_grown_maximum_is_only_said() {
        let base = Baseline {
            dir: "before".into(),
            verdict: verdict(cpu(Outcome::Pass, 40_000, 5)),
            max_growth: 0.2,
            tails: Vec::new(),
        };
        let same = compare(&base, &verdict(cpu(Outcome::Pass, 47_000, 8)), &[]);
        assert!(!same[0].regression, "{:?}", same[0]);
        // One sample larger by a quarter: said, not a regression.
        let grown = compare(&base, &verdict(cpu(Outcome::Inconclusive, 50_000, 5)), &[]);
        assert!(!grown[0].regression, "{:?}", grown[0]);
        assert!(
            grown[0].why.contains("from 40.0 µs to 50.0 µs"),
            "{}",
            grown[0].why
        );
        assert!(
            grown[0].why.contains("from PASS to INCONCLUSIVE"),
            "{}",
            grown[0].why
        );
        // 5 events then, 25 now in as long a run: p ≈ 1e-4 < 1 %.
        let worse = compare(&base, &verdict(cpu(Outcome::Pass, 40_000, 25)), &[]);
        assert!(worse[0].regression, "{:?}", worse[0]);
        assert!(
            worse[0].why.contains("5 in 600 then, 25 in 600 now"),
            "{}",
            worse[0].why
        );
    }

    #[test]
    fn the_conditional_test_of_two_rates_is_exact() {
        // 0 then, 7 now, equal trials: P(X ≥ 7 | 7, 1/2) = 1/128.
        assert!((more_often((0, 100), (7, 100)) - 1.0 / 128.0).abs() < 1e-12);
        assert_eq!(more_often((3, 100), (0, 100)), 1.0);
        // 2 then, 2 now: P(X ≥ 2 | 4, 1/2) = 11/16.
        assert!((more_often((2, 100), (2, 100)) - 11.0 / 16.0).abs() < 1e-12);
    }

    #[test]
    fn a_baseline_is_read_from_its_certify_json_or_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let err = Baseline::read(dir.path(), 0.2).unwrap_err();
        assert!(
            err.contains("certify.json") && err.contains("earlier certify"),
            "{err}"
        );
        std::fs::create_dir(dir.path().join("certify.json")).unwrap();
        let err = Baseline::read(dir.path(), 0.2).unwrap_err();
        assert!(err.contains("not a regular file"), "{err}");
        std::fs::remove_dir(dir.path().join("certify.json")).unwrap();
        std::fs::write(dir.path().join("certify.json"), "{\"verdict\": 1}").unwrap();
        assert!(Baseline::read(dir.path(), 0.2)
            .unwrap_err()
            .contains("not a certify.json"));
        let v = verdict(cpu(Outcome::Pass, 40_000, 0));
        let json = serde_json::json!({ "schema_version": 1, "verdict": v });
        std::fs::write(dir.path().join("certify.json"), json.to_string()).unwrap();
        assert_eq!(Baseline::read(dir.path(), 0.2).unwrap().verdict, v);
    }
}
