//! Snapshot: what the machine has now, as far as a shield is concerned.
//!
//! Read-only. Everything cpushield may change is captured here, so that the
//! planner can work without I/O and tests can compare before/after.

use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use crate::cpulist::CpuSet;
use crate::sys::procfs::{self, Thread};
use crate::sys::{ErrorKind, Result, Sys};

pub use super::cgroup_layout::{
    detect_cgroup, in_shield_cgroup, CgroupSetup, CGROUP2_FALLBACK, SHIELD_CGROUP, SHIELD_SLICE,
    SYSTEM_CGROUP_V1,
};
pub use crate::sys::irq::{irq_affinity_file, irq_of_affinity_file, Irq, DEFAULT_IRQ_AFFINITY};

/// The cpumask of the unbound workqueues.
pub const WORKQUEUE_MASK: &str = "sys/devices/virtual/workqueue/cpumask";
/// The cpumask of the block writeback flusher workqueue (a knob).
pub const WRITEBACK_MASK: &str = "sys/bus/workqueue/devices/writeback/cpumask";

/// Everything a shield may touch, read at one moment.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Snapshot {
    /// CPUs that exist.
    pub present: CpuSet,
    /// CPUs that are online.
    pub online: CpuSet,
    /// CPUs isolated at boot (`isolcpus=`), from `/sys/devices/system/cpu/isolated`.
    pub boot_isolated: CpuSet,
    /// The cpuset mechanism.
    pub cgroup: CgroupSetup,
    /// Every thread.
    pub threads: Vec<Thread>,
    /// Every IRQ with an affinity file.
    pub irqs: Vec<Irq>,
    /// `/proc/irq/default_smp_affinity`.
    pub default_irq_affinity: Option<CpuSet>,
    /// The unbound-workqueue cpumask.
    pub workqueue_mask: Option<CpuSet>,
    /// Hyper-thread sibling groups of the online CPUs.
    pub sibling_groups: Vec<CpuSet>,
    /// systemd, irqbalance and tuned as found (read with the threads).
    #[serde(default)]
    pub owners: super::owners::Owners,
    /// cgroup v2: `cpuset.cpus.effective` of each cgroup that holds a
    /// thread, by its path as `/proc/PID/cgroup` names it (read with the
    /// threads; empty for v1 and in a re-read). A thread whose affinity is
    /// its cgroup's effective CPUs asked for none of its own: the kernel
    /// gives it the new effective CPUs when the partition takes the
    /// shield's (see the tasks component's plan).
    #[serde(default)]
    pub cgroup_cpus: BTreeMap<String, CpuSet>,
    /// What the kernel does for per-CPU kernel work behind a real-time
    /// task that never sleeps (PREEMPT_RT, the fair server, throttling).
    #[serde(default)]
    pub kernel_work: crate::guard::kernel::KernelWork,
    /// The facts of the components that read their own (see
    /// `Component::read`).
    #[serde(default)]
    pub parts: super::parts::OwnFacts,
}

impl Snapshot {
    /// Reads the machine, but for what the components observe for
    /// themselves (`components::read`). The name and flags of threads
    /// other than each process's first are left unread (see
    /// [`procfs::read_threads_lazily`]): callers read them for the threads
    /// they report or change ([`procfs::read_stats`]). `ours` names what
    /// of cpushield's a tuned setting writes too.
    pub fn read(sys: &Sys, ours: super::owners::tuned::Ours) -> Result<Snapshot> {
        let mut snap = Snapshot::read_without_threads(sys)?;
        snap.threads = procfs::read_threads_lazily(sys, snap.cgroup.thread_source())?;
        snap.owners = super::owners::Owners::read(sys, &snap.threads, ours);
        snap.cgroup_cpus = read_cgroup_cpus(sys, &snap.cgroup, &snap.threads);
        Ok(snap)
    }

    /// Reads the machine again after `before`: threads known from it are
    /// not asked for their name and flags again (see [`procfs::reread_threads`]).
    pub fn reread(sys: &Sys, before: &Snapshot) -> Result<Snapshot> {
        let mut snap = Snapshot::read_without_threads(sys)?;
        snap.threads = procfs::reread_threads(sys, snap.cgroup.thread_source(), &before.threads)?;
        Ok(snap)
    }

    /// Reads everything but the threads (`threads` is empty): enough to
    /// validate a request.
    pub fn read_without_threads(sys: &Sys) -> Result<Snapshot> {
        let present = procfs::present_cpus(sys)?;
        let online = procfs::online_cpus(sys)?;
        let boot_isolated = sys
            .read_cpulist("sys/devices/system/cpu/isolated")
            .unwrap_or_default();
        let cgroup = detect_cgroup(sys)?;
        let irqs = crate::sys::irq::read(sys)?;
        let default_irq_affinity = optional(sys.read_cpumask(DEFAULT_IRQ_AFFINITY))?;
        let workqueue_mask = optional(sys.read_cpumask(WORKQUEUE_MASK))?;
        let mut sibling_groups: Vec<CpuSet> = Vec::new();
        for cpu in online.iter() {
            let sib = procfs::thread_siblings(sys, cpu);
            if !sibling_groups.contains(&sib) {
                sibling_groups.push(sib);
            }
        }
        Ok(Snapshot {
            present,
            online,
            boot_isolated,
            cgroup,
            threads: Vec::new(),
            irqs,
            default_irq_affinity,
            workqueue_mask,
            sibling_groups,
            owners: Default::default(),
            cgroup_cpus: BTreeMap::new(),
            kernel_work: crate::guard::kernel::KernelWork::read(sys),
            parts: Default::default(),
        })
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
    ///
    /// On a Kubernetes node no partition forms: only the OS's units are
    /// confined, so only their threads are left to the kernel.
    pub fn left_to_the_partition(&self, t: &Thread) -> bool {
        matches!(self.cgroup, CgroupSetup::V2 { .. })
            && !t.is_kthread()
            && self.cgroup_cpus.get(&t.cgroup) == Some(&t.cpus_allowed)
            && (self.owners.kubernetes.as_ref()).is_none_or(|node| node.in_os_unit(&t.cgroup))
    }

    /// Number of bits to print in hex masks (the kernel pads to nr_cpu_ids).
    pub fn mask_bits(&self) -> u32 {
        self.present.last().map_or(1, |c| c + 1)
    }
}

/// The effective CPUs of each cgroup of `threads` on cgroup v2: its
/// `cpuset.cpus.effective`, or, where the cpuset controller is not enabled
/// (no such file: systemd enables it only where a unit sets CPUs), its
/// nearest ancestor's, whose cpuset its tasks belong to. One read per
/// cgroup; cgroups that vanished meanwhile are left out.
fn read_cgroup_cpus(
    sys: &Sys,
    setup: &CgroupSetup,
    threads: &[Thread],
) -> BTreeMap<String, CpuSet> {
    let CgroupSetup::V2 { mount, .. } = setup else {
        return BTreeMap::new();
    };
    let mut own: BTreeMap<String, Option<CpuSet>> = BTreeMap::new();
    let mut read_own = |cg: &str| -> Option<CpuSet> {
        own.entry(cg.to_string())
            .or_insert_with(|| {
                let dir = if cg == "/" {
                    mount.clone()
                } else {
                    format!("{mount}{cg}")
                };
                sys.read_cpulist(&format!("{dir}/cpuset.cpus.effective"))
                    .ok()
            })
            .clone()
    };
    let mut out = BTreeMap::new();
    for t in threads {
        if out.contains_key(&t.cgroup) {
            continue;
        }
        let mut cg = t.cgroup.as_str();
        let cpus = loop {
            if let Some(cpus) = read_own(cg) {
                break Some(cpus);
            }
            if !sys.exists(&format!("{mount}{cg}")) {
                break None;
            }
            match procfs::parent_cgroup(cg) {
                Some(parent) => cg = parent,
                None => break None,
            }
        };
        if let Some(cpus) = cpus {
            out.insert(t.cgroup.clone(), cpus);
        }
    }
    out
}

fn optional<T>(r: Result<T>) -> Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.kind == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}
