//! Where this machine's cgroups are and what cpushield names its own in
//! them: the layout every component reads through the snapshot (the
//! mechanism makes the shield's cgroups in it, the tasks are moved between
//! them, status reads them back). Read-only.

use serde::{Deserialize, Serialize};

use crate::sys::procfs::{self, Hierarchy};
use crate::sys::Sys;

/// Name of the cgroup (v2 partition, v1 rt cpuset) that holds the shield.
pub const SHIELD_CGROUP: &str = "cpushield";
/// The shield's transient slice on a systemd host (cgroup v2): its cgroup
/// is `cpushield.slice` under the root, its processes are in scopes below.
pub const SHIELD_SLICE: &str = "cpushield.slice";
/// Whether a thread in cgroup `cgroup` (as `/proc/PID/cgroup` names it) is
/// inside the shield: its cgroup or one below it. On a Kubernetes node the
/// pods' cgroups are kubelet's to place (exclusive CPUs or the shared
/// pool): the shield leaves them alone as it leaves its own.
pub fn in_shield_cgroup(cgroup: &str) -> bool {
    crate::kubelet::under_any(cgroup, &[SHIELD_CGROUP, SHIELD_SLICE])
        || crate::kubelet::in_pod_cgroup(cgroup)
}
/// Name of the v1 cpuset for everything else (the housekeeping CPUs).
pub const SYSTEM_CGROUP_V1: &str = "cpushield-system";
/// Where cgroup2 is mounted when nothing is, but `/sys/fs/cgroup` is
/// taken by another mount (a tmpfs of v1 hierarchies): a directory of
/// cpushield's own run directory.
pub const CGROUP2_FALLBACK: &str = "run/cpushield/cgroup2";
/// Where cgroup2 is normally mounted.
pub const CGROUP2_MOUNT: &str = "sys/fs/cgroup";

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

/// A machine not read yet: no mechanism known.
impl Default for CgroupSetup {
    fn default() -> Self {
        CgroupSetup::Unsupported {
            reason: "the cgroup hierarchy was not read".into(),
        }
    }
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

/// Finds the cpuset mechanism from the mount table. A v1 cpuset hierarchy
/// wins (the controller cannot be on both); otherwise cgroup2 with
/// `cpuset` in its root `cgroup.controllers`.
pub fn detect_cgroup(sys: &Sys) -> crate::sys::Result<CgroupSetup> {
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
