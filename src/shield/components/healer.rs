//! The healer as a component of the shield ([`crate::heal`] is the healer
//! itself): `--heal on` starts it with the shield, `off` stops it first
//! (before anything is undone, so that it repairs nothing meanwhile) and
//! proves it gone; `status` says whether it runs and what it repaired.
//!
//! On a systemd host the healer is the transient service [`heal::UNIT`]
//! (`Restart=always`: systemd keeps it alive); elsewhere a process of its
//! own. Its identity (pid and start time) is in its state file.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::finding::{Finding, Severity};
use crate::heal::{self, HealState};
use crate::shield::apply::ApplyError;
use crate::shield::change::{Action, Owner, Step};
use crate::shield::component::{Changing, Component, Draft, InPlace, Looking, Phase, Planning};
use crate::shield::component::{Looks, Undoes};
use crate::shield::journal::{Entry, State};
use crate::shield::options::Declared;
use crate::shield::parts::{Line, Metric, OwnFacts, PartReport};
use crate::shield::plan::{Plan, PlanError};
use crate::shield::snapshot::Snapshot;
use crate::shield::undo::Undone;
use crate::shield::OnReport;
use crate::sys::{Sys, SysError};

/// This component, as it names itself in the journal and in reports.
pub const OWNER: Owner = Owner("healer");

/// How long the healer has to show up (its state file) or to go away.
const SETTLE: Duration = Duration::from_secs(5);

/// Whether the healer runs with the shield.
#[derive(clap::ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HealMode {
    /// No healer: what the kernel undoes stays undone until `apply`,
    /// `on` or `repair` runs (`status` says so). A journal that names no
    /// mode (one written before the healer was the default) means this.
    #[default]
    Off,
    /// The healer runs while the shield lives: `on`'s and the config's
    /// default.
    On,
    /// As `on`, and it also repairs what another program changed of the
    /// shield (an IRQ's affinity, a knob, a thread put on the shield):
    /// whatever `status` finds broken, looked for every
    /// [`heal::DRIFT_PERIOD`], as kubelet's CPU manager reconciles its
    /// cpusets. A program that changes it back at once is not fought:
    /// the same drift after a repair waits ever longer, up to
    /// [`heal::DRIFT_BACKOFF_MAX`].
    Drift,
}

impl std::fmt::Display for HealMode {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(match self {
            HealMode::Off => "off",
            HealMode::On => "on",
            HealMode::Drift => "drift",
        })
    }
}

/// Its option, as `on` and the config file take it.
#[derive(clap::Args, Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[group(skip)]
pub struct Options {
    /// Repair what the kernel itself undoes of the shield while it lives
    /// (a CPU that comes online widens per-node kernel threads; a device
    /// added or a module loaded brings IRQs; new kernel threads), within
    /// a second and without a person: `on` starts the healer (`cpushield
    /// heal`, a systemd service where systemd runs), which repairs as
    /// `cpushield repair` does on each such event; `off` stops it.
    /// `drift`: the same, and what other programs changed of the shield
    /// too (what `status` finds broken). `off`: no healer.
    #[arg(long, value_name = "MODE", default_value = "on")]
    // Always written: the journal of a release before the healer was the
    // default names no mode, and that shield has no healer (`off`).
    #[serde(default)]
    pub heal: HealMode,
}

impl Declared for Options {
    const EXAMPLES: &'static [(&'static str, &'static str)] = &[("heal", "\"off\"")];

    /// `--heal=off` or `--heal=drift`; nothing for the default.
    fn words(&self) -> Vec<String> {
        match self.heal {
            HealMode::On => Vec::new(),
            other => vec![format!("--heal={other}")],
        }
    }
}

/// The healer's own change, journaled as [`Action::Own`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
enum Own {
    /// Start the healer; undone by stopping it and proving it gone.
    Heal {
        /// Its transient systemd unit, on systemd hosts.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        unit: Option<String>,
    },
}

fn own_of(action: &Action) -> Option<Own> {
    action.own_as::<Own>()
}

/// The healer that runs now, when one does.
fn running(sys: &Sys) -> Option<HealState> {
    heal::read_state(sys).filter(|s| heal::alive(sys, s))
}

/// Starts the healer and waits for it to show up alive.
fn start(sys: &Sys, unit: Option<&str>) -> Result<(), SysError> {
    if running(sys).is_some() {
        return Ok(());
    }
    let mut args = vec!["heal".to_string()];
    if let Some(root) = sys.root_arg() {
        args.extend(["--root".into(), root.to_string_lossy().into_owned()]);
    }
    sys.start_daemon(&args, unit, "cpushield: the healer of the shield")?;
    let t = Instant::now();
    loop {
        // None ran before: one that runs now is the one just started.
        if running(sys).is_some() {
            return Ok(());
        }
        if t.elapsed() > SETTLE {
            let why = format!(
                "no healer reported itself alive in /{} within {} s",
                heal::STATE_FILE,
                SETTLE.as_secs()
            );
            return Err(SysError::new("start", "the healer", None, std::io::Error::other(why)));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Stops the healer that runs (SIGKILL after [`SETTLE`]) and proves it gone.
fn stop(sys: &Sys, unit: Option<&str>, out: &mut Undone) {
    let Some(state) = running(sys) else {
        out.unchanged += 1;
        return;
    };
    let _ = sys.stop_guard(state.pid, unit);
    let t = Instant::now();
    while heal::alive(sys, &state) {
        if t.elapsed() > SETTLE {
            let _ = sys.kill_guard(state.pid);
        }
        if t.elapsed() > SETTLE * 2 {
            out.failed.push(crate::shield::apply::Refusal {
                target: format!("the healer (pid {})", state.pid),
                reason: "still runs after SIGTERM and SIGKILL".into(),
            });
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    out.restored += 1;
}

/// What another program changed of the shield, read back as `status`
/// does, when the shield was made with `--heal drift`: what `status`
/// finds broken, one line. On a node where CRI-O runs, with `--heal on`,
/// what its high-performance hooks change (the components that declare
/// `crio_hooks_change`). None when nothing is, drift
/// is not the healer's to repair, or a change is being made now (its
/// lock held).
pub fn drift(sys: &Sys) -> Option<String> {
    use crate::shield::journal;
    if journal::holder(sys).is_some() {
        return None;
    }
    let state = journal::read_state(sys).ok()??;
    let mode = state.request.as_ref()?.declared::<Options>().ok()?.heal;
    // CRI-O's hooks change the shield at every annotated pod's start and
    // stop, as predictably as the kernel does at a CPU's online: the
    // healer repairs that much without --heal drift
    let crio = mode == HealMode::On && crate::crio::runs(sys);
    if !(mode == HealMode::Drift || crio) || !state.complete {
        return None;
    }
    let report = crate::shield::status(sys).ok()?;
    let broken: Vec<String> = (report.broken.iter())
        .filter(|f| f.id != OWNER.name())
        .filter(|f| mode == HealMode::Drift || super::crio_hooks_change(&f.id))
        .map(|f| match mode {
            HealMode::Drift => f.reason.clone(),
            _ => format!("(CRI-O's hooks, at a pod's start or stop) {}", f.reason),
        })
        .collect();
    (!broken.is_empty()).then(|| broken.join("; "))
}

/// Whether the shield `state` started the healer.
fn started(state: &State) -> bool {
    state.record(OWNER.name(), "healer").unwrap_or(false)
}

/// The healer, as a component of the shield.
pub(in crate::shield) struct Part;

impl Component for Part {
    fn owner(&self) -> Owner {
        OWNER
    }

    fn record(&self, plan: &Plan, _: &OnReport) -> Option<serde_json::Value> {
        let planned = plan.steps.iter().any(|s| own_of(&s.action).is_some());
        planned.then_some(serde_json::Value::Bool(true))
    }

    fn left_running(&self, old: &State, records: &OwnFacts) -> bool {
        started(old) && records.get::<bool>(OWNER.name()) != Some(true)
    }

    fn stop_left_running(&self, sys: &Sys, snap: &Snapshot) -> Vec<crate::shield::apply::Refusal> {
        let mut undone = Undone::default();
        stop(sys, snap.owners.systemd.then_some(heal::UNIT), &mut undone);
        undone.failed
    }

    fn check(&self, _: &Planning, _: &mut Draft) -> Result<(), PlanError> {
        Ok(())
    }

    fn plan(&self, cx: &Planning, d: &mut Draft) -> Result<(), PlanError> {
        let mode = cx.req.declared::<Options>().map(|o| o.heal).unwrap_or_default();
        if mode != HealMode::Off {
            let unit = cx.snap.owners.systemd.then(|| heal::UNIT.to_string());
            let own = Own::Heal { unit };
            d.add(Phase::Finish, vec![Step::fatal(OWNER, Action::own(OWNER, &own))]);
        }
        Ok(())
    }

    /// A healer that runs already keeps running: a repair in place is
    /// what it runs itself.
    fn change(&self, cx: &InPlace, mine: Vec<(Phase, Step)>, out: &mut Changing) {
        if mine.iter().any(|(_, s)| own_of(&s.action).is_some()) {
            out.change.records.put(OWNER.name(), &true);
        }
        let alive = (cx.read)(heal::STATE_FILE)
            .and_then(|t| serde_json::from_str::<HealState>(&t).ok())
            .is_some_and(|s| {
                (cx.read)(&format!("proc/{}/stat", s.pid))
                    .and_then(|stat| crate::sys::procfs::stat_start_ticks(&stat))
                    .is_some_and(|t| t == s.start_ticks)
            });
        for (phase, step) in mine {
            if own_of(&step.action).is_some() && alive {
                continue;
            }
            out.unless_held(cx, phase, step);
        }
    }

    fn reaches(&self, reach: &mut crate::shield::reach::Reach) {
        reach.units.push(heal::UNIT.to_string());
    }

    fn undoes(&self) -> Option<&dyn Undoes> {
        Some(self)
    }

    fn looks(&self) -> Option<&dyn Looks> {
        Some(self)
    }
}

impl Undoes for Part {
    fn make(&self, sys: &Sys, action: &Action) -> Option<Result<(), ApplyError>> {
        let Own::Heal { unit } = own_of(action)?;
        Some(start(sys, unit.as_deref()).map_err(ApplyError::Kernel))
    }

    fn undo(&self, sys: &Sys, entry: &Entry, out: &mut Undone) -> bool {
        let Some(Own::Heal { unit }) = own_of(&entry.action) else {
            return false;
        };
        let failed = out.failed.len();
        stop(sys, unit.as_deref(), out);
        // Its counts are the shield's: the next shield's healer starts at 0.
        if out.failed.len() == failed {
            let _ = sys.remove_config(heal::STATE_FILE, false);
        }
        true
    }

    /// Stopped before anything else is undone: it must repair nothing of
    /// a shield going away.
    fn undone_first(&self, action: &Action) -> bool {
        own_of(action).is_some()
    }

    fn within(
        &self,
        action: &Action,
        bounds: &crate::shield::reach::Bounds,
    ) -> Option<Result<(), String>> {
        match own_of(action)? {
            Own::Heal { unit: Some(unit) } => Some(bounds.unit(&unit)),
            Own::Heal { unit: None } => Some(Ok(())),
        }
    }

    fn describe(&self, action: &Action) -> Option<String> {
        own_of(action).map(|_| "start the healer (cpushield heal)".to_string())
    }
}

impl Looks for Part {
    /// Whether the healer the shield started runs, and what it repaired.
    fn status(&self, cx: &Looking) -> Option<PartReport> {
        if !started(cx.state) {
            return None;
        }
        let state = heal::read_state(cx.sys);
        let alive = state.as_ref().is_some_and(|s| heal::alive(cx.sys, s));
        let state = state.unwrap_or_default();
        let mut part = PartReport::new(OWNER.name(), &state);
        let repairs: u64 = state.repairs.values().sum();
        let by_reason: Vec<String> = (state.repairs.iter())
            .map(|(r, n)| format!("{r} {n}"))
            .collect();
        let last = state.last.as_ref().map_or(String::new(), |l| {
            let what = crate::escape::terminal(&l.what);
            format!("; last: {} ({what}), {} ms after the event", l.reason, l.took_ms)
        });
        part.lines.push(Line::new(
            "healer",
            match alive {
                true => format!(
                    "running (pid {}), {repairs} repairs{}{last}",
                    state.pid,
                    if by_reason.is_empty() { String::new() } else { format!(": {}", by_reason.join(", ")) }
                ),
                false => "not running".to_string(),
            },
        ));
        part.metrics.push(Metric {
            name: "repairs_total",
            kind: "counter",
            help: "Repairs the healer made of the shield, by reason.",
            samples: (state.repairs.iter())
                .map(|(reason, n)| (vec![("reason", reason.clone())], *n as f64))
                .collect(),
        });
        if !alive {
            part.findings.push(Finding::new(
                OWNER.name(),
                Severity::Bad,
                50,
                "the healer the shield started is not running: what the kernel undoes stays undone",
                cx.repair,
            ));
        }
        Some(part)
    }
}
