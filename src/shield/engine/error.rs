//! What can stop a shield command, and the refusal to change the machine without root.

use super::apply::ApplyError;
use super::journal::JournalError;
use super::plan_error::PlanError;
use super::undo::Undone;

use crate::cpulist::CpuSet;
use crate::sys::{Sys, SysError};

/// Everything that can stop a shield command.
#[derive(Debug, thiserror::Error)]
pub enum ShieldError {
    /// Changing the system needs root.
    #[error(
        "cpushield {0} changes the whole system and must run as root (try: sudo cpushield {0} ...)"
    )]
    NotRoot(&'static str),
    /// The request is not valid on this machine; nothing was changed.
    #[error("{0}; nothing was changed")]
    Plan(#[from] PlanError),
    /// Journal trouble.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// Reading the system failed.
    #[error(transparent)]
    Sys(#[from] SysError),
    /// Applying failed; what was done has been undone.
    #[error("{error}; rolled back {} change(s){}{}", undone.restored, failed_note(undone), hint.as_deref().map(|h| format!("\n{h}")).unwrap_or_default())]
    RolledBack {
        /// The failure.
        error: Box<ApplyError>,
        /// What the rollback did.
        undone: Box<Undone>,
        /// What the failure means on this machine and what to do, when known.
        hint: Option<String>,
    },
    /// `run` or `move` without a shield.
    #[error("no shield is active (start one with: cpushield on CPULIST)")]
    NoShield,
    /// A bad argument of `run` or `move`.
    #[error("{0}")]
    Invalid(String),
}

/// When the kernel refused the shield's partition because of CPUs isolated
/// at boot (`isolcpus=` with the `domain` flag), what that means and the
/// choices. Seen: 7.x accepts only an `isolated` partition over such CPUs
/// (any mix), Debian's 6.12 refuses every partition that holds one of them
/// (tests/vm/KERNEL-NOTES.md, "Booted with isolcpus").
pub(in crate::shield) fn boot_isolation_conflict(
    error: &ApplyError,
    boot_isolated: &CpuSet,
    shield: &CpuSet,
) -> Option<String> {
    let ApplyError::NotHonoured { path, read, .. } = error else {
        return None;
    };
    let cpus = boot_isolated.intersection(shield);
    if !path.ends_with("cpuset.cpus.partition") || !read.contains("housekeeping") || cpus.is_empty()
    {
        return None;
    }
    Some(format!(
        "CPUs {cpus} are isolated at boot (isolcpus= with the domain flag, /sys/devices/system/cpu/isolated: {boot_isolated}), \
         and this kernel refuses a cpuset partition over them. Choices: boot without the domain flag, as \
         'cpushield boot-args {shield}' prints and the config key 'boot = true' writes \
         (isolcpus=managed_irq,... with nohz_full= and rcu_nocbs=; the shield's isolated partition then does the \
         domain isolation at run time); or shield CPUs that are not isolated at boot (isolated at boot: {boot_isolated})"
    ))
}

fn failed_note(u: &Undone) -> String {
    if u.failed.is_empty() {
        String::new()
    } else {
        let list: Vec<String> = u
            .failed
            .iter()
            .map(|f| format!("{}: {}", f.target, f.reason))
            .collect();
        format!("; could NOT restore: {}", list.join("; "))
    }
}

pub(crate) fn require_root(sys: &Sys, command: &'static str) -> Result<(), ShieldError> {
    if sys.privileged() {
        Ok(())
    } else {
        Err(ShieldError::NotRoot(command))
    }
}
