//! Measuring jobs as the driver builds them, run on the calling thread,
//! for the tests that watch what a loop does (allocations, page faults).

use std::sync::atomic::AtomicBool;

use cpushield::measure::args::ProbeKind;
use cpushield::measure::histogram::Histogram;
use cpushield::measure::probes::{self, Job, Output, Progress};

/// The probes a test can run without a device (rtc needs /dev/rtc).
pub const PROBES: [(ProbeKind, u64, u64); 4] = [
    // (probe, samples or periods, interval ns)
    (ProbeKind::Timer, 2000, 50_000),
    (ProbeKind::Periodic, 2000, 50_000),
    (ProbeKind::Gtod, 20_000, 0),
    (ProbeKind::Noise, 200, 1_000_000),
];

/// A job of `buckets` 1-µs buckets (1 ns for gtod), `loops` samples
/// (noise: periods) after 10 warm-up iterations.
pub fn job(probe: ProbeKind, loops: u64, interval_ns: u64, buckets: usize) -> Job {
    Job {
        probe,
        hist: Histogram::new(buckets, if probe == ProbeKind::Gtod { 1 } else { 1000 }),
        loops: Some(loops),
        interval_ns,
        warmup: 10,
        noise_threshold_ns: 1000,
        noise_runtime_ns: 100_000,
        cycles: probes::CycleClock::calibrate(20),
        rtc: None,
        slow: None,
    }
}

/// Runs `job`'s loop on this thread, SCHED_OTHER, until its loop count.
pub fn run(job: Job) -> Output {
    probes::run(job, &AtomicBool::new(false), &Progress::default()).expect("the probe's loop")
}
