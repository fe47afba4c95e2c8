//! What `compare` found: each phase's measurement reduced to a curve and a
//! table row ([`parse_measurement`], pure), the phases assembled into the
//! summary table ([`assemble`]), and [`Results`], which `results.json` holds.

use serde::Serialize;

use super::summary::{Curve, Interference, LevelRow, PhaseStats, RatioRow, SummaryTable};
use super::Options;
use crate::cpulist::CpuSet;
use crate::load::{LoadReport, StopReport};
use crate::measure::explain::{remedy, CauseTotal, Chain, Explained, Remedy};
use crate::measure::interrupts::Delta;
use crate::measure::machine::Machine;
use crate::measure::results::{CacheReport, CpuReport, Measurement, ProbeStatus, Tool};
use crate::measure::threads::ThreadsRan;
use crate::shield::{OffReport, OnReport};

/// The note shown when the machine is virtualised.
pub const VIRTUALISED_NOTE: &str = "On virtual machines a single max sample is driven by \
the hypervisor and swings by 100× between runs; compare p99.9 and over-threshold rates.";

/// The note shown when it is unknown whether the machine is virtualised.
pub const VIRTUALISATION_UNKNOWN_NOTE: &str = "Whether this machine is virtualised \
could not be told (no hypervisor flag, DMI or hypervisor node). If it is a virtual \
machine, a single max sample is driven by the hypervisor and swings by 100× between \
runs; compare p99.9 and over-threshold rates.";

/// Version of the `results.json` layout.
pub const SCHEMA_VERSION: u32 = 1;

/// A measurement reduced to what the table and the plot need.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measured {
    /// The ALL histogram (sum of the per-CPU ones).
    pub curve: Curve,
    /// Statistics with exact min/avg/max.
    pub stats: PhaseStats,
    /// Per-CPU interrupt and softirq deltas during the measurement.
    pub per_cpu: Vec<CpuNoise>,
    /// `--explain`: what delayed the samples over its threshold.
    pub explain: Option<PhaseCauses>,
    /// The cache probe's figures per level (empty for other probes).
    #[serde(default)]
    pub levels: Vec<LevelRow>,
}

/// The causes of one phase's slow samples, from `measure --explain`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseCauses {
    /// Samples slower than this were explained, µs.
    pub threshold_us: f64,
    /// Samples over the threshold.
    pub over_threshold: u64,
    /// Of those, the ones cut into causes.
    pub explained: u64,
    /// Every cause, most often the main one first.
    pub causes: Vec<CauseRow>,
    /// The slowest sample's chain as one line.
    pub slowest: Option<String>,
}

/// One cause of a phase, and what to do about it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CauseRow {
    /// Counts and times over the phase's slow samples.
    #[serde(flatten)]
    pub total: CauseTotal,
    /// Why it reaches the CPU and the next step (`null` for the wake-up's
    /// own path).
    pub remedy: Option<Remedy>,
}

impl PhaseCauses {
    /// The causes of a measurement's `--explain` result.
    pub fn of(e: &Explained) -> PhaseCauses {
        PhaseCauses {
            threshold_us: ns_to_us(e.threshold_ns),
            over_threshold: e.over_threshold,
            explained: e.explained,
            causes: e
                .causes
                .iter()
                .map(|c| CauseRow {
                    total: c.clone(),
                    remedy: remedy(c),
                })
                .collect(),
            slowest: e.worst.first().map(Chain::line),
        }
    }
}

/// Interrupts and softirqs that reached one measured CPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuNoise {
    /// The CPU.
    pub cpu: u32,
    /// `/proc/interrupts` deltas (as reported by `measure`).
    pub interrupts: Vec<Delta>,
    /// `/proc/softirqs` deltas.
    pub softirqs: Vec<Delta>,
    /// Other threads that ran on the CPU (as reported by `measure`).
    pub threads_ran: Option<ThreadsRan>,
}

fn ns_to_us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// Reduces the results of `cpushield measure` (one probe) to a curve and a
/// table row. Pure.
pub fn parse_measurement(
    phase: &str,
    measured: &Measurement,
    thresholds_us: &[f64],
) -> Result<Measured, String> {
    let probe = measured
        .results
        .first()
        .ok_or("the measurement produced no result")?;
    if probe.status != ProbeStatus::Ok {
        return Err(format!(
            "probe {} skipped: {}",
            probe.probe.name(),
            probe.skip_reason.as_deref().unwrap_or("no reason given")
        ));
    }
    let width_ns = Some(probe.histogram.bucket_width_ns)
        .filter(|&w| w > 0)
        .ok_or("bucket_width_ns is 0")?;
    let mut counts: Vec<u64> = Vec::new();
    for cpu in &probe.cpus {
        if counts.len() < cpu.histogram.len() {
            counts.resize(cpu.histogram.len(), 0);
        }
        for (sum, c) in counts.iter_mut().zip(&cpu.histogram) {
            *sum += c;
        }
    }
    let per_cpu = probe
        .cpus
        .iter()
        .map(|cpu| CpuNoise {
            cpu: cpu.cpu,
            interrupts: cpu.interrupts.clone(),
            softirqs: cpu.softirqs.clone(),
            threads_ran: cpu.threads_ran.clone(),
        })
        .collect();
    let curve = Curve {
        label: phase.to_string(),
        bucket_width_us: width_ns as f64 / 1000.0,
        counts,
        overflow: probe.cpus.iter().map(|c| c.stats.overflows).sum(),
    };
    let mut stats = PhaseStats::from_curve(&curve, thresholds_us);
    stats.interference = Some(
        Interference::from_counts(
            probe
                .cpus
                .iter()
                .flat_map(|c| &c.interrupts)
                .map(|d| (d.source.as_str(), d.count)),
            probe.cpus.iter().flat_map(|c| &c.softirqs).map(|d| d.count),
            probe.elapsed_s,
        )
        .with_threads(
            probe.cpus.iter().map(|c| c.threads_ran.as_ref()),
            probe.elapsed_s,
        ),
    );
    let all = &probe.all;
    stats.samples = all.samples;
    stats.min_us = all.min_ns.map(ns_to_us);
    stats.avg_us = all.avg_ns.map(|ns| ns / 1000.0);
    stats.max_us = all.max_ns.map(ns_to_us);
    // The engine's percentiles are clamped to the exact max.
    let pct = |p: f64| {
        all.percentiles
            .iter()
            .find(|x| x.p == p)
            .map(|x| x.value_ns.map(ns_to_us))
    };
    if let Some(v) = pct(99.0) {
        stats.p99_us = v;
    }
    if let Some(v) = pct(99.9) {
        stats.p999_us = v;
    }
    Ok(Measured {
        curve,
        stats,
        per_cpu,
        explain: probe.explain.as_ref().map(PhaseCauses::of),
        levels: cache_levels(phase, &probe.cpus, width_ns),
    })
}

/// The cache probe's levels of one phase, each over every measured CPU:
/// their histograms summed (`width_ns` buckets), the percentiles at bucket
/// resolution clamped to the exact largest load.
fn cache_levels(phase: &str, cpus: &[CpuReport], width_ns: u64) -> Vec<LevelRow> {
    let reports: Vec<&CacheReport> = cpus.iter().filter_map(|c| c.cache.as_ref()).collect();
    let Some(first) = reports.first() else {
        return Vec::new();
    };
    (first.levels.iter().enumerate())
        .map(|(k, level)| {
            let same: Vec<_> = reports.iter().filter_map(|r| r.levels.get(k)).collect();
            let mut counts: Vec<u64> = Vec::new();
            for l in &same {
                if counts.len() < l.histogram.len() {
                    counts.resize(l.histogram.len(), 0);
                }
                for (sum, c) in counts.iter_mut().zip(&l.histogram) {
                    *sum += c;
                }
            }
            let curve = Curve {
                label: level.set.level.clone(),
                bucket_width_us: width_ns as f64 / 1000.0,
                counts,
                overflow: same.iter().map(|l| l.stats.overflows).sum(),
            };
            let max_us = same
                .iter()
                .filter_map(|l| l.stats.max_ns)
                .max()
                .map(ns_to_us);
            let at = |q: f64| curve.quantile_us(q).map(|v| max_us.map_or(v, |m| v.min(m)));
            LevelRow {
                phase: phase.to_string(),
                level: level.set.level.clone(),
                bytes: level.set.bytes,
                samples: same.iter().map(|l| l.stats.samples).sum(),
                p50_us: at(0.5),
                p99_us: at(0.99),
                p999_us: at(0.999),
                max_us,
            }
        })
        .collect()
}

/// One phase as recorded in `results.json`.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseRecord {
    /// `idle`, `unshielded`, `shielded`.
    pub phase: &'static str,
    /// The measuring command line.
    pub command: Vec<String>,
    /// The background load (`None`: no load in this phase).
    pub load: Option<LoadReport>,
    /// How the load was stopped.
    pub load_stop: Option<StopReport>,
    /// The shield applied (shielded phase).
    pub shield: Option<OnReport>,
    /// The shield undone (shielded phase).
    pub unshield: Option<OffReport>,
    /// Seconds the phase took, load start to load stop.
    pub elapsed_s: f64,
    /// Curve, table row and per-CPU interrupt deltas.
    #[serde(flatten)]
    pub measured: Measured,
    /// The full output of `cpushield measure --json`.
    pub measurement: Measurement,
    /// The looks at the machine while it measured (`certify`), in time order.
    #[serde(default)]
    pub watch: Vec<super::watch::Watch>,
}

/// Everything `compare` found; serialised as `results.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Results {
    /// Layout version of this document.
    pub schema_version: u32,
    /// `cpushield` and its version.
    pub tool: Tool,
    /// When the first phase started (Unix seconds).
    pub started_unix_s: f64,
    /// True when Ctrl-C/SIGTERM ended the run early (phases may be missing).
    pub interrupted: bool,
    /// The request.
    pub options: Options,
    /// Online minus the measured CPUs.
    pub housekeeping: CpuSet,
    /// Who ran the load (`stress-ng` or `builtin`).
    pub load_driver: String,
    /// The machine.
    pub machine: Machine,
    /// Present when the machine is virtualised, or may be (unknown): how
    /// to read the figures there.
    pub virtualised_note: Option<&'static str>,
    /// Present when the shielded phase's CPUs were kicked by the kernel's
    /// idle load balancer: what it was and how to keep it off.
    #[serde(default)]
    pub balancer_note: Option<String>,
    /// The phases in order.
    pub phases: Vec<PhaseRecord>,
    /// The table.
    pub summary: SummaryTable,
    /// Unshielded/shielded and shielded/idle ratios.
    pub ratios: Vec<RatioRow>,
}

/// The table of the recorded phases. Pure.
pub fn assemble(phases: &[PhaseRecord], thresholds_us: &[f64]) -> SummaryTable {
    SummaryTable {
        thresholds_us: thresholds_us.to_vec(),
        rows: phases.iter().map(|p| p.measured.stats.clone()).collect(),
        resolution_us: super::summary::finest(phases.iter().map(|p| &p.measured.curve)),
        levels: (phases.iter())
            .flat_map(|p| p.measured.levels.iter().cloned())
            .collect(),
    }
}

/// The shielded phase of `phases`, when it ran.
pub fn shielded(phases: &[PhaseRecord]) -> Option<&PhaseRecord> {
    phases.iter().find(|p| p.phase == super::summary::SHIELDED)
}

/// Function-call IPIs and SCHED softirqs per second on a shielded CPU
/// above which the idle load balancer's kicks are named.
pub const BALANCER_PER_S: f64 = 10.0;

/// The kernel's idle load balancer on the shielded CPUs, when the shielded
/// phase shows it: at least [`BALANCER_PER_S`] function-call IPIs (`CAL`)
/// and as many SCHED softirqs a second on a measured CPU that `nohz_full=`
/// does not cover, reported as measured. A busy housekeeping CPU's tick
/// kicks an idle CPU of the kernel's idle-balance mask to balance for it
/// (`kick_ilb`: an IPI through `smp_call_function_single_async`, then
/// SCHED_SOFTIRQ); a CPU in that mask when its partition took its domain
/// away stays in it (tests/vm/probes/idle-kicks.sh, docs/shield.md).
pub fn balancer_note(phases: &[PhaseRecord], nohz_full: Option<&str>) -> Option<String> {
    let shielded = shielded(phases)?;
    let probe = shielded.measurement.results.first()?;
    let covered = nohz_full
        .and_then(|l| CpuSet::parse_list(l).ok())
        .unwrap_or_default();
    let seconds = probe.elapsed_s.max(f64::MIN_POSITIVE);
    let count = |d: &[crate::measure::interrupts::Delta], name: &str| {
        d.iter()
            .filter(|x| x.source == name)
            .map(|x| x.count)
            .sum::<u64>() as f64
            / seconds
    };
    let kicked: Vec<String> = probe
        .cpus
        .iter()
        .filter(|c| !covered.contains(c.cpu))
        .map(|c| {
            (
                c.cpu,
                count(&c.interrupts, "CAL"),
                count(&c.softirqs, "SCHED"),
            )
        })
        .filter(|&(_, cal, sched)| cal >= BALANCER_PER_S && sched >= BALANCER_PER_S)
        .map(|(cpu, cal, sched)| {
            format!("CPU {cpu}: {cal:.0} function-call IPIs and {sched:.0} SCHED softirqs a second")
        })
        .collect();
    if kicked.is_empty() {
        return None;
    }
    Some(format!(
        "{} reached the measured CPUs in the shielded phase, as idle-balance kicks do (kick_ilb: an IPI, then SCHED_SOFTIRQ, from the busy housekeeping CPUs). The shield takes each CPU offline and back once its partition stands, which takes it out of the kernel's idle-balance mask; a CPU that could not go offline (on's notes: hotplug_left) stays kicked unless booted with nohz_full= for it (cpushield boot-args); docs/shield.md, 'Idle-balance kicks'",
        kicked.join(", ")
    ))
}

/// What the report says about virtualisation: the note on max samples for
/// a virtual machine, a hedged one when unknown, nothing on bare metal.
pub fn virtualised_note(virtualised: Option<bool>) -> Option<&'static str> {
    match virtualised {
        Some(true) => Some(VIRTUALISED_NOTE),
        None => Some(VIRTUALISATION_UNKNOWN_NOTE),
        Some(false) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::record;
    use super::super::Phase;
    use super::*;

    #[test]
    fn the_idle_load_balancers_kicks_are_named_unless_nohz_full_covers_the_cpu() {
        use crate::measure::interrupts::Delta;
        let delta = |source: &str, count: u64| Delta {
            source: source.into(),
            count,
            description: String::new(),
        };
        let mut shielded = record(Phase::Shielded, 4000);
        let probe = &mut shielded.measurement.results[0];
        probe.elapsed_s = 20.0;
        probe.cpus[0].interrupts = vec![delta("LOC", 5000), delta("CAL", 1908)];
        probe.cpus[0].softirqs = vec![delta("SCHED", 1836), delta("TIMER", 40)];
        let phases = vec![record(Phase::Idle, 2000), shielded];
        let note = balancer_note(&phases, None).unwrap();
        assert!(
            note.starts_with("CPU 2: 95 function-call IPIs and 92 SCHED softirqs a second reached the measured CPUs in the shielded phase, as idle-balance kicks do"),
            "{note}"
        );
        // The cause and what clears it, not "only the boot line".
        assert!(
            note.contains("idle-balance mask")
                && note.contains("offline and back")
                && note.contains("hotplug_left"),
            "{note}"
        );
        assert_eq!(
            balancer_note(&phases, Some("2-3")),
            None,
            "nohz_full keeps it out"
        );
        assert!(balancer_note(&phases, Some("3")).is_some());
        let mut quiet = phases.clone();
        quiet[1].measurement.results[0].cpus[0].softirqs = vec![delta("SCHED", 20)];
        assert_eq!(balancer_note(&quiet, None), None);
    }
    use crate::measure::driver::Status;
    use crate::measure::testing::sample_run;

    #[test]
    fn parse_sums_cpus_and_takes_exact_stats() {
        // sample_run: CPU 1 at 1.4, 2.4, 2.4, 3.4 and 9.4 µs (past the 4
        // buckets), CPU 2 at 0.4 and 1.4 µs.
        let printed = serde_json::to_string(&Measurement::of(&sample_run())).unwrap();
        let back: Measurement = serde_json::from_str(&printed).unwrap();
        let m = parse_measurement("idle", &back, &[2.0]).unwrap();
        assert_eq!(m.curve.counts, vec![1, 2, 2, 1]);
        assert_eq!(m.curve.overflow, 1);
        assert_eq!(m.curve.bucket_width_us, 1.0);
        assert_eq!(m.stats.samples, 7);
        assert_eq!(m.stats.min_us, Some(0.4));
        assert_eq!(m.stats.max_us, Some(9.4));
        assert_eq!(m.stats.over, vec![4]);
        assert_eq!(m.per_cpu.iter().map(|c| c.cpu).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(m.per_cpu[0].interrupts[0].source, "LOC");
        // 7 local timer interrupts on each of 2 CPUs in the run's 5 ms.
        let i = m.stats.interference.unwrap();
        assert!((i.timer_per_s - 14.0 / 0.005).abs() < 1e-6, "{i:?}");
        assert_eq!(i.device_per_s, 0.0);
        // One kworker ran 3 times on each.
        assert_eq!(i.threads, Some(2));
        assert!((i.thread_runs_per_s.unwrap() - 6.0 / 0.005).abs() < 1e-6);
        assert_eq!(
            m.per_cpu[1].threads_ran.as_ref().unwrap().busiest[0].name,
            "kworker/2:1"
        );
    }

    #[test]
    fn parse_rejects_skipped_probe() {
        let mut run = sample_run();
        run.probes[0].status = Status::Skipped("no RTC".into());
        let m = Measurement::of(&run);
        assert!(parse_measurement("idle", &m, &[100.0])
            .unwrap_err()
            .contains("no RTC"));
        let mut none = m.clone();
        none.results.clear();
        assert!(parse_measurement("idle", &none, &[100.0]).is_err());
    }

    #[test]
    fn assemble_gives_rows_in_order_and_ratios() {
        let phases = vec![
            record(Phase::Idle, 2000),
            record(Phase::Unshielded, 8000),
            record(Phase::Shielded, 4000),
        ];
        let t = assemble(&phases, &[2.0]);
        let names: Vec<&str> = t.rows.iter().map(|r| r.phase.as_str()).collect();
        assert_eq!(names, ["idle", "unshielded", "shielded"]);
        let r = t.ratios();
        assert_eq!(r[0].metric, "max");
        assert_eq!(r[0].unshielded_over_shielded.to_string(), "2.00×");
        assert_eq!(r[0].shielded_over_idle.to_string(), "2.00×");
    }

    #[test]
    fn the_cache_probes_levels_are_summed_over_cpus_and_tabled_per_phase() {
        use crate::measure::cache::{SizeSource, WorkingSet};
        use crate::measure::histogram::Histogram;
        use crate::measure::results::{CacheLevelReport, CycleStats};
        let level = |name: &str, bytes: u64, loads_ns: &[u64]| {
            let mut h = Histogram::new(100, 1);
            for (i, &ns) in loads_ns.iter().enumerate() {
                h.record(i as u64, ns);
            }
            CacheLevelReport {
                set: WorkingSet {
                    level: name.into(),
                    cache_bytes: Some(bytes),
                    shared_by: Some(1),
                    bytes,
                    lines: bytes / 64,
                    source: SizeSource::Sysfs,
                    note: None,
                },
                stats: h.summary(),
                cycles: CycleStats::of(&h),
                histogram: h.counts().to_vec(),
                cycles_histogram: Vec::new(),
                huge_pages_kib: None,
            }
        };
        let report = |l1: &[u64], l3: &[u64]| CacheReport {
            tsc_ticks_per_ns: 2.5,
            timing_overhead_cycles: 30,
            loads_per_round: 8192,
            idle_gap_ms: 10,
            levels: vec![level("L1d", 32 << 10, l1), level("L3", 2 << 20, l3)],
        };
        let mut m = super::super::testing::measured(&[1000]);
        let probe = &mut m.results[0];
        probe.histogram.bucket_width_ns = 1;
        let mut other = probe.cpus[0].clone();
        other.cpu = 3;
        probe.cpus[0].cache = Some(report(&[2, 2, 2, 3], &[40, 40, 41, 90]));
        other.cache = Some(report(&[2, 2, 2, 2], &[40, 40, 40, 40]));
        probe.cpus.push(other);
        let measured = parse_measurement("affinity", &m, &[100.0]).unwrap();
        let rows = &measured.levels;
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].level.as_str(), rows[0].samples), ("L1d", 8));
        assert_eq!(rows[1].bytes, 2 << 20);
        // 1 ns buckets: a percentile is its bucket's upper edge, clamped
        // to the largest load (90 ns, on CPU 2 only).
        assert_eq!(rows[1].p50_us, Some(0.041));
        assert_eq!(rows[1].max_us, Some(0.09));
        assert_eq!(rows[1].p999_us, Some(0.09));
        let phases = vec![PhaseRecord {
            measured,
            ..super::super::testing::record(Phase::Idle, 2000)
        }];
        let table = assemble(&phases, &[100.0]);
        assert_eq!(table.levels.len(), 2);
        let text = crate::report::table::render_text(&table);
        let l3 = text
            .lines()
            .find(|l| l.contains(" L3 "))
            .unwrap_or_default();
        let cells: Vec<&str> = l3.split_whitespace().collect();
        assert_eq!(
            cells,
            ["affinity", "L3", "2", "MiB", "8", "0.041", "0.090", "0.090", "0.090"],
            "{text}"
        );
        assert!(text.contains("per level:"), "{text}");
    }
}
