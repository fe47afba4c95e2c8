//! What one CPU measured, as a verdict reads it: the histogram, the
//! largest sample of each second, and the deadlines the probe skipped.

use serde::{Deserialize, Serialize};

/// How late the deadlines a probe skipped were.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Skipped {
    /// The timer probe: after a wake-up `L` late it skips the deadlines
    /// that passed meanwhile, the `j`-th of them `L − j·interval` late
    /// (cyclictest's loop). Exact from the histogram.
    AfterLateSample,
    /// The periodic and RTC probes: a skipped period or missed interrupt
    /// is at least one period late; how much more is not known.
    #[default]
    AtLeastOnePeriod,
}

/// What one CPU measured, as the histogram holds it: bucket `i` counts the
/// samples in `[i·w, (i+1)·w)` ns, `overflows` those at or past the last.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuTail {
    /// The CPU.
    pub cpu: u32,
    /// Bucket width `w`, ns.
    pub width_ns: u64,
    /// Number of buckets of the histogram (`counts` may omit trailing zeros).
    pub buckets: usize,
    /// The bucket counts.
    pub counts: Vec<u64>,
    /// Samples at or past `buckets·w`.
    pub overflows: u64,
    /// All samples.
    pub samples: u64,
    /// The largest sample, ns (exact).
    pub max_ns: u64,
    /// The largest sample of each whole second, ns, in time order.
    #[serde(default)]
    pub per_second_max_ns: Vec<u64>,
    /// How long the run lasted, seconds.
    #[serde(default)]
    pub elapsed_s: f64,
    /// Deadlines the probe skipped after a late wake-up (timer, periodic)
    /// or RTC interrupts it missed: each one late too.
    #[serde(default)]
    pub missed: u64,
    /// The probe's period, ns (`None`: not periodic, or not known).
    #[serde(default)]
    pub interval_ns: Option<u64>,
    /// How late the skipped deadlines were.
    #[serde(default)]
    pub skipped: Skipped,
}

impl CpuTail {
    /// How many samples exceed `bound_ns`: (at least, at most). A bucket
    /// straddling the bound, and overflows when the bound lies past the
    /// histogram, may hold samples on either side.
    pub fn exceedances(&self, bound_ns: u64) -> (u64, u64) {
        let w = self.width_ns.max(1);
        let (mut low, mut high) = (0u64, 0u64);
        for (i, &c) in self.counts.iter().enumerate() {
            let start = (i as u64).saturating_mul(w);
            if start > bound_ns {
                low = low.saturating_add(c);
                high = high.saturating_add(c);
            } else if start.saturating_add(w - 1) > bound_ns {
                high = high.saturating_add(c);
            }
        }
        let range_end = (self.buckets as u64).saturating_mul(w);
        if range_end > bound_ns {
            low = low.saturating_add(self.overflows);
        }
        high = high.saturating_add(self.overflows);
        if self.max_ns > bound_ns {
            low = low.max(1);
        }
        (low, high)
    }
}
