//! Changing an active shield in place: from the CPUs (and IRQs, knobs) of
//! one request to another without a moment with no shield, and without
//! moving out the tasks inside it that stay valid. Also what `apply` uses
//! to repair a shield that drifted: a reshape to the same request changes
//! only what no longer holds, and nothing when everything does.
//!
//! The plan is the one a fresh `on` would make on the machine as it was
//! before the shield (the live snapshot with every value the journal
//! changed replaced, by each component, with the value it recorded first:
//! [`Originals`]), with three differences:
//! - the shield's cgroup is resized instead of created;
//! - changes the machine already holds are left out;
//! - what the old shield changed and the new one does not is written back
//!   to what it was before the shield ([`restore_files`], and the tasks'
//!   affinities by the tasks' part).
//!
//! Each component says what its part of the change is (the order table,
//! [`crate::shield::components::change`]); here is what they share: the values
//! before the shield, the files written back, the notes.
//!
//! Every change is appended to the existing journal with its previous
//! value, so `off` still replays everything in reverse, to the machine as
//! it was before the first `on`.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::apply::reads_as;
use super::change::TaskRef;
use super::change::{Action, Check, Undo};
use super::journal::{Entry, State};
use super::note::Note;
use super::parts::OwnFacts;
use super::plan::Plan;
use super::snapshot::Snapshot;
use super::undo::original_affinities;
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
    /// IRQs whose new affinity the kernel refused before and that still
    /// have what they had: not tried again.
    pub still_refused: Vec<u32>,
    /// What each component keeps of the new shield in the journal's
    /// state, whether its steps run or it holds already (see
    /// [`crate::shield::component::Component::record`]).
    pub records: OwnFacts,
}

impl Originals {
    /// The value the file `path` had before the shield, as recorded.
    pub(in crate::shield) fn file(&self, path: &str) -> Option<&str> {
        self.files.get(path).map(|(v, _)| v.as_str())
    }
}

impl Reshape {
    /// A change of the active shield (`state`) to the `fresh` plan's
    /// shield, before its parts are planned.
    pub(in crate::shield) fn of(fresh: &Plan, state: &State) -> Reshape {
        Reshape {
            plan: Plan {
                steps: Vec::new(),
                ..fresh.clone()
            },
            from: state.shield.clone(),
            staying: Vec::new(),
            leaving: Vec::new(),
            still_refused: Vec::new(),
            records: OwnFacts::default(),
        }
    }
}

/// The oldest value the journal recorded for each target it changed: what
/// the machine had before the shield.
#[derive(Debug, Default)]
pub(in crate::shield) struct Originals {
    /// Kernel file (relative path) → value before.
    pub files: BTreeMap<String, (String, Check)>,
    /// Thread → affinity before.
    pub affinities: HashMap<i32, CpuSet>,
    /// Threads whose affinity the shield set itself (not only recorded).
    pub set_by_shield: HashSet<i32>,
}

/// The oldest values the journal `entries` recorded.
pub(in crate::shield) fn originals(entries: &[Entry]) -> Originals {
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

/// The notes of a change in place: the fresh plan's, what changed, and
/// the components' notes of the change (`own`).
pub(in crate::shield) fn notes(
    fresh: &Plan,
    from: &CpuSet,
    to: &CpuSet,
    own: Vec<Note>,
) -> Vec<Note> {
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
    notes.extend(own);
    notes
}

/// The writes that put back the files the old shield changed and the new
/// plan does not write (`written`): an IRQ or knob the new shield does not
/// need to move, when it is not already back. The shield's cgroups and its
/// CPUs' online files are their components' business.
pub(in crate::shield) fn restore_files(
    live: &Snapshot,
    orig: &Originals,
    written: &HashSet<&str>,
    read: &dyn Fn(&str) -> Option<String>,
) -> Vec<Action> {
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
            Some(now) if !reads_as(*check, &now, before) => out.push(Action::Write {
                path: path.clone(),
                value: before.clone(),
                check: *check,
                undo: Undo::Previous,
            }),
            _ => {}
        }
    }
    out
}

/// The records of a change in place (`changed`), made to undo to the
/// machine as the old shield held it when the change began, for its
/// rollback. They were planned on the machine before the first shield
/// (so that the new shield is the one a fresh `on` makes), and they stay
/// so in the journal: `off` and a damaged journal's salvage want the
/// values from before the shield. A rollback undoes them alone and must
/// leave the old shield whole: each thread's recorded affinity becomes
/// the one it had (`live`, read before the change), and a write undone to
/// a fixed value (the value before the shield) is undone to the value the
/// old shield's records (`kept`) wrote last, where they wrote one.
pub(in crate::shield) fn undone_to_now(changed: &mut [Entry], live: &Snapshot, kept: &[Entry]) {
    let now: HashMap<i32, &CpuSet> = (live.threads.iter())
        .map(|t| (t.tid, &t.cpus_allowed))
        .collect();
    let relive = |list: &mut Vec<(i32, CpuSet)>| {
        for (tid, cpus) in list.iter_mut() {
            if let Some(live) = now.get(tid) {
                *cpus = (*live).clone();
            }
        }
    };
    let mut held: HashMap<&str, &str> = HashMap::new();
    for e in kept {
        if let Action::Write { path, value, .. } = &e.action {
            held.insert(path, value);
        }
    }
    for e in changed {
        match &mut e.action {
            Action::SetAffinity { tid, previous, .. } => {
                if let Some(live) = now.get(tid) {
                    *previous = (*live).clone();
                }
            }
            Action::Remember { affinities } | Action::MoveTask { affinities, .. } => {
                relive(affinities)
            }
            Action::Write {
                path,
                undo: Undo::Value(value),
                ..
            } => {
                if let Some(held) = held.get(path.as_str()) {
                    *value = held.to_string();
                }
            }
            _ => {}
        }
    }
}
