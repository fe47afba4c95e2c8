//! `move` and `run`: placing tasks into and out of the active shield, the
//! tasks component's own commands (where each goes: [`super`]).

use std::sync::atomic::AtomicBool;

use serde::{Deserialize, Serialize};

use super::{check_cpu, destination, placement_steps, Direction, TaskRef};
use crate::shield::snapshot::SHIELD_SLICE;
use crate::cpulist::CpuSet;
use crate::shield::apply::{self, Applied, ApplyError};
use crate::shield::change::Step;
use crate::shield::components::{self, EFFECTS};
use crate::shield::error::{require_root, ShieldError};
use crate::shield::journal::{self, Journal, State};
use crate::shield::note::Note;
use crate::shield::snapshot;
use crate::sys::procfs::{self, Hierarchy};
use crate::sys::{syscalls, Sys};

/// Where in the shield `run` and `move --in` place a task: a CPU of it
/// (`--cpu`, else all of its CPUs), in a named set of it (`--set`, else
/// the set that holds that CPU, when the shield has sets).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Place {
    /// `--cpu`.
    pub cpu: Option<u32>,
    /// `--set`.
    pub set: Option<String>,
}

impl Place {
    /// On `cpu`, in the set `set`.
    pub fn at(cpu: Option<u32>, set: Option<String>) -> Place {
        Place { cpu, set }
    }
}

/// The CPUs and the cgroup (a named set's, or the shield's own) of
/// `place` in the active shield `state`.
pub(in crate::shield) fn place_in(state: &State, place: &Place) -> Result<(CpuSet, String, Option<String>), ShieldError> {
    use crate::shield::components::named_sets;
    let sets = state.request.as_ref().map(named_sets::of).unwrap_or_default();
    let names = || sets.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ");
    let set = match (&place.set, place.cpu) {
        (Some(name), _) => Some(sets.iter().find(|s| s.name == *name).ok_or_else(|| {
            ShieldError::Invalid(match sets.is_empty() {
                true => format!("--set {name}: this shield has no named sets (cpushield on CPUS --set NAME=CPUS makes them)"),
                false => format!("--set {name}: this shield has no set {name} (its sets: {})", names()),
            })
        })?),
        _ if sets.is_empty() => None,
        (None, Some(cpu)) => Some(sets.iter().find(|s| s.cpus.contains(cpu)).ok_or_else(|| {
            ShieldError::Invalid(format!("--cpu {cpu} is in none of the shield's sets ({})", names()))
        })?),
        (None, None) if sets.len() == 1 => sets.first(),
        (None, None) => {
            return Err(ShieldError::Invalid(format!(
                "this shield has named sets ({}): name one with --set NAME, or a CPU with --cpu",
                names()
            )))
        }
    };
    match set {
        Some(set) => Ok((
            check_cpu(place.cpu, &set.cpus, &format!("set {}'s", set.name))?,
            named_sets::dir(&state.shield_dir, &set.name),
            state.shield_dir.ends_with(SHIELD_SLICE).then(|| named_sets::unit(&set.name)),
        )),
        None => Ok((
            check_cpu(place.cpu, &state.shield, "shielded")?,
            state.shield_dir.clone(),
            state.shield_dir.ends_with(SHIELD_SLICE).then(|| SHIELD_SLICE.to_string()),
        )),
    }
}

/// The result of `move`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MoveReport {
    /// `--dry-run`: `moved` is what would move; nothing moved.
    #[serde(default)]
    pub dry_run: bool,
    /// Threads moved.
    pub moved: Vec<TaskRef>,
    /// Ids that do not exist.
    pub not_found: Vec<i32>,
}

fn active_state(sys: &Sys) -> Result<State, ShieldError> {
    match journal::read_state(sys)? {
        Some(s) if s.complete => Ok(s),
        Some(_) => Err(ShieldError::Invalid(
            "the last 'cpushield on' did not finish; run 'cpushield off' first".into(),
        )),
        None => Err(ShieldError::NoShield),
    }
}

/// Moves processes (all their threads) or single threads into or out of the
/// shield. Every move is journaled, so `off` gives the tasks back. While
/// another cpushield command holds the lock, waits for it (up to
/// [`journal::LOCK_WAIT`]), calling `waiting` once.
pub fn move_tasks(
    sys: &Sys,
    ids: &[i32],
    (direction, place, single_thread): (Direction, &Place, bool),
    dry_run: bool,
    waiting: &dyn Fn(),
) -> Result<MoveReport, ShieldError> {
    let _lock = if dry_run {
        None
    } else {
        require_root(sys, "move")?;
        Some(journal::lock_waiting(sys, journal::LOCK_WAIT, waiting)?)
    };
    let state = active_state(sys)?;
    let cgroup = snapshot::detect_cgroup(sys)?;
    let dest = destination(&state, &cgroup, direction, place, single_thread)?;
    let mut report = MoveReport {
        dry_run,
        moved: Vec::new(),
        not_found: Vec::new(),
    };
    let mut steps = Vec::new();
    for &id in ids {
        let threads = read_task(sys, id, single_thread, cgroup.hierarchy())?;
        if threads.is_empty() {
            report.not_found.push(id);
            continue;
        }
        steps.extend(placement_steps(&dest, id, &threads));
        report.moved.extend(threads.iter().map(|t| TaskRef {
            cpus: dest.cpus.clone(),
            ..TaskRef::from(t)
        }));
    }
    if !dry_run {
        apply_journaled(sys, &steps)?;
        // What earlier moves and runs left that no longer matters goes.
        Journal::open(sys)?.fold(sys, EFFECTS)?;
    }
    Ok(report)
}

/// The threads of process `id` (or thread `id` alone); empty when it is gone.
fn read_task(
    sys: &Sys,
    id: i32,
    single_thread: bool,
    hierarchy: Hierarchy,
) -> Result<Vec<procfs::Thread>, ShieldError> {
    if single_thread {
        return Ok(find_thread(sys, id, hierarchy)?.into_iter().collect());
    }
    Ok(procfs::list_tids(sys, id)?
        .into_iter()
        .filter_map(|tid| procfs::read_thread(sys, id, tid, hierarchy).ok().flatten())
        .collect())
}

fn find_thread(sys: &Sys, tid: i32, h: Hierarchy) -> Result<Option<procfs::Thread>, ShieldError> {
    for pid in procfs::list_pids(sys)? {
        if pid == tid || sys.exists(&format!("proc/{pid}/task/{tid}")) {
            if let Some(t) = procfs::read_thread(sys, pid, tid, h)? {
                return Ok(Some(t));
            }
        }
    }
    Ok(None)
}

/// Scheduling of a command started with `run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunPolicy {
    /// Keep the inherited policy.
    Inherit,
    /// SCHED_FIFO at this priority.
    Fifo(i32),
    /// SCHED_RR at this priority.
    RoundRobin(i32),
}

/// Where `run` would place a command: the CPUs, checked against the active
/// shield (and its named sets); changes nothing (`run --dry-run`).
pub fn run_target(sys: &Sys, place: &Place) -> Result<(State, CpuSet), ShieldError> {
    let state = active_state(sys)?;
    let (cpus, _, _) = place_in(&state, place)?;
    Ok((state, cpus))
}

/// Moves the calling process into the shield (journaled), on `cpu` or all
/// shielded CPUs, with `policy`. The caller then drops privileges and
/// execs the command, which inherits all of it; the lock is let go before
/// (another `run` waits for it, calling `waiting` once).
pub fn enter_shield(
    sys: &Sys,
    place: &Place,
    policy: RunPolicy,
    waiting: &dyn Fn(),
) -> Result<Entered, ShieldError> {
    if let RunPolicy::Fifo(p) | RunPolicy::RoundRobin(p) = policy {
        if !(1..=99).contains(&p) {
            return Err(ShieldError::Invalid(format!(
                "real-time priority {p} is out of range (1 to 99)"
            )));
        }
    }
    require_root(sys, "run")?;
    let state = {
        let _lock = journal::lock_waiting(sys, journal::LOCK_WAIT, waiting)?;
        active_state(sys)?
    };
    let (cpus, _, _) = place_in(&state, place)?;
    let me = std::process::id() as i32;
    let mut notes = Vec::new();
    if let RunPolicy::Fifo(p) | RunPolicy::RoundRobin(p) = policy {
        let make = |steps: &[Step]| {
            let _lock = journal::lock_waiting(sys, journal::LOCK_WAIT, waiting)?;
            apply_journaled(sys, steps)
        };
        notes.extend(components::ready_for_realtime(
            sys,
            &cpus,
            p.unsigned_abs(),
            &make,
        )?);
    }
    let sched = match policy {
        RunPolicy::Inherit => None,
        RunPolicy::Fifo(p) => Some(syscalls::Policy::Fifo(p)),
        RunPolicy::RoundRobin(p) => Some(syscalls::Policy::RoundRobin(p)),
    };
    // Real-time before the move: moving into the shield's cgroup gives
    // this process all the shield's CPUs until its own affinity is set
    // (6.1), and an ordinary process placed on a CPU where another
    // real-time loop runs never gets to set it (seen with two `run --fifo
    // 99` started together); a real-time one is pushed to a free CPU.
    if let Some(policy) = sched {
        sys.set_scheduler(0, policy)?;
    }
    move_tasks(sys, &[me], (Direction::In, place, false), false, &|| {})?;
    // The kernel's word on where the command will run, not the plan's (a
    // fixture root has no thread of this process to read).
    let held = match sys.affinity(me) {
        Err(e) if e.kind == crate::sys::ErrorKind::NotFound => cpus.clone(),
        read => read?,
    };
    if held != cpus {
        return Err(ShieldError::Sys(crate::sys::SysError::new(
            "read back the affinity of",
            format!("task {me}"),
            None,
            std::io::Error::other(format!(
                "the kernel holds it on CPUs {held}, not {cpus}; nothing was started"
            )),
        )));
    }
    Ok(Entered { cpus, notes })
}

/// What `run` did before it starts the command.
#[derive(Debug, Clone)]
pub struct Entered {
    /// The CPUs the command runs on.
    pub cpus: CpuSet,
    /// What the user should know (the kernel threads raised above it).
    pub notes: Vec<Note>,
}

/// Makes `steps` through the journal of the active shield.
fn apply_journaled(sys: &Sys, steps: &[Step]) -> Result<(), ShieldError> {
    let mut journal = Journal::open(sys)?;
    let never = AtomicBool::new(false);
    apply::apply(
        sys,
        EFFECTS,
        &mut journal,
        steps,
        &never,
        &mut Applied::default(),
    )
    .map_err(|e| match e {
        ApplyError::Kernel(e) => ShieldError::Sys(e),
        ApplyError::Journal(e) => ShieldError::Journal(e),
        other => ShieldError::Invalid(other.to_string()),
    })
}
