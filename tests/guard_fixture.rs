//! The starvation guard on fixture roots: the real `cpushield guard`
//! process scanning an emulated `/proc`, and `on`/`off` starting and
//! stopping it with the shield.

mod common;

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{cpushield, part, standard, text};
use cpushield::sys::fixture::{self, CgroupLayout, FixtureConfig};
use cpushield::sys::procfs::{PF_KTHREAD, PF_NO_SETAFFINITY};

/// A full `stat` line: state, last CPU, real-time priority and policy.
fn stat(tid: i32, name: &str, state: char, cpu: u32, prio: u32, policy: u32) -> String {
    format!(
        "{tid} ({name}) {state} 2 0 0 0 -1 {PF_KTHREAD} 0 0 0 0 0 0 0 0 20 0 1 0 500 0 0 \
         18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 {cpu} {prio} {policy} 0 0 0\n"
    )
}

fn put(root: &Path, rel: &str, contents: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, contents).unwrap();
}

/// A SCHED_FIFO 80 loop (pid 500) and a kworker (pid 501), both runnable
/// on CPU 3; the loop's run time grows each time [`Machine::tick`] runs,
/// the kworker's never does.
struct Machine {
    dir: tempfile::TempDir,
    loop_ns: u64,
}

impl Machine {
    fn new(rt_runtime_us: &str) -> Machine {
        let dir = tempfile::tempdir().unwrap();
        let sys = standard(dir.path(), CgroupLayout::V2, FixtureConfig::default());
        fixture::add_process(&sys, 500, &[common::task("spin", 0, "3")]).unwrap();
        fixture::add_process(
            &sys,
            501,
            &[common::task(
                "kworker/3:1",
                PF_KTHREAD | PF_NO_SETAFFINITY,
                "3",
            )],
        )
        .unwrap();
        let root = dir.path();
        put(root, "proc/sys/kernel/sched_rt_runtime_us", rt_runtime_us);
        fs::write(
            root.join("proc/500/task/500/stat"),
            stat(500, "spin", 'R', 3, 80, 1),
        )
        .unwrap();
        fs::write(
            root.join("proc/501/task/501/stat"),
            stat(501, "kworker/3:1", 'R', 3, 0, 0),
        )
        .unwrap();
        put(root, "proc/501/task/501/schedstat", "4000 0 3\n");
        let mut m = Machine { dir, loop_ns: 0 };
        m.tick();
        m
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn tick(&mut self) {
        self.loop_ns += 10_000_000;
        put(
            self.root(),
            "proc/500/task/500/schedstat",
            &format!("{} 0 1\n", self.loop_ns),
        );
    }

    /// The kworker's scheduling as the guard left it (the fixture keeps
    /// what `sched_setattr` set in `.sched`).
    fn kworker_policy(&self) -> Option<u64> {
        let text = fs::read_to_string(self.root().join("proc/501/task/501/.sched")).ok()?;
        serde_json::from_str::<serde_json::Value>(&text).ok()?["policy"].as_u64()
    }

    /// `on 2-3 --tune=rt-throttling` (throttling off: a guard starts);
    /// the guard's pid.
    fn on_guarded(&self) -> i64 {
        let o = cpushield(self.root(), &["on", "2-3", "--tune=rt-throttling"]);
        assert!(o.status.success(), "{}", text(&o));
        self.guard_state()["pid"].as_i64().expect("the guard's pid")
    }

    /// `sched_rt_runtime_us` as the fixture's kernel reads it.
    fn rt_runtime(&self) -> String {
        fs::read_to_string(self.root().join("proc/sys/kernel/sched_rt_runtime_us"))
            .unwrap()
            .trim()
            .to_string()
    }

    fn guard_state(&self) -> serde_json::Value {
        fs::read_to_string(self.root().join("run/cpushield/guard.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }

    /// The guard on CPUs 2-3: a 200 us threshold, 50 us slices every
    /// 10 ms, boosts of `duration_ms`.
    fn spawn_guard(&self, duration_ms: &str) -> std::process::Child {
        std::process::Command::new(env!("CARGO_BIN_EXE_cpushield"))
            .arg("--root")
            .arg(self.root())
            .args([
                "guard",
                "--cpus",
                "2-3",
                "--guard-threshold=200",
                "--guard-runtime=50",
                "--guard-period=10000",
            ])
            .arg(format!("--guard-duration={duration_ms}"))
            .spawn()
            .unwrap()
    }

    /// Runs the guard until its state shows the kworker boosted as `kind`,
    /// then stops it with SIGTERM; the state it left.
    fn guard_until_boosted(&mut self, kind: &str) -> serde_json::Value {
        let mut guard = self.spawn_guard("2000");
        let t = Instant::now();
        let mut seen = None;
        while t.elapsed() < Duration::from_secs(10) {
            self.tick();
            let state = self.guard_state();
            // The guard records a boost (as deadline) before it makes it:
            // wait for the kworker's scheduling too.
            let made = kind != "deadline" || self.kworker_policy() == Some(6);
            if state["active"][0]["kind"] == kind && made {
                seen = Some(state);
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(guard.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        let status = guard.wait().unwrap();
        assert!(status.success(), "guard exited with {status:?}");
        let during = seen.unwrap_or_else(|| {
            panic!(
                "the kworker was never boosted as {kind} (SCHED_DEADLINE is policy 6); \
                 policy {:?}, state {}",
                self.kworker_policy(),
                self.guard_state()
            )
        });
        assert_eq!(during["active"][0]["tid"], 501, "{during}");
        assert_eq!(during["active"][0]["previous"]["policy"], 0, "{during}");
        self.guard_state()
    }
}

#[test]
fn the_guard_gives_a_starving_kworker_a_deadline_slice_and_puts_it_back() {
    // Throttling off: the kernel takes SCHED_DEADLINE for a thread bound
    // to one CPU.
    let mut m = Machine::new("-1");
    let after = m.guard_until_boosted("deadline");
    assert_eq!(after["boosts"], 1, "{after}");
    assert_eq!(after["fifo_boosts"], 0, "{after}");
    assert_eq!(after["active"].as_array().map(Vec::len), Some(0), "{after}");
    assert_eq!(
        m.kworker_policy(),
        Some(0),
        "SIGTERM puts the kworker back to SCHED_OTHER"
    );
    // The loop itself, the one thread that ran, was never touched.
    assert!(!m.root().join("proc/500/task/500/.sched").exists());
}

#[test]
fn where_the_kernel_refuses_deadline_the_boost_is_fifo_above_the_loop() {
    // Throttling on: SCHED_DEADLINE is refused (EPERM) for a pinned thread.
    let mut m = Machine::new("950000");
    let after = m.guard_until_boosted("fifo");
    assert!(after["fifo_boosts"].as_u64() >= Some(1), "{after}");
    assert_eq!(after["fifo_boosts"], after["boosts"], "{after}");
    let recent = &after["recent"][0];
    assert_eq!(
        (recent["name"].as_str(), recent["kind"].as_str()),
        (Some("kworker/3:1"), Some("fifo")),
        "{after}"
    );
    assert_eq!(m.kworker_policy(), Some(0));
}

#[test]
fn on_with_throttling_off_starts_the_guard_and_off_stops_it() {
    let m = Machine::new("950000");
    let root = m.root();
    // No knob turns throttling off: throttling protects, no guard.
    let o = cpushield(root, &["on", "2-3"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("protected by RT throttling"),
        "{}",
        text(&o)
    );
    assert!(!root.join("run/cpushield/guard.json").exists());
    assert!(cpushield(root, &["off"]).status.success());

    let o = cpushield(root, &["on", "2-3", "--tune=rt-throttling"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("the starvation guard watches them"),
        "{}",
        text(&o)
    );
    let state = m.guard_state();
    let pid = state["pid"].as_i64().expect("the guard's pid");
    assert!(root.join(format!("proc/{pid}")).exists());
    assert_eq!(state["cpus"], "2-3");
    let o = cpushield(root, &["status", "--json"]);
    let status: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        part(&status, "guard")["data"]["alive"],
        true,
        "{}",
        text(&o)
    );
    assert_eq!(
        part(&status, "guard")["data"]["expected"],
        true,
        "{}",
        text(&o)
    );
    let metrics = cpushield(root, &["metrics"]);
    assert!(
        String::from_utf8_lossy(&metrics.stdout).contains("cpushield_guard_up 1"),
        "{}",
        text(&metrics)
    );

    let o = cpushield(root, &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        !root.join(format!("proc/{pid}")).exists(),
        "guard still runs"
    );
    assert!(!root.join("run/cpushield/guard.json").exists());
    assert_eq!(m.rt_runtime(), "950000", "off turns RT throttling back on");
}

#[test]
fn a_guard_that_died_breaks_the_shield_and_guard_off_warns() {
    let m = Machine::new("950000");
    let root = m.root();
    let pid = m.on_guarded();
    fs::remove_dir_all(root.join(format!("proc/{pid}"))).unwrap();
    let o = cpushield(root, &["status"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(
        text(&o).contains("guard                    NOT RUNNING")
            || text(&o).contains("NOT RUNNING"),
        "{}",
        text(&o)
    );
    assert!(cpushield(root, &["off"]).status.success());

    let o = cpushield(root, &["on", "2-3", "--tune=rt-throttling", "--guard=off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("WARNING: nothing protects kernel work"),
        "{}",
        text(&o)
    );
    assert!(!root.join("run/cpushield/guard.json").exists());
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
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("nothing protects kernel work"),
        "{}",
        text(&o)
    );
    assert!(cpushield(root, &["off"]).status.success());
}

#[test]
fn a_guard_setting_out_of_range_is_refused_before_anything_changes() {
    let m = Machine::new("950000");
    let before = common::tree(m.root());
    let o = cpushield(m.root(), &["on", "2-3", "--guard-runtime=0"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("guard setting runtime=0"), "{}", text(&o));
    assert!(common::diff(&before, &common::tree(m.root())).is_empty());
}

#[test]
fn guard_durations_take_units_and_a_bare_number_keeps_its_unit() {
    let m = Machine::new("950000");
    let before = common::tree(m.root());
    let args = [
        "on",
        "2-3",
        "--tune=rt-throttling",
        "--guard=on",
        "--guard-threshold=2s",
        "--guard-runtime=0.02ms",
        "--guard-period=1000",
        "--guard-duration=1500ms",
        "--dry-run",
        "--json",
    ];
    let o = cpushield(m.root(), &args);
    assert!(o.status.success(), "{}", text(&o));
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let guard = plan["plan"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["owner"] == "guard")
        .unwrap_or_else(|| panic!("no guard step: {plan}"));
    let settings = &guard["payload"]["settings"];
    assert_eq!(settings["threshold_ms"], 2000, "{settings}");
    assert_eq!(settings["runtime_us"], 20, "{settings}");
    assert_eq!(settings["period_us"], 1000, "{settings}");
    assert_eq!(settings["duration_ms"], 1500, "{settings}");
    let o = cpushield(m.root(), &["on", "2-3", "--guard-threshold=1500us"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("not a whole number of ms"),
        "{}",
        text(&o)
    );
    assert!(common::diff(&before, &common::tree(m.root())).is_empty());
}

#[test]
fn off_stops_a_guard_whose_state_file_is_damaged_and_says_what_it_cannot_know() {
    let m = Machine::new("950000");
    let root = m.root();
    let pid = m.on_guarded();
    fs::write(root.join("run/cpushield/guard.json"), "{\"pid\": 4").unwrap();
    let o = cpushield(root, &["off"]);
    assert!(
        !root.join(format!("proc/{pid}")).exists(),
        "the guard, found by its name, is stopped: {}",
        text(&o)
    );
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("guard.json is damaged"),
        "off names what it could not put back: {}",
        text(&o)
    );
    assert!(!root.join("run/cpushield/guard.json").exists());
    assert_eq!(m.rt_runtime(), "950000", "the rest is undone all the same");
}

#[test]
fn on_again_with_guard_off_stops_the_guard_and_on_again_without_it_starts_it() {
    let m = Machine::new("950000");
    let root = m.root();
    let pid = m.on_guarded();
    let o = cpushield(root, &["on", "2-3", "--tune=rt-throttling", "--guard=off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        !root.join(format!("proc/{pid}")).exists(),
        "the guard asked no more is stopped: {}",
        text(&o)
    );
    assert!(!root.join("run/cpushield/guard.json").exists());
    let o = cpushield(root, &["status", "--json"]);
    let status: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        part(&status, "guard")["data"]["expected"],
        false,
        "{}",
        text(&o)
    );

    let o = cpushield(root, &["on", "2-3", "--tune=rt-throttling"]);
    assert!(o.status.success(), "{}", text(&o));
    let pid = m.guard_state()["pid"].as_i64().expect("a new guard");
    assert!(root.join(format!("proc/{pid}")).exists());
    let o = cpushield(root, &["status", "--json"]);
    let status: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        part(&status, "guard")["data"]["alive"],
        true,
        "{}",
        text(&o)
    );
    assert!(cpushield(root, &["off"]).status.success());
    assert!(!root.join(format!("proc/{pid}")).exists());
}

#[test]
fn a_worker_bound_to_a_shielded_cpu_that_never_ran_there_is_watched_too() {
    // A worker made for CPU 3's pool starts where kthreadd runs (CPU 0)
    // and waits for its first run on CPU 3: its last CPU is 0.
    let mut m = Machine::new("-1");
    fs::write(
        m.root().join("proc/501/task/501/stat"),
        stat(501, "kworker/3:2", 'R', 0, 0, 0),
    )
    .unwrap();
    let after = m.guard_until_boosted("deadline");
    assert_eq!(after["recent"][0]["cpu"], 3, "{after}");
    assert_eq!(m.kworker_policy(), Some(0));
}

/// A stand-in for stalld at `usr/sbin/stalld`: writes its arguments to
/// `stalld.args`, reports two starvations (the first of a thread whose name
/// is not UTF-8) and a boost the way stalld 1.26 words them (after its own
/// start-up probe), and on SIGTERM writes
/// `stalld.stopped` and exits.
fn stand_in_stalld(root: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let script = format!(
        "#!/bin/sh\n\
         echo \"$@\" > '{r}/stalld.args'\n\
         trap \"echo stopped > '{r}/stalld.stopped'; exit 0\" TERM\n\
         echo 'stalld: boosted pid 0 (stalld) using SCHED_DEADLINE' >&2\n\
         printf 'stalld: \\377\\376-9 starved on CPU 3 for 1 seconds\\n' >&2\n\
         echo 'stalld: kworker/3:1-501 starved on CPU 3 for 1 seconds' >&2\n\
         echo 'stalld: boosted pid 501 (kworker/3:1) (cpu 3) using SCHED_DEADLINE' >&2\n\
         while :; do sleep 0.05; done\n",
        r = root.display()
    );
    put(root, "usr/sbin/stalld", &script);
    fs::set_permissions(
        root.join("usr/sbin/stalld"),
        fs::Permissions::from_mode(0o755),
    )
    .unwrap();
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let t = Instant::now();
    while !ok() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "timed out waiting: {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn stalld_as_the_engine_starts_once_throttling_is_off_is_counted_and_stopped_with_the_guard() {
    let m = Machine::new("950000");
    let root = m.root();
    stand_in_stalld(root);
    let mut guard = std::process::Command::new(env!("CARGO_BIN_EXE_cpushield"))
        .arg("--root")
        .arg(root)
        .args(["guard", "--cpus", "2-3", "--guard-engine=stalld"])
        .spawn()
        .unwrap();
    // Throttling on: stalld is not started, and the state says why.
    wait_for("the guard says it waits for throttling to go off", || {
        m.guard_state()["stalld"]["waiting"]
            .as_str()
            .is_some_and(|w| w.contains("RT throttling is on"))
    });
    assert!(!root.join("stalld.args").exists());
    put(root, "proc/sys/kernel/sched_rt_runtime_us", "-1\n");
    // Both starvations counted: the first names a thread whose name is
    // not UTF-8, which must not stop the reading of stalld's output.
    wait_for("stalld's starvations counted", || {
        m.guard_state()["boosts"] == 2
    });
    let state = m.guard_state();
    assert_eq!(state["recent"][0]["name"], "\u{FFFD}\u{FFFD}", "{state}");
    assert_eq!(state["recent"][1]["name"], "kworker/3:1", "{state}");
    assert_eq!(state["recent"][1]["cpu"], 3, "{state}");
    assert_eq!(state["stalld"]["starts"], 1, "{state}");
    assert!(state["stalld"]["pid"].as_i64().is_some(), "{state}");
    let args = fs::read_to_string(root.join("stalld.args")).unwrap();
    assert!(
        args.starts_with("-f -v -S -c 2-3 -t 1 -r 50000 -p 200000000 -d 1 --pidfile="),
        "{args}"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(guard.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(guard.wait().unwrap().success());
    wait_for("stalld stopped with the guard", || {
        root.join("stalld.stopped").exists()
    });
}

#[test]
fn stalld_named_journals_its_two_changes_and_off_puts_them_back_unnamed_it_changes_nothing() {
    let m = Machine::new("950000");
    let root = m.root();
    stand_in_stalld(root);
    let features = "sys/kernel/debug/sched/features";
    put(
        root,
        features,
        "GENTLE_FAIR_SLEEPERS NO_HRTICK NO_HRTICK_DL\n",
    );
    // Not named: throttling, a safety net, stays on, and so stalld (which
    // runs only without it) is not the engine: nothing of stalld's changes.
    let o = cpushield(root, &["on", "2-3", "--guard=on", "--dry-run", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let report = String::from_utf8_lossy(&o.stdout);
    assert!(report.contains("\"engine\": \"cpushield\""), "{report}");
    assert!(
        !report.contains("sched_rt_runtime_us") && !report.contains("HRTICK"),
        "{report}"
    );
    // Named: its two changes, journaled.
    let o = cpushield(
        root,
        &["on", "2-3", "--guard=on", "--guard-engine=stalld", "--json"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let report = String::from_utf8_lossy(&o.stdout);
    assert!(report.contains("\"engine\": \"stalld\""), "{report}");
    assert_eq!(
        fs::read_to_string(root.join(features)).unwrap().trim(),
        "HRTICK_DL"
    );
    assert_eq!(m.rt_runtime(), "-1");
    let o = cpushield(
        root,
        &[
            "on",
            "2-3",
            "--guard=on",
            "--guard-engine=cpushield",
            "--dry-run",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = cpushield(root, &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        fs::read_to_string(root.join(features)).unwrap().trim(),
        "NO_HRTICK_DL"
    );
    assert_eq!(m.rt_runtime(), "950000");
}

#[test]
fn stalld_asked_for_where_none_is_installed_is_refused_and_nothing_changes() {
    let m = Machine::new("950000");
    let before = common::tree(m.root());
    let o = cpushield(
        m.root(),
        &["on", "2-3", "--guard=on", "--guard-engine=stalld"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("no stalld is installed"), "{}", text(&o));
    assert_eq!(
        common::diff(&before, &common::tree(m.root())),
        Vec::<String>::new()
    );
}

/// A boosted thread exits and another takes its id: the guard's FIFO
/// windows are not opened on the newcomer (it is known by its start time),
/// and the boost ends there.
#[test]
fn a_thread_that_took_a_boosted_threads_id_is_never_boosted() {
    let mut m = Machine::new("950000");
    let mut guard = m.spawn_guard("5000");
    let t = Instant::now();
    while m.guard_state()["active"][0]["kind"] != "fifo" && t.elapsed() < Duration::from_secs(10) {
        m.tick();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        m.guard_state()["active"][0]["kind"],
        "fifo",
        "{}",
        m.guard_state()
    );
    // The kworker exits; a new thread of the same id starts, SCHED_OTHER,
    // and no longer starves (it ran).
    let newcomer = stat(501, "kworker/3:1", 'S', 3, 0, 0).replace(" 500 0 0 ", " 900 0 0 ");
    for rel in ["proc/501/stat", "proc/501/task/501/stat"] {
        fs::write(m.root().join(rel), &newcomer).unwrap();
    }
    fs::write(m.root().join("proc/501/task/501/.sched"), r#"{"policy":0,"flags":0,"nice":0,"priority":0,"runtime_ns":0,"deadline_ns":0,"period_ns":0}"#).unwrap();
    put(m.root(), "proc/501/task/501/schedstat", "90000000 0 30\n");
    let mut policies = Vec::new();
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(600) {
        m.tick();
        policies.push(m.kworker_policy());
        std::thread::sleep(Duration::from_millis(5));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(guard.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(guard.wait().unwrap().success());
    assert!(
        policies.iter().all(|p| *p == Some(0)),
        "the newcomer was given SCHED_FIFO (policy 1): {policies:?}"
    );
    assert_eq!(m.kworker_policy(), Some(0));
}

/// A change in place restarts the guard on the new CPUs; when a later step
/// of that change fails, the rollback starts the old guard again, as it
/// ran (the Debian 12 soak lost it, and with it the protection of a busy
/// poller's CPU).
#[test]
fn a_change_in_place_rolled_back_after_the_guard_restarted_leaves_the_old_guard_running() {
    let m = Machine::new("950000");
    let root = m.root();
    for cpu in 0..4 {
        put(
            root,
            &format!("sys/devices/system/cpu/cpu{cpu}/power/pm_qos_resume_latency_us"),
            "0\n",
        );
    }
    let bound = ["--tune=rt-throttling", "--max-idle-latency", "10us"];
    let o = cpushield(root, &[&["on", "2-3"][..], &bound].concat());
    assert!(o.status.success(), "{}", text(&o));
    let old = m.guard_state();
    assert_eq!(old["cpus"], "2-3");
    // CPU 1's PM QoS file refuses: the change to 1-3 fails after the guard
    // restarted on 1-3 (the idle states come after the guard).
    let marker = root.join(cpushield::sys::fixture::MARKER);
    let mut config: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&marker).unwrap()).unwrap();
    config["refuse"]["sys/devices/system/cpu/cpu1/power/pm_qos_resume_latency_us"] = "EIO".into();
    fs::write(&marker, config.to_string()).unwrap();
    let o = cpushield(root, &[&["on", "1-3"][..], &bound].concat());
    assert!(!o.status.success(), "the change should fail: {}", text(&o));
    assert!(text(&o).contains("rolled back"), "{}", text(&o));
    let now = m.guard_state();
    let pid = now["pid"]
        .as_i64()
        .unwrap_or_else(|| panic!("no guard: {now}; {}", text(&o)));
    assert!(
        root.join(format!("proc/{pid}")).exists(),
        "no guard runs: {now}"
    );
    assert_eq!(now["cpus"], "2-3", "the old shield's guard: {now}");
    // (What else the fixture's rollback could not give back, the
    // affinities its emulation refuses, status names; not the guard.)
    let o = cpushield(root, &["status"]);
    let said = text(&o);
    assert!(
        !said.contains("guard the shield started is not running"),
        "{said}"
    );
    let o = cpushield(root, &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        !root.join(format!("proc/{pid}")).exists(),
        "off stops the guard"
    );
}
