//! A machine for the components' tests of their plans: four CPUs, a few
//! threads and IRQs, and the helpers that read a plan.

use super::*;
use crate::cpulist::CpuSet;
use crate::shield::change::Action;
use crate::shield::snapshot::{CgroupSetup, Irq};
use crate::sys::procfs::Thread;
use crate::sys::procfs::{PF_KTHREAD, PF_NO_SETAFFINITY};

pub(in crate::shield) fn cpus(s: &str) -> CpuSet {
    CpuSet::parse_list(s).unwrap()
}

pub(in crate::shield) fn thread(pid: i32, name: &str, flags: u64, allowed: &str) -> Thread {
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

pub(in crate::shield) fn snap(cgroup: CgroupSetup) -> Snapshot {
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

pub(in crate::shield) fn v2() -> CgroupSetup {
    CgroupSetup::V2 {
        mount: "sys/fs/cgroup".into(),
        subtree_control: vec!["memory".into()],
        has_exclusive: false,
    }
}

pub(in crate::shield) fn req(list: &str) -> Request {
    Request {
        cpus: cpus(list),
        ..Default::default()
    }
}

pub(in crate::shield) fn affinity_of(plan: &Plan, tid: i32) -> Option<CpuSet> {
    plan.steps.iter().find_map(|s| match &s.action {
        Action::SetAffinity { tid: t, cpus, .. } if *t == tid => Some(cpus.clone()),
        _ => None,
    })
}

pub(in crate::shield) fn write_to(plan: &Plan, path: &str) -> Option<String> {
    plan.steps.iter().find_map(|s| match &s.action {
        Action::Write { path: p, value, .. } if p == path => Some(value.clone()),
        _ => None,
    })
}
