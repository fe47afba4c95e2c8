//! Named sets within the shield, as cset's `set` gives them: `--set
//! NAME=CPUS` (config key `sets`), each a cpuset of its own inside the
//! shield's cgroup, so that two real-time applications each keep their
//! own CPUs (the kernel confines each set's tasks to its CPUs) under one
//! shield: one journal, one irqbalance ban, one set of knobs. `run --set
//! NAME` and `move --set NAME` place tasks in one; `off --set NAME` takes
//! one away with its CPUs, a change in place that leaves the others as
//! they are.
//!
//! The kernel's layout: a child cpuset of the shield's cgroup per set, a
//! member, not a partition of its own (a partition under an `isolated`
//! one is refused by kernels after 6.12, and the parent's partition
//! already keeps the scheduler's balancing as `--balance` asks):
//! - cgroup v2: `cpushield/NAME`, the parent's `cgroup.subtree_control`
//!   given `+cpuset`;
//! - under systemd: the slice `cpushield-NAME.slice`, which systemd places
//!   inside `cpushield.slice` by its name, with `AllowedCPUs=`;
//! - cgroup v1: `cpushield/NAME`, with the parent's memory nodes and load
//!   balancing (not `cpu_exclusive`: v1 refuses a change in place of the
//!   shield's own exclusive cpuset while a child is exclusive).
//!
//! Every shielded CPU is in exactly one set when any is named: cgroup v2
//! lets a process into a cgroup whose children hold processes only where
//! none of its controllers is enabled for them, so tasks go to a set,
//! never to the shield's cgroup itself.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;
use crate::shield::change::{Action, Check, Step, Undo};
use crate::shield::plan_error::PlanError;
use crate::shield::snapshot::{CgroupSetup, SHIELD_SLICE};
use crate::sys::systemd::SystemdCall;

/// One named set: its name and its CPUs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct NamedSet {
    /// Its name: 1-32 of `a-z`, `0-9`, `_` and `-`, starting with a letter.
    pub name: String,
    /// Its CPUs, within the shield's.
    pub cpus: CpuSet,
}

impl fmt::Display for NamedSet {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}={}", self.name, self.cpus)
    }
}

impl From<NamedSet> for String {
    fn from(set: NamedSet) -> String {
        set.to_string()
    }
}

impl TryFrom<String> for NamedSet {
    type Error = String;
    fn try_from(text: String) -> Result<NamedSet, String> {
        parse(&text)
    }
}

/// Parses `NAME=CPUS` (`--set`).
pub fn parse(text: &str) -> Result<NamedSet, String> {
    let shown = crate::input::quote_to(text, 60);
    let Some((name, cpus)) = text.split_once('=') else {
        return Err(format!(
            "{shown} is not NAME=CPUS (a set's name, '=', its CPUs: app1=2-3)"
        ));
    };
    let valid = (1..=32).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && (name.bytes()).all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if !valid {
        return Err(format!(
            "{shown}: a set's name is 1-32 of a-z, 0-9, '_' and '-', starting with a letter"
        ));
    }
    let cpus = CpuSet::parse_list(cpus).map_err(|e| format!("{shown}: {e}"))?;
    if cpus.is_empty() {
        return Err(format!("{shown}: a set needs at least one CPU"));
    }
    Ok(NamedSet {
        name: name.to_string(),
        cpus,
    })
}

/// Checks `sets` against the shield's CPUs `shield`: names unique, CPUs
/// disjoint, and together the shield's exactly.
pub fn check(sets: &[NamedSet], shield: &CpuSet) -> Result<(), PlanError> {
    if sets.is_empty() {
        return Ok(());
    }
    let refuse = |message: String| {
        Err(PlanError::Part {
            option: "--set",
            message: format!("--set: {message}"),
        })
    };
    let mut all = CpuSet::default();
    for (i, set) in sets.iter().enumerate() {
        if let Some(other) = sets[..i].iter().find(|s| s.name == set.name) {
            return refuse(format!("the name {} is given twice ({other} and {set})", set.name));
        }
        let shared = all.intersection(&set.cpus);
        if !shared.is_empty() {
            return refuse(format!("CPUs {shared} are in two sets; each CPU belongs to one"));
        }
        let outside = set.cpus.difference(shield);
        if !outside.is_empty() {
            return refuse(format!(
                "{set}: CPUs {outside} are not shielded (the shield is {shield}); a set takes shielded CPUs"
            ));
        }
        all = all.union(&set.cpus);
    }
    let left = shield.difference(&all);
    if !left.is_empty() {
        return refuse(format!(
            "CPUs {left} of the shield are in no set: with sets every shielded CPU is in one (name them in a --set, or leave them out of the shield)"
        ));
    }
    Ok(())
}

/// The unit of set `name` under systemd.
pub fn unit(name: &str) -> String {
    format!("cpushield-{name}.slice")
}

/// The cgroup directory of set `name` in the shield's cgroup `shield_dir`.
pub fn dir(shield_dir: &str, name: &str) -> String {
    if shield_dir.ends_with(SHIELD_SLICE) {
        format!("{shield_dir}/{}", unit(name))
    } else {
        format!("{shield_dir}/{name}")
    }
}

/// The set of `sets` that holds every CPU of `cpus`, if one does.
pub fn holding<'a>(sets: &'a [NamedSet], cpus: &CpuSet) -> Option<&'a NamedSet> {
    sets.iter().find(|s| cpus.difference(&s.cpus).is_empty())
}

/// The steps that make `set` in the shield's cgroup `shield_dir`, on
/// the hierarchy `cgroup`: its directory or slice and its CPUs (v1: its
/// memory nodes `mems`, its load balancing `balance`).
pub fn make(cgroup: &CgroupSetup, shield_dir: &str, set: &NamedSet, (mems, balance): (&str, &str)) -> Vec<Step> {
    let fatal = |action| Step::fatal(super::OWNER, action);
    let dir = dir(shield_dir, &set.name);
    if shield_dir.ends_with(SHIELD_SLICE) {
        let unit = unit(&set.name);
        return vec![fatal(Action::Systemd {
            call: SystemdCall::StartSlice {
                unit: unit.clone(),
                cpus: set.cpus.clone(),
                cgroup_dir: dir,
                partition: None,
            },
            undo: Some(SystemdCall::Stop { unit }),
            back: None,
        })];
    }
    let write = |file: &str, value: String, check| {
        fatal(Action::Write {
            path: format!("{dir}/{file}"),
            value,
            check,
            undo: Undo::Nothing,
        })
    };
    let mut steps = vec![fatal(Action::Mkdir { path: dir.clone() })];
    steps.push(write("cpuset.cpus", set.cpus.to_string(), Check::CpuList));
    if let CgroupSetup::V1 { .. } = cgroup {
        steps.push(write("cpuset.mems", mems.to_string(), Check::Text));
        steps.push(write("cpuset.sched_load_balance", balance.to_string(), Check::Text));
    }
    steps
}

/// On cgroup v2 without systemd: the step that lets the shield's cgroup
/// `shield_dir` give its children cpusets, before the first set is made.
pub fn enable_cpuset(shield_dir: &str) -> Step {
    Step::fatal(
        super::OWNER,
        Action::Write {
            path: format!("{shield_dir}/cgroup.subtree_control"),
            value: "+cpuset".into(),
            check: Check::None,
            undo: Undo::Value("-cpuset".into()),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(text: &str) -> NamedSet {
        parse(text).unwrap()
    }

    #[test]
    fn a_set_is_a_name_and_cpus_and_reads_back_as_written() {
        let s = set("app1=2-3");
        assert_eq!((s.name.as_str(), s.cpus.to_string()), ("app1", "2-3".into()));
        assert_eq!(serde_json::to_string(&s).unwrap(), "\"app1=2-3\"");
        let back: NamedSet = serde_json::from_str("\"app1=2-3\"").unwrap();
        assert_eq!(back, s);
        for bad in ["app1", "=2", "App=2", "1a=2", "a b=2", "a=", "a=x", "a/b=2", "../x=1"] {
            assert!(parse(bad).is_err(), "{bad} accepted");
        }
        assert!(serde_json::from_str::<NamedSet>("\"../x=1\"").is_err());
    }

    #[test]
    fn sets_must_split_the_shield_exactly() {
        let shield = CpuSet::parse_list("2-5").unwrap();
        let ok = [set("a=2-3"), set("b=4-5")];
        assert!(check(&ok, &shield).is_ok());
        assert!(check(&[], &shield).is_ok());
        let said = |sets: &[NamedSet]| check(sets, &shield).unwrap_err().to_string();
        assert!(said(&[set("a=2-3"), set("a=4-5")]).contains("given twice"));
        assert!(said(&[set("a=2-3"), set("b=3-5")]).contains("CPUs 3 are in two sets"));
        assert!(said(&[set("a=2-3"), set("b=4-6")]).contains("CPUs 6 are not shielded"));
        assert!(said(&[set("a=2-3"), set("b=4")]).contains("CPUs 5 of the shield are in no set"));
    }

    #[test]
    fn a_sets_cgroup_is_a_child_of_the_shields() {
        assert_eq!(dir("sys/fs/cgroup/cpushield", "a"), "sys/fs/cgroup/cpushield/a");
        assert_eq!(
            dir("sys/fs/cgroup/cpushield.slice", "a"),
            "sys/fs/cgroup/cpushield.slice/cpushield-a.slice"
        );
        let sets = [set("a=2-3"), set("b=4-5")];
        let three = CpuSet::parse_list("3").unwrap();
        assert_eq!(holding(&sets, &three).map(|s| s.name.as_str()), Some("a"));
        let across = CpuSet::parse_list("3-4").unwrap();
        assert!(holding(&sets, &across).is_none());
    }
}

/// The mechanism's own change: a set taken away by a change in place (its
/// slice stopped, or its directory removed), undone by making it again
/// with the CPUs it had.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Own {
    /// Take set `name` away.
    DropSet {
        /// Its cgroup directory, relative to the root.
        dir: String,
        /// Its slice, under systemd.
        #[serde(default)]
        unit: Option<String>,
        /// Its CPUs, given back by the undo.
        cpus: CpuSet,
        /// On cgroup v1: its memory nodes, given back by the undo.
        #[serde(default)]
        v1_mems: Option<String>,
        /// On cgroup v1: its `cpuset.sched_load_balance`.
        #[serde(default)]
        v1_load_balance: Option<String>,
    },
}

/// The set `set` taken away from the shield's cgroup `shield_dir` (see
/// [`Own::DropSet`]).
fn drop_step(cgroup: &CgroupSetup, shield_dir: &str, set: &NamedSet, (mems, balance): (&str, &str)) -> Step {
    let v1 = matches!(cgroup, CgroupSetup::V1 { .. });
    let own = Own::DropSet {
        dir: dir(shield_dir, &set.name),
        unit: shield_dir.ends_with(SHIELD_SLICE).then(|| unit(&set.name)),
        cpus: set.cpus.clone(),
        v1_mems: v1.then(|| mems.to_string()),
        v1_load_balance: v1.then(|| balance.to_string()),
    };
    Step::fatal(super::OWNER, Action::own(super::OWNER, &own))
}

/// The step that gives set `name` (in `shield_dir`) the CPUs `to` in
/// place of `from`, undone by giving back `from`.
fn resize_step(shield_dir: &str, name: &str, (from, to): (&CpuSet, &CpuSet)) -> Step {
    let dir = dir(shield_dir, name);
    let action = if shield_dir.ends_with(SHIELD_SLICE) {
        let call = |cpus: &CpuSet| SystemdCall::SetAllowedCpus {
            unit: unit(name),
            cpus: cpus.clone(),
            cgroup_dir: dir.clone(),
            partition: None,
        };
        Action::Systemd {
            call: call(to),
            undo: Some(call(from)),
            back: None,
        }
    } else {
        Action::Write {
            path: format!("{dir}/cpuset.cpus"),
            value: to.to_string(),
            check: Check::CpuList,
            undo: Undo::Previous,
        }
    };
    Step::fatal(super::OWNER, action)
}

/// A change in place of the sets `old` to `new` in the shield's cgroup
/// `shield_dir`, whose CPUs become `shield`.
pub struct Change<'a> {
    /// The hierarchy.
    pub cgroup: &'a CgroupSetup,
    /// Whether systemd holds the shield's cgroup.
    pub systemd: bool,
    /// The shield's cgroup.
    pub shield_dir: &'a str,
    /// The sets before and after.
    pub sets: (&'a [NamedSet], &'a [NamedSet]),
    /// The shield's CPUs after.
    pub shield: &'a CpuSet,
    /// The v1 memory nodes and load balancing a set gets.
    pub v1: (&'a str, &'a str),
    /// Reads a kernel file now (relative path).
    pub read: &'a dyn Fn(&str) -> Option<String>,
}

/// The steps of a change of the sets: those made before the shield's
/// cgroup changes its CPUs (sets taken away, sets that only shrink) and
/// after (sets that grow or move, new sets); or why the change is refused.
pub fn change(c: &Change) -> Result<(Vec<Step>, Vec<Step>), PlanError> {
    let (old, new) = c.sets;
    let (mut before, mut after) = (Vec::new(), Vec::new());
    for gone in old.iter().filter(|o| !new.iter().any(|n| n.name == o.name)) {
        let dir = dir(c.shield_dir, &gone.name);
        // Its own processes, and (cgroup v2's `populated`) those of the
        // scopes inside it: stopping a slice ends what runs in it.
        let procs = (c.read)(&format!("{dir}/cgroup.procs")).unwrap_or_default();
        let populated = (c.read)(&format!("{dir}/cgroup.events"))
            .is_some_and(|events| events.lines().any(|l| l.trim() == "populated 1"));
        let staying = gone.cpus.intersection(c.shield);
        if !staying.is_empty() && (populated || !procs.trim().is_empty()) {
            let pids: Vec<&str> = procs.split_whitespace().take(8).collect();
            let which = match pids.is_empty() {
                true => "its tasks run in it".to_string(),
                false => format!("its tasks (pids {}) run in it", pids.join(" ")),
            };
            return Err(PlanError::Part {
                option: "--set",
                message: format!(
                    "--set: the set {} would go while its CPUs {staying} stay shielded and {which}; take its CPUs out with it (cpushield off --set {}), or end or move its tasks first (cpushield move PID --out)",
                    gone.name,
                    gone.name
                ),
            });
        }
        before.push(drop_step(c.cgroup, c.shield_dir, gone, c.v1));
    }
    let plain_v2 = !c.systemd && !matches!(c.cgroup, CgroupSetup::V1 { .. });
    let enabled = (c.read)(&format!("{}/cgroup.subtree_control", c.shield_dir))
        .is_some_and(|t| t.split_whitespace().any(|w| w == "cpuset"));
    for set in new {
        match old.iter().find(|o| o.name == set.name) {
            Some(was) if was.cpus == set.cpus => {}
            Some(was) if set.cpus.difference(&was.cpus).is_empty() => {
                before.push(resize_step(c.shield_dir, &set.name, (&was.cpus, &set.cpus)));
            }
            Some(was) => after.push(resize_step(c.shield_dir, &set.name, (&was.cpus, &set.cpus))),
            None => {
                if plain_v2 && !enabled && !after.iter().any(|s: &Step| is_enable(s)) {
                    after.push(enable_cpuset(c.shield_dir));
                }
                after.extend(make(c.cgroup, c.shield_dir, set, c.v1));
            }
        }
    }
    Ok((before, after))
}

fn is_enable(step: &Step) -> bool {
    matches!(&step.action, Action::Write { path, value, .. } if path.ends_with("/cgroup.subtree_control") && value == "+cpuset")
}

/// The mechanism's own change, read from `action`.
pub fn own_of(action: &Action) -> Option<Own> {
    action.own_as::<Own>()
}

/// Makes `own`: the set's slice stopped, or its directory removed (the
/// kernel refuses while tasks are in it).
pub fn make_own(sys: &crate::sys::Sys, own: &Own) -> Result<(), crate::sys::SysError> {
    let Own::DropSet { dir, unit, .. } = own;
    match unit {
        Some(unit) => sys.systemd(&SystemdCall::Stop { unit: unit.clone() }),
        None => sys.rmdir(dir),
    }
}

/// Undoes `own`: the set made again with its CPUs.
pub fn undo_own(sys: &crate::sys::Sys, own: &Own) -> Result<(), crate::sys::SysError> {
    let Own::DropSet {
        dir,
        unit,
        cpus,
        v1_mems,
        v1_load_balance,
    } = own;
    if let Some(unit) = unit {
        return sys.systemd(&SystemdCall::StartSlice {
            unit: unit.clone(),
            cpus: cpus.clone(),
            cgroup_dir: dir.clone(),
            partition: None,
        });
    }
    if !sys.exists(dir) {
        sys.mkdir(dir)?;
    }
    sys.write(&format!("{dir}/cpuset.cpus"), &cpus.to_string())?;
    if let (Some(mems), Some(balance)) = (v1_mems, v1_load_balance) {
        sys.write(&format!("{dir}/cpuset.mems"), mems)?;
        sys.write(&format!("{dir}/cpuset.sched_load_balance"), balance)?;
    }
    Ok(())
}

/// Whether `own` names only a set's cgroup or slice (why not).
pub fn own_within(own: &Own, bounds: &crate::shield::reach::Bounds) -> Result<(), String> {
    let Own::DropSet { dir, unit, .. } = own;
    match unit {
        Some(unit) => {
            bounds.unit(unit)?;
            bounds.cgroup(dir)
        }
        None => bounds.dir(dir),
    }
}

/// `own` for reports.
pub fn describe(own: &Own) -> String {
    let Own::DropSet { dir, unit, .. } = own;
    match unit {
        Some(unit) => format!("the set's slice {unit}"),
        None => format!("the set's cgroup /{dir}"),
    }
}

/// The sets `named` of the shield whose cgroup is `shield_dir`, as the
/// kernel reads them now: one line (`a 2 (1 task), b 3`), and what no
/// longer holds (a set's cgroup gone, or other CPUs than asked).
pub fn read_back(sys: &crate::sys::Sys, shield_dir: &str, named: &[NamedSet]) -> (String, Vec<String>) {
    let mut said = Vec::new();
    let mut lost = Vec::new();
    for set in named {
        let dir = dir(shield_dir, &set.name);
        match sys.read_cpulist(&format!("{dir}/cpuset.cpus")) {
            Err(_) => {
                said.push(format!("{} gone", set.name));
                lost.push(format!("the set {}'s cgroup /{dir} is gone: its tasks are no longer kept on CPUs {}", set.name, set.cpus));
            }
            Ok(cpus) => {
                // its own processes and its scopes' (under systemd)
                let count = |d: &str| sys.read(&format!("{d}/cgroup.procs")).map_or(0, |t| t.split_whitespace().count());
                let scopes = sys.subdirs(&dir).unwrap_or_default();
                let tasks = count(&dir) + scopes.iter().map(|s| count(&format!("{dir}/{s}"))).sum::<usize>();
                let inside = match tasks {
                    0 => String::new(),
                    1 => " (1 task)".into(),
                    n => format!(" ({n} tasks)"),
                };
                said.push(format!("{} CPUs {cpus}{inside}", set.name));
                if cpus != set.cpus {
                    lost.push(format!("the set {} has CPUs {cpus} (/{dir}/cpuset.cpus), not {}", set.name, set.cpus));
                }
            }
        }
    }
    (said.join(", "), lost)
}
