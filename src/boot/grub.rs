//! GRUB the Debian and Ubuntu way: `grub-mkconfig` (run by `update-grub`)
//! sources `/etc/default/grub` and then every `/etc/default/grub.d/*.cfg`,
//! so a drop-in of ours extends `GRUB_CMDLINE_LINUX_DEFAULT` without
//! touching the user's file, and `update-grub` regenerates
//! `/boot/grub/grub.cfg`. `GRUB_CMDLINE_LINUX_DEFAULT` reaches the normal
//! entries only, so recovery mode still boots without isolation.
//!
//! Other bootloaders are detected and refused with what to do by hand.

use crate::sys::Sys;

use super::{BootError, BootWant};

/// cpushield's drop-in, relative to the root. The name sorts late, so that
/// a drop-in of the user's that sets `GRUB_CMDLINE_LINUX_DEFAULT` outright
/// comes first and ours extends it.
pub const DROPIN: &str = "etc/default/grub.d/zz-cpushield.cfg";
/// The file `update-grub` generates, relative to the root.
pub const GENERATED: &str = "boot/grub/grub.cfg";
const DEFAULTS: &str = "etc/default/grub";
const UPDATE_GRUB: &str = "usr/sbin/update-grub";

/// The GRUB set-up of a machine: where the drop-in goes, what is generated,
/// and the command that regenerates it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grub {
    /// The drop-in, relative to the root.
    pub dropin: String,
    /// The generated configuration, relative to the root.
    pub generated: String,
    /// The command that regenerates it.
    pub command: Vec<String>,
}

impl Grub {
    /// GRUB with the given drop-in and generated file (from a record).
    pub fn at(dropin: &str, generated: &str) -> Grub {
        Grub {
            dropin: dropin.into(),
            generated: generated.into(),
            command: vec!["update-grub".into()],
        }
    }

    /// Name for reports.
    pub fn name(&self) -> String {
        "GRUB (update-grub)".into()
    }

    /// Runs the bootloader's command.
    pub fn regenerate(&self, sys: &Sys) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let argv: Vec<&str> = self.command.iter().map(String::as_str).collect();
        sys.run_tool(&argv)?;
        Ok(())
    }
}

/// Finds the bootloader cpushield can drive for `options`, or says what to
/// do by hand. Reads only.
pub fn detect(sys: &Sys, options: &[String]) -> Result<Grub, BootError> {
    if sys.exists(DEFAULTS) && sys.exists(UPDATE_GRUB) {
        return Ok(Grub::at(DROPIN, GENERATED));
    }
    let line = options.join(" ");
    let (bootloader, instructions) = if sys.exists("etc/kernel/cmdline")
        || sys.exists("usr/bin/kernel-install")
    {
        (
            "systemd-boot or a unified kernel image (kernel-install), which cpushield does not drive".to_string(),
            format!(
                "append \"{line}\" to /etc/kernel/cmdline and run: kernel-install add $(uname -r) /boot/vmlinuz-$(uname -r); then reboot"
            ),
        )
    } else if sys.exists("usr/sbin/grubby") || sys.exists("usr/bin/grubby") {
        (
            "grubby (Fedora, RHEL), which cpushield does not drive".to_string(),
            format!("run: grubby --update-kernel=ALL --args=\"{line}\"; then reboot"),
        )
    } else {
        (
            "no GRUB with update-grub (/etc/default/grub, /usr/sbin/update-grub) was found".to_string(),
            format!("add \"{line}\" to the kernel command line in your bootloader's configuration, then reboot"),
        )
    };
    Err(BootError::Unsupported {
        bootloader,
        instructions,
    })
}

/// The drop-in: a shell fragment that `grub-mkconfig` sources.
pub fn dropin_text(want: &BootWant) -> String {
    format!(
        "# Written by cpushield (config key `boot`, `cpushield apply`): the boot half of\n\
         # the shield of CPUs {}; housekeeping CPUs {}. Do not edit: remove it with\n\
         # `cpushield boot --remove`, which also runs update-grub.\n\
         GRUB_CMDLINE_LINUX_DEFAULT=\"${{GRUB_CMDLINE_LINUX_DEFAULT}} {}\"\n",
        want.cpus,
        want.housekeeping,
        want.options.join(" ")
    )
}

/// Whether every `linux` line of the generated file outside recovery mode
/// carries every option (and there is at least one such line).
pub fn generated_has(sys: &Sys, generated: &str, options: &[String]) -> bool {
    let Ok(text) = sys.read(generated) else {
        return false;
    };
    let mut kernels = text
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with("linux ") || l.starts_with("linux\t"))
        .filter(|l| {
            !l.split_whitespace()
                .any(|w| w == "single" || w == "recovery")
        })
        .peekable();
    kernels.peek().is_some()
        && kernels.all(|l| options.iter().all(|o| l.split_whitespace().any(|w| w == o)))
}
