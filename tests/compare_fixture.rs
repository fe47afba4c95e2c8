//! `cpushield compare` against a fixture root: the shield changes only
//! fixture files; the measurement (SCHED_OTHER unless root) and the load
//! run on this machine's CPUs, unconfined. Each phase lasts 0.3 s.

#[path = "../tools/src/bin/check_compare_dir.rs"]
mod check_compare_dir;
mod common;

use common::*;
use cpushield::sys::fixture::{CgroupLayout, FixtureConfig};

fn results(dir: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("results.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// `cpushield compare` on CPU 1 for 0.3 s per phase, writing to `out`.
fn compare(
    root: &std::path::Path,
    load: &str,
    out: &std::path::Path,
    more: &[&str],
) -> std::process::Output {
    let mut args = vec![
        "compare",
        "--cpus",
        "1",
        "--load",
        load,
        "--duration",
        "0.3",
    ];
    args.extend_from_slice(more);
    args.extend(["--out", out.to_str().unwrap()]);
    cpushield(root, &args)
}

fn compare_restores_fixture(layout: CgroupLayout, load: &str) {
    let root = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let _sys = standard(root.path(), layout, FixtureConfig::default());
    let before = tree(root.path());
    let dir = out.path().join("report");
    let o = compare(root.path(), load, &dir, &["--threshold", "50,500"]);
    assert!(o.status.success(), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    for phase in ["idle", "unshielded", "affinity", "shielded"] {
        assert!(stdout.contains(phase), "{stdout}");
    }
    assert!(stdout.contains("affinity/shielded"), "{stdout}");
    assert!(stdout.contains("> 500 µs"), "{stdout}");

    let after = tree(root.path());
    assert_eq!(before, after, "{:?}", diff(&before, &after));

    for f in cpushield::report::compare::FILES {
        let p = dir.join(f);
        assert!(std::fs::metadata(&p).unwrap().len() > 0, "{f} empty");
    }
    let r = results(&dir);
    assert_eq!(r["schema_version"], 1);
    let phases: Vec<&str> = r["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(phases, ["idle", "unshielded", "affinity", "shielded"]);
    for p in r["phases"].as_array().unwrap() {
        assert!(p["stats"]["samples"].as_u64().unwrap() > 0, "{p}");
        assert!(p["curve"]["counts"].is_array());
        assert_eq!(p["per_cpu"][0]["cpu"], 1);
        assert!(p["measurement"]["results"][0]["cpus"].is_array());
    }
    // Plain affinity: no shield, the load (if any) on the housekeeping CPUs.
    let affinity = &r["phases"][2];
    assert!(affinity["shield"].is_null() && affinity["unshield"].is_null());
    assert!(!affinity["command"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a == "run"));
    if load != "none" {
        // The housekeeping CPUs (0,2-3 of the fixture) this test may use.
        let cpus = affinity["load"]["cpus"].as_str().unwrap();
        assert!(
            !cpus.is_empty() && !cpus.split(',').any(|c| c == "1"),
            "{}",
            affinity["load"]
        );
    }
    let shielded = &r["phases"][3];
    assert_eq!(shielded["shield"]["shield"], "1");
    assert!(shielded["unshield"].is_object());
    assert!(shielded["command"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a == "run"));
    assert_eq!(r["summary"]["rows"].as_array().unwrap().len(), 4);
    assert!(
        r["ratios"][0]["affinity_over_shielded"].is_object()
            || r["ratios"][0]["affinity_over_shielded"].is_string()
            || r["ratios"][0]["affinity_over_shielded"].is_number(),
        "{}",
        r["ratios"][0]
    );
    // What reached the measured CPU, per phase, in the JSON, the text and the page.
    for row in r["summary"]["rows"].as_array().unwrap() {
        let i = &row["interference"];
        for key in [
            "device_per_s",
            "timer_per_s",
            "ipi_per_s",
            "other_per_s",
            "softirq_per_s",
        ] {
            assert!(i[key].as_f64().is_some_and(|v| v >= 0.0), "{key}: {row}");
        }
        // The measurement reads this machine's threads: others run here.
        assert!(i["threads"].as_u64().is_some(), "threads: {row}");
        assert!(
            i["thread_runs_per_s"].as_f64().is_some_and(|v| v >= 0.0),
            "thread_runs_per_s: {row}"
        );
    }
    assert!(stdout.contains("on measured CPUs"), "{stdout}");
    assert_eq!(r["ratios"].as_array().unwrap().len(), 4);
    assert_eq!(r["housekeeping"], "0,2-3");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("<svg") && !html.contains("http://") && !html.contains("https://"));
    assert!(html.contains("What reached the measured CPUs"));
    let svg = std::fs::read_to_string(dir.join("histogram.svg")).unwrap();
    assert!(svg.contains("<svg"));
    let png = std::fs::read(dir.join("histogram.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    // No shield left behind: `off` finds nothing to undo.
    let o = cpushield(root.path(), &["off"]);
    assert!(o.status.success());
    assert!(text(&o).contains("nothing to undo"), "{}", text(&o));
    check_dir_accepts_then_rejects(&dir);
}

/// The report-directory check the guest scenarios run (the example
/// `check_compare_dir`, compiled here as a module): accepts the directory
/// just written and prints its phases and ratios; rejects it once a file
/// is damaged, a phase lost its samples, a load left a process, the
/// shielded phase lost its shield record, a phase is missing, or a
/// virtualised machine is not said to be one.
fn check_dir_accepts_then_rejects(dir: &std::path::Path) {
    let c = check_compare_dir::check_dir(dir);
    assert_eq!(c.problems, Vec::<String>::new());
    let kinds = |k: &str| c.lines.iter().filter(|l| l.starts_with(k)).count();
    assert_eq!(kinds("phase\t"), 4, "{:?}", c.lines);
    assert_eq!(kinds("ratio\t"), 4, "{:?}", c.lines);
    assert_eq!(kinds("machine\t"), 1, "{:?}", c.lines);
    assert_eq!(kinds("interference\t"), 4, "{:?}", c.lines);
    assert_eq!(kinds("threads\t"), 4, "{:?}", c.lines);
    assert!(c.lines.iter().any(|l| l.starts_with("ratio\tmax\t")));
    assert!(c.lines.iter().any(|l| l.starts_with("ratio\t> 500 µs\t")));

    let png = dir.join("histogram.png");
    let good = std::fs::read(&png).unwrap();
    std::fs::write(&png, b"GIF89a").unwrap();
    let problems = check_compare_dir::check_dir(dir).problems;
    assert!(
        problems.iter().any(|p| p.contains("histogram.png")),
        "{problems:?}"
    );
    std::fs::write(&png, good).unwrap();

    let json = dir.join("results.json");
    let good = results(dir);
    let problems_with = |patch: &dyn Fn(&mut serde_json::Value)| {
        let mut r = good.clone();
        patch(&mut r);
        std::fs::write(&json, serde_json::to_string(&r).unwrap()).unwrap();
        check_compare_dir::check_dir(dir).problems
    };
    let p = problems_with(&|r| r["phases"][1]["stats"]["samples"] = 0.into());
    assert!(
        p.contains(&"phase unshielded: no samples".to_string()),
        "{p:?}"
    );
    let p = problems_with(&|r| {
        r["phases"][1]["load"] = serde_json::json!({"scenario": "cpu"});
        r["phases"][1]["load_stop"] = serde_json::json!({"zombies_left": [42]});
    });
    assert_eq!(p, ["phase unshielded: load processes left: [Number(42)]"]);
    let p = problems_with(&|r| r["phases"][3]["unshield"] = serde_json::Value::Null);
    assert!(p.iter().any(|p| p.contains("applied and undone")), "{p:?}");
    let p = problems_with(&|r| {
        r["phases"].as_array_mut().unwrap().pop();
    });
    assert!(p.iter().any(|p| p.contains("asked for")), "{p:?}");
    let p = problems_with(&|r| {
        r["machine"]["virtualised"] = true.into();
        r["virtualised_note"] = serde_json::Value::Null;
    });
    assert!(p.iter().any(|p| p.contains("virtualised")), "{p:?}");
    std::fs::write(&json, "{").unwrap();
    let p = check_compare_dir::check_dir(dir).problems;
    assert!(p.iter().any(|p| p.starts_with("results.json")), "{p:?}");

    let empty = tempfile::tempdir().unwrap();
    let p = check_compare_dir::check_dir(empty.path()).problems;
    for f in cpushield::report::compare::FILES {
        assert!(p.iter().any(|p| p.starts_with(f)), "{f}: {p:?}");
    }
}

#[test]
fn compare_v2_no_load_restores_fixture() {
    compare_restores_fixture(CgroupLayout::V2, "none");
}

#[test]
fn compare_v1_cpu_load_restores_fixture() {
    compare_restores_fixture(CgroupLayout::V1, "cpu");
}

#[test]
fn compare_refuses_with_shield_active() {
    let root = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    standard(root.path(), CgroupLayout::V2, FixtureConfig::default());
    assert!(cpushield(root.path(), &["on", "2"]).status.success());
    let dir = out.path().join("r");
    let o = compare(root.path(), "none", &dir, &[]);
    assert!(!o.status.success());
    assert!(text(&o).contains("cpushield off"), "{}", text(&o));
    assert!(!dir.exists(), "nothing written on refusal");
    assert!(cpushield(root.path(), &["off"]).status.success());
}

#[test]
fn compare_refuses_no_housekeeping_cpu() {
    let root = tempfile::tempdir().unwrap();
    standard(root.path(), CgroupLayout::V2, FixtureConfig::default());
    let o = cpushield(root.path(), &["compare", "--cpus", "0-3", "--load", "none"]);
    assert_eq!(o.status.code(), Some(2), "bad input: {}", text(&o));
    assert!(text(&o).contains("no housekeeping CPU"), "{}", text(&o));
}

/// `compare --cache-ways 2`: a last phase, `cache-share`, shielded with the
/// shield's own L3 ways (the fixture's resctrl, CPU 1 alone on its L3),
/// the plain shielded phase without them, and the machine as before.
/// Without cache allocation it is refused before any phase runs.
#[test]
fn compare_cache_ways_adds_a_shielded_phase_with_the_share_or_refuses_up_front() {
    let root = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let config = FixtureConfig {
        resctrl: Some(cpushield::sys::fixture::ResctrlModel {
            l3_of_cpu: vec![0, 1, 0, 0],
            ..Default::default()
        }),
        ..Default::default()
    };
    standard(root.path(), CgroupLayout::V2, config);
    let before = tree(root.path());
    let dir = out.path().join("share");
    let o = compare(root.path(), "none", &dir, &["--cache-ways", "2"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("cache-share"));
    let r = results(&dir);
    let phases: Vec<&str> = (r["phases"].as_array().unwrap().iter())
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(
        phases,
        ["idle", "unshielded", "affinity", "shielded", "cache-share"]
    );
    let share = |p: &serde_json::Value| {
        (p["shield"]["parts"].as_array().into_iter().flatten())
            .find(|x| x["component"] == "resctrl")
            .map(|x| x["data"]["shield"].as_str().unwrap_or_default().to_string())
    };
    assert_eq!(
        share(&r["phases"][3]),
        None,
        "the shielded phase has no share"
    );
    assert_eq!(
        share(&r["phases"][4]).as_deref(),
        Some("L3:0=7ff;1=600; MB:0=100;1=100"),
        "{}",
        r["phases"][4]["shield"]
    );
    let after = tree(root.path());
    assert_eq!(before, after, "{:?}", diff(&before, &after));

    let plain = tempfile::tempdir().unwrap();
    standard(plain.path(), CgroupLayout::V2, FixtureConfig::default());
    let before = tree(plain.path());
    let dir = out.path().join("refused");
    let o = compare(plain.path(), "none", &dir, &["--cache-ways", "2"]);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(t.contains("cache-share") && t.contains("cat_l3"), "{t}");
    assert!(!dir.exists(), "nothing written on refusal");
    assert_eq!(before, tree(plain.path()));
    let o = compare(
        plain.path(),
        "none",
        &dir,
        &["--phases", "idle,cache-share"],
    );
    assert!(text(&o).contains("needs --cache-ways"), "{}", text(&o));
}
