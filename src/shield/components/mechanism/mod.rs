//! The cgroup mechanism of the shield, in its four forms: a cgroup v2
//! partition of cpushield's own, a systemd slice with a partition, cgroup
//! v1 cpusets (an exclusive one for the shield, one for the rest), and on
//! a Kubernetes node the OS's units confined to kubelet's reserved CPUs
//! with no partition ([`kubernetes`]).
//! What each form plans, how it resizes in place, and whether it still
//! holds, judged by what the kernel reads back.

mod hold;
mod kubernetes;
mod notes;
pub mod named;
mod options;
mod sets;

pub use notes::MechanismNote;
pub use options::{Balance, Options};

use crate::shield::component::{Keeps, Looks};
use crate::shield::component::{Changing, Component, Draft, InPlace, Looking, Phase, Planning};
use crate::shield::parts::{Line, PartReport};
use std::collections::HashMap;

use crate::cpulist::CpuSet;
use crate::finding::{Finding, Severity};
use crate::shield::apply::reads_as;
use crate::shield::change::{Action, Check, Owner, Step, Undo};
use crate::shield::holds::Holds;
use crate::shield::journal::State;
use crate::shield::note::{Note, OwnNote};
use crate::shield::plan_error::PlanError;
use crate::sys::systemd::{self, SystemdCall};
use crate::sys::Sys;
use serde::Serialize;

use crate::shield::snapshot::{CgroupSetup, SHIELD_CGROUP, SHIELD_SLICE, SYSTEM_CGROUP_V1};

/// This component, as it names itself in the journal and in reports.
pub const OWNER: Owner = Owner("cgroups");

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
fn release_for_kept(sys: &Sys, state: &State) -> HashMap<String, String> {
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

impl crate::shield::snapshot::Snapshot {
    /// The cgroup mechanism's name for reports (and whether systemd holds
    /// it).
    pub(in crate::shield) fn mechanism_name(&self) -> String {
        if self.owners.kubernetes.is_some() {
            return kubernetes::NAME.into();
        }
        name(self.mechanism())
    }

    /// What the cgroup mechanism is planned from.
    pub(in crate::shield) fn mechanism(&self) -> Facts<'_> {
        Facts {
            cgroup: &self.cgroup,
            systemd: self.owners.systemd,
            systemd_version: self.owners.systemd_version,
            boot_isolated: &self.boot_isolated,
        }
    }
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
    (shield, housekeeping): (&CpuSet, &CpuSet),
    balance: Balance,
    notes: &mut Vec<Note>,
) -> Result<CgroupPlan, PlanError> {
    let both = m.boot_isolated.intersection(shield);
    if balance == Balance::Within && !both.is_empty() {
        return Err(PlanError::Part {
            option: "--balance",
            message: format!(
                "within: CPUs {both} are isolated at boot (isolcpus= with domain, /sys/devices/system/cpu/isolated): the kernel keeps them out of every scheduling domain, so nothing balances there, and refuses a root partition over them since 6.7; use --balance off, or boot without isolcpus=domain for them (cpushield boot-args)"
            ),
        });
    }
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
            let note = MechanismNote::MountingCgroup2 {
                mount: mount.clone(),
            };
            notes.push(note.note());
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
        } => Ok(cgroup_v2(m, mount, subtree_control, (shield, balance), steps, notes)),
        CgroupSetup::V1 {
            mount,
            mems,
            load_balance,
        } => Ok(cgroup_v1(
            mount,
            mems,
            load_balance,
            (shield, balance),
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
    (shield, balance): (&CpuSet, Balance),
    mut steps: Vec<Step>,
    notes: &mut Vec<Note>,
) -> CgroupPlan {
    // `isolated`, or `root` to balance within (`plan` refused that over
    // CPUs isolated at boot). The kernel's rule since 6.7 (cgroup-v2.rst,
    // commit 4a74e418881f): CPUs isolated at boot (isolcpus=domain) may be
    // in an `isolated` partition only; a `root` partition over one reads
    // back "root invalid (partition config conflicts with housekeeping
    // setup)". 6.1 has no such check, 7.x accepts any mix in an isolated
    // partition, and Debian's 6.12 refuses every partition over such a
    // CPU: `on` rolls back and says why (ShieldError::RolledBack's hint).
    let kind = balance.partition();
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
        notes.push(MechanismNote::AlsoIsolatedAtBoot { cpus: both }.note());
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

/// cgroup v1: an exclusive cpuset for the shield (load balancing within
/// it only when `balance` says so), a system cpuset for the rest, and no
/// balancing across the root.
fn cgroup_v1(
    mount: &str,
    mems: &str,
    load_balance: &str,
    (shield, balance): (&CpuSet, Balance),
    housekeeping: &CpuSet,
    mut steps: Vec<Step>,
) -> CgroupPlan {
    let rt = format!("{mount}/{SHIELD_CGROUP}");
    let nrt = format!("{mount}/{SYSTEM_CGROUP_V1}");
    // A new cpuset has no memory nodes, and a task cannot join a
    // cpuset with none (ENOSPC): copy the root's.
    let shield_balance = balance.v1_load_balance();
    for (dir, cpus, exclusive, balance) in [
        (&rt, shield, "1", shield_balance),
        (&nrt, housekeeping, "0", "1"),
    ]
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

/// The steps that make the named sets `named` inside the shield's cgroup
/// `shield_dir` (on cgroup v2 without systemd, its children given cpusets
/// first).
fn sets_made(m: Facts, shield_dir: &str, named: &[sets::NamedSet], balance: Balance) -> Vec<Step> {
    let mut steps = Vec::new();
    if named.is_empty() {
        return steps;
    }
    let (mems, load_balance) = match m.cgroup {
        CgroupSetup::V1 { mems, .. } => (mems.as_str(), balance.v1_load_balance()),
        _ => ("", ""),
    };
    if !m.systemd && !matches!(m.cgroup, CgroupSetup::V1 { .. }) {
        steps.push(sets::enable_cpuset(shield_dir));
    }
    for set in named {
        steps.extend(sets::make(m.cgroup, shield_dir, set, (mems, load_balance)));
    }
    steps
}

/// The v1 shield cpuset's CPUs written again after the shield's CPUs went
/// offline and back: v1 takes an offline CPU out of every cpuset and gives
/// it back to the root only. Undone by the step that first wrote them.
fn v1_cpus_again(dir: &str, shield: &CpuSet) -> Step {
    fatal(Action::Write {
        path: format!("{dir}/cpuset.cpus"),
        value: shield.to_string(),
        check: Check::CpuList,
        undo: Undo::Nothing,
    })
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

    /// The cgroups it makes and their files, the mounts it may make, the
    /// slice, and the partitions it asks for: `isolated`, `root` for
    /// `--balance within` (and what an older plan could ask).
    fn reaches(&self, reach: &mut crate::shield::reach::Reach) {
        use crate::shield::cgroup_layout::{CGROUP2_FALLBACK, CGROUP2_MOUNT};
        let strings = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        reach.mounts.extend(strings(&[CGROUP2_MOUNT, CGROUP2_FALLBACK]));
        reach.cgroup_files.extend(strings(&[
            "cgroup.subtree_control",
            "cgroup.procs",
            "tasks",
            "cpuset.cpus",
            "cpuset.mems",
            "cpuset.cpus.partition",
            "cpuset.cpu_exclusive",
            "cpuset.sched_load_balance",
        ]));
        reach.cgroup_dirs.extend(strings(&[SHIELD_CGROUP, SYSTEM_CGROUP_V1]));
        reach.cgroup_dirs.push(format!("{SHIELD_CGROUP}/*"));
        reach.units.push(SHIELD_SLICE.to_string());
        reach.units.push(sets::unit("*"));
        reach.resized_units.extend(strings(&crate::shield::owners::kubernetes::OS_UNITS));
        reach.partitions.extend(strings(&["isolated", "root"]));
    }

    /// On a Kubernetes node, the shield kubelet allows: see
    /// [`kubernetes::check`].
    fn check(&self, cx: &Planning, _: &mut Draft) -> Result<(), PlanError> {
        let named = options::sets(cx.req);
        sets::check(&named, cx.shield)?;
        if !named.is_empty() && cx.snap.owners.kubernetes.is_some() {
            return Err(PlanError::Part {
                option: "--set",
                message: "--set: on a Kubernetes node the shield has no cgroup of its own (kubelet places the pods on its CPUs); leave --set out".into(),
            });
        }
        match &cx.snap.owners.kubernetes {
            None if options::kubernetes_required(cx.req) => Err(PlanError::Part {
                option: "--kubernetes",
                message: "this is no Kubernetes node: no kubelet process runs (outside users' sessions) and no thread is in kubelet's pod cgroups (kubepods); start kubelet first, or leave --kubernetes out".into(),
            }),
            None => Ok(()),
            Some(node) => kubernetes::check(node, cx),
        }
    }

    fn plan(&self, cx: &Planning, d: &mut Draft) -> Result<(), PlanError> {
        // A tuned profile that pins CPUs fights cgroups it did not make.
        d.plan
            .notes
            .extend(crate::shield::plan::tuned_notes(&cx.snap.owners));
        let facts = cx.snap.mechanism();
        if let Some(node) = &cx.snap.owners.kubernetes {
            // No cgroup or partition of the shield's own: the plan's
            // shield_dir stays empty, which says so to the other parts.
            d.plan.mechanism = kubernetes::NAME.into();
            let confined = kubernetes::Confined {
                units: node.os_units.clone(),
            };
            d.plan.parts.put(OWNER.name(), &confined);
            (d.plan.notes).extend(kubernetes::notes(node, &cx.snap.sibling_groups));
            d.add(Phase::Shield, kubernetes::confine(node, cx.housekeeping));
            return Ok(());
        }
        let balance = options::asked(cx.req);
        let cpus = (cx.shield, cx.housekeeping);
        let cgroup = plan(facts, cpus, balance, &mut d.plan.notes)?;
        d.plan.mechanism = name(facts);
        d.plan.partition = cgroup.partition;
        d.plan.shield_dir = cgroup.shield_dir;
        d.add(Phase::Shield, cgroup.steps);
        let named = options::sets(cx.req);
        d.add(Phase::Shield, sets_made(facts, &d.plan.shield_dir, &named, balance));
        if let CgroupSetup::V1 { .. } = &facts.cgroup {
            d.add(
                Phase::AfterCpuRestart,
                [v1_cpus_again(&d.plan.shield_dir, cx.shield)],
            );
            let again: Vec<Step> = (named.iter())
                .map(|set| v1_cpus_again(&sets::dir(&d.plan.shield_dir, &set.name), &set.cpus))
                .collect();
            d.add(Phase::AfterCpuRestart, again);
        }
        Ok(())
    }

    /// Resized instead of made; on v1 the shield cpuset's load balancing
    /// written again when `--balance` changed it.
    fn change(&self, cx: &InPlace, fresh: Vec<(Phase, Step)>, out: &mut Changing) {
        if cx.state.shield_dir.is_empty() {
            // A Kubernetes-mode shield: each unit confined again where it
            // is not; the units' CPUs from before the first shield kept.
            if let Some(node) = &cx.live.owners.kubernetes {
                out.add(
                    Phase::Shield,
                    kubernetes::confine(node, &cx.fresh.housekeeping),
                );
            }
            if let Some(before) = cx.state.parts.get::<kubernetes::Confined>(OWNER.name()) {
                out.change.records.put(OWNER.name(), &before);
            }
            return;
        }
        let to = (&cx.fresh.shield, &cx.fresh.housekeeping);
        let cpus = (to.0, to.1, cx.fresh.partition.as_ref());
        let live = cx.live.mechanism();
        let mut resized = resize(live, cx.state, cpus, &cx.read);
        let balance_file = format!("{}/cpuset.sched_load_balance", cx.fresh.shield_dir);
        let wanted = fresh.iter().find_map(|(_, step)| match &step.action {
            Action::Write { path, value, .. } if *path == balance_file => Some(value.clone()),
            _ => None,
        });
        if let (CgroupSetup::V1 { .. }, Some(value)) = (&live.cgroup, wanted) {
            if (cx.read)(&balance_file).is_some_and(|now| now.trim() != value) {
                resized.push(Step::fatal(
                    OWNER,
                    Action::Write {
                        path: balance_file,
                        value,
                        check: Check::Text,
                        undo: Undo::Previous,
                    },
                ));
            }
        }
        let old_sets = cx.state.request.as_ref().map(options::sets).unwrap_or_default();
        let new_sets = options::sets(cx.req);
        let balance = options::asked(cx.req);
        let mems = match &live.cgroup {
            CgroupSetup::V1 { mems, .. } => mems.as_str(),
            _ => "",
        };
        let change = sets::Change {
            cgroup: live.cgroup,
            systemd: cx.state.shield_dir.ends_with(SHIELD_SLICE),
            shield_dir: &cx.state.shield_dir,
            sets: (&old_sets, &new_sets),
            shield: to.0,
            v1: (mems, balance.v1_load_balance()),
            read: cx.read,
        };
        let (before, after) = match sets::change(&change) {
            Ok(steps) => steps,
            Err(refusal) => {
                out.refused = Some(refusal);
                return;
            }
        };
        out.add(Phase::Shield, before);
        out.add(Phase::Shield, resized);
        out.add(Phase::Shield, after);
        if let (CgroupSetup::V1 { .. }, true) = (&live.cgroup, cx.state.shield != *to.0) {
            out.add(
                Phase::AfterCpuRestart,
                [v1_cpus_again(&cx.state.shield_dir, to.0)],
            );
            let again: Vec<Step> = (new_sets.iter())
                .map(|set| v1_cpus_again(&sets::dir(&cx.state.shield_dir, &set.name), &set.cpus))
                .collect();
            out.add(Phase::AfterCpuRestart, again);
        }
    }

    fn undoes(&self) -> Option<&dyn crate::shield::component::Undoes> {
        Some(self)
    }

    /// The OS's units a Kubernetes-mode shield confined, with the CPUs
    /// they had.
    fn record(
        &self,
        plan: &crate::shield::plan::Plan,
        _: &crate::shield::OnReport,
    ) -> Option<serde_json::Value> {
        plan.parts.get::<serde_json::Value>(OWNER.name())
    }

    fn looks(&self) -> Option<&dyn Looks> {
        Some(self)
    }

    fn keeps(&self) -> Option<&dyn Keeps> {
        Some(self)
    }
}

/// A named set taken away by a change in place ([`sets::Own`]).
impl crate::shield::component::Undoes for Part {
    fn make(&self, sys: &Sys, action: &Action) -> Option<Result<(), crate::shield::apply::ApplyError>> {
        let own = sets::own_of(action)?;
        Some(sets::make_own(sys, &own).map_err(crate::shield::apply::ApplyError::Kernel))
    }

    fn cgroup_removed(&self, action: &Action) -> Option<String> {
        let sets::Own::DropSet { dir, .. } = sets::own_of(action)?;
        Some(dir)
    }

    fn undo(&self, sys: &Sys, entry: &crate::shield::journal::Entry, out: &mut crate::shield::undo::Undone) -> bool {
        let Some(own) = sets::own_of(&entry.action) else {
            return false;
        };
        match sets::undo_own(sys, &own) {
            Ok(()) => out.restored += 1,
            Err(err) => out.failed.push(crate::shield::apply::Refusal {
                target: sets::describe(&own),
                reason: err.to_string(),
            }),
        }
        true
    }

    fn within(&self, action: &Action, bounds: &crate::shield::reach::Bounds) -> Option<Result<(), String>> {
        sets::own_of(action).map(|own| sets::own_within(&own, bounds))
    }

    fn describe(&self, action: &Action) -> Option<String> {
        sets::own_of(action).map(|own| sets::describe(&own))
    }
}

/// Tasks kept through `off` leave the shield's cgroups on their CPUs.
impl Keeps for Part {
    fn release_for_kept(&self, sys: &Sys, state: &State) -> HashMap<String, String> {
        release_for_kept(sys, state)
    }
}

impl Looks for Part {
    /// The partition as it reads back, and what the kernel would refuse.
    fn status(&self, cx: &Looking) -> Option<PartReport> {
        if let Some(confined) = cx.state.parts.get::<kubernetes::Confined>(OWNER.name()) {
            let mut part = PartReport::new(OWNER.name(), &confined);
            part.lines = vec![Line::new(
                "OS units confined",
                (confined.units.iter())
                    .map(|u| u.unit.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            )];
            let node = cx.snap.owners.kubernetes.as_ref();
            part.findings = kubernetes::lost(cx.sys, (cx.state, node), &confined, cx.repair);
            // What `on` noted of kubelet's settings, as they read now: no
            // breakage of the shield, but what a pod gets of it (advice).
            let noted = node.map(|n| kubernetes::said(n, &cx.snap.sibling_groups));
            part.findings.extend((noted.iter().flatten()).map(|n| {
                let next = "change kubelet's configuration as said (docs/kubernetes.md)";
                crate::finding::Finding::new("kubelet", crate::finding::Severity::Warn, 30, n.text(), next)
            }));
            return Some(part);
        }
        let hold = hold::read_hold(cx.sys, cx.state, &cx.snap.cgroup);
        let partition = hold.partition().map(str::to_string);
        let mut part = PartReport::new(OWNER.name(), &Status { partition });
        part.lines = (hold.partition().iter())
            .map(|p| Line::new("partition", *p))
            .collect();
        part.findings = hold.lost(cx.state, cx.repair);
        let named = cx.state.request.as_ref().map(options::sets).unwrap_or_default();
        if !named.is_empty() {
            let (line, lost) = sets::read_back(cx.sys, &cx.state.shield_dir, &named);
            part.lines.push(Line::new("sets", line));
            part.findings.extend(
                (lost.into_iter())
                    .map(|why| crate::finding::Finding::new("sets", crate::finding::Severity::Bad, 80, why, cx.repair)),
            );
        }
        Some(part)
    }
}
