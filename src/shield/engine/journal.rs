//! The journal: every change is recorded, with the value it replaces,
//! before it is made, so that any failure, crash or Ctrl-C can be undone.
//!
//! Layout under the root: `run/cpushield/lock` (flock held by the running
//! cpushield), `run/cpushield/journal/state.json` (what the shield is) and
//! numbered segments `000001.json`, ... each holding a batch of entries.
//! Every file is written atomically: a new temporary file (O_EXCL,
//! O_NOFOLLOW, mode 0600), fsync, rename, fsync of the directory.
//!
//! A journal damaged from outside (a file truncated or garbled, the state
//! deleted) is still read as far as it can be ([`salvage`]): every record
//! that parses whole, in order, and what could not be read. A record is
//! used whole or not at all, so `off` never acts on part of one.

use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::entry::REASON_BYTES;
pub use super::entry::{Entry, EntryRef, SUM_KEY, VERSION};
use super::parts::OwnFacts;
use super::segment::{parse_numbered, parse_segment};
use crate::cpulist::CpuSet;
use crate::input::brief_to;
use crate::sys::Sys;

/// Directory of cpushield's runtime state, relative to the root.
pub use crate::sys::RUN_DIR;

/// A journal problem: always names the file.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// File system error on a journal file.
    #[error("journal {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// Another cpushield holds the lock.
    #[error("another cpushield is running (lock {0} is held); wait for it or stop it")]
    Locked(PathBuf),
    /// A record file does not parse.
    #[error("journal {path} is damaged: {reason}")]
    Damaged {
        /// The file.
        path: PathBuf,
        /// The parse error.
        reason: String,
    },
    /// A file of the shield's journal is missing or does not parse:
    /// `off` restores what the readable records hold ([`salvage`]).
    #[error("journal {path} is damaged: {reason}; 'cpushield off' restores what the journal's readable records hold, names what it cannot, and exits 5")]
    DamagedJournal {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The journal's directory is a symlink or not a directory.
    #[error("refusing to use {0}: it is a symbolic link or not a directory")]
    Unsafe(PathBuf),
    /// The run directory is not one only we may write ([`Sys::run_dir`]).
    #[error(transparent)]
    RunDir(crate::sys::SysError),
}

pub(super) fn io_err(path: &Path) -> impl FnOnce(io::Error) -> JournalError + '_ {
    move |source| JournalError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What the shield is; lets `status`, `run`, `move` and `off` find it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct State {
    /// Journal format version.
    pub version: u32,
    /// Shielded CPUs.
    pub shield: CpuSet,
    /// Housekeeping CPUs.
    pub housekeeping: CpuSet,
    /// Mechanism name.
    pub mechanism: String,
    /// Shield cgroup directory relative to the root.
    pub shield_dir: String,
    /// Where tasks leaving the shield go (`.../cgroup.procs` of the v2 root or v1 system cpuset).
    pub outside_procs: String,
    /// Whether `on` finished (false while it runs, or when it was killed).
    pub complete: bool,
    /// The partition type written (v2), which `status` expects to read back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    /// Files (relative to the root) whose write the kernel refused when
    /// `on` last ran (a knob file that is read-only or refuses): `status`
    /// does not expect them to read as written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writes_refused: Vec<String>,
    /// The request the shield was last brought to (`on`, `apply`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<super::request::Request>,
    /// What each component keeps of the shield, its own type under its
    /// name (see [`crate::shield::component::Component::record`]): the
    /// IRQs kept on the shield, irqbalance's ban, the starvation guard.
    #[serde(default, skip_serializing_if = "OwnFacts::is_empty")]
    pub parts: OwnFacts,
    /// What a cpushield of journal version 2 or older kept at the top
    /// level, each under a key of its own: each component reads
    /// its own from here when `parts` has nothing of it, so that a shield
    /// made before an upgrade still holds and is undone.
    #[serde(flatten)]
    pub older: std::collections::BTreeMap<String, serde_json::Value>,
}

impl State {
    /// A complete shield of CPUs 2-3 (housekeeping 0-1) as a v2 partition
    /// of cpushield's own, with no record yet: for the components' tests.
    #[cfg(test)]
    pub(in crate::shield) fn example() -> State {
        State {
            version: VERSION,
            shield: CpuSet::parse_list("2-3").unwrap(),
            housekeeping: CpuSet::parse_list("0-1").unwrap(),
            mechanism: "cgroup v2 partition".into(),
            shield_dir: "sys/fs/cgroup/cpushield".into(),
            outside_procs: "sys/fs/cgroup/cgroup.procs".into(),
            complete: true,
            partition: Some("isolated".into()),
            writes_refused: Vec::new(),
            request: None,
            parts: Default::default(),
            older: Default::default(),
        }
    }

    /// `component`'s record of the shield: what it kept in `parts`, else
    /// what an older cpushield kept at the top level under `older_key`.
    pub fn record<T: serde::de::DeserializeOwned>(
        &self,
        component: &str,
        older_key: &str,
    ) -> Option<T> {
        self.parts.get(component).or_else(|| {
            let value = self.older.get(older_key)?;
            serde_json::from_value(value.clone()).ok()
        })
    }
}

/// The exclusive lock of a running cpushield; released on drop.
#[derive(Debug)]
pub struct Lock {
    _held: crate::sys::pid_lock::PidLock,
    /// The fixture whose emulation caches while the lock is held (test builds).
    #[cfg(feature = "fixture")]
    fixture: Option<crate::sys::fixture::Fixture>,
}

#[cfg(feature = "fixture")]
impl Drop for Lock {
    fn drop(&mut self) {
        if let Some(fixture) = &self.fixture {
            fixture.lock_released();
        }
    }
}

/// Opens (creating if needed) the run directory safely: mode 0700, not a
/// symlink, owned by us, written by no one else ([`Sys::run_dir`]).
fn run_dir(sys: &Sys) -> Result<PathBuf, JournalError> {
    sys.run_dir().map_err(JournalError::RunDir)
}

/// Records that `apply` brought the machine to its config now (Unix
/// seconds), for the age `metrics` reports. Kept beside the journal, under
/// `/run`: gone at reboot, like the shield.
pub fn record_apply(sys: &Sys, unix_s: u64) -> Result<(), JournalError> {
    write_atomic(
        &run_dir(sys)?.join("last-apply"),
        format!("{unix_s}\n").as_bytes(),
    )
}

/// When `apply` last brought the machine to its config (Unix seconds).
pub fn last_apply(sys: &Sys) -> Option<u64> {
    fs::read_to_string(sys.path(RUN_DIR).join("last-apply"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The lock file under the root: a `flock` on it is held by the
/// cpushield that changes the shield.
pub const LOCK_FILE: &str = "run/cpushield/lock";

/// The pid of the cpushield that holds the lock now, read without taking
/// it: the pid its holder wrote in the lock file, while that process has
/// the file open (a holder killed meanwhile has not).
pub fn holder(sys: &Sys) -> Option<i32> {
    let said = sys.read(LOCK_FILE).ok()?;
    let pid: i32 = said.split_whitespace().next()?.parse().ok()?;
    crate::sys::procfs::has_open(sys, pid, &sys.path(LOCK_FILE)).then_some(pid)
}

/// Takes the lock without waiting.
pub fn lock(sys: &Sys) -> Result<Lock, JournalError> {
    take(sys, "\n")
}

/// Takes the lock without waiting; the lock file then says the holder's
/// pid followed by `says` (see [`holder`]), over whatever an earlier
/// holder said.
fn take(sys: &Sys, says: &str) -> Result<Lock, JournalError> {
    let path = run_dir(sys)?.join("lock");
    let Some(held) = crate::sys::pid_lock::try_take(&path, says).map_err(io_err(&path))? else {
        return Err(JournalError::Locked(path));
    };
    #[cfg(feature = "fixture")]
    let fixture = sys.fixture().cloned();
    #[cfg(feature = "fixture")]
    if let Some(fixture) = &fixture {
        fixture.lock_taken();
    }
    Ok(Lock {
        _held: held,
        #[cfg(feature = "fixture")]
        fixture,
    })
}

/// What the lock file ends with while a repair holds the lock (after its
/// holder's pid).
const REPAIRING: &str = " repair\n";

/// Takes the lock without waiting, for a repair (a change in place to the
/// shield's own request, which takes a second or two): the lock file says
/// so while it is held, and [`lock_past_repair`] waits for it.
pub fn lock_for_repair(sys: &Sys) -> Result<Lock, JournalError> {
    take(sys, REPAIRING)
}

/// The lock for a person's `on` or `off`: while a repair holds it, waited
/// for, up to [`LOCK_WAIT`]; while anything else holds it, refused at once.
/// A shield being repaired is no reason for `on` to fail.
pub fn lock_past_repair(sys: &Sys) -> Result<Lock, JournalError> {
    let started = Instant::now();
    let repairing = || {
        std::fs::read(sys.path(LOCK_FILE)).is_ok_and(|said| said.ends_with(REPAIRING.as_bytes()))
    };
    loop {
        match lock(sys) {
            Err(JournalError::Locked(_)) if started.elapsed() < LOCK_WAIT && repairing() => {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

/// How long `run` and `move` wait for another cpushield command to
/// finish before they give up: `on` in the emulated test guests took up to
/// 40 s with 10,000 threads, and two real-time services started together
/// at boot must both start.
pub const LOCK_WAIT: Duration = Duration::from_secs(120);

/// [`lock`], waiting up to `bound` while another cpushield holds it;
/// `waiting` is called once, when the wait begins.
pub fn lock_waiting(sys: &Sys, bound: Duration, waiting: &dyn Fn()) -> Result<Lock, JournalError> {
    let started = Instant::now();
    let mut told = false;
    loop {
        match lock(sys) {
            Err(JournalError::Locked(path)) => {
                if started.elapsed() >= bound {
                    return Err(JournalError::Locked(path));
                }
                if !told {
                    waiting();
                    told = true;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

/// Writes a record that must survive crashes and reboots (the boot half's,
/// under `/var/lib`) the journal's way, making its directory (0700) first.
pub fn write_durable(path: &Path, data: &[u8]) -> Result<(), JournalError> {
    let dir = path.parent().expect("records live in a directory");
    if !dir.is_dir() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io_err(dir))?;
    }
    write_atomic(path, data)
}

/// Writes `data` to `path` atomically and durably ([`crate::durable`]).
pub(super) fn write_atomic(path: &Path, data: &[u8]) -> Result<(), JournalError> {
    crate::durable::write_atomic(path, data).map_err(durable_err)
}

/// A durable file operation's error as the journal's.
pub(super) fn durable_err(e: crate::durable::DurableError) -> JournalError {
    JournalError::Io {
        path: e.path,
        source: e.source,
    }
}

/// A segment's bytes: the list of `entries`, each with its checksum
/// ([`super::entry::SUM_KEY`]).
pub(super) fn segment_bytes<E: Serialize>(entries: &[E]) -> Vec<u8> {
    let mut data = vec![b'['];
    for (i, e) in entries.iter().enumerate() {
        if i > 0 {
            data.push(b',');
        }
        data.extend(super::entry::sealed(e));
    }
    data.push(b']');
    data
}

/// An open journal, appending segments.
#[derive(Debug)]
pub struct Journal {
    pub(super) dir: PathBuf,
    pub(super) next_segment: usize,
    spent: Duration,
}

impl Journal {
    /// Directory of the journal under the root.
    pub fn dir_of(sys: &Sys) -> PathBuf {
        sys.path(RUN_DIR).join("journal")
    }

    /// Whether a journal (an active or interrupted shield) exists: its
    /// state record, or segments whose state record is gone (a damaged
    /// journal, which `off` still restores from).
    pub fn exists(sys: &Sys) -> bool {
        let dir = Journal::dir_of(sys);
        dir.join("state.json").exists() || segment_files(&dir).is_ok_and(|s| !s.is_empty())
    }

    /// Starts a new journal; fails if one exists. A directory without a
    /// state record and without segments is what an `on` killed before it
    /// wrote its state leaves (it changed nothing yet): it is replaced.
    pub fn create(sys: &Sys, state: &State) -> Result<Journal, JournalError> {
        let dir = run_dir(sys)?.join("journal");
        let make = || fs::DirBuilder::new().mode(0o700).create(&dir);
        match make() {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && Journal::unstarted(&dir)? => {
                fs::remove_dir_all(&dir).map_err(io_err(&dir))?;
                make().map_err(io_err(&dir))?;
            }
            Err(e) => return Err(io_err(&dir)(e)),
        }
        let mut j = Journal {
            dir,
            next_segment: 1,
            spent: Duration::ZERO,
        };
        j.write_state(state)?;
        Ok(j)
    }

    /// Whether `dir` is a journal directory (not a symlink) that never got
    /// its state record nor any segment.
    fn unstarted(dir: &Path) -> Result<bool, JournalError> {
        let real_dir = fs::symlink_metadata(dir)
            .map(|m| m.file_type().is_dir())
            .map_err(io_err(dir))?;
        Ok(real_dir && !dir.join("state.json").exists() && segment_files(dir)?.is_empty())
    }

    /// Opens the existing journal to append to it.
    pub fn open(sys: &Sys) -> Result<Journal, JournalError> {
        let dir = Journal::dir_of(sys);
        if fs::symlink_metadata(&dir)
            .map(|m| m.file_type().is_symlink())
            .unwrap_or(false)
        {
            return Err(JournalError::Unsafe(dir));
        }
        let next_segment = segment_files(&dir)?.len() + 1;
        Ok(Journal {
            dir,
            next_segment,
            spent: Duration::ZERO,
        })
    }

    /// Wall-clock time this handle has spent writing journal files
    /// (serialising, writing, fsync, rename), for the benchmark.
    pub fn time_spent(&self) -> Duration {
        self.spent
    }

    /// Number of segments in the journal so far.
    pub fn segments(&self) -> usize {
        self.next_segment - 1
    }

    /// Replaces the state record.
    pub fn write_state(&mut self, state: &State) -> Result<(), JournalError> {
        let t = Instant::now();
        let data = serde_json::to_vec_pretty(state).expect("state serialises");
        let r = write_atomic(&self.dir.join("state.json"), &data);
        self.spent += t.elapsed();
        r
    }

    /// Appends a batch of entries durably. Call before making the changes.
    pub fn append<E: Serialize>(&mut self, entries: &[E]) -> Result<(), JournalError> {
        if entries.is_empty() {
            return Ok(());
        }
        let t = Instant::now();
        let data = segment_bytes(entries);
        let path = self.dir.join(format!("{:06}.json", self.next_segment));
        let r = write_atomic(&path, &data);
        self.spent += t.elapsed();
        r?;
        self.next_segment += 1;
        Ok(())
    }

    /// Drops the segments after the first `keep` (a change undone again).
    pub fn truncate(&mut self, keep: usize) -> Result<(), JournalError> {
        for path in segment_files(&self.dir)?.into_iter().skip(keep) {
            fs::remove_file(&path).map_err(io_err(&path))?;
        }
        self.next_segment = keep + 1;
        Ok(())
    }

    /// Removes the journal after a complete undo. It is renamed away
    /// first, so that a removal cut short never leaves some of its
    /// segments where `off` would take them for a damaged journal.
    pub fn remove(self) -> Result<(), JournalError> {
        if let Some(run) = self.dir.parent() {
            remove_folding(run)?;
        }
        let gone = self.dir.with_file_name(".journal.removing");
        let _ = fs::remove_dir_all(&gone);
        fs::rename(&self.dir, &gone).map_err(io_err(&self.dir))?;
        fs::remove_dir_all(&gone).map_err(io_err(&gone))
    }

    /// Moves a damaged journal aside to `run/cpushield/journal.damaged`
    /// (replacing an older one), once `off` restored everything its
    /// readable records hold: a new shield can start, and what was lost
    /// can still be looked at until the next reboot. Returns where it went.
    pub fn set_aside(sys: &Sys) -> Result<PathBuf, JournalError> {
        let dir = Journal::dir_of(sys);
        let aside = dir.with_file_name("journal.damaged");
        match fs::remove_dir_all(&aside) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(&aside)(e)),
        }
        fs::rename(&dir, &aside).map_err(io_err(&dir))?;
        Ok(aside)
    }
}

/// The journal's directory name while a folded journal is written; after
/// the exchange, the old journal's until it is removed.
pub(super) const FOLDING: &str = "journal.fold";

/// Removes what a fold left beside the journal (the old journal after
/// the exchange, or a folded one a kill cut short before it).
pub(super) fn remove_folding(run: &Path) -> Result<(), JournalError> {
    let folding = run.join(FOLDING);
    match fs::remove_dir_all(&folding) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err(&folding)(e)),
    }
}

fn segment_files(dir: &Path) -> Result<Vec<PathBuf>, JournalError> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(io_err(dir))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "json")
                && p.file_stem()
                    .and_then(|s| s.to_str())
                    .is_some_and(|s| s.chars().all(|c| c.is_ascii_digit()))
        })
        .collect();
    files.sort();
    Ok(files)
}

/// Reads the state record: `None` without a journal; an error naming the
/// file when it does not parse, or is missing beside segments.
pub fn read_state(sys: &Sys) -> Result<Option<State>, JournalError> {
    sys.check_run_dir().map_err(JournalError::RunDir)?;
    let dir = Journal::dir_of(sys);
    let path = dir.join("state.json");
    match fs::read(&path) {
        Ok(data) => {
            serde_json::from_slice(&data)
                .map(Some)
                .map_err(|e| JournalError::DamagedJournal {
                    path,
                    reason: brief_to(&e.to_string(), REASON_BYTES),
                })
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            match segment_files(&dir).map(|s| s.len()) {
                Ok(n) if n > 0 => Err(JournalError::DamagedJournal {
                    path,
                    reason: format!("it is missing, though the journal has {n} segment(s)"),
                }),
                _ => Ok(None),
            }
        }
        Err(e) => Err(io_err(&path)(e)),
    }
}

/// Part of a damaged journal that could not be read: a file, or records
/// of a segment. What those records changed is not undone.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Unreadable {
    /// The file.
    pub file: String,
    /// What of it could not be read, and why.
    pub reason: String,
}

/// A journal read as far as it can be: what [`salvage`] returns.
#[derive(Debug, Default)]
pub struct Salvage {
    /// The state record, when it parses.
    pub state: Option<State>,
    /// Every record that parses whole, oldest first.
    pub entries: Vec<Entry>,
    /// Where each of `entries` was read, in the same order.
    pub origins: Vec<Origin>,
    /// What could not be read; empty for an intact journal.
    pub unreadable: Vec<Unreadable>,
}

/// Where a record was read: its segment and its place in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The segment file.
    pub file: String,
    /// The record's number in it, from 1.
    pub record: usize,
}

/// Reads the journal as far as it can be read: the state when it parses,
/// every record that parses whole, in order (a segment cut short keeps
/// the records before the cut; a record that is valid JSON but no
/// cpushield record is skipped, those after it are kept), and what
/// could not be read (the state, a segment, records of one, a segment
/// missing between others). An intact journal gives what [`read_state`]
/// and [`read_entries`] give, and nothing unreadable.
pub fn salvage(sys: &Sys) -> Result<Salvage, JournalError> {
    let dir = Journal::dir_of(sys);
    if fs::symlink_metadata(&dir).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(JournalError::Unsafe(dir));
    }
    let files = segment_files(&dir)?;
    let mut out = Salvage::default();
    let mut lost = |path: &Path, reason: String| {
        out.unreadable.push(Unreadable {
            file: path.display().to_string(),
            reason,
        })
    };
    let state_path = dir.join("state.json");
    let mut state = None;
    match fs::read(&state_path) {
        Ok(data) => match serde_json::from_slice(&data) {
            Ok(s) => state = Some(s),
            Err(e) => lost(
                &state_path,
                format!(
                    "the shield's state does not parse: {}",
                    brief_to(&e.to_string(), REASON_BYTES)
                ),
            ),
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            lost(&state_path, "the shield's state is missing".into())
        }
        Err(e) => lost(
            &state_path,
            format!("the shield's state cannot be read: {e}"),
        ),
    }
    // Segments are numbered from 1 without gaps; one missing between
    // others held records too.
    let numbers: Vec<usize> = files.iter().filter_map(|p| segment_number(p)).collect();
    let missing: Vec<usize> = match numbers.last() {
        Some(&last) => (1..last).filter(|n| !numbers.contains(n)).collect(),
        None => Vec::new(),
    };
    for n in missing.iter().take(5) {
        lost(
            &dir.join(format!("{n:06}.json")),
            "the segment is missing: every record it held".into(),
        );
    }
    if missing.len() > 5 {
        lost(
            &dir,
            format!("{} more segments are missing", missing.len() - 5),
        );
    }
    let (mut entries, mut origins) = (Vec::new(), Vec::new());
    for path in &files {
        match fs::read(path) {
            Ok(data) => {
                let (readable, problem) = parse_numbered(&data);
                for (record, entry) in readable {
                    let file = path.display().to_string();
                    origins.push(Origin { file, record });
                    entries.push(entry);
                }
                if let Some(reason) = problem {
                    lost(path, reason);
                }
            }
            Err(e) => lost(path, format!("every record: the file cannot be read: {e}")),
        }
    }
    out.state = state;
    out.entries = entries;
    out.origins = origins;
    Ok(out)
}

/// The number of a segment file (`000003.json`: 3).
fn segment_number(path: &Path) -> Option<usize> {
    path.file_stem()?.to_str()?.parse().ok()
}

/// Reads every entry, oldest first.
pub fn read_entries(sys: &Sys) -> Result<Vec<Entry>, JournalError> {
    read_entries_from(sys, 0)
}

/// The entries of the segments after the first `skip` (those one later
/// change appended), in order.
pub fn read_entries_from(sys: &Sys, skip: usize) -> Result<Vec<Entry>, JournalError> {
    let dir = Journal::dir_of(sys);
    let mut out = Vec::new();
    for path in segment_files(&dir)?.into_iter().skip(skip) {
        let data = fs::read(&path).map_err(io_err(&path))?;
        match parse_segment(&data) {
            (mut entries, None) => out.append(&mut entries),
            (_, Some(reason)) => return Err(JournalError::DamagedJournal { path, reason }),
        }
    }
    Ok(out)
}

/// How large the journal of a shield is: what `status` shows and the
/// metrics export, to see that it stays as large as what is in effect.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Size {
    /// Records that parse, in every segment.
    pub records: usize,
    /// Files (the state and the segments).
    pub files: usize,
    /// Bytes of those files.
    pub bytes: u64,
}

/// The size of the journal, `None` without one.
pub fn size(sys: &Sys) -> Option<Size> {
    let dir = Journal::dir_of(sys);
    let segments = segment_files(&dir).ok()?;
    let state = dir.join("state.json");
    if segments.is_empty() && !state.exists() {
        return None;
    }
    let records = (segments.iter())
        .filter_map(|p| fs::read(p).ok())
        .map(|data| parse_segment(&data).0.len())
        .sum();
    let files = segments.len() + usize::from(state.exists());
    let bytes = (segments.iter().chain([&state]))
        .filter_map(|p| fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    Some(Size {
        records,
        files,
        bytes,
    })
}

/// Seconds since the shield's state was last written (when `on` finished),
/// `None` without a shield.
pub fn state_age(sys: &Sys) -> Option<u64> {
    let modified = fs::metadata(Journal::dir_of(sys).join("state.json"))
        .and_then(|m| m.modified())
        .ok()?;
    Some(modified.elapsed().map_or(0, |d| d.as_secs()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shield::engine::change::Action;
    use std::os::unix::fs::PermissionsExt;

    fn state() -> State {
        State {
            version: 1,
            complete: false,
            ..State::example()
        }
    }

    #[test]
    fn a_state_of_version_2_gives_each_component_its_record_until_parts_holds_one() {
        let v2 = r#"{"version":2,"shield":"2-3","housekeeping":"0-1","mechanism":"m",
            "shield_dir":"d","outside_procs":"p","complete":true,"irqs_kept":[24,30],
            "guard":true}"#;
        let mut s: State = serde_json::from_str(v2).unwrap();
        assert!(s.parts.is_empty());
        assert_eq!(
            s.record::<Vec<u32>>("irqs", "irqs_kept"),
            Some(vec![24, 30])
        );
        assert_eq!(s.record::<bool>("guard", "guard"), Some(true));
        assert_eq!(s.record::<bool>("idle-states", "idle"), None);
        // Written back (a change in place rewrites the state), it reads the same.
        let again: State = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(again, s);
        s.parts.put("irqs", &[40u32]);
        assert_eq!(s.record::<Vec<u32>>("irqs", "irqs_kept"), Some(vec![40]));
    }

    #[test]
    fn a_journal_killed_before_its_state_is_replaced_but_not_one_with_segments() {
        let tmp = tempfile::tempdir().unwrap();
        let sys = Sys::at(tmp.path());
        // What `on` killed between the directory and the state's rename leaves.
        let dir = Journal::dir_of(&sys);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join(".state.json.tmp"), "{").unwrap();
        assert!(!Journal::exists(&sys));
        Journal::create(&sys, &state()).expect("a directory with no state is replaced");
        assert_eq!(read_state(&sys).unwrap(), Some(state()));
        assert!(!dir.join(".state.json.tmp").exists());
        // Segments without a state were never written by cpushield: keep them.
        fs::remove_file(dir.join("state.json")).unwrap();
        fs::write(dir.join("000001.json"), "[]").unwrap();
        assert!(Journal::create(&sys, &state()).is_err());
        assert!(dir.join("000001.json").exists());
    }

    #[test]
    fn segments_round_trip_in_order_with_private_modes() {
        let tmp = tempfile::tempdir().unwrap();
        let sys = Sys::at(tmp.path());
        let mut j = Journal::create(&sys, &state()).unwrap();
        let e = |path: &str| Entry {
            owner: None,
            action: Action::Mkdir { path: path.into() },
            previous: None,
            at: Some(5),
        };
        j.append(&[e("a"), e("b")]).unwrap();
        j.append(&[e("c")]).unwrap();
        let mut j2 = Journal::open(&sys).unwrap();
        j2.append(&[e("d")]).unwrap();
        let names: Vec<Entry> = read_entries(&sys).unwrap();
        assert_eq!(names, vec![e("a"), e("b"), e("c"), e("d")]);
        assert_eq!(read_state(&sys).unwrap(), Some(state()));
        let mode = fs::metadata(Journal::dir_of(&sys).join("000001.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let mode = fs::metadata(sys.path(RUN_DIR))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        assert!(
            Journal::create(&sys, &state()).is_err(),
            "a second journal is refused"
        );
    }

    #[test]
    fn borrowed_entries_read_back_as_entries() {
        let tmp = tempfile::tempdir().unwrap();
        let sys = Sys::at(tmp.path());
        let mut j = Journal::create(&sys, &state()).unwrap();
        let actions = [
            Action::Remember {
                affinities: vec![(7, CpuSet::parse_list("0-3").unwrap())],
            },
            Action::Write {
                path: "proc/irq/9/smp_affinity_list".into(),
                value: "0-1".into(),
                check: crate::shield::engine::change::Check::CpuList,
                undo: crate::shield::engine::change::Undo::Previous,
            },
        ];
        let refs = [
            EntryRef {
                owner: None,
                action: &actions[0],
                previous: None,
                at: Some(12),
            },
            EntryRef {
                owner: None,
                at: None,
                action: &actions[1],
                previous: Some("0-3".into()),
            },
        ];
        j.append(&refs).unwrap();
        let owned = vec![
            Entry {
                owner: None,
                action: actions[0].clone(),
                previous: None,
                at: Some(12),
            },
            Entry {
                owner: None,
                action: actions[1].clone(),
                previous: Some("0-3".into()),
                at: None,
            },
        ];
        assert_eq!(read_entries(&sys).unwrap(), owned);
        let data = fs::read(Journal::dir_of(&sys).join("000001.json")).unwrap();
        let sealed: Vec<Vec<u8>> = owned.iter().map(super::super::entry::sealed).collect();
        assert_eq!(
            data,
            [b"[".to_vec(), sealed.join(&b","[..]), b"]".to_vec()].concat(),
            "same bytes as owned entries, each with its checksum"
        );
        assert_eq!(j.segments(), 1);
    }

    fn sample_entries() -> Vec<Entry> {
        let write = |irq: u32| Entry {
            owner: None,
            action: Action::Write {
                path: format!("proc/irq/{irq}/smp_affinity_list"),
                value: "0-1".into(),
                check: crate::shield::engine::change::Check::CpuList,
                undo: crate::shield::engine::change::Undo::Previous,
            },
            previous: Some("0-3".into()),
            at: Some(7),
        };
        vec![
            Entry {
                owner: None,
                action: Action::Remember {
                    affinities: vec![(1, CpuSet::parse_list("0-3").unwrap())],
                },
                previous: None,
                at: Some(5),
            },
            Entry {
                owner: None,
                action: Action::Mkdir {
                    path: "sys/fs/cgroup/cpushield".into(),
                },
                previous: None,
                at: None,
            },
            write(9),
            write(25),
        ]
    }

    #[test]
    fn a_segment_cut_at_every_offset_gives_the_records_before_the_cut_whole() {
        let all = sample_entries();
        let data = serde_json::to_vec(&all).unwrap();
        let ends: Vec<usize> = (1..=all.len())
            .map(|n| serde_json::to_vec(&all[..n]).unwrap().len() - 1)
            .collect();
        for cut in 0..data.len() {
            let (entries, problem) = parse_segment(&data[..cut]);
            // Exactly the records whose closing brace is before the cut.
            let whole = ends.iter().filter(|end| **end <= cut).count();
            assert_eq!(entries, all[..whole], "cut at {cut}");
            let problem = problem.unwrap_or_else(|| panic!("cut at {cut}: damage not said"));
            assert!(problem.len() < 400, "{problem}");
        }
        assert_eq!(parse_segment(&data), (all, None));
    }

    #[test]
    fn a_record_whose_prior_is_not_text_is_damage_named_briefly() {
        let all = sample_entries();
        let mut values: Vec<serde_json::Value> = all
            .iter()
            .map(|e| serde_json::to_value(e).unwrap())
            .collect();
        values[1]["prior"] = serde_json::json!(["x".repeat(5000)]);
        let (entries, problem) = parse_segment(&serde_json::to_vec(&values).unwrap());
        assert_eq!(entries.len(), all.len() - 1);
        let problem = problem.unwrap();
        assert!(
            problem.contains("prior: not a string") && problem.len() < 400,
            "{problem}"
        );
    }

    #[test]
    fn a_record_that_is_json_but_no_record_is_skipped_alone() {
        let all = sample_entries();
        let mut values: Vec<serde_json::Value> = all
            .iter()
            .map(|e| serde_json::to_value(e).unwrap())
            .collect();
        values[2]["action"] = "wr1te".into();
        values.insert(1, serde_json::json!({"x": "y".repeat(5000)}));
        let (entries, problem) = parse_segment(&serde_json::to_vec(&values).unwrap());
        assert_eq!(
            entries,
            vec![all[0].clone(), all[1].clone(), all[3].clone()]
        );
        let problem = problem.unwrap();
        assert!(
            problem.starts_with("records 2, 4 of 5 are not cpushield records")
                && problem.len() < 400,
            "{problem}"
        );
    }

    /// The segment `sample_entries` make when this cpushield writes them,
    /// each record with its checksum.
    fn sealed_sample(sys: &Sys) -> Vec<u8> {
        let mut j = Journal::create(sys, &state()).unwrap();
        j.append(&sample_entries()).unwrap();
        fs::read(Journal::dir_of(sys).join("000001.json")).unwrap()
    }

    #[test]
    fn each_record_carries_its_checksum_and_an_altered_one_is_not_read() {
        let tmp = tempfile::tempdir().unwrap();
        let sys = Sys::at(tmp.path());
        let data = sealed_sample(&sys);
        let values: Vec<serde_json::Value> = serde_json::from_slice(&data).unwrap();
        assert!(values
            .iter()
            .all(|v| v[SUM_KEY].as_str().is_some_and(|s| s.len() == 8)));
        assert_eq!(parse_segment(&data), (sample_entries(), None));
        // The value irq 25 had, altered by hand: that record is not read.
        let text = String::from_utf8(data).unwrap();
        let needle = r#""path":"proc/irq/25/smp_affinity_list","value":"0-1""#;
        let altered = text.replace(needle, &needle.replace("0-1", "0-3"));
        assert_ne!(altered, text);
        let (entries, problem) = parse_segment(altered.as_bytes());
        assert_eq!(entries, sample_entries()[..3]);
        assert_eq!(
            problem.unwrap(),
            "record 4 of 4: altered after it was written (the checksum does not match)"
        );
        // Its checksum taken away, beside records that carry theirs: not
        // read either. A segment whose records carry none (written before
        // checksums) is read whole.
        let mut values: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
        values[1].as_object_mut().unwrap().remove(SUM_KEY);
        let (entries, problem) = parse_segment(&serde_json::to_vec(&values).unwrap());
        assert_eq!(entries.len(), 3);
        assert!(problem.unwrap().starts_with("record 2 of 4: no checksum"));
        for v in &mut values {
            v.as_object_mut().unwrap().remove(SUM_KEY);
        }
        let unsealed = serde_json::to_vec(&values).unwrap();
        assert_eq!(parse_segment(&unsealed), (sample_entries(), None));
    }

    proptest::proptest! {
        /// A segment this cpushield wrote, a random byte changed: whatever
        /// is read is a record as written (the checksum tells every
        /// changed byte), and the damage is said.
        #[test]
        fn a_sealed_record_is_read_as_written_or_not_at_all(
            at in 0usize..1000,
            byte in proptest::num::u8::ANY,
        ) {
            let tmp = tempfile::tempdir().unwrap();
            let mut data = sealed_sample(&Sys::at(tmp.path()));
            let at = at % data.len();
            proptest::prop_assume!(data[at] != byte);
            data[at] = byte;
            let (entries, problem) = parse_segment(&data);
            let all = sample_entries();
            proptest::prop_assert!(entries.iter().all(|e| all.contains(e)));
            proptest::prop_assert!(problem.is_some() || entries == all);
        }
    }

    proptest::proptest! {
        /// Random bytes, and a real segment with a random byte changed:
        /// no panic, a short reason, and at most the one record that
        /// byte is in reads otherwise than written (a byte changed
        /// inside a value of a record without a checksum, as written
        /// before records carried one, can still read as a record).
        #[test]
        fn damage_never_panics_and_is_said_briefly(
            junk in proptest::collection::vec(proptest::num::u8::ANY, 0..300),
            at in 0usize..1000,
            byte in proptest::num::u8::ANY,
        ) {
            let (entries, problem) = parse_segment(&junk);
            proptest::prop_assert!(problem.is_some() || serde_json::from_slice::<Vec<Entry>>(&junk).is_ok());
            proptest::prop_assert!(problem.map_or(0, |p| p.len()) < 600);
            drop(entries);
            let mut data = serde_json::to_vec(&sample_entries()).unwrap();
            let at = at % data.len();
            data[at] = byte;
            let (entries, problem) = parse_segment(&data);
            proptest::prop_assert!(problem.map_or(0, |p| p.len()) < 600);
            let all = sample_entries();
            proptest::prop_assert!(entries.len() <= all.len());
            proptest::prop_assert!(entries.iter().filter(|e| !all.contains(e)).count() <= 1);
        }
    }

    #[test]
    fn salvage_names_a_missing_state_and_a_missing_segment() {
        let tmp = tempfile::tempdir().unwrap();
        let sys = Sys::at(tmp.path());
        let mut j = Journal::create(&sys, &state()).unwrap();
        let all = sample_entries();
        for e in &all {
            j.append(std::slice::from_ref(e)).unwrap();
        }
        let intact = salvage(&sys).unwrap();
        assert_eq!((intact.state, intact.entries), (Some(state()), all.clone()));
        assert!(intact.unreadable.is_empty());
        let dir = Journal::dir_of(&sys);
        fs::remove_file(dir.join("state.json")).unwrap();
        fs::remove_file(dir.join("000002.json")).unwrap();
        assert!(
            Journal::exists(&sys),
            "segments without a state are a journal"
        );
        assert!(matches!(
            read_state(&sys),
            Err(JournalError::DamagedJournal { .. })
        ));
        let s = salvage(&sys).unwrap();
        assert_eq!(s.state, None);
        assert_eq!(
            s.entries,
            vec![all[0].clone(), all[2].clone(), all[3].clone()]
        );
        let reasons: Vec<&str> = s.unreadable.iter().map(|u| u.reason.as_str()).collect();
        assert_eq!(
            reasons,
            [
                "the shield's state is missing",
                "the segment is missing: every record it held"
            ]
        );
        assert!(s.unreadable[1].file.ends_with("000002.json"));
        // Set aside: no journal, the next shield can start.
        let aside = Journal::set_aside(&sys).unwrap();
        assert!(aside.join("000001.json").exists() && !Journal::exists(&sys));
        Journal::create(&sys, &state()).unwrap();
    }

    #[test]
    fn lock_is_exclusive() {
        let tmp = tempfile::tempdir().unwrap();
        let sys = Sys::at(tmp.path());
        let held = lock(&sys).unwrap();
        assert!(matches!(lock(&sys), Err(JournalError::Locked(_))));
        drop(held);
        assert!(lock(&sys).is_ok());
    }

    #[test]
    fn a_person_waits_for_a_repair_but_not_for_another_holder() {
        let tmp = tempfile::tempdir().unwrap();
        let sys = Sys::at(tmp.path());
        // Another command holds it: refused at once.
        let held = lock(&sys).unwrap();
        let t = Instant::now();
        assert!(matches!(
            lock_past_repair(&sys),
            Err(JournalError::Locked(_))
        ));
        assert!(t.elapsed() < Duration::from_secs(5));
        drop(held);
        // A repair holds it: waited for until it lets go.
        let repair = lock_for_repair(&sys).unwrap();
        let letting_go = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            drop(repair);
        });
        assert!(lock_past_repair(&sys).is_ok());
        letting_go.join().unwrap();
        // What the repair said of itself is gone with it: the next holder
        // says who it is, and `holder` finds it while it holds the lock.
        let after = lock(&sys).unwrap();
        let me = std::process::id() as i32;
        assert_eq!(
            std::fs::read(sys.path(LOCK_FILE)).unwrap(),
            format!("{me}\n").as_bytes()
        );
        // (`holder` reads the root's /proc: here the live one.)
        let open = || crate::sys::procfs::has_open(&Sys::live(), me, &sys.path(LOCK_FILE));
        assert!(open());
        drop(after);
        assert!(!open(), "the file closed, no holder");
        assert_eq!(holder(&sys), None, "a fixture root's /proc has no holder");
    }

    #[test]
    fn a_waiting_lock_is_taken_once_the_holder_lets_go_and_says_it_waited() {
        let tmp = tempfile::tempdir().unwrap();
        let sys = Sys::at(tmp.path());
        let held = lock(&sys).unwrap();
        let waited = std::sync::atomic::AtomicUsize::new(0);
        let notify = || {
            waited.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        };
        // Held throughout: refused once the bound is over.
        let short = Duration::from_millis(100);
        assert!(matches!(
            lock_waiting(&sys, short, &notify),
            Err(JournalError::Locked(_))
        ));
        assert_eq!(waited.load(std::sync::atomic::Ordering::SeqCst), 1);
        // Let go while another waits: that one gets it.
        let root = tmp.path().to_path_buf();
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            drop(held);
            root
        });
        let got = lock_waiting(&sys, Duration::from_secs(30), &notify);
        release.join().unwrap();
        assert!(got.is_ok());
        assert_eq!(waited.load(std::sync::atomic::Ordering::SeqCst), 2);
        // Free: taken at once, nothing said.
        drop(got);
        assert!(lock_waiting(&sys, short, &notify).is_ok());
        assert_eq!(waited.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[test]
    fn symlinked_run_dir_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir_all(tmp.path().join("run")).unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), tmp.path().join(RUN_DIR)).unwrap();
        let sys = Sys::at(tmp.path());
        assert!(matches!(lock(&sys), Err(JournalError::RunDir(_))));
    }
}
