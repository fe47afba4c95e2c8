//! The `cpushield` command: arguments in, one library call per command,
//! exit code out. Errors are printed once, with their chain.

#![deny(unsafe_code)]

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::Parser;
use cpushield::boot;
use cpushield::cpulist::CpuSet;
use cpushield::exit;
use cpushield::report;
use cpushield::shield::{self, request::Request, Direction, RunPolicy};
use cpushield::sys::Sys;

mod cli;

use cli::*;

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
        match cause.downcast_ref::<boot::BootError>() {
            Some(boot::BootError::Invalid(_) | boot::BootError::Unsupported { .. }) => {
                return exit::REFUSED
            }
            Some(boot::BootError::Journal(JournalError::Locked(_))) => return exit::BUSY,
            Some(boot::BootError::NotRoot(_)) => return exit::NOT_ROOT,
            _ => {}
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
        if let Some(cpushield::measure::MeasureError::Explain(e)) =
            cause.downcast_ref::<cpushield::measure::MeasureError>()
        {
            use cpushield::measure::explain::ExplainError;
            match e {
                ExplainError::InUse(_) => return exit::BUSY,
                ExplainError::NoTracefs | ExplainError::NotMounted => return exit::REFUSED,
                _ => {}
            }
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
    let sys = Sys::at(cli.root());
    let mut out = std::io::stdout().lock();
    match cli
        .command
        .unwrap_or(Command::Status(JsonArg { json: false }))
    {
        Command::On(a) => on_command(&sys, a, &mut out),
        Command::Off(a) => off_command(&sys, a, &mut out),
        Command::Apply(a) => apply_command(&sys, a, &mut out),
        Command::Verify(a) => verify_command(&sys, a, &mut out),
        Command::Metrics(a) => metrics_command(&sys, a, &mut out),
        Command::Status(a) => status_command(&sys, a, &mut out),
        Command::Move(a) => move_tasks_command(&sys, a, &mut out),
        Command::Measure(a) => measure_command(&sys, a, &mut out),
        Command::Tune(a) => tune_command(a, &mut out),
        Command::BootArgs(a) => boot_args_command(&sys, a, &mut out),
        Command::Boot(a) => boot_half_command(&sys, a, &mut out),
        Command::Audit(a) => audit_command(&sys, a, &mut out),
        Command::Run(a) => run_command(&sys, a),
        Command::Compare(a) => compare(&sys, a, &mut out),
    }
}

/// `on`: shields the CPUs asked for.
fn on_command(sys: &Sys, a: OnArgs, out: &mut impl Write) -> Result<ExitCode> {
    let stop = stop_flag()?;
    let req = Request {
        cpus: a.cpus,
        irqs: a.irqs,
        force: a.force,
        allow_split_siblings: a.allow_split_siblings,
        tune: a.tune.unwrap_or_default(),
        hotplug_restart: a.hotplug_restart,
        boot: None,
    };
    let report = shield::on(sys, &req, a.dry_run, &stop)?;
    emit(out, a.json, &report, report::shield::on)?;
    Ok(ExitCode::SUCCESS)
}

/// `off`: undoes the shield (`--dry-run`: what it would undo).
fn off_command(sys: &Sys, a: OffArgs, out: &mut impl Write) -> Result<ExitCode> {
    if a.dry_run {
        let report = shield::off_plan(sys)?;
        emit(out, a.json, &report, report::shield::off)?;
        return Ok(ExitCode::SUCCESS);
    }
    let report = shield::off(sys)?;
    emit(out, a.json, &report, report::shield::off)?;
    // `off` never takes the boot half out (cpushield.service runs
    // `off` at every shutdown); it says that it stays.
    if !a.json {
        if let Ok(Some(record)) = boot::read_record(sys) {
            report::boot::stays(&record, out)?;
        }
    }
    if !report.undone.failed.is_empty() {
        return Ok(ExitCode::from(exit::PARTLY_RESTORED));
    }
    Ok(ExitCode::SUCCESS)
}

/// `apply`: the config's shield, then its boot half (checked before anything changes).
fn apply_command(sys: &Sys, a: ApplyArgs, out: &mut impl Write) -> Result<ExitCode> {
    let path = config_path(sys, a.config);
    let req = cpushield::config::load(&path)?;
    // The boot half is checked before anything changes: a bootloader
    // cpushield cannot drive refuses the whole apply.
    let boot_want = match &req.boot {
        Some(extra) => {
            let want = boot::want_here(sys, &req.cpus, extra)?;
            boot::check(sys, &want)?;
            Some(want)
        }
        None => None,
    };
    let stop = stop_flag()?;
    let report = shield::on(sys, &req, a.dry_run, &stop)?;
    if !a.dry_run {
        shield::journal::record_apply(sys, unix_now()).map_err(shield::ShieldError::from)?;
    }
    let boot_change = boot::apply(sys, boot_want.as_ref(), a.dry_run)?;
    if a.json {
        // `on`'s report, and the boot half under "boot".
        let mut both = serde_json::to_value(&report)?;
        both["boot"] = serde_json::to_value(&boot_change)?;
        serde_json::to_writer_pretty(&mut *out, &both)?;
        writeln!(out)?;
    } else {
        report::shield::on(&report, out)?;
        report::boot::change(&boot_change, out)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `verify`: whether the machine matches the config and holds.
fn verify_command(sys: &Sys, a: VerifyArgs, out: &mut impl Write) -> Result<ExitCode> {
    let path = config_path(sys, a.config);
    let req = cpushield::config::load(&path)?;
    let report = cpushield::fleet::verify(sys, &req, &path.display().to_string())?;
    emit(out, a.json, &report, report::shield::verify)?;
    if !report.holds {
        return Ok(ExitCode::from(exit::BROKEN));
    }
    if !report.matches {
        return Ok(ExitCode::from(exit::DIFFERS));
    }
    if report.boot.as_ref().is_some_and(|b| b.reboot_pending) {
        return Ok(ExitCode::from(exit::REBOOT_PENDING));
    }
    Ok(ExitCode::SUCCESS)
}

/// `metrics`: the Prometheus text, printed or written for the textfile collector.
fn metrics_command(sys: &Sys, a: MetricsArgs, out: &mut impl Write) -> Result<ExitCode> {
    let text = cpushield::fleet::metrics(sys, a.results.as_deref(), unix_now())?;
    match a.textfile {
        Some(dir) => {
            cpushield::fleet::write_textfile(&dir, &text)?;
        }
        None => out.write_all(text.as_bytes())?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `status`: the shield and the boot half as the kernel has them.
fn status_command(sys: &Sys, a: JsonArg, out: &mut impl Write) -> Result<ExitCode> {
    let report = cpushield::fleet::status(sys)?;
    emit(out, a.json, &report, report::shield::status)?;
    if !report.shield.holds {
        return Ok(ExitCode::from(exit::BROKEN));
    }
    Ok(ExitCode::SUCCESS)
}

/// `move`: tasks into or out of the shield.
fn move_tasks_command(sys: &Sys, a: MoveArgs, out: &mut impl Write) -> Result<ExitCode> {
    let dir = if a.into {
        Direction::In
    } else {
        Direction::Out
    };
    let report = shield::move_tasks(sys, &a.pids, dir, a.cpu, a.thread, a.dry_run)?;
    emit(out, a.json, &report, report::shield::moved)?;
    if !report.not_found.is_empty() {
        return Ok(ExitCode::from(exit::REFUSED));
    }
    Ok(ExitCode::SUCCESS)
}

/// `measure` (or `measure --clean-up`).
fn measure_command(
    sys: &Sys,
    a: cpushield::measure::MeasureArgs,
    out: &mut impl Write,
) -> Result<ExitCode> {
    if a.clean_up {
        match cpushield::measure::explain::tracefs::clean_up(sys)? {
            Some(what) => writeln!(out, "{what}")?,
            None => writeln!(
                out,
                "no trace instance left by cpushield: nothing to remove"
            )?,
        }
        return Ok(ExitCode::SUCCESS);
    }
    let run = cpushield::measure::run(sys, &a)?;
    if let Some(path) = &a.histfile {
        report::measure::write_histfiles(&run, path)?;
    }
    let text = if a.json {
        report::measure::json(&run)
    } else {
        report::measure::human(&run)
    };
    // A closed pipe (`| head`) is not an error worth reporting.
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
    Ok(ExitCode::SUCCESS)
}

/// `tune --list`: the tuning knobs.
fn tune_command(a: TuneArgs, out: &mut impl Write) -> Result<ExitCode> {
    let _ = a.list;
    emit(
        out,
        a.json,
        &cpushield::shield::knobs::KNOBS,
        report::audit::knobs,
    )?;
    Ok(ExitCode::SUCCESS)
}

/// `boot-args`: the boot line for CPUs, and what the running kernel isolated.
fn boot_args_command(sys: &Sys, a: BootArgsArgs, out: &mut impl Write) -> Result<ExitCode> {
    let online = cpushield::sys::procfs::online_cpus(sys)?;
    let mut advice =
        cpushield::boot::args::boot_args(&a.cpus, &shield_siblings(sys, &a.cpus), &online);
    advice.now = boot::status(sys).ok();
    emit(out, a.json, &advice, report::audit::boot_args)?;
    Ok(ExitCode::SUCCESS)
}

/// `boot`: the boot half's state, or (`--remove`) taking it out.
fn boot_half_command(sys: &Sys, a: BootArgs, out: &mut impl Write) -> Result<ExitCode> {
    let change = if a.remove {
        Some(boot::remove(sys, a.dry_run)?)
    } else {
        None
    };
    match change {
        Some(c) if c.action == boot::BootAction::Nothing && !a.json => {
            writeln!(out, "no boot half written by cpushield: nothing to remove")?
        }
        Some(c) => emit(out, a.json, &c, report::boot::change)?,
        None => {
            let status = boot::status(sys)?;
            emit(out, a.json, &status, report::boot::status)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `audit`: read, judge, report.
fn audit_command(sys: &Sys, a: AuditArgs, out: &mut impl Write) -> Result<ExitCode> {
    if !(a.window >= 0.0 && a.window <= 3600.0) {
        return Err(Refusal(format!(
            "--window {}: give seconds between 0 and 3600",
            a.window
        ))
        .into());
    }
    let window = std::time::Duration::from_secs_f64(a.window);
    let report = cpushield::audit::audit(sys, a.cpus.as_ref(), window)?;
    emit(out, a.json, &report, report::audit::audit)?;
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
    use cpushield::compare::{self, Options};
    use std::io::IsTerminal;
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
        explain_us: a.explain,
    };
    let exe = std::env::current_exe().context("finding our own executable")?;
    if a.dry_run {
        let plan = compare::dry_run(sys, &exe, &opts)?;
        report::compare::dry_run(&plan, out)?;
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
    report::compare::write_files(&results, &dir)?;
    if a.json {
        serde_json::to_writer_pretty(&mut *out, &results)?;
        writeln!(out)?;
    } else {
        out.write_all(report::compare::summary_text(&results).as_bytes())?;
        writeln!(out, "\nReport: {}", dir.join("report.html").display())?;
    }
    if results.interrupted {
        return Ok(ExitCode::from(exit::INTERRUPTED));
    }
    Ok(ExitCode::SUCCESS)
}
