//! What is wrong, or fine, on a machine: the one type that `status`,
//! `verify`, `audit` and `metrics` report. Each of them reads its facts
//! first and judges them with pure rules that return [`Finding`]s; the
//! reports render them, and `metrics` exports them as labelled gauges.

use serde::{Deserialize, Serialize};

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Noise reaches the shielded CPUs now, or the shield no longer holds.
    Bad,
    /// Noise may reach them, a setting leaves latency on the table, or the
    /// machine differs from its config.
    Warn,
    /// Fine.
    Ok,
}

impl Severity {
    /// The lower-case name the JSON and the metrics' labels use.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Bad => "bad",
            Severity::Warn => "warn",
            Severity::Ok => "ok",
        }
    }
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// Stable identifier (`partition`, `irqbalance`, `irq-affinity`,
    /// `boot.nohz_full`, `config.cpus`, ...).
    pub id: String,
    /// ok / warn / bad.
    pub severity: Severity,
    /// What was found, with the numbers, as read from the kernel.
    pub reason: String,
    /// The concrete next step: a repair, a kernel argument or a cpushield
    /// command (empty when there is none: `null` in JSON).
    #[serde(serialize_with = "empty_as_null", deserialize_with = "null_as_empty")]
    pub next: String,
    /// Expected impact on latency, 0-100; `audit` sorts by it.
    pub impact: u8,
}

/// An empty text as JSON `null` (absent, not a text that is empty).
fn empty_as_null<S: serde::Serializer>(text: &str, s: S) -> Result<S::Ok, S::Error> {
    match text.is_empty() {
        true => s.serialize_none(),
        false => s.serialize_str(text),
    }
}

/// JSON `null` (or an empty text) as an empty text.
fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

impl Finding {
    /// A finding of `severity`.
    pub fn new(
        id: &str,
        severity: Severity,
        impact: u8,
        reason: impl Into<String>,
        next: impl Into<String>,
    ) -> Self {
        Finding {
            id: id.into(),
            severity,
            reason: reason.into(),
            next: next.into(),
            impact,
        }
    }
}

/// Findings as the rules make them.
#[derive(Debug, Default)]
pub struct Findings(pub Vec<Finding>);

impl Findings {
    /// Adds a finding.
    pub fn add(&mut self, id: &str, severity: Severity, impact: u8, reason: String, next: String) {
        self.0
            .push(Finding::new(id, severity, impact, reason, next));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finding_without_a_next_step_says_null_and_reads_back() {
        let none = Finding::new("partition", Severity::Ok, 90, "holds", "");
        let json = serde_json::to_value(&none).unwrap();
        assert_eq!(json["next"], serde_json::Value::Null);
        assert_eq!(serde_json::from_value::<Finding>(json).unwrap(), none);
        let some = Finding::new(
            "irqs",
            Severity::Bad,
            80,
            "IRQ 5 on CPU 2",
            "cpushield on 2",
        );
        let json = serde_json::to_value(&some).unwrap();
        assert_eq!(json["next"], "cpushield on 2");
        assert_eq!(serde_json::from_value::<Finding>(json).unwrap(), some);
        // A report of schema 1 (next "") still reads.
        let old = r#"{"id":"x","severity":"ok","reason":"r","next":"","impact":1}"#;
        assert_eq!(serde_json::from_str::<Finding>(old).unwrap().next, "");
    }

    #[test]
    fn severity_orders_worst_first() {
        let mut v = [Severity::Ok, Severity::Bad, Severity::Warn];
        v.sort();
        assert_eq!(v, [Severity::Bad, Severity::Warn, Severity::Ok]);
    }

    #[test]
    fn a_finding_round_trips_through_json_with_its_severity_by_name() {
        let f = Finding::new(
            "partition",
            Severity::Bad,
            90,
            "reads invalid",
            "cpushield on 2-3",
        );
        let v = serde_json::to_value(&f).unwrap();
        assert_eq!(v["severity"], Severity::Bad.name());
        assert_eq!(v["id"], "partition");
        let back: Finding = serde_json::from_value(v).unwrap();
        assert_eq!(back, f);
    }
}
