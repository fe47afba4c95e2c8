//! Changing an active shield in place: from the CPUs (and IRQs, knobs) of
//! one request to another without a moment with no shield, and without
//! moving out the tasks inside it that stay valid. Also what `apply` uses
//! to repair a shield that drifted: a reshape to the same request changes
//! only what no longer holds, and nothing when everything does.
//!
//! The plan is the one a fresh `on` would make on the machine as it was
//! before the shield (the [`original_view`]: the live snapshot with every
//! value the journal changed replaced by the value it recorded first),
//! with three differences:
//! - the shield's cgroup is resized instead of created;
//! - changes the machine already holds are left out;
//! - what the old shield changed and the new one does not is written back
//!   to what it was before the shield ([`restore_files`], and the tasks'
//!   affinities by the tasks' part).
//!
//! Each component says what its part of the change is (the order table,
//! [`super::components::change`]); here is what they share: the values
//! before the shield, the machine as it was, the files written back, the
//! notes.
//!
//! Every change is appended to the existing journal with its previous
//! value, so `off` still replays everything in reverse, to the machine as
//! it was before the first `on`.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::apply::{original_affinities, reads_as};
use super::change::{Action, Check, Owner, Step, Undo};
use super::irqbalance;
use super::journal::{Entry, State};
use super::note::Note;
use super::plan::Plan;
use super::snapshot::{
    in_shield_cgroup, irq_affinity_file, irq_of_affinity_file, Snapshot, DEFAULT_IRQ_AFFINITY,
    WORKQUEUE_MASK,
};
use super::tasks::TaskRef;
use crate::cpulist::CpuSet;

/// The plan of an in-place change, and what it does to the tasks inside.
#[derive(Debug, Clone)]
pub struct Reshape {
    /// The changes, as a plan for the new request (its `steps` are only
    /// what differs from the machine now).
    pub plan: Plan,
    /// The shield before.
    pub from: CpuSet,
    /// Tasks inside the shield that stay, with their affinity after.
    pub staying: Vec<TaskRef>,
    /// Tasks inside the shield whose CPUs all leave it: moved out to the
    /// housekeeping CPUs.
    pub leaving: Vec<TaskRef>,
    /// The irqbalance ban the new shield needs, whether it holds already or not.
    pub irqbalance_ban: Option<CpuSet>,
    /// IRQs whose new affinity the kernel refused before and that still
    /// have what they had: not tried again.
    pub still_refused: Vec<u32>,
    /// Whether the new shield has the starvation guard (running already or
    /// started by a step): where the old one had it and this one has not,
    /// the change stops it.
    pub guard: bool,
}

impl Reshape {
    /// A change of the active shield (`state`) to the `fresh` plan's
    /// shield, before its parts are planned.
    pub(super) fn of(fresh: &Plan, state: &State) -> Reshape {
        Reshape {
            plan: Plan {
                steps: Vec::new(),
                ..fresh.clone()
            },
            from: state.shield.clone(),
            staying: Vec::new(),
            leaving: Vec::new(),
            irqbalance_ban: None,
            still_refused: Vec::new(),
            guard: false,
        }
    }
}

/// The oldest value the journal recorded for each target it changed: what
/// the machine had before the shield.
#[derive(Debug, Default)]
pub(super) struct Originals {
    /// Kernel file (relative path) → value before.
    pub files: BTreeMap<String, (String, Check)>,
    /// Thread → affinity before.
    pub affinities: HashMap<i32, CpuSet>,
    /// Threads whose affinity the shield set itself (not only recorded).
    pub set_by_shield: HashSet<i32>,
}

/// The oldest values the journal `entries` recorded.
pub(super) fn originals(entries: &[Entry]) -> Originals {
    let mut out = Originals {
        affinities: original_affinities(entries)
            .into_iter()
            .map(|(tid, cpus, _)| (tid, cpus.clone()))
            .collect(),
        ..Originals::default()
    };
    for e in entries {
        match &e.action {
            Action::Write {
                path, undo, check, ..
            } => {
                let before = match (undo, &e.previous) {
                    (Undo::Previous, Some(p)) => p.clone(),
                    (Undo::Value(v), _) => v.clone(),
                    _ => continue,
                };
                out.files.entry(path.clone()).or_insert((before, *check));
            }
            Action::SetAffinity { tid, .. } => {
                out.set_by_shield.insert(*tid);
            }
            _ => {}
        }
    }
    out
}

/// The live snapshot as the machine was before the shield: IRQ, default
/// IRQ and workqueue masks, and thread affinities the journal recorded
/// are put back. Cgroups stay as they are (the shield's own are resized,
/// not planned anew).
pub fn original_view(live: &Snapshot, entries: &[Entry]) -> Snapshot {
    let orig = originals(entries);
    let mut snap = live.clone();
    // The live effective CPUs are the shield's doing, not the original's.
    snap.cgroup_cpus.clear();
    if let Some(irqb) = snap.owners.irqbalance.as_mut() {
        irqbalance::before_shield(irqb, entries);
    }
    let file = |path: &str| orig.files.get(path).map(|(v, _)| v.as_str());
    for irq in &mut snap.irqs {
        if let Some(cpus) =
            file(&irq_affinity_file(irq.irq)).and_then(|v| CpuSet::parse_list(v).ok())
        {
            irq.affinity = cpus;
        }
    }
    if let Some(mask) = file(DEFAULT_IRQ_AFFINITY).and_then(|v| CpuSet::parse_mask(v).ok()) {
        snap.default_irq_affinity = Some(mask);
    }
    if let Some(mask) = file(WORKQUEUE_MASK).and_then(|v| CpuSet::parse_mask(v).ok()) {
        snap.workqueue_mask = Some(mask);
    }
    for t in &mut snap.threads {
        if in_shield_cgroup(&t.cgroup) {
            continue;
        }
        if let Some(cpus) = orig.affinities.get(&t.tid) {
            t.cpus_allowed = cpus.clone();
        }
    }
    snap
}

/// The notes of a change in place: the fresh plan's, what changed, and the
/// tasks that had to leave.
pub(super) fn notes(fresh: &Plan, from: &CpuSet, to: &CpuSet, leaving: &[TaskRef]) -> Vec<Note> {
    let mut notes = fresh.notes.clone();
    if from != to {
        notes.insert(
            0,
            Note::ShieldChangedInPlace {
                from: from.clone(),
                to: to.clone(),
            },
        );
    }
    if !leaving.is_empty() {
        notes.push(Note::TasksLeftShield {
            tasks: leaving.len(),
            housekeeping: fresh.housekeeping.clone(),
        });
    }
    notes
}

/// The step that writes back a file the old shield wrote, owned by the
/// component whose file the journal's path is.
fn restore_file(write: Action) -> Step {
    let Action::Write { path, .. } = &write else {
        unreachable!("restore_file is given writes")
    };
    match irq_of_affinity_file(path) {
        Some(irq) => Step::optional(Owner::Irqs, write).on_irq(irq),
        None if path == DEFAULT_IRQ_AFFINITY => Step::optional(Owner::Irqs, write),
        None if path == WORKQUEUE_MASK => Step::optional(Owner::Workqueues, write),
        None => Step::optional(Owner::Knobs, write),
    }
}

/// Writes back the files the old shield changed and the new plan does not
/// write (`written`): an IRQ or knob the new shield does not need to move,
/// when it is not already back. The shield's cgroups and its CPUs' online
/// files are their components' business.
pub(super) fn restore_files(
    live: &Snapshot,
    orig: &Originals,
    written: &HashSet<&str>,
    read: &dyn Fn(&str) -> Option<String>,
) -> Vec<Step> {
    let mount = live.cgroup.mount().unwrap_or("");
    let mut out = Vec::new();
    for (path, (before, check)) in &orig.files {
        let cgroup_file = !mount.is_empty() && path.starts_with(&format!("{mount}/"));
        if cgroup_file
            || *check == Check::None
            || path.ends_with("/online")
            || written.contains(path.as_str())
        {
            continue;
        }
        match read(path) {
            Some(now) if !reads_as(*check, &now, before) => out.push(restore_file(Action::Write {
                path: path.clone(),
                value: before.clone(),
                check: *check,
                undo: Undo::Previous,
            })),
            _ => {}
        }
    }
    out
}
