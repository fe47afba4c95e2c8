//! The cgroup mechanism's own notes, worded by itself.

use serde::{Deserialize, Serialize};

use super::OWNER;
use crate::cpulist::CpuSet;
use crate::shield::change::Owner;
use crate::shield::note::OwnNote;

/// What the user should know of the cgroups a shield is made of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MechanismNote {
    /// No cgroup hierarchy with cpuset is mounted: cgroup2 is mounted for
    /// the shield, and `off` unmounts it.
    MountingCgroup2 {
        /// Where, relative to the root.
        mount: String,
    },
    /// Shielded CPUs that are also isolated at boot (`isolcpus=domain`).
    AlsoIsolatedAtBoot {
        /// The shielded CPUs isolated at boot.
        cpus: CpuSet,
    },
    /// A Kubernetes node whose kubelet runs without the CPU manager's
    /// `strict-cpu-reservation` option.
    KubeletSharesReserved {
        /// kubelet's reserved CPUs.
        reserved: CpuSet,
    },
    /// A Kubernetes node's NUMA node that has a NIC but no shielded CPU.
    KubeletNicNodeUnshielded {
        /// The NUMA node.
        node: u32,
        /// Its network devices.
        nics: Vec<String>,
        /// Its CPUs (all reserved).
        cpus: CpuSet,
    },
    /// A Kubernetes node whose reserved CPUs are not whole cores.
    KubeletSplitCores {
        /// The shielded CPUs that share a core with a reserved one.
        cpus: CpuSet,
        /// The reserved CPUs on those cores.
        reserved: CpuSet,
    },
    /// A Kubernetes node with hyper-threads whose kubelet runs without the
    /// CPU manager's `full-pcpus-only` option.
    KubeletHalfCores {
        /// The shielded CPUs that share a core with another CPU.
        cpus: CpuSet,
    },
}

impl OwnNote for MechanismNote {
    fn owner(&self) -> Owner {
        OWNER
    }

    fn text(&self) -> String {
        match self {
            MechanismNote::MountingCgroup2 { mount } => format!(
                "no cgroup hierarchy with cpuset is mounted: mounting cgroup2 at /{mount} (off unmounts it)"
            ),
            MechanismNote::AlsoIsolatedAtBoot { cpus } => format!(
                "CPUs {cpus} are also isolated at boot (isolcpus=domain): the kernel already keeps them out of load balancing; the partition adds enforcement"
            ),
            MechanismNote::KubeletSharesReserved { reserved } => format!(
                "kubelet's strict-cpu-reservation is off: Burstable and BestEffort pods run on the reserved CPUs {reserved} beside the IRQs and kernel work the shield sends there, and on each shielded CPU no Guaranteed pod holds; set cpuManagerPolicyOptions strict-cpu-reservation: \"true\" (drain, remove cpu_manager_state, restart kubelet)"
            ),
            MechanismNote::KubeletNicNodeUnshielded { node, nics, cpus } => format!(
                "NUMA node {node} has {} but no shielded CPU (its CPUs {cpus} are all reserved): a pod aligned to that NIC (topology manager single-numa-node) gets no exclusive CPU there; leave CPUs of each node with a NIC out of reservedSystemCPUs",
                // interface names are any bytes but `/`, `:` and spaces
                crate::escape::terminal(&nics.join(", "))
            ),
            MechanismNote::KubeletHalfCores { cpus } => format!(
                "kubelet's full-pcpus-only is off and CPUs {cpus} are hyper-threads: a Guaranteed pod may get one thread of a core whose other thread another pod gets; set cpuManagerPolicyOptions full-pcpus-only: \"true\" (drain, remove cpu_manager_state, restart kubelet)"
            ),
            MechanismNote::KubeletSplitCores { cpus, reserved } => format!(
                "shielded CPUs {cpus} share cores with the reserved CPUs {reserved}: a pod there shares a core's caches and pipeline with the OS's work; reserve whole cores (reservedSystemCPUs), and give pods whole cores (full-pcpus-only)"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shield::Note;

    #[test]
    fn the_mechanisms_note_keeps_its_kind_and_fields_and_says_itself() {
        let note = MechanismNote::MountingCgroup2 {
            mount: "run/cpushield/cgroup2".into(),
        };
        let Note::Part(part) = note.note() else {
            panic!("a component's note");
        };
        assert!(part.is("cgroups", "mounting_cgroup2"));
        assert_eq!(part.data["mount"], "run/cpushield/cgroup2");
        assert_eq!(
            part.text,
            "no cgroup hierarchy with cpuset is mounted: mounting cgroup2 at /run/cpushield/cgroup2 (off unmounts it)"
        );
    }
}
