//! Checks a report directory of `cpushield compare` for the test scenarios
//! (the guests have no JSON tool): `check_compare_dir DIR` prints
//! tab-separated `machine`, `phase` and `ratio` lines for scripts and exits
//! 1 naming every problem. A test tool, not part of the shipped binary;
//! tests/compare_fixture.rs uses the same code as a module.
//!
//! It reads `results.json` as plain JSON on purpose, by its field names,
//! not through cpushield's own types: a second reader, which notices a
//! field that changed on both the writing and the reading side.

use std::path::Path;
use std::process::ExitCode;

use cpushield::compare::summary::{Ratio, SummaryTable};
use serde_json::Value;

#[allow(dead_code)] // only the binary calls it; the tests use check_dir
fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1) else {
        eprintln!("usage: check_compare_dir DIR");
        return ExitCode::from(2);
    };
    let dir = Path::new(&dir);
    let c = check_dir(dir);
    for l in &c.lines {
        println!("{l}");
    }
    for p in &c.problems {
        println!("problem\t{p}");
    }
    if c.problems.is_empty() {
        return ExitCode::SUCCESS;
    }
    eprintln!(
        "check_compare_dir {}: {} problem(s): {}",
        dir.display(),
        c.problems.len(),
        c.problems.join("; ")
    );
    ExitCode::FAILURE
}

/// What the check found in a report directory written by
/// `cpushield compare`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DirCheck {
    /// Everything wrong with the directory; empty when it is well-formed.
    pub problems: Vec<String>,
    /// Tab-separated lines for scripts: `phase`, `ratio` and `machine`
    /// records (see `check_dir`).
    pub lines: Vec<String>,
}

/// The PNG signature.
const PNG_MAGIC: &[u8] = b"\x89PNG\r\n\x1a\n";

/// A ratio for scripts: `2.500`, `inf`, `n/a`.
fn ratio_field(r: &Ratio) -> String {
    match r {
        Ratio::Value(v) => format!("{v:.3}"),
        Ratio::Infinite => "inf".into(),
        Ratio::Undefined => "n/a".into(),
    }
}

/// Checks a report directory: every file of `cpushield::report::compare::FILES` present with the
/// right header (PNG signature, `<svg`…`</svg>`, an offline HTML page),
/// results.json parses with this `cpushield::compare::results::SCHEMA_VERSION`, its phases have
/// samples, the load of each phase was stopped with no process left, the
/// shield of the shielded phase was undone, and a virtualised machine
/// carries the virtualisation note in results.json and summary.txt.
///
/// The lines have tab-separated fields (shown here with `|`):
/// `machine|KERNEL|virtualised, bare metal or unknown|PREEMPTION`, one
/// `phase|NAME|SAMPLES|MAX_US|P999_US|OVER...` and
/// `interference|NAME|DEVICE/S|TIMER/S|IPI/S|OTHER/S|SOFTIRQ/S|THREADS|RUNS/S` per phase,
/// `threads|NAME|COMM:RUNS,...` (the busiest other threads on each measured CPU) per phase, and one
/// `ratio|METRIC|UNSHIELDED/SHIELDED|SHIELDED/IDLE` per ratio row
/// (numbers, `inf` or `n/a`; ratios are recomputed from the table).
pub fn check_dir(dir: &Path) -> DirCheck {
    let mut c = DirCheck::default();
    let read = |f: &str| std::fs::read(dir.join(f));
    for f in cpushield::report::compare::FILES {
        match std::fs::metadata(dir.join(f)) {
            Ok(m) if m.len() > 0 => {}
            Ok(_) => c.problems.push(format!("{f} is empty")),
            Err(e) => c.problems.push(format!("{f}: {e}")),
        }
    }
    if let Ok(b) = read("histogram.png") {
        if !b.starts_with(PNG_MAGIC) || b.get(12..16) != Some(b"IHDR") {
            c.problems
                .push("histogram.png has no PNG signature and IHDR chunk".into());
        }
    }
    if let Ok(b) = read("histogram.svg") {
        let t = String::from_utf8_lossy(&b);
        let head = t.trim_start();
        if !(head.starts_with("<svg") || head.starts_with("<?xml")) || !t.contains("<svg") {
            c.problems
                .push("histogram.svg does not start an SVG document".into());
        }
        if !t.trim_end().ends_with("</svg>") {
            c.problems
                .push("histogram.svg does not end with </svg>".into());
        }
    }
    if let Ok(b) = read("report.html") {
        let t = String::from_utf8_lossy(&b);
        if !t
            .trim_start()
            .to_ascii_lowercase()
            .starts_with("<!doctype html")
        {
            c.problems
                .push("report.html does not start with <!DOCTYPE html>".into());
        }
        if !t.trim_end().ends_with("</html>") {
            c.problems
                .push("report.html does not end with </html>".into());
        }
        if !t.contains("<svg") {
            c.problems.push("report.html has no inline plot".into());
        }
        if t.contains("http://") || t.contains("https://") {
            c.problems
                .push("report.html refers to the network (it must read offline)".into());
        }
    }
    let json: Value = match read("results.json")
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(v) => v,
        Err(e) => {
            c.problems.push(format!("results.json: {e}"));
            return c;
        }
    };
    if json["schema_version"] != cpushield::compare::results::SCHEMA_VERSION {
        c.problems.push(format!(
            "results.json: schema_version {} (expected {})",
            json["schema_version"],
            cpushield::compare::results::SCHEMA_VERSION
        ));
    }
    if json["interrupted"] != false {
        c.problems
            .push("results.json: the run was interrupted (or says nothing about it)".into());
    }
    let m = &json["machine"];
    let virt = match m["virtualised"].as_bool() {
        Some(true) => "virtualised",
        Some(false) => "bare metal",
        None => "unknown",
    };
    let text = |v: &Value| v.as_str().unwrap_or("unknown").to_string();
    c.lines.push(format!(
        "machine\t{}\t{virt}\t{}",
        text(&m["kernel_release"]),
        text(&m["preemption"]["model"])
    ));
    if virt == "virtualised" {
        let summary = read("summary.txt").unwrap_or_default();
        let summary = String::from_utf8_lossy(&summary);
        if json["virtualised_note"].as_str().is_none()
            || !summary.contains(cpushield::compare::results::VIRTUALISED_NOTE)
        {
            c.problems.push(
                "the machine is virtualised but the report does not say so (virtualised_note, summary.txt)"
                    .into(),
            );
        }
    }
    let empty = Vec::new();
    let phases = json["phases"].as_array().unwrap_or(&empty);
    let names: Vec<&str> = phases.iter().filter_map(|p| p["phase"].as_str()).collect();
    let wanted: Vec<&str> = json["options"]["phases"]
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .filter_map(|p| p.as_str())
        .collect();
    if names.is_empty() || names != wanted {
        c.problems.push(format!(
            "results.json: phases {names:?}, but the run asked for {wanted:?}"
        ));
    }
    for p in phases {
        let name = p["phase"].as_str().unwrap_or("?");
        if p["stats"]["samples"].as_u64().unwrap_or(0) == 0 {
            c.problems.push(format!("phase {name}: no samples"));
        }
        if !p["load"].is_null() {
            match p["load_stop"]["zombies_left"].as_array() {
                Some(z) if z.is_empty() => {}
                Some(z) => c
                    .problems
                    .push(format!("phase {name}: load processes left: {z:?}")),
                None => c
                    .problems
                    .push(format!("phase {name}: the load has no stop record")),
            }
        }
        let ran: Vec<String> = p["per_cpu"]
            .as_array()
            .unwrap_or(&empty)
            .iter()
            .flat_map(|cpu| cpu["threads_ran"]["busiest"].as_array().unwrap_or(&empty))
            .filter_map(|t| Some(format!("{}:{}", t["name"].as_str()?, t["switches"])))
            .collect();
        c.lines.push(format!("threads\t{name}\t{}", ran.join(",")));
        if name == "shielded" && (p["shield"].is_null() || p["unshield"].is_null()) {
            c.problems
                .push("phase shielded: no record of the shield applied and undone".into());
        }
    }
    let table: SummaryTable = match serde_json::from_value(json["summary"].clone()) {
        Ok(t) => t,
        Err(e) => {
            c.problems.push(format!("results.json: summary: {e}"));
            return c;
        }
    };
    if table.rows.len() != phases.len() {
        c.problems.push(format!(
            "results.json: {} table rows for {} phases",
            table.rows.len(),
            phases.len()
        ));
    }
    for r in &table.rows {
        let mut line = format!(
            "phase\t{}\t{}\t{}\t{}",
            r.phase,
            r.samples,
            cpushield::report::table::format_us(r.max_us, table.decimals()),
            cpushield::report::table::format_us(r.p999_us, table.decimals())
        );
        for o in &r.over {
            line.push_str(&format!("\t{o}"));
        }
        c.lines.push(line);
        match &r.interference {
            Some(i) => c.lines.push(format!(
                "interference\t{}\t{:.1}\t{:.1}\t{:.1}\t{:.1}\t{:.1}\t{}\t{}",
                r.phase,
                i.device_per_s,
                i.timer_per_s,
                i.ipi_per_s,
                i.other_per_s,
                i.softirq_per_s,
                i.threads.map_or("-".into(), |n| n.to_string()),
                i.thread_runs_per_s
                    .map_or("-".into(), |r| format!("{r:.1}"))
            )),
            None => c
                .problems
                .push(format!("phase {}: no interference counts", r.phase)),
        }
    }
    for r in table.ratios() {
        c.lines.push(format!(
            "ratio\t{}\t{}\t{}\t{}",
            r.metric,
            ratio_field(&r.unshielded_over_shielded),
            ratio_field(&r.shielded_over_idle),
            ratio_field(&r.affinity_over_shielded)
        ));
    }
    c
}
