//! Syscall wrappers: the only module of cpushield that may use `unsafe`.
//!
//! Each wrapper is small, takes and returns safe types, and maps failures
//! to `std::io::Error` carrying the errno. Prefer `nix` where it has the
//! call; fall back to `libc` only where it does not.

#![allow(unsafe_code)]

use std::io;

use nix::unistd::Pid;

use crate::cpulist::{CpuSet, MAX_CPUS};

fn to_io(e: nix::Error) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

/// A kernel CPU mask as the affinity syscalls take it: 64-bit words, CPU
/// `n` at bit `n % 64` of word `n / 64`. Sized for every CPU cpushield
/// accepts ([`MAX_CPUS`]), not glibc's 1024-CPU `cpu_set_t`: a machine
/// with more CPUs than that would otherwise lose the high ones.
struct RawMask(Vec<u64>);

impl RawMask {
    const WORDS: usize = (MAX_CPUS as usize).div_ceil(64);

    fn empty() -> RawMask {
        RawMask(vec![0; Self::WORDS])
    }

    fn of(cpus: &CpuSet) -> RawMask {
        let mut mask = RawMask::empty();
        for cpu in cpus.iter().filter(|&c| c < MAX_CPUS) {
            mask.0[cpu as usize / 64] |= 1 << (cpu % 64);
        }
        mask
    }

    fn cpus(&self, bytes: usize) -> CpuSet {
        let words = (bytes / 8).min(self.0.len());
        let mut cpus = CpuSet::new();
        for (w, &word) in self.0[..words].iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                cpus.insert(w as u32 * 64 + bits.trailing_zeros());
                bits &= bits - 1;
            }
        }
        cpus
    }

    fn byte_len(&self) -> usize {
        self.0.len() * 8
    }
}

/// `sched_getaffinity(tid)`, for any CPU up to [`MAX_CPUS`].
pub fn get_affinity(tid: i32) -> io::Result<CpuSet> {
    let mut mask = RawMask::empty();
    // SAFETY: the kernel writes at most `byte_len` bytes into the buffer,
    // which is that long and lives across the call; it returns the number
    // of bytes written or -1 with errno.
    let written = unsafe {
        libc::syscall(
            libc::SYS_sched_getaffinity,
            tid,
            mask.byte_len(),
            mask.0.as_mut_ptr(),
        )
    };
    if written < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(mask.cpus(written as usize))
}

/// `sched_setaffinity(tid, cpus)`, for any CPU up to [`MAX_CPUS`].
pub fn set_affinity(tid: i32, cpus: &CpuSet) -> io::Result<()> {
    set_affinity_raw(tid, &RawMask::of(cpus))
}

fn set_affinity_raw(tid: i32, mask: &RawMask) -> io::Result<()> {
    // SAFETY: the kernel reads `byte_len` bytes of the buffer, which is
    // that long and lives across the call. No allocation: safe after fork.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_setaffinity,
            tid,
            mask.byte_len(),
            mask.0.as_ptr(),
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `mount("cgroup2", target, "cgroup2", nosuid|nodev|noexec|relatime)`:
/// the cgroup v2 hierarchy, with the options systemd uses.
pub fn mount_cgroup2(target: &std::path::Path) -> io::Result<()> {
    use nix::mount::{mount, MsFlags};
    mount(
        Some("cgroup2"),
        target,
        Some("cgroup2"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC | MsFlags::MS_RELATIME,
        None::<&str>,
    )
    .map_err(to_io)
}

/// `mount -t resctrl resctrl TARGET`: ENODEV when the CPUs have neither
/// RDT nor PQoS (or the kernel lacks `CONFIG_X86_CPU_RESCTRL`).
pub fn mount_resctrl(target: &std::path::Path) -> io::Result<()> {
    use nix::mount::{mount, MsFlags};
    mount(
        Some("resctrl"),
        target,
        Some("resctrl"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC | MsFlags::MS_RELATIME,
        None::<&str>,
    )
    .map_err(to_io)
}

/// `umount2(target, UMOUNT_NOFOLLOW)`: detaches the file system mounted
/// at `target` (EBUSY while something is mounted below it or it is in use).
pub fn umount(target: &std::path::Path) -> io::Result<()> {
    nix::mount::umount2(target, nix::mount::MntFlags::UMOUNT_NOFOLLOW).map_err(to_io)
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

/// A thread's scheduling attributes as `sched_getattr`/`sched_setattr`
/// carry them: the policy, its priority or nice value, and for
/// SCHED_DEADLINE its runtime, deadline and period in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SchedAttr {
    /// `SCHED_OTHER` 0, `SCHED_FIFO` 1, `SCHED_RR` 2, `SCHED_BATCH` 3,
    /// `SCHED_IDLE` 5, `SCHED_DEADLINE` 6.
    pub policy: u32,
    /// `SCHED_FLAG_*` bits (reset-on-fork, ...).
    pub flags: u64,
    /// Nice value (SCHED_OTHER and SCHED_BATCH).
    pub nice: i32,
    /// Real-time priority 1..=99 (SCHED_FIFO and SCHED_RR).
    pub priority: u32,
    /// SCHED_DEADLINE runtime, ns.
    pub runtime_ns: u64,
    /// SCHED_DEADLINE relative deadline, ns.
    pub deadline_ns: u64,
    /// SCHED_DEADLINE period, ns.
    pub period_ns: u64,
}

/// `SCHED_FIFO`'s policy number.
pub const SCHED_FIFO: u32 = 1;

/// `SCHED_RR`'s policy number.
pub const SCHED_RR: u32 = 2;

impl SchedAttr {
    /// Whether the policy is a real-time one (SCHED_FIFO, SCHED_RR or
    /// SCHED_DEADLINE): such a thread runs before every ordinary one on
    /// its CPU for as long as it does not sleep.
    pub fn is_realtime(&self) -> bool {
        matches!(self.policy, SCHED_FIFO | SCHED_RR | SCHED_DEADLINE)
    }

    /// The policy and priority as people write them: `SCHED_FIFO 80`.
    pub fn label(&self) -> String {
        match self.policy {
            0 => format!("SCHED_OTHER nice {}", self.nice),
            SCHED_FIFO => format!("SCHED_FIFO {}", self.priority),
            SCHED_RR => format!("SCHED_RR {}", self.priority),
            3 => format!("SCHED_BATCH nice {}", self.nice),
            5 => "SCHED_IDLE".into(),
            SCHED_DEADLINE => format!(
                "SCHED_DEADLINE {}/{}/{} µs",
                self.runtime_ns / 1000,
                self.deadline_ns / 1000,
                self.period_ns / 1000
            ),
            p => format!("policy {p} priority {}", self.priority),
        }
    }
}

/// `SCHED_DEADLINE`'s policy number.
pub const SCHED_DEADLINE: u32 = 6;

/// The kernel's `struct sched_attr` in its first published size
/// (`SCHED_ATTR_SIZE_VER0`, 48 bytes), which every kernel since 3.14 takes.
#[repr(C)]
#[derive(Default)]
struct RawSchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
}

/// `sched_getattr(tid)`: the thread's policy and parameters.
pub fn get_sched_attr(tid: i32) -> io::Result<SchedAttr> {
    let mut raw = RawSchedAttr::default();
    let size = std::mem::size_of::<RawSchedAttr>() as libc::c_uint;
    // SAFETY: `raw` is a valid, writable sched_attr of `size` bytes that
    // outlives the call; the kernel writes at most `size` bytes into it.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            tid as libc::c_long,
            &mut raw as *mut RawSchedAttr,
            size,
            0 as libc::c_uint,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(SchedAttr {
        policy: raw.policy,
        flags: raw.flags,
        nice: raw.nice,
        priority: raw.priority,
        runtime_ns: raw.runtime,
        deadline_ns: raw.deadline,
        period_ns: raw.period,
    })
}

/// `sched_setattr(tid, attr)`. The kernel refuses SCHED_DEADLINE with
/// EPERM for a thread whose affinity is narrower than its root domain
/// while RT bandwidth is enforced (`sched_rt_runtime_us` not -1), and with
/// EBUSY when the deadline bandwidth is used up.
pub fn set_sched_attr(tid: i32, attr: &SchedAttr) -> io::Result<()> {
    let raw = RawSchedAttr {
        size: std::mem::size_of::<RawSchedAttr>() as u32,
        policy: attr.policy,
        flags: attr.flags,
        nice: attr.nice,
        priority: attr.priority,
        runtime: attr.runtime_ns,
        deadline: attr.deadline_ns,
        period: attr.period_ns,
    };
    // SAFETY: `raw` is a valid, initialised sched_attr whose `size` field
    // is its own size; it outlives the call and the kernel only reads it.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            tid as libc::c_long,
            &raw as *const RawSchedAttr,
            0 as libc::c_uint,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sends `signal` to process `pid` (`kill`).
pub fn signal_process(pid: i32, signal: nix::sys::signal::Signal) -> io::Result<()> {
    nix::sys::signal::kill(Pid::from_raw(pid), signal).map_err(to_io)
}

/// The calling thread's kernel thread id.
pub fn gettid() -> i32 {
    nix::unistd::gettid().as_raw()
}

// ---------------------------------------------------------------------------
// Measurement: clocks, sleeping, memory locking, RTC, cycle counter, rusage.
// These are called from measuring loops: none of them allocates.
// ---------------------------------------------------------------------------

use nix::time::{ClockId, ClockNanosleepFlags};

/// Nanoseconds in a second.
const NS_PER_SEC: u64 = 1_000_000_000;

/// `clock_gettime(CLOCK_MONOTONIC)` in nanoseconds (served by the vDSO).
#[inline]
pub fn monotonic_ns() -> u64 {
    clock_ns(ClockId::CLOCK_MONOTONIC)
}

/// `clock_gettime(CLOCK_MONOTONIC_RAW)` in nanoseconds (not slewed by NTP).
#[inline]
pub fn monotonic_raw_ns() -> u64 {
    clock_ns(ClockId::CLOCK_MONOTONIC_RAW)
}

#[inline]
fn clock_ns(clock: ClockId) -> u64 {
    // clock_gettime on a valid clock id cannot fail; 0 would be a harmless
    // sample rather than a panic inside a measuring loop.
    match nix::time::clock_gettime(clock) {
        Ok(ts) => ts.tv_sec() as u64 * NS_PER_SEC + ts.tv_nsec() as u64,
        Err(_) => 0,
    }
}

/// `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)` until `deadline_ns`.
///
/// Returns `Err(EINTR)` when a signal interrupted the sleep; callers check
/// their stop flag and sleep again.
#[inline]
pub fn sleep_until_monotonic_ns(deadline_ns: u64) -> nix::Result<()> {
    let ts = nix::sys::time::TimeSpec::new(
        (deadline_ns / NS_PER_SEC) as libc::time_t,
        (deadline_ns % NS_PER_SEC) as libc::c_long,
    );
    nix::time::clock_nanosleep(
        ClockId::CLOCK_MONOTONIC,
        ClockNanosleepFlags::TIMER_ABSTIME,
        &ts,
    )
    .map(drop)
}

/// `mlockall(MCL_CURRENT | MCL_FUTURE)`: no page of the process (present or
/// future, thread stacks included) may be paged out or faulted lazily.
pub fn lock_all_memory() -> io::Result<()> {
    use nix::sys::mman::{mlockall, MlockAllFlags};
    mlockall(MlockAllFlags::MCL_CURRENT | MlockAllFlags::MCL_FUTURE).map_err(to_io)
}

/// `munlockall()`: undoes [`lock_all_memory`] when a measurement ends.
pub fn unlock_all_memory() -> io::Result<()> {
    nix::sys::mman::munlockall().map_err(to_io)
}

/// Context switches of the calling thread so far (`getrusage(RUSAGE_THREAD)`):
/// (voluntary, involuntary).
pub fn thread_context_switches() -> io::Result<(u64, u64)> {
    use nix::sys::resource::{getrusage, UsageWho};
    let u = getrusage(UsageWho::RUSAGE_THREAD).map_err(to_io)?;
    Ok((
        u.voluntary_context_switches() as u64,
        u.involuntary_context_switches() as u64,
    ))
}

/// The CPU's time-stamp counter, when the architecture has one we use.
#[cfg(target_arch = "x86_64")]
#[inline]
pub fn cycle_counter() -> Option<u64> {
    // SAFETY: RDTSC is available on every x86_64 CPU; it reads a register
    // and has no memory effects. (Ordering with surrounding loads does not
    // matter for gap detection: only consecutive reads are compared.)
    Some(unsafe { core::arch::x86_64::_rdtsc() })
}

/// The CPU's time-stamp counter, when the architecture has one we use.
#[cfg(not(target_arch = "x86_64"))]
#[inline]
pub fn cycle_counter() -> Option<u64> {
    None
}

/// A serialised time-stamp counter for timing a few instructions (the
/// cache probe's loads): a capability that exists only where the CPU has
/// one, so code that holds a `Tsc` never reads a counter that is not there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tsc {
    _private: (),
}

impl Tsc {
    /// The counter, or why there is none: RDTSC with LFENCE is x86_64
    /// only (every x86_64 CPU has both); elsewhere an `Unsupported` error
    /// that the probe reports as its skip reason.
    pub fn new() -> io::Result<Tsc> {
        if cfg!(target_arch = "x86_64") {
            Ok(Tsc { _private: () })
        } else {
            Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "no serialised cycle counter on {} (the cache probe times loads with x86_64's RDTSC and LFENCE)",
                    std::env::consts::ARCH
                ),
            ))
        }
    }

    /// Runs `f` between two counter reads and returns its value and the
    /// ticks between them. `LFENCE; RDTSC; LFENCE` before: earlier
    /// instructions are done and `f` has not started when the counter is
    /// read; `LFENCE; RDTSC` after: `f`'s loads have their data. `f`'s
    /// inputs and its result pass through `black_box`, so the compiler
    /// cannot move its work out from between the reads.
    #[inline(always)]
    pub fn time<R>(self, f: impl FnOnce() -> R) -> (R, u64) {
        #[cfg(target_arch = "x86_64")]
        {
            use core::arch::x86_64::{_mm_lfence, _rdtsc};
            // SAFETY: LFENCE (SSE2) and RDTSC are part of every x86_64
            // CPU; they read a register or order execution and touch no
            // memory of ours. The closure runs as safe code between them.
            let t0 = unsafe {
                _mm_lfence();
                let t = _rdtsc();
                _mm_lfence();
                t
            };
            let r = std::hint::black_box(f());
            // SAFETY: as above.
            let t1 = unsafe {
                _mm_lfence();
                _rdtsc()
            };
            (r, t1.wrapping_sub(t0))
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            // Unreachable: `Tsc::new` never returns a counter here.
            (f(), 0)
        }
    }
}

/// A read-only shared mapping of the page of a file that holds one
/// 32-bit register: a PCI BAR's `resourceN` file in sysfs, for the pci
/// probe's timed reads. Mapped once before the loop, read with volatile
/// 4-byte loads (each one a real access to the device: some registers
/// clear on read), unmapped on drop. Never writes.
#[derive(Debug)]
pub struct MappedRegister {
    base: *mut libc::c_void,
    len: usize,
    at: usize,
}

// SAFETY: the mapping is owned by this value alone (no other handle to
// its address exists), reads through it are volatile loads of plain
// memory or MMIO with no thread affinity, and it is unmapped once, on
// drop: moving it to the measuring thread is sound.
unsafe impl Send for MappedRegister {}

impl MappedRegister {
    /// Maps read-only, shared, the page of `file` that holds the 4 bytes
    /// at `offset` (which must be a multiple of 4). The caller has
    /// checked that `offset + 4` lies within the file's region.
    pub fn map(file: &std::fs::File, offset: u64) -> io::Result<MappedRegister> {
        use std::os::fd::AsRawFd;
        if !offset.is_multiple_of(4) {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
            .ok()
            .flatten()
            .map_or(4096, |p| p as u64);
        let start = offset - offset % page;
        let at = (offset - start) as usize;
        let len = page as usize;
        let file_offset =
            libc::off_t::try_from(start).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: a new mapping at an address the kernel chooses (NULL
        // hint), of `len` bytes of an open file, read-only and shared; it
        // aliases no Rust object. The result is checked for MAP_FAILED.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                file_offset,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(MappedRegister { base, len, at })
    }

    /// One volatile 32-bit load of the register (little endian, as the
    /// device answers it).
    #[inline(always)]
    pub fn read(&self) -> u32 {
        // SAFETY: `at + 4 <= len` (`at` is a 4-aligned offset within one
        // page), the page is mapped readable for the life of `self`, and
        // the address is 4-byte aligned (page-aligned base plus a
        // multiple of 4). A volatile load is never elided or merged.
        unsafe { std::ptr::read_volatile(self.base.cast::<u8>().add(self.at).cast::<u32>()) }
    }
}

impl Drop for MappedRegister {
    fn drop(&mut self) {
        // SAFETY: `base` and `len` are exactly what mmap returned and was
        // given; nothing refers to the mapping after this.
        unsafe {
            libc::munmap(self.base, self.len);
        }
    }
}

/// The whole huge pages inside `[addr, addr + len)`, when any.
fn huge_range(addr: usize, len: usize) -> Option<(std::ptr::NonNull<libc::c_void>, usize)> {
    let start = addr.next_multiple_of(HUGE_PAGE_BYTES);
    let end = (addr + len) / HUGE_PAGE_BYTES * HUGE_PAGE_BYTES;
    let ptr = std::ptr::NonNull::new(start as *mut libc::c_void)?;
    (end > start).then_some((ptr, end - start))
}

/// Asks the kernel to put the memory `[addr, addr + len)` already touched
/// into transparent huge pages now (`madvise(MADV_COLLAPSE)`, Linux 6.1+),
/// the whole huge pages inside it: what a locked process (`mlockall`
/// faults its pages in at allocation, before any advice) needs. An error
/// (an older kernel, no huge page free) leaves the memory as it was.
pub fn collapse_huge_pages(addr: usize, len: usize) -> io::Result<()> {
    let Some((ptr, len)) = huge_range(addr, len) else {
        return Ok(());
    };
    // SAFETY: as advise_huge_pages: memory of this process, huge-page
    // aligned inside the caller's buffer; MADV_COLLAPSE copies its
    // contents into huge pages, never changes them or their validity.
    match unsafe { libc::madvise(ptr.as_ptr(), len, libc::MADV_COLLAPSE) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// The size of a transparent huge page on x86_64.
pub const HUGE_PAGE_BYTES: usize = 2 << 20;

mod rtc_ioctl {
    // <linux/rtc.h>: #define RTC_PIE_ON _IO('p', 0x05), RTC_PIE_OFF _IO('p', 0x06),
    // RTC_IRQP_SET _IOW('p', 0x0c, unsigned long) (the rate is passed by value).
    nix::ioctl_none!(rtc_pie_on, b'p', 0x05);
    nix::ioctl_none!(rtc_pie_off, b'p', 0x06);
    nix::ioctl_write_int_bad!(
        rtc_irqp_set,
        nix::request_code_write!(b'p', 0x0c, std::mem::size_of::<libc::c_ulong>())
    );
}

/// `ioctl(fd, RTC_IRQP_SET, hz)`: periodic interrupt rate of an RTC device.
pub fn rtc_set_periodic_rate(fd: &impl std::os::fd::AsRawFd, hz: u32) -> io::Result<()> {
    // SAFETY: the fd is open (borrowed for the call); RTC_IRQP_SET takes the
    // rate as an integer argument, no pointer is passed.
    unsafe { rtc_ioctl::rtc_irqp_set(fd.as_raw_fd(), hz as libc::c_int) }
        .map(drop)
        .map_err(to_io)
}

/// `ioctl(fd, RTC_PIE_ON)` / `RTC_PIE_OFF`: periodic interrupts on or off.
pub fn rtc_periodic_interrupts(fd: &impl std::os::fd::AsRawFd, on: bool) -> io::Result<()> {
    // SAFETY: the fd is open (borrowed for the call); these ioctls take no argument.
    let r = unsafe {
        if on {
            rtc_ioctl::rtc_pie_on(fd.as_raw_fd())
        } else {
            rtc_ioctl::rtc_pie_off(fd.as_raw_fd())
        }
    };
    r.map(drop).map_err(to_io)
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
    let mask = RawMask::of(cpus);
    // SAFETY: the closure runs in the forked child before exec, where only
    // async-signal-safe work is allowed. It makes one raw syscall
    // (sched_setaffinity) on a mask that was built before the fork and is
    // moved in, and allocates nothing.
    unsafe {
        cmd.pre_exec(move || set_affinity_raw(0, &mask));
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

/// `fork`: `Ok(None)` in the child, `Ok(Some(pid))` in the parent. Only
/// for a process with one thread (`run`), where the child may do anything
/// the parent could.
pub fn fork_single_threaded() -> io::Result<Option<i32>> {
    // SAFETY: called by `run` before it starts any thread, so the child
    // is a whole copy of a single-threaded process: no lock is held by a
    // thread that does not exist in the child.
    match unsafe { nix::unistd::fork() }.map_err(to_io)? {
        nix::unistd::ForkResult::Child => Ok(None),
        nix::unistd::ForkResult::Parent { child } => Ok(Some(child.as_raw())),
    }
}

/// Makes the terminal `fd` the controlling terminal of the calling
/// session leader (`TIOCSCTTY`, without stealing it from another session).
pub fn set_controlling_terminal(fd: &impl std::os::fd::AsRawFd) -> io::Result<()> {
    // SAFETY: TIOCSCTTY takes an int argument, passed by value; the fd is
    // borrowed for the call.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCSCTTY, 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A terminal's size in characters and pixels (`struct winsize`).
pub type WindowSize = libc::winsize;

/// The size of the terminal `fd` (`TIOCGWINSZ`).
pub fn window_size(fd: &impl std::os::fd::AsRawFd) -> io::Result<WindowSize> {
    let mut size = WindowSize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one struct winsize to the pointer, which
    // points at a live, writable one.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCGWINSZ, &mut size) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(size)
}

/// Sets the size of the terminal `fd` (`TIOCSWINSZ`): its foreground
/// process group gets SIGWINCH.
pub fn set_window_size(fd: &impl std::os::fd::AsRawFd, size: &WindowSize) -> io::Result<()> {
    // SAFETY: TIOCSWINSZ reads one struct winsize from the pointer, which
    // points at a live one.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCSWINSZ, size) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread's securebits (`prctl(PR_GET_SECUREBITS)`).
pub fn securebits() -> io::Result<u32> {
    // SAFETY: PR_GET_SECUREBITS takes no pointer and returns the bits.
    let r = unsafe { libc::prctl(libc::PR_GET_SECUREBITS, 0, 0, 0, 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r as u32)
}

/// A directory opened only to resolve paths beneath it (`O_PATH`): the
/// root a journal's records are resolved from.
pub fn open_dir_path(dir: &std::path::Path) -> io::Result<std::os::fd::OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    rustix::fs::open(
        dir,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(io::Error::from)
}

/// `openat2(dir, rel, O_PATH, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
/// RESOLVE_NO_MAGICLINKS)`: `rel` resolved beneath `dir` through no
/// symbolic link (ELOOP at the first one, EXDEV for a way out of `dir`).
/// Linux 5.6 and later; ENOSYS before (or where a seccomp filter hides it).
pub fn open_beneath(dir: std::os::fd::BorrowedFd, rel: &str) -> io::Result<std::os::fd::OwnedFd> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    rustix::fs::openat2(
        dir,
        rel,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        resolve,
    )
    .map_err(io::Error::from)
}

/// One name in `dir`, opened `O_PATH | O_NOFOLLOW`: a symbolic link is
/// opened itself, not followed (see [`is_symlink`]).
pub fn open_nofollow(dir: std::os::fd::BorrowedFd, name: &str) -> io::Result<std::os::fd::OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    rustix::fs::openat(dir, name, flags, Mode::empty()).map_err(io::Error::from)
}

/// Whether `fd` (opened with [`open_nofollow`]) is a symbolic link.
pub fn is_symlink(fd: std::os::fd::BorrowedFd) -> io::Result<bool> {
    let st = rustix::fs::fstat(fd).map_err(io::Error::from)?;
    Ok(rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Symlink)
}

/// Whether `fd` is on sysfs (`fstatfs`'s type `SYSFS_MAGIC`), where only
/// the kernel makes symbolic links.
pub fn on_sysfs(fd: std::os::fd::BorrowedFd) -> bool {
    const SYSFS_MAGIC: i64 = 0x6265_6572;
    // f_type is i64 on x86_64 and a narrower type elsewhere.
    #[allow(clippy::unnecessary_cast)]
    rustix::fs::fstatfs(fd).is_ok_and(|fs| fs.f_type as i64 == SYSFS_MAGIC)
}

/// The target of the symbolic link `name` in `dir` (`readlinkat`).
pub fn read_link(dir: std::os::fd::BorrowedFd, name: &str) -> io::Result<String> {
    let target = rustix::fs::readlinkat(dir, name, Vec::new()).map_err(io::Error::from)?;
    target
        .into_string()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tsc_times_work_between_its_reads_or_says_why_not() {
        match Tsc::new() {
            Ok(tsc) => {
                let (_, empty) = (0..1000)
                    .map(|_| tsc.time(|| ()))
                    .min_by_key(|t| t.1)
                    .unwrap();
                let (sum, spun) =
                    tsc.time(|| (0..100_000u64).map(std::hint::black_box).sum::<u64>());
                assert_eq!(sum, 4_999_950_000);
                assert!(
                    spun > empty + 10_000,
                    "100,000 adds in {spun} ticks, empty {empty}"
                );
            }
            Err(e) => {
                let x86_64 = cfg!(target_arch = "x86_64");
                assert!(!x86_64, "every x86_64 CPU has a TSC: {e}");
                assert_eq!(e.kind(), io::ErrorKind::Unsupported);
                assert!(e.to_string().contains("RDTSC"), "{e}");
            }
        }
    }

    #[test]
    fn a_mapped_register_reads_the_file_s_bytes_at_its_offset() {
        // A regular file stands in for a BAR's resourceN: no device is touched.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("resource0");
        let mut bytes = vec![0u8; 8192];
        bytes[0x10..0x14].copy_from_slice(&0x1234_5678u32.to_le_bytes());
        bytes[0x1004..0x1008].copy_from_slice(&0xdead_beefu32.to_le_bytes());
        std::fs::write(&path, &bytes).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        assert_eq!(MappedRegister::map(&f, 0x10).unwrap().read(), 0x1234_5678);
        let r = MappedRegister::map(&f, 0x1004).unwrap();
        assert_eq!((r.read(), r.read()), (0xdead_beef, 0xdead_beef));
        let e = MappedRegister::map(&f, 0x11).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "unaligned");
    }

    #[test]
    fn masks_carry_cpus_beyond_glibcs_1024() {
        let cpus: CpuSet = [0, 63, 64, 1023, 1024, 1500, MAX_CPUS - 1]
            .into_iter()
            .collect();
        let mask = RawMask::of(&cpus);
        assert_eq!(mask.0[1500 / 64], 1 << (1500 % 64));
        assert_eq!(mask.cpus(mask.byte_len()), cpus);
        // The kernel copies only nr_cpu_ids' bytes: CPUs past them are not read.
        assert_eq!(mask.cpus(16), [0, 63, 64].into_iter().collect());
    }

    #[test]
    fn own_affinity_reads_and_sets_back_through_the_wide_mask() {
        // Only this test's own thread is touched, with the affinity it has.
        let mine = get_affinity(0).expect("sched_getaffinity of the calling thread");
        assert!(!mine.is_empty());
        set_affinity(0, &mine).expect("setting the calling thread's own affinity");
        assert_eq!(get_affinity(0).unwrap(), mine);
    }
}
