//! A damaged journal on fixture roots: with the state or a segment
//! truncated, garbled or missing, `off` restores every change the
//! readable records hold (byte for byte), names what it could not read,
//! exits 5, and never acts on a record it could not read whole; `status`
//! says the journal is damaged and that `off` restores from it.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::*;
use cpushield::shield::change::Action;
use cpushield::shield::journal::{self, Entry, Journal};
use cpushield::sys::fixture::{self, CgroupLayout, FixtureConfig};
use cpushield::sys::Sys;

fn code(o: &std::process::Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// A shield on the standard fixture; returns the tree before it.
fn shielded(root: &Path, again: &[&[&str]]) -> BTreeMap<String, String> {
    standard(root, CgroupLayout::V2, FixtureConfig::default());
    let before = tree(root);
    // No healer: a lost record of it leaves a process that ends by itself
    // once the shield is gone (heal_fixture), which this file's rules of
    // what a lost record leaves do not model.
    let o = cpushield(root, &["on", "2-3", "--heal", "off"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    // Unfolded: a journal of several segments, as a shield changed in
    // place has before its fold and an older cpushield wrote.
    let unfolded = [(fixture::NO_FOLD_ENV, "1".to_string())];
    for args in again {
        let o = cpushield_env(root, args, &unfolded);
        assert_eq!(code(&o), 0, "{args:?}: {}", text(&o));
    }
    before
}

/// What a lost record's change may have left as the shield made it, as
/// parts of `diff`'s lines: the directory of a written file; a cgroup
/// made and all under it, and, while it stands, every task's CPUs and
/// cgroup (the kernel's cpuset rules); the files of the threads whose
/// moves or affinities it recorded.
fn left_by(lost: &[Entry]) -> Vec<String> {
    let mut prefixes = Vec::new();
    let thread = |prefixes: &mut Vec<String>, tid: &i32| {
        prefixes.push(format!("/task/{tid}/"));
        prefixes.push(format!(" proc/{tid}/"));
    };
    for e in lost {
        match &e.action {
            Action::Write { path, .. } => {
                prefixes.push(format!("{}/", path.rsplit_once('/').unwrap().0))
            }
            Action::Mkdir { path } => {
                prefixes.push(format!("{path}/"));
                prefixes.push("/status: ".into());
                prefixes.push("/cgroup: ".into());
            }
            Action::MoveTask {
                to,
                back,
                affinities,
                ..
            } => {
                prefixes.push(to.clone());
                prefixes.push(back.clone());
                for (tid, _) in affinities {
                    thread(&mut prefixes, tid);
                }
            }
            Action::SetAffinity { tid, .. } => thread(&mut prefixes, tid),
            Action::Remember { affinities } => {
                for (tid, _) in affinities {
                    thread(&mut prefixes, tid);
                }
            }
            other => panic!("no fixture rule for {other:?}"),
        }
    }
    prefixes
}

/// Runs `off` on a damaged journal whose intact records were `all`, and
/// checks: exit 5, the damage named, and every difference from `before`
/// left by a record that could not be read (each readable record's
/// change restored byte for byte). Returns the output.
fn off_restores_what_is_readable(
    root: &Path,
    before: &BTreeMap<String, String>,
    all: &[Entry],
    names: &str,
) -> std::process::Output {
    let readable = journal::salvage(&Sys::at(root)).unwrap().entries;
    let lost: Vec<Entry> = all
        .iter()
        .filter(|e| !readable.contains(e))
        .cloned()
        .collect();
    let o = cpushield(root, &["off"]);
    assert_eq!(code(&o), 5, "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("the journal is damaged") && out.contains(names),
        "{names:?} not named: {}",
        text(&o)
    );
    let allowed = left_by(&lost);
    let unexplained: Vec<String> = diff(before, &tree(root))
        .into_iter()
        .filter(|d| !allowed.iter().any(|p| d.contains(p.as_str())))
        .collect();
    assert_eq!(
        unexplained,
        Vec::<String>::new(),
        "differences no lost record explains ({} of {} records lost: {:?}): {}",
        lost.len(),
        all.len(),
        allowed,
        text(&o)
    );
    o
}

/// After a damaged journal's `off` restored everything readable: the
/// journal is set aside, `off` has nothing more to undo, `on` works.
fn next_shield_can_start(root: &Path) {
    let sys = Sys::at(root);
    assert!(!Journal::exists(&sys));
    assert!(sys.path("run/cpushield/journal.damaged").is_dir());
    let o = cpushield(root, &["off"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(text(&o).contains("nothing to undo"), "{}", text(&o));
    let o = cpushield(root, &["on", "2-3"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert_eq!(code(&cpushield(root, &["off"])), 0);
}

#[test]
fn a_truncated_state_status_says_off_restores_and_off_restores_everything() {
    for cut in [0usize, 1, 100, 400] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let before = shielded(root, &[]);
        let sys = Sys::at(root);
        let all = journal::read_entries(&sys).unwrap();
        let state = Journal::dir_of(&sys).join("state.json");
        let data = std::fs::read(&state).unwrap();
        // Inside the file however long the state is: a truncated one.
        std::fs::write(&state, &data[..cut.min(data.len() - 1)]).unwrap();

        let o = cpushield(root, &["status"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(code(&o), 1, "{}", text(&o));
        assert!(
            err.contains("state.json is damaged") && err.contains("'cpushield off' restores"),
            "{err}"
        );
        // on refuses, and says how to get the machine back.
        let o = cpushield(root, &["on", "2"]);
        assert_eq!(code(&o), 1, "{}", text(&o));
        assert!(
            text(&o).contains("'cpushield off' restores"),
            "{}",
            text(&o)
        );

        // --dry-run says what it would undo and what it cannot read.
        let o = cpushield(root, &["off", "--dry-run"]);
        assert_eq!(code(&o), 0, "{}", text(&o));
        assert!(
            text(&o).contains("/proc/irq/25/smp_affinity_list")
                && text(&o).contains("the shield's state does not parse"),
            "{}",
            text(&o)
        );

        off_restores_what_is_readable(root, &before, &all, "state.json");
        assert_eq!(
            diff(&before, &tree(root)),
            Vec::<String>::new(),
            "cut {cut}"
        );
        next_shield_can_start(root);
    }
}

#[test]
fn a_deleted_state_is_a_damaged_journal_not_no_shield() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let before = shielded(root, &[]);
    let sys = Sys::at(root);
    let all = journal::read_entries(&sys).unwrap();
    std::fs::remove_file(Journal::dir_of(&sys).join("state.json")).unwrap();
    let o = cpushield(root, &["status"]);
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(text(&o).contains("it is missing"), "{}", text(&o));
    let o = off_restores_what_is_readable(root, &before, &all, "the shield's state is missing");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("CPUs (unknown: the state is damaged)"),
        "{}",
        text(&o)
    );
    assert_eq!(diff(&before, &tree(root)), Vec::<String>::new());
    next_shield_can_start(root);
}

#[test]
fn each_segment_truncated_at_several_offsets_off_restores_the_records_before_the_cut() {
    // Two changes in place after `on`: the journal has several segments.
    let again: &[&[&str]] = &[
        &["on", "3", "--heal", "off"],
        &["on", "2-3", "--heal", "off", "--irq", "eth0"],
    ];
    let probe = tempfile::tempdir().unwrap();
    shielded(probe.path(), again);
    let count = segments(probe.path()).len();
    assert!(count >= 3, "{count} segments");
    let mut kept = 0;
    for seg in 0..count {
        let len = std::fs::metadata(&segments(probe.path())[seg])
            .unwrap()
            .len() as usize;
        for cut in [0, len / 4, len / 2, 3 * len / 4, len - 1] {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path();
            let before = shielded(root, again);
            let all = journal::read_entries(&Sys::at(root)).unwrap();
            let file = segments(root)[seg].clone();
            let data = std::fs::read(&file).unwrap();
            std::fs::write(&file, &data[..cut]).unwrap();
            let name = file.file_name().unwrap().to_str().unwrap().to_string();
            let o = off_restores_what_is_readable(root, &before, &all, &name);
            let out = String::from_utf8_lossy(&o.stdout);
            assert!(
                out.contains("every record after it") || out.contains("the file does not parse"),
                "segment {name} cut at {cut}: {}",
                text(&o)
            );
            if out.contains("could not restore") {
                // What a lost record left (the shield's cgroup) keeps a
                // readable record's restore from succeeding: the journal
                // stays for another `off` once that is fixed, and says so.
                assert!(Journal::exists(&Sys::at(root)), "{}", text(&o));
                assert!(
                    out.contains("still there: /sys/fs/cgroup/cpushield"),
                    "{}",
                    text(&o)
                );
                kept += 1;
                continue;
            }
            next_shield_can_start(root);
        }
    }
    // The first segment cut at its start loses the shield's cgroup.
    assert!(kept > 0, "a kept journal was exercised");
}

#[test]
fn a_segment_missing_between_others_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let before = shielded(
        root,
        &[
            &["on", "3", "--heal", "off"],
            &["on", "2-3", "--heal", "off"],
        ],
    );
    let all = journal::read_entries(&Sys::at(root)).unwrap();
    let second = segments(root)[1].clone();
    std::fs::remove_file(&second).unwrap();
    off_restores_what_is_readable(root, &before, &all, "the segment is missing");
    next_shield_can_start(root);
}

#[test]
fn a_garbled_record_is_never_acted_on_and_the_others_are_restored() {
    // Valid JSON, but no cpushield record: that record alone is skipped,
    // the file it wrote keeps the shield's value, all else is restored.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let before = shielded(root, &[]);
    let all = journal::read_entries(&Sys::at(root)).unwrap();
    let first = segments(root)[0].clone();
    let text_before = std::fs::read_to_string(&first).unwrap();
    let needle = r#""action":"write","path":"proc/irq/25/smp_affinity_list""#;
    assert_eq!(text_before.matches(needle).count(), 1);
    std::fs::write(
        &first,
        text_before.replace(
            needle,
            r#""action":"wr1te","path":"proc/irq/25/smp_affinity_list""#,
        ),
    )
    .unwrap();
    let o = off_restores_what_is_readable(root, &before, &all, "is not a cpushield record");
    let changed = diff(&before, &tree(root));
    assert!(
        !changed.is_empty() && changed.iter().all(|d| d.contains("proc/irq/25/")),
        "{changed:?}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("proc/irq/25/smp_affinity_list")).unwrap(),
        "0-1\n",
        "left as the shield made it: off never acts on a record it cannot read"
    );
    assert!(text(&o).contains("record 15 of 17"), "{}", text(&o));
    next_shield_can_start(root);

    // Broken JSON inside a record: the records before it are restored,
    // none from it on is used.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let before = shielded(root, &[]);
    let all = journal::read_entries(&Sys::at(root)).unwrap();
    let first = segments(root)[0].clone();
    let text_before = std::fs::read_to_string(&first).unwrap();
    std::fs::write(
        &first,
        text_before.replacen(r#""path":"proc/irq/9/"#, r#""path":proc/irq/9/"#, 1),
    )
    .unwrap();
    let o = off_restores_what_is_readable(
        root,
        &before,
        &all,
        "record 13 and every record after it cannot be read",
    );
    let changed = diff(&before, &tree(root));
    assert!(
        changed.iter().any(|d| d.contains("proc/irq/25/")),
        "records after the damage are not used: {changed:?}"
    );
    assert!(
        changed.iter().all(|d| !d.contains("proc/irq/0/")),
        "records before it are: {changed:?}: {}",
        text(&o)
    );
    next_shield_can_start(root);
}

#[test]
fn a_damaged_journal_whose_restore_fails_is_kept_for_another_off() {
    use cpushield::sys::fixture::MARKER;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let before = shielded(root, &[]);
    let sys = Sys::at(root);
    let state = Journal::dir_of(&sys).join("state.json");
    std::fs::write(&state, "{").unwrap();
    // The kernel now refuses IRQ 9's old affinity.
    let marker = sys.path(MARKER);
    let saved = std::fs::read_to_string(&marker).unwrap();
    let mut config: FixtureConfig = serde_json::from_str(&saved).unwrap();
    config
        .refuse
        .insert("proc/irq/9/smp_affinity_list".into(), "EIO".into());
    std::fs::write(&marker, serde_json::to_string(&config).unwrap()).unwrap();
    let o = cpushield(root, &["off", "--json"]);
    assert_eq!(code(&o), 5, "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["failed"][0]["target"], "/proc/irq/9/smp_affinity_list",
        "{v}"
    );
    assert!(
        v["unreadable"][0]["file"]
            .as_str()
            .unwrap()
            .ends_with("state.json"),
        "{v}"
    );
    assert_eq!(v["damaged_journal"], serde_json::Value::Null, "{v}");
    assert!(Journal::exists(&sys), "kept in place for another off");
    // The refusal is fixed: the second off restores the rest and sets the journal aside.
    std::fs::write(&marker, saved).unwrap();
    let o = cpushield(root, &["off"]);
    assert_eq!(code(&o), 5, "{}", text(&o));
    assert!(text(&o).contains("journal.damaged"), "{}", text(&o));
    assert_eq!(diff(&before, &tree(root)), Vec::<String>::new());
    next_shield_can_start(root);
}
