//! Expedited RCU on fixture roots: `on --rcu-normal` writes
//! `/sys/kernel/rcu_normal` 1, says so as a change to the whole machine,
//! `status` names it set back, `on` again repairs it, and `off` gives the
//! file back exactly; a kernel without the file is refused with nothing
//! changed.

mod common;

use std::fs;
use std::path::Path;

use common::{cpushield, diff, part, standard, text, tree};
use cpushield::sys::fixture::{CgroupLayout, FixtureConfig};

const FILE: &str = "sys/kernel/rcu_normal";

/// A v2 machine of CPUs 0-3 whose kernel has `rcu_normal` reading `value`
/// (none: no such file).
fn machine(value: Option<&str>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    standard(root, CgroupLayout::V2, FixtureConfig::default());
    if let Some(v) = value {
        fs::create_dir_all(root.join("sys/kernel")).unwrap();
        fs::write(root.join(FILE), format!("{v}\n")).unwrap();
    }
    dir
}

fn rcu_normal(root: &Path) -> String {
    fs::read_to_string(root.join(FILE))
        .unwrap()
        .trim()
        .to_string()
}

fn json(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(o)))
}

#[test]
fn on_makes_grace_periods_normal_status_sees_it_undone_and_off_gives_the_file_back() {
    let dir = machine(Some("0"));
    let root = dir.path();
    let before = tree(root);
    // the dry run says it, as a change to the whole machine, and changes nothing
    let o = cpushield(root, &["on", "2-3", "--rcu-normal", "--dry-run", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let plan = json(&o);
    let wide = plan["machine_wide"].as_array().unwrap();
    assert!(
        wide.iter()
            .any(|w| w["component"] == "rcu"
                && w["without"].as_str().unwrap().contains("--rcu-normal")),
        "{plan}"
    );
    assert!(diff(&before, &tree(root)).is_empty());
    let o = cpushield(root, &["on", "2-3", "--rcu-normal"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(rcu_normal(root), "1");
    let st = json(&cpushield(root, &["status", "--json"]));
    assert_eq!(st["holds"], true, "{st}");
    assert_eq!(part(&st, "rcu")["data"]["rcu_normal"], "1");
    // someone writes it back: status says the shield no longer holds
    fs::write(root.join(FILE), "0\n").unwrap();
    let o = cpushield(root, &["status", "--json"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let st = json(&o);
    let broken = st["broken"].as_array().unwrap();
    assert_eq!(broken.len(), 1, "{st}");
    assert_eq!(broken[0]["id"], "rcu");
    assert!(
        broken[0]["reason"].as_str().unwrap().contains("reads 0"),
        "{st}"
    );
    // on again repairs it in place
    let o = cpushield(root, &["on", "2-3", "--rcu-normal"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(rcu_normal(root), "1");
    assert_eq!(json(&cpushield(root, &["status", "--json"]))["holds"], true);
    let o = cpushield(root, &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    let d = diff(&before, &tree(root));
    assert!(d.is_empty(), "not given back: {d:#?}");
}

#[test]
fn a_shield_without_the_option_leaves_the_file_and_one_set_already_is_not_written() {
    for (value, flag) in [("0", false), ("1", true)] {
        let dir = machine(Some(value));
        let root = dir.path();
        let args: &[&str] = if flag {
            &["on", "2-3", "--rcu-normal"]
        } else {
            &["on", "2-3"]
        };
        let o = cpushield(root, args);
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(rcu_normal(root), value);
        let st = json(&cpushield(root, &["status", "--json"]));
        assert_eq!(st["holds"], true, "{st}");
        let has_part = (st["parts"].as_array().unwrap().iter()).any(|p| p["component"] == "rcu");
        assert_eq!(has_part, flag, "a part only when asked for: {st}");
        assert!(cpushield(root, &["off"]).status.success());
        assert_eq!(rcu_normal(root), value);
    }
}

#[test]
fn a_kernel_without_the_file_is_refused_with_nothing_changed() {
    let dir = machine(None);
    let root = dir.path();
    let before = tree(root);
    let o = cpushield(root, &["on", "2-3", "--rcu-normal"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--rcu-normal") && err.contains("/sys/kernel/rcu_normal"),
        "{err}"
    );
    assert!(diff(&before, &tree(root)).is_empty());
    assert!(!root.join("run/cpushield/journal").exists());
}
