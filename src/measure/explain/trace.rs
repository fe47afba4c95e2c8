//! The kernel's trace lines, as `trace_pipe` prints them, parsed into the
//! few events the explanation needs.
//!
//! A line is `COMM-PID [CPU] FLAGS SECS.USECS: EVENT: FIELDS`; with the
//! `mono` trace clock its time is CLOCK_MONOTONIC, the measuring loops'
//! clock, at the text output's resolution of 1 µs. Lines of other events
//! and lines that do not parse are not events; `CPU:N [LOST M EVENTS]`
//! lines are counted apart. Idle is the switch to pid 0 (`power:cpu_idle`
//! would add two events to every wake-up and nothing to the chain).

/// The events enabled in the trace instance, as `system:event`. Those the
/// running kernel lacks (the x86 vectors elsewhere) are skipped.
pub const EVENTS: &[&str] = &[
    "sched:sched_switch",
    "sched:sched_wakeup",
    "irq:irq_handler_entry",
    "irq:irq_handler_exit",
    "irq:softirq_entry",
    "irq:softirq_exit",
    "timer:hrtimer_expire_entry",
    "timer:hrtimer_expire_exit",
    "irq_vectors:local_timer_entry",
    "irq_vectors:local_timer_exit",
    "irq_vectors:reschedule_entry",
    "irq_vectors:reschedule_exit",
    "irq_vectors:call_function_entry",
    "irq_vectors:call_function_exit",
    "irq_vectors:call_function_single_entry",
    "irq_vectors:call_function_single_exit",
    "irq_vectors:irq_work_entry",
    "irq_vectors:irq_work_exit",
    "irq_vectors:x86_platform_ipi_entry",
    "irq_vectors:x86_platform_ipi_exit",
];

/// x86 interrupt vectors traced, by their event name's stem.
const VECTORS: &[&str] = &[
    "local_timer",
    "reschedule",
    "call_function_single",
    "call_function",
    "irq_work",
    "x86_platform_ipi",
];

/// One parsed trace event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The CPU it happened on.
    pub cpu: u32,
    /// CLOCK_MONOTONIC, ns (µs resolution).
    pub ts_ns: u64,
    /// What happened.
    pub kind: Kind,
}

/// The events the explanation reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// The CPU switched from one task to another (pid 0: idle).
    Switch {
        /// The task that stops running.
        prev_pid: i32,
        /// The task that runs next.
        next_comm: String,
        /// Its thread id.
        next_pid: i32,
    },
    /// A task was woken.
    Wakeup {
        /// Its thread id.
        pid: i32,
    },
    /// A device interrupt handler starts.
    IrqEntry {
        /// The IRQ number.
        irq: u32,
        /// Its action's name.
        name: String,
    },
    /// A device interrupt handler returns.
    IrqExit,
    /// A softirq starts.
    SoftirqEntry {
        /// `TIMER`, `NET_RX`, `RCU`, ...
        name: String,
    },
    /// A softirq ends.
    SoftirqExit,
    /// An x86 vector's handler starts (`local_timer`, `reschedule`, ...).
    VectorEntry {
        /// The vector's event stem.
        name: &'static str,
    },
    /// An x86 vector's handler returns.
    VectorExit,
    /// An hrtimer's callback starts (`hrtimer_wakeup`: a sleeper's timer;
    /// `tick_nohz_handler` / `tick_sched_timer`: the tick).
    HrtimerEntry {
        /// The callback's symbol.
        function: String,
    },
    /// An hrtimer's callback returns.
    HrtimerExit,
}

/// What one line of `trace_pipe` is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// An event the explanation reads.
    Event(Event),
    /// The kernel dropped this many events of that CPU (buffer full).
    Lost {
        /// The CPU.
        cpu: u32,
        /// How many.
        events: u64,
    },
    /// Anything else.
    Other,
}

/// Parses one line of `trace_pipe`.
pub fn parse(line: &str) -> Line {
    if let Some(lost) = parse_lost(line) {
        return lost;
    }
    parse_event(line).map_or(Line::Other, Line::Event)
}

fn parse_lost(line: &str) -> Option<Line> {
    let rest = line.trim().strip_prefix("CPU:")?;
    let (cpu, rest) = rest.split_once(' ')?;
    let n = rest
        .trim()
        .strip_prefix("[LOST ")?
        .split_whitespace()
        .next()?;
    Some(Line::Lost {
        cpu: cpu.parse().ok()?,
        events: n.parse().ok()?,
    })
}

fn parse_event(line: &str) -> Option<Event> {
    // The task's name may hold spaces and brackets: find the CPU field as
    // the first " [digits] " after which the rest parses.
    let mut from = 0;
    while let Some(i) = line[from..].find(" [") {
        let start = from + i + 2;
        from = start;
        let Some(end) = line[start..].find(']') else {
            break;
        };
        let Ok(cpu) = line[start..start + end].parse::<u32>() else {
            continue;
        };
        let rest = &line[start + end + 1..];
        if let Some(ev) = parse_after_cpu(cpu, rest) {
            return Some(ev);
        }
    }
    None
}

/// ` FLAGS SECS.USECS: EVENT: FIELDS` (older kernels print no flags
/// column unless asked; both forms parse).
fn parse_after_cpu(cpu: u32, rest: &str) -> Option<Event> {
    let (head, body) = rest.split_once(": ")?;
    let ts = head.split_whitespace().last()?;
    let (secs, usecs) = ts.split_once('.')?;
    let secs: u64 = secs.parse().ok()?;
    if usecs.len() != 6 {
        return None;
    }
    let usecs: u64 = usecs.parse().ok()?;
    let ts_ns = secs * 1_000_000_000 + usecs * 1000;
    let (name, fields) = body.split_once(": ").unwrap_or((body.trim_end(), ""));
    let kind = kind_of(name, fields)?;
    Some(Event { cpu, ts_ns, kind })
}

/// `key=value` of a field whose value holds no space.
fn field<'a>(fields: &'a str, key: &str) -> Option<&'a str> {
    fields
        .split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

fn kind_of(name: &str, fields: &str) -> Option<Kind> {
    Some(match name {
        "sched_switch" => {
            // next_comm may hold spaces: it runs from "next_comm=" to " next_pid=".
            let after = fields.split_once("==> ")?.1;
            let comm_start = after.find("next_comm=")? + "next_comm=".len();
            let pid_at = after.rfind(" next_pid=")?;
            Kind::Switch {
                prev_pid: field(fields.split_once("==>")?.0, "prev_pid")?
                    .parse()
                    .ok()?,
                next_comm: after.get(comm_start..pid_at)?.to_string(),
                next_pid: field(&after[pid_at..], "next_pid")?.parse().ok()?,
            }
        }
        "sched_wakeup" => Kind::Wakeup {
            pid: field(fields, "pid")?.parse().ok()?,
        },
        "irq_handler_entry" => {
            let name_at = fields.find(" name=")?;
            Kind::IrqEntry {
                irq: field(fields, "irq")?.parse().ok()?,
                name: fields[name_at + " name=".len()..].trim_end().to_string(),
            }
        }
        "irq_handler_exit" => Kind::IrqExit,
        "softirq_entry" => Kind::SoftirqEntry {
            name: softirq_name(fields)?,
        },
        "softirq_exit" => Kind::SoftirqExit,
        "hrtimer_expire_entry" => Kind::HrtimerEntry {
            function: field(fields, "function")?.to_string(),
        },
        "hrtimer_expire_exit" => Kind::HrtimerExit,
        _ => {
            let (stem, entry) = match name.strip_suffix("_entry") {
                Some(s) => (s, true),
                None => (name.strip_suffix("_exit")?, false),
            };
            let stem = VECTORS.iter().find(|v| **v == stem)?;
            if entry {
                Kind::VectorEntry { name: stem }
            } else {
                Kind::VectorExit
            }
        }
    })
}

/// `vec=3 [action=NET_RX]` → `NET_RX`.
fn softirq_name(fields: &str) -> Option<String> {
    let a = fields.split_once("[action=")?.1;
    Some(a.trim_end().trim_end_matches(']').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(line: &str) -> Event {
        match parse(line) {
            Line::Event(e) => e,
            other => panic!("{line:?} parsed as {other:?}"),
        }
    }

    #[test]
    fn switch_with_spaces_in_names() {
        let e = ev("  kworker/3:1 H-77  [003] d..2.  1234.567891: sched_switch: prev_comm=kworker/3:1 H prev_pid=77 prev_prio=120 prev_state=I ==> next_comm=measure cpu3 next_pid=901 next_prio=0");
        assert_eq!(e.cpu, 3);
        assert_eq!(e.ts_ns, 1_234_567_891_000);
        assert_eq!(
            e.kind,
            Kind::Switch {
                prev_pid: 77,
                next_comm: "measure cpu3".into(),
                next_pid: 901
            }
        );
    }

    #[test]
    fn irq_softirq_vector_hrtimer_idle() {
        let k = |l: &str| ev(l).kind;
        assert_eq!(
            k("<idle>-0 [002] d.h1. 10.000001: irq_handler_entry: irq=45 name=nvme0q3"),
            Kind::IrqEntry {
                irq: 45,
                name: "nvme0q3".into()
            }
        );
        assert_eq!(
            k("<idle>-0 [002] ..s1. 10.000002: softirq_entry: vec=3 [action=NET_RX]"),
            Kind::SoftirqEntry {
                name: "NET_RX".into()
            }
        );
        assert_eq!(
            k("<idle>-0 [002] d.h1. 10.000003: local_timer_entry: vector=236"),
            Kind::VectorEntry {
                name: "local_timer"
            }
        );
        assert_eq!(
            k("<idle>-0 [002] d.h1. 10.000003: call_function_single_exit: vector=251"),
            Kind::VectorExit
        );
        assert_eq!(
            k("<idle>-0 [002] d.h2. 10.000004: hrtimer_expire_entry: hrtimer=00000000a1b2c3d4 function=hrtimer_wakeup now=10000003999"),
            Kind::HrtimerEntry {
                function: "hrtimer_wakeup".into()
            }
        );
        // 6.1's format without the last flag column.
        assert_eq!(
            k("sh-50 [001] d... 10.000007: sched_wakeup: comm=sh pid=51 prio=120 target_cpu=001"),
            Kind::Wakeup { pid: 51 }
        );
    }

    #[test]
    fn lost_and_other_lines() {
        assert_eq!(
            parse("CPU:3 [LOST 1234 EVENTS]"),
            Line::Lost {
                cpu: 3,
                events: 1234
            }
        );
        assert_eq!(
            parse("sh-50 [001] d... 10.000007: sched_migrate_task: comm=sh"),
            Line::Other
        );
        assert_eq!(parse("garbage"), Line::Other);
        assert_eq!(parse(""), Line::Other);
    }
}
