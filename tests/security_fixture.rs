//! What a local user without privileges can put in root's way, on fixture
//! roots (docs/security.md): names that would drive root's terminal, a
//! results file that would forge metrics, symlinks planted where root
//! writes, a run directory others may write, a process named irqbalance.

mod common;

use common::*;
use cpushield::sys::fixture::{self, CgroupLayout, FixtureConfig};

/// A process name (4 bytes, as `comm` allows) that hides the rest of a
/// terminal's output when printed raw.
const HIDING: &str = "x\x1b[8m";

/// `o`'s stdout and stderr hold no raw ESC, no other control character
/// than line feed and tab, no C1 control.
fn no_control_bytes(what: &str, o: &std::process::Output) {
    for (stream, bytes) in [("stdout", &o.stdout), ("stderr", &o.stderr)] {
        let text = String::from_utf8_lossy(bytes);
        let bad: Vec<char> = text
            .chars()
            .filter(|&c| c.is_control() && c != '\n' && c != '\t')
            .collect();
        assert!(bad.is_empty(), "{what}: {stream} has raw {bad:?}:\n{text}");
    }
}

/// The standard fixture with a process of the hostile name pinned inside
/// the coming shield, one of a newline's name on every CPU, and an IRQ of
/// a hostile name on a shielded CPU that refuses to move (so that `on` and
/// `status` list it).
fn hostile_names(root: &std::path::Path) -> cpushield::sys::Sys {
    let mut config = FixtureConfig::default();
    let refuse = ("proc/irq/50/smp_affinity_list".into(), "EIO".into());
    config.refuse.extend([refuse]);
    let sys = standard(root, CgroupLayout::V2, config);
    fixture::add_process(&sys, 300, &[task(HIDING, 0, "3")]).unwrap();
    fixture::add_process(&sys, 301, &[task("a\nforged: 1", 0, "0-3")]).unwrap();
    fixture::add_irq(&sys, 50, "e\x1b]0;owned\x07", "2").unwrap();
    sys
}

#[test]
fn a_hostile_process_name_reaches_no_terminal_raw() {
    let dir = tempfile::tempdir().unwrap();
    let sys = hostile_names(dir.path());
    let o = cpushield(dir.path(), &["on", "2-3", "--dry-run"]);
    no_control_bytes("on --dry-run", &o);
    let o = cpushield(dir.path(), &["on", "2-3"]);
    assert!(o.status.success(), "{}", text(&o));
    no_control_bytes("on", &o);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("x\\e[8m"),
        "the name is shown, escaped: {}",
        text(&o)
    );
    // A process that came onto the shield afterwards: status names it.
    fixture::add_process(&sys, 400, &[task(HIDING, 0, "2")]).unwrap();
    let o = cpushield(dir.path(), &["status"]);
    no_control_bytes("status", &o);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("x\\e[8m"), "{}", text(&o));
    assert!(out.contains("e\\e]0;owned\\x07"), "{}", text(&o));
    assert!(!out.lines().any(|l| l.starts_with("forged")), "{out}");
    let o = cpushield(dir.path(), &["audit"]);
    no_control_bytes("audit", &o);
    let o = cpushield(dir.path(), &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    no_control_bytes("off", &o);
}

/// A compare results file whose first phase is `phase`.
fn results_with_phase(dir: &std::path::Path, phase: &str) -> std::path::PathBuf {
    use cpushield::compare::summary::{Curve, SummaryTable};
    let curve = |label: &str| Curve {
        label: label.into(),
        bucket_width_us: 1.0,
        counts: vec![0, 5, 3, 1],
        overflow: 0,
    };
    let summary = SummaryTable::from_curves(&[curve(phase), curve("shielded")], vec![100.0]);
    let json = serde_json::json!({"started_unix_s": 1.0, "summary": summary});
    let path = dir.join("results.json");
    std::fs::write(&path, json.to_string()).unwrap();
    path
}

#[test]
fn metrics_refuses_a_results_file_with_an_unknown_phase() {
    let dir = tempfile::tempdir().unwrap();
    standard(dir.path(), CgroupLayout::V2, FixtureConfig::default());
    let files = tempfile::tempdir().unwrap();
    let good = results_with_phase(files.path(), "idle");
    let o = cpushield(
        dir.path(),
        &["metrics", "--results", good.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("latency_max_seconds{phase=\"idle\"}"), "{out}");

    let forged = results_with_phase(files.path(), "idle\"} 1\ncpushield_shield_up 1\n#");
    let o = cpushield(
        dir.path(),
        &["metrics", "--results", forged.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(o.stdout.is_empty(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(
        err.contains(forged.to_str().unwrap()),
        "names the file: {err}"
    );
    assert!(
        err.contains("idle, unshielded, affinity, shielded, cache-share"),
        "names the valid phases: {err}"
    );
}

/// A file only root may read, and a link to it planted at each name in
/// `names` of `dir` (`dir` made when missing).
fn plant_links(dir: &std::path::Path, secret: &std::path::Path, names: &[&str]) {
    std::fs::create_dir_all(dir).unwrap();
    for name in names {
        std::os::unix::fs::symlink(secret, dir.join(name)).unwrap();
    }
}

fn secret_in(dir: &std::path::Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let secret = dir.join("root-only");
    std::fs::write(&secret, "root's own\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    secret
}

#[test]
fn the_textfile_is_written_through_no_planted_link() {
    let root = tempfile::tempdir().unwrap();
    standard(root.path(), CgroupLayout::V2, FixtureConfig::default());
    let other = tempfile::tempdir().unwrap();
    let secret = secret_in(other.path());
    let textfile = other.path().join("textfile");
    // The final name, and the temporary name the writer used before.
    plant_links(
        &textfile,
        &secret,
        &["cpushield.prom", ".cpushield.prom.tmp"],
    );
    let dir = textfile.to_str().unwrap();
    let o = cpushield(root.path(), &["metrics", "--textfile", dir]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "root's own\n");
    let prom = textfile.join("cpushield.prom");
    let meta = std::fs::symlink_metadata(&prom).unwrap();
    assert!(meta.is_file(), "the link was replaced by the file");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        meta.permissions().mode() & 0o777,
        0o644,
        "the collector reads it"
    );
    let text = std::fs::read_to_string(&prom).unwrap();
    assert!(text.contains("cpushield_shield_up 0"), "{text}");
}

/// The files `compare` writes, and the temporary names it could have used.
const REPORT_NAMES: [&str; 7] = [
    "results.json",
    "summary.txt",
    "histogram.svg",
    "histogram.png",
    "report.html",
    ".results.json.tmp",
    "checkpoint-idle.json",
];

/// `cpushield compare` on CPU 1, no load, 0.3 s a phase, in `cwd`.
fn compare_in(
    root: &std::path::Path,
    cwd: &std::path::Path,
    out: Option<&str>,
) -> std::process::Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_cpushield"));
    cmd.current_dir(cwd).arg("--root").arg(root);
    cmd.args([
        "compare",
        "--cpus",
        "1",
        "--load",
        "none",
        "--duration",
        "0.3",
    ]);
    if let Some(out) = out {
        cmd.args(["--out", out]);
    }
    cmd.output().unwrap()
}

#[test]
fn a_report_directory_made_first_by_someone_else_is_not_used() {
    let root = tempfile::tempdir().unwrap();
    standard(root.path(), CgroupLayout::V2, FixtureConfig::default());
    let shared = tempfile::tempdir().unwrap();
    let secret = secret_in(shared.path());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    // The default directories of the coming seconds, made first.
    let planted: Vec<_> = (now..now + 30)
        .map(|t| shared.path().join(format!("cpushield-compare-{t}")))
        .collect();
    for dir in &planted {
        plant_links(dir, &secret, &REPORT_NAMES);
    }
    let o = compare_in(root.path(), shared.path(), None);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "root's own\n");
    for dir in &planted {
        for name in REPORT_NAMES {
            let meta = std::fs::symlink_metadata(dir.join(name)).unwrap();
            assert!(
                meta.file_type().is_symlink(),
                "{name} in {dir:?} left alone"
            );
        }
    }
    let made: Vec<_> = std::fs::read_dir(shared.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| !planted.contains(p) && p.join("results.json").is_file())
        .collect();
    assert_eq!(
        made.len(),
        1,
        "a new directory of its own: {made:?}\n{}",
        text(&o)
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(made[0].file_name().unwrap().to_str().unwrap()),
        "{out}"
    );
}

#[test]
fn an_existing_out_directory_is_written_through_no_planted_link() {
    let root = tempfile::tempdir().unwrap();
    standard(root.path(), CgroupLayout::V2, FixtureConfig::default());
    let shared = tempfile::tempdir().unwrap();
    let secret = secret_in(shared.path());
    let out = shared.path().join("results");
    plant_links(&out, &secret, &REPORT_NAMES);
    let o = compare_in(root.path(), shared.path(), Some(out.to_str().unwrap()));
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "root's own\n");
    for name in &REPORT_NAMES[..5] {
        let meta = std::fs::symlink_metadata(out.join(name)).unwrap();
        assert!(meta.is_file(), "{name}: the link was replaced by the file");
    }
}

#[test]
fn the_histfile_is_written_through_no_planted_link() {
    let root = tempfile::tempdir().unwrap();
    standard(root.path(), CgroupLayout::V2, FixtureConfig::default());
    let shared = tempfile::tempdir().unwrap();
    let secret = secret_in(shared.path());
    plant_links(shared.path(), &secret, &["hist", ".hist.tmp"]);
    let hist = shared.path().join("hist");
    let o = cpushield(
        root.path(),
        &[
            "measure",
            "--no-rt",
            "--cpus",
            "1",
            "--loops",
            "100",
            "--histfile",
            hist.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "root's own\n");
    let written = std::fs::read_to_string(&hist).unwrap();
    assert!(written.starts_with("# Histogram\n"), "{written}");
}

fn mode_of(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

#[test]
fn the_guard_coming_first_makes_the_run_directory_private() {
    let root = tempfile::tempdir().unwrap();
    standard(root.path(), CgroupLayout::V2, FixtureConfig::default());
    let run_dir = root.path().join("run/cpushield");
    assert!(!run_dir.exists());
    let mut guard = std::process::Command::new(env!("CARGO_BIN_EXE_cpushield"))
        .arg("--root")
        .arg(root.path())
        .args(["guard", "--cpus", "2-3"])
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    while !run_dir.join("guard.json").exists() && t.elapsed().as_secs() < 10 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let pid = nix::unistd::Pid::from_raw(guard.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    assert!(guard.wait().unwrap().success());
    assert!(
        run_dir.join("guard.json").exists(),
        "the guard wrote its state"
    );
    assert_eq!(mode_of(&run_dir), 0o700);
}

#[test]
fn a_run_directory_others_may_write_is_refused_and_named() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap();
    standard(root.path(), CgroupLayout::V2, FixtureConfig::default());
    let run_dir = root.path().join("run/cpushield");
    std::fs::create_dir_all(&run_dir).unwrap();
    std::fs::set_permissions(&run_dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let before = tree(root.path());
    for args in [&["on", "2-3"][..], &["status"], &["off"]] {
        let o = cpushield(root.path(), args);
        assert!(!o.status.success(), "{args:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(run_dir.to_str().unwrap()),
            "{args:?} names it: {err}"
        );
        assert!(err.contains("mode 1777"), "{args:?} says its mode: {err}");
        assert!(
            err.contains("owned by uid"),
            "{args:?} says its owner: {err}"
        );
        assert!(err.contains("neither group nor others may write"), "{err}");
    }
    assert_eq!(tree(root.path()), before, "nothing changed");
    // A symbolic link there is refused too.
    std::fs::remove_dir(&run_dir).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), &run_dir).unwrap();
    let o = cpushield(root.path(), &["on", "2-3"]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("a symbolic link"),
        "{}",
        text(&o)
    );
}

#[test]
fn a_process_named_irqbalance_is_not_taken_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let sys = systemd_host(dir.path());
    // A user's processes, named irqbalance, with lower pids than the real
    // one (200, /usr/sbin/irqbalance): one runs a program of the user's,
    // one shows no executable.
    fixture::add_process(&sys, 150, &[task("irqbalance", 0, "0-3")]).unwrap();
    fixture::set_exe(&sys, 150, "/home/mallory/irqbalance").unwrap();
    std::fs::write(sys.path("proc/150/environ"), "").unwrap();
    fixture::add_process(&sys, 140, &[task("irqbalance", 0, "0-3")]).unwrap();
    let o = cpushield(dir.path(), &["on", "2-3"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("irqbalance kept running as pid 200"),
        "{}",
        text(&o)
    );
    assert!(
        !out.contains("pid 140") && !out.contains("pid 150"),
        "{}",
        text(&o)
    );
}
