//! What keeps a shielded CPU's kernel work running when a real-time task
//! never sleeps there, read from the running kernel.
//!
//! Per-CPU kernel work (vmstat refresh, LRU drains, workqueue flushes, RCU
//! callbacks and, on PREEMPT_RT, the timer and RCU threads) waits behind a
//! SCHED_FIFO busy loop unless something gives it CPU time:
//! - RT throttling (`sched_rt_runtime_us`, 950000 of 1000000 µs by
//!   default) holds every real-time task back for the rest of each period,
//!   which lets ordinary tasks (kworkers) run, but not the real-time kernel
//!   threads of PREEMPT_RT (`rcuc/N`, `ktimers/N`), held back with the loop;
//! - the fair deadline server (Linux 6.12) gives ordinary tasks 50 ms a
//!   second whatever real-time tasks do, with or without throttling; it too
//!   leaves PREEMPT_RT's real-time kernel threads out.
//!
//! So kernel work can starve on PREEMPT_RT always, and elsewhere when
//! throttling is off on a kernel without the fair server (Debian 12's 6.1
//! with `--tune`). The fair server shows only in debugfs
//! (`sched/fair_server/`); where debugfs is not mounted, the kernel release
//! decides, and the report says it was inferred.

use serde::{Deserialize, Serialize};

use crate::sys::Sys;

pub use super::stalld::RT_RUNTIME;
/// `sched_rt_period_us`.
pub const RT_PERIOD: &str = "proc/sys/kernel/sched_rt_period_us";
/// The fair deadline server's debugfs directory (Linux 6.12 and later).
pub const FAIR_SERVER_DIR: &str = "sys/kernel/debug/sched/fair_server";
/// debugfs' scheduler directory: present when debugfs is mounted.
const DEBUGFS_SCHED: &str = "sys/kernel/debug/sched";

/// Whether the kernel has the fair deadline server, and how that is known.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FairServer {
    /// `sys/kernel/debug/sched/fair_server` exists.
    Present,
    /// debugfs is mounted and has no such directory.
    Absent,
    /// debugfs is not mounted; the release is 6.12 or later.
    Inferred,
    /// debugfs is not mounted; the release is older than 6.12 (or unknown).
    #[default]
    InferredAbsent,
}

impl FairServer {
    /// Whether the kernel has it (as read or as inferred).
    pub fn present(self) -> bool {
        matches!(self, FairServer::Present | FairServer::Inferred)
    }
}

/// The kernel's own protections of per-CPU kernel work, as read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelWork {
    /// `uname -r`.
    pub release: String,
    /// A PREEMPT_RT kernel (`uname -v` says `PREEMPT_RT`).
    pub preempt_rt: bool,
    /// The fair deadline server.
    pub fair_server: FairServer,
    /// `sched_rt_runtime_us` (-1: throttling off); `None` if unreadable.
    pub rt_runtime_us: Option<i64>,
    /// `sched_rt_period_us`.
    pub rt_period_us: Option<i64>,
    /// The installed stalld (absolute path), which the guard runs as its
    /// engine where the shield asks for `auto` or `stalld`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stalld: Option<String>,
    /// The scheduler features file (relative to the root) and whether it
    /// reads `HRTICK_DL` on (stalld turns it on; the shield's plan does it
    /// first, journaled); `None` without debugfs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hrtick_dl: Option<(String, bool)>,
    /// A stalld already running that no guard started (`stalld.service`):
    /// the guard never starts a second one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stalld_running: Option<super::stalld::Foreign>,
}

/// Why per-CPU kernel work on a shielded CPU can starve behind a
/// real-time task that never sleeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Starvable {
    /// PREEMPT_RT: the timer and RCU threads are real-time themselves.
    PreemptRt,
    /// RT throttling is off and the kernel has no fair server.
    NoThrottlingNoFairServer,
}

/// What keeps the shielded CPUs' kernel work running behind a real-time
/// task that never sleeps there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum Protection {
    /// cpushield's starvation guard (the kernel does not protect it).
    Guard {
        /// Why the kernel does not.
        why: Starvable,
        /// The guard's settings.
        settings: super::Settings,
    },
    /// The guard was asked for where the kernel protects it too.
    GuardAndKernel {
        /// The guard's settings.
        settings: super::Settings,
    },
    /// The kernel's fair deadline server.
    FairServer {
        /// Inferred from the release (debugfs not mounted).
        inferred: bool,
    },
    /// RT throttling.
    Throttling {
        /// `sched_rt_runtime_us`.
        runtime_us: i64,
        /// `sched_rt_period_us`.
        period_us: i64,
    },
    /// Nothing: the guard is off where kernel work can starve.
    Nothing {
        /// Why the kernel does not protect it.
        why: Starvable,
    },
}

impl Protection {
    /// What protects kernel work with throttling at `rt_runtime_us`
    /// (after the shield's knobs) and the guard at `guard` (`None`: off).
    pub fn of(
        kernel: &KernelWork,
        rt_runtime_us: Option<i64>,
        guard: Option<super::Settings>,
    ) -> Protection {
        match (kernel.starvable(rt_runtime_us), guard) {
            (Some(why), Some(settings)) => Protection::Guard { why, settings },
            (Some(why), None) => Protection::Nothing { why },
            (None, Some(settings)) => Protection::GuardAndKernel { settings },
            (None, None) if kernel.fair_server.present() => Protection::FairServer {
                inferred: kernel.fair_server == FairServer::Inferred,
            },
            (None, None) => Protection::Throttling {
                runtime_us: rt_runtime_us.unwrap_or(950_000),
                period_us: kernel.rt_period_us.unwrap_or(1_000_000),
            },
        }
    }

    /// Whether nothing protects it.
    pub fn is_nothing(&self) -> bool {
        matches!(self, Protection::Nothing { .. })
    }
}

impl KernelWork {
    /// Reads the running kernel's facts. Never fails: what cannot be read
    /// is left at its default and said so by the fields.
    pub fn read(sys: &Sys) -> KernelWork {
        let release = sys
            .read_trimmed("proc/sys/kernel/osrelease")
            .unwrap_or_default();
        let version = sys
            .read_trimmed("proc/sys/kernel/version")
            .unwrap_or_default();
        let fair_server = if sys.exists(FAIR_SERVER_DIR) {
            FairServer::Present
        } else if sys.exists(DEBUGFS_SCHED) {
            FairServer::Absent
        } else if release_at_least(&release, (6, 12)) {
            FairServer::Inferred
        } else {
            FairServer::InferredAbsent
        };
        let number = |rel| {
            sys.read_trimmed(rel)
                .ok()
                .and_then(|v| v.parse::<i64>().ok())
        };
        let hrtick_dl = super::stalld::SCHED_FEATURES.iter().find_map(|rel| {
            let features = sys.read(rel).ok()?;
            let words: Vec<&str> = features.split_whitespace().collect();
            // Kernels before HRTICK_DL have only HRTICK (stalld then sets that).
            let on = words.contains(&"HRTICK_DL")
                || (!words.contains(&"NO_HRTICK_DL") && words.contains(&"HRTICK"));
            Some((rel.to_string(), on))
        });
        KernelWork {
            preempt_rt: is_preempt_rt(&version),
            fair_server,
            rt_runtime_us: number(RT_RUNTIME),
            rt_period_us: number(RT_PERIOD),
            stalld: super::stalld::find(sys).map(|p| format!("/{p}")),
            hrtick_dl,
            stalld_running: super::stalld::running_foreign(sys),
            release,
        }
    }

    /// Whether RT throttling is on, for `rt_runtime_us` (the value now,
    /// or the one a shield is about to write).
    pub fn throttling(rt_runtime_us: Option<i64>) -> bool {
        rt_runtime_us.is_none_or(|v| v >= 0)
    }

    /// Whether kernel work can starve with throttling at `rt_runtime_us`.
    pub fn starvable(&self, rt_runtime_us: Option<i64>) -> Option<Starvable> {
        if self.preempt_rt {
            Some(Starvable::PreemptRt)
        } else if !Self::throttling(rt_runtime_us) && !self.fair_server.present() {
            Some(Starvable::NoThrottlingNoFairServer)
        } else {
            None
        }
    }

    /// [`starvable`](Self::starvable) with throttling as it is now.
    pub fn starvable_now(&self) -> Option<Starvable> {
        self.starvable(self.rt_runtime_us)
    }
}

/// Whether `uname -v` names a PREEMPT_RT build (the kernel's own
/// `init/Makefile` puts `PREEMPT_RT` there).
pub fn is_preempt_rt(version: &str) -> bool {
    version.split_whitespace().any(|w| w == "PREEMPT_RT")
}

/// Whether the running kernel is a PREEMPT_RT build, read alone (without
/// the rest of [`KernelWork::read`], which also scans the processes for a
/// stalld).
pub fn running_preempt_rt(sys: &Sys) -> bool {
    sys.read_trimmed("proc/sys/kernel/version")
        .is_ok_and(|v| is_preempt_rt(&v))
}

/// Whether release `6.12.3-amd64` is at least `(major, minor)`.
pub fn release_at_least(release: &str, (major, minor): (u32, u32)) -> bool {
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(a), Some(b)) => (a, b) >= (major, minor),
        _ => false,
    }
}

impl Protection {
    /// What protects the shielded CPUs' kernel work, and what it costs,
    /// in words.
    pub fn text(&self) -> String {
        let p = self;
        let guard = |s: &super::Settings| {
            if s.engine == super::Engine::Stalld {
                let p = super::stalld::Params::of(s);
                return format!(
                "stalld (installed here) watches them, run by the starvation guard from the housekeeping CPUs: a thread runnable for {} s without running gets {} µs every {} ms for {} s, at most {} µs taken from the real-time task per boost (stalld's units and ranges; --guard-engine=cpushield for the guard's own); RT throttling off while it runs, as stalld requires ('cpushield status' counts the boosts)",
                p.threshold_s,
                p.runtime_ns / 1_000,
                p.period_ns / 1_000_000,
                p.duration_s,
                p.boost_cost_ns() / 1_000,
            );
            }
            format!(
            "the starvation guard watches them from the housekeeping CPUs: a thread runnable for {} s without running gets {} µs every {} ms for {} ms (twice as long and twice as often each time it starves again, up to 16 times), at most {} µs taken from the real-time task per boost of {} ms ('cpushield status' counts the boosts)",
            seconds(s.threshold_ms),
            s.runtime_us,
            seconds(s.period_us),
            s.duration_ms,
            s.runtime_us * (s.duration_ms * 1000).div_ceil(s.period_us),
            s.duration_ms
        )
        };
        match p {
        Protection::Guard { why, settings } => format!(
            "kernel work on the shielded CPUs (kworkers, RCU, timers) can starve behind a real-time task that never sleeps ({}): {}",
            why.text(),
            guard(settings)
        ),
        Protection::GuardAndKernel { settings } => format!(
            "kernel work on the shielded CPUs is protected by the kernel, and {} (--guard=on)",
            guard(settings)
        ),
        Protection::FairServer { inferred } => format!(
            "kernel work on the shielded CPUs is protected by the kernel's fair deadline server (ordinary tasks get 50 ms a second, also behind a real-time task that never sleeps){}; no guard needed",
            if *inferred { " (inferred from the kernel release: debugfs is not mounted)" } else { "" }
        ),
        Protection::Throttling { runtime_us, period_us } => format!(
            "kernel work on the shielded CPUs is protected by RT throttling: real-time tasks run at most {} ms of every {} ms, so a task that never sleeps loses {} ms of each; no guard needed",
            seconds((*runtime_us).max(0) as u64),
            seconds((*period_us).max(0) as u64),
            seconds((period_us - runtime_us).max(0) as u64)
        ),
        Protection::Nothing { why } => format!(
            "WARNING: nothing protects kernel work on the shielded CPUs ({}): a real-time task that never sleeps there hangs whatever waits for that work (sysctl writes, sync, service starts); leave out --guard=off",
            why.text()
        ),
    }
    }
}

impl Starvable {
    /// Why kernel work can starve, in words.
    pub fn text(self) -> &'static str {
        let why = self;
        match why {
            Starvable::PreemptRt => {
                "a PREEMPT_RT kernel: its timer and RCU threads are real-time tasks below the loop"
            }
            Starvable::NoThrottlingNoFairServer => {
                "RT throttling is off and this kernel has no fair deadline server"
            }
        }
    }
}

/// A thousandth of `n` without trailing zeros: ms as s, µs as ms
/// (`1500` → `1.5`, `100000` → `100`).
fn seconds(n: u64) -> String {
    let s = format!("{:.3}", n as f64 / 1000.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(preempt_rt: bool, fair_server: FairServer, rt: i64) -> KernelWork {
        KernelWork {
            release: "6.1.0-30-cloud-amd64".into(),
            preempt_rt,
            fair_server,
            rt_runtime_us: Some(rt),
            rt_period_us: Some(1_000_000),
            stalld: None,
            hrtick_dl: None,
            stalld_running: None,
        }
    }

    #[test]
    fn preempt_rt_is_read_from_the_version_string() {
        assert!(is_preempt_rt(
            "#1 SMP PREEMPT_RT Debian 6.12.118-1 (2026-01-01)"
        ));
        assert!(!is_preempt_rt("#1 SMP PREEMPT_DYNAMIC Debian 6.12.118-1"));
        assert!(!is_preempt_rt("#1 SMP PREEMPT_RTX"));
    }

    #[test]
    fn releases_compare_by_major_and_minor() {
        assert!(release_at_least("6.12.0-1-amd64", (6, 12)));
        assert!(release_at_least("7.2.1", (6, 12)));
        assert!(!release_at_least("6.1.0-30-cloud-amd64", (6, 12)));
        assert!(!release_at_least("6.9", (6, 12)));
        assert!(!release_at_least("garbage", (6, 12)));
    }

    #[test]
    fn kernel_work_starves_on_preempt_rt_or_without_throttling_and_fair_server() {
        use FairServer::*;
        // Debian 12 (6.1): throttling protects, turning it off does not.
        assert_eq!(facts(false, Absent, 950_000).starvable_now(), None);
        assert_eq!(
            facts(false, Absent, -1).starvable_now(),
            Some(Starvable::NoThrottlingNoFairServer)
        );
        assert_eq!(
            facts(false, InferredAbsent, 950_000).starvable(Some(-1)),
            Some(Starvable::NoThrottlingNoFairServer)
        );
        // Debian 13 (6.12): the fair server protects either way.
        assert_eq!(facts(false, Present, -1).starvable_now(), None);
        assert_eq!(facts(false, Inferred, -1).starvable_now(), None);
        // PREEMPT_RT: its real-time kernel threads starve in any case.
        assert_eq!(
            facts(true, Present, 950_000).starvable_now(),
            Some(Starvable::PreemptRt)
        );
    }
}
