//! The README's command table against the binary's own help: every
//! command `cpushield --help` lists has a row and no row names a command
//! it does not; every option a row names is in that command's `--help`;
//! and a row that does not end its synopsis with `...` names every option
//! the help lists.

#[path = "common/help.rs"]
mod help_texts;

use help_texts::{help, options};
use std::collections::BTreeSet;

/// The README's rows: (command, synopsis).
fn rows() -> Vec<(String, String)> {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let table = readme
        .split("## Commands")
        .nth(1)
        .expect("a Commands section")
        .split("\n\n")
        .find(|block| block.trim_start().starts_with('|'))
        .expect("its table");
    table
        .lines()
        .filter_map(|l| l.strip_prefix("| `cpushield "))
        .map(|l| {
            let synopsis = l.split("` |").next().unwrap().to_string();
            let command = synopsis.split_whitespace().next().unwrap().to_string();
            (command, synopsis)
        })
        .collect()
}

#[test]
fn the_readmes_command_table_matches_the_help_texts() {
    let top = help(&[]);
    let commands: BTreeSet<String> = top
        .split("Commands:")
        .nth(1)
        .unwrap()
        .split("\n\n")
        .next()
        .unwrap()
        .lines()
        // A command's line starts two spaces in; its wrapped help, further.
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect();
    let rows = rows();
    let documented: BTreeSet<String> = rows.iter().map(|r| r.0.clone()).collect();
    assert_eq!(
        documented, commands,
        "README rows against `cpushield --help`"
    );
    let mut wrong = Vec::new();
    for (command, synopsis) in &rows {
        let listed = options(&help(&[command]));
        let named: BTreeSet<String> = synopsis
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .filter(|w| w.starts_with("--") && w.len() > 2)
            .map(str::to_string)
            .collect();
        for o in named.difference(&listed) {
            wrong.push(format!(
                "{command}: the README names {o}, which --help does not list"
            ));
        }
        if !synopsis.trim_end().ends_with("...") {
            for o in listed.difference(&named) {
                wrong.push(format!(
                    "{command}: --help lists {o}, the README row does not (or end it with ...)"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
