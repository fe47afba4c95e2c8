//! The boot half of a shield: the kernel command line options that only a
//! boot applies (`nohz_full=` stops the tick, `rcu_nocbs=` moves RCU
//! callbacks, `isolcpus=managed_irq` keeps kernel-managed queue interrupts
//! off), written the bootloader's own way and judged against what the
//! running kernel booted with.
//!
//! It outlives reboots, so its record does too: `/var/lib/cpushield/boot.json`
//! holds what was written and what the bootloader's files held before, and
//! is written (atomically, fsync'd) before each change. `off` never touches
//! it (`cpushield.service` runs `off` at every shutdown); only `apply` with a
//! config without `boot`, `cpushield boot --remove` and the package's purge
//! take it out, and they put the files back as they were.
//!
//! Reads and writes go through [`Sys`] (the root), the bootloader's tool
//! through [`Sys::run_tool`]. Judging is a pure function of read facts.

pub mod args;
pub mod backend;
pub mod bls;
pub mod edit;
pub mod grub;
pub mod loader;
pub mod uki;

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;
use crate::shield::journal;
use crate::sys::Sys;

pub use backend::{Backend, Loader};
use edit::{FileChange, Undone};

/// The record of the boot half, relative to the root (survives reboots).
pub const RECORD: &str = "var/lib/cpushield/boot.json";
/// What the last removal took out, to tell "removed, reboot pending" from
/// "absent"; relative to the root.
pub const REMOVED: &str = "var/lib/cpushield/boot-removed.json";

/// A boot-half problem; nothing was left half-written.
#[derive(Debug, thiserror::Error)]
pub enum BootError {
    /// The request is not valid; nothing was changed.
    #[error("{0}")]
    Invalid(String),
    /// The machine's bootloader is not one cpushield drives; nothing was changed.
    #[error("the boot half cannot be written here: {bootloader}; {instructions}")]
    Unsupported {
        /// What was found.
        bootloader: String,
        /// What to do by hand.
        instructions: String,
    },
    /// Reading or writing a file, or the bootloader's tool, failed; what
    /// had been written was put back (see `restored`).
    #[error("{what}: {source}{}", if *restored { "; the bootloader's files were put back as before" } else { "" })]
    Failed {
        /// What was being done.
        what: String,
        /// Whether the previous files were restored.
        restored: bool,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The boot half written earlier cannot be taken out as it was
    /// written (a file changed beyond cpushield's part); nothing was changed.
    #[error("the boot half cannot be taken out exactly: {0}; put cpushield's part back as it was written, or take it out by hand and delete /var/lib/cpushield/boot.json")]
    Stranded(String),
    /// The record cannot be read or written.
    #[error(transparent)]
    Journal(#[from] journal::JournalError),
    /// Not root; nothing was changed.
    #[error(transparent)]
    NotRoot(#[from] crate::shield::ShieldError),
}

/// The boot options wanted for a shield.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootWant {
    /// The CPUs isolated at boot: the shield's CPUs and their hyper-thread siblings.
    pub cpus: CpuSet,
    /// The CPUs left for interrupts and kernel work (`irqaffinity=`).
    pub housekeeping: CpuSet,
    /// The options, in order: cpushield's four, then the config's extra ones.
    pub options: Vec<String>,
}

/// The keys cpushield sets itself; an extra option may not set them again.
pub const OWN_KEYS: [&str; 4] = ["isolcpus", "nohz_full", "rcu_nocbs", "irqaffinity"];

/// The boot options for shielding `cpus` (siblings added as `boot-args`
/// does) plus `extra` ones. Refuses an extra option that is not one
/// command-line word, or that sets one of cpushield's own keys.
pub fn want(
    cpus: &CpuSet,
    sibling_groups: &[CpuSet],
    online: &CpuSet,
    extra: &[String],
) -> Result<BootWant, BootError> {
    let advice = args::boot_args(cpus, sibling_groups, online);
    if advice.housekeeping.is_empty() {
        return Err(BootError::Invalid(format!(
            "boot: isolating CPUs {} leaves no CPU for housekeeping (online: {online})",
            advice.isolated
        )));
    }
    check_extra(extra)?;
    let mut options = advice.args.clone();
    for o in extra {
        if !options.contains(o) {
            options.push(o.clone());
        }
    }
    Ok(BootWant {
        cpus: advice.isolated,
        housekeeping: advice.housekeeping,
        options,
    })
}

/// Checks extra boot options: each one command-line word that does not set
/// one of cpushield's own keys.
pub fn check_extra(extra: &[String]) -> Result<(), BootError> {
    for o in extra {
        let key = o.split('=').next().unwrap_or_default();
        let plain = !o.is_empty()
            && o.chars().all(|c| {
                c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '=' | ',' | '.' | ':' | '/')
            });
        if !plain || key.is_empty() {
            return Err(BootError::Invalid(format!(
                "boot: option {} is not one kernel command line word: give NAME or NAME=VALUE of letters, digits and _-=,.:/ (e.g. \"skew_tick=1\")",
                crate::input::quote(o)
            )));
        }
        if OWN_KEYS.contains(&key) {
            return Err(BootError::Invalid(format!(
                "boot: option {} sets {key}=, which cpushield derives from cpus; leave it out",
                crate::input::quote(o)
            )));
        }
    }
    Ok(())
}

/// [`want`] for `cpus` on this machine (its online CPUs and hyper-thread siblings).
pub fn want_here(sys: &Sys, cpus: &CpuSet, extra: &[String]) -> Result<BootWant, BootError> {
    let online = crate::sys::procfs::online_cpus(sys).map_err(|e| BootError::Failed {
        what: "reading the online CPUs".into(),
        restored: false,
        source: Box::new(e),
    })?;
    let mut groups: Vec<CpuSet> = Vec::new();
    for cpu in cpus.iter() {
        let g = crate::sys::procfs::thread_siblings(sys, cpu);
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    want(cpus, &groups, &online, extra)
}

/// The persistent record of a written boot half (version 2: any backend,
/// every file with what it held before).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The record's format, [`RECORD_VERSION`].
    pub version: u32,
    /// The bootloader written through.
    pub backend: Backend,
    /// What was written.
    pub want: BootWant,
    /// The files written, in order, each with what it held before.
    pub files: Vec<FileChange>,
    /// The bootloader's generated configuration and its content before
    /// cpushield first wrote (GRUB), to tell whether removal gave it back.
    pub generated: Option<Generated>,
    /// The command that regenerates it (empty: none).
    pub command: Vec<String>,
    /// The user's options that set one of cpushield's keys, left out.
    #[serde(default)]
    pub replaced: Vec<String>,
    /// Files the command made that are cpushield's alone (an addon).
    #[serde(default)]
    pub made: Vec<Made>,
    /// The boot it was written in (`/proc/sys/kernel/random/boot_id`), to
    /// tell a reboot that did not take the options from one not done yet.
    #[serde(default)]
    pub boot_id: String,
    /// False while a write or a removal is under way (a crash leaves it so).
    pub complete: bool,
}

/// A file the bootloader's tool made for cpushield (a UKI addon): deleted
/// on removal while it is still the file made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Made {
    /// The file, relative to the root.
    pub path: String,
    /// Its SHA-256, hex (empty until made).
    pub sha256: String,
    /// cpushield made its directory (removed with it when then empty).
    pub made_dir: bool,
}

/// The format version of [`Record`] written now.
pub const RECORD_VERSION: u32 = 2;

/// A generated configuration file and its content before cpushield.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Generated {
    /// The file, relative to the root.
    pub path: String,
    /// Its content before cpushield first wrote (`None`: absent).
    pub before: Option<String>,
}

/// The record as the first release wrote it (Debian's GRUB only).
#[derive(Debug, Clone, Deserialize)]
struct RecordV1 {
    want: BootWant,
    dropin: String,
    dropin_before: Option<String>,
    generated: String,
    generated_before: Option<String>,
    complete: bool,
}

impl From<RecordV1> for Record {
    fn from(v1: RecordV1) -> Record {
        Record {
            version: RECORD_VERSION,
            backend: Backend::DebianGrub,
            files: vec![FileChange {
                path: v1.dropin,
                before: v1.dropin_before,
                written: grub::dropin_text(&v1.want, false),
                edit: edit::Edit::Whole,
                made_dir: false,
            }],
            want: v1.want,
            generated: Some(Generated {
                path: v1.generated,
                before: v1.generated_before,
            }),
            command: vec!["update-grub".into()],
            replaced: Vec::new(),
            made: Vec::new(),
            boot_id: String::new(),
            complete: v1.complete,
        }
    }
}

/// Either format on disk; only version 2 is written.
#[derive(Deserialize)]
#[serde(untagged)]
enum OnDisk {
    V2(Record),
    V1(RecordV1),
}

impl Record {
    /// A complete record of Debian's GRUB drop-in for `want` (for tests of
    /// the readers of records).
    pub fn debian_grub(want: BootWant, complete: bool) -> Record {
        Record {
            version: RECORD_VERSION,
            backend: Backend::DebianGrub,
            files: vec![FileChange {
                path: grub::DROPIN.into(),
                before: None,
                written: grub::dropin_text(&want, false),
                edit: edit::Edit::Whole,
                made_dir: false,
            }],
            want,
            generated: Some(Generated {
                path: grub::GENERATED.into(),
                before: None,
            }),
            command: vec!["update-grub".into()],
            replaced: Vec::new(),
            made: Vec::new(),
            boot_id: String::new(),
            complete,
        }
    }

    /// The files written and made, as `/path` for reports.
    pub fn file_list(&self) -> String {
        self.files
            .iter()
            .map(|f| &f.path)
            .chain(self.made.iter().map(|m| &m.path))
            .map(|p| format!("/{p}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// What the last removal took out, until the next boot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Removed {
    /// The options taken out.
    pub options: Vec<String>,
    /// The boot it happened in (`/proc/sys/kernel/random/boot_id`).
    pub boot_id: String,
}

/// Where the boot half stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BootState {
    /// Written, and the running kernel booted with every option.
    Active,
    /// Written; the running kernel booted without some of the options.
    PendingReboot,
    /// Taken out; the running kernel still has the options until a reboot.
    RemovalPending,
    /// A write or removal was interrupted: run `apply` or `boot --remove`.
    Interrupted,
    /// Not managed by cpushield, but the kernel was booted with isolation options.
    External,
    /// Nothing: no boot half, no isolation options on the running kernel.
    Absent,
}

impl BootState {
    /// Whether a reboot is needed for the running kernel to match what is written.
    pub fn reboot_pending(self) -> bool {
        matches!(self, BootState::PendingReboot | BootState::RemovalPending)
    }
}

/// What the running kernel booted with, read back.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootFacts {
    /// `/proc/cmdline`.
    pub cmdline: String,
    /// `/proc/sys/kernel/random/boot_id`.
    pub boot_id: String,
    /// `/sys/devices/system/cpu/isolated` (`isolcpus=` domain CPUs).
    pub isolated: CpuSet,
    /// `/sys/devices/system/cpu/nohz_full`.
    pub nohz_full: CpuSet,
}

impl BootFacts {
    /// Reads the facts of the running kernel.
    pub fn read(sys: &Sys) -> BootFacts {
        let list = |rel: &str| {
            sys.read_trimmed(rel)
                .ok()
                .and_then(|s| CpuSet::parse_list(&s).ok())
                .unwrap_or_default()
        };
        BootFacts {
            cmdline: sys.read_trimmed("proc/cmdline").unwrap_or_default(),
            boot_id: sys
                .read_trimmed("proc/sys/kernel/random/boot_id")
                .unwrap_or_default(),
            isolated: list("sys/devices/system/cpu/isolated"),
            nohz_full: list("sys/devices/system/cpu/nohz_full"),
        }
    }

    /// Whether the running command line has `option` as one word.
    pub fn has(&self, option: &str) -> bool {
        self.cmdline.split_whitespace().any(|w| w == option)
    }

    /// The isolation options of the running command line.
    pub fn isolation_options(&self) -> Vec<String> {
        self.cmdline
            .split_whitespace()
            .filter(|w| OWN_KEYS.contains(&w.split('=').next().unwrap_or_default()))
            .map(str::to_string)
            .collect()
    }
}

/// The boot half as `status`, `verify`, `metrics` and `audit` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootStatus {
    /// Where it stands.
    pub state: BootState,
    /// Whether a reboot is needed for the running kernel to match.
    pub reboot_pending: bool,
    /// What cpushield wrote (the record), if anything.
    pub written: Option<BootWant>,
    /// Written options the running kernel did not boot with.
    pub missing: Vec<String>,
    /// Removed options the running kernel still has (until a reboot).
    pub still_running: Vec<String>,
    /// The isolation options of the running command line.
    pub running: Vec<String>,
    /// CPUs isolated at boot (`/sys/devices/system/cpu/isolated`).
    pub isolated: CpuSet,
    /// CPUs without the tick (`/sys/devices/system/cpu/nohz_full`).
    pub nohz_full: CpuSet,
    /// The first file written (the drop-in on Debian), when one is.
    pub file: Option<String>,
    /// The bootloader written through.
    pub bootloader: Option<String>,
    /// Every file written.
    pub files: Vec<String>,
    /// The user's options that set one of cpushield's keys, left out when written.
    pub replaced: Vec<String>,
    /// Isolation options on the running command line that set one of
    /// cpushield's keys to another value (the kernel may take the first).
    pub conflicting: Vec<String>,
    /// Written in an earlier boot, yet the running kernel lacks options:
    /// the bootloader did not use what cpushield wrote, and the likely why.
    pub not_taken: Option<String>,
    /// Files written that no longer hold what cpushield wrote (a kernel
    /// update, `grubby`, an edit): see `cpushield boot` and run `apply`.
    pub drift: Vec<String>,
}

/// Judges the boot half from its record, the last removal and the running
/// kernel's facts. Pure.
pub fn judge(record: Option<&Record>, removed: Option<&Removed>, facts: &BootFacts) -> BootStatus {
    let running = facts.isolation_options();
    let mut missing = Vec::new();
    let mut still_running = Vec::new();
    let mut conflicting = Vec::new();
    let state = match record {
        Some(r) if !r.complete => BootState::Interrupted,
        Some(r) => {
            missing = r
                .want
                .options
                .iter()
                .filter(|o| !facts.has(o))
                .cloned()
                .collect();
            conflicting = running
                .iter()
                .filter(|o| !r.want.options.contains(o))
                .cloned()
                .collect();
            if missing.is_empty() && conflicting.is_empty() {
                BootState::Active
            } else {
                BootState::PendingReboot
            }
        }
        None => {
            if let Some(rm) = removed.filter(|rm| rm.boot_id == facts.boot_id) {
                still_running = rm
                    .options
                    .iter()
                    .filter(|o| facts.has(o))
                    .cloned()
                    .collect();
            }
            if !still_running.is_empty() {
                BootState::RemovalPending
            } else if !running.is_empty()
                || !facts.isolated.is_empty()
                || !facts.nohz_full.is_empty()
            {
                BootState::External
            } else {
                BootState::Absent
            }
        }
    };
    BootStatus {
        state,
        reboot_pending: state.reboot_pending(),
        written: record.map(|r| r.want.clone()),
        missing,
        still_running,
        running,
        isolated: facts.isolated.clone(),
        nohz_full: facts.nohz_full.clone(),
        file: record.and_then(|r| r.files.first()).map(|f| f.path.clone()),
        bootloader: record.map(|r| r.backend.describe().to_string()),
        files: record
            .map(|r| {
                r.files
                    .iter()
                    .map(|f| f.path.clone())
                    .chain(r.made.iter().map(|m| m.path.clone()))
                    .collect()
            })
            .unwrap_or_default(),
        replaced: record.map(|r| r.replaced.clone()).unwrap_or_default(),
        conflicting,
        not_taken: record
            .filter(|r| {
                state == BootState::PendingReboot
                    && !r.boot_id.is_empty()
                    && r.boot_id != facts.boot_id
            })
            .map(|r| not_taken_why(r.backend).to_string()),
        drift: Vec::new(),
    }
}

/// Why a bootloader may have booted without what cpushield wrote.
fn not_taken_why(backend: Backend) -> &'static str {
    match backend {
        Backend::DebianGrub | Backend::GrubMkconfig => {
            "GRUB booted an entry without them: GRUB_DEFAULT or a saved entry picks another one, or grub.cfg was regenerated since"
        }
        Backend::Bls | Backend::SystemdBoot => {
            "the entry booted is not one cpushield edited: a kernel installed since, or another default entry"
        }
        Backend::UkiAddon => {
            "systemd-stub did not apply the addon: Secure Boot rejected it, the image was started from another partition, or the addon's .uname differs"
        }
    }
}

/// Reads the record, the last removal and the running kernel, and judges.
pub fn status(sys: &Sys) -> Result<BootStatus, BootError> {
    let record = read_record(sys)?;
    let mut s = judge(
        record.as_ref(),
        read_json::<Removed>(sys, REMOVED)?.as_ref(),
        &BootFacts::read(sys),
    );
    if let Some(r) = record.filter(|r| r.complete) {
        s.drift = drift(sys, &r);
    }
    Ok(s)
}

/// The files of `record` that no longer hold what cpushield wrote.
fn drift(sys: &Sys, record: &Record) -> Vec<String> {
    record
        .files
        .iter()
        .filter_map(|f| {
            let path = bls::find_entry(sys, &f.path).unwrap_or_else(|| f.path.clone());
            (sys.read(&path).ok().as_deref() != Some(f.written.as_str()))
                .then(|| format!("/{path}"))
        })
        .chain(
            record
                .made
                .iter()
                .filter(|m| {
                    std::fs::read(sys.path(&m.path)).map_or(true, |d| uki::sha256(&d) != m.sha256)
                })
                .map(|m| format!("/{}", m.path)),
        )
        .collect()
}

/// The record, if a boot half was written.
pub fn read_record(sys: &Sys) -> Result<Option<Record>, BootError> {
    Ok(read_json::<OnDisk>(sys, RECORD)?.map(|r| match r {
        OnDisk::V2(r) => r,
        OnDisk::V1(v1) => v1.into(),
    }))
}

fn read_json<T: serde::de::DeserializeOwned>(sys: &Sys, rel: &str) -> Result<Option<T>, BootError> {
    let path = sys.path(rel);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).map(Some).map_err(|e| {
            journal::JournalError::Damaged {
                path,
                reason: e.to_string(),
            }
            .into()
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(journal::JournalError::Io { path, source }.into()),
    }
}

fn write_json<T: Serialize>(sys: &Sys, rel: &str, value: &T) -> Result<(), BootError> {
    let path = sys.path(rel);
    let text = serde_json::to_string_pretty(value).expect("records serialise");
    journal::write_durable(&path, format!("{text}\n").as_bytes())?;
    Ok(())
}

/// Removes a record; its directory too when that is then empty.
fn remove_file(sys: &Sys, rel: &str) -> Result<(), BootError> {
    let path = sys.path(rel);
    match std::fs::remove_file(&path) {
        Ok(()) => {
            if let Some(dir) = path.parent() {
                let _ = std::fs::remove_dir(dir);
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(journal::JournalError::Io { path, source }.into()),
    }
}

/// What a boot-half change did (or, in a dry run, would do).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BootChange {
    /// `written`, `unchanged`, `removed`, `nothing` (none was written and none is wanted).
    pub action: BootAction,
    /// Whether this was a dry run (nothing changed).
    pub dry_run: bool,
    /// The bootloader driven.
    pub bootloader: Option<String>,
    /// What booted this machine, as the firmware and the command line say.
    pub booted_by: Option<String>,
    /// Another bootloader installed that did not boot this machine (not written).
    pub also_installed: Option<String>,
    /// The first file (the drop-in on Debian).
    pub file: Option<String>,
    /// Its new content (`None`: removed, or restored to what it held before).
    pub content: Option<String>,
    /// Every file, and what was (or would be) done to it.
    pub files: Vec<FileOutcome>,
    /// The user's options that set one of cpushield's keys, left out
    /// (given back on removal).
    pub replaced: Vec<String>,
    /// The bootloader's command run (or to run); empty: none.
    pub command: Vec<String>,
    /// After a removal: whether the generated file is byte-identical to
    /// what it was before cpushield first wrote (`false`: something else,
    /// such as a kernel update, changed it meanwhile).
    pub generated_identical: Option<bool>,
    /// Where the boot half stands afterwards, read back.
    pub status: Option<BootStatus>,
}

/// One file of a [`BootChange`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileOutcome {
    /// The file, relative to the root.
    pub path: String,
    /// What happened to it.
    pub action: FileAction,
}

/// What happened to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileAction {
    /// Created by cpushield.
    Created,
    /// Edited (a drop-in rewritten, words or a block added).
    Edited,
    /// Given back byte for byte (or removed, if cpushield created it).
    Restored,
    /// Changed by something else since: only cpushield's part was cut.
    Cut,
}

/// The kind of [`BootChange`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BootAction {
    /// The files were written and the bootloader's configuration regenerated.
    Written,
    /// What is written is what is wanted.
    Unchanged,
    /// The files were given back and the configuration regenerated.
    Removed,
    /// None was written and none is wanted.
    Nothing,
}

/// Checks, before anything is changed, that `want` can be written on this
/// machine: its bootloader is one cpushield drives.
pub fn check(sys: &Sys, want: &BootWant) -> Result<Loader, BootError> {
    let loader = backend::detect(sys, &loader::LoaderFacts::read(sys), &want.options)?;
    // The whole plan, from the files as they are, so that a refusal found
    // only on planning (RHEL 8's $kernelopts, an old boot half that cannot
    // be taken out) comes before the shield changes anything.
    let old = read_record(sys)?;
    if let Some(r) = &old {
        if r.backend != loader.backend {
            return Err(other_backend(r, &loader));
        }
    }
    let base_files = match &old {
        Some(r) => taken_out(sys, r)?,
        None => Vec::new(),
    };
    loader.plan(sys, want, &|path| based(sys, &base_files, path))?;
    Ok(loader)
}

fn other_backend(r: &Record, loader: &Loader) -> BootError {
    BootError::Unsupported {
        bootloader: format!(
            "the boot half was written through {}, but this machine now boots through {}",
            r.backend.describe(),
            loader.name()
        ),
        instructions: "run 'cpushield boot --remove' first, then apply again".into(),
    }
}

/// A file's content from the files given back (`base_files`), else as it is.
fn based(sys: &Sys, base_files: &[Given], path: &str) -> Option<String> {
    match base_files.iter().find(|g| g.path == path) {
        Some(g) => g.content.clone(),
        None => sys.read(path).ok(),
    }
}

/// A file as removal gives it back.
#[derive(Debug, Clone)]
struct Given {
    path: String,
    /// Its content (`None`: removed).
    content: Option<String>,
    how: Undone,
    /// Remove its directory too when then empty (cpushield made it).
    made_dir: bool,
}

/// The files as removal gives them back (`Err`: one of them cannot be,
/// named). Entries that `kernel-install` wrote since from
/// `/etc/kernel/cmdline` lose cpushield's words too, and get back the
/// user's words that file lost.
fn taken_out(sys: &Sys, record: &Record) -> Result<Vec<Given>, BootError> {
    let mut files = record.files.clone();
    if matches!(record.backend, Backend::Bls | Backend::SystemdBoot) {
        let dirs: Vec<String> = record
            .files
            .iter()
            .filter_map(|f| f.path.rsplit_once('/').map(|(d, _)| d.to_string()))
            .filter(|d| d.ends_with("loader/entries"))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let known: Vec<String> = record.files.iter().map(|f| f.path.clone()).collect();
        let cmdline_lost = record
            .files
            .iter()
            .find(|f| f.path == bls::KERNEL_CMDLINE)
            .map(|f| match &f.edit {
                edit::Edit::Words { removed, .. } => removed.clone(),
                _ => Vec::new(),
            })
            .unwrap_or_default();
        files.extend(bls::later_entries(
            sys,
            &dirs,
            &known,
            &record.want.options,
            &cmdline_lost,
        ));
    }
    let mut out = Vec::new();
    let mut refused = Vec::new();
    for f in &files {
        let path = bls::find_entry(sys, &f.path).unwrap_or_else(|| f.path.clone());
        let now = match sys.read(&path) {
            Ok(text) => Some(text),
            Err(_) if !sys.path(&path).exists() => None,
            Err(e) => {
                // There, but not text: neither "gone" nor cpushield's to delete.
                refused.push(format!("/{path}: it cannot be read as text ({e})"));
                continue;
            }
        };
        let undone = if now == f.before {
            // Never written (an interrupted change), or written back already.
            Ok((f.before.clone(), Undone::Restored))
        } else {
            edit::undo(f, now.as_deref())
        };
        match undone {
            Ok((content, how)) => out.push(Given {
                path,
                content,
                how,
                made_dir: f.made_dir,
            }),
            Err(why) => refused.push(format!("/{path}: {why}")),
        }
    }
    for m in &record.made {
        match std::fs::read(sys.path(&m.path)) {
            Err(_) => {}
            Ok(data) if m.sha256.is_empty() || uki::sha256(&data) == m.sha256 => out.push(Given {
                path: m.path.clone(),
                content: None,
                how: Undone::Restored,
                made_dir: m.made_dir,
            }),
            Ok(_) => refused.push(format!(
                "/{}: it is no longer the file cpushield made (SHA-256 {})",
                m.path, m.sha256
            )),
        }
    }
    if refused.is_empty() {
        Ok(out)
    } else {
        Err(BootError::Stranded(refused.join("; ")))
    }
}

/// Writes (or removes, `None`) each file, then runs the command.
/// Makes the directories of the files a command will make.
fn make_dirs(sys: &Sys, made: &[Made]) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    for m in made.iter().filter(|m| m.made_dir) {
        if let Some((dir, _)) = m.path.rsplit_once('/') {
            sys.create_dirs(dir)?;
        }
    }
    Ok(())
}

/// Each file: its content (`None`: remove it), and whether to remove its
/// directory too when that is then empty.
type Writes = Vec<(String, Option<String>, bool)>;

fn put(
    sys: &Sys,
    files: &Writes,
    command: &[String],
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    for (path, content, made_dir) in files {
        match content {
            Some(text) => sys.write_config(path, text, true)?,
            None => sys.remove_config(path, *made_dir)?,
        }
    }
    if !command.is_empty() {
        let argv: Vec<&str> = command.iter().map(String::as_str).collect();
        sys.run_tool(&argv)?;
    }
    Ok(())
}

/// Brings the boot half to `want` (`None`: none): writes, rewrites or
/// removes its files and regenerates the bootloader's configuration.
/// Takes the journal's lock.
pub fn apply(sys: &Sys, want: Option<&BootWant>, dry_run: bool) -> Result<BootChange, BootError> {
    let Some(want) = want else {
        return remove(sys, dry_run);
    };
    let loader = check(sys, want)?;
    let _lock = if dry_run {
        None
    } else {
        crate::shield::require_root(sys, "apply")?;
        Some(journal::lock(sys)?)
    };
    let old = read_record(sys)?;
    if let Some(r) = old.as_ref().filter(|r| r.backend != loader.backend) {
        return Err(other_backend(r, &loader));
    }
    // Plan from the files as they would be with the old boot half taken out.
    let base_files = match &old {
        Some(r) => taken_out(sys, r)?,
        None => Vec::new(),
    };
    let mut plan = loader.plan(sys, want, &|path| based(sys, &base_files, path))?;
    // A directory an earlier write made stays cpushield's to remove.
    for f in plan.files.iter_mut().filter(|f| f.before.is_none()) {
        let inherited = old
            .iter()
            .flat_map(|r| &r.files)
            .any(|o| o.path == f.path && o.made_dir);
        f.made_dir |= inherited;
    }
    let unchanged = old.as_ref().is_some_and(|r| {
        r.complete
            && r.want == *want
            && r.files.len() == plan.files.len()
            && plan
                .files
                .iter()
                .all(|f| sys.read(&f.path).ok().as_deref() == Some(f.written.as_str()))
            && r.made.iter().map(|m| &m.path).eq(plan.made.iter())
            && r.made.iter().all(|m| {
                std::fs::read(sys.path(&m.path)).is_ok_and(|d| uki::sha256(&d) == m.sha256)
            })
            && loader.read_back(sys, want, &plan).is_empty()
    });
    let mut change = BootChange {
        action: if unchanged {
            BootAction::Unchanged
        } else {
            BootAction::Written
        },
        dry_run,
        bootloader: Some(loader.name()),
        booted_by: Some(loader.booted_by.describe().to_string()),
        also_installed: loader.also_installed.clone(),
        file: plan.files.first().map(|f| f.path.clone()),
        content: plan.files.first().map(|f| f.written.clone()),
        files: plan
            .files
            .iter()
            .map(|f| FileOutcome {
                path: f.path.clone(),
                action: if sys.exists(&f.path) {
                    FileAction::Edited
                } else {
                    FileAction::Created
                },
            })
            .collect(),
        replaced: plan.replaced.clone(),
        command: plan.command.clone(),
        generated_identical: None,
        status: None,
    };
    change.files.extend(plan.made.iter().map(|m| FileOutcome {
        path: m.clone(),
        action: FileAction::Created,
    }));
    if unchanged || dry_run {
        if !dry_run {
            change.status = Some(status(sys)?);
        }
        return Ok(change);
    }
    // What each file holds now, to put back on failure; files of the old
    // record that the new plan leaves go back to their base.
    let mut writes: Writes = plan
        .files
        .iter()
        .map(|f| (f.path.clone(), Some(f.written.clone()), false))
        .collect();
    // A file the command makes again (an addon) is left for it to
    // overwrite, not taken out first.
    let old_made: Vec<Made> = old.as_ref().map(|r| r.made.clone()).unwrap_or_default();
    for g in &base_files {
        if !writes.iter().any(|(p, _, _)| *p == g.path) && !plan.made.contains(&g.path) {
            writes.push((g.path.clone(), g.content.clone(), g.made_dir));
        }
    }
    // What the text files hold now, to put back on failure (a made file is
    // made again by the old command instead).
    let now: Writes = writes
        .iter()
        .filter(|(p, _, _)| !old_made.iter().any(|m| m.path == *p))
        .map(|(p, _, _)| {
            let made = plan.files.iter().any(|f| f.path == *p && f.made_dir);
            (p.clone(), sys.read(p).ok(), made)
        })
        .collect();
    // The record first, incomplete: every file with what it held before
    // cpushield (an old record's files it no longer plans stay listed
    // until the write is done).
    let mut files = plan.files.clone();
    if let Some(r) = &old {
        for f in &r.files {
            if !files.iter().any(|p| p.path == f.path) {
                files.push(f.clone());
            }
        }
    }
    let generated = loader.generated.as_ref().map(|g| Generated {
        path: g.clone(),
        before: match old.as_ref().and_then(|r| r.generated.as_ref()) {
            Some(old_g) if old_g.path == *g => old_g.before.clone(),
            _ => sys.read(g).ok(),
        },
    });
    let made: Vec<Made> = plan
        .made
        .iter()
        .map(|path| Made {
            path: path.clone(),
            sha256: String::new(),
            // A directory an earlier write made stays cpushield's to remove.
            made_dir: match old_made.iter().find(|m| m.path == *path) {
                Some(m) => m.made_dir,
                None => path
                    .rsplit_once('/')
                    .is_some_and(|(dir, _)| !sys.path(dir).is_dir()),
            },
        })
        .collect();
    let record = Record {
        version: RECORD_VERSION,
        backend: loader.backend,
        want: want.clone(),
        files,
        generated,
        command: plan.command.clone(),
        replaced: plan.replaced.clone(),
        made,
        boot_id: BootFacts::read(sys).boot_id,
        complete: false,
    };
    write_json(sys, RECORD, &record)?;
    let written = make_dirs(sys, &record.made)
        .and_then(|()| put(sys, &writes, &plan.command))
        .and_then(|()| {
        let lacks = loader.read_back(sys, want, &plan);
        if lacks.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{}written, but read back: {} (does a later setting replace GRUB_CMDLINE_LINUX_DEFAULT without keeping its value?)",
                if plan.command.is_empty() {
                    String::new()
                } else {
                    format!("{} ran: ", plan.command.join(" "))
                },
                lacks.join("; ")
            )
            .into())
        }
    });
    if let Err(source) = written {
        // The files as they were, the configuration regenerated from
        // them; a made file (an addon) deleted, or made again as the old
        // record had it.
        let mut back = now.clone();
        back.extend(
            record
                .made
                .iter()
                .filter(|m| !old_made.iter().any(|o| o.path == m.path))
                .map(|m| (m.path.clone(), None, m.made_dir)),
        );
        let again = match &old {
            Some(r) if !loader.backend.regenerates() => r.command.clone(),
            _ if loader.backend.regenerates() => plan.command.clone(),
            _ => Vec::new(),
        };
        let restored = put(sys, &back, &again).is_ok();
        match &old {
            Some(r) => write_json(sys, RECORD, r)?,
            None => remove_file(sys, RECORD)?,
        }
        return Err(BootError::Failed {
            what: format!("writing the boot options into {}", record.file_list()),
            restored,
            source,
        });
    }
    let made = record
        .made
        .iter()
        .map(|m| Made {
            sha256: std::fs::read(sys.path(&m.path))
                .map(|d| uki::sha256(&d))
                .unwrap_or_default(),
            ..m.clone()
        })
        .collect();
    write_json(
        sys,
        RECORD,
        &Record {
            files: plan.files,
            made,
            complete: true,
            ..record
        },
    )?;
    remove_file(sys, REMOVED)?;
    change.status = Some(status(sys)?);
    Ok(change)
}

/// Takes the boot half out: every file goes back to what it was before
/// cpushield (byte for byte where nothing else changed it since; else
/// cpushield's part is cut), the bootloader's configuration is
/// regenerated, the record is removed. Nothing to do without a record.
/// A file whose part of cpushield's cannot be found is refused by name,
/// and then nothing is changed.
pub fn remove(sys: &Sys, dry_run: bool) -> Result<BootChange, BootError> {
    let _lock = if dry_run {
        None
    } else {
        crate::shield::require_root(sys, "boot --remove")?;
        Some(journal::lock(sys)?)
    };
    let Some(record) = read_record(sys)? else {
        return Ok(BootChange {
            action: BootAction::Nothing,
            dry_run,
            bootloader: None,
            booted_by: None,
            also_installed: None,
            file: None,
            content: None,
            files: Vec::new(),
            replaced: Vec::new(),
            command: Vec::new(),
            generated_identical: None,
            status: if dry_run { None } else { Some(status(sys)?) },
        });
    };
    let back = taken_out(sys, &record)?;
    let mut change = BootChange {
        action: BootAction::Removed,
        dry_run,
        bootloader: Some(record.backend.describe().to_string()),
        booted_by: None,
        also_installed: None,
        file: record.files.first().map(|f| f.path.clone()),
        content: back.first().and_then(|g| g.content.clone()),
        files: back
            .iter()
            .map(|g| FileOutcome {
                path: g.path.clone(),
                action: match g.how {
                    Undone::Restored => FileAction::Restored,
                    Undone::Cut => FileAction::Cut,
                },
            })
            .collect(),
        replaced: record.replaced.clone(),
        command: record.command.clone(),
        generated_identical: None,
        status: None,
    };
    if dry_run {
        return Ok(change);
    }
    write_json(
        sys,
        RECORD,
        &Record {
            complete: false,
            ..record.clone()
        },
    )?;
    let writes: Writes = back
        .into_iter()
        .map(|g| (g.path, g.content, g.made_dir))
        .collect();
    let again = if record.backend.regenerates() {
        record.command.as_slice()
    } else {
        &[]
    };
    put(sys, &writes, again).map_err(|source| BootError::Failed {
        what: format!(
            "giving back {} (run 'cpushield boot --remove' again)",
            record.file_list()
        ),
        restored: false,
        source,
    })?;
    let facts = BootFacts::read(sys);
    write_json(
        sys,
        REMOVED,
        &Removed {
            options: record.want.options.clone(),
            boot_id: facts.boot_id,
        },
    )?;
    remove_file(sys, RECORD)?;
    change.generated_identical = record
        .generated
        .as_ref()
        .map(|g| sys.read(&g.path).ok() == g.before);
    change.status = Some(status(sys)?);
    Ok(change)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpus(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    fn want_23() -> BootWant {
        want(&cpus("2-3"), &[cpus("2"), cpus("3")], &cpus("0-3"), &[]).unwrap()
    }

    fn facts(cmdline: &str) -> BootFacts {
        BootFacts {
            cmdline: cmdline.into(),
            boot_id: "b1".into(),
            ..Default::default()
        }
    }

    fn record(complete: bool) -> Record {
        Record::debian_grub(want_23(), complete)
    }

    #[test]
    fn a_first_release_record_reads_as_debian_grub() {
        let v1 = serde_json::json!({
            "want": want_23(),
            "dropin": "etc/default/grub.d/zz-cpushield.cfg",
            "dropin_before": null,
            "generated": "boot/grub/grub.cfg",
            "generated_before": "menuentry\n",
            "complete": true
        });
        let OnDisk::V1(v1) = serde_json::from_value::<OnDisk>(v1).unwrap() else {
            panic!("a version 1 record was taken for version 2")
        };
        let r: Record = v1.into();
        assert_eq!(r.backend, Backend::DebianGrub);
        assert_eq!(r.files.len(), 1);
        assert_eq!(r.files[0].path, grub::DROPIN);
        assert_eq!(r.files[0].before, None);
        assert_eq!(r.files[0].edit, edit::Edit::Whole);
        assert_eq!(
            r.generated.as_ref().unwrap().before.as_deref(),
            Some("menuentry\n")
        );
        assert_eq!(r.command, vec!["update-grub".to_string()]);
        // Version 2 round-trips as itself.
        let text = serde_json::to_string(&r).unwrap();
        assert!(
            matches!(serde_json::from_str::<OnDisk>(&text).unwrap(), OnDisk::V2(back) if back == r)
        );
    }

    #[test]
    fn want_adds_extra_options_and_refuses_bad_ones() {
        let w = want(
            &cpus("2-3"),
            &[cpus("2"), cpus("3")],
            &cpus("0-3"),
            &["skew_tick=1".into(), "rcu_nocb_poll".into()],
        )
        .unwrap();
        assert_eq!(
            w.options.join(" "),
            "isolcpus=managed_irq,2-3 nohz_full=2-3 rcu_nocbs=2-3 irqaffinity=0-1 skew_tick=1 rcu_nocb_poll"
        );
        assert_eq!(w.housekeeping, cpus("0-1"));
        for bad in ["nohz_full=1", "a b", "x=\"$(reboot)\"", ""] {
            let e = want(&cpus("2-3"), &[], &cpus("0-3"), &[bad.into()]).unwrap_err();
            assert!(e.to_string().contains("boot: option"), "{bad}: {e}");
        }
        let e = want(&cpus("0-3"), &[], &cpus("0-3"), &[]).unwrap_err();
        assert!(e.to_string().contains("no CPU for housekeeping"), "{e}");
    }

    #[test]
    fn want_isolates_hyper_thread_siblings_too() {
        let w = want(&cpus("2"), &[cpus("2,6")], &cpus("0-7"), &[]).unwrap();
        assert_eq!(w.cpus, cpus("2,6"));
        assert!(w.options.contains(&"nohz_full=2,6".to_string()));
        assert!(w.options.contains(&"irqaffinity=0-1,3-5,7".to_string()));
    }

    #[test]
    fn judged_pending_until_the_kernel_booted_with_every_option() {
        let r = record(true);
        let s = judge(Some(&r), None, &facts("ro quiet nohz_full=2-3"));
        assert_eq!(s.state, BootState::PendingReboot);
        assert!(s.reboot_pending);
        assert_eq!(s.missing.len(), 3, "{:?}", s.missing);
        let line = format!("BOOT_IMAGE=/vmlinuz ro {}", r.want.options.join(" "));
        let s = judge(Some(&r), None, &facts(&line));
        assert_eq!(s.state, BootState::Active);
        assert!(!s.reboot_pending && s.missing.is_empty());
        // A different value of the same key is not the option.
        let s = judge(
            Some(&r),
            None,
            &facts(&line.replace("nohz_full=2-3", "nohz_full=3")),
        );
        assert_eq!(s.state, BootState::PendingReboot);
        assert_eq!(s.missing, vec!["nohz_full=2-3".to_string()]);
        assert_eq!(
            judge(Some(&record(false)), None, &facts(&line)).state,
            BootState::Interrupted
        );
    }

    #[test]
    fn judged_removal_pending_until_the_next_boot_then_absent() {
        let removed = Removed {
            options: want_23().options,
            boot_id: "b1".into(),
        };
        let line = format!("ro {}", removed.options.join(" "));
        let s = judge(None, Some(&removed), &facts(&line));
        assert_eq!(s.state, BootState::RemovalPending);
        assert!(s.reboot_pending);
        assert_eq!(
            judge(None, Some(&removed), &facts("ro quiet")).state,
            BootState::Absent
        );
        // Another boot with the same options: someone else's isolation now.
        let mut next = facts(&line);
        next.boot_id = "b2".into();
        assert_eq!(
            judge(None, Some(&removed), &next).state,
            BootState::External
        );
        assert_eq!(
            judge(None, None, &facts("ro quiet")).state,
            BootState::Absent
        );
    }
}
