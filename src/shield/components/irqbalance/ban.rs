//! irqbalance's ban of the shielded CPUs: the step planned, how it is
//! made (systemd's environment and the control socket, or a runtime drop-in
//! and a restart) and undone.

use super::*;
use crate::shield::note::OwnNote;

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
            let note = IrqbalanceNote::IrqbalanceWithoutUnit {
                pid,
                shield: shield.clone(),
                ban: shield.union(&irqb.own_ban),
            };
            notes.push(note.note());
        }
        return Vec::new();
    }
    if irqb.pid.is_some() && !irqb.under_systemd() {
        let cgroup = irqb.cgroup.clone();
        notes.push(IrqbalanceNote::IrqbalanceOutsideUnit { cgroup }.note());
    }
    let banned = shield.union(&irqb.own_ban);
    if let Some(user) = &irqb.user_ban {
        let note = IrqbalanceNote::IrqbalanceOwnBanKept {
            setting: user.clone(),
            banned: banned.clone(),
        };
        notes.push(note.note());
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
        super::OWNER,
        Action::own(super::OWNER, &ban),
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
    if refused.iter().any(|r| r.owner == super::OWNER) {
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

/// Whether a journaled ban writes back, on undo, only what a drop-in and
/// an environment file of cpushield's hold: its files are cpushield's
/// own, at fixed paths; what they held before (a drop-in left by an
/// earlier shield) is written back, and systemd runs irqbalance with it.
/// Only comments, `[Service]`, cpushield's `EnvironmentFile=` and the ban's
/// variables pass: nothing another line could make systemd run or set.
pub fn ban_within(own: &Own) -> Result<(), String> {
    let Own::IrqbalanceBan {
        previous_dropin,
        previous_env,
        ..
    } = own;
    let environment_file = format!("EnvironmentFile=/{IRQBALANCE_ENV}");
    let dropin_line = |l: &str| l == "[Service]" || l == environment_file;
    let env_line = |l: &str| {
        l.split_once('=')
            .is_some_and(|(name, _)| ["IRQBALANCE_BANNED_CPUS", BANNED_CPULIST].contains(&name))
    };
    let check = |text: &Option<String>, path: &str, ours: &dyn Fn(&str) -> bool| {
        let other = text.as_deref().and_then(|t| {
            t.lines()
                .map(str::trim)
                .find(|l| !l.is_empty() && !l.starts_with('#') && !ours(l))
        });
        match other {
            None => Ok(()),
            Some(line) => Err(format!(
                "/{path} would be written back with {}, which no file of cpushield's holds",
                crate::input::quote_to(line, 80)
            )),
        }
    };
    check(previous_dropin, IRQBALANCE_DROPIN, &dropin_line)?;
    check(previous_env, IRQBALANCE_ENV, &env_line)
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

/// What a ban replaced, read just before it was made and kept as its
/// record's `prior` in the journal. Undoing the record gives exactly that
/// back: for a change in place rolled back, the old shield's ban, not the
/// machine's from before any shield (which the record's own fields hold,
/// and which undoing the first shield's record gives back). Records of
/// journals written before it was kept have none and are undone to their
/// own fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prior {
    /// For a ban in systemd's environment: `IRQBALANCE_BANNED_CPULIST`'s
    /// value there, `None` where it was not set.
    #[serde(default)]
    pub manager: Option<String>,
    /// For a ban in files: the drop-in's text, `None` where there was none.
    #[serde(default)]
    pub dropin: Option<String>,
    /// For a ban in files: the environment file's text, as the drop-in.
    #[serde(default)]
    pub env: Option<String>,
}

/// What the ban `manager_env` says where it is made reads now, as a
/// record's `prior` (see [`Prior`]).
pub fn prior(sys: &Sys, manager_env: bool) -> Option<String> {
    let prior = if manager_env {
        let env = sys.manager_environment().ok()?;
        let set = format!("{BANNED_CPULIST}=");
        Prior {
            manager: env.lines().find_map(|l| l.strip_prefix(&set)).map(str::to_string),
            ..Prior::default()
        }
    } else {
        Prior {
            dropin: sys.read(IRQBALANCE_DROPIN).ok(),
            env: sys.read(IRQBALANCE_ENV).ok(),
            ..Prior::default()
        }
    };
    serde_json::to_string(&prior).ok()
}

/// Undoes a journaled ban (`action`, read before it as `prior`):
/// irqbalance gets its environment and the CPUs it used before. Returns
/// whether irqbalance was told or restarted, and what could not be put
/// back.
pub fn unban(sys: &Sys, action: &Action, prior: Option<&str>) -> (bool, Vec<Refusal>) {
    let Some(mut own) = ban_of(action) else {
        return (false, Vec::new());
    };
    let prior: Option<Prior> = prior.and_then(|text| serde_json::from_str(text).ok());
    if let Some(done) = prior.and_then(|prior| back_to_prior(sys, &mut own, prior)) {
        return done;
    }
    let Own::IrqbalanceBan {
        make_dir,
        previous_dropin,
        previous_env,
        manager_env,
        ..
    } = &own;
    if *manager_env {
        let unset = SystemdCall::UnsetEnvironment {
            names: vec![BANNED_CPULIST.to_string()],
        };
        return match sys.systemd(&unset).and_then(|()| unban_running(sys)) {
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

/// Puts back the ban `list` that systemd's environment held (an old
/// shield's, under a change in place rolled back), irqbalance told.
fn reban(sys: &Sys, list: &str) -> (bool, Vec<Refusal>) {
    let refusal = |reason: String| Refusal {
        target: "irqbalance".into(),
        reason,
    };
    let Ok(banned) = CpuSet::parse_list(list) else {
        let why = format!("its ban's record holds {}, not a CPU list", crate::input::quote_to(list, 40));
        return (false, vec![refusal(why)]);
    };
    match ban(sys, &banned, false, true) {
        Ok(()) => (true, Vec::new()),
        Err(err) => (false, vec![refusal(format!("could not give it back its ban of CPUs {banned} in systemd's environment: {err}"))]),
    }
}

/// Starts irqbalance again when systemd skipped its last start: its unit's
/// `ConditionCPUs=>1` fails while PID 1 may use one CPU, so a restart made
/// while a shield left the machine one housekeeping CPU (by `on`, a
/// repair, or `off`'s unban, which comes before the shield's cgroups are
/// undone) stopped it for good, and `off`'s `try-restart` does not start
/// a stopped unit. Called once everything is undone; true when it was
/// started, read back. Started and skipped again, PID 1 still has one CPU
/// (as booted with `systemd.cpu_affinity=` of one): irqbalance is left as
/// systemd had it before the shield.
pub fn start_if_skipped(sys: &Sys) -> Result<bool, Refusal> {
    let refusal = |reason: String| Refusal {
        target: IRQBALANCE_UNIT.into(),
        reason,
    };
    match sys.unit_skipped(IRQBALANCE_UNIT) {
        Ok(true) => {}
        Ok(false) => return Ok(false),
        Err(err) => return Err(refusal(format!("could not ask systemd whether it skipped irqbalance: {err}"))),
    }
    let start = SystemdCall::Start {
        unit: IRQBALANCE_UNIT.into(),
    };
    sys.systemd(&start)
        .map_err(|err| refusal(format!("could not start irqbalance, which systemd skipped while the shield held: {err}")))?;
    Ok(!sys.unit_skipped(IRQBALANCE_UNIT).unwrap_or(true))
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

/// Undoing a ban made over an older shield's: in systemd's environment,
/// the old shield's list is banned again (done); in the drop-in, `own`
/// is made to write back the old shield's drop-in and environment file
/// (`None`: the caller restores them), refused when they name a file
/// other than irqbalance's own.
fn back_to_prior(sys: &Sys, own: &mut Own, prior: Prior) -> Option<(bool, Vec<Refusal>)> {
    let Own::IrqbalanceBan {
        previous_dropin,
        previous_env,
        manager_env,
        ..
    } = own;
    if *manager_env {
        return prior.manager.map(|list| reban(sys, &list));
    }
    (*previous_dropin, *previous_env) = (prior.dropin, prior.env);
    let why = ban_within(own).err()?;
    let refusal = Refusal {
        target: "irqbalance".into(),
        reason: format!("its ban's record was not undone: {why}"),
    };
    Some((false, vec![refusal]))
}

/// Takes the ban out of the running irqbalance, whichever way `on` (or a
/// restart since) gave it: an irqbalance started with a ban in its
/// environment is restarted (systemd's environment no longer has it);
/// one told through its socket goes back to its environment's ban
/// (`settings cpus NULL`); without an answering socket, a restart. Any
/// ban in its environment is the shield's: the manager environment
/// carries the ban only where nothing else sets one, and it may be the
/// ban of CPUs the shield had before a change in place (the journal
/// keeps one ban record for both).
fn unban_running(sys: &Sys) -> Result<(), SysError> {
    let pids = with_socket(sys);
    let started_with_ban = |pid: i32| {
        procfs::environ_var(sys, pid, BANNED_CPULIST).is_some_and(|v| !v.trim().is_empty())
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
