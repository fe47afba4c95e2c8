//! The reports of `status`, `on`, `verify`, `off` and `move` for people:
//! short, aligned, with units.

use std::io::{Result, Write};

use crate::boot::BootStatus;
use crate::escape::terminal;
use crate::fleet::MachineStatus;
use crate::shield::apply::Refusal;
use crate::shield::change::Action;
use crate::shield::{MoveReport, OnReport};

use super::note;
use super::table::row;

/// The `took` row: `1.23 s (snapshot 0.40 s, apply 0.71 s)`, the total,
/// then the phases that took at least 1 ms.
pub(super) fn took(
    w: &mut dyn Write,
    total: std::time::Duration,
    parts: &[(&str, std::time::Duration)],
) -> Result<()> {
    let secs = |d: std::time::Duration| format!("{:.2} s", d.as_secs_f64());
    let shown: Vec<String> = parts
        .iter()
        .filter(|(_, d)| d.as_millis() >= 1)
        .map(|(name, d)| format!("{name} {}", secs(*d)))
        .collect();
    if shown.is_empty() {
        row(w, "took", secs(total))
    } else {
        row(w, "took", format!("{} ({})", secs(total), shown.join(", ")))
    }
}

pub(super) fn refusals(w: &mut dyn Write, title: &str, list: &[Refusal]) -> Result<()> {
    lines(w, &Refusal::table(title, list))
}

/// Prints `lines` as they are, one a line.
fn lines(w: &mut dyn Write, lines: &[String]) -> Result<()> {
    for line in lines {
        writeln!(w, "{line}")?;
    }
    Ok(())
}

pub(super) fn list<T: std::fmt::Display>(items: &[T]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items
            .iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// `cpushield status`.
pub fn status(m: &MachineStatus, w: &mut dyn Write) -> Result<()> {
    let (r, boot) = (&m.shield, m.boot.as_ref());
    let Some(shield) = &r.shield else {
        writeln!(w, "no shield active")?;
        row(w, "online CPUs", &r.online)?;
        match &r.unsupported {
            Some(why) => row(w, "mechanism", format!("unavailable: {why}"))?,
            None => row(
                w,
                "mechanism",
                format!("{} (used by 'cpushield on')", r.mechanism),
            )?,
        }
        if let Some(mount) = &r.mount_first {
            row(
                w,
                "cgroup2",
                format!("not mounted: 'on' mounts it at {mount}, 'off' unmounts it"),
            )?;
        }
        if !r.boot_isolated.is_empty() {
            row(w, "isolated at boot", &r.boot_isolated)?;
        }
        boot_rows(boot, None, w)?;
        row(w, "IRQs", r.irqs_total)?;
        return Ok(());
    };
    if r.holds {
        writeln!(w, "shield on CPUs {shield}: holds")?;
    } else {
        writeln!(w, "shield on CPUs {shield}: BROKEN")?;
        for b in &r.broken {
            writeln!(w, "  broken: {}", b.reason)?;
            writeln!(w, "    repair: {}", b.next)?;
        }
    }
    for n in &r.notes {
        writeln!(w, "  note: {}", note::text(n))?;
    }
    advice(&r.advice, w)?;
    row(
        w,
        "housekeeping CPUs",
        r.housekeeping
            .as_ref()
            .map(|h| h.to_string())
            .unwrap_or_default(),
    )?;
    row(w, "mechanism", &r.mechanism)?;
    if !r.boot_isolated.is_empty() {
        row(w, "isolated at boot", &r.boot_isolated)?;
    }
    boot_rows(boot, Some(shield), w)?;
    if let Some(j) = &r.journal {
        row(
            w,
            "journal",
            format!(
                "{} records, {} files, {:.1} kB",
                j.records,
                j.files,
                j.bytes as f64 / 1000.0
            ),
        )?;
    }
    part_rows(&r.parts, w)?;
    details(&r.parts, w)
}

/// What `on` changes (or would) beyond the shielded CPUs, a row each, with
/// how to do without it.
fn machine_wide_rows(r: &OnReport, w: &mut dyn Write) -> Result<()> {
    let label = match r.dry_run {
        true => "machine-wide, planned",
        false => "machine-wide",
    };
    for m in &r.machine_wide {
        row(w, label, format!("{} (without it: {})", m.what, m.without))?;
    }
    Ok(())
}

/// The components' tables (the threads, the IRQs), below every row.
fn details(parts: &[crate::shield::PartReport], w: &mut dyn Write) -> Result<()> {
    for part in parts {
        lines(w, &part.details)?;
    }
    Ok(())
}

/// The rows of the components that report for themselves: their name
/// beside their first line, the others below it.
fn part_rows(parts: &[crate::shield::PartReport], w: &mut dyn Write) -> Result<()> {
    for line in parts.iter().flat_map(|p| &p.lines) {
        row(w, &line.label, &line.text)?;
    }
    Ok(())
}

/// A plan's step as `on --dry-run` prints it.
fn plan_line(action: &Action) -> String {
    match action {
        Action::Mkdir { path } => format!("mkdir /{}", terminal(path)),
        Action::MountCgroup2 { target, make_dir } => format!(
            "{}mount -t cgroup2 cgroup2 /{target}",
            if *make_dir {
                format!("mkdir /{target}; ")
            } else {
                String::new()
            }
        ),
        Action::Remember { affinities } => {
            format!(
                "record the affinity of {} threads (restored by off)",
                affinities.len()
            )
        }
        Action::Write { path, value, .. } => format!("write {value:?} > /{}", terminal(path)),
        Action::MoveTask { tid, to, .. } => format!("move task {tid} > /{}", terminal(to)),
        Action::SetAffinity {
            tid,
            name,
            previous,
            cpus,
            ..
        } => {
            format!(
                "affinity of {tid} ({}): {previous} -> {cpus}",
                terminal(name)
            )
        }
        Action::SetScheduler {
            tid,
            name,
            priority,
            reservation: None,
            ..
        } => format!(
            "scheduling of {tid} ({}): SCHED_FIFO {priority}",
            terminal(name)
        ),
        Action::SetScheduler {
            tid,
            name,
            reservation: Some((runtime, period)),
            ..
        } => format!(
            "scheduling of {tid} ({}): SCHED_DEADLINE {} µs every {} µs",
            terminal(name),
            runtime / 1000,
            period / 1000
        ),
        Action::Systemd { call, .. } => terminal(&call.command_line().join(" ")).into_owned(),
        Action::Own { owner, payload } => {
            crate::shield::plan_line(action).unwrap_or_else(|| format!("{owner}: {}", payload.0))
        }
    }
}

/// Prints `on`'s report.
/// `cpushield on`: one row per field of the report in the order a reader
/// scans them, each printed when present.
pub fn on(r: &OnReport, w: &mut dyn Write) -> Result<()> {
    let from = r
        .changed_from
        .as_ref()
        .map(|f| format!(" (changed in place from CPUs {f})"))
        .unwrap_or_default();
    if r.dry_run {
        writeln!(
            w,
            "dry run: would shield CPUs {}{from} ({} changes); nothing changed",
            r.shield, r.planned
        )?;
    } else if r.planned == 0 {
        writeln!(
            w,
            "shielded CPUs {}: already as asked, nothing changed",
            r.shield
        )?;
    } else {
        writeln!(w, "shielded CPUs {}{from}", r.shield)?;
    }
    row(w, "housekeeping CPUs", &r.housekeeping)?;
    row(w, "mechanism", &r.mechanism)?;
    if let Some(p) = &r.partition {
        row(w, "partition", p)?;
    }
    part_rows(&r.parts, w)?;
    machine_wide_rows(r, w)?;
    if !r.dry_run {
        row(
            w,
            "changes made",
            format!("{} of {} planned", r.changed, r.planned),
        )?;
    }
    let t = &r.took;
    took(
        w,
        t.total,
        &[
            ("snapshot", t.snapshot),
            ("apply", t.apply),
            ("systemd", t.systemd),
            ("journal", t.journal),
            ("sweep", t.sweep),
            ("undo first", t.undo_writes + t.undo_affinities),
        ],
    )?;
    details(&r.parts, w)?;
    refusals(w, "other changes refused", &r.other_refused)?;
    for n in &r.notes {
        writeln!(w, "  note: {}", note::text(n))?;
    }
    if let Some(plan) = &r.plan {
        writeln!(w, "  plan:")?;
        for s in plan {
            writeln!(w, "    {}", plan_line(&s.action))?;
        }
    }
    Ok(())
}

/// The boot half's rows of `status`: its state, and each CPU's kind when
/// shielded and boot-isolated CPUs differ.
fn boot_rows(
    boot: Option<&BootStatus>,
    shield: Option<&crate::cpulist::CpuSet>,
    w: &mut dyn Write,
) -> Result<()> {
    let Some(b) = boot else { return Ok(()) };
    if b.state != crate::boot::BootState::Absent {
        row(w, "boot half", super::boot::state_line(b))?;
    }
    let at_boot = b.isolated.union(&b.nohz_full);
    let shield = shield.cloned().unwrap_or_default();
    if at_boot.is_empty() {
        return Ok(());
    }
    let parts = [
        (
            "shielded and isolated at boot",
            shield.intersection(&at_boot),
        ),
        (
            "shielded only (tick and RCU stay)",
            shield.difference(&at_boot),
        ),
        ("isolated at boot only", at_boot.difference(&shield)),
    ];
    for (what, cpus) in parts.iter().filter(|(_, c)| !c.is_empty()) {
        row(w, what, cpus)?;
    }
    Ok(())
}

/// What holds but costs the shield (`status`'s and `verify`'s advice).
fn advice(advice: &[crate::finding::Finding], w: &mut dyn Write) -> Result<()> {
    for a in advice {
        writeln!(w, "  advice ({}): {}", a.id, a.reason)?;
    }
    Ok(())
}

/// `cpushield verify`.
pub fn verify(r: &crate::fleet::VerifyReport, w: &mut dyn Write) -> Result<()> {
    let pending = r.boot.as_ref().is_some_and(|b| b.reboot_pending);
    let verdict = match (r.matches, r.holds) {
        (true, true) if pending => "REBOOT PENDING: the shield matches the config and holds; the boot half takes effect at the next reboot",
        (true, true) => "OK: the shield matches the config and holds",
        (_, false) => "BROKEN: the shield no longer holds",
        (false, true) => "DIFFERS: the machine does not match the config",
    };
    writeln!(w, "{verdict}")?;
    row(w, "config", &r.config)?;
    row(w, "config asks for CPUs", &r.wanted)?;
    row(
        w,
        "shield",
        r.shield
            .as_ref()
            .map_or("none".to_string(), |s| format!("CPUs {s}")),
    )?;
    if let Some(b) = &r.boot {
        row(w, "boot half", super::boot::state_line(b))?;
    }
    for d in &r.differences {
        writeln!(w, "  differs: {}", d.reason)?;
    }
    for b in &r.broken {
        writeln!(w, "  broken ({}): {}", b.id, b.reason)?;
        writeln!(w, "    repair: {}", b.next)?;
    }
    advice(&r.advice, w)?;
    if !r.ok() {
        writeln!(
            w,
            "  to bring the machine to the config: {}",
            r.apply_command()
        )?;
    }
    Ok(())
}

/// `cpushield move`.
pub fn moved(r: &MoveReport, w: &mut dyn Write) -> Result<()> {
    let title = if r.dry_run {
        "dry run, nothing moved; would move"
    } else {
        "moved"
    };
    lines(w, &crate::shield::task_table(title, &r.moved, 50))?;
    if !r.not_found.is_empty() {
        writeln!(w, "  not found: {}", list(&r.not_found))?;
    }
    Ok(())
}
