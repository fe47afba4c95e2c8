//! `on`'s report: what the shield did, as the kernel and the other
//! programs left it (read back), each component's part in its own words
//! ([`PartReport`]); the components compose it (`components::report`).

use serde::{Deserialize, Serialize};

use super::change::{Refusal, Step};
use super::note::Note;
use super::parts::{MachineWide, PartReport};
use super::timings::Timings;
use crate::cpulist::CpuSet;

/// The result of `on`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OnReport {
    /// Only planned, nothing changed.
    pub dry_run: bool,
    /// Shielded CPUs.
    pub shield: CpuSet,
    /// Housekeeping CPUs.
    pub housekeeping: CpuSet,
    /// Mechanism.
    pub mechanism: String,
    /// The partition as it reads back (v2).
    pub partition: Option<String>,
    /// Number of planned changes.
    pub planned: usize,
    /// Changes made.
    pub changed: usize,
    /// Non-fatal refusals no component reports as its own (the workqueue
    /// mask, a knob's file, ...).
    pub other_refused: Vec<Refusal>,
    /// What the user should know.
    pub notes: Vec<Note>,
    /// The shield before, when an active shield was changed in place.
    #[serde(default)]
    pub changed_from: Option<CpuSet>,
    /// What the plan changes machine-wide, beyond the shielded CPUs, each
    /// with how to do without it (always in `--json`: empty when nothing).
    #[serde(default)]
    pub machine_wide: Vec<MachineWide>,
    /// What each component did, read back (planned, for a dry run), in the
    /// order they plan: irqbalance's ban, the threads and IRQs moved off
    /// the shield, the kernel threads raised, the cache share, ...
    #[serde(default)]
    pub parts: Vec<PartReport>,
    /// The plan, with `--dry-run` (printed, not read back from a report).
    #[serde(default, skip_deserializing)]
    pub plan: Option<Vec<Step>>,
    /// How long it took, by phase, in ms (`took_ms` in JSON; filled in by [`crate::shield::on`]).
    #[serde(default, rename = "took_ms", alias = "took")]
    pub took: Timings,
}

impl OnReport {
    /// What `component` said of what it did, when it said anything.
    pub fn part(&self, component: &str) -> Option<&PartReport> {
        self.parts.iter().find(|p| p.component == component)
    }
}
