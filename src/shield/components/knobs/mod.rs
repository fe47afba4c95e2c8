//! Tuning knobs: the opt-in, reversible settings that
//! remove jitter from shielded CPUs, each defined once, as data.
//!
//! Flow: [`resolve`] turns `--tune=KNOB,...` into knobs, its `read` (the `Component` hook)
//! reads the files they touch (once, before anything changes, into the
//! snapshot's facts), and the pure [`plan`] turns both into [`Step`]s that go through the shield's journal,
//! read-back and undo like every other change. Missing files are skipped
//! with a note; read-only files are reported, never fatal.
//!
//! The watchdog files are special: reading them while the watchdog is off
//! was seen to break re-enabling it. Their value is captured here, before
//! the change, and the step is undone by writing that captured value back
//! blindly ([`Undo::Value`], [`Check::None`]): nothing reads them while the
//! shield has them off.

use crate::shield::component::{unless_held, written, AuditReading};
use crate::shield::component::{Changing, Component, Draft, InPlace, Looking, Phase, Planning};
use crate::shield::component::{Looks, Undoes};
use crate::shield::error::ShieldError;
use crate::shield::parts::{Line, MachineWide, OwnFacts, PartReport};
use crate::shield::plan_error::PlanError;
use crate::shield::request::Request;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;
use crate::finding::{Finding, Severity};
use crate::shield::apply::{chosen, reads_as};
use crate::shield::change::{Action, Check, Owner, Step, Undo};
use crate::shield::holds::Holds;
use crate::shield::journal::{self, JournalError, State};
use crate::shield::note::{Note, OwnNote};
use crate::sys::Sys;
pub use notes::{TuneNote, Unreadable, UnreadableFile};
pub use value::{describe_value, sibling_of, Value};
use value::{same_value, wanted};

/// Which files a knob writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Scope {
    /// Fixed files, relative to the root.
    Global {
        /// The files.
        files: &'static [&'static str],
    },
    /// One file per shielded CPU; `{cpu}` stands for the CPU number.
    PerShieldCpu {
        /// Path pattern.
        pattern: &'static str,
    },
    /// `rps_cpus` and `xps_cpus` of every queue of every network interface.
    NetQueues,
}

/// One tuning knob.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Knob {
    /// Name used with `--tune=`.
    pub name: &'static str,
    /// The files written.
    pub scope: Scope,
    /// The value written.
    pub value: Value,
    /// Why it helps the shielded CPUs.
    pub why: &'static str,
    /// What can go wrong while it is set.
    pub risk: &'static str,
    /// Whether plain `--tune` (all) includes it; otherwise only by name.
    pub in_all: bool,
    /// Captured once before the change and never read again while set
    /// (the watchdogs): no read-back, undo writes the captured value.
    pub captured: bool,
}

/// Path of the kernel's soft-lockup watchdog switch.
pub const WATCHDOG: &str = "proc/sys/kernel/watchdog";
/// Path of the NMI (hard-lockup) watchdog switch.
pub const NMI_WATCHDOG: &str = "proc/sys/kernel/nmi_watchdog";
/// Path of the hung-task detector's timeout: seconds a task may sleep
/// uninterruptibly before the kernel reports it hung
/// (CONFIG_DETECT_HUNG_TASK; 0: never).
pub const HUNG_TASK_TIMEOUT: &str = "proc/sys/kernel/hung_task_timeout_secs";
/// Path of the soft-lockup-only watchdog switch (never written; never read while off).
pub const SOFT_WATCHDOG: &str = "proc/sys/kernel/soft_watchdog";
/// RT throttling's runtime per period, µs: `-1` is off.
pub use crate::guard::kernel::RT_RUNTIME;
pub use crate::shield::snapshot::WRITEBACK_MASK;

/// This component, as it names itself in the journal and in reports.
pub const OWNER: Owner = Owner("knobs");

/// Its option, as `on` and the config file take it.
#[derive(clap::Args, Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[group(skip)]
pub struct Options {
    /// Also apply tuning knobs, undone by `off`: `--tune=KNOB,...`, or a
    /// bare `--tune` (= `all`) for every knob `tune --list` does not mark
    /// "only by name". The safety nets go only when named
    /// (`--tune=all,rt-throttling,watchdog,nmi-watchdog`), as do turbo,
    /// huge pages and overcommit. `--dry-run` lists each machine-wide
    /// change with how to do without it.
    #[arg(long, value_name = "KNOBS", num_args = 0..=1, require_equals = true,
          default_missing_value = "all", value_delimiter = ',')]
    #[serde(default, skip_serializing_if = "none_or_empty")]
    pub tune: Option<Vec<String>>,
}

fn none_or_empty(tune: &Option<Vec<String>>) -> bool {
    tune.as_ref().is_none_or(Vec::is_empty)
}

impl crate::shield::options::Declared for Options {
    const EXAMPLES: &'static [(&'static str, &'static str)] = &[("tune", r#"["all"]"#)];

    /// Every name a knob's or `all`; no empty name (`--tune=a,,b`), none
    /// twice.
    fn check(&self) -> Result<(), String> {
        let names = self.tune.as_deref().unwrap_or_default();
        if names.len() > 1 && names.iter().any(|n| n.trim().is_empty()) {
            return Err(format!(
                "--tune={}: an empty knob name; give names separated by single commas, or a bare --tune for all",
                crate::input::brief_to(&names.join(","), 60)
            ));
        }
        let twice = (names.iter().enumerate()).find(|(i, n)| names[..*i].contains(n));
        if let Some((_, name)) = twice {
            return Err(format!(
                "--tune={}: {} named twice; name each knob once",
                crate::input::brief_to(&names.join(","), 60),
                crate::input::quote(name)
            ));
        }
        resolve(names)
            .map(|_| ())
            .map_err(|e| format!("--tune: {e}"))
    }
}

/// The knobs `req` asks for, by name (none when it asks none).
pub(super) fn asked(req: &Request) -> Vec<String> {
    (req.declared::<Options>().ok())
        .and_then(|o| o.tune)
        .unwrap_or_default()
}
/// Automatic NUMA balancing: `0` is off.
pub const NUMA_BALANCING: &str = "proc/sys/kernel/numa_balancing";
/// Timer migration: `1` moves timers off busy CPUs.
pub const TIMER_MIGRATION: &str = "proc/sys/kernel/timer_migration";
/// The vmstat worker's interval, s.
pub const STAT_INTERVAL: &str = "proc/sys/vm/stat_interval";
/// The dirty-page flusher's interval, cs.
pub const DIRTY_WRITEBACK: &str = "proc/sys/vm/dirty_writeback_centisecs";
/// Files that must not be read while a shield has the watchdog off.
pub const WATCHDOG_FILES: [&str; 3] = [WATCHDOG, SOFT_WATCHDOG, NMI_WATCHDOG];

mod audit;
mod notes;
mod read;
mod table;
mod value;
pub use table::KNOBS;

/// The knobs as `tune --list --json` prints them.
#[derive(Debug, Serialize)]
pub struct List {
    /// Every knob, in order.
    pub knobs: &'static [Knob],
}

impl List {
    /// Every knob.
    pub const ALL: List = List { knobs: KNOBS };

    /// `cpushield tune --list` for people.
    pub fn render(&self, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        writeln!(
            w,
            "tuning knobs (cpushield on LIST --tune[=KNOB,...]; undone by cpushield off):"
        )?;
        for k in self.knobs {
            let all = if k.in_all { "" } else { "  [only by name]" };
            writeln!(w, "\n  {}{all}", k.name)?;
            writeln!(w, "    file   {}", describe_files(k))?;
            writeln!(w, "    value  {}", describe_value(k))?;
            writeln!(w, "    why    {}", k.why)?;
            writeln!(w, "    risk   {}", k.risk)?;
        }
        Ok(())
    }
}

/// The knob named `name`.
pub fn knob(name: &str) -> Option<&'static Knob> {
    KNOBS.iter().find(|k| k.name == name)
}

/// A `--tune` name that is not a knob.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown tuning knob {} (valid: {valid})", crate::input::quote(name))]
pub struct UnknownKnob {
    /// The name given.
    pub name: String,
    /// The valid names, comma separated (for a long name, where to find
    /// them: the error stays short).
    pub valid: String,
}

impl From<UnknownKnob> for PlanError {
    fn from(e: UnknownKnob) -> PlanError {
        PlanError::Part {
            option: "--tune",
            message: e.to_string(),
        }
    }
}

/// Resolves `--tune` names; `all` (or an empty name) means every knob
/// that is in `all`. Order follows [`KNOBS`].
pub fn resolve(names: &[String]) -> Result<Vec<&'static Knob>, UnknownKnob> {
    let mut wanted: Vec<&str> = Vec::new();
    for n in names.iter().map(|n| n.trim()) {
        if n.is_empty() || n == "all" {
            wanted.extend(KNOBS.iter().filter(|k| k.in_all).map(|k| k.name));
        } else if knob(n).is_some() {
            wanted.push(n);
        } else {
            let valid = match n.len() > 40 {
                true => "all, or a knob of 'cpushield tune --list'".to_string(),
                false => {
                    let names: Vec<&str> = KNOBS.iter().map(|k| k.name).collect();
                    format!("all, {}", names.join(", "))
                }
            };
            return Err(UnknownKnob {
                name: n.to_string(),
                valid,
            });
        }
    }
    Ok(KNOBS.iter().filter(|k| wanted.contains(&k.name)).collect())
}

/// One file as read before tuning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum FileState {
    /// The file does not exist (feature absent).
    Missing,
    /// The file could not be read.
    Unreadable {
        /// Why (errno name).
        reason: String,
    },
    /// The file and its value.
    Present {
        /// Trimmed contents.
        value: String,
        /// Whether its mode allows writing at all (sysctls of absent features are 0444).
        writable: bool,
    },
}

/// The files of the selected knobs, read once before anything changes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TuneState {
    /// Concrete files of each knob, by knob name.
    pub files_of: BTreeMap<String, Vec<String>>,
    /// Each file's state.
    pub files: BTreeMap<String, FileState>,
    /// Files CRI-O's high-performance hook holds for a running pod (a
    /// governor, see [`crate::crio`]): left to it, neither written nor
    /// written back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held_by_crio: Vec<String>,
}

/// Knob steps and what the user should know about them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TunePlan {
    /// Writes, non-fatal, journaled and undone like the shield's.
    pub steps: Vec<Step>,
    /// Skipped files (missing, read-only, unreadable), one note per knob and reason.
    pub notes: Vec<Note>,
}

/// The notes for the files of knob `name` left alone.
fn skipped(
    name: &str,
    missing: Vec<String>,
    readonly: Vec<String>,
    unreadable: Vec<UnreadableFile>,
) -> Vec<Note> {
    let mut notes = Vec::new();
    if !missing.is_empty() {
        notes.push(
            TuneNote::TuneMissing {
                knob: name.to_string(),
                files: missing,
            }
            .note(),
        );
    }
    if !readonly.is_empty() {
        notes.push(
            TuneNote::TuneReadOnly {
                knob: name.to_string(),
                files: readonly,
            }
            .note(),
        );
    }
    if !unreadable.is_empty() {
        notes.push(
            TuneNote::TuneUnreadable {
                knob: name.to_string(),
                files: unreadable,
            }
            .note(),
        );
    }
    notes
}

/// Plans the knob writes for a shield. Pure. `already` lists paths the
/// shield itself writes; those are left to it.
pub fn plan(
    state: &TuneState,
    knobs: &[&Knob],
    shield: &CpuSet,
    housekeeping: &CpuSet,
    mask_bits: u32,
    already: &[String],
) -> TunePlan {
    let mut out = TunePlan::default();
    for k in knobs {
        let files = state.files_of.get(k.name).cloned().unwrap_or_default();
        if files.is_empty() {
            out.notes.push(
                TuneNote::TuneNothingToTune {
                    knob: k.name.to_string(),
                }
                .note(),
            );
            continue;
        }
        let mut missing = Vec::new();
        let mut readonly = Vec::new();
        let mut unreadable = Vec::new();
        for f in &files {
            if already.contains(f) || state.held_by_crio.contains(f) {
                continue;
            }
            let (current, writable) = match state.files.get(f) {
                Some(FileState::Present { value, writable }) => (value, *writable),
                Some(FileState::Unreadable { reason }) => {
                    unreadable.push(UnreadableFile {
                        path: f.clone(),
                        reason: Unreadable::ReadFailed {
                            errno: reason.clone(),
                        },
                    });
                    continue;
                }
                Some(FileState::Missing) | None => {
                    missing.push(f.clone());
                    continue;
                }
            };
            let (value, mask) = match wanted(
                (k, f, current),
                &state.files,
                shield,
                housekeeping,
                mask_bits,
            ) {
                Ok(Some(want)) => want,
                Ok(None) => continue,
                Err(reason) => {
                    unreadable.push(UnreadableFile {
                        path: f.clone(),
                        reason,
                    });
                    continue;
                }
            };
            // A sysfs choice file reads its words, the one chosen in brackets.
            let choice = current.contains('[');
            if same_value(chosen(current), &value, mask) {
                continue;
            }
            if !writable {
                readonly.push(f.clone());
                continue;
            }
            let (check, undo) = if k.captured {
                (Check::None, Undo::Value(current.clone()))
            } else if choice {
                (Check::Choice, Undo::Previous)
            } else if mask {
                (Check::CpuMask, Undo::Previous)
            } else {
                (Check::Text, Undo::Previous)
            };
            out.steps.push(Step::optional(
                OWNER,
                Action::Write {
                    path: f.clone(),
                    value,
                    check,
                    undo,
                },
            ));
        }
        out.notes
            .extend(skipped(k.name, missing, readonly, unreadable));
    }
    out
}

/// Values of captured files (the watchdogs) that an active shield holds:
/// path → (value written, original value), from its journal. These files
/// must not be read while the shield is up.
pub fn held_by_journal<'a>(
    journaled: impl IntoIterator<Item = &'a Action>,
) -> BTreeMap<String, (String, String)> {
    journaled
        .into_iter()
        .filter_map(|action| match action {
            Action::Write {
                path,
                value,
                undo: Undo::Value(original),
                ..
            } if WATCHDOG_FILES.contains(&path.as_str()) => {
                Some((path.clone(), (value.clone(), original.clone())))
            }
            _ => None,
        })
        .collect()
}

/// The concrete files of a knob for a shield of `shield` (the machinecheck
/// file of each shielded CPU, every queue of every network interface, ...).
pub fn knob_files(sys: &Sys, knob: &Knob, shield: &CpuSet) -> Vec<String> {
    match knob.scope {
        Scope::Global { files } => files.iter().map(|f| f.to_string()).collect(),
        Scope::PerShieldCpu { pattern } => shield
            .iter()
            .map(|c| pattern.replace("{cpu}", &c.to_string()))
            .collect(),
        Scope::NetQueues => {
            let mut out = Vec::new();
            for iface in sys.list("sys/class/net").unwrap_or_default() {
                let dir = format!("sys/class/net/{iface}/queues");
                for q in sys.list(&dir).unwrap_or_default() {
                    let file = if q.starts_with("rx-") {
                        "rps_cpus"
                    } else if q.starts_with("tx-") {
                        "xps_cpus"
                    } else {
                        continue;
                    };
                    out.push(format!("{dir}/{q}/{file}"));
                }
            }
            // The mask devices made later start with (a container's
            // veth, a hot-added NIC), where the kernel has it (6.2+).
            if sys.exists(RPS_DEFAULT_MASK) {
                out.push(RPS_DEFAULT_MASK.to_string());
            }
            out
        }
    }
}

/// What `status` reads back of the knobs a shield set: each file of the
/// knobs its request named (the watchdogs aside: they must not be read
/// while off), as last written by the shield, and what it reads now.
#[derive(Debug, Default, Serialize)]
pub(in crate::shield) struct Hold {
    /// The files, in the order of [`KNOBS`].
    files: Vec<HeldFile>,
}

/// One knob file the shield wrote.
#[derive(Debug, Serialize)]
struct HeldFile {
    /// The knob's name.
    knob: &'static str,
    /// The file, relative to the root.
    path: String,
    /// What the shield wrote last.
    wrote: String,
    /// How a read-back compares.
    check: Check,
    /// What it reads now (`None`: gone, as a network interface can go).
    now: Option<String>,
}

/// Reads back the files of the knobs in `state`'s request that the
/// shield's journal wrote and the kernel took (the journal is read only
/// when the request has knobs).
pub(in crate::shield) fn read_hold(sys: &Sys, state: &State) -> Result<Hold, JournalError> {
    let knobs = match state.request.as_ref().map(|r| resolve(&asked(r))) {
        Some(Ok(knobs)) if !knobs.is_empty() => knobs,
        _ => return Ok(Hold::default()),
    };
    let entries = journal::read_entries(sys)?;
    let mut written = BTreeMap::new();
    for e in &entries {
        if let Action::Write {
            path, value, check, ..
        } = &e.action
        {
            written.insert(path.as_str(), (value, *check));
        }
    }
    let mut files = Vec::new();
    for k in knobs.iter().filter(|k| !k.captured) {
        for path in knob_files(sys, k, &state.shield) {
            let Some((wrote, check)) = written.get(path.as_str()) else {
                continue;
            };
            // CRI-O's hook holds it for a running pod: not the shield's now
            if state.writes_refused.contains(&path) || crate::crio::saved(sys, &path).is_some() {
                continue;
            }
            files.push(HeldFile {
                knob: k.name,
                now: sys.read_trimmed(&path).ok(),
                wrote: wrote.to_string(),
                check: *check,
                path,
            });
        }
    }
    Ok(Hold { files })
}

impl Holds for Hold {
    /// `knobs`: files of the knobs the shield set that read otherwise now
    /// (a sysctl reload, a daemon); a file gone is nothing to hold.
    fn lost(&self, _state: &State, repair: &str) -> Vec<Finding> {
        let drifted: Vec<String> = self
            .files
            .iter()
            .filter_map(|f| {
                let now = f.now.as_deref()?;
                (!reads_as(f.check, now, &f.wrote)).then(|| {
                    format!(
                        "tune {}: /{} reads {now}, the shield set {}",
                        f.knob, f.path, f.wrote
                    )
                })
            })
            .collect();
        if drifted.is_empty() {
            return Vec::new();
        }
        vec![Finding::new(
            "knobs",
            Severity::Bad,
            50,
            drifted.join("; "),
            repair,
        )]
    }
}

/// `cpushield tune --list`: the files a knob writes, for people.
pub fn describe_files(k: &Knob) -> String {
    match k.scope {
        Scope::Global { files } => files
            .iter()
            .map(|f| format!("/{f}"))
            .collect::<Vec<_>>()
            .join(" "),
        Scope::PerShieldCpu { pattern } => format!("/{}", pattern.replace("{cpu}", "N")),
        Scope::NetQueues => {
            format!("/sys/class/net/IF/queues/{{rx-N/rps_cpus,tx-N/xps_cpus}} /{RPS_DEFAULT_MASK}")
        }
    }
}

/// Whether the undo gives `action` back before anything else: RT
/// throttling. A real-time task still running on the shield when it goes
/// (kept on its CPU, see the tasks component's `realtime.rs`) starves
/// that CPU's kworkers while throttling is off on a kernel without the
/// fair server, and undo
/// waits for them: writing `kernel.watchdog` back runs work on every CPU
/// (`smp_call_on_cpu`), which never returned on Debian 12 behind a
/// SCHED_FIFO loop.
pub(in crate::shield) fn undone_first(action: &Action) -> bool {
    matches!(action, Action::Write { path, .. } if path == RT_RUNTIME)
}

/// The tuning knobs, as a component of the shield.
pub(in crate::shield) struct Part;

/// The tuned settings that write what a knob writes.
const TUNED: [(&str, &str, &str); 15] = [
    ("sysctl", "kernel.sched_rt_runtime_us", "--tune=rt-throttling"),
    ("sysctl", "kernel.timer_migration", "--tune=timer-migration"),
    ("sysctl", "vm.stat_interval", "--tune=vmstat"),
    ("sysctl", "kernel.numa_balancing", "--tune=numa-balancing"),
    ("sysctl", "vm.dirty_writeback_centisecs", "--tune=dirty-writeback"),
    ("sysctl", "kernel.nmi_watchdog", "--tune=nmi-watchdog"),
    ("sysctl", "kernel.watchdog", "--tune=watchdog"),
    ("sysctl", "vm.overcommit_memory", "--tune=overcommit"),
    ("sysctl", "kernel.hung_task_timeout_secs", "--tune=hung-task"),
    ("vm", "transparent_hugepages", "--tune=thp"),
    ("vm", "transparent_hugepage", "--tune=thp"),
    ("cpu", "governor", "--tune=governor"),
    ("cpu", "min_perf_pct", "--tune=freq-floor"),
    ("cpu", "no_turbo", "--tune=turbo"),
    ("cpu", "energy_perf_bias", "--tune=governor"),
];

/// The receive steering mask a network device made later starts with.
pub(in crate::shield) const RPS_DEFAULT_MASK: &str = "proc/sys/net/core/rps_default_mask";

/// The network queues the `net-queues` knob writes.
const NET_QUEUES: [&str; 3] = [
    "sys/class/net/*/queues/rx-*/rps_cpus",
    "sys/class/net/*/queues/tx-*/xps_cpus",
    RPS_DEFAULT_MASK,
];

impl Component for Part {
    fn owner(&self) -> Owner {
        OWNER
    }

    fn tuned_overlaps(&self) -> &'static [(&'static str, &'static str, &'static str)] {
        &TUNED
    }

    /// Every knob's files (a per-CPU file's pattern, every CPU).
    fn reaches(&self, reach: &mut crate::shield::reach::Reach) {
        for knob in KNOBS {
            match knob.scope {
                Scope::Global { files } => reach.files.extend(files.iter().map(|f| f.to_string())),
                Scope::PerShieldCpu { pattern } => reach.files.push(pattern.replace("{cpu}", "*")),
                Scope::NetQueues => reach.files.extend(NET_QUEUES.iter().map(|f| f.to_string())),
            }
        }
    }

    fn read(&self, sys: &Sys, req: &Request, facts: &mut OwnFacts) -> Result<(), ShieldError> {
        read::read(sys, req, facts)
    }

    /// Resolves the knobs asked, and tells the rest of the plan what RT
    /// throttling's runtime they write.
    fn check(&self, cx: &Planning, d: &mut Draft) -> Result<(), PlanError> {
        let names = asked(cx.req);
        if names.is_empty() {
            return Ok(());
        }
        let knobs = resolve(&names).map_err(PlanError::from)?;
        let rt_runtime = knobs.iter().find_map(|k| match (&k.scope, &k.value) {
            (Scope::Global { files }, Value::Const(v)) if files.contains(&RT_RUNTIME) => {
                v.parse().ok()
            }
            _ => None,
        });
        if let Some(runtime) = rt_runtime {
            d.plan
                .facts
                .publish(&crate::shield::facts::RtRuntimeWritten(runtime));
        }
        Ok(())
    }

    fn plan(&self, cx: &Planning, d: &mut Draft) -> Result<(), PlanError> {
        let state: Option<TuneState> = cx.snap.parts.get(OWNER.name());
        let names = asked(cx.req);
        let (Some(state), false) = (&state, names.is_empty()) else {
            return Ok(());
        };
        let wanted = resolve(&names)?;
        // Files the shield itself writes are left to it.
        let already: Vec<String> = written(&d.steps).map(str::to_string).collect();
        let (cpus, bits) = ((cx.shield, cx.housekeeping), cx.snap.mask_bits());
        let tuned = plan(state, &wanted, cpus.0, cpus.1, bits, &already);
        d.add(Phase::Tuning, tuned.steps);
        d.plan.notes.extend(tuned.notes);
        Ok(())
    }

    fn change(&self, cx: &InPlace, mine: Vec<(Phase, Step)>, out: &mut Changing) {
        unless_held(cx, mine, out)
    }

    /// Every knob whose files are the machine's (not one per shielded CPU).
    fn machine_wide(&self, steps: &[Step]) -> Vec<MachineWide> {
        let mut out: Vec<MachineWide> = Vec::new();
        for step in steps {
            let Action::Write { path, value, .. } = &step.action else {
                continue;
            };
            let Some(k) = KNOBS.iter().find(|k| match k.scope {
                Scope::Global { files } => files.contains(&path.as_str()),
                Scope::NetQueues => path.starts_with("sys/class/net/") || path == RPS_DEFAULT_MASK,
                Scope::PerShieldCpu { .. } => false,
            }) else {
                continue;
            };
            let write = format!("/{path} {value}");
            match out.iter_mut().find(|m| m.what.starts_with(&format!("{}: ", k.name))) {
                Some(m) => {
                    m.what.push_str(", ");
                    m.what.push_str(&write);
                }
                None => out.push(MachineWide {
                    component: OWNER.name().into(),
                    what: format!("{}: {write}", k.name),
                    without: format!(
                        "leave {} out: name only the knobs wanted, with --tune=NAME,... or the config's tune list (a bare --tune takes every knob of tune --list but those marked only by name)",
                        k.name
                    ),
                }),
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

impl Undoes for Part {
    fn undone_first(&self, action: &Action) -> bool {
        undone_first(action)
    }
}

impl Looks for Part {
    fn audit_read(&self, cx: &AuditReading, facts: &mut OwnFacts) {
        facts.put(OWNER.name(), &audit::read_audit(cx));
    }

    fn audit(&self, f: &crate::shield::Audited) -> Vec<Finding> {
        let own: audit::AuditFacts = f.own.get(OWNER.name()).unwrap_or_default();
        audit::judge(&own, f.targets)
    }

    /// The knob files the shield set, as they read now (none when the
    /// request had no knob).
    fn status(&self, cx: &Looking) -> Option<PartReport> {
        let hold = match read_hold(cx.sys, cx.state) {
            Ok(hold) if hold.files.is_empty() => return None,
            Ok(hold) => hold,
            Err(e) => {
                let mut part = PartReport::new(OWNER.name(), &Hold::default());
                let why =
                    format!("the knob files the shield wrote cannot be read from its journal: {e}");
                part.findings = vec![Finding::new("knobs", Severity::Bad, 50, why, cx.repair)];
                return Some(part);
            }
        };
        let findings = hold.lost(cx.state, cx.repair);
        let text = match findings.is_empty() {
            true => format!("{} files as the shield set them", hold.files.len()),
            false => format!(
                "{} files, some no longer as the shield set them",
                hold.files.len()
            ),
        };
        let mut part = PartReport::new(OWNER.name(), &hold);
        part.lines = vec![Line::new("knobs", text)];
        part.findings = findings;
        Some(part)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_knob_file_that_reads_otherwise_is_lost_and_one_gone_is_not() {
        let file = |path: &str, wrote: &str, check, now: Option<&str>| HeldFile {
            knob: "vmstat",
            path: path.into(),
            wrote: wrote.into(),
            check,
            now: now.map(str::to_string),
        };
        let held = Hold {
            files: vec![
                file("proc/sys/vm/stat_interval", "1000", Check::Text, Some("1")),
                file(
                    "sys/class/net/eth0/queues/rx-0/rps_cpus",
                    "3",
                    Check::CpuMask,
                    Some("00000003"),
                ),
                file(
                    "sys/class/net/eth1/queues/rx-0/rps_cpus",
                    "3",
                    Check::CpuMask,
                    None,
                ),
            ],
        };
        let s = crate::shield::journal::State {
            version: 1,
            shield: CpuSet::parse_list("2-3").unwrap(),
            housekeeping: CpuSet::parse_list("0-1").unwrap(),
            mechanism: String::new(),
            shield_dir: String::new(),
            outside_procs: String::new(),
            complete: true,
            partition: None,
            writes_refused: vec![],
            request: None,
            parts: Default::default(),
            older: Default::default(),
        };
        let lost = held.lost(&s, "cpushield apply");
        assert_eq!(lost.len(), 1, "{lost:?}");
        assert_eq!(lost[0].id, "knobs");
        assert_eq!(
            lost[0].reason,
            "tune vmstat: /proc/sys/vm/stat_interval reads 1, the shield set 1000"
        );
        assert!(Hold::default().lost(&s, "").is_empty());
    }

    fn cpus(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    fn present(v: &str) -> FileState {
        FileState::Present {
            value: v.into(),
            writable: true,
        }
    }

    fn state(files: &[(&str, &str, FileState)]) -> TuneState {
        let mut st = TuneState::default();
        for (knob, f, s) in files {
            st.files_of
                .entry(knob.to_string())
                .or_default()
                .push(f.to_string());
            st.files.insert(f.to_string(), s.clone());
        }
        st
    }

    fn writes(p: &TunePlan) -> Vec<(String, String, Check, Undo)> {
        p.steps
            .iter()
            .map(|s| match &s.action {
                Action::Write {
                    path,
                    value,
                    check,
                    undo,
                } => (path.clone(), value.clone(), *check, undo.clone()),
                a => panic!("unexpected {a:?}"),
            })
            .collect()
    }

    #[test]
    fn resolve_all_and_names() {
        let all = resolve(&["all".into()]).unwrap();
        assert!(all.iter().all(|k| k.in_all));
        assert!(!all.iter().any(|k| k.name == "overcommit"));
        let some = resolve(&["vmstat".into(), "overcommit".into()]).unwrap();
        assert_eq!(
            some.iter().map(|k| k.name).collect::<Vec<_>>(),
            ["vmstat", "overcommit"]
        );
        let e = resolve(&["nope".into()]).unwrap_err();
        assert!(e.to_string().contains("rt-throttling"), "{e}");
        assert!(e.to_string().contains("\"nope\""), "{e}");
    }

    #[test]
    fn knob_names_are_unique_and_documented() {
        for (i, k) in KNOBS.iter().enumerate() {
            assert!(KNOBS[i + 1..].iter().all(|o| o.name != k.name));
            assert!(!k.why.is_empty() && !k.risk.is_empty());
        }
    }

    /// A machine with a file or two of every knob: most present, one
    /// read-only, one missing.
    fn every_knob() -> TuneState {
        state(&[
            (
                "rt-throttling",
                "proc/sys/kernel/sched_rt_runtime_us",
                present("950000"),
            ),
            ("vmstat", "proc/sys/vm/stat_interval", present("1000")),
            (
                "writeback",
                "sys/bus/workqueue/devices/writeback/cpumask",
                present("f"),
            ),
            (
                "writeback",
                "sys/bus/workqueue/devices/writeback/numa",
                present("1"),
            ),
            ("watchdog", WATCHDOG, present("1")),
            (
                "nmi-watchdog",
                NMI_WATCHDOG,
                FileState::Present {
                    value: "1".into(),
                    writable: false,
                },
            ),
            (
                "governor",
                "sys/devices/system/cpu/cpu2/cpufreq/scaling_governor",
                FileState::Missing,
            ),
            (
                "net-queues",
                "sys/class/net/eth0/queues/rx-0/rps_cpus",
                present("0"),
            ),
            (
                "net-queues",
                "sys/class/net/eth0/queues/tx-0/xps_cpus",
                present("c"),
            ),
            (
                "workqueue",
                "sys/devices/virtual/workqueue/cpumask",
                present("f"),
            ),
        ])
    }

    #[test]
    fn plan_values_checks_and_undo() {
        let names = ["all", "rt-throttling", "watchdog", "nmi-watchdog"];
        let knobs = resolve(&names.map(String::from)).unwrap();
        let st = every_knob();
        let already = vec!["sys/devices/virtual/workqueue/cpumask".to_string()];
        let p = plan(&st, &knobs, &cpus("2-3"), &cpus("0-1"), 4, &already);
        let w = writes(&p);
        assert_eq!(
            w,
            vec![
                (
                    "proc/sys/kernel/sched_rt_runtime_us".into(),
                    "-1".into(),
                    Check::Text,
                    Undo::Previous
                ),
                (
                    "sys/bus/workqueue/devices/writeback/cpumask".into(),
                    "3".into(),
                    Check::CpuMask,
                    Undo::Previous
                ),
                (
                    "sys/bus/workqueue/devices/writeback/numa".into(),
                    "0".into(),
                    Check::Text,
                    Undo::Previous
                ),
                (
                    WATCHDOG.into(),
                    "0".into(),
                    Check::None,
                    Undo::Value("1".into())
                ),
                (
                    "sys/class/net/eth0/queues/tx-0/xps_cpus".into(),
                    "3".into(),
                    Check::CpuMask,
                    Undo::Previous
                ),
            ]
        );
        assert!(p.steps.iter().all(|s| !s.fatal));
        for note in [
            TuneNote::TuneReadOnly {
                knob: "nmi-watchdog".into(),
                files: vec![NMI_WATCHDOG.into()],
            }
            .note(),
            TuneNote::TuneMissing {
                knob: "governor".into(),
                files: vec!["sys/devices/system/cpu/cpu2/cpufreq/scaling_governor".into()],
            }
            .note(),
        ] {
            assert!(p.notes.contains(&note), "{note:?}: {:?}", p.notes);
        }
        assert!(
            p.notes.contains(
                &TuneNote::TuneNothingToTune {
                    knob: "machinecheck".into()
                }
                .note()
            ),
            "{:?}",
            p.notes
        );
    }

    #[test]
    fn captured_watchdog_already_off_is_left_alone() {
        let knobs = resolve(&["watchdog".into()]).unwrap();
        let st = state(&[("watchdog", WATCHDOG, present("0"))]);
        let p = plan(&st, &knobs, &cpus("1"), &cpus("0"), 2, &[]);
        assert!(p.steps.is_empty());
    }

    #[test]
    fn the_hung_task_timeout_is_raised_never_lowered_nor_switched_on() {
        let knobs = resolve(&["hung-task".into()]).unwrap();
        let planned = |now: &str| {
            let st = state(&[("hung-task", HUNG_TASK_TIMEOUT, present(now))]);
            plan(&st, &knobs, &cpus("1"), &cpus("0"), 2, &[])
        };
        assert_eq!(
            writes(&planned("120")),
            vec![(
                HUNG_TASK_TIMEOUT.into(),
                "600".into(),
                Check::Text,
                Undo::Previous
            )]
        );
        for left_alone in ["0", "600", "86400"] {
            assert!(planned(left_alone).steps.is_empty(), "{left_alone}");
        }
        let garbage = planned("soon");
        assert!(garbage.steps.is_empty());
        assert!(
            (garbage.notes.iter()).any(|n| crate::report::note::text(n).contains("not a number: \"soon\"")),
            "{:?}",
            garbage.notes
        );
        assert!(!resolve(&["all".into()]).unwrap().iter().any(|k| k.name == "hung-task"));
    }
}
