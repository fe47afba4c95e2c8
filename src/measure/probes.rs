//! The measuring loops, one per probe, run on a pinned real-time thread.
//!
//! Everything a loop needs is allocated before it starts ([`Job`] owns a
//! full-size [`Histogram`]); inside a loop there is no allocation, no lock
//! and no I/O other than the probe's own wait (clock_nanosleep, a read of
//! /dev/rtc or of a timerfd). Progress is published through relaxed
//! atomics; the stop flag is a relaxed load.

use std::fs::File;
use std::io::Read;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use nix::errno::Errno;
use serde::{Deserialize, Serialize};

use super::args::ProbeKind;
use super::explain::{Sample, SlowSamples};
use super::histogram::Histogram;
use crate::sys::syscalls;

/// Live progress of one measuring thread, read by the main thread. Each
/// sits on a cache-line pair of its own (x86 fetches lines in pairs): the
/// measuring threads of neighbouring CPUs write theirs without sharing a
/// line, and the main thread's reads invalidate only the one it reads.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct Progress {
    /// Samples recorded so far.
    pub samples: AtomicU64,
    /// Largest sample so far, ns.
    pub max_ns: AtomicU64,
}

impl Progress {
    #[inline]
    fn publish(&self, samples: u64, max_ns: u64) {
        self.samples.store(samples, Relaxed);
        self.max_ns.store(max_ns, Relaxed);
    }
}

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
}

/// Hands a slow sample to `--explain`'s reader, if any.
#[inline]
fn report_slow(slow: &Option<(u32, SlowSamples)>, tid: i32, deadline_ns: u64, wake_ns: u64) {
    if let Some((cpu, s)) = slow {
        if wake_ns.saturating_sub(deadline_ns) > s.threshold_ns {
            s.report(Sample {
                cpu: *cpu,
                tid,
                deadline_ns,
                wake_ns,
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
    /// Loop iterations (wake-ups, pairs, noise periods).
    pub iterations: u64,
    /// Periods skipped after late wake-ups (timer, periodic) or interrupts
    /// the RTC reported as missed.
    pub missed: u64,
    /// Noise figures (noise probe only).
    pub noise: Option<NoiseStats>,
}

/// Why a loop failed.
#[derive(Debug, thiserror::Error)]
pub enum LoopError {
    /// The probe's wait syscall failed.
    #[error("{what} failed: {source}")]
    Syscall {
        /// The call.
        what: &'static str,
        /// Its error.
        source: std::io::Error,
    },
}

fn sys_err(what: &'static str, e: impl Into<std::io::Error>) -> LoopError {
    LoopError::Syscall {
        what,
        source: e.into(),
    }
}

fn errno_io(e: Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(e as i32)
}

/// Runs `job`'s loop on the calling thread until `stop` or its loop count.
pub fn run(job: Job, stop: &AtomicBool, progress: &Progress) -> Result<Output, LoopError> {
    let cycles = job.cycles;
    match job.probe {
        ProbeKind::Timer => timer(job, stop, progress),
        ProbeKind::Periodic => periodic(job, stop, progress),
        ProbeKind::Gtod => Ok(gtod(job, stop, progress)),
        ProbeKind::Noise => Ok(match cycles {
            // The cycle counter exists whenever calibration succeeded.
            Some(c) => noise(job, stop, progress, c.ticks_per_ns, || {
                syscalls::cycle_counter().unwrap_or(0)
            }),
            None => noise(job, stop, progress, 1.0, syscalls::monotonic_raw_ns),
        }),
        ProbeKind::Rtc => rtc(job, stop, progress),
    }
}

fn done(stop: &AtomicBool, loops: Option<u64>, n: u64) -> bool {
    stop.load(Relaxed) || loops.is_some_and(|l| n >= l)
}

/// cyclictest's loop: sleep to an absolute deadline on CLOCK_MONOTONIC,
/// latency = wake-up − deadline, then the next deadline is one interval on;
/// deadlines already in the past are skipped (counted), not caught up.
fn timer(mut job: Job, stop: &AtomicBool, progress: &Progress) -> Result<Output, LoopError> {
    let interval = job.interval_ns;
    let (mut n, mut iterations, mut missed, mut max) = (0u64, 0u64, 0u64, 0u64);
    let mut warmup = job.warmup;
    let tid = syscalls::gettid();
    let mut next = syscalls::monotonic_ns() + interval;
    while !done(stop, job.loops, n) {
        match syscalls::sleep_until_monotonic_ns(next) {
            Ok(()) => {}
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(sys_err("clock_nanosleep", errno_io(e))),
        }
        let now = syscalls::monotonic_ns();
        iterations += 1;
        let latency = now.saturating_sub(next);
        if warmup > 0 {
            warmup -= 1;
        } else {
            job.hist.record(n, latency);
            n += 1;
            max = max.max(latency);
            progress.publish(n, max);
            report_slow(&job.slow, tid, next, now);
        }
        next += interval;
        while now > next {
            next += interval;
            missed += 1;
        }
    }
    Ok(Output {
        hist: job.hist,
        iterations,
        missed,
        noise: None,
    })
}

/// A periodic thread on a kernel interval timer (timerfd, absolute start):
/// each read returns at the start of a period; lateness = return time −
/// the period's start, from the count of expirations so far.
fn periodic(mut job: Job, stop: &AtomicBool, progress: &Progress) -> Result<Output, LoopError> {
    use nix::sys::time::TimeSpec;
    use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
    let period = job.interval_ns;
    let tfd = TimerFd::new(ClockId::CLOCK_MONOTONIC, TimerFlags::TFD_CLOEXEC)
        .map_err(|e| sys_err("timerfd_create", errno_io(e)))?;
    let start = syscalls::monotonic_ns() + period;
    let ts = |ns: u64| TimeSpec::new((ns / 1_000_000_000) as _, (ns % 1_000_000_000) as _);
    tfd.set(
        Expiration::IntervalDelayed(ts(start), ts(period)),
        TimerSetTimeFlags::TFD_TIMER_ABSTIME,
    )
    .map_err(|e| sys_err("timerfd_settime", errno_io(e)))?;
    let mut file = File::from(
        tfd.as_fd()
            .try_clone_to_owned()
            .map_err(|e| sys_err("dup timerfd", e))?,
    );
    let (mut n, mut iterations, mut missed, mut max) = (0u64, 0u64, 0u64, 0u64);
    let mut expirations = 0u64;
    let mut warmup = job.warmup;
    let tid = syscalls::gettid();
    let mut buf = [0u8; 8];
    while !done(stop, job.loops, n) {
        match file.read_exact(&mut buf) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(sys_err("read timerfd", e)),
        }
        let now = syscalls::monotonic_ns();
        let count = u64::from_ne_bytes(buf).max(1);
        expirations += count;
        missed += count - 1;
        iterations += 1;
        let period_start = start + (expirations - 1) * period;
        let latency = now.saturating_sub(period_start);
        if warmup > 0 {
            warmup -= 1;
            continue;
        }
        job.hist.record(n, latency);
        n += 1;
        max = max.max(latency);
        progress.publish(n, max);
        report_slow(&job.slow, tid, period_start, now);
    }
    Ok(Output {
        hist: job.hist,
        iterations,
        missed,
        noise: None,
    })
}

/// Back-to-back clock_gettime(CLOCK_MONOTONIC) pairs: the time between them.
fn gtod(mut job: Job, stop: &AtomicBool, progress: &Progress) -> Output {
    for _ in 0..job.warmup.saturating_mul(1000) {
        std::hint::black_box(syscalls::monotonic_ns());
    }
    let (mut n, mut max) = (0u64, 0u64);
    loop {
        let a = syscalls::monotonic_ns();
        let b = syscalls::monotonic_ns();
        let d = b.saturating_sub(a);
        job.hist.record(n, d);
        n += 1;
        max = max.max(d);
        if n & 1023 == 0 {
            progress.publish(n, max);
            if stop.load(Relaxed) {
                break;
            }
        }
        if job.loops.is_some_and(|l| n >= l) {
            break;
        }
    }
    progress.publish(n, max);
    Output {
        hist: job.hist,
        iterations: n,
        missed: 0,
        noise: None,
    }
}

/// osnoise/oslat: spin reading a clock for `runtime` per period; every gap
/// between consecutive reads over the threshold is noise.
fn noise(
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
    'periods: while !done(stop, job.loops, periods) {
        let start = read();
        let end = start.wrapping_add(runtime_ticks);
        let mut prev = start;
        while prev < end {
            let now = read();
            let gap = now.wrapping_sub(prev);
            if gap > threshold_ticks {
                let ns = (gap as f64 / ticks_per_ns) as u64;
                job.hist.record(n, ns);
                n += 1;
                noise_ticks += gap;
                max = max.max(ns);
                progress.publish(n, max);
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
    }
}

/// The RTC's periodic interrupt rate.
pub const RTC_HZ: u64 = 2048;

/// realfeel: block in read(/dev/rtc) with periodic interrupts at 2048 Hz;
/// latency = time since the previous return − the RTC periods elapsed
/// (the read's value carries the number of interrupts since the last read
/// in its high bytes; more than one is a missed interrupt). A return that
/// comes early after a late one counts as 0.
fn rtc(mut job: Job, stop: &AtomicBool, progress: &Progress) -> Result<Output, LoopError> {
    let Some(mut dev) = job.rtc.take() else {
        return Err(sys_err(
            "rtc",
            std::io::Error::new(std::io::ErrorKind::NotFound, "no RTC device"),
        ));
    };
    syscalls::rtc_periodic_interrupts(&dev, true).map_err(|e| sys_err("RTC_PIE_ON", e))?;
    let result = rtc_loop(&mut job, &mut dev, stop, progress);
    let off = syscalls::rtc_periodic_interrupts(&dev, false);
    let (iterations, missed) = result?;
    off.map_err(|e| sys_err("RTC_PIE_OFF", e))?;
    Ok(Output {
        hist: job.hist,
        iterations,
        missed,
        noise: None,
    })
}

fn rtc_loop(
    job: &mut Job,
    dev: &mut File,
    stop: &AtomicBool,
    progress: &Progress,
) -> Result<(u64, u64), LoopError> {
    let mut buf = [0u8; std::mem::size_of::<libc::c_ulong>()];
    let (mut n, mut iterations, mut missed, mut max) = (0u64, 0u64, 0u64, 0u64);
    let mut warmup = job.warmup.max(1); // the first return only starts the clock
    let mut last = 0u64;
    while !done(stop, job.loops, n) {
        match dev.read_exact(&mut buf) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(sys_err("read /dev/rtc", e)),
        }
        let now = syscalls::monotonic_ns();
        // c_ulong is 32 bits wide on 32-bit targets: the cast is not a no-op there.
        #[allow(clippy::unnecessary_cast)]
        let irqs = (libc::c_ulong::from_ne_bytes(buf) as u64 >> 8).max(1);
        iterations += 1;
        let elapsed = now.saturating_sub(last);
        last = now;
        if warmup > 0 {
            warmup -= 1;
            continue;
        }
        missed += irqs - 1;
        // elapsed − irqs/2048 s, in integer ns without rounding the period.
        let latency = (elapsed * RTC_HZ).saturating_sub(irqs * 1_000_000_000) / RTC_HZ;
        job.hist.record(n, latency);
        n += 1;
        max = max.max(latency);
        progress.publish(n, max);
    }
    Ok((iterations, missed))
}

/// Touches `bytes` of stack so that the pages a loop may use are present
/// (and, under mlockall, locked) before it starts.
#[inline(never)]
pub fn prefault_stack() {
    const BYTES: usize = 256 * 1024;
    let mut buf = [0u8; BYTES];
    let mut i = 0;
    while i < BYTES {
        buf[i] = 1;
        i += 4096;
    }
    std::hint::black_box(&buf);
}
