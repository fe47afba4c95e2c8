//! The vocabulary of changes: what a shield writes to the kernel, how each
//! write is read back, and how it is undone. The plan, the knobs and the
//! reshape produce [`Step`]s; the journal records [`Action`]s; apply and
//! undo carry them out. A leaf: it depends on nothing of the shield.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;
use crate::escape::terminal;
use crate::sys::procfs::Thread;
use crate::sys::systemd::SystemdCall;

/// How a write is checked by reading back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    /// Nothing to read back (task moves, controller switches).
    None,
    /// The file must read back as the same CPU list.
    CpuList,
    /// The file must read back as the same hex mask.
    CpuMask,
    /// The file must read back as the same text (trimmed).
    Text,
    /// A partition type: must not read back `... invalid (reason)`.
    Partition,
    /// A sysfs choice file (`always [madvise] never`): reads back as the
    /// word in brackets, and undo writes back the word that was in
    /// brackets before.
    Choice,
}

/// What to write back on undo.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Undo {
    /// The value read just before the write.
    Previous,
    /// A fixed value (e.g. `-cpuset` for `+cpuset`).
    Value(String),
    /// Nothing: the object goes away with its cgroup.
    Nothing,
}

/// One change to the kernel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// Mount the cgroup v2 hierarchy (none with cpuset was mounted).
    /// Undone by unmounting it, only while it is the one mount at `target`
    /// and nothing is mounted below it.
    MountCgroup2 {
        /// Mount point relative to the root.
        target: String,
        /// Make the directory first (and remove it on undo).
        make_dir: bool,
    },
    /// Create a cgroup directory; undone by removing it.
    Mkdir {
        /// Path relative to the root.
        path: String,
    },
    /// Write a value to a kernel file.
    Write {
        /// Path relative to the root.
        path: String,
        /// Value written.
        value: String,
        /// How to read back.
        check: Check,
        /// What undo writes.
        undo: Undo,
    },
    /// Move a thread (v1 `tasks`) or a whole process (`cgroup.procs`) to another cgroup.
    MoveTask {
        /// Process id.
        pid: i32,
        /// Thread id (equal to pid for a whole process).
        tid: i32,
        /// The file written to move it (`.../tasks` or `.../cgroup.procs`).
        to: String,
        /// The file that moves it back on undo.
        back: String,
        /// Affinity of each moved thread before the move (the kernel resets it).
        affinities: Vec<(i32, CpuSet)>,
    },
    /// Record the affinity of every thread; changes nothing. Undo puts each
    /// back, because some kernels (6.1) reset the affinity of every task in
    /// a cpuset when the cpuset or a partition beside it changes.
    Remember {
        /// (tid, affinity) of every thread at snapshot time.
        affinities: Vec<(i32, CpuSet)>,
    },
    /// A request to systemd (see [`SystemdCall`]), undone by `undo`. When
    /// `back` is set, undo first moves the processes still in the unit's
    /// cgroup there (a scope of `run` or `move`: its processes outlive it).
    Systemd {
        /// The request.
        call: SystemdCall,
        /// The request that undoes it.
        undo: Option<SystemdCall>,
        /// `cgroup.procs` the unit's processes go back to before `undo`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        back: Option<String>,
    },
    /// A change only its component knows how to make and undo (irqbalance's
    /// ban, resctrl's mount and shares, the starvation guard): the
    /// component's own action, which it serialises and reads itself.
    /// Journals of version 1 wrote these at the top level of an entry,
    /// under their own `action` tag; the journal reads them into this.
    Own {
        /// The component (its [`Owner::name`]; empty for an entry of a
        /// version 1 journal, whose component knows it by its tag).
        owner: String,
        /// The component's own action, with its own `action` tag.
        payload: Payload,
    },
    /// Set one thread's scheduling policy and priority (`sched_setattr`),
    /// read back; undone by putting back what the journal read just before
    /// (a component that raises kernel threads plans it).
    SetScheduler {
        /// Process id.
        pid: i32,
        /// Thread id.
        tid: i32,
        /// Command name, for reports.
        name: String,
        /// The policy (`SCHED_FIFO` 1, `SCHED_DEADLINE` 6).
        policy: u32,
        /// The real-time priority (SCHED_FIFO).
        priority: u32,
        /// SCHED_DEADLINE's reservation: (runtime, period) in ns, the
        /// deadline equal to the period.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reservation: Option<(u64, u64)>,
    },
    /// Change one thread's affinity.
    SetAffinity {
        /// Process id.
        pid: i32,
        /// Thread id.
        tid: i32,
        /// Command name, for reports.
        name: String,
        /// New affinity.
        cpus: CpuSet,
        /// Affinity before.
        previous: CpuSet,
    },
}

/// A component's own action as data: JSON, made and read by the component
/// alone (see [`Action::own`] and [`Action::own_as`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Payload(pub serde_json::Value);

// A payload is a serialised action of our own: no floating-point NaN.
impl Eq for Payload {}

impl Action {
    /// `owner`'s own action `payload`, serialised (it carries its own
    /// `action` tag).
    pub fn own<T: Serialize>(owner: Owner, payload: &T) -> Action {
        Action::Own {
            owner: owner.name().to_string(),
            payload: Payload(serde_json::to_value(payload).unwrap_or_default()),
        }
    }

    /// The component's own action of type `T`, when this is one (an entry
    /// of a version 1 journal is known by its tag alone).
    pub fn own_as<T: DeserializeOwned>(&self) -> Option<T> {
        match self {
            Action::Own { payload, .. } => serde_json::from_value(payload.0.clone()).ok(),
            _ => None,
        }
    }
}

/// The component of the shield that plans a step and reports what became
/// of it (ARCHITECTURE.md, "The shield's components"): its name, which
/// each component gives itself (its `OWNER`), and the journal records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Owner(pub &'static str);

impl Owner {
    /// The engine itself, for a step no component claims.
    pub const SHIELD: Owner = Owner("shield");

    /// Its name, in the journal and in reports.
    pub fn name(self) -> &'static str {
        self.0
    }
}

/// What one step changes, typed: what its component reports on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Subject {
    /// The component's own object: a cgroup, a unit, a daemon's ban, a record.
    Own,
    /// One IRQ's affinity.
    Irq(u32),
    /// The cgroup of a thread (or of its whole process).
    TaskCgroup(i32),
    /// One thread's affinity.
    TaskAffinity(i32),
    /// One thread's scheduling policy and priority.
    TaskScheduling(i32),
    /// A kernel file, relative to the root.
    File(String),
}

impl Subject {
    /// What `action` is about, as far as the action itself says (an IRQ's
    /// file is a file until its component says which IRQ: [`Step::on_irq`]).
    pub fn of(action: &Action) -> Subject {
        match action {
            Action::Write { path, .. } => Subject::File(path.clone()),
            Action::MoveTask { tid, .. } => Subject::TaskCgroup(*tid),
            Action::SetAffinity { tid, .. } => Subject::TaskAffinity(*tid),
            Action::SetScheduler { tid, .. } => Subject::TaskScheduling(*tid),
            Action::MountCgroup2 { .. }
            | Action::Mkdir { .. }
            | Action::Remember { .. }
            | Action::Systemd { .. }
            | Action::Own { .. } => Subject::Own,
        }
    }

    /// A change to one thread (its cgroup, affinity or scheduling).
    pub fn is_task(&self) -> bool {
        matches!(
            self,
            Subject::TaskCgroup(_) | Subject::TaskAffinity(_) | Subject::TaskScheduling(_)
        )
    }
}

/// A planned change, the component it belongs to, what it is about, and
/// whether its failure aborts the shield. Only the action and `fatal` are
/// printed with `--dry-run --json`; the journal records the action alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Step {
    /// The change.
    #[serde(flatten)]
    pub action: Action,
    /// A failure of a fatal step rolls everything back; others are reported.
    pub fatal: bool,
    /// The component that planned it.
    #[serde(skip)]
    pub owner: Owner,
    /// What it changes.
    #[serde(skip)]
    pub subject: Subject,
}

impl Step {
    /// A step of `owner` whose failure the shield lives with (reported).
    pub fn optional(owner: Owner, action: Action) -> Step {
        Step {
            subject: Subject::of(&action),
            action,
            fatal: false,
            owner,
        }
    }

    /// A step of `owner` whose failure rolls the whole change back.
    pub fn fatal(owner: Owner, action: Action) -> Step {
        Step {
            fatal: true,
            ..Step::optional(owner, action)
        }
    }

    /// The IRQ the step is about, if any.
    pub fn irq(&self) -> Option<u32> {
        match self.subject {
            Subject::Irq(irq) => Some(irq),
            _ => None,
        }
    }

    /// The same step, about IRQ `irq`.
    pub fn on_irq(self, irq: u32) -> Step {
        Step {
            subject: Subject::Irq(irq),
            ..self
        }
    }
}

/// A step the kernel refused: its component and subject, and the refusal
/// as reports print it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The component whose step it was.
    pub owner: Owner,
    /// What the step changes.
    pub subject: Subject,
    /// What the report says.
    pub refusal: Refusal,
}

/// A change the kernel did not make, with the reason.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Refusal {
    /// What was targeted: a path, or `task N (name)`.
    pub target: String,
    /// The errno name or the read-back that did not match.
    pub reason: String,
}

impl Refusal {
    /// A table of `list` under `title`, for people (none when `list` is
    /// empty); each target (a thread's name, a cgroup's path: from outside)
    /// escaped for the terminal.
    pub fn table(title: &str, list: &[Refusal]) -> Vec<String> {
        if list.is_empty() {
            return Vec::new();
        }
        let rows = (list.iter()).map(|r| format!("    {:<28} {}", terminal(&r.target), r.reason));
        std::iter::once(format!("  {title} ({}):", list.len()))
            .chain(rows)
            .collect()
    }
}

/// What undo did.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Undone {
    /// Values written back, cgroups removed, tasks moved back.
    pub restored: usize,
    /// Things already as they were (never changed, or changed back by the kernel).
    pub unchanged: usize,
    /// Tasks that exited meanwhile (not an error).
    pub exited: usize,
    /// What could not be restored.
    pub failed: Vec<Refusal>,
    /// Thread ids left alone: each now names a thread started after the
    /// change was journaled (the recorded thread exited, its id was reused).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recycled: Vec<i32>,
    /// What the shield made but leaves, because others came to use it
    /// since (a resctrl mount that now holds other programs' groups):
    /// undoing it would destroy their work. Not an error.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_in_use: Vec<Refusal>,
}

impl Undone {
    /// Adds what another part of the undo did.
    pub fn add(&mut self, other: Undone) {
        self.restored += other.restored;
        self.unchanged += other.unchanged;
        self.exited += other.exited;
        self.failed.extend(other.failed);
        self.recycled.extend(other.recycled);
        self.left_in_use.extend(other.left_in_use);
    }
}

/// A task named in a plan or a report: its ids, its name and its
/// affinity as read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRef {
    /// Process id.
    pub pid: i32,
    /// Thread id.
    pub tid: i32,
    /// Command name.
    pub name: String,
    /// Affinity.
    pub cpus: CpuSet,
}

impl From<&Thread> for TaskRef {
    fn from(t: &Thread) -> Self {
        TaskRef {
            pid: t.pid,
            tid: t.tid,
            name: t.name.clone(),
            cpus: t.cpus_allowed.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_table_is_its_title_and_a_row_each_and_nothing_when_empty() {
        assert!(Refusal::table("refused", &[]).is_empty());
        let list = [Refusal {
            target: "task 42 (poller)".into(),
            reason: "EPERM".into(),
        }];
        assert_eq!(
            Refusal::table("task changes refused", &list),
            [
                "  task changes refused (1):".to_string(),
                format!("    {:<28} EPERM", "task 42 (poller)"),
            ]
        );
    }
}
