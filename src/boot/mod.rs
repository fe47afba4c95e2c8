//! The boot half of a shield: the kernel command line options that only a
//! boot applies (`nohz_full=` stops the tick, `rcu_nocbs=` moves RCU
//! callbacks, `isolcpus=managed_irq` keeps kernel-managed queue interrupts
//! off), written the bootloader's own way and judged against what the
//! running kernel booted with.
//!
//! It outlives reboots, so its record does too: `/var/lib/cpushield/boot.json`
//! holds what was written and what the bootloader's files held before, and
//! is written (atomically, fsync'd) before each change. `off` never touches
//! it (`cpushield.service` runs `off` at every shutdown); only `apply` with a
//! config without `boot`, `cpushield boot --remove` and the package's purge
//! take it out, and they put the files back as they were.
//!
//! Reads and writes go through [`Sys`] (the root), the bootloader's tool
//! through [`Sys::run_tool`]. Judging is a pure function of read facts.

pub mod args;
pub mod grub;

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;
use crate::shield::journal;
use crate::sys::Sys;

/// The record of the boot half, relative to the root (survives reboots).
pub const RECORD: &str = "var/lib/cpushield/boot.json";
/// What the last removal took out, to tell "removed, reboot pending" from
/// "absent"; relative to the root.
pub const REMOVED: &str = "var/lib/cpushield/boot-removed.json";

/// A boot-half problem; nothing was left half-written.
#[derive(Debug, thiserror::Error)]
pub enum BootError {
    /// The request is not valid; nothing was changed.
    #[error("{0}")]
    Invalid(String),
    /// The machine's bootloader is not one cpushield drives; nothing was changed.
    #[error("the boot half cannot be written here: {bootloader}; {instructions}")]
    Unsupported {
        /// What was found.
        bootloader: String,
        /// What to do by hand.
        instructions: String,
    },
    /// Reading or writing a file, or the bootloader's tool, failed; what
    /// had been written was put back (see `restored`).
    #[error("{what}: {source}{}", if *restored { "; the bootloader's files were put back as before" } else { "" })]
    Failed {
        /// What was being done.
        what: String,
        /// Whether the previous files were restored.
        restored: bool,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The record cannot be read or written.
    #[error(transparent)]
    Journal(#[from] journal::JournalError),
    /// Not root; nothing was changed.
    #[error(transparent)]
    NotRoot(#[from] crate::shield::ShieldError),
}

/// The boot options wanted for a shield.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootWant {
    /// The CPUs isolated at boot: the shield's CPUs and their hyper-thread siblings.
    pub cpus: CpuSet,
    /// The CPUs left for interrupts and kernel work (`irqaffinity=`).
    pub housekeeping: CpuSet,
    /// The options, in order: cpushield's four, then the config's extra ones.
    pub options: Vec<String>,
}

/// The keys cpushield sets itself; an extra option may not set them again.
const OWN_KEYS: [&str; 4] = ["isolcpus", "nohz_full", "rcu_nocbs", "irqaffinity"];

/// The boot options for shielding `cpus` (siblings added as `boot-args`
/// does) plus `extra` ones. Refuses an extra option that is not one
/// command-line word, or that sets one of cpushield's own keys.
pub fn want(
    cpus: &CpuSet,
    sibling_groups: &[CpuSet],
    online: &CpuSet,
    extra: &[String],
) -> Result<BootWant, BootError> {
    let advice = args::boot_args(cpus, sibling_groups, online);
    if advice.housekeeping.is_empty() {
        return Err(BootError::Invalid(format!(
            "boot: isolating CPUs {} leaves no CPU for housekeeping (online: {online})",
            advice.isolated
        )));
    }
    check_extra(extra)?;
    let mut options = advice.args.clone();
    for o in extra {
        if !options.contains(o) {
            options.push(o.clone());
        }
    }
    Ok(BootWant {
        cpus: advice.isolated,
        housekeeping: advice.housekeeping,
        options,
    })
}

/// Checks extra boot options: each one command-line word that does not set
/// one of cpushield's own keys.
pub fn check_extra(extra: &[String]) -> Result<(), BootError> {
    for o in extra {
        let key = o.split('=').next().unwrap_or_default();
        let plain = !o.is_empty()
            && o.chars().all(|c| {
                c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '=' | ',' | '.' | ':' | '/')
            });
        if !plain || key.is_empty() {
            return Err(BootError::Invalid(format!(
                "boot: option {} is not one kernel command line word: give NAME or NAME=VALUE of letters, digits and _-=,.:/ (e.g. \"skew_tick=1\")",
                crate::input::quote(o)
            )));
        }
        if OWN_KEYS.contains(&key) {
            return Err(BootError::Invalid(format!(
                "boot: option {} sets {key}=, which cpushield derives from cpus; leave it out",
                crate::input::quote(o)
            )));
        }
    }
    Ok(())
}

/// [`want`] for `cpus` on this machine (its online CPUs and hyper-thread siblings).
pub fn want_here(sys: &Sys, cpus: &CpuSet, extra: &[String]) -> Result<BootWant, BootError> {
    let online = crate::sys::procfs::online_cpus(sys).map_err(|e| BootError::Failed {
        what: "reading the online CPUs".into(),
        restored: false,
        source: Box::new(e),
    })?;
    let mut groups: Vec<CpuSet> = Vec::new();
    for cpu in cpus.iter() {
        let g = crate::sys::procfs::thread_siblings(sys, cpu);
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    want(cpus, &groups, &online, extra)
}

/// The persistent record of a written boot half.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// What was written.
    pub want: BootWant,
    /// The drop-in file, relative to the root.
    pub dropin: String,
    /// Its content before cpushield first wrote it (`None`: absent).
    pub dropin_before: Option<String>,
    /// The bootloader's generated file, relative to the root.
    pub generated: String,
    /// Its content before cpushield first wrote the drop-in.
    pub generated_before: Option<String>,
    /// False while a write or a removal is under way (a crash leaves it so).
    pub complete: bool,
}

/// What the last removal took out, until the next boot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Removed {
    /// The options taken out.
    pub options: Vec<String>,
    /// The boot it happened in (`/proc/sys/kernel/random/boot_id`).
    pub boot_id: String,
}

/// Where the boot half stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BootState {
    /// Written, and the running kernel booted with every option.
    Active,
    /// Written; the running kernel booted without some of the options.
    PendingReboot,
    /// Taken out; the running kernel still has the options until a reboot.
    RemovalPending,
    /// A write or removal was interrupted: run `apply` or `boot --remove`.
    Interrupted,
    /// Not managed by cpushield, but the kernel was booted with isolation options.
    External,
    /// Nothing: no boot half, no isolation options on the running kernel.
    Absent,
}

impl BootState {
    /// Whether a reboot is needed for the running kernel to match what is written.
    pub fn reboot_pending(self) -> bool {
        matches!(self, BootState::PendingReboot | BootState::RemovalPending)
    }
}

/// What the running kernel booted with, read back.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootFacts {
    /// `/proc/cmdline`.
    pub cmdline: String,
    /// `/proc/sys/kernel/random/boot_id`.
    pub boot_id: String,
    /// `/sys/devices/system/cpu/isolated` (`isolcpus=` domain CPUs).
    pub isolated: CpuSet,
    /// `/sys/devices/system/cpu/nohz_full`.
    pub nohz_full: CpuSet,
}

impl BootFacts {
    /// Reads the facts of the running kernel.
    pub fn read(sys: &Sys) -> BootFacts {
        let list = |rel: &str| {
            sys.read_trimmed(rel)
                .ok()
                .and_then(|s| CpuSet::parse_list(&s).ok())
                .unwrap_or_default()
        };
        BootFacts {
            cmdline: sys.read_trimmed("proc/cmdline").unwrap_or_default(),
            boot_id: sys
                .read_trimmed("proc/sys/kernel/random/boot_id")
                .unwrap_or_default(),
            isolated: list("sys/devices/system/cpu/isolated"),
            nohz_full: list("sys/devices/system/cpu/nohz_full"),
        }
    }

    /// Whether the running command line has `option` as one word.
    pub fn has(&self, option: &str) -> bool {
        self.cmdline.split_whitespace().any(|w| w == option)
    }

    /// The isolation options of the running command line.
    pub fn isolation_options(&self) -> Vec<String> {
        self.cmdline
            .split_whitespace()
            .filter(|w| OWN_KEYS.contains(&w.split('=').next().unwrap_or_default()))
            .map(str::to_string)
            .collect()
    }
}

/// The boot half as `status`, `verify`, `metrics` and `audit` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootStatus {
    /// Where it stands.
    pub state: BootState,
    /// Whether a reboot is needed for the running kernel to match.
    pub reboot_pending: bool,
    /// What cpushield wrote (the record), if anything.
    pub written: Option<BootWant>,
    /// Written options the running kernel did not boot with.
    pub missing: Vec<String>,
    /// Removed options the running kernel still has (until a reboot).
    pub still_running: Vec<String>,
    /// The isolation options of the running command line.
    pub running: Vec<String>,
    /// CPUs isolated at boot (`/sys/devices/system/cpu/isolated`).
    pub isolated: CpuSet,
    /// CPUs without the tick (`/sys/devices/system/cpu/nohz_full`).
    pub nohz_full: CpuSet,
    /// The drop-in file, when one is written.
    pub file: Option<String>,
}

/// Judges the boot half from its record, the last removal and the running
/// kernel's facts. Pure.
pub fn judge(record: Option<&Record>, removed: Option<&Removed>, facts: &BootFacts) -> BootStatus {
    let running = facts.isolation_options();
    let mut missing = Vec::new();
    let mut still_running = Vec::new();
    let state = match record {
        Some(r) if !r.complete => BootState::Interrupted,
        Some(r) => {
            missing = r
                .want
                .options
                .iter()
                .filter(|o| !facts.has(o))
                .cloned()
                .collect();
            if missing.is_empty() {
                BootState::Active
            } else {
                BootState::PendingReboot
            }
        }
        None => {
            if let Some(rm) = removed.filter(|rm| rm.boot_id == facts.boot_id) {
                still_running = rm
                    .options
                    .iter()
                    .filter(|o| facts.has(o))
                    .cloned()
                    .collect();
            }
            if !still_running.is_empty() {
                BootState::RemovalPending
            } else if !running.is_empty()
                || !facts.isolated.is_empty()
                || !facts.nohz_full.is_empty()
            {
                BootState::External
            } else {
                BootState::Absent
            }
        }
    };
    BootStatus {
        state,
        reboot_pending: state.reboot_pending(),
        written: record.map(|r| r.want.clone()),
        missing,
        still_running,
        running,
        isolated: facts.isolated.clone(),
        nohz_full: facts.nohz_full.clone(),
        file: record.map(|r| r.dropin.clone()),
    }
}

/// Reads the record, the last removal and the running kernel, and judges.
pub fn status(sys: &Sys) -> Result<BootStatus, BootError> {
    Ok(judge(
        read_record(sys)?.as_ref(),
        read_json::<Removed>(sys, REMOVED)?.as_ref(),
        &BootFacts::read(sys),
    ))
}

/// The record, if a boot half was written.
pub fn read_record(sys: &Sys) -> Result<Option<Record>, BootError> {
    read_json(sys, RECORD)
}

fn read_json<T: serde::de::DeserializeOwned>(sys: &Sys, rel: &str) -> Result<Option<T>, BootError> {
    let path = sys.path(rel);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).map(Some).map_err(|e| {
            journal::JournalError::Damaged {
                path,
                reason: e.to_string(),
            }
            .into()
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(journal::JournalError::Io { path, source }.into()),
    }
}

fn write_json<T: Serialize>(sys: &Sys, rel: &str, value: &T) -> Result<(), BootError> {
    let path = sys.path(rel);
    let text = serde_json::to_string_pretty(value).expect("records serialise");
    journal::write_durable(&path, format!("{text}\n").as_bytes())?;
    Ok(())
}

/// Removes a record; its directory too when that is then empty.
fn remove_file(sys: &Sys, rel: &str) -> Result<(), BootError> {
    let path = sys.path(rel);
    match std::fs::remove_file(&path) {
        Ok(()) => {
            if let Some(dir) = path.parent() {
                let _ = std::fs::remove_dir(dir);
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(journal::JournalError::Io { path, source }.into()),
    }
}

/// What a boot-half change did (or, in a dry run, would do).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BootChange {
    /// `written`, `unchanged`, `removed`, `nothing` (none was written and none is wanted).
    pub action: BootAction,
    /// Whether this was a dry run (nothing changed).
    pub dry_run: bool,
    /// The bootloader driven.
    pub bootloader: Option<String>,
    /// The drop-in file.
    pub file: Option<String>,
    /// Its new content (`None`: removed, or restored to what it held before).
    pub content: Option<String>,
    /// The bootloader's command run (or to run).
    pub command: Vec<String>,
    /// After a removal: whether the generated file is byte-identical to
    /// what it was before cpushield first wrote (`false`: something else,
    /// such as a kernel update, changed it meanwhile).
    pub generated_identical: Option<bool>,
    /// Where the boot half stands afterwards, read back.
    pub status: Option<BootStatus>,
}

/// The kind of [`BootChange`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BootAction {
    /// The drop-in was written and the bootloader's configuration regenerated.
    Written,
    /// What is written is what is wanted.
    Unchanged,
    /// The drop-in was taken out and the configuration regenerated.
    Removed,
    /// None was written and none is wanted.
    Nothing,
}

/// Checks, before anything is changed, that `want` can be written on this
/// machine: its bootloader is one cpushield drives.
pub fn check(sys: &Sys, want: &BootWant) -> Result<grub::Grub, BootError> {
    grub::detect(sys, &want.options)
}

impl Record {
    /// The record written before the files change: the new `want`,
    /// incomplete, and what the files held before cpushield ever wrote
    /// them (kept from the `old` record when there is one).
    fn before_writing(
        sys: &Sys,
        want: &BootWant,
        grub: &grub::Grub,
        old: Option<&Record>,
    ) -> Record {
        Record {
            want: want.clone(),
            dropin: grub.dropin.clone(),
            dropin_before: match old {
                Some(r) => r.dropin_before.clone(),
                None => sys.read(&grub.dropin).ok(),
            },
            generated: grub.generated.clone(),
            generated_before: match old {
                Some(r) => r.generated_before.clone(),
                None => sys.read(&grub.generated).ok(),
            },
            complete: false,
        }
    }
}

/// Writes the drop-in (`content`), regenerates grub.cfg and reads it back:
/// every normal kernel line must carry the wanted options.
fn write_and_regenerate(
    sys: &Sys,
    grub: &grub::Grub,
    want: &BootWant,
    content: &str,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    sys.write_config(&grub.dropin, content, true)?;
    grub.regenerate(sys)?;
    if grub::generated_has(sys, &grub.generated, &want.options) {
        return Ok(());
    }
    Err(format!(
        "{} ran, but /{} does not have {} on its kernel lines (does a later file in /etc/default/grub.d set GRUB_CMDLINE_LINUX_DEFAULT without keeping its value?)",
        grub.command.join(" "),
        grub.generated,
        want.options.join(" ")
    )
    .into())
}

/// Brings the boot half to `want` (`None`: none): writes, rewrites or
/// removes the drop-in and regenerates the bootloader's configuration.
/// Takes the journal's lock.
pub fn apply(sys: &Sys, want: Option<&BootWant>, dry_run: bool) -> Result<BootChange, BootError> {
    let Some(want) = want else {
        return remove(sys, dry_run);
    };
    let grub = check(sys, want)?;
    let _lock = if dry_run {
        None
    } else {
        crate::shield::require_root(sys, "apply")?;
        Some(journal::lock(sys)?)
    };
    let old = read_record(sys)?;
    let content = grub::dropin_text(want);
    let unchanged = old.as_ref().is_some_and(|r| {
        r.complete
            && r.want == *want
            && sys.read(&r.dropin).ok().as_deref() == Some(content.as_str())
            && grub::generated_has(sys, &r.generated, &want.options)
    });
    let mut change = BootChange {
        action: if unchanged {
            BootAction::Unchanged
        } else {
            BootAction::Written
        },
        dry_run,
        bootloader: Some(grub.name()),
        file: Some(grub.dropin.clone()),
        content: Some(content.clone()),
        command: grub.command.clone(),
        generated_identical: None,
        status: None,
    };
    if unchanged || dry_run {
        if !dry_run {
            change.status = Some(status(sys)?);
        }
        return Ok(change);
    }
    // The record first: what the files held before cpushield ever wrote
    // them (kept from an earlier record), and the new want, incomplete.
    let record = Record::before_writing(sys, want, &grub, old.as_ref());
    write_json(sys, RECORD, &record)?;
    let written = write_and_regenerate(sys, &grub, want, &content);
    if let Err(source) = written {
        // Put back what was there: the previous record's drop-in, or the
        // user's file (or none), and the previous record.
        let back = old
            .as_ref()
            .filter(|r| r.complete)
            .map(|r| grub::dropin_text(&r.want))
            .or(record.dropin_before.clone());
        let restored = restore_dropin(sys, &grub, back.as_deref()).is_ok();
        match &old {
            Some(r) => write_json(sys, RECORD, r)?,
            None => remove_file(sys, RECORD)?,
        }
        return Err(BootError::Failed {
            what: format!("writing the boot options into /{}", grub.dropin),
            restored,
            source,
        });
    }
    write_json(
        sys,
        RECORD,
        &Record {
            complete: true,
            ..record
        },
    )?;
    remove_file(sys, REMOVED)?;
    change.status = Some(status(sys)?);
    Ok(change)
}

fn restore_dropin(
    sys: &Sys,
    grub: &grub::Grub,
    content: Option<&str>,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    match content {
        Some(text) => sys.write_config(&grub.dropin, text, true)?,
        None => sys.remove_config(&grub.dropin, false)?,
    }
    grub.regenerate(sys)
}

/// Takes the boot half out: the drop-in goes back to what it was before
/// cpushield (usually: no file), the bootloader's configuration is
/// regenerated, the record is removed. Nothing to do without a record.
pub fn remove(sys: &Sys, dry_run: bool) -> Result<BootChange, BootError> {
    let _lock = if dry_run {
        None
    } else {
        crate::shield::require_root(sys, "boot --remove")?;
        Some(journal::lock(sys)?)
    };
    let Some(record) = read_record(sys)? else {
        return Ok(BootChange {
            action: BootAction::Nothing,
            dry_run,
            bootloader: None,
            file: None,
            content: None,
            command: Vec::new(),
            generated_identical: None,
            status: if dry_run { None } else { Some(status(sys)?) },
        });
    };
    let grub = grub::Grub::at(&record.dropin, &record.generated);
    let mut change = BootChange {
        action: BootAction::Removed,
        dry_run,
        bootloader: Some(grub.name()),
        file: Some(record.dropin.clone()),
        content: record.dropin_before.clone(),
        command: grub.command.clone(),
        generated_identical: None,
        status: None,
    };
    if dry_run {
        return Ok(change);
    }
    write_json(
        sys,
        RECORD,
        &Record {
            complete: false,
            ..record.clone()
        },
    )?;
    restore_dropin(sys, &grub, record.dropin_before.as_deref()).map_err(|source| {
        BootError::Failed {
            what: format!(
                "removing /{} (run 'cpushield boot --remove' again)",
                record.dropin
            ),
            restored: false,
            source,
        }
    })?;
    let facts = BootFacts::read(sys);
    write_json(
        sys,
        REMOVED,
        &Removed {
            options: record.want.options.clone(),
            boot_id: facts.boot_id,
        },
    )?;
    remove_file(sys, RECORD)?;
    change.generated_identical = Some(sys.read(&record.generated).ok() == record.generated_before);
    change.status = Some(status(sys)?);
    Ok(change)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpus(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    fn want_23() -> BootWant {
        want(&cpus("2-3"), &[cpus("2"), cpus("3")], &cpus("0-3"), &[]).unwrap()
    }

    fn facts(cmdline: &str) -> BootFacts {
        BootFacts {
            cmdline: cmdline.into(),
            boot_id: "b1".into(),
            ..Default::default()
        }
    }

    fn record(complete: bool) -> Record {
        Record {
            want: want_23(),
            dropin: grub::DROPIN.into(),
            dropin_before: None,
            generated: grub::GENERATED.into(),
            generated_before: Some("old".into()),
            complete,
        }
    }

    #[test]
    fn want_adds_extra_options_and_refuses_bad_ones() {
        let w = want(
            &cpus("2-3"),
            &[cpus("2"), cpus("3")],
            &cpus("0-3"),
            &["skew_tick=1".into(), "rcu_nocb_poll".into()],
        )
        .unwrap();
        assert_eq!(
            w.options.join(" "),
            "isolcpus=managed_irq,2-3 nohz_full=2-3 rcu_nocbs=2-3 irqaffinity=0-1 skew_tick=1 rcu_nocb_poll"
        );
        assert_eq!(w.housekeeping, cpus("0-1"));
        for bad in ["nohz_full=1", "a b", "x=\"$(reboot)\"", ""] {
            let e = want(&cpus("2-3"), &[], &cpus("0-3"), &[bad.into()]).unwrap_err();
            assert!(e.to_string().contains("boot: option"), "{bad}: {e}");
        }
        let e = want(&cpus("0-3"), &[], &cpus("0-3"), &[]).unwrap_err();
        assert!(e.to_string().contains("no CPU for housekeeping"), "{e}");
    }

    #[test]
    fn want_isolates_hyper_thread_siblings_too() {
        let w = want(&cpus("2"), &[cpus("2,6")], &cpus("0-7"), &[]).unwrap();
        assert_eq!(w.cpus, cpus("2,6"));
        assert!(w.options.contains(&"nohz_full=2,6".to_string()));
        assert!(w.options.contains(&"irqaffinity=0-1,3-5,7".to_string()));
    }

    #[test]
    fn judged_pending_until_the_kernel_booted_with_every_option() {
        let r = record(true);
        let s = judge(Some(&r), None, &facts("ro quiet nohz_full=2-3"));
        assert_eq!(s.state, BootState::PendingReboot);
        assert!(s.reboot_pending);
        assert_eq!(s.missing.len(), 3, "{:?}", s.missing);
        let line = format!("BOOT_IMAGE=/vmlinuz ro {}", r.want.options.join(" "));
        let s = judge(Some(&r), None, &facts(&line));
        assert_eq!(s.state, BootState::Active);
        assert!(!s.reboot_pending && s.missing.is_empty());
        // A different value of the same key is not the option.
        let s = judge(
            Some(&r),
            None,
            &facts(&line.replace("nohz_full=2-3", "nohz_full=3")),
        );
        assert_eq!(s.state, BootState::PendingReboot);
        assert_eq!(s.missing, vec!["nohz_full=2-3".to_string()]);
        assert_eq!(
            judge(Some(&record(false)), None, &facts(&line)).state,
            BootState::Interrupted
        );
    }

    #[test]
    fn judged_removal_pending_until_the_next_boot_then_absent() {
        let removed = Removed {
            options: want_23().options,
            boot_id: "b1".into(),
        };
        let line = format!("ro {}", removed.options.join(" "));
        let s = judge(None, Some(&removed), &facts(&line));
        assert_eq!(s.state, BootState::RemovalPending);
        assert!(s.reboot_pending);
        assert_eq!(
            judge(None, Some(&removed), &facts("ro quiet")).state,
            BootState::Absent
        );
        // Another boot with the same options: someone else's isolation now.
        let mut next = facts(&line);
        next.boot_id = "b2".into();
        assert_eq!(
            judge(None, Some(&removed), &next).state,
            BootState::External
        );
        assert_eq!(
            judge(None, None, &facts("ro quiet")).state,
            BootState::Absent
        );
    }
}
