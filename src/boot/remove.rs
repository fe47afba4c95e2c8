//! Taking the boot half out: every file back to what it was before
//! cpushield, the bootloader's configuration regenerated, the record
//! removed.

use super::change::{BootAction, BootChange, FileAction, FileOutcome};
use super::edit::Undone;
use super::files::{put, taken_out, Writes};
use super::record::{read_record, remove_file, write_json, Record, Removed, RECORD, REMOVED};
use super::status::{status, BootFacts};
use super::BootError;
use crate::shield::journal;
use crate::sys::Sys;

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
