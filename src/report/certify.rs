//! `certify` for people: the verdict table, one row per term and CPU, and
//! the files beside compare's.

use std::io::Write;
use std::path::Path;

use std::fmt::Write as _;

use sha2::{Digest, Sha256};

use super::certify_plot::{maxima_series, maxima_svg, tail_svg};
use super::html::{escape_html, inline_svg, render_html, table_html_string, HtmlReport};
use super::ReportError;
use crate::certify::budget::Statistic;
use crate::certify::preflight::Preflight;
use crate::certify::verdict::{CpuVerdict, Outcome};
use crate::certify::{evt, junit, Report};

fn word(o: Outcome) -> &'static str {
    match o {
        Outcome::Pass => "PASS",
        Outcome::Fail => "FAIL",
        Outcome::Inconclusive => "INCONCLUSIVE",
    }
}

/// The verdict, first, then each term on each CPU with why.
pub fn verdict(r: &Report, w: &mut dyn Write) -> std::io::Result<()> {
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
    if let Some(line) = inside_line(r) {
        writeln!(w, "  {line}")?;
    }
    for line in from_lines(r) {
        writeln!(w, "  {line}")?;
    }
    for why in &r.run.reasons {
        writeln!(w, "  the run: {why}")?;
    }
    writeln!(
        w,
        "  {:<18} {:>4} {:<13} {:>12} {:>10} {:>11}  why",
        "term", "CPU", "verdict", "deadlines", "max µs", "late"
    )?;
    for t in &v.terms {
        for c in &t.cpus {
            writeln!(
                w,
                "  {:<18} {:>4} {:<13} {:>12} {:>10.1} {:>11}  {}",
                t.term.text,
                c.cpu,
                word(c.outcome),
                c.deadlines.max(c.samples),
                c.max_ns as f64 / 1000.0,
                over(c),
                c.why
            )?;
        }
    }
    for line in watch_lines(r).into_iter().chain(baseline_lines(r)) {
        writeln!(w, "  {line}")?;
    }
    if let Some(p) = &r.preflight {
        for line in preflight_lines(p) {
            writeln!(w, "  {line}")?;
        }
    }
    if let Some(m) = &r.measurement {
        if let Some(note) = m.virtualised_note {
            writeln!(w, "  note: {note}")?;
        }
        if let Some(note) = &m.balancer_note {
            writeln!(w, "  note: {note}")?;
        }
        for line in super::compare::put_back_lines(m) {
            writeln!(w, "  note: {line}")?;
        }
    }
    Ok(())
}

/// Where a verdict from a recorded file came from, and what the file
/// could not say.
fn from_lines(r: &Report) -> Vec<String> {
    let Some(f) = &r.from else {
        return Vec::new();
    };
    let mut lines = vec![format!(
        "computed from {} (a {}): nothing was measured or changed",
        f.file.display(),
        f.kind
    )];
    lines.extend(f.notes.iter().map(|n| format!("from the file: {n}")));
    lines
}

/// Samples over the bound: a count, or `low-high` where a histogram bucket
/// straddles the bound.
fn over(c: &CpuVerdict) -> String {
    let (low, high) = c.exceedances;
    if low == high {
        low.to_string()
    } else {
        format!("{low}-{high}")
    }
}

/// What was found before the run, a line each: what makes the budget
/// unreachable, then the audit's bad and warn findings with their next step.
pub fn preflight_lines(p: &Preflight) -> Vec<String> {
    let mut lines: Vec<String> = p
        .unreachable
        .iter()
        .map(|o| format!("unreachable: {} (next: {})", o.what, o.next))
        .collect();
    lines.extend(p.findings.iter().map(|f| {
        let next = if f.next.is_empty() {
            String::new()
        } else {
            format!(" (next: {})", f.next)
        };
        format!("audit {} {}: {}{next}", f.severity.name(), f.id, f.reason)
    }));
    lines
}

/// Against the baseline, a line per term and CPU.
fn baseline_lines(r: &Report) -> Vec<String> {
    let Some(a) = &r.baseline else {
        return Vec::new();
    };
    let us = |ns: u64| ns as f64 / 1000.0;
    a.changes
        .iter()
        .map(|c| {
            format!(
                "against {}: {} on CPU {}: max {:.1} → {:.1} µs: {}{}",
                a.dir.display(),
                c.term,
                c.cpu,
                us(c.max_ns.0),
                us(c.max_ns.1),
                if c.regression { "REGRESSION: " } else { "" },
                c.why
            )
        })
        .collect()
}

/// What the looks during the run found, a line each: every break with its
/// time, then the guard's boosts.
fn watch_lines(r: &Report) -> Vec<String> {
    let mut lines: Vec<String> = r
        .breaks
        .iter()
        .map(|b| {
            let what = match (&b.error, b.load_processes) {
                (Some(e), _) => format!("the shield could not be read: {e}"),
                (None, Some(0)) => "the load had stopped".to_string(),
                _ => format!("the shield did not hold: {}", b.broken.join("; ")),
            };
            format!("break at {:.0} s: {what}", b.at_s)
        })
        .collect();
    if let Some(n) = r.guard_boosts {
        lines.push(format!(
            "starvation guard: {n} boosts during the run (each an interruption of a real-time task on a shielded CPU)"
        ));
    }
    lines
}

/// The files whose SHA-256 the page lists (written before it).
const HASHED: [&str; 6] = [
    "certify.json",
    "junit.xml",
    "results.json",
    "summary.txt",
    "histogram.svg",
    "histogram.png",
];

/// Writes `certify.json` and `junit.xml` into `dir`, then `report.html`:
/// compare's page of the measurement (`page`, from
/// [`super::compare::write_data_files`], which wrote its files) led by the
/// verdict, its figures, and the SHA-256 of every result file.
pub fn write_files(r: &Report, page: HtmlReport, dir: &Path) -> Result<(), ReportError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ReportError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let json = serde_json::to_string_pretty(r).map_err(|e| ReportError::Io {
        path: dir.join("certify.json"),
        source: e.into(),
    })?;
    super::write_report_file(&dir.join("certify.json"), (json + "\n").as_bytes())?;
    super::write_report_file(&dir.join("junit.xml"), junit(r).as_bytes())?;
    let mut lead = verdict_html(r)?;
    lead.push_str("<h2>Result files (SHA-256)</h2>\n");
    let rows: Vec<Vec<String>> = HASHED
        .iter()
        .filter_map(|f| {
            let bytes = std::fs::read(dir.join(f)).ok()?;
            Some(vec![f.to_string(), format!("{:x}", Sha256::digest(&bytes))])
        })
        .collect();
    lead.push_str(&table_html_string(
        "kv",
        &["file".into(), "SHA-256".into()],
        &rows,
    ));
    let html = render_html(&HtmlReport {
        title: format!("cpushield certify: {} on {}", word(r.outcome), cpus_of(r)),
        lead_section: lead,
        ..page
    });
    super::write_report_file(&dir.join("report.html"), html.as_bytes())
}

/// The CPUs judged: `CPU 3`, `CPUs 2,3`.
fn cpus_of(r: &Report) -> String {
    let cpus: Vec<String> = r.tails.iter().map(|t| t.cpu.to_string()).collect();
    match cpus.len() {
        1 => format!("CPU {}", cpus[0]),
        _ => format!("CPUs {}", cpus.join(",")),
    }
}

/// Where the run measured when it did not make its own shield: inside
/// the one that was active, which it left standing.
fn inside_line(r: &Report) -> Option<String> {
    let shield = r.measurement.as_ref()?.options.existing_shield.as_ref()?;
    Some(format!(
        "measured inside the shield that was active on CPUs {shield} (it held when the run began; certify did not take it down)"
    ))
}

/// The verdict first: the outcome, each term on each CPU, the maxima over
/// time, and each max term's tail against its fit.
fn verdict_html(r: &Report) -> Result<String, ReportError> {
    let v = &r.verdict;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<h2>Verdict: {} at {:.4}% confidence</h2>",
        word(v.outcome),
        v.confidence * 100.0
    );
    let limits: Vec<String> = (r.run.reasons.iter().map(|w| format!("The run: {w}.")))
        .chain(from_lines(r))
        .collect();
    if !limits.is_empty() {
        out.push_str("<h3>What limits it</h3>\n");
        paragraphs(&mut out, &limits);
    }
    if let Some(line) = inside_line(r) {
        let _ = writeln!(out, "<p>{}.</p>", escape_html(&line));
    }
    let header: Vec<String> = [
        "term",
        "CPU",
        "verdict",
        "deadlines",
        "max µs",
        "late",
        "why",
    ]
    .map(String::from)
    .to_vec();
    let rows: Vec<Vec<String>> = v
        .terms
        .iter()
        .flat_map(|t| {
            t.cpus.iter().map(|c| {
                vec![
                    t.term.text.clone(),
                    c.cpu.to_string(),
                    word(c.outcome).into(),
                    c.deadlines.max(c.samples).to_string(),
                    format!("{:.1}", c.max_ns as f64 / 1000.0),
                    over(c),
                    c.why.clone(),
                ]
            })
        })
        .collect();
    out.push_str(&table_html_string("verdict", &header, &rows));
    let watched = watch_lines(r);
    out.push_str("<h3>What broke during the run</h3>\n");
    let looks: usize = (r.measurement.iter())
        .flat_map(|m| &m.phases)
        .map(|p| p.watch.len())
        .sum();
    if watched.is_empty() && looks == 0 {
        out.push_str("<p>No looks at the shield or the load were recorded.</p>\n");
    } else if watched.is_empty() {
        let _ = writeln!(
            out,
            "<p>Nothing in {looks} looks (one every {:.0} s): the shield held and the load ran each time.</p>",
            crate::certify::WATCH_EVERY_S
        );
    }
    paragraphs(&mut out, &watched);
    let against = baseline_lines(r);
    if !against.is_empty() {
        out.push_str("<h3>Against the baseline</h3>\n");
        paragraphs(&mut out, &against);
    }
    out.push_str(&figures_html(r)?);
    if let Some(p) = &r.preflight {
        let lines = preflight_lines(p);
        let _ = writeln!(
            out,
            "<details><summary>Before the run: the audit ({} findings)</summary>",
            lines.len()
        );
        if lines.is_empty() {
            out.push_str("<p>The audit of the CPUs found nothing to fix.</p>\n");
        }
        paragraphs(&mut out, &lines);
        out.push_str("</details>\n");
    }
    Ok(out)
}

/// Each of `lines` as a paragraph, escaped.
fn paragraphs(out: &mut String, lines: &[String]) {
    for line in lines {
        let _ = writeln!(out, "<p>{}</p>", escape_html(line));
    }
}

/// The maxima per minute and each max term's tail, as inlined SVG.
fn figures_html(r: &Report) -> Result<String, ReportError> {
    let v = &r.verdict;
    let mut out = String::new();
    let tails = &r.tails;
    let mut unit = "minute";
    let series: Vec<(u32, Vec<f64>)> = tails
        .iter()
        .filter(|t| !t.per_second_max_ns.is_empty())
        .map(|t| {
            let (values, per) = maxima_series(&t.per_second_max_ns);
            unit = per;
            (t.cpu, values)
        })
        .collect();
    let max_bounds: Vec<f64> = v
        .terms
        .iter()
        .filter(|t| t.term.statistic == Statistic::Max)
        .map(|t| t.term.bound_ns as f64 / 1000.0)
        .collect();
    if !series.is_empty() {
        let _ = writeln!(out, "<h2>Maximum per {unit}</h2>\n<figure>");
        out.push_str(&inline_svg(&maxima_svg(&series, &max_bounds, unit)?));
        out.push_str("\n</figure>\n");
    }
    for t in v
        .terms
        .iter()
        .filter(|t| t.term.statistic == Statistic::Max)
    {
        for c in &t.cpus {
            let (Some(est), Some(tail)) = (&c.tail, tails.iter().find(|x| x.cpu == c.cpu)) else {
                continue;
            };
            let Some(fit) = est.fit else { continue };
            let (_, maxima) = evt::blocks(&tail.per_second_max_ns);
            let _ = writeln!(
                out,
                "<h3>{} on CPU {}: the tail</h3>\n<figure>",
                escape_html(&t.term.text),
                c.cpu
            );
            out.push_str(&inline_svg(&tail_svg(
                c.cpu,
                &maxima,
                (&fit, &est.band),
                t.term.bound_ns as f64,
            )?));
            let _ = writeln!(
                out,
                "</figure>\n<p>{}</p>",
                escape_html(&match &est.refused {
                    Some(why) => format!("Not extrapolated: {why}."),
                    None => format!(
                        "Extrapolated from {} blocks of {:.0} s; the checks held.",
                        est.blocks, est.block_s
                    ),
                })
            );
        }
    }
    Ok(out)
}
