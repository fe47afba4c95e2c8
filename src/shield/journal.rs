//! The journal: every change is recorded, with the value it replaces,
//! before it is made, so that any failure, crash or Ctrl-C can be undone.
//!
//! Layout under the root: `run/cpushield/lock` (flock held by the running
//! cpushield), `run/cpushield/journal/state.json` (what the shield is) and
//! numbered segments `000001.json`, ... each holding a batch of entries.
//! Every file is written atomically: a new temporary file (O_EXCL,
//! O_NOFOLLOW, mode 0600), fsync, rename, fsync of the directory.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

use super::change::Action;
use crate::cpulist::CpuSet;
use crate::sys::Sys;

/// Directory of cpushield's runtime state, relative to the root.
pub const RUN_DIR: &str = "run/cpushield";

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
    /// A journal file does not parse.
    #[error("journal {path} is damaged: {reason}")]
    Damaged {
        /// The file.
        path: PathBuf,
        /// The parse error.
        reason: String,
    },
    /// The run directory is a symlink or not owned by us.
    #[error("refusing to use {0}: it is a symbolic link or not a directory")]
    Unsafe(PathBuf),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> JournalError + '_ {
    move |source| JournalError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One recorded change.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Entry {
    /// The change.
    #[serde(flatten)]
    pub action: Action,
    /// For writes undone with the previous value: that value, read just before.
    #[serde(default, rename = "prior", skip_serializing_if = "Option::is_none")]
    pub previous: Option<String>,
    /// When it was journaled, in clock ticks since boot (the unit of a
    /// thread's start time in `/proc/TID/stat`). A thread id that names a
    /// thread started later is a recycled id: undo leaves that thread alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<u64>,
}

/// An [`Entry`] that borrows its action: what `apply` journals, so that a
/// step (and the affinities of every thread it may carry) is serialised
/// without being copied first. Reads back as an [`Entry`].
#[derive(Debug, Serialize)]
pub struct EntryRef<'a> {
    /// The change.
    #[serde(flatten)]
    pub action: &'a Action,
    /// As [`Entry::previous`].
    #[serde(rename = "prior", skip_serializing_if = "Option::is_none")]
    pub previous: Option<String>,
    /// As [`Entry::at`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<u64>,
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
    /// IRQs allowed on the shield when `on` finished: bound to it on
    /// request, or refusing a new affinity. Any other IRQ there is drift.
    #[serde(default)]
    pub irqs_kept: Vec<u32>,
    /// Files (relative to the root) whose write the kernel refused when
    /// `on` last ran (a knob file that is read-only or refuses): `status`
    /// does not expect them to read as written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writes_refused: Vec<String>,
    /// The CPUs banned for irqbalance, when `on` set the ban.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irqbalance_ban: Option<CpuSet>,
    /// The request the shield was last brought to (`on`, `apply`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<crate::shield::request::Request>,
    /// The shield started the starvation guard (`status` expects it alive).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub guard: bool,
}

/// The exclusive lock of a running cpushield; released on drop.
#[derive(Debug)]
pub struct Lock {
    _flock: Flock<File>,
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

/// Opens (creating if needed) the run directory safely: mode 0700, not a symlink.
fn run_dir(sys: &Sys) -> Result<PathBuf, JournalError> {
    let dir = sys.path(RUN_DIR);
    match fs::symlink_metadata(&dir) {
        Ok(m) if m.file_type().is_symlink() || !m.is_dir() => {
            return Err(JournalError::Unsafe(dir))
        }
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)
                .map_err(io_err(&dir))?;
        }
        Err(e) => return Err(io_err(&dir)(e)),
    }
    Ok(dir)
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

/// Takes the lock without waiting.
pub fn lock(sys: &Sys) -> Result<Lock, JournalError> {
    let path = run_dir(sys)?.join("lock");
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(io_err(&path))?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(flock) => {
            #[cfg(feature = "fixture")]
            let fixture = sys.fixture().cloned();
            #[cfg(feature = "fixture")]
            if let Some(fixture) = &fixture {
                fixture.lock_taken();
            }
            Ok(Lock {
                _flock: flock,
                #[cfg(feature = "fixture")]
                fixture,
            })
        }
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Err(JournalError::Locked(path)),
        Err((_, e)) => Err(io_err(&path)(io::Error::from_raw_os_error(e as i32))),
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

/// Writes `data` to `path` atomically: temp file (O_EXCL, O_NOFOLLOW, 0600),
/// fsync, rename, fsync of the directory.
fn write_atomic(path: &Path, data: &[u8]) -> Result<(), JournalError> {
    let dir = path.parent().expect("journal files live in a directory");
    let tmp = dir.join(format!(
        ".{}.tmp",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("journal")
    ));
    let _ = fs::remove_file(&tmp);
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .map_err(io_err(&tmp))?;
    f.write_all(data).map_err(io_err(&tmp))?;
    f.sync_all().map_err(io_err(&tmp))?;
    fs::rename(&tmp, path).map_err(io_err(path))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))?;
    Ok(())
}

/// An open journal, appending segments.
#[derive(Debug)]
pub struct Journal {
    dir: PathBuf,
    next_segment: usize,
    spent: Duration,
}

impl Journal {
    /// Directory of the journal under the root.
    pub fn dir_of(sys: &Sys) -> PathBuf {
        sys.path(RUN_DIR).join("journal")
    }

    /// Whether a journal (an active or interrupted shield) exists.
    pub fn exists(sys: &Sys) -> bool {
        Journal::dir_of(sys).join("state.json").exists()
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
        let data = serde_json::to_vec(entries).expect("entries serialise");
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

    /// Removes the journal after a complete undo.
    pub fn remove(self) -> Result<(), JournalError> {
        fs::remove_dir_all(&self.dir).map_err(io_err(&self.dir))
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

/// Reads the state record.
pub fn read_state(sys: &Sys) -> Result<Option<State>, JournalError> {
    let path = Journal::dir_of(sys).join("state.json");
    match fs::read(&path) {
        Ok(data) => serde_json::from_slice(&data)
            .map(Some)
            .map_err(|e| JournalError::Damaged {
                path,
                reason: e.to_string(),
            }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(&path)(e)),
    }
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
        let mut entries: Vec<Entry> =
            serde_json::from_slice(&data).map_err(|e| JournalError::Damaged {
                path: path.clone(),
                reason: e.to_string(),
            })?;
        out.append(&mut entries);
    }
    Ok(out)
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
    use std::os::unix::fs::PermissionsExt;

    fn state() -> State {
        State {
            version: 1,
            shield: CpuSet::parse_list("2-3").unwrap(),
            housekeeping: CpuSet::parse_list("0-1").unwrap(),
            mechanism: "cgroup v2 partition".into(),
            shield_dir: "sys/fs/cgroup/cpushield".into(),
            outside_procs: "sys/fs/cgroup/cgroup.procs".into(),
            complete: false,
            partition: Some("isolated".into()),
            irqs_kept: Vec::new(),
            writes_refused: Vec::new(),
            irqbalance_ban: None,
            request: None,
            guard: false,
        }
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
                check: crate::shield::change::Check::CpuList,
                undo: crate::shield::change::Undo::Previous,
            },
        ];
        let refs = [
            EntryRef {
                action: &actions[0],
                previous: None,
                at: Some(12),
            },
            EntryRef {
                at: None,
                action: &actions[1],
                previous: Some("0-3".into()),
            },
        ];
        j.append(&refs).unwrap();
        let owned = vec![
            Entry {
                action: actions[0].clone(),
                previous: None,
                at: Some(12),
            },
            Entry {
                action: actions[1].clone(),
                previous: Some("0-3".into()),
                at: None,
            },
        ];
        assert_eq!(read_entries(&sys).unwrap(), owned);
        let data = fs::read(Journal::dir_of(&sys).join("000001.json")).unwrap();
        assert_eq!(
            data,
            serde_json::to_vec(&owned).unwrap(),
            "same bytes as owned entries"
        );
        assert_eq!(j.segments(), 1);
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
    fn symlinked_run_dir_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir_all(tmp.path().join("run")).unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), tmp.path().join(RUN_DIR)).unwrap();
        let sys = Sys::at(tmp.path());
        assert!(matches!(lock(&sys), Err(JournalError::Unsafe(_))));
    }
}
