//! How long `on` + `off` take on a fixture of 10,000 threads and 500 IRQs,
//! phase by phase. Prints figures; asserts nothing about time (target: on +
//! off well under a second).
//!
//! The fixture emulates each kernel call with file operations; the line
//! `fixture emulation` is that time (a real kernel does each in one
//! syscall), summed over the threads that make the calls: task changes and
//! /proc reads are spread over the CPUs, so it can exceed the wall time.
//!
//! The per-thread work of `on` + `off` is also timed on this machine's real
//! kernel, with 10,000 idle threads of the benchmark's own: the reads of
//! every thread (the snapshot, then the sweep for tasks forked meanwhile)
//! and an affinity change and restore of the benchmark's own threads only
//! (nothing else of the machine is written). In the real-kernel guest
//! (tests/vm scenario 12-scale) the reads are most of `on`.
//!
//! Run: `cargo bench --bench shield_scale` (`-- --rounds N` for more rounds,
//! `-- --threads N` for another size, `-- --fixture-only` to skip the
//! live-kernel reads).

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use cpushield::shield::snapshot::Snapshot;
use cpushield::shield::{self, request::Request, Timings};
use cpushield::sys::fixture::{self, CgroupLayout, FixtureBuilder, FixtureConfig, FixtureTask};
use cpushield::sys::Sys;
use cpushield::CpuSet;

/// Threads of the fixture and of the live part, unless `--threads N`.
const THREADS: i32 = 10_000;
const THREADS_PER_PROCESS: i32 = 10;
const IRQS: u32 = 500;
/// On + off should take well under this.
const TARGET: Duration = Duration::from_secs(1);

fn ms(d: Duration) -> String {
    format!("{:7.1} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let option = |name: &str| {
        std::env::args()
            .skip_while(|a| a != name)
            .nth(1)
            .and_then(|n| n.parse::<usize>().ok())
    };
    let rounds = option("--rounds").unwrap_or(1);
    let threads = option("--threads").map_or(THREADS, |n| n as i32);
    println!("load average: {}", load_average());
    for round in 1..=rounds {
        for layout in [CgroupLayout::V2, CgroupLayout::V1] {
            run(layout, round, threads);
        }
    }
    if !std::env::args().any(|a| a == "--fixture-only") {
        live_reads(rounds, threads);
    }
    println!("load average: {}", load_average());
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn run(layout: CgroupLayout, round: usize, threads: i32) {
    let name = match layout {
        CgroupLayout::V2 => "v2",
        _ => "v1",
    };
    // A RAM file system, like /proc and /sys: measures our code, not ext4.
    let dir = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .expect("temp dir");
    let sys = FixtureBuilder::new(dir.path(), 8)
        .layout(layout)
        .config(FixtureConfig::default())
        .build()
        .expect("fixture");
    let all = CpuSet::first_n(8);
    let mut pid = 1000;
    while pid < 1000 + threads {
        let tasks: Vec<FixtureTask> = (0..THREADS_PER_PROCESS)
            .map(|i| FixtureTask {
                name: format!("worker{i}"),
                flags: 0,
                cpus: all.clone(),
            })
            .collect();
        fixture::add_process(&sys, pid, &tasks).expect("process");
        pid += THREADS_PER_PROCESS;
    }
    for irq in 0..IRQS {
        fixture::add_irq(&sys, irq, &format!("dev{irq}"), "0-7").expect("irq");
    }
    let req = Request {
        cpus: CpuSet::parse_list("4-7").unwrap(),
        ..Default::default()
    };
    let stop = AtomicBool::new(false);
    let fx = sys.fixture().expect("a fixture root");
    let mut t = Timings::default();
    let t0 = Instant::now();
    let on = shield::on_timed(&sys, &req, false, &stop, &mut t).expect("on");
    let t_on = t0.elapsed();
    let emu_on = fx.emulation_time();
    let t1 = Instant::now();
    let off = shield::off_timed(&sys, &mut t).expect("off");
    let t_off = t1.elapsed();
    let emu_off = fx.emulation_time() - emu_on;
    assert!(off.undone.failed.is_empty(), "{:?}", off.undone.failed);
    let total = t_on + t_off;
    println!(
        "{name} (round {round}) {threads} threads, {IRQS} IRQs: on {} ({} changes), off {} ({} restored), total {} ({} the {} target)",
        ms(t_on),
        on.changed,
        ms(t_off),
        off.undone.restored,
        ms(total),
        if total < TARGET { "under" } else { "OVER" },
        ms(TARGET).trim(),
    );
    let rows = [
        ("on: snapshot", t.snapshot),
        ("on: plan", t.plan),
        ("on: journal", t.journal),
        ("on: apply", t.apply),
        ("on: sweep (snapshot + apply)", t.sweep),
        (
            "on: rest",
            t_on.saturating_sub(t.snapshot + t.plan + t.journal + t.apply + t.sweep),
        ),
        ("off: read journal", t.read_journal),
        ("off: undo writes/cgroups/moves", t.undo_writes),
        ("off: undo affinities", t.undo_affinities),
        (
            "off: rest",
            t_off.saturating_sub(t.read_journal + t.undo_writes + t.undo_affinities),
        ),
    ];
    for (label, d) in rows {
        println!("    {label:<32} {}", ms(d));
    }
    println!(
        "    journal segments: {}; fixture emulation (summed over threads): on {}, off {}; CPUs used: {}",
        t.segments,
        ms(emu_on).trim(),
        ms(emu_off).trim(),
        std::thread::available_parallelism().map_or(1, |n| n.get()),
    );
}

/// Times, on the running kernel, the per-thread work of `on` + `off` with
/// `threads` idle threads of the benchmark's own added: the snapshot, an
/// affinity change of each of its own threads (what `on` makes of every
/// thread), the re-read of the sweep, and the check-and-restore of `off`
/// (get, then set). Only the benchmark's own threads are changed; nothing
/// of the machine's is written. Not included: the journal (timed on the
/// fixture) and the cgroup and IRQ writes, a few hundred at most.
fn live_reads(rounds: usize, threads: i32) {
    let park = std::sync::Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    // Each thread costs two mappings (stack and guard page): past some
    // 32,000 threads vm.max_map_count (65,530 by default) refuses more.
    let mut idle = Vec::new();
    for _ in 0..threads {
        let park = park.clone();
        let tx = tx.clone();
        let spawned = std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || {
                let _ = tx.send(cpushield::sys::syscalls::gettid());
                while !park.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::park();
                }
            });
        match spawned {
            Ok(handle) => idle.push(handle),
            Err(e) => {
                println!(
                    "live kernel: started {} of {threads} idle threads, then: {e}",
                    idle.len()
                );
                break;
            }
        }
    }
    drop(tx);
    let mut own: Vec<i32> = rx.iter().take(idle.len()).collect();
    own.sort_unstable();
    let sys = Sys::live();
    for round in 1..=rounds {
        let t0 = Instant::now();
        let snap = match Snapshot::read(&sys, &cpushield::shield::tuned_overlap) {
            Ok(snap) => snap,
            Err(e) => {
                println!("live kernel: cannot read a snapshot here ({e}); skipped");
                break;
            }
        };
        let t_snap = t0.elapsed();
        let mine: Vec<_> = snap
            .threads
            .iter()
            .filter(|t| own.binary_search(&t.tid).is_ok())
            .collect();
        // Off one CPU, as `on` moves threads off the shield.
        let shield = snap.online.last();
        let t1 = Instant::now();
        let mut changed = 0;
        for t in &mine {
            let away: CpuSet = t
                .cpus_allowed
                .iter()
                .filter(|&c| Some(c) != shield)
                .collect();
            if !away.is_empty() && sys.set_affinity(t.tid, &away).is_ok() {
                changed += 1;
            }
        }
        let t_set = t1.elapsed();
        let t2 = Instant::now();
        let again = Snapshot::reread(&sys, &snap).expect("re-read");
        let t_reread = t2.elapsed();
        let t3 = Instant::now();
        let mut restored = 0;
        for t in &mine {
            if sys.affinity(t.tid).is_ok_and(|now| now != t.cpus_allowed)
                && sys.set_affinity(t.tid, &t.cpus_allowed).is_ok()
            {
                restored += 1;
            }
        }
        let t_restore = t3.elapsed();
        println!(
            "live kernel (round {round}) {} threads: snapshot {}, set {changed} own threads' affinity {}, re-read {}, check and restore {restored} {}; sum {}",
            again.threads.len(),
            ms(t_snap).trim(),
            ms(t_set).trim(),
            ms(t_reread).trim(),
            ms(t_restore).trim(),
            ms(t_snap + t_set + t_reread + t_restore).trim(),
        );
    }
    park.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in idle {
        t.thread().unpark();
        t.join().expect("idle thread ends");
    }
}
