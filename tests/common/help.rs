//! The binary's help texts and the long options they list, for the tests
//! that hold the README and the man pages to them.

use std::collections::BTreeSet;
use std::process::Command;

/// `cpushield ARGS --help`.
pub fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_cpushield"))
        .args(args)
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?} --help");
    String::from_utf8(out.stdout).unwrap()
}

/// The long options of a help text, as listed at the start of its lines.
pub fn options(help: &str) -> BTreeSet<String> {
    help.lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with('-'))
        .flat_map(|l| {
            l.split([' ', ',', '=', '[', '<'])
                .take(3)
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .filter(|w| w != "--help" && w != "--version")
        .collect()
}
