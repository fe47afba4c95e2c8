//! The boot half through each bootloader cpushield writes, on fixture roots
//! laid out as the distributions have them: upstream GRUB (Arch, SUSE),
//! GRUB with BLS entries (Fedora, RHEL), systemd-boot with kernel-install
//! (what `bootctl` and `kernel-install` leave on Debian and Fedora), and
//! Debian's GRUB with options of the user's own. Each: written and read
//! back, one value per key on the kernel line, the user told, and removal
//! byte-exact (or, where something else changed a file since, only
//! cpushield's part cut).

mod common;

use common::*;
use cpushield::boot::loader::{efivar_file, LOADER_GUID};
use std::path::Path;

const OPTS: &str = "isolcpus=managed_irq,2-3 nohz_full=2-3 rcu_nocbs=2-3 irqaffinity=0-1";
const OPTS3: &str = "isolcpus=managed_irq,3 nohz_full=3 rcu_nocbs=3 irqaffinity=0-2";

fn put(root: &Path, rel: &str, text: &str) {
    std::fs::create_dir_all(root.join(rel).parent().unwrap()).unwrap();
    std::fs::write(root.join(rel), text).unwrap();
}

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn json(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(o)))
}

fn code(o: &std::process::Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// A machine with the config `boot = true` for CPUs 2-3, booted with `cmdline`.
fn machine(root: &Path, cmdline: &str) {
    systemd_host(root);
    put(
        root,
        "etc/cpushield/cpushield.toml",
        "cpus = \"2-3\"\nboot = true\n",
    );
    put(root, "proc/cmdline", &format!("{cmdline}\n"));
    put(root, "proc/sys/kernel/random/boot_id", "boot-1\n");
    put(root, "etc/machine-id", "0123456789abcdef0123456789abcdef\n");
    std::fs::create_dir_all(root.join("var/lib")).unwrap();
}

/// The files under the directories a bootloader reads (and `/etc/kernel`).
fn boot_files(root: &Path) -> std::collections::BTreeMap<String, String> {
    tree(root)
        .into_iter()
        .filter(|(k, _)| {
            ["boot/", "etc/default/", "etc/kernel/", "efi/"]
                .iter()
                .any(|p| k.starts_with(p))
        })
        .collect()
}

/// The words of the first line that starts with `key` in `text`.
fn line_words(text: &str, key: &str) -> Vec<String> {
    text.lines()
        .find(|l| l.split_whitespace().next() == Some(key))
        .map(|l| l.split_whitespace().skip(1).map(str::to_string).collect())
        .unwrap_or_default()
}

fn count_key(words: &[String], key: &str) -> usize {
    words
        .iter()
        .filter(|w| w.split('=').next() == Some(key))
        .count()
}

/// The next boot, with `cmdline`.
fn reboot(root: &Path, n: u32, cmdline: &str) {
    put(root, "proc/cmdline", &format!("{cmdline}\n"));
    put(
        root,
        "proc/sys/kernel/random/boot_id",
        &format!("boot-{n}\n"),
    );
}

fn apply_ok(root: &Path) -> serde_json::Value {
    let o = cpushield(root, &["apply", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    json(&o)["boot"].clone()
}

#[test]
fn upstream_grub_gets_a_block_in_etc_default_grub_and_loses_it_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    machine(
        root,
        "BOOT_IMAGE=/boot/vmlinuz-linux root=/dev/vda1 rw quiet",
    );
    // Arch: /etc/default/grub without a final newline, grub-mkconfig, no grub.d.
    let defaults = "GRUB_DEFAULT=0\nGRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX_DEFAULT=\"loglevel=3 quiet\"\nGRUB_CMDLINE_LINUX=\"\"";
    put(root, "etc/default/grub", defaults);
    put(root, "usr/bin/grub-mkconfig", "#!/bin/sh\n");
    std::fs::create_dir_all(root.join("boot/grub")).unwrap();
    cpushield::sys::Sys::at(root)
        .run_tool(&["grub-mkconfig", "-o", "/boot/grub/grub.cfg"])
        .unwrap();
    let before = boot_files(root);

    let b = apply_ok(root);
    assert_eq!(b["action"], "written", "{b}");
    assert_eq!(b["bootloader"], "GRUB (grub-mkconfig)");
    assert_eq!(
        b["command"],
        serde_json::json!(["grub-mkconfig", "-o", "/boot/grub/grub.cfg"])
    );
    let now = read(root, "etc/default/grub");
    assert!(now.starts_with(defaults), "the user's lines stay: {now}");
    assert!(now.contains("# cpushield: begin") && now.ends_with("# cpushield: end\n"));
    assert!(
        !root.join("etc/default/grub.d").exists(),
        "no drop-in directory is made"
    );
    let cfg = read(root, "boot/grub/grub.cfg");
    let normal = cfg
        .lines()
        .find(|l| l.contains("linux") && !l.contains("single"))
        .unwrap();
    assert!(
        normal.contains(&format!("loglevel=3 quiet {OPTS}")),
        "{cfg}"
    );
    let recovery = cfg.lines().find(|l| l.contains(" single")).unwrap();
    assert!(
        !recovery.contains("nohz_full"),
        "recovery boots without isolation: {cfg}"
    );

    // Active after the reboot; the user then adds a line of their own.
    reboot(
        root,
        2,
        &format!("BOOT_IMAGE=/boot/vmlinuz-linux root=/dev/vda1 rw loglevel=3 quiet {OPTS}"),
    );
    let o = cpushield(root, &["boot", "--json"]);
    assert_eq!(json(&o)["state"], "active", "{}", text(&o));
    put(
        root,
        "etc/default/grub",
        &format!("GRUB_DISABLE_OS_PROBER=true\n{now}"),
    );
    let o = cpushield(root, &["boot"]);
    assert!(
        text(&o).contains("CHANGED SINCE") && text(&o).contains("/etc/default/grub"),
        "{}",
        text(&o)
    );

    // Removal cuts the block alone; the user's new line stays.
    let o = cpushield(root, &["boot", "--remove", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(json(&o)["files"][0]["action"], "cut", "{}", text(&o));
    assert_eq!(
        read(root, "etc/default/grub"),
        format!("GRUB_DISABLE_OS_PROBER=true\n{defaults}")
    );

    // Without the user's edit, removal is byte-exact.
    put(root, "etc/default/grub", defaults);
    cpushield::sys::Sys::at(root)
        .run_tool(&["grub-mkconfig", "-o", "/boot/grub/grub.cfg"])
        .unwrap();
    apply_ok(root);
    let o = cpushield(root, &["boot", "--remove", "--json"]);
    assert_eq!(json(&o)["files"][0]["action"], "restored", "{}", text(&o));
    assert_eq!(json(&o)["generated_identical"], true, "{}", text(&o));
    assert_eq!(boot_files(root), before);
    assert!(cpushield(root, &["off"]).status.success());
}

#[test]
fn a_bootloader_file_that_is_not_text_is_refused_with_nothing_changed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    machine(
        root,
        "BOOT_IMAGE=/boot/vmlinuz-linux root=/dev/vda1 rw quiet",
    );
    put(root, "usr/bin/grub-mkconfig", "#!/bin/sh\n");
    std::fs::create_dir_all(root.join("boot/grub")).unwrap();
    // Latin-1 in a comment: not UTF-8. Planning from it as "empty" would
    // overwrite the user's file with cpushield's block alone.
    std::fs::write(
        root.join("etc/default/grub"),
        b"# Gr\xfc\xdfe\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\n",
    )
    .unwrap();
    let before = tree(root);
    let o = cpushield(root, &["apply"]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(
        text(&o).contains("/etc/default/grub cannot be read as text"),
        "{}",
        text(&o)
    );
    assert_eq!(diff(&before, &tree(root)), Vec::<String>::new());

    // Written from a readable file, which then stops being text: removal
    // refuses by name instead of taking it for gone, and changes nothing.
    std::fs::write(
        root.join("etc/default/grub"),
        "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\n",
    )
    .unwrap();
    apply_ok(root);
    let mut bytes = std::fs::read(root.join("etc/default/grub")).unwrap();
    bytes.extend_from_slice(b"# \xff\n");
    std::fs::write(root.join("etc/default/grub"), bytes).unwrap();
    let before = tree(root);
    let o = cpushield(root, &["boot", "--remove"]);
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(
        text(&o).contains("/etc/default/grub: it cannot be read as text"),
        "{}",
        text(&o)
    );
    assert_eq!(diff(&before, &tree(root)), Vec::<String>::new());
    assert!(cpushield(root, &["off"]).status.success());
}

#[test]
fn grub2_mkconfig_is_used_where_the_distribution_has_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    machine(root, "BOOT_IMAGE=/boot/vmlinuz root=/dev/vda1 ro");
    // openSUSE: grub2-mkconfig and /boot/grub2, BLS off.
    put(
        root,
        "etc/default/grub",
        "GRUB_CMDLINE_LINUX_DEFAULT=\"splash=silent\"\nGRUB_ENABLE_BLSCFG=false\n",
    );
    put(root, "usr/sbin/grub2-mkconfig", "#!/bin/sh\n");
    std::fs::create_dir_all(root.join("boot/grub2")).unwrap();
    std::fs::create_dir_all(root.join("boot/loader/entries")).unwrap();
    let b = apply_ok(root);
    assert_eq!(
        b["command"],
        serde_json::json!(["grub2-mkconfig", "-o", "/boot/grub2/grub.cfg"]),
        "{b}"
    );
    assert!(read(root, "boot/grub2/grub.cfg").contains(OPTS));
    assert!(cpushield(root, &["boot", "--remove"]).status.success());
    assert!(cpushield(root, &["off"]).status.success());
}

#[test]
fn debian_grub_with_the_users_own_nohz_full_ends_with_one_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    machine(
        root,
        "BOOT_IMAGE=/boot/vmlinuz root=/dev/vda1 ro quiet nohz_full=1",
    );
    put(root, "etc/default/grub", "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet nohz_full=1\"\nGRUB_CMDLINE_LINUX=\"rcu_nocbs=1 console=ttyS0\"\n");
    put(root, "usr/sbin/update-grub", "#!/bin/sh\n");
    std::fs::create_dir_all(root.join("etc/default/grub.d")).unwrap();
    cpushield::sys::Sys::at(root)
        .run_tool(&["update-grub"])
        .unwrap();
    let before = boot_files(root);

    let o = cpushield(root, &["apply"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("nohz_full=1 rcu_nocbs=1 (your options that set the same keys"),
        "the user is told: {}",
        text(&o)
    );
    let cfg = read(root, "boot/grub/grub.cfg");
    let normal: Vec<String> = cfg
        .lines()
        .find(|l| l.contains("linux") && !l.contains("single"))
        .unwrap()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    for key in ["nohz_full", "rcu_nocbs", "isolcpus", "irqaffinity"] {
        assert_eq!(count_key(&normal, key), 1, "{key} once: {normal:?}");
    }
    assert!(
        normal.contains(&"nohz_full=2-3".to_string())
            && normal.contains(&"console=ttyS0".to_string())
    );
    assert_eq!(
        read(root, "etc/default/grub"),
        before["etc/default/grub"],
        "the user's file is untouched"
    );

    // Before the reboot the running line conflicts; after it, one value each.
    let o = cpushield(root, &["boot", "--json"]);
    assert_eq!(
        json(&o)["conflicting"],
        serde_json::json!(["nohz_full=1"]),
        "{}",
        text(&o)
    );
    reboot(
        root,
        2,
        &format!("BOOT_IMAGE=/boot/vmlinuz {}", normal[1..].join(" ")),
    );
    let o = cpushield(root, &["boot", "--json"]);
    assert_eq!(json(&o)["state"], "active", "{}", text(&o));
    assert_eq!(
        json(&o)["replaced"],
        serde_json::json!(["nohz_full=1", "rcu_nocbs=1"])
    );

    assert!(cpushield(root, &["boot", "--remove"]).status.success());
    assert_eq!(boot_files(root), before);
    assert!(cpushield(root, &["off"]).status.success());
}

/// Fedora: GRUB with blscfg, entries in /boot/loader/entries (one rescue),
/// /etc/kernel/cmdline, GRUB_ENABLE_BLSCFG=true.
fn fedora(root: &Path) {
    machine(root, "BOOT_IMAGE=(hd0,gpt2)/vmlinuz-6.11.4-301.fc41.x86_64 root=UUID=abcd ro rhgb quiet nohz_full=1");
    put(
        root,
        "etc/default/grub",
        "GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX=\"rhgb quiet nohz_full=1\"\nGRUB_ENABLE_BLSCFG=true\n",
    );
    put(root, "usr/sbin/grub2-mkconfig", "#!/bin/sh\n");
    put(
        root,
        "etc/kernel/cmdline",
        "root=UUID=abcd ro rhgb quiet nohz_full=1\n",
    );
    let mid = "0123456789abcdef0123456789abcdef";
    for v in ["6.11.4-301.fc41.x86_64", "6.10.12-200.fc40.x86_64"] {
        put(
            root,
            &format!("boot/loader/entries/{mid}-{v}.conf"),
            &format!("title Fedora Linux ({v}) 41\nversion {v}\nlinux /vmlinuz-{v}\ninitrd /initramfs-{v}.img\noptions root=UUID=abcd ro rhgb quiet nohz_full=1\ngrub_users $grub_users\ngrub_arg --unrestricted\ngrub_class fedora\n"),
        );
    }
    put(
        root,
        &format!("boot/loader/entries/{mid}-0-rescue.conf"),
        "title Fedora Linux (0-rescue) 41\nversion 0-rescue\nlinux /vmlinuz-0-rescue\ninitrd /initramfs-0-rescue.img\noptions root=UUID=abcd ro\n",
    );
}

#[test]
fn fedora_bls_entries_kernel_cmdline_and_defaults_are_edited_and_given_back() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fedora(root);
    let before = boot_files(root);
    let b = apply_ok(root);
    assert_eq!(b["bootloader"], "GRUB with BLS entries", "{b}");
    assert_eq!(
        b["command"],
        serde_json::json!([]),
        "GRUB reads the entries at boot"
    );
    assert_eq!(b["replaced"], serde_json::json!(["nohz_full=1"]), "{b}");
    let mid = "0123456789abcdef0123456789abcdef";
    let entry = format!("boot/loader/entries/{mid}-6.11.4-301.fc41.x86_64.conf");
    let words = line_words(&read(root, &entry), "options");
    assert_eq!(count_key(&words, "nohz_full"), 1, "{words:?}");
    assert!(
        OPTS.split(' ').all(|o| words.contains(&o.to_string())),
        "{words:?}"
    );
    assert_eq!(
        read(root, &format!("boot/loader/entries/{mid}-0-rescue.conf")),
        before[&format!("boot/loader/entries/{mid}-0-rescue.conf")],
        "the rescue entry is left alone"
    );
    assert_eq!(
        read(root, "etc/kernel/cmdline"),
        format!("root=UUID=abcd ro rhgb quiet {OPTS}\n")
    );
    assert!(read(root, "etc/default/grub").contains(&format!(
        "GRUB_CMDLINE_LINUX=\"${{GRUB_CMDLINE_LINUX:+$GRUB_CMDLINE_LINUX }}{OPTS}\""
    )));

    // A kernel installed meanwhile: kernel-install writes its entry from
    // /etc/kernel/cmdline, cpushield's words with it.
    let v = "6.12.1-100.fc41.x86_64";
    let new_entry = format!("boot/loader/entries/{mid}-{v}.conf");
    put(
        root,
        &new_entry,
        &format!(
            "title Fedora Linux ({v}) 41\nversion {v}\nlinux /vmlinuz-{v}\noptions {}",
            read(root, "etc/kernel/cmdline")
        ),
    );
    let o = cpushield(root, &["boot", "--remove", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let mut after = boot_files(root);
    assert_eq!(
        after.remove(&new_entry).unwrap(),
        format!("title Fedora Linux ({v}) 41\nversion {v}\nlinux /vmlinuz-{v}\noptions root=UUID=abcd ro rhgb quiet nohz_full=1\n"),
        "the new kernel's entry gets the user's options back"
    );
    assert_eq!(after, before, "every other file byte-identical");
    assert!(cpushield(root, &["off"]).status.success());
}

#[test]
fn rhel8_kernelopts_entries_are_refused_with_nothing_changed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fedora(root);
    let mid = "0123456789abcdef0123456789abcdef";
    put(
        root,
        &format!("boot/loader/entries/{mid}-4.18.0-553.el8.x86_64.conf"),
        "title Red Hat Enterprise Linux (4.18.0-553.el8.x86_64) 8.10\nversion 4.18.0-553.el8.x86_64\nlinux /vmlinuz-4.18.0-553.el8.x86_64\noptions $kernelopts $tuned_params\n",
    );
    let before = tree(root);
    let o = cpushield(root, &["apply"]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(
        text(&o).contains("$kernelopts") && text(&o).contains("grub2-editenv"),
        "{}",
        text(&o)
    );
    assert_eq!(diff(&before, &tree(root)), Vec::<String>::new());
}

/// Debian with systemd-boot booting: the ESP at /boot/efi, entries from
/// kernel-install (one with a boot counter), no /etc/kernel/cmdline, and
/// GRUB installed too.
fn sdboot(root: &Path) -> String {
    machine(
        root,
        "root=/dev/vda2 rw console=ttyS0 nohz_full=1 initrd=\\0123\\initrd.img",
    );
    let mid = "0123456789abcdef0123456789abcdef";
    let efivars = "sys/firmware/efi/efivars";
    for (name, value) in [
        ("LoaderInfo", "systemd-boot 257.9-1~deb13u1"),
        (
            "LoaderEntrySelected",
            &format!("{mid}-6.12.57+deb13-amd64.conf"),
        ),
    ] {
        std::fs::create_dir_all(root.join(efivars)).unwrap();
        std::fs::write(
            root.join(format!("{efivars}/{name}-{LOADER_GUID}")),
            efivar_file(value),
        )
        .unwrap();
    }
    let entry = format!("boot/efi/loader/entries/{mid}-6.12.57+deb13-amd64+3.conf");
    put(root, &entry, &format!("title      Debian GNU/Linux 13 (trixie)\nversion    6.12.57+deb13-amd64\nmachine-id {mid}\nsort-key   debian\noptions    root=/dev/vda2 rw console=ttyS0 nohz_full=1\nlinux      /{mid}/6.12.57+deb13-amd64/linux\ninitrd     /{mid}/6.12.57+deb13-amd64/initrd.img-6.12.57+deb13-amd64\n"));
    put(root, "boot/efi/loader/loader.conf", "timeout 0\n");
    // Another machine's entry on a shared ESP is not ours to edit.
    put(
        root,
        "boot/efi/loader/entries/ffffffffffffffffffffffffffffffff-6.1.0-13-amd64.conf",
        "title Other\nlinux /other/linux\noptions root=/dev/sdb1\n",
    );
    put(
        root,
        "etc/default/grub",
        "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\n",
    );
    put(root, "usr/sbin/update-grub", "#!/bin/sh\n");
    entry
}

#[test]
fn systemd_boot_entries_and_a_created_kernel_cmdline_survive_a_counter_rename() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let entry = sdboot(root);
    let before = boot_files(root);
    let o = cpushield(root, &["apply"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("systemd-boot"), "{}", text(&o));
    assert!(
        text(&o).contains("GRUB (/etc/default/grub): not written, it did not boot this machine"),
        "{}",
        text(&o)
    );
    assert!(
        !root.join("etc/default/grub.d").exists(),
        "GRUB is not written"
    );
    let words = line_words(&read(root, &entry), "options");
    assert_eq!(
        words.join(" "),
        format!("root=/dev/vda2 rw console=ttyS0 {OPTS}")
    );
    assert_eq!(
        read(root, "etc/kernel/cmdline"),
        format!("root=/dev/vda2 rw console=ttyS0 {OPTS}\n"),
        "created from /proc/cmdline without initrd= and the user's nohz_full=1"
    );
    assert_eq!(
        read(
            root,
            "boot/efi/loader/entries/ffffffffffffffffffffffffffffffff-6.1.0-13-amd64.conf"
        ),
        "title Other\nlinux /other/linux\noptions root=/dev/sdb1\n"
    );

    // A change of CPUs in place: one set of options, the user's word still out.
    put(
        root,
        "etc/cpushield/cpushield.toml",
        "cpus = \"3\"\nboot = true\n",
    );
    apply_ok(root);
    let words = line_words(&read(root, &entry), "options");
    assert_eq!(
        words.join(" "),
        format!("root=/dev/vda2 rw console=ttyS0 {OPTS3}")
    );
    assert_eq!(
        read(root, "etc/kernel/cmdline"),
        format!("root=/dev/vda2 rw console=ttyS0 {OPTS3}\n")
    );
    put(
        root,
        "etc/cpushield/cpushield.toml",
        "cpus = \"2-3\"\nboot = true\n",
    );
    apply_ok(root);

    // systemd-boot counts the boot down: the entry is renamed.
    let renamed = entry.replace("+3.conf", "+2-1.conf");
    std::fs::rename(root.join(&entry), root.join(&renamed)).unwrap();
    reboot(
        root,
        2,
        &format!("root=/dev/vda2 rw console=ttyS0 {OPTS} initrd=\\x"),
    );
    let o = cpushield(root, &["boot", "--json"]);
    assert_eq!(json(&o)["state"], "active", "{}", text(&o));
    assert_eq!(json(&o)["drift"], serde_json::json!([]), "{}", text(&o));

    let o = cpushield(root, &["boot", "--remove", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        !root.join("etc/kernel/cmdline").exists(),
        "the file cpushield created is gone"
    );
    let mut after = boot_files(root);
    let mut expected = before.clone();
    let e = expected.remove(&entry).unwrap();
    expected.insert(renamed.clone(), e);
    after.retain(|k, _| !k.starts_with("etc/default/grub.d"));
    assert_eq!(
        after, expected,
        "the renamed entry is given back byte for byte"
    );
    assert!(cpushield(root, &["off"]).status.success());
}

#[test]
fn a_unified_kernel_image_and_a_changed_part_are_refused_with_nothing_changed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let entry = sdboot(root);
    let efivars = "sys/firmware/efi/efivars";
    std::fs::write(
        root.join(format!("{efivars}/StubInfo-{LOADER_GUID}")),
        efivar_file("systemd-stub 257.9-1~deb13u1"),
    )
    .unwrap();
    let before = tree(root);
    let o = cpushield(root, &["apply"]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(
        text(&o).contains("unified kernel image") && text(&o).contains("ukify build --cmdline="),
        "{}",
        text(&o)
    );
    assert_eq!(diff(&before, &tree(root)), Vec::<String>::new());

    // systemd-boot again; the user then rewrites cpushield's words in the entry.
    std::fs::remove_file(root.join(format!("{efivars}/StubInfo-{LOADER_GUID}"))).unwrap();
    apply_ok(root);
    let text_now = read(root, &entry).replace("nohz_full=2-3", "nohz_full=3");
    put(root, &entry, &text_now);
    let before = tree(root);
    let o = cpushield(root, &["boot", "--remove"]);
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(
        text(&o).contains("cannot be taken out exactly") && text(&o).contains(&entry),
        "{}",
        text(&o)
    );
    assert_eq!(
        diff(&before, &tree(root)),
        Vec::<String>::new(),
        "nothing changed"
    );
    assert!(cpushield(root, &["off"]).status.success());
}

/// systemd-boot starting a unified kernel image from the ESP's EFI/Linux,
/// with `cmdline` built in; ukify and its addon stub installed.
fn uki_machine(root: &Path, cmdline: &str) -> String {
    machine(root, cmdline);
    let mid = "0123456789abcdef0123456789abcdef";
    let id = format!("{mid}-6.12.57+deb13-amd64.efi");
    let efivars = "sys/firmware/efi/efivars";
    std::fs::create_dir_all(root.join(efivars)).unwrap();
    for (name, value) in [
        ("LoaderInfo", "systemd-boot 257.9-1~deb13u1"),
        ("LoaderEntrySelected", id.as_str()),
        ("StubInfo", "systemd-stub 257.9-1~deb13u1"),
    ] {
        std::fs::write(
            root.join(format!("{efivars}/{name}-{LOADER_GUID}")),
            efivar_file(value),
        )
        .unwrap();
    }
    let uki = cpushield::sys::fixture::pe_with_sections(&[
        (".cmdline", cmdline.as_bytes()),
        (".uname", b"6.12.57+deb13-amd64"),
        (".linux", b"kernel"),
    ]);
    std::fs::create_dir_all(root.join("boot/efi/EFI/Linux")).unwrap();
    std::fs::write(root.join(format!("boot/efi/EFI/Linux/{id}")), uki).unwrap();
    put(root, "boot/efi/loader/loader.conf", "timeout 0\n");
    put(root, "usr/bin/ukify", "#!/usr/bin/python3\n");
    put(root, "usr/lib/systemd/boot/efi/addonx64.efi.stub", "stub\n");
    std::fs::write(
        root.join("sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"),
        [6, 0, 0, 0, 0],
    )
    .unwrap();
    id
}

fn addon_cmdline(root: &Path) -> Option<String> {
    let data = std::fs::read(root.join("boot/efi/loader/addons/cpushield.addon.efi")).ok()?;
    cpushield::boot::uki::section_text(&data, ".cmdline")
}

#[test]
fn a_unified_kernel_image_gets_an_addon_that_is_read_back_and_deleted_by_its_hash() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    uki_machine(root, "root=/dev/vda2 rw console=ttyS0");
    let before = boot_files(root);
    let b = apply_ok(root);
    assert_eq!(
        b["bootloader"], "a unified kernel image's command-line addon (ukify)",
        "{b}"
    );
    assert_eq!(b["command"][1], "build");
    assert_eq!(b["command"][2], format!("--cmdline={OPTS}"));
    assert_eq!(
        addon_cmdline(root).as_deref(),
        Some(OPTS),
        "the addon's .cmdline is the options"
    );
    let o = cpushield(root, &["boot", "--json"]);
    assert_eq!(json(&o)["state"], "pending_reboot", "{}", text(&o));
    // Applying again changes nothing.
    let o = cpushield(root, &["apply"]);
    assert!(text(&o).contains("boot half: unchanged"), "{}", text(&o));
    // A boot that did not take the addon is told apart from one to come.
    let o = cpushield(root, &["boot", "--json"]);
    assert_eq!(
        json(&o)["not_taken"],
        serde_json::Value::Null,
        "{}",
        text(&o)
    );
    reboot(root, 2, "root=/dev/vda2 rw console=ttyS0");
    let o = cpushield(root, &["boot"]);
    assert!(
        text(&o).contains("the kernel booted since without")
            && text(&o).contains("systemd-stub did not apply the addon"),
        "{}",
        text(&o)
    );
    reboot(root, 3, &format!("root=/dev/vda2 rw console=ttyS0 {OPTS}"));
    let o = cpushield(root, &["boot", "--json"]);
    assert_eq!(json(&o)["state"], "active", "{}", text(&o));

    // A change of CPUs makes the addon again in place (its directory stays
    // cpushield's to remove).
    put(
        root,
        "etc/cpushield/cpushield.toml",
        "cpus = \"3\"\nboot = true\n",
    );
    let b = apply_ok(root);
    assert_eq!(b["action"], "written", "{b}");
    assert_eq!(
        addon_cmdline(root).as_deref(),
        Some(OPTS3),
        "the addon now has the new options"
    );

    let o = cpushield(root, &["boot", "--json"]);
    assert_eq!(
        json(&o)["files"],
        serde_json::json!(["boot/efi/loader/addons/cpushield.addon.efi"]),
        "{}",
        text(&o)
    );
    assert_eq!(json(&o)["drift"], serde_json::json!([]), "{}", text(&o));

    // Another addon put in its place is not deleted, and shows as changed.
    let addon = root.join("boot/efi/loader/addons/cpushield.addon.efi");
    let ours = std::fs::read(&addon).unwrap();
    std::fs::write(&addon, b"someone else's").unwrap();
    let o = cpushield(root, &["boot", "--json"]);
    assert_eq!(
        json(&o)["drift"],
        serde_json::json!(["/boot/efi/loader/addons/cpushield.addon.efi"]),
        "{}",
        text(&o)
    );
    let o = cpushield(root, &["boot", "--remove"]);
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(
        text(&o).contains("no longer the file cpushield made"),
        "{}",
        text(&o)
    );
    std::fs::write(&addon, ours).unwrap();
    let o = cpushield(root, &["boot", "--remove", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        !root.join("boot/efi/loader/addons").exists(),
        "the directory cpushield made is gone"
    );
    assert_eq!(boot_files(root), before);
    assert!(cpushield(root, &["off"]).status.success());
}

#[test]
fn a_unified_kernel_image_with_its_own_nohz_full_or_secure_boot_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    uki_machine(root, "root=/dev/vda2 rw nohz_full=1");
    let before = tree(root);
    let o = cpushield(root, &["apply"]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(
        text(&o).contains("own command line sets nohz_full=1")
            && text(&o).contains("take nohz_full=1 out of /etc/kernel/cmdline"),
        "{}",
        text(&o)
    );
    assert_eq!(diff(&before, &tree(root)), Vec::<String>::new());

    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    uki_machine(root, "root=/dev/vda2 rw");
    std::fs::write(
        root.join("sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"),
        [6, 0, 0, 0, 1],
    )
    .unwrap();
    let before = tree(root);
    let o = cpushield(root, &["apply"]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("Secure Boot is on"), "{}", text(&o));
    assert_eq!(diff(&before, &tree(root)), Vec::<String>::new());
}
