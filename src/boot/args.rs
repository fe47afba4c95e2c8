//! `cpushield boot-args`: the kernel command line that isolates CPUs from
//! boot on: what only a boot does (the tick, RCU callbacks, kernel-managed
//! queue interrupts), for the run-time shield to complete. Advice only;
//! the config key `boot` writes it (see [`super`]).

use serde::Serialize;

use crate::cpulist::CpuSet;

/// The boot parameters to add for a set of CPUs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BootArgs {
    /// The CPUs asked for.
    pub requested: CpuSet,
    /// The CPUs isolated: the request plus the hyper-thread siblings of its CPUs.
    pub isolated: CpuSet,
    /// The CPUs left for everything else (interrupts, kernel threads).
    pub housekeeping: CpuSet,
    /// Parameters to add, in order.
    pub args: Vec<String>,
    /// The parameters as one line to append to the kernel command line.
    pub cmdline: String,
    /// Further, optional parameters, each with why.
    pub optional: Vec<(String, String)>,
    /// Things to know (siblings added, nothing left, ...).
    pub warnings: Vec<String>,
    /// Where the machine stands now: what the running kernel isolated at
    /// boot, and cpushield's boot half (filled in by the command).
    pub now: Option<crate::boot::BootStatus>,
}

/// Plans the boot parameters isolating `cpus` on a machine with the given
/// online CPUs and the hyper-thread sibling groups of `cpus`. Siblings are
/// added: a sibling outside the isolated set shares the core's caches and
/// pipelines with it.
pub fn boot_args(cpus: &CpuSet, sibling_groups: &[CpuSet], online: &CpuSet) -> BootArgs {
    let mut warnings = Vec::new();
    let mut isolated = cpus.clone();
    for g in sibling_groups.iter().filter(|g| g.intersects(cpus)) {
        let extra = g.difference(cpus);
        if !extra.is_empty() {
            warnings.push(format!(
                "CPUs {extra} are hyper-thread siblings of {} (core {g}); included",
                g.intersection(cpus)
            ));
            isolated = isolated.union(g);
        }
    }
    let housekeeping = online.difference(&isolated);
    if housekeeping.is_empty() {
        warnings.push(format!(
            "no CPU would be left for housekeeping (online: {online}); pick fewer CPUs"
        ));
    }
    if isolated.contains(0) {
        warnings
            .push("CPU 0 is isolated: some kernel work is bound to CPU 0 and stays there".into());
    }
    let args = vec![
        // No `domain` flag: the shield's isolated cpuset partition takes the
        // CPUs out of load balancing at run time, and can be changed and
        // undone; a kernel booted with isolcpus=domain refuses a root
        // partition over them (since 6.7), and Debian's 6.12 any partition.
        // `isolcpus=domain` is deprecated in favour of cpusets
        // (kernel-parameters.txt).
        format!("isolcpus=managed_irq,{isolated}"),
        format!("nohz_full={isolated}"),
        format!("rcu_nocbs={isolated}"),
        format!("irqaffinity={housekeeping}"),
    ];
    let optional = vec![
        (
            "rcu_nocb_poll".into(),
            "RCU callback threads poll instead of being woken from the isolated CPUs".into(),
        ),
        (
            "skew_tick=1".into(),
            "offsets the per-CPU ticks so they do not contend on one lock".into(),
        ),
        (
            "nosoftlockup".into(),
            "no soft-lockup watchdog thread and timer (or: cpushield on --tune=watchdog)".into(),
        ),
        (
            "threadirqs".into(),
            "device interrupt handlers run in threads that can be prioritised".into(),
        ),
        (
            "tsc=reliable".into(),
            "no clocksource watchdog on the TSC; only when the TSC is known to be stable".into(),
        ),
    ];
    BootArgs {
        requested: cpus.clone(),
        cmdline: args.join(" "),
        isolated,
        housekeeping,
        args,
        optional,
        warnings,
        now: None,
    }
}

/// The boot line of a Kubernetes node adds `systemd.cpu_affinity=` of the
/// housekeeping CPUs (kubelet's reserved ones): systemd and every service
/// it starts, kubelet and the container runtime among them, stay there
/// from boot on, as the Node Tuning Operator's profile does, and each
/// container still gets its pod's CPUs when the runtime moves it into its
/// cgroup. `isolcpus=` stays without `domain`: kubelet's shared pool keeps
/// load balancing on the CPUs no pod holds.
pub fn for_kubernetes(advice: &mut BootArgs) {
    let affinity = format!("systemd.cpu_affinity={}", advice.housekeeping);
    if !advice.args.contains(&affinity) {
        advice.args.push(affinity);
        advice.cmdline = advice.args.join(" ");
    }
}

/// [`for_kubernetes`] where this machine is a Kubernetes node.
pub fn for_this_node(sys: &crate::sys::Sys, advice: &mut BootArgs) {
    if crate::kubelet::node_here(sys) {
        for_kubernetes(advice);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpus(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    #[test]
    fn plain() {
        let b = boot_args(&cpus("2-3"), &[cpus("2"), cpus("3")], &cpus("0-3"));
        assert_eq!(
            b.cmdline,
            "isolcpus=managed_irq,2-3 nohz_full=2-3 rcu_nocbs=2-3 irqaffinity=0-1"
        );
        assert!(b.warnings.is_empty());
    }

    #[test]
    fn siblings_are_added_with_a_warning() {
        let b = boot_args(&cpus("2"), &[cpus("2,6")], &cpus("0-7"));
        assert_eq!(b.isolated, cpus("2,6"));
        assert_eq!(b.housekeeping, cpus("0-1,3-5,7"));
        assert!(b.cmdline.contains("nohz_full=2,6"), "{}", b.cmdline);
        assert!(b.warnings[0].contains("siblings"), "{:?}", b.warnings);
    }

    #[test]
    fn nothing_left() {
        let b = boot_args(&cpus("0-1"), &[cpus("0-1")], &cpus("0-1"));
        assert!(b.warnings.iter().any(|w| w.contains("housekeeping")));
    }
}
