//! The `cpushield` command: arguments in, one library call per command, exit code out.

use clap::{Parser, Subcommand};

/// Shield CPUs for real-time work, undo exactly, and measure the effect.
#[derive(Parser, Debug)]
#[command(name = "cpushield", version)]
struct Cli {
    #[command(subcommand)]
    command: Option<Commands>,
}

#[derive(Subcommand, Debug)]
enum Commands {
    /// Measure latency on CPUs (timer, rtc, noise, gtod, periodic probes).
    Measure(cpushield::measure::MeasureArgs),
}

fn run(cli: Cli) -> anyhow::Result<()> {
    if let Some(Commands::Measure(args)) = cli.command {
        cpushield::measure::run(&args)?;
    }
    Ok(())
}

fn main() {
    if let Err(e) = run(Cli::parse()) {
        // The error chain once, on one line; no backtrace for user errors.
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
