//! The built-in load, for machines without stress-ng: each worker is a
//! process of our own binary, started as `cpushield __load-worker KIND ...`
//! (a hidden subcommand that `main` hands to [`worker_main`]), doing the
//! same work as the stress-ng stressor of that name until it is killed.
//!
//! Processes rather than threads, like stress-ng: the scheduler sees N
//! independent tasks, and the load's process group holds all of them.
//!
//! A worker also ends by itself when its parent goes away (it was orphaned:
//! whoever started it can no longer stop it) or when its optional time
//! limit passes, so a crash of the parent cannot leave load running.

use std::fs;
use std::hint::black_box;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::{Sizes, Stressor};
use crate::sys::syscalls;

/// The hidden subcommand that runs one worker.
pub const WORKER_SUBCOMMAND: &str = "__load-worker";

/// How one worker process is told what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerArgs {
    /// Which loop to run.
    pub stressor: Stressor,
    /// Bytes per round: the allocation (vm) or the file size (hdd).
    pub bytes: u64,
    /// Where the hdd worker writes its file.
    pub temp_dir: Option<PathBuf>,
    /// End by itself after this long, even if nobody stops it.
    pub max_duration: Option<Duration>,
}

impl WorkerArgs {
    /// The worker's arguments for `stressor` with the given sizes.
    pub fn new(
        stressor: Stressor,
        sizes: &Sizes,
        temp_dir: Option<PathBuf>,
        max_duration: Option<Duration>,
    ) -> WorkerArgs {
        let bytes = match stressor {
            Stressor::Vm | Stressor::Stream => sizes.vm_bytes,
            Stressor::Hdd => sizes.hdd_bytes,
            Stressor::Cpu | Stressor::Io | Stressor::Switch | Stressor::Sock => 0,
        };
        let temp_dir = if stressor == Stressor::Hdd {
            temp_dir
        } else {
            None
        };
        WorkerArgs {
            stressor,
            bytes,
            temp_dir,
            max_duration,
        }
    }

    /// The command-line arguments after the subcommand name.
    pub fn to_args(&self) -> Vec<String> {
        let mut a = vec![self.stressor.to_string()];
        if self.bytes > 0 {
            a.push("--bytes".into());
            a.push(self.bytes.to_string());
        }
        if let Some(d) = &self.temp_dir {
            a.push("--temp-dir".into());
            a.push(d.display().to_string());
        }
        if let Some(t) = self.max_duration {
            a.push("--max-seconds".into());
            a.push(t.as_secs().max(1).to_string());
        }
        a
    }

    /// Parses what [`WorkerArgs::to_args`] produced.
    pub fn parse(args: &[String]) -> Result<WorkerArgs, String> {
        let mut it = args.iter();
        let stressor: Stressor = it
            .next()
            .ok_or("missing worker kind")?
            .parse()
            .map_err(|e| format!("{e}"))?;
        let mut w = WorkerArgs {
            stressor,
            bytes: 0,
            temp_dir: None,
            max_duration: None,
        };
        while let Some(flag) = it.next() {
            let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
            let number = || {
                value
                    .parse::<u64>()
                    .map_err(|_| format!("{flag}: not a number: {value:?}"))
            };
            match flag.as_str() {
                "--bytes" => w.bytes = number()?,
                "--temp-dir" => w.temp_dir = Some(PathBuf::from(value)),
                "--max-seconds" => w.max_duration = Some(Duration::from_secs(number()?)),
                _ => return Err(format!("unknown option {flag:?}")),
            }
        }
        if matches!(w.stressor, Stressor::Vm | Stressor::Hdd | Stressor::Stream) && w.bytes == 0 {
            return Err(format!("{} worker needs --bytes", w.stressor));
        }
        if w.stressor == Stressor::Hdd && w.temp_dir.is_none() {
            return Err("hdd worker needs --temp-dir".into());
        }
        Ok(w)
    }
}

/// Entry point of a worker process: `args` are the arguments after
/// [`WORKER_SUBCOMMAND`]. Runs until killed (or orphaned, or out of time)
/// and returns the process exit code.
pub fn worker_main(args: &[String]) -> i32 {
    match WorkerArgs::parse(args) {
        Ok(w) => match run(&w) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("cpushield load worker ({}): {e}", w.stressor);
                1
            }
        },
        Err(e) => {
            eprintln!("cpushield load worker: {e}");
            2
        }
    }
}

/// Tells a worker loop when to end: parent gone or time up.
struct StopCheck {
    parent: i32,
    deadline: Option<Instant>,
}

impl StopCheck {
    fn now() -> StopCheck {
        StopCheck {
            parent: syscalls::getppid(),
            deadline: None,
        }
    }

    fn should_stop(&self) -> bool {
        syscalls::getppid() != self.parent || self.deadline.is_some_and(|d| Instant::now() >= d)
    }
}

/// Runs the worker loop of `w` in the calling process until it should stop.
pub fn run(w: &WorkerArgs) -> std::io::Result<()> {
    // Name the process after its work (`cpushield-vm`), as stress-ng does.
    let _ = syscalls::set_thread_name(&format!("cpushield-{}", w.stressor));
    let mut stop = StopCheck::now();
    stop.deadline = w.max_duration.map(|d| Instant::now() + d);
    match w.stressor {
        Stressor::Cpu => cpu_loop(&stop),
        Stressor::Io => {
            while !stop.should_stop() {
                syscalls::sync();
            }
        }
        Stressor::Vm => vm_loop(&stop, w.bytes as usize),
        Stressor::Stream => stream_loop(&stop, w.bytes as usize),
        Stressor::Switch => switch_loop(&stop)?,
        Stressor::Sock => sock_loop(&stop)?,
        Stressor::Hdd => {
            let dir = w.temp_dir.clone().unwrap_or_else(std::env::temp_dir);
            hdd_loop(&stop, &dir, w.bytes)?;
        }
    }
    Ok(())
}

/// Square roots, like stress-ng's `--cpu-method sqrt`.
fn cpu_loop(stop: &StopCheck) {
    let mut x = 0.0f64;
    let mut i: u64 = 0;
    while !stop.should_stop() {
        for _ in 0..(1 << 16) {
            i = i.wrapping_add(1);
            x += black_box(i as f64).sqrt();
        }
        black_box(x);
    }
}

/// Allocate, touch every page, free: the classic `stress --vm` loop.
fn vm_loop(stop: &StopCheck, bytes: usize) {
    const PAGE: usize = 4096;
    while !stop.should_stop() {
        // A zeroed allocation of this size is fresh anonymous memory: each
        // write below faults in one page.
        let mut buf = vec![0u8; bytes];
        for i in (0..bytes).step_by(PAGE) {
            buf[i] = 1;
        }
        black_box(&buf);
        drop(buf);
    }
}

/// The STREAM triad (`a = b + q·c`) over three arrays of `bytes` in all,
/// again and again: every pass reads two arrays and writes one, each far
/// larger than any last-level cache (the same size as a vm worker's, up to
/// 256 MiB), so the shared cache holds nothing of anyone else's for long
/// and the memory bus stays busy, as stress-ng's `--stream` does.
fn stream_loop(stop: &StopCheck, bytes: usize) {
    let n = (bytes / (3 * std::mem::size_of::<f64>())).max(1);
    let mut a = vec![0.0f64; n];
    let b = vec![1.0f64; n];
    let c = vec![2.0f64; n];
    let q = black_box(3.0f64);
    while !stop.should_stop() {
        for ((a, b), c) in a.iter_mut().zip(&b).zip(&c) {
            *a = b + q * c;
        }
        black_box(&a);
    }
}

/// A byte passed to a second thread through one pipe and back through
/// another, again and again: each pass wakes the other side, so the pair
/// switches context as fast as the scheduler allows (stress-ng's
/// `--switch`, hackbench's pattern). The echo thread ends when the pipes
/// close.
fn switch_loop(stop: &StopCheck) -> std::io::Result<()> {
    use std::io::Read;
    let (mut to_echo_r, mut to_echo_w) = std::io::pipe()?;
    let (mut back_r, mut back_w) = std::io::pipe()?;
    let echo = std::thread::spawn(move || {
        let mut b = [0u8; 1];
        while to_echo_r.read_exact(&mut b).is_ok() && back_w.write_all(&b).is_ok() {}
    });
    let mut b = [0u8; 1];
    'run: while !stop.should_stop() {
        for _ in 0..1024 {
            if to_echo_w.write_all(&b).is_err() || back_r.read_exact(&mut b).is_err() {
                break 'run;
            }
        }
    }
    drop(to_echo_w);
    let _ = echo.join();
    Ok(())
}

/// A TCP connection over loopback: 4 KiB sent, echoed back by a second
/// thread, read, again and again (stress-ng's `--sock`): the network
/// stack's softirqs, wake-ups and copies on the housekeeping CPUs.
fn sock_loop(stop: &StopCheck) -> std::io::Result<()> {
    use std::io::Read;
    use std::net::{Ipv4Addr, TcpListener, TcpStream};
    const MESSAGE: usize = 4096;
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    let mut client = TcpStream::connect(listener.local_addr()?)?;
    let (mut server, _) = listener.accept()?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    let echo = std::thread::spawn(move || {
        let mut buf = [0u8; MESSAGE];
        while server.read_exact(&mut buf).is_ok() && server.write_all(&buf).is_ok() {}
    });
    let mut buf = [0x5au8; MESSAGE];
    'run: while !stop.should_stop() {
        for _ in 0..64 {
            if client.write_all(&buf).is_err() || client.read_exact(&mut buf).is_err() {
                break 'run;
            }
        }
    }
    let _ = client.shutdown(std::net::Shutdown::Both);
    let _ = echo.join();
    Ok(())
}

/// Write a file of `bytes` in 64 KiB chunks, then unlink it: `stress --hdd`.
fn hdd_loop(stop: &StopCheck, dir: &std::path::Path, bytes: u64) -> std::io::Result<()> {
    const CHUNK: usize = 64 * 1024;
    let chunk = vec![0x5au8; CHUNK];
    let path = dir.join(format!("cpushield-hdd-{}", std::process::id()));
    while !stop.should_stop() {
        let mut f = fs::File::create(&path)?;
        let mut written = 0u64;
        while written < bytes && !stop.should_stop() {
            let n = (bytes - written).min(CHUNK as u64) as usize;
            f.write_all(&chunk[..n])?;
            written += n as u64;
        }
        drop(f);
        fs::remove_file(&path)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn args_round_trip() {
        let sizes = Sizes {
            vm_bytes: 1 << 20,
            hdd_bytes: 3 << 20,
        };
        for st in [
            Stressor::Cpu,
            Stressor::Io,
            Stressor::Vm,
            Stressor::Hdd,
            Stressor::Stream,
        ] {
            let w = WorkerArgs::new(
                st,
                &sizes,
                Some(PathBuf::from("/t")),
                Some(Duration::from_secs(9)),
            );
            assert_eq!(WorkerArgs::parse(&w.to_args()).unwrap(), w, "{st}");
        }
        let hdd = WorkerArgs::new(Stressor::Hdd, &sizes, Some("/t".into()), None);
        assert_eq!(
            hdd.to_args(),
            s(&["hdd", "--bytes", "3145728", "--temp-dir", "/t"])
        );
        let cpu = WorkerArgs::new(Stressor::Cpu, &sizes, Some("/t".into()), None);
        assert_eq!(cpu.to_args(), s(&["cpu"]));
        let stream = WorkerArgs::new(Stressor::Stream, &sizes, Some("/t".into()), None);
        assert_eq!(stream.to_args(), s(&["stream", "--bytes", "1048576"]));
    }

    #[test]
    fn rejects_bad_args() {
        assert!(WorkerArgs::parse(&[]).is_err());
        assert!(WorkerArgs::parse(&s(&["disk"])).is_err());
        assert!(WorkerArgs::parse(&s(&["vm"])).is_err());
        assert!(WorkerArgs::parse(&s(&["stream"])).is_err());
        assert!(WorkerArgs::parse(&s(&["hdd", "--bytes", "10"])).is_err());
        assert!(WorkerArgs::parse(&s(&["cpu", "--bytes"])).is_err());
        assert!(WorkerArgs::parse(&s(&["cpu", "--bytes", "x"])).is_err());
        assert!(WorkerArgs::parse(&s(&["cpu", "--what", "1"])).is_err());
    }

    #[test]
    fn loops_end_when_time_is_up() {
        let dir = tempfile::tempdir().unwrap();
        for st in [Stressor::Cpu, Stressor::Vm, Stressor::Hdd, Stressor::Stream] {
            let w = WorkerArgs {
                stressor: st,
                bytes: 256 * 1024,
                temp_dir: Some(dir.path().to_path_buf()),
                max_duration: Some(Duration::from_millis(30)),
            };
            let t = Instant::now();
            run(&w).unwrap();
            assert!(t.elapsed() < Duration::from_secs(5), "{st}");
        }
        // hdd unlinks its file after each round.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
