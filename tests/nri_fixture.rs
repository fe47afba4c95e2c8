//! `cpushield nri`, the containerd NRI plugin, against a fixture root:
//! a Guaranteed container with CRI-O's annotations gets its CPUs free of
//! IRQs, its idle-state latency and its governor at start; everything
//! comes back at stop, and after a crash at the next synchronisation or
//! `--undo`; the wire speaks the runtime's multiplexed ttrpc.

mod common;

use std::cell::RefCell;
use std::path::Path;

use common::*;
use cpushield::cpulist::CpuSet;
use cpushield::nri::api::{self, event, Container, ContainerEvent, PodSandbox};
use cpushield::nri::changes::IrqbalanceBan;
use cpushield::nri::{pods, Plugin};
use cpushield::sys::fixture::{CgroupLayout, FixtureConfig};
use cpushield::sys::Sys;
use prost::Message;

/// irqbalance as a test sees it: its own ban, and what it was told.
#[derive(Default)]
struct FakeIrqbalance {
    own: Option<(i32, CpuSet)>,
    told: RefCell<Vec<Option<String>>>,
}

impl IrqbalanceBan for FakeIrqbalance {
    fn running(&self) -> Option<(i32, CpuSet)> {
        self.own.clone()
    }
    fn tell(&self, _: i32, cpus: Option<&CpuSet>) -> Result<(), String> {
        self.told.borrow_mut().push(cpus.map(|c| c.to_string()));
        Ok(())
    }
}

/// The fixture, with each CPU's PM QoS latency and cpufreq files.
fn machine(root: &Path) -> Sys {
    let sys = standard(root, CgroupLayout::V2, FixtureConfig::default());
    for cpu in 0..4 {
        let dir = root.join(format!("sys/devices/system/cpu/cpu{cpu}"));
        std::fs::create_dir_all(dir.join("power")).unwrap();
        std::fs::write(dir.join("power/pm_qos_resume_latency_us"), "0\n").unwrap();
        std::fs::create_dir_all(dir.join("cpufreq")).unwrap();
        std::fs::write(dir.join("cpufreq/scaling_governor"), "schedutil\n").unwrap();
        std::fs::write(
            dir.join("cpufreq/scaling_available_governors"),
            "performance schedutil\n",
        )
        .unwrap();
    }
    sys
}

fn pod(annotations: &[(&str, &str)]) -> PodSandbox {
    PodSandbox {
        id: "pod-rt".into(),
        name: "rt".into(),
        namespace: "default".into(),
        annotations: (annotations.iter())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        linux: Some(api::LinuxPodSandbox {
            cgroup_parent: "/kubepods.slice/kubepods-podabc.slice".into(),
        }),
    }
}

fn container(cpus: &str) -> Container {
    Container {
        id: "ctr-loop".into(),
        pod_sandbox_id: "pod-rt".into(),
        name: "loop".into(),
        state: api::CONTAINER_RUNNING,
        linux: Some(api::LinuxContainer {
            resources: Some(api::LinuxResources {
                cpu: Some(api::LinuxCpu {
                    shares: Some(api::OptionalUInt64 { value: 2048 }),
                    cpus: cpus.into(),
                }),
            }),
            cgroups_path: String::new(),
        }),
        pid: 0,
    }
}

const ALL: [(&str, &str); 3] = [
    (pods::IRQ_LOAD_BALANCING, "disable"),
    (pods::CPU_C_STATES, "disable"),
    (pods::CPU_FREQ_GOVERNOR, "performance"),
];

fn event_payload(p: &PodSandbox, c: &Container) -> Vec<u8> {
    ContainerEvent {
        pod: Some(p.clone()),
        container: Some(c.clone()),
    }
    .encode_to_vec()
}

fn sync_payload(pods: &[PodSandbox], containers: &[Container], more: bool) -> Vec<u8> {
    api::SynchronizeRequest {
        pods: pods.to_vec(),
        containers: containers.to_vec(),
        more,
    }
    .encode_to_vec()
}

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel))
        .unwrap()
        .trim()
        .to_string()
}

/// The IRQs whose affinity meets `cpus`, as the files say.
fn irqs_on(root: &Path, cpus: &CpuSet) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(root.join("proc/irq")).unwrap().flatten() {
        let f = e.path().join("smp_affinity_list");
        if let Ok(text) = std::fs::read_to_string(&f) {
            if CpuSet::parse_list(text.trim()).unwrap().intersects(cpus) {
                out.push(e.file_name().to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_guaranteed_container_gets_its_cpus_at_start_and_the_machine_is_given_back_at_stop() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let sys = machine(root);
    let before = tree(root);
    let pod_cpus = CpuSet::parse_list("2-3").unwrap();
    let irqbalance = FakeIrqbalance {
        own: Some((77, CpuSet::new())),
        ..Default::default()
    };
    let lines = RefCell::new(Vec::<String>::new());
    let log = |s: &str| lines.borrow_mut().push(s.to_string());
    let mut plugin = Plugin::new(&sys, &irqbalance, &log).unwrap();
    // subscribed to start, stop and remove
    let r = plugin
        .call(
            "Configure",
            &api::ConfigureRequest::default().encode_to_vec(),
        )
        .unwrap();
    let events = api::ConfigureResponse::decode(&r[..]).unwrap().events;
    assert_eq!(
        events,
        event::mask(&[
            event::START_CONTAINER,
            event::STOP_CONTAINER,
            event::REMOVE_CONTAINER
        ])
    );
    assert_eq!(events, (1 << 5) | (1 << 9) | (1 << 10));
    assert!(
        !irqs_on(root, &pod_cpus).is_empty(),
        "the fixture has IRQs on 2-3"
    );
    let (p, c) = (pod(&ALL), container("2-3"));
    plugin
        .call("StartContainer", &event_payload(&p, &c))
        .unwrap();
    // IRQ 0 refuses (EIO) and IRQ 40 is kernel-managed (EPERM): they stay,
    // and the log says so; every other IRQ is off the pod's CPUs, IRQ 24
    // (pinned to CPU 2 alone) on the CPUs left, 0-1
    assert_eq!(irqs_on(root, &pod_cpus), vec!["0", "40"]);
    let log_text = lines.borrow().join("\n");
    assert!(
        log_text.contains("/proc/irq/0/smp_affinity_list"),
        "{log_text}"
    );
    assert!(log_text.contains("refused: EIO"), "{log_text}");
    assert_eq!(read(root, "proc/irq/24/smp_affinity_list"), "0-1");
    assert_eq!(read(root, "proc/irq/default_smp_affinity"), "3");
    for cpu in [2, 3] {
        let d = format!("sys/devices/system/cpu/cpu{cpu}");
        assert_eq!(
            read(root, &format!("{d}/power/pm_qos_resume_latency_us")),
            "n/a"
        );
        assert_eq!(
            read(root, &format!("{d}/cpufreq/scaling_governor")),
            "performance"
        );
    }
    for cpu in [0, 1] {
        let d = format!("sys/devices/system/cpu/cpu{cpu}");
        assert_eq!(
            read(root, &format!("{d}/power/pm_qos_resume_latency_us")),
            "0"
        );
        assert_eq!(
            read(root, &format!("{d}/cpufreq/scaling_governor")),
            "schedutil"
        );
    }
    assert_eq!(*irqbalance.told.borrow(), vec![Some("2-3".to_string())]);
    assert!(root.join(cpushield::nri::changes::JOURNAL).exists());
    // stopped: everything back, the journal gone, irqbalance given back
    plugin
        .call("StopContainer", &event_payload(&p, &c))
        .unwrap();
    let d = diff(&before, &tree(root));
    assert!(d.is_empty(), "not given back: {d:#?}");
    assert!(!root.join(cpushield::nri::changes::JOURNAL).exists());
    assert_eq!(irqbalance.told.borrow().last(), Some(&None));
    // a second stop, or a remove, of the same container changes nothing
    plugin
        .call("RemoveContainer", &event_payload(&p, &c))
        .unwrap();
    assert!(diff(&before, &tree(root)).is_empty());
}

#[test]
fn after_a_crash_the_next_synchronisation_keeps_what_runs_and_gives_back_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let sys = machine(root);
    let before = tree(root);
    let irqbalance = FakeIrqbalance::default();
    let log = |_: &str| {};
    let (p, c) = (pod(&ALL), container("3"));
    {
        let mut plugin = Plugin::new(&sys, &irqbalance, &log).unwrap();
        plugin
            .call("StartContainer", &event_payload(&p, &c))
            .unwrap();
        // the plugin dies here: no stop reaches it
    }
    let applied = tree(root);
    assert_ne!(before, applied);
    // restarted while the container still runs, synchronised in two parts:
    // what it asked stays, nothing written again
    let mut plugin = Plugin::new(&sys, &irqbalance, &log).unwrap();
    let r = plugin
        .call(
            "Synchronize",
            &sync_payload(std::slice::from_ref(&p), &[], true),
        )
        .unwrap();
    assert!(api::SynchronizeResponse::decode(&r[..]).unwrap().more);
    plugin
        .call(
            "Synchronize",
            &sync_payload(&[], std::slice::from_ref(&c), false),
        )
        .unwrap();
    assert_eq!(plugin.containers().len(), 1);
    assert!(diff(&applied, &tree(root)).is_empty());
    // restarted after the container ended meanwhile: given back exactly
    drop(plugin);
    let mut plugin = Plugin::new(&sys, &irqbalance, &log).unwrap();
    plugin
        .call("Synchronize", &sync_payload(&[p], &[], false))
        .unwrap();
    assert!(plugin.containers().is_empty());
    let d = diff(&before, &tree(root));
    assert!(d.is_empty(), "not given back: {d:#?}");
}

#[test]
fn a_journal_whose_change_was_cut_short_is_given_back_by_undo() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    machine(root);
    let before = tree(root);
    // a kill between the journal's write and the files': the journal holds
    // before-values, some files are changed, some not yet
    let gov = "sys/devices/system/cpu/cpu2/cpufreq/scaling_governor";
    let lat = "sys/devices/system/cpu/cpu2/power/pm_qos_resume_latency_us";
    let j = serde_json::json!({
        "version": 1,
        "containers": {},
        "before": { gov: "schedutil", lat: "0" },
        "irqbalance": null,
    });
    std::fs::create_dir_all(root.join("run/cpushield")).unwrap();
    std::fs::write(root.join(cpushield::nri::changes::JOURNAL), j.to_string()).unwrap();
    std::fs::write(root.join(gov), "performance\n").unwrap();
    let o = cpushield(root, &["nri", "--undo"]);
    assert!(o.status.success(), "{}", text(&o));
    let d = diff(&before, &tree(root));
    assert!(d.is_empty(), "not given back: {d:#?}");
    assert!(!root.join(cpushield::nri::changes::JOURNAL).exists());
}

#[test]
fn containers_that_ask_nothing_or_are_not_guaranteed_change_nothing_and_unknown_calls_are_unimplemented(
) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let sys = machine(root);
    let before = tree(root);
    let irqbalance = FakeIrqbalance::default();
    let lines = RefCell::new(Vec::<String>::new());
    let log = |s: &str| lines.borrow_mut().push(s.to_string());
    let mut plugin = Plugin::new(&sys, &irqbalance, &log).unwrap();
    let mut burstable = pod(&ALL);
    burstable.linux.as_mut().unwrap().cgroup_parent =
        "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podx.slice".into();
    plugin
        .call(
            "StartContainer",
            &event_payload(&burstable, &container("2-3")),
        )
        .unwrap();
    plugin
        .call(
            "StartContainer",
            &event_payload(&pod(&[]), &container("2-3")),
        )
        .unwrap();
    assert!(plugin.containers().is_empty());
    assert!(diff(&before, &tree(root)).is_empty());
    assert!(lines
        .borrow()
        .iter()
        .any(|l| l.contains("not a Guaranteed container")));
    let e = plugin.call("CreateContainer", &[]).unwrap_err();
    assert_eq!(e.0, api::UNIMPLEMENTED);
    // a request that does not decode is answered as done (an error would
    // fail the container's start) and changes nothing; a garbled
    // synchronisation gives nothing back of what is served
    let garbled = [0x0a, 0xff, 0xff];
    plugin.call("StartContainer", &garbled).unwrap();
    assert!(diff(&before, &tree(root)).is_empty());
    plugin
        .call(
            "StartContainer",
            &event_payload(&pod(&ALL), &container("3")),
        )
        .unwrap();
    let served = tree(root);
    let r = plugin.call("Synchronize", &garbled).unwrap();
    assert!(!api::SynchronizeResponse::decode(&r[..]).unwrap().more);
    assert_eq!(plugin.containers().len(), 1);
    assert!(diff(&served, &tree(root)).is_empty());
    assert!(lines.borrow().iter().any(|l| l.contains("does not decode")));
}

#[test]
fn the_plugin_registers_and_answers_over_the_runtimes_multiplexed_ttrpc() {
    use cpushield::nri::wire::{self, Message as Frame};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let sys = machine(&root);
    let (mut runtime, mut plugin_end) = std::os::unix::net::UnixStream::pair().unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let server = std::thread::spawn(move || {
        let irqbalance = FakeIrqbalance::default();
        let log = |_: &str| {};
        let mut plugin = Plugin::new(&sys, &irqbalance, &log).unwrap();
        cpushield::nri::serve(&mut plugin_end, &mut plugin, &stop2)
    });
    let mut reader = wire::Reader::default();
    let reg = reader.next(&mut runtime).unwrap();
    assert_eq!(
        (reg.conn, reg.kind, reg.stream),
        (wire::RUNTIME_CONN, wire::REQUEST, 1)
    );
    let req = api::Request::decode(&reg.body[..]).unwrap();
    assert_eq!(
        (req.service.as_str(), req.method.as_str()),
        (api::RUNTIME_SERVICE, "RegisterPlugin")
    );
    let r = api::RegisterPluginRequest::decode(&req.payload[..]).unwrap();
    assert_eq!(
        (r.plugin_name.as_str(), r.plugin_idx.as_str()),
        ("cpushield", "90")
    );
    let ok = api::Response {
        status: None,
        payload: api::Empty {}.encode_to_vec(),
    };
    wire::write(
        &mut runtime,
        &Frame {
            conn: wire::RUNTIME_CONN,
            stream: 1,
            kind: wire::RESPONSE,
            body: ok.encode_to_vec(),
        },
    )
    .unwrap();
    // the runtime calls Configure, then a start with a large pod (frames split)
    let call = |method: &str, payload: Vec<u8>| api::Request {
        service: api::PLUGIN_SERVICE.into(),
        method: method.into(),
        payload,
        timeout_nano: 2_000_000_000,
    };
    let configure = call(
        "Configure",
        api::ConfigureRequest::default().encode_to_vec(),
    );
    wire::write(
        &mut runtime,
        &Frame {
            conn: wire::PLUGIN_CONN,
            stream: 1,
            kind: wire::REQUEST,
            body: configure.encode_to_vec(),
        },
    )
    .unwrap();
    let answer = reader.next(&mut runtime).unwrap();
    assert_eq!(
        (answer.conn, answer.stream, answer.kind),
        (wire::PLUGIN_CONN, 1, wire::RESPONSE)
    );
    let resp = api::Response::decode(&answer.body[..]).unwrap();
    assert_eq!(resp.status, None);
    assert_eq!(
        api::ConfigureResponse::decode(&resp.payload[..])
            .unwrap()
            .events,
        (1 << 5) | (1 << 9) | (1 << 10)
    );
    let mut big = pod(&ALL);
    big.annotations.insert("filler".into(), "x".repeat(10_000));
    let start = call("StartContainer", event_payload(&big, &container("3")));
    wire::write(
        &mut runtime,
        &Frame {
            conn: wire::PLUGIN_CONN,
            stream: 3,
            kind: wire::REQUEST,
            body: start.encode_to_vec(),
        },
    )
    .unwrap();
    let answer = reader.next(&mut runtime).unwrap();
    assert_eq!(answer.stream, 3);
    assert_eq!(
        api::Response::decode(&answer.body[..]).unwrap().status,
        None
    );
    assert_eq!(
        read(
            &root,
            "sys/devices/system/cpu/cpu3/cpufreq/scaling_governor"
        ),
        "performance"
    );
    // a method it does not have: Unimplemented, so the runtime falls back
    let other = call("PostStartContainer", Vec::new());
    wire::write(
        &mut runtime,
        &Frame {
            conn: wire::PLUGIN_CONN,
            stream: 5,
            kind: wire::REQUEST,
            body: other.encode_to_vec(),
        },
    )
    .unwrap();
    let answer = reader.next(&mut runtime).unwrap();
    let status = api::Response::decode(&answer.body[..])
        .unwrap()
        .status
        .unwrap();
    assert_eq!(status.code, api::UNIMPLEMENTED);
    // the runtime goes away: serve returns
    drop(runtime);
    let ended = server.join().unwrap();
    assert!(ended.is_err(), "a closed connection ends serve");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
}

#[test]
fn a_container_the_restarted_runtime_does_not_list_yet_is_kept_while_its_process_lives() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let sys = machine(root);
    // the kernel's stat line has the start time (field 22)
    std::fs::write(
        root.join("proc/100/stat"),
        "100 (pinned-inside) S 1 100 100 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 4242 0 0\n",
    )
    .unwrap();
    let before = tree(root);
    let irqbalance = FakeIrqbalance::default();
    let lines = RefCell::new(Vec::<String>::new());
    let log = |s: &str| lines.borrow_mut().push(s.to_string());
    let mut plugin = Plugin::new(&sys, &irqbalance, &log).unwrap();
    // the container's process is the fixture's pid 100
    let (p, mut c) = (pod(&ALL), container("2-3"));
    c.pid = 100;
    plugin
        .call("StartContainer", &event_payload(&p, &c))
        .unwrap();
    let applied = tree(root);
    // containerd restarted: its first synchronisation lists the pod but
    // no container yet; the process lives, so nothing is given back
    plugin
        .call(
            "Synchronize",
            &sync_payload(std::slice::from_ref(&p), &[], false),
        )
        .unwrap();
    assert_eq!(plugin.containers().len(), 1);
    assert!(diff(&applied, &tree(root)).is_empty());
    assert!(
        lines
            .borrow()
            .iter()
            .any(|l| l.contains("its process 100 lives")),
        "{:?}",
        lines.borrow()
    );
    plugin.look_for_ended();
    assert_eq!(plugin.containers().len(), 1, "it still runs");
    // the process ends and no stop comes: given back at the next look
    std::fs::remove_dir_all(root.join("proc/100")).unwrap();
    let before_without_100: std::collections::BTreeMap<_, _> = before
        .into_iter()
        .filter(|(k, _)| !k.starts_with("proc/100/"))
        .collect();
    plugin.look_for_ended();
    assert!(plugin.containers().is_empty());
    let d = diff(&before_without_100, &tree(root));
    assert!(d.is_empty(), "not given back: {d:#?}");
}

/// Beside a shield (`cpushield on`), the plugin leaves the shield's CPUs'
/// IRQs to the shield and never places one there; whichever of the two
/// came first, once both are gone the machine is as it was, and what the
/// shield's `off` gives back onto a running pod's CPUs the plugin's next
/// look moves off again.
#[test]
fn beside_a_shield_the_plugin_leaves_its_irqs_to_it_and_the_machine_ends_as_it_was_either_way() {
    let only_irqs = [(pods::IRQ_LOAD_BALANCING, "disable")];
    let shield = CpuSet::parse_list("2-3").unwrap();
    let off_the_pod = |root: &Path| {
        let on = irqs_on(root, &shield);
        assert_eq!(on, vec!["0", "40"], "only the unmovable IRQs on 2-3");
    };
    for plugin_first in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let sys = machine(root);
        let before = tree(root);
        let irqbalance = FakeIrqbalance {
            own: Some((77, CpuSet::new())),
            ..Default::default()
        };
        let log = |_: &str| {};
        let mut plugin = Plugin::new(&sys, &irqbalance, &log).unwrap();
        let (p, c) = (pod(&only_irqs), container("2-3"));
        let told = || irqbalance.told.borrow().clone();
        let on = |args: &[&str]| {
            let o = cpushield(root, args);
            assert!(
                o.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        };
        if plugin_first {
            plugin
                .call("StartContainer", &event_payload(&p, &c))
                .unwrap();
            off_the_pod(root);
            on(&["on", "2-3"]);
            // the pod stops under the shield: the plugin's values from
            // before wait (written now they would put IRQ 24 on CPU 2)
            plugin
                .call("StopContainer", &event_payload(&p, &c))
                .unwrap();
            off_the_pod(root);
            assert!(root.join(cpushield::nri::changes::JOURNAL).exists());
            assert_eq!(
                told(),
                vec![Some("2-3".to_string())],
                "irqbalance keeps the ban under the shield"
            );
            on(&["off"]);
            plugin.look_for_ended();
            assert_eq!(
                told().last(),
                Some(&None),
                "its ban given back once the shield is gone"
            );
        } else {
            on(&["on", "2-3"]);
            let shielded = tree(root);
            plugin
                .call("StartContainer", &event_payload(&p, &c))
                .unwrap();
            assert!(
                diff(&shielded, &tree(root)).is_empty(),
                "the shield holds the pod's CPUs' IRQs: the plugin changes nothing"
            );
            on(&["off"]);
            assert_eq!(
                read(root, "proc/irq/24/smp_affinity_list"),
                "2",
                "off gave IRQ 24 back"
            );
            assert!(told().is_empty(), "the shield bans the pod's CPUs already");
            plugin.look_for_ended();
            off_the_pod(root);
            assert_eq!(read(root, "proc/irq/24/smp_affinity_list"), "0-1");
            assert_eq!(
                told(),
                vec![Some("2-3".to_string())],
                "banned again after off"
            );
            plugin
                .call("StopContainer", &event_payload(&p, &c))
                .unwrap();
            assert_eq!(told().last(), Some(&None));
        }
        let d = diff(&before, &tree(root));
        assert!(
            d.is_empty(),
            "plugin first: {plugin_first}: not given back: {d:#?}"
        );
        assert!(!root.join(cpushield::nri::changes::JOURNAL).exists());
    }
}

/// One plugin serves a node: a second one (a DaemonSet's beside the
/// packaged unit) waits while the first holds the lock, and `--undo`
/// beside a running plugin is refused with nothing changed.
#[test]
fn a_second_plugin_waits_for_the_first_and_undo_beside_a_running_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let sys = machine(root);
    let before = tree(root);
    let held = cpushield::nri::take_lock(&sys)
        .unwrap()
        .expect("the lock is free");
    let me = std::process::id() as i32;
    assert_eq!(cpushield::nri::take_lock(&sys).unwrap().err(), Some(me));
    let o = cpushield(root, &["nri", "--undo"]);
    assert!(!o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            "another cpushield nri (pid {me}) serves this node"
        )),
        "{err}"
    );
    assert!(diff(&before, &tree(root)).is_empty());
    // A second plugin waits, saying so once, and ends at SIGTERM.
    let second = std::process::Command::new(env!("CARGO_BIN_EXE_cpushield"))
        .arg("--root")
        .arg(root)
        .args(["nri", "--socket", "run/none.sock"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(second.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = second.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("this one waits").count(), 1, "{err}");
    assert!(
        !err.contains("no runtime at"),
        "it dialled while waiting: {err}"
    );
    drop(held);
    let o = cpushield(root, &["nri", "--undo"]);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn on_cri_o_the_plugin_serves_no_container_and_gives_back_what_it_served_before() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let sys = machine(root);
    let before = tree(root);
    let irqbalance = FakeIrqbalance::default();
    let lines = RefCell::new(Vec::<String>::new());
    let log = |s: &str| lines.borrow_mut().push(s.to_string());
    let (p, c) = (pod(&ALL), container("2-3"));
    // served on containerd, then the node's runtime became CRI-O
    {
        let mut plugin = Plugin::new(&sys, &irqbalance, &log).unwrap();
        plugin
            .call("StartContainer", &event_payload(&p, &c))
            .unwrap();
    }
    assert_ne!(before, tree(root));
    let crio = api::ConfigureRequest {
        runtime_name: cpushield::nri::CRIO_RUNTIME.into(),
        runtime_version: "1.34.0".into(),
        ..Default::default()
    };
    let mut plugin = Plugin::new(&sys, &irqbalance, &log).unwrap();
    plugin.call("Configure", &crio.encode_to_vec()).unwrap();
    // the same container listed running: CRI-O's hooks own it, given back
    plugin
        .call(
            "Synchronize",
            &sync_payload(std::slice::from_ref(&p), std::slice::from_ref(&c), false),
        )
        .unwrap();
    assert!(plugin.containers().is_empty());
    let d = diff(&before, &tree(root));
    assert!(d.is_empty(), "not given back: {d:#?}");
    // a container started on CRI-O: nothing written
    plugin
        .call("StartContainer", &event_payload(&p, &c))
        .unwrap();
    assert!(plugin.containers().is_empty());
    assert!(diff(&before, &tree(root)).is_empty());
    assert!(!root.join(cpushield::nri::changes::JOURNAL).exists());
    let said = lines.borrow().join("\n");
    assert!(said.contains("CRI-O's high-performance hooks"), "{said}");
}
