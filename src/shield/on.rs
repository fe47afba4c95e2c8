//! `on`: makes the shield, or changes the active one in place; its report.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::apply::{self, Applied, ApplyError, Refusal};
use super::change::{Action, Step, Subject};
use super::components::{self, EFFECTS};
use super::error::{boot_isolation_conflict, require_root, ShieldError};
use super::irqs::IrqRefusal;
use super::journal::{self, Journal, State};
use super::note::Note;
use super::off::undo_journal;
use super::plan::{Plan, PlanError};
use super::request::Request;
use super::snapshot::{self, in_shield_cgroup, CgroupSetup, Snapshot, SYSTEM_CGROUP_V1};
use super::tasks::{self, TaskRef};
use super::timings::Timings;
use super::{guard, irqbalance, irqs, knobs, reshape, rt_kthreads};
use crate::cpulist::CpuSet;
use crate::sys::procfs;
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
    /// The shielded CPUs' kernel threads raised by `--kthreads-above`, as
    /// their scheduling reads back (with `--dry-run`: planned).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kthreads_raised: Vec<rt_kthreads::Raised>,
    /// The plan, with `--dry-run` (printed, not read back from a report).
    #[serde(default, skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Vec<Step>>,
    /// How long it took, by phase (filled in by [`on`]).
    #[serde(default)]
    pub took: Timings,
}

fn state_for(plan: &Plan, cgroup: &CgroupSetup) -> State {
    let mount = cgroup.mount().unwrap_or("");
    let outside_procs = match cgroup {
        CgroupSetup::V1 { .. } => format!("{mount}/{SYSTEM_CGROUP_V1}/cgroup.procs"),
        _ => format!("{mount}/cgroup.procs"),
    };
    State {
        version: 1,
        shield: plan.shield.clone(),
        housekeeping: plan.housekeeping.clone(),
        mechanism: plan.mechanism.clone(),
        shield_dir: plan.shield_dir.clone(),
        outside_procs,
        complete: false,
        partition: plan.partition.clone(),
        irqs_kept: Vec::new(),
        writes_refused: Vec::new(),
        irqbalance_ban: None,
        request: None,
        guard: plan
            .steps
            .iter()
            .any(|s| matches!(s.action, Action::Guard { .. })),
    }
}

/// Shields `req.cpus`. A shield already in place is changed in place
/// ([`reshape`]): the journal keeps the original values, and the shield
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
        let snap = snapshot_for(sys, req)?;
        let plan = components::plan(&snap, req)?;
        return Ok(report(&plan, &snap, None, true));
    }
    require_root(sys, "on")?;
    let _lock = journal::lock(sys)?;
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
    let snap = snapshot_for(sys, req)?;
    timings.snapshot += t.elapsed();
    let t = Instant::now();
    let plan = components::plan(&snap, req)?;
    timings.plan += t.elapsed();
    let mut state = state_for(&plan, &snap.cgroup);
    let journal = Journal::create(sys, &state)?;
    let mut applied = Applied::default();
    let mut respread = Vec::new();
    let (after, _, mut journal) = transaction(
        sys,
        (&snap, &plan, req),
        journal,
        Rollback::Fresh,
        stop,
        (&mut applied, &mut respread),
        timings,
    )?;
    let mut out = report(&plan, &after, Some(&applied), false);
    out.tasks_moved += moved_by_partition(&plan, &after, &applied);
    state.writes_refused = refused_files(&applied);
    finish(
        sys,
        &plan,
        (&snap, &after),
        req,
        &mut state,
        &mut journal,
        &mut out,
        respread,
        timings,
    )?;
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
    },
}

/// The one loop of a change to the machine, for a fresh shield and for a
/// change in place: apply the plan through the journal, move off what
/// forked meanwhile, and for a change in place also move IRQs that came
/// back onto the shield while it changed (irqbalance placing IRQs anew at
/// its restart, seen on Debian 13) off again. On any failure, roll back
/// as `rollback` says and report what was undone. Returns the machine
/// after and the IRQs moved off again.
fn transaction(
    sys: &Sys,
    (snap, plan, req): (&Snapshot, &Plan, &Request),
    mut journal: Journal,
    rollback: Rollback,
    stop: &AtomicBool,
    (applied, respread): (&mut Applied, &mut Vec<u32>),
    timings: &mut Timings,
) -> Result<(Snapshot, Vec<u32>, Journal), ShieldError> {
    let mut came_back = Vec::new();
    let j = &mut journal;
    let result =
        apply_plan(sys, snap, plan, req, j, stop, applied, respread, timings).and_then(|after| {
            if let Rollback::ToKept { state, .. } = &rollback {
                let skip = [plan.irqs_to_shield.as_slice(), &state.irqs_kept].concat();
                let cpus = (&plan.shield, &plan.housekeeping);
                came_back = irqs::sweep((sys, EFFECTS), cpus, &skip, j, stop, applied)?;
            }
            Ok(after)
        });
    let error = match result {
        Ok(after) => return Ok((after, came_back, journal)),
        Err(error) => error,
    };
    let undone = match rollback {
        Rollback::Fresh => {
            let undone = apply::undo(sys, EFFECTS, &journal::read_entries(sys)?);
            if undone.failed.is_empty() {
                journal.remove()?;
            }
            undone
        }
        Rollback::ToKept { segments, state } => {
            let undone = apply::undo(sys, EFFECTS, &journal::read_entries_from(sys, segments)?);
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

/// Applies a plan's steps, then moves off what forked meanwhile; returns
/// the machine after.
#[allow(clippy::too_many_arguments)]
fn apply_plan(
    sys: &Sys,
    snap: &Snapshot,
    plan: &Plan,
    req: &Request,
    journal: &mut Journal,
    stop: &AtomicBool,
    applied: &mut Applied,
    respread: &mut Vec<u32>,
    timings: &mut Timings,
) -> Result<Snapshot, ApplyError> {
    let t = Instant::now();
    let journal_before = journal.time_spent();
    let systemd_before = sys.systemd_time();
    let result = apply::apply(sys, EFFECTS, journal, &plan.steps, stop, applied).and_then(|()| {
        if req.hotplug_restart {
            let cpus = (&plan.shield, &plan.housekeeping);
            *respread = irqs::sweep(
                (sys, EFFECTS),
                cpus,
                &plan.irqs_to_shield,
                journal,
                stop,
                applied,
            )?;
        }
        Ok(())
    });
    let systemd = sys.systemd_time() - systemd_before;
    timings.systemd += systemd;
    timings.apply += t.elapsed() - (journal.time_spent() - journal_before) - systemd;
    result?;
    let t = Instant::now();
    let journal_before = journal.time_spent();
    let r = sweep_forked(sys, snap, plan, journal, stop, applied);
    timings.sweep += t.elapsed() - (journal.time_spent() - journal_before);
    r
}

/// Records the shield as complete and adds what only the machine after
/// (compared with the one `before`) can tell to the report.
#[allow(clippy::too_many_arguments)]
fn finish(
    sys: &Sys,
    plan: &Plan,
    (before, after): (&Snapshot, &Snapshot),
    req: &Request,
    state: &mut State,
    journal: &mut Journal,
    out: &mut OnReport,
    respread: Vec<u32>,
    timings: &mut Timings,
) -> Result<(), ShieldError> {
    state.complete = true;
    state.irqs_kept = out
        .irqs_refused
        .iter()
        .map(|r| r.irq)
        .chain(out.irqs_to_shield.iter().copied())
        .collect();
    state.irqbalance_ban = out.irqbalance_ban.clone();
    out.irqbalance = out
        .irqbalance_ban
        .as_ref()
        .map(|_| irqbalance::process_after(sys, before.owners.irqbalance.as_ref(), &after.threads));
    state.request = Some(req.clone());
    journal.write_state(state)?;
    timings.journal += journal.time_spent();
    timings.segments += journal.segments();
    if !respread.is_empty() {
        out.notes.push(Note::IrqsBackAfterHotplug {
            irqs: respread.clone(),
        });
        out.irqs_moved.extend(respread);
    }
    let read = |tid| sys.sched_attr(tid).ok();
    out.kthreads_raised = rt_kthreads::report(&plan.steps, Some(&read));
    if let CgroupSetup::V2 { .. } = &after.cgroup {
        out.partition = sys
            .read_trimmed(&format!("{}/cpuset.cpus.partition", plan.shield_dir))
            .ok();
    }
    Ok(())
}

/// `on`'s report of a change in place: what only the change knows (the
/// shield before, the tasks that stayed or left, what was refused before).
fn with_change(mut out: OnReport, change: &reshape::Reshape, snap: &Snapshot) -> OnReport {
    out.changed_from = (change.from != change.plan.shield).then(|| change.from.clone());
    out.left_shield = change.leaving.clone();
    out.kept.extend(change.staying.iter().cloned());
    out.irqbalance_ban = out.irqbalance_ban.take().or(change.irqbalance_ban.clone());
    out.irqs_refused
        .extend(change.still_refused.iter().map(|&irq| IrqRefusal {
            irq,
            name: irqs::name(&snap.irqs, irq),
            reason: "refused before; not tried again".into(),
        }));
    out
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

/// Changes the active shield (`state`) in place to `req` (see [`reshape`]).
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
    let snap = snapshot_for(sys, req)?;
    timings.snapshot += t.elapsed();
    let t = Instant::now();
    let read = |p: &str| sys.read_trimmed(p).ok();
    let change = components::change(&snap, (&old, &entries), req, &read)?;
    timings.plan += t.elapsed();
    let plan = &change.plan;
    let finished = |out: OnReport| with_change(out, &change, &snap);
    let stop_guard = old.guard && !change.guard;
    let mut guard_refused = Vec::new();
    if dry_run || (plan.steps.is_empty() && !stop_guard) {
        let out = finished(report(plan, &snap, None, dry_run));
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
    let mut respread = Vec::new();
    let (after, came_back, mut journal) = transaction(
        sys,
        (&snap, plan, req),
        journal,
        Rollback::ToKept {
            segments: kept_segments,
            state: &old,
        },
        stop,
        (&mut applied, &mut respread),
        timings,
    )?;
    if stop_guard {
        // Asked no more: stopped only now that the change holds (a
        // rollback above leaves the old shield whole, its guard with it).
        let mut undone = apply::Undone::default();
        guard::stop(sys, snap.owners.systemd, &mut undone);
        guard_refused = undone.failed;
    }
    state.guard = change.guard;
    state.shield = plan.shield.clone();
    state.housekeeping = plan.housekeeping.clone();
    state.partition = plan.partition.clone().or(old.partition.clone());
    let mut out = finished(report(plan, &after, Some(&applied), false));
    out.other_refused.extend(guard_refused);
    state.writes_refused = refused_files(&applied);
    if !came_back.is_empty() {
        out.notes.push(Note::IrqsBackAfterChange {
            irqs: came_back.clone(),
        });
        out.irqs_moved.extend(came_back);
    }
    finish(
        sys,
        plan,
        (&snap, &after),
        req,
        &mut state,
        &mut journal,
        &mut out,
        respread,
        timings,
    )?;
    Ok(out)
}

/// Reads the snapshot, with the files of the tuning knobs when `req` asks
/// for tuning. Watchdog values an active shield holds off come from its
/// journal (they must not be read while off).
fn snapshot_for(sys: &Sys, req: &Request) -> Result<Snapshot, ShieldError> {
    let mut snap = Snapshot::read(sys)?;
    // Names and flags of the threads a plan may change or report: those on
    // the shield, except the ones the partition moves by itself.
    let shield = &req.cpus;
    let left: HashSet<i32> = snap
        .threads
        .iter()
        .filter(|t| !t.cpus_allowed.is_subset(shield) && tasks::left_to_the_partition(&snap, t))
        .map(|t| t.tid)
        .collect();
    procfs::read_stats(sys, &mut snap.threads, |t| {
        in_shield_cgroup(&t.cgroup) || (t.cpus_allowed.intersects(shield) && !left.contains(&t.tid))
    });
    if !req.tune.is_empty() {
        let knobs = knobs::resolve(&req.tune).map_err(PlanError::from)?;
        let entries = if Journal::exists(sys) {
            journal::read_entries(sys)?
        } else {
            Vec::new()
        };
        let known = knobs::held_by_journal(entries.iter().map(|e| &e.action))
            .into_iter()
            .map(|(path, (_, original))| (path, original))
            .collect();
        snap.tunables = Some(snapshot::read_knob_files(sys, &knobs, &req.cpus, &known));
    }
    Ok(snap)
}

/// Tasks forked while the shield was going up may still carry shielded
/// CPUs (a cpuset stops that only on v2, and only once the partition
/// exists): sweep until none is left, a few rounds at most. Returns the
/// last snapshot read. `before` is the snapshot the plan was made from.
fn sweep_forked(
    sys: &Sys,
    before: &Snapshot,
    plan: &Plan,
    journal: &mut Journal,
    stop: &AtomicBool,
    applied: &mut Applied,
) -> Result<Snapshot, ApplyError> {
    let refused: HashSet<Subject> = applied.refused.iter().map(|r| r.subject.clone()).collect();
    let kept: HashSet<i32> = plan.kept.iter().map(|t| t.tid).collect();
    let mut last: Option<Snapshot> = None;
    for _ in 0..3 {
        let snap = Snapshot::reread(sys, last.as_ref().unwrap_or(before))?;
        let tasks = tasks::plan_tasks(&snap, &plan.shield, &plan.housekeeping, false, |t| {
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
        apply::apply(sys, EFFECTS, journal, &steps, stop, applied)?;
        let all_refused = applied.refused.len() - refused_before == steps.len();
        last = Some(snap);
        if all_refused {
            break;
        }
    }
    Ok(Snapshot::reread(sys, last.as_ref().unwrap_or(before))?)
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

/// How many of the threads the plan left to the partition it moved off the
/// shield (those the sweep had to move are counted with the steps applied).
fn moved_by_partition(plan: &Plan, after: &Snapshot, applied: &Applied) -> usize {
    let stepped: HashSet<i32> = applied.tasks_changed.iter().copied().collect();
    let left: HashSet<i32> = plan
        .left_to_partition
        .iter()
        .copied()
        .filter(|tid| !stepped.contains(tid))
        .collect();
    after
        .threads
        .iter()
        .filter(|t| left.contains(&t.tid) && !t.cpus_allowed.intersects(&plan.shield))
        .count()
}

fn report(plan: &Plan, snap: &Snapshot, applied: Option<&Applied>, dry_run: bool) -> OnReport {
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
        kthreads_raised: if dry_run {
            rt_kthreads::report(&plan.steps, None)
        } else {
            Vec::new()
        },
        plan: dry_run.then(|| plan.steps.clone()),
        took: Timings::default(),
    }
}
