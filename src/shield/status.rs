//! `status`: whether the active shield still holds, judged by what the kernel refuses and what drifted.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::error::ShieldError;
use super::journal::{self, State};
use super::note::Note;
use super::plan::{self, TaskRef};
use super::request::Request;
use super::snapshot::{in_shield_cgroup, CgroupSetup, Snapshot};
use super::{irqbalance, mechanism};
use crate::cpulist::CpuSet;
use crate::sys::procfs;
use crate::sys::Sys;

/// An IRQ and where it may run, for `status`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IrqPlacement {
    /// IRQ number.
    pub irq: u32,
    /// Device name.
    pub name: String,
    /// `smp_affinity_list`.
    pub affinity: CpuSet,
    /// `effective_affinity_list`.
    pub effective: Option<CpuSet>,
}

/// The result of `status`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StatusReport {
    /// Online CPUs.
    pub online: CpuSet,
    /// The mechanism in use, or the one `on` would use.
    pub mechanism: String,
    /// Where `on` would mount cgroup2 first (nothing with cpuset is
    /// mounted; `off` unmounts it again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_first: Option<String>,
    /// Why no mechanism is available.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unsupported: Option<String>,
    /// Shielded CPUs, when a shield is up.
    pub shield: Option<CpuSet>,
    /// Housekeeping CPUs, when a shield is up.
    pub housekeeping: Option<CpuSet>,
    /// False when `on` was interrupted: run `cpushield off`.
    pub complete: bool,
    /// The shield cgroup's partition as it reads back (v2).
    pub partition: Option<String>,
    /// CPUs isolated at boot (isolcpus=).
    pub boot_isolated: CpuSet,
    /// Tasks placed inside the shield.
    pub tasks_inside: Vec<TaskRef>,
    /// Per-CPU kernel threads on the shielded CPUs, by kind.
    pub per_cpu_kthreads: BTreeMap<String, usize>,
    /// Other tasks allowed on a shielded CPU: should not be there.
    pub intruders: Vec<TaskRef>,
    /// IRQs allowed on, or effective on, a shielded CPU.
    pub irqs_on_shield: Vec<IrqPlacement>,
    /// Number of IRQs in all.
    pub irqs_total: usize,
    /// `/proc/irq/default_smp_affinity`.
    pub default_irq_affinity: Option<CpuSet>,
    /// Unbound workqueue cpumask.
    pub workqueue_mask: Option<CpuSet>,
    /// Whether the shield still holds (true when there is none): nothing
    /// in `broken`.
    #[serde(default)]
    pub holds: bool,
    /// What no longer holds, each with its repair.
    #[serde(default)]
    pub broken: Vec<Breakage>,
    /// Other owners of the machine that may fight the shield (tuned).
    #[serde(default)]
    pub notes: Vec<Note>,
}

/// One way a shield stopped holding.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Breakage {
    /// Short name (`partition`, `cpuset-controller`, `enforcement`,
    /// `irqbalance`, `threads`, `irqs`, `incomplete`).
    pub check: String,
    /// What is wrong, as read from the kernel.
    pub what: String,
    /// How to repair it.
    pub repair: String,
}

/// Checks that an active shield still holds (`partition`: the shield
/// cgroup's partition file as read, v2): judged by what the kernel
/// would refuse (the cpuset controller, the partition, the CPUs left to
/// everything outside), then by what drifted (irqbalance's ban, threads and
/// IRQs outside the shield allowed on it).
fn holds_checks(
    sys: &Sys,
    state: &State,
    snap: &Snapshot,
    partition: Option<&str>,
    intruders: &[TaskRef],
    irqs_on_shield: &[IrqPlacement],
) -> Vec<Breakage> {
    let shield = &state.shield;
    let again = state
        .request
        .as_ref()
        .map_or_else(|| format!("cpushield on {shield}"), Request::command_line);
    let rebuild = format!(
        "run 'cpushield apply' (a shield from the config file) or '{again}' again: it repairs the shield in place"
    );
    let mut out = Vec::new();
    let mut broken = |check: &str, what: String, repair: &str| {
        out.push(Breakage {
            check: check.into(),
            what,
            repair: repair.to_string(),
        })
    };
    if !state.complete {
        broken(
            "incomplete",
            "the last 'cpushield on' did not finish".into(),
            "run 'cpushield off', then 'cpushield on' again",
        );
        return out;
    }
    for (check, what) in mechanism::lost(sys, state, snap, partition) {
        broken(check, what, &rebuild);
    }
    if let Some(ban) = &state.irqbalance_ban {
        let irqb = snap.owners.irqbalance.as_ref();
        if let Some(lost) = irqbalance::ban_lost(sys, ban, irqb, shield) {
            broken("irqbalance", lost.what, lost.repair.unwrap_or(&rebuild));
        }
    }
    // A task that asked only for shielded CPUs is the user's real-time
    // task, not a leak.
    let leaked = intruders
        .iter()
        .filter(|t| !t.cpus.is_subset(shield))
        .count();
    if leaked > 0 {
        broken(
            "threads",
            format!("{leaked} thread(s) outside the shield may run on CPUs {shield}"),
            &rebuild,
        );
    }
    let drifted: Vec<String> = irqs_on_shield
        .iter()
        .filter(|i| i.affinity.intersects(shield) && !state.irqs_kept.contains(&i.irq))
        .map(|i| i.irq.to_string())
        .collect();
    if !drifted.is_empty() {
        broken(
            "irqs",
            format!("IRQs {} are allowed on the shield again", drifted.join(" ")),
            &rebuild,
        );
    }
    out
}

/// Reports the shield (or its absence). Read-only.
pub fn status(sys: &Sys) -> Result<StatusReport, ShieldError> {
    let mut snap = Snapshot::read(sys)?;
    let state = journal::read_state(sys)?;
    let unsupported = match &snap.cgroup {
        CgroupSetup::Unsupported { reason } => Some(reason.clone()),
        _ => None,
    };
    let shield = state.as_ref().map(|s| s.shield.clone());
    if let Some(shield) = &shield {
        procfs::read_stats(sys, &mut snap.threads, |t| {
            in_shield_cgroup(&t.cgroup) || t.cpus_allowed.intersects(shield)
        });
    }
    let mut tasks_inside = Vec::new();
    let mut intruders = Vec::new();
    let mut per_cpu_kthreads = BTreeMap::new();
    let mut irqs_on_shield = Vec::new();
    let mut partition = None;
    if let Some(shield) = &shield {
        for t in &snap.threads {
            if in_shield_cgroup(&t.cgroup) {
                tasks_inside.push(TaskRef::from(t));
            } else if t.cpus_allowed.intersects(shield) {
                if t.is_pinned_by_kernel() || (t.is_kthread() && t.cpus_allowed.is_subset(shield)) {
                    *per_cpu_kthreads.entry(t.kind()).or_insert(0usize) += 1;
                } else {
                    intruders.push(TaskRef::from(t));
                }
            }
        }
        for i in &snap.irqs {
            let eff_on = i.effective.as_ref().is_some_and(|e| e.intersects(shield));
            if i.affinity.intersects(shield) || eff_on {
                irqs_on_shield.push(IrqPlacement {
                    irq: i.irq,
                    name: i.name.clone(),
                    affinity: i.affinity.clone(),
                    effective: i.effective.clone(),
                });
            }
        }
        if let (CgroupSetup::V2 { .. }, Some(s)) = (&snap.cgroup, &state) {
            partition = sys
                .read_trimmed(&format!("{}/cpuset.cpus.partition", s.shield_dir))
                .ok();
        }
    }
    let broken = match &state {
        Some(s) => holds_checks(
            sys,
            s,
            &snap,
            partition.as_deref(),
            &intruders,
            &irqs_on_shield,
        ),
        None => Vec::new(),
    };
    Ok(StatusReport {
        online: snap.online.clone(),
        mechanism: mechanism::name(&snap),
        mount_first: match &snap.cgroup {
            CgroupSetup::V2Unmounted { mount, .. } => Some(format!("/{mount}")),
            _ => None,
        },
        unsupported,
        housekeeping: state.as_ref().map(|s| s.housekeeping.clone()),
        complete: state.as_ref().is_none_or(|s| s.complete),
        shield,
        partition,
        boot_isolated: snap.boot_isolated.clone(),
        tasks_inside,
        per_cpu_kthreads,
        intruders,
        irqs_total: snap.irqs.len(),
        irqs_on_shield,
        default_irq_affinity: snap.default_irq_affinity.clone(),
        workqueue_mask: snap.workqueue_mask.clone(),
        holds: broken.is_empty(),
        broken,
        notes: plan::tuned_notes(&snap.owners),
    })
}
