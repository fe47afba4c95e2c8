//! `run`: a command started inside the shield, in place of this process
//! (or, with `--user`, in a session of its own as that user).

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::ExitCode;

use anyhow::{Context, Result};
use cpushield::report;
use cpushield::shield::{self, RunPolicy};
use cpushield::sys::Sys;

use crate::checked::Checked;
use crate::{waiting_for_lock, CannotExec};

/// `run`: the command inside the shield, in place of this process.
pub fn run_command(sys: &Sys, running: Checked, out: &mut impl Write) -> Result<ExitCode> {
    let Checked::Run {
        place,
        policy,
        user,
        preserve,
        command,
        dry_run,
    } = running
    else {
        unreachable!("called for run only")
    };
    let (place, preserve, command) = (&place, &preserve, &command[..]);
    let (program, args) = command.split_first().expect("clap requires a command");
    if !matches!(policy, RunPolicy::Inherit) {
        if let Some(note) = shield::unprotected_kernel_work(sys) {
            eprintln!("cpushield: {}", report::note::text(&note));
        }
    }
    if dry_run {
        if let (RunPolicy::Fifo(p) | RunPolicy::RoundRobin(p), Ok((_, cpus))) =
            (policy, shield::run_target(sys, place))
        {
            for note in shield::realtime_below(sys, &cpus, p.unsigned_abs()) {
                eprintln!("cpushield: {}", report::note::text(&note));
            }
        }
        let (state, cpus) = shield::run_target(sys, place)?;
        writeln!(
            out,
            "dry run: would run {:?} on CPUs {cpus} inside the shield ({}), scheduling {}{}; nothing started",
            command.join(" "),
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
    if let Some(u) = user {
        // The command gets a session of its own: it forks, enters the
        // shield, drops to the user and execs; this process relays. What
        // can be checked first is, here, with its own exit code.
        shield::run_target(sys, place)?;
        let enter = || {
            let entered = shield::enter_shield(sys, place, policy, &waiting_for_lock)
                .map_err(|e| e.to_string())?;
            for note in &entered.notes {
                eprintln!("cpushield: {}", report::note::text(note));
            }
            Ok(())
        };
        let code = cpushield::run_user::run_as(&u, command, preserve, enter)
            .with_context(|| format!("running {program} as user {}", u.name))?;
        return Ok(ExitCode::from(code.clamp(0, 255) as u8));
    }
    let entered = shield::enter_shield(sys, place, policy, &waiting_for_lock)?;
    for note in &entered.notes {
        eprintln!("cpushield: {}", report::note::text(note));
    }
    let mut cmd = std::process::Command::new(program);
    cmd.args(args);
    let error = cmd.exec();
    Err(CannotExec {
        program: program.clone(),
        error,
    }
    .into())
}
