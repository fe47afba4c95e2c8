//! What the components change, in one place, as a journal record may name
//! it ([`Reach`]): `off` acts on no record that names anything else (see
//! [`crate::shield::reach`]). Each line comes from the component's own
//! constants and path functions; the test below holds each path function
//! to its pattern, and every fixture test's `off` holds the whole (a path
//! a component writes that is missing here makes `off` refuse its record).

use crate::shield::reach::Reach;

use super::knobs::{Scope, KNOBS};
use crate::shield::cgroup_layout::{
    CGROUP2_FALLBACK, CGROUP2_MOUNT, SHIELD_CGROUP, SHIELD_SLICE, SYSTEM_CGROUP_V1,
};

/// The network queues the `net-queues` knob writes.
const NET_QUEUES: [&str; 2] = [
    "sys/class/net/*/queues/rx-*/rps_cpus",
    "sys/class/net/*/queues/tx-*/xps_cpus",
];
/// The scopes `run` and `move` put processes in (the tasks component's
/// `scope_action`: `cpushield-run-PID.scope`, `cpushield-out-PID.scope`).
const SCOPES: [&str; 2] = ["cpushield-run-*.scope", "cpushield-out-*.scope"];

/// Everything the components change, as [`Reach`] says it: the cgroups'
/// and the knobs' here, each other component's from its own
/// [`crate::shield::component::Component::reaches`].
pub(super) fn reach() -> Reach {
    let mut files: Vec<String> = Vec::new();
    for knob in KNOBS {
        match knob.scope {
            Scope::Global { files: fixed } => files.extend(fixed.iter().map(|f| f.to_string())),
            Scope::PerShieldCpu { pattern } => files.push(pattern.replace("{cpu}", "*")),
            Scope::NetQueues => files.extend(NET_QUEUES.iter().map(|f| f.to_string())),
        }
    }
    let strings = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut reach = Reach {
        files,
        dirs: Vec::new(),
        mounts: strings(&[CGROUP2_MOUNT, CGROUP2_FALLBACK]),
        cgroup_files: strings(&[
            "cgroup.subtree_control",
            "cgroup.procs",
            "tasks",
            "cpuset.cpus",
            "cpuset.mems",
            "cpuset.cpus.partition",
            "cpuset.cpu_exclusive",
            "cpuset.sched_load_balance",
        ]),
        cgroup_dirs: strings(&[SHIELD_CGROUP, SYSTEM_CGROUP_V1]),
        units: strings(&[SHIELD_SLICE, SCOPES[0], SCOPES[1]]),
        // The mechanism asks systemd for an `isolated` partition only;
        // `root` is what an older plan could ask.
        partitions: strings(&["isolated", "root"]),
    };
    for part in super::ORDER {
        part.reaches(&mut reach);
    }
    reach
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shield::reach::matches;

    #[test]
    fn each_path_a_component_makes_is_in_the_reach() {
        let r = reach();
        let file = |path: &str| assert!(r.files.iter().any(|p| matches(p, path)), "{path}");
        file(&crate::sys::irq::irq_affinity_file(24));
        file(crate::shield::snapshot::DEFAULT_IRQ_AFFINITY);
        file(&super::super::hotplug::cpu_online_file(3));
        file(&super::super::idle_states::qos_file(2));
        file("sys/devices/system/cpu/cpu2/cpuidle/state3/disable");
        file("sys/devices/system/cpu/cpu2/cpufreq/scaling_governor");
        file("sys/devices/system/machinecheck/machinecheck2/check_interval");
        file("sys/class/net/eth0/queues/rx-0/rps_cpus");
        file("sys/class/net/eth0/queues/tx-1/xps_cpus");
        file("sys/bus/workqueue/devices/writeback/cpumask");
        file("sys/kernel/debug/sched/features");
        file("proc/sys/kernel/sched_rt_runtime_us");
        file("sys/fs/resctrl/cpushield/schemata");
        file("sys/fs/resctrl/schemata");
        for outside in ["etc/shadow", "proc/sys", "proc/irq/24/x/smp_affinity_list"] {
            assert!(!r.files.iter().any(|p| matches(p, outside)), "{outside}");
        }
        assert!(r.units.iter().any(|u| matches(u, "cpushield-run-30.scope")));
        assert!(
            r.units.iter().any(|u| u == crate::heal::UNIT),
            "the healer declares its unit"
        );
        assert!(!r.units.iter().any(|u| matches(u, "ssh.service")));
    }
}
