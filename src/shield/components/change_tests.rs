//! Tests of the change in place: what each part changes, and what it leaves.

use super::*;
use crate::cpulist::CpuSet;
use crate::shield::change::{Check, Undo};
use crate::shield::note::Note;
use crate::shield::owners::Owners;
use crate::shield::snapshot::{
    CgroupSetup, Irq, DEFAULT_IRQ_AFFINITY, SHIELD_SLICE, WORKQUEUE_MASK,
};
use crate::sys::procfs::Thread;
use crate::sys::procfs::{PF_KTHREAD, PF_NO_SETAFFINITY};
use crate::sys::systemd::SystemdCall;

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
        owners: Owners {
            systemd: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let write = |path: &str, value: &str, undo: Undo, previous: Option<&str>| Entry {
        owner: None,
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
            owner: None,
            action: Action::Remember {
                affinities: vec![(1, cpus("0-3")), (30, cpus("3"))],
            },
            previous: None,
            at: None,
        },
        Entry {
            owner: None,
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
        writes_refused: vec![],
        request: None,
        parts: serde_json::from_str(r#"{"irqs": [0]}"#).unwrap(),
        older: Default::default(),
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
    let r = change(&live, (&state, &entries), &request("2-3"), &files).unwrap();
    assert_eq!(r.plan.steps, Vec::<Step>::new());
    assert_eq!(r.still_refused, [0]);
    assert!(r.leaving.is_empty());
    assert_eq!(r.staying.len(), 1);
}

#[test]
fn a_smaller_shield_resizes_the_slice_and_gives_back_what_it_no_longer_needs() {
    let (live, entries, state) = shielded();
    let r = change(&live, (&state, &entries), &request("3"), &files).unwrap();
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
        owner: None,
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
    let r = change(&live, (&state, &entries), &request("1-2"), &files).unwrap();
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
