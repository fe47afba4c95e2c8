//! The `cpushield` command: arguments in, one library call per command, exit code out.

use clap::Parser;

/// Shield CPUs for real-time work, undo exactly, and measure the effect.
#[derive(Parser, Debug)]
#[command(name = "cpushield", version)]
struct Cli {}

fn main() {
    // Hidden entry point: a worker process of the built-in background load
    // (`cpushield __load-worker KIND ...`, started by cpushield::load). Kept
    // out of clap on purpose: it is not a user command.
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(cpushield::load::WORKER_SUBCOMMAND) {
        std::process::exit(cpushield::load::worker_main(&args[2..]));
    }

    let _cli = Cli::parse();
}
