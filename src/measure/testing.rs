//! Runs built from literal samples, for the tests of reporting and of
//! `compare`, which reads a run back through [`super::results`].

use std::time::Duration;

use super::args::{Config, ProbeKind, Stop};
use super::driver::{ContextSwitches, CpuResult, ProbeResult, Run, Status};
use super::histogram::Histogram;
use super::interrupts::Delta;
use super::machine::{BootParams, Machine, Preemption};
use super::threads::{ThreadRan, ThreadsRan};

/// A histogram of 1 µs buckets holding `values_us` (each + 0.4 µs), in order.
pub fn hist(values_us: &[u64], buckets: usize) -> Histogram {
    let mut h = Histogram::new(buckets, 1000);
    for (i, v) in values_us.iter().enumerate() {
        h.record(i as u64, v * 1000 + 400);
    }
    h
}

/// One CPU's result around `h`, with 7 local timer interrupts and one
/// kworker that ran 3 times.
pub fn cpu(cpu: u32, h: Histogram) -> CpuResult {
    CpuResult {
        cpu,
        hist: h,
        iterations: 5,
        missed: 1,
        noise: None,
        cache: None,
        pci: None,
        context_switches: Some(ContextSwitches {
            voluntary: 5,
            involuntary: 0,
        }),
        interrupts: vec![Delta {
            source: "LOC".into(),
            count: 7,
            description: "Local timer interrupts".into(),
        }],
        softirqs: vec![],
        threads_ran: Some(ThreadsRan {
            threads: 1,
            switches: 3,
            busiest: vec![ThreadRan {
                tid: 99,
                name: format!("kworker/{cpu}:1"),
                switches: 3,
            }],
        }),
        per_second_max_ns: vec![],
        smis: Some(u64::from(cpu == 2)),
    }
}

/// A timer run over CPUs 1 (1, 2, 2, 3, 9 µs: the 9 overflows) and 2 (0, 1 µs).
pub fn sample_run() -> Run {
    let a = hist(&[1, 2, 2, 3, 9], 4);
    let b = hist(&[0, 1], 4);
    let mut all = Histogram::new(4, 1000);
    all.merge(&a);
    all.merge(&b);
    let cfg = Config {
        probes: vec![ProbeKind::Timer],
        cpus: "1-2".parse().unwrap(),
        online: "0-2".parse().unwrap(),
        interval_ns: None,
        stop: Stop::Loops(5),
        priority: Some(99),
        buckets: 4,
        bucket_width_ns: 1000,
        warmup: 0,
        noise_threshold_ns: 1000,
        noise_runtime_ns: None,
        lock_memory: true,
        dma_latency_us: None,
        explain_ns: None,
        device: None,
        cache_gap_ns: 0,
        working_set: None,
        checkpoint: None,
        over_ns: Vec::new(),
    };
    Run {
        config: cfg,
        machine: Machine {
            kernel_release: Some("6.1.0".into()),
            kernel_version: None,
            preemption: Preemption::default(),
            cpu_model: Some("Test CPU".into()),
            cpus_online: Some("0-2".into()),
            virtualised: Some(false),
            system_vendor: None,
            product_name: None,
            bios: None,
            microcode: None,
            clocksource: Some("tsc".into()),
            cmdline: None,
            boot_params: BootParams::default(),
        },
        started_unix_s: 1.0,
        interrupted: false,
        probes: vec![ProbeResult {
            probe: ProbeKind::Timer,
            status: Status::Ok,
            interval_ns: Some(1_000_000),
            elapsed: Duration::from_millis(5),
            cpus: vec![cpu(1, a), cpu(2, b)],
            all,
            note: None,
            explain: None,
        }],
    }
}
