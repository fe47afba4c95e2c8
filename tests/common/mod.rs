//! Shared fixture set-up for the integration tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use cpushield::sys::fixture::{self, CgroupLayout, FixtureBuilder, FixtureConfig, FixtureTask};
use cpushield::sys::procfs::{PF_KTHREAD, PF_NO_SETAFFINITY};
use cpushield::sys::Sys;
use cpushield::CpuSet;

pub fn task(name: &str, flags: u64, cpus: &str) -> FixtureTask {
    FixtureTask {
        name: name.into(),
        flags,
        cpus: CpuSet::parse_list(cpus).unwrap(),
    }
}

/// A 4-CPU machine: init (2 threads), kthreadd, per-CPU ksoftirqd, a task
/// pinned to CPU 3, a task on 0-1; IRQ 0 refuses (EIO), IRQ 40 is a
/// kernel-managed queue (EPERM), IRQ 24 keeps its effective affinity.
pub fn standard(root: &Path, layout: CgroupLayout, mut config: FixtureConfig) -> Sys {
    config
        .refuse
        .insert("proc/irq/0/smp_affinity_list".into(), "EIO".into());
    config
        .refuse
        .insert("proc/irq/40/smp_affinity_list".into(), "EPERM".into());
    config.effective_lag.push(24);
    let sys = FixtureBuilder::new(root, 4)
        .layout(layout)
        .config(config)
        .build()
        .unwrap();
    fixture::add_process(
        &sys,
        1,
        &[
            task("init", 0x400100, "0-3"),
            task("init-worker", 0x40, "0-3"),
        ],
    )
    .unwrap();
    fixture::add_process(&sys, 3, &[task("kthreadd", PF_KTHREAD, "0-3")]).unwrap();
    for cpu in 0..4 {
        let pid = 10 + cpu;
        fixture::add_process(
            &sys,
            pid,
            &[task(
                &format!("ksoftirqd/{cpu}"),
                PF_KTHREAD | PF_NO_SETAFFINITY,
                &cpu.to_string(),
            )],
        )
        .unwrap();
    }
    fixture::add_process(&sys, 100, &[task("pinned-inside", 0, "3")]).unwrap();
    fixture::add_process(&sys, 101, &[task("housekeeper", 0, "0-1")]).unwrap();
    fixture::add_process(
        &sys,
        102,
        &[task("straddler", 0, "1-2"), task("straddler-t", 0, "2")],
    )
    .unwrap();
    for (irq, name, cpus) in [
        (0, "timer", "0-3"),
        (9, "acpi", "0-3"),
        (24, "eth0", "2"),
        (25, "ahci", "0-3"),
        (40, "virtio0-req.2", "2"),
    ] {
        fixture::add_irq(&sys, irq, name, cpus).unwrap();
    }
    sys
}

/// A fixture machine of 4 CPUs with RDT hardware `model`, the L3 cache
/// of each CPU as `l3_of_cpu` says, cgroup v2.
pub fn rdt_machine(
    model: cpushield::sys::fixture::ResctrlModel,
    l3_of_cpu: Vec<u32>,
) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let config = FixtureConfig {
        resctrl: Some(cpushield::sys::fixture::ResctrlModel { l3_of_cpu, ..model }),
        ..Default::default()
    };
    standard(dir.path(), CgroupLayout::V2, config);
    dir
}

/// A command's `--json` output, parsed (the output in the panic if not).
pub fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(o)))
}

/// A file under the fixture root, which must exist.
pub fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The part of a `--json` report (`on`, `status`) that `component` reports
/// for itself.
pub fn part<'a>(report: &'a serde_json::Value, component: &str) -> &'a serde_json::Value {
    let parts = report["parts"].as_array();
    let found = parts.and_then(|p| p.iter().find(|p| p["component"] == component));
    found.unwrap_or_else(|| panic!("no part {component} in {report}"))
}

/// Every file under the root except cpushield's own run directory.
pub fn tree(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
        if rel == "run/cpushield" {
            continue;
        }
        if p.is_dir() {
            out.insert(format!("{rel}/"), String::new());
            walk(root, &p, out);
        } else {
            out.insert(rel, std::fs::read_to_string(&p).unwrap_or_default());
        }
    }
}

/// Differences between two trees, for assertion messages.
pub fn diff(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> Vec<String> {
    let mut d = Vec::new();
    for (k, v) in a {
        match b.get(k) {
            None => d.push(format!("missing after: {k}")),
            Some(w) if w != v => d.push(format!("changed: {k}: {v:?} -> {w:?}")),
            _ => {}
        }
    }
    for k in b.keys() {
        if !a.contains_key(k) {
            d.push(format!("new after: {k}"));
        }
    }
    d
}

pub fn cpushield(root: &Path, args: &[&str]) -> Output {
    cpushield_env(root, args, &[])
}

pub fn cpushield_env(root: &Path, args: &[&str], env: &[(&str, String)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cpushield"));
    cmd.arg("--root").arg(root).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

pub fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The standard 4-CPU fixture booted by systemd: irqbalance.service runs in
/// system.slice (pid 200), the user's /etc/default/irqbalance bans nothing.
pub fn systemd_host(root: &Path) -> Sys {
    let sys = standard(root, CgroupLayout::V2, FixtureConfig::default());
    for (file, text) in [
        ("run/systemd/system/.keep", ""),
        ("run/systemd/transient/.keep", ""),
        ("lib/systemd/system/irqbalance.service", "[Service]\nEnvironmentFile=-/etc/default/irqbalance\nExecStart=/usr/sbin/irqbalance --foreground\n"),
        ("etc/default/irqbalance", "#IRQBALANCE_BANNED_CPULIST=\n"),
    ] {
        std::fs::create_dir_all(sys.path(file).parent().unwrap()).unwrap();
        std::fs::write(sys.path(file), text).unwrap();
    }
    for dir in [
        "sys/fs/cgroup/system.slice",
        "sys/fs/cgroup/system.slice/irqbalance.service",
    ] {
        sys.mkdir(dir).unwrap();
    }
    fixture::add_process(&sys, 200, &[task("irqbalance", 0, "0-3")]).unwrap();
    fixture::set_exe(&sys, 200, "/usr/sbin/irqbalance").unwrap();
    sys.write(
        "sys/fs/cgroup/system.slice/irqbalance.service/cgroup.procs",
        "200",
    )
    .unwrap();
    std::fs::write(sys.path("proc/200/environ"), "").unwrap();
    sys
}

/// For every k in 0..=total: `before_each()`, then `args` killed (SIGKILL)
/// after k kernel writes (for k < total it must die), then `off` must
/// succeed and give back the tree `before`, as `snapshot` reads it.
pub fn killed_at_every_write_then_off_gives_back(
    root: &Path,
    before: &BTreeMap<String, String>,
    snapshot: fn(&Path) -> BTreeMap<String, String>,
    args: &[&str],
    total: u64,
    before_each: impl Fn(),
) {
    for k in 0..=total {
        before_each();
        let o = cpushield_env(
            root,
            args,
            &[("CPUSHIELD_FIXTURE_CRASH_AFTER", k.to_string())],
        );
        if k < total {
            assert!(
                !o.status.success(),
                "k={k}: {args:?} should have been killed: {}",
                text(&o)
            );
        }
        let o = cpushield(root, &["off"]);
        assert!(o.status.success(), "k={k}: off failed: {}", text(&o));
        let d = diff(before, &snapshot(root));
        assert!(d.is_empty(), "k={k}: not restored: {d:#?}");
    }
}

/// The machine as `on` reads it, with every thread's name and flags read
/// (`Snapshot::read` reads those of each process's first thread only).
pub fn full_snapshot(sys: &Sys) -> cpushield::shield::snapshot::Snapshot {
    let mut snap =
        cpushield::shield::snapshot::Snapshot::read(sys, &cpushield::shield::tuned_overlap)
            .unwrap();
    cpushield::sys::procfs::read_stats(sys, &mut snap.threads, |_| true);
    snap
}

/// The journal's segment files under `root`, in order (not its state).
pub fn segments(root: &Path) -> Vec<std::path::PathBuf> {
    let dir = cpushield::shield::journal::Journal::dir_of(&Sys::at(root));
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap() != "state.json")
        .collect();
    files.sort();
    files
}

/// Every `.rs` file under `dir`, at any depth.
pub fn rust_sources(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(rust_sources(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out
}
