//! The bootloaders cpushield writes the boot half through, how each is
//! detected from what the machine has and what booted it, and what each
//! writes and reads back. The engine in `mod.rs` records, writes, runs the
//! generator and undoes the same way for all of them.

use serde::{Deserialize, Serialize};

use crate::sys::Sys;

use super::edit::{self, FileChange};
use super::loader::{BootedBy, LoaderFacts};
use super::{bls, grub, uki, BootError, BootWant};

/// A way of writing the boot half.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// GRUB the Debian way: a drop-in in `/etc/default/grub.d`, `update-grub`.
    DebianGrub,
    /// Upstream GRUB: a block at the end of `/etc/default/grub`,
    /// `grub-mkconfig -o` or `grub2-mkconfig -o`.
    GrubMkconfig,
    /// GRUB with BLS entries (Fedora, RHEL): the entries' `options`,
    /// `/etc/kernel/cmdline`, and a block in `/etc/default/grub`.
    Bls,
    /// systemd-boot: its type #1 entries' `options` and `/etc/kernel/cmdline`.
    SystemdBoot,
    /// A unified kernel image: a command-line addon made with `ukify` in
    /// the ESP's `loader/addons/`, which systemd-stub appends.
    UkiAddon,
}

impl Backend {
    /// Name for reports.
    pub fn describe(self) -> &'static str {
        match self {
            Backend::DebianGrub => "GRUB (update-grub)",
            Backend::GrubMkconfig => "GRUB (grub-mkconfig)",
            Backend::Bls => "GRUB with BLS entries",
            Backend::SystemdBoot => "systemd-boot (BLS entries, kernel-install)",
            Backend::UkiAddon => "a unified kernel image's command-line addon (ukify)",
        }
    }

    /// Whether removal runs the command again (GRUB regenerates its
    /// configuration; an addon is only deleted).
    pub fn regenerates(self) -> bool {
        matches!(self, Backend::DebianGrub | Backend::GrubMkconfig)
    }
}

/// The bootloader set-up found on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loader {
    /// How the boot half is written.
    pub backend: Backend,
    /// What booted this machine.
    pub booted_by: BootedBy,
    /// The generated configuration read back after the command (GRUB).
    pub generated: Option<String>,
    /// The command that regenerates it (empty: none, the loader reads the
    /// entries at boot).
    pub command: Vec<String>,
    /// The directories of BLS entries.
    pub entry_dirs: Vec<String>,
    /// Only the entries whose file names start with this token.
    pub token: Option<String>,
    /// Another bootloader installed that did not boot this machine.
    pub also_installed: Option<String>,
    /// The ESP (unified kernel images).
    pub esp: Option<String>,
    /// The program that makes an addon (unified kernel images).
    pub ukify: Option<String>,
    /// The user's options in the booted UKI's own command line.
    pub uki_cmdline: Option<String>,
}

fn first_existing(sys: &Sys, paths: &[&str]) -> Option<String> {
    paths.iter().find(|p| sys.exists(p)).map(|p| p.to_string())
}

/// `GRUB_ENABLE_BLSCFG` in `/etc/default/grub` (the last assignment):
/// `true` (any case, quotes optional) or not; `None` when unset.
fn blscfg_setting(defaults: &str) -> Option<bool> {
    defaults
        .lines()
        .rev()
        .filter_map(|l| l.trim().strip_prefix("GRUB_ENABLE_BLSCFG="))
        .next()
        .map(|v| {
            v.trim()
                .trim_matches(['"', '\''])
                .eq_ignore_ascii_case("true")
        })
}

impl Loader {
    fn new(backend: Backend, booted_by: BootedBy) -> Loader {
        Loader {
            backend,
            booted_by,
            generated: None,
            command: Vec::new(),
            entry_dirs: Vec::new(),
            token: None,
            also_installed: None,
            esp: None,
            ukify: None,
            uki_cmdline: None,
        }
    }

    /// Name for reports.
    pub fn name(&self) -> String {
        self.backend.describe().to_string()
    }
}

/// Finds how to write `options` on this machine, or says what to do by
/// hand. Writes only for the loader that booted: where GRUB booted but
/// systemd-boot is installed too (or the other way round), the one that
/// booted is used and the other named. Reads only.
pub fn detect(sys: &Sys, facts: &LoaderFacts, options: &[String]) -> Result<Loader, BootError> {
    let booted = facts.booted_by();
    let line = options.join(" ");
    let sdboot_dirs = bls::entry_dirs(sys)
        .into_iter()
        .filter(|d| d != "boot/loader/entries" || !sys.exists(grub::DEFAULTS))
        .collect::<Vec<_>>();
    match booted {
        BootedBy::UnifiedKernelImage => return uki_loader(sys, facts, &line),
        BootedBy::SystemdBoot => {
            let dirs = bls::entry_dirs(sys);
            if dirs.is_empty() {
                return Err(BootError::Unsupported {
                    bootloader: format!(
                        "{} booted, but no loader/entries directory is under /efi, /boot or /boot/efi",
                        facts.loader_info.as_deref().unwrap_or("systemd-boot")
                    ),
                    instructions: format!(
                        "mount the ESP, or append \"{line}\" to the options line of your entry by hand; then reboot"
                    ),
                });
            }
            let mut l = Loader::new(Backend::SystemdBoot, booted);
            l.token = bls::token(sys);
            if l.token.as_deref().is_some_and(|t| {
                dirs.iter()
                    .all(|d| bls::entries(sys, d, Some(t)).is_empty())
            }) {
                l.token = None;
            }
            l.entry_dirs = dirs;
            if sys.exists(grub::DEFAULTS) {
                l.also_installed = Some("GRUB (/etc/default/grub)".into());
            }
            return Ok(l);
        }
        BootedBy::Grub | BootedBy::Unknown => {}
    }
    if sys.exists(grub::DEFAULTS) {
        let mut l = grub_loader(sys, booted, &line)?;
        if !sdboot_dirs.is_empty() && l.backend != Backend::Bls {
            l.also_installed = Some(format!(
                "systemd-boot entries in /{}",
                sdboot_dirs.join(", /")
            ));
        }
        return Ok(l);
    }
    let (bootloader, instructions) = if !sdboot_dirs.is_empty()
        || sys.exists("etc/kernel/cmdline")
        || sys.exists("usr/bin/kernel-install")
    {
        (
            "systemd-boot or kernel-install entries, but the firmware does not say systemd-boot booted this machine (no LoaderInfo EFI variable)".to_string(),
            format!(
                "append \"{line}\" to /etc/kernel/cmdline and run: kernel-install add $(uname -r) /boot/vmlinuz-$(uname -r); then reboot"
            ),
        )
    } else {
        (
            "no bootloader cpushield knows (GRUB's /etc/default/grub, or systemd-boot) was found".to_string(),
            format!("add \"{line}\" to the kernel command line in your bootloader's configuration, then reboot"),
        )
    };
    Err(BootError::Unsupported {
        bootloader,
        instructions,
    })
}

/// A unified kernel image: an addon, where `ukify`, its addon stub and an
/// ESP are there and Secure Boot would not skip an unsigned addon.
fn uki_loader(sys: &Sys, facts: &LoaderFacts, line: &str) -> Result<Loader, BootError> {
    let by_hand = format!(
        "make a command-line addon: ukify build --cmdline='{line}' --output=<ESP>/loader/addons/cpushield.addon.efi (signed with your Secure Boot key when Secure Boot is on); then reboot"
    );
    let refuse = |why: String| BootError::Unsupported {
        bootloader: format!(
            "this machine booted a unified kernel image{} ({}), but {why}",
            facts
                .entry_selected
                .as_deref()
                .map(|e| format!(" {e}"))
                .unwrap_or_default(),
            facts.stub_info.as_deref().unwrap_or("systemd-stub")
        ),
        instructions: by_hand.clone(),
    };
    if facts.secure_boot == Some(true) {
        return Err(refuse(
            "Secure Boot is on: systemd-stub would skip an addon cpushield cannot sign".into(),
        ));
    }
    let Some(esp) = uki::esp(sys) else {
        return Err(refuse(
            "no ESP with an EFI directory is mounted at /efi, /boot/efi or /boot".into(),
        ));
    };
    let Some(ukify) = uki::ukify(sys) else {
        return Err(refuse(
            "ukify is not installed (Debian and Fedora: systemd-ukify)".into(),
        ));
    };
    if !sys.exists(uki::ADDON_STUB) {
        return Err(refuse(format!(
            "the addon stub /{} is missing (Debian: systemd-boot-efi)",
            uki::ADDON_STUB
        )));
    }
    let mut l = Loader::new(Backend::UkiAddon, facts.booted_by());
    l.uki_cmdline = uki::booted_uki(sys, &esp, facts.entry_selected.as_deref())
        .and_then(|p| std::fs::read(sys.path(&p)).ok())
        .and_then(|data| uki::section_text(&data, ".cmdline"));
    l.esp = Some(esp);
    l.ukify = Some(format!("/{ukify}"));
    Ok(l)
}

/// GRUB: Debian's `update-grub`, BLS entries, or upstream `grub-mkconfig`.
fn grub_loader(sys: &Sys, booted: BootedBy, line: &str) -> Result<Loader, BootError> {
    if sys.exists("usr/sbin/update-grub") {
        let mut l = Loader::new(Backend::DebianGrub, booted);
        l.generated = Some(grub::GENERATED.into());
        l.command = vec!["update-grub".into()];
        return Ok(l);
    }
    let defaults = sys.read(grub::DEFAULTS).unwrap_or_default();
    let bls_dir = "boot/loader/entries";
    let old_generator = first_existing(sys, &["usr/sbin/new-kernel-pkg", "sbin/new-kernel-pkg"]);
    let bls = match blscfg_setting(&defaults) {
        Some(on) => on,
        None => sys.path(bls_dir).is_dir() && old_generator.is_none(),
    };
    if bls {
        if !sys.path(bls_dir).is_dir() {
            return Err(BootError::Unsupported {
                bootloader: "GRUB with GRUB_ENABLE_BLSCFG=true, but no /boot/loader/entries".into(),
                instructions: format!(
                    "run: grubby --update-kernel=ALL --args=\"{line}\"; then reboot"
                ),
            });
        }
        let mut l = Loader::new(Backend::Bls, booted);
        l.entry_dirs = vec![bls_dir.into()];
        return Ok(l);
    }
    let generators = [
        (
            "usr/sbin/grub2-mkconfig",
            "grub2-mkconfig",
            "boot/grub2/grub.cfg",
        ),
        (
            "usr/bin/grub2-mkconfig",
            "grub2-mkconfig",
            "boot/grub2/grub.cfg",
        ),
        (
            "usr/sbin/grub-mkconfig",
            "grub-mkconfig",
            "boot/grub/grub.cfg",
        ),
        (
            "usr/bin/grub-mkconfig",
            "grub-mkconfig",
            "boot/grub/grub.cfg",
        ),
    ];
    for (tool, name, generated) in generators {
        if !sys.exists(tool) {
            continue;
        }
        let dir = generated
            .rsplit_once('/')
            .map(|(d, _)| d)
            .unwrap_or(generated);
        if !sys.path(dir).is_dir() {
            continue;
        }
        let mut l = Loader::new(Backend::GrubMkconfig, booted);
        l.generated = Some(generated.into());
        l.command = vec![name.into(), "-o".into(), format!("/{generated}")];
        return Ok(l);
    }
    Err(BootError::Unsupported {
        bootloader: "GRUB's /etc/default/grub, but neither update-grub nor grub-mkconfig/grub2-mkconfig with its /boot/grub(2) directory".into(),
        instructions: format!(
            "add \"{line}\" to GRUB_CMDLINE_LINUX_DEFAULT in /etc/default/grub, regenerate grub.cfg the way your distribution does, then reboot"
        ),
    })
}

/// What a plan writes, and the user's options it replaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The files, in the order they are written.
    pub files: Vec<FileChange>,
    /// The user's options that set one of cpushield's keys, left out.
    pub replaced: Vec<String>,
    /// The command run after the files are written (empty: none).
    pub command: Vec<String>,
    /// Files the command makes, cpushield's alone (an addon), relative to the root.
    pub made: Vec<String>,
}

impl Loader {
    /// The files to write for `want`, starting from `base` (a file's
    /// content once the previous boot half is taken out).
    /// A file that is there but cannot be read as text (not UTF-8, no
    /// permission) is refused by name: planning from it as if it were
    /// empty or absent would overwrite it.
    pub fn plan(
        &self,
        sys: &Sys,
        want: &BootWant,
        base: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Plan, BootError> {
        let plan = self.plan_files(sys, want, base)?;
        for f in &plan.files {
            if let (true, Err(e)) = (sys.path(&f.path).exists(), sys.read(&f.path)) {
                return Err(BootError::Invalid(format!(
                    "boot: /{} cannot be read as text ({e}); cpushield edits only files it can read back: fix or restore the file, then apply again",
                    f.path
                )));
            }
        }
        Ok(plan)
    }

    fn plan_files(
        &self,
        sys: &Sys,
        want: &BootWant,
        base: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Plan, BootError> {
        match self.backend {
            Backend::DebianGrub => {
                let replaced = grub::user_conflicts(sys, true, &want.options);
                let written = grub::dropin_text(want, !replaced.is_empty());
                Ok(Plan {
                    command: self.command.clone(),
                    made: Vec::new(),
                    files: vec![FileChange {
                        path: grub::DROPIN.into(),
                        before: base(grub::DROPIN),
                        written,
                        edit: edit::Edit::Whole,
                        made_dir: false,
                    }],
                    replaced,
                })
            }
            Backend::GrubMkconfig | Backend::Bls => {
                let text = base(grub::DEFAULTS).unwrap_or_default();
                let replaced = grub::user_conflicts(sys, false, &want.options);
                let variable = if self.backend == Backend::Bls {
                    "GRUB_CMDLINE_LINUX"
                } else {
                    "GRUB_CMDLINE_LINUX_DEFAULT"
                };
                let (written, edit) = edit::block_edit(
                    &text,
                    &grub::block_text(want, variable, !replaced.is_empty()),
                );
                let mut files = vec![FileChange {
                    path: grub::DEFAULTS.into(),
                    before: Some(text),
                    written,
                    edit,
                    made_dir: false,
                }];
                if self.backend == Backend::Bls {
                    files.extend(self.plan_entries(sys, want, base)?.files);
                }
                let mut plan = Plan {
                    files,
                    replaced,
                    command: self.command.clone(),
                    made: Vec::new(),
                };
                plan.replaced.extend(removed_words(&plan.files));
                plan.replaced.dedup();
                Ok(plan)
            }
            Backend::SystemdBoot => self.plan_entries(sys, want, base),
            Backend::UkiAddon => self.plan_addon(want),
        }
    }

    fn plan_addon(&self, want: &BootWant) -> Result<Plan, BootError> {
        let conflicts: Vec<String> = self
            .uki_cmdline
            .as_deref()
            .unwrap_or_default()
            .split_whitespace()
            .filter(|w| edit::own_key(w) && !want.options.iter().any(|o| o == w))
            .map(str::to_string)
            .collect();
        if !conflicts.is_empty() {
            return Err(BootError::Unsupported {
                bootloader: format!(
                    "the unified kernel image's own command line sets {}, and systemd-stub puts an addon's options after it: the kernel would get two values (and may keep the first)",
                    conflicts.join(" ")
                ),
                instructions: format!(
                    "take {} out of /etc/kernel/cmdline, rebuild the image (kernel-install add $(uname -r) /boot/vmlinuz-$(uname -r)), then apply again",
                    conflicts.join(" ")
                ),
            });
        }
        let esp = self.esp.as_deref().unwrap_or("boot/efi");
        let addon = format!("{esp}/{}", uki::ADDON);
        Ok(Plan {
            files: Vec::new(),
            replaced: Vec::new(),
            command: vec![
                self.ukify.clone().unwrap_or_else(|| "ukify".into()),
                "build".into(),
                format!("--cmdline={}", want.options.join(" ")),
                format!("--output=/{addon}"),
            ],
            made: vec![addon],
        })
    }

    fn plan_entries(
        &self,
        sys: &Sys,
        want: &BootWant,
        base: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Plan, BootError> {
        let entries: Vec<String> = self
            .entry_dirs
            .iter()
            .flat_map(|d| bls::entries(sys, d, self.token.as_deref()))
            .collect();
        if entries.is_empty() {
            return Err(BootError::Unsupported {
                bootloader: format!(
                    "{}, but no type #1 entry with a kernel (linux) in /{}",
                    self.name(),
                    self.entry_dirs.join(", /")
                ),
                instructions: format!(
                    "append \"{}\" to your entry's options line by hand; then reboot",
                    want.options.join(" ")
                ),
            });
        }
        let cmdline = sys.read_trimmed("proc/cmdline").unwrap_or_default();
        let files = bls::plan(sys, &entries, &want.options, base, &cmdline)?;
        let replaced = removed_words(&files);
        Ok(Plan {
            files,
            replaced,
            command: Vec::new(),
            made: Vec::new(),
        })
    }

    /// What the bootloader's configuration lacks of `want` now: empty when
    /// every place carries every option and each key once.
    pub fn read_back(&self, sys: &Sys, want: &BootWant, plan: &Plan) -> Vec<String> {
        let files = &plan.files;
        let mut out = Vec::new();
        for m in &plan.made {
            out.extend(uki::addon_lacks(sys, m, &want.options));
        }
        if let Some(g) = &self.generated {
            out.extend(grub::generated_lacks(sys, g, &want.options));
        }
        for f in files {
            match f.path.as_str() {
                grub::DROPIN | grub::DEFAULTS => {
                    if sys.read(&f.path).ok().as_deref() != Some(f.written.as_str()) {
                        out.push(format!("/{} is not what cpushield wrote", f.path));
                    }
                }
                path => out.extend(bls::lacks(sys, path, &want.options)),
            }
        }
        out
    }
}

fn removed_words(files: &[FileChange]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for f in files {
        if let edit::Edit::Words { removed, .. } = &f.edit {
            for w in removed {
                if !out.contains(w) {
                    out.push(w.clone());
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blscfg_is_read_as_tuned_reads_it() {
        assert_eq!(blscfg_setting("GRUB_ENABLE_BLSCFG=true\n"), Some(true));
        assert_eq!(blscfg_setting("GRUB_ENABLE_BLSCFG=\"TRUE\"\n"), Some(true));
        assert_eq!(
            blscfg_setting("GRUB_ENABLE_BLSCFG=true\nGRUB_ENABLE_BLSCFG=false\n"),
            Some(false)
        );
        assert_eq!(blscfg_setting("GRUB_TIMEOUT=5\n"), None);
    }
}
