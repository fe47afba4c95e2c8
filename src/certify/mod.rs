//! `certify`: whether this machine, set up as it is, meets a latency
//! budget, and how sure that is. The budget's terms ([`budget`]), the
//! statistics ([`stats`]) and the verdict from the measured histograms
//! ([`verdict`]) are pure; the measuring is `compare`'s shielded phase
//! (its own shield, load on the housekeeping CPUs, undone at the end and
//! on Ctrl-C), and its files are written beside the verdict.

pub mod baseline;
pub mod budget;
pub mod evt;
pub mod preflight;
pub mod stats;
pub mod verdict;

use serde::Serialize;

use crate::compare::results::Results;
use crate::compare::watch::Watch;
use crate::compare::{self, CompareError, Context, Phase};
use crate::cpulist::CpuSet;
use crate::measure::results::Measurement;
use budget::Term;
use verdict::{CpuTail, Outcome, Verdict};

/// How often the shield, the guard and the load are looked at while the
/// run measures, seconds.
pub const WATCH_EVERY_S: f64 = 60.0;

/// Layout version of `certify.json`.
pub const SCHEMA_VERSION: u32 = 1;

/// What the user asked for.
#[derive(Debug, Clone, Serialize)]
pub struct Options {
    /// The measurement: `compare`'s shielded phase alone, for the duration.
    pub compare: compare::Options,
    /// The budget.
    pub budget: Vec<Term>,
    /// The confidence of the verdict (0 to 1).
    pub confidence: f64,
    /// An earlier run to compare with: a regression is a FAIL.
    pub baseline: Option<baseline::Baseline>,
}

impl Options {
    /// The measurement for `cpus`, `seconds` long, under `load` with
    /// `probe`, into `out`: the shielded phase, with the budget's bounds
    /// as compare's over-threshold limits.
    pub fn measuring(
        cpus: CpuSet,
        (load, probe): (crate::load::Scenario, crate::measure::ProbeKind),
        seconds: f64,
        budget: &[Term],
        out: std::path::PathBuf,
    ) -> compare::Options {
        let mut thresholds_us: Vec<f64> =
            budget.iter().map(|t| t.bound_ns as f64 / 1000.0).collect();
        thresholds_us.sort_by(f64::total_cmp);
        thresholds_us.dedup();
        compare::Options {
            cpus,
            load,
            probe,
            duration_s: seconds,
            thresholds_us,
            phases: vec![Phase::Shielded],
            out,
            explain_us: None,
            cache: Default::default(),
            cache_ways: None,
            watch_every_s: Some(WATCH_EVERY_S),
            checkpoint: true,
            shield: None,
            existing_shield: None,
        }
    }
}

/// What `certify` found; serialised as `certify.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Layout version of this document.
    pub schema_version: u32,
    /// The verdict on the whole budget.
    pub outcome: Outcome,
    /// Ctrl-C or SIGTERM ended the run early: at most INCONCLUSIVE
    /// unless a term had already failed.
    pub interrupted: bool,
    /// Each term, per CPU, with the numbers behind it.
    pub verdict: Verdict,
    /// What broke while the run measured, by time: the looks every
    /// [`WATCH_EVERY_S`] seconds that found the shield not holding, the
    /// load gone or the shield unreadable.
    pub breaks: Vec<Watch>,
    /// The starvation guard's boosts during the run (each one an
    /// interruption of a real-time task on a shielded CPU), from its first
    /// look to its last; `None` without a guard or fewer than two looks.
    pub guard_boosts: Option<u64>,
    /// Against the baseline asked for: its directory and each term on each
    /// CPU then and now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Against>,
    /// What the audit found before the run, and what alone makes the
    /// budget unreachable (`None`: the audit could not be read).
    pub preflight: Option<preflight::Preflight>,
    /// The measurement as `compare` reports it (its `results.json`).
    pub measurement: Results,
}

/// The comparison with a baseline.
#[derive(Debug, Clone, Serialize)]
pub struct Against {
    /// The baseline's directory.
    pub dir: std::path::PathBuf,
    /// How much a maximum may grow before it regresses (0.2: a fifth).
    pub max_growth: f64,
    /// Each term on each CPU both judged.
    pub changes: Vec<baseline::Change>,
}

/// Measures as `opts` asks and judges the budget on it.
pub fn run(ctx: &mut Context<'_>, opts: &Options) -> Result<Report, CompareError> {
    let pre = preflight::read(ctx.sys, &opts.compare.cpus, &opts.budget);
    match &pre {
        Ok(p) => {
            for o in &p.unreachable {
                (ctx.progress)(&format!("unreachable: {} (next: {})", o.what, o.next));
            }
        }
        Err(e) => (ctx.progress)(&format!("preflight: the audit could not be read: {e}")),
    }
    let measurement = compare::run(ctx, &opts.compare)?;
    let mut report = judge(opts, measurement);
    report.preflight = pre.ok();
    Ok(report)
}

/// The verdict of `opts`'s budget on a finished measurement.
pub fn judge(opts: &Options, measurement: Results) -> Report {
    let tails = shielded_tails(&measurement);
    let mut verdict = verdict::judge(&opts.budget, &tails, opts.confidence);
    let interrupted = measurement.interrupted || tails.is_empty();
    let looks: Vec<Watch> = compare::results::shielded(&measurement.phases)
        .map(|p| p.watch.clone())
        .unwrap_or_default();
    // A run whose load stopped did not measure under load.
    let load_failed = looks.iter().any(|w| w.load_processes == Some(0));
    if (interrupted || load_failed) && verdict.outcome == Outcome::Pass {
        verdict.outcome = Outcome::Inconclusive;
    }
    let against = opts.baseline.as_ref().map(|b| Against {
        dir: b.dir.clone(),
        max_growth: b.max_growth,
        changes: baseline::compare(b, &verdict),
    });
    if against
        .as_ref()
        .is_some_and(|a| a.changes.iter().any(|c| c.regression))
    {
        verdict.outcome = Outcome::Fail;
    }
    let boosts: Vec<u64> = looks.iter().filter_map(|w| w.guard_boosts).collect();
    let guard_boosts = match (boosts.first(), boosts.last()) {
        (Some(a), Some(b)) if boosts.len() > 1 => Some(b.saturating_sub(*a)),
        _ => None,
    };
    Report {
        schema_version: SCHEMA_VERSION,
        outcome: verdict.outcome,
        interrupted,
        verdict,
        breaks: looks.into_iter().filter(Watch::is_break).collect(),
        guard_boosts,
        baseline: against,
        preflight: None,
        measurement,
    }
}

/// Each CPU's histogram of the shielded phase, as the verdict reads it
/// (empty without that phase).
pub fn shielded_tails(measurement: &Results) -> Vec<CpuTail> {
    compare::results::shielded(&measurement.phases)
        .map(|p| tails(&p.measurement))
        .unwrap_or_default()
}

/// Each CPU's histogram of a measurement, as the verdict reads it.
pub fn tails(m: &Measurement) -> Vec<CpuTail> {
    let Some(probe) = m.results.first() else {
        return Vec::new();
    };
    probe
        .cpus
        .iter()
        .map(|c| CpuTail {
            cpu: c.cpu,
            width_ns: probe.histogram.bucket_width_ns,
            buckets: probe.histogram.buckets,
            counts: c.histogram.clone(),
            overflows: c.stats.overflows,
            samples: c.stats.samples,
            max_ns: c.stats.max_ns.unwrap_or(0),
            per_second_max_ns: c.per_second_max_ns.clone(),
            elapsed_s: probe.elapsed_s,
        })
        .collect()
}

/// The verdict as JUnit XML: one test case per term and CPU, a failure
/// for FAIL, skipped for INCONCLUSIVE, so a CI system gates on it.
pub fn junit(report: &Report) -> String {
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    };
    let cases: Vec<String> = report
        .verdict
        .terms
        .iter()
        .flat_map(|t| {
            t.cpus.iter().map(move |c| {
                let name = esc(&format!("{} on CPU {}", t.term.text, c.cpu));
                let body = match c.outcome {
                    Outcome::Pass => String::new(),
                    Outcome::Fail => format!("<failure message=\"{}\"/>", esc(&c.why)),
                    Outcome::Inconclusive => format!("<skipped message=\"{}\"/>", esc(&c.why)),
                };
                format!("    <testcase classname=\"cpushield.certify\" name=\"{name}\">{body}</testcase>\n")
            })
        })
        .collect();
    let count = |o: Outcome| {
        report
            .verdict
            .terms
            .iter()
            .flat_map(|t| &t.cpus)
            .filter(|c| c.outcome == o)
            .count()
    };
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"cpushield certify\" tests=\"{}\" failures=\"{}\" skipped=\"{}\">\n{}</testsuite>\n",
        cases.len(),
        count(Outcome::Fail),
        count(Outcome::Inconclusive),
        cases.concat()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::testing::{full_results, opts};

    fn options(budget: &str) -> Options {
        Options {
            compare: opts("2"),
            budget: budget::parse(budget).unwrap(),
            confidence: 0.95,
            baseline: None,
        }
    }

    #[test]
    fn the_verdict_rests_on_the_shielded_phase_alone() {
        // Maxima: idle 2 µs, unshielded 8 µs, shielded 4 µs (3 samples each).
        let r = judge(&options("max<=5us"), full_results(Some(false), false));
        assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.verdict);
        assert_eq!(r.verdict.terms[0].cpus[0].cpu, 2);
        assert_eq!(r.verdict.terms[0].cpus[0].samples, 3);
        let r = judge(&options("max<=3us"), full_results(Some(false), false));
        assert_eq!(r.outcome, Outcome::Fail);
        // None of three over 5 µs cannot show a 1 % tail is met; one of
        // three over 3 µs shows it is not, even at 95 %.
        let r = judge(&options("p99<=5us"), full_results(Some(false), false));
        assert_eq!(r.outcome, Outcome::Inconclusive);
        let r = judge(&options("p99<=3us"), full_results(Some(false), false));
        assert_eq!(r.outcome, Outcome::Fail);
    }

    #[test]
    fn an_interrupted_run_is_never_a_pass_but_can_fail() {
        let mut m = full_results(Some(false), false);
        m.interrupted = true;
        assert_eq!(
            judge(&options("max<=5us"), m.clone()).outcome,
            Outcome::Inconclusive
        );
        assert_eq!(
            judge(&options("max<=3us"), m.clone()).outcome,
            Outcome::Fail
        );
        // No shielded phase at all: nothing to judge.
        m.phases.retain(|p| p.phase != Phase::Shielded.name());
        let r = judge(&options("max<=5us"), m);
        assert!(r.interrupted && r.outcome == Outcome::Inconclusive);
    }

    #[test]
    fn breaks_are_kept_by_time_and_a_load_gone_is_never_a_pass() {
        let look = |at_s: f64, holds: bool, load: usize, boosts: u64| Watch {
            at_s,
            holds: Some(holds),
            broken: if holds {
                vec![]
            } else {
                vec!["intruder: pid 7 on CPU 2".into()]
            },
            guard_boosts: Some(boosts),
            load_processes: Some(load),
            error: None,
        };
        let with = |looks: Vec<Watch>| {
            let mut m = full_results(Some(false), false);
            for p in m
                .phases
                .iter_mut()
                .filter(|p| p.phase == Phase::Shielded.name())
            {
                p.watch = looks.clone();
            }
            judge(&options("max<=5us"), m)
        };
        let r = with(vec![
            look(60.0, true, 4, 3),
            look(120.0, false, 4, 5),
            look(180.0, true, 4, 12),
        ]);
        assert_eq!(
            r.outcome,
            Outcome::Pass,
            "a broken shield is reported, not judged"
        );
        assert_eq!(r.breaks.len(), 1);
        assert_eq!(r.breaks[0].at_s, 120.0);
        assert_eq!(r.guard_boosts, Some(9));
        let r = with(vec![look(60.0, true, 4, 0), look(120.0, true, 0, 0)]);
        assert_eq!(r.outcome, Outcome::Inconclusive);
        assert_eq!(r.breaks[0].load_processes, Some(0));
        assert_eq!(with(vec![look(60.0, true, 4, 2)]).guard_boosts, None);
    }

    #[test]
    fn a_regression_against_the_baseline_fails_the_budget() {
        let before = judge(&options("max<=5us"), full_results(Some(false), false));
        assert_eq!(before.outcome, Outcome::Pass);
        let mut opts = options("max<=5us");
        let mut earlier = before.verdict.clone();
        earlier.terms[0].cpus[0].max_ns = 2_000;
        opts.baseline = Some(baseline::Baseline {
            dir: "earlier".into(),
            verdict: earlier,
            max_growth: 0.2,
        });
        let now = judge(&opts, full_results(Some(false), false));
        assert_eq!(now.outcome, Outcome::Fail, "4 µs now against 2 µs then");
        let a = now.baseline.unwrap();
        assert!(a.changes[0].regression && a.changes[0].why.contains("from 2.0 µs to 4.0 µs"));
        assert_eq!(
            now.verdict.terms[0].outcome,
            Outcome::Pass,
            "the term itself holds"
        );
    }

    #[test]
    fn junit_has_a_case_per_term_and_cpu_with_failures_and_skips() {
        let r = judge(
            &options("max<=3us,p99<=10us,max<=5us"),
            full_results(Some(false), false),
        );
        let xml = junit(&r);
        assert!(
            xml.contains("tests=\"3\" failures=\"1\" skipped=\"1\""),
            "{xml}"
        );
        assert!(
            xml.contains(
                "name=\"max&lt;=3us on CPU 2\"><failure message=\"the largest of 3 samples"
            ),
            "{xml}"
        );
        assert!(
            xml.contains("name=\"max&lt;=5us on CPU 2\"></testcase>"),
            "{xml}"
        );
    }
}
