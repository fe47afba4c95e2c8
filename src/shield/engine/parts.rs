//! What the engine carries of a component without knowing it: the facts
//! it reads for itself and the record it keeps in the plan ([`OwnFacts`]),
//! and what it says of itself in a report ([`PartReport`]).

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::finding::Finding;

/// The facts components read for themselves, each its own serialisable
/// type under the component's name: the engine and the snapshot carry them
/// without knowing them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnFacts(BTreeMap<String, serde_json::Value>);

impl OwnFacts {
    /// Keeps `facts` as `component`'s.
    pub fn put<T: Serialize>(&mut self, component: &str, facts: &T) {
        if let Ok(value) = serde_json::to_value(facts) {
            self.0.insert(component.to_string(), value);
        }
    }

    /// Whether no component kept anything.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Takes what `other` holds, each component's over its own here.
    pub fn extend(&mut self, other: OwnFacts) {
        self.0.extend(other.0);
    }

    /// `component`'s facts, when it read any.
    pub fn get<T: DeserializeOwned>(&self, component: &str) -> Option<T> {
        let value = self.0.get(component)?;
        serde_json::from_value(value.clone()).ok()
    }
}

/// What a component says of itself in `on`'s report or in `status`: lines
/// for people, its own data for `--json`, and for `status` what no longer
/// holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartReport {
    /// The component's name.
    pub component: String,
    /// What it did or found, read back, a labelled line each, for people.
    pub lines: Vec<Line>,
    /// The same as data (the component's own type, serialised).
    pub data: serde_json::Value,
    /// What no longer holds (`status` only).
    #[serde(default)]
    pub findings: Vec<Finding>,
    /// What it exports through `metrics` (`status` only; not in `--json`,
    /// whose `data` carries the same).
    #[serde(skip)]
    pub metrics: Vec<Metric>,
    /// Lines printed below every component's rows (its tables: the
    /// threads, the IRQs); not in `--json`, whose `data` carries the same.
    #[serde(skip)]
    pub details: Vec<String>,
}

impl PartReport {
    /// `component`'s report of `data`, with no line, finding, metric or
    /// detail yet.
    pub fn new(component: &str, data: &impl Serialize) -> PartReport {
        PartReport {
            component: component.to_string(),
            lines: Vec::new(),
            data: serde_json::to_value(data).unwrap_or_default(),
            findings: Vec::new(),
            metrics: Vec::new(),
            details: Vec::new(),
        }
    }
}

/// A line of what a component says of itself, for people: `status` and
/// `on` print its label in the left column (an empty label continues the
/// row above) and its text beside it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Line {
    /// What the line is about, or empty (`null` in JSON).
    #[serde(with = "crate::json_null::text")]
    pub label: String,
    /// What it says.
    pub text: String,
}

impl Line {
    /// A line of `text` labelled `label`.
    pub fn new(label: impl Into<String>, text: impl Into<String>) -> Line {
        Line {
            label: label.into(),
            text: text.into(),
        }
    }

    /// `texts` as one row labelled `label`: the label beside the first.
    pub fn under(label: &str, texts: Vec<String>) -> Vec<Line> {
        (texts.into_iter().enumerate())
            .map(|(i, text)| Line::new(if i == 0 { label } else { "" }, text))
            .collect()
    }
}

/// A metric a component exports through `metrics` (Prometheus' text
/// format), named after `cpushield_`.
#[derive(Debug, Clone, PartialEq)]
pub struct Metric {
    /// Its name after `cpushield_`.
    pub name: &'static str,
    /// `gauge` or `counter`.
    pub kind: &'static str,
    /// Its HELP text.
    pub help: &'static str,
    /// Its samples: their labels (name, value) and value.
    pub samples: Vec<(Vec<(&'static str, String)>, f64)>,
}

/// A change `on` makes beyond the shielded CPUs and their cgroups, to the
/// whole machine, with how to do without it: `--dry-run` and the report
/// list every one, so that nothing machine-wide happens unseen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineWide {
    /// The component that makes it.
    pub component: String,
    /// What changes.
    pub what: String,
    /// How to do without it (the option, or what to do instead).
    pub without: String,
}
