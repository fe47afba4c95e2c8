//! The plan of a shield: the list of changes it needs, and what else the
//! components found while planning (made by [`crate::shield::components::plan`],
//! a pure function from snapshot and request; `--dry-run` prints it), and
//! the check of the request's CPUs every plan starts with.

use serde::Serialize;

use super::change::Step;
use super::note::Note;
use super::owners::Owners;
pub use super::plan_error::PlanError;
use super::request::Request;
use super::snapshot::Snapshot;
use crate::cpulist::CpuSet;

/// The full plan of a shield.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    /// Shielded CPUs.
    pub shield: CpuSet,
    /// Housekeeping CPUs: online minus shield.
    pub housekeeping: CpuSet,
    /// Mechanism name.
    pub mechanism: String,
    /// Partition type written (v2): `isolated`.
    pub partition: Option<String>,
    /// The shield's cgroup directory, relative to the root.
    pub shield_dir: String,
    /// Changes, in order.
    pub steps: Vec<Step>,
    /// Things the user should know.
    pub notes: Vec<Note>,
    /// What each component planned beyond its steps, under its name (see
    /// [`super::parts::OwnFacts`]): the tasks kept and split off, the IRQs
    /// bound to the shield, the idle states' bound, ...
    #[serde(default, skip_serializing_if = "super::parts::OwnFacts::is_empty")]
    pub parts: super::parts::OwnFacts,
    /// What components publish for each other while they plan (see
    /// [`super::facts`]); not kept.
    #[serde(skip)]
    pub facts: super::facts::Facts,
}

impl Plan {
    /// A plan of no step yet for the `valid` request.
    pub(in crate::shield) fn new(valid: &Valid) -> Plan {
        Plan {
            shield: valid.shield.clone(),
            housekeeping: valid.housekeeping.clone(),
            mechanism: String::new(),
            partition: None,
            shield_dir: String::new(),
            steps: Vec::new(),
            notes: valid.notes.clone(),
            parts: Default::default(),
            facts: Default::default(),
        }
    }
}

/// A request whose CPUs fit the machine.
pub(in crate::shield) struct Valid {
    /// The shielded CPUs.
    pub shield: CpuSet,
    /// The online CPUs left for housekeeping.
    pub housekeeping: CpuSet,
    /// What the user should know of the CPUs asked for.
    pub notes: Vec<Note>,
}

/// Checks the request's CPUs against the machine: present and online, one
/// left for housekeeping, siblings whole (or allowed split). Each component
/// checks its own part of the request (IRQs and knobs known, hotplug
/// possible: [`crate::shield::components::ORDER`]).
pub(in crate::shield) fn validate(snap: &Snapshot, req: &Request) -> Result<Valid, PlanError> {
    let shield = req.cpus.clone();
    let missing = shield.difference(&snap.present);
    if !missing.is_empty() {
        return Err(PlanError::NotPresent {
            cpus: shield,
            missing,
            present: snap.present.clone(),
        });
    }
    let offline = shield.difference(&snap.online);
    if !offline.is_empty() {
        return Err(PlanError::Offline {
            cpus: shield,
            offline,
            online: snap.online.clone(),
        });
    }
    let housekeeping = snap.online.difference(&shield);
    if housekeeping.is_empty() {
        return Err(PlanError::NoHousekeeping {
            cpus: shield,
            online: snap.online.clone(),
        });
    }
    let split: Vec<&CpuSet> = snap
        .sibling_groups
        .iter()
        .filter(|g| g.intersects(&shield) && !g.is_subset(&shield))
        .collect();
    let mut notes = Vec::new();
    if !split.is_empty() {
        let detail = split
            .iter()
            .map(|g| g.to_string())
            .collect::<Vec<_>>()
            .join("; ");
        let suggest = split.iter().fold(shield.clone(), |acc, g| acc.union(g));
        if !req.allow_split_siblings {
            return Err(PlanError::SplitSiblings {
                cpus: shield,
                detail,
                suggest,
            });
        }
        notes.push(Note::SplitSiblings {
            groups: split.into_iter().cloned().collect(),
        });
    }
    Ok(Valid {
        shield,
        housekeeping,
        notes,
    })
}

/// A tuned profile that pins CPUs or IRQs fights any shield it did not make.
/// What it sets that cpushield sets too is named with the profile that
/// sets it, through the whole include chain.
pub fn tuned_notes(owners: &Owners) -> Vec<Note> {
    let mut notes = Vec::new();
    let Some(t) = owners.tuned.as_ref().filter(|t| t.running) else {
        return notes;
    };
    if !t.pins.is_empty() {
        notes.push(Note::TunedPins {
            profile: t.profile.clone(),
            pins: t.pins.clone(),
        });
    }
    if !t.overlaps.is_empty() {
        notes.push(Note::TunedOverlaps {
            profile: t.profile.clone(),
            chain: t.chain.clone(),
            settings: t.overlaps.clone(),
        });
    }
    notes
}
