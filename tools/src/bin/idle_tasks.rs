//! Populates a machine with idle tasks for scale tests: `idle_tasks PROCS
//! THREADS` starts PROCS processes of THREADS threads each (the main thread
//! counts), prints `ready PIDS...` once every thread exists, and holds them
//! until its standard input closes or it is killed; its children end with
//! it. The real-kernel test bed uses it to time `on` + `off` with 10,000
//! threads (tests/vm/scenarios/12-scale.sh).
//!
//! `idle_tasks --affinities PID...` prints, for every thread of those
//! processes, how many have each affinity (`COUNT CPULIST`, from
//! `sched_getaffinity`, straight from the kernel): what the scenario checks
//! after `on` and `off`, in well under a second where reading 10,000
//! `/proc/PID/task/TID/status` files takes 15 s under TCG.
//!
//! Build static for the guest:
//! `RUSTFLAGS='-C target-feature=+crt-static' cargo build --release
//! -p cpushield-tools --bin idle_tasks --target x86_64-unknown-linux-gnu`

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};

/// Stack of each idle thread: it only blocks, so a small one keeps 10,000
/// threads within a small guest's memory.
const STACK: usize = 64 * 1024;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--affinities") {
        affinities(&args[2..]);
        return;
    }
    if args.get(1).map(String::as_str) == Some("--child") {
        let threads = number(args.get(2), "THREADS");
        child(threads);
        return;
    }
    let (procs, threads) = (number(args.get(1), "PROCS"), number(args.get(2), "THREADS"));
    if threads == 0 {
        eprintln!("idle_tasks: THREADS must be at least 1 (the main thread counts)");
        std::process::exit(2);
    }
    let me = std::env::current_exe().expect("own executable");
    let mut children = Vec::with_capacity(procs);
    for _ in 0..procs {
        let mut c = Command::new(&me)
            .args(["--child", &threads.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start a child process");
        // One line once all of its threads exist.
        let mut line = String::new();
        BufReader::new(c.stdout.take().expect("piped stdout"))
            .read_line(&mut line)
            .expect("child readiness");
        children.push(c);
    }
    let pids: Vec<String> = children.iter().map(|c| c.id().to_string()).collect();
    println!("ready {}", pids.join(" "));
    std::io::stdout().flush().ok();
    // Hold until stdin closes (or a signal ends us), then end the children.
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    for mut c in children {
        drop(c.stdin.take());
        let _ = c.wait();
    }
}

/// One process: THREADS-1 extra threads that block forever, then a
/// readiness line, then wait for the parent's pipe to close.
fn child(threads: usize) {
    for _ in 1..threads {
        std::thread::Builder::new()
            .stack_size(STACK)
            .spawn(|| loop {
                std::thread::park();
            })
            .expect("start an idle thread");
    }
    println!("ok");
    std::io::stdout().flush().ok();
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}

/// Prints `COUNT CPULIST` for each distinct affinity among the threads of
/// `pids`; a thread that ended meanwhile is left out. Exits 1 when a
/// process cannot be read at all.
fn affinities(pids: &[String]) {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for pid in pids {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap_or_else(|e| {
            eprintln!("idle_tasks: threads of process {pid}: {e}");
            std::process::exit(1);
        });
        for task in tasks.flatten() {
            let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
                continue;
            };
            let Ok(set) = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(tid)) else {
                continue;
            };
            let cpus: Vec<String> = (0..nix::sched::CpuSet::count())
                .filter(|&c| set.is_set(c).unwrap_or(false))
                .map(|c| c.to_string())
                .collect();
            *counts.entry(cpus.join(",")).or_default() += 1;
        }
    }
    for (cpus, n) in counts {
        println!("{n} {cpus}");
    }
}

fn number(arg: Option<&String>, name: &str) -> usize {
    arg.and_then(|a| a.parse().ok()).unwrap_or_else(|| {
        eprintln!("usage: idle_tasks PROCS THREADS  ({name} must be a whole number)");
        std::process::exit(2);
    })
}
