//! What the shield reads of irqbalance: its process, its unit and the
//! files that set its environment, cpushield's drop-in, systemd's
//! environment, and the ban all of them add up to.

use serde::{Deserialize, Serialize};

use super::*;

/// Unit files of irqbalance, in systemd's search order.
const IRQBALANCE_UNIT_FILES: [&str; 3] = [
    "etc/systemd/system/irqbalance.service",
    "usr/lib/systemd/system/irqbalance.service",
    "lib/systemd/system/irqbalance.service",
];
/// The directories of drop-ins for irqbalance's unit, in systemd's order of
/// precedence: a drop-in of one name in an earlier one hides the others.
const IRQBALANCE_DROPIN_DIRS: [&str; 4] = [
    "etc/systemd/system/irqbalance.service.d",
    "run/systemd/system/irqbalance.service.d",
    "usr/lib/systemd/system/irqbalance.service.d",
    "lib/systemd/system/irqbalance.service.d",
];
/// The environment files distributions give irqbalance's unit (Debian,
/// Fedora/RHEL, upstream's two defaults).
pub(super) const IRQBALANCE_ENV_FILES: [&str; 4] = [
    "etc/default/irqbalance",
    "etc/sysconfig/irqbalance",
    "usr/share/irqbalance/irqbalance.env",
    "usr/lib/irqbalance/defaults.env",
];

/// Where distributions install irqbalance's executable.
const IRQBALANCE_EXES: [&str; 3] = [
    "/usr/sbin/irqbalance",
    "/sbin/irqbalance",
    "/usr/bin/irqbalance",
];

/// Whether process `pid` runs irqbalance's executable (`/proc/PID/exe`,
/// also when the file was replaced by an upgrade since it started). Its
/// name proves nothing: any user can name a process `irqbalance`.
pub fn runs_irqbalance(sys: &Sys, pid: i32) -> bool {
    let Some(exe) = procfs::exe(sys, pid) else {
        return false;
    };
    let exe = exe.strip_suffix(" (deleted)").unwrap_or(&exe);
    IRQBALANCE_EXES.contains(&exe)
}

/// The irqbalance process among `threads`: a process leader named
/// `irqbalance` that runs irqbalance's executable ([`runs_irqbalance`]).
pub fn process<'a>(sys: &Sys, threads: &'a [Thread]) -> Option<&'a Thread> {
    (threads.iter())
        .filter(|t| t.pid == t.tid && t.name == "irqbalance")
        .find(|t| runs_irqbalance(sys, t.pid))
}

/// irqbalance as found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Irqbalance {
    /// The process, when it runs.
    pub pid: Option<i32>,
    /// Its cgroup (`/system.slice/irqbalance.service` under systemd).
    pub cgroup: Option<String>,
    /// A unit file of `irqbalance.service` exists.
    pub unit: bool,
    /// CPUs irqbalance bans by itself, which a ban of cpushield's must keep:
    /// the user's `IRQBALANCE_BANNED_CPULIST` / `IRQBALANCE_BANNED_CPUS`
    /// when set, else the boot-isolated and `nohz_full` CPUs (setting the
    /// variable switches irqbalance's own detection of those off).
    pub own_ban: CpuSet,
    /// The user's file that sets a ban, with the line (reported).
    pub user_ban: Option<String>,
    /// The drop-in directory exists already.
    pub dropin_dir: bool,
    /// cpushield's drop-in, when it exists (content).
    pub dropin: Option<String>,
    /// cpushield's environment file, when it exists (content).
    pub env: Option<String>,
    /// The ban variables systemd's manager environment sets
    /// (`IRQBALANCE_BANNED_CPULIST=...` lines; empty: none), which every
    /// unit started gets; `None` when it could not be read or is not
    /// asked (no systemd, no unit).
    #[serde(default)]
    pub manager_ban: Option<Vec<String>>,
    /// When the process started, in clock ticks since boot: with `pid`,
    /// what tells a restarted irqbalance from the same one.
    #[serde(default)]
    pub started: Option<u64>,
}

impl Irqbalance {
    /// Whether it runs as systemd's `irqbalance.service`.
    pub fn under_systemd(&self) -> bool {
        self.cgroup
            .as_deref()
            .is_some_and(|c| c.ends_with("/irqbalance.service"))
    }
}

/// Reads irqbalance: its process among `threads`, its unit and files, and
/// (under `systemd`) the ban variables of systemd's manager environment.
/// `None` when it neither runs nor is installed as a unit.
pub fn read(
    sys: &Sys,
    threads: &[Thread],
    boot_isolated: &CpuSet,
    systemd: bool,
) -> Option<Irqbalance> {
    let process = process(sys, threads);
    let unit = IRQBALANCE_UNIT_FILES.iter().any(|f| sys.exists(f));
    if process.is_none() && !unit {
        return None;
    }
    let mut user_ban = None;
    let mut own_ban = None;
    for file in env_files(sys) {
        let Ok(text) = sys.read(&file) else { continue };
        for (var, value) in env_assignments(&text) {
            let cpus = match var {
                BANNED_CPULIST => CpuSet::parse_list(value).ok(),
                BANNED_CPUS => CpuSet::parse_mask(value).ok(),
                _ => continue,
            };
            if let Some(cpus) = cpus.filter(|_| !value.is_empty()) {
                user_ban = Some(format!("/{file}: {var}={value}"));
                own_ban = Some(cpus);
            }
        }
    }
    let own_ban = own_ban.unwrap_or_else(|| {
        let nohz = sys
            .read_cpulist("sys/devices/system/cpu/nohz_full")
            .unwrap_or_default();
        boot_isolated.union(&nohz)
    });
    // Its systemd unit shows in the unified hierarchy ("0::"), or with
    // cgroup v1 in systemd's own ("name=systemd"): not in the thread's
    // cpuset cgroup, which is all the snapshot reads on v1.
    let cgroup = process.map(|t| {
        sys.read(&format!("proc/{}/cgroup", t.pid))
            .ok()
            .and_then(|text| {
                text.lines()
                    .filter_map(|l| l.splitn(3, ':').nth(2))
                    .find(|path| path.ends_with(".service"))
                    .map(str::to_string)
            })
            .unwrap_or_else(|| t.cgroup.clone())
    });
    Some(Irqbalance {
        pid: process.map(|t| t.pid),
        cgroup,
        unit,
        own_ban,
        user_ban,
        dropin_dir: sys.path(IRQBALANCE_DROPIN_DIR).is_dir(),
        dropin: sys.read(IRQBALANCE_DROPIN).ok(),
        env: sys.read(IRQBALANCE_ENV).ok(),
        manager_ban: (systemd && unit).then(|| manager_ban(sys)).flatten(),
        started: process.and_then(|t| procfs::start_ticks(sys, t.pid)),
    })
}

/// A running irqbalance, and what tells it which CPUs to leave alone.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Running {
    /// Its pid.
    pub pid: i32,
    /// `/proc/PID/environ` (`None`: unreadable, not root).
    pub environ: Option<String>,
    /// `/proc/PID/cmdline`.
    pub cmdline: String,
    /// The environment files it reads (those that exist), concatenated.
    pub config: String,
}

/// The running irqbalance process, with its environment, command line and
/// environment files; `None` when none runs.
pub fn running(sys: &Sys) -> Option<Running> {
    let pid = procfs::list_pids(sys)
        .unwrap_or_default()
        .into_iter()
        .filter(|&p| procfs::read_comm(sys, p).as_deref() == Some("irqbalance"))
        .find(|&p| runs_irqbalance(sys, p))?;
    Some(Running {
        pid,
        environ: sys.read(&format!("proc/{pid}/environ")).ok(),
        cmdline: sys.read(&format!("proc/{pid}/cmdline")).unwrap_or_default(),
        config: env_files(sys)
            .iter()
            .filter_map(|p| sys.read(p).ok())
            .collect::<Vec<_>>()
            .join("\n"),
    })
}

/// The running irqbalance's pid and the CPUs its own settings ban
/// (environment, command line, environment files: [`banned`]; empty when
/// none); `None` when none runs.
pub fn own_ban(sys: &Sys) -> Option<(i32, CpuSet)> {
    let r = running(sys)?;
    let ban = banned(r.environ.as_deref().unwrap_or_default(), &r.cmdline, &r.config);
    Some((r.pid, ban.unwrap_or_default()))
}

/// CPUs irqbalance is told to leave alone, from its environment
/// (`IRQBALANCE_BANNED_CPUS` mask or `IRQBALANCE_BANNED_CPULIST`), its command
/// line (`--banned-cpus`, `--banned-cpulist`) and its environment files
/// (`config`, as [`running`] reads them); `None` when nothing bans CPUs.
pub fn banned(environ: &str, cmdline: &str, config: &str) -> Option<CpuSet> {
    let mut out: Option<CpuSet> = None;
    let mut add = |s: CpuSet| out = Some(out.take().unwrap_or_default().union(&s));
    let kv = environ
        .split('\0')
        .chain(config.lines())
        .map(|l| l.trim().trim_start_matches("export ").trim());
    for l in kv {
        if l.starts_with('#') {
            continue;
        }
        let Some((k, v)) = l.split_once('=') else {
            continue;
        };
        let v = v.trim().trim_matches('"').trim_matches('\'');
        match k.trim() {
            BANNED_CPUS => add(CpuSet::parse_mask(v).unwrap_or_default()),
            BANNED_CPULIST => add(CpuSet::parse_list(v).unwrap_or_default()),
            _ => {}
        }
    }
    let args: Vec<&str> = cmdline.split('\0').collect();
    for (i, a) in args.iter().enumerate() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) => (f, Some(v)),
            None => (*a, None),
        };
        let value = inline
            .or_else(|| args.get(i + 1).copied())
            .filter(|v| !v.is_empty());
        match (flag, value) {
            ("--banned-cpus", Some(v)) => add(CpuSet::parse_mask(v).unwrap_or_default()),
            ("--banned-cpulist", Some(v)) => add(CpuSet::parse_list(v).unwrap_or_default()),
            _ => {}
        }
    }
    out
}

/// The ban variables of systemd's manager environment (`NAME=value`).
fn manager_ban(sys: &Sys) -> Option<Vec<String>> {
    let env = sys.manager_environment().ok()?;
    Some(
        env.lines()
            .filter(|l| {
                BAN_VARIABLES
                    .iter()
                    .any(|v| l.starts_with(&format!("{v}=")))
            })
            .map(str::to_string)
            .collect(),
    )
}

/// The environment files irqbalance reads: its unit's `EnvironmentFile=`
/// lines (the first unit file in systemd's search order; a distribution may
/// build it with its own paths), then those of the unit's drop-ins other
/// than cpushield's, else the files distributions give it.
pub(super) fn env_files(sys: &Sys) -> Vec<String> {
    let unit = IRQBALANCE_UNIT_FILES.iter().find_map(|f| sys.read(f).ok());
    let mut listed = Vec::new();
    for text in unit
        .into_iter()
        .chain(dropins(sys).filter_map(|f| sys.read(&f).ok()))
    {
        add_env_files(&mut listed, &text);
    }
    if listed.is_empty() {
        IRQBALANCE_ENV_FILES.iter().map(|f| f.to_string()).collect()
    } else {
        listed
    }
}

/// The user's drop-ins for irqbalance's unit, in the order systemd applies
/// them (by file name; of two of one name, the one in the directory first
/// in [`IRQBALANCE_DROPIN_DIRS`]), cpushield's own left out.
fn dropins(sys: &Sys) -> impl Iterator<Item = String> {
    let mut by_name = std::collections::BTreeMap::new();
    for dir in IRQBALANCE_DROPIN_DIRS {
        for name in sys.list(dir).unwrap_or_default() {
            if name.ends_with(".conf") {
                by_name
                    .entry(name.clone())
                    .or_insert(format!("{dir}/{name}"));
            }
        }
    }
    by_name
        .into_values()
        .filter(|path| path != IRQBALANCE_DROPIN)
}

/// The files of a unit's `EnvironmentFile=` lines, relative to the root
/// (`-`, for a file that may be missing, dropped; specifiers left out).
#[cfg(test)]
pub(super) fn unit_env_files(unit: &str) -> Vec<String> {
    let mut files = Vec::new();
    add_env_files(&mut files, unit);
    files
}

/// Adds the files of a unit file's or drop-in's `EnvironmentFile=` lines
/// to `files` (relative to the root; `-`, for a file that may be missing,
/// dropped; specifiers left out). An empty assignment empties the list, as
/// systemd does.
fn add_env_files(files: &mut Vec<String>, text: &str) {
    for value in text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("EnvironmentFile="))
    {
        let file = value.trim().trim_start_matches('-').trim_start_matches('/');
        if value.trim().is_empty() {
            files.clear();
        } else if !file.is_empty() && !file.contains('%') {
            files.push(file.to_string());
        }
    }
}

/// `NAME=value` lines of an environment file (comments and blanks
/// skipped, one level of quotes removed).
pub(super) fn env_assignments(text: &str) -> Vec<(&str, &str)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim(), v.trim().trim_matches('"').trim_matches('\'')))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn irqbalance_is_known_by_its_executable_not_its_name() {
        let root = tempfile::tempdir().unwrap();
        let sys = Sys::at(root.path());
        for (pid, exe) in [
            (1, Some("/usr/sbin/irqbalance")),
            (2, Some("/sbin/irqbalance (deleted)")),
            (3, Some("/usr/bin/irqbalance")),
            (4, Some("/tmp/irqbalance")),
            (5, Some("/usr/sbin/irqbalance-fake")),
            (6, None),
        ] {
            std::fs::create_dir_all(sys.path(&format!("proc/{pid}"))).unwrap();
            if let Some(exe) = exe {
                let link = sys.path(&format!("proc/{pid}/exe"));
                std::os::unix::fs::symlink(exe, link).unwrap();
            }
        }
        let found: Vec<i32> = (1..=6).filter(|&p| runs_irqbalance(&sys, p)).collect();
        assert_eq!(found, [1, 2, 3]);
    }
}
