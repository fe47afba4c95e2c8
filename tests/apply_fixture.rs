//! A shield kept by its config file: `apply` (idempotent, changes in
//! place, repairs), `verify` for monitoring, `metrics` for node_exporter,
//! and `--dry-run` on every command that changes the system; on fixture
//! roots of a systemd host.

mod common;

use common::*;
use std::path::Path;

const CONFIG: &str = "etc/cpushield/cpushield.toml";

fn write_config(root: &Path, text: &str) {
    std::fs::create_dir_all(root.join("etc/cpushield")).unwrap();
    std::fs::write(root.join(CONFIG), text).unwrap();
}

fn json(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(o)))
}

fn code(o: &std::process::Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// Samples of a Prometheus text file, checked line by line: every sample
/// has a HELP and TYPE line before it and a number value.
fn parse_prom(text: &str) -> Vec<(String, f64)> {
    let mut typed = std::collections::HashSet::new();
    let mut out = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut w = rest.split_whitespace();
            let name = w.next().unwrap();
            assert!(matches!(w.next(), Some("gauge" | "counter")), "{line}");
            typed.insert(name.to_string());
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
        let name = series.split('{').next().unwrap();
        assert!(typed.contains(name), "no TYPE before {line}");
        assert!(name.starts_with("cpushield_"), "{line}");
        out.push((
            series.to_string(),
            value.parse().unwrap_or_else(|_| panic!("{line}")),
        ));
    }
    out
}

fn sample(samples: &[(String, f64)], series: &str) -> Option<f64> {
    samples.iter().find(|(s, _)| s == series).map(|(_, v)| *v)
}

#[test]
fn apply_is_idempotent_changes_in_place_and_verify_and_metrics_tell() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let sys = systemd_host(root);
    write_config(root, "# test\ncpus = \"2-3\"\n");
    let before = tree(root);

    // verify before any apply: the machine differs (no shield).
    let o = cpushield(root, &["verify"]);
    assert_eq!(code(&o), 7, "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("no shield is active"));

    let o = cpushield(root, &["apply", "--dry-run", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        diff(&before, &tree(root)),
        Vec::<String>::new(),
        "dry run changed nothing"
    );

    let o = cpushield(root, &["apply", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(json(&o)["shield"], "2-3");
    assert_eq!(
        json(&o)["schema_version"],
        cpushield::report::JSON_SCHEMA_VERSION
    );
    let o = cpushield(root, &["verify", "--json"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert_eq!(json(&o)["matches"], true);

    // Run twice: the second changes nothing.
    let mid = tree(root);
    let o = cpushield(root, &["apply"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("already as asked, nothing changed"),
        "{}",
        text(&o)
    );
    assert_eq!(diff(&mid, &tree(root)), Vec::<String>::new());

    // Metrics: one atomic file, Prometheus text.
    let metrics_dir = tempfile::tempdir().unwrap();
    let o = cpushield(
        root,
        &[
            "metrics",
            "--textfile",
            metrics_dir.path().to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let files: Vec<_> = std::fs::read_dir(metrics_dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(files, ["cpushield.prom"], "no temporary file left");
    let prom = std::fs::read_to_string(metrics_dir.path().join("cpushield.prom")).unwrap();
    let s = parse_prom(&prom);
    assert_eq!(sample(&s, "cpushield_shield_up"), Some(1.0), "{prom}");
    assert_eq!(sample(&s, "cpushield_shielded_cpus"), Some(2.0));
    assert_eq!(sample(&s, "cpushield_housekeeping_cpus"), Some(2.0));
    assert_eq!(sample(&s, "cpushield_leaked_threads"), Some(0.0));
    assert_eq!(sample(&s, "cpushield_leaked_irqs"), Some(0.0));
    assert!(
        sample(&s, "cpushield_interrupts_total{cpu=\"2\"}").is_some(),
        "{prom}"
    );
    assert!(
        sample(&s, "cpushield_interrupts_total{cpu=\"1\"}").is_none(),
        "{prom}"
    );
    let age = sample(&s, "cpushield_last_apply_age_seconds").unwrap();
    assert!((0.0..60.0).contains(&age), "{age}");
    // The journal's size as the files hold it: every record that parses,
    // and the bytes of the state and the segments.
    let records = cpushield::shield::journal::read_entries(&cpushield::sys::Sys::at(root))
        .unwrap()
        .len();
    let bytes: u64 = std::fs::read_dir(root.join("run/cpushield/journal"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_file())
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert!(records > 0 && bytes > 0, "{records} records, {bytes} bytes");
    assert_eq!(
        sample(&s, "cpushield_journal_records"),
        Some(records as f64),
        "{prom}"
    );
    assert_eq!(
        sample(&s, "cpushield_journal_bytes"),
        Some(bytes as f64),
        "{prom}"
    );
    // node-feature-discovery's feature file beside it: the shield as labels.
    let features = tempfile::tempdir().unwrap();
    let nfd = features.path().to_str().unwrap();
    let o = cpushield(root, &["metrics", "--nfd", nfd]);
    assert!(o.status.success(), "{}", text(&o));
    let labels = std::fs::read_to_string(features.path().join("cpushield")).unwrap();
    for line in [
        "cpushield-shield=true",
        "cpushield-holds=true",
        "cpushield-shielded-cpus=2-3",
    ] {
        assert!(labels.lines().any(|l| l == line), "{line}: {labels}");
    }
    let o = cpushield(root, &["metrics", "--nfd", "/nonexistent/features.d"]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(o.stdout.is_empty(), "refused before anything is printed");
    assert!(
        text(&o).contains("--nfd /nonexistent/features.d: no such directory"),
        "{}",
        text(&o)
    );

    // Break it: the irqbalance ban is removed. verify fails and names it.
    std::fs::remove_file(sys.path(cpushield::sys::fixture::MANAGER_ENVIRONMENT)).unwrap();
    std::fs::write(sys.path("proc/200/environ"), "").unwrap();
    let o = cpushield(root, &["verify"]);
    assert_eq!(code(&o), 3, "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("BROKEN") && out.contains("irqbalance") && out.contains("repair:"),
        "{out}"
    );
    let prom = String::from_utf8_lossy(&cpushield(root, &["metrics"]).stdout).into_owned();
    assert_eq!(
        sample(&parse_prom(&prom), "cpushield_shield_up"),
        Some(0.0),
        "{prom}"
    );
    assert_eq!(
        sample(&parse_prom(&prom), "cpushield_broken_checks"),
        Some(1.0),
        "{prom}"
    );
    assert_eq!(
        sample(
            &parse_prom(&prom),
            "cpushield_finding{id=\"irqbalance\",severity=\"bad\"}"
        ),
        Some(1.0),
        "{prom}"
    );
    let v = json(&cpushield(root, &["verify", "--json"]));
    assert_eq!(v["broken"][0]["id"], "irqbalance", "{v}");
    assert_eq!(v["broken"][0]["severity"], "bad", "{v}");
    // apply repairs it.
    assert!(cpushield(root, &["apply"]).status.success());
    assert_eq!(code(&cpushield(root, &["verify"])), 0);

    // Another config: verify says how it differs; apply changes in place.
    write_config(root, "cpus = \"3\"\n");
    let o = cpushield(root, &["verify", "--json"]);
    assert_eq!(code(&o), 7, "{}", text(&o));
    let v = json(&o);
    assert_eq!(v["differences"][0]["id"], "config.cpus", "{v}");
    assert_eq!(v["differences"][0]["severity"], "warn", "{v}");
    assert!(
        v["differences"][0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("cpus:"),
        "{v}"
    );
    let o = cpushield(root, &["apply", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(json(&o)["changed_from"], "2-3");
    assert_eq!(code(&cpushield(root, &["verify"])), 0);

    // An invalid config is refused, naming the file and line; nothing changes.
    write_config(root, "cpus = \"3\"\nirq = [\"eth0\"]\n");
    let mid = tree(root);
    let o = cpushield(root, &["apply"]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("cpushield.toml:2") && err.contains("irq") && err.contains("valid keys"),
        "{err}"
    );
    assert_eq!(diff(&mid, &tree(root)), Vec::<String>::new());
    assert_eq!(code(&cpushield(root, &["verify"])), 2);

    // off --dry-run says what it would undo and undoes nothing.
    let o = cpushield(root, &["off", "--dry-run"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("dry run") && out.contains("irqbalance"),
        "{out}"
    );
    assert_eq!(diff(&mid, &tree(root)), Vec::<String>::new());

    assert!(cpushield(root, &["off"]).status.success());
    let mut after = tree(root);
    after.remove(CONFIG);
    let mut was = before.clone();
    was.remove(CONFIG);
    assert_eq!(diff(&was, &after), Vec::<String>::new());
}

/// What a monitor is told in each state the machine can be in: the exit
/// code and the start of the one line, for each monitor.
struct Monitor {
    flag: &'static str,
    /// No config; no shield yet (differs); holds; broken.
    codes: [i32; 4],
    starts: [&'static str; 4],
}

/// `verify --nagios` (the monitoring plugins' codes) and `verify --npd`
/// (node-problem-detector's custom plugin codes, the reason first): one
/// line, for each state the machine can be in.
#[test]
fn verify_speaks_each_monitors_language() {
    let monitors = [
        Monitor {
            flag: "--nagios",
            codes: [3, 1, 0, 2],
            starts: [
                "CPUSHIELD UNKNOWN - config ",
                "CPUSHIELD WARNING - the machine differs",
                "CPUSHIELD OK - the shield on CPUs 2-3 holds and matches",
                "CPUSHIELD CRITICAL - the shield is broken: ",
            ],
        },
        Monitor {
            flag: "--npd",
            codes: [2, 1, 0, 1],
            starts: [
                "config ",
                "the machine differs",
                "the shield on CPUs 2-3 holds",
                "the shield is broken: ",
            ],
        },
    ];
    for m in &monitors {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let sys = systemd_host(root);
        let told = |state: usize| {
            let o = cpushield(root, &["verify", m.flag]);
            let out = String::from_utf8_lossy(&o.stdout).into_owned();
            assert_eq!(out.lines().count(), 1, "{}: one line: {out}", m.flag);
            assert_eq!(
                code(&o),
                m.codes[state],
                "{} in state {state}: {}",
                m.flag,
                text(&o)
            );
            assert!(out.starts_with(m.starts[state]), "{}: {out}", m.flag);
            out
        };
        told(0);
        write_config(root, "cpus = \"2-3\"\n");
        told(1);
        assert!(cpushield(root, &["apply"]).status.success());
        told(2);
        std::fs::remove_file(sys.path(cpushield::sys::fixture::MANAGER_ENVIRONMENT)).unwrap();
        std::fs::write(sys.path("proc/200/environ"), "").unwrap();
        assert!(
            told(3).contains("irqbalance"),
            "{}: names what broke",
            m.flag
        );
        assert!(cpushield(root, &["off"]).status.success());
    }
    let dir = tempfile::tempdir().unwrap();
    systemd_host(dir.path());
    let both = cpushield(dir.path(), &["verify", "--npd", "--nagios"]);
    assert_eq!(code(&both), 2, "one monitor at a time: {}", text(&both));
}

#[test]
fn move_and_run_dry_runs_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    standard(
        root,
        cpushield::sys::fixture::CgroupLayout::V2,
        Default::default(),
    );
    assert!(cpushield(root, &["on", "2-3"]).status.success());
    let mid = tree(root);
    let o = cpushield(
        root,
        &["move", "101", "--in", "--cpu", "2", "--dry-run", "--json"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let v = json(&o);
    assert_eq!(
        (v["dry_run"].clone(), v["moved"][0]["cpus"].clone()),
        (true.into(), "2".into()),
        "{v}"
    );
    let o = cpushield(
        root,
        &[
            "run",
            "--cpu",
            "3",
            "--fifo",
            "50",
            "--dry-run",
            "--",
            "sleep",
            "1",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("CPUs 3"),
        "{}",
        text(&o)
    );
    let o = cpushield(root, &["run", "--cpu", "1", "--dry-run", "--", "true"]);
    assert_eq!(code(&o), 2, "CPU 1 is not shielded: {}", text(&o));
    assert_eq!(diff(&mid, &tree(root)), Vec::<String>::new());
    assert!(cpushield(root, &["off"]).status.success());
}

/// A GRUB machine in the fixture: `update-grub` is emulated by sourcing
/// these files with the real shell (see the fixture's `run_tool`).
fn grub_files(root: &Path, defaults: &str) {
    for (rel, text) in [
        ("etc/default/grub", defaults),
        ("usr/sbin/update-grub", "#!/bin/sh\n"),
        ("proc/sys/kernel/random/boot_id", "boot-1\n"),
    ] {
        std::fs::create_dir_all(root.join(rel).parent().unwrap()).unwrap();
        std::fs::write(root.join(rel), text).unwrap();
    }
    std::fs::create_dir_all(root.join("etc/default/grub.d")).unwrap();
    std::fs::create_dir_all(root.join("var/lib")).unwrap();
    std::fs::write(
        root.join("etc/default/grub.d/50-user.cfg"),
        "GRUB_CMDLINE_LINUX_DEFAULT=\"$GRUB_CMDLINE_LINUX_DEFAULT mitigations=auto\"\n",
    )
    .unwrap();
}

/// The next boot: the command line grub.cfg's normal entry gives, a new boot id.
fn reboot(root: &Path, n: u32) {
    let cfg = std::fs::read_to_string(root.join("boot/grub/grub.cfg")).unwrap();
    let line = cfg
        .lines()
        .find(|l| l.trim_start().starts_with("linux") && !l.contains(" single"))
        .unwrap();
    let cmdline = line.trim_start().trim_start_matches("linux").trim();
    std::fs::write(root.join("proc/cmdline"), format!("BOOT_IMAGE={cmdline}\n")).unwrap();
    std::fs::write(
        root.join("proc/sys/kernel/random/boot_id"),
        format!("boot-{n}\n"),
    )
    .unwrap();
}

fn metric(root: &Path, series: &str) -> Option<f64> {
    let o = cpushield(root, &["metrics"]);
    assert!(o.status.success(), "{}", text(&o));
    sample(&parse_prom(&String::from_utf8_lossy(&o.stdout)), series)
}

#[test]
fn boot_half_is_written_judged_across_reboots_and_removed_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    systemd_host(root);
    grub_files(
        root,
        "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\nGRUB_CMDLINE_LINUX=\"\"\n",
    );
    std::fs::write(
        root.join("proc/cmdline"),
        "BOOT_IMAGE=/boot/vmlinuz ro quiet\n",
    )
    .unwrap();
    // The machine's own grub.cfg, as update-grub made it before cpushield.
    cpushield::sys::Sys::at(root)
        .run_tool(&["update-grub"])
        .unwrap();
    let grub_before = std::fs::read_to_string(root.join("boot/grub/grub.cfg")).unwrap();
    let user_dropin = std::fs::read_to_string(root.join("etc/default/grub.d/50-user.cfg")).unwrap();
    let options =
        "isolcpus=managed_irq,2-3 nohz_full=2-3 rcu_nocbs=2-3 irqaffinity=0-1 skew_tick=1";

    write_config(root, "cpus = \"2-3\"\nboot = [\"skew_tick=1\"]\n");
    let o = cpushield(root, &["apply", "--dry-run"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("would write /etc/default/grub.d/zz-cpushield.cfg and run update-grub"),
        "{}",
        text(&o)
    );
    assert!(!root.join("etc/default/grub.d/zz-cpushield.cfg").exists());

    let o = cpushield(root, &["apply", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(json(&o)["shield"], "2-3");
    assert_eq!(json(&o)["boot"]["action"], "written");
    let cfg = std::fs::read_to_string(root.join("boot/grub/grub.cfg")).unwrap();
    let normal = cfg
        .lines()
        .find(|l| l.contains("linux") && !l.contains(" single"))
        .unwrap();
    assert!(
        normal.contains(&format!("quiet mitigations=auto {options}")),
        "{cfg}"
    );
    let recovery = cfg.lines().find(|l| l.contains(" single")).unwrap();
    assert!(
        !recovery.contains("nohz_full"),
        "recovery mode boots without isolation: {cfg}"
    );

    // Before the reboot: pending, exit 8, the metric says so.
    let o = cpushield(root, &["verify", "--json"]);
    assert_eq!(code(&o), 8, "{}", text(&o));
    assert_eq!(json(&o)["boot"]["state"], "pending_reboot");
    assert_eq!(metric(root, "cpushield_boot_reboot_pending"), Some(1.0));
    // Applying again changes nothing.
    let o = cpushield(root, &["apply"]);
    assert!(
        o.status.success() && text(&o).contains("boot half: unchanged"),
        "{}",
        text(&o)
    );

    // off keeps it (cpushield.service runs off at every shutdown) and says so.
    let o = cpushield(root, &["off"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("the boot half stays"), "{}", text(&o));
    assert!(root.join("etc/default/grub.d/zz-cpushield.cfg").exists());

    reboot(root, 2);
    assert!(cpushield(root, &["apply"]).status.success());
    let o = cpushield(root, &["verify", "--json"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert_eq!(json(&o)["boot"]["state"], "active");
    assert_eq!(metric(root, "cpushield_boot_reboot_pending"), Some(0.0));
    assert_eq!(metric(root, "cpushield_boot_active"), Some(1.0));

    // Another shield changes the boot half too: pending again.
    write_config(root, "cpus = \"3\"\nboot = true\n");
    assert!(cpushield(root, &["apply"]).status.success());
    let o = cpushield(root, &["boot", "--json"]);
    assert_eq!(json(&o)["state"], "pending_reboot", "{}", text(&o));
    assert!(std::fs::read_to_string(root.join("boot/grub/grub.cfg"))
        .unwrap()
        .contains("nohz_full=3 rcu_nocbs=3 irqaffinity=0-2"));
    reboot(root, 3);

    // Without the key: removed, files as before, removal pending until the reboot.
    write_config(root, "cpus = \"3\"\n");
    let o = cpushield(root, &["apply"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("byte-identical to before"),
        "{}",
        text(&o)
    );
    assert!(!root.join("etc/default/grub.d/zz-cpushield.cfg").exists());
    assert_eq!(
        std::fs::read_to_string(root.join("boot/grub/grub.cfg")).unwrap(),
        grub_before
    );
    assert_eq!(
        std::fs::read_to_string(root.join("etc/default/grub.d/50-user.cfg")).unwrap(),
        user_dropin
    );
    let o = cpushield(root, &["verify", "--json"]);
    assert_eq!(code(&o), 8, "{}", text(&o));
    assert_eq!(json(&o)["boot"]["state"], "removal_pending");
    reboot(root, 4);
    let o = cpushield(root, &["verify", "--json"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert_eq!(json(&o)["boot"]["state"], "absent");
    assert!(!root.join("var/lib/cpushield/boot.json").exists());
}

#[test]
fn a_failing_update_grub_puts_the_files_back_and_an_unknown_bootloader_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    systemd_host(root);
    // Neither GRUB nor anything else: refused before the shield is made.
    write_config(root, "cpus = \"2-3\"\nboot = true\n");
    let before = tree(root);
    let o = cpushield(root, &["apply"]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(
        text(&o).contains("add \"isolcpus=managed_irq,2-3"),
        "{}",
        text(&o)
    );
    assert_eq!(diff(&before, &tree(root)), Vec::<String>::new());

    grub_files(
        root,
        "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\n# FIXTURE_FAIL\n",
    );
    let before = tree(root);
    let o = cpushield(root, &["apply"]);
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(
        text(&o).contains("update-grub: fixture failure"),
        "{}",
        text(&o)
    );
    assert!(!root.join("etc/default/grub.d/zz-cpushield.cfg").exists());
    assert!(!root.join("var/lib/cpushield/boot.json").exists());
    // The shield itself was made; the boot half was put back.
    assert!(cpushield(root, &["off"]).status.success());
    let after: Vec<String> = diff(&before, &tree(root))
        .into_iter()
        .filter(|d| !d.contains("run/cpushield"))
        .collect();
    assert_eq!(after, Vec::<String>::new());

    // A bad extra option is named, with what would be valid.
    write_config(root, "cpus = \"2-3\"\nboot = [\"nohz_full=1\"]\n");
    let o = cpushield(root, &["apply"]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(
        text(&o).contains("cpushield.toml:2: boot: option \"nohz_full=1\" sets nohz_full="),
        "{}",
        text(&o)
    );
}

/// `verify --config FILE` advises applying that file, not the default one.
#[test]
fn verify_of_another_config_advises_applying_that_config() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    systemd_host(root);
    let other = root.join("other.toml");
    std::fs::write(&other, "cpus = \"2-3\"\n").unwrap();
    let path = other.to_str().unwrap();
    let o = cpushield(root, &["verify", "--config", path, "--json"]);
    assert_eq!(code(&o), 7, "{}", text(&o));
    let next = json(&o)["differences"][0]["next"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(next, format!("cpushield apply --config {path}"));
    let people = text(&cpushield(root, &["verify", "--config", path]));
    assert!(
        people.contains(&format!(
            "to bring the machine to the config: cpushield apply --config {path}\n"
        )),
        "{people}"
    );
    write_config(root, "cpus = \"2-3\"\n");
    let o = cpushield(root, &["verify", "--json"]);
    assert_eq!(json(&o)["differences"][0]["next"], "cpushield apply");
}
