//! The `cpushield` command: arguments in, one library call per command, exit code out.

use clap::Parser;

/// Shield CPUs for real-time work, undo exactly, and measure the effect.
#[derive(Parser, Debug)]
#[command(name = "cpushield", version)]
struct Cli {}

fn main() {
    let _cli = Cli::parse();
}
