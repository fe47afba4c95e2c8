//! Tasks a shield keeps on the CPUs they have when it goes, rather than
//! give them back the affinity they had before it: a component names them
//! ([`super::component::Keeps`]), the undo keeps them ([`KeepOnCpus`]),
//! and `off`'s report reads them back ([`KeptRealtime`]).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::undo::KeepOnCpus;
use crate::cpulist::CpuSet;
use crate::sys::Sys;

/// A thread a component keeps on its CPUs through `off`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptTask {
    /// Process id.
    pub pid: i32,
    /// Thread id.
    pub tid: i32,
    /// Command name.
    pub name: String,
    /// Its scheduling (`SCHED_FIFO 80`).
    pub scheduling: String,
    /// Its affinity now, which it keeps.
    pub cpus: CpuSet,
}

/// A real-time task `off` kept on its CPUs, as read back after the undo.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptRealtime {
    /// Process id.
    pub pid: i32,
    /// Thread id.
    pub tid: i32,
    /// Command name.
    pub name: String,
    /// Its scheduling (`SCHED_FIFO 80`).
    pub scheduling: String,
    /// Its affinity after `off`, as the kernel reads it back: the CPUs it
    /// ran on inside the shield, now unshielded.
    pub cpus: CpuSet,
    /// The affinity the journal recorded before the shield placed it, which
    /// `off` did not give back (`None`: none recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<CpuSet>,
    /// Whether it had exited by the time `off` read it back.
    #[serde(default)]
    pub exited: bool,
}

/// The undo's instructions for keeping `tasks` on their CPUs, moved back
/// through `redirect` where it names their cgroup file.
pub fn on_cpus(tasks: &[KeptTask], redirect: HashMap<String, String>) -> KeepOnCpus {
    KeepOnCpus {
        processes: tasks.iter().map(|t| t.pid).collect(),
        threads: tasks.iter().map(|t| (t.tid, t.cpus.clone())).collect(),
        redirect,
    }
}

/// The kept tasks as they read back after the undo, with the affinity the
/// journal recorded for each before (`before`).
pub fn as_read(sys: &Sys, tasks: &[KeptTask], before: &HashMap<i32, CpuSet>) -> Vec<KeptRealtime> {
    tasks
        .iter()
        .map(|t| {
            let now = sys.affinity(t.tid);
            KeptRealtime {
                pid: t.pid,
                tid: t.tid,
                name: t.name.clone(),
                scheduling: t.scheduling.clone(),
                exited: now.is_err(),
                cpus: now.unwrap_or_else(|_| t.cpus.clone()),
                before: before.get(&t.tid).cloned(),
            }
        })
        .collect()
}
