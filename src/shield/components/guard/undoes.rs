//! How the guard's own change is made and undone: started, stopped and
//! proved gone, and started again as it ran when a change in place that
//! restarted it is rolled back.

use super::{own_of, start, undo, Own, Part};
use crate::shield::apply::{ApplyError, Refusal};
use crate::shield::change::Action;
use crate::shield::component::Undoes;
use crate::shield::journal::Entry;
use crate::shield::reach::Bounds;
use crate::shield::undo::Undone;
use crate::guard;
use crate::sys::Sys;

impl Undoes for Part {
    fn make(&self, sys: &Sys, action: &Action) -> Option<Result<(), ApplyError>> {
        let Own::Guard {
            cpus,
            settings,
            unit,
        } = own_of(action)?;
        Some(start(sys, &cpus, &settings, unit.as_deref()).map_err(ApplyError::from))
    }

    /// A guard stopped through its own unit only.
    fn within(&self, action: &Action, bounds: &Bounds) -> Option<Result<(), String>> {
        let Own::Guard { unit, .. } = own_of(action)?;
        Some(unit.as_deref().map_or(Ok(()), |u| bounds.unit(u)))
    }

    /// The guard that ran before this one started (a change in place
    /// restarts it on the new CPUs), as the guard action that starts it.
    fn previous(&self, sys: &Sys, action: &Action) -> Option<String> {
        let Own::Guard { unit, settings, .. } = own_of(action)?;
        let old = guard::read_state(sys).filter(|s| guard::alive(sys, s))?;
        // A guard of an older cpushield did not write its settings.
        let settings = old.settings.unwrap_or(settings);
        serde_json::to_string(&Own::Guard { cpus: old.cpus, settings, unit }).ok()
    }

    /// A guard restarted on other CPUs (a change in place) is the same
    /// guard: `off` stops the one that runs and starts the one from before
    /// the shield, if any.
    fn fold(&self, first: &Action, later: &Action) -> Option<Action> {
        (own_of(first).is_some() && own_of(later).is_some()).then(|| later.clone())
    }

    /// Stops it; a guard that ran before it (a change in place rolled
    /// back) is started again as it was.
    fn undo(&self, sys: &Sys, entry: &Entry, out: &mut Undone) -> bool {
        let Some(Own::Guard { unit, .. }) = own_of(&entry.action) else {
            return false;
        };
        undo(sys, unit.as_deref(), out);
        let before = (entry.previous.as_deref()).and_then(|p| serde_json::from_str::<Own>(p).ok());
        if let Some(Own::Guard { cpus, settings, unit }) = before {
            if let Err(e) = start(sys, &cpus, &settings, unit.as_deref()) {
                out.failed.push(Refusal {
                    target: format!("the starvation guard on CPUs {cpus}"),
                    reason: format!("could not start it again as it ran before: {e}"),
                });
            }
        }
        true
    }

    /// The guard stays until everything else is back: a real-time task
    /// still on the shield keeps running through `off` (see
    /// the tasks component's `realtime.rs`).
    fn undone_last(&self, action: &Action) -> bool {
        own_of(action).is_some()
    }

    fn describe(&self, action: &Action) -> Option<String> {
        let Own::Guard { cpus, .. } = own_of(action)?;
        Some(format!("the starvation guard of CPUs {cpus}"))
    }

    fn plan_line(&self, action: &Action) -> Option<String> {
        let Own::Guard {
            cpus,
            settings,
            unit,
        } = own_of(action)?;
        let unit = match unit {
            Some(unit) => format!("systemd unit {}, ", crate::escape::terminal(&unit)),
            None => String::new(),
        };
        let args = settings.args().join(" ");
        Some(format!(
            "start the starvation guard of CPUs {cpus} ({unit}{args})"
        ))
    }
}
