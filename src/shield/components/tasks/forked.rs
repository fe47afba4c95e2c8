//! Tasks forked while the shield goes up, moved off after the plan.

use std::collections::HashSet;
use std::sync::atomic::AtomicBool;

use super::{plan_tasks, TaskRef};
use crate::cpulist::CpuSet;
use crate::shield::apply::{self, Applied, ApplyError, Effects};
use crate::shield::change::{Action, Step, Subject};
use crate::shield::journal::Journal;
use crate::shield::snapshot::Snapshot;
use crate::sys::Sys;

/// Tasks forked while the shield was going up may still carry shielded
/// CPUs (a cpuset stops that only on v2, and only once the partition
/// exists): sweep until none is left, a few rounds at most. Returns the
/// last snapshot read. `before` is the snapshot the plan was made from.
pub(in crate::shield) fn sweep_forked(
    (sys, fx): (&Sys, &dyn Effects),
    before: &Snapshot,
    (shield, housekeeping, kept): (&CpuSet, &CpuSet, &[TaskRef]),
    journal: &mut Journal,
    stop: &AtomicBool,
    applied: &mut Applied,
) -> Result<Snapshot, ApplyError> {
    let refused: HashSet<Subject> = applied.refused.iter().map(|r| r.subject.clone()).collect();
    let kept: HashSet<i32> = kept.iter().map(|t| t.tid).collect();
    let mut last: Option<Snapshot> = None;
    for _ in 0..3 {
        let snap = Snapshot::reread(sys, last.as_ref().unwrap_or(before))?;
        let tasks = plan_tasks(&snap, (shield, &[]), housekeeping, false, |t| {
            !kept.contains(&t.tid)
        });
        let steps: Vec<Step> = tasks
            .steps
            .into_iter()
            .filter(|s| !refused.contains(&s.subject))
            .filter(|s| match &s.action {
                Action::MoveTask { .. } => true,
                Action::SetAffinity { previous, cpus, .. } => previous != cpus,
                _ => false,
            })
            .collect();
        let refused_before = applied.refused.len();
        if steps.is_empty() {
            return Ok(snap);
        }
        apply::apply(sys, fx, journal, &steps, stop, applied)?;
        let all_refused = applied.refused.len() - refused_before == steps.len();
        last = Some(snap);
        if all_refused {
            break;
        }
    }
    Ok(Snapshot::reread(sys, last.as_ref().unwrap_or(before))?)
}
