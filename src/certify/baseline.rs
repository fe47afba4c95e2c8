//! Against a baseline: an earlier `certify`'s verdict, figure by figure,
//! and what counts as a regression (a FAIL of the budget).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::verdict::{CpuVerdict, Outcome, Verdict};

/// The earlier run to compare with, and how much worse is a regression.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Baseline {
    /// Its directory.
    pub dir: PathBuf,
    /// Its verdict, as its `certify.json` holds it.
    pub verdict: Verdict,
    /// How much larger a maximum may grow before it is a regression
    /// (0.2: by a fifth).
    pub max_growth: f64,
}

/// The largest `certify.json` read as a baseline: a day-long run's,
/// with its histograms and per-second maxima, is a few MiB.
pub const MAX_BYTES: u64 = 256 << 20;

/// The part of `certify.json` a baseline needs.
#[derive(Deserialize)]
struct Earlier {
    verdict: Verdict,
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
        Ok(Baseline {
            dir: dir.to_path_buf(),
            verdict: earlier.verdict,
            max_growth,
        })
    }
}

/// One term on one CPU, then and now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// The term, as written.
    pub term: String,
    /// The CPU.
    pub cpu: u32,
    /// The verdicts, then and now.
    pub outcome: (Outcome, Outcome),
    /// The largest sample, ns, then and now.
    pub max_ns: (u64, u64),
    /// The share of samples over the bound (the most the histogram
    /// allows), then and now.
    pub over: (f64, f64),
    /// Whether it regressed.
    pub regression: bool,
    /// Why, or that it did not.
    pub why: String,
}

/// Each term and CPU both runs judged, compared. A regression: a worse
/// verdict; a maximum grown by more than `max_growth`; or a probability
/// of exceeding the bound whose lower confidence bound now lies above
/// its upper one then (worse beyond what chance explains).
pub fn compare(base: &Baseline, now: &Verdict) -> Vec<Change> {
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
                out.push(change(&t.term.text, b, c, base.max_growth));
            }
        }
    }
    out
}

fn change(term: &str, then: &CpuVerdict, now: &CpuVerdict, max_growth: f64) -> Change {
    let share = |c: &CpuVerdict| c.exceedances.1 as f64 / c.samples.max(1) as f64;
    let us = |ns: u64| ns as f64 / 1000.0;
    let grown = now.max_ns as f64 > then.max_ns as f64 * (1.0 + max_growth);
    let worse_tail = now.exceed_probability.0 > then.exceed_probability.1;
    let why = if now.outcome > then.outcome {
        format!(
            "the verdict went from {:?} to {:?}",
            then.outcome, now.outcome
        )
    } else if grown {
        format!(
            "the largest sample grew from {:.1} µs to {:.1} µs, more than {:.0} %",
            us(then.max_ns),
            us(now.max_ns),
            max_growth * 100.0
        )
    } else if worse_tail {
        format!(
            "the probability of exceeding the bound is now at least {:.2e}, above the {:.2e} it was at most then",
            now.exceed_probability.0, then.exceed_probability.1
        )
    } else {
        String::new()
    };
    Change {
        term: term.into(),
        cpu: now.cpu,
        outcome: (then.outcome, now.outcome),
        max_ns: (then.max_ns, now.max_ns),
        over: (share(then), share(now)),
        regression: !why.is_empty(),
        why: if why.is_empty() {
            "no regression".into()
        } else {
            why
        },
    }
}

#[cfg(test)]
mod tests {
    use super::super::budget::parse;
    use super::super::verdict::{TermVerdict, Verdict};
    use super::*;

    fn cpu(outcome: Outcome, max_ns: u64, p: (f64, f64)) -> CpuVerdict {
        CpuVerdict {
            cpu: 2,
            outcome,
            samples: 1000,
            exceedances: (0, 0),
            max_ns,
            exceed_probability: p,
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
    fn a_worse_verdict_a_grown_maximum_or_a_worse_tail_regresses() {
        let base = Baseline {
            dir: "before".into(),
            verdict: verdict(cpu(Outcome::Pass, 40_000, (0.0, 0.003))),
            max_growth: 0.2,
        };
        let same = compare(&base, &verdict(cpu(Outcome::Pass, 47_000, (0.0, 0.003))));
        assert!(!same[0].regression, "{:?}", same[0]);
        let grown = compare(&base, &verdict(cpu(Outcome::Pass, 49_000, (0.0, 0.003))));
        assert!(grown[0].regression && grown[0].why.contains("from 40.0 µs to 49.0 µs"));
        let tail = compare(&base, &verdict(cpu(Outcome::Pass, 40_000, (0.004, 0.009))));
        assert!(
            tail[0].regression && tail[0].why.contains("at least 4.00e-3"),
            "{}",
            tail[0].why
        );
        let worse = compare(&base, &verdict(cpu(Outcome::Fail, 40_000, (0.0, 0.003))));
        assert!(
            worse[0].why.contains("from Pass to Fail"),
            "{}",
            worse[0].why
        );
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
        let v = verdict(cpu(Outcome::Pass, 40_000, (0.0, 0.003)));
        let json = serde_json::json!({ "schema_version": 1, "verdict": v });
        std::fs::write(dir.path().join("certify.json"), json.to_string()).unwrap();
        assert_eq!(Baseline::read(dir.path(), 0.2).unwrap().verdict, v);
    }
}
