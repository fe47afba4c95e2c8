//! What the boot half asks of the kernel command line: cpushield's own
//! keys for the shielded CPUs, plus the extra options the user gives,
//! checked before anything is read or written.

use serde::{Deserialize, Serialize};

use super::{args, BootError};
use crate::cpulist::CpuSet;
use crate::sys::Sys;

/// The boot options wanted for a shield.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootWant {
    /// The CPUs isolated at boot: the shield's CPUs and their hyper-thread siblings.
    pub cpus: CpuSet,
    /// The CPUs left for interrupts and kernel work (`irqaffinity=`).
    pub housekeeping: CpuSet,
    /// The options, in order: cpushield's four, then the config's extra ones.
    pub options: Vec<String>,
}

/// The keys cpushield sets itself; an extra option may not set them again.
pub const OWN_KEYS: [&str; 4] = ["isolcpus", "nohz_full", "rcu_nocbs", "irqaffinity"];

/// The boot options for shielding `cpus` (siblings added as `boot-args`
/// does; on a Kubernetes node, see [`args::for_kubernetes`]) plus `extra`
/// ones. Refuses an extra option that is not one
/// command-line word, or that sets one of cpushield's own keys.
pub fn want(
    cpus: &CpuSet,
    sibling_groups: &[CpuSet],
    (online, kubernetes): (&CpuSet, bool),
    extra: &[String],
) -> Result<BootWant, BootError> {
    let mut advice = args::boot_args(cpus, sibling_groups, online);
    let own_affinity = !extra.iter().any(|o| o.starts_with("systemd.cpu_affinity="));
    if kubernetes && own_affinity {
        args::for_kubernetes(&mut advice);
    }
    if advice.housekeeping.is_empty() {
        return Err(BootError::Invalid(format!(
            "boot: isolating CPUs {} leaves no CPU for housekeeping (online: {online})",
            advice.isolated
        )));
    }
    check_extra(extra)?;
    let mut options = advice.args.clone();
    for o in extra {
        if !options.contains(o) {
            options.push(o.clone());
        }
    }
    Ok(BootWant {
        cpus: advice.isolated,
        housekeeping: advice.housekeeping,
        options,
    })
}

/// Checks extra boot options: each one command-line word that does not set
/// one of cpushield's own keys.
pub fn check_extra(extra: &[String]) -> Result<(), BootError> {
    for o in extra {
        let key = o.split('=').next().unwrap_or_default();
        let plain = !o.is_empty()
            && o.chars().all(|c| {
                c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '=' | ',' | '.' | ':' | '/')
            });
        if !plain || key.is_empty() {
            return Err(BootError::Invalid(format!(
                "boot: option {} is not one kernel command line word: give NAME or NAME=VALUE of letters, digits and _-=,.:/ (e.g. \"skew_tick=1\")",
                crate::input::quote(o)
            )));
        }
        if OWN_KEYS.contains(&key) {
            return Err(BootError::Invalid(format!(
                "boot: option {} sets {key}=, which cpushield derives from cpus; leave it out",
                crate::input::quote(o)
            )));
        }
    }
    Ok(())
}

/// [`want`] for `cpus` on this machine (its online CPUs and hyper-thread siblings).
pub fn want_here(sys: &Sys, cpus: &CpuSet, extra: &[String]) -> Result<BootWant, BootError> {
    let online = crate::sys::procfs::online_cpus(sys).map_err(|e| BootError::Failed {
        what: "reading the online CPUs".into(),
        restored: false,
        source: Box::new(e),
    })?;
    let mut groups: Vec<CpuSet> = Vec::new();
    for cpu in cpus.iter() {
        let g = crate::sys::procfs::thread_siblings(sys, cpu);
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    want(
        cpus,
        &groups,
        (&online, crate::kubelet::node_here(sys)),
        extra,
    )
}
