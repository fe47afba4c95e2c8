//! Command-line options of `cpushield measure`, and their validation.
//!
//! Parsing and validating have no side effects: [`Config::from_args`]
//! checks every option against the machine (read through [`Sys`]) and
//! returns a [`Config`], or an error naming the input and the valid values,
//! before any thread is created or any setting touched.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::MeasureError;
use crate::cpulist::CpuSet;
use crate::sys::Sys;

/// The probes `cpushield measure` can run.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProbeKind {
    /// Timer wake-up latency, cyclictest's method (clock_nanosleep to absolute deadlines).
    Timer,
    /// RTC periodic interrupt at 2048 Hz, realfeel's method (blocking read of /dev/rtc).
    Rtc,
    /// OS noise: gaps in a tight loop reading the cycle counter (osnoise/oslat style); it spins at SCHED_FIFO 99 for the whole run unless --runtime says less.
    Noise,
    /// Back-to-back clock_gettime pairs.
    Gtod,
    /// A periodic (5 ms default) thread on a kernel interval timer: lateness of each period.
    Periodic,
    /// The latency of each load of a pointer chase through working sets the size of
    /// L1d, L2 and the CPU's L3 share, timed with the cycle counter (x86_64).
    Cache,
    /// The time of one 4-byte read of a PCI function (`--device`): of its
    /// configuration space by default (no side effects), of a memory BAR's
    /// register only when named (`--device-bar`), timed with the cycle
    /// counter (x86_64).
    Pci,
}

impl ProbeKind {
    /// The lowercase name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            ProbeKind::Timer => "timer",
            ProbeKind::Rtc => "rtc",
            ProbeKind::Noise => "noise",
            ProbeKind::Gtod => "gtod",
            ProbeKind::Periodic => "periodic",
            ProbeKind::Cache => "cache",
            ProbeKind::Pci => "pci",
        }
    }

    /// Default interval (period) in µs; `None` where it does not apply.
    pub fn default_interval_us(self) -> Option<u64> {
        match self {
            ProbeKind::Timer => Some(1000),
            ProbeKind::Periodic => Some(5000),
            ProbeKind::Noise => Some(1_000_000),
            // The RTC's rate is fixed at 2048 Hz; gtod, cache and pci run back to back.
            ProbeKind::Rtc | ProbeKind::Gtod | ProbeKind::Cache | ProbeKind::Pci => None,
        }
    }
}

/// Options of `cpushield measure`.
#[derive(clap::Args, Debug, Clone)]
pub struct MeasureArgs {
    /// CPUs to measure, one thread each ("1", "2-3", "0xc"). Default: every
    /// online CPU but the first, which keeps the main thread (all CPUs on a
    /// one-CPU machine).
    #[arg(long, short = 'c', value_name = "LIST")]
    pub cpus: Option<CpuSet>,

    /// Probes to run, one after the other (comma-separated).
    #[arg(
        long,
        short = 'P',
        value_enum,
        value_delimiter = ',',
        default_value = "timer"
    )]
    pub probe: Vec<ProbeKind>,

    /// Interval between wake-ups in µs (timer: 1000, periodic: 5000; for
    /// noise, the period: 1000000). Must be at least 1.
    #[arg(long, short = 'i', value_name = "US",
          value_parser = clap::value_parser!(u64).range(1..=3_600_000_000))]
    pub interval: Option<u64>,

    /// How long to run: seconds, or with a unit (90s, 10m, 2h) (default
    /// 10 s when --loops is not given).
    #[arg(long, short = 'D', value_name = "DURATION", conflicts_with = "loops",
          value_parser = crate::input::positive_seconds)]
    pub duration: Option<f64>,

    /// Stop after this many samples per CPU (for noise: periods).
    #[arg(long, short = 'l', value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub loops: Option<u64>,

    /// SCHED_FIFO priority of the measuring threads, 1..99.
    #[arg(long, short = 'p', value_name = "P", default_value_t = 99,
          value_parser = clap::value_parser!(i32).range(1..=99))]
    pub prio: i32,

    /// Number of histogram buckets (1..=1000000).
    #[arg(long, value_name = "N", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub buckets: u64,

    /// Width of one histogram bucket in µs (1..=1000000).
    #[arg(long, value_name = "US", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub bucket_width: u64,

    /// Wake-ups (or, for noise and gtod, thousands of loop turns) run
    /// before recording starts. 0 measures from the first cycle, like
    /// cyclictest. The cache probe warms each working set with one untimed
    /// pass per round instead.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub warmup: u64,

    /// Noise probe: a gap longer than this (µs) between two cycle-counter
    /// reads is noise.
    #[arg(long, value_name = "US", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub threshold: u64,

    /// Noise probe: how long to spin in each period, µs (default: the whole period).
    #[arg(long, value_name = "US",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub runtime: Option<u64>,

    /// pci probe: the PCI function to read, as sysfs (0000:00:1f.0) or
    /// lspci (00:1f.0) names it. By default the probe times 4-byte reads
    /// of its configuration space (pread of
    /// /sys/bus/pci/devices/BDF/config), which have no side effects on the
    /// device (the kernel may wake a runtime-suspended one to answer).
    #[arg(long, value_name = "BDF")]
    pub device: Option<String>,

    /// pci probe: read a register of memory BAR N (0-5) instead, through a
    /// read-only mapping of its resourceN file (root). Only when named:
    /// some device registers clear on read (interrupt status, FIFOs), so
    /// reading one can take an event from the device's driver.
    #[arg(long, value_name = "N", requires = "device",
          value_parser = clap::value_parser!(u8).range(0..=5))]
    pub device_bar: Option<u8>,

    /// pci probe: byte offset of the 4-byte register read, hex (0x10) or
    /// decimal, a multiple of 4 within config space or the BAR (default 0).
    #[arg(long, value_name = "OFF", requires = "device",
          value_parser = super::device::parse_offset)]
    pub device_offset: Option<u64>,

    /// Cache probe: leave each working set idle this long after warming
    /// it, then time its loads (`10ms`; a bare number is in ms): a
    /// real-time task's data between two activations, when a neighbour
    /// can evict it. Default 0: timed straight after the warm pass.
    #[arg(long, value_name = "DURATION",
          value_parser = |s: &str| crate::input::duration_in(s, crate::input::TimeUnit::Millis))]
    pub cache_gap: Option<u64>,

    /// Cache probe: walk one working set of this size (`512K`, `4M`, at
    /// most 64M) instead of the L1d, the L2 and the L3 share: the data a
    /// real-time task touches in one activation.
    #[arg(long, value_name = "SIZE",
          value_parser = |s: &str| super::cache::parse_size(s)
              .filter(|b| (128..=super::cache::MAX_SET_BYTES).contains(b))
              .ok_or_else(|| format!("{s:?}: a size from 128 to 64M, such as 512K or 4M")))]
    pub working_set: Option<u64>,

    /// Print the result as JSON (schema: docs/measure-json.md).
    #[arg(long)]
    pub json: bool,

    /// Also write the histogram to FILE in cyclictest's `-h` format (one
    /// file per probe: FILE.PROBE when several probes run).
    #[arg(long, value_name = "FILE")]
    pub histfile: Option<PathBuf>,

    /// Run the measuring threads SCHED_OTHER and do not lock memory (for
    /// unprivileged test runs of `compare`; results are not representative).
    /// Test builds only (the `fixture` feature).
    #[cfg(feature = "fixture")]
    #[arg(long, hide = true)]
    pub no_rt: bool,

    /// Hold /dev/cpu_dma_latency at N µs during the run (off by default:
    /// cpushield never tunes the machine silently). Released at exit.
    #[arg(long, value_name = "N")]
    pub dma_latency: Option<u32>,

    /// Explain every sample slower than US µs (timer, periodic and noise
    /// probes): trace the measured CPUs' kernel events (in a tracefs
    /// instance of its own, removed at the end) and name what held the CPU
    /// from the timer's expiry to the thread running again, or through a
    /// noise gap: IRQs, softirqs, the tick, IPIs, other tasks, and in a
    /// gap with no kernel event the hardware (SMI, NMI, firmware,
    /// hypervisor: osnoise's HW noise); timer samples also split their IRQ
    /// and thread latency (timerlat's). Needs root and an unused tracefs.
    #[arg(long, value_name = "US",
          value_parser = crate::input::explain_micros)]
    pub explain: Option<u64>,

    /// Every minute, replace FILE (atomically, synced) with the run so far:
    /// each CPU's histogram and per-second maxima, in results.json's terms.
    /// A crash or power cut then loses at most a minute. Its directory must
    /// exist.
    #[arg(long, value_name = "FILE")]
    pub checkpoint: Option<std::path::PathBuf>,

    /// Bounds in µs ("50,100") whose exceedances the progress line counts
    /// per CPU, with p99 and p99.99, on a terminal.
    #[arg(long, value_name = "US", value_delimiter = ',')]
    pub over: Vec<f64>,

    /// Remove the trace instance that a killed `measure --explain` left,
    /// then exit (the next `--explain` run does it too).
    #[arg(long, exclusive = true)]
    pub clean_up: bool,
}

/// When a run stops.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// After this many samples per CPU (noise: periods).
    Loops(u64),
    /// After this long.
    Duration(#[serde(serialize_with = "secs", deserialize_with = "from_secs")] Duration),
}

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

fn from_secs<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = f64::deserialize(d)?;
    Duration::try_from_secs_f64(s).map_err(serde::de::Error::custom)
}

/// A validated measurement request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Config {
    /// Probes, run in this order.
    pub probes: Vec<ProbeKind>,
    /// Measured CPUs.
    pub cpus: CpuSet,
    /// Online CPUs when validated.
    #[serde(skip)]
    pub online: CpuSet,
    /// Interval override in ns (`None`: each probe's default).
    pub interval_ns: Option<u64>,
    /// When to stop.
    pub stop: Stop,
    /// SCHED_FIFO priority; `None` leaves the threads SCHED_OTHER (tests).
    pub priority: Option<i32>,
    /// Histogram buckets.
    pub buckets: usize,
    /// Histogram bucket width, ns.
    pub bucket_width_ns: u64,
    /// Warm-up iterations.
    pub warmup: u64,
    /// Noise threshold, ns.
    pub noise_threshold_ns: u64,
    /// Noise runtime per period, ns (`None`: the whole period).
    pub noise_runtime_ns: Option<u64>,
    /// Lock all memory (mlockall) during the run.
    pub lock_memory: bool,
    /// /dev/cpu_dma_latency value to hold, µs.
    pub dma_latency_us: Option<u32>,
    /// Where each minute's checkpoint goes (`--checkpoint`).
    pub checkpoint: Option<std::path::PathBuf>,
    /// Bounds whose exceedances the progress line counts, ns (`--over`).
    pub over_ns: Vec<u64>,
    /// `--explain`: samples slower than this many ns are explained.
    #[serde(default)]
    pub explain_ns: Option<u64>,
    /// The pci probe's function and register (`--device`).
    #[serde(default)]
    pub device: Option<super::device::DeviceTarget>,
    /// The cache probe's idle time between warming a set and timing it,
    /// ns (`--cache-gap`; 0: none).
    #[serde(default)]
    pub cache_gap_ns: u64,
    /// The cache probe's one working set, bytes (`--working-set`).
    #[serde(default)]
    pub working_set: Option<u64>,
}

impl MeasureArgs {
    /// Whether the measuring threads run SCHED_FIFO with locked memory
    /// (always, but for a test build's `--no-rt`).
    pub fn realtime(&self) -> bool {
        #[cfg(feature = "fixture")]
        return !self.no_rt;
        #[cfg(not(feature = "fixture"))]
        true
    }
}

/// The CPUs to measure: `--cpus`, all online CPUs but the first by default
/// (all of one); an error naming the CPUs that are not online.
fn measured_cpus(asked: Option<&CpuSet>, online: &CpuSet) -> Result<CpuSet, MeasureError> {
    let cpus = match asked {
        Some(c) => c.clone(),
        None if online.len() > 1 => {
            let mut c = online.clone();
            c.remove(online.first().unwrap_or(0));
            c
        }
        None => online.clone(),
    };
    let unknown = cpus.difference(online);
    if !unknown.is_empty() {
        return Err(MeasureError::UnknownCpu {
            requested: cpus,
            unknown,
            online: online.clone(),
        });
    }
    Ok(cpus)
}

impl Config {
    /// Validates `args` against the machine behind `sys`. No side effects.
    pub fn from_args(args: &MeasureArgs, sys: &Sys) -> Result<Config, MeasureError> {
        let online = sys.read_cpulist("sys/devices/system/cpu/online")?;
        let cpus = measured_cpus(args.cpus.as_ref(), &online)?;
        check_numbers(args)?;
        let stop = stop_of(args)?;
        check_probe_options(args)?;
        let device = device_of(args, sys)?;
        let mut probes = Vec::new();
        for p in &args.probe {
            if !probes.contains(p) {
                probes.push(*p);
            }
        }
        Ok(Config {
            probes,
            cpus,
            online,
            interval_ns: args.interval.map(|us| us * 1000),
            stop,
            priority: args.realtime().then_some(args.prio),
            buckets: args.buckets as usize,
            bucket_width_ns: args.bucket_width * 1000,
            warmup: args.warmup,
            noise_threshold_ns: args.threshold * 1000,
            noise_runtime_ns: args.runtime.map(|us| us * 1000),
            lock_memory: args.realtime(),
            dma_latency_us: args.dma_latency,
            explain_ns: args.explain.map(|us| us * 1000),
            device,
            cache_gap_ns: args.cache_gap.unwrap_or(0) * 1_000_000,
            working_set: args.working_set,
            checkpoint: checkpoint_of(args)?,
            over_ns: args
                .over
                .iter()
                .map(|us| (us * 1000.0).round() as u64)
                .collect(),
        })
    }

    /// The interval of `probe` in ns (its default unless overridden).
    pub fn interval_ns_of(&self, probe: ProbeKind) -> Option<u64> {
        match probe {
            ProbeKind::Rtc | ProbeKind::Gtod | ProbeKind::Cache | ProbeKind::Pci => None,
            _ => self
                .interval_ns
                .or(probe.default_interval_us().map(|us| us * 1000)),
        }
    }
}

/// An invalid option: its name, the value given and what would be valid.
fn invalid<T>(option: &'static str, value: String, valid: &str) -> Result<T, MeasureError> {
    Err(MeasureError::InvalidOption {
        option,
        value,
        valid: valid.to_string(),
    })
}

/// The numbers of `args` in their ranges, and at least one probe.
fn check_numbers(args: &MeasureArgs) -> Result<(), MeasureError> {
    if args.interval == Some(0) {
        return invalid("--interval", "0".into(), "1 µs or more");
    }
    if !(1..=99).contains(&args.prio) {
        return invalid("--prio", args.prio.to_string(), "1..99");
    }
    if args.buckets == 0 || args.buckets > 1_000_000 {
        return invalid("--buckets", args.buckets.to_string(), "1..=1000000");
    }
    if args.bucket_width == 0 || args.bucket_width > 1_000_000 {
        return invalid(
            "--bucket-width",
            args.bucket_width.to_string(),
            "1..=1000000 µs",
        );
    }
    if let Some(us) = args
        .over
        .iter()
        .find(|us| !(0.001..=10_000_000.0).contains(*us))
    {
        return invalid("--over", us.to_string(), "0.001..=10000000 µs");
    }
    if args.probe.is_empty() {
        return invalid(
            "--probe",
            String::new(),
            "timer, rtc, noise, gtod, periodic, cache, pci",
        );
    }
    Ok(())
}

/// `--checkpoint`'s file: in a directory that exists, and not a directory
/// itself (nothing is written before the run).
fn checkpoint_of(args: &MeasureArgs) -> Result<Option<std::path::PathBuf>, MeasureError> {
    let Some(path) = &args.checkpoint else {
        return Ok(None);
    };
    let shown = path.display().to_string();
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    if path.file_name().is_none() || path.is_dir() {
        return invalid("--checkpoint", shown, "a file name, not a directory");
    }
    if !dir.is_dir() {
        return invalid("--checkpoint", shown, "a file in a directory that exists");
    }
    Ok(Some(path.clone()))
}

/// When the measurement stops: after `--loops`, or `--duration` (10 s).
fn stop_of(args: &MeasureArgs) -> Result<Stop, MeasureError> {
    let stop = match (args.loops, args.duration) {
        (Some(0), _) => return invalid("--loops", "0".into(), "1 or more"),
        (Some(n), _) => Stop::Loops(n),
        (None, Some(d)) if !(d > 0.0 && d.is_finite() && d <= 1e7) => {
            return invalid("--duration", d.to_string(), "seconds, more than 0");
        }
        (None, Some(d)) => Stop::Duration(Duration::from_secs_f64(d)),
        (None, None) => Stop::Duration(Duration::from_secs(10)),
    };
    Ok(stop)
}

/// The options that belong to one probe: `--runtime` within the noise
/// period, `--explain` with the timer, periodic or noise probe.
fn check_probe_options(args: &MeasureArgs) -> Result<(), MeasureError> {
    if let (Some(rt), true) = (args.runtime, args.probe.contains(&ProbeKind::Noise)) {
        let period = args
            .interval
            .or(ProbeKind::Noise.default_interval_us())
            .unwrap_or(0);
        if rt > period {
            return invalid(
                "--runtime",
                rt.to_string(),
                &format!("1..={period} µs (the noise period, --interval)"),
            );
        }
    }
    let cache = args.probe.contains(&ProbeKind::Cache);
    if let (Some(ms), false) = (args.cache_gap, cache) {
        return invalid("--cache-gap", format!("{ms}ms"), "with --probe cache only");
    }
    if let (Some(b), false) = (args.working_set, cache) {
        return invalid("--working-set", b.to_string(), "with --probe cache only");
    }
    let explains =
        |p: &ProbeKind| matches!(p, ProbeKind::Timer | ProbeKind::Periodic | ProbeKind::Noise);
    if let (Some(us), false) = (args.explain, args.probe.iter().any(explains)) {
        return invalid(
            "--explain",
            us.to_string(),
            "with the timer, periodic or noise probe (a sample there has a deadline, a gap its start, to explain from)",
        );
    }
    Ok(())
}

/// The PCI function the pci probe reads, checked against the machine.
fn device_of(
    args: &MeasureArgs,
    sys: &Sys,
) -> Result<Option<super::device::DeviceTarget>, MeasureError> {
    let pci = args.probe.contains(&ProbeKind::Pci);
    let device = match (&args.device, pci) {
            (None, true) => {
                return invalid(
                    "--device",
                    String::new(),
                    "a PCI function for the pci probe, e.g. --device 0000:00:1f.0 (see /sys/bus/pci/devices)",
                )
            }
            (Some(d), false) => {
                return invalid("--device", d.clone(), "with --probe pci only")
            }
            (Some(d), true) => Some(super::device::check(
                sys,
                d,
                args.device_bar,
                args.device_offset,
            )?),
            (None, false) if args.device_bar.is_some() || args.device_offset.is_some() => {
                return invalid(
                    "--device-bar/--device-offset",
                    String::new(),
                    "with --probe pci --device BDF",
                )
            }
            (None, false) => None,
        };
    Ok(device)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        m: MeasureArgs,
    }

    fn parse(args: &[&str]) -> Result<MeasureArgs, clap::Error> {
        let mut v = vec!["measure"];
        v.extend_from_slice(args);
        Cli::try_parse_from(v).map(|c| c.m)
    }

    fn machine(online: &str) -> (tempfile::TempDir, Sys) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sys/devices/system/cpu");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("online"), online).unwrap();
        let sys = Sys::at(dir.path());
        (dir, sys)
    }

    fn err_text(args: &[&str]) -> String {
        parse(args).unwrap_err().to_string()
    }

    #[test]
    fn defaults() {
        let (_d, sys) = machine("0-3\n");
        let c = Config::from_args(&parse(&[]).unwrap(), &sys).unwrap();
        assert_eq!(c.probes, vec![ProbeKind::Timer]);
        assert_eq!(c.cpus.to_string(), "1-3");
        assert_eq!(c.priority, Some(99));
        assert_eq!(c.stop, Stop::Duration(Duration::from_secs(10)));
        assert_eq!(c.interval_ns_of(ProbeKind::Timer), Some(1_000_000));
        assert_eq!(c.interval_ns_of(ProbeKind::Periodic), Some(5_000_000));
        assert_eq!(c.buckets, 1000);
        assert_eq!(c.bucket_width_ns, 1000);
        assert_eq!(c.dma_latency_us, None);
        let (_d, one) = machine("0\n");
        let c = Config::from_args(&parse(&[]).unwrap(), &one).unwrap();
        assert_eq!(c.cpus.to_string(), "0");
    }

    #[test]
    fn every_accepted_form() {
        let a = parse(&[
            "--cpus",
            "1",
            "--probe",
            "timer,noise",
            "--interval",
            "200",
            "--loops",
            "5",
            "--prio",
            "1",
            "--buckets",
            "50",
            "--bucket-width",
            "2",
            "--json",
            "--histfile",
            "/tmp/h",
            "--warmup",
            "0",
            "--threshold",
            "3",
            "--runtime",
            "100",
        ])
        .unwrap();
        let (_d, sys) = machine("0-1");
        let c = Config::from_args(&a, &sys).unwrap();
        assert_eq!(c.probes, vec![ProbeKind::Timer, ProbeKind::Noise]);
        assert_eq!(c.stop, Stop::Loops(5));
        assert_eq!(c.interval_ns_of(ProbeKind::Noise), Some(200_000));
        assert_eq!(c.interval_ns_of(ProbeKind::Gtod), None);
        assert_eq!(c.bucket_width_ns, 2000);
        assert_eq!(c.noise_threshold_ns, 3000);
        assert_eq!(c.noise_runtime_ns, Some(100_000));
        let a = parse(&[
            "-c", "0x2", "-P", "periodic", "-P", "gtod", "-D", "0.5", "-p", "80",
        ])
        .unwrap();
        let c = Config::from_args(&a, &sys).unwrap();
        assert_eq!(c.probes, vec![ProbeKind::Periodic, ProbeKind::Gtod]);
        assert_eq!(c.cpus.to_string(), "1");
        assert_eq!(c.stop, Stop::Duration(Duration::from_millis(500)));
        assert_eq!(c.priority, Some(80));
    }

    #[test]
    fn bad_options_name_input_and_valid_values() {
        let e = err_text(&["--interval", "0"]);
        assert!(e.contains("--interval") && e.contains("1..="), "{e}");
        let e = err_text(&["--prio", "100"]);
        assert!(e.contains("--prio") && e.contains("1..=99"), "{e}");
        let e = err_text(&["--prio", "0"]);
        assert!(e.contains("1..=99"), "{e}");
        let e = err_text(&["--probe", "bogus"]);
        assert!(e.contains("bogus") && e.contains("timer"), "{e}");
        let e = err_text(&["--cpus", "x"]);
        assert!(e.contains("\"x\""), "{e}");
        let e = err_text(&["--loops", "3", "--duration", "1"]);
        assert!(e.contains("cannot be used with"), "{e}");
        let e = err_text(&["--buckets", "0"]);
        assert!(e.contains("--buckets"), "{e}");
    }

    #[test]
    fn the_pci_probe_needs_a_device_and_a_device_needs_the_pci_probe() {
        let (d, sys) = machine("0-1\n");
        crate::sys::pci::testing::device(
            d.path(),
            "0000:00:1f.0",
            &[],
            &crate::sys::pci::testing::config(256, &[]),
        );
        let e = Config::from_args(&parse(&["-P", "pci"]).unwrap(), &sys).unwrap_err();
        assert!(
            e.to_string().contains("--device") && e.to_string().contains("0000:00:1f.0"),
            "{e}"
        );
        let e = Config::from_args(&parse(&["--device", "00:1f.0"]).unwrap(), &sys).unwrap_err();
        assert!(e.to_string().contains("with --probe pci only"), "{e}");
        let e = err_text(&["--device-bar", "0"]);
        assert!(e.contains("--device"), "{e}");
        let c = Config::from_args(
            &parse(&["-P", "pci", "--device", "00:1f.0", "--device-offset", "0x8"]).unwrap(),
            &sys,
        )
        .unwrap();
        let t = c.device.clone().unwrap();
        assert_eq!(
            (t.address.to_string(), t.offset),
            ("0000:00:1f.0".into(), 8)
        );
        assert_eq!(c.interval_ns_of(ProbeKind::Pci), None);
        let e = Config::from_args(&parse(&["-P", "pci", "--device", "00:1e.0"]).unwrap(), &sys)
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("under /sys/bus/pci/devices: 0000:00:1f.0"),
            "{e}"
        );
    }

    #[test]
    fn unknown_cpu_and_bad_values_in_validation() {
        let (_d, sys) = machine("0-1\n");
        let e = Config::from_args(&parse(&["--cpus", "1-2"]).unwrap(), &sys).unwrap_err();
        let t = e.to_string();
        assert!(t.contains("2") && t.contains("online CPUs: 0-1"), "{t}");
        let e = parse(&["--duration", "0"]).unwrap_err();
        assert!(e.to_string().contains("--duration"), "{e}");
        assert_eq!(parse(&["--duration", "10m"]).unwrap().duration, Some(600.0));
        let e = Config::from_args(
            &parse(&["-P", "noise", "-i", "100", "--runtime", "200"]).unwrap(),
            &sys,
        )
        .unwrap_err();
        assert!(e.to_string().contains("--runtime"), "{e}");
        // The library re-checks what clap already rejects.
        let mut a = parse(&[]).unwrap();
        a.interval = Some(0);
        assert!(Config::from_args(&a, &sys)
            .unwrap_err()
            .to_string()
            .contains("--interval"));
        a.interval = None;
        a.prio = 0;
        assert!(Config::from_args(&a, &sys)
            .unwrap_err()
            .to_string()
            .contains("1..99"));
    }
}
