//! `measure --explain`'s findings for people: the causes over all slow
//! samples, then the slowest samples' chains.

use std::fmt::Write;

use crate::compare::results::{CauseRow, PhaseCauses, Results};
use crate::measure::explain::{us, Explained};

use super::html::escape_html;
use super::table::align;

/// How many causes and chains a report shows.
const SHOWN: usize = 8;

/// The explanation of one probe's slow samples.
pub fn explained(out: &mut String, e: &Explained) {
    let _ = writeln!(
        out,
        "  explained: {} of {} samples over {} ({} events traced, {} lost{})",
        e.explained,
        e.over_threshold,
        us(e.threshold_ns),
        e.events,
        e.lost_events,
        if e.not_queued > 0 {
            format!(", {} came too fast to queue", e.not_queued)
        } else {
            String::new()
        }
    );
    if let Some(c) = &e.cleaned {
        let _ = writeln!(out, "  note: {c}");
    }
    if !e.missing_events.is_empty() {
        let _ = writeln!(
            out,
            "  note: this kernel has no {} (not traced)",
            e.missing_events.join(", ")
        );
    }
    if e.causes.is_empty() {
        return;
    }
    let header: Vec<String> = ["cause", "main in", "in", "total", "max", ""]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let rows: Vec<Vec<String>> = e
        .causes
        .iter()
        .take(SHOWN)
        .map(|c| {
            vec![
                c.cause.clone(),
                c.main_in.to_string(),
                c.samples.to_string(),
                us(c.total_ns),
                us(c.max_ns),
                if c.path {
                    "(every wake-up's path)".into()
                } else {
                    String::new()
                },
            ]
        })
        .collect();
    for line in align(&header, &rows).lines() {
        let _ = writeln!(out, "  {}", line.trim_end());
    }
    if e.causes.len() > SHOWN {
        let _ = writeln!(out, "  ... {} more causes (--json)", e.causes.len() - SHOWN);
    }
    if let Some(s) = &e.irq_thread {
        let _ = writeln!(
            out,
            "  timer IRQ and thread (timerlat's split), {} samples: IRQ latency max {}, thread latency max {}; the IRQ itself late (over half the latency) in {}",
            s.samples,
            us(s.irq_max_ns),
            us(s.thread_max_ns),
            s.irq_late
        );
    }
    let _ = writeln!(out, "  slowest samples:");
    for c in e.worst.iter().take(SHOWN) {
        let _ = writeln!(out, "    {}", c.line());
    }
}

/// A phase's causes for the comparison: `(phase, causes)`.
pub type PhaseRows<'a> = Vec<(&'a str, &'a PhaseCauses)>;

/// The phases of a comparison that were explained.
pub fn phases_explained(r: &Results) -> PhaseRows<'_> {
    r.phases
        .iter()
        .filter_map(|p| p.measured.explain.as_ref().map(|e| (p.phase, e)))
        .collect()
}

/// Rows of the per-phase cause table: the causes that were the main piece
/// of a slow sample, or, when none was, the largest.
fn cause_rows(phases: &PhaseRows<'_>) -> (Vec<String>, Vec<Vec<String>>) {
    let header = ["phase", "cause", "main in", "in", "total", "max"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut rows = Vec::new();
    for (phase, e) in phases {
        let head = format!(
            "{phase} ({} of {} over {})",
            e.explained,
            e.over_threshold,
            us((e.threshold_us * 1000.0) as u64)
        );
        if e.causes.is_empty() {
            rows.push(vec![
                head.clone(),
                "none".into(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ]);
        }
        for (k, c) in e.causes.iter().take(PHASE_CAUSES).enumerate() {
            rows.push(vec![
                if k == 0 { head.clone() } else { String::new() },
                c.total.cause.clone(),
                c.total.main_in.to_string(),
                c.total.samples.to_string(),
                us(c.total.total_ns),
                us(c.total.max_ns),
            ]);
        }
    }
    (header, rows)
}

/// Causes shown per phase.
const PHASE_CAUSES: usize = 5;

/// What the shielded phase's slow samples still met, with why and the
/// next step.
fn left_by_shield<'a>(phases: &PhaseRows<'a>) -> Vec<&'a CauseRow> {
    phases
        .iter()
        .filter(|(p, _)| *p == "shielded")
        .flat_map(|(_, e)| e.causes.iter())
        .filter(|c| c.remedy.is_some())
        .collect()
}

/// The comparison's text section (empty without `--explain`).
pub fn phases_text(r: &Results) -> String {
    let phases = phases_explained(r);
    if phases.is_empty() {
        return String::new();
    }
    let mut s = String::from("\nWhat delayed the slow samples (compare --explain), by how often each was the largest part:\n");
    let (h, rows) = cause_rows(&phases);
    s.push_str(&align(&h, &rows));
    let left = left_by_shield(&phases);
    if !left.is_empty() {
        s.push_str("\nWhat the shield left, and why:\n");
        for c in left {
            let rem = c.remedy.as_ref().expect("filtered");
            let _ = writeln!(s, "  {}: {}. Next: {}", c.total.cause, rem.why, rem.next);
        }
    }
    for (phase, e) in &phases {
        if let Some(line) = &e.slowest {
            let _ = writeln!(s, "  slowest {phase}: {line}");
        }
    }
    s
}

/// Colours of the chart's causes, in order; the last is "other".
const PALETTE: [&str; 7] = [
    "#d62728", "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#7f7f7f",
];

/// The comparison's HTML section: one bar per phase, each cause's share
/// of the time its slow samples spent, then the tables (empty without
/// `--explain`). The chart
/// ([`causes_svg`]) and the tables, in the order the page shows them.
pub fn phases_html(r: &Results) -> String {
    let phases = phases_explained(r);
    if phases.is_empty() {
        return String::new();
    }
    let svg = causes_svg(&phases);
    let mut out = String::from("<h2>What delayed the slow samples</h2>\n<figure>\n");
    out.push_str(&svg);
    out.push_str("</figure>\n");
    let (h, rows) = cause_rows(&phases);
    out.push_str(&super::html::table_html_string("causes", &h, &rows));
    out.push_str(
        "<p>Each sample over the threshold is cut, from its timer's expiry to the thread \
         running again, into what held the CPU (trace events of the measured CPUs). \
         <em>main in</em>: samples where it was the largest part; <em>in</em>: samples it \
         was part of. Timer delivery, the timer interrupt, the switch and the return to \
         user are every wake-up's own path.</p>\n",
    );
    let left = left_by_shield(&phases);
    if !left.is_empty() {
        out.push_str("<h3>What the shield left, and why</h3>\n<ul>\n");
        for c in left {
            let rem = c.remedy.as_ref().expect("filtered");
            let _ = writeln!(
                out,
                "<li><strong>{}</strong> (largest part of {} samples): {}. Next: {}</li>",
                escape_html(&c.total.cause),
                c.total.main_in,
                escape_html(&rem.why),
                escape_html(&rem.next)
            );
        }
        out.push_str("</ul>\n");
    }
    out
}

/// The causes, largest over all phases first: each of the first has a
/// colour of its own, the rest share the palette's last.
fn named_causes(phases: &[(&str, &PhaseCauses)]) -> Vec<String> {
    let mut overall: Vec<(String, u64)> = Vec::new();
    for (_, e) in phases {
        for c in &e.causes {
            match overall.iter_mut().find(|(n, _)| *n == c.total.cause) {
                Some((_, t)) => *t += c.total.total_ns,
                None => overall.push((c.total.cause.clone(), c.total.total_ns)),
            }
        }
    }
    overall.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    (overall.into_iter())
        .take(PALETTE.len() - 1)
        .map(|(n, _)| n)
        .collect()
}

/// A bar per phase of the share of its slow samples' time each cause took,
/// with the legend below, as SVG.
fn causes_svg(phases: &[(&str, &PhaseCauses)]) -> String {
    let named = named_causes(phases);
    let colour = |cause: &str| {
        named
            .iter()
            .position(|n| *n == cause)
            .map_or(PALETTE[PALETTE.len() - 1], |i| PALETTE[i])
    };
    let (label_w, bar_w, row_h) = (150.0, 600.0, 34.0);
    let legend_rows = named.len().div_ceil(2) + 1;
    let height = 30.0 + row_h * phases.len() as f64 + 22.0 * legend_rows as f64;
    let mut svg = format!(
        "<svg width=\"{w}\" height=\"{height}\" viewBox=\"0 0 {w} {height}\" role=\"img\" \
         aria-label=\"share of the slow samples' time per cause and phase\" \
         font-family=\"sans-serif\" font-size=\"13\">\n",
        w = label_w + bar_w + 20.0
    );
    let _ = writeln!(
        svg,
        "<text x=\"{label_w}\" y=\"16\">share of the time of the samples over the threshold</text>"
    );
    for (i, (phase, e)) in phases.iter().enumerate() {
        let y = 26.0 + row_h * i as f64;
        let _ = writeln!(
            svg,
            "<text x=\"0\" y=\"{}\">{} ({})</text>",
            y + 17.0,
            escape_html(phase),
            e.over_threshold
        );
        let total: u64 = e.causes.iter().map(|c| c.total.total_ns).sum();
        let mut x = label_w;
        for c in &e.causes {
            if total == 0 {
                break;
            }
            let w = bar_w * c.total.total_ns as f64 / total as f64;
            let _ = writeln!(
                svg,
                "<rect x=\"{x:.1}\" y=\"{y}\" width=\"{w:.1}\" height=\"24\" fill=\"{}\"><title>{}: {} ({:.0}%)</title></rect>",
                colour(&c.total.cause),
                escape_html(&c.total.cause),
                us(c.total.total_ns),
                100.0 * c.total.total_ns as f64 / total as f64
            );
            x += w;
        }
        if total == 0 {
            let _ = writeln!(
                svg,
                "<text x=\"{label_w}\" y=\"{}\">no sample over the threshold</text>",
                y + 17.0
            );
        }
    }
    let ly = 34.0 + row_h * phases.len() as f64;
    for (k, n) in named
        .iter()
        .map(String::as_str)
        .chain(std::iter::once("other"))
        .enumerate()
    {
        let (lx, lyy) = (label_w + (k % 2) as f64 * 300.0, ly + 22.0 * (k / 2) as f64);
        let fill = if n == "other" {
            PALETTE[PALETTE.len() - 1]
        } else {
            colour(n)
        };
        let _ = writeln!(
            svg,
            "<rect x=\"{lx}\" y=\"{lyy}\" width=\"14\" height=\"14\" fill=\"{fill}\"/><text x=\"{}\" y=\"{}\">{}</text>",
            lx + 20.0,
            lyy + 12.0,
            escape_html(n)
        );
    }
    svg.push_str("</svg>\n");

    svg
}
