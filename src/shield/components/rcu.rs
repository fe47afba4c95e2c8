//! Expedited RCU: the kernel's expedited grace periods made normal ones
//! while the shield lives (`--rcu-normal`, config key `rcu_normal`).
//!
//! An expedited grace period (`synchronize_rcu_expedited()`: cgroup and
//! network namespace teardown, module unload, a container's start and
//! stop) sends an IPI to every online CPU that is not idle and not in an
//! extended quiescent state, so a shielded CPU running its real-time task
//! with the tick on (no `nohz_full=`) takes a function-call interrupt each
//! time (`CAL` in `/proc/interrupts`). `/sys/kernel/rcu_normal` 1 makes the
//! kernel wait for a normal grace period instead, which asks nothing of
//! the CPUs (its callers wait milliseconds longer). PREEMPT_RT kernels set
//! it after boot already (`rcu_normal_after_boot`). One journaled file
//! write, undone by writing back what was read before.

use serde::{Deserialize, Serialize};

use crate::finding::{Finding, Severity};
use crate::shield::change::{Action, Check, Owner, Step, Subject, Undo};
use crate::shield::component::{
    unless_held, Changing, Component, Draft, InPlace, Looking, Looks, Phase, Planning,
};
use crate::shield::error::ShieldError;
use crate::shield::journal::Entry;
use crate::shield::options::Declared;
use crate::shield::parts::{Line, MachineWide, OwnFacts, PartReport};
use crate::shield::plan::PlanError;
use crate::shield::request::Request;
use crate::shield::reshape::Originals;
use crate::shield::snapshot::Snapshot;
use crate::sys::Sys;

/// This component, as it names itself in the journal and in reports.
pub const OWNER: Owner = Owner("rcu");

/// The component's name, in reports and under which its facts are kept.
const NAME: &str = "rcu";

/// The switch, relative to the root.
pub const RCU_NORMAL: &str = "sys/kernel/rcu_normal";

/// Its option, as `on` and the config file take it.
#[derive(clap::Args, Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[group(skip)]
pub struct Options {
    /// Make the kernel's expedited RCU grace periods normal ones
    /// (/sys/kernel/rcu_normal 1, machine-wide): an expedited one
    /// interrupts every CPU that is not idle, the shielded CPUs' real-time
    /// tasks among them; its callers (a container's start and stop,
    /// namespace teardown) then wait milliseconds longer (undone by `off`).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "crate::shield::options::is_false")]
    pub rcu_normal: bool,
}

impl Declared for Options {
    const EXAMPLES: &'static [(&'static str, &'static str)] = &[("rcu_normal", "true")];
}

/// Whether `req` asks for normal grace periods.
fn asked(req: &Request) -> bool {
    req.declared::<Options>().is_ok_and(|o| o.rcu_normal)
}

/// What the component read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Facts {
    /// `/sys/kernel/rcu_normal` as read; `None` where the kernel has none
    /// (Tiny RCU).
    pub rcu_normal: Option<String>,
    /// Whether that file may be written.
    pub writable: bool,
}

/// Reads the switch.
pub fn read(sys: &Sys) -> Facts {
    let rcu_normal = sys.read_trimmed(RCU_NORMAL).ok();
    Facts {
        writable: rcu_normal.is_some() && sys.mode_allows_write(RCU_NORMAL),
        rcu_normal,
    }
}

/// The report of `facts` as they read now.
fn report(facts: &Facts, findings: Vec<Finding>) -> PartReport {
    let said = match facts.rcu_normal.as_deref() {
        Some("1") => "normal only (rcu_normal 1): no expedited grace period interrupts the shielded CPUs".to_string(),
        Some(v) => format!("expedited allowed (rcu_normal {v})"),
        None => "the kernel has no /sys/kernel/rcu_normal".to_string(),
    };
    PartReport {
        component: NAME.into(),
        lines: vec![Line::new("RCU grace periods", said)],
        data: serde_json::to_value(facts).unwrap_or_default(),
        findings,
        metrics: Vec::new(),
        details: Vec::new(),
    }
}

/// Expedited RCU, as a component of the shield.
pub(in crate::shield) struct Part;

impl Component for Part {
    fn owner(&self) -> Owner {
        OWNER
    }

    fn reaches(&self, reach: &mut crate::shield::reach::Reach) {
        reach.files.push(RCU_NORMAL.into());
    }

    fn read(&self, sys: &Sys, req: &Request, facts: &mut OwnFacts) -> Result<(), ShieldError> {
        if asked(req) {
            facts.put(NAME, &read(sys));
        }
        Ok(())
    }

    fn check(&self, cx: &Planning, _: &mut Draft) -> Result<(), PlanError> {
        if !asked(cx.req) {
            return Ok(());
        }
        let facts: Facts = cx.snap.parts.get(NAME).unwrap_or_default();
        let why = match (&facts.rcu_normal, facts.writable) {
            (None, _) => "this kernel has no /sys/kernel/rcu_normal (Tiny RCU, or /sys not mounted)",
            (Some(_), false) => "/sys/kernel/rcu_normal is not writable",
            _ => return Ok(()),
        };
        Err(PlanError::Part {
            option: "--rcu-normal",
            message: format!("--rcu-normal: {why}; run as root with /sys mounted read-write, or leave out --rcu-normal"),
        })
    }

    fn plan(&self, cx: &Planning, d: &mut Draft) -> Result<(), PlanError> {
        if !asked(cx.req) {
            return Ok(());
        }
        let facts: Facts = cx.snap.parts.get(NAME).unwrap_or_default();
        if facts.rcu_normal.as_deref() != Some("1") {
            let action = Action::Write {
                path: RCU_NORMAL.into(),
                value: "1".into(),
                check: Check::Text,
                undo: Undo::Previous,
            };
            d.add(Phase::Tuning, vec![Step::fatal(OWNER, action)]);
        }
        Ok(())
    }

    fn before(&self, orig: &Originals, _: &[Entry], snap: &mut Snapshot) {
        let Some(mut facts) = snap.parts.get::<Facts>(NAME) else {
            return;
        };
        if let Some(value) = orig.file(RCU_NORMAL) {
            facts.rcu_normal = Some(value.trim().to_string());
        }
        snap.parts.put(NAME, &facts);
    }

    fn change(&self, cx: &InPlace, mine: Vec<(Phase, Step)>, out: &mut Changing) {
        unless_held(cx, mine, out)
    }

    fn claims(&self, path: &str) -> Option<Subject> {
        (path == RCU_NORMAL).then(|| Subject::File(path.to_string()))
    }

    fn machine_wide(&self, steps: &[Step]) -> Vec<MachineWide> {
        (steps.iter().filter(|s| s.owner == OWNER))
            .map(|_| MachineWide {
                component: OWNER.name().into(),
                what: "/sys/kernel/rcu_normal 1: every CPU's synchronize_rcu_expedited() callers wait for a normal grace period".into(),
                without: "leave out --rcu-normal (rcu_normal in the config)".into(),
            })
            .collect()
    }

    fn looks(&self) -> Option<&dyn Looks> {
        Some(self)
    }
}

impl Looks for Part {
    /// Whether the switch still reads 1, for a shield that asked for it.
    fn status(&self, cx: &Looking) -> Option<PartReport> {
        if !asked(cx.state.request.as_ref()?) {
            return None;
        }
        let facts = read(cx.sys);
        let mut findings = Vec::new();
        if facts.rcu_normal.as_deref() != Some("1") {
            findings.push(Finding::new(
                NAME,
                Severity::Bad,
                50,
                format!(
                    "/sys/kernel/rcu_normal reads {}: expedited grace periods interrupt the shielded CPUs again",
                    facts.rcu_normal.as_deref().unwrap_or("nothing")
                ),
                cx.repair,
            ));
        }
        Some(report(&facts, findings))
    }
}
