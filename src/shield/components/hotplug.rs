//! CPU hotplug: each newly shielded CPU taken offline and back once the
//! cgroups took its sched domain. A CPU that was idle, its tick stopped,
//! when its domain went stays in the kernel's idle-balance mask
//! (`nohz.idle_cpus_mask`), and the busy CPUs kick it to balance for them
//! up to once a tick; going offline is what takes it out (docs/shield.md,
//! "Idle-balance kicks"). It also sends elsewhere what the kernel placed
//! on the CPU by CPU (timers, per-CPU work). Done wherever a CPU can go
//! offline; `--hotplug-restart` makes it required (refused up front where
//! a CPU cannot, rolled back where one refuses).

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;
use crate::finding::{Finding, Severity};
use crate::shield::change::{Action, Check, Owner, Step, Undo};
use crate::shield::component::Looks;
use crate::shield::component::{Changing, Component, Draft, InPlace, Looking, Phase, Planning};
use crate::shield::error::ShieldError;
use crate::shield::holds::Holds;
use crate::shield::journal::State;
use crate::shield::note::OwnNote;
use crate::shield::parts::{Line, Metric, OwnFacts, PartReport};
use crate::shield::plan_error::PlanError;
use crate::shield::request::Request;
use crate::shield::snapshot::Snapshot;
use crate::sys::{kicks, procfs, Sys};
use std::collections::HashSet;

/// How long `status` counts the kicks on the shielded CPUs.
const KICKS_WINDOW: std::time::Duration = std::time::Duration::from_millis(250);

/// The shielded CPUs' SCHED softirq and function-call IPI counters, for
/// Prometheus to take the rate of.
fn kick_metrics(counts: &kicks::Counts) -> Vec<Metric> {
    let samples = |pick: fn(&(u64, u64)) -> u64| {
        (counts.per_cpu.iter())
            .map(|(cpu, c)| (vec![("cpu", cpu.to_string())], pick(c) as f64))
            .collect()
    };
    vec![
        Metric {
            name: "sched_softirqs_total",
            kind: "counter",
            help: "SCHED softirqs served by each shielded CPU without a sched domain: each is an idle-balance kick.",
            samples: samples(|c| c.0),
        },
        Metric {
            name: "function_call_ipis_total",
            kind: "counter",
            help: "Function-call IPIs served by each shielded CPU without a sched domain (an idle-balance kick is one).",
            samples: samples(|c| c.1),
        },
    ]
}

/// CPU hotplug's own notes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HotplugNote {
    /// The CPUs go offline and online again once the cgroups stand.
    HotplugRestart {
        /// The CPUs restarted.
        cpus: CpuSet,
    },
    /// Shielded CPUs that do not go offline, why, and what that leaves.
    HotplugLeft {
        /// The CPUs left as they are.
        cpus: CpuSet,
        /// Why they cannot go offline.
        reason: String,
    },
    /// A Kubernetes node's shielded CPUs, which no restart takes out of
    /// the scheduler's domains.
    HotplugKubernetes {
        /// The shielded CPUs.
        cpus: CpuSet,
    },
}

impl OwnNote for HotplugNote {
    fn owner(&self) -> Owner {
        OWNER
    }

    fn text(&self) -> String {
        match self {
            HotplugNote::HotplugRestart { cpus } => format!(
                "CPUs {cpus} are taken offline and online again once the shield's cgroups stand: that takes them out of the kernel's idle-balance mask (docs/shield.md, 'Idle-balance kicks')"
            ),
            HotplugNote::HotplugLeft { cpus, reason } => format!(
                "CPUs {cpus} stay in the kernel's idle-balance mask ({reason}): while idle they are woken up to once a tick to balance for the busy CPUs; boot with nohz_full={cpus} (cpushield boot-args), or shield CPUs that can go offline"
            ),
            HotplugNote::HotplugKubernetes { cpus } => format!(
                "CPUs {cpus} stay in the scheduler's domains on a Kubernetes node (kubelet's shared pool balances on those no Guaranteed pod holds) and are not taken offline under its pods: while idle they are woken up to once a tick to balance for the busy CPUs; boot with nohz_full={cpus} (cpushield boot-args)"
            ),
        }
    }
}

/// This component, as it names itself in the journal and in reports.
pub const OWNER: Owner = Owner("hotplug");

/// Its option, as `on` and the config file take it.
#[derive(clap::Args, Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[group(skip)]
pub struct Options {
    /// Require what `on` does wherever it can: each shielded CPU offline
    /// and online again once the partition stands, which takes it out of
    /// the kernel's idle-balance mask and pushes per-CPU timers off it.
    /// With this flag a CPU that cannot go offline (CPU 0 on most x86
    /// machines, the only CPU of a pinned task) is refused up front, and
    /// one that refuses rolls the shield back.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "crate::shield::options::is_false")]
    pub hotplug_restart: bool,
}

impl crate::shield::options::Declared for Options {
    const EXAMPLES: &'static [(&'static str, &'static str)] = &[("hotplug_restart", "true")];
}

/// Whether `req` requires every shielded CPU's restart.
fn required(req: &Request) -> bool {
    req.declared::<Options>()
        .unwrap_or_default()
        .hotplug_restart
}

/// Its name among the facts components read for themselves.
const NAME: &str = "hotplug";

/// What it reads for `--hotplug-restart`: which of the requested CPUs have
/// a hotplug switch, and which of those this process may write.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(in crate::shield) struct Facts {
    /// CPUs with a `cpuN/online` file.
    pub files: CpuSet,
    /// Of those, the ones whose file may be written.
    pub writable: CpuSet,
}

/// The shielded CPUs the kernel has offline, read back for `status`:
/// someone took them offline after `on` (the shield's own
/// `--hotplug-restart` brings each back before `on` ends).
#[derive(Default)]
pub(in crate::shield) struct OnlineHold {
    /// Shielded CPUs not in `/sys/devices/system/cpu/online`.
    offline: CpuSet,
}

/// The CPU hotplug switch of `cpu`: write 0 to take it offline, 1 to bring it back.
pub fn cpu_online_file(cpu: u32) -> String {
    format!("sys/devices/system/cpu/cpu{cpu}/online")
}

/// Which of `cpus` have a hotplug switch, and which of those this
/// process may write: CPU 0 often has none.
pub(in crate::shield) fn read(sys: &Sys, cpus: &CpuSet) -> Facts {
    let mut files = CpuSet::new();
    let mut writable = CpuSet::new();
    for cpu in cpus.iter() {
        let file = cpu_online_file(cpu);
        if sys.exists(&file) {
            files.insert(cpu);
            if sys.mode_allows_write(&file) {
                writable.insert(cpu);
            }
        }
    }
    Facts { files, writable }
}

/// Which of `shield`'s CPUs are not `online`.
pub(in crate::shield) fn read_hold(online: &CpuSet, shield: &CpuSet) -> OnlineHold {
    OnlineHold {
        offline: shield.difference(online),
    }
}

impl Holds for OnlineHold {
    /// `offline`: a shielded CPU the kernel has offline. What the shield
    /// placed there is gone with it (the driver of a multi-queue device
    /// may spread its IRQs anew), and a real-time task bound to it alone
    /// no longer runs.
    fn lost(&self, _state: &State, repair: &str) -> Vec<Finding> {
        if self.offline.is_empty() {
            return Vec::new();
        }
        let online = self
            .offline
            .iter()
            .map(|c| format!("echo 1 > /{}", cpu_online_file(c)))
            .collect::<Vec<_>>()
            .join("; ");
        vec![Finding::new(
            "offline",
            Severity::Bad,
            100,
            format!(
                "CPU {} of the shield is offline: the kernel took it out of the partition, and tasks bound to it alone do not run",
                self.offline
            ),
            format!("bring it online ({online}), then {repair}"),
        )]
    }
}

/// Which of the shield's CPUs go offline and online again, and those
/// left as they are, with why.
#[derive(Debug, Default, PartialEq)]
pub(in crate::shield) struct Restart {
    /// The CPUs to take offline and back.
    pub cpus: CpuSet,
    /// CPUs that cannot go offline, each group with why.
    pub left: Vec<(CpuSet, String)>,
}

/// The CPUs of `shield` to restart: each with a writable hotplug switch,
/// but those isolated at boot (no sched domain since boot: never in the
/// mask) and, unless `force` moves such tasks off, the only CPU a user
/// task may run on (hotplug would break its affinity for good).
pub(in crate::shield) fn choose(
    (facts, snap): (&Facts, &Snapshot),
    shield: &CpuSet,
    force: bool,
) -> Restart {
    let wanted = shield.difference(&snap.boot_isolated);
    let mut left = Vec::new();
    if snap.owners.kubernetes.is_some() {
        // No partition there: the CPUs stay in the scheduler's domains
        // (kubelet's shared pool balances on those no pod holds), so a
        // restart takes them out of no idle-balance mask, and it would
        // take pods' containers' CPUs from under them (the plan says so).
        return Restart {
            cpus: CpuSet::default(),
            left,
        };
    }
    let missing = wanted.difference(&facts.files);
    if !missing.is_empty() {
        left.push((
            missing,
            "no hotplug switch /sys/devices/system/cpu/cpuN/online".to_string(),
        ));
    }
    let readonly = wanted
        .intersection(&facts.files)
        .difference(&facts.writable);
    if !readonly.is_empty() {
        left.push((readonly, "their online file is read-only".to_string()));
    }
    // A user task inside the shield with CPUs of its own there: kept by
    // the tasks' plan (on v2 only a process whose every thread asked for
    // shielded CPUs alone; the others move off before the hotplug), or
    // already in the shield's cgroup (a change in place). A CPU of the
    // partition going offline and back gives such a task all the
    // partition's CPUs (6.1 resets the affinity of a cpuset's tasks), and
    // its own CPU going offline breaks its affinity for good: the shield's
    // CPUs are then left as they are.
    let v2 = matches!(snap.cgroup, crate::shield::snapshot::CgroupSetup::V2 { .. });
    let whole_inside = |pid: i32| {
        (snap.threads.iter())
            .filter(|o| o.pid == pid)
            .all(|o| o.cpus_allowed.is_subset(shield))
    };
    let pinned = |t: &crate::sys::procfs::Thread| {
        let own = &t.cpus_allowed;
        let narrower = own.is_subset(shield) && (own != shield || shield.len() == 1);
        let inside = crate::shield::snapshot::in_shield_cgroup(&t.cgroup);
        !t.is_kthread() && narrower && (inside || (!force && (!v2 || whole_inside(t.pid))))
    };
    let mut tasks: Vec<String> = (snap.threads.iter())
        .filter(|t| pinned(t))
        .map(|t| match t.name.is_empty() {
            true => t.tid.to_string(),
            false => format!("{} ({})", t.tid, t.name),
        })
        .collect();
    let able = wanted.intersection(&facts.writable);
    if !tasks.is_empty() && !able.is_empty() {
        tasks.sort();
        tasks.dedup();
        let named = crate::input::brief_to(&tasks.join(", "), 80);
        left.push((
            able,
            format!("task {named} keeps CPUs of its own on the shield, which hotplug would take from it; --force moves it off first"),
        ));
        return Restart {
            cpus: CpuSet::new(),
            left,
        };
    }
    let cpus = able;
    Restart { cpus, left }
}

/// Refuses `--hotplug-restart` when a shielded CPU cannot be taken offline:
/// no `cpuN/online` file (x86 CPU 0, kernels without CPU hotplug), or one
/// that may not be written.
pub(in crate::shield) fn check(
    (files, writable): (&CpuSet, &CpuSet),
    shield: &CpuSet,
) -> Result<(), PlanError> {
    let missing = shield.difference(files);
    let readonly = shield.intersection(files).difference(writable);
    let mut detail = Vec::new();
    if !missing.is_empty() {
        detail.push(format!(
            "CPUs {missing} cannot be taken offline (no {})",
            missing
                .iter()
                .map(|c| format!("/{}", cpu_online_file(c)))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !readonly.is_empty() {
        detail.push(format!(
            "CPUs {readonly} have a read-only online file ({})",
            readonly
                .iter()
                .map(|c| format!("/{}", cpu_online_file(c)))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if detail.is_empty() {
        Ok(())
    } else {
        Err(PlanError::Part {
            option: "--hotplug-restart",
            message: format!(
                "--hotplug-restart: {}; shield only CPUs that can go offline (writable /sys/devices/system/cpu/cpuN/online) or leave out --hotplug-restart",
                crate::input::brief_to(&detail.join("; "), 160)
            ),
        })
    }
}

/// Offline then online again, for each CPU in turn. Undoing an offline is
/// writing 1: after a crash between the two writes, `off` brings the CPU
/// back. When `required` (`--hotplug-restart`) both are fatal: a CPU that
/// refuses to go offline (EBUSY) or to come back aborts the shield and
/// rolls it back; otherwise a refusal is reported and the shield stands.
pub(in crate::shield) fn steps(cpus: &CpuSet, required: bool) -> Vec<Step> {
    let step = if required {
        Step::fatal
    } else {
        Step::optional
    };
    let mut out = Vec::new();
    for cpu in cpus.iter() {
        let path = cpu_online_file(cpu);
        out.push(step(
            OWNER,
            Action::Write {
                path: path.clone(),
                value: "0".into(),
                check: Check::Text,
                undo: Undo::Value("1".into()),
            },
        ));
        out.push(step(
            OWNER,
            Action::Write {
                path,
                value: "1".into(),
                check: Check::Text,
                undo: Undo::Nothing,
            },
        ));
    }
    out
}

/// The shielded CPUs taken offline and online again, as a component of
/// the shield.
pub(in crate::shield) struct Part;

impl Component for Part {
    fn owner(&self) -> Owner {
        OWNER
    }

    /// Each CPU's hotplug switch ([`cpu_online_file`]).
    fn reaches(&self, reach: &mut crate::shield::reach::Reach) {
        reach.files.push("sys/devices/system/cpu/cpu*/online".into());
    }

    fn read(&self, sys: &Sys, req: &Request, facts: &mut OwnFacts) -> Result<(), ShieldError> {
        facts.put(NAME, &read(sys, &req.cpus));
        Ok(())
    }

    fn check(&self, cx: &Planning, _: &mut Draft) -> Result<(), PlanError> {
        if !required(cx.req) {
            return Ok(());
        }
        let facts: Facts = cx.snap.parts.get(NAME).unwrap_or_default();
        check((&facts.files, &facts.writable), cx.shield)?;
        let restart = choose((&facts, cx.snap), cx.shield, cx.req.force);
        match restart.left.first() {
            None => Ok(()),
            Some((cpus, why)) => Err(PlanError::Part {
                option: "--hotplug-restart",
                message: format!(
                    "--hotplug-restart: CPUs {cpus} cannot go offline: {why}; leave out --hotplug-restart (the shield then restarts only the CPUs that can), or add --force to move such tasks off"
                ),
            }),
        }
    }

    fn plan(&self, cx: &Planning, d: &mut Draft) -> Result<(), PlanError> {
        let facts: Facts = cx.snap.parts.get(NAME).unwrap_or_default();
        let restart = choose((&facts, cx.snap), cx.shield, cx.req.force);
        let required = required(cx.req);
        d.add(Phase::Shield, steps(&restart.cpus, required));
        if !restart.cpus.is_empty() {
            let cpus = restart.cpus;
            d.plan
                .notes
                .push(HotplugNote::HotplugRestart { cpus }.note());
        }
        if cx.snap.owners.kubernetes.is_some() {
            let cpus = cx.shield.difference(&cx.snap.boot_isolated);
            if !cpus.is_empty() {
                d.plan.notes.push(HotplugNote::HotplugKubernetes { cpus }.note());
            }
        }
        for (cpus, reason) in restart.left {
            d.plan
                .notes
                .push(HotplugNote::HotplugLeft { cpus, reason }.note());
        }
        Ok(())
    }

    /// The old shield's CPUs went offline and online already. The new
    /// ones go offline and back whatever the machine holds now: both
    /// writes, though the second writes what the file reads before.
    fn change(&self, cx: &InPlace, mine: Vec<(Phase, Step)>, out: &mut Changing) {
        let old: HashSet<String> = cx.state.shield.iter().map(cpu_online_file).collect();
        for (slot, step) in mine {
            match &step.action {
                Action::Write { path, .. } if old.contains(path) => {}
                _ => out.add(slot, [step]),
            }
        }
    }

    fn looks(&self) -> Option<&dyn Looks> {
        Some(self)
    }
}

impl Looks for Part {
    /// The shielded CPUs someone took offline since `on`, when any; and
    /// the idle-balance kicks that reach those without a sched domain
    /// (sampled for [`KICKS_WINDOW`]: a line when above the bar, the rates
    /// in the data, the counters as metrics; `audit` makes it a finding).
    fn status(&self, cx: &Looking) -> Option<PartReport> {
        let (sys, state, repair) = (cx.sys, cx.state, cx.repair);
        let online = procfs::online_cpus(sys).ok()?;
        let hold = read_hold(&online, &state.shield);
        let findings = hold.lost(state, repair);
        let up = state.shield.intersection(&online);
        let no_domain = kicks::read_without_domain(sys, &up, &up);
        let sampled = match cx.counters {
            Some(start) => kicks::sample_since(sys, start, &no_domain, KICKS_WINDOW),
            None => kicks::sample(sys, &no_domain, KICKS_WINDOW),
        };
        let mut lines = Line::under(NAME, findings.iter().map(|f| f.reason.clone()).collect());
        let mut metrics = Vec::new();
        if let Some((rates, counts)) = &sampled {
            // A line, not a finding: the shield holds (a CPU that cannot
            // go offline stays kicked, as on said); audit judges it.
            let kicked = kicks::finding(rates, KICKS_WINDOW.as_secs_f64());
            if kicked.severity != Severity::Ok {
                lines.push(Line::new("idle-balance kicks", kicked.reason.clone()));
            }
            metrics = kick_metrics(counts);
        }
        let kicked = sampled.map(|(rates, _)| rates).unwrap_or_default();
        (!findings.is_empty() || !metrics.is_empty()).then(|| PartReport {
            component: NAME.into(),
            lines,
            data: serde_json::json!({ "offline": hold.offline.to_string(), "kicks": kicked }),
            findings,
            metrics,
            details: Vec::new(),
        })
    }
}
