//! The other programs that own part of what a shield touches, read from the
//! machine: systemd (the cgroup tree), irqbalance (IRQ affinities) and
//! tuned (CPU and IRQ pinning). Read-only; the plan decides what to do.

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;
use crate::sys::procfs::{self, Thread};
use crate::sys::Sys;

use crate::shield::irqbalance::{self, Irqbalance};

/// What the owners of this machine are.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owners {
    /// systemd is the init system (`/run/systemd/system` exists).
    pub systemd: bool,
    /// Its version (`systemctl --version`), when it is.
    #[serde(default)]
    pub systemd_version: Option<u32>,
    /// irqbalance, when installed as a unit or running.
    pub irqbalance: Option<Irqbalance>,
    /// tuned, when it has an active profile.
    pub tuned: Option<Tuned>,
}

/// tuned's active profile.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tuned {
    /// `/etc/tuned/active_profile` (profiles may be combined with spaces).
    pub profile: String,
    /// tuned runs.
    pub running: bool,
    /// What in the profile pins CPUs or IRQs (`isolated_cores`,
    /// `banned_cpus`, a cpu-partitioning or realtime profile), if anything.
    pub pins: Vec<String>,
}

impl Owners {
    /// Reads the owners; `threads` is the snapshot's thread list (for the
    /// irqbalance and tuned processes).
    pub fn read(sys: &Sys, threads: &[Thread], boot_isolated: &CpuSet) -> Owners {
        let systemd = sys.systemd_booted();
        let irqbalance = irqbalance::read(sys, threads, boot_isolated, systemd);
        Owners {
            systemd,
            systemd_version: systemd.then(|| sys.systemd_version()).flatten(),
            irqbalance,
            tuned: read_tuned(sys, threads),
        }
    }
}

fn read_tuned(sys: &Sys, threads: &[Thread]) -> Option<Tuned> {
    let profile = sys.read_trimmed("etc/tuned/active_profile").ok()?;
    if profile.is_empty() {
        return None;
    }
    let mut pins = Vec::new();
    for name in profile.split_whitespace() {
        if name.contains("cpu-partitioning") || name.contains("realtime") {
            pins.push(format!("profile {name}"));
        }
        for dir in ["etc/tuned", "usr/lib/tuned", "usr/lib/tuned/profiles"] {
            let Ok(conf) = sys.read(&format!("{dir}/{name}/tuned.conf")) else {
                continue;
            };
            for key in ["isolated_cores", "banned_cpus", "cpu_affinity"] {
                if conf
                    .lines()
                    .any(|l| l.trim_start().starts_with(key) && !l.trim_start().starts_with('#'))
                {
                    pins.push(format!("{name}: {key}"));
                }
            }
            break;
        }
    }
    Some(Tuned {
        profile,
        running: procfs::leader(threads, "tuned").is_some(),
        pins,
    })
}
