//! What the user should know about a shield, as data: each note names its
//! kind and carries the CPUs, IRQs, processes, files and names it is about.
//! The sentences people read are made from them in `report`.

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;

/// One thing the user should know about a shield planned, applied or read
/// back. Serialised as `{"kind": "...", ...}` with the fields below.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Note {
    // The cgroup mechanism.
    /// No cgroup hierarchy with cpuset is mounted: cgroup2 is mounted for
    /// the shield, and `off` unmounts it.
    MountingCgroup2 {
        /// Where, relative to the root.
        mount: String,
    },
    /// Shielded CPUs that are also isolated at boot (`isolcpus=domain`).
    AlsoIsolatedAtBoot {
        /// The shielded CPUs isolated at boot.
        cpus: CpuSet,
    },

    // The request.
    /// Hyper-thread sibling groups that the shield splits (allowed by the
    /// request): their unshielded siblings share a core with the shield.
    SplitSiblings {
        /// Each sibling group the shield splits.
        groups: Vec<CpuSet>,
    },
    /// `--hotplug-restart`: the CPUs go offline and online again before
    /// the cpusets are created.
    HotplugRestart {
        /// The CPUs restarted.
        cpus: CpuSet,
    },

    // Tasks.
    /// Tasks kept on the shield leave their systemd units for scopes of
    /// the shield's slice until `off` puts them back.
    TasksLeaveUnits {
        /// The units they leave (`.service`, `.scope`), sorted.
        units: Vec<String>,
    },
    /// Threads that asked only for shielded CPUs in a process that also
    /// has threads outside the shield (cgroup v2 places whole processes):
    /// moved to the housekeeping CPUs.
    ThreadsSplitOff {
        /// How many threads.
        threads: usize,
    },
    /// Tasks inside the shield whose CPUs all left it in a change in
    /// place: moved out to the housekeeping CPUs.
    TasksLeftShield {
        /// How many tasks.
        tasks: usize,
        /// Where they went.
        housekeeping: CpuSet,
    },

    // A change in place.
    /// The active shield was changed in place and stayed up throughout.
    ShieldChangedInPlace {
        /// The shield before.
        from: CpuSet,
        /// The shield after.
        to: CpuSet,
    },

    // IRQs.
    /// IRQs that came back onto the shield while it changed in place
    /// (irqbalance places IRQs anew when it restarts): moved off again.
    IrqsBackAfterChange {
        /// The IRQs moved off again.
        irqs: Vec<u32>,
    },
    /// `--hotplug-restart`: IRQs whose driver set them on the shield again
    /// when its CPUs came online: moved off again.
    IrqsBackAfterHotplug {
        /// The IRQs moved off again.
        irqs: Vec<u32>,
    },

    // irqbalance.
    /// irqbalance runs without a systemd unit: cpushield cannot ban CPUs
    /// for it, and it moves IRQs back onto the shield.
    IrqbalanceWithoutUnit {
        /// Its process.
        pid: i32,
        /// The shielded CPUs it moves IRQs back onto.
        shield: CpuSet,
        /// The ban it needs: the shield and what it bans by itself.
        ban: CpuSet,
    },
    /// irqbalance runs outside its systemd unit: the ban reaches it only
    /// when it is restarted as the unit.
    IrqbalanceOutsideUnit {
        /// The cgroup it runs in, when known.
        cgroup: Option<String>,
    },
    /// The user's own irqbalance ban is kept in cpushield's.
    IrqbalanceOwnBanKept {
        /// The user's file that sets it, with the line.
        setting: String,
        /// The CPUs cpushield bans while shielded.
        banned: CpuSet,
    },

    // Other owners.
    /// A running tuned profile pins CPUs or IRQs and may undo the shield
    /// when it re-applies.
    TunedPins {
        /// The active profile (`/etc/tuned/active_profile`).
        profile: String,
        /// What in it pins CPUs or IRQs.
        pins: Vec<String>,
    },
    /// A running tuned profile (or one it includes) sets what cpushield
    /// sets too: each is owned twice.
    TunedOverlaps {
        /// The active profile.
        profile: String,
        /// The profiles read, includes first.
        chain: Vec<String>,
        /// Each setting, its profile and what of cpushield's it overlaps.
        settings: Vec<String>,
    },

    // Kernel work on the shielded CPUs.
    /// What keeps the shielded CPUs' kernel work (kworkers, RCU, timers)
    /// running behind a real-time task that never sleeps there.
    KernelWork {
        /// What protects it.
        protection: crate::guard::kernel::Protection,
    },
    /// On PREEMPT_RT: the CPUs' own timer, RCU and softirq threads run
    /// below a real-time task about to start there (`run --fifo`).
    KthreadsBelow {
        /// The task's real-time priority.
        priority: u32,
        /// The CPUs it runs on.
        cpus: CpuSet,
        /// Each thread below it, with its scheduling (`rcuc/3 SCHED_FIFO 1`).
        threads: Vec<String>,
        /// The highest priority the task may have for them to go above it
        /// with SCHED_FIFO.
        #[serde(default)]
        max_above: u32,
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
    /// `run` raised the per-CPU softirq, timer and RCU threads of the
    /// task's CPUs above it (PREEMPT_RT), journaled; `off` puts them back.
    KthreadsRaisedForTask {
        /// The task's real-time priority.
        priority: u32,
        /// Each thread raised, with its scheduling as read back
        /// (`rcuc/3 SCHED_FIFO 83`).
        threads: Vec<String>,
        /// CPUs whose `rcuc/N` was left alone: the boot half offloads RCU
        /// there (`nohz_full=` and `rcu_nocbs=`).
        rcu_offloaded: CpuSet,
        /// With no SCHED_FIFO priority left above the task: the
        /// SCHED_DEADLINE reservation they got instead (runtime and period,
        /// ns).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reservation_ns: Option<(u64, u64)>,
    },

    // Tunables (`--tune`).
    /// A knob with no files on this machine: skipped.
    TuneNothingToTune {
        /// The knob.
        knob: String,
    },
    /// Files of a knob that do not exist here: skipped.
    TuneMissing {
        /// The knob.
        knob: String,
        /// The files, relative to the root.
        files: Vec<String>,
    },
    /// Files of a knob that cannot be written: not set.
    TuneReadOnly {
        /// The knob.
        knob: String,
        /// The files, relative to the root.
        files: Vec<String>,
    },
    /// Files of a knob that could not be read, or read as something the
    /// knob does not understand: not set.
    TuneUnreadable {
        /// The knob.
        knob: String,
        /// The files and why each is unreadable.
        files: Vec<UnreadableFile>,
    },
}

/// A knob's file left alone because it could not be read or understood.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnreadableFile {
    /// The file, relative to the root.
    pub path: String,
    /// Why.
    pub reason: Unreadable,
}

/// Why a knob's file could not be used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Unreadable {
    /// Reading it failed.
    ReadFailed {
        /// The error's errno name (`EIO`, ...).
        errno: String,
    },
    /// It holds something other than the CPU mask the knob expects.
    NotAMask {
        /// What it holds.
        content: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpus(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    #[test]
    fn a_note_is_json_data_with_its_kind_and_reads_back() {
        let note = Note::IrqsBackAfterHotplug { irqs: vec![25, 31] };
        let json = serde_json::to_value(&note).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"kind": "irqs_back_after_hotplug", "irqs": [25, 31]})
        );
        assert_eq!(serde_json::from_value::<Note>(json).unwrap(), note);

        let note = Note::ShieldChangedInPlace {
            from: cpus("2-3"),
            to: cpus("3"),
        };
        let json = serde_json::to_value(&note).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"kind": "shield_changed_in_place", "from": "2-3", "to": "3"})
        );
        assert_eq!(serde_json::from_value::<Note>(json).unwrap(), note);
    }

    #[test]
    fn an_unreadable_file_says_why_as_data() {
        let note = Note::TuneUnreadable {
            knob: "net-queues".into(),
            files: vec![UnreadableFile {
                path: "sys/class/net/eth0/queues/tx-0/xps_cpus".into(),
                reason: Unreadable::NotAMask {
                    content: "zz".into(),
                },
            }],
        };
        let json = serde_json::to_value(&note).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "kind": "tune_unreadable",
                "knob": "net-queues",
                "files": [{
                    "path": "sys/class/net/eth0/queues/tx-0/xps_cpus",
                    "reason": {"kind": "not_a_mask", "content": "zz"}
                }]
            })
        );
        assert_eq!(serde_json::from_value::<Note>(json).unwrap(), note);
    }
}
