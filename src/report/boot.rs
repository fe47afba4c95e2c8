//! The boot half in words: `cpushield boot`, what `apply` wrote, and what
//! `off` leaves.

use std::io::{Result, Write};

use crate::boot::{BootAction, BootChange, BootState, BootStatus, Record};

use super::table::row;

/// One line for a state, as `status` and `verify` show it.
pub fn state_line(s: &BootStatus) -> String {
    match s.state {
        BootState::Active => "active (the running kernel booted with it)".into(),
        BootState::PendingReboot => format!(
            "written, REBOOT PENDING (the running kernel lacks {})",
            s.missing.join(" ")
        ),
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
        BootState::Absent => "none".into(),
    }
}

/// `cpushield boot`.
pub fn status(s: &BootStatus, w: &mut dyn Write) -> Result<()> {
    row(w, "boot half", state_line(s))?;
    if let Some(want) = &s.written {
        row(w, "written", want.options.join(" "))?;
    }
    if let Some(file) = &s.file {
        row(w, "file", format!("/{file}"))?;
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

/// What `apply` or `boot --remove` did to the boot half.
pub fn change(c: &BootChange, w: &mut dyn Write) -> Result<()> {
    let file = c
        .file
        .as_deref()
        .map(|f| format!("/{f}"))
        .unwrap_or_default();
    let command = c.command.join(" ");
    match (c.action, c.dry_run) {
        (BootAction::Nothing, _) => return Ok(()),
        (BootAction::Unchanged, _) => writeln!(w, "boot half: unchanged ({file})")?,
        (BootAction::Written, true) => {
            writeln!(
                w,
                "dry run: the boot half would write {file} and run {command}:"
            )?;
            for l in c.content.as_deref().unwrap_or_default().lines() {
                writeln!(w, "    {l}")?;
            }
        }
        (BootAction::Written, false) => writeln!(w, "boot half: wrote {file}, ran {command}")?,
        (BootAction::Removed, true) => writeln!(
            w,
            "dry run: the boot half would {} {file} and run {command}",
            if c.content.is_some() {
                "restore"
            } else {
                "remove"
            }
        )?,
        (BootAction::Removed, false) => {
            writeln!(w, "boot half: removed {file}, ran {command}")?;
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
    if let Some(s) = &c.status {
        row(w, "boot half", state_line(s))?;
    }
    Ok(())
}

/// `off`'s word on a boot half that stays.
pub fn stays(r: &Record, w: &mut dyn Write) -> Result<()> {
    writeln!(
        w,
        "the boot half stays for the next boots ({}, in /{}): remove it with 'cpushield boot --remove', or 'apply' a config without 'boot'",
        r.want.options.join(" "),
        r.dropin
    )
}
