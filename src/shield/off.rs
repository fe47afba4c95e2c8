//! `off`: the journal replayed in reverse; its report.
//!
//! A damaged journal (a file truncated, garbled or missing) does not
//! strand the machine: `off` replays the records that can still be read,
//! through the same undo, names what it could not read, and keeps the
//! journal (for another `off` when a restore failed, else set aside as
//! `run/cpushield/journal.damaged`); `main` exits 5.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::apply::{self, Effects};
use super::change::{self, Action};
use super::components::{self, EFFECTS};
use super::error::{require_root, ShieldError};
use super::journal::{self, Journal, State, Unreadable};
use super::kept::{self, KeptRealtime};
use super::screen;
use super::timings::Timings;
use super::undo::{self, KeepOnCpus, Undone};
use crate::cpulist::CpuSet;
use crate::sys::{procfs, Sys};

/// The result of `off`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OffReport {
    /// The shield that was removed.
    #[serde(with = "crate::json_null::cpus")]
    pub shield: CpuSet,
    /// No shield was active: nothing was undone (and `off` succeeds).
    #[serde(default)]
    pub nothing_to_undo: bool,
    /// What undo did.
    #[serde(flatten)]
    pub undone: Undone,
    /// The journal was damaged: what of it could not be read, and the
    /// records refused (altered after they were written, or naming what
    /// no shield changes). What those records changed was not undone
    /// (`off` exits 5).
    #[serde(default)]
    pub unreadable: Vec<Unreadable>,
    /// Where the damaged journal was moved once everything its readable
    /// records hold was restored (`None`: removed when intact, or kept in
    /// place for another `off` when a restore failed).
    #[serde(default)]
    pub damaged_journal: Option<String>,
    /// A damaged journal: the shield's own cgroups, as its state names
    /// them, still there after the undo (the records that made them could
    /// not be read); `off` leaves them, the report names them.
    #[serde(default)]
    pub still_there: Vec<String>,
    /// `--dry-run`: nothing was undone; `would_undo` says what would be.
    #[serde(default)]
    pub dry_run: bool,
    /// `--dry-run`: the journaled changes undo would replay, newest first
    /// (irqbalance's ban first of all, thread affinities last).
    #[serde(default)]
    pub would_undo: Vec<String>,
    /// Shielded CPUs that were offline when `off` ran, as the kernel
    /// reads back. An affinity or IRQ mask naming only them cannot be
    /// written back (EINVAL) until they are online again.
    #[serde(default, with = "crate::json_null::cpus")]
    pub offline: CpuSet,
    /// Real-time tasks that were still on the shield: kept on the CPUs
    /// they had (no longer shielded), with the affinity they had before,
    /// which was not given back (see [`super::kept`]).
    #[serde(default)]
    pub kept_realtime: Vec<KeptRealtime>,
    /// How long it took, by phase, in ms (`took_ms` in JSON; filled in by [`off`]).
    #[serde(default, rename = "took_ms", alias = "took")]
    pub took: Timings,
}

/// Undoes the journal of an `on` that was interrupted, before a new one
/// starts. A record naming what no shield changes makes it a damaged
/// journal, which `off` restores from (naming that record).
pub(super) fn undo_journal(
    sys: &Sys,
    timings: &mut Timings,
) -> Result<(Option<State>, Undone), ShieldError> {
    let t = Instant::now();
    let state = journal::read_state(sys)?;
    let (entries, refused) = screened(sys, state.as_ref(), journal::read_entries(sys)?);
    if let Some(first) = refused.first() {
        return Err(journal::JournalError::DamagedJournal {
            path: Journal::dir_of(sys),
            reason: format!("{}: {}", first.target, first.reason),
        }
        .into());
    }
    timings.read_journal += t.elapsed();
    let undone = undo::undo_timed(sys, EFFECTS, &entries, &KeepOnCpus::default(), timings);
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
    let _lock = journal::lock_past_repair(sys)?;
    // Nothing to undo is what `off` is asked to ensure (ExecStop=, a
    // playbook's clean-up): success, as `systemctl stop` of a stopped unit.
    if !Journal::exists(sys) {
        return Ok(OffReport {
            shield: CpuSet::new(),
            nothing_to_undo: true,
            undone: Undone::default(),
            unreadable: Vec::new(),
            damaged_journal: None,
            still_there: Vec::new(),
            dry_run: false,
            would_undo: Vec::new(),
            offline: CpuSet::new(),
            kept_realtime: Vec::new(),
            took: Timings::default(),
        });
    }
    // Read as far as it can be: an intact journal whole, a damaged one
    // up to what cannot be read, each record whole or not at all.
    let t = Instant::now();
    let mut journal = journal::salvage(sys)?;
    keep_within(sys, &mut journal);
    timings.read_journal += t.elapsed();
    let (realtime, keep) = match &journal.state {
        Some(state) => components::keep_through_off(sys, state),
        None => Default::default(),
    };
    let undone = undo::undo_timed(sys, EFFECTS, &journal.entries, &keep, timings);
    // The affinities recorded before the shield, of the kept threads only
    // (a shield over 10,000 threads records as many).
    let recorded: HashMap<i32, CpuSet> = undo::original_affinities(&journal.entries)
        .into_iter()
        .filter(|(tid, _, _)| keep.threads.contains_key(tid))
        .map(|(tid, cpus, _)| (tid, cpus.clone()))
        .collect();
    let kept_realtime = kept::as_read(sys, &realtime, &recorded);
    let shield = journal
        .state
        .as_ref()
        .map(|s| s.shield.clone())
        .unwrap_or_default();
    // Unreadable online list: nothing to say, not a reason to fail `off`.
    let offline = procfs::online_cpus(sys)
        .map(|online| shield.difference(&online))
        .unwrap_or_default();
    let still_there = match &journal.state {
        Some(state) if !journal.unreadable.is_empty() => own_cgroups_left(sys, state),
        _ => Vec::new(),
    };
    let damaged_journal = match (undone.failed.is_empty(), journal.unreadable.is_empty()) {
        // Kept in place: another `off` retries what failed.
        (false, _) => None,
        (true, true) => {
            Journal::open(sys)?.remove()?;
            None
        }
        // Nothing left that another `off` could restore: out of the way
        // of the next shield, kept to be looked at.
        (true, false) => Some(Journal::set_aside(sys)?.display().to_string()),
    };
    Ok(OffReport {
        shield,
        nothing_to_undo: false,
        undone,
        unreadable: journal.unreadable,
        damaged_journal,
        still_there,
        dry_run: false,
        would_undo: Vec::new(),
        offline,
        kept_realtime,
        took: Timings::default(),
    })
}

/// The records of `entries` (of the journal whose state is `state`) that
/// name only what a shield changes ([`screen::screen`]), and each other
/// one as a refusal (`record N` of the journal: what and why), not acted
/// on. For the undo of a journal just written (a rollback, an
/// interrupted `on`).
pub(super) fn screened(
    sys: &Sys,
    state: Option<&State>,
    entries: Vec<journal::Entry>,
) -> (Vec<journal::Entry>, Vec<change::Refusal>) {
    let (kept, refused) = screen::screen(sys, EFFECTS, state, entries);
    let refused = (refused.into_iter())
        .map(|(i, why)| change::Refusal {
            target: format!("journal record {}", i + 1),
            reason: why,
        })
        .collect();
    (kept, refused)
}

/// Takes out of a salvaged `journal` the records that name what no shield
/// changes ([`screen::screen`]): each is named, with its segment and
/// place, among what `off` could not read, and is not acted on.
fn keep_within(sys: &Sys, journal: &mut journal::Salvage) {
    let entries = std::mem::take(&mut journal.entries);
    let (kept, refused) = screen::screen(sys, EFFECTS, journal.state.as_ref(), entries);
    let mut out: HashSet<usize> = HashSet::new();
    for (i, why) in refused {
        let Some(origin) = journal.origins.get(i) else {
            continue;
        };
        out.insert(i);
        journal.unreadable.push(Unreadable {
            file: origin.file.clone(),
            reason: format!("record {}: {why}", origin.record),
        });
    }
    let mut i = 0;
    journal.origins.retain(|_| {
        i += 1;
        !out.contains(&(i - 1))
    });
    journal.entries = kept;
}

/// The cgroups the shield of `state` made (its own directory, and on v1
/// the one the rest of the system went to) that still exist.
fn own_cgroups_left(sys: &Sys, state: &State) -> Vec<String> {
    let outside = state.outside_procs.rsplit_once('/').map_or("", |(d, _)| d);
    [state.shield_dir.as_str(), outside]
        .into_iter()
        .filter(|dir| {
            dir.rsplit('/')
                .next()
                .is_some_and(|name| name.contains("cpushield"))
                && sys.exists(dir)
        })
        .map(|dir| format!("/{dir}"))
        .collect()
}

/// What `off` would undo, read from the journal (a damaged one as far as
/// it can be read, naming what cannot); changes nothing.
pub fn off_plan(sys: &Sys) -> Result<OffReport, ShieldError> {
    let mut journal = if Journal::exists(sys) {
        journal::salvage(sys)?
    } else {
        journal::Salvage::default()
    };
    keep_within(sys, &mut journal);
    let (state, entries) = (journal.state, journal.entries);
    let changes = entries
        .iter()
        .filter(|e| !matches!(e.action, Action::Remember { .. }));
    // In the order undo takes them: those undone first, the rest, then
    // those undone last.
    let (first, rest): (Vec<_>, Vec<_>) =
        changes.rev().partition(|e| EFFECTS.undone_first(&e.action));
    let (last, rest): (Vec<_>, Vec<_>) = rest
        .into_iter()
        .partition(|e| EFFECTS.undone_last(&e.action));
    let mut would_undo: Vec<String> = first
        .into_iter()
        .chain(rest)
        .chain(last)
        .map(|e| format!("{}{}", apply::describe(EFFECTS, &e.action), undo_value(e)))
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
        nothing_to_undo: state.is_none() && entries.is_empty() && journal.unreadable.is_empty(),
        undone: Undone::default(),
        unreadable: journal.unreadable,
        damaged_journal: None,
        still_there: Vec::new(),
        dry_run: true,
        would_undo,
        offline: CpuSet::new(),
        kept_realtime: Vec::new(),
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
