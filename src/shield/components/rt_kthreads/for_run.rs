//! A task `run` starts under a real-time policy on the shield: on
//! PREEMPT_RT, the shielded CPUs' softirq, timer and RCU threads that
//! would starve behind it go above it (or are named when they cannot).

use super::{
    describe, per_cpu_threads, raise_for_task, report, runs_below, KthreadsNote, Part, MAX_ABOVE,
    RESERVATION,
};
use crate::cpulist::CpuSet;
use crate::shield::change::Step;
use crate::shield::component::ReadiesRealtime;
use crate::shield::error::ShieldError;
use crate::shield::note::{Note, OwnNote};
use crate::sys::Sys;

/// On PREEMPT_RT, the shielded CPUs' kernel threads that would starve
/// behind a real-time task `run` starts go above it.
impl ReadiesRealtime for Part {
    fn ready(
        &self,
        sys: &Sys,
        cpus: &CpuSet,
        priority: u32,
        make: &dyn Fn(&[Step]) -> Result<(), ShieldError>,
    ) -> Result<Option<Note>, ShieldError> {
        raise_for_run(sys, cpus, priority, make)
    }

    fn below(&self, sys: &Sys, cpus: &CpuSet, priority: u32) -> Option<Note> {
        below(sys, cpus, priority)
    }
}

/// On PREEMPT_RT, for a task of real-time `priority` about to run on
/// `cpus`: the note naming those CPUs' timer, RCU and softirq threads
/// that run below it, else `None`.
fn below(sys: &Sys, cpus: &CpuSet, priority: u32) -> Option<Note> {
    if !crate::guard::kernel::running_preempt_rt(sys) {
        return None;
    }
    let threads: Vec<String> = per_cpu_threads(sys, cpus)
        .into_iter()
        .filter(|t| runs_below(&t.attr, priority))
        .map(|t| format!("{} {}", crate::escape::terminal(&t.name), describe(&t.attr)))
        .collect();
    (!threads.is_empty()).then(|| {
        KthreadsNote::KthreadsBelow {
            priority,
            cpus: cpus.clone(),
            threads,
            max_above: MAX_ABOVE,
        }
        .note()
    })
}

/// For `run --fifo` and `--rr` on PREEMPT_RT: raises the softirq, timer
/// and RCU threads of `cpus` that would starve behind a task of real-time
/// `priority` above it, through `make` (journaled into the active
/// shield); the note says which, or which stay below it when none could be
/// raised.
fn raise_for_run(
    sys: &Sys,
    cpus: &CpuSet,
    priority: u32,
    make: &dyn Fn(&[Step]) -> Result<(), ShieldError>,
) -> Result<Option<Note>, ShieldError> {
    let (steps, rcu_offloaded) = raise_for_task(sys, cpus, priority);
    if steps.is_empty() {
        // Nothing the kernel would take (throttling on, above every
        // priority left): the threads still below the task are named.
        return Ok(if priority > MAX_ABOVE {
            below(sys, cpus, priority)
        } else {
            None
        });
    }
    make(&steps)?;
    let read = |tid: i32| sys.sched_attr(tid).ok();
    let threads = report(&steps, Some(&read))
        .into_iter()
        .map(|r| format!("{} {}", crate::escape::terminal(&r.name), r.scheduling))
        .collect();
    Ok(Some(
        KthreadsNote::KthreadsRaisedForTask {
            priority,
            threads,
            rcu_offloaded,
            reservation_ns: (priority > MAX_ABOVE).then_some(RESERVATION),
        }
        .note(),
    ))
}

