//! Measuring jobs as the driver builds them, run on the calling thread,
//! for the tests that watch what a loop does (allocations, page faults).

use std::sync::atomic::AtomicBool;

use cpushield::measure::args::ProbeKind;
use cpushield::measure::cache;
use cpushield::measure::histogram::Histogram;
use cpushield::measure::probes::{self, Job, Output, Progress};
use cpushield::sys::syscalls::Tsc;

/// The probes a test can run without a device (rtc needs /dev/rtc).
const PROBES: [(ProbeKind, u64, u64); 5] = [
    // (probe, samples or periods, interval ns)
    (ProbeKind::Timer, 2000, 50_000),
    (ProbeKind::Periodic, 2000, 50_000),
    (ProbeKind::Gtod, 20_000, 0),
    (ProbeKind::Noise, 200, 1_000_000),
    (ProbeKind::Cache, 50_000, 0),
];

/// [`PROBES`] but cache where the architecture has no counter to time it
/// with (the driver skips it there, saying why).
pub fn probes() -> Vec<(ProbeKind, u64, u64)> {
    PROBES
        .into_iter()
        .filter(|(p, _, _)| *p != ProbeKind::Cache || Tsc::new().is_ok())
        .collect()
}

/// A job of `buckets` 1-µs buckets (1 ns for gtod and cache), `loops`
/// samples (noise: periods) after 10 warm-up iterations, prepared as the
/// measuring thread prepares it (cache: its walks built, at the sizes
/// assumed without sysfs, 32 KiB, 1 MiB and 2 MiB; at most 100,000
/// buckets per level).
pub fn job(probe: ProbeKind, loops: u64, interval_ns: u64, buckets: usize) -> Job {
    let ns_buckets = matches!(probe, ProbeKind::Gtod | ProbeKind::Cache);
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
        hist: Histogram::new(buckets, if ns_buckets { 1 } else { 1000 }),
        loops: Some(loops),
        interval_ns,
        warmup: 10,
        noise_threshold_ns: 1000,
        noise_runtime_ns: 100_000,
        cycles,
        rtc: None,
        slow: None,
        cache,
    };
    probes::prepare(&mut job);
    job
}

/// Runs `job`'s loop on this thread, SCHED_OTHER, until its loop count.
pub fn run(job: Job) -> Output {
    probes::run(job, &AtomicBool::new(false), &Progress::default()).expect("the probe's loop")
}
