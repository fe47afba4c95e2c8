//! The bootloader's files as cpushield writes and takes them out: each
//! file as it would be without cpushield's part (from the record), the
//! directories a command will write into, and the writes themselves with
//! the bootloader's command after them.

use super::edit::{self, Undone};
use super::record::{Made, Record};
use super::{bls, uki, Backend, BootError};
use crate::sys::Sys;

/// A file's content from the files given back (`base_files`), else as it is.
pub(super) fn based(sys: &Sys, base_files: &[Given], path: &str) -> Option<String> {
    match base_files.iter().find(|g| g.path == path) {
        Some(g) => g.content.clone(),
        None => sys.read(path).ok(),
    }
}

/// A file as removal gives it back.
#[derive(Debug, Clone)]
pub(super) struct Given {
    pub(super) path: String,
    /// Its content (`None`: removed).
    pub(super) content: Option<String>,
    pub(super) how: Undone,
    /// Remove its directory too when then empty (cpushield made it).
    pub(super) made_dir: bool,
}

/// The files as removal gives them back (`Err`: one of them cannot be,
/// named). Entries that `kernel-install` wrote since from
/// `/etc/kernel/cmdline` lose cpushield's words too, and get back the
/// user's words that file lost.
pub(super) fn taken_out(sys: &Sys, record: &Record) -> Result<Vec<Given>, BootError> {
    // Every path and the command a removal acts on, as the boot half
    // manages them, before any is read or written.
    super::managed::check(sys, record)?;
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

/// Makes the directories of the files a command will make.
pub(super) fn make_dirs(
    sys: &Sys,
    made: &[Made],
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    for m in made.iter().filter(|m| m.made_dir) {
        if let Some((dir, _)) = m.path.rsplit_once('/') {
            sys.create_dirs(dir)?;
        }
    }
    Ok(())
}

/// Each file: its content (`None`: remove it), and whether to remove its
/// directory too when that is then empty.
pub(super) type Writes = Vec<(String, Option<String>, bool)>;

/// Writes (or removes, `None`) each file, then runs the command.
pub(super) fn put(
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
