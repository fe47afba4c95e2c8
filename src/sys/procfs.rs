//! Reading tasks, IRQs, mounts and CPU topology from `/proc` and `/sys`.
//!
//! Parsing is done by pure functions over strings (tested from literal
//! file contents); the `read_*` functions fetch the text through [`Sys`].
//!
//! Names are data: a task names itself with any bytes but NUL (up to 15,
//! or 64 for a kernel thread's name in `stat`), and `stat` and `comm`
//! print them as they are, newlines and parentheses too. So no parser
//! here finds a field by searching text a name could hold: `stat`'s name
//! ends at the *last* `)` (no later field has one), `status`'s fields are
//! taken from the *last* line with their key (the name is its first
//! line; the kernel also escapes its newlines there), a `comm` loses only
//! the one newline the kernel adds, and bytes that are not UTF-8 read as
//! U+FFFD rather than failing the read ([`super::holds_task_bytes`]).
//! Property tests below generate such names.

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{ErrorKind, Result, Sys, SysError};
use crate::cpulist::CpuSet;

/// `PF_KTHREAD` in `/proc/PID/stat` flags: the task is a kernel thread.
pub const PF_KTHREAD: u64 = 0x0020_0000;
/// `PF_NO_SETAFFINITY`: user space may not change this thread's affinity
/// (per-CPU kernel threads, workqueue rescuers on 6.12).
pub const PF_NO_SETAFFINITY: u64 = 0x0400_0000;

/// One thread as `/proc/PID/task/TID` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thread {
    /// Process id (thread group id).
    pub pid: i32,
    /// Thread id.
    pub tid: i32,
    /// Command name (`comm`).
    pub name: String,
    /// `PF_*` flags from `stat`.
    pub flags: u64,
    /// `Cpus_allowed_list` from `status`.
    pub cpus_allowed: CpuSet,
    /// The cgroup path of the cpuset hierarchy (v1) or the unified hierarchy (v2).
    pub cgroup: String,
    /// Whether `name` and `flags` were read: a lazy read (see
    /// [`read_threads_lazily`]) leaves them empty and 0 for threads other
    /// than the process's first, until [`read_stats`] reads them.
    #[serde(default = "stat_read_default")]
    pub stat_read: bool,
}

fn stat_read_default() -> bool {
    true
}

impl Thread {
    /// Whether this is a kernel thread.
    pub fn is_kthread(&self) -> bool {
        self.flags & PF_KTHREAD != 0
    }

    /// Whether the kernel forbids changing its affinity from user space.
    pub fn is_pinned_by_kernel(&self) -> bool {
        self.flags & PF_NO_SETAFFINITY != 0
    }

    /// The kind of a per-CPU kernel thread by name: `ksoftirqd`, `migration`,
    /// `cpuhp`, `kworker`, `rcuc`, ... (the name up to `/` or `-`).
    pub fn kind(&self) -> String {
        kthread_kind(&self.name)
    }
}

/// The kind of a kernel thread from its name: `ksoftirqd/3` → `ksoftirqd`,
/// `kworker/3:1H-events` → `kworker`, `irq/24-ACPI` → `irq`.
pub fn kthread_kind(name: &str) -> String {
    let base = name.split(['/', ':']).next().unwrap_or(name);
    let base = if name.starts_with("kworker/R-") {
        "kworker/R"
    } else if name.starts_with("kworker/u") {
        "kworker/u"
    } else {
        base
    };
    base.to_string()
}

/// Parses the `Cpus_allowed_list` line of a `status` file: the last
/// such line, since the lines before it start with the task's name.
pub fn parse_status_cpus(status: &str) -> Option<CpuSet> {
    status
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .and_then(|v| CpuSet::parse_list(v).ok())
}

/// A task's name from its `comm` file: the text without the one newline
/// the kernel ends it with. Not trimmed: ` irqbalance` and `irqbalance\n`
/// are other names than `irqbalance`.
pub fn parse_comm(comm: &str) -> &str {
    comm.strip_suffix('\n').unwrap_or(comm)
}

/// Task `pid`'s name ([`parse_comm`]), `None` when it is gone.
pub fn read_comm(sys: &Sys, pid: i32) -> Option<String> {
    let text = sys.read(&format!("proc/{pid}/comm")).ok()?;
    Some(parse_comm(&text).to_string())
}

/// The executable task `pid` runs (`/proc/PID/exe`, as the kernel links
/// it: ` (deleted)` after the path when the file was replaced since);
/// `None` when it is gone or not ours to read (a kernel thread has none).
pub fn exe(sys: &Sys, pid: i32) -> Option<String> {
    let target = std::fs::read_link(sys.path(&format!("proc/{pid}/exe"))).ok()?;
    Some(target.to_string_lossy().into_owned())
}

/// Splits a `stat` line into the `comm` and the fields after it. The comm
/// may hold spaces and parentheses, so it runs to the last `)`. Field N of
/// proc(5) (3 is the state) is `fields[N - 3]`.
pub fn split_stat(stat: &str) -> Option<(&str, Vec<&str>)> {
    let close = stat.rfind(')')?;
    let name = stat.get(stat.find('(')? + 1..close)?;
    Some((name, stat.get(close + 1..)?.split_whitespace().collect()))
}

/// Field `n` (numbered as in proc(5), from 3) of [`split_stat`]'s fields, parsed.
pub fn stat_field<T: std::str::FromStr>(fields: &[&str], n: usize) -> Option<T> {
    fields.get(n.checked_sub(3)?)?.parse().ok()
}

/// Parses `comm` and flags (field 9) out of a `stat` line.
pub fn parse_stat(stat: &str) -> Option<(String, u64)> {
    let (name, fields) = split_stat(stat)?;
    Some((name.to_string(), stat_field(&fields, 9)?))
}

/// Which cgroup hierarchy a `/proc/PID/cgroup` line belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Hierarchy {
    /// The cgroup v2 unified hierarchy (`0::/path`).
    Unified,
    /// The cgroup v1 hierarchy with the cpuset controller (`N:cpuset:/path`).
    CpusetV1,
}

/// Picks the path of the given hierarchy out of a `/proc/PID/cgroup` file.
/// Lines end at `\n` only: a cgroup's name may end in `\r` (the kernel
/// refuses only `\n` in one), which `str::lines` would take off.
pub fn parse_cgroup(text: &str, hierarchy: Hierarchy) -> Option<String> {
    text.split('\n').find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_id, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
        let hit = match hierarchy {
            Hierarchy::Unified => ctrls.is_empty(),
            Hierarchy::CpusetV1 => ctrls.split(',').any(|c| c == "cpuset"),
        };
        hit.then(|| path.to_string())
    })
}

/// Process ids under `proc/`, ascending.
pub fn list_pids(sys: &Sys) -> Result<Vec<i32>> {
    let mut pids: Vec<i32> = sys
        .list("proc")?
        .iter()
        .filter_map(|n| n.parse().ok())
        .collect();
    pids.sort_unstable();
    Ok(pids)
}

/// Thread ids of a process, ascending. A process that exited gives an empty list.
pub fn list_tids(sys: &Sys, pid: i32) -> Result<Vec<i32>> {
    match sys.list(&format!("proc/{pid}/task")) {
        Ok(names) => {
            let mut tids: Vec<i32> = names.iter().filter_map(|n| n.parse().ok()).collect();
            tids.sort_unstable();
            Ok(tids)
        }
        Err(e) if e.kind == ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Reads one thread. `Ok(None)` when it exited while being read.
pub fn read_thread(sys: &Sys, pid: i32, tid: i32, hierarchy: Hierarchy) -> Result<Option<Thread>> {
    read_thread_with(
        sys,
        pid,
        tid,
        hierarchy,
        None,
        None,
        AffinitySource::of(sys),
    )
}

/// Where a thread's affinity is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AffinitySource {
    /// `sched_getaffinity`: one syscall, where `status` makes the kernel
    /// format some 60 lines (at 10,000 threads, most of a snapshot's time).
    Syscall,
    /// `Cpus_allowed_list` of `status`: the mask as the task holds it.
    Status,
}

impl AffinitySource {
    /// The syscall reports the mask without inactive CPUs, `status` with
    /// them; they agree when every CPU that can exist is online, else
    /// `status` keeps what a later restore must give back.
    fn of(sys: &Sys) -> AffinitySource {
        let possible = sys.read_cpulist("sys/devices/system/cpu/possible");
        match (possible, online_cpus(sys)) {
            (Ok(possible), Ok(online)) if possible == online => AffinitySource::Syscall,
            _ => AffinitySource::Status,
        }
    }
}

/// Reads one thread; with `known` (name and flags read before), its `stat`
/// is not read again; with `cgroup` (from the cgroup's thread list), its
/// `cgroup` file is not read.
fn read_thread_with(
    sys: &Sys,
    pid: i32,
    tid: i32,
    hierarchy: Hierarchy,
    known: Option<(&str, u64)>,
    cgroup: Option<&str>,
    source: AffinitySource,
) -> Result<Option<Thread>> {
    let dir = format!("proc/{pid}/task/{tid}");
    let gone = |e: &SysError| e.kind == ErrorKind::NotFound;
    let bad = |what: &str, text: &str| {
        SysError::new(
            "parse",
            format!("{dir}/{what}"),
            Some(text.lines().next().unwrap_or("")),
            std::io::Error::new(std::io::ErrorKind::InvalidData, "unexpected format"),
        )
    };
    let (name, flags) = match known {
        Some((name, flags)) => (name.to_string(), flags),
        None => match sys.read(&format!("{dir}/stat")) {
            Ok(stat) => parse_stat(&stat).ok_or_else(|| bad("stat", &stat))?,
            Err(e) if gone(&e) => return Ok(None),
            Err(e) => return Err(e),
        },
    };
    let cpus_allowed = match source {
        AffinitySource::Syscall => match sys.affinity(tid) {
            Ok(cpus) => cpus,
            Err(e) if gone(&e) => return Ok(None),
            Err(e) => return Err(e),
        },
        AffinitySource::Status => match sys.read(&format!("{dir}/status")) {
            Ok(text) => parse_status_cpus(&text).ok_or_else(|| bad("status", &text))?,
            Err(e) if gone(&e) => return Ok(None),
            Err(e) => return Err(e),
        },
    };
    let cgroup = match cgroup {
        Some(cg) => cg.to_string(),
        None => match sys.read(&format!("{dir}/cgroup")) {
            Ok(s) => parse_cgroup(&s, hierarchy).unwrap_or_else(|| "/".into()),
            Err(e) if gone(&e) => return Ok(None),
            Err(e) => return Err(e),
        },
    };
    Ok(Some(Thread {
        pid,
        tid,
        name,
        flags,
        cpus_allowed,
        cgroup,
        stat_read: true,
    }))
}

/// Where the threads' cgroups are read from: the hierarchy that places
/// them, and where it is mounted when it is (then the thread lists of its
/// cgroups are read, see [`cgroup_members`]; else each thread's `cgroup`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CgroupSource<'a> {
    /// Which line of `/proc/PID/task/TID/cgroup` places a thread.
    pub hierarchy: Hierarchy,
    /// The hierarchy's mount point relative to the root, when mounted.
    pub mount: Option<&'a str>,
}

impl CgroupSource<'_> {
    /// Each thread's `cgroup` file, no thread lists.
    pub fn per_thread(hierarchy: Hierarchy) -> CgroupSource<'static> {
        CgroupSource {
            hierarchy,
            mount: None,
        }
    }
}

/// Every thread of the system.
pub fn read_all_threads(sys: &Sys, cgroups: CgroupSource) -> Result<Vec<Thread>> {
    read_threads(sys, cgroups, &[], false)
}

/// Every thread of the system, with the name and flags (`stat`) of each
/// process's first thread only: the others' are left unread
/// (`stat_read` false), to be read with [`read_stats`] for the threads
/// that turn out to matter. A thread that is not its process's first is
/// never a kernel thread (those are processes of one thread); of its flags
/// only `PF_NO_SETAFFINITY` (io_uring workers) is unknown. At 10,000
/// threads this is most of the reads: three syscalls a thread of some five.
pub fn read_threads_lazily(sys: &Sys, cgroups: CgroupSource) -> Result<Vec<Thread>> {
    read_threads(sys, cgroups, &[], true)
}

/// Reads the name and flags of the threads in `threads` whose `stat` was
/// not read and that `wanted` accepts; a thread that exited meanwhile
/// keeps them unread.
pub fn read_stats(sys: &Sys, threads: &mut [Thread], wanted: impl Fn(&Thread) -> bool + Sync) {
    let ids: Vec<(usize, i32, i32)> = threads
        .iter()
        .enumerate()
        .filter(|(_, t)| !t.stat_read && wanted(t))
        .map(|(i, t)| (i, t.pid, t.tid))
        .collect();
    let parts = super::in_parallel(&ids, 256, |part| {
        part.iter()
            .filter_map(|&(i, pid, tid)| {
                let stat = sys.read(&format!("proc/{pid}/task/{tid}/stat")).ok()?;
                Some((i, parse_stat(&stat)?))
            })
            .collect::<Vec<_>>()
    });
    for (i, (name, flags)) in parts.into_iter().flatten() {
        threads[i].name = name;
        threads[i].flags = flags;
        threads[i].stat_read = true;
    }
}

/// Every thread of the system, again: threads of `before` (same pid and
/// tid) keep the name and flags read then, so only their affinity and
/// cgroup are read (`PF_*` flags do not change in a thread's life; a tid
/// reused by a new thread within one `on` would need pid_max forks).
/// Threads new since are read lazily when `before` was.
pub fn reread_threads(sys: &Sys, cgroups: CgroupSource, before: &[Thread]) -> Result<Vec<Thread>> {
    let lazy = before.iter().any(|t| !t.stat_read);
    read_threads(sys, cgroups, before, lazy)
}

fn read_threads(
    sys: &Sys,
    cgroups: CgroupSource,
    before: &[Thread],
    lazy: bool,
) -> Result<Vec<Thread>> {
    let known: HashMap<i32, &Thread> = before.iter().map(|t| (t.tid, t)).collect();
    let source = AffinitySource::of(sys);
    let hierarchy = cgroups.hierarchy;
    let pids = list_pids(sys)?;
    let members = cgroups
        .mount
        .and_then(|mount| cgroup_members(sys, mount, hierarchy).ok())
        .filter(|members| members_agree_with_proc(sys, members, &pids, hierarchy))
        .unwrap_or_default();
    let read_pids = |pids: &[i32]| -> Result<Vec<Thread>> {
        let mut out = Vec::new();
        for &pid in pids {
            for tid in list_tids(sys, pid)? {
                let before = known.get(&tid).filter(|t| t.pid == pid);
                let skip_stat = lazy && tid != pid;
                let k = before
                    .map(|t| (t.name.as_str(), t.flags))
                    .or(skip_stat.then_some(("", 0)));
                let cg = members.get(&tid).map(String::as_str);
                if let Some(mut t) = read_thread_with(sys, pid, tid, hierarchy, k, cg, source)? {
                    t.stat_read = before.map_or(!skip_stat, |b| b.stat_read);
                    out.push(t);
                }
            }
        }
        Ok(out)
    };
    // Thousands of small /proc reads: split the processes over the CPUs.
    let parts = super::in_parallel(&pids, 256, read_pids);
    let mut out = Vec::with_capacity(before.len());
    for part in parts {
        out.extend(part?);
    }
    Ok(out)
}

/// The parent of cgroup `cg` (a path as `/proc/PID/cgroup` names it);
/// `None` for the root `/`.
pub fn parent_cgroup(cg: &str) -> Option<&str> {
    match cg.rfind('/') {
        _ if cg == "/" => None,
        Some(0) | None => Some("/"),
        Some(i) => Some(&cg[..i]),
    }
}

/// The file of a cgroup that lists the ids of its threads.
pub fn thread_list_file(hierarchy: Hierarchy) -> &'static str {
    match hierarchy {
        Hierarchy::Unified => "cgroup.threads",
        Hierarchy::CpusetV1 => "tasks",
    }
}

/// Which cgroup each thread is in, from the thread list of every cgroup
/// under `mount` (relative to the root): one read per cgroup instead of one
/// `/proc/PID/task/TID/cgroup` per thread, each of which takes the kernel's
/// cgroup lock. Paths are as `/proc/PID/cgroup` shows them (`/` for the
/// mount's root). A thread listed twice (it moved during the walk) is left
/// out, as is every thread the lists miss (forked after its cgroup was
/// read): callers read those from `/proc`. Cgroups removed during the walk
/// are skipped; an error when the mount's own list cannot be read.
pub fn cgroup_members(
    sys: &Sys,
    mount: &str,
    hierarchy: Hierarchy,
) -> Result<HashMap<i32, String>> {
    let file = thread_list_file(hierarchy);
    let mut members: HashMap<i32, String> = HashMap::new();
    let mut twice: Vec<i32> = Vec::new();
    let mut pending = vec![String::from("/")];
    while let Some(cg) = pending.pop() {
        let dir = if cg == "/" {
            mount.to_string()
        } else {
            format!("{mount}{cg}")
        };
        let text = match sys.read(&format!("{dir}/{file}")) {
            Ok(text) => text,
            Err(e) if cg != "/" && e.kind == ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for tid in text
            .split_whitespace()
            .filter_map(|t| t.parse::<i32>().ok())
        {
            if members.insert(tid, cg.clone()).is_some() {
                twice.push(tid);
            }
        }
        let children = match sys.subdirs(&dir) {
            Ok(children) => children,
            Err(e) if cg != "/" && e.kind == ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let prefix = if cg == "/" { "" } else { cg.as_str() };
        pending.extend(children.into_iter().map(|c| format!("{prefix}/{c}")));
    }
    for tid in twice {
        members.remove(&tid);
    }
    Ok(members)
}

/// Whether the thread lists name cgroups the way `/proc` does: checked on
/// the first process leader they list that `/proc` still has. They would
/// not when the mount shows a subtree of the hierarchy (a bind mount).
fn members_agree_with_proc(
    sys: &Sys,
    members: &HashMap<i32, String>,
    pids: &[i32],
    hierarchy: Hierarchy,
) -> bool {
    for &pid in pids {
        let Some(listed) = members.get(&pid) else {
            continue;
        };
        match sys.read(&format!("proc/{pid}/task/{pid}/cgroup")) {
            Ok(text) => return parse_cgroup(&text, hierarchy).as_ref() == Some(listed),
            Err(e) if e.kind == ErrorKind::NotFound => continue,
            Err(_) => return false,
        }
    }
    members.is_empty()
}

/// `MemAvailable` from `/proc/meminfo`, in bytes.
pub fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// One mount from `/proc/self/mounts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Where it is mounted (absolute, as the kernel prints it).
    pub target: String,
    /// File system type (`cgroup`, `cgroup2`, ...).
    pub fstype: String,
    /// Mount options, comma-separated.
    pub options: String,
}

/// Parses `/proc/self/mounts` (octal escapes such as `\040` decoded).
pub fn parse_mounts(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4).then(|| Mount {
                target: unescape_octal(f[1]),
                fstype: f[2].to_string(),
                options: f[3].to_string(),
            })
        })
        .collect()
}

fn unescape_octal(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 4 <= b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 4], 8) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One IRQ line of `/proc/interrupts`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterruptLine {
    /// The label: an IRQ number (`24`) or a per-CPU kind (`LOC`, `RES`, `TLB`).
    pub label: String,
    /// Count per CPU column, in column order.
    pub counts: Vec<u64>,
    /// The rest of the line: chip, hwirq, trigger and device names.
    pub description: String,
}

/// Clock ticks per second of the times in `/proc/PID/stat` (USER_HZ, 100
/// on every architecture Linux runs on today).
const USER_HZ: f64 = 100.0;

/// The first thread of the process named `name` among `threads`.
pub fn leader<'a>(threads: &'a [Thread], name: &str) -> Option<&'a Thread> {
    threads.iter().find(|t| t.pid == t.tid && t.name == name)
}

/// The value of `name` in process `pid`'s environment
/// (`/proc/PID/environ`), if it is set there.
pub fn environ_var(sys: &Sys, pid: i32, name: &str) -> Option<String> {
    let env = sys.read(&format!("proc/{pid}/environ")).ok()?;
    env.split('\0')
        .find_map(|kv| kv.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
        .map(str::to_string)
}

/// Now, in clock ticks since boot (`/proc/uptime`): the unit and origin
/// of a thread's start time in `/proc/PID/stat`.
pub fn boot_ticks(sys: &Sys) -> Option<u64> {
    let text = sys.read("proc/uptime").ok()?;
    let secs: f64 = text.split_whitespace().next()?.parse().ok()?;
    Some((secs * USER_HZ).floor() as u64)
}

/// When thread `tid` started, in clock ticks since boot (field 22 of
/// `/proc/TID/stat`); `None` when it is gone or the field is missing.
pub fn start_ticks(sys: &Sys, tid: i32) -> Option<u64> {
    stat_start_ticks(&sys.read(&format!("proc/{tid}/stat")).ok()?)
}

/// Whether process `pid` has `file` (a path on this machine) open: one of
/// its `/proc/PID/fd` links points at it. Reads no lock table: reading
/// `/proc/locks` freezes every lock list behind an RCU grace period, which
/// a real-time task that starves a CPU's RCU work holds up for good (seen
/// behind a SCHED_FIFO loop with throttling off, in guest scenario 21).
pub fn has_open(sys: &Sys, pid: i32, file: &Path) -> bool {
    let Ok(fds) = std::fs::read_dir(sys.path(&format!("proc/{pid}/fd"))) else {
        return false;
    };
    fds.flatten()
        .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target == file))
}

/// The start time (ticks since boot) a `/proc/PID/stat` line holds.
pub fn stat_start_ticks(stat: &str) -> Option<u64> {
    stat_field(&split_stat(stat)?.1, 22)
}

/// Whether thread id `tid`, journaled at `at` (ticks since boot), now
/// names a thread that started later: the recorded one exited and the id
/// was reused. Unknown times (an entry or a kernel without them) say no.
pub fn recycled(sys: &Sys, tid: i32, at: Option<u64>) -> bool {
    match (at, start_ticks(sys, tid)) {
        (Some(at), Some(start)) => start > at,
        _ => false,
    }
}

/// Parses `/proc/interrupts` (also works for `/proc/softirqs`): the header
/// gives the CPU columns; returns the CPU numbers of the columns and the lines.
pub fn parse_interrupts(text: &str) -> (Vec<u32>, Vec<InterruptLine>) {
    let mut lines = text.lines();
    let cpus: Vec<u32> = lines
        .next()
        .unwrap_or("")
        .split_whitespace()
        .filter_map(|c| c.strip_prefix("CPU")?.parse().ok())
        .collect();
    let mut out = Vec::new();
    for l in lines {
        let Some((label, rest)) = l.split_once(':') else {
            continue;
        };
        let mut counts = Vec::with_capacity(cpus.len());
        let mut rest = rest.trim_start();
        while counts.len() < cpus.len() {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            match rest[..end].parse::<u64>() {
                Ok(n) => {
                    counts.push(n);
                    rest = rest[end..].trim_start();
                }
                Err(_) => break,
            }
        }
        out.push(InterruptLine {
            label: label.trim().to_string(),
            counts,
            description: rest.trim().to_string(),
        });
    }
    (cpus, out)
}

/// The device name of an IRQ line: the last field of its description
/// (`IO-APIC 4-edge ttyS0` → `ttyS0`; `PCI-MSIX-0000:00:01.0 0-edge virtio0-config` → `virtio0-config`).
pub fn irq_device_name(description: &str) -> String {
    description
        .split_whitespace()
        .last()
        .unwrap_or("")
        .to_string()
}

/// CPUs that are online.
pub fn online_cpus(sys: &Sys) -> Result<CpuSet> {
    sys.read_cpulist("sys/devices/system/cpu/online")
}

/// CPUs that exist (possible), online or not.
pub fn present_cpus(sys: &Sys) -> Result<CpuSet> {
    sys.read_cpulist("sys/devices/system/cpu/present")
        .or_else(|_| sys.read_cpulist("sys/devices/system/cpu/possible"))
}

/// The hyper-thread siblings of a CPU (including itself); the CPU alone when unknown.
pub fn thread_siblings(sys: &Sys, cpu: u32) -> CpuSet {
    sys.read_cpulist(&format!(
        "sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list"
    ))
    .unwrap_or_else(|_| [cpu].into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_this_process_has_open_is_found_by_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let sys = Sys::live();
        let path = dir.path().join("lock");
        let me = std::process::id() as i32;
        assert!(!has_open(&sys, me, &path));
        let file = std::fs::File::create(&path).unwrap();
        assert!(has_open(&sys, me, &path));
        drop(file);
        assert!(!has_open(&sys, me, &path));
    }

    #[test]
    fn reads_mem_available() {
        let m = "MemTotal:       24000000 kB\nMemFree:  1 kB\nMemAvailable:   20000000 kB\n";
        assert_eq!(mem_available(m), Some(20_000_000 * 1024));
        assert_eq!(mem_available("MemTotal: 1 kB\n"), None);
    }

    #[test]
    fn stat_with_odd_comm() {
        let line = "42 (a (b) c) S 2 0 0 0 -1 69238880 0 0 0 0";
        let (name, flags) = parse_stat(line).unwrap();
        assert_eq!(name, "a (b) c");
        assert_eq!(flags, 69238880);
        assert!(flags & PF_KTHREAD != 0 && flags & PF_NO_SETAFFINITY != 0);
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn cgroup_lines_by_hierarchy() {
        let text = "9:name=systemd:/\n3:cpuset:/rt\n0::/user.slice\n";
        assert_eq!(
            parse_cgroup(text, Hierarchy::CpusetV1).as_deref(),
            Some("/rt")
        );
        assert_eq!(
            parse_cgroup(text, Hierarchy::Unified).as_deref(),
            Some("/user.slice")
        );
        assert_eq!(parse_cgroup("1:cpu:/\n", Hierarchy::CpusetV1), None);
    }

    #[test]
    fn interrupts_table() {
        let text = "           CPU0       CPU1       \n  0:         44          0   IO-APIC   2-edge      timer\n 26:          0         16  IO-APIC   4-edge      ttyS0\nLOC:     120431     118338   Local timer interrupts\nERR:          0\n";
        let (cpus, lines) = parse_interrupts(text);
        assert_eq!(cpus, vec![0, 1]);
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[1].label, "26");
        assert_eq!(lines[1].counts, vec![0, 16]);
        assert_eq!(irq_device_name(&lines[1].description), "ttyS0");
        assert_eq!(lines[2].description, "Local timer interrupts");
        assert_eq!(lines[3].counts, vec![0]);
    }

    #[test]
    fn kinds_of_kernel_threads() {
        assert_eq!(kthread_kind("ksoftirqd/3"), "ksoftirqd");
        assert_eq!(kthread_kind("kworker/3:1H-events_highpri"), "kworker");
        assert_eq!(kthread_kind("kworker/R-rcu_g"), "kworker/R");
        assert_eq!(kthread_kind("kworker/u8:2-events_unbound"), "kworker/u");
        assert_eq!(kthread_kind("migration/0"), "migration");
    }

    #[test]
    fn affinity_comes_from_status_while_a_cpu_is_offline() {
        use crate::sys::fixture::{add_process, FixtureBuilder, FixtureTask};
        let tmp = tempfile::tempdir().unwrap();
        let task = FixtureTask {
            name: "t".into(),
            flags: 0,
            cpus: CpuSet::parse_list("0-3").unwrap(),
        };
        let all_online = FixtureBuilder::new(tmp.path().join("a"), 4)
            .build()
            .unwrap();
        let one_offline = FixtureBuilder::new(tmp.path().join("b"), 4)
            .online("0-2")
            .build()
            .unwrap();
        for sys in [&all_online, &one_offline] {
            add_process(sys, 10, std::slice::from_ref(&task)).unwrap();
        }
        assert_eq!(AffinitySource::of(&all_online), AffinitySource::Syscall);
        assert_eq!(AffinitySource::of(&one_offline), AffinitySource::Status);
        // sched_getaffinity leaves out the offline CPU; the snapshot must
        // keep it, or off would give the thread back 0-2.
        assert_eq!(one_offline.affinity(10).unwrap().to_string(), "0-2");
        for sys in [&all_online, &one_offline] {
            let t = read_thread(sys, 10, 10, Hierarchy::Unified)
                .unwrap()
                .unwrap();
            assert_eq!(t.cpus_allowed.to_string(), "0-3");
            assert_eq!(
                read_all_threads(sys, CgroupSource::per_thread(Hierarchy::Unified)).unwrap()[0]
                    .cpus_allowed
                    .to_string(),
                "0-3"
            );
        }
    }

    #[test]
    fn parent_cgroups_up_to_the_root() {
        assert_eq!(
            parent_cgroup("/system.slice/a.service"),
            Some("/system.slice")
        );
        assert_eq!(parent_cgroup("/system.slice"), Some("/"));
        assert_eq!(parent_cgroup("/"), None);
    }

    /// An empty fixture of 2 CPUs (the directory lives as long as the guard).
    fn two_cpu_fixture() -> (tempfile::TempDir, Sys) {
        let tmp = tempfile::tempdir().unwrap();
        let sys = crate::sys::fixture::FixtureBuilder::new(tmp.path(), 2)
            .build()
            .unwrap();
        (tmp, sys)
    }

    /// A thread named `name` with `flags`, allowed on CPUs 0-1.
    fn task(name: &str, flags: u64) -> crate::sys::fixture::FixtureTask {
        crate::sys::fixture::FixtureTask {
            name: name.into(),
            flags,
            cpus: CpuSet::parse_list("0-1").unwrap(),
        }
    }

    #[test]
    fn reread_skips_stat_of_known_threads_only() {
        use crate::sys::fixture::add_process;
        let (_tmp, sys) = two_cpu_fixture();
        add_process(&sys, 10, &[task("old", PF_KTHREAD)]).unwrap();
        let before = read_all_threads(&sys, CgroupSource::per_thread(Hierarchy::Unified)).unwrap();
        assert_eq!(before.len(), 1);
        // A known thread's stat is not read again: break it to prove it.
        std::fs::write(sys.path("proc/10/task/10/stat"), "garbage").unwrap();
        add_process(&sys, 20, &[task("new", PF_NO_SETAFFINITY)]).unwrap();
        let again =
            reread_threads(&sys, CgroupSource::per_thread(Hierarchy::Unified), &before).unwrap();
        assert_eq!(again.len(), 2);
        assert_eq!(
            (again[0].name.as_str(), again[0].flags),
            ("old", PF_KTHREAD)
        );
        assert_eq!(
            (again[1].name.as_str(), again[1].flags),
            ("new", PF_NO_SETAFFINITY),
            "a thread forked meanwhile is read whole"
        );
        assert!(
            read_all_threads(&sys, CgroupSource::per_thread(Hierarchy::Unified)).is_err(),
            "a full read does read stat"
        );
    }

    #[test]
    fn a_lazy_read_leaves_the_stat_of_later_threads_for_read_stats() {
        use crate::sys::fixture::add_process;
        let (_tmp, sys) = two_cpu_fixture();
        add_process(
            &sys,
            10,
            &[
                task("app", 0),
                task("worker", 0),
                task("iou-wrk", PF_NO_SETAFFINITY),
            ],
        )
        .unwrap();
        let source = CgroupSource::per_thread(Hierarchy::Unified);
        // The later threads' stat is not read: break one to prove it.
        std::fs::write(sys.path("proc/10/task/11/stat"), "garbage").unwrap();
        let mut lazy = read_threads_lazily(&sys, source).unwrap();
        let facts: Vec<(&str, u64, bool)> = lazy
            .iter()
            .map(|t| (t.name.as_str(), t.flags, t.stat_read))
            .collect();
        assert_eq!(
            facts,
            [("app", 0, true), ("", 0, false), ("", 0, false)],
            "the process's first thread is read whole"
        );
        // A re-read keeps what was (not) read and stays lazy for new threads.
        add_process(&sys, 20, &[task("new", 0), task("new-t", 0)]).unwrap();
        let again = reread_threads(&sys, source, &lazy).unwrap();
        let read: Vec<bool> = again.iter().map(|t| t.stat_read).collect();
        assert_eq!(read, [true, false, false, true, false]);
        // read_stats reads only the threads asked for.
        read_stats(&sys, &mut lazy, |t| t.tid == 12);
        assert_eq!(
            (lazy[2].name.as_str(), lazy[2].flags, lazy[2].stat_read),
            ("iou-wrk", PF_NO_SETAFFINITY, true)
        );
        assert!(!lazy[1].stat_read, "not asked for");
    }

    /// A fixture with threads 10, 20-21 and 30, and 20's process in a child cgroup.
    fn tree_with_a_child_cgroup(
        layout: crate::sys::fixture::CgroupLayout,
    ) -> (tempfile::TempDir, Sys, String) {
        use crate::sys::fixture::{add_process, FixtureBuilder, FixtureTask};
        let tmp = tempfile::tempdir().unwrap();
        let sys = FixtureBuilder::new(tmp.path(), 2)
            .layout(layout)
            .build()
            .unwrap();
        let task = |name: &str| FixtureTask {
            name: name.into(),
            flags: 0,
            cpus: CpuSet::parse_list("0-1").unwrap(),
        };
        add_process(&sys, 10, &[task("a")]).unwrap();
        add_process(&sys, 20, &[task("b"), task("b2")]).unwrap();
        add_process(&sys, 30, &[task("c")]).unwrap();
        let mount = match layout {
            crate::sys::fixture::CgroupLayout::V1 => "sys/fs/cgroup/cpuset",
            _ => "sys/fs/cgroup",
        };
        sys.mkdir(&format!("{mount}/rt")).unwrap();
        if layout == crate::sys::fixture::CgroupLayout::V1 {
            sys.write(&format!("{mount}/rt/cpuset.cpus"), "1").unwrap();
            sys.write(&format!("{mount}/rt/cpuset.mems"), "0").unwrap();
        }
        sys.write(&format!("{mount}/rt/cgroup.procs"), "20")
            .unwrap();
        (tmp, sys, mount.to_string())
    }

    #[test]
    fn cgroup_thread_lists_give_what_each_threads_file_gives() {
        use crate::sys::fixture::CgroupLayout;
        for (layout, hierarchy) in [
            (CgroupLayout::V2, Hierarchy::Unified),
            (CgroupLayout::V1, Hierarchy::CpusetV1),
        ] {
            let (_tmp, sys, mount) = tree_with_a_child_cgroup(layout);
            let members = cgroup_members(&sys, &mount, hierarchy).unwrap();
            let mut listed: Vec<(i32, &str)> =
                members.iter().map(|(t, c)| (*t, c.as_str())).collect();
            listed.sort();
            assert_eq!(
                listed,
                [(10, "/"), (20, "/rt"), (21, "/rt"), (30, "/")],
                "{layout:?}"
            );
            let by_lists = read_all_threads(
                &sys,
                CgroupSource {
                    hierarchy,
                    mount: Some(&mount),
                },
            )
            .unwrap();
            let by_files = read_all_threads(&sys, CgroupSource::per_thread(hierarchy)).unwrap();
            assert_eq!(by_lists, by_files, "{layout:?}");
            assert_eq!(
                sys.read(&format!("{mount}/rt/cgroup.procs")).unwrap(),
                "20\n",
                "{layout:?}: cgroup.procs lists processes"
            );
        }
    }

    #[test]
    fn a_thread_listed_twice_or_missed_is_read_from_proc() {
        // A plain tree (no fixture): the lists are files as they were read
        // while thread 20 moved from / to /a and thread 30 was forked.
        let tmp = tempfile::tempdir().unwrap();
        let sys = Sys::at(tmp.path());
        let put = |rel: &str, text: &str| {
            let path = sys.path(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        put("cg/cgroup.threads", "10\n20\n");
        put("cg/a/cgroup.threads", "20\n40\n");
        put("cg/a/b/cgroup.threads", "");
        put("sys/devices/system/cpu/online", "0-1\n");
        for (tid, cg) in [(10, "/"), (20, "/a"), (30, "/a/b")] {
            put(
                &format!("proc/{tid}/task/{tid}/stat"),
                &format!("{tid} (t) S 1 {tid} {tid} 0 -1 0 0\n"),
            );
            put(
                &format!("proc/{tid}/task/{tid}/status"),
                "Cpus_allowed_list:\t0-1\n",
            );
            put(
                &format!("proc/{tid}/task/{tid}/cgroup"),
                &format!("0::{cg}\n"),
            );
        }
        // Thread 40 has no cgroup file: only the list can place it.
        put("proc/40/task/40/stat", "40 (t) S 1 40 40 0 -1 0 0\n");
        put("proc/40/task/40/status", "Cpus_allowed_list:\t0-1\n");
        let members = cgroup_members(&sys, "cg", Hierarchy::Unified).unwrap();
        assert_eq!(members.len(), 2, "{members:?}");
        assert_eq!((members[&10].as_str(), members[&40].as_str()), ("/", "/a"));
        let source = CgroupSource {
            hierarchy: Hierarchy::Unified,
            mount: Some("cg"),
        };
        let cgroups: Vec<(i32, String)> = read_all_threads(&sys, source)
            .unwrap()
            .into_iter()
            .map(|t| (t.tid, t.cgroup))
            .collect();
        assert_eq!(
            cgroups,
            [
                (10, "/".into()),
                (20, "/a".into()),
                (30, "/a/b".into()),
                (40, "/a".into())
            ]
        );
        // Lists that name cgroups unlike /proc (a mount of a subtree) are
        // not used at all.
        put("proc/10/task/10/cgroup", "0::/sub\n");
        let cgroups: Vec<String> = read_all_threads(&sys, source)
            .unwrap()
            .into_iter()
            .map(|t| t.cgroup)
            .collect();
        assert_eq!(
            cgroups,
            ["/sub", "/a", "/a/b"],
            "40 is not placed by the lists"
        );
    }

    #[test]
    fn mounts_with_escapes() {
        let m = parse_mounts("cgroup2 /sys/fs/cgroup/a\\040b cgroup2 rw 0 0\nshort\n");
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].target, "/sys/fs/cgroup/a b");
        assert_eq!(m[0].fstype, "cgroup2");
    }

    #[test]
    fn a_name_that_is_not_utf8_is_read_not_refused() {
        use crate::sys::fixture::add_process;
        let (_tmp, sys) = two_cpu_fixture();
        add_process(&sys, 10, &[task("placeholder", 0)]).unwrap();
        add_process(&sys, 20, &[task("plain", 0)]).unwrap();
        // A task named "\xff) R 1 (\n" by prctl: stat and comm print it
        // as it is, status escapes the newline.
        let name: &[u8] = b"\xff) R 1 (\n";
        for file in ["task/10/stat", "task/10/status", "comm"] {
            let path = sys.path(&format!("proc/10/{file}"));
            let text = std::fs::read(&path).unwrap_or_else(|_| b"placeholder\n".to_vec());
            let at = text
                .windows(b"placeholder".len())
                .position(|w| w == b"placeholder")
                .unwrap();
            let shown: &[u8] = if file.ends_with("status") {
                b"\xff) R 1 (\\n"
            } else {
                name
            };
            let mut out = text[..at].to_vec();
            out.extend_from_slice(shown);
            out.extend_from_slice(&text[at + b"placeholder".len()..]);
            std::fs::write(&path, out).unwrap();
        }
        let threads = read_all_threads(&sys, CgroupSource::per_thread(Hierarchy::Unified))
            .expect("a task's name does not fail the read of every task");
        assert_eq!(threads.len(), 2);
        assert_eq!(threads[0].name, "\u{fffd}) R 1 (\n");
        assert_eq!(threads[0].flags, 0, "the fields after the name");
        assert_eq!(threads[1].name, "plain");
        assert_eq!(
            read_comm(&sys, 10).as_deref(),
            Some("\u{fffd}) R 1 (\n"),
            "comm loses only the kernel's newline"
        );
        assert!(super::super::holds_task_bytes("proc/10/stat"));
        assert!(super::super::holds_task_bytes("/proc/interrupts"));
        assert!(!super::super::holds_task_bytes(
            "proc/sys/kernel/sched_rt_runtime_us"
        ));
        assert!(!super::super::holds_task_bytes(
            "run/cpushield/journal/state.json"
        ));
    }

    #[test]
    fn a_cgroup_name_ending_in_a_carriage_return_keeps_it() {
        // Found by a_cgroup_path_with_colons_is_read_whole: `lines()` took
        // the `\r` off, naming another cgroup.
        assert_eq!(
            parse_cgroup("0::/user.slice/a\r\n", Hierarchy::Unified).as_deref(),
            Some("/user.slice/a\r")
        );
    }

    #[test]
    fn comm_is_not_trimmed() {
        assert_eq!(parse_comm("irqbalance\n"), "irqbalance");
        assert_eq!(parse_comm("irqbalance\n\n"), "irqbalance\n");
        assert_eq!(parse_comm(" irqbalance\n"), " irqbalance");
        assert_eq!(parse_comm(""), "");
    }

    #[test]
    fn status_cpus_from_the_last_line_with_the_key() {
        // A raw newline in the name (the kernel escapes it, but the parser
        // does not count on that).
        let status = "Name:\tx\nCpus_allowed_list:\t0-63\nState:\tR (running)\nCpus_allowed:\t4\nCpus_allowed_list:\t2\n";
        assert_eq!(parse_status_cpus(status).unwrap().to_string(), "2");
    }

    mod generated {
        use super::super::*;
        use proptest::prelude::*;

        /// Text that looks like the fields around a name.
        const FRAGMENTS: &[&str] = &[
            ")",
            "(",
            " ",
            "\n",
            "\t",
            ":",
            "0",
            "42",
            "-1",
            ") R 1 2 (",
            ") S ",
            " 4194560 ",
            "Cpus_allowed_list:\t",
            "0-63",
            "LOC:",
            " 5:",
            "\u{fffd}",
            "\\n",
        ];

        /// A task's name as a /proc reader gets it: bytes (but NUL) read
        /// with U+FFFD for what is not UTF-8, or pieces of /proc text.
        fn name(max: usize) -> impl Strategy<Value = String> {
            prop_oneof![
                proptest::collection::vec(1u8..=255, 0..=max)
                    .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
                proptest::collection::vec(proptest::sample::select(FRAGMENTS), 0..6)
                    .prop_map(|parts| parts.concat()),
                "\\PC{0,16}",
            ]
        }

        fn cpus() -> impl Strategy<Value = CpuSet> {
            proptest::collection::vec(0u32..256, 0..12).prop_map(|v| v.into_iter().collect())
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(1024))]

            /// `stat`: whatever the name, it comes back whole and every
            /// field after it stays in its place.
            #[test]
            fn a_stat_name_never_moves_a_field(
                name in name(64),
                state in proptest::sample::select(&['R', 'S', 'D', 'Z', 'T', 't', 'X', 'I', 'P'][..]),
                fields in proptest::collection::vec(-1i64..1_000_000_000_000, 49),
                pid in 1i32..4_194_304,
            ) {
                let rest: Vec<String> = fields.iter().map(|f| f.to_string()).collect();
                let line = format!("{pid} ({name}) {state} {}\n", rest.join(" "));
                let (got, after) = split_stat(&line).expect("parses");
                prop_assert_eq!(got, name.as_str());
                prop_assert_eq!(after.len(), 50);
                prop_assert_eq!(after[0], state.to_string());
                for (n, f) in (4..=52).zip(&fields) {
                    prop_assert_eq!(stat_field::<i64>(&after, n), Some(*f), "field {}", n);
                }
                let flags = fields[9 - 4];
                prop_assert_eq!(parse_stat(&line).map(|(_, f)| f), u64::try_from(flags).ok());
            }

            /// `stat` bytes with any name bytes read lossily give the
            /// name read lossily: a byte of the name never joins a field.
            #[test]
            fn a_stat_name_of_any_bytes_reads_as_that_name(
                raw in proptest::collection::vec(1u8..=255, 0..=64),
                flags in any::<u32>(),
            ) {
                let mut line = b"42 (".to_vec();
                line.extend_from_slice(&raw);
                line.extend_from_slice(format!(") S 1 42 42 0 -1 {flags} 0 0 0 0\n").as_bytes());
                let text = String::from_utf8_lossy(&line);
                let (got, f) = parse_stat(&text).expect("parses");
                prop_assert_eq!(got, String::from_utf8_lossy(&raw));
                prop_assert_eq!(f, u64::from(flags));
            }

            /// `status`: whatever the name, even with raw newlines, the
            /// allowed CPUs are the task's.
            #[test]
            fn a_status_name_never_moves_the_allowed_cpus(name in name(64), allowed in cpus()) {
                prop_assume!(!allowed.is_empty());
                let status = format!(
                    "Name:\t{name}\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t7\nPid:\t7\n\
                     Cpus_allowed:\t{}\nCpus_allowed_list:\t{allowed}\nMems_allowed:\t1\n\
                     Mems_allowed_list:\t0\nvoluntary_ctxt_switches:\t3\n",
                    allowed.to_mask(256)
                );
                prop_assert_eq!(parse_status_cpus(&status), Some(allowed));
            }

            /// `comm`: the name without the kernel's newline, nothing else
            /// taken off.
            #[test]
            fn comm_gives_the_name_back(name in name(15)) {
                let comm = format!("{name}\n");
                prop_assert_eq!(parse_comm(&comm), name.as_str());
            }

            /// `/proc/interrupts`: device names of any characters but a
            /// newline (drivers choose them; the one part users choose,
            /// a network interface's name, holds no white space) never
            /// move an IRQ's label or counts, and the description ends
            /// with the name.
            #[test]
            fn an_irq_name_never_moves_a_count(
                ncpus in 1usize..6,
                lines in proptest::collection::vec(
                    (0u32..512, proptest::collection::vec(any::<u64>(), 6), name(40)),
                    1..8,
                ),
            ) {
                let header: String = (0..ncpus).map(|c| format!("       CPU{c}")).collect();
                let mut text = format!("{header}\n");
                let mut want = Vec::new();
                for (irq, counts, name) in &lines {
                    let name = name.replace('\n', " ");
                    let counts = &counts[..ncpus];
                    let cols: String = counts.iter().map(|c| format!(" {c:>10}")).collect();
                    text.push_str(&format!("{irq:>3}:{cols}  IO-APIC   {irq}-edge      {name}\n"));
                    want.push((irq.to_string(), counts.to_vec(), format!("IO-APIC   {irq}-edge      {name}")));
                }
                text.push_str(&format!("LOC:{}   Local timer interrupts\n", " 1".repeat(ncpus)));
                let (cols, got) = parse_interrupts(&text);
                prop_assert_eq!(cols, (0..ncpus as u32).collect::<Vec<_>>());
                prop_assert_eq!(got.len(), want.len() + 1);
                for (g, (label, counts, description)) in got.iter().zip(&want) {
                    prop_assert_eq!(&g.label, label);
                    prop_assert_eq!(&g.counts, counts);
                    prop_assert_eq!(g.description.as_str(), description.trim());
                }
                prop_assert_eq!(&got[want.len()].counts, &vec![1u64; ncpus]);
            }

            /// An interface-like name (no white space) is the IRQ's device
            /// name whatever else it holds.
            #[test]
            fn an_irq_device_name_without_white_space_is_read_whole(name in "[^\\s]{1,40}") {
                let line = format!("           CPU0\n 30:          5  PCI-MSIX-0000:00:03.0 1-edge      {name}\n");
                let (_, got) = parse_interrupts(&line);
                prop_assert_eq!(irq_device_name(&got[0].description), name);
            }

            /// A newline in an IRQ's name (no kernel writes one) may add a
            /// line; the lines around it keep their labels and counts.
            #[test]
            fn a_newline_in_an_irq_name_leaves_the_other_lines_alone(name in name(40)) {
                let text = format!(
                    "           CPU0       CPU1\n 24:          1          2  IO-APIC 1-edge  {name}\n 25:          3          4  IO-APIC 2-edge  b\nLOC:          5          6   Local timer interrupts\n"
                );
                let (_, got) = parse_interrupts(&text);
                let first = &got[0];
                prop_assert_eq!((first.label.as_str(), first.counts.as_slice()), ("24", &[1u64, 2][..]));
                let tail: Vec<(&str, &[u64])> = got[got.len() - 2..]
                    .iter()
                    .map(|l| (l.label.as_str(), l.counts.as_slice()))
                    .collect();
                prop_assert_eq!(tail, vec![("25", &[3u64, 4][..]), ("LOC", &[5u64, 6][..])]);
            }

            /// `/proc/softirqs` (the same table reader): every vector's
            /// counts come back in their CPU's column, whatever the width
            /// of the numbers, and a table cut anywhere loses only the cut
            /// line and what follows it.
            #[test]
            fn softirqs_counts_stay_in_their_columns(
                counts in proptest::collection::vec(proptest::collection::vec(any::<u64>(), 4), 10),
                cut in 0usize..2_000,
            ) {
                const VECTORS: [&str; 10] = ["HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU"];
                let mut text = "                    CPU0       CPU1       CPU2       CPU3       \n".to_string();
                for (v, row) in VECTORS.iter().zip(&counts) {
                    text.push_str(&format!("{v:>12}:"));
                    for c in row {
                        text.push_str(&format!(" {c:>10}"));
                    }
                    text.push('\n');
                }
                let (cpus, lines) = parse_interrupts(&text);
                prop_assert_eq!(cpus, vec![0, 1, 2, 3]);
                let got: Vec<(&str, &[u64])> = lines.iter().map(|l| (l.label.as_str(), &l.counts[..])).collect();
                let want: Vec<(&str, &[u64])> = VECTORS.iter().copied().zip(counts.iter().map(|r| &r[..])).collect();
                prop_assert_eq!(got, want);
                let at = cut.min(text.len());
                let whole = text[..at].matches('\n').count().saturating_sub(1);
                let (_, lines) = parse_interrupts(&text[..at]);
                for (l, row) in lines.iter().zip(&counts).take(whole) {
                    prop_assert_eq!(&l.counts[..], &row[..]);
                }
            }

            /// Real files cut at any point, and any text: no panic.
            #[test]
            fn cut_or_random_text_never_panics(cut in 0usize..400, junk in "\\PC{0,200}") {
                let stat = "1234 (a) b) c) S 1 1234 1234 0 -1 4194560 120 0 0 0 3 4 0 0 20 0 1 0 567 1000 50 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n";
                let status = "Name:\tsh\nState:\tS (sleeping)\nCpus_allowed:\tf\nCpus_allowed_list:\t0-3\n";
                let irqs = "           CPU0       CPU1\n  0:         44          0   IO-APIC   2-edge      timer\nLOC:     120431     118338   Local timer interrupts\nERR:          0\n";
                for text in [stat, status, irqs, junk.as_str()] {
                    let mut at = cut.min(text.len());
                    while !text.is_char_boundary(at) {
                        at -= 1;
                    }
                    let part = &text[..at];
                    let _ = parse_stat(part);
                    if let Some((_, f)) = split_stat(part) {
                        let _ = stat_field::<u64>(&f, 22);
                        let _ = stat_field::<u64>(&f, 2);
                    }
                    let _ = parse_status_cpus(part);
                    let _ = parse_comm(part);
                    let (_, lines) = parse_interrupts(part);
                    for l in lines {
                        let _ = irq_device_name(&l.description);
                    }
                    let _ = parse_cgroup(part, Hierarchy::Unified);
                    let _ = kthread_kind(part);
                }
            }

            /// `/proc/PID/cgroup`: a cgroup's path may hold `:` (not a
            /// newline: the kernel refuses that name).
            #[test]
            fn a_cgroup_path_with_colons_is_read_whole(path in "/[^\\n]{0,40}") {
                let text = format!("12:cpuset:/rt\n0::{path}\n");
                prop_assert_eq!(parse_cgroup(&text, Hierarchy::Unified), Some(path));
                prop_assert_eq!(parse_cgroup(&text, Hierarchy::CpusetV1), Some("/rt".to_string()));
            }
        }
    }
}
