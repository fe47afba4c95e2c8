//! The shield's share of the L3 cache, against the fixture's resctrl (no
//! QEMU model has RDT): the plan, the journal, the read-back, `status`
//! catching a changed schemata, the change in place, exact `off`, a kill
//! at every write, and the refusals.

mod common;

use std::fs;
use std::path::Path;

use common::{
    cpushield, diff, json, killed_at_every_write_then_off_gives_back, part, read, standard, text,
    tree,
};
use cpushield::sys::fixture::{CgroupLayout, FixtureConfig, ResctrlModel};

/// A machine of 4 CPUs, two per L3 cache (CPUs 0-1 on cache 0, 2-3 on
/// cache 1), with 11-way caches, 16 CLOSIDs and memory bandwidth
/// allocation.
fn rdt_machine(model: ResctrlModel) -> tempfile::TempDir {
    common::rdt_machine(model, vec![0, 0, 1, 1])
}

fn mounted(root: &Path) -> bool {
    read(root, "proc/self/mounts").contains(" /sys/fs/resctrl resctrl ")
}

#[test]
fn the_shield_gets_the_top_ways_of_its_l3_and_off_gives_everything_back() {
    let dir = rdt_machine(ResctrlModel::default());
    let root = dir.path();
    let before = tree(root);
    let o = cpushield(
        root,
        &[
            "on",
            "2-3",
            "--cache-ways",
            "4",
            "--others-bandwidth",
            "50",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    // As the kernel holds it: resctrl mounted by on, the group with the
    // shielded CPUs and the top 4 of 11 ways of cache 1; the default group
    // keeps the 7 below there, all of cache 0, and half the bandwidth.
    assert!(mounted(root));
    let group = "sys/fs/resctrl/cpushield";
    assert_eq!(read(root, &format!("{group}/cpus_list")), "2-3\n");
    assert_eq!(read(root, "sys/fs/resctrl/cpus_list"), "0-1\n");
    assert_eq!(
        read(root, &format!("{group}/schemata")),
        "L3:0=7ff;1=780\nMB:0=100;1=100\n"
    );
    assert_eq!(
        read(root, "sys/fs/resctrl/schemata"),
        "L3:0=7ff;1=07f\nMB:0=50;1=50\n"
    );
    // The report reads it back.
    let r = json(&o);
    let share = &part(&r, "resctrl")["data"];
    assert_eq!(share["shield"], "L3:0=7ff;1=780; MB:0=100;1=100", "{r}");
    assert_eq!(share["others"], "L3:0=7ff;1=07f; MB:0=50;1=50", "{r}");
    let o = cpushield(root, &["status", "--json"]);
    let r = json(&o);
    assert_eq!(r["holds"], true, "{r}");
    // resctrl's monitoring of the group, per L3 of the machine (the
    // fixture's counters read 4 MiB held, 1 GiB moved), in status and in
    // the metrics.
    let cache = &part(&r, "resctrl")["data"];
    assert_eq!(cache["cpus"], "2-3", "{cache}");
    assert_eq!(cache["monitored"][1]["domain"], 1, "{cache}");
    assert_eq!(
        cache["monitored"][1]["llc_occupancy_bytes"],
        4 << 20,
        "{cache}"
    );
    assert_eq!(cache["others_monitored"][0]["domain"], 0, "{cache}");
    let o = cpushield(root, &["status"]);
    assert!(
        text(&o).contains("4096 KiB held, 1024 MiB to and from memory"),
        "{}",
        text(&o)
    );
    let o = cpushield(root, &["metrics"]);
    let m = text(&o);
    assert!(
        m.contains("cpushield_shield_l3_occupancy_bytes{group=\"shield\",l3=\"1\"} 4194304"),
        "{m}"
    );
    assert!(
        m.contains("cpushield_shield_l3_occupancy_bytes{group=\"others\",l3=\"0\"} 4194304"),
        "{m}"
    );
    assert!(
        m.contains("# TYPE cpushield_shield_memory_bytes_total counter"),
        "{m}"
    );

    let o = cpushield(root, &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!mounted(root), "off unmounts the resctrl on mounted");
    let d = diff(&before, &tree(root));
    assert!(d.is_empty(), "off left: {d:#?}");
}

#[test]
fn status_breaks_when_another_program_changes_a_schemata_and_on_again_repairs_it() {
    let dir = rdt_machine(ResctrlModel::default());
    let root = dir.path();
    assert!(cpushield(root, &["on", "2-3", "--cache-ways", "4"])
        .status
        .success());
    // Someone gives the default group every way of cache 1 again.
    fs::write(
        root.join("sys/fs/resctrl/schemata"),
        "L3:0=7ff;1=7ff\nMB:0=100;1=100\n",
    )
    .unwrap();
    let o = cpushield(root, &["status", "--json"]);
    let r = json(&o);
    assert_eq!(r["holds"], false, "{r}");
    let broken = r["broken"].to_string();
    assert!(
        broken.contains("resctrl") && broken.contains("where the shield set L3:1=7f"),
        "{broken}"
    );
    assert!(!o.status.success(), "a broken shield exits non-zero");
    // `on` again changes in place only what drifted: the default group's
    // schemata (after the record of the affinities every change makes).
    let o = cpushield(
        root,
        &["on", "2-3", "--cache-ways", "4", "--dry-run", "--json"],
    );
    let plan = json(&o)["plan"].clone();
    assert_eq!(plan.as_array().map(Vec::len), Some(2), "{plan}");
    assert_eq!(plan[1]["owner"], "resctrl", "{plan}");
    assert_eq!(
        plan[1]["payload"]["path"], "sys/fs/resctrl/schemata",
        "{plan}"
    );
    let o = cpushield(root, &["on", "2-3", "--cache-ways", "4"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        read(root, "sys/fs/resctrl/schemata"),
        "L3:0=7ff;1=07f\nMB:0=100;1=100\n"
    );
    assert_eq!(json(&cpushield(root, &["status", "--json"]))["holds"], true);
}

#[test]
fn a_change_in_place_moves_the_share_and_drops_it_and_off_still_gives_back_the_first_machine() {
    let dir = rdt_machine(ResctrlModel::default());
    let root = dir.path();
    let before = tree(root);
    assert!(cpushield(root, &["on", "2-3", "--cache-ways", "4"])
        .status
        .success());
    // More ways, and the shield grows onto cache 0.
    let o = cpushield(root, &["on", "1-3", "--cache-ways", "6", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let group = "sys/fs/resctrl/cpushield";
    assert_eq!(read(root, &format!("{group}/cpus_list")), "1-3\n");
    assert_eq!(
        read(root, &format!("{group}/schemata")),
        "L3:0=7e0;1=7e0\nMB:0=100;1=100\n"
    );
    assert_eq!(
        read(root, "sys/fs/resctrl/schemata"),
        "L3:0=01f;1=01f\nMB:0=100;1=100\n"
    );
    // No cache share: the CPUs and the ways go back to the default group.
    let o = cpushield(root, &["on", "1-3"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(read(root, &format!("{group}/cpus_list")), "\n");
    assert_eq!(read(root, "sys/fs/resctrl/cpus_list"), "0-3\n");
    assert_eq!(
        read(root, "sys/fs/resctrl/schemata"),
        "L3:0=7ff;1=7ff\nMB:0=100;1=100\n"
    );
    assert!(cpushield(root, &["off"]).status.success());
    let d = diff(&before, &tree(root));
    assert!(d.is_empty(), "off left: {d:#?}");
}

#[test]
fn killed_at_every_write_off_gives_back_the_machine() {
    let dir = rdt_machine(ResctrlModel::default());
    let root = dir.path();
    let before = tree(root);
    let on = ["on", "2-3", "--cache-ways", "4", "--others-bandwidth", "50"];
    let o = cpushield(root, &[&on[..], &["--json"]].concat());
    assert!(o.status.success(), "{}", text(&o));
    // One planned step only records affinities and makes no kernel write.
    let total = json(&o)["planned"].as_u64().unwrap() - 1;
    assert!(cpushield(root, &["off"]).status.success());
    killed_at_every_write_then_off_gives_back(root, &before, tree, &on, total, || {});
}

#[test]
fn without_cache_allocation_on_refuses_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    standard(root, CgroupLayout::V2, FixtureConfig::default());
    let before = tree(root);
    let o = cpushield(root, &["on", "2-3", "--cache-ways", "4"]);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(
        t.contains("cat_l3") && t.contains("nothing was changed"),
        "{t}"
    );
    assert!(diff(&before, &tree(root)).is_empty());
    // Bandwidth without MBA, and the hardware's rules once info/ is read.
    let dir = rdt_machine(ResctrlModel {
        mb: false,
        ..Default::default()
    });
    let root = dir.path();
    let before = tree(root);
    let o = cpushield(
        root,
        &["on", "2-3", "--cache-ways", "4", "--others-bandwidth", "50"],
    );
    assert!(text(&o).contains("no mba"), "{}", text(&o));
    assert!(diff(&before, &tree(root)).is_empty());
    let o = cpushield(root, &["on", "2-3", "--others-bandwidth", "50"]);
    assert!(
        !o.status.success() && text(&o).contains("--cache-ways"),
        "{}",
        text(&o)
    );
}

#[test]
fn the_hardwares_rules_refuse_before_or_roll_back_with_the_kernels_reason() {
    let dir = rdt_machine(ResctrlModel::default());
    let root = dir.path();
    let before = tree(root);
    // Not mounted: info/ cannot be read before; the kernel refuses a mask
    // without a way left for the others, and everything is rolled back.
    let o = cpushield(root, &["on", "2-3", "--cache-ways", "11"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("Mask out of range"), "{}", text(&o));
    assert!(
        diff(&before, &tree(root)).is_empty(),
        "{:#?}",
        diff(&before, &tree(root))
    );
    // Mounted by someone else, with a group of theirs: refused up front.
    assert!(cpushield(root, &["on", "2-3", "--cache-ways", "4"])
        .status
        .success());
    assert!(cpushield(root, &["off"]).status.success());
    let sys = cpushield::sys::Sys::at(root);
    sys.mount_resctrl("sys/fs/resctrl").unwrap();
    let mounted_before = tree(root);
    let o = cpushield(root, &["on", "2-3", "--cache-ways", "11"]);
    assert!(
        text(&o).contains("the shield can have 1 to 10"),
        "{}",
        text(&o)
    );
    sys.mkdir("sys/fs/resctrl/batch").unwrap();
    let with_group = tree(root);
    let o = cpushield(root, &["on", "2-3", "--cache-ways", "4"]);
    assert!(text(&o).contains("/sys/fs/resctrl/batch"), "{}", text(&o));
    assert!(diff(&with_group, &tree(root)).is_empty());
    sys.rmdir("sys/fs/resctrl/batch").unwrap();
    // Mounted before the shield: off leaves it mounted.
    assert!(cpushield(root, &["on", "2-3", "--cache-ways", "4"])
        .status
        .success());
    assert!(cpushield(root, &["off"]).status.success());
    assert!(mounted(root));
    assert!(diff(&mounted_before, &tree(root)).is_empty());
}
