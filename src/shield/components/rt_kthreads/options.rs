//! The kernel threads' options: `--kthreads-above PRIO` and
//! `--irq-priority IRQ:PRIO` (config keys `kthreads_above`, `irq_priority`).

use super::check_above;
use super::irq_priority::IrqPriority;

/// Its options, as `on` and the config file take them.
#[derive(
    clap::Args, Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize,
)]
#[group(skip)]
pub struct Options {
    /// Raise the shielded CPUs' own softirq, timer and RCU threads
    /// (`ksoftirqd/N`, and on PREEMPT_RT `ktimers/N` and `rcuc/N`) to
    /// SCHED_FIFO PRIO+1, +2 and +3, and the threads of the IRQs bound by
    /// --irq (`irq/N-name`) to PRIO+1: set PRIO to your real-time task's
    /// priority so that they preempt it for their few microseconds of work
    /// (1 to 95; undone by `off`).
    #[arg(long, value_name = "PRIO")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kthreads_above: Option<u32>,
    /// Give the thread of an IRQ (`irq/N-name`) SCHED_FIFO PRIO (1 to 98),
    /// whichever CPUs it serves, as tuna's `-q IRQ -p fifo:PRIO` does: IRQ
    /// a number, or a name from /proc/interrupts where `*` matches any
    /// characters (`eth0*`: every queue of eth0); repeat or separate with
    /// commas; over --kthreads-above for the IRQs it names. Needs threaded
    /// IRQs (PREEMPT_RT, or the boot option threadirqs); undone by `off`.
    #[arg(long, value_name = "IRQ:PRIO", value_delimiter = ',')]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub irq_priority: Vec<IrqPriority>,
}

impl crate::shield::options::Declared for Options {
    const EXAMPLES: &'static [(&'static str, &'static str)] = &[
        ("kthreads_above", "80"),
        ("irq_priority", r#"["eth0*:85", "45:90"]"#),
    ];

    fn check(&self) -> Result<(), String> {
        match self.kthreads_above {
            Some(prio) => check_above(prio)
                .map(|_| ())
                .map_err(|e| format!("--kthreads-above {e}")),
            None => Ok(()),
        }
    }
}
