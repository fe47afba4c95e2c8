//! A Kubernetes node is refused until cpushield has its Kubernetes mode:
//! kubelet keeps pods' containers in its `kubepods` cgroups and hands out
//! every CPU but its reserved ones, and a shield of cpushield's own would
//! take containers out of those cgroups. Refused in one line, exit 2,
//! nothing changed: for `on`, its dry run and `apply`.

mod common;

use common::{cpushield, diff, standard, task, text, tree};
use cpushield::sys::fixture::{add_process, CgroupLayout, FixtureConfig};

fn refused(root: &std::path::Path, args: &[&str], seen: &str) {
    let before = tree(root);
    let o = cpushield(root, args);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("this is a Kubernetes node") && err.contains(seen),
        "{args:?}: {err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    let after = tree(root);
    assert!(before == after, "{args:?}: {:#?}", diff(&before, &after));
}

#[test]
fn a_node_where_kubelet_runs_is_refused_and_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let sys = standard(dir.path(), CgroupLayout::V2, FixtureConfig::default());
    // Without kubelet the same request is planned.
    let o = cpushield(dir.path(), &["on", "2-3", "--dry-run"]);
    assert!(o.status.success(), "{}", text(&o));
    add_process(&sys, 6000, &[task("kubelet", 0, "0-3")]).unwrap();
    refused(dir.path(), &["on", "2-3"], "kubelet runs, pid 6000");
    refused(dir.path(), &["on", "2-3", "--dry-run"], "pid 6000");
    std::fs::create_dir_all(dir.path().join("etc/cpushield")).unwrap();
    std::fs::write(
        dir.path().join("etc/cpushield/cpushield.toml"),
        "cpus = \"2-3\"\n",
    )
    .unwrap();
    refused(dir.path(), &["apply"], "pid 6000");
}

#[test]
fn a_users_process_named_kubelet_does_not_make_a_node() {
    let dir = tempfile::tempdir().unwrap();
    let sys = standard(dir.path(), CgroupLayout::V2, FixtureConfig::default());
    let session = "sys/fs/cgroup/user.slice/user-1000.slice/session-1.scope";
    std::fs::create_dir_all(sys.path(session)).unwrap();
    for file in ["cgroup.procs", "cgroup.threads"] {
        std::fs::write(sys.path(&format!("{session}/{file}")), "").unwrap();
    }
    add_process(&sys, 8000, &[task("kubelet", 0, "0-3")]).unwrap();
    sys.write(&format!("{session}/cgroup.procs"), "8000")
        .unwrap();
    let o = cpushield(dir.path(), &["on", "2-3", "--dry-run"]);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn pods_in_kubelets_cgroups_are_seen_without_kubelet() {
    let dir = tempfile::tempdir().unwrap();
    let sys = standard(dir.path(), CgroupLayout::V2, FixtureConfig::default());
    let pod = "sys/fs/cgroup/kubepods.slice/kubepods-pod1.slice";
    std::fs::create_dir_all(sys.path(pod)).unwrap();
    for file in ["cgroup.procs", "cgroup.threads"] {
        std::fs::write(sys.path(&format!("{pod}/{file}")), "").unwrap();
    }
    add_process(&sys, 7000, &[task("sleep", 0, "2-3")]).unwrap();
    sys.write(&format!("{pod}/cgroup.procs"), "7000").unwrap();
    refused(
        dir.path(),
        &["on", "2-3"],
        "1 threads in kubelet's pod cgroups",
    );
}

/// The node-problem-detector monitor shipped in packaging/kubernetes/ runs
/// a command cpushield takes, and its condition follows `verify --npd`'s
/// exit code: 2 (unknown) without a config, one line.
#[test]
fn the_shipped_node_problem_detector_monitor_runs_verify_npd() {
    let text_of = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("packaging/kubernetes/cpushield-npd.json"),
    )
    .unwrap();
    let monitor: serde_json::Value = serde_json::from_str(&text_of).unwrap();
    assert_eq!(monitor["plugin"], "custom");
    let rule = &monitor["rules"][0];
    assert_eq!(rule["condition"], monitor["conditions"][0]["type"]);
    assert_eq!(rule["type"], "permanent", "a node condition, not an event");
    let args: Vec<&str> = (rule["args"].as_array().unwrap().iter())
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(rule["path"], "/usr/sbin/cpushield");
    let dir = tempfile::tempdir().unwrap();
    standard(dir.path(), CgroupLayout::V2, FixtureConfig::default());
    let o = cpushield(dir.path(), &args);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 1);
}
