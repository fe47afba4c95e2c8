//! A Kubernetes node: what its kubelet means for the audited CPUs. With the
//! static CPU manager policy, kubelet keeps the reserved CPUs
//! (`reservedSystemCPUs`) for the OS, itself and the pods' shared pool,
//! and hands the others whole to Guaranteed pods; the CPUs it has not
//! handed out yet are in the shared pool too, where every Burstable and
//! BestEffort pod runs. The audited CPUs are judged against that, from
//! kubelet's own configuration and checkpoint.

use super::facts::Facts;
use super::{Findings, Severity};
use crate::cpulist::CpuSet;
use crate::kubelet::Kubelet;

/// kubelet's findings, when kubelet runs.
pub(super) fn findings(f: &Facts, out: &mut Findings) {
    let Some(k) = &f.kubelet else {
        return;
    };
    let who = format!("kubelet (pid {})", k.pid);
    let file = k
        .config_file
        .as_deref()
        .unwrap_or("its KubeletConfiguration file (--config)");
    let housekeeping = f.housekeeping();
    let restart = format!(
        "drain the node, remove {}/cpu_manager_state and restart kubelet",
        k.root_dir
    );
    if let Some(e) = &k.config_error {
        out.add(
            "kubelet.config",
            Severity::Warn,
            40,
            format!("{who}: {e}; its CPU settings here are its flags' and kubelet's defaults"),
            format!("check {file} (journalctl -u kubelet says what kubelet made of it)"),
        );
    }
    if k.policy != "static" {
        out.add(
            "kubelet.policy",
            Severity::Bad,
            70,
            format!(
                "{who} runs the CPU manager policy '{}': the containers of every pod may run on {}",
                k.policy,
                f.list()
            ),
            format!(
                "cpuManagerPolicy: static and reservedSystemCPUs: \"{housekeeping}\" in {file}; {restart}"
            ),
        );
        return;
    }
    reserved(f, k, (&who, file, &restart), out);
    if let Some(state) = &k.state {
        let pooled = state.shared.intersection(&f.targets);
        let held = state.held().intersection(&f.targets);
        if !pooled.is_empty() {
            out.add(
                "kubelet.shared-pool",
                Severity::Warn,
                50,
                format!(
                    "CPUs {pooled} of {} are in kubelet's shared pool (defaultCpuSet {}): no Guaranteed pod holds them, so Burstable and BestEffort pods run there",
                    f.list(),
                    state.shared
                ),
                "give them to Guaranteed pods (integer CPU requests equal to their limits), or audit only the CPUs pods hold".to_string(),
            );
        }
        if !held.is_empty() {
            let holders: Vec<String> = (state.exclusive.iter())
                .filter(|e| e.cpus.intersects(&f.targets))
                .map(|e| format!("pod {} container {}: {}", e.pod, e.container, e.cpus))
                .collect();
            out.add(
                "kubelet.exclusive",
                Severity::Ok,
                0,
                format!(
                    "Guaranteed containers hold CPUs {held} exclusively ({})",
                    holders.join("; ")
                ),
                String::new(),
            );
        }
    }
    let smt = f.siblings.iter().any(|s| s.len() > 1);
    if smt && !k.option_on("full-pcpus-only") {
        out.add(
            "kubelet.full-pcpus-only",
            Severity::Warn,
            30,
            format!("hyper-threads share cores among {} and kubelet's full-pcpus-only is off: a Guaranteed pod may get one thread of a core whose other thread another pod gets", f.list()),
            format!("cpuManagerPolicyOptions: full-pcpus-only: \"true\" in {file}; {restart}"),
        );
    }
    system_partition(f, k, (file, &restart), out);
    if !k.option_on("strict-cpu-reservation") {
        out.add(
            "kubelet.strict-cpu-reservation",
            Severity::Warn,
            20,
            "kubelet's strict-cpu-reservation is off: Burstable and BestEffort pods run on the reserved CPUs too, beside the OS work and IRQs the shield sends there".to_string(),
            format!("cpuManagerPolicyOptions: strict-cpu-reservation: \"true\" in {file} (kubelet 1.32 and later); {restart}"),
        );
    }
}

/// KEP-5894's system partition against the audited CPUs: the pods of its
/// namespaces run on its CPUs.
fn system_partition(f: &Facts, k: &Kubelet, (file, restart): (&str, &str), out: &mut Findings) {
    let Some(partition) = &k.system_partition else {
        return;
    };
    let on = partition.cpus.intersection(&f.targets);
    if on.is_empty() {
        return;
    }
    out.add(
        "kubelet.system-partition",
        Severity::Bad,
        60,
        format!(
            "kubelet's systemPartition.cpuset (KEP-5894) puts the pods of {} on CPUs {}, the audited CPUs {on} among them",
            partition.namespaces.join(", "),
            partition.cpus
        ),
        format!(
            "systemPartition.cpuset: \"{}\" in {file} (within reservedSystemCPUs); {restart}",
            f.housekeeping()
        ),
    );
}

/// The reserved CPUs against the audited ones: kubelet's reserved CPUs
/// run the OS and the shared pool, so none may be audited, and every CPU
/// kubelet may hand a pod should be.
fn reserved(f: &Facts, k: &Kubelet, (who, file, restart): (&str, &str, &str), out: &mut Findings) {
    let housekeeping = f.housekeeping();
    let Some(reserved) = &k.reserved else {
        let why = k
            .reserved_error
            .as_deref()
            .map_or(String::new(), |e| format!(": {e}"));
        out.add(
            "kubelet.reserved",
            Severity::Warn,
            50,
            format!("{who} reserves no CPUs by list (reservedSystemCPUs{why}): it picks them itself from the reserved CPU quantity, lowest first, which need not be the housekeeping CPUs {housekeeping}"),
            format!("reservedSystemCPUs: \"{housekeeping}\" in {file}; {restart}"),
        );
        return;
    };
    let both = reserved.intersection(&f.targets);
    let handed = f.online.difference(reserved);
    let left_out: CpuSet = handed.difference(&f.targets);
    if !both.is_empty() {
        out.add(
            "kubelet.reserved",
            Severity::Bad,
            70,
            format!("{who} reserves CPUs {reserved} for the OS, itself and the pods' shared pool, and the audited CPUs {} take in {both} of them: kubelet, the runtime and every pod without exclusive CPUs run there", f.list()),
            format!("shield the CPUs kubelet hands to pods ({handed}), or reservedSystemCPUs: \"{housekeeping}\" in {file}; {restart}"),
        );
    } else if !left_out.is_empty() {
        out.add(
            "kubelet.reserved",
            Severity::Warn,
            40,
            format!("kubelet may hand CPUs {left_out} to a Guaranteed pod (they are not reserved: {reserved}), and they are not audited ({})", f.list()),
            format!("shield every CPU kubelet hands to pods ({handed}), or reservedSystemCPUs: \"{}\" in {file}; {restart}", f.online.difference(&f.targets)),
        );
    } else {
        out.add(
            "kubelet.reserved",
            Severity::Ok,
            70,
            format!("{who}: static policy, reservedSystemCPUs {reserved}: the audited CPUs {} are those it hands to pods", f.list()),
            String::new(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::{CpuManagerState, Exclusive};
    use std::collections::BTreeMap;

    fn cpus(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    fn node(reserved: Option<&str>, options: &[&str]) -> Facts {
        let kubelet = Kubelet {
            pid: 700,
            config_file: Some("/etc/kubernetes/kubelet-config.yaml".into()),
            config_error: None,
            policy: "static".into(),
            policy_options: (options.iter())
                .map(|o| (o.to_string(), "true".to_string()))
                .collect::<BTreeMap<_, _>>(),
            reserved: reserved.map(cpus),
            reserved_error: None,
            root_dir: "/var/lib/kubelet".into(),
            state: Some(CpuManagerState {
                policy: "static".into(),
                shared: cpus("0-1,3"),
                exclusive: vec![Exclusive {
                    pod: "6f1c".into(),
                    container: "rt".into(),
                    cpus: cpus("2"),
                }],
            }),
            system_partition: None,
        };
        Facts {
            targets: cpus("2-3"),
            online: cpus("0-3"),
            siblings: vec![cpus("2"), cpus("3")],
            kubelet: Some(kubelet),
            ..Facts::default()
        }
    }

    fn judged(f: &Facts) -> Vec<(String, Severity)> {
        let mut out = Findings::default();
        findings(f, &mut out);
        out.0.into_iter().map(|x| (x.id, x.severity)).collect()
    }

    fn severity(found: &[(String, Severity)], id: &str) -> Option<Severity> {
        found.iter().find(|(i, _)| i == id).map(|(_, s)| *s)
    }

    #[test]
    fn the_reserved_cpus_are_judged_against_the_audited_ones() {
        let good = judged(&node(Some("0-1"), &["strict-cpu-reservation"]));
        assert_eq!(severity(&good, "kubelet.reserved"), Some(Severity::Ok));
        let over = judged(&node(Some("0-2"), &[]));
        assert_eq!(severity(&over, "kubelet.reserved"), Some(Severity::Bad));
        let mut wider = node(Some("0"), &[]);
        wider.targets = cpus("2-3");
        assert_eq!(
            severity(&judged(&wider), "kubelet.reserved"),
            Some(Severity::Warn),
            "CPU 1 may go to a pod and is not audited"
        );
        assert_eq!(
            severity(&judged(&node(None, &[])), "kubelet.reserved"),
            Some(Severity::Warn)
        );
        assert!(!good
            .iter()
            .any(|(i, _)| i == "kubelet.strict-cpu-reservation"));
        assert_eq!(
            severity(&over, "kubelet.strict-cpu-reservation"),
            Some(Severity::Warn)
        );
    }

    #[test]
    fn a_system_partition_on_the_audited_cpus_is_bad_and_one_within_the_reserved_is_nothing() {
        let with = |list: &str| {
            let mut f = node(Some("0-1"), &["strict-cpu-reservation"]);
            let k = f.kubelet.as_mut().unwrap();
            k.system_partition = Some(crate::kubelet::SystemPartition {
                cpus: cpus(list),
                namespaces: vec!["kube-system".into()],
            });
            judged(&f)
        };
        let id = "kubelet.system-partition";
        assert_eq!(severity(&with("0-2"), id), Some(Severity::Bad));
        assert_eq!(severity(&with("0-1"), id), None);
        assert_eq!(severity(&with("1"), id), None);
    }

    #[test]
    fn cpus_no_pod_holds_are_the_shared_pool_and_those_held_are_named() {
        let f = node(Some("0-1"), &[]);
        let mut out = Findings::default();
        findings(&f, &mut out);
        let pool = out
            .0
            .iter()
            .find(|x| x.id == "kubelet.shared-pool")
            .unwrap();
        assert!(pool.reason.starts_with("CPUs 3 of 2-3"), "{}", pool.reason);
        let held = out.0.iter().find(|x| x.id == "kubelet.exclusive").unwrap();
        assert!(
            held.reason.contains("pod 6f1c container rt: 2"),
            "{}",
            held.reason
        );
    }

    #[test]
    fn without_the_static_policy_only_that_is_said() {
        let mut f = node(Some("0-1"), &[]);
        f.kubelet.as_mut().unwrap().policy = "none".into();
        assert_eq!(judged(&f), [("kubelet.policy".to_string(), Severity::Bad)]);
        f.kubelet = None;
        assert!(judged(&f).is_empty(), "no kubelet, no finding");
    }

    #[test]
    fn hyper_threads_ask_for_full_physical_cores() {
        let mut f = node(Some("0-1"), &[]);
        assert_eq!(severity(&judged(&f), "kubelet.full-pcpus-only"), None);
        f.siblings = vec![cpus("2-3"), cpus("2-3")];
        assert_eq!(
            severity(&judged(&f), "kubelet.full-pcpus-only"),
            Some(Severity::Warn)
        );
        f.kubelet
            .as_mut()
            .unwrap()
            .policy_options
            .insert("full-pcpus-only".into(), "true".into());
        assert_eq!(severity(&judged(&f), "kubelet.full-pcpus-only"), None);
    }
}
