//! systemd, the other owner of the cgroup tree, reached through its own
//! command-line clients (`busctl`, `systemctl`), which every systemd host
//! has. systemd is the single writer of the cgroup v2 tree: a cgroup made
//! behind its back loses its controllers at the next `daemon-reload` or
//! unit start, because systemd enables in each `cgroup.subtree_control`
//! only what its own units need (tests/vm/SYSTEMD-NOTES.md, items 1-2).
//! So on a systemd host the shield is a unit of systemd's: a transient
//! slice with `AllowedCPUs=`, which makes systemd itself keep `+cpuset`
//! enabled in the root, and whose processes live in transient scopes.
//!
//! Transient units live under `/run/systemd/transient` and vanish when
//! stopped or at reboot, so nothing of the shield outlives the machine's
//! uptime.

use std::io;
use std::process::Command;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{dbus, Sys, SysError};
use crate::cpulist::CpuSet;

/// One request to systemd.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "call", rename_all = "snake_case")]
pub enum SystemdCall {
    /// Start a transient slice with `AllowedCPUs=cpus`; done once its
    /// cgroup (`cgroup_dir`, relative to the root) reads those CPUs.
    StartSlice {
        /// Unit name (`cpushield.slice`).
        unit: String,
        /// Its `AllowedCPUs=`.
        cpus: CpuSet,
        /// Its cgroup directory, relative to the root.
        cgroup_dir: String,
        /// Its `CPUSetPartition=` (systemd 261 and later): systemd makes
        /// the partition; done once it reads back valid.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        partition: Option<String>,
    },
    /// Start a transient scope in `slice` holding the processes `pids`;
    /// done once they are in its cgroup (`cgroup_dir`).
    StartScope {
        /// Unit name (`cpushield-run-PID.scope`).
        unit: String,
        /// The slice it belongs to.
        slice: String,
        /// Processes moved into it.
        pids: Vec<i32>,
        /// Its cgroup directory, relative to the root.
        cgroup_dir: String,
    },
    /// Change the `AllowedCPUs=` of a running slice (runtime only);
    /// done once its cgroup (`cgroup_dir`) reads those CPUs.
    SetAllowedCpus {
        /// Unit name (`cpushield.slice`).
        unit: String,
        /// Its new `AllowedCPUs=`.
        cpus: CpuSet,
        /// Its cgroup directory, relative to the root.
        cgroup_dir: String,
        /// Its `CPUSetPartition=` again (systemd 261 and later).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        partition: Option<String>,
    },
    /// Stop a unit (and wait for the job).
    Stop {
        /// Unit name.
        unit: String,
    },
    /// Reload the unit files (after a drop-in changed).
    DaemonReload,
    /// Set variables of the manager's environment, which units started
    /// from then on get (runtime only: gone at reboot).
    SetEnvironment {
        /// `NAME=value` assignments.
        assignments: Vec<String>,
    },
    /// Remove variables from the manager's environment.
    UnsetEnvironment {
        /// Variable names.
        names: Vec<String>,
    },
    /// Restart a unit if it runs.
    TryRestart {
        /// Unit name.
        unit: String,
    },
    /// Start a unit (and wait for the job): one whose last start systemd
    /// skipped on a failed condition, once what failed it is undone.
    Start {
        /// Unit name.
        unit: String,
    },
}

impl SystemdCall {
    /// The command line that makes this call on a live system.
    pub fn command_line(&self) -> Vec<String> {
        let manager = [
            "busctl",
            "call",
            "org.freedesktop.systemd1",
            "/org/freedesktop/systemd1",
            "org.freedesktop.systemd1.Manager",
            "StartTransientUnit",
            "ssa(sv)a(sa(sv))",
        ];
        let mut out: Vec<String> = Vec::new();
        match self {
            SystemdCall::StartSlice {
                unit,
                cpus,
                partition,
                ..
            } => {
                out.extend(manager.iter().map(|s| s.to_string()));
                let count = 2 + usize::from(partition.is_some());
                out.extend([unit.clone(), "fail".into(), count.to_string()]);
                out.extend([
                    "Description".into(),
                    "s".into(),
                    format!("cpushield: CPUs {cpus} shielded"),
                ]);
                out.extend(allowed_cpus_property(cpus));
                out.extend(partition_property(partition.as_deref()));
                out.push("0".into());
            }
            SystemdCall::SetAllowedCpus {
                unit,
                cpus,
                partition,
                ..
            } => {
                out.extend(
                    [
                        "busctl",
                        "call",
                        "org.freedesktop.systemd1",
                        "/org/freedesktop/systemd1",
                        "org.freedesktop.systemd1.Manager",
                        "SetUnitProperties",
                        "sba(sv)",
                    ]
                    .iter()
                    .map(|s| s.to_string()),
                );
                // runtime = true: the change lives under /run and ends with the unit.
                let count = 1 + usize::from(partition.is_some());
                out.extend([unit.clone(), "true".into(), count.to_string()]);
                out.extend(allowed_cpus_property(cpus));
                out.extend(partition_property(partition.as_deref()));
            }
            SystemdCall::StartScope {
                unit, slice, pids, ..
            } => {
                out.extend(manager.iter().map(|s| s.to_string()));
                // CollectMode: a scope that ended failed is unloaded too
                // (as `systemd-run --collect`), not kept loaded in its
                // slice after `off` stopped it.
                out.extend([unit.clone(), "fail".into(), "3".into()]);
                out.extend(["Slice".into(), "s".into(), slice.clone()]);
                out.extend([
                    "CollectMode".into(),
                    "s".into(),
                    "inactive-or-failed".into(),
                ]);
                out.extend(["PIDs".into(), "au".into(), pids.len().to_string()]);
                out.extend(pids.iter().map(i32::to_string));
                out.push("0".into());
            }
            SystemdCall::Stop { unit } => {
                out.extend(["systemctl".into(), "stop".into(), unit.clone()])
            }
            SystemdCall::DaemonReload => out.extend(["systemctl".into(), "daemon-reload".into()]),
            SystemdCall::SetEnvironment { assignments } => {
                out.extend(["systemctl".into(), "set-environment".into()]);
                out.extend(assignments.iter().cloned());
            }
            SystemdCall::UnsetEnvironment { names } => {
                out.extend(["systemctl".into(), "unset-environment".into()]);
                out.extend(names.iter().cloned());
            }
            SystemdCall::TryRestart { unit } => {
                out.extend(["systemctl".into(), "try-restart".into(), unit.clone()])
            }
            SystemdCall::Start { unit } => {
                out.extend(["systemctl".into(), "start".into(), unit.clone()])
            }
        }
        out
    }
}

/// The busctl command line that starts `argv` as the transient service
/// `unit`, restarted by systemd whenever it exits (`Restart=always`), in
/// `system.slice`, outside any shield. `--` ends busctl's own options:
/// the service's arguments (`--cpus`) are not busctl's.
pub fn start_service_command(unit: &str, description: &str, argv: &[String]) -> Vec<String> {
    let mut out: Vec<String> = [
        "busctl",
        "call",
        "--",
        "org.freedesktop.systemd1",
        "/org/freedesktop/systemd1",
        "org.freedesktop.systemd1.Manager",
        "StartTransientUnit",
        "ssa(sv)a(sa(sv))",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    out.extend([unit.into(), "replace".into(), "4".into()]);
    out.extend(["Description".into(), "s".into(), description.into()]);
    out.extend(["Restart".into(), "s".into(), "always".into()]);
    out.extend(["RestartUSec".into(), "t".into(), "200000".into()]);
    out.extend(["ExecStart".into(), "a(sasb)".into(), "1".into()]);
    out.push(argv[0].clone());
    out.push(argv.len().to_string());
    out.extend(argv.iter().cloned());
    out.push("false".into());
    out.push("0".into());
    out
}

#[cfg(test)]
mod service_tests {
    use super::*;

    #[test]
    fn the_managers_version_is_that_of_the_shared_library_it_has_mapped() {
        let debian = "7f1c2a000000-7f1c2a0c8000 r--p 00000000 fe:01 1234 /usr/lib/x86_64-linux-gnu/systemd/libsystemd-shared-252.so\n";
        assert_eq!(version_mapped(debian), Some(252));
        let fedora =
            "7f00-7f10 r-xp 0 0:0 1 /usr/lib64/systemd/libsystemd-shared-256.11-1.fc41.so\n";
        assert_eq!(version_mapped(fedora), Some(256));
        assert_eq!(
            version_mapped("7f00-7f10 r-xp 0 0:0 1 /usr/lib/libc.so.6\n"),
            None
        );
    }

    #[test]
    fn a_reset_allowed_cpus_drop_in_says_nothing_and_one_with_a_value_does() {
        let reset = "# This is a drop-in unit file extension, created via \"systemctl set-property\"\n# or an equivalent operation. Do not edit.\n[Slice]\nAllowedCPUs=\n";
        assert!(says_nothing(reset));
        assert!(!says_nothing(
            &reset.replace("AllowedCPUs=", "AllowedCPUs=0-1")
        ));
        assert!(!says_nothing("[Slice]\nAllowedCPUs=\nCPUWeight=50\n"));
    }

    #[test]
    fn a_service_command_line_keeps_its_dashes_away_from_busctl() {
        let argv: Vec<String> = ["/usr/bin/cpushield", "guard", "--cpus", "2-3"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let cmd = start_service_command("cpushield-guard.service", "d", &argv);
        let end_of_options = cmd.iter().position(|a| a == "--").unwrap();
        let first_dash_arg = cmd.iter().position(|a| a == "--cpus").unwrap();
        assert!(end_of_options < first_dash_arg, "{cmd:?}");
        // ExecStart a(sasb): one entry, the path, argc, argv, ignore-failure false.
        let exec = cmd.iter().position(|a| a == "ExecStart").unwrap();
        assert_eq!(
            cmd[exec + 1..exec + 5],
            ["a(sasb)", "1", "/usr/bin/cpushield", "4"]
        );
        assert_eq!(cmd[cmd.len() - 2..], ["false", "0"]);
    }
}

/// `AllowedCPUs` as a D-Bus property of busctl's command line.
fn allowed_cpus_property(cpus: &CpuSet) -> Vec<String> {
    let bytes = allowed_cpus_bytes(cpus);
    let mut out = vec![
        "AllowedCPUs".to_string(),
        "ay".into(),
        bytes.len().to_string(),
    ];
    out.extend(bytes.iter().map(u8::to_string));
    out
}

/// `CPUSetPartition` (systemd 261 and later) as a D-Bus property of
/// busctl's command line, when asked for.
fn partition_property(partition: Option<&str>) -> Vec<String> {
    partition.map_or_else(Vec::new, |kind| {
        vec!["CPUSetPartition".into(), "s".into(), kind.into()]
    })
}

/// The first systemd that takes `CPUSetPartition=` (a slice's cgroup v2
/// partition, written by systemd and kept by it).
pub const PARTITION_SINCE: u32 = 261;

/// systemd's version from `systemctl --version` ("systemd 262 (262.1-1)").
pub fn parse_version(text: &str) -> Option<u32> {
    text.split_whitespace().nth(1)?.parse().ok()
}

/// The running systemd's version: that of the `libsystemd-shared-N` the
/// manager (PID 1) has mapped, read from `/proc/1/maps` with no client
/// started (a repair reads it each time: a `systemctl` started under
/// emulation costs a good part of a second), and the version of the
/// manager that runs, not of a client upgraded since; else `systemctl
/// --version`.
pub(super) fn version_live(sys: &super::Sys) -> Option<u32> {
    let mapped = sys
        .read("proc/1/maps")
        .ok()
        .and_then(|maps| version_mapped(&maps));
    mapped.or_else(|| {
        run_client(&["systemctl".into(), "--version".into()])
            .ok()
            .as_deref()
            .and_then(parse_version)
    })
}

/// The version in the name of the `libsystemd-shared` a process has
/// mapped (`/proc/PID/maps`): `libsystemd-shared-252.so` (Debian),
/// `libsystemd-shared-256.11-1.fc41.so` (Fedora).
pub fn version_mapped(maps: &str) -> Option<u32> {
    maps.lines().find_map(|line| {
        let name = line.rsplit('/').next()?;
        let rest = name.strip_prefix("libsystemd-shared-")?;
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    })
}

/// systemd's D-Bus form of a CPU set (`AllowedCPUs`, type `ay`): CPU n is
/// bit n % 8 of byte n / 8.
pub fn allowed_cpus_bytes(cpus: &CpuSet) -> Vec<u8> {
    let Some(last) = cpus.last() else {
        return Vec::new();
    };
    let mut bytes = vec![0u8; last as usize / 8 + 1];
    for c in cpus.iter() {
        bytes[c as usize / 8] |= 1 << (c % 8);
    }
    bytes
}

/// The manager's environment: `NAME=value` lines, the variables every
/// unit started from now on gets. Read over systemd's private socket with
/// no client started (see [`super::dbus`]); where that fails (not root, an
/// older or other manager), from `systemctl show-environment`.
pub(super) fn manager_environment_live(sys: &super::Sys) -> super::Result<String> {
    let property = (dbus::MANAGER_PATH, dbus::MANAGER_INTERFACE, "Environment");
    let uid = nix::unistd::geteuid().as_raw();
    match dbus::get_property(&sys.path(dbus::SYSTEMD_PRIVATE), uid, property) {
        Ok(dbus::Value::Strings(vars)) => Ok(vars.iter().map(|v| format!("{v}\n")).collect()),
        _ => run_client(&["systemctl".into(), "show-environment".into()]),
    }
}

/// Runs one of systemd's clients (`argv`); its standard output, or an
/// error naming the command line and what it said on failure.
pub(super) fn run_client(argv: &[String]) -> super::Result<String> {
    let shown = argv.join(" ");
    let output = Command::new(&argv[0])
        .args(&argv[1..])
        .output()
        .map_err(|e| SysError::new("run", shown.clone(), None, e))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
        return Err(SysError::new(
            "run",
            shown,
            None,
            io::Error::other(format!("{} ({stderr})", output.status)),
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// After a call that asks systemd for a partition (`CPUSetPartition=`):
/// waits up to [`SETTLE`] for systemd to write it, and fails with the
/// kernel's reason when it reads back invalid. systemd only logs a warning
/// when the kernel refuses it and goes on with a member cgroup.
pub(super) fn await_partition(sys: &Sys, call: &SystemdCall) -> super::Result<()> {
    let (SystemdCall::StartSlice {
        cgroup_dir,
        partition: Some(kind),
        ..
    }
    | SystemdCall::SetAllowedCpus {
        cgroup_dir,
        partition: Some(kind),
        ..
    }) = call
    else {
        return Ok(());
    };
    let file = format!("{cgroup_dir}/cpuset.cpus.partition");
    let failed = |why: String| {
        let shown = call.command_line().join(" ");
        Err(SysError::new("run", shown, None, io::Error::other(why)))
    };
    let start = Instant::now();
    loop {
        let read = sys.read_trimmed(&file).unwrap_or_default();
        if read == *kind {
            return Ok(());
        }
        if read.starts_with(kind.as_str()) && read.contains("invalid") {
            return failed(format!(
                "systemd asked the kernel for the partition, and /{file} reads {read:?}"
            ));
        }
        if start.elapsed() >= SETTLE {
            return failed(format!(
                "systemd accepted the call but /{file} did not read {kind:?} within {} s (it reads {read:?})",
                SETTLE.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// After `systemctl stop UNIT`, read back that systemd let go of it. A
/// transient unit that ended failed stays loaded until its failure is
/// reset, and keeps its slice loaded with it (and so `+cpuset` in the
/// root's `subtree_control`, seen on Debian 12): its failure is reset,
/// then the unit must be unloaded within [`SETTLE`]. A unit from a unit
/// file (a service we stopped) only has to be inactive; its failure is
/// its owner's to read, not ours to reset.
fn unload_stopped(unit: &str) -> super::Result<()> {
    let show = || show_unit(unit, "LoadState,ActiveState,Transient");
    let mut state = show()?;
    if state.transient && state.active == "failed" {
        run_client(&["systemctl".into(), "reset-failed".into(), unit.into()])?;
    }
    let start = Instant::now();
    while !state.let_go() {
        if start.elapsed() >= SETTLE {
            return Err(SysError::new(
                "run",
                format!("systemctl stop {unit}"),
                None,
                io::Error::other(format!(
                    "systemd still holds {unit} (LoadState={}, ActiveState={}) {} s after stopping it; `systemctl status {unit}` says why",
                    state.load,
                    state.active,
                    SETTLE.as_secs()
                )),
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
        state = show()?;
    }
    Ok(())
}

/// Whether systemd skipped `unit`'s last start on a failed condition
/// and it is not running, as `systemctl show` says.
pub(super) fn unit_skipped_live(unit: &str) -> super::Result<bool> {
    Ok(show_unit(unit, "ActiveState,ConditionResult")?.skipped())
}

/// `systemctl show --property=PROPERTIES UNIT`, as far as [`UnitState`]
/// reads it.
fn show_unit(unit: &str, properties: &str) -> super::Result<UnitState> {
    let argv: Vec<String> = vec![
        "systemctl".into(),
        "show".into(),
        format!("--property={properties}"),
        unit.into(),
    ];
    Ok(UnitState::parse(&run_client(&argv)?))
}

/// The runtime drop-in systemd keeps of a unit's `AllowedCPUs=` set
/// through `SetUnitProperties` (a Kubernetes node's `system.slice`): once
/// reset it holds an empty assignment, which says nothing, and is removed
/// (with its directory when that is then empty), so that `off` leaves
/// `/run/systemd` as it found it (the Kubernetes guest saw
/// `system.slice.d/50-AllowedCPUs.conf` left). One that says anything
/// else is another's, and stays.
fn forget_empty_allowed_cpus(sys: &Sys, unit: &str) {
    // A slice's is under system.control, a scope's (init.scope) under
    // transient (seen on systemd 257).
    for place in ["system.control", "transient"] {
        let file = format!("run/systemd/{place}/{unit}.d/50-AllowedCPUs.conf");
        if sys.read(&file).is_ok_and(|text| says_nothing(&text)) {
            let _ = sys.remove_config(&file, true);
        }
    }
}

/// Whether a unit file's `text` holds nothing but comments, section
/// headers and empty `AllowedCPUs=` assignments.
fn says_nothing(text: &str) -> bool {
    text.lines().map(str::trim).all(|l| {
        l.is_empty()
            || l.starts_with('#')
            || l.starts_with(';')
            || (l.starts_with('[') && l.ends_with(']'))
            || l.split_once('=')
                .is_some_and(|(k, v)| k.trim() == "AllowedCPUs" && v.trim().is_empty())
    })
}

/// A unit's `AllowedCPUs=` reset (a Kubernetes node's `system.slice` given
/// back what it had). systemd then writes an empty `cpuset.cpus` (its
/// parent's CPUs), which the kernel refuses to a cgroup that holds tasks
/// (ENOSPC: only a cpuset without tasks may lose all its CPUs); it logs
/// that and leaves the CPUs it last wrote (seen on systemd 257 for
/// `system.slice` and `init.scope`). The empty value is written here when
/// the kernel takes it (a unit without tasks); else every possible CPU,
/// which gives the cgroup its parent's CPUs as the empty value did, CPUs
/// coming online later included. Done once the cgroup's effective CPUs are
/// its parent's.
fn reset_cpuset(sys: &Sys, cgroup_dir: &str) -> super::Result<()> {
    let file = format!("{cgroup_dir}/cpuset.cpus");
    if sys.read_trimmed(&file).is_ok_and(|now| !now.is_empty()) {
        // a newline, as `echo > cpuset.cpus`: a write of no byte may not
        // reach the kernel's handler
        if let Err(refused) = sys.write(&file, "\n") {
            let possible = sys.read_trimmed("sys/devices/system/cpu/possible");
            match possible {
                Ok(all) if refused.errno() == Some(libc::ENOSPC) => sys.write(&file, &all)?,
                _ => return Err(refused),
            }
        }
    }
    let parent = cgroup_dir.rsplit_once('/').map_or("", |(p, _)| p);
    let effective = |dir: &str| {
        sys.read_cpulist(&format!("{dir}/cpuset.cpus.effective"))
            .ok()
    };
    match (effective(cgroup_dir), effective(parent)) {
        (Some(own), Some(theirs)) if own == theirs => Ok(()),
        (own, theirs) => Err(SysError::new(
            "write",
            file.clone(),
            None,
            io::Error::other(format!(
                "the cgroup's effective CPUs ({}) are not its parent's ({}) after AllowedCPUs= was reset",
                own.map_or("unreadable".into(), |c| c.to_string()),
                theirs.map_or("unreadable".into(), |c| c.to_string())
            )),
        )),
    }
}

/// What `systemctl show` says of a unit, as far as a stop or a skipped
/// start is concerned.
#[derive(Debug, Default, PartialEq, Eq)]
struct UnitState {
    load: String,
    active: String,
    transient: bool,
    /// `ConditionResult=no`: the last start was skipped, a condition failed.
    condition_failed: bool,
}

impl UnitState {
    fn parse(text: &str) -> Self {
        let mut state = UnitState::default();
        for line in text.lines() {
            match line.split_once('=') {
                Some(("LoadState", v)) => state.load = v.trim().to_string(),
                Some(("ActiveState", v)) => state.active = v.trim().to_string(),
                Some(("Transient", v)) => state.transient = v.trim() == "yes",
                Some(("ConditionResult", v)) => state.condition_failed = v.trim() == "no",
                _ => {}
            }
        }
        state
    }

    /// Stopped for good: a transient unit unloaded (`not-found` once
    /// collected), any other unit inactive or failed.
    fn let_go(&self) -> bool {
        if self.transient {
            self.load != "loaded"
        } else {
            matches!(self.active.as_str(), "inactive" | "failed")
        }
    }

    /// Not running because systemd skipped its last start: a condition
    /// failed (irqbalance's `ConditionCPUs=>1` while systemd itself may
    /// use one CPU).
    fn skipped(&self) -> bool {
        self.condition_failed && matches!(self.active.as_str(), "inactive" | "failed")
    }
}

/// How long a started unit may take to show up in the cgroup tree.
const SETTLE: Duration = Duration::from_secs(15);

/// Makes `call` on the live system and waits until its effect is visible
/// in the cgroup tree (busctl returns when the job is queued, not done).
pub(super) fn call_live(sys: &Sys, call: &SystemdCall) -> super::Result<()> {
    let argv = call.command_line();
    let shown = argv.join(" ");
    run_client(&argv)?;
    if let SystemdCall::SetAllowedCpus {
        unit,
        cpus,
        cgroup_dir,
        ..
    } = call
    {
        if cpus.is_empty() {
            let reset = reset_cpuset(sys, cgroup_dir);
            forget_empty_allowed_cpus(sys, unit);
            return reset;
        }
    }
    let settled = |cond: &dyn Fn() -> bool| {
        let start = Instant::now();
        while start.elapsed() < SETTLE {
            if cond() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    };
    let ok = match call {
        SystemdCall::StartSlice {
            cpus, cgroup_dir, ..
        }
        | SystemdCall::SetAllowedCpus {
            cpus, cgroup_dir, ..
        } => settled(&|| {
            sys.read_cpulist(&format!("{cgroup_dir}/cpuset.cpus"))
                .is_ok_and(|c| &c == cpus)
        }),
        SystemdCall::StartScope {
            pids, cgroup_dir, ..
        } => settled(&|| {
            sys.read(&format!("{cgroup_dir}/cgroup.procs"))
                .is_ok_and(|text| {
                    let inside: Vec<&str> = text.split_whitespace().collect();
                    pids.iter()
                        .all(|p| inside.contains(&p.to_string().as_str()))
                })
        }),
        SystemdCall::Stop { unit } => return unload_stopped(unit),
        _ => true,
    };
    if ok {
        if let SystemdCall::StartScope {
            pids, cgroup_dir, ..
        } = call
        {
            attached(sys, cgroup_dir, pids);
        }
        return Ok(());
    }
    let seen = match call {
        SystemdCall::StartSlice {
            cpus, cgroup_dir, ..
        }
        | SystemdCall::SetAllowedCpus {
            cpus, cgroup_dir, ..
        } => cpuset_seen(sys, cgroup_dir, cpus),
        _ => String::new(),
    };
    Err(SysError::new(
        "run",
        shown,
        None,
        io::Error::other(format!(
            "systemd accepted the call but its effect did not show in the cgroup tree within {} s{seen}",
            SETTLE.as_secs()
        )),
    ))
}

/// Waits until the kernel has finished attaching `pids`, which systemd
/// moved into `cgroup_dir`. A task shows in `cgroup.procs` before the
/// cpuset controller's attach has run, and on kernels before 6.2 that
/// attach sets the task's affinity to the whole cpuset: an affinity set
/// in between (`run --cpu 3`) is lost (the Debian 12 guest saw CPUs 2-3).
/// Writing a pid into the cgroup it is already in moves nothing and
/// changes nothing, but takes the lock systemd's migration holds to its
/// end, so it returns only once that migration is done.
fn attached(sys: &Sys, cgroup_dir: &str, pids: &[i32]) {
    for pid in pids {
        // A task that exited meanwhile has nothing left to attach.
        let _ = sys.write(&format!("{cgroup_dir}/cgroup.procs"), &pid.to_string());
    }
}

/// What the kernel shows of the cpuset `cgroup_dir` that systemd was asked
/// to give `cpus`, and of its siblings that hold any of them (a partition
/// cannot take a CPU a sibling holds): for the error that says systemd's
/// change did not show.
fn cpuset_seen(sys: &Sys, cgroup_dir: &str, cpus: &CpuSet) -> String {
    let read = |dir: &str, file: &str| {
        sys.read_trimmed(&format!("{dir}/{file}"))
            .map(|v| {
                if v.is_empty() {
                    "(empty)".to_string()
                } else {
                    v
                }
            })
            .unwrap_or_else(|_| "(unreadable)".to_string())
    };
    let mut said = format!(
        "; /{cgroup_dir}: cpuset.cpus {}, effective {}, partition {}",
        read(cgroup_dir, "cpuset.cpus"),
        read(cgroup_dir, "cpuset.cpus.effective"),
        read(cgroup_dir, "cpuset.cpus.partition"),
    );
    let parent = cgroup_dir.rsplit_once('/').map_or("", |(p, _)| p);
    let holding: Vec<String> = (sys.subdirs(parent).unwrap_or_default().into_iter())
        .map(|name| format!("{parent}/{name}"))
        .filter(|dir| dir != cgroup_dir)
        .filter_map(|dir| {
            let theirs = sys.read_cpulist(&format!("{dir}/cpuset.cpus")).ok()?;
            (!theirs.intersection(cpus).is_empty()).then(|| format!("/{dir} {theirs}"))
        })
        .collect();
    if !holding.is_empty() {
        said.push_str(&format!(
            "; siblings holding some of {cpus}: {}",
            holding.join(", ")
        ));
    }
    said
}

/// What the shield asks of systemd, and reads of it.
impl Sys {
    /// Whether systemd is the init system (its own test, `sd_booted()`:
    /// `/run/systemd/system` is a directory).
    pub fn systemd_booted(&self) -> bool {
        self.path("run/systemd/system").is_dir()
    }

    /// The running systemd's version (that of the manager's own shared
    /// library, else `systemctl --version`); in a fixture its config's.
    pub fn systemd_version(&self) -> Option<u32> {
        emulated!(self, fx => fx.config().systemd_version);
        version_live(self)
    }

    /// Makes a request to systemd and waits for its effect (see
    /// [`SystemdCall`]). In a fixture the effect is emulated.
    pub fn systemd(&self, call: &SystemdCall) -> super::Result<()> {
        let started = std::time::Instant::now();
        let result = self.systemd_untimed(call);
        self.systemd_micros.fetch_add(
            started.elapsed().as_micros() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        result
    }

    fn systemd_untimed(&self, call: &SystemdCall) -> super::Result<()> {
        self.systemd_call(call)?;
        await_partition(self, call)
    }

    fn systemd_call(&self, call: &SystemdCall) -> super::Result<()> {
        emulated!(self, fx => fx.systemd(self, call));
        call_live(self, call)
    }

    /// Time spent in [`Sys::systemd`] calls so far (systemd's own work:
    /// reloads, unit starts and stops, restarts), for `took`.
    pub fn systemd_time(&self) -> std::time::Duration {
        std::time::Duration::from_micros(
            self.systemd_micros
                .load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    /// Whether systemd skipped `unit`'s last start because one of its
    /// conditions failed (`ConditionResult=no`) and it is not running:
    /// irqbalance's `ConditionCPUs=>1` while systemd itself may use one
    /// CPU, as when a restart came while a shield left it one.
    pub fn unit_skipped(&self, unit: &str) -> super::Result<bool> {
        emulated!(self, fx => Ok(fx.unit_skipped(self, unit)));
        unit_skipped_live(unit)
    }

    /// systemd's manager environment (`NAME=value` lines): what units
    /// started from now on get, besides their own settings.
    pub fn manager_environment(&self) -> super::Result<String> {
        emulated!(self, fx => Ok(fx.manager_environment(self)));
        manager_environment_live(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_cpus_bytes_put_cpu_n_in_bit_n_mod_8_of_byte_n_div_8() {
        assert_eq!(
            allowed_cpus_bytes(&CpuSet::parse_list("2-3").unwrap()),
            [12]
        );
        assert_eq!(
            allowed_cpus_bytes(&CpuSet::parse_list("0,9,17").unwrap()),
            [1, 2, 2]
        );
        assert!(allowed_cpus_bytes(&CpuSet::new()).is_empty());
    }

    #[test]
    fn start_slice_is_one_busctl_call_with_the_cpus_as_bytes() {
        let call = SystemdCall::StartSlice {
            unit: "cpushield.slice".into(),
            cpus: CpuSet::parse_list("2-3").unwrap(),
            cgroup_dir: "sys/fs/cgroup/cpushield.slice".into(),
            partition: None,
        };
        let argv = call.command_line();
        assert_eq!(argv[0], "busctl");
        assert!(argv.ends_with(&[
            "AllowedCPUs".to_string(),
            "ay".into(),
            "1".into(),
            "12".into(),
            "0".into()
        ]));
    }

    #[test]
    fn a_stopped_transient_unit_is_let_go_only_once_systemd_unloaded_it() {
        let failed = UnitState::parse("LoadState=loaded\nActiveState=failed\nTransient=yes\n");
        assert!(!failed.let_go());
        let inactive = UnitState::parse("LoadState=loaded\nActiveState=inactive\nTransient=yes\n");
        assert!(!inactive.let_go(), "a slice kept loaded by a failed scope");
        assert!(
            UnitState::parse("LoadState=not-found\nActiveState=inactive\nTransient=no\n").let_go()
        );
        let service = UnitState::parse("LoadState=loaded\nActiveState=inactive\nTransient=no\n");
        assert!(
            service.let_go(),
            "a unit file's service stays loaded, stopped"
        );
        assert!(
            !UnitState::parse("LoadState=loaded\nActiveState=deactivating\nTransient=no\n")
                .let_go()
        );
    }

    #[test]
    fn a_unit_is_skipped_only_when_its_condition_failed_and_it_is_not_running() {
        let skipped = UnitState::parse("ActiveState=inactive\nConditionResult=no\n");
        assert!(skipped.skipped());
        assert!(!UnitState::parse("ActiveState=inactive\nConditionResult=yes\n").skipped());
        assert!(
            !UnitState::parse("ActiveState=active\nConditionResult=no\n").skipped(),
            "started since the skipped start"
        );
        assert_eq!(
            SystemdCall::Start {
                unit: "irqbalance.service".into()
            }
            .command_line(),
            ["systemctl", "start", "irqbalance.service"]
        );
    }

    #[test]
    fn a_scope_is_collected_even_when_it_ended_failed() {
        let call = SystemdCall::StartScope {
            unit: "cpushield-run-42.scope".into(),
            slice: "cpushield.slice".into(),
            cgroup_dir: "sys/fs/cgroup/cpushield.slice/cpushield-run-42.scope".into(),
            pids: vec![42],
        };
        let argv = call.command_line();
        let at = argv.iter().position(|a| a == "fail").unwrap();
        assert_eq!(argv[at + 1], "3", "three properties: {argv:?}");
        let collect = argv.iter().position(|a| a == "CollectMode").unwrap();
        assert_eq!(argv[collect + 1..collect + 3], ["s", "inactive-or-failed"]);
        assert!(argv.ends_with(&["42".to_string(), "0".into()]), "{argv:?}");
    }

    #[test]
    fn from_systemd_261_the_slice_asks_for_its_partition() {
        let call = SystemdCall::StartSlice {
            unit: "cpushield.slice".into(),
            cpus: CpuSet::parse_list("2-3").unwrap(),
            cgroup_dir: "sys/fs/cgroup/cpushield.slice".into(),
            partition: Some("isolated".into()),
        };
        let argv = call.command_line();
        let at = argv.iter().position(|a| a == "fail").unwrap();
        assert_eq!(argv[at + 1], "3", "{argv:?}");
        assert!(argv.ends_with(&[
            "CPUSetPartition".to_string(),
            "s".into(),
            "isolated".into(),
            "0".into()
        ]));
        assert_eq!(
            parse_version("systemd 262 (262.1-1)\n+PAM +AUDIT"),
            Some(262)
        );
        assert_eq!(parse_version("systemd 252 (252.39-1~deb12u1)"), Some(252));
        assert_eq!(parse_version("nonsense"), None);
    }
}

#[cfg(test)]
mod seen_tests {
    use super::*;

    #[test]
    fn a_change_that_did_not_show_names_what_the_cgroup_reads_and_the_siblings_in_the_way() {
        let dir = tempfile::tempdir().unwrap();
        let sys = Sys::at(dir.path());
        for (cgroup, cpus, effective, partition) in [
            ("cpushield.slice", "2-3", "2-3", "isolated"),
            ("system.slice", "0-1", "0-1", "member"),
            ("user.slice", "0", "0", "member"),
        ] {
            let path = dir.path().join("sys/fs/cgroup").join(cgroup);
            std::fs::create_dir_all(&path).unwrap();
            std::fs::write(path.join("cpuset.cpus"), format!("{cpus}\n")).unwrap();
            std::fs::write(path.join("cpuset.cpus.effective"), format!("{effective}\n")).unwrap();
            std::fs::write(path.join("cpuset.cpus.partition"), format!("{partition}\n")).unwrap();
        }
        let said = cpuset_seen(
            &sys,
            "sys/fs/cgroup/cpushield.slice",
            &CpuSet::parse_list("1-3").unwrap(),
        );
        assert_eq!(
            said,
            "; /sys/fs/cgroup/cpushield.slice: cpuset.cpus 2-3, effective 2-3, partition isolated; siblings holding some of 1-3: /sys/fs/cgroup/system.slice 0-1"
        );
    }
}
