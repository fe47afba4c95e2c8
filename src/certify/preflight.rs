//! Before hours are spent measuring: the audit of the CPUs to be certified
//! (what it finds wrong or worth a look), and what makes the budget
//! unreachable whatever the run shows, each with its next step. Read-only.

use std::time::Duration;

use serde::Serialize;

use super::budget::Term;
use crate::audit::facts::{self, Facts};
use crate::audit::{rules, AuditError};
use crate::cpulist::CpuSet;
use crate::finding::{Finding, Severity};
use crate::sys::Sys;

/// What certify found before it measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Preflight {
    /// The audit's findings that are not ok, worst first.
    pub findings: Vec<Finding>,
    /// What alone makes a term unreachable.
    pub unreachable: Vec<Obstacle>,
}

/// Something that makes the budget unreachable, and what to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Obstacle {
    /// What, with the figures.
    pub what: String,
    /// What to do about it.
    pub next: String,
}

/// What the shield certify measures in puts right before it measures: the
/// tasks and the kernel's unbound threads that may run on the CPUs, the
/// IRQs on them and irqbalance's placing, the unbound workqueues, the
/// partition itself. The audit's findings of these describe the machine
/// before the shield, not the shield as it will stand, and are left out
/// of the preflight (an auditor reads each line as a finding).
pub const THE_SHIELD_FIXES: [&str; 9] = [
    "tasks",
    "threads",
    "irqs",
    "irq-affinity",
    "irq-default",
    "irq-effective",
    "irqbalance",
    "workqueue",
    "partition",
];

/// Audits `cpus` (without the interrupt window) against `budget`, as the
/// shield will stand: what the shield puts right is left out
/// ([`THE_SHIELD_FIXES`]); what it leaves (the boot half, preemption,
/// idle states, the governor, throttling and the other knobs, siblings,
/// NUMA, tuned, stalld) stays.
pub fn read(sys: &Sys, cpus: &CpuSet, budget: &[Term]) -> Result<Preflight, AuditError> {
    let facts = facts::read(sys, Some(cpus), Duration::ZERO)?;
    let mut findings: Vec<Finding> = rules::judge(&facts)
        .into_iter()
        .filter(|f| f.severity != Severity::Ok)
        .filter(|f| !THE_SHIELD_FIXES.contains(&f.id.as_str()))
        .collect();
    findings.sort_by_key(|f| (f.severity, std::cmp::Reverse(f.impact)));
    Ok(Preflight {
        findings,
        unreachable: obstacles(&facts, budget),
    })
}

/// What in `facts` alone exceeds a bound of `budget`: an enabled idle
/// state whose exit latency is longer than the smallest bound (the first
/// interrupt after an idle period waits that long before anything runs).
/// Pure.
pub fn obstacles(facts: &Facts, budget: &[Term]) -> Vec<Obstacle> {
    let Some(tightest) = budget.iter().min_by_key(|t| t.bound_ns) else {
        return Vec::new();
    };
    let bound_us = tightest.bound_ns as f64 / 1000.0;
    let mut slow: Vec<String> = Vec::new();
    let mut cpus = CpuSet::default();
    for p in &facts.cpu_power {
        for s in p.idle_states.iter().filter(|s| !s.disabled) {
            if s.latency_us as f64 > bound_us {
                slow.push(format!(
                    "cpu{}/{} {} ({} µs)",
                    p.cpu, s.state, s.name, s.latency_us
                ));
                cpus.insert(p.cpu);
            }
        }
    }
    if slow.is_empty() {
        return Vec::new();
    }
    let n = slow.len();
    slow.truncate(4);
    vec![Obstacle {
        what: format!(
            "{n} idle states exit slower than {}'s {bound_us} µs: {}{}",
            tightest.text,
            slow.join(", "),
            if n > 4 { ", ..." } else { "" }
        ),
        next: format!(
            "keep the shielded CPUs out of them: cpushield on {cpus} --max-idle-latency {}us (then certify that shield), or disable them in the firmware",
            (bound_us.floor() as u64).max(1)
        ),
    }]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::facts::CpuPower;
    use crate::audit::parse::IdleState;

    fn state(state: &str, name: &str, latency_us: u64, disabled: bool) -> IdleState {
        IdleState {
            state: state.into(),
            name: name.into(),
            latency_us,
            disabled,
        }
    }

    #[test]
    fn an_idle_state_slower_than_the_tightest_bound_is_named() {
        let facts = Facts {
            cpu_power: vec![
                CpuPower {
                    cpu: 2,
                    governor: None,
                    idle_states: vec![
                        state("state0", "POLL", 0, false),
                        state("state2", "C6", 133, false),
                        state("state3", "C10", 890, true),
                    ],
                },
                CpuPower {
                    cpu: 3,
                    governor: None,
                    idle_states: vec![state("state1", "C1E", 10, false)],
                },
            ],
            ..Facts::default()
        };
        let budget = super::super::budget::parse("max<=200us,p99<=100us").unwrap();
        let o = obstacles(&facts, &budget);
        assert_eq!(o.len(), 1, "{o:?}");
        assert!(
            o[0].what.starts_with(
                "1 idle states exit slower than p99<=100us's 100 µs: cpu2/state2 C6 (133 µs)"
            ),
            "{}",
            o[0].what
        );
        assert!(
            o[0].next
                .contains("cpushield on 2 --max-idle-latency 100us"),
            "{}",
            o[0].next
        );
        let loose = super::super::budget::parse("max<=1ms").unwrap();
        assert!(
            obstacles(&facts, &loose).is_empty(),
            "the disabled C10 does not count"
        );
    }
}
