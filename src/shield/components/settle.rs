//! What moved while the shield's plan was applied, settled by the
//! components after it (see [`crate::shield::component::Settles::settle`]): tasks forked meanwhile,
//! IRQs placed anew by a CPU's hotplug or by irqbalance's restart.

use std::sync::atomic::AtomicBool;

use super::{EFFECTS, ORDER};
use crate::shield::apply::{Applied, ApplyError};
#[cfg(doc)]
use crate::shield::component::Component;
use crate::shield::component::Settling;
use crate::shield::journal::{Journal, State};
use crate::shield::note::Note;
use crate::shield::parts::OwnFacts;
use crate::shield::plan::Plan;
use crate::shield::request::Request;
use crate::shield::snapshot::Snapshot;
use crate::sys::Sys;

/// What the components settled after a plan was applied.
pub(in crate::shield) struct Settled {
    /// The machine after.
    pub after: Snapshot,
    /// What each component moved again, under its name.
    pub parts: OwnFacts,
    /// What the user should know of it.
    pub notes: Vec<Note>,
}

/// Settles what moved while `plan` (made from `snap` for `req`) was
/// applied, each component in [`ORDER`] (for a change of the shield
/// `in_place`, with the shield before); then reads the machine after,
/// unless a component did.
pub(in crate::shield) fn settle(
    sys: &Sys,
    (snap, plan, _): (&Snapshot, &Plan, &Request),
    in_place: Option<&State>,
    journal: &mut Journal,
    stop: &AtomicBool,
    applied: &mut Applied,
) -> Result<Settled, ApplyError> {
    let mut cx = Settling {
        sys,
        fx: EFFECTS,
        before: snap,
        plan,
        in_place,
        journal,
        stop,
        applied,
        after: None,
        moved: OwnFacts::default(),
        notes: Vec::new(),
    };
    for part in ORDER {
        if let Some(part) = part.settles() {
            part.settle(&mut cx)?;
        }
    }
    let after = match cx.after.take() {
        Some(after) => after,
        None => Snapshot::reread(sys, snap)?,
    };
    Ok(Settled {
        after,
        parts: cx.moved,
        notes: cx.notes,
    })
}
