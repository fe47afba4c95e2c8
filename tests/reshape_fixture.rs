//! Changing an active shield in place (`on` over a shield, `apply` with
//! another config), on fixture roots: the shield cgroup is resized, never
//! taken down; tasks inside that stay valid stay; a second identical
//! request changes nothing; `off` still gives back the machine as it was
//! before the first `on`, also after a change killed at any write.

mod common;

use common::*;
use cpushield::shield::snapshot::in_shield_cgroup;
use cpushield::sys::fixture::{CgroupLayout, FixtureConfig};
use cpushield::sys::Sys;
use cpushield::CpuSet;
use std::path::Path;

fn cpus(s: &str) -> CpuSet {
    CpuSet::parse_list(s).unwrap()
}

fn json(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(o)))
}

fn on(root: &Path, list: &str) -> serde_json::Value {
    let o = cpushield(root, &["on", list, "--json"]);
    assert!(o.status.success(), "on {list}: {}", text(&o));
    json(&o)
}

fn thread(sys: &Sys, name: &str) -> cpushield::sys::procfs::Thread {
    full_snapshot(sys)
        .threads
        .into_iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no thread {name}"))
}

/// The kinds of change a plan makes, to show what an in-place change does
/// not do (take the shield down, make it anew).
fn kinds(plan: &serde_json::Value) -> Vec<String> {
    plan.as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let mut k = s["action"].as_str().unwrap().to_string();
            if let Some(call) = s["call"]["call"].as_str() {
                k = format!("{k}:{call}");
            }
            if let Some(path) = s["path"].as_str() {
                if path.contains("cgroup") {
                    k = format!("{k}:{path}={}", s["value"].as_str().unwrap_or(""));
                }
            }
            k
        })
        .collect()
}

/// on 2-3, then 3 (a CPU leaves), the same again (nothing to do), then
/// 1-2 (the task kept on CPU 3 must leave), then off.
fn change_in_place(sys: &Sys, root: &Path, shield_dir: &str, v1: bool) {
    let before = tree(root);
    on(root, "2-3");
    let pinned = thread(sys, "pinned-inside");
    assert!(in_shield_cgroup(&pinned.cgroup), "{}", pinned.cgroup);

    // The plan of a change resizes the shield cgroup in place.
    let o = cpushield(root, &["on", "3", "--dry-run", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let dry = json(&o);
    let k = kinds(&dry["plan"]);
    assert!(
        !k.iter().any(|k| k.starts_with("mkdir")
            || k.contains(":stop")
            || k.contains("start_slice")
            || k.ends_with("=member")),
        "a change must not take the shield down or make it anew: {k:#?}"
    );
    assert_eq!(dry["changed_from"], "2-3", "{dry}");

    let r = on(root, "3");
    assert_eq!(r["changed_from"], "2-3");
    assert_eq!(
        sys.read_cpulist(&format!("{shield_dir}/cpuset.cpus"))
            .unwrap(),
        cpus("3")
    );
    // IRQ 24 was on CPU 2 before the shield: CPU 2 is housekeeping again.
    assert_eq!(
        sys.read_cpulist("proc/irq/24/smp_affinity_list").unwrap(),
        cpus("2")
    );
    let still = thread(sys, "pinned-inside");
    assert_eq!(
        (still.cgroup.clone(), still.cpus_allowed.clone()),
        (pinned.cgroup.clone(), cpus("3")),
        "the task kept on CPU 3 stays where it was"
    );
    // The thread that asked only for CPU 2 was kept by itself on v1 (v2
    // places whole processes: it was moved off at on): now it leaves.
    if v1 {
        assert_eq!(
            part(&r, "tasks")["data"]["left_shield"][0]["name"],
            "straddler-t",
            "{r}"
        );
        let t = thread(sys, "straddler-t");
        assert!(
            !in_shield_cgroup(&t.cgroup) && t.cpus_allowed == cpus("2"),
            "{t:?}"
        );
    } else {
        assert!(
            part(&r, "tasks")["data"]["left_shield"] == serde_json::json!([]),
            "{r}"
        );
    }
    let st = json(&cpushield(root, &["status", "--json"]));
    assert_eq!(
        (st["shield"].clone(), st["holds"].clone()),
        ("3".into(), true.into()),
        "{st}"
    );
    for t in full_snapshot(sys).threads {
        if !t.is_pinned_by_kernel() && t.name != "pinned-inside" {
            assert!(
                !t.cpus_allowed.intersects(&cpus("3")),
                "{} on {}",
                t.name,
                t.cpus_allowed
            );
        }
    }

    // The same request again changes nothing.
    let mid = tree(root);
    let again = on(root, "3");
    assert_eq!(
        (again["planned"].clone(), again["changed"].clone()),
        (0.into(), 0.into()),
        "{again}"
    );
    assert_eq!(diff(&mid, &tree(root)), Vec::<String>::new());

    // CPU 3 leaves: the task that asked only for it must leave too.
    let r = on(root, "1-2");
    assert_eq!(
        part(&r, "tasks")["data"]["left_shield"][0]["name"],
        "pinned-inside",
        "{r}"
    );
    let gone = thread(sys, "pinned-inside");
    assert!(!in_shield_cgroup(&gone.cgroup), "{}", gone.cgroup);
    assert!(
        !gone.cpus_allowed.intersects(&cpus("1-2")),
        "{}",
        gone.cpus_allowed
    );
    let st = json(&cpushield(root, &["status", "--json"]));
    assert_eq!(
        (st["shield"].clone(), st["holds"].clone()),
        ("1-2".into(), true.into()),
        "{st}"
    );

    let o = cpushield(root, &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(diff(&before, &tree(root)), Vec::<String>::new());
}

#[test]
fn v2_shield_changes_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let sys = standard(dir.path(), CgroupLayout::V2, FixtureConfig::default());
    change_in_place(&sys, dir.path(), "sys/fs/cgroup/cpushield", false);
}

#[test]
fn v1_shield_changes_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let sys = standard(dir.path(), CgroupLayout::V1, FixtureConfig::default());
    change_in_place(&sys, dir.path(), "sys/fs/cgroup/cpuset/cpushield", true);
}

#[test]
fn systemd_shield_changes_in_place_through_the_slice() {
    let dir = tempfile::tempdir().unwrap();
    let sys = systemd_host(dir.path());
    change_in_place(&sys, dir.path(), "sys/fs/cgroup/cpushield.slice", false);
}

/// For every write index k of an in-place change: the change is killed
/// after k kernel writes, then `off` must give back the machine as it was
/// before the first `on`.
fn change_killed_at_every_write_then_off_restores(sys_of: fn(&Path) -> Sys) {
    let dir = tempfile::tempdir().unwrap();
    sys_of(dir.path());
    let before = tree(dir.path());
    on(dir.path(), "2-3");
    let total = on(dir.path(), "1-2")["planned"].as_u64().unwrap() - 1;
    assert!(cpushield(dir.path(), &["off"]).status.success());
    assert_eq!(diff(&before, &tree(dir.path())), Vec::<String>::new());
    assert!(total > 5, "the change should have several writes ({total})");
    killed_at_every_write_then_off_gives_back(
        dir.path(),
        &before,
        tree,
        &["on", "1-2"],
        total,
        || {
            on(dir.path(), "2-3");
        },
    );
}

#[test]
fn v2_change_killed_at_every_write_then_off_restores() {
    change_killed_at_every_write_then_off_restores(|root| {
        standard(root, CgroupLayout::V2, FixtureConfig::default())
    });
}

#[test]
fn systemd_change_killed_at_every_write_then_off_restores() {
    change_killed_at_every_write_then_off_restores(systemd_host);
}

#[test]
fn v1_change_killed_at_every_write_then_off_restores() {
    change_killed_at_every_write_then_off_restores(|root| {
        standard(root, CgroupLayout::V1, FixtureConfig::default())
    });
}

/// On each cgroup layout: `on 2-3`, then `on 3` failing at a late write
/// and rolled back. The rollback must give back the old shield (2-3) as
/// it was, not the machine from before any shield: `status` finds nothing
/// broken, and `off` still gives back the tree from before.
fn a_change_in_place_rolled_back_leaves_the_old_shield_whole(layout: CgroupLayout, refused: &str) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let sys = standard(root, layout, FixtureConfig::default());
    let before = tree(root);
    on(root, "2-3");
    let marker = root.join(cpushield::sys::fixture::MARKER);
    let unrefused = std::fs::read_to_string(&marker).unwrap();
    let mut config: serde_json::Value = serde_json::from_str(&unrefused).unwrap();
    config["refuse"][refused] = "EBUSY".into();
    std::fs::write(&marker, config.to_string()).unwrap();
    let o = cpushield(root, &["on", "3"]);
    assert!(!o.status.success(), "the change should fail: {}", text(&o));
    assert!(text(&o).contains("rolled back"), "{}", text(&o));
    std::fs::write(&marker, &unrefused).unwrap();
    let o = cpushield(root, &["status", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(json(&o)["shield"], "2-3", "{}", text(&o));
    let o = cpushield(root, &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(diff(&before, &tree(&sys.path(""))), Vec::<String>::new());
}

#[test]
fn v1_change_in_place_rolled_back_leaves_the_old_shield_whole() {
    a_change_in_place_rolled_back_leaves_the_old_shield_whole(
        CgroupLayout::V1,
        "sys/fs/cgroup/cpuset/cpushield/cpuset.cpu_exclusive",
    );
}

#[test]
fn v2_change_in_place_rolled_back_leaves_the_old_shield_whole() {
    a_change_in_place_rolled_back_leaves_the_old_shield_whole(
        CgroupLayout::V2,
        "proc/irq/default_smp_affinity",
    );
}
