//! What `certify` looks at while a phase measures, every so often: whether
//! the shield still holds as `status` judges it, the starvation guard's
//! boosts so far, and whether the load still runs. Each look is kept with
//! its time, so a break is reported when it happened.

use serde::{Deserialize, Serialize};

use crate::load::Load;
use crate::shield;
use crate::sys::Sys;

/// One look at the machine during a phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Watch {
    /// Seconds into the phase.
    pub at_s: f64,
    /// Whether the shield held (`None`: no shield in this phase, or
    /// unreadable: see `error`).
    pub holds: Option<bool>,
    /// What no longer held, `id: reason` each.
    pub broken: Vec<String>,
    /// The starvation guard's boosts so far (`None`: no guard).
    pub guard_boosts: Option<u64>,
    /// The load's processes still running (`None`: no load).
    pub load_processes: Option<usize>,
    /// Why the shield could not be read.
    #[serde(default)]
    pub error: Option<String>,
}

impl Watch {
    /// Whether this look found something broken: the shield, the load
    /// gone, or the shield unreadable.
    pub fn is_break(&self) -> bool {
        self.holds == Some(false) || self.load_processes == Some(0) || self.error.is_some()
    }
}

/// Looks at the machine `at_s` seconds into a phase.
pub fn look(sys: &Sys, at_s: f64, shielded: bool, load: Option<&Load>) -> Watch {
    let mut w = Watch {
        at_s,
        holds: None,
        broken: Vec::new(),
        guard_boosts: None,
        load_processes: load.map(|l| l.members().len()),
        error: None,
    };
    if shielded {
        match shield::status(sys) {
            Ok(s) => {
                w.holds = Some(s.holds);
                w.broken = s
                    .broken
                    .iter()
                    .map(|f| format!("{}: {}", f.id, f.reason))
                    .collect();
                w.guard_boosts = (s.parts.iter().flat_map(|p| &p.metrics))
                    .find(|m| m.name == shield::GUARD_BOOSTS)
                    .and_then(|m| m.samples.first())
                    .map(|(_, boosts)| *boosts as u64);
            }
            Err(e) => w.error = Some(e.to_string()),
        }
    }
    w
}

/// When a look is due, every `every_s` seconds into a phase: once each
/// time the phase passes the next multiple, however late the caller asks.
pub struct Schedule {
    every_s: Option<f64>,
    next_s: f64,
}

impl Schedule {
    /// Every `every_s` seconds (`None`: never).
    pub fn every(every_s: Option<f64>) -> Schedule {
        Schedule {
            every_s,
            next_s: every_s.unwrap_or(f64::INFINITY),
        }
    }

    /// Whether a look is due at `elapsed_s` (and the next one scheduled).
    pub fn due(&mut self, elapsed_s: f64) -> bool {
        match self.every_s {
            Some(every) if elapsed_s >= self.next_s => {
                while self.next_s <= elapsed_s {
                    self.next_s += every;
                }
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_look_is_due_once_per_period_and_never_without_one() {
        let mut s = Schedule::every(Some(60.0));
        let due: Vec<f64> = [0.0, 30.0, 60.0, 60.5, 119.0, 200.0, 239.0, 240.0]
            .into_iter()
            .filter(|&t| s.due(t))
            .collect();
        assert_eq!(due, vec![60.0, 200.0, 240.0]);
        let mut never = Schedule::every(None);
        assert!(!never.due(1e9));
    }

    #[test]
    fn a_break_is_a_broken_shield_a_load_gone_or_an_unreadable_one() {
        let ok = Watch {
            at_s: 60.0,
            holds: Some(true),
            broken: vec![],
            guard_boosts: Some(0),
            load_processes: Some(4),
            error: None,
        };
        assert!(!ok.is_break());
        assert!(Watch {
            holds: Some(false),
            ..ok.clone()
        }
        .is_break());
        assert!(Watch {
            load_processes: Some(0),
            ..ok.clone()
        }
        .is_break());
        assert!(Watch {
            error: Some("x".into()),
            ..ok.clone()
        }
        .is_break());
        assert!(!Watch {
            holds: None,
            load_processes: None,
            ..ok
        }
        .is_break());
    }
}
