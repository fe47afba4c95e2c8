//! The one kernel-access layer.
//!
//! This is the only code that opens files under `/proc`, `/sys` and the
//! cgroup mounts, or calls affinity and scheduler syscalls on other tasks.
//! Every path is relative to a root: `/` in production, or another
//! directory laid out like `/proc` and `/sys`. Test builds (the `fixture`
//! feature, which `cargo test` turns on and no shipped build has) also
//! emulate the kernel over such a directory when it is marked as a
//! *fixture root*; see `sys::fixture` there. Without the feature the
//! emulation and its fault injection are not compiled in.
//!
//! Errors carry the path and the data, and tell apart the cases callers
//! handle differently: permission denied, not found (or the task exited),
//! and the kernel refusing a value (EIO, EPERM, EINVAL, ...).

pub mod beneath;
pub mod cpuidle;
pub mod dbus;
#[cfg(feature = "fixture")]
pub mod fixture;
pub mod irq;
pub mod irqbalance;
pub mod kicks;
pub mod msr;
pub mod pci;
pub mod pid_lock;
pub mod procfs;
pub mod resctrl;
pub mod syscalls;

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use crate::cpulist::CpuSet;

/// What kind of failure a kernel access met; callers act on this.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// EACCES: not allowed to read or write (usually: not root).
    PermissionDenied,
    /// ENOENT / ESRCH: the file or the task does not exist (a task may have exited).
    NotFound,
    /// The kernel refused the value: EIO, EPERM, EINVAL, ENOSPC, EBUSY, ...
    Refused,
    /// Anything else.
    Other,
}

/// cpushield's run directory under the root ([`Sys::run_dir`]).
pub const RUN_DIR: &str = "run/cpushield";

/// The run directory `dir` cannot be used, because of `e`.
fn run_dir_error(dir: &Path, e: io::Error) -> SysError {
    SysError::new("use the run directory", dir.display().to_string(), None, e)
}

/// A failed kernel access, with the path (or task) and the data involved.
#[derive(Debug, thiserror::Error)]
#[error("{op} {target}{}: {source}", data.as_deref().map(|d| format!(" (value {})", crate::input::quote(d))).unwrap_or_default())]
pub struct SysError {
    /// What was attempted: "read", "write", "list", "mkdir", "set affinity of", ...
    pub op: &'static str,
    /// The path under the root, or "task N".
    pub target: String,
    /// The value written, when there was one.
    pub data: Option<String>,
    /// The classification callers act on.
    pub kind: ErrorKind,
    /// The raw error.
    #[source]
    pub source: io::Error,
}

impl SysError {
    /// Builds an error from an `io::Error`, classifying it.
    pub fn new(
        op: &'static str,
        target: impl Into<String>,
        data: Option<&str>,
        source: io::Error,
    ) -> Self {
        let kind = classify(&source);
        SysError {
            op,
            target: target.into(),
            data: data.map(str::to_string),
            kind,
            source,
        }
    }

    /// The errno, when the error came from the kernel.
    pub fn errno(&self) -> Option<i32> {
        self.source.raw_os_error()
    }

    /// Short name of the errno (`EIO`, `EPERM`, ...) for reports.
    pub fn errno_name(&self) -> String {
        match self.errno() {
            Some(libc::EIO) => "EIO".into(),
            Some(libc::EPERM) => "EPERM".into(),
            Some(libc::EINVAL) => "EINVAL".into(),
            Some(libc::EACCES) => "EACCES".into(),
            Some(libc::ENOENT) => "ENOENT".into(),
            Some(libc::ESRCH) => "ESRCH".into(),
            Some(libc::ENOSPC) => "ENOSPC".into(),
            Some(libc::EBUSY) => "EBUSY".into(),
            Some(libc::EROFS) => "EROFS".into(),
            Some(n) => format!("errno {n}"),
            None => self.source.kind().to_string(),
        }
    }
}

fn classify(e: &io::Error) -> ErrorKind {
    match e.raw_os_error() {
        Some(libc::EACCES) => ErrorKind::PermissionDenied,
        Some(libc::ENOENT) | Some(libc::ESRCH) => ErrorKind::NotFound,
        Some(libc::EIO)
        | Some(libc::EPERM)
        | Some(libc::EINVAL)
        | Some(libc::ENOSPC)
        | Some(libc::EBUSY)
        | Some(libc::EROFS)
        | Some(libc::EOPNOTSUPP)
        | Some(libc::ENODEV)
        | Some(libc::EBADF) => ErrorKind::Refused,
        _ => match e.kind() {
            io::ErrorKind::PermissionDenied => ErrorKind::PermissionDenied,
            io::ErrorKind::NotFound => ErrorKind::NotFound,
            _ => ErrorKind::Other,
        },
    }
}

/// Result of a kernel access.
pub type Result<T> = std::result::Result<T, SysError>;

/// Hands a call to the fixture's emulation when this root is a fixture
/// (test builds only); compiles to nothing in a shipped build.
macro_rules! emulated {
    ($sys:ident, $fx:ident => $call:expr) => {
        #[cfg(feature = "fixture")]
        if let Some($fx) = &$sys.fixture {
            return $fx.timed(|| $call);
        }
    };
}

/// Counts a file operation of ours among the fixture's writes (its crash
/// injection counts every change); nothing in a shipped build.
macro_rules! count_write {
    ($sys:ident) => {
        #[cfg(feature = "fixture")]
        if let Some(fx) = &$sys.fixture {
            fx.count_write();
        }
    };
}

// After the macros above, which its `impl Sys` uses.
pub mod systemd;

/// Handle on the kernel (or, in test builds, a fixture root standing in for it).
#[derive(Debug, Clone)]
pub struct Sys {
    root: PathBuf,
    #[cfg(feature = "fixture")]
    fixture: Option<fixture::Fixture>,
    /// Time spent waiting for systemd, in µs (see [`Sys::systemd_time`]);
    /// shared by clones, which are the same machine.
    systemd_micros: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Sys {
    /// The running kernel, rooted at `/`.
    pub fn live() -> Sys {
        Sys::at("/")
    }

    /// A kernel rooted at `root`. In test builds, a root marked as a
    /// fixture has its syscalls on tasks emulated through its files.
    pub fn at(root: impl Into<PathBuf>) -> Sys {
        let root = root.into();
        Sys {
            #[cfg(feature = "fixture")]
            fixture: fixture::Fixture::detect(&root),
            root,
            systemd_micros: Default::default(),
        }
    }

    /// The root path.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The root to hand to a child cpushield (`--root`), when it is not `/`.
    pub fn root_arg(&self) -> Option<&Path> {
        (self.root != Path::new("/")).then_some(self.root.as_path())
    }

    /// Whether this is an emulated kernel (a fixture root) rather than a
    /// real one. Test builds only.
    #[cfg(feature = "fixture")]
    pub fn is_fixture(&self) -> bool {
        self.fixture.is_some()
    }

    /// Whether this process may change the whole machine: it runs as root.
    /// An emulated kernel (test builds) needs no privilege.
    pub fn privileged(&self) -> bool {
        #[cfg(feature = "fixture")]
        if self.is_fixture() {
            return true;
        }
        nix::unistd::geteuid().is_root()
    }

    /// Sets the scheduling policy of thread `tid` (0: the calling thread).
    /// On an emulated kernel (test builds) the scheduler is left alone.
    pub fn set_scheduler(&self, tid: i32, policy: syscalls::Policy) -> Result<()> {
        #[cfg(feature = "fixture")]
        if self.is_fixture() {
            return Ok(());
        }
        syscalls::set_scheduler(tid, policy).map_err(|e| {
            let who = if tid == 0 { syscalls::gettid() } else { tid };
            SysError::new(
                "set scheduler of",
                format!("task {who}"),
                Some(&format!("{policy:?}")),
                e,
            )
        })
    }

    /// A thread's scheduling attributes (`sched_getattr`).
    pub fn sched_attr(&self, tid: i32) -> Result<syscalls::SchedAttr> {
        emulated!(self, fx => fx.sched_attr(self, tid));
        syscalls::get_sched_attr(tid)
            .map_err(|e| SysError::new("get scheduling of", format!("task {tid}"), None, e))
    }

    /// Sets a thread's scheduling attributes (`sched_setattr`).
    pub fn set_sched_attr(&self, tid: i32, attr: &syscalls::SchedAttr) -> Result<()> {
        emulated!(self, fx => fx.set_sched_attr(self, tid, attr));
        syscalls::set_sched_attr(tid, attr).map_err(|e| {
            SysError::new(
                "set scheduling of",
                format!("task {tid}"),
                Some(&format!(
                    "policy {} priority {}",
                    attr.policy, attr.priority
                )),
                e,
            )
        })
    }

    /// Starts cpushield's own binary with `args` in the background, as
    /// the transient systemd service `unit` when given, else as a process
    /// of its own (its own process group, no terminal). Its state is for
    /// the caller to read back. On an emulated kernel the process is
    /// emulated: an entry under `proc/` and the state the guard would write.
    pub fn start_guard(&self, args: &[String], unit: Option<&str>) -> Result<()> {
        self.start_daemon(
            args,
            unit,
            "cpushield: starvation guard of the shielded CPUs",
        )
    }

    /// Starts `cpushield ARGS` as a daemon: the transient service `unit`
    /// (described as `description`) on systemd hosts, else a process in a
    /// process group of its own, its output discarded.
    pub fn start_daemon(
        &self,
        args: &[String],
        unit: Option<&str>,
        description: &str,
    ) -> Result<()> {
        count_write!(self);
        emulated!(self, fx => fx.start_guard(self, args));
        let exe = std::env::current_exe()
            .map_err(|e| SysError::new("find", "the cpushield binary", None, e))?;
        let mut argv = vec![exe.to_string_lossy().into_owned()];
        argv.extend(args.iter().cloned());
        match unit {
            Some(unit) => {
                systemd::run_client(&systemd::start_service_command(unit, description, &argv))
                    .map(drop)
            }
            None => {
                use std::os::unix::process::CommandExt;
                std::process::Command::new(&argv[0])
                    .args(&argv[1..])
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .process_group(0)
                    .spawn()
                    .map(drop)
                    .map_err(|e| SysError::new("start", argv.join(" "), None, e))
            }
        }
    }

    /// Stops the guard: the unit through systemd when given, else SIGTERM
    /// to `pid` (whose identity the caller checked).
    pub fn stop_guard(&self, pid: i32, unit: Option<&str>) -> Result<()> {
        count_write!(self);
        emulated!(self, fx => fx.stop_guard(self, pid));
        match unit {
            Some(unit) => self.systemd(&systemd::SystemdCall::Stop { unit: unit.into() }),
            None => syscalls::signal_process(pid, nix::sys::signal::Signal::SIGTERM)
                .map_err(|e| SysError::new("signal", format!("process {pid}"), None, e)),
        }
    }

    /// Kills `pid` (SIGKILL): a guard that did not stop when asked.
    pub fn kill_guard(&self, pid: i32) -> Result<()> {
        count_write!(self);
        emulated!(self, fx => fx.stop_guard(self, pid));
        syscalls::signal_process(pid, nix::sys::signal::Signal::SIGKILL)
            .map_err(|e| SysError::new("kill", format!("process {pid}"), None, e))
    }

    /// The fixture emulation, when this is a fixture root.
    #[cfg(feature = "fixture")]
    pub fn fixture(&self) -> Option<&fixture::Fixture> {
        self.fixture.as_ref()
    }

    /// Absolute path of `rel` under the root.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel.trim_start_matches('/'))
    }

    /// Whether `rel` exists.
    pub fn exists(&self, rel: &str) -> bool {
        self.path(rel).exists()
    }

    /// Whether the file's mode allows writing at all. Sysctls of absent
    /// features (e.g. `nmi_watchdog` without a hardware watchdog) are 0444,
    /// and the kernel refuses them even to root. False when it does not exist.
    pub fn mode_allows_write(&self, rel: &str) -> bool {
        use std::os::unix::fs::PermissionsExt;
        fs::metadata(self.path(rel)).is_ok_and(|m| m.permissions().mode() & 0o222 != 0)
    }

    /// Reads a whole file. Under `proc/` (but `proc/sys/`) bytes that are
    /// not UTF-8 read as U+FFFD ([`holds_task_bytes`]); elsewhere they
    /// are an error.
    pub fn read(&self, rel: &str) -> Result<String> {
        let err = |e| SysError::new("read", rel, None, e);
        #[cfg(feature = "fixture")]
        if let Some(fx) = &self.fixture {
            if let Some(made_up) = fx.read(self, rel) {
                return made_up.map_err(err);
            }
        }
        if holds_task_bytes(rel) {
            read_small_lossy(&self.path(rel)).map_err(err)
        } else {
            read_small(&self.path(rel)).map_err(err)
        }
    }

    /// Reads a whole file as bytes (binary files: a PCI function's
    /// `config`). Not emulated: a fixture root holds the bytes themselves.
    pub fn read_bytes(&self, rel: &str) -> Result<Vec<u8>> {
        read_small_bytes(&self.path(rel)).map_err(|e| SysError::new("read", rel, None, e))
    }

    /// Reads a file and trims surrounding white space.
    pub fn read_trimmed(&self, rel: &str) -> Result<String> {
        self.read(rel).map(|s| s.trim().to_string())
    }

    /// Reads a file holding a cpulist (`0-3,8`).
    pub fn read_cpulist(&self, rel: &str) -> Result<CpuSet> {
        let text = self.read(rel)?;
        CpuSet::parse_list(&text).map_err(|e| {
            SysError::new(
                "parse",
                rel,
                Some(text.trim()),
                io::Error::new(io::ErrorKind::InvalidData, e),
            )
        })
    }

    /// Reads a file holding a hex mask (`ff,ffffffff`).
    pub fn read_cpumask(&self, rel: &str) -> Result<CpuSet> {
        let text = self.read(rel)?;
        CpuSet::parse_mask(&text).map_err(|e| {
            SysError::new(
                "parse",
                rel,
                Some(text.trim()),
                io::Error::new(io::ErrorKind::InvalidData, e),
            )
        })
    }

    /// Writes `data` to an existing file in one `write(2)`, never creating it
    /// (a typo must not create a file). The kernel may accept a value it does
    /// not honour: callers read back.
    pub fn write(&self, rel: &str, data: &str) -> Result<()> {
        emulated!(self, fx => fx.write(self, rel, data));
        write_existing(&self.path(rel), data)
            .map_err(|e| SysError::new("write", rel, Some(data), e))
    }

    /// Names of the entries of a directory, sorted.
    pub fn list(&self, rel: &str) -> Result<Vec<String>> {
        let rd = fs::read_dir(self.path(rel)).map_err(|e| SysError::new("list", rel, None, e))?;
        let mut names: Vec<String> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        Ok(names)
    }

    /// Names of the subdirectories of a directory (from the directory
    /// entries' types: no `stat` of each entry), sorted.
    pub fn subdirs(&self, rel: &str) -> Result<Vec<String>> {
        let err = |e| SysError::new("list", rel, None, e);
        let mut names = Vec::new();
        for entry in fs::read_dir(self.path(rel)).map_err(err)? {
            let entry = entry.map_err(err)?;
            if entry.file_type().map_err(err)?.is_dir() {
                names.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        names.sort();
        Ok(names)
    }

    /// Creates a directory (a cgroup). In a fixture the kernel's files appear in it.
    pub fn mkdir(&self, rel: &str) -> Result<()> {
        emulated!(self, fx => fx.mkdir(self, rel));
        fs::create_dir(self.path(rel)).map_err(|e| SysError::new("mkdir", rel, None, e))
    }

    /// Makes a directory and its parents (for a configuration file).
    pub fn create_dirs(&self, rel: &str) -> Result<()> {
        count_write!(self);
        fs::create_dir_all(self.path(rel)).map_err(|e| SysError::new("mkdir", rel, None, e))
    }

    /// Removes an empty directory (a cgroup).
    pub fn rmdir(&self, rel: &str) -> Result<()> {
        emulated!(self, fx => fx.rmdir(self, rel));
        fs::remove_dir(self.path(rel)).map_err(|e| SysError::new("rmdir", rel, None, e))
    }

    /// Creates an empty directory to mount a file system on (mode 0755).
    pub fn make_mount_point(&self, rel: &str) -> Result<()> {
        count_write!(self);
        use std::os::unix::fs::DirBuilderExt;
        fs::DirBuilder::new()
            .mode(0o755)
            .create(self.path(rel))
            .map_err(|e| SysError::new("mkdir", rel, None, e))
    }

    /// Removes an empty mount-point directory made by [`Sys::make_mount_point`].
    pub fn remove_mount_point(&self, rel: &str) -> Result<()> {
        count_write!(self);
        fs::remove_dir(self.path(rel)).map_err(|e| SysError::new("rmdir", rel, None, e))
    }

    /// Mounts the cgroup v2 hierarchy at `rel` (an existing directory).
    pub fn mount_cgroup2(&self, rel: &str) -> Result<()> {
        emulated!(self, fx => fx.mount_cgroup2(self, rel));
        syscalls::mount_cgroup2(&self.path(rel))
            .map_err(|e| SysError::new("mount cgroup2 on", rel, None, e))
    }

    /// Mounts resctrl at `rel` (an existing directory).
    pub fn mount_resctrl(&self, rel: &str) -> Result<()> {
        emulated!(self, fx => fx.mount_resctrl(self, rel));
        syscalls::mount_resctrl(&self.path(rel))
            .map_err(|e| SysError::new("mount resctrl on", rel, None, e))
    }

    /// Unmounts the file system mounted at `rel`.
    pub fn umount(&self, rel: &str) -> Result<()> {
        emulated!(self, fx => fx.umount(self, rel));
        syscalls::umount(&self.path(rel)).map_err(|e| SysError::new("umount", rel, None, e))
    }

    /// cpushield's run directory ([`RUN_DIR`]: the journal, the lock, the
    /// guard's state, explain's record), made when missing (mode 0700, by
    /// whichever command comes first) and checked at every start: a
    /// directory, not a symbolic link, owned by the user this process runs
    /// as (root), without group or world write. Anything else is refused
    /// with its owner and mode: another user who could write in it could
    /// forge the journal that `off` replays as root.
    pub fn run_dir(&self) -> Result<PathBuf> {
        use std::os::unix::fs::DirBuilderExt;
        let dir = self.path(RUN_DIR);
        if matches!(fs::symlink_metadata(&dir), Err(e) if e.kind() == io::ErrorKind::NotFound) {
            let made = fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir);
            made.or_else(|e| match e.kind() {
                io::ErrorKind::AlreadyExists => Ok(()),
                _ => Err(e),
            })
            .map_err(|e| run_dir_error(&dir, e))?;
        }
        self.check_run_dir()?;
        Ok(dir)
    }

    /// Checks the run directory as [`Sys::run_dir`] does, when it exists
    /// (for the commands that only read what is in it).
    pub fn check_run_dir(&self) -> Result<()> {
        use std::os::unix::fs::MetadataExt;
        let dir = self.path(RUN_DIR);
        let m = match fs::symlink_metadata(&dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            m => m.map_err(|e| run_dir_error(&dir, e))?,
        };
        let uid = nix::unistd::geteuid().as_raw();
        if m.is_dir() && m.uid() == uid && m.mode() & 0o022 == 0 {
            return Ok(());
        }
        let what = match m.file_type() {
            t if t.is_symlink() => "a symbolic link",
            t if t.is_dir() => "a directory",
            _ => "not a directory",
        };
        let why = format!(
            "it is {what} owned by uid {}, mode {:04o}; cpushield uses only a directory owned by uid {uid} (the user it runs as) that neither group nor others may write (it makes it 0700): remove it, or chown and chmod it so",
            m.uid(),
            m.mode() & 0o7777
        );
        let e = io::Error::new(io::ErrorKind::PermissionDenied, why);
        Err(run_dir_error(&dir, e))
    }

    /// Writes a configuration file (a unit drop-in, GRUB's, a boot entry):
    /// created or replaced whole through [`crate::durable::Dir::replace`]
    /// (a temporary file of a random name, removed on any failure; renamed
    /// over the file; the directory synced), keeping the replaced file's
    /// mode, owner and extended attributes (0644 for a new one), making
    /// its directory first when `make_dir`. Not for kernel files: see
    /// [`Sys::write`].
    pub fn write_config(&self, rel: &str, content: &str, make_dir: bool) -> Result<()> {
        count_write!(self);
        let path = self.path(rel);
        let err = |e| SysError::new("write", rel, Some(content), e);
        let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str()))
        else {
            return Err(err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a file path",
            )));
        };
        if make_dir {
            fs::create_dir_all(dir).map_err(err)?;
        }
        let dir = crate::durable::Dir::open(dir).map_err(|e| err(e.source))?;
        dir.replace(name, content.as_bytes())
            .map(drop)
            .map_err(|e| err(e.source))
    }

    /// Removes a configuration file written by [`Sys::write_config`], and its
    /// directory when `remove_dir` and it is then empty.
    pub fn remove_config(&self, rel: &str, remove_dir: bool) -> Result<()> {
        count_write!(self);
        let path = self.path(rel);
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(SysError::new("remove", rel, None, e)),
        }
        if remove_dir {
            if let Some(dir) = path.parent() {
                let _ = fs::remove_dir(dir);
            }
        }
        Ok(())
    }

    /// Runs a system tool that regenerates configuration (`update-grub`)
    /// and waits for it; an error names the command and what it printed.
    /// In a fixture the tool is emulated.
    pub fn run_tool(&self, argv: &[&str]) -> Result<()> {
        count_write!(self);
        emulated!(self, fx => fx.run_tool(self, argv));
        let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        systemd::run_client(&argv).map(drop)
    }

    /// The CPUs a thread may run on (`sched_getaffinity`).
    pub fn affinity(&self, tid: i32) -> Result<CpuSet> {
        emulated!(self, fx => fx.affinity(self, tid));
        syscalls::get_affinity(tid)
            .map_err(|e| SysError::new("get affinity of", format!("task {tid}"), None, e))
    }

    /// Sets the CPUs a thread may run on (`sched_setaffinity`).
    pub fn set_affinity(&self, tid: i32, cpus: &CpuSet) -> Result<()> {
        emulated!(self, fx => fx.set_affinity(self, tid, cpus));
        syscalls::set_affinity(tid, cpus).map_err(|e| {
            SysError::new(
                "set affinity of",
                format!("task {tid}"),
                Some(&cpus.to_string()),
                e,
            )
        })
    }
}

/// Whether `rel` (relative to the root) is a file of `/proc` other than a
/// sysctl: text the kernel writes with bytes tasks and drivers choose in
/// it (a task's name in `stat`, `status` and `comm`, `cmdline`, `environ`,
/// IRQ names in `interrupts`). A task may name itself with any byte but
/// NUL, so such a file need not be UTF-8, and a byte a task chose must
/// not make reading every task fail: those bytes read as U+FFFD, and the
/// parsers find the fields around them (see `procfs`).
pub fn holds_task_bytes(rel: &str) -> bool {
    let rel = rel.trim_start_matches('/');
    rel.starts_with("proc/") && !rel.starts_with("proc/sys/")
}

/// Reads a whole file's bytes with open, read until end, close: no
/// `fstat` or `lseek` for a size hint as `fs::read_to_string` makes
/// (files under /proc and /sys have no size), which counts when reading
/// 10,000 tasks.
fn read_small_bytes(path: &Path) -> io::Result<Vec<u8>> {
    let mut f = fs::File::open(path)?;
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match f.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// [`read_small_bytes`] as UTF-8 text; other bytes are an error.
pub(super) fn read_small(path: &Path) -> io::Result<String> {
    String::from_utf8(read_small_bytes(path)?)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// [`read_small_bytes`] as text, bytes that are not UTF-8 as U+FFFD.
pub(super) fn read_small_lossy(path: &Path) -> io::Result<String> {
    let bytes = read_small_bytes(path)?;
    Ok(match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// Opens an existing file for writing (no create, no truncate semantics
/// beyond what sysfs/procfs give) and writes the value in one call.
fn write_existing(path: &Path, data: &str) -> io::Result<()> {
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create(false)
        .open(path)?;
    f.write_all(data.as_bytes())
}

/// Runs `work` over `items` split into one chunk per CPU (at most 8), in
/// scoped threads, and returns the chunks' results in order. Below
/// `min_items` items, or on one CPU, it runs `work` once on the caller's
/// thread. For thousands of independent small kernel reads or writes.
/// A chunk whose thread the kernel refuses (a machine at its thread
/// limit) runs on the caller's thread instead.
pub fn in_parallel<T: Sync, R: Send>(
    items: &[T],
    min_items: usize,
    work: impl Fn(&[T]) -> R + Sync,
) -> Vec<R> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    if workers < 2 || items.len() < min_items.max(2) {
        return vec![work(items)];
    }
    let chunk = items.len().div_ceil(workers);
    let work = &work;
    std::thread::scope(|scope| {
        let started: Vec<_> = items
            .chunks(chunk)
            .map(|part| {
                std::thread::Builder::new()
                    .spawn_scoped(scope, move || work(part))
                    .map_err(|_| part)
            })
            .collect();
        started
            .into_iter()
            .map(|s| match s {
                Ok(h) => h.join().expect("a parallel kernel-access worker panicked"),
                Err(part) => work(part),
            })
            .collect()
    })
}

/// Keeps the calling thread on the part of its CPUs within some CPUs until
/// dropped, then gives it back the CPUs it had. Where none of its CPUs is
/// among them, it stays where it is. For a thread that only waits or
/// watches, so that it stays off CPUs being measured.
pub struct ThreadAside {
    tid: i32,
    before: Option<CpuSet>,
}

impl ThreadAside {
    /// Moves the calling thread to its CPUs within `cpus`, if any.
    pub fn on(cpus: &CpuSet) -> Result<ThreadAside> {
        let live = Sys::live();
        let tid = syscalls::gettid();
        let now = live.affinity(tid)?;
        let aside = now.intersection(cpus);
        if aside.is_empty() || aside == now {
            return Ok(ThreadAside { tid, before: None });
        }
        live.set_affinity(tid, &aside)?;
        Ok(ThreadAside {
            tid,
            before: Some(now),
        })
    }
}

impl Drop for ThreadAside {
    fn drop(&mut self) {
        if let Some(cpus) = &self.before {
            let _ = syscalls::set_affinity(self.tid, cpus);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn in_parallel_keeps_order_and_covers_every_item() {
        let items: Vec<u32> = (0..1000).collect();
        let parts = super::in_parallel(&items, 10, |c| c.to_vec());
        assert_eq!(parts.concat(), items);
        let small = super::in_parallel(&items[..5], 10, |c| c.len());
        assert_eq!(small, vec![5]);
    }

    #[test]
    fn thread_aside_moves_this_thread_and_gives_its_cpus_back() {
        // On a scratch thread of this test: its own affinity only.
        std::thread::spawn(|| {
            let tid = super::syscalls::gettid();
            let mine = super::syscalls::get_affinity(tid).unwrap();
            let first: super::CpuSet = mine.iter().take(1).collect();
            {
                let _aside = super::ThreadAside::on(&first).unwrap();
                assert_eq!(super::syscalls::get_affinity(tid).unwrap(), first);
            }
            assert_eq!(super::syscalls::get_affinity(tid).unwrap(), mine);
            // CPUs it may not use: it stays where it is.
            let none = super::CpuSet::parse_list("4095").unwrap();
            let _aside = super::ThreadAside::on(&none).unwrap();
            assert_eq!(super::syscalls::get_affinity(tid).unwrap(), mine);
        })
        .join()
        .unwrap();
    }
}
