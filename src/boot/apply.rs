//! Writing the boot half: the bootloader's files planned from what they
//! would hold without cpushield's old part, the record written first
//! (incomplete), the files and the bootloader's command, the read-back, and
//! on failure the files put back as they were.

use super::change::{BootAction, BootChange, FileAction, FileOutcome};
use super::files::{based, make_dirs, put, taken_out, Given, Writes};
use super::record::{
    read_record, remove_file, write_json, Generated, Made, Record, RECORD, RECORD_VERSION, REMOVED,
};
use super::status::{status, BootFacts};
use super::{backend, loader, uki, BootError, BootWant, Loader};
use crate::shield::journal;
use crate::sys::Sys;

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

/// Brings the boot half to `want` (`None`: none): writes, rewrites or
/// removes its files and regenerates the bootloader's configuration.
/// Takes the journal's lock.
pub fn apply(sys: &Sys, want: &BootWant, dry_run: bool) -> Result<BootChange, BootError> {
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
