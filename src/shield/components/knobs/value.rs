//! What a knob writes: its value, as the table gives it, and the value it
//! wants in each file from what the file reads now.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{FileState, Knob, Unreadable};
use crate::cpulist::CpuSet;

/// What a knob writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Value {
    /// A fixed value.
    Const(&'static str),
    /// The housekeeping CPUs as a hex mask.
    HousekeepingMask,
    /// The current hex mask without the shielded CPUs (the housekeeping
    /// CPUs when nothing would remain); left alone when it is 0 (off) or
    /// does not include a shielded CPU.
    MaskAwayFromShield,
    /// What the file of this name in the same directory reads (a CPU's
    /// `scaling_max_freq` for its `scaling_min_freq`); left alone where
    /// that file is missing or unreadable.
    Sibling(&'static str),
    /// Turbo off: `1` in intel_pstate's `no_turbo`, `0` in cpufreq's
    /// `boost` (the two files say it the opposite way round).
    TurboOff,
    /// At least this number: left alone when it is 0 (off) or already as
    /// large (a timeout raised, never lowered nor switched on).
    AtLeast(u64),
}

/// The file named `name` beside `file`.
pub fn sibling_of(file: &str, name: &str) -> String {
    match file.rsplit_once('/') {
        Some((dir, _)) => format!("{dir}/{name}"),
        None => name.to_string(),
    }
}

/// Whether two readings of a file are the same value (as CPU masks, when
/// `mask`).
pub(super) fn same_value(a: &str, b: &str, mask: bool) -> bool {
    if mask {
        CpuSet::parse_mask(a).ok() == CpuSet::parse_mask(b).ok()
    } else {
        a.trim() == b.trim()
    }
}

/// The value knob `k` wants in file `f` (reading `current`), and whether
/// it is a CPU mask; `None` when the file needs no change (a mask already
/// away from the shield); why not when `current` is not what the knob
/// reads.
pub(super) fn wanted(
    (k, f, current): (&Knob, &str, &str),
    files: &BTreeMap<String, FileState>,
    shield: &CpuSet,
    housekeeping: &CpuSet,
    mask_bits: u32,
) -> Result<Option<(String, bool)>, Unreadable> {
    Ok(Some(match k.value {
        Value::Sibling(name) => match files.get(&sibling_of(f, name)) {
            Some(FileState::Present { value, .. }) => (value.clone(), false),
            _ => return Ok(None),
        },
        Value::TurboOff if f.ends_with("/no_turbo") => ("1".to_string(), false),
        Value::TurboOff => ("0".to_string(), false),
        Value::Const(v) if f.ends_with("/numa") => (v.to_string(), false),
        Value::HousekeepingMask if f.ends_with("/numa") => ("0".to_string(), false),
        Value::Const(v) => (v.to_string(), false),
        Value::HousekeepingMask => (housekeeping.to_mask(mask_bits), true),
        Value::MaskAwayFromShield => {
            let cur = CpuSet::parse_mask(current).map_err(|_| Unreadable::NotAMask {
                content: current.to_string(),
            })?;
            if cur.is_empty() || !cur.intersects(shield) {
                return Ok(None);
            }
            let away = match cur.difference(shield) {
                s if s.is_empty() => housekeeping.clone(),
                s => s,
            };
            (away.to_mask(mask_bits), true)
        }
        Value::AtLeast(min) => {
            let cur: u64 = current.trim().parse().map_err(|_| Unreadable::NotANumber {
                content: current.to_string(),
            })?;
            if cur == 0 || cur >= min {
                return Ok(None);
            }
            (min.to_string(), false)
        }
    }))
}

/// `cpushield tune --list`: the value a knob writes, for people.
pub fn describe_value(k: &Knob) -> String {
    match k.value {
        Value::Const(v) => v.to_string(),
        Value::HousekeepingMask => "housekeeping mask (numa: 0)".into(),
        Value::MaskAwayFromShield => "current mask minus shield (0 stays 0)".into(),
        Value::Sibling(name) => format!("its {name}"),
        Value::TurboOff => "turbo off (no_turbo 1, boost 0)".into(),
        Value::AtLeast(min) => format!("at least {min} (0 stays 0)"),
    }
}
