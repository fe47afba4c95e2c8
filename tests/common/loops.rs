//! Measuring jobs as the driver builds them, run on the calling thread,
//! for the tests that watch what a loop does (allocations, page faults).

use std::sync::atomic::AtomicBool;

use cpushield::measure::args::ProbeKind;
use cpushield::measure::cache;
use cpushield::measure::device::{DeviceTarget, Region};
use cpushield::measure::histogram::Histogram;
use cpushield::measure::probes::{self, Job, Output};
use cpushield::measure::progress::Progress;
use cpushield::sys::pci::Bdf;
use cpushield::sys::syscalls::Tsc;

/// The probes a test can run without a device (rtc needs /dev/rtc; pci
/// reads a regular file standing in for a function's `config`).
const PROBES: [(ProbeKind, u64, u64); 6] = [
    // (probe, samples or periods, interval ns)
    (ProbeKind::Timer, 2000, 50_000),
    (ProbeKind::Periodic, 2000, 50_000),
    (ProbeKind::Gtod, 20_000, 0),
    (ProbeKind::Noise, 200, 1_000_000),
    (ProbeKind::Cache, 50_000, 0),
    (ProbeKind::Pci, 20_000, 0),
];

/// [`PROBES`] but cache and pci where the architecture has no counter to
/// time them with (the driver skips them there, saying why).
pub fn probes() -> Vec<(ProbeKind, u64, u64)> {
    PROBES
        .into_iter()
        .filter(|(p, _, _)| !matches!(p, ProbeKind::Cache | ProbeKind::Pci) || Tsc::new().is_ok())
        .collect()
}

/// A pci job over an unlinked temporary file of 256 bytes standing in
/// for a function's `config` (no device is read), reading offset 8.
fn pci_job(clock: Option<probes::CycleClock>) -> Option<probes::PciJob> {
    use std::io::Write;
    let clock = clock?;
    let mut file = tempfile::tempfile().expect("a temporary file");
    file.write_all(&[0x5a; 256]).expect("writing it");
    Some(probes::PciJob {
        tsc: Tsc::new().expect("a cycle counter where one calibrates"),
        clock,
        overhead_ticks: 0,
        target: DeviceTarget {
            address: Bdf::parse("0000:00:1f.0").expect("an address"),
            region: Region::Config,
            offset: 8,
            region_bytes: 256,
            file: "config".into(),
        },
        source: probes::PciSource::Config { file, offset: 8 },
    })
}

/// A job of `buckets` 1-µs buckets (1 ns for gtod and cache, 100 ns for pci), `loops`
/// samples (noise: periods) after 10 warm-up iterations, prepared as the
/// measuring thread prepares it (cache: its walks built, at the sizes
/// assumed without sysfs, 32 KiB, 1 MiB and 2 MiB; at most 100,000
/// buckets per level).
pub fn job(probe: ProbeKind, loops: u64, interval_ns: u64, buckets: usize) -> Job {
    let width = match probe {
        ProbeKind::Gtod | ProbeKind::Cache => 1,
        ProbeKind::Pci => 100,
        _ => 1000,
    };
    let cycles = probes::CycleClock::calibrate(20);
    let cache = match (probe, cycles) {
        (ProbeKind::Cache, Some(clock)) => Some(probes::CacheJob::new(
            0,
            cache::working_sets(0, &[]),
            Tsc::new().expect("a cycle counter where one calibrates"),
            clock,
            buckets.min(100_000),
            1,
        )),
        _ => None,
    };
    let mut job = Job {
        probe,
        hist: Histogram::new(buckets, width),
        loops: Some(loops),
        interval_ns,
        warmup: 10,
        noise_threshold_ns: 1000,
        noise_runtime_ns: 100_000,
        cycles,
        rtc: None,
        slow: None,
        cache,
        pci: if probe == ProbeKind::Pci {
            pci_job(cycles)
        } else {
            None
        },
    };
    probes::prepare(&mut job);
    job
}

/// Runs `job`'s loop on this thread, SCHED_OTHER, until its loop count.
pub fn run(job: Job) -> Output {
    probes::run(job, &AtomicBool::new(false), &Progress::default()).expect("the probe's loop")
}
