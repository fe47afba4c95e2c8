//! The guard's own notes: what keeps the shielded CPUs' kernel work
//! running behind a real-time task that never sleeps, and a stalld that
//! ran before the shield.

use serde::{Deserialize, Serialize};

use super::OWNER;
use crate::guard::kernel::Protection;
use crate::shield::change::Owner;
use crate::shield::note::OwnNote;

/// What the user should know of the shielded CPUs' kernel work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum GuardNote {
    /// What keeps the shielded CPUs' kernel work (kworkers, RCU, timers)
    /// running behind a real-time task that never sleeps there.
    KernelWork {
        /// What protects it.
        protection: Protection,
    },
    /// A stalld was running before the shield (not the guard's): the
    /// guard does not start a second one; what it watches.
    StalldRunning {
        /// The stalld as read.
        stalld: crate::guard::stalld::Foreign,
        /// Whether it watches every shielded CPU.
        covers: bool,
        /// Whether the guard's own loop watches the shield beside it.
        guard: bool,
    },
}

impl OwnNote for GuardNote {
    fn owner(&self) -> Owner {
        OWNER
    }

    fn text(&self) -> String {
        let GuardNote::StalldRunning {
            stalld,
            covers,
            guard,
        } = self
        else {
            let GuardNote::KernelWork { protection } = self else {
                unreachable!("two kinds")
            };
            return protection.text();
        };
        let unit = (stalld.unit.as_deref())
            .map(|u| format!(", {}", crate::input::brief(u)))
            .unwrap_or_default();
        let log_only = if stalld.log_only { ", log only" } else { "" };
        let watches = match covers {
            true => "it watches the shielded CPUs too",
            false => {
                "it does not watch every shielded CPU (its -c leaves some out, or it only logs)"
            }
        };
        let guard = match guard {
            true => "cpushield starts no second stalld: the guard's own loop watches the shield beside it, boosting after its threshold, since a loop on the shield starves RCU in less than stalld's default 60 s (the kernel warns of an RCU stall after 21 s, and stat_refresh was still waiting after 30 s behind stalld's defaults in the test guests)",
            false => "the kernel protects the shield's kernel work here, so the guard does not run",
        };
        format!(
            "stalld already runs (pid {}{unit}, starving after {} s{log_only}): {watches}; {guard}",
            stalld.pid, stalld.threshold_s
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shield::Note;

    #[test]
    fn the_kernel_work_note_keeps_its_kind_and_protection_and_says_what_it_costs() {
        let note = GuardNote::KernelWork {
            protection: Protection::Throttling {
                runtime_us: 950_000,
                period_us: 1_000_000,
            },
        };
        let Note::Part(part) = note.note() else {
            panic!("a component's note");
        };
        assert!(part.is("guard", "kernel_work"));
        assert_eq!(part.data["protection"]["by"], "throttling");
        assert_eq!(
            part.text,
            "kernel work on the shielded CPUs is protected by RT throttling: real-time tasks run at most 950 ms of every 1000 ms, so a task that never sleeps loses 50 ms of each; no guard needed"
        );
    }
}
