//! The guard's loop: scan the threads of the watched CPUs, boost the ones
//! that starve, take each boost back when it ends, write the state.
//!
//! It runs on the housekeeping CPUs at SCHED_FIFO 98 (above the user's
//! real-time work there, below the measuring threads' 99), so that load on
//! those CPUs cannot hold it back. It never locks its memory: `mlockall`
//! drains the LRU lists of every CPU and waits for each, the starving CPU
//! included, which would hang the guard behind the very loop it guards.
//!
//! Reads are cheap and remote only: a thread's `stat` and `schedstat`
//! (no run-queue lock), of the threads that last ran on a watched CPU
//! every quarter threshold, and of every thread each half threshold to
//! find new ones (a kworker made while the shield holds).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use super::watch::{parse_sample, Sample, Starving, Watch};
use super::{
    restore_boosts, stalld, ActiveBoost, BoostKind, BoostRecord, Engine, GuardState, Settings,
    RECENT, STATE_FILE,
};
use crate::cpulist::CpuSet;
use crate::sys::syscalls::{self, Policy, SchedAttr, SCHED_DEADLINE, SCHED_FIFO};
use crate::sys::{procfs, ErrorKind, Sys, SysError};

/// The guard's own SCHED_FIFO priority.
pub const PRIORITY: i32 = 98;
/// The state is rewritten at least this often (a heartbeat for `status`), ns.
const HEARTBEAT_NS: u64 = 1_000_000_000;

/// Why the guard could not run.
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    /// A kernel access it cannot do without.
    #[error(transparent)]
    Sys(#[from] SysError),
    /// Its settings.
    #[error(transparent)]
    Settings(#[from] super::SettingsError),
    /// Nothing to watch.
    #[error("the guard needs CPUs to watch and at least one other online CPU to run on (watched {cpus}, online {online})")]
    Cpus {
        /// Watched.
        cpus: CpuSet,
        /// Online.
        online: CpuSet,
    },
}

/// A boost in flight, with what the loop needs to run it.
#[derive(Debug)]
struct Boost {
    record: ActiveBoost,
    /// What it boosts to.
    attr: SchedAttr,
    waited_ns: u64,
    exec_at_start: u64,
    ends_ns: u64,
    /// Its period, ns: the setting's, shorter for a thread that starves
    /// again and again.
    period_ns: u64,
    /// SCHED_FIFO boosts: when the current window closes (set) or the next
    /// opens (not set).
    window: Option<(bool, u64)>,
}

/// Runs the guard over `cpus` until `stop` is set (SIGTERM, SIGINT), then
/// puts back every boost in flight. Errors only before it starts.
pub fn run(
    sys: &Sys,
    cpus: &CpuSet,
    settings: Settings,
    stop: &AtomicBool,
) -> Result<(), GuardError> {
    settings.check()?;
    let online = procfs::online_cpus(sys)?;
    let housekeeping = online.difference(cpus);
    if cpus.is_empty() || housekeeping.is_empty() {
        return Err(GuardError::Cpus {
            cpus: cpus.clone(),
            online,
        });
    }
    // Its state goes there: made 0700 if the guard comes first, refused
    // if someone else may write it.
    sys.run_dir()?;
    let mut guard = start(sys, cpus, &housekeeping, settings);
    let now = syscalls::monotonic_ns();
    // stalld boosts where it is the engine and runs; the own loop below
    // scans only while it does not.
    let mut stalld = match settings.engine {
        Engine::Cpushield => None,
        Engine::Auto | Engine::Stalld => stalld::find(sys).map(stalld::Supervisor::new),
    };
    guard.write_state(now);
    let threshold_ns = settings.threshold_ms * 1_000_000;
    let scan_every = (threshold_ns / 4).clamp(100_000_000, 1_000_000_000);
    let full_every = (threshold_ns / 2).max(500_000_000);
    let (mut next_scan, mut next_full) = (now, now);
    while !stop.load(Ordering::Relaxed) {
        let now = syscalls::monotonic_ns();
        let mut changed = guard.step_boosts(now);
        if let Some(engine) = &mut stalld {
            changed |= engine.tend(sys, cpus, &settings, &mut guard.state, now);
        }
        let engine_runs = stalld.as_ref().is_some_and(stalld::Supervisor::runs);
        if now >= next_scan && engine_runs {
            next_scan = now + scan_every;
        } else if now >= next_scan {
            if now >= next_full {
                guard.refresh_candidates();
                next_full = now + full_every;
            }
            changed |= guard.scan(now, threshold_ns);
            guard.state.candidates = guard.candidates.len();
            guard.state.scan_us = (syscalls::monotonic_ns() - now) / 1_000;
            next_scan = now + scan_every;
        }
        if changed || now >= guard.written_ns + HEARTBEAT_NS {
            guard.write_state(now);
        }
        let _ = syscalls::sleep_until_monotonic_ns(guard.wake_at(now, next_scan));
    }
    if let Some(engine) = &mut stalld {
        engine.stop(sys);
    }
    let now = syscalls::monotonic_ns();
    let tids: Vec<i32> = guard.boosts.keys().copied().collect();
    for tid in tids {
        guard.finish(tid, now);
    }
    guard.write_state(now);
    Ok(())
}

/// The guard set up: its name, on the housekeeping CPUs at its
/// priority (best effort: a guard that cannot move or raise itself still
/// works, only later under load there), the boosts a guard that died left
/// given back, and its state.
fn start<'a>(sys: &'a Sys, cpus: &CpuSet, housekeeping: &CpuSet, settings: Settings) -> Guard<'a> {
    let _ = syscalls::set_thread_name(super::PROCESS_NAME);
    let _ = sys.set_affinity(0, housekeeping);
    let _ = sys.set_scheduler(0, Policy::Fifo(PRIORITY));
    // A guard that died mid-boost left threads boosted: give them back.
    if let Some(old) = super::read_state(sys) {
        if !super::alive(sys, &old) || old.pid == std::process::id() as i32 {
            restore_boosts(sys, &old);
        }
    }
    let pid = std::process::id() as i32;
    let now = syscalls::monotonic_ns();
    Guard {
        sys,
        cpus: cpus.clone(),
        settings,
        watch: Watch::default(),
        candidates: Vec::new(),
        boosts: HashMap::new(),
        state: GuardState {
            pid,
            start_ticks: procfs::start_ticks(sys, pid).unwrap_or(0),
            cpus: cpus.clone(),
            settings: Some(settings),
            started_ns: now,
            ..GuardState::default()
        },
        written_ns: 0,
    }
}

/// A thread that can wait on a watched CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// Process id.
    pub pid: i32,
    /// Thread id.
    pub tid: i32,
    /// The watched CPU a kernel thread is bound to while its last CPU is
    /// another: a worker made for that CPU's pool starts on a housekeeping
    /// CPU and waits for its first run there.
    pub bound: Option<u32>,
}

/// Every thread whose last CPU is one of `cpus`, and every kernel thread
/// bound to one of them: only those can wait there (the shield keeps
/// everything else off). Only kernel threads have their `status` read.
pub fn candidates(sys: &Sys, cpus: &CpuSet) -> Vec<Candidate> {
    let mut found = Vec::new();
    for pid in procfs::list_pids(sys).unwrap_or_default() {
        for tid in procfs::list_tids(sys, pid).unwrap_or_default() {
            let Ok(stat) = sys.read(&format!("proc/{pid}/task/{tid}/stat")) else {
                continue;
            };
            let Some((_, fields)) = procfs::split_stat(&stat) else {
                continue;
            };
            let cpu = procfs::stat_field::<u32>(&fields, 39);
            let flags = procfs::stat_field::<u64>(&fields, 9).unwrap_or(0);
            if cpu.is_some_and(|c| cpus.contains(c)) {
                found.push(Candidate {
                    pid,
                    tid,
                    bound: None,
                });
            } else if flags & procfs::PF_KTHREAD != 0 {
                let bound = sys
                    .read(&format!("proc/{pid}/task/{tid}/status"))
                    .ok()
                    .and_then(|s| procfs::parse_status_cpus(&s))
                    .filter(|c| c.len() == 1 && c.is_subset(cpus))
                    .and_then(|c| c.iter().next());
                if bound.is_some() {
                    found.push(Candidate { pid, tid, bound });
                }
            }
        }
    }
    found
}

/// One thread's `stat` and `schedstat`, parsed; `None` if it exited. A
/// thread bound to a watched CPU counts as on it.
pub fn sample(sys: &Sys, c: &Candidate) -> Option<Sample> {
    let dir = format!("proc/{}/task/{}", c.pid, c.tid);
    let stat = sys.read(&format!("{dir}/stat")).ok()?;
    let schedstat = sys.read(&format!("{dir}/schedstat")).ok()?;
    let mut s = parse_sample(c.pid, c.tid, &stat, &schedstat)?;
    if let Some(cpu) = c.bound {
        s.cpu = cpu;
    }
    Some(s)
}

/// A pass of the loop longer than this is followed by a sleep at least as
/// long (a pass that opens or closes a SCHED_FIFO window takes µs).
const MAX_WORK_NS: u64 = 2_000_000;

struct Guard<'a> {
    sys: &'a Sys,
    cpus: CpuSet,
    settings: Settings,
    watch: Watch,
    /// Threads that last ran on a watched CPU or are bound to one.
    candidates: Vec<Candidate>,
    boosts: HashMap<i32, Boost>,
    state: GuardState,
    written_ns: u64,
}

impl Boost {
    fn next_event(&self) -> u64 {
        match self.window {
            Some((_, at)) => at.min(self.ends_ns),
            None => self.ends_ns,
        }
    }
}

impl Guard<'_> {
    /// When the loop wakes next (the next scan, or the next event of a
    /// boost), after a pass that started at `now`. The guard runs at FIFO
    /// 98 on the housekeeping CPUs: whatever makes a pass slow (seen with
    /// nohz_full guests), it never takes more than half a CPU from them;
    /// it sleeps at least as long as it worked.
    fn wake_at(&mut self, now: u64, next_scan: u64) -> u64 {
        let wake = self
            .boosts
            .values()
            .map(Boost::next_event)
            .fold(next_scan, u64::min);
        let worked = syscalls::monotonic_ns().saturating_sub(now);
        self.state.longest_work_us = self.state.longest_work_us.max(worked / 1_000);
        let floor = now + 2 * worked.max(500);
        if wake < floor && worked > MAX_WORK_NS {
            self.state.held_back += 1;
        }
        if worked > MAX_WORK_NS {
            wake.max(floor)
        } else {
            wake.max(now + 1_000)
        }
    }

    fn refresh_candidates(&mut self) {
        self.candidates = candidates(self.sys, &self.cpus);
    }

    fn sample(&self, c: &Candidate) -> Option<Sample> {
        sample(self.sys, c)
    }

    /// One scan: samples the candidates, boosts the starving. Whether
    /// anything changed worth writing.
    fn scan(&mut self, now: u64, threshold_ns: u64) -> bool {
        let samples: Vec<Sample> = self
            .candidates
            .iter()
            .filter_map(|c| self.sample(c))
            .collect();
        let starving = self.watch.observe(now, &samples, &self.cpus, threshold_ns);
        let changed = starving != self.state.starving;
        let mut boosted = false;
        for s in &starving {
            if !self.boosts.contains_key(&s.tid) {
                boosted |= self.boost(s, now);
            }
        }
        self.state.starving = starving;
        changed || boosted
    }

    /// Boosts a starving thread: SCHED_DEADLINE, else SCHED_FIFO above
    /// the loop. Journaled in the state file before it is made.
    fn boost(&mut self, s: &Starving, now: u64) -> bool {
        let Ok(previous) = self.sys.sched_attr(s.tid) else {
            return false;
        };
        let set = self.settings;
        // A thread that starves again right after its boost has steady
        // work there (on PREEMPT_RT, rcuc/N at every RCU grace period,
        // ktimers/N at every timer): each boost in a row lasts twice the
        // one before and comes twice as often, up to 16 times; each slice
        // stays the runtime, the longest interruption of the loop.
        let scale = 1u64
            << self
                .watch
                .boosted(s.tid, s.start_ticks, now)
                .saturating_sub(1)
                .min(4);
        let period_ns = (set.period_us * 1_000 / scale).max(set.runtime_us * 2_000);
        let lasts_ns = set.duration_ms * 1_000_000 * scale;
        let deadline = SchedAttr {
            policy: SCHED_DEADLINE,
            flags: 0,
            nice: 0,
            priority: 0,
            runtime_ns: set.runtime_us * 1_000,
            deadline_ns: period_ns,
            period_ns,
        };
        let fifo = SchedAttr {
            policy: SCHED_FIFO,
            flags: 0,
            nice: 0,
            priority: (s.hog_priority + 1).clamp(1, 99),
            runtime_ns: 0,
            deadline_ns: 0,
            period_ns: 0,
        };
        let mut record = ActiveBoost {
            tid: s.tid,
            start_ticks: s.start_ticks,
            name: s.name.clone(),
            cpu: s.cpu,
            previous,
            kind: BoostKind::Deadline,
        };
        // The thread the watch saw, not another that took its id since.
        if procfs::start_ticks(self.sys, s.tid) != Some(s.start_ticks) {
            return false;
        }
        // The record goes to the state file first: a guard killed right
        // after the change leaves what undoes it.
        self.state.active.push(record.clone());
        self.write_state(now);
        let (kind, attr) = match self.sys.set_sched_attr(s.tid, &deadline) {
            Ok(()) => (BoostKind::Deadline, deadline),
            Err(e) if e.kind == ErrorKind::Refused => match self.sys.set_sched_attr(s.tid, &fifo) {
                Ok(()) => (BoostKind::Fifo, fifo),
                Err(_) => return self.boost_failed(s.tid),
            },
            Err(_) => return self.boost_failed(s.tid),
        };
        record.kind = kind;
        if let Some(a) = self.state.active.iter_mut().find(|a| a.tid == s.tid) {
            a.kind = kind;
        }
        let window = (kind == BoostKind::Fifo).then_some((true, now + set.runtime_us * 1_000));
        self.boosts.insert(
            s.tid,
            Boost {
                record,
                attr,
                waited_ns: s.waited_ns,
                exec_at_start: s.exec_ns,
                ends_ns: now + lasts_ns,
                period_ns,
                window,
            },
        );
        self.state.boosts += 1;
        self.state.fifo_boosts += u64::from(kind == BoostKind::Fifo);
        true
    }

    fn boost_failed(&mut self, tid: i32) -> bool {
        self.state.active.retain(|a| a.tid != tid);
        self.state.failed += 1;
        true
    }

    /// Opens and closes SCHED_FIFO windows and ends boosts that are due.
    fn step_boosts(&mut self, now: u64) -> bool {
        let runtime_ns = self.settings.runtime_us * 1_000;
        let mut due = Vec::new();
        let sys = self.sys;
        for (tid, b) in self.boosts.iter_mut() {
            let period_ns = b.period_ns;
            if now >= b.ends_ns {
                due.push(*tid);
                continue;
            }
            // The thread exited and its id may name another now: the
            // window is neither opened nor closed on that one.
            let window_due = matches!(b.window, Some((true, close)) if now >= close)
                || matches!(b.window, Some((false, open)) if now >= open);
            if window_due && procfs::start_ticks(sys, *tid) != Some(b.record.start_ticks) {
                due.push(*tid);
                continue;
            }
            match b.window {
                Some((true, close)) if now >= close => {
                    let _ = self.sys.set_sched_attr(*tid, &b.record.previous);
                    b.window = Some((false, close - runtime_ns + period_ns));
                }
                Some((false, open)) if now >= open => {
                    let _ = self.sys.set_sched_attr(*tid, &b.attr);
                    b.window = Some((true, now + runtime_ns));
                }
                _ => {}
            }
        }
        for tid in &due {
            self.finish(*tid, now);
        }
        !due.is_empty()
    }

    /// Ends a boost: the thread's own scheduling back, what it ran counted.
    fn finish(&mut self, tid: i32, _now: u64) {
        let Some(b) = self.boosts.remove(&tid) else {
            return;
        };
        let same = procfs::start_ticks(self.sys, tid) == Some(b.record.start_ticks);
        if same {
            let _ = self.sys.set_sched_attr(tid, &b.record.previous);
        }
        let pid = self
            .sys
            .read(&format!("proc/{tid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Tgid:"))
                    .and_then(|v| v.trim().parse().ok())
            })
            .unwrap_or(tid);
        let ran_ns = self
            .sample(&Candidate {
                pid,
                tid,
                bound: None,
            })
            .filter(|_| same)
            .map_or(0, |s| s.exec_ns.saturating_sub(b.exec_at_start));
        let ran_us = ran_ns / 1_000;
        self.state.active.retain(|a| a.tid != tid);
        self.state.ran_us += ran_us;
        self.state.longest_us = self.state.longest_us.max(ran_us);
        self.state.recent.push(BoostRecord {
            tid,
            name: b.record.name,
            cpu: b.record.cpu,
            waited_ms: b.waited_ns / 1_000_000,
            ran_us,
            kind: b.record.kind,
        });
        let over = self.state.recent.len().saturating_sub(RECENT);
        self.state.recent.drain(..over);
        self.watch.forget(tid);
    }

    fn write_state(&mut self, now: u64) {
        self.state.updated_ns = now;
        if let Ok(text) = serde_json::to_string_pretty(&self.state) {
            let _ = self.sys.write_config(STATE_FILE, &text, true);
        }
        self.written_ns = now;
    }
}
