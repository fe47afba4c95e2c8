//! `status`: whether the active shield still holds, judged by what the kernel
//! refuses and what drifted: each component reads back its part and judges
//! it ([`crate::shield::component::Looks::status`]), composed here.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;
use crate::finding::{Finding, Severity};
use crate::shield::component::Looking;
use crate::shield::error::ShieldError;
use crate::shield::journal::{self, State};
use crate::shield::note::Note;
use crate::shield::parts::PartReport;
use crate::shield::plan;
use crate::shield::snapshot::{in_shield_cgroup, CgroupSetup};
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
    #[serde(default)]
    pub mount_first: Option<String>,
    /// Why no mechanism is available.
    #[serde(default)]
    pub unsupported: Option<String>,
    /// Shielded CPUs, when a shield is up.
    pub shield: Option<CpuSet>,
    /// Housekeeping CPUs, when a shield is up.
    pub housekeeping: Option<CpuSet>,
    /// False when `on` was interrupted: run `cpushield off`.
    pub complete: bool,
    /// CPUs isolated at boot (isolcpus=).
    #[serde(with = "crate::json_null::cpus")]
    pub boot_isolated: CpuSet,
    /// Number of IRQs in all.
    pub irqs_total: usize,
    /// Whether the shield still holds (true when there is none): nothing
    /// in `broken`.
    #[serde(default)]
    pub holds: bool,
    /// What no longer holds, each with its repair: `bad` findings.
    #[serde(default)]
    pub broken: Vec<Finding>,
    /// What holds but costs the shield, from other programs' settings
    /// (kubelet's), each with what to change: `warn` findings. No
    /// breakage: `holds` does not look at them.
    #[serde(default)]
    pub advice: Vec<Finding>,
    /// Other owners of the machine that may fight the shield (tuned).
    #[serde(default)]
    pub notes: Vec<Note>,
    /// What each component read back of the shield (the cgroups' partition,
    /// the threads and IRQs on it, the idle states, ...), in the order they
    /// plan, with what no longer holds.
    #[serde(default)]
    pub parts: Vec<PartReport>,
    /// How large the shield's journal is (`None` without one).
    #[serde(default)]
    pub journal: Option<journal::Size>,
}

impl StatusReport {
    /// What `component` read back of the shield, when it said anything.
    pub fn part(&self, component: &str) -> Option<&PartReport> {
        self.parts.iter().find(|p| p.component == component)
    }
}

/// What no longer holds of the shield `state`, worst first: an
/// interrupted `on` alone, else what each component of `parts` found.
fn broken(state: &State, parts: &[PartReport]) -> Vec<Finding> {
    if !state.complete {
        return vec![Finding::new(
            "incomplete",
            Severity::Bad,
            100,
            "the last 'cpushield on' did not finish",
            "run 'cpushield off', then 'cpushield on' again",
        )];
    }
    of_severity(parts, Severity::Bad)
}

/// The findings of `parts` of `severity`, worst first.
fn of_severity(parts: &[PartReport], severity: Severity) -> Vec<Finding> {
    let mut found: Vec<Finding> = (parts.iter())
        .flat_map(|p| {
            p.findings
                .iter()
                .filter(|f| f.severity == severity)
                .cloned()
        })
        .collect();
    found.sort_by_key(|f| std::cmp::Reverse(f.impact));
    found
}

/// The next step that repairs the shield of `state` in place.
fn repair(state: &State) -> String {
    let again = state.request.as_ref().map_or_else(
        || format!("cpushield on {}", state.shield),
        super::command_line,
    );
    format!(
        "run 'cpushield apply' (a shield from the config file) or '{again}' again: it repairs the shield in place"
    )
}

/// How long `status` waits for a change that is being made (`on` in
/// place, the healer's repair) to end: its journal reads as unfinished
/// until then, which is no broken shield. `on` over 10,000 threads took up
/// to 40 s in the emulated test guests.
const CHANGE_WAIT: Duration = Duration::from_secs(60);

/// Waits while a live cpushield holds the journal's lock, at most
/// [`CHANGE_WAIT`]. Read-only: the holder is the one the lock file names
/// while it has the file open ([`journal::holder`]; never `/proc/locks`,
/// which waits for an RCU grace period that a real-time loop may hold up),
/// and the lock is never taken (an `on` starting meanwhile must not find
/// it taken).
fn wait_for_change(sys: &Sys) {
    let me = std::process::id() as i32;
    let t = Instant::now();
    while journal::holder(sys).is_some_and(|pid| pid != me) && t.elapsed() < CHANGE_WAIT {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Each component's report of its part of the shield, in the registry's
/// order. They read at once, each in a thread of its own: some sample for
/// a while (the idle-balance kicks for 250 ms, the guard's watch where it
/// does not run), and one after the other their windows added up to a
/// third of `status` under emulation.
fn each_looking(cx: &Looking) -> Vec<PartReport> {
    std::thread::scope(|scope| {
        let looking: Vec<_> = (super::ORDER.iter())
            .filter_map(|part| part.looks())
            .map(|looks| scope.spawn(move || looks.status(cx)))
            .collect();
        (looking.into_iter())
            .filter_map(|thread| {
                thread
                    .join()
                    .unwrap_or_else(|e| std::panic::resume_unwind(e))
            })
            .collect()
    })
}

/// Reports the shield (or its absence). Read-only. A change being made
/// (`on`, the healer's repair, `run`) is waited for (up to
/// [`CHANGE_WAIT`]), so that the report is of what it left, not of a
/// repair half made.
pub fn status(sys: &Sys) -> Result<StatusReport, ShieldError> {
    wait_for_change(sys);
    let counters = crate::sys::kicks::Reading::now(sys);
    let state = journal::read_state(sys)?;
    let mut snap = super::read::observed(sys)?;
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
    let parts: Vec<PartReport> = match &state {
        Some(s) => {
            let repair = repair(s);
            let cx = Looking {
                sys,
                state: s,
                snap: &snap,
                repair: &repair,
                counters: counters.as_ref(),
            };
            each_looking(&cx)
        }
        None => Vec::new(),
    };
    let broken = state.as_ref().map_or_else(Vec::new, |s| broken(s, &parts));
    let advice = of_severity(&parts, Severity::Warn);
    Ok(StatusReport {
        online: snap.online.clone(),
        mechanism: snap.mechanism_name(),
        mount_first: match &snap.cgroup {
            CgroupSetup::V2Unmounted { mount, .. } => Some(format!("/{mount}")),
            _ => None,
        },
        unsupported,
        housekeeping: state.as_ref().map(|s| s.housekeeping.clone()),
        complete: state.as_ref().is_none_or(|s| s.complete),
        shield,
        boot_isolated: snap.boot_isolated.clone(),
        irqs_total: snap.irqs.len(),
        holds: broken.is_empty(),
        broken,
        advice,
        notes: plan::tuned_notes(&snap.owners),
        parts,
        journal: journal::size(sys),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part_finding(component: &str, id: &str, impact: u8) -> PartReport {
        let mut part = PartReport::new(component, &serde_json::Value::Null);
        part.findings = vec![Finding::new(id, Severity::Bad, impact, id, "repair")];
        part
    }

    #[test]
    fn what_broke_is_listed_worst_first_whatever_the_order_of_the_components() {
        let parts = [
            part_finding("irqbalance", "irqbalance", 60),
            part_finding("cgroups", "partition", 100),
            part_finding("tasks", "threads", 80),
        ];
        let ids: Vec<String> = (broken(&State::example(), &parts).into_iter())
            .map(|f| f.id)
            .collect();
        assert_eq!(ids, ["partition", "threads", "irqbalance"]);
    }

    #[test]
    fn an_interrupted_on_is_the_only_finding() {
        let state = State {
            complete: false,
            ..State::example()
        };
        let found = broken(&state, &[part_finding("cgroups", "partition", 100)]);
        let ids: Vec<&str> = found.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["incomplete"]);
        assert!(found[0].next.contains("cpushield off"));
    }

    #[test]
    fn the_repair_names_the_request_that_made_the_shield() {
        assert!(repair(&State::example()).contains("'cpushield on 2-3'"));
    }
}
