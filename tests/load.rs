//! Live tests of the background load: each scenario is started briefly with
//! tiny sizes, with the built-in driver (our own binary's hidden worker
//! subcommand) and with stress-ng when it is installed. They check that
//! every worker runs on the given CPUs only, that the whole tree is one
//! process group, and that after stop nothing of it survives.
//!
//! Only processes and files of the tests themselves are touched.

#[path = "common/skip.rs"]
mod skip;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use cpushield::load::{group, Driver, Load, LoadSpec, Scenario, Sizes};
use cpushield::sys::{syscalls, Sys};
use cpushield::CpuSet;

/// The machine has few CPUs: run one load at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn builtin() -> Driver {
    Driver::Builtin(PathBuf::from(env!("CARGO_BIN_EXE_cpushield")))
}

/// One CPU we may run on (the last one allowed), so that a wrong affinity shows.
fn one_cpu() -> CpuSet {
    let mine = syscalls::get_affinity(0).expect("own affinity");
    let mut s = CpuSet::new();
    s.insert(mine.last().expect("some CPU"));
    s
}

fn tiny_spec(scenario: Scenario, cpus: CpuSet, driver: Driver, parent: &Path) -> LoadSpec {
    let mut spec = LoadSpec::new(scenario, cpus, driver);
    spec.sizes = Some(Sizes {
        vm_bytes: 1 << 20,
        hdd_bytes: 1 << 20,
    });
    spec.temp_parent = Some(parent.to_path_buf());
    spec.max_duration = Some(Duration::from_secs(60));
    spec.grace = Duration::from_secs(3);
    spec
}

/// Waits until the group holds at least `want` live processes.
fn wait_members(load: &Load, want: usize) -> Vec<group::ProcEntry> {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let live: Vec<_> = load
            .members()
            .into_iter()
            .filter(|p| !p.is_zombie())
            .collect();
        if live.len() >= want || Instant::now() >= until {
            return live;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn cpus_allowed(pid: i32) -> Option<CpuSet> {
    let status = Sys::live().read(&format!("proc/{pid}/status")).ok()?;
    let line = status
        .lines()
        .find(|l| l.starts_with("Cpus_allowed_list:"))?;
    CpuSet::parse_list(line.split(':').nth(1)?.trim()).ok()
}

/// Processes whose command line mentions `needle` (our unique temp dir).
fn processes_mentioning(needle: &str) -> Vec<i32> {
    let sys = Sys::live();
    group::scan(&sys)
        .into_iter()
        .filter(|p| {
            std::fs::read(format!("/proc/{}/cmdline", p.pid))
                .map(|c| String::from_utf8_lossy(&c).contains(needle))
                .unwrap_or(false)
        })
        .map(|p| p.pid)
        .collect()
}

/// Starts `scenario`, checks confinement and grouping, stops, checks that
/// nothing is left. `expected` is the number of worker processes at least.
fn run_scenario(scenario: Scenario, cpus: CpuSet, driver: Driver, expected: usize) {
    let parent = tempfile::tempdir().unwrap();
    let spec = tiny_spec(scenario, cpus.clone(), driver, parent.path());
    let load = Load::start_with(&spec).unwrap_or_else(|e| panic!("{scenario}: start: {e}"));
    let report = load.report().clone();
    let pgid = load.pgid().expect("a process group");
    let temp = report.temp_dir.clone().expect("a temp dir");
    assert!(temp.starts_with(parent.path()));
    assert_eq!(report.workers_per_stressor, cpus.len());

    let live = wait_members(&load, expected);
    assert!(
        live.len() >= expected,
        "{scenario}: {} of {expected} workers running: {live:?}",
        live.len()
    );
    // Let them work a little, as in a real phase.
    std::thread::sleep(Duration::from_millis(300));
    let mut checked = 0;
    for p in load.members().iter().filter(|p| !p.is_zombie()) {
        // None: the process exited between the scan and the read.
        if let Some(allowed) = cpus_allowed(p.pid) {
            assert_eq!(
                allowed, cpus,
                "{scenario}: pid {} ({}) escapes",
                p.pid, p.comm
            );
            checked += 1;
        }
    }
    assert!(
        checked >= expected,
        "{scenario}: checked {checked} of {expected}"
    );
    eprintln!(
        "{scenario} ({}): {checked} processes on CPUs {cpus}: {:?}",
        report.driver,
        load.members()
            .iter()
            .map(|p| p.comm.clone())
            .collect::<Vec<_>>()
    );
    // Everything the load started is in its group.
    let all = group::scan(&Sys::live());
    for d in group::descendants(&all, pgid) {
        assert_eq!(d.pgrp, pgid, "{scenario}: {d:?} left the group");
    }

    let stop = load
        .stop()
        .unwrap_or_else(|e| panic!("{scenario}: stop: {e}"));
    assert!(stop.zombies_left.is_empty(), "{stop:?}");
    assert!(
        group::group_members(&Sys::live(), pgid).is_empty(),
        "{scenario}: group {pgid} not empty after stop"
    );
    assert!(
        processes_mentioning(&temp.display().to_string()).is_empty(),
        "{scenario}: a process of the load survived"
    );
    assert!(!temp.exists(), "{scenario}: temp dir {temp:?} left behind");
}

/// Every scenario with its number of workers on one CPU (`full` runs the
/// four kinds at once).
const SCENARIOS: [(Scenario, usize); 8] = [
    (Scenario::Cpu, 1),
    (Scenario::Io, 1),
    (Scenario::Vm, 1),
    (Scenario::Hdd, 1),
    (Scenario::Stream, 1),
    (Scenario::Full, 4),
    (Scenario::Mix, 7),
    (Scenario::Hackbench, 2),
];

#[test]
fn builtin_scenarios_are_confined_and_stop_completely() {
    let _g = serial();
    let cpus = one_cpu();
    for (scenario, workers) in SCENARIOS {
        run_scenario(scenario, cpus.clone(), builtin(), workers);
    }
}

#[test]
fn builtin_runs_one_worker_per_cpu() {
    let _g = serial();
    let cpus = syscalls::get_affinity(0).unwrap();
    let n = cpus.len();
    run_scenario(Scenario::Cpu, cpus, builtin(), n);
}

#[test]
fn builtin_report_names_the_commands() {
    let _g = serial();
    let parent = tempfile::tempdir().unwrap();
    let spec = tiny_spec(Scenario::Full, one_cpu(), builtin(), parent.path());
    let load = Load::start_with(&spec).unwrap();
    let r = load.report().clone();
    drop(load);
    assert_eq!(r.driver, "builtin");
    assert_eq!(r.stress_ng_version, None);
    assert_eq!(r.commands.len(), 4);
    let lines = r.command_lines();
    assert!(
        lines[0].ends_with("__load-worker cpu --max-seconds 60"),
        "{lines:?}"
    );
    assert!(lines
        .iter()
        .any(|l| l.contains("__load-worker hdd --bytes 1048576 --temp-dir")));
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["scenario"], "full");
}

#[test]
fn dropping_a_load_stops_it() {
    let _g = serial();
    let parent = tempfile::tempdir().unwrap();
    let spec = tiny_spec(Scenario::Cpu, one_cpu(), builtin(), parent.path());
    let load = Load::start_with(&spec).unwrap();
    let pgid = load.pgid().unwrap();
    wait_members(&load, 1);
    drop(load);
    assert!(group::group_members(&Sys::live(), pgid).is_empty());
    assert_eq!(std::fs::read_dir(parent.path()).unwrap().count(), 0);
}

/// A "worker" that ignores SIGTERM and has children of its own: stop must
/// escalate to SIGKILL and still leave nothing behind.
#[test]
fn stubborn_tree_is_killed() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("stubborn.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\ntrap '' TERM\n(trap '' TERM; while :; do sleep 0.05; done) &\nwhile :; do sleep 0.05; done\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut spec = tiny_spec(
        Scenario::Cpu,
        one_cpu(),
        Driver::Builtin(script.clone()),
        dir.path(),
    );
    spec.grace = Duration::from_millis(300);
    let load = Load::start_with(&spec).unwrap();
    let pgid = load.pgid().unwrap();
    let live = wait_members(&load, 3);
    assert!(live.len() >= 3, "{live:?}");
    let stop = load.stop().unwrap();
    assert!(stop.sigkill_needed);
    assert!(group::group_members(&Sys::live(), pgid).is_empty());
}

fn stress_ng() -> Option<Driver> {
    match Driver::find_stress_ng() {
        Some(p) => Some(Driver::StressNg(p)),
        None => {
            skip::skip("stress-ng", "stress-ng is not installed");
            None
        }
    }
}

#[test]
fn stress_ng_scenarios_are_confined_and_stop_completely() {
    let Some(driver) = stress_ng() else { return };
    let _g = serial();
    let cpus = one_cpu();
    for (scenario, workers) in SCENARIOS {
        // stress-ng itself plus one process per stressor instance.
        run_scenario(scenario, cpus.clone(), driver.clone(), 1 + workers);
    }
}

#[test]
fn stress_ng_report_has_version_and_command() {
    let Some(driver) = stress_ng() else { return };
    let _g = serial();
    let parent = tempfile::tempdir().unwrap();
    let spec = tiny_spec(Scenario::Cpu, one_cpu(), driver, parent.path());
    let load = Load::start_with(&spec).unwrap();
    let r = load.report().clone();
    load.stop().unwrap();
    assert_eq!(r.driver, "stress-ng");
    assert!(r.stress_ng_version.is_some());
    assert_eq!(r.commands.len(), 1);
    let line = &r.command_lines()[0];
    assert!(line.contains("--cpu 1 --cpu-method sqrt"), "{line}");
    assert!(line.contains("--temp-path"), "{line}");
    assert!(line.contains("--timeout 60s"), "{line}");
}
