//! The healer: while a shield lives, it repairs what the kernel itself
//! undoes of it, without a person.
//!
//! The kernel resets part of a shield on its own: a CPU that comes online
//! widens the per-node kernel threads (`kcompactd0`) to every CPU of the
//! node; a device added or a module loaded brings IRQs on every CPU; a
//! new unbound workqueue or kernel thread may land on the shielded CPUs.
//! The healer (`cpushield heal`, kept alive by systemd as
//! [`UNIT`] where systemd runs) listens to the kernel's uevents (a CPU
//! online, a device, a module, a workqueue added) and, where no event
//! exists, looks every [`PERIOD`] for IRQs and kernel threads that are new
//! and allowed on the shield. On either it makes, in its own process, the
//! repair `cpushield repair` makes: the same change in place that `on`
//! with the shield's own request makes (journaled like any change). It
//! counts each repair by its reason in [`STATE_FILE`], which `status` and
//! the metrics read.
//!
//! Drift that another program makes (an IRQ's affinity written, a knob
//! set back, a thread put on the shield) is not the kernel's: `status`
//! reports it, and the healer leaves it, unless the shield was made with
//! `--heal drift` (config `heal = "drift"`). Then it also reads the
//! shield back as `status` does every [`DRIFT_PERIOD`] and repairs what
//! `status` finds broken, the reason `drift`; the same drift come back
//! after its repair (a program that changes it back) waits twice as long
//! each time, up to [`DRIFT_BACKOFF_MAX`], rather than a fight. One
//! program's drift is repaired so with `--heal on` too: where CRI-O runs,
//! its high-performance hooks give a stopped pod's CPUs back to IRQs at
//! every annotated pod's stop ([`crate::crio`]), as predictably as the
//! kernel undoes a shield.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;
use crate::sys::procfs::{self, PF_KTHREAD, PF_NO_SETAFFINITY};
use crate::sys::{syscalls, Sys, SysError};

/// The healer's state, relative to the root.
pub const STATE_FILE: &str = "run/cpushield/heal.json";
/// The healer's transient unit on systemd hosts.
pub const UNIT: &str = "cpushield-heal.service";
/// The healer's process name.
pub const PROCESS_NAME: &str = "cpushield-heal";
/// How often it looks for new IRQs and kernel threads, which send no event.
pub const PERIOD: Duration = Duration::from_millis(500);
/// Events that come together make one repair: it starts once none came for
/// this long after the last (a CPU online brings several; a device added
/// brings its bus's event, then its driver's and their IRQs as the driver
/// binds, which took over 100 ms in the emulated test guests)...
const GATHER_QUIET: Duration = Duration::from_millis(250);
/// ... and this long after the first at the latest;
const GATHER_MAX: Duration = Duration::from_secs(1);
/// a device added, until its driver bound (see [`Unbound`]), at most
/// this long.
const GATHER_MAX_DEVICE: Duration = Duration::from_secs(3);
/// A CPU's `online` event comes once the kernel is done with it (the
/// hotplug callbacks that widen the per-node kernel threads ran before
/// it), and a driver's `bind` once its probe made the device's IRQs:
/// what comes with either is in the same burst, so the repair starts
/// after this much quiet rather than [`GATHER_QUIET`].
const GATHER_QUIET_DONE: Duration = Duration::from_millis(20);

/// How long a repair for `reason` waits for no more events to come, once
/// the events so far say whether a driver `bound` a device added.
fn gather_quiet(reason: &str, bound: bool) -> Duration {
    match (reason, bound) {
        ("cpu-online", _) | ("device-added", true) => GATHER_QUIET_DONE,
        _ => GATHER_QUIET,
    }
}

/// How often the healer of a shield made with `--heal drift` reads it
/// back as `status` does, for what other programs changed.
pub const DRIFT_PERIOD: Duration = Duration::from_secs(2);
/// The longest wait before the same drift, come back after its repair, is
/// repaired again.
pub const DRIFT_BACKOFF_MAX: Duration = Duration::from_secs(300);
/// How many times one trigger's repair is tried.
const RETRIES: usize = 3;

/// The healer's state file: who it is, and what it repaired.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HealState {
    /// Its process id.
    pub pid: i32,
    /// Its start time (ticks since boot), which tells it from a later
    /// process with the same id.
    pub start_ticks: u64,
    /// The shielded CPUs it watches.
    pub cpus: CpuSet,
    /// Repairs made, by reason.
    #[serde(default)]
    pub repairs: BTreeMap<String, u64>,
    /// Repairs that failed, by reason.
    #[serde(default)]
    pub failed: BTreeMap<String, u64>,
    /// The last repair.
    #[serde(default)]
    pub last: Option<Repair>,
}

/// One repair the healer ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Repair {
    /// Why: the event or what was found.
    pub reason: String,
    /// What exactly (the uevent's device path, the IRQ, the thread).
    pub what: String,
    /// When it finished (Unix seconds).
    pub at_unix: u64,
    /// From the event to the repair's end, ms.
    pub took_ms: u64,
    /// Whether `repair` exited 0.
    pub ok: bool,
    /// What the repair changed (kernel writes, moves), as `repair --json`
    /// said.
    #[serde(default)]
    pub changed: usize,
    /// How long `repair` itself took, ms (its `took.total`); the rest of
    /// `took_ms` is the wait for the events that came with it.
    #[serde(default)]
    pub repair_ms: u64,
    /// Its phases, ms, as `repair --json` gave them (`took`).
    #[serde(default)]
    pub phases: BTreeMap<String, f64>,
}

/// What one `repair` run said of itself.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RepairRun {
    /// It exited 0.
    pub ok: bool,
    /// What it changed.
    pub changed: usize,
    /// Its own time, ms.
    pub repair_ms: u64,
    /// Its phases, ms.
    pub phases: BTreeMap<String, f64>,
}

/// Reads the healer's state file.
pub fn read_state(sys: &Sys) -> Option<HealState> {
    serde_json::from_str(&sys.read(STATE_FILE).ok()?).ok()
}

/// Whether the process `state` names still runs (the same process).
pub fn alive(sys: &Sys, state: &HealState) -> bool {
    state.pid > 0 && procfs::start_ticks(sys, state.pid) == Some(state.start_ticks)
}

/// Why the healer would repair: the kernel's event, or what it found new.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trigger {
    /// The reason's name (`cpu-online`, `device-added`, `module-loaded`,
    /// `workqueue-added`, `new-irq`, `kernel-thread`).
    pub reason: &'static str,
    /// What exactly.
    pub what: String,
}

/// One kernel uevent (`ACTION@DEVPATH\0KEY=VALUE\0...`), as far as the
/// healer reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uevent {
    /// `add`, `bind`, `online`, ...
    pub action: String,
    /// The device's path under `/sys`.
    pub devpath: String,
    /// Its `SUBSYSTEM=`.
    pub subsystem: String,
}

impl Uevent {
    /// Reads a message of the kernel's (udev's own messages, with their
    /// `libudev` header, are none).
    pub fn parse(message: &[u8]) -> Option<Uevent> {
        let mut fields = message.split(|b| *b == 0).map(String::from_utf8_lossy);
        let head = fields.next()?;
        let (action, devpath) = head.split_once('@')?;
        let subsystem = fields
            .find_map(|f| f.strip_prefix("SUBSYSTEM=").map(str::to_string))
            .unwrap_or_default();
        Some(Uevent {
            action: action.to_string(),
            devpath: devpath.to_string(),
            subsystem,
        })
    }

    /// The trigger it is, when it is one the kernel undoes part of a
    /// shield by.
    pub fn trigger(&self) -> Option<Trigger> {
        let reason = match (self.action.as_str(), self.subsystem.as_str()) {
            ("online", "cpu") | ("add", "cpu") => "cpu-online",
            ("add", "module") => "module-loaded",
            ("add", "workqueue") => "workqueue-added",
            ("add", "pci" | "virtio" | "net" | "msi_irqs" | "platform" | "usb") => "device-added",
            _ => return None,
        };
        Some(Trigger {
            reason,
            what: self.devpath.clone(),
        })
    }
}

/// The trigger a uevent is, when it is one the kernel undoes part of a
/// shield by.
pub fn trigger_of(message: &[u8]) -> Option<Trigger> {
    Uevent::parse(message)?.trigger()
}

/// The buses whose devices get their IRQs from their driver, when it
/// binds (its probe makes them; the kernel says `bind` once it is done).
const DRIVEN: &[&str] = &["pci", "virtio"];

/// Devices added on a [`DRIVEN`] bus whose driver has not bound yet: a
/// repair made before would not see their IRQs.
#[derive(Debug, Default)]
pub struct Unbound {
    waiting: HashSet<String>,
    /// A driver bound a device among the events seen.
    pub bound: bool,
}

impl Unbound {
    /// Takes an event into account.
    pub fn see(&mut self, event: &Uevent) {
        match event.action.as_str() {
            "add" if DRIVEN.contains(&event.subsystem.as_str()) => {
                self.waiting.insert(event.devpath.clone());
            }
            "bind" => {
                self.waiting.remove(&event.devpath);
                self.bound = true;
            }
            "remove" => {
                self.waiting.remove(&event.devpath);
            }
            _ => {}
        }
    }

    /// Whether a device added waits for its driver.
    pub fn any(&self) -> bool {
        !self.waiting.is_empty()
    }
}

/// What the healer has seen of the IRQs and kernel threads, to tell new
/// ones.
#[derive(Debug, Default)]
pub struct Seen {
    irqs: HashSet<u32>,
    pids: HashSet<i32>,
    /// IRQs that appeared lately, with when: a driver gives a new IRQ its
    /// affinity (virtio's hints) a while after making it, so each is
    /// looked at again for [`YOUNG`].
    young: HashMap<u32, Instant>,
}

/// How long a new IRQ is looked at again for an affinity on the shield.
const YOUNG: Duration = Duration::from_secs(5);

impl Seen {
    /// What runs now.
    pub fn now(sys: &Sys) -> Seen {
        Seen {
            irqs: irq_numbers(sys),
            pids: procfs::list_pids(sys)
                .unwrap_or_default()
                .into_iter()
                .collect(),
            young: HashMap::new(),
        }
    }

    /// Looks again: the first IRQ or kernel thread that is new and allowed
    /// on `shield` (a per-CPU kernel thread of a shielded CPU is the
    /// kernel's own, and stays). A new IRQ is looked at again for
    /// [`YOUNG`], and given one repair at most.
    pub fn look(&mut self, sys: &Sys, shield: &CpuSet) -> Option<Trigger> {
        let mut now = Seen::now(sys);
        let at = Instant::now();
        now.young = std::mem::take(&mut self.young);
        for irq in now.irqs.difference(&self.irqs) {
            now.young.insert(*irq, at);
        }
        now.young
            .retain(|irq, since| now.irqs.contains(irq) && at.duration_since(*since) <= YOUNG);
        let mut found = None;
        let mut young: Vec<u32> = now.young.keys().copied().collect();
        young.sort_unstable();
        for irq in young {
            let list = sys.read_trimmed(&format!("proc/irq/{irq}/smp_affinity_list"));
            let on_shield = list.ok().and_then(|l| CpuSet::parse_list(&l).ok());
            if on_shield.is_some_and(|cpus| cpus.intersects(shield)) {
                now.young.remove(&irq);
                found = Some(Trigger {
                    reason: "new-irq",
                    what: format!("IRQ {irq}"),
                });
                break;
            }
        }
        for pid in now.pids.difference(&self.pids) {
            if found.is_some() {
                break;
            }
            let Ok(Some(t)) = procfs::read_thread(sys, *pid, *pid, procfs::Hierarchy::Unified)
            else {
                continue;
            };
            let kernel = t.flags & PF_KTHREAD != 0;
            let per_cpu = t.flags & PF_NO_SETAFFINITY != 0 || t.cpus_allowed.len() == 1;
            if kernel && !per_cpu && t.cpus_allowed.intersects(shield) {
                found = Some(Trigger {
                    reason: "kernel-thread",
                    what: format!("{} (pid {pid})", t.name),
                });
            }
        }
        *self = now;
        found
    }
}

/// When drift is looked for next, and how long the same drift come back
/// after its repair waits.
#[derive(Debug)]
struct DriftWatch {
    next: Instant,
    wait: Duration,
    last: Option<String>,
}

impl DriftWatch {
    fn new(now: Instant) -> DriftWatch {
        DriftWatch {
            next: now,
            wait: DRIFT_PERIOD,
            last: None,
        }
    }

    /// At `now`, when a look is due: what `find` finds drifted, as a
    /// trigger. Drift found again as it was at the last look (repaired
    /// since, and changed back) doubles the wait to the next look.
    fn look(&mut self, now: Instant, find: impl FnOnce() -> Option<String>) -> Option<Trigger> {
        if now < self.next {
            return None;
        }
        let found = find();
        self.wait = match &found {
            Some(what) if self.last.as_ref() == Some(what) => {
                (self.wait * 2).min(DRIFT_BACKOFF_MAX)
            }
            _ => DRIFT_PERIOD,
        };
        self.next = now + self.wait;
        self.last.clone_from(&found);
        found.map(|what| Trigger {
            reason: "drift",
            what,
        })
    }
}

/// The IRQ numbers under `/proc/irq`.
fn irq_numbers(sys: &Sys) -> HashSet<u32> {
    sys.list("proc/irq")
        .unwrap_or_default()
        .iter()
        .filter_map(|n| n.parse().ok())
        .collect()
}

/// A healer problem.
#[derive(Debug, thiserror::Error)]
pub enum HealError {
    /// The kernel layer.
    #[error(transparent)]
    Sys(#[from] SysError),
    /// The uevent socket.
    #[error("the kernel's uevent socket: {0}")]
    Uevents(nix::errno::Errno),
}

/// The kernel's uevents, as a socket (`NETLINK_KOBJECT_UEVENT`, group 1).
fn uevents() -> Result<OwnedFd, nix::errno::Errno> {
    use nix::sys::socket::SockType;
    use nix::sys::socket::{bind, socket, AddressFamily, NetlinkAddr, SockFlag, SockProtocol};
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        SockProtocol::NetlinkKObjectUEvent,
    )?;
    bind(fd.as_raw_fd(), &NetlinkAddr::new(0, 1))?;
    Ok(fd)
}

/// Reads every uevent waiting on `fd`.
fn drain(fd: &OwnedFd) -> Vec<Uevent> {
    let mut buf = vec![0u8; 16384];
    let mut out = Vec::new();
    while let Ok(n) = nix::sys::socket::recv(
        fd.as_raw_fd(),
        &mut buf,
        nix::sys::socket::MsgFlags::empty(),
    ) {
        if n == 0 {
            break;
        }
        out.extend(Uevent::parse(&buf[..n]));
    }
    out
}

/// Reads the events that come with `burst`, the first of `trigger`'s,
/// into the same repair: until none came for the trigger's quiet time and
/// no device added waits for its driver, or [`GATHER_MAX`] after the
/// first ([`GATHER_MAX_DEVICE`] for a device's).
fn gather(events: &OwnedFd, trigger: &Trigger, burst: &[Uevent]) {
    let mut unbound = Unbound::default();
    burst.iter().for_each(|e| unbound.see(e));
    let max = match trigger.reason {
        "device-added" => GATHER_MAX_DEVICE,
        _ => GATHER_MAX,
    };
    let t = Instant::now();
    while t.elapsed() < max {
        let quiet = match unbound.any() {
            true => max.saturating_sub(t.elapsed()),
            false => gather_quiet(trigger.reason, unbound.bound),
        };
        if !readable(events, quiet) && !unbound.any() {
            break;
        }
        drain(events).iter().for_each(|e| unbound.see(e));
    }
}

/// Waits up to `timeout` for `fd` to have something to read (or its end).
pub fn readable(fd: impl AsFd, timeout: Duration) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
    let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
    poll(&mut fds, PollTimeout::from(ms)).is_ok_and(|n| n > 0)
}

/// A repair of the shield for a trigger, as [`run`] makes it.
pub type Repairer<'a> = dyn Fn(&Trigger) -> RepairRun + 'a;
/// What other programs changed of the shield, when repairing it is asked.
pub type DriftFinder<'a> = dyn Fn() -> Option<String> + 'a;

/// Runs the healer of the shield of `(shielded, housekeeping)` CPUs until
/// `stop` is set or the shield is gone (`lives` says no): each trigger
/// runs `repair` (see the module), which says what became of it, counted
/// in the state file. `drift` says what other programs changed of the
/// shield when it is the healer's to repair (`--heal drift`), looked at
/// every [`DRIFT_PERIOD`].
pub fn run(
    sys: &Sys,
    stop: &AtomicBool,
    (shielded, housekeeping): (&CpuSet, &CpuSet),
    lives: &dyn Fn() -> bool,
    (repair, drift): (&Repairer<'_>, &DriftFinder<'_>),
) -> Result<(), HealError> {
    sys.run_dir()?;
    let _ = syscalls::set_thread_name(PROCESS_NAME);
    let _ = sys.set_affinity(0, housekeeping);
    let me = std::process::id() as i32;
    let mut state = HealState {
        pid: me,
        start_ticks: procfs::start_ticks(sys, me).unwrap_or_default(),
        cpus: shielded.clone(),
        ..read_state(sys).unwrap_or_default()
    };
    write_state(sys, &state)?;
    let events = uevents().map_err(HealError::Uevents)?;
    let mut seen = Seen::now(sys);
    let mut watch = DriftWatch::new(Instant::now());
    while !stop.load(Ordering::Relaxed) {
        let burst = if readable(&events, PERIOD) {
            drain(&events)
        } else {
            Vec::new()
        };
        let event = burst.iter().find_map(Uevent::trigger);
        if !lives() {
            break;
        }
        let trigger = (event.or_else(|| seen.look(sys, &state.cpus)))
            .or_else(|| watch.look(Instant::now(), drift));
        let Some(trigger) = trigger else {
            continue;
        };
        if trigger.reason == "drift" && watch.wait > DRIFT_PERIOD {
            eprintln!(
                "cpushield heal: the same drift came back after its repair (does another program change it back?): looked for again in {} s",
                watch.wait.as_secs()
            );
        }
        let t = Instant::now();
        gather(&events, &trigger, &burst);
        // What is there now, the repair sees; what appears while it runs
        // (a new device's IRQs, made after its uevent) is new at the next
        // look, and repaired then.
        let before = Seen::now(sys);
        // Another cpushield command may hold the lock for a while (a
        // `run` starting, an `apply`): tried again a little later.
        let mut done = RepairRun::default();
        for i in 0..RETRIES {
            if i > 0 {
                std::thread::sleep(Duration::from_secs(1));
            }
            done = repair(&trigger);
            if done.ok {
                break;
            }
        }
        let ok = done.ok;
        seen = before;
        let counts = if ok {
            &mut state.repairs
        } else {
            &mut state.failed
        };
        *counts.entry(trigger.reason.to_string()).or_default() += 1;
        state.last = Some(Repair {
            reason: trigger.reason.to_string(),
            what: trigger.what,
            at_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            took_ms: t.elapsed().as_millis() as u64,
            ok,
            changed: done.changed,
            repair_ms: done.repair_ms,
            phases: done.phases,
        });
        write_state(sys, &state)?;
    }
    Ok(())
}

/// Writes the state file atomically.
fn write_state(sys: &Sys, state: &HealState) -> Result<(), SysError> {
    let text = serde_json::to_string(state).expect("the state serialises");
    sys.write_config(STATE_FILE, &text, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_irq_whose_driver_puts_it_on_the_shield_later_is_repaired_once() {
        let root = tempfile::tempdir().unwrap();
        let sys = Sys::at(root.path());
        let irq = |n: u32, cpus: &str| {
            let dir = root.path().join(format!("proc/irq/{n}"));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("smp_affinity_list"), format!("{cpus}\n")).unwrap();
        };
        let shield = CpuSet::parse_list("2-3").unwrap();
        irq(10, "0-1");
        let mut seen = Seen::now(&sys);
        assert!(seen.look(&sys, &shield).is_none());
        // made off the shield, then given a hint on it a look later
        irq(42, "0-1");
        assert!(seen.look(&sys, &shield).is_none());
        irq(42, "0-3");
        let trigger = seen.look(&sys, &shield).expect("the hint is seen");
        assert_eq!(
            (trigger.reason, trigger.what.as_str()),
            ("new-irq", "IRQ 42")
        );
        // one repair each: an IRQ the kernel keeps on the shield (managed,
        // or bound there by --irq) is no endless loop
        assert!(seen.look(&sys, &shield).is_none());
        // an old IRQ moved onto the shield is drift, not the healer's
        irq(10, "2");
        assert!(seen.look(&sys, &shield).is_none());
    }

    #[test]
    fn drift_is_repaired_at_once_and_the_same_drift_come_back_waits_ever_longer() {
        let t0 = Instant::now();
        let mut watch = DriftWatch::new(t0);
        let irq = || Some("IRQs 24 are allowed on the shield again".to_string());
        assert_eq!(watch.look(t0, irq).unwrap().reason, "drift");
        // not looked for again before its period
        assert!(watch
            .look(t0 + DRIFT_PERIOD / 2, || panic!("looked early"))
            .is_none());
        // changed back at once by another program: 2 s, then 4, 8, ...
        let mut at = t0 + DRIFT_PERIOD;
        let mut waits = Vec::new();
        for _ in 0..10 {
            assert!(watch.look(at, irq).is_some());
            waits.push(watch.wait.as_secs());
            at += watch.wait;
        }
        assert_eq!(waits, [4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
        // once it holds, the next drift is repaired at once again
        assert!(watch.look(at, || None).is_none());
        at += DRIFT_PERIOD;
        let knob = || Some("kernel.timer_migration is 1 again".to_string());
        assert!(watch.look(at, knob).is_some());
        assert_eq!(watch.wait, DRIFT_PERIOD);
    }

    fn uevent(parts: &[&str]) -> Vec<u8> {
        parts.join("\0").into_bytes()
    }

    #[test]
    fn a_device_added_waits_for_its_drivers_bind_and_a_removed_one_for_nothing() {
        let event = |action: &str, devpath: &str, subsystem: &str| {
            let head = format!("{action}@{devpath}");
            let sub = format!("SUBSYSTEM={subsystem}");
            Uevent::parse(&uevent(&[&head, "SEQNUM=1", &sub])).unwrap()
        };
        let pci = "/devices/pci0000:00/0000:00:06.0";
        let virtio = "/devices/pci0000:00/0000:00:06.0/virtio4";
        let mut unbound = Unbound::default();
        // virtio-pci's probe adds the virtio device, whose driver binds
        // (making the queues' IRQs) before the PCI device's bind.
        for (e, waits) in [
            (event("add", pci, "pci"), true),
            (event("add", virtio, "virtio"), true),
            (event("add", &format!("{virtio}/net/eth1"), "net"), true),
            (event("bind", virtio, "virtio"), true),
            (event("bind", pci, "pci"), false),
        ] {
            unbound.see(&e);
            assert_eq!(unbound.any(), waits, "after {e:?}");
        }
        assert!(unbound.bound);
        assert_eq!(
            gather_quiet("device-added", unbound.bound),
            GATHER_QUIET_DONE
        );
        // No driver for a device taken out again: nothing to wait for.
        let mut gone = Unbound::default();
        gone.see(&event("add", pci, "pci"));
        gone.see(&event("remove", pci, "pci"));
        assert!(!gone.any() && !gone.bound);
        assert_eq!(gather_quiet("device-added", gone.bound), GATHER_QUIET);
        // A bus whose devices get no IRQs of their own waits for no driver.
        let mut net = Unbound::default();
        net.see(&event("add", "/devices/virtual/net/dummy0", "net"));
        assert!(!net.any());
    }

    #[test]
    fn the_kernels_events_that_undo_part_of_a_shield_are_triggers() {
        let online = uevent(&[
            "online@/devices/system/cpu/cpu3",
            "ACTION=online",
            "DEVPATH=/devices/system/cpu/cpu3",
            "SUBSYSTEM=cpu",
            "SEQNUM=2101",
        ]);
        assert_eq!(
            trigger_of(&online),
            Some(Trigger {
                reason: "cpu-online",
                what: "/devices/system/cpu/cpu3".into()
            })
        );
        let module = uevent(&["add@/module/virtio_net", "ACTION=add", "SUBSYSTEM=module"]);
        assert_eq!(trigger_of(&module).unwrap().reason, "module-loaded");
        let pci = uevent(&["add@/devices/pci0000:00/0000:00:05.0", "SUBSYSTEM=pci"]);
        assert_eq!(trigger_of(&pci).unwrap().reason, "device-added");
        // A CPU going offline, a device removed, udev's own messages: none.
        let offline = uevent(&["offline@/devices/system/cpu/cpu3", "SUBSYSTEM=cpu"]);
        assert_eq!(trigger_of(&offline), None);
        let remove = uevent(&["remove@/devices/pci0000:00/0000:00:05.0", "SUBSYSTEM=pci"]);
        assert_eq!(trigger_of(&remove), None);
        assert_eq!(trigger_of(b"libudev\0\xfe\xed\xca\xfe"), None);
    }
}
