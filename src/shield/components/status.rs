//! `status`: whether the active shield still holds, judged by what the kernel
//! refuses and what drifted: each component's hold read back and judged
//! (see [`crate::shield::holds`]), composed here.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;
use crate::finding::{Finding, Severity};
use crate::shield::change::TaskRef;
use crate::shield::component::Looking;
use crate::shield::error::ShieldError;
use crate::shield::holds::Holds;
use crate::shield::irqs::{self, IrqPlacement};
use crate::shield::journal::{self, State};
use crate::shield::note::Note;
use crate::shield::parts::PartReport;
use crate::shield::plan;
use crate::shield::request::Request;
use crate::shield::snapshot::{in_shield_cgroup, CgroupSetup, Snapshot};
use crate::shield::tasks;
use crate::shield::{irqbalance, knobs, mechanism};
use crate::sys::procfs;
use crate::sys::Sys;

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
    /// What the components that report for themselves read back of the
    /// shield (the idle states, ...), with what no longer holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<PartReport>,
}

/// What `status` reads back, once, of each component of an active shield.
struct HoldFacts {
    /// The cgroup mechanism.
    mechanism: mechanism::Hold,
    /// cpushield's ban in irqbalance.
    ban: Option<irqbalance::BanHold>,
    /// The threads inside the shield or allowed on it.
    tasks: tasks::OnShield,
    /// IRQs allowed on, or effective on, a shielded CPU.
    irqs: Vec<IrqPlacement>,
    /// The files of the knobs the shield set.
    knobs: knobs::Hold,
}

impl HoldFacts {
    fn read(sys: &Sys, state: &State, snap: &Snapshot) -> Result<Self, ShieldError> {
        Ok(HoldFacts {
            mechanism: mechanism::read_hold(sys, state, &snap.cgroup),
            ban: irqbalance::read_hold(sys, state, snap.owners.irqbalance.as_ref()),
            tasks: tasks::on_shield(snap, &state.shield),
            irqs: irqs::on_shield(&snap.irqs, &state.shield, &irqs::kept(state)),
            knobs: knobs::read_hold(sys, state)?,
        })
    }
}

/// Whether an active shield still holds, judged first by what the kernel
/// would refuse (the cpuset controller, the partition, the CPUs left to
/// everything outside), then by what drifted (irqbalance's ban, threads and
/// IRQs outside the shield allowed on it). Pure: one finding, `bad`, per
/// check that fails, each with its repair.
fn holds(state: &State, f: &HoldFacts) -> Vec<Finding> {
    if !state.complete {
        return vec![Finding::new(
            "incomplete",
            Severity::Bad,
            100,
            "the last 'cpushield on' did not finish",
            "run 'cpushield off', then 'cpushield on' again",
        )];
    }
    let rebuild = repair(state);
    let components: [&dyn Holds; 5] = [&f.mechanism, &f.ban, &f.tasks, &f.irqs, &f.knobs];
    components
        .iter()
        .flat_map(|c| c.lost(state, &rebuild))
        .collect()
}

/// The next step that repairs the shield of `state` in place.
fn repair(state: &State) -> String {
    let again = state.request.as_ref().map_or_else(
        || format!("cpushield on {}", state.shield),
        Request::command_line,
    );
    format!(
        "run 'cpushield apply' (a shield from the config file) or '{again}' again: it repairs the shield in place"
    )
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
    let facts = match &state {
        Some(s) => Some(HoldFacts::read(sys, s, &snap)?),
        None => None,
    };
    let parts: Vec<PartReport> = match &state {
        Some(s) => {
            let repair = repair(s);
            let cx = Looking {
                sys,
                state: s,
                snap: &snap,
                repair: &repair,
            };
            (super::ORDER.iter())
                .filter_map(|part| part.status(&cx))
                .collect()
        }
        None => Vec::new(),
    };
    let mut broken = match (&state, &facts) {
        (Some(s), Some(f)) => holds(s, f),
        _ => Vec::new(),
    };
    if state.as_ref().is_some_and(|s| s.complete) {
        broken.extend(parts.iter().flat_map(|p| p.findings.iter().cloned()));
    }
    let (threads, irqs_on_shield, partition) = match facts {
        Some(f) => (f.tasks, f.irqs, f.mechanism.partition().map(str::to_string)),
        None => (tasks::OnShield::default(), Vec::new(), None),
    };
    Ok(StatusReport {
        online: snap.online.clone(),
        mechanism: mechanism::name(snap.mechanism()),
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
        parts,
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
            writes_refused: vec![],
            request: None,
            parts: Default::default(),
            // As journal version 2 kept them: read through `older`.
            older: [
                ("irqs_kept".into(), serde_json::json!([30])),
                ("irqbalance_ban".into(), serde_json::json!(cpus("2-3"))),
            ]
            .into(),
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
            kept: irqs::kept(&state()).contains(&n),
        }
    }

    fn task(pid: i32, name: &str, cpus_allowed: &str) -> TaskRef {
        TaskRef {
            pid,
            tid: pid,
            name: name.into(),
            cpus: cpus(cpus_allowed),
        }
    }

    fn on_shield(intruders: Vec<TaskRef>) -> tasks::OnShield {
        tasks::OnShield {
            intruders,
            ..Default::default()
        }
    }

    fn ids(f: &[Finding]) -> Vec<&str> {
        f.iter().map(|f| f.id.as_str()).collect()
    }

    #[test]
    fn a_shield_that_holds_has_no_finding() {
        let s = state();
        let rt = task(7, "rt", "3");
        let f = HoldFacts {
            mechanism: v2("isolated", "0-1"),
            ban: Some(irqbalance::BanHold::NotRunning),
            tasks: on_shield(vec![rt]),
            irqs: vec![irq(30, "2")],
            knobs: knobs::Hold::default(),
        };
        assert_eq!(holds(&s, &f), vec![]);
    }

    #[test]
    fn each_failed_check_is_one_bad_finding_with_the_repair() {
        let s = state();
        let leak = task(9, "cron", "0-3");
        let f = HoldFacts {
            mechanism: v2(
                "isolated invalid (Cpu list in cpuset.cpus not exclusive)",
                "0-3",
            ),
            ban: Some(irqbalance::BanHold::Unset),
            tasks: on_shield(vec![leak]),
            irqs: vec![irq(30, "2"), irq(31, "0-3")],
            knobs: knobs::Hold::default(),
        };
        let found = holds(&s, &f);
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
            mechanism: mechanism::Hold::Unmounted,
            ban: None,
            tasks: on_shield(vec![]),
            irqs: vec![],
            knobs: knobs::Hold::default(),
        };
        let found = holds(&s, &f);
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
            mechanism: v2("isolated", "0-1"),
            ban: Some(ban),
            tasks: on_shield(vec![]),
            irqs: vec![],
            knobs: knobs::Hold::default(),
        };
        assert_eq!(holds(&s, &facts(running(Some(true)))), vec![]);
        let found = holds(&s, &facts(running(Some(false))));
        assert_eq!(ids(&found), ["irqbalance"]);
        assert!(found[0].reason.contains("pid 242"), "{found:?}");
        assert!(found[0].next.starts_with("systemctl restart irqbalance"));
    }
}
