//! Idle states: the shielded CPUs kept out of the idle states whose exit
//! latency is over a bound the user gives (`--max-idle-latency`, config
//! key `max_idle_latency`), the housekeeping CPUs left free to save power.
//!
//! A deep C-state adds its exit latency (tens to hundreds of µs on servers)
//! to the first interrupt after an idle period. tuned's realtime profile
//! holds `/dev/cpu_dma_latency`, which bounds every CPU of the machine;
//! the kernel also has a bound per CPU, its PM QoS resume latency
//! (`cpuN/power/pm_qos_resume_latency_us`), which the cpuidle governors
//! honour: they never pick a state whose exit latency is over it. That is
//! what this component writes, one file per shielded CPU; where a kernel
//! does not have it, the `disable` file of each state over the bound. Every
//! write is an ordinary journaled file write, undone by writing back what
//! it read before.
//!
//! The PM QoS file reads `0` for no bound and `n/a` for no latency at all
//! (only polling); `0` written means no bound again, so a bound of 0 µs is
//! written as `n/a`.

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;
use crate::finding::{Finding, Severity};
use crate::shield::change::{Action, Check, Owner, Step, Subject, Undo};
use crate::shield::component::{
    unless_held, Changing, Component, Draft, InPlace, Looking, Phase, Planning, Reporting,
};
use crate::shield::component::{Looks, Reports};
use crate::shield::error::ShieldError;
use crate::shield::journal::Entry;
use crate::shield::options::Declared;
use crate::shield::parts::{Line, OwnFacts, PartReport};
use crate::shield::plan::PlanError;
use crate::shield::request::Request;
use crate::shield::reshape::Originals;
use crate::shield::snapshot::Snapshot;
use crate::sys::cpuidle::{read_states, IdleState};
use crate::sys::Sys;

/// This component, as it names itself in the journal and in reports.
pub const OWNER: Owner = Owner("idle-states");

/// The component's name, in reports and under which its facts are kept.
const NAME: &str = "idle-states";

/// Its option, as `on` and the config file take it.
#[derive(clap::Args, Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[group(skip)]
pub struct Options {
    /// Keep the shielded CPUs out of idle states whose exit latency is
    /// over LATENCY (`10us`, `1ms`, or a number of µs; `0`: polling only),
    /// through each CPU's PM QoS resume latency (or the slow states'
    /// `disable` files where the kernel has none); the housekeeping CPUs
    /// keep every idle state (undone by `off`).
    #[arg(long, value_name = "LATENCY", value_parser = parse_bound)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_idle_latency: Option<u32>,
}

impl Declared for Options {
    const EXAMPLES: &'static [(&'static str, &'static str)] = &[("max_idle_latency", "\"10us\"")];
}

/// The bound `req` asks for, µs.
fn bound_of(req: &Request) -> Option<u32> {
    req.declared::<Options>().ok()?.max_idle_latency
}

/// The largest bound accepted, µs (1 s: any idle state is faster).
pub const MAX_BOUND_US: u32 = 1_000_000;

/// One CPU's idle: its PM QoS bound and its states.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuIdle {
    /// The CPU.
    pub cpu: u32,
    /// `pm_qos_resume_latency_us` as read (`0`: no bound; `n/a`: no
    /// latency at all); `None` when the kernel has no such file.
    pub qos: Option<String>,
    /// Whether that file may be written.
    pub qos_writable: bool,
    /// Its cpuidle states (none without a cpuidle driver).
    pub states: Vec<IdleState>,
    /// Whether CRI-O's high-performance hook holds its PM QoS file for a
    /// running pod (`cpu-c-states.crio.io`): the shield leaves the file to
    /// it (see [`crate::crio`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub held_by_crio: bool,
}

/// What the component read: the shielded CPUs' idle.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Facts {
    /// One per CPU read.
    pub cpus: Vec<CpuIdle>,
}

/// How a CPU is kept out of the slow states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    /// Its PM QoS resume latency.
    PmQos,
    /// The `disable` files of the slow states.
    Disable,
    /// Nothing to hold: no cpuidle state over the bound and no PM QoS file
    /// (no cpuidle driver: the kernel's default idle).
    Nothing,
}

/// What the component planned, kept in the plan for its report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Planned {
    /// The bound, µs.
    pub bound_us: u32,
    /// How each shielded CPU is held, by CPU.
    pub via: Vec<(u32, Via)>,
}

/// One CPU's idle as it reads back: what `on` and `status` report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuOutcome {
    /// The CPU.
    pub cpu: u32,
    /// How it is held.
    pub via: Via,
    /// Its PM QoS resume latency as read back.
    pub qos: Option<String>,
    /// The states it may still enter, with their exit latencies.
    pub left: Vec<IdleState>,
    /// The states over the bound it may no longer enter.
    pub held_off: Vec<IdleState>,
    /// Whether CRI-O's hook holds its PM QoS file for a running pod.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub held_by_crio: bool,
}

/// The idle of the CPUs of a shield, read back against its bound.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// The bound, µs.
    pub bound_us: u32,
    /// Per shielded CPU.
    pub cpus: Vec<CpuOutcome>,
}

/// The PM QoS file of `cpu`, relative to the root.
pub fn qos_file(cpu: u32) -> String {
    format!("sys/devices/system/cpu/cpu{cpu}/power/pm_qos_resume_latency_us")
}

/// The `disable` file of `state` of `cpu`, relative to the root.
fn disable_file(cpu: u32, state: &str) -> String {
    format!("sys/devices/system/cpu/cpu{cpu}/cpuidle/{state}/disable")
}

/// What the PM QoS file is written for a bound of `us` µs: `0` there
/// means no bound, so a bound of 0 µs is `n/a` (no latency at all).
fn qos_value(us: u32) -> String {
    match us {
        0 => "n/a".into(),
        us => us.to_string(),
    }
}

/// The bound a PM QoS value means, µs (`None`: no bound).
fn qos_bound(value: &str) -> Option<u64> {
    match value.trim() {
        "n/a" => Some(0),
        "0" => None,
        v => v.parse().ok(),
    }
}

/// Parses a bound as the user writes it: `10`, `10us`, `10µs` or `1ms`.
/// The error names what is valid.
pub fn parse_bound(input: &str) -> Result<u32, String> {
    crate::input::duration_in(input, crate::input::TimeUnit::Micros)
        .ok()
        .and_then(|us| u32::try_from(us).ok())
        .filter(|us| *us <= MAX_BOUND_US)
        .ok_or_else(|| {
            format!(
                "{}: expected a latency from 0 to {MAX_BOUND_US} µs, such as 10, 10us or 1ms",
                crate::input::quote(input)
            )
        })
}

/// Reads the idle of `cpus`.
pub fn read(sys: &Sys, cpus: &CpuSet) -> Facts {
    let facts = cpus.iter().map(|cpu| {
        let qos = sys.read_trimmed(&qos_file(cpu)).ok();
        CpuIdle {
            cpu,
            qos_writable: qos.is_some() && sys.mode_allows_write(&qos_file(cpu)),
            qos,
            states: read_states(sys, cpu),
            held_by_crio: crate::crio::saved(sys, &qos_file(cpu)).is_some(),
        }
    });
    Facts {
        cpus: facts.collect(),
    }
}

/// How `cpu` is kept under `bound` µs: by PM QoS where the kernel has the
/// file, else by the slow states' `disable` files.
fn via(cpu: &CpuIdle, bound: u32) -> Via {
    let slow = cpu.states.iter().any(|s| s.latency_us > u64::from(bound));
    match (&cpu.qos, slow) {
        (Some(_), _) => Via::PmQos,
        (None, true) => Via::Disable,
        (None, false) => Via::Nothing,
    }
}

/// What a CPU that cannot be held lacks, for the refusal.
fn unholdable(cpu: &CpuIdle, bound: u32) -> Option<String> {
    match via(cpu, bound) {
        Via::PmQos if !cpu.qos_writable => Some(format!(
            "CPU {}: /{} is not writable",
            cpu.cpu,
            qos_file(cpu.cpu)
        )),
        Via::Disable => cpu
            .states
            .iter()
            .find(|s| s.latency_us > u64::from(bound) && !s.disabled && !s.writable)
            .map(|s| {
                let file = disable_file(cpu.cpu, &s.state);
                format!("CPU {}: /{file} ({}) is not writable", cpu.cpu, s.name)
            }),
        _ => None,
    }
}

/// The steps that keep `cpu` under `bound` µs.
fn steps(cpu: &CpuIdle, bound: u32) -> Vec<Step> {
    let write = |path: String, value: String| {
        let action = Action::Write {
            path,
            value,
            check: Check::Text,
            undo: Undo::Previous,
        };
        Step::fatal(OWNER, action)
    };
    match via(cpu, bound) {
        // CRI-O's hook holds it for a pod: the pod's choice, left to it
        Via::PmQos if cpu.held_by_crio => Vec::new(),
        Via::PmQos if cpu.qos.as_deref() != Some(qos_value(bound).as_str()) => {
            vec![write(qos_file(cpu.cpu), qos_value(bound))]
        }
        Via::Disable => (cpu.states.iter())
            .filter(|s| s.latency_us > u64::from(bound) && !s.disabled)
            .map(|s| write(disable_file(cpu.cpu, &s.state), "1".into()))
            .collect(),
        _ => Vec::new(),
    }
}

/// `facts` read back against `bound`: for each CPU, the states left and
/// those held off, as the kernel's files say now.
fn outcome(facts: &Facts, bound: u32) -> Outcome {
    let cpus = facts.cpus.iter().map(|cpu| {
        let limit = cpu.qos.as_deref().and_then(qos_bound).unwrap_or(u64::MAX);
        let (left, held_off) =
            (cpu.states.iter().cloned()).partition(|s| !s.disabled && s.latency_us <= limit);
        CpuOutcome {
            cpu: cpu.cpu,
            via: via(cpu, bound),
            qos: cpu.qos.clone(),
            left,
            held_off,
            held_by_crio: cpu.held_by_crio,
        }
    });
    Outcome {
        bound_us: bound,
        cpus: cpus.collect(),
    }
}

/// What no longer holds of `out`: a CPU that may enter a state over the
/// bound again, or whose PM QoS bound someone lifted or loosened (which
/// matters as soon as a cpuidle driver is loaded, even where none is).
fn lost(out: &Outcome, repair: &str) -> Vec<Finding> {
    let bound = u64::from(out.bound_us);
    let finding = |reason: String| Finding::new(NAME, Severity::Bad, 60, reason, repair);
    let mut found = Vec::new();
    for cpu in out.cpus.iter().filter(|c| !(c.held_by_crio && c.via == Via::PmQos)) {
        let qos = cpu.qos.as_deref().unwrap_or("absent");
        let slow: Vec<String> = (cpu.left.iter())
            .filter(|s| s.latency_us > bound)
            .map(|s| format!("{} ({} µs)", s.name, s.latency_us))
            .collect();
        let loosened = cpu.via == Via::PmQos
            && cpu
                .qos
                .as_deref()
                .and_then(qos_bound)
                .is_none_or(|q| q > bound);
        if !slow.is_empty() {
            found.push(finding(format!(
                "CPU {} may enter {} again, over the shield's {bound} µs (pm_qos_resume_latency_us reads {qos})",
                cpu.cpu,
                slow.join(", ")
            )));
        } else if loosened {
            found.push(finding(format!(
                "CPU {}'s pm_qos_resume_latency_us reads {qos} ({}), looser than the shield's {bound} µs",
                cpu.cpu,
                match qos {
                    "0" => "no bound".to_string(),
                    q => format!("{q} µs"),
                }
            )));
        }
    }
    found
}

/// The lines for people: per CPU, the states left and held off.
fn lines(out: &Outcome, dry_run: bool) -> Vec<String> {
    let state = |s: &IdleState| format!("{} {} µs", s.name, s.latency_us);
    let list = |v: &[IdleState]| v.iter().map(state).collect::<Vec<_>>().join(", ");
    let mut lines = Vec::new();
    for cpu in &out.cpus {
        if cpu.held_by_crio && cpu.via == Via::PmQos {
            lines.push(format!(
                "CPU {}: pm_qos_resume_latency_us reads {}, a pod's: CRI-O's hook holds it (cpu-c-states.crio.io), left to it",
                cpu.cpu,
                cpu.qos.as_deref().unwrap_or("absent")
            ));
            continue;
        }
        let how = match cpu.via {
            Via::PmQos => "PM QoS",
            Via::Disable => "disabled states",
            Via::Nothing => {
                lines.push(format!(
                    "CPU {}: no cpuidle state over {} µs, nothing to hold",
                    cpu.cpu, out.bound_us
                ));
                continue;
            }
        };
        if cpu.left.is_empty() && cpu.held_off.is_empty() {
            lines.push(format!(
                "CPU {} ≤ {} µs by {how} (no cpuidle state yet: no driver loaded)",
                cpu.cpu, out.bound_us
            ));
            continue;
        }
        let verb = if dry_run {
            "would hold off"
        } else {
            "held off"
        };
        let off = match cpu.held_off.is_empty() {
            true => String::new(),
            false => format!("; {verb} {}", list(&cpu.held_off)),
        };
        lines.push(format!(
            "CPU {} ≤ {} µs by {how}: left {}{off}",
            cpu.cpu,
            out.bound_us,
            list(&cpu.left)
        ));
    }
    lines
}

/// A report of `out`.
fn report(out: &Outcome, dry_run: bool, findings: Vec<Finding>) -> PartReport {
    PartReport {
        component: NAME.into(),
        lines: Line::under(NAME, lines(out, dry_run)),
        data: serde_json::to_value(out).unwrap_or_default(),
        findings,
        metrics: Vec::new(),
        details: Vec::new(),
    }
}

/// The idle states, as a component of the shield.
pub(in crate::shield) struct Part;

impl Component for Part {
    fn owner(&self) -> Owner {
        OWNER
    }

    /// CRI-O's `cpu-c-states.crio.io` hook writes back a stopped pod's CPUs' PM QoS.
    fn crio_hooks_change(&self) -> bool {
        true
    }

    fn tuned_overlaps(&self) -> &'static [(&'static str, &'static str, &'static str)] {
        &[("cpu", "force_latency", "--max-idle-latency (held for the whole machine)")]
    }

    /// Each CPU's PM QoS file ([`qos_file`]) and each idle state's switch.
    fn reaches(&self, reach: &mut crate::shield::reach::Reach) {
        reach.files.push("sys/devices/system/cpu/cpu*/power/pm_qos_resume_latency_us".into());
        reach.files.push("sys/devices/system/cpu/cpu*/cpuidle/state*/disable".into());
    }

    fn read(&self, sys: &Sys, req: &Request, facts: &mut OwnFacts) -> Result<(), ShieldError> {
        if bound_of(req).is_some() {
            facts.put(NAME, &read(sys, &req.cpus));
        }
        Ok(())
    }

    fn check(&self, cx: &Planning, _: &mut Draft) -> Result<(), PlanError> {
        let Some(bound) = bound_of(cx.req) else {
            return Ok(());
        };
        let refuse = |reason: String| PlanError::Part {
            option: "--max-idle-latency",
            message: format!("--max-idle-latency: {reason}"),
        };
        if bound > MAX_BOUND_US {
            return Err(refuse(format!(
                "{bound} µs: must be 0 to {MAX_BOUND_US} µs"
            )));
        }
        let facts: Facts = cx.snap.parts.get(NAME).unwrap_or_default();
        match facts.cpus.iter().find_map(|cpu| unholdable(cpu, bound)) {
            Some(why) => Err(refuse(format!(
                "{why}; run as root with /sys mounted read-write, or leave out --max-idle-latency"
            ))),
            None => Ok(()),
        }
    }

    fn plan(&self, cx: &Planning, d: &mut Draft) -> Result<(), PlanError> {
        let Some(bound) = bound_of(cx.req) else {
            return Ok(());
        };
        let facts: Facts = cx.snap.parts.get(NAME).unwrap_or_default();
        let mut via_cpu = Vec::new();
        for cpu in facts.cpus.iter().filter(|c| cx.shield.contains(c.cpu)) {
            d.add(Phase::Tuning, steps(cpu, bound));
            via_cpu.push((cpu.cpu, via(cpu, bound)));
        }
        let planned = Planned {
            bound_us: bound,
            via: via_cpu,
        };
        d.plan.parts.put(NAME, &planned);
        Ok(())
    }

    fn before(&self, orig: &Originals, _: &[Entry], snap: &mut Snapshot) {
        let Some(mut facts) = snap.parts.get::<Facts>(NAME) else {
            return;
        };
        for cpu in &mut facts.cpus {
            if let Some(value) = orig.file(&qos_file(cpu.cpu)) {
                cpu.qos = Some(value.to_string());
            }
            for s in &mut cpu.states {
                if let Some(value) = orig.file(&disable_file(cpu.cpu, &s.state)) {
                    s.disabled = value.trim() == "1";
                }
            }
        }
        snap.parts.put(NAME, &facts);
    }

    fn change(&self, cx: &InPlace, mine: Vec<(Phase, Step)>, out: &mut Changing) {
        unless_held(cx, mine, out)
    }

    fn claims(&self, path: &str) -> Option<Subject> {
        let cpu_file = path.strip_prefix("sys/devices/system/cpu/cpu")?;
        let ours = cpu_file.ends_with("/power/pm_qos_resume_latency_us")
            || (cpu_file.contains("/cpuidle/state") && cpu_file.ends_with("/disable"));
        ours.then(|| Subject::File(path.to_string()))
    }

    fn looks(&self) -> Option<&dyn Looks> {
        Some(self)
    }

    fn reports(&self) -> Option<&dyn Reports> {
        Some(self)
    }

}

impl Looks for Part {
    fn status(&self, cx: &Looking) -> Option<PartReport> {
        let (sys, state, repair) = (cx.sys, cx.state, cx.repair);
        let bound = bound_of(state.request.as_ref()?)?;
        let out = outcome(&read(sys, &state.shield), bound);
        let findings = lost(&out, repair);
        Some(report(&out, false, findings))
    }
}

impl Reports for Part {
    fn outcome(&self, cx: &Reporting) -> Option<PartReport> {
        let (sys, plan, dry_run) = (cx.sys, cx.plan, cx.dry_run);
        let planned: Planned = plan.parts.get(NAME)?;
        let mut facts = read(sys, &plan.shield);
        if dry_run {
            // As it would read back: the planned writes made.
            for step in plan.steps.iter().filter(|s| s.owner == OWNER) {
                if let Action::Write { path, value, .. } = &step.action {
                    apply_planned(&mut facts, path, value);
                }
            }
        }
        Some(report(
            &outcome(&facts, planned.bound_us),
            dry_run,
            Vec::new(),
        ))
    }
}

/// `facts` as they would read after writing `value` to `path`.
fn apply_planned(facts: &mut Facts, path: &str, value: &str) {
    for cpu in &mut facts.cpus {
        if path == qos_file(cpu.cpu) {
            cpu.qos = Some(value.to_string());
        }
        for s in &mut cpu.states {
            if path == disable_file(cpu.cpu, &s.state) {
                s.disabled = value.trim() == "1";
            }
        }
    }
}
