//! The reports of `tune --list`, `boot-args` and `audit` for people.

use std::io::{Result, Write};

use crate::audit::{AuditReport, Severity};
use crate::boot::args::BootArgs;
use crate::shield::knobs::{self as tune, Knob};

/// `cpushield tune --list`.
pub fn knobs(list: &&'static [Knob], w: &mut dyn Write) -> Result<()> {
    writeln!(
        w,
        "tuning knobs (cpushield on LIST --tune[=KNOB,...]; undone by cpushield off):"
    )?;
    for k in list.iter() {
        let all = if k.in_all { "" } else { "  [only by name]" };
        writeln!(w, "\n  {}{all}", k.name)?;
        writeln!(w, "    file   {}", tune::describe_files(k))?;
        writeln!(w, "    value  {}", tune::describe_value(k))?;
        writeln!(w, "    why    {}", k.why)?;
        writeln!(w, "    risk   {}", k.risk)?;
    }
    Ok(())
}

/// `cpushield boot-args`.
pub fn boot_args(b: &BootArgs, w: &mut dyn Write) -> Result<()> {
    for warn in &b.warnings {
        writeln!(w, "warning: {warn}")?;
    }
    writeln!(w, "add to the kernel command line (then reboot):")?;
    writeln!(w, "  {}", b.cmdline)?;
    writeln!(w, "optional:")?;
    for (arg, why) in &b.optional {
        writeln!(w, "  {arg:<16} {why}")?;
    }
    writeln!(
        w,
        "cpushield writes it for you: 'boot = true' in /etc/cpushield/cpushield.toml, then 'cpushield apply'."
    )?;
    if let Some(now) = &b.now {
        writeln!(w, "this machine now:")?;
        let at_boot = now.isolated.union(&now.nohz_full);
        for (what, cpus) in [
            ("isolated at boot", at_boot.intersection(&b.isolated)),
            ("not isolated at boot", b.isolated.difference(&at_boot)),
        ] {
            if !cpus.is_empty() {
                writeln!(w, "  {what:<22} CPUs {cpus}")?;
            }
        }
        writeln!(w, "  {:<22} {}", "boot half", super::boot::state_line(now))?;
    }
    Ok(())
}

/// `cpushield audit`.
pub fn audit(r: &AuditReport, w: &mut dyn Write) -> Result<()> {
    let window = if r.window_s > 0.0 {
        format!("interrupts over {:.1} s", r.window_s)
    } else {
        "interrupts not counted (--window 0)".into()
    };
    writeln!(
        w,
        "audit of CPUs {} (from {}; {})",
        r.cpus, r.source, window
    )?;
    let id_w = r.findings.iter().map(|f| f.id.len()).max().unwrap_or(2);
    for f in &r.findings {
        let sev = match f.severity {
            Severity::Bad => "BAD ",
            Severity::Warn => "warn",
            Severity::Ok => "ok  ",
        };
        writeln!(w, "  {sev} {:<id_w$}  {}", f.id, f.reason)?;
        if !f.next.is_empty() && f.severity != Severity::Ok {
            writeln!(w, "       {:<id_w$}  → {}", "", f.next)?;
        }
    }
    let count = |s| r.findings.iter().filter(|f| f.severity == s).count();
    writeln!(
        w,
        "{} bad, {} warn, {} ok",
        count(Severity::Bad),
        count(Severity::Warn),
        count(Severity::Ok)
    )?;
    Ok(())
}
