//! The `cpushield` command: arguments in, one library call per command,
//! exit code out. Errors are printed once, with their chain.

#![deny(unsafe_code)]

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Parser;
use cpushield::boot;
use cpushield::cpulist::CpuSet;
use cpushield::exit::{self, exit_if};
use cpushield::nri;
use cpushield::report;
use cpushield::shield::{self, request::Request};
use cpushield::sys::Sys;

mod checked;
mod cli;
mod experiments;
mod run_command;

use run_command::run_command;

use checked::{Checked, Plugin, Refusal};
use cli::Cli;
use experiments::{certify, compare};

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
    let json = wants_json(&args);
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return parse_error(bounded(e), json),
    };
    match run(cli) {
        Ok(code) => code,
        Err(err) => {
            if is_broken_pipe(&err) {
                return ExitCode::SUCCESS;
            }
            let said = message(&err);
            let code = exit_code(&err);
            let mut stderr = cpushield::escape::Terminal::new(std::io::stderr());
            let _ = writeln!(stderr, "cpushield: {said}");
            if json {
                print_json_error(&said, code);
            }
            ExitCode::from(code)
        }
    }
}

/// Whether the command line asks for `--json` (before a `--` that starts
/// a command of `run`'s).
fn wants_json(args: &[String]) -> bool {
    args.iter()
        .skip(1)
        .take_while(|a| *a != "--")
        .any(|a| a == "--json")
}

/// An error under `--json`, on stdout as well as stderr's line: a program
/// reading stdout gets an object, `{"schema_version": N, "error":
/// {"message": ..., "exit_code": N}}`, not nothing.
fn print_json_error(message: &str, exit_code: u8) {
    let error = serde_json::json!({
        "schema_version": report::JSON_SCHEMA_VERSION,
        "error": {"message": message, "exit_code": exit_code},
    });
    println!("{error:#}");
}

/// A command line clap refused, as every refusal is: one line,
/// `cpushield: ` and what is wrong, exit 2; `--help` and `--version` as
/// clap prints them.
fn parse_error(e: clap::Error, json: bool) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        e.exit()
    }
    let said = cpushield::input::clap_said(&e);
    let mut stderr = cpushield::escape::Terminal::new(std::io::stderr());
    let _ = writeln!(stderr, "cpushield: {said} (see --help)");
    if json {
        print_json_error(&format!("{said} (see --help)"), 2);
    }
    ExitCode::from(2)
}

/// `e` with every value it quotes from the command line cut to a short
/// prefix and its length ([`cpushield::input::brief`]): clap quotes an
/// invalid value whole, and a CPU list can be 100 kB.
fn bounded(mut e: clap::Error) -> clap::Error {
    use clap::error::ContextValue;
    use cpushield::input::{brief, QUOTED_BYTES};
    let long: Vec<_> = e
        .context()
        .filter_map(|(kind, value)| match value {
            ContextValue::String(s) if s.len() > QUOTED_BYTES => {
                Some((kind, ContextValue::String(brief(s))))
            }
            ContextValue::Strings(v) if v.iter().any(|s| s.len() > QUOTED_BYTES) => Some((
                kind,
                ContextValue::Strings(v.iter().map(|s| brief(s)).collect()),
            )),
            _ => None,
        })
        .collect();
    for (kind, value) in long {
        e.insert(kind, value);
    }
    e
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
        match cause.downcast_ref::<cpushield::measure::MeasureError>() {
            Some(cpushield::measure::MeasureError::Explain(e)) => {
                use cpushield::measure::explain::ExplainError;
                match e {
                    ExplainError::InUse(_) => return exit::BUSY,
                    ExplainError::NoTracefs | ExplainError::NotMounted => return exit::REFUSED,
                    _ => {}
                }
            }
            // Bad input: an option out of range, a CPU or PCI device not there.
            Some(
                cpushield::measure::MeasureError::InvalidOption { .. }
                | cpushield::measure::MeasureError::UnknownCpu { .. },
            ) => return exit::REFUSED,
            _ => {}
        }
        if let Some(cpushield::fleet::MetricsError::UnknownPhase { .. }) = cause.downcast_ref() {
            return exit::REFUSED;
        }
        // Bad input, as `on` and `measure` answer it: no target, or CPUs
        // that are not online.
        if let Some(
            cpushield::audit::AuditError::Offline { .. } | cpushield::audit::AuditError::NoTarget,
        ) = cause.downcast_ref()
        {
            return exit::REFUSED;
        }
        if cause.downcast_ref::<CannotExec>().is_some() {
            return exit::CANNOT_EXEC;
        }
        // compare and certify: a request this machine cannot serve, or a
        // shield already active; nothing started.
        if let Some(cpushield::compare::CompareError::Refused(_)) = cause.downcast_ref() {
            return exit::REFUSED;
        }
    }
    exit::ERROR
}

/// `run`: the command could not be started.
#[derive(Debug, thiserror::Error)]
#[error("cannot start {}: {error}", cpushield::input::quote(program))]
pub struct CannotExec {
    /// The program.
    pub program: String,
    /// Why the kernel refused it.
    pub error: std::io::Error,
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

/// Check, then act and report: the command line becomes a checked request
/// ([`checked::check`], reads only), then one library call per command.
fn run(cli: Cli) -> Result<ExitCode> {
    let sys = Sys::at(cli.root());
    let checked = checked::check(&sys, cli.command)?;
    // No control character of a name from outside reaches the terminal raw.
    let out = &mut cpushield::escape::Terminal::new(std::io::stdout().lock());
    match checked {
        Checked::On {
            request,
            dry_run,
            json,
        } => on_command(&sys, &request, dry_run, json, out),
        Checked::Off { set, dry_run, json } => {
            off_command(&sys, set.as_deref(), dry_run, json, out)
        }
        Checked::Apply {
            request,
            boot,
            dry_run,
            json,
        } => apply_command(&sys, &request, boot.as_ref(), dry_run, json, out),
        Checked::Verify {
            config,
            request,
            json,
            plugin,
        } => match plugin {
            Some(plugin) => Ok(plugin_verify(&sys, plugin, Ok((&config, &request)), out)?),
            None => verify_command(&sys, &config, &request, json, out),
        },
        Checked::PluginUnknown(plugin, why) => Ok(plugin_verify(&sys, plugin, Err(&why), out)?),
        Checked::Metrics(m) => metrics_command(&sys, &m, out),
        Checked::Status { json } => status_command(&sys, json, out),
        moving @ Checked::Move { .. } => move_command(&sys, moving, out),
        Checked::Measure {
            config,
            histfile,
            json,
        } => measure_command(&sys, &config, histfile.as_deref(), json, out),
        Checked::MeasureCleanUp => measure_clean_up(&sys, out),
        Checked::Tune { json } => {
            emit(out, json, &shield::TuneList::ALL, shield::TuneList::render)?;
            Ok(ExitCode::SUCCESS)
        }
        Checked::BootArgs { cpus, json } => boot_args_command(&sys, &cpus, json, out),
        Checked::Boot {
            remove,
            dry_run,
            json,
        } => boot_half_command(&sys, remove, dry_run, json, out),
        Checked::Audit {
            cpus,
            window,
            fail_on,
            json,
        } => audit_command(&sys, (cpus.as_ref(), window), fail_on, json, out),
        running @ Checked::Run { .. } => run_command(&sys, running, out),
        Checked::Compare {
            options,
            dry_run,
            json,
            new_out,
        } => compare(&sys, options, (dry_run, new_out), json, out),
        Checked::Certify {
            options,
            dry_run,
            json,
            new_out,
        } => certify(&sys, options, (dry_run, new_out), json, out),
        Checked::Guard { cpus, settings } => daemon(&sys, Some((&cpus, settings))),
        Checked::Repair { reason, json } => repair_command(&sys, &reason, json, out),
        Checked::Heal => daemon(&sys, None),
        Checked::Nri { socket, undo } => {
            Ok(nri::command(&sys, &socket, undo, &*stop_flag()?).map(|()| ExitCode::SUCCESS)?)
        }
    }
}

/// `move`: running tasks placed into or out of the shield.
fn move_command(sys: &Sys, moving: Checked, out: &mut impl Write) -> Result<ExitCode> {
    let Checked::Move {
        pids,
        direction,
        place,
        thread,
        dry_run,
        json,
    } = moving
    else {
        unreachable!("called for move only")
    };
    let to = (direction, &place, thread);
    let report = shield::move_tasks(sys, &pids, to, dry_run, &waiting_for_lock)?;
    emit(out, json, &report, report::shield::moved)?;
    Ok(exit_if(!report.not_found.is_empty(), exit::REFUSED))
}

/// Runs a daemon of cpushield's until SIGTERM or Ctrl-C: the guard of
/// `guard`'s CPUs with its settings, else the healer.
fn daemon(
    sys: &Sys,
    guard: Option<(&cpushield::CpuSet, cpushield::guard::Settings)>,
) -> Result<ExitCode> {
    let stop = stop_flag()?;
    match guard {
        Some((cpus, settings)) => cpushield::guard::run(sys, cpus, settings, &stop)?,
        None => {
            // The healer of the shield there is; none without one.
            let Some(state) = shield::journal::read_state(sys)? else {
                return Ok(ExitCode::SUCCESS);
            };
            let cpus = (&state.shield, &state.housekeeping);
            let lives = || shield::journal::Journal::exists(sys);
            let drift = || shield::heal_drift(sys);
            let repair = |t: &cpushield::heal::Trigger| run_repair(sys, t);
            cpushield::heal::run(sys, &stop, cpus, &lives, (&repair, &drift))?
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `audit`: the findings; exit 9 with `--fail-on` when one is that bad.
fn audit_command(
    sys: &Sys,
    (cpus, window): (Option<&cpushield::CpuSet>, std::time::Duration),
    fail_on: Option<cpushield::finding::Severity>,
    json: bool,
    out: &mut impl Write,
) -> Result<ExitCode> {
    let report = cpushield::audit::audit(sys, cpus, window)?;
    emit(out, json, &report, report::audit::audit)?;
    // Severity orders worst first: Bad < Warn < Ok.
    let failed = fail_on.is_some_and(|least| report.findings.iter().any(|f| f.severity <= least));
    Ok(exit_if(failed, exit::AUDIT_FAILED))
}

/// `on`: shields the CPUs asked for.
fn on_command(
    sys: &Sys,
    request: &Request,
    dry_run: bool,
    json: bool,
    out: &mut impl Write,
) -> Result<ExitCode> {
    let stop = stop_flag()?;
    let report = shield::on(sys, request, dry_run, &stop)?;
    emit(out, json, &report, report::shield::on)?;
    Ok(ExitCode::SUCCESS)
}

/// `repair`: the active shield brought back to its own request in place.
fn repair_command(sys: &Sys, reason: &str, json: bool, out: &mut impl Write) -> Result<ExitCode> {
    let stop = stop_flag()?;
    let Some(report) = shield::repair(sys, &stop)? else {
        anyhow::bail!(
            "no complete shield to repair (run 'cpushield status'; 'cpushield on' or 'apply' makes one)"
        );
    };
    if json {
        let mut v = serde_json::to_value(&report)?;
        v["reason"] = reason.into();
        v["schema_version"] = report::JSON_SCHEMA_VERSION.into();
        serde_json::to_writer_pretty(&mut *out, &v)?;
        writeln!(out)?;
    } else if report.changed == 0 {
        writeln!(
            out,
            "the shield on CPUs {} holds: nothing to repair ({reason})",
            report.shield
        )?;
    } else {
        writeln!(
            out,
            "repaired the shield on CPUs {} ({reason}): {} changes",
            report.shield, report.changed
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// One repair for the healer, in its own process (no program to start
/// under emulation, where that alone takes longer than the repair): the
/// change in place `repair` makes, its outcome on the healer's standard
/// error (the journal of its unit, on systemd hosts).
fn run_repair(sys: &Sys, trigger: &cpushield::heal::Trigger) -> cpushield::heal::RepairRun {
    let mut done = cpushield::heal::RepairRun::default();
    match shield::repair(sys, &AtomicBool::new(false)) {
        Ok(None) => {}
        Ok(Some(report)) => {
            eprintln!(
                "cpushield heal: {} ({}): repaired, {} changes in {:.0} ms",
                trigger.reason,
                cpushield::escape::terminal(&trigger.what),
                report.changed,
                report.took.total.as_secs_f64() * 1e3
            );
            done.ok = true;
            done.changed = report.changed;
            done.repair_ms = report.took.total.as_millis() as u64;
            if let Ok(serde_json::Value::Object(took)) = serde_json::to_value(&report.took) {
                done.phases = (took.into_iter())
                    .filter_map(|(k, v)| Some((k, v.as_f64()?)))
                    .filter(|(_, ms)| *ms > 0.0)
                    .collect();
            }
        }
        Err(e) => eprintln!(
            "cpushield heal: {} ({}): repair failed: {e}",
            trigger.reason,
            cpushield::escape::terminal(&trigger.what)
        ),
    }
    done
}

/// `off`: undoes the shield (`--dry-run`: what it would undo).
fn off_command(
    sys: &Sys,
    set: Option<&str>,
    dry_run: bool,
    json: bool,
    out: &mut impl Write,
) -> Result<ExitCode> {
    if let Some(set) = set {
        return off_set_command(sys, set, dry_run, json, out);
    }
    if dry_run {
        let report = shield::off_plan(sys)?;
        emit(out, json, &report, report::off::off)?;
        return Ok(ExitCode::SUCCESS);
    }
    let report = shield::off(sys)?;
    emit(out, json, &report, report::off::off)?;
    // `off` never takes the boot half out (cpushield.service runs
    // `off` at every shutdown); it says that it stays.
    if !json {
        if let Ok(Some(record)) = boot::read_record(sys) {
            report::boot::stays(&record, out)?;
        }
    }
    // A damaged journal: what its unreadable records changed is not undone.
    Ok(exit_if(
        !report.undone.failed.is_empty() || !report.unreadable.is_empty(),
        exit::PARTLY_RESTORED,
    ))
}

/// `off --set NAME`: the named set taken away with its CPUs, a change in
/// place of the active shield; the whole shield when it is the last set.
fn off_set_command(
    sys: &Sys,
    set: &str,
    dry_run: bool,
    json: bool,
    out: &mut impl Write,
) -> Result<ExitCode> {
    let state = shield::journal::read_state(sys)?
        .filter(|s| s.complete)
        .ok_or(shield::ShieldError::NoShield)?;
    let Some(request) = state.request.as_ref() else {
        anyhow::bail!("--set {set}: the active shield recorded no request (an older cpushield made it); 'cpushield off' takes it all away");
    };
    match shield::named_sets::without(request, set).map_err(Refusal)? {
        Some(rest) => on_command(sys, &rest, dry_run, json, out),
        None => off_command(sys, None, dry_run, json, out),
    }
}

/// `apply`: the config's shield, then its boot half (checked before
/// anything changed).
fn apply_command(
    sys: &Sys,
    request: &Request,
    boot_want: Option<&boot::BootWant>,
    dry_run: bool,
    json: bool,
    out: &mut impl Write,
) -> Result<ExitCode> {
    let stop = stop_flag()?;
    let report = shield::on(sys, request, dry_run, &stop)?;
    if !dry_run {
        shield::journal::record_apply(sys, unix_now()).map_err(shield::ShieldError::from)?;
    }
    let boot_change = boot::apply(sys, boot_want, dry_run)?;
    if json {
        // `on`'s report, and the boot half under "boot".
        let mut both = serde_json::to_value(&report)?;
        both["boot"] = serde_json::to_value(&boot_change)?;
        both["schema_version"] = report::JSON_SCHEMA_VERSION.into();
        serde_json::to_writer_pretty(&mut *out, &both)?;
        writeln!(out)?;
    } else {
        report::shield::on(&report, out)?;
        report::boot::change(&boot_change, out)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `verify`: whether the machine matches the config and holds.
fn verify_command(
    sys: &Sys,
    config: &Path,
    request: &Request,
    json: bool,
    out: &mut impl Write,
) -> Result<ExitCode> {
    let report = cpushield::fleet::verify(sys, request, &config.display().to_string())?;
    emit(out, json, &report, report::shield::verify)?;
    if !report.holds {
        return Ok(ExitCode::from(exit::BROKEN));
    }
    if !report.matches {
        return Ok(ExitCode::from(exit::DIFFERS));
    }
    Ok(exit_if(
        report.boot.as_ref().is_some_and(|b| b.reboot_pending),
        exit::REBOOT_PENDING,
    ))
}

/// `verify --nagios` or `--npd`: one line and the monitor's exit codes
/// ([`report::nagios`]); a machine that cannot be read is unknown, not an
/// error. A config that could not be read (`Err`, why) is unknown too.
fn plugin_verify(
    sys: &Sys,
    plugin: Plugin,
    config: Result<(&Path, &Request), &str>,
    out: &mut impl Write,
) -> std::io::Result<ExitCode> {
    use report::nagios;
    let unknown = |why: &str| match plugin {
        Plugin::Nagios => nagios::unknown(why),
        Plugin::Npd => nagios::npd_unknown(why),
    };
    let (code, line) = match config {
        Err(why) => unknown(why),
        Ok((config, request)) => {
            let config = config.display().to_string();
            match cpushield::fleet::verify(sys, request, &config) {
                Ok(report) if plugin == Plugin::Nagios => nagios::verdict(&report, &config),
                Ok(report) => nagios::npd(&report, &config),
                Err(e) => unknown(&e.to_string()),
            }
        }
    };
    writeln!(out, "{line}")?;
    Ok(ExitCode::from(code))
}

/// `metrics`: the Prometheus text, printed or written for the textfile collector.
fn metrics_command(sys: &Sys, m: &checked::MetricsOut, out: &mut impl Write) -> Result<ExitCode> {
    // Read once: the metrics and the feature file tell the same machine.
    let machine = cpushield::fleet::status(sys)?;
    let text = cpushield::fleet::metrics(sys, &machine, m.results.as_deref(), unix_now())?;
    match &m.textfile {
        Some(dir) => {
            cpushield::fleet::write_textfile(dir, &text)?;
        }
        None => out.write_all(text.as_bytes())?,
    }
    if let Some(dir) = &m.nfd {
        let features = report::nfd::features(&machine, std::time::SystemTime::now());
        cpushield::fleet::write_in(dir, report::nfd::FILE, &features)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `status`: the shield and the boot half as the kernel has them.
fn status_command(sys: &Sys, json: bool, out: &mut impl Write) -> Result<ExitCode> {
    let report = cpushield::fleet::status(sys)?;
    emit(out, json, &report, report::shield::status)?;
    Ok(exit_if(!report.shield.holds, exit::BROKEN))
}

/// `measure`, on a checked configuration.
fn measure_command(
    sys: &Sys,
    config: &cpushield::measure::Config,
    histfile: Option<&Path>,
    json: bool,
    out: &mut impl Write,
) -> Result<ExitCode> {
    let run = cpushield::measure::run(sys, config)?;
    if let Some(path) = histfile {
        report::measure::write_histfiles(&run, path)?;
    }
    let text = if json {
        report::measure::json(&run)
    } else {
        report::measure::human(&run)
    };
    // A closed pipe (`| head`) is not an error worth reporting.
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
    Ok(ExitCode::SUCCESS)
}

/// `measure --clean-up`: the trace instance a killed `--explain` left.
fn measure_clean_up(sys: &Sys, out: &mut impl Write) -> Result<ExitCode> {
    match cpushield::measure::explain::tracefs::clean_up(sys)? {
        Some(what) => writeln!(out, "{what}")?,
        None => writeln!(
            out,
            "no trace instance left by cpushield: nothing to remove"
        )?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `boot-args`: the boot line for CPUs, and what the running kernel isolated.
fn boot_args_command(
    sys: &Sys,
    cpus: &CpuSet,
    json: bool,
    out: &mut impl Write,
) -> Result<ExitCode> {
    let online = cpushield::sys::procfs::online_cpus(sys)?;
    let mut advice = cpushield::boot::args::boot_args(cpus, &shield_siblings(sys, cpus), &online);
    cpushield::boot::args::for_this_node(sys, &mut advice);
    advice.now = boot::status(sys).ok();
    emit(out, json, &advice, report::audit::boot_args)?;
    Ok(ExitCode::SUCCESS)
}

/// `boot`: the boot half's state, or (`remove`) taking it out.
fn boot_half_command(
    sys: &Sys,
    remove: bool,
    dry_run: bool,
    json: bool,
    out: &mut impl Write,
) -> Result<ExitCode> {
    if !remove {
        let status = boot::status(sys)?;
        emit(out, json, &status, report::boot::status)?;
        return Ok(ExitCode::SUCCESS);
    }
    let change = boot::remove(sys, dry_run)?;
    if change.action == boot::BootAction::Nothing && !json {
        writeln!(out, "no boot half written by cpushield: nothing to remove")?;
    } else {
        emit(out, json, &change, report::boot::change)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A report as `--json` prints it: its fields after `schema_version`.
#[derive(serde::Serialize)]
struct Versioned<'a, T: serde::Serialize> {
    /// The layout version of every report of this kind (see
    /// [`report::JSON_SCHEMA_VERSION`]).
    schema_version: u32,
    #[serde(flatten)]
    report: &'a T,
}

/// Prints `report` for people, or as JSON led by its `schema_version`.
/// `report` must serialise as a map (a struct).
fn emit<T: serde::Serialize>(
    out: &mut impl Write,
    json: bool,
    report: &T,
    human: fn(&T, &mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    if json {
        let versioned = Versioned {
            schema_version: report::JSON_SCHEMA_VERSION,
            report,
        };
        serde_json::to_writer_pretty(&mut *out, &versioned)?;
        writeln!(out)?;
    } else {
        human(report, out)?;
    }
    Ok(())
}

/// Said once when `run` or `move` waits for another cpushield command.
pub fn waiting_for_lock() {
    eprintln!(
        "cpushield: another cpushield command is changing the shield; waiting for it (up to {} s)",
        shield::journal::LOCK_WAIT.as_secs()
    );
}
