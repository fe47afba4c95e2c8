//! The cgroup mechanism of the shield, in its three forms: a cgroup v2
//! partition of cpushield's own, a systemd slice with a partition, and
//! cgroup v1 cpusets (an exclusive one for the shield, one for the rest).
//! What each form plans, how it resizes in place, and whether it still
//! holds, judged by what the kernel reads back.

mod hold;

use crate::shield::component::{Changing, Component, Draft, InPlace, Looking, Planning, Slot};
use crate::shield::parts::{Line, PartReport};
use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;
use crate::finding::{Finding, Severity};
use crate::shield::apply::reads_as;
use crate::shield::change::{Action, Check, Owner, Step, Undo};
use crate::shield::holds::Holds;
use crate::shield::journal::State;
use crate::shield::note::Note;
use crate::shield::plan_error::PlanError;
use crate::sys::procfs::{self, Hierarchy};
use crate::sys::systemd::{self, SystemdCall};
use crate::sys::Sys;

/// This component, as it names itself in the journal and in reports.
pub const OWNER: Owner = Owner("cgroups");

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

/// Readies the shield's cgroups for `off` to move real-time tasks out on
/// the CPUs they have (see the tasks component's `realtime.rs`), and says
/// where such a task goes instead of the file its move back names. A v2 partition gives its
/// CPUs back to its parent first (`member`, what undo writes anyway):
/// moving a task into a cgroup resets its affinity to that cgroup's
/// CPUs on 6.1, and while the partition stands every cgroup outside it
/// holds the housekeeping CPUs only. On v1 the system cpuset keeps the
/// housekeeping CPUs until undo removes it, so a kept task goes straight
/// to the root cpuset it empties into. A write the kernel refuses here is
/// left to undo, which makes it again and reports it.
pub(in crate::shield) fn release_for_kept(sys: &Sys, state: &State) -> HashMap<String, String> {
    if state.partition.is_some() {
        let file = format!("{}/cpuset.cpus.partition", state.shield_dir);
        if sys.exists(&file) {
            let _ = sys.write(&file, "member");
        }
        return HashMap::new();
    }
    let Some((system, _)) = state.outside_procs.rsplit_once('/') else {
        return HashMap::new();
    };
    match system.rsplit_once('/') {
        Some((root, name)) if name == SYSTEM_CGROUP_V1 => ["cgroup.procs", "tasks"]
            .into_iter()
            .map(|f| (format!("{system}/{f}"), format!("{root}/{f}")))
            .collect(),
        _ => HashMap::new(),
    }
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

/// What the mechanism is planned from: the cgroup hierarchy, whether
/// systemd manages it (and which systemd), and the boot-isolated CPUs.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    /// The hierarchy with cpuset, as found.
    pub cgroup: &'a CgroupSetup,
    /// systemd runs the machine.
    pub systemd: bool,
    /// Its version, when known.
    pub systemd_version: Option<u32>,
    /// CPUs isolated at boot (`isolcpus=`).
    pub boot_isolated: &'a CpuSet,
}

/// The shield's cgroup and how it was made.
/// The steps that make the mechanism, the shield's cgroup and its partition.
pub(in crate::shield) struct CgroupPlan {
    /// The steps, in order.
    pub(in crate::shield) steps: Vec<Step>,
    /// The shield's cgroup directory.
    pub(in crate::shield) shield_dir: String,
    /// The partition type written (v2).
    pub(in crate::shield) partition: Option<String>,
}

fn fatal(action: Action) -> Step {
    Step::fatal(OWNER, action)
}

/// The cpusets: a systemd slice or a cgroup of our own with an isolated
/// (or root) partition on v2, an exclusive cpuset and a system cpuset on
/// v1; cgroup2 mounted first when no hierarchy with cpuset is.
pub(in crate::shield) fn plan(
    m: Facts,
    shield: &CpuSet,
    housekeeping: &CpuSet,
    notes: &mut Vec<Note>,
) -> Result<CgroupPlan, PlanError> {
    let mut steps = Vec::new();
    // No hierarchy with cpuset is mounted: mount cgroup2, whose fresh root
    // enables no controller for its children yet.
    let mounted;
    let cgroup = match m.cgroup {
        CgroupSetup::V2Unmounted { mount, make_dir } => {
            steps.push(fatal(Action::MountCgroup2 {
                target: mount.clone(),
                make_dir: *make_dir,
            }));
            notes.push(Note::MountingCgroup2 {
                mount: mount.clone(),
            });
            mounted = CgroupSetup::V2 {
                mount: mount.clone(),
                subtree_control: Vec::new(),
                has_exclusive: false,
            };
            &mounted
        }
        other => other,
    };
    match cgroup {
        CgroupSetup::V2Unmounted { .. } => unreachable!("planned as mounted above"),
        CgroupSetup::Unsupported { reason } => Err(PlanError::NoCpuset(reason.clone())),
        CgroupSetup::V2 {
            mount,
            subtree_control,
            ..
        } => Ok(cgroup_v2(m, mount, subtree_control, shield, steps, notes)),
        CgroupSetup::V1 {
            mount,
            mems,
            load_balance,
        } => Ok(cgroup_v1(
            mount,
            mems,
            load_balance,
            shield,
            housekeeping,
            steps,
        )),
    }
}

/// Whether systemd makes the shield's partition (`CPUSetPartition=`,
/// systemd 261 and later) rather than cpushield writing the file.
fn systemd_makes_partition(m: Facts) -> bool {
    m.systemd
        && m.systemd_version
            .is_some_and(|v| v >= systemd::PARTITION_SINCE)
}

/// cgroup v2: the shield's cgroup (a systemd slice, or a cgroup of our own
/// with +cpuset enabled), then its partition.
fn cgroup_v2(
    m: Facts,
    mount: &str,
    subtree_control: &[String],
    shield: &CpuSet,
    mut steps: Vec<Step>,
    notes: &mut Vec<Note>,
) -> CgroupPlan {
    // Always `isolated`. The kernel's rule since 6.7 (cgroup-v2.rst, commit
    // 4a74e418881f): CPUs isolated at boot (isolcpus=domain) may be in an
    // `isolated` partition only; a `root` partition over one reads back
    // "root invalid (partition config conflicts with housekeeping setup)".
    // 6.1 has no such check, 7.x accepts any mix in an isolated partition,
    // and Debian's 6.12 refuses every partition over such a CPU: `on`
    // rolls back and says why (ShieldError::RolledBack's hint).
    let kind = "isolated";
    let by_systemd = systemd_makes_partition(m);
    let shield_dir = if m.systemd {
        // systemd enables in each subtree_control only what its own
        // units need, and takes back at the next reload or unit
        // start what others enabled (tests/vm/SYSTEMD-NOTES.md 1):
        // the shield is a unit of its own, whose AllowedCPUs= make
        // systemd keep +cpuset in the root and write cpuset.cpus; from
        // systemd 261 its CPUSetPartition= make systemd write the
        // partition too, rather than cpushield behind its back.
        let dir = format!("{mount}/{SHIELD_SLICE}");
        steps.push(fatal(Action::Systemd {
            call: SystemdCall::StartSlice {
                unit: SHIELD_SLICE.into(),
                cpus: shield.clone(),
                cgroup_dir: dir.clone(),
                partition: by_systemd.then(|| kind.to_string()),
            },
            undo: Some(SystemdCall::Stop {
                unit: SHIELD_SLICE.into(),
            }),
            back: None,
        }));
        dir
    } else {
        if !subtree_control.iter().any(|c| c == "cpuset") {
            steps.push(fatal(Action::Write {
                path: format!("{mount}/cgroup.subtree_control"),
                value: "+cpuset".into(),
                check: Check::None,
                undo: Undo::Value("-cpuset".into()),
            }));
        }
        let dir = format!("{mount}/{SHIELD_CGROUP}");
        steps.push(fatal(Action::Mkdir { path: dir.clone() }));
        steps.push(fatal(Action::Write {
            path: format!("{dir}/cpuset.cpus"),
            value: shield.to_string(),
            check: Check::CpuList,
            undo: Undo::Nothing,
        }));
        dir
    };
    let both = m.boot_isolated.intersection(shield);
    if !both.is_empty() {
        notes.push(Note::AlsoIsolatedAtBoot { cpus: both });
    }
    if !by_systemd {
        steps.push(fatal(Action::Write {
            path: format!("{shield_dir}/cpuset.cpus.partition"),
            value: kind.into(),
            check: Check::Partition,
            undo: Undo::Value("member".into()),
        }));
    }
    CgroupPlan {
        steps,
        shield_dir,
        partition: Some(kind.to_string()),
    }
}

/// cgroup v1: an exclusive cpuset for the shield without load balancing,
/// a system cpuset for the rest, and no balancing across the root.
fn cgroup_v1(
    mount: &str,
    mems: &str,
    load_balance: &str,
    shield: &CpuSet,
    housekeeping: &CpuSet,
    mut steps: Vec<Step>,
) -> CgroupPlan {
    let rt = format!("{mount}/{SHIELD_CGROUP}");
    let nrt = format!("{mount}/{SYSTEM_CGROUP_V1}");
    // A new cpuset has no memory nodes, and a task cannot join a
    // cpuset with none (ENOSPC): copy the root's.
    for (dir, cpus, exclusive, balance) in [(&rt, shield, "1", "0"), (&nrt, housekeeping, "0", "1")]
    {
        steps.push(fatal(Action::Mkdir { path: dir.clone() }));
        for (file, value, check) in [
            ("cpuset.cpus", cpus.to_string(), Check::CpuList),
            ("cpuset.mems", mems.to_string(), Check::Text),
            ("cpuset.cpu_exclusive", exclusive.to_string(), Check::Text),
            (
                "cpuset.sched_load_balance",
                balance.to_string(),
                Check::Text,
            ),
        ] {
            steps.push(fatal(Action::Write {
                path: format!("{dir}/{file}"),
                value,
                check,
                undo: Undo::Nothing,
            }));
        }
    }
    if load_balance != "0" {
        steps.push(fatal(Action::Write {
            path: format!("{mount}/cpuset.sched_load_balance"),
            value: "0".into(),
            check: Check::Text,
            undo: Undo::Previous,
        }));
    }
    CgroupPlan {
        steps,
        shield_dir: rt,
        partition: None,
    }
}

/// The mechanism's name for reports: the cgroup mechanism, and whether
/// systemd holds it.
pub fn name(m: Facts) -> String {
    let base = m.cgroup.mechanism();
    match m.cgroup {
        CgroupSetup::V2 { .. } if systemd_makes_partition(m) => {
            format!("{base} (systemd slice, CPUSetPartition=)")
        }
        CgroupSetup::V2 { .. } if m.systemd => format!("{base} (systemd slice)"),
        _ => base.to_string(),
    }
}

/// The request to systemd that gives the shield's slice (its cgroup `dir`)
/// the CPUs `to` instead of `from`, undone by the reverse.
fn set_allowed_cpus(dir: &str, from: &CpuSet, to: &CpuSet) -> Action {
    let call = |cpus: &CpuSet| SystemdCall::SetAllowedCpus {
        unit: SHIELD_SLICE.into(),
        cpus: cpus.clone(),
        cgroup_dir: dir.to_string(),
        partition: None,
    };
    Action::Systemd {
        call: call(to),
        undo: Some(call(from)),
        back: None,
    }
}

/// The steps that turn the shield's cgroup from the old CPUs into the new
/// ones, each undone by writing back what it read (fatal: a shield that
/// cannot take its new CPUs is rolled back to the old one). The partition
/// type is written again when it does not read back (a repair).
pub(in crate::shield) fn resize(
    m: Facts,
    state: &State,
    (to, housekeeping, partition): (&CpuSet, &CpuSet, Option<&String>),
    read: &impl Fn(&str) -> Option<String>,
) -> Vec<Step> {
    let from = &state.shield;
    let dir = &state.shield_dir;
    let fatal = |action| Step::fatal(OWNER, action);
    let write = |path: String, value: String, check| {
        fatal(Action::Write {
            path,
            value,
            check,
            undo: Undo::Previous,
        })
    };
    let mut out = Vec::new();
    match m.cgroup {
        CgroupSetup::V1 { mount, .. } if from != to => {
            // The shield cpuset is exclusive: no sibling may share its
            // CPUs, so it lets go of that before the system cpuset takes
            // the CPUs it gives back.
            let system = format!("{mount}/{SYSTEM_CGROUP_V1}");
            for (path, value, check) in [
                (
                    format!("{dir}/cpuset.cpu_exclusive"),
                    "0".to_string(),
                    Check::Text,
                ),
                (
                    format!("{system}/cpuset.cpus"),
                    housekeeping.to_string(),
                    Check::CpuList,
                ),
                (format!("{dir}/cpuset.cpus"), to.to_string(), Check::CpuList),
                (
                    format!("{dir}/cpuset.cpu_exclusive"),
                    "1".to_string(),
                    Check::Text,
                ),
            ] {
                out.push(write(path, value, check));
            }
        }
        CgroupSetup::V1 { .. } => {}
        _ if dir.ends_with(SHIELD_SLICE) && systemd_makes_partition(m) => {
            out.extend(
                partition.and_then(|kind| ask_systemd(dir, (from, to), kind.as_str(), read)),
            );
        }
        _ => {
            if from != to {
                out.push(if dir.ends_with(SHIELD_SLICE) {
                    fatal(set_allowed_cpus(dir, from, to))
                } else {
                    write(format!("{dir}/cpuset.cpus"), to.to_string(), Check::CpuList)
                });
            }
            // Written again after a resize, whose read-back proves the
            // partition took its new CPUs; else only when it does not read
            // back (a repair).
            if let Some(kind) = partition {
                let path = format!("{dir}/cpuset.cpus.partition");
                let holds = read(&path).is_some_and(|now| reads_as(Check::Partition, &now, kind));
                if from != to || !holds {
                    out.push(write(path, kind.clone(), Check::Partition));
                }
            }
        }
    }
    out
}

/// A change in place of a slice whose partition systemd keeps (systemd 261
/// and later): the partition asked again with the new CPUs, or alone (the
/// same CPUs) when it does not read back (a repair); nothing when both hold.
fn ask_systemd(
    dir: &str,
    (from, to): (&CpuSet, &CpuSet),
    kind: &str,
    read: &impl Fn(&str) -> Option<String>,
) -> Option<Step> {
    let path = format!("{dir}/cpuset.cpus.partition");
    let holds = read(&path).is_some_and(|now| reads_as(Check::Partition, &now, kind));
    if from == to && holds {
        return None;
    }
    let call = |cpus: &CpuSet| SystemdCall::SetAllowedCpus {
        unit: SHIELD_SLICE.into(),
        cpus: cpus.clone(),
        cgroup_dir: dir.to_string(),
        partition: Some(kind.to_string()),
    };
    Some(Step::fatal(
        OWNER,
        Action::Systemd {
            call: call(to),
            undo: Some(call(from)),
            back: None,
        },
    ))
}

/// What `status` says of the cgroups (`--json`).
#[derive(Debug, Serialize)]
struct Status {
    /// The shield cgroup's `cpuset.cpus.partition` as it reads back (v2).
    partition: Option<String>,
}

/// The cgroups, as a component of the shield.
pub(in crate::shield) struct Part;

impl Component for Part {
    fn owner(&self) -> Owner {
        OWNER
    }

    fn check(&self, _: &Planning, _: &mut Draft) -> Result<(), PlanError> {
        Ok(())
    }

    fn plan(&self, cx: &Planning, d: &mut Draft) -> Result<(), PlanError> {
        // A tuned profile that pins CPUs fights cgroups it did not make.
        d.plan
            .notes
            .extend(crate::shield::plan::tuned_notes(&cx.snap.owners));
        let facts = cx.snap.mechanism();
        let cgroup = plan(facts, cx.shield, cx.housekeeping, &mut d.plan.notes)?;
        d.plan.mechanism = name(facts);
        d.plan.partition = cgroup.partition;
        d.plan.shield_dir = cgroup.shield_dir;
        d.add(Slot::Cgroups, cgroup.steps);
        Ok(())
    }

    /// The partition as it reads back, and what the kernel would refuse.
    fn status(&self, cx: &Looking) -> Option<PartReport> {
        let hold = hold::read_hold(cx.sys, cx.state, &cx.snap.cgroup);
        let partition = hold.partition().map(str::to_string);
        let mut part = PartReport::new(OWNER.name(), &Status { partition });
        part.lines = (hold.partition().iter())
            .map(|p| Line::new("partition", *p))
            .collect();
        part.findings = hold.lost(cx.state, cx.repair);
        Some(part)
    }

    /// Resized instead of made.
    fn change(&self, cx: &InPlace, _: Vec<(Slot, Step)>, out: &mut Changing) {
        let to = (&cx.fresh.shield, &cx.fresh.housekeeping);
        let cpus = (to.0, to.1, cx.fresh.partition.as_ref());
        let resized = resize(cx.live.mechanism(), cx.state, cpus, &cx.read);
        out.add(Slot::Cgroups, resized);
    }
}
