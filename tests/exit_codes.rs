//! Every documented exit code (README, `cpushield --help`) on fixture
//! roots, and every refusal the README lists: its code, a message that
//! names the input and what would be valid, each clause said once, and
//! nothing changed.

mod common;

use common::*;
use cpushield::sys::fixture::{CgroupLayout, FixtureBuilder, FixtureConfig, MARKER};
use std::path::Path;
use std::process::Output;

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// The clauses of an error message (split at ": " and "; ") that are
/// said more than once.
fn repeated_clauses(stderr: &str) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    stderr
        .trim()
        .trim_start_matches("cpushield: ")
        .split(": ")
        .flat_map(|p| p.split("; "))
        .map(str::trim)
        .filter(|c| c.len() >= 8)
        .filter(|c| !seen.insert(c.to_string()))
        .map(str::to_string)
        .collect()
}

/// Runs a refused command and checks the code, that the message contains
/// each of `says`, that no clause repeats, and that nothing changed.
fn refused(root: &Path, args: &[&str], want: i32, says: &[&str]) {
    let before = tree(root);
    let o = cpushield(root, args);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(code(&o), want, "{args:?}: {}", text(&o));
    for s in says {
        assert!(err.contains(s), "{args:?}: {s:?} not in {err:?}");
    }
    assert_eq!(
        repeated_clauses(&err),
        Vec::<String>::new(),
        "{args:?}: {err}"
    );
    let said: Vec<&str> = err
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("For more information, try '--help'"))
        .collect();
    assert_eq!(said.len(), 1, "one line (and clap's --help hint): {err}");
    assert_eq!(diff(&before, &tree(root)), Vec::<String>::new(), "{args:?}");
}

#[test]
fn every_refusal_the_readme_lists_has_its_code_names_the_input_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    standard(root, CgroupLayout::V2, FixtureConfig::default());
    refused(root, &["on", "2-x"], 2, &["2-x", "valid forms"]);
    refused(root, &["on", ""], 2, &["no CPU given"]);
    refused(
        root,
        &["on", "7"],
        2,
        &["CPU list 7", "do not exist", "present CPUs: 0-3"],
    );
    refused(
        root,
        &["on", "0-3"],
        2,
        &[
            "CPU list 0-3",
            "no housekeeping CPU",
            "keep at least one CPU unshielded",
        ],
    );
    refused(
        root,
        &["on", "2", "--irq", "nosuch"],
        2,
        &["--irq \"nosuch\"", "matches no IRQ number or name"],
    );
    refused(
        root,
        &["on", "2", "--tune=nosuchknob"],
        2,
        &["nosuchknob", "rt-throttling"],
    );
    refused(
        root,
        &["move", "1", "--in"],
        2,
        &["no shield is active", "cpushield on"],
    );
    refused(root, &["run", "--", "true"], 2, &["no shield is active"]);

    let sib = tempfile::tempdir().unwrap();
    FixtureBuilder::new(sib.path(), 4)
        .siblings("0,2")
        .siblings("1,3")
        .build()
        .unwrap();
    refused(
        sib.path(),
        &["on", "2"],
        2,
        &[
            "CPU list 2",
            "splits hyper-thread siblings",
            "0,2",
            "--allow-split-siblings",
        ],
    );

    let sys = cpushield::sys::Sys::at(root);
    let held = cpushield::shield::journal::lock(&sys).unwrap();
    refused(
        root,
        &["on", "2"],
        6,
        &["another cpushield is running", "wait for it"],
    );
    drop(held);
}

#[test]
fn not_root_exits_4_and_changes_nothing() {
    // A root that is not a fixture is a live system to cpushield, which
    // checks who runs it before it reads anything: an empty directory
    // stands in for it, so nothing of this machine is touched either way.
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_cpushield");
    let is_root = nix::unistd::geteuid().is_root();
    let o = if is_root {
        let setpriv = std::process::Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                bin,
                "--root",
            ])
            .arg(dir.path())
            .args(["on", "2"])
            .output();
        match setpriv {
            Ok(o) => o,
            Err(e) => {
                panic!("running as root, and setpriv (util-linux) to drop root is missing: {e}")
            }
        }
    } else {
        cpushield(dir.path(), &["on", "2"])
    };
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(code(&o), 4, "{}", text(&o));
    assert!(
        err.contains("must run as root") && err.contains("sudo cpushield on"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing written"
    );
}

#[test]
fn off_twice_the_second_says_nothing_to_undo_and_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    standard(dir.path(), CgroupLayout::V2, FixtureConfig::default());
    assert_eq!(code(&cpushield(dir.path(), &["on", "2-3"])), 0);
    assert_eq!(code(&cpushield(dir.path(), &["off"])), 0);
    let o = cpushield(dir.path(), &["off"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "no shield active: nothing to undo\n"
    );
    let j = cpushield(dir.path(), &["off", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&j.stdout).unwrap();
    assert_eq!(v["nothing_to_undo"], true);
}

#[test]
fn off_that_cannot_restore_everything_exits_5_and_keeps_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let sys = standard(dir.path(), CgroupLayout::V2, FixtureConfig::default());
    assert_eq!(code(&cpushield(dir.path(), &["on", "2-3"])), 0);
    // The kernel now refuses IRQ 25's old affinity.
    let marker = sys.path(MARKER);
    let mut config: FixtureConfig =
        serde_json::from_str(&std::fs::read_to_string(&marker).unwrap()).unwrap();
    config
        .refuse
        .insert("proc/irq/25/smp_affinity_list".into(), "EIO".into());
    std::fs::write(&marker, serde_json::to_string(&config).unwrap()).unwrap();
    let o = cpushield(dir.path(), &["off"]);
    assert_eq!(code(&o), 5, "{}", text(&o));
    assert!(
        text(&o).contains("/proc/irq/25/smp_affinity_list"),
        "{}",
        text(&o)
    );
    let st = cpushield(dir.path(), &["status", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    assert_eq!(v["shield"], "2-3", "the journal is kept for another off");
}

#[test]
fn run_passes_the_commands_exit_status_through_and_127_when_it_cannot_start() {
    let dir = tempfile::tempdir().unwrap();
    standard(dir.path(), CgroupLayout::V2, FixtureConfig::default());
    assert_eq!(code(&cpushield(dir.path(), &["on", "2-3"])), 0);
    let o = cpushield(dir.path(), &["run", "--", "sh", "-c", "exit 7"]);
    assert_eq!(code(&o), 7, "{}", text(&o));
    let o = cpushield(dir.path(), &["run", "--", "/nonexistent/program"]);
    assert_eq!(code(&o), 127, "{}", text(&o));
    assert!(
        text(&o).contains("cannot start \"/nonexistent/program\""),
        "{}",
        text(&o)
    );
    assert_eq!(code(&cpushield(dir.path(), &["off"])), 0);
}

#[test]
fn help_shows_the_exit_code_table() {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_cpushield"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&o.stdout);
    for line in [
        "Exit status:",
        "  2    bad input",
        "  3    status, verify:",
        "  4    not root",
        "  5    partly restored",
        "  6    another cpushield",
        "  7    verify:",
    ] {
        assert!(help.contains(line), "{line:?} not in --help:\n{help}");
    }
    for s in cpushield::exit::TABLE {
        assert!(
            help.contains(&format!("  {:<4} {}", s.code, s.meaning)),
            "exit {} not in --help:\n{help}",
            s.code
        );
    }
}

/// The README's table is the one src/exit.rs generates, between its
/// markers; `CPUSHIELD_BLESS=1` writes it there.
#[test]
fn readme_has_the_generated_exit_code_table() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
    let readme = std::fs::read_to_string(path).unwrap();
    let (start, end) = ("<!-- exit-codes:", "<!-- /exit-codes -->");
    let a = readme
        .find(start)
        .expect("README has the exit-code markers");
    let a = a + readme[a..].find('\n').unwrap() + 1;
    let b = readme.find(end).expect("README has the closing marker");
    let table = cpushield::exit::markdown();
    if std::env::var_os("CPUSHIELD_BLESS").is_some() {
        std::fs::write(path, format!("{}{table}{}", &readme[..a], &readme[b..])).unwrap();
        return;
    }
    assert_eq!(
        readme[a..b],
        table,
        "README's exit-code table differs from src/exit.rs: run CPUSHIELD_BLESS=1 cargo test --test exit_codes"
    );
}
