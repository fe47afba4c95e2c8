//! The command line: every command, flag and help text. Shared by the
//! binary and by the packaging example that generates the man pages and
//! shell completions from it (tools/src/bin/package-assets.rs).

use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};
use cpushield::cpulist::CpuSet;

/// Shield CPUs for real-time work on a stock Linux machine, undo it exactly,
/// and measure the effect.
///
/// A shielded CPU runs only the tasks and interrupts you put there: every
/// other process, kernel thread and interrupt is moved to the remaining
/// (housekeeping) CPUs, enforced by a cpuset the kernel maintains, so new
/// processes cannot leak onto it. `cpushield off` gives everything back
/// exactly as it was.
///
/// Typical session (as root):
///   cpushield on 2-3                  shield CPUs 2 and 3
///   cpushield run --cpu 3 --fifo 80 -- ./control-loop
///   cpushield status                  what is where
///   cpushield off                     undo exactly
#[derive(Parser, Debug)]
#[command(name = "cpushield", version, verbatim_doc_comment, after_help = cpushield::exit::help())]
pub struct Cli {
    /// Root of the kernel's file systems: a fixture directory. Test builds
    /// only (the `fixture` feature): a shipped build has no such option.
    #[cfg(feature = "fixture")]
    #[arg(long, global = true, default_value = "/", hide = true)]
    pub root: PathBuf,

    #[command(subcommand)]
    pub command: Option<Command>,
}

impl Cli {
    /// The root of the kernel's file systems: `/`, or a test build's `--root`.
    pub fn root(&self) -> &Path {
        #[cfg(feature = "fixture")]
        return &self.root;
        #[cfg(not(feature = "fixture"))]
        Path::new("/")
    }
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Shield CPUs: move every task, IRQ and unbound workqueue off them.
    ///
    /// Running `on` again with another list changes the shield.
    On(OnArgs),
    /// Undo the shield exactly (also after an interrupted `on`).
    ///
    /// A damaged journal (a file truncated, garbled or missing): restores
    /// what its readable records hold, names what it could not read, and
    /// exits 5.
    Off(OffArgs),
    /// Bring the machine to the config file: shield it, change the shield
    /// in place, or repair what drifted. Idempotent: run twice, the second
    /// run changes nothing.
    Apply(ApplyArgs),
    /// Check that the machine matches the config file and that the shield
    /// holds; for monitoring. Read-only.
    ///
    /// Exit status: 0 matches and holds; 3 the shield is broken; 7 the
    /// machine differs from the config; 8 matches and holds, but the boot
    /// half takes effect (or goes) only at the next reboot; 2 the config
    /// is invalid.
    Verify(VerifyArgs),
    /// Write the shield's state as Prometheus metrics (node_exporter's
    /// textfile collector). Read-only, apart from the file written.
    Metrics(MetricsArgs),
    /// Show the shield, what is inside it, and anything that should not be
    /// on the shielded CPUs; check that it still holds. Read-only; the
    /// default command.
    ///
    /// Exit status: 0 no shield, or the shield holds; 3 a shield is active
    /// but broken (the reasons and their repair are printed); 1 an error.
    Status(JsonArg),
    /// Start a command inside the shield (exec, no shell in between).
    Run(RunArgs),
    /// Move running processes or threads into or out of the shield.
    Move(MoveArgs),
    /// Measure latency on CPUs (timer, rtc, noise, gtod, periodic, cache, pci probes).
    ///
    /// Changes nothing of the machine's: it pins only its own threads, but
    /// runs them at SCHED_FIFO 99 with memory locked on the measured CPUs
    /// (every online CPU but the first unless --cpus says otherwise), which
    /// puts them before other work there while it runs (the noise probe
    /// spins for the whole of each period by default): pick the CPUs.
    Measure(cpushield::measure::MeasureArgs),
    /// Document the tuning knobs that `on --tune` applies.
    Tune(TuneArgs),
    /// The experiment: latency idle, unshielded under load, with the load
    /// kept off the measured CPUs by plain affinity, and shielded under
    /// the same load; table, plots and an HTML report.
    ///
    /// The shielded phase applies a shield to the whole machine (root
    /// needed) and always undoes it, also on error or Ctrl-C.
    Compare(CompareArgs),
    /// Whether the shielded CPUs meet a latency budget under load: PASS,
    /// FAIL or INCONCLUSIVE per term, at a stated confidence.
    ///
    /// Measures as compare's shielded phase does, for the duration (its
    /// own shield, the load on the housekeeping CPUs, both undone at the
    /// end and on Ctrl-C; inside a shield already active, it measures in
    /// that one and leaves it standing), then judges each term on every
    /// CPU, counting the deadlines the probe skipped after a stall as late
    /// and a burst of late deadlines as one event: a max term fails on one
    /// late deadline and passes only where the extreme-value fit of the
    /// per-second maxima holds and gives a repeat of the run less than
    /// 1 − confidence to exceed (else INCONCLUSIVE); a percentile term
    /// passes when the exact binomial (Clopper-Pearson) upper bound on the
    /// probability of exceeding is within what it allows, fails when the
    /// lower bound is above it, and is inconclusive in between (with the
    /// samples that would decide). Writes certify.json, junit.xml and
    /// compare's files to --out; --from judges recorded data instead.
    Certify(CertifyArgs),
    /// Print the kernel command line that isolates CPUs from boot on (advice only).
    BootArgs(BootArgsArgs),
    /// The boot half: show whether the kernel command line cpushield wrote
    /// (config key `boot`, `apply`) is active, pending a reboot or absent;
    /// `--remove` takes it out and regenerates the bootloader's configuration.
    ///
    /// `off` never removes it; this does, or `apply` with a config without `boot`.
    Boot(BootArgs),
    /// Report what noise still reaches the shielded CPUs, and what to do
    /// about it; of the PCI bus, ASPM on links, device IRQs and NUMA
    /// nodes, and each conventional PCI bus's worst-case bound. Read-only.
    Audit(AuditArgs),
    /// The starvation guard: watch CPUs from the others and give a thread
    /// that has been runnable there without running for the threshold a
    /// short SCHED_DEADLINE slice (SCHED_FIFO where the kernel refuses
    /// that), then put its policy back. Runs until SIGTERM or Ctrl-C.
    ///
    /// `on` starts it with the shield where a real-time task that never
    /// sleeps can starve the shielded CPUs' kernel work (see `on --guard`),
    /// and `off` stops it; run it yourself only without a shield.
    Guard(GuardArgs),
    /// Repair the active shield in place: the change `on` with the
    /// shield's own request makes (what the kernel or another program
    /// undid of it). Nothing changes when it holds.
    ///
    /// The healer (which `on` starts unless `--heal off`) runs it when the kernel undoes part of
    /// the shield (a CPU online, a device added, a new IRQ or kernel
    /// thread).
    Repair(RepairArgs),
    /// The healer: while the shield lives, listen to the kernel's uevents
    /// and look for new IRQs and kernel threads, and repair as `repair` does when the
    /// kernel undid part of the shield. `on` starts it (unless `--heal off`) and `off`
    /// stops it; it ends by itself when the shield is gone.
    Heal,
    /// A containerd NRI plugin: a Guaranteed pod's exclusive CPUs get what
    /// CRI-O's annotations ask (`irq-load-balancing.crio.io: disable`,
    /// `cpu-c-states.crio.io`, `cpu-freq-governor.crio.io`) when its
    /// container starts, given back when it stops. Runs until SIGTERM.
    ///
    /// Every change is journaled first: after a crash the next start (the
    /// runtime's synchronisation) or `--undo` gives back what no running
    /// container asks (docs/kubernetes.md, "Per pod").
    Nri(NriArgs),
}

#[derive(Args, Debug)]
pub struct NriArgs {
    /// The runtime's NRI socket.
    #[arg(long, value_name = "PATH", default_value = "/var/run/nri/nri.sock")]
    pub socket: std::path::PathBuf,
    /// Give back everything the plugin's journal holds, and end.
    #[arg(long)]
    pub undo: bool,
}

#[derive(Args, Debug)]
pub struct RepairArgs {
    /// Why, in the log and the healer's counts (`cpu-online`, `new-irq`,
    /// ...).
    #[arg(long, value_name = "REASON", default_value = "by-hand")]
    pub reason: String,
    /// Print JSON for machines instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct GuardArgs {
    /// CPUs to watch (the shielded ones).
    #[arg(long, value_name = "CPULIST", value_parser = parse_cpus)]
    pub cpus: CpuSet,
    #[command(flatten)]
    pub settings: cpushield::guard::SettingsArgs,
}

#[derive(Args, Debug)]
pub struct TuneArgs {
    /// List the knobs: files, value set, why, risk.
    #[arg(long, required = true)]
    pub list: bool,
    /// Print JSON for machines instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BootArgs {
    /// Take the boot half out: every file it wrote goes back as it was (an
    /// addon is deleted), the bootloader's configuration is regenerated
    /// where it has one; effective at the next reboot.
    #[arg(long)]
    pub remove: bool,
    /// With --remove: show what would be done; change nothing.
    #[arg(long, requires = "remove")]
    pub dry_run: bool,
    /// Print JSON for machines instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BootArgsArgs {
    /// CPUs to isolate at boot.
    #[arg(value_name = "CPULIST", value_parser = parse_cpus)]
    pub cpus: CpuSet,
    /// Print JSON for machines instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct AuditArgs {
    /// CPUs to audit (default: the active shield's).
    #[arg(long, value_name = "CPULIST", value_parser = parse_cpus)]
    pub cpus: Option<CpuSet>,
    /// Seconds to count interrupts over (0: skip the deltas).
    #[arg(long, value_name = "S", default_value_t = 1.0)]
    pub window: f64,
    /// Exit 9 when a finding is this bad or worse (`bad`, or `warn` for
    /// warnings too), so that a CI job can gate on the audit; without it
    /// the audit exits 0 whatever it finds.
    #[arg(long, value_name = "SEVERITY", value_parser = ["bad", "warn"])]
    pub fail_on: Option<String>,
    /// Print JSON for machines instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// CPUs to measure and shield (cpulist or hex mask); at least one
    /// online CPU must stay outside.
    #[arg(long, value_name = "LIST", value_parser = parse_cpus)]
    pub cpus: Option<CpuSet>,
    /// Background load: cpu, io, vm, hdd, stream (memory bandwidth), full,
    /// mix (rteval's kind: full, stream, a scheduler storm and network
    /// loopback), hackbench (the storm and the loopback alone) or none.
    /// Default: full, and mix (streaming through memory among the rest)
    /// with --probe cache.
    #[arg(long, value_name = "SCENARIO")]
    pub load: Option<cpushield::load::Scenario>,
    /// Latency probe (pci is measure's alone: it needs a device).
    #[arg(long, default_value = "timer", value_parser = experiment_probe())]
    pub probe: cpushield::measure::ProbeKind,
    /// How long each phase measures: seconds, or with a unit (90s, 10m,
    /// 2h).
    #[arg(long, value_name = "DURATION", default_value = "60", value_parser = cpushield::input::positive_seconds)]
    pub duration: f64,
    /// Output directory (default: ./cpushield-compare-<unix time>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Over-threshold limits in µs (comma-separated) [default: 100,1000].
    #[arg(long, value_name = "US,...", value_delimiter = ',', hide_default_value = true,
          default_values_t = cpushield::compare::summary::DEFAULT_THRESHOLDS_US,
          value_parser = cpushield::input::positive_micros)]
    pub threshold: Vec<f64>,
    /// Phases to run, in order (comma-separated). Default: idle,
    /// unshielded, affinity, shielded, and cache-share with --cache-ways.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub phases: Option<Vec<cpushield::compare::Phase>>,
    /// A last phase (cache-share) after the default four: shielded again, the shield with WAYS ways of
    /// each L3 cache it sits in for itself (on --cache-ways; refused where
    /// the CPUs or the kernel cannot, before any phase runs).
    #[arg(long, value_name = "WAYS")]
    pub cache_ways: Option<u32>,
    /// Check the request and show the phases and the shield plan; run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print results.json to stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// In every phase, explain the samples slower than US µs (measure
    /// --explain): the causes per phase in the table, results.json and
    /// report.html, and for the shielded phase why each is left.
    #[arg(long, value_name = "US",
          value_parser = cpushield::input::explain_micros)]
    pub explain: Option<u64>,
    /// Cache probe: leave each working set idle this long between warming
    /// and timing it, as measure does (`10ms`, a bare number in ms).
    #[arg(long, value_name = "DURATION",
          value_parser = |s: &str| cpushield::input::duration_in(s, cpushield::input::TimeUnit::Millis))]
    pub cache_gap: Option<u64>,
    /// Cache probe: walk one working set of this size, as measure does
    /// (`512K`, `4M`).
    #[arg(long, value_name = "SIZE",
          value_parser = |s: &str| cpushield::measure::cache::parse_size(s)
              .filter(|b| (128..=cpushield::measure::cache::MAX_SET_BYTES).contains(b))
              .ok_or_else(|| format!("{s:?}: a size from 128 to 64M, such as 512K or 4M")))]
    pub working_set: Option<u64>,
}

/// The probes `compare` and `certify` take: every one but pci, which
/// needs a device to read (`measure --probe pci --device BDF`).
fn experiment_probe() -> impl clap::builder::TypedValueParser<Value = cpushield::measure::ProbeKind>
{
    use clap::builder::TypedValueParser;
    use clap::ValueEnum;
    let names: Vec<clap::builder::PossibleValue> = cpushield::measure::ProbeKind::value_variants()
        .iter()
        .filter(|p| **p != cpushield::measure::ProbeKind::Pci)
        .filter_map(|p| p.to_possible_value())
        .collect();
    clap::builder::PossibleValuesParser::new(names)
        .map(|s| cpushield::measure::ProbeKind::from_str(&s, true).expect("a name of its own"))
}

#[derive(Args, Debug)]
pub struct CertifyArgs {
    /// CPUs to shield and measure (cpulist or hex mask); at least one
    /// online CPU must stay outside.
    #[arg(long, value_name = "LIST", value_parser = parse_cpus)]
    pub cpus: Option<CpuSet>,
    /// The budget: terms like max<=100us, p99.99<=50us, p99.9999<=80us
    /// (units ns, us or µs, ms), separated by commas.
    #[arg(long, value_name = "TERMS")]
    pub budget: Option<String>,
    /// How long to measure: seconds, or with a unit (90s, 10m, 2h, 1d);
    /// at most a day [default: 10m].
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,
    /// Background load on the housekeeping CPUs: mix (rteval's kind: a CPU
    /// and I/O load, memory and cache streaming, a scheduler storm and
    /// network loopback), or cpu, io, vm, hdd, stream, full, hackbench
    /// (the storm and the loopback alone), none [default: mix].
    #[arg(long, value_name = "SCENARIO")]
    pub load: Option<cpushield::load::Scenario>,
    /// Latency probe (pci is measure's alone: it needs a device)
    /// [default: timer].
    #[arg(long, value_parser = experiment_probe())]
    pub probe: Option<cpushield::measure::ProbeKind>,
    /// Confidence of the verdict, in percent (50 to 99.9999) [default: 95].
    #[arg(long, value_name = "PCT")]
    pub confidence: Option<f64>,
    /// Output directory (default: ./cpushield-certify-<unix time>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Certify the shield a config file describes (its CPUs, IRQs, tuning,
    /// guard, ...; the boot half is left alone), its [certify] table giving
    /// what these flags do not.
    #[arg(long, value_name = "FILE", conflicts_with = "cpus")]
    pub config: Option<PathBuf>,
    /// Check the request and show the plan; run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print certify.json to stdout instead of the verdict table.
    #[arg(long)]
    pub json: bool,
    /// Explain the samples slower than US µs (measure --explain): the
    /// causes and the threads that ran, in results.json and report.html.
    #[arg(long, value_name = "US",
          value_parser = cpushield::input::explain_micros)]
    pub explain: Option<u64>,
    /// An earlier certify's output directory: each term on each CPU
    /// compared, and a regression fails the budget.
    #[arg(long, value_name = "DIR")]
    pub baseline: Option<PathBuf>,
    /// With a baseline: how much, in percent, a maximum may grow before
    /// it is said (one sample: said, never judged a regression; the
    /// regression is an exact test at a 1 % false-alarm rate) [default: 20].
    #[arg(long, value_name = "PCT")]
    pub regression: Option<f64>,
    /// Compute the verdict, certify.json, junit.xml and the page from
    /// recorded data instead of measuring: a results.json of compare or
    /// certify, a certify.json, measure --json's output, or a
    /// checkpoint-shielded.json (a crashed run's too). Changes nothing.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["config", "load", "probe", "duration", "explain", "dry_run"])]
    pub from: Option<PathBuf>,
    /// Run even where the duration cannot decide a term at the confidence
    /// asked (too few deadlines for a percentile, under a minute for max).
    #[arg(long)]
    pub force: bool,
    /// The probe's period, as the workload's (timer and periodic; a bare
    /// number is µs: 250, 500us, 2ms) [default: the probe's, 1 ms for
    /// timer].
    #[arg(long, value_name = "DURATION", value_parser = micros)]
    pub interval: Option<u64>,
    /// SCHED_FIFO priority of the measuring threads, as the workload's
    /// (1 to 99) [default: 99].
    #[arg(long, value_name = "P", value_parser = clap::value_parser!(i32).range(1..=99))]
    pub priority: Option<i32>,
    /// What a max term must show beyond the run: at most this probability
    /// of exceeding its bound over the mission (1e-9), or per activation
    /// (1e-12/activation); separate from --confidence. The verdict gives
    /// the latency at the target (the pWCET) with its bound [default: a
    /// repeat of the run exceeds with less than 1 − confidence].
    #[arg(long, value_name = "P[/activation]")]
    pub target: Option<String>,
    /// The mission time a --target is over: seconds, or 90s, 10m, 2h, 1d
    /// [default: 1h].
    #[arg(long, value_name = "DURATION", value_parser = cpushield::input::positive_seconds)]
    pub mission: Option<f64>,
    /// Hold /dev/cpu_dma_latency at US µs during the run, as cyclictest
    /// does (0 keeps the CPUs out of deep idle states); off by default.
    #[arg(long, value_name = "US")]
    pub dma_latency: Option<u32>,
}

#[derive(Args, Debug)]
pub struct OffArgs {
    /// Take away only this named set of the shield, with its CPUs (a
    /// change in place; the other sets stay as they are).
    #[arg(long, value_name = "NAME")]
    pub set: Option<String>,
    /// Show what would be undone; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print JSON for machines instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ApplyArgs {
    /// The config file [default: /etc/cpushield/cpushield.toml].
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Show what would change; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print JSON for machines instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// The config file [default: /etc/cpushield/cpushield.toml].
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print JSON for machines instead of text.
    #[arg(long, conflicts_with_all = ["nagios", "npd"])]
    pub json: bool,
    /// For Nagios, Icinga and other monitoring plugins: one line
    /// (`CPUSHIELD OK - ...`) and their exit codes: 0 OK (holds and matches
    /// the config), 1 WARNING (differs from the config, or a reboot is
    /// pending), 2 CRITICAL (broken), 3 UNKNOWN (the config or the machine
    /// could not be read).
    #[arg(long, conflicts_with = "npd")]
    pub nagios: bool,
    /// For Kubernetes' node-problem-detector (a custom plugin monitor,
    /// which makes a node condition of it): one line, the reason first,
    /// and its exit codes: 0 OK (holds and matches the config; a boot half
    /// waiting for a reboot is no problem), 1 a problem (broken, or
    /// differs from the config), 2 unknown (the config or the machine
    /// could not be read).
    #[arg(long)]
    pub npd: bool,
}

#[derive(Args, Debug)]
pub struct MetricsArgs {
    /// Write DIR/cpushield.prom atomically (node_exporter's textfile
    /// directory, on Debian /var/lib/prometheus/node-exporter) instead of
    /// printing.
    #[arg(long, value_name = "DIR")]
    pub textfile: Option<PathBuf>,
    /// Also export the latency figures of this `compare` results.json.
    #[arg(long, value_name = "FILE")]
    pub results: Option<PathBuf>,
    /// Also write DIR/cpushield atomically: node-feature-discovery's local
    /// feature file (DIR is /etc/kubernetes/node-feature-discovery/features.d
    /// on a Kubernetes node), the shield as node labels
    /// (feature.node.kubernetes.io/cpushield-shield, -holds, -advice,
    /// -shielded-cpus, -shielded-count, -boot-pending), expiring 10 minutes
    /// after it was written.
    #[arg(long, value_name = "DIR")]
    pub nfd: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct JsonArg {
    /// Print JSON for machines instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct OnArgs {
    /// CPUs to shield: a cpulist such as `2-3` or `1,3,5-7`, or a hex mask such as `0xc`.
    #[arg(value_name = "CPULIST", value_parser = parse_cpus)]
    pub cpus: CpuSet,
    /// Show what would change; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Also move tasks whose own affinity lies wholly inside the shield.
    #[arg(long)]
    pub force: bool,
    /// Allow shielding one hyper-thread sibling of a core but not the other.
    #[arg(long)]
    pub allow_split_siblings: bool,
    /// The components' options, each declared by its component.
    #[command(flatten)]
    pub options: cpushield::shield::Options,
    /// Print JSON for machines instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Pin the command to this shielded CPU (default: all shielded CPUs,
    /// or all of its set's).
    #[arg(long, value_name = "N")]
    pub cpu: Option<u32>,
    /// Run the command in this named set of the shield, as on --set
    /// NAME=CPUS made it; by default the set that holds the CPU given with
    /// --cpu.
    #[arg(long, value_name = "NAME")]
    pub set: Option<String>,
    /// Run with SCHED_FIFO at this priority (1-99).
    #[arg(long, value_name = "PRIO", conflicts_with = "rr", value_parser = clap::value_parser!(i32).range(1..=99))]
    pub fifo: Option<i32>,
    /// Run with SCHED_RR at this priority (1-99).
    #[arg(long, value_name = "PRIO", value_parser = clap::value_parser!(i32).range(1..=99))]
    pub rr: Option<i32>,
    /// Run as this user, with all privileges dropped, in a session of its
    /// own (a terminal of its own when run from one), with the
    /// environment reset as sudo does.
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
    /// With --user: keep root's whole environment, or only the variables
    /// named (`--preserve-env=A,B`) besides the terminal's and locale's.
    #[arg(long, value_name = "LIST", requires = "user", num_args = 0..=1, require_equals = true,
          default_missing_value = "", value_delimiter = ',')]
    pub preserve_env: Option<Vec<String>>,
    /// Show where and how the command would run; run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("direction").required(true).args(["into", "out"])))]
pub struct MoveArgs {
    /// Process ids (or thread ids with --thread).
    #[arg(required = true, value_name = "PID")]
    pub pids: Vec<i32>,
    /// Move into the shield.
    #[arg(long = "in")]
    pub into: bool,
    /// Move out to the housekeeping CPUs.
    #[arg(long)]
    pub out: bool,
    /// Pin to this CPU (of the shield with --in, of the housekeeping CPUs with --out).
    #[arg(long, value_name = "N")]
    pub cpu: Option<u32>,
    /// With --in: into this named set of the shield; by default the set
    /// that holds the CPU given with --cpu.
    #[arg(long, value_name = "NAME", conflicts_with = "out")]
    pub set: Option<String>,
    /// Move single threads rather than whole processes (cgroup v1 only).
    #[arg(long)]
    pub thread: bool,
    /// Show what would move; move nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print JSON for machines instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// A duration option kept in µs (a bare number is µs).
fn micros(s: &str) -> Result<u64, String> {
    cpushield::input::duration_in(s, cpushield::input::TimeUnit::Micros)
}

pub fn parse_cpus(s: &str) -> Result<CpuSet, String> {
    CpuSet::parse_user(s).map_err(|e| e.to_string())
}
