//! `certify`: whether this machine, set up as it is, meets a latency
//! budget, and how sure that is. The budget's terms ([`budget`]), the
//! statistics ([`stats`]) and the verdict from the measured histograms
//! ([`verdict`]) are pure; the measuring is `compare`'s shielded phase
//! (its own shield, load on the housekeeping CPUs, undone at the end and
//! on Ctrl-C), and its files are written beside the verdict.

pub mod baseline;
pub mod budget;
pub mod count;
pub mod evt;
pub mod preflight;
pub mod source;
pub mod stats;
pub mod tail;
pub mod verdict;

use serde::Serialize;

use crate::compare::results::Results;
use crate::compare::watch::Watch;
use crate::compare::{self, CompareError, Context, Phase};
use crate::cpulist::CpuSet;
use crate::measure::results::Measurement;
use crate::measure::ProbeKind;
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
    /// Judge this recorded file instead of measuring (`--from`).
    pub from: Option<std::path::PathBuf>,
    /// What a `max` term must show beyond the run (`--target`).
    pub target: Option<budget::Target>,
    /// Whether the run can decide each term, said before it starts
    /// (empty: the probe keeps no fixed rate, or `--from`).
    pub feasibility: Vec<Feasibility>,
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
            timing: Default::default(),
        }
    }
}

/// What `certify` found; serialised as `certify.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Layout version of this document.
    pub schema_version: u32,
    /// The verdict on the whole budget and the run: the worse of the
    /// budget's and [`Report::run`]'s.
    pub outcome: Outcome,
    /// Ctrl-C or SIGTERM ended the run early: at most INCONCLUSIVE
    /// unless a term had already failed.
    pub interrupted: bool,
    /// The run itself as a test: what about it changes the outcome.
    pub run: RunVerdict,
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
    pub baseline: Option<Against>,
    /// What the audit found before the run, and what alone makes the
    /// budget unreachable (`None`: the audit could not be read).
    pub preflight: Option<preflight::Preflight>,
    /// The recorded file the verdict was computed from (`certify --from`),
    /// with what it could not say; `None` when this run measured.
    #[serde(default)]
    pub from: Option<RecordedFile>,
    /// What each CPU measured, as judged (histograms, per-second maxima,
    /// skipped deadlines): `certify --from` and a later baseline read it.
    pub tails: Vec<CpuTail>,
    /// The measurement as `compare` reports it (its `results.json`);
    /// `None` for a verdict from a recorded file.
    pub measurement: Option<Results>,
}

/// The recorded file a verdict was computed from.
#[derive(Debug, Clone, Serialize)]
pub struct RecordedFile {
    /// The file.
    pub file: std::path::PathBuf,
    /// What kind it was.
    pub kind: &'static str,
    /// What it could not say.
    pub notes: Vec<String>,
}

/// The run as a test of its own: interrupted, the load stopped, the
/// shield broken, a regression against the baseline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunVerdict {
    /// PASS when nothing about the run limits the verdict.
    pub outcome: Outcome,
    /// What limits it, a line each.
    pub reasons: Vec<String>,
}

/// The comparison with a baseline.
#[derive(Debug, Clone, Serialize)]
pub struct Against {
    /// The baseline's directory.
    pub dir: std::path::PathBuf,
    /// How much a maximum may grow before it is said.
    pub max_growth: f64,
    /// The false-alarm rate of all its tests together.
    pub false_alarm: f64,
    /// Each test on each CPU.
    pub changes: Vec<baseline::Change>,
}

/// Whether a run can decide one term, said before it starts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Feasibility {
    /// The term, as written.
    pub term: String,
    /// Deadlines the run will take on each CPU (its duration at the
    /// probe's rate).
    pub deadlines: u64,
    /// Deadlines the term needs with none late, at the confidence asked
    /// (a percentile), or the seconds a max term's tail needs.
    pub needed: u64,
    /// Whether the run can decide it.
    pub decidable: bool,
    /// In words.
    pub line: String,
}

/// For each term, whether a run of `seconds` at `per_second` deadlines a
/// second can decide it at `confidence`: a percentile needs
/// [`stats::samples_needed`] deadlines with none late (fewer can only
/// FAIL or be INCONCLUSIVE), a max term [`evt::MIN_BLOCKS`] seconds of
/// maxima and a confidence the bootstrap can bound.
pub fn feasibility(
    budget: &[Term],
    seconds: f64,
    per_second: f64,
    confidence: f64,
) -> Vec<Feasibility> {
    let deadlines = (seconds * per_second) as u64;
    let pct = confidence * 100.0;
    budget
        .iter()
        .map(|t| {
            let (needed, decidable, line) = match t.statistic {
                budget::Statistic::Percentile { .. } => {
                    let needed = stats::samples_needed(t.allowed(), confidence);
                    let secs = needed as f64 / per_second;
                    (
                        needed,
                        deadlines >= needed,
                        format!(
                            "{}: {deadlines} deadlines; {needed} with none late decide it at {pct:.4} % ({})",
                            t.text,
                            span(secs)
                        ),
                    )
                }
                budget::Statistic::Max => {
                    let needed = evt::MIN_BLOCKS as u64;
                    let ok = seconds >= needed as f64 && evt::resamples(confidence).is_some();
                    let why = if evt::resamples(confidence).is_none() {
                        format!(
                            "; the tail's bootstrap cannot bound at {pct:.4} % (at most {:.2} %)",
                            evt::max_confidence() * 100.0
                        )
                    } else {
                        String::new()
                    };
                    (
                        needed,
                        ok,
                        format!(
                            "{}: {seconds:.0} s of maxima; at least {needed} s for the tail's fit{why}; PASS then needs the fit to hold",
                            t.text
                        ),
                    )
                }
            };
            Feasibility {
                term: t.text.clone(),
                deadlines,
                needed,
                decidable,
                line,
            }
        })
        .collect()
}

/// A length of time for people: `45 s`, `12 min`, `3.4 h`, `2.1 d`.
fn span(seconds: f64) -> String {
    match seconds {
        s if s < 120.0 => format!("{s:.0} s at this rate"),
        s if s < 7200.0 => format!("{:.0} min at this rate", s / 60.0),
        s if s < 172_800.0 => format!("{:.1} h at this rate", s / 3600.0),
        s => format!("{:.1} d at this rate", s / 86_400.0),
    }
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
    let looks: Vec<Watch> = compare::results::shielded(&measurement.phases)
        .map(|p| p.watch.clone())
        .unwrap_or_default();
    let mut report = judge_recorded(opts, tails, measurement.interrupted, looks);
    report.measurement = Some(measurement);
    report
}

/// The verdict of `opts`'s budget on recorded data (`certify --from`),
/// on the CPUs of `opts.compare.cpus` when it names any: measures nothing
/// and changes nothing.
pub fn judge_file(opts: &Options, file: &std::path::Path) -> Result<Report, String> {
    let mut rec = source::read(file)?;
    let wanted = &opts.compare.cpus;
    if !wanted.is_empty() {
        rec.tails.retain(|t| wanted.contains(t.cpu));
    }
    if rec.tails.is_empty() {
        return Err(format!(
            "{}: no CPU with samples in this {}",
            file.display(),
            rec.kind
        ));
    }
    let mut report = judge_recorded(opts, rec.tails, rec.interrupted, rec.looks);
    report.from = Some(RecordedFile {
        file: file.to_path_buf(),
        kind: rec.kind,
        notes: rec.notes,
    });
    Ok(report)
}

/// The verdict on `tails`, the run's own limits (`interrupted`, what the
/// `looks` found) and the baseline folded in.
pub fn judge_recorded(
    opts: &Options,
    tails: Vec<CpuTail>,
    interrupted: bool,
    looks: Vec<Watch>,
) -> Report {
    let verdict = verdict::judge(&opts.budget, &tails, opts.confidence, opts.target.as_ref());
    let interrupted = interrupted || tails.is_empty();
    let mut run = RunVerdict {
        outcome: Outcome::Pass,
        reasons: Vec::new(),
    };
    let mut limit = |o: Outcome, why: String| {
        run.outcome = run.outcome.max(o);
        run.reasons.push(why);
    };
    if tails.is_empty() {
        limit(Outcome::Inconclusive, "nothing was measured".into());
    } else if interrupted {
        limit(
            Outcome::Inconclusive,
            "the run was cut short: what a whole run would show is not known".into(),
        );
    }
    if let Some(w) = looks.iter().find(|w| w.load_processes == Some(0)) {
        limit(
            Outcome::Inconclusive,
            format!(
                "the load had stopped at {:.0} s: not measured under load",
                w.at_s
            ),
        );
    }
    let against = opts.baseline.as_ref().map(|b| Against {
        dir: b.dir.clone(),
        max_growth: b.max_growth,
        false_alarm: baseline::FALSE_ALARM,
        changes: baseline::compare(b, &verdict, &tails),
    });
    for c in against
        .iter()
        .flat_map(|a| &a.changes)
        .filter(|c| c.regression)
    {
        limit(
            Outcome::Fail,
            format!(
                "regression against the baseline: {} on CPU {}: {}",
                c.term, c.cpu, c.why
            ),
        );
    }
    // The run's limits lower a PASS; they never hide a FAIL.
    let outcome = match (verdict.outcome, run.outcome) {
        (Outcome::Fail, _) | (_, Outcome::Fail) => Outcome::Fail,
        (Outcome::Pass, Outcome::Pass) => Outcome::Pass,
        _ => Outcome::Inconclusive,
    };
    let boosts: Vec<u64> = looks.iter().filter_map(|w| w.guard_boosts).collect();
    let guard_boosts = match (boosts.first(), boosts.last()) {
        (Some(a), Some(b)) if boosts.len() > 1 => Some(b.saturating_sub(*a)),
        _ => None,
    };
    Report {
        schema_version: SCHEMA_VERSION,
        outcome,
        interrupted,
        run,
        verdict,
        breaks: looks.into_iter().filter(Watch::is_break).collect(),
        guard_boosts,
        baseline: against,
        preflight: None,
        from: None,
        tails,
        measurement: None,
    }
}

/// Each CPU's histogram of the shielded phase, as the verdict reads it
/// (empty without that phase).
pub fn shielded_tails(measurement: &Results) -> Vec<CpuTail> {
    compare::results::shielded(&measurement.phases)
        .map(|p| tails(&p.measurement))
        .unwrap_or_default()
}

/// The RTC probe's period (2048 Hz), ns.
const RTC_PERIOD_NS: u64 = 1_000_000_000 / 2048;

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
            missed: c.missed_periods,
            interval_ns: probe.interval_ns.or(match probe.probe {
                ProbeKind::Rtc => Some(RTC_PERIOD_NS),
                _ => None,
            }),
            skipped: match probe.probe {
                ProbeKind::Timer => count::Skipped::AfterLateSample,
                _ => count::Skipped::AtLeastOnePeriod,
            },
        })
        .collect()
}

/// The verdict as JUnit XML: one test case per term and CPU, and one for
/// the run itself (interrupted, load stopped, regression); a failure for
/// FAIL, skipped for INCONCLUSIVE, so a CI system gates on the same
/// outcome as the exit code.
pub fn junit(report: &Report) -> String {
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    };
    let case = |name: &str, outcome: Outcome, why: &str| {
        let body = match outcome {
            Outcome::Pass => String::new(),
            Outcome::Fail => format!("<failure message=\"{}\"/>", esc(why)),
            Outcome::Inconclusive => format!("<skipped message=\"{}\"/>", esc(why)),
        };
        format!(
            "    <testcase classname=\"cpushield.certify\" name=\"{}\">{body}</testcase>\n",
            esc(name)
        )
    };
    let mut outcomes: Vec<Outcome> = Vec::new();
    let mut cases: Vec<String> = Vec::new();
    for t in &report.verdict.terms {
        for c in &t.cpus {
            outcomes.push(c.outcome);
            cases.push(case(
                &format!("{} on CPU {}", t.term.text, c.cpu),
                c.outcome,
                &c.why,
            ));
        }
    }
    outcomes.push(report.run.outcome);
    cases.push(case(
        "the run (complete, under load, no regression)",
        report.run.outcome,
        &report.run.reasons.join("; "),
    ));
    let count = |o: Outcome| outcomes.iter().filter(|&&x| x == o).count();
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
            from: None,
            target: None,
            feasibility: Vec::new(),
        }
    }

    #[test]
    fn the_verdict_rests_on_the_shielded_phase_alone() {
        // Maxima: idle 2 µs, unshielded 8 µs, shielded 4 µs (3 samples each).
        let r = judge(&options("p10<=5us"), full_results(Some(false), false));
        assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.verdict);
        // Three samples say nothing of what a repeat would reach.
        let r = judge(&options("max<=5us"), full_results(Some(false), false));
        assert_eq!(r.outcome, Outcome::Inconclusive, "{:?}", r.verdict);
        assert!(r.verdict.terms[0].cpus[0]
            .why
            .contains("nothing extrapolated"));
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
        let r = judge(&options("p10<=5us"), m.clone());
        assert_eq!(r.verdict.outcome, Outcome::Pass);
        assert_eq!(r.outcome, Outcome::Inconclusive);
        assert_eq!(r.run.outcome, Outcome::Inconclusive);
        assert!(junit(&r).contains("<skipped message=\"the run was cut short"));
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
            judge(&options("p10<=5us"), m)
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
        let before = judge(&options("p10<=3us"), full_results(Some(false), false));
        // Now one of 3 deadlines over 3 µs; then none of a million.
        let mut opts = options("p10<=3us");
        let mut earlier = before.verdict.clone();
        earlier.terms[0].cpus[0].exceedances = (0, 0);
        earlier.terms[0].cpus[0].deadlines = 1_000_000;
        opts.baseline = Some(baseline::Baseline {
            dir: "earlier".into(),
            verdict: earlier,
            max_growth: 0.2,
            tails: Vec::new(),
        });
        let now = judge(&opts, full_results(Some(false), false));
        assert_eq!(now.outcome, Outcome::Fail);
        assert_eq!(now.run.outcome, Outcome::Fail);
        let a = now.baseline.clone().unwrap();
        assert!(a.changes[0].regression, "{:?}", a.changes[0]);
        assert!(
            a.changes[0].why.contains("0 in 1000000 then, 2 in 4 now"),
            "{}",
            a.changes[0].why
        );
        assert!(junit(&now).contains("<failure message=\"regression against the baseline"));
        // The same run as its own baseline: no regression.
        opts.baseline = Some(baseline::Baseline {
            dir: "same".into(),
            verdict: before.verdict.clone(),
            max_growth: 0.2,
            tails: before.tails.clone(),
        });
        let again = judge(&opts, full_results(Some(false), false));
        assert!(again
            .baseline
            .unwrap()
            .changes
            .iter()
            .all(|c| !c.regression));
    }

    #[test]
    fn junit_has_a_case_per_term_and_cpu_with_failures_and_skips() {
        let r = judge(
            &options("max<=3us,p99<=10us"),
            full_results(Some(false), false),
        );
        let xml = junit(&r);
        // max<=3us fails; p99<=10us cannot tell on 3 samples; the run
        // itself passes.
        assert!(
            xml.contains("tests=\"3\" failures=\"1\" skipped=\"1\""),
            "{xml}"
        );
        assert!(
            xml.contains("name=\"the run (complete, under load, no regression)\"></testcase>"),
            "{xml}"
        );
        assert!(
            xml.contains(
                "name=\"max&lt;=3us on CPU 2\"><failure message=\"the largest of 3 samples"
            ),
            "{xml}"
        );
        // A bound no sample exceeds cannot tell on 3 samples either.
        let xml = junit(&judge(
            &options("max<=5us"),
            full_results(Some(false), false),
        ));
        assert!(
            xml.contains("name=\"max&lt;=5us on CPU 2\"><skipped message=\"no sample of 3"),
            "{xml}"
        );
    }
}
