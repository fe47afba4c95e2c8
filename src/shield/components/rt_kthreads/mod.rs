//! The shielded CPUs' own softirq, timer and RCU threads, raised above the
//! user's real-time task (`on --kthreads-above PRIO`).
//!
//! On PREEMPT_RT, `ksoftirqd/N`, `ktimers/N` and `rcuc/N` run the CPU's
//! softirqs, timers and RCU callbacks as SCHED_FIFO 1 threads: below any
//! polling task of the user's, so behind a loop that never sleeps they run
//! only when throttling or the starvation guard lets them, and RCU stalls
//! meanwhile. Raised above the loop's priority they preempt it for the few
//! microseconds their work takes, as tuned's realtime profiles do by hand
//! (FIFO 2 to 4 above virtual CPU threads at 1). On other kernels only
//! `ksoftirqd/N` exists, an ordinary thread, and it is raised the same way.
//!
//! Each change is one journaled step with the thread's scheduling read
//! just before it; `off` puts that back, unless the thread id now names a
//! thread started later.

use crate::shield::component::{
    Changing, Component, Draft, InPlace, Looking, Phase, Planning, Reporting,
};
use crate::shield::component::{Looks, ReadiesRealtime, Reports, Undoes};
use crate::shield::journal::Entry;


mod for_run;
mod irq_priority;
mod notes;
mod options;
pub use options::Options;
use crate::shield::parts::{Line, PartReport};
use crate::shield::plan_error::PlanError;
use crate::shield::snapshot::{in_shield_cgroup, Snapshot};
pub use notes::KthreadsNote;
use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;
use crate::shield::apply::{ApplyError, Refusal};
use crate::shield::change::{Action, Owner, Step};
use crate::shield::undo::Undone;
use crate::sys::procfs::{self, Thread};
use crate::sys::syscalls::{SchedAttr, SCHED_DEADLINE, SCHED_FIFO, SCHED_RR};
use crate::sys::{ErrorKind, Sys};

/// This component, as it names itself in the journal and in reports.
pub const OWNER: Owner = Owner("kthreads");

/// The IRQs the plan binds to the shield on request (the IRQs plan
/// before the kernel threads and publish them).
fn irqs_bound(plan: &crate::shield::plan::Plan) -> Vec<u32> {
    let bound = plan.facts.get::<crate::shield::facts::BoundIrqs>();
    bound.unwrap_or_default().0
}

/// Each kind of thread and how far above the user's priority it goes:
/// softirqs lowest, then timers, then RCU, in the order tuned's
/// realtime-virtual-host profile gives them.
pub const KINDS: [(&str, u32); 3] = [("ksoftirqd", 1), ("ktimers", 2), ("rcuc", 3)];

/// How far above the user's priority the thread of an IRQ bound to the
/// shield (`--irq`) goes: the task waits for that IRQ, whose handler runs
/// in `irq/N-name` at SCHED_FIFO 50 (threaded IRQs, PREEMPT_RT), below a
/// task at 80 (tuna's `-q IRQ -p` sets it by hand).
pub const IRQ_ABOVE: u32 = 1;

/// The highest priority given: 99 stays the kernel's own (migration,
/// watchdog), which must preempt everything.
pub const HIGHEST: u32 = 98;

/// The highest `--kthreads-above` that leaves each kind its own priority.
pub const MAX_ABOVE: u32 = HIGHEST - 3;

/// `prio` if it leaves room above it for each kind (1 to [`MAX_ABOVE`]),
/// else what would be valid.
pub fn check_above(prio: u32) -> Result<u32, String> {
    if (1..=MAX_ABOVE).contains(&prio) {
        Ok(prio)
    } else {
        Err(format!(
            "{prio}: a real-time priority from 1 to {MAX_ABOVE} (the priority of your \
             real-time task; the kernel's threads go up to 3 above it)"
        ))
    }
}

/// The priority a thread of `kind` gets above `above`, if it is one of
/// [`KINDS`].
pub fn priority(kind: &str, above: u32) -> Option<u32> {
    KINDS
        .iter()
        .find(|(k, _)| *k == kind)
        .map(|(_, up)| (above + up).min(HIGHEST))
}

/// The IRQ an `irq/N-name` thread (or PREEMPT_RT's secondary
/// `irq/N-s-name`) serves.
pub fn irq_of_thread(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("irq/")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The steps raising each per-CPU softirq, timer and RCU thread of a
/// shielded CPU above `above`, and the threads of the IRQs bound to the
/// shield (`irqs`) to `above` + [`IRQ_ABOVE`].
pub(in crate::shield) fn plan(
    threads: &[Thread],
    shield: &CpuSet,
    above: u32,
    irqs: &[u32],
) -> Vec<Step> {
    threads
        .iter()
        .filter(|t| t.is_kthread() && t.pid == t.tid)
        .filter_map(|t| {
            let per_cpu = t.cpus_allowed.len() == 1 && t.cpus_allowed.is_subset(shield);
            let priority = match irq_of_thread(&t.name) {
                Some(irq) if irqs.contains(&irq) => (above + IRQ_ABOVE).min(HIGHEST),
                Some(_) => return None,
                None if per_cpu => priority(&t.kind(), above)?,
                None => return None,
            };
            Some(raise(t, priority))
        })
        .collect()
}

/// The step that sets kernel thread `t` to SCHED_FIFO `priority`.
fn raise(t: &Thread, priority: u32) -> Step {
    Step::optional(
        OWNER,
        Action::SetScheduler {
            pid: t.pid,
            tid: t.tid,
            name: t.name.clone(),
            policy: SCHED_FIFO,
            priority,
            reservation: None,
        },
    )
}

/// A thread's scheduling now, as the journal keeps it (JSON of
/// [`SchedAttr`]); `None` if it cannot be read.
pub(in crate::shield) fn read_previous(sys: &Sys, tid: i32) -> Option<String> {
    let attr = sys.sched_attr(tid).ok()?;
    serde_json::to_string(&attr).ok()
}

fn fifo(priority: u32) -> SchedAttr {
    SchedAttr {
        policy: SCHED_FIFO,
        flags: 0,
        nice: 0,
        priority,
        runtime_ns: 0,
        deadline_ns: 0,
        period_ns: 0,
    }
}

/// Whether `attr` is `policy` at `priority`.
fn reads_as(attr: &SchedAttr, policy: u32, priority: u32) -> bool {
    attr.policy == policy && attr.priority == priority
}

fn describe(attr: &SchedAttr) -> String {
    attr.label()
}

/// Sets `tid` to `policy` at `priority`, or to SCHED_DEADLINE with the
/// `reservation` (runtime, period in ns), and reads it back.
pub(in crate::shield) fn set(
    sys: &Sys,
    tid: i32,
    (policy, priority): (u32, u32),
    reservation: Option<(u64, u64)>,
) -> Result<(), ApplyError> {
    let attr = match reservation {
        Some((runtime_ns, period_ns)) => SchedAttr {
            policy: SCHED_DEADLINE,
            flags: 0,
            nice: 0,
            priority: 0,
            runtime_ns,
            deadline_ns: period_ns,
            period_ns,
        },
        None => SchedAttr {
            policy,
            ..fifo(priority)
        },
    };
    sys.set_sched_attr(tid, &attr)?;
    let now = sys.sched_attr(tid)?;
    if reads_as(&now, attr.policy, attr.priority) {
        Ok(())
    } else {
        Err(ApplyError::NotHonoured {
            path: format!("task {tid}"),
            wrote: describe(&attr),
            read: describe(&now),
        })
    }
}

/// Whether the thread `tid` already runs as a step asks, by its `stat`
/// (policy and real-time priority) read through `read`: a change in place
/// leaves it alone.
pub(in crate::shield) fn in_place(
    read: &impl Fn(&str) -> Option<String>,
    tid: i32,
    policy: u32,
    priority: u32,
) -> bool {
    read(&format!("proc/{tid}/stat")).is_some_and(|stat| {
        procfs::split_stat(&stat).is_some_and(|(_, f)| {
            procfs::stat_field::<u32>(&f, 41) == Some(policy)
                && procfs::stat_field::<u32>(&f, 40) == Some(priority)
        })
    })
}

/// A per-CPU softirq, timer or RCU thread of one of some CPUs, with its
/// scheduling as read.
#[derive(Debug, Clone)]
struct PerCpu {
    pid: i32,
    name: String,
    kind: String,
    cpu: u32,
    attr: SchedAttr,
}

/// The [`KINDS`] threads of `cpus`, found by name (`rcuc/3`).
fn per_cpu_threads(sys: &Sys, cpus: &CpuSet) -> Vec<PerCpu> {
    let mut out = Vec::new();
    for pid in procfs::list_pids(sys).unwrap_or_default() {
        let Ok(stat) = sys.read(&format!("proc/{pid}/stat")) else {
            continue;
        };
        let Some((name, _)) = procfs::split_stat(&stat) else {
            continue;
        };
        let kind = procfs::kthread_kind(name);
        let cpu = name
            .split_once('/')
            .and_then(|(_, c)| c.parse::<u32>().ok());
        let Some(cpu) = cpu.filter(|c| cpus.contains(*c)) else {
            continue;
        };
        if !KINDS.iter().any(|(k, _)| *k == kind) {
            continue;
        }
        if let Ok(attr) = sys.sched_attr(pid) {
            out.push(PerCpu {
                pid,
                name: name.to_string(),
                kind,
                cpu,
                attr,
            });
        }
    }
    out
}

/// Whether a thread scheduled as `attr` runs below a SCHED_FIFO/RR task of
/// `priority`.
fn runs_below(attr: &SchedAttr, priority: u32) -> bool {
    match attr.policy {
        SCHED_FIFO | SCHED_RR => attr.priority < priority,
        SCHED_DEADLINE => false,
        _ => true,
    }
}

/// The CPUs of `cpus` where the boot half takes RCU off the CPU: both
/// `nohz_full=` and `rcu_nocbs=` on the running command line name them.
/// There a task that never sleeps leaves the CPU in an extended quiescent
/// state, so RCU does not wait for its `rcuc/N`.
fn rcu_offloaded(sys: &Sys, cpus: &CpuSet) -> CpuSet {
    // nohz_full as the kernel took it; rcu_nocbs only as the boot line
    // gives it (the last one wins, as the kernel reads its options).
    let nohz_full = sys
        .read_cpulist("sys/devices/system/cpu/nohz_full")
        .unwrap_or_default();
    let nocbs = sys
        .read("proc/cmdline")
        .ok()
        .and_then(|line| {
            line.split_whitespace()
                .filter_map(|w| w.strip_prefix("rcu_nocbs="))
                .next_back()
                .map(|v| match v {
                    "all" => procfs::online_cpus(sys).unwrap_or_default(),
                    list => CpuSet::parse_list(list).unwrap_or_default(),
                })
        })
        .unwrap_or_default();
    nohz_full.intersection(&nocbs).intersection(cpus)
}

/// The SCHED_DEADLINE reservation each softirq, timer and RCU thread of a
/// CPU gets behind a task no SCHED_FIFO priority can pass (above
/// [`MAX_ABOVE`]): 200 µs every 10 ms, the deadline the period. A
/// deadline thread preempts every SCHED_FIFO one whenever it has work, up
/// to its runtime each period, so a loop at 99 loses at most 2 % of its CPU
/// to each, and only while they have work.
pub const RESERVATION: (u64, u64) = (200_000, 10_000_000);

/// What `run --fifo/--rr PRIORITY` (`task`) does on PREEMPT_RT for `cpus`:
/// the steps raising each of their softirq, timer and RCU threads that
/// would run below the task to its place above it (as `on --kthreads-above`
/// does), leaving out `rcuc/N` where the boot half offloads RCU; and those
/// CPUs. Above [`MAX_ABOVE`] no priority is left above the task: the
/// threads get a SCHED_DEADLINE [`RESERVATION`] instead, which the kernel
/// takes for a thread bound to one CPU only while RT throttling is off
/// (`sched_rt_runtime_us` -1; otherwise nothing is planned, and the note of
/// [`below`] says so). Other kernels: nothing (`ksoftirqd/N` is an
/// ordinary thread there, which the starvation guard or the fair server
/// keeps running).
pub(in crate::shield) fn raise_for_task(
    sys: &Sys,
    cpus: &CpuSet,
    task: u32,
) -> (Vec<Step>, CpuSet) {
    if !crate::guard::kernel::running_preempt_rt(sys) {
        return (Vec::new(), CpuSet::new());
    }
    let reserve = task > MAX_ABOVE;
    if reserve
        && sys
            .read_trimmed(crate::guard::kernel::RT_RUNTIME)
            .ok()
            .as_deref()
            != Some("-1")
    {
        return (Vec::new(), CpuSet::new());
    }
    let offloaded = rcu_offloaded(sys, cpus);
    let steps = per_cpu_threads(sys, cpus)
        .into_iter()
        .filter(|t| !(t.kind == "rcuc" && offloaded.contains(t.cpu)))
        .filter_map(|t| {
            let to = priority(&t.kind, task.min(MAX_ABOVE))?;
            let needed = if reserve {
                t.attr.policy != SCHED_DEADLINE
            } else {
                runs_below(&t.attr, to)
            };
            needed.then(|| {
                Step::optional(
                    OWNER,
                    Action::SetScheduler {
                        pid: t.pid,
                        tid: t.pid,
                        name: t.name,
                        policy: if reserve { SCHED_DEADLINE } else { SCHED_FIFO },
                        priority: if reserve { 0 } else { to },
                        reservation: reserve.then_some(RESERVATION),
                    },
                )
            })
        })
        .collect();
    (steps, offloaded)
}

/// What keeps RCU going on one shielded CPU of a PREEMPT_RT kernel, as
/// read now (`status`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RcuCpu {
    /// The CPU.
    pub cpu: u32,
    /// Its `rcuc/N` thread's scheduling (`SCHED_FIFO 83`), if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcuc: Option<String>,
    /// The boot line offloads RCU from it (`nohz_full=` and `rcu_nocbs=`).
    pub offloaded: bool,
    /// The highest real-time priority of the user's tasks on it, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_priority: Option<u32>,
    /// `rcuc/N` runs below such a task, nothing offloads RCU, and nothing
    /// but the guard's boosts can run it: RCU stalls if the task never
    /// sleeps.
    pub starves: bool,
}

/// Per shielded CPU, what keeps RCU going on a PREEMPT_RT kernel (the
/// caller asks only there: elsewhere RCU's work runs in softirq context,
/// which the guard or the fair server covers). `task_priority` gives the
/// highest real-time priority of the user's tasks on each CPU.
pub fn rcu_on(
    sys: &Sys,
    shield: &CpuSet,
    task_priority: &dyn Fn(u32) -> Option<u32>,
) -> Vec<RcuCpu> {
    let offloaded = rcu_offloaded(sys, shield);
    let threads = per_cpu_threads(sys, shield);
    shield
        .iter()
        .map(|cpu| {
            let rcuc = threads.iter().find(|t| t.kind == "rcuc" && t.cpu == cpu);
            let task = task_priority(cpu);
            let starves = match (rcuc, task) {
                (Some(r), Some(p)) => !offloaded.contains(cpu) && runs_below(&r.attr, p + 1),
                _ => false,
            };
            RcuCpu {
                cpu,
                rcuc: rcuc.map(|r| describe(&r.attr)),
                offloaded: offloaded.contains(cpu),
                task_priority: task,
                starves,
            }
        })
        .collect()
}

/// A kernel thread whose scheduling a shield set, as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Raised {
    /// Thread id.
    pub tid: i32,
    /// Its name.
    pub name: String,
    /// Its scheduling as read back (`SCHED_FIFO 81`), or as planned with
    /// `--dry-run`.
    pub scheduling: String,
}

/// The threads the steps raise, each as it reads back now (`read`: the
/// kernel's scheduling of a thread; `None` reports the plan).
pub(in crate::shield) fn report(
    steps: &[Step],
    read: Option<&dyn Fn(i32) -> Option<SchedAttr>>,
) -> Vec<Raised> {
    steps
        .iter()
        .filter_map(|s| match &s.action {
            Action::SetScheduler {
                tid,
                name,
                policy,
                priority,
                reservation,
                ..
            } => {
                let scheduling = match read {
                    None => {
                        let mut planned = fifo(*priority);
                        planned.policy = *policy;
                        if let Some((runtime_ns, period_ns)) = reservation {
                            planned.runtime_ns = *runtime_ns;
                            planned.deadline_ns = *period_ns;
                            planned.period_ns = *period_ns;
                        }
                        describe(&planned)
                    }
                    Some(read) => read(*tid).map(|a| describe(&a))?,
                };
                Some(Raised {
                    tid: *tid,
                    name: name.clone(),
                    scheduling,
                })
            }
            _ => None,
        })
        .collect()
}

/// Puts back the scheduling journaled as `previous` (see
/// [`read_previous`]), unless the thread exited or its id now names a
/// thread started after `at`.
pub(in crate::shield) fn undo(
    sys: &Sys,
    tid: i32,
    name: &str,
    previous: Option<&str>,
    at: Option<u64>,
    out: &mut Undone,
) {
    let Some(previous) = previous.and_then(|p| serde_json::from_str::<SchedAttr>(p).ok()) else {
        out.failed.push(Refusal {
            target: format!("task {tid} ({name})"),
            reason: "its scheduling before the change was not recorded".into(),
        });
        return;
    };
    match sys.sched_attr(tid) {
        Ok(now) if reads_as(&now, previous.policy, previous.priority) => {
            out.unchanged += 1;
            return;
        }
        Err(e) if e.kind == ErrorKind::NotFound => {
            out.exited += 1;
            return;
        }
        _ => {}
    }
    if crate::sys::procfs::recycled(sys, tid, at) {
        out.recycled.push(tid);
        return;
    }
    let back = sys
        .set_sched_attr(tid, &previous)
        .map_err(|e| e.errno_name())
        .and_then(|()| match sys.sched_attr(tid) {
            Ok(now) if reads_as(&now, previous.policy, previous.priority) => Ok(()),
            Ok(now) => Err(format!("reads back {}", describe(&now))),
            Err(e) => Err(e.errno_name()),
        });
    match back {
        Ok(()) => out.restored += 1,
        Err(reason) => out.failed.push(Refusal {
            target: format!("task {tid} ({name})"),
            reason: format!("could not restore {}: {reason}", describe(&previous)),
        }),
    }
}

/// What `on` says of the kernel threads it raised, as their scheduling
/// reads back (planned, for a dry run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// The threads raised.
    pub raised: Vec<Raised>,
}

/// What `status` says of the shielded CPUs' kernel threads on PREEMPT_RT.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// Per shielded CPU, what keeps RCU going beside the user's real-time
    /// tasks (its `rcuc/N`, or the boot half offloading it).
    pub rcu: Vec<RcuCpu>,
}

/// The highest real-time priority of the user's tasks inside the shield on
/// each CPU, from the threads of `snap` (their statistics read).
fn highest_task_priority(sys: &Sys, snap: &Snapshot) -> impl Fn(u32) -> Option<u32> {
    let tasks: Vec<(CpuSet, u32)> = (snap.threads.iter())
        .filter(|t| t.stat_read && !t.is_kthread() && in_shield_cgroup(&t.cgroup))
        .filter_map(|t| {
            let attr = sys.sched_attr(t.tid).ok()?;
            attr.is_realtime()
                .then(|| (t.cpus_allowed.clone(), attr.priority))
        })
        .collect();
    move |cpu| {
        (tasks.iter())
            .filter(|(cpus, _)| cpus.contains(cpu))
            .map(|(_, priority)| *priority)
            .max()
    }
}

/// What keeps RCU going on one shielded CPU, for people.
fn rcu_line(c: &RcuCpu) -> Line {
    let rcuc = c.rcuc.as_deref().unwrap_or("no rcuc thread");
    let task = (c.task_priority)
        .map(|p| format!(", real-time task at {p}"))
        .unwrap_or_default();
    let text = if c.offloaded {
        format!(
            "offloaded at boot (nohz_full=, rcu_nocbs=); rcuc/{} {rcuc}{task}",
            c.cpu
        )
    } else if c.starves {
        let p = c.task_priority.unwrap_or(0);
        format!(
            "rcuc/{} {rcuc} BELOW the real-time task at {p}: RCU stalls if it never sleeps, unless the guard boosts it; 'cpushield run --fifo' raises it, or 'cpushield on --kthreads-above {}'",
            c.cpu,
            p.min(MAX_ABOVE)
        )
    } else {
        format!("rcuc/{} {rcuc}{task}", c.cpu)
    };
    Line::new(format!("RCU on CPU {}", c.cpu), text)
}

/// The shielded CPUs' kernel threads raised to real-time priority, as a
/// component of the shield.
pub(in crate::shield) struct Part;

impl Component for Part {
    fn owner(&self) -> Owner {
        OWNER
    }

    fn check(&self, _: &Planning, _: &mut Draft) -> Result<(), PlanError> {
        Ok(())
    }

    fn plan(&self, cx: &Planning, d: &mut Draft) -> Result<(), PlanError> {
        let options: Options = cx.req.declared().unwrap_or_default();
        let mut steps = match options.kthreads_above {
            Some(above) => plan(&cx.snap.threads, cx.shield, above, &irqs_bound(&d.plan)),
            None => Vec::new(),
        };
        let (irqs, threads) = (&cx.snap.irqs, &cx.snap.threads);
        irq_priority::plan(&options.irq_priority, irqs, threads, &mut steps)?;
        d.add(Phase::Tuning, steps);
        Ok(())
    }

    fn change(&self, cx: &InPlace, mine: Vec<(Phase, Step)>, out: &mut Changing) {
        for (slot, step) in mine {
            match &step.action {
                Action::SetScheduler {
                    tid,
                    policy,
                    priority,
                    reservation: None,
                    ..
                } if in_place(&cx.read, *tid, *policy, *priority) => {}
                _ => out.unless_held(cx, slot, step),
            }
        }
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

    fn readies_realtime(&self) -> Option<&dyn ReadiesRealtime> {
        Some(self)
    }
}

impl Undoes for Part {
    fn make(&self, sys: &Sys, action: &Action) -> Option<Result<(), ApplyError>> {
        let Action::SetScheduler {
            tid,
            policy,
            priority,
            reservation,
            ..
        } = action
        else {
            return None;
        };
        Some(set(sys, *tid, (*policy, *priority), *reservation))
    }

    fn previous(&self, sys: &Sys, action: &Action) -> Option<String> {
        match action {
            Action::SetScheduler { tid, .. } => read_previous(sys, *tid),
            _ => None,
        }
    }

    fn undo(&self, sys: &Sys, entry: &Entry, out: &mut Undone) -> bool {
        let Action::SetScheduler { tid, name, .. } = &entry.action else {
            return false;
        };
        undo(sys, *tid, name, entry.previous.as_deref(), entry.at, out);
        true
    }

    /// Kernel threads raised above the user's task stay until everything
    /// else is back: removing the cgroups waits for RCU grace periods,
    /// which on PREEMPT_RT need the shielded CPUs' `rcuc/N` to run.
    fn undone_last(&self, action: &Action) -> bool {
        matches!(action, Action::SetScheduler { .. })
    }
}

impl Looks for Part {
    /// On PREEMPT_RT: per shielded CPU, what keeps RCU going beside the
    /// user's real-time tasks.
    fn status(&self, cx: &Looking) -> Option<PartReport> {
        if !crate::guard::kernel::running_preempt_rt(cx.sys) {
            return None;
        }
        let highest = highest_task_priority(cx.sys, cx.snap);
        let rcu = rcu_on(cx.sys, &cx.state.shield, &highest);
        Some(PartReport {
            component: OWNER.name().into(),
            lines: rcu.iter().map(rcu_line).collect(),
            data: serde_json::to_value(Status { rcu }).unwrap_or_default(),
            findings: Vec::new(),
            metrics: Vec::new(),
            details: Vec::new(),
        })
    }
}

impl Reports for Part {
    /// The threads raised, as their scheduling reads back (planned, for a
    /// dry run).
    fn outcome(&self, cx: &Reporting) -> Option<PartReport> {
        let (sys, plan, dry_run) = (cx.sys, cx.plan, cx.dry_run);
        let read = |tid| sys.sched_attr(tid).ok();
        let raised = report(&plan.steps, (!dry_run).then_some(&read as _));
        if raised.is_empty() {
            return None;
        }
        let label = match dry_run {
            true => "kernel threads to raise",
            false => "kernel threads raised",
        };
        let text = (raised.iter())
            .map(|k| format!("{} {}", crate::escape::terminal(&k.name), k.scheduling))
            .collect::<Vec<_>>()
            .join(", ");
        Some(PartReport {
            component: OWNER.name().into(),
            lines: vec![Line::new(label, text)],
            data: serde_json::to_value(Outcome { raised }).unwrap_or_default(),
            findings: Vec::new(),
            metrics: Vec::new(),
            details: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kthread(tid: i32, name: &str, cpus: &str) -> Thread {
        Thread {
            pid: tid,
            tid,
            name: name.into(),
            flags: procfs::PF_KTHREAD,
            cpus_allowed: CpuSet::parse_list(cpus).unwrap(),
            cgroup: "/".into(),
            stat_read: true,
        }
    }

    /// (thread, priority) of each planned SetScheduler step.
    fn raised(steps: &[Step]) -> Vec<(i32, u32)> {
        steps
            .iter()
            .map(|s| match &s.action {
                Action::SetScheduler { tid, priority, .. } => (*tid, *priority),
                a => panic!("{a:?}"),
            })
            .collect()
    }

    #[test]
    fn each_kind_goes_above_the_users_priority_in_tuneds_order() {
        assert_eq!(priority("ksoftirqd", 80), Some(81));
        assert_eq!(priority("ktimers", 80), Some(82));
        assert_eq!(priority("rcuc", 80), Some(83));
        assert_eq!(priority("kworker", 80), None);
        assert_eq!(priority("rcuc", MAX_ABOVE), Some(HIGHEST));
    }

    #[test]
    fn only_the_shielded_cpus_own_softirq_timer_and_rcu_threads_are_raised() {
        let mut user = kthread(50, "ktimers/3", "3");
        user.flags = 0;
        let threads = [
            kthread(10, "ksoftirqd/3", "3"),
            kthread(11, "ktimers/3", "3"),
            kthread(12, "rcuc/3", "3"),
            kthread(13, "ktimers/1", "1"),
            kthread(14, "kworker/3:1", "3"),
            kthread(15, "rcuc/2", "2-3"),
            user,
        ];
        let steps = plan(&threads, &CpuSet::parse_list("2-3").unwrap(), 80, &[]);
        let got = raised(&steps);
        assert_eq!(got, vec![(10, 81), (11, 82), (12, 83)]);
        assert!(steps.iter().all(|s| !s.fatal));
    }

    #[test]
    fn the_threads_of_the_irqs_bound_to_the_shield_go_above_the_task() {
        assert_eq!(irq_of_thread("irq/45-eth0-TxRx-0"), Some(45));
        assert_eq!(irq_of_thread("irq/45-s-eth0"), Some(45));
        assert_eq!(irq_of_thread("irq_work/3"), None);
        assert_eq!(irq_of_thread("ksoftirqd/3"), None);
        let threads = [
            // Bound by --irq 45: still on every CPU before the shield moves it.
            kthread(20, "irq/45-eth0", "0-3"),
            kthread(21, "irq/45-s-eth0", "0-3"),
            // Not bound: it leaves the shield with its IRQ.
            kthread(22, "irq/9-acpi", "3"),
            kthread(10, "ksoftirqd/3", "3"),
        ];
        let steps = plan(&threads, &CpuSet::parse_list("2-3").unwrap(), 80, &[45]);
        let got = raised(&steps);
        assert_eq!(got, vec![(20, 81), (21, 81), (10, 81)]);
    }
}
