//! Bad input, across the commands: each is refused in one line that starts
//! `cpushield:`, with exit code 2, and nothing on the machine changed.

mod common;

use common::{cpushield, diff, standard, tree};
use cpushield::sys::fixture::{CgroupLayout, FixtureConfig};

/// Each command line and a word its refusal must name.
const BAD: &[(&[&str], &str)] = &[
    (&["on"], "CPULIST"),
    (&["on", "9"], "9"),
    (&["on", "0-3"], "housekeeping"),
    (&["on", "2-x"], "2-x"),
    (&["on", "2-3", "--bogus"], "--bogus"),
    (&["on", "2-3", "--tune=nope"], "nope"),
    (&["on", "2-3", "--tune=vmstat,,governor"], "empty knob name"),
    (
        &["on", "2-3", "--tune=vmstat,vmstat"],
        "\"vmstat\" named twice",
    ),
    (&["on", "2-3", "--kthreads-above", "96"], "--kthreads-above"),
    (
        &["on", "2-3", "--kthreads-above", "abc"],
        "--kthreads-above",
    ),
    (&["on", "2-3", "--cache-ways", "0"], "--cache-ways"),
    (&["on", "2-3", "--others-bandwidth", "50"], "--cache-ways"),
    (&["on", "2-3", "--max-idle-latency", "fast"], "fast"),
    (&["on", "2-3", "--guard", "maybe"], "maybe"),
    (
        &["on", "2-3", "--guard-engine", "stalld"],
        "no stalld is installed",
    ),
    (
        &[
            "on",
            "2-3",
            "--guard-runtime",
            "2ms",
            "--guard-period",
            "1ms",
        ],
        "runtime",
    ),
    (&["on", "2-3", "--irq", "nosuchirq"], "nosuchirq"),
    (&["on", "0xzz"], "0xzz"),
    (
        &["move", "999999", "--dry-run"],
        "not provided: <--in|--out>",
    ),
    (&["move", "1", "--in", "--out"], "--out"),
    (&["move", "abc", "--in"], "abc"),
    (&["run", "--fifo", "100", "--", "true"], "100"),
    (&["run", "--preserve-env", "--", "true"], "--user"),
    (&["audit", "--cpus", "7"], "7"),
    (&["audit", "--window", "99999"], "--window"),
    (&["measure", "--cpus", "9"], "9"),
    (&["measure", "--explain", "0x"], "\"0x\": not a duration"),
    (
        &["compare", "--cpus", "1", "--threshold", "100,abc"],
        "\"abc\": not a number of µs",
    ),
    (&["compare", "--cpus", "9", "--dry-run"], "9"),
    (
        &[
            "certify",
            "--cpus",
            "1",
            "--budget",
            "max<=100us,",
            "--dry-run",
        ],
        "term 2 is empty",
    ),
    (&["status", "extra"], "extra"),
    (&["off", "--bogus"], "--bogus"),
    (&["tune", "--bogus"], "--bogus"),
    (
        &["guard", "--cpus", "2-3", "--guard-threshold", "1ms"],
        "threshold",
    ),
    (&["nosuchcommand"], "nosuchcommand"),
    (&["boot-args", "0-3"], "housekeeping"),
    (&["boot-args", "9"], "9"),
    (
        &["measure", "--cpus", "1", "--histfile", "/nonexistent/dir/h"],
        "/nonexistent/dir",
    ),
    (
        &["apply", "--config", "/nonexistent/cpushield.toml"],
        "/nonexistent/cpushield.toml",
    ),
    (
        &["verify", "--config", "/nonexistent/cpushield.toml"],
        "/nonexistent/cpushield.toml",
    ),
    (
        &["metrics", "--textfile", "/nonexistent/dir"],
        "/nonexistent/dir",
    ),
    (
        &["metrics", "--nfd", "/nonexistent/dir"],
        "/nonexistent/dir",
    ),
    (&["boot", "--bogus"], "--bogus"),
    (&["repair", "extra"], "extra"),
    (&["heal", "extra"], "extra"),
    (&["nri", "--socket"], "--socket"),
    (
        &[
            "compare",
            "--cpus",
            "1",
            "--out",
            "/nonexistent/dir/out",
            "--dry-run",
        ],
        "/nonexistent/dir",
    ),
    (
        &[
            "certify",
            "--cpus",
            "1",
            "--budget",
            "max<=100us",
            "--out",
            "/nonexistent/dir/out",
            "--dry-run",
        ],
        "/nonexistent/dir",
    ),
    (
        &[
            "certify",
            "--from",
            "/nonexistent/certify.json",
            "--budget",
            "max<=100us",
        ],
        "/nonexistent/certify.json",
    ),
];

#[test]
fn every_bad_input_is_one_line_exit_2_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    standard(dir.path(), CgroupLayout::V2, FixtureConfig::default());
    let before = tree(dir.path());
    assert!(BAD.len() >= 30, "{} inputs", BAD.len());
    let mut wrong = Vec::new();
    for (args, names) in BAD {
        let o = cpushield(dir.path(), args);
        let err = String::from_utf8_lossy(&o.stderr);
        let lines: Vec<&str> = err.lines().collect();
        let ok = o.status.code() == Some(2)
            && lines.len() == 1
            && lines[0].starts_with("cpushield: ")
            && lines[0].contains(names)
            && o.stdout.is_empty();
        if !ok {
            wrong.push(format!("{args:?} -> {:?}: {err}", o.status.code()));
        }
        let after = tree(dir.path());
        assert!(
            before == after,
            "{args:?} changed {:#?}",
            diff(&before, &after)
        );
    }
    assert!(wrong.is_empty(), "refused otherwise:\n{}", wrong.join("\n"));
}
