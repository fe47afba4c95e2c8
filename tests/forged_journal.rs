//! A journal record that names what no shield changes, on fixture roots:
//! `off` does not act on it, names it, exits 5, and undoes every other
//! record exactly; what the record named is left as it is. The records
//! forged here carry a valid checksum (written through the journal's own
//! writer), as whoever could write the journal could compute one: it is
//! the allow-list that refuses them. A record altered by hand without
//! that is refused by its checksum. See docs/security.md.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::*;
use cpushield::shield::change::Action;
use cpushield::shield::journal::{self, Entry, Journal};
use cpushield::sys::fixture::{CgroupLayout, FixtureConfig};
use cpushield::sys::systemd::SystemdCall;
use cpushield::sys::Sys;

/// What an attacker would like to overwrite, planted in the fixture.
const SHADOW: &str = "etc/shadow";
const SHADOW_TEXT: &str = "root:$6$salt$hash:19000:0:99999:7:::\n";
/// The record forged or altered below: IRQ 25's write (0-3 to 0-1).
const IRQ25: &str = "proc/irq/25/smp_affinity_list";

fn code(o: &std::process::Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// Every file under the root but the IRQs' effective affinities: `on`
/// takes each shielded CPU offline and back (#58), and where an IRQ then
/// runs is the kernel's choice; `off` gives back the affinity asked for.
fn files(root: &Path) -> BTreeMap<String, String> {
    let mut t = tree(root);
    t.retain(|k, _| !k.ends_with("/effective_affinity_list"));
    t
}

/// A shield on the standard fixture with `etc/shadow` planted; the tree
/// before it.
fn shielded(root: &Path) -> BTreeMap<String, String> {
    standard(root, CgroupLayout::V2, FixtureConfig::default());
    plant_shadow(root);
    let before = files(root);
    let o = cpushield(root, &["on", "2-3"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    before
}

fn plant_shadow(root: &Path) {
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::write(root.join(SHADOW), SHADOW_TEXT).unwrap();
}

/// Rewrites the journal's records through `forge`, written again by the
/// journal's own writer (so each carries a valid checksum).
fn forge(root: &Path, forge: impl Fn(&mut Vec<Entry>)) {
    let sys = Sys::at(root);
    let mut all = journal::read_entries(&sys).unwrap();
    forge(&mut all);
    for seg in segments(root) {
        std::fs::remove_file(seg).unwrap();
    }
    Journal::open(&sys).unwrap().append(&all).unwrap();
}

/// IRQ 25's write now names `path`.
fn irq25_to(path: &'static str) -> impl Fn(&mut Vec<Entry>) {
    move |all: &mut Vec<Entry>| {
        let found = all.iter_mut().find_map(|e| match &mut e.action {
            Action::Write { path: p, .. } if p == IRQ25 => Some(p),
            _ => None,
        });
        *found.expect("the shield moved IRQ 25") = path.into();
    }
}

/// `off`: exit 5, `named` in its report, every difference from `before`
/// under `left` (what the refused record would have restored), the
/// planted file as it was, and the journal set aside so that a new
/// shield can start.
fn off_refuses(root: &Path, before: &BTreeMap<String, String>, named: &[&str], left: &str) {
    let o = cpushield(root, &["off"]);
    assert_eq!(code(&o), 5, "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    for n in named {
        assert!(out.contains(n), "{n:?} not named: {}", text(&o));
    }
    assert_eq!(
        std::fs::read_to_string(root.join(SHADOW)).unwrap(),
        SHADOW_TEXT,
        "{}",
        text(&o)
    );
    let unexplained: Vec<String> = diff(before, &files(root))
        .into_iter()
        .filter(|d| !d.contains(left))
        .collect();
    assert_eq!(unexplained, Vec::<String>::new(), "{}", text(&o));
    let sys = Sys::at(root);
    assert!(!Journal::exists(&sys), "{}", text(&o));
    assert!(sys.path("run/cpushield/journal.damaged").is_dir());
}

/// After `off` set the journal aside, a new shield starts and goes.
fn next_shield_can_start(root: &Path) {
    let o = cpushield(root, &["on", "2-3"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert_eq!(code(&cpushield(root, &["off"])), 0);
}

#[test]
fn a_record_rewritten_to_etc_shadow_is_refused_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let before = shielded(root);
    forge(root, irq25_to(SHADOW));
    // --dry-run says it too.
    let o = cpushield(root, &["off", "--dry-run"]);
    assert!(text(&o).contains("/etc/shadow"), "{}", text(&o));
    off_refuses(
        root,
        &before,
        &[
            "write /etc/shadow",
            "outside what a shield changes, not acted on",
        ],
        "proc/irq/25/",
    );
    next_shield_can_start(root);
}

#[test]
fn a_record_whose_path_climbs_out_with_dot_dot_is_refused_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let before = shielded(root);
    forge(root, irq25_to("proc/irq/25/../../../etc/shadow"));
    off_refuses(
        root,
        &before,
        &["a `..` component in the path", "not acted on"],
        "proc/irq/25/",
    );
}

#[test]
fn a_record_whose_path_is_a_planted_symlink_is_refused_and_its_target_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let before = shielded(root);
    // The journal is as `on` wrote it; the file it names is now a link
    // to the secret.
    let file = root.join(IRQ25);
    std::fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink(root.join(SHADOW), &file).unwrap();
    off_refuses(
        root,
        &before,
        &[
            "/proc/irq/25/smp_affinity_list is a symbolic link",
            "not acted on",
        ],
        "proc/irq/25/",
    );
}

#[test]
fn a_forged_systemd_stop_of_a_unit_the_shield_never_made_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let sys = systemd_host(root);
    plant_shadow(root);
    // ssh.service runs (pid 300), a unit the shield has nothing to do with.
    let unit_dir = "sys/fs/cgroup/system.slice/ssh.service";
    sys.mkdir(unit_dir).unwrap();
    cpushield::sys::fixture::add_process(&sys, 300, &[task("sshd", 0, "0-3")]).unwrap();
    sys.write(&format!("{unit_dir}/cgroup.procs"), "300")
        .unwrap();
    std::fs::write(sys.path("run/systemd/transient/ssh.service"), "[Service]\n").unwrap();
    let before = files(root);
    let o = cpushield(root, &["on", "2-3"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    // A record appended as if the shield had started ssh.service, to be
    // stopped by off.
    let forged = Entry {
        action: Action::Systemd {
            call: SystemdCall::StartScope {
                unit: "ssh.service".into(),
                slice: "system.slice".into(),
                pids: vec![300],
                cgroup_dir: unit_dir.into(),
            },
            undo: Some(SystemdCall::Stop {
                unit: "ssh.service".into(),
            }),
            back: None,
        },
        owner: Some("tasks".into()),
        previous: None,
        at: None,
    };
    Journal::open(&sys).unwrap().append(&[forged]).unwrap();
    let o = cpushield(root, &["off"]);
    assert_eq!(code(&o), 5, "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("the systemd unit ssh.service is none a shield starts")
            && out.contains("not acted on"),
        "{}",
        text(&o)
    );
    // ssh.service still runs; everything the shield did is undone.
    assert!(sys.path("run/systemd/transient/ssh.service").exists());
    assert_eq!(
        sys.read_trimmed(&format!("{unit_dir}/cgroup.procs"))
            .unwrap(),
        "300"
    );
    assert_eq!(
        diff(&before, &files(root)),
        Vec::<String>::new(),
        "{}",
        text(&o)
    );
}

#[test]
fn a_record_altered_after_it_was_written_fails_its_checksum_and_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let before = shielded(root);
    // IRQ 25's prior value altered by hand: read as written, off would
    // give IRQ 25 CPU 0 alone rather than 0-3.
    let seg = segments(root)[0].clone();
    let data = std::fs::read_to_string(&seg).unwrap();
    let needle = format!(
        r#""path":"{IRQ25}","value":"0-1","check":"cpu_list","undo":"previous","by":"irqs","prior":"0-3""#
    );
    assert_eq!(data.matches(&needle).count(), 1, "{data}");
    std::fs::write(
        &seg,
        data.replace(&needle, &needle.replace("\"0-3\"", "\"0\"")),
    )
    .unwrap();
    off_refuses(
        root,
        &before,
        &[
            "000001.json",
            "altered after it was written (the checksum does not match)",
        ],
        "proc/irq/25/",
    );
    assert_eq!(read(root, IRQ25), "0-1\n", "left as the shield made it");
}

#[test]
fn a_forged_boot_record_deletes_nothing_the_boot_half_did_not_make() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    // Debian's GRUB, the config asking for the boot half of CPUs 2-3.
    systemd_host(root);
    plant_shadow(root);
    for (rel, text) in [
        (
            "etc/cpushield/cpushield.toml",
            "cpus = \"2-3\"\nboot = true\n",
        ),
        (
            "proc/cmdline",
            "BOOT_IMAGE=/boot/vmlinuz root=/dev/vda1 ro quiet\n",
        ),
        ("proc/sys/kernel/random/boot_id", "boot-1\n"),
        ("etc/default/grub", "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\n"),
        ("usr/sbin/update-grub", "#!/bin/sh\n"),
    ] {
        std::fs::create_dir_all(root.join(rel).parent().unwrap()).unwrap();
        std::fs::write(root.join(rel), text).unwrap();
    }
    std::fs::create_dir_all(root.join("etc/default/grub.d")).unwrap();
    std::fs::create_dir_all(root.join("var/lib")).unwrap();
    let o = cpushield(root, &["apply"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let dropin = "etc/default/grub.d/zz-cpushield.cfg";
    assert!(root.join(dropin).exists());
    // The record now says the boot half made /etc/shadow: removal would
    // delete it.
    let record = root.join("var/lib/cpushield/boot.json");
    let mut r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    r["made"] = serde_json::json!([{"path": SHADOW, "sha256": "", "made_dir": false}]);
    std::fs::write(&record, serde_json::to_vec(&r).unwrap()).unwrap();
    let o = cpushield(root, &["boot", "--remove"]);
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(
        text(&o).contains("/etc/shadow: no file made for it the boot half manages")
            && text(&o).contains("nothing was changed"),
        "{}",
        text(&o)
    );
    assert_eq!(read(root, SHADOW), SHADOW_TEXT);
    assert!(root.join(dropin).exists(), "nothing was changed");
}
