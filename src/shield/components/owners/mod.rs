//! The other programs that own part of what a shield touches, read from the
//! machine: systemd (the cgroup tree), irqbalance (IRQ affinities) and
//! tuned (CPU and IRQ pinning). Read-only; the plan decides what to do.

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;
use crate::sys::procfs::{self, Thread};
use crate::sys::Sys;

use crate::shield::components::irqbalance::{self, Irqbalance};

pub mod tuned;

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
    /// The profiles read, in the order tuned applies them: the active
    /// ones and every one they include (`name (included by parent)`).
    #[serde(default)]
    pub chain: Vec<String>,
    /// What the chain sets that cpushield sets too: `profile: [section]
    /// key=value (ours)`.
    #[serde(default)]
    pub overlaps: Vec<String>,
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

/// tuned's active profile and what its include chain sets that a shield
/// cares about; `None` without an active profile.
pub fn read_tuned(sys: &Sys, threads: &[Thread]) -> Option<Tuned> {
    // a line of profile names: read only as a small regular file
    let path = sys.path("etc/tuned/active_profile");
    let profile = crate::input::read_file(&path, 4096)
        .ok()?
        .trim()
        .to_string();
    if profile.is_empty() {
        return None;
    }
    let chain = tuned::read_chain(sys, &profile);
    let mut pins: Vec<String> = profile
        .split_whitespace()
        .filter(|name| name.contains("cpu-partitioning") || name.contains("realtime"))
        .map(|name| format!("profile {name}"))
        .collect();
    let mut overlaps = Vec::new();
    for s in &chain.settings {
        match s.ours {
            None => pins.push(format!("{}: {}", s.profile, s.text)),
            Some(ours) => overlaps.push(format!("{}: {} ({ours})", s.profile, s.text)),
        }
    }
    Some(Tuned {
        profile,
        running: procfs::leader(threads, "tuned").is_some(),
        pins,
        chain: chain.profiles,
        overlaps,
    })
}
