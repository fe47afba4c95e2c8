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
        device: None,
        checkpoint: None,
        over_ns: Vec::new(),
        cache_gap_ns: 0,
        working_set: None,
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

/// The JSON report of a `measure --json` that must have succeeded.
fn succeeded_json(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
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

/// Every whole second of a run carries its CPU's largest sample (the
/// block maxima `certify` fits), none above the run's maximum and the
/// largest of them reached by some sample.
#[test]
fn cli_json_has_each_seconds_maximum() {
    if !fifo_permitted() {
        return;
    }
    let out = cli()
        .args([
            "measure",
            "--cpus",
            &last_cpu(),
            "--duration",
            "3",
            "--json",
        ])
        .output()
        .unwrap();
    let v = succeeded_json(&out);
    let cpu = &v["results"][0]["cpus"][0];
    let maxima: Vec<u64> = cpu["per_second_max_ns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_u64().unwrap())
        .collect();
    assert!((2..=3).contains(&maxima.len()), "{maxima:?}");
    let max = cpu["stats"]["max_ns"].as_u64().unwrap();
    assert!(
        maxima.iter().all(|&m| m > 0 && m <= max),
        "{maxima:?} vs {max}"
    );
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
        (
            vec!["--checkpoint", "/nonexistent-cpushield/c.json"],
            "a file in a directory that exists",
        ),
        (vec!["--checkpoint", "/tmp"], "not a directory"),
        (vec!["--over", "0"], "--over"),
    ] {
        let out = cli().arg("measure").args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} accepted");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?} measured something");
    }
}

/// The cache size sysfs gives `cpu` for `level` (a data or unified
/// cache), and the number of CPUs sharing it; read here by hand, apart
/// from the probe's own reading.
fn sysfs_cache(cpu: &str, level: u32) -> Option<(u64, u64)> {
    let dir = std::path::PathBuf::from(format!("/sys/devices/system/cpu/cpu{cpu}/cache"));
    for entry in std::fs::read_dir(&dir).ok()?.flatten() {
        let read = |f: &str| std::fs::read_to_string(entry.path().join(f)).ok();
        let (Some(l), Some(t), Some(size), Some(shared)) = (
            read("level"),
            read("type"),
            read("size"),
            read("shared_cpu_list"),
        ) else {
            continue;
        };
        if l.trim() != level.to_string() || t.trim() == "Instruction" {
            continue;
        }
        let size = size.trim();
        let bytes = match size.strip_suffix('K') {
            Some(k) => k.parse::<u64>().ok()? << 10,
            None => match size.strip_suffix('M') {
                Some(m) => m.parse::<u64>().ok()? << 20,
                None => size.parse().ok()?,
            },
        };
        let sharing = shared.trim().parse::<CpuSet>().ok()?.len() as u64;
        return Some((bytes, sharing));
    }
    None
}

/// `measure --probe cache --duration 1` without real-time privileges
/// (`--no-rt`, test builds): every level ran, its working set is the size
/// sysfs gives (L3: divided by the CPUs sharing it), and the levels'
/// samples make up the probe's histogram. No latency is compared: a
/// loaded test host may make any level slow.
#[test]
fn cli_cache_probe_reports_each_level_at_its_sysfs_size() {
    let cpu = last_cpu();
    let out = cli()
        .args([
            "measure",
            "--probe",
            "cache",
            "--cpus",
            &cpu,
            "--duration",
            "1",
            "--no-rt",
            "--json",
        ])
        .output()
        .unwrap();
    let v = succeeded_json(&out);
    let r = &v["results"][0];
    assert_eq!(r["probe"], "cache");
    if cpushield::sys::syscalls::Tsc::new().is_err() {
        assert_eq!(r["status"], "skipped");
        assert!(r["skip_reason"].as_str().unwrap().contains("RDTSC"), "{r}");
        skip::skip("cache_probe", "no cycle counter on this architecture");
        return;
    }
    assert_eq!(r["status"], "ok", "{}", r["skip_reason"]);
    assert_eq!(r["sample"], "load_latency");
    assert_eq!(r["histogram"]["bucket_width_ns"], 1, "ns buckets");
    let c = &r["cpus"][0];
    assert_eq!(c["cpu"].to_string(), cpu);
    let cache = &c["cache"];
    let ghz = cache["tsc_ticks_per_ns"].as_f64().unwrap();
    assert!((0.5..10.0).contains(&ghz), "TSC at {ghz} GHz");
    let levels = cache["levels"].as_array().unwrap();
    let names: Vec<&str> = levels
        .iter()
        .map(|l| l["level"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["L1d", "L2", "L3"]);
    let mut total = 0;
    for (l, level) in levels.iter().zip(1..) {
        let bytes = l["bytes"].as_u64().unwrap();
        match sysfs_cache(&cpu, level) {
            Some((size, sharing)) => {
                assert_eq!(l["source"], "sysfs", "{l}");
                assert_eq!(l["cache_bytes"], size, "{l}");
                let expected = if level == 3 { size / sharing } else { size };
                let expected = (expected.min(64 << 20) / 64).max(2) * 64;
                assert_eq!(bytes, expected, "L{level}: {l}");
            }
            None => assert_eq!(l["source"], "assumed", "{l}"),
        }
        assert_eq!(l["lines"].as_u64().unwrap() * 64, bytes);
        let samples = l["stats"]["samples"].as_u64().unwrap();
        assert!(samples > 0, "L{level} timed no load");
        assert_eq!(l["cycles"]["samples"], samples);
        assert!(l["cycles"]["min"].as_u64().unwrap() <= l["cycles"]["max"].as_u64().unwrap());
        total += samples;
    }
    assert_eq!(
        c["stats"]["samples"], total,
        "every level in the probe's histogram"
    );
}

/// `measure --probe cache --working-set 256K --cache-gap 5ms`: one set of
/// the size given, left idle 5 ms before each round's timed loads (a
/// round then takes at least the gap: a 1 s run has at most 200), and
/// both options refused without the cache probe.
#[test]
fn cli_cache_probe_walks_the_set_given_after_its_idle_gap() {
    let cpu = last_cpu();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "measure",
            "--cpus",
            &cpu,
            "--duration",
            "1",
            "--no-rt",
            "--json",
        ];
        args.extend_from_slice(extra);
        cli().args(&args).output().unwrap()
    };
    for wrong in [["--cache-gap", "5ms"], ["--working-set", "256K"]] {
        let out = run(&[&["--probe", "timer"], &wrong[..]].concat());
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(wrong[0]) && err.contains("--probe cache"),
            "{err}"
        );
    }
    let out = run(&[
        "--probe",
        "cache",
        "--working-set",
        "256K",
        "--cache-gap",
        "5ms",
    ]);
    let v = succeeded_json(&out);
    let r = &v["results"][0];
    if r["status"] == "skipped" {
        skip::skip("cache_probe_gap", "no cycle counter on this architecture");
        return;
    }
    let cache = &r["cpus"][0]["cache"];
    assert_eq!(cache["idle_gap_ms"], 5, "{cache}");
    let levels = cache["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 1, "{cache}");
    assert_eq!(levels[0]["level"], "256KiB");
    assert_eq!(levels[0]["bytes"], 256 << 10);
    assert_eq!(levels[0]["source"], "given");
    let samples = levels[0]["stats"]["samples"].as_u64().unwrap();
    let per_round = cache["loads_per_round"].as_u64().unwrap();
    assert!(
        samples > 0 && samples <= 200 * per_round,
        "{samples} loads in 1 s with a 5 ms gap"
    );
}

/// `measure --probe pci` against a root whose only PCI function is a
/// regular file standing in for `config` (no device is read): the probe
/// times every read, reports the value read back as the file holds it,
/// and its buckets are 100 ns. Bad input is refused before anything is
/// measured, naming the input and what would be valid.
#[test]
fn cli_pci_probe_reads_the_config_it_is_given_and_refuses_bad_input() {
    let root = tempfile::tempdir().unwrap();
    let cpus = root.path().join("sys/devices/system/cpu");
    std::fs::create_dir_all(&cpus).unwrap();
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    std::fs::write(cpus.join("online"), online).unwrap();
    let dev = root.path().join("sys/bus/pci/devices/0000:00:1f.0");
    std::fs::create_dir_all(&dev).unwrap();
    let mut config = vec![0u8; 256];
    config[..4].copy_from_slice(&0x2918_8086u32.to_le_bytes());
    config[8..12].copy_from_slice(&0x0601_0002u32.to_le_bytes());
    std::fs::write(dev.join("config"), &config).unwrap();
    std::fs::write(
        dev.join("resource"),
        "0x000000000000c000 0x000000000000c01f 0x0000000000040101\n",
    )
    .unwrap();
    let cpu = last_cpu();
    let measure = |args: &[&str]| {
        cli()
            .arg("--root")
            .arg(root.path())
            .args(["measure", "--no-rt", "--cpus", &cpu, "--probe", "pci"])
            .args(args)
            .output()
            .unwrap()
    };
    let out = measure(&[
        "--device",
        "00:1f.0",
        "--device-offset",
        "0x8",
        "--loops",
        "300",
        "--json",
    ]);
    let v = succeeded_json(&out);
    let r = &v["results"][0];
    assert_eq!(r["probe"], "pci");
    if cpushield::sys::syscalls::Tsc::new().is_err() {
        assert_eq!(r["status"], "skipped");
        skip::skip("pci_probe", "no cycle counter on this architecture");
        return;
    }
    assert_eq!(r["status"], "ok", "{}", r["skip_reason"]);
    assert_eq!(r["sample"], "register_read");
    assert_eq!(r["histogram"]["bucket_width_ns"], 100);
    let c = &r["cpus"][0];
    assert_eq!(c["stats"]["samples"], 300);
    let d = &c["device"];
    assert_eq!(d["target"]["address"], "0000:00:1f.0");
    assert_eq!(d["target"]["region"], "config");
    assert_eq!(d["target"]["offset"], 8);
    assert_eq!(d["first_value"], 0x0601_0002u32);
    assert_eq!(
        (d["changed"].as_u64(), d["short_reads"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(v["config"]["device"]["region_bytes"], 256);
    // The table says what was read back.
    let out = measure(&["--device", "0000:00:1f.0", "--loops", "50"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("register: config space 0x00 of 0000:00:1f.0"),
        "{text}"
    );
    assert!(text.contains("read back on CPU"), "{text}");
    assert!(text.contains("0x29188086 on every read"), "{text}");
    // Refusals: exit 2, the input named, nothing measured.
    for (args, needles) in [
        (vec![], vec!["--device", "e.g. --device 0000:00:1f.0"]),
        (vec!["--device", "00:1f"], vec!["\"00:1f\"", "DDDD:BB:DD.F"]),
        (
            vec!["--device", "00:1e.0"],
            vec!["\"00:1e.0\"", "0000:00:1f.0"],
        ),
        (
            vec!["--device", "00:1f.0", "--device-offset", "0x100"],
            vec!["\"0x100\"", "0x0 to 0xfc"],
        ),
        (
            vec!["--device", "00:1f.0", "--device-offset", "6"],
            vec!["a multiple of 4"],
        ),
        (
            vec!["--device", "00:1f.0", "--device-bar", "0"],
            vec![
                "I/O port range, not memory",
                "memory BARs of 0000:00:1f.0: none",
            ],
        ),
        (
            vec!["--device", "00:1f.0", "--device-bar", "3"],
            vec!["BAR 3 is not in"],
        ),
    ] {
        let out = measure(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        for n in needles {
            assert!(err.contains(n), "{args:?}: {n:?} not in {err}");
        }
        assert!(out.stdout.is_empty(), "{args:?} measured something");
    }
}
