//! stalld as the guard's engine, where it is installed: the guard process
//! runs `stalld` in the foreground as its child, with the shield's CPUs
//! and the guard's settings in stalld's units and ranges, counts the
//! starvations it reports, and stops it (SIGTERM, then SIGKILL) when the
//! guard stops, so the shield's lifecycle (`on`, `status`, `off`) is the
//! same whichever engine boosts.
//!
//! stalld changes two kernel settings by itself, and cpushield records
//! every change before it is made, so neither is left to it: it is started
//! with `-S` only once RT throttling reads -1 (a journaled write of the
//! shield's plan), so it never writes `sched_rt_runtime_us`; and the plan
//! turns on the `HRTICK_DL` scheduler feature it would otherwise turn on
//! (and never turn off) before the guard starts, journaled with
//! `NO_HRTICK_DL` as its undo.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};

use serde::{Deserialize, Serialize};

use super::Settings;
use crate::cpulist::CpuSet;
use crate::sys::{syscalls, Sys};

/// `sched_rt_runtime_us`.
pub const RT_RUNTIME: &str = "proc/sys/kernel/sched_rt_runtime_us";

/// Where stalld is looked for, relative to the root, in this order.
pub const PATHS: [&str; 6] = [
    "usr/sbin/stalld",
    "usr/bin/stalld",
    "usr/local/sbin/stalld",
    "usr/local/bin/stalld",
    "sbin/stalld",
    "bin/stalld",
];

/// The scheduler features file (debugfs mounted at /sys/kernel/debug),
/// newer kernels first.
pub const SCHED_FEATURES: [&str; 2] = [
    "sys/kernel/debug/sched/features",
    "sys/kernel/debug/sched_features",
];

/// The installed stalld, relative to the root, if any.
pub fn find(sys: &Sys) -> Option<&'static str> {
    PATHS.iter().copied().find(|p| sys.exists(p))
}

/// stalld's own defaults (its README and `stalld -h`): starving after
/// 60 s, 20 µs every second for 3 s.
pub const DEFAULT_THRESHOLD_S: u64 = 60;

/// A stalld that was running before the shield, not the guard's child:
/// `stalld.service` on RHEL and Fedora, or one started by hand, as the
/// kernel shows its command line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Foreign {
    /// Its process id.
    pub pid: i32,
    /// The systemd unit whose cgroup holds it (`stalld.service`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// The CPUs it watches (`-c`); `None`: all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<CpuSet>,
    /// How long a thread starves before it boosts it (`-t`), s.
    pub threshold_s: u64,
    /// Whether it only logs (`-l`): it boosts nothing.
    #[serde(default)]
    pub log_only: bool,
}

impl Foreign {
    /// Whether it watches every CPU of `cpus`.
    pub fn covers(&self, cpus: &CpuSet) -> bool {
        !self.log_only && self.cpus.as_ref().is_none_or(|c| cpus.is_subset(c))
    }
}

/// What a stalld command line (`argv` after the program) sets of
/// [`Foreign`]'s fields: `-c/--cpu`, `-t/--starving_threshold` and
/// `-l/--log_only`, as `-t 20`, `-t20`, `--starving_threshold=20` or
/// `--starving_threshold 20`.
pub fn parse_foreign_args(args: &[String]) -> (Option<CpuSet>, u64, bool) {
    let mut cpus = None;
    let mut threshold = DEFAULT_THRESHOLD_S;
    let mut log_only = false;
    let mut it = args.iter().peekable();
    while let Some(arg) = it.next() {
        // `-t20`: a short option and its value, split after the option's
        // character whatever bytes the command line holds after it.
        let short = arg
            .strip_prefix('-')
            .filter(|rest| !rest.starts_with('-'))
            .and_then(|rest| rest.chars().next().map(|c| (c, &rest[c.len_utf8()..])))
            .filter(|(_, value)| !value.is_empty());
        let (key, inline) = match (arg.split_once('='), short) {
            (Some((k, v)), _) if k.starts_with("--") => (k.to_string(), Some(v.to_string())),
            (_, Some((c, value))) => (format!("-{c}"), Some(value.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = || inline.clone().or_else(|| it.next().cloned());
        match key.as_str() {
            "-c" | "--cpu" => cpus = value().and_then(|v| CpuSet::parse_list(&v).ok()),
            "-t" | "--starving_threshold" => {
                if let Some(t) = value().and_then(|v| v.parse().ok()) {
                    threshold = t;
                }
            }
            "-l" | "--log_only" => log_only = true,
            _ => {}
        }
    }
    (cpus, threshold, log_only)
}

/// The stalld running on this machine that the guard did not start (a
/// `stalld` process whose parent is not `cpushield`), if any.
pub fn running_foreign(sys: &Sys) -> Option<Foreign> {
    for pid in crate::sys::procfs::list_pids(sys).ok()? {
        let Ok(comm) = sys.read_trimmed(&format!("proc/{pid}/comm")) else {
            continue;
        };
        if comm != "stalld" {
            continue;
        }
        let Ok(stat) = sys.read(&format!("proc/{pid}/stat")) else {
            continue;
        };
        let parent = crate::sys::procfs::split_stat(&stat)
            .and_then(|(_, f)| crate::sys::procfs::stat_field::<i32>(&f, 4));
        let parent_comm = parent.and_then(|p| sys.read_trimmed(&format!("proc/{p}/comm")).ok());
        if parent_comm.as_deref() == Some("cpushield") {
            continue;
        }
        let args: Vec<String> = sys
            .read(&format!("proc/{pid}/cmdline"))
            .unwrap_or_default()
            .split('\0')
            .skip(1)
            .filter(|a| !a.is_empty())
            .map(str::to_string)
            .collect();
        let unit = sys
            .read(&format!("proc/{pid}/cgroup"))
            .ok()
            .and_then(|text| {
                text.lines()
                    .find_map(|l| l.strip_prefix("0::"))
                    .and_then(|cg| cg.rsplit('/').next())
                    .filter(|u| u.ends_with(".service"))
                    .map(str::to_string)
            });
        let (cpus, threshold_s, log_only) = parse_foreign_args(&args);
        return Some(Foreign {
            pid,
            unit,
            cpus,
            threshold_s,
            log_only,
        });
    }
    None
}

/// The guard's settings in stalld's units and ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// `-t`: starving after, s.
    pub threshold_s: u64,
    /// `-r`: CPU time per period, ns.
    pub runtime_ns: u64,
    /// `-p`: the period, ns.
    pub period_ns: u64,
    /// `-d`: how long a boost lasts, s.
    pub duration_s: u64,
}

impl Params {
    /// `settings` rounded into stalld's units and ranges: threshold and
    /// duration in whole seconds, at least 1; runtime 8 µs to 1 ms; period
    /// 200 ms to 4 s; the duration at least a period and at most the
    /// threshold.
    pub fn of(settings: &Settings) -> Params {
        let threshold_s = settings.threshold_ms.div_ceil(1_000).clamp(1, 3_600);
        let period_ns = (settings.period_us * 1_000).clamp(200_000_000, 4_000_000_000);
        Params {
            threshold_s,
            runtime_ns: (settings.runtime_us * 1_000).clamp(8_000, 1_000_000),
            period_ns,
            duration_s: settings
                .duration_ms
                .div_ceil(1_000)
                .clamp(period_ns.div_ceil(1_000_000_000), 60)
                .min(threshold_s),
        }
    }

    /// CPU time one boost takes from the real-time task at most, ns.
    pub fn boost_cost_ns(&self) -> u64 {
        self.runtime_ns * (self.duration_s * 1_000_000_000).div_ceil(self.period_ns)
    }
}

/// stalld's arguments for watching `cpus` with `settings` ([`Params`]), in
/// the foreground (`-f`), its reports on standard error (`-v`), never
/// touching RT throttling (`-S`: it refuses to start unless it is off).
pub fn args(cpus: &CpuSet, settings: &Settings, pidfile: &str) -> Vec<String> {
    let p = Params::of(settings);
    vec![
        "-f".into(),
        "-v".into(),
        "-S".into(),
        "-c".into(),
        cpus.to_string(),
        "-t".into(),
        p.threshold_s.to_string(),
        "-r".into(),
        p.runtime_ns.to_string(),
        "-p".into(),
        p.period_ns.to_string(),
        "-d".into(),
        p.duration_s.to_string(),
        format!("--pidfile={pidfile}"),
    ]
}

/// What one line of stalld's output says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// `stalld: <comm>-<pid> starved on CPU <n> for <s> seconds`: a
    /// starvation it boosts (counted once, however many periods a
    /// SCHED_FIFO boost repeats).
    Starved {
        /// The thread's name.
        name: String,
        /// Its id.
        tid: i32,
        /// The CPU.
        cpu: u32,
        /// How long it had waited, s.
        seconds: u64,
    },
    /// `stalld: boosted pid <pid> (<comm>) (cpu <n>) using SCHED_DEADLINE|SCHED_FIFO`.
    Boosted {
        /// The thread's id.
        tid: i32,
        /// SCHED_FIFO rather than SCHED_DEADLINE.
        fifo: bool,
    },
    /// `... failed to boost pid <pid>: ...`.
    Failed,
}

/// Reads one line of stalld's output. Names are data: the name is what
/// stands between the prefix and the last `-<pid> starved on CPU`, so a
/// thread named like a stalld message changes nothing but its own name.
pub fn parse_line(line: &str) -> Option<Event> {
    let rest = line.trim_end().strip_prefix("stalld: ")?;
    if rest.contains("failed to boost pid ") {
        return Some(Event::Failed);
    }
    if let Some(after) = rest.strip_prefix("boosted pid ") {
        let (tid, tail) = after.split_once(' ')?;
        let tid: i32 = tid.parse().ok()?;
        // stalld's own start-up probe boosts itself (pid 0, no CPU).
        if tid <= 0 || !tail.contains(") (cpu ") {
            return None;
        }
        let fifo = tail.ends_with("using SCHED_FIFO");
        if !fifo && !tail.ends_with("using SCHED_DEADLINE") {
            return None;
        }
        return Some(Event::Boosted { tid, fifo });
    }
    let (who, tail) = rest.rsplit_once(" starved on CPU ")?;
    let (name, tid) = who.rsplit_once('-')?;
    let (cpu, tail) = tail.split_once(" for ")?;
    let seconds = tail.strip_suffix(" seconds")?;
    Some(Event::Starved {
        name: name.to_string(),
        tid: tid.parse().ok()?,
        cpu: cpu.parse().ok()?,
        seconds: seconds.parse().ok()?,
    })
}

/// stalld as the guard's engine, as `status` reads it in the guard's state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct EngineState {
    /// The executable.
    pub path: String,
    /// Its process id while it runs.
    pub pid: Option<i32>,
    /// Its command line as the kernel reads it back (`/proc/PID/cmdline`).
    pub command_line: Vec<String>,
    /// Why it is not running: not started yet (RT throttling not yet
    /// off), or how it ended; the guard's own loop boosts meanwhile.
    pub waiting: Option<String>,
    /// Times it was started.
    pub starts: u64,
}

/// A running stalld and the lines of its output.
pub struct Running {
    child: Child,
    lines: Receiver<String>,
}

impl Running {
    /// Starts `path` (absolute) with `args`, its standard error read line by line.
    pub fn start(path: &str, args: &[String]) -> std::io::Result<Running> {
        let mut child = Command::new(path)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let stderr = child
            .stderr
            .take()
            .ok_or_else(|| std::io::Error::other("stalld's standard error was not captured"))?;
        let (tx, lines) = mpsc::channel();
        // Read as bytes, each line lossily: stalld prints thread names,
        // and a name that is not UTF-8 must not end the reading (stalld
        // would then block on a full pipe and boost no more).
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stderr);
            let mut line = Vec::new();
            while matches!(reader.read_until(b'\n', &mut line), Ok(n) if n > 0) {
                let text = String::from_utf8_lossy(&line)
                    .trim_end_matches('\n')
                    .to_string();
                if tx.send(text).is_err() {
                    break;
                }
                line.clear();
            }
        });
        Ok(Running { child, lines })
    }

    /// Its process id.
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// The lines it wrote since the last call.
    pub fn drain(&self) -> Vec<String> {
        self.lines.try_iter().collect()
    }

    /// How it ended, if it did.
    pub fn ended(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(format!("stalld ended: {status}")),
            Ok(None) => None,
            Err(e) => Some(format!("stalld: {e}")),
        }
    }

    /// Stops it: SIGTERM (it ends its boosts and exits), SIGKILL after `grace`.
    pub fn stop(mut self, grace: std::time::Duration) {
        let _ = syscalls::signal_process(self.pid(), nix::sys::signal::Signal::SIGTERM);
        let t = std::time::Instant::now();
        while t.elapsed() < grace {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The guard's side of stalld: starts it once RT throttling is off,
/// folds what it reports into the guard's state, starts it again (after
/// [`RETRY_NS`]) when it ended, stops it with the guard.
pub struct Supervisor {
    /// The executable, relative to the root.
    path: &'static str,
    running: Option<Running>,
    /// The last line it wrote: why it ended, when it did.
    last_line: Option<String>,
    /// When it may be started again, CLOCK_MONOTONIC ns.
    retry_at: u64,
}

/// RT throttling, relative to the root.
/// Where stalld writes its pid (it never removes the file; the guard does).
const PIDFILE: &str = "run/cpushield/stalld.pid";
/// Wait before starting stalld again after it ended, ns.
pub const RETRY_NS: u64 = 5_000_000_000;

impl Supervisor {
    /// The supervisor of the stalld at `path` (from [`find`]), not started.
    pub fn new(path: &'static str) -> Supervisor {
        Supervisor {
            path,
            running: None,
            last_line: None,
            retry_at: 0,
        }
    }

    /// Whether stalld runs (the guard's own loop then does not scan).
    pub fn runs(&self) -> bool {
        self.running.is_some()
    }

    /// One pass: starts stalld when it may, reads what it wrote, notices
    /// when it ended. Returns whether `state` changed.
    pub fn tend(
        &mut self,
        sys: &Sys,
        cpus: &CpuSet,
        settings: &Settings,
        state: &mut super::GuardState,
        now: u64,
    ) -> bool {
        let engine = state.stalld.get_or_insert_with(|| EngineState {
            path: format!("/{}", self.path),
            ..EngineState::default()
        });
        let Some(run) = &mut self.running else {
            if now < self.retry_at {
                return false;
            }
            let throttling = sys.read_trimmed(RT_RUNTIME).unwrap_or_default();
            if throttling != "-1" {
                let why = format!("RT throttling is on (sched_rt_runtime_us {throttling}): stalld runs only with it off; cpushield's own loop boosts meanwhile");
                let changed = engine.waiting.as_deref() != Some(why.as_str());
                engine.waiting = Some(why);
                return changed;
            }
            let path = sys.path(self.path).to_string_lossy().into_owned();
            let pidfile = sys.path(PIDFILE).to_string_lossy().into_owned();
            match Running::start(&path, &args(cpus, settings, &pidfile)) {
                Ok(run) => {
                    engine.pid = Some(run.pid());
                    engine.command_line = sys
                        .read(&format!("proc/{}/cmdline", run.pid()))
                        .map(|c| {
                            c.split('\0')
                                .filter(|a| !a.is_empty())
                                .map(String::from)
                                .collect()
                        })
                        .unwrap_or_default();
                    engine.waiting = None;
                    engine.starts += 1;
                    self.running = Some(run);
                }
                Err(e) => {
                    engine.waiting = Some(format!(
                        "could not start {path}: {e}; cpushield's own loop boosts"
                    ));
                    self.retry_at = now + RETRY_NS;
                }
            }
            return true;
        };
        let mut changed = false;
        for line in run.drain() {
            changed |= fold(state, &line);
            self.last_line = Some(line);
        }
        if let Some(how) = run.ended() {
            let engine = state.stalld.get_or_insert_with(EngineState::default);
            engine.pid = None;
            engine.waiting = Some(match &self.last_line {
                Some(last) => format!("{how} (its last line: {last:?}); cpushield's own loop boosts until it runs again"),
                None => format!("{how}; cpushield's own loop boosts until it runs again"),
            });
            self.running = None;
            self.retry_at = now + RETRY_NS;
            changed = true;
        }
        changed
    }

    /// Stops stalld, if it runs, and removes its pid file.
    pub fn stop(&mut self, sys: &Sys) {
        if let Some(run) = self.running.take() {
            run.stop(std::time::Duration::from_secs(2));
        }
        let _ = std::fs::remove_file(sys.path(PIDFILE));
    }
}

/// Folds one line of stalld's output into the guard's counters: a
/// starvation is a boost (its record kept among the recent), a SCHED_FIFO
/// boost of the thread last recorded marks it so. Returns whether anything
/// changed.
fn fold(state: &mut super::GuardState, line: &str) -> bool {
    use super::{BoostKind, BoostRecord, RECENT};
    match parse_line(line) {
        Some(Event::Starved {
            name,
            tid,
            cpu,
            seconds,
        }) => {
            state.boosts += 1;
            state.recent.push(BoostRecord {
                tid,
                name,
                cpu,
                waited_ms: seconds * 1_000,
                ran_us: 0,
                kind: BoostKind::Deadline,
            });
            let over = state.recent.len().saturating_sub(RECENT);
            state.recent.drain(..over);
            true
        }
        Some(Event::Boosted { tid, fifo: true }) => match state.recent.last_mut() {
            Some(r) if r.tid == tid && r.kind == BoostKind::Deadline => {
                r.kind = BoostKind::Fifo;
                state.fifo_boosts += 1;
                true
            }
            _ => false,
        },
        Some(Event::Failed) => {
            state.failed += 1;
            true
        }
        Some(Event::Boosted { fifo: false, .. }) | None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn a_foreign_stalld_command_line_is_read_in_each_of_its_forms() {
        let cpus = |l: &str| Some(CpuSet::parse_list(l).unwrap());
        assert_eq!(parse_foreign_args(&[]), (None, DEFAULT_THRESHOLD_S, false));
        assert_eq!(
            parse_foreign_args(&strings(&["--systemd", "-c", "2-3", "-t", "20"])),
            (cpus("2-3"), 20, false)
        );
        assert_eq!(
            parse_foreign_args(&strings(&["-c2,3", "-t5", "-l"])),
            (cpus("2-3"), 5, true)
        );
        assert_eq!(
            parse_foreign_args(&strings(&["--cpu=1-3", "--starving_threshold", "30"])),
            (cpus("1-3"), 30, false)
        );
        // Whatever bytes another program put there: read, never a panic.
        assert_eq!(
            parse_foreign_args(&strings(&["-é", "-tx", "-c", "é", "-", "--", "-t"])),
            (None, DEFAULT_THRESHOLD_S, false)
        );
        let f = |cpus, log_only| Foreign {
            pid: 1,
            unit: None,
            cpus,
            threshold_s: 60,
            log_only,
        };
        let shield = CpuSet::parse_list("2-3").unwrap();
        assert!(f(None, false).covers(&shield));
        assert!(f(cpus("1-3"), false).covers(&shield));
        assert!(!f(cpus("3"), false).covers(&shield));
        assert!(!f(None, true).covers(&shield));
    }

    #[test]
    fn settings_are_put_in_stalld_units_and_ranges() {
        let cpus = CpuSet::parse_list("2-3").unwrap();
        let a = args(&cpus, &Settings::default(), "/run/cpushield/stalld.pid");
        let joined = a.join(" ");
        // 1 s threshold, 50 µs runtime, 100 ms period raised to stalld's
        // 200 ms floor, 1 s duration.
        assert_eq!(
            joined,
            "-f -v -S -c 2-3 -t 1 -r 50000 -p 200000000 -d 1 --pidfile=/run/cpushield/stalld.pid"
        );
        let s = Settings {
            threshold_ms: 2_500,
            runtime_us: 2,
            period_us: 9_000_000,
            duration_ms: 60_000,
            ..Settings::default()
        };
        let a = args(&cpus, &s, "p").join(" ");
        assert!(a.contains("-t 3 -r 8000 -p 4000000000 -d 3 "), "{a}");
    }

    #[test]
    fn starvations_and_boosts_are_read_by_their_fields() {
        assert_eq!(
            parse_line("stalld: kworker/3:1-88 starved on CPU 3 for 2 seconds"),
            Some(Event::Starved {
                name: "kworker/3:1".into(),
                tid: 88,
                cpu: 3,
                seconds: 2
            })
        );
        assert_eq!(
            parse_line("stalld: boosted pid 88 (kworker/3:1) (cpu 3) using SCHED_DEADLINE"),
            Some(Event::Boosted {
                tid: 88,
                fifo: false
            })
        );
        assert_eq!(
            parse_line("stalld: boosted pid 91 (x) (cpu 2) using SCHED_FIFO"),
            Some(Event::Boosted {
                tid: 91,
                fifo: true
            })
        );
        assert_eq!(
            parse_line(
                "stalld: boost_with_deadline failed to boost pid 88: Operation not permitted"
            ),
            Some(Event::Failed)
        );
    }

    #[test]
    fn its_own_probe_and_other_lines_are_not_counted() {
        assert_eq!(
            parse_line("stalld: boosted pid 0 (stalld) using SCHED_DEADLINE"),
            None
        );
        assert_eq!(parse_line("stalld: single threaded mode"), None);
        assert_eq!(
            parse_line("kworker/3:1-88 starved on CPU 3 for 2 seconds"),
            None
        );
    }

    #[test]
    fn starvations_count_as_boosts_once_however_often_fifo_repeats() {
        let mut st = crate::guard::GuardState::default();
        for line in [
            "stalld: boosted pid 0 (stalld) using SCHED_DEADLINE",
            "stalld: kworker/3:1-88 starved on CPU 3 for 1 seconds",
            "stalld: boosted pid 88 (kworker/3:1) (cpu 3) using SCHED_FIFO",
            "stalld: boosted pid 88 (kworker/3:1) (cpu 3) using SCHED_FIFO",
            "stalld: rcuc/3-20 starved on CPU 3 for 2 seconds",
            "stalld: boosted pid 20 (rcuc/3) (cpu 3) using SCHED_DEADLINE",
            "stalld: boost_with_deadline failed to boost pid 21: Device or resource busy",
        ] {
            fold(&mut st, line);
        }
        assert_eq!((st.boosts, st.fifo_boosts, st.failed), (2, 1, 1));
        let names: Vec<_> = st
            .recent
            .iter()
            .map(|r| (r.name.as_str(), r.cpu, r.waited_ms))
            .collect();
        assert_eq!(names, [("kworker/3:1", 3, 1_000), ("rcuc/3", 3, 2_000)]);
    }

    #[test]
    fn a_name_that_looks_like_a_message_stays_a_name() {
        assert_eq!(
            parse_line(
                "stalld: a-1 starved on CPU 9 for 9 seconds-42 starved on CPU 3 for 2 seconds"
            ),
            Some(Event::Starved {
                name: "a-1 starved on CPU 9 for 9 seconds".into(),
                tid: 42,
                cpu: 3,
                seconds: 2
            })
        );
    }
}
