//! A real-time task still running on the shield when it goes (a busy
//! poller, the regression of Debian 12 hanging in `off`), on fixture roots:
//! `off` keeps it on its CPUs and names it; `run --fifo` on PREEMPT_RT
//! raises the CPU's softirq, timer and RCU threads above it; a `move`
//! waits for the lock instead of failing.

mod common;

use std::fs;
use std::path::Path;

use common::{cpushield, part, standard, task, text};
use cpushield::sys::fixture::{self, CgroupLayout, FixtureConfig};
use cpushield::sys::procfs::{self, Hierarchy, PF_KTHREAD, PF_NO_SETAFFINITY};
use cpushield::sys::Sys;
use cpushield::CpuSet;

fn cpus(list: &str) -> CpuSet {
    CpuSet::parse_list(list).unwrap()
}

fn json(o: &std::process::Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", text(o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Makes thread `tid` of `pid` run under SCHED_FIFO `priority`, as the
/// fixture keeps what `sched_setattr` set.
fn make_fifo(root: &Path, pid: i32, tid: i32, priority: u32) {
    let attr = serde_json::json!({
        "policy": 1, "flags": 0, "nice": 0, "priority": priority,
        "runtime_ns": 0, "deadline_ns": 0, "period_ns": 0
    });
    fs::write(
        root.join(format!("proc/{pid}/task/{tid}/.sched")),
        attr.to_string(),
    )
    .unwrap();
}

/// The fixture's scheduling of a thread as (policy, priority), `None`
/// while never set.
fn sched(root: &Path, tid: i32) -> Option<(u64, u64)> {
    let text = fs::read_to_string(root.join(format!("proc/{tid}/task/{tid}/.sched"))).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    Some((v["policy"].as_u64()?, v["priority"].as_u64()?))
}

fn thread(sys: &Sys, pid: i32, tid: i32, h: Hierarchy) -> procfs::Thread {
    procfs::read_thread(sys, pid, tid, h).unwrap().unwrap()
}

/// The standard v2 machine with a task (pid 300, on every CPU) moved onto
/// CPU 3 of the shield 2-3, made SCHED_FIFO `priority` when one is given.
fn task_on_cpu3(name: &str, priority: Option<u32>) -> (tempfile::TempDir, Sys) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let sys = standard(root, CgroupLayout::V2, FixtureConfig::default());
    fixture::add_process(&sys, 300, &[task(name, 0, "0-3")]).unwrap();
    assert!(cpushield(root, &["on", "2-3"]).status.success());
    let o = cpushield(root, &["move", "300", "--in", "--cpu", "3"]);
    assert!(o.status.success(), "{}", text(&o));
    if let Some(p) = priority {
        make_fifo(root, 300, 300, p);
    }
    (dir, sys)
}

/// A poller (pid 300, two threads, on every CPU) moved onto CPU 3 of the
/// shield 2-3 and made SCHED_FIFO 80, still there when `off` runs.
fn off_keeps_the_poller_on_its_cpu(layout: CgroupLayout, h: Hierarchy, cgroup_after: &str) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let sys = standard(root, layout, FixtureConfig::default());
    fixture::add_process(
        &sys,
        300,
        &[task("poller", 0, "0-3"), task("poller-io", 0, "0-3")],
    )
    .unwrap();
    let throttling = root.join("proc/sys/kernel/sched_rt_runtime_us");
    fs::write(&throttling, "950000\n").unwrap();
    let o = cpushield(root, &["on", "2-3", "--tune=all,rt-throttling"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(fs::read_to_string(&throttling).unwrap().trim(), "-1");
    let o = cpushield(root, &["move", "300", "--in", "--cpu", "3"]);
    assert!(o.status.success(), "{}", text(&o));
    make_fifo(root, 300, 300, 80);
    let off = json(&cpushield(root, &["off", "--json"]));
    let kept = off["kept_realtime"].as_array().expect("kept_realtime");
    assert_eq!(kept.len(), 1, "only the SCHED_FIFO thread: {off}");
    assert_eq!(kept[0]["tid"], 300);
    assert_eq!(kept[0]["scheduling"], "SCHED_FIFO 80");
    assert_eq!(kept[0]["cpus"], "3");
    assert_eq!(kept[0]["before"], "0-3");
    assert!(off["failed"].as_array().unwrap().is_empty(), "{off}");
    // As the kernel holds it: back in its cgroup, still on CPU 3 only; its
    // ordinary thread got its CPUs back.
    let rt = thread(&sys, 300, 300, h);
    assert_eq!(
        (rt.cgroup.as_str(), rt.cpus_allowed),
        (cgroup_after, cpus("3"))
    );
    let other = thread(&sys, 300, 301, h);
    assert_eq!(other.cpus_allowed, cpus("0-3"));
    // The shield is gone and the rest given back as before.
    assert!(!root.join("run/cpushield/journal/state.json").exists());
    assert_eq!(fs::read_to_string(&throttling).unwrap().trim(), "950000");
    // People read what became of it.
    let o = cpushield(root, &["status"]);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn off_keeps_a_real_time_task_on_its_cpu_on_cgroup_v2() {
    off_keeps_the_poller_on_its_cpu(CgroupLayout::V2, Hierarchy::Unified, "/");
}

#[test]
fn off_keeps_a_real_time_task_on_its_cpu_on_cgroup_v1() {
    off_keeps_the_poller_on_its_cpu(CgroupLayout::V1, Hierarchy::CpusetV1, "/");
}

#[test]
fn off_names_the_kept_task_and_how_to_give_its_cpus_back() {
    let (dir, _sys) = task_on_cpu3("poller", Some(99));
    let root = dir.path();
    let o = cpushield(root, &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("poller (pid 300, thread 300), SCHED_FIFO 99: kept on CPUs 3; before cpushield placed it: CPUs 0-3")
            && out.contains("taskset -a -pc 0-3 300"),
        "{out}"
    );
}

#[test]
fn off_gives_an_ordinary_task_inside_its_cpus_back_as_before() {
    let (dir, sys) = task_on_cpu3("worker", None);
    let root = dir.path();
    let off = json(&cpushield(root, &["off", "--json"]));
    assert_eq!(off["kept_realtime"], serde_json::json!([]), "{off}");
    assert_eq!(
        thread(&sys, 300, 300, Hierarchy::Unified).cpus_allowed,
        cpus("0-3")
    );
}

/// The standard machine on PREEMPT_RT with CPU 3's timer and RCU threads.
fn preempt_rt(cmdline: &str) -> (tempfile::TempDir, Sys) {
    let dir = tempfile::tempdir().unwrap();
    let sys = standard(dir.path(), CgroupLayout::V2, FixtureConfig::default());
    for (pid, name, cpu) in [
        (21, "ktimers/3", "3"),
        (23, "rcuc/3", "3"),
        (24, "rcuc/1", "1"),
    ] {
        fixture::add_process(
            &sys,
            pid,
            &[task(name, PF_KTHREAD | PF_NO_SETAFFINITY, cpu)],
        )
        .unwrap();
    }
    for tid in [21, 23, 24] {
        make_fifo(dir.path(), tid, tid, 1);
    }
    fs::write(
        dir.path().join("proc/sys/kernel/version"),
        "#1 SMP PREEMPT_RT Debian 6.12.118-1 (2026-11-01)\n",
    )
    .unwrap();
    fs::write(dir.path().join("proc/cmdline"), format!("{cmdline}\n")).unwrap();
    // What the kernel took of nohz_full=, as sysfs shows it ("(null)": none).
    let nohz_full = cmdline
        .split_whitespace()
        .find_map(|w| w.strip_prefix("nohz_full="))
        .unwrap_or("(null)");
    let sysfs = dir.path().join("sys/devices/system/cpu/nohz_full");
    fs::create_dir_all(sysfs.parent().unwrap()).unwrap();
    fs::write(sysfs, format!("{nohz_full}\n")).unwrap();
    (dir, sys)
}

#[test]
fn run_fifo_on_preempt_rt_raises_the_cpus_kernel_threads_above_it_and_off_puts_them_back() {
    let (dir, _sys) = preempt_rt("root=/dev/vda rw");
    let root = dir.path();
    assert!(cpushield(root, &["on", "2-3"]).status.success());
    let o = cpushield(root, &["run", "--cpu", "3", "--fifo", "80", "--", "true"]);
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("raised")
            && err.contains("ksoftirqd/3 SCHED_FIFO 81")
            && err.contains("ktimers/3 SCHED_FIFO 82")
            && err.contains("rcuc/3 SCHED_FIFO 83"),
        "{err}"
    );
    // What the kernel holds: CPU 3's threads above 80, CPU 1's untouched.
    assert_eq!(sched(root, 13), Some((1, 81)));
    assert_eq!(sched(root, 21), Some((1, 82)));
    assert_eq!(sched(root, 23), Some((1, 83)));
    assert_eq!(sched(root, 24), Some((1, 1)));
    // A second task at a lower priority changes nothing: they are above it.
    let o = cpushield(root, &["run", "--cpu", "3", "--fifo", "50", "--", "true"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("raised"));
    assert!(cpushield(root, &["off"]).status.success());
    assert_eq!(sched(root, 21), Some((1, 1)));
    assert_eq!(sched(root, 23), Some((1, 1)));
    assert_eq!(
        sched(root, 13).map_or(0, |(p, _)| p),
        0,
        "ksoftirqd/3 ordinary again"
    );
}

#[test]
fn run_fifo_leaves_rcuc_alone_where_the_boot_line_offloads_rcu() {
    let (dir, _sys) = preempt_rt("root=/dev/vda nohz_full=2-3 rcu_nocbs=2-3");
    let root = dir.path();
    assert!(cpushield(root, &["on", "2-3"]).status.success());
    let o = cpushield(root, &["run", "--cpu", "3", "--fifo", "80", "--", "true"]);
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("rcuc left alone on CPUs 3"), "{err}");
    assert_eq!(sched(root, 23), Some((1, 1)));
    assert_eq!(sched(root, 21), Some((1, 82)));
    assert!(cpushield(root, &["off"]).status.success());
}

#[test]
fn run_fifo_on_a_kernel_without_preempt_rt_raises_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    standard(root, CgroupLayout::V2, FixtureConfig::default());
    assert!(cpushield(root, &["on", "2-3"]).status.success());
    let o = cpushield(root, &["run", "--cpu", "3", "--fifo", "80", "--", "true"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("raised"));
    assert_eq!(sched(root, 13), None);
    assert!(cpushield(root, &["off"]).status.success());
}

#[test]
fn off_gives_rt_throttling_back_before_anything_else_and_the_guard_last() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    standard(root, CgroupLayout::V2, FixtureConfig::default());
    for (file, value) in [
        ("proc/sys/kernel/sched_rt_runtime_us", "950000"),
        ("proc/sys/kernel/watchdog", "1"),
        ("proc/sys/vm/stat_interval", "1"),
    ] {
        fs::create_dir_all(root.join(file).parent().unwrap()).unwrap();
        fs::write(root.join(file), format!("{value}\n")).unwrap();
    }
    let o = cpushield(
        root,
        &[
            "on",
            "2-3",
            "--tune=all,rt-throttling,watchdog,nmi-watchdog",
            "--guard",
            "on",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let plan = json(&cpushield(root, &["off", "--dry-run", "--json"]));
    let lines: Vec<&str> = plan["would_undo"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    let at = |what: &str| {
        lines
            .iter()
            .position(|l| l.contains(what))
            .unwrap_or_else(|| panic!("{what} not in {lines:#?}"))
    };
    assert!(
        at("sched_rt_runtime_us") < at("kernel/watchdog"),
        "{lines:#?}"
    );
    assert!(
        at("sched_rt_runtime_us") < at("stat_interval"),
        "{lines:#?}"
    );
    // After every other change; only the affinities, restored at the very
    // end, are listed behind it.
    assert!(
        lines[at("starvation guard") + 1..]
            .iter()
            .all(|l| l.starts_with("the affinity of")),
        "{lines:#?}"
    );
    assert!(cpushield(root, &["off"]).status.success());
}

#[test]
fn a_change_in_place_that_takes_a_real_time_tasks_cpus_is_refused_and_changes_nothing() {
    let (dir, _sys) = task_on_cpu3("poller", Some(80));
    let root = dir.path();
    let before = common::tree(root);
    for args in [&["on", "2"][..], &["on", "2", "--dry-run"][..]] {
        let o = cpushield(root, args);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("poller (pid 300, thread 300, SCHED_FIFO 80 on CPUs 3)")
                && err.contains("cpushield move 300 --in --cpu 2")
                && err.contains("nothing was changed"),
            "{err}"
        );
        assert_eq!(
            common::diff(&before, &common::tree(root)),
            Vec::<String>::new()
        );
    }
    // An ordinary task there leaves with the CPUs, as before.
    fs::remove_file(root.join("proc/300/task/300/.sched")).unwrap();
    let o = cpushield(root, &["on", "2"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(cpushield(root, &["off"]).status.success());
}

#[test]
fn move_waits_for_another_cpushield_instead_of_failing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let sys = standard(root, CgroupLayout::V2, FixtureConfig::default());
    fixture::add_process(&sys, 300, &[task("service", 0, "0-3")]).unwrap();
    assert!(cpushield(root, &["on", "2-3"]).status.success());
    let held = cpushield::shield::journal::lock(&sys).unwrap();
    let mover = {
        let root = root.to_path_buf();
        std::thread::spawn(move || cpushield(&root, &["move", "300", "--in", "--cpu", "3"]))
    };
    std::thread::sleep(std::time::Duration::from_millis(700));
    assert!(!mover.is_finished(), "move did not wait for the lock");
    drop(held);
    let o = mover.join().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("waiting for it"),
        "{}",
        text(&o)
    );
    assert_eq!(
        thread(&sys, 300, 300, Hierarchy::Unified).cpus_allowed,
        cpus("3")
    );
    assert!(cpushield(root, &["off"]).status.success());
}

#[test]
fn run_fifo_99_on_preempt_rt_reserves_deadline_time_for_the_cpus_kernel_threads_with_throttling_off(
) {
    let (dir, _sys) = preempt_rt("root=/dev/vda rw");
    let root = dir.path();
    let throttling = root.join("proc/sys/kernel/sched_rt_runtime_us");
    fs::write(&throttling, "950000\n").unwrap();
    assert!(cpushield(root, &["on", "2-3"]).status.success());
    // Throttling on: the kernel takes no SCHED_DEADLINE for a thread bound
    // to one CPU, and no priority is above 99: nothing changed, said why.
    let o = cpushield(root, &["run", "--cpu", "3", "--fifo", "99", "--", "true"]);
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no SCHED_FIFO priority is left above 99") && err.contains("95 or less"),
        "{err}"
    );
    assert_eq!(sched(root, 23), Some((1, 1)));
    assert!(cpushield(root, &["off"]).status.success());
    // Throttling off: each gets the reservation, put back by off.
    assert!(cpushield(root, &["on", "2-3", "--tune=rt-throttling"])
        .status
        .success());
    let o = cpushield(root, &["run", "--cpu", "3", "--fifo", "99", "--", "true"]);
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("SCHED_DEADLINE reservation (200 µs every 10 ms)"),
        "{err}"
    );
    for tid in [13, 21, 23] {
        assert_eq!(sched(root, tid).map(|(p, _)| p), Some(6), "thread {tid}");
    }
    assert_eq!(sched(root, 24), Some((1, 1)));
    assert!(cpushield(root, &["off"]).status.success());
    assert_eq!(sched(root, 21), Some((1, 1)));
    assert_eq!(sched(root, 23), Some((1, 1)));
    assert_eq!(fs::read_to_string(&throttling).unwrap().trim(), "950000");
}

#[test]
fn status_says_what_keeps_rcu_going_beside_a_real_time_task_on_preempt_rt() {
    let (dir, sys) = preempt_rt("root=/dev/vda rw");
    let root = dir.path();
    fixture::add_process(&sys, 300, &[task("poller", 0, "0-3")]).unwrap();
    assert!(cpushield(root, &["on", "2-3"]).status.success());
    assert!(cpushield(root, &["move", "300", "--in", "--cpu", "3"])
        .status
        .success());
    make_fifo(root, 300, 300, 80);
    let st = json(&cpushield(root, &["status", "--json"]));
    let rcu = part(&st, "kthreads")["data"]["rcu"]
        .as_array()
        .expect("rcu rows on PREEMPT_RT");
    assert_eq!(rcu.len(), 2, "{st}");
    assert_eq!(rcu[1]["cpu"], 3);
    assert_eq!(rcu[1]["rcuc"], "SCHED_FIFO 1");
    assert_eq!(rcu[1]["task_priority"], 80);
    assert_eq!(rcu[1]["starves"], true);
    assert_eq!(rcu[0]["starves"], false, "no task on CPU 2");
    let text_out = String::from_utf8_lossy(&cpushield(root, &["status"]).stdout).into_owned();
    assert!(
        text_out.contains("rcuc/3 SCHED_FIFO 1 BELOW the real-time task at 80"),
        "{text_out}"
    );
    // run --fifo 80 raises it: no longer below.
    assert!(
        cpushield(root, &["run", "--cpu", "3", "--fifo", "80", "--", "true"])
            .status
            .success()
    );
    let st = json(&cpushield(root, &["status", "--json"]));
    assert_eq!(
        part(&st, "kthreads")["data"]["rcu"][1]["rcuc"],
        "SCHED_FIFO 83"
    );
    assert_eq!(part(&st, "kthreads")["data"]["rcu"][1]["starves"], false);
    assert!(cpushield(root, &["off"]).status.success());
}
