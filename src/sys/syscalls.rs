//! Syscall wrappers: the only module of cpushield that may use `unsafe`.
//!
//! Each wrapper is small, takes and returns safe types, and maps failures
//! to `std::io::Error` carrying the errno. Prefer `nix` where it has the
//! call; fall back to `libc` only where it does not.

use std::io;

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet as NixCpuSet};
use nix::unistd::Pid;

use crate::cpulist::CpuSet;

fn to_io(e: nix::Error) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

/// `sched_getaffinity(tid)`.
pub fn get_affinity(tid: i32) -> io::Result<CpuSet> {
    let set = sched_getaffinity(Pid::from_raw(tid)).map_err(to_io)?;
    Ok((0..NixCpuSet::count() as u32)
        .filter(|&c| set.is_set(c as usize).unwrap_or(false))
        .collect())
}

/// `sched_setaffinity(tid, cpus)`.
pub fn set_affinity(tid: i32, cpus: &CpuSet) -> io::Result<()> {
    let mut set = NixCpuSet::new();
    for cpu in cpus.iter() {
        set.set(cpu as usize).map_err(to_io)?;
    }
    sched_setaffinity(Pid::from_raw(tid), &set).map_err(to_io)
}

/// Scheduling policy for [`set_scheduler`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// SCHED_OTHER (priority 0).
    Other,
    /// SCHED_FIFO with a priority 1..=99.
    Fifo(i32),
    /// SCHED_RR with a priority 1..=99.
    RoundRobin(i32),
}

/// `sched_setscheduler(tid, policy, priority)`; tid 0 is the calling thread.
pub fn set_scheduler(tid: i32, policy: Policy) -> io::Result<()> {
    let (pol, prio) = match policy {
        Policy::Other => (libc::SCHED_OTHER, 0),
        Policy::Fifo(p) => (libc::SCHED_FIFO, p),
        Policy::RoundRobin(p) => (libc::SCHED_RR, p),
    };
    let param = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: `param` is a valid, initialised sched_param that outlives the call.
    let rc = unsafe { libc::sched_setscheduler(tid, pol, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The calling thread's kernel thread id.
pub fn gettid() -> i32 {
    nix::unistd::gettid().as_raw()
}

/// Makes `cmd` set the CPU affinity of the child to `cpus` after `fork` and
/// before `exec`, so the child and everything it forks start confined (no
/// window in which an early child could run elsewhere).
///
/// The kernel intersects the mask with the caller's cpuset; a mask entirely
/// outside it fails the spawn with EINVAL, a partly outside one is silently
/// narrowed: callers read the affinity back after spawning.
pub fn set_affinity_before_exec(cmd: &mut std::process::Command, cpus: &CpuSet) -> io::Result<()> {
    use std::os::unix::process::CommandExt;
    let mut set = NixCpuSet::new();
    for cpu in cpus.iter() {
        set.set(cpu as usize).map_err(to_io)?;
    }
    // SAFETY: the closure runs in the forked child before exec, where only
    // async-signal-safe work is allowed. It makes one raw syscall
    // (sched_setaffinity) on a set that was built before the fork and is
    // moved in by value, and allocates nothing (`to_io` only wraps an errno).
    unsafe {
        cmd.pre_exec(move || sched_setaffinity(Pid::from_raw(0), &set).map_err(to_io));
    }
    Ok(())
}

/// Sends `signal` to every process of the process group `pgid` (`killpg`).
pub fn signal_process_group(pgid: i32, signal: nix::sys::signal::Signal) -> io::Result<()> {
    nix::sys::signal::killpg(Pid::from_raw(pgid), signal).map_err(to_io)
}

/// Free bytes for unprivileged users on the file system holding `path` (`statvfs`).
pub fn available_bytes(path: &std::path::Path) -> io::Result<u64> {
    let st = nix::sys::statvfs::statvfs(path).map_err(to_io)?;
    Ok(st.blocks_available() as u64 * st.fragment_size() as u64)
}

/// The parent process id of the caller (`getppid`).
pub fn getppid() -> i32 {
    nix::unistd::getppid().as_raw()
}

/// Flushes all file system buffers (`sync`).
pub fn sync() {
    nix::unistd::sync();
}

/// Sets the calling thread's name (`comm`, as `ps` shows it; the kernel
/// keeps at most 15 bytes).
pub fn set_thread_name(name: &str) -> io::Result<()> {
    let c = std::ffi::CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    nix::sys::prctl::set_name(&c).map_err(to_io)
}
