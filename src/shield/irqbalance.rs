//! The irqbalance component of the shield. irqbalance spreads IRQs over
//! the CPUs every 10 s and knows nothing of cpusets: unless it bans the
//! shielded CPUs it moves IRQs back onto them. Everything the shield does
//! with it lives here: what is read (its process, unit and files, cpushield's
//! drop-in, systemd's environment), the one step planned (a ban), how that
//! step is made and undone (its control socket, or systemd's environment or
//! a runtime drop-in and a restart), whether the ban still holds, and what
//! became of the process, read back for the report.

use super::apply::ApplyError;
use super::component::{Changing, Component, Draft, InPlace, Planning, Slot};
use super::plan_error::PlanError;
use super::reshape::Originals;
use super::snapshot::Snapshot;
use super::undo::Undone;
use serde::{Deserialize, Serialize};

use super::change::{Action, Owner, Refusal, Refused, Step};
use super::holds::Holds;
use super::journal::{self, Entry, State};
use super::note::Note;

use crate::cpulist::CpuSet;
use crate::finding::{Finding, Severity};
use crate::sys::irqbalance as socket;
use crate::sys::procfs::{self, Thread};
use crate::sys::systemd::SystemdCall;
use crate::sys::{Sys, SysError};

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

/// irqbalance's own change, journaled as [`Action::Own`] (its tag as
/// journals of version 1 wrote it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Own {
    /// Keep irqbalance off the shield: `IRQBALANCE_BANNED_CPULIST` in its
    /// environment, then systemd restarts it if it runs. Set in systemd's
    /// manager environment (`manager_env`) when nothing else sets a ban:
    /// no unit file is changed, so systemd need not reload (a
    /// `daemon-reload` took 4.5-10.4 s in the emulated test guest, most of
    /// `on` and of `off`), and the running irqbalance is told through its
    /// control socket, or restarted where it has none; undone by removing
    /// the variable and `settings cpus NULL`, or a restart of an
    /// irqbalance started with the ban. Otherwise a runtime drop-in for its unit adds an environment
    /// file setting it, then systemd reloads; undone by removing both (or
    /// writing back what was there), reloading and restarting again.
    IrqbalanceBan {
        /// CPUs banned: the shield and irqbalance's own ban.
        banned: CpuSet,
        /// The drop-in directory had to be made (and is removed by undo).
        make_dir: bool,
        /// The drop-in that was there before, if any.
        previous_dropin: Option<String>,
        /// The environment file that was there before, if any.
        previous_env: Option<String>,
        /// Through the manager environment rather than a drop-in.
        #[serde(default)]
        manager_env: bool,
    },
}

/// The ban `action` makes, when it is irqbalance's.
fn ban_of(action: &Action) -> Option<Own> {
    action.own_as::<Own>()
}
/// The manager-environment assignment of a ban of `banned` (see
/// [`Own::IrqbalanceBan`]).
pub fn manager_ban_assignment(banned: &CpuSet) -> String {
    format!("{BANNED_CPULIST}={banned}")
}

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
const IRQBALANCE_ENV_FILES: [&str; 4] = [
    "etc/default/irqbalance",
    "etc/sysconfig/irqbalance",
    "usr/share/irqbalance/irqbalance.env",
    "usr/lib/irqbalance/defaults.env",
];

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
    let process = procfs::leader(threads, "irqbalance");
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
#[derive(Debug, Clone, Default, PartialEq)]
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
        .find(|&p| procfs::read_comm(sys, p).as_deref() == Some("irqbalance"))?;
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
fn env_files(sys: &Sys) -> Vec<String> {
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
fn unit_env_files(unit: &str) -> Vec<String> {
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
fn env_assignments(text: &str) -> Vec<(&str, &str)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim(), v.trim().trim_matches('"').trim_matches('\'')))
        .collect()
}

/// Plans the ban: under systemd, irqbalance's unit gets the shield plus what
/// it banned by itself (the variable switches its own isolcpus/nohz_full
/// detection off), leaving the user's files as they are. irqbalance reads
/// its ban from its environment only at start, so without its unit the
/// conflict is only reported (in `notes`).
pub fn plan(
    systemd: bool,
    irqb: Option<&Irqbalance>,
    shield: &CpuSet,
    notes: &mut Vec<Note>,
) -> Vec<Step> {
    let Some(irqb) = irqb else {
        return Vec::new();
    };
    if !(systemd && irqb.unit) {
        if let Some(pid) = irqb.pid {
            notes.push(Note::IrqbalanceWithoutUnit {
                pid,
                shield: shield.clone(),
                ban: shield.union(&irqb.own_ban),
            });
        }
        return Vec::new();
    }
    if irqb.pid.is_some() && !irqb.under_systemd() {
        notes.push(Note::IrqbalanceOutsideUnit {
            cgroup: irqb.cgroup.clone(),
        });
    }
    let banned = shield.union(&irqb.own_ban);
    if let Some(user) = &irqb.user_ban {
        notes.push(Note::IrqbalanceOwnBanKept {
            setting: user.clone(),
            banned: banned.clone(),
        });
    }
    // The manager environment only when no one else sets a ban there or in
    // irqbalance's files (a unit's own settings win over it) and no drop-in
    // of ours is left from an earlier shield.
    let manager_env = irqb.user_ban.is_none()
        && irqb.manager_ban.as_ref().is_some_and(Vec::is_empty)
        && irqb.dropin.is_none()
        && irqb.env.is_none();
    let ban = Own::IrqbalanceBan {
        banned,
        make_dir: !manager_env && !irqb.dropin_dir,
        previous_dropin: irqb.dropin.clone(),
        previous_env: irqb.env.clone(),
        manager_env,
    };
    vec![Step::optional(
        Owner::Irqbalance,
        Action::own(Owner::Irqbalance, &ban),
    )]
}

/// The CPUs a plan's steps ban, if they ban any.
pub fn planned_ban(steps: &[Step]) -> Option<CpuSet> {
    steps.iter().find_map(|s| match ban_of(&s.action)? {
        Own::IrqbalanceBan { banned, .. } => Some(banned),
    })
}

/// The CPUs banned by a plan's steps, unless the kernel or systemd
/// `refused` the ban.
pub fn ban_made(steps: &[Step], refused: &[Refused]) -> Option<CpuSet> {
    if refused.iter().any(|r| r.owner == Owner::Irqbalance) {
        return None;
    }
    planned_ban(steps)
}

/// Whether the ban `action` asks for is in place already on the machine
/// whose irqbalance is `live` (a resize leaves it as it is then).
pub fn ban_in_place(live: Option<&Irqbalance>, action: &Action) -> bool {
    let Some(own) = ban_of(action) else {
        return false;
    };
    let Own::IrqbalanceBan {
        banned,
        previous_dropin,
        previous_env,
        manager_env,
        ..
    } = &own;
    if *manager_env {
        live.and_then(|i| i.manager_ban.as_ref())
            .is_some_and(|b| b.contains(&manager_ban_assignment(banned)))
    } else {
        previous_dropin.as_deref() == Some(&dropin(banned))
            && previous_env.as_deref() == Some(&env_file(banned))
    }
}

/// irqbalance as it was before the shield journaled in `entries`: a ban in
/// systemd's environment is ours, so before it there was none.
pub fn before_shield(irqb: &mut Irqbalance, entries: &[Entry]) {
    let ours = entries.iter().any(|e| {
        matches!(
            ban_of(&e.action),
            Some(Own::IrqbalanceBan {
                manager_env: true,
                ..
            })
        )
    });
    if ours {
        irqb.manager_ban = Some(Vec::new());
    }
}

/// Short description of a ban's target for reports.
pub fn describe(manager_env: bool) -> String {
    if manager_env {
        format!("systemd environment {BANNED_CPULIST}")
    } else {
        format!("/{IRQBALANCE_DROPIN}")
    }
}

/// The environment file of the ban. irqbalance takes the first non-empty
/// of IRQBALANCE_BANNED_CPUS (hex, deprecated) and
/// IRQBALANCE_BANNED_CPULIST (irqbalance 1.8+, cputree.c
/// setup_banned_cpus), so the first is set empty: a user's hex mask,
/// already part of `banned`, must not hide the list.
pub fn env_file(banned: &CpuSet) -> String {
    format!(
        "# cpushield: CPUs {banned} banned while shielded; removed by 'cpushield off'\nIRQBALANCE_BANNED_CPUS=\nIRQBALANCE_BANNED_CPULIST={banned}\n"
    )
}

/// The drop-in. Variables of an EnvironmentFile= override Environment=,
/// and of several files the last one read wins (systemd.exec(5)); a
/// drop-in's EnvironmentFile= comes after the unit's own.
pub fn dropin(banned: &CpuSet) -> String {
    format!(
        "# cpushield: keeps irqbalance off the shielded CPUs {banned}; removed by 'cpushield off'\n[Service]\nEnvironmentFile=/{IRQBALANCE_ENV}\n"
    )
}

/// Makes the ban: in systemd's environment, then the running irqbalance
/// told through its control socket (restarted where none answers); or
/// the drop-in and its environment file, a reload and a restart.
pub fn ban(sys: &Sys, banned: &CpuSet, make_dir: bool, manager_env: bool) -> Result<(), SysError> {
    if manager_env {
        sys.systemd(&SystemdCall::SetEnvironment {
            assignments: vec![manager_ban_assignment(banned)],
        })?;
        return ban_running(sys, banned);
    }
    sys.write_config(IRQBALANCE_ENV, &env_file(banned), make_dir)?;
    sys.write_config(IRQBALANCE_DROPIN, &dropin(banned), false)?;
    reload_and_restart(sys)
}

/// Undoes a journaled ban (`action`): irqbalance gets its environment and
/// the CPUs it used before. Returns whether irqbalance was told or
/// restarted, and what could not be put back.
pub fn unban(sys: &Sys, action: &Action) -> (bool, Vec<Refusal>) {
    let Some(own) = ban_of(action) else {
        return (false, Vec::new());
    };
    let Own::IrqbalanceBan {
        banned,
        make_dir,
        previous_dropin,
        previous_env,
        manager_env,
    } = &own;
    if *manager_env {
        let unset = SystemdCall::UnsetEnvironment {
            names: vec![BANNED_CPULIST.to_string()],
        };
        return match sys.systemd(&unset).and_then(|()| unban_running(sys, banned)) {
            Ok(()) => (true, Vec::new()),
            Err(err) => (false, vec![Refusal {
                target: "irqbalance".into(),
                reason: format!("could not take the ban out of systemd's environment and restart irqbalance: {err}"),
            }]),
        };
    }
    let mut failed = Vec::new();
    let mut restore = |path: &str, previous: Option<&str>, remove_dir: bool| {
        let result = match previous {
            Some(text) => sys.write_config(path, text, false),
            None => sys.remove_config(path, remove_dir),
        };
        if let Err(err) = result {
            failed.push(Refusal {
                target: format!("/{path}"),
                reason: err.to_string(),
            });
        }
    };
    restore(IRQBALANCE_DROPIN, previous_dropin.as_deref(), false);
    // the directory goes with the last file, when on made it (and it is empty)
    restore(IRQBALANCE_ENV, previous_env.as_deref(), *make_dir);
    match reload_and_restart(sys) {
        Ok(()) => (true, failed),
        Err(err) => {
            failed.push(Refusal {
                target: "irqbalance".into(),
                reason: format!("could not reload systemd and restart irqbalance: {err}"),
            });
            (false, failed)
        }
    }
}

fn reload_and_restart(sys: &Sys) -> Result<(), SysError> {
    sys.systemd(&SystemdCall::DaemonReload)?;
    restart(sys)
}

/// The ids of running irqbalance processes with a control socket.
fn with_socket(sys: &Sys) -> Vec<i32> {
    socket::socket_pids(sys)
        .into_iter()
        .filter(|pid| {
            sys.read(&format!("proc/{pid}/stat"))
                .is_ok_and(|st| st.contains("(irqbalance)"))
        })
        .collect()
}

/// Gives the running irqbalance the ban through its control socket, so
/// that it needs no restart (it applies it at its next cycle and moves no
/// IRQ before); restarts it where no socket answers (it then reads the ban
/// from systemd's environment, set just before).
fn ban_running(sys: &Sys, banned: &CpuSet) -> Result<(), SysError> {
    let told = with_socket(sys)
        .into_iter()
        .filter(|&pid| socket::set_banned(sys, pid, Some(banned)).is_ok())
        .count();
    if told > 0 {
        Ok(())
    } else {
        restart(sys)
    }
}

/// Takes the ban out of the running irqbalance, whichever way `on` (or a
/// restart since) gave it: an irqbalance started with the ban in its
/// environment is restarted (systemd's environment no longer has it);
/// one told through its socket goes back to its environment's ban
/// (`settings cpus NULL`); without an answering socket, a restart.
fn unban_running(sys: &Sys, banned: &CpuSet) -> Result<(), SysError> {
    let pids = with_socket(sys);
    let started_with_ban = |pid: i32| {
        procfs::environ_var(sys, pid, BANNED_CPULIST)
            .and_then(|v| CpuSet::parse_list(&v).ok())
            .is_some_and(|c| c == *banned)
    };
    if pids.is_empty() || pids.iter().any(|&pid| started_with_ban(pid)) {
        return restart(sys);
    }
    if pids
        .iter()
        .all(|&pid| socket::set_banned(sys, pid, None).is_ok())
    {
        Ok(())
    } else {
        restart(sys)
    }
}

fn restart(sys: &Sys) -> Result<(), SysError> {
    sys.systemd(&SystemdCall::TryRestart {
        unit: IRQBALANCE_UNIT.into(),
    })
}

/// How a ban stopped holding, for `status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BanLost {
    /// What is wrong, as read.
    pub what: String,
    /// A repair of its own, when making the shield again is not the one.
    pub repair: Option<&'static str>,
}

/// What `status` reads of cpushield's ban to judge whether it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BanHold {
    /// Neither the drop-in nor systemd's environment carries the ban.
    Unset,
    /// The ban is set and no irqbalance runs: nothing to tell.
    NotRunning,
    /// The ban is set and irqbalance `pid` runs.
    Running {
        /// Its process id.
        pid: i32,
        /// `IRQBALANCE_BANNED_CPULIST` in its environment.
        list: CpuSet,
        /// `IRQBALANCE_BANNED_CPUS` in its environment, when set: it
        /// overrides the list.
        hex: Option<String>,
        /// Whether its control socket bans the shield (or it was told too
        /// recently to have answered); `None`: not asked, its environment
        /// already bans the shield.
        told: Option<bool>,
    },
}

/// Reads what [`ban_lost`] judges of the shield `state`'s ban, on the
/// machine whose irqbalance is `irqb` (`None`: the shield set no ban, or
/// `on` did not finish).
pub(super) fn read_hold(sys: &Sys, state: &State, irqb: Option<&Irqbalance>) -> Option<BanHold> {
    let ban = state.irqbalance_ban.as_ref().filter(|_| state.complete)?;
    Some(read_ban(sys, ban, irqb, &state.shield))
}

impl Holds for Option<BanHold> {
    /// `irqbalance`: the ban is gone, or the running irqbalance lacks it
    /// (its repair is a restart of irqbalance).
    fn lost(&self, state: &State, repair: &str) -> Vec<Finding> {
        let (Some(hold), Some(ban)) = (self, &state.irqbalance_ban) else {
            return Vec::new();
        };
        ban_lost(hold, ban)
            .map(|lost| {
                let next = lost.repair.unwrap_or(repair);
                Finding::new("irqbalance", Severity::Bad, 60, lost.what, next)
            })
            .into_iter()
            .collect()
    }
}

/// Reads what [`ban_lost`] judges of the ban of `ban` (shield `shield`) on
/// the machine whose irqbalance is `irqb`.
pub fn read_ban(sys: &Sys, ban: &CpuSet, irqb: Option<&Irqbalance>, shield: &CpuSet) -> BanHold {
    let in_manager = irqb
        .and_then(|i| i.manager_ban.as_ref())
        .is_some_and(|b| b.contains(&manager_ban_assignment(ban)));
    if irqb.is_none_or(|i| i.dropin.is_none()) && !in_manager {
        return BanHold::Unset;
    }
    let Some(pid) = irqb.and_then(|i| i.pid) else {
        return BanHold::NotRunning;
    };
    let list = procfs::environ_var(sys, pid, BANNED_CPULIST)
        .and_then(|v| CpuSet::parse_list(&v).ok())
        .unwrap_or_default();
    let hex = procfs::environ_var(sys, pid, BANNED_CPUS).filter(|v| !v.is_empty());
    let by_environ = hex.is_none() && list.is_superset_of(shield);
    BanHold::Running {
        pid,
        told: (!by_environ).then(|| told(sys, pid, shield)),
        list,
        hex,
    }
}

/// Whether cpushield's ban of `ban` still holds, from what [`read_ban`]
/// read: the ban is still set (drop-in or systemd's environment), and the
/// running irqbalance has it, by its environment or its control socket.
/// Pure.
pub fn ban_lost(hold: &BanHold, ban: &CpuSet) -> Option<BanLost> {
    match hold {
        BanHold::Unset => Some(BanLost {
            what: format!(
                "cpushield's ban of CPUs {ban} is gone (neither its drop-in /{IRQBALANCE_DROPIN} nor {} in systemd's environment): irqbalance may move IRQs onto the shield",
                manager_ban_assignment(ban)
            ),
            repair: None,
        }),
        BanHold::NotRunning | BanHold::Running { told: None | Some(true), .. } => None,
        BanHold::Running {
            pid,
            list,
            hex,
            told: Some(false),
        } => Some(BanLost {
            what: format!(
                "irqbalance (pid {pid}) runs without the ban of CPUs {ban} (its environment: IRQBALANCE_BANNED_CPULIST={list}{}; its control socket does not ban them either)",
                hex.as_ref().map(|h| format!(", IRQBALANCE_BANNED_CPUS={h}")).unwrap_or_default()
            ),
            repair: Some("systemctl restart irqbalance (after 'systemctl daemon-reload' when the ban is a drop-in), or run 'cpushield on' again"),
        }),
    }
}

/// Whether irqbalance `pid` bans `shield` by its control socket. A ban
/// sent since the shield was made takes effect at irqbalance's next cycle,
/// up to its interval later, and it moves no IRQ before; then it rebuilds,
/// and one before 1.9.4 reads no message for one more interval. So an
/// irqbalance older than the shield counts as told while the shield is
/// younger than two intervals plus 2 s (`on` had its answer, or restarted
/// it with the ban in its environment). Else it must say so (`setup`),
/// however long it takes to answer (up to [`socket::PATIENT`]).
fn told(sys: &Sys, pid: i32, shield: &CpuSet) -> bool {
    let interval_s = socket::interval_s(sys, pid);
    let shield_age_s = journal::state_age(sys);
    let irqbalance_age_s = procfs::boot_ticks(sys)
        .zip(procfs::start_ticks(sys, pid))
        .map(|(now, start)| now.saturating_sub(start) / 100);
    if let (Some(shield), Some(irqb)) = (shield_age_s, irqbalance_age_s) {
        if irqb > shield && shield <= 2 * interval_s + 2 {
            return true;
        }
    }
    socket::banned(sys, pid).is_ok_and(|b| b.is_superset_of(shield))
}

/// What became of the irqbalance process while the shield was made,
/// read back from `/proc` afterwards.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "process")]
pub enum Process {
    /// The same process (id and start time) runs: it was not restarted.
    Kept {
        /// Its process id.
        pid: i32,
    },
    /// Another process runs: systemd restarted it.
    Restarted {
        /// The process id before.
        before: i32,
        /// The process id now.
        after: i32,
    },
    /// It runs now and did not before.
    Started {
        /// Its process id.
        pid: i32,
    },
    /// It ran before and does not now.
    Gone {
        /// The process id it had.
        before: i32,
    },
    /// It ran neither before nor after: the ban waits for its next start.
    NotRunning,
}

/// Compares irqbalance `before` with the process among `threads_after`,
/// both by process id and start time.
pub fn process_after(sys: &Sys, before: Option<&Irqbalance>, threads_after: &[Thread]) -> Process {
    let after = procfs::leader(threads_after, "irqbalance")
        .map(|t| (t.pid, procfs::start_ticks(sys, t.pid)));
    compare(
        before.and_then(|i| i.pid.map(|pid| (pid, i.started))),
        after,
    )
}

/// [`Process`] from the (process id, start time) before and after.
fn compare(before: Option<(i32, Option<u64>)>, after: Option<(i32, Option<u64>)>) -> Process {
    match (before, after) {
        (Some(b), Some(a)) if a == b => Process::Kept { pid: a.0 },
        (Some(b), Some(a)) => Process::Restarted {
            before: b.0,
            after: a.0,
        },
        (None, Some(a)) => Process::Started { pid: a.0 },
        (Some(b), None) => Process::Gone { before: b.0 },
        (None, None) => Process::NotRunning,
    }
}

/// irqbalance's ban of the shielded CPUs, as a component of the shield.
pub(super) struct Part;

impl Component for Part {
    fn owner(&self) -> Owner {
        Owner::Irqbalance
    }

    fn check(&self, _: &Planning, _: &mut Draft) -> Result<(), PlanError> {
        Ok(())
    }

    fn plan(&self, cx: &Planning, d: &mut Draft) -> Result<(), PlanError> {
        let (systemd, irqb) = (cx.snap.owners.systemd, cx.snap.owners.irqbalance.as_ref());
        let ban = plan(systemd, irqb, cx.shield, &mut d.plan.notes);
        d.add(Slot::Ban, ban);
        Ok(())
    }

    fn before(&self, _: &Originals, entries: &[Entry], snap: &mut Snapshot) {
        if let Some(irqb) = snap.owners.irqbalance.as_mut() {
            before_shield(irqb, entries);
        }
    }

    fn change(&self, cx: &InPlace, mine: Vec<(Slot, Step)>, out: &mut Changing) {
        let live = cx.live.owners.irqbalance.as_ref();
        let steps: Vec<Step> = mine.iter().map(|(_, s)| s.clone()).collect();
        out.change.irqbalance_ban = planned_ban(&steps);
        for (slot, step) in mine {
            if !ban_in_place(live, &step.action) {
                out.add(slot, [step]);
            }
        }
    }

    fn make(&self, sys: &Sys, action: &Action) -> Option<Result<(), ApplyError>> {
        let Own::IrqbalanceBan {
            banned,
            make_dir,
            manager_env,
            ..
        } = ban_of(action)?;
        Some(ban(sys, &banned, make_dir, manager_env).map_err(ApplyError::from))
    }

    fn undo(&self, sys: &Sys, entry: &Entry, out: &mut Undone) -> bool {
        if ban_of(&entry.action).is_none() {
            return false;
        }
        let (restored, failed) = unban(sys, &entry.action);
        out.restored += usize::from(restored);
        out.failed.extend(failed);
        true
    }

    /// irqbalance gets its environment back before anything else: a banned
    /// irqbalance still running while undo puts IRQs back moves them again
    /// within its 10 s cycle (SYSTEMD-NOTES 10). Its ban is the first change
    /// `on` makes, for the same reason the other way round.
    fn undone_first(&self, action: &Action) -> bool {
        ban_of(action).is_some()
    }

    fn describe(&self, action: &Action) -> Option<String> {
        let Own::IrqbalanceBan { manager_env, .. } = ban_of(action)?;
        Some(describe(manager_env))
    }

    fn plan_line(&self, action: &Action) -> Option<String> {
        let Own::IrqbalanceBan {
            banned,
            manager_env,
            ..
        } = ban_of(action)?;
        Some(match manager_env {
            true => format!(
                "irqbalance: systemctl set-environment {BANNED_CPULIST}={banned}, then its socket (settings cpus) or try-restart"
            ),
            false => format!(
                "irqbalance: runtime drop-in {BANNED_CPULIST}={banned}, daemon-reload, try-restart"
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpus(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    /// An empty root, and a `Sys` on it.
    fn fixture_root() -> (tempfile::TempDir, Sys) {
        let root = tempfile::tempdir().unwrap();
        let sys = Sys::at(root.path());
        (root, sys)
    }

    /// Writes `text` to `path` under `root`, making its directories.
    fn put(root: &std::path::Path, path: &str, text: &str) {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn the_files_irqbalance_reads_are_its_units_else_the_distributions() {
        let unit = "[Service]\nEnvironmentFile=-/usr/share/irqbalance/irqbalance.env\n\
                    EnvironmentFile=-/etc/irqbalance.env\nEnvironmentFile=%h/x\n\
                    ExecStart=/usr/bin/irqbalance --foreground $IRQBALANCE_ARGS\n";
        assert_eq!(
            unit_env_files(unit),
            ["usr/share/irqbalance/irqbalance.env", "etc/irqbalance.env"]
        );
        let (root, sys) = fixture_root();
        let write = |path: &str, text: &str| put(root.path(), path, text);
        // No unit file: the distributions' files.
        assert_eq!(env_files(&sys), IRQBALANCE_ENV_FILES);
        // A unit that reads /etc/irqbalance.env: the user's ban there is
        // irqbalance's own, which cpushield's ban keeps.
        write("usr/lib/systemd/system/irqbalance.service", unit);
        write("etc/irqbalance.env", "IRQBALANCE_BANNED_CPULIST=\"1\"\n");
        write("etc/default/irqbalance", "IRQBALANCE_BANNED_CPULIST=3\n");
        let irqb = read(&sys, &[], &CpuSet::new(), true).expect("its unit is installed");
        assert_eq!(irqb.own_ban, cpus("1"));
        assert_eq!(
            irqb.user_ban.as_deref(),
            Some("/etc/irqbalance.env: IRQBALANCE_BANNED_CPULIST=1")
        );
    }

    #[test]
    fn a_ban_in_a_file_a_drop_in_adds_is_irqbalances_own() {
        let (root, sys) = fixture_root();
        let write = |path: &str, text: &str| put(root.path(), path, text);
        write(
            "usr/lib/systemd/system/irqbalance.service",
            "[Service]\nEnvironmentFile=-/etc/default/irqbalance\n",
        );
        write("etc/default/irqbalance", "IRQBALANCE_ARGS=\n");
        // The user's drop-in adds a file with a ban; a drop-in of the same
        // name under /usr/lib is hidden by it, and cpushield's own drop-in
        // (and the ban it names) is not the user's.
        let user = "[Service]\nEnvironmentFile=/etc/irqbalance-rt.env\n";
        write("etc/systemd/system/irqbalance.service.d/10-rt.conf", user);
        let hidden = "[Service]\nEnvironmentFile=/usr/lib/hidden.env\n";
        write(
            "usr/lib/systemd/system/irqbalance.service.d/10-rt.conf",
            hidden,
        );
        write("usr/lib/hidden.env", "IRQBALANCE_BANNED_CPULIST=7\n");
        write("etc/irqbalance-rt.env", "IRQBALANCE_BANNED_CPULIST=1\n");
        write(IRQBALANCE_DROPIN, &dropin(&cpus("1-3")));
        write(IRQBALANCE_ENV, &env_file(&cpus("1-3")));
        assert_eq!(
            env_files(&sys),
            ["etc/default/irqbalance", "etc/irqbalance-rt.env"]
        );
        let irqb = read(&sys, &[], &CpuSet::new(), true).expect("its unit is installed");
        assert_eq!(irqb.own_ban, cpus("1"));
        assert_eq!(
            irqb.user_ban.as_deref(),
            Some("/etc/irqbalance-rt.env: IRQBALANCE_BANNED_CPULIST=1")
        );
        // A drop-in that empties the list leaves only what follows it.
        write(
            "etc/systemd/system/irqbalance.service.d/20-only.conf",
            "[Service]\nEnvironmentFile=\nEnvironmentFile=-/etc/only.env\n",
        );
        assert_eq!(env_files(&sys), ["etc/only.env"]);
    }

    #[test]
    fn irqbalance_bans() {
        assert_eq!(banned("", "/usr/sbin/irqbalance\0--foreground\0", ""), None);
        assert_eq!(
            banned("PATH=/bin\0IRQBALANCE_BANNED_CPUS=c\0", "", ""),
            Some(cpus("2-3"))
        );
        assert_eq!(
            banned(
                "",
                "irqbalance\0--banned-cpulist=1\0",
                "#IRQBALANCE_BANNED_CPULIST=5\nIRQBALANCE_BANNED_CPULIST=\"3\"\n"
            ),
            Some(cpus("1,3"))
        );
        assert_eq!(banned("", "irqbalance\0--banned-cpus\0", ""), None);
    }

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

    #[test]
    fn a_process_is_restarted_only_when_its_id_or_start_time_changed() {
        assert_eq!(
            compare(Some((412, Some(900))), Some((412, Some(900)))),
            Process::Kept { pid: 412 }
        );
        assert_eq!(
            compare(Some((412, Some(900))), Some((530, Some(2000)))),
            Process::Restarted {
                before: 412,
                after: 530
            }
        );
        // the same id, started again (ids wrap)
        assert_eq!(
            compare(Some((412, Some(900))), Some((412, Some(2000)))),
            Process::Restarted {
                before: 412,
                after: 412
            }
        );
        assert_eq!(compare(None, Some((7, None))), Process::Started { pid: 7 });
        assert_eq!(compare(Some((7, None)), None), Process::Gone { before: 7 });
        assert_eq!(compare(None, None), Process::NotRunning);
    }
}
