//! Tuning knobs, `audit` and `boot-args` against fixture roots: every knob
//! applied and undone exactly through the journal, missing and read-only
//! files skipped with a note, refused writes reported; every audit finding.

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use common::*;
use cpushield::audit::{self, AuditReport, Severity};
use cpushield::sys::fixture::{self, CgroupLayout, FixtureBuilder, FixtureConfig};
use cpushield::sys::Sys;
use cpushield::CpuSet;

fn cpus(s: &str) -> CpuSet {
    CpuSet::parse_list(s).unwrap()
}

fn json(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(o)))
}

/// Knob files of a stock kernel, before tuning.
const KNOB_FILES: &[(&str, &str)] = &[
    ("proc/sys/kernel/sched_rt_runtime_us", "950000\n"),
    ("proc/sys/vm/stat_interval", "1\n"),
    ("sys/bus/workqueue/devices/writeback/cpumask", "f\n"),
    ("sys/bus/workqueue/devices/writeback/numa", "1\n"),
    ("proc/sys/kernel/watchdog", "1\n"),
    ("proc/sys/kernel/nmi_watchdog", "1\n"),
    ("proc/sys/kernel/soft_watchdog", "1\n"),
    (
        "sys/devices/system/machinecheck/machinecheck2/check_interval",
        "300\n",
    ),
    (
        "sys/devices/system/cpu/cpu2/cpufreq/scaling_governor",
        "powersave\n",
    ),
    (
        "sys/devices/system/cpu/cpu3/cpufreq/scaling_governor",
        "schedutil\n",
    ),
    ("proc/sys/vm/dirty_writeback_centisecs", "500\n"),
    ("sys/class/net/eth0/queues/rx-0/rps_cpus", "0\n"),
    ("sys/class/net/eth0/queues/rx-1/rps_cpus", "c\n"),
    ("sys/class/net/eth0/queues/tx-0/xps_cpus", "f\n"),
    ("proc/sys/net/core/rps_default_mask", "e\n"),
    ("proc/sys/kernel/timer_migration", "0\n"),
    ("proc/sys/vm/overcommit_memory", "0\n"),
];

/// The standard fixture plus the knob files; `dirty_writeback_centisecs`
/// refuses writes (EIO), `nmi_watchdog` is read-only (0444, no hardware
/// watchdog), machinecheck3 is missing.
fn tunable(root: &Path) -> Sys {
    let mut config = FixtureConfig::default();
    config
        .refuse
        .insert("proc/sys/vm/dirty_writeback_centisecs".into(), "EIO".into());
    let sys = standard(root, CgroupLayout::V2, config);
    for (rel, contents) in KNOB_FILES {
        put(&sys, rel, contents);
    }
    let nmi = sys.path("proc/sys/kernel/nmi_watchdog");
    std::fs::set_permissions(&nmi, std::fs::Permissions::from_mode(0o444)).unwrap();
    sys
}

/// Writes `contents` to the file `rel` under the fixture root, making its
/// directories.
fn put(sys: &Sys, rel: &str, contents: &str) {
    let p = sys.path(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, contents).unwrap();
}

fn read(sys: &Sys, rel: &str) -> String {
    sys.read_trimmed(rel).unwrap()
}

#[test]
fn every_knob_applies_and_off_restores_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let sys = tunable(dir.path());
    let before = tree(dir.path());

    let o = cpushield(
        dir.path(),
        &[
            "on",
            "2-3",
            "--tune=all,rt-throttling,watchdog,nmi-watchdog",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let r = json(&o);
    for (rel, want) in [
        ("proc/sys/kernel/sched_rt_runtime_us", "-1"),
        ("proc/sys/vm/stat_interval", "1000"),
        ("sys/bus/workqueue/devices/writeback/cpumask", "3"),
        ("sys/bus/workqueue/devices/writeback/numa", "0"),
        ("proc/sys/kernel/watchdog", "0"),
        (
            "sys/devices/system/machinecheck/machinecheck2/check_interval",
            "0",
        ),
        (
            "sys/devices/system/cpu/cpu2/cpufreq/scaling_governor",
            "performance",
        ),
        (
            "sys/devices/system/cpu/cpu3/cpufreq/scaling_governor",
            "performance",
        ),
        ("sys/class/net/eth0/queues/rx-0/rps_cpus", "0"),
        ("sys/class/net/eth0/queues/rx-1/rps_cpus", "3"),
        ("sys/class/net/eth0/queues/tx-0/xps_cpus", "3"),
        // Devices made later start off the shield: CPUs 1-3 become 1.
        ("proc/sys/net/core/rps_default_mask", "2"),
        ("proc/sys/kernel/timer_migration", "1"),
        // Not in `all`: strict overcommit only by name.
        ("proc/sys/vm/overcommit_memory", "0"),
        // Read-only and refused ones keep their value.
        ("proc/sys/kernel/nmi_watchdog", "1"),
        ("proc/sys/vm/dirty_writeback_centisecs", "500"),
        // The shield's own write of the workqueue mask is not repeated.
        ("sys/devices/virtual/workqueue/cpumask", "3"),
    ] {
        assert_eq!(read(&sys, rel), want, "{rel}");
    }
    let notes = r["notes"].as_array().unwrap();
    let note = |kind: &str, knob: &str| {
        notes
            .iter()
            .find(|n| n["kind"] == kind && n["knob"] == knob)
            .unwrap_or_else(|| panic!("no {kind} note on {knob}: {notes:?}"))
    };
    assert!(
        note("tune_missing", "machinecheck")["files"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!(
                "sys/devices/system/machinecheck/machinecheck3/check_interval"
            )),
        "{notes:?}"
    );
    assert_eq!(
        note("tune_read_only", "nmi-watchdog")["files"],
        serde_json::json!(["proc/sys/kernel/nmi_watchdog"])
    );
    let refused = r["other_refused"].to_string();
    assert!(
        refused.contains("/proc/sys/vm/dirty_writeback_centisecs") && refused.contains("EIO"),
        "{refused}"
    );

    // The watchdog is journaled with its captured value and no read-back.
    let entries = cpushield::shield::journal::read_entries(&sys).unwrap();
    let wd = entries
        .iter()
        .find(|e| {
            matches!(&e.action, cpushield::shield::change::Action::Write { path, .. } if path == "proc/sys/kernel/watchdog")
        })
        .expect("watchdog journaled");
    assert_eq!(
        serde_json::to_value(&wd.action).unwrap()["undo"],
        serde_json::json!({"value": "1"})
    );
    assert_eq!(
        serde_json::to_value(&wd.action).unwrap()["check"],
        serde_json::json!("none")
    );

    let o = cpushield(dir.path(), &["off", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let after = tree(dir.path());
    assert!(before == after, "{:#?}", diff(&before, &after));
}

#[test]
fn named_knobs_only_and_overcommit_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let sys = tunable(dir.path());
    let before = tree(dir.path());
    let o = cpushield(dir.path(), &["on", "2-3", "--tune=vmstat,overcommit"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(read(&sys, "proc/sys/vm/stat_interval"), "1000");
    assert_eq!(read(&sys, "proc/sys/vm/overcommit_memory"), "2");
    assert_eq!(read(&sys, "proc/sys/kernel/sched_rt_runtime_us"), "950000");
    assert_eq!(read(&sys, "proc/sys/kernel/watchdog"), "1");
    assert!(cpushield(dir.path(), &["off"]).status.success());
    let after = tree(dir.path());
    assert!(before == after, "{:#?}", diff(&before, &after));
}

#[test]
fn unknown_knob_changes_nothing_and_lists_names() {
    let dir = tempfile::tempdir().unwrap();
    tunable(dir.path());
    let before = tree(dir.path());
    let o = cpushield(dir.path(), &["on", "2-3", "--tune=vmstat,bogus"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("\"bogus\""), "{err}");
    assert!(
        err.contains("rt-throttling") && err.contains("nothing was changed"),
        "{err}"
    );
    let after = tree(dir.path());
    assert!(before == after, "{:#?}", diff(&before, &after));
}

#[test]
fn knobs_with_no_files_are_skipped_with_notes() {
    let dir = tempfile::tempdir().unwrap();
    standard(dir.path(), CgroupLayout::V2, FixtureConfig::default());
    let before = tree(dir.path());
    let o = cpushield(
        dir.path(),
        &[
            "on",
            "2-3",
            "--tune=all,rt-throttling,watchdog,nmi-watchdog",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let report = json(&o);
    let notes = report["notes"].as_array().unwrap();
    for k in [
        "rt-throttling",
        "vmstat",
        "watchdog",
        "governor",
        "net-queues",
    ] {
        assert!(
            notes.iter().any(|n| n["knob"] == k
                && n["kind"]
                    .as_str()
                    .is_some_and(|kind| kind.starts_with("tune_"))),
            "{k}: {notes:?}"
        );
    }
    assert!(cpushield(dir.path(), &["off"]).status.success());
    let after = tree(dir.path());
    assert!(before == after, "{:#?}", diff(&before, &after));
}

#[test]
fn tune_list_documents_every_knob() {
    let dir = tempfile::tempdir().unwrap();
    let o = cpushield(dir.path(), &["tune", "--list", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let v = json(&o);
    assert_eq!(v["schema_version"], cpushield::report::JSON_SCHEMA_VERSION);
    assert_eq!(
        v["knobs"].as_array().unwrap().len(),
        cpushield::shield::components::knobs::KNOBS.len()
    );
    let o = cpushield(dir.path(), &["tune", "--list"]);
    let t = String::from_utf8_lossy(&o.stdout);
    for k in cpushield::shield::components::knobs::KNOBS {
        assert!(t.contains(k.name) && t.contains(k.why), "{}", k.name);
    }
}

#[test]
fn boot_args_include_siblings() {
    let dir = tempfile::tempdir().unwrap();
    FixtureBuilder::new(dir.path(), 4)
        .siblings("0,2")
        .siblings("1,3")
        .build()
        .unwrap();
    let o = cpushield(dir.path(), &["boot-args", "3", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let v = json(&o);
    assert_eq!(
        v["cmdline"],
        "isolcpus=managed_irq,1,3 nohz_full=1,3 rcu_nocbs=1,3 irqaffinity=0,2"
    );
    assert!(v["warnings"][0].as_str().unwrap().contains("siblings"));
    let o = cpushield(dir.path(), &["boot-args", "3"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("warning:"));
}

fn finding<'a>(r: &'a AuditReport, id: &str) -> &'a audit::Finding {
    r.findings
        .iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("no finding {id}: {r:#?}"))
}

fn sev(r: &AuditReport, id: &str) -> Severity {
    finding(r, id).severity
}

/// A noisy machine: everything audit looks at is in its bad state.
fn noisy(root: &Path) -> Sys {
    let sys = tunable(root);
    for (rel, contents) in [
        (
            "proc/cmdline",
            "BOOT_IMAGE=/vmlinuz ro isolcpus=3 nohz_full=3\n",
        ),
        ("proc/sys/kernel/version", "#1 SMP PREEMPT_DYNAMIC Debian\n"),
        ("sys/kernel/debug/sched/preempt", "(none) voluntary full\n"),
        ("proc/500/comm", "irqbalance\n"),
        (
            "proc/500/environ",
            "PATH=/bin\0IRQBALANCE_BANNED_CPULIST=3\0",
        ),
        ("proc/500/cmdline", "/usr/sbin/irqbalance\0--foreground\0"),
        ("sys/devices/system/cpu/cpu2/cpuidle/state0/name", "POLL\n"),
        ("sys/devices/system/cpu/cpu2/cpuidle/state0/latency", "0\n"),
        ("sys/devices/system/cpu/cpu2/cpuidle/state0/disable", "0\n"),
        ("sys/devices/system/cpu/cpu2/cpuidle/state1/name", "C6\n"),
        (
            "sys/devices/system/cpu/cpu2/cpuidle/state1/latency",
            "133\n",
        ),
        ("sys/devices/system/cpu/cpu2/cpuidle/state1/disable", "0\n"),
        ("sys/devices/system/node/node0/cpulist", "0-1\n"),
        ("sys/devices/system/node/node1/cpulist", "2-3\n"),
        (
            "proc/softirqs",
            "       CPU0 CPU1 CPU2 CPU3\n TIMER: 1 1 1 1\n",
        ),
    ] {
        put(&sys, rel, contents);
    }
    fixture::set_exe(&sys, 500, "/usr/sbin/irqbalance").unwrap();
    sys
}

#[test]
fn audit_needs_a_target() {
    let dir = tempfile::tempdir().unwrap();
    standard(dir.path(), CgroupLayout::V2, FixtureConfig::default());
    let o = cpushield(dir.path(), &["audit", "--window", "0"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--cpus"));
    let o = cpushield(dir.path(), &["audit", "--cpus", "7", "--window", "0"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("not online"));
}

#[test]
fn audit_finds_noise_then_shield_and_tune_clear_it() {
    let dir = tempfile::tempdir().unwrap();
    let sys = noisy(dir.path());
    let before = tree(dir.path());
    let r = audit::audit(&sys, Some(&cpus("2-3")), Duration::ZERO).unwrap();
    assert_eq!(r.source, "--cpus");
    for (id, want) in [
        ("tasks", Severity::Bad),
        ("irq-effective", Severity::Bad),
        ("irq-affinity", Severity::Warn),
        ("irq-default", Severity::Warn),
        ("workqueue", Severity::Warn),
        ("kthreads", Severity::Ok),
        ("preemption", Severity::Bad),
        ("boot.isolcpus", Severity::Warn),
        ("boot.nohz_full", Severity::Warn),
        ("boot.rcu_nocbs", Severity::Warn),
        ("boot.irqaffinity", Severity::Warn),
        ("boot.threadirqs", Severity::Warn),
        ("boot.nosoftlockup", Severity::Warn),
        ("boot.skew_tick", Severity::Warn),
        ("boot.tsc", Severity::Warn),
        ("rt-throttling", Severity::Warn),
        ("timer-migration", Severity::Warn),
        ("vmstat", Severity::Warn),
        ("watchdog", Severity::Warn),
        ("nmi-watchdog", Severity::Warn),
        ("governor", Severity::Warn),
        ("idle-states", Severity::Warn),
        ("siblings", Severity::Ok),
        ("irqbalance", Severity::Bad),
        ("numa", Severity::Ok),
        ("dirty-writeback", Severity::Warn),
        ("machinecheck", Severity::Warn),
        ("net-queues", Severity::Warn),
    ] {
        assert_eq!(sev(&r, id), want, "{id}: {:?}", finding(&r, id));
    }
    assert!(finding(&r, "machinecheck")
        .reason
        .contains("CPU 2 every 300 s"));
    // rx-0 (0) and rx-1 (2-3) receive, tx-0 (0-3) sends: two on the targets.
    let queues = &finding(&r, "net-queues").reason;
    assert!(
        queues.contains("eth0 rx-1 (2-3)") && queues.contains("eth0 tx-0 (0-3)"),
        "{queues}"
    );
    assert!(!queues.contains("rx-0"), "{queues}");
    assert!(!finding(&r, "tasks").reason.contains("housekeeper"));
    assert!(finding(&r, "boot.nohz_full").next.contains("nohz_full=2-3"));
    assert!(finding(&r, "irqbalance")
        .next
        .contains("IRQBALANCE_BANNED_CPULIST=2-3"));
    assert!(finding(&r, "rt-throttling")
        .next
        .contains("--tune=rt-throttling"));
    assert!(finding(&r, "idle-states").reason.contains("C6"));
    assert!(finding(&r, "workqueue")
        .reason
        .contains("writeback flushers"));
    assert!(finding(&r, "workqueue")
        .next
        .contains("--tune=workqueue,writeback"));
    // Worst first, then by expected impact; every finding that is not ok
    // says what to do next.
    for w in r.findings.windows(2) {
        assert!(
            (w[0].severity, std::cmp::Reverse(w[0].impact))
                <= (w[1].severity, std::cmp::Reverse(w[1].impact)),
            "{:?} before {:?}",
            w[0],
            w[1]
        );
    }
    for f in r.findings.iter().filter(|f| f.severity != Severity::Ok) {
        assert!(!f.next.trim().is_empty(), "no next step: {f:?}");
    }

    // Human table and JSON through the binary.
    let o = cpushield(dir.path(), &["audit", "--cpus", "2-3", "--window", "0"]);
    assert!(o.status.success(), "{}", text(&o));
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(
        t.contains("BAD  tasks") && t.contains("→ cpushield on 2-3"),
        "{t}"
    );
    let j = json(&cpushield(
        dir.path(),
        &["audit", "--cpus", "2-3", "--window", "0", "--json"],
    ));
    assert_eq!(j["cpus"], "2-3");
    assert_eq!(j["schema_version"], cpushield::report::JSON_SCHEMA_VERSION);
    // --fail-on: exit 9 on a finding that bad (BAD tasks above), 0 without.
    for (fail_on, code) in [("bad", 9), ("warn", 9)] {
        let o = cpushield(
            dir.path(),
            &[
                "audit",
                "--cpus",
                "2-3",
                "--window",
                "0",
                "--fail-on",
                fail_on,
            ],
        );
        assert_eq!(
            o.status.code(),
            Some(code),
            "--fail-on {fail_on}: {}",
            text(&o)
        );
    }
    let o = cpushield(
        dir.path(),
        &["audit", "--cpus", "2-3", "--window", "0", "--fail-on", "ok"],
    );
    assert_eq!(
        o.status.code(),
        Some(2),
        "ok is not a severity to fail on: {}",
        text(&o)
    );

    // Shield with tuning: audit defaults to the shield, and finds it fixed.
    let o = cpushield(
        dir.path(),
        &[
            "on",
            "2-3",
            "--force",
            "--tune=all,rt-throttling,watchdog,nmi-watchdog",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    // Audit must take the watchdog from the journal, never read it while
    // off: make reading it give something else.
    std::fs::write(sys.path("proc/sys/kernel/watchdog"), "garbage\n").unwrap();
    let r = audit::audit(&sys, None, Duration::ZERO).unwrap();
    assert_eq!(r.source, "shield");
    assert!(r.shield_active);
    for id in [
        "tasks",
        "irq-default",
        "workqueue",
        "rt-throttling",
        "timer-migration",
        "vmstat",
        "watchdog",
        "governor",
    ] {
        assert_eq!(sev(&r, id), Severity::Ok, "{id}: {:?}", finding(&r, id));
    }
    assert!(finding(&r, "watchdog").reason.contains("journal"));
    // IRQ 0 refused (EIO) and IRQ 40 is kernel-managed: still there.
    assert!(finding(&r, "irq-affinity").reason.contains("0 (timer)"));
    assert!(finding(&r, "irq-effective").reason.contains("40"));
    // nmi_watchdog is read-only here: still on, reported.
    assert_eq!(sev(&r, "nmi-watchdog"), Severity::Warn);
    for id in ["machinecheck", "net-queues"] {
        assert_eq!(sev(&r, id), Severity::Ok, "{id}: {:?}", finding(&r, id));
    }
    // The flusher interval refuses writes here (EIO): still reported.
    assert_eq!(sev(&r, "dirty-writeback"), Severity::Warn);
    // --fail-on gates on what the audit found, as the binary reports it.
    let any_bad = r.findings.iter().any(|f| f.severity == Severity::Bad);
    for (fail_on, code) in [("bad", if any_bad { 9 } else { 0 }), ("warn", 9)] {
        let o = cpushield(
            dir.path(),
            &["audit", "--window", "0", "--fail-on", fail_on],
        );
        assert_eq!(
            o.status.code(),
            Some(code),
            "--fail-on {fail_on}: {}",
            text(&o)
        );
    }

    std::fs::write(sys.path("proc/sys/kernel/watchdog"), "0\n").unwrap();
    let o = cpushield(dir.path(), &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    // An IRQ's effective CPU is the kernel's, moved by the shielded CPUs'
    // hotplug; off gives back each affinity, not where it last fired.
    let kernels = |t: &mut std::collections::BTreeMap<String, String>| {
        t.retain(|k, _| !k.ends_with("/effective_affinity_list"))
    };
    let (mut before, mut after) = (before, tree(dir.path()));
    kernels(&mut before);
    kernels(&mut after);
    assert!(before == after, "{:#?}", diff(&before, &after));
}

#[test]
fn audit_siblings_rt_kernel_boot_params_and_quiet_machine() {
    let dir = tempfile::tempdir().unwrap();
    let sys = FixtureBuilder::new(dir.path(), 4)
        .siblings("1-2")
        .file(
            "proc/cmdline",
            "ro isolcpus=nohz,domain,managed_irq,2-3 nohz_full=2-3 rcu_nocbs=2-3 irqaffinity=0-1 threadirqs nosoftlockup skew_tick=1 tsc=reliable\n",
        )
        .file("proc/sys/kernel/version", "#1 SMP PREEMPT_RT\n")
        .file("proc/sys/kernel/sched_rt_runtime_us", "-1\n")
        .file("proc/sys/kernel/watchdog", "0\n")
        .file("sys/devices/system/node/node0/cpulist", "0-1\n")
        .file("sys/devices/system/node/node1/cpulist", "2-3\n")
        .file("proc/600/comm", "irqbalance\n")
        .file("proc/600/cmdline", "irqbalance\0--banned-cpulist=2-3\0")
        .file("proc/600/environ", "")
        .build()
        .unwrap();
    fixture::add_irq(&sys, 30, "eth0", "0-1").unwrap();
    fixture::set_exe(&sys, 600, "/usr/sbin/irqbalance").unwrap();
    let r = audit::audit(&sys, Some(&cpus("2-3")), Duration::ZERO).unwrap();
    for id in [
        "boot.isolcpus",
        "boot.nohz_full",
        "boot.rcu_nocbs",
        "boot.irqaffinity",
        "boot.threadirqs",
        "boot.nosoftlockup",
        "boot.skew_tick",
        "boot.tsc",
        "preemption",
        "rt-throttling",
        "watchdog",
        "irqbalance",
        "irq-effective",
        "irq-affinity",
        "tasks",
        "numa",
    ] {
        assert_eq!(sev(&r, id), Severity::Ok, "{id}: {:?}", finding(&r, id));
    }
    assert_eq!(sev(&r, "siblings"), Severity::Bad);
    assert!(finding(&r, "siblings").next.contains("cpushield on 1-3"));
    let r = audit::audit(&sys, Some(&cpus("1-2")), Duration::ZERO).unwrap();
    assert_eq!(sev(&r, "numa"), Severity::Warn);
    assert_eq!(sev(&r, "boot.nohz_full"), Severity::Warn);
}

#[test]
fn audit_counts_interrupts_over_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let sys = FixtureBuilder::new(dir.path(), 2)
        .file(
            "proc/interrupts",
            "      CPU0 CPU1\n 24: 0 0 IO-APIC 24-edge eth0\nLOC: 0 0 Local timer interrupts\nRES: 0 0 Rescheduling interrupts\n",
        )
        .file("proc/softirqs", "     CPU0 CPU1\n   TIMER: 0 0\n  NET_RX: 0 0\n")
        .build()
        .unwrap();
    let root = dir.path().to_path_buf();
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        std::fs::write(
            root.join("proc/interrupts"),
            "      CPU0 CPU1\n 24: 0 7 IO-APIC 24-edge eth0\nLOC: 0 1000 Local timer interrupts\nRES: 0 3 Rescheduling interrupts\n",
        )
        .unwrap();
        std::fs::write(
            root.join("proc/softirqs"),
            "     CPU0 CPU1\n   TIMER: 0 250\n  NET_RX: 9 0\n",
        )
        .unwrap();
    });
    let r = audit::audit(&sys, Some(&cpus("1")), Duration::from_secs(1)).unwrap();
    writer.join().unwrap();
    assert_eq!(sev(&r, "interrupts.device"), Severity::Bad);
    assert!(finding(&r, "interrupts.device").reason.contains("eth0×7"));
    assert_eq!(sev(&r, "interrupts.tick"), Severity::Warn);
    assert_eq!(sev(&r, "interrupts.ipi"), Severity::Warn);
    assert_eq!(sev(&r, "softirqs"), Severity::Warn);
    assert_eq!(r.softirqs.len(), 1, "NET_RX was on CPU 0 only");
    let quiet = audit::audit(&sys, Some(&cpus("0")), Duration::from_millis(10)).unwrap();
    assert_eq!(sev(&quiet, "interrupts.device"), Severity::Ok);
}

/// A reader that stops early (`| head`) is not an error: JSON written into
/// a closed pipe exits 0 without a message.
#[test]
fn json_into_a_closed_pipe_is_quiet_success() {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_cpushield"))
        .args(["tune", "--list", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

#[test]
fn a_knob_set_back_behind_the_shield_breaks_it_and_on_again_repairs_it() {
    let dir = tempfile::tempdir().unwrap();
    let sys = tunable(dir.path());
    let before = tree(dir.path());
    let o = cpushield(dir.path(), &["on", "2-3", "--tune"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = cpushield(dir.path(), &["status", "--json"]);
    assert_eq!(
        o.status.code().unwrap(),
        0,
        "every knob reads what the shield set: {}",
        text(&o)
    );

    // Something else (a sysctl reload, a daemon) sets two knobs back.
    std::fs::write(sys.path("proc/sys/vm/stat_interval"), "1\n").unwrap();
    std::fs::write(sys.path("sys/class/net/eth0/queues/rx-1/rps_cpus"), "c\n").unwrap();
    let o = cpushield(dir.path(), &["status", "--json"]);
    assert_eq!(o.status.code().unwrap(), 3, "{}", text(&o));
    let st = json(&o);
    let broken = st["broken"].as_array().unwrap();
    let knobs: Vec<&serde_json::Value> = broken.iter().filter(|b| b["id"] == "knobs").collect();
    assert_eq!(knobs.len(), 1, "{st}");
    let reason = knobs[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("vmstat: /proc/sys/vm/stat_interval reads 1, the shield set 1000")
            && reason.contains("net-queues: /sys/class/net/eth0/queues/rx-1/rps_cpus reads c"),
        "{reason}"
    );
    let o = cpushield(dir.path(), &["status"]);
    assert!(text(&o).contains("broken: tune vmstat"), "{}", text(&o));

    // The same request again repairs it in place.
    let o = cpushield(dir.path(), &["on", "2-3", "--tune"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(read(&sys, "proc/sys/vm/stat_interval"), "1000");
    assert_eq!(read(&sys, "sys/class/net/eth0/queues/rx-1/rps_cpus"), "3");
    let o = cpushield(dir.path(), &["status"]);
    assert_eq!(o.status.code().unwrap(), 0, "{}", text(&o));

    // off still restores the machine as it was before the first on.
    assert!(cpushield(dir.path(), &["off"]).status.success());
    let after = tree(dir.path());
    assert!(before == after, "{:#?}", diff(&before, &after));
}

/// The knobs of tuned's realtime profile that were missing: NUMA balancing
/// and KSM (in a bare `--tune`), transparent huge pages and khugepaged
/// (only by name): sysfs choice files are written the kernel's way (the
/// word, which it then shows in brackets) and `off` writes back the word
/// that was chosen, so that each file reads exactly as before.
#[test]
fn memory_knobs_set_choice_files_and_off_gives_them_back() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let sys = standard(root, CgroupLayout::V2, FixtureConfig::default());
    let files = [
        ("proc/sys/kernel/numa_balancing", "1\n"),
        ("sys/kernel/mm/ksm/run", "1\n"),
        (
            "sys/kernel/mm/transparent_hugepage/enabled",
            "always [madvise] never\n",
        ),
        (
            "sys/kernel/mm/transparent_hugepage/defrag",
            "always defer defer+madvise [madvise] never\n",
        ),
        (
            "sys/kernel/mm/transparent_hugepage/khugepaged/defrag",
            "1\n",
        ),
    ];
    for (rel, contents) in files {
        put(&sys, rel, contents);
    }
    let before = tree(root);
    // A bare --tune leaves huge pages alone.
    let o = cpushield(root, &["on", "2-3", "--tune"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(read(&sys, "proc/sys/kernel/numa_balancing"), "0");
    assert_eq!(read(&sys, "sys/kernel/mm/ksm/run"), "0");
    assert_eq!(
        read(&sys, "sys/kernel/mm/transparent_hugepage/enabled"),
        "always [madvise] never"
    );
    let o = cpushield(root, &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(diff(&before, &tree(root)).is_empty());
    // By name: the word chosen, read back in brackets.
    let o = cpushield(root, &["on", "2-3", "--tune=thp,khugepaged", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        read(&sys, "sys/kernel/mm/transparent_hugepage/enabled"),
        "always madvise [never]"
    );
    assert_eq!(
        read(&sys, "sys/kernel/mm/transparent_hugepage/defrag"),
        "always defer defer+madvise madvise [never]"
    );
    assert_eq!(
        read(&sys, "sys/kernel/mm/transparent_hugepage/khugepaged/defrag"),
        "0"
    );
    holds_then_off_restores(root, &before);
}

/// `status` says the shield holds, and `off` gives back the tree `before`.
fn holds_then_off_restores(root: &Path, before: &BTreeMap<String, String>) {
    let st = json(&cpushield(root, &["status", "--json"]));
    assert_eq!(st["holds"], true, "{st}");
    let o = cpushield(root, &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    let d = diff(before, &tree(root));
    assert!(d.is_empty(), "not restored: {d:#?}");
}

/// The frequency knobs of tuned's cpu-partitioning profile: the shielded
/// CPUs' lowest frequency raised to their highest (in a bare `--tune`,
/// the housekeeping CPUs left free), and turbo off machine-wide only by
/// name; `off` gives every file back.
#[test]
fn freq_floor_on_the_shielded_cpus_and_turbo_off_only_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let sys = standard(root, CgroupLayout::V2, FixtureConfig::default());
    let put = |rel: &str, contents: &str| put(&sys, rel, contents);
    for cpu in 0..4 {
        let d = format!("sys/devices/system/cpu/cpu{cpu}/cpufreq");
        put(&format!("{d}/scaling_min_freq"), "800000\n");
        put(
            &format!("{d}/scaling_max_freq"),
            &format!("{}\n", 3_000_000 + cpu * 100_000),
        );
    }
    put("sys/devices/system/cpu/intel_pstate/no_turbo", "0\n");
    let min = |cpu: u32| {
        read(
            &sys,
            &format!("sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_min_freq"),
        )
    };
    let before = tree(root);
    let o = cpushield(root, &["on", "2-3", "--tune"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        (min(2).as_str(), min(3).as_str()),
        ("3200000", "3300000"),
        "each CPU's own maximum"
    );
    assert_eq!(
        (min(0).as_str(), min(1).as_str()),
        ("800000", "800000"),
        "housekeeping left free"
    );
    assert_eq!(
        read(&sys, "sys/devices/system/cpu/intel_pstate/no_turbo"),
        "0",
        "turbo only by name"
    );
    let o = cpushield(root, &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(diff(&before, &tree(root)).is_empty());
    let o = cpushield(root, &["on", "2-3", "--tune=turbo", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        read(&sys, "sys/devices/system/cpu/intel_pstate/no_turbo"),
        "1"
    );
    assert_eq!(min(2), "800000", "named alone, no floor");
    let r = json(&o);
    assert!(
        r["notes"].to_string().contains("cpufreq/boost"),
        "the file this kernel does not have is named: {r}"
    );
    holds_then_off_restores(root, &before);
}

/// A bare `--tune` leaves the safety nets alone: RT throttling and the
/// watchdogs change only when named.
#[test]
fn a_bare_tune_keeps_the_safety_nets() {
    let dir = tempfile::tempdir().unwrap();
    let sys = tunable(dir.path());
    let nets = [
        "proc/sys/kernel/sched_rt_runtime_us",
        "proc/sys/kernel/watchdog",
        "proc/sys/kernel/nmi_watchdog",
    ];
    let before = nets.map(|rel| read(&sys, rel));
    let o = cpushield(dir.path(), &["on", "2-3", "--tune", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let after = nets.map(|rel| read(&sys, rel));
    assert_eq!(before, after);
    assert_eq!(
        read(&sys, "proc/sys/vm/stat_interval"),
        "1000",
        "the rest applies"
    );
    assert!(cpushield(dir.path(), &["off"]).status.success());
}

/// The dry run's count for people, its JSON count and its JSON plan agree
/// (they are one figure: a difference between two runs is the machine
/// changing in between).
#[test]
fn the_dry_run_counts_its_changes_the_same_in_text_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let _sys = standard(root, CgroupLayout::V2, FixtureConfig::default());
    let o = cpushield(root, &["on", "2-3", "--tune", "--dry-run"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    let said: usize = out
        .split_once(" changes); nothing changed")
        .and_then(|(head, _)| head.rsplit_once('(')?.1.parse().ok())
        .unwrap_or_else(|| panic!("no count in {out}"));
    let j = json(&cpushield(
        root,
        &["on", "2-3", "--tune", "--dry-run", "--json"],
    ));
    assert_eq!(j["planned"], said, "{j}");
    assert_eq!(j["plan"].as_array().unwrap().len(), said);
}

/// Everything `on` would change beyond the shielded CPUs is listed by the
/// dry run with how to do without it, and nothing is changed: the knobs of
/// the machine (not those of the shielded CPUs), the starvation guard.
#[test]
fn the_dry_run_lists_every_machine_wide_change_with_how_to_do_without() {
    let dir = tempfile::tempdir().unwrap();
    tunable(dir.path());
    let before = tree(dir.path());
    let o = cpushield(
        dir.path(),
        &[
            "on",
            "2-3",
            "--tune=all,rt-throttling,watchdog,nmi-watchdog",
            "--guard=on",
            "--dry-run",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let r = json(&o);
    let wide = r["machine_wide"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"));
    let find = |prefix: &str| {
        wide.iter()
            .find(|m| m["what"].as_str().unwrap().starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix}: {wide:?}"))
    };
    let rt = find("rt-throttling: /proc/sys/kernel/sched_rt_runtime_us -1");
    assert!(
        rt["without"]
            .as_str()
            .unwrap()
            .contains("leave rt-throttling out"),
        "{rt}"
    );
    let guard = find("the starvation guard (cpushield): a SCHED_FIFO 98 process");
    assert_eq!(guard["without"], "--guard=off");
    // Nothing machine-wide: the key is there, empty.
    let plain = json(&cpushield(
        dir.path(),
        &["on", "2-3", "--guard=off", "--dry-run", "--json"],
    ));
    assert_eq!(plain["machine_wide"], serde_json::json!([]), "{plain}");
    // The governor is the shielded CPUs' own: not machine-wide.
    assert!(
        !wide
            .iter()
            .any(|m| m["what"].as_str().unwrap().starts_with("governor")),
        "{wide:?}"
    );
    let people = String::from_utf8_lossy(
        &cpushield(
            dir.path(),
            &[
                "on",
                "2-3",
                "--tune=all,rt-throttling,watchdog,nmi-watchdog",
                "--guard=on",
                "--dry-run",
            ],
        )
        .stdout,
    )
    .into_owned();
    assert!(people.contains("machine-wide, planned"), "{people}");
    assert!(people.contains("(without it: --guard=off)"), "{people}");
    assert!(diff(&before, &tree(dir.path())).is_empty());
}

/// 6.1 refuses a finite `sched_rt_runtime_us` (EBUSY) while an isolated
/// partition's root domain holds stale deadline bandwidth, as a guest saw
/// after the starvation guard's boosts: `off` writes it back once the rest
/// is undone (the partition gone), and exits 0 with the machine as before.
#[test]
fn off_writes_a_busy_sysctl_back_once_the_partition_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut config = FixtureConfig::default();
    config.busy_while.insert(
        "proc/sys/kernel/sched_rt_runtime_us".into(),
        "sys/fs/cgroup/cpushield".into(),
    );
    let sys = standard(root, CgroupLayout::V2, config);
    for (rel, contents) in KNOB_FILES {
        put(&sys, rel, contents);
    }
    let before = tree(root);
    let o = cpushield(root, &["on", "2-3", "--tune=rt-throttling"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(read(&sys, "proc/sys/kernel/sched_rt_runtime_us"), "-1");
    // While the shield stands the kernel refuses the old value.
    assert!(sys
        .write("proc/sys/kernel/sched_rt_runtime_us", "950000")
        .is_err());
    let o = cpushield(root, &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(read(&sys, "proc/sys/kernel/sched_rt_runtime_us"), "950000");
    let d = diff(&before, &tree(root));
    assert!(d.is_empty(), "off left {d:#?}");
}

/// `audit` answers CPUs that are not online, and a missing target, as bad
/// input: exit 2, as `on` and `measure` do.
#[test]
fn audit_of_cpus_not_online_or_of_nothing_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    standard(dir.path(), CgroupLayout::V2, FixtureConfig::default());
    let o = cpushield(dir.path(), &["audit", "--cpus", "9", "--window", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("CPUs 9 are not online"), "{}", text(&o));
    let o = cpushield(dir.path(), &["audit", "--window", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}
