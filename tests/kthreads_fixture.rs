//! `on --kthreads-above PRIO` on fixture roots: the shielded CPUs' softirq,
//! timer and RCU threads raised above the user's priority, read back in
//! `on`'s report, and put back exactly by `off`.

mod common;

use std::fs;
use std::path::Path;

use common::{cpushield, part, standard, task, text};
use cpushield::sys::fixture::{self, CgroupLayout, FixtureConfig};
use cpushield::sys::procfs::{PF_KTHREAD, PF_NO_SETAFFINITY};

/// The scheduling the fixture keeps for a thread (what `sched_setattr`
/// set), as (policy, priority); `None` while it was never set.
fn sched(root: &Path, tid: i32) -> Option<(u64, u64)> {
    let text = fs::read_to_string(root.join(format!("proc/{tid}/task/{tid}/.sched"))).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    Some((v["policy"].as_u64()?, v["priority"].as_u64()?))
}

/// The standard machine plus PREEMPT_RT's timer and RCU threads of CPUs
/// 1 and 3 (pids 20-23).
fn machine() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let sys = standard(dir.path(), CgroupLayout::V2, FixtureConfig::default());
    for (pid, name, cpu) in [
        (20, "ktimers/1", "1"),
        (21, "ktimers/3", "3"),
        (22, "rcuc/1", "1"),
        (23, "rcuc/3", "3"),
    ] {
        fixture::add_process(
            &sys,
            pid,
            &[task(name, PF_KTHREAD | PF_NO_SETAFFINITY, cpu)],
        )
        .unwrap();
    }
    dir
}

#[test]
fn on_raises_the_shielded_cpus_kernel_threads_above_the_users_priority_and_off_puts_them_back() {
    let dir = machine();
    let root = dir.path();
    let o = cpushield(root, &["on", "2-3", "--kthreads-above", "80", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let raised: Vec<(String, String)> = part(&report, "kthreads")["data"]["raised"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["name"].as_str().unwrap().to_string(),
                k["scheduling"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want = |n: &str, s: &str| (n.to_string(), s.to_string());
    assert_eq!(
        raised,
        vec![
            want("ksoftirqd/2", "SCHED_FIFO 81"),
            want("ksoftirqd/3", "SCHED_FIFO 81"),
            want("ktimers/3", "SCHED_FIFO 82"),
            want("rcuc/3", "SCHED_FIFO 83"),
        ]
    );
    // What the kernel holds, not only what the report says.
    assert_eq!(sched(root, 13), Some((1, 81)));
    assert_eq!(sched(root, 21), Some((1, 82)));
    assert_eq!(sched(root, 23), Some((1, 83)));
    // The housekeeping CPUs' threads are left alone.
    assert_eq!(sched(root, 11), None);
    assert_eq!(sched(root, 20), None);
    assert_eq!(sched(root, 22), None);

    let o = cpushield(root, &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    for tid in [12, 13, 21, 23] {
        assert_eq!(
            sched(root, tid),
            Some((0, 0)),
            "task {tid} back to SCHED_OTHER"
        );
    }
}

#[test]
fn the_human_report_names_each_raised_thread_and_a_dry_run_changes_nothing() {
    let dir = machine();
    let root = dir.path();
    let o = cpushield(root, &["on", "3", "--kthreads-above", "50", "--dry-run"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("kernel threads to raise")
            && out.contains(
                "ksoftirqd/3 SCHED_FIFO 51, ktimers/3 SCHED_FIFO 52, rcuc/3 SCHED_FIFO 53"
            ),
        "{out}"
    );
    assert_eq!(sched(root, 13), None, "a dry run sets nothing");
    let o = cpushield(root, &["on", "3", "--kthreads-above", "50"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("kernel threads raised"),
        "{}",
        text(&o)
    );
    assert!(cpushield(root, &["off"]).status.success());
}

#[test]
fn a_priority_without_room_above_it_is_refused_and_nothing_changes() {
    let dir = machine();
    let root = dir.path();
    for bad in ["0", "96", "99"] {
        let o = cpushield(root, &["on", "2-3", "--kthreads-above", bad]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("--kthreads-above {bad}")) && err.contains("1 to 95"),
            "{err}"
        );
        assert!(!root.join("run/cpushield/journal/state.json").exists());
        assert_eq!(sched(root, 13), None);
    }
}

#[test]
fn run_fifo_on_preempt_rt_names_the_kernel_threads_below_it_until_they_are_raised() {
    let dir = machine();
    let root = dir.path();
    fs::write(
        root.join("proc/sys/kernel/version"),
        "#1 SMP PREEMPT_RT Debian 6.12.118-1 (2026-11-01)\n",
    )
    .unwrap();
    assert!(cpushield(root, &["on", "2-3"]).status.success());
    let run = |root: &Path| {
        let o = cpushield(
            root,
            &[
                "run",
                "--cpu",
                "3",
                "--fifo",
                "80",
                "--dry-run",
                "--",
                "true",
            ],
        );
        assert!(o.status.success(), "{}", text(&o));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let err = run(root);
    assert!(
        err.contains("ktimers/3 SCHED_OTHER")
            && err.contains("rcuc/3")
            && err.contains("ksoftirqd/3")
            && err.contains("--kthreads-above 80"),
        "{err}"
    );
    assert!(
        !err.contains("ktimers/1") && !err.contains("rcuc/2"),
        "only CPU 3's: {err}"
    );
    assert!(cpushield(root, &["on", "2-3", "--kthreads-above", "80"])
        .status
        .success());
    let err = run(root);
    assert!(!err.contains("below this task"), "{err}");
    assert!(cpushield(root, &["off"]).status.success());
}

/// `--irq eth0 --kthreads-above 80`: eth0's handler thread (`irq/24-eth0`,
/// SCHED_FIFO 50 as the kernel makes it) goes to 81 with the shield, the
/// thread of an IRQ that leaves the shield stays as it was, and `off` puts
/// it back.
#[test]
fn the_thread_of_an_irq_bound_to_the_shield_goes_above_the_task_and_back() {
    let dir = threaded_irqs();
    let root = dir.path();
    let o = cpushield(
        root,
        &[
            "on",
            "2-3",
            "--irq",
            "eth0",
            "--kthreads-above",
            "80",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let raised: Vec<String> = part(&report, "kthreads")["data"]["raised"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            format!(
                "{} {}",
                k["name"].as_str().unwrap(),
                k["scheduling"].as_str().unwrap()
            )
        })
        .collect();
    assert!(
        raised.contains(&"irq/24-eth0 SCHED_FIFO 81".to_string()),
        "{raised:?}"
    );
    assert!(
        !raised.iter().any(|r| r.starts_with("irq/9-")),
        "{raised:?}"
    );
    assert_eq!(sched(root, 30), Some((1, 81)));
    assert_eq!(sched(root, 31), Some((1, 50)));
    let o = cpushield(root, &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(sched(root, 30), Some((1, 50)), "off puts FIFO 50 back");
}

/// The standard machine with threaded IRQs: `irq/24-eth0` and its
/// secondary `irq/24-s-eth0` (pids 30, 32) and `irq/9-acpi` (31), each at
/// SCHED_FIFO 50 as the kernel starts them.
fn threaded_irqs() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let sys = standard(root, CgroupLayout::V2, FixtureConfig::default());
    for (pid, name) in [
        (30, "irq/24-eth0"),
        (31, "irq/9-acpi"),
        (32, "irq/24-s-eth0"),
    ] {
        fixture::add_process(
            &sys,
            pid,
            &[task(name, PF_KTHREAD | PF_NO_SETAFFINITY, "0-3")],
        )
        .unwrap();
        fs::write(
            root.join(format!("proc/{pid}/task/{pid}/.sched")),
            r#"{"policy":1,"priority":50,"nice":0,"runtime_ns":0,"deadline_ns":0,"period_ns":0,"flags":0}"#,
        )
        .unwrap();
    }
    dir
}

#[test]
fn irq_priority_sets_any_irqs_threads_by_name_or_number_over_kthreads_above_and_off_puts_them_back()
{
    let dir = threaded_irqs();
    let root = dir.path();
    let args = [
        "on",
        "2-3",
        "--irq",
        "eth0",
        "--kthreads-above",
        "80",
        "--irq-priority",
        "eth*:90,9:60",
        "--json",
    ];
    let o = cpushield(root, &args);
    assert!(o.status.success(), "{}", text(&o));
    // What the kernel holds: the name pattern over --kthreads-above's 81
    // for both threads of IRQ 24; IRQ 9, not on the shield, by number.
    assert_eq!(sched(root, 30), Some((1, 90)));
    assert_eq!(sched(root, 32), Some((1, 90)));
    assert_eq!(sched(root, 31), Some((1, 60)));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let raised = part(&report, "kthreads")["data"]["raised"].to_string();
    assert!(
        raised.contains("irq/9-acpi") && raised.contains("SCHED_FIFO 60"),
        "{raised}"
    );
    let o = cpushield(root, &["status"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // The same request again changes nothing.
    let again = cpushield(root, &args[..args.len() - 1]);
    assert!(again.status.success(), "{}", text(&again));
    let o = cpushield(root, &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    for tid in [30, 31, 32] {
        assert_eq!(
            sched(root, tid),
            Some((1, 50)),
            "task {tid}: off puts FIFO 50 back"
        );
    }
}

#[test]
fn irq_priority_that_names_no_irq_or_one_without_a_thread_is_refused_and_nothing_changes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    standard(root, CgroupLayout::V2, FixtureConfig::default());
    for (spec, says) in [
        ("eth0:85", "threadirqs"),
        ("nosuch*:85", "matches no IRQ"),
        ("eth0", "IRQ:PRIO"),
        ("eth0:99", "1 to 98"),
    ] {
        let o = cpushield(root, &["on", "2-3", "--irq-priority", spec]);
        assert_eq!(o.status.code(), Some(2), "{spec}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.starts_with("cpushield:") && err.contains(says),
            "{spec}: {err}"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "{spec}: one line: {err}");
        assert!(
            !root.join("run/cpushield/journal/state.json").exists(),
            "{spec}"
        );
    }
}
