//! The boot half as it stands: the record judged against what the running
//! kernel booted with and what the bootloader's files hold now (pure, over
//! facts read once).

use serde::{Deserialize, Serialize};

use super::record::{read_json, read_record, Record, Removed, REMOVED};
use super::{bls, uki, Backend, BootError, BootWant, OWN_KEYS};
use crate::cpulist::CpuSet;
use crate::sys::Sys;

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
    #[serde(with = "crate::json_null::cpus")]
    pub isolated: CpuSet,
    /// `/sys/devices/system/cpu/nohz_full`.
    #[serde(with = "crate::json_null::cpus")]
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
    #[serde(with = "crate::json_null::cpus")]
    pub isolated: CpuSet,
    /// CPUs without the tick (`/sys/devices/system/cpu/nohz_full`).
    #[serde(with = "crate::json_null::cpus")]
    pub nohz_full: CpuSet,
    /// The first file written (the drop-in on Debian), when one is.
    pub file: Option<String>,
    /// The bootloader written through.
    pub bootloader: Option<String>,
    /// Every file written.
    pub files: Vec<String>,
    /// The user's options that set one of cpushield's keys, left out when written.
    pub replaced: Vec<String>,
    /// Isolation options on the running command line that set one of
    /// cpushield's keys to another value (the kernel may take the first).
    pub conflicting: Vec<String>,
    /// Written in an earlier boot, yet the running kernel lacks options:
    /// the bootloader did not use what cpushield wrote, and the likely why.
    pub not_taken: Option<String>,
    /// Files written that no longer hold what cpushield wrote (a kernel
    /// update, `grubby`, an edit): see `cpushield boot` and run `apply`.
    pub drift: Vec<String>,
}

/// Judges the boot half from its record, the last removal and the running
/// kernel's facts. Pure.
pub fn judge(record: Option<&Record>, removed: Option<&Removed>, facts: &BootFacts) -> BootStatus {
    let running = facts.isolation_options();
    let mut missing = Vec::new();
    let mut still_running = Vec::new();
    let mut conflicting = Vec::new();
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
            conflicting = running
                .iter()
                .filter(|o| !r.want.options.contains(o))
                .cloned()
                .collect();
            if missing.is_empty() && conflicting.is_empty() {
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
        file: record.and_then(|r| r.files.first()).map(|f| f.path.clone()),
        bootloader: record.map(|r| r.backend.describe().to_string()),
        files: record
            .map(|r| {
                r.files
                    .iter()
                    .map(|f| f.path.clone())
                    .chain(r.made.iter().map(|m| m.path.clone()))
                    .collect()
            })
            .unwrap_or_default(),
        replaced: record.map(|r| r.replaced.clone()).unwrap_or_default(),
        conflicting,
        not_taken: record
            .filter(|r| {
                state == BootState::PendingReboot
                    && !r.boot_id.is_empty()
                    && r.boot_id != facts.boot_id
            })
            .map(|r| not_taken_why(r.backend).to_string()),
        drift: Vec::new(),
    }
}

/// Why a bootloader may have booted without what cpushield wrote.
pub(super) fn not_taken_why(backend: Backend) -> &'static str {
    match backend {
        Backend::DebianGrub | Backend::GrubMkconfig => {
            "GRUB booted an entry without them: GRUB_DEFAULT or a saved entry picks another one, or grub.cfg was regenerated since"
        }
        Backend::Bls | Backend::SystemdBoot => {
            "the entry booted is not one cpushield edited: a kernel installed since, or another default entry"
        }
        Backend::UkiAddon => {
            "systemd-stub did not apply the addon: Secure Boot rejected it, the image was started from another partition, or the addon's .uname differs"
        }
    }
}

/// Reads the record, the last removal and the running kernel, and judges.
pub fn status(sys: &Sys) -> Result<BootStatus, BootError> {
    let record = read_record(sys)?;
    let mut s = judge(
        record.as_ref(),
        read_json::<Removed>(sys, REMOVED)?.as_ref(),
        &BootFacts::read(sys),
    );
    if let Some(r) = record.filter(|r| r.complete) {
        s.drift = drift(sys, &r);
    }
    Ok(s)
}

/// The files of `record` that no longer hold what cpushield wrote.
pub(super) fn drift(sys: &Sys, record: &Record) -> Vec<String> {
    record
        .files
        .iter()
        .filter_map(|f| {
            let path = bls::find_entry(sys, &f.path).unwrap_or_else(|| f.path.clone());
            (sys.read(&path).ok().as_deref() != Some(f.written.as_str()))
                .then(|| format!("/{path}"))
        })
        .chain(
            record
                .made
                .iter()
                .filter(|m| {
                    std::fs::read(sys.path(&m.path)).map_or(true, |d| uki::sha256(&d) != m.sha256)
                })
                .map(|m| format!("/{}", m.path)),
        )
        .collect()
}
