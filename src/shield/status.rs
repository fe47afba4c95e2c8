//! `status`: whether the active shield still holds, judged by what the kernel refuses and what drifted.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::error::ShieldError;
use super::journal::{self, State};
use super::note::Note;
use super::plan;
use super::request::Request;
use super::snapshot::{in_shield_cgroup, CgroupSetup, Snapshot};
use super::tasks::{self, TaskRef};
use super::{irqbalance, mechanism};
use crate::cpulist::CpuSet;
use crate::finding::{Finding, Severity};
use crate::sys::procfs;
use crate::sys::Sys;

/// An IRQ and where it may run, for `status`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IrqPlacement {
    /// IRQ number.
    pub irq: u32,
    /// Device name.
    pub name: String,
    /// `smp_affinity_list`.
    pub affinity: CpuSet,
    /// `effective_affinity_list`.
    pub effective: Option<CpuSet>,
}

/// The result of `status`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StatusReport {
    /// Online CPUs.
    pub online: CpuSet,
    /// The mechanism in use, or the one `on` would use.
    pub mechanism: String,
    /// Where `on` would mount cgroup2 first (nothing with cpuset is
    /// mounted; `off` unmounts it again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_first: Option<String>,
    /// Why no mechanism is available.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unsupported: Option<String>,
    /// Shielded CPUs, when a shield is up.
    pub shield: Option<CpuSet>,
    /// Housekeeping CPUs, when a shield is up.
    pub housekeeping: Option<CpuSet>,
    /// False when `on` was interrupted: run `cpushield off`.
    pub complete: bool,
    /// The shield cgroup's partition as it reads back (v2).
    pub partition: Option<String>,
    /// CPUs isolated at boot (isolcpus=).
    pub boot_isolated: CpuSet,
    /// Tasks placed inside the shield.
    pub tasks_inside: Vec<TaskRef>,
    /// Per-CPU kernel threads on the shielded CPUs, by kind.
    pub per_cpu_kthreads: BTreeMap<String, usize>,
    /// Other tasks allowed on a shielded CPU: should not be there.
    pub intruders: Vec<TaskRef>,
    /// IRQs allowed on, or effective on, a shielded CPU.
    pub irqs_on_shield: Vec<IrqPlacement>,
    /// Number of IRQs in all.
    pub irqs_total: usize,
    /// `/proc/irq/default_smp_affinity`.
    pub default_irq_affinity: Option<CpuSet>,
    /// Unbound workqueue cpumask.
    pub workqueue_mask: Option<CpuSet>,
    /// Whether the shield still holds (true when there is none): nothing
    /// in `broken`.
    #[serde(default)]
    pub holds: bool,
    /// What no longer holds, each with its repair: `bad` findings.
    #[serde(default)]
    pub broken: Vec<Finding>,
    /// Other owners of the machine that may fight the shield (tuned).
    #[serde(default)]
    pub notes: Vec<Note>,
}

/// What `status` reads, once, to judge whether an active shield holds.
struct HoldFacts<'a> {
    /// The journal's state of the shield.
    state: &'a State,
    /// The cgroup mechanism, read back.
    mechanism: mechanism::Hold,
    /// cpushield's ban in irqbalance, read back (`None`: there is none, or
    /// the shield is incomplete).
    ban: Option<irqbalance::BanHold>,
    /// Tasks outside the shield allowed on a shielded CPU.
    intruders: &'a [TaskRef],
    /// IRQs allowed on, or effective on, a shielded CPU.
    irqs_on_shield: &'a [IrqPlacement],
}

impl<'a> HoldFacts<'a> {
    fn read(
        sys: &Sys,
        state: &'a State,
        snap: &Snapshot,
        intruders: &'a [TaskRef],
        irqs_on_shield: &'a [IrqPlacement],
    ) -> Self {
        let ban = state.irqbalance_ban.as_ref().filter(|_| state.complete);
        HoldFacts {
            mechanism: mechanism::read_hold(sys, state, snap),
            ban: ban.map(|b| {
                irqbalance::read_ban(sys, b, snap.owners.irqbalance.as_ref(), &state.shield)
            }),
            state,
            intruders,
            irqs_on_shield,
        }
    }
}

/// Whether an active shield still holds, judged first by what the kernel
/// would refuse (the cpuset controller, the partition, the CPUs left to
/// everything outside), then by what drifted (irqbalance's ban, threads and
/// IRQs outside the shield allowed on it). Pure: one finding, `bad`, per
/// check that fails, each with its repair.
fn holds(f: &HoldFacts) -> Vec<Finding> {
    let state = f.state;
    let shield = &state.shield;
    let again = state
        .request
        .as_ref()
        .map_or_else(|| format!("cpushield on {shield}"), Request::command_line);
    let rebuild = format!(
        "run 'cpushield apply' (a shield from the config file) or '{again}' again: it repairs the shield in place"
    );
    if !state.complete {
        return vec![Finding::new(
            "incomplete",
            Severity::Bad,
            100,
            "the last 'cpushield on' did not finish",
            "run 'cpushield off', then 'cpushield on' again",
        )];
    }
    let mut out = Vec::new();
    let mut broken = |id: &str, impact: u8, reason: String, next: &str| {
        out.push(Finding::new(id, Severity::Bad, impact, reason, next))
    };
    for (check, what) in mechanism::lost(&f.mechanism, shield) {
        broken(check, 100, what, &rebuild);
    }
    if let (Some(hold), Some(ban)) = (&f.ban, &state.irqbalance_ban) {
        if let Some(lost) = irqbalance::ban_lost(hold, ban) {
            broken("irqbalance", 60, lost.what, lost.repair.unwrap_or(&rebuild));
        }
    }
    let leaked = tasks::leaked(f.intruders, shield);
    if leaked > 0 {
        broken(
            "threads",
            80,
            format!("{leaked} thread(s) outside the shield may run on CPUs {shield}"),
            &rebuild,
        );
    }
    let drifted: Vec<String> = f
        .irqs_on_shield
        .iter()
        .filter(|i| i.affinity.intersects(shield) && !state.irqs_kept.contains(&i.irq))
        .map(|i| i.irq.to_string())
        .collect();
    if !drifted.is_empty() {
        broken(
            "irqs",
            70,
            format!("IRQs {} are allowed on the shield again", drifted.join(" ")),
            &rebuild,
        );
    }
    out
}

/// Reports the shield (or its absence). Read-only.
pub fn status(sys: &Sys) -> Result<StatusReport, ShieldError> {
    let mut snap = Snapshot::read(sys)?;
    let state = journal::read_state(sys)?;
    let unsupported = match &snap.cgroup {
        CgroupSetup::Unsupported { reason } => Some(reason.clone()),
        _ => None,
    };
    let shield = state.as_ref().map(|s| s.shield.clone());
    if let Some(shield) = &shield {
        procfs::read_stats(sys, &mut snap.threads, |t| {
            in_shield_cgroup(&t.cgroup) || t.cpus_allowed.intersects(shield)
        });
    }
    let mut irqs_on_shield = Vec::new();
    let mut threads = tasks::OnShield::default();
    if let Some(shield) = &shield {
        threads = tasks::on_shield(&snap, shield);
        for i in &snap.irqs {
            let eff_on = i.effective.as_ref().is_some_and(|e| e.intersects(shield));
            if i.affinity.intersects(shield) || eff_on {
                irqs_on_shield.push(IrqPlacement {
                    irq: i.irq,
                    name: i.name.clone(),
                    affinity: i.affinity.clone(),
                    effective: i.effective.clone(),
                });
            }
        }
    }
    let facts = state
        .as_ref()
        .map(|s| HoldFacts::read(sys, s, &snap, &threads.intruders, &irqs_on_shield));
    let broken = facts.as_ref().map(holds).unwrap_or_default();
    let partition = facts
        .as_ref()
        .and_then(|f| f.mechanism.partition().map(str::to_string));
    Ok(StatusReport {
        online: snap.online.clone(),
        mechanism: mechanism::name(&snap),
        mount_first: match &snap.cgroup {
            CgroupSetup::V2Unmounted { mount, .. } => Some(format!("/{mount}")),
            _ => None,
        },
        unsupported,
        housekeeping: state.as_ref().map(|s| s.housekeeping.clone()),
        complete: state.as_ref().is_none_or(|s| s.complete),
        shield,
        partition,
        boot_isolated: snap.boot_isolated.clone(),
        tasks_inside: threads.inside,
        per_cpu_kthreads: threads.per_cpu_kthreads,
        intruders: threads.intruders,
        irqs_total: snap.irqs.len(),
        irqs_on_shield,
        default_irq_affinity: snap.default_irq_affinity.clone(),
        workqueue_mask: snap.workqueue_mask.clone(),
        holds: broken.is_empty(),
        broken,
        notes: plan::tuned_notes(&snap.owners),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpus(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    fn state() -> State {
        State {
            version: 1,
            shield: cpus("2-3"),
            housekeeping: cpus("0-1"),
            mechanism: "cgroup v2 partition".into(),
            shield_dir: "sys/fs/cgroup/cpushield".into(),
            outside_procs: "sys/fs/cgroup/cgroup.procs".into(),
            complete: true,
            partition: Some("isolated".into()),
            irqs_kept: vec![30],
            irqbalance_ban: Some(cpus("2-3")),
            request: None,
        }
    }

    fn v2(partition: &str, outside: &str) -> mechanism::Hold {
        mechanism::Hold::V2 {
            mount: "sys/fs/cgroup".into(),
            cpuset_enabled: true,
            dir: "sys/fs/cgroup/cpushield".into(),
            partition: Some(partition.into()),
            wanted: Some("isolated".into()),
            outside: Some(cpus(outside)),
        }
    }

    fn irq(n: u32, affinity: &str) -> IrqPlacement {
        IrqPlacement {
            irq: n,
            name: format!("dev{n}"),
            affinity: cpus(affinity),
            effective: None,
        }
    }

    fn ids(f: &[Finding]) -> Vec<&str> {
        f.iter().map(|f| f.id.as_str()).collect()
    }

    #[test]
    fn a_shield_that_holds_has_no_finding() {
        let s = state();
        let rt = TaskRef {
            pid: 7,
            tid: 7,
            name: "rt".into(),
            cpus: cpus("3"),
        };
        let f = HoldFacts {
            state: &s,
            mechanism: v2("isolated", "0-1"),
            ban: Some(irqbalance::BanHold::NotRunning),
            intruders: &[rt],
            irqs_on_shield: &[irq(30, "2")],
        };
        assert_eq!(holds(&f), vec![]);
    }

    #[test]
    fn each_failed_check_is_one_bad_finding_with_the_repair() {
        let s = state();
        let leak = TaskRef {
            pid: 9,
            tid: 9,
            name: "cron".into(),
            cpus: cpus("0-3"),
        };
        let f = HoldFacts {
            state: &s,
            mechanism: v2(
                "isolated invalid (Cpu list in cpuset.cpus not exclusive)",
                "0-3",
            ),
            ban: Some(irqbalance::BanHold::Unset),
            intruders: &[leak],
            irqs_on_shield: &[irq(30, "2"), irq(31, "0-3")],
        };
        let found = holds(&f);
        assert_eq!(
            ids(&found),
            ["partition", "enforcement", "irqbalance", "threads", "irqs"]
        );
        assert!(found.iter().all(|b| b.severity == Severity::Bad));
        assert!(found[1].reason.contains("CPUs 2-3"), "{found:?}");
        assert!(found[4].reason.contains("IRQs 31 "), "{found:?}");
        assert!(found[0].next.contains("'cpushield on 2-3'"), "{found:?}");
    }

    #[test]
    fn an_interrupted_on_is_the_only_finding() {
        let mut s = state();
        s.complete = false;
        let f = HoldFacts {
            state: &s,
            mechanism: mechanism::Hold::Unmounted,
            ban: None,
            intruders: &[],
            irqs_on_shield: &[],
        };
        let found = holds(&f);
        assert_eq!(ids(&found), ["incomplete"]);
        assert!(found[0].next.contains("cpushield off"));
    }

    #[test]
    fn irqbalance_without_the_ban_in_environment_or_socket_is_named_by_pid() {
        let s = state();
        let running = |told| irqbalance::BanHold::Running {
            pid: 242,
            list: CpuSet::default(),
            hex: None,
            told,
        };
        let facts = |ban| HoldFacts {
            state: &s,
            mechanism: v2("isolated", "0-1"),
            ban: Some(ban),
            intruders: &[],
            irqs_on_shield: &[],
        };
        assert_eq!(holds(&facts(running(Some(true)))), vec![]);
        let found = holds(&facts(running(Some(false))));
        assert_eq!(ids(&found), ["irqbalance"]);
        assert!(found[0].reason.contains("pid 242"), "{found:?}");
        assert!(found[0].next.starts_with("systemctl restart irqbalance"));
    }
}
