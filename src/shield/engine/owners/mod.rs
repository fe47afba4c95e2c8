//! The other programs that own part of what a shield touches, read from the
//! machine: systemd (the cgroup tree), tuned (CPU and IRQ pinning) and
//! kubelet (the CPUs of a Kubernetes node); irqbalance is its component's
//! own read. Read-only; the plan decides what to do.

use serde::{Deserialize, Serialize};

use crate::sys::procfs::{self, Thread};
use crate::sys::Sys;

pub mod kubernetes;
pub mod tuned;

pub use kubernetes::{KubernetesNode, OsUnit};

/// What the owners of this machine are.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Owners {
    /// systemd is the init system (`/run/systemd/system` exists).
    pub systemd: bool,
    /// Its version (`systemctl --version`), when it is.
    #[serde(default)]
    pub systemd_version: Option<u32>,
    /// tuned, when it has an active profile.
    pub tuned: Option<Tuned>,
    /// kubelet, when this is a Kubernetes node.
    #[serde(default)]
    pub kubernetes: Option<KubernetesNode>,
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
    /// tuned process), `ours` names what of cpushield's a tuned setting
    /// writes too.
    pub fn read(sys: &Sys, threads: &[Thread], ours: tuned::Ours) -> Owners {
        let systemd = sys.systemd_booted();
        Owners {
            systemd,
            systemd_version: systemd.then(|| sys.systemd_version()).flatten(),
            tuned: read_tuned(sys, threads, ours),
            kubernetes: kubernetes::read(sys, threads),
        }
    }
}

/// tuned's active profile and what its include chain sets that a shield
/// cares about (`ours`: what of cpushield's a setting writes too); `None`
/// without an active profile.
pub fn read_tuned(sys: &Sys, threads: &[Thread], ours: tuned::Ours) -> Option<Tuned> {
    // a line of profile names: read only as a small regular file
    let path = sys.path("etc/tuned/active_profile");
    let profile = crate::input::read_file(&path, 4096)
        .ok()?
        .trim()
        .to_string();
    if profile.is_empty() {
        return None;
    }
    let chain = tuned::read_chain(sys, &profile, ours);
    let mut pins: Vec<String> = profile
        .split_whitespace()
        .filter(|name| name.contains("cpu-partitioning") || name.contains("realtime"))
        .map(|name| format!("profile {name}"))
        .collect();
    let mut overlaps = Vec::new();
    for s in &chain.settings {
        match &s.ours {
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
