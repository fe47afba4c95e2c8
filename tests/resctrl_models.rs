//! The cache share on the RDT hardware people own, each modelled by the
//! fixture's resctrl as the kernel documentation describes it
//! (Documentation/arch/x86/resctrl.rst): an Intel Xeon Scalable part whose
//! top ways I/O also fills (`shareable_bits` 600), with code and data
//! prioritisation off and on; an AMD EPYC part, memory bandwidth in 1/8
//! GB/s; a resctrl mounted with `mba_MBps`, bandwidth in MiB/s. Each goes
//! through `on`, `status`, the change in place, a kill at every write and
//! `off` (the tree byte-identical). Then other programs' groups: one
//! before `on`, one after, and one that takes a thread of the shield.

mod common;

use std::fs;
use std::path::Path;

use common::{
    cpushield, diff, killed_at_every_write_then_off_gives_back, part, standard, text, tree,
};
use cpushield::sys::fixture::{CgroupLayout, FixtureConfig, ResctrlModel};

/// A machine of 4 CPUs, CPUs 0-1 on L3 cache 0 and 2-3 on cache 1.
fn machine(model: ResctrlModel) -> tempfile::TempDir {
    machine_with_l3(model, vec![0, 0, 1, 1])
}

/// A machine of 4 CPUs, the L3 cache of each CPU as `l3_of_cpu` says.
fn machine_with_l3(model: ResctrlModel, l3_of_cpu: Vec<u32>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let config = FixtureConfig {
        resctrl: Some(ResctrlModel { l3_of_cpu, ..model }),
        ..Default::default()
    };
    standard(dir.path(), CgroupLayout::V2, config);
    dir
}

fn json(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(o)))
}

fn read(root: &Path, rel: &str) -> String {
    fs::read_to_string(root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The schemata of `group` as `RESOURCE:...` lines, without the kernel's
/// indentation.
fn lines(root: &Path, group: &str) -> Vec<String> {
    let text = read(root, &format!("{group}/schemata"));
    text.lines().map(|l| l.trim().to_string()).collect()
}

const GROUP: &str = "sys/fs/resctrl/cpushield";
const DEFAULT: &str = "sys/fs/resctrl";

/// `on` with `args` succeeds and `status` holds; `on`'s report.
fn on_and_holds(root: &Path, args: &[&str]) -> serde_json::Value {
    let o = cpushield(root, &[args, &["--json"]].concat());
    assert!(o.status.success(), "{}", text(&o));
    let status = json(&cpushield(root, &["status", "--json"]));
    assert_eq!(status["holds"], true, "{status}");
    json(&o)
}

/// A kill at every write of `args`, each followed by `off`: the tree
/// `before` every time.
fn killed_everywhere(root: &Path, args: &[&str]) {
    let before = tree(root);
    let o = cpushield(root, &[args, &["--json"]].concat());
    assert!(o.status.success(), "{}", text(&o));
    let total = json(&o)["planned"].as_u64().unwrap() - 1;
    assert!(cpushield(root, &["off"]).status.success());
    killed_at_every_write_then_off_gives_back(root, &before, tree, args, total, || {});
}

#[test]
fn xeon_sp_keeps_the_shield_off_the_ways_io_fills_and_rounds_bandwidth_to_its_step() {
    for cdp in [false, true] {
        let dir = machine(ResctrlModel::xeon_sp(cdp));
        let root = dir.path();
        let before = tree(root);
        // 4 of 11 ways; the top two (600) are DDIO's, so the shield's run
        // is the bottom four (00f) and the default group keeps 7f0, one run
        // each. 55 % is not a step of 10: the kernel keeps 60, and so does
        // the plan, so the read-back holds.
        let args = ["on", "2-3", "--cache-ways", "4", "--others-bandwidth", "55"];
        let r = on_and_holds(root, &args);
        let caches: &[&str] = if cdp { &["L3CODE", "L3DATA"] } else { &["L3"] };
        for cache in caches {
            assert!(
                lines(root, GROUP).contains(&format!("{cache}:0=7ff;1=00f")),
                "cdp {cdp}: {:?}",
                lines(root, GROUP)
            );
            assert!(
                lines(root, DEFAULT).contains(&format!("{cache}:0=7ff;1=7f0")),
                "cdp {cdp}: {:?}",
                lines(root, DEFAULT)
            );
        }
        assert!(lines(root, DEFAULT).contains(&"MB:0=60;1=60".to_string()));
        // A rate is not what Intel's MBA takes: refused, naming the range.
        let o = cpushield(
            root,
            &[
                "on",
                "2-3",
                "--cache-ways",
                "4",
                "--others-bandwidth",
                "6GB/s",
            ],
        );
        assert!(
            !o.status.success()
                && text(&o).contains("takes a percentage")
                && text(&o).contains("10 to 100"),
            "{}",
            text(&o)
        );
        let placement = part(&r, "resctrl")["data"]["placement"].to_string();
        assert!(
            placement.contains("ways 0-3 of 11 (mask f)")
                && placement.contains("away from the ways I/O also fills (shareable_bits 600)"),
            "{placement}"
        );
        // In place: 6 ways on CPUs 1-3 (both caches), still at the bottom.
        let o = cpushield(root, &["on", "1-3", "--cache-ways", "6"]);
        assert!(o.status.success(), "{}", text(&o));
        let cache = caches[0];
        assert!(lines(root, GROUP).contains(&format!("{cache}:0=03f;1=03f")));
        assert!(lines(root, DEFAULT).contains(&format!("{cache}:0=7c0;1=7c0")));
        assert_eq!(json(&cpushield(root, &["status", "--json"]))["holds"], true);
        assert!(cpushield(root, &["off"]).status.success());
        let d = diff(&before, &tree(root));
        assert!(d.is_empty(), "cdp {cdp}: off left {d:#?}");
        killed_everywhere(root, &args);
    }
}

#[test]
fn epyc_takes_the_top_ways_and_bandwidth_as_a_rate_in_eighths_of_a_gbps_not_a_percentage() {
    let dir = machine(ResctrlModel::epyc());
    let root = dir.path();
    let before = tree(root);
    let o = cpushield(
        root,
        &["on", "2-3", "--cache-ways", "4", "--others-bandwidth", "50"],
    );
    assert!(!o.status.success());
    assert!(
        text(&o).contains("1/8 GB/s") && text(&o).contains("nothing was changed"),
        "{}",
        text(&o)
    );
    assert!(diff(&before, &tree(root)).is_empty());
    // 4 of 16 ways, no ways shared with I/O: the top four (f000); the
    // bandwidth of both groups stays at 2048, no limit.
    on_and_holds(root, &["on", "2-3", "--cache-ways", "4"]);
    assert!(lines(root, GROUP).contains(&"L3:0=ffff;1=f000".to_string()));
    assert!(lines(root, DEFAULT).contains(&"L3:0=ffff;1=0fff".to_string()));
    assert!(lines(root, DEFAULT).contains(&"MB:0=2048;1=2048".to_string()));
    // A rate in place: 6 GB/s is 48 steps of 1/8 GB/s, in every domain.
    let rate = [
        "on",
        "2-3",
        "--cache-ways",
        "4",
        "--others-bandwidth",
        "6GB/s",
    ];
    on_and_holds(root, &rate);
    assert!(lines(root, DEFAULT).contains(&"MB:0=48;1=48".to_string()));
    // Without a share in place: the default group gets every way back and
    // its bandwidth as it was, 2048 (no limit).
    assert!(cpushield(root, &["on", "2-3"]).status.success());
    assert!(lines(root, DEFAULT).contains(&"L3:0=ffff;1=ffff".to_string()));
    assert!(
        lines(root, DEFAULT).contains(&"MB:0=2048;1=2048".to_string()),
        "{:?}",
        lines(root, DEFAULT)
    );
    assert!(cpushield(root, &["off"]).status.success());
    let d = diff(&before, &tree(root));
    assert!(d.is_empty(), "off left {d:#?}");
    killed_everywhere(root, &rate);
}

#[test]
fn a_resctrl_mounted_with_mba_mbps_takes_mib_per_s_not_a_percentage_and_is_left_mounted() {
    let dir = machine(ResctrlModel::mba_mbps());
    let root = dir.path();
    let sys = cpushield::sys::Sys::at(root);
    sys.mount_resctrl(DEFAULT).unwrap();
    assert!(read(root, "proc/self/mounts").contains("mba_MBps"));
    let before = tree(root);
    let o = cpushield(
        root,
        &["on", "2-3", "--cache-ways", "4", "--others-bandwidth", "50"],
    );
    assert!(!o.status.success());
    assert!(text(&o).contains("MiB/s"), "{}", text(&o));
    assert!(diff(&before, &tree(root)).is_empty());
    on_and_holds(root, &["on", "2-3", "--cache-ways", "4"]);
    assert!(lines(root, GROUP).contains(&"L3:0=7ff;1=780".to_string()));
    assert!(cpushield(root, &["on", "1-3", "--cache-ways", "5"])
        .status
        .success());
    assert!(lines(root, GROUP).contains(&"L3:0=7c0;1=7c0".to_string()));
    let rate = [
        "on",
        "1-3",
        "--cache-ways",
        "5",
        "--others-bandwidth",
        "4000MiB/s",
    ];
    on_and_holds(root, &rate);
    assert!(lines(root, DEFAULT).contains(&"MB:0=4000;1=4000".to_string()));
    assert!(cpushield(root, &["off"]).status.success());
    let d = diff(&before, &tree(root));
    assert!(d.is_empty(), "off left {d:#?}");
    killed_everywhere(root, &["on", "2-3", "--cache-ways", "4"]);
}

#[test]
fn other_programs_groups_are_left_whole_and_status_names_what_conflicts() {
    let dir = machine(ResctrlModel::default());
    let root = dir.path();
    let sys = cpushield::sys::Sys::at(root);
    // A batch class of another program's, made before the shield: the
    // bottom two ways, which the shield's top four do not touch.
    sys.mount_resctrl(DEFAULT).unwrap();
    let batch = "sys/fs/resctrl/batch";
    sys.mkdir(batch).unwrap();
    sys.write(&format!("{batch}/schemata"), "L3:0=3;1=3\n")
        .unwrap();
    let theirs = |root: &Path| {
        ["schemata", "cpus_list", "tasks", "mode"].map(|f| read(root, &format!("{batch}/{f}")))
    };
    let batch_before = theirs(root);
    let o = cpushield(root, &["on", "2-3", "--cache-ways", "4"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(theirs(root), batch_before, "on changed the other group");
    assert_eq!(json(&cpushield(root, &["status", "--json"]))["holds"], true);
    // A group made after, with every way (as resctrl makes it), and a
    // thread of the shield assigned to the batch class: status names both.
    sys.mkdir("sys/fs/resctrl/late").unwrap();
    let status = json(&cpushield(root, &["status", "--json"]));
    let inside = part(&status, "tasks")["data"]["inside"][0]["tid"]
        .as_i64()
        .expect("a task inside");
    sys.write(&format!("{batch}/tasks"), &inside.to_string())
        .unwrap();
    let status = json(&cpushield(root, &["status", "--json"]));
    assert_eq!(status["holds"], false, "{status}");
    let broken = status["broken"].to_string();
    assert!(
        broken.contains("/sys/fs/resctrl/late")
            && broken.contains("where the shield's 4 ways are 780"),
        "{broken}"
    );
    assert!(
        broken.contains(&format!(
            // Quoted (a group's name is another program's), as JSON escapes it.
            "threads {inside} of the shield are assigned to the resctrl group \\\"/{batch}\\\""
        )),
        "{broken}"
    );
    // off gives back what the shield changed and leaves theirs whole.
    let o = cpushield(root, &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(root.join("sys/fs/resctrl/late").is_dir());
    assert_eq!(read(root, &format!("{batch}/schemata")), batch_before[0]);
    // A new share whose ways the late group holds is refused by name.
    let o = cpushield(root, &["on", "2-3", "--cache-ways", "4"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("/sys/fs/resctrl/late"), "{}", text(&o));
}

#[test]
fn off_leaves_the_resctrl_it_mounted_when_another_program_made_a_group_in_it() {
    let dir = machine(ResctrlModel::default());
    let root = dir.path();
    assert!(cpushield(root, &["on", "2-3", "--cache-ways", "4"])
        .status
        .success());
    let sys = cpushield::sys::Sys::at(root);
    sys.mkdir("sys/fs/resctrl/pqos").unwrap();
    let o = cpushield(root, &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("left, in use by others") && text(&o).contains("/sys/fs/resctrl/pqos"),
        "{}",
        text(&o)
    );
    assert!(read(root, "proc/self/mounts").contains(" /sys/fs/resctrl resctrl "));
    assert!(root.join("sys/fs/resctrl/pqos").is_dir());
    assert!(!root.join(GROUP).exists());
}

#[test]
fn a_share_of_the_only_l3_is_exclusive_and_stays_so_through_a_change_in_place() {
    // One L3 for all four CPUs: the shield's group may be exclusive (its
    // ways away from I/O's, no other group's ways among them).
    let dir = machine_with_l3(ResctrlModel::xeon_sp(false), vec![0, 0, 0, 0]);
    let root = dir.path();
    let before = tree(root);
    let args = ["on", "2-3", "--cache-ways", "4"];
    let r = on_and_holds(root, &args);
    assert_eq!(read(root, &format!("{GROUP}/mode")), "exclusive\n");
    assert_eq!(part(&r, "resctrl")["data"]["mode"], "exclusive", "{r}");
    assert!(lines(root, GROUP).contains(&"L3:0=00f".to_string()));
    assert!(lines(root, DEFAULT).contains(&"L3:0=7f0".to_string()));
    // The kernel refuses another group the shield's ways now.
    let sys = cpushield::sys::Sys::at(root);
    sys.mkdir("sys/fs/resctrl/late").unwrap();
    let refused = sys.write("sys/fs/resctrl/late/schemata", "L3:0=3\n");
    assert!(refused.is_err());
    assert!(read(root, "sys/fs/resctrl/info/last_cmd_status").contains("exclusive"));
    sys.rmdir("sys/fs/resctrl/late").unwrap();
    // More ways in place: shareable while the ways move, exclusive again.
    let o = cpushield(root, &["on", "2-3", "--cache-ways", "6"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(lines(root, GROUP).contains(&"L3:0=03f".to_string()));
    assert!(lines(root, DEFAULT).contains(&"L3:0=7c0".to_string()));
    assert_eq!(read(root, &format!("{GROUP}/mode")), "exclusive\n");
    // No share: the ways go back, which the kernel allows only once the
    // group is shareable again.
    let o = cpushield(root, &["on", "2-3"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(lines(root, DEFAULT).contains(&"L3:0=7ff".to_string()));
    let o = cpushield(root, &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    let d = diff(&before, &tree(root));
    assert!(d.is_empty(), "off left {d:#?}");
    killed_everywhere(root, &args);
}
