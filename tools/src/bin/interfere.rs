//! Makes known interference on one CPU, for tests of `cpushield measure
//! --explain` (which must name what delayed a latency sample).
//!
//! `interfere spin --cpu N --prio P --every-ms M --spin-us S` starts one
//! thread pinned to CPU N, named `cs-spinner` (its `comm`, what the
//! kernel's trace events print), at SCHED_FIFO priority P (P = 0: SCHED_OTHER).
//! It wakes every M ms (`clock_nanosleep` on an absolute CLOCK_MONOTONIC
//! deadline) and spins S µs reading CLOCK_MONOTONIC, so a measuring thread
//! of a lower FIFO priority on CPU N is held off for up to S µs every M ms.
//! `--name NAME` names it otherwise, `\n` in NAME standing for a newline:
//! a task names itself anything, and `--explain` must still charge its
//! time to it (`--name 'qxhog\n'`, or a name that looks like trace text).
//! It prints `ready TID` once the thread runs with its CPU, policy and name
//! set, and runs until it is killed or its standard input closes. Setting
//! the policy or the CPU fails loudly (exit 1): a test must not go on with
//! an interferer that does not interfere.
//!
//! `interfere time-reads FILE...` reads each file whole and prints the
//! microseconds each read took beside its path (`-` where it could not be
//! read), slowest first: the probes use it to find which `/proc` file is
//! slow to read while a real-time loop holds a CPU.
//!
//! The real-kernel test bed uses it in tests/vm/scenarios/19-explain.sh.
//! Build static for the guest:
//! `RUSTFLAGS='-C target-feature=+crt-static' cargo build --release
//! -p cpushield-tools --bin interfere --target x86_64-unknown-linux-gnu`

use std::io::{Read, Write};

use cpushield::sys::syscalls::{self, Policy};
use cpushield::CpuSet;

/// The spinning thread's name (`comm`) unless `--name` gives another; at
/// most 15 bytes.
const NAME: &str = "cs-spinner";

/// What `spin` was asked for.
struct Spin {
    cpu: u32,
    prio: i32,
    every_ns: u64,
    spin_ns: u64,
    name: String,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("spin") => spin(parse_spin(&args[1..])),
        Some("time-reads") => time_reads(&args[1..]),
        _ => usage("a mode is needed"),
    }
}

fn parse_spin(args: &[String]) -> Spin {
    let (mut cpu, mut prio, mut every_ms, mut spin_us) = (None, None, None, None);
    let mut name = NAME.to_string();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it.next().map(String::as_str).unwrap_or("");
        if flag == "--name" {
            name = value.replace("\\n", "\n");
            if name.is_empty() || name.len() > 15 {
                usage("--name takes 1 to 15 bytes (the kernel's limit for a task name)");
            }
            continue;
        }
        let slot = match flag.as_str() {
            "--cpu" => &mut cpu,
            "--prio" => &mut prio,
            "--every-ms" => &mut every_ms,
            "--spin-us" => &mut spin_us,
            other => usage(&format!("unknown option {other}")),
        };
        *slot = Some(
            value
                .parse::<u64>()
                .unwrap_or_else(|_| usage(&format!("{flag} takes a whole number, not '{value}'"))),
        );
    }
    let need =
        |v: Option<u64>, name: &str| v.unwrap_or_else(|| usage(&format!("{name} is needed")));
    let spin = Spin {
        cpu: need(cpu, "--cpu") as u32,
        prio: need(prio, "--prio") as i32,
        every_ns: need(every_ms, "--every-ms") * 1_000_000,
        spin_ns: need(spin_us, "--spin-us") * 1_000,
        name,
    };
    if spin.prio > 99 {
        usage("--prio is 0 (SCHED_OTHER) or a SCHED_FIFO priority 1..99");
    }
    if spin.every_ns == 0 || spin.spin_ns >= spin.every_ns {
        usage("--every-ms must be at least 1 and longer than --spin-us");
    }
    spin
}

fn spin(s: Spin) {
    std::thread::Builder::new()
        .name(s.name.clone())
        .spawn(move || spinner(&s))
        .unwrap_or_else(|e| fail(&format!("start the spinning thread: {e}")));
    // Hold until stdin closes (or a signal ends us); the thread ends with us.
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}

/// The spinning thread: its CPU, policy and name, then the loop.
fn spinner(s: &Spin) {
    let cpus: CpuSet = [s.cpu].into_iter().collect();
    syscalls::set_affinity(0, &cpus)
        .unwrap_or_else(|e| fail(&format!("pin to CPU {}: {e}", s.cpu)));
    let policy = if s.prio == 0 {
        Policy::Other
    } else {
        Policy::Fifo(s.prio)
    };
    syscalls::set_scheduler(0, policy).unwrap_or_else(|e| fail(&format!("set {policy:?}: {e}")));
    // std names the thread too, but set it here as well: that is the name
    // the kernel reports, and a failure must not pass unseen.
    syscalls::set_thread_name(&s.name).unwrap_or_else(|e| fail(&format!("name the thread: {e}")));
    println!("ready {}", syscalls::gettid());
    std::io::stdout().flush().ok();

    let mut next = syscalls::monotonic_ns() + s.every_ns;
    loop {
        // EINTR: sleep again to the same deadline.
        while syscalls::sleep_until_monotonic_ns(next).is_err() {}
        let start = syscalls::monotonic_ns();
        while syscalls::monotonic_ns() - start < s.spin_ns {
            std::hint::spin_loop();
        }
        next += s.every_ns;
        // Delayed by more than a period (e.g. preempted): skip the missed
        // wake-ups rather than spin back to back.
        let now = syscalls::monotonic_ns();
        if next <= now {
            next = now + s.every_ns;
        }
    }
}

fn time_reads(paths: &[String]) {
    let mut times: Vec<(Option<u64>, &String)> = paths
        .iter()
        .map(|p| {
            let start = syscalls::monotonic_ns();
            let ok = std::fs::read(p).is_ok();
            (ok.then(|| (syscalls::monotonic_ns() - start) / 1_000), p)
        })
        .collect();
    times.sort_by_key(|t| std::cmp::Reverse(t.0));
    for (us, path) in times {
        match us {
            Some(us) => println!("{us:>10} {path}"),
            None => println!("{:>10} {path}", "-"),
        }
    }
}

fn fail(what: &str) -> ! {
    eprintln!("interfere: {what}");
    std::process::exit(1);
}

fn usage(why: &str) -> ! {
    eprintln!("interfere: {why}");
    eprintln!("usage: interfere spin --cpu N --prio P --every-ms M --spin-us S [--name NAME]");
    eprintln!("       interfere time-reads FILE...");
    std::process::exit(2);
}
