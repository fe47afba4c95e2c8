//! Report files from synthetic histograms: SVG and PNG written and valid,
//! `report.html` self-contained, escaped and holding the figure and tables.
//!
//! Set `CPUSHIELD_KEEP_REPORT=DIR` to keep the files for a look.

use std::path::PathBuf;

use cpushield::compare::summary::{
    threshold_label, Curve, Ratio, SummaryTable, IDLE, SHIELDED, UNSHIELDED,
};
use cpushield::report::{self, table::render_text, HtmlReport, PlotOptions};

/// A histogram of 1 µs buckets falling off exponentially from `peak` with
/// `tail` µs decay, plus outliers at the given latencies.
fn curve(label: &str, samples: f64, peak: usize, tail: f64, outliers: &[usize]) -> Curve {
    let mut counts = vec![0u64; 2000];
    for (i, c) in counts.iter_mut().enumerate() {
        if i >= peak {
            *c = (samples * (-((i - peak) as f64) / tail).exp() * (1.0 / tail)).round() as u64;
        }
    }
    let mut overflow = 0;
    for &o in outliers {
        match counts.get_mut(o) {
            Some(c) => *c += 1,
            None => overflow += 1,
        }
    }
    Curve {
        label: label.into(),
        bucket_width_us: 1.0,
        counts,
        overflow,
    }
}

fn curves() -> Vec<Curve> {
    vec![
        curve(IDLE, 60000.0, 3, 1.5, &[31, 44]),
        curve(UNSHIELDED, 60000.0, 6, 25.0, &[480, 733, 1428, 2600]),
        curve(SHIELDED, 60000.0, 4, 3.0, &[88, 151]),
    ]
}

fn out_dir() -> (Option<tempfile::TempDir>, PathBuf) {
    match std::env::var_os("CPUSHIELD_KEEP_REPORT") {
        Some(d) => {
            std::fs::create_dir_all(&d).unwrap();
            (None, PathBuf::from(d))
        }
        None => {
            let t = tempfile::tempdir().unwrap();
            let p = t.path().to_path_buf();
            (Some(t), p)
        }
    }
}

fn opts() -> PlotOptions {
    PlotOptions {
        title: "Timer latency under full load: idle vs unshielded vs shielded".into(),
        ..Default::default()
    }
}

#[test]
fn svg_and_png_are_written() {
    let (_keep, dir) = out_dir();
    let svg = dir.join("plot.svg");
    let png = dir.join("plot.png");
    report::write_svg(&svg, &curves(), &opts()).unwrap();
    report::write_png(&png, &curves(), &opts()).unwrap();

    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("<svg"), "not an SVG");
    assert!(text.trim_end().ends_with("</svg>"));
    for label in [IDLE, UNSHIELDED, SHIELDED, "samples (log scale)"] {
        assert!(text.contains(label), "SVG lacks {label:?}");
    }
    let bytes = std::fs::read(&png).unwrap();
    assert!(bytes.len() > 1000, "PNG too small: {}", bytes.len());
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "no PNG signature");
}

#[test]
fn empty_and_degenerate_curves_still_plot() {
    let (_keep, dir) = out_dir();
    let empty = Curve {
        label: IDLE.into(),
        bucket_width_us: 1.0,
        counts: vec![0; 10],
        overflow: 0,
    };
    let only_overflow = Curve {
        label: UNSHIELDED.into(),
        bucket_width_us: 1.0,
        counts: vec![],
        overflow: 5,
    };
    report::svg_string(&[], &opts()).unwrap();
    report::svg_string(&[empty.clone(), only_overflow.clone()], &opts()).unwrap();
    report::write_png(&dir.join("empty.png"), &[empty, only_overflow], &opts()).unwrap();
}

fn html_report(virtualised: bool) -> String {
    let table = SummaryTable::from_curves(&curves(), vec![100.0, 1000.0]);
    let svg = report::svg_string(&curves(), &opts()).unwrap();
    report::render_html(&HtmlReport {
        title: "cpushield compare <cpus 1>".into(),
        summary: table,
        svg,
        machine: vec![
            ("kernel".into(), "6.1.0 #1 SMP PREEMPT_DYNAMIC".into()),
            ("model".into(), "Intel <Xeon> & \"friends\"".into()),
        ],
        commands: vec![(
            "load (unshielded)".into(),
            "stress-ng --cpu 2 --cpu-method sqrt --temp-path /var/tmp/x".into(),
        )],
        virtualised: virtualised.then(|| "kvm".to_string()),
        notes: vec!["a <script>alert(1)</script> note".into()],
        extra_section: String::new(),
        lead_section: String::new(),
        files: vec!["results.json".into(), "plot.png".into()],
    })
}

fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

#[test]
fn html_is_self_contained_and_escaped() {
    let (_keep, dir) = out_dir();
    let html = html_report(true);
    std::fs::write(dir.join("report.html"), &html).unwrap();

    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.trim_end().ends_with("</html>"));
    // The figure is inline, once.
    assert_eq!(count(&html, "<svg"), 1);
    assert_eq!(count(&html, "</svg>"), 1);
    // Nothing to fetch: no URLs, no scripts, no external stylesheets or images.
    assert!(!html.contains("http://") && !html.contains("https://"));
    assert!(!html.contains("<script"));
    assert!(!html.contains("<link") && !html.contains("<img") && !html.contains("src="));
    // Text went in escaped.
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("Intel &lt;Xeon&gt; &amp; &quot;friends&quot;"));
    assert!(html.contains("cpushield compare &lt;cpus 1&gt;"));
    // Balanced structure.
    for tag in [
        "table", "tr", "thead", "tbody", "figure", "ul", "style", "head", "body",
    ] {
        let open = count(&html, &format!("<{tag}>")) + count(&html, &format!("<{tag} "));
        assert_eq!(
            open,
            count(&html, &format!("</{tag}>")),
            "<{tag}> unbalanced"
        );
    }
    // The tables and the virtualisation note.
    for phase in [IDLE, UNSHIELDED, SHIELDED] {
        assert!(html.contains(&format!("<td>{phase}</td>")), "row {phase}");
    }
    assert!(html.contains("<th>p99.9 µs</th>"));
    assert!(html.contains(&report::escape_html(&threshold_label(1000.0))));
    assert!(html.contains("unshielded/shielded"));
    assert!(html.contains("swings by 100×"));
    assert!(html.contains("<a href=\"results.json\">"));
}

#[test]
fn html_without_virtualisation_has_no_warning() {
    let html = html_report(false);
    assert!(!html.contains("swings by 100×"));
}

#[test]
fn table_from_synthetic_curves_reads_like_the_literature() {
    let table = SummaryTable::from_curves(&curves(), vec![100.0, 1000.0]);
    let text = render_text(&table);
    eprintln!("{text}");
    let r = table.ratios();
    // The unshielded max is in the overflow here: unknown, so n/a, honestly.
    assert_eq!(r[0].unshielded_over_shielded.to_string(), "n/a");
    // p99.9 is known for all three.
    assert!(matches!(r[1].unshielded_over_shielded, Ratio::Value(v) if v > 1.0));
}
