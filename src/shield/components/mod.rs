//! The shield's components, composed in one place.
//!
//! [`ORDER`] is the only registry: each row is one component, a
//! [`Component`] implemented in the component's own file. The engine's
//! loops over it are here: every component checks its part of a request,
//! then plans its part of a fresh shield, or (see [`super::reshape`]) of a
//! change in place; the changes only a component knows how to make and
//! undo are handed to it through [`Effects`], so that the engine (apply,
//! undo, the journal) names none of them. Beside the order: the
//! components' facts together ([`snapshot`], [`read`], [`owners`]), what
//! they settle after a plan is applied ([`settle`]), `on`'s report
//! ([`report`]) and `status` ([`status`]).

use std::collections::{HashMap, HashSet};

use super::apply::{ApplyError, Effects, Refusal};
use super::change::{Action, Step};
use super::component::{
    in_order, written, AuditReading, Audited, Changing, Component, Draft, InPlace, Keeps, Phase,
    Planning, ReadiesRealtime, Undoes,
};
use super::journal::{Entry, State};
use super::kept::KeptTask;
use super::options::Declared;
use super::parts::OwnFacts;
use super::plan::{self, Plan, PlanError};
use super::request::Request;
use super::reshape::{self, Reshape};
use super::undo::{KeepOnCpus, Undone};
use crate::cpulist::CpuSet;
use crate::shield::snapshot::Snapshot;
use crate::sys::Sys;

/// The registry: from one line per component (its module, and `options`
/// when it declares options of its own), the order they plan in
/// ([`ORDER`]) and every component's options flattened into one struct
/// ([`Options`]), which `on`, the config file and `verify` take whole.
macro_rules! registry {
    ($( $module:ident $(: $has:ident)? ),* $(,)?) => {
        $(
            #[doc = concat!("The component `", stringify!($module), "`: its file says what it is.")]
            pub mod $module;
        )*

        /// The components in the one order there is: the order they check
        /// and plan in, and within each phase of the shield's changes the
        /// order those are made in (see [`Phase`]): irqbalance's ban, the
        /// cgroups, the tasks, the IRQs, the CPUs' restart, then the
        /// workqueues, the cache, the guard (before the knobs turn RT
        /// throttling off, which the knobs tell it when they check), the
        /// kernel threads, the knobs, the idle states, the healer and
        /// expedited RCU.
        pub(super) const ORDER: &[&dyn Component] = &[$( &$module::Part ),*];

        /// Every component's options, each declared in its component
        /// (its flags, parsers, help and config keys); the request keeps
        /// them at its top level, each under its config key.
        #[derive(clap::Args, Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
        #[group(skip)]
        pub struct Options {
            $($(
                #[doc = concat!("The ", stringify!($has), " of ", stringify!($module), ".")]
                #[command(flatten)]
                #[serde(flatten)]
                pub $module: $module::Options,
            )?)*
        }

        impl Options {
            /// Checks each component's options beyond their parsers; the
            /// first refusal, naming its option.
            pub fn check(&self) -> Result<(), String> {
                $($( let _ = stringify!($has); Declared::check(&self.$module)?; )?)*
                Ok(())
            }

            /// Each option as `verify` compares it: `(config key, text)`.
            pub fn compared(&self) -> Vec<(String, String)> {
                let mut out = Vec::new();
                $($( let _ = stringify!($has); out.extend(Declared::compared(&self.$module)); )?)*
                out
            }

            /// The `cpushield on` words that give them.
            pub fn words(&self) -> Vec<String> {
                let mut out = Vec::new();
                $($( let _ = stringify!($has); out.extend(Declared::words(&self.$module)); )?)*
                out
            }

            /// Each config key with an example value, for the config
            /// file's documentation, in the components' order.
            pub fn examples() -> Vec<(&'static str, &'static str)> {
                let mut out = Vec::new();
                $($( let _ = stringify!($has); out.extend_from_slice(<$module::Options as Declared>::EXAMPLES); )?)*
                out
            }
        }
    };
}

registry! {
    irqbalance,
    mechanism: options,
    tasks,
    irqs: options,
    hotplug: options,
    workqueues,
    resctrl: options,
    guard: options,
    rt_kthreads: options,
    knobs: options,
    idle_states: options,
    healer: options,
    // Last, though its place does not matter: one soak with it before the
    // healer saw systemd's AllowedCPUs=1-3 not show once, and its rollback
    // took irqbalance's ban away (fixed: the ban's record keeps what it
    // replaced); the same soak with it before the healer then passed 50
    // rounds and 12 changes in place (tests/vm/distro, 15-soak).
    rcu: options,
}

/// A component's place in the registry, by its name in the steps it
/// plans: the order its steps are made in within their phase.
fn rank(owner: &super::change::Owner) -> usize {
    (ORDER.iter().position(|part| part.owner() == *owner)).unwrap_or(ORDER.len())
}

/// The step that writes back a file the old shield wrote, owned by the
/// component that claims the file. Every file a journal record may name
/// is one a component reaches, so one claims it; were none to, the
/// engine writes it back as the shield's.
fn owned_restore(write: Action) -> Step {
    let claimed = match &write {
        Action::Write { path, .. } => ORDER
            .iter()
            .find_map(|part| part.claims(path).map(|subject| (part.owner(), subject))),
        _ => None,
    };
    match claimed {
        Some((owner, subject)) => Step {
            subject,
            ..Step::optional(owner, write)
        },
        None => Step::optional(super::change::Owner::SHIELD, write),
    }
}

/// Checks the request against the machine and plans the shield: every
/// part checks its part of the request, then plans its part, in [`ORDER`].
pub fn plan(snap: &Snapshot, req: &Request) -> Result<Plan, PlanError> {
    draft(snap, req).map(|d| d.finish(&rank))
}

/// [`plan`], its steps still in their slots.
fn draft(snap: &Snapshot, req: &Request) -> Result<Draft, PlanError> {
    let valid = plan::validate(snap, req)?;
    let cx = Planning {
        snap,
        req,
        shield: &valid.shield,
        housekeeping: &valid.housekeeping,
    };
    let mut draft = Draft {
        plan: Plan::new(&valid),
        steps: Vec::new(),
    };
    for part in ORDER {
        part.check(&cx, &mut draft)?;
    }
    for part in ORDER {
        part.plan(&cx, &mut draft)?;
    }
    Ok(draft)
}

/// Plans the change of the active shield (`state`, journal `entries`) to
/// `req`, on the machine `live`: the fresh plan on the machine as it was
/// before the shield, each component's part of it changed in place
/// ([`Part::change`]), and the files the old shield wrote and the new one
/// does not written back. `read` reads a kernel file now (relative path),
/// to leave out what already holds. Refuses what `on` refuses.
pub fn change(
    live: &Snapshot,
    (state, entries): (&State, &[Entry]),
    req: &Request,
    read: &dyn Fn(&str) -> Option<String>,
) -> Result<Reshape, PlanError> {
    let originals = reshape::originals(entries);
    let mut before = live.clone();
    for part in ORDER {
        part.before(&originals, entries, &mut before);
    }
    let fresh = draft(&before, req)?;
    let written: HashSet<&str> = written(&fresh.steps).collect();
    let mut out = Changing {
        change: Reshape::of(&fresh.plan, state),
        steps: Vec::new(),
        record: None,
        notes: Vec::new(),
        refused: None,
    };
    let mut restore = reshape::restore_files(live, &originals, &written, read);
    // A CPU's file CRI-O's hook holds for a running pod (the plans leave it
    // out) is not written back either: the shield's record of it stays for
    // `off`, which hands the value from before the shield to the hook.
    restore.retain(|a| match a {
        Action::Write { path, .. } => {
            crate::crio::saved_where(path, &|f| read(f).is_some()).is_none()
        }
        _ => true,
    });
    out.add(Phase::Restore, restore.into_iter().map(owned_restore));
    let cx = InPlace {
        live,
        state,
        entries,
        req,
        fresh: &fresh.plan,
        originals: &originals,
        read,
    };
    for part in ORDER {
        let mine = (fresh.steps.iter())
            .filter(|(_, s)| s.owner == part.owner())
            .cloned()
            .collect();
        part.change(&cx, mine, &mut out);
    }
    if let Some(refusal) = out.refused {
        return Err(refusal);
    }
    in_order(&mut out.steps, &rank);
    let mut steps: Vec<Step> = out.steps.into_iter().map(|(_, s)| s).collect();
    if let (Some(record), false) = (out.record, steps.is_empty()) {
        // Undo puts back the affinity every thread has now (the kernel of
        // 6.1 resets them when the partition changes), then the older ones.
        steps.insert(0, record);
    }
    let mut change = out.change;
    change.plan.notes = reshape::notes(&fresh.plan, &state.shield, &fresh.plan.shield, out.notes);
    change.plan.steps = steps;
    Ok(change)
}

/// What every component keeps in the journal's state of the shield `on`
/// made from `plan`, as `out` reports it.
pub(super) fn records(plan: &Plan, out: &crate::shield::report::OnReport) -> OwnFacts {
    let mut records = OwnFacts::default();
    for part in ORDER {
        if let Some(record) = part.record(plan, out) {
            records.put(part.owner().name(), &record);
        }
    }
    records
}

/// Whether the old shield runs something a change in place to one keeping
/// `records` no longer asks for.
pub(super) fn left_running(old: &State, records: &OwnFacts) -> bool {
    ORDER.iter().any(|part| part.left_running(old, records))
}

/// Stops what the old shield ran and a change in place keeping `records`
/// no longer asks for, once the change holds; the refusals.
pub(super) fn stop_left_running(
    sys: &Sys,
    old: &State,
    records: &OwnFacts,
    snap: &Snapshot,
) -> Vec<Refusal> {
    (ORDER.iter())
        .filter(|part| part.left_running(old, records))
        .flat_map(|part| part.stop_left_running(sys, snap))
        .collect()
}

/// The `cpushield on` command line that makes `req`, each component's
/// option in its own words.
pub fn command_line(req: &Request) -> String {
    let options = req.declared::<Options>().unwrap_or_default();
    req.command_line_with(&options.words())
}

/// What the components' audit rules read beyond the audit's shared
/// facts, each under its name, for the CPUs `targets` (`entries`: the
/// active shield's journal, empty without one).
pub fn read_for_audit(sys: &Sys, targets: &CpuSet, entries: &[Entry]) -> OwnFacts {
    let cx = AuditReading {
        sys,
        targets,
        entries,
    };
    let mut facts = OwnFacts::default();
    for part in ORDER.iter().filter_map(|p| p.looks()) {
        part.audit_read(&cx, &mut facts);
    }
    facts
}

/// The components' audit findings, in their order.
pub fn audit(facts: &Audited) -> Vec<crate::finding::Finding> {
    (ORDER.iter().filter_map(|p| p.looks()))
        .flat_map(|part| part.audit(facts))
        .collect()
}

/// Whether CRI-O's hooks change what the component named `owner` holds
/// (its findings carry its name), as it declares.
pub fn crio_hooks_change(owner: &str) -> bool {
    (ORDER.iter()).any(|part| part.owner().name() == owner && part.crio_hooks_change())
}

/// Which of cpushield's options writes what tuned's `[section] key`
/// writes too, as the component that owns it declares.
pub fn tuned_overlap(section: &str, key: &str) -> Option<String> {
    (ORDER.iter().flat_map(|part| part.tuned_overlaps()))
        .find(|(s, k, _)| *s == section && *k == key)
        .map(|(_, _, ours)| ours.to_string())
}

/// A component's own `action` as `on --dry-run` prints it in the plan.
pub fn plan_line(action: &Action) -> Option<String> {
    undoers().find_map(|part| part.plan_line(action))
}

/// The tasks on the shield of `state` that `off` keeps on their CPUs, and
/// what the undo is told of them; with any, the shield is readied for them
/// to leave it on their CPUs first.
pub(super) fn keep_through_off(sys: &Sys, state: &State) -> (Vec<KeptTask>, KeepOnCpus) {
    let tasks: Vec<KeptTask> = keepers().flat_map(|k| k.kept(sys, state)).collect();
    if tasks.is_empty() {
        return (tasks, KeepOnCpus::default());
    }
    let mut redirect = HashMap::new();
    for keeper in keepers() {
        redirect.extend(keeper.release_for_kept(sys, state));
    }
    let keep = super::kept::on_cpus(&tasks, redirect);
    (tasks, keep)
}

/// Why a change in place must not move the tasks `leaving` out of the
/// shield, keeping `staying`; `None` when no component keeps them.
pub(super) fn refuse_leaving(
    sys: &Sys,
    leaving: &[super::change::TaskRef],
    staying: &crate::cpulist::CpuSet,
) -> Option<String> {
    keepers().find_map(|k| k.refuse_leaving(sys, leaving, staying))
}

/// For `run --fifo` and `--rr`: readies the shielded CPUs `cpus` for a
/// task of real-time `priority`, making the steps through `make`; what the
/// user should know.
pub(super) fn ready_for_realtime(
    sys: &Sys,
    cpus: &CpuSet,
    priority: u32,
    make: &dyn Fn(&[Step]) -> Result<(), super::error::ShieldError>,
) -> Result<Vec<super::note::Note>, super::error::ShieldError> {
    let mut notes = Vec::new();
    for part in readiers() {
        notes.extend(part.ready(sys, cpus, priority, make)?);
    }
    Ok(notes)
}

/// For `run --dry-run` with a real-time policy: what would still run below
/// a task of `priority` on `cpus`.
pub fn realtime_below(sys: &Sys, cpus: &CpuSet, priority: u32) -> Vec<super::note::Note> {
    (readiers())
        .filter_map(|part| part.below(sys, cpus, priority))
        .collect()
}

/// The components that ready the shielded CPUs for a real-time task.
fn readiers() -> impl Iterator<Item = &'static dyn ReadiesRealtime> {
    ORDER.iter().filter_map(|p| p.readies_realtime())
}

/// The components that keep tasks on their CPUs through `off`.
fn keepers() -> impl Iterator<Item = &'static dyn Keeps> {
    ORDER.iter().filter_map(|p| p.keeps())
}

/// The components that make and undo changes of their own.
fn undoers() -> impl Iterator<Item = &'static dyn Undoes> {
    ORDER.iter().filter_map(|p| p.undoes())
}

/// Every component, for the engine.
pub(super) struct Components;

/// What the engine is given to make and undo the components' own changes.
pub(super) const EFFECTS: &Components = &Components;

impl Effects for Components {
    fn make(&self, sys: &Sys, action: &Action) -> Option<Result<(), ApplyError>> {
        undoers().find_map(|part| part.make(sys, action))
    }

    fn previous(&self, sys: &Sys, action: &Action) -> Option<String> {
        undoers().find_map(|part| part.previous(sys, action))
    }

    /// A CPU file CRI-O's hook holds for a pod is left to the hook whichever
    /// component wrote it (the same rule as the change in place's, in
    /// [`change`]); every other entry goes to the components.
    fn undo(&self, sys: &Sys, entry: &Entry, out: &mut Undone) -> bool {
        crio_held::undo(sys, entry, out) || undoers().any(|part| part.undo(sys, entry, out))
    }

    fn after_undo(&self, sys: &Sys, entries: &[Entry], out: &mut Undone) {
        for part in undoers() {
            part.after_undo(sys, entries, out);
        }
    }

    fn undone_first(&self, action: &Action) -> bool {
        undoers().any(|part| part.undone_first(action))
    }

    fn undone_last(&self, action: &Action) -> bool {
        undoers().any(|part| part.undone_last(action))
    }

    fn describe(&self, action: &Action) -> Option<String> {
        undoers().find_map(|part| part.describe(action))
    }

    /// Everything the components change, as a journal record may name it:
    /// each declares its own ([`Component::reaches`]).
    fn reach(&self) -> super::reach::Reach {
        let mut reach = super::reach::Reach::default();
        for part in ORDER {
            part.reaches(&mut reach);
        }
        reach
    }

    fn within(&self, action: &Action, bounds: &super::reach::Bounds) -> Option<Result<(), String>> {
        undoers().find_map(|part| part.within(action, bounds))
    }

    fn fold(&self, first: &Action, later: &Action) -> Option<Action> {
        undoers().find_map(|part| part.fold(first, later))
    }

    fn cgroup_removed(&self, action: &Action) -> Option<String> {
        undoers().find_map(|part| part.cgroup_removed(action))
    }
}

// What the components offer the commands, the reports and the audit.
pub use guard::{unprotected_kernel_work, BOOSTS_METRIC as GUARD_BOOSTS};
pub use healer::drift as heal_drift;
pub use irqbalance::own_ban as irqbalance_own_ban;
pub use knobs::List as TuneList;
pub use mechanism::named as named_sets;
pub use tasks::move_run::{enter_shield, move_tasks, run_target, MoveReport, RunPolicy};
pub use tasks::{table as task_table, Direction, Place};

mod crio_held;
pub mod read;
#[cfg(test)]
mod registry_tests;
pub mod report;
pub mod settle;
pub mod status;

#[cfg(test)]
mod change_tests;
#[cfg(test)]
mod plan_tests;
#[cfg(test)]
pub(in crate::shield) mod test_machine;
