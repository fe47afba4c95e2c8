//! Which threads on the watched CPUs starve: pure, over samples of
//! `/proc/PID/task/TID/{stat,schedstat}` taken by the guard's loop.
//!
//! A thread starves when it has been runnable (`R`) on a watched CPU for
//! the threshold without its run time (`schedstat`'s first field,
//! `se.sum_exec_runtime`, read without taking the CPU's run-queue lock)
//! growing, while another thread on the same CPU ran meanwhile. The second
//! condition keeps the guard off the one thread a CPU runs, whose run time
//! the kernel may update only at the residual 1 Hz tick of a `nohz_full`
//! CPU: boosting it would throttle the real-time loop itself.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;
use crate::sys::procfs::{split_stat, stat_field};

/// One thread as a scan read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    /// Process id.
    pub pid: i32,
    /// Thread id.
    pub tid: i32,
    /// `comm`, as the thread named itself (data, never parsed further).
    pub name: String,
    /// Start time in clock ticks since boot: with `tid`, tells a reused
    /// thread id apart.
    pub start_ticks: u64,
    /// State letter (`R` runnable or running).
    pub state: char,
    /// The CPU it last ran on.
    pub cpu: u32,
    /// Its real-time priority (0 for ordinary tasks).
    pub rt_priority: u32,
    /// Its policy number (`SCHED_OTHER` 0, `SCHED_FIFO` 1, ...).
    pub policy: u32,
    /// Time it has run, ns.
    pub exec_ns: u64,
}

/// Parses a thread's `stat` and `schedstat`; `None` if a field is missing.
pub fn parse_sample(pid: i32, tid: i32, stat: &str, schedstat: &str) -> Option<Sample> {
    let (name, fields) = split_stat(stat)?;
    Some(Sample {
        pid,
        tid,
        name: name.to_string(),
        start_ticks: stat_field(&fields, 22)?,
        state: fields.first()?.chars().next()?,
        cpu: stat_field(&fields, 39)?,
        rt_priority: stat_field(&fields, 40)?,
        policy: stat_field(&fields, 41)?,
        exec_ns: schedstat.split_whitespace().next()?.parse().ok()?,
    })
}

/// A thread found starving.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Starving {
    /// Process id.
    pub pid: i32,
    /// Thread id.
    pub tid: i32,
    /// Its start time (see [`Sample::start_ticks`]).
    pub start_ticks: u64,
    /// `comm`.
    pub name: String,
    /// The CPU it waits on.
    pub cpu: u32,
    /// How long it has waited without running, ns.
    pub waited_ns: u64,
    /// Its run time when found, ns.
    pub exec_ns: u64,
    /// The highest real-time priority among the threads that ran on its
    /// CPU meanwhile: a SCHED_FIFO boost must go above it.
    pub hog_priority: u32,
}

/// The starving threads as a finding names them: `"NAME" (tid N) on CPU
/// C for S s`, comma-separated. A task names itself anything: the name is
/// cut to 32 characters and quoted with its escapes.
pub fn describe(starving: &[Starving]) -> String {
    starving
        .iter()
        .map(|s| {
            format!(
                "{:?} (tid {}) on CPU {} for {:.1} s",
                s.name.chars().take(32).collect::<String>(),
                s.tid,
                s.cpu,
                s.waited_ns as f64 / 1e9
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[derive(Debug, Clone)]
struct Waiting {
    start_ticks: u64,
    exec_ns: u64,
    since_ns: u64,
}

/// How long a thread that was boosted counts as one that starves again:
/// per-CPU kernel work comes in bursts (a `sync`, a sysctl, a service start
/// queue several items on the same worker one after the other), and each
/// would otherwise wait the whole threshold anew.
pub const RESTARVE_WINDOW_NS: u64 = 30_000_000_000;

/// What the previous scans saw of each runnable thread on the watched CPUs.
#[derive(Debug, Default)]
pub struct Watch {
    waiting: HashMap<i32, Waiting>,
    ran: HashMap<i32, (u64, u64)>,
    /// Threads boosted lately: tid -> (start time, when the last boost
    /// began, boosts in a row).
    boosted: HashMap<i32, (u64, u64, u32)>,
}

impl Watch {
    /// Takes one scan at `now_ns` and returns the threads that have been
    /// runnable on a CPU of `cpus` for `threshold_ns` without running
    /// while another thread ran there. A thread boosted within
    /// [`RESTARVE_WINDOW_NS`] starves after a quarter of the threshold.
    pub fn observe(
        &mut self,
        now_ns: u64,
        samples: &[Sample],
        cpus: &CpuSet,
        threshold_ns: u64,
    ) -> Vec<Starving> {
        // Which CPUs had a thread run since the previous scan, and the
        // highest real-time priority among those threads.
        let mut busy: HashMap<u32, u32> = HashMap::new();
        let mut ran = HashMap::new();
        for s in samples.iter().filter(|s| cpus.contains(s.cpu)) {
            ran.insert(s.tid, (s.start_ticks, s.exec_ns));
            let progressed = self
                .ran
                .get(&s.tid)
                .is_some_and(|&(start, exec)| start == s.start_ticks && s.exec_ns > exec);
            if progressed {
                let prio = busy.entry(s.cpu).or_default();
                *prio = (*prio).max(s.rt_priority);
            }
        }
        self.ran = ran;
        let mut waiting = HashMap::new();
        let mut out = Vec::new();
        for s in samples
            .iter()
            .filter(|s| cpus.contains(s.cpu) && s.state == 'R')
        {
            let since_ns = match self.waiting.get(&s.tid) {
                Some(w) if w.start_ticks == s.start_ticks && w.exec_ns == s.exec_ns => w.since_ns,
                _ => now_ns,
            };
            waiting.insert(
                s.tid,
                Waiting {
                    start_ticks: s.start_ticks,
                    exec_ns: s.exec_ns,
                    since_ns,
                },
            );
            let waited_ns = now_ns.saturating_sub(since_ns);
            let starved_lately = self.boosted.get(&s.tid).is_some_and(|&(start, at, _)| {
                start == s.start_ticks && now_ns.saturating_sub(at) < RESTARVE_WINDOW_NS
            });
            let limit = if starved_lately {
                threshold_ns / 4
            } else {
                threshold_ns
            };
            if let (true, Some(&hog_priority)) = (waited_ns >= limit, busy.get(&s.cpu)) {
                out.push(Starving {
                    pid: s.pid,
                    tid: s.tid,
                    start_ticks: s.start_ticks,
                    name: s.name.clone(),
                    cpu: s.cpu,
                    waited_ns,
                    exec_ns: s.exec_ns,
                    hog_priority,
                });
            }
        }
        self.waiting = waiting;
        self.boosted
            .retain(|_, &mut (_, at, _)| now_ns.saturating_sub(at) < RESTARVE_WINDOW_NS);
        out
    }

    /// Records that `tid` (started at `start_ticks`) was boosted at
    /// `now_ns`; returns how many boosts in a row it has had, each within
    /// [`RESTARVE_WINDOW_NS`] of the one before (1 for a first boost).
    pub fn boosted(&mut self, tid: i32, start_ticks: u64, now_ns: u64) -> u32 {
        let streak = match self.boosted.get(&tid) {
            Some(&(start, at, n))
                if start == start_ticks && now_ns.saturating_sub(at) < RESTARVE_WINDOW_NS =>
            {
                n + 1
            }
            _ => 1,
        };
        self.boosted.insert(tid, (start_ticks, now_ns, streak));
        streak
    }

    /// Forgets what was seen of `tid` (after a boost, its wait starts anew).
    pub fn forget(&mut self, tid: i32) {
        self.waiting.remove(&tid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn sample(tid: i32, name: &str, state: char, cpu: u32, prio: u32, exec_ns: u64) -> Sample {
        Sample {
            pid: tid,
            tid,
            name: name.into(),
            start_ticks: 100,
            state,
            cpu,
            rt_priority: prio,
            policy: u32::from(prio > 0),
            exec_ns,
        }
    }

    fn cpus(list: &str) -> CpuSet {
        CpuSet::parse_list(list).unwrap()
    }

    #[test]
    fn stat_and_schedstat_parse_whatever_the_name_holds() {
        let stat = "77 (a) R 1 2 (b\n) R 1 77 77 0 -1 69238880 0 0 0 0 5 6 0 0 -2 0 1 0 4242 0 0 \
                    18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 3 1 1 0 0 0";
        let s = parse_sample(77, 77, stat, "123456 789 10\n").unwrap();
        assert_eq!(s.name, "a) R 1 2 (b\n");
        assert_eq!((s.state, s.cpu, s.rt_priority, s.policy), ('R', 3, 1, 1));
        assert_eq!((s.start_ticks, s.exec_ns), (4242, 123456));
        // A short stat line (an old or damaged one) gives nothing, not a guess.
        assert_eq!(parse_sample(77, 77, "77 (x) R 1 2 3", "1 2 3"), None);
    }

    #[test]
    fn a_runnable_thread_that_does_not_run_behind_a_loop_starves_after_the_threshold() {
        let mut w = Watch::default();
        let shield = cpus("2-3");
        let scan = |loop_ns, kworker_state| {
            vec![
                sample(10, "spin", 'R', 3, 80, loop_ns),
                sample(11, "kworker/3:1", kworker_state, 3, 0, 5_000),
                sample(12, "bash", 'R', 0, 0, 0),
            ]
        };
        assert!(w.observe(0, &scan(S, 'R'), &shield, 2 * S).is_empty());
        assert!(w.observe(S, &scan(2 * S, 'R'), &shield, 2 * S).is_empty());
        let found = w.observe(2 * S, &scan(3 * S, 'R'), &shield, 2 * S);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!((found[0].tid, found[0].cpu), (11, 3));
        assert_eq!((found[0].waited_ns, found[0].hog_priority), (2 * S, 80));
        // Once it sleeps, its wait is over, and it starts anew when it wakes.
        assert!(w
            .observe(3 * S, &scan(4 * S, 'S'), &shield, 2 * S)
            .is_empty());
        assert!(w
            .observe(4 * S, &scan(5 * S, 'R'), &shield, 2 * S)
            .is_empty());
    }

    #[test]
    fn the_thread_a_cpu_runs_alone_is_never_starving() {
        // A loop alone on a nohz_full CPU whose run time the kernel has not
        // updated: nothing else ran there, so nothing starves.
        let mut w = Watch::default();
        let shield = cpus("3");
        for t in 0..5 {
            let found = w.observe(t * S, &[sample(10, "spin", 'R', 3, 80, 7)], &shield, S);
            assert!(found.is_empty(), "{found:?}");
        }
    }

    #[test]
    fn threads_off_the_watched_cpus_or_that_ran_are_left_alone() {
        let mut w = Watch::default();
        let shield = cpus("3");
        for t in 0..5u64 {
            let found = w.observe(
                t * S,
                &[
                    sample(10, "spin", 'R', 3, 80, t * S),
                    sample(11, "kworker/3:1", 'R', 3, 0, t * 1000),
                    sample(12, "kworker/1:1", 'R', 1, 0, 5),
                ],
                &shield,
                S,
            );
            assert!(found.is_empty(), "{found:?}");
        }
    }

    #[test]
    fn a_name_is_cut_and_escaped_in_the_description() {
        let s = Starving {
            pid: 9,
            tid: 9,
            start_ticks: 1,
            name: format!("evil\n{}", "x".repeat(100)),
            cpu: 3,
            waited_ns: 2_500_000_000,
            exec_ns: 0,
            hog_priority: 80,
        };
        let d = describe(&[s.clone(), s]);
        assert!(!d.contains('\n'), "{d}");
        assert!(d.starts_with("\"evil\\n"), "{d}");
        assert!(d.contains("(tid 9) on CPU 3 for 2.5 s, \""), "{d}");
        assert!(d.len() < 2 * 70, "{d}");
    }

    #[test]
    fn a_thread_boosted_lately_starves_again_after_a_quarter_of_the_threshold() {
        let mut w = Watch::default();
        let shield = cpus("3");
        let q = S / 2;
        let spin = |t: u64| sample(10, "spin", 'R', 3, 80, t * S);
        let kw = |state, start| {
            let mut k = sample(11, "kworker/3:1", state, 3, 0, 5);
            k.start_ticks = start;
            k
        };
        assert_eq!(w.boosted(11, 100, 0), 1);
        w.observe(S, &[spin(1), kw('R', 100)], &shield, 2 * S);
        let found = w.observe(S + q, &[spin(2), kw('R', 100)], &shield, 2 * S);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].waited_ns, q);
        // Boosts in a row are counted; a pause longer than the window, or
        // another thread under the id, starts the count anew.
        assert_eq!(w.boosted(11, 100, S + q), 2);
        assert_eq!(w.boosted(11, 100, 2 * S), 3);
        assert_eq!(w.boosted(11, 100, 2 * S + RESTARVE_WINDOW_NS), 1);
        assert_eq!(w.boosted(11, 999, 3 * S + RESTARVE_WINDOW_NS), 1);
        // Another thread under the same id, or one boosted long ago, waits
        // the whole threshold.
        let mut w = Watch::default();
        w.boosted(11, 100, 0);
        w.observe(S, &[spin(1), kw('R', 999)], &shield, 2 * S);
        assert!(w
            .observe(S + q, &[spin(2), kw('R', 999)], &shield, 2 * S)
            .is_empty());
        let mut w = Watch::default();
        w.boosted(11, 100, 0);
        let late = RESTARVE_WINDOW_NS;
        w.observe(late, &[spin(1), kw('R', 100)], &shield, 2 * S);
        assert!(w
            .observe(late + q, &[spin(2), kw('R', 100)], &shield, 2 * S)
            .is_empty());
    }

    #[test]
    fn a_reused_thread_id_starts_a_new_wait() {
        let mut w = Watch::default();
        let shield = cpus("3");
        let spin = |t: u64| sample(10, "spin", 'R', 3, 80, t * S);
        let mut kw = sample(11, "kworker/3:1", 'R', 3, 0, 5);
        w.observe(0, &[spin(0), kw.clone()], &shield, 2 * S);
        w.observe(S, &[spin(1), kw.clone()], &shield, 2 * S);
        kw.start_ticks = 999;
        let found = w.observe(2 * S, &[spin(2), kw], &shield, 2 * S);
        assert!(found.is_empty(), "{found:?}");
    }
}
