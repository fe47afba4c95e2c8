//! `cpushield compare`: the published experiment in one command.
//!
//! Three phases measure the same CPUs with the same probe for the same time:
//! **idle** (no load: the machine's limit), **unshielded** (load on every
//! online CPU) and **shielded** (the CPUs shielded, the load confined to the
//! housekeeping CPUs, the measurement inside the shield; the shield is
//! always undone afterwards, also on error or Ctrl-C).
//!
//! Each measurement runs as a child process, `cpushield measure ... --json`
//! (for the shielded phase `cpushield run -- cpushield measure ...`, so the
//! measuring process is placed in the shield's cgroup while this process
//! and the load stay outside). The child's JSON is kept whole in
//! `results.json` and reduced to a [`Curve`] and a [`PhaseStats`] row here.
//!
//! The flow is `validate ([check]) → phases ([run]) → assemble
//! ([assemble]) → files ([write_files])`; validating and assembling are pure.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

use crate::cpulist::CpuSet;
use crate::load::{Driver, Load, LoadReport, Scenario, StopReport};
use crate::measure::interrupts::Delta;
use crate::measure::machine::Machine;
use crate::measure::results::{Measurement, ProbeStatus, Tool};
use crate::measure::ProbeKind;
use crate::report::{
    self, Curve, HtmlReport, PhaseStats, PlotOptions, RatioRow, SummaryTable, IDLE, SHIELDED,
    UNSHIELDED,
};
use crate::shield::{self, request::Request, OffReport, OnReport};
use crate::sys::Sys;

/// Version of the `results.json` layout.
pub const SCHEMA_VERSION: u32 = 1;

/// Histogram buckets (1 µs each) asked of every measurement: 100 ms of
/// range. Unshielded stock kernels under load reach tens of milliseconds
/// (and the emulated test guest does so in every phase); with a 10 ms range
/// p99 and p99.9 fell into the overflow there and their ratios were
/// unknown. Trailing empty buckets are not written, so the range costs
/// space in results.json only when latencies reach it.
pub const MIN_BUCKETS: u64 = 100_000;

/// One phase of the experiment.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// No load: the limit this machine can reach.
    Idle,
    /// Load on all online CPUs, no shield.
    Unshielded,
    /// Shield on, load on the housekeeping CPUs, measurement inside the shield.
    Shielded,
}

impl Phase {
    /// All phases in the order they run.
    pub const ALL: [Phase; 3] = [Phase::Idle, Phase::Unshielded, Phase::Shielded];

    /// `idle`, `unshielded`, `shielded` (the labels of the table and plot).
    pub fn name(self) -> &'static str {
        match self {
            Phase::Idle => IDLE,
            Phase::Unshielded => UNSHIELDED,
            Phase::Shielded => SHIELDED,
        }
    }
}

/// Why `compare` refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// A bad option or a request this machine cannot serve; nothing started.
    #[error("{0}; nothing was started")]
    Refused(String),
    /// The shield could not be applied or undone.
    #[error("shield: {0}")]
    Shield(#[from] shield::ShieldError),
    /// The background load failed.
    #[error("load: {0}")]
    Load(#[from] crate::load::LoadError),
    /// A measurement child failed or gave unreadable output.
    #[error("{phase} measurement: {reason}")]
    Measure {
        /// The phase.
        phase: &'static str,
        /// What went wrong.
        reason: String,
    },
    /// Writing the report failed.
    #[error(transparent)]
    Report(#[from] report::ReportError),
    /// Reading the machine failed.
    #[error(transparent)]
    Sys(#[from] crate::sys::SysError),
    /// Any other I/O step.
    #[error("{what}: {source}")]
    Io {
        /// The step.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// What the user asked for.
#[derive(Debug, Clone, Serialize)]
pub struct Options {
    /// CPUs to measure (and shield in the shielded phase).
    pub cpus: CpuSet,
    /// Background load scenario.
    pub load: Scenario,
    /// Latency probe.
    pub probe: ProbeKind,
    /// Seconds per phase.
    pub duration_s: f64,
    /// Over-threshold limits, µs.
    pub thresholds_us: Vec<f64>,
    /// Phases to run, in order.
    pub phases: Vec<Phase>,
    /// Output directory.
    pub out: PathBuf,
}

/// Facts about the machine that decide whether `compare` may start.
#[derive(Debug, Clone)]
pub struct Preconditions {
    /// Online CPUs.
    pub online: CpuSet,
    /// Running as root (or against a fixture root, where root is not needed).
    pub privileged: bool,
    /// A shield (journal) is already active.
    pub shield_active: bool,
}

impl Preconditions {
    /// Reads them from the machine behind `sys`.
    pub fn read(sys: &Sys) -> Result<Preconditions, CompareError> {
        Ok(Preconditions {
            online: sys.read_cpulist("sys/devices/system/cpu/online")?,
            privileged: sys.is_fixture() || nix::unistd::geteuid().is_root(),
            shield_active: shield::journal::Journal::exists(sys),
        })
    }
}

/// Checks a request before anything starts; returns the housekeeping CPUs
/// (online minus the targets). Pure.
pub fn check(opts: &Options, pre: &Preconditions) -> Result<CpuSet, CompareError> {
    let refuse = |m: String| Err(CompareError::Refused(m));
    if opts.cpus.is_empty() {
        return refuse("--cpus is empty: give the CPUs to measure and shield".into());
    }
    let unknown = opts.cpus.difference(&pre.online);
    if !unknown.is_empty() {
        return refuse(format!(
            "CPU {unknown} of --cpus {} is not online (online: {})",
            opts.cpus, pre.online
        ));
    }
    let housekeeping = pre.online.difference(&opts.cpus);
    if housekeeping.is_empty() {
        return refuse(format!(
            "--cpus {} leaves no housekeeping CPU (online: {}): keep at least one CPU for the rest of the system and the load",
            opts.cpus, pre.online
        ));
    }
    if !(opts.duration_s > 0.0 && opts.duration_s.is_finite() && opts.duration_s <= 86_400.0) {
        return refuse(format!(
            "--duration {}: give seconds per phase, more than 0 and at most 86400",
            opts.duration_s
        ));
    }
    if opts.thresholds_us.is_empty()
        || opts
            .thresholds_us
            .iter()
            .any(|t| !(t.is_finite() && *t > 0.0 && *t <= 1e7))
    {
        return refuse(format!(
            "--threshold {:?}: give one or more limits in µs, each more than 0",
            opts.thresholds_us
        ));
    }
    if opts.phases.is_empty() {
        return refuse("--phases is empty: give idle, unshielded and/or shielded".into());
    }
    if pre.shield_active {
        return refuse(
            "a shield is already active: the phases would not measure what they claim (run `cpushield off` first)".into(),
        );
    }
    if opts.phases.contains(&Phase::Shielded) && !pre.privileged {
        return refuse(
            "the shielded phase changes the whole system and must run as root (try: sudo cpushield compare ..., or --phases idle,unshielded)".into(),
        );
    }
    Ok(housekeeping)
}

/// A measurement reduced to what the table and the plot need.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measured {
    /// The ALL histogram (sum of the per-CPU ones).
    pub curve: Curve,
    /// Statistics with exact min/avg/max.
    pub stats: PhaseStats,
    /// Per-CPU interrupt and softirq deltas during the measurement.
    pub per_cpu: Vec<CpuNoise>,
}

/// Interrupts and softirqs that reached one measured CPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuNoise {
    /// The CPU.
    pub cpu: u32,
    /// `/proc/interrupts` deltas (as reported by `measure`).
    pub interrupts: Vec<Delta>,
    /// `/proc/softirqs` deltas.
    pub softirqs: Vec<Delta>,
}

fn ns_to_us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// Reduces the results of `cpushield measure` (one probe) to a curve and a
/// table row. Pure.
pub fn parse_measurement(
    phase: &str,
    measured: &Measurement,
    thresholds_us: &[f64],
) -> Result<Measured, String> {
    let probe = measured
        .results
        .first()
        .ok_or("the measurement produced no result")?;
    if probe.status != ProbeStatus::Ok {
        return Err(format!(
            "probe {} skipped: {}",
            probe.probe.name(),
            probe.skip_reason.as_deref().unwrap_or("no reason given")
        ));
    }
    let width_ns = Some(probe.histogram.bucket_width_ns)
        .filter(|&w| w > 0)
        .ok_or("bucket_width_ns is 0")?;
    let mut counts: Vec<u64> = Vec::new();
    for cpu in &probe.cpus {
        if counts.len() < cpu.histogram.len() {
            counts.resize(cpu.histogram.len(), 0);
        }
        for (sum, c) in counts.iter_mut().zip(&cpu.histogram) {
            *sum += c;
        }
    }
    let per_cpu = probe
        .cpus
        .iter()
        .map(|cpu| CpuNoise {
            cpu: cpu.cpu,
            interrupts: cpu.interrupts.clone(),
            softirqs: cpu.softirqs.clone(),
        })
        .collect();
    let curve = Curve {
        label: phase.to_string(),
        bucket_width_us: width_ns as f64 / 1000.0,
        counts,
        overflow: probe.cpus.iter().map(|c| c.stats.overflows).sum(),
    };
    let mut stats = PhaseStats::from_curve(&curve, thresholds_us);
    let all = &probe.all;
    stats.samples = all.samples;
    stats.min_us = all.min_ns.map(ns_to_us);
    stats.avg_us = all.avg_ns.map(|ns| ns / 1000.0);
    stats.max_us = all.max_ns.map(ns_to_us);
    // The engine's percentiles are clamped to the exact max.
    let pct = |p: f64| {
        all.percentiles
            .iter()
            .find(|x| x.p == p)
            .map(|x| x.value_ns.map(ns_to_us))
    };
    if let Some(v) = pct(99.0) {
        stats.p99_us = v;
    }
    if let Some(v) = pct(99.9) {
        stats.p999_us = v;
    }
    Ok(Measured {
        curve,
        stats,
        per_cpu,
    })
}

/// One phase as recorded in `results.json`.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseRecord {
    /// `idle`, `unshielded`, `shielded`.
    pub phase: &'static str,
    /// The measuring command line.
    pub command: Vec<String>,
    /// The background load (`None`: no load in this phase).
    pub load: Option<LoadReport>,
    /// How the load was stopped.
    pub load_stop: Option<StopReport>,
    /// The shield applied (shielded phase).
    pub shield: Option<OnReport>,
    /// The shield undone (shielded phase).
    pub unshield: Option<OffReport>,
    /// Seconds the phase took, load start to load stop.
    pub elapsed_s: f64,
    /// Curve, table row and per-CPU interrupt deltas.
    #[serde(flatten)]
    pub measured: Measured,
    /// The full output of `cpushield measure --json`.
    pub measurement: Measurement,
}

/// Everything `compare` found; serialised as `results.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Results {
    /// Layout version of this document.
    pub schema_version: u32,
    /// `cpushield` and its version.
    pub tool: Tool,
    /// When the first phase started (Unix seconds).
    pub started_unix_s: f64,
    /// True when Ctrl-C/SIGTERM ended the run early (phases may be missing).
    pub interrupted: bool,
    /// The request.
    pub options: Options,
    /// Online minus the measured CPUs.
    pub housekeeping: CpuSet,
    /// Who ran the load (`stress-ng` or `builtin`).
    pub load_driver: String,
    /// The machine.
    pub machine: Machine,
    /// Present when the machine is virtualised, or may be (unknown): how
    /// to read the figures there.
    pub virtualised_note: Option<&'static str>,
    /// The phases in order.
    pub phases: Vec<PhaseRecord>,
    /// The table.
    pub summary: SummaryTable,
    /// Unshielded/shielded and shielded/idle ratios.
    pub ratios: Vec<RatioRow>,
}

/// The table of the recorded phases. Pure.
pub fn assemble(phases: &[PhaseRecord], thresholds_us: &[f64]) -> SummaryTable {
    SummaryTable {
        thresholds_us: thresholds_us.to_vec(),
        rows: phases.iter().map(|p| p.measured.stats.clone()).collect(),
    }
}

/// The measuring command of a phase: `measure`, wrapped in `run --` for
/// the shielded phase (so the measuring process enters the shield).
pub fn measure_command(
    exe: &Path,
    root: Option<&Path>,
    phase: Phase,
    opts: &Options,
    realtime: bool,
) -> Vec<String> {
    let exe = exe.display().to_string();
    let mut argv = Vec::new();
    if phase == Phase::Shielded {
        argv.push(exe.clone());
        if let Some(r) = root {
            argv.extend(["--root".to_string(), r.display().to_string()]);
        }
        argv.extend(["run".to_string(), "--".to_string()]);
    }
    let max_t = opts.thresholds_us.iter().cloned().fold(0.0, f64::max);
    let buckets = MIN_BUCKETS.max(max_t.ceil() as u64 + 1).min(1_000_000);
    argv.extend([
        exe,
        "measure".into(),
        "--cpus".into(),
        opts.cpus.to_string(),
        "--probe".into(),
        opts.probe.name().into(),
        "--duration".into(),
        opts.duration_s.to_string(),
        "--buckets".into(),
        buckets.to_string(),
        "--json".into(),
    ]);
    if !realtime {
        argv.push("--no-rt".into());
    }
    argv
}

/// How [`run`] reaches the rest of the world.
pub struct Context<'a> {
    /// The machine (a fixture root in tests).
    pub sys: &'a Sys,
    /// Our own executable (measurement children, built-in load workers).
    pub exe: PathBuf,
    /// Who runs the load.
    pub driver: Driver,
    /// Set by Ctrl-C/SIGTERM: stop after undoing everything.
    pub stop: &'a AtomicBool,
    /// Progress lines (the binary prints them when stderr is a terminal).
    pub progress: &'a mut dyn FnMut(&str),
}

/// Undoes the shield when dropped unless [`ShieldGuard::off`] ran.
struct ShieldGuard<'a> {
    sys: &'a Sys,
    armed: bool,
}

impl ShieldGuard<'_> {
    fn off(mut self) -> Result<OffReport, shield::ShieldError> {
        self.armed = false;
        shield::off(self.sys)
    }
}

impl Drop for ShieldGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            if let Err(e) = shield::off(self.sys) {
                eprintln!(
                    "cpushield compare: undoing the shield failed: {e} (run `cpushield off`)"
                );
            }
        }
    }
}

/// `cpus` narrowed to where this process may run on the real machine (the
/// load always runs on real CPUs, also with a fixture root; on a real
/// machine this is the whole set unless compare itself was restricted).
fn usable_cpus(cpus: &CpuSet) -> CpuSet {
    match crate::sys::syscalls::get_affinity(0) {
        Ok(mine) => cpus.intersection(&mine),
        Err(_) => cpus.clone(),
    }
}

fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Runs a measuring child, forwarding a stop request as SIGINT (the child
/// then reports what it has).
fn run_child(
    argv: &[String],
    phase: &'static str,
    stop: &AtomicBool,
) -> Result<Measurement, CompareError> {
    let err = |reason: String| CompareError::Measure { phase, reason };
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| err(format!("cannot start {}: {e}", argv[0])))?;
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let mut signalled = false;
    // Read stdout/stderr on threads so a large JSON cannot block the child.
    let mut out = child.stdout.take();
    let mut errp = child.stderr.take();
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(o) = out.as_mut() {
            let _ = std::io::Read::read_to_string(o, &mut s);
        }
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(o) = errp.as_mut() {
            let _ = std::io::Read::read_to_string(o, &mut s);
        }
        s
    });
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) => {}
            Err(e) => return Err(err(format!("waiting: {e}"))),
        }
        if stop.load(Relaxed) && !signalled {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
            signalled = true;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = t_out.join().unwrap_or_default();
    let stderr = t_err.join().unwrap_or_default();
    if !status.success() {
        return Err(err(format!("{} ({status})", stderr.trim())));
    }
    serde_json::from_str(&stdout)
        .map_err(|e| err(format!("unreadable JSON ({e}): {}", stderr.trim())))
}

/// Runs the phases of `opts` (already [`check`]ed) and collects the results.
/// The shield is undone and every load stopped before this returns, also on
/// error; a stop request ends the run after the current phase.
pub fn run(ctx: &mut Context<'_>, opts: &Options) -> Result<Results, CompareError> {
    let sys = ctx.sys;
    let pre = Preconditions::read(sys)?;
    let housekeeping = check(opts, &pre)?;
    let root = sys.root_arg().map(Path::to_path_buf);
    let realtime = nix::unistd::geteuid().is_root();
    let started_unix_s = now_unix();
    let mut phases = Vec::new();
    for &phase in &opts.phases {
        if ctx.stop.load(Relaxed) {
            break;
        }
        (ctx.progress)(&format!(
            "{}: measuring CPUs {} for {} s ...",
            phase.name(),
            opts.cpus,
            opts.duration_s
        ));
        let t0 = Instant::now();
        let mut guard = None;
        let mut shield_report = None;
        if phase == Phase::Shielded {
            let req = Request {
                cpus: opts.cpus.clone(),
                ..Request::default()
            };
            // `on` rolls itself back on failure; from here the guard owns it.
            shield_report = Some(shield::on(sys, &req, false, ctx.stop)?);
            guard = Some(ShieldGuard { sys, armed: true });
        }
        let load_cpus = match phase {
            Phase::Idle => None,
            Phase::Unshielded => Some(pre.online.clone()),
            Phase::Shielded => Some(housekeeping.clone()),
        };
        let load = match load_cpus {
            Some(cpus) if opts.load != Scenario::None => {
                let cpus = usable_cpus(&cpus);
                if cpus.is_empty() {
                    return Err(CompareError::Refused(format!(
                        "no CPU for the {} load in the {} phase: this process may not run there",
                        opts.load,
                        phase.name()
                    )));
                }
                Some(Load::start(opts.load, &cpus, &ctx.driver)?)
            }
            _ => None,
        };
        let load_report = load.as_ref().map(|l| l.report().clone());
        let argv = measure_command(&ctx.exe, root.as_deref(), phase, opts, realtime);
        let measured = run_child(&argv, phase.name(), ctx.stop);
        // Stop the load before looking at the result: no strays either way.
        let load_stop = match load {
            Some(l) => Some(l.stop()?),
            None => None,
        };
        let unshield = match guard.take() {
            Some(g) => Some(g.off()?),
            None => None,
        };
        let json = measured?;
        let m = parse_measurement(phase.name(), &json, &opts.thresholds_us).map_err(|reason| {
            CompareError::Measure {
                phase: phase.name(),
                reason,
            }
        })?;
        phases.push(PhaseRecord {
            phase: phase.name(),
            command: argv,
            load: load_report,
            load_stop,
            shield: shield_report,
            unshield,
            elapsed_s: t0.elapsed().as_secs_f64(),
            measured: m,
            measurement: json,
        });
    }
    let summary = assemble(&phases, &opts.thresholds_us);
    let ratios = summary.ratios();
    // The machine the phases measured on, as their measurement saw it (the
    // measuring children run on this machine's CPUs, also in a test whose
    // shield is a fixture); read here only when no phase ran.
    let machine = match phases.first() {
        Some(p) => p.measurement.machine.clone(),
        None => Machine::read(sys),
    };
    Ok(Results {
        schema_version: SCHEMA_VERSION,
        tool: Tool::this(),
        started_unix_s,
        interrupted: ctx.stop.load(Relaxed),
        options: opts.clone(),
        housekeeping,
        load_driver: ctx.driver.name().to_string(),
        virtualised_note: virtualised_note(machine.virtualised),
        machine,
        phases,
        summary,
        ratios,
    })
}

/// What the report says about virtualisation: the note on max samples for
/// a virtual machine, a hedged one when unknown, nothing on bare metal.
pub fn virtualised_note(virtualised: Option<bool>) -> Option<&'static str> {
    match virtualised {
        Some(true) => Some(report::html::VIRTUALISED_NOTE),
        None => Some(report::html::VIRTUALISATION_UNKNOWN_NOTE),
        Some(false) => None,
    }
}

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
    s.push_str(&r.summary.render_text());
    if let Some(note) = r.virtualised_note {
        s.push_str(&format!("\nNote: {note}\n"));
    }
    if r.interrupted {
        s.push_str("\nInterrupted: later phases are missing.\n");
    }
    s
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
pub fn write_files(r: &Results, dir: &Path) -> Result<(), CompareError> {
    let io = |what: String| move |source| CompareError::Io { what, source };
    std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
    let json = serde_json::to_string_pretty(r).map_err(|e| CompareError::Io {
        what: "serialising results".into(),
        source: e.into(),
    })?;
    let p = dir.join("results.json");
    std::fs::write(&p, json + "\n").map_err(io(format!("writing {}", p.display())))?;
    let p = dir.join("summary.txt");
    std::fs::write(&p, summary_text(r)).map_err(io(format!("writing {}", p.display())))?;
    let curves: Vec<Curve> = r.phases.iter().map(|p| p.measured.curve.clone()).collect();
    let opts = PlotOptions {
        title: plot_title(r),
        thresholds_us: r.options.thresholds_us.clone(),
        ..PlotOptions::default()
    };
    report::write_svg(&dir.join("histogram.svg"), &curves, &opts)?;
    report::write_png(&dir.join("histogram.png"), &curves, &opts)?;
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
    let html = report::render_html(&HtmlReport {
        title: format!("cpushield compare: CPUs {}", r.options.cpus),
        summary: r.summary.clone(),
        svg: report::svg_string(&curves, &opts)?,
        machine: vec![
            ("summary".into(), m.one_line()),
            kv("kernel", &m.kernel_release),
            kv("CPU model", &m.cpu_model),
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
                notes.push(report::html::VIRTUALISATION_UNKNOWN_NOTE.to_string());
            }
            if r.interrupted {
                notes.push("The run was interrupted: later phases are missing.".into());
            }
            notes
        },
        files: FILES
            .iter()
            .filter(|f| **f != "report.html")
            .map(|f| f.to_string())
            .collect(),
    });
    let p = dir.join("report.html");
    std::fs::write(&p, html).map_err(io(format!("writing {}", p.display())))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::histogram::Histogram;
    use crate::measure::testing::{cpu, sample_run};

    fn cpus(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    fn opts(c: &str) -> Options {
        Options {
            cpus: cpus(c),
            load: Scenario::Cpu,
            probe: ProbeKind::Timer,
            duration_s: 1.0,
            thresholds_us: vec![100.0, 1000.0],
            phases: Phase::ALL.to_vec(),
            out: PathBuf::from("x"),
        }
    }

    fn pre(privileged: bool, shield_active: bool) -> Preconditions {
        Preconditions {
            online: cpus("0-3"),
            privileged,
            shield_active,
        }
    }

    fn refused(o: &Options, p: &Preconditions) -> String {
        match check(o, p) {
            Err(CompareError::Refused(m)) => m,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn check_accepts_and_returns_housekeeping() {
        assert_eq!(check(&opts("2-3"), &pre(true, false)).unwrap(), cpus("0-1"));
    }

    #[test]
    fn check_refusals() {
        assert!(refused(&opts("0-3"), &pre(true, false)).contains("no housekeeping CPU"));
        assert!(refused(&opts("4"), &pre(true, false)).contains("not online"));
        assert!(refused(&opts("2"), &pre(true, true)).contains("cpushield off"));
        assert!(refused(&opts("2"), &pre(false, false)).contains("root"));
        let mut o = opts("2");
        o.duration_s = 0.0;
        assert!(refused(&o, &pre(true, false)).contains("--duration"));
        o.duration_s = f64::NAN;
        assert!(refused(&o, &pre(true, false)).contains("--duration"));
        let mut o = opts("2");
        o.thresholds_us = vec![-1.0];
        assert!(refused(&o, &pre(true, false)).contains("--threshold"));
        let mut o = opts("2");
        o.phases.clear();
        assert!(refused(&o, &pre(true, false)).contains("--phases"));
    }

    #[test]
    fn unprivileged_may_skip_the_shielded_phase() {
        let mut o = opts("2");
        o.phases = vec![Phase::Idle, Phase::Unshielded];
        assert!(check(&o, &pre(false, false)).is_ok());
    }

    /// What `cpushield measure --json` prints for a timer run on CPU 2
    /// with these samples (ns, 1 µs buckets), read back as compare reads it.
    fn measured(values_ns: &[u64]) -> Measurement {
        let mut run = sample_run();
        let mut h = Histogram::new(10, 1000);
        for (i, &v) in values_ns.iter().enumerate() {
            h.record(i as u64, v);
        }
        run.probes[0].cpus = vec![cpu(2, h.clone())];
        run.probes[0].all = h;
        let printed = crate::measure::report::json(&run);
        serde_json::from_str(&printed).expect("measure's JSON reads back as its own type")
    }

    #[test]
    fn parse_sums_cpus_and_takes_exact_stats() {
        // sample_run: CPU 1 at 1.4, 2.4, 2.4, 3.4 and 9.4 µs (past the 4
        // buckets), CPU 2 at 0.4 and 1.4 µs.
        let printed = crate::measure::report::json(&sample_run());
        let back: Measurement = serde_json::from_str(&printed).unwrap();
        let m = parse_measurement("idle", &back, &[2.0]).unwrap();
        assert_eq!(m.curve.counts, vec![1, 2, 2, 1]);
        assert_eq!(m.curve.overflow, 1);
        assert_eq!(m.curve.bucket_width_us, 1.0);
        assert_eq!(m.stats.samples, 7);
        assert_eq!(m.stats.min_us, Some(0.4));
        assert_eq!(m.stats.max_us, Some(9.4));
        assert_eq!(m.stats.over, vec![4]);
        assert_eq!(m.per_cpu.iter().map(|c| c.cpu).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(m.per_cpu[0].interrupts[0].source, "LOC");
    }

    #[test]
    fn parse_rejects_skipped_probe() {
        let mut run = sample_run();
        run.probes[0].status = crate::measure::driver::Status::Skipped("no RTC".into());
        let m = Measurement::of(&run);
        assert!(parse_measurement("idle", &m, &[100.0])
            .unwrap_err()
            .contains("no RTC"));
        let mut none = m.clone();
        none.results.clear();
        assert!(parse_measurement("idle", &none, &[100.0]).is_err());
    }

    fn record(phase: Phase, max_ns: u64) -> PhaseRecord {
        let m = measured(&[1000, 1500, max_ns]);
        PhaseRecord {
            phase: phase.name(),
            command: vec!["cpushield".into(), "measure".into()],
            load: None,
            load_stop: None,
            shield: None,
            unshield: None,
            elapsed_s: 1.0,
            measured: parse_measurement(phase.name(), &m, &[2.0]).unwrap(),
            measurement: m,
        }
    }

    #[test]
    fn assemble_gives_rows_in_order_and_ratios() {
        let phases = vec![
            record(Phase::Idle, 2000),
            record(Phase::Unshielded, 8000),
            record(Phase::Shielded, 4000),
        ];
        let t = assemble(&phases, &[2.0]);
        let names: Vec<&str> = t.rows.iter().map(|r| r.phase.as_str()).collect();
        assert_eq!(names, ["idle", "unshielded", "shielded"]);
        let r = t.ratios();
        assert_eq!(r[0].metric, "max");
        assert_eq!(r[0].unshielded_over_shielded.to_string(), "2.00×");
        assert_eq!(r[0].shielded_over_idle.to_string(), "2.00×");
        let text = t.render_text();
        assert!(text.contains("unshielded/shielded"), "{text}");
    }

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

    fn full_results(virtualised: Option<bool>, note: bool) -> Results {
        let phases = vec![
            record(Phase::Idle, 2000),
            record(Phase::Unshielded, 8000),
            record(Phase::Shielded, 4000),
        ];
        let summary = assemble(&phases, &[2.0]);
        let mut machine = Machine::read(&Sys::at("/nonexistent-root"));
        machine.virtualised = virtualised;
        Results {
            schema_version: SCHEMA_VERSION,
            tool: Tool::this(),
            started_unix_s: 0.0,
            interrupted: false,
            options: opts("2"),
            housekeeping: cpus("0-1"),
            load_driver: "builtin".into(),
            machine,
            virtualised_note: note.then_some(report::html::VIRTUALISED_NOTE),
            phases,
            ratios: summary.ratios(),
            summary,
        }
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

        assert_eq!(
            virtualised_note(None),
            Some(report::html::VIRTUALISATION_UNKNOWN_NOTE)
        );
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

    #[test]
    fn shielded_command_enters_the_shield() {
        let o = opts("2");
        let exe = Path::new("/bin/cpushield");
        let idle = measure_command(exe, None, Phase::Idle, &o, true);
        assert_eq!(idle[1], "measure");
        assert!(!idle.contains(&"--no-rt".to_string()));
        // 100 ms of 1 µs buckets, or more when a threshold lies beyond
        let buckets = |argv: &[String]| {
            let i = argv.iter().position(|a| a == "--buckets").unwrap();
            argv[i + 1].clone()
        };
        assert_eq!(buckets(&idle), "100000");
        let mut far = o.clone();
        far.thresholds_us = vec![100.0, 250_000.0];
        assert_eq!(
            buckets(&measure_command(exe, None, Phase::Idle, &far, true)),
            "250001"
        );
        let sh = measure_command(exe, Some(Path::new("/fx")), Phase::Shielded, &o, false);
        assert_eq!(&sh[1..6], ["--root", "/fx", "run", "--", "/bin/cpushield"]);
        assert!(sh.contains(&"--no-rt".to_string()));
    }
}
