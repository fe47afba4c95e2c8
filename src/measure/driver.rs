//! The measurement driver shared by every probe.
//!
//! `configure → isolate self → warm up → loop → aggregate`: the driver
//! allocates every histogram, locks memory, moves the main thread off the
//! measured CPUs, starts one pinned SCHED_FIFO thread per CPU (each
//! pre-faults its stack and waits for the common start), watches the clock
//! and Ctrl-C, then joins the threads and aggregates their histograms into
//! per-CPU rows and an ALL row. It may touch: its own threads' affinity and
//! priority, mlockall, /proc/interrupts and /proc/softirqs (read), the
//! CPUs' cache sizes under /sys/devices/system/cpu (read, cache probe),
//! the named PCI function's config space or, only when named, a register
//! of one of its memory BARs (read, pci probe),
//! /dev/rtc (the rtc probe) and /dev/cpu_dma_latency (only when asked).

use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

use super::args::{Config, ProbeKind, Stop};
use super::cache;
use super::device::{DeviceTarget, Region};
use super::explain::{Explained, Explainer};
use super::histogram::Histogram;
use super::interrupts::{self, Counts, Delta};
use super::live::Live;
use super::machine::Machine;
use super::probes::{self, CacheJob, CycleClock, Job, NoiseStats, PciJob, PciReads, PciSource};
use super::progress::Progress;
use super::threads::{self, ThreadsRan};
use super::MeasureError;
use crate::cpulist::CpuSet;
use crate::sys::syscalls::{self, Policy};
use crate::sys::{Sys, ThreadAside};

/// Context switches of a measuring thread over its loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextSwitches {
    /// Voluntary (the thread slept: expected once per wake-up for timer probes).
    pub voluntary: u64,
    /// Involuntary (something preempted the thread).
    pub involuntary: u64,
}

/// The result of one probe on one CPU.
#[derive(Debug)]
pub struct CpuResult {
    /// The CPU.
    pub cpu: u32,
    /// Its histogram.
    pub hist: Histogram,
    /// Loop iterations (wake-ups, pairs, noise periods, cache loads), warm-up included.
    pub iterations: u64,
    /// Skipped periods (timer, periodic) or missed RTC interrupts.
    pub missed: u64,
    /// Noise figures (noise probe).
    pub noise: Option<NoiseStats>,
    /// Per-level results (cache probe).
    pub cache: Option<CacheJob>,
    /// What was read back (pci probe).
    pub pci: Option<PciReads>,
    /// The measuring thread's context switches during its loop.
    pub context_switches: Option<ContextSwitches>,
    /// Interrupts that reached this CPU during the run, most first.
    pub interrupts: Vec<Delta>,
    /// Softirqs run on this CPU during the run, most first.
    pub softirqs: Vec<Delta>,
    /// Other threads that ran on this CPU during the run (`None` when the
    /// threads could not be read).
    pub threads_ran: Option<ThreadsRan>,
    /// The largest sample of each whole second, ns, in time order.
    pub per_second_max_ns: Vec<u64>,
    /// System Management Interrupts this CPU took during the run
    /// (`MSR_SMI_COUNT`); `None` where the counter cannot be read.
    pub smis: Option<u64>,
}

/// Whether a probe ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// It ran (possibly cut short by Ctrl-C).
    Ok,
    /// It could not run here; the reason says why.
    Skipped(String),
}

/// The result of one probe.
#[derive(Debug)]
pub struct ProbeResult {
    /// The probe.
    pub probe: ProbeKind,
    /// Ran or skipped.
    pub status: Status,
    /// Interval / period, ns (`None` for rtc's fixed rate and gtod).
    pub interval_ns: Option<u64>,
    /// Wall time from the common start to the last thread's end.
    pub elapsed: Duration,
    /// Per-CPU results, in CPU order.
    pub cpus: Vec<CpuResult>,
    /// All CPUs merged.
    pub all: Histogram,
    /// A remark for the reader (e.g. why only one CPU was measured).
    pub note: Option<String>,
    /// `--explain`: what delayed the slow samples.
    pub explain: Option<Explained>,
}

/// A whole `cpushield measure` run.
#[derive(Debug)]
pub struct Run {
    /// What was asked.
    pub config: Config,
    /// Where it ran.
    pub machine: Machine,
    /// Start, seconds since the Unix epoch.
    pub started_unix_s: f64,
    /// Whether Ctrl-C (or SIGTERM) ended it early.
    pub interrupted: bool,
    /// One result per probe, in order.
    pub probes: Vec<ProbeResult>,
}

/// Checks, without side effects on this thread, that SCHED_FIFO at
/// `prio` is permitted: a scratch thread tries it and exits.
pub fn check_realtime_permitted(prio: i32) -> Result<(), MeasureError> {
    let r = std::thread::spawn(move || syscalls::set_scheduler(0, Policy::Fifo(prio)))
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("scratch thread panicked")));
    r.map_err(|source| MeasureError::NotPermitted {
        what: format!("use SCHED_FIFO priority {prio}"),
        source,
    })
}

/// Runs every probe of `cfg` on the machine behind `sys`.
pub fn measure(cfg: &Config, sys: &Sys, machine: Machine) -> Result<Run, MeasureError> {
    let started_unix_s = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let interrupted = Arc::new(AtomicBool::new(false));
    let signals = SignalGuard::register(&interrupted)?;
    let _dma = match cfg.dma_latency_us {
        Some(us) => Some(hold_dma_latency(sys, us)?),
        None => None,
    };
    if cfg.lock_memory {
        syscalls::lock_all_memory().map_err(|source| MeasureError::NotPermitted {
            what: "lock memory (mlockall)".into(),
            source,
        })?;
    }
    // Keep the main thread (progress, /proc reads) off the measured CPUs.
    // Only within the thread's own affinity: inside a shield (started with
    // `cpushield run`) the cpuset holds just the measured CPUs, and the main
    // thread then stays where it is rather than failing.
    let aside = ThreadAside::on(&cfg.online.difference(&cfg.cpus))?;
    let mut results = Vec::new();
    let mut error = None;
    for &probe in &cfg.probes {
        if interrupted.load(Relaxed) {
            break;
        }
        match run_probe(cfg, sys, probe, &interrupted) {
            Ok(r) => results.push(r),
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    drop(aside);
    if cfg.lock_memory {
        let _ = syscalls::unlock_all_memory();
    }
    let was_interrupted = interrupted.load(Relaxed);
    drop(signals);
    if let Some(e) = error {
        return Err(e);
    }
    Ok(Run {
        config: cfg.clone(),
        machine,
        started_unix_s,
        interrupted: was_interrupted,
        probes: results,
    })
}

/// SIGINT/SIGTERM set a flag (the run ends early and still reports); a
/// second one while the flag is set exits at once (status 130).
///
/// On drop the flag-setting actions are removed and the flag is left set,
/// so that from then on SIGINT/SIGTERM exit the process again: signal-hook
/// cannot restore the default disposition, and merely unregistering would
/// leave both signals ignored.
struct SignalGuard {
    flag: Arc<AtomicBool>,
    setters: Vec<signal_hook::SigId>,
}

impl SignalGuard {
    fn register(flag: &Arc<AtomicBool>) -> Result<SignalGuard, MeasureError> {
        let mut setters = Vec::new();
        let io = |source| MeasureError::Io {
            what: "install signal handler".into(),
            source,
        };
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            // Order matters: the shutdown check runs before the flag is set.
            signal_hook::flag::register_conditional_shutdown(sig, 130, Arc::clone(flag))
                .map_err(io)?;
            setters.push(signal_hook::flag::register(sig, Arc::clone(flag)).map_err(io)?);
        }
        Ok(SignalGuard {
            flag: Arc::clone(flag),
            setters,
        })
    }
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        for id in self.setters.drain(..) {
            signal_hook::low_level::unregister(id);
        }
        self.flag.store(true, Relaxed);
    }
}

/// Writes `us` to /dev/cpu_dma_latency and keeps it open: the kernel
/// honours the request while the file is open and drops it on close.
fn hold_dma_latency(sys: &Sys, us: u32) -> Result<File, MeasureError> {
    let path = sys.path("dev/cpu_dma_latency");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .and_then(|mut f| f.write_all(&(us as i32).to_ne_bytes()).map(|_| f))
        .map_err(|source| MeasureError::Io {
            what: format!("set {} to {us} µs", path.display()),
            source,
        })?;
    let _ = f.flush();
    Ok(f)
}

/// Opens the RTC and sets its periodic rate, or says why the probe cannot run.
fn open_rtc(sys: &Sys) -> Result<File, String> {
    let mut last = String::new();
    for rel in ["dev/rtc0", "dev/rtc"] {
        let path = sys.path(rel);
        match File::open(&path) {
            Ok(f) => {
                return match syscalls::rtc_set_periodic_rate(&f, probes::RTC_HZ as u32) {
                    Ok(()) => Ok(f),
                    Err(e) => Err(format!(
                        "cannot set {} to {} Hz ({e}); raise /sys/class/rtc/rtc0/max_user_freq or run as root",
                        path.display(),
                        probes::RTC_HZ
                    )),
                };
            }
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                return Err(format!(
                    "{} is busy: another program holds the RTC",
                    path.display()
                ))
            }
            Err(e) => last = format!("{}: {e}", path.display()),
        }
    }
    Err(format!("no usable RTC device ({last}); the rtc probe needs /dev/rtc0 (CONFIG_RTC_DRV_CMOS or similar)"))
}

/// Opens the pci probe's register for one measuring thread: the
/// function's `config` for reading, or its BAR's `resourceN` mapped
/// read-only. Reads nothing yet.
fn open_pci(sys: &Sys, t: &DeviceTarget) -> Result<PciSource, MeasureError> {
    let path = sys.path(&t.file);
    let io = |what: String| move |source| MeasureError::Io { what, source };
    let file = File::open(&path).map_err(io(format!("open {}", path.display())))?;
    Ok(match t.region {
        Region::Config => PciSource::Config {
            file,
            offset: t.offset,
        },
        Region::Bar(_) => PciSource::Bar(syscalls::MappedRegister::map(&file, t.offset).map_err(
            |e| {
                // pci_mmap_resource refuses a BAR a driver holds when the
                // kernel has CONFIG_IO_STRICT_DEVMEM (and under lockdown).
                let hint = match e.raw_os_error() {
                    Some(libc::EINVAL) | Some(libc::EPERM) => {
                        " (the kernel refuses to map a BAR its driver holds when built with CONFIG_IO_STRICT_DEVMEM, and any BAR under lockdown)"
                    }
                    _ => "",
                };
                io(format!("map {} read-only{hint}", path.display()))(e)
            },
        )?),
    })
}

fn read_counts(sys: &Sys, rel: &str) -> Option<Counts> {
    sys.read(rel).ok().map(|t| interrupts::parse(&t))
}

/// Runs one probe on every measured CPU (rtc: the first one only). The
/// measuring loop's set-up, and long for it: the RTC, the trace session,
/// the loops' buffers allocated before any real-time thread starts, the
/// threads started in one scope, joined and their histograms merged; kept
/// in one scope so that the trace is finished and every thread joined on
/// every path (a spawn error, Ctrl-C).
pub fn run_probe(
    cfg: &Config,
    sys: &Sys,
    probe: ProbeKind,
    interrupted: &AtomicBool,
) -> Result<ProbeResult, MeasureError> {
    let interval_ns = cfg.interval_ns_of(probe);
    let width = bucket_width(cfg, probe);
    let prepared = match prepare(cfg, sys, probe, width)? {
        Ok(prepared) => prepared,
        Err(reason) => {
            return Ok(ProbeResult {
                probe,
                status: Status::Skipped(reason),
                interval_ns,
                elapsed: Duration::ZERO,
                cpus: Vec::new(),
                all: Histogram::new(cfg.buckets, width),
                note: None,
                explain: None,
            })
        }
    };
    let Prepared {
        cpus,
        note,
        jobs,
        explainer,
    } = prepared;
    let own_pid = std::process::id() as i32;
    let before = Counters {
        threads: threads::read(sys, own_pid).filter(|t| !t.is_empty()),
        irqs: read_counts(sys, "proc/interrupts"),
        softirqs: read_counts(sys, "proc/softirqs"),
        smis: sys.smi_counts(cpus.iter().copied()),
    };
    let (outs, elapsed, per_second) = run_threads(cfg, (probe, width), jobs, &cpus, interrupted);
    // The instance goes whatever happened to the loops.
    let explain = explainer.map(Explainer::finish).transpose();
    let outs = outs?;
    let explain = explain?;
    let after = Counters {
        threads: (before.threads.as_ref()).and_then(|_| threads::read(sys, own_pid)),
        irqs: read_counts(sys, "proc/interrupts"),
        softirqs: read_counts(sys, "proc/softirqs"),
        smis: sys.smi_counts(cpus.iter().copied()),
    };
    let mut all = Histogram::new(cfg.buckets, width);
    let mut results = Vec::new();
    for ((out, &cpu), maxima) in outs.into_iter().zip(&cpus).zip(per_second) {
        let (out, cs) = out?;
        all.merge(&out.hist);
        let mut result = cpu_result(cpu, out, cs, (&before, &after));
        result.per_second_max_ns = maxima;
        results.push(result);
    }
    Ok(ProbeResult {
        probe,
        status: Status::Ok,
        interval_ns,
        elapsed,
        cpus: results,
        all,
        note,
        explain,
    })
}

/// The width of a probe's histogram buckets: gtod pairs and cached loads
/// take ns, so their buckets count ns where others count µs.
fn bucket_width(cfg: &Config, probe: ProbeKind) -> u64 {
    match probe {
        ProbeKind::Gtod | ProbeKind::Cache => (cfg.bucket_width_ns / 1000).max(1),
        // A register read takes about a µs on real hardware: 100 ns buckets.
        ProbeKind::Pci => (cfg.bucket_width_ns / 10).max(1),
        _ => cfg.bucket_width_ns,
    }
}

/// What a probe's measuring threads are given, made before any starts.
struct Prepared {
    /// The CPUs measured (one, for the rtc probe).
    cpus: Vec<u32>,
    /// What the report says of the CPUs left out.
    note: Option<String>,
    /// One job per CPU.
    jobs: Vec<Job>,
    /// The tracer that explains slow samples, when asked.
    explainer: Option<Explainer>,
}

/// The cache probe's job on `cpu`: the working set given, else one per
/// level of its caches, and the idle gap.
fn cache_job(
    cfg: &Config,
    sys: &Sys,
    cpu: u32,
    (tsc, clock): (syscalls::Tsc, CycleClock),
    width: u64,
) -> CacheJob {
    let sets = match cfg.working_set {
        Some(bytes) => vec![cache::given(bytes)],
        None => cache::plan(sys, cpu),
    };
    let mut job = CacheJob::new(cpu, sets, tsc, clock, cfg.buckets, width);
    job.gap = std::time::Duration::from_nanos(cfg.cache_gap_ns);
    job
}

/// Everything the loops of `probe` use, allocated before mlockall'd
/// threads start (but the cache probe's walks: each measuring thread
/// builds its own before its loop, `probes::prepare`, so they sit on its
/// memory node); `Ok(Err(reason))` when the probe cannot run here.
fn prepare(
    cfg: &Config,
    sys: &Sys,
    probe: ProbeKind,
    width: u64,
) -> Result<Result<Prepared, String>, MeasureError> {
    let interval_ns = cfg.interval_ns_of(probe);
    let mut cpus: Vec<u32> = cfg.cpus.iter().collect();
    let mut note = None;
    let mut rtc = None;
    if probe == ProbeKind::Rtc {
        match open_rtc(sys) {
            Ok(f) => rtc = Some(f),
            Err(reason) => return Ok(Err(reason)),
        }
        if cpus.len() > 1 {
            note = Some(format!(
                "one RTC: measured on CPU {} only (the RTC interrupt is served where its IRQ affinity says)",
                cpus[0]
            ));
            cpus.truncate(1);
        }
    }
    let cycles = match probe {
        ProbeKind::Noise | ProbeKind::Cache | ProbeKind::Pci => CycleClock::calibrate(50),
        _ => None,
    };
    let tsc = match probe {
        ProbeKind::Cache | ProbeKind::Pci => match (syscalls::Tsc::new(), cycles) {
            (Err(e), _) => return Ok(Err(e.to_string())),
            (Ok(_), None) => {
                return Ok(Err(
                    "the cycle counter could not be calibrated against CLOCK_MONOTONIC_RAW".into(),
                ))
            }
            (Ok(t), Some(c)) => Some((t, c)),
        },
        _ => None,
    };
    let device = match (probe, &cfg.device) {
        (ProbeKind::Pci, None) => {
            return Ok(Err(
                "no --device: the pci probe reads the PCI function it is given".into(),
            ))
        }
        (ProbeKind::Pci, Some(t)) => Some(t),
        _ => None,
    };
    // One file (or mapping) per measuring thread, opened before any starts.
    let mut pci_sources = Vec::new();
    if let Some(t) = device {
        for _ in &cpus {
            pci_sources.push(open_pci(sys, t)?);
        }
    }
    let mut pci_sources = pci_sources.into_iter();
    let explainer = Explainer::for_probe(sys, cfg, probe, interval_ns, &cpus)?;
    let loops = match cfg.stop {
        Stop::Loops(n) => Some(n),
        Stop::Duration(_) => None,
    };
    let jobs: Vec<Job> = (cpus.iter())
        .map(|&cpu| Job {
            probe,
            hist: Histogram::new(cfg.buckets, width),
            loops,
            interval_ns: interval_ns.unwrap_or(0),
            warmup: cfg.warmup,
            noise_threshold_ns: cfg.noise_threshold_ns,
            noise_runtime_ns: cfg.noise_runtime_ns.unwrap_or(u64::MAX),
            cycles,
            rtc: rtc.take(),
            slow: explainer.as_ref().map(|e| (cpu, e.slow_samples())),
            cache: tsc
                .filter(|_| probe == ProbeKind::Cache)
                .map(|(tsc, clock)| cache_job(cfg, sys, cpu, (tsc, clock), width)),
            pci: tsc
                .zip(device)
                .zip(pci_sources.next())
                .map(|(((tsc, clock), target), source)| PciJob {
                    tsc,
                    clock,
                    overhead_ticks: 0,
                    target: target.clone(),
                    source,
                }),
        })
        .collect();
    Ok(Ok(Prepared {
        cpus,
        note,
        jobs,
        explainer,
    }))
}

/// What the kernel counted, read before and after the loops: our own
/// threads (where they ran), the interrupts and the softirqs per CPU.
struct Counters {
    threads: Option<threads::ThreadCounts>,
    irqs: Option<Counts>,
    softirqs: Option<Counts>,
    /// Each measured CPU's SMI count (read outside the loops: the kernel
    /// reads the register on the CPU itself).
    smis: crate::sys::msr::SmiCounts,
}

/// One CPU's result: its loop's output with what the kernel counted there
/// meanwhile.
fn cpu_result(
    cpu: u32,
    out: probes::Output,
    cs: Option<ContextSwitches>,
    (before, after): (&Counters, &Counters),
) -> CpuResult {
    let delta = |b: &Option<Counts>, a: &Option<Counts>| match (b, a) {
        (Some(b), Some(a)) => interrupts::deltas(b, a, cpu),
        _ => Vec::new(),
    };
    CpuResult {
        cpu,
        hist: out.hist,
        iterations: out.iterations,
        missed: out.missed,
        noise: out.noise,
        cache: out.cache,
        pci: out.pci,
        context_switches: cs,
        interrupts: delta(&before.irqs, &after.irqs),
        softirqs: delta(&before.softirqs, &after.softirqs),
        threads_ran: (before.threads.as_ref())
            .zip(after.threads.as_ref())
            .map(|(b, a)| threads::ran_on(b, a, cpu)),
        per_second_max_ns: Vec::new(),
        smis: after.smis.taken(&before.smis, cpu),
    }
}

/// What the measuring threads gave back, how long they ran, and each
/// CPU's largest sample in every whole second of the run (in time order).
type Outputs = (
    Result<Vec<Result<ThreadOutput, MeasureError>>, MeasureError>,
    Duration,
    Vec<Vec<u64>>,
);

/// Starts one measuring thread per job, lets them go together, stops them
/// at the limit or on Ctrl-C (progress on a terminal meanwhile), and joins
/// them.
fn run_threads(
    cfg: &Config,
    (probe, width_ns): (ProbeKind, u64),
    jobs: Vec<Job>,
    cpus: &[u32],
    interrupted: &AtomicBool,
) -> Outputs {
    let progress: Vec<Progress> = cpus.iter().map(|_| Progress::default()).collect();
    let stop = AtomicBool::new(false);
    let go = AtomicBool::new(false);
    let ready = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let mut handles = Vec::new();
        let mut spawn_error = None;
        for ((job, &cpu), prog) in jobs.into_iter().zip(cpus).zip(&progress) {
            let (stop, go, ready) = (&stop, &go, &ready);
            let prio = cfg.priority;
            let spawned = std::thread::Builder::new()
                .name(format!("measure-cpu{cpu}"))
                .stack_size(1 << 20)
                .spawn_scoped(s, move || {
                    thread_main(cpu, prio, job, stop, go, ready, prog)
                });
            match spawned {
                Ok(h) => handles.push((cpu, h)),
                Err(e) => {
                    spawn_error = Some(MeasureError::Io {
                        what: format!("start measuring thread for CPU {cpu}"),
                        source: e,
                    });
                    stop.store(true, Relaxed);
                    break;
                }
            }
        }
        while ready.load(Relaxed) < handles.len() {
            std::thread::sleep(Duration::from_millis(1));
        }
        let t0 = Instant::now();
        go.store(true, Relaxed);
        let limit = match cfg.stop {
            Stop::Duration(d) => Some(d),
            Stop::Loops(_) => None,
        };
        let mut live = Live::new(
            (probe, cfg.stop),
            cpus,
            &progress,
            (cfg.buckets, width_ns),
            &cfg.over_ns,
            cfg.checkpoint.clone(),
        );
        while !handles.iter().all(|(_, h)| h.is_finished()) {
            std::thread::sleep(Duration::from_millis(20));
            if interrupted.load(Relaxed) || limit.is_some_and(|l| t0.elapsed() >= l) {
                stop.store(true, Relaxed);
            }
            live.tick(t0.elapsed());
        }
        stop.store(true, Relaxed);
        let elapsed = t0.elapsed();
        let (per_second, checkpoint_failed) = live.finish();
        if let Some(e) = checkpoint_failed {
            eprintln!("measure: a checkpoint could not be written: {e}");
        }
        let outs: Vec<_> = handles
            .into_iter()
            .map(|(cpu, h)| {
                h.join().unwrap_or_else(|_| {
                    Err(MeasureError::Io {
                        what: format!("measuring thread for CPU {cpu}"),
                        source: std::io::Error::other("panicked"),
                    })
                })
            })
            .collect();
        match spawn_error {
            Some(e) => (Err(e), elapsed, per_second),
            None => (Ok(outs), elapsed, per_second),
        }
    })
}

type ThreadOutput = (probes::Output, Option<ContextSwitches>);

/// Body of a measuring thread: pin, raise priority, pre-fault the stack,
/// wait for the common start, run the loop.
fn thread_main(
    cpu: u32,
    prio: Option<i32>,
    mut job: Job,
    stop: &AtomicBool,
    go: &AtomicBool,
    ready: &AtomicUsize,
    progress: &Progress,
) -> Result<ThreadOutput, MeasureError> {
    let setup: Result<(), MeasureError> = (|| {
        let tid = syscalls::gettid();
        let one: CpuSet = std::iter::once(cpu).collect();
        syscalls::set_affinity(tid, &one).map_err(|source| MeasureError::Io {
            what: format!("pin measuring thread to CPU {cpu}"),
            source,
        })?;
        if let Some(p) = prio {
            syscalls::set_scheduler(0, Policy::Fifo(p)).map_err(|source| {
                MeasureError::NotPermitted {
                    what: format!("use SCHED_FIFO priority {p}"),
                    source,
                }
            })?;
        }
        probes::prefault_stack();
        probes::prepare(&mut job);
        Ok(())
    })();
    ready.fetch_add(1, Relaxed);
    while !go.load(Relaxed) && !stop.load(Relaxed) {
        std::thread::sleep(Duration::from_millis(1));
    }
    if let Err(e) = setup {
        // Do not let the other CPUs run their full course for nothing.
        stop.store(true, Relaxed);
        return Err(e);
    }
    let before = syscalls::thread_context_switches().ok();
    let out = probes::run(job, stop, progress).map_err(|e| MeasureError::Io {
        what: format!("measuring loop on CPU {cpu}"),
        source: std::io::Error::other(e),
    })?;
    let after = syscalls::thread_context_switches().ok();
    let cs = before.zip(after).map(|(b, a)| ContextSwitches {
        voluntary: a.0.saturating_sub(b.0),
        involuntary: a.1.saturating_sub(b.1),
    });
    Ok((out, cs))
}
