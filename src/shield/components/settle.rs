//! What moved while the shield's plan was applied, settled by the
//! components after it: IRQs placed anew by a CPU's hotplug or by
//! irqbalance's restart, and tasks forked meanwhile.

use std::sync::atomic::AtomicBool;

use super::EFFECTS;
use crate::shield::apply::{Applied, ApplyError};
use crate::shield::journal::{Journal, State};
use crate::shield::note::Note;
use crate::shield::parts::OwnFacts;
use crate::shield::plan::Plan;
use crate::shield::request::Request;
use crate::shield::snapshot::Snapshot;
use crate::shield::{irqs, tasks};
use crate::sys::Sys;

/// What the components settled after a plan was applied.
pub(in crate::shield) struct Settled {
    /// The machine after.
    pub after: Snapshot,
    /// What each component moved again, under its name (the IRQs, in the
    /// order moved).
    pub parts: OwnFacts,
    /// What the user should know of it.
    pub notes: Vec<Note>,
}

/// Settles what moved while `plan` (made from `snap` for `req`) was
/// applied: with `--hotplug-restart`, IRQs the kernel placed anew as the
/// shield's CPUs came back online; tasks forked meanwhile; and, for a
/// change of the shield `in_place`, IRQs that came back onto it while it
/// changed (irqbalance placing IRQs anew at its restart, seen on Debian
/// 13). Each move goes through the journal.
pub(in crate::shield) fn settle(
    sys: &Sys,
    (snap, plan, req): (&Snapshot, &Plan, &Request),
    in_place: Option<&State>,
    journal: &mut Journal,
    stop: &AtomicBool,
    applied: &mut Applied,
) -> Result<Settled, ApplyError> {
    let cpus = (&plan.shield, &plan.housekeeping);
    let respread = match req.hotplug_restart {
        true => irqs::sweep(
            (sys, EFFECTS),
            cpus,
            &plan.irqs_to_shield,
            journal,
            stop,
            applied,
        )?,
        false => Vec::new(),
    };
    let tasks = (&plan.shield, &plan.housekeeping, &plan.kept[..]);
    let after = tasks::forked::sweep_forked((sys, EFFECTS), snap, tasks, journal, stop, applied)?;
    let came_back = match in_place {
        Some(state) => {
            let skip = [plan.irqs_to_shield.clone(), irqs::kept(state)].concat();
            irqs::sweep((sys, EFFECTS), cpus, &skip, journal, stop, applied)?
        }
        None => Vec::new(),
    };
    let mut notes = Vec::new();
    if !came_back.is_empty() {
        notes.push(Note::IrqsBackAfterChange {
            irqs: came_back.clone(),
        });
    }
    if !respread.is_empty() {
        notes.push(Note::IrqsBackAfterHotplug {
            irqs: respread.clone(),
        });
    }
    let mut parts = OwnFacts::default();
    parts.put(irqs::OWNER.name(), &[came_back, respread].concat());
    Ok(Settled {
        after,
        parts,
        notes,
    })
}
