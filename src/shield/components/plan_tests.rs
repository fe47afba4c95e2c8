//! Tests of the fresh plan: what each part plans, and in what order.

use super::test_machine::*;
use super::*;
use crate::shield::note::Note;
use crate::shield::owners::Owners;
use crate::shield::snapshot::{
    CgroupSetup, DEFAULT_IRQ_AFFINITY, SYSTEM_CGROUP_V1, WORKQUEUE_MASK,
};
use crate::sys::procfs::Thread;
use crate::sys::systemd::SystemdCall;

#[test]
fn under_systemd_the_shield_is_a_transient_slice_and_the_partition_is_its_cgroup() {
    let mut s = snap(v2());
    s.owners = Owners {
        systemd: true,
        ..Default::default()
    };
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
    assert_eq!(tasks_planned(&p)["per_cpu_kthreads"]["ksoftirqd"], 1);
    assert_eq!(
        affinity_of(&p, 30),
        Some(cpus("3")),
        "a task pinned inside keeps its own CPU (set again after its move)"
    );
    assert_eq!(planned_count(&p, "kept"), 1);
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
    assert_eq!(planned_count(&p, "kept"), 0);
    assert_eq!(affinity_of(&p, 30), Some(cpus("0-1")));
}

#[test]
fn a_process_that_asked_only_for_shielded_cpus_is_kept_whole_or_its_threads_move_off() {
    let mut s = snap(v2());
    let mut helper = thread(30, "pinned-helper", 0, "0-1");
    helper.tid = 32;
    s.threads.push(helper);
    let p = plan(&s, &req("2-3")).unwrap();
    assert_eq!(planned_count(&p, "kept"), 0, "v2 places whole processes");
    assert_eq!(planned_count(&p, "split_off"), 1);
    assert_eq!(affinity_of(&p, 30), Some(cpus("0-1")));
    assert!(p.notes.iter().any(|n| matches!(n,
        Note::Part(part) if part.is("tasks", "threads_split_off") && part.data["threads"] == 1)));
    // cgroup v1 moves single threads: the pinned one is kept
    let mut s1 = s.clone();
    s1.cgroup = CgroupSetup::V1 {
        mount: "sys/fs/cgroup/cpuset".into(),
        mems: "0".into(),
        load_balance: "1".into(),
    };
    let p = plan(&s1, &req("2-3")).unwrap();
    assert_eq!(planned_count(&p, "kept"), 1);
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
    assert!(p.notes.iter().any(|n| matches!(n,
        Note::Part(part) if part.is("cgroups", "mounting_cgroup2")
            && part.data["mount"] == "run/cpushield/cgroup2")));
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
        p.notes.iter().any(|n| matches!(n,
            Note::Part(part) if part.is("cgroups", "also_isolated_at_boot")
                && part.data["cpus"] == "3")),
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

/// What the tasks' part of plan `p` found, as the plan keeps it.
fn tasks_planned(p: &crate::shield::plan::Plan) -> serde_json::Value {
    p.parts.get("tasks").expect("the tasks' part of the plan")
}

/// How many tasks the tasks' part of plan `p` lists under `what`.
fn planned_count(p: &crate::shield::plan::Plan, what: &str) -> usize {
    tasks_planned(p)[what].as_array().map_or(0, Vec::len)
}
