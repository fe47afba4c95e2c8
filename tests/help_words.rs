//! The words of the help texts and the documentation against what the
//! binary itself says elsewhere: each test derives what must be said from
//! the binary (its commands, its options' defaults, its exit codes), so a
//! new command, phase or exit code that the words leave behind fails here.

#[path = "common/help.rs"]
mod help_texts;

use help_texts::{help, options};
use std::collections::BTreeSet;

fn read(rel: &str) -> String {
    std::fs::read_to_string(format!("{}/{rel}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// `text` on one line, its runs of white space one space (a help text's
/// wrapping undone).
fn flat(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The commands `cpushield --help` lists.
fn commands() -> Vec<String> {
    help(&[])
        .split("Commands:")
        .nth(1)
        .expect("a command list")
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        // A command's line; its description's further lines are indented deeper.
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

#[test]
fn the_operations_guide_lists_every_command_that_has_a_dry_run() {
    let guide = read("docs/operations.md");
    let sentence = guide
        .split("`--dry-run` works on every command that changes the system:")
        .nth(1)
        .expect("docs/operations.md lists the commands with --dry-run")
        .split('.')
        .next()
        .unwrap();
    let listed: BTreeSet<&str> = sentence
        .split('`')
        .skip(1)
        .step_by(2)
        .filter_map(|c| c.split_whitespace().next())
        .collect();
    let with_dry_run: BTreeSet<String> = commands()
        .into_iter()
        .filter(|c| options(&help(&[c])).contains("--dry-run"))
        .collect();
    assert!(with_dry_run.len() >= 5, "{with_dry_run:?}");
    for c in &with_dry_run {
        assert!(
            listed.contains(c.as_str()),
            "{c} has --dry-run but docs/operations.md does not list it: {sentence}"
        );
    }
    for c in &listed {
        assert!(
            with_dry_run.contains(*c),
            "docs/operations.md lists {c}, whose --help has no --dry-run"
        );
    }
}

#[test]
fn a_comma_separated_options_default_is_shown_with_commas() {
    let mut seen = 0;
    for c in commands() {
        let text = help(&[&c]);
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let line = line.trim_start();
            if !(line.starts_with("--") && line.contains(",...>")) {
                continue;
            }
            // The option's description runs to the next option line.
            let described: String = lines[i..]
                .iter()
                .skip(1)
                .take_while(|l| !l.trim_start().starts_with('-'))
                .copied()
                .collect::<Vec<_>>()
                .join(" ");
            if let Some(default) = described.split("[default: ").nth(1) {
                let default = default.split(']').next().unwrap();
                seen += 1;
                assert!(
                    !default.contains(' '),
                    "{c} {line}: the default '{default}' is shown with spaces, the option takes commas"
                );
            }
        }
    }
    assert!(
        seen > 0,
        "no comma-separated option with a default was found"
    );
}

#[test]
fn the_readme_gives_every_exit_code_of_verify_its_help_gives() {
    let text = help(&["verify"]);
    let status = text
        .split("Exit status:")
        .nth(1)
        .expect("verify --help has its exit status")
        .split("\n\n")
        .next()
        .unwrap();
    let codes = |s: &str| -> BTreeSet<u32> {
        s.split(|c: char| !c.is_ascii_digit())
            .filter_map(|n| n.parse().ok())
            .collect()
    };
    // The codes are the numbers after the colon and each semicolon.
    let in_help: BTreeSet<u32> = status
        .split([':', ';'])
        .filter_map(|part| part.split_whitespace().next()?.parse().ok())
        .collect();
    assert!(in_help.len() >= 4, "{status}");
    let readme = read("README.md");
    let row = readme
        .lines()
        .find(|l| l.starts_with("| `cpushield verify"))
        .expect("a README row for verify");
    let said = row
        .split("(exit ")
        .nth(1)
        .expect("the row gives the exit codes")
        .split("; with")
        .next()
        .unwrap();
    assert_eq!(codes(said), in_help, "README: {said}; help: {status}");
}

#[test]
fn compares_cache_ways_phase_counts_the_default_phases_as_the_help_lists_them() {
    let text = help(&["compare"]);
    let flat = flat(&text);
    let phases = flat
        .split("--phases <PHASES>")
        .nth(1)
        .unwrap()
        .split("Default: ")
        .nth(1)
        .expect("--phases names its default")
        .split(", and ")
        .next()
        .unwrap();
    let count = phases.split(',').count();
    let words = ["one", "two", "three", "four", "five", "six", "seven"];
    let cache_ways = flat
        .split("--cache-ways <WAYS>")
        .nth(1)
        .expect("compare has --cache-ways");
    assert!(
        cache_ways.trim_start().starts_with(&format!(
            "A last phase (cache-share) after the default {}:",
            words[count - 1]
        )),
        "{count} default phases ({phases}); --cache-ways says: {}",
        &cache_ways[..80.min(cache_ways.len())]
    );
}

#[test]
fn certify_says_it_measures_inside_an_active_shield_as_it_does() {
    // What it does is held by certify_fixture's
    // certify_measures_inside_an_active_shield_and_leaves_it_standing.
    let flat = help(&["certify"])
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        flat.contains(
            "inside a shield already active, it measures in that one and leaves it standing"
        ),
        "{flat}"
    );
    assert!(!flat.contains("refused while a shield is active"), "{flat}");
}
