//! `off`: the journal replayed in reverse; its report.

use std::collections::HashSet;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::apply::{self, Undone};
use super::change::{self, Action};
use super::error::{require_root, ShieldError};
use super::journal::{self, Journal, State};
use super::timings::Timings;
use crate::cpulist::CpuSet;
use crate::sys::Sys;

/// The result of `off`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OffReport {
    /// The shield that was removed.
    pub shield: CpuSet,
    /// No shield was active: nothing was undone (and `off` succeeds).
    #[serde(default)]
    pub nothing_to_undo: bool,
    /// What undo did.
    #[serde(flatten)]
    pub undone: Undone,
    /// `--dry-run`: nothing was undone; `would_undo` says what would be.
    #[serde(default)]
    pub dry_run: bool,
    /// `--dry-run`: the journaled changes undo would replay, newest first
    /// (irqbalance's ban first of all, thread affinities last).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub would_undo: Vec<String>,
    /// How long it took, by phase (filled in by [`off`]).
    #[serde(default)]
    pub took: Timings,
}

pub(super) fn undo_journal(
    sys: &Sys,
    timings: &mut Timings,
) -> Result<(Option<State>, Undone), ShieldError> {
    let t = Instant::now();
    let state = journal::read_state(sys)?;
    let entries = journal::read_entries(sys)?;
    timings.read_journal += t.elapsed();
    let undone = apply::undo_timed(sys, &entries, timings);
    if undone.failed.is_empty() {
        Journal::open(sys)?.remove()?;
    }
    Ok((state, undone))
}

/// Undoes the shield exactly, also after `on` was killed at any point.
pub fn off(sys: &Sys) -> Result<OffReport, ShieldError> {
    let started = Instant::now();
    let mut timings = Timings::default();
    let mut report = off_timed(sys, &mut timings)?;
    timings.total = started.elapsed();
    report.took = timings;
    Ok(report)
}

/// [`off`], adding the time of each phase to `timings`.
pub fn off_timed(sys: &Sys, timings: &mut Timings) -> Result<OffReport, ShieldError> {
    require_root(sys, "off")?;
    let _lock = journal::lock(sys)?;
    // Nothing to undo is what `off` is asked to ensure (ExecStop=, a
    // playbook's clean-up): success, as `systemctl stop` of a stopped unit.
    if !Journal::exists(sys) {
        return Ok(OffReport {
            shield: CpuSet::new(),
            nothing_to_undo: true,
            undone: Undone::default(),
            dry_run: false,
            would_undo: Vec::new(),
            took: Timings::default(),
        });
    }
    let (state, undone) = undo_journal(sys, timings)?;
    Ok(OffReport {
        shield: state.map(|s| s.shield).unwrap_or_default(),
        nothing_to_undo: false,
        undone,
        dry_run: false,
        would_undo: Vec::new(),
        took: Timings::default(),
    })
}

/// What `off` would undo, read from the journal; changes nothing.
pub fn off_plan(sys: &Sys) -> Result<OffReport, ShieldError> {
    let state = journal::read_state(sys)?;
    let entries = if Journal::exists(sys) {
        journal::read_entries(sys)?
    } else {
        Vec::new()
    };
    let changes = entries
        .iter()
        .filter(|e| !matches!(e.action, Action::Remember { .. }));
    let (ban, rest): (Vec<_>, Vec<_>) = changes
        .rev()
        .partition(|e| matches!(e.action, Action::IrqbalanceBan { .. }));
    let mut would_undo: Vec<String> = ban
        .into_iter()
        .chain(rest)
        .map(|e| format!("{}{}", apply::describe(&e.action), undo_value(e)))
        .collect();
    let threads: HashSet<i32> = entries
        .iter()
        .flat_map(|e| match &e.action {
            Action::Remember { affinities } | Action::MoveTask { affinities, .. } => {
                affinities.iter().map(|(tid, _)| *tid).collect::<Vec<_>>()
            }
            Action::SetAffinity { tid, .. } => vec![*tid],
            _ => Vec::new(),
        })
        .collect();
    if !threads.is_empty() {
        would_undo.push(format!(
            "the affinity of {} threads, as recorded first",
            threads.len()
        ));
    }
    Ok(OffReport {
        shield: state.as_ref().map(|s| s.shield.clone()).unwrap_or_default(),
        nothing_to_undo: state.is_none() && entries.is_empty(),
        undone: Undone::default(),
        dry_run: true,
        would_undo,
        took: Timings::default(),
    })
}

/// What undo writes back for a journaled write, for `off --dry-run`.
fn undo_value(e: &journal::Entry) -> String {
    match &e.action {
        Action::Write { undo, .. } => match (undo, &e.previous) {
            (change::Undo::Previous, Some(p)) => format!(" <- {p:?}"),
            (change::Undo::Value(v), _) => format!(" <- {v:?}"),
            _ => " (left as is)".into(),
        },
        Action::MoveTask { back, .. } => format!(" back to /{back}"),
        Action::Mkdir { .. } => " (removed)".into(),
        _ => String::new(),
    }
}
