//! `--balance` on fixture roots: `within` makes the shield a `root`
//! partition (cgroup v2) or a cpuset that balances within itself (v1), so a
//! multi-threaded real-time application balances among the shielded CPUs
//! (tuned's isolated_cores beside no_balance_cores); `off`, the default,
//! keeps the `isolated` partition. Changed in place both ways, refused over
//! CPUs isolated at boot, and `off` gives every file back.

mod common;

use std::fs;
use std::path::Path;

use common::{cpushield, diff, standard, text, tree};
use cpushield::sys::fixture::{CgroupLayout, FixtureConfig};

/// The file under `root` whose path ends with `suffix` and names the
/// shield's cgroup.
fn shield_file(root: &Path, suffix: &str) -> String {
    let found: Vec<String> = tree(root)
        .into_keys()
        .filter(|k| {
            k.ends_with(&format!("/cpushield/{suffix}"))
                || k.ends_with(&format!("/cpushield.slice/{suffix}"))
        })
        .collect();
    assert_eq!(found.len(), 1, "one {suffix} of the shield: {found:?}");
    fs::read_to_string(root.join(&found[0]))
        .unwrap()
        .trim()
        .to_string()
}

fn ok(root: &Path, args: &[&str]) -> String {
    let o = cpushield(root, args);
    assert!(o.status.success(), "{args:?}: {}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn within_is_a_root_partition_on_v2_changed_in_place_both_ways_and_undone() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    standard(root, CgroupLayout::V2, FixtureConfig::default());
    let before = tree(root);
    ok(root, &["on", "2-3", "--balance", "within"]);
    assert_eq!(shield_file(root, "cpuset.cpus.partition"), "root");
    let status = ok(root, &["status"]);
    assert!(
        status.contains("partition") && status.contains("root"),
        "{status}"
    );
    // in place: to off (isolated) and back, status holding each time
    ok(root, &["on", "2-3"]);
    assert_eq!(shield_file(root, "cpuset.cpus.partition"), "isolated");
    ok(root, &["status"]);
    ok(root, &["on", "2-3", "--balance", "within"]);
    assert_eq!(shield_file(root, "cpuset.cpus.partition"), "root");
    ok(root, &["status"]);
    ok(root, &["off"]);
    let d = diff(&before, &tree(root));
    assert!(d.is_empty(), "not restored: {d:#?}");
}

#[test]
fn within_balances_inside_the_v1_shield_cpuset_and_off_gives_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    standard(root, CgroupLayout::V1, FixtureConfig::default());
    let before = tree(root);
    ok(root, &["on", "2-3", "--balance", "within"]);
    assert_eq!(shield_file(root, "cpuset.sched_load_balance"), "1");
    ok(root, &["status"]);
    ok(root, &["on", "2-3"]);
    assert_eq!(shield_file(root, "cpuset.sched_load_balance"), "0");
    ok(root, &["status"]);
    ok(root, &["off"]);
    let d = diff(&before, &tree(root));
    assert!(d.is_empty(), "not restored: {d:#?}");
}

#[test]
fn within_over_cpus_isolated_at_boot_is_refused_and_nothing_changes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    standard(root, CgroupLayout::V2, FixtureConfig::default());
    fs::write(root.join("sys/devices/system/cpu/isolated"), "3\n").unwrap();
    let before = tree(root);
    let o = cpushield(root, &["on", "2-3", "--balance", "within"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--balance") && err.contains("isolated at boot"),
        "{err}"
    );
    assert!(diff(&before, &tree(root)).is_empty());
    // off (the default) is still allowed there
    ok(root, &["on", "2-3", "--dry-run"]);
}

#[test]
fn a_balance_that_is_not_off_or_within_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    standard(root, CgroupLayout::V2, FixtureConfig::default());
    let o = cpushield(root, &["on", "2-3", "--balance", "sometimes"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("sometimes") && err.contains("within"), "{err}");
}
