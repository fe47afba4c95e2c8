//! The shield's components, composed in one place.
//!
//! Each row of [`ORDER`] is one component's part: how it checks its part of
//! a request, plans its part of a fresh shield, and (see [`super::reshape`])
//! of a change in place, adapting the planning context to the component's
//! own functions. The steps each part plans go in [`Slot`]s, which are the
//! order the kernel is changed in (and, reversed, undone). The changes only
//! a component knows how to make and undo are handed to it from here too
//! ([`Effects`]), so that the engine (apply, undo, the journal) names none
//! of them. Beside the order: the components' facts together
//! ([`snapshot`], [`read`], [`owners`]), what they settle after a plan is
//! applied ([`settle`]), `on`'s report ([`report`]) and `status`
//! ([`status`]), each of them the components' own parts put together.

use std::collections::HashSet;

use super::apply::{reads_as, ApplyError, Effects};
use super::change::{Action, Owner, Step, Subject};
use super::hotplug::cpu_online_file;
use super::journal::{Entry, State};
use super::note::Note;
use super::plan::{self, Plan, PlanError};
use super::request::Request;
use super::reshape::{self, Originals, Reshape};
use super::snapshot::Snapshot;
use super::tasks::{self, plan_tasks, remember_affinities, task_notes};
use super::undo::{KeepOnCpus, Undone};
use super::{guard, hotplug, irqbalance, irqs, knobs, mechanism, resctrl, rt_kthreads, workqueues};
use crate::cpulist::CpuSet;
use crate::sys::Sys;

/// Where a step goes in the order the shield's changes are made; `off`
/// undoes them in reverse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Slot {
    /// Every thread's affinity, recorded for undo.
    Record,
    /// With `--hotplug-restart`: IRQs leave the shield before its CPUs go
    /// offline (an IRQ with no other online CPU loses its affinity, and the
    /// kernel does not give it back).
    BeforeHotplug,
    /// Each shielded CPU offline and online again.
    Hotplug,
    /// irqbalance's ban, before the IRQs move: irqbalance restarted with
    /// the ban does not move them back meanwhile (SYSTEMD-NOTES 10).
    Ban,
    /// A change in place: tasks whose CPUs all leave go before the shield
    /// shrinks.
    Leaving,
    /// The cgroups made, or resized in place.
    Cgroups,
    /// Threads moved off the shield, or kept on it.
    Tasks,
    /// IRQs off the shield, or bound to it on request.
    Irqs,
    /// The unbound workqueues' mask.
    Workqueues,
    /// The shield's share of the L3 cache (resctrl).
    Cache,
    /// The starvation guard: started before the knobs turn throttling off,
    /// and stopped by `off` only after throttling is back.
    Guard,
    /// Kernel threads raised.
    Kthreads,
    /// The tuning knobs.
    Knobs,
    /// A change in place: the affinities of the tasks that stay inside.
    Settled,
    /// A change in place: what the old shield changed and the new one does
    /// not, written back.
    Restore,
}

/// What every part is given to plan a fresh shield: the machine, the
/// request, and its CPUs checked against the machine.
pub(super) struct Planning<'a> {
    /// The machine (for a change in place: as it was before the shield).
    pub snap: &'a Snapshot,
    /// The request.
    pub req: &'a Request,
    /// The shielded CPUs.
    pub shield: &'a CpuSet,
    /// The housekeeping CPUs.
    pub housekeeping: &'a CpuSet,
}

/// A plan as the parts draft it: the plan's facts, and its steps in slots.
pub(super) struct Draft {
    /// The plan, but for its steps.
    pub plan: Plan,
    /// The steps, each in its slot, in the order planned.
    pub steps: Vec<(Slot, Step)>,
}

impl Draft {
    /// Adds `steps` to `slot`.
    pub fn add(&mut self, slot: Slot, steps: impl IntoIterator<Item = Step>) {
        self.steps.extend(steps.into_iter().map(|s| (slot, s)));
    }

    /// The steps planned so far by `owner`.
    pub fn of(&self, owner: Owner) -> impl Iterator<Item = &Step> {
        self.steps
            .iter()
            .map(|(_, s)| s)
            .filter(move |s| s.owner == owner)
    }

    /// The plan, its steps in slot order (in planning order within a slot).
    pub fn finish(mut self) -> Plan {
        self.steps.sort_by_key(|(slot, _)| *slot);
        self.plan.steps = self.steps.into_iter().map(|(_, s)| s).collect();
        self.plan
    }
}

/// What every part is given to plan a change of the active shield in
/// place (see [`super::reshape`]).
pub(super) struct InPlace<'a> {
    /// The machine now.
    pub live: &'a Snapshot,
    /// The active shield.
    pub state: &'a State,
    /// Its journal.
    pub entries: &'a [Entry],
    /// The plan a fresh shield of the new request would have on the
    /// machine as it was before the shield (its steps are the parts').
    pub fresh: &'a Plan,
    /// The oldest values the journal recorded: the machine before.
    pub originals: &'a Originals,
    /// Reads a kernel file now (relative path).
    pub read: &'a dyn Fn(&str) -> Option<String>,
}

/// A change in place as the parts draft it.
pub(super) struct Changing {
    /// The change, but for its plan's steps and notes.
    pub change: Reshape,
    /// The steps, each in its slot.
    pub steps: Vec<(Slot, Step)>,
    /// The record of every thread's affinity, made first if anything changes.
    pub record: Option<Step>,
}

impl Changing {
    /// Adds `steps` to `slot`.
    pub fn add(&mut self, slot: Slot, steps: impl IntoIterator<Item = Step>) {
        self.steps.extend(steps.into_iter().map(|s| (slot, s)));
    }

    /// Keeps the fresh `step` unless the machine holds it already (a file
    /// that reads as it would write).
    pub fn unless_held(&mut self, cx: &InPlace, slot: Slot, step: Step) {
        if let Action::Write {
            path, value, check, ..
        } = &step.action
        {
            if (cx.read)(path).is_some_and(|now| reads_as(*check, &now, value)) {
                return;
            }
        }
        self.steps.push((slot, step));
    }
}

/// A fallible part of planning.
type Planner = fn(&Planning, &mut Draft) -> Result<(), PlanError>;

/// A part of a change in place, given the component's steps of the fresh
/// plan in their slots.
type Changer = fn(&InPlace, Vec<(Slot, Step)>, &mut Changing);

/// Puts back a component's facts in the snapshot as they were before the
/// shield, from what the journal recorded.
type Before = fn(&Originals, &[Entry], &mut Snapshot);

/// What a file the journal recorded is about, when it is the component's.
type Claims = fn(&str) -> Option<Subject>;

/// One component's part.
pub(super) struct Part {
    /// The component.
    pub owner: Owner,
    /// Checks its part of the request before anything is planned.
    pub check: Planner,
    /// Plans its part of a fresh shield.
    pub plan: Planner,
    /// Its facts as they were before the shield, for a change in place.
    pub before: Before,
    /// Plans its part of a change in place.
    pub change: Changer,
    /// The files it writes, which a change in place may write back.
    pub claims: Claims,
}

/// A part whose facts the shield does not change.
fn unchanged(_: &Originals, _: &[Entry], _: &mut Snapshot) {}

/// A part that writes no file a change in place writes back.
fn no_files(_: &str) -> Option<Subject> {
    None
}

/// The part of a change in place of a component whose steps are simply
/// left out where the machine holds them already.
fn unless_held(cx: &InPlace, mine: Vec<(Slot, Step)>, out: &mut Changing) {
    for (slot, step) in mine {
        out.unless_held(cx, slot, step);
    }
}

/// The components in the order they plan (each part's steps go in their
/// slots): irqbalance, the cgroups and the tasks first, as their notes are
/// read; the knobs before the guard, which must know whether they turn RT
/// throttling off.
pub(super) const ORDER: [Part; 10] = [
    Part {
        owner: Owner::Irqbalance,
        check: no_check,
        plan: |cx, d| {
            let (systemd, irqb) = (cx.snap.owners.systemd, cx.snap.owners.irqbalance.as_ref());
            let ban = irqbalance::plan(systemd, irqb, cx.shield, &mut d.plan.notes);
            d.add(Slot::Ban, ban);
            Ok(())
        },
        before: |_, entries, snap| {
            if let Some(irqb) = snap.owners.irqbalance.as_mut() {
                irqbalance::before_shield(irqb, entries);
            }
        },
        change: |cx, mine, out| {
            let live = cx.live.owners.irqbalance.as_ref();
            let steps: Vec<Step> = mine.iter().map(|(_, s)| s.clone()).collect();
            out.change.irqbalance_ban = irqbalance::planned_ban(&steps);
            for (slot, step) in mine {
                if !irqbalance::ban_in_place(live, &step.action) {
                    out.add(slot, [step]);
                }
            }
        },
        claims: no_files,
    },
    Part {
        owner: Owner::Mechanism,
        check: no_check,
        plan: |cx, d| {
            // A tuned profile that pins CPUs fights cgroups it did not make.
            d.plan.notes.extend(plan::tuned_notes(&cx.snap.owners));
            let facts = cx.snap.mechanism();
            let cgroup = mechanism::plan(facts, cx.shield, cx.housekeeping, &mut d.plan.notes)?;
            d.plan.mechanism = mechanism::name(facts);
            d.plan.partition = cgroup.partition;
            d.plan.shield_dir = cgroup.shield_dir;
            d.add(Slot::Cgroups, cgroup.steps);
            Ok(())
        },
        before: unchanged,
        // Resized instead of made.
        change: |cx, _, out| {
            let to = (&cx.fresh.shield, &cx.fresh.housekeeping);
            let cpus = (to.0, to.1, cx.fresh.partition.as_ref());
            let resize = mechanism::resize(cx.live.mechanism(), cx.state, cpus, &cx.read);
            out.add(Slot::Cgroups, resize);
        },
        claims: no_files,
    },
    Part {
        owner: Owner::Tasks,
        check: no_check,
        plan: |cx, d| {
            d.add(Slot::Record, [remember_affinities(cx.snap)]);
            let tasks = plan_tasks(cx.snap, cx.shield, cx.housekeeping, cx.req.force, |_| true);
            d.add(Slot::Tasks, tasks.steps);
            let notes = task_notes(cx.snap, &tasks.kept, &tasks.split_off);
            d.plan.notes.extend(notes);
            d.plan.per_cpu_kthreads = tasks.per_cpu_kthreads;
            d.plan.kept = tasks.kept;
            d.plan.split_off = tasks.split_off;
            d.plan.left_to_partition = tasks.left_to_partition;
            Ok(())
        },
        before: |orig, _, snap| {
            tasks::in_place::before_shield(snap, (&orig.affinities, &orig.set_by_shield))
        },
        change: |cx, mine, out| {
            let recorded = (&cx.originals.affinities, &cx.originals.set_by_shield);
            let journal = (cx.state, cx.entries);
            let t = tasks::in_place::change(cx.live, journal, &cx.fresh.shield, recorded, mine);
            out.record = t.record;
            out.steps.extend(t.steps);
            out.add(Slot::Leaving, t.leaving_moves);
            out.add(Slot::Settled, t.settled);
            out.add(Slot::Restore, t.restored);
            out.change.staying = t.staying;
            out.change.leaving = t.leaving;
        },
        claims: no_files,
    },
    Part {
        owner: Owner::Irqs,
        check: |cx, d| {
            d.plan.irqs_to_shield = irqs::resolve(&cx.snap.irqs, &cx.req.irqs)?;
            Ok(())
        },
        plan: |cx, d| {
            let to = &d.plan.irqs_to_shield;
            let snap = cx.snap;
            let facts = (
                &snap.irqs[..],
                snap.default_irq_affinity.as_ref(),
                snap.mask_bits(),
            );
            for (to_shield, step) in irqs::plan(facts, cx.shield, cx.housekeeping, to) {
                let away_first = cx.req.hotplug_restart && !to_shield;
                let slot = if away_first {
                    Slot::BeforeHotplug
                } else {
                    Slot::Irqs
                };
                d.add(slot, [step]);
            }
            Ok(())
        },
        before: |orig, _, snap| {
            let recorded = |path: &str| orig.file(path).map(str::to_string);
            irqs::before_shield(&mut snap.irqs, &mut snap.default_irq_affinity, &recorded);
        },
        change: |cx, mine, out| {
            for (slot, step) in mine {
                if let (Some(irq), Action::Write { path, .. }) = (step.irq(), &step.action) {
                    let recorded = cx.originals.files.get(path);
                    if irqs::refused_before(cx.state, (irq, path), recorded, cx.read) {
                        out.change.still_refused.push(irq);
                        continue;
                    }
                }
                out.unless_held(cx, slot, step);
            }
        },
        claims: irqs::claims,
    },
    Part {
        owner: Owner::Hotplug,
        check: |cx, _| match cx.req.hotplug_restart {
            true => {
                let switches = (&cx.snap.hotplug_files, &cx.snap.hotplug_writable);
                hotplug::check(switches, cx.shield)
            }
            false => Ok(()),
        },
        plan: |cx, d| {
            if cx.req.hotplug_restart {
                d.add(Slot::Hotplug, hotplug::steps(cx.shield));
                let cpus = cx.shield.clone();
                d.plan.notes.push(Note::HotplugRestart { cpus });
            }
            Ok(())
        },
        before: unchanged,
        // The old shield's CPUs went offline and online already.
        change: |cx, mine, out| {
            let old: HashSet<String> = cx.state.shield.iter().map(cpu_online_file).collect();
            for (slot, step) in mine {
                match &step.action {
                    Action::Write { path, .. } if old.contains(path) => {}
                    _ => out.unless_held(cx, slot, step),
                }
            }
        },
        claims: no_files,
    },
    Part {
        owner: Owner::Workqueues,
        check: no_check,
        plan: |cx, d| {
            let facts = (cx.snap.workqueue_mask.as_ref(), cx.snap.mask_bits());
            let step = workqueues::plan(facts, cx.shield, cx.housekeeping);
            d.add(Slot::Workqueues, step);
            Ok(())
        },
        before: |orig, _, snap| {
            workqueues::before_shield(&mut snap.workqueue_mask, &|path| {
                orig.file(path).map(str::to_string)
            })
        },
        change: unless_held,
        claims: workqueues::claims,
    },
    Part {
        owner: Owner::Resctrl,
        check: |cx, _| match ask(cx.req) {
            Some(ask) => resctrl::check(&cx.snap.resctrl, ask),
            None => Ok(()),
        },
        plan: |cx, d| {
            if let Some(ask) = ask(cx.req) {
                d.add(Slot::Cache, resctrl::plan(&cx.snap.resctrl, ask, cx.shield));
            }
            Ok(())
        },
        before: |_, entries, snap| resctrl::before_shield(&mut snap.resctrl, entries),
        change: |cx, mine, out| {
            if mine.is_empty() {
                out.add(Slot::Cache, resctrl::give_back(cx.entries, cx.read));
            }
            for (slot, step) in mine {
                if !resctrl::in_place(&cx.live.resctrl, cx.read, &step.action) {
                    out.unless_held(cx, slot, step);
                }
            }
        },
        claims: resctrl::claims,
    },
    Part {
        owner: Owner::Knobs,
        check: |cx, _| match cx.req.tune.is_empty() {
            true => Ok(()),
            false => knobs::resolve(&cx.req.tune)
                .map(drop)
                .map_err(PlanError::from),
        },
        plan: |cx, d| {
            let (Some(state), false) = (&cx.snap.tunables, cx.req.tune.is_empty()) else {
                return Ok(());
            };
            let wanted = knobs::resolve(&cx.req.tune)?;
            // Files the shield itself writes are left to it.
            let already: Vec<String> = written(&d.steps).map(str::to_string).collect();
            let (cpus, bits) = ((cx.shield, cx.housekeeping), cx.snap.mask_bits());
            let tuned = knobs::plan(state, &wanted, cpus.0, cpus.1, bits, &already);
            d.add(Slot::Knobs, tuned.steps);
            d.plan.notes.extend(tuned.notes);
            Ok(())
        },
        before: unchanged,
        change: unless_held,
        claims: no_files,
    },
    Part {
        owner: Owner::Guard,
        check: no_check,
        plan: |cx, d| {
            let kernel = &cx.snap.kernel_work;
            let knob_steps: Vec<Step> = d.of(Owner::Knobs).cloned().collect();
            let rt_after = guard::rt_runtime_after(kernel, &knob_steps);
            let systemd = cx.snap.owners.systemd;
            let (steps, notes) = guard::plan(kernel, &cx.req.guard, rt_after, cx.shield, systemd)?;
            d.add(Slot::Guard, steps);
            d.plan.notes.extend(notes);
            Ok(())
        },
        before: unchanged,
        change: |cx, mine, out| {
            out.change.guard = mine
                .iter()
                .any(|(_, s)| matches!(s.action, Action::Guard { .. }));
            for (slot, step) in mine {
                match &step.action {
                    Action::Guard { cpus, settings, .. }
                        if guard::in_place(&cx.read, cpus, settings) => {}
                    _ => out.unless_held(cx, slot, step),
                }
            }
        },
        claims: no_files,
    },
    Part {
        owner: Owner::RtKthreads,
        check: no_check,
        plan: |cx, d| {
            if let Some(above) = cx.req.kthreads_above {
                d.add(
                    Slot::Kthreads,
                    rt_kthreads::plan(&cx.snap.threads, cx.shield, above),
                );
            }
            Ok(())
        },
        before: unchanged,
        change: |cx, mine, out| {
            for (slot, step) in mine {
                match &step.action {
                    Action::SetScheduler {
                        tid,
                        policy,
                        priority,
                        reservation: None,
                        ..
                    } if rt_kthreads::in_place(&cx.read, *tid, *policy, *priority) => {}
                    _ => out.unless_held(cx, slot, step),
                }
            }
        },
        claims: no_files,
    },
];

/// The step that writes back a file the old shield wrote, owned by the
/// component that claims the file (a file no other claims is a knob's).
fn owned_restore(write: Action) -> Step {
    let Action::Write { path, .. } = &write else {
        return Step::optional(Owner::Knobs, write);
    };
    let claimed = ORDER
        .iter()
        .find_map(|part| (part.claims)(path).map(|subject| (part.owner, subject)));
    match claimed {
        Some((owner, subject)) => Step {
            subject,
            ..Step::optional(owner, write)
        },
        None => Step::optional(Owner::Knobs, write),
    }
}

/// The files `steps` write.
fn written(steps: &[(Slot, Step)]) -> impl Iterator<Item = &str> {
    steps.iter().filter_map(|(_, s)| match &s.action {
        Action::Write { path, .. } => Some(path.as_str()),
        _ => None,
    })
}

/// The cache share a request asks for.
fn ask(req: &Request) -> Option<resctrl::Ask> {
    req.cache_ways.map(|ways| resctrl::Ask {
        ways,
        others_bandwidth: req.others_bandwidth,
    })
}

/// A part with nothing of its own to check in a request.
fn no_check(_: &Planning, _: &mut Draft) -> Result<(), PlanError> {
    Ok(())
}

/// Checks the request against the machine and plans the shield: every
/// part checks its part of the request, then plans its part, in [`ORDER`].
pub fn plan(snap: &Snapshot, req: &Request) -> Result<Plan, PlanError> {
    draft(snap, req).map(Draft::finish)
}

/// [`plan`], its steps still in their slots.
fn draft(snap: &Snapshot, req: &Request) -> Result<Draft, PlanError> {
    let valid = plan::validate(snap, req)?;
    let cx = Planning {
        snap,
        req,
        shield: &valid.shield,
        housekeeping: &valid.housekeeping,
    };
    let mut draft = Draft {
        plan: Plan::new(&valid),
        steps: Vec::new(),
    };
    for part in &ORDER {
        (part.check)(&cx, &mut draft)?;
    }
    for part in &ORDER {
        (part.plan)(&cx, &mut draft)?;
    }
    Ok(draft)
}

/// Plans the change of the active shield (`state`, journal `entries`) to
/// `req`, on the machine `live`: the fresh plan on the machine as it was
/// before the shield, each component's part of it changed in place
/// ([`Part::change`]), and the files the old shield wrote and the new one
/// does not written back. `read` reads a kernel file now (relative path),
/// to leave out what already holds. Refuses what `on` refuses.
pub fn change(
    live: &Snapshot,
    (state, entries): (&State, &[Entry]),
    req: &Request,
    read: &dyn Fn(&str) -> Option<String>,
) -> Result<Reshape, PlanError> {
    let originals = reshape::originals(entries);
    let mut before = live.clone();
    for part in &ORDER {
        (part.before)(&originals, entries, &mut before);
    }
    let fresh = draft(&before, req)?;
    let written: HashSet<&str> = written(&fresh.steps).collect();
    let mut out = Changing {
        change: Reshape::of(&fresh.plan, state),
        steps: Vec::new(),
        record: None,
    };
    let restore = reshape::restore_files(live, &originals, &written, read);
    out.add(Slot::Restore, restore.into_iter().map(owned_restore));
    let cx = InPlace {
        live,
        state,
        entries,
        fresh: &fresh.plan,
        originals: &originals,
        read,
    };
    for part in &ORDER {
        let mine = (fresh.steps.iter())
            .filter(|(_, s)| s.owner == part.owner)
            .cloned()
            .collect();
        (part.change)(&cx, mine, &mut out);
    }
    out.steps.sort_by_key(|(slot, _)| *slot);
    let mut steps: Vec<Step> = out.steps.into_iter().map(|(_, s)| s).collect();
    if let (Some(record), false) = (out.record, steps.is_empty()) {
        // Undo puts back the affinity every thread has now (the kernel of
        // 6.1 resets them when the partition changes), then the older ones.
        steps.insert(0, record);
    }
    let mut change = out.change;
    change.plan.notes = reshape::notes(
        &fresh.plan,
        &state.shield,
        &fresh.plan.shield,
        &change.leaving,
    );
    change.plan.steps = steps;
    Ok(change)
}

/// The real-time tasks on the shield of `state` that `off` keeps on their
/// CPUs, and what the undo is told of them; with any, the shield's cgroups
/// are readied for them to leave on their CPUs first.
pub(super) fn keep_realtime(
    sys: &Sys,
    state: &State,
) -> (Vec<tasks::realtime::RealtimeThread>, KeepOnCpus) {
    let Ok(cgroup) = snapshot::detect_cgroup(sys) else {
        return (Vec::new(), KeepOnCpus::default());
    };
    if !sys.exists(&state.shield_dir) {
        return (Vec::new(), KeepOnCpus::default());
    }
    let threads = tasks::realtime::inside(sys, &state.shield_dir, cgroup.hierarchy());
    if threads.is_empty() {
        return (threads, KeepOnCpus::default());
    }
    let redirect = mechanism::release_for_kept(sys, state);
    let keep = tasks::realtime::keep_on_cpus(&threads, redirect);
    (threads, keep)
}

/// Why a change in place must not take the CPUs of the real-time tasks
/// inside that it would move out (`leaving`), keeping `staying`.
pub(super) fn realtime_leaving(
    sys: &Sys,
    leaving: &[tasks::TaskRef],
    staying: &crate::cpulist::CpuSet,
) -> Option<String> {
    tasks::realtime::leaving_refusal(sys, leaving, staying)
}

/// The real-time tasks `off` kept, as they read back after it.
pub(super) fn kept_realtime(
    sys: &Sys,
    threads: &[tasks::realtime::RealtimeThread],
    recorded: &std::collections::HashMap<i32, crate::cpulist::CpuSet>,
) -> Vec<KeptRealtime> {
    tasks::realtime::kept_as_read(sys, threads, recorded)
}

/// Every component, for the engine.
pub(super) struct Components;

/// What the engine is given to make and undo the components' own changes.
pub(super) const EFFECTS: &Components = &Components;

impl Effects for Components {
    fn make(&self, sys: &Sys, action: &Action) -> Option<Result<(), ApplyError>> {
        Some(match action {
            Action::SetScheduler {
                tid,
                policy,
                priority,
                reservation,
                ..
            } => rt_kthreads::set(sys, *tid, (*policy, *priority), *reservation),
            Action::IrqbalanceBan {
                banned,
                make_dir,
                manager_env,
                ..
            } => irqbalance::ban(sys, banned, *make_dir, *manager_env).map_err(ApplyError::from),
            Action::Guard {
                cpus,
                settings,
                unit,
            } => guard::start(sys, cpus, settings, unit.as_deref()).map_err(ApplyError::from),
            Action::MountResctrl { target } => resctrl::mount(sys, target),
            Action::ResctrlSchemata { path, share } => resctrl::write_share(sys, path, share),
            _ => return None,
        })
    }

    fn previous(&self, sys: &Sys, action: &Action) -> Option<String> {
        match action {
            Action::SetScheduler { tid, .. } => rt_kthreads::read_previous(sys, *tid),
            Action::ResctrlSchemata { path, .. } => resctrl::previous(sys, path),
            _ => None,
        }
    }

    fn undo(&self, sys: &Sys, entry: &Entry, out: &mut Undone) -> bool {
        match &entry.action {
            Action::SetScheduler { tid, name, .. } => {
                rt_kthreads::undo(sys, *tid, name, entry.previous.as_deref(), entry.at, out)
            }
            Action::IrqbalanceBan { .. } => {
                let (restored, failed) = irqbalance::unban(sys, &entry.action);
                out.restored += usize::from(restored);
                out.failed.extend(failed);
            }
            Action::Guard { unit, .. } => guard::undo(sys, unit.as_deref(), out),
            Action::MountResctrl { target } => resctrl::unmount(sys, target, out),
            Action::ResctrlSchemata { path, .. } => {
                resctrl::undo_share(sys, path, entry.previous.as_deref(), out)
            }
            _ => return false,
        }
        true
    }

    /// irqbalance gets its environment back before anything else: a banned
    /// irqbalance still running while undo puts IRQs back moves them again
    /// within its 10 s cycle (SYSTEMD-NOTES 10). Its ban is the first change
    /// `on` makes, for the same reason the other way round. RT throttling
    /// comes back first too (see `knobs::undone_first`).
    fn undone_first(&self, action: &Action) -> bool {
        matches!(action, Action::IrqbalanceBan { .. }) || knobs::undone_first(action)
    }

    /// The starvation guard and the kernel threads raised above the
    /// user's task stay until everything else is back: a real-time task
    /// still on the shield keeps running through `off` (see
    /// `tasks::realtime`), and removing the cgroups waits for RCU grace
    /// periods, which on PREEMPT_RT need the shielded CPUs' `rcuc/N` to run.
    fn undone_last(&self, action: &Action) -> bool {
        matches!(action, Action::Guard { .. } | Action::SetScheduler { .. })
    }

    fn describe(&self, action: &Action) -> Option<String> {
        match action {
            Action::IrqbalanceBan { manager_env, .. } => Some(irqbalance::describe(*manager_env)),
            Action::MountResctrl { target: path } | Action::ResctrlSchemata { path, .. } => {
                Some(format!("/{path}"))
            }
            _ => None,
        }
    }
}

pub use super::tasks::realtime::KeptRealtime;

pub mod owners;
pub mod read;
pub mod report;
pub mod settle;
pub mod snapshot;
pub mod status;

#[cfg(test)]
mod change_tests;
#[cfg(test)]
mod plan_tests;
