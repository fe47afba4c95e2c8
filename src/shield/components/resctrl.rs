//! The resctrl component: the shielded CPUs' own share of the L3 cache
//! (Intel RDT CAT, AMD PQoS) and, optionally, a memory bandwidth limit for
//! everything else (MBA). A group of resctrl's own, `cpushield`, gets the
//! shielded CPUs and the top `--cache-ways` ways of each L3 cache they sit
//! in; the default group, where every other CPU and task is, keeps the
//! ways below. Everything the shield does with resctrl lives here: what is
//! read (`/proc/cpuinfo`'s flags, the mount, `info/`, the groups, each
//! CPU's L3), the check of a request against the hardware's rules, the
//! steps (mount, group, `schemata`, `cpus_list`), how a `schemata` share is
//! made, read back and undone, the change in place, whether it still holds
//! for `status`, and the outcome read back for `on`'s report.

use super::snapshot::Snapshot;
use crate::shield::change::Subject;
use crate::shield::component::{Changing, Component, Draft, InPlace, Planning, Slot};
use crate::shield::request::Request;
use crate::shield::reshape::Originals;
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;
use crate::finding::{Finding, Severity};
use crate::shield::apply::{ApplyError, Refusal};
use crate::shield::change::{Action, Check, Owner, Step, Undo};
use crate::shield::error::ShieldError;
use crate::shield::holds::Holds;
use crate::shield::journal::{Entry, State};
use crate::shield::parts::{Metric, OwnFacts, PartReport};
use crate::shield::plan::{Plan, PlanError};
use crate::shield::undo::Undone;
use crate::sys::procfs;
use crate::sys::resctrl::{self as kernel, CacheShare, Info, RESCTRL};
use crate::sys::Sys;

/// This component, as it names itself in the journal and in reports.
pub const OWNER: Owner = Owner("resctrl");

/// The shield's resctrl group.
pub const GROUP: &str = "sys/fs/resctrl/cpushield";

/// What the component reads of the machine.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Facts {
    /// `/proc/cpuinfo` lists `cat_l3`: the CPUs can allocate L3 ways.
    pub cat_l3: bool,
    /// `/proc/cpuinfo` lists `mba`: memory bandwidth allocation.
    pub mba: bool,
    /// The kernel has resctrl: `/proc/filesystems` lists it and
    /// `/sys/fs/resctrl` exists.
    pub in_kernel: bool,
    /// resctrl is mounted at `/sys/fs/resctrl`.
    pub mounted: bool,
    /// Its `info/`, when mounted.
    pub info: Option<Info>,
    /// The groups under `/sys/fs/resctrl` (relative paths), cpushield's
    /// included when it exists.
    pub groups: Vec<String>,
    /// The L3 cache id of each online CPU.
    pub l3: BTreeMap<u32, u32>,
}

impl Facts {
    /// The L3 caches of `cpus`, in order.
    pub fn domains(&self, cpus: &CpuSet) -> Vec<u32> {
        let ids: BTreeSet<u32> = cpus
            .iter()
            .filter_map(|c| self.l3.get(&c).copied())
            .collect();
        ids.into_iter().collect()
    }

    fn all_domains(&self) -> Vec<u32> {
        let ids: BTreeSet<u32> = self.l3.values().copied().collect();
        ids.into_iter().collect()
    }
}

/// Reads what the component needs of the machine (`online`: its CPUs).
pub fn read(sys: &Sys, online: &CpuSet) -> Facts {
    let flags = kernel::cpu_flags(sys);
    let filesystems = sys.read("proc/filesystems").unwrap_or_default();
    let mounted = mounted(sys);
    let groups = match mounted {
        true => sys.subdirs(RESCTRL).unwrap_or_default(),
        false => Vec::new(),
    };
    Facts {
        cat_l3: flags.contains("cat_l3"),
        mba: flags.contains("mba"),
        in_kernel: filesystems.split_whitespace().any(|f| f == "resctrl") && sys.exists(RESCTRL),
        mounted,
        info: mounted
            .then(|| kernel::read_info(sys, RESCTRL).ok())
            .flatten(),
        groups: groups
            .into_iter()
            .filter(|g| !matches!(g.as_str(), "info" | "mon_groups" | "mon_data"))
            .map(|g| format!("{RESCTRL}/{g}"))
            .collect(),
        l3: online
            .iter()
            .filter_map(|c| kernel::l3_domain(sys, c).map(|d| (c, d)))
            .collect(),
    }
}

fn mounted(sys: &Sys) -> bool {
    let text = sys.read("proc/self/mounts").unwrap_or_default();
    let at = format!("/{RESCTRL}");
    procfs::parse_mounts(&text)
        .iter()
        .any(|m| m.fstype == "resctrl" && m.target == at)
}

/// What a request asks of the component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ask {
    /// Ways of each L3 the shield sits in, for the shield alone.
    pub ways: u32,
    /// Memory bandwidth left to everything else, in percent.
    pub others_bandwidth: Option<u32>,
}

/// Checks a request's cache share against the machine before anything
/// changes: refused where the CPUs or the kernel have no cache
/// allocation, where another program made resctrl groups of its own, and
/// (once resctrl is mounted, when `info/` can be read) where the hardware's
/// rules do not allow the share.
pub fn check(facts: &Facts, ask: Ask) -> Result<(), PlanError> {
    let refuse = |why: String| Err(refusal(why));
    if !facts.cat_l3 {
        return refuse(
            "these CPUs cannot allocate L3 cache ways: /proc/cpuinfo lists no cat_l3 \
             (Intel RDT or AMD PQoS); leave out --cache-ways"
                .into(),
        );
    }
    if ask.others_bandwidth.is_some() && !facts.mba {
        return refuse(
            "these CPUs cannot limit memory bandwidth: /proc/cpuinfo lists no mba; \
             leave out --others-bandwidth"
                .into(),
        );
    }
    if !facts.in_kernel {
        return refuse(format!(
            "this kernel has no resctrl (not in /proc/filesystems, or no /{RESCTRL}): \
             it needs CONFIG_X86_CPU_RESCTRL"
        ));
    }
    let others: Vec<&String> = facts.groups.iter().filter(|g| *g != GROUP).collect();
    if let Some(first) = others.first() {
        return refuse(format!(
            "resctrl has groups cpushield did not make (/{first}{}): their masks may overlap \
             the shield's ways; remove them, or leave out --cache-ways",
            if others.len() > 1 { " and more" } else { "" }
        ));
    }
    if facts.groups.iter().any(|g| g == GROUP) {
        return refuse(format!(
            "/{GROUP} exists but no active shield made it: remove it (rmdir) first"
        ));
    }
    match &facts.info {
        Some(info) => check_info(info, ask),
        None => Ok(()),
    }
}

/// The hardware's rules, from `info/`.
pub fn check_info(info: &Info, ask: Ask) -> Result<(), PlanError> {
    let refuse = |why: String| Err(refusal(why));
    let Some(l3) = info.caches.first() else {
        return refuse(format!("/{RESCTRL}/info has no L3: no L3 cache allocation"));
    };
    let (ways, least) = (l3.ways(), l3.min_cbm_bits.max(1));
    if ask.ways < least || ways < ask.ways + least {
        return refuse(format!(
            "--cache-ways {}: the L3 has {ways} ways and each group needs at least {least}, \
             so the shield can have {least} to {}",
            ask.ways,
            ways.saturating_sub(least)
        ));
    }
    if info.num_closids() < 2 {
        return refuse("resctrl has a single class of service: no group can be made".into());
    }
    match (ask.others_bandwidth, &info.mb) {
        (Some(_), None) => refuse(format!(
            "/{RESCTRL}/info has no MB: no bandwidth allocation"
        )),
        (Some(bw), Some(mb)) if bw < mb.min_bandwidth || bw > 100 => refuse(format!(
            "--others-bandwidth {bw}: must be {} to 100 (percent)",
            mb.min_bandwidth
        )),
        _ => Ok(()),
    }
}

/// resctrl's own changes, journaled as [`Action::Own`] (their tags as
/// journals of version 1 wrote them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Own {
    /// Mount resctrl at `target` (it was not mounted); undone by
    /// unmounting it while it is the one mount there (see
    /// this module).
    MountResctrl {
        /// Mount point relative to the root.
        target: String,
    },
    /// Give a resctrl group its share of the L3 cache (and, for the
    /// default group, of the memory bandwidth): the `schemata` lines are
    /// made from `info/` when the step is made, written, and must read
    /// back; undone by writing back the `schemata` read just before.
    ResctrlSchemata {
        /// The group's `schemata`, relative to the root.
        path: String,
        /// Its share.
        share: crate::sys::resctrl::CacheShare,
    },
}

/// What a resctrl `schemata` write gives its group.
fn cache_share(share: &CacheShare) -> String {
    let ids = |d: &[u32]| d.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    match share {
        CacheShare::Top { ways, domains } => {
            format!("the top {ways} L3 ways of cache {}", ids(domains))
        }
        CacheShare::Rest {
            ways,
            domains,
            bandwidth,
        } => format!(
            "the L3 ways of cache {} but the top {ways}{}",
            ids(domains),
            bandwidth
                .map(|b| format!(", {b}% of the memory bandwidth"))
                .unwrap_or_default()
        ),
        CacheShare::Full => "every L3 way and all the memory bandwidth".into(),
        CacheShare::Text { schemata } => format!("{:?}", schemata.trim()),
    }
}

/// `action` as one of resctrl's own, when it is.
fn own_of(action: &Action) -> Option<Own> {
    action.own_as::<Own>()
}

/// The step of resctrl's own change `own`; a share is about its file.
fn own_step(own: Own, fatal: bool) -> Step {
    let subject = match &own {
        Own::ResctrlSchemata { path, .. } => Subject::File(path.clone()),
        Own::MountResctrl { .. } => Subject::Own,
    };
    let action = Action::own(OWNER, &own);
    let step = match fatal {
        true => Step::fatal(OWNER, action),
        false => Step::optional(OWNER, action),
    };
    Step { subject, ..step }
}

/// The refusal of a cache share that cannot be had here, and why.
fn refusal(why: String) -> PlanError {
    PlanError::Part {
        option: "--cache-ways",
        message: format!("--cache-ways: {why}"),
    }
}

/// The steps that give the shield its share: resctrl mounted if it is
/// not, the group made, its ways and the others' written, the shielded
/// CPUs given to the group.
pub fn plan(facts: &Facts, ask: Ask, shield: &CpuSet) -> Vec<Step> {
    let domains = facts.domains(shield);
    let mut steps = Vec::new();
    if !facts.mounted {
        let target = RESCTRL.to_string();
        steps.push(own_step(Own::MountResctrl { target }, true));
    }
    let group = GROUP.to_string();
    steps.push(Step::fatal(OWNER, Action::Mkdir { path: group }));
    let share = |path: String, share| own_step(Own::ResctrlSchemata { path, share }, true);
    steps.push(share(
        format!("{GROUP}/schemata"),
        CacheShare::Top {
            ways: ask.ways,
            domains: domains.clone(),
        },
    ));
    steps.push(share(
        format!("{RESCTRL}/schemata"),
        CacheShare::Rest {
            ways: ask.ways,
            domains,
            bandwidth: ask.others_bandwidth,
        },
    ));
    steps.push(Step::fatal(OWNER, group_cpus(shield)));
    steps
}

/// The shielded CPUs given to the group. Not read back by `apply`
/// ([`Check::None`]): that also keeps a change in place from writing an
/// older shield's CPUs back as if they were the machine's own; `on`'s
/// report and `status` read them back.
fn group_cpus(cpus: &CpuSet) -> Action {
    Action::Write {
        path: format!("{GROUP}/cpus_list"),
        value: cpus.to_string(),
        check: Check::None,
        undo: Undo::Previous,
    }
}

/// The facts as they were before the shield of `entries`: not mounted if
/// it mounted resctrl, without its group.
pub fn before_shield(facts: &mut Facts, entries: &[Entry]) {
    for e in entries {
        match (&e.action, own_of(&e.action)) {
            (_, Some(Own::MountResctrl { .. })) => facts.mounted = false,
            (Action::Mkdir { path }, _) if path == GROUP => facts.groups.retain(|g| g != GROUP),
            _ => {}
        }
    }
}

/// Whether a planned step already holds on the machine: resctrl mounted,
/// the group there, a share that reads back.
pub fn in_place(facts: &Facts, read: &dyn Fn(&str) -> Option<String>, action: &Action) -> bool {
    match (action, own_of(action)) {
        (_, Some(Own::MountResctrl { .. })) => facts.mounted,
        (_, Some(Own::ResctrlSchemata { path, share })) => match (&facts.info, read(&path)) {
            (Some(info), Some(now)) => {
                kernel::schemata_holds(&now, &share.schemata(info, &facts.all_domains()))
            }
            _ => false,
        },
        (Action::Mkdir { path }, _) => facts.groups.iter().any(|g| g == path),
        (Action::Write { path, value, .. }, _) => read(path).is_some_and(|now| {
            CpuSet::parse_list(now.trim()).ok() == CpuSet::parse_list(value).ok()
        }),
        _ => false,
    }
}

/// A change in place to a shield without a cache share, from one with it:
/// the group's CPUs back to the default group, and the default group's
/// `schemata` as the journal read it before the shield's first write (the
/// empty group and the mount stay until `off`).
pub fn give_back(entries: &[Entry], read: &dyn Fn(&str) -> Option<String>) -> Vec<Step> {
    let default = format!("{RESCTRL}/schemata");
    let first = entries.iter().find(|e| match own_of(&e.action) {
        Some(Own::ResctrlSchemata { path, .. }) => path == default,
        _ => false,
    });
    let Some(first) = first else {
        return Vec::new();
    };
    // Nothing read before: resctrl was mounted in the same batch, and its
    // default group had everything.
    let share = match &first.previous {
        Some(text) => CacheShare::Text {
            schemata: text.clone(),
        },
        None => CacheShare::Full,
    };
    let mut steps = Vec::new();
    let cpus = read(&format!("{GROUP}/cpus_list")).unwrap_or_default();
    if !cpus.trim().is_empty() {
        steps.push(Step::optional(OWNER, group_cpus(&CpuSet::new())));
    }
    let share = Own::ResctrlSchemata {
        path: default,
        share,
    };
    steps.push(own_step(share, false));
    steps
}

/// The files of the shield's group, which a change in place may write back.
pub fn claims(path: &str) -> Option<crate::shield::change::Subject> {
    path.starts_with(&format!("{GROUP}/"))
        .then(|| crate::shield::change::Subject::File(path.to_string()))
}

/// Mounts resctrl.
pub fn mount(sys: &Sys, target: &str) -> Result<(), ApplyError> {
    sys.mount_resctrl(target).map_err(ApplyError::from)
}

/// Writes a share to a group's `schemata`, made from `info/` now, and
/// reads it back. A refusal carries the kernel's reason from
/// `info/last_cmd_status`.
pub fn write_share(sys: &Sys, path: &str, share: &CacheShare) -> Result<(), ApplyError> {
    let info = kernel::read_info(sys, RESCTRL)?;
    let online = sys.read_cpulist("sys/devices/system/cpu/online")?;
    let all: BTreeSet<u32> = online
        .iter()
        .filter_map(|c| kernel::l3_domain(sys, c))
        .collect();
    let value = share.schemata(&info, &all.into_iter().collect::<Vec<_>>());
    if let Err(mut e) = sys.write(path, &format!("{value}\n")) {
        if let Ok(why) = sys.read_trimmed(&format!("{RESCTRL}/info/last_cmd_status")) {
            e.target = format!("{} (resctrl: {why})", e.target);
        }
        return Err(e.into());
    }
    let read = sys.read_trimmed(path)?;
    match kernel::schemata_holds(&read, &value) {
        true => Ok(()),
        false => Err(ApplyError::NotHonoured {
            path: format!("/{path}"),
            wrote: value,
            read,
        }),
    }
}

/// The `schemata` read just before a share is written, for its undo.
pub fn previous(sys: &Sys, path: &str) -> Option<String> {
    sys.read_trimmed(path).ok()
}

/// Undoes a share: the `schemata` read before written back (nothing when
/// the group is gone, which gave its ways back with it).
pub fn undo_share(sys: &Sys, path: &str, previous: Option<&str>, out: &mut Undone) {
    let Some(previous) = previous else { return };
    if !sys.exists(path) {
        out.unchanged += 1;
        return;
    }
    let lines: Vec<&str> = previous
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let value = lines.join("\n");
    if sys
        .read_trimmed(path)
        .is_ok_and(|now| kernel::schemata_holds(&now, &value))
    {
        out.unchanged += 1;
        return;
    }
    let written = sys.write(path, &format!("{value}\n"));
    match written.map(|()| sys.read_trimmed(path)) {
        Ok(Ok(now)) if kernel::schemata_holds(&now, &value) => out.restored += 1,
        Ok(now) => out.failed.push(Refusal {
            target: format!("/{path}"),
            reason: format!(
                "wrote the schemata back but it reads {}",
                now.unwrap_or_default().replace('\n', "; ")
            ),
        }),
        Err(e) => out.failed.push(Refusal {
            target: format!("/{path}"),
            reason: format!("could not write the schemata back: {}", e.errno_name()),
        }),
    }
}

/// Unmounts resctrl mounted by the shield, as the engine unmounts a
/// cgroup2 of its own: while it is the one mount there, nothing below it.
pub fn unmount(sys: &Sys, target: &str, out: &mut Undone) {
    crate::shield::undo::unmount_own(sys, (target, "resctrl"), false, out);
}

/// What `on`'s report says of the cache share, read back.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// The group's `schemata`, as it reads back (one line a resource).
    pub shield: String,
    /// The default group's, as it reads back.
    pub others: String,
    /// The CPUs of the group, as they read back.
    pub cpus: CpuSet,
}

/// The share as the kernel holds it after `on` (none when the plan had
/// none).
fn outcome(sys: &Sys, steps: &[Step]) -> Option<Outcome> {
    let planned = steps
        .iter()
        .any(|s| matches!(own_of(&s.action), Some(Own::ResctrlSchemata { .. })));
    (planned && sys.exists(GROUP)).then(|| read_outcome(sys))
}

/// Both groups' `schemata` and the group's CPUs as they read now.
fn read_outcome(sys: &Sys) -> Outcome {
    let tidy = |path: &str| {
        let text = sys.read(path).unwrap_or_default();
        text.lines().map(str::trim).collect::<Vec<_>>().join("; ")
    };
    Outcome {
        shield: tidy(&format!("{GROUP}/schemata")),
        others: tidy(&format!("{RESCTRL}/schemata")),
        cpus: sys
            .read_cpulist(&format!("{GROUP}/cpus_list"))
            .unwrap_or_default(),
    }
}

/// What `status` shows of the cache share: the share as it reads, and what
/// resctrl's monitoring counts of the shield's group (L3 occupancy, memory
/// traffic), where the CPUs have it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// The share as it reads now.
    #[serde(flatten)]
    pub share: Outcome,
    /// The group's monitoring, per L3 domain (empty: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub monitored: Vec<kernel::Monitored>,
    /// The default group's (everything outside the shield): the
    /// neighbours whose cache use and memory traffic the share holds off.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub others_monitored: Vec<kernel::Monitored>,
}

/// The cache share of the shield `state` for `status`, when it has one
/// and its group exists.
fn status(sys: &Sys, state: &State) -> Option<Status> {
    let asked = state
        .request
        .as_ref()
        .is_some_and(|r| r.cache_ways.is_some());
    (asked && sys.exists(GROUP)).then(|| Status {
        share: read_outcome(sys),
        monitored: kernel::read_monitoring(sys, GROUP),
        others_monitored: kernel::read_monitoring(sys, RESCTRL),
    })
}

/// The lines for people of the share as it reads back.
fn share_lines(s: &Outcome) -> Vec<String> {
    vec![
        format!("L3 of the shield, CPUs {}: {}", s.cpus, s.shield),
        format!("L3 of the others: {}", s.others),
    ]
}

/// `status`'s lines: the share, then the monitoring per L3 of both groups.
fn status_lines(c: &Status) -> Vec<String> {
    let kib = |b: Option<u64>| b.map_or("-".into(), |b| format!("{} KiB", b / 1024));
    let mib = |b: Option<u64>| b.map_or("-".into(), |b| format!("{} MiB", b >> 20));
    let mut lines = share_lines(&c.share);
    for (whose, monitored) in [
        ("the shield", &c.monitored),
        ("the others", &c.others_monitored),
    ] {
        lines.extend(monitored.iter().map(|m| {
            format!(
                "L3 {} of {whose}: {} held, {} to and from memory so far",
                m.domain,
                kib(m.llc_occupancy_bytes),
                mib(m.mbm_total_bytes)
            )
        }));
    }
    lines
}

/// What resctrl's monitoring counts of both groups, per L3 domain, as
/// metrics.
fn metrics(c: &Status) -> Vec<Metric> {
    let per = |f: fn(&kernel::Monitored) -> Option<u64>| {
        (c.monitored.iter().map(|m| ("shield", m)))
            .chain(c.others_monitored.iter().map(|m| ("others", m)))
            .filter_map(|(group, m)| {
                let labels = vec![("group", group.to_string()), ("l3", m.domain.to_string())];
                f(m).map(|v| (labels, v as f64))
            })
            .collect::<Vec<_>>()
    };
    let occupancy = Metric {
        name: "shield_l3_occupancy_bytes",
        kind: "gauge",
        help: "Bytes of each L3 cache the shield's resctrl group (group=\"shield\") and the default group of everything else (group=\"others\") hold (llc_occupancy).",
        samples: per(|m| m.llc_occupancy_bytes),
    };
    let traffic = Metric {
        name: "shield_memory_bytes_total",
        kind: "counter",
        help: "Bytes the shield's resctrl group (group=\"shield\") and the default group (group=\"others\") moved to and from memory, per L3 domain (mbm_total_bytes).",
        samples: per(|m| m.mbm_total_bytes),
    };
    [occupancy, traffic]
        .into_iter()
        .filter(|m| !m.samples.is_empty())
        .collect()
}

/// What `status` reads back of the cache share.
#[derive(Debug, Clone, Default)]
pub struct Hold {
    /// What the shield asked (none: no cache share).
    ask: Option<Ask>,
    /// What no longer holds, as read.
    lost: Vec<String>,
}

/// Reads back whether the cache share of the shield `state` holds.
fn read_hold(sys: &Sys, state: &State) -> Hold {
    let ask = state.request.as_ref().and_then(|r| {
        r.cache_ways.map(|ways| Ask {
            ways,
            others_bandwidth: r.others_bandwidth,
        })
    });
    let Some(ask) = ask else {
        return Hold::default();
    };
    let facts = read(sys, &state.shield.union(&state.housekeeping));
    let mut lost = Vec::new();
    let Some(info) = facts.info.as_ref().filter(|_| sys.exists(GROUP)) else {
        lost.push(format!("the resctrl group /{GROUP} is gone"));
        return Hold {
            ask: Some(ask),
            lost,
        };
    };
    let cpus = sys
        .read_cpulist(&format!("{GROUP}/cpus_list"))
        .unwrap_or_default();
    if cpus != state.shield {
        lost.push(format!(
            "/{GROUP}/cpus_list reads {cpus}, not the shield's CPUs {}",
            state.shield
        ));
    }
    let steps = plan(&facts, ask, &state.shield);
    for step in &steps {
        if let Some(Own::ResctrlSchemata { path, share }) = own_of(&step.action) {
            let want = share.schemata(info, &facts.all_domains());
            let now = sys.read_trimmed(&path).unwrap_or_default();
            if !kernel::schemata_holds(&now, &want) {
                lost.push(format!(
                    "/{path} reads {} where the shield set {}",
                    now.lines().map(str::trim).collect::<Vec<_>>().join("; "),
                    want.replace('\n', "; ")
                ));
            }
        }
    }
    Hold {
        ask: Some(ask),
        lost,
    }
}

impl Holds for Hold {
    fn lost(&self, _: &State, repair: &str) -> Vec<Finding> {
        self.lost
            .iter()
            .map(|why| Finding::new("resctrl", Severity::Bad, 90, why, repair))
            .collect()
    }
}

/// The shield's share of the L3 cache and the others' memory bandwidth, as
/// a component of the shield.
pub(in crate::shield) struct Part;

/// resctrl as [`Component::read`] read it.
fn facts(snap: &Snapshot) -> Facts {
    snap.parts.get(OWNER.name()).unwrap_or_default()
}

/// The cache share a request asks for.
fn ask(req: &Request) -> Option<Ask> {
    req.cache_ways.map(|ways| Ask {
        ways,
        others_bandwidth: req.others_bandwidth,
    })
}

impl Component for Part {
    fn owner(&self) -> Owner {
        OWNER
    }

    /// resctrl as it is, for a request that asks a cache share or a
    /// machine where the shield's group exists.
    fn read(&self, sys: &Sys, req: &Request, facts: &mut OwnFacts) -> Result<(), ShieldError> {
        if req.cache_ways.is_some() || sys.exists(GROUP) {
            let online = procfs::online_cpus(sys)?;
            facts.put(OWNER.name(), &read(sys, &online));
        }
        Ok(())
    }

    fn outcome(&self, sys: &Sys, plan: &Plan, dry_run: bool) -> Option<PartReport> {
        let out = outcome(sys, &plan.steps).filter(|_| !dry_run)?;
        Some(PartReport {
            component: OWNER.name().into(),
            lines: share_lines(&out),
            data: serde_json::to_value(&out).unwrap_or_default(),
            findings: Vec::new(),
            metrics: Vec::new(),
        })
    }

    /// The share and its monitoring as they read, and what no longer
    /// holds, when the shield asked for a share.
    fn status(&self, sys: &Sys, state: &State, repair: &str) -> Option<PartReport> {
        let hold = read_hold(sys, state);
        hold.ask?;
        let now = status(sys, state);
        Some(PartReport {
            component: OWNER.name().into(),
            lines: now.as_ref().map(status_lines).unwrap_or_default(),
            data: serde_json::to_value(&now).unwrap_or_default(),
            findings: hold.lost(state, repair),
            metrics: now.as_ref().map(metrics).unwrap_or_default(),
        })
    }

    fn check(&self, cx: &Planning, _: &mut Draft) -> Result<(), PlanError> {
        match ask(cx.req) {
            Some(ask) => check(&facts(cx.snap), ask),
            None => Ok(()),
        }
    }

    fn plan(&self, cx: &Planning, d: &mut Draft) -> Result<(), PlanError> {
        if let Some(ask) = ask(cx.req) {
            d.add(Slot::Cache, plan(&facts(cx.snap), ask, cx.shield));
        }
        Ok(())
    }

    fn before(&self, _: &Originals, entries: &[Entry], snap: &mut Snapshot) {
        let mut facts = facts(snap);
        before_shield(&mut facts, entries);
        snap.parts.put(OWNER.name(), &facts);
    }

    fn change(&self, cx: &InPlace, mine: Vec<(Slot, Step)>, out: &mut Changing) {
        if mine.is_empty() {
            out.add(Slot::Cache, give_back(cx.entries, cx.read));
        }
        let live = facts(cx.live);
        for (slot, step) in mine {
            if !in_place(&live, cx.read, &step.action) {
                out.unless_held(cx, slot, step);
            }
        }
    }

    fn claims(&self, path: &str) -> Option<Subject> {
        claims(path)
    }

    fn make(&self, sys: &Sys, action: &Action) -> Option<Result<(), ApplyError>> {
        Some(match own_of(action)? {
            Own::MountResctrl { target } => mount(sys, &target),
            Own::ResctrlSchemata { path, share } => write_share(sys, &path, &share),
        })
    }

    fn previous(&self, sys: &Sys, action: &Action) -> Option<String> {
        match own_of(action)? {
            Own::ResctrlSchemata { path, .. } => previous(sys, &path),
            Own::MountResctrl { .. } => None,
        }
    }

    fn undo(&self, sys: &Sys, entry: &Entry, out: &mut Undone) -> bool {
        match own_of(&entry.action) {
            Some(Own::MountResctrl { target }) => unmount(sys, &target, out),
            Some(Own::ResctrlSchemata { path, .. }) => {
                undo_share(sys, &path, entry.previous.as_deref(), out)
            }
            None => return false,
        }
        true
    }

    fn describe(&self, action: &Action) -> Option<String> {
        match own_of(action)? {
            Own::MountResctrl { target: path } | Own::ResctrlSchemata { path, .. } => {
                Some(format!("/{path}"))
            }
        }
    }

    fn plan_line(&self, action: &Action) -> Option<String> {
        Some(match own_of(action)? {
            Own::MountResctrl { target } => format!("mount -t resctrl resctrl /{target}"),
            Own::ResctrlSchemata { path, share } => format!("{} > /{path}", cache_share(&share)),
        })
    }
}
