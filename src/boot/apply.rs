//! Writing the boot half: the bootloader's files planned from what they
//! would hold without cpushield's old part, the record written first
//! (incomplete), the files and the bootloader's command, the read-back, and
//! on failure the files put back as they were.

use serde::{Deserialize, Serialize};

use super::edit::{self, Undone};
use super::record::{
    read_record, remove_file, write_json, Generated, Made, Record, RECORD, RECORD_VERSION, REMOVED,
};
use super::remove::remove;
use super::status::{status, BootFacts, BootStatus};
use super::{backend, bls, loader, uki, Backend, BootError, BootWant, Loader};
use crate::shield::journal;
use crate::sys::Sys;

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

pub(super) fn other_backend(r: &Record, loader: &Loader) -> BootError {
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
    let unchanged = holds_already(sys, (&loader, want), old.as_ref(), &plan);
    let mut change = change_of(sys, &loader, &plan, unchanged, dry_run);
    if unchanged || dry_run {
        if !dry_run {
            change.status = Some(status(sys)?);
        }
        return Ok(change);
    }
    let old_made: Vec<Made> = old.as_ref().map(|r| r.made.clone()).unwrap_or_default();
    let (writes, now) = writes_of(sys, &plan, &base_files, &old_made);
    let record = record_of(sys, (&loader, want), &plan, old.as_ref(), &old_made);
    write_json(sys, RECORD, &record)?;
    let written = make_dirs(sys, &record.made)
        .and_then(|()| put(sys, &writes, &plan.command))
        .and_then(|()| read_back(sys, (&loader, want), &plan));
    if let Err(source) = written {
        let restored = roll_back(
            sys,
            (&loader, &plan),
            (old.as_ref(), &old_made),
            &record,
            now,
        );
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

/// Whether the boot half `old` recorded is, file for file, what `plan`
/// would write, and reads back as `want`ed: nothing to write.
fn holds_already(
    sys: &Sys,
    (loader, want): (&Loader, &BootWant),
    old: Option<&Record>,
    plan: &backend::Plan,
) -> bool {
    old.is_some_and(|r| {
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
            && loader.read_back(sys, want, plan).is_empty()
    })
}

/// The report of writing `plan` (its status is added once written).
fn change_of(
    sys: &Sys,
    loader: &Loader,
    plan: &backend::Plan,
    unchanged: bool,
    dry_run: bool,
) -> BootChange {
    let mut files: Vec<FileOutcome> = (plan.files.iter())
        .map(|f| FileOutcome {
            path: f.path.clone(),
            action: if sys.exists(&f.path) {
                FileAction::Edited
            } else {
                FileAction::Created
            },
        })
        .collect();
    files.extend(plan.made.iter().map(|m| FileOutcome {
        path: m.clone(),
        action: FileAction::Created,
    }));
    BootChange {
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
        files,
        replaced: plan.replaced.clone(),
        command: plan.command.clone(),
        generated_identical: None,
        status: None,
    }
}

/// What to write (files of the old record that the new plan leaves go
/// back to their base), and what those files hold now, to put back on
/// failure.
fn writes_of(
    sys: &Sys,
    plan: &backend::Plan,
    base_files: &[Given],
    old_made: &[Made],
) -> (Writes, Writes) {
    let mut writes: Writes = plan
        .files
        .iter()
        .map(|f| (f.path.clone(), Some(f.written.clone()), false))
        .collect();
    // A file the command makes again (an addon) is left for it to
    // overwrite, not taken out first.
    for g in base_files {
        if !writes.iter().any(|(p, _, _)| *p == g.path) && !plan.made.contains(&g.path) {
            writes.push((g.path.clone(), g.content.clone(), g.made_dir));
        }
    }
    // What the text files hold now (a made file is made again by the old
    // command instead).
    let now: Writes = writes
        .iter()
        .filter(|(p, _, _)| !old_made.iter().any(|m| m.path == *p))
        .map(|(p, _, _)| {
            let made = plan.files.iter().any(|f| f.path == *p && f.made_dir);
            (p.clone(), sys.read(p).ok(), made)
        })
        .collect();
    (writes, now)
}

/// The record written first, incomplete: every file with what it held
/// before cpushield (an old record's files it no longer plans stay listed
/// until the write is done).
fn record_of(
    sys: &Sys,
    (loader, want): (&Loader, &BootWant),
    plan: &backend::Plan,
    old: Option<&Record>,
    old_made: &[Made],
) -> Record {
    let mut files = plan.files.clone();
    if let Some(r) = old {
        for f in &r.files {
            if !files.iter().any(|p| p.path == f.path) {
                files.push(f.clone());
            }
        }
    }
    let generated = loader.generated.as_ref().map(|g| Generated {
        path: g.clone(),
        before: match old.and_then(|r| r.generated.as_ref()) {
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
    Record {
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
    }
}

/// Whether the files written read back as `want`ed.
fn read_back(
    sys: &Sys,
    (loader, want): (&Loader, &BootWant),
    plan: &backend::Plan,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let lacks = loader.read_back(sys, want, plan);
    if lacks.is_empty() {
        return Ok(());
    }
    let ran = match plan.command.is_empty() {
        true => String::new(),
        false => format!("{} ran: ", plan.command.join(" ")),
    };
    Err(format!(
        "{ran}written, but read back: {} (does a later setting replace GRUB_CMDLINE_LINUX_DEFAULT without keeping its value?)",
        lacks.join("; ")
    )
    .into())
}

/// After a failed write: the files as they were (`now`), the
/// configuration regenerated from them; a made file (an addon) deleted,
/// or made again as the old record had it. Whether that worked.
fn roll_back(
    sys: &Sys,
    (loader, plan): (&Loader, &backend::Plan),
    (old, old_made): (Option<&Record>, &[Made]),
    record: &Record,
    now: Writes,
) -> bool {
    let mut back = now;
    back.extend(
        record
            .made
            .iter()
            .filter(|m| !old_made.iter().any(|o| o.path == m.path))
            .map(|m| (m.path.clone(), None, m.made_dir)),
    );
    let again = match old {
        Some(r) if !loader.backend.regenerates() => r.command.clone(),
        _ if loader.backend.regenerates() => plan.command.clone(),
        _ => Vec::new(),
    };
    put(sys, &back, &again).is_ok()
}
