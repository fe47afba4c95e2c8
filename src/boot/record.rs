//! The boot half's record, which outlives reboots: what was written and
//! what the bootloader's files held before (`/var/lib/cpushield/boot.json`,
//! written atomically before each change), the record of its last removal,
//! and how they are read and written (older record versions still read).

use serde::{Deserialize, Serialize};

use super::edit::{self, FileChange};
use super::{grub, Backend, BootError, BootWant};
use crate::shield::journal;
use crate::sys::Sys;

/// The record of the boot half, relative to the root (survives reboots).
pub const RECORD: &str = "var/lib/cpushield/boot.json";
/// What the last removal took out, to tell "removed, reboot pending" from
/// "absent"; relative to the root.
pub const REMOVED: &str = "var/lib/cpushield/boot-removed.json";

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
pub(super) struct RecordV1 {
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
pub(super) enum OnDisk {
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

/// The record, if a boot half was written.
pub fn read_record(sys: &Sys) -> Result<Option<Record>, BootError> {
    Ok(read_json::<OnDisk>(sys, RECORD)?.map(|r| match r {
        OnDisk::V2(r) => r,
        OnDisk::V1(v1) => v1.into(),
    }))
}

pub(super) fn read_json<T: serde::de::DeserializeOwned>(
    sys: &Sys,
    rel: &str,
) -> Result<Option<T>, BootError> {
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

pub(super) fn write_json<T: Serialize>(sys: &Sys, rel: &str, value: &T) -> Result<(), BootError> {
    let path = sys.path(rel);
    let text = serde_json::to_string_pretty(value).expect("records serialise");
    journal::write_durable(&path, format!("{text}\n").as_bytes())?;
    Ok(())
}

/// Removes a record; its directory too when that is then empty.
pub(super) fn remove_file(sys: &Sys, rel: &str) -> Result<(), BootError> {
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
