//! The read half of the shield, composed: the machine as each component
//! reads it for a request.

use std::collections::HashSet;

use crate::shield::error::ShieldError;
use crate::shield::request::Request;
use crate::shield::snapshot::{in_shield_cgroup, Snapshot};
use crate::sys::procfs;
use crate::sys::Sys;

/// Reads the snapshot, with what each component observes for itself
/// whatever the request (every snapshot of `on`, a change in place and
/// `status`).
pub(in crate::shield) fn observed(sys: &Sys) -> Result<Snapshot, ShieldError> {
    let mut snap = Snapshot::read(sys, &super::tuned_overlap)?;
    let mut facts = crate::shield::parts::OwnFacts::default();
    for part in super::ORDER {
        part.observe(sys, &snap, &mut facts);
    }
    snap.parts.extend(facts);
    Ok(snap)
}

/// Reads the snapshot, with what each component reads for itself for
/// `req` (the files of the tuning knobs it asks for, ...).
pub(in crate::shield) fn snapshot_for(sys: &Sys, req: &Request) -> Result<Snapshot, ShieldError> {
    let mut snap = observed(sys)?;
    // Names and flags of the threads a plan may change or report: those on
    // the shield, except the ones the partition moves by itself.
    let shield = &req.cpus;
    let left: HashSet<i32> = snap
        .threads
        .iter()
        .filter(|t| !t.cpus_allowed.is_subset(shield) && snap.left_to_the_partition(t))
        .map(|t| t.tid)
        .collect();
    procfs::read_stats(sys, &mut snap.threads, |t| {
        in_shield_cgroup(&t.cgroup) || (t.cpus_allowed.intersects(shield) && !left.contains(&t.tid))
    });
    for part in super::ORDER {
        part.read(sys, req, &mut snap.parts)?;
    }
    Ok(snap)
}
