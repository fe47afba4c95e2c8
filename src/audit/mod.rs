//! `cpushield audit`: what noise still reaches the target CPUs, and what to
//! do about it. The flow is `read the facts ([facts]) → judge them
//! ([rules], pure; the bus's in [bus]) → report`. Read-only: every access is a read through
//! [`Sys`], so fixture roots drive the tests and it is safe on any machine.

mod boot_rules;
pub mod bus;
pub mod facts;
mod kubelet_rules;
pub mod parse;
pub mod rules;
mod smi;

use std::time::Duration;

use serde::Serialize;

use parse::Delta;

use crate::cpulist::CpuSet;
pub use crate::finding::{Finding, Findings, Severity};
use crate::shield::journal::JournalError;
use crate::sys::{Sys, SysError};

/// The result of `audit`.
#[derive(Debug, Clone, Serialize)]
pub struct AuditReport {
    /// CPUs audited.
    pub cpus: CpuSet,
    /// Where they came from: `shield` or `--cpus`.
    pub source: String,
    /// Whether a shield is active.
    pub shield_active: bool,
    /// Seconds interrupts were counted over (0: not counted).
    pub window_s: f64,
    /// Findings, worst first.
    pub findings: Vec<Finding>,
    /// Interrupt lines that fired on the targets during the window.
    pub interrupts: Vec<Delta>,
    /// Softirqs that ran on the targets during the window.
    pub softirqs: Vec<Delta>,
    /// The PCI functions as read, and the bound of each conventional PCI bus.
    pub pci: bus::BusReport,
}

/// Why the audit could not run.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// No shield and no `--cpus`.
    #[error("no shield is active: say which CPUs to audit with --cpus LIST (or start one with: cpushield on LIST)")]
    NoTarget,
    /// `--cpus` names CPUs that are not online.
    #[error("--cpus {}: CPUs {} are not online (online: {})", cpus.brief(), offline.brief(), online.brief())]
    Offline {
        /// Requested.
        cpus: CpuSet,
        /// Not online among them.
        offline: CpuSet,
        /// Online.
        online: CpuSet,
    },
    /// The journal could not be read.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// Reading the system failed.
    #[error(transparent)]
    Sys(#[from] SysError),
}

/// Audits `cpus`, or the active shield's CPUs. `window` zero skips the
/// interrupt counts.
pub fn audit(
    sys: &Sys,
    cpus: Option<&CpuSet>,
    window: Duration,
) -> Result<AuditReport, AuditError> {
    let source = if cpus.is_some() { "--cpus" } else { "shield" };
    let facts = facts::read(sys, cpus, window)?;
    Ok(AuditReport {
        findings: rules::judge(&facts),
        pci: bus::report(&facts.pci),
        source: source.into(),
        shield_active: facts.shield.is_some(),
        window_s: facts.window_s,
        cpus: facts.targets,
        interrupts: facts.interrupts,
        softirqs: facts.softirqs,
    })
}
