//! `certify` for people: the verdict table, one row per term and CPU, and
//! the files beside compare's.

use std::io::{Result, Write};
use std::path::Path;

use crate::certify::verdict::Outcome;
use crate::certify::{junit, Report};

fn word(o: Outcome) -> &'static str {
    match o {
        Outcome::Pass => "PASS",
        Outcome::Fail => "FAIL",
        Outcome::Inconclusive => "INCONCLUSIVE",
    }
}

/// The verdict, first, then each term on each CPU with why.
pub fn verdict(r: &Report, w: &mut dyn Write) -> Result<()> {
    let v = &r.verdict;
    writeln!(
        w,
        "certify: {} at {:.4}% confidence{}",
        word(v.outcome),
        v.confidence * 100.0,
        if r.interrupted {
            " (interrupted: the run was cut short)"
        } else {
            ""
        }
    )?;
    writeln!(
        w,
        "  {:<18} {:>4} {:<13} {:>12} {:>10} {:>11}  why",
        "term", "CPU", "verdict", "samples", "max µs", "over"
    )?;
    for t in &v.terms {
        for c in &t.cpus {
            let over = if c.exceedances.0 == c.exceedances.1 {
                c.exceedances.0.to_string()
            } else {
                format!("{}-{}", c.exceedances.0, c.exceedances.1)
            };
            writeln!(
                w,
                "  {:<18} {:>4} {:<13} {:>12} {:>10.1} {:>11}  {}",
                t.term.text,
                c.cpu,
                word(c.outcome),
                c.samples,
                c.max_ns as f64 / 1000.0,
                over,
                c.why
            )?;
        }
    }
    if let Some(note) = r.measurement.virtualised_note {
        writeln!(w, "  note: {note}")?;
    }
    Ok(())
}

/// Writes `certify.json` and `junit.xml` into `dir` (compare's files are
/// written by [`super::compare::write_files`]).
pub fn write_files(r: &Report, dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let json = serde_json::to_string_pretty(r).map_err(std::io::Error::other)?;
    std::fs::write(dir.join("certify.json"), json + "\n")?;
    std::fs::write(dir.join("junit.xml"), junit(r))?;
    Ok(())
}
