//! Why a request is refused before anything changes: the one error of
//! planning, shared by the planner and the components it asks.

use crate::cpulist::CpuSet;
use crate::input::{brief_to, quote};
use crate::shield::knobs;

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
    /// An `--irq` matches nothing.
    #[error("--irq {} matches no IRQ number or name in /proc/interrupts", quote(.0))]
    UnknownIrq(String),
    /// A `--tune` name is not a knob.
    #[error(transparent)]
    UnknownKnob(#[from] knobs::UnknownKnob),
    /// `--hotplug-restart` names CPUs that cannot be taken offline.
    #[error("--hotplug-restart: {}; shield only CPUs that can go offline (writable /sys/devices/system/cpu/cpuN/online) or leave out --hotplug-restart", brief_to(detail, 160))]
    NoHotplug {
        /// Which CPUs and why.
        detail: String,
    },
    /// `--guard-engine stalld` where no stalld is installed.
    #[error("--guard-engine stalld: no stalld is installed (looked for /{}); install it, or use --guard-engine auto or cpushield", crate::guard::stalld::PATHS.join(", /"))]
    NoStalld,
    /// The cache share cannot be had here.
    #[error("--cache-ways: {0}")]
    Resctrl(String),
    /// A component's part of the request cannot be had here.
    #[error("{option}: {reason}")]
    Part {
        /// The option (or config key) that asked for it.
        option: String,
        /// Why, and what would do.
        reason: String,
    },
}
