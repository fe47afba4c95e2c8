//! GRUB's side of the boot half: the shell text that `grub-mkconfig`
//! sources, and reading back the configuration it generates.
//!
//! Debian and Ubuntu: `grub-mkconfig` (run by `update-grub`) sources
//! `/etc/default/grub` and then every `/etc/default/grub.d/*.cfg`, so a
//! drop-in of ours extends `GRUB_CMDLINE_LINUX_DEFAULT` without touching
//! the user's file. Upstream GRUB (Arch, SUSE, Fedora without BLS) sources
//! `/etc/default/grub` only: there a marked block goes at its end.
//! `GRUB_CMDLINE_LINUX_DEFAULT` reaches the normal entries only, so
//! recovery mode still boots without isolation.
//!
//! Where the user's own variables already set one of cpushield's keys
//! (`nohz_full=1`, say), the text first takes those words out of them, so
//! the generated kernel line carries each key once: cpushield's.

use crate::sys::Sys;

use super::edit::own_key;
use super::BootWant;

/// cpushield's drop-in on Debian, relative to the root. The name sorts
/// late, so that a drop-in of the user's that sets
/// `GRUB_CMDLINE_LINUX_DEFAULT` outright comes first and ours extends it.
pub const DROPIN: &str = "etc/default/grub.d/zz-cpushield.cfg";
/// The file `update-grub` generates, relative to the root.
pub const GENERATED: &str = "boot/grub/grub.cfg";
/// The file every `grub-mkconfig` sources, relative to the root.
pub const DEFAULTS: &str = "etc/default/grub";
/// Debian's drop-in directory.
pub const DROPIN_DIR: &str = "etc/default/grub.d";
/// The first line of cpushield's block in a file of the user's.
pub const BLOCK_BEGIN: &str = "# cpushield: begin";
/// The last line of cpushield's block.
pub const BLOCK_END: &str = "# cpushield: end";

/// The shell lines that take the words setting cpushield's keys out of
/// the GRUB variables, where the user's configuration has such words
/// (`conflicts`; else none). The words are split in a subshell with
/// globbing off, so a `*` in a user's option stays as it is.
fn drop_conflicts(conflicts: bool) -> String {
    if !conflicts {
        return String::new();
    }
    let pattern = super::OWN_KEYS
        .iter()
        .map(|k| format!("{k}|{k}=*"))
        .collect::<Vec<_>>()
        .join("|");
    format!(
        "# The user's options that set these keys are left out, so the kernel line\n\
         # has each key once: cpushield's.\n\
         cpushield_drop() {{\n    \
             cpushield_kept=\n    \
             for cpushield_w in $1; do\n        \
                 case $cpushield_w in\n            \
                     {pattern}) ;;\n            \
                     *) cpushield_kept=\"${{cpushield_kept:+$cpushield_kept }}$cpushield_w\" ;;\n        \
                 esac\n    \
             done\n    \
             printf '%s' \"$cpushield_kept\"\n\
         }}\n\
         GRUB_CMDLINE_LINUX=$(set -f; cpushield_drop \"$GRUB_CMDLINE_LINUX\")\n\
         GRUB_CMDLINE_LINUX_DEFAULT=$(set -f; cpushield_drop \"$GRUB_CMDLINE_LINUX_DEFAULT\")\n"
    )
}

/// Debian's drop-in: a shell fragment that `grub-mkconfig` sources.
pub fn dropin_text(want: &BootWant, conflicts: bool) -> String {
    format!(
        "# Written by cpushield (config key `boot`, `cpushield apply`): the boot half of\n\
         # the shield of CPUs {}; housekeeping CPUs {}. Do not edit: remove it with\n\
         # `cpushield boot --remove`, which also runs update-grub.\n\
         {}GRUB_CMDLINE_LINUX_DEFAULT=\"${{GRUB_CMDLINE_LINUX_DEFAULT}} {}\"\n",
        want.cpus,
        want.housekeeping,
        drop_conflicts(conflicts),
        want.options.join(" ")
    )
}

/// The block appended to `/etc/default/grub` where there is no drop-in
/// directory: extends `variable` (`GRUB_CMDLINE_LINUX_DEFAULT`, or
/// `GRUB_CMDLINE_LINUX` where BLS entries take no recovery split).
pub fn block_text(want: &BootWant, variable: &str, conflicts: bool) -> String {
    format!(
        "{BLOCK_BEGIN} (the boot half of the shield of CPUs {}; housekeeping CPUs {}).\n\
         # Do not edit: 'cpushield boot --remove' takes this block out again.\n\
         {}{variable}=\"${{{variable}:+${variable} }}{}\"\n\
         {BLOCK_END}\n",
        want.cpus,
        want.housekeeping,
        drop_conflicts(conflicts),
        want.options.join(" ")
    )
}

/// The user's words that set one of cpushield's keys in GRUB's variables:
/// the `GRUB_CMDLINE_LINUX*` lines of `/etc/default/grub` and (on Debian)
/// its drop-ins but cpushield's, leaving out the words of `ours` and of a
/// block of cpushield's.
pub fn user_conflicts(sys: &Sys, dropins: bool, ours: &[String]) -> Vec<String> {
    let mut files = vec![DEFAULTS.to_string()];
    if dropins {
        for name in sys.list(DROPIN_DIR).unwrap_or_default() {
            let path = format!("{DROPIN_DIR}/{name}");
            if name.ends_with(".cfg") && path != DROPIN {
                files.push(path);
            }
        }
    }
    let mut out = Vec::new();
    for f in files {
        let text = sys.read(&f).unwrap_or_default();
        let mut in_block = false;
        for line in text.lines() {
            if line.starts_with(BLOCK_BEGIN) {
                in_block = true;
            } else if line.starts_with(BLOCK_END) {
                in_block = false;
            } else if !in_block && line.trim_start().starts_with("GRUB_CMDLINE_LINUX") {
                let value = line.split_once('=').map(|(_, v)| v).unwrap_or_default();
                for w in value.split(|c: char| c.is_whitespace() || c == '"' || c == '\'') {
                    if own_key(w) && !ours.iter().any(|o| o == w) && !out.iter().any(|o| o == w) {
                        out.push(w.to_string());
                    }
                }
            }
        }
    }
    out
}

/// The `linux` lines of the generated file outside recovery mode.
fn normal_kernel_lines(text: &str) -> Vec<&str> {
    text.lines()
        .map(str::trim_start)
        .filter(|l| {
            ["linux ", "linux\t", "linuxefi ", "linux16 "]
                .iter()
                .any(|p| l.starts_with(p))
        })
        .filter(|l| {
            !l.split_whitespace()
                .any(|w| w == "single" || w == "recovery")
        })
        .collect()
}

/// What the generated file lacks: one problem per kind, empty when every
/// normal kernel line carries every option and each of cpushield's keys once.
pub fn generated_lacks(sys: &Sys, generated: &str, options: &[String]) -> Vec<String> {
    let Ok(text) = sys.read(generated) else {
        return vec![format!("/{generated} cannot be read")];
    };
    let lines = normal_kernel_lines(&text);
    if lines.is_empty() {
        return vec![format!("/{generated} has no kernel line")];
    }
    let mut out = Vec::new();
    for l in lines {
        let words: Vec<&str> = l.split_whitespace().collect();
        out.extend(super::edit::line_problems(
            &words,
            options,
            &format!("a kernel line of /{generated}"),
        ));
    }
    out.dedup();
    out
}

/// Whether every normal kernel line carries every option, each key once.
pub fn generated_has(sys: &Sys, generated: &str, options: &[String]) -> bool {
    generated_lacks(sys, generated, options).is_empty()
}
