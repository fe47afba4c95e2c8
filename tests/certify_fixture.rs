//! `cpushield certify` against a fixture root: the shield changes only
//! fixture files; the measurement runs on this machine's CPU 1 for 1 s
//! with no load. The verdict's exit codes, its files, and refusals.

mod common;

use common::*;
use cpushield::sys::fixture::{CgroupLayout, FixtureConfig};

fn certify(root: &std::path::Path, budget: &str, out: &std::path::Path) -> std::process::Output {
    cpushield(
        root,
        &[
            "certify",
            "--cpus",
            "1",
            "--budget",
            budget,
            "--duration",
            "1s",
            "--load",
            "none",
            "--json",
            "--out",
            out.to_str().unwrap(),
        ],
    )
}

#[test]
fn certify_gives_pass_fail_or_inconclusive_with_its_files_and_restores_the_fixture() {
    let root = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let _sys = standard(root.path(), CgroupLayout::V2, FixtureConfig::default());
    let before = tree(root.path());
    // (budget, exit code): a bound no timer wake-up reaches in 1 s; one
    // every sample exceeds; a tail 1000 samples cannot decide.
    for (i, (budget, code, outcome)) in [
        ("max<=10000ms,p50<=10000ms", 0, "PASS"),
        ("max<=1ns", 10, "FAIL"),
        ("p99.99999<=10000ms", 11, "INCONCLUSIVE"),
    ]
    .into_iter()
    .enumerate()
    {
        let dir = out.path().join(format!("run{i}"));
        let o = certify(root.path(), budget, &dir);
        assert_eq!(o.status.code(), Some(code), "{budget}: {}", text(&o));
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(r["outcome"], outcome, "{budget}");
        assert_eq!(r["schema_version"], 1);
        assert_eq!(r["verdict"]["terms"][0]["cpus"][0]["cpu"], 1);
        assert!(
            r["verdict"]["terms"][0]["cpus"][0]["samples"]
                .as_u64()
                .unwrap()
                > 100
        );
        for f in ["certify.json", "junit.xml", "report.html", "results.json"] {
            assert!(dir.join(f).metadata().unwrap().len() > 0, "{f}");
        }
        let junit = std::fs::read_to_string(dir.join("junit.xml")).unwrap();
        assert_eq!(junit.contains("<failure"), outcome == "FAIL", "{junit}");
        assert_eq!(
            junit.contains("<skipped"),
            outcome == "INCONCLUSIVE",
            "{junit}"
        );
        let after = tree(root.path());
        assert_eq!(before, after, "{:?}", diff(&before, &after));
    }
}

#[test]
fn certify_refuses_bad_input_by_name_and_changes_nothing() {
    let root = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let _sys = standard(root.path(), CgroupLayout::V2, FixtureConfig::default());
    let before = tree(root.path());
    for (args, says) in [
        (
            vec!["certify", "--cpus", "1", "--budget", "avg<=1us"],
            "--budget: budget term \"avg<=1us\"",
        ),
        (vec!["certify", "--cpus", "1"], "--budget is required"),
        (
            vec!["certify", "--budget", "max<=1us"],
            "--cpus is required",
        ),
        (
            vec![
                "certify",
                "--cpus",
                "1",
                "--budget",
                "max<=1us",
                "--duration",
                "5x",
            ],
            "--duration \"5x\"",
        ),
        (
            vec![
                "certify",
                "--cpus",
                "1",
                "--budget",
                "max<=1us",
                "--confidence",
                "100",
            ],
            "--confidence 100",
        ),
        (
            vec![
                "certify",
                "--cpus",
                "0-3",
                "--budget",
                "max<=1us",
                "--duration",
                "1",
            ],
            "housekeeping",
        ),
    ] {
        let mut args = args;
        let dir = out.path().join("never");
        args.extend(["--out", dir.to_str().unwrap()]);
        let o = cpushield(root.path(), &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(says), "{args:?}: {}", text(&o));
        assert!(!dir.exists(), "{args:?} wrote its directory");
    }
    assert_eq!(before, tree(root.path()));
}
