//! What the audit concludes: pure rules from [`Facts`] to findings, one
//! function per concern, each with its severity, expected impact and the
//! concrete next step. No I/O: the tests judge literal facts.

use std::collections::BTreeMap;

use super::facts::{CpuPower, Facts};
use super::parse::{self, Delta};
use super::{boot_rules, Finding, Findings, Severity};
use crate::cpulist::CpuSet;
use crate::shield::snapshot::SHIELD_CGROUP;

/// Judges the facts: every rule, findings worst first (then by impact).
pub fn judge(f: &Facts) -> Vec<Finding> {
    let mut out = Findings::default();
    interrupt_findings(f, &mut out);
    let housekeeping = f.housekeeping();
    out.0
        .extend(crate::shield::components::audit(&crate::shield::Audited {
            targets: &f.targets,
            housekeeping: &housekeeping,
            irqs: &f.irqs,
            default_irq_affinity: f.default_irq_affinity.as_ref(),
            own: &f.own,
        }));
    tasks(f, &mut out);
    preemption(f, &mut out);
    kernel_work(f, &mut out);
    boot_rules::boot_params(f, &mut out);
    tuned(f, &mut out);
    stalld(f, &mut out);
    cpufreq_and_idle(f, &mut out);
    siblings(f, &mut out);
    numa(f, &mut out);
    super::bus::findings(f, &mut out);
    super::smi::findings(f, &mut out);
    super::kubelet_rules::findings(f, &mut out);
    let mut findings = out.0;
    findings.sort_by(|a, b| a.severity.cmp(&b.severity).then(b.impact.cmp(&a.impact)));
    findings
}

fn interrupt_findings(f: &Facts, out: &mut Findings) {
    if f.window_s == 0.0 {
        return;
    }
    let (irqs, secs) = (&f.interrupts, f.window_s);
    let list = f.list();
    let device: Vec<Delta> = irqs
        .iter()
        .filter(|d| d.label.parse::<u32>().is_ok())
        .cloned()
        .collect();
    if device.is_empty() {
        out.add(
            "interrupts.device",
            Severity::Ok,
            90,
            format!("no device interrupt on CPUs {list} in {secs:.1} s"),
            String::new(),
        );
    } else {
        out.add(
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
    let ncpu = f.targets.len().max(1) as f64;
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
        out.add(
            "interrupts.tick",
            Severity::Warn,
            70,
            format!("local timer fires {loc:.0}/s per CPU on {list}: the tick runs"),
            format!(
                "boot with nohz_full={list} (cpushield boot-args {list}) and run one task per CPU"
            ),
        );
    } else {
        out.add(
            "interrupts.tick",
            Severity::Ok,
            70,
            format!("local timer {loc:.0}/s per CPU on {list}"),
            String::new(),
        );
    }
    if ipis.is_empty() {
        out.add(
            "interrupts.ipi",
            Severity::Ok,
            60,
            format!("no IPIs or per-CPU interrupts besides the timer on {list}"),
            String::new(),
        );
    } else {
        out.add(
            "interrupts.ipi",
            Severity::Warn,
            60,
            format!("per-CPU interrupts on {list}: {}", top(&ipis, 5)),
            "RES/CAL/TLB come from other CPUs waking or flushing the targets: keep other tasks and mm-sharing threads off them (cpushield status)".into(),
        );
    }
    softirq_findings(f, out);
}

/// The idle-balance kicks on targets without a sched domain, and the
/// softirqs that ran on the targets.
fn softirq_findings(f: &Facts, out: &mut Findings) {
    let (soft, secs, list) = (&f.softirqs, f.window_s, f.list());
    if !f.kicks.is_empty() {
        out.0.push(crate::sys::kicks::finding(&f.kicks, secs));
    }
    let soft_noise: Vec<Delta> = soft.iter().filter(|d| d.label != "HI").cloned().collect();
    if soft_noise.is_empty() {
        out.add(
            "softirqs",
            Severity::Ok,
            50,
            format!("no softirqs on {list}"),
            String::new(),
        );
    } else {
        out.add(
            "softirqs",
            Severity::Warn,
            50,
            format!("softirqs on {list}: {}", top(&soft_noise, 5)),
            format!("TIMER/SCHED/RCU: boot with nohz_full={list} rcu_nocbs={list}; NET_RX/BLOCK: cpushield on {list} --tune=net-queues"),
        );
    }
}

/// IRQs served on or allowed on the targets, and the default affinity of new IRQs.
/// Threads outside the shield allowed on the targets, and the per-CPU
/// kernel threads the kernel keeps there.
fn tasks(f: &Facts, out: &mut Findings) {
    let inside = format!("/{SHIELD_CGROUP}");
    let list = f.list();
    let mut intruders = Vec::new();
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for t in &f.threads {
        if !t.cpus_allowed.intersects(&f.targets) {
            continue;
        }
        if t.is_pinned_by_kernel() || (t.is_kthread() && t.cpus_allowed.is_subset(&f.targets)) {
            *kinds.entry(t.kind()).or_default() += 1;
            continue;
        }
        if f.shield.is_some() && t.cgroup == inside {
            continue;
        }
        intruders.push(format!("{} {}", t.tid, crate::escape::terminal(&t.name)));
    }
    if intruders.is_empty() {
        out.add(
            "tasks",
            Severity::Ok,
            95,
            format!("no task outside the shield may run on {list}"),
            String::new(),
        );
    } else {
        let n = intruders.len();
        intruders.truncate(8);
        out.add(
            "tasks",
            Severity::Bad,
            95,
            format!("{n} threads outside the shield may run on {list}: {}{}", intruders.join(", "), if n > 8 { ", ..." } else { "" }),
            if f.shield.is_some() {
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
        out.add("kthreads", Severity::Ok, 30, format!("per-CPU kernel threads on {list}: {detail} (the kernel keeps them; they sleep when idle)"), String::new());
    } else {
        out.add(
            "kthreads",
            Severity::Warn,
            30,
            format!("per-CPU kernel threads on {list}: {detail}"),
            format!("boot with rcu_nocbs={list} (RCU callbacks move to rcuo threads on housekeeping CPUs)"),
        );
    }
}

fn preemption(f: &Facts, out: &mut Findings) {
    let version = &f.kernel_version;
    let model = parse::preempt_model(version, f.preempt_debugfs.as_deref(), f.realtime.as_deref());
    let (sev, next) = match model.as_str() {
        "rt" => (Severity::Ok, String::new()),
        "full" => (Severity::Warn, "for hard real time, boot a PREEMPT_RT kernel (Debian: linux-image-rt-amd64)".to_string()),
        m if m.starts_with("dynamic") => (Severity::Warn, "boot with preempt=full (PREEMPT_DYNAMIC kernel), or a PREEMPT_RT kernel".to_string()),
        _ => (Severity::Bad, "boot with preempt=full if the kernel is PREEMPT_DYNAMIC, else a PREEMPT_RT or low-latency kernel".to_string()),
    };
    let reason = format!("preemption model: {model} (kernel {})", version.trim());
    out.add("preemption", sev, 75, reason, next);
}

/// What keeps the CPUs' kernel work running behind a real-time task that
/// never sleeps, and the threads that wait there now.
fn kernel_work(f: &Facts, out: &mut Findings) {
    use crate::guard::kernel::{Protection, Starvable};
    let list = f.list();
    let why = |w: Starvable| match w {
        Starvable::PreemptRt => "a PREEMPT_RT kernel, whose timer and RCU threads are real-time",
        Starvable::NoThrottlingNoFairServer => "RT throttling off, no fair deadline server",
    };
    let (sev, reason, next) = match f.kernel_work {
        None => return,
        Some(Protection::Nothing { why: w }) => (
            Severity::Bad,
            format!("nothing keeps kernel work running behind a real-time task that never sleeps ({})", why(w)),
            format!("cpushield on {list} (its starvation guard comes with the shield), or turn RT throttling back on"),
        ),
        Some(Protection::Guard { why: w, .. }) => (Severity::Ok, format!("kernel work is kept running by the starvation guard ({})", why(w)), String::new()),
        Some(Protection::GuardAndKernel { .. }) => (Severity::Ok, "kernel work is kept running by the kernel and the starvation guard".to_string(), String::new()),
        Some(Protection::FairServer { .. }) => (Severity::Ok, "kernel work is kept running by the kernel's fair deadline server".to_string(), String::new()),
        Some(Protection::Throttling { runtime_us, period_us }) => (Severity::Ok, format!("kernel work is kept running by RT throttling ({runtime_us} of {period_us} µs for real-time tasks)"), String::new()),
    };
    out.add("kernel-work", sev, 85, reason, next);
    if !f.starving.is_empty() {
        let names = crate::guard::watch::describe(&f.starving);
        out.add(
            "starving",
            Severity::Bad,
            95,
            format!(
                "kernel threads wait behind a real-time task that does not sleep, runnable without running: {}",
                names
            ),
            format!("cpushield on {list} (its starvation guard boosts them), or let the real-time task sleep"),
        );
    }
}

/// tuned's active profile, read through its includes: one that pins CPUs
/// or IRQs moves them back whenever it re-applies; what it sets that
/// cpushield sets too is owned twice.
fn tuned(f: &Facts, out: &mut Findings) {
    let Some(t) = &f.tuned else {
        return;
    };
    let state = if t.running { "running" } else { "not running" };
    let chain = t.chain.join(", ");
    if !t.pins.is_empty() && t.running {
        out.add(
            "tuned",
            Severity::Warn,
            50,
            format!("tuned ({state}) profile '{}' pins CPUs or IRQs, read through {chain}: {}", t.profile, t.pins.join(", ")),
            "tuned-adm profile <one without isolated_cores or banned_cpus> while cpushield shields, or let tuned alone isolate".to_string(),
        );
    } else if !t.overlaps.is_empty() {
        out.add(
            "tuned",
            Severity::Warn,
            15,
            format!("tuned ({state}) profile '{}' sets what cpushield's knobs set, read through {chain}: {}", t.profile, t.overlaps.join("; ")),
            "drop those keys from the profile or those knobs from --tune: one owner per setting".to_string(),
        );
    } else {
        out.add(
            "tuned",
            Severity::Ok,
            15,
            format!(
                "tuned ({state}) profile '{}' sets nothing a shield sets, read through {chain}",
                t.profile
            ),
            String::new(),
        );
    }
}

/// A stalld that runs already: whether it watches the audited CPUs, and
/// whether it boosts before the kernel reports an RCU stall (about 21 s).
fn stalld(f: &Facts, out: &mut Findings) {
    let Some(s) = &f.stalld else {
        return;
    };
    let unit = s
        .unit
        .as_deref()
        .map(|u| format!(", {u}"))
        .unwrap_or_default();
    let who = format!(
        "stalld runs (pid {}{unit}, boosting after {} s)",
        s.pid, s.threshold_s
    );
    let guard = format!(
        "or let cpushield's guard watch the shield beside it (cpushield on {} --guard on)",
        f.list()
    );
    if !s.covers(&f.targets) {
        let why = if s.log_only {
            "it only logs"
        } else {
            "its -c leaves some out"
        };
        out.add(
            "stalld",
            Severity::Warn,
            45,
            format!("{who}, but not for every CPU of {}: {why}", f.list()),
            format!("give it -c with these CPUs and without -l, {guard}"),
        );
    } else if s.threshold_s > 20 {
        out.add("stalld", Severity::Warn, 45, format!("{who}: a loop on these CPUs starves RCU longer than the 21 s after which the kernel reports a stall"), format!("stalld -t 10 or less (its unit's drop-in), {guard}"));
    } else {
        out.add(
            "stalld",
            Severity::Ok,
            45,
            format!("{who}, for CPUs {}", f.list()),
            String::new(),
        );
    }
}

fn cpufreq_and_idle(f: &Facts, out: &mut Findings) {
    let list = f.list();
    let mut governors: BTreeMap<String, CpuSet> = BTreeMap::new();
    let mut deep: Vec<String> = Vec::new();
    for CpuPower {
        cpu,
        governor,
        idle_states,
    } in &f.cpu_power
    {
        if let Some(g) = governor {
            governors.entry(g.clone()).or_default().insert(*cpu);
        }
        for s in parse::deep_idle_states(idle_states, 10) {
            deep.push(format!(
                "cpu{cpu}/{} {} ({} us)",
                s.state, s.name, s.latency_us
            ));
        }
    }
    if governors.is_empty() {
        out.add(
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
            out.add(
                "governor",
                Severity::Ok,
                30,
                format!("governor performance on {list}"),
                String::new(),
            );
        } else {
            out.add(
                "governor",
                Severity::Warn,
                30,
                format!("frequency scaling: {}", slow.join(", ")),
                format!("cpushield on {list} --tune=governor"),
            );
        }
    }
    if deep.is_empty() {
        out.add(
            "idle-states",
            Severity::Ok,
            45,
            format!("no enabled idle state deeper than 10 us on {list}"),
            String::new(),
        );
    } else {
        let n = deep.len();
        deep.truncate(6);
        out.add(
            "idle-states",
            Severity::Warn,
            45,
            format!("{n} deep idle states enabled: {}{}", deep.join(", "), if n > 6 { ", ..." } else { "" }),
            "echo 1 > /sys/devices/system/cpu/cpuN/cpuidle/stateK/disable for them, or hold /dev/cpu_dma_latency at 0 while the RT task runs".into(),
        );
    }
}

fn siblings(f: &Facts, out: &mut Findings) {
    let list = f.list();
    let outside = f
        .siblings
        .iter()
        .fold(CpuSet::new(), |acc, s| acc.union(&s.difference(&f.targets)));
    if outside.is_empty() {
        out.add(
            "siblings",
            Severity::Ok,
            80,
            format!("no hyper-thread sibling of {list} is outside"),
            String::new(),
        );
    } else {
        let all = f.targets.union(&outside);
        out.add(
            "siblings",
            Severity::Bad,
            80,
            format!("hyper-thread siblings {outside} share cores with {list} and run other work"),
            format!("cpushield on {all} (and cpushield boot-args {all}), or keep {outside} idle"),
        );
    }
}

fn numa(f: &Facts, out: &mut Findings) {
    let list = f.list();
    let nodes: BTreeMap<&String, CpuSet> = f
        .numa_nodes
        .iter()
        .filter(|(_, c)| c.intersects(&f.targets))
        .map(|(n, c)| (n, c.intersection(&f.targets)))
        .collect();
    let detail = nodes
        .iter()
        .map(|(n, c)| format!("{n}: {c}"))
        .collect::<Vec<_>>()
        .join("; ");
    match nodes.len() {
        0 => out.add(
            "numa",
            Severity::Ok,
            10,
            "NUMA topology unknown (no /sys/devices/system/node)".into(),
            String::new(),
        ),
        1 => out.add(
            "numa",
            Severity::Ok,
            10,
            format!("CPUs {list} on one NUMA node ({detail})"),
            String::new(),
        ),
        _ => out.add(
            "numa",
            Severity::Warn,
            20,
            format!("CPUs {list} span NUMA nodes ({detail}): remote memory latency"),
            "shield CPUs of one node and allocate the task's memory there (numactl --membind)"
                .into(),
        ),
    }
}

fn top(d: &[Delta], n: usize) -> String {
    d.iter()
        .take(n)
        .map(|d| format!("{} {}×{}", d.label, short(&d.name), d.count))
        .collect::<Vec<_>>()
        .join(", ")
}

fn short(s: &str) -> String {
    crate::escape::terminal(s.split_whitespace().next().unwrap_or("")).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shield::snapshot::Irq;
    use crate::shield::OwnFacts;
    use crate::sys::procfs::Thread;

    fn cpus(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    /// CPUs 2-3 of 0-3 on a fully tuned and boot-isolated machine: every rule
    /// has its good case here.
    fn quiet() -> Facts {
        let cmdline = "isolcpus=nohz,domain,managed_irq,2-3 nohz_full=2-3 rcu_nocbs=2-3 \
                       irqaffinity=0-1 threadirqs nosoftlockup skew_tick=1 tsc=reliable";
        Facts {
            targets: cpus("2-3"),
            online: cpus("0-3"),
            cmdline: parse::parse_cmdline(cmdline),
            irqs: vec![Irq {
                irq: 24,
                name: "eth0".into(),
                affinity: cpus("0-1"),
                effective: Some(cpus("0")),
            }],
            default_irq_affinity: Some(cpus("0-1")),
            kernel_version: "#1 SMP PREEMPT_RT".into(),
            own: tuned_knobs(),
            siblings: vec![cpus("2"), cpus("3")],
            numa_nodes: [("node0".to_string(), cpus("0-3"))].into_iter().collect(),
            threads: vec![Thread {
                pid: 100,
                tid: 100,
                name: "worker".into(),
                flags: 0,
                cpus_allowed: cpus("0-1"),
                cgroup: "/system.slice".into(),
                stat_read: true,
            }],
            ..Facts::default()
        }
    }

    /// The knobs' facts of a tuned machine, as the knobs component keeps
    /// them (its rules are its own; here they join the others' order).
    fn tuned_knobs() -> OwnFacts {
        let mut own = OwnFacts::default();
        let knobs = serde_json::json!({
            "sysctls": {
                "proc/sys/kernel/sched_rt_runtime_us": "-1",
                "proc/sys/kernel/timer_migration": "1",
                "proc/sys/vm/stat_interval": "10",
                "proc/sys/vm/dirty_writeback_centisecs": "1500",
            },
            "watchdogs": [["proc/sys/kernel/watchdog", "0", false]],
            "machinecheck": [],
            "net_queues": [],
        });
        own.put("knobs", &knobs);
        own
    }

    fn find<'a>(v: &'a [Finding], id: &str) -> &'a Finding {
        v.iter()
            .find(|f| f.id == id)
            .unwrap_or_else(|| panic!("no finding {id}: {v:?}"))
    }

    #[test]
    fn a_tuned_machine_has_only_good_findings() {
        let v = judge(&quiet());
        let not_ok: Vec<&Finding> = v.iter().filter(|f| f.severity != Severity::Ok).collect();
        assert!(not_ok.is_empty(), "{not_ok:?}");
        for id in [
            "tasks",
            "irq-effective",
            "rt-throttling",
            "watchdog",
            "boot.nohz_full",
            "preemption",
            "numa",
        ] {
            find(&v, id);
        }
        // Not counted: no interrupt finding at all.
        assert!(v.iter().all(|f| !f.id.starts_with("interrupts")));
    }

    #[test]
    fn a_running_stalld_is_judged_by_what_it_watches_and_when_it_boosts() {
        use crate::guard::stalld::Foreign;
        let judged = |s: Foreign| {
            let mut f = quiet();
            f.stalld = Some(s);
            let v = judge(&f);
            let h = find(&v, "stalld");
            (h.severity, h.reason.clone(), h.next.clone())
        };
        let fine = Foreign {
            pid: 77,
            unit: Some("stalld.service".into()),
            cpus: None,
            threshold_s: 10,
            log_only: false,
        };
        assert_eq!(judged(fine.clone()).0, Severity::Ok);
        let (sev, reason, next) = judged(Foreign {
            threshold_s: 60,
            ..fine.clone()
        });
        assert_eq!(sev, Severity::Warn);
        assert!(
            reason.contains("boosting after 60 s") && reason.contains("21 s"),
            "{reason}"
        );
        assert!(next.contains("--guard on"), "{next}");
        let (sev, reason, _) = judged(Foreign {
            cpus: Some(cpus("0-2")),
            ..fine.clone()
        });
        assert_eq!(sev, Severity::Warn);
        assert!(reason.contains("its -c leaves some out"), "{reason}");
        assert!(judged(Foreign {
            log_only: true,
            ..fine
        })
        .1
        .contains("it only logs"));
    }

    #[test]
    fn a_tuned_profile_is_judged_through_its_include_chain() {
        use crate::shield::owners::Tuned;
        let judged = |t: Tuned| {
            let mut f = quiet();
            f.tuned = Some(t);
            let v = judge(&f);
            let h = find(&v, "tuned");
            (h.severity, h.reason.clone())
        };
        let chain = vec![
            "network-latency (included by realtime)".to_string(),
            "realtime".to_string(),
        ];
        let base = Tuned {
            profile: "realtime".into(),
            running: true,
            chain,
            ..Default::default()
        };
        let (sev, reason) = judged(Tuned {
            pins: vec!["realtime: [variables] isolated_cores=2-3".into()],
            ..base.clone()
        });
        assert_eq!(sev, Severity::Warn);
        assert!(
            reason.contains(
                "pins CPUs or IRQs, read through network-latency (included by realtime), realtime"
            ),
            "{reason}"
        );
        let (sev, reason) = judged(Tuned {
            overlaps: vec![
                "network-latency: [sysctl] kernel.numa_balancing=0 (--tune=numa-balancing)".into(),
            ],
            ..base.clone()
        });
        assert_eq!(sev, Severity::Warn);
        assert!(
            reason.contains("kernel.numa_balancing=0 (--tune=numa-balancing)"),
            "{reason}"
        );
        assert_eq!(judged(base).0, Severity::Ok);
        assert!(
            judge(&quiet()).iter().all(|f| f.id != "tuned"),
            "no tuned, no finding"
        );
    }

    #[test]
    fn a_boot_half_waiting_for_a_reboot_says_reboot_not_boot_with() {
        let mut f = quiet();
        f.cmdline = parse::parse_cmdline("ro quiet");
        let want = crate::boot::want(&cpus("2-3"), &[], (&cpus("0-3"), false), &[]).unwrap();
        let record = crate::boot::Record::debian_grub(want.clone(), true);
        let facts = crate::boot::BootFacts {
            cmdline: "ro quiet".into(),
            ..Default::default()
        };
        f.boot = Some(crate::boot::judge(Some(&record), None, &facts));
        let v = judge(&f);
        let half = find(&v, "boot.half");
        assert_eq!(half.severity, Severity::Warn);
        assert!(half.next.starts_with("reboot"), "{half:?}");
        let nohz = find(&v, "boot.nohz_full");
        assert_eq!(
            nohz.next,
            "reboot: the boot half has nohz_full=2-3, the running kernel not yet"
        );
        // Booted with it: active, and nohz_full= covers the targets.
        f.cmdline = parse::parse_cmdline(&want.options.join(" "));
        let facts = crate::boot::BootFacts {
            cmdline: want.options.join(" "),
            ..Default::default()
        };
        f.boot = Some(crate::boot::judge(Some(&record), None, &facts));
        let v = judge(&f);
        assert_eq!(find(&v, "boot.half").severity, Severity::Ok);
        assert_eq!(find(&v, "boot.nohz_full").severity, Severity::Ok);
        assert_eq!(find(&v, "boot.isolcpus").severity, Severity::Ok);
    }

    #[test]
    fn noise_is_bad_and_comes_first_by_impact() {
        let mut f = quiet();
        f.irqs[0].effective = Some(cpus("2"));
        f.threads.push(Thread {
            pid: 200,
            tid: 201,
            name: "java".into(),
            flags: 0,
            cpus_allowed: cpus("0-3"),
            cgroup: "/system.slice/app.service".into(),
            stat_read: true,
        });
        f.siblings = vec![cpus("1-2"), cpus("3")];
        let irqbalance = serde_json::json!({
            "pid": 42, "environ": "", "cmdline": "", "config": "",
        });
        f.own.put("irqbalance", &irqbalance);
        let v = judge(&f);
        let bad: Vec<&str> = v
            .iter()
            .take_while(|f| f.severity == Severity::Bad)
            .map(|f| f.id.as_str())
            .collect();
        assert_eq!(bad, ["tasks", "irq-effective", "siblings", "irqbalance"]);
        assert!(find(&v, "tasks").reason.contains("201 java"));
        assert!(find(&v, "irq-effective").reason.contains("24 (eth0)"));
        assert!(find(&v, "siblings").next.contains("cpushield on 1-3"));
    }

    #[test]
    fn an_irq_bound_on_request_and_a_kept_task_are_not_noise() {
        let mut f = quiet();
        f.shield = Some(cpus("2-3"));
        f.irqs[0].effective = Some(cpus("2"));
        f.own.publish(&crate::shield::facts::BoundIrqs(vec![24]));
        f.threads.push(Thread {
            pid: 300,
            tid: 300,
            name: "rt-loop".into(),
            flags: 0,
            cpus_allowed: cpus("2"),
            cgroup: format!("/{SHIELD_CGROUP}"),
            stat_read: true,
        });
        let v = judge(&f);
        assert_eq!(find(&v, "irq-effective").severity, Severity::Ok);
        assert_eq!(find(&v, "tasks").severity, Severity::Ok);
    }

    #[test]
    fn counted_interrupts_are_judged_per_second() {
        let mut f = quiet();
        f.window_s = 2.0;
        f.interrupts = vec![
            Delta {
                label: "LOC".into(),
                name: "Local timer interrupts".into(),
                count: 1000,
            },
            Delta {
                label: "24".into(),
                name: "eth0".into(),
                count: 3,
            },
        ];
        let v = judge(&f);
        assert_eq!(find(&v, "interrupts.device").severity, Severity::Bad);
        // 1000 ticks over 2 CPUs and 2 s: 250/s per CPU, the tick runs.
        let tick = find(&v, "interrupts.tick");
        assert_eq!(tick.severity, Severity::Warn);
        assert!(tick.reason.contains("250/s"), "{}", tick.reason);
        assert_eq!(find(&v, "softirqs").severity, Severity::Ok);
    }

    #[test]
    fn missing_boot_parameters_are_named_with_the_argument_to_add() {
        let mut f = quiet();
        f.cmdline = BTreeMap::new();
        let v = judge(&f);
        assert!(find(&v, "boot.nohz_full").next.contains("nohz_full=2-3"));
        assert!(find(&v, "boot.irqaffinity")
            .next
            .contains("irqaffinity=0-1"));
        assert!(find(&v, "boot.isolcpus").reason.contains("no isolcpus="));
    }
}
