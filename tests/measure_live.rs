//! Short live runs of every probe and of the `measure` command (each well
//! under 2 s). They pin and prioritise only their own threads and never
//! write /dev/cpu_dma_latency, sysctls, IRQ affinities or cgroups. Tests
//! that need SCHED_FIFO skip, with a printed reason, where it is not
//! permitted; in CI such a skip fails unless CI expected it.

#[path = "common/skip.rs"]
mod skip;

use std::process::Command;
use std::time::Duration;

use cpushield::measure::args::{Config, ProbeKind, Stop};
use cpushield::measure::driver::{self, Status};
use cpushield::measure::machine::Machine;
use cpushield::sys::Sys;
use cpushield::CpuSet;

fn config(probe: ProbeKind, loops: u64) -> Config {
    let sys = Sys::live();
    let online = sys.read_cpulist("sys/devices/system/cpu/online").unwrap();
    let last = online.last().unwrap();
    Config {
        probes: vec![probe],
        cpus: std::iter::once(last).collect::<CpuSet>(),
        online,
        interval_ns: None,
        stop: Stop::Loops(loops),
        // SCHED_OTHER: these tests must not need privileges.
        priority: None,
        buckets: 1000,
        bucket_width_ns: 1000,
        warmup: 2,
        noise_threshold_ns: 1000,
        noise_runtime_ns: None,
        lock_memory: false,
        dma_latency_us: None,
        explain_ns: None,
    }
}

fn run(cfg: &Config) -> driver::Run {
    let sys = Sys::live();
    driver::measure(cfg, &sys, Machine::read(&sys)).expect("measure")
}

#[test]
fn timer_probe_counts_every_loop() {
    let r = run(&config(ProbeKind::Timer, 200));
    let p = &r.probes[0];
    assert_eq!(p.status, Status::Ok);
    let c = &p.cpus[0];
    assert_eq!(c.hist.samples(), 200);
    assert_eq!(c.iterations, 202, "warm-up wake-ups are run, not recorded");
    assert!(c.hist.min_ns().unwrap() <= c.hist.max_ns().unwrap());
    // 200 loops of 1 ms, minus skipped periods.
    assert!(p.elapsed >= Duration::from_millis(150), "{:?}", p.elapsed);
    assert_eq!(p.all.samples(), 200);
    let cs = c.context_switches.expect("rusage");
    assert!(cs.voluntary >= 150, "one sleep per wake-up: {cs:?}");
}

#[test]
fn periodic_probe() {
    let mut cfg = config(ProbeKind::Periodic, 40);
    cfg.interval_ns = Some(2_000_000);
    let r = run(&cfg);
    let c = &r.probes[0].cpus[0];
    assert_eq!(c.hist.samples(), 40);
    assert!(c.iterations >= 42);
}

#[test]
fn gtod_probe_uses_ns_buckets() {
    let r = run(&config(ProbeKind::Gtod, 100_000));
    let p = &r.probes[0];
    assert_eq!(p.all.width_ns(), 1);
    assert_eq!(p.cpus[0].hist.samples(), 100_000);
    assert!(p.cpus[0].hist.stddev_ns().is_some());
}

#[test]
fn noise_probe_accounts_runtime() {
    let mut cfg = config(ProbeKind::Noise, 3);
    cfg.interval_ns = Some(100_000_000);
    cfg.noise_runtime_ns = Some(50_000_000);
    let r = run(&cfg);
    let c = &r.probes[0].cpus[0];
    let n = c.noise.as_ref().expect("noise stats");
    assert_eq!(c.iterations, 3);
    assert!(
        (140_000_000..=170_000_000).contains(&n.runtime_ns),
        "3 × 50 ms spun: {n:?}"
    );
    assert!(n.noise_ns <= n.runtime_ns);
    assert!((0.0..=100.0).contains(&n.cpu_available_pct));
    assert_eq!(n.gaps, c.hist.samples());
}

#[test]
fn rtc_probe_runs_or_skips_with_reason() {
    let r = run(&config(ProbeKind::Rtc, 50));
    match &r.probes[0].status {
        Status::Ok => assert_eq!(r.probes[0].cpus[0].hist.samples(), 50),
        Status::Skipped(reason) => {
            assert!(reason.contains("rtc") || reason.contains("RTC"), "{reason}");
            skip::skip("rtc", reason);
        }
    }
}

fn cli() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cpushield"))
}

fn fifo_permitted() -> bool {
    match driver::check_realtime_permitted(99) {
        Ok(()) => true,
        Err(e) => {
            skip::skip("sched_fifo", &e.to_string());
            false
        }
    }
}

fn last_cpu() -> String {
    let online = Sys::live()
        .read_cpulist("sys/devices/system/cpu/online")
        .unwrap();
    online.last().unwrap().to_string()
}

#[test]
fn cli_json_and_histfile() {
    if !fifo_permitted() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let hist = dir.path().join("hist");
    let out = cli()
        .args([
            "measure",
            "--cpus",
            &last_cpu(),
            "--loops",
            "100",
            "--json",
            "--histfile",
        ])
        .arg(&hist)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stderr.is_empty(), "no progress when not a terminal");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["results"][0]["cpus"][0]["stats"]["samples"], 100);
    let text = std::fs::read_to_string(&hist).unwrap();
    assert!(text.starts_with("# Histogram\n000000 "), "{text}");
    assert!(text.contains("# Total: 0000"));
    assert!(text.contains("# Histogram Overflow at cycle number:\n# Thread 0:"));
}

#[test]
fn cli_ctrl_c_still_reports() {
    if !fifo_permitted() {
        return;
    }
    let child = cli()
        .args(["measure", "--cpus", &last_cpu(), "--duration", "30"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("interrupted"), "{text}");
    assert!(text.contains("timer wake-up latency"), "{text}");
}

#[test]
fn cli_bad_options_fail_before_starting() {
    for (args, needle) in [
        (vec!["--interval", "0"], "--interval"),
        (vec!["--cpus", "4095"], "not online"),
        (vec!["--prio", "0"], "1..=99"),
        (vec!["--probe", "nope"], "timer"),
    ] {
        let out = cli().arg("measure").args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} accepted");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?} measured something");
    }
}
