//! What the kernel threads' part of `run` tells the user, worded here.

use serde::{Deserialize, Serialize};

use super::OWNER;
use crate::cpulist::CpuSet;
use crate::shield::change::Owner;
use crate::shield::note::OwnNote;

/// The kernel threads' own notes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum KthreadsNote {
    /// On PREEMPT_RT: the CPUs' own timer, RCU and softirq threads run
    /// below a real-time task about to start there (`run --fifo`).
    KthreadsBelow {
        /// The task's real-time priority.
        priority: u32,
        /// The CPUs it runs on.
        cpus: CpuSet,
        /// Each thread below it, with its scheduling (`rcuc/3 SCHED_FIFO 1`).
        threads: Vec<String>,
        /// The highest priority the task may have for them to go above it
        /// with SCHED_FIFO.
        #[serde(default)]
        max_above: u32,
    },
    /// `run` raised the per-CPU softirq, timer and RCU threads of the
    /// task's CPUs above it (PREEMPT_RT), journaled; `off` puts them back.
    KthreadsRaisedForTask {
        /// The task's real-time priority.
        priority: u32,
        /// Each thread raised, with its scheduling as read back
        /// (`rcuc/3 SCHED_FIFO 83`).
        threads: Vec<String>,
        /// CPUs whose `rcuc/N` was left alone: the boot half offloads RCU
        /// there (`nohz_full=` and `rcu_nocbs=`).
        rcu_offloaded: CpuSet,
        /// With no SCHED_FIFO priority left above the task: the
        /// SCHED_DEADLINE reservation they got instead (runtime and period,
        /// ns).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reservation_ns: Option<(u64, u64)>,
    },
}

impl OwnNote for KthreadsNote {
    fn owner(&self) -> Owner {
        OWNER
    }

    fn text(&self) -> String {
        match self {
            KthreadsNote::KthreadsBelow {
                priority,
                cpus,
                threads,
                max_above,
            } => format!(
                "on this PREEMPT_RT kernel {} run below this task's priority {priority}: timers and RCU on CPUs {cpus} would wait behind it (RCU reports a stall after about 21 s); {}",
                threads.join(", "),
                if priority > max_above {
                    format!(
                        "no SCHED_FIFO priority is left above {priority}: run gives them a SCHED_DEADLINE reservation, which the kernel allows a thread bound to one CPU only with RT throttling off (cpushield on --tune=rt-throttling); with throttling on nothing runs them, so give the task a priority of {max_above} or less"
                    )
                } else {
                    format!("run raises them above it, journaled, and off puts them back ('cpushield on --kthreads-above {priority}' raises them for the whole shield)")
                }
            ),
            KthreadsNote::KthreadsRaisedForTask {
                priority,
                threads,
                reservation_ns: Some((runtime_ns, period_ns)),
                ..
            } => format!(
                "PREEMPT_RT: no SCHED_FIFO priority is left above this task's {priority}, so {} got a SCHED_DEADLINE reservation ({} µs every {} ms): they preempt it whenever they have work, for at most that, instead of starving behind it; off puts them back",
                (threads.iter())
                    .map(|t| t.split_whitespace().next().unwrap_or(t))
                    .collect::<Vec<_>>()
                    .join(", "),
                runtime_ns / 1000,
                period_ns / 1_000_000,
            ),
            KthreadsNote::KthreadsRaisedForTask {
                priority,
                threads,
                rcu_offloaded,
                reservation_ns: None,
            } => format!(
                "PREEMPT_RT: raised {} above this task's priority {priority}, so that the CPU's softirqs, timers and RCU preempt it for the few microseconds their work takes instead of starving behind it; off puts them back{}",
                threads.join(", "),
                if rcu_offloaded.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; rcuc left alone on CPUs {rcu_offloaded}, where the boot line offloads RCU (nohz_full= and rcu_nocbs=)"
                    )
                }
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_above_every_fifo_priority_left_is_told_of_the_deadline_reservation() {
        let cpus = CpuSet::parse_list("3").unwrap();
        let below = KthreadsNote::KthreadsBelow {
            priority: 97,
            cpus: cpus.clone(),
            threads: vec!["rcuc/3 SCHED_FIFO 1".into()],
            max_above: 95,
        };
        assert!(
            below
                .text()
                .contains("give the task a priority of 95 or less"),
            "{}",
            below.text()
        );
        let raised = KthreadsNote::KthreadsRaisedForTask {
            priority: 97,
            threads: vec!["rcuc/3 SCHED_DEADLINE".into()],
            rcu_offloaded: CpuSet::default(),
            reservation_ns: Some((200_000, 10_000_000)),
        };
        assert!(
            raised
                .text()
                .contains("rcuc/3 got a SCHED_DEADLINE reservation (200 µs every 10 ms)"),
            "{}",
            raised.text()
        );
        let json = serde_json::to_value(raised.note()).unwrap();
        assert_eq!(json["kind"], "kthreads_raised_for_task");
        assert_eq!(json["component"], "kthreads");
        assert_eq!(json["priority"], 97);
    }
}
