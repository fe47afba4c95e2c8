//! `on`'s report: each component's outcome, as the kernel and the other
//! programs left it (read back), composed; and what the journal's state
//! keeps of it.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;
use crate::shield::apply::{Applied, Refusal};
use crate::shield::change::TaskRef;
use crate::shield::change::{Step, Subject};
use crate::shield::irqbalance;
use crate::shield::irqs::{self, IrqRefusal};
use crate::shield::journal::State;
use crate::shield::note::Note;
use crate::shield::parts::{MachineWide, PartReport};
use crate::shield::plan::Plan;
use crate::shield::reshape::Reshape;
use crate::shield::snapshot::{CgroupSetup, Snapshot, SYSTEM_CGROUP_V1};
use crate::shield::tasks;
use crate::shield::timings::Timings;
use crate::sys::Sys;

/// The result of `on`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OnReport {
    /// Only planned, nothing changed.
    pub dry_run: bool,
    /// Shielded CPUs.
    pub shield: CpuSet,
    /// Housekeeping CPUs.
    pub housekeeping: CpuSet,
    /// Mechanism.
    pub mechanism: String,
    /// The partition as it reads back (v2).
    pub partition: Option<String>,
    /// Number of planned changes.
    pub planned: usize,
    /// Changes made.
    pub changed: usize,
    /// Threads moved off the shield (affinity or cgroup).
    pub tasks_moved: usize,
    /// Threads that exited meanwhile.
    pub tasks_exited: usize,
    /// Per-CPU kernel threads left on the shield, by kind.
    pub per_cpu_kthreads: BTreeMap<String, usize>,
    /// Tasks that asked only for shielded CPUs, kept there: inside the
    /// shield's cgroup with their own affinity, as read back from the
    /// kernel (with `--dry-run`: planned).
    pub kept: Vec<TaskRef>,
    /// Tasks that asked only for shielded CPUs but could not be kept
    /// there, with the CPUs they have now (read back).
    pub not_kept: Vec<TaskRef>,
    /// Threads that asked only for shielded CPUs in a process that also
    /// runs outside the shield (cgroup v2 places whole processes): moved to
    /// the housekeeping CPUs.
    pub split_off: Vec<TaskRef>,
    /// Task changes the kernel refused.
    pub tasks_refused: Vec<Refusal>,
    /// IRQs moved to the housekeeping CPUs.
    pub irqs_moved: Vec<u32>,
    /// IRQs bound to the shield on request.
    pub irqs_to_shield: Vec<u32>,
    /// IRQs that refused a new affinity.
    pub irqs_refused: Vec<IrqRefusal>,
    /// IRQs whose effective affinity still includes a shielded CPU (moves at the next interrupt, or refused).
    pub irqs_effective_on_shield: Vec<u32>,
    /// Other non-fatal refusals (workqueue mask, ...).
    pub other_refused: Vec<Refusal>,
    /// The CPUs banned for irqbalance (systemd hosts): set, or with
    /// `--dry-run` planned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irqbalance_ban: Option<CpuSet>,
    /// What became of the irqbalance process while the ban was set, read
    /// back from `/proc` (not with `--dry-run`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irqbalance: Option<irqbalance::Process>,
    /// What the user should know.
    pub notes: Vec<Note>,
    /// The shield before, when an active shield was changed in place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_from: Option<CpuSet>,
    /// Tasks that were inside the shield and had to leave it (all their
    /// CPUs left the shield), moved out to the housekeeping CPUs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_shield: Vec<TaskRef>,
    /// What the plan changes machine-wide, beyond the shielded CPUs, each
    /// with how to do without it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub machine_wide: Vec<MachineWide>,
    /// What the components that report for themselves did, read back
    /// (planned, for a dry run): the kernel threads raised, the cache
    /// share, the idle states, ...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<PartReport>,
    /// The plan, with `--dry-run` (printed, not read back from a report).
    #[serde(default, skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Vec<Step>>,
    /// How long it took, by phase (filled in by [`crate::shield::on`]).
    #[serde(default)]
    pub took: Timings,
}

/// The journal's state for a fresh shield of `plan` on `cgroup`, not yet
/// complete.
pub(in crate::shield) fn state_for(plan: &Plan, cgroup: &CgroupSetup) -> State {
    let mount = cgroup.mount().unwrap_or("");
    let outside_procs = match cgroup {
        CgroupSetup::V1 { .. } => format!("{mount}/{SYSTEM_CGROUP_V1}/cgroup.procs"),
        _ => format!("{mount}/cgroup.procs"),
    };
    State {
        version: crate::shield::journal::VERSION,
        shield: plan.shield.clone(),
        housekeeping: plan.housekeeping.clone(),
        mechanism: plan.mechanism.clone(),
        shield_dir: plan.shield_dir.clone(),
        outside_procs,
        complete: false,
        partition: plan.partition.clone(),
        writes_refused: Vec::new(),
        request: None,
        parts: Default::default(),
        older: Default::default(),
    }
}

/// What the components keep in the journal's state of their outcomes (the
/// IRQs kept on the shield, irqbalance's ban, the guard), and what only the machine after
/// (compared with the one `before`) can tell for the report: irqbalance's
/// process and the partition, read back.
pub(in crate::shield) fn read_back(
    sys: &Sys,
    plan: &Plan,
    (before, after): (&Snapshot, &Snapshot),
    state: &mut State,
    out: &mut OnReport,
) {
    state.parts.extend(super::records(plan, out));
    out.irqbalance = out
        .irqbalance_ban
        .as_ref()
        .map(|_| irqbalance::process_after(sys, before.owners.irqbalance.as_ref(), &after.threads));
    if let CgroupSetup::V2 { .. } = &after.cgroup {
        out.partition = sys
            .read_trimmed(&format!("{}/cpuset.cpus.partition", plan.shield_dir))
            .ok();
    }
}

/// `on`'s report of a change in place: what only the change knows (the
/// shield before, the tasks that stayed or left, what was refused before).
pub(in crate::shield) fn with_change(
    mut out: OnReport,
    change: &Reshape,
    snap: &Snapshot,
) -> OnReport {
    out.changed_from = (change.from != change.plan.shield).then(|| change.from.clone());
    out.left_shield = change.leaving.clone();
    out.kept.extend(change.staying.iter().cloned());
    let ban = change.records.get(irqbalance::OWNER.name());
    out.irqbalance_ban = out.irqbalance_ban.take().or(ban);
    out.irqs_refused
        .extend(change.still_refused.iter().map(|&irq| IrqRefusal {
            irq,
            name: irqs::name(&snap.irqs, irq),
            reason: "refused before; not tried again".into(),
        }));
    out
}

/// `on`'s report of `plan` on the machine `snap` (after, unless a dry
/// run), from what `apply` did (`applied`; none for a dry run).
pub(in crate::shield) fn report(
    sys: &Sys,
    plan: &Plan,
    snap: &Snapshot,
    applied: Option<&Applied>,
    dry_run: bool,
) -> OnReport {
    let refused = applied.map_or(&[][..], |a| &a.refused);
    let irqs = irqs::outcome(
        (&plan.steps, &plan.irqs_to_shield, &plan.shield),
        &snap.irqs,
        refused,
    );
    let (kept, not_kept) = tasks::kept_as_read(&plan.kept, snap, dry_run);
    let refusals = |which: fn(&Subject) -> bool| {
        refused
            .iter()
            .filter(|r| which(&r.subject))
            .map(|r| r.refusal.clone())
            .collect()
    };
    OnReport {
        dry_run,
        shield: plan.shield.clone(),
        housekeeping: plan.housekeeping.clone(),
        mechanism: plan.mechanism.clone(),
        partition: plan.partition.clone(),
        planned: plan.steps.len(),
        changed: applied.map_or(0, |a| a.done),
        tasks_moved: applied.map_or(0, |a| a.tasks_changed.iter().collect::<HashSet<_>>().len()),
        tasks_exited: applied.map_or(0, |a| a.exited),
        per_cpu_kthreads: plan.per_cpu_kthreads.clone(),
        kept,
        not_kept,
        split_off: plan.split_off.clone(),
        tasks_refused: refusals(Subject::is_task),
        irqs_moved: irqs.moved,
        irqs_to_shield: plan.irqs_to_shield.clone(),
        irqs_refused: irqs.refused,
        irqs_effective_on_shield: irqs.effective_on_shield,
        other_refused: refusals(|s| !s.is_task() && !matches!(s, Subject::Irq(_))),
        irqbalance_ban: irqbalance::ban_made(&plan.steps, refused),
        irqbalance: None,
        notes: plan.notes.clone(),
        changed_from: None,
        left_shield: Vec::new(),
        machine_wide: (super::ORDER.iter())
            .flat_map(|part| {
                let mine: Vec<Step> = (plan.steps.iter())
                    .filter(|s| s.owner == part.owner())
                    .cloned()
                    .collect();
                part.machine_wide(&mine)
            })
            .collect(),
        parts: (super::ORDER.iter())
            .filter_map(|part| part.outcome(sys, plan, dry_run))
            .collect(),
        plan: dry_run.then(|| plan.steps.clone()),
        took: Timings::default(),
    }
}
