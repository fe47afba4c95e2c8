//! The audit's rules of what `--tune` quiets: RT throttling, timer
//! migration, the vmstat interval, the watchdogs, the dirty-page flusher,
//! machine-check polling and network queue steering. Read by
//! [`read_audit`], judged by [`judge`] without I/O.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{
    held_by_journal, knob, knob_files, DIRTY_WRITEBACK, HUNG_TASK_TIMEOUT, NMI_WATCHDOG,
    RT_RUNTIME, STAT_INTERVAL, TIMER_MIGRATION, WATCHDOG,
};
use crate::cpulist::CpuSet;
use crate::finding::{Finding, Findings, Severity};
use crate::shield::component::AuditReading;
use crate::sys::ErrorKind;

/// What the knobs' audit rules judge, as read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditFacts {
    /// The knobs' sysctls that could be read, by path.
    pub sysctls: BTreeMap<String, String>,
    /// The watchdogs: path, value (from the journal when the shield holds
    /// it off), and whether it came from there.
    pub watchdogs: Vec<(String, Option<String>, bool)>,
    /// The machine-check polling file of each target CPU and its value
    /// (`None`: there but unreadable).
    pub machinecheck: Vec<(String, Option<String>)>,
    /// Network queue steering files and their masks.
    pub net_queues: Vec<(String, CpuSet)>,
}

/// Reads the knobs' audit facts about `cx.targets`. The watchdog files are
/// never read while an active shield holds them off (reading them then was
/// seen to break re-enabling the watchdog): their values come from the
/// shield's journal.
pub(super) fn read_audit(cx: &AuditReading) -> AuditFacts {
    let sys = cx.sys;
    let read = |rel: &str| sys.read_trimmed(rel).ok();
    let held = held_by_journal(cx.entries.iter().map(|e| &e.action));
    let files = |name: &str| knob(name).map_or_else(Vec::new, |k| knob_files(sys, k, cx.targets));
    AuditFacts {
        sysctls: [
            RT_RUNTIME,
            TIMER_MIGRATION,
            STAT_INTERVAL,
            DIRTY_WRITEBACK,
            HUNG_TASK_TIMEOUT,
            HUNG_TASK_PANIC,
        ]
            .into_iter()
            .filter_map(|f| Some((f.to_string(), read(f)?)))
            .collect(),
        watchdogs: [WATCHDOG, NMI_WATCHDOG]
            .into_iter()
            .map(|path| match held.get(path) {
                Some((written, _)) => (path.to_string(), Some(written.clone()), true),
                None => (path.to_string(), read(path), false),
            })
            .collect(),
        // One that exists but cannot be read counts, unread.
        machinecheck: files("machinecheck")
            .into_iter()
            .filter_map(|f| match sys.read_trimmed(&f) {
                Ok(v) => Some((f, Some(v))),
                Err(e) if e.kind == ErrorKind::NotFound => None,
                Err(_) => Some((f, None)),
            })
            .collect(),
        net_queues: files("net-queues")
            .into_iter()
            .filter_map(|f| Some((f.clone(), CpuSet::parse_mask(&read(&f)?).ok()?)))
            .collect(),
    }
}

/// The knobs' findings about `targets`. Pure.
pub(super) fn judge(f: &AuditFacts, targets: &CpuSet) -> Vec<Finding> {
    let mut out = Findings::default();
    sysctls(f, targets, &mut out);
    watchdogs(f, targets, &mut out);
    background_work(f, targets, &mut out);
    hung_task(f, &mut out);
    out.0
}

/// RT throttling, timer migration and the vmstat interval.
fn sysctls(f: &AuditFacts, targets: &CpuSet, out: &mut Findings) {
    let list = targets;
    if let Some(v) = f.sysctls.get(RT_RUNTIME) {
        if v == "-1" {
            out.add(
                "rt-throttling",
                Severity::Ok,
                55,
                "RT throttling off (sched_rt_runtime_us -1)".into(),
                String::new(),
            );
        } else {
            out.add("rt-throttling", Severity::Warn, 55, format!("RT throttling on: real-time tasks stop for part of every second (sched_rt_runtime_us {v})"), format!("cpushield on {list} --tune=rt-throttling"));
        }
    }
    if let Some(v) = f.sysctls.get(TIMER_MIGRATION) {
        if v == "1" {
            out.add(
                "timer-migration",
                Severity::Ok,
                25,
                "timer migration on".into(),
                String::new(),
            );
        } else {
            out.add(
                "timer-migration",
                Severity::Warn,
                25,
                format!("timer migration {v}: timers armed on the targets expire there"),
                format!("cpushield on {list} --tune=timer-migration"),
            );
        }
    }
    if let Some(v) = f.sysctls.get(STAT_INTERVAL) {
        if v.parse::<u64>().is_ok_and(|n| n >= 10) {
            out.add(
                "vmstat",
                Severity::Ok,
                40,
                format!("vmstat interval {v} s"),
                String::new(),
            );
        } else {
            out.add(
                "vmstat",
                Severity::Warn,
                40,
                format!("vmstat worker wakes every {v} s on every CPU"),
                format!("cpushield on {list} --tune=vmstat"),
            );
        }
    }
}

/// The soft-lockup and NMI watchdogs: a periodic timer or NMI on every
/// CPU while on.
fn watchdogs(f: &AuditFacts, targets: &CpuSet, out: &mut Findings) {
    let list = targets;
    for (path, value, held) in &f.watchdogs {
        let (id, impact, knob, arg) = if *path == NMI_WATCHDOG {
            ("nmi-watchdog", 45u8, "nmi-watchdog", "nmi_watchdog=0")
        } else {
            ("watchdog", 35, "watchdog", "nosoftlockup")
        };
        match value.as_deref() {
            None => out.add(
                id,
                Severity::Ok,
                impact,
                format!("no {path} (not built in)"),
                String::new(),
            ),
            Some("0") => out.add(
                id,
                Severity::Ok,
                impact,
                format!(
                    "{id} off{}",
                    if *held {
                        " (by the shield, from its journal)"
                    } else {
                        ""
                    }
                ),
                String::new(),
            ),
            Some(v) => out.add(
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
fn background_work(f: &AuditFacts, targets: &CpuSet, out: &mut Findings) {
    let list = targets;
    if let Some(v) = f.sysctls.get(DIRTY_WRITEBACK) {
        match v.parse::<u64>() {
            Ok(n) if n == 0 || n >= 1500 => out.add(
                "dirty-writeback",
                Severity::Ok,
                15,
                format!("dirty-page flusher interval {v} cs"),
                String::new(),
            ),
            _ => out.add(
                "dirty-writeback",
                Severity::Warn,
                15,
                format!("the dirty-page flusher wakes every {v} cs"),
                format!("cpushield on {list} --tune=dirty-writeback"),
            ),
        }
    }
    let polling: Vec<String> = f
        .machinecheck
        .iter()
        .filter_map(|(file, v)| {
            let v = v.as_ref()?;
            let cpu = file.split("machinecheck").nth(2)?.split('/').next()?;
            (v != "0").then(|| format!("CPU {cpu} every {v} s"))
        })
        .collect();
    if !polling.is_empty() {
        out.add(
            "machinecheck",
            Severity::Warn,
            20,
            format!(
                "machine-check polling on the targets: {}",
                polling.join(", ")
            ),
            format!("cpushield on {list} --tune=machinecheck"),
        );
    } else if !f.machinecheck.is_empty() {
        out.add(
            "machinecheck",
            Severity::Ok,
            20,
            "no machine-check polling on the targets".into(),
            String::new(),
        );
    }
    let mut steered = Vec::new();
    let queues = f.net_queues.len();
    for (file, mask) in &f.net_queues {
        if mask.intersects(targets) {
            if file == super::RPS_DEFAULT_MASK {
                steered.push(format!("devices made later (/{file}: {mask})"));
                continue;
            }
            let mut parts = file.trim_start_matches("sys/class/net/").split('/');
            let (iface, queue) = (parts.next().unwrap_or(""), parts.nth(1).unwrap_or(""));
            steered.push(format!("{iface} {queue} ({mask})"));
        }
    }
    if !steered.is_empty() {
        out.add(
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
        out.add(
            "net-queues",
            Severity::Ok,
            30,
            format!("no network queue steered to the targets ({queues} checked)"),
            String::new(),
        );
    }
}

/// Whether a hung task panics the machine (read beside the timeout the
/// knob `hung-task` raises).
const HUNG_TASK_PANIC: &str = "proc/sys/kernel/hung_task_panic";

/// tuned's realtime profile raises the hung-task timeout to 600 s:
/// a kernel thread or task bound to a shielded CPU that a busy real-time
/// loop starves sleeps in D state until it runs again, and the detector
/// reports it after the timeout (or, with `hung_task_panic`, panics the
/// machine). The starvation guard prevents the starving; this is the net.
fn hung_task(f: &AuditFacts, out: &mut Findings) {
    let Some(timeout) = f.sysctls.get(HUNG_TASK_TIMEOUT) else {
        return;
    };
    let panics = f.sysctls.get(HUNG_TASK_PANIC).is_some_and(|v| v != "0");
    let secs = timeout.parse::<u64>().ok();
    let (severity, reason) = match (secs, panics) {
        (Some(0), _) => (Severity::Ok, "hung-task detector off (hung_task_timeout_secs 0)".to_string()),
        (_, true) => (Severity::Warn, format!("a task starved for {timeout} s panics the machine (hung_task_panic on): a real-time loop that holds a shielded CPU that long takes the machine down")),
        (Some(s), false) if s < 600 => (Severity::Warn, format!("hung-task reports after {timeout} s: a kernel thread bound to a shielded CPU that a real-time loop starves that long is reported hung")),
        _ => (Severity::Ok, format!("hung-task reports after {timeout} s, no panic")),
    };
    let next = match severity {
        Severity::Ok => String::new(),
        _ if panics => "sysctl kernel.hung_task_panic=0, cpushield on --tune=hung-task (600 s, tuned's realtime value; undone by off), and keep the starvation guard on (--guard auto)".to_string(),
        _ => "cpushield on --tune=hung-task (600 s, tuned's realtime value; undone by off), and keep the starvation guard on (--guard auto)".to_string(),
    };
    out.add("hung-task", severity, 30, reason, next);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shield::change::{Action, Check, Undo};
    use crate::shield::journal::Entry;
    use crate::sys::Sys;

    fn cpus(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    fn find<'a>(v: &'a [Finding], id: &str) -> &'a Finding {
        v.iter()
            .find(|f| f.id == id)
            .unwrap_or_else(|| panic!("no finding {id}: {v:?}"))
    }

    #[test]
    fn a_watchdog_the_shield_holds_off_is_taken_from_its_journal_and_never_read() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let put = |rel: &str, text: &str| {
            let path = root.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        // What the files read is not what the journal says was written: the
        // soft watchdog's value must come from the journal.
        put(WATCHDOG, "1\n");
        put(NMI_WATCHDOG, "1\n");
        put(RT_RUNTIME, "950000\n");
        put(
            "sys/devices/system/machinecheck/machinecheck2/check_interval",
            "300\n",
        );
        put(
            "sys/devices/system/machinecheck/machinecheck3/check_interval",
            "0\n",
        );
        let entries = [Entry {
            action: Action::Write {
                path: WATCHDOG.into(),
                value: "0".into(),
                check: Check::Text,
                undo: Undo::Value("1".into()),
            },
            owner: Some("knobs".into()),
            previous: None,
            at: None,
        }];
        let sys = Sys::at(root);
        let targets = cpus("2-3");
        let cx = AuditReading {
            sys: &sys,
            targets: &targets,
            entries: &entries,
        };
        let facts = read_audit(&cx);
        assert_eq!(
            facts.watchdogs,
            [
                (WATCHDOG.to_string(), Some("0".to_string()), true),
                (NMI_WATCHDOG.to_string(), Some("1".to_string()), false),
            ]
        );
        assert_eq!(facts.sysctls.len(), 1, "{:?}", facts.sysctls);
        let v = judge(&facts, &targets);
        let soft = find(&v, "watchdog");
        assert_eq!(soft.severity, Severity::Ok);
        assert!(soft.reason.contains("from its journal"), "{}", soft.reason);
        let nmi = find(&v, "nmi-watchdog");
        assert_eq!(nmi.severity, Severity::Warn);
        assert!(nmi.next.contains("--tune=nmi-watchdog"));
        assert_eq!(find(&v, "rt-throttling").severity, Severity::Warn);
        let polling = find(&v, "machinecheck");
        assert_eq!(
            polling.reason,
            "machine-check polling on the targets: CPU 2 every 300 s"
        );
        // Nothing read, nothing judged: no finding from a file not there.
        assert!(v.iter().all(|f| f.id != "vmstat" && f.id != "net-queues"));
    }

    #[test]
    fn network_queues_steered_to_the_targets_are_named_by_interface_and_queue() {
        let facts = AuditFacts {
            net_queues: vec![
                ("sys/class/net/eth0/queues/rx-0/rps_cpus".into(), cpus("2")),
                ("sys/class/net/eth0/queues/rx-1/rps_cpus".into(), cpus("0")),
            ],
            ..AuditFacts::default()
        };
        let v = judge(&facts, &cpus("2-3"));
        let steered = find(&v, "net-queues");
        assert_eq!(steered.severity, Severity::Warn);
        assert!(
            steered.reason.ends_with("eth0 rx-0 (2)"),
            "{}",
            steered.reason
        );
        let quiet = AuditFacts {
            net_queues: vec![("sys/class/net/eth0/queues/rx-1/rps_cpus".into(), cpus("0"))],
            ..AuditFacts::default()
        };
        let v = judge(&quiet, &cpus("2-3"));
        assert_eq!(find(&v, "net-queues").severity, Severity::Ok);
    }

    #[test]
    fn the_hung_task_detector_is_judged_by_its_timeout_and_panic() {
        let judged = |timeout: &str, panic: &str| {
            let mut f = AuditFacts::default();
            f.sysctls.insert(HUNG_TASK_TIMEOUT.into(), timeout.into());
            f.sysctls.insert(HUNG_TASK_PANIC.into(), panic.into());
            let v = judge(&f, &cpus("3"));
            let h = find(&v, "hung-task");
            (h.severity, h.reason.clone(), h.next.clone())
        };
        let (sev, reason, next) = judged("120", "0");
        assert_eq!(sev, Severity::Warn, "{reason}");
        assert!(reason.contains("after 120 s"), "{reason}");
        assert!(next.contains("--tune=hung-task"), "{next}");
        let (sev, reason, _) = judged("600", "1");
        assert_eq!(sev, Severity::Warn);
        assert!(reason.contains("panics the machine"), "{reason}");
        assert_eq!(judged("600", "0").0, Severity::Ok);
        let (sev, reason, next) = judged("0", "1");
        assert_eq!((sev, next.as_str()), (Severity::Ok, ""), "{reason}");
        // a kernel without the detector has no finding
        assert!(judge(&AuditFacts::default(), &cpus("3")).iter().all(|f| f.id != "hung-task"));
    }
}
