//! What one measuring thread is given (its probe's job) and what its loop
//! gives back, shared by the loops of [`super::probes`] and
//! [`super::noise`].

use std::fs::File;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use serde::{Deserialize, Serialize};

use super::args::ProbeKind;
use super::cache::{Walk, WorkingSet};
use super::device::DeviceTarget;
use super::explain::{Sample, SlowSamples};
use super::histogram::Histogram;
use crate::sys::syscalls::{self, Tsc};

/// A cycle counter calibrated against CLOCK_MONOTONIC_RAW.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CycleClock {
    /// Counter ticks per nanosecond.
    pub ticks_per_ns: f64,
}

impl CycleClock {
    /// Calibrates the TSC over `ms` milliseconds; `None` where there is none.
    pub fn calibrate(ms: u64) -> Option<CycleClock> {
        let c0 = syscalls::cycle_counter()?;
        let r0 = syscalls::monotonic_raw_ns();
        std::thread::sleep(std::time::Duration::from_millis(ms));
        let c1 = syscalls::cycle_counter()?;
        let r1 = syscalls::monotonic_raw_ns();
        let ticks_per_ns = c1.wrapping_sub(c0) as f64 / r1.saturating_sub(r0).max(1) as f64;
        (ticks_per_ns > 0.0).then_some(CycleClock { ticks_per_ns })
    }

    /// `ticks` of the counter in nanoseconds, rounded to the nearest.
    #[inline]
    pub fn ns(self, ticks: u64) -> u64 {
        (ticks as f64 / self.ticks_per_ns).round() as u64
    }
}

/// Timed loads per level per round of the cache probe (after one untimed
/// pass over the level's whole working set).
pub const CACHE_LOADS_PER_ROUND: u64 = 8192;

/// One level of the cache probe on one CPU: its working set, its walk
/// (built by [`super::probes::prepare`] on the measuring thread) and its histograms.
#[derive(Debug)]
pub struct CacheLevel {
    /// The working set: level, size, where the size came from.
    pub set: WorkingSet,
    /// The walk through it (empty until [`super::probes::prepare`], and again after the loop).
    pub walk: Walk,
    /// Seed of the walk's random order.
    pub seed: u64,
    /// The line the next round's timed loads start from (where the last
    /// round's stopped, so that rounds time the whole walk in turn).
    pub at: usize,
    /// Load latencies, ns (the probe's bucket shape).
    pub ns: Histogram,
    /// Load latencies in counter ticks (cycles), one per bucket.
    pub cycles: Histogram,
    /// KiB of transparent huge pages backing the walk's mappings, read
    /// once it is built (`None`: unread).
    pub huge_pages_kib: Option<u64>,
}

/// What the cache probe measures with, and per level what it measured.
#[derive(Debug)]
pub struct CacheJob {
    /// The serialised counter.
    pub tsc: Tsc,
    /// Its frequency, measured against CLOCK_MONOTONIC_RAW at the start.
    pub clock: CycleClock,
    /// Ticks of the timing itself (the least of many empty timings, set
    /// by [`super::probes::prepare`]), taken off every sample.
    pub overhead_ticks: u64,
    /// L1d, L2, L3 share, in that order (or the one set given).
    pub levels: Vec<CacheLevel>,
    /// How long each set is left idle between its warm pass and its timed
    /// loads (`--cache-gap`; zero: none).
    pub gap: std::time::Duration,
}

impl CacheJob {
    /// The job on `cpu` for working sets `sets` (L1d, L2, L3 share from
    /// [`super::cache::plan`]), each with a seed of its own (the same on
    /// every run, so that runs walk the same orders) and two histograms:
    /// `buckets` of `width_ns` ns, and 1-cycle buckets over the same time
    /// (at most 1,000,000). Allocates the histograms; the walks are built
    /// by [`super::probes::prepare`] on the measuring thread.
    pub fn new(
        cpu: u32,
        sets: Vec<WorkingSet>,
        tsc: Tsc,
        clock: CycleClock,
        buckets: usize,
        width_ns: u64,
    ) -> CacheJob {
        let span_ns = buckets as f64 * width_ns as f64;
        let cycle_buckets = (span_ns * clock.ticks_per_ns.ceil()).clamp(1.0, 1e6) as usize;
        let levels = sets
            .into_iter()
            .enumerate()
            .map(|(i, set)| CacheLevel {
                set,
                walk: Walk::default(),
                seed: 0x6361_6368_6500 ^ (u64::from(cpu) << 8) ^ i as u64,
                at: 0,
                ns: Histogram::new(buckets, width_ns),
                cycles: Histogram::new(cycle_buckets, 1),
                huge_pages_kib: None,
            })
            .collect();
        CacheJob {
            tsc,
            clock,
            overhead_ticks: 0,
            levels,
            gap: std::time::Duration::ZERO,
        }
    }
}

/// Where the pci probe's reads go.
#[derive(Debug)]
pub enum PciSource {
    /// `pread` of 4 bytes of the function's open `config` at an offset.
    Config {
        /// The open `config` file.
        file: File,
        /// The dword's offset.
        offset: u64,
    },
    /// Volatile loads from a mapped memory BAR.
    Bar(syscalls::MappedRegister),
}

/// What the pci probe measures with.
#[derive(Debug)]
pub struct PciJob {
    /// The serialised counter.
    pub tsc: Tsc,
    /// Its frequency, measured at the start.
    pub clock: CycleClock,
    /// Ticks of an empty timing, set by [`super::probes::prepare`], taken off every sample.
    pub overhead_ticks: u64,
    /// The function and register.
    pub target: DeviceTarget,
    /// The open file or mapping.
    pub source: PciSource,
}

/// What the pci probe read back on one CPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PciReads {
    /// The function and register read.
    pub target: DeviceTarget,
    /// Cycle-counter ticks per ns (the TSC's GHz), measured at the start.
    pub tsc_ticks_per_ns: f64,
    /// Ticks of an empty timing, taken off every sample.
    pub timing_overhead_cycles: u64,
    /// Reads made, warm-up included.
    pub reads: u64,
    /// The value of the first read (little endian, as the device answered).
    pub first_value: Option<u32>,
    /// The value of the last read.
    pub last_value: Option<u32>,
    /// Reads whose value differed from the first.
    pub changed: u64,
    /// Config reads that returned fewer than 4 bytes (not timed).
    pub short_reads: u64,
}

/// What one thread measures and with what.
#[derive(Debug)]
pub struct Job {
    /// The probe.
    pub probe: ProbeKind,
    /// Pre-allocated histogram, filled by the loop.
    pub hist: Histogram,
    /// Samples per CPU (noise: periods) before stopping; `None`: until stopped.
    pub loops: Option<u64>,
    /// Interval / period in ns (timer, periodic, noise).
    pub interval_ns: u64,
    /// Iterations discarded before recording.
    pub warmup: u64,
    /// Noise: gap threshold, ns.
    pub noise_threshold_ns: u64,
    /// Noise: spin time per period, ns.
    pub noise_runtime_ns: u64,
    /// Noise: calibrated cycle counter (`None`: CLOCK_MONOTONIC_RAW).
    pub cycles: Option<CycleClock>,
    /// RTC: the open device, rate already set.
    pub rtc: Option<File>,
    /// `--explain`: the CPU and where slow samples go (timer, periodic).
    pub slow: Option<(u32, SlowSamples)>,
    /// Cache probe: the counter and the levels.
    pub cache: Option<CacheJob>,
    /// pci probe: the counter and the register.
    pub pci: Option<PciJob>,
}

/// Hands a slow sample to `--explain`'s reader, if any.
#[inline]
pub(super) fn report_slow(
    slow: &Option<(u32, SlowSamples)>,
    tid: i32,
    (deadline_ns, wake_ns): (u64, u64),
    spinning: bool,
) {
    if let Some((cpu, s)) = slow {
        if wake_ns.saturating_sub(deadline_ns) > s.threshold_ns {
            s.report(Sample {
                cpu: *cpu,
                tid,
                deadline_ns,
                wake_ns,
                spinning,
            });
        }
    }
}

/// Noise figures of one CPU (osnoise's columns).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NoiseStats {
    /// Time spent spinning, ns.
    pub runtime_ns: u64,
    /// Sum of gaps over the threshold, ns.
    pub noise_ns: u64,
    /// Largest gap, ns.
    pub max_gap_ns: u64,
    /// Number of gaps over the threshold.
    pub gaps: u64,
    /// Share of the runtime left to the task, percent.
    pub cpu_available_pct: f64,
    /// The threshold, ns.
    pub threshold_ns: u64,
}

/// What a loop produced.
#[derive(Debug)]
pub struct Output {
    /// The filled histogram.
    pub hist: Histogram,
    /// Loop iterations (wake-ups, pairs, noise periods, cache loads timed or not).
    pub iterations: u64,
    /// Periods skipped after late wake-ups (timer, periodic) or interrupts
    /// the RTC reported as missed.
    pub missed: u64,
    /// Noise figures (noise probe only).
    pub noise: Option<NoiseStats>,
    /// Per-level histograms (cache probe only; the walks emptied).
    pub cache: Option<CacheJob>,
    /// What was read back (pci probe only).
    pub pci: Option<PciReads>,
}

pub(super) fn done(stop: &AtomicBool, loops: Option<u64>, n: u64) -> bool {
    stop.load(Relaxed) || loops.is_some_and(|l| n >= l)
}
