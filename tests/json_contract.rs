//! The JSON convention of every command's `--json` (docs/operations.md,
//! "The JSON convention"): an error is an object on stdout as well as
//! stderr's line, a CPU set that is none is `null`, never `""`, and each
//! report leads with `schema_version`.

mod common;

use common::*;
use cpushield::sys::fixture::{CgroupLayout, FixtureConfig};

/// Each command line with `--json` that is refused, and its exit code.
const REFUSED: &[(&[&str], i32)] = &[
    (&["on", "9", "--dry-run", "--json"], 2),
    (&["on", "2-x", "--json"], 2),
    (&["status", "extra", "--json"], 2),
    (&["audit", "--cpus", "7", "--json"], 2),
    (&["verify", "--config", "/nonexistent.toml", "--json"], 2),
    (&["move", "abc", "--in", "--json"], 2),
    (&["boot-args", "9", "--json"], 2),
];

#[test]
fn an_error_under_json_is_an_object_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    standard(root, CgroupLayout::V2, FixtureConfig::default());
    for (args, code) in REFUSED {
        let o = cpushield(root, args);
        assert_eq!(o.status.code(), Some(*code), "{args:?}: {}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: stdout is not JSON ({e}): {}", text(&o)));
        assert_eq!(
            v["schema_version"],
            cpushield::report::JSON_SCHEMA_VERSION,
            "{args:?}: {v}"
        );
        assert_eq!(v["error"]["exit_code"], *code, "{args:?}: {v}");
        let said = String::from_utf8_lossy(&o.stderr);
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            said.trim_end() == format!("cpushield: {message}"),
            "{args:?}: stderr {said:?} and the object's message {message:?} differ"
        );
    }
    // Without --json stdout stays empty (a `--json` after `--` is the command's).
    let o = cpushield(root, &["on", "9", "--dry-run"]);
    assert!(o.stdout.is_empty(), "{}", text(&o));
}

/// Every string value in `v` under a key of `keys`, with its path.
fn empty_strings(v: &serde_json::Value, path: &str, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                if v.as_str() == Some("") {
                    out.push(format!("{path}.{k}"));
                }
                empty_strings(v, &format!("{path}.{k}"), out);
            }
        }
        serde_json::Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                empty_strings(v, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn a_cpu_set_that_is_none_is_null_and_no_report_has_an_empty_string() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    standard(root, CgroupLayout::V2, FixtureConfig::default());
    let commands: &[&[&str]] = &[
        &["status", "--json"],
        &["off", "--json"],
        &["on", "2-3", "--dry-run", "--json"],
        &["boot", "--json"],
        &["boot-args", "2-3", "--json"],
        &["audit", "--cpus", "2-3", "--window", "0", "--json"],
        &["tune", "--list", "--json"],
        &["move", "1", "--in", "--dry-run", "--json"],
        &["compare", "--cpus", "2-3", "--dry-run", "--json"],
        &[
            "certify",
            "--cpus",
            "2-3",
            "--budget",
            "max<=100us",
            "--dry-run",
            "--json",
        ],
    ];
    for args in commands {
        let o = cpushield(root, args);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", text(&o)));
        assert_eq!(
            v["schema_version"],
            cpushield::report::JSON_SCHEMA_VERSION,
            "{args:?}"
        );
        let mut empty = Vec::new();
        empty_strings(&v, "", &mut empty);
        assert!(
            empty.is_empty(),
            "{args:?}: empty strings at {empty:?}: {v:#}"
        );
    }
    let status = json(&cpushield(root, &["status", "--json"]));
    assert!(
        status["shield"].is_null() && status["boot_isolated"].is_null(),
        "{status}"
    );
    let off = json(&cpushield(root, &["off", "--json"]));
    assert!(off["shield"].is_null(), "{off}");
}

/// Every key is there: the reports of measure, compare, certify, the
/// loads, the boot half, audit and each component's part never leave a
/// key out when it is empty (`[]`, `null` instead). Only the journal's and
/// the config's own formats may, whose absent keys older releases wrote.
#[test]
fn no_report_leaves_a_key_out_when_it_is_empty() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for dir in [
        "compare", "certify", "measure", "load", "boot", "report", "audit",
    ] {
        files.extend(rust_sources(&src.join(dir)));
    }
    files.extend(
        rust_sources(&src.join("shield/components"))
            .into_iter()
            .filter(|f| f.file_name().is_some_and(|n| n == "report.rs")),
    );
    assert!(files.len() > 20, "{} files", files.len());
    let leaving: Vec<String> = files
        .iter()
        .filter(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .contains(concat!("skip_serializing", "_if"))
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(
        leaving.is_empty(),
        "reports that leave keys out: {leaving:?}"
    );
}
