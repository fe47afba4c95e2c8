//! How long each phase of `on` and `off` took.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Wall-clock time spent in each phase of [`crate::shield::on_timed`] and [`crate::shield::off_timed`]:
/// what `on` and `off` report as `took`, and the scale benchmark prints.
/// In JSON, milliseconds.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Timings {
    /// The whole command (set by [`crate::shield::on`] and [`crate::shield::off`]; the `_timed` forms
    /// leave it to their caller, which times the call itself).
    #[serde(with = "millis")]
    pub total: Duration,
    /// Reading the snapshot (tasks, IRQs, cgroups) before planning.
    #[serde(with = "millis")]
    pub snapshot: Duration,
    /// Planning (pure).
    #[serde(with = "millis")]
    pub plan: Duration,
    /// Writing journal segments and the state record (fsync included).
    #[serde(with = "millis")]
    pub journal: Duration,
    /// Journal segments written.
    pub segments: usize,
    /// Making the planned changes and reading them back (journal and
    /// systemd excluded).
    #[serde(with = "millis")]
    pub apply: Duration,
    /// Waiting for systemd: transient units started and stopped,
    /// irqbalance restarted (`on`: within apply; `off`: within undo).
    #[serde(with = "millis", default)]
    pub systemd: Duration,
    /// The sweep for tasks forked meanwhile: snapshot, plan, apply (journal excluded).
    #[serde(with = "millis")]
    pub sweep: Duration,
    /// Reading the journal back for undo.
    #[serde(with = "millis")]
    pub read_journal: Duration,
    /// Undo of writes, cgroups and cgroup moves, in reverse.
    #[serde(with = "millis")]
    pub undo_writes: Duration,
    /// Undo of thread affinities.
    #[serde(with = "millis")]
    pub undo_affinities: Duration,
}

/// Durations as milliseconds (fractional) in JSON.
mod millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64((d.as_secs_f64() * 1e6).round() / 1e3)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let ms = f64::deserialize(d)?;
        Duration::try_from_secs_f64(ms / 1e3).map_err(serde::de::Error::custom)
    }
}
