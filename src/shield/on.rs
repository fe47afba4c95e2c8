//! `on`: makes the shield, or changes the active one in place; its report.

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use super::apply::{self, Applied, ApplyError};
use super::change::Subject;
use super::component::Reporting;
use super::components::report;
use super::components::settle::{settle, Settled};
use super::components::{self, read, EFFECTS};
use super::error::{boot_isolation_conflict, require_root, ShieldError};
use super::journal::{self, Journal, State};
use super::off::{screened, undo_journal};
use super::parts::OwnFacts;
use super::plan::Plan;
use super::report::OnReport;
use super::request::Request;
use super::snapshot::Snapshot;
use super::timings::Timings;
use super::undo;
use crate::sys::Sys;

/// Shields `req.cpus`. A shield already in place is changed in place
/// ([`super::reshape`]): the journal keeps the original values, and the shield
/// stays up throughout. On any failure everything done is rolled back (to
/// the old shield, when there was one).
pub fn on(
    sys: &Sys,
    req: &Request,
    dry_run: bool,
    stop: &AtomicBool,
) -> Result<OnReport, ShieldError> {
    let started = Instant::now();
    let mut timings = Timings::default();
    let mut report = on_timed(sys, req, dry_run, stop, &mut timings)?;
    timings.total = started.elapsed();
    report.took = timings;
    Ok(report)
}

/// A repair: the change in place `on` with the active shield's own request
/// makes, that request read under the lock, so that a shield an `on`
/// changed while the repair waited is repaired as it is now, never taken
/// back to the request before (the healer's repair and a person's `on`
/// meet). None without a complete shield that has a request.
pub fn repair(sys: &Sys, stop: &AtomicBool) -> Result<Option<OnReport>, ShieldError> {
    let started = Instant::now();
    require_root(sys, "repair")?;
    let _lock = journal::lock_for_repair(sys)?;
    let Some(state) = journal::read_state(sys)?.filter(|s| s.complete) else {
        return Ok(None);
    };
    let Some(req) = state.request.clone() else {
        return Ok(None);
    };
    let mut timings = Timings::default();
    let mut report = reshape_timed(sys, &req, state, false, stop, &mut timings)?;
    timings.total = started.elapsed();
    report.took = timings;
    Ok(Some(report))
}

/// [`on`], adding the time of each phase to `timings`.
pub fn on_timed(
    sys: &Sys,
    req: &Request,
    dry_run: bool,
    stop: &AtomicBool,
    timings: &mut Timings,
) -> Result<OnReport, ShieldError> {
    if dry_run {
        if let Some(state) = journal::read_state(sys)?.filter(|s| s.complete) {
            return reshape_timed(sys, req, state, true, stop, timings);
        }
        let snap = read::snapshot_for(sys, req)?;
        let plan = components::plan(&snap, req)?;
        return Ok(report::report(&Reporting {
            sys,
            plan: &plan,
            before: &snap,
            after: &snap,
            applied: None,
            dry_run: true,
            change: None,
            settled: &OwnFacts::default(),
        }));
    }
    require_root(sys, "on")?;
    let _lock = journal::lock_past_repair(sys)?;
    if Journal::exists(sys) {
        match journal::read_state(sys)? {
            Some(state) if state.complete => {
                return reshape_timed(sys, req, state, false, stop, timings)
            }
            // An `on` that was interrupted: validate the new list before
            // touching what it left, undo that, and start afresh.
            _ => {
                let snap = Snapshot::read_without_threads(sys)?;
                components::plan(&snap, req)?;
                undo_journal(sys, timings)?;
            }
        }
    }
    let t = Instant::now();
    let snap = read::snapshot_for(sys, req)?;
    timings.snapshot += t.elapsed();
    let t = Instant::now();
    let plan = components::plan(&snap, req)?;
    timings.plan += t.elapsed();
    let mut state = report::state_for(&plan, &snap.cgroup);
    let journal = Journal::create(sys, &state)?;
    let mut applied = Applied::default();
    let (settled, mut journal) = transaction(
        sys,
        (&snap, &plan, req),
        journal,
        Rollback::Fresh,
        stop,
        &mut applied,
        timings,
    )?;
    let mut out = report::report(&Reporting {
        sys,
        plan: &plan,
        before: &snap,
        after: &settled.after,
        applied: Some(&applied),
        dry_run: false,
        change: None,
        settled: &settled.parts,
    });
    state.writes_refused = refused_files(&applied);
    let journal = (&mut state, &mut journal);
    finish(sys, &plan, settled, req, journal, &mut out, timings)?;
    Ok(out)
}

/// What a failed change rolls back to.
enum Rollback<'a> {
    /// Nothing: a fresh shield; every entry is undone and the journal removed.
    Fresh,
    /// The shield before an in-place change: the entries past its
    /// `segments` are undone, the journal cut back to them and `state`
    /// written back.
    ToKept {
        /// The journal's segments before the change.
        segments: usize,
        /// The state before the change.
        state: &'a State,
        /// The journal's records before the change.
        kept: &'a [journal::Entry],
    },
}

/// The one loop of a change to the machine, for a fresh shield and for a
/// change in place: apply the plan through the journal, then let the
/// components settle what moved meanwhile ([`settle`]). On any failure,
/// roll back as `rollback` says and report what was undone.
fn transaction(
    sys: &Sys,
    (snap, plan, req): (&Snapshot, &Plan, &Request),
    mut journal: Journal,
    rollback: Rollback,
    stop: &AtomicBool,
    applied: &mut Applied,
    timings: &mut Timings,
) -> Result<(Settled, Journal), ShieldError> {
    let in_place = match &rollback {
        Rollback::ToKept { state, .. } => Some(*state),
        Rollback::Fresh => None,
    };
    let change = (snap, plan, req);
    let error = match apply_plan(sys, change, in_place, &mut journal, stop, applied, timings) {
        Ok(settled) => return Ok((settled, journal)),
        Err(error) => error,
    };
    // What a rollback reads back is screened as `off` screens it.
    let undo = |entries: Vec<journal::Entry>, state: Option<&State>| {
        let (entries, refused) = screened(sys, state, entries);
        let mut undone = undo::undo(sys, EFFECTS, &entries);
        undone.failed.extend(refused);
        undone
    };
    let undone = match rollback {
        Rollback::Fresh => {
            let state = journal::read_state(sys)?;
            let undone = undo(journal::read_entries(sys)?, state.as_ref());
            if undone.failed.is_empty() {
                journal.remove()?;
            }
            undone
        }
        Rollback::ToKept {
            segments,
            state,
            kept,
        } => {
            let mut entries = journal::read_entries_from(sys, segments)?;
            crate::shield::reshape::undone_to_now(&mut entries, snap, kept);
            let undone = undo(entries, Some(state));
            if undone.failed.is_empty() {
                journal.truncate(segments)?;
                journal.write_state(state)?;
            }
            undone
        }
    };
    let hint = boot_isolation_conflict(&error, &snap.boot_isolated, &plan.shield);
    Err(ShieldError::RolledBack {
        error: Box::new(error),
        undone: Box::new(undone),
        hint,
    })
}

/// Applies a plan's steps, then settles what moved meanwhile.
fn apply_plan(
    sys: &Sys,
    change: (&Snapshot, &Plan, &Request),
    in_place: Option<&State>,
    journal: &mut Journal,
    stop: &AtomicBool,
    applied: &mut Applied,
    timings: &mut Timings,
) -> Result<Settled, ApplyError> {
    let t = Instant::now();
    let journal_before = journal.time_spent();
    let systemd_before = sys.systemd_time();
    let result = apply::apply(sys, EFFECTS, journal, &change.1.steps, stop, applied);
    let systemd = sys.systemd_time() - systemd_before;
    timings.systemd += systemd;
    timings.apply += t.elapsed() - (journal.time_spent() - journal_before) - systemd;
    result?;
    let t = Instant::now();
    let journal_before = journal.time_spent();
    let settled = settle(sys, change, in_place, journal, stop, applied);
    timings.sweep += t.elapsed() - (journal.time_spent() - journal_before);
    settled
}

/// Adds what the components settled to say to the report, records the
/// shield as complete with what the components keep of it, and reads the
/// partition back.
fn finish(
    sys: &Sys,
    plan: &Plan,
    settled: Settled,
    req: &Request,
    (state, journal): (&mut State, &mut Journal),
    out: &mut OnReport,
    timings: &mut Timings,
) -> Result<(), ShieldError> {
    out.notes.extend(settled.notes);
    state.complete = true;
    report::read_back(sys, (plan, &settled.after), state, out);
    state.request = Some(req.clone());
    journal.write_state(state)?;
    timings.journal += journal.time_spent();
    timings.segments += journal.segments();
    Ok(())
}

/// A change in place with nothing to change on the machine (or a dry run):
/// a request that differs only in what leaves no trace (flags) is recorded.
fn nothing_to_change(
    sys: &Sys,
    req: &Request,
    old: &State,
    dry_run: bool,
    mut out: OnReport,
) -> Result<OnReport, ShieldError> {
    if !dry_run && old.request.as_ref() != Some(req) {
        let mut journal = Journal::open(sys)?;
        let mut state = old.clone();
        state.request = Some(req.clone());
        journal.write_state(&state)?;
    }
    out.partition = old.partition.clone();
    Ok(out)
}

/// Changes the active shield (`state`) in place to `req` (see [`super::reshape`]).
/// Changes only what differs; nothing at all when the machine already
/// matches. A failure rolls back this change only: the old shield stays.
fn reshape_timed(
    sys: &Sys,
    req: &Request,
    old: State,
    dry_run: bool,
    stop: &AtomicBool,
    timings: &mut Timings,
) -> Result<OnReport, ShieldError> {
    let t = Instant::now();
    let entries = journal::read_entries(sys)?;
    let snap = read::snapshot_for(sys, req)?;
    timings.snapshot += t.elapsed();
    let t = Instant::now();
    let read = |p: &str| sys.read_trimmed(p).ok();
    let change = components::change(&snap, (&old, &entries), req, &read)?;
    if let Some(why) = components::refuse_leaving(sys, &change.leaving, &req.cpus) {
        return Err(ShieldError::Invalid(format!("{why}; nothing was changed")));
    }
    timings.plan += t.elapsed();
    let plan = &change.plan;
    let stopping = components::left_running(&old, &change.records);
    let mut stop_refused = Vec::new();
    if dry_run || (plan.steps.is_empty() && !stopping) {
        let out = report::report(&Reporting {
            sys,
            plan,
            before: &snap,
            after: &snap,
            applied: None,
            dry_run,
            change: Some(&change),
            settled: &OwnFacts::default(),
        });
        return nothing_to_change(sys, req, &old, dry_run, out);
    }
    let mut journal = Journal::open(sys)?;
    let kept_segments = journal.segments();
    let mut state = State {
        complete: false,
        ..old.clone()
    };
    journal.write_state(&state)?;
    let mut applied = Applied::default();
    let rollback = Rollback::ToKept {
        segments: kept_segments,
        state: &old,
        kept: &entries,
    };
    let change_made = (&snap, plan, req);
    let (settled, mut journal) = transaction(
        sys,
        change_made,
        journal,
        rollback,
        stop,
        &mut applied,
        timings,
    )?;
    if stopping {
        // Asked no more: stopped only now that the change holds (a
        // rollback above leaves the old shield whole, the guard with it).
        stop_refused = components::stop_left_running(sys, &old, &change.records, &snap);
    }
    // What the components keep of the new shield, in this version's shape.
    state.parts = change.records.clone();
    state.older.clear();
    state.shield = plan.shield.clone();
    state.housekeeping = plan.housekeeping.clone();
    state.partition = plan.partition.clone().or(old.partition.clone());
    let mut out = report::report(&Reporting {
        sys,
        plan,
        before: &snap,
        after: &settled.after,
        applied: Some(&applied),
        dry_run: false,
        change: Some(&change),
        settled: &settled.parts,
    });
    out.other_refused.extend(stop_refused);
    state.writes_refused = refused_files(&applied);
    finish(
        sys,
        plan,
        settled,
        req,
        (&mut state, &mut journal),
        &mut out,
        timings,
    )?;
    journal.fold(sys, EFFECTS)?;
    Ok(out)
}

/// Files whose write the kernel refused (a knob file that is read-only or
/// refuses): `status` does not expect them to read as written.
fn refused_files(applied: &Applied) -> Vec<String> {
    applied
        .refused
        .iter()
        .filter_map(|r| match &r.subject {
            Subject::File(path) => Some(path.clone()),
            _ => None,
        })
        .collect()
}
