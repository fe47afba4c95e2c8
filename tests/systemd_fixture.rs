//! The shield on a systemd host, on fixture roots: the shield is a transient
//! slice of systemd's, irqbalance gets a runtime ban, and `status` tells a
//! shield that holds from one that broke. The fixture models systemd's part
//! (see `Fixture::systemd`); real systemd is tested in tests/vm/distro.

mod common;

use common::*;
use cpushield::sys::fixture;
use cpushield::CpuSet;
use std::path::Path;

const SLICE: &str = "sys/fs/cgroup/cpushield.slice";
const DROPIN: &str = "run/systemd/system/irqbalance.service.d/50-cpushield.conf";
const ENV: &str = "run/systemd/system/irqbalance.service.d/cpushield.env";

fn status_code(root: &Path) -> (i32, serde_json::Value) {
    let o = cpushield(root, &["status", "--json"]);
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    (o.status.code().unwrap_or(-1), v)
}

fn broken_checks(v: &serde_json::Value) -> Vec<String> {
    v["broken"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn under_systemd_on_makes_a_slice_partition_and_an_irqbalance_ban_and_off_restores_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let sys = systemd_host(dir.path());
    let before = tree(dir.path());
    let o = cpushield(dir.path(), &["on", "2-3", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        sys.read_trimmed(&format!("{SLICE}/cpuset.cpus.partition"))
            .unwrap(),
        "isolated"
    );
    assert_eq!(
        sys.read_cpulist(&format!("{SLICE}/cpuset.cpus")).unwrap(),
        CpuSet::parse_list("2-3").unwrap()
    );
    assert!(
        !sys.exists("sys/fs/cgroup/cpushield"),
        "no cgroup made behind systemd's back"
    );
    assert!(sys.exists("run/systemd/transient/cpushield.slice"));
    // No ban anywhere before: the manager environment carries it, so no
    // unit file changes and systemd need not reload.
    assert_eq!(
        sys.read(fixture::MANAGER_ENVIRONMENT).unwrap(),
        "IRQBALANCE_BANNED_CPULIST=2-3\n"
    );
    assert!(!sys.exists(DROPIN) && !sys.exists(ENV));
    assert!(sys
        .read("proc/200/environ")
        .unwrap()
        .contains("IRQBALANCE_BANNED_CPULIST=2-3\0"));
    // the user's file is theirs
    assert_eq!(
        sys.read("etc/default/irqbalance").unwrap(),
        "#IRQBALANCE_BANNED_CPULIST=\n"
    );
    let (code, st) = status_code(dir.path());
    assert_eq!(code, 0, "{st}");
    assert_eq!(st["holds"], true);
    assert!(st["mechanism"].as_str().unwrap().contains("systemd"));

    let o = cpushield(dir.path(), &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(diff(&before, &tree(dir.path())), Vec::<String>::new());
}

#[test]
fn status_names_what_broke_exits_3_and_on_repairs_it() {
    let dir = tempfile::tempdir().unwrap();
    let sys = systemd_host(dir.path());
    let before = tree(dir.path());
    assert!(cpushield(dir.path(), &["on", "2-3"]).status.success());

    // Someone removes the irqbalance ban and restarts irqbalance.
    std::fs::remove_file(sys.path(fixture::MANAGER_ENVIRONMENT)).unwrap();
    std::fs::write(sys.path("proc/200/environ"), "").unwrap();
    let (code, st) = status_code(dir.path());
    assert_eq!(code, 3, "{st}");
    assert_eq!(broken_checks(&st), ["irqbalance"]);
    let o = cpushield(dir.path(), &["status"]);
    let human = String::from_utf8_lossy(&o.stdout);
    assert!(
        human.contains("BROKEN") && human.contains("repair:"),
        "{human}"
    );

    // Running on again repairs it.
    assert!(cpushield(dir.path(), &["on", "2-3"]).status.success());
    let (code, st) = status_code(dir.path());
    assert_eq!((code, broken_checks(&st)), (0, vec![]), "{st}");

    // The partition made a member again: the kernel enforces nothing.
    sys.write(&format!("{SLICE}/cpuset.cpus.partition"), "member")
        .unwrap();
    let (code, st) = status_code(dir.path());
    assert_eq!(code, 3);
    assert!(
        broken_checks(&st).contains(&"partition".to_string()),
        "{st}"
    );
    assert!(
        broken_checks(&st).contains(&"enforcement".to_string()),
        "{st}"
    );
    assert!(cpushield(dir.path(), &["on", "2-3"]).status.success());
    assert_eq!(status_code(dir.path()).0, 0);

    // An IRQ moved back onto the shield (irqbalance without its ban).
    sys.write("proc/irq/25/smp_affinity_list", "0-3").unwrap();
    let (code, st) = status_code(dir.path());
    assert_eq!(
        (code, broken_checks(&st)),
        (3, vec!["irqs".to_string()]),
        "{st}"
    );

    assert!(cpushield(dir.path(), &["off"]).status.success());
    // off puts back what it found before on, not the drift
    assert_eq!(diff(&before, &tree(dir.path())), Vec::<String>::new());
    assert_eq!(status_code(dir.path()).0, 0, "no shield is not a failure");
}

#[test]
fn under_systemd_move_in_is_a_scope_in_the_slice_and_off_puts_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let sys = systemd_host(dir.path());
    let before = tree(dir.path());
    assert!(cpushield(dir.path(), &["on", "2-3"]).status.success());
    let o = cpushield(dir.path(), &["move", "101", "--in", "--cpu", "3"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(sys
        .read(&format!("{SLICE}/cpushield-run-101.scope/cgroup.procs"))
        .unwrap()
        .split_whitespace()
        .any(|p| p == "101"));
    assert_eq!(sys.affinity(101).unwrap(), CpuSet::parse_list("3").unwrap());
    let (code, st) = status_code(dir.path());
    assert_eq!(code, 0, "{st}");
    assert!(part(&st, "tasks")["data"]["inside"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["pid"] == 101));
    assert!(cpushield(dir.path(), &["off"]).status.success());
    assert_eq!(diff(&before, &tree(dir.path())), Vec::<String>::new());
}

#[test]
fn under_systemd_killed_at_every_write_then_off_restores() {
    let dir = tempfile::tempdir().unwrap();
    systemd_host(dir.path());
    let before = tree(dir.path());
    let mut k = 0;
    loop {
        let o = cpushield_env(
            dir.path(),
            &["on", "2-3"],
            &[("CPUSHIELD_FIXTURE_CRASH_AFTER", k.to_string())],
        );
        let finished = o.status.success();
        let o = cpushield(dir.path(), &["off"]);
        assert!(o.status.success(), "k={k}: off failed: {}", text(&o));
        let d = diff(&before, &tree(dir.path()));
        assert!(d.is_empty(), "k={k}: not restored: {d:#?}");
        if finished {
            break;
        }
        k += 1;
        assert!(k < 500, "on never finished");
    }
    assert!(k > 10, "the plan should have many writes ({k})");
}

#[test]
fn a_tuned_profile_that_isolates_cores_is_reported_by_on_and_status() {
    let dir = tempfile::tempdir().unwrap();
    let sys = systemd_host(dir.path());
    for (file, text) in [
        ("etc/tuned/active_profile", "cpu-partitioning\n"),
        (
            "usr/lib/tuned/cpu-partitioning/tuned.conf",
            "[main]\nsummary=Optimize for CPU partitioning\ninclude=network-latency\n[scheduler]\nisolated_cores=${isolated_cores}\n# banned_cpus is not set here\n",
        ),
        (
            "usr/lib/tuned/network-latency/tuned.conf",
            "[sysctl]\nkernel.numa_balancing=0\n",
        ),
    ] {
        std::fs::create_dir_all(sys.path(file).parent().unwrap()).unwrap();
        std::fs::write(sys.path(file), text).unwrap();
    }
    fixture::add_process(&sys, 210, &[task("tuned", 0, "0-3")]).unwrap();
    let o = cpushield(dir.path(), &["on", "2-3"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("tuned profile 'cpu-partitioning' pins CPUs or IRQs (profile cpu-partitioning, cpu-partitioning: [scheduler] isolated_cores=${isolated_cores})"),
        "{out}"
    );
    assert!(
        out.contains("tuned profile 'cpu-partitioning' (read through network-latency (included by cpu-partitioning), cpu-partitioning) sets what cpushield sets too: network-latency: [sysctl] kernel.numa_balancing=0 (--tune=numa-balancing)"),
        "{out}"
    );
    let (code, st) = status_code(dir.path());
    assert_eq!(code, 0, "a conflict reported is not a broken shield: {st}");
    assert_eq!(st["notes"][0]["kind"], "tuned_pins", "{st}");
    assert_eq!(st["notes"][0]["profile"], "cpu-partitioning", "{st}");
    assert!(cpushield(dir.path(), &["off"]).status.success());
}

#[test]
fn the_users_own_irqbalance_ban_is_kept_in_ours_and_their_file_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let sys = systemd_host(dir.path());
    let theirs = "IRQBALANCE_BANNED_CPUS=\"2\"\nIRQBALANCE_ARGS=--foo\n";
    std::fs::write(sys.path("etc/default/irqbalance"), theirs).unwrap();
    let o = cpushield(dir.path(), &["on", "3", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        part(&v, "irqbalance")["data"]["ban"],
        "1,3",
        "hex 2 is CPU 1, plus the shield"
    );
    let env = sys.read(ENV).unwrap();
    assert!(
        env.contains("IRQBALANCE_BANNED_CPUS=\n")
            && env.contains("IRQBALANCE_BANNED_CPULIST=1,3\n"),
        "the hex mask is emptied so that the list counts: {env}"
    );
    assert_eq!(sys.read("etc/default/irqbalance").unwrap(), theirs);
    assert!(
        !sys.exists(fixture::MANAGER_ENVIRONMENT),
        "their file would override the manager environment: a drop-in instead"
    );
    assert!(cpushield(dir.path(), &["off"]).status.success());
}

/// A ban someone set in systemd's manager environment is theirs: the
/// shield's ban goes into a drop-in (whose file wins over it), and off
/// leaves their setting as it was.
#[test]
fn a_ban_in_the_manager_environment_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let sys = systemd_host(dir.path());
    let theirs = "LANG=C.UTF-8\nIRQBALANCE_BANNED_CPULIST=1\n";
    std::fs::write(sys.path(fixture::MANAGER_ENVIRONMENT), theirs).unwrap();
    // irqbalance was started with it
    std::fs::write(sys.path("proc/200/environ"), theirs.replace('\n', "\0")).unwrap();
    let before = tree(dir.path());
    let o = cpushield(dir.path(), &["on", "2-3"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(sys.exists(DROPIN), "a drop-in, not the manager environment");
    assert_eq!(sys.read(fixture::MANAGER_ENVIRONMENT).unwrap(), theirs);
    let environ = sys.read("proc/200/environ").unwrap();
    assert!(
        environ.contains("IRQBALANCE_BANNED_CPULIST=2-3\0"),
        "the drop-in's file wins: {environ:?}"
    );
    assert_eq!(status_code(dir.path()).0, 0);
    assert!(cpushield(dir.path(), &["off"]).status.success());
    assert_eq!(diff(&before, &tree(dir.path())), Vec::<String>::new());
}

#[test]
fn under_systemd_a_task_pinned_inside_is_kept_as_a_scope_and_the_report_says_it_left_its_unit() {
    let dir = tempfile::tempdir().unwrap();
    let sys = systemd_host(dir.path());
    // pid 100 ('pinned-inside', CPU 3) runs as a service
    sys.mkdir("sys/fs/cgroup/system.slice/rt.service").unwrap();
    sys.write("sys/fs/cgroup/system.slice/rt.service/cgroup.procs", "100")
        .unwrap();
    // the move reset its affinity (as 6.1 does): pinned again
    sys.set_affinity(100, &CpuSet::parse_list("3").unwrap())
        .unwrap();
    let before = tree(dir.path());
    let o = cpushield(dir.path(), &["on", "2-3", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(part(&v, "tasks")["data"]["kept"][0]["pid"], 100, "{v}");
    assert_eq!(part(&v, "tasks")["data"]["kept"][0]["cpus"], "3");
    assert!(sys
        .read(&format!("{SLICE}/cpushield-run-100.scope/cgroup.procs"))
        .unwrap()
        .contains("100"));
    assert!(
        v["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["kind"] == "tasks_leave_units"
                && n["units"] == serde_json::json!(["rt.service"])
                && n["component"] == "tasks"),
        "{v}"
    );
    assert!(cpushield(dir.path(), &["off"]).status.success());
    assert_eq!(diff(&before, &tree(dir.path())), Vec::<String>::new());
}

/// A stand-in for irqbalance's control socket at `path`: applies
/// `settings cpus` at once (as after its next cycle), answers `setup`,
/// and keeps every command it got.
struct FakeIrqbalanceSocket {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<Vec<String>>>,
}

impl FakeIrqbalanceSocket {
    fn serve(path: &Path) -> FakeIrqbalanceSocket {
        use std::io::{Read, Write};
        use std::sync::atomic::Ordering::Relaxed;
        let listener = std::os::unix::net::UnixListener::bind(path).unwrap();
        listener.set_nonblocking(true).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut got = Vec::new();
            let mut banned = "00000000".to_string();
            while !flag.load(Relaxed) {
                let Ok((mut conn, _)) = listener.accept() else {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                    continue;
                };
                conn.set_nonblocking(false).unwrap();
                let mut buf = [0u8; 256];
                let n = conn.read(&mut buf).unwrap();
                let command = String::from_utf8_lossy(&buf[..n]).to_string();
                if let Some(list) = command.strip_prefix("settings cpus ") {
                    banned = match CpuSet::parse_list(list) {
                        Ok(c) => format!("{:08x}", c.iter().map(|cpu| 1u32 << cpu).sum::<u32>()),
                        Err(_) => "00000000".into(),
                    };
                } else if command.starts_with("setup") {
                    conn.write_all(format!("SLEEP 10 BANNED {banned}").as_bytes())
                        .unwrap();
                }
                got.push(command);
            }
            got
        });
        FakeIrqbalanceSocket {
            stop,
            thread: Some(thread),
        }
    }

    fn commands(mut self) -> Vec<String> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

#[test]
fn irqbalance_with_a_control_socket_is_banned_and_unbanned_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let sys = systemd_host(dir.path());
    sys.mkdir("run/irqbalance").unwrap();
    let socket = FakeIrqbalanceSocket::serve(&sys.path("run/irqbalance/irqbalance200.sock"));
    let before = tree(dir.path());
    let o = cpushield(dir.path(), &["on", "2-3"]);
    assert!(o.status.success(), "{}", text(&o));
    // The report says what the process did: the same process runs.
    assert!(
        text(&o).contains("irqbalance kept running as pid 200") && !text(&o).contains("restarted"),
        "{}",
        text(&o)
    );
    // Told through the socket, not restarted: its environment is as it was.
    assert_eq!(sys.read("proc/200/environ").unwrap(), "");
    assert!(sys
        .read(fixture::MANAGER_ENVIRONMENT)
        .unwrap()
        .contains("IRQBALANCE_BANNED_CPULIST=2-3"));
    let (code, v) = status_code(dir.path());
    assert_eq!(code, 0, "{v}");
    assert!(cpushield(dir.path(), &["off"]).status.success());
    let commands = socket.commands();
    assert_eq!(
        commands.first().map(String::as_str),
        Some("settings cpus 2-3"),
        "{commands:?}"
    );
    assert!(
        commands.iter().any(|c| c == "setup"),
        "status asked: {commands:?}"
    );
    assert_eq!(
        commands.last().map(String::as_str),
        Some("settings cpus NULL"),
        "{commands:?}"
    );
    assert_eq!(sys.read("proc/200/environ").unwrap(), "");
    assert_eq!(diff(&before, &tree(dir.path())), Vec::<String>::new());
}

#[test]
fn irqbalance_told_by_socket_that_lost_the_ban_is_reported_broken() {
    let dir = tempfile::tempdir().unwrap();
    let sys = systemd_host(dir.path());
    sys.mkdir("run/irqbalance").unwrap();
    let socket = FakeIrqbalanceSocket::serve(&sys.path("run/irqbalance/irqbalance200.sock"));
    assert!(cpushield(dir.path(), &["on", "2-3"]).status.success());
    // Someone clears the ban through the socket (irqbalance-ui, a script).
    std::os::unix::net::UnixStream::connect(sys.path("run/irqbalance/irqbalance200.sock"))
        .and_then(|mut s| std::io::Write::write_all(&mut s, b"settings cpus NULL"))
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    let (code, v) = status_code(dir.path());
    assert_ne!(code, 0, "{v}");
    assert!(broken_checks(&v).contains(&"irqbalance".to_string()), "{v}");
    assert!(cpushield(dir.path(), &["off"]).status.success());
    socket.commands();
}

/// A systemd host whose irqbalance (pid 200) has a control socket that
/// takes the connection and never answers (kept open by the listener).
fn host_with_irqbalance_asleep(
    root: &Path,
) -> (cpushield::sys::Sys, std::os::unix::net::UnixListener) {
    let sys = systemd_host(root);
    sys.mkdir("run/irqbalance").unwrap();
    let asleep =
        std::os::unix::net::UnixListener::bind(sys.path("run/irqbalance/irqbalance200.sock"))
            .unwrap();
    (sys, asleep)
}

/// irqbalance before 1.9.4 reads no message for one cycle after each
/// rebuild: a socket that takes the connection and never answers.
#[test]
fn irqbalance_whose_socket_does_not_answer_is_restarted_instead() {
    let dir = tempfile::tempdir().unwrap();
    let (sys, _asleep) = host_with_irqbalance_asleep(dir.path());
    let before = tree(dir.path());
    let o = cpushield(dir.path(), &["on", "2-3"]);
    assert!(o.status.success(), "{}", text(&o));
    // Restarted: it got the ban from systemd's environment.
    assert!(
        sys.read("proc/200/environ")
            .unwrap()
            .contains("IRQBALANCE_BANNED_CPULIST=2-3"),
        "{}",
        text(&o)
    );
    let (code, v) = status_code(dir.path());
    assert_eq!(code, 0, "{v}");
    let o = cpushield(dir.path(), &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(sys.read("proc/200/environ").unwrap(), "");
    assert_eq!(diff(&before, &tree(dir.path())), Vec::<String>::new());
}

/// A shield that leaves one housekeeping CPU (Debian 12's soak, shield
/// 1-3): `off` undoes irqbalance's ban first, while the shield still
/// holds, and the restart that takes the ban away is skipped by systemd
/// (the unit's `ConditionCPUs=>1` fails while PID 1 may use one CPU), which
/// stops irqbalance; `try-restart` starts no stopped unit. Once all is
/// back, irqbalance must run again, as before `on`.
#[test]
fn irqbalance_skipped_by_systemd_under_a_one_cpu_housekeeping_set_runs_again_after_off() {
    let dir = tempfile::tempdir().unwrap();
    let (sys, _asleep) = host_with_irqbalance_asleep(dir.path());
    let before = tree(dir.path());
    let o = cpushield(dir.path(), &["on", "1-3"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(sys
        .read("proc/200/environ")
        .unwrap()
        .contains("IRQBALANCE_BANNED_CPULIST=1-3"));
    assert_eq!(sys.affinity(1).unwrap(), CpuSet::parse_list("0").unwrap());
    let (code, v) = status_code(dir.path());
    assert_eq!(code, 0, "{v}");
    let o = cpushield(dir.path(), &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        sys.exists("proc/200"),
        "irqbalance runs again: {}",
        text(&o)
    );
    assert!(!sys.unit_skipped("irqbalance.service").unwrap());
    assert_eq!(sys.read("proc/200/environ").unwrap(), "");
    assert_eq!(diff(&before, &tree(dir.path())), Vec::<String>::new());
}

/// Sets fields of the fixture's config (its marker file).
fn set_config(sys: &cpushield::sys::Sys, fields: &[(&str, serde_json::Value)]) {
    let marker = sys.path(fixture::MARKER);
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&marker).unwrap()).unwrap();
    for (name, value) in fields {
        config[*name] = value.clone();
    }
    std::fs::write(&marker, config.to_string()).unwrap();
}

/// systemd 261 and later take `CPUSetPartition=`: the slice asks systemd
/// for the partition, and cpushield writes no partition file itself, also
/// when the shield changes in place; off restores exactly.
#[test]
fn from_systemd_261_the_slice_asks_systemd_for_the_partition() {
    let dir = tempfile::tempdir().unwrap();
    let sys = systemd_host(dir.path());
    set_config(&sys, &[("systemd_version", 262.into())]);
    let before = tree(dir.path());

    let o = cpushield(dir.path(), &["on", "2-3", "--dry-run", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let steps = plan["plan"].as_array().unwrap();
    assert!(
        steps.iter().all(|s| !s["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("cpuset.cpus.partition"))),
        "no partition file written by cpushield: {plan}"
    );
    assert!(
        steps.iter().any(|s| s["call"]["partition"] == "isolated"),
        "{plan}"
    );
    assert!(plan["mechanism"]
        .as_str()
        .unwrap()
        .contains("CPUSetPartition="));

    let o = cpushield(dir.path(), &["on", "2-3"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        sys.read_trimmed(&format!("{SLICE}/cpuset.cpus.partition"))
            .unwrap(),
        "isolated"
    );
    assert!(sys
        .read("run/systemd/transient/cpushield.slice")
        .unwrap()
        .contains("CPUSetPartition=isolated"));
    assert_eq!(status_code(dir.path()).0, 0);

    // In place to CPU 3: systemd is asked again, with the CPUs.
    let o = cpushield(dir.path(), &["on", "3", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        sys.read_cpulist(&format!("{SLICE}/cpuset.cpus")).unwrap(),
        CpuSet::parse_list("3").unwrap()
    );
    assert_eq!(
        sys.read_trimmed(&format!("{SLICE}/cpuset.cpus.partition"))
            .unwrap(),
        "isolated"
    );
    assert_eq!(status_code(dir.path()).0, 0);

    let o = cpushield(dir.path(), &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(diff(&before, &tree(dir.path())), Vec::<String>::new());
}

/// systemd only logs a warning when the kernel refuses the partition it
/// asks for: cpushield reads it back, fails, names the kernel's reason and
/// rolls back.
#[test]
fn a_partition_systemd_could_not_make_rolls_on_back() {
    let dir = tempfile::tempdir().unwrap();
    let sys = systemd_host(dir.path());
    set_config(
        &sys,
        &[
            ("systemd_version", 262.into()),
            (
                "partition_invalid",
                "Cpu list in cpuset.cpus not exclusive".into(),
            ),
        ],
    );
    let before = tree(dir.path());
    let o = cpushield(dir.path(), &["on", "2-3"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("not exclusive") && text(&o).contains("rolled back"),
        "{}",
        text(&o)
    );
    assert_eq!(diff(&before, &tree(dir.path())), Vec::<String>::new());
}

/// irqbalance restarted with the ban 2-3 (its socket asleep), then told
/// 1-3 through its socket by a change in place: the journal keeps one ban
/// record (banned 1-3), and `off` still restarts it, since the ban in its
/// environment is the shield's whatever CPUs it names.
#[test]
fn irqbalance_started_with_an_earlier_ban_is_restarted_by_off_after_a_change_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let sys = systemd_host(dir.path());
    sys.mkdir("run/irqbalance").unwrap();
    let sock = sys.path("run/irqbalance/irqbalance200.sock");
    let asleep = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let before = tree(dir.path());
    let o = cpushield(dir.path(), &["on", "2-3"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(sys
        .read("proc/200/environ")
        .unwrap()
        .contains("IRQBALANCE_BANNED_CPULIST=2-3"));
    drop(asleep);
    std::fs::remove_file(&sock).unwrap();
    let socket = FakeIrqbalanceSocket::serve(&sock);
    let o = cpushield(dir.path(), &["on", "1-3"]);
    assert!(o.status.success(), "{}", text(&o));
    // Told, not restarted: its environment still bans 2-3.
    assert!(sys
        .read("proc/200/environ")
        .unwrap()
        .contains("IRQBALANCE_BANNED_CPULIST=2-3"));
    let journal = std::fs::read_to_string(sys.path("run/cpushield/journal/000001.json")).unwrap();
    assert_eq!(journal.matches("irqbalance_ban").count(), 1, "{journal}");
    let o = cpushield(dir.path(), &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(sys.read("proc/200/environ").unwrap(), "", "{}", text(&o));
    drop(socket);
    std::fs::remove_file(&sock).ok();
    let d = diff(&before, &tree(dir.path()));
    assert!(d.iter().all(|l| l.contains("irqbalance200.sock")), "{d:#?}");
}

/// On a systemd host with PM QoS files: `on FIRST`, then `on SECOND`
/// failing at CPU `refused`'s PM QoS file (the idle states come late, the
/// irqbalance ban first), rolled back; `kept` checks the rollback's
/// irqbalance ban, then `status` must not find it broken and `off` must
/// give back the tree from before.
fn roll_back_a_change_in_place(
    manager_env: &str,
    first: &str,
    second: &str,
    refused: u32,
    kept: &dyn Fn(&cpushield::sys::Sys),
) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let sys = systemd_host(root);
    if !manager_env.is_empty() {
        std::fs::write(sys.path(fixture::MANAGER_ENVIRONMENT), manager_env).unwrap();
        std::fs::write(
            sys.path("proc/200/environ"),
            manager_env.replace('\n', "\0"),
        )
        .unwrap();
    }
    for cpu in 0..4 {
        let file = format!("sys/devices/system/cpu/cpu{cpu}/power/pm_qos_resume_latency_us");
        std::fs::create_dir_all(sys.path(&file).parent().unwrap()).unwrap();
        std::fs::write(sys.path(&file), "0\n").unwrap();
    }
    let before = tree(root);
    let bound = ["--max-idle-latency", "10us"];
    let o = cpushield(root, &[&["on", first][..], &bound].concat());
    assert!(o.status.success(), "{}", text(&o));
    kept(&sys);
    let marker = root.join(fixture::MARKER);
    let unrefused = std::fs::read_to_string(&marker).unwrap();
    let mut config: serde_json::Value = serde_json::from_str(&unrefused).unwrap();
    let file = format!("sys/devices/system/cpu/cpu{refused}/power/pm_qos_resume_latency_us");
    config["refuse"][file] = "EIO".into();
    std::fs::write(&marker, config.to_string()).unwrap();
    let o = cpushield(root, &[&["on", second][..], &bound].concat());
    assert!(!o.status.success(), "the change should fail: {}", text(&o));
    assert!(text(&o).contains("rolled back"), "{}", text(&o));
    kept(&sys);
    let (_, st) = status_code(root);
    assert!(
        !broken_checks(&st).contains(&"irqbalance".to_string()),
        "{st}"
    );
    std::fs::write(&marker, unrefused).unwrap();
    let o = cpushield(root, &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(diff(&before, &tree(root)), Vec::<String>::new());
}

/// A change in place whose later step fails is rolled back to the old
/// shield, irqbalance's ban in systemd's environment with it: undoing the
/// change's ban gives back the ban it replaced (the old shield's), not
/// the machine's from before any shield (the Debian 12 soak's rollback
/// took the ban away, and `status` said BROKEN from then on).
#[test]
fn a_change_in_place_rolled_back_keeps_the_old_shields_irqbalance_ban() {
    roll_back_a_change_in_place("", "2-3", "1-3", 1, &|sys| {
        assert_eq!(
            sys.read(fixture::MANAGER_ENVIRONMENT).unwrap(),
            "IRQBALANCE_BANNED_CPULIST=2-3\n"
        );
    });
}

/// The same with the ban in cpushield's drop-in (the user's own ban is in
/// systemd's environment): the old shield's drop-in is given back.
#[test]
fn a_change_in_place_rolled_back_keeps_the_old_shields_irqbalance_drop_in() {
    let theirs = "LANG=C.UTF-8\nIRQBALANCE_BANNED_CPULIST=1\n";
    roll_back_a_change_in_place(theirs, "3", "2-3", 2, &|sys| {
        assert!(sys.exists(DROPIN), "the old shield's drop-in");
        let env = sys.read(ENV).unwrap();
        assert!(env.contains("IRQBALANCE_BANNED_CPULIST=3\n"), "{env}");
        assert_eq!(sys.read(fixture::MANAGER_ENVIRONMENT).unwrap(), theirs);
    });
}
