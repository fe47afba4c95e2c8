//! What was late, counted as a verdict must count it: the samples over a
//! bound, the deadlines the probe skipped after a stall (each one late
//! too), and the clusters they came in (a burst is one event, not many
//! independent ones). Pure.
//!
//! Clusters are found in the per-second maxima: a second whose largest
//! sample is over the bound holds at least one exceedance, and a run of
//! such seconds is one cluster (runs declustering with a run length of one
//! second; Coles, 2001, §5.3.2). The share of clusters among the
//! exceedances is the runs estimate of the extremal index θ (1: each
//! exceedance on its own; 0.1: they come ten at a time).

use serde::{Deserialize, Serialize};

use super::stats;
use super::tail::CpuTail;
pub use super::tail::Skipped;

/// The deadlines over a bound on one CPU: at least and at most (a
/// histogram bucket straddling the bound counts on either side).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Late {
    /// Samples over the bound.
    pub samples: (u64, u64),
    /// Skipped deadlines over the bound.
    pub skipped: (u64, u64),
}

impl Late {
    /// Samples and skipped deadlines over the bound, at least and at most.
    pub fn total(&self) -> (u64, u64) {
        (
            self.samples.0 + self.skipped.0,
            self.samples.1 + self.skipped.1,
        )
    }
}

/// Exceedances grouped into clusters by the seconds they fell in.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Clusters {
    /// Whole seconds with a maximum (the trials clusters start in).
    pub seconds: u64,
    /// Seconds whose maximum is over the bound.
    pub seconds_over: u64,
    /// Runs of consecutive such seconds: the independent events.
    pub clusters: u64,
    /// The runs estimate of the extremal index, clusters per exceedance
    /// (the most exceedances the histogram allows); `None` without any.
    pub extremal_index: Option<f64>,
}

/// Late deadlines: the samples over `bound_ns` from the histogram, and
/// the skipped deadlines over it.
pub fn late(t: &CpuTail, bound_ns: u64) -> Late {
    let samples = t.exceedances(bound_ns);
    if t.max_ns <= bound_ns && samples.0 == 0 {
        // The largest sample is exact: nothing was over, and no skipped
        // deadline (each less late than the stall it followed) either. A
        // recorded file whose buckets say otherwise is not believed on
        // its maximum's word.
        return Late::default();
    }
    Late {
        samples,
        skipped: skipped_over(t, bound_ns),
    }
}

/// Every deadline of the run: the samples and the skipped ones.
pub fn deadlines(t: &CpuTail) -> u64 {
    t.samples.saturating_add(t.missed)
}

/// The skipped deadlines over `bound_ns`, at least and at most.
fn skipped_over(t: &CpuTail, bound_ns: u64) -> (u64, u64) {
    if t.missed == 0 {
        return (0, 0);
    }
    let Some(interval) = t.interval_ns.filter(|&i| i > 0) else {
        // No period known: each skipped one may or may not be over.
        return (0, t.missed);
    };
    match t.skipped {
        Skipped::AtLeastOnePeriod => {
            let low = if interval > bound_ns { t.missed } else { 0 };
            (low, t.missed)
        }
        Skipped::AfterLateSample => after_late_samples(t, interval, bound_ns),
    }
}

/// The timer probe's skipped deadlines over the bound. A sample `L` late
/// skipped `⌈L/I⌉ − 1` deadlines, the `j`-th `L − j·I` late; those over
/// `B` number `⌈(L − B)/I⌉ − 1` when `L > B`. Each bucket gives the least
/// (from its start) and the most (from its end); what the buckets do not
/// explain came from overflows, whose lateness is unknown past the
/// histogram's end `R`: at most `⌊B/I⌋ + 1` of each stall's skipped
/// deadlines can be within `B`.
fn after_late_samples(t: &CpuTail, interval: u64, bound_ns: u64) -> (u64, u64) {
    let w = t.width_ns.max(1);
    let skipped = |l: u64| l.saturating_sub(1) / interval;
    let over = |l: u64| {
        if l > bound_ns {
            (l - bound_ns).saturating_sub(1) / interval
        } else {
            0
        }
    };
    let (mut low, mut high, mut explained) = (0u64, 0u64, 0u64);
    for (i, &c) in t.counts.iter().enumerate() {
        if c == 0 {
            continue;
        }
        let start = (i as u64).saturating_mul(w);
        let end = start.saturating_add(w - 1);
        low = low.saturating_add(c.saturating_mul(over(start)));
        high = high.saturating_add(c.saturating_mul(over(end)));
        explained = explained.saturating_add(c.saturating_mul(skipped(start)));
    }
    let rest = t.missed.saturating_sub(explained);
    let within_each = bound_ns / interval + 1;
    low = low.saturating_add(rest.saturating_sub(t.overflows.saturating_mul(within_each)));
    high = high.saturating_add(rest);
    (low.min(t.missed), high.min(t.missed))
}

/// The timer probe's skipped deadlines the histogram's buckets account
/// for (each sample `L` late skipped `⌈L/I⌉ − 1`), for recorded data that
/// did not count them; 0 without an interval.
pub fn skipped_in_buckets(t: &CpuTail) -> u64 {
    let Some(interval) = t.interval_ns.filter(|&i| i > 0) else {
        return 0;
    };
    let w = t.width_ns.max(1);
    (t.counts.iter().enumerate())
        .map(|(i, &c)| c.saturating_mul((i as u64).saturating_mul(w).saturating_sub(1) / interval))
        .fold(0u64, u64::saturating_add)
}

/// The clusters over `bound_ns` in the per-second maxima; `None` when the
/// run kept none (under a second, or recorded data without them).
pub fn clusters(t: &CpuTail, bound_ns: u64, late: &Late) -> Option<Clusters> {
    if t.per_second_max_ns.is_empty() {
        return None;
    }
    let seconds_over = (t.per_second_max_ns.iter())
        .filter(|&&m| m > bound_ns)
        .count() as u64;
    let starts = runs_over(&t.per_second_max_ns, bound_ns);
    // An exceedance in the partial last second, which has no maximum of
    // its own, is a cluster of its own.
    let (_, most) = late.total();
    let clusters = if starts == 0 && most > 0 && t.max_ns > bound_ns {
        1
    } else {
        starts
    };
    Some(Clusters {
        seconds: t.per_second_max_ns.len() as u64,
        seconds_over,
        clusters,
        extremal_index: (most > 0 && clusters > 0)
            .then(|| (clusters as f64 / most as f64).min(1.0)),
    })
}

/// The 90th percentile of per-second maxima (about one second in ten is
/// over it), where there are at least ten; and whether any is over it.
pub fn body_threshold(per_second_ns: &[u64]) -> Option<(u64, bool)> {
    if per_second_ns.len() < 10 {
        return None;
    }
    let mut sorted = per_second_ns.to_vec();
    sorted.sort_unstable();
    let threshold = sorted[sorted.len() * 9 / 10 - 1];
    Some((threshold, threshold < sorted[sorted.len() - 1]))
}

/// Runs of consecutive seconds whose maximum is over `threshold_ns`.
pub fn runs_over(per_second_ns: &[u64], threshold_ns: u64) -> u64 {
    let over: Vec<bool> = per_second_ns.iter().map(|&m| m > threshold_ns).collect();
    (0..over.len())
        .filter(|&i| over[i] && (i == 0 || !over[i - 1]))
        .count() as u64
}

/// The extremal index where the run has exceedances to count: the runs
/// estimate at the 90th percentile of the per-second maxima
/// ([`body_threshold`]); `None` without per-second maxima or spread.
pub fn extremal_index_of_body(t: &CpuTail) -> Option<f64> {
    let (threshold, spread) = body_threshold(&t.per_second_max_ns)?;
    if !spread {
        return None;
    }
    let l = late(t, threshold);
    clusters(t, threshold, &l)?.extremal_index
}

/// One-sided bounds on the probability that a deadline is late past a
/// bound, at `confidence`, and what they rest on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Lower and upper bound.
    pub bounds: (f64, f64),
    /// Whether the clusters set them (a burst counted as one event).
    pub declustered: bool,
}

/// The bounds on one deadline's probability of being late past the bound.
/// Counted per deadline (exact binomial, Clopper-Pearson) as if each were
/// independent, and, where clusters are known, per cluster: the bounds on
/// a second starting a cluster, times the mean cluster size, per deadline
/// of a second. The wider of the two is kept on each side, so a burst
/// never counts as many independent events.
pub fn rate(late: &Late, clusters: Option<&Clusters>, deadlines: u64, confidence: f64) -> Rate {
    let (low, high) = late.total();
    let per_deadline = (
        stats::lower_bound(low, deadlines, confidence),
        stats::upper_bound(high, deadlines, confidence),
    );
    let Some(c) = clusters.filter(|c| c.clusters > 0 && c.seconds > 0 && high > 0) else {
        return Rate {
            bounds: per_deadline,
            declustered: false,
        };
    };
    let per_second = deadlines as f64 / c.seconds as f64;
    let size = |k: u64| k as f64 / c.clusters as f64;
    let by_cluster = (
        stats::lower_bound(c.clusters, c.seconds, confidence) * size(low) / per_second,
        (stats::upper_bound(c.clusters, c.seconds, confidence) * size(high) / per_second).min(1.0),
    );
    Rate {
        bounds: (
            per_deadline.0.min(by_cluster.0),
            per_deadline.1.max(by_cluster.1),
        ),
        declustered: by_cluster.1 > per_deadline.1 || by_cluster.0 < per_deadline.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` samples at 2 µs, plus `late` samples at the given µs, 1 ms
    /// interval, a histogram of 50,000 buckets of 1 µs (50 ms).
    fn timer_tail(n: u64, late: &[u64], seconds: usize) -> CpuTail {
        let mut counts = vec![0u64; 50_000];
        counts[2] = n - late.len() as u64;
        for &us in late {
            counts[us as usize] += 1;
        }
        let missed = late.iter().map(|&us| (us * 1000 - 1) / 1_000_000).sum();
        CpuTail {
            cpu: 3,
            width_ns: 1000,
            buckets: 50_000,
            counts,
            overflows: 0,
            samples: n,
            max_ns: late
                .iter()
                .map(|&us| us * 1000 + 500)
                .max()
                .unwrap_or(2_500),
            per_second_max_ns: vec![2_500; seconds],
            elapsed_s: seconds as f64,
            missed,
            interval_ns: Some(1_000_000),
            skipped: Skipped::AfterLateSample,
        }
    }

    #[test]
    fn a_stall_makes_its_skipped_deadlines_late_by_less_and_less() {
        // One wake-up 20.0-20.999 ms late skipped 20 deadlines, late by
        // 19.x, 18.x, ... 0.x ms.
        let t = timer_tail(1000, &[20_000], 1);
        assert_eq!(t.missed, 19, "(20,000,000 − 1) / 1,000,000");
        let t = timer_tail(1000, &[20_400], 1);
        assert_eq!(t.missed, 20);
        assert_eq!(late(&t, 50_000).skipped, (20, 20), "all 20 past 50 µs");
        assert_eq!(
            late(&t, 5_000_000).skipped,
            (15, 15),
            "15.4 ms down to 1.4 ms"
        );
        assert_eq!(
            late(&t, 30_000_000),
            Late::default(),
            "nothing past the stall"
        );
        assert_eq!(late(&t, 50_000).total(), (21, 21));
        // A file whose maximum contradicts its buckets: the buckets count.
        let mut lying = timer_tail(1000, &[80], 1);
        lying.max_ns = 2_500;
        assert_eq!(late(&lying, 50_000).samples, (1, 1));
        // Sizes no run has do not overflow.
        lying.width_ns = u64::MAX / 2;
        lying.counts[2] = u64::MAX;
        assert_eq!(late(&lying, 50_000).samples.1, u64::MAX);
    }

    #[test]
    fn skips_from_overflows_are_counted_past_what_the_period_allows() {
        let mut t = timer_tail(1000, &[], 1);
        t.overflows = 2;
        t.counts[2] -= 2;
        t.missed = 100;
        t.max_ns = 60_000_000;
        // Each of 2 stalls may leave at most ⌊2 ms/1 ms⌋ + 1 = 3 within 2 ms.
        assert_eq!(late(&t, 2_000_000).skipped, (94, 100));
        // Of a periodic probe's skips, each at least one period late.
        t.skipped = Skipped::AtLeastOnePeriod;
        assert_eq!(late(&t, 50_000).skipped, (100, 100));
        assert_eq!(late(&t, 2_000_000).skipped, (0, 100));
    }

    #[test]
    fn a_burst_is_one_cluster_and_widens_the_bound() {
        // 600 s at 1 kHz; 30 samples over 50 µs, in 3 bursts of 10.
        let mut bursty = timer_tail(600_000, &[80; 30], 600);
        for s in [100, 300, 500] {
            bursty.per_second_max_ns[s] = 80_500;
        }
        let l = late(&bursty, 50_000);
        let c = clusters(&bursty, 50_000, &l).unwrap();
        assert_eq!((c.seconds_over, c.clusters), (3, 3));
        assert!((c.extremal_index.unwrap() - 0.1).abs() < 1e-12);
        let r = rate(&l, Some(&c), deadlines(&bursty), 0.95);
        assert!(r.declustered);
        assert!(
            r.bounds.1 > 1e-4,
            "3 events of 10 do not show ≤ 1e-4: {r:?}"
        );
        // The same 30, each in a second of its own: as before.
        let mut spread = bursty.clone();
        spread.per_second_max_ns = vec![2_500; 600];
        for s in 0..30 {
            spread.per_second_max_ns[s * 20] = 80_500;
        }
        let c = clusters(&spread, 50_000, &l).unwrap();
        assert_eq!(c.clusters, 30);
        let r = rate(&l, Some(&c), deadlines(&spread), 0.95);
        assert!(r.bounds.1 < 1e-4, "{r:?}");
        // Consecutive seconds over the bound are one cluster.
        spread.per_second_max_ns[21] = 80_500;
        assert_eq!(clusters(&spread, 50_000, &l).unwrap().clusters, 30);
    }
}
