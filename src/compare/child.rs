//! The measuring children of `compare`: the command line of each phase's
//! `cpushield measure` (inside `cpushield run` for the shielded phase), and
//! running one while forwarding a stop request.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

use super::{CompareError, Options, Phase};
use crate::cpulist::CpuSet;
use crate::measure::results::Measurement;
use crate::sys::ThreadAside;

/// Histogram buckets (1 µs each) asked of every measurement: 100 ms of
/// range. Unshielded stock kernels under load reach tens of milliseconds
/// (and the emulated test guest does so in every phase); with a 10 ms range
/// p99 and p99.9 fell into the overflow there and their ratios were
/// unknown. Trailing empty buckets are not written, so the range costs
/// space in results.json only when latencies reach it.
pub const MIN_BUCKETS: u64 = 100_000;

/// The measuring command of a phase: `measure`, wrapped in `run --` for
/// the shielded phase (so the measuring process enters the shield).
/// `realtime` false (without root) is for an emulated root of a test build
/// only: a shipped build refuses `compare` without root before.
#[cfg_attr(not(feature = "fixture"), allow(unused_variables))]
pub fn measure_command(
    exe: &Path,
    root: Option<&Path>,
    phase: Phase,
    opts: &Options,
    realtime: bool,
) -> Vec<String> {
    let exe = exe.display().to_string();
    let mut argv = Vec::new();
    if phase.shields() {
        argv.push(exe.clone());
        if let Some(r) = root {
            argv.extend(["--root".to_string(), r.display().to_string()]);
        }
        argv.extend(["run".to_string(), "--".to_string()]);
    }
    let max_t = opts.thresholds_us.iter().cloned().fold(0.0, f64::max);
    let buckets = MIN_BUCKETS.max(max_t.ceil() as u64 + 1).min(1_000_000);
    argv.extend([
        exe,
        "measure".into(),
        "--cpus".into(),
        opts.cpus.to_string(),
        "--probe".into(),
        opts.probe.name().into(),
        "--duration".into(),
        opts.duration_s.to_string(),
        "--buckets".into(),
        buckets.to_string(),
        "--json".into(),
    ]);
    if let Some(us) = opts.explain_us {
        argv.extend(["--explain".into(), us.to_string()]);
    }
    if let Some(us) = opts.timing.interval_us {
        argv.extend(["--interval".into(), us.to_string()]);
    }
    if let Some(p) = opts.timing.priority {
        argv.extend(["--prio".into(), p.to_string()]);
    }
    if let Some(us) = opts.timing.dma_latency_us {
        argv.extend(["--dma-latency".into(), us.to_string()]);
    }
    if let Some(ms) = opts.cache.gap_ms {
        argv.extend(["--cache-gap".into(), format!("{ms}ms")]);
    }
    if let Some(bytes) = opts.cache.working_set {
        argv.extend(["--working-set".into(), bytes.to_string()]);
    }
    if opts.checkpoint {
        let file = opts.out.join(format!("checkpoint-{}.json", phase.name()));
        argv.extend(["--checkpoint".into(), file.display().to_string()]);
    }
    if !opts.thresholds_us.is_empty() {
        let list: Vec<String> = opts.thresholds_us.iter().map(f64::to_string).collect();
        argv.extend(["--over".into(), list.join(",")]);
    }
    // Only an emulated root (test builds) gets this far without root.
    #[cfg(feature = "fixture")]
    if !realtime {
        argv.push("--no-rt".into());
    }
    argv
}

/// Runs a measuring child, forwarding a stop request as SIGINT (the child
/// then reports what it has). While it runs, this thread (which wakes 50
/// times a second to look for a stop request) and its output readers stay
/// on `waiting_cpus`, so that they are not among the threads the child
/// counts on the measured CPUs; the child itself starts with this
/// thread's CPUs as they were. `tick` is called at each wake-up.
pub(super) fn run_child(
    argv: &[String],
    phase: &'static str,
    stop: &AtomicBool,
    waiting_cpus: &CpuSet,
    tick: &mut dyn FnMut(),
) -> Result<Measurement, CompareError> {
    let err = |reason: String| CompareError::Measure { phase, reason };
    // On a terminal the child's progress line (elapsed and remaining,
    // samples, the largest so far per CPU) and any message of its go
    // straight there; piped, its stderr is kept for the error.
    let on_terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(if on_terminal {
            Stdio::inherit()
        } else {
            Stdio::piped()
        })
        .spawn()
        .map_err(|e| err(format!("cannot start {}: {e}", argv[0])))?;
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let _waiting = ThreadAside::on(waiting_cpus).ok();
    let mut signalled = false;
    // Read stdout/stderr on threads so a large JSON cannot block the child.
    let mut out = child.stdout.take();
    let mut errp = child.stderr.take();
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(o) = out.as_mut() {
            let _ = std::io::Read::read_to_string(o, &mut s);
        }
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(o) = errp.as_mut() {
            let _ = std::io::Read::read_to_string(o, &mut s);
        }
        s
    });
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) => {}
            Err(e) => return Err(err(format!("waiting: {e}"))),
        }
        if stop.load(Relaxed) && !signalled {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
            signalled = true;
        }
        tick();
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = t_out.join().unwrap_or_default();
    let stderr = t_err.join().unwrap_or_default();
    if !status.success() {
        let said = if on_terminal {
            "its message is above"
        } else {
            stderr.trim()
        };
        return Err(err(format!("{said} ({status})")));
    }
    serde_json::from_str(&stdout)
        .map_err(|e| err(format!("unreadable JSON ({e}): {}", stderr.trim())))
}

#[cfg(test)]
mod tests {
    use super::super::testing::opts;
    use super::*;

    #[test]
    fn shielded_command_enters_the_shield() {
        let o = opts("2");
        let exe = Path::new("/bin/cpushield");
        let idle = measure_command(exe, None, Phase::Idle, &o, true);
        assert_eq!(idle[1], "measure");
        assert!(!idle.contains(&"--no-rt".to_string()));
        // 100 ms of 1 µs buckets, or more when a threshold lies beyond
        let buckets = |argv: &[String]| {
            let i = argv.iter().position(|a| a == "--buckets").unwrap();
            argv[i + 1].clone()
        };
        assert_eq!(buckets(&idle), "100000");
        let mut far = o.clone();
        far.thresholds_us = vec![100.0, 250_000.0];
        assert_eq!(
            buckets(&measure_command(exe, None, Phase::Idle, &far, true)),
            "250001"
        );
        let sh = measure_command(exe, Some(Path::new("/fx")), Phase::Shielded, &o, false);
        assert_eq!(&sh[1..6], ["--root", "/fx", "run", "--", "/bin/cpushield"]);
        assert!(sh.contains(&"--no-rt".to_string()));
    }
}
