//! `run --user` against a fixture root, with the command really run as
//! `nobody` on this machine (nothing of the machine changes: the shield is
//! the fixture's): the command never reaches root's terminal, sees none of
//! root's environment or descriptors, and keeps no capability.

mod common;
#[path = "common/skip.rs"]
mod skip;

use common::*;
use cpushield::sys::fixture::{CgroupLayout, FixtureConfig};
use std::process::Command;

/// A fixture with a shield on 2-3, or None (with the skip said) where
/// this test cannot drop to another user.
fn shielded() -> Option<tempfile::TempDir> {
    if !nix::unistd::Uid::effective().is_root() {
        skip::skip(
            "sched_fifo",
            "not root: run --user needs root to drop privileges",
        );
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    standard(dir.path(), CgroupLayout::V2, FixtureConfig::default());
    let o = cpushield(dir.path(), &["on", "2-3", "--force"]);
    assert!(o.status.success(), "{}", text(&o));
    Some(dir)
}

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_cpushield")
}

/// In a terminal of its own (util-linux `script`), root's shell starts
/// `run --user nobody` whose command pushes `echo INJ` into its terminal
/// with TIOCSTI, then reads what its terminal holds: the command's own
/// terminal took it, root's holds nothing.
#[test]
fn a_command_run_as_a_user_cannot_type_into_roots_terminal() {
    let Some(dir) = shielded() else { return };
    let inject =
        r#"perl -e 'ioctl(STDIN, 0x5412, $_) or die "TIOCSTI: $!" for split //, "echo INJ\n"'"#;
    let shell = format!(
        "{} --root {} run --user nobody -- {inject}; echo RC:$?; read -t 1 x; echo GOT:[$x]",
        bin(),
        dir.path().display()
    );
    let out = in_a_terminal(&shell);
    assert!(out.contains("GOT:[]"), "root's terminal got input: {out}");
    assert!(
        out.contains("RC:0"),
        "the command ran (its own terminal took the input): {out}"
    );
    // The same injection without cpushield reaches the shell: the test
    // would see it.
    let bare = format!("{inject}; read -t 1 x; echo GOT:[$x]");
    let out = in_a_terminal(&bare);
    assert!(out.contains("GOT:[echo INJ"), "the control: {out}");
}

/// What `shell` prints, run by bash in a terminal of its own (util-linux
/// `script`), whose input stays open (an input that ends would end the
/// terminal's input too).
fn in_a_terminal(shell: &str) -> String {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = Command::new("script")
        .args(["-qec", shell, "/dev/null"])
        .env("SHELL", "/bin/bash")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("util-linux script");
    let keys = child.stdin.take();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    drop(keys);
    child.wait().unwrap();
    out
}

/// Without a terminal: root's secrets, PATH and descriptors stay behind;
/// the user's own account, and no capability.
#[test]
fn a_command_run_as_a_user_gets_a_clean_environment_no_descriptors_and_no_capabilities() {
    let Some(dir) = shielded() else { return };
    let shell = format!(
        "exec 7</etc/hostname; {} --root {} run --user nobody -- /bin/sh -c 'env; ls /proc/self/fd; grep ^Cap /proc/self/status; id -u; cut -d\" \" -f6 /proc/$$/stat; cut -d\" \" -f6 /proc/$PPID/stat'",
        bin(),
        dir.path().display()
    );
    let o = Command::new("/bin/sh")
        .args(["-c", &shell])
        .env("ROOT_SECRET", "s3cr3t")
        .env("PATH", "/root/bin:/usr/sbin:/usr/bin:/bin")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!out.contains("s3cr3t"), "{out}");
    assert!(
        out.contains("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"),
        "{out}"
    );
    assert!(
        out.contains("USER=nobody\n") && out.contains("LOGNAME=nobody\n"),
        "{out}"
    );
    let fds: Vec<&str> = out.lines().filter(|l| l.parse::<u32>().is_ok()).collect();
    assert!(!fds.contains(&"7"), "fd 7 leaked: {fds:?}");
    for set in ["CapInh", "CapPrm", "CapEff", "CapAmb"] {
        let line = out
            .lines()
            .find(|l| l.starts_with(set))
            .unwrap_or_else(|| panic!("{out}"));
        assert!(line.ends_with("0000000000000000"), "{line}");
    }
    assert!(out.lines().any(|l| l == "65534"), "{out}");
    // A session of its own: not the session of the shell that started it.
    let sids: Vec<&str> = out.lines().rev().take(2).map(str::trim).collect();
    assert_eq!(sids.len(), 2);
    assert_ne!(sids[0], sids[1], "same session as its parent: {out}");
}

/// `--preserve-env=NAME` keeps that variable; bare `--preserve-env` all.
#[test]
fn preserve_env_keeps_what_it_names() {
    let Some(dir) = shielded() else { return };
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "--user", "nobody"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "/usr/bin/env"]);
        let o = cpushield_env(
            dir.path(),
            &args,
            &[("KEEP_ME", "1".into()), ("DROP_ME", "2".into())],
        );
        assert!(o.status.success(), "{}", text(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let named = run(&["--preserve-env=KEEP_ME"]);
    assert!(
        named.contains("KEEP_ME=1") && !named.contains("DROP_ME"),
        "{named}"
    );
    let all = run(&["--preserve-env"]);
    assert!(
        all.contains("KEEP_ME=1") && all.contains("DROP_ME=2"),
        "{all}"
    );
}

/// The command's exit code is `run`'s, and a signal that ends it is
/// 128 + its number, in a terminal or not.
#[test]
fn the_commands_exit_code_and_signal_come_back() {
    let Some(dir) = shielded() else { return };
    let o = cpushield(
        dir.path(),
        &["run", "--user", "nobody", "--", "/bin/sh", "-c", "exit 7"],
    );
    assert_eq!(o.status.code(), Some(7), "{}", text(&o));
    let o = cpushield(
        dir.path(),
        &[
            "run",
            "--user",
            "nobody",
            "--",
            "/bin/sh",
            "-c",
            "kill -TERM $$",
        ],
    );
    assert_eq!(o.status.code(), Some(128 + 15), "{}", text(&o));
    let shell = format!(
        "{} --root {} run --user nobody -- /bin/sh -c 'test -t 0 && exit 9'; echo RC:$?",
        bin(),
        dir.path().display()
    );
    assert!(
        in_a_terminal(&shell).contains("RC:9"),
        "a terminal of its own"
    );
}
