//! Generates the man pages and shell completions of the package from the
//! command-line definition (src/cli.rs), so they never disagree with
//! `--help`:
//!
//!   cargo run -p cpushield-tools --bin package-assets -- OUTDIR
//!
//! writes OUTDIR/man/cpushield.8 plus one page per command
//! (cpushield-apply.8, ...), and OUTDIR/completions/{cpushield.bash,
//! _cpushield, cpushield.fish}.

#[allow(dead_code)]
#[path = "../../../src/cli.rs"]
mod cli;

use std::path::{Path, PathBuf};

use clap::CommandFactory;
use clap_complete::Shell;

fn main() -> std::io::Result<()> {
    let Some(out) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: package-assets OUTDIR");
        std::process::exit(2);
    };
    let mut cmd = cli::Cli::command();
    cmd.build();
    let man = out.join("man");
    std::fs::create_dir_all(&man)?;
    render(&man, "cpushield", cmd.clone())?;
    for sub in cmd.get_subcommands() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        // clap names are &'static str; this program ends right after.
        let name: &'static str =
            Box::leak(format!("cpushield-{}", sub.get_name()).into_boxed_str());
        render(&man, name, sub.clone().name(name))?;
    }
    let completions = out.join("completions");
    std::fs::create_dir_all(&completions)?;
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        clap_complete::generate_to(shell, &mut cmd, "cpushield", &completions)?;
    }
    println!("{}", out.display());
    Ok(())
}

fn render(dir: &Path, name: &str, cmd: clap::Command) -> std::io::Result<()> {
    let mut page = Vec::new();
    // Section 8: cpushield is a system administration command in /usr/sbin.
    clap_mangen::Man::new(cmd).section("8").render(&mut page)?;
    std::fs::write(dir.join(format!("{name}.8")), page)
}
