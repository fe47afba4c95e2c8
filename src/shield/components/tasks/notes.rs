//! The tasks' own notes, worded by themselves.

use serde::{Deserialize, Serialize};

use super::OWNER;
use crate::cpulist::CpuSet;
use crate::shield::change::Owner;
use crate::shield::note::OwnNote;
use crate::shield::snapshot::SHIELD_SLICE;

/// What the user should know of the threads a shield moves or keeps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TasksNote {
    /// Tasks kept on the shield leave their systemd units for scopes of
    /// the shield's slice until `off` puts them back.
    TasksLeaveUnits {
        /// The units they leave (`.service`, `.scope`), sorted.
        units: Vec<String>,
    },
    /// Threads that asked only for shielded CPUs in a process that also
    /// has threads outside the shield (cgroup v2 places whole processes):
    /// moved to the housekeeping CPUs.
    ThreadsSplitOff {
        /// How many threads.
        threads: usize,
    },
    /// Tasks inside the shield whose CPUs all left it in a change in
    /// place: moved out to the housekeeping CPUs.
    TasksLeftShield {
        /// How many tasks.
        tasks: usize,
        /// Where they went.
        housekeeping: CpuSet,
    },
}

impl OwnNote for TasksNote {
    fn owner(&self) -> Owner {
        OWNER
    }

    fn text(&self) -> String {
        match self {
            TasksNote::TasksLeaveUnits { units } => format!(
                "tasks kept on the shield leave their units ({}) for scopes of {SHIELD_SLICE} (cpushield-run-PID.scope): stopping or restarting those units does not reach them, nor does their accounting, until off puts them back",
                crate::escape::terminal(&units.join(", "))
            ),
            TasksNote::ThreadsSplitOff { threads } => format!(
                "{threads} thread(s) asked only for shielded CPUs but their process also has threads outside the shield, and cgroup v2 places whole processes: moved to the housekeeping CPUs (move the whole process in with 'cpushield move PID --in')"
            ),
            TasksNote::TasksLeftShield {
                tasks,
                housekeeping,
            } => format!(
                "{tasks} task(s) inside the shield asked only for CPUs that leave it: moved out to the housekeeping CPUs {housekeeping}"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shield::Note;

    #[test]
    fn a_tasks_note_keeps_its_kind_and_fields_and_says_itself() {
        let note = TasksNote::TasksLeaveUnits {
            units: vec!["a.service".into(), "rt.service".into()],
        };
        assert_eq!(
            note.text(),
            "tasks kept on the shield leave their units (a.service, rt.service) for scopes of cpushield.slice (cpushield-run-PID.scope): stopping or restarting those units does not reach them, nor does their accounting, until off puts them back"
        );
        let Note::Part(part) = note.note() else {
            panic!("a component's note");
        };
        assert!(part.is("tasks", "tasks_leave_units"));
        assert_eq!(
            part.data["units"],
            serde_json::json!(["a.service", "rt.service"])
        );
        let json = serde_json::to_value(TasksNote::TasksLeftShield {
            tasks: 2,
            housekeeping: CpuSet::parse_list("0-1").unwrap(),
        })
        .unwrap();
        assert_eq!(json["kind"], "tasks_left_shield");
        assert_eq!(json["housekeeping"], "0-1");
    }
}
