//! A memory bandwidth as people give it, and as each machine's `MB`
//! resource takes it: a percentage (Intel MBA), a multiple of 1/8 GB/s
//! (AMD), MiB/s (resctrl mounted with `mba_MBps`).

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{MbInfo, MbUnit};

/// Bytes a second in one GB/s, MB/s, GiB/s and MiB/s.
const UNITS: [(&str, f64); 5] = [
    ("GiB/s", 1_073_741_824.0),
    ("MiB/s", 1_048_576.0),
    ("GB/s", 1e9),
    ("MB/s", 1e6),
    ("B/s", 1.0),
];

/// AMD's step: 1/8 GB/s, in bytes a second; 2048 steps is no limit.
const AMD_STEP: u64 = 125_000_000;
const AMD_STEPS: u64 = 2048;

/// A memory bandwidth: a percentage of the machine's (`50`, `50%`) or a
/// rate (`6GB/s`, `4000MiB/s`). A percentage is kept as a number (as
/// requests and journals before rates were), a rate as its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Written", into = "Written")]
pub enum Bandwidth {
    /// Percent of the bandwidth.
    Percent(u32),
    /// Bytes a second.
    Rate(u64),
}

/// How a bandwidth is written in JSON and TOML: a number is a percentage.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Written {
    Number(u32),
    Text(String),
}

impl TryFrom<Written> for Bandwidth {
    type Error = String;
    fn try_from(w: Written) -> Result<Self, String> {
        match w {
            Written::Number(n) => Ok(Bandwidth::Percent(n)),
            Written::Text(t) => t.parse(),
        }
    }
}

impl From<Bandwidth> for Written {
    fn from(b: Bandwidth) -> Written {
        match b {
            Bandwidth::Percent(p) => Written::Number(p),
            Bandwidth::Rate(_) => Written::Text(b.to_string()),
        }
    }
}

impl std::str::FromStr for Bandwidth {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let text = s.trim();
        let invalid = || {
            format!(
                "{s:?}: not a bandwidth: a percentage (50 or 50%) or a rate (6GB/s, 4000MiB/s; \
                 units GB/s, MB/s, GiB/s, MiB/s, B/s)"
            )
        };
        let percent = text.strip_suffix('%').unwrap_or(text).trim();
        if let Ok(p) = percent.parse::<u32>() {
            return Ok(Bandwidth::Percent(p));
        }
        let (number, scale) = UNITS
            .iter()
            .find_map(|(unit, scale)| text.strip_suffix(unit).map(|n| (n.trim(), *scale)))
            .ok_or_else(invalid)?;
        let value: f64 = number.parse().map_err(|_| invalid())?;
        let bytes = value * scale;
        if !bytes.is_finite() || bytes < 1.0 || bytes > u64::MAX as f64 {
            return Err(invalid());
        }
        Ok(Bandwidth::Rate(bytes as u64))
    }
}

impl fmt::Display for Bandwidth {
    /// A percentage as the bare number, a rate in the largest unit that
    /// divides it.
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match *self {
            Bandwidth::Percent(p) => write!(f, "{p}"),
            Bandwidth::Rate(bytes) => {
                let (unit, scale) = UNITS
                    .iter()
                    .find(|(_, scale)| bytes % (*scale as u64) == 0)
                    .copied()
                    .unwrap_or(("B/s", 1.0));
                write!(f, "{}{unit}", bytes / scale as u64)
            }
        }
    }
}

impl Bandwidth {
    /// Why a bandwidth so written cannot go to a machine whose `MB`
    /// resource takes `unit`, with what would be valid there.
    pub fn unit_refusal(self, unit: MbUnit) -> Option<String> {
        match (self, unit) {
            (Bandwidth::Percent(_), MbUnit::Percent) => None,
            (Bandwidth::Rate(_), MbUnit::EighthGbps | MbUnit::MiBps) => None,
            (Bandwidth::Rate(_), MbUnit::Percent) => Some(format!(
                "{self}: this machine's memory bandwidth allocation takes a percentage (Intel \
                 MBA), not a rate: give 10 to 100"
            )),
            (Bandwidth::Percent(p), MbUnit::EighthGbps) => Some(format!(
                "{p}: on AMD resctrl takes memory bandwidth in {}, not a percentage: give a rate \
                 from 0.125GB/s to 256GB/s",
                unit.name()
            )),
            (Bandwidth::Percent(p), MbUnit::MiBps) => Some(format!(
                "{p}: this resctrl takes memory bandwidth in {}, not a percentage: give a rate \
                 such as 4000MiB/s",
                unit.name()
            )),
        }
    }
}

impl MbInfo {
    /// What to write for `bw` in this resource's unit: a percentage rounded
    /// as the kernel keeps it, a rate in 1/8 GB/s steps (at least one, at
    /// most 2048) or in MiB/s (at least one); `None` in the wrong unit
    /// (see [`Bandwidth::unit_refusal`]).
    pub fn value(&self, bw: Bandwidth) -> Option<u64> {
        match (bw, self.unit) {
            (Bandwidth::Percent(p), MbUnit::Percent) => Some(u64::from(self.rounded(p))),
            (Bandwidth::Rate(b), MbUnit::EighthGbps) => Some((b / AMD_STEP).clamp(1, AMD_STEPS)),
            (Bandwidth::Rate(b), MbUnit::MiBps) => Some((b >> 20).max(1)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidths_parse_as_percentages_or_rates_and_print_back() {
        let parse = |s: &str| s.parse::<Bandwidth>();
        assert_eq!(parse("50"), Ok(Bandwidth::Percent(50)));
        assert_eq!(parse("50%"), Ok(Bandwidth::Percent(50)));
        assert_eq!(parse("6GB/s"), Ok(Bandwidth::Rate(6_000_000_000)));
        assert_eq!(parse("6.25 GB/s"), Ok(Bandwidth::Rate(6_250_000_000)));
        assert_eq!(parse("4000MiB/s"), Ok(Bandwidth::Rate(4000 << 20)));
        assert!(parse("fast").unwrap_err().contains("not a bandwidth"));
        assert!(parse("0GB/s").is_err());
        assert_eq!(Bandwidth::Rate(6_000_000_000).to_string(), "6GB/s");
        assert_eq!(Bandwidth::Rate(4000 << 20).to_string(), "4000MiB/s");
        assert_eq!(Bandwidth::Percent(50).to_string(), "50");
        // A number in JSON is a percentage (journals before rates), a rate
        // is its text.
        let b: Bandwidth = serde_json::from_str("50").unwrap();
        assert_eq!(b, Bandwidth::Percent(50));
        let r = serde_json::to_string(&Bandwidth::Rate(6_000_000_000)).unwrap();
        assert_eq!(r, "\"6GB/s\"");
        assert_eq!(
            serde_json::from_str::<Bandwidth>(&r).unwrap(),
            Bandwidth::Rate(6_000_000_000)
        );
    }

    #[test]
    fn each_unit_takes_its_own_kind_of_bandwidth() {
        let mb = |unit| MbInfo {
            min_bandwidth: 10,
            bandwidth_gran: 10,
            num_closids: 8,
            unit,
        };
        let gb = |g: u64| Bandwidth::Rate(g * 1_000_000_000);
        assert_eq!(mb(MbUnit::Percent).value(Bandwidth::Percent(55)), Some(60));
        assert_eq!(mb(MbUnit::Percent).value(gb(6)), None);
        assert!(gb(6).unit_refusal(MbUnit::Percent).is_some());
        assert_eq!(mb(MbUnit::EighthGbps).value(gb(6)), Some(48));
        assert_eq!(mb(MbUnit::EighthGbps).value(gb(1000)), Some(2048));
        assert!(Bandwidth::Percent(50)
            .unit_refusal(MbUnit::EighthGbps)
            .is_some());
        let mib = Bandwidth::Rate(4000 << 20);
        assert_eq!(mb(MbUnit::MiBps).value(mib), Some(4000));
        assert!(mib.unit_refusal(MbUnit::MiBps).is_none());
        assert!(Bandwidth::Percent(50).unit_refusal(MbUnit::MiBps).is_some());
    }
}
