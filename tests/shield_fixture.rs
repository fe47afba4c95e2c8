//! The shield against fixture roots: apply, read back, undo, fault injection.

mod common;

use common::*;
use cpushield::shield::snapshot::Snapshot;
use cpushield::sys::fixture::{CgroupLayout, FixtureConfig};
use cpushield::sys::procfs::{self, Hierarchy};
use cpushield::CpuSet;

fn cpus(s: &str) -> CpuSet {
    CpuSet::parse_list(s).unwrap()
}

fn json(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(o)))
}

fn on_off_restores_exactly(layout: CgroupLayout, config: FixtureConfig) {
    let dir = tempfile::tempdir().unwrap();
    let sys = standard(dir.path(), layout, config);
    let before = tree(dir.path());
    let o = cpushield(dir.path(), &["on", "2-3", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let report = json(&o);

    // Every movable thread is off the shield; per-CPU kthreads and the
    // task pinned inside stay and are reported.
    let snap = Snapshot::read(&sys).unwrap();
    for t in snap.threads.iter().filter(|t| !t.is_pinned_by_kernel()) {
        let expected_inside = t.name == "pinned-inside" || t.name == "straddler-t";
        assert_eq!(
            t.cpus_allowed.intersects(&cpus("2-3")),
            expected_inside,
            "{} has {}",
            t.name,
            t.cpus_allowed
        );
    }
    let straddler = snap.threads.iter().find(|t| t.name == "straddler").unwrap();
    assert_eq!(
        straddler.cpus_allowed,
        cpus("1"),
        "own restriction kept, shield removed"
    );
    assert_eq!(report["stranded"][0]["name"], "pinned-inside");
    assert_eq!(report["stranded"][1]["name"], "straddler-t");
    assert_eq!(report["per_cpu_kthreads"]["ksoftirqd"], 2);
    let refused: Vec<(u64, String)> = report["irqs_refused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["irq"].as_u64().unwrap(),
                i["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(refused, vec![(0, "EIO".into()), (40, "EPERM".into())]);
    assert_eq!(
        report["irqs_effective_on_shield"],
        serde_json::json!([24, 40])
    );
    assert_eq!(
        sys.read_cpulist("proc/irq/25/smp_affinity_list").unwrap(),
        cpus("0-1")
    );
    assert_eq!(
        sys.read_cpumask("proc/irq/default_smp_affinity").unwrap(),
        cpus("0-1")
    );
    assert_eq!(
        sys.read_cpumask("sys/devices/virtual/workqueue/cpumask")
            .unwrap(),
        cpus("0-1")
    );

    let st = json(&cpushield(dir.path(), &["status", "--json"]));
    assert_eq!(st["shield"], "2-3");
    assert_eq!(
        st["intruders"].as_array().unwrap().len(),
        2,
        "only the stranded tasks: {st}"
    );

    let o = cpushield(dir.path(), &["off", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let after = tree(dir.path());
    assert_eq!(diff(&before, &after), Vec::<String>::new());
}

#[test]
fn v2_on_off_restores_exactly() {
    on_off_restores_exactly(CgroupLayout::V2, FixtureConfig::default());
}

#[test]
fn v2_on_off_restores_exactly_when_kernel_keeps_affinity() {
    on_off_restores_exactly(
        CgroupLayout::V2,
        FixtureConfig {
            keep_affinity_on_move: true,
            ..Default::default()
        },
    );
}

#[test]
fn v1_on_off_restores_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let sys = standard(dir.path(), CgroupLayout::V1, FixtureConfig::default());
    let before = tree(dir.path());
    let o = cpushield(dir.path(), &["on", "2-3"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        sys.read_trimmed("sys/fs/cgroup/cpuset/cpushield/cpuset.cpu_exclusive")
            .unwrap(),
        "1"
    );
    assert_eq!(
        sys.read_trimmed("sys/fs/cgroup/cpuset/cpuset.sched_load_balance")
            .unwrap(),
        "0"
    );
    let init = procfs::read_thread(&sys, 1, 1, Hierarchy::CpusetV1)
        .unwrap()
        .unwrap();
    assert_eq!(init.cgroup, "/cpushield-system");
    let k = procfs::read_thread(&sys, 12, 12, Hierarchy::CpusetV1)
        .unwrap()
        .unwrap();
    assert_eq!(k.cgroup, "/", "per-CPU kthreads stay in the root cpuset");
    // kthreadd refuses the cpuset move; its affinity still leaves the shield,
    // so the kernel threads it forks start off the shield too.
    let kthreadd = procfs::read_thread(&sys, 3, 3, Hierarchy::CpusetV1)
        .unwrap()
        .unwrap();
    assert_eq!(
        (kthreadd.cgroup.as_str(), kthreadd.cpus_allowed.clone()),
        ("/", cpus("0-1"))
    );
    let o = cpushield(dir.path(), &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(diff(&before, &tree(dir.path())), Vec::<String>::new());
}

#[test]
fn refused_inputs_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    standard(dir.path(), CgroupLayout::V2, FixtureConfig::default());
    let before = tree(dir.path());
    for (args, needle) in [
        (vec!["on", "7"], "do not exist"),
        (vec!["on", "0-3"], "no housekeeping CPU"),
        (vec!["on", ""], "no CPU given"),
        (vec!["on", "abc"], "valid forms"),
        (vec!["on", "2", "--irq", "nosuch"], "matches no IRQ"),
        (vec!["off"], "no shield is active"),
        (vec!["move", "1", "--in"], "no shield is active"),
    ] {
        let o = cpushield(dir.path(), &args);
        assert!(!o.status.success(), "{args:?} succeeded: {}", text(&o));
        assert!(text(&o).contains(needle), "{args:?}: {}", text(&o));
        assert_eq!(
            diff(&before, &tree(dir.path())),
            Vec::<String>::new(),
            "{args:?}"
        );
    }
}

#[test]
fn invalid_partition_fails_with_reason_and_rolls_back() {
    let dir = tempfile::tempdir().unwrap();
    standard(
        dir.path(),
        CgroupLayout::V2,
        FixtureConfig {
            partition_invalid: Some("partition config conflicts with housekeeping setup".into()),
            ..Default::default()
        },
    );
    let before = tree(dir.path());
    let o = cpushield(dir.path(), &["on", "2-3"]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("conflicts with housekeeping setup"),
        "{}",
        text(&o)
    );
    assert!(text(&o).contains("rolled back"), "{}", text(&o));
    assert_eq!(diff(&before, &tree(dir.path())), Vec::<String>::new());
    assert!(!dir.path().join("run/cpushield/journal").exists());
}

#[test]
fn changing_the_shield_keeps_the_original_for_undo() {
    let dir = tempfile::tempdir().unwrap();
    let sys = standard(dir.path(), CgroupLayout::V2, FixtureConfig::default());
    let before = tree(dir.path());
    assert!(cpushield(dir.path(), &["on", "2-3"]).status.success());
    let o = cpushield(dir.path(), &["on", "3"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        sys.read_cpulist("proc/irq/24/smp_affinity_list").unwrap(),
        cpus("2")
    );
    assert_eq!(
        sys.read_cpulist("sys/fs/cgroup/cpushield/cpuset.cpus")
            .unwrap(),
        cpus("3")
    );
    // A refused change leaves the current shield as it is.
    let mid = tree(dir.path());
    assert!(!cpushield(dir.path(), &["on", "0-3"]).status.success());
    assert_eq!(diff(&mid, &tree(dir.path())), Vec::<String>::new());
    assert!(cpushield(dir.path(), &["off"]).status.success());
    assert_eq!(diff(&before, &tree(dir.path())), Vec::<String>::new());
}

#[test]
fn irqs_named_are_bound_to_the_shield() {
    let dir = tempfile::tempdir().unwrap();
    let sys = standard(dir.path(), CgroupLayout::V2, FixtureConfig::default());
    let o = cpushield(dir.path(), &["on", "2-3", "--irq", "ahci", "--irq", "9"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        sys.read_cpulist("proc/irq/25/smp_affinity_list").unwrap(),
        cpus("2-3")
    );
    assert_eq!(
        sys.read_cpulist("proc/irq/9/smp_affinity_list").unwrap(),
        cpus("2-3")
    );
}

#[test]
fn move_in_and_out_is_undone_by_off() {
    let dir = tempfile::tempdir().unwrap();
    let sys = standard(dir.path(), CgroupLayout::V2, FixtureConfig::default());
    let before = tree(dir.path());
    assert!(cpushield(dir.path(), &["on", "2-3"]).status.success());
    let o = cpushield(dir.path(), &["move", "102", "--in", "--cpu", "3"]);
    assert!(o.status.success(), "{}", text(&o));
    for tid in [102, 103] {
        let t = procfs::read_thread(&sys, 102, tid, Hierarchy::Unified)
            .unwrap()
            .unwrap();
        assert_eq!(
            (t.cgroup.as_str(), t.cpus_allowed.clone()),
            ("/cpushield", cpus("3"))
        );
    }
    let st = json(&cpushield(dir.path(), &["status", "--json"]));
    assert_eq!(st["tasks_inside"].as_array().unwrap().len(), 2);
    let o = cpushield(dir.path(), &["move", "102", "--in", "--cpu", "0"]);
    assert!(
        !o.status.success() && text(&o).contains("not one of the shielded CPUs"),
        "{}",
        text(&o)
    );
    let o = cpushield(dir.path(), &["move", "102", "--out"]);
    assert!(o.status.success(), "{}", text(&o));
    let t = procfs::read_thread(&sys, 102, 102, Hierarchy::Unified)
        .unwrap()
        .unwrap();
    assert_eq!((t.cgroup.as_str(), t.cpus_allowed), ("/", cpus("0-1")));
    assert!(cpushield(dir.path(), &["off"]).status.success());
    assert_eq!(diff(&before, &tree(dir.path())), Vec::<String>::new());
}

#[test]
fn a_second_cpushield_is_refused_while_one_runs() {
    let dir = tempfile::tempdir().unwrap();
    let sys = standard(dir.path(), CgroupLayout::V2, FixtureConfig::default());
    let _held = cpushield::shield::journal::lock(&sys).unwrap();
    let before = tree(dir.path());
    let o = cpushield(dir.path(), &["on", "2"]);
    assert!(
        !o.status.success() && text(&o).contains("another cpushield is running"),
        "{}",
        text(&o)
    );
    assert_eq!(diff(&before, &tree(dir.path())), Vec::<String>::new());
}

#[test]
fn no_cpuset_support_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    standard(dir.path(), CgroupLayout::None, FixtureConfig::default());
    let o = cpushield(dir.path(), &["on", "2"]);
    assert!(
        !o.status.success() && text(&o).contains("no cpuset support"),
        "{}",
        text(&o)
    );
}

/// For every write index k: `on` is killed (SIGKILL) after k kernel writes,
/// then `off` must give back exactly the machine as it was.
fn killed_at_every_write_then_off_restores(layout: CgroupLayout) {
    let dir = tempfile::tempdir().unwrap();
    standard(dir.path(), layout, FixtureConfig::default());
    let before = tree(dir.path());
    let o = cpushield(dir.path(), &["on", "2-3", "--json"]);
    // One planned step only records affinities and makes no kernel write.
    let total = json(&o)["planned"].as_u64().unwrap() - 1;
    assert!(cpushield(dir.path(), &["off"]).status.success());
    assert!(
        total > 10,
        "the fixture plan should have many writes ({total})"
    );
    for k in 0..=total {
        let o = cpushield_env(
            dir.path(),
            &["on", "2-3"],
            &[("CPUSHIELD_FIXTURE_CRASH_AFTER", k.to_string())],
        );
        if k < total {
            assert!(
                !o.status.success(),
                "k={k}: on should have been killed: {}",
                text(&o)
            );
        }
        let o = cpushield(dir.path(), &["off"]);
        assert!(o.status.success(), "k={k}: off failed: {}", text(&o));
        let d = diff(&before, &tree(dir.path()));
        assert!(d.is_empty(), "k={k}: not restored: {d:#?}");
    }
}

#[test]
fn v2_killed_at_every_write_then_off_restores() {
    killed_at_every_write_then_off_restores(CgroupLayout::V2);
}

#[test]
fn v1_killed_at_every_write_then_off_restores() {
    killed_at_every_write_then_off_restores(CgroupLayout::V1);
}

#[test]
fn dry_run_changes_nothing_and_prints_the_plan() {
    let dir = tempfile::tempdir().unwrap();
    standard(dir.path(), CgroupLayout::V2, FixtureConfig::default());
    let before = tree(dir.path());
    let o = cpushield(dir.path(), &["on", "2-3", "--dry-run"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("write \"isolated\" > /sys/fs/cgroup/cpushield/cpuset.cpus.partition"),
        "{}",
        text(&o)
    );
    assert_eq!(diff(&before, &tree(dir.path())), Vec::<String>::new());
}

#[test]
fn unmounted_cgroup2_on_off_restores_exactly() {
    on_off_restores_exactly(CgroupLayout::Unmounted, FixtureConfig::default());
    on_off_restores_exactly(CgroupLayout::UnmountedBusy, FixtureConfig::default());
}

#[test]
fn unmounted_cgroup2_is_mounted_by_on_and_unmounted_by_off() {
    for (layout, at) in [
        (CgroupLayout::Unmounted, "/sys/fs/cgroup"),
        (CgroupLayout::UnmountedBusy, "/run/cpushield/cgroup2"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let sys = standard(dir.path(), layout, FixtureConfig::default());
        let before = tree(dir.path());
        let o = cpushield(dir.path(), &["on", "2-3", "--json"]);
        assert!(o.status.success(), "{at}: {}", text(&o));
        let report = json(&o);
        assert_eq!(report["mechanism"], "cgroup v2 partition");
        assert_eq!(report["partition"], "isolated", "{at}: {report}");
        let mounts = procfs::parse_mounts(&sys.read("proc/self/mounts").unwrap());
        let ours: Vec<_> = mounts.iter().filter(|m| m.target == at).collect();
        assert_eq!(ours.len(), 1, "{at}: {mounts:?}");
        assert_eq!(ours[0].fstype, "cgroup2");
        let root = at.trim_start_matches('/');
        assert_eq!(
            sys.read_trimmed(&format!("{root}/cgroup.subtree_control"))
                .unwrap(),
            "cpuset"
        );
        assert_eq!(
            sys.read_cpulist(&format!("{root}/cpushield/cpuset.cpus"))
                .unwrap(),
            cpus("2-3")
        );
        if layout == CgroupLayout::UnmountedBusy {
            assert!(
                mounts
                    .iter()
                    .any(|m| m.target == "/sys/fs/cgroup" && m.fstype == "tmpfs"),
                "the busy /sys/fs/cgroup is left alone"
            );
        }
        let st = json(&cpushield(dir.path(), &["status", "--json"]));
        assert_eq!(st["partition"], "isolated", "{st}");

        let o = cpushield(dir.path(), &["off", "--json"]);
        assert!(o.status.success(), "{at}: {}", text(&o));
        assert_eq!(diff(&before, &tree(dir.path())), Vec::<String>::new());
        assert!(
            !sys.exists("run/cpushield/cgroup2"),
            "the mount point cpushield made is gone"
        );
    }
}

#[test]
fn off_leaves_cgroup2_mounted_when_something_is_mounted_below_it() {
    let dir = tempfile::tempdir().unwrap();
    let sys = standard(
        dir.path(),
        CgroupLayout::Unmounted,
        FixtureConfig::default(),
    );
    let o = cpushield(dir.path(), &["on", "2-3"]);
    assert!(o.status.success(), "{}", text(&o));
    // Someone mounts something inside the hierarchy cpushield mounted.
    let mut table = sys.read("proc/self/mounts").unwrap();
    table.push_str("tmpfs /sys/fs/cgroup/elsewhere tmpfs rw 0 0\n");
    std::fs::write(sys.path("proc/self/mounts"), table).unwrap();
    let o = cpushield(dir.path(), &["off"]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("left mounted"),
        "the refusal is named: {}",
        text(&o)
    );
    let mounts = procfs::parse_mounts(&sys.read("proc/self/mounts").unwrap());
    assert!(
        mounts
            .iter()
            .any(|m| m.target == "/sys/fs/cgroup" && m.fstype == "cgroup2"),
        "still mounted: {mounts:?}"
    );
}

#[test]
fn unmounted_cgroup2_killed_at_every_write_then_off_restores() {
    killed_at_every_write_then_off_restores(CgroupLayout::Unmounted);
    killed_at_every_write_then_off_restores(CgroupLayout::UnmountedBusy);
}

#[test]
fn dry_run_says_it_will_mount_cgroup2() {
    let dir = tempfile::tempdir().unwrap();
    standard(
        dir.path(),
        CgroupLayout::UnmountedBusy,
        FixtureConfig::default(),
    );
    let before = tree(dir.path());
    let o = cpushield(dir.path(), &["on", "2-3", "--dry-run"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    assert!(
        out.contains(
            "mkdir /run/cpushield/cgroup2; mount -t cgroup2 cgroup2 /run/cpushield/cgroup2"
        ),
        "{out}"
    );
    assert!(
        out.contains("mounting cgroup2 at /run/cpushield/cgroup2"),
        "{out}"
    );
    assert_eq!(diff(&before, &tree(dir.path())), Vec::<String>::new());
}
