//! `off` for people: what was undone, what could not be, the real-time
//! tasks kept on their CPUs, and a damaged journal's unread or refused
//! records.

use std::io::{Result, Write};

use super::shield::{list, refusals, took};
use super::table::row;
use crate::shield::{KeptRealtime, OffReport};

/// `cpushield off`.
pub fn off(r: &OffReport, w: &mut dyn Write) -> Result<()> {
    if r.nothing_to_undo {
        return writeln!(w, "no shield active: nothing to undo");
    }
    if r.dry_run {
        writeln!(
            w,
            "dry run: off would remove the shield on CPUs {} by undoing {} changes, newest first; nothing changed",
            shield_cpus(r),
            r.would_undo.len()
        )?;
        for line in &r.would_undo {
            // Read from the journal: names of threads, cgroups' paths.
            writeln!(w, "    {}", crate::escape::terminal(line))?;
        }
        return unreadable(w, r, "would not be undone");
    }
    let u = &r.undone;
    if !r.unreadable.is_empty() {
        writeln!(
            w,
            "shield on CPUs {}: the journal is damaged; restored what its readable records hold, what the unreadable records changed was NOT undone",
            shield_cpus(r)
        )?;
        match &r.damaged_journal {
            Some(kept) => writeln!(w, "  the damaged journal is kept as {kept}; a new shield can start")?,
            None if !u.failed.is_empty() => writeln!(
                w,
                "  the journal is kept: fix what could not be restored and run 'cpushield off' again"
            )?,
            None => {}
        }
    } else if u.failed.is_empty() {
        writeln!(
            w,
            "shield on CPUs {} removed; everything restored",
            r.shield
        )?;
    } else {
        writeln!(w, "shield on CPUs {} removed with errors; the journal is kept, fix and run 'cpushield off' again", r.shield)?;
    }
    row(w, "restored", u.restored)?;
    row(w, "already as before", u.unchanged)?;
    row(w, "tasks exited meanwhile", u.exited)?;
    if !u.recycled.is_empty() {
        row(
            w,
            "left alone: id now names a newer thread",
            list(&u.recycled),
        )?;
    }
    let t = &r.took;
    took(
        w,
        t.total,
        &[
            ("journal", t.read_journal),
            ("systemd", t.systemd),
            ("writes and moves", t.undo_writes),
            ("affinities", t.undo_affinities),
        ],
    )?;
    refusals(w, "could not restore", &u.failed)?;
    refusals(w, "left, in use by others", &u.left_in_use)?;
    kept_realtime(w, &r.kept_realtime)?;
    if !r.offline.is_empty() && !u.failed.is_empty() {
        writeln!(
            w,
            "  CPUs {} of the shield are offline: a mask naming only them cannot be written back; bring them online ({}) and run 'cpushield off' again",
            r.offline,
            r.offline
                .iter()
                .map(|c| format!("echo 1 > /sys/devices/system/cpu/cpu{c}/online"))
                .collect::<Vec<_>>()
                .join("; ")
        )?;
    }
    unreadable(w, r, "not undone")?;
    for dir in &r.still_there {
        writeln!(
            w,
            "  still there: {dir} (the shield's cgroup; the record that made it could not be read): move its tasks out and remove it by hand"
        )?;
    }
    Ok(())
}

/// What `off` did with the real-time tasks still on the shield.
fn kept_realtime(w: &mut dyn Write, kept: &[KeptRealtime]) -> Result<()> {
    let running: Vec<_> = kept.iter().filter(|k| !k.exited).collect();
    if kept.is_empty() {
        return Ok(());
    }
    writeln!(
        w,
        "  real-time tasks still running on the shield: kept on their CPUs, which are no longer shielded"
    )?;
    for k in kept {
        let fate = if k.exited {
            "exited during off".to_string()
        } else {
            format!("kept on CPUs {}", k.cpus)
        };
        let before = k
            .before
            .as_ref()
            .map(|b| format!("; before cpushield placed it: CPUs {b}"))
            .unwrap_or_default();
        writeln!(
            w,
            "    {} (pid {}, thread {}), {}: {fate}{before}",
            crate::input::brief(&k.name),
            k.pid,
            k.tid,
            k.scheduling
        )?;
    }
    if let Some(k) = running.first() {
        let cpus = k
            .before
            .as_ref()
            .map_or("CPUS".to_string(), |b| b.to_string());
        writeln!(
            w,
            "  nothing guards the kernel's work on those CPUs now: stop the task, or give it its CPUs back (taskset -a -pc {cpus} {}) only if it sleeps",
            k.pid
        )?;
    }
    Ok(())
}

/// The shield's CPUs, or that the damaged journal does not say them.
fn shield_cpus(r: &OffReport) -> String {
    if r.shield.is_empty() && !r.unreadable.is_empty() {
        "(unknown: the state is damaged)".into()
    } else {
        r.shield.to_string()
    }
}

/// What of a damaged journal could not be read or was refused (a record
/// altered after it was written, one naming what no shield changes), and
/// what that means.
fn unreadable(w: &mut dyn Write, r: &OffReport, meaning: &str) -> Result<()> {
    if r.unreadable.is_empty() {
        return Ok(());
    }
    writeln!(
        w,
        "  could not read, or refused ({}; what those records changed is {meaning}):",
        r.unreadable.len()
    )?;
    for u in &r.unreadable {
        writeln!(w, "    {}: {}", u.file, u.reason)?;
    }
    Ok(())
}
