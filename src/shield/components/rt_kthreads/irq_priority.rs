//! `--irq-priority IRQ:PRIO`: the thread of any IRQ at the priority the
//! user chooses, as tuna's `-q IRQ -p fifo:PRIO` sets it by hand. With
//! threaded IRQs (PREEMPT_RT, or `threadirqs`) every handler runs in its
//! own `irq/N-name` thread at SCHED_FIFO 50: below a real-time task at 80
//! that waits for its NIC's IRQ, or above one that must never wait for a
//! disk's.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::{irq_of_thread, raise, HIGHEST};
use crate::shield::change::{Action, Step};
use crate::shield::plan_error::PlanError;
use crate::sys::irq::Irq;
use crate::sys::procfs::Thread;

/// One `IRQ:PRIO`: the IRQs it names (a number, or a name as in
/// `/proc/interrupts` where `*` matches any characters) and the
/// SCHED_FIFO priority their threads get.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct IrqPriority {
    /// The IRQs: a number or a name pattern.
    pub irqs: String,
    /// Their threads' SCHED_FIFO priority, 1 to [`HIGHEST`].
    pub priority: u32,
}

impl FromStr for IrqPriority {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let valid = || {
            format!(
                "{}: IRQ:PRIO, an IRQ number or name (as in /proc/interrupts, * for any \
                 characters) and a real-time priority from 1 to {HIGHEST}, as eth0*:85 or 45:90",
                crate::input::quote(text)
            )
        };
        let (irqs, priority) = text.rsplit_once(':').ok_or_else(valid)?;
        let priority: u32 = priority.trim().parse().map_err(|_| valid())?;
        let irqs = irqs.trim();
        if irqs.is_empty() || !(1..=HIGHEST).contains(&priority) {
            return Err(valid());
        }
        Ok(IrqPriority {
            irqs: irqs.to_string(),
            priority,
        })
    }
}

impl TryFrom<String> for IrqPriority {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        text.parse()
    }
}

impl From<IrqPriority> for String {
    fn from(p: IrqPriority) -> String {
        p.to_string()
    }
}

impl fmt::Display for IrqPriority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.irqs, self.priority)
    }
}

impl IrqPriority {
    /// Whether it names IRQ `irq`, whose device name is `name`.
    fn names(&self, irq: u32, name: &str) -> bool {
        match self.irqs.parse::<u32>() {
            Ok(n) => n == irq,
            Err(_) => glob(&self.irqs, name),
        }
    }
}

/// Whether `text` is `pattern`, where each `*` stands for any characters.
fn glob(pattern: &str, text: &str) -> bool {
    let Some((first, rest)) = pattern.split_once('*') else {
        return pattern == text;
    };
    let Some(mut left) = text.strip_prefix(first) else {
        return false;
    };
    let mut parts: Vec<&str> = rest.split('*').collect();
    let last = parts.pop().unwrap_or("");
    for part in parts {
        match left.find(part) {
            Some(at) => left = &left[at + part.len()..],
            None => return false,
        }
    }
    left.len() >= last.len() && left.ends_with(last)
}

/// The steps that give the threads of the IRQs each of `specs` names its
/// priority (the last spec that names an IRQ wins), over `planned` (the
/// steps `--kthreads-above` planned, whose step for the same thread
/// goes). A spec that names no IRQ, or only IRQs without a thread, is
/// refused, naming it and what would do.
pub(super) fn plan(
    specs: &[IrqPriority],
    irqs: &[Irq],
    threads: &[Thread],
    planned: &mut Vec<Step>,
) -> Result<(), PlanError> {
    let refuse = |spec: &IrqPriority, why: String| PlanError::Part {
        option: "--irq-priority",
        message: format!("--irq-priority {}: {why}", crate::input::quote(&spec.to_string())),
    };
    for spec in specs {
        let named: Vec<u32> = (irqs.iter())
            .filter(|i| spec.names(i.irq, &i.name))
            .map(|i| i.irq)
            .collect();
        if named.is_empty() {
            return Err(refuse(spec, "matches no IRQ number or name in /proc/interrupts".into()));
        }
        let served: Vec<&Thread> = (threads.iter())
            .filter(|t| t.is_kthread() && t.pid == t.tid)
            .filter(|t| irq_of_thread(&t.name).is_some_and(|irq| named.contains(&irq)))
            .collect();
        if served.is_empty() {
            let list: Vec<String> = named.iter().map(u32::to_string).collect();
            let threaded = (threads.iter()).any(|t| t.is_kthread() && irq_of_thread(&t.name).is_some());
            let why = match threaded {
                true => "the kernel runs its handler in interrupt context even with threaded IRQs \
                         (as it does the timer's), at no priority",
                false => "its handler runs in interrupt context, at no priority; boot with \
                          threadirqs (or run a PREEMPT_RT kernel) to give each IRQ a thread",
            };
            return Err(refuse(spec, format!("IRQ {} has no thread: {why}", list.join(", "))));
        }
        for t in served {
            planned.retain(|s| !matches!(&s.action, Action::SetScheduler { tid, .. } if *tid == t.tid));
            planned.push(raise(t, spec.priority));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn irq_prio_is_read_and_anything_else_refused_with_what_would_do() {
        let p: IrqPriority = "eth0*:85".parse().unwrap();
        assert_eq!((p.irqs.as_str(), p.priority), ("eth0*", 85));
        assert_eq!(p.to_string(), "eth0*:85");
        // a name with a colon keeps it: the priority is after the last
        let p: IrqPriority = "0000:00:1f.2:60".parse().unwrap();
        assert_eq!(p.irqs, "0000:00:1f.2");
        for bad in ["eth0", ":80", "eth0:", "eth0:0", "eth0:99", "eth0:high", ""] {
            let e = bad.parse::<IrqPriority>().unwrap_err();
            assert!(e.contains("IRQ:PRIO") && e.contains("1 to 98"), "{bad}: {e}");
        }
        let json = serde_json::to_string(&"45:90".parse::<IrqPriority>().unwrap()).unwrap();
        assert_eq!(json, r#""45:90""#);
        assert!(serde_json::from_str::<IrqPriority>(r#""45:100""#).is_err());
    }

    #[test]
    fn a_pattern_matches_names_with_stars_anywhere() {
        assert!(glob("eth0*", "eth0-TxRx-3"));
        assert!(glob("*TxRx*", "eth0-TxRx-3"));
        assert!(glob("nvme0q*", "nvme0q12"));
        assert!(glob("a*b*c", "aXbYc"));
        assert!(!glob("a*b*c", "aXbY"));
        assert!(!glob("eth0*", "eth1-TxRx-0"));
        assert!(glob("i8042", "i8042"));
        assert!(!glob("i8042", "i8042x"));
    }
}
