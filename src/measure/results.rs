//! The typed results of a measurement: what `cpushield measure --json`
//! prints and what `compare` reads back, one set of `Serialize` +
//! `Deserialize` structs for both sides.
//!
//! Field names and meanings are documented on the structs below and in
//! `docs/measure-json.md`. [`SCHEMA_VERSION`] changes when a field is
//! removed or changes meaning; adding fields does not change it.

use serde::{Deserialize, Serialize};

use super::args::{Config, ProbeKind};
use super::cache::WorkingSet;
use super::driver::{ContextSwitches, ProbeResult, Run, Status};
use super::explain::Explained;
use super::histogram::{Histogram, Summary};
use super::interrupts::Delta;
use super::machine::Machine;
use super::probes::{CacheJob, NoiseStats, PciReads};
use super::threads::ThreadsRan;

/// Version of the JSON output's schema.
pub const SCHEMA_VERSION: u32 = 1;

/// The JSON document `cpushield measure --json` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `{"name": "cpushield", "version": "x.y.z"}`.
    pub tool: Tool,
    /// Start of the run, seconds since the Unix epoch.
    pub started_unix_s: f64,
    /// Whether Ctrl-C / SIGTERM ended the run early (results are still valid).
    pub interrupted: bool,
    /// The machine.
    pub machine: Machine,
    /// The validated options.
    pub config: Config,
    /// One entry per probe, in the order run.
    pub results: Vec<ProbeReport>,
}

/// Name and version of the tool that wrote a report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    /// Always `cpushield`.
    pub name: String,
    /// The crate version.
    pub version: String,
}

impl Tool {
    /// This build of cpushield.
    pub fn this() -> Tool {
        Tool {
            name: "cpushield".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }
}

/// Whether a probe ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeStatus {
    /// It ran.
    Ok,
    /// It could not run here (`skip_reason` says why).
    Skipped,
}

/// One probe's result in JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeReport {
    /// `timer`, `rtc`, `noise`, `gtod`, `periodic` or `cache`.
    pub probe: ProbeKind,
    /// `ok` or `skipped`.
    pub status: ProbeStatus,
    /// Why the probe was skipped (`null` when it ran).
    pub skip_reason: Option<String>,
    /// A remark (e.g. rtc measured on one CPU only).
    pub note: Option<String>,
    /// What a sample is: `wakeup_latency` (timer, periodic, rtc), `gap`
    /// (noise: one gap over the threshold), `gettime_pair` (gtod),
    /// `load_latency` (cache: one load of a walk, every level),
    /// `register_read` (pci: one 4-byte read of the device's register).
    pub sample: String,
    /// Interval or period in ns; `null` for rtc (fixed 2048 Hz) and gtod.
    pub interval_ns: Option<u64>,
    /// Wall time of the run, s.
    pub elapsed_s: f64,
    /// Shape of every histogram of this probe.
    pub histogram: HistogramShape,
    /// Per-CPU results, in CPU order.
    pub cpus: Vec<CpuReport>,
    /// All CPUs together (its `overflow_at` is empty: indices are per CPU).
    pub all: Summary,
    /// `--explain`: what delayed the samples over its threshold (`null`
    /// without it, and for probes it does not cover).
    #[serde(default)]
    pub explain: Option<Explained>,
}

/// Shape of a probe's histograms: bucket `i` holds `[i·w, (i+1)·w)` ns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistogramShape {
    /// Bucket width `w`, ns.
    pub bucket_width_ns: u64,
    /// Number of buckets; values at or past `buckets·w` are overflows.
    pub buckets: usize,
}

/// One CPU's result in JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuReport {
    /// The CPU number.
    pub cpu: u32,
    /// Samples, min, avg, max, stddev, percentiles, overflows (all ns).
    pub stats: Summary,
    /// Loop iterations (warm-up included): wake-ups, pairs, noise periods;
    /// cache: loads, the untimed passes included.
    pub iterations: u64,
    /// Periods skipped after a late wake-up / RTC interrupts missed.
    pub missed_periods: u64,
    /// Noise figures (`null` except for the noise probe).
    pub noise: Option<NoiseStats>,
    /// Per-level results (`null` except for the cache probe).
    #[serde(default)]
    pub cache: Option<CacheReport>,
    /// The pci probe's register and what was read back (`null` for the
    /// other probes).
    #[serde(default)]
    pub device: Option<PciReads>,
    /// The measuring thread's context switches during the loop.
    pub context_switches: Option<ContextSwitches>,
    /// Interrupts on this CPU during the run (/proc/interrupts deltas), most first.
    pub interrupts: Vec<Delta>,
    /// Softirqs on this CPU during the run (/proc/softirqs deltas), most first.
    pub softirqs: Vec<Delta>,
    /// Other threads that ran on this CPU during the run (at least);
    /// `null` when the threads could not be read.
    #[serde(default)]
    pub threads_ran: Option<ThreadsRan>,
    /// Bucket counts, trailing zero buckets omitted.
    pub histogram: Vec<u64>,
    /// The largest sample of each whole second of the run, ns, in time
    /// order (0 for a second without a sample); absent when the run
    /// lasted less than a second.
    #[serde(default)]
    pub per_second_max_ns: Vec<u64>,
    /// System Management Interrupts this CPU took during the run (the
    /// firmware's, invisible to the kernel: `MSR_SMI_COUNT`, Intel);
    /// `null` where the counter cannot be read (no `msr` module, another
    /// vendor, not root).
    #[serde(default)]
    pub smis: Option<u64>,
}

/// The cache probe's results on one CPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheReport {
    /// Cycle-counter ticks per ns, measured against CLOCK_MONOTONIC_RAW
    /// at the start (the TSC's frequency in GHz).
    pub tsc_ticks_per_ns: f64,
    /// Ticks of an empty timing (the least of 10,000), taken off every sample.
    pub timing_overhead_cycles: u64,
    /// Timed loads per level per round (after one untimed pass).
    pub loads_per_round: u64,
    /// ms each working set was left idle between its warm pass and its
    /// timed loads (`--cache-gap`; 0: none).
    #[serde(default)]
    pub idle_gap_ms: u64,
    /// L1d, L2 and L3 share, in that order (or the one set given).
    pub levels: Vec<CacheLevelReport>,
}

/// One level of the cache probe on one CPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheLevelReport {
    /// The working set: `level`, `cache_bytes`, `shared_by`, `bytes`,
    /// `lines`, `source`, `note`.
    #[serde(flatten)]
    pub set: WorkingSet,
    /// Load latency in ns: samples, min, avg, max, percentiles.
    pub stats: Summary,
    /// Load latency in cycles (counter ticks).
    pub cycles: CycleStats,
    /// ns bucket counts (the probe's bucket shape), trailing zeros omitted.
    pub histogram: Vec<u64>,
    /// 1-cycle bucket counts, trailing zeros omitted.
    pub cycles_histogram: Vec<u64>,
    /// KiB of transparent huge pages in the mappings holding the set
    /// (`/proc/self/smaps`), `null` when unread: a set of 2 MiB or more is
    /// advised for them; 0 means its loads also pay 4 KiB pages' TLB misses.
    #[serde(default)]
    pub huge_pages_kib: Option<u64>,
}

/// Statistics of a histogram of cycles (1-cycle buckets).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CycleStats {
    /// Samples.
    pub samples: u64,
    /// Smallest (exact).
    pub min: Option<u64>,
    /// Median.
    pub p50: Option<u64>,
    /// 99th percentile.
    pub p99: Option<u64>,
    /// 99.9th percentile.
    pub p99_9: Option<u64>,
    /// Largest (exact).
    pub max: Option<u64>,
    /// Samples past the last bucket (their percentiles are `null`).
    pub overflows: u64,
}

impl CycleStats {
    /// The statistics of `h`, whose "ns" are cycles.
    pub fn of(h: &Histogram) -> CycleStats {
        CycleStats {
            samples: h.samples(),
            min: h.min_ns(),
            p50: h.percentile(50.0),
            p99: h.percentile(99.0),
            p99_9: h.percentile(99.9),
            max: h.max_ns(),
            overflows: h.overflows(),
        }
    }
}

impl CacheReport {
    /// The report of a cache job after its loop.
    pub fn of(c: &CacheJob) -> CacheReport {
        CacheReport {
            tsc_ticks_per_ns: c.clock.ticks_per_ns,
            timing_overhead_cycles: c.overhead_ticks,
            loads_per_round: super::probes::CACHE_LOADS_PER_ROUND,
            idle_gap_ms: c.gap.as_millis() as u64,
            levels: c
                .levels
                .iter()
                .map(|l| CacheLevelReport {
                    set: l.set.clone(),
                    stats: l.ns.summary(),
                    cycles: CycleStats::of(&l.cycles),
                    histogram: trimmed(&l.ns).to_vec(),
                    cycles_histogram: trimmed(&l.cycles).to_vec(),
                    huge_pages_kib: l.huge_pages_kib,
                })
                .collect(),
        }
    }
}

fn sample_kind(p: ProbeKind) -> &'static str {
    match p {
        ProbeKind::Timer | ProbeKind::Periodic | ProbeKind::Rtc => "wakeup_latency",
        ProbeKind::Noise => "gap",
        ProbeKind::Gtod => "gettime_pair",
        ProbeKind::Cache => "load_latency",
        ProbeKind::Pci => "register_read",
    }
}

fn trimmed(h: &Histogram) -> &[u64] {
    let c = h.counts();
    let end = c.iter().rposition(|&x| x != 0).map_or(0, |i| i + 1);
    &c[..end]
}

impl Measurement {
    /// The document of a run.
    pub fn of(run: &Run) -> Measurement {
        Measurement {
            schema_version: SCHEMA_VERSION,
            tool: Tool::this(),
            started_unix_s: run.started_unix_s,
            interrupted: run.interrupted,
            machine: run.machine.clone(),
            config: run.config.clone(),
            results: run.probes.iter().map(ProbeReport::of).collect(),
        }
    }
}

impl ProbeReport {
    fn of(p: &ProbeResult) -> ProbeReport {
        let (status, skip_reason) = match &p.status {
            Status::Ok => (ProbeStatus::Ok, None),
            Status::Skipped(r) => (ProbeStatus::Skipped, Some(r.clone())),
        };
        ProbeReport {
            probe: p.probe,
            status,
            skip_reason,
            note: p.note.clone(),
            sample: sample_kind(p.probe).into(),
            interval_ns: p.interval_ns,
            elapsed_s: p.elapsed.as_secs_f64(),
            histogram: HistogramShape {
                bucket_width_ns: p.all.width_ns(),
                buckets: p.all.counts().len(),
            },
            cpus: p
                .cpus
                .iter()
                .map(|c| CpuReport {
                    cpu: c.cpu,
                    stats: c.hist.summary(),
                    iterations: c.iterations,
                    missed_periods: c.missed,
                    noise: c.noise.clone(),
                    cache: c.cache.as_ref().map(CacheReport::of),
                    device: c.pci.clone(),
                    context_switches: c.context_switches,
                    interrupts: c.interrupts.clone(),
                    softirqs: c.softirqs.clone(),
                    threads_ran: c.threads_ran.clone(),
                    histogram: trimmed(&c.hist).to_vec(),
                    per_second_max_ns: c.per_second_max_ns.clone(),
                    smis: c.smis,
                })
                .collect(),
            all: p.all.summary(),
            explain: p.explain.clone(),
        }
    }
}
