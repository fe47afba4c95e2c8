//! What the knobs tell the user of the files they left alone, worded here.

use serde::{Deserialize, Serialize};

use super::OWNER;
use crate::shield::change::Owner;
use crate::shield::note::OwnNote;

/// The knobs' own notes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TuneNote {
    /// A knob with no files on this machine: skipped.
    TuneNothingToTune {
        /// The knob.
        knob: String,
    },
    /// Files of a knob that do not exist here: skipped.
    TuneMissing {
        /// The knob.
        knob: String,
        /// The files, relative to the root.
        files: Vec<String>,
    },
    /// Files of a knob that cannot be written: not set.
    TuneReadOnly {
        /// The knob.
        knob: String,
        /// The files, relative to the root.
        files: Vec<String>,
    },
    /// Files of a knob that could not be read, or read as something the
    /// knob does not understand: not set.
    TuneUnreadable {
        /// The knob.
        knob: String,
        /// The files and why each is unreadable.
        files: Vec<UnreadableFile>,
    },
}

/// A knob's file left alone because it could not be read or understood.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnreadableFile {
    /// The file, relative to the root.
    pub path: String,
    /// Why.
    pub reason: Unreadable,
}

/// Why a knob's file could not be used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Unreadable {
    /// Reading it failed.
    ReadFailed {
        /// The error's errno name (`EIO`, ...).
        errno: String,
    },
    /// It holds something other than the CPU mask the knob expects.
    NotAMask {
        /// What it holds.
        content: String,
    },
    /// It holds something other than the number the knob expects.
    NotANumber {
        /// What it holds.
        content: String,
    },
}

impl OwnNote for TuneNote {
    fn owner(&self) -> Owner {
        OWNER
    }

    fn text(&self) -> String {
        let paths = |files: &[String]| {
            (files.iter().map(|f| format!("/{f}")))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            TuneNote::TuneNothingToTune { knob } => {
                format!("tune {knob}: nothing to tune here (no such files); skipped")
            }
            TuneNote::TuneMissing { knob, files } => format!(
                "tune {knob}: {} missing (not supported here); skipped",
                paths(files)
            ),
            TuneNote::TuneReadOnly { knob, files } => {
                format!("tune {knob}: {} read-only; not set", paths(files))
            }
            TuneNote::TuneUnreadable { knob, files } => format!(
                "tune {knob}: {} unreadable; not set",
                (files.iter().map(unreadable_file))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// `/PATH (EIO)`, `/PATH (not a mask: "...")`.
fn unreadable_file(f: &UnreadableFile) -> String {
    let path = &f.path;
    match &f.reason {
        Unreadable::ReadFailed { errno } => format!("/{path} ({errno})"),
        Unreadable::NotAMask { content } => format!("/{path} (not a mask: {content:?})"),
        Unreadable::NotANumber { content } => format!("/{path} (not a number: {content:?})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shield::note::Note;

    #[test]
    fn the_files_left_alone_are_named_with_why() {
        let missing = TuneNote::TuneMissing {
            knob: "machinecheck".into(),
            files: vec![
                "sys/devices/system/machinecheck/machinecheck2/check_interval".into(),
                "sys/devices/system/machinecheck/machinecheck3/check_interval".into(),
            ],
        };
        assert_eq!(
            crate::report::note::text(&missing.note()),
            "tune machinecheck: /sys/devices/system/machinecheck/machinecheck2/check_interval, /sys/devices/system/machinecheck/machinecheck3/check_interval missing (not supported here); skipped"
        );
        let unreadable = TuneNote::TuneUnreadable {
            knob: "net-queues".into(),
            files: vec![
                UnreadableFile {
                    path: "sys/class/net/eth0/queues/rx-0/rps_cpus".into(),
                    reason: Unreadable::ReadFailed {
                        errno: "EIO".into(),
                    },
                },
                UnreadableFile {
                    path: "sys/class/net/eth0/queues/tx-0/xps_cpus".into(),
                    reason: Unreadable::NotAMask {
                        content: "zz".into(),
                    },
                },
            ],
        };
        assert_eq!(
            unreadable.text(),
            "tune net-queues: /sys/class/net/eth0/queues/rx-0/rps_cpus (EIO), /sys/class/net/eth0/queues/tx-0/xps_cpus (not a mask: \"zz\") unreadable; not set"
        );
        let json = serde_json::to_value(unreadable.note()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "kind": "tune_unreadable",
                "component": "knobs",
                "text": unreadable.text(),
                "knob": "net-queues",
                "files": [
                    {"path": "sys/class/net/eth0/queues/rx-0/rps_cpus",
                     "reason": {"kind": "read_failed", "errno": "EIO"}},
                    {"path": "sys/class/net/eth0/queues/tx-0/xps_cpus",
                     "reason": {"kind": "not_a_mask", "content": "zz"}}
                ]
            })
        );
        assert_eq!(
            serde_json::from_value::<Note>(json).unwrap(),
            unreadable.note()
        );
    }
}
