//! How a component judges what it read back of the shield for `status`:
//! each reads what it needs in its `status` hook (kernel files, a
//! process, the threads, the journal's writes: what it needs differs),
//! and what it read judges itself, pure, as findings.

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
