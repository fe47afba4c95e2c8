//! The reports of `boot-args` and `audit` for people.

use std::io::{Result, Write};

use crate::audit::bus::{BusKind, BusReport, PCI_MHZ};
use crate::audit::{AuditReport, Severity};
use crate::boot::args::BootArgs;
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
    pci(&r.pci, w)?;
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

/// The PCI functions as read (one row each) and the bound of each bus
/// that is, or may be, conventional PCI.
fn pci(r: &BusReport, w: &mut dyn Write) -> Result<()> {
    if r.devices.is_empty() {
        return Ok(());
    }
    let policy = r.aspm_policy.as_deref().unwrap_or("none");
    writeln!(
        w,
        "PCI functions ({} read from /sys/bus/pci/devices; ASPM policy {policy}; LT: Latency Timer, bus clocks):",
        r.devices.len()
    )?;
    let header: Vec<String> = [
        "  function",
        "class",
        "config",
        "master",
        "LT",
        "IRQs",
        "node",
        "link",
        "ASPM",
        "L0s exit",
        "L1 exit",
    ]
    .map(String::from)
    .to_vec();
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    let rows: Vec<Vec<String>> = r
        .devices
        .iter()
        .map(|d| {
            let c = d.config.as_ref();
            let p = c.and_then(|c| c.pcie.as_ref());
            let irqs: Vec<String> = d.irqs().iter().map(u32::to_string).collect();
            let irqs = match irqs.len() {
                0 => "-".to_string(),
                1..=3 => irqs.join(","),
                n => format!("{},… ({n})", irqs[..2].join(",")),
            };
            let link = match (c.map(|c| c.is_pcie()), p) {
                (_, Some(p)) => p.port_name().to_string(),
                (Some(Some(false)), None) => "PCI".into(),
                _ => "?".into(),
            };
            vec![
                format!("  {}", d.address),
                d.class_code(),
                opt(c.map(|c| format!("{} B", c.bytes_read))),
                opt(c
                    .and_then(|c| c.bus_master)
                    .map(|m| if m { "yes" } else { "no" }.to_string())),
                opt(c.and_then(|c| c.latency_timer).map(|v| v.to_string())),
                irqs,
                opt(d.numa_node.map(|n| n.to_string())),
                link,
                opt(d.aspm_enabled().map(|s| s.describe())),
                opt(p.and_then(|p| p.l0s_exit).map(|e| e.to_string())),
                opt(p.and_then(|p| p.l1_exit).map(|e| e.to_string())),
            ]
        })
        .collect();
    write!(w, "{}", super::table::align(&header, &rows))?;
    for d in &r.devices {
        if let Some(e) = &d.config_error {
            writeln!(w, "  {}: config unread: {e}", d.address)?;
        }
    }
    for b in &r.buses {
        let kind = match b.kind {
            BusKind::Conventional => "conventional PCI",
            _ => "kind unknown, counted as if conventional PCI",
        };
        writeln!(
            w,
            "bus {} ({kind}: {}): worst-case wait {} bus cycles = {:.1} µs at {PCI_MHZ:.0} MHz",
            b.bus, b.why, b.cycles, b.us
        )?;
        let masters: Vec<String> = b
            .masters
            .iter()
            .map(|m| {
                let side = if m.side == "bridge" {
                    " (secondary)"
                } else {
                    ""
                };
                format!("{}{side} LT {} → {}", m.address, m.latency_timer, m.cycles)
            })
            .collect();
        if masters.is_empty() {
            writeln!(w, "  no bus master enabled on it")?;
        } else {
            writeln!(
                w,
                "  bus masters, clocks = LT up to the next 32 + 8·(n−1), at least 32: {}",
                masters.join("; ")
            )?;
        }
    }
    Ok(())
}
