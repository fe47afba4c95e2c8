//! The idle-state component on fixture roots: `on --max-idle-latency`
//! bounds the shielded CPUs' PM QoS resume latency (or disables their slow
//! cpuidle states where the kernel has no such file), leaves the
//! housekeeping CPUs alone, reports the states left, and `off` gives back
//! every file exactly; `status` names a CPU someone freed again. Beside
//! CRI-O's high-performance hooks, a CPU's PM QoS or governor a pod's hook
//! holds is left to it, and the machine ends as it was.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::{cpushield, diff, part, standard, text, tree};
use cpushield::sys::fixture::{CgroupLayout, FixtureConfig};

/// The states every CPU of the fixture has: POLL, C1, C1E and C6, with
/// their exit latencies (µs) as an Intel server reports them.
const STATES: [(&str, u32); 4] = [("POLL", 0), ("C1", 2), ("C1E", 10), ("C6", 133)];

/// A v2 machine of CPUs 0-3, each with the cpuidle states of [`STATES`]
/// and, when `qos`, its PM QoS file reading `0` (no bound).
fn machine(qos: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    standard(root, CgroupLayout::V2, FixtureConfig::default());
    for cpu in 0..4 {
        let base = root.join(format!("sys/devices/system/cpu/cpu{cpu}"));
        if qos {
            fs::create_dir_all(base.join("power")).unwrap();
            fs::write(base.join("power/pm_qos_resume_latency_us"), "0\n").unwrap();
        }
        for (i, (name, latency)) in STATES.iter().enumerate() {
            let state = base.join(format!("cpuidle/state{i}"));
            fs::create_dir_all(&state).unwrap();
            fs::write(state.join("name"), format!("{name}\n")).unwrap();
            fs::write(state.join("latency"), format!("{latency}\n")).unwrap();
            fs::write(state.join("disable"), "0\n").unwrap();
            fs::write(state.join("usage"), "7\n").unwrap();
        }
    }
    dir
}

fn read(root: &Path, rel: &str) -> String {
    fs::read_to_string(root.join(rel))
        .unwrap()
        .trim()
        .to_string()
}

fn qos(root: &Path, cpu: u32) -> String {
    read(
        root,
        &format!("sys/devices/system/cpu/cpu{cpu}/power/pm_qos_resume_latency_us"),
    )
}

fn disable(root: &Path, cpu: u32, state: u32) -> String {
    read(
        root,
        &format!("sys/devices/system/cpu/cpu{cpu}/cpuidle/state{state}/disable"),
    )
}

fn json(o: &std::process::Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", text(o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The names of `states` in a report's data.
fn names(states: &serde_json::Value) -> Vec<String> {
    states
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn pm_qos_bounds_the_shielded_cpus_only_and_off_gives_every_file_back() {
    let dir = machine(true);
    let root = dir.path();
    let before = tree(root);
    let out = json(&cpushield(
        root,
        &["on", "2-3", "--max-idle-latency", "10us", "--json"],
    ));
    for cpu in [2, 3] {
        assert_eq!(qos(root, cpu), "10", "CPU {cpu}");
    }
    for cpu in [0, 1] {
        assert_eq!(qos(root, cpu), "0", "housekeeping CPU {cpu} left free");
    }
    // No state disabled: PM QoS is the bound.
    assert_eq!(disable(root, 2, 3), "0");
    let part = part(&out, "idle-states");
    assert_eq!(part["component"], "idle-states");
    let cpu2 = &part["data"]["cpus"][0];
    assert_eq!(cpu2["cpu"], 2);
    assert_eq!(cpu2["via"], "pm_qos");
    assert_eq!(names(&cpu2["left"]), ["POLL", "C1", "C1E"]);
    assert_eq!(names(&cpu2["held_off"]), ["C6"]);

    let o = cpushield(root, &["on", "2-3", "--max-idle-latency", "10us"]);
    let people = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        people.contains(
            "CPU 2 ≤ 10 µs by PM QoS: left POLL 0 µs, C1 2 µs, C1E 10 µs; held off C6 133 µs"
        ),
        "{people}"
    );

    assert!(cpushield(root, &["off"]).status.success());
    let d = diff(&before, &tree(root));
    assert!(d.is_empty(), "not restored: {d:#?}");
}

#[test]
fn a_bound_of_zero_is_polling_only_and_comes_back_as_no_bound() {
    let dir = machine(true);
    let root = dir.path();
    let before = tree(root);
    let out = json(&cpushield(
        root,
        &["on", "3", "--max-idle-latency", "0", "--json"],
    ));
    // `0` in the file means no bound: a bound of 0 µs is `n/a`.
    assert_eq!(qos(root, 3), "n/a");
    let cpu3 = &part(&out, "idle-states")["data"]["cpus"][0];
    assert_eq!(names(&cpu3["left"]), ["POLL"]);
    assert!(cpushield(root, &["off"]).status.success());
    assert_eq!(qos(root, 3), "0");
    assert!(diff(&before, &tree(root)).is_empty());
}

#[test]
fn without_pm_qos_the_slow_states_are_disabled_and_enabled_again() {
    let dir = machine(false);
    let root = dir.path();
    let before = tree(root);
    let out = json(&cpushield(
        root,
        &["on", "2-3", "--max-idle-latency", "5", "--json"],
    ));
    for cpu in [2, 3] {
        assert_eq!(disable(root, cpu, 1), "0", "C1 (2 µs) stays");
        assert_eq!(disable(root, cpu, 2), "1", "C1E (10 µs) held off");
        assert_eq!(disable(root, cpu, 3), "1", "C6 (133 µs) held off");
    }
    assert_eq!(disable(root, 0, 3), "0", "housekeeping CPU 0 keeps C6");
    let cpu2 = &part(&out, "idle-states")["data"]["cpus"][0];
    assert_eq!(cpu2["via"], "disable");
    assert_eq!(names(&cpu2["held_off"]), ["C1E", "C6"]);
    assert!(cpushield(root, &["off"]).status.success());
    let d = diff(&before, &tree(root));
    assert!(d.is_empty(), "not restored: {d:#?}");
}

#[test]
fn status_names_a_cpu_freed_again_and_on_repairs_it() {
    let dir = machine(true);
    let root = dir.path();
    assert!(
        cpushield(root, &["on", "2-3", "--max-idle-latency", "10us"])
            .status
            .success()
    );
    let st = json(&cpushield(root, &["status", "--json"]));
    assert_eq!(st["holds"], true, "{st}");
    // Someone (tuned, a script) lifts CPU 3's bound.
    fs::write(
        root.join("sys/devices/system/cpu/cpu3/power/pm_qos_resume_latency_us"),
        "0\n",
    )
    .unwrap();
    let o = cpushield(root, &["status", "--json"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let st: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let broken = st["broken"].as_array().unwrap();
    assert_eq!(broken.len(), 1, "{st}");
    assert_eq!(broken[0]["id"], "idle-states");
    let reason = broken[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("CPU 3 may enter C6 (133 µs) again"),
        "{reason}"
    );
    // `on` again repairs it in place.
    let o = cpushield(root, &["on", "2-3", "--max-idle-latency", "10us"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(qos(root, 3), "10");
    assert_eq!(json(&cpushield(root, &["status", "--json"]))["holds"], true);
}

#[test]
fn status_names_a_lifted_bound_where_no_cpuidle_driver_is_loaded() {
    let dir = machine(true);
    let root = dir.path();
    // A kernel without a cpuidle driver (a guest under emulation): the
    // PM QoS files, no states.
    for cpu in 0..4 {
        let states = root.join(format!("sys/devices/system/cpu/cpu{cpu}/cpuidle"));
        fs::remove_dir_all(states).unwrap();
    }
    let o = cpushield(root, &["on", "2-3", "--max-idle-latency", "10us"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(qos(root, 2), "10");
    let people = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        people.contains("CPU 2 ≤ 10 µs by PM QoS (no cpuidle state yet: no driver loaded)"),
        "{people}"
    );
    assert_eq!(json(&cpushield(root, &["status", "--json"]))["holds"], true);
    fs::write(
        root.join("sys/devices/system/cpu/cpu2/power/pm_qos_resume_latency_us"),
        "50\n",
    )
    .unwrap();
    let o = cpushield(root, &["status", "--json"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let st: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let reason = st["broken"][0]["reason"].as_str().unwrap();
    assert!(
        reason.contains(
            "CPU 2's pm_qos_resume_latency_us reads 50 (50 µs), looser than the shield's 10 µs"
        ),
        "{reason}"
    );
}

#[test]
fn a_change_in_place_gives_a_cpu_that_leaves_its_bound_back() {
    let dir = machine(true);
    let root = dir.path();
    let before = tree(root);
    assert!(
        cpushield(root, &["on", "2-3", "--max-idle-latency", "10us"])
            .status
            .success()
    );
    let o = cpushield(root, &["on", "3", "--max-idle-latency", "10us"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(qos(root, 2), "0", "CPU 2 left the shield");
    assert_eq!(qos(root, 3), "10");
    assert!(cpushield(root, &["off"]).status.success());
    let d = diff(&before, &tree(root));
    assert!(d.is_empty(), "not restored: {d:#?}");
}

#[test]
fn a_dry_run_says_what_it_would_hold_off_and_changes_nothing() {
    let dir = machine(true);
    let root = dir.path();
    let before = tree(root);
    let o = cpushield(
        root,
        &["on", "2-3", "--max-idle-latency", "1ms", "--dry-run"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let people = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        people.contains("CPU 3 ≤ 1000 µs by PM QoS: left POLL 0 µs, C1 2 µs, C1E 10 µs, C6 133 µs"),
        "{people}"
    );
    let o = cpushield(
        root,
        &["on", "2-3", "--max-idle-latency", "10", "--dry-run"],
    );
    let people = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(people.contains("would hold off C6 133 µs"), "{people}");
    assert!(diff(&before, &tree(root)).is_empty());
}

#[test]
fn bad_bounds_and_read_only_files_are_refused_with_nothing_changed() {
    let dir = machine(true);
    let root = dir.path();
    let before = tree(root);
    for bad in ["2s", "-1", "fast", "1000001", "5000ms"] {
        let arg = format!("--max-idle-latency={bad}");
        let o = cpushield(root, &["on", "2-3", &arg]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(
            err.contains("expected a latency from 0 to 1000000 µs"),
            "{bad}: {err}"
        );
    }
    let file = root.join("sys/devices/system/cpu/cpu3/power/pm_qos_resume_latency_us");
    fs::set_permissions(&file, fs::Permissions::from_mode(0o444)).unwrap();
    let before = {
        let mut t = before;
        t.insert(
            "sys/devices/system/cpu/cpu3/power/pm_qos_resume_latency_us".into(),
            "0\n".into(),
        );
        t
    };
    let o = cpushield(root, &["on", "2-3", "--max-idle-latency", "10"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        err.contains("--max-idle-latency: CPU 3: /sys/devices/system/cpu/cpu3/power/pm_qos_resume_latency_us is not writable"),
        "{err}"
    );
    let d = diff(&before, &tree(root));
    assert!(d.is_empty(), "changed: {d:#?}");
}

/// The PM QoS file of a CPU, below `cpuN/`.
const QOS: &str = "power/pm_qos_resume_latency_us";

/// CRI-O's hook at a pod's start on `cpu` (`cpu-c-states.crio.io` for
/// [`QOS`], `cpu-freq-governor.crio.io` for the governor): the CPU's
/// `file` saved under `/var/run/crio/cpu`, the pod's `value` written.
fn crio_pod_starts_on(root: &Path, cpu: u32, file: &str, value: &str) {
    let save = root.join(format!("run/crio/cpu/cpu{cpu}/{file}"));
    fs::create_dir_all(save.parent().unwrap()).unwrap();
    let live = root.join(format!("sys/devices/system/cpu/cpu{cpu}/{file}"));
    fs::copy(&live, &save).unwrap();
    fs::write(&live, format!("{value}\n")).unwrap();
}

/// The hook at the pod's stop: the saved value written back, and removed.
fn crio_pod_stops_on(root: &Path, cpu: u32, file: &str) {
    let save = root.join(format!("run/crio/cpu/cpu{cpu}/{file}"));
    let live = root.join(format!("sys/devices/system/cpu/cpu{cpu}/{file}"));
    fs::write(&live, fs::read(&save).unwrap()).unwrap();
    fs::remove_file(&save).unwrap();
}

fn crio_pod_starts(root: &Path, cpu: u32, latency: &str) {
    crio_pod_starts_on(root, cpu, QOS, latency)
}

fn crio_pod_stops(root: &Path, cpu: u32) {
    crio_pod_stops_on(root, cpu, QOS)
}

#[test]
fn a_cpus_pm_qos_cri_os_hook_holds_for_a_pod_is_left_to_it_and_the_machine_ends_as_it_was() {
    let dir = machine(true);
    let root = dir.path();
    fs::create_dir_all(root.join("run/crio")).unwrap();
    let before = tree(root);
    // A pod on CPU 3 started before the shield: its file is the hook's,
    // the shield leaves it and does not count it against itself.
    crio_pod_starts(root, 3, "20");
    let o = cpushield(root, &["on", "2-3", "--max-idle-latency", "10us"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!((qos(root, 2), qos(root, 3)), ("10".into(), "20".into()));
    // A pod on CPU 2 started after it: the hook saved the shield's value.
    crio_pod_starts(root, 2, "n/a");
    let o = cpushield(root, &["status"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("CRI-O's hook holds it"), "{}", text(&o));
    // off: both files left to the hook, which will write back what was
    // there before the shield
    let o = cpushield(root, &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("held by CRI-O's high-performance hook"),
        "{}",
        text(&o)
    );
    assert_eq!((qos(root, 2), qos(root, 3)), ("n/a".into(), "20".into()));
    assert_eq!(
        read(root, "run/crio/cpu/cpu2/power/pm_qos_resume_latency_us"),
        "0"
    );
    // the pods stop: the machine as it was
    crio_pod_stops(root, 2);
    crio_pod_stops(root, 3);
    for cpu in [2, 3] {
        fs::remove_dir_all(root.join(format!("run/crio/cpu/cpu{cpu}"))).unwrap();
    }
    fs::remove_dir(root.join("run/crio/cpu")).unwrap();
    let d = diff(&before, &tree(root));
    assert!(d.is_empty(), "not as it was: {d:#?}");
}

#[test]
fn a_change_in_place_while_cri_o_holds_the_file_neither_writes_it_nor_writes_it_back() {
    let dir = machine(true);
    let root = dir.path();
    fs::create_dir_all(root.join("run/crio")).unwrap();
    let before = tree(root);
    let o = cpushield(root, &["on", "2-3", "--max-idle-latency", "10us"]);
    assert!(o.status.success(), "{}", text(&o));
    // the pod starts; the healer's repair (a change in place) meanwhile
    crio_pod_starts(root, 2, "20");
    let o = cpushield(root, &["repair"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(qos(root, 2), "20", "the pod's value is left to the hook");
    // the pod stops (CRI-O writes back the shield's 10), another starts
    crio_pod_stops(root, 2);
    let o = cpushield(root, &["repair"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!((qos(root, 2), qos(root, 3)), ("10".into(), "10".into()));
    crio_pod_starts(root, 2, "20");
    // off still holds the shield's record, and hands its old value over
    let o = cpushield(root, &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(qos(root, 2), "20");
    assert_eq!(
        read(root, "run/crio/cpu/cpu2/power/pm_qos_resume_latency_us"),
        "0"
    );
    crio_pod_stops(root, 2);
    fs::remove_dir_all(root.join("run/crio/cpu")).unwrap();
    let d = diff(&before, &tree(root));
    assert!(d.is_empty(), "not as it was: {d:#?}");
}

#[test]
fn the_governor_cri_os_hook_holds_is_left_to_it_by_on_repair_status_and_off() {
    let dir = machine(false);
    let root = dir.path();
    const GOV: &str = "cpufreq/scaling_governor";
    for cpu in 0..4 {
        let d = root.join(format!("sys/devices/system/cpu/cpu{cpu}/cpufreq"));
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("scaling_governor"), "schedutil\n").unwrap();
        fs::write(
            d.join("scaling_available_governors"),
            "performance powersave schedutil\n",
        )
        .unwrap();
    }
    fs::create_dir_all(root.join("run/crio")).unwrap();
    let before = tree(root);
    let gov = |cpu: u32| read(root, &format!("sys/devices/system/cpu/cpu{cpu}/{GOV}"));
    // a pod on CPU 3 asks for powersave before the shield: left to the hook
    crio_pod_starts_on(root, 3, GOV, "powersave");
    let o = cpushield(root, &["on", "2-3", "--tune=governor"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!((gov(2), gov(3)), ("performance".into(), "powersave".into()));
    // one on CPU 2 after it; a repair meanwhile writes neither
    crio_pod_starts_on(root, 2, GOV, "powersave");
    assert!(cpushield(root, &["repair"]).status.success());
    assert_eq!((gov(2), gov(3)), ("powersave".into(), "powersave".into()));
    let o = cpushield(root, &["status"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = cpushield(root, &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!((gov(2), gov(3)), ("powersave".into(), "powersave".into()));
    assert_eq!(read(root, &format!("run/crio/cpu/cpu2/{GOV}")), "schedutil");
    crio_pod_stops_on(root, 2, GOV);
    crio_pod_stops_on(root, 3, GOV);
    fs::remove_dir_all(root.join("run/crio/cpu")).unwrap();
    let d = diff(&before, &tree(root));
    assert!(d.is_empty(), "not as it was: {d:#?}");
}
