//! Recorded data a verdict can be computed from without measuring
//! (`certify --from FILE`): a `results.json` of `compare` or `certify`
//! (its shielded phase), a `certify.json`, the output of
//! `measure --json`, or a `checkpoint-shielded.json` a run left behind,
//! crashed or not; or a document of tails alone (`{"tails": [...]}`, the
//! form `certify.json` keeps them in, which another tool can write). Each
//! is read into the per-CPU tails the verdict judges (docs/measure-json.md
//! names the fields).

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::count::Skipped;
use super::verdict::CpuTail;
use crate::compare::watch::Watch;
use crate::measure::live::Checkpoint;
use crate::measure::results::Measurement;

/// The largest file read: a day-long run's results, with per-second
/// maxima for every CPU, are a few MiB.
pub const MAX_BYTES: u64 = 256 << 20;

/// What a recorded file holds for a verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    /// What kind of file it was, in words.
    pub kind: &'static str,
    /// Each measured CPU.
    pub tails: Vec<CpuTail>,
    /// The run was cut short (Ctrl-C, SIGTERM, or a checkpoint: the run
    /// went on past it or crashed).
    pub interrupted: bool,
    /// The looks at the machine while it measured (`certify`'s).
    pub looks: Vec<Watch>,
    /// What the file could not say, a line each.
    pub notes: Vec<String>,
}

/// Reads `path` (a regular file of at most [`MAX_BYTES`]); the error
/// names the file and what would be valid.
pub fn read(path: &Path) -> Result<Recorded, String> {
    let shown = path.display();
    let text = crate::input::read_file(path, MAX_BYTES).map_err(|e| format!("{shown}: {e}"))?;
    let value: Value =
        serde_json::from_str(&text).map_err(|e| format!("{shown}: not JSON ({e}); {VALID}"))?;
    of_json(&value).map_err(|e| format!("{shown}: {e}; {VALID}"))
}

const VALID: &str = "give a results.json of compare or certify, a certify.json, the output of measure --json, a checkpoint-shielded.json, or {\"tails\": [...]} (docs/measure-json.md)";

/// The tails of a parsed file, by what it holds.
pub fn of_json(v: &Value) -> Result<Recorded, String> {
    if v.get("checkpoint_version").is_some() {
        let cp = Checkpoint::deserialize(v).map_err(|e| format!("not a checkpoint ({e})"))?;
        return Ok(of_checkpoint(&cp));
    }
    if let Some(tails) = v
        .get("tails")
        .filter(|t| t.as_array().is_some_and(|a| !a.is_empty()))
    {
        let tails = Vec::<CpuTail>::deserialize(tails)
            .map_err(|e| format!("its tails do not read ({e})"))?;
        let looks =
            Vec::<Watch>::deserialize(v.get("breaks").unwrap_or(&Value::Null)).unwrap_or_default();
        return Ok(Recorded {
            kind: if v.get("verdict").is_some() {
                "certify.json"
            } else {
                "tails"
            },
            tails,
            interrupted: v["interrupted"].as_bool().unwrap_or(false),
            looks,
            notes: Vec::new(),
        });
    }
    if let (Some(_), Some(m)) = (v.get("verdict"), v.get("measurement")) {
        let mut r = of_json(m)?;
        r.kind = "certify.json";
        return Ok(r);
    }
    if v.get("phases").is_some() {
        let phase = shielded_phase(v).ok_or("a results.json without a shielded phase")?;
        let m = Measurement::deserialize(&phase["measurement"])
            .map_err(|e| format!("its shielded phase's measurement does not read ({e})"))?;
        let looks = Vec::<Watch>::deserialize(phase.get("watch").unwrap_or(&Value::Null))
            .unwrap_or_default();
        let interrupted = v["interrupted"].as_bool().unwrap_or(false) || m.interrupted;
        return Ok(Recorded {
            kind: "results.json",
            tails: super::tails(&m),
            interrupted,
            looks,
            notes: Vec::new(),
        });
    }
    if v.get("results").is_some() {
        let m = Measurement::deserialize(v).map_err(|e| format!("not measure's JSON ({e})"))?;
        return Ok(Recorded {
            kind: "measure --json",
            tails: super::tails(&m),
            interrupted: m.interrupted,
            looks: Vec::new(),
            notes: vec![
                "no looks at the shield or the load during the run: measure keeps none".into(),
            ],
        });
    }
    Err("not a file certify reads".into())
}

fn shielded_phase(v: &Value) -> Option<&Value> {
    v["phases"]
        .as_array()?
        .iter()
        .find(|p| p["phase"] == crate::compare::summary::SHIELDED)
}

/// The shielded phase's tails of a `results.json` (an older certify.json's
/// `measurement`), or none.
pub fn shielded_tails_of_json(v: &Value) -> Vec<CpuTail> {
    of_json(v).map(|r| r.tails).unwrap_or_default()
}

/// A checkpoint's tails. It keeps no count of skipped deadlines: the
/// timer probe's are rebuilt from the histogram (each sample `L` late
/// skipped `⌈L/I⌉ − 1`; the interval is not recorded, so 1 ms, the
/// default, is taken and said), other probes' are not known.
fn of_checkpoint(cp: &Checkpoint) -> Recorded {
    let timer = cp.probe == "timer";
    let mut notes = vec![format!(
        "a checkpoint taken {:.0} s into the run: what came after it is not judged",
        cp.elapsed_s
    )];
    let interval = cp.interval_ns.or(timer.then_some(DEFAULT_INTERVAL_NS));
    if timer && cp.interval_ns.is_none() {
        notes.push(
            "the checkpoint does not record the interval: 1 ms, the default, is taken".into(),
        );
    }
    if !timer {
        notes.push(format!(
            "the checkpoint does not record the {} probe's missed periods",
            cp.probe
        ));
    }
    let tails = cp
        .cpus
        .iter()
        .filter_map(|c| {
            let stats = c.stats.as_ref()?;
            let mut t = CpuTail {
                cpu: c.cpu,
                width_ns: cp.bucket_width_ns,
                buckets: cp.buckets.unwrap_or(c.histogram.len()),
                counts: c.histogram.clone(),
                overflows: stats.overflows,
                samples: stats.samples,
                max_ns: stats.max_ns.unwrap_or(0),
                per_second_max_ns: c.per_second_max_ns.clone(),
                elapsed_s: cp.elapsed_s,
                missed: c.missed_periods.unwrap_or(0),
                interval_ns: interval,
                skipped: if timer {
                    Skipped::AfterLateSample
                } else {
                    Skipped::AtLeastOnePeriod
                },
            };
            if timer && c.missed_periods.is_none() {
                t.missed = super::count::skipped_in_buckets(&t);
            }
            Some(t)
        })
        .collect();
    Recorded {
        kind: "checkpoint",
        tails,
        interrupted: true,
        looks: Vec::new(),
        notes,
    }
}

/// The timer probe's default interval, ns.
const DEFAULT_INTERVAL_NS: u64 = 1_000_000;
