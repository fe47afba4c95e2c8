//! Whether irqbalance's ban still holds (`status`), and what became of the
//! process, read back for `on`'s report.

use serde::{Deserialize, Serialize};

use super::*;
use crate::finding::Findings;

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

/// The CPUs the shield `state` banned for irqbalance, when it set the ban
/// (journal version 2 and older kept it as `irqbalance_ban` at the top
/// level of the state).
pub(in crate::shield) fn ban_of(state: &State) -> Option<CpuSet> {
    state.record(OWNER.name(), "irqbalance_ban")
}

/// Reads what [`ban_lost`] judges of the shield `state`'s ban, on the
/// machine whose irqbalance is `irqb` (`None`: the shield set no ban, or
/// `on` did not finish).
pub(in crate::shield) fn read_hold(
    sys: &Sys,
    state: &State,
    irqb: Option<&Irqbalance>,
) -> Option<BanHold> {
    let ban = ban_of(state).filter(|_| state.complete)?;
    Some(read_ban(sys, &ban, irqb, &state.shield))
}

impl Holds for Option<BanHold> {
    /// `irqbalance`: the ban is gone, or the running irqbalance lacks it
    /// (its repair is a restart of irqbalance).
    fn lost(&self, state: &State, repair: &str) -> Vec<Finding> {
        let (Some(hold), Some(ban)) = (self, ban_of(state)) else {
            return Vec::new();
        };
        ban_lost(hold, &ban)
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
    let after =
        super::facts::process(sys, threads_after).map(|t| (t.pid, procfs::start_ticks(sys, t.pid)));
    compare(
        before.and_then(|i| i.pid.map(|pid| (pid, i.started))),
        after,
    )
}

/// `on`'s line of the ban of `banned`, and of what became of irqbalance's
/// `process` (`None`: not read, nothing was changed).
pub(super) fn outcome_line(banned: &CpuSet, process: Option<&Process>, dry_run: bool) -> String {
    if dry_run {
        return format!("CPUs {banned} to be banned (runtime only)");
    }
    let what = match process {
        Some(Process::Kept { pid }) => format!("irqbalance kept running as pid {pid}"),
        Some(Process::Restarted { before, after }) => {
            format!("irqbalance restarted: pid {before} -> {after}")
        }
        Some(Process::Started { pid }) => format!("irqbalance started meanwhile as pid {pid}"),
        Some(Process::Gone { before }) => format!("irqbalance (pid {before}) stopped meanwhile"),
        Some(Process::NotRunning) => {
            "irqbalance not running: it reads the ban when it starts".into()
        }
        None => "already in place".into(),
    };
    format!("CPUs {banned} banned (runtime only, {what}; off removes it)")
}

/// [`Process`] from the (process id, start time) before and after.
pub(super) fn compare(
    before: Option<(i32, Option<u64>)>,
    after: Option<(i32, Option<u64>)>,
) -> Process {
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

/// The audit's rule of irqbalance against `targets`: whether the running
/// irqbalance (if any) bans them, as its environment, command line and
/// files say. Pure.
pub(super) fn judge(running: Option<&Running>, targets: &CpuSet) -> Vec<Finding> {
    let mut out = Findings::default();

    let list = targets;
    let Some(Running {
        pid,
        environ,
        cmdline,
        config,
    }) = running
    else {
        out.add(
            "irqbalance",
            Severity::Ok,
            70,
            "irqbalance is not running".into(),
            String::new(),
        );
        return out.0;
    };
    let next = format!("set IRQBALANCE_BANNED_CPULIST={list} in /etc/default/irqbalance and restart it, or: systemctl stop irqbalance");
    let banned = banned(environ.as_deref().unwrap_or(""), cmdline, config);
    match banned {
        Some(b) if targets.is_subset(&b) => out.add("irqbalance", Severity::Ok, 70, format!("irqbalance (pid {pid}) runs with {b} banned"), String::new()),
        _ if environ.is_none() && banned.is_none() => out.add("irqbalance", Severity::Warn, 70, format!("irqbalance runs (pid {pid}); its environment is unreadable (not root), bans unknown"), next),
        b => out.add("irqbalance", Severity::Bad, 70, format!("irqbalance runs (pid {pid}) without {list} banned{}: it will move IRQs back", b.map(|b| format!(" (banned: {b})")).unwrap_or_default()), next),
    }
    out.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn banned() -> State {
        let mut state = State::example();
        state.parts.put(OWNER.name(), &state.shield.clone());
        state
    }

    #[test]
    fn the_ban_of_a_version_2_shield_is_read_from_its_top_level_key_until_parts_holds_one() {
        let v2 = r#"{"version":2,"shield":"2-3","housekeeping":"0-1","mechanism":"m",
            "shield_dir":"d","outside_procs":"p","complete":true,"irqbalance_ban":"2-3"}"#;
        let mut state: State = serde_json::from_str(v2).unwrap();
        assert_eq!(ban_of(&state), Some(CpuSet::parse_list("2-3").unwrap()));
        state
            .parts
            .put(OWNER.name(), &CpuSet::parse_list("3").unwrap());
        assert_eq!(ban_of(&state), Some(CpuSet::parse_list("3").unwrap()));
        assert_eq!(ban_of(&State::example()), None);
    }

    fn running(told: Option<bool>) -> Option<BanHold> {
        Some(BanHold::Running {
            pid: 242,
            list: CpuSet::default(),
            hex: None,
            told,
        })
    }

    #[test]
    fn irqbalance_is_said_restarted_only_when_another_process_runs() {
        let cpus = CpuSet::parse_list("2-3").unwrap();
        let kept = outcome_line(&cpus, Some(&Process::Kept { pid: 412 }), false);
        assert!(
            kept.contains("kept running as pid 412") && !kept.contains("restarted"),
            "{kept}"
        );
        let restarted = Process::Restarted {
            before: 412,
            after: 530,
        };
        let line = outcome_line(&cpus, Some(&restarted), false);
        assert!(line.contains("restarted: pid 412 -> 530"), "{line}");
        let planned = outcome_line(&cpus, None, true);
        assert!(
            !planned.contains("restarted") && planned.contains("to be banned"),
            "{planned}"
        );
    }

    #[test]
    fn irqbalance_without_the_ban_in_environment_or_socket_is_named_by_pid() {
        let state = banned();
        assert_eq!(running(Some(true)).lost(&state, "again"), vec![]);
        let found = running(Some(false)).lost(&state, "again");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].id, "irqbalance");
        assert!(found[0].reason.contains("pid 242"), "{found:?}");
        assert!(found[0].next.starts_with("systemctl restart irqbalance"));
    }

    #[test]
    fn a_ban_gone_is_lost_and_a_shield_that_set_none_has_nothing_to_hold() {
        let found = Some(BanHold::Unset).lost(&banned(), "again");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].next, "again");
        assert_eq!(
            Some(BanHold::Unset).lost(&State::example(), "again"),
            vec![]
        );
    }
}
