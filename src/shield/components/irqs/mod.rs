//! The IRQ component of the shield: which IRQs move off the shielded CPUs
//! (and the default affinity new IRQs get), which the user binds to the
//! shield (`--irq`), and the sweep for IRQs a driver put back meanwhile.

use crate::shield::component::{
    Changing, Component, Draft, InPlace, Looking, Phase, Planning, Reporting, Settling,
};
use crate::shield::component::{Looks, Reports, Settles};
use crate::shield::journal::Entry;
use crate::shield::parts::{Line, Metric, PartReport};
use crate::shield::facts::BoundIrqs;
use crate::shield::plan::Plan;
use crate::shield::reshape::Originals;
use crate::shield::snapshot::Snapshot;
use crate::shield::OnReport;
use std::collections::HashSet;
use std::sync::atomic::AtomicBool;

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;
use crate::escape::terminal;
use crate::finding::{Finding, Findings, Severity};
use crate::shield::apply::{self, Applied, ApplyError, Effects};
use crate::shield::change::{self, Action, Check, Owner, Refused, Step, Subject, Undo};
use crate::shield::holds::Holds;
use crate::shield::journal::{Journal, State};
use crate::shield::note::OwnNote;
use crate::shield::plan_error::PlanError;
use crate::sys::Sys;

/// This component, as it names itself in the journal and in reports.
pub const OWNER: Owner = Owner("irqs");

mod options;
mod plan;

pub(in crate::shield) use plan::{plan, resolve};
use options::asked;
pub use options::Options;

/// What the IRQs' plan keeps beyond its steps, under their name in the
/// plan's parts.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct Planned {
    /// IRQs bound to the shield on request (`--irq`).
    pub to_shield: Vec<u32>,
}

/// The IRQs bound to the shield on request in `plan`.
fn to_shield(plan: &Plan) -> Vec<u32> {
    plan.parts
        .get::<Planned>(OWNER.name())
        .unwrap_or_default()
        .to_shield
}

pub use crate::sys::irq::{
    irq_affinity_file, irq_of_affinity_file, read, Irq, DEFAULT_IRQ_AFFINITY,
};

/// An IRQ that refused its new affinity.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct IrqRefusal {
    /// IRQ number.
    pub irq: u32,
    /// Device name.
    pub name: String,
    /// Why (errno name).
    pub reason: String,
}

/// What the IRQs say of themselves, in `on`'s notes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum IrqsNote {
    /// IRQs that came back onto the shield while it changed in place
    /// (irqbalance places IRQs anew when it restarts): moved off again.
    IrqsBackAfterChange {
        /// The IRQs moved off again.
        irqs: Vec<u32>,
    },
    /// IRQs whose driver set them on the shield again when its CPUs came
    /// back online (CPU hotplug): moved off again.
    IrqsBackAfterHotplug {
        /// The IRQs moved off again.
        irqs: Vec<u32>,
    },
}

impl OwnNote for IrqsNote {
    fn owner(&self) -> Owner {
        OWNER
    }

    fn text(&self) -> String {
        match self {
            IrqsNote::IrqsBackAfterChange { irqs } => format!(
                "IRQs {} came back onto the shield while it changed (irqbalance places IRQs anew when it restarts); moved off again",
                irqs.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
            ),
            IrqsNote::IrqsBackAfterHotplug { irqs } => format!(
                "IRQs {} came back onto the shield when its CPUs came back online (their driver sets them on CPU hotplug); moved off again",
                irqs.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
            ),
        }
    }
}

/// What became of a plan's IRQ steps, as `on` reports it (`--json`: the
/// `data` of the part `irqs`).
#[derive(Debug, Default, Serialize, Deserialize)]
pub(in crate::shield) struct Outcome {
    /// IRQs moved to the housekeeping CPUs, by the plan and after it.
    pub(in crate::shield) moved: Vec<u32>,
    /// IRQs bound to the shield on request.
    pub(in crate::shield) to_shield: Vec<u32>,
    /// IRQs that refused a new affinity.
    pub(in crate::shield) refused: Vec<IrqRefusal>,
    /// IRQs whose effective affinity still includes a shielded CPU (it
    /// moves at the next interrupt, unless the IRQ refused).
    pub(in crate::shield) effective_on_shield: Vec<u32>,
}

/// What became of a plan's IRQ `steps` for the `shield` (IRQs `to_shield`
/// bound to it on request), given what the kernel `refused`, on the machine
/// `after` (with `--dry-run`: the machine before).
pub(in crate::shield) fn outcome(
    (steps, to_shield, shield): (&[Step], &[u32], &CpuSet),
    after: &[Irq],
    refused: &[Refused],
) -> Outcome {
    let refused_irqs: HashSet<u32> = refused
        .iter()
        .filter_map(|r| match r.subject {
            Subject::Irq(irq) => Some(irq),
            _ => None,
        })
        .collect();
    let moved = steps
        .iter()
        .filter(|s| s.owner == OWNER)
        .filter_map(Step::irq)
        .filter(|irq| !refused_irqs.contains(irq) && !to_shield.contains(irq))
        .collect();
    let refused = refused
        .iter()
        .filter_map(|r| match r.subject {
            Subject::Irq(irq) => Some(IrqRefusal {
                irq,
                name: name(after, irq),
                reason: r.refusal.reason.clone(),
            }),
            _ => None,
        })
        .collect();
    let effective_on_shield = after
        .iter()
        .filter(|i| !to_shield.contains(&i.irq))
        .filter(|i| i.effective.as_ref().is_some_and(|e| e.intersects(shield)))
        .map(|i| i.irq)
        .collect();
    Outcome {
        moved,
        to_shield: to_shield.to_vec(),
        refused,
        effective_on_shield,
    }
}

/// `on`'s lines and table of `out` (only planned, when `dry_run`).
fn outcome_report(out: Outcome, dry_run: bool) -> PartReport {
    let mut lines = Vec::new();
    if !dry_run {
        lines.push(Line::new("IRQs moved", out.moved.len().to_string()));
    }
    lines.push(Line::new("IRQs bound to shield", numbers(&out.to_shield)));
    if !out.effective_on_shield.is_empty() {
        lines.push(Line::new(
            "IRQs effective on shield",
            numbers(&out.effective_on_shield),
        ));
        lines.push(Line::new(
            "",
            "(effective affinity moves at the next interrupt, unless the IRQ refused)",
        ));
    }
    let mut details = Vec::new();
    if !out.refused.is_empty() {
        details.push(format!(
            "  IRQs that refused a new affinity ({}):",
            out.refused.len()
        ));
        let rows = out
            .refused
            .iter()
            .map(|i| format!("    {:>5}  {:<24} {}", i.irq, terminal(&i.name), i.reason));
        details.extend(rows);
    }
    let mut part = PartReport::new(OWNER.name(), &out);
    part.lines = lines;
    part.details = details;
    part
}

/// IRQ numbers for people: `24 40`, or `none`.
fn numbers(irqs: &[u32]) -> String {
    match irqs.is_empty() {
        true => "none".into(),
        false => irqs
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(" "),
    }
}

/// An IRQ and where it may run, for `status`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IrqPlacement {
    /// IRQ number.
    pub irq: u32,
    /// Device name.
    pub name: String,
    /// `smp_affinity_list`.
    pub affinity: CpuSet,
    /// `effective_affinity_list`.
    pub effective: Option<CpuSet>,
    /// Kept on the shield by `on`: bound there on request, or refusing a
    /// new affinity when `on` finished. Any other IRQ there is drift.
    #[serde(default)]
    pub kept: bool,
}

impl IrqPlacement {
    /// Whether this IRQ drifted onto `shield`: its affinity allows a
    /// shielded CPU, and `on` did not keep it there.
    pub fn drifted(&self, shield: &CpuSet) -> bool {
        self.affinity.intersects(shield) && !self.kept
    }
}

/// The IRQs the shield `state` kept on its CPUs (journal version 2 and
/// older kept them as `irqs_kept` at the top level of the state).
pub(in crate::shield) fn kept(state: &State) -> Vec<u32> {
    state.record(OWNER.name(), "irqs_kept").unwrap_or_default()
}

/// The IRQs allowed on, or effective on, a CPU of `shield`, those in
/// `kept` marked.
pub(in crate::shield) fn on_shield(
    irqs: &[Irq],
    shield: &CpuSet,
    kept: &[u32],
) -> Vec<IrqPlacement> {
    irqs.iter()
        .filter(|i| {
            i.affinity.intersects(shield)
                || i.effective.as_ref().is_some_and(|e| e.intersects(shield))
        })
        .map(|i| IrqPlacement {
            irq: i.irq,
            name: i.name.clone(),
            affinity: i.affinity.clone(),
            effective: i.effective.clone(),
            kept: kept.contains(&i.irq),
        })
        .collect()
}

impl Holds for Vec<IrqPlacement> {
    /// `irqs`: IRQs allowed on the shield again that `on` neither bound
    /// there nor found refusing a new affinity.
    fn lost(&self, state: &State, repair: &str) -> Vec<Finding> {
        let drifted: Vec<String> = self
            .iter()
            .filter(|i| i.drifted(&state.shield))
            .map(|i| i.irq.to_string())
            .collect();
        if drifted.is_empty() {
            return Vec::new();
        }
        let reason = format!("IRQs {} are allowed on the shield again", drifted.join(" "));
        vec![Finding::new("irqs", Severity::Bad, 70, reason, repair)]
    }
}

/// After CPU hotplug some drivers set their IRQs' affinity again (seen:
/// virtio-net spreads its queue IRQs from its CPU hotplug callbacks, over
/// what the shield wrote before the CPUs went offline). Moves every IRQ
/// that came back onto the shield off it again, journaled like the first
/// move (undo writes the driver's value back, then the original). Returns
/// the IRQs moved. IRQs in `skip` (bound to the shield, or refused) stay.
pub(in crate::shield) fn sweep(
    (sys, fx): (&Sys, &dyn Effects),
    (shield, housekeeping, before): (&CpuSet, &CpuSet, &[Irq]),
    skip: &[u32],
    journal: &mut Journal,
    stop: &AtomicBool,
    applied: &mut Applied,
) -> Result<Vec<u32>, ApplyError> {
    let refused: HashSet<Subject> = applied.refused.iter().map(|r| r.subject.clone()).collect();
    let mut steps = Vec::new();
    let mut irqs = Vec::new();
    for irq in read(sys)? {
        if skip.contains(&irq.irq) || !irq.affinity.intersects(shield) {
            continue;
        }
        // An IRQ that was off the shield before `on` and that a driver set
        // on it anew (CPU hotplug) goes back where it was, and `off` puts
        // it there too: what `off` reads back is the machine before `on`.
        let was = (before.iter())
            .find(|b| b.irq == irq.irq)
            .map(|b| &b.affinity)
            .filter(|b| !b.is_empty() && !b.intersects(shield));
        let (value, undo) = match was {
            Some(was) => (was.to_string(), change::Undo::Value(was.to_string())),
            None => (
                irq.affinity.away_from(shield, housekeeping).to_string(),
                change::Undo::Previous,
            ),
        };
        let action = Action::Write {
            path: irq_affinity_file(irq.irq),
            value,
            check: change::Check::CpuList,
            undo,
        };
        if refused.contains(&Subject::Irq(irq.irq)) {
            continue;
        }
        irqs.push(irq.irq);
        steps.push(Step::optional(OWNER, action).on_irq(irq.irq));
    }
    let before = applied.refused.len();
    apply::apply(sys, fx, journal, &steps, stop, applied)?;
    let now_refused: HashSet<&Subject> = applied.refused[before..]
        .iter()
        .map(|r| &r.subject)
        .collect();
    irqs.retain(|&n| !now_refused.contains(&Subject::Irq(n)));
    Ok(irqs)
}

/// The IRQs' affinities and the default affinity as they were before the
/// shield, where the journal `recorded` them (by file).
pub(in crate::shield) fn before_shield(
    irqs: &mut [Irq],
    default_affinity: &mut Option<CpuSet>,
    recorded: &dyn Fn(&str) -> Option<String>,
) {
    for irq in irqs {
        if let Some(cpus) =
            recorded(&irq_affinity_file(irq.irq)).and_then(|v| CpuSet::parse_list(&v).ok())
        {
            irq.affinity = cpus;
        }
    }
    if let Some(mask) = recorded(DEFAULT_IRQ_AFFINITY).and_then(|v| CpuSet::parse_mask(&v).ok()) {
        *default_affinity = Some(mask);
    }
}

/// What a file the journal recorded is about, when it is the IRQs'.
pub(in crate::shield) fn claims(path: &str) -> Option<Subject> {
    match irq_of_affinity_file(path) {
        Some(irq) => Some(Subject::Irq(irq)),
        None if path == DEFAULT_IRQ_AFFINITY => Some(Subject::File(path.into())),
        None => None,
    }
}

/// Whether IRQ `irq` (its affinity file `path`) refused the shield before
/// (it is among those the shield `kept`) and still reads as the journal
/// `recorded` it before the shield: a change in place does not try it
/// again, so that the same request twice changes nothing.
pub(in crate::shield) fn refused_before(
    kept: &[u32],
    (irq, path): (u32, &str),
    recorded: Option<&(String, Check)>,
    read: &dyn Fn(&str) -> Option<String>,
) -> bool {
    kept.contains(&irq)
        && recorded.is_some_and(|(before, check)| {
            read(path).is_some_and(|now| apply::reads_as(*check, &now, before))
        })
}

/// The device name of IRQ `irq` in the snapshot (empty when unknown).
pub(in crate::shield) fn name(irqs: &[Irq], irq: u32) -> String {
    irqs.iter()
        .find(|i| i.irq == irq)
        .map(|i| i.name.clone())
        .unwrap_or_default()
}

/// What `status` says of the IRQs (`--json`).
#[derive(Debug, Serialize)]
struct Status {
    /// IRQs allowed on, or effective on, a shielded CPU.
    on_shield: Vec<IrqPlacement>,
    /// `/proc/irq/default_smp_affinity`: where new IRQs land.
    default_affinity: Option<CpuSet>,
}

/// `status`'s table of the IRQs allowed or effective on the shield.
fn placement_table(irqs: &[IrqPlacement]) -> Vec<String> {
    if irqs.is_empty() {
        return Vec::new();
    }
    let head = format!(
        "    {:>5}  {:<24} {:<10} effective",
        "irq", "name", "affinity"
    );
    let rows = irqs.iter().map(|i| {
        let eff = i
            .effective
            .as_ref()
            .map_or_else(|| "n/a".into(), CpuSet::to_string);
        let affinity = i.affinity.to_string();
        format!(
            "    {:>5}  {:<24} {affinity:<10} {eff}",
            i.irq,
            terminal(&i.name)
        )
    });
    [
        "  IRQs allowed or effective on the shield:".to_string(),
        head,
    ]
    .into_iter()
    .chain(rows)
    .collect()
}

/// IRQ affinities, as a component of the shield.
pub(in crate::shield) struct Part;

/// The IRQs the journal's `entries` bound to CPUs within `targets`: their
/// affinity written to those CPUs only.
fn bound_to(entries: &[Entry], targets: &CpuSet) -> Vec<u32> {
    (entries.iter())
        .filter_map(|e| match &e.action {
            Action::Write { path, value, .. }
                if CpuSet::parse_list(value).is_ok_and(|v| v.is_subset(targets)) =>
            {
                irq_of_affinity_file(path)
            }
            _ => None,
        })
        .collect()
}

impl Component for Part {
    fn owner(&self) -> Owner {
        OWNER
    }

    /// CRI-O's `irq-load-balancing.crio.io` hook sets a stopped pod's CPUs in `default_smp_affinity` again and has irqbalance place the IRQs once.
    fn crio_hooks_change(&self) -> bool {
        true
    }

    fn reaches(&self, reach: &mut crate::shield::reach::Reach) {
        reach.files.extend(["proc/irq/*/smp_affinity_list", DEFAULT_IRQ_AFFINITY].map(String::from));
    }

    /// The IRQs kept on the shield: bound there on request, or refusing a new affinity.
    fn record(&self, _: &Plan, out: &OnReport) -> Option<serde_json::Value> {
        let mine: Outcome = serde_json::from_value(out.part(OWNER.name())?.data.clone()).ok()?;
        let kept: Vec<u32> = (mine.refused.iter().map(|r| r.irq))
            .chain(mine.to_shield.iter().copied())
            .collect();
        (!kept.is_empty()).then(|| serde_json::json!(kept))
    }

    fn check(&self, cx: &Planning, d: &mut Draft) -> Result<(), PlanError> {
        let asked = asked(cx.req);
        if asked.irq_spread && asked.irqs.is_empty() {
            return Err(PlanError::Part {
                option: "--irq-spread",
                message: "--irq-spread spreads the IRQs bound with --irq over the shield: name them with --irq (config key irqs)".into(),
            });
        }
        if let Some(cpus) = &asked.irq_cpus {
            if cpus.is_empty() || !cx.shield.is_superset_of(cpus) {
                return Err(PlanError::Part {
                    option: "--irq-cpus",
                    message: format!(
                        "--irq-cpus {cpus}: the IRQs bound with --irq go to shielded CPUs; give CPUs of the shield ({})",
                        cx.shield
                    ),
                });
            }
        }
        let to_shield = resolve(&cx.snap.irqs, &asked.irqs)?;
        d.plan
            .facts
            .publish(&crate::shield::facts::BoundIrqs(to_shield.clone()));
        d.plan.parts.put(OWNER.name(), &Planned { to_shield });
        Ok(())
    }

    fn plan(&self, cx: &Planning, d: &mut Draft) -> Result<(), PlanError> {
        let snap = cx.snap;
        let facts = (
            &snap.irqs[..],
            snap.default_irq_affinity.as_ref(),
            snap.mask_bits(),
        );
        let to = to_shield(&d.plan);
        let asked = asked(cx.req);
        let over = asked.irq_cpus.as_ref().unwrap_or(cx.shield);
        let planned = plan(facts, (cx.shield, cx.housekeeping), &to, (asked.irq_spread, over));
        for (to_shield, step) in planned {
            // Bound after the CPUs' hotplug, which would take them back.
            let slot = if to_shield {
                Phase::AfterCpuRestart
            } else {
                Phase::Shield
            };
            d.add(slot, [step]);
        }
        Ok(())
    }

    fn before(&self, orig: &Originals, _: &[Entry], snap: &mut Snapshot) {
        let recorded = |path: &str| orig.file(path).map(str::to_string);
        before_shield(&mut snap.irqs, &mut snap.default_irq_affinity, &recorded);
    }

    fn change(&self, cx: &InPlace, mine: Vec<(Phase, Step)>, out: &mut Changing) {
        // Read once: the record is decoded from the journal's state.
        let kept = kept(cx.state);
        for (slot, step) in mine {
            if let (Some(irq), Action::Write { path, .. }) = (step.irq(), &step.action) {
                let recorded = cx.originals.files.get(path);
                if refused_before(&kept, (irq, path), recorded, cx.read) {
                    out.change.still_refused.push(irq);
                    continue;
                }
            }
            out.unless_held(cx, slot, step);
        }
    }

    fn claims(&self, path: &str) -> Option<Subject> {
        claims(path)
    }

    fn looks(&self) -> Option<&dyn Looks> {
        Some(self)
    }

    fn reports(&self) -> Option<&dyn Reports> {
        Some(self)
    }

    fn settles(&self) -> Option<&dyn Settles> {
        Some(self)
    }
}

impl Looks for Part {
    /// The IRQs the active shield bound to the audited CPUs on request,
    /// published for every rule that judges IRQs.
    fn audit_read(&self, cx: &crate::shield::component::AuditReading, facts: &mut crate::shield::OwnFacts) {
        facts.publish(&BoundIrqs(bound_to(cx.entries, cx.targets)));
    }

    fn audit(&self, f: &crate::shield::Audited) -> Vec<Finding> {
        let wanted = f.own.fact::<BoundIrqs>().unwrap_or_default().0;
        let irqs = (f.irqs, wanted.as_slice(), f.default_irq_affinity);
        judge(irqs, f.targets, f.housekeeping)
    }

    /// The IRQs allowed or effective on the shield, those that drifted
    /// there judged, and where new IRQs land.
    fn status(&self, cx: &Looking) -> Option<PartReport> {
        let (state, snap) = (cx.state, cx.snap);
        let on_shield = on_shield(&snap.irqs, &state.shield, &kept(state));
        let default = snap.default_irq_affinity.clone();
        let drifted = on_shield
            .iter()
            .filter(|i| i.drifted(&state.shield))
            .count();
        let mut findings = on_shield.lost(state, cx.repair);
        let refused = state.writes_refused.iter().any(|p| p == DEFAULT_IRQ_AFFINITY);
        if let Some(d) = default.as_ref().filter(|d| d.intersects(&state.shield) && !refused) {
            let reason = format!("new IRQs' default affinity (/{DEFAULT_IRQ_AFFINITY}) allows the shield's CPUs again: {d}");
            findings.push(Finding::new("irqs", Severity::Bad, 70, reason, cx.repair));
        }
        let default_text = default
            .as_ref()
            .map_or_else(|| "n/a".into(), CpuSet::to_string);
        let on_text = format!("{} of {}", on_shield.len(), snap.irqs.len());
        let details = placement_table(&on_shield);
        let mut part = PartReport::new(
            OWNER.name(),
            &Status {
                on_shield,
                default_affinity: default,
            },
        );
        part.lines = vec![
            Line::new("default IRQ affinity", default_text),
            Line::new("IRQs on the shield", on_text),
        ];
        part.findings = findings;
        part.metrics = vec![Metric {
            name: "leaked_irqs",
            kind: "gauge",
            help: "IRQs whose affinity allows shielded CPUs and that the shield neither bound there nor failed to move.",
            samples: vec![(Vec::new(), drifted as f64)],
        }];
        part.details = details;
        Some(part)
    }
}

impl Reports for Part {
    /// The IRQs moved off the shield (by the plan, and after it as they
    /// came back), bound to it on request, refusing, and still effective
    /// on it, read back.
    fn outcome(&self, cx: &Reporting) -> Option<PartReport> {
        let plan = cx.plan;
        let bound = to_shield(plan);
        let planned = (&plan.steps[..], &bound[..], &plan.shield);
        let mut out = outcome(planned, &cx.after.irqs, cx.refused());
        let swept: Vec<u32> = cx.settled.get(OWNER.name()).unwrap_or_default();
        out.moved.extend(swept);
        let still = cx.change.map_or(&[][..], |c| &c.still_refused[..]);
        out.refused.extend(still.iter().map(|&irq| IrqRefusal {
            irq,
            name: name(&cx.before.irqs, irq),
            reason: "refused before; not tried again".into(),
        }));
        Some(outcome_report(out, cx.dry_run))
    }
}

impl Settles for Part {
    /// IRQs the kernel placed anew while the plan was applied, moved off
    /// the shield again: as the shield's CPUs came back online (a driver
    /// spreads its queues anew on CPU hotplug), or for a change in place as
    /// they came back onto it while it changed (irqbalance placing IRQs
    /// anew at its restart, seen on Debian 13). The IRQs of the machine
    /// after are read again when any moved.
    fn settle(&self, cx: &mut Settling) -> Result<(), ApplyError> {
        let plan = cx.plan;
        let cpus = (&plan.shield, &plan.housekeeping);
        let fx = (cx.sys, cx.fx);
        let bound = to_shield(plan);
        let skip = match cx.in_place {
            Some(state) => [bound, kept(state)].concat(),
            None => bound,
        };
        let cpus = (cpus.0, cpus.1, &cx.before.irqs[..]);
        let swept = sweep(fx, cpus, &skip, cx.journal, cx.stop, cx.applied)?;
        let (came_back, respread) = match cx.in_place {
            Some(_) => (swept, Vec::new()),
            None => (Vec::new(), swept),
        };
        if !came_back.is_empty() {
            let note = IrqsNote::IrqsBackAfterChange {
                irqs: came_back.clone(),
            };
            cx.notes.push(note.note());
        }
        if !respread.is_empty() {
            let note = IrqsNote::IrqsBackAfterHotplug {
                irqs: respread.clone(),
            };
            cx.notes.push(note.note());
        }
        let moved = [came_back, respread].concat();
        if let (Some(after), false) = (cx.after.as_mut(), moved.is_empty()) {
            after.irqs = read(cx.sys)?;
        }
        cx.moved.put(OWNER.name(), &moved);
        Ok(())
    }
}

/// The audit's rules of the IRQs on `targets` (a shield's CPUs or not):
/// IRQs served there now, IRQs allowed there, where new IRQs land.
/// `wanted` are those a shield bound there on request. Pure.
fn judge(
    (irqs, wanted, default): (&[Irq], &[u32], Option<&CpuSet>),
    targets: &CpuSet,
    housekeeping: &CpuSet,
) -> Vec<Finding> {
    let mut out = Findings::default();

    let (list, hk) = (targets, housekeeping);
    let mut effective = Vec::new();
    let mut allowed = Vec::new();
    for i in irqs {
        if wanted.contains(&i.irq) {
            continue;
        }
        let label = if i.name.is_empty() {
            i.irq.to_string()
        } else {
            format!("{} ({})", i.irq, terminal(&i.name))
        };
        if i.effective.as_ref().is_some_and(|e| e.intersects(targets)) {
            effective.push(label);
        } else if i.affinity.intersects(targets) {
            allowed.push(label);
        }
    }
    if !effective.is_empty() {
        out.add(
            "irq-effective",
            Severity::Bad,
            85,
            format!("{} IRQs are served on {list} now: {}", effective.len(), effective.join(", ")),
            format!("cpushield on {list}; IRQs that refuse (kernel-managed queues) need isolcpus=managed_irq,{list} at boot"),
        );
    } else {
        out.add(
            "irq-effective",
            Severity::Ok,
            85,
            format!("no IRQ is served on {list}"),
            String::new(),
        );
    }
    if !allowed.is_empty() {
        out.add(
            "irq-affinity",
            Severity::Warn,
            65,
            format!(
                "{} IRQs may be served on {list}: {}",
                allowed.len(),
                allowed.join(", ")
            ),
            format!("cpushield on {list} (or: echo {hk} > /proc/irq/N/smp_affinity_list)"),
        );
    } else {
        out.add(
            "irq-affinity",
            Severity::Ok,
            65,
            format!("no IRQ affinity includes {list}"),
            String::new(),
        );
    }
    if let Some(d) = default.filter(|d| d.intersects(targets)) {
        out.add(
            "irq-default",
            Severity::Warn,
            40,
            format!("new IRQs may land on {list} (default_smp_affinity {d})"),
            format!("cpushield on {list}, or boot with irqaffinity={hk}"),
        );
    } else {
        out.add(
            "irq-default",
            Severity::Ok,
            40,
            format!("new IRQs start off {list} (default_smp_affinity)"),
            String::new(),
        );
    }
    out.0
}

/// The refusal of an `--irq` that matches nothing.
pub(in crate::shield) fn unknown_irq(name: &str) -> PlanError {
    PlanError::Part {
        option: "--irq",
        message: format!(
            "--irq {} matches no IRQ number or name in /proc/interrupts",
            crate::input::quote(name)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shield::change::Refusal;
    use crate::shield::components::plan as shield_plan;
    use crate::shield::components::test_machine::{req, snap, v2, write_to};

    #[test]
    fn each_irq_step_is_the_irqs_and_names_its_irq_and_a_refusal_names_the_device() {
        let s = snap(v2());
        let plan = shield_plan(&s, &req("2-3")).unwrap();
        let about = |irq| {
            plan.steps
                .iter()
                .find(|st| st.subject == Subject::Irq(irq))
                .map(|st| st.owner)
        };
        assert_eq!(about(0), Some(OWNER));
        assert_eq!(about(25), Some(OWNER));
        assert_eq!(about(24), None, "IRQ 24 is on CPU 1 already");
        let owner_of = |path: &str| {
            plan.steps
                .iter()
                .find(|st| st.subject == Subject::File(path.into()))
                .map(|st| st.owner)
        };
        assert_eq!(owner_of(DEFAULT_IRQ_AFFINITY), Some(OWNER));
        // The kernel refuses IRQ 25: it is reported as refused with its
        // device's name, and only IRQ 0 as moved.
        let refused = [Refused {
            owner: OWNER,
            subject: Subject::Irq(25),
            refusal: Refusal {
                target: "/proc/irq/25/smp_affinity_list".into(),
                reason: "EIO".into(),
            },
        }];
        let out = outcome(
            (&plan.steps, &to_shield(&plan), &plan.shield),
            &s.irqs,
            &refused,
        );
        assert_eq!(out.moved, [0]);
        assert_eq!(out.refused.len(), 1);
        assert_eq!(
            (
                out.refused[0].irq,
                out.refused[0].name.as_str(),
                out.refused[0].reason.as_str()
            ),
            (25, "nvme", "EIO")
        );
    }

    #[test]
    fn irqs_named_go_to_the_shield() {
        let r = req("2-3").with_declared(&Options {
            irqs: vec!["eth0".into(), "25".into()],
            ..Options::default()
        });
        let p = shield_plan(&snap(v2()), &r).unwrap();
        assert_eq!(to_shield(&p), vec![24, 25]);
        assert_eq!(
            write_to(&p, "proc/irq/24/smp_affinity_list").as_deref(),
            Some("2-3")
        );
        assert_eq!(
            write_to(&p, "proc/irq/25/smp_affinity_list").as_deref(),
            Some("2-3")
        );
        let bad = req("2").with_declared(&Options {
            irqs: vec!["nope".into()],
            ..Options::default()
        });
        assert_eq!(
            shield_plan(&snap(v2()), &bad).unwrap_err(),
            unknown_irq("nope")
        );
    }
}
