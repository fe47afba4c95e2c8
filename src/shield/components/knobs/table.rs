//! The knobs `--tune` may set, in the order they are listed and applied:
//! what each writes, why it helps the shielded CPUs, what can go wrong,
//! and whether a bare `--tune` includes it.

use super::{
    Knob, Scope, Value, DIRTY_WRITEBACK, HUNG_TASK_TIMEOUT, NMI_WATCHDOG, NUMA_BALANCING, RT_RUNTIME, STAT_INTERVAL,
    TIMER_MIGRATION, WATCHDOG, WRITEBACK_MASK,
};

/// Every knob, in the order they are applied.
pub const KNOBS: &[Knob] = &[
    Knob {
        name: "rt-throttling",
        scope: Scope::Global {
            files: &[RT_RUNTIME],
        },
        value: Value::Const("-1"),
        why: "RT throttling stops real-time tasks for 50 ms of every second (950000 of 1000000 us by default)",
        risk: "a runaway real-time task can starve its CPU for good; on a shield only your own tasks are there; a safety net, so only by name, not in --tune",
        in_all: false,
        captured: false,
    },
    Knob {
        name: "vmstat",
        scope: Scope::Global {
            files: &[STAT_INTERVAL],
        },
        value: Value::Const("1000"),
        why: "the per-CPU vmstat worker wakes every second on every CPU; 1000 s makes that rare",
        risk: "memory statistics (free, /proc/vmstat) lag by up to the interval",
        in_all: true,
        captured: false,
    },
    Knob {
        name: "writeback",
        scope: Scope::Global {
            files: &[WRITEBACK_MASK, "sys/bus/workqueue/devices/writeback/numa"],
        },
        value: Value::HousekeepingMask,
        why: "block writeback flusher threads run on the housekeeping CPUs only (numa 0: no per-node pools that ignore the mask)",
        risk: "writeback has fewer CPUs; heavy I/O may flush more slowly",
        in_all: true,
        captured: false,
    },
    Knob {
        name: "workqueue",
        scope: Scope::Global {
            files: &["sys/devices/virtual/workqueue/cpumask"],
        },
        value: Value::HousekeepingMask,
        why: "unbound workqueue items run on the housekeeping CPUs only (the shield sets this too when needed)",
        risk: "none beyond fewer CPUs for kernel background work",
        in_all: true,
        captured: false,
    },
    Knob {
        name: "watchdog",
        scope: Scope::Global {
            files: &[WATCHDOG],
        },
        value: Value::Const("0"),
        why: "the soft-lockup watchdog runs a per-CPU timer and thread (watchdog/N) on every CPU",
        risk: "kernel lockups are no longer detected while it is off; a safety net, so only by name, not in --tune",
        in_all: false,
        captured: true,
    },
    Knob {
        name: "nmi-watchdog",
        scope: Scope::Global {
            files: &[NMI_WATCHDOG],
        },
        value: Value::Const("0"),
        why: "the hard-lockup (NMI) watchdog interrupts every CPU periodically through a perf counter",
        risk: "hard lockups are no longer detected; frees a performance counter; a safety net, so only by name, not in --tune",
        in_all: false,
        captured: true,
    },
    Knob {
        name: "hung-task",
        scope: Scope::Global {
            files: &[HUNG_TASK_TIMEOUT],
        },
        value: Value::AtLeast(600),
        why: "a kernel thread bound to a shielded CPU that a real-time loop holds waits in D state and is reported hung after 120 s (tuned's realtime profile raises it to 600 s)",
        risk: "a task really hung is reported later; 0 (off) stays off, hung_task_panic is left as it is; a safety net, so only by name, not in --tune",
        in_all: false,
        captured: false,
    },
    Knob {
        name: "machinecheck",
        scope: Scope::PerShieldCpu {
            pattern: "sys/devices/system/machinecheck/machinecheck{cpu}/check_interval",
        },
        value: Value::Const("0"),
        why: "machine-check polling runs a timer on each CPU every few minutes",
        risk: "corrected hardware errors on the shielded CPUs are noticed only when they raise an interrupt",
        in_all: true,
        captured: false,
    },
    Knob {
        name: "governor",
        scope: Scope::PerShieldCpu {
            pattern: "sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor",
        },
        value: Value::Const("performance"),
        why: "frequency changes stall the CPU and the governor's work runs on it; performance keeps it at top speed",
        risk: "more power and heat on the shielded CPUs",
        in_all: true,
        captured: false,
    },
    Knob {
        name: "freq-floor",
        scope: Scope::PerShieldCpu {
            pattern: "sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_min_freq",
        },
        value: Value::Sibling("scaling_max_freq"),
        why: "the lowest frequency raised to the highest: no frequency change, and no stall for one, when work comes and goes, whatever the governor or P-state driver would choose (tuned's cpu-partitioning: min_perf_pct 100)",
        risk: "more power and heat on the shielded CPUs; on a package near its power limit, less turbo for the others",
        in_all: true,
        captured: false,
    },
    Knob {
        name: "turbo",
        scope: Scope::Global {
            files: &[
                "sys/devices/system/cpu/intel_pstate/no_turbo",
                "sys/devices/system/cpu/cpufreq/boost",
            ],
        },
        value: Value::TurboOff,
        why: "turbo frequencies come and go with temperature and how many cores are busy: latency varies with them; without turbo it is steadier (if higher)",
        risk: "every CPU of the machine runs slower at peak; machine-wide, so only by name, not in --tune",
        in_all: false,
        captured: false,
    },
    Knob {
        name: "dirty-writeback",
        scope: Scope::Global {
            files: &[DIRTY_WRITEBACK],
        },
        value: Value::Const("1500"),
        why: "the dirty-page flusher wakes every 5 s by default; every 15 s is less noise",
        risk: "more dirty data lost on a crash or power cut",
        in_all: true,
        captured: false,
    },
    Knob {
        name: "net-queues",
        scope: Scope::NetQueues,
        value: Value::MaskAwayFromShield,
        why: "receive packet steering (rps_cpus, and rps_default_mask for devices made later: a container's veth) and transmit queue selection (xps_cpus) must not pick shielded CPUs",
        risk: "network processing has fewer CPUs",
        in_all: true,
        captured: false,
    },
    Knob {
        name: "timer-migration",
        scope: Scope::Global {
            files: &[TIMER_MIGRATION],
        },
        value: Value::Const("1"),
        why: "lets timers armed on an idle shielded CPU expire on a busy housekeeping CPU (isolation profile; a latency profile may prefer 0)",
        risk: "none known for isolation",
        in_all: true,
        captured: false,
    },
    Knob {
        name: "numa-balancing",
        scope: Scope::Global {
            files: &[NUMA_BALANCING],
        },
        value: Value::Const("0"),
        why: "automatic NUMA balancing unmaps pages to sample their use: the real-time task takes page faults it never asked for",
        risk: "memory of long-running tasks on multi-node machines is no longer moved next to their CPUs",
        in_all: true,
        captured: false,
    },
    Knob {
        name: "ksm",
        scope: Scope::Global {
            files: &["sys/kernel/mm/ksm/run"],
        },
        value: Value::Const("0"),
        why: "ksmd scans memory for identical pages to merge, and a write to a merged page faults to copy it",
        risk: "pages already merged stay merged (until written); no new merging while set",
        in_all: true,
        captured: false,
    },
    Knob {
        name: "thp",
        scope: Scope::Global {
            files: &[
                "sys/kernel/mm/transparent_hugepage/enabled",
                "sys/kernel/mm/transparent_hugepage/defrag",
            ],
        },
        value: Value::Const("never"),
        why: "transparent huge pages are made by compaction, in the faulting task or in khugepaged: stalls of milliseconds",
        risk: "programs that gain from huge pages (databases, JVMs) lose that; only by name, not in --tune",
        in_all: false,
        captured: false,
    },
    Knob {
        name: "khugepaged",
        scope: Scope::Global {
            files: &["sys/kernel/mm/transparent_hugepage/khugepaged/defrag"],
        },
        value: Value::Const("0"),
        why: "khugepaged collapses pages into huge pages in the background, compacting memory as it goes",
        risk: "fewer huge pages for programs that would use them; only by name, not in --tune",
        in_all: false,
        captured: false,
    },
    Knob {
        name: "overcommit",
        scope: Scope::Global {
            files: &["proc/sys/vm/overcommit_memory"],
        },
        value: Value::Const("2"),
        why: "strict overcommit: allocations fail up front instead of the OOM killer striking later (RT systems)",
        risk: "HIGH: programs that reserve much more memory than they use (browsers, JVMs) fail; only by name, not in --tune",
        in_all: false,
        captured: false,
    },
];
