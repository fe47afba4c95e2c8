//! `cpushield audit`: what noise still reaches the target CPUs, and what to
//! do about it. Read-only: every access is a read through [`Sys`], so
//! fixture roots drive the tests and it is safe on any machine.
//!
//! The watchdog files are never read while an active shield holds them off
//! (reading them then was seen to break re-enabling the watchdog): their
//! values come from the shield's journal.

pub mod bootargs;
pub mod parse;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

pub use bootargs::{boot_args, BootArgs};
use parse::{Delta, IdleState};

use crate::cpulist::CpuSet;
use crate::shield::journal::{self, JournalError};
use crate::shield::knobs::{self as tune, NMI_WATCHDOG, WATCHDOG, WRITEBACK_MASK};
use crate::shield::snapshot::{self, SHIELD_CGROUP};
use crate::sys::procfs::{self, Hierarchy};
use crate::sys::{Sys, SysError};

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Noise reaches the targets now.
    Bad,
    /// Noise may reach them, or a setting leaves latency on the table.
    Warn,
    /// Fine.
    Ok,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Stable identifier (`irq-affinity`, `boot.nohz_full`, ...).
    pub id: String,
    /// ok / warn / bad.
    pub severity: Severity,
    /// What was found, with the numbers.
    pub reason: String,
    /// The concrete next step: a kernel argument or a cpushield command.
    pub next: String,
    /// Expected impact on latency, 0-100; findings are sorted by it.
    pub impact: u8,
}

/// The result of `audit`.
#[derive(Debug, Clone, Serialize)]
pub struct AuditReport {
    /// CPUs audited.
    pub cpus: CpuSet,
    /// Where they came from: `shield` or `--cpus`.
    pub source: String,
    /// Whether a shield is active.
    pub shield_active: bool,
    /// Seconds interrupts were counted over (0: not counted).
    pub window_s: f64,
    /// Findings, worst first.
    pub findings: Vec<Finding>,
    /// Interrupt lines that fired on the targets during the window.
    pub interrupts: Vec<Delta>,
    /// Softirqs that ran on the targets during the window.
    pub softirqs: Vec<Delta>,
}

/// Why the audit could not run.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// No shield and no `--cpus`.
    #[error("no shield is active: say which CPUs to audit with --cpus LIST (or start one with: cpushield on LIST)")]
    NoTarget,
    /// `--cpus` names CPUs that are not online.
    #[error("--cpus {cpus}: CPUs {offline} are not online (online: {online})")]
    Offline {
        /// Requested.
        cpus: CpuSet,
        /// Not online among them.
        offline: CpuSet,
        /// Online.
        online: CpuSet,
    },
    /// The journal could not be read.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// Reading the system failed.
    #[error(transparent)]
    Sys(#[from] SysError),
}

struct Ctx<'a> {
    sys: &'a Sys,
    targets: CpuSet,
    shield: Option<CpuSet>,
    online: CpuSet,
    cmdline: BTreeMap<String, Option<String>>,
    held: BTreeMap<String, (String, String)>,
    out: Vec<Finding>,
}

impl Ctx<'_> {
    fn add(&mut self, id: &str, severity: Severity, impact: u8, reason: String, next: String) {
        self.out.push(Finding {
            id: id.into(),
            severity,
            reason,
            next,
            impact,
        });
    }

    fn list(&self) -> String {
        self.targets.to_string()
    }

    fn housekeeping(&self) -> CpuSet {
        self.online.difference(&self.targets)
    }

    fn read(&self, rel: &str) -> Option<String> {
        self.sys.read_trimmed(rel).ok()
    }
}

/// Audits `cpus`, or the active shield's CPUs. `window` zero skips the
/// interrupt counts.
pub fn audit(
    sys: &Sys,
    cpus: Option<&CpuSet>,
    window: Duration,
) -> Result<AuditReport, AuditError> {
    let state = journal::read_state(sys)?;
    let entries = if state.is_some() {
        journal::read_entries(sys)?
    } else {
        Vec::new()
    };
    let shield = state.as_ref().map(|s| s.shield.clone());
    let (targets, source) = match (cpus, &shield) {
        (Some(c), _) => (c.clone(), "--cpus"),
        (None, Some(s)) => (s.clone(), "shield"),
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
    let cmdline = parse::parse_cmdline(&sys.read("proc/cmdline").unwrap_or_default());
    let mut cx = Ctx {
        sys,
        targets,
        shield,
        online,
        cmdline,
        held: tune::held_by_journal(entries.iter().map(|e| &e.action)),
        out: Vec::new(),
    };

    let before = (
        sys.read("proc/interrupts").ok(),
        sys.read("proc/softirqs").ok(),
    );
    if !window.is_zero() {
        std::thread::sleep(window);
    }
    let (mut interrupts, mut softirqs) = (Vec::new(), Vec::new());
    if !window.is_zero() {
        let after = (
            sys.read("proc/interrupts").ok(),
            sys.read("proc/softirqs").ok(),
        );
        if let (Some(a), Some(b)) = (&before.0, &after.0) {
            interrupts = parse::interrupt_deltas(a, b, &cx.targets);
        }
        if let (Some(a), Some(b)) = (&before.1, &after.1) {
            softirqs = parse::interrupt_deltas(a, b, &cx.targets);
        }
        interrupt_findings(&mut cx, &interrupts, &softirqs, window.as_secs_f64());
    }
    irq_affinity(&mut cx, &entries)?;
    tasks(&mut cx)?;
    preemption(&mut cx);
    boot_params(&mut cx);
    sysctls(&mut cx);
    workqueues(&mut cx);
    watchdogs(&mut cx);
    cpufreq_and_idle(&mut cx);
    siblings(&mut cx);
    irqbalance(&mut cx);
    numa(&mut cx);
    background_work(&mut cx);

    let mut findings = cx.out;
    findings.sort_by(|a, b| a.severity.cmp(&b.severity).then(b.impact.cmp(&a.impact)));
    Ok(AuditReport {
        cpus: cx.targets,
        source: source.into(),
        shield_active: cx.shield.is_some(),
        window_s: window.as_secs_f64(),
        findings,
        interrupts,
        softirqs,
    })
}

fn top(d: &[Delta], n: usize) -> String {
    d.iter()
        .take(n)
        .map(|d| format!("{} {}×{}", d.label, short(&d.name), d.count))
        .collect::<Vec<_>>()
        .join(", ")
}

fn short(s: &str) -> String {
    s.split_whitespace().next().unwrap_or("").to_string()
}

fn interrupt_findings(cx: &mut Ctx, irqs: &[Delta], soft: &[Delta], secs: f64) {
    let list = cx.list();
    let device: Vec<Delta> = irqs
        .iter()
        .filter(|d| d.label.parse::<u32>().is_ok())
        .cloned()
        .collect();
    if device.is_empty() {
        cx.add(
            "interrupts.device",
            Severity::Ok,
            90,
            format!("no device interrupt on CPUs {list} in {secs:.1} s"),
            String::new(),
        );
    } else {
        cx.add(
            "interrupts.device",
            Severity::Bad,
            90,
            format!("device interrupts on CPUs {list} in {secs:.1} s: {}", top(&device, 5)),
            format!("cpushield on {list} (moves IRQs away); kernel-managed queues need isolcpus=managed_irq,{list}"),
        );
    }
    let per_cpu: Vec<Delta> = irqs
        .iter()
        .filter(|d| d.label.parse::<u32>().is_err())
        .cloned()
        .collect();
    let ncpu = cx.targets.len().max(1) as f64;
    let loc = per_cpu
        .iter()
        .find(|d| d.label == "LOC")
        .map_or(0, |d| d.count) as f64
        / ncpu
        / secs;
    let ipis: Vec<Delta> = per_cpu
        .iter()
        .filter(|d| d.label != "LOC")
        .cloned()
        .collect();
    if loc > 10.0 {
        cx.add(
            "interrupts.tick",
            Severity::Warn,
            70,
            format!("local timer fires {loc:.0}/s per CPU on {list}: the tick runs"),
            format!(
                "boot with nohz_full={list} (cpushield boot-args {list}) and run one task per CPU"
            ),
        );
    } else {
        cx.add(
            "interrupts.tick",
            Severity::Ok,
            70,
            format!("local timer {loc:.0}/s per CPU on {list}"),
            String::new(),
        );
    }
    if ipis.is_empty() {
        cx.add(
            "interrupts.ipi",
            Severity::Ok,
            60,
            format!("no IPIs or per-CPU interrupts besides the timer on {list}"),
            String::new(),
        );
    } else {
        cx.add(
            "interrupts.ipi",
            Severity::Warn,
            60,
            format!("per-CPU interrupts on {list}: {}", top(&ipis, 5)),
            "RES/CAL/TLB come from other CPUs waking or flushing the targets: keep other tasks and mm-sharing threads off them (cpushield status)".into(),
        );
    }
    let soft_noise: Vec<Delta> = soft.iter().filter(|d| d.label != "HI").cloned().collect();
    if soft_noise.is_empty() {
        cx.add(
            "softirqs",
            Severity::Ok,
            50,
            format!("no softirqs on {list}"),
            String::new(),
        );
    } else {
        cx.add(
            "softirqs",
            Severity::Warn,
            50,
            format!("softirqs on {list}: {}", top(&soft_noise, 5)),
            format!("TIMER/SCHED/RCU: boot with nohz_full={list} rcu_nocbs={list}; NET_RX/BLOCK: cpushield on {list} --tune=net-queues"),
        );
    }
}

fn irq_affinity(cx: &mut Ctx, entries: &[journal::Entry]) -> Result<(), AuditError> {
    // IRQs bound to the shield on request (`on --irq`) are wanted there.
    let wanted: Vec<u32> = entries
        .iter()
        .filter_map(|e| match &e.action {
            crate::shield::change::Action::Write { path, value, .. }
                if CpuSet::parse_list(value).is_ok_and(|v| v.is_subset(&cx.targets)) =>
            {
                snapshot::irq_of_affinity_file(path)
            }
            _ => None,
        })
        .collect();
    let irqs = snapshot::read_irqs(cx.sys)?;
    let list = cx.list();
    let hk = cx.housekeeping();
    let mut effective = Vec::new();
    let mut allowed = Vec::new();
    for i in &irqs {
        if wanted.contains(&i.irq) {
            continue;
        }
        let label = if i.name.is_empty() {
            i.irq.to_string()
        } else {
            format!("{} ({})", i.irq, i.name)
        };
        if i.effective
            .as_ref()
            .is_some_and(|e| e.intersects(&cx.targets))
        {
            effective.push(label);
        } else if i.affinity.intersects(&cx.targets) {
            allowed.push(label);
        }
    }
    if !effective.is_empty() {
        cx.add(
            "irq-effective",
            Severity::Bad,
            85,
            format!("{} IRQs are served on {list} now: {}", effective.len(), effective.join(", ")),
            format!("cpushield on {list}; IRQs that refuse (kernel-managed queues) need isolcpus=managed_irq,{list} at boot"),
        );
    } else {
        cx.add(
            "irq-effective",
            Severity::Ok,
            85,
            format!("no IRQ is served on {list}"),
            String::new(),
        );
    }
    if !allowed.is_empty() {
        cx.add(
            "irq-affinity",
            Severity::Warn,
            65,
            format!(
                "{} IRQs may be served on {list}: {}",
                allowed.len(),
                allowed.join(", ")
            ),
            format!("cpushield on {list} (or: echo {hk} > /proc/irq/N/smp_affinity_list)"),
        );
    } else {
        cx.add(
            "irq-affinity",
            Severity::Ok,
            65,
            format!("no IRQ affinity includes {list}"),
            String::new(),
        );
    }
    let default = cx.sys.read_cpumask(snapshot::DEFAULT_IRQ_AFFINITY).ok();
    if let Some(d) = default.filter(|d| d.intersects(&cx.targets)) {
        cx.add(
            "irq-default",
            Severity::Warn,
            40,
            format!("new IRQs may land on {list} (default_smp_affinity {d})"),
            format!("cpushield on {list}, or boot with irqaffinity={hk}"),
        );
    } else {
        cx.add(
            "irq-default",
            Severity::Ok,
            40,
            format!("new IRQs start off {list} (default_smp_affinity)"),
            String::new(),
        );
    }
    Ok(())
}

/// Unbound workqueues and the writeback flushers: their cpumasks decide
/// where kernel background work runs.
fn workqueues(cx: &mut Ctx) {
    let list = cx.list();
    let mut on = Vec::new();
    let mut seen = 0;
    for (rel, what) in [
        (snapshot::WORKQUEUE_MASK, "unbound workqueues"),
        (WRITEBACK_MASK, "writeback flushers"),
    ] {
        if let Ok(m) = cx.sys.read_cpumask(rel) {
            seen += 1;
            if m.intersects(&cx.targets) {
                on.push(format!("{what} (/{rel}: {m})"));
            }
        }
    }
    if seen == 0 {
        return;
    }
    if on.is_empty() {
        cx.add(
            "workqueue",
            Severity::Ok,
            45,
            format!("unbound workqueues and writeback flushers run off {list}"),
            String::new(),
        );
    } else {
        cx.add(
            "workqueue",
            Severity::Warn,
            45,
            format!(
                "kernel background work may run on {list}: {}",
                on.join(", ")
            ),
            format!("cpushield on {list} --tune=workqueue,writeback"),
        );
    }
}

fn tasks(cx: &mut Ctx) -> Result<(), AuditError> {
    let setup = snapshot::detect_cgroup(cx.sys).ok();
    let source = setup
        .as_ref()
        .map_or(procfs::CgroupSource::per_thread(Hierarchy::Unified), |c| {
            c.thread_source()
        });
    let threads = procfs::read_all_threads(cx.sys, source)?;
    let inside = format!("/{SHIELD_CGROUP}");
    let list = cx.list();
    let mut intruders = Vec::new();
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for t in &threads {
        if !t.cpus_allowed.intersects(&cx.targets) {
            continue;
        }
        if t.is_pinned_by_kernel() || (t.is_kthread() && t.cpus_allowed.is_subset(&cx.targets)) {
            *kinds.entry(t.kind()).or_default() += 1;
            continue;
        }
        if cx.shield.is_some() && t.cgroup == inside {
            continue;
        }
        intruders.push(format!("{} {}", t.tid, t.name));
    }
    if intruders.is_empty() {
        cx.add(
            "tasks",
            Severity::Ok,
            95,
            format!("no task outside the shield may run on {list}"),
            String::new(),
        );
    } else {
        let n = intruders.len();
        intruders.truncate(8);
        cx.add(
            "tasks",
            Severity::Bad,
            95,
            format!("{n} threads outside the shield may run on {list}: {}{}", intruders.join(", "), if n > 8 { ", ..." } else { "" }),
            if cx.shield.is_some() {
                format!("cpushield on {list} --force (moves tasks pinned inside), or cpushield move PID --out")
            } else {
                format!("cpushield on {list}")
            },
        );
    }
    let detail = if kinds.is_empty() {
        "none".to_string()
    } else {
        kinds
            .iter()
            .map(|(k, n)| format!("{k} ×{n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let noisy: Vec<&String> = kinds.keys().filter(|k| k.starts_with("rcu")).collect();
    if noisy.is_empty() {
        cx.add("kthreads", Severity::Ok, 30, format!("per-CPU kernel threads on {list}: {detail} (the kernel keeps them; they sleep when idle)"), String::new());
    } else {
        cx.add(
            "kthreads",
            Severity::Warn,
            30,
            format!("per-CPU kernel threads on {list}: {detail}"),
            format!("boot with rcu_nocbs={list} (RCU callbacks move to rcuo threads on housekeeping CPUs)"),
        );
    }
    Ok(())
}

fn preemption(cx: &mut Ctx) {
    let version = cx.read("proc/sys/kernel/version").unwrap_or_default();
    let debug = cx.read("sys/kernel/debug/sched/preempt");
    let rt = cx.read("sys/kernel/realtime");
    let model = parse::preempt_model(&version, debug.as_deref(), rt.as_deref());
    let (sev, next) = match model.as_str() {
        "rt" => (Severity::Ok, String::new()),
        "full" => (Severity::Warn, "for hard real time, boot a PREEMPT_RT kernel (Debian: linux-image-rt-amd64)".to_string()),
        m if m.starts_with("dynamic") => (Severity::Warn, "boot with preempt=full (PREEMPT_DYNAMIC kernel), or a PREEMPT_RT kernel".to_string()),
        _ => (Severity::Bad, "boot with preempt=full if the kernel is PREEMPT_DYNAMIC, else a PREEMPT_RT or low-latency kernel".to_string()),
    };
    let reason = format!("preemption model: {model} (kernel {})", version.trim());
    cx.add("preemption", sev, 75, reason, next);
}

fn boot_params(cx: &mut Ctx) {
    let list = cx.list();
    let hk = cx.housekeeping();
    let covers = |cx: &Ctx, name: &str| -> Option<bool> {
        let v = cx.cmdline.get(name)?.clone().unwrap_or_default();
        Some(cx.targets.is_subset(&parse::param_cpus(&v, &cx.online)))
    };
    match cx.cmdline.get("isolcpus").cloned() {
        Some(v) => {
            let (flags, set) = parse::parse_isolcpus(&v.unwrap_or_default());
            let missing: Vec<&str> = ["domain", "managed_irq"]
                .into_iter()
                .filter(|f| !flags.iter().any(|g| g == f))
                .collect();
            if !cx.targets.is_subset(&set) {
                cx.add(
                    "boot.isolcpus",
                    Severity::Warn,
                    45,
                    format!("isolcpus={set} does not cover {list}"),
                    format!("boot with isolcpus=nohz,domain,managed_irq,{list}"),
                );
            } else if !missing.is_empty() {
                cx.add(
                    "boot.isolcpus",
                    Severity::Warn,
                    45,
                    format!("isolcpus covers {list} without {}", missing.join(",")),
                    format!("boot with isolcpus=nohz,domain,managed_irq,{list}"),
                );
            } else {
                cx.add(
                    "boot.isolcpus",
                    Severity::Ok,
                    45,
                    format!("isolcpus={} covers {list}", flags.join(",")),
                    String::new(),
                );
            }
        }
        None => cx.add(
            "boot.isolcpus",
            Severity::Warn,
            45,
            "no isolcpus= (kernel-managed queue IRQs stay on the targets)".into(),
            format!(
                "boot with isolcpus=nohz,domain,managed_irq,{list} (cpushield boot-args {list})"
            ),
        ),
    }
    for (name, impact, why, arg) in [
        (
            "nohz_full",
            55u8,
            "the scheduler tick keeps running on the targets",
            format!("nohz_full={list}"),
        ),
        (
            "rcu_nocbs",
            50,
            "RCU callbacks run on the targets",
            format!("rcu_nocbs={list}"),
        ),
    ] {
        match covers(cx, name) {
            Some(true) => cx.add(
                &format!("boot.{name}"),
                Severity::Ok,
                impact,
                format!("{name}= covers {list}"),
                String::new(),
            ),
            Some(false) => cx.add(
                &format!("boot.{name}"),
                Severity::Warn,
                impact,
                format!("{name}= does not cover {list}: {why}"),
                format!("boot with {arg}"),
            ),
            None => cx.add(
                &format!("boot.{name}"),
                Severity::Warn,
                impact,
                format!("no {name}=: {why}"),
                format!("boot with {arg}"),
            ),
        }
    }
    match cx.cmdline.get("irqaffinity").cloned().flatten() {
        Some(v) if !parse::param_cpus(&v, &cx.online).intersects(&cx.targets) => cx.add(
            "boot.irqaffinity",
            Severity::Ok,
            35,
            format!("irqaffinity={v} keeps boot-time IRQs off {list}"),
            String::new(),
        ),
        other => cx.add(
            "boot.irqaffinity",
            Severity::Warn,
            35,
            match other {
                Some(v) => format!("irqaffinity={v} includes {list}"),
                None => "no irqaffinity=: IRQs start on every CPU".into(),
            },
            format!("boot with irqaffinity={hk}"),
        ),
    }
    for (name, impact, arg, without) in [
        (
            "threadirqs",
            20u8,
            "threadirqs",
            "interrupt handlers run in hard-IRQ context, not in threads that can be prioritised",
        ),
        (
            "nosoftlockup",
            15,
            "nosoftlockup",
            "the soft-lockup watchdog runs on every CPU",
        ),
        (
            "skew_tick",
            10,
            "skew_tick=1",
            "the ticks of all CPUs fire at the same moment",
        ),
        (
            "tsc",
            10,
            "tsc=reliable",
            "the clocksource watchdog checks the TSC (add only when the TSC is known stable)",
        ),
    ] {
        if cx.cmdline.contains_key(name) {
            let v = cx.cmdline[name]
                .as_deref()
                .map(|v| format!("={v}"))
                .unwrap_or_default();
            cx.add(
                &format!("boot.{name}"),
                Severity::Ok,
                impact,
                format!("{name}{v} present"),
                String::new(),
            );
        } else {
            cx.add(
                &format!("boot.{name}"),
                Severity::Warn,
                impact,
                format!("no {name}: {without}"),
                format!("boot with {arg}"),
            );
        }
    }
}

fn sysctls(cx: &mut Ctx) {
    let list = cx.list();
    if let Some(v) = cx.read("proc/sys/kernel/sched_rt_runtime_us") {
        if v == "-1" {
            cx.add(
                "rt-throttling",
                Severity::Ok,
                55,
                "RT throttling off (sched_rt_runtime_us -1)".into(),
                String::new(),
            );
        } else {
            cx.add("rt-throttling", Severity::Warn, 55, format!("RT throttling on: real-time tasks stop for part of every second (sched_rt_runtime_us {v})"), format!("cpushield on {list} --tune=rt-throttling"));
        }
    }
    if let Some(v) = cx.read("proc/sys/kernel/timer_migration") {
        if v == "1" {
            cx.add(
                "timer-migration",
                Severity::Ok,
                25,
                "timer migration on".into(),
                String::new(),
            );
        } else {
            cx.add(
                "timer-migration",
                Severity::Warn,
                25,
                format!("timer migration {v}: timers armed on the targets expire there"),
                format!("cpushield on {list} --tune=timer-migration"),
            );
        }
    }
    if let Some(v) = cx.read("proc/sys/vm/stat_interval") {
        if v.parse::<u64>().is_ok_and(|n| n >= 10) {
            cx.add(
                "vmstat",
                Severity::Ok,
                40,
                format!("vmstat interval {v} s"),
                String::new(),
            );
        } else {
            cx.add(
                "vmstat",
                Severity::Warn,
                40,
                format!("vmstat worker wakes every {v} s on every CPU"),
                format!("cpushield on {list} --tune=vmstat"),
            );
        }
    }
}

fn watchdogs(cx: &mut Ctx) {
    let list = cx.list();
    for (id, path, impact, knob, arg) in [
        ("watchdog", WATCHDOG, 35u8, "watchdog", "nosoftlockup"),
        (
            "nmi-watchdog",
            NMI_WATCHDOG,
            45,
            "nmi-watchdog",
            "nmi_watchdog=0",
        ),
    ] {
        // Held off by the shield: take it from the journal, never read it.
        let (value, held) = match cx.held.get(path) {
            Some((written, _)) => (Some(written.clone()), true),
            None => (cx.read(path), false),
        };
        match value.as_deref() {
            None => cx.add(
                id,
                Severity::Ok,
                impact,
                format!("no {path} (not built in)"),
                String::new(),
            ),
            Some("0") => cx.add(
                id,
                Severity::Ok,
                impact,
                format!(
                    "{id} off{}",
                    if held {
                        " (by the shield, from its journal)"
                    } else {
                        ""
                    }
                ),
                String::new(),
            ),
            Some(v) => cx.add(
                id,
                Severity::Warn,
                impact,
                format!("{id} on ({v}): a periodic timer/NMI on every CPU"),
                format!("cpushield on {list} --tune={knob} (or boot with {arg})"),
            ),
        }
    }
}

/// Periodic work that `--tune` quiets: the dirty-page flusher's interval,
/// machine-check polling on the targets, and network queues steered to them.
fn background_work(cx: &mut Ctx) {
    let list = cx.list();
    if let Some(v) = cx.read("proc/sys/vm/dirty_writeback_centisecs") {
        match v.parse::<u64>() {
            Ok(n) if n == 0 || n >= 1500 => cx.add(
                "dirty-writeback",
                Severity::Ok,
                15,
                format!("dirty-page flusher interval {v} cs"),
                String::new(),
            ),
            _ => cx.add(
                "dirty-writeback",
                Severity::Warn,
                15,
                format!("the dirty-page flusher wakes every {v} cs"),
                format!("cpushield on {list} --tune=dirty-writeback"),
            ),
        }
    }
    let files_of = |name: &str| {
        tune::knob(name).map_or_else(Vec::new, |k| {
            crate::shield::snapshot::knob_files(cx.sys, k, &cx.targets)
        })
    };
    let (mce_files, queue_files) = (files_of("machinecheck"), files_of("net-queues"));
    let polling: Vec<String> = mce_files
        .iter()
        .filter_map(|f| {
            let v = cx.read(f)?;
            let cpu = f.split("machinecheck").nth(2)?.split('/').next()?;
            (v != "0").then(|| format!("CPU {cpu} every {v} s"))
        })
        .collect();
    if !polling.is_empty() {
        cx.add(
            "machinecheck",
            Severity::Warn,
            20,
            format!(
                "machine-check polling on the targets: {}",
                polling.join(", ")
            ),
            format!("cpushield on {list} --tune=machinecheck"),
        );
    } else if mce_files.iter().any(|f| cx.sys.exists(f)) {
        cx.add(
            "machinecheck",
            Severity::Ok,
            20,
            "no machine-check polling on the targets".into(),
            String::new(),
        );
    }
    let mut steered = Vec::new();
    let mut queues = 0;
    for f in queue_files {
        let Some(mask) = cx.read(&f).and_then(|v| CpuSet::parse_mask(&v).ok()) else {
            continue;
        };
        queues += 1;
        if mask.intersects(&cx.targets) {
            let mut parts = f.trim_start_matches("sys/class/net/").split('/');
            let (iface, queue) = (parts.next().unwrap_or(""), parts.nth(1).unwrap_or(""));
            steered.push(format!("{iface} {queue} ({mask})"));
        }
    }
    if !steered.is_empty() {
        cx.add(
            "net-queues",
            Severity::Warn,
            30,
            format!(
                "network queues steered to the targets (rps/xps): {}",
                steered.join(", ")
            ),
            format!("cpushield on {list} --tune=net-queues"),
        );
    } else if queues > 0 {
        cx.add(
            "net-queues",
            Severity::Ok,
            30,
            format!("no network queue steered to the targets ({queues} checked)"),
            String::new(),
        );
    }
}

fn cpufreq_and_idle(cx: &mut Ctx) {
    let list = cx.list();
    let mut governors: BTreeMap<String, CpuSet> = BTreeMap::new();
    let mut deep: Vec<String> = Vec::new();
    for cpu in cx.targets.iter() {
        let base = format!("sys/devices/system/cpu/cpu{cpu}");
        if let Some(g) = cx.read(&format!("{base}/cpufreq/scaling_governor")) {
            governors.entry(g).or_default().insert(cpu);
        }
        let mut states = Vec::new();
        for st in cx.sys.list(&format!("{base}/cpuidle")).unwrap_or_default() {
            if !st.starts_with("state") {
                continue;
            }
            let f = |n: &str| cx.read(&format!("{base}/cpuidle/{st}/{n}"));
            states.push(IdleState {
                name: f("name").unwrap_or_default(),
                latency_us: f("latency").and_then(|l| l.parse().ok()).unwrap_or(0),
                disabled: f("disable").as_deref() == Some("1"),
                state: st,
            });
        }
        for s in parse::deep_idle_states(&states, 10) {
            deep.push(format!(
                "cpu{cpu}/{} {} ({} us)",
                s.state, s.name, s.latency_us
            ));
        }
    }
    if governors.is_empty() {
        cx.add(
            "governor",
            Severity::Ok,
            30,
            format!("no cpufreq on {list} (fixed frequency, or a VM)"),
            String::new(),
        );
    } else {
        let slow: Vec<String> = governors
            .iter()
            .filter(|(g, _)| *g != "performance")
            .map(|(g, c)| format!("{g} on {c}"))
            .collect();
        if slow.is_empty() {
            cx.add(
                "governor",
                Severity::Ok,
                30,
                format!("governor performance on {list}"),
                String::new(),
            );
        } else {
            cx.add(
                "governor",
                Severity::Warn,
                30,
                format!("frequency scaling: {}", slow.join(", ")),
                format!("cpushield on {list} --tune=governor"),
            );
        }
    }
    if deep.is_empty() {
        cx.add(
            "idle-states",
            Severity::Ok,
            45,
            format!("no enabled idle state deeper than 10 us on {list}"),
            String::new(),
        );
    } else {
        let n = deep.len();
        deep.truncate(6);
        cx.add(
            "idle-states",
            Severity::Warn,
            45,
            format!("{n} deep idle states enabled: {}{}", deep.join(", "), if n > 6 { ", ..." } else { "" }),
            "echo 1 > /sys/devices/system/cpu/cpuN/cpuidle/stateK/disable for them, or hold /dev/cpu_dma_latency at 0 while the RT task runs".into(),
        );
    }
}

fn siblings(cx: &mut Ctx) {
    let list = cx.list();
    let mut outside = CpuSet::new();
    for cpu in cx.targets.iter() {
        outside = outside.union(&procfs::thread_siblings(cx.sys, cpu).difference(&cx.targets));
    }
    if outside.is_empty() {
        cx.add(
            "siblings",
            Severity::Ok,
            80,
            format!("no hyper-thread sibling of {list} is outside"),
            String::new(),
        );
    } else {
        let all = cx.targets.union(&outside);
        cx.add(
            "siblings",
            Severity::Bad,
            80,
            format!("hyper-thread siblings {outside} share cores with {list} and run other work"),
            format!("cpushield on {all} (and cpushield boot-args {all}), or keep {outside} idle"),
        );
    }
}

fn irqbalance(cx: &mut Ctx) {
    let list = cx.list();
    let pid = procfs::list_pids(cx.sys)
        .unwrap_or_default()
        .into_iter()
        .find(|p| cx.read(&format!("proc/{p}/comm")).as_deref() == Some("irqbalance"));
    let Some(pid) = pid else {
        cx.add(
            "irqbalance",
            Severity::Ok,
            70,
            "irqbalance is not running".into(),
            String::new(),
        );
        return;
    };
    let environ = cx.sys.read(&format!("proc/{pid}/environ"));
    let cmdline = cx
        .sys
        .read(&format!("proc/{pid}/cmdline"))
        .unwrap_or_default();
    let config = ["etc/default/irqbalance", "etc/sysconfig/irqbalance"]
        .iter()
        .filter_map(|p| cx.sys.read(p).ok())
        .collect::<Vec<_>>()
        .join("\n");
    let next = format!("set IRQBALANCE_BANNED_CPULIST={list} in /etc/default/irqbalance and restart it, or: systemctl stop irqbalance");
    let banned = parse::irqbalance_banned(environ.as_deref().unwrap_or(""), &cmdline, &config);
    match banned {
        Some(b) if cx.targets.is_subset(&b) => cx.add("irqbalance", Severity::Ok, 70, format!("irqbalance (pid {pid}) runs with {b} banned"), String::new()),
        _ if environ.is_err() && banned.is_none() => cx.add("irqbalance", Severity::Warn, 70, format!("irqbalance runs (pid {pid}); its environment is unreadable (not root), bans unknown"), next),
        b => cx.add("irqbalance", Severity::Bad, 70, format!("irqbalance runs (pid {pid}) without {list} banned{}: it will move IRQs back", b.map(|b| format!(" (banned: {b})")).unwrap_or_default()), next),
    }
}

fn numa(cx: &mut Ctx) {
    let list = cx.list();
    let mut nodes: BTreeMap<String, CpuSet> = BTreeMap::new();
    for n in cx.sys.list("sys/devices/system/node").unwrap_or_default() {
        if !n.starts_with("node") || n[4..].parse::<u32>().is_err() {
            continue;
        }
        if let Ok(c) = cx
            .sys
            .read_cpulist(&format!("sys/devices/system/node/{n}/cpulist"))
        {
            if c.intersects(&cx.targets) {
                nodes.insert(n, c.intersection(&cx.targets));
            }
        }
    }
    let detail = nodes
        .iter()
        .map(|(n, c)| format!("{n}: {c}"))
        .collect::<Vec<_>>()
        .join("; ");
    match nodes.len() {
        0 => cx.add(
            "numa",
            Severity::Ok,
            10,
            "NUMA topology unknown (no /sys/devices/system/node)".into(),
            String::new(),
        ),
        1 => cx.add(
            "numa",
            Severity::Ok,
            10,
            format!("CPUs {list} on one NUMA node ({detail})"),
            String::new(),
        ),
        _ => cx.add(
            "numa",
            Severity::Warn,
            20,
            format!("CPUs {list} span NUMA nodes ({detail}): remote memory latency"),
            "shield CPUs of one node and allocate the task's memory there (numactl --membind)"
                .into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn severity_orders_worst_first() {
        let mut v = [Severity::Ok, Severity::Bad, Severity::Warn];
        v.sort();
        assert_eq!(v, [Severity::Bad, Severity::Warn, Severity::Ok]);
    }
}
