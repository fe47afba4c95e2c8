//! The summary and ratio tables of an experiment as text
//! ([`crate::compare::summary`] holds the numbers), and the aligned-column
//! layout every table of cpushield uses. Pure, no I/O.

use crate::compare::summary::{threshold_label, SummaryTable};

/// How the over-threshold ratios are formed, printed under the ratio table.
pub const RATE_NOTE: &str = "over-threshold ratios compare rates (count / samples): a loaded phase loses the periods its late wake-ups overran";

/// Under the interference table: what its thread columns count.
pub const THREADS_NOTE: &str = "threads: other threads seen running on the measured CPUs (at least); their runs: their context switches";

/// A latency for the tables with `decimals` decimals, `–` when unknown.
pub fn format_us(v: Option<f64>, decimals: usize) -> String {
    match v {
        Some(v) => format!("{v:.decimals$}"),
        None => "–".to_string(),
    }
}

/// Header and cells of the phase table, as text.
pub fn phase_cells(table: &SummaryTable) -> (Vec<String>, Vec<Vec<String>>) {
    let mut header: Vec<String> = [
        "phase",
        "samples",
        "min µs",
        "avg µs",
        "max µs",
        "p99 µs",
        "p99.9 µs",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    header.extend(table.thresholds_us.iter().map(|&t| threshold_label(t)));
    let d = table.decimals();
    let rows = table
        .rows
        .iter()
        .map(|r| {
            let mut cells = vec![
                r.phase.clone(),
                r.samples.to_string(),
                format_us(r.min_us, d),
                format_us(r.avg_us, d),
                format_us(r.max_us, d),
                format_us(r.p99_us, d),
                format_us(r.p999_us, d),
            ];
            cells.extend(
                (0..table.thresholds_us.len())
                    .map(|k| r.over.get(k).map_or("–".into(), |c| c.to_string())),
            );
            cells
        })
        .collect();
    (header, rows)
}

/// Header and cells of the ratio table, as text.
pub fn ratio_cells(table: &SummaryTable) -> (Vec<String>, Vec<Vec<String>>) {
    let header = vec![
        "ratio".to_string(),
        "unshielded/shielded".to_string(),
        "affinity/shielded".to_string(),
        "shielded/idle".to_string(),
    ];
    let rows = table
        .ratios()
        .into_iter()
        .map(|r| {
            vec![
                r.metric,
                r.unshielded_over_shielded.to_string(),
                r.affinity_over_shielded.to_string(),
                r.shielded_over_idle.to_string(),
            ]
        })
        .collect();
    (header, rows)
}

/// Header and cells of the interference table (what reached the measured
/// CPUs, per second), or `None` when no phase knows it.
pub fn interference_cells(table: &SummaryTable) -> Option<(Vec<String>, Vec<Vec<String>>)> {
    if table.rows.iter().all(|r| r.interference.is_none()) {
        return None;
    }
    let header = [
        "on measured CPUs",
        "device/s",
        "timer/s",
        "IPI/s",
        "other/s",
        "softirq/s",
        "threads",
        "their runs/s",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let rate = |v: f64| format!("{v:.1}");
    let rows = table
        .rows
        .iter()
        .map(|r| match &r.interference {
            Some(i) => vec![
                r.phase.clone(),
                rate(i.device_per_s),
                rate(i.timer_per_s),
                rate(i.ipi_per_s),
                rate(i.other_per_s),
                rate(i.softirq_per_s),
                i.threads.map_or("–".into(), |n| n.to_string()),
                i.thread_runs_per_s.map_or("–".into(), rate),
            ],
            None => [r.phase.as_str(), "–", "–", "–", "–", "–", "–", "–"]
                .map(String::from)
                .to_vec(),
        })
        .collect();
    Some((header, rows))
}

/// Under the cache levels' table: what a level's figures are.
pub const LEVELS_NOTE: &str = "per level: one load of a random walk through a working set the size of that cache (L3: the CPU's share), timed after a warm pass and the idle gap if any; a slow load was evicted meanwhile";

/// Header and cells of the cache probe's table per level, or `None` for
/// other probes.
pub fn level_cells(table: &SummaryTable) -> Option<(Vec<String>, Vec<Vec<String>>)> {
    if table.levels.is_empty() {
        return None;
    }
    let header = [
        "phase",
        "level",
        "set",
        "loads",
        "p50 µs",
        "p99 µs",
        "p99.9 µs",
        "max µs",
    ]
    .map(String::from)
    .to_vec();
    let d = table.decimals();
    let rows = (table.levels.iter())
        .map(|l| {
            vec![
                l.phase.clone(),
                l.level.clone(),
                crate::measure::cache::human_bytes(l.bytes),
                l.samples.to_string(),
                format_us(l.p50_us, d),
                format_us(l.p99_us, d),
                format_us(l.p999_us, d),
                format_us(l.max_us, d),
            ]
        })
        .collect();
    Some((header, rows))
}

/// The tables for a terminal: aligned columns (first left, the rest
/// right), units in the headers.
pub fn render_text(table: &SummaryTable) -> String {
    let (h, r) = phase_cells(table);
    let mut out = align(&h, &r);
    out.push('\n');
    let (h, r) = ratio_cells(table);
    out.push_str(&align(&h, &r));
    out.push_str(RATE_NOTE);
    out.push('\n');
    if let Some((h, r)) = interference_cells(table) {
        out.push('\n');
        out.push_str(&align(&h, &r));
        out.push_str(THREADS_NOTE);
        out.push('\n');
    }
    if let Some((h, r)) = level_cells(table) {
        out.push('\n');
        out.push_str(&align(&h, &r));
        out.push_str(LEVELS_NOTE);
        out.push('\n');
    }
    out
}

/// One `key value` row of a report, the key in a column of 24.
pub(super) fn row(
    w: &mut dyn std::io::Write,
    key: &str,
    value: impl std::fmt::Display,
) -> std::io::Result<()> {
    writeln!(w, "  {key:<24} {value}")
}

/// Lays out a table: columns as wide as their widest cell (counted in
/// characters, so `µ` and `∞` count one), first column left-aligned, the
/// others right-aligned, two spaces between, a rule under the header.
pub fn align(header: &[String], rows: &[Vec<String>]) -> String {
    let cols = header.len();
    let width = |s: &str| s.chars().count();
    let mut widths: Vec<usize> = header.iter().map(|h| width(h)).collect();
    for row in rows {
        for (k, cell) in row.iter().enumerate().take(cols) {
            widths[k] = widths[k].max(width(cell));
        }
    }
    let line = |cells: &[String]| {
        let mut s = String::new();
        for (k, w) in widths.iter().enumerate() {
            let cell = cells.get(k).map(String::as_str).unwrap_or("");
            let pad = " ".repeat(w - width(cell).min(*w));
            if k > 0 {
                s.push_str("  ");
            }
            if k == 0 {
                s.push_str(cell);
                s.push_str(&pad);
            } else {
                s.push_str(&pad);
                s.push_str(cell);
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(header);
    let total: usize = widths.iter().sum::<usize>() + 2 * cols.saturating_sub(1);
    out.push_str(&"-".repeat(total));
    out.push('\n');
    for row in rows {
        out.push_str(&line(row));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::summary::tests::table;

    #[test]
    fn text_table_is_aligned() {
        let text = render_text(&table());
        let lines: Vec<&str> = text.lines().collect();
        let w = |s: &str| s.chars().count();
        // Phase table: header, rule, three rows, all ending at the same column.
        let phase: Vec<&str> = lines[..5].to_vec();
        assert!(phase[0].starts_with("phase"));
        assert!(phase[1].chars().all(|c| c == '-'));
        let end = w(phase[0]);
        for l in &phase {
            assert_eq!(w(l), end, "{l:?}\n{text}");
        }
        assert!(phase[3].starts_with("unshielded"));
        assert!(phase[0].ends_with("> 100 µs  > 1 ms"));
        assert!(phase[3].contains("1428.0"));
        // Numbers right-aligned: the max column ends at the same place.
        let col = |l: &str, s: &str| l.find(s).map(|b| w(&l[..b]) + w(s)).unwrap_or(usize::MAX);
        assert_eq!(col(phase[0], "max µs"), col(phase[2], "20.0"));
        // Ratio table follows after a blank line.
        assert_eq!(lines[5], "");
        assert!(lines[6].starts_with("ratio"));
        let rat: Vec<&str> = lines[6..lines.len() - 1].to_vec();
        assert_eq!(lines[lines.len() - 1], RATE_NOTE);
        let end = w(rat[0]);
        for l in &rat {
            assert_eq!(w(l), end, "{l:?}\n{text}");
        }
        assert!(text.contains('∞') && text.contains("n/a"));
    }

    #[test]
    fn interference_table_follows_when_known() {
        use crate::compare::summary::Interference;
        let mut t = table();
        assert!(interference_cells(&t).is_none());
        t.rows[1].interference = Some(Interference {
            device_per_s: 12.5,
            timer_per_s: 1000.0,
            threads: Some(17),
            thread_runs_per_s: Some(250.0),
            ..Interference::default()
        });
        let text = render_text(&t);
        let tail: Vec<&str> = text.lines().skip_while(|l| *l != RATE_NOTE).collect();
        assert_eq!(tail[1], "");
        assert!(tail[2].starts_with("on measured CPUs") && tail[2].ends_with("their runs/s"));
        assert!(tail.iter().any(|l| l.starts_with("unshielded")
            && l.contains("12.5")
            && l.contains("1000.0")
            && l.ends_with("17         250.0")));
        assert!(tail
            .iter()
            .any(|l| l.starts_with("idle") && l.ends_with('–')));
    }
}
