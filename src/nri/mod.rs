//! `cpushield nri`: a plugin of containerd's node resource interface (NRI)
//! that gives a Guaranteed pod's exclusive CPUs what CRI-O's
//! high-performance hooks give them, from the same pod annotations
//! ([`pods`]), at container start, and gives it back at stop and remove
//! ([`changes`]). In the cpushield binary, not a second program: one
//! release to install and keep in step with the shield, whose irqbalance
//! ban and IRQ placement the plugin reads and keeps, and one place
//! (`/run/cpushield`) for both journals.
//!
//! The plugin dials the runtime's socket, registers, subscribes to start,
//! stop and remove, and answers every call at once: it never answers an
//! error (that would fail the container's start), it logs what it could
//! not do. A runtime that goes away (restarted, upgraded) is dialled again
//! every second; its synchronisation then brings the plugin's changes in
//! line with the containers that run, as it does after the plugin's own
//! restart or crash.

pub mod api;
pub mod changes;
pub mod pods;
pub mod wire;

use std::collections::{BTreeMap, HashMap};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use prost::Message as _;

use crate::sys::Sys;
use api::{Container, ContainerEvent, PodSandbox};
use changes::{IrqbalanceBan, Journal};
use pods::Wants;

/// containerd's (and CRI-O's) NRI socket, relative to the root.
pub const SOCKET: &str = "var/run/nri/nri.sock";
/// The name the plugin registers under.
pub const NAME: &str = "cpushield";
/// Its index: late among plugins, after those that place containers.
pub const INDEX: &str = "90";

/// A plugin problem that ends `cpushield nri`.
#[derive(Debug, thiserror::Error)]
pub enum NriError {
    /// The journal.
    #[error(transparent)]
    Journal(#[from] changes::JournalError),
    /// The kernel layer.
    #[error(transparent)]
    Sys(#[from] crate::sys::SysError),
    /// Another plugin serves this node (its lock file).
    #[error("another cpushield nri (pid {0}) serves this node: stop it first (systemctl stop cpushield-nri, or the DaemonSet's nri container), then run this again")]
    Busy(i32),
    /// The lock file.
    #[error("/{LOCK_FILE}: {1}")]
    Lock(&'static str, std::io::Error),
}

/// The plugin's lock file, relative to the root: one plugin serves a node
/// (two would each reconcile the one journal their own way).
pub const LOCK_FILE: &str = "run/cpushield/nri.lock";

/// The lock that makes this the node's one plugin, held while it lives.
pub struct OnePlugin {
    _held: crate::sys::pid_lock::PidLock,
}

/// Takes the plugin's lock, writing this process's pid in it; the pid of
/// the plugin that holds it instead.
pub fn take_lock(sys: &Sys) -> Result<Result<OnePlugin, i32>, NriError> {
    let path = sys.run_dir()?.join("nri.lock");
    match crate::sys::pid_lock::try_take(&path, "\n").map_err(|e| NriError::Lock(LOCK_FILE, e))? {
        Some(held) => Ok(Ok(OnePlugin { _held: held })),
        None => Ok(Err((sys.read(LOCK_FILE).ok())
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0))),
    }
}

/// The plugin's state between the runtime's calls.
pub struct Plugin<'a> {
    sys: &'a Sys,
    journal: Journal,
    irqbalance: &'a dyn IrqbalanceBan,
    log: &'a dyn Fn(&str),
    /// The parts of a synchronisation received so far.
    syncing: (Vec<PodSandbox>, Vec<Container>),
    /// What the last reconciliation could not do, logged once until it
    /// changes (the plugin reconciles every [`LOOK_PERIOD`]).
    said: Vec<String>,
    /// The runtime is CRI-O, whose own high-performance hooks carry out
    /// these annotations: the plugin serves no container (see
    /// [`CRIO_RUNTIME`]).
    beside_crio: bool,
}

/// The runtime name CRI-O gives its NRI plugins. On CRI-O the annotations
/// are its high-performance hooks' to carry out and to undo (at the
/// container's stop, from the values they saved): a second owner of the
/// same files would undo the hooks' changes with values it read between
/// them, so the plugin serves no container there, and gives back what it
/// served before (a journal from containerd's time).
pub const CRIO_RUNTIME: &str = "cri-o";

impl<'a> Plugin<'a> {
    /// The plugin, its journal read.
    pub fn new(
        sys: &'a Sys,
        irqbalance: &'a dyn IrqbalanceBan,
        log: &'a dyn Fn(&str),
    ) -> Result<Plugin<'a>, NriError> {
        Ok(Plugin {
            sys,
            journal: changes::read(sys)?,
            irqbalance,
            log,
            syncing: Default::default(),
            said: Vec::new(),
            beside_crio: false,
        })
    }

    /// The containers served now.
    pub fn containers(&self) -> &BTreeMap<String, Wants> {
        &self.journal.containers
    }

    /// Answers one call of the runtime's: the response's payload, or a
    /// gRPC status code and message (only for a method it does not have:
    /// an error answered to a start would fail the container's start, so
    /// a request that does not decode is logged and answered as done,
    /// nothing changed for it).
    pub fn call(&mut self, method: &str, payload: &[u8]) -> Result<Vec<u8>, (i32, String)> {
        let log = self.log;
        let bad = |e: prost::DecodeError| {
            log(&format!(
                "{method}: a request that does not decode ({e}): nothing done for it"
            ));
        };
        match method {
            "Configure" => {
                let req = api::ConfigureRequest::decode(payload)
                    .inspect_err(|e| bad(e.clone()))
                    .unwrap_or_default();
                (self.log)(&format!(
                    "configured by {} {} (requests answered within {} ms)",
                    req.runtime_name, req.runtime_version, req.request_timeout
                ));
                self.beside_crio = req.runtime_name == CRIO_RUNTIME;
                if self.beside_crio {
                    (self.log)("CRI-O's high-performance hooks carry out the *.crio.io annotations on this node: this plugin serves no container here, and gives back what it served before");
                }
                let events = api::event::mask(&[
                    api::event::START_CONTAINER,
                    api::event::STOP_CONTAINER,
                    api::event::REMOVE_CONTAINER,
                ]);
                Ok(api::ConfigureResponse { events }.encode_to_vec())
            }
            "Synchronize" => {
                let Ok(req) =
                    api::SynchronizeRequest::decode(payload).inspect_err(|e| bad(e.clone()))
                else {
                    // what runs is unknown: nothing is given back on it
                    self.syncing = Default::default();
                    return Ok(api::SynchronizeResponse { more: false }.encode_to_vec());
                };
                self.syncing.0.extend(req.pods);
                self.syncing.1.extend(req.containers);
                if !req.more {
                    let (pods, containers) = std::mem::take(&mut self.syncing);
                    self.synchronize(&pods, &containers);
                }
                Ok(api::SynchronizeResponse { more: req.more }.encode_to_vec())
            }
            "StartContainer" | "StopContainer" | "RemoveContainer" => {
                if let Ok(req) = ContainerEvent::decode(payload).inspect_err(|e| bad(e.clone())) {
                    self.event(method == "StartContainer", req.pod, req.container);
                }
                Ok(Vec::new())
            }
            "StateChange" => {
                let req = api::StateChangeEvent::decode(payload)
                    .inspect_err(|e| bad(e.clone()))
                    .unwrap_or_default();
                match req.event {
                    api::event::START_CONTAINER => self.event(true, req.pod, req.container),
                    api::event::STOP_CONTAINER | api::event::REMOVE_CONTAINER => {
                        self.event(false, req.pod, req.container)
                    }
                    _ => {}
                }
                Ok(Vec::new())
            }
            "Shutdown" => {
                (self.log)("the runtime is shutting down: what the running containers asked stays");
                Ok(Vec::new())
            }
            _ => Err((api::UNIMPLEMENTED, format!("{method} is not implemented"))),
        }
    }

    /// The runtime's pods and containers: those running are served, and
    /// so is a container served before whose process still lives though
    /// the runtime does not list it.
    fn synchronize(&mut self, pods: &[PodSandbox], containers: &[Container]) {
        let by_id: HashMap<&str, &PodSandbox> = pods.iter().map(|p| (p.id.as_str(), p)).collect();
        let mut serve = BTreeMap::new();
        for c in containers
            .iter()
            .filter(|c| c.state == api::CONTAINER_RUNNING)
        {
            let Some(pod) = by_id.get(c.pod_sandbox_id.as_str()) else {
                continue;
            };
            if let Some(w) = self.asked(pod, c) {
                serve.insert(c.id.clone(), w);
            }
        }
        let listed: Vec<&str> = containers.iter().map(|c| c.id.as_str()).collect();
        for (id, w) in &self.journal.containers {
            if !listed.contains(&id.as_str()) && lives(self.sys, w) {
                (self.log)(&format!(
                    "{}: the runtime does not list it, but its process {} lives: still served",
                    w.who,
                    w.process.map_or(0, |p| p.0)
                ));
                serve.insert(id.clone(), w.clone());
            }
        }
        (self.log)(&format!(
            "synchronised: {} pods, {} containers, {} served",
            pods.len(),
            containers.len(),
            serve.len()
        ));
        self.reconcile(serve);
    }

    /// A container started (`start`), or stopped or removed.
    fn event(&mut self, start: bool, pod: Option<PodSandbox>, container: Option<Container>) {
        let (Some(pod), Some(c)) = (pod, container) else {
            return;
        };
        let mut serve = self.journal.containers.clone();
        if start {
            match self.asked(&pod, &c) {
                Some(w) => serve.insert(c.id.clone(), w),
                None => return,
            };
        } else if serve.remove(&c.id).is_none() {
            return;
        }
        self.reconcile(serve);
    }

    /// What `c` asks, with what the log should say of it.
    fn asked(&self, pod: &PodSandbox, c: &Container) -> Option<Wants> {
        if self.beside_crio {
            return None;
        }
        let (w, said) = pods::wants(pod, c);
        said.iter().for_each(|s| (self.log)(s));
        if c.pid > 0 {
            let read = |rel: &str| self.sys.read(rel).ok();
            if let Some(s) = pods::quota_said(&read, pod, c) {
                (self.log)(&s);
            }
        }
        let process = (c.pid > 0)
            .then(|| crate::sys::procfs::start_ticks(self.sys, c.pid as i32).map(|t| (c.pid, t)))
            .flatten();
        w.map(|w| Wants { process, ..w })
    }

    /// Stops serving the containers whose process ended without a stop
    /// from the runtime (it was away, or missed it), and brings the machine
    /// back to what the containers served ask where something changed it
    /// under them (a shield's `off` giving back IRQs it had moved);
    /// called between calls, every [`LOOK_PERIOD`].
    pub fn look_for_ended(&mut self) {
        let ended: Vec<String> = (self.journal.containers.iter())
            .filter(|(_, w)| w.process.is_some() && !lives(self.sys, w))
            .map(|(id, _)| id.clone())
            .collect();
        let mut serve = self.journal.containers.clone();
        for id in &ended {
            if let Some(w) = serve.remove(id) {
                (self.log)(&format!(
                    "{}: its process ended with no stop from the runtime",
                    w.who
                ));
            }
        }
        self.reconcile(serve);
    }

    /// Brings the machine to what `serve` asks, and logs what was done.
    fn reconcile(&mut self, serve: BTreeMap<String, Wants>) {
        let asked: Vec<String> = serve
            .values()
            .map(|w| format!("{} on CPUs {}", w.who, w.cpus))
            .collect();
        let shield = active_shield(self.sys);
        match changes::reconcile(self.sys, &mut self.journal, serve, self.irqbalance, &shield) {
            Ok(done) => {
                if !done.written.is_empty() || !done.restored.is_empty() {
                    (self.log)(&format!(
                        "served: {}; {} written, {} given back",
                        if asked.is_empty() {
                            "none".into()
                        } else {
                            asked.join(", ")
                        },
                        done.written.len(),
                        done.restored.len()
                    ));
                }
                (done.said.iter())
                    .filter(|s| !self.said.contains(s))
                    .for_each(|s| (self.log)(s));
                self.said = done.said;
            }
            Err(e) => (self.log)(&format!("could not journal a change, none made: {e}")),
        }
    }
}

/// The CPUs of the shield that is on (`cpushield on`), empty when none.
fn active_shield(sys: &Sys) -> crate::cpulist::CpuSet {
    (crate::shield::journal::read_state(sys).ok().flatten())
        .map(|s| s.shield)
        .unwrap_or_default()
}

/// Whether the process recorded for `w` still runs (the same process:
/// its start time unchanged); false with none recorded.
fn lives(sys: &Sys, w: &Wants) -> bool {
    w.process
        .is_some_and(|(pid, ticks)| crate::sys::procfs::start_ticks(sys, pid as i32) == Some(ticks))
}

/// How often the plugin looks, between calls, for containers that ended
/// without a stop from the runtime and for files changed under the
/// containers it serves.
pub const LOOK_PERIOD: Duration = Duration::from_secs(5);

/// Serves one connection to the runtime until it ends or `stop` is set:
/// registers, then answers each call.
pub fn serve(
    stream: &mut UnixStream,
    plugin: &mut Plugin<'_>,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    let register = api::Request {
        service: api::RUNTIME_SERVICE.into(),
        method: "RegisterPlugin".into(),
        payload: api::RegisterPluginRequest {
            plugin_name: NAME.into(),
            plugin_idx: INDEX.into(),
        }
        .encode_to_vec(),
        timeout_nano: 0,
    };
    wire::write(
        stream,
        &wire::Message {
            conn: wire::RUNTIME_CONN,
            stream: 1,
            kind: wire::REQUEST,
            body: register.encode_to_vec(),
        },
    )?;
    let mut reader = wire::Reader::default();
    let mut looked = std::time::Instant::now();
    while !stop.load(Ordering::Relaxed) {
        if looked.elapsed() >= LOOK_PERIOD {
            plugin.look_for_ended();
            looked = std::time::Instant::now();
        }
        if !crate::heal::readable(&*stream, Duration::from_millis(500)) {
            continue;
        }
        let m = reader.next(stream)?;
        match (m.conn, m.kind) {
            (wire::RUNTIME_CONN, wire::RESPONSE) => {
                let r = api::Response::decode(&m.body[..]).unwrap_or_default();
                if let Some(s) = r.status.filter(|s| s.code != 0) {
                    return Err(std::io::Error::other(format!(
                        "the runtime refused the registration: {} (code {})",
                        s.message, s.code
                    )));
                }
                (plugin.log)(&format!("registered as {INDEX}-{NAME}"));
            }
            (wire::PLUGIN_CONN, wire::REQUEST) => {
                let req = api::Request::decode(&m.body[..]).unwrap_or_default();
                let answer = match req.service.as_str() {
                    api::PLUGIN_SERVICE => plugin.call(&req.method, &req.payload),
                    other => Err((api::UNIMPLEMENTED, format!("no service {other}"))),
                };
                let response = match answer {
                    Ok(payload) => api::Response {
                        status: None,
                        payload,
                    },
                    Err((code, message)) => api::Response {
                        status: Some(api::Status { code, message }),
                        payload: Vec::new(),
                    },
                };
                wire::write(
                    stream,
                    &wire::Message {
                        conn: wire::PLUGIN_CONN,
                        stream: m.stream,
                        kind: wire::RESPONSE,
                        body: response.encode_to_vec(),
                    },
                )?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// irqbalance on this machine, through its control socket.
pub struct LiveIrqbalance<'a> {
    /// The machine.
    pub sys: &'a Sys,
}

impl IrqbalanceBan for LiveIrqbalance<'_> {
    fn running(&self) -> Option<(i32, crate::cpulist::CpuSet)> {
        let (pid, own) = crate::shield::irqbalance_own_ban(self.sys)?;
        crate::sys::irqbalance::socket_pids(self.sys)
            .contains(&pid)
            .then_some((pid, own))
    }

    fn banned_now(&self, pid: i32) -> Option<crate::cpulist::CpuSet> {
        crate::sys::irqbalance::banned(self.sys, pid).ok()
    }

    fn tell(&self, pid: i32, cpus: Option<&crate::cpulist::CpuSet>) -> Result<(), String> {
        crate::sys::irqbalance::set_banned(self.sys, pid, cpus).map_err(|e| e.to_string())
    }
}

/// `cpushield nri`: serves the runtime at `socket` (relative to the root)
/// until SIGTERM, dialling it again each second while it is away; with
/// `undo`, gives back everything the plugin's journal holds and ends.
pub fn command(sys: &Sys, socket: &str, undo: bool, stop: &AtomicBool) -> Result<(), NriError> {
    let irqbalance = LiveIrqbalance { sys };
    let log = |s: &str| eprintln!("cpushield nri: {}", crate::escape::terminal(s));
    // One plugin per node: a second one (a DaemonSet's beside the unit)
    // waits, and serves once the first has ended; --undo beside a running
    // one is refused (the running one would put back what it undid).
    let mut said_waiting = false;
    let _one = loop {
        match take_lock(sys)? {
            Ok(lock) => break lock,
            Err(pid) if undo => return Err(NriError::Busy(pid)),
            Err(pid) => {
                if !said_waiting {
                    log(&format!("another cpushield nri (pid {pid}) serves this node: this one waits, and serves once it has ended"));
                    said_waiting = true;
                }
                if stop.load(Ordering::Relaxed) {
                    return Ok(());
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    };
    let mut plugin = Plugin::new(sys, &irqbalance, &log)?;
    if undo {
        plugin.reconcile(BTreeMap::new());
        return Ok(());
    }
    let mut said_away = false;
    while !stop.load(Ordering::Relaxed) {
        plugin.look_for_ended();
        match UnixStream::connect(sys.path(socket)) {
            Ok(mut stream) => {
                said_away = false;
                if let Err(e) = serve(&mut stream, &mut plugin, stop) {
                    log(&format!("the runtime's connection ended: {e}"));
                }
            }
            Err(e) if !said_away => {
                log(&format!(
                    "no runtime at /{socket} ({e}): dialled again every second"
                ));
                said_away = true;
            }
            Err(_) => {}
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    Ok(())
}
