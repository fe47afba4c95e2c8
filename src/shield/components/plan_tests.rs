//! Tests of the fresh plan: what each part plans, and in what order.

use super::*;
use crate::cpulist::CpuSet;
use crate::shield::note::Note;
use crate::shield::owners::Owners;
use crate::shield::snapshot::{
    CgroupSetup, Irq, DEFAULT_IRQ_AFFINITY, SYSTEM_CGROUP_V1, WORKQUEUE_MASK,
};
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
        ..Default::default()
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
    use crate::shield::change::{Refusal, Refused, Subject};
    let s = snap(v2());
    let plan = plan(&s, &req("2-3")).unwrap();
    let about = |irq| {
        plan.steps
            .iter()
            .find(|st| st.subject == Subject::Irq(irq))
            .map(|st| st.owner)
    };
    assert_eq!(about(0), Some(crate::shield::irqs::OWNER));
    assert_eq!(about(25), Some(crate::shield::irqs::OWNER));
    assert_eq!(about(24), None, "IRQ 24 is on CPU 1 already");
    let owner_of = |path: &str| {
        plan.steps
            .iter()
            .find(|st| st.subject == Subject::File(path.into()))
            .map(|st| st.owner)
    };
    assert_eq!(
        owner_of(DEFAULT_IRQ_AFFINITY),
        Some(crate::shield::irqs::OWNER)
    );
    assert_eq!(
        owner_of(WORKQUEUE_MASK),
        Some(crate::shield::workqueues::OWNER)
    );
    assert!(plan
        .steps
        .iter()
        .filter(|st| matches!(st.action, Action::SetAffinity { .. }))
        .all(|st| st.owner == crate::shield::tasks::OWNER
            && matches!(st.subject, Subject::TaskAffinity(tid) if tid > 0)));
    // The kernel refuses IRQ 25: it is reported as refused with its
    // device's name, and only IRQ 0 as moved.
    let refused = [Refused {
        owner: crate::shield::irqs::OWNER,
        subject: Subject::Irq(25),
        refusal: Refusal {
            target: "/proc/irq/25/smp_affinity_list".into(),
            reason: "EIO".into(),
        },
    }];
    let out = crate::shield::irqs::outcome(
        (&plan.steps, &plan.irqs_to_shield, &plan.shield),
        &s.irqs,
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
        .filter(|s| s.action.own_as::<irqbalance::Own>().is_some())
        .collect();
    assert_eq!(bans.len(), 1);
    let Some(irqbalance::Own::IrqbalanceBan {
        banned, make_dir, ..
    }) = bans[0].action.own_as()
    else {
        unreachable!()
    };
    assert_eq!(banned, cpus("2-3,5"));
    assert!(make_dir);
    assert!(!bans[0].fatal);
    // before any IRQ is moved, so that irqbalance does not move them back
    let ban_at = plan
        .steps
        .iter()
        .position(|s| s.action.own_as::<irqbalance::Own>().is_some());
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
        .any(|s| s.action.own_as::<irqbalance::Own>().is_some()));
    assert!(plan
        .notes
        .iter()
        .any(|n| matches!(n, Note::Part(p) if p.is("irqbalance", "irqbalance_without_unit") && p.data["pid"] == 400)));
    assert_eq!(plan.shield_dir, "sys/fs/cgroup/cpushield");
}

#[test]
fn a_tuned_profile_that_isolates_cores_is_reported() {
    let mut s = snap(v2());
    s.owners.tuned = Some(crate::shield::owners::Tuned {
        profile: "cpu-partitioning".into(),
        running: true,
        pins: vec!["cpu-partitioning: isolated_cores".into()],
        ..Default::default()
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
    // what its chain sets that cpushield sets too is a note of its own
    s.owners.tuned.as_mut().unwrap().overlaps =
        vec!["latency-performance: [cpu] governor=performance (--tune=governor)".into()];
    s.owners.tuned.as_mut().unwrap().chain = vec![
        "latency-performance (included by cpu-partitioning)".into(),
        "cpu-partitioning".into(),
    ];
    let notes = super::plan(&s, &req("2-3")).unwrap().notes;
    assert!(notes.iter().any(|n| matches!(n, Note::TunedOverlaps { settings, .. } if settings[0].contains("governor"))), "{notes:?}");
    s.owners.tuned.as_mut().unwrap().running = false;
    assert!(
        super::plan(&s, &req("2-3"))
            .unwrap()
            .notes
            .iter()
            .all(|n| !matches!(n, Note::TunedOverlaps { .. })),
        "a stopped tuned re-applies nothing"
    );
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
        crate::shield::irqs::unknown_irq("nope")
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
