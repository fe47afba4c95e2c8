//! What writing or taking out the boot half reports: the files, what was
//! done to each, the bootloader's command, and the boot half's status after.

use serde::{Deserialize, Serialize};

use super::status::BootStatus;

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
