//! The irqbalance component of the shield. irqbalance spreads IRQs over
//! the CPUs every 10 s and knows nothing of cpusets: unless it bans the
//! shielded CPUs it moves IRQs back onto them. Everything the shield does
//! with it lives here: what is read (its process, unit and files, cpushield's
//! drop-in, systemd's environment), the one step planned (a ban), how that
//! step is made and undone (its control socket, or systemd's environment or
//! a runtime drop-in and a restart), whether the ban still holds, and what
//! became of the process, read back for the report.

mod ban;
mod facts;
mod hold;
mod notes;

pub use ban::*;
pub use facts::*;
pub use hold::*;
pub use notes::IrqbalanceNote;

use crate::shield::apply::ApplyError;
use crate::shield::component::AuditReading;
use crate::shield::component::{
    Changing, Component, Draft, InPlace, Looking, Phase, Planning, Reporting,
};
use crate::shield::component::{Looks, Reports, Undoes};
use crate::shield::parts::{Line, MachineWide, OwnFacts, PartReport};
use crate::shield::plan::Plan;
use crate::shield::plan_error::PlanError;
use crate::shield::reshape::Originals;
use crate::shield::snapshot::Snapshot;
use crate::shield::undo::Undone;
use crate::shield::OnReport;
use serde::{Deserialize, Serialize};

use crate::shield::change::{Action, Owner, Refusal, Refused, Step};
use crate::shield::holds::Holds;
use crate::shield::journal::{self, Entry, State};
use crate::shield::note::Note;

use crate::cpulist::CpuSet;
use crate::finding::{Finding, Severity};
use crate::sys::irqbalance as socket;
use crate::sys::procfs::{self, Thread};
use crate::sys::systemd::SystemdCall;
use crate::sys::{Sys, SysError};

/// This component, as it names itself in the journal and in reports.
pub const OWNER: Owner = Owner("irqbalance");

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

/// What `on` says of the ban (`--json`).
#[derive(Debug, Serialize)]
struct BanOutcome {
    /// The CPUs banned (with `--dry-run`: to be banned).
    ban: CpuSet,
    /// What became of irqbalance's process while the ban was set, read
    /// back from `/proc` (not with `--dry-run`, nor when nothing changed).
    #[serde(skip_serializing_if = "Option::is_none")]
    process: Option<Process>,
}

/// What `status` says of the ban (`--json`).
#[derive(Debug, Serialize)]
struct BanStatus {
    /// The CPUs the shield banned.
    ban: CpuSet,
    /// The running irqbalance, if any.
    pid: Option<i32>,
    /// Whether the ban holds: set, and the running irqbalance has it.
    holds: bool,
}

/// irqbalance's ban of the shielded CPUs, as a component of the shield.
pub(in crate::shield) struct Part;

/// irqbalance as the snapshot observed it (none: neither a unit nor running).
fn observed(snap: &Snapshot) -> Option<Irqbalance> {
    snap.parts.get(OWNER.name())
}

impl Component for Part {
    fn owner(&self) -> Owner {
        OWNER
    }

    /// CRI-O's `irq-load-balancing.crio.io` hook runs irqbalance once, or restarts it, with its own ban.
    fn crio_hooks_change(&self) -> bool {
        true
    }

    fn observe(&self, sys: &Sys, snap: &Snapshot, facts: &mut OwnFacts) {
        let systemd = snap.owners.systemd;
        if let Some(irqb) = read(sys, &snap.threads, &snap.boot_isolated, systemd) {
            facts.put(OWNER.name(), &irqb);
        }
    }

    /// The ban set, as read back.
    fn record(&self, _: &Plan, out: &OnReport) -> Option<serde_json::Value> {
        out.part(OWNER.name())?.data.get("ban").cloned()
    }

    fn check(&self, _: &Planning, _: &mut Draft) -> Result<(), PlanError> {
        Ok(())
    }

    fn plan(&self, cx: &Planning, d: &mut Draft) -> Result<(), PlanError> {
        let irqb = observed(cx.snap);
        let ban = plan(
            cx.snap.owners.systemd,
            irqb.as_ref(),
            cx.shield,
            &mut d.plan.notes,
        );
        d.add(Phase::Prepare, ban);
        Ok(())
    }

    fn before(&self, _: &Originals, entries: &[Entry], snap: &mut Snapshot) {
        if let Some(mut irqb) = observed(snap) {
            before_shield(&mut irqb, entries);
            snap.parts.put(OWNER.name(), &irqb);
        }
    }

    fn change(&self, cx: &InPlace, mine: Vec<(Phase, Step)>, out: &mut Changing) {
        let live = observed(cx.live);
        let live = live.as_ref();
        let steps: Vec<Step> = mine.iter().map(|(_, s)| s.clone()).collect();
        if let Some(ban) = planned_ban(&steps) {
            out.change.records.put(OWNER.name(), &ban);
        }
        for (slot, step) in mine {
            if !ban_in_place(live, &step.action) {
                out.add(slot, [step]);
            }
        }
    }

    fn machine_wide(&self, steps: &[Step]) -> Vec<MachineWide> {
        (steps.iter())
            .filter_map(|s| ban_of(&s.action))
            .map(|Own::IrqbalanceBan { banned, manager_env, .. }| MachineWide {
                component: OWNER.name().into(),
                what: format!(
                    "irqbalance: CPUs {banned} banned ({})",
                    match manager_env {
                        true => "systemd's environment",
                        false => "a runtime drop-in",
                    }
                ),
                without: "none that keeps the shield (irqbalance would move IRQs back onto it): stop irqbalance instead".into(),
            })
            .collect()
    }

    fn undoes(&self) -> Option<&dyn Undoes> {
        Some(self)
    }

    fn looks(&self) -> Option<&dyn Looks> {
        Some(self)
    }

    fn reports(&self) -> Option<&dyn Reports> {
        Some(self)
    }
}

impl Undoes for Part {
    fn make(&self, sys: &Sys, action: &Action) -> Option<Result<(), ApplyError>> {
        let Own::IrqbalanceBan {
            banned,
            make_dir,
            manager_env,
            ..
        } = ban_of(action)?;
        Some(ban(sys, &banned, make_dir, manager_env).map_err(ApplyError::from))
    }

    fn within(
        &self,
        action: &Action,
        _: &crate::shield::reach::Bounds,
    ) -> Option<Result<(), String>> {
        ban_of(action).map(|own| ban_within(&own))
    }

    /// What the ban replaces, so that its undo gives exactly that back
    /// (see [`ban::Prior`]).
    fn previous(&self, sys: &Sys, action: &Action) -> Option<String> {
        let Own::IrqbalanceBan { manager_env, .. } = ban_of(action)?;
        ban::prior(sys, manager_env)
    }

    fn undo(&self, sys: &Sys, entry: &Entry, out: &mut Undone) -> bool {
        if ban_of(&entry.action).is_none() {
            return false;
        }
        let (restored, failed) = unban(sys, &entry.action, entry.previous.as_deref());
        out.restored += usize::from(restored);
        out.failed.extend(failed);
        true
    }

    /// irqbalance started again where a restart of the shield's left it
    /// skipped (see [`ban::start_if_skipped`]).
    fn after_undo(&self, sys: &Sys, entries: &[Entry], out: &mut Undone) {
        if !entries.iter().any(|e| ban_of(&e.action).is_some()) {
            return;
        }
        match start_if_skipped(sys) {
            Ok(true) => out.restored += 1,
            Ok(false) => {}
            Err(refusal) => out.failed.push(refusal),
        }
    }

    /// irqbalance gets its environment back before anything else: a banned
    /// irqbalance still running while undo puts IRQs back moves them again
    /// within its 10 s cycle (SYSTEMD-NOTES 10). Its ban is the first change
    /// `on` makes, for the same reason the other way round.
    fn undone_first(&self, action: &Action) -> bool {
        ban_of(action).is_some()
    }

    /// A ban made again (a change in place) the same way as the first:
    /// undoing the first alone gives irqbalance back what it had before
    /// the shield, so the record keeps the first's previous files and
    /// takes the CPUs banned now (what `status` checks).
    fn fold(&self, first: &Action, later: &Action) -> Option<Action> {
        let Own::IrqbalanceBan {
            make_dir,
            previous_dropin,
            previous_env,
            manager_env,
            ..
        } = ban_of(first)?;
        let Own::IrqbalanceBan {
            banned,
            manager_env: later_manager_env,
            ..
        } = ban_of(later)?;
        (manager_env == later_manager_env).then(|| {
            let both = Own::IrqbalanceBan {
                banned,
                make_dir,
                previous_dropin,
                previous_env,
                manager_env,
            };
            Action::own(OWNER, &both)
        })
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

impl Looks for Part {
    fn audit_read(&self, cx: &AuditReading, facts: &mut OwnFacts) {
        if let Some(running) = running(cx.sys) {
            facts.put(OWNER.name(), &running);
        }
    }

    fn audit(&self, f: &crate::shield::Audited) -> Vec<Finding> {
        judge(f.own.get::<Running>(OWNER.name()).as_ref(), f.targets)
    }

    /// Whether the ban still holds, read back from irqbalance's process.
    fn status(&self, cx: &Looking) -> Option<PartReport> {
        let ban = hold::ban_of(cx.state)?;
        let hold = read_hold(cx.sys, cx.state, observed(cx.snap).as_ref());
        let findings = hold.lost(cx.state, cx.repair);
        // No hold read: `on` did not finish, and `status` says only that.
        let (text, pid) = match hold? {
            BanHold::Unset => (format!("the ban of CPUs {ban} is gone"), None),
            BanHold::NotRunning => (format!("CPUs {ban} banned (not running)"), None),
            BanHold::Running { pid, .. } if !findings.is_empty() => (
                format!("pid {pid} runs without the ban of CPUs {ban}"),
                Some(pid),
            ),
            BanHold::Running { pid, .. } => (format!("CPUs {ban} banned (pid {pid})"), Some(pid)),
        };
        let holds = findings.is_empty();
        let mut part = PartReport::new(OWNER.name(), &BanStatus { ban, pid, holds });
        part.lines = vec![Line::new(OWNER.name(), text)];
        part.findings = findings;
        Some(part)
    }
}

impl Reports for Part {
    /// The ban set (or planned, or kept by a change in place), and what
    /// became of irqbalance's process meanwhile.
    fn outcome(&self, cx: &Reporting) -> Option<PartReport> {
        let kept = || cx.change?.records.get(OWNER.name());
        let ban = ban_made(&cx.plan.steps, cx.refused()).or_else(kept)?;
        let before = observed(cx.before);
        let before = before.as_ref();
        let process = (cx.applied.is_some() && !cx.dry_run)
            .then(|| process_after(cx.sys, before, &cx.after.threads));
        let text = hold::outcome_line(&ban, process.as_ref(), cx.dry_run);
        let mut part = PartReport::new(OWNER.name(), &BanOutcome { ban, process });
        part.lines = vec![Line::new(OWNER.name(), text)];
        Some(part)
    }
}

#[cfg(test)]
mod tests {
    use super::facts::{env_assignments, env_files, unit_env_files, IRQBALANCE_ENV_FILES};
    use super::hold::compare;
    use super::*;
    use crate::shield::components::plan as shield_plan;
    use crate::shield::components::test_machine::{req, snap, v2};

    #[test]
    fn a_ban_writes_back_only_what_a_file_of_cpushields_holds() {
        let cpus = CpuSet::parse_list("2-3").unwrap();
        let ban = |dropin: Option<String>, env: Option<String>| Own::IrqbalanceBan {
            banned: cpus.clone(),
            make_dir: false,
            previous_dropin: dropin,
            previous_env: env,
            manager_env: false,
        };
        assert_eq!(ban_within(&ban(None, None)), Ok(()));
        let ours = ban(Some(dropin(&cpus)), Some(env_file(&cpus)));
        assert_eq!(ban_within(&ours), Ok(()), "an earlier shield's files");
        let forged = ban(
            Some(format!("{}ExecStartPre=/bin/sh -c id\n", dropin(&cpus))),
            None,
        );
        let err = ban_within(&forged).unwrap_err();
        assert!(
            err.contains("50-cpushield.conf") && err.contains("ExecStartPre"),
            "{err}"
        );
        let forged = ban(None, Some("LD_PRELOAD=/tmp/x.so\n".into()));
        assert!(ban_within(&forged).unwrap_err().contains("LD_PRELOAD"));
    }

    /// A systemd host with irqbalance running as its unit.
    fn systemd_host(own_ban: &str) -> Snapshot {
        let mut s = snap(v2());
        s.owners.systemd = true;
        let irqb = Irqbalance {
            pid: Some(400),
            cgroup: Some("/system.slice/irqbalance.service".into()),
            unit: true,
            own_ban: cpus(own_ban),
            ..Default::default()
        };
        s.parts.put(OWNER.name(), &irqb);
        s
    }

    #[test]
    fn irqbalance_under_systemd_is_banned_from_the_shield_and_its_own_ban() {
        let s = systemd_host("5");
        let plan = shield_plan(&s, &req("2-3")).unwrap();
        let bans: Vec<&Step> = plan
            .steps
            .iter()
            .filter(|s| s.action.own_as::<Own>().is_some())
            .collect();
        assert_eq!(bans.len(), 1);
        let Some(Own::IrqbalanceBan {
            banned, make_dir, ..
        }) = bans[0].action.own_as()
        else {
            unreachable!()
        };
        assert_eq!(banned, cpus("2-3,5"));
        assert!(make_dir);
        assert!(!bans[0].fatal);
        // before any IRQ is moved, so that irqbalance does not move them back
        let ban_at = plan
            .steps
            .iter()
            .position(|s| s.action.own_as::<Own>().is_some());
        let first_irq = plan.steps.iter().position(
            |s| matches!(&s.action, Action::Write { path, .. } if path.starts_with("proc/irq/")),
        );
        assert!(ban_at < first_irq, "{ban_at:?} {first_irq:?}");
    }

    #[test]
    fn irqbalance_without_systemd_is_reported_not_banned() {
        let mut s = systemd_host("");
        s.owners.systemd = false;
        let plan = shield_plan(&s, &req("2-3")).unwrap();
        assert!(!plan
            .steps
            .iter()
            .any(|s| s.action.own_as::<Own>().is_some()));
        assert!(plan
            .notes
            .iter()
            .any(|n| matches!(n, Note::Part(p) if p.is("irqbalance", "irqbalance_without_unit") && p.data["pid"] == 400)));
        assert_eq!(plan.shield_dir, "sys/fs/cgroup/cpushield");
    }

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
