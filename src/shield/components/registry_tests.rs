//! What the components declare, read through the registry: each path a
//! component makes is in what they declare they reach (see
//! [`crate::shield::reach`]; every fixture test's `off` holds the whole),
//! and each tuned setting that writes what one writes is named by its
//! option.

use crate::shield::apply::Effects;
use crate::shield::reach::matches;

#[test]
fn each_path_a_component_makes_is_in_the_reach() {
    let r = super::EFFECTS.reach();
    let file = |path: &str| assert!(r.files.iter().any(|p| matches(p, path)), "{path}");
    file(&crate::sys::irq::irq_affinity_file(24));
    file(crate::shield::snapshot::DEFAULT_IRQ_AFFINITY);
    file("sys/devices/system/cpu/cpu3/online");
    file("sys/devices/system/cpu/cpu2/power/pm_qos_resume_latency_us");
    file("sys/kernel/rcu_normal");
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

#[test]
fn a_tuned_setting_that_writes_what_a_component_writes_is_named_by_its_option() {
    let ours = |section, key| super::tuned_overlap(section, key);
    assert_eq!(
        ours("sysctl", "kernel.hung_task_timeout_secs").as_deref(),
        Some("--tune=hung-task")
    );
    assert_eq!(
        ours("cpu", "force_latency").as_deref(),
        Some("--max-idle-latency (held for the whole machine)")
    );
    assert_eq!(ours("cpu", "no_such_key"), None);
    // Each --tune= named is a knob `tune --list` has.
    let knobs = super::TuneList::ALL;
    for part in super::ORDER {
        for (_, _, option) in part.tuned_overlaps() {
            if let Some(name) = option.strip_prefix("--tune=") {
                assert!(knobs.knobs.iter().any(|k| k.name == name), "{option}");
            }
        }
    }
}
