//! Pre-allocated latency histograms and the statistics derived from them.
//!
//! A measuring loop must not allocate, so every [`Histogram`] is created at
//! its full size before the loop starts and [`Histogram::record`] only adds
//! to integers. Samples are nanoseconds; buckets are linear, `width_ns` wide
//! (1 µs by default, like cyclictest's `-h`): bucket `i` holds values in
//! `[i·width, (i+1)·width)`. A value at or past `buckets·width` is an
//! *overflow*: it is counted, its sample index is kept for the first
//! overflows (as many as there are buckets, like cyclictest), and it still
//! feeds min / max / average / standard deviation, which are exact.
//!
//! Percentiles come from the buckets, so their resolution is one bucket
//! width: [`Histogram::percentile`] returns the upper edge of the bucket
//! holding the sample of that rank (nearest-rank method), clamped to the
//! exact maximum. The true percentile is at most the reported value and
//! more than the reported value minus one bucket width. A rank that falls
//! among the overflows has no value (`None`): it is beyond the range.

use serde::{Deserialize, Serialize};

/// The percentiles every report carries, in percent.
pub const PERCENTILES: [f64; 5] = [50.0, 90.0, 99.0, 99.9, 99.99];

/// `len` zeroed words with every page written once (`black_box` keeps the
/// compiler from dropping writes of the value the memory already holds).
fn prefaulted(len: usize) -> Box<[u64]> {
    const WORDS_PER_PAGE: usize = 4096 / std::mem::size_of::<u64>();
    let mut words = vec![0u64; len].into_boxed_slice();
    for i in (0..len).step_by(WORDS_PER_PAGE) {
        words[i] = std::hint::black_box(0);
    }
    words
}

/// A linear histogram of nanosecond samples with exact running statistics.
#[derive(Debug, Clone)]
pub struct Histogram {
    width_ns: u64,
    counts: Box<[u64]>,
    overflows: u64,
    overflow_at: Box<[u64]>,
    overflow_at_len: usize,
    samples: u64,
    min_ns: u64,
    max_ns: u64,
    sum_ns: u128,
    sum_sq_ns: u128,
    /// Sum of samples truncated to whole microseconds, as cyclictest adds them.
    sum_trunc_us: u64,
}

impl Histogram {
    /// A histogram of `buckets` buckets, each `width_ns` wide, keeping the
    /// sample indices of the first `buckets` overflows. Both must be > 0.
    /// Every page of both arrays is written here, so that the measuring
    /// loop never takes a page fault on them, also without mlockall
    /// (`--no-rt`): zeroed allocations are mapped lazily.
    pub fn new(buckets: usize, width_ns: u64) -> Histogram {
        assert!(buckets > 0 && width_ns > 0, "empty histogram");
        Histogram {
            width_ns,
            counts: prefaulted(buckets),
            overflows: 0,
            overflow_at: prefaulted(buckets),
            overflow_at_len: 0,
            samples: 0,
            min_ns: u64::MAX,
            max_ns: 0,
            sum_ns: 0,
            sum_sq_ns: 0,
            sum_trunc_us: 0,
        }
    }

    /// Records one sample of `value_ns`; `index` is its sample number (the
    /// loop count), kept when the sample overflows. Never allocates.
    #[inline]
    pub fn record(&mut self, index: u64, value_ns: u64) {
        let bucket = value_ns / self.width_ns;
        if let Some(c) = self.counts.get_mut(bucket as usize) {
            *c += 1;
        } else {
            if let Some(slot) = self.overflow_at.get_mut(self.overflow_at_len) {
                *slot = index;
                self.overflow_at_len += 1;
            }
            self.overflows += 1;
        }
        self.samples += 1;
        self.min_ns = self.min_ns.min(value_ns);
        self.max_ns = self.max_ns.max(value_ns);
        self.sum_ns += value_ns as u128;
        self.sum_sq_ns += (value_ns as u128) * (value_ns as u128);
        self.sum_trunc_us += value_ns / 1000;
    }

    /// Adds another histogram of the same shape into this one (the ALL row).
    /// Overflow indices are per thread and are not merged.
    pub fn merge(&mut self, other: &Histogram) {
        assert_eq!(self.width_ns, other.width_ns, "bucket widths differ");
        assert_eq!(
            self.counts.len(),
            other.counts.len(),
            "bucket counts differ"
        );
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.overflows += other.overflows;
        self.samples += other.samples;
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
        self.sum_ns += other.sum_ns;
        self.sum_sq_ns += other.sum_sq_ns;
        self.sum_trunc_us += other.sum_trunc_us;
    }

    /// Makes this histogram (of the same shape) equal to `other` without
    /// allocating, copying only the buckets up to `other`'s maximum: what
    /// a measuring thread does when asked for a copy mid-run, so its cost
    /// follows the range reached, not the range allocated. The buckets
    /// past that are left as they are, which is zero as long as every
    /// earlier copy was of the same growing histogram.
    pub fn copy_reached_from(&mut self, other: &Histogram) {
        assert_eq!(self.width_ns, other.width_ns, "bucket widths differ");
        assert_eq!(
            self.counts.len(),
            other.counts.len(),
            "bucket counts differ"
        );
        let reached = if other.samples == 0 {
            0
        } else {
            ((other.max_ns / other.width_ns) as usize + 1).min(other.counts.len())
        };
        self.counts[..reached].copy_from_slice(&other.counts[..reached]);
        let n = other.overflow_at_len;
        self.overflow_at[..n].copy_from_slice(&other.overflow_at[..n]);
        self.overflow_at_len = n;
        self.overflows = other.overflows;
        self.samples = other.samples;
        self.min_ns = other.min_ns;
        self.max_ns = other.max_ns;
        self.sum_ns = other.sum_ns;
        self.sum_sq_ns = other.sum_sq_ns;
        self.sum_trunc_us = other.sum_trunc_us;
    }

    /// Bucket width in nanoseconds.
    pub fn width_ns(&self) -> u64 {
        self.width_ns
    }

    /// The per-bucket counts.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// Number of samples at or past the last bucket.
    pub fn overflows(&self) -> u64 {
        self.overflows
    }

    /// Sample indices of the first overflows (at most one per bucket).
    pub fn overflow_at(&self) -> &[u64] {
        &self.overflow_at[..self.overflow_at_len]
    }

    /// Number of samples recorded.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Smallest sample, if any.
    pub fn min_ns(&self) -> Option<u64> {
        (self.samples > 0).then_some(self.min_ns)
    }

    /// Largest sample, if any.
    pub fn max_ns(&self) -> Option<u64> {
        (self.samples > 0).then_some(self.max_ns)
    }

    /// Exact mean, if any sample.
    pub fn mean_ns(&self) -> Option<f64> {
        (self.samples > 0).then(|| self.sum_ns as f64 / self.samples as f64)
    }

    /// Exact population standard deviation, if any sample.
    pub fn stddev_ns(&self) -> Option<f64> {
        if self.samples == 0 {
            return None;
        }
        let n = self.samples as f64;
        let mean = self.sum_ns as f64 / n;
        let var = (self.sum_sq_ns as f64 / n - mean * mean).max(0.0);
        Some(var.sqrt())
    }

    /// The mean as cyclictest prints it: samples truncated to whole
    /// microseconds, summed, divided by the count, truncated again.
    pub fn cyclictest_avg_us(&self) -> u64 {
        self.sum_trunc_us.checked_div(self.samples).unwrap_or(0)
    }

    /// The `p`-th percentile (0 < p ≤ 100) by nearest rank, at bucket
    /// resolution: the upper edge of the bucket holding the sample of rank
    /// ⌈p/100 · n⌉, clamped to the exact maximum. `None` without samples or
    /// when that sample is an overflow.
    pub fn percentile(&self, p: f64) -> Option<u64> {
        if self.samples == 0 {
            return None;
        }
        // Integer rank ⌈p·n/100⌉ with p in hundredths of a percent, so that
        // 99.9 % of 10000 is exactly 9990 (floating point gives 9990.000…2).
        let p_hundredths = (p * 100.0).round().clamp(0.0, 10_000.0) as u128;
        let rank = (p_hundredths * self.samples as u128)
            .div_ceil(10_000)
            .max(1) as u64;
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let upper = (i as u64 + 1) * self.width_ns;
                return Some(upper.min(self.max_ns));
            }
        }
        None
    }

    /// The summary every report shows.
    pub fn summary(&self) -> Summary {
        Summary {
            samples: self.samples,
            min_ns: self.min_ns(),
            avg_ns: self.mean_ns(),
            max_ns: self.max_ns(),
            stddev_ns: self.stddev_ns(),
            percentiles: PERCENTILES
                .iter()
                .map(|&p| Percentile {
                    p,
                    value_ns: self.percentile(p),
                })
                .collect(),
            overflows: self.overflows,
            overflow_at: self.overflow_at().to_vec(),
        }
    }
}

/// One percentile of a [`Summary`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Percentile {
    /// The percentile, in percent (50, 90, 99, 99.9, 99.99).
    pub p: f64,
    /// Upper edge of the bucket holding it (clamped to max); `null` when
    /// it lies among the overflows.
    pub value_ns: Option<u64>,
}

/// Statistics of one histogram, as reported (JSON field names included).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of samples.
    pub samples: u64,
    /// Smallest sample (exact).
    pub min_ns: Option<u64>,
    /// Mean (exact).
    pub avg_ns: Option<f64>,
    /// Largest sample (exact).
    pub max_ns: Option<u64>,
    /// Population standard deviation (exact).
    pub stddev_ns: Option<f64>,
    /// p50, p90, p99, p99.9, p99.99 at bucket resolution.
    pub percentiles: Vec<Percentile>,
    /// Samples past the last bucket.
    pub overflows: u64,
    /// Sample indices of the first overflows (empty for the ALL row).
    pub overflow_at: Vec<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled(values_us: impl IntoIterator<Item = u64>, buckets: usize) -> Histogram {
        let mut h = Histogram::new(buckets, 1000);
        for (i, v) in values_us.into_iter().enumerate() {
            h.record(i as u64, v * 1000);
        }
        h
    }

    #[test]
    fn a_copy_of_the_reached_range_equals_the_histogram() {
        let mut copy = Histogram::new(100, 1000);
        let early = filled([3, 5, 5], 100);
        copy.copy_reached_from(&early);
        assert_eq!(copy.summary(), early.summary());
        // the histogram grows (an overflow too); the copy follows it whole
        let later = filled([3, 5, 5, 42, 7, 250], 100);
        copy.copy_reached_from(&later);
        assert_eq!(copy.counts(), later.counts());
        assert_eq!(copy.overflow_at(), later.overflow_at());
        assert_eq!(copy.summary(), later.summary());
    }

    #[test]
    fn uniform_distribution_percentiles() {
        // 1..=10000 µs, each once, exactly on bucket lower edges.
        let h = filled(1..=10_000, 20_000);
        assert_eq!(h.samples(), 10_000);
        assert_eq!(h.min_ns(), Some(1000));
        assert_eq!(h.max_ns(), Some(10_000_000));
        assert_eq!(h.mean_ns(), Some(5_000_500.0));
        // rank 5000 is the value 5000 µs; its bucket [5000, 5001) µs has
        // upper edge 5001 µs.
        assert_eq!(h.percentile(50.0), Some(5_001_000));
        assert_eq!(h.percentile(90.0), Some(9_001_000));
        assert_eq!(h.percentile(99.0), Some(9_901_000));
        assert_eq!(h.percentile(99.9), Some(9_991_000));
        // rank 9999 → 9999 µs; p100 clamps to the exact maximum.
        assert_eq!(h.percentile(99.99), Some(10_000_000));
        assert_eq!(h.percentile(100.0), Some(10_000_000));
        // Population stddev of 1..=n is sqrt((n²−1)/12).
        let expected = ((10_000f64 * 10_000f64 - 1.0) / 12.0).sqrt() * 1000.0;
        assert!((h.stddev_ns().unwrap() - expected).abs() < 1e-3 * expected);
    }

    #[test]
    fn constant_distribution() {
        let h = filled(std::iter::repeat_n(7, 1000), 100);
        assert_eq!(h.stddev_ns(), Some(0.0));
        for p in PERCENTILES {
            assert_eq!(h.percentile(p), Some(7000), "p{p}");
        }
        assert_eq!(h.counts()[7], 1000);
        assert_eq!(h.cyclictest_avg_us(), 7);
    }

    #[test]
    fn two_point_distribution_tail() {
        // 9990 samples at 2 µs and 10 at 50 µs: p99.9 is still 2 µs
        // (rank 9990), p99.99 is in the tail (rank 9999).
        let h = filled(
            std::iter::repeat_n(2, 9990).chain(std::iter::repeat_n(50, 10)),
            100,
        );
        assert_eq!(h.percentile(99.9), Some(3000));
        assert_eq!(h.percentile(99.99), Some(50_000));
        assert!((h.mean_ns().unwrap() - 2048.0).abs() < 1e-9);
    }

    #[test]
    fn sub_bucket_values_truncate_like_cyclictest() {
        let mut h = Histogram::new(10, 1000);
        h.record(0, 1999);
        h.record(1, 2001);
        assert_eq!(h.counts()[1], 1);
        assert_eq!(h.counts()[2], 1);
        // cyclictest: (1 + 2) / 2 = 1
        assert_eq!(h.cyclictest_avg_us(), 1);
        assert_eq!(h.mean_ns(), Some(2000.0));
        // p50 = rank 1 = 1999 ns → bucket 1, upper edge 2000 ns (below max 2001).
        assert_eq!(h.percentile(50.0), Some(2000));
    }

    #[test]
    fn overflow_counted_indices_kept_stats_exact() {
        let mut h = Histogram::new(3, 1000);
        let values = [0, 5000, 1000, 9000, 2999, 3000, 7000, 8000];
        for (i, v) in values.iter().enumerate() {
            h.record(i as u64, *v);
        }
        assert_eq!(h.counts(), &[1, 1, 1]);
        assert_eq!(h.overflows(), 5);
        // Only as many indices as buckets are kept.
        assert_eq!(h.overflow_at(), &[1, 3, 5]);
        assert_eq!(h.max_ns(), Some(9000));
        assert_eq!(h.min_ns(), Some(0));
        assert_eq!(h.samples(), 8);
        // Median rank 4 lies among the overflows: beyond range.
        assert_eq!(h.percentile(50.0), None);
        // p30: rank 3 of 8 is the third in-range sample, 2999 ns.
        assert_eq!(h.percentile(30.0), Some(3000));
    }

    #[test]
    fn empty_histogram_has_no_statistics() {
        let h = Histogram::new(5, 1000);
        let s = h.summary();
        assert_eq!(s.samples, 0);
        assert_eq!(s.min_ns, None);
        assert_eq!(s.avg_ns, None);
        assert!(s.percentiles.iter().all(|p| p.value_ns.is_none()));
        assert_eq!(h.cyclictest_avg_us(), 0);
    }

    #[test]
    fn merge_adds_counts_and_keeps_extremes() {
        let a = filled([1, 2, 3], 10);
        let b = filled([5, 20], 10);
        let mut all = Histogram::new(10, 1000);
        all.merge(&a);
        all.merge(&b);
        assert_eq!(all.samples(), 5);
        assert_eq!(all.min_ns(), Some(1000));
        assert_eq!(all.max_ns(), Some(20_000));
        assert_eq!(all.overflows(), 1);
        assert!(all.overflow_at().is_empty());
        assert_eq!(all.mean_ns(), Some(6200.0));
    }

    #[test]
    fn wider_buckets() {
        let mut h = Histogram::new(10, 10_000);
        for v in 0..100u64 {
            h.record(v, v * 1000);
        }
        assert_eq!(h.counts(), &[10; 10]);
        assert_eq!(h.percentile(50.0), Some(50_000));
    }
}
