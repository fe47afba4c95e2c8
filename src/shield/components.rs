//! The shield's components, named together in one place: the changes only
//! a component knows how to make and undo are handed to it from here, so
//! that the engine (apply, undo, the journal) names none of them.

use super::apply::{ApplyError, Effects, Undone};
use super::change::Action;
use super::journal::Entry;
use super::{guard, irqbalance, rt_kthreads};
use crate::sys::Sys;

/// Every component, for the engine.
pub(super) struct Components;

/// What the engine is given to make and undo the components' own changes.
pub(super) const EFFECTS: &Components = &Components;

impl Effects for Components {
    fn make(&self, sys: &Sys, action: &Action) -> Option<Result<(), ApplyError>> {
        Some(match action {
            Action::SetScheduler {
                tid,
                policy,
                priority,
                ..
            } => rt_kthreads::set(sys, *tid, *policy, *priority),
            Action::IrqbalanceBan {
                banned,
                make_dir,
                manager_env,
                ..
            } => irqbalance::ban(sys, banned, *make_dir, *manager_env).map_err(ApplyError::from),
            Action::Guard {
                cpus,
                settings,
                unit,
            } => guard::start(sys, cpus, settings, unit.as_deref()).map_err(ApplyError::from),
            _ => return None,
        })
    }

    fn previous(&self, sys: &Sys, action: &Action) -> Option<String> {
        match action {
            Action::SetScheduler { tid, .. } => rt_kthreads::read_previous(sys, *tid),
            _ => None,
        }
    }

    fn undo(&self, sys: &Sys, entry: &Entry, out: &mut Undone) -> bool {
        match &entry.action {
            Action::SetScheduler { tid, name, .. } => {
                rt_kthreads::undo(sys, *tid, name, entry.previous.as_deref(), entry.at, out)
            }
            Action::IrqbalanceBan { .. } => {
                let (restored, failed) = irqbalance::unban(sys, &entry.action);
                out.restored += usize::from(restored);
                out.failed.extend(failed);
            }
            Action::Guard { unit, .. } => guard::undo(sys, unit.as_deref(), out),
            _ => return false,
        }
        true
    }

    /// irqbalance gets its environment back before anything else: a banned
    /// irqbalance still running while undo puts IRQs back moves them again
    /// within its 10 s cycle (SYSTEMD-NOTES 10). Its ban is the first change
    /// `on` makes, for the same reason the other way round.
    fn undone_first(&self, action: &Action) -> bool {
        matches!(action, Action::IrqbalanceBan { .. })
    }

    fn describe(&self, action: &Action) -> Option<String> {
        match action {
            Action::IrqbalanceBan { manager_env, .. } => Some(irqbalance::describe(*manager_env)),
            _ => None,
        }
    }
}
