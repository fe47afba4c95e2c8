//! The report of `cpushield compare`: `summary.txt` (also its terminal
//! output), the histogram figure as SVG and PNG, `report.html`, and
//! `results.json`, written together by [`write_files`].

use std::io::Write;
use std::path::Path;

use super::html::{render_html, HtmlReport};
use super::plot::{svg_string, write_png, write_svg, PlotOptions};
use super::table::render_text;
use super::ReportError;
use crate::compare::results::{Results, VIRTUALISATION_UNKNOWN_NOTE};
use crate::compare::summary::Curve;
use crate::compare::DryRun;

/// The plot's title; it says "virtualised" so the figure does not travel
/// without it.
pub fn plot_title(r: &Results) -> String {
    let virt = match r.machine.virtualised {
        Some(true) => ", virtualised",
        None => ", virtualisation unknown",
        Some(false) => "",
    };
    format!(
        "{} latency, CPUs {}, load {}{virt}",
        r.options.probe.name(),
        r.options.cpus,
        r.options.load
    )
}

/// The text of `summary.txt` (and of stdout without `--json`).
pub fn summary_text(r: &Results) -> String {
    let mut s = format!(
        "cpushield compare: CPUs {} ({} probe, {} s per phase, load {} via {})\n{}\n\n",
        r.options.cpus,
        r.options.probe.name(),
        r.options.duration_s,
        r.options.load,
        r.load_driver,
        r.machine.one_line()
    );
    s.push_str(&render_text(&r.summary));
    s.push_str(&super::explain::phases_text(r));
    if let Some(note) = r.virtualised_note {
        s.push_str(&format!("\nNote: {note}\n"));
    }
    if let Some(note) = &r.balancer_note {
        s.push_str(&format!("\nNote: {note}.\n"));
    }
    for line in put_back_lines(r) {
        s.push_str(&format!("\nNote: {line}\n"));
    }
    if r.interrupted {
        s.push_str("\nInterrupted: later phases are missing.\n");
    }
    s
}

/// What a phase's load changed on the whole machine and cpushield put
/// back when it stopped, a line each.
pub fn put_back_lines(r: &Results) -> Vec<String> {
    r.phases
        .iter()
        .filter_map(|p| Some((p.phase, p.load_stop.as_ref()?)))
        .filter(|(_, s)| !s.put_back.is_empty())
        .map(|(phase, s)| {
            format!(
                "the {phase} phase's load changed {} (stress-ng enables samepage merging when memory runs low; each file read back after the load stopped).",
                s.put_back.join(", ")
            )
        })
        .collect()
}

/// The files written by [`write_files`].
pub const FILES: [&str; 5] = [
    "results.json",
    "summary.txt",
    "histogram.svg",
    "histogram.png",
    "report.html",
];

/// Writes results.json, summary.txt, histogram.svg/.png and report.html to `dir`.
pub fn write_files(r: &Results, dir: &Path) -> Result<(), ReportError> {
    let html = render_html(&write_data_files(r, dir)?);
    super::write_report_file(&dir.join("report.html"), html.as_bytes())
}

/// Writes results.json, summary.txt and histogram.svg/.png to `dir`, and
/// gives the page that shows them (for `certify` to lead with its verdict).
pub fn write_data_files(r: &Results, dir: &Path) -> Result<HtmlReport, ReportError> {
    let write =
        |file: &str, text: String| super::write_report_file(&dir.join(file), text.as_bytes());
    std::fs::create_dir_all(dir).map_err(|source| ReportError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let json = serde_json::to_string_pretty(r).map_err(|e| ReportError::Io {
        path: dir.join("results.json"),
        source: e.into(),
    })?;
    write("results.json", json + "\n")?;
    write("summary.txt", summary_text(r))?;
    let curves: Vec<Curve> = r.phases.iter().map(|p| p.measured.curve.clone()).collect();
    let opts = PlotOptions {
        title: plot_title(r),
        thresholds_us: r.options.thresholds_us.clone(),
        ..PlotOptions::default()
    };
    write_svg(&dir.join("histogram.svg"), &curves, &opts)?;
    write_png(&dir.join("histogram.png"), &curves, &opts)?;
    let m = &r.machine;
    let kv = |k: &str, v: &Option<String>| (k.to_string(), v.clone().unwrap_or("unknown".into()));
    let mut commands = Vec::new();
    for p in &r.phases {
        commands.push((format!("{} measure", p.phase), p.command.join(" ")));
        if let Some(l) = &p.load {
            for (k, c) in l.command_lines().into_iter().enumerate() {
                commands.push((format!("{} load #{}", p.phase, k + 1), c));
            }
            if let Some(v) = &l.stress_ng_version {
                commands.push(("stress-ng version".into(), v.clone()));
            }
        }
    }
    commands.push(("cpushield version".into(), env!("CARGO_PKG_VERSION").into()));
    Ok(HtmlReport {
        title: format!("cpushield compare: CPUs {}", r.options.cpus),
        summary: r.summary.clone(),
        svg: svg_string(&curves, &opts)?,
        machine: vec![
            ("summary".into(), m.one_line()),
            kv("kernel", &m.kernel_release),
            kv("kernel command line", &m.cmdline),
            kv("system", &system(m)),
            kv("firmware", &m.bios),
            kv("CPU model", &m.cpu_model),
            kv("microcode", &m.microcode),
            kv("CPUs online", &m.cpus_online),
            kv("clocksource", &m.clocksource),
            ("measured CPUs".into(), r.options.cpus.to_string()),
            ("housekeeping CPUs".into(), r.housekeeping.to_string()),
        ],
        commands,
        virtualised: (m.virtualised == Some(true))
            .then(|| m.system_vendor.clone().unwrap_or_else(|| "yes".into())),
        notes: {
            let mut notes = Vec::new();
            if m.virtualised.is_none() {
                notes.push(VIRTUALISATION_UNKNOWN_NOTE.to_string());
            }
            if r.interrupted {
                notes.push("The run was interrupted: later phases are missing.".into());
            }
            if let Some(note) = &r.balancer_note {
                notes.push(format!("{note}."));
            }
            notes.extend(put_back_lines(r));
            notes
        },
        extra_section: super::explain::phases_html(r),
        files: FILES
            .iter()
            .filter(|f| **f != "report.html")
            .map(|f| f.to_string())
            .collect(),
        ..HtmlReport::default()
    })
}

/// DMI's system vendor and product, as one line.
fn system(m: &crate::measure::machine::Machine) -> Option<String> {
    let parts: Vec<&str> = [&m.system_vendor, &m.product_name]
        .into_iter()
        .filter_map(|p| p.as_deref())
        .collect();
    (!parts.is_empty()).then(|| parts.join(" "))
}

/// `compare --dry-run` for people: the CPUs, each phase's load and
/// command, the shield plan, and where the report would go.
pub fn dry_run(d: &DryRun, w: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        w,
        "compare (dry run): measure CPUs {}, housekeeping {}",
        d.cpus, d.housekeeping
    )?;
    for p in &d.phases {
        writeln!(
            w,
            "{}: load {}; {}",
            p.phase.name(),
            p.load,
            p.command.join(" ")
        )?;
    }
    if let Some(plan) = &d.shield {
        writeln!(w, "shielded phase: shield plan")?;
        super::shield::on(plan, w)?;
    }
    writeln!(w, "output would go to {}", d.out.display())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::results::virtualised_note;
    use crate::compare::testing::full_results;

    #[test]
    fn results_json_shape() {
        let r = full_results(None, true);
        let v = serde_json::to_value(&r).unwrap();
        for key in [
            "schema_version",
            "tool",
            "options",
            "housekeeping",
            "machine",
            "phases",
            "summary",
            "ratios",
            "virtualised_note",
        ] {
            assert!(v.get(key).is_some(), "{key} missing");
        }
        let p = &v["phases"][0];
        for key in [
            "phase",
            "command",
            "stats",
            "curve",
            "per_cpu",
            "measurement",
            "load",
        ] {
            assert!(p.get(key).is_some(), "phase.{key} missing");
        }
        assert_eq!(v["options"]["cpus"], "2");
        assert!(summary_text(&r).contains("hypervisor"));
    }

    #[test]
    fn virtualisation_is_always_said() {
        let r = full_results(Some(true), true);
        let text = summary_text(&r);
        assert!(text.contains(", virtualised,"), "{text}");
        assert!(text.contains("swings by 100×"), "{text}");
        assert!(plot_title(&r).ends_with(", virtualised"));
        let dir = tempfile::tempdir().unwrap();
        write_files(&r, dir.path()).unwrap();
        let svg = std::fs::read_to_string(dir.path().join("histogram.svg")).unwrap();
        assert!(svg.contains("load cpu, virtualised"), "plot title");
        let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
        assert!(html.contains("Virtualised machine"));

        assert_eq!(virtualised_note(None), Some(VIRTUALISATION_UNKNOWN_NOTE));
        let mut r = full_results(None, false);
        r.virtualised_note = virtualised_note(None);
        assert!(summary_text(&r).contains("could not be told"));
        assert!(plot_title(&r).ends_with("virtualisation unknown"));
        write_files(&r, dir.path()).unwrap();
        let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
        assert!(html.contains("could not be told"));

        assert_eq!(virtualised_note(Some(false)), None);
        let r = full_results(Some(false), false);
        assert!(!summary_text(&r).contains("swings"));
        assert!(!plot_title(&r).contains("virtual"));
    }
}
