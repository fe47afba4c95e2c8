//! The reports of `status`, `on`, `verify`, `off` and `move` for people:
//! short, aligned, with units.

use std::collections::BTreeMap;
use std::io::{Result, Write};

use crate::boot::BootStatus;
use crate::cpulist::CpuSet;
use crate::fleet::MachineStatus;
use crate::shield::apply::Refusal;
use crate::shield::change::Action;
use crate::shield::irqbalance;
use crate::shield::TaskRef;
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

fn kinds(map: &BTreeMap<String, usize>) -> String {
    if map.is_empty() {
        return "none".into();
    }
    map.iter()
        .map(|(k, n)| format!("{k} ×{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn tasks(w: &mut dyn Write, title: &str, list: &[TaskRef], limit: usize) -> Result<()> {
    if list.is_empty() {
        return Ok(());
    }
    writeln!(w, "  {title} ({}):", list.len())?;
    writeln!(w, "    {:>8} {:>8}  {:<20} cpus", "pid", "tid", "name")?;
    for t in list.iter().take(limit) {
        writeln!(
            w,
            "    {:>8} {:>8}  {:<20} {}",
            t.pid, t.tid, t.name, t.cpus
        )?;
    }
    if list.len() > limit {
        writeln!(w, "    ... {} more (--json lists all)", list.len() - limit)?;
    }
    Ok(())
}

pub(super) fn refusals(w: &mut dyn Write, title: &str, list: &[Refusal]) -> Result<()> {
    if list.is_empty() {
        return Ok(());
    }
    writeln!(w, "  {title} ({}):", list.len())?;
    for r in list {
        writeln!(w, "    {:<28} {}", r.target, r.reason)?;
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
    part_rows(&r.parts, w)?;
    for line in r.parts.iter().flat_map(|p| &p.details) {
        writeln!(w, "{line}")?;
    }
    Ok(())
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

/// The rows of the components that report for themselves: their name
/// beside their first line, the others below it.
fn part_rows(parts: &[crate::shield::PartReport], w: &mut dyn Write) -> Result<()> {
    for line in parts.iter().flat_map(|p| &p.lines) {
        row(w, &line.label, &line.text)?;
    }
    Ok(())
}

/// `on`'s IRQs that refused or are still effective on the shield.
fn on_irqs(r: &OnReport, w: &mut dyn Write) -> Result<()> {
    if !r.irqs_refused.is_empty() {
        writeln!(
            w,
            "  IRQs that refused a new affinity ({}):",
            r.irqs_refused.len()
        )?;
        for i in &r.irqs_refused {
            writeln!(w, "    {:>5}  {:<24} {}", i.irq, i.name, i.reason)?;
        }
    }
    if !r.irqs_effective_on_shield.is_empty() {
        row(
            w,
            "IRQs effective on shield",
            list(&r.irqs_effective_on_shield),
        )?;
        writeln!(
            w,
            "    (effective affinity moves at the next interrupt, unless the IRQ refused)"
        )?;
    }
    Ok(())
}

/// `on`'s tasks kept on, leaving, or moved off the shield.
fn on_tasks(r: &OnReport, w: &mut dyn Write) -> Result<()> {
    tasks(
        w,
        "kept on the shield, own affinity inside it (--force moves them off)",
        &r.kept,
        20,
    )?;
    tasks(
        w,
        "left the shield: none of their CPUs stays in it (moved to housekeeping)",
        &r.left_shield,
        20,
    )?;
    tasks(
        w,
        "asked only for shielded CPUs but NOT kept there (now)",
        &r.not_kept,
        20,
    )?;
    tasks(
        w,
        "moved off: only these threads of their process asked for shielded CPUs",
        &r.split_off,
        20,
    )?;
    Ok(())
}

/// A plan's step as `on --dry-run` prints it.
fn plan_line(action: &Action) -> String {
    match action {
        Action::Mkdir { path } => format!("mkdir /{path}"),
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
        Action::Write { path, value, .. } => format!("write {value:?} > /{path}"),
        Action::MoveTask { tid, to, .. } => format!("move task {tid} > /{to}"),
        Action::SetAffinity {
            tid,
            name,
            previous,
            cpus,
            ..
        } => {
            format!("affinity of {tid} ({name}): {previous} -> {cpus}")
        }
        Action::SetScheduler {
            tid,
            name,
            priority,
            reservation: None,
            ..
        } => format!("scheduling of {tid} ({name}): SCHED_FIFO {priority}"),
        Action::SetScheduler {
            tid,
            name,
            reservation: Some((runtime, period)),
            ..
        } => format!(
            "scheduling of {tid} ({name}): SCHED_DEADLINE {} µs every {} µs",
            runtime / 1000,
            period / 1000
        ),
        Action::Systemd { call, .. } => call.command_line().join(" "),
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
    if let Some(b) = &r.irqbalance_ban {
        row(
            w,
            "irqbalance",
            irqbalance_line(b, r.irqbalance.as_ref(), r.dry_run),
        )?;
    }
    if !r.dry_run {
        row(
            w,
            "changes made",
            format!("{} of {} planned", r.changed, r.planned),
        )?;
        row(w, "threads moved off", r.tasks_moved)?;
        if r.tasks_exited > 0 {
            row(w, "threads exited meanwhile", r.tasks_exited)?;
        }
        row(w, "IRQs moved", r.irqs_moved.len())?;
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
    row(w, "IRQs bound to shield", list(&r.irqs_to_shield))?;
    row(w, "kthreads the kernel pins", kinds(&r.per_cpu_kthreads))?;
    on_irqs(r, w)?;
    on_tasks(r, w)?;
    refusals(w, "task changes refused", &r.tasks_refused)?;
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
    if !r.ok() {
        writeln!(w, "  to bring the machine to the config: cpushield apply")?;
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
    tasks(w, title, &r.moved, 50)?;
    if !r.not_found.is_empty() {
        writeln!(w, "  not found: {}", list(&r.not_found))?;
    }
    Ok(())
}
/// The irqbalance row of `on`: the ban, and what the process did as read
/// back (restarted only when another process runs now).
fn irqbalance_line(
    banned: &CpuSet,
    process: Option<&irqbalance::Process>,
    dry_run: bool,
) -> String {
    use irqbalance::Process;
    if dry_run {
        return format!("CPUs {banned} to be banned (runtime only)");
    }
    let what = match process {
        Some(Process::Kept { pid }) => format!("irqbalance kept running as pid {pid}"),
        Some(Process::Restarted { before, after }) => {
            format!("irqbalance restarted: pid {before} -> {after}")
        }
        Some(Process::Started { pid }) => format!("irqbalance started meanwhile as pid {pid}"),
        Some(Process::Gone { before }) => format!("irqbalance (pid {before}) stopped meanwhile"),
        Some(Process::NotRunning) => {
            "irqbalance not running: it reads the ban when it starts".into()
        }
        None => "already in place".into(),
    };
    format!("CPUs {banned} banned (runtime only, {what}; off removes it)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use irqbalance::Process;

    #[test]
    fn irqbalance_is_said_restarted_only_when_another_process_runs() {
        let cpus = CpuSet::parse_list("2-3").unwrap();
        let kept = irqbalance_line(&cpus, Some(&Process::Kept { pid: 412 }), false);
        assert!(
            kept.contains("kept running as pid 412") && !kept.contains("restarted"),
            "{kept}"
        );
        let restarted = Process::Restarted {
            before: 412,
            after: 530,
        };
        let line = irqbalance_line(&cpus, Some(&restarted), false);
        assert!(line.contains("restarted: pid 412 -> 530"), "{line}");
        let planned = irqbalance_line(&cpus, None, true);
        assert!(
            !planned.contains("restarted") && planned.contains("to be banned"),
            "{planned}"
        );
    }
}
