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
//! - the shield's cgroup is resized instead of created ([`mechanism::resize`]);
//! - changes the machine already holds are left out;
//! - what the old shield changed and the new one does not is written back
//!   to what it was before the shield ([`restore_steps`]).
//!
//! Every change is appended to the existing journal with its previous
//! value, so `off` still replays everything in reverse, to the machine as
//! it was before the first `on`.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::apply::{original_affinities, reads_as};
use super::change::{Action, Check, Owner, Step, Undo};
use super::journal::{Entry, State};
use super::note::Note;
use super::plan::{Plan, PlanError};
use super::request::Request;
use super::snapshot::{
    cpu_online_file, in_shield_cgroup, irq_affinity_file, irq_of_affinity_file, CgroupSetup,
    Snapshot, DEFAULT_IRQ_AFFINITY, SYSTEM_CGROUP_V1, WORKQUEUE_MASK,
};
use super::tasks::{self, TaskRef};
use super::{components, guard, irqbalance, mechanism, rt_kthreads};
use crate::cpulist::CpuSet;
use crate::sys::procfs::Thread;
use crate::sys::systemd::SystemdCall;

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

/// The oldest value the journal recorded for each target it changed: what
/// the machine had before the shield.
#[derive(Debug, Default)]
struct Originals {
    /// Kernel file (relative path) → value before.
    files: BTreeMap<String, (String, Check)>,
    /// Thread → affinity before.
    affinities: HashMap<i32, CpuSet>,
    /// Threads whose affinity the shield set itself (not only recorded).
    set_by_shield: HashSet<i32>,
}

impl Originals {
    /// Whether IRQ `irq` (its affinity file `path`) refused the shield
    /// before and still reads as it did before the shield: not tried again.
    fn refused_before(
        &self,
        state: &State,
        irq: u32,
        path: &str,
        read: &impl Fn(&str) -> Option<String>,
    ) -> bool {
        state.irqs_kept.contains(&irq)
            && self.files.get(path).is_some_and(|(before, check)| {
                read(path).is_some_and(|now| reads_as(*check, &now, before))
            })
    }
}

fn originals(entries: &[Entry]) -> Originals {
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

/// Plans the change of the active shield (`state`, journal `entries`) to
/// `req`, on the machine `live`. `read` reads a kernel file now (relative
/// path), to leave out what already holds. Refuses what `on` refuses.
pub fn plan(
    live: &Snapshot,
    entries: &[Entry],
    state: &State,
    req: &Request,
    read: impl Fn(&str) -> Option<String>,
) -> Result<Reshape, PlanError> {
    let orig = originals(entries);
    let fresh = components::plan(&original_view(live, entries), req)?;
    let from = state.shield.clone();
    let to = fresh.shield.clone();
    let mount = live.cgroup.mount().unwrap_or("").to_string();
    let old_hotplug: HashSet<String> = from.iter().map(cpu_online_file).collect();
    // What the kernel refused before and still has as it was: a write it
    // refuses for good (a kernel-managed IRQ, kthreadd's v1 cpuset) is not
    // tried again, so that the same request twice changes nothing.
    let tried_moves = tried_moves(entries);
    let moving_in = moving_in(&fresh, &tried_moves);
    let live_affinity: HashMap<i32, &CpuSet> = live
        .threads
        .iter()
        .map(|t| (t.tid, &t.cpus_allowed))
        .collect();
    let inside = inside_tasks(live, state, entries, &from, &to);

    let irqbalance_ban = irqbalance::planned_ban(&fresh.steps);
    let wants_guard = fresh
        .steps
        .iter()
        .any(|s| matches!(s.action, Action::Guard { .. }));
    // Tasks whose CPUs all leave go before the shield shrinks.
    let cpus = (&fresh.shield, &fresh.housekeeping, fresh.partition.as_ref());
    let resize: Vec<Step> = (inside.out.iter().cloned())
        .chain(mechanism::resize(live, state, cpus, &read))
        .collect();
    let mut still_refused = Vec::new();
    let mut steps: Vec<Step> = Vec::new();
    let mut remember = None;
    let mut resized = false;
    let mut written: HashSet<String> = HashSet::new();
    let mut set: HashSet<i32> = HashSet::new();
    for step in &fresh.steps {
        match &step.action {
            Action::Remember { .. } => remember = Some(step.clone()),
            a @ Action::IrqbalanceBan { .. } => {
                if !irqbalance::ban_in_place(live.owners.irqbalance.as_ref(), a) {
                    steps.push(step.clone());
                }
            }
            a if is_cgroup(a, &mount) => {
                if !resized {
                    steps.extend(resize.iter().cloned());
                    resized = true;
                }
            }
            Action::Write { path, .. } if old_hotplug.contains(path) => {}
            Action::Write {
                path, value, check, ..
            } => {
                written.insert(path.clone());
                if let Some(irq) = step
                    .irq()
                    .filter(|&n| orig.refused_before(state, n, path, &read))
                {
                    still_refused.push(irq);
                } else if !read(path).is_some_and(|now| reads_as(*check, &now, value)) {
                    steps.push(step.clone());
                }
            }
            Action::MoveTask { tid, to, .. } if tried_moves.contains(&(*tid, to.as_str())) => {}
            Action::Guard { cpus, settings, .. } if guard::in_place(&read, cpus, settings) => {}
            Action::SetScheduler {
                tid,
                policy,
                priority,
                ..
            } if rt_kthreads::in_place(&read, *tid, *policy, *priority) => {}
            Action::SetAffinity { pid, tid, cpus, .. } => {
                set.insert(*tid);
                if moving_in.contains(pid) || live_affinity.get(tid) != Some(&cpus) {
                    steps.push(step.clone());
                }
            }
            _ => steps.push(step.clone()),
        }
    }
    if !resized {
        steps.extend(resize);
    }
    steps.extend(inside.affinities.iter().cloned());
    steps.extend(restore_steps(live, &orig, &written, &set, &read, &mount));
    if let (Some(r), false) = (remember, steps.is_empty()) {
        // Undo puts back the affinity every thread has now (the kernel of
        // 6.1 resets them when the partition changes), then the older ones.
        steps.insert(0, r);
    }
    let notes = notes(&fresh, &from, &to, &inside.leaving);
    Ok(Reshape {
        plan: Plan {
            steps,
            notes,
            ..fresh
        },
        from,
        staying: inside.staying,
        leaving: inside.leaving,
        irqbalance_ban,
        still_refused,
        guard: wants_guard,
    })
}
/// Whether `a` makes or resizes the shield's cgroup (the cpuset hierarchy
/// mounted at `mount`).
fn is_cgroup(a: &Action, mount: &str) -> bool {
    match a {
        Action::MountCgroup2 { .. } | Action::Mkdir { .. } => true,
        Action::Systemd {
            call: SystemdCall::StartSlice { .. },
            ..
        } => true,
        Action::Write { path, .. } => !mount.is_empty() && path.starts_with(&format!("{mount}/")),
        _ => false,
    }
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
fn moving_in(fresh: &Plan, tried_moves: &HashSet<(i32, &str)>) -> HashSet<i32> {
    fresh
        .steps
        .iter()
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

/// The notes of a change in place: the fresh plan's, what changed, and the
/// tasks that had to leave.
fn notes(fresh: &Plan, from: &CpuSet, to: &CpuSet, leaving: &[TaskRef]) -> Vec<Note> {
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
    let mount = live.cgroup.mount().unwrap_or("").to_string();
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
    let set = tasks::set_affinity;
    let mut by_pid: BTreeMap<i32, Vec<&Thread>> = BTreeMap::new();
    for t in live.threads.iter().filter(|t| in_shield_cgroup(&t.cgroup)) {
        by_pid.entry(t.pid).or_default().push(t);
    }
    for (pid, threads) in by_pid {
        let stays = |t: &&Thread| new_affinity(t).is_some();
        let whole_leaves = !v1 && !threads.iter().any(stays);
        for t in &threads {
            let here = format!("{mount}{}", t.cgroup);
            match new_affinity(t) {
                Some(cpus) => {
                    // Set again after a resize even when unchanged: 6.1
                    // resets the affinity of every task of a cpuset whose
                    // CPUs change.
                    if cpus != t.cpus_allowed || from != to {
                        out.affinities.push(set(t, cpus.clone()));
                    }
                    out.staying.push(TaskRef {
                        cpus,
                        ..TaskRef::from(*t)
                    });
                }
                None if v1 => {
                    out.out.push(Step::optional(
                        Owner::Tasks,
                        Action::MoveTask {
                            pid,
                            tid: t.tid,
                            to: format!("{mount}/{SYSTEM_CGROUP_V1}/tasks"),
                            back: format!("{here}/tasks"),
                            affinities: vec![(t.tid, t.cpus_allowed.clone())],
                        },
                    ));
                    out.affinities.push(set(t, t.cpus_allowed.clone()));
                    out.leaving.push(TaskRef::from(*t));
                }
                // Its own CPUs are housekeeping now: it keeps them (the
                // move resets them).
                None if whole_leaves => {
                    out.affinities.push(set(t, t.cpus_allowed.clone()));
                    out.leaving.push(TaskRef::from(*t));
                }
                // A thread of a process that stays: it cannot leave alone
                // (v2 places whole processes); all of the shield, as the
                // kernel would give it.
                None => {
                    out.affinities.push(set(t, to.clone()));
                    out.staying.push(TaskRef {
                        cpus: to.clone(),
                        ..TaskRef::from(*t)
                    });
                }
            }
        }
        if whole_leaves {
            let here = format!("{mount}{}", threads[0].cgroup);
            out.out.push(Step::optional(
                Owner::Tasks,
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

/// Writes back what the old shield changed and the new plan leaves alone
/// (an IRQ or knob the new shield does not need to move, a thread whose
/// CPUs no longer meet the shield), when it is not already back.
fn restore_steps(
    live: &Snapshot,
    orig: &Originals,
    written: &HashSet<String>,
    set: &HashSet<i32>,
    read: &impl Fn(&str) -> Option<String>,
    mount: &str,
) -> Vec<Step> {
    let mut out = Vec::new();
    for (path, (before, check)) in &orig.files {
        let cgroup_file = !mount.is_empty() && path.starts_with(&format!("{mount}/"));
        if cgroup_file
            || *check == Check::None
            || path.ends_with("/online")
            || written.contains(path)
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
    for t in &live.threads {
        if set.contains(&t.tid) || in_shield_cgroup(&t.cgroup) || t.is_pinned_by_kernel() {
            continue;
        }
        if let Some(before) = orig.affinities.get(&t.tid) {
            // Only affinities the old shield set itself; those the kernel
            // reset when the cpusets changed are `off`'s business.
            if before != &t.cpus_allowed && orig.set_by_shield.contains(&t.tid) {
                out.push(Step::optional(
                    Owner::Tasks,
                    Action::SetAffinity {
                        pid: t.pid,
                        tid: t.tid,
                        name: t.name.clone(),
                        cpus: before.clone(),
                        previous: t.cpus_allowed.clone(),
                    },
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shield::owners::Owners;
    use crate::shield::snapshot::Irq;
    use crate::shield::snapshot::SHIELD_SLICE;
    use crate::sys::procfs::{PF_KTHREAD, PF_NO_SETAFFINITY};

    fn cpus(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    fn thread(tid: i32, name: &str, flags: u64, allowed: &str, cgroup: &str) -> Thread {
        Thread {
            pid: tid,
            tid,
            name: name.into(),
            flags,
            cpus_allowed: cpus(allowed),
            cgroup: cgroup.into(),
            stat_read: true,
        }
    }

    fn irq(n: u32, affinity: &str) -> Irq {
        Irq {
            irq: n,
            name: String::new(),
            affinity: cpus(affinity),
            effective: None,
        }
    }

    const SLICE_DIR: &str = "sys/fs/cgroup/cpushield.slice";

    /// A systemd host shielded on 2-3: init was moved off (0-3 → 0-1), a
    /// task kept on CPU 3 lives in a scope of the slice, IRQ 25 was moved
    /// off CPU 2, IRQ 0 refused to move.
    fn shielded() -> (Snapshot, Vec<Entry>, State) {
        let live = Snapshot {
            present: cpus("0-3"),
            online: cpus("0-3"),
            boot_isolated: CpuSet::new(),
            cgroup_cpus: Default::default(),
            cgroup: CgroupSetup::V2 {
                mount: "sys/fs/cgroup".into(),
                subtree_control: vec!["cpuset".into()],
                has_exclusive: false,
            },
            threads: vec![
                thread(1, "init", 0, "0-1", "/init.scope"),
                thread(20, "ksoftirqd/2", PF_KTHREAD | PF_NO_SETAFFINITY, "2", "/"),
                thread(
                    30,
                    "control-loop",
                    0,
                    "3",
                    "/cpushield.slice/cpushield-run-30.scope",
                ),
            ],
            irqs: vec![irq(0, "0-3"), irq(24, "1"), irq(25, "0-1")],
            default_irq_affinity: Some(cpus("0-1")),
            workqueue_mask: Some(cpus("0-1")),
            sibling_groups: vec![cpus("0"), cpus("1"), cpus("2"), cpus("3")],
            tunables: None,
            hotplug_files: CpuSet::new(),
            hotplug_writable: CpuSet::new(),
            owners: Owners {
                systemd: true,
                systemd_version: None,
                irqbalance: None,
                tuned: None,
            },
            kernel_work: Default::default(),
        };
        let write = |path: &str, value: &str, undo: Undo, previous: Option<&str>| Entry {
            action: Action::Write {
                path: path.into(),
                value: value.into(),
                check: if path.contains("smp_affinity_list") {
                    Check::CpuList
                } else {
                    Check::CpuMask
                },
                undo,
            },
            previous: previous.map(str::to_string),
            at: None,
        };
        let entries = vec![
            Entry {
                action: Action::Remember {
                    affinities: vec![(1, cpus("0-3")), (30, cpus("3"))],
                },
                previous: None,
                at: None,
            },
            Entry {
                action: Action::SetAffinity {
                    pid: 1,
                    tid: 1,
                    name: "init".into(),
                    cpus: cpus("0-1"),
                    previous: cpus("0-3"),
                },
                previous: None,
                at: None,
            },
            write(DEFAULT_IRQ_AFFINITY, "3", Undo::Previous, Some("f")),
            write(
                "proc/irq/0/smp_affinity_list",
                "0-1",
                Undo::Previous,
                Some("0-3"),
            ),
            write(
                "proc/irq/25/smp_affinity_list",
                "0-1",
                Undo::Previous,
                Some("2"),
            ),
            write(WORKQUEUE_MASK, "3", Undo::Value("f".into()), Some("f")),
        ];
        let state = State {
            version: 1,
            shield: cpus("2-3"),
            housekeeping: cpus("0-1"),
            mechanism: "cgroup v2 partition (systemd slice)".into(),
            shield_dir: SLICE_DIR.into(),
            outside_procs: "sys/fs/cgroup/cgroup.procs".into(),
            complete: true,
            partition: Some("isolated".into()),
            irqs_kept: vec![0],
            writes_refused: vec![],
            irqbalance_ban: None,
            request: None,
            guard: false,
        };
        (live, entries, state)
    }

    /// The kernel files as the shielded machine shows them.
    fn files(path: &str) -> Option<String> {
        Some(
            match path {
                p if p.ends_with("cpuset.cpus.partition") => "isolated",
                "proc/irq/0/smp_affinity_list" => "0-3",
                "proc/irq/24/smp_affinity_list" => "1",
                "proc/irq/25/smp_affinity_list" => "0-1",
                DEFAULT_IRQ_AFFINITY | WORKQUEUE_MASK => "3",
                _ => return None,
            }
            .to_string(),
        )
    }

    fn request(list: &str) -> Request {
        Request {
            cpus: cpus(list),
            ..Request::default()
        }
    }

    #[test]
    fn the_same_request_again_plans_nothing() {
        let (live, entries, state) = shielded();
        let r = plan(&live, &entries, &state, &request("2-3"), files).unwrap();
        assert_eq!(r.plan.steps, Vec::<Step>::new());
        assert_eq!(r.still_refused, [0]);
        assert!(r.leaving.is_empty());
        assert_eq!(r.staying.len(), 1);
    }

    #[test]
    fn a_smaller_shield_resizes_the_slice_and_gives_back_what_it_no_longer_needs() {
        let (live, entries, state) = shielded();
        let r = plan(&live, &entries, &state, &request("3"), files).unwrap();
        let actions: Vec<&Action> = r.plan.steps.iter().map(|s| &s.action).collect();
        assert!(
            !actions.iter().any(|a| matches!(
                a,
                Action::Mkdir { .. }
                    | Action::Systemd {
                        call: SystemdCall::StartSlice { .. } | SystemdCall::Stop { .. },
                        ..
                    }
            )),
            "the shield is resized, not made anew: {actions:#?}"
        );
        let resize = actions
            .iter()
            .position(|a| {
                matches!(a, Action::Systemd {
                    call: SystemdCall::SetAllowedCpus { cpus: c, .. },
                    undo: Some(SystemdCall::SetAllowedCpus { cpus: back, .. }),
                    ..
                } if *c == cpus("3") && *back == cpus("2-3"))
            })
            .expect("AllowedCPUs of the slice set to 3, undone by 2-3");
        let partition = actions
            .iter()
            .position(|a| matches!(a, Action::Write { path, value, .. } if path.ends_with("cpuset.cpus.partition") && value == "isolated"))
            .expect("the partition written again after the resize");
        assert!(partition > resize);
        let write_of = |p: &str| {
            actions.iter().find_map(|a| match a {
                Action::Write { path, value, .. } if path == p => Some(value.as_str()),
                _ => None,
            })
        };
        assert_eq!(
            write_of("proc/irq/25/smp_affinity_list"),
            Some("2"),
            "CPU 2 is housekeeping again: IRQ 25 goes back"
        );
        assert_eq!(
            write_of("proc/irq/0/smp_affinity_list"),
            None,
            "refused before: not tried again"
        );
        assert_eq!(write_of(DEFAULT_IRQ_AFFINITY), Some("7"));
        let affinity_of = |tid: i32| {
            actions.iter().find_map(|a| match a {
                Action::SetAffinity { tid: t, cpus, .. } if *t == tid => Some(cpus.clone()),
                _ => None,
            })
        };
        assert_eq!(affinity_of(1), Some(cpus("0-2")), "init gets CPU 2 back");
        assert_eq!(
            affinity_of(30),
            Some(cpus("3")),
            "the kept task stays on 3, set again after the resize"
        );
        assert!(matches!(actions[0], Action::Remember { .. }));
        assert_eq!(
            r.plan.notes[0],
            Note::ShieldChangedInPlace {
                from: cpus("2-3"),
                to: cpus("3")
            }
        );
    }

    #[test]
    fn a_task_whose_cpus_all_leave_goes_back_where_it_came_from_before_the_resize() {
        let (live, mut entries, state) = shielded();
        entries.push(Entry {
            action: Action::Systemd {
                call: SystemdCall::StartScope {
                    unit: "cpushield-run-30.scope".into(),
                    slice: SHIELD_SLICE.into(),
                    pids: vec![30],
                    cgroup_dir: format!("{SLICE_DIR}/cpushield-run-30.scope"),
                },
                undo: Some(SystemdCall::Stop {
                    unit: "cpushield-run-30.scope".into(),
                }),
                back: Some("sys/fs/cgroup/user.slice/cgroup.procs".into()),
            },
            previous: None,
            at: None,
        });
        let r = plan(&live, &entries, &state, &request("1-2"), files).unwrap();
        assert_eq!(r.leaving.iter().map(|t| t.tid).collect::<Vec<_>>(), [30]);
        let actions: Vec<&Action> = r.plan.steps.iter().map(|s| &s.action).collect();
        let out = actions
            .iter()
            .position(|a| matches!(a, Action::MoveTask { pid: 30, to, .. } if to == "sys/fs/cgroup/user.slice/cgroup.procs"))
            .expect("moved back to the cgroup it came from");
        let resize = actions
            .iter()
            .position(|a| {
                matches!(
                    a,
                    Action::Systemd {
                        call: SystemdCall::SetAllowedCpus { .. },
                        ..
                    }
                )
            })
            .unwrap();
        assert!(out < resize, "out before the shield shrinks");
    }
}
