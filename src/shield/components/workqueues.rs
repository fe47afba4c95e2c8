//! The unbound workqueues' CPU mask: kept off the shield, so that no
//! unbound kernel work item runs there.

use crate::cpulist::CpuSet;
use crate::finding::{Finding, Findings, Severity};
use crate::shield::change::{Action, Check, Owner, Step, Subject, Undo};
use crate::shield::component::unless_held;
use crate::shield::component::AuditReading;
use crate::shield::component::Looks;
use crate::shield::component::{Changing, Component, Draft, InPlace, Looking, Phase, Planning};
use crate::shield::journal::Entry;
use crate::shield::parts::OwnFacts;
use crate::shield::parts::{Line, PartReport};
use crate::shield::plan_error::PlanError;
use crate::shield::reshape::Originals;
use crate::shield::snapshot::{Snapshot, WORKQUEUE_MASK, WRITEBACK_MASK};
use crate::sys::Sys;

/// This component, as it names itself in the journal and in reports.
pub const OWNER: Owner = Owner("workqueues");

/// Unbound workqueues off the shield, when their mask reaches it.
pub(in crate::shield) fn plan(
    (mask, bits): (Option<&CpuSet>, u32),
    shield: &CpuSet,
    housekeeping: &CpuSet,
) -> Option<Step> {
    let mask = mask?;
    mask.intersects(shield).then(|| {
        Step::optional(
            OWNER,
            Action::Write {
                path: WORKQUEUE_MASK.into(),
                value: mask.away_from(shield, housekeeping).to_mask(bits),
                check: Check::CpuMask,
                // 6.12 reads the mask without the partition's CPUs once
                // the partition exists; writing that back would make the
                // reduced mask the request for good. Restore the mask
                // read before the partition.
                undo: Undo::Value(mask.to_mask(bits)),
            },
        )
    })
}

/// What a file the journal recorded is about, when it is the workqueues' mask.
pub(in crate::shield) fn claims(path: &str) -> Option<Subject> {
    (path == WORKQUEUE_MASK).then(|| Subject::File(path.into()))
}

/// The mask as it was before the shield, where the journal `recorded` it.
pub(in crate::shield) fn before_shield(
    mask: &mut Option<CpuSet>,
    recorded: &dyn Fn(&str) -> Option<String>,
) {
    if let Some(before) = recorded(WORKQUEUE_MASK).and_then(|v| CpuSet::parse_mask(&v).ok()) {
        *mask = Some(before);
    }
}

/// The unbound workqueues' CPU mask, as a component of the shield.
pub(in crate::shield) struct Part;

impl Component for Part {
    fn owner(&self) -> Owner {
        OWNER
    }

    /// The unbound workqueues' CPU mask.
    fn reaches(&self, reach: &mut crate::shield::reach::Reach) {
        reach.files.push(crate::shield::snapshot::WORKQUEUE_MASK.into());
    }

    fn check(&self, _: &Planning, _: &mut Draft) -> Result<(), PlanError> {
        Ok(())
    }

    fn plan(&self, cx: &Planning, d: &mut Draft) -> Result<(), PlanError> {
        let facts = (cx.snap.workqueue_mask.as_ref(), cx.snap.mask_bits());
        d.add(Phase::Tuning, plan(facts, cx.shield, cx.housekeeping));
        Ok(())
    }

    fn before(&self, orig: &Originals, _: &[Entry], snap: &mut Snapshot) {
        before_shield(&mut snap.workqueue_mask, &|path| {
            orig.file(path).map(str::to_string)
        })
    }

    fn change(&self, cx: &InPlace, mine: Vec<(Phase, Step)>, out: &mut Changing) {
        unless_held(cx, mine, out)
    }

    fn claims(&self, path: &str) -> Option<Subject> {
        claims(path)
    }

    fn looks(&self) -> Option<&dyn Looks> {
        Some(self)
    }
}

impl Looks for Part {
    fn audit_read(&self, cx: &AuditReading, facts: &mut OwnFacts) {
        facts.put(OWNER.name(), &read_masks(cx.sys));
    }

    fn audit(&self, f: &crate::shield::Audited) -> Vec<Finding> {
        let masks: Vec<(String, String, CpuSet)> = f.own.get(OWNER.name()).unwrap_or_default();
        judge(&masks, f.targets)
    }

    /// The mask as it reads now, and whether it reaches the shield again
    /// (unless the kernel refused it when the shield was made).
    fn status(&self, cx: &Looking) -> Option<PartReport> {
        let (mask, shield) = (cx.snap.workqueue_mask.clone(), &cx.state.shield);
        let text = mask
            .as_ref()
            .map_or_else(|| "n/a".into(), CpuSet::to_string);
        let refused = cx.state.writes_refused.iter().any(|p| p == WORKQUEUE_MASK);
        let mut part = PartReport::new(OWNER.name(), &serde_json::json!({ "mask": mask }));
        part.lines = vec![Line::new("workqueue cpumask", text)];
        if let (Some(mask), false) = (mask.filter(|m| m.intersects(shield)), refused) {
            let why = format!(
                "the unbound workqueues' mask reads {mask} again: kernel work may run on CPUs {shield}"
            );
            part.findings = vec![Finding::new(
                "workqueues",
                Severity::Bad,
                40,
                why,
                cx.repair,
            )];
        }
        Some(part)
    }
}

/// The masks the audit judges, `(file, what, mask)`: those that could be
/// read of the unbound workqueues' and the writeback flushers'.
fn read_masks(sys: &Sys) -> Vec<(String, String, CpuSet)> {
    [
        (WORKQUEUE_MASK, "unbound workqueues"),
        (WRITEBACK_MASK, "writeback flushers"),
    ]
    .into_iter()
    .filter_map(|(rel, what)| Some((rel.into(), what.into(), sys.read_cpumask(rel).ok()?)))
    .collect()
}

/// The audit's rule of the unbound workqueues' and writeback flushers'
/// masks (`(file, what, mask)`) against `targets`. Pure.
fn judge(masks: &[(String, String, CpuSet)], targets: &CpuSet) -> Vec<Finding> {
    let mut out = Findings::default();

    let list = targets;
    if masks.is_empty() {
        return Vec::new();
    }
    let on: Vec<String> = masks
        .iter()
        .filter(|(_, _, m)| m.intersects(targets))
        .map(|(rel, what, m)| format!("{what} (/{rel}: {m})"))
        .collect();
    if on.is_empty() {
        out.add(
            "workqueue",
            Severity::Ok,
            45,
            format!("unbound workqueues and writeback flushers run off {list}"),
            String::new(),
        );
    } else {
        out.add(
            "workqueue",
            Severity::Warn,
            45,
            format!(
                "kernel background work may run on {list}: {}",
                on.join(", ")
            ),
            format!("cpushield on {list} --tune=workqueue,writeback"),
        );
    }
    out.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shield::components::plan as shield_plan;
    use crate::shield::components::test_machine::{req, snap, v2, write_to};

    #[test]
    fn a_mask_that_reaches_the_shield_is_the_workqueues_step_to_the_housekeeping_cpus() {
        let plan = shield_plan(&snap(v2()), &req("2-3")).unwrap();
        let step = (plan.steps.iter())
            .find(|st| st.subject == Subject::File(WORKQUEUE_MASK.into()))
            .expect("the mask 0-3 reaches the shield");
        assert_eq!(step.owner, OWNER);
        assert!(!step.fatal);
        assert_eq!(write_to(&plan, WORKQUEUE_MASK).as_deref(), Some("3"));
    }
}
