//! Why a request is refused before anything changes: the one error of
//! planning, shared by the planner and the components it asks.

use super::knobs;
use crate::cpulist::CpuSet;

/// Why a request is refused before anything is changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The list names CPUs that do not exist.
    #[error("CPU list {cpus}: CPUs {missing} do not exist (present CPUs: {present})")]
    NotPresent {
        /// Requested.
        cpus: CpuSet,
        /// Missing.
        missing: CpuSet,
        /// Present.
        present: CpuSet,
    },
    /// The list names offline CPUs.
    #[error("CPU list {cpus}: CPUs {offline} are offline (online CPUs: {online})")]
    Offline {
        /// Requested.
        cpus: CpuSet,
        /// Offline among them.
        offline: CpuSet,
        /// Online.
        online: CpuSet,
    },
    /// Nothing would be left for the rest of the system.
    #[error("CPU list {cpus} leaves no housekeeping CPU (online CPUs: {online}); keep at least one CPU unshielded")]
    NoHousekeeping {
        /// Requested.
        cpus: CpuSet,
        /// Online.
        online: CpuSet,
    },
    /// Hyper-thread siblings would be split.
    #[error("CPU list {cpus} splits hyper-thread siblings ({detail}); shield whole cores ({suggest}) or pass --allow-split-siblings")]
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
    #[error("--irq {0:?} matches no IRQ number or name in /proc/interrupts")]
    UnknownIrq(String),
    /// A `--tune` name is not a knob.
    #[error(transparent)]
    UnknownKnob(#[from] knobs::UnknownKnob),
    /// `--hotplug-restart` names CPUs that cannot be taken offline.
    #[error("--hotplug-restart: {detail}; shield only CPUs that can go offline (writable /sys/devices/system/cpu/cpuN/online) or leave out --hotplug-restart")]
    NoHotplug {
        /// Which CPUs and why.
        detail: String,
    },
}
