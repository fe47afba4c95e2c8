//! Idle-balance kicks, from the kernel's own counters: on a CPU without a
//! sched domain (an isolated partition, a v1 cpuset without load
//! balancing) the tick raises no SCHED softirq, so every SCHED softirq
//! there (`/proc/softirqs`) is a kick from a busy CPU's idle load
//! balancer, which also costs a function-call IPI (`CAL` in
//! `/proc/interrupts`). A CPU that was idle when its domain went stays in
//! the kernel's idle-balance mask and is kicked up to once a tick
//! (docs/shield.md, "Idle-balance kicks").

use std::collections::BTreeMap;
use std::time::Duration;

use super::procfs::parse_interrupts;
use super::Sys;
use crate::cpulist::CpuSet;
use crate::finding::{Finding, Severity};

/// Kicks a second above which a CPU is judged kicked: the bar is
/// at most 1 SCHED softirq a second on an idle shielded CPU.
pub const KICKED_PER_S: f64 = 1.0;

/// SCHED softirqs and function-call IPIs each CPU served so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counts {
    /// CPU → (SCHED softirqs, function-call IPIs).
    pub per_cpu: BTreeMap<u32, (u64, u64)>,
}

/// What reached one CPU over a window, a second.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Rate {
    /// The CPU.
    pub cpu: u32,
    /// SCHED softirqs a second.
    pub sched_per_s: f64,
    /// Function-call IPIs a second.
    pub calls_per_s: f64,
}

/// The counters of `cpus` in the texts of `/proc/softirqs` and
/// `/proc/interrupts` (a CPU missing from either is left out).
pub fn parse(softirqs: &str, interrupts: &str, cpus: &CpuSet) -> Counts {
    let line = |text: &str, label: &str| -> BTreeMap<u32, u64> {
        let (ids, lines) = parse_interrupts(text);
        let Some(line) = lines.into_iter().find(|l| l.label == label) else {
            return BTreeMap::new();
        };
        ids.into_iter()
            .zip(line.counts)
            .filter(|(cpu, _)| cpus.contains(*cpu))
            .collect()
    };
    let sched = line(softirqs, "SCHED");
    let calls = line(interrupts, "CAL");
    let per_cpu = sched
        .iter()
        .filter_map(|(cpu, s)| Some((*cpu, (*s, *calls.get(cpu)?))))
        .collect();
    Counts { per_cpu }
}

/// The counters of `cpus` now, if both files read.
pub fn read(sys: &Sys, cpus: &CpuSet) -> Option<Counts> {
    let softirqs = sys.read("proc/softirqs").ok()?;
    let interrupts = sys.read("proc/interrupts").ok()?;
    Some(parse(&softirqs, &interrupts, cpus))
}

/// What reached each CPU between two readings `secs` apart.
pub fn rates(before: &Counts, after: &Counts, secs: f64) -> Vec<Rate> {
    let secs = secs.max(1e-3);
    after
        .per_cpu
        .iter()
        .filter_map(|(cpu, (s, c))| {
            let (s0, c0) = before.per_cpu.get(cpu)?;
            Some(Rate {
                cpu: *cpu,
                sched_per_s: s.saturating_sub(*s0) as f64 / secs,
                calls_per_s: c.saturating_sub(*c0) as f64 / secs,
            })
        })
        .collect()
}

/// What reached `cpus` over `window`: two readings with a sleep between
/// (none when the counters cannot be read); and the second reading.
pub fn sample(sys: &Sys, cpus: &CpuSet, window: Duration) -> Option<(Vec<Rate>, Counts)> {
    let before = read(sys, cpus)?;
    std::thread::sleep(window);
    let after = read(sys, cpus)?;
    Some((rates(&before, &after, window.as_secs_f64()), after))
}

/// The kernel's interrupt counters as read at one moment, unparsed: the
/// start of a window that other reading can overlap.
#[derive(Debug, Clone)]
pub struct Reading {
    at: std::time::Instant,
    softirqs: String,
    interrupts: String,
}

impl Reading {
    /// `/proc/softirqs` and `/proc/interrupts` now; none when unreadable.
    pub fn now(sys: &Sys) -> Option<Reading> {
        let at = std::time::Instant::now();
        Some(Reading {
            softirqs: sys.read("proc/softirqs").ok()?,
            interrupts: sys.read("proc/interrupts").ok()?,
            at,
        })
    }
}

/// As [`sample`], the window starting at `start` (waiting only for what
/// is left of it): the rates over the time that really passed.
pub fn sample_since(
    sys: &Sys,
    start: &Reading,
    cpus: &CpuSet,
    window: Duration,
) -> Option<(Vec<Rate>, Counts)> {
    let before = parse(&start.softirqs, &start.interrupts, cpus);
    std::thread::sleep(window.saturating_sub(start.at.elapsed()));
    let after = read(sys, cpus)?;
    Some((
        rates(&before, &after, start.at.elapsed().as_secs_f64()),
        after,
    ))
}

/// The CPUs of `/proc/schedstat` listed without a `domain` line under
/// them: the kernel gave them no sched domain.
pub fn without_domain(schedstat: &str) -> CpuSet {
    let mut out = CpuSet::new();
    let mut current: Option<u32> = None;
    let close = |cpu: Option<u32>, had_domain: bool, out: &mut CpuSet| {
        if let (Some(cpu), false) = (cpu, had_domain) {
            out.insert(cpu);
        }
    };
    let mut had_domain = false;
    for line in schedstat.lines() {
        let word = line.split_whitespace().next().unwrap_or("");
        if let Some(n) = word.strip_prefix("cpu").and_then(|n| n.parse().ok()) {
            close(current, had_domain, &mut out);
            current = Some(n);
            had_domain = false;
        } else if word.starts_with("domain") {
            had_domain = true;
        }
    }
    close(current, had_domain, &mut out);
    out
}

/// Of `cpus`, those the kernel runs without a sched domain, by
/// `/proc/schedstat`; `assumed` when that file cannot be read.
pub fn read_without_domain(sys: &Sys, cpus: &CpuSet, assumed: &CpuSet) -> CpuSet {
    match sys.read("proc/schedstat") {
        Ok(text) => without_domain(&text).intersection(cpus),
        Err(_) => assumed.intersection(cpus),
    }
}

/// The finding on `rates` of CPUs without a sched domain, measured over
/// `secs`: kicked CPUs (above [`KICKED_PER_S`], two events at least) with
/// their rates, a warning with what takes them out of the mask; else none
/// above the bar.
pub fn finding(rates: &[Rate], secs: f64) -> Finding {
    const ID: &str = "interrupts.idle-balance";
    // Two events at least: one in a short window is not a rate.
    let over = |per_s: f64| per_s > KICKED_PER_S && per_s * secs >= 1.5;
    let kicked: Vec<&Rate> = rates
        .iter()
        .filter(|r| over(r.sched_per_s) || over(r.calls_per_s))
        .collect();
    let all: CpuSet = rates.iter().map(|r| r.cpu).collect();
    if kicked.is_empty() {
        return Finding::new(
            ID,
            Severity::Ok,
            65,
            format!("no idle-balance kicks on CPUs {all} (at most {KICKED_PER_S:.0} SCHED softirq and function-call IPI a second over {secs:.1} s)"),
            String::new(),
        );
    }
    let cpus: CpuSet = kicked.iter().map(|r| r.cpu).collect();
    let each = kicked
        .iter()
        .map(|r| {
            format!(
                "CPU {} {:.0} SCHED softirqs/s, {:.0} function-call IPIs/s",
                r.cpu, r.sched_per_s, r.calls_per_s
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let cycle = cpus
        .iter()
        .map(|c| format!("echo 0 > /sys/devices/system/cpu/cpu{c}/online; echo 1 > /sys/devices/system/cpu/cpu{c}/online"))
        .collect::<Vec<_>>()
        .join("; ");
    Finding::new(
        ID,
        Severity::Warn,
        65,
        format!("idle-balance kicks wake CPUs {cpus}, which have no sched domain: {each} (the kernel's idle-balance mask still holds them)"),
        format!("take each offline and online again ({cycle}), as `cpushield on` does where it can; or boot with nohz_full={cpus} (cpushield boot-args)"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOFT_A: &str = "                    CPU0       CPU1       CPU2       CPU3\n          HI:          0          0          0          0\n       SCHED:       1000        900         10          5\n";
    const SOFT_B: &str = "                    CPU0       CPU1       CPU2       CPU3\n          HI:          0          0          0          0\n       SCHED:       1500       1400        710          6\n";
    const INTR_A: &str = "           CPU0       CPU1       CPU2       CPU3\n LOC:        100        100        100        100   Local timer interrupts\n CAL:         50         50         20          3   Function call interrupts\n";
    const INTR_B: &str = "           CPU0       CPU1       CPU2       CPU3\n LOC:        900        900        101        102   Local timer interrupts\n CAL:         60         60        720          3   Function call interrupts\n";

    fn cpus(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    #[test]
    fn a_kicked_cpu_is_named_with_its_rates_and_a_quiet_one_is_not() {
        let shield = cpus("2-3");
        let a = parse(SOFT_A, INTR_A, &shield);
        let b = parse(SOFT_B, INTR_B, &shield);
        assert_eq!(a.per_cpu.get(&2), Some(&(10, 20)));
        let r = rates(&a, &b, 5.0);
        assert_eq!(r[0].cpu, 2);
        assert_eq!((r[0].sched_per_s, r[0].calls_per_s), (140.0, 140.0));
        assert_eq!((r[1].sched_per_s, r[1].calls_per_s), (0.2, 0.0));
        let f = finding(&r, 5.0);
        assert_eq!(f.severity, Severity::Warn);
        assert!(
            f.reason.contains("CPUs 2,") || f.reason.contains("CPUs 2 "),
            "{}",
            f.reason
        );
        assert!(f
            .reason
            .contains("CPU 2 140 SCHED softirqs/s, 140 function-call IPIs/s"));
        assert!(!f.reason.contains("CPU 3 "), "{}", f.reason);
        assert!(f
            .next
            .contains("echo 0 > /sys/devices/system/cpu/cpu2/online"));
        let quiet = finding(&r[1..], 5.0);
        assert_eq!(quiet.severity, Severity::Ok, "{}", quiet.reason);
        let one = Rate {
            cpu: 3,
            sched_per_s: 4.0,
            calls_per_s: 4.0,
        };
        assert_eq!(
            finding(&[one], 0.25).severity,
            Severity::Ok,
            "one event in 0.25 s"
        );
    }

    #[test]
    fn a_window_started_by_an_earlier_reading_counts_from_it() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("proc")).unwrap();
        let put = |soft: &str, intr: &str| {
            std::fs::write(root.path().join("proc/softirqs"), soft).unwrap();
            std::fs::write(root.path().join("proc/interrupts"), intr).unwrap();
        };
        let sys = Sys::at(root.path());
        put(SOFT_A, INTR_A);
        let start = Reading::now(&sys).unwrap();
        // the counters move while the machine is read
        put(SOFT_B, INTR_B);
        let (rates, after) = sample_since(&sys, &start, &cpus("2-3"), Duration::ZERO).unwrap();
        assert_eq!(after, parse(SOFT_B, INTR_B, &cpus("2-3")));
        assert_eq!(rates[0].cpu, 2);
        assert!(rates[0].sched_per_s > 0.0, "{rates:?}");
        // counted from the start's counters: CPU 2's 700 more SCHED softirqs
        let secs = 700.0 / rates[0].sched_per_s;
        assert!(secs > 0.0 && secs < 60.0, "{secs}");
    }

    #[test]
    fn cpus_without_a_domain_line_in_schedstat_have_no_sched_domain() {
        let text = "version 15\ntimestamp 1\ncpu0 0 0 0 0 0 0 1 2 3\ndomain0 00000003 0 0\ncpu1 0 0\ndomain0 00000003 0 0\ncpu2 0 0 0\ncpu3 0 0 0\n";
        assert_eq!(without_domain(text), cpus("2-3"));
        assert_eq!(
            without_domain("version 15\ncpu0 1\ndomain0 1\n"),
            CpuSet::new()
        );
    }
}
