//! The tasks of a shield: which threads leave the shield and how, which the
//! shield keeps (the user's real-time tasks, moved in with their own
//! affinity), where `move` and `run` place a task, and which threads on the
//! shield `status` counts as leaks.

pub(in crate::shield) mod forked;
pub(in crate::shield) mod in_place;
pub(in crate::shield) mod move_run;
mod notes;
pub(in crate::shield) mod realtime;
mod report;

pub use notes::TasksNote;
pub use report::{kinds, table};
use move_run::place_in;
pub use move_run::Place;

use crate::shield::apply::ApplyError;
use crate::shield::component::{
    Changing, Component, Draft, InPlace, Looking, Phase, Planning, Reporting, Settling,
};
use crate::shield::component::{Keeps, Looks, Reports, Settles};
use crate::shield::journal::Entry;
use crate::shield::kept::KeptTask;
use crate::shield::parts::{Line, Metric, PartReport};
use crate::shield::plan_error::PlanError;
use crate::shield::reshape::Originals;
use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;
use crate::shield::components::named_sets::{self, NamedSet};
use crate::finding::{Finding, Severity};
use crate::shield::change::{Action, Owner, Step};
use crate::shield::error::ShieldError;
use crate::shield::holds::Holds;
use crate::shield::journal::State;
use crate::shield::note::{Note, OwnNote};
use crate::shield::snapshot::{
    in_shield_cgroup, CgroupSetup, Snapshot, SHIELD_SLICE, SYSTEM_CGROUP_V1,
};
use crate::sys::procfs::{self, Thread};
use crate::sys::systemd::SystemdCall;
use crate::sys::Sys;

/// This component, as it names itself in the journal and in reports.
pub const OWNER: Owner = Owner("tasks");

pub use crate::shield::change::TaskRef;

/// The first step: every thread's affinity, for undo (see [`Action::Remember`]).
pub(in crate::shield) fn remember_affinities(snap: &Snapshot) -> Step {
    Step::optional(
        OWNER,
        Action::Remember {
            affinities: snap
                .threads
                .iter()
                .filter(|t| !t.is_pinned_by_kernel())
                .map(|t| (t.tid, t.cpus_allowed.clone()))
                .collect(),
        },
    )
}

/// What the user should know about the tasks kept on the shield and the
/// threads split off their process.
pub(in crate::shield) fn task_notes(
    snap: &Snapshot,
    kept: &[TaskRef],
    split_off: &[TaskRef],
) -> Vec<Note> {
    let mut notes = Vec::new();
    if snap.owners.systemd && matches!(snap.cgroup, CgroupSetup::V2 { .. }) && !kept.is_empty() {
        // Under systemd a process belongs to the unit whose cgroup holds it.
        let mut units: Vec<String> = kept
            .iter()
            .filter_map(|k| snap.threads.iter().find(|t| t.tid == k.tid))
            .filter_map(|t| t.cgroup.rsplit('/').next().map(str::to_string))
            .filter(|u| u.ends_with(".service") || u.ends_with(".scope"))
            .collect();
        units.sort();
        units.dedup();
        if !units.is_empty() {
            notes.push(TasksNote::TasksLeaveUnits { units }.note());
        }
    }
    if !split_off.is_empty() {
        let threads = split_off.len();
        notes.push(TasksNote::ThreadsSplitOff { threads }.note());
    }
    notes
}

/// The task part of a plan: which threads leave the shield and how.
#[derive(Debug, Default)]
pub struct TaskPlan {
    /// Cgroup moves first (v1), then affinity changes.
    pub steps: Vec<Step>,
    /// What else it found, kept in the plan.
    pub planned: Planned,
}

/// What the tasks' plan found beyond its steps, under their name in the
/// plan's parts.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct Planned {
    /// Per-CPU kernel threads on the shield, by kind; the kernel keeps
    /// them there.
    pub per_cpu_kthreads: BTreeMap<String, usize>,
    /// User tasks kept on the shield (moved into it, own affinity kept).
    pub kept: Vec<TaskRef>,
    /// Threads that asked only for shielded CPUs in processes that cannot
    /// move whole (cgroup v2): moved off.
    pub split_off: Vec<TaskRef>,
    /// Threads on the shield the partition moves off by itself (see
    /// [`Snapshot::left_to_the_partition`]): no step of their own.
    pub left_to_partition: Vec<i32>,
}

/// What the tasks' plan found in `plan` (nothing in a plan it had no part
/// in).
pub(super) fn planned(plan: &crate::shield::plan::Plan) -> Planned {
    plan.parts.get(OWNER.name()).unwrap_or_default()
}

/// Plans how every thread accepted by `include` leaves the shield. Also used
/// after applying, to catch tasks forked meanwhile.
pub fn plan_tasks(
    snap: &Snapshot,
    (shield, sets): (&CpuSet, &[NamedSet]),
    housekeeping: &CpuSet,
    force: bool,
    include: impl Fn(&Thread) -> bool,
) -> TaskPlan {
    let mut out = TaskPlan::default();
    let mut affinities = Vec::new();
    let mut v1_moves = Vec::new();
    let mut keep = Vec::new();
    for t in snap.threads.iter().filter(|t| include(t)) {
        if in_shield_cgroup(&t.cgroup) {
            continue;
        }
        let on_shield = t.cpus_allowed.intersects(shield);
        if t.is_pinned_by_kernel() {
            if on_shield {
                *out.planned.per_cpu_kthreads.entry(t.kind()).or_default() += 1;
            }
            continue;
        }
        if on_shield && t.cpus_allowed.is_subset(shield) && !force {
            if t.is_kthread() {
                *out.planned.per_cpu_kthreads.entry(t.kind()).or_default() += 1;
            } else {
                keep.push(t);
            }
            continue;
        }
        let target = t.cpus_allowed.away_from(shield, housekeeping);
        if matches!(snap.cgroup, CgroupSetup::V1 { .. }) && t.cgroup == "/" {
            v1_moves.push((t, target));
            continue;
        }
        if on_shield {
            if snap.left_to_the_partition(t) {
                out.planned.left_to_partition.push(t.tid);
            } else {
                affinities.push(set_affinity(t, target));
            }
        }
    }
    plan_kept(snap, (keep, sets), housekeeping, &mut out, &mut affinities);
    if let CgroupSetup::V1 { mount, .. } = &snap.cgroup {
        plan_v1_moves(
            snap,
            mount,
            housekeeping,
            v1_moves,
            &mut out,
            &mut affinities,
        );
    }
    out.steps.extend(affinities);
    out
}

/// The shield's cgroup directory for this machine (relative to the root).
pub fn shield_dir(snap: &Snapshot) -> Option<String> {
    match &snap.cgroup {
        CgroupSetup::V2 { mount, .. } if snap.owners.systemd => {
            Some(format!("{mount}/{SHIELD_SLICE}"))
        }
        other => other.shield_dir(),
    }
}

/// A task that asked only for shielded CPUs is the user's real-time task
/// (the shielded-CPU semantics: a task keeps its CPUs when taking them
/// would leave it none). It moves into the shield with its own affinity:
/// a v2 process only whole (every thread asked only for shielded CPUs),
/// as a transient scope of the shield's slice under systemd; a v1 thread
/// by itself. Moving into a cpuset resets the affinity (6.1), so it is set
/// again right after. Threads of a v2 process that also runs elsewhere
/// cannot follow: they go to the housekeeping CPUs, as the partition
/// would make the kernel do anyway.
fn plan_kept(
    snap: &Snapshot,
    (keep, sets): (Vec<&Thread>, &[NamedSet]),
    housekeeping: &CpuSet,
    out: &mut TaskPlan,
    affinities: &mut Vec<Step>,
) {
    let Some(dir) = shield_dir(snap) else { return };
    if snap.owners.kubernetes.is_some() {
        // No cgroup of the shield's own to keep them in (a Kubernetes
        // node's OS units are confined to the reserved CPUs): they go to
        // the housekeeping CPUs, as the kernel would move them anyway.
        for t in keep {
            affinities.push(set_affinity(t, housekeeping.clone()));
        }
        return;
    }
    let mount = snap.cgroup.mount().unwrap_or("").to_string();
    let cgroup_of = |t: &Thread| {
        if t.cgroup == "/" {
            String::new()
        } else {
            t.cgroup.clone()
        }
    };
    let step = |action| Step::optional(OWNER, action);
    // With named sets, a task goes to the set that holds all its CPUs.
    let slice_of = |cpus: &CpuSet| match named_sets::holding(sets, cpus) {
        Some(set) => (named_sets::unit(&set.name), named_sets::dir(&dir, &set.name)),
        None => (SHIELD_SLICE.to_string(), dir.clone()),
    };
    if let CgroupSetup::V1 { .. } = &snap.cgroup {
        for t in keep {
            let (_, dir) = slice_of(&t.cpus_allowed);
            out.steps.push(step(Action::MoveTask {
                pid: t.pid,
                tid: t.tid,
                to: format!("{dir}/tasks"),
                back: format!("{mount}{}/tasks", cgroup_of(t)),
                affinities: vec![(t.tid, t.cpus_allowed.clone())],
            }));
            affinities.push(set_affinity(t, t.cpus_allowed.clone()));
            out.planned.kept.push(TaskRef::from(t));
        }
        return;
    }
    let mut threads_of: HashMap<i32, usize> = HashMap::new();
    for t in &snap.threads {
        *threads_of.entry(t.pid).or_default() += 1;
    }
    let mut by_pid: BTreeMap<i32, Vec<&Thread>> = BTreeMap::new();
    for t in keep {
        by_pid.entry(t.pid).or_default().push(t);
    }
    for (pid, threads) in by_pid {
        if threads_of.get(&pid) != Some(&threads.len()) {
            for t in threads {
                affinities.push(set_affinity(t, housekeeping.clone()));
                out.planned.split_off.push(TaskRef::from(t));
            }
            continue;
        }
        let back = format!("{mount}{}/cgroup.procs", cgroup_of(threads[0]));
        let all: CpuSet = (threads.iter()).fold(CpuSet::default(), |a, t| a.union(&t.cpus_allowed));
        let (slice, dir) = slice_of(&all);
        out.steps.push(step(if snap.owners.systemd {
            scope_action(&slice, &dir, SCOPES[0], pid, back)
        } else {
            Action::MoveTask {
                pid,
                tid: pid,
                to: format!("{dir}/cgroup.procs"),
                back,
                affinities: threads
                    .iter()
                    .map(|t| (t.tid, t.cpus_allowed.clone()))
                    .collect(),
            }
        }));
        for t in threads {
            affinities.push(set_affinity(t, t.cpus_allowed.clone()));
            out.planned.kept.push(TaskRef::from(t));
        }
    }
}

/// The prefixes of the scopes processes are put in: `run` and `move` into
/// the shield (`cpushield-run-PID.scope`), `move --out` out of it.
const SCOPES: [&str; 2] = ["cpushield-run", "cpushield-out"];

/// Process `pid` as a transient scope `PREFIX-PID.scope` of `slice` (whose
/// cgroup is `slice_dir`): systemd moves it and keeps it there through
/// reloads. Undo moves what the scope holds back to `back` (a
/// `cgroup.procs`), then stops it.
pub fn scope_action(slice: &str, slice_dir: &str, prefix: &str, pid: i32, back: String) -> Action {
    let unit = format!("{prefix}-{pid}.scope");
    Action::Systemd {
        call: SystemdCall::StartScope {
            cgroup_dir: format!("{slice_dir}/{unit}"),
            unit: unit.clone(),
            slice: slice.to_string(),
            pids: vec![pid],
        },
        undo: Some(SystemdCall::Stop { unit }),
        back: Some(back),
    }
}

/// Moves the threads of the v1 root cpuset into the system cpuset: a
/// process whose every thread goes is moved whole, in one write of its pid
/// to `cgroup.procs` (each move waits for an RCU grace period on kernels
/// since 6.0 unless the hierarchy is mounted with `favordynmods`, so one a
/// process rather than one a thread); others thread by thread through
/// `tasks`. Moving resets a thread's affinity to the cpuset's CPUs; the
/// thread's own restriction is put back right after.
fn plan_v1_moves(
    snap: &Snapshot,
    mount: &str,
    housekeeping: &CpuSet,
    moves: Vec<(&Thread, CpuSet)>,
    out: &mut TaskPlan,
    affinities: &mut Vec<Step>,
) {
    let mut threads_of: HashMap<i32, usize> = HashMap::new();
    for t in &snap.threads {
        *threads_of.entry(t.pid).or_default() += 1;
    }
    let mut moving_of: HashMap<i32, Vec<(i32, CpuSet)>> = HashMap::new();
    for (t, _) in &moves {
        moving_of
            .entry(t.pid)
            .or_default()
            .push((t.tid, t.cpus_allowed.clone()));
    }
    let whole: HashSet<i32> = moving_of
        .iter()
        .filter(|(pid, moving)| threads_of.get(pid) == Some(&moving.len()))
        .map(|(pid, _)| *pid)
        .collect();
    let move_step = |pid: i32, tid: i32, file: &str, affinities| {
        Step::optional(
            OWNER,
            Action::MoveTask {
                pid,
                tid,
                to: format!("{mount}/{SYSTEM_CGROUP_V1}/{file}"),
                back: format!("{mount}/{file}"),
                affinities,
            },
        )
    };
    for (t, target) in &moves {
        if !whole.contains(&t.pid) {
            let own = vec![(t.tid, t.cpus_allowed.clone())];
            out.steps.push(move_step(t.pid, t.tid, "tasks", own));
        } else if let Some(all) = moving_of.remove(&t.pid) {
            out.steps.push(move_step(t.pid, t.pid, "cgroup.procs", all));
        }
        // The kernel refuses to move kthreadd between v1 cpusets (EINVAL)
        // but lets its affinity change, and the kernel threads it forks
        // inherit that affinity.
        if target != housekeeping || t.is_kthread() {
            affinities.push(set_affinity(t, target.clone()));
        }
    }
}

/// The tasks a plan keeps on the shield as the machine `after` shows them:
/// those kept (inside the shield's cgroup with the affinity they asked
/// for) and those that could not be. With `--dry-run`, what is planned.
pub(in crate::shield) fn kept_as_read(
    planned: &[TaskRef],
    after: &Snapshot,
    dry_run: bool,
) -> (Vec<TaskRef>, Vec<TaskRef>) {
    if dry_run {
        return (planned.to_vec(), Vec::new());
    }
    let now: HashMap<i32, &Thread> = after.threads.iter().map(|t| (t.tid, t)).collect();
    let mut kept = Vec::new();
    let mut not_kept = Vec::new();
    for want in planned {
        match now.get(&want.tid) {
            Some(t) if in_shield_cgroup(&t.cgroup) && t.cpus_allowed == want.cpus => {
                kept.push(TaskRef::from(*t))
            }
            Some(t) => not_kept.push(TaskRef::from(*t)),
            None => {}
        }
    }
    (kept, not_kept)
}

/// The step that sets thread `t`'s affinity to `cpus` (recording what it was).
pub(in crate::shield) fn set_affinity(t: &Thread, cpus: CpuSet) -> Step {
    Step::optional(
        OWNER,
        Action::SetAffinity {
            pid: t.pid,
            tid: t.tid,
            name: t.name.clone(),
            cpus,
            previous: t.cpus_allowed.clone(),
        },
    )
}

/// Direction of `move`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Direction {
    /// Into the shield.
    In,
    /// Out to the housekeeping CPUs.
    Out,
}

pub(in crate::shield) fn check_cpu(
    cpu: Option<u32>,
    allowed: &CpuSet,
    what: &str,
) -> Result<CpuSet, ShieldError> {
    match cpu {
        None => Ok(allowed.clone()),
        Some(c) if allowed.contains(c) => Ok([c].into_iter().collect()),
        Some(c) => Err(ShieldError::Invalid(format!(
            "--cpu {c} is not one of the {what} CPUs ({allowed})"
        ))),
    }
}

/// Where `move` puts tasks.
pub(in crate::shield) struct Destination {
    /// The CPUs each thread gets.
    pub(in crate::shield) cpus: CpuSet,
    /// The cgroup directory (relative to the root).
    dir: String,
    /// The cpuset hierarchy's mount point.
    mount: String,
    /// `cgroup.procs`, or `tasks` for single threads (v1).
    file: &'static str,
    /// Under systemd: the slice, its directory and the scope's name prefix.
    by_systemd: Option<(String, String, &'static str)>,
}

/// Checks the request of `move` against the active shield and says where
/// the tasks go.
pub(in crate::shield) fn destination(
    state: &State,
    cgroup: &CgroupSetup,
    direction: Direction,
    place: &Place,
    single_thread: bool,
) -> Result<Destination, ShieldError> {
    if state.shield_dir.is_empty() {
        return Err(ShieldError::Invalid(format!(
            "this shield ({}) has no cgroup of its own to place tasks in or take them out of: on a Kubernetes node real-time work runs in Guaranteed pods, on the CPUs kubelet gives them ({})",
            state.mechanism, state.shield
        )));
    }
    if single_thread && !matches!(cgroup, CgroupSetup::V1 { .. }) {
        return Err(ShieldError::Invalid(
            "--thread needs a cgroup v1 cpuset: cgroup v2 places whole processes, not single threads".into(),
        ));
    }
    let (cpus, dir, slice) = match direction {
        Direction::In => place_in(state, place)?,
        Direction::Out => {
            if let Some(set) = &place.set {
                return Err(ShieldError::Invalid(format!(
                    "--set {set} places a task in the shield; --out takes it out"
                )));
            }
            let dir = state
                .outside_procs
                .rsplit_once('/')
                .map_or(String::new(), |(d, _)| d.to_string());
            (check_cpu(place.cpu, &state.housekeeping, "housekeeping")?, dir, None)
        }
    };
    let mount = cgroup.mount().unwrap_or("").to_string();
    // Under systemd a process changes cgroup as a transient scope of its
    // own (systemd moves it and keeps it there through reloads): in the
    // shield's slice, or in system.slice when it leaves the shield.
    let by_systemd =
        (state.shield_dir.ends_with(SHIELD_SLICE) && !single_thread).then(|| match direction {
            Direction::In => (slice.unwrap_or_else(|| SHIELD_SLICE.into()), dir.clone(), SCOPES[0]),
            Direction::Out => (
                "system.slice".to_string(),
                format!("{mount}/system.slice"),
                SCOPES[1],
            ),
        });
    Ok(Destination {
        cpus,
        dir,
        mount,
        file: if single_thread {
            "tasks"
        } else {
            "cgroup.procs"
        },
        by_systemd,
    })
}

/// The steps that place task `id` (its `threads`, not empty) at `dest`:
/// the move, then each thread's affinity, since the move resets it. A
/// failure other than a task that exited stops the move (what was done
/// stays journaled for `off`).
pub(in crate::shield) fn placement_steps(
    dest: &Destination,
    id: i32,
    threads: &[procfs::Thread],
) -> Vec<Step> {
    let first = &threads[0];
    let origin = if first.cgroup == "/" {
        ""
    } else {
        &first.cgroup
    };
    let back = format!("{}{origin}/{}", dest.mount, dest.file);
    let placement = match &dest.by_systemd {
        Some((slice, slice_dir, prefix)) => scope_action(slice, slice_dir, prefix, id, back),
        None => Action::MoveTask {
            pid: first.pid,
            tid: id,
            to: format!("{}/{}", dest.dir, dest.file),
            back,
            affinities: threads
                .iter()
                .map(|t| (t.tid, t.cpus_allowed.clone()))
                .collect(),
        },
    };
    let mut steps = vec![Step::fatal(OWNER, placement)];
    steps.extend(threads.iter().map(|t| {
        Step::fatal(
            OWNER,
            Action::SetAffinity {
                pid: t.pid,
                tid: t.tid,
                name: t.name.clone(),
                cpus: dest.cpus.clone(),
                previous: t.cpus_allowed.clone(),
            },
        )
    }));
    steps
}

/// The threads allowed on a shield, as `status` sorts them (`--json`).
#[derive(Debug, Default, Serialize)]
pub(in crate::shield) struct OnShield {
    /// Tasks placed inside the shield.
    pub(in crate::shield) inside: Vec<TaskRef>,
    /// On a Kubernetes node, the tasks of kubelet's pods: kubelet's to
    /// place (the shielded CPUs it hands out, or its shared pool).
    pub(in crate::shield) pods: Vec<TaskRef>,
    /// Per-CPU kernel threads on the shielded CPUs, by kind.
    pub(in crate::shield) per_cpu_kthreads: BTreeMap<String, usize>,
    /// Other tasks allowed on a shielded CPU.
    pub(in crate::shield) intruders: Vec<TaskRef>,
}

/// Sorts the threads of `snap` that are inside `shield` or allowed on it.
pub(in crate::shield) fn on_shield(snap: &Snapshot, shield: &CpuSet) -> OnShield {
    let mut out = OnShield::default();
    for t in &snap.threads {
        if crate::kubelet::in_pod_cgroup(&t.cgroup) {
            out.pods.push(TaskRef::from(t));
        } else if in_shield_cgroup(&t.cgroup) {
            out.inside.push(TaskRef::from(t));
        } else if t.cpus_allowed.intersects(shield) {
            if t.is_pinned_by_kernel() || (t.is_kthread() && t.cpus_allowed.is_subset(shield)) {
                *out.per_cpu_kthreads.entry(t.kind()).or_insert(0usize) += 1;
            } else {
                out.intruders.push(TaskRef::from(t));
            }
        }
    }
    out
}

impl Holds for OnShield {
    /// `threads`: threads outside the shield allowed on it. A task that
    /// asked only for shielded CPUs is the user's real-time task, not a
    /// leak.
    fn lost(&self, state: &State, repair: &str) -> Vec<Finding> {
        let shield = &state.shield;
        let leaked = self
            .intruders
            .iter()
            .filter(|t| !t.cpus.is_subset(shield))
            .count();
        if leaked == 0 {
            return Vec::new();
        }
        let reason = format!("{leaked} thread(s) outside the shield may run on CPUs {shield}");
        vec![Finding::new("threads", Severity::Bad, 80, reason, repair)]
    }
}

/// The threads, as a component of the shield: their affinities recorded,
/// moved off the shield or kept.
pub(in crate::shield) struct Part;

impl Component for Part {
    fn owner(&self) -> Owner {
        OWNER
    }

    /// The scopes `run` and `move` put processes in ([`scope_action`]).
    fn reaches(&self, reach: &mut crate::shield::reach::Reach) {
        (reach.units).extend(SCOPES.iter().map(|prefix| format!("{prefix}-*.scope")));
    }

    fn check(&self, _: &Planning, _: &mut Draft) -> Result<(), PlanError> {
        Ok(())
    }

    fn plan(&self, cx: &Planning, d: &mut Draft) -> Result<(), PlanError> {
        d.add(Phase::Record, [remember_affinities(cx.snap)]);
        let sets = named_sets::of(cx.req);
        let tasks = plan_tasks(cx.snap, (cx.shield, &sets), cx.housekeeping, cx.req.force, |_| true);
        d.add(Phase::Shield, tasks.steps);
        let planned = tasks.planned;
        let notes = task_notes(cx.snap, &planned.kept, &planned.split_off);
        d.plan.notes.extend(notes);
        d.plan.parts.put(OWNER.name(), &planned);
        Ok(())
    }

    fn before(&self, orig: &Originals, _: &[Entry], snap: &mut Snapshot) {
        in_place::before_shield(snap, (&orig.affinities, &orig.set_by_shield))
    }

    fn change(&self, cx: &InPlace, mine: Vec<(Phase, Step)>, out: &mut Changing) {
        let recorded = (&cx.originals.affinities, &cx.originals.set_by_shield);
        let journal = (cx.state, cx.entries);
        let t = in_place::change(cx.live, journal, &cx.fresh.shield, recorded, mine);
        out.record = t.record;
        out.steps.extend(t.steps);
        out.add(Phase::Prepare, t.leaving_moves);
        out.add(Phase::Finish, t.settled);
        out.add(Phase::Restore, t.restored);
        if !t.leaving.is_empty() {
            let note = TasksNote::TasksLeftShield {
                tasks: t.leaving.len(),
                housekeeping: cx.fresh.housekeeping.clone(),
            };
            out.notes.push(note.note());
        }
        out.change.staying = t.staying;
        out.change.leaving = t.leaving;
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

    fn keeps(&self) -> Option<&dyn Keeps> {
        Some(self)
    }
}

/// The real-time tasks on the shield are kept on their CPUs through `off`,
/// and a change in place that would move them out is refused.
impl Keeps for Part {
    fn kept(&self, sys: &Sys, state: &State) -> Vec<KeptTask> {
        realtime::kept(sys, state)
    }

    fn refuse_leaving(&self, sys: &Sys, leaving: &[TaskRef], staying: &CpuSet) -> Option<String> {
        realtime::leaving_refusal(sys, leaving, staying)
    }
}

impl Looks for Part {
    /// The threads inside the shield, the kernel's per-CPU threads on it,
    /// and those outside it allowed on it, judged.
    fn status(&self, cx: &Looking) -> Option<PartReport> {
        let threads = on_shield(cx.snap, &cx.state.shield);
        let mut part = PartReport::new(OWNER.name(), &threads);
        part.findings = threads.lost(cx.state, cx.repair);
        part.lines = vec![
            Line::new("tasks inside", threads.inside.len().to_string()),
            Line::new("kthreads the kernel pins", kinds(&threads.per_cpu_kthreads)),
            Line::new(
                "tasks that should leave",
                threads.intruders.len().to_string(),
            ),
        ];
        if !threads.pods.is_empty() {
            let pods = Line::new("tasks of kubelet's pods", threads.pods.len().to_string());
            part.lines.insert(1, pods);
        }
        part.metrics = vec![Metric {
            name: "leaked_threads",
            kind: "gauge",
            help: "Threads outside the shield that may run on shielded CPUs.",
            samples: vec![(Vec::new(), threads.intruders.len() as f64)],
        }];
        part.details = [
            table("inside the shield", &threads.inside, 20),
            table("in kubelet's pods (kubelet places them)", &threads.pods, 20),
            table("should not be on the shield", &threads.intruders, 20),
        ]
        .concat();
        Some(part)
    }
}

impl Reports for Part {
    /// The threads moved off the shield, kept on it, left it, refused.
    fn outcome(&self, cx: &Reporting) -> Option<PartReport> {
        Some(report::outcome_report(report::outcome(cx), cx.dry_run))
    }
}

impl Settles for Part {
    /// Tasks forked while the shield went up, moved off it; the machine
    /// read after.
    fn settle(&self, cx: &mut Settling) -> Result<(), ApplyError> {
        let plan = cx.plan;
        let kept = planned(plan).kept;
        let tasks = (&plan.shield, &plan.housekeeping, &kept[..]);
        let fx = (cx.sys, cx.fx);
        let after = forked::sweep_forked(fx, cx.before, tasks, cx.journal, cx.stop, cx.applied)?;
        cx.after = Some(after);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shield::change::Subject;
    use crate::shield::components::plan as shield_plan;
    use crate::shield::components::test_machine::{req, snap, v2};

    #[test]
    fn every_affinity_step_is_the_tasks_and_names_a_thread() {
        let plan = shield_plan(&snap(v2()), &req("2-3")).unwrap();
        let affinities: Vec<&Step> = (plan.steps.iter())
            .filter(|st| matches!(st.action, Action::SetAffinity { .. }))
            .collect();
        assert!(!affinities.is_empty());
        assert!(affinities
            .iter()
            .all(|st| st.owner == OWNER
                && matches!(st.subject, Subject::TaskAffinity(tid) if tid > 0)));
    }
}
