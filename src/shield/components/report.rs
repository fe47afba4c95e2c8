//! `on`'s report: each component's outcome, as the kernel and the other
//! programs left it (read back), composed; and what the journal's state
//! keeps of it.

use crate::shield::change::{Step, Subject};
use crate::shield::component::Reporting;
use crate::shield::journal::State;
use crate::shield::plan::Plan;
use crate::shield::report::OnReport;
use crate::shield::snapshot::{CgroupSetup, Snapshot, SYSTEM_CGROUP_V1};
use crate::shield::timings::Timings;
use crate::sys::Sys;

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

/// What the components keep in the journal's state of what they did (the
/// IRQs kept on the shield, irqbalance's ban, the guard), and the
/// partition, read back.
pub(in crate::shield) fn read_back(
    sys: &Sys,
    (plan, after): (&Plan, &Snapshot),
    state: &mut State,
    out: &mut OnReport,
) {
    state.parts.extend(super::records(plan, out));
    if let (CgroupSetup::V2 { .. }, false) = (&after.cgroup, plan.shield_dir.is_empty()) {
        out.partition = sys
            .read_trimmed(&format!("{}/cpuset.cpus.partition", plan.shield_dir))
            .ok();
    }
}

/// `on`'s report of what the plan of `cx` did (or would do), each
/// component's part in [`super::ORDER`].
pub(in crate::shield) fn report(cx: &Reporting) -> OnReport {
    let plan = cx.plan;
    let refusals = (cx.refused().iter())
        .filter(|r| !r.subject.is_task() && !matches!(r.subject, Subject::Irq(_)))
        .map(|r| r.refusal.clone())
        .collect();
    OnReport {
        dry_run: cx.dry_run,
        shield: plan.shield.clone(),
        housekeeping: plan.housekeeping.clone(),
        mechanism: plan.mechanism.clone(),
        partition: plan.partition.clone(),
        planned: plan.steps.len(),
        changed: cx.applied.map_or(0, |a| a.done),
        other_refused: refusals,
        notes: plan.notes.clone(),
        changed_from: (cx.change)
            .filter(|c| c.from != plan.shield)
            .map(|c| c.from.clone()),
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
            .filter_map(|part| part.reports()?.outcome(cx))
            .collect(),
        plan: cx.dry_run.then(|| plan.steps.clone()),
        took: Timings::default(),
    }
}
