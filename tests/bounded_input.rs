//! Input of any size or kind, on fixture roots: a config that is a device,
//! a FIFO or over 1 MiB is refused quickly with exit 2 and nothing
//! changed, and an error quotes at most a short prefix of a long CPU list,
//! IRQ name, knob name or config value, with its length.

mod common;

use common::*;
use cpushield::sys::fixture::{CgroupLayout, FixtureConfig};
use std::path::Path;
use std::time::{Duration, Instant};

/// The longest error the inputs below may give (issue #36: under 300 bytes).
const MAX_ERROR: usize = 300;

/// Runs a command that must be refused with exit 2, quickly, changing
/// nothing; returns its error message, checked to be short.
fn refused_briefly(root: &Path, args: &[&str]) -> String {
    let before = tree(root);
    let started = Instant::now();
    let o = cpushield(root, args);
    let took = started.elapsed();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    let shown: Vec<&str> = args.iter().map(|a| &a[..a.len().min(30)]).collect();
    assert_eq!(o.status.code(), Some(2), "{shown:?}: {err}");
    assert!(
        took < Duration::from_secs(10),
        "{shown:?} took {took:?}: {err}"
    );
    let message = err.replace("\n\nFor more information, try '--help'.\n", "\n");
    assert!(
        message.len() < MAX_ERROR,
        "{shown:?}: {} bytes: {message}",
        message.len()
    );
    assert!(o.stdout.is_empty(), "{shown:?}: nothing on stdout");
    assert_eq!(
        diff(&before, &tree(root)),
        Vec::<String>::new(),
        "{shown:?}"
    );
    err
}

fn list_of(n: usize) -> String {
    (0..n).map(|i| i.to_string()).collect::<Vec<_>>().join(",")
}

#[test]
fn a_config_that_is_a_device_a_fifo_or_over_1_mib_is_refused_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    standard(root, CgroupLayout::V2, FixtureConfig::default());
    let files = tempfile::tempdir().unwrap();
    let fifo = files.path().join("cpushield.toml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let big = files.path().join("big.toml");
    std::fs::write(&big, format!("cpus = \"2\"\n{}", "#\n".repeat(1 << 20))).unwrap();
    let fifo = fifo.to_str().unwrap();
    let big = big.to_str().unwrap();
    for (command, config, says) in [
        (
            "apply",
            "/dev/zero",
            "it is a character device, not a regular file",
        ),
        (
            "verify",
            "/dev/zero",
            "it is a character device, not a regular file",
        ),
        ("apply", fifo, "it is a FIFO, not a regular file"),
        (
            "apply",
            big,
            "it is 2.0 MiB (2097163 bytes), over the limit of 1 MiB",
        ),
    ] {
        let err = refused_briefly(root, &[command, "--config", config]);
        assert!(
            err.contains(&format!("config {config}: {says}"))
                && err.contains("give a regular file of at most 1 MiB"),
            "{err}"
        );
    }
}

#[test]
fn errors_quote_a_short_prefix_of_a_long_input_with_its_length() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    standard(root, CgroupLayout::V2, FixtureConfig::default());

    // A 110 kB CPU list: clap's quote of the value and ours, both cut.
    let list = format!("{},x", list_of(20_000));
    assert!(list.len() > 100_000);
    let err = refused_briefly(root, &["on", &list]);
    assert!(
        err.contains("\"0,1,2,3,")
            && err.contains(&format!("({} bytes)", list.len()))
            && err.contains("valid forms"),
        "{err}"
    );
    // Valid syntax, absent CPUs: the sets the planner names are cut too.
    let spread = (4..8192)
        .step_by(2)
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let err = refused_briefly(root, &["on", &spread]);
    assert!(
        err.contains("do not exist") && err.contains("present CPUs: 0-3"),
        "{err}"
    );

    let name = "n".repeat(5000);
    let err = refused_briefly(root, &["on", "2", "--irq", &name]);
    assert!(
        err.contains("matches no IRQ") && err.contains("(5000 bytes)"),
        "{err}"
    );
    let err = refused_briefly(root, &["on", "2", &format!("--tune={name}")]);
    assert!(
        err.contains("unknown tuning knob") && err.contains("(5000 bytes)"),
        "{err}"
    );
    refused_briefly(root, &["on", "2", "--guard", &name]);
    refused_briefly(root, &["measure", "--probe", &name]);
    let err = refused_briefly(root, &["run", "--user", &name, "--", "true"]);
    assert!(err.contains("no such user"), "{err}");

    // A config with 50,000 CPUs, and one with a 5,000-character IRQ name.
    let config = tempfile::tempdir().unwrap();
    let path = config.path().join("cpushield.toml");
    std::fs::write(&path, format!("cpus = \"{}\"\n", list_of(50_000))).unwrap();
    let err = refused_briefly(root, &["apply", "--config", path.to_str().unwrap()]);
    assert!(err.contains("beyond the kernel limit"), "{err}");
    std::fs::write(&path, format!("cpus = \"2\"\nirqs = [\"{name}\"]\n")).unwrap();
    let err = refused_briefly(root, &["apply", "--config", path.to_str().unwrap()]);
    assert!(err.contains("matches no IRQ"), "{err}");
}
