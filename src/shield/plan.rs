//! Plan: a pure function from (snapshot, request) to the list of changes a
//! shield needs. No I/O here; `--dry-run` prints the plan.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::change::{Action, Check, Step, Undo};
use super::knobs;
use super::note::Note;
use super::owners::Owners;
pub use super::plan_error::PlanError;
use super::request::Request;
use super::snapshot::{
    in_shield_cgroup, CgroupSetup, Snapshot, SHIELD_SLICE, SYSTEM_CGROUP_V1, WORKQUEUE_MASK,
};
use super::{hotplug, irqbalance, irqs, mechanism};
use crate::cpulist::CpuSet;
use crate::sys::procfs::Thread;
use crate::sys::systemd::SystemdCall;

/// A task named in a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRef {
    /// Process id.
    pub pid: i32,
    /// Thread id.
    pub tid: i32,
    /// Command name.
    pub name: String,
    /// Affinity.
    pub cpus: CpuSet,
}

impl From<&Thread> for TaskRef {
    fn from(t: &Thread) -> Self {
        TaskRef {
            pid: t.pid,
            tid: t.tid,
            name: t.name.clone(),
            cpus: t.cpus_allowed.clone(),
        }
    }
}

/// The full plan of a shield.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    /// Shielded CPUs.
    pub shield: CpuSet,
    /// Housekeeping CPUs: online minus shield.
    pub housekeeping: CpuSet,
    /// Mechanism name.
    pub mechanism: String,
    /// Partition type written (v2): `isolated`.
    pub partition: Option<String>,
    /// The shield's cgroup directory, relative to the root.
    pub shield_dir: String,
    /// Changes, in order.
    pub steps: Vec<Step>,
    /// Per-CPU kernel threads on shielded CPUs, by kind; the kernel keeps them there.
    pub per_cpu_kthreads: BTreeMap<String, usize>,
    /// User tasks whose own affinity lies wholly inside the shield (the
    /// user's real-time tasks): moved into the shield with their affinity
    /// unchanged (no `--force`).
    pub kept: Vec<TaskRef>,
    /// Threads that asked only for shielded CPUs but cannot be kept: their
    /// process has threads outside the shield, and cgroup v2 places whole
    /// processes. The kernel would move them off; the plan does.
    pub split_off: Vec<TaskRef>,
    /// Threads on the shield that the partition moves off by itself (see
    /// [`left_to_the_partition`]): no step of their own.
    #[serde(default)]
    pub left_to_partition: Vec<i32>,
    /// IRQs bound to the shield on request.
    pub irqs_to_shield: Vec<u32>,
    /// Things the user should know.
    pub notes: Vec<Note>,
}

/// Validates the request against the machine and plans the shield.
pub fn plan(snap: &Snapshot, req: &Request) -> Result<Plan, PlanError> {
    let Valid {
        shield,
        housekeeping,
        irqs_to_shield,
        knobs,
        mut notes,
    } = validate(snap, req)?;
    let mut steps = vec![remember_affinities(snap)];
    // Before the IRQs move, so that irqbalance (restarted with the ban)
    // does not move them back meanwhile; undo gives it back first of all
    // (apply::undo, SYSTEMD-NOTES 10).
    steps.extend(irqbalance::plan(
        snap.owners.systemd,
        snap.owners.irqbalance.as_ref(),
        &shield,
        &mut notes,
    ));
    notes.extend(tuned_notes(&snap.owners));
    let cgroup = mechanism::plan(snap, &shield, &housekeeping, &mut notes)?;
    steps.extend(cgroup.steps);

    let tasks = plan_tasks(snap, &shield, &housekeeping, req.force, |_| true);
    steps.extend(tasks.steps);
    notes.extend(task_notes(snap, &tasks.kept, &tasks.split_off));

    let irq_steps = irqs::plan(snap, &shield, &housekeeping, &irqs_to_shield);
    if req.hotplug_restart {
        // Order: IRQs leave the shield first (a CPU going offline breaks
        // the affinity of an IRQ that has no other online CPU, and the
        // kernel does not give it back), then each CPU goes offline and
        // online again, then the cpusets are created (the shielding procedure), then
        // the tasks move and IRQs asked into the shield are bound to it.
        let cgroups_and_tasks = steps.split_off(1);
        let (to_shield, away): (Vec<_>, Vec<_>) = irq_steps.into_iter().partition(|(t, _)| *t);
        steps.extend(away.into_iter().map(|(_, s)| s));
        steps.extend(hotplug::steps(&shield));
        steps.extend(cgroups_and_tasks);
        steps.extend(to_shield.into_iter().map(|(_, s)| s));
        notes.push(Note::HotplugRestart {
            cpus: shield.clone(),
        });
    } else {
        steps.extend(irq_steps.into_iter().map(|(_, s)| s));
    }
    steps.extend(workqueue_step(snap, &shield, &housekeeping));
    if let (false, Some(state)) = (knobs.is_empty(), &snap.tunables) {
        let already: Vec<String> = steps
            .iter()
            .filter_map(|s| match &s.action {
                Action::Write { path, .. } => Some(path.clone()),
                _ => None,
            })
            .collect();
        let tuned = knobs::plan(
            state,
            &knobs,
            &shield,
            &housekeeping,
            snap.mask_bits(),
            &already,
        );
        steps.extend(tuned.steps);
        notes.extend(tuned.notes);
    }
    Ok(Plan {
        mechanism: mechanism::name(snap),
        partition: cgroup.partition,
        shield_dir: cgroup.shield_dir,
        steps,
        per_cpu_kthreads: tasks.per_cpu_kthreads,
        kept: tasks.kept,
        split_off: tasks.split_off,
        left_to_partition: tasks.left_to_partition,
        irqs_to_shield,
        notes,
        shield,
        housekeeping,
    })
}

/// A request that fits the machine, resolved.
struct Valid {
    shield: CpuSet,
    housekeeping: CpuSet,
    irqs_to_shield: Vec<u32>,
    knobs: Vec<&'static knobs::Knob>,
    notes: Vec<Note>,
}

/// Checks the request against the machine: CPUs present and online, one
/// left for housekeeping, siblings whole (or allowed split), IRQs and
/// knobs known, hotplug possible.
fn validate(snap: &Snapshot, req: &Request) -> Result<Valid, PlanError> {
    let shield = req.cpus.clone();
    let missing = shield.difference(&snap.present);
    if !missing.is_empty() {
        return Err(PlanError::NotPresent {
            cpus: shield,
            missing,
            present: snap.present.clone(),
        });
    }
    let offline = shield.difference(&snap.online);
    if !offline.is_empty() {
        return Err(PlanError::Offline {
            cpus: shield,
            offline,
            online: snap.online.clone(),
        });
    }
    let housekeeping = snap.online.difference(&shield);
    if housekeeping.is_empty() {
        return Err(PlanError::NoHousekeeping {
            cpus: shield,
            online: snap.online.clone(),
        });
    }
    let split: Vec<&CpuSet> = snap
        .sibling_groups
        .iter()
        .filter(|g| g.intersects(&shield) && !g.is_subset(&shield))
        .collect();
    let mut notes = Vec::new();
    if !split.is_empty() {
        let detail = split
            .iter()
            .map(|g| g.to_string())
            .collect::<Vec<_>>()
            .join("; ");
        let suggest = split.iter().fold(shield.clone(), |acc, g| acc.union(g));
        if !req.allow_split_siblings {
            return Err(PlanError::SplitSiblings {
                cpus: shield,
                detail,
                suggest,
            });
        }
        notes.push(Note::SplitSiblings {
            groups: split.into_iter().cloned().collect(),
        });
    }
    let irqs_to_shield = irqs::resolve(snap, &req.irqs)?;
    if req.hotplug_restart {
        hotplug::check(snap, &shield)?;
    }
    let knobs = if req.tune.is_empty() {
        Vec::new()
    } else {
        knobs::resolve(&req.tune)?
    };
    Ok(Valid {
        shield,
        housekeeping,
        irqs_to_shield,
        knobs,
        notes,
    })
}

/// The first step: every thread's affinity, for undo (see [`Action::Remember`]).
fn remember_affinities(snap: &Snapshot) -> Step {
    Step {
        action: Action::Remember {
            affinities: snap
                .threads
                .iter()
                .filter(|t| !t.is_pinned_by_kernel())
                .map(|t| (t.tid, t.cpus_allowed.clone()))
                .collect(),
        },
        fatal: false,
    }
}

/// What the user should know about the tasks kept on the shield and the
/// threads split off their process.
fn task_notes(snap: &Snapshot, kept: &[TaskRef], split_off: &[TaskRef]) -> Vec<Note> {
    let mut notes = Vec::new();
    if snap.owners.systemd && matches!(snap.cgroup, CgroupSetup::V2 { .. }) && !kept.is_empty() {
        // Under systemd a process belongs to the unit whose cgroup holds it.
        let mut units: Vec<String> = kept
            .iter()
            .filter_map(|k| snap.threads.iter().find(|t| t.tid == k.tid))
            .filter_map(|t| t.cgroup.rsplit('/').next().map(str::to_string))
            .filter(|u| u.ends_with(".service") || u.ends_with(".scope"))
            .collect();
        units.sort();
        units.dedup();
        if !units.is_empty() {
            notes.push(Note::TasksLeaveUnits { units });
        }
    }
    if !split_off.is_empty() {
        notes.push(Note::ThreadsSplitOff {
            threads: split_off.len(),
        });
    }
    notes
}

/// Unbound workqueues off the shield, when their mask reaches it.
fn workqueue_step(snap: &Snapshot, shield: &CpuSet, housekeeping: &CpuSet) -> Option<Step> {
    let mask = snap.workqueue_mask.as_ref()?;
    let bits = snap.mask_bits();
    mask.intersects(shield).then(|| Step {
        action: Action::Write {
            path: WORKQUEUE_MASK.into(),
            value: mask.away_from(shield, housekeeping).to_mask(bits),
            check: Check::CpuMask,
            // 6.12 reads the mask without the partition's CPUs once
            // the partition exists; writing that back would make the
            // reduced mask the request for good. Restore the mask
            // read before the partition.
            undo: Undo::Value(mask.to_mask(bits)),
        },
        fatal: false,
    })
}

/// A tuned profile that pins CPUs or IRQs fights any shield it did not make.
pub fn tuned_notes(owners: &Owners) -> Vec<Note> {
    match &owners.tuned {
        Some(t) if t.running && !t.pins.is_empty() => vec![Note::TunedPins {
            profile: t.profile.clone(),
            pins: t.pins.clone(),
        }],
        _ => Vec::new(),
    }
}

/// The task part of a plan: which threads leave the shield and how.
#[derive(Debug, Default)]
pub struct TaskPlan {
    /// Cgroup moves first (v1), then affinity changes.
    pub steps: Vec<Step>,
    /// Per-CPU kernel threads on the shield, by kind.
    pub per_cpu_kthreads: BTreeMap<String, usize>,
    /// User tasks kept on the shield (moved into it, own affinity kept).
    pub kept: Vec<TaskRef>,
    /// Threads that asked only for shielded CPUs in processes that cannot
    /// move whole (cgroup v2): moved off.
    pub split_off: Vec<TaskRef>,
    /// Threads on the shield the partition moves off by itself (see
    /// [`left_to_the_partition`]): no step of their own.
    pub left_to_partition: Vec<i32>,
}

/// Plans how every thread accepted by `include` leaves the shield. Also used
/// after applying, to catch tasks forked meanwhile.
pub fn plan_tasks(
    snap: &Snapshot,
    shield: &CpuSet,
    housekeeping: &CpuSet,
    force: bool,
    include: impl Fn(&Thread) -> bool,
) -> TaskPlan {
    let mut out = TaskPlan::default();
    let mut affinities = Vec::new();
    let mut v1_moves = Vec::new();
    let mut keep = Vec::new();
    for t in snap.threads.iter().filter(|t| include(t)) {
        if in_shield_cgroup(&t.cgroup) {
            continue;
        }
        let on_shield = t.cpus_allowed.intersects(shield);
        if t.is_pinned_by_kernel() {
            if on_shield {
                *out.per_cpu_kthreads.entry(t.kind()).or_default() += 1;
            }
            continue;
        }
        if on_shield && t.cpus_allowed.is_subset(shield) && !force {
            if t.is_kthread() {
                *out.per_cpu_kthreads.entry(t.kind()).or_default() += 1;
            } else {
                keep.push(t);
            }
            continue;
        }
        let target = t.cpus_allowed.away_from(shield, housekeeping);
        if matches!(snap.cgroup, CgroupSetup::V1 { .. }) && t.cgroup == "/" {
            v1_moves.push((t, target));
            continue;
        }
        if on_shield {
            if left_to_the_partition(snap, t) {
                out.left_to_partition.push(t.tid);
            } else {
                affinities.push(set_affinity(t, target));
            }
        }
    }
    plan_kept(snap, keep, housekeeping, &mut out, &mut affinities);
    if let CgroupSetup::V1 { mount, .. } = &snap.cgroup {
        plan_v1_moves(
            snap,
            mount,
            housekeeping,
            v1_moves,
            &mut out,
            &mut affinities,
        );
    }
    out.steps.extend(affinities);
    out
}

/// Whether the kernel moves thread `t` off the shield by itself when the
/// partition takes the shield's CPUs (cgroup v2): a user thread whose
/// affinity is its cgroup's effective CPUs asked for none of its own, and
/// the kernel gives every such task its cgroup's new effective CPUs
/// (`update_tasks_cpumask`), which are its CPUs without the shield's: the
/// step would set what is already set. At 10,000 threads those steps were
/// most of `on` and their undo most of `off`; the kernel does the same in
/// one write, and undoes it when the partition goes. Kernel threads keep
/// their steps (per-CPU ones in the root are left alone by that update).
/// The sweep after the steps moves any thread still on the shield, so a
/// partition that did not form leaves none behind.
pub fn left_to_the_partition(snap: &Snapshot, t: &Thread) -> bool {
    matches!(snap.cgroup, CgroupSetup::V2 { .. })
        && !t.is_kthread()
        && snap.cgroup_cpus.get(&t.cgroup) == Some(&t.cpus_allowed)
}

/// The shield's cgroup directory for this machine (relative to the root).
pub fn shield_dir(snap: &Snapshot) -> Option<String> {
    match &snap.cgroup {
        CgroupSetup::V2 { mount, .. } if snap.owners.systemd => {
            Some(format!("{mount}/{SHIELD_SLICE}"))
        }
        other => other.shield_dir(),
    }
}

/// A task that asked only for shielded CPUs is the user's real-time task
/// (the shielded-CPU semantics: a task keeps its CPUs when taking them
/// would leave it none). It moves into the shield with its own affinity:
/// a v2 process only whole (every thread asked only for shielded CPUs),
/// as a transient scope of the shield's slice under systemd; a v1 thread
/// by itself. Moving into a cpuset resets the affinity (6.1), so it is set
/// again right after. Threads of a v2 process that also runs elsewhere
/// cannot follow: they go to the housekeeping CPUs, as the partition
/// would make the kernel do anyway.
fn plan_kept(
    snap: &Snapshot,
    keep: Vec<&Thread>,
    housekeeping: &CpuSet,
    out: &mut TaskPlan,
    affinities: &mut Vec<Step>,
) {
    let Some(dir) = shield_dir(snap) else { return };
    let mount = snap.cgroup.mount().unwrap_or("").to_string();
    let cgroup_of = |t: &Thread| {
        if t.cgroup == "/" {
            String::new()
        } else {
            t.cgroup.clone()
        }
    };
    let step = |action| Step {
        action,
        fatal: false,
    };
    if let CgroupSetup::V1 { .. } = &snap.cgroup {
        for t in keep {
            out.steps.push(step(Action::MoveTask {
                pid: t.pid,
                tid: t.tid,
                to: format!("{dir}/tasks"),
                back: format!("{mount}{}/tasks", cgroup_of(t)),
                affinities: vec![(t.tid, t.cpus_allowed.clone())],
            }));
            affinities.push(set_affinity(t, t.cpus_allowed.clone()));
            out.kept.push(TaskRef::from(t));
        }
        return;
    }
    let mut threads_of: HashMap<i32, usize> = HashMap::new();
    for t in &snap.threads {
        *threads_of.entry(t.pid).or_default() += 1;
    }
    let mut by_pid: BTreeMap<i32, Vec<&Thread>> = BTreeMap::new();
    for t in keep {
        by_pid.entry(t.pid).or_default().push(t);
    }
    for (pid, threads) in by_pid {
        if threads_of.get(&pid) != Some(&threads.len()) {
            for t in threads {
                affinities.push(set_affinity(t, housekeeping.clone()));
                out.split_off.push(TaskRef::from(t));
            }
            continue;
        }
        let back = format!("{mount}{}/cgroup.procs", cgroup_of(threads[0]));
        out.steps.push(step(if snap.owners.systemd {
            scope_action(SHIELD_SLICE, &dir, "cpushield-run", pid, back)
        } else {
            Action::MoveTask {
                pid,
                tid: pid,
                to: format!("{dir}/cgroup.procs"),
                back,
                affinities: threads
                    .iter()
                    .map(|t| (t.tid, t.cpus_allowed.clone()))
                    .collect(),
            }
        }));
        for t in threads {
            affinities.push(set_affinity(t, t.cpus_allowed.clone()));
            out.kept.push(TaskRef::from(t));
        }
    }
}

/// Process `pid` as a transient scope `PREFIX-PID.scope` of `slice` (whose
/// cgroup is `slice_dir`): systemd moves it and keeps it there through
/// reloads. Undo moves what the scope holds back to `back` (a
/// `cgroup.procs`), then stops it.
pub fn scope_action(slice: &str, slice_dir: &str, prefix: &str, pid: i32, back: String) -> Action {
    let unit = format!("{prefix}-{pid}.scope");
    Action::Systemd {
        call: SystemdCall::StartScope {
            cgroup_dir: format!("{slice_dir}/{unit}"),
            unit: unit.clone(),
            slice: slice.to_string(),
            pids: vec![pid],
        },
        undo: Some(SystemdCall::Stop { unit }),
        back: Some(back),
    }
}

/// Moves the threads of the v1 root cpuset into the system cpuset: a
/// process whose every thread goes is moved whole, in one write of its pid
/// to `cgroup.procs` (each move waits for an RCU grace period on kernels
/// since 6.0 unless the hierarchy is mounted with `favordynmods`, so one a
/// process rather than one a thread); others thread by thread through
/// `tasks`. Moving resets a thread's affinity to the cpuset's CPUs; the
/// thread's own restriction is put back right after.
fn plan_v1_moves(
    snap: &Snapshot,
    mount: &str,
    housekeeping: &CpuSet,
    moves: Vec<(&Thread, CpuSet)>,
    out: &mut TaskPlan,
    affinities: &mut Vec<Step>,
) {
    let mut threads_of: HashMap<i32, usize> = HashMap::new();
    for t in &snap.threads {
        *threads_of.entry(t.pid).or_default() += 1;
    }
    let mut moving_of: HashMap<i32, Vec<(i32, CpuSet)>> = HashMap::new();
    for (t, _) in &moves {
        moving_of
            .entry(t.pid)
            .or_default()
            .push((t.tid, t.cpus_allowed.clone()));
    }
    let whole: HashSet<i32> = moving_of
        .iter()
        .filter(|(pid, moving)| threads_of.get(pid) == Some(&moving.len()))
        .map(|(pid, _)| *pid)
        .collect();
    let move_step = |pid: i32, tid: i32, file: &str, affinities| Step {
        action: Action::MoveTask {
            pid,
            tid,
            to: format!("{mount}/{SYSTEM_CGROUP_V1}/{file}"),
            back: format!("{mount}/{file}"),
            affinities,
        },
        fatal: false,
    };
    for (t, target) in &moves {
        if !whole.contains(&t.pid) {
            let own = vec![(t.tid, t.cpus_allowed.clone())];
            out.steps.push(move_step(t.pid, t.tid, "tasks", own));
        } else if let Some(all) = moving_of.remove(&t.pid) {
            out.steps.push(move_step(t.pid, t.pid, "cgroup.procs", all));
        }
        // The kernel refuses to move kthreadd between v1 cpusets (EINVAL)
        // but lets its affinity change, and the kernel threads it forks
        // inherit that affinity.
        if target != housekeeping || t.is_kthread() {
            affinities.push(set_affinity(t, target.clone()));
        }
    }
}

/// The step that sets thread `t`'s affinity to `cpus` (recording what it was).
pub(crate) fn set_affinity(t: &Thread, cpus: CpuSet) -> Step {
    Step {
        action: Action::SetAffinity {
            pid: t.pid,
            tid: t.tid,
            name: t.name.clone(),
            cpus,
            previous: t.cpus_allowed.clone(),
        },
        fatal: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shield::snapshot::{Irq, DEFAULT_IRQ_AFFINITY};
    use crate::sys::procfs::{PF_KTHREAD, PF_NO_SETAFFINITY};

    fn cpus(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    fn thread(pid: i32, name: &str, flags: u64, allowed: &str) -> Thread {
        Thread {
            pid,
            tid: pid,
            name: name.into(),
            flags,
            cpus_allowed: cpus(allowed),
            cgroup: "/".into(),
            stat_read: true,
        }
    }

    fn snap(cgroup: CgroupSetup) -> Snapshot {
        Snapshot {
            present: cpus("0-3"),
            online: cpus("0-3"),
            boot_isolated: CpuSet::new(),
            cgroup_cpus: Default::default(),
            cgroup,
            threads: vec![
                thread(1, "init", 0, "0-3"),
                thread(2, "kthreadd", PF_KTHREAD, "0-3"),
                thread(20, "ksoftirqd/2", PF_KTHREAD | PF_NO_SETAFFINITY, "2"),
                thread(30, "pinned", 0, "3"),
                thread(31, "house", 0, "0"),
            ],
            irqs: vec![
                Irq {
                    irq: 0,
                    name: "timer".into(),
                    affinity: cpus("0-3"),
                    effective: None,
                },
                Irq {
                    irq: 24,
                    name: "eth0".into(),
                    affinity: cpus("1"),
                    effective: None,
                },
                Irq {
                    irq: 25,
                    name: "nvme".into(),
                    affinity: cpus("2"),
                    effective: None,
                },
            ],
            default_irq_affinity: Some(cpus("0-3")),
            workqueue_mask: Some(cpus("0-3")),
            sibling_groups: vec![cpus("0"), cpus("1"), cpus("2"), cpus("3")],
            tunables: None,
            hotplug_files: cpus("1-3"),
            hotplug_writable: cpus("1-3"),
            owners: Owners::default(),
        }
    }

    /// A systemd host with irqbalance running as its unit.
    fn systemd_host(own_ban: &str) -> Owners {
        Owners {
            systemd: true,
            systemd_version: None,
            irqbalance: Some(crate::shield::irqbalance::Irqbalance {
                pid: Some(400),
                cgroup: Some("/system.slice/irqbalance.service".into()),
                unit: true,
                own_ban: cpus(own_ban),
                ..Default::default()
            }),
            tuned: None,
        }
    }

    #[test]
    fn under_systemd_the_shield_is_a_transient_slice_and_the_partition_is_its_cgroup() {
        let mut s = snap(v2());
        s.owners = systemd_host("");
        let plan = plan(&s, &req("2-3")).unwrap();
        assert_eq!(plan.shield_dir, "sys/fs/cgroup/cpushield.slice");
        let slice = plan
            .steps
            .iter()
            .position(|s| matches!(&s.action, Action::Systemd { call: SystemdCall::StartSlice { cpus: c, .. }, undo: Some(SystemdCall::Stop { .. }), .. } if *c == cpus("2-3")))
            .expect("a transient slice with AllowedCPUs=2-3, stopped by undo");
        assert!(plan.steps[slice].fatal);
        let partition = plan
            .steps
            .iter()
            .position(|s| matches!(&s.action, Action::Write { path, .. } if path == "sys/fs/cgroup/cpushield.slice/cpuset.cpus.partition"))
            .expect("the partition is written on the slice's cgroup");
        assert!(slice < partition);
        // systemd enables +cpuset itself; cpushield makes no cgroup of its own
        assert_eq!(
            write_to(&plan, "sys/fs/cgroup/cgroup.subtree_control"),
            None
        );
        assert!(!plan
            .steps
            .iter()
            .any(|s| matches!(s.action, Action::Mkdir { .. })));
        assert!(plan.mechanism.contains("systemd"));
    }

    #[test]
    fn irqbalance_under_systemd_is_banned_from_the_shield_and_its_own_ban() {
        let mut s = snap(v2());
        s.owners = systemd_host("5");
        let plan = plan(&s, &req("2-3")).unwrap();
        let bans: Vec<&Step> = plan
            .steps
            .iter()
            .filter(|s| matches!(s.action, Action::IrqbalanceBan { .. }))
            .collect();
        assert_eq!(bans.len(), 1);
        let Action::IrqbalanceBan {
            banned, make_dir, ..
        } = &bans[0].action
        else {
            unreachable!()
        };
        assert_eq!(*banned, cpus("2-3,5"));
        assert!(*make_dir);
        assert!(!bans[0].fatal);
        // before any IRQ is moved, so that irqbalance does not move them back
        let ban_at = plan
            .steps
            .iter()
            .position(|s| matches!(s.action, Action::IrqbalanceBan { .. }));
        let first_irq = plan.steps.iter().position(
            |s| matches!(&s.action, Action::Write { path, .. } if path.starts_with("proc/irq/")),
        );
        assert!(ban_at < first_irq, "{ban_at:?} {first_irq:?}");
    }

    #[test]
    fn irqbalance_without_systemd_is_reported_not_banned() {
        let mut s = snap(v2());
        s.owners = systemd_host("");
        s.owners.systemd = false;
        let plan = plan(&s, &req("2-3")).unwrap();
        assert!(!plan
            .steps
            .iter()
            .any(|s| matches!(s.action, Action::IrqbalanceBan { .. })));
        assert!(plan
            .notes
            .iter()
            .any(|n| matches!(n, Note::IrqbalanceWithoutUnit { pid: 400, .. })));
        assert_eq!(plan.shield_dir, "sys/fs/cgroup/cpushield");
    }

    #[test]
    fn a_tuned_profile_that_isolates_cores_is_reported() {
        let mut s = snap(v2());
        s.owners.tuned = Some(crate::shield::owners::Tuned {
            profile: "cpu-partitioning".into(),
            running: true,
            pins: vec!["cpu-partitioning: isolated_cores".into()],
        });
        let plan = plan(&s, &req("2-3")).unwrap();
        assert!(plan.notes.contains(&Note::TunedPins {
            profile: "cpu-partitioning".into(),
            pins: vec!["cpu-partitioning: isolated_cores".into()],
        }));
        s.owners.tuned.as_mut().unwrap().pins.clear();
        assert!(!super::plan(&s, &req("2-3"))
            .unwrap()
            .notes
            .iter()
            .any(|n| matches!(n, Note::TunedPins { .. })));
    }

    fn v2() -> CgroupSetup {
        CgroupSetup::V2 {
            mount: "sys/fs/cgroup".into(),
            subtree_control: vec!["memory".into()],
            has_exclusive: false,
        }
    }

    fn req(list: &str) -> Request {
        Request {
            cpus: cpus(list),
            ..Default::default()
        }
    }

    fn affinity_of(plan: &Plan, tid: i32) -> Option<CpuSet> {
        plan.steps.iter().find_map(|s| match &s.action {
            Action::SetAffinity { tid: t, cpus, .. } if *t == tid => Some(cpus.clone()),
            _ => None,
        })
    }

    fn write_to(plan: &Plan, path: &str) -> Option<String> {
        plan.steps.iter().find_map(|s| match &s.action {
            Action::Write { path: p, value, .. } if p == path => Some(value.clone()),
            _ => None,
        })
    }

    #[test]
    fn v2_partition_tasks_and_irqs() {
        let p = plan(&snap(v2()), &req("2-3")).unwrap();
        assert_eq!(p.housekeeping, cpus("0-1"));
        assert_eq!(
            write_to(&p, "sys/fs/cgroup/cgroup.subtree_control").as_deref(),
            Some("+cpuset")
        );
        assert_eq!(
            write_to(&p, "sys/fs/cgroup/cpushield/cpuset.cpus.partition").as_deref(),
            Some("isolated")
        );
        assert_eq!(affinity_of(&p, 1), Some(cpus("0-1")));
        assert_eq!(
            affinity_of(&p, 2),
            Some(cpus("0-1")),
            "unbound kthreads leave too"
        );
        assert_eq!(affinity_of(&p, 20), None, "per-CPU kthreads are not fought");
        assert_eq!(p.per_cpu_kthreads.get("ksoftirqd"), Some(&1));
        assert_eq!(
            affinity_of(&p, 30),
            Some(cpus("3")),
            "a task pinned inside keeps its own CPU (set again after its move)"
        );
        assert_eq!(p.kept.len(), 1);
        assert!(p.steps.iter().any(|s| matches!(&s.action,
            Action::MoveTask { pid: 30, to, back, .. }
                if to == "sys/fs/cgroup/cpushield/cgroup.procs" && back == "sys/fs/cgroup/cgroup.procs")),
            "and moves into the shield, whole");
        assert_eq!(
            affinity_of(&p, 31),
            None,
            "tasks off the shield are untouched"
        );
        assert_eq!(
            write_to(&p, "proc/irq/0/smp_affinity_list").as_deref(),
            Some("0-1")
        );
        assert_eq!(write_to(&p, "proc/irq/24/smp_affinity_list"), None);
        assert_eq!(
            write_to(&p, "proc/irq/25/smp_affinity_list").as_deref(),
            Some("0-1")
        );
        assert_eq!(write_to(&p, DEFAULT_IRQ_AFFINITY).as_deref(), Some("3"));
        assert_eq!(write_to(&p, WORKQUEUE_MASK).as_deref(), Some("3"));
    }

    #[test]
    fn force_moves_stranded_tasks() {
        let p = plan(
            &snap(v2()),
            &Request {
                force: true,
                ..req("2-3")
            },
        )
        .unwrap();
        assert!(p.kept.is_empty());
        assert_eq!(affinity_of(&p, 30), Some(cpus("0-1")));
    }

    #[test]
    fn a_process_that_asked_only_for_shielded_cpus_is_kept_whole_or_its_threads_move_off() {
        let mut s = snap(v2());
        let mut helper = thread(30, "pinned-helper", 0, "0-1");
        helper.tid = 32;
        s.threads.push(helper);
        let p = plan(&s, &req("2-3")).unwrap();
        assert!(p.kept.is_empty(), "v2 places whole processes");
        assert_eq!(p.split_off.len(), 1);
        assert_eq!(affinity_of(&p, 30), Some(cpus("0-1")));
        assert!(p.notes.contains(&Note::ThreadsSplitOff { threads: 1 }));
        // cgroup v1 moves single threads: the pinned one is kept
        let mut s1 = s.clone();
        s1.cgroup = CgroupSetup::V1 {
            mount: "sys/fs/cgroup/cpuset".into(),
            mems: "0".into(),
            load_balance: "1".into(),
        };
        let p = plan(&s1, &req("2-3")).unwrap();
        assert_eq!(p.kept.len(), 1);
        assert!(p.steps.iter().any(|s| matches!(&s.action,
            Action::MoveTask { tid: 30, to, .. } if to == "sys/fs/cgroup/cpuset/cpushield/tasks")));
        // under systemd the process is kept as a scope of the shield's slice
        let mut s2 = snap(v2());
        s2.owners.systemd = true;
        let p = plan(&s2, &req("2-3")).unwrap();
        assert!(p.steps.iter().any(|s| matches!(&s.action,
            Action::Systemd { call: SystemdCall::StartScope { pids, slice, .. }, back: Some(_), .. }
                if pids == &vec![30] && slice == "cpushield.slice")));
    }

    #[test]
    fn irqs_named_go_to_the_shield() {
        let r = Request {
            irqs: vec!["eth0".into(), "25".into()],
            ..req("2-3")
        };
        let p = plan(&snap(v2()), &r).unwrap();
        assert_eq!(p.irqs_to_shield, vec![24, 25]);
        assert_eq!(
            write_to(&p, "proc/irq/24/smp_affinity_list").as_deref(),
            Some("2-3")
        );
        assert_eq!(
            write_to(&p, "proc/irq/25/smp_affinity_list").as_deref(),
            Some("2-3")
        );
        let bad = Request {
            irqs: vec!["nope".into()],
            ..req("2")
        };
        assert_eq!(
            plan(&snap(v2()), &bad).unwrap_err(),
            PlanError::UnknownIrq("nope".into())
        );
    }

    #[test]
    fn refusals_name_the_input() {
        let s = snap(v2());
        assert!(matches!(
            plan(&s, &req("7")),
            Err(PlanError::NotPresent { .. })
        ));
        assert!(matches!(
            plan(&s, &req("0-3")),
            Err(PlanError::NoHousekeeping { .. })
        ));
        let mut off = s.clone();
        off.online = cpus("0-2");
        let e = plan(&off, &req("3")).unwrap_err();
        assert!(e.to_string().contains("offline"), "{e}");
        let mut ht = s.clone();
        ht.sibling_groups = vec![cpus("0,2"), cpus("1,3")];
        let e = plan(&ht, &req("2")).unwrap_err();
        assert!(e.to_string().contains("0,2"), "{e}");
        assert!(plan(
            &ht,
            &Request {
                allow_split_siblings: true,
                ..req("2")
            }
        )
        .is_ok());
        let none = snap(CgroupSetup::Unsupported { reason: "x".into() });
        assert!(matches!(
            plan(&none, &req("2")),
            Err(PlanError::NoCpuset(_))
        ));
    }

    #[test]
    fn unmounted_cgroup2_is_mounted_first_then_cpuset_enabled() {
        let p = plan(
            &snap(CgroupSetup::V2Unmounted {
                mount: "run/cpushield/cgroup2".into(),
                make_dir: true,
            }),
            &req("2-3"),
        )
        .unwrap();
        let kinds: Vec<String> = p
            .steps
            .iter()
            .take(5)
            .map(|s| crate::shield::apply::describe(&s.action))
            .collect();
        assert_eq!(
            kinds,
            [
                "4 task affinities",
                "/run/cpushield/cgroup2",
                "/run/cpushield/cgroup2/cgroup.subtree_control",
                "/run/cpushield/cgroup2/cpushield",
                "/run/cpushield/cgroup2/cpushield/cpuset.cpus",
            ]
        );
        assert_eq!(
            p.steps[1].action,
            Action::MountCgroup2 {
                target: "run/cpushield/cgroup2".into(),
                make_dir: true
            }
        );
        assert!(p.steps[1].fatal);
        assert_eq!(p.mechanism, "cgroup v2 partition");
        assert!(p.notes.contains(&Note::MountingCgroup2 {
            mount: "run/cpushield/cgroup2".into()
        }));
    }

    #[test]
    fn boot_isolated_cpus_get_an_isolated_partition() {
        // A `root` partition over them is invalid since 6.7.
        let mut s = snap(v2());
        s.boot_isolated = cpus("3");
        let p = plan(&s, &req("2-3")).unwrap();
        assert_eq!(p.partition.as_deref(), Some("isolated"));
        let written = p.steps.iter().find_map(|st| match &st.action {
            Action::Write { path, value, .. } if path.ends_with("cpuset.cpus.partition") => {
                Some(value.clone())
            }
            _ => None,
        });
        assert_eq!(written.as_deref(), Some("isolated"));
        assert!(
            p.notes
                .contains(&Note::AlsoIsolatedAtBoot { cpus: cpus("3") }),
            "{:?}",
            p.notes
        );
    }

    #[test]
    fn v1_moves_root_tasks_to_the_system_cpuset() {
        let s = snap(CgroupSetup::V1 {
            mount: "sys/fs/cgroup/cpuset".into(),
            mems: "0".into(),
            load_balance: "1".into(),
        });
        let p = plan(&s, &req("2-3")).unwrap();
        let moved: Vec<i32> = p
            .steps
            .iter()
            .filter_map(|st| match &st.action {
                Action::MoveTask { tid, to, .. } if to.contains(SYSTEM_CGROUP_V1) => Some(*tid),
                _ => None,
            })
            .collect();
        assert_eq!(moved, vec![1, 2, 31]);
        assert!(
            p.steps.iter().any(|st| matches!(&st.action,
                Action::MoveTask { tid: 30, to, .. } if to == "sys/fs/cgroup/cpuset/cpushield/tasks")),
            "the task pinned inside is kept: moved into the shield"
        );
        assert_eq!(
            affinity_of(&p, 31),
            Some(cpus("0")),
            "own restriction is put back"
        );
        assert_eq!(
            write_to(&p, "sys/fs/cgroup/cpuset/cpushield/cpuset.mems").as_deref(),
            Some("0")
        );
        assert_eq!(
            write_to(&p, "sys/fs/cgroup/cpuset/cpuset.sched_load_balance").as_deref(),
            Some("0")
        );
    }

    #[test]
    fn v1_moves_a_process_whole_only_when_every_thread_goes() {
        let mut s = snap(CgroupSetup::V1 {
            mount: "sys/fs/cgroup/cpuset".into(),
            mems: "0".into(),
            load_balance: "1".into(),
        });
        let of = |pid, tid, cgroup: &str, allowed| Thread {
            tid,
            cgroup: cgroup.into(),
            stat_read: true,
            ..thread(pid, "worker", 0, allowed)
        };
        // 40: three threads in the root cpuset. 50: one thread already in a
        // cpuset of the user's. 60: one thread wholly on the shield (stays).
        s.threads.extend([
            of(40, 40, "/", "0-3"),
            of(40, 41, "/", "0-3"),
            of(40, 42, "/", "1-2"),
            of(50, 50, "/", "0-3"),
            of(50, 51, "/app", "0-3"),
            of(60, 60, "/", "0-3"),
            of(60, 61, "/", "3"),
        ]);
        let p = plan(&s, &req("2-3")).unwrap();
        let moves: Vec<(i32, &str, Vec<i32>)> = p
            .steps
            .iter()
            .filter_map(|st| match &st.action {
                Action::MoveTask {
                    tid,
                    to,
                    affinities,
                    ..
                } => Some((
                    *tid,
                    to.rsplit_once('/').unwrap().1,
                    affinities.iter().map(|(t, _)| *t).collect(),
                )),
                _ => None,
            })
            .collect();
        let workers: Vec<_> = moves.iter().filter(|(tid, ..)| *tid >= 40).collect();
        assert_eq!(
            workers,
            [
                &(61, "tasks", vec![61]),
                &(40, "cgroup.procs", vec![40, 41, 42]),
                &(50, "tasks", vec![50]),
                &(60, "tasks", vec![60])
            ],
            "one move for process 40, none for 51 (elsewhere); 61 (pinned inside) into the shield"
        );
        assert_eq!(
            affinity_of(&p, 42),
            Some(cpus("1")),
            "a thread of a process moved whole gets its own restriction back"
        );
    }
}
