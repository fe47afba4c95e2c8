//! The resctrl component: the shielded CPUs' own share of the L3 cache
//! (Intel RDT CAT, AMD PQoS) and, optionally, a memory bandwidth limit for
//! everything else (MBA). A group of resctrl's own, `cpushield`, gets the
//! shielded CPUs and `--cache-ways` ways of each L3 cache they sit in, one
//! run at the top of the cache, or at the bottom where the top holds more
//! of the ways I/O also fills (`shareable_bits`); the default group, where
//! every other CPU and task is, keeps the other run. Other programs'
//! groups are left whole: refused only where one holds the shield's ways,
//! named by `status` when one comes to, and a mount they use is not
//! unmounted. Here: what is read (`/proc/cpuinfo`, the mount, `info/`, the
//! groups, each CPU's L3), the check of a request against the hardware's
//! rules and others' groups, the steps (mount, group, `schemata`,
//! `cpus_list`), the change in place; in [`share`] how a share is made,
//! read back and undone; in [`report`] what reads back for `on` and
//! `status` and whether it still holds.

use crate::shield::change::Subject;
use crate::shield::component::{
    Changing, Component, Draft, InPlace, Looking, Phase, Planning, Reporting,
};
use crate::shield::component::{Looks, Reports, Undoes};
use crate::shield::reach::Bounds;
use crate::shield::request::Request;
use crate::shield::reshape::Originals;
use crate::shield::snapshot::Snapshot;
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;
use crate::finding::{Finding, Severity};
use crate::shield::apply::{ApplyError, Refusal};
use crate::shield::change::{Action, Check, Owner, Step, Undo};
use crate::shield::error::ShieldError;
use crate::shield::holds::Holds;
use crate::shield::journal::{Entry, State};
use crate::shield::parts::{Line, Metric, OwnFacts, PartReport};
use crate::shield::plan::PlanError;
use crate::shield::undo::Undone;
use crate::sys::procfs;
use crate::sys::resctrl::{self as kernel, Bandwidth, CacheShare, Info, MbUnit, RESCTRL};
use crate::sys::Sys;

mod report;
mod share;

use report::{metrics, outcome, overlaps, read_hold, share_lines, status, status_lines};
use share::{cache_share, mount, previous, set_mode, undo_mode, undo_share, unmount, write_share};

/// This component, as it names itself in the journal and in reports.
pub const OWNER: Owner = Owner("resctrl");

/// Its options, as `on` and the config file take them.
#[derive(
    clap::Args, Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize,
)]
#[group(skip)]
pub struct Options {
    /// Give the shielded CPUs WAYS ways of each L3 cache they sit in for
    /// themselves (Intel RDT, AMD PQoS, through resctrl): a resctrl group
    /// of their own gets one run of WAYS ways, away from the ways I/O also
    /// fills (shareable_bits), everything else keeps the rest (undone by
    /// `off`; refused where the CPUs cannot, or where another program's
    /// group holds those ways).
    #[arg(long, value_name = "WAYS")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_ways: Option<u32>,
    /// With --cache-ways: limit the memory bandwidth of everything
    /// outside the shield (memory bandwidth allocation) to BW, in the
    /// machine's terms: a percentage on Intel (`50`, rounded up to the
    /// kernel's step), a rate on AMD and where resctrl is mounted with
    /// mba_MBps (`6GB/s`, `4000MiB/s`); the other kind is refused there.
    #[arg(long, value_name = "BW", requires = "cache_ways")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub others_bandwidth: Option<Bandwidth>,
}

impl crate::shield::options::Declared for Options {
    const EXAMPLES: &'static [(&'static str, &'static str)] =
        &[("cache_ways", "4"), ("others_bandwidth", "50")];

    fn check(&self) -> Result<(), String> {
        check_share(self.cache_ways, self.others_bandwidth)
    }
}

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
    /// The `schemata` of each group other programs made (containerd's or
    /// runc's RDT classes, pqos), by path.
    #[serde(default)]
    pub others: BTreeMap<String, String>,
    /// The L3 cache id of each online CPU.
    pub l3: BTreeMap<u32, u32>,
    /// `/proc/cpuinfo` names an AMD CPU: memory bandwidth in 1/8 GB/s.
    #[serde(default)]
    pub amd: bool,
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
    let groups = groups(sys, mounted);
    let others = (groups.iter())
        .filter(|g| *g != GROUP)
        .map(|g| {
            let schemata = sys.read(&format!("{g}/schemata")).unwrap_or_default();
            (g.clone(), schemata)
        })
        .collect();
    Facts {
        cat_l3: flags.contains("cat_l3"),
        mba: flags.contains("mba"),
        in_kernel: filesystems.split_whitespace().any(|f| f == "resctrl") && sys.exists(RESCTRL),
        mounted,
        info: mounted
            .then(|| kernel::read_info(sys, RESCTRL).ok())
            .flatten(),
        groups,
        others,
        l3: online
            .iter()
            .filter_map(|c| kernel::l3_domain(sys, c).map(|d| (c, d)))
            .collect(),
        amd: kernel::amd(sys),
    }
}

/// The control groups of resctrl (relative paths), when it is mounted.
fn groups(sys: &Sys, mounted: bool) -> Vec<String> {
    let names = match mounted {
        true => sys.subdirs(RESCTRL).unwrap_or_default(),
        false => Vec::new(),
    };
    (names.into_iter())
        .filter(|g| !matches!(g.as_str(), "info" | "mon_groups" | "mon_data"))
        .map(|g| format!("{RESCTRL}/{g}"))
        .collect()
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
    /// Memory bandwidth left to everything else.
    pub others_bandwidth: Option<Bandwidth>,
}

/// Checks a request's cache share against the machine before anything
/// changes: refused where the CPUs or the kernel have no cache
/// allocation, where another program made resctrl groups of its own, and
/// (once resctrl is mounted, when `info/` can be read) where the hardware's
/// rules do not allow the share.
pub fn check(facts: &Facts, ask: Ask, shield: &CpuSet) -> Result<(), PlanError> {
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
    // Before resctrl is mounted, its unit is the CPU's: `on` mounts it
    // without mba_MBps.
    let unit = match (&facts.info, facts.amd) {
        (Some(info), _) => info.mb.as_ref().map(|mb| mb.unit),
        (None, true) => Some(MbUnit::EighthGbps),
        (None, false) => Some(MbUnit::Percent),
    };
    let wrong_unit = (ask.others_bandwidth.zip(unit)).and_then(|(bw, unit)| bw.unit_refusal(unit));
    if let Some(why) = wrong_unit {
        return refuse(format!("--others-bandwidth {why}"));
    }
    if !facts.in_kernel {
        return refuse(format!(
            "this kernel has no resctrl (not in /proc/filesystems, or no /{RESCTRL}): \
             it needs CONFIG_X86_CPU_RESCTRL"
        ));
    }
    if facts.groups.iter().any(|g| g == GROUP) {
        return refuse(format!(
            "/{GROUP} exists but no active shield made it: remove it (rmdir) first"
        ));
    }
    match &facts.info {
        Some(info) => {
            check_info(info, ask)?;
            check_others(facts, info, ask, shield)
        }
        None => Ok(()),
    }
}

/// Other programs' groups beside the shield's: refused only where one
/// holds ways the shield would take in a cache the shield sits in (its
/// tasks would fill them), or where no CLOSID is left for the shield.
fn check_others(facts: &Facts, info: &Info, ask: Ask, shield: &CpuSet) -> Result<(), PlanError> {
    let used = facts.others.len() as u32 + 1;
    if used >= info.num_closids() {
        return Err(refusal(format!(
            "resctrl has {} classes of service and {used} are in use (the default group and \
             {} made by other programs): none is left for the shield's",
            info.num_closids(),
            facts.others.len()
        )));
    }
    match overlaps(facts, info, ask.ways, shield).first() {
        Some(o) => Err(refusal(format!(
            "{o}, which its tasks would share with the shield: narrow its mask, or leave out \
             --cache-ways"
        ))),
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
        (Some(Bandwidth::Percent(bw)), Some(mb)) if bw < mb.min_bandwidth || bw > 100 => {
            refuse(format!(
                "--others-bandwidth {bw}: must be {} to 100 (percent; the kernel rounds up to a \
             multiple of {})",
                mb.min_bandwidth, mb.bandwidth_gran
            ))
        }
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
    /// Set the shield's group `mode` (`exclusive`, `shareable`), read
    /// back; undone by writing back the mode read just before (in reverse
    /// order, so that the masks then are as they were when it was made).
    ResctrlMode {
        /// The group's `mode`, relative to the root.
        path: String,
        /// The mode.
        mode: String,
        /// The mode it had before, when the plan knows it better than a
        /// read at the start of its batch can (a change in place sets the
        /// mode twice in one batch: the second's undo must give back the
        /// first's mode); `None`: the mode read before the batch.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        before: Option<String>,
    },
}

/// `action` as one of resctrl's own, when it is.
fn own_of(action: &Action) -> Option<Own> {
    action.own_as::<Own>()
}

/// The step of resctrl's own change `own`; a share is about its file.
fn own_step(own: Own, fatal: bool) -> Step {
    let subject = match &own {
        Own::ResctrlSchemata { path, .. } | Own::ResctrlMode { path, .. } => {
            Subject::File(path.clone())
        }
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
    if exclusive_allowed(facts, ask.ways, shield) {
        steps.push(group_mode(EXCLUSIVE, None));
    }
    steps.push(Step::fatal(OWNER, group_cpus(shield)));
    steps
}

/// The group's `mode` that keeps every other group off its ways.
const EXCLUSIVE: &str = "exclusive";

/// The group's `mode` as resctrl makes it.
const SHAREABLE: &str = "shareable";

/// Whether the kernel lets the shield's group be `exclusive`: no other
/// group's mask may overlap its masks in any L3, nor may `shareable_bits`.
/// A group has a mask in every L3 and ways it cannot give up, so only a
/// share of every L3 there is (one L3 on most real-time machines) can be;
/// where `info/` is not read yet, the kernel decides (the step is
/// optional: a refusal is reported, the share stands).
fn exclusive_allowed(facts: &Facts, ways: u32, shield: &CpuSet) -> bool {
    let all = facts.all_domains();
    let away_from_io =
        |info: &Info| (info.caches.iter()).all(|c| c.split(ways).0 & c.shareable_bits == 0);
    !all.is_empty() && facts.domains(shield) == all && facts.info.as_ref().is_none_or(away_from_io)
}

/// The step that sets the group's `mode` to `mode` (optional: a refusal
/// is reported, the share stands).
fn group_mode(mode: &str, before: Option<&str>) -> Step {
    let path = format!("{GROUP}/mode");
    let before = before.map(str::to_string);
    let own = Own::ResctrlMode {
        path,
        mode: mode.into(),
        before,
    };
    own_step(own, false)
}

/// Whether `step` sets the group's mode to `mode`.
fn sets_mode(step: &Step, mode: &str) -> bool {
    matches!(own_of(&step.action), Some(Own::ResctrlMode { mode: m, .. }) if m == mode)
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
        (_, Some(Own::ResctrlMode { path, mode, .. })) => {
            read(&path).is_some_and(|m| m.trim() == mode)
        }
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

/// The shield's share of the L3 cache and the others' memory bandwidth, as
/// a component of the shield.
pub(in crate::shield) struct Part;

/// resctrl as [`Component::read`] read it.
fn facts(snap: &Snapshot) -> Facts {
    snap.parts.get(OWNER.name()).unwrap_or_default()
}

/// The cache share asked (`ways`, `others_bandwidth`), checked for what
/// needs no machine: ways from 1 to 64, a bandwidth from 1 to 100 percent
/// and only with ways. The error names the option.
pub fn check_share(ways: Option<u32>, others_bandwidth: Option<Bandwidth>) -> Result<(), String> {
    if let Some(ways) = ways.filter(|w| !(1..=64).contains(w)) {
        return Err(format!(
            "--cache-ways {ways}: must be 1 to 64 (ways of the L3 cache)"
        ));
    }
    match (others_bandwidth, ways) {
        (Some(Bandwidth::Percent(bw)), _) if !(1..=100).contains(&bw) => Err(format!(
            "--others-bandwidth {bw}: must be 1 to 100 (percent of the memory bandwidth), \
             or a rate (6GB/s, 4000MiB/s) where the machine takes one"
        )),
        (Some(_), None) => Err("--others-bandwidth needs --cache-ways".into()),
        _ => Ok(()),
    }
}

/// The cache share a request asks for.
pub(super) fn ask(req: &Request) -> Option<Ask> {
    let options = req.declared::<Options>().ok()?;
    options.cache_ways.map(|ways| Ask {
        ways,
        others_bandwidth: options.others_bandwidth,
    })
}

impl Component for Part {
    fn owner(&self) -> Owner {
        OWNER
    }

    /// Its group's files, the default group's schemata, and the mount.
    fn reaches(&self, reach: &mut crate::shield::reach::Reach) {
        use crate::sys::resctrl::RESCTRL;
        reach.files.extend(["cpus_list", "schemata", "mode"].iter().map(|f| format!("{GROUP}/{f}")));
        reach.files.push(format!("{RESCTRL}/schemata"));
        reach.dirs.push(GROUP.into());
        reach.mounts.push(RESCTRL.into());
    }

    /// resctrl as it is, for a request that asks a cache share or a
    /// machine where the shield's group exists.
    fn read(&self, sys: &Sys, req: &Request, facts: &mut OwnFacts) -> Result<(), ShieldError> {
        if ask(req).is_some() || sys.exists(GROUP) {
            let online = procfs::online_cpus(sys)?;
            facts.put(OWNER.name(), &read(sys, &online));
        }
        Ok(())
    }

    fn check(&self, cx: &Planning, _: &mut Draft) -> Result<(), PlanError> {
        match ask(cx.req) {
            Some(ask) => check(&facts(cx.snap), ask, cx.shield),
            None => Ok(()),
        }
    }

    fn plan(&self, cx: &Planning, d: &mut Draft) -> Result<(), PlanError> {
        if let Some(ask) = ask(cx.req) {
            d.add(Phase::Tuning, plan(&facts(cx.snap), ask, cx.shield));
        }
        Ok(())
    }

    fn before(&self, _: &Originals, entries: &[Entry], snap: &mut Snapshot) {
        let mut facts = facts(snap);
        before_shield(&mut facts, entries);
        snap.parts.put(OWNER.name(), &facts);
    }

    fn change(&self, cx: &InPlace, mine: Vec<(Phase, Step)>, out: &mut Changing) {
        let exclusive_now =
            (cx.read)(&format!("{GROUP}/mode")).is_some_and(|m| m.trim() == EXCLUSIVE);
        if mine.is_empty() {
            // An exclusive group's ways may not be given back while it is.
            if exclusive_now {
                out.add(Phase::Tuning, [group_mode(SHAREABLE, Some(EXCLUSIVE))]);
            }
            out.add(Phase::Tuning, give_back(cx.entries, cx.read));
            return;
        }
        let live = facts(cx.live);
        let planned_exclusive = (mine.iter()).any(|(_, s)| sets_mode(s, EXCLUSIVE));
        let changing: Vec<(Phase, Step)> = (mine.into_iter())
            .filter(|(_, s)| !sets_mode(s, EXCLUSIVE))
            .filter(|(_, step)| !in_place(&live, cx.read, &step.action))
            .collect();
        // The kernel refuses new ways for an exclusive group (and the
        // default group's for it) while it is: shareable first, then the
        // shares, then exclusive again when the new plan has it.
        let rewrites = (changing.iter()).any(|(_, s)| own_of(&s.action).is_some());
        let toggled = exclusive_now && (rewrites || !planned_exclusive);
        if toggled {
            out.add(Phase::Tuning, [group_mode(SHAREABLE, Some(EXCLUSIVE))]);
        }
        for (slot, step) in changing {
            out.unless_held(cx, slot, step);
        }
        if planned_exclusive && (rewrites || !exclusive_now) {
            let before = if toggled { SHAREABLE } else { "" };
            let before = Some(before).filter(|b| !b.is_empty());
            out.add(Phase::Tuning, [group_mode(EXCLUSIVE, before)]);
        }
    }

    fn claims(&self, path: &str) -> Option<Subject> {
        claims(path)
    }

    fn undoes(&self) -> Option<&dyn Undoes> {
        Some(self)
    }

    fn looks(&self) -> Option<&dyn Looks> {
        Some(self)
    }

    fn reports(&self) -> Option<&dyn Reports> {
        Some(self)
    }
}

impl Undoes for Part {
    fn make(&self, sys: &Sys, action: &Action) -> Option<Result<(), ApplyError>> {
        Some(match own_of(action)? {
            Own::MountResctrl { target } => mount(sys, &target),
            Own::ResctrlSchemata { path, share } => write_share(sys, &path, &share),
            Own::ResctrlMode { path, mode, .. } => set_mode(sys, &path, &mode),
        })
    }

    fn previous(&self, sys: &Sys, action: &Action) -> Option<String> {
        match own_of(action)? {
            Own::ResctrlSchemata { path, .. } | Own::ResctrlMode { path, .. } => {
                previous(sys, &path)
            }
            Own::MountResctrl { .. } => None,
        }
    }

    fn undo(&self, sys: &Sys, entry: &Entry, out: &mut Undone) -> bool {
        match own_of(&entry.action) {
            Some(Own::MountResctrl { target }) => unmount(sys, &target, out),
            Some(Own::ResctrlMode { path, before, .. }) => {
                let previous = before.as_deref().or(entry.previous.as_deref());
                undo_mode(sys, &path, previous, out)
            }
            Some(Own::ResctrlSchemata { path, .. }) => {
                undo_share(sys, &path, entry.previous.as_deref(), out)
            }
            None => return false,
        }
        true
    }

    fn within(&self, action: &Action, bounds: &Bounds) -> Option<Result<(), String>> {
        Some(match own_of(action)? {
            Own::MountResctrl { target } => bounds.mount(&target),
            Own::ResctrlSchemata { path, .. } | Own::ResctrlMode { path, .. } => bounds.file(&path),
        })
    }

    fn describe(&self, action: &Action) -> Option<String> {
        match own_of(action)? {
            Own::MountResctrl { target: path }
            | Own::ResctrlSchemata { path, .. }
            | Own::ResctrlMode { path, .. } => Some(format!("/{path}")),
        }
    }

    fn plan_line(&self, action: &Action) -> Option<String> {
        Some(match own_of(action)? {
            Own::MountResctrl { target } => format!("mount -t resctrl resctrl /{target}"),
            Own::ResctrlSchemata { path, share } => format!("{} > /{path}", cache_share(&share)),
            Own::ResctrlMode { path, mode, .. } => format!("echo {mode} > /{path}"),
        })
    }
}

impl Looks for Part {
    /// The share and its monitoring as they read, and what no longer
    /// holds, when the shield asked for a share.
    fn status(&self, cx: &Looking) -> Option<PartReport> {
        let (sys, state, repair) = (cx.sys, cx.state, cx.repair);
        let hold = read_hold(sys, state);
        hold.ask?;
        let now = status(sys, state);
        Some(PartReport {
            component: OWNER.name().into(),
            lines: Line::under(
                OWNER.name(),
                now.as_ref().map(status_lines).unwrap_or_default(),
            ),
            data: serde_json::to_value(&now).unwrap_or_default(),
            findings: hold.lost(state, repair),
            metrics: now.as_ref().map(metrics).unwrap_or_default(),
            details: Vec::new(),
        })
    }
}

impl Reports for Part {
    fn outcome(&self, cx: &Reporting) -> Option<PartReport> {
        let (sys, plan, dry_run) = (cx.sys, cx.plan, cx.dry_run);
        let out = outcome(sys, &plan.steps).filter(|_| !dry_run)?;
        Some(PartReport {
            component: OWNER.name().into(),
            lines: Line::under(OWNER.name(), share_lines(&out)),
            data: serde_json::to_value(&out).unwrap_or_default(),
            findings: Vec::new(),
            metrics: Vec::new(),
            details: Vec::new(),
        })
    }
}
