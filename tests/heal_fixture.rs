//! The healer and `repair`: what the kernel undoes of a living shield is
//! repaired in place by the same change `on` makes; `--heal on` starts the
//! healer with the shield, `status` shows it, `off` stops it first.

mod common;

use common::*;
use cpushield::sys::fixture::{CgroupLayout, FixtureConfig};
use cpushield::CpuSet;

/// What the kernel does to a per-node kernel thread when a CPU of its
/// node comes online: its allowed CPUs become the node's, whatever its
/// cgroup (the fixture's status file, as the kernel shows it).
fn widen(root: &std::path::Path, tid: i32, list: &str) {
    let path = root.join(format!("proc/{tid}/task/{tid}/status"));
    let cpus = CpuSet::parse_list(list).unwrap();
    let text: String = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| match l.split_once(':') {
            Some(("Cpus_allowed", _)) => format!("Cpus_allowed:\t{}\n", cpus.to_mask(1)),
            Some(("Cpus_allowed_list", _)) => format!("Cpus_allowed_list:\t{cpus}\n"),
            _ => format!("{l}\n"),
        })
        .collect();
    std::fs::write(&path, text).unwrap();
}

#[test]
fn repair_puts_back_what_the_kernel_widened_and_changes_nothing_when_the_shield_holds() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    standard(root, CgroupLayout::V2, FixtureConfig::default());
    let before = tree(root);
    let o = cpushield(root, &["repair"]);
    assert_eq!(o.status.code(), Some(1), "no shield: {}", text(&o));
    assert!(
        text(&o).contains("no complete shield to repair"),
        "{}",
        text(&o)
    );
    assert!(cpushield(root, &["on", "2-3"]).status.success());
    let o = cpushield(root, &["repair", "--reason", "cpu-online"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("nothing to repair (cpu-online)"),
        "{}",
        text(&o)
    );
    // A CPU came online: the kernel gave kthreadd every CPU of the node.
    widen(root, 3, "0-3");
    let o = cpushield(root, &["status"]);
    assert_eq!(o.status.code(), Some(3), "widened: {}", text(&o));
    let o = cpushield(root, &["repair", "--reason", "cpu-online", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let v = json(&o);
    assert_eq!(v["reason"], "cpu-online", "{v}");
    assert!(v["changed"].as_u64().unwrap() >= 1, "{v}");
    let o = cpushield(root, &["status"]);
    assert!(o.status.success(), "repaired: {}", text(&o));
    assert!(cpushield(root, &["off"]).status.success());
    let d = diff(&before, &tree(root));
    assert!(d.is_empty(), "not restored: {d:#?}");
}

#[test]
fn on_starts_the_healer_by_default_status_shows_it_and_off_stops_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    standard(root, CgroupLayout::V2, FixtureConfig::default());
    let before = tree(root);
    let o = cpushield(root, &["on", "2-3", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let state: serde_json::Value =
        serde_json::from_str(&read(root, "run/cpushield/heal.json")).unwrap();
    let pid = state["pid"].as_i64().unwrap();
    assert!(root.join(format!("proc/{pid}")).exists(), "{state}");
    let o = cpushield(root, &["status"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains(&format!("running (pid {pid}), 0 repairs")),
        "{}",
        text(&o)
    );
    // The same request again (what `repair` runs) keeps the healer that runs.
    let o = cpushield(root, &["repair"]);
    assert!(o.status.success(), "{}", text(&o));
    let again: serde_json::Value =
        serde_json::from_str(&read(root, "run/cpushield/heal.json")).unwrap();
    assert_eq!(again["pid"], state["pid"]);
    // Gone behind the shield's back: status says so.
    std::fs::remove_dir_all(root.join(format!("proc/{pid}"))).unwrap();
    let o = cpushield(root, &["status"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(
        text(&o).contains("the healer the shield started is not running"),
        "{}",
        text(&o)
    );
    // A repair starts it again.
    let o = cpushield(root, &["repair"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(cpushield(root, &["status"]).status.success());
    let last: serde_json::Value =
        serde_json::from_str(&read(root, "run/cpushield/heal.json")).unwrap();
    let last_pid = last["pid"].as_i64().unwrap();
    let o = cpushield(root, &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        !root.join(format!("proc/{last_pid}")).exists(),
        "off stops the healer"
    );
    // Its counts went with the shield: the next one's healer starts at 0.
    assert!(!root.join("run/cpushield/heal.json").exists());
    let d = diff(&before, &tree(root));
    assert!(d.is_empty(), "not restored: {d:#?}");
}

#[test]
fn on_a_systemd_host_the_healer_is_a_unit_off_may_stop() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    systemd_host(root);
    let before = tree(root);
    let o = cpushield(root, &["on", "2-3", "--heal", "on"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = cpushield(root, &["off", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!text(&o).contains("not acted on"), "{}", text(&o));
    let d = diff(&before, &tree(root));
    assert!(d.is_empty(), "not restored: {d:#?}");
}

#[test]
fn under_heal_drift_an_irq_written_onto_the_shield_is_drift_for_the_healer() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    standard(root, CgroupLayout::V2, FixtureConfig::default());
    let sys = cpushield::sys::Sys::at(root);
    let drift = || cpushield::shield::components::healer::drift(&sys);
    assert!(cpushield(root, &["on", "2-3", "--heal", "on"])
        .status
        .success());
    // The shield changed in place to drift, as a person would do it.
    let o = cpushield(root, &["on", "2-3", "--heal", "drift"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(drift(), None, "the shield holds");
    let irq = (std::fs::read_dir(root.join("proc/irq")).unwrap())
        .filter_map(|e| e.unwrap().file_name().into_string().ok())
        .filter(|n| n.parse::<u32>().is_ok())
        .find(|n| read(root, &format!("proc/irq/{n}/smp_affinity_list")).trim() == "0-1")
        .expect("an IRQ off the shield");
    std::fs::write(
        root.join(format!("proc/irq/{irq}/smp_affinity_list")),
        "3\n",
    )
    .unwrap();
    assert!(drift().is_some(), "IRQ {irq} written onto CPU 3 is drift");
    let o = cpushield(root, &["on", "2-3", "--heal", "on"]);
    assert!(o.status.success(), "{}", text(&o));
    std::fs::write(
        root.join(format!("proc/irq/{irq}/smp_affinity_list")),
        "3\n",
    )
    .unwrap();
    assert_eq!(
        cpushield(root, &["status"]).status.code(),
        Some(3),
        "broken again"
    );
    assert_eq!(
        drift(),
        None,
        "without --heal drift, drift is not the healer's"
    );
}

#[test]
fn where_cri_o_runs_the_healer_repairs_what_its_hooks_give_back_at_a_pods_stop() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    standard(root, CgroupLayout::V2, FixtureConfig::default());
    let sys = cpushield::sys::Sys::at(root);
    let drift = || cpushield::shield::components::healer::drift(&sys);
    assert!(cpushield(root, &["on", "2-3"]).status.success());
    // CRI-O's pre-stop hook of an irq-load-balancing.crio.io pod on 2-3
    // sets them in the default affinity again
    let widen = || std::fs::write(root.join("proc/irq/default_smp_affinity"), "f\n").unwrap();
    widen();
    assert_eq!(cpushield(root, &["status"]).status.code(), Some(3));
    assert_eq!(
        drift(),
        None,
        "no CRI-O here: another program's drift, not the healer's"
    );
    std::fs::create_dir_all(root.join("run/crio")).unwrap();
    std::fs::write(root.join("run/crio/crio.sock"), "").unwrap();
    let found = drift().expect("CRI-O runs: its hooks' change is the healer's");
    assert!(found.contains("CRI-O's hooks"), "{found}");
    assert!(
        found.contains("default_smp_affinity") || found.contains("IRQ"),
        "{found}"
    );
    // the repair the healer makes: the shield holds again
    let o = cpushield(root, &["repair"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(cpushield(root, &["status"]).status.success());
    assert_eq!(drift(), None);
    // what else another program changes stays its own drift
    let run = root.join("proc/sys/vm/stat_interval");
    std::fs::create_dir_all(run.parent().unwrap()).unwrap();
    std::fs::write(&run, "1\n").unwrap();
    let o = cpushield(root, &["on", "2-3", "--tune=vmstat"]);
    assert!(o.status.success(), "{}", text(&o));
    std::fs::write(&run, "1\n").unwrap();
    assert_eq!(cpushield(root, &["status"]).status.code(), Some(3));
    assert_eq!(drift(), None, "a knob set back is not CRI-O's");
}

#[test]
fn heal_off_makes_no_healer_and_stops_a_running_one_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    standard(root, CgroupLayout::V2, FixtureConfig::default());
    let before = tree(root);
    let o = cpushield(root, &["on", "2-3", "--heal", "off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!root.join("run/cpushield/heal.json").exists());
    let o = cpushield(root, &["status"]);
    assert!(o.status.success(), "{}", text(&o));
    // The default again, in place: the healer starts.
    let o = cpushield(root, &["on", "2-3"]);
    assert!(o.status.success(), "{}", text(&o));
    let state: serde_json::Value =
        serde_json::from_str(&read(root, "run/cpushield/heal.json")).unwrap();
    let pid = state["pid"].as_i64().unwrap();
    assert!(root.join(format!("proc/{pid}")).exists(), "{state}");
    // And off in place: it stops, the shield stays.
    let o = cpushield(root, &["on", "2-3", "--heal", "off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        !root.join(format!("proc/{pid}")).exists(),
        "--heal off in place stops the healer"
    );
    let o = cpushield(root, &["status"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(cpushield(root, &["off"]).status.success());
    let d = diff(&before, &tree(root));
    assert!(d.is_empty(), "not restored: {d:#?}");
}
