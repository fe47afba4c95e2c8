//! The noise probe (osnoise/oslat's method): a thread spins reading a
//! clock for a runtime each period; every gap between two reads over the
//! threshold is noise, and with `--explain` each such gap goes to the
//! trace's reader to be cut into what ran in it.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use super::job::{done, report_slow, Job, NoiseStats, Output};
use super::progress::Progress;
use crate::sys::syscalls;

/// osnoise/oslat: spin reading a clock for `runtime` per period; every gap
/// between consecutive reads over the threshold is noise.
pub(super) fn noise(
    mut job: Job,
    stop: &AtomicBool,
    progress: &Progress,
    ticks_per_ns: f64,
    read: impl Fn() -> u64,
) -> Output {
    let period = job.interval_ns;
    let runtime = job.noise_runtime_ns.min(period);
    let runtime_ticks = (runtime as f64 * ticks_per_ns) as u64;
    let threshold_ticks = (job.noise_threshold_ns as f64 * ticks_per_ns) as u64;
    for _ in 0..job.warmup.saturating_mul(1000) {
        std::hint::black_box(read());
    }
    let (mut n, mut periods, mut max) = (0u64, 0u64, 0u64);
    let (mut noise_ticks, mut spun_ticks) = (0u64, 0u64);
    let mut next_period = syscalls::monotonic_ns();
    let tid = syscalls::gettid();
    'periods: while !done(stop, job.loops, periods) {
        let start = read();
        let end = start.wrapping_add(runtime_ticks);
        let mut prev = start;
        while prev < end {
            let mut now = read();
            let gap = now.wrapping_sub(prev);
            if gap > threshold_ticks {
                let ns = (gap as f64 / ticks_per_ns) as u64;
                job.hist.record(n, ns);
                n += 1;
                noise_ticks += gap;
                max = max.max(ns);
                progress.publish(n, max, ns);
                if job.slow.is_some() {
                    // The gap in the trace's clock, ended by this read:
                    // the counter's own clock drifts from it over a run.
                    let end = syscalls::monotonic_ns();
                    report_slow(&job.slow, tid, (end.saturating_sub(ns), end), true);
                    now = read();
                }
            }
            prev = now;
            if stop.load(Relaxed) {
                spun_ticks += prev.wrapping_sub(start);
                periods += 1;
                break 'periods;
            }
        }
        spun_ticks += prev.wrapping_sub(start);
        periods += 1;
        // between periods: outside the spin, so a copy is not a gap
        progress.offer(&job.hist);
        next_period += period;
        if runtime < period {
            // EINTR just shortens the pause; the next period starts anyway.
            let _ = syscalls::sleep_until_monotonic_ns(next_period);
        }
    }
    let to_ns = |t: u64| (t as f64 / ticks_per_ns) as u64;
    let (runtime_ns, noise_ns) = (to_ns(spun_ticks), to_ns(noise_ticks));
    let stats = NoiseStats {
        runtime_ns,
        noise_ns,
        max_gap_ns: max,
        gaps: n,
        cpu_available_pct: if runtime_ns > 0 {
            100.0 * (1.0 - noise_ns as f64 / runtime_ns as f64).max(0.0)
        } else {
            0.0
        },
        threshold_ns: job.noise_threshold_ns,
    };
    Output {
        hist: job.hist,
        iterations: periods,
        missed: 0,
        noise: Some(stats),
        cache: None,
        pci: None,
    }
}
