//! `measure --explain US`: what delayed each sample slower than US.
//!
//! While a timer, periodic or noise probe runs, the kernel traces the measured
//! CPUs into an instance of our own ([`tracefs`]): switches, wake-ups,
//! device IRQs, softirqs, the x86 timer and IPI vectors and hrtimer
//! callbacks, into ring buffers sized for the run. A measuring loop hands
//! every slow sample's deadline and wake-up over a bounded channel (no
//! allocation, no lock, no system call in the loop). Once the loops have
//! ended, the events are read and each slow sample's interval of its
//! CPU's events is cut into a chain of causes ([`chain`]). Every slow
//! sample counts in the per-cause totals; the slowest keep their chain
//! and the trace lines it came from.

pub mod chain;
pub mod trace;
pub mod tracefs;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::args::{Config, ProbeKind, Stop};
use crate::cpulist::CpuSet;
use crate::sys::{procfs, Sys, SysError};

use chain::CpuState;
pub use chain::{Cause, Piece, Sample};
use trace::{Event, Kind, Line};

/// Why tracing could not start or end cleanly.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// The kernel has no tracefs.
    #[error("--explain needs the kernel's trace events, and this kernel has no tracefs (CONFIG_FTRACE, CONFIG_EVENT_TRACING); nothing was changed")]
    NoTracefs,
    /// tracefs is not mounted.
    #[error("--explain needs tracefs, which is not mounted: mount -t tracefs nodev /sys/kernel/tracing; nothing was changed")]
    NotMounted,
    /// Someone else is tracing.
    #[error("--explain: tracefs is in use: {0}; end that trace first (or run without --explain); nothing was changed")]
    InUse(String),
    /// A tracefs file refused a write.
    #[error(transparent)]
    Sys(#[from] SysError),
    /// Another I/O step failed.
    #[error("{what}: {source}")]
    Io {
        /// The step.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// Slowest samples kept with their chain and trace lines.
const KEEP_WORST: usize = 10;
/// Trace lines kept per kept sample, at most.
const KEEP_LINES: usize = 200;
/// How far back a CPU's events are kept behind the newest read (samples
/// wait in wake-up order, so only the state before the next one matters).
const RETAIN_NS: u64 = 100_000_000;
/// Trace lines shown before a kept sample's deadline.
const LEAD_NS: u64 = 20_000;

/// What a measuring loop holds to report slow samples.
#[derive(Debug, Clone)]
pub struct SlowSamples {
    /// Samples over this many ns are reported.
    pub threshold_ns: u64,
    tx: SyncSender<Sample>,
    dropped: Arc<AtomicU64>,
}

impl SlowSamples {
    /// A channel for samples over `threshold_ns`, room for `room` of them
    /// (allocated here, not when a loop reports).
    pub fn channel(threshold_ns: u64, room: usize) -> (SlowSamples, Receiver<Sample>) {
        let (tx, rx) = sync_channel(room);
        let slow = SlowSamples {
            threshold_ns,
            tx,
            dropped: Arc::new(AtomicU64::new(0)),
        };
        (slow, rx)
    }

    /// Samples that found the channel full (counted, not explained).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Relaxed)
    }

    /// Hands a slow sample to the reader (never blocks).
    #[inline]
    pub fn report(&self, sample: Sample) {
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = self.tx.try_send(sample)
        {
            self.dropped.fetch_add(1, Relaxed);
        }
    }
}

/// A sample's chain, as reports show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chain {
    /// The CPU.
    pub cpu: u32,
    /// The measured latency, ns.
    pub latency_ns: u64,
    /// When the timer was due, CLOCK_MONOTONIC ns (the trace's clock).
    pub deadline_ns: u64,
    /// When its timer's interrupt woke the thread, ns after the deadline
    /// (rtla timerlat's IRQ latency; `latency_ns` is its thread latency):
    /// `None` when the wake-up was not traced.
    #[serde(default)]
    pub irq_ns: Option<u64>,
    /// The pieces, in time order; they add up to `latency_ns`.
    pub pieces: Vec<Piece>,
    /// The trace lines of the interval (and a little before it).
    pub trace: Vec<String>,
}

/// `312 µs` (`2.4 µs` below 10 µs).
pub fn us(ns: u64) -> String {
    if ns >= 10_000 {
        format!("{} µs", (ns + 500) / 1000)
    } else {
        format!("{:.1} µs", ns as f64 / 1000.0)
    }
}

impl Chain {
    /// `312 µs on CPU 3: timer delivery (idle exit) 40 µs, IRQ 45 nvme0q3 180 µs, ...`
    pub fn line(&self) -> String {
        let parts: Vec<String> = self
            .pieces
            .iter()
            .map(|p| format!("{} {}", p.label, us(p.ns)))
            .collect();
        let irq = (self.irq_ns)
            .map(|ns| format!(" (its timer IRQ woke it at {})", us(ns)))
            .unwrap_or_default();
        format!(
            "{} on CPU {}{irq}: {}",
            us(self.latency_ns),
            self.cpu,
            parts.join(", ")
        )
    }
}

/// One cause over every slow sample of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CauseTotal {
    /// The cause as a person reads it.
    pub cause: String,
    /// Its family ([`Cause::kind`]).
    pub kind: String,
    /// Whether every wake-up passes through it (timer delivery from idle,
    /// the timer interrupt, the switch, the return): the path, not
    /// something in the way.
    pub path: bool,
    /// Slow samples it took part in.
    pub samples: u64,
    /// Slow samples of which it was the largest piece.
    pub main_in: u64,
    /// Time it took over all slow samples, ns.
    pub total_ns: u64,
    /// Its largest piece in one sample, ns.
    pub max_ns: u64,
}

/// rtla timerlat's split of the slow samples' latency: how late the timer's
/// interrupt woke the thread (IRQ latency) beside how late the thread ran
/// (thread latency). An IRQ late by most of the latency points at
/// interrupts held off or the timer's delivery (an idle state's exit, the
/// hardware); a thread late after a timely IRQ at what ran before it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IrqThreadSplit {
    /// Explained samples whose wake-up was traced.
    pub samples: u64,
    /// The largest IRQ latency among them, ns.
    pub irq_max_ns: u64,
    /// The largest thread latency among them, ns.
    pub thread_max_ns: u64,
    /// Samples whose IRQ came later than half their latency.
    pub irq_late: u64,
}

impl IrqThreadSplit {
    fn add(&mut self, irq_ns: u64, latency_ns: u64) {
        self.samples += 1;
        self.irq_max_ns = self.irq_max_ns.max(irq_ns);
        self.thread_max_ns = self.thread_max_ns.max(latency_ns);
        self.irq_late += u64::from(irq_ns * 2 > latency_ns);
    }
}

/// What `--explain` found in one probe's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Explained {
    /// The threshold, ns.
    pub threshold_ns: u64,
    /// tracefs's directory and the instance used.
    pub instance: String,
    /// Samples over the threshold that the loops reported.
    pub over_threshold: u64,
    /// Of those, the ones cut into a chain.
    pub explained: u64,
    /// Reported too fast for the reader (queue full): counted, not explained.
    pub not_queued: u64,
    /// Events the kernel dropped (its buffer was full).
    pub lost_events: u64,
    /// Trace events read.
    pub events: u64,
    /// Causes over all explained samples: most often the main piece first.
    pub causes: Vec<CauseTotal>,
    /// The slowest samples with their chains, slowest first.
    pub worst: Vec<Chain>,
    /// The IRQ and thread latency of the explained samples (timerlat's
    /// split); none when no wake-up was traced.
    #[serde(default)]
    pub irq_thread: Option<IrqThreadSplit>,
    /// Events this kernel does not have (not traced).
    pub missing_events: Vec<String>,
    /// What a killed earlier run had left and this one removed.
    pub cleaned: Option<String>,
}

/// The instance and the loops' channel of one probe.
///
/// Nothing reads the trace while the loops run: the kernel keeps the
/// events in the measured CPUs' ring buffers (sized for the run) and
/// [`Explainer::finish`] reads them after the loops have ended. A reader
/// running meanwhile would share the machine with what it measures, and
/// inside a shield (`cpushield run -- cpushield measure`) it would run on
/// the measured CPUs themselves.
#[derive(Debug)]
pub struct Explainer {
    session: tracefs::Session,
    rx: Receiver<Sample>,
    slow: SlowSamples,
}

/// Ring buffer per measured CPU and second of run, KiB: a wake-up costs
/// about ten events of 30-60 bytes; an unshielded CPU under load writes
/// up to twice that.
const KB_PER_SECOND: u64 = 1024;

/// The ring buffer per traced CPU for a run of `seconds`, KiB: enough for
/// the whole run, within an eighth of the available memory over all
/// traced CPUs (a longer run keeps its last part: the kernel overwrites
/// the oldest events and says so).
pub fn buffer_kb(seconds: f64, traced: usize, mem_available_kb: u64) -> u64 {
    let want = (seconds.max(1.0) * KB_PER_SECOND as f64) as u64 + 1024;
    let cap = mem_available_kb / 8 / traced.max(1) as u64;
    want.min(cap).max(1024)
}

impl Explainer {
    /// The explainer of one probe's run on `cpus` when `--explain` covers
    /// it (the timer and periodic probes: their samples have a deadline),
    /// sized for the run `cfg` asks for.
    pub fn for_probe(
        sys: &Sys,
        cfg: &Config,
        probe: ProbeKind,
        interval_ns: Option<u64>,
        cpus: &[u32],
    ) -> Result<Option<Explainer>, ExplainError> {
        let Some(threshold) = cfg.explain_ns else {
            return Ok(None);
        };
        if !matches!(
            probe,
            ProbeKind::Timer | ProbeKind::Periodic | ProbeKind::Noise
        ) {
            return Ok(None);
        }
        let ncpus = cfg.online.last().map_or(1, |c| c + 1);
        let traced: CpuSet = cpus.iter().copied().collect();
        // The noise probe's samples are its gaps, not its periods: room
        // for a gap every millisecond.
        let interval_ns = match probe {
            ProbeKind::Noise => Some(1_000_000),
            _ => interval_ns,
        };
        let interval_s = interval_ns.unwrap_or(1_000_000) as f64 / 1e9;
        let (seconds, samples) = match cfg.stop {
            Stop::Duration(d) => (d.as_secs_f64(), (d.as_secs_f64() / interval_s) as u64),
            Stop::Loops(n) => (n as f64 * interval_s, n),
        };
        Explainer::start(sys, &traced, ncpus, threshold, seconds, samples).map(Some)
    }

    /// Starts tracing `cpus` for a run of about `seconds` with at most
    /// `samples` samples per CPU.
    fn start(
        sys: &Sys,
        cpus: &CpuSet,
        ncpus: u32,
        threshold_ns: u64,
        seconds: f64,
        samples: u64,
    ) -> Result<Explainer, ExplainError> {
        let mem_kb = sys
            .read("proc/meminfo")
            .ok()
            .and_then(|m| procfs::mem_available(&m))
            .map_or(1 << 20, |bytes| bytes / 1024);
        let kb = buffer_kb(seconds, cpus.len(), mem_kb);
        let session = tracefs::Session::start(sys, cpus, ncpus, kb)?;
        // Every slow sample waits in the channel until the end: room for
        // all the run's samples, within 1 Mi (32 MiB).
        let room = samples
            .saturating_mul(cpus.len() as u64)
            .clamp(1024, 1 << 20) as usize;
        let (slow, rx) = SlowSamples::channel(threshold_ns, room);
        Ok(Explainer { session, rx, slow })
    }

    /// What the measuring loops report slow samples through.
    pub fn slow_samples(&self) -> SlowSamples {
        self.slow.clone()
    }

    /// Stops tracing, reads the events, explains every slow sample,
    /// removes the instance and returns what was found.
    pub fn finish(self) -> Result<Explained, ExplainError> {
        let Explainer { session, rx, slow } = self;
        let not_queued = slow.dropped();
        let threshold_ns = slow.threshold_ns;
        drop(slow);
        session.stop();
        let collected = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(session.pipe())
            .map_err(|source| ExplainError::Io {
                what: format!("open {}", session.pipe().display()),
                source,
            })
            .and_then(|pipe| read_trace(pipe, rx, threshold_ns));
        let instance = session
            .pipe()
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let missing_events = session.missing_events.clone();
        let cleaned = session.cleaned.clone();
        session.close()?;
        let c = collected?;
        Ok(c.into_explained(instance, not_queued, missing_events, cleaned))
    }
}

/// A CPU's recent events and its state just before the oldest of them.
#[derive(Debug, Default)]
struct Window {
    base: CpuState,
    events: VecDeque<(Event, String)>,
    /// Times after which events were lost (the last event seen before).
    lost_after: Vec<u64>,
}

impl Window {
    fn trim(&mut self, before_ns: u64) {
        while self
            .events
            .front()
            .is_some_and(|(e, _)| e.ts_ns < before_ns)
        {
            let (e, _) = self.events.pop_front().expect("front exists");
            self.base.apply(&e);
        }
        self.lost_after.retain(|&t| t >= before_ns);
    }

    fn last_ts(&self) -> u64 {
        self.events.back().map_or(0, |(e, _)| e.ts_ns)
    }
}

/// What the reader gathered.
#[derive(Debug, Default)]
struct Collected {
    threshold_ns: u64,
    over: u64,
    explained: u64,
    lost: u64,
    events: u64,
    totals: BTreeMap<Cause, CauseTotal>,
    worst: Vec<Chain>,
    split: IrqThreadSplit,
}

impl Collected {
    fn add(&mut self, sample: &Sample, pieces: Vec<Piece>, window: &Window) {
        self.explained += 1;
        let main = chain::main_piece(&pieces).map(|p| p.cause.clone());
        let mut seen: HashMap<&Cause, u64> = HashMap::new();
        for p in &pieces {
            *seen.entry(&p.cause).or_default() += p.ns;
        }
        for (cause, ns) in seen {
            let t = self
                .totals
                .entry(cause.clone())
                .or_insert_with(|| CauseTotal {
                    cause: cause.to_string(),
                    kind: cause.kind().into(),
                    path: cause.is_path(),
                    samples: 0,
                    main_in: 0,
                    total_ns: 0,
                    max_ns: 0,
                });
            t.samples += 1;
            t.total_ns += ns;
            t.max_ns = t.max_ns.max(ns);
            if main.as_ref() == Some(cause) {
                t.main_in += 1;
            }
        }
        let latency_ns = sample.wake_ns.saturating_sub(sample.deadline_ns);
        let irq_ns = woken_at(window, sample).map(|at| at.saturating_sub(sample.deadline_ns));
        if let Some(irq_ns) = irq_ns {
            self.split.add(irq_ns, latency_ns);
        }
        let slowest_kept = self.worst.last().map_or(0, |c| c.latency_ns);
        if self.worst.len() < KEEP_WORST || latency_ns > slowest_kept {
            let from = sample.deadline_ns.saturating_sub(LEAD_NS);
            let trace = window
                .events
                .iter()
                .filter(|(e, _)| e.ts_ns >= from && e.ts_ns <= sample.wake_ns)
                .take(KEEP_LINES)
                .map(|(_, l)| l.clone())
                .collect();
            self.worst.push(Chain {
                cpu: sample.cpu,
                latency_ns,
                deadline_ns: sample.deadline_ns,
                irq_ns,
                pieces,
                trace,
            });
            self.worst.sort_by_key(|c| std::cmp::Reverse(c.latency_ns));
            self.worst.truncate(KEEP_WORST);
        }
    }

    fn into_explained(
        self,
        instance: String,
        not_queued: u64,
        missing_events: Vec<String>,
        cleaned: Option<String>,
    ) -> Explained {
        let mut causes: Vec<CauseTotal> = self.totals.into_values().collect();
        causes.sort_by(|a, b| {
            (b.main_in, b.total_ns)
                .cmp(&(a.main_in, a.total_ns))
                .then_with(|| a.cause.cmp(&b.cause))
        });
        Explained {
            threshold_ns: self.threshold_ns,
            instance,
            over_threshold: self.over + not_queued,
            explained: self.explained,
            not_queued,
            lost_events: self.lost,
            events: self.events,
            causes,
            worst: self.worst,
            irq_thread: (self.split.samples > 0).then_some(self.split),
            missing_events,
            cleaned,
        }
    }
}

/// When the measuring thread of `sample` was woken after its deadline, as
/// its CPU's trace says (its timer's callback wakes it in the interrupt):
/// trace times are cut to the µs, so a wake-up up to 1 µs before the
/// deadline counts, as in [`chain::explain`].
fn woken_at(window: &Window, sample: &Sample) -> Option<u64> {
    (window.events.iter().map(|(e, _)| e))
        .filter(|e| e.ts_ns + 1000 > sample.deadline_ns && e.ts_ns <= sample.wake_ns)
        .find(|e| matches!(e.kind, Kind::Wakeup { pid } if pid == sample.tid))
        .map(|e| e.ts_ns.max(sample.deadline_ns))
}

/// Explains `sample` from its CPU's window.
fn explain_one(c: &mut Collected, windows: &HashMap<u32, Window>, sample: &Sample) {
    let empty = Window::default();
    let w = windows.get(&sample.cpu).unwrap_or(&empty);
    // Events lost anywhere in the window leave the replayed state unsure.
    let lost = w.lost_after.iter().any(|&t| t <= sample.wake_ns);
    let pieces = chain::explain(&w.base, w.events.iter().map(|(e, _)| e), sample, lost);
    c.add(sample, pieces, w);
}

/// Takes one record of the trace into the windows.
fn take(c: &mut Collected, windows: &mut HashMap<u32, Window>, record: &[u8]) {
    match trace::parse(record) {
        Line::Event(e) => {
            c.events += 1;
            let w = windows.entry(e.cpu).or_default();
            w.events.push_back((e, trace::escape(record)));
        }
        // Before a CPU's first event the state is unknown anyway
        // (the oldest events were overwritten): only a loss after
        // an event leaves a replayed state unsure.
        Line::Lost { cpu, events } => {
            c.lost += events;
            let w = windows.entry(cpu).or_default();
            if !w.events.is_empty() {
                let t = w.last_ts();
                w.lost_after.push(t);
            }
        }
        // Bytes without a head: no CPU's state is sure after them.
        Line::Garbled => {
            for w in windows.values_mut().filter(|w| !w.events.is_empty()) {
                let t = w.last_ts();
                w.lost_after.push(t);
            }
        }
    }
}

/// Reads `trace_pipe` to its end (tracing is off) and explains every
/// sample in `rx`, each once its CPU's events have passed its wake-up.
fn read_trace(
    mut pipe: impl Read,
    rx: Receiver<Sample>,
    threshold_ns: u64,
) -> Result<Collected, ExplainError> {
    let mut c = Collected {
        threshold_ns,
        ..Collected::default()
    };
    let mut waiting: Vec<Sample> = rx.try_iter().collect();
    c.over = waiting.len() as u64;
    // Latest first: ready samples come off the end.
    waiting.sort_by_key(|s| std::cmp::Reverse(s.wake_ns));
    let mut windows: HashMap<u32, Window> = HashMap::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut records = trace::Splitter::new();
    loop {
        let n = match pipe.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(source) => {
                return Err(ExplainError::Io {
                    what: "read trace_pipe".into(),
                    source,
                })
            }
        };
        if n == 0 {
            break;
        }
        records.push(&buf[..n]);
        while let Some(record) = records.next_record() {
            take(&mut c, &mut windows, &record);
        }
        while let Some(s) = waiting.last() {
            let passed = windows.get(&s.cpu).is_some_and(|w| w.last_ts() > s.wake_ns);
            if !passed {
                break;
            }
            let s = waiting.pop().expect("last exists");
            explain_one(&mut c, &windows, &s);
        }
        let keep_from = waiting.last().map_or(u64::MAX, |s| s.deadline_ns);
        let newest = windows.values().map(Window::last_ts).max().unwrap_or(0);
        for w in windows.values_mut() {
            w.trim(
                keep_from
                    .min(newest.saturating_sub(RETAIN_NS))
                    .saturating_sub(LEAD_NS),
            );
        }
    }
    for record in records.finish() {
        take(&mut c, &mut windows, &record);
    }
    while let Some(s) = waiting.pop() {
        explain_one(&mut c, &windows, &s);
    }
    Ok(c)
}

/// Why a cause reaches a shielded CPU, and the next step against it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Remedy {
    /// What it is and why the run-time shield leaves it.
    pub why: String,
    /// What removes or reduces it (the `audit` finding or command).
    pub next: String,
}

/// Why `cause` still reaches a shielded CPU and what to do about it;
/// `None` for the wake-up's own path.
pub fn remedy(cause: &CauseTotal) -> Option<Remedy> {
    let r = |why: &str, next: &str| {
        Some(Remedy {
            why: why.into(),
            next: next.into(),
        })
    };
    if cause.path {
        return None;
    }
    let name = cause.cause.as_str();
    match cause.kind.as_str() {
        "tick" => r(
            "the scheduler tick: only the boot line stops it on a busy CPU",
            "boot with nohz_full (cpushield boot-args; boot = true in the config; audit: boot.half)",
        ),
        "softirq" if name.ends_with("RCU") => r(
            "RCU callbacks run on every CPU that is not offloaded",
            "boot with rcu_nocbs (cpushield boot-args; audit: boot.half)",
        ),
        "softirq" if name.ends_with("SCHED") => r(
            "the scheduler's load balancing, raised by the tick",
            "boot with nohz_full: no tick, no balancing from it (cpushield boot-args)",
        ),
        "softirq" if name.ends_with("TIMER") || name.ends_with("HRTIMER") => r(
            "timers queued on this CPU, the tick's among them",
            "boot with nohz_full; --tune timer-migration moves new timers away",
        ),
        "softirq" => r(
            "a device's bottom half, raised by an interrupt on this CPU",
            "move the interrupt: cpushield on does, unless the kernel manages it (audit lists those; isolcpus=managed_irq on the boot line)",
        ),
        "irq" => r(
            "a device interrupt served on this CPU",
            "kernel-managed queue interrupts stay until boot with isolcpus=managed_irq (cpushield boot-args); others cpushield on moves (audit: irqs)",
        ),
        "ipi" => r(
            "another CPU asked this one to act (a TLB flush, a function call, a wake-up)",
            "keep the real-time process's memory and threads to itself; cpushield audit shows what shares the CPUs",
        ),
        "hrtimer" => r(
            "a kernel timer that fires on this CPU",
            "--tune timer-migration; nohz_full on the boot line",
        ),
        "task" | "timer" if name.contains("kworker/") => r(
            "a per-CPU kernel worker: per-CPU work stays on its CPU",
            "--tune workqueue moves unbound work; vmstat and writeback knobs reduce the rest (cpushield tune)",
        ),
        "task" | "timer" if name.contains("ksoftirqd/") => r(
            "softirqs deferred to their per-CPU thread",
            "as for the softirq it runs: see the softirq rows",
        ),
        "task" | "timer" => r(
            "another thread ran on the measured CPU",
            "cpushield status lists what runs inside the shield; cpushield move takes it out",
        ),
        "hardware" => r(
            "the measuring thread ran, in no interrupt, and lost the time anyway: an SMI (measure counts them per CPU where the MSR can be read), an NMI, firmware or the hypervisor",
            "firmware settings (power management, SMI sources); on a virtual machine, the host's load and the vCPU's pinning",
        ),
        "unexplained" => r(
            "no trace evidence for this time (events lost, or the CPU's state not yet known)",
            "run longer, or with fewer CPUs traced",
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The run, as the kernel writes it: on CPU 3 `usleep` (221)
    /// runs, then `prev` exits and a SCHED_FIFO 90 spinner named `spin`
    /// (222) holds the CPU for 4.5 s while the measuring thread (900) is
    /// due at 100 µs: woken by its timer, it runs only when the spinner
    /// stops. Returns the stream and the sample.
    fn spinner_run(prev: &[u8], spin: &[u8]) -> (Vec<u8>, Sample) {
        use trace::render::*;
        let t0 = 21_000_000; // µs
        let meas: &[u8] = b"cpushield-meas";
        let mut s = Vec::new();
        let mut rec = |comm: &[u8], pid, us, event, fields: &[u8]| {
            s.extend(record(head(comm, pid, 3, t0 + us), event, fields));
        };
        rec(
            b"<idle>",
            0,
            0,
            "sched_switch",
            &switch(b"swapper/3", 0, prev, 221, 120),
        );
        rec(
            prev,
            221,
            10,
            "sched_switch",
            &switch(prev, 221, spin, 222, 9),
        );
        rec(spin, 222, 101, "local_timer_entry", b"vector=236");
        rec(
            spin,
            222,
            102,
            "hrtimer_expire_entry",
            b"hrtimer=00000000a1b2c3d4 function=hrtimer_wakeup now=21000101999",
        );
        rec(spin, 222, 102, "sched_wakeup", &wakeup(meas, 900, 49, 3));
        rec(
            spin,
            222,
            103,
            "hrtimer_expire_exit",
            b"hrtimer=00000000a1b2c3d4",
        );
        rec(spin, 222, 104, "local_timer_exit", b"vector=236");
        rec(
            spin,
            222,
            4_500_000,
            "sched_switch",
            &switch(spin, 222, meas, 900, 49),
        );
        rec(
            meas,
            900,
            4_500_010,
            "sched_switch",
            &switch(meas, 900, b"swapper/3", 0, 120),
        );
        let sample = Sample {
            cpu: 3,
            tid: 900,
            deadline_ns: (t0 + 100) * 1000,
            wake_ns: (t0 + 4_500_005) * 1000,
            spinning: false,
        };
        (s, sample)
    }

    /// Reads `stream` as `trace_pipe` and explains `sample`.
    fn explain_stream(stream: &[u8], sample: Sample) -> Vec<Piece> {
        let (tx, rx) = sync_channel(1);
        tx.send(sample).unwrap();
        drop(tx);
        let c = read_trace(stream, rx, 1).unwrap();
        assert_eq!(c.explained, 1);
        c.worst[0].pieces.clone()
    }

    /// Whether a piece charges the task named `comm`.
    fn charges(pieces: &[Piece], comm: &[u8]) -> bool {
        let comm = trace::escape(comm);
        pieces.iter().any(|p| match &p.cause {
            Cause::Task { comm: c } | Cause::TimerDelivery { busy: Some(c) } => *c == comm,
            _ => false,
        })
    }

    #[test]
    fn the_timer_irq_is_split_from_the_thread_as_timerlat_does() {
        // Woken by its timer 2 µs after the deadline, run 4.5 s later.
        let (stream, sample) = spinner_run(b"usleep", b"spin");
        let (tx, rx) = sync_channel(1);
        tx.send(sample).unwrap();
        drop(tx);
        let c = read_trace(stream.as_slice(), rx, 1).unwrap();
        assert_eq!(c.worst[0].irq_ns, Some(2_000));
        assert!(c.worst[0]
            .line()
            .contains("(its timer IRQ woke it at 2.0 µs)"));
        let split = c
            .into_explained(String::new(), 0, Vec::new(), None)
            .irq_thread;
        let split = split.expect("the wake-up was traced");
        assert_eq!(
            (split.samples, split.irq_max_ns, split.irq_late),
            (1, 2_000, 0)
        );
        assert!(split.thread_max_ns > 4_499_000_000, "{split:?}");
        let mut late = IrqThreadSplit::default();
        late.add(900, 1_000);
        late.add(100, 1_000);
        assert_eq!((late.samples, late.irq_late, late.irq_max_ns), (2, 1, 900));
    }

    #[test]
    fn a_spinner_named_with_a_newline_is_charged_its_own_time() {
        let (stream, sample) = spinner_run(b"usleep", b"qxhog\n");
        let pieces = explain_stream(&stream, sample);
        let labels: Vec<&str> = pieces.iter().map(|p| p.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "timer delivery (qxhog\\n running)",
                "timer interrupt",
                "task qxhog\\n",
                "return to user"
            ]
        );
        let main = chain::main_piece(&pieces).unwrap();
        assert_eq!(
            main.cause,
            Cause::Task {
                comm: "qxhog\\n".into()
            }
        );
        assert!(main.ns > 4_499_000_000, "{}", main.ns);
    }

    #[test]
    fn hostile_names_are_charged_their_own_time_or_none() {
        let names: &[&[u8]] = &[
            b"qxhog\n",
            b"\nx",
            b") R 1 2 (",
            b" prev_pid=9 ",
            b"==> next_comm=",
            b" next_pid=221",
            b"[003]",
            b"\n-221    [003] ",
            b"\xff\xfe",
            b"usleep",
        ];
        for &spin in names {
            for prev in [&b"usleep"[..], b"\nusleep", b" next_pid=222"] {
                if spin == prev {
                    continue;
                }
                let (stream, sample) = spinner_run(prev, spin);
                let pieces = explain_stream(&stream, sample);
                let main = chain::main_piece(&pieces).unwrap();
                assert_eq!(
                    main.cause,
                    Cause::Task {
                        comm: trace::escape(spin)
                    },
                    "{spin:?} after {prev:?}"
                );
                assert!(!charges(&pieces, prev), "{pieces:?}");
            }
        }
    }

    #[test]
    fn a_switch_that_does_not_parse_leaves_the_spinners_time_unexplained() {
        let (stream, sample) = spinner_run(b"usleep", b"qxhog");
        // The switch to the spinner in a form this reader does not know.
        let text = String::from_utf8(stream).unwrap();
        let text = text.replacen(
            "prev_comm=usleep prev_pid=221 prev_prio=120 prev_state=R+ ==> next_comm=qxhog next_pid=222 next_prio=9",
            "prev_comm=usleep prev_pid=221 ==> next_comm=qxhog next_pid=222 next_prio=9 next_cpu=3",
            1,
        );
        let pieces = explain_stream(text.as_bytes(), sample);
        assert!(!charges(&pieces, b"usleep"), "{pieces:?}");
        assert_eq!(
            chain::main_piece(&pieces).unwrap().cause,
            Cause::Unexplained
        );
    }

    mod generated {
        use super::*;
        use proptest::prelude::*;

        fn comm() -> impl Strategy<Value = Vec<u8>> {
            proptest::collection::vec(1u8..=255, 0..=trace::COMM_MAX)
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]

            /// Whatever the two tasks are named: the spinner's time is
            /// charged to the spinner's name and nothing to the task
            /// before it.
            #[test]
            fn the_spinners_time_is_never_charged_to_the_task_before(prev in comm(), spin in comm()) {
                prop_assume!(trace::escape(&prev) != trace::escape(&spin));
                let (stream, sample) = spinner_run(&prev, &spin);
                let pieces = explain_stream(&stream, sample);
                let main = chain::main_piece(&pieces).unwrap();
                prop_assert_eq!(&main.cause, &Cause::Task { comm: trace::escape(&spin) });
                prop_assert!(!charges(&pieces, &prev), "{:?}", pieces);
            }
        }
    }

    #[test]
    fn a_chain_reads_as_one_line_in_time_order() {
        let piece = |cause: Cause, ns| Piece {
            label: cause.to_string(),
            cause,
            ns,
        };
        let c = Chain {
            cpu: 3,
            latency_ns: 312_000,
            deadline_ns: 1,
            irq_ns: None,
            pieces: vec![
                piece(Cause::TimerDelivery { busy: None }, 40_000),
                piece(
                    Cause::Irq {
                        irq: 45,
                        name: "nvme0q3".into(),
                    },
                    180_000,
                ),
                piece(Cause::Return, 2_400),
            ],
            trace: vec![],
        };
        assert_eq!(
            c.line(),
            "312 µs on CPU 3: timer delivery (idle exit) 40 µs, IRQ 45 nvme0q3 180 µs, return to user 2.4 µs"
        );
    }

    #[test]
    fn the_ring_buffer_holds_the_run_within_an_eighth_of_memory() {
        assert_eq!(buffer_kb(10.0, 1, 8 << 20), 11 * 1024);
        // 1 GiB available, 2 CPUs traced, an hour: 64 MiB each.
        assert_eq!(buffer_kb(3600.0, 2, 1 << 20), 64 * 1024);
        assert_eq!(buffer_kb(0.1, 1, 1024), 1024, "never below 1 MiB");
    }

    fn total(cause: Cause) -> CauseTotal {
        CauseTotal {
            cause: cause.to_string(),
            kind: cause.kind().into(),
            path: cause.is_path(),
            samples: 1,
            main_in: 1,
            total_ns: 1,
            max_ns: 1,
        }
    }

    #[test]
    fn what_the_shield_leaves_points_at_the_boot_line_or_a_knob() {
        let next = |c: Cause| remedy(&total(c)).map(|r| r.next);
        assert!(next(Cause::Tick).unwrap().contains("nohz_full"));
        assert!(next(Cause::Softirq { name: "RCU".into() })
            .unwrap()
            .contains("rcu_nocbs"));
        assert!(next(Cause::Irq {
            irq: 3,
            name: "nvme0q3".into()
        })
        .unwrap()
        .contains("managed_irq"));
        assert!(next(Cause::Task {
            comm: "kworker/3:1".into()
        })
        .unwrap()
        .contains("workqueue"));
        assert_eq!(
            next(Cause::TimerIrq),
            None,
            "the path is not a cause to remove"
        );
        assert_eq!(next(Cause::Switch), None);
    }
}
