//! The boot half in words: `cpushield boot`, what `apply` wrote, and what
//! `off` leaves.

use std::io::{Result, Write};

use crate::boot::{BootAction, BootChange, BootState, BootStatus, FileAction, Record};

use super::table::row;

/// One line for a state, as `status` and `verify` show it.
pub fn state_line(s: &BootStatus) -> String {
    match s.state {
        BootState::Active => "active (the running kernel booted with it)".into(),
        BootState::PendingReboot => match &s.not_taken {
            Some(why) if !s.missing.is_empty() => format!(
                "written, but the kernel booted since without {}: {why}",
                s.missing.join(" ")
            ),
            _ if s.missing.is_empty() => format!(
                "written, but the running command line also has {}: remove those from the bootloader's configuration and reboot",
                s.conflicting.join(" ")
            ),
            _ => format!(
                "written, REBOOT PENDING (the running kernel lacks {})",
                s.missing.join(" ")
            ),
        },
        BootState::RemovalPending => format!(
            "removed, REBOOT PENDING (the running kernel still has {})",
            s.still_running.join(" ")
        ),
        BootState::Interrupted => {
            "a change was interrupted: run 'cpushield apply' or 'cpushield boot --remove'".into()
        }
        BootState::External => format!(
            "not cpushield's; the kernel booted with {}",
            if s.running.is_empty() {
                "isolation options".to_string()
            } else {
                s.running.join(" ")
            }
        ),
        BootState::Absent => "absent".into(),
    }
}

/// `cpushield boot`.
pub fn status(s: &BootStatus, w: &mut dyn Write) -> Result<()> {
    row(w, "boot half", state_line(s))?;
    if let Some(want) = &s.written {
        row(w, "written", want.options.join(" "))?;
    }
    if let Some(b) = &s.bootloader {
        row(w, "bootloader", b)?;
    }
    for (i, f) in s.files.iter().enumerate() {
        row(w, if i == 0 { "files" } else { "" }, format!("/{f}"))?;
    }
    if !s.replaced.is_empty() {
        row(
            w,
            "replaced",
            format!("{} (yours; given back on removal)", s.replaced.join(" ")),
        )?;
    }
    if !s.drift.is_empty() {
        row(
            w,
            "CHANGED SINCE",
            format!(
                "{} (no longer what cpushield wrote: run 'cpushield apply' to write it again)",
                s.drift.join(", ")
            ),
        )?;
    }
    row(
        w,
        "running kernel",
        if s.running.is_empty() {
            "no isolation options".to_string()
        } else {
            s.running.join(" ")
        },
    )?;
    if !s.conflicting.is_empty() {
        row(
            w,
            "CONFLICTING",
            format!(
                "{} on the running command line sets a key of the boot half to another value (the kernel may take the first)",
                s.conflicting.join(" ")
            ),
        )?;
    }
    row(w, "isolated at boot", cpus_or_none(&s.isolated))?;
    row(w, "nohz_full", cpus_or_none(&s.nohz_full))?;
    Ok(())
}

fn cpus_or_none(c: &crate::cpulist::CpuSet) -> String {
    if c.is_empty() {
        "none".into()
    } else {
        c.to_string()
    }
}

fn file_action(a: FileAction) -> &'static str {
    match a {
        FileAction::Created => "created",
        FileAction::Edited => "edited",
        FileAction::Restored => "given back byte for byte",
        FileAction::Cut => "changed by something else since: only cpushield's part cut",
    }
}

/// What `apply` or `boot --remove` did to the boot half.
pub fn change(c: &BootChange, w: &mut dyn Write) -> Result<()> {
    let files = c
        .files
        .iter()
        .map(|f| format!("/{}", f.path))
        .collect::<Vec<_>>()
        .join(", ");
    let command = if c.command.is_empty() {
        String::new()
    } else {
        format!(" and run {}", c.command.join(" "))
    };
    let ran = if c.command.is_empty() {
        String::new()
    } else {
        format!(", ran {}", c.command.join(" "))
    };
    match (c.action, c.dry_run) {
        (BootAction::Nothing, _) => return Ok(()),
        (BootAction::Unchanged, _) => writeln!(w, "boot half: unchanged ({files})")?,
        (BootAction::Written, true) => {
            writeln!(w, "dry run: the boot half would write {files}{command}:")?;
            if c.files.len() == 1 {
                for l in c.content.as_deref().unwrap_or_default().lines() {
                    writeln!(w, "    {l}")?;
                }
            }
        }
        (BootAction::Written, false) => writeln!(w, "boot half: wrote {files}{ran}")?,
        (BootAction::Removed, true) => {
            writeln!(w, "dry run: the boot half would give back {files}{command}")?
        }
        (BootAction::Removed, false) => {
            writeln!(w, "boot half: gave back {files}{ran}")?;
            for f in &c.files {
                row(w, &format!("/{}", f.path), file_action(f.action))?;
            }
            if let Some(same) = c.generated_identical {
                row(
                    w,
                    "bootloader config",
                    if same {
                        "byte-identical to before cpushield wrote it"
                    } else {
                        "differs from before cpushield wrote it (something else changed it meanwhile, e.g. a kernel update)"
                    },
                )?;
            }
        }
    }
    if let Some(b) = &c.bootloader {
        let booted = c
            .booted_by
            .as_deref()
            .filter(|b| *b != "unknown")
            .map(|b| format!(" (this machine booted through {b})"))
            .unwrap_or_default();
        row(w, "bootloader", format!("{b}{booted}"))?;
    }
    if let Some(other) = &c.also_installed {
        row(
            w,
            "also installed",
            format!("{other}: not written, it did not boot this machine"),
        )?;
    }
    if !c.replaced.is_empty() {
        let what = if c.action == BootAction::Removed {
            "given back"
        } else {
            "your options that set the same keys: left out, given back on removal"
        };
        row(w, "replaced", format!("{} ({what})", c.replaced.join(" ")))?;
    }
    if let Some(s) = &c.status {
        row(w, "boot half", state_line(s))?;
    }
    Ok(())
}

/// `off`'s word on a boot half that stays.
pub fn stays(r: &Record, w: &mut dyn Write) -> Result<()> {
    writeln!(
        w,
        "the boot half stays for the next boots ({}, in {}): remove it with 'cpushield boot --remove', or 'apply' a config without 'boot'",
        r.want.options.join(" "),
        r.file_list()
    )
}
