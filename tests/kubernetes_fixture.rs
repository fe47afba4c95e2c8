//! A Kubernetes node: kubelet keeps pods' containers in its `kubepods`
//! cgroups and hands out every CPU but its reserved ones, so a shield of
//! cpushield's own would take containers out of those cgroups. With
//! kubelet's static CPU manager and a reserved CPU list, the shield is
//! made kubelet's way (the Kubernetes mode: the OS's systemd units
//! confined to the reserved CPUs, `kubepods` untouched, undone exactly);
//! any other node is refused in one line, exit 2, nothing changed: for
//! `on`, its dry run and `apply`.

mod common;

use common::{cpushield, diff, json, standard, task, text, tree};
use cpushield::sys::fixture::{add_process, CgroupLayout, FixtureConfig};
use cpushield::CpuSet;

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
    // A kubelet whose settings give nothing to shield: the CPU manager's
    // default policy (none) shares every CPU among all pods.
    std::fs::write(
        sys.path("proc/6000/cmdline"),
        "kubelet\0--reserved-cpus=0-1\0",
    )
    .unwrap();
    refused(dir.path(), &["on", "2-3"], "cpuManagerPolicy none");
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
    // Asked for the Kubernetes mode, this machine is refused: no node.
    let before = tree(dir.path());
    let o = cpushield(dir.path(), &["on", "2-3", "--kubernetes"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--kubernetes") && err.contains("this is no Kubernetes node"),
        "{err}"
    );
    assert!(before == tree(dir.path()));
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

/// A node as kubeadm and containerd leave it: kubelet (static CPU manager,
/// reservedSystemCPUs 0-1) and containerd in system.slice, a login in
/// user.slice, PID 1 in init.scope, and two pods under kubepods.slice: a
/// Guaranteed container holding CPUs 2-3, a BestEffort one on every CPU.
fn kubernetes_node(root: &std::path::Path, reserved: &str) -> cpushield::sys::Sys {
    let sys = standard(root, CgroupLayout::V2, FixtureConfig::default());
    std::fs::create_dir_all(sys.path("run/systemd/system")).unwrap();
    let config = "var/lib/kubelet/config.yaml";
    std::fs::create_dir_all(sys.path("var/lib/kubelet")).unwrap();
    std::fs::write(
        sys.path(config),
        format!("kind: KubeletConfiguration\ncpuManagerPolicy: static\nreservedSystemCPUs: \"{reserved}\"\n"),
    )
    .unwrap();
    // kubelet's pod slices take the cpuset controller (systemd driver).
    sys.write("sys/fs/cgroup/cgroup.subtree_control", "+cpuset")
        .unwrap();
    let cgroups = [
        "sys/fs/cgroup/system.slice",
        "sys/fs/cgroup/system.slice/kubelet.service",
        "sys/fs/cgroup/user.slice",
        "sys/fs/cgroup/init.scope",
        "sys/fs/cgroup/kubepods.slice",
    ];
    for dir in cgroups {
        sys.mkdir(dir).unwrap();
    }
    sys.write(
        "sys/fs/cgroup/kubepods.slice/cgroup.subtree_control",
        "+cpuset",
    )
    .unwrap();
    for pod in ["kubepods-pod1.slice", "kubepods-besteffort.slice"] {
        sys.mkdir(&format!("sys/fs/cgroup/kubepods.slice/{pod}"))
            .unwrap();
    }
    // kubelet's CPU manager gives the Guaranteed pod CPUs 2-3.
    sys.write(
        "sys/fs/cgroup/kubepods.slice/kubepods-pod1.slice/cpuset.cpus",
        "2-3",
    )
    .unwrap();
    add_process(&sys, 6000, &[task("kubelet", 0, "0-3")]).unwrap();
    std::fs::write(
        sys.path("proc/6000/cmdline"),
        format!("/usr/bin/kubelet\0--config=/{config}\0"),
    )
    .unwrap();
    add_process(&sys, 7000, &[task("rt-app", 0, "2-3")]).unwrap();
    add_process(&sys, 7100, &[task("web", 0, "0-3")]).unwrap();
    for (dir, pid) in [
        ("system.slice/kubelet.service", 6000),
        ("init.scope", 1),
        ("kubepods.slice/kubepods-pod1.slice", 7000),
        ("kubepods.slice/kubepods-besteffort.slice", 7100),
    ] {
        sys.write(
            &format!("sys/fs/cgroup/{dir}/cgroup.procs"),
            &pid.to_string(),
        )
        .unwrap();
    }
    sys
}

/// Every file under kubelet's pod cgroups, as read.
fn pods(root: &std::path::Path) -> Vec<(String, String)> {
    tree(root)
        .into_iter()
        .filter(|(path, _)| path.starts_with("sys/fs/cgroup/kubepods"))
        .collect()
}

#[test]
fn on_a_kubelet_node_the_os_units_are_confined_to_the_reserved_cpus_and_pods_left_to_kubelet() {
    let dir = tempfile::tempdir().unwrap();
    let sys = kubernetes_node(dir.path(), "0-1");
    // No shielded CPU offline and back under the pods, even with --force
    // (which a plain machine's plan takes them through:
    // shield_fixture's the_shields_cpus_go_offline_and_back_...).
    let o = cpushield(dir.path(), &["on", "2-3", "--force", "--dry-run", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let plan = json(&o);
    let plan = plan["plan"].as_array().unwrap();
    assert!(!plan.is_empty());
    assert!(
        !plan
            .iter()
            .any(|s| s["path"].as_str().is_some_and(|p| p.ends_with("/online"))),
        "{plan:#?}"
    );
    let before = tree(dir.path());
    let pods_before = pods(dir.path());
    let o = cpushield(dir.path(), &["on", "2-3", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    // What the user should know of kubelet's settings, and no CPU taken
    // offline under the pods.
    for said in [
        "kubelet's strict-cpu-reservation is off",
        "stay in the scheduler's domains on a Kubernetes node",
    ] {
        assert!(text(&o).contains(said), "{said}: {}", text(&o));
    }
    let cpus = |s: &str| CpuSet::parse_list(s).unwrap();
    for unit in ["system.slice", "user.slice", "init.scope"] {
        assert_eq!(
            sys.read_cpulist(&format!("sys/fs/cgroup/{unit}/cpuset.cpus.effective"))
                .unwrap(),
            cpus("0-1"),
            "{unit}"
        );
    }
    // kubelet itself and PID 1 are on the reserved CPUs, by the kernel.
    assert_eq!(sys.affinity(6000).unwrap(), cpus("0-1"));
    assert_eq!(sys.affinity(1).unwrap(), cpus("0-1"));
    // No cgroup or partition of the shield's own; the pods untouched.
    assert!(!sys.exists("sys/fs/cgroup/cpushield.slice") && !sys.exists("sys/fs/cgroup/cpushield"));
    assert_eq!(pods(dir.path()), pods_before);
    assert_eq!(sys.affinity(7000).unwrap(), cpus("2-3"));
    assert_eq!(sys.affinity(7100).unwrap(), cpus("0-3"));
    let o = cpushield(dir.path(), &["status", "--json"]);
    let (code, st) = (o.status.code(), json(&o));
    assert_eq!(code, Some(0), "{st}");
    assert!(
        st["mechanism"].as_str().unwrap().contains("Kubernetes"),
        "{st}"
    );
    // The pods' tasks are kubelet's: listed apart, neither inside the
    // shield nor leaks.
    let tasks = st["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["component"] == "tasks")
        .unwrap();
    let pids = |key: &str| -> Vec<i64> {
        let list = tasks["data"][key].as_array().unwrap();
        list.iter().map(|t| t["pid"].as_i64().unwrap()).collect()
    };
    assert_eq!(pids("pods"), [7000, 7100], "{tasks}");
    assert!(
        pids("inside").is_empty() && pids("intruders").is_empty(),
        "{tasks}"
    );
    // move and run have no cgroup to place a task in: refused, one line.
    let o = cpushield(dir.path(), &["move", "7100", "--in"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("Guaranteed pods"), "{}", text(&o));
    // Someone gives system.slice every CPU again: status sees it.
    sys.write("sys/fs/cgroup/system.slice/cpuset.cpus", "0-3")
        .unwrap();
    let o = cpushield(dir.path(), &["status"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(
        text(&o).contains("system.slice reaches the shielded CPUs 2-3"),
        "{}",
        text(&o)
    );
    // `on` again repairs it in place; off still gives back what each unit
    // had before the first shield.
    let o = cpushield(dir.path(), &["on", "2-3"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        sys.read_cpulist("sys/fs/cgroup/system.slice/cpuset.cpus.effective")
            .unwrap(),
        cpus("0-1")
    );
    let o = cpushield(dir.path(), &["status"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // What on noted of kubelet's settings, status says as they read now:
    // a line, not a breakage; gone once kubelet keeps pods off the
    // reserved CPUs.
    let strict_off = "kubelet's strict-cpu-reservation is off";
    assert!(text(&o).contains(strict_off), "{}", text(&o));
    // verify says it as advice: exit 0 (the shield holds and matches),
    // a monitor's WARNING, no node condition.
    let toml = dir.path().join("cpushield.toml");
    std::fs::write(&toml, "cpus = \"2-3\"\n").unwrap();
    let cfg = toml.to_str().unwrap();
    let o = cpushield(dir.path(), &["verify", "--config", cfg]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains(&format!("advice (kubelet): {strict_off}")),
        "{}",
        text(&o)
    );
    let o = cpushield(dir.path(), &["verify", "--config", cfg, "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(json["advice"][0]["id"], "kubelet", "{json}");
    let o = cpushield(dir.path(), &["verify", "--config", cfg, "--nagios"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let line = String::from_utf8_lossy(&o.stdout);
    assert!(
        line.starts_with("CPUSHIELD WARNING - ") && line.contains(strict_off),
        "{line}"
    );
    let o = cpushield(dir.path(), &["verify", "--config", cfg, "--npd"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = cpushield(dir.path(), &["metrics"]);
    let prom = String::from_utf8_lossy(&o.stdout);
    assert!(prom.contains("\ncpushield_advice 1\n"), "{prom}");
    assert!(
        prom.contains("cpushield_finding{id=\"kubelet\",severity=\"warn\"} 1"),
        "{prom}"
    );
    assert!(prom.contains("\ncpushield_broken_checks 0\n"), "{prom}");
    let config = sys.read("var/lib/kubelet/config.yaml").unwrap();
    let strict = "cpuManagerPolicyOptions:\n  strict-cpu-reservation: \"true\"\n";
    sys.write("var/lib/kubelet/config.yaml", &format!("{config}{strict}"))
        .unwrap();
    let o = cpushield(dir.path(), &["status"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!text(&o).contains(strict_off), "{}", text(&o));
    let o = cpushield(dir.path(), &["verify", "--config", cfg, "--nagios"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    sys.write("var/lib/kubelet/config.yaml", &config).unwrap();
    std::fs::remove_file(&toml).unwrap();
    let o = cpushield(dir.path(), &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    let after = tree(dir.path());
    assert!(before == after, "{:#?}", diff(&before, &after));
}

#[test]
fn on_a_kubelet_node_the_shield_is_what_kubelet_does_not_reserve() {
    let dir = tempfile::tempdir().unwrap();
    kubernetes_node(dir.path(), "0");
    refused(dir.path(), &["on", "2-3"], "kubelet reserves CPUs 0 for the OS and hands out the others to pods, so the shielded CPUs are CPUs 1-3");
    refused(
        dir.path(),
        &["on", "2-3"],
        "to reserve CPUs 0-1 instead: set reservedSystemCPUs: \"0-1\", remove /var/lib/kubelet/cpu_manager_state, restart kubelet, then cpushield on 2-3",
    );
    // With a pod holding exclusive CPUs, kubelet's checkpoint says which:
    // the node is drained first.
    let state = r#"{"policyName":"static","defaultCpuSet":"0-1","entries":{"pod1":{"rt":"2-3"}},"checksum":1}"#;
    std::fs::write(dir.path().join("var/lib/kubelet/cpu_manager_state"), state).unwrap();
    refused(
        dir.path(),
        &["on", "2-3"],
        "pods hold exclusive CPUs 2-3 now (/var/lib/kubelet/cpu_manager_state), so drain the node first (kubectl drain)",
    );
    refused(
        dir.path(),
        &["on", "1-3", "--balance", "within"],
        "which gets no partition",
    );
}

/// kubelet's reserved CPUs changed under the shield (its config edited and
/// kubelet restarted): status says the shield no longer matches, exit 3,
/// naming what to run.
#[test]
fn a_kubelet_that_reserves_other_cpus_since_on_breaks_the_shield() {
    let dir = tempfile::tempdir().unwrap();
    let sys = kubernetes_node(dir.path(), "0-1");
    let o = cpushield(dir.path(), &["on", "2-3"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = cpushield(dir.path(), &["status"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    std::fs::write(
        sys.path("var/lib/kubelet/config.yaml"),
        "kind: KubeletConfiguration\ncpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n",
    )
    .unwrap();
    let o = cpushield(dir.path(), &["status", "--json"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let v = json(&o);
    let broken: Vec<&serde_json::Value> = v["broken"].as_array().unwrap().iter().collect();
    assert!(
        broken.iter().any(|b| b["id"] == "kubelet-reserved"
            && b["reason"]
                .as_str()
                .unwrap()
                .contains("kubelet now reserves CPUs 0")
            && b["next"].as_str().unwrap().contains("cpushield on 1-3")),
        "{v}"
    );
}

/// KEP-5894's system partition (kubelet 1.37, alpha): where it puts the
/// system pods on shielded CPUs, on is refused, nothing changed, and a
/// partition moved there under a shield breaks it.
#[test]
fn a_kubelet_system_partition_on_the_shield_is_refused_and_breaks_a_shield() {
    let dir = tempfile::tempdir().unwrap();
    let sys = kubernetes_node(dir.path(), "0-1");
    let config = sys.read("var/lib/kubelet/config.yaml").unwrap();
    let partition = |cpus: &str| {
        format!("{config}systemPartition:\n  cpuset: \"{cpus}\"\n  namespaces: [kube-system]\n")
    };
    let file = sys.path("var/lib/kubelet/config.yaml");
    std::fs::write(&file, partition("0-2")).unwrap();
    refused(dir.path(), &["on", "2-3"], "systemPartition.cpuset (KEP-5894) puts the pods of kube-system on CPUs 0-2, shielded CPUs 2 among them");
    std::fs::write(&file, partition("0-1")).unwrap();
    let o = cpushield(dir.path(), &["on", "2-3"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = cpushield(dir.path(), &["status"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    std::fs::write(&file, partition("0-3")).unwrap();
    let o = cpushield(dir.path(), &["status", "--json"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let v = json(&o);
    assert!(
        (v["broken"].as_array().unwrap().iter()).any(|b| b["id"] == "kubelet-system-partition"
            && b["next"].as_str().unwrap().contains("restart kubelet")),
        "{v}"
    );
}
