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
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use nix::errno::Errno;

use super::args::ProbeKind;
use super::cache::Walk;
use super::progress::Progress;
use crate::sys::syscalls;

use super::job::{done, report_slow};
pub use super::job::{
    CacheJob, CacheLevel, CycleClock, Job, NoiseStats, Output, PciJob, PciReads, PciSource,
    CACHE_LOADS_PER_ROUND,
};
use super::noise::noise;

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
    /// The job lacks what its probe needs (a cache job without its counter
    /// or walks: [`prepare`] was not called).
    #[error("the {0} probe's job was not prepared")]
    NotPrepared(&'static str),
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
        ProbeKind::Cache => cache(job, stop, progress),
        ProbeKind::Pci => pci(job, stop, progress),
    }
}

/// The part of a job's set-up that belongs on the measuring thread, after
/// it is pinned and before its loop: the cache probe's walks are built
/// (allocated and written, so their pages are on this CPU's memory node
/// and present) and, for the cache and pci probes, the timing's own
/// overhead is measured. Nothing for the other probes.
pub fn prepare(job: &mut Job) {
    if let Some(p) = job.pci.as_mut() {
        let tsc = p.tsc;
        p.overhead_ticks = (0..10_000)
            .map(|_| tsc.time(|| std::hint::black_box(0usize)).1)
            .min()
            .unwrap_or(0);
    }
    if let Some(c) = job.cache.as_mut() {
        for level in &mut c.levels {
            level.walk = Walk::new(level.set.lines as usize, level.seed);
            level.at = level.walk.start();
            level.huge_pages_kib = super::cache::huge_pages_kib(level.walk.span());
        }
        let tsc = c.tsc;
        c.overhead_ticks = (0..10_000)
            .map(|_| tsc.time(|| std::hint::black_box(0usize)).1)
            .min()
            .unwrap_or(0);
    }
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
            progress.publish(n, max, latency);
            progress.offer(&job.hist);
            report_slow(&job.slow, tid, (next, now), false);
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
        cache: None,
        pci: None,
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
        progress.publish(n, max, latency);
        progress.offer(&job.hist);
        report_slow(&job.slow, tid, (period_start, now), false);
    }
    Ok(Output {
        hist: job.hist,
        iterations,
        missed,
        noise: None,
        cache: None,
        pci: None,
    })
}

/// Back-to-back clock_gettime(CLOCK_MONOTONIC) pairs: the time between them.
fn gtod(mut job: Job, stop: &AtomicBool, progress: &Progress) -> Output {
    for _ in 0..job.warmup.saturating_mul(1000) {
        std::hint::black_box(syscalls::monotonic_ns());
    }
    let (mut n, mut max, mut window) = (0u64, 0u64, 0u64);
    loop {
        let a = syscalls::monotonic_ns();
        let b = syscalls::monotonic_ns();
        let d = b.saturating_sub(a);
        job.hist.record(n, d);
        n += 1;
        max = max.max(d);
        window = window.max(d);
        if n & 1023 == 0 {
            progress.publish(n, max, std::mem::take(&mut window));
            progress.offer(&job.hist);
            if stop.load(Relaxed) {
                break;
            }
        }
        if job.loops.is_some_and(|l| n >= l) {
            break;
        }
    }
    progress.publish(n, max, window);
    Output {
        hist: job.hist,
        iterations: n,
        missed: 0,
        noise: None,
        cache: None,
        pci: None,
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
        cache: None,
        pci: None,
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
        progress.publish(n, max, latency);
        progress.offer(&job.hist);
    }
    Ok((iterations, missed))
}

/// The cache probe: rounds over the levels (L1d, L2, L3 share); in each,
/// one untimed pass over the level's whole walk brings its working set
/// into the cache, the set is left idle for the job's gap (if any), then
/// [`CACHE_LOADS_PER_ROUND`] loads of the walk are
/// timed one by one with the serialised counter. A sample is the load's
/// ticks less the timing's own overhead, in ns (the probe's histogram
/// holds every level; each level has its own ns and cycle histograms).
/// A load that takes long was evicted since the warm pass (or hit an
/// interrupt). Its iterations are the loads, timed and untimed. The
/// walks are freed when the loop ends.
fn cache(mut job: Job, stop: &AtomicBool, progress: &Progress) -> Result<Output, LoopError> {
    let Some(mut c) = job.cache.take() else {
        return Err(LoopError::NotPrepared("cache"));
    };
    if c.levels.iter().any(|l| l.walk.is_empty()) {
        return Err(LoopError::NotPrepared("cache"));
    }
    let (tsc, clock, overhead) = (c.tsc, c.clock, c.overhead_ticks);
    let (mut n, mut untimed, mut max, mut window) = (0u64, 0u64, 0u64, 0u64);
    'rounds: while !done(stop, job.loops, n) {
        for level in c.levels.iter_mut() {
            let walk = &level.walk;
            let mut i = level.at;
            for _ in 0..walk.len() {
                i = walk.next(i);
            }
            untimed += walk.len() as u64;
            i = std::hint::black_box(i);
            // The real-time task's idle time between activations: its data
            // sits in the cache while the neighbours run.
            if !c.gap.is_zero() {
                std::thread::sleep(c.gap);
            }
            for k in 0..CACHE_LOADS_PER_ROUND {
                let (next, ticks) = tsc.time(|| walk.next(std::hint::black_box(i)));
                i = next;
                let cycles = ticks.saturating_sub(overhead);
                let ns = clock.ns(cycles);
                level.cycles.record(n, cycles);
                level.ns.record(n, ns);
                job.hist.record(n, ns);
                n += 1;
                max = max.max(ns);
                window = window.max(ns);
                if job.loops.is_some_and(|l| n >= l) || (k & 1023 == 1023 && stop.load(Relaxed)) {
                    level.at = i;
                    break 'rounds;
                }
            }
            level.at = i;
            progress.publish(n, max, std::mem::take(&mut window));
            progress.offer(&job.hist);
        }
    }
    progress.publish(n, max, window);
    for level in &mut c.levels {
        level.walk = Walk::default();
    }
    Ok(Output {
        hist: job.hist,
        iterations: n + untimed,
        missed: 0,
        noise: None,
        cache: Some(c),
        pci: None,
    })
}

/// One 4-byte read of the pci probe's register: its value, or `None` for
/// a short config read; an error of `pread` as is.
#[inline(always)]
fn read_register(source: &PciSource) -> std::io::Result<Option<u32>> {
    match source {
        PciSource::Config { file, offset } => {
            use std::os::unix::fs::FileExt;
            let mut buf = [0u8; 4];
            let n = file.read_at(&mut buf, *offset)?;
            Ok((n == 4).then(|| u32::from_le_bytes(buf)))
        }
        PciSource::Bar(r) => Ok(Some(r.read())),
    }
}

/// The pci probe: back to back, one 4-byte read of the register timed
/// with the serialised counter (less the timing's own overhead), as the
/// course report's bus test timed each access to its device. For config
/// space the time is the whole `pread` (the system call, the kernel's
/// config access lock and the access itself, port I/O or ECAM); for a
/// BAR, one load from the device. Each value read is compared with the
/// first: what was read back is reported.
fn pci(mut job: Job, stop: &AtomicBool, progress: &Progress) -> Result<Output, LoopError> {
    let Some(PciJob {
        tsc,
        clock,
        overhead_ticks: overhead,
        target,
        source,
    }) = job.pci.take()
    else {
        return Err(LoopError::NotPrepared("pci"));
    };
    // Moved, not cloned: nothing in the loop allocates.
    let mut reads = PciReads {
        target,
        tsc_ticks_per_ns: clock.ticks_per_ns,
        timing_overhead_cycles: overhead,
        reads: 0,
        first_value: None,
        last_value: None,
        changed: 0,
        short_reads: 0,
    };
    let (mut n, mut max, mut window) = (0u64, 0u64, 0u64);
    let mut warmup = job.warmup;
    while !done(stop, job.loops, n) {
        let (value, ticks) = tsc.time(|| read_register(&source));
        let value = value.map_err(|e| sys_err("read of the PCI register", e))?;
        reads.reads += 1;
        let Some(v) = value else {
            reads.short_reads += 1;
            if reads.short_reads >= 100 && reads.first_value.is_none() {
                return Err(sys_err(
                    "read of the PCI register",
                    std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "100 reads returned fewer than 4 bytes",
                    ),
                ));
            }
            continue;
        };
        let first = *reads.first_value.get_or_insert(v);
        reads.changed += u64::from(v != first);
        reads.last_value = Some(v);
        if warmup > 0 {
            warmup -= 1;
            continue;
        }
        let ns = clock.ns(ticks.saturating_sub(overhead));
        job.hist.record(n, ns);
        n += 1;
        max = max.max(ns);
        window = window.max(ns);
        if n & 255 == 0 {
            progress.publish(n, max, std::mem::take(&mut window));
            progress.offer(&job.hist);
        }
    }
    progress.publish(n, max, window);
    Ok(Output {
        hist: job.hist,
        iterations: reads.reads,
        missed: 0,
        noise: None,
        cache: None,
        pci: Some(reads),
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::cache;
    use crate::measure::device::DeviceTarget;
    use crate::measure::histogram::Histogram;
    use crate::sys::syscalls::Tsc;

    #[test]
    fn cycle_clock_converts_ticks_to_nearest_ns() {
        let c = CycleClock { ticks_per_ns: 2.5 };
        assert_eq!(c.ns(0), 0);
        assert_eq!(c.ns(250), 100);
        assert_eq!(c.ns(3), 1, "1.2 ns rounds down");
        assert_eq!(c.ns(4), 2, "1.6 ns rounds up");
        let c = CycleClock { ticks_per_ns: 0.5 };
        assert_eq!(c.ns(7), 14, "a counter slower than 1 GHz");
    }

    #[test]
    fn calibration_matches_the_counter_it_times_with() {
        let Some(c) = CycleClock::calibrate(20) else {
            assert!(
                Tsc::new().is_err(),
                "a counter to time with but none to calibrate"
            );
            return;
        };
        // Any real TSC runs between 0.5 and 10 GHz.
        assert!((0.5..10.0).contains(&c.ticks_per_ns), "{c:?}");
    }

    fn cache_job(lines: &[u64], loops: u64) -> Option<Job> {
        let tsc = Tsc::new().ok()?;
        let clock = CycleClock::calibrate(10)?;
        let sets = cache::working_sets(0, &[])
            .into_iter()
            .zip(lines)
            .map(|(mut s, &l)| {
                s.lines = l;
                s.bytes = l * cache::LINE_BYTES;
                s
            })
            .collect();
        Some(Job {
            probe: ProbeKind::Cache,
            hist: Histogram::new(1000, 1),
            loops: Some(loops),
            interval_ns: 0,
            warmup: 0,
            noise_threshold_ns: 0,
            noise_runtime_ns: 0,
            cycles: Some(clock),
            rtc: None,
            slow: None,
            cache: Some(CacheJob::new(0, sets, tsc, clock, 1000, 1)),
            pci: None,
        })
    }

    #[test]
    fn the_cache_loop_times_each_level_in_turn() {
        let loads = CACHE_LOADS_PER_ROUND;
        // Two whole rounds, then 10 loads of a third.
        let Some(mut job) = cache_job(&[64, 512, 4096], 6 * loads + 10) else {
            return; // no counter here: the probe is skipped, tested in the driver
        };
        prepare(&mut job);
        let out = run(job, &AtomicBool::new(false), &Progress::default()).unwrap();
        let c = out.cache.expect("cache results");
        let per_level: Vec<u64> = c.levels.iter().map(|l| l.ns.samples()).collect();
        assert_eq!(per_level, vec![2 * loads + 10, 2 * loads, 2 * loads]);
        assert!(c
            .levels
            .iter()
            .all(|l| l.cycles.samples() == l.ns.samples()));
        assert_eq!(
            out.hist.samples(),
            6 * loads + 10,
            "every level in one histogram"
        );
        // Three rounds began, each with an untimed pass over every level.
        assert_eq!(out.iterations, 6 * loads + 10 + 2 * (64 + 512 + 4096) + 64);
        assert!(c.levels.iter().all(|l| l.walk.is_empty()), "walks freed");
        // Each round continues where the last stopped: 8192 loads of a
        // 512- or 4096-line cycle end on the line they started from; the
        // L1d walk stopped 10 lines into its cycle, not at its start.
        assert_eq!((c.levels[1].at, c.levels[2].at), (0, 0));
        assert_ne!(c.levels[0].at, 0);
    }

    /// A pci job reading a regular file standing in for a function's
    /// `config` (no device is touched), or `None` without a counter.
    fn pci_job(dir: &std::path::Path, bytes: &[u8], offset: u64, loops: u64) -> Option<Job> {
        let tsc = Tsc::new().ok()?;
        let clock = CycleClock::calibrate(10)?;
        let path = dir.join("config");
        std::fs::write(&path, bytes).unwrap();
        let target = DeviceTarget {
            address: crate::sys::pci::Bdf::parse("0000:00:1f.0").unwrap(),
            region: crate::measure::device::Region::Config,
            offset,
            region_bytes: bytes.len() as u64,
            file: "config".into(),
        };
        Some(Job {
            probe: ProbeKind::Pci,
            hist: Histogram::new(1000, 100),
            loops: Some(loops),
            interval_ns: 0,
            warmup: 3,
            noise_threshold_ns: 0,
            noise_runtime_ns: 0,
            cycles: Some(clock),
            rtc: None,
            slow: None,
            cache: None,
            pci: Some(PciJob {
                tsc,
                clock,
                overhead_ticks: 0,
                target,
                source: PciSource::Config {
                    file: File::open(path).unwrap(),
                    offset,
                },
            }),
        })
    }

    #[test]
    fn the_pci_loop_times_each_read_and_reports_what_it_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = vec![0u8; 64];
        bytes[8..12].copy_from_slice(&0x0601_0002u32.to_le_bytes());
        let Some(mut job) = pci_job(dir.path(), &bytes, 8, 500) else {
            return; // no counter here: skipped, tested in the driver
        };
        prepare(&mut job);
        let out = run(job, &AtomicBool::new(false), &Progress::default()).unwrap();
        assert_eq!(out.hist.samples(), 500);
        let r = out.pci.expect("what was read back");
        assert_eq!(
            (r.first_value, r.last_value),
            (Some(0x0601_0002), Some(0x0601_0002))
        );
        assert_eq!(
            (r.reads, r.changed, r.short_reads),
            (503, 0, 0),
            "3 warm-up reads, untimed"
        );
        assert_eq!(out.iterations, 503);
        assert!(out.hist.max_ns().unwrap() > 0, "a pread takes time");
        // A read past the file's end is short, every time: an error, not samples.
        let Some(mut job) = pci_job(dir.path(), &bytes[..32], 32, 10) else {
            return;
        };
        prepare(&mut job);
        let e = run(job, &AtomicBool::new(false), &Progress::default()).unwrap_err();
        assert!(e.to_string().contains("fewer than 4 bytes"), "{e}");
    }

    #[test]
    fn an_unprepared_cache_job_is_an_error() {
        let Some(job) = cache_job(&[64, 64, 64], 10) else {
            return;
        };
        let e = run(job, &AtomicBool::new(false), &Progress::default()).unwrap_err();
        assert!(e.to_string().contains("not prepared"), "{e}");
    }
}
