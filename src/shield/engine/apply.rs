//! Apply: execute planned changes one by one through the kernel-access
//! layer, journaling each before it is made and reading each back (the
//! kernel accepts writes it does not honour). Undo, the journal replayed
//! in reverse, is [`super::undo`].

use std::sync::atomic::{AtomicBool, Ordering};

use super::change::{Action, Check, Refused, Step, Undo, Undone};
use super::journal::{Entry, EntryRef, Journal, JournalError};
use crate::cpulist::CpuSet;
use crate::input::{quote, quote_to};

/// At most this many bytes of what the kernel reads back are quoted: an
/// invalid partition's whole reason, not a CPU list of thousands of CPUs.
pub(in crate::shield) const KERNEL_TEXT: usize = 200;
use crate::sys::procfs;
use crate::sys::{ErrorKind, Sys, SysError};

/// Steps journaled together in one segment: each segment costs two fsyncs
/// (file and directory), so a shield over 10,000 threads writes 3 of them.
/// A segment is durable before any of its steps is made; undo treats a
/// journaled step that was never made as unchanged.
pub const BATCH: usize = 4096;

pub use super::change::Refusal;

/// What happened while applying.
#[derive(Debug, Default, Clone)]
pub struct Applied {
    /// Changes made and confirmed.
    pub done: usize,
    /// Tasks that exited before they could be changed.
    pub exited: usize,
    /// Non-fatal changes the kernel refused, with their owners.
    pub refused: Vec<Refused>,
    /// Tids whose affinity or cgroup was changed.
    pub tasks_changed: Vec<i32>,
}

/// Why applying stopped.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// A change that the shield cannot do without failed.
    #[error("{0}")]
    Kernel(#[from] SysError),
    /// The kernel accepted a write but reads back something else.
    #[error(
        "{path}: wrote {} but the kernel reads back {}",
        quote(wrote),
        quote_to(read, KERNEL_TEXT)
    )]
    NotHonoured {
        /// The file.
        path: String,
        /// The value written.
        wrote: String,
        /// What it reads back.
        read: String,
    },
    /// The journal could not be written; nothing after it was changed.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// Ctrl-C or SIGTERM.
    #[error("interrupted")]
    Interrupted,
}

/// The changes only a component knows how to make, read before and undo
/// (a daemon's ban, the guard, a thread's scheduling). The engine hands
/// them over without naming any component: the order table
/// ([`crate::shield::components`]) says whose each is.
pub trait Effects: Sync {
    /// Makes `action`, read back; `None` when it is not one of these.
    fn make(&self, sys: &Sys, action: &Action) -> Option<Result<(), ApplyError>>;
    /// The value `action`'s undo needs, read just before it is made.
    fn previous(&self, sys: &Sys, action: &Action) -> Option<String>;
    /// Undoes `entry`; false when it is not one of these.
    fn undo(&self, sys: &Sys, entry: &Entry, out: &mut Undone) -> bool;
    /// Once every entry of `entries` is undone: what only the whole
    /// machine given back allows.
    fn after_undo(&self, sys: &Sys, entries: &[Entry], out: &mut Undone);
    /// Whether `action` is undone before every other entry.
    fn undone_first(&self, action: &Action) -> bool;
    /// Whether `action` is undone after every other entry.
    fn undone_last(&self, action: &Action) -> bool;
    /// Short description of `action`'s target for reports, when the
    /// action's own fields do not say it.
    fn describe(&self, action: &Action) -> Option<String>;
    /// What the components change, as a journal record may name it
    /// (see [`super::reach`]).
    fn reach(&self) -> super::reach::Reach;
    /// Whether a component's own `action` names only what its component
    /// changes (why not); `None` when no component claims it.
    fn within(&self, action: &Action, bounds: &super::reach::Bounds) -> Option<Result<(), String>>;
    /// A component's own `first` and `later` actions as one record of the
    /// journal ([`super::fold`]), where undoing it does what undoing both
    /// did; `None` when they do not fold. The record keeps the first's
    /// place and its previous value.
    fn fold(&self, first: &Action, later: &Action) -> Option<Action>;
    /// The cgroup directory a component's own `action` takes away (a
    /// named set), for the undo: see [`super::undo`].
    fn cgroup_removed(&self, action: &Action) -> Option<String>;
}

/// Applies steps in order, journaling each batch before making it.
pub fn apply(
    sys: &Sys,
    fx: &dyn Effects,
    journal: &mut Journal,
    steps: &[Step],
    stop: &AtomicBool,
    out: &mut Applied,
) -> Result<(), ApplyError> {
    for batch in steps.chunks(BATCH) {
        let at = procfs::boot_ticks(sys);
        let entries: Vec<EntryRef> = batch
            .iter()
            .map(|s| EntryRef {
                owner: Some(s.owner.name()),
                previous: match &s.action {
                    // A choice file is written back with the word it had.
                    Action::Write {
                        path,
                        undo: Undo::Previous,
                        check: Check::Choice,
                        ..
                    } => sys.read_trimmed(path).ok().map(|v| chosen(&v).to_string()),
                    Action::Write {
                        path,
                        undo: Undo::Previous,
                        ..
                    } => sys.read_trimmed(path).ok(),
                    other => fx.previous(sys, other),
                },
                action: &s.action,
                at,
            })
            .collect();
        journal.append(&entries)?;
        let mut rest = batch;
        while let Some(first) = rest.first() {
            // Runs of task moves and affinity changes are thousands of
            // independent kernel calls (every thread of the machine): spread
            // them over the CPUs. They are journaled already, and never fatal.
            let run = rest
                .iter()
                .take_while(|s| {
                    // One kind per run: a thread's affinity is set after its
                    // move (the move resets it), never concurrently.
                    !s.fatal
                        && is_task(&s.action)
                        && std::mem::discriminant(&s.action)
                            == std::mem::discriminant(&first.action)
                })
                .count();
            if run >= PARALLEL_RUN {
                let (now, later) = rest.split_at(run);
                let parts = crate::sys::in_parallel(now, PARALLEL_RUN, |part| {
                    let mut local = Applied::default();
                    let result = part
                        .iter()
                        .try_for_each(|step| execute_step(sys, fx, step, stop, &mut local));
                    (local, result)
                });
                let mut result = Ok(());
                for (local, r) in parts {
                    out.done += local.done;
                    out.exited += local.exited;
                    out.refused.extend(local.refused);
                    out.tasks_changed.extend(local.tasks_changed);
                    result = result.and(r);
                }
                result?;
                rest = later;
            } else {
                execute_step(sys, fx, first, stop, out)?;
                rest = &rest[1..];
            }
        }
    }
    Ok(())
}

/// Task changes in a row worth spreading over the CPUs.
pub(in crate::shield) const PARALLEL_RUN: usize = 512;

/// Makes one step and records its outcome; `Err` only for an interruption
/// or a fatal step's failure.
fn execute_step(
    sys: &Sys,
    fx: &dyn Effects,
    step: &Step,
    stop: &AtomicBool,
    out: &mut Applied,
) -> Result<(), ApplyError> {
    if stop.load(Ordering::SeqCst) {
        return Err(ApplyError::Interrupted);
    }
    match execute(sys, fx, &step.action) {
        Ok(()) => {
            out.done += 1;
            if let Action::SetAffinity { tid, .. } | Action::MoveTask { tid, .. } = &step.action {
                out.tasks_changed.push(*tid);
            }
        }
        Err(e) if is_task(&step.action) && e.kind() == Some(ErrorKind::NotFound) => out.exited += 1,
        Err(e) if step.fatal => return Err(e),
        Err(e) => out.refused.push(Refused {
            owner: step.owner,
            subject: step.subject.clone(),
            refusal: Refusal {
                target: describe(fx, &step.action),
                reason: e.short(),
            },
        }),
    }
    Ok(())
}

impl ApplyError {
    fn kind(&self) -> Option<ErrorKind> {
        match self {
            ApplyError::Kernel(e) => Some(e.kind),
            _ => None,
        }
    }

    fn short(&self) -> String {
        match self {
            ApplyError::Kernel(e) => e.errno_name(),
            ApplyError::NotHonoured { read, .. } => {
                format!("reads back {}", quote_to(read, KERNEL_TEXT))
            }
            other => other.to_string(),
        }
    }
}

fn is_task(a: &Action) -> bool {
    matches!(a, Action::SetAffinity { .. } | Action::MoveTask { .. })
}

/// Short description of an action's target for reports.
pub fn describe(fx: &dyn Effects, a: &Action) -> String {
    if let Some(own) = fx.describe(a) {
        return own;
    }
    match a {
        Action::Mkdir { path } | Action::MountCgroup2 { target: path, .. } => format!("/{path}"),
        Action::Write { path, .. } => format!("/{path}"),
        Action::MoveTask { tid, .. } => format!("task {tid}"),
        Action::SetAffinity { tid, name, .. } | Action::SetScheduler { tid, name, .. } => {
            format!("task {tid} ({name})")
        }
        Action::Remember { affinities } => format!("{} task affinities", affinities.len()),
        Action::Systemd { call, .. } => format!("systemd: {}", call.command_line().join(" ")),
        // A component's own change without a description of its own.
        other => format!("{other:?}"),
    }
}

fn execute(sys: &Sys, fx: &dyn Effects, a: &Action) -> Result<(), ApplyError> {
    if let Some(made) = fx.make(sys, a) {
        return made;
    }
    match a {
        Action::MountCgroup2 { target, make_dir } => {
            if *make_dir {
                sys.make_mount_point(target)?;
            }
            sys.mount_cgroup2(target)?;
        }
        Action::Mkdir { path } => sys.mkdir(path)?,
        Action::Write {
            path, value, check, ..
        } => {
            sys.write(path, value)?;
            verify(sys, path, value, *check)?;
        }
        Action::MoveTask { tid, to, .. } => sys.write(to, &tid.to_string())?,
        Action::SetAffinity { tid, cpus, .. } => sys.set_affinity(*tid, cpus)?,
        Action::Remember { .. } => {}
        Action::Systemd { call, .. } => sys.systemd(call)?,
        other => unreachable!("{other:?} is made by its component (Effects::make)"),
    }
    Ok(())
}

fn verify(sys: &Sys, path: &str, wrote: &str, check: Check) -> Result<(), ApplyError> {
    let read = match check {
        Check::None => return Ok(()),
        _ => sys.read_trimmed(path)?,
    };
    if reads_as(check, &read, wrote) {
        Ok(())
    } else {
        Err(ApplyError::NotHonoured {
            path: format!("/{path}"),
            wrote: wrote.to_string(),
            read,
        })
    }
}

/// Whether a file that reads `read` holds the value `wrote`, as `check`
/// compares them (`Check::None`: cannot tell, so no).
pub(crate) fn reads_as(check: Check, read: &str, wrote: &str) -> bool {
    match check {
        Check::None => false,
        Check::Text => read.trim() == wrote.trim(),
        Check::CpuList => {
            CpuSet::parse_list(read.trim()).ok() == CpuSet::parse_list(wrote.trim()).ok()
        }
        Check::CpuMask => {
            CpuSet::parse_mask(read.trim()).ok() == CpuSet::parse_mask(wrote.trim()).ok()
        }
        // Writes of an invalid partition succeed; only the read-back tells.
        Check::Partition => !read.contains("invalid") && read.trim().starts_with(wrote.trim()),
        Check::Choice => chosen(read) == wrote.trim(),
    }
}

/// The word a sysfs choice file (`always [madvise] never`) has chosen: the
/// one in brackets, or the whole text where there are none.
pub(crate) fn chosen(text: &str) -> &str {
    let text = text.trim();
    match (text.find('['), text.find(']')) {
        (Some(a), Some(b)) if a < b => &text[a + 1..b],
        _ => text,
    }
}
