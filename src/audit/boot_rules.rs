//! The audit's rules about the boot half: the kernel command line
//! (isolcpus=, nohz_full=, rcu_nocbs=, irqaffinity= and the flags that
//! quieten a CPU) and the boot half cpushield wrote. Pure, as
//! [`super::rules`].

use super::facts::Facts;
use super::parse;
use super::{Findings, Severity};

/// The boot parameters a fully isolated CPU needs, each judged against the targets.
pub(super) fn boot_params(f: &Facts, out: &mut Findings) {
    boot_half(f, out);
    boot_isolcpus(f, out);
    boot_cover(f, out);
    boot_irqaffinity(f, out);
    boot_flags(f, out);
}

/// The boot half cpushield wrote: active, or waiting for a reboot.
fn boot_half(f: &Facts, out: &mut Findings) {
    use crate::boot::BootState;
    let Some(b) = &f.boot else { return };
    let written = b
        .written
        .as_ref()
        .map(|w| w.options.join(" "))
        .unwrap_or_default();
    let (severity, reason, next) = match b.state {
        BootState::Active => (
            Severity::Ok,
            format!("the boot half is active: the kernel booted with {written}"),
            "",
        ),
        BootState::PendingReboot => (
            Severity::Warn,
            format!(
                "the boot half is written but not active: the running kernel lacks {}",
                b.missing.join(" ")
            ),
            "reboot (cpushield verify exits 8 until then)",
        ),
        BootState::RemovalPending => (
            Severity::Warn,
            format!(
                "the boot half was removed; the running kernel still has {}",
                b.still_running.join(" ")
            ),
            "reboot to boot without it",
        ),
        BootState::Interrupted => (
            Severity::Warn,
            "a change of the boot half was interrupted".into(),
            "cpushield apply (or cpushield boot --remove)",
        ),
        BootState::External | BootState::Absent => return,
    };
    out.add("boot.half", severity, 60, reason, next.into());
}

/// What to do for a missing boot option `arg`: reboot when the boot half
/// already has it, else boot with it (the config key writes it).
fn boot_with(f: &Facts, arg: &str) -> String {
    let pending = f.boot.as_ref().is_some_and(|b| {
        b.reboot_pending
            && b.written
                .as_ref()
                .is_some_and(|w| w.options.iter().any(|o| o == arg))
    });
    if pending {
        format!("reboot: the boot half has {arg}, the running kernel not yet")
    } else {
        format!("boot with {arg} (config key boot = true and cpushield apply write it)")
    }
}

/// `isolcpus=` covering the targets with the `managed_irq` flag. The
/// `domain` flag is not asked for: the shield's isolated partition does
/// that at run time, and a kernel booted with it refuses some partitions
/// over those CPUs (see [`crate::boot::args::boot_args`]).
fn boot_isolcpus(f: &Facts, out: &mut Findings) {
    let list = f.list();
    match f.cmdline.get("isolcpus").cloned() {
        Some(v) => {
            let (flags, set) = parse::parse_isolcpus(&v.unwrap_or_default());
            let missing: Vec<&str> = ["managed_irq"]
                .into_iter()
                .filter(|f| !flags.iter().any(|g| g == f))
                .collect();
            if !f.targets.is_subset(&set) {
                out.add(
                    "boot.isolcpus",
                    Severity::Warn,
                    45,
                    format!("isolcpus={set} does not cover {list}"),
                    boot_with(f, &format!("isolcpus=managed_irq,{list}")),
                );
            } else if !missing.is_empty() {
                out.add(
                    "boot.isolcpus",
                    Severity::Warn,
                    45,
                    format!("isolcpus covers {list} without {}", missing.join(",")),
                    boot_with(f, &format!("isolcpus=managed_irq,{list}")),
                );
            } else {
                out.add(
                    "boot.isolcpus",
                    Severity::Ok,
                    45,
                    format!("isolcpus={} covers {list}", flags.join(",")),
                    String::new(),
                );
            }
        }
        None => out.add(
            "boot.isolcpus",
            Severity::Warn,
            45,
            "no isolcpus= (kernel-managed queue IRQs stay on the targets)".into(),
            format!(
                "{} (cpushield boot-args {list})",
                boot_with(f, &format!("isolcpus=managed_irq,{list}"))
            ),
        ),
    }
}

/// `nohz_full=` and `rcu_nocbs=` covering the targets.
fn boot_cover(f: &Facts, out: &mut Findings) {
    let list = f.list();
    let covers = |name: &str| -> Option<bool> {
        let v = f.cmdline.get(name)?.clone().unwrap_or_default();
        Some(f.targets.is_subset(&parse::param_cpus(&v, &f.online)))
    };
    for (name, impact, why, arg) in [
        (
            "nohz_full",
            55u8,
            "the scheduler tick keeps running on the targets",
            format!("nohz_full={list}"),
        ),
        (
            "rcu_nocbs",
            50,
            "RCU callbacks run on the targets",
            format!("rcu_nocbs={list}"),
        ),
    ] {
        match covers(name) {
            Some(true) => out.add(
                &format!("boot.{name}"),
                Severity::Ok,
                impact,
                format!("{name}= covers {list}"),
                String::new(),
            ),
            Some(false) => out.add(
                &format!("boot.{name}"),
                Severity::Warn,
                impact,
                format!("{name}= does not cover {list}: {why}"),
                boot_with(f, &arg),
            ),
            None => out.add(
                &format!("boot.{name}"),
                Severity::Warn,
                impact,
                format!("no {name}=: {why}"),
                boot_with(f, &arg),
            ),
        }
    }
}

/// `irqaffinity=` keeping boot-time IRQs on the housekeeping CPUs.
fn boot_irqaffinity(f: &Facts, out: &mut Findings) {
    let list = f.list();
    let hk = f.housekeeping();
    match f.cmdline.get("irqaffinity").cloned().flatten() {
        Some(v) if !parse::param_cpus(&v, &f.online).intersects(&f.targets) => out.add(
            "boot.irqaffinity",
            Severity::Ok,
            35,
            format!("irqaffinity={v} keeps boot-time IRQs off {list}"),
            String::new(),
        ),
        other => out.add(
            "boot.irqaffinity",
            Severity::Warn,
            35,
            match other {
                Some(v) => format!("irqaffinity={v} includes {list}"),
                None => "no irqaffinity=: IRQs start on every CPU".into(),
            },
            boot_with(f, &format!("irqaffinity={hk}")),
        ),
    }
}

/// Flags that remove periodic work or move handlers into threads.
fn boot_flags(f: &Facts, out: &mut Findings) {
    for (name, impact, arg, without) in [
        (
            "threadirqs",
            20u8,
            "threadirqs",
            "interrupt handlers run in hard-IRQ context, not in threads that can be prioritised",
        ),
        (
            "nosoftlockup",
            15,
            "nosoftlockup",
            "the soft-lockup watchdog runs on every CPU",
        ),
        (
            "skew_tick",
            10,
            "skew_tick=1",
            "the ticks of all CPUs fire at the same moment",
        ),
        (
            "tsc",
            10,
            "tsc=reliable",
            "the clocksource watchdog checks the TSC (add only when the TSC is known stable)",
        ),
    ] {
        if f.cmdline.contains_key(name) {
            let v = f.cmdline[name]
                .as_deref()
                .map(|v| format!("={v}"))
                .unwrap_or_default();
            out.add(
                &format!("boot.{name}"),
                Severity::Ok,
                impact,
                format!("{name}{v} present"),
                String::new(),
            );
        } else {
            out.add(
                &format!("boot.{name}"),
                Severity::Warn,
                impact,
                format!("no {name}: {without}"),
                format!("boot with {arg}"),
            );
        }
    }
}
