//! The `cpushield` command: arguments in, one library call per command,
//! exit code out. Errors are printed once, with their chain.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use cpushield::cpulist::CpuSet;
use cpushield::shield::{self, plan::Request, Direction, RunPolicy};
use cpushield::sys::Sys;

mod output;
mod output_audit;

/// Exit codes, one meaning each (the README's table; `--help` shows it).
mod exit {
    /// Something failed that is not the request's fault (I/O, a damaged
    /// journal, a fatal change the kernel refused, rolled back).
    pub const ERROR: u8 = 1;
    /// Bad input or a request refused; nothing was changed (also clap's
    /// usage errors).
    pub const REFUSED: u8 = 2;
    /// `status`: a shield is active but no longer holds.
    pub const BROKEN: u8 = 3;
    /// Changing the system needs root; nothing was changed.
    pub const NOT_ROOT: u8 = 4;
    /// `off`, or the rollback of a failed `on`, could not restore everything.
    pub const PARTLY_RESTORED: u8 = 5;
    /// Another cpushield holds the lock; nothing was changed. Try again.
    pub const BUSY: u8 = 6;
    /// `verify`: the machine does not match the config (no shield, other
    /// CPUs, IRQs or knobs), though what is there holds.
    pub const DIFFERS: u8 = 7;
    /// `run`: the command could not be started (as a shell says it).
    pub const CANNOT_EXEC: u8 = 127;
}

/// The exit-code table, as `--help` prints it.
const EXIT_CODES: &str = "Exit status:
  0    success (status: no shield, or the shield holds; off: also nothing to undo)
  1    error (I/O, damaged journal, a fatal change refused and rolled back)
  2    bad input or refused request; nothing was changed
  3    status, verify: a shield is active but broken (what and how to repair are printed)
  4    not root; nothing was changed
  5    partly restored: off (or the rollback of on) could not restore everything
  6    another cpushield is running; nothing was changed
  7    verify: the machine does not match the config (the shield holds)
  run  the command's own exit status; 127 when it cannot be started";

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
#[command(name = "cpushield", version, verbatim_doc_comment, after_help = EXIT_CODES)]
struct Cli {
    /// Root of the kernel's file systems; a fixture directory in tests.
    #[arg(long, global = true, default_value = "/", hide = true)]
    root: PathBuf,

    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Shield CPUs: move every task, IRQ and unbound workqueue off them.
    ///
    /// Running `on` again with another list changes the shield.
    On(OnArgs),
    /// Undo the shield exactly (also after an interrupted `on`).
    Off(OffArgs),
    /// Bring the machine to the config file: shield it, change the shield
    /// in place, or repair what drifted. Idempotent: run twice, the second
    /// run changes nothing.
    Apply(ApplyArgs),
    /// Check that the machine matches the config file and that the shield
    /// holds; for monitoring. Read-only.
    ///
    /// Exit status: 0 matches and holds; 3 the shield is broken; 7 the
    /// machine differs from the config; 2 the config is invalid.
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
    /// Measure latency on CPUs (timer, rtc, noise, gtod, periodic probes).
    ///
    /// Pins and prioritises only its own threads: safe on any machine.
    Measure(cpushield::measure::MeasureArgs),
    /// Document the tuning knobs that `on --tune` applies.
    Tune(TuneArgs),
    /// The experiment: latency idle, unshielded under load, and shielded
    /// under the same load; table, plots and an HTML report.
    ///
    /// The shielded phase applies a shield to the whole machine (root
    /// needed) and always undoes it, also on error or Ctrl-C.
    Compare(CompareArgs),
    /// Print the kernel command line that isolates CPUs from boot on (advice only).
    BootArgs(BootArgsArgs),
    /// Report what noise still reaches the shielded CPUs, and what to do
    /// about it. Read-only.
    Audit(AuditArgs),
}

#[derive(Args, Debug)]
struct TuneArgs {
    /// List the knobs: files, value set, why, risk.
    #[arg(long, required = true)]
    list: bool,
    /// Print JSON for machines instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct BootArgsArgs {
    /// CPUs to isolate at boot.
    #[arg(value_name = "CPULIST", value_parser = parse_cpus)]
    cpus: CpuSet,
    /// Print JSON for machines instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct AuditArgs {
    /// CPUs to audit (default: the active shield's).
    #[arg(long, value_name = "CPULIST", value_parser = parse_cpus)]
    cpus: Option<CpuSet>,
    /// Seconds to count interrupts over (0: skip the deltas).
    #[arg(long, value_name = "S", default_value_t = 1.0)]
    window: f64,
    /// Print JSON for machines instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct CompareArgs {
    /// CPUs to measure and shield (cpulist or hex mask); at least one
    /// online CPU must stay outside.
    #[arg(long, value_name = "LIST", value_parser = parse_cpus, required_unless_present = "check")]
    cpus: Option<CpuSet>,
    /// Background load: cpu, io, vm, hdd, full or none.
    #[arg(long, value_name = "SCENARIO", default_value = "full")]
    load: cpushield::load::Scenario,
    /// Latency probe.
    #[arg(long, value_enum, default_value = "timer")]
    probe: cpushield::measure::ProbeKind,
    /// Seconds per phase.
    #[arg(long, value_name = "S", default_value_t = 60.0)]
    duration: f64,
    /// Output directory (default: ./cpushield-compare-<unix time>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Over-threshold limits in µs (comma-separated).
    #[arg(long, value_name = "US,...", value_delimiter = ',', default_values_t = cpushield::report::DEFAULT_THRESHOLDS_US)]
    threshold: Vec<f64>,
    /// Phases to run, in order (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = cpushield::compare::Phase::ALL)]
    phases: Vec<cpushield::compare::Phase>,
    /// Check the request and show the phases and the shield plan; run nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print results.json to stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// Check a report directory written earlier (files, headers,
    /// results.json, phases) and print its phases and ratios as
    /// tab-separated lines; exit 1 when it is not well-formed. For test
    /// scripts (the guest has no JSON tool).
    #[arg(long, value_name = "DIR", hide = true, conflicts_with_all = ["cpus", "dry_run", "json"])]
    check: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct OffArgs {
    /// Show what would be undone; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print JSON for machines instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct ApplyArgs {
    /// The config file [default: /etc/cpushield/cpushield.toml].
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Show what would change; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print JSON for machines instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct VerifyArgs {
    /// The config file [default: /etc/cpushield/cpushield.toml].
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Print JSON for machines instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct MetricsArgs {
    /// Write DIR/cpushield.prom atomically (node_exporter's textfile
    /// directory, on Debian /var/lib/prometheus/node-exporter) instead of
    /// printing.
    #[arg(long, value_name = "DIR")]
    textfile: Option<PathBuf>,
    /// Also export the latency figures of this `compare` results.json.
    #[arg(long, value_name = "FILE")]
    results: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct JsonArg {
    /// Print JSON for machines instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct OnArgs {
    /// CPUs to shield: a cpulist such as `2-3` or `1,3,5-7`, or a hex mask such as `0xc`.
    #[arg(value_name = "CPULIST", value_parser = parse_cpus)]
    cpus: CpuSet,
    /// IRQ to bind to the shield (number, or name as in /proc/interrupts); repeatable.
    #[arg(long = "irq", value_name = "IRQ")]
    irqs: Vec<String>,
    /// Show what would change; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Also move tasks whose own affinity lies wholly inside the shield.
    #[arg(long)]
    force: bool,
    /// Allow shielding one hyper-thread sibling of a core but not the other.
    #[arg(long)]
    allow_split_siblings: bool,
    /// Also apply tuning knobs, undone by `off`: `--tune` for all, or
    /// `--tune=KNOB,...` (see `cpushield tune --list`).
    #[arg(long, value_name = "KNOBS", num_args = 0..=1, require_equals = true,
          default_missing_value = "all", value_delimiter = ',')]
    tune: Option<Vec<String>>,
    /// Take each shielded CPU offline and online again before the cpusets
    /// are created, to push per-CPU timers off it (CPU hotplug; refused for
    /// CPUs that cannot go offline, such as CPU 0 on most x86 machines).
    #[arg(long)]
    hotplug_restart: bool,
    /// Print JSON for machines instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct RunArgs {
    /// Pin the command to this shielded CPU (default: all shielded CPUs).
    #[arg(long, value_name = "N")]
    cpu: Option<u32>,
    /// Run with SCHED_FIFO at this priority (1-99).
    #[arg(long, value_name = "PRIO", conflicts_with = "rr", value_parser = clap::value_parser!(i32).range(1..=99))]
    fifo: Option<i32>,
    /// Run with SCHED_RR at this priority (1-99).
    #[arg(long, value_name = "PRIO", value_parser = clap::value_parser!(i32).range(1..=99))]
    rr: Option<i32>,
    /// Run as this user, with all privileges dropped.
    #[arg(long, value_name = "USER")]
    user: Option<String>,
    /// Show where and how the command would run; run nothing.
    #[arg(long)]
    dry_run: bool,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

#[derive(Args, Debug)]
struct MoveArgs {
    /// Process ids (or thread ids with --thread).
    #[arg(required = true, value_name = "PID")]
    pids: Vec<i32>,
    /// Move into the shield.
    #[arg(long = "in", conflicts_with = "out", required_unless_present = "out")]
    into: bool,
    /// Move out to the housekeeping CPUs.
    #[arg(long)]
    out: bool,
    /// Pin to this CPU (of the shield with --in, of the housekeeping CPUs with --out).
    #[arg(long, value_name = "N")]
    cpu: Option<u32>,
    /// Move single threads rather than whole processes (cgroup v1 only).
    #[arg(long)]
    thread: bool,
    /// Show what would move; move nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print JSON for machines instead of a table.
    #[arg(long)]
    json: bool,
}

/// Hyper-thread sibling groups of the given CPUs, as the machine reports them.
fn shield_siblings(sys: &Sys, cpus: &CpuSet) -> Vec<CpuSet> {
    let mut groups: Vec<CpuSet> = Vec::new();
    for cpu in cpus.iter() {
        let g = cpushield::sys::procfs::thread_siblings(sys, cpu);
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    groups
}

fn parse_cpus(s: &str) -> Result<CpuSet, String> {
    CpuSet::parse_user(s).map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    // Hidden entry point: a worker process of the built-in background load
    // (`cpushield __load-worker KIND ...`, started by cpushield::load). Kept
    // out of clap on purpose: it is not a user command.
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(cpushield::load::WORKER_SUBCOMMAND) {
        std::process::exit(cpushield::load::worker_main(&args[2..]));
    }
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(err) => {
            if is_broken_pipe(&err) {
                return ExitCode::SUCCESS;
            }
            eprintln!("cpushield: {}", message(&err));
            ExitCode::from(exit_code(&err))
        }
    }
}

/// The error and its causes on one line, each said once: a cause whose
/// text its error already shows (many errors print their source) is left out.
fn message(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if text.is_empty() || out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// The exit code for an error (see [`exit`]).
fn exit_code(err: &anyhow::Error) -> u8 {
    use cpushield::shield::{journal::JournalError, ShieldError};
    for cause in err.chain() {
        if let Some(e) = cause.downcast_ref::<ShieldError>() {
            return match e {
                ShieldError::NotRoot(_) => exit::NOT_ROOT,
                ShieldError::Plan(_) | ShieldError::Invalid(_) | ShieldError::NoShield => {
                    exit::REFUSED
                }
                ShieldError::RolledBack { undone, .. } if !undone.failed.is_empty() => {
                    exit::PARTLY_RESTORED
                }
                ShieldError::Journal(JournalError::Locked(_)) => exit::BUSY,
                _ => exit::ERROR,
            };
        }
        if let Some(JournalError::Locked(_)) = cause.downcast_ref::<JournalError>() {
            return exit::BUSY;
        }
        if cause.downcast_ref::<Refusal>().is_some()
            || cause
                .downcast_ref::<cpushield::config::ConfigError>()
                .is_some()
        {
            return exit::REFUSED;
        }
        if cause.downcast_ref::<CannotExec>().is_some() {
            return exit::CANNOT_EXEC;
        }
    }
    exit::ERROR
}

/// A request refused before anything was changed, outside the library's
/// own errors (an argument checked here).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Refusal(String);

/// `run`: the command could not be started.
#[derive(Debug, thiserror::Error)]
#[error("cannot start {program:?}: {error}")]
struct CannotExec {
    program: String,
    error: std::io::Error,
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .map(std::io::Error::kind)
            .or_else(|| {
                c.downcast_ref::<serde_json::Error>()
                    .and_then(serde_json::Error::io_error_kind)
            })
            == Some(std::io::ErrorKind::BrokenPipe)
    })
}

/// Ctrl-C and SIGTERM set this flag; long operations check it and roll back.
fn stop_flag() -> Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&flag)).context("installing signal handler")?;
    }
    Ok(flag)
}

fn run(cli: Cli) -> Result<ExitCode> {
    let sys = Sys::at(&cli.root);
    let mut out = std::io::stdout().lock();
    match cli
        .command
        .unwrap_or(Command::Status(JsonArg { json: false }))
    {
        Command::Status(a) => {
            let report = shield::status(&sys)?;
            emit(&mut out, a.json, &report, output::status)?;
            if !report.holds {
                return Ok(ExitCode::from(exit::BROKEN));
            }
        }
        Command::On(a) => {
            let stop = stop_flag()?;
            let req = Request {
                cpus: a.cpus,
                irqs: a.irqs,
                force: a.force,
                allow_split_siblings: a.allow_split_siblings,
                tune: a.tune.unwrap_or_default(),
                hotplug_restart: a.hotplug_restart,
            };
            let report = shield::on(&sys, &req, a.dry_run, &stop)?;
            emit(&mut out, a.json, &report, output::on)?;
        }
        Command::Apply(a) => {
            let path = config_path(&sys, a.config);
            let req = cpushield::config::load(&path)?;
            let stop = stop_flag()?;
            let report = shield::on(&sys, &req, a.dry_run, &stop)?;
            if !a.dry_run {
                shield::journal::record_apply(&sys, unix_now())
                    .map_err(shield::ShieldError::from)?;
            }
            emit(&mut out, a.json, &report, output::on)?;
        }
        Command::Verify(a) => {
            let path = config_path(&sys, a.config);
            let req = cpushield::config::load(&path)?;
            let report = cpushield::fleet::verify(&sys, &req, &path.display().to_string())?;
            emit(&mut out, a.json, &report, output::verify)?;
            if !report.holds {
                return Ok(ExitCode::from(exit::BROKEN));
            }
            if !report.matches {
                return Ok(ExitCode::from(exit::DIFFERS));
            }
        }
        Command::Metrics(a) => {
            let text = cpushield::fleet::metrics(&sys, a.results.as_deref(), unix_now())?;
            match a.textfile {
                Some(dir) => {
                    cpushield::fleet::write_textfile(&dir, &text)?;
                }
                None => out.write_all(text.as_bytes())?,
            }
        }
        Command::Off(a) if a.dry_run => {
            let report = shield::off_plan(&sys)?;
            emit(&mut out, a.json, &report, output::off)?;
        }
        Command::Off(a) => {
            let report = shield::off(&sys)?;
            emit(&mut out, a.json, &report, output::off)?;
            if !report.undone.failed.is_empty() {
                return Ok(ExitCode::from(exit::PARTLY_RESTORED));
            }
        }
        Command::Move(a) => {
            let dir = if a.into {
                Direction::In
            } else {
                Direction::Out
            };
            let report = shield::move_tasks(&sys, &a.pids, dir, a.cpu, a.thread, a.dry_run)?;
            emit(&mut out, a.json, &report, output::moved)?;
            if !report.not_found.is_empty() {
                return Ok(ExitCode::from(exit::REFUSED));
            }
        }
        Command::Run(a) => return run_command(&sys, a),
        Command::Measure(a) => cpushield::measure::run(&a)?,
        Command::Compare(a) => return compare(&sys, a, &mut out),
        Command::Tune(a) => {
            let _ = a.list;
            emit(
                &mut out,
                a.json,
                &cpushield::tune::KNOBS,
                output_audit::knobs,
            )?;
        }
        Command::BootArgs(a) => {
            let online = cpushield::sys::procfs::online_cpus(&sys)?;
            let advice =
                cpushield::audit::boot_args(&a.cpus, &shield_siblings(&sys, &a.cpus), &online);
            emit(&mut out, a.json, &advice, output_audit::boot_args)?;
        }
        Command::Audit(a) => {
            if !(a.window >= 0.0 && a.window <= 3600.0) {
                return Err(Refusal(format!(
                    "--window {}: give seconds between 0 and 3600",
                    a.window
                ))
                .into());
            }
            let window = std::time::Duration::from_secs_f64(a.window);
            let report = cpushield::audit::audit(&sys, a.cpus.as_ref(), window)?;
            emit(&mut out, a.json, &report, output_audit::audit)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The config file: the one given, else the default under the root.
fn config_path(sys: &Sys, given: Option<PathBuf>) -> PathBuf {
    given.unwrap_or_else(|| sys.path(cpushield::config::DEFAULT_PATH))
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn emit<T: serde::Serialize>(
    out: &mut impl Write,
    json: bool,
    report: &T,
    human: fn(&T, &mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    if json {
        serde_json::to_writer_pretty(&mut *out, report)?;
        writeln!(out)?;
    } else {
        human(report, out)?;
    }
    Ok(())
}

fn run_command(sys: &Sys, a: RunArgs) -> Result<ExitCode> {
    let policy = match (a.fifo, a.rr) {
        (Some(p), _) => RunPolicy::Fifo(p),
        (_, Some(p)) => RunPolicy::RoundRobin(p),
        _ => RunPolicy::Inherit,
    };
    let user = match &a.user {
        Some(name) => Some(
            nix::unistd::User::from_name(name)
                .with_context(|| format!("looking up user {name:?}"))?
                .ok_or_else(|| {
                    Refusal(format!(
                        "--user {name:?}: no such user (give a name from /etc/passwd)"
                    ))
                })?,
        ),
        None => None,
    };
    let (program, args) = a.command.split_first().expect("clap requires a command");
    if a.dry_run {
        let (state, cpus) = shield::run_target(sys, a.cpu)?;
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "dry run: would run {:?} on CPUs {cpus} inside the shield ({}), scheduling {}{}; nothing started",
            a.command.join(" "),
            state.shield_dir,
            match policy {
                RunPolicy::Fifo(p) => format!("SCHED_FIFO {p}"),
                RunPolicy::RoundRobin(p) => format!("SCHED_RR {p}"),
                RunPolicy::Inherit => "inherited".into(),
            },
            user.as_ref().map(|u| format!(", as user {}", u.name)).unwrap_or_default(),
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    shield::enter_shield(sys, a.cpu, policy)?;
    let mut cmd = std::process::Command::new(program);
    cmd.args(args);
    if let Some(u) = user {
        // Supplementary groups first, then gid, then uid: after setuid we
        // could no longer change the others.
        let name = std::ffi::CString::new(u.name.clone())?;
        nix::unistd::initgroups(&name, u.gid).context("dropping supplementary groups")?;
        nix::unistd::setgid(u.gid).context("dropping group privileges")?;
        nix::unistd::setuid(u.uid).context("dropping user privileges")?;
        if nix::unistd::setuid(nix::unistd::Uid::from_raw(0)).is_ok() && !u.uid.is_root() {
            bail!("privileges could not be dropped for user {}", u.name);
        }
        cmd.env("USER", &u.name).env("HOME", &u.dir);
    }
    let error = cmd.exec();
    Err(CannotExec {
        program: program.clone(),
        error,
    }
    .into())
}

fn compare(sys: &Sys, a: CompareArgs, out: &mut impl Write) -> Result<ExitCode> {
    use cpushield::compare::{self, Options, Phase, Preconditions};
    use std::io::IsTerminal;
    if let Some(dir) = &a.check {
        let c = compare::check_dir(dir);
        for l in &c.lines {
            writeln!(out, "{l}")?;
        }
        for p in &c.problems {
            writeln!(out, "problem\t{p}")?;
        }
        if !c.problems.is_empty() {
            eprintln!(
                "cpushield compare --check {}: {} problem(s): {}",
                dir.display(),
                c.problems.len(),
                c.problems.join("; ")
            );
            return Ok(ExitCode::FAILURE);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let Some(cpus) = a.cpus else {
        return Err(Refusal(
            "compare: --cpus is required (the CPUs to measure and shield, e.g. --cpus 2-3)".into(),
        )
        .into());
    };
    let dir = a.out.unwrap_or_else(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        PathBuf::from(format!("cpushield-compare-{t}"))
    });
    let opts = Options {
        cpus,
        load: a.load,
        probe: a.probe,
        duration_s: a.duration,
        thresholds_us: a.threshold,
        phases: a.phases,
        out: dir.clone(),
    };
    let exe = std::env::current_exe().context("finding our own executable")?;
    if a.dry_run {
        let housekeeping = compare::check(&opts, &Preconditions::read(sys)?)?;
        writeln!(
            out,
            "compare (dry run): measure CPUs {}, housekeeping {}",
            opts.cpus, housekeeping
        )?;
        let root = sys.is_fixture().then(|| sys.root().to_path_buf());
        for &p in &opts.phases {
            let argv = compare::measure_command(&exe, root.as_deref(), p, &opts, true);
            let load = match p {
                Phase::Idle => "none".to_string(),
                _ if opts.load == cpushield::load::Scenario::None => "none".to_string(),
                Phase::Unshielded => format!("{} on all online CPUs", opts.load),
                Phase::Shielded => format!("{} on CPUs {housekeeping}", opts.load),
            };
            writeln!(out, "{}: load {load}; {}", p.name(), argv.join(" "))?;
        }
        if opts.phases.contains(&Phase::Shielded) {
            let req = Request {
                cpus: opts.cpus.clone(),
                ..Request::default()
            };
            let never = AtomicBool::new(false);
            let plan = shield::on(sys, &req, true, &never)?;
            writeln!(out, "shielded phase: shield plan")?;
            output::on(&plan, out)?;
        }
        writeln!(out, "output would go to {}", dir.display())?;
        return Ok(ExitCode::SUCCESS);
    }
    let stop = stop_flag()?;
    let tty = std::io::stderr().is_terminal();
    let mut progress = |line: &str| {
        if tty {
            eprintln!("cpushield compare: {line}");
        }
    };
    let mut ctx = compare::Context {
        sys,
        driver: cpushield::load::Driver::auto(exe.clone()),
        exe,
        stop: &stop,
        progress: &mut progress,
    };
    let results = compare::run(&mut ctx, &opts)?;
    compare::write_files(&results, &dir)?;
    if a.json {
        serde_json::to_writer_pretty(&mut *out, &results)?;
        writeln!(out)?;
    } else {
        out.write_all(compare::summary_text(&results).as_bytes())?;
        writeln!(out, "\nReport: {}", dir.join("report.html").display())?;
    }
    if results.interrupted {
        return Ok(ExitCode::from(130));
    }
    Ok(ExitCode::SUCCESS)
}
