//! Undo: the journal replayed in reverse through the same kernel-access
//! layer as apply, each restore read back; what the components undo
//! themselves goes through their [`Effects`], and tasks the undo keeps on
//! their CPUs ([`KeepOnCpus`]) are moved back and pinned again.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use super::apply::{chosen, Effects, Refusal, KERNEL_TEXT, PARALLEL_RUN};
pub use super::change::Undone;
use super::change::{Action, Undo};
use super::journal::Entry;
use crate::cpulist::CpuSet;
use crate::input::{quote, quote_to};
use crate::sys::procfs::{self, recycled, Hierarchy};
use crate::sys::systemd::SystemdCall;
use crate::sys::{ErrorKind, Sys};

/// Tasks the undo keeps on the CPUs they have (real-time tasks still on
/// the shield when it goes, see [`super::kept`]):
/// moved back to their cgroup, pinned again, their recorded affinity not
/// given back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeepOnCpus {
    /// Their processes: moved back to their cgroup, then pinned again.
    pub processes: HashSet<i32>,
    /// Each kept thread and the CPUs it keeps.
    pub threads: HashMap<i32, CpuSet>,
    /// A cgroup file a move back would write (`.../cgroup.procs`) and the
    /// one a kept task goes to instead: on cgroup v1 the system cpuset,
    /// which holds only the housekeeping CPUs until undo removes it, is
    /// passed over for the root it empties into.
    pub redirect: HashMap<String, String>,
}

impl KeepOnCpus {
    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.processes.is_empty()
    }

    /// The cgroup file a kept task moving back to `back` is written to.
    pub fn destination<'a>(&'a self, back: &'a str) -> &'a str {
        self.redirect.get(back).map_or(back, String::as_str)
    }

    /// Pins the kept threads of process `pid` to their CPUs again (a move
    /// on 6.1 has just reset them to their cgroup's); what fails is
    /// returned as (thread, reason).
    pub fn pin_again(&self, sys: &Sys, pid: i32) -> Vec<(i32, String)> {
        let mut failed = Vec::new();
        for tid in procfs::list_tids(sys, pid).unwrap_or_default() {
            let Some(cpus) = self.threads.get(&tid) else {
                continue;
            };
            match sys.affinity(tid) {
                Ok(now) if now == *cpus => continue,
                Err(e) if e.kind == ErrorKind::NotFound => continue,
                _ => {}
            }
            if let Err(e) = sys.set_affinity(tid, cpus) {
                if e.kind != ErrorKind::NotFound {
                    failed.push((
                        tid,
                        format!("could not keep it on CPUs {cpus}: {}", e.errno_name()),
                    ));
                }
            }
        }
        failed
    }
}

/// Replays journal entries in reverse. Affinities are restored last,
/// because moving a task between cpusets makes the kernel reset them.
pub fn undo(sys: &Sys, fx: &dyn Effects, entries: &[Entry]) -> Undone {
    undo_timed(
        sys,
        fx,
        entries,
        &KeepOnCpus::default(),
        &mut super::timings::Timings::default(),
    )
}

/// [`undo`], keeping the tasks of `keep` on their CPUs, adding the time of
/// its two halves to `timings`.
pub fn undo_timed(
    sys: &Sys,
    fx: &dyn Effects,
    entries: &[Entry],
    keep: &KeepOnCpus,
    timings: &mut super::timings::Timings,
) -> Undone {
    let mut out = Undone::default();
    let t = Instant::now();
    let systemd_before = sys.systemd_time();
    undo_changes(sys, fx, entries, keep, &mut out);
    // Every cpuset change since the move (a controller switched off, a
    // cgroup removed) resets the affinities of the tasks it touches on
    // 6.1: the kept tasks are pinned once more when all is done.
    for pid in &keep.processes {
        keep_pinned(sys, keep, *pid, &mut out);
    }
    let systemd = sys.systemd_time() - systemd_before;
    timings.systemd += systemd;
    timings.undo_writes += t.elapsed() - systemd;
    let t = Instant::now();
    let mut original = original_affinities(entries);
    original.retain(|(tid, _, _)| !keep.threads.contains_key(tid));
    // Thousands of independent syscalls: spread them over the CPUs.
    let parts = crate::sys::in_parallel(&original, 512, |part| {
        let mut out = Undone::default();
        for (tid, cpus, at) in part {
            restore_affinity(sys, *tid, cpus, *at, &mut out);
        }
        out
    });
    for part in parts {
        out.add(part);
    }
    timings.undo_affinities += t.elapsed();
    fx.after_undo(sys, entries, &mut out);
    out
}

/// Undoes every entry but the affinities, in reverse: first those the
/// components undo first, then the rest, then those they undo last.
fn undo_changes(
    sys: &Sys,
    fx: &dyn Effects,
    entries: &[Entry],
    keep: &KeepOnCpus,
    out: &mut Undone,
) {
    let first = |a: &Action| fx.undone_first(a);
    let last = |a: &Action| !first(a) && fx.undone_last(a);
    let rest = |a: &Action| !first(a) && !last(a);
    let select = |keep: &dyn Fn(&Action) -> bool| -> Vec<&Entry> {
        entries.iter().rev().filter(|e| keep(&e.action)).collect()
    };
    let mut busy = Vec::new();
    let removed = Removed::by(entries);
    for part in [select(&first), select(&rest), select(&last)] {
        undo_in_turn(sys, fx, (&part, &removed), keep, out, &mut busy);
    }
    // Tried again once everything else is back: a write the kernel found
    // busy (6.1 refuses a finite sched_rt_runtime_us while an isolated
    // partition's root domain holds stale deadline bandwidth) may pass
    // once the partition is gone.
    for (path, value, skip_if_same) in busy {
        restore_write(sys, path, &value, skip_if_same, out);
    }
}

/// A write back the kernel refused with EBUSY, kept for one more try
/// at the end: the file, the value, whether it is skipped when it holds.
type Busy<'a> = (&'a str, String, bool);

/// The cgroup directories an undo removes, because its entries made them
/// (`Mkdir`): what is inside them need not be given back. On cgroup v1
/// the writes back into them may be refused on the way (a cpuset's CPUs
/// must lie within its parent's, and exclusive siblings must not meet,
/// while the journal's folded records no longer keep every write's
/// order), and their refusal changes nothing of what `off` leaves.
struct Removed(HashSet<String>);

impl Removed {
    fn by(entries: &[Entry]) -> Removed {
        Removed(
            (entries.iter())
                .filter_map(|e| match &e.action {
                    Action::Mkdir { path } => Some(path.clone()),
                    _ => None,
                })
                .collect(),
        )
    }

    /// Whether `path` is one of those directories or lies inside one.
    fn holds(&self, path: &str) -> bool {
        let mut at = path;
        loop {
            if self.0.contains(at) {
                return true;
            }
            match at.rsplit_once('/') {
                Some((parent, _)) => at = parent,
                None => return false,
            }
        }
    }
}

/// Undoes `reversed` (newest first): moves back spread over the CPUs,
/// the rest one by one.
fn undo_in_turn<'a>(
    sys: &Sys,
    fx: &dyn Effects,
    (reversed, removed): (&[&'a Entry], &Removed),
    keep: &KeepOnCpus,
    out: &mut Undone,
    busy: &mut Vec<Busy<'a>>,
) {
    let mut rest = reversed;
    while let Some(e) = rest.first() {
        let moves = rest
            .iter()
            .take_while(|e| matches!(e.action, Action::MoveTask { .. }))
            .count();
        if moves > 0 {
            // Moves back are independent of each other: spread them.
            let (now, later) = rest.split_at(moves);
            for part in crate::sys::in_parallel(now, PARALLEL_RUN, |part| {
                let mut out = Undone::default();
                part.iter().for_each(|e| move_back(sys, e, keep, &mut out));
                out
            }) {
                out.add(part);
            }
            rest = later;
            continue;
        }
        rest = &rest[1..];
        // A cgroup taken away (a named set) inside one this undo removes
        // anyway is not made again.
        if fx
            .cgroup_removed(&e.action)
            .is_some_and(|dir| removed.holds(&dir))
        {
            out.unchanged += 1;
            continue;
        }
        if fx.undo(sys, e, out) {
            continue;
        }
        match &e.action {
            // Affinities: restored last, by undo_timed.
            Action::SetAffinity { .. } | Action::Remember { .. } | Action::MoveTask { .. } => {}
            Action::Mkdir { path } => remove_cgroup(sys, path, out),
            Action::Systemd { call, undo, back } => {
                undo_systemd(sys, call, (undo.as_ref(), back.as_deref()), keep, out)
            }
            Action::MountCgroup2 { target, make_dir } => {
                unmount_own(sys, (target, "cgroup2"), *make_dir, out)
            }
            Action::Write { path, undo, .. } => {
                let value = match (undo, &e.previous) {
                    (Undo::Nothing, _) => continue,
                    (Undo::Value(v), _) => v.clone(),
                    (Undo::Previous, Some(p)) => p.clone(),
                    (Undo::Previous, None) => continue,
                };
                let skip_if_same = matches!(undo, Undo::Previous);
                let mut one = Undone::default();
                restore_write(sys, path, &value, skip_if_same, &mut one);
                if !one.failed.is_empty() && removed.holds(path) {
                    // Its cgroup goes with everything in it (see Removed).
                    out.unchanged += 1;
                } else if one.failed.iter().any(|f| f.reason.ends_with(": EBUSY")) {
                    busy.push((path, value, skip_if_same));
                } else {
                    out.add(one);
                }
            }
            // A component's own change that no component of this
            // cpushield claims (a tag it does not know): left, and said.
            other => out.failed.push(Refusal {
                target: crate::input::brief_to(&format!("{other:?}"), 120),
                reason: "no component of this cpushield knows how to undo it; left as it is".into(),
            }),
        }
    }
}

/// The oldest record of each thread's affinity in the journal, which is
/// what it had before cpushield, with when it was journaled; in journal
/// order.
pub(crate) fn original_affinities(entries: &[Entry]) -> Vec<(i32, &CpuSet, Option<u64>)> {
    let mut original = Vec::new();
    let mut seen: HashSet<i32> = HashSet::new();
    for e in entries {
        let recs: &[(i32, CpuSet)] = match &e.action {
            Action::SetAffinity { tid, previous, .. } => {
                if seen.insert(*tid) {
                    original.push((*tid, previous, e.at));
                }
                continue;
            }
            Action::MoveTask { affinities, .. } | Action::Remember { affinities } => affinities,
            _ => continue,
        };
        for (tid, cpus) in recs {
            if seen.insert(*tid) {
                original.push((*tid, cpus, e.at));
            }
        }
    }
    original
}

/// Moves a task back to the cgroup it was in before a journaled move (a
/// task kept on its CPUs to where `keep` sends it, pinned again).
fn move_back(sys: &Sys, e: &Entry, keep: &KeepOnCpus, out: &mut Undone) {
    let Action::MoveTask { pid, tid, back, .. } = &e.action else {
        return;
    };
    if recycled(sys, *tid, e.at) {
        out.recycled.push(*tid);
        return;
    }
    let kept = keep.processes.contains(pid);
    let back = if kept { keep.destination(back) } else { back };
    match sys.write(back, &tid.to_string()) {
        Ok(()) if kept => {
            out.restored += 1;
            keep_pinned(sys, keep, *pid, out);
        }
        Ok(()) => out.restored += 1,
        Err(err) if err.kind == ErrorKind::NotFound => out.exited += 1,
        // The move it undoes was refused too (kthreadd on v1): the task
        // never reached the cgroup it was sent to.
        Err(err) if err.kind == ErrorKind::Refused && never_moved(sys, e, *pid, *tid) => {
            out.unchanged += 1
        }
        Err(err) => out.failed.push(Refusal {
            target: format!("task {tid}"),
            reason: err.to_string(),
        }),
    }
}

/// Pins the kept threads of process `pid` again after its move back; what
/// cannot be is reported as not restored.
fn keep_pinned(sys: &Sys, keep: &KeepOnCpus, pid: i32, out: &mut Undone) {
    for (tid, reason) in keep.pin_again(sys, pid) {
        out.failed.push(Refusal {
            target: format!("task {tid}"),
            reason,
        });
    }
}

/// Whether the kernel now forbids changing thread `tid`'s affinity.
fn pinned_by_kernel(sys: &Sys, tid: i32) -> bool {
    let stat = sys.read(&format!("proc/{tid}/stat")).unwrap_or_default();
    crate::sys::procfs::parse_stat(&stat)
        .is_some_and(|(_, flags)| flags & crate::sys::procfs::PF_NO_SETAFFINITY != 0)
}

/// Puts one thread's affinity back unless it already is what it was, or
/// its id now names a newer thread (journaled at `at`, see [`recycled`]).
fn restore_affinity(sys: &Sys, tid: i32, cpus: &CpuSet, at: Option<u64>, out: &mut Undone) {
    match sys.affinity(tid) {
        Ok(now) if now == *cpus => {
            out.unchanged += 1;
            return;
        }
        Err(err) if err.kind == ErrorKind::NotFound => {
            out.exited += 1;
            return;
        }
        _ => {}
    }
    // Asked only of the threads to be written: reading each thread's start
    // time is a /proc file per thread, most of off's time at 10,000 threads
    // under emulation, and a thread that already has its CPUs needs nothing.
    if recycled(sys, tid, at) {
        out.recycled.push(tid);
        return;
    }
    match sys.set_affinity(tid, cpus) {
        Ok(()) => out.restored += 1,
        Err(err) if err.kind == ErrorKind::NotFound => out.exited += 1,
        // A kernel thread caught while being made (still named after
        // kthreadd) is bound by the kernel once made: its affinity is the
        // kernel's now, not ours to give back.
        Err(_) if pinned_by_kernel(sys, tid) => out.left_in_use.push(Refusal {
            target: format!("task {tid}"),
            reason: format!("affinity {cpus} not given back: the kernel pins this thread now (PF_NO_SETAFFINITY)"),
        }),
        Err(err) => out.failed.push(Refusal {
            target: format!("task {tid}"),
            reason: format!("could not restore affinity {cpus}: {}", err.errno_name()),
        }),
    }
}

/// Unmounts the file system of type `fstype` that `on` mounted, only
/// while it is still the one mount at `target` and nothing is mounted
/// below it (anything else there is someone else's, and stays); then
/// removes the directory it made. Nothing mounted there means the mount
/// was journaled but never made.
pub(in crate::shield) fn unmount_own(
    sys: &Sys,
    (target, fstype): (&str, &str),
    made_dir: bool,
    out: &mut Undone,
) {
    let mounts = match sys.read("proc/self/mounts") {
        Ok(text) => procfs::parse_mounts(&text),
        Err(err) => {
            out.failed.push(Refusal {
                target: format!("/{target}"),
                reason: format!("left mounted: cannot read the mount table: {err}"),
            });
            return;
        }
    };
    let at = format!("/{}", target.trim_start_matches('/'));
    let stacked: Vec<&procfs::Mount> = mounts.iter().filter(|m| m.target == at).collect();
    let below = mounts
        .iter()
        .any(|m| m.target.starts_with(&format!("{at}/")));
    match stacked.as_slice() {
        [] => out.unchanged += 1,
        [m] if m.fstype == fstype && !below => match sys.umount(target) {
            Ok(()) => out.restored += 1,
            Err(err) => out.failed.push(Refusal {
                target: at.clone(),
                reason: format!("could not unmount {fstype}: {}", err.errno_name()),
            }),
        },
        _ => {
            out.failed.push(Refusal {
                target: at.clone(),
                reason: format!(
                    "left mounted: something else is mounted on or below the {fstype} cpushield mounted"
                ),
            });
            return;
        }
    }
    if made_dir && sys.exists(target) {
        match sys.remove_mount_point(target) {
            Ok(()) => out.restored += 1,
            Err(err) => out.failed.push(Refusal {
                target: at,
                reason: format!("could not remove the mount point: {}", err.errno_name()),
            }),
        }
    }
}

/// Whether the thread of a journaled move is outside the cgroup it was
/// sent to, read from `/proc/PID/task/TID/cgroup`.
fn never_moved(sys: &Sys, entry: &Entry, pid: i32, tid: i32) -> bool {
    let Action::MoveTask { to, .. } = &entry.action else {
        return false;
    };
    let to_dir = to.rsplit_once('/').map_or("", |(dir, _)| dir);
    // Only v1 cgroups have a `tasks` file (moves there may go through
    // `cgroup.procs` too).
    let hierarchy = if sys.exists(&format!("{to_dir}/tasks")) {
        Hierarchy::CpusetV1
    } else {
        Hierarchy::Unified
    };
    match procfs::read_thread(sys, pid, tid, hierarchy) {
        Ok(Some(t)) => t.cgroup == "/" || !to_dir.ends_with(t.cgroup.as_str()),
        _ => false,
    }
}

fn restore_write(sys: &Sys, path: &str, value: &str, skip_if_same: bool, out: &mut Undone) {
    // A sysfs choice file reads its words, the one chosen in brackets;
    // any other file reads as itself.
    let holds = |now: &str| chosen(now) == value.trim();
    if skip_if_same {
        if let Ok(now) = sys.read_trimmed(path) {
            if holds(&now) {
                out.unchanged += 1;
                return;
            }
        }
    }
    match sys.write(path, value) {
        // A fixed or captured value is not read back: the watchdogs must not
        // be read around a change.
        Ok(()) if !skip_if_same => out.restored += 1,
        Ok(()) => match sys.read_trimmed(path) {
            Ok(now) if skip_if_same && !holds(&now) => out.failed.push(Refusal {
                target: format!("/{path}"),
                reason: format!(
                    "wrote {} back but it reads {}",
                    quote(value),
                    quote_to(&now, KERNEL_TEXT)
                ),
            }),
            _ => out.restored += 1,
        },
        // The cgroup the file belonged to is already gone.
        Err(err) if err.kind == ErrorKind::NotFound => out.unchanged += 1,
        Err(err) => out.failed.push(Refusal {
            target: format!("/{path}"),
            reason: format!(
                "could not write {} back: {}",
                quote(value),
                err.errno_name()
            ),
        }),
    }
}

/// Removes a cgroup cpushield created. Tasks still inside (children of a
/// `run` command, say) are first moved to the cgroup's parent.
fn remove_cgroup(sys: &Sys, path: &str, out: &mut Undone) {
    if !sys.exists(path) {
        out.unchanged += 1;
        return;
    }
    if let Err(err) = sys.rmdir(path) {
        if err.kind != ErrorKind::Refused {
            out.failed.push(Refusal {
                target: format!("/{path}"),
                reason: err.to_string(),
            });
            return;
        }
        let parent = path.rsplit_once('/').map_or("", |(p, _)| p);
        let procs_file = if sys.exists(&format!("{path}/tasks")) {
            "tasks"
        } else {
            "cgroup.procs"
        };
        if let Ok(text) = sys.read(&format!("{path}/{procs_file}")) {
            for id in text.split_whitespace() {
                let _ = sys.write(&format!("{parent}/{procs_file}"), id);
            }
        }
        if let Err(err) = sys.rmdir(path) {
            out.failed.push(Refusal {
                target: format!("/{path}"),
                reason: err.to_string(),
            });
            return;
        }
    }
    out.restored += 1;
}

/// Undoes a request to systemd: the processes a scope still holds go back
/// to `back` first (stopping it would kill them), then the undoing call is
/// made, unless the unit never came to be (a journaled call that a crash
/// stopped before it was made).
fn undo_systemd(
    sys: &Sys,
    call: &SystemdCall,
    (undo, back): (Option<&SystemdCall>, Option<&str>),
    keep: &KeepOnCpus,
    out: &mut Undone,
) {
    let dir = match call {
        SystemdCall::StartSlice { cgroup_dir, .. }
        | SystemdCall::StartScope { cgroup_dir, .. }
        | SystemdCall::SetAllowedCpus { cgroup_dir, .. } => Some(cgroup_dir.as_str()),
        _ => None,
    };
    if let Some(dir) = dir {
        if !sys.exists(dir) {
            out.unchanged += 1;
            return;
        }
    }
    if let (Some(back), Some(dir)) = (back, dir) {
        let procs = sys.read(&format!("{dir}/cgroup.procs")).unwrap_or_default();
        for pid in procs.split_whitespace() {
            let kept = pid.parse().ok().filter(|p| keep.processes.contains(p));
            let back = if kept.is_some() {
                keep.destination(back)
            } else {
                back
            };
            match sys.write(back, pid) {
                Ok(()) => {
                    if let Some(pid) = kept {
                        keep_pinned(sys, keep, pid, out);
                    }
                }
                Err(err) if err.kind == ErrorKind::NotFound && sys.exists(back) => {}
                Err(err) => out.failed.push(Refusal {
                    target: format!("process {pid}"),
                    reason: format!("could not move it back to /{back}: {}", err.errno_name()),
                }),
            }
        }
    }
    let Some(undo) = undo else {
        out.restored += 1;
        return;
    };
    match sys.systemd(undo) {
        Ok(()) => out.restored += 1,
        // systemd collects an empty transient scope by itself: stopping
        // one already gone fails, and changes nothing.
        Err(_) if back.is_some() && dir.is_some_and(|d| !sys.exists(d)) => out.restored += 1,
        Err(err) => out.failed.push(Refusal {
            target: format!("systemd: {}", undo.command_line().join(" ")),
            reason: err.to_string(),
        }),
    }
}
