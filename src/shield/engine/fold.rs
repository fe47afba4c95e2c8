//! Folding the journal of a shield that lives: what `off` no longer needs
//! is dropped, and what was changed more than once is kept once, so that
//! the journal stays as large as what is in effect, not as long as the
//! shield has lived.
//!
//! What `off` does with the folded journal is what it does with the whole
//! one: each thing ends as it was before the first shield (a file's value
//! read before its first write; a thread's affinity and scheduling before
//! their first change; a task's cgroup before its first move). What goes:
//! - the records of threads that have exited, or whose id now names a
//!   newer thread (`off` leaves those alone anyway);
//! - the scopes of `run` whose processes have exited and whose cgroup
//!   systemd has removed (stopping them again does nothing);
//! - a later write of a file the shield wrote before, undone to the
//!   earlier write's previous value: the first write keeps its place and
//!   its previous value, and takes the latest value (what `status` reads
//!   back); likewise a thread's later scheduling or affinity change,
//!   the `AllowedCPUs=` of systemd's slice set again (a change in place),
//!   and a component's own change made again (irqbalance's ban, the
//!   guard: the component says how the two fold);
//! - a thread's affinity recorded again (`off` gives back the oldest).
//!
//! Folding is crash-safe: the folded journal is written whole beside the
//! live one (`journal.fold`), and the two directories are exchanged in
//! one step ([`crate::durable::Dir::exchange`]); a kill at any step
//! leaves either the whole old journal or the whole folded one.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::os::unix::fs::DirBuilderExt;

use serde::Serialize;

use super::apply::Effects;
use super::change::{Action, Undo};
use super::journal::{read_entries, read_state, remove_folding, Entry, Journal, JournalError};
use super::journal::{FOLDING, VERSION};
use crate::sys::systemd::SystemdCall;
use crate::sys::{ErrorKind, Sys};

/// What folding the journal did: its records and bytes before and after.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Folded {
    /// Records before.
    pub records_before: usize,
    /// Records after.
    pub records_after: usize,
    /// Bytes of the journal's files before.
    pub bytes_before: u64,
    /// Bytes after.
    pub bytes_after: u64,
}

/// What the folding asks of the machine now.
pub(super) trait Alive {
    /// Whether thread `tid`, journaled at `at` (ticks since boot), still
    /// runs as the thread the journal recorded.
    fn thread(&self, tid: i32, at: Option<u64>) -> bool;
    /// Whether `rel` (relative to the root) exists.
    fn path(&self, rel: &str) -> bool;
}

impl Alive for Sys {
    fn thread(&self, tid: i32, at: Option<u64>) -> bool {
        match self.affinity(tid) {
            Err(e) if e.kind == ErrorKind::NotFound => false,
            _ => !crate::sys::procfs::recycled(self, tid, at),
        }
    }

    fn path(&self, rel: &str) -> bool {
        self.exists(rel)
    }
}

impl Journal {
    /// Folds the journal of a complete shield of this journal version
    /// (see the module); `None` when there was nothing to fold, or the
    /// journal is not one to fold (a shield still being made, an older
    /// version's, a damaged one: `off` reads those as they are). Call
    /// with the lock held, after the command's own changes.
    pub fn fold(&mut self, sys: &Sys, fx: &dyn Effects) -> Result<Option<Folded>, JournalError> {
        #[cfg(feature = "fixture")]
        if sys.fixture().is_some() && std::env::var_os(crate::sys::fixture::NO_FOLD_ENV).is_some() {
            return Ok(None);
        }
        let state_bytes = match read_state(sys)? {
            Some(s) if s.complete && s.version == VERSION => {
                fs::read(self.dir.join("state.json")).map_err(super::journal::io_err(&self.dir))?
            }
            _ => return Ok(None),
        };
        let entries = match read_entries(sys) {
            Ok(entries) => entries,
            Err(JournalError::DamagedJournal { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let records_before = entries.len();
        let folded = fold_entries(entries, sys, fx);
        if folded.len() == records_before && self.segments() <= 1 {
            return Ok(None);
        }
        let bytes_before = bytes_of(&self.dir);
        if !self.replace_with(sys, &state_bytes, &folded)? {
            return Ok(None);
        }
        Ok(Some(Folded {
            records_before,
            records_after: folded.len(),
            bytes_before,
            bytes_after: bytes_of(&self.dir),
        }))
    }

    /// Writes `state` and `entries` as a whole journal beside this one and
    /// exchanges the two (see the module); false where the file system
    /// cannot exchange two directories (the journal stays as it was).
    fn replace_with(
        &mut self,
        sys: &Sys,
        state: &[u8],
        entries: &[Entry],
    ) -> Result<bool, JournalError> {
        let run = self
            .dir
            .parent()
            .expect("the journal lives in the run directory");
        let folding = run.join(FOLDING);
        let step = |n: usize| {
            #[cfg(feature = "fixture")]
            if sys.fixture().is_some() {
                crate::sys::fixture::fold_step(n);
            }
            let _ = (sys, n);
        };
        step(0);
        match fs::remove_dir_all(&folding) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(super::journal::io_err(&folding)(e)),
        }
        step(1);
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&folding)
            .map_err(super::journal::io_err(&folding))?;
        step(2);
        super::journal::write_atomic(&folding.join("state.json"), state)?;
        step(3);
        if !entries.is_empty() {
            let segment = super::journal::segment_bytes(entries);
            super::journal::write_atomic(&folding.join(format!("{:06}.json", 1)), &segment)?;
        }
        step(4);
        let dir = crate::durable::Dir::open(run).map_err(super::journal::durable_err)?;
        match dir.exchange(FOLDING, "journal") {
            Ok(()) => {}
            Err(e) if e.source.raw_os_error() == Some(libc::EINVAL) => {
                remove_folding(run)?;
                return Ok(false);
            }
            Err(e) => return Err(super::journal::durable_err(e)),
        }
        self.next_segment = if entries.is_empty() { 1 } else { 2 };
        step(5);
        remove_folding(run)?;
        Ok(true)
    }
}

/// The bytes of the files in `dir`.
pub(super) fn bytes_of(dir: &std::path::Path) -> u64 {
    fs::read_dir(dir)
        .map(|files| {
            files
                .filter_map(|f| f.ok()?.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// What is foldable of a record: the thing it changes, when a later
/// change of the same thing folds into the first.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Thing {
    /// A file, and what undo writes back to it: a write undone otherwise
    /// than the file's first starts a chain of its own.
    File(String, Undo),
    Scheduling(i32),
    Affinity(i32),
    /// A task moved to a cgroup file from another: moved again the same
    /// way, undo gives it back to the same place.
    Move(i32, String, String),
    /// systemd's slice of the shield: started once (undone by stopping
    /// it), its `AllowedCPUs=` changed at each change in place.
    Slice(String),
}

/// `entries` folded (see the module), in their order.
pub(super) fn fold_entries(entries: Vec<Entry>, alive: &dyn Alive, fx: &dyn Effects) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::with_capacity(entries.len());
    // Where the first change of each thing is in `out`.
    let mut first: HashMap<Thing, usize> = HashMap::new();
    // Threads whose affinity `off` already takes from an earlier record.
    let mut recorded: HashSet<i32> = HashSet::new();
    // Where in `out` each file's last write went.
    let mut last_write: HashMap<String, usize> = HashMap::new();
    // Where in `out` each component's last own action went.
    let mut last_own: HashMap<String, usize> = HashMap::new();
    for mut e in entries {
        if let Action::Own { owner, .. } = &e.action {
            let owner = owner.clone();
            fold_own(&mut out, &mut last_own, owner, e, fx);
            continue;
        }
        let at = e.at;
        let live = |tid: i32| alive.thread(tid, at);
        let thing = match &mut e.action {
            // Undo does nothing with it: its value goes into the file's
            // last write kept.
            Action::Write {
                path,
                undo: Undo::Nothing,
                ..
            } if last_write.contains_key(path.as_str()) => {
                let i = last_write[path.as_str()];
                fold_into(&mut out[i], e);
                continue;
            }
            Action::Write { path, undo, .. } => Some(file_thing(path, undo)),
            Action::SetScheduler { tid, .. } if !live(*tid) => continue,
            Action::SetScheduler { tid, .. } => Some(Thing::Scheduling(*tid)),
            Action::SetAffinity { tid, .. } if !live(*tid) => continue,
            Action::SetAffinity { tid, .. } => {
                recorded.insert(*tid);
                Some(Thing::Affinity(*tid))
            }
            Action::Remember { affinities } => {
                affinities.retain(|(tid, _)| live(*tid) && recorded.insert(*tid));
                if affinities.is_empty() {
                    continue;
                }
                None
            }
            Action::MoveTask {
                tid,
                affinities,
                to,
                back,
                ..
            } => {
                affinities.retain(|(t, _)| live(*t));
                if affinities.is_empty() && !live(*tid) {
                    continue;
                }
                recorded.extend(affinities.iter().map(|(t, _)| *t));
                Some(Thing::Move(*tid, to.clone(), back.clone()))
            }
            Action::Systemd {
                call:
                    SystemdCall::StartScope {
                        pids, cgroup_dir, ..
                    },
                ..
            } if !pids.iter().any(|p| live(*p)) && !alive.path(cgroup_dir) => continue,
            Action::Systemd { call, .. } => match slice_call(call) {
                Some((unit, true)) => {
                    first.insert(Thing::Slice(unit.clone()), out.len());
                    None
                }
                Some((unit, false)) => Some(Thing::Slice(unit.clone())),
                None => None,
            },
            _ => None,
        };
        if let Some(file @ Thing::File(path, _)) = &thing {
            // Where this write ends (kept, or folded into the chain's first).
            let at = match first.get(file) {
                Some(&i) if folds_into(&out[i..], file) => i,
                _ => out.len(),
            };
            last_write.insert(path.clone(), at);
        }
        match thing {
            Some(thing) => match first.get(&thing) {
                Some(&i) if folds_into(&out[i..], &thing) => fold_into(&mut out[i], e),
                _ => {
                    first.insert(thing, out.len());
                    out.push(e);
                }
            },
            None => out.push(e),
        }
    }
    out
}

/// systemd's slice `call` starts (true) or changes (false).
fn slice_call(call: &SystemdCall) -> Option<(&String, bool)> {
    match call {
        SystemdCall::StartSlice { unit, .. } => Some((unit, true)),
        SystemdCall::SetAllowedCpus { unit, .. } => Some((unit, false)),
        _ => None,
    }
}

/// A component's own action `e`: folded into its last own action where
/// the component says the two fold, else kept.
fn fold_own(
    out: &mut Vec<Entry>,
    last_own: &mut HashMap<String, usize>,
    owner: String,
    e: Entry,
    fx: &dyn Effects,
) {
    let both = last_own
        .get(&owner)
        .and_then(|&i| Some((i, fx.fold(&out[i].action, &e.action)?)));
    match both {
        Some((i, both)) => out[i].action = both,
        None => {
            last_own.insert(owner, out.len());
            out.push(e);
        }
    }
}

/// A write of `path` as a thing that folds. An IRQ's affinity file holds
/// one whole value that no other record's undo depends on: whatever each
/// write's undo, undoing them all in turn ends with the first's, so every
/// write of it folds into the first (one undone by nothing stays a chain
/// of its own: its undo must not become the others'). Another file's
/// chain is broken by a
/// write undone otherwise (`+cpuset` undone by `-cpuset` between two
/// writes undone to their previous value).
fn file_thing(path: &str, undo: &Undo) -> Thing {
    if path.starts_with("proc/irq/") && *undo != Undo::Nothing {
        Thing::File(path.to_string(), Undo::Previous)
    } else {
        Thing::File(path.to_string(), undo.clone())
    }
}

/// Whether a later change of `thing` folds into `chain[0]`, its first
/// change so far (`chain` runs from it to the end): not where a write of
/// the file undone otherwise came between, nor into a write whose
/// previous value could not be read (its undo restores nothing; the
/// later write's undo would).
fn folds_into(chain: &[Entry], thing: &Thing) -> bool {
    let restores = !matches!(
        (&chain[0].action, &chain[0].previous),
        (
            Action::Write {
                undo: Undo::Previous,
                ..
            },
            None
        )
    );
    restores && !undone_otherwise_since(&chain[1..], thing)
}

/// Whether a file's chain of writes was broken by a write of it undone
/// otherwise (one of `since`): a later write then folds into that one.
fn undone_otherwise_since(since: &[Entry], thing: &Thing) -> bool {
    let Thing::File(file, undo) = thing else {
        return false;
    };
    if file.starts_with("proc/irq/") && *undo != Undo::Nothing {
        return false;
    }
    since.iter().any(|e| {
        matches!(&e.action, Action::Write { path, undo: u, .. }
            if path == file && u != undo && *u != Undo::Nothing)
    })
}

/// Folds a later change of a thing into the journal's first change of it:
/// the first keeps its place, its previous value and its time; it takes
/// the later one's new value.
fn fold_into(first: &mut Entry, later: Entry) {
    match (&mut first.action, later.action) {
        (
            Action::Write { value, check, .. },
            Action::Write {
                value: v, check: c, ..
            },
        ) => {
            *value = v;
            *check = c;
        }
        (Action::SetAffinity { cpus, .. }, Action::SetAffinity { cpus: c, .. }) => *cpus = c,
        (
            Action::SetScheduler {
                policy,
                priority,
                reservation,
                ..
            },
            Action::SetScheduler {
                policy: p,
                priority: r,
                reservation: v,
                ..
            },
        ) => {
            *policy = p;
            *priority = r;
            *reservation = v;
        }
        // The same move again: the first one's record is what undo needs.
        (Action::MoveTask { .. }, Action::MoveTask { .. }) => {}
        // The slice started with the CPUs it has now: stopping it undoes both.
        (
            Action::Systemd {
                call:
                    SystemdCall::StartSlice {
                        cpus, partition, ..
                    },
                ..
            },
            Action::Systemd {
                call:
                    SystemdCall::SetAllowedCpus {
                        cpus: c,
                        partition: p,
                        ..
                    },
                ..
            },
        ) => {
            *cpus = c;
            *partition = p;
        }
        // The first change's undo gives back the CPUs from before both.
        (
            Action::Systemd { call, .. },
            Action::Systemd {
                call: later @ SystemdCall::SetAllowedCpus { .. },
                ..
            },
        ) if matches!(call, SystemdCall::SetAllowedCpus { .. }) => *call = later,
        (_, other) => unreachable!("only changes of one thing fold: {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpulist::CpuSet;
    use crate::shield::engine::change::Check;

    /// The components' own actions, as the shield knows them.
    const FX: &dyn Effects = crate::shield::components::EFFECTS;

    /// The machine as the tests see it: the threads that run, the paths that exist.
    struct Machine {
        threads: HashSet<i32>,
        paths: HashSet<&'static str>,
    }

    impl Alive for Machine {
        fn thread(&self, tid: i32, _at: Option<u64>) -> bool {
            self.threads.contains(&tid)
        }
        fn path(&self, rel: &str) -> bool {
            self.paths.contains(rel)
        }
    }

    fn cpus(list: &str) -> CpuSet {
        CpuSet::parse_list(list).unwrap()
    }

    fn entry(action: Action, previous: Option<&str>) -> Entry {
        Entry {
            action,
            owner: Some("test".into()),
            previous: previous.map(str::to_string),
            at: Some(100),
        }
    }

    fn write(path: &str, value: &str, previous: &str) -> Entry {
        let action = Action::Write {
            path: path.into(),
            value: value.into(),
            check: Check::Text,
            undo: Undo::Previous,
        };
        entry(action, Some(previous))
    }

    fn affinity(tid: i32, to: &str, from: &str) -> Entry {
        let action = Action::SetAffinity {
            pid: tid,
            tid,
            name: "t".into(),
            cpus: cpus(to),
            previous: cpus(from),
        };
        entry(action, None)
    }

    fn scope(pid: i32) -> Entry {
        let unit = format!("cpushield-run-{pid}.scope");
        let action = Action::Systemd {
            call: SystemdCall::StartScope {
                unit: unit.clone(),
                slice: "cpushield.slice".into(),
                pids: vec![pid],
                cgroup_dir: format!("sys/fs/cgroup/cpushield.slice/{unit}"),
            },
            undo: Some(SystemdCall::Stop { unit }),
            back: Some("sys/fs/cgroup/cgroup.procs".into()),
        };
        entry(action, None)
    }

    fn machine(threads: &[i32], paths: &[&'static str]) -> Machine {
        Machine {
            threads: threads.iter().copied().collect(),
            paths: paths.iter().copied().collect(),
        }
    }

    #[test]
    fn a_file_written_again_keeps_its_first_place_and_previous_value_and_its_last_value() {
        let entries = vec![
            write("proc/sys/a", "1", "orig-a"),
            write("proc/sys/b", "x", "orig-b"),
            write("proc/sys/a", "2", "1"),
            write("proc/sys/a", "3", "2"),
        ];
        let folded = fold_entries(entries, &machine(&[], &[]), FX);
        assert_eq!(folded.len(), 2);
        assert_eq!(folded[0].previous.as_deref(), Some("orig-a"));
        assert!(
            matches!(&folded[0].action, Action::Write { path, value, .. } if path == "proc/sys/a" && value == "3")
        );
        assert!(matches!(&folded[1].action, Action::Write { path, .. } if path == "proc/sys/b"));
    }

    /// The soak's IRQ 40 on Debian 13: a change in place 2-3 <-> 1-3 moved
    /// it between CPUs 0 and 1, the healer's sweep undoing its writes to
    /// the value from before the shield, `on` to the previous one.
    #[test]
    fn an_irqs_affinity_written_again_folds_into_its_first_whatever_the_undo() {
        let irq = |value: &str, undo: Undo, prior: Option<&str>| {
            let action = Action::Write {
                path: "proc/irq/40/smp_affinity_list".into(),
                value: value.into(),
                check: Check::CpuList,
                undo,
            };
            entry(action, prior)
        };
        let mut entries = vec![irq("1", Undo::Value("1".into()), None)];
        for _ in 0..6 {
            entries.push(irq("0", Undo::Value("0".into()), None));
            entries.push(irq("1", Undo::Previous, Some("0")));
        }
        let folded = fold_entries(entries, &machine(&[], &[]), FX);
        assert_eq!(folded.len(), 1, "{folded:#?}");
        assert!(matches!(&folded[0].action,
            Action::Write { value, undo: Undo::Value(v), .. } if value == "1" && v == "1"));
    }

    /// A write whose previous value could not be read restores nothing:
    /// a later write keeps its own record, and those after fold into it.
    #[test]
    fn no_write_folds_into_one_whose_previous_value_was_not_read() {
        let mut unread = write("proc/irq/41/smp_affinity_list", "0", "");
        unread.previous = None;
        let entries = vec![
            unread,
            write("proc/irq/41/smp_affinity_list", "1", "2-3"),
            write("proc/irq/41/smp_affinity_list", "0", "1"),
        ];
        let folded = fold_entries(entries, &machine(&[], &[]), FX);
        assert_eq!(folded.len(), 2, "{folded:#?}");
        assert_eq!(folded[1].previous.as_deref(), Some("2-3"));
        assert!(matches!(&folded[1].action, Action::Write { value, .. } if value == "0"));
    }

    #[test]
    fn a_write_undone_to_a_fixed_value_is_not_folded_across() {
        let fixed = entry(
            Action::Write {
                path: "proc/sys/a".into(),
                value: "+cpuset".into(),
                check: Check::None,
                undo: Undo::Value("-cpuset".into()),
            },
            None,
        );
        let entries = vec![
            write("proc/sys/a", "1", "orig"),
            fixed,
            write("proc/sys/a", "2", "1"),
        ];
        let folded = fold_entries(entries.clone(), &machine(&[], &[]), FX);
        assert_eq!(folded, entries);
    }

    #[test]
    fn the_records_of_exited_threads_go_and_those_of_live_ones_stay_once() {
        let remember = |list: &[(i32, &str)]| {
            let affinities = list.iter().map(|(t, c)| (*t, cpus(c))).collect();
            entry(Action::Remember { affinities }, None)
        };
        let entries = vec![
            remember(&[(1, "0-3"), (2, "0-3"), (3, "0-3")]),
            // A run: its process 50 got the shield's CPUs, then exited.
            scope(50),
            affinity(50, "2-3", "0-3"),
            // Another, still running.
            scope(60),
            affinity(60, "3", "0-3"),
            affinity(60, "2", "3"),
            // A change in place records every thread again.
            remember(&[(1, "0-1"), (2, "0-1"), (60, "2"), (70, "0-1")]),
        ];
        let folded = fold_entries(entries, &machine(&[1, 3, 60, 70], &[]), FX);
        let kinds: Vec<String> = folded
            .iter()
            .map(|e| match &e.action {
                Action::Remember { affinities } => format!(
                    "remember {:?}",
                    affinities.iter().map(|(t, _)| *t).collect::<Vec<_>>()
                ),
                Action::Systemd { .. } => "scope".into(),
                Action::SetAffinity {
                    tid,
                    cpus,
                    previous,
                    ..
                } => {
                    format!("affinity {tid} {cpus} (was {previous})")
                }
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "remember [1, 3]",
                "scope",
                "affinity 60 2 (was 0-3)",
                "remember [70]",
            ]
        );
    }

    #[test]
    fn a_run_scope_stays_while_its_cgroup_does() {
        let entries = vec![scope(50)];
        let dir = "sys/fs/cgroup/cpushield.slice/cpushield-run-50.scope";
        assert_eq!(
            fold_entries(entries.clone(), &machine(&[], &[dir]), FX).len(),
            1
        );
        assert_eq!(
            fold_entries(entries.clone(), &machine(&[50], &[]), FX).len(),
            1
        );
        assert!(fold_entries(entries, &machine(&[], &[]), FX).is_empty());
    }
}
