//! Why a request is refused before anything changes: the one error of
//! planning, shared by the planner and the components it asks.

use crate::cpulist::CpuSet;
use crate::input::brief_to;

/// Why a request is refused before anything is changed. Each message
/// shows at most a short prefix of a long list or name, with its length
/// ([`crate::input`]): a request can name thousands of CPUs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The list names CPUs that do not exist.
    #[error("CPU list {}: CPUs {} do not exist (present CPUs: {})", cpus.brief(), missing.brief(), present.brief())]
    NotPresent {
        /// Requested.
        cpus: CpuSet,
        /// Missing.
        missing: CpuSet,
        /// Present.
        present: CpuSet,
    },
    /// The list names offline CPUs.
    #[error("CPU list {}: CPUs {} are offline (online CPUs: {})", cpus.brief(), offline.brief(), online.brief())]
    Offline {
        /// Requested.
        cpus: CpuSet,
        /// Offline among them.
        offline: CpuSet,
        /// Online.
        online: CpuSet,
    },
    /// Nothing would be left for the rest of the system.
    #[error("CPU list {} leaves no housekeeping CPU (online CPUs: {}); keep at least one CPU unshielded", cpus.brief(), online.brief())]
    NoHousekeeping {
        /// Requested.
        cpus: CpuSet,
        /// Online.
        online: CpuSet,
    },
    /// Hyper-thread siblings would be split.
    #[error("CPU list {} splits hyper-thread siblings ({}); shield whole cores ({}) or pass --allow-split-siblings", cpus.brief(), brief_to(detail, 120), suggest.brief())]
    SplitSiblings {
        /// Requested.
        cpus: CpuSet,
        /// Which groups are split.
        detail: String,
        /// The list with all siblings added.
        suggest: CpuSet,
    },
    /// No cpuset mechanism.
    #[error("no cpuset support: {0}")]
    NoCpuset(String),
    /// A component's part of the request cannot be had here (an `--irq`
    /// that matches nothing, an unknown knob, CPUs that cannot go offline,
    /// no stalld, no cache share, an idle bound that cannot be written):
    /// the component's own message, which names the option and what would
    /// do.
    #[error("{message}")]
    Part {
        /// The option that asked for it (`--irq`, `--tune`, ...).
        option: &'static str,
        /// The message.
        message: String,
    },
}
