//! What the threads say of themselves: `on`'s report of what became of
//! them, and the tables `status` and `on` print.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

use super::{kept_as_read, TaskRef, OWNER};
use crate::shield::apply::Applied;
use crate::shield::change::Refusal;
use crate::shield::component::Reporting;
use crate::shield::parts::{Line, PartReport};
use crate::shield::plan::Plan;
use crate::shield::snapshot::Snapshot;

/// What `on` did with the threads (`--json`: the `data` of the part
/// `tasks`), read back (with `--dry-run`: planned).
#[derive(Debug, Default, Serialize, Deserialize)]
pub(in crate::shield) struct Outcome {
    /// Threads moved off the shield (affinity or cgroup).
    moved: usize,
    /// Threads that exited meanwhile.
    exited: usize,
    /// Per-CPU kernel threads left on the shield, by kind.
    per_cpu_kthreads: BTreeMap<String, usize>,
    /// Tasks that asked only for shielded CPUs, kept there: inside the
    /// shield's cgroup with their own affinity.
    kept: Vec<TaskRef>,
    /// Tasks that asked only for shielded CPUs but could not be kept
    /// there, with the CPUs they have now.
    not_kept: Vec<TaskRef>,
    /// Threads that asked only for shielded CPUs in a process that also
    /// runs outside the shield (cgroup v2 places whole processes): moved to
    /// the housekeeping CPUs.
    split_off: Vec<TaskRef>,
    /// A change in place: tasks that were inside the shield and had to
    /// leave it (all their CPUs left it), moved to the housekeeping CPUs.
    left_shield: Vec<TaskRef>,
    /// Task changes the kernel refused.
    refused: Vec<Refusal>,
}

/// How many of the threads the plan left to the partition it moved off the
/// shield (those the sweep had to move are counted with the steps applied).
fn moved_by_partition(plan: &Plan, after: &Snapshot, applied: &Applied) -> usize {
    let stepped: HashSet<i32> = applied.tasks_changed.iter().copied().collect();
    let left: HashSet<i32> = (super::planned(plan).left_to_partition.into_iter())
        .filter(|tid| !stepped.contains(tid))
        .collect();
    (after.threads.iter())
        .filter(|t| left.contains(&t.tid) && !t.cpus_allowed.intersects(&plan.shield))
        .count()
}

/// What `on` did with the threads: moved, kept, left, refused.
pub(super) fn outcome(cx: &Reporting) -> Outcome {
    let (planned, applied) = (super::planned(cx.plan), cx.applied);
    let (mut kept, not_kept) = kept_as_read(&planned.kept, cx.after, cx.dry_run);
    let changed = |a: &Applied| a.tasks_changed.iter().collect::<HashSet<_>>().len();
    let mut moved = applied.map_or(0, changed);
    if let (Some(a), None) = (applied, cx.change) {
        moved += moved_by_partition(cx.plan, cx.after, a);
    }
    if let Some(change) = cx.change {
        kept.extend(change.staying.iter().cloned());
    }
    Outcome {
        moved,
        exited: applied.map_or(0, |a| a.exited),
        per_cpu_kthreads: planned.per_cpu_kthreads,
        kept,
        not_kept,
        split_off: planned.split_off,
        left_shield: cx.change.map(|c| c.leaving.clone()).unwrap_or_default(),
        refused: (cx.refused().iter())
            .filter(|r| r.subject.is_task())
            .map(|r| r.refusal.clone())
            .collect(),
    }
}

/// `on`'s lines and tables of `out` (only planned, when `dry_run`).
pub(super) fn outcome_report(out: Outcome, dry_run: bool) -> PartReport {
    let mut lines = Vec::new();
    if !dry_run {
        lines.push(Line::new("threads moved off", out.moved.to_string()));
        if out.exited > 0 {
            lines.push(Line::new(
                "threads exited meanwhile",
                out.exited.to_string(),
            ));
        }
    }
    lines.push(Line::new(
        "kthreads the kernel pins",
        kinds(&out.per_cpu_kthreads),
    ));
    let mut details = [
        table(
            "kept on the shield, own affinity inside it (--force moves them off)",
            &out.kept,
            20,
        ),
        table(
            "left the shield: none of their CPUs stays in it (moved to housekeeping)",
            &out.left_shield,
            20,
        ),
        table(
            "asked only for shielded CPUs but NOT kept there (now)",
            &out.not_kept,
            20,
        ),
        table(
            "moved off: only these threads of their process asked for shielded CPUs",
            &out.split_off,
            20,
        ),
    ]
    .concat();
    details.extend(Refusal::table("task changes refused", &out.refused));
    let mut part = PartReport::new(OWNER.name(), &out);
    part.lines = lines;
    part.details = details;
    part
}

/// Per-CPU kernel threads by kind, for people: `ksoftirqd ×2, ...`.
pub fn kinds(map: &BTreeMap<String, usize>) -> String {
    if map.is_empty() {
        return "none".into();
    }
    (map.iter())
        .map(|(k, n)| format!("{k} ×{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A table of `list` under `title`, for people: at most `limit` rows, then
/// how many more (none when `list` is empty).
pub fn table(title: &str, list: &[TaskRef], limit: usize) -> Vec<String> {
    if list.is_empty() {
        return Vec::new();
    }
    let mut out = vec![
        format!("  {title} ({}):", list.len()),
        format!("    {:>8} {:>8}  {:<20} cpus", "pid", "tid", "name"),
    ];
    for t in list.iter().take(limit) {
        out.push(format!(
            "    {:>8} {:>8}  {:<20} {}",
            t.pid,
            t.tid,
            crate::escape::terminal(&t.name),
            t.cpus
        ));
    }
    if list.len() > limit {
        out.push(format!(
            "    ... {} more (--json lists all)",
            list.len() - limit
        ));
    }
    out
}
