//! The one interface every component of a shield answers for `status`
//! (the cgroup mechanism, irqbalance's ban, the tasks, the IRQs, the
//! knobs): each reads back what it needs once, by its own `read_hold`
//! (what it needs differs: kernel files, irqbalance's process, the
//! threads, the IRQs, the journal's knob writes), and what it read judges
//! itself, pure, as findings.

use super::journal::State;
use crate::finding::Finding;

/// What a component of the shield read back of itself, that can tell
/// whether it still holds.
pub(in crate::shield) trait Holds {
    /// What no longer holds for the shield `state`: one `bad` finding per
    /// check that fails, with `repair` as its next step unless the
    /// component knows a better one. Pure.
    fn lost(&self, state: &State, repair: &str) -> Vec<Finding>;
}
