//! The shield on a Kubernetes node (issue #60): kubelet hands the CPUs it
//! does not reserve to pods, in cgroups of its own that nothing else may
//! write, so the shield makes no cgroup or partition: it confines what
//! kubelet leaves to the OS (`system.slice`, `user.slice`, `init.scope`:
//! kubelet and the container runtime among them) to kubelet's reserved
//! CPUs, through systemd (`AllowedCPUs=`, runtime only), and gives each
//! unit back the CPUs it had. `kubepods` is never touched.

use super::*;
use crate::shield::cgroup_layout::CGROUP2_MOUNT;
use crate::kubelet::Kubelet;
use crate::shield::owners::{KubernetesNode, OsUnit};

/// What the mechanism keeps of a Kubernetes-mode shield: the units it
/// confined, each with the CPUs it had before.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub(in crate::shield) struct Confined {
    /// The OS's units, as they were before the shield.
    pub units: Vec<OsUnit>,
}

/// The mechanism's name for a Kubernetes-mode shield.
pub(super) const NAME: &str = "cgroup v2, Kubernetes node (the OS's systemd units on kubelet's reserved CPUs)";

/// Whether this request can be a shield on the Kubernetes node `node`:
/// kubelet runs with the static CPU manager policy and a reserved CPU
/// list, the housekeeping CPUs are exactly that list, the machine runs
/// cgroup v2 under systemd, and `--balance` asks for no partition.
pub(super) fn check(node: &KubernetesNode, cx: &Planning) -> Result<(), PlanError> {
    let refuse = |message: String| Err(PlanError::Part { option: "CPULIST", message });
    let seen = &node.seen;
    let Some(kubelet) = &node.kubelet else {
        return refuse(format!(
            "this is a Kubernetes node ({seen}) but kubelet's settings could not be read (no kubelet process, or its command line unreadable): the shielded CPUs are those kubelet does not reserve (reservedSystemCPUs); start kubelet first"
        ));
    };
    if kubelet.policy != "static" {
        return refuse(format!(
            "this is a Kubernetes node ({seen}) whose kubelet runs cpuManagerPolicy {}: it gives no container CPUs of its own, so none can be shielded; set cpuManagerPolicy: static and reservedSystemCPUs (drain the node, remove {}/cpu_manager_state, restart kubelet)",
            kubelet.policy, kubelet.root_dir
        ));
    }
    let Some(reserved) = &kubelet.reserved else {
        return refuse(format!(
            "this is a Kubernetes node ({seen}) whose kubelet reserves no CPU list (reservedSystemCPUs, --reserved-cpus): the housekeeping CPUs are kubelet's reserved ones; set reservedSystemCPUs"
        ));
    };
    let online = cx.shield.union(cx.housekeeping);
    let expected = online.difference(reserved);
    if reserved != cx.housekeeping {
        return refuse(format!(
            "this is a Kubernetes node ({seen}): kubelet reserves CPUs {reserved} for the OS and hands out the others to pods, so the shielded CPUs are CPUs {expected} (cpushield on {expected}){}",
            reserve_instead(kubelet, cx.housekeeping, cx.shield)
        ));
    }
    if let Some(why) = system_partition_on_shield(kubelet, cx.shield) {
        return refuse(format!("this is a Kubernetes node ({seen}): {why}"));
    }
    let v2_here = matches!(&cx.snap.cgroup, CgroupSetup::V2 { mount, .. } if mount == CGROUP2_MOUNT);
    if !v2_here || !cx.snap.owners.systemd {
        return refuse(format!(
            "this is a Kubernetes node ({seen}) without cgroup v2 at /{CGROUP2_MOUNT} under systemd: cpushield's Kubernetes mode confines systemd's units (kubelet's systemd cgroup driver)"
        ));
    }
    if node.os_units.is_empty() {
        return refuse(format!(
            "this is a Kubernetes node ({seen}) but none of system.slice, user.slice, init.scope has a cgroup under /{CGROUP2_MOUNT}"
        ));
    }
    if options::asked(cx.req) == Balance::Within {
        return Err(PlanError::Part {
            option: "--balance",
            message: format!("within: this is a Kubernetes node ({seen}), which gets no partition (kubelet's shared pool keeps load balancing on the CPUs no pod holds); leave --balance out"),
        });
    }
    Ok(())
}

/// How to have kubelet reserve `housekeeping` instead, so that `shield`
/// can be shielded: its CPU manager starts again with the new set, which
/// it does only from an empty checkpoint; pods that hold exclusive CPUs
/// now (its `cpu_manager_state`) must leave the node first.
fn reserve_instead(kubelet: &Kubelet, housekeeping: &CpuSet, shield: &CpuSet) -> String {
    let state = format!("{}/cpu_manager_state", kubelet.root_dir);
    let steps = format!(
        "set reservedSystemCPUs: \"{housekeeping}\", remove {state}, restart kubelet, then cpushield on {shield}"
    );
    match kubelet.state.as_ref().map(|s| s.held()).filter(|h| !h.is_empty()) {
        Some(held) => format!(
            "; to reserve CPUs {housekeeping} instead: pods hold exclusive CPUs {held} now ({state}), so drain the node first (kubectl drain), then {steps}"
        ),
        None => format!("; to reserve CPUs {housekeeping} instead: {steps}"),
    }
}

/// Why KEP-5894's system partition of `kubelet`, where it is set, does
/// not agree with the shield: it puts the system pods on `shield` CPUs.
fn system_partition_on_shield(kubelet: &Kubelet, shield: &CpuSet) -> Option<String> {
    let partition = kubelet.system_partition.as_ref()?;
    let on_shield = partition.cpus.intersection(shield);
    (!on_shield.is_empty()).then(|| {
        format!(
            "kubelet's systemPartition.cpuset (KEP-5894) puts the pods of {} on CPUs {}, shielded CPUs {on_shield} among them: set it within the reserved CPUs{}",
            partition.namespaces.join(", "),
            partition.cpus,
            kubelet.reserved.as_ref().map(|r| format!(" {r}")).unwrap_or_default()
        )
    })
}

/// What the user should know of kubelet's settings for the shield: the
/// shared pool on the reserved CPUs (`strict-cpu-reservation` off), a
/// NUMA node with a NIC and no shielded CPU, and reserved CPUs that split
/// cores with shielded ones (hyper-threads, from `sibling_groups`).
pub(super) fn notes(node: &KubernetesNode, sibling_groups: &[CpuSet]) -> Vec<Note> {
    (said(node, sibling_groups).iter())
        .map(MechanismNote::note)
        .collect()
}

/// What [`notes`] says, as the mechanism's own notes.
pub(super) fn said(node: &KubernetesNode, sibling_groups: &[CpuSet]) -> Vec<MechanismNote> {
    let Some(kubelet) = &node.kubelet else {
        return Vec::new();
    };
    let Some(reserved) = &kubelet.reserved else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if !kubelet.option_on("strict-cpu-reservation") {
        let note = MechanismNote::KubeletSharesReserved {
            reserved: reserved.clone(),
        };
        out.push(note);
    }
    let mut by_node: std::collections::BTreeMap<u32, (Vec<String>, CpuSet)> = Default::default();
    for n in &node.nic_nodes {
        let entry = by_node.entry(n.node).or_insert_with(|| (Vec::new(), n.cpus.clone()));
        entry.0.push(n.nic.clone());
    }
    for (numa, (nics, cpus)) in by_node {
        if !cpus.is_empty() && cpus.is_subset(reserved) {
            let note = MechanismNote::KubeletNicNodeUnshielded { node: numa, nics, cpus };
            out.push(note);
        }
    }
    let split: Vec<&CpuSet> = (sibling_groups.iter())
        .filter(|core| core.intersects(reserved) && !core.is_subset(reserved))
        .collect();
    if !split.is_empty() {
        let cores = split.iter().fold(CpuSet::default(), |all, c| all.union(c));
        let note = MechanismNote::KubeletSplitCores {
            cpus: cores.difference(reserved),
            reserved: cores.intersection(reserved),
        };
        out.push(note);
    }
    let shared = (sibling_groups.iter())
        .filter(|core| core.len() > 1)
        .fold(CpuSet::default(), |all, c| all.union(c))
        .difference(reserved);
    if !shared.is_empty() && !kubelet.option_on("full-pcpus-only") {
        out.push(MechanismNote::KubeletHalfCores { cpus: shared });
    }
    out
}

/// The steps that confine each of the OS's units not yet on the
/// `housekeeping` CPUs, each undone by giving it back the CPUs it had.
pub(super) fn confine(node: &KubernetesNode, housekeeping: &CpuSet) -> Vec<Step> {
    (node.os_units.iter())
        .filter(|u| u.cpus != *housekeeping)
        .map(|u| {
            let call = |cpus: &CpuSet| SystemdCall::SetAllowedCpus {
                unit: u.unit.clone(),
                cpus: cpus.clone(),
                cgroup_dir: u.dir.clone(),
                partition: None,
            };
            fatal(Action::Systemd {
                call: call(housekeeping),
                undo: Some(call(&u.cpus)),
                back: None,
            })
        })
        .collect()
}

/// What of a Kubernetes-mode shield no longer holds: kubelet's reserved
/// CPUs (on `node`, as it runs now) still the housekeeping ones, the cpuset
/// controller at the root, and each confined unit's effective CPUs within
/// the housekeeping ones, as the kernel reads them.
pub(super) fn lost(
    sys: &Sys,
    (state, node): (&State, Option<&KubernetesNode>),
    confined: &Confined,
    repair: &str,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let kubelet = node.and_then(|n| n.kubelet.as_ref());
    let reserved = kubelet.and_then(|k| k.reserved.clone());
    if let Some(reserved) = reserved.filter(|r| *r != state.housekeeping) {
        let shield = state.shield.union(&state.housekeeping).difference(&reserved);
        out.push(Finding::new(
            "kubelet-reserved",
            Severity::Bad,
            100,
            format!(
                "kubelet now reserves CPUs {reserved}, and the shield's housekeeping CPUs are {}: kubelet hands pods CPUs the OS's units, IRQs and kernel work are on",
                state.housekeeping
            ),
            format!("cpushield on {shield}"),
        ));
    }
    if let Some(k) = kubelet {
        if let Some(why) = system_partition_on_shield(k, &state.shield) {
            // kubelet's to mend, not a change of the shield's.
            let file = k.config_file.as_deref().unwrap_or("kubelet's KubeletConfiguration file");
            let next = format!(
                "set systemPartition.cpuset within CPUs {} in {file}, then restart kubelet",
                state.housekeeping
            );
            out.push(Finding::new("kubelet-system-partition", Severity::Bad, 90, why, next));
        }
    }
    let control = format!("{CGROUP2_MOUNT}/cgroup.subtree_control");
    if !sys
        .read(&control)
        .is_ok_and(|t| t.split_whitespace().any(|c| c == "cpuset"))
    {
        out.push(Finding::new(
            "cpuset-controller",
            Severity::Bad,
            100,
            format!("the cpuset controller is no longer enabled in /{control}: nothing keeps the OS's units off the shield"),
            repair,
        ));
    }
    for unit in &confined.units {
        let file = format!("{}/cpuset.cpus.effective", unit.dir);
        let reason = match sys.read_cpulist(&file) {
            Ok(cpus) if cpus.is_subset(&state.housekeeping) => continue,
            Ok(cpus) => format!(
                "/{file} reads {cpus}: {} reaches the shielded CPUs {}",
                unit.unit, state.shield
            ),
            Err(e) => format!("{} is no longer confined: /{file}: {e}", unit.unit),
        };
        out.push(Finding::new("enforcement", Severity::Bad, 100, reason, repair));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::Kubelet;
    use crate::shield::owners::kubernetes::NicNode;

    fn cpus(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    fn node(strict: bool) -> KubernetesNode {
        let mut policy_options = std::collections::BTreeMap::new();
        if strict {
            policy_options.insert("strict-cpu-reservation".to_string(), "true".to_string());
        }
        KubernetesNode {
            seen: "kubelet runs, pid 6000".into(),
            kubelet: Some(Kubelet {
                pid: 6000,
                config_file: None,
                config_error: None,
                policy: "static".into(),
                policy_options,
                reserved: Some(cpus("0-1")),
                reserved_error: None,
                root_dir: "/var/lib/kubelet".into(),
                state: None,
                system_partition: None,
            }),
            os_units: Vec::new(),
            nic_nodes: Vec::new(),
        }
    }

    fn texts(notes: &[Note]) -> Vec<String> {
        notes.iter().map(crate::report::note::text).collect()
    }

    #[test]
    fn kubelets_shared_reserved_cpus_and_split_cores_are_said_and_whole_strict_ones_are_not() {
        // Hyper-threads 0+2 and 1+3: reserving 0-1 splits both cores.
        let said = texts(&notes(&node(false), &[cpus("0,2"), cpus("1,3")]));
        assert_eq!(said.len(), 3, "{said:?}");
        assert!(said[0].starts_with("kubelet's strict-cpu-reservation is off: Burstable and BestEffort pods run on the reserved CPUs 0-1"));
        assert!(said[1].starts_with("shielded CPUs 2-3 share cores with the reserved CPUs 0-1"));
        assert!(said[2].starts_with("kubelet's full-pcpus-only is off and CPUs 2-3 are hyper-threads"));
        // Whole cores reserved (0+1), strict on, whole cores to pods:
        // nothing to say.
        let mut whole = node(true);
        let k = whole.kubelet.as_mut().unwrap();
        k.policy_options.insert("full-pcpus-only".into(), "true".into());
        assert!(notes(&whole, &[cpus("0-1"), cpus("2-3")]).is_empty());
        // Without it, pods may share the shielded cores 2+3.
        let said = texts(&notes(&node(true), &[cpus("0-1"), cpus("2-3")]));
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].contains("CPUs 2-3 are hyper-threads"), "{said:?}");
        // No hyper-threads: nothing to say of it.
        assert!(notes(&node(true), &[cpus("0"), cpus("1"), cpus("2"), cpus("3")]).is_empty());
    }

    #[test]
    fn a_numa_node_whose_nic_has_no_shielded_cpu_is_said_and_one_with_them_is_not() {
        let mut n = node(true);
        n.nic_nodes = vec![
            NicNode { nic: "eth0".into(), node: 0, cpus: cpus("0-1") },
            NicNode { nic: "eth1".into(), node: 0, cpus: cpus("0-1") },
            NicNode { nic: "eth2".into(), node: 1, cpus: cpus("2-3") },
        ];
        let said = texts(&notes(&n, &[]));
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].starts_with("NUMA node 0 has eth0, eth1 but no shielded CPU (its CPUs 0-1 are all reserved)"), "{said:?}");
        n.nic_nodes.truncate(0);
        n.nic_nodes.push(NicNode { nic: "eth2".into(), node: 1, cpus: cpus("2-3") });
        assert!(notes(&n, &[]).is_empty());
    }
}
