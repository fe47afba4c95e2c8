//! Which other threads ran on the measured CPUs during a measurement.
//!
//! Every thread's context switches (`/proc/PID/task/TID/status`) and last
//! CPU (`/proc/PID/task/TID/stat`, field 39) are read before the measuring
//! threads start and after they end. A thread whose switches grew and
//! whose last CPU at the end is a measured one ran there: a switch ends a
//! run, and a thread that wakes is placed on the CPU it will run on. The
//! count is a lower bound: a thread that ran on a measured CPU and then
//! ran last somewhere else, or that exited before the end, is not seen.
//! Threads bound to a measured CPU (its kworkers, ksoftirqd) are always
//! seen. The measuring process's own threads are left out.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::sys::{procfs, Sys};

/// How many of the busiest threads a CPU's result names.
pub const BUSIEST_NAMED: usize = 8;

/// One thread's scheduling counts at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadCount {
    /// Its name (`comm`).
    pub name: String,
    /// When it started, clock ticks since boot (tells a reused id apart).
    pub start_ticks: u64,
    /// The CPU it last ran on, or is queued on.
    pub cpu: u32,
    /// Voluntary plus involuntary context switches so far.
    pub switches: u64,
}

/// Every thread's counts at one moment, by thread id.
pub type ThreadCounts = HashMap<i32, ThreadCount>;

/// A thread that ran on a measured CPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadRan {
    /// Its thread id.
    pub tid: i32,
    /// Its name (`comm`): `kworker/1:1`, `ksoftirqd/1`, `stress-ng-cpu`.
    pub name: String,
    /// Its context switches during the measurement: how often it ran.
    pub switches: u64,
}

/// The other threads that ran on one CPU during a measurement.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadsRan {
    /// How many distinct threads ran there (at least).
    pub threads: u64,
    /// Their context switches summed: how often they ran.
    pub switches: u64,
    /// The busiest of them, most switches first (at most [`BUSIEST_NAMED`]).
    pub busiest: Vec<ThreadRan>,
}

/// Reads every thread's counts, leaving out process `own_pid`'s threads.
/// Threads that end while being read are skipped; `None` when `/proc`
/// cannot be listed.
pub fn read(sys: &Sys, own_pid: i32) -> Option<ThreadCounts> {
    let mut counts = ThreadCounts::new();
    for pid in procfs::list_pids(sys).ok()? {
        if pid == own_pid {
            continue;
        }
        for tid in procfs::list_tids(sys, pid).unwrap_or_default() {
            let dir = format!("proc/{pid}/task/{tid}");
            let (Ok(stat), Ok(status)) = (
                sys.read(&format!("{dir}/stat")),
                sys.read(&format!("{dir}/status")),
            ) else {
                continue;
            };
            if let Some(c) = parse(&stat, &status) {
                counts.insert(tid, c);
            }
        }
    }
    Some(counts)
}

/// A thread's counts out of its `stat` and `status` texts.
pub fn parse(stat: &str, status: &str) -> Option<ThreadCount> {
    let (name, fields) = procfs::split_stat(stat)?;
    // Start time is field 22, the processor 39.
    let field = |n: usize| procfs::stat_field::<u64>(&fields, n);
    let switches_of = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    Some(ThreadCount {
        name: name.to_string(),
        start_ticks: field(22)?,
        cpu: u32::try_from(field(39)?).ok()?,
        switches: switches_of("voluntary_ctxt_switches:")?
            + switches_of("nonvoluntary_ctxt_switches:")?,
    })
}

/// The threads that ran on `cpu` between `before` and `after`.
pub fn ran_on(before: &ThreadCounts, after: &ThreadCounts, cpu: u32) -> ThreadsRan {
    let mut ran: Vec<ThreadRan> = after
        .iter()
        .filter(|(_, a)| a.cpu == cpu)
        .filter_map(|(&tid, a)| {
            let earlier = before
                .get(&tid)
                .filter(|b| b.start_ticks == a.start_ticks)
                .map_or(0, |b| b.switches);
            let switches = a.switches.saturating_sub(earlier);
            (switches > 0).then(|| ThreadRan {
                tid,
                name: a.name.clone(),
                switches,
            })
        })
        .collect();
    ran.sort_by(|a, b| b.switches.cmp(&a.switches).then(a.tid.cmp(&b.tid)));
    let threads = ran.len() as u64;
    let switches = ran.iter().map(|t| t.switches).sum();
    ran.truncate(BUSIEST_NAMED);
    ThreadsRan {
        threads,
        switches,
        busiest: ran,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(name: &str, start: u64, cpu: u32) -> String {
        // pid (comm) state, then fields 4..=52 with start time (22) and
        // processor (39) in place.
        let mut f: Vec<String> = (4..=52).map(|_| "0".to_string()).collect();
        f[22 - 4] = start.to_string();
        f[39 - 4] = cpu.to_string();
        format!("7 ({name}) S {}", f.join(" "))
    }

    fn status(vol: u64, invol: u64) -> String {
        format!("Name:\tx\nvoluntary_ctxt_switches:\t{vol}\nnonvoluntary_ctxt_switches:\t{invol}\n")
    }

    fn count(name: &str, start: u64, cpu: u32, switches: u64) -> ThreadCount {
        parse(&stat(name, start, cpu), &status(switches, 0)).unwrap()
    }

    #[test]
    fn parse_reads_name_start_cpu_and_both_switch_counts() {
        let c = parse(&stat("kworker/1:1-events (x)", 4242, 3), &status(10, 5)).unwrap();
        assert_eq!(c.name, "kworker/1:1-events (x)");
        assert_eq!((c.start_ticks, c.cpu, c.switches), (4242, 3, 15));
        assert!(parse("7 (short) S 1 2 3", &status(1, 1)).is_none());
        assert!(parse(&stat("a", 1, 1), "Name:\ta\n").is_none());
    }

    #[test]
    fn ran_on_counts_threads_that_switched_and_ended_on_the_cpu() {
        let before: ThreadCounts = [
            (10, count("ksoftirqd/1", 5, 1, 100)),
            (11, count("kworker/1:0", 5, 1, 40)),
            (12, count("idle-on-1", 5, 1, 7)),
            (13, count("moved-away", 5, 1, 3)),
            (14, count("reused-id", 5, 1, 50)),
        ]
        .into();
        let after: ThreadCounts = [
            (10, count("ksoftirqd/1", 5, 1, 103)),
            (11, count("kworker/1:0", 5, 1, 60)),
            (12, count("idle-on-1", 5, 1, 7)),
            (13, count("moved-away", 5, 0, 9)),
            // A new thread with the old id: all its switches are new.
            (14, count("reused-id", 9, 1, 4)),
            (15, count("new", 9, 1, 2)),
            (16, count("elsewhere", 9, 0, 30)),
        ]
        .into();
        let r = ran_on(&before, &after, 1);
        assert_eq!(r.threads, 4);
        assert_eq!(r.switches, 20 + 3 + 4 + 2);
        let names: Vec<&str> = r.busiest.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["kworker/1:0", "reused-id", "ksoftirqd/1", "new"]);
        assert_eq!(ran_on(&before, &after, 0).threads, 2);
        assert_eq!(ran_on(&before, &after, 2), ThreadsRan::default());
    }

    #[test]
    fn only_the_busiest_are_named() {
        let after: ThreadCounts = (0..20)
            .map(|i| (i, count(&format!("t{i}"), 1, 1, 1 + i as u64)))
            .collect();
        let r = ran_on(&ThreadCounts::new(), &after, 1);
        assert_eq!(r.threads, 20);
        assert_eq!(r.busiest.len(), BUSIEST_NAMED);
        assert_eq!(r.busiest[0].name, "t19");
        assert_eq!(r.switches, (1..=20).sum::<u64>());
    }

    #[test]
    fn read_leaves_out_the_own_process_and_reads_this_machine() {
        let sys = Sys::live();
        let me = std::process::id() as i32;
        let counts = read(&sys, me).expect("/proc lists");
        assert!(!counts.contains_key(&me));
        // pid 1 exists everywhere /proc does and has switched at least once.
        let init = counts.get(&1).expect("pid 1 read");
        assert!(init.switches > 0 && init.start_ticks < u64::MAX);
    }
}
