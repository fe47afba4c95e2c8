//! What a journal record may name, checked before `off` acts on it. The
//! journal lives in a directory only root may write (`/run/cpushield`,
//! 0700); this is defence in depth behind that. A record is acted on only
//! when all it names is what some shield changes:
//!
//! - a kernel file of the components' [`Reach`] (matched by pattern), or a
//!   cgroup's file under the cgroup mount the journal's state recorded;
//! - a directory, a mount point, a systemd unit and the properties a
//!   shield sets on it;
//! - every path plain (relative, no `..`) and resolved beneath the root
//!   through no link but sysfs's own ([`crate::sys::beneath`]).
//!
//! A component's own actions are checked by their component (the
//! components' `Effects::within`, handed to [`Bounds::entry`]); one no
//! component vouches for is refused. The engine names no component: what
//! they touch comes from `Effects::reach`. The screening of a journal's
//! records with both is [`super::screen`].

use std::cell::RefCell;
use std::collections::HashMap;

use super::change::Action;
use super::journal::{Entry, State};
use crate::input::brief_to;
use crate::sys::beneath::Beneath;
use crate::sys::systemd::SystemdCall;
use crate::sys::{procfs, Sys};

/// What the shield's components change, as a record may name it. Paths
/// are relative to the root; in a pattern `*` stands for one or more
/// characters of one component (`proc/irq/*/smp_affinity_list`).
#[derive(Debug, Clone, Default)]
pub struct Reach {
    /// Kernel files written outside the cgroup hierarchy (patterns).
    pub files: Vec<String>,
    /// Directories made outside the cgroup hierarchy (patterns).
    pub dirs: Vec<String>,
    /// Where a file system is mounted (cgroup2 where none is, resctrl).
    pub mounts: Vec<String>,
    /// The files of a cgroup a shield writes, in any cgroup under the
    /// mount (`cpuset.cpus`; `cgroup.procs` of where a task goes back).
    pub cgroup_files: Vec<String>,
    /// The cgroups a shield makes, right under the mount.
    pub cgroup_dirs: Vec<String>,
    /// The systemd units a shield starts and stops (patterns).
    pub units: Vec<String>,
    /// Units a shield never starts or stops but whose CPUs it sets, and
    /// gives back (`AllowedCPUs=` of the OS's units on a Kubernetes node).
    pub resized_units: Vec<String>,
    /// The partition types a shield asks systemd for (`CPUSetPartition=`).
    pub partitions: Vec<String>,
}

/// Whether `path` matches `pattern` component by component (see [`Reach`]).
pub fn matches(pattern: &str, path: &str) -> bool {
    let (mut p, mut q) = (pattern.split('/'), path.split('/'));
    loop {
        match (p.next(), q.next()) {
            (None, None) => return true,
            (Some(a), Some(b)) if part_matches(a, b) => {}
            _ => return false,
        }
    }
}

fn part_matches(pattern: &str, part: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == part,
        Some((head, tail)) => {
            part.len() > head.len() + tail.len() && part.starts_with(head) && part.ends_with(tail)
        }
    }
}

/// How a component's own action is judged within [`Bounds`]: `None` when
/// no component claims it.
pub type Within<'a> = dyn Fn(&Action, &Bounds) -> Option<Result<(), String>> + 'a;

/// The [`Reach`] bound to one journal on one machine: the cgroup mount its
/// state recorded, and the root to resolve paths beneath.
pub struct Bounds {
    reach: Reach,
    /// The cgroup mounts records may name cgroups under; why none, when
    /// the recorded one is refused.
    cgroups: Result<Vec<String>, String>,
    beneath: Result<Beneath, String>,
    resolved: RefCell<HashMap<String, Result<(), String>>>,
}

impl Bounds {
    /// The bounds of the journal whose state is `state` on `sys`. The
    /// cgroup mount is the one the state recorded (the parent of the
    /// shield's cgroup), while a cgroup file system is mounted there or it
    /// is where a shield mounts one; without a state (a damaged journal),
    /// the cgroup mounts of the mount table.
    pub fn new(sys: &Sys, reach: Reach, state: Option<&State>) -> Bounds {
        let table: Vec<String> = sys
            .read("proc/self/mounts")
            .map(|t| procfs::parse_mounts(&t))
            .unwrap_or_default()
            .into_iter()
            .filter(|m| m.fstype == "cgroup2" || m.fstype == "cgroup")
            .map(|m| m.target.trim_start_matches('/').to_string())
            .collect();
        let cgroups = match state {
            None => Ok(table),
            // A shield of no cgroup of its own (the OS's units confined
            // instead): the cgroup mount, as mounted.
            Some(state) if state.shield_dir.is_empty() => Ok(table),
            Some(state) => recorded_mount(&reach, &table, &state.shield_dir).map(|m| vec![m]),
        };
        Bounds {
            reach,
            cgroups,
            beneath: sys
                .beneath()
                .map_err(|e| format!("the root cannot be opened: {e}")),
            resolved: RefCell::default(),
        }
    }

    /// `path` is plain: relative, with no `.` or `..` component.
    fn plain(path: &str) -> Result<(), String> {
        crate::sys::beneath::plain(path).map_err(|why| format!("/{}: {why}", brief_to(path, 120)))
    }

    /// Resolves `path` beneath the root ([`Beneath::check`]), once.
    fn resolves(&self, path: &str) -> Result<(), String> {
        if let Some(known) = self.resolved.borrow().get(path) {
            return known.clone();
        }
        let result = match &self.beneath {
            Ok(b) => b.check(path).map_err(|why| format!("/{path}: {why}")),
            Err(why) => Err(why.clone()),
        };
        self.resolved
            .borrow_mut()
            .insert(path.to_string(), result.clone());
        result
    }

    /// `path` is a cgroup under the cgroup mount (`dir`), or a file of one.
    fn under_cgroup_mount(&self, path: &str) -> Result<(), String> {
        let mounts = self.cgroups.as_ref().map_err(Clone::clone)?;
        if mounts.iter().any(|m| path.starts_with(&format!("{m}/"))) {
            return Ok(());
        }
        let shown: Vec<String> = mounts.iter().map(|m| format!("/{m}")).collect();
        Err(format!(
            "/{path} is not under the cgroup mount ({})",
            if shown.is_empty() {
                "none is mounted".into()
            } else {
                shown.join(", ")
            }
        ))
    }

    /// A cgroup's file a shield writes (`cpuset.cpus`, `cgroup.procs`, ...).
    pub fn cgroup_file(&self, path: &str) -> Result<(), String> {
        Bounds::plain(path)?;
        let name = path.rsplit('/').next().unwrap_or(path);
        if !self.reach.cgroup_files.iter().any(|f| f == name) {
            return Err(format!("/{path} is no cgroup file a shield writes"));
        }
        self.under_cgroup_mount(path)?;
        self.resolves(path)
    }

    /// A cgroup directory under the cgroup mount (one a systemd unit has).
    pub fn cgroup(&self, dir: &str) -> Result<(), String> {
        Bounds::plain(dir)?;
        self.under_cgroup_mount(dir)?;
        self.resolves(dir)
    }

    /// A file a shield writes: a kernel file of the reach, or a cgroup's.
    pub fn file(&self, path: &str) -> Result<(), String> {
        Bounds::plain(path)?;
        if self.reach.files.iter().any(|p| matches(p, path)) {
            return self.resolves(path);
        }
        let name = path.rsplit('/').next().unwrap_or(path);
        let cgroup_file = self.reach.cgroup_files.iter().any(|f| f == name);
        if cgroup_file && self.under_cgroup_mount(path).is_ok() {
            return self.resolves(path);
        }
        let mounts = match &self.cgroups {
            Ok(m) if !m.is_empty() => m
                .iter()
                .map(|m| format!("/{m}"))
                .collect::<Vec<_>>()
                .join(", "),
            Ok(_) => "none is mounted".into(),
            Err(why) => why.clone(),
        };
        Err(format!(
            "/{path} is neither a kernel file a shield writes (its knobs under /proc/sys, /proc/irq and /sys) nor a cgroup's file under the cgroup mount ({mounts})"
        ))
    }

    /// A directory a shield makes (and undo removes).
    pub fn dir(&self, path: &str) -> Result<(), String> {
        Bounds::plain(path)?;
        let own_cgroup = |m: &String| {
            path.strip_prefix(&format!("{m}/"))
                .is_some_and(|name| self.reach.cgroup_dirs.iter().any(|d| matches(d, name)))
        };
        let cgroup = self
            .cgroups
            .as_ref()
            .is_ok_and(|ms| ms.iter().any(own_cgroup));
        if !cgroup && !self.reach.dirs.iter().any(|p| matches(p, path)) {
            return Err(format!("/{path} is no directory a shield makes"));
        }
        self.resolves(path)
    }

    /// A mount point a shield mounts on (and undo unmounts).
    pub fn mount(&self, target: &str) -> Result<(), String> {
        Bounds::plain(target)?;
        if !self.reach.mounts.iter().any(|m| m == target) {
            return Err(format!("/{target} is no mount point a shield mounts on"));
        }
        self.resolves(target)
    }

    /// A systemd unit a shield starts.
    pub fn unit(&self, unit: &str) -> Result<(), String> {
        if self.reach.units.iter().any(|p| matches(p, unit)) {
            Ok(())
        } else {
            Err(format!(
                "the systemd unit {} is none a shield starts",
                brief_to(unit, 80)
            ))
        }
    }

    /// Whether `entry` names only what a shield changes; why not. A
    /// component's own action is judged by `own` (the components'
    /// `Effects::within`): `None` when no component claims it.
    pub fn entry(&self, own: &Within, entry: &Entry) -> Result<(), String> {
        match &entry.action {
            Action::MountCgroup2 { target, .. } => self.mount(target),
            Action::Mkdir { path } => self.dir(path),
            Action::Write { path, .. } => self.file(path),
            Action::MoveTask { to, back, .. } => {
                self.cgroup_file(to)?;
                self.cgroup_file(back)
            }
            Action::Systemd { call, undo, back } => self.systemd(call, undo.as_ref(), back),
            Action::Own { .. } => own(&entry.action, self)
                .unwrap_or_else(|| Err("no component of this cpushield vouches for it".into())),
            Action::Remember { .. } | Action::SetAffinity { .. } | Action::SetScheduler { .. } => {
                Ok(())
            }
        }
    }

    /// A request to systemd: one that starts or resizes a unit a shield
    /// starts, in a cgroup under the mount, undone by stopping that unit
    /// or giving it back the CPUs (and partition) it had; its processes
    /// moved back to a cgroup under the mount.
    fn systemd(
        &self,
        call: &SystemdCall,
        undo: Option<&SystemdCall>,
        back: &Option<String>,
    ) -> Result<(), String> {
        let (unit, dir, stoppable) = match call {
            SystemdCall::StartSlice {
                unit, cgroup_dir, ..
            }
            | SystemdCall::StartScope {
                unit, cgroup_dir, ..
            } => (unit, cgroup_dir, true),
            SystemdCall::SetAllowedCpus {
                unit, cgroup_dir, ..
            } => (unit, cgroup_dir, false),
            other => return Err(format!("{}: no request a shield makes", shown(other))),
        };
        let resized_only = !stoppable && self.reach.resized_units.iter().any(|u| u == unit);
        if !resized_only {
            self.unit(unit)?;
        } else if dir.rsplit_once('/').is_none_or(|(_, name)| name != unit) {
            return Err(format!("{}: not the cgroup of {unit}", shown(call)));
        }
        self.cgroup(dir)?;
        if let Some(back) = back {
            self.cgroup_file(back)?;
        }
        match undo {
            None => Ok(()),
            Some(SystemdCall::Stop { unit: stop }) if stoppable && stop == unit => Ok(()),
            Some(SystemdCall::SetAllowedCpus {
                unit: same,
                cgroup_dir,
                partition,
                ..
            }) if same == unit => {
                self.cgroup(cgroup_dir)?;
                match partition {
                    Some(p) if !self.reach.partitions.contains(p) => Err(format!(
                        "{}: CPUSetPartition={} is no partition a shield asks for",
                        shown(undo.expect("matched")),
                        brief_to(p, 40)
                    )),
                    _ => Ok(()),
                }
            }
            Some(other) => Err(format!(
                "{}: not how a shield undoes {}",
                shown(other),
                shown(call)
            )),
        }
    }
}

/// A systemd request as its command line, briefly.
pub(super) fn shown(call: &SystemdCall) -> String {
    format!("systemd: {}", brief_to(&call.command_line().join(" "), 160))
}

/// The cgroup mount of the shield whose cgroup is `shield_dir`: its
/// parent, while a cgroup file system is mounted there (`table`) or it is
/// where a shield mounts one, and the cgroup's name one a shield gives.
fn recorded_mount(reach: &Reach, table: &[String], shield_dir: &str) -> Result<String, String> {
    let refused = |why: &str| {
        Err(format!(
            "the shield's cgroup the journal recorded, /{}, {why}",
            brief_to(shield_dir, 120)
        ))
    };
    let Some((mount, name)) = shield_dir.rsplit_once('/') else {
        return refused("is not under a cgroup mount");
    };
    let named =
        reach.cgroup_dirs.iter().any(|d| d == name) || reach.units.iter().any(|u| matches(u, name));
    if !named {
        return refused("is none a shield makes");
    }
    if crate::sys::beneath::plain(shield_dir).is_err() {
        return refused("is not a plain path");
    }
    if !table.iter().any(|m| m == mount) && !reach.mounts.iter().any(|m| m == mount) {
        return refused("is not under a cgroup mount");
    }
    Ok(mount.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shield::apply::Effects;
    use crate::shield::components::EFFECTS;
    use crate::shield::engine::change::{Check, Undo};
    use crate::shield::engine::journal::State;

    /// A root whose mount table has cgroup2 at /sys/fs/cgroup.
    fn root() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc/self")).unwrap();
        std::fs::write(
            dir.path().join("proc/self/mounts"),
            "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n",
        )
        .unwrap();
        dir
    }

    fn entry(action: Action) -> Entry {
        Entry {
            action,
            owner: None,
            previous: None,
            at: None,
        }
    }

    fn write(path: &str) -> Entry {
        entry(Action::Write {
            path: path.into(),
            value: "x".into(),
            check: Check::Text,
            undo: Undo::Previous,
        })
    }

    fn slice(undo: SystemdCall) -> Entry {
        entry(Action::Systemd {
            call: SystemdCall::StartSlice {
                unit: "cpushield.slice".into(),
                cpus: "2-3".parse().unwrap(),
                cgroup_dir: "sys/fs/cgroup/cpushield.slice".into(),
                partition: None,
            },
            undo: Some(undo),
            back: None,
        })
    }

    #[test]
    fn a_record_passes_only_within_the_reach_and_the_recorded_cgroup_mount() {
        let dir = root();
        let sys = Sys::at(dir.path());
        let state = State::example();
        let b = Bounds::new(&sys, EFFECTS.reach(), Some(&state));
        let ok = |e: Entry| assert_eq!(b.entry(&|a, b| EFFECTS.within(a, b), &e), Ok(()), "{e:?}");
        let refused = |e: Entry, why: &str| {
            let err = b.entry(&|a, b| EFFECTS.within(a, b), &e).unwrap_err();
            assert!(err.contains(why), "{e:?}: {err}");
        };
        ok(write("proc/irq/24/smp_affinity_list"));
        ok(write("sys/fs/cgroup/cpushield/cpuset.cpus.partition"));
        ok(entry(Action::Mkdir {
            path: "sys/fs/cgroup/cpushield".into(),
        }));
        refused(write("etc/shadow"), "/etc/shadow is neither a kernel file");
        refused(write("/proc/irq/24/smp_affinity_list"), "an absolute path");
        refused(
            write("sys/fs/cgroup/cpushield/../../../etc/x"),
            "a `..` component",
        );
        refused(write("sys/fs/cgroup/cpushield/memory.max"), "neither");
        refused(
            entry(Action::Mkdir {
                path: "sys/fs/cgroup/system.slice".into(),
            }),
            "no directory a shield makes",
        );
        refused(
            entry(Action::MountCgroup2 {
                target: "etc".into(),
                make_dir: true,
            }),
            "no mount point",
        );
        ok(slice(SystemdCall::Stop {
            unit: "cpushield.slice".into(),
        }));
        refused(
            slice(SystemdCall::Stop {
                unit: "ssh.service".into(),
            }),
            "not how a shield undoes",
        );
        refused(
            slice(SystemdCall::SetEnvironment {
                assignments: vec!["LD_PRELOAD=/tmp/x.so".into()],
            }),
            "set-environment LD_PRELOAD",
        );
        refused(
            slice(SystemdCall::SetAllowedCpus {
                unit: "cpushield.slice".into(),
                cpus: "0-3".parse().unwrap(),
                cgroup_dir: "sys/fs/cgroup/cpushield.slice".into(),
                partition: Some("member".into()),
            }),
            "CPUSetPartition=member is no partition",
        );
    }

    #[test]
    fn a_state_naming_another_cgroup_mount_bounds_no_cgroup_record() {
        let dir = root();
        let sys = Sys::at(dir.path());
        let state = State {
            shield_dir: "etc/cpushield".into(),
            ..State::example()
        };
        let b = Bounds::new(&sys, EFFECTS.reach(), Some(&state));
        let err = b
            .entry(
                &|a, b| EFFECTS.within(a, b),
                &write("etc/cpushield/cpuset.cpus"),
            )
            .unwrap_err();
        assert!(
            err.contains("/etc/cpushield, is not under a cgroup mount"),
            "{err}"
        );
        // Without a state (a damaged journal): the mount table's.
        let b = Bounds::new(&sys, EFFECTS.reach(), None);
        assert_eq!(
            b.entry(
                &|a, b| EFFECTS.within(a, b),
                &write("sys/fs/cgroup/cpushield/cpuset.cpus")
            ),
            Ok(())
        );
    }

    #[test]
    fn a_pattern_matches_component_by_component() {
        assert!(matches(
            "proc/irq/*/smp_affinity_list",
            "proc/irq/24/smp_affinity_list"
        ));
        assert!(!matches(
            "proc/irq/*/smp_affinity_list",
            "proc/irq//smp_affinity_list"
        ));
        assert!(!matches(
            "proc/irq/*/smp_affinity_list",
            "proc/irq/24/x/smp_affinity_list"
        ));
        assert!(matches(
            "sys/class/net/*/queues/rx-*/rps_cpus",
            "sys/class/net/eth0/queues/rx-3/rps_cpus"
        ));
        assert!(!matches(
            "sys/class/net/*/queues/rx-*/rps_cpus",
            "sys/class/net/eth0/queues/tx-3/rps_cpus"
        ));
        assert!(matches("cpushield-run-*.scope", "cpushield-run-30.scope"));
        assert!(!matches("cpushield-run-*.scope", "cpushield-run-.scope"));
        assert!(!matches(
            "proc/sys/vm/stat_interval",
            "proc/sys/vm/stat_interval/x"
        ));
    }
}
