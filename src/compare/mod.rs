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
//! `results.json` and reduced to a curve and a table row ([`results`]).
//!
//! The flow is `validate ([check]) → phases ([run], children in
//! [`child`]) → assemble ([`results::assemble`]) → files
//! (`report::compare::write_files`)`; validating and assembling are pure.

pub mod child;
pub mod results;
pub mod summary;
#[cfg(test)]
pub(crate) mod testing;
pub mod watch;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Instant, SystemTime};

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;
use crate::load::{Driver, Load, Scenario};
use crate::measure::machine::Machine;
use crate::measure::results::Tool;
use crate::measure::ProbeKind;
use crate::shield::{self, request::Request, OffReport, OnReport};
use crate::sys::Sys;
use child::{measure_command, run_child};
use results::{
    assemble, parse_measurement, virtualised_note, PhaseRecord, Results, SCHEMA_VERSION,
};
use summary::{AFFINITY, CACHE_SHARE, IDLE, SHIELDED, UNSHIELDED};

/// One phase of the experiment.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// No load: the limit this machine can reach.
    Idle,
    /// Load on all online CPUs, no shield.
    Unshielded,
    /// Load on the housekeeping CPUs by plain affinity, no shield: what
    /// `taskset` alone gives, the fair baseline for what the shield adds.
    Affinity,
    /// Shield on, load on the housekeeping CPUs, measurement inside the shield.
    Shielded,
    /// As shielded, the shield with its own share of the L3 cache
    /// (`--cache-ways`): what the share adds.
    CacheShare,
}

impl Phase {
    /// All phases in the order they run.
    pub const ALL: [Phase; 4] = [
        Phase::Idle,
        Phase::Unshielded,
        Phase::Affinity,
        Phase::Shielded,
    ];

    /// Every phase a results file may hold: [`Phase::ALL`] and the
    /// cache-share phase of `--cache-ways`.
    pub const EVERY: [Phase; 5] = [
        Phase::Idle,
        Phase::Unshielded,
        Phase::Affinity,
        Phase::Shielded,
        Phase::CacheShare,
    ];

    /// `idle`, `unshielded`, `affinity`, `shielded` (the labels of the
    /// table and plot).
    pub fn name(self) -> &'static str {
        match self {
            Phase::Idle => IDLE,
            Phase::Unshielded => UNSHIELDED,
            Phase::Affinity => AFFINITY,
            Phase::Shielded => SHIELDED,
            Phase::CacheShare => CACHE_SHARE,
        }
    }

    /// Whether the phase measures inside a shield of its own.
    pub fn shields(self) -> bool {
        matches!(self, Phase::Shielded | Phase::CacheShare)
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
    /// Reading the machine failed.
    #[error(transparent)]
    Sys(#[from] crate::sys::SysError),
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
    /// `--explain`: explain samples slower than this many µs.
    pub explain_us: Option<u64>,
    /// The cache probe's options, passed to each phase's `measure`.
    pub cache: CacheOptions,
    /// `--cache-ways`: the cache-share phase's ways of each L3.
    #[serde(default)]
    pub cache_ways: Option<u32>,
    /// Look at the shield, the guard and the load every this many seconds
    /// while a phase measures (`certify`; `None`: never).
    #[serde(default)]
    pub watch_every_s: Option<f64>,
    /// Each phase's measurement writes `checkpoint-PHASE.json` in `out`
    /// every minute (`certify`: a crash loses at most a minute).
    #[serde(default)]
    pub checkpoint: bool,
    /// The shield of the shielded phase (`certify --config`: a config's);
    /// `None`: a plain shield of `cpus`.
    #[serde(default)]
    pub shield: Option<Request>,
    /// The active shield's CPUs, when the shielded phase measures inside a
    /// shield that was there before (`certify` of an applied shield): it
    /// is neither made nor taken down, and the load runs outside it.
    #[serde(default)]
    pub existing_shield: Option<CpuSet>,
    /// The probe matched to the workload (`certify --interval`,
    /// `--priority`, `--dma-latency`); each `None` keeps measure's default.
    #[serde(default)]
    pub timing: ProbeTiming,
}

/// How the measuring threads run, where the workload asks otherwise than
/// measure's defaults.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeTiming {
    /// The probe's interval (period), µs.
    pub interval_us: Option<u64>,
    /// SCHED_FIFO priority of the measuring threads, 1 to 99.
    pub priority: Option<i32>,
    /// `/dev/cpu_dma_latency` held at this many µs during the run.
    pub dma_latency_us: Option<u32>,
}

impl Options {
    /// The shield of the shielded phase: the one asked for, else a plain
    /// shield of the measured CPUs.
    pub fn shield_request(&self) -> Request {
        self.shield.clone().unwrap_or_else(|| Request {
            cpus: self.cpus.clone(),
            ..Request::default()
        })
    }

    /// The shield of `phase`: the shielded phase's, with the cache share
    /// for [`Phase::CacheShare`].
    pub fn request_of(&self, phase: Phase) -> Request {
        let req = self.shield_request();
        match phase {
            Phase::CacheShare => {
                let mut options = req.declared::<crate::shield::Options>().unwrap_or_default();
                options.resctrl.cache_ways = self.cache_ways.or(options.resctrl.cache_ways);
                req.with_declared(&options)
            }
            _ => req,
        }
    }
}

/// The cache probe's options of an experiment (`measure`'s own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CacheOptions {
    /// `--cache-gap`: ms each working set is left idle before its timed
    /// loads.
    #[serde(default)]
    pub gap_ms: Option<u64>,
    /// `--working-set`: the one working set walked, bytes.
    #[serde(default)]
    pub working_set: Option<u64>,
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
            privileged: sys.privileged(),
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
    let housekeeping = pre
        .online
        .difference(opts.existing_shield.as_ref().unwrap_or(&opts.cpus));
    if housekeeping.is_empty() {
        return refuse(format!(
            "--cpus {} leaves no housekeeping CPU (online: {}): keep at least one CPU for the rest of the system and the load",
            opts.cpus, pre.online
        ));
    }
    if opts.probe == ProbeKind::Pci {
        return refuse(
            "--probe pci: compare has no device to read; time a PCI function with: cpushield measure --probe pci --device BDF".into(),
        );
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
    match (&opts.existing_shield, pre.shield_active) {
        (None, true) => {
            return refuse(
                "a shield is already active: the phases would not measure what they claim (run `cpushield off` first)".into(),
            )
        }
        (Some(_), false) => return refuse("no shield is active to measure inside".into()),
        (Some(s), true) if !opts.cpus.is_subset(s) || opts.phases != [Phase::Shielded] => {
            return refuse(format!(
                "--cpus {}: inside the active shield (CPUs {s}) only its own CPUs are measured, in the shielded phase alone",
                opts.cpus
            ))
        }
        _ => {}
    }
    if opts.phases.iter().any(|p| p.shields()) && !pre.privileged {
        return refuse(
            "the shielded phase changes the whole system and must run as root (try: sudo cpushield compare ..., or --phases idle,unshielded)".into(),
        );
    }
    match (opts.phases.contains(&Phase::CacheShare), opts.cache_ways) {
        (true, None) => {
            return refuse("the cache-share phase needs --cache-ways (the share's ways)".into())
        }
        (false, Some(ways)) => {
            return refuse(format!(
                "--cache-ways {ways}: add the cache-share phase to --phases"
            ))
        }
        _ => {}
    }
    Ok(housekeeping)
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

/// One phase as `compare` would run it.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedPhase {
    /// The phase.
    pub phase: Phase,
    /// Its load, for people: `none`, or the scenario and its CPUs.
    pub load: String,
    /// The measuring command line.
    pub command: Vec<String>,
}

/// What `compare --dry-run` finds: the phases as they would run and the
/// plan of the shield of the shielded phase. Nothing is started.
#[derive(Debug, Clone, Serialize)]
pub struct DryRun {
    /// Measured CPUs.
    pub cpus: CpuSet,
    /// Where the load of the shielded phase would run.
    pub housekeeping: CpuSet,
    /// The phases, in order.
    pub phases: Vec<PlannedPhase>,
    /// The shield plan (`on --dry-run`), when the shielded phase is asked for.
    pub shield: Option<OnReport>,
    /// Where the report would go.
    pub out: PathBuf,
}

/// Checks `opts` against the machine behind `sys` and plans the run; `exe`
/// is this cpushield, which the phases would run. Changes nothing.
pub fn dry_run(sys: &Sys, exe: &Path, opts: &Options) -> Result<DryRun, CompareError> {
    let housekeeping = check(opts, &Preconditions::read(sys)?)?;
    let phases = opts
        .phases
        .iter()
        .map(|&phase| PlannedPhase {
            phase,
            load: match phase {
                Phase::Idle => "none".to_string(),
                _ if opts.load == Scenario::None => "none".to_string(),
                Phase::Unshielded => format!("{} on all online CPUs", opts.load),
                Phase::Affinity => format!("{} on CPUs {housekeeping}, no shield", opts.load),
                Phase::Shielded | Phase::CacheShare => {
                    format!("{} on CPUs {housekeeping}", opts.load)
                }
            },
            command: measure_command(exe, sys.root_arg(), phase, opts, true),
        })
        .collect();
    let shield = match opts.existing_shield {
        None => shield_plans(sys, opts)?,
        Some(_) => None,
    };
    Ok(DryRun {
        cpus: opts.cpus.clone(),
        housekeeping,
        phases,
        shield,
        out: opts.out.clone(),
    })
}

/// The shielded phases' shields as `on --dry-run` plans them (the last
/// one's), each checked against the machine: a share this machine cannot
/// have is refused before any phase starts.
fn shield_plans(sys: &Sys, opts: &Options) -> Result<Option<OnReport>, CompareError> {
    let mut last = None;
    for &phase in opts.phases.iter().filter(|p| p.shields()) {
        let plan = shield::on(sys, &opts.request_of(phase), true, &AtomicBool::new(false));
        last = Some(plan.map_err(|e| match phase {
            Phase::CacheShare => CompareError::Refused(format!("the cache-share phase: {e}")),
            _ => CompareError::Shield(e),
        })?);
    }
    Ok(last)
}

/// Starts the load of `phase`: none while idle, on every online CPU
/// unshielded, on the housekeeping CPUs by affinity and shielded (none
/// with `--load none`).
fn start_load(
    ctx: &Context<'_>,
    opts: &Options,
    phase: Phase,
    online: &CpuSet,
    housekeeping: &CpuSet,
) -> Result<Option<Load>, CompareError> {
    let cpus = match phase {
        Phase::Idle => return Ok(None),
        _ if opts.load == Scenario::None => return Ok(None),
        Phase::Unshielded => online,
        Phase::Affinity | Phase::Shielded | Phase::CacheShare => housekeeping,
    };
    let cpus = usable_cpus(cpus);
    if cpus.is_empty() {
        return Err(CompareError::Refused(format!(
            "no CPU for the {} load in the {} phase: this process may not run there",
            opts.load,
            phase.name()
        )));
    }
    Ok(Some(Load::start(opts.load, &cpus, &ctx.driver)?))
}

/// Makes the output directory before the first phase when the phases
/// checkpoint there.
fn checkpoint_dir(opts: &Options) -> Result<(), CompareError> {
    if !opts.checkpoint {
        return Ok(());
    }
    std::fs::create_dir_all(&opts.out).map_err(|e| {
        CompareError::Refused(format!(
            "output directory {}: cannot make it ({e})",
            opts.out.display()
        ))
    })
}

/// Runs the phases of `opts` (already [`check`]ed) and collects the results.
/// The shield is undone and every load stopped before this returns, also on
/// error; a stop request ends the run after the current phase.
pub fn run(ctx: &mut Context<'_>, opts: &Options) -> Result<Results, CompareError> {
    let sys = ctx.sys;
    let pre = Preconditions::read(sys)?;
    let housekeeping = check(opts, &pre)?;
    if opts.phases.contains(&Phase::CacheShare) {
        shield_plans(sys, opts)?;
    }
    let realtime = nix::unistd::geteuid().is_root();
    let started_unix_s = now_unix();
    checkpoint_dir(opts)?;
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
        if phase.shields() && opts.existing_shield.is_none() {
            // `on` rolls itself back on failure; from here the guard owns it.
            shield_report = Some(shield::on(sys, &opts.request_of(phase), false, ctx.stop)?);
            guard = Some(ShieldGuard { sys, armed: true });
        }
        let load = start_load(ctx, opts, phase, &pre.online, &housekeeping)?;
        let load_report = load.as_ref().map(|l| l.report().clone());
        let argv = measure_command(&ctx.exe, sys.root_arg(), phase, opts, realtime);
        let mut looks = Vec::new();
        let mut schedule = watch::Schedule::every(opts.watch_every_s);
        let mut tick = || {
            let at = t0.elapsed().as_secs_f64();
            if schedule.due(at) {
                looks.push(watch::look(sys, at, phase.shields(), load.as_ref()));
            }
        };
        let measured = run_child(&argv, phase.name(), ctx.stop, &housekeeping, &mut tick);
        // Stop the load before looking at the result: no strays either way.
        let load_stop = load.map(Load::stop).transpose()?;
        let unshield = guard.take().map(ShieldGuard::off).transpose()?;
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
            watch: looks,
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
        balancer_note: results::balancer_note(&phases, machine.boot_params.nohz_full.as_deref()),
        machine,
        phases,
        summary,
        ratios,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use testing::{cpus, opts};

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
}
