//! A shield that lives: the journal is folded as tasks moved onto the
//! shield exit and the shield changes in place, so that it stays as large
//! as what is in effect; `off` still restores exactly, and a kill at any
//! step of a fold leaves a journal `off` restores exactly.

mod common;

use std::path::Path;

use common::*;
use cpushield::sys::fixture::{self, CgroupLayout, FixtureConfig, CRASH_IN_FOLD_ENV};

/// The bytes and files of the journal under `root`.
fn journal_size(root: &Path) -> (u64, usize) {
    let dir = root.join("run/cpushield/journal");
    let files: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
    let bytes = files.iter().map(|f| f.metadata().unwrap().len()).sum();
    (bytes, files.len())
}

/// A process of two threads starts, is moved onto CPU 3 of the shield,
/// and exits (its `/proc` entry goes, as the kernel's does).
fn job_round(root: &Path, pid: i32) {
    let sys = cpushield::sys::Sys::at(root);
    fixture::add_process(&sys, pid, &[task("job", 0, "0-3"), task("job-t", 0, "0-3")]).unwrap();
    let o = cpushield(root, &["move", &pid.to_string(), "--in", "--cpu", "3"]);
    assert!(o.status.success(), "move {pid}: {}", text(&o));
    std::fs::remove_dir_all(root.join(format!("proc/{pid}"))).unwrap();
    // systemd removes a scope, its cgroup and its transient unit file,
    // once its processes have exited.
    let unit = format!("cpushield-run-{pid}.scope");
    for path in [
        format!("sys/fs/cgroup/cpushield.slice/{unit}"),
        format!("run/systemd/transient/{unit}"),
    ] {
        let path = root.join(path);
        if path.is_dir() {
            std::fs::remove_dir_all(path).unwrap();
        } else if path.exists() {
            std::fs::remove_file(path).unwrap();
        }
    }
}

fn lives_and_folds(layout: &str, host: fn(&Path) -> cpushield::sys::Sys) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let sys = host(root);
    // A service that outlives the rounds: moved in late, given back by off.
    fixture::add_process(&sys, 500, &[task("service", 0, "0-3")]).unwrap();
    let before = tree(root);
    let o = cpushield(root, &["on", "2-3", "--tune=all,rt-throttling"]);
    assert!(o.status.success(), "{}", text(&o));
    let mut sizes = Vec::new();
    for round in 0..40 {
        job_round(root, 1000 + 10 * round);
        // A daemon restarted every third round (journald in the soak):
        // a new long-lived thread each time, the old one gone.
        if round % 3 == 0 {
            let pid = 3000 + round;
            if round > 0 {
                std::fs::remove_dir_all(root.join(format!("proc/{}", pid - 3))).unwrap();
            }
            // Started outside the shield: the kernel keeps it off the shield.
            fixture::add_process(&sys, pid, &[task("daemon", 0, "0")]).unwrap();
        }
        if round == 1 {
            let o = cpushield(root, &["move", "500", "--in", "--cpu", "2"]);
            assert!(o.status.success(), "{}", text(&o));
        }
        // A change in place and back, every fourth round: the same files
        // written again, every thread's affinity recorded again, the
        // starvation guard (RT throttling off) restarted on the new CPUs.
        if round % 4 == 0 {
            for cpus in ["1-3", "2-3"] {
                let o = cpushield(root, &["on", cpus, "--tune=all,rt-throttling"]);
                assert!(o.status.success(), "on {cpus}: {}", text(&o));
            }
        }
        sizes.push(journal_size(root));
    }
    // A change in place every fourth round: the largest of the first five
    // rounds against the largest of the last four.
    let largest = |rounds: &[(u64, usize)]| rounds.iter().map(|r| r.0).max().unwrap();
    let bytes5 = largest(&sizes[..5]);
    let bytes40 = largest(&sizes[36..]);
    let (_, files40) = sizes[39];
    eprintln!("{layout}: the journal after 5 rounds {bytes5} bytes, after 40 {bytes40} bytes");
    assert!(
        bytes40 * 10 <= bytes5 * 11,
        "{layout}: the journal grew from {bytes5} bytes after 5 rounds to {bytes40} after 40: {sizes:?}"
    );
    assert!(files40 <= 3, "{layout}: {files40} files after 40 rounds");
    let status = cpushield(root, &["status", "--json"]);
    assert!(status.status.success(), "{}", text(&status));
    let journal = &json(&status)["journal"];
    assert_eq!(journal["bytes"].as_u64(), Some(bytes40), "{journal}");
    assert_eq!(journal["files"].as_u64(), Some(files40 as u64), "{journal}");
    assert!(journal["records"].as_u64().unwrap() > 10, "{journal}");
    let human = text(&cpushield(root, &["status"]));
    assert!(
        human.contains("journal") && human.contains(" records, "),
        "{human}"
    );
    // The last daemon stops before off, as the first did not exist before on.
    std::fs::remove_dir_all(root.join("proc/3039")).unwrap();
    let o = cpushield(root, &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    let d = diff(&before, &tree(root));
    assert!(d.is_empty(), "{layout}: not restored: {d:#?}");
}

#[test]
fn v2_a_living_shield_keeps_its_journal_as_large_as_what_is_in_effect() {
    lives_and_folds("v2", |root| {
        standard(root, CgroupLayout::V2, FixtureConfig::default())
    });
}

/// The shield as systemd's slice: each change in place is a request to
/// systemd (the slice's `AllowedCPUs=`), undone by the one before it.
#[test]
fn a_living_shield_made_through_systemd_keeps_its_journal_as_large_as_what_is_in_effect() {
    lives_and_folds("systemd slice", systemd_host);
}

#[test]
fn v1_a_living_shield_keeps_its_journal_as_large_as_what_is_in_effect() {
    lives_and_folds("v1", |root| {
        standard(root, CgroupLayout::V1, FixtureConfig::default())
    });
}

/// Killed at every step of a fold: `status` still reads the shield, a
/// later move folds again, and `off` restores exactly.
#[test]
fn a_fold_killed_at_any_step_leaves_a_journal_off_restores_exactly() {
    let mut killed = 0;
    for step in 0..8 {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let sys = standard(root, CgroupLayout::V2, FixtureConfig::default());
        fixture::add_process(&sys, 500, &[task("service", 0, "0-3")]).unwrap();
        let before = tree(root);
        assert!(cpushield(root, &["on", "2-3"]).status.success());
        job_round(root, 1000);
        let o = cpushield_env(
            root,
            &["move", "500", "--in"],
            &[(CRASH_IN_FOLD_ENV, step.to_string())],
        );
        if !o.status.success() {
            killed += 1;
        }
        let status = cpushield(root, &["status"]);
        assert!(status.status.success(), "step {step}: {}", text(&status));
        fixture::add_process(&sys, 1010, &[task("job", 0, "0-3")]).unwrap();
        let o = cpushield(root, &["move", "1010", "--in"]);
        assert!(o.status.success(), "step {step}: {}", text(&o));
        assert!(!root.join("run/cpushield/journal.fold").exists());
        let o = cpushield(root, &["off"]);
        assert!(o.status.success(), "step {step}: {}", text(&o));
        std::fs::remove_dir_all(root.join("proc/1010")).unwrap();
        let d = diff(&before, &tree(root));
        assert!(d.is_empty(), "step {step}: not restored: {d:#?}");
    }
    assert_eq!(killed, 6, "a fold has six steps to be killed at");
}
