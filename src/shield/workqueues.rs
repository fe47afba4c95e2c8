//! The unbound workqueues' CPU mask: kept off the shield, so that no
//! unbound kernel work item runs there.

use super::change::{Action, Check, Owner, Step, Undo};
use super::snapshot::{Snapshot, WORKQUEUE_MASK};
use crate::cpulist::CpuSet;

/// Unbound workqueues off the shield, when their mask reaches it.
pub(super) fn plan(snap: &Snapshot, shield: &CpuSet, housekeeping: &CpuSet) -> Option<Step> {
    let mask = snap.workqueue_mask.as_ref()?;
    let bits = snap.mask_bits();
    mask.intersects(shield).then(|| {
        Step::optional(
            Owner::Workqueues,
            Action::Write {
                path: WORKQUEUE_MASK.into(),
                value: mask.away_from(shield, housekeeping).to_mask(bits),
                check: Check::CpuMask,
                // 6.12 reads the mask without the partition's CPUs once
                // the partition exists; writing that back would make the
                // reduced mask the request for good. Restore the mask
                // read before the partition.
                undo: Undo::Value(mask.to_mask(bits)),
            },
        )
    })
}
