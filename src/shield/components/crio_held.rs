//! The undo of a shield's write of a CPU's file that CRI-O's
//! high-performance hook holds for a running pod (see [`crate::crio`]):
//! the CPU's file is left to the hook, and the value from before the
//! shield goes into the hook's saved value, which CRI-O writes back when
//! the pod stops. Shared by the components that write such files (idle
//! states' PM QoS, the governor knob).

use crate::crio::{self, HandedOver};
use crate::shield::apply::Refusal;
use crate::shield::change::{Action, Undo};
use crate::shield::journal::Entry;
use crate::shield::undo::Undone;
use crate::sys::Sys;

/// Undoes `entry` when it is a write of a file CRI-O's hook holds with the
/// shield's value saved; false when the engine's plain undo applies.
pub(in crate::shield) fn undo(sys: &Sys, entry: &Entry, out: &mut Undone) -> bool {
    let (
        Action::Write {
            path,
            value,
            undo: Undo::Previous,
            ..
        },
        Some(previous),
    ) = (&entry.action, &entry.previous)
    else {
        return false;
    };
    match crio::hand_over(sys, path, value, previous) {
        None | Some(Ok(HandedOver::NotOurs)) => false,
        Some(Ok(HandedOver::Saved(save))) => {
            out.left_in_use.push(Refusal {
                target: format!("/{path}"),
                reason: format!(
                    "held by CRI-O's high-performance hook for a running pod: left to it; the value from before the shield ({}) is now its saved value (/{save}), which CRI-O writes back when the pod stops",
                    previous.trim()
                ),
            });
            true
        }
        Some(Ok(HandedOver::ReadsOtherwise(save, now))) => {
            out.failed.push(Refusal {
                target: format!("/{path}"),
                reason: format!(
                    "held by CRI-O's hook for a running pod: wrote the value from before the shield ({}) into its saved value /{save}, but it reads {}",
                    previous.trim(),
                    crate::input::quote(&now)
                ),
            });
            true
        }
        Some(Err(e)) => {
            out.failed.push(Refusal {
                target: format!("/{path}"),
                reason: format!("held by CRI-O's hook for a running pod, and its saved value could not take the one from before the shield: {e}"),
            });
            true
        }
    }
}
