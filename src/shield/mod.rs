//! Shielding: `snapshot → plan → journal → apply → verify → report`, and
//! `undo` as the journal replayed in reverse.
//!
//! Touches the kernel only through [`crate::sys::Sys`]; its runtime state
//! lives in the journal under `run/cpushield` of the same root.

pub mod apply;
pub mod change;
pub mod irqbalance;
pub mod journal;
pub mod knobs;
pub mod owners;
pub mod plan;
pub mod request;
pub mod reshape;
pub mod snapshot;

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;
use crate::sys::procfs::{self, Hierarchy};
use crate::sys::{syscalls, Sys, SysError};
use apply::{Applied, ApplyError, Refusal, Undone};
use change::{Action, Step};
use journal::{Journal, JournalError, State};
use plan::{Plan, PlanError, TaskRef};
use request::Request;
use snapshot::{in_shield_cgroup, CgroupSetup, Snapshot, SHIELD_SLICE, SYSTEM_CGROUP_V1};

/// Everything that can stop a shield command.
#[derive(Debug, thiserror::Error)]
pub enum ShieldError {
    /// Changing the system needs root.
    #[error(
        "cpushield {0} changes the whole system and must run as root (try: sudo cpushield {0} ...)"
    )]
    NotRoot(&'static str),
    /// The request is not valid on this machine; nothing was changed.
    #[error("{0}; nothing was changed")]
    Plan(#[from] PlanError),
    /// Journal trouble.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// Reading the system failed.
    #[error(transparent)]
    Sys(#[from] SysError),
    /// Applying failed; what was done has been undone.
    #[error("{error}; rolled back {} change(s){}{}", undone.restored, failed_note(undone), hint.as_deref().map(|h| format!("\n{h}")).unwrap_or_default())]
    RolledBack {
        /// The failure.
        error: Box<ApplyError>,
        /// What the rollback did.
        undone: Box<Undone>,
        /// What the failure means on this machine and what to do, when known.
        hint: Option<String>,
    },
    /// `run` or `move` without a shield.
    #[error("no shield is active (start one with: cpushield on CPULIST)")]
    NoShield,
    /// A bad argument of `run` or `move`.
    #[error("{0}")]
    Invalid(String),
}

/// When the kernel refused the shield's partition because of CPUs isolated
/// at boot (`isolcpus=` with the `domain` flag), what that means and the
/// choices. Seen: 7.x accepts only an `isolated` partition over such CPUs
/// (any mix), Debian's 6.12 refuses every partition that holds one of them
/// (tests/vm/KERNEL-NOTES.md, "Booted with isolcpus").
fn boot_isolation_conflict(
    error: &ApplyError,
    boot_isolated: &CpuSet,
    shield: &CpuSet,
) -> Option<String> {
    let ApplyError::NotHonoured { path, read, .. } = error else {
        return None;
    };
    let cpus = boot_isolated.intersection(shield);
    if !path.ends_with("cpuset.cpus.partition") || !read.contains("housekeeping") || cpus.is_empty()
    {
        return None;
    }
    Some(format!(
        "CPUs {cpus} are isolated at boot (isolcpus= with the domain flag, /sys/devices/system/cpu/isolated: {boot_isolated}), \
         and this kernel refuses a cpuset partition over them. Choices: boot without the domain flag, as \
         'cpushield boot-args {shield}' prints and the config key 'boot = true' writes \
         (isolcpus=managed_irq,... with nohz_full= and rcu_nocbs=; the shield's isolated partition then does the \
         domain isolation at run time); or shield CPUs that are not isolated at boot (isolated at boot: {boot_isolated})"
    ))
}

fn failed_note(u: &Undone) -> String {
    if u.failed.is_empty() {
        String::new()
    } else {
        let list: Vec<String> = u
            .failed
            .iter()
            .map(|f| format!("{}: {}", f.target, f.reason))
            .collect();
        format!("; could NOT restore: {}", list.join("; "))
    }
}

pub(crate) fn require_root(sys: &Sys, command: &'static str) -> Result<(), ShieldError> {
    if sys.is_fixture() || nix::unistd::geteuid().is_root() {
        Ok(())
    } else {
        Err(ShieldError::NotRoot(command))
    }
}

/// An IRQ that refused its new affinity.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct IrqRefusal {
    /// IRQ number.
    pub irq: u32,
    /// Device name.
    pub name: String,
    /// Why (errno name).
    pub reason: String,
}

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
    /// Notes for the user.
    pub notes: Vec<String>,
    /// The shield before, when an active shield was changed in place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_from: Option<CpuSet>,
    /// Tasks that were inside the shield and had to leave it (all their
    /// CPUs left the shield), moved out to the housekeeping CPUs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_shield: Vec<TaskRef>,
    /// The plan, with `--dry-run`.
    #[serde(skip_serializing_if = "Option::is_none")]
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
        irqbalance_ban: None,
        request: None,
    }
}

/// Wall-clock time spent in each phase of [`on_timed`] and [`off_timed`]:
/// what `on` and `off` report as `took`, and the scale benchmark prints.
/// In JSON, milliseconds.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Timings {
    /// The whole command (set by [`on`] and [`off`]; the `_timed` forms
    /// leave it to their caller, which times the call itself).
    #[serde(with = "millis")]
    pub total: Duration,
    /// Reading the snapshot (tasks, IRQs, cgroups) before planning.
    #[serde(with = "millis")]
    pub snapshot: Duration,
    /// Planning (pure).
    #[serde(with = "millis")]
    pub plan: Duration,
    /// Writing journal segments and the state record (fsync included).
    #[serde(with = "millis")]
    pub journal: Duration,
    /// Journal segments written.
    pub segments: usize,
    /// Making the planned changes and reading them back (journal and
    /// systemd excluded).
    #[serde(with = "millis")]
    pub apply: Duration,
    /// Waiting for systemd: transient units started and stopped,
    /// irqbalance restarted (`on`: within apply; `off`: within undo).
    #[serde(with = "millis", default)]
    pub systemd: Duration,
    /// The sweep for tasks forked meanwhile: snapshot, plan, apply (journal excluded).
    #[serde(with = "millis")]
    pub sweep: Duration,
    /// Reading the journal back for undo.
    #[serde(with = "millis")]
    pub read_journal: Duration,
    /// Undo of writes, cgroups and cgroup moves, in reverse.
    #[serde(with = "millis")]
    pub undo_writes: Duration,
    /// Undo of thread affinities.
    #[serde(with = "millis")]
    pub undo_affinities: Duration,
}

/// Durations as milliseconds (fractional) in JSON.
mod millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64((d.as_secs_f64() * 1e6).round() / 1e3)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let ms = f64::deserialize(d)?;
        Duration::try_from_secs_f64(ms / 1e3).map_err(serde::de::Error::custom)
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
        let plan = plan::plan(&snap, req)?;
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
                plan::plan(&snap, req)?;
                undo_journal(sys, timings)?;
            }
        }
    }
    let t = Instant::now();
    let snap = snapshot_for(sys, req)?;
    timings.snapshot += t.elapsed();
    let t = Instant::now();
    let plan = plan::plan(&snap, req)?;
    timings.plan += t.elapsed();
    let mut state = state_for(&plan, &snap.cgroup);
    let mut journal = Journal::create(sys, &state)?;
    let mut applied = Applied::default();
    let mut respread = Vec::new();
    let result = apply_plan(
        sys,
        &snap,
        &plan,
        req,
        &mut journal,
        stop,
        &mut applied,
        &mut respread,
        timings,
    );
    let after = match result {
        Ok(after) => after,
        Err(error) => {
            let entries = journal::read_entries(sys)?;
            let undone = apply::undo(sys, &entries);
            if undone.failed.is_empty() {
                journal.remove()?;
            }
            let hint = boot_isolation_conflict(&error, &snap.boot_isolated, &plan.shield);
            return Err(ShieldError::RolledBack {
                error: Box::new(error),
                undone: Box::new(undone),
                hint,
            });
        }
    };
    let mut out = report(&plan, &after, Some(&applied), false);
    out.tasks_moved += moved_by_partition(&plan, &after, &applied);
    out.irqbalance = out
        .irqbalance_ban
        .as_ref()
        .map(|_| irqbalance::process_after(sys, snap.owners.irqbalance.as_ref(), &after.threads));
    finish(
        sys,
        &plan,
        &after,
        req,
        &mut state,
        &mut journal,
        &mut out,
        respread,
        timings,
    )?;
    Ok(out)
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
    let result = apply::apply(sys, journal, &plan.steps, stop, applied).and_then(|()| {
        if req.hotplug_restart {
            *respread = sweep_irqs(sys, plan, journal, stop, applied, &[])?;
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
/// can tell to the report.
#[allow(clippy::too_many_arguments)]
fn finish(
    sys: &Sys,
    plan: &Plan,
    after: &Snapshot,
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
    state.request = Some(req.clone());
    journal.write_state(state)?;
    timings.journal += journal.time_spent();
    timings.segments += journal.segments();
    if !respread.is_empty() {
        let list: Vec<String> = respread.iter().map(u32::to_string).collect();
        out.notes.push(format!(
            "--hotplug-restart: IRQs {} came back onto the shield when the CPUs came online (their driver sets them on CPU hotplug); moved off again",
            list.join(", ")
        ));
        out.irqs_moved.extend(respread);
    }
    if let CgroupSetup::V2 { .. } = &after.cgroup {
        out.partition = sys
            .read_trimmed(&format!("{}/cpuset.cpus.partition", plan.shield_dir))
            .ok();
    }
    Ok(())
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
    let change = reshape::plan(&snap, &entries, &old, req, |p| sys.read_trimmed(p).ok())?;
    timings.plan += t.elapsed();
    let plan = &change.plan;
    let changed_from = (change.from != plan.shield).then(|| change.from.clone());
    let finished = |mut out: OnReport| {
        out.changed_from = changed_from.clone();
        out.left_shield = change.leaving.clone();
        out.kept.extend(change.staying.iter().cloned());
        out.irqbalance_ban = out.irqbalance_ban.take().or(change.irqbalance_ban.clone());
        out.irqs_refused
            .extend(change.still_refused.iter().map(|&irq| IrqRefusal {
                irq,
                name: irq_name(&snap, irq),
                reason: "refused before; not tried again".into(),
            }));
        out
    };
    if dry_run || plan.steps.is_empty() {
        let mut out = finished(report(plan, &snap, None, dry_run));
        if !dry_run && old.request.as_ref() != Some(req) {
            // Nothing to change on the machine, but the request differs in
            // what leaves no trace (flags): record it.
            let mut journal = Journal::open(sys)?;
            let mut state = old.clone();
            state.request = Some(req.clone());
            journal.write_state(&state)?;
        }
        out.partition = old.partition.clone();
        return Ok(out);
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
    let result = apply_plan(
        sys,
        &snap,
        plan,
        req,
        &mut journal,
        stop,
        &mut applied,
        &mut respread,
        timings,
    );
    // IRQs that came back onto the shield while it changed (irqbalance
    // placing IRQs anew at its restart, seen on Debian 13): off again.
    let mut came_back = Vec::new();
    let result = result.and_then(|after| {
        came_back = sweep_irqs(sys, plan, &mut journal, stop, &mut applied, &old.irqs_kept)?;
        Ok(after)
    });
    let after = match result {
        Ok(after) => after,
        Err(error) => {
            let entries = journal::read_entries_from(sys, kept_segments)?;
            let undone = apply::undo(sys, &entries);
            if undone.failed.is_empty() {
                journal.truncate(kept_segments)?;
                journal.write_state(&old)?;
            }
            let hint = boot_isolation_conflict(&error, &snap.boot_isolated, &plan.shield);
            return Err(ShieldError::RolledBack {
                error: Box::new(error),
                undone: Box::new(undone),
                hint,
            });
        }
    };
    state.shield = plan.shield.clone();
    state.housekeeping = plan.housekeeping.clone();
    state.partition = plan.partition.clone().or(old.partition.clone());
    let mut out = finished(report(plan, &after, Some(&applied), false));
    out.irqbalance = out
        .irqbalance_ban
        .as_ref()
        .map(|_| irqbalance::process_after(sys, snap.owners.irqbalance.as_ref(), &after.threads));
    if !came_back.is_empty() {
        let list: Vec<String> = came_back.iter().map(u32::to_string).collect();
        out.notes.push(format!(
            "IRQs {} came back onto the shield while it changed (irqbalance places IRQs anew when it restarts); moved off again",
            list.join(", ")
        ));
        out.irqs_moved.extend(came_back);
    }
    finish(
        sys,
        plan,
        &after,
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
        .filter(|t| !t.cpus_allowed.is_subset(shield) && plan::left_to_the_partition(&snap, t))
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

/// After CPU hotplug some drivers set their IRQs' affinity again (seen:
/// virtio-net spreads its queue IRQs from its CPU hotplug callbacks, over
/// what the shield wrote before the CPUs went offline). Moves every IRQ
/// that came back onto the shield off it again, journaled like the first
/// move (undo writes the driver's value back, then the original). Returns
/// the IRQs moved.
fn sweep_irqs(
    sys: &Sys,
    plan: &Plan,
    journal: &mut Journal,
    stop: &AtomicBool,
    applied: &mut Applied,
    skip: &[u32],
) -> Result<Vec<u32>, ApplyError> {
    let refused: HashSet<String> = applied.refused.iter().map(|r| r.target.clone()).collect();
    let mut steps = Vec::new();
    let mut irqs = Vec::new();
    for irq in snapshot::read_irqs(sys)? {
        if plan.irqs_to_shield.contains(&irq.irq)
            || skip.contains(&irq.irq)
            || !irq.affinity.intersects(&plan.shield)
        {
            continue;
        }
        let action = Action::Write {
            path: snapshot::irq_affinity_file(irq.irq),
            value: plan::away_from(&irq.affinity, &plan.shield, &plan.housekeeping).to_string(),
            check: change::Check::CpuList,
            undo: change::Undo::Previous,
        };
        if refused.contains(&apply::describe(&action)) {
            continue;
        }
        irqs.push(irq.irq);
        steps.push(Step {
            action,
            fatal: false,
        });
    }
    let before = applied.refused.len();
    apply::apply(sys, journal, &steps, stop, applied)?;
    let now_refused: HashSet<String> = applied.refused[before..]
        .iter()
        .map(|r| r.target.clone())
        .collect();
    irqs.retain(|&n| {
        !now_refused
            .iter()
            .any(|t| snapshot::irq_of_affinity_file(t) == Some(n))
    });
    Ok(irqs)
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
    let refused: HashSet<String> = applied.refused.iter().map(|r| r.target.clone()).collect();
    let kept: HashSet<i32> = plan.kept.iter().map(|t| t.tid).collect();
    let mut last: Option<Snapshot> = None;
    for _ in 0..3 {
        let snap = Snapshot::reread(sys, last.as_ref().unwrap_or(before))?;
        let tasks = plan::plan_tasks(&snap, &plan.shield, &plan.housekeeping, false, |t| {
            !kept.contains(&t.tid)
        });
        let steps: Vec<Step> = tasks
            .steps
            .into_iter()
            .filter(|s| !refused.contains(&apply::describe(&s.action)))
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
        apply::apply(sys, journal, &steps, stop, applied)?;
        let all_refused = applied.refused.len() - refused_before == steps.len();
        last = Some(snap);
        if all_refused {
            break;
        }
    }
    Ok(Snapshot::reread(sys, last.as_ref().unwrap_or(before))?)
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

/// The device name of IRQ `irq` in the snapshot (empty when unknown).
fn irq_name(snap: &Snapshot, irq: u32) -> String {
    snap.irqs
        .iter()
        .find(|i| i.irq == irq)
        .map(|i| i.name.clone())
        .unwrap_or_default()
}

fn report(plan: &Plan, snap: &Snapshot, applied: Option<&Applied>, dry_run: bool) -> OnReport {
    let mut irqs_moved = Vec::new();
    let mut irqs_refused = Vec::new();
    let mut tasks_refused = Vec::new();
    let mut other_refused = Vec::new();
    let refused_paths: HashSet<String> = applied
        .map(|a| a.refused.iter().map(|r| r.target.clone()).collect())
        .unwrap_or_default();
    for step in &plan.steps {
        if let Action::Write { path, .. } = &step.action {
            if let Some(irq) = snapshot::irq_of_affinity_file(path) {
                if !refused_paths.contains(&format!("/{path}"))
                    && !plan.irqs_to_shield.contains(&irq)
                {
                    irqs_moved.push(irq);
                }
            }
        }
    }
    if let Some(a) = applied {
        for r in &a.refused {
            match snapshot::irq_of_affinity_file(&r.target) {
                Some(irq) => irqs_refused.push(IrqRefusal {
                    irq,
                    name: irq_name(snap, irq),
                    reason: r.reason.clone(),
                }),
                None if r.target.starts_with("task ") => tasks_refused.push(r.clone()),
                None => other_refused.push(r.clone()),
            }
        }
    }
    let irqs_effective_on_shield = snap
        .irqs
        .iter()
        .filter(|i| !plan.irqs_to_shield.contains(&i.irq))
        .filter(|i| {
            i.effective
                .as_ref()
                .is_some_and(|e| e.intersects(&plan.shield))
        })
        .map(|i| i.irq)
        .collect();
    // What the report says was kept is what the kernel shows.
    let (kept, not_kept) = if dry_run {
        (plan.kept.clone(), Vec::new())
    } else {
        let now: std::collections::HashMap<i32, &procfs::Thread> =
            snap.threads.iter().map(|t| (t.tid, t)).collect();
        let mut kept = Vec::new();
        let mut not_kept = Vec::new();
        for want in &plan.kept {
            match now.get(&want.tid) {
                Some(t) if in_shield_cgroup(&t.cgroup) && t.cpus_allowed == want.cpus => {
                    kept.push(TaskRef::from(*t))
                }
                Some(t) => not_kept.push(TaskRef::from(*t)),
                None => {}
            }
        }
        (kept, not_kept)
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
        tasks_refused,
        irqs_moved,
        irqs_to_shield: plan.irqs_to_shield.clone(),
        irqs_refused,
        irqs_effective_on_shield,
        other_refused,
        irqbalance_ban: plan.steps.iter().find_map(|s| match &s.action {
            Action::IrqbalanceBan { banned, .. }
                if !refused_paths.contains(&apply::describe(&s.action)) =>
            {
                Some(banned.clone())
            }
            _ => None,
        }),
        irqbalance: None,
        notes: plan.notes.clone(),
        changed_from: None,
        left_shield: Vec::new(),
        plan: dry_run.then(|| plan.steps.clone()),
        took: Timings::default(),
    }
}

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

fn undo_journal(sys: &Sys, timings: &mut Timings) -> Result<(Option<State>, Undone), ShieldError> {
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
    pub notes: Vec<String>,
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
    match &snap.cgroup {
        CgroupSetup::V2 {
            mount,
            subtree_control,
            ..
        } => {
            if !subtree_control.iter().any(|c| c == "cpuset") {
                broken(
                    "cpuset-controller",
                    format!("the cpuset controller is no longer enabled in /{mount}/cgroup.subtree_control: nothing enforces the shield"),
                    &rebuild,
                );
            }
            let dir = &state.shield_dir;
            match partition {
                None => broken(
                    "partition",
                    format!("the shield's cgroup /{dir} or its partition file is gone"),
                    &rebuild,
                ),
                Some(p)
                    if p.contains("invalid")
                        || state
                            .partition
                            .as_deref()
                            .is_some_and(|want| !p.starts_with(want)) =>
                {
                    broken(
                        "partition",
                        format!("/{dir}/cpuset.cpus.partition reads {p:?}"),
                        &rebuild,
                    )
                }
                Some(_) => {}
            }
            if let Ok(eff) = sys.read_cpulist(&format!("{mount}/cpuset.cpus.effective")) {
                let open = eff.intersection(shield);
                if !open.is_empty() {
                    broken(
                        "enforcement",
                        format!("the kernel lets tasks outside the shield run on CPUs {open} (/{mount}/cpuset.cpus.effective is {eff})"),
                        &rebuild,
                    );
                }
            }
        }
        CgroupSetup::V1 { mount, .. } => {
            let file = format!("{mount}/{SYSTEM_CGROUP_V1}/cpuset.cpus");
            match sys.read_cpulist(&file) {
                Ok(c) if !c.intersects(shield) => {}
                Ok(c) => broken(
                    "enforcement",
                    format!("/{file} reads {c}, which includes shielded CPUs"),
                    &rebuild,
                ),
                Err(_) => broken("enforcement", format!("/{file} is gone"), &rebuild),
            }
        }
        _ => broken(
            "cpuset-controller",
            "no cpuset hierarchy is mounted any more".into(),
            &rebuild,
        ),
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
        mechanism: plan::mechanism(&snap),
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

/// Direction of `move`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Direction {
    /// Into the shield.
    In,
    /// Out to the housekeeping CPUs.
    Out,
}

/// The result of `move`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MoveReport {
    /// `--dry-run`: `moved` is what would move; nothing moved.
    #[serde(default)]
    pub dry_run: bool,
    /// Threads moved.
    pub moved: Vec<TaskRef>,
    /// Ids that do not exist.
    pub not_found: Vec<i32>,
}

fn active_state(sys: &Sys) -> Result<State, ShieldError> {
    match journal::read_state(sys)? {
        Some(s) if s.complete => Ok(s),
        Some(_) => Err(ShieldError::Invalid(
            "the last 'cpushield on' did not finish; run 'cpushield off' first".into(),
        )),
        None => Err(ShieldError::NoShield),
    }
}

fn check_cpu(cpu: Option<u32>, allowed: &CpuSet, what: &str) -> Result<CpuSet, ShieldError> {
    match cpu {
        None => Ok(allowed.clone()),
        Some(c) if allowed.contains(c) => Ok([c].into_iter().collect()),
        Some(c) => Err(ShieldError::Invalid(format!(
            "--cpu {c} is not one of the {what} CPUs ({allowed})"
        ))),
    }
}

/// Moves processes (all their threads) or single threads into or out of the
/// shield. Every move is journaled, so `off` gives the tasks back.
pub fn move_tasks(
    sys: &Sys,
    ids: &[i32],
    direction: Direction,
    cpu: Option<u32>,
    single_thread: bool,
    dry_run: bool,
) -> Result<MoveReport, ShieldError> {
    let _lock = if dry_run {
        None
    } else {
        require_root(sys, "move")?;
        Some(journal::lock(sys)?)
    };
    let state = active_state(sys)?;
    let cgroup = snapshot::detect_cgroup(sys)?;
    let v1 = matches!(cgroup, CgroupSetup::V1 { .. });
    if single_thread && !v1 {
        return Err(ShieldError::Invalid(
            "--thread needs a cgroup v1 cpuset: cgroup v2 places whole processes, not single threads".into(),
        ));
    }
    let (cpus, dest_dir) = match direction {
        Direction::In => (
            check_cpu(cpu, &state.shield, "shielded")?,
            state.shield_dir.clone(),
        ),
        Direction::Out => {
            let dir = state
                .outside_procs
                .rsplit_once('/')
                .map_or(String::new(), |(d, _)| d.to_string());
            (check_cpu(cpu, &state.housekeeping, "housekeeping")?, dir)
        }
    };
    let mount = cgroup.mount().unwrap_or("").to_string();
    let file = if single_thread {
        "tasks"
    } else {
        "cgroup.procs"
    };
    // Under systemd a process changes cgroup as a transient scope of its
    // own (systemd moves it and keeps it there through reloads): in the
    // shield's slice, or in system.slice when it leaves the shield.
    let by_systemd =
        (state.shield_dir.ends_with(SHIELD_SLICE) && !single_thread).then(|| match direction {
            Direction::In => (SHIELD_SLICE, state.shield_dir.clone(), "cpushield-run"),
            Direction::Out => (
                "system.slice",
                format!("{mount}/system.slice"),
                "cpushield-out",
            ),
        });
    let mut report = MoveReport {
        dry_run,
        moved: Vec::new(),
        not_found: Vec::new(),
    };
    let mut steps = Vec::new();
    for &id in ids {
        let threads: Vec<procfs::Thread> = if single_thread {
            find_thread(sys, id, cgroup.hierarchy())?
                .into_iter()
                .collect()
        } else {
            procfs::list_tids(sys, id)?
                .into_iter()
                .filter_map(|tid| {
                    procfs::read_thread(sys, id, tid, cgroup.hierarchy())
                        .ok()
                        .flatten()
                })
                .collect()
        };
        let Some(first) = threads.first() else {
            report.not_found.push(id);
            continue;
        };
        let origin = if first.cgroup == "/" {
            String::new()
        } else {
            first.cgroup.clone()
        };
        let back = format!("{mount}{origin}/{file}");
        let placement = match &by_systemd {
            Some((slice, slice_dir, prefix)) => {
                plan::scope_action(slice, slice_dir, prefix, id, back)
            }
            None => Action::MoveTask {
                pid: first.pid,
                tid: id,
                to: format!("{dest_dir}/{file}"),
                back,
                affinities: threads
                    .iter()
                    .map(|t| (t.tid, t.cpus_allowed.clone()))
                    .collect(),
            },
        };
        // The placement resets the affinity, so each thread's comes after
        // it; a failure other than a task that exited stops the move (what
        // was done stays journaled for `off`).
        steps.push(Step {
            action: placement,
            fatal: true,
        });
        steps.extend(threads.iter().map(|t| Step {
            action: Action::SetAffinity {
                pid: t.pid,
                tid: t.tid,
                name: t.name.clone(),
                cpus: cpus.clone(),
                previous: t.cpus_allowed.clone(),
            },
            fatal: true,
        }));
        report.moved.extend(threads.iter().map(|t| TaskRef {
            cpus: cpus.clone(),
            ..TaskRef::from(t)
        }));
    }
    if !dry_run {
        let mut journal = Journal::open(sys)?;
        let never = AtomicBool::new(false);
        apply::apply(sys, &mut journal, &steps, &never, &mut Applied::default()).map_err(|e| {
            match e {
                ApplyError::Kernel(e) => ShieldError::Sys(e),
                ApplyError::Journal(e) => ShieldError::Journal(e),
                other => ShieldError::Invalid(other.to_string()),
            }
        })?;
    }
    Ok(report)
}

fn find_thread(sys: &Sys, tid: i32, h: Hierarchy) -> Result<Option<procfs::Thread>, ShieldError> {
    for pid in procfs::list_pids(sys)? {
        if pid == tid || sys.exists(&format!("proc/{pid}/task/{tid}")) {
            if let Some(t) = procfs::read_thread(sys, pid, tid, h)? {
                return Ok(Some(t));
            }
        }
    }
    Ok(None)
}

/// Scheduling of a command started with `run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunPolicy {
    /// Keep the inherited policy.
    Inherit,
    /// SCHED_FIFO at this priority.
    Fifo(i32),
    /// SCHED_RR at this priority.
    RoundRobin(i32),
}

/// Places the calling process inside the shield (journaled), pinned to
/// `cpu` or the whole shield, with the given policy. The caller then drops
/// privileges and execs the command, which inherits all of it.
/// Where `run` would place a command: the CPUs, checked against the active
/// shield; changes nothing (`run --dry-run`).
pub fn run_target(sys: &Sys, cpu: Option<u32>) -> Result<(State, CpuSet), ShieldError> {
    let state = active_state(sys)?;
    let cpus = check_cpu(cpu, &state.shield, "shielded")?;
    Ok((state, cpus))
}

/// Moves the calling process into the shield (on `cpu`, else on all
/// shielded CPUs) with `policy`, for `run` to exec the command.
pub fn enter_shield(sys: &Sys, cpu: Option<u32>, policy: RunPolicy) -> Result<CpuSet, ShieldError> {
    if let RunPolicy::Fifo(p) | RunPolicy::RoundRobin(p) = policy {
        if !(1..=99).contains(&p) {
            return Err(ShieldError::Invalid(format!(
                "real-time priority {p} is out of range (1 to 99)"
            )));
        }
    }
    require_root(sys, "run")?;
    let state = {
        let _lock = journal::lock(sys)?;
        active_state(sys)?
    };
    let cpus = check_cpu(cpu, &state.shield, "shielded")?;
    let me = std::process::id() as i32;
    move_tasks(sys, &[me], Direction::In, cpu, false, false)?;
    let sched = match policy {
        RunPolicy::Inherit => None,
        RunPolicy::Fifo(p) => Some(syscalls::Policy::Fifo(p)),
        RunPolicy::RoundRobin(p) => Some(syscalls::Policy::RoundRobin(p)),
    };
    if let Some(policy) = sched {
        if !sys.is_fixture() {
            syscalls::set_scheduler(0, policy).map_err(|e| {
                SysError::new(
                    "set scheduler of",
                    format!("task {me}"),
                    Some(&format!("{policy:?}")),
                    e,
                )
            })?;
        }
    }
    Ok(cpus)
}
