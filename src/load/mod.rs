//! Background load for the experiments: the stress scenarios of the
//! published methodology (`cpu`, `io`, `vm`, `hdd`, `full`, `none`), run by
//! stress-ng when it is installed and by a built-in fallback otherwise.
//!
//! A load runs on a given set of CPUs (all of them when unshielded, the
//! housekeeping CPUs when shielded): the affinity is set in the child before
//! `exec`, so every process it forks inherits it. Each load is its own
//! process group, so [`Load::stop`] (and `Drop`) can end the whole tree:
//! SIGTERM to the group, a grace period, SIGKILL, reaping, and a scan of
//! `/proc` proving that nothing of the group is left.
//!
//! This module spawns and signals only its own processes, creates files only
//! in a temporary directory of its own, and reads `/proc` through
//! [`crate::sys`].

pub mod builtin;
pub mod group;
pub mod scenario;
pub mod stressng;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::cpulist::CpuSet;
use crate::sys::{procfs, syscalls, Sys};

pub use builtin::{worker_main, WORKER_SUBCOMMAND};
pub use scenario::{Scenario, Stressor, UnknownName};

/// A failure to start or stop a load.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A process could not be started.
    #[error("cannot start {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The error from `fork`/`exec` (including a refused affinity).
        #[source]
        source: std::io::Error,
    },
    /// The load exited right after it started.
    #[error("{program} exited at once ({status}){}", if log.is_empty() { String::new() } else { format!(": {log}") })]
    ExitedEarly {
        /// The program.
        program: String,
        /// How it exited.
        status: String,
        /// The end of what it printed.
        log: String,
    },
    /// The kernel narrowed the affinity we asked for (the caller's cpuset
    /// does not hold all the CPUs).
    #[error("load affinity {asked} was narrowed to {got} (are these CPUs outside our cpuset?)")]
    AffinityNotHonoured {
        /// The CPUs asked for.
        asked: CpuSet,
        /// The CPUs the kernel gave.
        got: CpuSet,
    },
    /// No CPU to run the load on.
    #[error("the load needs at least one CPU")]
    NoCpus,
    /// The installed stress-ng lacks what a scenario needs.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The temporary directory could not be made or examined.
    #[error("temporary directory {path}: {source}")]
    TempDir {
        /// The directory.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The machine's free memory could not be read.
    #[error("reading free memory: {0}")]
    Meminfo(#[source] crate::sys::SysError),
    /// Signalling the process group failed.
    #[error("cannot signal process group {pgid}: {source}")]
    Signal {
        /// The process group.
        pgid: i32,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// Processes of the load are still alive after SIGKILL.
    #[error("processes of load group {pgid} survived SIGKILL: {pids:?}")]
    Survivors {
        /// The process group.
        pgid: i32,
        /// The processes still there (not zombies).
        pids: Vec<i32>,
    },
}

/// Result of a load operation.
pub type Result<T> = std::result::Result<T, LoadError>;

/// Bytes per worker for the stressors that use memory or disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Sizes {
    /// Bytes each vm worker allocates and touches per round.
    pub vm_bytes: u64,
    /// Bytes each hdd (and io fallback) worker writes per file.
    pub hdd_bytes: u64,
}

impl Sizes {
    /// stress-ng's default per vm worker, used as the upper bound.
    pub const VM_CAP: u64 = 256 << 20;
    /// stress-ng's default per hdd worker, used as the upper bound.
    pub const HDD_CAP: u64 = 1 << 30;
    /// Smallest size handed out (stress-ng refuses less than a few KiB).
    pub const FLOOR: u64 = 1 << 20;

    /// Sizes that cannot exhaust the machine: all vm workers together take
    /// at most a quarter of `mem_available`, all hdd files together at most
    /// a quarter of `disk_free`, each worker at most stress-ng's default.
    pub fn bounded(mem_available: u64, disk_free: u64, workers: usize) -> Sizes {
        let n = workers.max(1) as u64;
        let share = |total: u64, cap: u64| (total / 4 / n).min(cap).max(Self::FLOOR);
        Sizes {
            vm_bytes: share(mem_available, Self::VM_CAP),
            hdd_bytes: share(disk_free, Self::HDD_CAP),
        }
    }

    /// Reads `MemAvailable` and the free space of `temp_parent`, and bounds
    /// the sizes for `workers` workers per stressor.
    pub fn for_machine(sys: &Sys, temp_parent: &Path, workers: usize) -> Result<Sizes> {
        let meminfo = sys.read("proc/meminfo").map_err(LoadError::Meminfo)?;
        let mem = procfs::mem_available(&meminfo).unwrap_or(0);
        let disk = syscalls::available_bytes(temp_parent).map_err(|source| LoadError::TempDir {
            path: temp_parent.to_path_buf(),
            source,
        })?;
        Ok(Sizes::bounded(mem, disk, workers))
    }
}

/// Who runs the load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Driver {
    /// stress-ng at this path.
    StressNg(PathBuf),
    /// Worker processes of this executable (one that handles
    /// [`WORKER_SUBCOMMAND`], normally our own binary).
    Builtin(PathBuf),
}

impl Driver {
    /// stress-ng from `PATH`, if installed.
    pub fn find_stress_ng() -> Option<PathBuf> {
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path)
            .map(|dir| dir.join("stress-ng"))
            .find(|p| is_executable(p))
    }

    /// The built-in driver running workers of the current executable.
    pub fn builtin_self() -> std::io::Result<Driver> {
        Ok(Driver::Builtin(std::env::current_exe()?))
    }

    /// stress-ng when installed, else the built-in driver with `worker_exe`.
    pub fn auto(worker_exe: PathBuf) -> Driver {
        match Driver::find_stress_ng() {
            Some(p) => Driver::StressNg(p),
            None => Driver::Builtin(worker_exe),
        }
    }

    /// `stress-ng` or `builtin`.
    pub fn name(&self) -> &'static str {
        match self {
            Driver::StressNg(_) => "stress-ng",
            Driver::Builtin(_) => "builtin",
        }
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Everything that defines a load.
#[derive(Debug, Clone)]
pub struct LoadSpec {
    /// What to run.
    pub scenario: Scenario,
    /// Where to run it; N = its number of CPUs.
    pub cpus: CpuSet,
    /// Who runs it.
    pub driver: Driver,
    /// Bytes per worker; `None` bounds them from this machine's free memory
    /// and disk ([`Sizes::for_machine`]).
    pub sizes: Option<Sizes>,
    /// Where the load's temporary directory is made; `None` is `/var/tmp`
    /// (usually on disk, unlike a tmpfs `/tmp`) or else the system temp dir.
    pub temp_parent: Option<PathBuf>,
    /// The load ends by itself after this long, even if nobody stops it
    /// (protection against a crashed caller). `None`: runs until stopped.
    pub max_duration: Option<Duration>,
    /// How long the group gets between SIGTERM and SIGKILL.
    pub grace: Duration,
}

impl LoadSpec {
    /// A spec with machine-bounded sizes, the default temp dir, no time
    /// limit and a 3 s grace period.
    pub fn new(scenario: Scenario, cpus: CpuSet, driver: Driver) -> LoadSpec {
        LoadSpec {
            scenario,
            cpus,
            driver,
            sizes: None,
            temp_parent: None,
            max_duration: None,
            grace: Duration::from_secs(3),
        }
    }
}

/// What ran, for the results (`results.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoadReport {
    /// The scenario.
    pub scenario: Scenario,
    /// `stress-ng` or `builtin`.
    pub driver: String,
    /// The stress-ng version, when stress-ng ran.
    pub stress_ng_version: Option<String>,
    /// The CPUs the load was confined to.
    pub cpus: CpuSet,
    /// Workers per stressor (N).
    pub workers_per_stressor: usize,
    /// Bytes per worker.
    pub sizes: Sizes,
    /// The exact command line (program and arguments) of every process started.
    pub commands: Vec<Vec<String>>,
    /// The load's temporary directory (removed at stop).
    pub temp_dir: Option<PathBuf>,
    /// The load's process group.
    pub pgid: Option<i32>,
}

impl LoadReport {
    /// The command lines as shell-like text, one per process started.
    pub fn command_lines(&self) -> Vec<String> {
        self.commands.iter().map(|argv| argv.join(" ")).collect()
    }
}

/// How a load ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StopReport {
    /// Whether SIGTERM was not enough and SIGKILL was sent.
    pub sigkill_needed: bool,
    /// Milliseconds from SIGTERM to the group being empty.
    pub stop_ms: u64,
    /// Zombies of the group whose reaping is up to another process (not
    /// running; listed for honesty).
    pub zombies_left: Vec<i32>,
    /// Machine-wide settings the load changed, each `file: what it held ->
    /// what the load left`, then what it reads after being written back
    /// (`, put back` when that is what it held).
    #[serde(default)]
    pub put_back: Vec<String>,
}

/// Machine-wide files a load may change behind our back: stress-ng turns
/// samepage merging on when it finds memory low (`--oom-avoid`'s check,
/// `stress_memory_ksm_merge`). Read when the load starts, written back when
/// it stops.
pub const WATCHED_FILES: [&str; 1] = ["sys/kernel/mm/ksm/run"];

/// A running background load. Stop it with [`Load::stop`]; dropping it
/// stops it too (ignoring errors).
#[derive(Debug)]
pub struct Load {
    report: LoadReport,
    children: Vec<Child>,
    sys: Sys,
    grace: Duration,
    log: Option<PathBuf>,
    stopped: bool,
    /// [`WATCHED_FILES`] as they read when the load started.
    watched: Vec<(&'static str, String)>,
}

impl Load {
    /// Starts `scenario` on `cpus` with `driver`, sizes bounded from this
    /// machine, no time limit.
    pub fn start(scenario: Scenario, cpus: &CpuSet, driver: &Driver) -> Result<Load> {
        Load::start_with(&LoadSpec::new(scenario, cpus.clone(), driver.clone()))
    }

    /// Starts the load described by `spec`.
    pub fn start_with(spec: &LoadSpec) -> Result<Load> {
        if spec.cpus.is_empty() {
            return Err(LoadError::NoCpus);
        }
        let n = spec.cpus.len();
        let sys = Sys::live();
        let mut load = Load {
            report: LoadReport {
                scenario: spec.scenario,
                driver: spec.driver.name().to_string(),
                stress_ng_version: None,
                cpus: spec.cpus.clone(),
                workers_per_stressor: n,
                sizes: spec.sizes.unwrap_or(Sizes {
                    vm_bytes: 0,
                    hdd_bytes: 0,
                }),
                commands: Vec::new(),
                temp_dir: None,
                pgid: None,
            },
            children: Vec::new(),
            sys,
            grace: spec.grace,
            log: None,
            stopped: false,
            watched: Vec::new(),
        };
        if spec.scenario == Scenario::None {
            return Ok(load);
        }
        load.watched = WATCHED_FILES
            .iter()
            .filter_map(|f| Some((*f, load.sys.read(f).ok()?.trim().to_string())))
            .collect();
        let parent = spec.temp_parent.clone().unwrap_or_else(default_temp_parent);
        load.report.sizes = match spec.sizes {
            Some(s) => s,
            None => Sizes::for_machine(&load.sys, &parent, n)?,
        };
        // From here on, an early return drops `load`, which stops whatever
        // was started and removes the temporary directory.
        let temp = make_temp_dir(&parent)?;
        load.report.temp_dir = Some(temp.clone());
        let log = temp.join("load.log");
        load.log = Some(log.clone());

        let argvs: Vec<Vec<String>> = match &spec.driver {
            Driver::StressNg(path) => {
                let info = stressng::probe(path)?;
                load.report.stress_ng_version = info.version.clone();
                let args = stressng::args(
                    spec.scenario,
                    n,
                    &load.report.sizes,
                    &info.caps,
                    &temp,
                    spec.max_duration,
                )?;
                let mut argv = vec![path.display().to_string()];
                argv.extend(args);
                vec![argv]
            }
            Driver::Builtin(exe) => {
                let mut v = Vec::new();
                for &st in spec.scenario.stressors() {
                    let w = builtin::WorkerArgs::new(
                        st,
                        &load.report.sizes,
                        Some(temp.clone()),
                        spec.max_duration,
                    );
                    for _ in 0..n {
                        let mut argv =
                            vec![exe.display().to_string(), WORKER_SUBCOMMAND.to_string()];
                        argv.extend(w.to_args());
                        v.push(argv);
                    }
                }
                v
            }
        };
        for argv in argvs {
            load.spawn(&argv, &spec.cpus, &log)?;
        }
        load.check_started(&spec.cpus)?;
        Ok(load)
    }

    /// Spawns one process of the load, confined to `cpus`, in the load's
    /// process group (the first one founds it).
    fn spawn(&mut self, argv: &[String], cpus: &CpuSet, log: &Path) -> Result<()> {
        use std::os::unix::process::CommandExt;
        let program = argv[0].clone();
        let spawn_err = |source| LoadError::Spawn {
            program: program.clone(),
            source,
        };
        let out = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(spawn_err)?;
        let err = out.try_clone().map_err(spawn_err)?;
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(self.report.pgid.unwrap_or(0));
        syscalls::set_affinity_before_exec(&mut cmd, cpus).map_err(spawn_err)?;
        let child = cmd.spawn().map_err(spawn_err)?;
        self.report.commands.push(argv.to_vec());
        if self.report.pgid.is_none() {
            self.report.pgid = Some(child.id() as i32);
        }
        self.children.push(child);
        Ok(())
    }

    /// Reads the affinity back (the kernel narrows a mask that reaches
    /// outside our cpuset without failing) and checks that nothing exited
    /// at once (bad options, missing CPUs).
    fn check_started(&mut self, cpus: &CpuSet) -> Result<()> {
        if let Some(first) = self.children.first() {
            let pid = first.id() as i32;
            if let Ok(got) = self.sys.affinity(pid) {
                if &got != cpus {
                    return Err(LoadError::AffinityNotHonoured {
                        asked: cpus.clone(),
                        got,
                    });
                }
            }
        }
        std::thread::sleep(Duration::from_millis(50));
        for (child, argv) in self.children.iter_mut().zip(&self.report.commands) {
            if let Ok(Some(status)) = child.try_wait() {
                let log = self
                    .log
                    .as_ref()
                    .and_then(|l| fs::read_to_string(l).ok())
                    .map(|t| tail(&t, 800))
                    .unwrap_or_default();
                return Err(LoadError::ExitedEarly {
                    program: argv.join(" "),
                    status: status.to_string(),
                    log,
                });
            }
        }
        Ok(())
    }

    /// What ran.
    pub fn report(&self) -> &LoadReport {
        &self.report
    }

    /// The load's process group (`None` for the `none` scenario).
    pub fn pgid(&self) -> Option<i32> {
        self.report.pgid
    }

    /// The processes of the load's group now (zombies included).
    pub fn members(&self) -> Vec<group::ProcEntry> {
        match self.report.pgid {
            Some(pgid) => group::group_members(&self.sys, pgid),
            None => Vec::new(),
        }
    }

    /// Stops the whole process tree: SIGTERM to the group, up to the grace
    /// period for it to empty, then SIGKILL; reaps our children, removes the
    /// temporary directory, and fails if any process of the group is still
    /// alive afterwards.
    pub fn stop(mut self) -> Result<StopReport> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<StopReport> {
        if self.stopped {
            return Ok(StopReport {
                sigkill_needed: false,
                stop_ms: 0,
                zombies_left: Vec::new(),
                put_back: Vec::new(),
            });
        }
        self.stopped = true;
        let started = Instant::now();
        let result = match self.report.pgid {
            Some(pgid) => self.end_group(pgid),
            None => Ok((false, Vec::new())),
        };
        let stop_ms = started.elapsed().as_millis() as u64;
        let removed = match &self.report.temp_dir {
            Some(dir) => fs::remove_dir_all(dir).or_else(|e| {
                if e.kind() == std::io::ErrorKind::NotFound {
                    Ok(())
                } else {
                    Err(LoadError::TempDir {
                        path: dir.clone(),
                        source: e,
                    })
                }
            }),
            None => Ok(()),
        };
        let put_back = self.put_back_watched();
        let (sigkill_needed, zombies_left) = result?;
        removed?;
        Ok(StopReport {
            sigkill_needed,
            stop_ms,
            zombies_left,
            put_back,
        })
    }

    /// Writes back each watched file the load changed, once it is gone,
    /// and reads it again; says which, and what each reads now.
    fn put_back_watched(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (file, before) in &self.watched {
            let Ok(now) = self.sys.read(file) else {
                continue;
            };
            let now = now.trim();
            if now != before {
                let after = match self.sys.write(file, before) {
                    Err(e) => format!("not put back: {e}"),
                    Ok(()) => match self.sys.read(file) {
                        Ok(v) if v.trim() == before => "put back".to_string(),
                        Ok(v) => format!("written back, but it reads {}", v.trim()),
                        Err(e) => format!("written back, unreadable now: {e}"),
                    },
                };
                out.push(format!("/{file}: {before} -> {now}, {after}"));
            }
        }
        out
    }

    /// SIGTERM, wait, SIGKILL, wait; returns (SIGKILL needed, zombies left).
    fn end_group(&mut self, pgid: i32) -> Result<(bool, Vec<i32>)> {
        use nix::sys::signal::Signal;
        // Never signal our own group (or init's): pgid is the pid of the
        // first child, which founded a new group with process_group(0).
        if pgid <= 1 || pgid == nix::unistd::getpgrp().as_raw() {
            return Err(LoadError::Signal {
                pgid,
                source: std::io::Error::other("refusing to signal our own process group"),
            });
        }
        let signal = |sig| match syscalls::signal_process_group(pgid, sig) {
            Ok(()) => Ok(()),
            // ESRCH: the group is already empty.
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(()),
            Err(source) => Err(LoadError::Signal { pgid, source }),
        };
        signal(Signal::SIGTERM)?;
        if self.wait_empty(pgid, self.grace) {
            return Ok((false, Vec::new()));
        }
        signal(Signal::SIGKILL)?;
        if self.wait_empty(pgid, Duration::from_secs(5)) {
            return Ok((true, Vec::new()));
        }
        let left = group::group_members(&self.sys, pgid);
        let alive: Vec<i32> = left
            .iter()
            .filter(|p| !p.is_zombie())
            .map(|p| p.pid)
            .collect();
        if alive.is_empty() {
            Ok((true, left.iter().map(|p| p.pid).collect()))
        } else {
            Err(LoadError::Survivors { pgid, pids: alive })
        }
    }

    /// Reaps our children and polls `/proc` until the group is empty or
    /// `limit` passes; true when empty.
    fn wait_empty(&mut self, pgid: i32, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        loop {
            self.children
                .retain_mut(|c| !matches!(c.try_wait(), Ok(Some(_)) | Err(_)));
            if self.children.is_empty() && group::group_members(&self.sys, pgid).is_empty() {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            eprintln!("cpushield: stopping the background load: {e}");
        }
    }
}

/// `/var/tmp` when it exists (usually on disk, so the hdd load reaches a
/// disk rather than RAM), else the system temporary directory.
fn default_temp_parent() -> PathBuf {
    let var_tmp = PathBuf::from("/var/tmp");
    if var_tmp.is_dir() {
        var_tmp
    } else {
        std::env::temp_dir()
    }
}

/// Makes a fresh private directory (0700) under `parent`.
fn make_temp_dir(parent: &Path) -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut last = None;
    for attempt in 0..16u32 {
        let dir = parent.join(format!(
            "cpushield-load.{}.{:08x}",
            std::process::id(),
            stamp.wrapping_add(attempt)
        ));
        match fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(source) => return Err(LoadError::TempDir { path: dir, source }),
        }
    }
    Err(LoadError::TempDir {
        path: parent.to_path_buf(),
        source: last.unwrap_or_else(|| std::io::Error::other("no free name")),
    })
}

/// The last `max` bytes of `text`, on a char boundary.
fn tail(text: &str, max: usize) -> String {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A load whose watched KSM switch read 0 at its start, on a root of
    /// our own (a fixture file, not this machine's).
    fn watching(root: &Path) -> Load {
        let spec = LoadSpec::new(
            Scenario::None,
            CpuSet::parse_list("0").unwrap(),
            Driver::Builtin(PathBuf::from("/nonexistent")),
        );
        let mut load = Load::start_with(&spec).unwrap();
        load.sys = Sys::at(root);
        load.watched = vec![(WATCHED_FILES[0], "0".into())];
        load
    }

    #[test]
    fn what_the_load_turned_on_is_put_back_when_it_stops() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(WATCHED_FILES[0]);
        fs::create_dir_all(file.parent().unwrap()).unwrap();
        // stress-ng found memory low and turned samepage merging on.
        fs::write(&file, "1\n").unwrap();
        let report = watching(dir.path()).stop().unwrap();
        assert_eq!(
            report.put_back,
            ["/sys/kernel/mm/ksm/run: 0 -> 1, put back"]
        );
        assert_eq!(fs::read_to_string(&file).unwrap().trim(), "0");
        // Left as it was: nothing to say.
        let report = watching(dir.path()).stop().unwrap();
        assert!(report.put_back.is_empty(), "{:?}", report.put_back);
    }

    #[test]
    fn scenario_names_round_trip() {
        for sc in Scenario::ALL {
            assert_eq!(sc.name().parse::<Scenario>().unwrap(), sc);
        }
        assert!("disk".parse::<Scenario>().is_err());
        assert_eq!(Scenario::Full.stressors().len(), 4);
        assert!(Scenario::None.stressors().is_empty());
        assert_eq!(serde_json::to_string(&Scenario::Full).unwrap(), "\"full\"");
    }

    #[test]
    fn sizes_never_exceed_a_quarter_of_what_is_free() {
        const G: u64 = 1 << 30;
        // Plenty: stress-ng's defaults.
        let s = Sizes::bounded(64 * G, 500 * G, 4);
        assert_eq!(s.vm_bytes, Sizes::VM_CAP);
        assert_eq!(s.hdd_bytes, Sizes::HDD_CAP);
        // Tight: a quarter shared by the workers.
        let s = Sizes::bounded(2 * G, 4 * G, 8);
        assert_eq!(s.vm_bytes, 2 * G / 4 / 8);
        assert_eq!(s.hdd_bytes, 4 * G / 4 / 8);
        assert!(s.vm_bytes * 8 <= 2 * G / 4);
        // Nothing known: the floor, never zero.
        let s = Sizes::bounded(0, 0, 0);
        assert_eq!(s.vm_bytes, Sizes::FLOOR);
        assert_eq!(s.hdd_bytes, Sizes::FLOOR);
    }

    #[test]
    fn sizes_for_this_machine_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let s = Sizes::for_machine(&Sys::live(), dir.path(), 2).unwrap();
        assert!(
            (Sizes::FLOOR..=Sizes::VM_CAP).contains(&s.vm_bytes),
            "{s:?}"
        );
        assert!(
            (Sizes::FLOOR..=Sizes::HDD_CAP).contains(&s.hdd_bytes),
            "{s:?}"
        );
        // A fixture root without meminfo is an error, not a guess.
        let empty = tempfile::tempdir().unwrap();
        assert!(matches!(
            Sizes::for_machine(&Sys::at(empty.path()), dir.path(), 2),
            Err(LoadError::Meminfo(_))
        ));
    }

    #[test]
    fn tail_keeps_char_boundaries() {
        assert_eq!(tail("abc", 10), "abc");
        assert_eq!(tail("xxµs", 2), "s");
        assert_eq!(tail("  done \n", 100), "done");
    }

    #[test]
    fn none_scenario_starts_nothing() {
        let load = Load::start(
            Scenario::None,
            &CpuSet::first_n(1),
            &Driver::Builtin("/nonexistent".into()),
        )
        .unwrap();
        assert_eq!(load.pgid(), None);
        assert!(load.report().commands.is_empty());
        let r = load.stop().unwrap();
        assert!(!r.sigkill_needed);
    }

    #[test]
    fn empty_cpu_set_is_refused() {
        let e = Load::start(
            Scenario::Cpu,
            &CpuSet::new(),
            &Driver::Builtin("/nonexistent".into()),
        );
        assert!(matches!(e, Err(LoadError::NoCpus)));
    }

    #[test]
    fn missing_program_fails_and_cleans_up() {
        let parent = tempfile::tempdir().unwrap();
        let mut spec = LoadSpec::new(
            Scenario::Cpu,
            CpuSet::first_n(1),
            Driver::Builtin("/nonexistent/cpushield".into()),
        );
        spec.temp_parent = Some(parent.path().to_path_buf());
        let e = Load::start_with(&spec);
        assert!(matches!(e, Err(LoadError::Spawn { .. })), "{e:?}");
        assert_eq!(fs::read_dir(parent.path()).unwrap().count(), 0);
    }
}
