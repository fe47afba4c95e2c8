//! A shield whose journal is of version 1 (written by a cpushield before the
//! components' own actions went under `own`, and before each entry named
//! its component) is still undone exactly: an upgrade in the middle of a
//! shield must still `off`. The journal `on` writes is turned into the
//! version 1 layout, entry by entry, as the older binary wrote it: no
//! `by`, no checksum, a component's own action at the top level under its
//! own tag.

mod common;

use std::fs;
use std::path::Path;

use common::{cpushield, diff, standard, systemd_host, text, tree};
use cpushield::shield::journal::SUM_KEY;
use cpushield::sys::fixture::{CgroupLayout, FixtureConfig, ResctrlModel};
use serde_json::Value;

/// Rewrites the journal under `root` into the layout of version 1, and
/// returns the tags of the components' own actions it wrote at the top.
fn to_version_1(root: &Path) -> Vec<String> {
    let dir = root.join("run/cpushield/journal");
    let state_file = dir.join("state.json");
    let mut state: Value = serde_json::from_slice(&fs::read(&state_file).unwrap()).unwrap();
    assert_eq!(state["version"], 3, "a new journal is of version 3");
    state["version"] = 1.into();
    // Versions 1 and 2 kept the components' records at the top level.
    let map = state.as_object_mut().unwrap();
    let parts = map.remove("parts").unwrap_or_default();
    for (component, older) in [
        ("irqs", "irqs_kept"),
        ("irqbalance", "irqbalance_ban"),
        ("guard", "guard"),
    ] {
        if let Some(record) = parts.get(component) {
            map.insert(older.into(), record.clone());
        }
    }
    fs::write(&state_file, serde_json::to_vec(&state).unwrap()).unwrap();
    let mut tags = Vec::new();
    for e in fs::read_dir(&dir).unwrap().flatten() {
        let path = e.path();
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        if !stem.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let entries: Vec<Value> = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        let old: Vec<Value> = entries
            .into_iter()
            .map(|mut entry| {
                let map = entry.as_object_mut().unwrap();
                assert!(
                    map.remove("by").is_some(),
                    "every entry names its component"
                );
                // Nor had a record a checksum before version 3 (it is
                // optional there: records without one are still read).
                assert!(
                    map.remove(SUM_KEY).is_some(),
                    "every entry carries its checksum"
                );
                if map["action"] != "own" {
                    return entry;
                }
                let mut own = map["payload"].as_object().unwrap().clone();
                tags.push(own["action"].as_str().unwrap().to_string());
                for key in ["prior", "at"] {
                    if let Some(v) = map.get(key) {
                        own.insert(key.into(), v.clone());
                    }
                }
                Value::Object(own)
            })
            .collect();
        fs::write(&path, serde_json::to_vec(&old).unwrap()).unwrap();
    }
    tags.sort();
    tags
}

/// `off` by this cpushield succeeds and leaves the tree under `root` as
/// it was `before` the shield.
fn off_restores(root: &Path, before: &std::collections::BTreeMap<String, String>) {
    let o = cpushield(root, &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    let d = diff(before, &tree(root));
    assert!(d.is_empty(), "not restored: {d:#?}");
}

#[test]
fn a_cache_share_journaled_by_version_1_is_given_back_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let config = FixtureConfig {
        resctrl: Some(ResctrlModel {
            l3_of_cpu: vec![0, 0, 1, 1],
            ..Default::default()
        }),
        ..Default::default()
    };
    standard(root, CgroupLayout::V2, config);
    let before = tree(root);
    let o = cpushield(root, &["on", "2-3", "--heal", "off", "--cache-ways", "4"]);
    assert!(o.status.success(), "{}", text(&o));
    let tags = to_version_1(root);
    assert_eq!(
        tags,
        ["mount_resctrl", "resctrl_schemata", "resctrl_schemata"]
    );
    // The new binary reads the old journal: status still sees the share.
    let st = cpushield(root, &["status", "--json"]);
    assert!(st.status.success(), "{}", text(&st));
    off_restores(root, &before);
}

#[test]
fn irqbalances_ban_journaled_by_version_1_is_taken_out_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    systemd_host(root);
    let before = tree(root);
    let o = cpushield(root, &["on", "2-3", "--heal", "off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(to_version_1(root), ["irqbalance_ban"]);
    off_restores(root, &before);
}

#[test]
fn an_irq_kept_on_the_shield_by_version_1_is_still_no_drift() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    systemd_host(root);
    let before = tree(root);
    let o = cpushield(root, &["on", "2-3", "--heal", "off", "--irq", "eth0"]);
    assert!(o.status.success(), "{}", text(&o));
    to_version_1(root);
    let state = fs::read(root.join("run/cpushield/journal/state.json")).unwrap();
    let state: Value = serde_json::from_slice(&state).unwrap();
    let kept = state["irqs_kept"]
        .as_array()
        .expect("irqs_kept at the top level");
    assert!(kept.contains(&24.into()), "{state}");
    // The IRQ bound to the shield on request is kept there, not drift.
    let st = cpushield(root, &["status", "--json"]);
    let st: Value = serde_json::from_slice(&st.stdout).unwrap();
    assert_eq!(st["holds"], true, "{st}");
    off_restores(root, &before);
}

#[test]
fn a_version_1_entry_of_an_unknown_tag_is_damage_not_a_component() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    systemd_host(root);
    assert!(cpushield(root, &["on", "2-3", "--heal", "off"])
        .status
        .success());
    to_version_1(root);
    // A tag no version wrote: the journal says a record is not cpushield's.
    let seg = root.join("run/cpushield/journal/000001.json");
    let mut entries: Vec<Value> = serde_json::from_slice(&fs::read(&seg).unwrap()).unwrap();
    entries.push(serde_json::json!({"action": "irqbalance_bam", "banned": "2-3"}));
    fs::write(&seg, serde_json::to_vec(&entries).unwrap()).unwrap();
    let o = cpushield(root, &["off"]);
    let out = text(&o);
    assert!(
        out.contains("record 17 of 17 is not a cpushield record (unknown variant `irqbalance_bam`"),
        "{out}"
    );
}
