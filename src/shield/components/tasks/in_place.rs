//! The tasks' part of a change in place: which of the fresh plan's task
//! steps the machine still needs, what becomes of the tasks inside the
//! shield (they stay with what remains of their CPUs, or leave), and the
//! affinities the old shield set that the new one gives back.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::{set_affinity, TaskRef};
use crate::cpulist::CpuSet;
use crate::shield::change::{Action, Step};
use crate::shield::journal::{Entry, State};
use crate::shield::snapshot::{in_shield_cgroup, CgroupSetup, Snapshot, SYSTEM_CGROUP_V1};
use crate::sys::procfs::Thread;
use crate::sys::systemd::SystemdCall;

/// What a change in place does to the tasks; `S` is where each step goes.
pub(in crate::shield) struct InPlace<S> {
    /// The record of every thread's affinity, made first when anything
    /// changes (undo puts back the affinity each has now: 6.1 resets them
    /// when the partition changes).
    pub record: Option<Step>,
    /// The fresh plan's task steps the machine does not hold yet.
    pub steps: Vec<(S, Step)>,
    /// Tasks whose CPUs all leave the shield, moved before it shrinks.
    pub leaving_moves: Vec<Step>,
    /// The affinities of the tasks inside, set after the shield changed.
    pub settled: Vec<Step>,
    /// Affinities the old shield set and the new one does not, given back.
    pub restored: Vec<Step>,
    /// Tasks inside the shield that stay, with their affinity after.
    pub staying: Vec<TaskRef>,
    /// Tasks inside the shield that leave it.
    pub leaving: Vec<TaskRef>,
}

/// The threads outside the shield with the affinity the journal recorded
/// first (what they had before the shield); the cgroups' effective CPUs
/// are forgotten (the live ones are the shield's doing).
pub(in crate::shield) fn before_shield(live: &mut Snapshot, (before, _): Recorded) {
    live.cgroup_cpus.clear();
    for t in &mut live.threads {
        if in_shield_cgroup(&t.cgroup) {
            continue;
        }
        if let Some(cpus) = before.get(&t.tid) {
            t.cpus_allowed = cpus.clone();
        }
    }
}

/// The oldest affinity the journal recorded of each thread, and the
/// threads whose affinity the shield set itself (not only recorded).
pub(in crate::shield) type Recorded<'a> = (&'a HashMap<i32, CpuSet>, &'a HashSet<i32>);

/// The tasks' part of changing the active shield (`state`, journal
/// `entries`) to the CPUs `to`, given the fresh plan's task steps (`mine`).
pub(in crate::shield) fn change<S>(
    live: &Snapshot,
    (state, entries): (&State, &[Entry]),
    to: &CpuSet,
    recorded: Recorded,
    mine: Vec<(S, Step)>,
) -> InPlace<S> {
    let tried_moves = tried_moves(entries);
    let moving_in = moving_in(mine.iter().map(|(_, s)| s), &tried_moves);
    let live_affinity: HashMap<i32, &CpuSet> = live
        .threads
        .iter()
        .map(|t| (t.tid, &t.cpus_allowed))
        .collect();
    let mut record = None;
    let mut steps = Vec::new();
    let mut set: HashSet<i32> = HashSet::new();
    for (slot, step) in mine {
        match &step.action {
            Action::Remember { .. } => record = Some(step),
            Action::MoveTask { tid, to, .. } if tried_moves.contains(&(*tid, to.as_str())) => {}
            Action::SetAffinity { pid, tid, cpus, .. } => {
                set.insert(*tid);
                if moving_in.contains(pid) || live_affinity.get(tid) != Some(&cpus) {
                    steps.push((slot, step));
                }
            }
            _ => steps.push((slot, step)),
        }
    }
    let inside = inside_tasks(live, state, entries, &state.shield, to);
    InPlace {
        record,
        steps,
        leaving_moves: inside.out,
        settled: inside.affinities,
        restored: restored(live, recorded, &set),
        staying: inside.staying,
        leaving: inside.leaving,
    }
}

/// The affinities the old shield set itself and no step of the new plan
/// sets (`set`), given back when they are not back already; those the
/// kernel reset when the cpusets changed are `off`'s business.
fn restored(live: &Snapshot, (before, set_by_shield): Recorded, set: &HashSet<i32>) -> Vec<Step> {
    let mut out = Vec::new();
    for t in &live.threads {
        if set.contains(&t.tid) || in_shield_cgroup(&t.cgroup) || t.is_pinned_by_kernel() {
            continue;
        }
        match before.get(&t.tid) {
            Some(cpus) if cpus != &t.cpus_allowed && set_by_shield.contains(&t.tid) => {
                out.push(set_affinity(t, cpus.clone()))
            }
            _ => {}
        }
    }
    out
}

/// The moves of tasks journaled already: (thread, destination).
fn tried_moves(entries: &[Entry]) -> HashSet<(i32, &str)> {
    entries
        .iter()
        .filter_map(|e| match &e.action {
            Action::MoveTask { tid, to, .. } => Some((*tid, to.as_str())),
            _ => None,
        })
        .collect()
}

/// Processes that move into the shield now (not tried before): their
/// threads' affinity is set again after the move (it resets it), even when
/// it reads the same.
fn moving_in<'a>(
    steps: impl Iterator<Item = &'a Step>,
    tried_moves: &HashSet<(i32, &str)>,
) -> HashSet<i32> {
    steps
        .filter_map(|s| match &s.action {
            Action::MoveTask { pid, tid, to, .. }
                if !tried_moves.contains(&(*tid, to.as_str())) =>
            {
                Some(*pid)
            }
            Action::Systemd {
                call: SystemdCall::StartScope { pids, .. },
                ..
            } => pids.first().copied(),
            _ => None,
        })
        .collect()
}

/// What happens to the tasks already inside the shield.
#[derive(Debug, Default)]
struct Inside {
    /// Moves out, before the shield shrinks.
    out: Vec<Step>,
    /// Affinities set after it changed.
    affinities: Vec<Step>,
    staying: Vec<TaskRef>,
    leaving: Vec<TaskRef>,
}

/// A task inside stays when one of its CPUs stays in the shield; its
/// affinity becomes what remains of it (all of the new shield when it had
/// all of the old one). A task none of whose CPUs stay leaves for the
/// cgroup it came from (the housekeeping CPUs): a v2 process whole, and
/// only when none of its threads stays; a v1 thread by itself.
fn inside_tasks(
    live: &Snapshot,
    state: &State,
    entries: &[Entry],
    from: &CpuSet,
    to: &CpuSet,
) -> Inside {
    let mut out = Inside::default();
    let mount = live.cgroup.mount().unwrap_or("");
    let v1 = matches!(live.cgroup, CgroupSetup::V1 { .. });
    // A task that had all of a shield of several CPUs follows the shield;
    // one pinned to some of its CPUs keeps those that stay.
    let new_affinity = |t: &Thread| -> Option<CpuSet> {
        if from.len() > 1 && t.cpus_allowed.is_superset_of(from) {
            Some(to.clone())
        } else {
            Some(t.cpus_allowed.intersection(to)).filter(|c| !c.is_empty())
        }
    };
    let mut by_pid: BTreeMap<i32, Vec<&Thread>> = BTreeMap::new();
    for t in live.threads.iter().filter(|t| in_shield_cgroup(&t.cgroup)) {
        by_pid.entry(t.pid).or_default().push(t);
    }
    for (pid, threads) in by_pid {
        let stays = |t: &&Thread| new_affinity(t).is_some();
        let whole_leaves = !v1 && !threads.iter().any(stays);
        for t in &threads {
            let place = match new_affinity(t) {
                Some(cpus) => Place::Stays(cpus),
                None if v1 => Place::LeavesAlone,
                None if whole_leaves => Place::LeavesWithProcess,
                None => Place::StaysWithProcess,
            };
            out.place(t, place, (from, to), mount);
        }
        if whole_leaves {
            let here = format!("{mount}{}", threads[0].cgroup);
            out.out.push(Step::optional(
                super::OWNER,
                Action::MoveTask {
                    pid,
                    tid: pid,
                    to: came_from(entries, pid).unwrap_or_else(|| state.outside_procs.clone()),
                    back: format!("{here}/cgroup.procs"),
                    affinities: threads
                        .iter()
                        .map(|t| (t.tid, t.cpus_allowed.clone()))
                        .collect(),
                },
            ));
        }
    }
    out
}

/// What becomes of one thread inside the shield.
enum Place {
    /// Some of its CPUs stay: it stays, with these CPUs.
    Stays(CpuSet),
    /// None stays, on cgroup v1: it leaves by itself.
    LeavesAlone,
    /// None stays for any thread of its process: the process leaves whole.
    LeavesWithProcess,
    /// None stays, but its process stays: it cannot leave alone (v2 places
    /// whole processes), and gets all of the shield, as the kernel would
    /// give it.
    StaysWithProcess,
}

impl Inside {
    /// Plans the steps that put thread `t` in its `place`, for a shield
    /// going from CPUs `from` to `to` in the hierarchy mounted at `mount`.
    fn place(&mut self, t: &Thread, place: Place, (from, to): (&CpuSet, &CpuSet), mount: &str) {
        match place {
            Place::Stays(cpus) => {
                // Set again after a resize even when unchanged: 6.1 resets
                // the affinity of every task of a cpuset whose CPUs change.
                if cpus != t.cpus_allowed || from != to {
                    self.affinities.push(set_affinity(t, cpus.clone()));
                }
                self.staying.push(TaskRef {
                    cpus,
                    ..TaskRef::from(t)
                });
            }
            Place::LeavesAlone => {
                let here = format!("{mount}{}", t.cgroup);
                self.out.push(Step::optional(
                    super::OWNER,
                    Action::MoveTask {
                        pid: t.pid,
                        tid: t.tid,
                        to: format!("{mount}/{SYSTEM_CGROUP_V1}/tasks"),
                        back: format!("{here}/tasks"),
                        affinities: vec![(t.tid, t.cpus_allowed.clone())],
                    },
                ));
                self.affinities
                    .push(set_affinity(t, t.cpus_allowed.clone()));
                self.leaving.push(TaskRef::from(t));
            }
            // Its own CPUs are housekeeping now: it keeps them (the move
            // resets them).
            Place::LeavesWithProcess => {
                self.affinities
                    .push(set_affinity(t, t.cpus_allowed.clone()));
                self.leaving.push(TaskRef::from(t));
            }
            Place::StaysWithProcess => {
                self.affinities.push(set_affinity(t, to.clone()));
                self.staying.push(TaskRef {
                    cpus: to.clone(),
                    ..TaskRef::from(t)
                });
            }
        }
    }
}

/// The `cgroup.procs` a process moved into the shield came from, as its
/// journaled move (or scope) says.
fn came_from(entries: &[Entry], pid: i32) -> Option<String> {
    entries.iter().find_map(|e| match &e.action {
        Action::MoveTask {
            pid: p, tid, back, ..
        } if *p == pid && *tid == pid => Some(back.clone()),
        Action::Systemd {
            call: SystemdCall::StartScope { pids, .. },
            back: Some(back),
            ..
        } if pids.contains(&pid) => Some(back.clone()),
        _ => None,
    })
}
