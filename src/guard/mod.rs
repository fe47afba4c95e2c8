//! The starvation guard: keeps the kernel work of shielded CPUs alive when
//! a real-time task there never sleeps.
//!
//! Work the kernel queues on every CPU (vmstat refresh, LRU drains,
//! workqueue flushes, RCU callbacks, PREEMPT_RT's timer and RCU threads)
//! waits forever behind a SCHED_FIFO busy loop unless something gives it
//! CPU time ([`kernel`] says when the kernel itself does not), and whatever
//! waits for that work (a sysctl write, a service start, `sync`) hangs with
//! it. The guard runs on the housekeeping CPUs, scans the threads of the
//! shielded CPUs ([`watch`]), and gives a thread that has been runnable
//! without running for the threshold a bounded SCHED_DEADLINE reservation
//! (a few µs every period, for a short while), then puts its policy back.
//! Where the kernel refuses SCHED_DEADLINE for a thread bound to one CPU
//! (it does while RT throttling is on), the boost is SCHED_FIFO above the
//! loop, for the runtime of each period, taken back by the guard itself.
//!
//! Its state, counters and the boosts in flight are in [`STATE_FILE`]
//! (rewritten atomically), so that `status` and `metrics` report them and a
//! guard that crashed or was killed has its boosts undone by the next one,
//! or by `off`.

pub mod daemon;
pub mod kernel;
pub mod stalld;
pub mod watch;

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;
use crate::sys::procfs;
use crate::sys::syscalls::SchedAttr;
use crate::sys::Sys;

pub use daemon::run;

/// The guard's state, relative to the root.
pub const STATE_FILE: &str = "run/cpushield/guard.json";

/// The guard's settings: when a thread counts as starving and how much
/// CPU time a boost gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    /// Runnable without running this long: starving, ms.
    pub threshold_ms: u64,
    /// CPU time a boosted thread gets per period, µs.
    pub runtime_us: u64,
    /// The boost's period, µs.
    pub period_us: u64,
    /// How long a boost lasts, ms.
    pub duration_ms: u64,
    /// What boosts: stalld or cpushield's own loop.
    #[serde(default)]
    pub engine: Engine,
}

/// What boosts starving threads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    /// stalld where it is installed ([`stalld::find`]), else cpushield's own.
    #[default]
    Auto,
    /// cpushield's own loop ([`daemon`]).
    Cpushield,
    /// stalld, run by the guard process ([`stalld`]); the guard's own loop
    /// boosts while stalld does not run.
    Stalld,
}

impl std::str::FromStr for Engine {
    type Err = String;
    fn from_str(s: &str) -> Result<Engine, String> {
        match s {
            "auto" => Ok(Engine::Auto),
            "cpushield" => Ok(Engine::Cpushield),
            "stalld" => Ok(Engine::Stalld),
            _ => Err(format!(
                "guard engine {:?} is not one (valid: auto, cpushield, stalld)",
                s.chars().take(40).collect::<String>()
            )),
        }
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Engine::Auto => "auto",
            Engine::Cpushield => "cpushield",
            Engine::Stalld => "stalld",
        })
    }
}

impl Default for Settings {
    /// 1 s of starvation; then 50 µs every 100 ms for 1 s: at most 500 µs
    /// taken from the real-time task per boost, 0.05 % of its CPU while it lasts.
    fn default() -> Settings {
        Settings {
            threshold_ms: 1_000,
            runtime_us: 50,
            period_us: 100_000,
            duration_ms: 1_000,
            engine: Engine::Auto,
        }
    }
}

/// Settings out of their range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("guard setting {name}={value} is out of range (valid: {valid})")]
pub struct SettingsError {
    /// The setting.
    pub name: &'static str,
    /// Its value.
    pub value: u64,
    /// What would be valid.
    pub valid: &'static str,
}

impl Settings {
    /// Checks each setting against what the kernel and the guard's loop
    /// accept: SCHED_DEADLINE needs a runtime of at least 1 µs that fits
    /// its period, and a boost must last at least one period.
    pub fn check(&self) -> Result<(), SettingsError> {
        let bad = |name, value, valid| Err(SettingsError { name, value, valid });
        if !(100..=3_600_000).contains(&self.threshold_ms) {
            return bad(
                "threshold",
                self.threshold_ms,
                "100 ms to 3600 s (--guard-threshold, in ms)",
            );
        }
        if !(1..=1_000_000).contains(&self.runtime_us) || self.runtime_us * 2 > self.period_us {
            return bad(
                "runtime",
                self.runtime_us,
                "1 µs to 1 s, at most half the period (--guard-runtime, in µs)",
            );
        }
        if !(1_000..=10_000_000).contains(&self.period_us) {
            return bad(
                "period",
                self.period_us,
                "1 ms to 10 s (--guard-period, in µs)",
            );
        }
        if self.duration_ms * 1000 < self.period_us || self.duration_ms > 60_000 {
            return bad(
                "duration",
                self.duration_ms,
                "one period to 60 s (--guard-duration, in ms)",
            );
        }
        Ok(())
    }

    /// The threshold.
    pub fn threshold(&self) -> Duration {
        Duration::from_millis(self.threshold_ms)
    }

    /// The command-line arguments that give a guard these settings.
    pub fn args(&self) -> Vec<String> {
        let mut out = vec![
            format!("--guard-threshold={}", self.threshold_ms),
            format!("--guard-runtime={}", self.runtime_us),
            format!("--guard-period={}", self.period_us),
            format!("--guard-duration={}", self.duration_ms),
        ];
        if self.engine != Engine::Auto {
            out.push(format!("--guard-engine={}", self.engine));
        }
        out
    }
}

/// Whether a shield comes with the guard.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardMode {
    /// Where kernel work can starve ([`kernel::KernelWork::starvable`]).
    #[default]
    Auto,
    /// Always.
    On,
    /// Never (the shield warns where kernel work can starve).
    Off,
}

impl std::str::FromStr for GuardMode {
    type Err = String;
    fn from_str(s: &str) -> Result<GuardMode, String> {
        match s {
            "auto" => Ok(GuardMode::Auto),
            "on" => Ok(GuardMode::On),
            "off" => Ok(GuardMode::Off),
            _ => Err(format!(
                "guard {:?} is not a mode (valid: auto, on, off)",
                s.chars().take(40).collect::<String>()
            )),
        }
    }
}

impl std::fmt::Display for GuardMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            GuardMode::Auto => "auto",
            GuardMode::On => "on",
            GuardMode::Off => "off",
        })
    }
}

/// The starvation guard's settings, shared by `on` and `guard`.
#[derive(clap::Args, Debug, Clone, Copy, PartialEq, Eq)]
pub struct SettingsArgs {
    /// A thread runnable this long without running is starving (`1s`,
    /// `500ms`; a bare number is in ms).
    #[arg(long, value_name = "DURATION", default_value_t = Settings::default().threshold_ms, value_parser = millis)]
    pub guard_threshold: u64,
    /// CPU time a boost gives per period (`20us`; a bare number is in µs):
    /// each is an interruption of the real-time task.
    #[arg(long, value_name = "DURATION", default_value_t = Settings::default().runtime_us, value_parser = micros)]
    pub guard_runtime: u64,
    /// The boost's period (`1ms`; a bare number is in µs).
    #[arg(long, value_name = "DURATION", default_value_t = Settings::default().period_us, value_parser = micros)]
    pub guard_period: u64,
    /// How long a boost lasts (`3s`; a bare number is in ms).
    #[arg(long, value_name = "DURATION", default_value_t = Settings::default().duration_ms, value_parser = millis)]
    pub guard_duration: u64,
    /// What boosts: `auto` takes stalld where it is installed and RT
    /// throttling is off already or turned off by `--tune=rt-throttling`, else the
    /// guard's own loop; `cpushield` always its own; `stalld` stalld,
    /// refused where it is not installed, and it turns RT throttling off
    /// (stalld runs only without it). stalld gets the settings in its own
    /// units and ranges (whole seconds; a period of 200 ms to 4 s).
    #[arg(long, value_name = "ENGINE", default_value = "auto", value_parser = clap::value_parser!(Engine))]
    pub guard_engine: Engine,
}

impl SettingsArgs {
    /// The settings.
    pub fn settings(&self) -> Settings {
        Settings {
            threshold_ms: self.guard_threshold,
            runtime_us: self.guard_runtime,
            period_us: self.guard_period,
            duration_ms: self.guard_duration,
            engine: self.guard_engine,
        }
    }
}

impl Default for SettingsArgs {
    fn default() -> Self {
        Settings::default().into()
    }
}

impl From<Settings> for SettingsArgs {
    fn from(s: Settings) -> Self {
        SettingsArgs {
            guard_threshold: s.threshold_ms,
            guard_runtime: s.runtime_us,
            guard_period: s.period_us,
            guard_duration: s.duration_ms,
            guard_engine: s.engine,
        }
    }
}

/// A duration option kept in ms (a bare number is ms).
fn millis(s: &str) -> Result<u64, String> {
    crate::input::duration_in(s, crate::input::TimeUnit::Millis)
}

/// A duration option kept in µs (a bare number is µs).
fn micros(s: &str) -> Result<u64, String> {
    crate::input::duration_in(s, crate::input::TimeUnit::Micros)
}

/// What a shield asks of the guard.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuardRequest {
    /// Whether it comes with the shield.
    #[serde(default)]
    pub mode: GuardMode,
    /// Its settings.
    #[serde(default)]
    pub settings: Settings,
}

/// How a thread was boosted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BoostKind {
    /// SCHED_DEADLINE: runtime every period, enforced by the kernel.
    Deadline,
    /// SCHED_FIFO above the loop for the runtime of each period, taken
    /// back by the guard (the kernel refused SCHED_DEADLINE).
    Fifo,
}

/// A boost in flight: what the thread had, so that it can be put back
/// even by another guard or by `off`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActiveBoost {
    /// Thread id.
    pub tid: i32,
    /// Its start time: a thread id reused meanwhile is not touched.
    pub start_ticks: u64,
    /// `comm`.
    pub name: String,
    /// The CPU it starved on.
    pub cpu: u32,
    /// Its scheduling before the boost.
    pub previous: SchedAttr,
    /// How it is boosted.
    pub kind: BoostKind,
}

/// One finished boost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoostRecord {
    /// Thread id.
    pub tid: i32,
    /// `comm`.
    pub name: String,
    /// The CPU.
    pub cpu: u32,
    /// How long it had waited, ms.
    pub waited_ms: u64,
    /// The CPU time it ran while boosted (taken from the real-time task), µs.
    pub ran_us: u64,
    /// How.
    pub kind: BoostKind,
}

/// What the guard writes to [`STATE_FILE`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct GuardState {
    /// The guard's process id.
    pub pid: i32,
    /// Its start time (clock ticks since boot), which tells it apart from
    /// a later process with the same id.
    pub start_ticks: u64,
    /// The CPUs it watches.
    pub cpus: CpuSet,
    /// Its settings.
    pub settings: Option<Settings>,
    /// When it started, CLOCK_MONOTONIC ns.
    pub started_ns: u64,
    /// When it last wrote this file, CLOCK_MONOTONIC ns.
    pub updated_ns: u64,
    /// Boosts made.
    pub boosts: u64,
    /// Of which SCHED_FIFO.
    pub fifo_boosts: u64,
    /// Boosts the kernel refused (the thread stayed as it was).
    pub failed: u64,
    /// CPU time boosted threads ran, in all, µs.
    pub ran_us: u64,
    /// The longest a single boost ran, µs.
    pub longest_us: u64,
    /// The last boosts, newest last (at most [`RECENT`]).
    pub recent: Vec<BoostRecord>,
    /// Boosts in flight.
    pub active: Vec<ActiveBoost>,
    /// Threads found starving at the last scan.
    pub starving: Vec<watch::Starving>,
    /// Threads the last scan read.
    pub candidates: usize,
    /// How long the last scan took, µs.
    pub scan_us: u64,
    /// The longest a pass of its loop has worked without sleeping, µs.
    pub longest_work_us: u64,
    /// How often it slept longer to keep its own work under half a CPU.
    pub held_back: u64,
    /// stalld, when it is the engine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stalld: Option<stalld::EngineState>,
}

/// How many finished boosts the state keeps.
pub const RECENT: usize = 16;

/// Threads on `cpus` that waited runnable through `window` without
/// running while another thread ran there, seen from the calling (a
/// housekeeping) CPU by two scans `window` apart. The second scan is made
/// only when the first finds a real-time task runnable on `cpus`: without
/// one nothing there can starve, and the answer is at once.
pub fn starving_now(sys: &Sys, cpus: &CpuSet, window: Duration) -> Vec<watch::Starving> {
    let found = daemon::candidates(sys, cpus);
    let scan = || -> Vec<watch::Sample> {
        found
            .iter()
            .filter_map(|c| daemon::sample(sys, c))
            .collect()
    };
    let first = scan();
    let realtime_runnable = first
        .iter()
        .any(|s| s.state == 'R' && matches!(s.policy, 1 | 2));
    if !realtime_runnable {
        return Vec::new();
    }
    let mut w = watch::Watch::default();
    let t0 = crate::sys::syscalls::monotonic_ns();
    w.observe(t0, &first, cpus, 0);
    std::thread::sleep(window);
    let t1 = crate::sys::syscalls::monotonic_ns();
    let window_ns = u64::try_from(window.as_nanos()).unwrap_or(u64::MAX);
    w.observe(t1, &scan(), cpus, window_ns.min(t1 - t0))
}

/// The state file, if there is one that parses.
pub fn read_state(sys: &Sys) -> Option<GuardState> {
    let text = sys.read(STATE_FILE).ok()?;
    serde_json::from_str(&text).ok()
}

/// The name the guard gives its process (`comm`), by which `off` finds a
/// guard whose state file is gone or damaged.
pub const PROCESS_NAME: &str = "cpushield-guard";

/// Guard processes that run now, found by name, as (pid, start time).
pub fn find_running(sys: &Sys) -> Vec<(i32, u64)> {
    procfs::list_pids(sys)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|pid| {
            let stat = sys.read(&format!("proc/{pid}/stat")).ok()?;
            let (name, fields) = procfs::split_stat(&stat)?;
            (name == PROCESS_NAME).then_some((pid, procfs::stat_field(&fields, 22)?))
        })
        .collect()
}

/// Whether the process the state names still runs: same pid, same start time.
pub fn alive(sys: &Sys, state: &GuardState) -> bool {
    state.pid > 0 && procfs::start_ticks(sys, state.pid) == Some(state.start_ticks)
}

/// Puts back the scheduling of every boost in flight that `state` records
/// (a guard that died mid-boost), skipping threads that exited or whose id
/// now names another thread. Returns what it restored and what failed.
pub fn restore_boosts(sys: &Sys, state: &GuardState) -> (usize, Vec<String>) {
    let mut restored = 0;
    let mut failed = Vec::new();
    for b in &state.active {
        if procfs::start_ticks(sys, b.tid) != Some(b.start_ticks) {
            continue;
        }
        match sys.set_sched_attr(b.tid, &b.previous) {
            Ok(()) => restored += 1,
            Err(e) if e.kind == crate::sys::ErrorKind::NotFound => {}
            Err(e) => failed.push(format!("task {} ({}): {}", b.tid, b.name, e.errno_name())),
        }
    }
    (restored, failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_settings_are_valid_and_each_range_is_enforced() {
        assert_eq!(Settings::default().check(), Ok(()));
        let with = |f: fn(&mut Settings)| {
            let mut s = Settings::default();
            f(&mut s);
            s.check().unwrap_err().name
        };
        assert_eq!(with(|s| s.threshold_ms = 10), "threshold");
        assert_eq!(with(|s| s.runtime_us = 0), "runtime");
        assert_eq!(with(|s| s.runtime_us = 60_000), "runtime");
        assert_eq!(with(|s| s.period_us = 500), "period");
        assert_eq!(with(|s| s.duration_ms = 50), "duration");
    }
}
