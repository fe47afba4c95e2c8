//! What the user should know about a shield, as data: each note names its
//! kind and carries the CPUs, IRQs, processes, files and names it is about.
//! The sentences people read are made from them in `report`.

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;

/// One thing the user should know about a shield planned, applied or read
/// back. Serialised as `{"kind": "...", ...}` with the fields below.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Note {
    // The request.
    /// Hyper-thread sibling groups that the shield splits (allowed by the
    /// request): their unshielded siblings share a core with the shield.
    SplitSiblings {
        /// Each sibling group the shield splits.
        groups: Vec<CpuSet>,
    },

    // A change in place.
    /// The active shield was changed in place and stayed up throughout.
    ShieldChangedInPlace {
        /// The shield before.
        from: CpuSet,
        /// The shield after.
        to: CpuSet,
    },

    // Other owners.
    /// A running tuned profile pins CPUs or IRQs and may undo the shield
    /// when it re-applies.
    TunedPins {
        /// The active profile (`/etc/tuned/active_profile`).
        profile: String,
        /// What in it pins CPUs or IRQs.
        pins: Vec<String>,
    },
    /// A running tuned profile (or one it includes) sets what cpushield
    /// sets too: each is owned twice.
    TunedOverlaps {
        /// The active profile.
        profile: String,
        /// The profiles read, includes first.
        chain: Vec<String>,
        /// Each setting, its profile and what of cpushield's it overlaps.
        settings: Vec<String>,
    },

    /// A component's own note, worded by the component (see [`OwnNote`]).
    #[serde(untagged)]
    Part(PartNote),
}

/// A note of a component's own, as the engine carries it without knowing
/// it: `{"kind": ..., "component": ..., "text": ..., ...its fields}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartNote {
    /// Its kind, as the component names it (`irqbalance_without_unit`).
    pub kind: String,
    /// The component.
    pub component: String,
    /// What it says, worded by the component.
    pub text: String,
    /// Its own fields.
    #[serde(flatten)]
    pub data: std::collections::BTreeMap<String, serde_json::Value>,
}

/// A component's own note type: serialised with its `kind` (an
/// internally tagged enum), worded by itself.
pub trait OwnNote: Serialize {
    /// The component it is of.
    fn owner(&self) -> super::change::Owner;

    /// What it says, for people.
    fn text(&self) -> String;

    /// The note, as the engine and the reports carry it.
    fn note(&self) -> Note {
        let mut data = match serde_json::to_value(self) {
            Ok(serde_json::Value::Object(map)) => map.into_iter().collect(),
            _ => std::collections::BTreeMap::new(),
        };
        let kind = match data.remove("kind") {
            Some(serde_json::Value::String(kind)) => kind,
            _ => String::new(),
        };
        Note::Part(PartNote {
            kind,
            component: self.owner().name().to_string(),
            text: self.text(),
            data,
        })
    }
}

impl PartNote {
    /// Whether it is `component`'s note of `kind`.
    pub fn is(&self, component: &str, kind: &str) -> bool {
        self.component == component && self.kind == kind
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpus(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    #[test]
    fn a_note_is_json_data_with_its_kind_and_reads_back() {
        let note = Note::ShieldChangedInPlace {
            from: cpus("2-3"),
            to: cpus("3"),
        };
        let json = serde_json::to_value(&note).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"kind": "shield_changed_in_place", "from": "2-3", "to": "3"})
        );
        assert_eq!(serde_json::from_value::<Note>(json).unwrap(), note);
    }

    /// A component's note, as a component would declare it.
    #[derive(Serialize)]
    #[serde(tag = "kind", rename_all = "snake_case")]
    enum Mine {
        SomethingLeft { cpus: CpuSet },
    }

    impl OwnNote for Mine {
        fn owner(&self) -> crate::shield::engine::change::Owner {
            crate::shield::engine::change::Owner("mine")
        }

        fn text(&self) -> String {
            let Mine::SomethingLeft { cpus } = self;
            format!("left CPUs {cpus}")
        }
    }

    #[test]
    fn a_components_note_keeps_its_kind_and_fields_beside_its_component_and_text() {
        let note = Mine::SomethingLeft { cpus: cpus("2-3") }.note();
        let json = serde_json::to_value(&note).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"kind": "something_left", "component": "mine",
                "text": "left CPUs 2-3", "cpus": "2-3"})
        );
        let back: Note = serde_json::from_value(json).unwrap();
        assert_eq!(back, note);
        let Note::Part(part) = back else {
            panic!("not a component's note: {back:?}");
        };
        assert!(part.is("mine", "something_left"));
        // An engine note is still read as itself, not as a component's.
        let engine =
            serde_json::json!({"kind": "shield_changed_in_place", "from": "2-3", "to": "3"});
        assert_eq!(
            serde_json::from_value::<Note>(engine).unwrap(),
            Note::ShieldChangedInPlace {
                from: cpus("2-3"),
                to: cpus("3")
            }
        );
    }
}
