//! What the audit reads: every fact its rules judge, read once through
//! [`Sys`] (read-only). The rules ([`super::rules`]) never touch the system,
//! so they are tested from literal facts.
//! What only a component of the shield judges, it reads itself
//! ([`Facts::own`]).

use std::collections::BTreeMap;
use std::time::Duration;

use super::parse::{self, Delta, IdleState};
use super::AuditError;
use crate::cpulist::CpuSet;
use crate::shield::journal;
use crate::shield::snapshot::{self, Irq};
use crate::sys::kicks;
use crate::sys::procfs::{self, Hierarchy, Thread};
use crate::sys::Sys;

/// Everything the audit judges, as read from the machine.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// The CPUs audited.
    pub targets: CpuSet,
    /// The active shield's CPUs, if one is active.
    pub shield: Option<CpuSet>,
    /// Online CPUs.
    pub online: CpuSet,
    /// The kernel command line, parameter → value.
    pub cmdline: BTreeMap<String, Option<String>>,
    /// Seconds the interrupts were counted over (0: not counted).
    pub window_s: f64,
    /// Interrupt lines that fired on the targets in the window.
    pub interrupts: Vec<Delta>,
    /// Softirqs that ran on the targets in the window.
    pub softirqs: Vec<Delta>,
    /// Idle-balance kicks in the window, for each target the kernel runs
    /// without a sched domain.
    pub kicks: Vec<crate::sys::kicks::Rate>,
    /// System Management Interrupts the targets took in the window.
    pub smis: Smis,
    /// Every IRQ with its affinity.
    pub irqs: Vec<Irq>,
    /// `/proc/irq/default_smp_affinity`.
    pub default_irq_affinity: Option<CpuSet>,
    /// Every thread, with its cgroup.
    pub threads: Vec<Thread>,
    /// tuned's active profile and its include chain, when one is active.
    pub tuned: Option<crate::shield::owners::Tuned>,
    /// `/proc/sys/kernel/version`.
    pub kernel_version: String,
    /// The boot half cpushield manages, judged against the running kernel.
    pub boot: Option<crate::boot::BootStatus>,
    /// `/sys/kernel/debug/sched/preempt`.
    pub preempt_debugfs: Option<String>,
    /// `/sys/kernel/realtime`.
    pub realtime: Option<String>,
    /// What protects the targets' kernel work behind a real-time task
    /// that never sleeps (the kernel, the guard, or nothing).
    pub kernel_work: Option<crate::guard::kernel::Protection>,
    /// A stalld that runs, not started by cpushield.
    pub stalld: Option<crate::guard::stalld::Foreign>,
    /// Threads on the targets runnable without running behind another:
    /// the running guard's last scan, else two scans 1 s apart made here
    /// when a real-time task runs there.
    pub starving: Vec<crate::guard::watch::Starving>,
    /// Per target CPU: its frequency governor and idle states.
    pub cpu_power: Vec<CpuPower>,
    /// Per target CPU: its hyper-thread siblings (itself included).
    pub siblings: Vec<CpuSet>,
    /// NUMA nodes and their CPUs.
    pub numa_nodes: BTreeMap<String, CpuSet>,
    /// The PCI functions and the ASPM policy (the bus audit).
    pub pci: crate::sys::pci::PciFacts,
    /// What the shield's components read for their own rules, each under
    /// its name (see `Component::audit_read`).
    pub own: crate::shield::OwnFacts,
    /// kubelet as it runs, on a Kubernetes node.
    pub kubelet: Option<crate::kubelet::Kubelet>,
}

/// Frequency and idle facts of one CPU.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuPower {
    /// The CPU.
    pub cpu: u32,
    /// `scaling_governor`, when cpufreq is there.
    pub governor: Option<String>,
    /// Its cpuidle states.
    pub idle_states: Vec<IdleState>,
}

impl Facts {
    /// The IRQs the shield bound to the targets on request (`on --irq`),
    /// as the IRQs' own audit read published them.
    pub fn wanted_irqs(&self) -> Vec<u32> {
        (self.own.fact::<crate::shield::facts::BoundIrqs>())
            .unwrap_or_default()
            .0
    }

    /// The targets as a list, for messages.
    pub fn list(&self) -> String {
        self.targets.to_string()
    }

    /// Online CPUs other than the targets.
    pub fn housekeeping(&self) -> CpuSet {
        self.online.difference(&self.targets)
    }
}

/// Reads the facts about `cpus`, or about the active shield's CPUs,
/// counting interrupts over `window` (zero: not counted).
pub fn read(sys: &Sys, cpus: Option<&CpuSet>, window: Duration) -> Result<Facts, AuditError> {
    let state = journal::read_state(sys)?;
    let entries = if state.is_some() {
        journal::read_entries(sys)?
    } else {
        Vec::new()
    };
    let shield = state.as_ref().map(|s| s.shield.clone());
    let targets = match (cpus, &shield) {
        (Some(c), _) => c.clone(),
        (None, Some(s)) => s.clone(),
        (None, None) => return Err(AuditError::NoTarget),
    };
    let online = procfs::online_cpus(sys)?;
    let offline = targets.difference(&online);
    if !offline.is_empty() {
        return Err(AuditError::Offline {
            cpus: targets,
            offline,
            online,
        });
    }
    let read = |rel: &str| sys.read_trimmed(rel).ok();
    let no_domain =
        kicks::read_without_domain(sys, &targets, shield.as_ref().unwrap_or(&CpuSet::new()));
    let counted = count_interrupts(sys, (&targets, &no_domain), window);
    let running_guard = crate::guard::read_state(sys).filter(|s| crate::guard::alive(sys, s));
    let (protection, stalld) = kernel_work(sys, running_guard.as_ref());
    let threads = read_threads(sys)?;
    let kubelet = crate::kubelet::read(sys, &threads);
    let tuned = crate::shield::owners::read_tuned(sys, &threads, &crate::shield::tuned_overlap);
    Ok(Facts {
        cmdline: parse::parse_cmdline(&sys.read("proc/cmdline").unwrap_or_default()),
        window_s: window.as_secs_f64(),
        interrupts: counted.interrupts,
        softirqs: counted.softirqs,
        kicks: counted.kicks,
        smis: counted.smis,
        irqs: crate::sys::irq::read(sys)?,
        default_irq_affinity: sys.read_cpumask(snapshot::DEFAULT_IRQ_AFFINITY).ok(),
        threads,
        tuned,
        kernel_version: read("proc/sys/kernel/version").unwrap_or_default(),
        boot: crate::boot::status(sys).ok(),
        preempt_debugfs: read("sys/kernel/debug/sched/preempt"),
        realtime: read("sys/kernel/realtime"),
        kernel_work: Some(protection),
        stalld,
        starving: match &running_guard {
            Some(g) => g.starving.clone(),
            None => crate::guard::starving_now(sys, &targets, Duration::from_secs(1)),
        },
        cpu_power: targets.iter().map(|cpu| cpu_power(sys, cpu)).collect(),
        siblings: targets
            .iter()
            .map(|cpu| procfs::thread_siblings(sys, cpu))
            .collect(),
        own: crate::shield::components::read_for_audit(sys, &targets, &entries),
        numa_nodes: numa_nodes(sys),
        pci: crate::sys::pci::read(sys),
        kubelet,
        targets,
        shield,
        online,
    })
}

/// What protects the per-CPU kernel work behind a real-time task that
/// never sleeps, with the guard that runs (if one does).
fn kernel_work(
    sys: &Sys,
    running_guard: Option<&crate::guard::GuardState>,
) -> (
    crate::guard::kernel::Protection,
    Option<crate::guard::stalld::Foreign>,
) {
    let kernel = crate::guard::kernel::KernelWork::read(sys);
    let guard = running_guard.map(|s| s.settings.unwrap_or_default());
    let protection = crate::guard::kernel::Protection::of(&kernel, kernel.rt_runtime_us, guard);
    (protection, kernel.stalld_running)
}

/// The SMIs of the audited CPUs in the window (`MSR_SMI_COUNT`): the
/// firmware's, which no kernel counter shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Smis {
    /// Each target whose counter read, with its SMIs in the window.
    pub counted: Vec<(u32, u64)>,
    /// Why a target's counter could not be read (the first such).
    pub unreadable: Option<String>,
}

/// What was counted over the window.
struct Counted {
    interrupts: Vec<Delta>,
    softirqs: Vec<Delta>,
    kicks: Vec<kicks::Rate>,
    smis: Smis,
}

/// Interrupts and softirqs on `targets` over `window`: two reads of the
/// counters with a sleep between; and from the same reads, the kicks on
/// the targets without a sched domain (`no_domain`), and their SMIs.
fn count_interrupts(
    sys: &Sys,
    (targets, no_domain): (&CpuSet, &CpuSet),
    window: Duration,
) -> Counted {
    if window.is_zero() {
        return Counted {
            interrupts: Vec::new(),
            softirqs: Vec::new(),
            kicks: Vec::new(),
            smis: Smis::default(),
        };
    }
    let counters = || {
        (
            sys.read("proc/interrupts").ok(),
            sys.read("proc/softirqs").ok(),
        )
    };
    let (smis_before, before) = (sys.smi_counts(targets.iter()), counters());
    std::thread::sleep(window);
    let (after, smis_after) = (counters(), sys.smi_counts(targets.iter()));
    let smis = Smis {
        counted: (targets.iter())
            .filter_map(|cpu| Some((cpu, smis_after.taken(&smis_before, cpu)?)))
            .collect(),
        unreadable: smis_before.unreadable.or(smis_after.unreadable),
    };
    let delta = |a: &Option<String>, b: &Option<String>| match (a, b) {
        (Some(a), Some(b)) => parse::interrupt_deltas(a, b, targets),
        _ => Vec::new(),
    };
    let kicked = match (&before, &after) {
        ((Some(ia), Some(sa)), (Some(ib), Some(sb))) if !no_domain.is_empty() => kicks::rates(
            &kicks::parse(sa, ia, no_domain),
            &kicks::parse(sb, ib, no_domain),
            window.as_secs_f64(),
        ),
        _ => Vec::new(),
    };
    Counted {
        interrupts: delta(&before.0, &after.0),
        softirqs: delta(&before.1, &after.1),
        kicks: kicked,
        smis,
    }
}

fn read_threads(sys: &Sys) -> Result<Vec<Thread>, AuditError> {
    let setup = snapshot::detect_cgroup(sys).ok();
    let source = setup
        .as_ref()
        .map_or(procfs::CgroupSource::per_thread(Hierarchy::Unified), |c| {
            c.thread_source()
        });
    Ok(procfs::read_all_threads(sys, source)?)
}

fn cpu_power(sys: &Sys, cpu: u32) -> CpuPower {
    let base = format!("sys/devices/system/cpu/cpu{cpu}");
    let read = |rel: String| sys.read_trimmed(&rel).ok();
    // cpuidle's states, in the audit's terms.
    let idle_states = crate::sys::cpuidle::read_states(sys, cpu)
        .into_iter()
        .map(|st| IdleState {
            state: st.state,
            name: st.name,
            latency_us: st.latency_us,
            disabled: st.disabled,
        })
        .collect();
    CpuPower {
        cpu,
        governor: read(format!("{base}/cpufreq/scaling_governor")),
        idle_states,
    }
}

fn numa_nodes(sys: &Sys) -> BTreeMap<String, CpuSet> {
    sys.list("sys/devices/system/node")
        .unwrap_or_default()
        .into_iter()
        .filter(|n| n.starts_with("node") && n[4..].parse::<u32>().is_ok())
        .filter_map(|n| {
            let cpus = sys
                .read_cpulist(&format!("sys/devices/system/node/{n}/cpulist"))
                .ok()?;
            Some((n, cpus))
        })
        .collect()
}
