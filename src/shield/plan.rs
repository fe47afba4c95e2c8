//! Plan: a pure function from (snapshot, request) to the list of changes a
//! shield needs. No I/O here; `--dry-run` prints the plan.

use std::collections::BTreeMap;

use serde::Serialize;

use super::change::{Action, Check, Owner, Step, Undo};
use super::knobs;
use super::note::Note;
use super::owners::Owners;
pub use super::plan_error::PlanError;
use super::request::Request;
use super::snapshot::{Snapshot, WORKQUEUE_MASK};
use super::tasks::{plan_tasks, remember_affinities, task_notes, TaskRef};
use super::{guard, hotplug, irqbalance, irqs, mechanism, rt_kthreads};
use crate::cpulist::CpuSet;

/// The full plan of a shield.
#[derive(Debug, Clone, Serialize)]
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
    let mut knob_steps = Vec::new();
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
        knob_steps = tuned.steps;
        notes.extend(tuned.notes);
    }
    // The guard starts before the knobs turn throttling off, and `off`
    // (the journal in reverse) stops it only after throttling is back.
    let (guard_steps, guard_note) = guard::plan(
        &snap.kernel_work,
        &req.guard,
        guard::rt_runtime_after(&snap.kernel_work, &knob_steps),
        &shield,
        snap.owners.systemd,
    )?;
    steps.extend(guard_steps);
    if let Some(above) = req.kthreads_above {
        steps.extend(rt_kthreads::plan(&snap.threads, &shield, above));
    }
    steps.extend(knob_steps);
    notes.push(guard_note);
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

/// Unbound workqueues off the shield, when their mask reaches it.
fn workqueue_step(snap: &Snapshot, shield: &CpuSet, housekeeping: &CpuSet) -> Option<Step> {
    let mask = snap.workqueue_mask.as_ref()?;
    let bits = snap.mask_bits();
    mask.intersects(shield).then(|| {
        Step::optional(
            Owner::Workqueues,
            Action::Write {
                path: WORKQUEUE_MASK.into(),
                value: mask.away_from(shield, housekeeping).to_mask(bits),
                check: Check::CpuMask,
                // 6.12 reads the mask without the partition's CPUs once
                // the partition exists; writing that back would make the
                // reduced mask the request for good. Restore the mask
                // read before the partition.
                undo: Undo::Value(mask.to_mask(bits)),
            },
        )
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shield::snapshot::{CgroupSetup, Irq, DEFAULT_IRQ_AFFINITY, SYSTEM_CGROUP_V1};
    use crate::sys::procfs::Thread;
    use crate::sys::procfs::{PF_KTHREAD, PF_NO_SETAFFINITY};
    use crate::sys::systemd::SystemdCall;

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
            kernel_work: Default::default(),
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
    fn each_step_names_its_component_and_what_it_changes_and_irqs_report_their_own() {
        use crate::shield::change::{Owner, Refusal, Refused, Subject};
        let s = snap(v2());
        let plan = plan(&s, &req("2-3")).unwrap();
        let about = |irq| {
            plan.steps
                .iter()
                .find(|st| st.subject == Subject::Irq(irq))
                .map(|st| st.owner)
        };
        assert_eq!(about(0), Some(Owner::Irqs));
        assert_eq!(about(25), Some(Owner::Irqs));
        assert_eq!(about(24), None, "IRQ 24 is on CPU 1 already");
        let owner_of = |path: &str| {
            plan.steps
                .iter()
                .find(|st| st.subject == Subject::File(path.into()))
                .map(|st| st.owner)
        };
        assert_eq!(owner_of(DEFAULT_IRQ_AFFINITY), Some(Owner::Irqs));
        assert_eq!(owner_of(WORKQUEUE_MASK), Some(Owner::Workqueues));
        assert!(plan
            .steps
            .iter()
            .filter(|st| matches!(st.action, Action::SetAffinity { .. }))
            .all(|st| st.owner == Owner::Tasks
                && matches!(st.subject, Subject::TaskAffinity(tid) if tid > 0)));
        // The kernel refuses IRQ 25: it is reported as refused with its
        // device's name, and only IRQ 0 as moved.
        let refused = [Refused {
            owner: Owner::Irqs,
            subject: Subject::Irq(25),
            refusal: Refusal {
                target: "/proc/irq/25/smp_affinity_list".into(),
                reason: "EIO".into(),
            },
        }];
        let out = crate::shield::irqs::outcome(
            (&plan.steps, &plan.irqs_to_shield, &plan.shield),
            &s,
            &refused,
        );
        assert_eq!(out.moved, [0]);
        assert_eq!(out.refused.len(), 1);
        assert_eq!(
            (
                out.refused[0].irq,
                out.refused[0].name.as_str(),
                out.refused[0].reason.as_str()
            ),
            (25, "nvme", "EIO")
        );
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
            .map(|s| crate::shield::apply::describe(crate::shield::components::EFFECTS, &s.action))
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
