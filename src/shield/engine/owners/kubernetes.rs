//! A Kubernetes node, as the shield must live with it: kubelet hands every
//! CPU but its reserved ones (`reservedSystemCPUs`) to pods, in its own
//! cgroups (`kubepods.slice` with the systemd driver, `kubepods` with
//! cgroupfs), which nothing else may write. A shield there confines what
//! kubelet leaves to the OS (systemd's `system.slice`, `user.slice` and
//! `init.scope`, kubelet and the container runtime among them) to the
//! reserved CPUs, and makes no cgroup of its own. Read-only.

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;
use crate::kubelet::{self, under_any, Kubelet};
use crate::shield::cgroup_layout::CGROUP2_MOUNT;
use crate::sys::procfs::Thread;
use crate::sys::Sys;

/// The top-level systemd units that hold everything of the OS on a node
/// (kubelet and the runtime in `system.slice`, logins in `user.slice`,
/// PID 1 in `init.scope`): what a Kubernetes-mode shield confines.
pub const OS_UNITS: [&str; 3] = ["system.slice", "user.slice", "init.scope"];

/// A Kubernetes node, as read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KubernetesNode {
    /// What shows it is one: kubelet's process, threads in pods' cgroups.
    pub seen: String,
    /// kubelet as it runs (its CPU manager's settings), when its process
    /// was found.
    pub kubelet: Option<Kubelet>,
    /// The units of [`OS_UNITS`] whose cgroup exists, with the CPUs they
    /// are given now.
    pub os_units: Vec<OsUnit>,
    /// Each network device on a PCI function with a NUMA node (its
    /// `device/numa_node`, -1 left out), with that node's CPUs: where a pod
    /// aligned to the NIC (topology manager `single-numa-node`) must get
    /// its exclusive CPUs.
    #[serde(default)]
    pub nic_nodes: Vec<NicNode>,
}

/// A network device and the NUMA node it is attached to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NicNode {
    /// Its name (`eth0`).
    pub nic: String,
    /// Its NUMA node.
    pub node: u32,
    /// The node's CPUs (`/sys/devices/system/node/nodeN/cpulist`).
    pub cpus: CpuSet,
}

/// The network devices with a NUMA node, and each node's CPUs.
fn nic_nodes(sys: &Sys) -> Vec<NicNode> {
    (sys.list("sys/class/net").unwrap_or_default().into_iter())
        .filter_map(|nic| {
            let node = sys
                .read_trimmed(&format!("sys/class/net/{nic}/device/numa_node"))
                .ok()?
                .parse::<u32>()
                .ok()?;
            let cpus = sys
                .read_cpulist(&format!("sys/devices/system/node/node{node}/cpulist"))
                .ok()?;
            Some(NicNode { nic, node, cpus })
        })
        .collect()
}

/// One of the OS's top-level units on a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsUnit {
    /// Its name (`system.slice`).
    pub unit: String,
    /// Its cgroup directory, relative to the root.
    pub dir: String,
    /// Its `cpuset.cpus` (systemd's `AllowedCPUs=`) as read: empty when it
    /// sets none and takes its parent's.
    pub cpus: CpuSet,
}

impl KubernetesNode {
    /// Whether a thread in `cgroup` is in one of the OS units, whose CPUs
    /// the kernel narrows when the unit is confined.
    pub fn in_os_unit(&self, cgroup: &str) -> bool {
        (self.os_units.iter()).any(|u| under_any(cgroup, &[u.unit.as_str()]))
    }
}

/// The Kubernetes node this is, if one ([`kubelet::node_seen`]).
pub fn read(sys: &Sys, threads: &[Thread]) -> Option<KubernetesNode> {
    let seen = kubelet::node_seen(threads)?;
    let os_units = OS_UNITS
        .iter()
        .filter_map(|unit| {
            let dir = format!("{CGROUP2_MOUNT}/{unit}");
            sys.exists(&dir).then(|| OsUnit {
                unit: unit.to_string(),
                cpus: sys
                    .read_cpulist(&format!("{dir}/cpuset.cpus"))
                    .unwrap_or_default(),
                dir,
            })
        })
        .collect();
    Some(KubernetesNode {
        seen,
        kubelet: kubelet::read(sys, threads),
        os_units,
        nic_nodes: nic_nodes(sys),
    })
}
