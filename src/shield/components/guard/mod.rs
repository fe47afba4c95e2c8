//! The starvation guard as a component of the shield ([`crate::guard`]
//! is the guard itself): whether a shield needs it, the step that starts
//! it, how `off` stops it and proves it gone, whether it still holds for
//! `status`, and what `on` says of the shielded CPUs' kernel work.
//!
//! On a systemd host the guard is the transient service [`UNIT`]
//! (`Restart=always`: systemd keeps it alive, and it vanishes at reboot);
//! elsewhere a process of its own, in its own process group. Either way
//! its identity (pid and start time) is in its state file, which is how
//! `off` finds it, stops it and checks that it is gone.

mod notes;
mod undoes;

pub use notes::GuardNote;

use crate::shield::component::{Changing, Component, Draft, InPlace, Looking, Phase, Planning};
use crate::shield::component::{Looks, Undoes};
use crate::shield::parts::{Line, MachineWide, Metric, OwnFacts, PartReport};
use crate::shield::plan::Plan;
use crate::shield::snapshot::Snapshot;
use crate::shield::OnReport;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;
use crate::finding::{Finding, Severity};
use crate::guard::kernel::{KernelWork, Protection, RT_RUNTIME};
use crate::guard::watch::Starving;
use crate::guard::{self, Engine, GuardMode, GuardRequest, GuardState, Settings};
use crate::shield::apply::Refusal;
use crate::shield::change::{Action, Check, Owner, Step, Undo};
use crate::shield::holds::Holds;
use crate::shield::journal::State;
use crate::shield::note::{Note, OwnNote};
use crate::shield::plan_error::PlanError;
use crate::shield::undo::Undone;
use crate::sys::{ErrorKind, Sys, SysError};

/// This component, as it names itself in the journal and in reports.
pub const OWNER: Owner = Owner("guard");

mod options;
pub use options::Options;

/// What `req` asks of the guard (`auto` with the default settings when
/// it asks nothing).
fn asked(req: &crate::shield::request::Request) -> GuardRequest {
    (req.declared::<Options>()).map_or_else(|_| GuardRequest::default(), |o| o.request())
}

/// The guard's transient unit on systemd hosts.
pub const UNIT: &str = "cpushield-guard.service";
/// How long a guard has to show up (its state file) or to go away.
const SETTLE: Duration = Duration::from_secs(5);

/// The guard's own change, journaled as [`Action::Own`] (its tag as
/// journals of version 1 wrote it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Own {
    /// Start the starvation guard on the shielded CPUs (see
    /// [`crate::guard`]); undone by stopping it, proving its process gone
    /// and putting back any boost it left.
    Guard {
        /// The CPUs it watches.
        cpus: CpuSet,
        /// Its settings.
        settings: Settings,
        /// Its transient systemd unit, on systemd hosts.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        unit: Option<String>,
    },
}

/// `action` as the guard's own, when it is.
fn own_of(action: &Action) -> Option<Own> {
    action.own_as::<Own>()
}

/// Whether `steps` start the guard.
pub(in crate::shield) fn planned(steps: &[Step]) -> bool {
    steps.iter().any(|s| own_of(&s.action).is_some())
}

/// The steps that start the guard on `shield`, when `req` and the kernel
/// call for it, and the note saying what protects the kernel work there.
/// With stalld as the engine (named, or `auto` where it is installed and
/// RT throttling is off already or turned off by the user's `--tune`), the
/// plan first makes the changes stalld would make by itself, so that each
/// is journaled: `HRTICK_DL` on before the guard starts, and, when stalld
/// was named, RT throttling off after it (stalld runs only with
/// throttling off; the guard's own loop protects until then). `auto`
/// never turns a safety net off that the user did not name.
pub(in crate::shield) fn plan(
    kernel: &KernelWork,
    req: &GuardRequest,
    rt_runtime_us: Option<i64>,
    shield: &CpuSet,
    systemd: bool,
) -> Result<(Vec<Step>, Vec<GuardNote>), PlanError> {
    let wanted = match req.mode {
        GuardMode::On => true,
        GuardMode::Off => false,
        GuardMode::Auto => kernel.starvable(rt_runtime_us).is_some(),
    };
    let engine = match (req.settings.engine, &kernel.stalld) {
        // One stalld runs already: a second would boost the same threads
        // and each would put back the other's boost as their policy.
        (Engine::Auto | Engine::Stalld, _) if kernel.stalld_running.is_some() => Engine::Cpushield,
        // Named where none is installed: refused whether or not the guard
        // is needed now (a config that names it is wrong on this machine).
        (Engine::Stalld, None) if req.mode != GuardMode::Off => {
            return Err(PlanError::Part {
                option: "--guard-engine",
                message: format!(
                    "--guard-engine stalld: no stalld is installed (looked for /{}); install it, or use --guard-engine auto or cpushield",
                    crate::guard::stalld::PATHS.join(", /")
                ),
            })
        }
        // Named: stalld runs only with RT throttling off, which naming it
        // asks for.
        (Engine::Stalld, Some(_)) => Engine::Stalld,
        // Not named: stalld only where throttling is off already (or the
        // user turns it off, --tune=rt-throttling); a safety net the user
        // did not name stays, and the guard's own loop boosts.
        (Engine::Auto, Some(_)) if rt_runtime_us == Some(-1) => Engine::Stalld,
        _ => Engine::Cpushield,
    };
    let settings = Settings {
        engine,
        ..req.settings
    };
    let mut steps = Vec::new();
    if wanted {
        if let (Engine::Stalld, Some((features, false))) = (engine, &kernel.hrtick_dl) {
            steps.push(Step::fatal(
                OWNER,
                Action::Write {
                    path: features.clone(),
                    value: "HRTICK_DL".into(),
                    check: Check::None,
                    undo: Undo::Value("NO_HRTICK_DL".into()),
                },
            ));
        }
        let guard = Own::Guard {
            cpus: shield.clone(),
            settings,
            unit: systemd.then(|| UNIT.to_string()),
        };
        steps.push(Step::fatal(OWNER, Action::own(OWNER, &guard)));
        if engine == Engine::Stalld && rt_runtime_us != Some(-1) {
            steps.push(Step::fatal(
                OWNER,
                Action::Write {
                    path: RT_RUNTIME.into(),
                    value: "-1".into(),
                    check: Check::Text,
                    undo: Undo::Previous,
                },
            ));
        }
    }
    // Throttling as the shield leaves it, the write just planned included.
    let rt_after = if wanted && engine == Engine::Stalld {
        Some(-1)
    } else {
        rt_runtime_us
    };
    let protection = Protection::of(kernel, rt_after, wanted.then_some(settings));
    let mut notes = vec![GuardNote::KernelWork { protection }];
    if let Some(stalld) = &kernel.stalld_running {
        notes.push(GuardNote::StalldRunning {
            stalld: stalld.clone(),
            covers: stalld.covers(shield),
            guard: wanted,
        });
    }
    Ok((steps, notes))
}

/// The arguments of `cpushield guard` for this shield (with the root of a
/// test build's fixture).
fn args(sys: &Sys, cpus: &CpuSet, settings: &Settings) -> Vec<String> {
    let mut out = vec!["guard".to_string(), "--cpus".into(), cpus.to_string()];
    out.extend(settings.args());
    if let Some(root) = sys.root_arg() {
        out.extend(["--root".into(), root.to_string_lossy().into_owned()]);
    }
    out
}

/// Starts the guard (after stopping one that runs already) and waits for
/// it to show up alive, watching `cpus`: read back, as every change.
pub(in crate::shield) fn start(
    sys: &Sys,
    cpus: &CpuSet,
    settings: &Settings,
    unit: Option<&str>,
) -> Result<(), SysError> {
    if let Some(old) = guard::read_state(sys).filter(|s| guard::alive(sys, s)) {
        stop_process(sys, &old, unit).map_err(|reason| {
            SysError::new(
                "stop",
                format!("the guard (pid {})", old.pid),
                None,
                std::io::Error::other(reason),
            )
        })?;
    }
    let before = guard::read_state(sys).map(|s| (s.pid, s.start_ticks));
    sys.start_guard(&args(sys, cpus, settings), unit)?;
    let t = Instant::now();
    loop {
        if let Some(s) = guard::read_state(sys) {
            if Some((s.pid, s.start_ticks)) != before && guard::alive(sys, &s) && &s.cpus == cpus {
                return Ok(());
            }
        }
        if t.elapsed() > SETTLE {
            return Err(SysError::new(
                "start",
                "the starvation guard",
                None,
                std::io::Error::other(format!(
                    "no guard reported itself alive in /{} within {} s",
                    guard::STATE_FILE,
                    SETTLE.as_secs()
                )),
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Stops the guard `state` names and waits until its process is gone
/// (SIGKILL after [`SETTLE`]); then puts back any boost it left in flight.
fn stop_process(sys: &Sys, state: &GuardState, unit: Option<&str>) -> Result<(), String> {
    match sys.stop_guard(state.pid, unit) {
        Ok(()) => {}
        Err(e) if e.kind == ErrorKind::NotFound => {}
        // A unit systemd no longer knows: the process may still run.
        Err(_) if unit.is_some() => {
            let _ = sys.stop_guard(state.pid, None);
        }
        Err(e) => return Err(e.to_string()),
    }
    let t = Instant::now();
    let mut killed = false;
    while guard::alive(sys, state) {
        if t.elapsed() > SETTLE && !killed {
            let _ = sys.kill_guard(state.pid);
            killed = true;
        } else if t.elapsed() > SETTLE * 2 {
            return Err(format!(
                "pid {} still runs after SIGTERM and SIGKILL",
                state.pid
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // What it wrote last: boosts a killed guard left in flight.
    if let Some(last) = guard::read_state(sys) {
        let (_, failed) = guard::restore_boosts(sys, &last);
        if !failed.is_empty() {
            return Err(format!(
                "stopped, but could not put back the scheduling of {}",
                failed.join(", ")
            ));
        }
    }
    Ok(())
}

/// Undoes the guard's step: stops the guard the state file names, proves
/// its process gone, puts back boosts it left, removes the state file.
/// Without a readable state file, the guard processes are found by name
/// and stopped all the same; boosts they had in flight are then unknown,
/// which is reported.
pub(in crate::shield) fn undo(sys: &Sys, unit: Option<&str>, out: &mut Undone) {
    let Some(state) = guard::read_state(sys) else {
        undo_without_state(sys, unit, out);
        return;
    };
    let result = if guard::alive(sys, &state) {
        stop_process(sys, &state, unit)
    } else {
        let (_, failed) = guard::restore_boosts(sys, &state);
        match failed.is_empty() {
            true => Ok(()),
            false => Err(format!("could not put back {}", failed.join(", "))),
        }
    };
    match result {
        Ok(()) => {
            let _ = sys.remove_config(guard::STATE_FILE, false);
            out.restored += 1;
        }
        Err(reason) => out.failed.push(Refusal {
            target: format!("the starvation guard (pid {})", state.pid),
            reason,
        }),
    }
}

/// Stops the running guard of a shield that no longer asks for one (a
/// change in place with `--guard off`), as `off` would.
pub(in crate::shield) fn stop(sys: &Sys, systemd: bool, out: &mut Undone) {
    undo(sys, systemd.then_some(UNIT), out);
}

fn undo_without_state(sys: &Sys, unit: Option<&str>, out: &mut Undone) {
    let damaged = sys.read(guard::STATE_FILE).is_ok();
    let running = guard::find_running(sys);
    if running.is_empty() && !damaged {
        out.unchanged += 1;
        return;
    }
    let mut failed = Vec::new();
    for (pid, start_ticks) in running {
        let state = GuardState {
            pid,
            start_ticks,
            ..GuardState::default()
        };
        if let Err(reason) = stop_process(sys, &state, unit) {
            failed.push(format!("pid {pid}: {reason}"));
        }
    }
    if damaged {
        failed.push(format!(
            "/{} is damaged: boosts the guard had in flight, if any, are unknown and were not put back",
            guard::STATE_FILE
        ));
        let _ = sys.remove_config(guard::STATE_FILE, false);
    }
    if failed.is_empty() {
        out.restored += 1;
    } else {
        out.failed.push(Refusal {
            target: "the starvation guard".into(),
            reason: failed.join("; "),
        });
    }
}

/// Whether the guard that runs now is the one `cpus` and `settings` ask
/// for (a change in place leaves it alone then). `read` reads a file
/// under the root.
pub(in crate::shield) fn in_place(
    read: &impl Fn(&str) -> Option<String>,
    cpus: &CpuSet,
    settings: &Settings,
) -> bool {
    let Some(state) =
        read(guard::STATE_FILE).and_then(|t| serde_json::from_str::<GuardState>(&t).ok())
    else {
        return false;
    };
    let alive = read(&format!("proc/{}/stat", state.pid))
        .and_then(|stat| crate::sys::procfs::stat_start_ticks(&stat))
        .is_some_and(|t| t == state.start_ticks);
    alive && &state.cpus == cpus && state.settings.is_none_or(|s| &s == settings)
}

/// For `run --fifo` and `--rr`: the warning that nothing protects the
/// shielded CPUs' kernel work (PREEMPT_RT, or RT throttling off on a
/// kernel without the fair server, and no guard running), else `None`.
pub fn unprotected_kernel_work(sys: &Sys) -> Option<Note> {
    let kernel = KernelWork::read(sys);
    let guard = guard::read_state(sys)
        .filter(|s| guard::alive(sys, s))
        .map(|s| s.settings.unwrap_or_default());
    let protection = Protection::of(&kernel, kernel.rt_runtime_us, guard);
    protection
        .is_nothing()
        .then(|| GuardNote::KernelWork { protection }.note())
}

/// What `status` reads back of the guard and of the shielded CPUs'
/// kernel work; `status --json` carries it as the `data` of the part
/// `guard`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Hold {
    /// The shield started a guard.
    pub expected: bool,
    /// Its process runs (pid and start time as its state file says).
    pub alive: bool,
    /// What protects kernel work now.
    pub protection: Option<Protection>,
    /// Its state file: counters, settings, boosts in flight and the last ones.
    pub state: Option<GuardState>,
    /// How long it has run, s.
    pub uptime_s: f64,
    /// Boosts per second over its uptime: the interruptions of the
    /// real-time tasks on the shield.
    pub boosts_per_s: f64,
    /// Threads on the shielded CPUs starving now: the guard's last scan,
    /// or, with no guard running, two scans 1 s apart made by `status`
    /// itself when a real-time task runs there.
    pub starving: Vec<Starving>,
}

/// How long `status` watches for starving threads when no guard does.
const WATCH: Duration = Duration::from_secs(1);

/// Reads back the guard of the shield `state`.
fn read_hold(sys: &Sys, state: &State) -> Hold {
    let kernel = KernelWork::read(sys);
    let guard_state = guard::read_state(sys);
    let alive = guard_state.as_ref().is_some_and(|s| guard::alive(sys, s));
    let running = guard_state.as_ref().filter(|_| alive);
    let settings = running.map(|s| s.settings.unwrap_or_default());
    let uptime_s = running.map_or(0.0, |s| {
        crate::sys::syscalls::monotonic_ns().saturating_sub(s.started_ns) as f64 / 1e9
    });
    let starving = match running {
        Some(s) => s.starving.clone(),
        None if state.complete => guard::starving_now(sys, &state.shield, WATCH),
        None => Vec::new(),
    };
    Hold {
        expected: started(state),
        alive,
        protection: Some(Protection::of(&kernel, kernel.rt_runtime_us, settings)),
        boosts_per_s: match (running, uptime_s > 0.0) {
            (Some(s), true) => s.boosts as f64 / uptime_s,
            _ => 0.0,
        },
        uptime_s,
        starving,
        state: guard_state,
    }
}

impl Holds for Hold {
    fn lost(&self, _state: &State, repair: &str) -> Vec<Finding> {
        let mut out = Vec::new();
        if self.expected && !self.alive {
            out.push(Finding::new(
                "guard",
                Severity::Bad,
                90,
                "the starvation guard the shield started is not running: a real-time task that never sleeps on a shielded CPU can hang the kernel work queued there",
                repair,
            ));
        }
        // A wait the running guard handles (it boosts a thread once the
        // threshold passes, for its duration) is no broken shield; one it
        // did not end by then is.
        let handled_ns = (self.state.as_ref().filter(|_| self.alive)).map(|s| {
            let settings = s.settings.unwrap_or_default();
            (settings.threshold_ms + settings.duration_ms) * 1_000_000
        });
        let unhandled: Vec<Starving> = (self.starving.iter())
            .filter(|s| handled_ns.is_none_or(|limit| s.waited_ns > limit))
            .cloned()
            .collect();
        if !unhandled.is_empty() {
            let names = crate::guard::watch::describe(&unhandled);
            out.push(Finding::new(
                "starving",
                Severity::Bad,
                95,
                format!(
                    "kernel work waits behind a real-time task on the shield, runnable without running: {}",
                    names
                ),
                if self.alive {
                    "the guard did not end their wait within its threshold and a boost; lower --guard-threshold or raise --guard-runtime".to_string()
                } else {
                    "run 'cpushield on' again without --guard=off (it starts the starvation guard), or let the real-time task sleep".to_string()
                },
            ));
        }
        if let Some(Protection::Nothing { .. }) = self.protection {
            out.push(Finding::new(
                "kernel-work",
                Severity::Bad,
                80,
                "nothing protects the shielded CPUs' kernel work (RT throttling is off on a kernel without the fair server, or the kernel is PREEMPT_RT) and no guard runs",
                "run 'cpushield on' again without --guard=off (it starts the starvation guard), or turn RT throttling back on",
            ));
        }
        out
    }
}

impl Hold {
    /// `status`'s lines: what protects the shielded CPUs' kernel work, the
    /// guard's process, its boosts (each an interruption of the real-time
    /// task) and the threads starving now.
    fn lines(&self) -> Vec<Line> {
        let protection =
            match &self.protection {
                Some(
                    Protection::Guard { settings, .. } | Protection::GuardAndKernel { settings },
                ) if settings.engine == Engine::Stalld => "stalld, run by the starvation guard",
                Some(Protection::Guard { .. } | Protection::GuardAndKernel { .. }) => {
                    "the starvation guard"
                }
                Some(Protection::FairServer { .. }) => "the kernel's fair server",
                Some(Protection::Throttling { .. }) => "RT throttling",
                Some(Protection::Nothing { .. }) => "NOTHING",
                None => "unknown",
            };
        let mut out = vec![Line::new("kernel work protected by", protection)];
        match (&self.state, self.alive) {
            (Some(s), true) => {
                let running = format!("running, pid {}, for {:.0} s", s.pid, self.uptime_s);
                out.push(Line::new("guard", running));
                if let Some(e) = &s.stalld {
                    let how = match (e.pid, &e.waiting) {
                        (Some(pid), _) => format!(
                            "{} running, pid {pid}: {}",
                            e.path,
                            e.command_line.get(1..).unwrap_or_default().join(" ")
                        ),
                        (None, Some(why)) => format!("{} not running: {why}", e.path),
                        (None, None) => format!("{} not started yet", e.path),
                    };
                    out.push(Line::new("guard engine", how));
                }
                let mean = s.ran_us.checked_div(s.boosts).unwrap_or(0);
                out.push(Line::new(
                    "guard boosts",
                    format!(
                        "{} ({:.3}/s, {} SCHED_FIFO, {} refused), {} µs in all, mean {} µs, longest {} µs",
                        s.boosts, self.boosts_per_s, s.fifo_boosts, s.failed, s.ran_us, mean, s.longest_us
                    ),
                ));
            }
            (_, false) if self.expected => out.push(Line::new("guard", "NOT RUNNING")),
            _ => {}
        }
        let starving = (self.starving.iter().take(20)).map(|s| {
            format!(
                "tid {} {:?} on CPU {}, runnable without running for {:.1} s",
                s.tid,
                s.name.chars().take(18).collect::<String>(),
                s.cpu,
                s.waited_ns as f64 / 1e9
            )
        });
        out.extend(Line::under("starving", starving.collect()));
        out
    }

    /// Its metrics: whether the guard runs, the threads starving, and its
    /// boosts and their CPU time.
    fn metrics(&self) -> Vec<Metric> {
        let gauge = |name, help, value: f64| Metric {
            name,
            kind: "gauge",
            help,
            samples: vec![(Vec::new(), value)],
        };
        let mut out = vec![
            gauge(
                "guard_up",
                "1 when the starvation guard runs (its pid and start time as its state file says), else 0.",
                f64::from(u8::from(self.alive)),
            ),
            gauge(
                "starving_threads",
                "Threads on the shielded CPUs runnable without running past the threshold (the guard's last scan).",
                self.starving.len() as f64,
            ),
        ];
        if let Some(s) = self.state.as_ref().filter(|_| self.alive) {
            out.extend([
                gauge(
                    BOOSTS_METRIC,
                    "Boosts the guard gave starving threads since it started: each interrupts the real-time task on that CPU.",
                    s.boosts as f64,
                ),
                gauge(
                    "guard_boost_seconds_total",
                    "CPU time boosted threads ran, taken from the real-time tasks, in all.",
                    s.ran_us as f64 / 1e6,
                ),
                gauge(
                    "guard_boost_longest_seconds",
                    "The longest CPU time a single boost ran.",
                    s.longest_us as f64 / 1e6,
                ),
            ]);
        }
        out
    }
}

/// Whether the shield `state` started the guard (journal version 2 and
/// older kept it as `guard` at the top level of the state).
fn started(state: &State) -> bool {
    state.record(OWNER.name(), "guard").unwrap_or(false)
}

/// The metric of the guard's boosts since it started: what `compare`
/// counts while it watches a shield.
pub const BOOSTS_METRIC: &str = "guard_boosts_total";

/// The starvation guard, as a component of the shield.
pub(in crate::shield) struct Part;

impl Component for Part {
    fn owner(&self) -> Owner {
        OWNER
    }

    /// Its unit, and the two settings stalld needs.
    fn reaches(&self, reach: &mut crate::shield::reach::Reach) {
        reach.units.push(UNIT.into());
        reach.files.extend(crate::guard::stalld::SCHED_FEATURES.iter().map(|f| f.to_string()));
        reach.files.push(RT_RUNTIME.into());
    }

    /// That it started the guard, when its step did.
    fn record(&self, plan: &Plan, _: &OnReport) -> Option<serde_json::Value> {
        planned(&plan.steps).then_some(serde_json::Value::Bool(true))
    }

    /// The guard the old shield started, where the new one has none.
    fn left_running(&self, old: &State, records: &OwnFacts) -> bool {
        started(old) && records.get::<bool>(OWNER.name()) != Some(true)
    }

    fn stop_left_running(&self, sys: &Sys, snap: &Snapshot) -> Vec<Refusal> {
        let mut undone = Undone::default();
        stop(sys, snap.owners.systemd, &mut undone);
        undone.failed
    }

    fn check(&self, _: &Planning, _: &mut Draft) -> Result<(), PlanError> {
        Ok(())
    }

    fn plan(&self, cx: &Planning, d: &mut Draft) -> Result<(), PlanError> {
        let kernel = &cx.snap.kernel_work;
        // Whoever planned it (the knobs, before the guard in the order).
        // The knobs, checked before anything planned, say what they write.
        let written = d.plan.facts.get::<crate::shield::facts::RtRuntimeWritten>();
        let rt_after = written.map(|w| w.0).or(kernel.rt_runtime_us);
        let systemd = cx.snap.owners.systemd;
        let (steps, notes) = plan(kernel, &asked(cx.req), rt_after, cx.shield, systemd)?;
        d.add(Phase::Tuning, steps);
        d.plan.notes.extend(notes.iter().map(OwnNote::note));
        Ok(())
    }

    fn change(&self, cx: &InPlace, mine: Vec<(Phase, Step)>, out: &mut Changing) {
        if mine.iter().any(|(_, s)| own_of(&s.action).is_some()) {
            out.change.records.put(OWNER.name(), &true);
        }
        for (slot, step) in mine {
            match own_of(&step.action) {
                Some(Own::Guard { cpus, settings, .. }) if in_place(&cx.read, &cpus, &settings) => {
                }
                _ => out.unless_held(cx, slot, step),
            }
        }
    }

    /// The guard itself, and the two settings stalld needs.
    fn machine_wide(&self, steps: &[Step]) -> Vec<MachineWide> {
        let entry = |what: String, without: &str| MachineWide {
            component: OWNER.name().into(),
            what,
            without: without.into(),
        };
        let mut out = Vec::new();
        for step in steps {
            match (&step.action, own_of(&step.action)) {
                (_, Some(Own::Guard { cpus, settings, .. })) => out.push(entry(
                    format!(
                        "the starvation guard ({}): a SCHED_FIFO {} process on the housekeeping CPUs that gives a thread starving on CPUs {cpus} for {} ms {} µs of every {} µs, for {} ms",
                        settings.engine,
                        crate::guard::daemon::PRIORITY,
                        settings.threshold_ms,
                        settings.runtime_us,
                        settings.period_us,
                        settings.duration_ms
                    ),
                    "--guard=off",
                )),
                (Action::Write { path, value, .. }, _) if path == RT_RUNTIME => out.push(entry(
                    format!("RT throttling off (/{path} {value}), which stalld needs"),
                    "--guard-engine cpushield",
                )),
                (Action::Write { path, value, .. }, _) => out.push(entry(
                    format!("scheduler feature {value} (/{path}), which stalld needs"),
                    "--guard-engine cpushield",
                )),
                _ => {}
            }
        }
        out
    }

    fn undoes(&self) -> Option<&dyn Undoes> {
        Some(self)
    }

    fn looks(&self) -> Option<&dyn Looks> {
        Some(self)
    }
}


impl Looks for Part {
    /// The guard and the shielded CPUs' kernel work as they read back,
    /// and what no longer holds.
    fn status(&self, cx: &Looking) -> Option<PartReport> {
        let (sys, state, repair) = (cx.sys, cx.state, cx.repair);
        let hold = read_hold(sys, state);
        Some(PartReport {
            component: OWNER.name().into(),
            lines: hold.lines(),
            data: serde_json::to_value(&hold).unwrap_or_default(),
            findings: hold.lost(state, repair),
            metrics: hold.metrics(),
            details: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::kernel::{FairServer, Starvable};

    fn kernel(preempt_rt: bool, fair: FairServer, rt: i64) -> KernelWork {
        KernelWork {
            release: "6.1.0".into(),
            preempt_rt,
            fair_server: fair,
            rt_runtime_us: Some(rt),
            rt_period_us: Some(1_000_000),
            stalld: None,
            hrtick_dl: None,
            stalld_running: None,
        }
    }

    /// The plan's guard step (its other steps are stalld's) and note.
    fn plan1(
        k: &KernelWork,
        r: &GuardRequest,
        rt: Option<i64>,
        shield: &CpuSet,
        systemd: bool,
    ) -> (Option<Step>, GuardNote) {
        let (steps, mut notes) = plan(k, r, rt, shield, systemd).unwrap();
        let guard = steps.into_iter().find(|s| own_of(&s.action).is_some());
        (guard, notes.remove(0))
    }

    fn with_engine(mode: GuardMode, engine: Engine) -> GuardRequest {
        GuardRequest {
            mode,
            settings: Settings {
                engine,
                ..Settings::default()
            },
        }
    }

    /// The engines of the guard steps among `steps`.
    fn engines(steps: &[Step]) -> Vec<Engine> {
        steps
            .iter()
            .filter_map(|s| match own_of(&s.action)? {
                Own::Guard { settings, .. } => Some(settings.engine),
            })
            .collect()
    }

    fn req(mode: GuardMode) -> GuardRequest {
        GuardRequest {
            mode,
            settings: Settings::default(),
        }
    }

    fn shield() -> CpuSet {
        CpuSet::parse_list("2-3").unwrap()
    }

    #[test]
    fn a_stalld_already_running_is_never_doubled_and_is_named() {
        let mut k = kernel(true, FairServer::Absent, 950_000);
        k.stalld = Some("/usr/bin/stalld".into());
        k.stalld_running = Some(crate::guard::stalld::Foreign {
            pid: 812,
            unit: Some("stalld.service".into()),
            cpus: None,
            threshold_s: 60,
            log_only: false,
        });
        let (steps, notes) =
            plan(&k, &req(GuardMode::Auto), Some(950_000), &shield(), true).unwrap();
        // Only the guard, with its own loop: no HRTICK_DL, no throttling
        // write (those are for a stalld of its own).
        let engines: Vec<Engine> = engines(&steps);
        assert_eq!((steps.len(), engines), (1, vec![Engine::Cpushield]));
        assert!(notes.iter().any(|n| matches!(
            n,
            GuardNote::StalldRunning { stalld, covers: true, guard: true } if stalld.pid == 812
        )));
        // Asked for stalld by name: still not a second one.
        let asked = with_engine(GuardMode::On, Engine::Stalld);
        let (steps, _) = plan(&k, &asked, Some(950_000), &shield(), true).unwrap();
        assert!(steps
            .iter()
            .all(|s| !matches!(&s.action, Action::Write { .. })));
    }

    #[test]
    fn stalld_turns_throttling_off_only_when_the_user_names_it() {
        let mut k = kernel(true, FairServer::Present, 950_000);
        k.stalld = Some("/usr/sbin/stalld".into());
        k.hrtick_dl = Some(("sys/kernel/debug/sched/features".into(), false));
        // auto, throttling on: the safety net stays, the guard's own loop.
        let (steps, _) = plan(&k, &req(GuardMode::Auto), Some(950_000), &shield(), false).unwrap();
        let engines: Vec<Engine> = engines(&steps);
        assert_eq!((steps.len(), engines), (1, vec![Engine::Cpushield]));
        // stalld named: its two changes, journaled.
        let named = with_engine(GuardMode::Auto, Engine::Stalld);
        let (steps, note) = plan(&k, &named, Some(950_000), &shield(), false).unwrap();
        let kinds: Vec<String> = steps
            .iter()
            .map(|s| match (&s.action, own_of(&s.action)) {
                (_, Some(Own::Guard { settings, .. })) => format!("guard {}", settings.engine),
                (
                    Action::Write {
                        path, value, undo, ..
                    },
                    _,
                ) => format!("{path}={value} undo {undo:?}"),
                (other, _) => format!("{other:?}"),
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "sys/kernel/debug/sched/features=HRTICK_DL undo Value(\"NO_HRTICK_DL\")",
                "guard stalld",
                "proc/sys/kernel/sched_rt_runtime_us=-1 undo Previous",
            ]
        );
        assert!(matches!(
            &note[..],
            [GuardNote::KernelWork {
                protection: Protection::Guard { settings, .. }
            }] if settings.engine == Engine::Stalld
        ));
        // Throttling already off and HRTICK_DL on: only the guard.
        k.hrtick_dl = Some(("sys/kernel/debug/sched/features".into(), true));
        let (steps, _) = plan(&k, &req(GuardMode::Auto), Some(-1), &shield(), false).unwrap();
        assert_eq!(steps.len(), 1);
        // Asked for cpushield's own: no stalld step.
        let own = with_engine(GuardMode::Auto, Engine::Cpushield);
        let (steps, _) = plan(&k, &own, Some(950_000), &shield(), false).unwrap();
        assert!(matches!(
            &steps[..],
            [step] if matches!(own_of(&step.action), Some(Own::Guard { settings, .. }) if settings.engine == Engine::Cpushield)
        ));
    }

    #[test]
    fn a_guard_journaled_by_version_1_is_read_as_the_guards_own() {
        // Version 1 wrote the guard at the top level of an entry.
        let own = Own::Guard {
            cpus: shield(),
            settings: Settings::default(),
            unit: Some(UNIT.into()),
        };
        let v1 = serde_json::to_string(&own).unwrap();
        assert!(v1.starts_with(r#"{"action":"guard","cpus":"2-3""#), "{v1}");
        let entry: crate::shield::journal::Entry = serde_json::from_str(&v1).unwrap();
        assert_eq!(entry.owner, None);
        assert_eq!(own_of(&entry.action), Some(own.clone()));
        // Version 2 writes it under `own`, with its component.
        let v2 = serde_json::to_value(Action::own(OWNER, &own)).unwrap();
        assert_eq!(v2["action"], "own");
        assert_eq!(v2["owner"], "guard");
        assert_eq!(v2["payload"], serde_json::to_value(&own).unwrap());
    }

    #[test]
    fn stalld_asked_for_where_it_is_not_installed_is_refused() {
        let k = kernel(true, FairServer::Present, 950_000);
        let want = with_engine(GuardMode::Auto, Engine::Stalld);
        let e = plan(&k, &want, Some(950_000), &shield(), false).unwrap_err();
        assert!(e.to_string().contains("no stalld is installed"), "{e}");
        // auto without stalld: cpushield's own.
        let (steps, _) = plan(&k, &req(GuardMode::Auto), Some(950_000), &shield(), false).unwrap();
        assert!(matches!(
            &steps[..],
            [step] if matches!(own_of(&step.action), Some(Own::Guard { settings, .. }) if settings.engine == Engine::Cpushield)
        ));
    }

    #[test]
    fn the_guard_comes_where_throttling_goes_off_without_a_fair_server() {
        let k = kernel(false, FairServer::Absent, 950_000);
        // Throttling stays on: it protects, no guard.
        let (step, note) = plan1(&k, &req(GuardMode::Auto), Some(950_000), &shield(), false);
        assert!(step.is_none());
        assert!(matches!(
            note,
            GuardNote::KernelWork {
                protection: Protection::Throttling {
                    runtime_us: 950_000,
                    ..
                }
            }
        ));
        // --tune turns it off: the guard comes, as a process or a unit.
        let (step, note) = plan1(&k, &req(GuardMode::Auto), Some(-1), &shield(), true);
        let Some(Step {
            action,
            fatal: true,
            owner: OWNER,
            ..
        }) = &step
        else {
            panic!("no guard step: {step:?}");
        };
        let Some(Own::Guard { cpus, unit, .. }) = own_of(action) else {
            panic!("not the guard: {action:?}");
        };
        assert_eq!((cpus, unit.as_deref()), (shield(), Some(UNIT)));
        assert!(matches!(
            note,
            GuardNote::KernelWork {
                protection: Protection::Guard {
                    why: Starvable::NoThrottlingNoFairServer,
                    ..
                }
            }
        ));
    }

    #[test]
    fn preempt_rt_always_needs_the_guard_and_off_says_nothing_protects() {
        let k = kernel(true, FairServer::Present, 950_000);
        let (step, _) = plan1(&k, &req(GuardMode::Auto), Some(950_000), &shield(), false);
        assert!(step.is_some());
        let (step, note) = plan1(&k, &req(GuardMode::Off), Some(950_000), &shield(), false);
        assert!(step.is_none());
        assert!(matches!(
            note,
            GuardNote::KernelWork {
                protection: Protection::Nothing {
                    why: Starvable::PreemptRt
                }
            }
        ));
        // The fair server protects 6.12's kworkers: no guard unless asked.
        let k = kernel(false, FairServer::Present, -1);
        assert!(plan1(&k, &req(GuardMode::Auto), Some(-1), &shield(), false)
            .0
            .is_none());
        assert!(plan1(&k, &req(GuardMode::On), Some(-1), &shield(), false)
            .0
            .is_some());
    }

    #[test]
    fn a_guard_that_died_or_nothing_protecting_breaks_the_shield() {
        let state = State::default();
        let dead = Hold {
            expected: true,
            alive: false,
            ..Hold::default()
        };
        let found = dead.lost(&state, "repair");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].id, "guard");
        let unprotected = Hold {
            protection: Some(Protection::Nothing {
                why: Starvable::PreemptRt,
            }),
            ..Hold::default()
        };
        assert_eq!(unprotected.lost(&state, "repair")[0].id, "kernel-work");
        let fine = Hold {
            expected: true,
            alive: true,
            ..Hold::default()
        };
        assert!(fine.lost(&state, "repair").is_empty());
    }

    #[test]
    fn a_wait_the_running_guard_handles_is_no_broken_shield_one_it_did_not_end_is() {
        let state = State::default();
        let waiting = |waited_s: f64| Starving {
            pid: 40,
            tid: 40,
            start_ticks: 7,
            name: "ksoftirqd/3".into(),
            cpu: 3,
            waited_ns: (waited_s * 1e9) as u64,
            exec_ns: 0,
            hog_priority: 80,
        };
        let guard = |alive: bool, waited_s: f64| Hold {
            expected: true,
            alive,
            starving: vec![waiting(waited_s)],
            state: Some(GuardState {
                settings: Some(Settings::default()),
                ..GuardState::default()
            }),
            ..Hold::default()
        };
        // The default threshold (1 s) and boost (1 s): 0.3 s and 1.5 s are
        // waits the guard is ending, 2.5 s one it did not end.
        for handled in [0.3, 1.5] {
            let found = guard(true, handled).lost(&state, "repair");
            assert!(found.is_empty(), "{handled} s: {found:?}");
        }
        let found = guard(true, 2.5).lost(&state, "repair");
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].id, "starving");
        assert!(found[0].reason.contains("ksoftirqd/3"), "{found:?}");
        // No guard running: any wait status sees is a starvation.
        let found = guard(false, 0.3).lost(&state, "repair");
        assert!(found.iter().any(|f| f.id == "starving"), "{found:?}");
    }
}
