//! Fixture roots: a temporary directory laid out like `/proc` and `/sys`
//! that stands in for the kernel in tests.
//!
//! A root holding [`MARKER`] is a fixture. Its marker holds a JSON
//! [`FixtureConfig`] describing how the emulated kernel misbehaves. The
//! emulation models the kernel rules cpushield depends on, each observed on
//! real kernels (see tests/vm/KERNEL-NOTES.md):
//! - writes to cgroup files never create files; a missing file is ENOENT;
//! - moving a task into a cpuset resets its affinity to the cpuset's CPUs
//!   (6.1 forgets what the task asked for; `keep_affinity_on_move` models 6.12);
//! - kernel threads cannot join a v2 cgroup (EINVAL), nor can kthreadd or
//!   per-CPU kernel threads join a v1 cpuset; per-CPU kernel threads
//!   (`PF_NO_SETAFFINITY`) refuse any affinity change (EINVAL);
//! - `sched_setaffinity` is masked by the task's cpuset; an empty result is EINVAL;
//! - a task cannot join a v1 cpuset with no CPUs or no memory nodes (ENOSPC);
//! - a partition write always succeeds, and an invalid partition reads back
//!   `isolated invalid (reason)`; a sibling's overlapping `cpuset.cpus`
//!   invalidates an existing partition;
//!   the invalid state is sticky until the partition type is written again;
//! - on 6.12 (`workqueue_excludes_isolated`) the workqueue cpumask reads
//!   without the isolated partitions' CPUs, and a write sets the request;
//! - IRQs listed in `refuse` fail with their errno (IRQ 0/2: EIO, managed
//!   queues: EPERM); `effective_affinity_list` lags for IRQs in `effective_lag`;
//! - a cgroup with tasks or children cannot be removed (EBUSY);
//! - writing 0 / 1 to `cpuN/online` takes the CPU out of / back into the
//!   online list; going offline breaks the affinity of IRQs left with no
//!   online CPU (managed ones keep theirs) and shrinks partitions; IRQs in
//!   `respread_on_online` get every online CPU when a CPU comes online;
//! - `mount -t cgroup2` needs cgroup2 in `/proc/filesystems` (ENODEV) and
//!   an existing directory (ENOENT); it adds a `/proc/self/mounts` line and
//!   the root cgroup's files, with the controllers no v1 hierarchy holds;
//!   `umount` of a mount with another one below it is EBUSY;
//! - a process's `stat`, `status` and `cgroup` are its leader thread's
//!   (hard links to the leader's task files, changed in place).
//!
//! With `CPUSHIELD_FIXTURE_CRASH_AFTER=k` in the environment, the process
//! kills itself with SIGKILL at its (k+1)-th kernel write: fault injection
//! for the undo tests.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::procfs::{self, Hierarchy, PF_KTHREAD, PF_NO_SETAFFINITY};
use super::systemd::SystemdCall;
use super::{Result, Sys, SysError};
use crate::cpulist::CpuSet;

/// Marker file whose presence makes a root a fixture root.
pub const MARKER: &str = ".cpushield-fixture";
/// The emulated systemd manager environment (`NAME=value` lines), beside
/// the marker; absent when empty.
pub const MANAGER_ENVIRONMENT: &str = ".cpushield-fixture-manager-environment";

/// `env` (`NAME=value` lines) without the variable `name`.
fn without_variable(env: &str, name: &str) -> String {
    env.lines()
        .filter(|l| l.split('=').next() != Some(name))
        .map(|l| format!("{l}\n"))
        .collect()
}
/// Environment variable for fault injection: kill self at the (k+1)-th write.
pub const CRASH_ENV: &str = "CPUSHIELD_FIXTURE_CRASH_AFTER";

/// How the emulated kernel misbehaves; stored as JSON in the marker file.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct FixtureConfig {
    /// Paths (relative to the root) whose writes fail, with the errno name
    /// (`EIO`, `EPERM`, `EINVAL`, `EACCES`).
    pub refuse: BTreeMap<String, String>,
    /// When set, every partition reads back invalid with this reason.
    pub partition_invalid: Option<String>,
    /// Model 6.12: a cgroup move keeps the task's requested affinity (masked).
    pub keep_affinity_on_move: bool,
    /// IRQ numbers whose effective affinity does not follow a new affinity.
    pub effective_lag: Vec<u32>,
    /// Model 6.12: the unbound-workqueue cpumask reads as the requested
    /// mask without the CPUs of isolated partitions, and a write sets the
    /// requested mask. The requested mask lives in the fixture-only file
    /// [`WQ_REQUESTED`] beside it, so a tree comparison sees it.
    pub workqueue_excludes_isolated: bool,
    /// IRQ numbers whose driver sets their affinity to every online CPU
    /// when a CPU comes online (virtio-net's CPU hotplug callbacks).
    pub respread_on_online: Vec<u32>,
}

/// Fixture-only file holding the requested workqueue mask under
/// [`FixtureConfig::workqueue_excludes_isolated`].
pub const WQ_REQUESTED: &str = "sys/devices/virtual/workqueue/cpumask.requested";
const WQ_MASK: &str = "sys/devices/virtual/workqueue/cpumask";
/// Why a partition left with no online CPU is invalid; it heals when one returns.
const HOTPLUG_INVALID: &str = "No cpu available due to hotplug";

/// Kernel emulation for a fixture root.
#[derive(Debug, Clone)]
pub struct Fixture {
    config: FixtureConfig,
    writes: Arc<AtomicUsize>,
    crash_after: Option<usize>,
    tid_index: Arc<Mutex<HashMap<i32, i32>>>,
    mounts: Arc<Mutex<Option<Arc<Vec<procfs::Mount>>>>>,
    emulation_ns: Arc<AtomicU64>,
    cache: Arc<Cache>,
}

/// What the emulation read before and may read again without a file
/// operation. Entries are kept and used only while this process holds the
/// cpushield lock ([`Fixture::lock_taken`]): then no other cpushield
/// changes the tree, only this fixture writes these files, and each write
/// updates or drops the entries it could change. Without the lock (a test
/// reading the tree after running the binary, say) every read goes to the files.
#[derive(Debug, Default)]
struct Cache {
    /// How many cpushield locks this process holds now.
    held: AtomicUsize,
    /// Per-thread entries, sharded by tid so that the threads spreading
    /// task changes over the CPUs seldom wait for each other.
    tasks: [Mutex<TaskEntries>; 16],
    /// Contents of cgroup files (`cpuset.cpus`, `cpuset.mems`,
    /// `cpuset.cpus.effective`) by path; dropped by any cgroup change.
    cgroup_files: Mutex<HashMap<String, String>>,
    /// The online CPUs; dropped by CPU hotplug.
    online: Mutex<Option<CpuSet>>,
}

/// What [`Cache`] knows of threads, by tid.
#[derive(Debug, Default)]
struct TaskEntries {
    /// (comm, `PF_*` flags) from `stat`: fixed for a thread's life.
    stat: HashMap<i32, (String, u64)>,
    /// `/proc/PID/task/TID/cgroup`: only a cgroup move changes it.
    cgroup: HashMap<i32, String>,
    /// `/proc/PID/task/TID/status`: only an affinity change changes it.
    status: HashMap<i32, String>,
}

impl Cache {
    fn active(&self) -> bool {
        self.held.load(Ordering::SeqCst) > 0
    }

    /// Runs `f` on the entries of thread `tid`'s shard; `None` while no
    /// lock is held (nothing is kept then).
    fn task<T>(&self, tid: i32, f: impl FnOnce(&mut TaskEntries) -> T) -> Option<T> {
        if !self.active() {
            return None;
        }
        let shard = &self.tasks[tid.unsigned_abs() as usize % self.tasks.len()];
        Some(f(&mut shard.lock().expect("fixture cache lock")))
    }

    fn clear(&self) {
        for shard in &self.tasks {
            *shard.lock().expect("fixture cache lock") = TaskEntries::default();
        }
        self.cgroup_files
            .lock()
            .expect("fixture cache lock")
            .clear();
        *self.online.lock().expect("fixture cache lock") = None;
    }
}

fn errno(n: i32) -> io::Error {
    io::Error::from_raw_os_error(n)
}

fn errno_by_name(name: &str) -> i32 {
    match name {
        "EIO" => libc::EIO,
        "EPERM" => libc::EPERM,
        "EACCES" => libc::EACCES,
        "EBUSY" => libc::EBUSY,
        "ENOSPC" => libc::ENOSPC,
        _ => libc::EINVAL,
    }
}

impl Fixture {
    /// A fixture when `root` holds the marker file.
    pub fn detect(root: &Path) -> Option<Fixture> {
        let text = fs::read_to_string(root.join(MARKER)).ok()?;
        let config = if text.trim().is_empty() {
            FixtureConfig::default()
        } else {
            serde_json::from_str(&text).unwrap_or_default()
        };
        let crash_after = std::env::var(CRASH_ENV).ok().and_then(|v| v.parse().ok());
        Some(Fixture {
            config,
            writes: Arc::new(AtomicUsize::new(0)),
            crash_after,
            tid_index: Arc::new(Mutex::new(HashMap::new())),
            mounts: Arc::default(),
            emulation_ns: Arc::default(),
            cache: Arc::default(),
        })
    }

    /// The emulated kernel's configuration.
    pub fn config(&self) -> &FixtureConfig {
        &self.config
    }

    /// Number of kernel writes made so far through this fixture.
    pub fn writes(&self) -> usize {
        self.writes.load(Ordering::SeqCst)
    }

    /// Wall-clock time spent emulating kernel calls (writes, mkdir, rmdir,
    /// affinity calls): the part of a benchmark that a real kernel does in
    /// one syscall each.
    pub fn emulation_time(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.emulation_ns.load(Ordering::Relaxed))
    }

    /// Runs one emulated kernel call, adding its time to [`Fixture::emulation_time`].
    pub(super) fn timed<T>(&self, call: impl FnOnce() -> T) -> T {
        let t = std::time::Instant::now();
        let out = call();
        self.emulation_ns
            .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        out
    }

    /// `(comm, flags)` of a thread, from its `stat` (cached: both are fixed
    /// for the thread's life).
    fn stat_of(&self, sys: &Sys, pid: i32, tid: i32) -> io::Result<(String, u64)> {
        if let Some(Some(hit)) = self.cache.task(tid, |t| t.stat.get(&tid).cloned()) {
            return Ok(hit);
        }
        let stat = super::read_small(&sys.path(&format!("proc/{pid}/task/{tid}/stat")))?;
        let parsed = procfs::parse_stat(&stat).unwrap_or_default();
        self.cache.task(tid, |t| t.stat.insert(tid, parsed.clone()));
        Ok(parsed)
    }

    /// A cgroup file's contents (cached until the next cgroup change).
    fn cgroup_file(&self, sys: &Sys, rel: &str) -> io::Result<String> {
        if !self.cache.active() {
            return super::read_small(&sys.path(rel));
        }
        let mut files = self.cache.cgroup_files.lock().expect("fixture cache lock");
        if let Some(hit) = files.get(rel) {
            return Ok(hit.clone());
        }
        let text = super::read_small(&sys.path(rel))?;
        files.insert(rel.to_string(), text.clone());
        Ok(text)
    }

    /// The online CPUs (cached while the lock is held, see [`Cache`]).
    fn online(&self, sys: &Sys) -> io::Result<CpuSet> {
        if !self.cache.active() {
            return procfs::online_cpus(sys).map_err(|e| e.source);
        }
        let mut online = self.cache.online.lock().expect("fixture cache lock");
        if let Some(hit) = &*online {
            return Ok(hit.clone());
        }
        let read = procfs::online_cpus(sys).map_err(|e| e.source)?;
        *online = Some(read.clone());
        Ok(read)
    }

    /// A cgroup file holding a cpulist.
    fn cgroup_cpus(&self, sys: &Sys, rel: &str) -> io::Result<CpuSet> {
        CpuSet::parse_list(&self.cgroup_file(sys, rel)?)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    fn forget_cgroup_files(&self) {
        self.cache
            .cgroup_files
            .lock()
            .expect("fixture cache lock")
            .clear();
    }

    /// Whether any thread's `/proc/PID/task/TID/cgroup` places it in `cg`
    /// (every thread of the tree as it is now, not only those of the tid index).
    fn has_tasks(&self, sys: &Sys, hierarchy: Hierarchy, cg: &str) -> bool {
        let mut now = HashMap::new();
        index_tree(sys, &mut now);
        let threads: Vec<(i32, i32)> = now.into_iter().collect();
        !self.threads_in(sys, hierarchy, cg, &threads).is_empty()
    }

    /// The (tid, pid) of `threads` whose `cgroup` file places them in `cg`.
    fn threads_in(
        &self,
        sys: &Sys,
        hierarchy: Hierarchy,
        cg: &str,
        threads: &[(i32, i32)],
    ) -> Vec<(i32, i32)> {
        let parts = super::in_parallel(threads, 512, |part| {
            part.iter()
                .filter(|(tid, pid)| {
                    self.task_cgroup(sys, *pid, *tid).is_ok_and(|text| {
                        procfs::parse_cgroup(&text, hierarchy).as_deref() == Some(cg)
                    })
                })
                .copied()
                .collect::<Vec<_>>()
        });
        parts.concat()
    }

    pub(super) fn count_write(&self) {
        let n = self.writes.fetch_add(1, Ordering::SeqCst);
        if self.crash_after == Some(n) {
            // Fault injection: die the way SIGKILL kills, no cleanup at all.
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
            std::process::abort();
        }
    }

    fn refused(&self, rel: &str) -> Option<io::Error> {
        self.config
            .refuse
            .get(rel.trim_start_matches('/'))
            .map(|e| errno(errno_by_name(e)))
    }

    pub(super) fn write(&self, sys: &Sys, rel: &str, data: &str) -> Result<()> {
        let err = |e: io::Error| SysError::new("write", rel, Some(data), e);
        self.count_write();
        if let Some(e) = self.refused(rel) {
            return Err(err(e));
        }
        let path = sys.path(rel);
        if !path.is_file() {
            return Err(err(errno(libc::ENOENT)));
        }
        let file = path.file_name().and_then(|f| f.to_str()).unwrap_or("");
        let dir = rel.rsplit_once('/').map_or("", |(d, _)| d);
        if !matches!(file, "cgroup.procs" | "tasks" | "cgroup.threads") {
            self.forget_cgroup_files();
        }
        match file {
            "cgroup.procs" | "tasks" | "cgroup.threads" => {
                self.move_task(sys, dir, file, data.trim()).map_err(err)
            }
            "cpuset.cpus.partition" => self.write_partition(sys, dir, data.trim()).map_err(err),
            "cpuset.cpus" => self.write_cpuset_cpus(sys, dir, data.trim()).map_err(err),
            "cgroup.subtree_control" => self.write_subtree_control(sys, rel, data).map_err(err),
            "smp_affinity_list" | "smp_affinity" if dir.starts_with("proc/irq/") => {
                self.write_irq(sys, dir, file, data.trim()).map_err(err)
            }
            _ if rel == WQ_MASK && self.config.workqueue_excludes_isolated => {
                let requested = CpuSet::parse_mask(data).map_err(|_| err(errno(libc::EINVAL)))?;
                fs::write(sys.path(WQ_REQUESTED), format!("{}\n", data.trim())).map_err(err)?;
                // The isolated CPUs as the root cgroup shows them, wherever
                // cgroup2 is mounted (none when it is not).
                let isolated = self
                    .mount_of(sys, Hierarchy::Unified)
                    .and_then(|m| sys.read_cpulist(&format!("{m}/cpuset.cpus.isolated")).ok())
                    .unwrap_or_default();
                self.refresh_workqueue_mask(sys, &requested, &isolated)
                    .map_err(err)
            }
            "online" if cpu_of_dir(dir).is_some() => self
                .write_cpu_online(sys, rel, cpu_of_dir(dir).unwrap_or(0), data.trim())
                .map_err(err),
            // The kernel prints what it stores in its own format, newline-terminated.
            _ => fs::write(&path, format!("{}\n", data.trim_end())).map_err(err),
        }
    }

    pub(super) fn mkdir(&self, sys: &Sys, rel: &str) -> Result<()> {
        self.count_write();
        self.make_cgroup(sys, rel)
    }

    /// `mkdir` of a cgroup: the kernel's files appear in it.
    fn make_cgroup(&self, sys: &Sys, rel: &str) -> Result<()> {
        let err = |e: io::Error| SysError::new("mkdir", rel, None, e);
        self.forget_cgroup_files();
        let path = sys.path(rel);
        fs::create_dir(&path).map_err(err)?;
        let parent = path.parent().expect("cgroup has a parent").to_path_buf();
        let put = |name: &str, value: &str| fs::write(path.join(name), value).map_err(err);
        if parent.join("cgroup.controllers").exists() {
            let enabled =
                fs::read_to_string(parent.join("cgroup.subtree_control")).unwrap_or_default();
            put("cgroup.procs", "")?;
            put("cgroup.threads", "")?;
            put("cgroup.type", "domain\n")?;
            put("cgroup.controllers", &enabled)?;
            put("cgroup.subtree_control", "")?;
            if enabled.split_whitespace().any(|c| c == "cpuset") {
                let eff =
                    fs::read_to_string(parent.join("cpuset.cpus.effective")).unwrap_or_default();
                let mems =
                    fs::read_to_string(parent.join("cpuset.mems.effective")).unwrap_or_default();
                put("cpuset.cpus", "\n")?;
                put("cpuset.mems", "\n")?;
                put("cpuset.cpus.effective", &eff)?;
                put("cpuset.mems.effective", &mems)?;
                put("cpuset.cpus.partition", "member\n")?;
            }
        } else if parent.join("cpuset.cpus").exists() {
            put("cpuset.cpus", "\n")?;
            put("cpuset.mems", "\n")?;
            put("cpuset.effective_cpus", "\n")?;
            put("cpuset.cpu_exclusive", "0\n")?;
            put("cpuset.mem_exclusive", "0\n")?;
            put("cpuset.sched_load_balance", "1\n")?;
            put("tasks", "")?;
            put("cgroup.procs", "")?;
        }
        Ok(())
    }

    /// A system tool as the fixture models it. `update-grub` is
    /// grub-mkconfig's part that matters here, run by the real shell:
    /// `etc/default/grub` and then every `etc/default/grub.d/*.cfg` are
    /// sourced, and `boot/grub/grub.cfg` gets a normal entry's `linux` line
    /// with `GRUB_CMDLINE_LINUX` and `GRUB_CMDLINE_LINUX_DEFAULT`, and a
    /// recovery entry's with `GRUB_CMDLINE_LINUX` only. It fails (exit 1,
    /// nothing generated) while `etc/default/grub` holds `FIXTURE_FAIL`.
    pub(super) fn run_tool(&self, sys: &Sys, argv: &[&str]) -> Result<()> {
        let shown = argv.join(" ");
        let err = |e: io::Error| SysError::new("run", shown.clone(), None, e);
        if argv != ["update-grub"] {
            return Err(err(io::Error::other(
                "the fixture emulates only update-grub",
            )));
        }
        const MKCONFIG: &str = r#"set -e
grep -q FIXTURE_FAIL etc/default/grub && { echo "update-grub: fixture failure" >&2; exit 1; }
. ./etc/default/grub
for f in ./etc/default/grub.d/*.cfg; do [ -e "$f" ] && . "$f"; done
mkdir -p boot/grub
{
  echo "menuentry 'Debian GNU/Linux' {"
  echo "	linux	/boot/vmlinuz root=/dev/vda1 ro $GRUB_CMDLINE_LINUX $GRUB_CMDLINE_LINUX_DEFAULT"
  echo "}"
  echo "menuentry 'Debian GNU/Linux (recovery mode)' {"
  echo "	linux	/boot/vmlinuz root=/dev/vda1 ro single $GRUB_CMDLINE_LINUX"
  echo "}"
} > boot/grub/grub.cfg.new
mv boot/grub/grub.cfg.new boot/grub/grub.cfg
"#;
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(MKCONFIG)
            .current_dir(sys.root())
            .output()
            .map_err(err)?;
        if !out.status.success() {
            return Err(err(io::Error::other(format!(
                "{} ({})",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ))));
        }
        Ok(())
    }

    /// systemd as the fixture models it (one kernel write a call, as a
    /// crash can only fall between calls): a transient slice is a cgroup
    /// under the root with `cpuset.cpus` set, for which systemd enables
    /// `+cpuset` in the root while the slice needs it; a transient scope a
    /// cgroup in its slice holding the given processes; stop removes the
    /// unit's cgroup (processes still inside are moved to the root: the
    /// fixture has no signals) and takes `+cpuset` away again when the
    /// slice had brought it. Transient unit files are written under
    /// `run/systemd/transient` as systemd does. Reload and restart change
    /// nothing in the tree.
    pub(super) fn systemd(&self, sys: &Sys, call: &SystemdCall) -> Result<()> {
        self.count_write();
        let shown = call.command_line().join(" ");
        let err = |e: io::Error| SysError::new("run", shown.clone(), None, e);
        let transient = |unit: &str| format!("run/systemd/transient/{unit}");
        match call {
            SystemdCall::StartSlice {
                unit,
                cpus,
                cgroup_dir,
            } => {
                let parent = parent_rel(cgroup_dir).to_string();
                let control = format!("{parent}/cgroup.subtree_control");
                let had_cpuset = sys
                    .read(&control)
                    .is_ok_and(|t| t.split_whitespace().any(|c| c == "cpuset"));
                if !had_cpuset {
                    self.write_subtree_control(sys, &control, "+cpuset")
                        .map_err(err)?;
                }
                fs::create_dir_all(sys.path("run/systemd/transient")).map_err(err)?;
                fs::write(
                    sys.path(&transient(unit)),
                    format!(
                        "[Slice]\nAllowedCPUs={cpus}\n# fixture: enabled cpuset={}\n",
                        !had_cpuset
                    ),
                )
                .map_err(err)?;
                self.make_cgroup(sys, cgroup_dir)?;
                self.write_cpuset_cpus(sys, cgroup_dir, &cpus.to_string())
                    .map_err(err)
            }
            SystemdCall::SetAllowedCpus {
                unit,
                cpus,
                cgroup_dir,
            } => {
                let file = sys.path(&transient(unit));
                let text = fs::read_to_string(&file).map_err(err)?;
                let text: String = text
                    .lines()
                    .map(|l| {
                        if l.starts_with("AllowedCPUs=") {
                            format!("AllowedCPUs={cpus}\n")
                        } else {
                            format!("{l}\n")
                        }
                    })
                    .collect();
                fs::write(&file, text).map_err(err)?;
                self.write_cpuset_cpus(sys, cgroup_dir, &cpus.to_string())
                    .map_err(err)
            }
            SystemdCall::StartScope {
                unit,
                pids,
                cgroup_dir,
                ..
            } => {
                fs::create_dir_all(sys.path("run/systemd/transient")).map_err(err)?;
                fs::write(sys.path(&transient(unit)), "[Scope]\n").map_err(err)?;
                self.make_cgroup(sys, cgroup_dir)?;
                for pid in pids {
                    self.move_task(sys, cgroup_dir, "cgroup.procs", &pid.to_string())
                        .map_err(err)?;
                }
                Ok(())
            }
            SystemdCall::Stop { unit } => {
                let file = sys.path(&transient(unit));
                let Ok(text) = fs::read_to_string(&file) else {
                    return Ok(());
                };
                let Some(mount) = self.mount_of(sys, Hierarchy::Unified) else {
                    return Ok(());
                };
                let dir = find_dir(sys, &mount, unit).unwrap_or_default();
                if !dir.is_empty() {
                    self.remove_unit_cgroup(sys, &mount, &dir).map_err(err)?;
                }
                fs::remove_file(&file).map_err(err)?;
                if text.contains("enabled cpuset=true") {
                    self.write_subtree_control(
                        sys,
                        &format!("{mount}/cgroup.subtree_control"),
                        "-cpuset",
                    )
                    .map_err(err)?;
                }
                Ok(())
            }
            SystemdCall::TryRestart { unit } if unit == "irqbalance.service" => {
                self.restart_irqbalance(sys).map_err(err)
            }
            SystemdCall::SetEnvironment { assignments } => {
                let mut env = self.manager_environment(sys);
                for a in assignments {
                    let name = a.split('=').next().unwrap_or("");
                    env = without_variable(&env, name);
                    env.push_str(&format!("{a}\n"));
                }
                self.store_manager_environment(sys, &env).map_err(err)
            }
            SystemdCall::UnsetEnvironment { names } => {
                let env = names.iter().fold(self.manager_environment(sys), |env, n| {
                    without_variable(&env, n)
                });
                self.store_manager_environment(sys, &env).map_err(err)
            }
            SystemdCall::DaemonReload | SystemdCall::TryRestart { .. } => Ok(()),
        }
    }

    /// The manager environment (`systemctl show-environment`): kept in
    /// [`MANAGER_ENVIRONMENT`], absent when empty.
    pub(super) fn manager_environment(&self, sys: &Sys) -> String {
        fs::read_to_string(sys.path(MANAGER_ENVIRONMENT)).unwrap_or_default()
    }

    fn store_manager_environment(&self, sys: &Sys, env: &str) -> io::Result<()> {
        let path = sys.path(MANAGER_ENVIRONMENT);
        if env.trim().is_empty() {
            match fs::remove_file(&path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            }
        } else {
            fs::write(path, env)
        }
    }

    /// irqbalance restarted by systemd: its environment (`proc/PID/environ`
    /// of a running process named `irqbalance`) becomes the manager's
    /// environment, overridden by what the unit's runtime environment file
    /// of cpushield's drop-in sets, if the drop-in is there. A fixture
    /// without such a process or environ file is left as is.
    fn restart_irqbalance(&self, sys: &Sys) -> io::Result<()> {
        let Some(pid) = procfs::list_pids(sys)
            .map_err(|e| e.source)?
            .into_iter()
            .find(|pid| {
                sys.read(&format!("proc/{pid}/stat"))
                    .is_ok_and(|st| st.contains("(irqbalance)"))
            })
        else {
            return Ok(());
        };
        let environ = format!("proc/{pid}/environ");
        if !sys.exists(&environ) {
            return Ok(());
        }
        let dir = "run/systemd/system/irqbalance.service.d";
        let unit_env = if sys.exists(&format!("{dir}/50-cpushield.conf")) {
            sys.read(&format!("{dir}/cpushield.env"))
                .unwrap_or_default()
        } else {
            String::new()
        };
        let assignments = |text: &str| -> Vec<String> {
            text.lines()
                .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
                .map(str::to_string)
                .collect()
        };
        let mut env = self.manager_environment(sys);
        for a in assignments(&unit_env) {
            env = without_variable(&env, a.split('=').next().unwrap_or(""));
            env.push_str(&format!("{a}\n"));
        }
        let vars: Vec<String> = assignments(&env)
            .into_iter()
            .map(|l| format!("{l}\0"))
            .collect();
        fs::write(sys.path(&environ), vars.concat())
    }

    /// Removes a unit's cgroup and those below it, moving their processes
    /// to the root cgroup first.
    fn remove_unit_cgroup(&self, sys: &Sys, mount: &str, dir: &str) -> io::Result<()> {
        for child in sys.subdirs(dir).map_err(|e| e.source)? {
            self.remove_unit_cgroup(sys, mount, &format!("{dir}/{child}"))?;
        }
        let procs = sys.read(&format!("{dir}/cgroup.procs")).unwrap_or_default();
        for pid in procs.split_whitespace() {
            self.move_task(sys, mount, "cgroup.procs", pid)?;
        }
        self.forget_cgroup_files();
        fs::remove_dir_all(sys.path(dir))?;
        self.recompute_partitions(sys, mount);
        Ok(())
    }

    pub(super) fn rmdir(&self, sys: &Sys, rel: &str) -> Result<()> {
        let err = |e: io::Error| SysError::new("rmdir", rel, None, e);
        self.count_write();
        self.forget_cgroup_files();
        let path = sys.path(rel);
        if !path.is_dir() {
            return Err(err(errno(libc::ENOENT)));
        }
        let has_child = fs::read_dir(&path)
            .map_err(err)?
            .flatten()
            .any(|e| e.path().is_dir());
        let (hierarchy, cg) = self
            .cgroup_of_dir(sys, rel)
            .ok_or_else(|| err(errno(libc::EINVAL)))?;
        let populated = self.has_tasks(sys, hierarchy, &cg);
        if has_child || populated {
            return Err(err(errno(libc::EBUSY)));
        }
        fs::remove_dir_all(&path).map_err(err)?;
        if hierarchy == Hierarchy::Unified {
            self.recompute_partitions(sys, parent_rel(rel));
        }
        Ok(())
    }

    /// `sched_getaffinity`: the thread's mask without offline CPUs (the
    /// kernel masks it with the active CPUs; `status` shows it whole).
    pub(super) fn affinity(&self, sys: &Sys, tid: i32) -> Result<CpuSet> {
        self.on_task(sys, tid, |pid| self.task_status(sys, pid, tid))
            .map(|text| {
                let mask = procfs::parse_status_cpus(&text).unwrap_or_default();
                match self.online(sys) {
                    Ok(online) => mask.intersection(&online),
                    Err(_) => mask,
                }
            })
            .map_err(|e| SysError::new("get affinity of", format!("task {tid}"), None, e))
    }

    pub(super) fn set_affinity(&self, sys: &Sys, tid: i32, cpus: &CpuSet) -> Result<()> {
        let err = |e: io::Error| {
            SysError::new(
                "set affinity of",
                format!("task {tid}"),
                Some(&cpus.to_string()),
                e,
            )
        };
        self.count_write();
        self.on_task(sys, tid, |pid| {
            let (_, flags) = self.stat_of(sys, pid, tid)?;
            if flags & PF_NO_SETAFFINITY != 0 {
                return Err(errno(libc::EINVAL));
            }
            let allowed = self.cpuset_cpus_of_task(sys, pid, tid)?;
            let effective = cpus.intersection(&allowed);
            if effective.is_empty() {
                return Err(errno(libc::EINVAL));
            }
            self.store_affinity(sys, pid, tid, &effective)
        })
        .map_err(err)
    }

    fn store_affinity(&self, sys: &Sys, pid: i32, tid: i32, cpus: &CpuSet) -> io::Result<()> {
        self.update_affinity(sys, pid, tid, |_| cpus.clone())
    }

    /// A thread's `/proc/PID/task/TID/status` (cached, see [`Cache`]).
    fn task_status(&self, sys: &Sys, pid: i32, tid: i32) -> io::Result<String> {
        self.task_file(sys, pid, tid, "status", |t| &mut t.status)
    }

    /// A thread's `/proc/PID/task/TID/<file>`, kept in `entries(cache)`.
    fn task_file(
        &self,
        sys: &Sys,
        pid: i32,
        tid: i32,
        file: &str,
        entries: fn(&mut TaskEntries) -> &mut HashMap<i32, String>,
    ) -> io::Result<String> {
        if let Some(Some(hit)) = self.cache.task(tid, |t| entries(t).get(&tid).cloned()) {
            return Ok(hit);
        }
        let text = super::read_small(&sys.path(&format!("proc/{pid}/task/{tid}/{file}")))?;
        self.cache
            .task(tid, |t| entries(t).insert(tid, text.clone()));
        Ok(text)
    }

    /// Rewrites a thread's affinity in its `status` (and the process's, for
    /// a leader, which the fixture keeps equal) to `new_of(current)`.
    fn update_affinity(
        &self,
        sys: &Sys,
        pid: i32,
        tid: i32,
        new_of: impl Fn(&CpuSet) -> CpuSet,
    ) -> io::Result<()> {
        let text = self.task_status(sys, pid, tid)?;
        let cpus = new_of(&procfs::parse_status_cpus(&text).unwrap_or_default());
        let mut body: String = text
            .lines()
            .map(|l| {
                if l.starts_with("Cpus_allowed_list:") {
                    format!("Cpus_allowed_list:\t{cpus}\n")
                } else if l.starts_with("Cpus_allowed:") {
                    format!("Cpus_allowed:\t{}\n", cpus.to_mask(1))
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        // A leader's `proc/PID/status` is the same file (see [`add_process`]).
        overwrite(&sys.path(&format!("proc/{pid}/task/{tid}/status")), &body)?;
        body.shrink_to_fit();
        self.cache.task(tid, |t| t.status.insert(tid, body));
        Ok(())
    }

    /// Reads the kernel files the emulation makes up rather than stores:
    /// the thread and process lists of a cgroup (`cgroup.threads`,
    /// `cgroup.procs`, v1 `tasks`), from the threads' own `cgroup` files,
    /// as the kernel lists them from its own records. `None` for any other file.
    pub(super) fn read(&self, sys: &Sys, rel: &str) -> Option<io::Result<String>> {
        let (dir, file) = rel.rsplit_once('/')?;
        if file == "stat" {
            return self.read_stat(sys, dir);
        }
        if !matches!(file, "cgroup.procs" | "cgroup.threads" | "tasks") {
            return None;
        }
        let (hierarchy, cg) = self.cgroup_of_dir(sys, dir)?;
        let procs = match (file, hierarchy) {
            ("cgroup.procs", _) => true,
            ("cgroup.threads", Hierarchy::Unified) | ("tasks", Hierarchy::CpusetV1) => false,
            _ => return None,
        };
        if !sys.path(dir).is_dir() {
            return Some(Err(errno(libc::ENOENT)));
        }
        Some(Ok(self.timed(|| self.members(sys, hierarchy, &cg, procs))))
    }

    /// Reads a thread's `stat` (`dir` is `proc/PID/task/TID`) from its file,
    /// keeping its name and flags for the emulation's own later checks
    /// while the lock is held. `None` for any other directory.
    fn read_stat(&self, sys: &Sys, dir: &str) -> Option<io::Result<String>> {
        if !self.cache.active() {
            return None;
        }
        let mut parts = dir.strip_prefix("proc/")?.split('/');
        let (_pid, task, tid) = (parts.next()?, parts.next()?, parts.next()?);
        let tid: i32 = tid.parse().ok().filter(|_| task == "task")?;
        let text = super::read_small(&sys.path(&format!("{dir}/stat")));
        if let Ok(Some(parsed)) = text.as_deref().map(procfs::parse_stat) {
            self.cache.task(tid, |t| t.stat.insert(tid, parsed));
        }
        Some(text)
    }

    /// The threads (or, with `procs`, the processes) whose `cgroup` file
    /// places them in `cg`, one id a line, ascending. Threads are those of
    /// the tid index (built when empty), so one added to the tree after it
    /// was built is missing until the index is rebuilt: as when a thread
    /// forks after the kernel's list was read.
    fn members(&self, sys: &Sys, hierarchy: Hierarchy, cg: &str, procs: bool) -> String {
        let threads: Vec<(i32, i32)> = {
            let mut index = self.tid_index.lock().expect("tid index lock");
            if index.is_empty() {
                index_tree(sys, &mut index);
            }
            index.iter().map(|(tid, pid)| (*tid, *pid)).collect()
        };
        let mut ids: Vec<i32> = self
            .threads_in(sys, hierarchy, cg, &threads)
            .into_iter()
            .map(|(tid, pid)| if procs { pid } else { tid })
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids.iter().map(|id| format!("{id}\n")).collect()
    }

    /// The process a thread belongs to, from an index of the tree (built on
    /// a miss). A hit is not checked against the tree: callers go through
    /// [`Fixture::on_task`], which looks again when the thread is gone.
    fn pid_of(&self, sys: &Sys, tid: i32) -> Option<i32> {
        let mut index = self.tid_index.lock().expect("tid index lock");
        if let Some(pid) = index.get(&tid) {
            return Some(*pid);
        }
        if sys.path(&format!("proc/{tid}/task/{tid}")).is_dir() {
            return Some(tid);
        }
        index_tree(sys, &mut index);
        index.get(&tid).copied()
    }

    /// Runs `call` with the process of thread `tid`. When the thread's files
    /// are gone (it exited, or the index is stale), forgets what the index
    /// and caches knew of it and tries once more with a fresh lookup;
    /// ESRCH when there is no such thread.
    fn on_task<T>(
        &self,
        sys: &Sys,
        tid: i32,
        call: impl Fn(i32) -> io::Result<T>,
    ) -> io::Result<T> {
        let gone = |e: &io::Error| e.kind() == io::ErrorKind::NotFound;
        let pid = self.pid_of(sys, tid).ok_or_else(|| errno(libc::ESRCH))?;
        match call(pid) {
            Err(e) if gone(&e) => {
                self.tid_index.lock().expect("tid index lock").remove(&tid);
                self.cache.task(tid, |t| {
                    t.cgroup.remove(&tid);
                    t.status.remove(&tid);
                });
                let pid = self.pid_of(sys, tid).ok_or_else(|| errno(libc::ESRCH))?;
                call(pid).map_err(|e| if gone(&e) { errno(libc::ESRCH) } else { e })
            }
            other => other,
        }
    }

    /// This process took the cpushield lock: another process may have
    /// changed the tree before, so everything known is dropped; from now
    /// until [`Fixture::lock_released`], what the emulation reads is cached.
    pub fn lock_taken(&self) {
        self.tid_index.lock().expect("tid index lock").clear();
        self.cache.clear();
        self.cache.held.fetch_add(1, Ordering::SeqCst);
    }

    /// This process released the cpushield lock: nothing is cached any more.
    pub fn lock_released(&self) {
        let _ = self
            .cache
            .held
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        if !self.cache.active() {
            self.cache.clear();
        }
    }

    /// A thread's `/proc/PID/task/TID/cgroup` (cached, see [`Cache`]).
    fn task_cgroup(&self, sys: &Sys, pid: i32, tid: i32) -> io::Result<String> {
        self.task_file(sys, pid, tid, "cgroup", |t| &mut t.cgroup)
    }

    /// The fixture's mount table (read once; only [`Fixture::mount_cgroup2`]
    /// and [`Fixture::umount`] change it).
    fn mounts(&self, sys: &Sys) -> Arc<Vec<procfs::Mount>> {
        let mut cached = self.mounts.lock().expect("mount table lock");
        cached
            .get_or_insert_with(|| {
                Arc::new(procfs::parse_mounts(&sys.read(MOUNTS).unwrap_or_default()))
            })
            .clone()
    }

    /// `mount -t cgroup2`: adds the mount to `/proc/self/mounts` and the
    /// root cgroup's files to the (existing, empty) directory. The
    /// controllers are those not bound to a mounted v1 hierarchy. ENODEV
    /// when `/proc/filesystems` has no cgroup2, ENOENT without the directory.
    pub(super) fn mount_cgroup2(&self, sys: &Sys, rel: &str) -> Result<()> {
        let err = |e: io::Error| SysError::new("mount cgroup2 on", rel, None, e);
        self.count_write();
        let filesystems = sys.read("proc/filesystems").unwrap_or_default();
        if !filesystems.split_whitespace().any(|f| f == "cgroup2") {
            return Err(err(errno(libc::ENODEV)));
        }
        if !sys.path(rel).is_dir() {
            return Err(err(errno(libc::ENOENT)));
        }
        let mounts = self.mounts(sys);
        let controllers: Vec<&str> = CGROUP2_CONTROLLERS
            .iter()
            .copied()
            .filter(|c| {
                !mounts
                    .iter()
                    .any(|m| m.fstype == "cgroup" && m.options.split(',').any(|o| o == *c))
            })
            .collect();
        let online = procfs::online_cpus(sys).map_err(|e| err(e.source))?;
        write_cgroup2_root(&sys.path(rel), &online, &controllers.join(" "), "").map_err(err)?;
        let target = format!("/{}", rel.trim_start_matches('/'));
        let mut table = sys.read(MOUNTS).map_err(|e| err(e.source))?;
        table.push_str(&format!(
            "cgroup2 {target} cgroup2 rw,nosuid,nodev,noexec,relatime 0 0\n"
        ));
        fs::write(sys.path(MOUNTS), table).map_err(err)?;
        *self.mounts.lock().expect("mount table lock") = None;
        self.forget_cgroup_files();
        Ok(())
    }

    /// `umount`: EINVAL when nothing is mounted at `rel`, EBUSY while
    /// something is mounted below it; otherwise the mount leaves
    /// `/proc/self/mounts` and its files leave the directory.
    pub(super) fn umount(&self, sys: &Sys, rel: &str) -> Result<()> {
        let err = |e: io::Error| SysError::new("umount", rel, None, e);
        self.count_write();
        let target = format!("/{}", rel.trim_start_matches('/'));
        let text = sys.read(MOUNTS).map_err(|e| err(e.source))?;
        let lines: Vec<&str> = text.lines().collect();
        let on_target = |l: &&str| l.split_whitespace().nth(1) == Some(target.as_str());
        let Some(last) = lines.iter().rposition(on_target) else {
            return Err(err(errno(libc::EINVAL)));
        };
        let below = format!("{target}/");
        if lines.iter().any(|l| {
            l.split_whitespace()
                .nth(1)
                .is_some_and(|t| t.starts_with(&below))
        }) {
            return Err(err(errno(libc::EBUSY)));
        }
        let kept: String = lines
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != last)
            .map(|(_, l)| format!("{l}\n"))
            .collect();
        for entry in fs::read_dir(sys.path(rel)).map_err(err)?.flatten() {
            let p = entry.path();
            if p.is_dir() {
                fs::remove_dir_all(&p).map_err(err)?;
            } else {
                fs::remove_file(&p).map_err(err)?;
            }
        }
        fs::write(sys.path(MOUNTS), kept).map_err(err)?;
        *self.mounts.lock().expect("mount table lock") = None;
        self.forget_cgroup_files();
        Ok(())
    }

    fn cgroup_of_dir(&self, sys: &Sys, rel: &str) -> Option<(Hierarchy, String)> {
        let mounts = self.mounts(sys);
        let abs = format!("/{}", rel.trim_start_matches('/'));
        mounts
            .iter()
            .filter(|m| {
                (m.fstype == "cgroup2"
                    || (m.fstype == "cgroup" && m.options.split(',').any(|o| o == "cpuset")))
                    && (abs == m.target || abs.starts_with(&format!("{}/", m.target)))
            })
            .max_by_key(|m| m.target.len())
            .map(|m| {
                let h = if m.fstype == "cgroup2" {
                    Hierarchy::Unified
                } else {
                    Hierarchy::CpusetV1
                };
                let cg = abs[m.target.len()..].to_string();
                (h, if cg.is_empty() { "/".to_string() } else { cg })
            })
    }

    fn mount_of(&self, sys: &Sys, hierarchy: Hierarchy) -> Option<String> {
        self.mounts(sys)
            .iter()
            .find(|m| match hierarchy {
                Hierarchy::Unified => m.fstype == "cgroup2",
                Hierarchy::CpusetV1 => {
                    m.fstype == "cgroup" && m.options.split(',').any(|o| o == "cpuset")
                }
            })
            .map(|m| m.target.trim_start_matches('/').to_string())
    }

    /// The CPUs the task's cpuset allows (online CPUs when it has none).
    fn cpuset_cpus_of_task(&self, sys: &Sys, pid: i32, tid: i32) -> io::Result<CpuSet> {
        let text = self.task_cgroup(sys, pid, tid)?;
        for h in [Hierarchy::CpusetV1, Hierarchy::Unified] {
            let (Some(cg), Some(mount)) = (procfs::parse_cgroup(&text, h), self.mount_of(sys, h))
            else {
                continue;
            };
            let dir = format!("{mount}{}", if cg == "/" { String::new() } else { cg });
            let file = match h {
                Hierarchy::Unified => "cpuset.cpus.effective",
                Hierarchy::CpusetV1 => "cpuset.cpus",
            };
            if let Ok(set) = self.cgroup_cpus(sys, &format!("{dir}/{file}")) {
                if !set.is_empty() {
                    return Ok(set);
                }
            }
        }
        Ok(procfs::online_cpus(sys).unwrap_or_default())
    }

    fn move_task(&self, sys: &Sys, dir: &str, file: &str, data: &str) -> io::Result<()> {
        let id: i32 = data.parse().map_err(|_| errno(libc::EINVAL))?;
        let (hierarchy, cg) = self
            .cgroup_of_dir(sys, dir)
            .ok_or_else(|| errno(libc::EINVAL))?;
        self.on_task(sys, id, |pid| {
            self.move_task_of(sys, pid, id, file, &cg, hierarchy, dir)
        })
    }

    /// [`Fixture::move_task`] once the process `pid` of task `id` is known.
    #[allow(clippy::too_many_arguments)]
    fn move_task_of(
        &self,
        sys: &Sys,
        pid: i32,
        id: i32,
        file: &str,
        cg: &str,
        hierarchy: Hierarchy,
        dir: &str,
    ) -> io::Result<()> {
        let tids = if file == "cgroup.procs" {
            procfs::list_tids(sys, pid).map_err(|e| e.source)?
        } else {
            vec![id]
        };
        let (name, flags) = self.stat_of(sys, pid, id)?;
        // kthreadd carries `no_cgroup_migration`: it never changes cgroup.
        if flags & PF_KTHREAD != 0
            && (hierarchy == Hierarchy::Unified
                || flags & PF_NO_SETAFFINITY != 0
                || name == "kthreadd")
        {
            return Err(errno(libc::EINVAL));
        }
        let cpus = match hierarchy {
            Hierarchy::CpusetV1 => {
                let cpus = self.cgroup_cpus(sys, &format!("{dir}/cpuset.cpus"))?;
                let mems = self.cgroup_file(sys, &format!("{dir}/cpuset.mems"))?;
                if cpus.is_empty() || mems.trim().is_empty() {
                    return Err(errno(libc::ENOSPC));
                }
                cpus
            }
            Hierarchy::Unified => self
                .cgroup_cpus(sys, &format!("{dir}/cpuset.cpus.effective"))
                .ok()
                .filter(|c| !c.is_empty())
                .unwrap_or_else(|| procfs::online_cpus(sys).unwrap_or_default()),
        };
        for tid in tids {
            let rel = format!("proc/{pid}/task/{tid}/cgroup");
            let text = self.task_cgroup(sys, pid, tid)?;
            let updated: Vec<String> = text
                .lines()
                .map(|l| {
                    let mut parts = l.splitn(3, ':');
                    let (id_, ctrls) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
                    let hit = match hierarchy {
                        Hierarchy::Unified => ctrls.is_empty(),
                        Hierarchy::CpusetV1 => ctrls.split(',').any(|c| c == "cpuset"),
                    };
                    if hit {
                        format!("{id_}:{ctrls}:{cg}")
                    } else {
                        l.to_string()
                    }
                })
                .collect();
            let body = updated.join("\n") + "\n";
            overwrite(&sys.path(&rel), &body)?;
            self.cache.task(tid, |t| t.cgroup.insert(tid, body.clone()));
            self.update_affinity(sys, pid, tid, |old| {
                if self.config.keep_affinity_on_move && old.intersects(&cpus) {
                    old.intersection(&cpus)
                } else {
                    cpus.clone()
                }
            })?;
        }
        Ok(())
    }

    fn write_subtree_control(&self, sys: &Sys, rel: &str, data: &str) -> io::Result<()> {
        let path = sys.path(rel);
        let dir = path.parent().expect("file has a dir");
        let available = fs::read_to_string(dir.join("cgroup.controllers"))?;
        let mut enabled: Vec<String> = fs::read_to_string(&path)?
            .split_whitespace()
            .map(str::to_string)
            .collect();
        for word in data.split_whitespace() {
            let (add, name) = match word.split_at(1) {
                ("+", n) => (true, n),
                ("-", n) => (false, n),
                _ => return Err(errno(libc::EINVAL)),
            };
            if !available.split_whitespace().any(|c| c == name) {
                return Err(errno(libc::ENOENT));
            }
            enabled.retain(|c| c != name);
            if add {
                enabled.push(name.to_string());
            }
        }
        fs::write(&path, enabled.join(" ") + "\n")
    }

    fn write_cpuset_cpus(&self, sys: &Sys, dir: &str, data: &str) -> io::Result<()> {
        let cpus = CpuSet::parse_list(data).map_err(|_| errno(libc::EINVAL))?;
        if !procfs::present_cpus(sys)
            .map_err(|e| e.source)?
            .is_superset_of(&cpus)
        {
            return Err(errno(libc::EINVAL));
        }
        fs::write(sys.path(&format!("{dir}/cpuset.cpus")), format!("{cpus}\n"))?;
        if sys.exists(&format!("{dir}/cpuset.cpus.partition")) {
            self.recompute_partitions(sys, parent_rel(dir));
        } else if sys.exists(&format!("{dir}/cpuset.effective_cpus")) {
            fs::write(
                sys.path(&format!("{dir}/cpuset.effective_cpus")),
                format!("{cpus}\n"),
            )?;
        }
        Ok(())
    }

    fn write_partition(&self, sys: &Sys, dir: &str, data: &str) -> io::Result<()> {
        if !matches!(data, "member" | "root" | "isolated") {
            return Err(errno(libc::EINVAL));
        }
        fs::write(
            sys.path(&format!("{dir}/cpuset.cpus.partition")),
            format!("{data}\n"),
        )?;
        self.recompute_partitions(sys, parent_rel(dir));
        Ok(())
    }

    /// Re-validates the partitions among the children of `parent` and
    /// recomputes effective CPUs, the way the kernel does after any change.
    fn recompute_partitions(&self, sys: &Sys, parent: &str) {
        let before = self.effective_cpus_below(sys, parent);
        self.recompute_partition_files(sys, parent);
        let after = self.effective_cpus_below(sys, parent);
        let changed: Vec<(String, CpuSet, CpuSet)> = after
            .into_iter()
            .filter_map(|(dir, new)| {
                let old = before.get(&dir)?.clone();
                (old != new).then_some((dir, old, new))
            })
            .collect();
        if !changed.is_empty() {
            self.follow_effective_cpus(sys, &changed);
        }
    }

    /// `cpuset.cpus.effective` of `parent` and of each cgroup directly
    /// below it, by directory.
    fn effective_cpus_below(&self, sys: &Sys, parent: &str) -> BTreeMap<String, CpuSet> {
        let mut dirs = vec![parent.to_string()];
        dirs.extend(
            sys.subdirs(parent)
                .unwrap_or_default()
                .into_iter()
                .map(|c| format!("{parent}/{c}")),
        );
        dirs.into_iter()
            .filter_map(|d| {
                let cpus = sys
                    .read_cpulist(&format!("{d}/cpuset.cpus.effective"))
                    .ok()?;
                Some((d, cpus))
            })
            .collect()
    }

    /// The kernel's `update_tasks_cpumask`: when a cgroup's effective CPUs
    /// change, each of its tasks gets them as its affinity, except those no
    /// one may move (`PF_NO_SETAFFINITY`). 6.1 forgets the task's own mask;
    /// 6.12 (`keep_affinity_on_move`) keeps what the task asked for within
    /// the new CPUs, modelled as: a task whose mask was the old effective
    /// CPUs asked for nothing.
    fn follow_effective_cpus(&self, sys: &Sys, changed: &[(String, CpuSet, CpuSet)]) {
        let by_cgroup: HashMap<String, (&CpuSet, &CpuSet)> = changed
            .iter()
            .filter_map(|(dir, old, new)| {
                let (h, cg) = self.cgroup_of_dir(sys, dir)?;
                (h == Hierarchy::Unified).then_some((cg, (old, new)))
            })
            .collect();
        let Some(mount) = self.mount_of(sys, Hierarchy::Unified) else {
            return;
        };
        // A cgroup without the cpuset controller (no cpuset files) belongs
        // to its nearest ancestor's cpuset.
        let mut cpuset_of: HashMap<String, Option<(&CpuSet, &CpuSet)>> = HashMap::new();
        let mut change_of = |cg: &str| -> Option<(&CpuSet, &CpuSet)> {
            let mut at = cg.to_string();
            loop {
                if let Some(hit) = cpuset_of.get(&at) {
                    return *hit;
                }
                if let Some(change) = by_cgroup.get(&at) {
                    return *cpuset_of.entry(cg.to_string()).or_insert(Some(*change));
                }
                let dir = if at == "/" {
                    mount.clone()
                } else {
                    format!("{mount}{at}")
                };
                match procfs::parent_cgroup(&at) {
                    Some(parent) if !sys.exists(&format!("{dir}/cpuset.cpus.effective")) => {
                        at = parent.to_string()
                    }
                    _ => return *cpuset_of.entry(cg.to_string()).or_insert(None),
                }
            }
        };
        let mut index = HashMap::new();
        index_tree(sys, &mut index);
        for (tid, pid) in index {
            let Ok(text) = self.task_cgroup(sys, pid, tid) else {
                continue;
            };
            let Some((old, new)) =
                procfs::parse_cgroup(&text, Hierarchy::Unified).and_then(|cg| change_of(&cg))
            else {
                continue;
            };
            let Ok((_, flags)) = self.stat_of(sys, pid, tid) else {
                continue;
            };
            if flags & PF_NO_SETAFFINITY != 0 {
                continue;
            }
            let keep = self.config.keep_affinity_on_move;
            let _ = self.update_affinity(sys, pid, tid, |mask| {
                let asked = mask.intersection(new);
                if keep && mask != old && !asked.is_empty() {
                    asked
                } else {
                    new.clone()
                }
            });
        }
    }

    fn recompute_partition_files(&self, sys: &Sys, parent: &str) {
        let parent_eff = sys
            .read_cpulist(&format!("{parent}/cpuset.cpus.effective"))
            .unwrap_or_default();
        let is_root = !sys.exists(&format!("{parent}/cpuset.cpus.partition"));
        let base = if is_root {
            procfs::online_cpus(sys).unwrap_or(parent_eff)
        } else {
            parent_eff
        };
        let children: Vec<String> = sys
            .list(parent)
            .unwrap_or_default()
            .into_iter()
            .map(|n| format!("{parent}/{n}"))
            .filter(|d| sys.path(d).is_dir() && sys.exists(&format!("{d}/cpuset.cpus.partition")))
            .collect();
        let cpus_of = |d: &str| {
            sys.read_cpulist(&format!("{d}/cpuset.cpus"))
                .unwrap_or_default()
        };
        let online = procfs::online_cpus(sys).unwrap_or_default();
        let mut taken = CpuSet::new();
        let mut isolated = CpuSet::new();
        for d in &children {
            let text = sys
                .read_trimmed(&format!("{d}/cpuset.cpus.partition"))
                .unwrap_or_default();
            let kind = text
                .split_whitespace()
                .next()
                .unwrap_or("member")
                .to_string();
            if kind == "member" {
                continue;
            }
            let configured = cpus_of(d);
            // Offline CPUs drop out of a partition; with none left it is
            // invalid until one comes back (seen on 6.1).
            let cpus = configured.intersection(&online);
            // Any other invalid state stays after its cause is gone, until
            // the partition type is written again (KERNEL-NOTES 8).
            let sticky = text
                .split_once(" invalid")
                .map(|(_, r)| r.trim().trim_start_matches('(').trim_end_matches(')'))
                .filter(|r| *r != HOTPLUG_INVALID)
                .map(|r| if r.is_empty() { "no longer valid" } else { r });
            let overlap = children
                .iter()
                .filter(|o| *o != d)
                .any(|o| cpus_of(o).intersects(&configured));
            let reason = if let Some(r) = &self.config.partition_invalid {
                Some(r.clone())
            } else if !configured.is_empty() && cpus.is_empty() {
                Some(HOTPLUG_INVALID.to_string())
            } else if let Some(r) = sticky {
                Some(r.to_string())
            } else if cpus.is_empty() {
                Some("cpuset.cpus is empty".to_string())
            } else if overlap {
                Some("Cpu list in cpuset.cpus not exclusive".to_string())
            } else if !cpus.is_subset(&base) || cpus == base {
                Some("Parent unable to distribute cpu downstream".to_string())
            } else {
                None
            };
            let value = match &reason {
                Some(r) => format!("{kind} invalid ({r})\n"),
                None => {
                    taken = taken.union(&cpus);
                    if kind == "isolated" {
                        isolated = isolated.union(&cpus);
                    }
                    format!("{kind}\n")
                }
            };
            let _ = fs::write(sys.path(&format!("{d}/cpuset.cpus.partition")), value);
            let eff = if reason.is_none() {
                cpus
            } else {
                base.difference(&taken)
            };
            let _ = fs::write(
                sys.path(&format!("{d}/cpuset.cpus.effective")),
                format!("{eff}\n"),
            );
        }
        let remaining = base.difference(&taken);
        for d in &children {
            let text = sys
                .read_trimmed(&format!("{d}/cpuset.cpus.partition"))
                .unwrap_or_default();
            if text == "member" {
                let own = cpus_of(d);
                let eff = if own.is_empty() {
                    remaining.clone()
                } else {
                    own.intersection(&remaining)
                };
                let _ = fs::write(
                    sys.path(&format!("{d}/cpuset.cpus.effective")),
                    format!("{eff}\n"),
                );
            }
        }
        if is_root {
            let _ = fs::write(
                sys.path(&format!("{parent}/cpuset.cpus.effective")),
                format!("{remaining}\n"),
            );
            if sys.exists(&format!("{parent}/cpuset.cpus.isolated")) {
                let _ = fs::write(
                    sys.path(&format!("{parent}/cpuset.cpus.isolated")),
                    format!("{isolated}\n"),
                );
            }
            if self.config.workqueue_excludes_isolated {
                if let Ok(requested) = sys.read_cpumask(WQ_REQUESTED) {
                    let _ = self.refresh_workqueue_mask(sys, &requested, &isolated);
                }
            }
        }
    }

    /// 6.12: the readable workqueue mask is the requested one without the
    /// isolated partitions' CPUs (KERNEL-NOTES 15).
    fn refresh_workqueue_mask(
        &self,
        sys: &Sys,
        requested: &CpuSet,
        isolated: &CpuSet,
    ) -> io::Result<()> {
        let bits = mask_bits(sys)?;
        let readable = match requested.difference(isolated) {
            r if r.is_empty() => requested.clone(),
            r => r,
        };
        fs::write(sys.path(WQ_MASK), format!("{}\n", readable.to_mask(bits)))
    }

    /// CPU hotplug: 0 takes the CPU out of the online list, 1 brings it
    /// back (either is accepted when already so). Going offline, an IRQ
    /// with no other online CPU in its affinity gets the online CPUs (its
    /// affinity is broken, and stays so after the CPU comes back), except
    /// refusing (kernel-managed) IRQs, which keep theirs; an effective
    /// affinity on the CPU moves to another online CPU. Sleeping tasks keep
    /// their affinity (seen on 6.1: a task pinned to the CPU still shows it).
    fn write_cpu_online(&self, sys: &Sys, rel: &str, cpu: u32, data: &str) -> io::Result<()> {
        let up = match data {
            "1" => true,
            "0" => false,
            _ => return Err(errno(libc::EINVAL)),
        };
        let mut online = procfs::online_cpus(sys).map_err(|e| e.source)?;
        if up {
            online.insert(cpu);
        } else {
            online = online.difference(&[cpu].into_iter().collect());
            if online.is_empty() {
                return Err(errno(libc::EBUSY));
            }
        }
        fs::write(sys.path(rel), if up { "1\n" } else { "0\n" })?;
        *self.cache.online.lock().expect("fixture cache lock") = None;
        fs::write(
            sys.path("sys/devices/system/cpu/online"),
            format!("{online}\n"),
        )?;
        if !up {
            self.break_irq_affinities(sys, &online)?;
        } else {
            let ncpus = mask_bits(sys)?;
            for irq in &self.config.respread_on_online {
                let dir = format!("proc/irq/{irq}");
                if sys.exists(&format!("{dir}/smp_affinity_list")) {
                    store_irq_affinity(sys, &dir, &online, ncpus)?;
                }
            }
        }
        if let Some(mount) = self.mount_of(sys, Hierarchy::Unified) {
            if sys.exists(&format!("{mount}/cpuset.cpus.effective")) {
                self.recompute_partitions(sys, &mount);
            }
        }
        Ok(())
    }

    fn break_irq_affinities(&self, sys: &Sys, online: &CpuSet) -> io::Result<()> {
        let ncpus = mask_bits(sys)?;
        for n in sys.list("proc/irq").unwrap_or_default() {
            let dir = format!("proc/irq/{n}");
            let Ok(aff) = sys.read_cpulist(&format!("{dir}/smp_affinity_list")) else {
                continue;
            };
            let managed = self.refused(&format!("{dir}/smp_affinity_list")).is_some();
            let aff = if !aff.intersects(online) && !managed {
                store_irq_affinity(sys, &dir, online, ncpus)?;
                online.clone()
            } else {
                aff
            };
            let eff_rel = format!("{dir}/effective_affinity_list");
            if let Ok(eff) = sys.read_cpulist(&eff_rel) {
                if !eff.is_empty() && !eff.intersects(online) {
                    let first = aff
                        .intersection(online)
                        .first()
                        .or(online.first())
                        .unwrap_or(0);
                    fs::write(sys.path(&eff_rel), format!("{first}\n"))?;
                }
            }
        }
        Ok(())
    }

    fn write_irq(&self, sys: &Sys, dir: &str, file: &str, data: &str) -> io::Result<()> {
        let cpus = if file == "smp_affinity" {
            CpuSet::parse_mask(data)
        } else {
            CpuSet::parse_list(data)
        }
        .map_err(|_| errno(libc::EINVAL))?;
        let online = self.online(sys)?;
        if !cpus.intersects(&online) {
            return Err(errno(libc::EINVAL));
        }
        let ncpus = mask_bits(sys)?;
        store_irq_affinity(sys, dir, &cpus, ncpus)?;
        let irq: u32 = dir
            .trim_start_matches("proc/irq/")
            .parse()
            .unwrap_or(u32::MAX);
        let eff_path = sys.path(&format!("{dir}/effective_affinity_list"));
        if eff_path.exists() && !self.config.effective_lag.contains(&irq) {
            let first = cpus.intersection(&online).first().unwrap_or(0);
            fs::write(eff_path, format!("{first}\n"))?;
        }
        Ok(())
    }
}

/// Replaces the contents of an existing file in place: never creates one
/// (a thread that exited meanwhile stays gone) and keeps its inode, so a
/// leader's process file, a hard link to its task file, changes with it.
/// Overwriting rather than truncating first keeps tmpfs from freeing and
/// zeroing the page for every one of thousands of task changes.
fn overwrite(path: &Path, body: &str) -> io::Result<()> {
    let mut f = fs::OpenOptions::new().write(true).open(path)?;
    f.write_all(body.as_bytes())?;
    f.set_len(body.len() as u64)
}

/// Fills `index` with tid → pid for every thread of the tree (emptied first).
fn index_tree(sys: &Sys, index: &mut HashMap<i32, i32>) {
    index.clear();
    let pids = procfs::list_pids(sys).unwrap_or_default();
    let parts = super::in_parallel(&pids, 256, |pids| {
        pids.iter()
            .flat_map(|&pid| {
                let tids = procfs::list_tids(sys, pid).unwrap_or_default();
                tids.into_iter().map(move |tid| (tid, pid))
            })
            .collect::<Vec<_>>()
    });
    index.extend(parts.into_iter().flatten());
}

/// The CPU of `sys/devices/system/cpu/cpuN`.
fn cpu_of_dir(dir: &str) -> Option<u32> {
    dir.strip_prefix("sys/devices/system/cpu/cpu")?.parse().ok()
}

/// Bits in a hex CPU mask: up to the last present CPU (the kernel's nr_cpu_ids).
fn mask_bits(sys: &Sys) -> io::Result<u32> {
    Ok(procfs::present_cpus(sys)
        .map_err(|e| e.source)?
        .last()
        .map_or(1, |c| c + 1))
}

/// Stores an IRQ's affinity in both of its forms, as the kernel shows it.
fn store_irq_affinity(sys: &Sys, dir: &str, cpus: &CpuSet, bits: u32) -> io::Result<()> {
    fs::write(
        sys.path(&format!("{dir}/smp_affinity_list")),
        format!("{cpus}\n"),
    )?;
    fs::write(
        sys.path(&format!("{dir}/smp_affinity")),
        format!("{}\n", cpus.to_mask(bits)),
    )
}

fn parent_rel(rel: &str) -> &str {
    rel.rsplit_once('/').map_or("", |(d, _)| d)
}

/// The mount table the snapshot and the emulation read.
const MOUNTS: &str = "proc/self/mounts";

/// Controllers of the fixture kernel's cgroup2 root (when not bound to v1).
const CGROUP2_CONTROLLERS: [&str; 5] = ["cpuset", "cpu", "io", "memory", "pids"];

/// The files of a cgroup2 root cgroup, in an existing directory.
fn write_cgroup2_root(
    dir: &Path,
    online: &CpuSet,
    controllers: &str,
    subtree_control: &str,
) -> io::Result<()> {
    let line = |s: &str| format!("{s}\n");
    fs::write(dir.join("cgroup.controllers"), line(controllers))?;
    fs::write(dir.join("cgroup.subtree_control"), line(subtree_control))?;
    fs::write(dir.join("cgroup.procs"), "")?;
    fs::write(dir.join("cgroup.threads"), "")?;
    fs::write(dir.join("cpuset.cpus.effective"), line(&online.to_string()))?;
    fs::write(dir.join("cpuset.mems.effective"), "0\n")?;
    fs::write(dir.join("cpuset.cpus.isolated"), "\n")
}

/// Layout of the cgroup mounts in a fixture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupLayout {
    /// cgroup v2 at `/sys/fs/cgroup`, cpuset available.
    V2,
    /// cgroup v1 cpuset at `/sys/fs/cgroup/cpuset`, v2 at `/sys/fs/cgroup/unified` without controllers.
    V1,
    /// No cpuset support at all: no cgroup mounted, no cgroup2 in
    /// `/proc/filesystems`, no `/sys/fs/cgroup`.
    None,
    /// Nothing mounted on an empty `/sys/fs/cgroup`, but the kernel has
    /// cgroup2 (`/proc/filesystems`): `on` mounts it.
    Unmounted,
    /// Like [`CgroupLayout::Unmounted`], but `/sys/fs/cgroup` holds a tmpfs
    /// with a v1 memory hierarchy (no cpuset), so cgroup2 goes elsewhere.
    UnmountedBusy,
}

/// Builds fixture roots for tests and benchmarks.
#[derive(Debug)]
pub struct FixtureBuilder {
    root: PathBuf,
    ncpus: u32,
    online: Option<CpuSet>,
    layout: CgroupLayout,
    config: FixtureConfig,
    siblings: Vec<CpuSet>,
    next_pid: i32,
    files: Vec<(String, String)>,
}

/// A thread to create in a fixture.
#[derive(Debug, Clone)]
pub struct FixtureTask {
    /// Command name.
    pub name: String,
    /// `PF_*` flags.
    pub flags: u64,
    /// Affinity.
    pub cpus: CpuSet,
}

impl FixtureBuilder {
    /// A fixture with `ncpus` online CPUs, cgroup v2, no tasks and no IRQs.
    pub fn new(root: impl Into<PathBuf>, ncpus: u32) -> Self {
        FixtureBuilder {
            root: root.into(),
            ncpus,
            online: None,
            layout: CgroupLayout::V2,
            config: FixtureConfig::default(),
            siblings: Vec::new(),
            next_pid: 1,
            files: Vec::new(),
        }
    }

    /// Chooses the cgroup layout.
    pub fn layout(mut self, layout: CgroupLayout) -> Self {
        self.layout = layout;
        self
    }

    /// Sets which CPUs are online (default: all).
    pub fn online(mut self, cpus: &str) -> Self {
        self.online = Some(CpuSet::parse_list(cpus).expect("valid cpulist"));
        self
    }

    /// Declares a group of hyper-thread siblings.
    pub fn siblings(mut self, cpus: &str) -> Self {
        self.siblings
            .push(CpuSet::parse_list(cpus).expect("valid cpulist"));
        self
    }

    /// Sets the misbehaviour configuration.
    pub fn config(mut self, config: FixtureConfig) -> Self {
        self.config = config;
        self
    }

    /// Adds an arbitrary file (relative path, contents).
    pub fn file(mut self, rel: &str, contents: &str) -> Self {
        self.files.push((rel.to_string(), contents.to_string()));
        self
    }

    /// Writes the fixture and returns a [`Sys`] rooted at it.
    pub fn build(self) -> io::Result<Sys> {
        let r = &self.root;
        let put = |rel: &str, contents: &str| -> io::Result<()> {
            let p = r.join(rel);
            fs::create_dir_all(p.parent().expect("has parent"))?;
            fs::write(p, contents)
        };
        put(
            MARKER,
            &serde_json::to_string_pretty(&self.config).map_err(io::Error::other)?,
        )?;
        let all = CpuSet::first_n(self.ncpus);
        let online = self.online.clone().unwrap_or_else(|| all.clone());
        let last = self.ncpus - 1;
        put("sys/devices/system/cpu/online", &format!("{online}\n"))?;
        put("sys/devices/system/cpu/present", &format!("0-{last}\n"))?;
        put("sys/devices/system/cpu/possible", &format!("0-{last}\n"))?;
        put("sys/devices/system/cpu/isolated", "\n")?;
        for cpu in 0..self.ncpus {
            let sib = self
                .siblings
                .iter()
                .find(|s| s.contains(cpu))
                .cloned()
                .unwrap_or_else(|| [cpu].into_iter().collect());
            put(
                &format!("sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list"),
                &format!("{sib}\n"),
            )?;
            if cpu > 0 {
                let on = if online.contains(cpu) { "1" } else { "0" };
                put(
                    &format!("sys/devices/system/cpu/cpu{cpu}/online"),
                    &format!("{on}\n"),
                )?;
            }
        }
        put(WQ_MASK, &format!("{}\n", all.to_mask(self.ncpus)))?;
        if self.config.workqueue_excludes_isolated {
            put(WQ_REQUESTED, &format!("{}\n", all.to_mask(self.ncpus)))?;
        }
        put(
            "proc/irq/default_smp_affinity",
            &format!("{}\n", all.to_mask(self.ncpus)),
        )?;
        put(
            "proc/cmdline",
            "BOOT_IMAGE=/vmlinuz root=/dev/vda ro quiet\n",
        )?;
        put("proc/sys/kernel/osrelease", "6.1.0-fixture\n")?;
        fs::create_dir_all(r.join("run"))?;
        let mut mounts = String::from("proc /proc proc rw 0 0\nsysfs /sys sysfs rw 0 0\n");
        match self.layout {
            CgroupLayout::V2 => {
                mounts.push_str("cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n");
                fs::create_dir_all(r.join("sys/fs/cgroup"))?;
                write_cgroup2_root(
                    &r.join("sys/fs/cgroup"),
                    &online,
                    &CGROUP2_CONTROLLERS.join(" "),
                    "memory pids",
                )?;
            }
            CgroupLayout::Unmounted => {
                fs::create_dir_all(r.join("sys/fs/cgroup"))?;
            }
            CgroupLayout::UnmountedBusy => {
                mounts.push_str("tmpfs /sys/fs/cgroup tmpfs rw 0 0\n");
                mounts.push_str("cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n");
                put(
                    "sys/fs/cgroup/memory/memory.limit_in_bytes",
                    "9223372036854771712\n",
                )?;
                put("sys/fs/cgroup/memory/tasks", "")?;
                put("sys/fs/cgroup/memory/cgroup.procs", "")?;
            }
            CgroupLayout::V1 => {
                mounts.push_str("tmpfs /sys/fs/cgroup tmpfs rw 0 0\n");
                mounts.push_str("cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0\n");
                mounts.push_str("cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n");
                let cg = "sys/fs/cgroup/cpuset";
                put(&format!("{cg}/cpuset.cpus"), &format!("{online}\n"))?;
                put(
                    &format!("{cg}/cpuset.effective_cpus"),
                    &format!("{online}\n"),
                )?;
                put(&format!("{cg}/cpuset.mems"), "0\n")?;
                put(&format!("{cg}/cpuset.cpu_exclusive"), "1\n")?;
                put(&format!("{cg}/cpuset.mem_exclusive"), "1\n")?;
                put(&format!("{cg}/cpuset.sched_load_balance"), "1\n")?;
                put(&format!("{cg}/tasks"), "")?;
                put(&format!("{cg}/cgroup.procs"), "")?;
                put("sys/fs/cgroup/unified/cgroup.controllers", "\n")?;
                put("sys/fs/cgroup/unified/cgroup.subtree_control", "\n")?;
                put("sys/fs/cgroup/unified/cgroup.procs", "")?;
            }
            CgroupLayout::None => {}
        }
        put(MOUNTS, &mounts)?;
        let mut filesystems = String::from("nodev\tsysfs\nnodev\tproc\nnodev\ttmpfs\n");
        if self.layout != CgroupLayout::None {
            filesystems.push_str("nodev\tcgroup\nnodev\tcgroup2\n");
        }
        put("proc/filesystems", &filesystems)?;
        let mut interrupts = String::from(" ");
        for cpu in 0..self.ncpus {
            interrupts.push_str(&format!("      CPU{cpu}"));
        }
        interrupts.push('\n');
        put("proc/interrupts", &interrupts)?;
        for (rel, contents) in &self.files {
            put(rel, contents)?;
        }
        let _ = self.next_pid;
        Ok(Sys::at(&self.root))
    }
}

/// Adds a process with the given threads to a fixture. `tasks[0]` is the
/// leader (tid = pid). Returns the tids.
pub fn add_process(sys: &Sys, pid: i32, tasks: &[FixtureTask]) -> io::Result<Vec<i32>> {
    let layout_v1 = sys.exists("sys/fs/cgroup/cpuset/cpuset.cpus");
    let cgroup = if layout_v1 {
        "9:name=systemd:/\n3:cpuset:/\n0::/\n"
    } else {
        "0::/\n"
    };
    let mut tids = Vec::new();
    for (i, t) in tasks.iter().enumerate() {
        let tid = pid + i as i32;
        let stat = format!(
            "{tid} ({}) S 1 {pid} {pid} 0 -1 {} 0 0 0 0\n",
            t.name, t.flags
        );
        let status = format!(
            "Name:\t{}\nTgid:\t{pid}\nPid:\t{tid}\nCpus_allowed:\t{}\nCpus_allowed_list:\t{}\n",
            t.name,
            t.cpus.to_mask(1),
            t.cpus
        );
        let dir = sys.path(&format!("proc/{pid}/task/{tid}"));
        fs::create_dir_all(&dir)?;
        fs::write(dir.join("stat"), &stat)?;
        fs::write(dir.join("status"), &status)?;
        fs::write(dir.join("cgroup"), cgroup)?;
        if i == 0 {
            // The process's files are its leader's, as the kernel shows
            // them: one file, so that a change of the leader is one write.
            let pdir = sys.path(&format!("proc/{pid}"));
            for file in ["stat", "status", "cgroup"] {
                fs::hard_link(dir.join(file), pdir.join(file))?;
            }
        }
        tids.push(tid);
    }
    Ok(tids)
}

/// Adds an IRQ with a name and affinity; it also appears in `/proc/interrupts`.
pub fn add_irq(sys: &Sys, irq: u32, name: &str, cpus: &str) -> io::Result<()> {
    let cpus = CpuSet::parse_list(cpus).map_err(io::Error::other)?;
    let ncpus = procfs::present_cpus(sys)
        .map_err(io::Error::other)?
        .last()
        .map_or(1, |c| c + 1);
    let dir = sys.path(&format!("proc/irq/{irq}"));
    fs::create_dir_all(&dir)?;
    fs::write(dir.join("smp_affinity_list"), format!("{cpus}\n"))?;
    fs::write(
        dir.join("smp_affinity"),
        format!("{}\n", cpus.to_mask(ncpus)),
    )?;
    fs::write(
        dir.join("effective_affinity_list"),
        format!("{}\n", cpus.first().unwrap_or(0)),
    )?;
    let mut line = format!("{irq:>4}:");
    for _ in 0..ncpus {
        line.push_str("          0");
    }
    line.push_str(&format!("  IO-APIC  {irq}-edge      {name}\n"));
    let path = sys.path("proc/interrupts");
    let mut text = fs::read_to_string(&path)?;
    text.push_str(&line);
    fs::write(path, text)
}

/// The cgroup directory of a unit named `unit`: directly under the mount
/// (a slice) or in one of its slices (a scope).
fn find_dir(sys: &Sys, mount: &str, unit: &str) -> Option<String> {
    let top = format!("{mount}/{unit}");
    if sys.path(&top).is_dir() {
        return Some(top);
    }
    sys.subdirs(mount).ok()?.into_iter().find_map(|d| {
        let below = format!("{mount}/{d}/{unit}");
        sys.path(&below).is_dir().then_some(below)
    })
}
