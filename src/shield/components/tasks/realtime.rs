//! Real-time tasks still on the shield when it goes: what `off` does with
//! a SCHED_FIFO, SCHED_RR or SCHED_DEADLINE task that may never sleep.
//!
//! Such a task runs before everything ordinary on its CPU. Put back where
//! it was before `run` or `move` (every CPU, or the housekeeping CPUs while
//! the partition still stands, since 6.1 resets a moved task's affinity
//! to its new cgroup's CPUs), a loop that never sleeps takes a
//! housekeeping CPU whose kernel work has no guard: with throttling off
//! (`--tune`) that CPU's RCU and kworkers starve, and `off` itself waited
//! for them for good on Debian 12. So `off` keeps each such task on the
//! CPUs it has now, which are no longer shielded once `off` returns: its
//! cgroup goes back to what it was, its affinity stays, and the report
//! names it with the affinity it had before and how to give that back.

use std::collections::BTreeSet;

use crate::cpulist::CpuSet;
use crate::shield::journal::State;
use crate::shield::kept::KeptTask;
use crate::sys::procfs::{self, Hierarchy};
use crate::sys::Sys;

use crate::shield::snapshot::in_shield_cgroup;

/// The real-time user threads in the cgroup `dir` (relative to the root)
/// and the cgroups below it. Kernel threads are not counted: they are never
/// moved by a shield.
fn inside(sys: &Sys, dir: &str, hierarchy: Hierarchy) -> Vec<KeptTask> {
    let mut pids = BTreeSet::new();
    processes_below(sys, dir, &mut pids);
    let mut out = Vec::new();
    for pid in pids {
        for tid in procfs::list_tids(sys, pid).unwrap_or_default() {
            let Ok(Some(t)) = procfs::read_thread(sys, pid, tid, hierarchy) else {
                continue;
            };
            if t.is_kthread() || !in_shield_cgroup(&t.cgroup) {
                continue;
            }
            let Ok(attr) = sys.sched_attr(tid) else {
                continue;
            };
            if attr.is_realtime() {
                out.push(KeptTask {
                    pid,
                    tid,
                    name: t.name,
                    scheduling: attr.label(),
                    cpus: t.cpus_allowed,
                });
            }
        }
    }
    out
}

/// Every process with a thread in cgroup `dir` or below (`cgroup.procs`
/// lists the process of each thread, in both hierarchies).
fn processes_below(sys: &Sys, dir: &str, out: &mut BTreeSet<i32>) {
    if let Ok(text) = sys.read(&format!("{dir}/cgroup.procs")) {
        out.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok()),
        );
    }
    for sub in sys.subdirs(dir).unwrap_or_default() {
        processes_below(sys, &format!("{dir}/{sub}"), out);
    }
}

/// The real-time user threads on the shield of `state`, which `off` keeps
/// on their CPUs.
pub(in crate::shield) fn kept(sys: &Sys, state: &State) -> Vec<KeptTask> {
    let Ok(cgroup) = crate::shield::cgroup_layout::detect_cgroup(sys) else {
        return Vec::new();
    };
    // A shield of no cgroup of its own (a Kubernetes node's, whose pods
    // are kubelet's) keeps nothing inside.
    if state.shield_dir.is_empty() || !sys.exists(&state.shield_dir) {
        return Vec::new();
    }
    inside(sys, &state.shield_dir, cgroup.hierarchy())
}

/// Why a change in place that takes all CPUs of a real-time task inside
/// the shield (`leaving`, as the change plans them) is refused, naming each
/// such task as the kernel reads it now; `None` when none is real-time.
/// Moved out, a task that never sleeps would take a housekeeping CPU, as
/// it did through `off` (see the module's documentation); which CPU it
/// should move to is the user's call, so the change asks first.
pub(in crate::shield) fn leaving_refusal(
    sys: &Sys,
    leaving: &[super::TaskRef],
    staying: &CpuSet,
) -> Option<String> {
    let realtime: Vec<(&super::TaskRef, String)> = leaving
        .iter()
        .filter_map(|t| {
            let attr = sys.sched_attr(t.tid).ok()?;
            attr.is_realtime().then(|| (t, attr.label()))
        })
        .collect();
    let (first, _) = realtime.first()?;
    let named: Vec<String> = realtime
        .iter()
        .map(|(t, sched)| {
            format!(
                "{} (pid {}, thread {}, {sched} on CPUs {})",
                crate::input::brief(&t.name),
                t.pid,
                t.tid,
                t.cpus
            )
        })
        .collect();
    let onto = staying
        .iter()
        .next()
        .map(|c| format!(" (cpushield move {} --in --cpu {c})", first.pid))
        .unwrap_or_default();
    Some(format!(
        "real-time tasks run on the CPUs that would leave the shield: {}. Moved out of it, a task that never sleeps takes a housekeeping CPU and starves its kernel work; stop it, or move it onto a CPU that stays{onto}, then change the shield",
        named.join(", ")
    ))
}
