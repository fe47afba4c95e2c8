//! Pure parsers and judgements for `audit` and `boot-args`: strings in,
//! values out, no I/O, tested from literal file contents.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::cpulist::CpuSet;
use crate::sys::procfs::parse_interrupts;

/// The kernel command line as `name → value` (`None` for bare flags); the
/// last occurrence wins, as in the kernel.
pub fn parse_cmdline(text: &str) -> BTreeMap<String, Option<String>> {
    text.split_whitespace()
        .map(|w| match w.split_once('=') {
            Some((k, v)) => (k.to_string(), Some(v.to_string())),
            None => (w.to_string(), None),
        })
        .collect()
}

/// `isolcpus=` split into its flags and CPU list (`nohz,domain,managed_irq,2-3`).
/// A value without flags means `domain`.
pub fn parse_isolcpus(value: &str) -> (Vec<String>, CpuSet) {
    let mut flags = Vec::new();
    let mut list = Vec::new();
    for part in value.split(',') {
        if part.chars().next().is_some_and(|c| c.is_ascii_digit()) {
            list.push(part);
        } else if !part.is_empty() {
            flags.push(part.to_string());
        }
    }
    if flags.is_empty() {
        flags.push("domain".into());
    }
    let cpus = CpuSet::parse_list(&list.join(",")).unwrap_or_default();
    (flags, cpus)
}

/// A CPU-list boot parameter's value (`nohz_full=2-3`); `all` counts as
/// every CPU in `online`.
pub fn param_cpus(value: &str, online: &CpuSet) -> CpuSet {
    if value == "all" {
        return online.clone();
    }
    CpuSet::parse_list(value).unwrap_or_default()
}

/// One interrupt line's count on the target CPUs over a window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Delta {
    /// Label: IRQ number, or `LOC`, `RES`, `TIMER`, `NET_RX`, ...
    pub label: String,
    /// Device or description.
    pub name: String,
    /// Count on the target CPUs during the window.
    pub count: u64,
}

/// Per-line deltas on `targets` between two readings of /proc/interrupts
/// (or /proc/softirqs), largest first, zero lines left out.
pub fn interrupt_deltas(before: &str, after: &str, targets: &CpuSet) -> Vec<Delta> {
    let (cpus_a, lines_a) = parse_interrupts(before);
    let (cpus_b, lines_b) = parse_interrupts(after);
    let sum = |cpus: &[u32], counts: &[u64]| -> u64 {
        cpus.iter()
            .zip(counts)
            .filter(|(c, _)| targets.contains(**c))
            .map(|(_, n)| *n)
            .sum()
    };
    let mut out: Vec<Delta> = lines_b
        .iter()
        .filter_map(|b| {
            let a = lines_a.iter().find(|a| a.label == b.label);
            let was = a.map_or(0, |a| sum(&cpus_a, &a.counts));
            let now = sum(&cpus_b, &b.counts);
            let count = now.saturating_sub(was);
            (count > 0).then(|| Delta {
                label: b.label.clone(),
                name: if b.label.parse::<u32>().is_ok() {
                    crate::sys::procfs::irq_device_name(&b.description)
                } else {
                    b.description.clone()
                },
                count,
            })
        })
        .collect();
    out.sort_by(|a, b| b.count.cmp(&a.count).then(a.label.cmp(&b.label)));
    out
}

/// The preemption model: from `/sys/kernel/realtime`, the current mode in
/// `/sys/kernel/debug/sched/preempt` (`none voluntary (full)`), else the
/// build flags in the kernel version string (`uname -v`).
pub fn preempt_model(version: &str, debug_preempt: Option<&str>, realtime: Option<&str>) -> String {
    if realtime.map(str::trim) == Some("1") || version.contains("PREEMPT_RT") {
        return "rt".into();
    }
    if let Some(cur) = debug_preempt.and_then(|t| {
        let s = t.find('(')?;
        let e = t[s..].find(')')?;
        Some(t[s + 1..s + e].to_string())
    }) {
        return cur;
    }
    let words: Vec<&str> = version.split_whitespace().collect();
    if words.contains(&"PREEMPT") {
        "full".into()
    } else if words.contains(&"PREEMPT_DYNAMIC") {
        // Dynamic kernels default to voluntary unless booted with preempt=.
        "dynamic (mode unknown without debugfs)".into()
    } else {
        "none or voluntary".into()
    }
}

/// A cpuidle state of a CPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IdleState {
    /// `stateN`.
    pub state: String,
    /// `name` (`POLL`, `C1`, `C6`, ...).
    pub name: String,
    /// Exit latency in µs.
    pub latency_us: u64,
    /// Whether it is disabled.
    pub disabled: bool,
}

/// Idle states deeper than `max_latency_us` that are still enabled.
pub fn deep_idle_states(states: &[IdleState], max_latency_us: u64) -> Vec<&IdleState> {
    states
        .iter()
        .filter(|s| !s.disabled && s.latency_us > max_latency_us)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpus(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    #[test]
    fn cmdline_and_isolcpus() {
        let c = parse_cmdline("BOOT_IMAGE=/vmlinuz ro isolcpus=nohz,domain,managed_irq,2-3 threadirqs nohz_full=2-3\n");
        assert_eq!(c["threadirqs"], None);
        assert_eq!(c["nohz_full"].as_deref(), Some("2-3"));
        let (flags, set) = parse_isolcpus(c["isolcpus"].as_deref().unwrap());
        assert_eq!(flags, ["nohz", "domain", "managed_irq"]);
        assert_eq!(set, cpus("2-3"));
        let (flags, set) = parse_isolcpus("1,3");
        assert_eq!(flags, ["domain"]);
        assert_eq!(set, cpus("1,3"));
        assert_eq!(param_cpus("all", &cpus("0-3")), cpus("0-3"));
    }

    #[test]
    fn deltas_on_targets_only() {
        let a = "           CPU0       CPU1       CPU2\n  24:  5  5  5  IO-APIC 24-edge  eth0\nLOC:  100  100  100  Local timer interrupts\nRES: 1 1 1 Rescheduling interrupts\n";
        let b = "           CPU0       CPU1       CPU2\n  24:  9  5  7  IO-APIC 24-edge  eth0\nLOC:  200  150  400  Local timer interrupts\nRES: 9 1 1 Rescheduling interrupts\n";
        let d = interrupt_deltas(a, b, &cpus("1-2"));
        assert_eq!(
            d,
            vec![
                Delta {
                    label: "LOC".into(),
                    name: "Local timer interrupts".into(),
                    count: 350
                },
                Delta {
                    label: "24".into(),
                    name: "eth0".into(),
                    count: 2
                },
            ]
        );
        let soft_a = "                    CPU0       CPU1\n          HI:          0          0\n       TIMER:        10         20\n";
        let soft_b = "                    CPU0       CPU1\n          HI:          0          0\n       TIMER:        10         25\n";
        let d = interrupt_deltas(soft_a, soft_b, &cpus("1"));
        assert_eq!(d.len(), 1);
        assert_eq!((d[0].label.as_str(), d[0].count), ("TIMER", 5));
    }

    #[test]
    fn preemption() {
        assert_eq!(preempt_model("#1 SMP PREEMPT_RT Debian", None, None), "rt");
        assert_eq!(preempt_model("#1 SMP", None, Some("1\n")), "rt");
        assert_eq!(
            preempt_model(
                "#1 SMP PREEMPT_DYNAMIC",
                Some("none voluntary (full) lazy\n"),
                None
            ),
            "full"
        );
        assert_eq!(preempt_model("#1 SMP PREEMPT Debian", None, None), "full");
        assert!(preempt_model("#1 SMP PREEMPT_DYNAMIC", None, None).starts_with("dynamic"));
        assert_eq!(
            preempt_model("#1 SMP Debian", None, None),
            "none or voluntary"
        );
    }

    #[test]
    fn idle_depth() {
        let s = |n: &str, l, d| IdleState {
            state: n.into(),
            name: n.into(),
            latency_us: l,
            disabled: d,
        };
        let states = [
            s("POLL", 0, false),
            s("C1", 2, false),
            s("C6", 133, false),
            s("C10", 500, true),
        ];
        let deep = deep_idle_states(&states, 10);
        assert_eq!(deep.len(), 1);
        assert_eq!(deep[0].name, "C6");
    }
}
