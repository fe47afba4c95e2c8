//! Snapshot: what the machine has now, as far as a shield is concerned.
//!
//! Read-only. Everything cpushield may change is captured here, so that the
//! planner can work without I/O and tests can compare before/after.

use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use super::knobs::{knob_files, FileState, Knob, TuneState};
use crate::cpulist::CpuSet;
use crate::sys::procfs::{self, Hierarchy, Thread};
use crate::sys::{ErrorKind, Result, Sys};

pub use super::hotplug::cpu_online_file;
pub use super::irqs::{irq_affinity_file, irq_of_affinity_file, Irq, DEFAULT_IRQ_AFFINITY};
pub use super::workqueues::WORKQUEUE_MASK;

/// Name of the cgroup (v2 partition, v1 rt cpuset) that holds the shield.
pub const SHIELD_CGROUP: &str = "cpushield";
/// The shield's transient slice on a systemd host (cgroup v2): its cgroup
/// is `cpushield.slice` under the root, its processes are in scopes below.
pub const SHIELD_SLICE: &str = "cpushield.slice";
/// Whether a thread in cgroup `cgroup` (as `/proc/PID/cgroup` names it) is
/// inside the shield: its cgroup or one below it.
pub fn in_shield_cgroup(cgroup: &str) -> bool {
    [SHIELD_CGROUP, SHIELD_SLICE].iter().any(|name| {
        cgroup
            .strip_prefix('/')
            .and_then(|c| c.strip_prefix(name))
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    })
}
/// Name of the v1 cpuset for everything else (the housekeeping CPUs).
pub const SYSTEM_CGROUP_V1: &str = "cpushield-system";
/// Where cgroup2 is mounted when nothing is, but `/sys/fs/cgroup` is
/// taken by another mount (a tmpfs of v1 hierarchies): a directory of
/// cpushield's own run directory.
pub const CGROUP2_FALLBACK: &str = "run/cpushield/cgroup2";
/// Where cgroup2 is normally mounted.
const CGROUP2_MOUNT: &str = "sys/fs/cgroup";

/// How this machine offers cpusets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CgroupSetup {
    /// cgroup v2 with the cpuset controller available.
    V2 {
        /// Mount point relative to the root (`sys/fs/cgroup`).
        mount: String,
        /// The root's `cgroup.subtree_control` words.
        subtree_control: Vec<String>,
        /// Whether the kernel has `cpuset.cpus.exclusive` (6.7+).
        has_exclusive: bool,
    },
    /// cgroup v1 with a cpuset hierarchy.
    V1 {
        /// Mount point relative to the root (`sys/fs/cgroup/cpuset`).
        mount: String,
        /// The root cpuset's memory nodes.
        mems: String,
        /// The root cpuset's `cpuset.sched_load_balance`.
        load_balance: String,
    },
    /// No cgroup hierarchy with cpuset is mounted, but the kernel has
    /// cgroup2: `on` mounts it at `mount` first (and `off` unmounts it).
    V2Unmounted {
        /// Where to mount it, relative to the root: `sys/fs/cgroup`, or
        /// [`CGROUP2_FALLBACK`] when something else is mounted there.
        mount: String,
        /// Whether the directory has to be made first (and removed by undo).
        make_dir: bool,
    },
    /// No cpuset support reachable.
    Unsupported {
        /// What was found instead.
        reason: String,
    },
}

impl CgroupSetup {
    /// Short name for reports: `cgroup v2 partition`, `cgroup v1 cpuset`.
    pub fn mechanism(&self) -> &'static str {
        match self {
            CgroupSetup::V2 { .. } | CgroupSetup::V2Unmounted { .. } => "cgroup v2 partition",
            CgroupSetup::V1 { .. } => "cgroup v1 cpuset",
            CgroupSetup::Unsupported { .. } => "none",
        }
    }

    /// Which `/proc/PID/cgroup` line describes task placement.
    pub fn hierarchy(&self) -> Hierarchy {
        match self {
            CgroupSetup::V1 { .. } => Hierarchy::CpusetV1,
            _ => Hierarchy::Unified,
        }
    }

    /// Where the threads' cgroups are read: the thread lists of the
    /// mounted hierarchy, else each thread's `/proc` file.
    pub fn thread_source(&self) -> procfs::CgroupSource<'_> {
        procfs::CgroupSource {
            hierarchy: self.hierarchy(),
            mount: match self {
                CgroupSetup::V2 { mount, .. } | CgroupSetup::V1 { mount, .. } => Some(mount),
                _ => None,
            },
        }
    }

    /// Directory of the shield cgroup, relative to the root.
    pub fn shield_dir(&self) -> Option<String> {
        match self {
            CgroupSetup::V2 { mount, .. }
            | CgroupSetup::V1 { mount, .. }
            | CgroupSetup::V2Unmounted { mount, .. } => Some(format!("{mount}/{SHIELD_CGROUP}")),
            CgroupSetup::Unsupported { .. } => None,
        }
    }

    /// Mount point relative to the root.
    pub fn mount(&self) -> Option<&str> {
        match self {
            CgroupSetup::V2 { mount, .. }
            | CgroupSetup::V1 { mount, .. }
            | CgroupSetup::V2Unmounted { mount, .. } => Some(mount),
            CgroupSetup::Unsupported { .. } => None,
        }
    }
}

/// Everything a shield may touch, read at one moment.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Snapshot {
    /// CPUs that exist.
    pub present: CpuSet,
    /// CPUs that are online.
    pub online: CpuSet,
    /// CPUs isolated at boot (`isolcpus=`), from `/sys/devices/system/cpu/isolated`.
    pub boot_isolated: CpuSet,
    /// The cpuset mechanism.
    pub cgroup: CgroupSetup,
    /// Every thread.
    pub threads: Vec<Thread>,
    /// Every IRQ with an affinity file.
    pub irqs: Vec<Irq>,
    /// `/proc/irq/default_smp_affinity`.
    pub default_irq_affinity: Option<CpuSet>,
    /// The unbound-workqueue cpumask.
    pub workqueue_mask: Option<CpuSet>,
    /// Hyper-thread sibling groups of the online CPUs.
    pub sibling_groups: Vec<CpuSet>,
    /// Files of the tuning knobs requested (`on --tune`), read before any
    /// change; `None` unless tuning was asked for (see [`crate::shield::knobs`]).
    #[serde(default)]
    pub tunables: Option<TuneState>,
    /// Online CPUs that have a `/sys/devices/system/cpu/cpuN/online` file
    /// (CPU hotplug; x86 CPU 0 usually has none).
    #[serde(default)]
    pub hotplug_files: CpuSet,
    /// Of those, the CPUs whose `online` file may be written.
    #[serde(default)]
    pub hotplug_writable: CpuSet,
    /// systemd, irqbalance and tuned as found (read with the threads).
    #[serde(default)]
    pub owners: super::owners::Owners,
    /// cgroup v2: `cpuset.cpus.effective` of each cgroup that holds a
    /// thread, by its path as `/proc/PID/cgroup` names it (read with the
    /// threads; empty for v1 and in a re-read). A thread whose affinity is
    /// its cgroup's effective CPUs asked for none of its own: the kernel
    /// gives it the new effective CPUs when the partition takes the
    /// shield's (see `tasks::plan_tasks`).
    #[serde(default)]
    pub cgroup_cpus: BTreeMap<String, CpuSet>,
    /// What the kernel does for per-CPU kernel work behind a real-time
    /// task that never sleeps (PREEMPT_RT, the fair server, throttling).
    #[serde(default)]
    pub kernel_work: crate::guard::kernel::KernelWork,
}

impl Snapshot {
    /// Reads the machine. The name and flags of threads other than each
    /// process's first are left unread (see [`procfs::read_threads_lazily`]):
    /// callers read them for the threads they report or change
    /// ([`procfs::read_stats`]).
    pub fn read(sys: &Sys) -> Result<Snapshot> {
        let mut snap = Snapshot::read_without_threads(sys)?;
        snap.threads = procfs::read_threads_lazily(sys, snap.cgroup.thread_source())?;
        snap.owners = super::owners::Owners::read(sys, &snap.threads, &snap.boot_isolated);
        snap.cgroup_cpus = read_cgroup_cpus(sys, &snap.cgroup, &snap.threads);
        Ok(snap)
    }

    /// Reads the machine again after `before`: threads known from it are
    /// not asked for their name and flags again (see [`procfs::reread_threads`]).
    pub fn reread(sys: &Sys, before: &Snapshot) -> Result<Snapshot> {
        let mut snap = Snapshot::read_without_threads(sys)?;
        snap.threads = procfs::reread_threads(sys, snap.cgroup.thread_source(), &before.threads)?;
        Ok(snap)
    }

    /// Reads everything but the threads (`threads` is empty): enough to
    /// validate a request.
    pub fn read_without_threads(sys: &Sys) -> Result<Snapshot> {
        let present = procfs::present_cpus(sys)?;
        let online = procfs::online_cpus(sys)?;
        let boot_isolated = sys
            .read_cpulist("sys/devices/system/cpu/isolated")
            .unwrap_or_default();
        let cgroup = detect_cgroup(sys)?;
        let irqs = super::irqs::read(sys)?;
        let default_irq_affinity = optional(sys.read_cpumask(DEFAULT_IRQ_AFFINITY))?;
        let workqueue_mask = optional(super::workqueues::read(sys))?;
        let mut sibling_groups: Vec<CpuSet> = Vec::new();
        for cpu in online.iter() {
            let sib = procfs::thread_siblings(sys, cpu);
            if !sibling_groups.contains(&sib) {
                sibling_groups.push(sib);
            }
        }
        let (hotplug_files, hotplug_writable) = super::hotplug::read(sys, &online);
        Ok(Snapshot {
            present,
            online,
            boot_isolated,
            cgroup,
            threads: Vec::new(),
            irqs,
            default_irq_affinity,
            workqueue_mask,
            sibling_groups,
            tunables: None,
            hotplug_files,
            hotplug_writable,
            owners: Default::default(),
            cgroup_cpus: BTreeMap::new(),
            kernel_work: crate::guard::kernel::KernelWork::read(sys),
        })
    }

    /// Number of bits to print in hex masks (the kernel pads to nr_cpu_ids).
    pub fn mask_bits(&self) -> u32 {
        self.present.last().map_or(1, |c| c + 1)
    }
}

/// The effective CPUs of each cgroup of `threads` on cgroup v2: its
/// `cpuset.cpus.effective`, or, where the cpuset controller is not enabled
/// (no such file: systemd enables it only where a unit sets CPUs), its
/// nearest ancestor's, whose cpuset its tasks belong to. One read per
/// cgroup; cgroups that vanished meanwhile are left out.
fn read_cgroup_cpus(
    sys: &Sys,
    setup: &CgroupSetup,
    threads: &[Thread],
) -> BTreeMap<String, CpuSet> {
    let CgroupSetup::V2 { mount, .. } = setup else {
        return BTreeMap::new();
    };
    let mut own: BTreeMap<String, Option<CpuSet>> = BTreeMap::new();
    let mut read_own = |cg: &str| -> Option<CpuSet> {
        own.entry(cg.to_string())
            .or_insert_with(|| {
                let dir = if cg == "/" {
                    mount.clone()
                } else {
                    format!("{mount}{cg}")
                };
                sys.read_cpulist(&format!("{dir}/cpuset.cpus.effective"))
                    .ok()
            })
            .clone()
    };
    let mut out = BTreeMap::new();
    for t in threads {
        if out.contains_key(&t.cgroup) {
            continue;
        }
        let mut cg = t.cgroup.as_str();
        let cpus = loop {
            if let Some(cpus) = read_own(cg) {
                break Some(cpus);
            }
            if !sys.exists(&format!("{mount}{cg}")) {
                break None;
            }
            match procfs::parent_cgroup(cg) {
                Some(parent) => cg = parent,
                None => break None,
            }
        };
        if let Some(cpus) = cpus {
            out.insert(t.cgroup.clone(), cpus);
        }
    }
    out
}

fn optional<T>(r: Result<T>) -> Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.kind == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Finds the cpuset mechanism from the mount table. A v1 cpuset hierarchy
/// wins (the controller cannot be on both); otherwise cgroup2 with
/// `cpuset` in its root `cgroup.controllers`.
pub fn detect_cgroup(sys: &Sys) -> Result<CgroupSetup> {
    let mounts = procfs::parse_mounts(&sys.read("proc/self/mounts")?);
    if let Some(m) = mounts
        .iter()
        .find(|m| m.fstype == "cgroup" && m.options.split(',').any(|o| o == "cpuset"))
    {
        let mount = m.target.trim_start_matches('/').to_string();
        if m.options.split(',').any(|o| o == "noprefix") {
            // cset mounts it so at /cpusets, and leaves it mounted after
            // `cset shield --reset` (seen on Debian 12 with cset 1.6).
            return Ok(CgroupSetup::Unsupported {
                reason: format!(
                    "the cgroup v1 cpuset hierarchy at /{mount} is mounted with 'noprefix' (as cset mounts it), which names its files without 'cpuset.'; unmount it when no cpuset of it is in use (umount /{mount}), and the cpuset controller returns to cgroup2"
                ),
            });
        }
        let mems = sys.read_trimmed(&format!("{mount}/cpuset.mems"))?;
        let load_balance = sys.read_trimmed(&format!("{mount}/cpuset.sched_load_balance"))?;
        return Ok(CgroupSetup::V1 {
            mount,
            mems,
            load_balance,
        });
    }
    let Some(m) = mounts.iter().find(|m| m.fstype == "cgroup2") else {
        return Ok(unmounted(sys, &mounts));
    };
    let mount = m.target.trim_start_matches('/').to_string();
    let controllers = sys.read(&format!("{mount}/cgroup.controllers"))?;
    if !controllers.split_whitespace().any(|c| c == "cpuset") {
        return Ok(CgroupSetup::Unsupported {
            reason: format!(
                "the cgroup2 hierarchy at /{mount} has no cpuset controller (available: {})",
                controllers.trim()
            ),
        });
    }
    let subtree_control = sys
        .read(&format!("{mount}/cgroup.subtree_control"))?
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let has_exclusive = sys.exists(&format!("{mount}/cpuset.cpus.isolated"));
    Ok(CgroupSetup::V2 {
        mount,
        subtree_control,
        has_exclusive,
    })
}

/// Neither cgroup2 nor a v1 cpuset is mounted: cgroup2 can be mounted when
/// the kernel has it and `/sys/fs/cgroup` exists; at `/sys/fs/cgroup`
/// unless a mount is on or below it (then under cpushield's run directory,
/// so that nothing mounted there is hidden).
fn unmounted(sys: &Sys, mounts: &[procfs::Mount]) -> CgroupSetup {
    let has_cgroup2 = sys.read("proc/filesystems").is_ok_and(|text| {
        text.lines()
            .any(|l| l.split_whitespace().last() == Some("cgroup2"))
    });
    if !has_cgroup2 {
        return CgroupSetup::Unsupported {
            reason: "no cgroup v1 cpuset hierarchy is mounted and the kernel has no cgroup2 (not in /proc/filesystems)".into(),
        };
    }
    if !sys.path(CGROUP2_MOUNT).is_dir() {
        return CgroupSetup::Unsupported {
            reason: format!("no cgroup2 and no cgroup v1 cpuset hierarchy is mounted, and /{CGROUP2_MOUNT} does not exist (is sysfs mounted?)"),
        };
    }
    let at = format!("/{CGROUP2_MOUNT}");
    let busy = mounts
        .iter()
        .any(|m| m.target == at || m.target.starts_with(&format!("{at}/")))
        || sys.list(CGROUP2_MOUNT).map_or(true, |e| !e.is_empty());
    if busy {
        CgroupSetup::V2Unmounted {
            mount: CGROUP2_FALLBACK.into(),
            make_dir: !sys.exists(CGROUP2_FALLBACK),
        }
    } else {
        CgroupSetup::V2Unmounted {
            mount: CGROUP2_MOUNT.into(),
            make_dir: false,
        }
    }
}

/// Reads the files of `knobs` for a shield of `shield`. Each file is read
/// exactly once; call this only before the knobs are changed. Files in
/// `known` are not read: their value is taken from there (the original
/// values of watchdogs an active shield holds off, from its journal).
pub fn read_knob_files(
    sys: &Sys,
    knobs: &[&Knob],
    shield: &CpuSet,
    known: &BTreeMap<String, String>,
) -> TuneState {
    let mut st = TuneState::default();
    for k in knobs {
        let files = knob_files(sys, k, shield);
        for f in &files {
            if let Some(v) = known.get(f) {
                st.files.insert(
                    f.clone(),
                    FileState::Present {
                        value: v.clone(),
                        writable: true,
                    },
                );
                continue;
            }
            let state = match sys.read_trimmed(f) {
                Ok(value) => FileState::Present {
                    value,
                    writable: sys.mode_allows_write(f),
                },
                Err(e) if e.kind == ErrorKind::NotFound => FileState::Missing,
                Err(e) => FileState::Unreadable {
                    reason: e.errno_name(),
                },
            };
            st.files.insert(f.clone(), state);
        }
        st.files_of.insert(k.name.to_string(), files);
    }
    st
}
