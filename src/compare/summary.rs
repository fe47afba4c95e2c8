//! The numbers of an experiment as the literature shows them: per phase
//! (idle, unshielded, shielded) the samples, min / avg / max / p99 / p99.9
//! latency and the counts over thresholds; and the ratios that say what the
//! shield bought (unshielded/shielded) and how far it is from the machine's
//! limit (shielded/idle). Pure data, no I/O; `report::table` lays them out.

use std::fmt;

use serde::{Deserialize, Serialize, Serializer};

use crate::measure::threads::ThreadsRan;

/// Name of the phase measured with no load: the limit this machine can reach.
pub const IDLE: &str = "idle";

/// Name of the phase measured under load on all CPUs.
pub const UNSHIELDED: &str = "unshielded";

/// Name of the phase measured inside the shield, load on the housekeeping CPUs.
pub const SHIELDED: &str = "shielded";

/// Name of the phase measured with the load kept off the measured CPUs by
/// plain affinity, no shield: what a user gets with `taskset` alone.
pub const AFFINITY: &str = "affinity";

/// Name of the phase measured inside a shield with its own share of the
/// L3 cache (`--cache-ways`).
pub const CACHE_SHARE: &str = "cache-share";

/// The default over-threshold limits: 100 µs and 1 ms.
pub const DEFAULT_THRESHOLDS_US: [f64; 2] = [100.0, 1000.0];

/// A latency histogram of one phase, independent of how it was measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Curve {
    /// The phase (`idle`, `unshielded`, `shielded`) or another label.
    pub label: String,
    /// Width of one bucket in µs; bucket `i` holds `[i·w, (i+1)·w)`.
    pub bucket_width_us: f64,
    /// Samples per bucket.
    pub counts: Vec<u64>,
    /// Samples beyond the last bucket.
    pub overflow: u64,
}

impl Curve {
    /// All samples, overflow included.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum::<u64>() + self.overflow
    }

    /// Where the buckets end, in µs (samples beyond are the overflow).
    pub fn range_end_us(&self) -> f64 {
        self.counts.len() as f64 * self.bucket_width_us
    }

    /// Index of the highest non-empty bucket.
    pub fn highest_bucket(&self) -> Option<usize> {
        self.counts.iter().rposition(|&c| c > 0)
    }

    /// The same curve with `factor` buckets merged into one (for plotting a
    /// long range at a readable resolution). `factor` 0 or 1 is a copy.
    pub fn rebinned(&self, factor: usize) -> Curve {
        if factor <= 1 {
            return self.clone();
        }
        Curve {
            label: self.label.clone(),
            bucket_width_us: self.bucket_width_us * factor as f64,
            counts: self.counts.chunks(factor).map(|c| c.iter().sum()).collect(),
            overflow: self.overflow,
        }
    }

    /// Samples at or over `threshold_us`, at bucket resolution: whole
    /// buckets starting at or above it, plus the overflow (which is an upper
    /// bound when the threshold lies beyond the buckets).
    pub fn count_at_or_above(&self, threshold_us: f64) -> u64 {
        let first = (threshold_us / self.bucket_width_us).ceil().max(0.0) as usize;
        self.counts.iter().skip(first).sum::<u64>() + self.overflow
    }

    /// The `q` quantile (0..=1) in µs, as the upper edge of the bucket that
    /// reaches it; `None` with no samples or when it falls in the overflow.
    pub fn quantile_us(&self, q: f64) -> Option<f64> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some((i + 1) as f64 * self.bucket_width_us);
            }
        }
        None
    }
}

/// One row of the summary: a phase's statistics. Latencies are `None` when
/// unknown (no samples, or beyond the histogram).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseStats {
    /// `idle`, `unshielded`, `shielded`, ...
    pub phase: String,
    /// Number of samples.
    pub samples: u64,
    /// Smallest latency, µs.
    pub min_us: Option<f64>,
    /// Mean latency, µs.
    pub avg_us: Option<f64>,
    /// Largest latency, µs.
    pub max_us: Option<f64>,
    /// 99th percentile, µs.
    pub p99_us: Option<f64>,
    /// 99.9th percentile, µs.
    pub p999_us: Option<f64>,
    /// Samples over each threshold of the table, in the table's order.
    pub over: Vec<u64>,
    /// What reached the measured CPUs while they were measured (exact
    /// counts, also under emulation); `None` when unknown.
    #[serde(default)]
    pub interference: Option<Interference>,
}

/// Interrupts and softirqs on the measured CPUs during a phase's
/// measurement, per second, summed over those CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Interference {
    /// Device interrupts (numbered lines of /proc/interrupts).
    pub device_per_s: f64,
    /// Local timer interrupts (`LOC`): the tick.
    pub timer_per_s: f64,
    /// Inter-processor interrupts (`RES`, `CAL`, `TLB`, `IWI`): other CPUs
    /// waking, calling or flushing the measured ones.
    pub ipi_per_s: f64,
    /// Other per-CPU interrupts (`NMI`, `PMI`, `THR`, ...).
    pub other_per_s: f64,
    /// Softirqs run on the measured CPUs.
    pub softirq_per_s: f64,
    /// Other threads that ran on the measured CPUs (at least; see
    /// `measure::threads`); `None` when unknown.
    #[serde(default)]
    pub threads: Option<u64>,
    /// How often those threads ran (their context switches), per second.
    #[serde(default)]
    pub thread_runs_per_s: Option<f64>,
}

/// `n` over `seconds`; 0 for a run of no time.
fn per_second(n: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        n as f64 / seconds
    } else {
        0.0
    }
}

impl Interference {
    /// From the measured CPUs' interrupt and softirq deltas (`source`,
    /// `count`) over `seconds`.
    pub fn from_counts<'a>(
        interrupts: impl IntoIterator<Item = (&'a str, u64)>,
        softirqs: impl IntoIterator<Item = u64>,
        seconds: f64,
    ) -> Interference {
        let rate = |n: u64| per_second(n, seconds);
        let mut counts = [0u64; 4];
        for (source, n) in interrupts {
            let kind = match source {
                s if s.parse::<u32>().is_ok() => 0,
                "LOC" => 1,
                "RES" | "CAL" | "TLB" | "IWI" => 2,
                _ => 3,
            };
            counts[kind] += n;
        }
        Interference {
            device_per_s: rate(counts[0]),
            timer_per_s: rate(counts[1]),
            ipi_per_s: rate(counts[2]),
            other_per_s: rate(counts[3]),
            softirq_per_s: rate(softirqs.into_iter().sum()),
            threads: None,
            thread_runs_per_s: None,
        }
    }

    /// Adds the other threads that ran on each measured CPU over `seconds`;
    /// unknown when any CPU's are.
    pub fn with_threads<'a>(
        mut self,
        per_cpu: impl IntoIterator<Item = Option<&'a ThreadsRan>>,
        seconds: f64,
    ) -> Interference {
        let known: Option<Vec<&ThreadsRan>> = per_cpu.into_iter().collect();
        if let Some(ran) = known {
            let runs: u64 = ran.iter().map(|t| t.switches).sum();
            self.threads = Some(ran.iter().map(|t| t.threads).sum());
            self.thread_runs_per_s = Some(per_second(runs, seconds));
        }
        self
    }
}

impl PhaseStats {
    /// Statistics estimated from a histogram alone, at bucket resolution
    /// (the measurement engine knows exact min/avg/max and should fill those
    /// in when it has them): min and max are the edges of the lowest and
    /// highest non-empty buckets, avg uses bucket midpoints, and anything in
    /// the overflow makes max (and the quantiles it holds) unknown.
    pub fn from_curve(curve: &Curve, thresholds_us: &[f64]) -> PhaseStats {
        let w = curve.bucket_width_us;
        let in_range: u64 = curve.counts.iter().sum();
        let min_us = curve
            .counts
            .iter()
            .position(|&c| c > 0)
            .map(|i| i as f64 * w)
            .or(if curve.overflow > 0 {
                Some(curve.range_end_us())
            } else {
                None
            });
        let max_us = if curve.overflow > 0 {
            None
        } else {
            curve.highest_bucket().map(|i| (i + 1) as f64 * w)
        };
        let avg_us = if in_range > 0 && curve.overflow == 0 {
            let sum: f64 = curve
                .counts
                .iter()
                .enumerate()
                .map(|(i, &c)| c as f64 * (i as f64 + 0.5) * w)
                .sum();
            Some(sum / in_range as f64)
        } else {
            None
        };
        PhaseStats {
            phase: curve.label.clone(),
            samples: curve.total(),
            min_us,
            avg_us,
            max_us,
            p99_us: curve.quantile_us(0.99),
            p999_us: curve.quantile_us(0.999),
            interference: None,
            over: thresholds_us
                .iter()
                .map(|&t| curve.count_at_or_above(t))
                .collect(),
        }
    }
}

/// A ratio that stays honest about zeros: `a/0` is infinite, `0/0` and
/// unknown operands are undefined.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Ratio {
    /// A finite ratio.
    Value(f64),
    /// A positive number over zero.
    Infinite,
    /// Zero over zero, or an operand unknown.
    #[default]
    Undefined,
}

impl Ratio {
    /// `a / b`.
    pub fn of(a: Option<f64>, b: Option<f64>) -> Ratio {
        match (a, b) {
            (Some(a), Some(b)) if a.is_finite() && b.is_finite() => {
                if b != 0.0 {
                    Ratio::Value(a / b)
                } else if a != 0.0 {
                    Ratio::Infinite
                } else {
                    Ratio::Undefined
                }
            }
            _ => Ratio::Undefined,
        }
    }

    /// `a / b` for counts.
    pub fn of_counts(a: u64, b: u64) -> Ratio {
        Ratio::of(Some(a as f64), Some(b as f64))
    }
}

/// `12.3×`, `∞`, `n/a`.
impl fmt::Display for Ratio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Ratio::Value(v) if v >= 100.0 => write!(f, "{v:.0}×"),
            Ratio::Value(v) if v >= 10.0 => write!(f, "{v:.1}×"),
            Ratio::Value(v) => write!(f, "{v:.2}×"),
            Ratio::Infinite => f.write_str("∞"),
            Ratio::Undefined => f.write_str("n/a"),
        }
    }
}

/// JSON: a number, the string `"inf"`, or `null`.
impl Serialize for Ratio {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Ratio::Value(v) => s.serialize_f64(v),
            Ratio::Infinite => s.serialize_str("inf"),
            Ratio::Undefined => s.serialize_none(),
        }
    }
}

/// One line of the ratio table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RatioRow {
    /// `max`, `p99.9`, `> 100 µs`, ...
    pub metric: String,
    /// What the shield bought: unshielded / shielded.
    pub unshielded_over_shielded: Ratio,
    /// How far the shield is from the machine's limit: shielded / idle.
    pub shielded_over_idle: Ratio,
    /// What the shield adds over moving the load away with plain
    /// affinity: affinity / shielded.
    #[serde(default)]
    pub affinity_over_shielded: Ratio,
}

/// The per-phase table with its thresholds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SummaryTable {
    /// The over-threshold limits in µs, one column each.
    pub thresholds_us: Vec<f64>,
    /// One row per phase, in order of measurement.
    pub rows: Vec<PhaseStats>,
    /// The finest bucket width of the phases' histograms, µs: what the
    /// table's latencies can resolve (1 ns for the cache probe's).
    #[serde(default)]
    pub resolution_us: Option<f64>,
    /// The cache probe's figures per level (L1d, L2, L3 share, or the one
    /// set given) of each phase, in phase order; empty for other probes.
    #[serde(default)]
    pub levels: Vec<LevelRow>,
}

/// One cache level of one phase (cache probe): its loads' latencies over
/// every measured CPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelRow {
    /// The phase.
    pub phase: String,
    /// `L1d`, `L2`, `L3`, or the size of the set given (`512KiB`).
    pub level: String,
    /// Bytes of its working set (on the first measured CPU).
    pub bytes: u64,
    /// Timed loads.
    pub samples: u64,
    /// Median, µs.
    pub p50_us: Option<f64>,
    /// 99th percentile, µs.
    pub p99_us: Option<f64>,
    /// 99.9th percentile, µs.
    pub p999_us: Option<f64>,
    /// Largest (exact), µs.
    pub max_us: Option<f64>,
}

/// The finest bucket width of `curves`, µs.
pub fn finest<'a>(curves: impl Iterator<Item = &'a Curve>) -> Option<f64> {
    curves
        .map(|c| c.bucket_width_us)
        .filter(|w| *w > 0.0)
        .reduce(f64::min)
}

/// `> 100 µs`, `> 1 ms`, `> 2.5 ms`.
pub fn threshold_label(us: f64) -> String {
    if us >= 1000.0 {
        format!("> {} ms", trim_number(us / 1000.0))
    } else {
        format!("> {} µs", trim_number(us))
    }
}

fn trim_number(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

impl SummaryTable {
    /// An empty table with these thresholds (µs).
    pub fn new(thresholds_us: Vec<f64>) -> SummaryTable {
        SummaryTable {
            thresholds_us,
            rows: Vec::new(),
            resolution_us: None,
            levels: Vec::new(),
        }
    }

    /// Decimals of µs the table's latencies are printed with: as many as
    /// its histograms resolve (1 µs and 0.1 µs buckets: one; 10 ns: two;
    /// 1 ns: three).
    pub fn decimals(&self) -> usize {
        match self.resolution_us {
            Some(r) if r < 0.01 => 3,
            Some(r) if r < 0.1 => 2,
            _ => 1,
        }
    }

    /// A table estimated from histograms alone ([`PhaseStats::from_curve`]).
    pub fn from_curves(curves: &[Curve], thresholds_us: Vec<f64>) -> SummaryTable {
        let rows = curves
            .iter()
            .map(|c| PhaseStats::from_curve(c, &thresholds_us))
            .collect();
        SummaryTable {
            thresholds_us,
            rows,
            resolution_us: finest(curves.iter()),
            levels: Vec::new(),
        }
    }

    /// The row of `phase`.
    pub fn row(&self, phase: &str) -> Option<&PhaseStats> {
        self.rows.iter().find(|r| r.phase == phase)
    }

    /// Ratios for max, p99.9 and each over-threshold rate (count per
    /// sample): unshielded/shielded and shielded/idle. A missing phase
    /// gives `n/a`.
    pub fn ratios(&self) -> Vec<RatioRow> {
        let (i, u, s) = (self.row(IDLE), self.row(UNSHIELDED), self.row(SHIELDED));
        let a = self.row(AFFINITY);
        let pair = |get: &dyn Fn(&PhaseStats) -> Option<f64>| {
            let v = |r: Option<&PhaseStats>| r.and_then(get);
            (
                Ratio::of(v(u), v(s)),
                Ratio::of(v(s), v(i)),
                Ratio::of(v(a), v(s)),
            )
        };
        let mut out = Vec::new();
        let mut push = |metric: String, (a, b, c): (Ratio, Ratio, Ratio)| {
            out.push(RatioRow {
                metric,
                unshielded_over_shielded: a,
                shielded_over_idle: b,
                affinity_over_shielded: c,
            })
        };
        push("max".into(), pair(&|r| r.max_us));
        push("p99.9".into(), pair(&|r| r.p999_us));
        for (k, &t) in self.thresholds_us.iter().enumerate() {
            push(
                threshold_label(t),
                // Rates, not counts: a phase under load loses samples (a
                // late wake-up skips the periods it overran), so its raw
                // count would look better than it is.
                pair(&|r| {
                    r.over
                        .get(k)
                        .filter(|_| r.samples > 0)
                        .map(|&c| c as f64 / r.samples as f64)
                }),
            );
        }
        out
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn stats(phase: &str, max: f64, p999: f64, over: Vec<u64>) -> PhaseStats {
        PhaseStats {
            phase: phase.into(),
            samples: 1000,
            min_us: Some(1.0),
            avg_us: Some(2.0),
            max_us: Some(max),
            p99_us: Some(p999 / 2.0),
            p999_us: Some(p999),
            over,
            interference: None,
        }
    }

    #[test]
    fn interference_sorts_interrupts_by_kind_per_second() {
        let i = Interference::from_counts(
            [
                ("LOC", 2000),
                ("24", 10),
                ("RES", 6),
                ("CAL", 2),
                ("NMI", 4),
            ],
            [30, 10],
            2.0,
        );
        assert_eq!(i.timer_per_s, 1000.0);
        assert_eq!(i.device_per_s, 5.0);
        assert_eq!(i.ipi_per_s, 4.0);
        assert_eq!(i.other_per_s, 2.0);
        assert_eq!(i.softirq_per_s, 20.0);
        assert_eq!(
            Interference::from_counts([("LOC", 5)], [], 0.0).timer_per_s,
            0.0
        );
    }

    /// Idle, unshielded and shielded rows with 100 µs and 1 ms thresholds.
    pub(crate) fn table() -> SummaryTable {
        SummaryTable {
            thresholds_us: DEFAULT_THRESHOLDS_US.to_vec(),
            rows: vec![
                stats(IDLE, 20.0, 10.0, vec![0, 0]),
                stats(UNSHIELDED, 1428.0, 600.0, vec![57, 3]),
                stats(SHIELDED, 151.0, 40.0, vec![2, 0]),
            ],
            resolution_us: Some(1.0),
            levels: Vec::new(),
        }
    }

    #[test]
    fn over_threshold_ratios_compare_rates_not_counts() {
        let mut t = table();
        // Unshielded kept half the samples: 57 of 500 is 57× shielded's 2 of 1000.
        t.rows[1].samples = 500;
        let r = t.ratios();
        assert_eq!(r[2].unshielded_over_shielded, Ratio::Value(57.0));
        t.rows[2].samples = 0;
        assert_eq!(t.ratios()[2].unshielded_over_shielded, Ratio::Undefined);
    }

    #[test]
    fn ratio_math_and_zeros() {
        assert_eq!(Ratio::of(Some(10.0), Some(4.0)), Ratio::Value(2.5));
        assert_eq!(Ratio::of(Some(3.0), Some(0.0)), Ratio::Infinite);
        assert_eq!(Ratio::of(Some(0.0), Some(0.0)), Ratio::Undefined);
        assert_eq!(Ratio::of(Some(0.0), Some(5.0)), Ratio::Value(0.0));
        assert_eq!(Ratio::of(None, Some(5.0)), Ratio::Undefined);
        assert_eq!(Ratio::of(Some(1.0), Some(f64::NAN)), Ratio::Undefined);
        assert_eq!(Ratio::of_counts(57, 2), Ratio::Value(28.5));
        assert_eq!(Ratio::of_counts(3, 0), Ratio::Infinite);
        assert_eq!(Ratio::of_counts(0, 0), Ratio::Undefined);
    }

    #[test]
    fn ratio_display_and_json() {
        assert_eq!(Ratio::Value(9.457).to_string(), "9.46×");
        assert_eq!(Ratio::Value(12.34).to_string(), "12.3×");
        assert_eq!(Ratio::Value(456.7).to_string(), "457×");
        assert_eq!(Ratio::Infinite.to_string(), "∞");
        assert_eq!(Ratio::Undefined.to_string(), "n/a");
        let j =
            serde_json::to_string(&[Ratio::Value(2.5), Ratio::Infinite, Ratio::Undefined]).unwrap();
        assert_eq!(j, "[2.5,\"inf\",null]");
    }

    #[test]
    fn ratios_of_the_table() {
        let r = table().ratios();
        let metrics: Vec<&str> = r.iter().map(|x| x.metric.as_str()).collect();
        assert_eq!(metrics, vec!["max", "p99.9", "> 100 µs", "> 1 ms"]);
        assert_eq!(r[0].unshielded_over_shielded, Ratio::Value(1428.0 / 151.0));
        assert_eq!(r[0].shielded_over_idle, Ratio::Value(151.0 / 20.0));
        assert_eq!(r[1].unshielded_over_shielded, Ratio::Value(15.0));
        assert_eq!(r[2].unshielded_over_shielded, Ratio::Value(28.5));
        // Shielded had 2 over 100 µs where idle had none.
        assert_eq!(r[2].shielded_over_idle, Ratio::Infinite);
        // 3 over 1 ms unshielded, none shielded: infinitely better.
        assert_eq!(r[3].unshielded_over_shielded, Ratio::Infinite);
        // None over 1 ms shielded or idle.
        assert_eq!(r[3].shielded_over_idle, Ratio::Undefined);
    }

    #[test]
    fn missing_phase_gives_undefined_ratios() {
        let mut t = table();
        t.rows.retain(|r| r.phase != IDLE);
        for row in t.ratios() {
            assert_eq!(row.shielded_over_idle, Ratio::Undefined);
            assert_ne!(row.unshielded_over_shielded, Ratio::Undefined);
        }
    }

    #[test]
    fn threshold_labels() {
        assert_eq!(threshold_label(100.0), "> 100 µs");
        assert_eq!(threshold_label(1000.0), "> 1 ms");
        assert_eq!(threshold_label(2500.0), "> 2.5 ms");
        assert_eq!(threshold_label(12.5), "> 12.5 µs");
    }

    fn curve() -> Curve {
        // 1 µs buckets: 2 samples at 1 µs, 5 at 3 µs, 1 at 9 µs.
        let mut counts = vec![0u64; 10];
        counts[1] = 2;
        counts[3] = 5;
        counts[9] = 1;
        Curve {
            label: SHIELDED.into(),
            bucket_width_us: 1.0,
            counts,
            overflow: 0,
        }
    }

    #[test]
    fn curve_statistics_at_bucket_resolution() {
        let c = curve();
        assert_eq!(c.total(), 8);
        assert_eq!(c.highest_bucket(), Some(9));
        assert_eq!(c.count_at_or_above(3.0), 6);
        assert_eq!(c.count_at_or_above(3.5), 1);
        assert_eq!(c.count_at_or_above(100.0), 0);
        assert_eq!(c.quantile_us(0.5), Some(4.0));
        assert_eq!(c.quantile_us(0.99), Some(10.0));
        let s = PhaseStats::from_curve(&c, &[3.0]);
        assert_eq!(s.samples, 8);
        assert_eq!(s.min_us, Some(1.0));
        assert_eq!(s.max_us, Some(10.0));
        assert_eq!(s.over, vec![6]);
        let avg = (2.0 * 1.5 + 5.0 * 3.5 + 9.5) / 8.0;
        assert!((s.avg_us.unwrap() - avg).abs() < 1e-9);
    }

    #[test]
    fn overflow_makes_max_unknown() {
        let mut c = curve();
        c.overflow = 1;
        let s = PhaseStats::from_curve(&c, &[1000.0]);
        assert_eq!(s.max_us, None);
        assert_eq!(s.avg_us, None);
        assert_eq!(s.over, vec![1]);
        assert_eq!(c.quantile_us(1.0), None);
        let empty = Curve {
            label: IDLE.into(),
            bucket_width_us: 1.0,
            counts: vec![0; 4],
            overflow: 0,
        };
        let s = PhaseStats::from_curve(&empty, &[]);
        assert_eq!(
            (s.samples, s.min_us, s.max_us, s.p99_us),
            (0, None, None, None)
        );
    }

    #[test]
    fn rebinning_keeps_every_sample() {
        let c = curve().rebinned(4);
        assert_eq!(c.bucket_width_us, 4.0);
        assert_eq!(c.counts, vec![7, 0, 1]);
        assert_eq!(c.total(), 8);
        assert_eq!(curve().rebinned(1), curve());
    }

    #[test]
    fn the_table_prints_as_many_decimals_as_its_histograms_resolve() {
        let curve = |w: f64| Curve {
            label: "x".into(),
            bucket_width_us: w,
            counts: vec![1, 2, 3],
            overflow: 0,
        };
        let t = |ws: &[f64]| {
            let curves: Vec<Curve> = ws.iter().map(|&w| curve(w)).collect();
            SummaryTable::from_curves(&curves, DEFAULT_THRESHOLDS_US.to_vec())
        };
        assert_eq!(t(&[1.0, 1.0]).decimals(), 1);
        assert_eq!(t(&[0.1]).decimals(), 1);
        assert_eq!(t(&[0.01]).decimals(), 2);
        // The cache probe's 1 ns buckets, beside a coarser phase.
        assert_eq!(t(&[1.0, 0.001]).resolution_us, Some(0.001));
        assert_eq!(t(&[1.0, 0.001]).decimals(), 3);
        assert_eq!(SummaryTable::new(vec![]).decimals(), 1);
    }
}
