//! For machines that keep one shield for their whole life: `verify` (does
//! the machine match its config, and does the shield hold?) and `metrics`
//! (the same as Prometheus gauges for node_exporter's textfile collector).
//!
//! The Prometheus text format is written here directly: a dozen gauges of
//! three line kinds (`# HELP`, `# TYPE`, samples) need no registry.

use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::boot::{self, BootStatus};
use crate::compare::summary::SummaryTable;
use crate::cpulist::CpuSet;
use crate::escape::prometheus_label as label_value;
use crate::finding::{Finding, Severity};
use crate::shield::journal;
use crate::shield::request::Request;
use crate::shield::{self, ShieldError, StatusReport};
use crate::sys::procfs;
use crate::sys::Sys;

/// What `verify` found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VerifyReport {
    /// The config file checked against.
    pub config: String,
    /// The CPUs the config asks for.
    pub wanted: CpuSet,
    /// The active shield's CPUs, if any.
    pub shield: Option<CpuSet>,
    /// Whether the active shield is what the config asks for.
    pub matches: bool,
    /// Whether the active shield holds (`status`'s checks).
    pub holds: bool,
    /// How the machine differs from the config: `warn` findings whose
    /// `id` is `config.` and the config key (`config.cpus`, `config.boot`, ...).
    pub differences: Vec<Finding>,
    /// What no longer holds, with the repair.
    pub broken: Vec<Finding>,
    /// What holds but costs the shield, from other programs' settings
    /// (`status`'s advice: kubelet's), with what to change. Neither a
    /// difference nor breakage: the exit code does not look at it;
    /// `--nagios` says WARNING.
    #[serde(default)]
    pub advice: Vec<Finding>,
    /// The boot half, read back (`None`: it could not be read).
    #[serde(default)]
    pub boot: Option<BootStatus>,
}

impl VerifyReport {
    /// Whether everything is as the config asks and holds.
    pub fn ok(&self) -> bool {
        self.matches && self.holds
    }

    /// The `apply` that brings the machine to this config: `apply` reads
    /// the default config unless told which.
    pub fn apply_command(&self) -> String {
        apply_command(&self.config)
    }
}

/// The `apply` of the config at `config` (see [`VerifyReport::apply_command`]).
fn apply_command(config: &str) -> String {
    if config.ends_with(crate::config::DEFAULT_PATH) {
        "cpushield apply".to_string()
    } else {
        format!(
            "cpushield apply --config {}",
            crate::escape::terminal(config)
        )
    }
}

/// `cpushield status`: the run-time shield's state and checks, and the
/// boot half beside it.
#[derive(Debug, Clone, Serialize)]
pub struct MachineStatus {
    /// The shield (`status`'s checks).
    #[serde(flatten)]
    pub shield: StatusReport,
    /// The boot half, read back (`None`: it could not be read).
    pub boot: Option<BootStatus>,
}

/// Reads the shield's and the boot half's state. Read-only.
pub fn status(sys: &Sys) -> Result<MachineStatus, ShieldError> {
    Ok(MachineStatus {
        shield: shield::status(sys)?,
        boot: boot::status(sys).ok(),
    })
}

/// Compares the machine with the config's request `want` (read from
/// `config`) and runs `status`'s checks. Read-only.
pub fn verify(sys: &Sys, want: &Request, config: &str) -> Result<VerifyReport, ShieldError> {
    let MachineStatus {
        shield: status,
        boot,
    } = status(sys)?;
    let state = journal::read_state(sys)?;
    let mut differences = Vec::new();
    match &state {
        None => differences.push(differs(
            "config.cpus",
            format!(
                "no shield is active (the config asks for CPUs {})",
                want.cpus
            ),
        )),
        Some(s) if !s.complete => differences.push(differs(
            "config.interrupted",
            "a shield change was interrupted: run 'cpushield apply' (or 'off') to finish".into(),
        )),
        Some(s) => differences.extend(request_differences(&s.shield, s.request.as_ref(), want)),
    }
    differences.extend(boot_differences(sys, want, boot.as_ref()));
    // `apply` reads the default config unless told which: name the one
    // verified, or following the advice applies another.
    if !config.ends_with(crate::config::DEFAULT_PATH) {
        let apply = apply_command(config);
        for d in &mut differences {
            d.next = d.next.replace("cpushield apply", &apply);
            d.reason = d.reason.replace("'cpushield apply'", &format!("'{apply}'"));
        }
    }
    Ok(VerifyReport {
        boot,
        config: config.to_string(),
        wanted: want.cpus.clone(),
        shield: status.shield.clone(),
        matches: differences.is_empty(),
        holds: status.holds,
        differences,
        broken: status.broken,
        advice: status.advice,
    })
}

/// One way the machine differs from its config: `apply` brings it there.
fn differs(id: &str, reason: String) -> Finding {
    Finding::new(id, Severity::Warn, 50, reason, "cpushield apply")
}

/// How the boot half written differs from the config's `boot` key.
fn boot_differences(sys: &Sys, want: &Request, status: Option<&BootStatus>) -> Vec<Finding> {
    let written = status.and_then(|s| s.written.as_ref());
    let wanted = want
        .boot
        .as_ref()
        .map(|extra| boot::want_here(sys, &want.cpus, extra));
    if status.is_some_and(|s| s.state == boot::BootState::Interrupted) {
        return vec![differs(
            "config.boot",
            "boot: a change of the boot half was interrupted (run 'cpushield apply')".into(),
        )];
    }
    let reason = match (wanted, written) {
        (None, None) => None,
        (None, Some(w)) => Some(format!(
            "boot: {} is written, the config has no 'boot' key",
            w.options.join(" ")
        )),
        (Some(Err(e)), _) => Some(format!("boot: {e}")),
        (Some(Ok(want)), None) => Some(format!(
            "boot: the config asks for {}, none is written",
            want.options.join(" ")
        )),
        (Some(Ok(want)), Some(w)) if want != *w => Some(format!(
            "boot: {} is written, the config asks for {}",
            w.options.join(" "),
            want.options.join(" ")
        )),
        _ => None,
    };
    reason
        .map(|r| differs("config.boot", r))
        .into_iter()
        .collect()
}

/// How the request a shield was made with differs from `want`, field by
/// field. A shield made before requests were recorded is compared by its CPUs.
fn request_differences(shield: &CpuSet, had: Option<&Request>, want: &Request) -> Vec<Finding> {
    let mut out = Vec::new();
    if shield != &want.cpus {
        out.push(differs(
            "config.cpus",
            format!(
                "cpus: the shield has CPUs {shield}, the config asks for {}",
                want.cpus
            ),
        ));
    }
    let Some(had) = had else { return out };
    let mut field = |name: &str, now: String, wanted: String| {
        if now != wanted {
            out.push(differs(
                &format!("config.{name}"),
                format!("{name}: the shield has {now}, the config asks for {wanted}"),
            ));
        }
    };
    field("force", had.force.to_string(), want.force.to_string());
    field(
        "allow_split_siblings",
        had.allow_split_siblings.to_string(),
        want.allow_split_siblings.to_string(),
    );
    // The components' options, each compared as its declaration says.
    let compared = |r: &Request| {
        let options = r.declared::<crate::shield::Options>().unwrap_or_default();
        options.compared()
    };
    for ((key, now), (_, wanted)) in compared(had).into_iter().zip(compared(want)) {
        field(&key, now, wanted);
    }
    out
}

/// The figures of a `compare` results file that `metrics` exports.
#[derive(Debug, Deserialize)]
struct CompareFigures {
    started_unix_s: f64,
    summary: SummaryTable,
}

/// Why `metrics` could not be written.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// Reading the shield failed.
    #[error(transparent)]
    Shield(#[from] ShieldError),
    /// The results file is not a `compare` results.json.
    #[error("results {path}: {reason} (give the results.json that 'cpushield compare' wrote)")]
    Results {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// A phase of the results file is none of compare's: its figures
    /// would be exported under a label no dashboard knows (or one forged).
    #[error("results {path}: phase {phase} is not one of {known} (give the results.json that 'cpushield compare' wrote)")]
    UnknownPhase {
        /// The file.
        path: String,
        /// The phase as the file has it, quoted and cut short.
        phase: String,
        /// The phases compare writes.
        known: String,
    },
    /// The textfile (or the feature file beside it) could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

/// The largest `compare` results.json `metrics --results` reads (64 MiB;
/// one of a 10-minute comparison is well under 1 MiB).
const RESULTS_LIMIT: u64 = 64 << 20;

/// The metrics in the Prometheus text format, of `machine` as
/// [`status`] read it. `now` is the Unix time the ages are taken at; `results` a `compare` results.json: a regular file
/// of at most 64 MiB.
pub fn metrics(
    sys: &Sys,
    machine: &MachineStatus,
    results: Option<&Path>,
    now: u64,
) -> Result<String, MetricsError> {
    let MachineStatus {
        shield: status,
        boot,
    } = machine;
    let figures = match results {
        None => None,
        Some(path) => {
            let err = |reason: String| MetricsError::Results {
                path: path.display().to_string(),
                reason,
            };
            let text =
                crate::input::read_file(path, RESULTS_LIMIT).map_err(|e| err(e.to_string()))?;
            let figures =
                serde_json::from_str::<CompareFigures>(&text).map_err(|e| err(e.to_string()))?;
            known_phases(path, &figures)?;
            Some(figures)
        }
    };
    let interrupts = sys
        .read("proc/interrupts")
        .ok()
        .map(|t| procfs::parse_interrupts(&t));
    Ok(render(
        status,
        boot.as_ref(),
        interrupts.as_ref(),
        journal::last_apply(sys),
        figures.as_ref(),
        now,
    ))
}

/// Refuses `figures` when a row's phase is none of compare's phases.
fn known_phases(path: &Path, figures: &CompareFigures) -> Result<(), MetricsError> {
    use crate::compare::Phase;
    let known = |p: &str| Phase::EVERY.iter().any(|k| k.name() == p);
    match figures.summary.rows.iter().find(|r| !known(&r.phase)) {
        None => Ok(()),
        Some(r) => Err(MetricsError::UnknownPhase {
            path: path.display().to_string(),
            phase: crate::input::quote(&r.phase),
            known: Phase::EVERY.map(Phase::name).join(", "),
        }),
    }
}

/// The Prometheus text of every metric, in the order the metrics are
/// documented: the shield, the boot half, the guard and the cache share,
/// the CPUs and what leaked onto them, the interrupts, the last apply, the
/// latency figures.
fn render(
    status: &StatusReport,
    boot: Option<&BootStatus>,
    interrupts: Option<&(Vec<u32>, Vec<procfs::InterruptLine>)>,
    last_apply: Option<u64>,
    figures: Option<&CompareFigures>,
    now: u64,
) -> String {
    let mut out = String::new();
    shield_metrics(&mut out, status, boot);
    part_metrics(&mut out, &status.parts);
    cpu_metrics(&mut out, status);
    if let (Some(lines), true) = (interrupts, status.shield.is_some()) {
        interrupt_metrics(&mut out, status, lines);
    }
    if let Some(at) = last_apply {
        gauge(
            &mut out,
            "last_apply_timestamp_seconds",
            "When cpushield apply last brought the machine to its config (Unix time).",
            &[(String::new(), at as f64)],
        );
        gauge(
            &mut out,
            "last_apply_age_seconds",
            "Seconds since cpushield apply last brought the machine to its config.",
            &[(String::new(), now.saturating_sub(at) as f64)],
        );
    }
    if let Some(f) = figures {
        figure_metrics(&mut out, f);
    }
    out
}

/// One unlabelled sample.
fn one(v: f64) -> Vec<(String, f64)> {
    vec![(String::new(), v)]
}

/// Whether a shield is active and holds, what broke, and the boot half.
fn shield_metrics(out: &mut String, status: &StatusReport, boot: Option<&BootStatus>) {
    let active = status.shield.is_some();
    gauge(
        out,
        "shield_active",
        "1 when a shield is active (complete or not), else 0.",
        &one(f64::from(u8::from(active))),
    );
    gauge(
        out,
        "shield_up",
        "1 when a shield is active, complete and holds (the kernel enforces it, nothing drifted), else 0.",
        &one(f64::from(u8::from(active && status.complete && status.holds))),
    );
    if let Some(b) = boot {
        gauge(
            out,
            "boot_reboot_pending",
            "1 when the boot half cpushield wrote (or removed) takes effect only at the next reboot, else 0.",
            &one(f64::from(u8::from(b.reboot_pending))),
        );
        gauge(
            out,
            "boot_active",
            "1 when the running kernel booted with the boot half cpushield wrote, else 0.",
            &one(f64::from(u8::from(b.state == boot::BootState::Active))),
        );
    }
    if let Some(j) = &status.journal {
        gauge(
            out,
            "journal_records",
            "Records in the active shield's journal (folded as tasks exit and changes supersede each other).",
            &one(j.records as f64),
        );
        gauge(
            out,
            "journal_bytes",
            "Bytes of the active shield's journal files under /run/cpushield/journal.",
            &one(j.bytes as f64),
        );
    }
    gauge(
        out,
        "broken_checks",
        "Checks of the active shield that fail (cpushield status names them).",
        &one(status.broken.len() as f64),
    );
    gauge(
        out,
        "advice",
        "Settings of other programs (kubelet's) that cost the shield though it holds (cpushield status names them as advice).",
        &one(status.advice.len() as f64),
    );
    let all: Vec<Finding> = (status.broken.iter())
        .chain(&status.advice)
        .cloned()
        .collect();
    if !all.is_empty() {
        gauge(
            out,
            "finding",
            "1 for each finding of status's checks, labelled by its id and severity: bad what broke, warn advice (cpushield status --json has its reason and what to do).",
            &findings(&all),
        );
    }
}

/// The shielded and housekeeping CPUs (the threads and IRQs that leaked
/// onto the shield are their components' metrics).
fn cpu_metrics(out: &mut String, status: &StatusReport) {
    let shield = status.shield.clone().unwrap_or_default();
    gauge(
        out,
        "shielded_cpus",
        "Number of shielded CPUs.",
        &one(shield.len() as f64),
    );
    gauge(
        out,
        "housekeeping_cpus",
        "Number of online CPUs outside the shield.",
        &one(status.online.difference(&shield).len() as f64),
    );
}

/// The interrupts each shielded CPU served since boot.
fn interrupt_metrics(
    out: &mut String,
    status: &StatusReport,
    (cpus, lines): &(Vec<u32>, Vec<procfs::InterruptLine>),
) {
    let shield = status.shield.clone().unwrap_or_default();
    let samples: Vec<(String, f64)> = cpus
        .iter()
        .enumerate()
        .filter(|(_, c)| shield.contains(**c))
        .map(|(col, c)| {
            let sum: u64 = lines.iter().filter_map(|l| l.counts.get(col)).sum();
            (format!("{{cpu=\"{c}\"}}"), sum as f64)
        })
        .collect();
    family(
        out,
        "interrupts_total",
        "counter",
        "Interrupts served by each shielded CPU since boot (all lines of /proc/interrupts).",
        &samples,
    );
}

/// Which figure of a phase's row a metric exports.
type PickFigure = fn(&crate::compare::summary::PhaseStats) -> Option<f64>;

/// The latency figures of the last compare run, per phase.
fn figure_metrics(out: &mut String, f: &CompareFigures) {
    gauge(
        out,
        "results_timestamp_seconds",
        "When the compare run of the exported latency figures started (Unix time).",
        &[(String::new(), f.started_unix_s.floor())],
    );
    let per_phase = |pick: fn(&crate::compare::summary::PhaseStats) -> Option<f64>| {
        f.summary
            .rows
            .iter()
            .filter_map(|r| {
                pick(r).map(|v| (format!("{{phase=\"{}\"}}", label_value(&r.phase)), v))
            })
            .collect::<Vec<_>>()
    };
    // Prometheus names carry base units: seconds. The µs families of
    // earlier releases stay one more release, their help saying so.
    let figures: [(&str, &str, PickFigure); 3] = [
        ("max", "Largest latency", |r| r.max_us),
        ("p99", "99th percentile latency", |r| r.p99_us),
        ("avg", "Mean latency", |r| r.avg_us),
    ];
    for (name, what, pick) in figures {
        let us = per_phase(pick);
        let seconds: Vec<(String, f64)> = us.iter().map(|(l, v)| (l.clone(), v / 1e6)).collect();
        gauge(
            out,
            &format!("latency_{name}_seconds"),
            &format!("{what} per phase of the last compare run, seconds."),
            &seconds,
        );
        gauge(
            out,
            &format!("latency_{name}_microseconds"),
            &format!("{what} per phase of the last compare run, µs. Deprecated: use latency_{name}_seconds; removed in the next release."),
            &us,
        );
    }
}

/// One sample per finding, labelled `{id="...",severity="..."}`.
fn findings(list: &[Finding]) -> Vec<(String, f64)> {
    list.iter()
        .map(|f| {
            (
                format!(
                    "{{id=\"{}\",severity=\"{}\"}}",
                    label_value(&f.id),
                    f.severity.name()
                ),
                1.0,
            )
        })
        .collect()
}

/// One metric family: its HELP and TYPE lines, then its samples
/// (`labels` is `{name="value"}` or empty).
fn family(out: &mut String, name: &str, kind: &str, help: &str, samples: &[(String, f64)]) {
    let _ = writeln!(out, "# HELP cpushield_{name} {help}");
    let _ = writeln!(out, "# TYPE cpushield_{name} {kind}");
    for (labels, value) in samples {
        let _ = writeln!(out, "cpushield_{name}{labels} {value}");
    }
}

/// The metrics the components export for themselves (the cache share's
/// monitoring, ...).
fn part_metrics(out: &mut String, parts: &[crate::shield::PartReport]) {
    for m in parts.iter().flat_map(|p| &p.metrics) {
        let samples: Vec<(String, f64)> = (m.samples.iter())
            .map(|(labels, value)| {
                let labels: Vec<String> = (labels.iter())
                    .map(|(k, v)| format!("{k}=\"{}\"", label_value(v)))
                    .collect();
                let labels = match labels.is_empty() {
                    true => String::new(),
                    false => format!("{{{}}}", labels.join(",")),
                };
                (labels, *value)
            })
            .collect();
        family(out, m.name, m.kind, m.help, &samples);
    }
}

fn gauge(out: &mut String, name: &str, help: &str, samples: &[(String, f64)]) {
    family(out, name, "gauge", help, samples)
}

/// Writes `text` as `DIR/cpushield.prom` (mode 0644, for the collector)
/// atomically, so a scrape never sees half a file, and safely: the
/// directory is commonly the exporter's account's, which can plant
/// symlinks in it, and [`crate::durable`] follows none (a temporary file
/// of a random name the collector ignores, then a rename).
pub fn write_textfile(dir: &Path, text: &str) -> Result<std::path::PathBuf, MetricsError> {
    write_in(dir, "cpushield.prom", text)
}

/// Writes `text` as `DIR/NAME`, mode 0644, as [`write_textfile`] does
/// (node-feature-discovery's feature file too).
pub fn write_in(dir: &Path, name: &str, text: &str) -> Result<std::path::PathBuf, MetricsError> {
    crate::durable::write_file(&dir.join(name), text.as_bytes(), 0o644).map_err(|e| {
        MetricsError::Write {
            path: e.path.display().to_string(),
            source: e.source,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_figures_are_in_seconds_with_the_microsecond_names_deprecated() {
        let summary = crate::compare::summary::SummaryTable::from_curves(
            &crate::compare::testing::full_results(Some(false), false)
                .phases
                .iter()
                .map(|p| p.measured.curve.clone())
                .collect::<Vec<_>>(),
            vec![100.0],
        );
        let f = CompareFigures {
            started_unix_s: 1.0,
            summary,
        };
        let mut out = String::new();
        figure_metrics(&mut out, &f);
        let line = |name: &str| {
            out.lines()
                .find(|l| l.starts_with(&format!("cpushield_{name}{{phase=\"shielded\"}}")))
                .unwrap_or_else(|| panic!("{name} in {out}"))
                .rsplit(' ')
                .next()
                .unwrap()
                .parse::<f64>()
                .unwrap()
        };
        let (s, us) = (
            line("latency_max_seconds"),
            line("latency_max_microseconds"),
        );
        assert!(us > 0.0 && (s - us / 1e6).abs() < 1e-15, "{s} s, {us} µs");
        assert!(out.contains("# HELP cpushield_latency_max_microseconds Largest latency per phase of the last compare run, µs. Deprecated: use latency_max_seconds"), "{out}");
        assert!(
            out.contains("# TYPE cpushield_latency_p99_seconds gauge"),
            "{out}"
        );
    }

    /// A sample as a scraper reads it: name, labels, value.
    type Sample = (String, Vec<(String, String)>, String);

    /// The samples of a text exposition: name, labels (unescaped) and
    /// value, as a scraper reads them; panics on a line it cannot read.
    fn scrape(text: &str) -> Vec<Sample> {
        let mut out = Vec::new();
        for line in text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
        {
            let end = line.find(['{', ' ']).expect(line);
            let (name, mut rest) = line.split_at(end);
            let mut labels = Vec::new();
            if let Some(r) = rest.strip_prefix('{') {
                rest = r;
                while let Some(r) = rest.strip_prefix(',').or(Some(rest)) {
                    if let Some(r) = r.strip_prefix('}') {
                        rest = r;
                        break;
                    }
                    let (key, r) = r.split_once("=\"").expect(line);
                    let mut value = String::new();
                    let mut chars = r.char_indices();
                    let close = loop {
                        match chars.next().expect(line) {
                            (i, '"') => break i,
                            (_, '\\') => match chars.next().expect(line).1 {
                                'n' => value.push('\n'),
                                c @ ('\\' | '"') => value.push(c),
                                c => panic!("escape \\{c} in {line}"),
                            },
                            (_, c) => value.push(c),
                        }
                    };
                    labels.push((key.to_string(), value));
                    rest = &r[close + 1..];
                }
            }
            let value = rest.strip_prefix(' ').expect(line);
            assert!(value.parse::<f64>().is_ok(), "{line}");
            out.push((name.to_string(), labels, value.to_string()));
        }
        out
    }

    #[test]
    fn a_hostile_label_value_stays_inside_its_label() {
        let hostile = "idle\"} 1\ncpushield_shield_up 1\n#";
        let summary = crate::compare::summary::SummaryTable::from_curves(
            &crate::compare::testing::full_results(Some(false), false)
                .phases
                .iter()
                .map(|p| p.measured.curve.clone())
                .collect::<Vec<_>>(),
            vec![100.0],
        );
        let mut clean = summary.clone();
        clean.rows[0].phase = "idle".into();
        let mut forged = summary;
        forged.rows[0].phase = hostile.into();
        let text = |summary, id: &str| {
            let mut out = String::new();
            figure_metrics(
                &mut out,
                &CompareFigures {
                    started_unix_s: 1.0,
                    summary,
                },
            );
            let broken = [Finding::new(id, Severity::Bad, 50, "r", "n")];
            gauge(&mut out, "finding", "h", &findings(&broken));
            out
        };
        let (clean, forged) = (
            scrape(&text(clean, "tasks")),
            scrape(&text(forged, hostile)),
        );
        assert_eq!(clean.len(), forged.len(), "the same samples");
        for (c, f) in clean.iter().zip(&forged) {
            assert_eq!((&c.0, &c.2), (&f.0, &f.2), "same name and value");
        }
        assert!(!forged.iter().any(|s| s.0 == "cpushield_shield_up"));
        let phases: Vec<&str> = (forged.iter().flat_map(|s| &s.1))
            .filter(|(k, _)| k == "phase" || k == "id")
            .map(|(_, v)| v.as_str())
            .collect();
        assert!(phases.contains(&hostile), "read back whole: {phases:?}");
    }

    fn cpus(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    fn req(list: &str) -> Request {
        Request {
            cpus: cpus(list),
            ..Request::default()
        }
    }

    /// `r` with the option `key` as a journal keeps it.
    fn opt(mut r: Request, key: &str, value: serde_json::Value) -> Request {
        r.options.insert(key.to_string(), value);
        r
    }

    #[test]
    fn a_request_reads_back_as_its_on_command() {
        let r = Request {
            options: [
                ("irqs".to_string(), serde_json::json!(["eth0"])),
                (
                    "tune".to_string(),
                    serde_json::json!(["vmstat", "watchdog"]),
                ),
                ("heal".to_string(), serde_json::json!("on")),
            ]
            .into(),
            force: true,
            ..req("2-3")
        };
        assert_eq!(
            crate::shield::components::command_line(&r),
            "cpushield on 2-3 --irq eth0 --tune=vmstat,watchdog --force"
        );
        // A journal that names no healer's mode is one from before the
        // healer was the default: that shield has none.
        let mut older = r.clone();
        older.options.remove("heal");
        assert_eq!(
            crate::shield::components::command_line(&older),
            "cpushield on 2-3 --irq eth0 --tune=vmstat,watchdog --heal=off --force"
        );
        let guard = crate::guard::GuardRequest {
            mode: crate::guard::GuardMode::Off,
            ..Default::default()
        };
        let r = opt(r, "guard", serde_json::to_value(guard).unwrap());
        assert_eq!(
            crate::shield::components::command_line(&r),
            "cpushield on 2-3 --irq eth0 --guard=off --tune=vmstat,watchdog --force"
        );
    }

    #[test]
    fn differences_name_each_field() {
        let had = Request {
            options: [("tune".to_string(), serde_json::json!(["all"]))].into(),
            ..req("2-3")
        };
        let d = request_differences(&cpus("2-3"), Some(&had), &req("1-3"));
        assert_eq!(d.len(), 2, "{d:?}");
        assert_eq!(d[0].id, "config.cpus", "{d:?}");
        assert!(
            d[0].reason.starts_with("cpus:") && d[0].reason.contains("1-3"),
            "{d:?}"
        );
        assert_eq!(d[1].id, "config.tune", "{d:?}");
        assert!(d[1].reason.contains("all"), "{d:?}");
        assert!(d
            .iter()
            .all(|f| f.severity == Severity::Warn && f.next == "cpushield apply"));
        assert!(request_differences(&cpus("2-3"), Some(&had), &had).is_empty());
        // An older shield without a recorded request: its CPUs only.
        assert!(request_differences(&cpus("2-3"), None, &had).is_empty());
    }

    #[test]
    fn the_components_options_are_compared_and_a_flag_not_given_is_not_set() {
        let had = opt(req("2-3"), "kthreads_above", 80.into());
        let had = opt(had, "hotplug_restart", false.into());
        let want = opt(req("2-3"), "max_idle_latency", 10.into());
        let d = request_differences(&cpus("2-3"), Some(&had), &want);
        let ids: Vec<&str> = d.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["config.kthreads_above", "config.max_idle_latency"]);
        assert_eq!(
            d[0].reason,
            "kthreads_above: the shield has 80, the config asks for none"
        );
        assert_eq!(
            d[1].reason,
            "max_idle_latency: the shield has none, the config asks for 10"
        );
        let restart = opt(req("2-3"), "hotplug_restart", true.into());
        let d = request_differences(&cpus("2-3"), Some(&req("2-3")), &restart);
        assert_eq!(
            d[0].reason,
            "hotplug_restart: the shield has false, the config asks for true"
        );
    }
}
