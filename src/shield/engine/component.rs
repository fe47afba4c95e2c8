//! What a component of the shield is: the one trait every part the shield
//! drives implements in its own file (the cgroups, irqbalance's ban, the
//! tasks, the IRQs, ...), and what the engine hands each of them. The
//! engine (plan, apply, undo, the change in place) knows components only
//! through this trait and the ordered list of them,
//! [`crate::shield::components::ORDER`], the only registry.
//!
//! A component checks its part of a request, plans its part of a fresh
//! shield and of a change in place, says what it wrote as the machine was
//! before the shield, and makes and undoes the changes only it knows how to
//! make. Checking, planning and changing in place are required: a component
//! that forgets one does not compile.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;

use super::apply::{reads_as, Applied, ApplyError, Effects, Refusal};
use super::change::{Action, Owner, Refused, Step, Subject, TaskRef, Undone};
use super::error::ShieldError;
use super::journal::{Entry, Journal, State};
use super::kept::KeptTask;
use super::note::Note;
use super::parts::{MachineWide, OwnFacts, PartReport};
use super::plan::{Plan, PlanError};
use super::reach::Bounds;
use super::report::OnReport;
use super::request::Request;
use super::reshape::{Originals, Reshape};
use super::snapshot::Snapshot;
use crate::cpulist::CpuSet;
use crate::sys::Sys;

/// What a component's audit reads from.
pub struct AuditReading<'a> {
    /// The machine (read-only).
    pub sys: &'a Sys,
    /// The CPUs audited.
    pub targets: &'a CpuSet,
    /// The active shield's journal (empty without one): a file the shield
    /// holds is taken from there, not read.
    pub entries: &'a [Entry],
}

/// What the components' audit rules judge: the facts the audit reads for
/// several rules, and what each component read for itself.
pub struct Audited<'a> {
    /// The CPUs audited.
    pub targets: &'a CpuSet,
    /// The online CPUs other than the targets.
    pub housekeeping: &'a CpuSet,
    /// Every IRQ with its affinity.
    pub irqs: &'a [crate::sys::irq::Irq],
    /// `/proc/irq/default_smp_affinity`.
    pub default_irq_affinity: Option<&'a CpuSet>,
    /// What each component read for itself, under its name.
    pub own: &'a OwnFacts,
}

/// One part of the shield: what it plans (its part of a request checked,
/// planned for a fresh shield and changed in place: with its name, the four
/// required methods) and what it keeps of the shield; its other capabilities are
/// the small traits beside, each handed out by an accessor (`None` when
/// it has none).
pub(in crate::shield) trait Component: Sync {
    /// Who it is, in reports and in every step it plans.
    fn owner(&self) -> Owner;

    /// Reads the facts only it plans from, for `req`, into `facts` (see
    /// [`OwnFacts`]). Nothing by default: the older components' facts are
    /// fields of the snapshot.
    fn read(&self, _sys: &Sys, _req: &Request, _facts: &mut OwnFacts) -> Result<(), ShieldError> {
        Ok(())
    }

    /// Reads what it keeps of the machine whatever the request, into
    /// `facts` under its name, given what the snapshot read before it (the
    /// threads, systemd, the boot-isolated CPUs). Every snapshot calls it
    /// (`on`, a change in place, `status`). Nothing by default.
    fn observe(&self, _sys: &Sys, _snap: &Snapshot, _facts: &mut OwnFacts) {}

    /// Checks its part of the request against the machine, before any
    /// component plans: a refusal here leaves the machine untouched.
    fn check(&self, cx: &Planning, draft: &mut Draft) -> Result<(), PlanError>;

    /// Plans its part of a fresh shield, its steps in their [`Phase`]s.
    fn plan(&self, cx: &Planning, draft: &mut Draft) -> Result<(), PlanError>;

    /// Plans its part of a change of the active shield in place, given its
    /// steps of the fresh plan (`mine`) in their phases.
    fn change(&self, cx: &InPlace, mine: Vec<(Phase, Step)>, out: &mut Changing);

    /// What it keeps in the journal's state of the shield `on` made from
    /// `plan`, as `out` reports it (read back): `None` when nothing. A
    /// change in place keeps, besides, what its [`Component::change`] put
    /// in the change's `records`.
    fn record(&self, _plan: &Plan, _out: &OnReport) -> Option<serde_json::Value> {
        None
    }

    /// Whether the old shield (`old`) runs something of it that the new
    /// one (keeping `records`) does not ask for: a change in place stops it
    /// once the change holds ([`Component::stop_left_running`]).
    fn left_running(&self, _old: &State, _records: &OwnFacts) -> bool {
        false
    }

    /// Stops what [`Component::left_running`] found, on the machine
    /// `snap`; what the kernel or systemd refused.
    fn stop_left_running(&self, _sys: &Sys, _snap: &Snapshot) -> Vec<Refusal> {
        Vec::new()
    }

    /// Puts back its facts in `snap` as they were before the shield, from
    /// what the journal recorded (for a change in place). Nothing by
    /// default: most components change nothing the snapshot holds.
    fn before(&self, _originals: &Originals, _entries: &[Entry], _snap: &mut Snapshot) {}

    /// What a file the journal recorded is about, when it is one this
    /// component writes (a change in place writes it back as its owner):
    /// by default, a file among those it [`Component::reaches`].
    fn claims(&self, path: &str) -> Option<Subject> {
        let mut mine = crate::shield::reach::Reach::default();
        self.reaches(&mut mine);
        (mine.files.iter())
            .any(|pattern| crate::shield::reach::matches(pattern, path))
            .then(|| Subject::File(path.to_string()))
    }

    /// Adds what it changes, as a journal record may name it, to `reach`
    /// (`off` acts on no record that names anything else). Nothing by
    /// default.
    fn reaches(&self, _reach: &mut crate::shield::reach::Reach) {}

    /// The tuned settings (`section`, `key` with `.` for `/`) that write
    /// what it writes, each with its option that does (`--tune=thp`): a
    /// profile that sets one owns it twice. None by default.
    fn tuned_overlaps(&self) -> &'static [(&'static str, &'static str, &'static str)] {
        &[]
    }

    /// Whether CRI-O's high-performance hooks change what it holds at a
    /// pod's start or stop (IRQ placement, a CPU's PM QoS or governor):
    /// on a CRI-O node the healer repairs its findings (see
    /// [`crate::crio`]). False by default.
    fn crio_hooks_change(&self) -> bool {
        false
    }

    /// What its `steps` (its own, of a plan) change machine-wide, each with
    /// how to do without it. None by default.
    fn machine_wide(&self, _steps: &[Step]) -> Vec<MachineWide> {
        Vec::new()
    }

    /// Its `Undoes` capability, when it has one.
    fn undoes(&self) -> Option<&dyn Undoes> {
        None
    }

    /// Its `Looks` capability, when it has one.
    fn looks(&self) -> Option<&dyn Looks> {
        None
    }

    /// Its `Reports` capability, when it has one.
    fn reports(&self) -> Option<&dyn Reports> {
        None
    }

    /// Its `Settles` capability, when it has one.
    fn settles(&self) -> Option<&dyn Settles> {
        None
    }

    /// Its `Keeps` capability, when it has one.
    fn keeps(&self) -> Option<&dyn Keeps> {
        None
    }

    /// Its `ReadiesRealtime` capability, when it has one.
    fn readies_realtime(&self) -> Option<&dyn ReadiesRealtime> {
        None
    }
}

/// A component that readies the shielded CPUs for a task `run` starts
/// under a real-time policy (what would starve behind it goes above it).
pub trait ReadiesRealtime: Sync {
    /// Readies the shielded CPUs `cpus` for a task of real-time
    /// `priority`, making its steps through `make`; what the user should
    /// know.
    fn ready(
        &self,
        sys: &Sys,
        cpus: &CpuSet,
        priority: u32,
        make: &dyn Fn(&[Step]) -> Result<(), ShieldError>,
    ) -> Result<Option<Note>, ShieldError>;

    /// For a dry run: what would still run below a task of `priority` on
    /// `cpus`.
    fn below(&self, sys: &Sys, cpus: &CpuSet, priority: u32) -> Option<Note>;
}

/// A component that keeps tasks on the CPUs they have when the shield goes
/// or shrinks, rather than let them be moved onto the housekeeping CPUs (a
/// real-time task left on the shield may never sleep), or that readies the
/// shield for kept tasks to leave it.
pub trait Keeps: Sync {
    /// Before `off` undoes the shield of `state`: the tasks it keeps.
    fn kept(&self, _sys: &Sys, _state: &State) -> Vec<KeptTask> {
        Vec::new()
    }

    /// With tasks kept: readies the shield of `state` for them to leave it
    /// on their CPUs; the cgroup files a kept task's move back goes to
    /// instead of the one it names ([`super::undo::KeepOnCpus`]'s redirect).
    fn release_for_kept(&self, _sys: &Sys, _state: &State) -> HashMap<String, String> {
        HashMap::new()
    }

    /// Why a change in place must not move the tasks `leaving` out of the
    /// shield (keeping the CPUs `staying`); `None` when it may.
    fn refuse_leaving(
        &self,
        _sys: &Sys,
        _leaving: &[TaskRef],
        _staying: &CpuSet,
    ) -> Option<String> {
        None
    }
}

/// A component that makes changes only it knows (not plain file writes,
/// moves, affinities or systemd calls) and undoes them.
pub(in crate::shield) trait Undoes: Sync {
    /// Makes `action`, read back; `None` when it is not one of this
    /// component's own actions (the engine makes plain writes, moves and
    /// affinities itself).
    fn make(&self, _sys: &Sys, _action: &Action) -> Option<Result<(), ApplyError>> {
        None
    }

    /// The value the undo of its own `action` needs, read just before it
    /// is made.
    fn previous(&self, _sys: &Sys, _action: &Action) -> Option<String> {
        None
    }

    /// Its own `first` and `later` actions (the same thing changed again)
    /// as one journal record whose undo does what undoing both did; none
    /// by default.
    fn fold(&self, _first: &Action, _later: &Action) -> Option<Action> {
        None
    }

    /// The cgroup directory its own `action` takes away, if any: an undo
    /// that removes that directory's parent anyway does not make it again.
    fn cgroup_removed(&self, _action: &Action) -> Option<String> {
        None
    }

    /// Undoes `entry` when it is one of its own; false otherwise.
    fn undo(&self, _sys: &Sys, _entry: &Entry, _out: &mut Undone) -> bool {
        false
    }

    /// Once every entry of `entries` is undone (affinities included): what
    /// only the whole machine given back allows, such as a service
    /// started that systemd would not start while the shield held.
    /// Nothing by default.
    fn after_undo(&self, _sys: &Sys, _entries: &[Entry], _out: &mut Undone) {}

    /// Whether `action` must be undone before every other entry.
    fn undone_first(&self, _action: &Action) -> bool {
        false
    }

    /// Whether `action` must be undone after every other entry.
    fn undone_last(&self, _action: &Action) -> bool {
        false
    }

    /// Whether its own `action`, read from the journal, names only what
    /// this component changes (why not, for `off`'s report); `None` when
    /// it is not one of its own. A component with own actions answers for
    /// them: `off` refuses an own action no component vouches for.
    fn within(&self, _action: &Action, _bounds: &Bounds) -> Option<Result<(), String>> {
        None
    }

    /// Short description of its own `action`'s target for reports.
    fn describe(&self, _action: &Action) -> Option<String> {
        None
    }

    /// Its own `action` as `on --dry-run` prints it in the plan.
    fn plan_line(&self, _action: &Action) -> Option<String> {
        None
    }
}

/// A component that reads back whether its part still holds (`status`)
/// and judges it in `audit`.
pub(in crate::shield) trait Looks: Sync {
    /// For `audit`: reads what its audit rules judge beyond the audit's
    /// shared facts, into `facts` under its name (see [`AuditReading`]).
    /// Nothing by default.
    fn audit_read(&self, _cx: &AuditReading, _facts: &mut OwnFacts) {}

    /// Its `audit` findings, judged from the facts alone (no I/O): the
    /// audit's shared facts and what [`Component::audit_read`] kept in
    /// `facts.own` (see [`Audited`]). None by default.
    fn audit(&self, _facts: &Audited) -> Vec<crate::finding::Finding> {
        Vec::new()
    }

    /// For `status`: what it reads back of the active shield and what no
    /// longer holds, as findings (see [`Looking`]). `None` when the shield
    /// did not ask for it.
    fn status(&self, _cx: &Looking) -> Option<PartReport> {
        None
    }
}

/// A component that says what it did in `on`'s report.
pub(in crate::shield) trait Reports: Sync {
    /// What it did, read back after `on` (or planned, for a dry run; see
    /// [`Reporting`]): `None` when it did nothing worth a line.
    fn outcome(&self, _cx: &Reporting) -> Option<PartReport> {
        None
    }
}

/// A component that settles what moved while the plan was applied.
pub(in crate::shield) trait Settles: Sync {
    /// Settles what moved while the plan was applied (see [`Settling`]):
    /// threads forked meanwhile, IRQs placed anew. Nothing by default.
    fn settle(&self, _cx: &mut Settling) -> Result<(), ApplyError> {
        Ok(())
    }
}

/// The part of a change in place of a component whose steps are simply
/// left out where the machine holds them already.
pub(in crate::shield) fn unless_held(cx: &InPlace, mine: Vec<(Phase, Step)>, out: &mut Changing) {
    for (phase, step) in mine {
        out.unless_held(cx, phase, step);
    }
}

/// The files `steps` write.
pub(in crate::shield) fn written(steps: &[(Phase, Step)]) -> impl Iterator<Item = &str> {
    steps.iter().filter_map(|(_, s)| match &s.action {
        Action::Write { path, .. } => Some(path.as_str()),
        _ => None,
    })
}

/// Where a step goes in the order the shield's changes are made, which
/// `off` undoes in reverse: its phase, then its component's place in the
/// registry (the one order of the components), then the order planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(in crate::shield) enum Phase {
    /// Every thread's affinity, recorded for undo.
    Record,
    /// What must hold before the CPUs change hands: irqbalance's ban
    /// before the IRQs move (restarted with the ban, it does not move them
    /// back meanwhile: SYSTEMD-NOTES 10); in a change in place, tasks
    /// whose CPUs all leave, before the shield shrinks.
    Prepare,
    /// The shield itself: the cgroups made or resized, threads moved off
    /// or kept, IRQs off (before a CPU goes offline: an IRQ with no other
    /// online CPU loses its affinity for good), then each newly shielded
    /// CPU offline and online again once the cgroups took its sched domain
    /// (docs/shield.md, "Idle-balance kicks").
    Shield,
    /// What a CPU's restart undid, made again: a v1 cpuset's CPUs, IRQs
    /// bound onto the shield on request.
    AfterCpuRestart,
    /// The rest of the machine's tuning once the shield stands: the
    /// workqueues' mask, the cache share, the guard (started before the
    /// knobs turn throttling off, stopped by `off` after it is back), the
    /// kernel threads raised, the knobs, the idle states.
    Tuning,
    /// A change in place: the affinities of the tasks that stay inside.
    Finish,
    /// A change in place: what the old shield changed and the new one does
    /// not, written back.
    Restore,
}

/// Sorts `steps` into the order they are made: by phase, then by the
/// `rank` of their component (its place in the registry), then as planned.
pub(in crate::shield) fn in_order(steps: &mut [(Phase, Step)], rank: &dyn Fn(&Owner) -> usize) {
    steps.sort_by_key(|(phase, step)| (*phase, rank(&step.owner)));
}

/// What every part is given to settle what moved while a plan was
/// applied, each move through the journal; and what the parts settled.
pub(in crate::shield) struct Settling<'a> {
    /// The machine.
    pub sys: &'a Sys,
    /// How the changes only a component knows are made.
    pub fx: &'a dyn Effects,
    /// The machine the plan was made from.
    pub before: &'a Snapshot,
    /// The plan applied.
    pub plan: &'a Plan,
    /// The shield before, for a change in place.
    pub in_place: Option<&'a State>,
    /// The journal every move goes through.
    pub journal: &'a mut Journal,
    /// Set on Ctrl-C.
    pub stop: &'a AtomicBool,
    /// What applying did so far.
    pub applied: &'a mut Applied,
    /// The machine after, once a part read it again (the engine reads it
    /// after the parts when none did).
    pub after: Option<Snapshot>,
    /// What each part moved, under its name (for its report).
    pub moved: OwnFacts,
    /// What the user should know of it.
    pub notes: Vec<Note>,
}

/// What every part is given to report what `on` did: the plan, the
/// machine before and after it, what the kernel refused, and for a change
/// in place what only the change knows.
pub(in crate::shield) struct Reporting<'a> {
    /// The machine.
    pub sys: &'a Sys,
    /// The plan.
    pub plan: &'a Plan,
    /// The machine the plan was made from.
    pub before: &'a Snapshot,
    /// The machine after the plan was applied and settled (`before`, when
    /// nothing was applied).
    pub after: &'a Snapshot,
    /// What applying did: `None` for a dry run or nothing to change.
    pub applied: Option<&'a Applied>,
    /// Only planned, nothing changed.
    pub dry_run: bool,
    /// The change in place, when the active shield was changed.
    pub change: Option<&'a Reshape>,
    /// What each component settled after the plan (see
    /// [`crate::shield::components::settle`]), under its name.
    pub settled: &'a OwnFacts,
}

impl Reporting<'_> {
    /// What the kernel refused (none for a dry run).
    pub fn refused(&self) -> &[Refused] {
        self.applied.map_or(&[][..], |a| &a.refused)
    }
}

/// What every part is given to read back the active shield for `status`.
pub(in crate::shield) struct Looking<'a> {
    /// The machine.
    pub sys: &'a Sys,
    /// The active shield.
    pub state: &'a State,
    /// The machine now, with the statistics of the threads inside the
    /// shield or allowed on it.
    pub snap: &'a Snapshot,
    /// The next step that repairs the shield, unless a component knows a
    /// better one.
    pub repair: &'a str,
    /// The kernel's interrupt counters read as `status` began: a
    /// component that samples a rate starts its window there, so that
    /// the window overlaps the reading of the machine.
    pub counters: Option<&'a crate::sys::kicks::Reading>,
}

/// What every part is given to plan a fresh shield: the machine, the
/// request, and its CPUs checked against the machine.
pub(in crate::shield) struct Planning<'a> {
    /// The machine (for a change in place: as it was before the shield).
    pub snap: &'a Snapshot,
    /// The request.
    pub req: &'a Request,
    /// The shielded CPUs.
    pub shield: &'a CpuSet,
    /// The housekeeping CPUs.
    pub housekeeping: &'a CpuSet,
}

/// A plan as the parts draft it: the plan's facts, and its steps in phases.
pub(in crate::shield) struct Draft {
    /// The plan, but for its steps.
    pub plan: Plan,
    /// The steps, each in its phase, in the order planned.
    pub steps: Vec<(Phase, Step)>,
}

impl Draft {
    /// Adds `steps` to `phase`.
    pub fn add(&mut self, phase: Phase, steps: impl IntoIterator<Item = Step>) {
        self.steps.extend(steps.into_iter().map(|s| (phase, s)));
    }

    /// The plan, its steps in the order they are made (see [`in_order`]).
    pub fn finish(mut self, rank: &dyn Fn(&Owner) -> usize) -> Plan {
        in_order(&mut self.steps, rank);
        self.plan.steps = self.steps.into_iter().map(|(_, s)| s).collect();
        self.plan
    }
}

/// What every part is given to plan a change of the active shield in
/// place (see [`super::reshape`]).
pub(in crate::shield) struct InPlace<'a> {
    /// The machine now.
    pub live: &'a Snapshot,
    /// The active shield.
    pub state: &'a State,
    /// Its journal.
    pub entries: &'a [Entry],
    /// The request the shield changes to.
    pub req: &'a super::request::Request,
    /// The plan a fresh shield of the new request would have on the
    /// machine as it was before the shield (its steps are the parts').
    pub fresh: &'a Plan,
    /// The oldest values the journal recorded: the machine before.
    pub originals: &'a Originals,
    /// Reads a kernel file now (relative path).
    pub read: &'a dyn Fn(&str) -> Option<String>,
}

/// A change in place as the parts draft it.
pub(in crate::shield) struct Changing {
    /// The change, but for its plan's steps and notes.
    pub change: Reshape,
    /// The steps, each in its phase.
    pub steps: Vec<(Phase, Step)>,
    /// The record of every thread's affinity, made first if anything changes.
    pub record: Option<Step>,
    /// The components' notes of the change, after the fresh plan's.
    pub notes: Vec<Note>,
    /// Why a component refuses the change (nothing is changed).
    pub refused: Option<PlanError>,
}

impl Changing {
    /// Adds `steps` to `phase`.
    pub fn add(&mut self, phase: Phase, steps: impl IntoIterator<Item = Step>) {
        self.steps.extend(steps.into_iter().map(|s| (phase, s)));
    }

    /// Keeps the fresh `step` unless the machine holds it already (a file
    /// that reads as it would write).
    pub fn unless_held(&mut self, cx: &InPlace, phase: Phase, step: Step) {
        if let Action::Write {
            path, value, check, ..
        } = &step.action
        {
            if (cx.read)(path).is_some_and(|now| reads_as(*check, &now, value)) {
                return;
            }
        }
        self.steps.push((phase, step));
    }
}
