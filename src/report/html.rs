//! `report.html`: one self-contained page with the figure (SVG inlined),
//! the tables, the machine description and the commands. Readable offline:
//! inline CSS, no scripts, no external assets, no network references.
//! Every piece of text is escaped on the way in.

use std::fmt::Write as _;

use super::table::{interference_cells, phase_cells, ratio_cells};
use crate::compare::results::VIRTUALISED_NOTE;
use crate::compare::summary::SummaryTable;

/// Everything the page shows.
#[derive(Debug, Clone, Default)]
pub struct HtmlReport {
    /// Page title and heading.
    pub title: String,
    /// The per-phase table and its ratios.
    pub summary: SummaryTable,
    /// The figure as an SVG document ([`super::plot::svg_string`]).
    pub svg: String,
    /// Machine description, key / value (kernel, CPU model, CPUs, ...).
    pub machine: Vec<(String, String)>,
    /// The commands that ran, key / value (phase or tool / command line).
    pub commands: Vec<(String, String)>,
    /// `Some(kind)` when the machine is virtualised (`kvm`, `qemu`, or
    /// just `yes`): the page then warns about max samples.
    pub virtualised: Option<String>,
    /// Further remarks, one paragraph each.
    pub notes: Vec<String>,
    /// A section rendered elsewhere, placed after the summary (HTML; empty: none).
    pub extra_section: String,
    /// A section rendered elsewhere, placed first, under the heading
    /// (HTML; empty: none): `certify`'s verdict.
    pub lead_section: String,
    /// Other files of the run, linked by relative name (`results.json`, `plot.png`).
    pub files: Vec<String>,
}

/// Escapes text for HTML element content and attribute values.
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Prepares an SVG document for inlining: drops the XML declaration and the
/// namespace attributes (HTML5 infers them, and the page then holds no URL
/// at all).
pub fn inline_svg(svg: &str) -> String {
    let mut s = svg.trim();
    if s.starts_with("<?xml") {
        if let Some(end) = s.find("?>") {
            s = s[end + 2..].trim_start();
        }
    }
    s.replace(" xmlns=\"http://www.w3.org/2000/svg\"", "")
        .replace(" xmlns:xlink=\"http://www.w3.org/1999/xlink\"", "")
}

const CSS: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;max-width:1040px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0}
th,td{padding:.25em .7em;border-bottom:1px solid #e4e4e4}
th{background:#f4f4f4;text-align:right}th:first-child{text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}
table.kv th{text-align:left;vertical-align:top}table.kv td{font-family:ui-monospace,monospace;white-space:pre-wrap;word-break:break-all}
.note{background:#fff6d6;border-left:4px solid #e0b000;padding:.6em 1em}
figure{margin:0}figure svg{max-width:100%;height:auto}
table.verdict td:last-child{text-align:left;font-size:.92em}
";

/// A table as HTML, for sections rendered elsewhere.
pub fn table_html_string(class: &str, header: &[String], rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    table_html(&mut out, class, header, rows);
    out
}

fn table_html(out: &mut String, class: &str, header: &[String], rows: &[Vec<String>]) {
    let _ = write!(out, "<table class=\"{class}\"><thead><tr>");
    for h in header {
        let _ = write!(out, "<th>{}</th>", escape_html(h));
    }
    out.push_str("</tr></thead><tbody>\n");
    for row in rows {
        out.push_str("<tr>");
        for (k, cell) in row.iter().enumerate() {
            if k == 0 {
                let _ = write!(out, "<td>{}</td>", escape_html(cell));
            } else {
                let _ = write!(out, "<td class=\"n\">{}</td>", escape_html(cell));
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table>\n");
}

fn kv_html(out: &mut String, pairs: &[(String, String)]) {
    out.push_str("<table class=\"kv\"><tbody>\n");
    for (k, v) in pairs {
        let _ = writeln!(
            out,
            "<tr><th>{}</th><td>{}</td></tr>",
            escape_html(k),
            escape_html(v)
        );
    }
    out.push_str("</tbody></table>\n");
}

/// The whole page.
pub fn render_html(r: &HtmlReport) -> String {
    let mut out = String::new();
    let title = escape_html(&r.title);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{title}</title>\n<style>\n{CSS}</style>\n</head>\n<body>\n<h1>{title}</h1>\n"
    );
    if let Some(kind) = &r.virtualised {
        let _ = writeln!(
            out,
            "<p class=\"note\"><strong>Virtualised machine ({}).</strong> {}</p>",
            escape_html(kind),
            escape_html(VIRTUALISED_NOTE)
        );
    }

    out.push_str(&r.lead_section);
    out.push_str("<h2>Latency histogram</h2>\n<figure>\n");
    out.push_str(&inline_svg(&r.svg));
    out.push_str("\n</figure>\n");

    out.push_str("<h2>Summary</h2>\n");
    let (h, rows) = phase_cells(&r.summary);
    table_html(&mut out, "phases", &h, &rows);
    let (h, rows) = ratio_cells(&r.summary);
    table_html(&mut out, "ratios", &h, &rows);
    out.push_str(
        "<p>unshielded/shielded: what the shield bought (higher is better). \
         affinity/shielded: what it adds over keeping the load away with plain \
         affinity (taskset), no shield. \
         shielded/idle: distance from this machine's limit (1× is the limit). \
         ∞: the divisor is zero; n/a: both are zero or unknown.</p>\n",
    );
    let _ = writeln!(out, "<p>{}</p>", escape_html(super::table::RATE_NOTE));
    if let Some((h, rows)) = interference_cells(&r.summary) {
        out.push_str("<h3>What reached the measured CPUs</h3>\n");
        table_html(&mut out, "interference", &h, &rows);
        out.push_str(
            "<p>Interrupts and softirqs on the measured CPUs while they were measured, \
             per second, summed over those CPUs: exact counts, which show what a shield \
             keeps away also where latency is emulation noise.</p>\n",
        );
    }

    if let Some((h, rows)) = super::table::level_cells(&r.summary) {
        out.push_str("<h3>Per cache level</h3>\n");
        table_html(&mut out, "levels", &h, &rows);
        let _ = writeln!(out, "<p>{}</p>", escape_html(super::table::LEVELS_NOTE));
    }

    out.push_str(&r.extra_section);
    for note in &r.notes {
        let _ = writeln!(out, "<p>{}</p>", escape_html(note));
    }
    if !r.machine.is_empty() {
        out.push_str("<h2>Machine</h2>\n");
        kv_html(&mut out, &r.machine);
    }
    if !r.commands.is_empty() {
        out.push_str("<h2>Commands</h2>\n");
        kv_html(&mut out, &r.commands);
    }
    if !r.files.is_empty() {
        out.push_str("<h2>Files</h2>\n<ul>\n");
        for f in &r.files {
            let e = escape_html(f);
            let _ = writeln!(out, "<li><a href=\"{e}\">{e}</a></li>");
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</body>\n</html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_everything_that_matters() {
        assert_eq!(
            escape_html(r#"<a href="x">&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
        );
        assert_eq!(escape_html("µs ∞"), "µs ∞");
    }

    #[test]
    fn inlined_svg_has_no_declaration_or_namespace_url() {
        let svg = "<?xml version=\"1.0\"?>\n<svg width=\"10\" height=\"10\" \
                   xmlns=\"http://www.w3.org/2000/svg\"><text>a</text></svg>";
        let s = inline_svg(svg);
        assert!(s.starts_with("<svg width"));
        assert!(!s.contains("http"));
        assert!(s.ends_with("</svg>"));
    }
}
