//! What the plugin changes for the containers it serves, and how every
//! change is undone, crash or not: a reconciliation. From the containers
//! that run and what each asks ([`Wants`]), the value every file should
//! have is worked out afresh at each event; a file's value from before the
//! plugin's first change is written to the plugin's journal ([`JOURNAL`],
//! durably) before the file is, and a file no container wants any more
//! gets that value back, after which its record goes. So whatever was
//! interrupted, the next reconciliation (a restart of the plugin, which
//! the runtime's synchronisation follows, or `cpushield nri --undo`) ends
//! where an uninterrupted one would have.
//!
//! The files: each IRQ's `smp_affinity_list` and `default_smp_affinity`
//! without the CPUs of containers asking `irq-load-balancing.crio.io:
//! disable` (an IRQ that may run only on those CPUs goes to every other
//! online CPU);
//! `power/pm_qos_resume_latency_us` of their CPUs for
//! `cpu-c-states.crio.io` (`enable` 0, `disable` `n/a`, `max_latency:N`
//! N: the idle governor then picks no state slower to leave); and
//! `cpufreq/scaling_governor` for `cpu-freq-governor.crio.io` (a governor
//! the CPU does not offer is left, and said). irqbalance, where it runs
//! with its control socket, is told to ban those CPUs too, and to go back
//! when none is asked for.
//!
//! Beside a shield (`cpushield on`), the shield owns the IRQs of its CPUs:
//! the plugin asks nothing of IRQs for CPUs the shield holds (it keeps
//! them off already), never places an IRQ on them, and keeps the value it
//! recorded for an IRQ file, unwritten, while the shield lives, so that
//! the shield's `off` gives back what the shield found and the plugin,
//! once the shield is gone, what it found: the machine's own value at the
//! end, whichever of the two came first. While the plugin runs it
//! reconciles every few seconds, so what `off` gave back onto a running
//! pod's CPUs is moved off again.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::pods::{CStates, Wants};
use crate::cpulist::CpuSet;
use crate::sys::{irq, Sys, SysError};

/// The plugin's journal, relative to the root.
pub const JOURNAL: &str = "run/cpushield/nri.json";
/// The journal's format; a later version reads every earlier one.
pub const JOURNAL_VERSION: u32 = 1;

/// The plugin's journal: the containers it serves and the value of each
/// file it changed from before its first change.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Journal {
    /// [`JOURNAL_VERSION`].
    pub version: u32,
    /// Each served container's id and what it asks.
    pub containers: BTreeMap<String, Wants>,
    /// Each changed file (relative to the root) and its value before.
    pub before: BTreeMap<String, String>,
    /// The irqbalance process told a ban, and the ban it had before
    /// (`None`: its environment's, given back with `settings cpus NULL`).
    pub irqbalance: Option<(i32, Option<CpuSet>)>,
}

/// What one reconciliation did, for the log.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Done {
    /// Files written: path and value.
    pub written: Vec<(String, String)>,
    /// Files given their value from before back.
    pub restored: Vec<String>,
    /// What could not be done, and why.
    pub said: Vec<String>,
}

/// A journal problem.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// Reading or writing it.
    #[error(transparent)]
    Sys(#[from] SysError),
    /// It does not parse.
    #[error("/{JOURNAL} is not a journal of cpushield nri ({0}); it was left as it is")]
    Damaged(String),
}

/// Reads the journal; an empty one where there is none.
pub fn read(sys: &Sys) -> Result<Journal, JournalError> {
    match sys.read(JOURNAL) {
        Ok(text) => {
            let j: Journal =
                serde_json::from_str(&text).map_err(|e| JournalError::Damaged(e.to_string()))?;
            if j.version > JOURNAL_VERSION {
                return Err(JournalError::Damaged(format!(
                    "version {} is newer than this cpushield's {JOURNAL_VERSION}",
                    j.version
                )));
            }
            Ok(j)
        }
        Err(e) if e.kind == crate::sys::ErrorKind::NotFound => Ok(Journal {
            version: JOURNAL_VERSION,
            ..Journal::default()
        }),
        Err(e) => Err(e.into()),
    }
}

/// Writes the journal durably; removes it when it holds nothing.
fn write(sys: &Sys, j: &Journal) -> Result<(), SysError> {
    if j.containers.is_empty() && j.before.is_empty() && j.irqbalance.is_none() {
        return match sys.remove_config(JOURNAL, false) {
            Err(e) if e.kind == crate::sys::ErrorKind::NotFound => Ok(()),
            other => other,
        };
    }
    sys.run_dir()?;
    let text = serde_json::to_string_pretty(j).expect("the journal serialises");
    sys.write_config(JOURNAL, &text, false)
}

/// The value each file should have for `containers`, read against the
/// files' values from before (`before`) or now, beside a shield of CPUs
/// `shield` (empty: none); with what cannot be done.
fn wanted(
    sys: &Sys,
    containers: &BTreeMap<String, Wants>,
    before: &BTreeMap<String, String>,
    shield: &CpuSet,
) -> (BTreeMap<String, String>, Vec<String>) {
    let mut out = BTreeMap::new();
    let mut said = Vec::new();
    let original = |path: &str| (before.get(path).cloned()).or_else(|| sys.read_trimmed(path).ok());
    let off = irqs_off(containers).difference(shield);
    // An IRQ that may run only on CPUs asked free goes to every other
    // online CPU, as the shield moves such IRQs to its housekeeping CPUs;
    // never onto a shield's CPUs.
    let away = off.union(shield);
    let others = (crate::sys::procfs::online_cpus(sys).unwrap_or_default()).difference(&away);
    if !off.is_empty() {
        for q in irq::read(sys).unwrap_or_default() {
            let path = irq::irq_affinity_file(q.irq);
            let Some(was) = original(&path).and_then(|v| CpuSet::parse_list(&v).ok()) else {
                continue;
            };
            let left = was.away_from(&away, &others);
            if left.is_empty() {
                said.push(format!(
                    "IRQ {} ({}) may run only on CPUs {was}, and no online CPU is left to it: left there",
                    q.irq, q.name
                ));
            } else if left != was {
                out.insert(path, left.to_string());
            }
        }
        let path = irq::DEFAULT_IRQ_AFFINITY;
        let present = crate::sys::procfs::present_cpus(sys).unwrap_or_default();
        let bits = present.last().map_or(1, |c| c + 1);
        if let Some(was) = original(path).and_then(|v| CpuSet::parse_mask(&v).ok()) {
            let left = was.difference(&away);
            if !left.is_empty() && left != was {
                out.insert(path.to_string(), left.to_mask(bits));
            }
        }
    }
    for w in containers.values() {
        for cpu in w.cpus.iter() {
            if let Some(c) = &w.c_states {
                let path =
                    format!("sys/devices/system/cpu/cpu{cpu}/power/pm_qos_resume_latency_us");
                if sys.exists(&path) {
                    out.insert(path, latency(c));
                } else {
                    said.push(format!(
                        "{}: CPU {cpu} has no /{path}: its idle states left",
                        w.who
                    ));
                }
            }
            if let Some(g) = &w.governor {
                let dir = format!("sys/devices/system/cpu/cpu{cpu}/cpufreq");
                let offered = sys
                    .read(&format!("{dir}/scaling_available_governors"))
                    .unwrap_or_default();
                if offered.split_whitespace().any(|o| o == g) {
                    out.insert(format!("{dir}/scaling_governor"), g.clone());
                } else {
                    said.push(format!(
                        "{}: CPU {cpu} does not offer governor {g} (it offers: {}): its governor left",
                        w.who,
                        offered.trim()
                    ));
                }
            }
        }
    }
    (out, said)
}

/// The CPUs asked free of IRQs.
fn irqs_off(containers: &BTreeMap<String, Wants>) -> CpuSet {
    (containers.values())
        .filter(|w| w.irqs_off)
        .fold(CpuSet::new(), |acc, w| acc.union(&w.cpus))
}

/// `pm_qos_resume_latency_us`'s value for `c`, as CRI-O writes it.
fn latency(c: &CStates) -> String {
    match c {
        CStates::Enable => "0".into(),
        CStates::Disable => "n/a".into(),
        CStates::MaxLatency(us) => us.to_string(),
    }
}

/// Brings the machine to what `containers` ask (see the module), beside a
/// shield of CPUs `shield` (empty: none), the journal written before each
/// change. The journal's containers become `containers`.
pub fn reconcile(
    sys: &Sys,
    j: &mut Journal,
    containers: BTreeMap<String, Wants>,
    irqbalance: &dyn IrqbalanceBan,
    shield: &CpuSet,
) -> Result<Done, SysError> {
    let mut done = Done::default();
    j.version = JOURNAL_VERSION;
    j.containers = containers;
    let (want, said) = wanted(sys, &j.containers, &j.before, shield);
    done.said = said;
    // Before-values first, all of them, in one durable write.
    let mut recorded = false;
    for path in want.keys() {
        if !j.before.contains_key(path) {
            if let Ok(now) = sys.read_trimmed(path) {
                j.before.insert(path.clone(), now);
                recorded = true;
            }
        }
    }
    if recorded {
        write(sys, j)?;
    }
    for (path, value) in &want {
        if !j.before.contains_key(path) || sys.read_trimmed(path).ok().as_deref() == Some(value) {
            continue;
        }
        match sys.write(path, value) {
            Ok(()) => done.written.push((path.clone(), value.clone())),
            Err(e) => done
                .said
                .push(format!("/{path}: {value} refused: {}", e.errno_name())),
        }
    }
    // An IRQ file's value from before waits, unwritten, while a shield
    // lives: the shield keeps the IRQ off its CPUs now, and gives back at
    // its off the value it found (this plugin's).
    let held_by_shield = |p: &str| {
        !shield.is_empty()
            && (irq::irq_of_affinity_file(p).is_some() || p == irq::DEFAULT_IRQ_AFFINITY)
    };
    let stale: Vec<String> = (j.before.keys())
        .filter(|p| !want.contains_key(*p) && !held_by_shield(p))
        .cloned()
        .collect();
    for path in stale {
        let was = j.before[&path].clone();
        if sys.read_trimmed(&path).ok().as_deref() != Some(was.as_str()) {
            match sys.write(&path, &was) {
                Ok(()) => done.restored.push(path.clone()),
                // gone (an IRQ whose device went): nothing to give back
                Err(e) if e.kind == crate::sys::ErrorKind::NotFound => {}
                Err(e) => {
                    done.said.push(format!(
                        "/{path}: could not give back {was}: {}",
                        e.errno_name()
                    ));
                    continue;
                }
            }
        }
        j.before.remove(&path);
    }
    ban(sys, j, &mut done, irqbalance, shield)?;
    write(sys, j)?;
    Ok(done)
}

/// irqbalance, as the plugin tells it a ban.
pub trait IrqbalanceBan {
    /// The running irqbalance with a control socket, and the CPUs its own
    /// settings (environment, command line) ban.
    fn running(&self) -> Option<(i32, CpuSet)>;
    /// Tells irqbalance `pid` to ban `cpus` (`None`: its environment's).
    fn tell(&self, pid: i32, cpus: Option<&CpuSet>) -> Result<(), String>;
    /// The CPUs irqbalance `pid` bans now, where it says (then a ban it
    /// has already is not told again: each telling makes it place every
    /// IRQ anew).
    fn banned_now(&self, _pid: i32) -> Option<CpuSet> {
        None
    }
}

/// Tells irqbalance the ban the containers ask for, or gives it back; the
/// ban it had before is journaled before it is told. While a shield of
/// CPUs `shield` lives the ban from before waits, untold, as the IRQ
/// files' values do: the shield banned its CPUs through the same socket,
/// and gives back at its off the ban it found (this plugin's).
fn ban(
    sys: &Sys,
    j: &mut Journal,
    done: &mut Done,
    irqbalance: &dyn IrqbalanceBan,
    shield: &CpuSet,
) -> Result<(), SysError> {
    let off = irqs_off(&j.containers);
    let running = irqbalance.running();
    if let Some((pid, before)) = j.irqbalance.clone() {
        let same = running.as_ref().is_some_and(|(p, _)| *p == pid);
        if !same {
            // that irqbalance is gone; one started since has no ban of ours
            j.irqbalance = None;
        } else if off.is_empty() && !shield.is_empty() {
            return Ok(());
        } else if off.is_empty() {
            match irqbalance.tell(pid, before.as_ref()) {
                Ok(()) => j.irqbalance = None,
                Err(e) => (done.said).push(format!(
                    "irqbalance {pid}: could not give its ban back: {e}"
                )),
            }
            return Ok(());
        }
    }
    let Some((pid, own)) = running else {
        return Ok(());
    };
    // a shield's ban, told through the same socket, stays
    let base = own.union(shield);
    if off.is_empty() || off.is_subset(&base) {
        return Ok(());
    }
    let want = base.union(&off);
    if j.irqbalance.is_none() {
        j.irqbalance = Some((pid, (!own.is_empty()).then_some(own)));
        write(sys, j)?;
    }
    if irqbalance.banned_now(pid).as_ref() == Some(&want) {
        return Ok(());
    }
    match irqbalance.tell(pid, Some(&want)) {
        Ok(()) => (done.written).push((format!("irqbalance {pid}"), format!("banned {want}"))),
        Err(e) => (done.said).push(format!("irqbalance {pid}: could not ban CPUs {want}: {e}")),
    }
    Ok(())
}
