//! The other programs that own part of what a shield touches, read from the
//! machine: systemd (the cgroup tree), irqbalance (IRQ affinities) and
//! tuned (CPU and IRQ pinning). Read-only; the plan decides what to do.

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;
use crate::sys::procfs::Thread;
use crate::sys::Sys;

/// Where cpushield's runtime drop-in for irqbalance goes: a runtime
/// directory of systemd's unit search path, gone at reboot, beside and
/// never instead of the user's own configuration.
pub const IRQBALANCE_DROPIN_DIR: &str = "run/systemd/system/irqbalance.service.d";
/// The drop-in: adds cpushield's environment file to the unit.
pub const IRQBALANCE_DROPIN: &str = "run/systemd/system/irqbalance.service.d/50-cpushield.conf";
/// The environment file with the ban. systemd ignores files of a drop-in
/// directory that do not end in `.conf`, so it can live beside the drop-in.
pub const IRQBALANCE_ENV: &str = "run/systemd/system/irqbalance.service.d/cpushield.env";
/// irqbalance's unit.
pub const IRQBALANCE_UNIT: &str = "irqbalance.service";
/// irqbalance's ban as a CPU list (irqbalance 1.8+): what cpushield sets.
pub const BANNED_CPULIST: &str = "IRQBALANCE_BANNED_CPULIST";
/// irqbalance's ban as a hex mask (deprecated).
pub const BANNED_CPUS: &str = "IRQBALANCE_BANNED_CPUS";
/// The variables that tell irqbalance which CPUs to leave alone.
pub const BAN_VARIABLES: [&str; 2] = [BANNED_CPULIST, BANNED_CPUS];
/// The manager-environment assignment of a ban of `banned` (see
/// [`crate::shield::change::Action::IrqbalanceBan`]).
pub fn manager_ban_assignment(banned: &CpuSet) -> String {
    format!("{BANNED_CPULIST}={banned}")
}

/// Unit files of irqbalance, in systemd's search order.
const IRQBALANCE_UNIT_FILES: [&str; 3] = [
    "etc/systemd/system/irqbalance.service",
    "usr/lib/systemd/system/irqbalance.service",
    "lib/systemd/system/irqbalance.service",
];
/// The environment files distributions give irqbalance's unit (Debian,
/// Fedora/RHEL, upstream's two defaults).
const IRQBALANCE_ENV_FILES: [&str; 4] = [
    "etc/default/irqbalance",
    "etc/sysconfig/irqbalance",
    "usr/share/irqbalance/irqbalance.env",
    "usr/lib/irqbalance/defaults.env",
];

/// What the owners of this machine are.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owners {
    /// systemd is the init system (`/run/systemd/system` exists).
    pub systemd: bool,
    /// irqbalance, when installed as a unit or running.
    pub irqbalance: Option<Irqbalance>,
    /// tuned, when it has an active profile.
    pub tuned: Option<Tuned>,
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
}

impl Irqbalance {
    /// Whether it runs as systemd's `irqbalance.service`.
    pub fn under_systemd(&self) -> bool {
        self.cgroup
            .as_deref()
            .is_some_and(|c| c.ends_with("/irqbalance.service"))
    }
}

/// tuned's active profile.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tuned {
    /// `/etc/tuned/active_profile` (profiles may be combined with spaces).
    pub profile: String,
    /// tuned runs.
    pub running: bool,
    /// What in the profile pins CPUs or IRQs (`isolated_cores`,
    /// `banned_cpus`, a cpu-partitioning or realtime profile), if anything.
    pub pins: Vec<String>,
}

impl Owners {
    /// Reads the owners; `threads` is the snapshot's thread list (for the
    /// irqbalance and tuned processes).
    pub fn read(sys: &Sys, threads: &[Thread], boot_isolated: &CpuSet) -> Owners {
        let systemd = sys.systemd_booted();
        let mut irqbalance = read_irqbalance(sys, threads, boot_isolated);
        if let Some(irqb) = irqbalance.as_mut().filter(|i| systemd && i.unit) {
            irqb.manager_ban = sys.manager_environment().ok().map(|env| {
                env.lines()
                    .filter(|l| {
                        BAN_VARIABLES
                            .iter()
                            .any(|v| l.starts_with(&format!("{v}=")))
                    })
                    .map(str::to_string)
                    .collect()
            });
        }
        Owners {
            systemd,
            irqbalance,
            tuned: read_tuned(sys, threads),
        }
    }
}

fn leader<'a>(threads: &'a [Thread], name: &str) -> Option<&'a Thread> {
    threads.iter().find(|t| t.pid == t.tid && t.name == name)
}

fn read_irqbalance(sys: &Sys, threads: &[Thread], boot_isolated: &CpuSet) -> Option<Irqbalance> {
    let process = leader(threads, "irqbalance");
    let unit = IRQBALANCE_UNIT_FILES.iter().any(|f| sys.exists(f));
    if process.is_none() && !unit {
        return None;
    }
    let mut user_ban = None;
    let mut own_ban = None;
    for file in IRQBALANCE_ENV_FILES {
        let Ok(text) = sys.read(file) else { continue };
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
        manager_ban: None,
    })
}

/// `NAME=value` lines of an environment file (comments and blanks
/// skipped, one level of quotes removed).
fn env_assignments(text: &str) -> Vec<(&str, &str)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim(), v.trim().trim_matches('"').trim_matches('\'')))
        .collect()
}

fn read_tuned(sys: &Sys, threads: &[Thread]) -> Option<Tuned> {
    let profile = sys.read_trimmed("etc/tuned/active_profile").ok()?;
    if profile.is_empty() {
        return None;
    }
    let mut pins = Vec::new();
    for name in profile.split_whitespace() {
        if name.contains("cpu-partitioning") || name.contains("realtime") {
            pins.push(format!("profile {name}"));
        }
        for dir in ["etc/tuned", "usr/lib/tuned", "usr/lib/tuned/profiles"] {
            let Ok(conf) = sys.read(&format!("{dir}/{name}/tuned.conf")) else {
                continue;
            };
            for key in ["isolated_cores", "banned_cpus", "cpu_affinity"] {
                if conf
                    .lines()
                    .any(|l| l.trim_start().starts_with(key) && !l.trim_start().starts_with('#'))
                {
                    pins.push(format!("{name}: {key}"));
                }
            }
            break;
        }
    }
    Some(Tuned {
        profile,
        running: leader(threads, "tuned").is_some(),
        pins,
    })
}

/// The value of `name` in process `pid`'s environment
/// (`/proc/PID/environ`), if it is set there.
pub fn environ_var(sys: &Sys, pid: i32, name: &str) -> Option<String> {
    let env = sys.read(&format!("proc/{pid}/environ")).ok()?;
    env.split('\0')
        .find_map(|kv| kv.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_assignments_skip_comments_and_strip_quotes() {
        let text = "# IRQBALANCE_BANNED_CPULIST=0\nIRQBALANCE_ARGS=\"--policyscript=x\"\n  IRQBALANCE_BANNED_CPULIST='4-5'\n";
        assert_eq!(
            env_assignments(text),
            [
                ("IRQBALANCE_ARGS", "--policyscript=x"),
                ("IRQBALANCE_BANNED_CPULIST", "4-5")
            ]
        );
    }
}
