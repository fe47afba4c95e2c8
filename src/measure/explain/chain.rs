//! From trace events to the chain of one slow sample: what held the CPU
//! from the timer's expiry to the measuring thread running again.
//!
//! The CPU's state (running task, idle, the stack of interrupt contexts)
//! is replayed from the events; the interval from the deadline to the
//! wake-up is cut at every event and each piece is charged to the
//! innermost context running then. The pieces add up to the measured
//! latency by construction; where the state is not known (no switch seen
//! yet, events lost) the piece is `Unexplained`, never guessed.
//!
//! Tasks are known by pid. Every event says which task was current on
//! its CPU (its record head's pid): where that is not the task the replay
//! has running, a switch was not read, so the time since the previous
//! event is `Unexplained`, and so is the time outside interrupts until
//! the next switch is read. A record that could not be read
//! ([`Kind::Unreadable`]) does the same: time is never charged to the
//! last task seen on the strength of a record that was not understood.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::trace::{Event, Kind};

/// What a piece of a sample's latency was spent in.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Cause {
    /// From the expiry to the timer interrupt's entry: interrupt delivery,
    /// idle exit, the hypervisor; `busy` names the task that had the CPU.
    TimerDelivery {
        /// The task running meanwhile (`None`: the CPU was idle).
        busy: Option<String>,
    },
    /// The local timer interrupt itself (its entry, exit and the probe's
    /// own timer callback).
    TimerIrq,
    /// The scheduler tick's callback in the timer interrupt.
    Tick,
    /// Another hrtimer's callback.
    Hrtimer {
        /// Its symbol.
        function: String,
    },
    /// An inter-processor interrupt (reschedule, function call, irq work).
    Ipi {
        /// The vector.
        name: String,
    },
    /// A device interrupt handler.
    Irq {
        /// IRQ number.
        irq: u32,
        /// Its action's name.
        name: String,
    },
    /// A softirq.
    Softirq {
        /// Its name (`NET_RX`, `TIMER`, `RCU`, ...).
        name: String,
    },
    /// Another task held the CPU after the measuring thread was woken.
    Task {
        /// Its name, escaped ([`super::trace::escape`]); where the trace
        /// did not say which bytes were the name, [`unnamed`]'s text.
        comm: String,
    },
    /// From the wake-up to the switch, the CPU idle: idle exit and the
    /// scheduler's switch.
    Switch,
    /// The measuring thread running, back to user space and its clock read.
    Return,
    /// A spinning thread's gap with no kernel event on its CPU: it ran,
    /// in no interrupt, and lost the time anyway (osnoise's hardware
    /// noise: an SMI, an NMI, firmware or the hypervisor).
    Hardware,
    /// No evidence: the CPU's state was not known or events were lost.
    Unexplained,
}

impl Cause {
    /// The cause's family: `timer`, `tick`, `hrtimer`, `ipi`, `irq`,
    /// `softirq`, `task`, `switch`, `return`, `hardware`, `unexplained`.
    pub fn kind(&self) -> &'static str {
        match self {
            Cause::TimerDelivery { .. } | Cause::TimerIrq => "timer",
            Cause::Tick => "tick",
            Cause::Hrtimer { .. } => "hrtimer",
            Cause::Ipi { .. } => "ipi",
            Cause::Irq { .. } => "irq",
            Cause::Softirq { .. } => "softirq",
            Cause::Task { .. } => "task",
            Cause::Switch => "switch",
            Cause::Return => "return",
            Cause::Hardware => "hardware",
            Cause::Unexplained => "unexplained",
        }
    }

    /// Whether every wake-up passes through it (the path from expiry to
    /// user space), as opposed to something in the way.
    pub fn is_path(&self) -> bool {
        matches!(
            self,
            Cause::TimerDelivery { busy: None } | Cause::TimerIrq | Cause::Switch | Cause::Return
        )
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::TimerDelivery { busy: None } => write!(f, "timer delivery (idle exit)"),
            Cause::TimerDelivery { busy: Some(c) } => write!(f, "timer delivery ({c} running)"),
            Cause::TimerIrq => write!(f, "timer interrupt"),
            Cause::Tick => write!(f, "tick"),
            Cause::Hrtimer { function } => write!(f, "hrtimer {function}"),
            Cause::Ipi { name } => write!(f, "IPI {name}"),
            Cause::Irq { irq, name } => write!(f, "IRQ {irq} {name}"),
            Cause::Softirq { name } => write!(f, "softirq {name}"),
            Cause::Task { comm } => write!(f, "task {comm}"),
            Cause::Switch => write!(f, "switch"),
            Cause::Return => write!(f, "return to user"),
            Cause::Hardware => write!(f, "hardware (no kernel event)"),
            Cause::Unexplained => write!(f, "unexplained"),
        }
    }
}

/// What names task `pid` whose name the trace did not give: longer than
/// any task's name (15 bytes) and without a backslash, so no escaped
/// name reads the same.
pub fn unnamed(pid: i32) -> String {
    format!("(pid {pid}, name unread)")
}

/// An interrupt context on a CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Context {
    Irq(u32, String),
    Softirq(String),
    Vector(&'static str),
    Hrtimer(String),
}

/// What a CPU was doing, replayed from its events.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuState {
    /// The running task's thread id (`None`: not known, since no switch
    /// was read yet or since evidence went missing).
    pid: Option<i32>,
    /// Its name, when the switch to it gave it.
    comm: Option<String>,
    /// Interrupt contexts entered since then, innermost last.
    stack: Vec<Context>,
}

impl CpuState {
    /// Whether `e` agrees with the replay: it was written while the task
    /// the replay has running was current (or the replay does not know).
    pub fn agrees(&self, e: &Event) -> bool {
        self.pid.is_none_or(|p| p == e.pid)
    }

    /// Forgets what runs: not known until the next switch is read.
    fn lose(&mut self) {
        self.pid = None;
        self.comm = None;
        self.stack.clear();
    }

    /// Applies one event of this CPU.
    pub fn apply(&mut self, e: &Event) {
        if !self.agrees(e) {
            self.lose();
        }
        match &e.kind {
            Kind::Switch {
                next_comm,
                next_pid,
                ..
            } => {
                self.pid = Some(*next_pid);
                self.comm.clone_from(next_comm);
                self.stack.clear();
            }
            Kind::Unreadable => self.lose(),
            Kind::Wakeup { .. } => {}
            Kind::IrqEntry { irq, name } => self.stack.push(Context::Irq(*irq, name.clone())),
            Kind::SoftirqEntry { name } => self.stack.push(Context::Softirq(name.clone())),
            Kind::VectorEntry { name } => self.stack.push(Context::Vector(name)),
            Kind::HrtimerEntry { function } => self.stack.push(Context::Hrtimer(function.clone())),
            Kind::IrqExit => self.pop(|c| matches!(c, Context::Irq(..))),
            Kind::SoftirqExit => self.pop(|c| matches!(c, Context::Softirq(_))),
            Kind::VectorExit => self.pop(|c| matches!(c, Context::Vector(_))),
            Kind::HrtimerExit => self.pop(|c| matches!(c, Context::Hrtimer(_))),
        }
    }

    /// Leaves the innermost context of that sort (an exit whose entry came
    /// before the replay started matches nothing and changes nothing).
    fn pop(&mut self, is: impl Fn(&Context) -> bool) {
        if let Some(i) = self.stack.iter().rposition(is) {
            self.stack.truncate(i);
        }
    }

    fn name(&self, pid: i32) -> String {
        self.comm.clone().unwrap_or_else(|| unnamed(pid))
    }

    fn cause(&self, sample: &Sample, woken: bool) -> Cause {
        let tid = sample.tid;
        if let Some(top) = self.stack.last() {
            return match top {
                Context::Hrtimer(f) if f.starts_with("tick_") => Cause::Tick,
                Context::Hrtimer(f) if f == "hrtimer_wakeup" => Cause::TimerIrq,
                Context::Hrtimer(f) => Cause::Hrtimer {
                    function: f.clone(),
                },
                Context::Vector("local_timer") => Cause::TimerIrq,
                Context::Vector(v) => Cause::Ipi {
                    name: (*v).to_string(),
                },
                Context::Irq(n, name) => Cause::Irq {
                    irq: *n,
                    name: name.clone(),
                },
                Context::Softirq(name) => Cause::Softirq { name: name.clone() },
            };
        }
        // A spinning thread's gap has no timer to deliver: whatever ran
        // instead of it took the time.
        let ready = woken || sample.spinning;
        match self.pid {
            None => Cause::Unexplained,
            Some(p) if p == tid && sample.spinning => Cause::Hardware,
            Some(p) if p == tid => Cause::Return,
            Some(0) if ready => Cause::Switch,
            Some(0) => Cause::TimerDelivery { busy: None },
            Some(p) if ready => Cause::Task { comm: self.name(p) },
            Some(p) => Cause::TimerDelivery {
                busy: Some(self.name(p)),
            },
        }
    }
}

/// One piece of a sample's latency.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Piece {
    /// What it was spent in.
    #[serde(flatten)]
    pub cause: Cause,
    /// `cause` as a person reads it.
    pub label: String,
    /// How long, ns.
    pub ns: u64,
}

/// A slow sample, as the measuring loop saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// The CPU.
    pub cpu: u32,
    /// The measuring thread's id.
    pub tid: i32,
    /// When its timer was due, CLOCK_MONOTONIC ns.
    pub deadline_ns: u64,
    /// When it read the clock after waking, CLOCK_MONOTONIC ns.
    pub wake_ns: u64,
    /// A gap of a spinning thread (the noise probe): it ran throughout,
    /// from `deadline_ns` (its last clock read) to `wake_ns`; no timer woke it.
    pub spinning: bool,
}

/// Cuts `[deadline, wake]` of `sample` into pieces: `state` is the CPU's
/// state at the first of `events` (this CPU's, in time order; those
/// before the deadline bring the state up to it). With `lost` the kernel
/// dropped events in the window and the whole latency is unexplained.
pub fn explain<'a>(
    state: &CpuState,
    events: impl IntoIterator<Item = &'a Event>,
    sample: &Sample,
    lost: bool,
) -> Vec<Piece> {
    let (start, end) = (sample.deadline_ns, sample.wake_ns.max(sample.deadline_ns));
    if lost {
        return vec![piece(Cause::Unexplained, end - start)];
    }
    let mut st = state.clone();
    let mut woken = false;
    let mut at = start;
    let mut pieces: Vec<Piece> = Vec::new();
    for e in events.into_iter().filter(|e| e.cpu == sample.cpu) {
        if e.ts_ns > end {
            break;
        }
        if e.ts_ns > at {
            // A task switched in unseen ran for some of this time.
            let cause = if st.agrees(e) {
                st.cause(sample, woken)
            } else {
                Cause::Unexplained
            };
            push(&mut pieces, cause, e.ts_ns - at);
            at = e.ts_ns;
        }
        st.apply(e);
        // Trace times are cut to the µs: an event up to 1 µs before the
        // deadline may have come after it. Earlier wake-ups and switches
        // belong to earlier samples.
        let after_deadline = e.ts_ns + 1000 > start;
        match &e.kind {
            Kind::Wakeup { pid } | Kind::Switch { next_pid: pid, .. }
                if *pid == sample.tid && after_deadline =>
            {
                woken = true
            }
            _ => {}
        }
    }
    if end > at {
        push(&mut pieces, st.cause(sample, woken), end - at);
    }
    pieces
}

fn piece(cause: Cause, ns: u64) -> Piece {
    Piece {
        label: cause.to_string(),
        cause,
        ns,
    }
}

fn push(pieces: &mut Vec<Piece>, cause: Cause, ns: u64) {
    match pieces.last_mut() {
        Some(p) if p.cause == cause => p.ns += ns,
        _ => pieces.push(piece(cause, ns)),
    }
}

/// The piece that took longest (the sample's main cause).
pub fn main_piece(pieces: &[Piece]) -> Option<&Piece> {
    pieces.iter().max_by_key(|p| p.ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TID: i32 = 900;

    /// An event at `us` µs on CPU 3, written while `pid` was current.
    fn at(us: u64, pid: i32, kind: Kind) -> Event {
        Event {
            cpu: 3,
            ts_ns: 1_000_000_000 + us * 1000,
            pid,
            kind,
        }
    }

    fn sample(from_us: u64, to_us: u64) -> Sample {
        Sample {
            cpu: 3,
            tid: TID,
            deadline_ns: 1_000_000_000 + from_us * 1000,
            wake_ns: 1_000_000_000 + to_us * 1000,
            spinning: false,
        }
    }

    fn switch(from: i32, to: i32, comm: &str) -> Kind {
        Kind::Switch {
            prev_pid: from,
            next_pid: to,
            next_comm: Some(comm.into()),
        }
    }

    fn summary(pieces: &[Piece]) -> Vec<(String, u64)> {
        pieces
            .iter()
            .map(|p| (p.label.clone(), p.ns / 1000))
            .collect()
    }

    fn timer_entry() -> Kind {
        Kind::VectorEntry {
            name: "local_timer",
        }
    }

    fn hrtimer(function: &str) -> Kind {
        Kind::HrtimerEntry {
            function: function.into(),
        }
    }

    #[test]
    fn a_spinning_threads_gap_is_the_interrupts_in_it_and_hardware_where_no_event_is() {
        // The measuring thread spins on CPU 3 from 90 µs; its gap runs
        // from 100 to 160 µs: an IRQ from 120 to 130, nothing else.
        let events = [
            at(90, 0, switch(0, TID, "cpushield-meas")),
            at(
                120,
                TID,
                Kind::IrqEntry {
                    irq: 30,
                    name: "eth0".into(),
                },
            ),
            at(130, TID, Kind::IrqExit),
        ];
        let gap = Sample {
            spinning: true,
            ..sample(100, 160)
        };
        let pieces = explain(&CpuState::default(), &events, &gap, false);
        assert_eq!(
            summary(&pieces),
            [
                ("hardware (no kernel event)".to_string(), 20),
                ("IRQ 30 eth0".to_string(), 10),
                ("hardware (no kernel event)".to_string(), 30),
            ]
        );
        // Another task that ran in the gap took its time as a task.
        let preempted = [
            at(90, 0, switch(0, TID, "cpushield-meas")),
            at(110, TID, switch(TID, 77, "spin")),
            at(150, 77, switch(77, TID, "cpushield-meas")),
        ];
        let pieces = explain(&CpuState::default(), &preempted, &gap, false);
        assert_eq!(
            summary(&pieces),
            [
                ("hardware (no kernel event)".to_string(), 10),
                ("task spin".to_string(), 40),
                ("hardware (no kernel event)".to_string(), 10),
            ]
        );
        // The same interval of a timer sample is the thread's own return.
        let pieces = explain(&CpuState::default(), &events, &sample(100, 160), false);
        assert_eq!(pieces[0].cause, Cause::Return);
    }

    #[test]
    fn idle_cpu_delayed_by_a_device_irq_and_its_softirq() {
        let events = vec![
            at(0, 1, switch(1, 0, "swapper/3")),
            // expiry at 100; a NIC interrupt came first.
            at(
                130,
                0,
                Kind::IrqEntry {
                    irq: 45,
                    name: "virtio1-input.0".into(),
                },
            ),
            at(150, 0, Kind::IrqExit),
            at(
                150,
                0,
                Kind::SoftirqEntry {
                    name: "NET_RX".into(),
                },
            ),
            at(250, 0, Kind::SoftirqExit),
            at(252, 0, timer_entry()),
            at(254, 0, hrtimer("hrtimer_wakeup")),
            at(255, 0, Kind::Wakeup { pid: TID }),
            at(256, 0, Kind::HrtimerExit),
            at(258, 0, Kind::VectorExit),
            at(265, 0, switch(0, TID, "measure-cpu3")),
        ];
        let p = explain(&CpuState::default(), &events, &sample(100, 270), false);
        assert_eq!(
            summary(&p),
            vec![
                ("timer delivery (idle exit)".into(), 30),
                ("IRQ 45 virtio1-input.0".into(), 20),
                ("softirq NET_RX".into(), 100),
                ("timer delivery (idle exit)".into(), 2),
                ("timer interrupt".into(), 6),
                ("switch".into(), 7),
                ("return to user".into(), 5),
            ]
        );
        assert_eq!(p.iter().map(|p| p.ns).sum::<u64>(), 170_000, "adds up");
        assert_eq!(main_piece(&p).unwrap().label, "softirq NET_RX");
    }

    /// A spinner at pid 77 that holds the CPU after the wake-up.
    fn spinner_events(comm: Option<&str>) -> Vec<Event> {
        vec![
            at(
                0,
                5,
                Kind::Switch {
                    prev_pid: 5,
                    next_pid: 77,
                    next_comm: comm.map(str::to_string),
                },
            ),
            at(101, 77, timer_entry()),
            at(102, 77, hrtimer("tick_nohz_handler")),
            at(110, 77, Kind::HrtimerExit),
            at(111, 77, hrtimer("hrtimer_wakeup")),
            at(111, 77, Kind::Wakeup { pid: TID }),
            at(112, 77, Kind::HrtimerExit),
            at(113, 77, Kind::VectorExit),
            at(500, 77, switch(77, TID, "measure-cpu3")),
        ]
    }

    #[test]
    fn a_task_that_keeps_the_cpu_after_the_wakeup_is_named() {
        let p = explain(
            &CpuState::default(),
            &spinner_events(Some("cs-spinner")),
            &sample(100, 502),
            false,
        );
        assert_eq!(
            summary(&p),
            vec![
                ("timer delivery (cs-spinner running)".into(), 1),
                ("timer interrupt".into(), 1),
                ("tick".into(), 8),
                ("timer interrupt".into(), 3),
                ("task cs-spinner".into(), 387),
                ("return to user".into(), 2),
            ]
        );
        assert_eq!(main_piece(&p).unwrap().cause.kind(), "task");
    }

    #[test]
    fn a_task_whose_name_was_not_read_is_named_by_its_pid() {
        let p = explain(
            &CpuState::default(),
            &spinner_events(None),
            &sample(100, 502),
            false,
        );
        let main = main_piece(&p).unwrap();
        assert_eq!(
            main.cause,
            Cause::Task {
                comm: "(pid 77, name unread)".into()
            }
        );
        assert!(unnamed(4_194_304).len() > crate::measure::explain::trace::COMM_MAX);
    }

    /// The case: the switch to the spinner was not read. Its
    /// records' heads say pid 222 runs, not the task switched to before.
    #[test]
    fn a_switch_not_read_leaves_the_time_unexplained_not_charged_to_the_task_before() {
        let events = vec![
            at(0, 5, switch(5, 221, "usleep")),
            // usleep exits and qxhog (222) runs: that switch was not read.
            at(50, 221, Kind::Unreadable),
            at(4_500_101, 222, timer_entry()),
            at(4_500_102, 222, Kind::Wakeup { pid: TID }),
            at(4_500_103, 222, Kind::VectorExit),
            at(9_000_000, 222, switch(222, TID, "measure-cpu3")),
        ];
        let p = explain(
            &CpuState::default(),
            &events,
            &sample(100, 9_000_002),
            false,
        );
        assert!(
            p.iter().all(|p| !p.label.contains("usleep")),
            "{:?}",
            summary(&p)
        );
        assert_eq!(main_piece(&p).unwrap().cause, Cause::Unexplained);
        // Without the unreadable record: the heads alone give it away.
        let mut events = events;
        events.remove(1);
        let p = explain(
            &CpuState::default(),
            &events,
            &sample(100, 9_000_002),
            false,
        );
        assert!(
            p.iter().all(|p| !p.label.contains("usleep")),
            "{:?}",
            summary(&p)
        );
        assert_eq!(
            summary(&p),
            vec![
                ("unexplained".into(), 4_500_001),
                ("timer interrupt".into(), 2),
                ("unexplained".into(), 4_499_897),
                ("return to user".into(), 2),
            ]
        );
    }

    #[test]
    fn the_previous_samples_wakeup_does_not_count() {
        let events = vec![
            at(0, 0, Kind::Wakeup { pid: TID }),
            at(1, 0, switch(0, TID, "measure-cpu3")),
            at(3, TID, switch(TID, 0, "swapper/3")),
            // expiry at 100, the timer interrupt only at 400: idle exit.
            at(400, 0, timer_entry()),
            at(401, 0, Kind::Wakeup { pid: TID }),
            at(402, 0, Kind::VectorExit),
            at(404, 0, switch(0, TID, "measure-cpu3")),
        ];
        let p = explain(&CpuState::default(), &events, &sample(100, 405), false);
        assert_eq!(
            summary(&p),
            vec![
                ("timer delivery (idle exit)".into(), 300),
                ("timer interrupt".into(), 2),
                ("switch".into(), 2),
                ("return to user".into(), 1),
            ]
        );
    }

    #[test]
    fn unknown_state_and_lost_events_are_unexplained() {
        // No switch seen: who ran is not known.
        let events = vec![at(150, 8, timer_entry())];
        let p = explain(&CpuState::default(), &events, &sample(100, 200), false);
        assert_eq!(p[0].cause, Cause::Unexplained);
        assert_eq!(p[0].ns, 50_000);
        let p = explain(&CpuState::default(), &events, &sample(100, 200), true);
        assert_eq!(summary(&p), vec![("unexplained".into(), 100)]);
    }

    #[test]
    fn exits_without_entries_and_nested_contexts() {
        let mut st = CpuState::default();
        st.apply(&at(0, 5, Kind::IrqExit)); // its entry came before the replay
        assert!(st.stack.is_empty());
        st.apply(&at(0, 1, switch(1, 5, "kworker/3:1")));
        st.apply(&at(
            0,
            5,
            Kind::SoftirqEntry {
                name: "TIMER".into(),
            },
        ));
        st.apply(&at(0, 5, Kind::VectorEntry { name: "reschedule" }));
        assert_eq!(st.cause(&sample(0, 1), true).to_string(), "IPI reschedule");
        st.apply(&at(0, 5, Kind::VectorExit));
        assert_eq!(st.cause(&sample(0, 1), true).to_string(), "softirq TIMER");
        st.apply(&at(0, 5, Kind::SoftirqExit));
        assert_eq!(
            st.cause(&sample(0, 1), true).to_string(),
            "task kworker/3:1"
        );
    }

    #[test]
    fn an_unreadable_record_forgets_the_task_but_not_what_follows() {
        let mut st = CpuState::default();
        st.apply(&at(0, 1, switch(1, 5, "kworker/3:1")));
        st.apply(&at(1, 5, Kind::Unreadable));
        assert_eq!(st.cause(&sample(0, 1), true), Cause::Unexplained);
        // An interrupt entered after it is known.
        st.apply(&at(
            2,
            5,
            Kind::IrqEntry {
                irq: 9,
                name: "acpi".into(),
            },
        ));
        assert_eq!(st.cause(&sample(0, 1), true).to_string(), "IRQ 9 acpi");
        st.apply(&at(3, 5, Kind::IrqExit));
        assert_eq!(st.cause(&sample(0, 1), true), Cause::Unexplained);
        st.apply(&at(4, 5, switch(5, 6, "b")));
        assert_eq!(st.cause(&sample(0, 1), true).to_string(), "task b");
    }
}
