//! Named sets within the shield (`--set NAME=CPUS`, cset's sets), on
//! fixture roots: each set a cpuset of its own inside the shield's cgroup
//! (cgroup v2, v1, a systemd slice), `run` and `move` placing tasks in
//! one, `off --set` taking one away with its CPUs and leaving the other,
//! `off` giving back exactly what was before; bad sets refused with
//! nothing changed.

mod common;

use common::*;
use cpushield::sys::fixture::{self, CgroupLayout, FixtureConfig};
use cpushield::sys::Sys;
use cpushield::CpuSet;
use std::path::Path;

fn cpus(sys: &Sys, dir: &str) -> String {
    sys.read_trimmed(&format!("{dir}/cpuset.cpus"))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
}

fn ok(root: &Path, args: &[&str]) -> String {
    let o = cpushield(root, args);
    assert!(o.status.success(), "{args:?}: {}", text(&o));
    String::from_utf8(o.stdout).unwrap()
}

/// On a machine `sys` (shield cgroup `shield`, set `a`'s and `b`'s
/// directories by `dir_of`): two sets made, a task moved into each, one
/// set taken away with its CPUs, the other kept, and `off` exact.
fn two_sets_then_one_then_none(
    root: &Path,
    sys: &Sys,
    shield: &str,
    dir_of: &dyn Fn(&str) -> String,
) {
    let before = tree(root);
    let out = ok(
        root,
        &["on", "2-3", "--set", "a=2", "--set", "b=3", "--json"],
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["shield"], "2-3", "{out}");
    assert_eq!(cpus(sys, shield), "2-3");
    assert_eq!(cpus(sys, &dir_of("a")), "2");
    assert_eq!(cpus(sys, &dir_of("b")), "3");
    // The task pinned to CPU 3 is kept in the set that holds CPU 3.
    // Where the kernel says a process is: its cgroup v2 line.
    let in_set = |pid: i32, set: &str| {
        let line = sys.read(&format!("proc/{pid}/cgroup")).unwrap_or_default();
        let path = line.trim().rsplit(':').next().unwrap_or("").to_string();
        let dir = dir_of(set);
        let want = format!("/{}", dir.strip_prefix("sys/fs/cgroup/").unwrap_or(&dir));
        (path == want || path.starts_with(&format!("{want}/")), path)
    };
    let (inside, path) = in_set(100, "b");
    assert!(inside, "pid 100 in {path}");
    let o = cpushield(root, &["status"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let said = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(said.contains("a CPUs 2, b CPUs 3 (1 task)"), "{said}");
    // `move --in --set a`: into set a, on its CPU.
    fixture::add_process(sys, 300, &[task("rt-a", 0, "0-3")]).unwrap();
    ok(root, &["move", "300", "--in", "--set", "a"]);
    let (inside, path) = in_set(300, "a");
    assert!(inside, "pid 300 in {path}");
    assert_eq!(
        sys.read_trimmed("proc/300/task/300/.affinity")
            .ok()
            .as_deref()
            .unwrap_or("2"),
        "2"
    );
    // Without --set, --cpu picks the set that holds it.
    fixture::add_process(sys, 301, &[task("rt-b", 0, "0-3")]).unwrap();
    ok(root, &["move", "301", "--in", "--cpu", "3"]);
    let (inside, path) = in_set(301, "b");
    assert!(inside, "pid 301 in {path}");
    // Neither: refused, naming the sets.
    fixture::add_process(sys, 302, &[task("which", 0, "0-3")]).unwrap();
    let o = cpushield(root, &["move", "302", "--in"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("a=2, b=3"), "{}", text(&o));
    let o = cpushield(root, &["move", "302", "--in", "--set", "c"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("no set c (its sets: a=2, b=3)"),
        "{}",
        text(&o)
    );
    // `off --set a`: set a and CPU 2 leave; b stays as it was.
    let o = cpushield(root, &["off", "--set", "zz"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("no set zz (its sets: a, b)"),
        "{}",
        text(&o)
    );
    ok(root, &["off", "--set", "a"]);
    assert!(!sys.exists(&dir_of("a")), "set a's cgroup is gone");
    assert_eq!(cpus(sys, shield), "3");
    assert_eq!(cpus(sys, &dir_of("b")), "3");
    assert!(in_set(301, "b").0, "301 stays in b");
    // A set's CPUs changed behind the shield's back: status says so.
    let b = dir_of("b");
    let kept = sys.read(&format!("{b}/cpuset.cpus")).unwrap();
    std::fs::write(sys.path(&format!("{b}/cpuset.cpus")), "2-3\n").unwrap();
    let o = cpushield(root, &["status"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("the set b has CPUs 2-3"), "{}", text(&o));
    std::fs::write(sys.path(&format!("{b}/cpuset.cpus")), kept).unwrap();
    let st = ok(root, &["status", "--json"]);
    let st: serde_json::Value = serde_json::from_str(&st).unwrap();
    assert_eq!(st["shield"], "3", "{st}");
    assert_eq!(st["holds"], true, "{st}");
    // The rest goes with `off`: the machine as before.
    ok(root, &["off"]);
    let mut changed = diff(&before, &tree(root));
    // the tasks this test started are not the machine's
    changed.retain(|d| !d.contains("proc/30"));
    assert_eq!(changed, Vec::<String>::new());
}

#[test]
fn two_named_sets_on_cgroup_v2_each_its_own_cpuset_and_each_undone_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let sys = standard(dir.path(), CgroupLayout::V2, FixtureConfig::default());
    let shield = "sys/fs/cgroup/cpushield";
    two_sets_then_one_then_none(dir.path(), &sys, shield, &|s| format!("{shield}/{s}"));
}

#[test]
fn two_named_sets_under_systemd_are_slices_inside_the_shields() {
    let dir = tempfile::tempdir().unwrap();
    let sys = systemd_host(dir.path());
    let shield = "sys/fs/cgroup/cpushield.slice";
    two_sets_then_one_then_none(dir.path(), &sys, shield, &|s| {
        format!("{shield}/cpushield-{s}.slice")
    });
}

#[test]
fn two_named_sets_on_cgroup_v1_are_exclusive_cpusets_with_the_shields_balancing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let sys = standard(root, CgroupLayout::V1, FixtureConfig::default());
    let before = tree(root);
    ok(root, &["on", "2-3", "--set", "a=2", "--set", "b=3"]);
    let set = |s: &str, file: &str| {
        sys.read_trimmed(&format!("sys/fs/cgroup/cpuset/cpushield/{s}/cpuset.{file}"))
            .unwrap()
    };
    assert_eq!(
        (set("a", "cpus"), set("b", "cpus")),
        ("2".into(), "3".into())
    );
    assert_eq!(
        set("a", "cpu_exclusive"),
        "0",
        "the shield's own exclusivity must stay changeable"
    );
    assert_eq!(
        set("a", "sched_load_balance"),
        "0",
        "--balance off: none within a set"
    );
    assert_eq!(
        set("a", "mems"),
        sys.read_trimmed("sys/fs/cgroup/cpuset/cpuset.mems")
            .unwrap()
    );
    ok(root, &["off", "--set", "b"]);
    assert!(!sys.exists("sys/fs/cgroup/cpuset/cpushield/b"));
    assert_eq!(set("a", "cpus"), "2");
    ok(root, &["off"]);
    assert_eq!(diff(&before, &tree(root)), Vec::<String>::new());
}

#[test]
fn sets_that_do_not_split_the_shield_are_refused_and_nothing_changes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    standard(root, CgroupLayout::V2, FixtureConfig::default());
    let before = tree(root);
    for (args, said) in [
        (
            &["on", "2-3", "--set", "a=2"][..],
            "CPUs 3 of the shield are in no set",
        ),
        (
            &["on", "2-3", "--set", "a=2-3", "--set", "b=3"][..],
            "CPUs 3 are in two sets",
        ),
        (
            &["on", "2-3", "--set", "a=2", "--set", "a=3"][..],
            "the name a is given twice",
        ),
        (
            &["on", "2", "--set", "a=2-3"][..],
            "CPUs 3 are not shielded",
        ),
        (
            &["on", "2-3", "--set", "App=2-3"][..],
            "a set's name is 1-32 of a-z",
        ),
        (&["on", "2-3", "--set", "a:2-3"][..], "is not NAME=CPUS"),
        (&["run", "--set", "a", "--", "true"][..], "no shield"),
    ] {
        let o = cpushield(root, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        let t = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(t.contains(said), "{args:?}: {t}");
        assert!(
            t.trim().lines().count() == 1 && t.starts_with("cpushield:"),
            "{args:?}: one line: {t}"
        );
        assert_eq!(diff(&before, &tree(root)), Vec::<String>::new(), "{args:?}");
    }
}

#[test]
fn a_set_taken_away_while_its_tasks_run_and_its_cpus_stay_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let sys = standard(root, CgroupLayout::V2, FixtureConfig::default());
    ok(root, &["on", "2-3", "--set", "a=2-3"]);
    let shielded = tree(root);
    // the kept task (CPU 3) runs in set a; b would take its CPUs
    let o = cpushield(root, &["on", "2-3", "--set", "b=2-3"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("the set a would go while its CPUs 2-3 stay shielded"),
        "{}",
        text(&o)
    );
    assert_eq!(diff(&shielded, &tree(root)), Vec::<String>::new());
    // growing the shield with a new set: made beside the first
    ok(root, &["on", "1-3", "--set", "a=2-3", "--set", "b=1"]);
    assert_eq!(cpus(&sys, "sys/fs/cgroup/cpushield/b"), "1");
    assert_eq!(cpus(&sys, "sys/fs/cgroup/cpushield"), "1-3");
    // and `off --set a` of the last... but one: b stays on CPU 1
    ok(root, &["off", "--set", "a"]);
    assert_eq!(cpus(&sys, "sys/fs/cgroup/cpushield"), "1");
    assert_eq!(
        CpuSet::parse_list(&cpus(&sys, "sys/fs/cgroup/cpushield/b")).unwrap(),
        CpuSet::parse_list("1").unwrap()
    );
    // the last set taken away is the whole shield
    ok(root, &["off", "--set", "b"]);
    assert!(!sys.exists("sys/fs/cgroup/cpushield"));
}

/// The Debian 12 guest's sequence on cgroup v1, where a cpuset's CPUs
/// must lie within its parent's and hold its children's: a shield changed
/// in place into two sets, the sets resized, one taken away, then `off`
/// gives back everything with no error (the folded journal once undid a
/// set before its parent had its CPUs back: EACCES).
#[test]
fn v1_sets_changed_in_place_and_one_taken_away_then_off_is_exact() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let sys = standard(root, CgroupLayout::V1, FixtureConfig::default());
    let before = tree(root);
    ok(root, &["on", "2-3"]);
    ok(root, &["on", "1-3", "--set", "a=1", "--set", "b=2-3"]);
    ok(root, &["on", "1-3", "--set", "a=1-2", "--set", "b=3"]);
    ok(root, &["off", "--set", "a"]);
    assert_eq!(cpus(&sys, "sys/fs/cgroup/cpuset/cpushield"), "3");
    let o = cpushield(root, &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(diff(&before, &tree(root)), Vec::<String>::new());
}
