//! CPU hotplug (`--hotplug-restart`): each shielded CPU taken offline and
//! back, so that what the kernel placed on it by CPU (timers, per-CPU
//! work) goes elsewhere; refused up front where a CPU cannot go offline.

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;
use crate::finding::{Finding, Severity};
use crate::shield::change::{Action, Check, Owner, Step, Undo};
use crate::shield::component::{Changing, Component, Draft, InPlace, Looking, Planning, Slot};
use crate::shield::error::ShieldError;
use crate::shield::holds::Holds;
use crate::shield::journal::State;
use crate::shield::note::OwnNote;
use crate::shield::parts::{Line, OwnFacts, PartReport};
use crate::shield::plan_error::PlanError;
use crate::shield::request::Request;
use crate::sys::{procfs, Sys};
use std::collections::HashSet;

/// CPU hotplug's own notes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HotplugNote {
    /// `--hotplug-restart`: the CPUs go offline and online again before
    /// the cpusets are created.
    HotplugRestart {
        /// The CPUs restarted.
        cpus: CpuSet,
    },
}

impl OwnNote for HotplugNote {
    fn owner(&self) -> Owner {
        OWNER
    }

    fn text(&self) -> String {
        let HotplugNote::HotplugRestart { cpus } = self;
        format!("--hotplug-restart: CPUs {cpus} are taken offline and online again before the cpusets are created")
    }
}

/// This component, as it names itself in the journal and in reports.
pub const OWNER: Owner = Owner("hotplug");

/// Its option's config key (`--hotplug-restart`), a flag.
pub const KEY: &str = "hotplug_restart";

/// Its name among the facts components read for themselves.
const NAME: &str = "hotplug";

/// What it reads for `--hotplug-restart`: which of the requested CPUs have
/// a hotplug switch, and which of those this process may write.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(in crate::shield) struct Facts {
    /// CPUs with a `cpuN/online` file.
    pub files: CpuSet,
    /// Of those, the ones whose file may be written.
    pub writable: CpuSet,
}

/// The shielded CPUs the kernel has offline, read back for `status`:
/// someone took them offline after `on` (the shield's own
/// `--hotplug-restart` brings each back before `on` ends).
#[derive(Default)]
pub(in crate::shield) struct OnlineHold {
    /// Shielded CPUs not in `/sys/devices/system/cpu/online`.
    offline: CpuSet,
}

/// The CPU hotplug switch of `cpu`: write 0 to take it offline, 1 to bring it back.
pub fn cpu_online_file(cpu: u32) -> String {
    format!("sys/devices/system/cpu/cpu{cpu}/online")
}

/// Which of `cpus` have a hotplug switch, and which of those this
/// process may write: CPU 0 often has none.
pub(in crate::shield) fn read(sys: &Sys, cpus: &CpuSet) -> Facts {
    let mut files = CpuSet::new();
    let mut writable = CpuSet::new();
    for cpu in cpus.iter() {
        let file = cpu_online_file(cpu);
        if sys.exists(&file) {
            files.insert(cpu);
            if sys.mode_allows_write(&file) {
                writable.insert(cpu);
            }
        }
    }
    Facts { files, writable }
}

/// Which of `shield`'s CPUs are not `online`.
pub(in crate::shield) fn read_hold(online: &CpuSet, shield: &CpuSet) -> OnlineHold {
    OnlineHold {
        offline: shield.difference(online),
    }
}

impl Holds for OnlineHold {
    /// `offline`: a shielded CPU the kernel has offline. What the shield
    /// placed there is gone with it (the driver of a multi-queue device
    /// may spread its IRQs anew), and a real-time task bound to it alone
    /// no longer runs.
    fn lost(&self, _state: &State, repair: &str) -> Vec<Finding> {
        if self.offline.is_empty() {
            return Vec::new();
        }
        let online = self
            .offline
            .iter()
            .map(|c| format!("echo 1 > /{}", cpu_online_file(c)))
            .collect::<Vec<_>>()
            .join("; ");
        vec![Finding::new(
            "offline",
            Severity::Bad,
            100,
            format!(
                "CPU {} of the shield is offline: the kernel took it out of the partition, and tasks bound to it alone do not run",
                self.offline
            ),
            format!("bring it online ({online}), then {repair}"),
        )]
    }
}

/// Refuses `--hotplug-restart` when a shielded CPU cannot be taken offline:
/// no `cpuN/online` file (x86 CPU 0, kernels without CPU hotplug), or one
/// that may not be written.
pub(in crate::shield) fn check(
    (files, writable): (&CpuSet, &CpuSet),
    shield: &CpuSet,
) -> Result<(), PlanError> {
    let missing = shield.difference(files);
    let readonly = shield.intersection(files).difference(writable);
    let mut detail = Vec::new();
    if !missing.is_empty() {
        detail.push(format!(
            "CPUs {missing} cannot be taken offline (no {})",
            missing
                .iter()
                .map(|c| format!("/{}", cpu_online_file(c)))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !readonly.is_empty() {
        detail.push(format!(
            "CPUs {readonly} have a read-only online file ({})",
            readonly
                .iter()
                .map(|c| format!("/{}", cpu_online_file(c)))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if detail.is_empty() {
        Ok(())
    } else {
        Err(PlanError::Part {
            option: "--hotplug-restart",
            message: format!(
                "--hotplug-restart: {}; shield only CPUs that can go offline (writable /sys/devices/system/cpu/cpuN/online) or leave out --hotplug-restart",
                crate::input::brief_to(&detail.join("; "), 160)
            ),
        })
    }
}

/// Offline then online again, for each shielded CPU in turn. Undoing an
/// offline is writing 1: after a crash between the two writes, `off`
/// brings the CPU back. Both are fatal: a CPU that refuses to go offline
/// (EBUSY) or to come back aborts the shield and rolls it back.
pub(in crate::shield) fn steps(shield: &CpuSet) -> Vec<Step> {
    let mut out = Vec::new();
    for cpu in shield.iter() {
        let path = cpu_online_file(cpu);
        out.push(Step::fatal(
            OWNER,
            Action::Write {
                path: path.clone(),
                value: "0".into(),
                check: Check::Text,
                undo: Undo::Value("1".into()),
            },
        ));
        out.push(Step::fatal(
            OWNER,
            Action::Write {
                path,
                value: "1".into(),
                check: Check::Text,
                undo: Undo::Nothing,
            },
        ));
    }
    out
}

/// The shielded CPUs taken offline and online again, as a component of
/// the shield.
pub(in crate::shield) struct Part;

impl Component for Part {
    fn owner(&self) -> Owner {
        OWNER
    }

    fn read(&self, sys: &Sys, req: &Request, facts: &mut OwnFacts) -> Result<(), ShieldError> {
        if req.flag(KEY) {
            facts.put(NAME, &read(sys, &req.cpus));
        }
        Ok(())
    }

    fn check(&self, cx: &Planning, _: &mut Draft) -> Result<(), PlanError> {
        if !cx.req.flag(KEY) {
            return Ok(());
        }
        let facts: Facts = cx.snap.parts.get(NAME).unwrap_or_default();
        check((&facts.files, &facts.writable), cx.shield)
    }

    /// The shielded CPUs someone took offline since `on`, when any.
    fn status(&self, cx: &Looking) -> Option<PartReport> {
        let (sys, state, repair) = (cx.sys, cx.state, cx.repair);
        let online = procfs::online_cpus(sys).ok()?;
        let hold = read_hold(&online, &state.shield);
        let findings = hold.lost(state, repair);
        (!findings.is_empty()).then(|| PartReport {
            component: NAME.into(),
            lines: Line::under(NAME, findings.iter().map(|f| f.reason.clone()).collect()),
            data: serde_json::json!({ "offline": hold.offline.to_string() }),
            findings,
            metrics: Vec::new(),
            details: Vec::new(),
        })
    }

    fn plan(&self, cx: &Planning, d: &mut Draft) -> Result<(), PlanError> {
        if cx.req.flag(KEY) {
            d.add(Slot::Hotplug, steps(cx.shield));
            let cpus = cx.shield.clone();
            d.plan
                .notes
                .push(HotplugNote::HotplugRestart { cpus }.note());
        }
        Ok(())
    }

    /// The old shield's CPUs went offline and online already.
    fn change(&self, cx: &InPlace, mine: Vec<(Slot, Step)>, out: &mut Changing) {
        let old: HashSet<String> = cx.state.shield.iter().map(cpu_online_file).collect();
        for (slot, step) in mine {
            match &step.action {
                Action::Write { path, .. } if old.contains(path) => {}
                _ => out.unless_held(cx, slot, step),
            }
        }
    }
}
