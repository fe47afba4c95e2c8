//! The stress-ng driver: which options the installed stress-ng has, and the
//! command line for a scenario. Everything here is pure except [`probe`],
//! which runs `stress-ng --version` and `stress-ng --help`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::{LoadError, Scenario, Sizes, Stressor};

/// Options of the installed stress-ng that the scenarios depend on.
/// Stressors come and go between versions, so they are read from `--help`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StressNgCaps {
    /// `--io N`: workers spinning on `sync()` (dropped by newer versions).
    pub io: bool,
    /// `--iomix N` with `--iomix-bytes`: a mix of I/O including syncs.
    pub iomix: bool,
    /// `--sync-file N` with `--sync-file-bytes`: `sync_file_range` workers.
    pub sync_file: bool,
    /// `--oom-avoid`: stressors back off before the OOM killer strikes.
    pub oom_avoid: bool,
}

impl StressNgCaps {
    /// Reads the capabilities from the output of `stress-ng --help`.
    pub fn from_help(help: &str) -> StressNgCaps {
        let mut caps = StressNgCaps::default();
        for line in help.lines() {
            let tokens: Vec<&str> = line
                .split_whitespace()
                .map(|t| t.trim_end_matches(','))
                .collect();
            let takes_n = |opt: &str| tokens.windows(2).any(|w| w[0] == opt && w[1] == "N");
            caps.io |= takes_n("--io");
            caps.iomix |= takes_n("--iomix");
            caps.sync_file |= takes_n("--sync-file");
            caps.oom_avoid |= tokens.contains(&"--oom-avoid");
        }
        caps
    }
}

/// The version number from `stress-ng --version`
/// (`stress-ng, version 0.15.06 (gcc 12.2.0, x86_64 Linux 6.1.0)` → `0.15.06`).
pub fn parse_version(output: &str) -> Option<String> {
    let line = output.lines().find(|l| l.contains("version"))?;
    let mut words = line.split_whitespace();
    words.find(|w| *w == "version")?;
    words.next().map(|v| v.trim_end_matches(',').to_string())
}

/// What [`probe`] learnt about an installed stress-ng.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StressNgInfo {
    /// The executable.
    pub path: PathBuf,
    /// Its version number, when `--version` printed one.
    pub version: Option<String>,
    /// The options the scenarios depend on.
    pub caps: StressNgCaps,
}

/// Runs `stress-ng --version` and `stress-ng --help` to learn what this
/// stress-ng offers.
pub fn probe(path: &Path) -> Result<StressNgInfo, LoadError> {
    let run = |arg: &str| -> Result<String, LoadError> {
        let out = Command::new(path)
            .arg(arg)
            .stdin(Stdio::null())
            .output()
            .map_err(|source| LoadError::Spawn {
                program: path.display().to_string(),
                source,
            })?;
        // Older versions print help on stderr; take both.
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        Ok(text)
    };
    let version = parse_version(&run("--version")?);
    let caps = StressNgCaps::from_help(&run("--help")?);
    Ok(StressNgInfo {
        path: path.to_path_buf(),
        version,
        caps,
    })
}

/// The stress-ng arguments (without the program) for `scenario` with
/// `workers` workers per stressor.
///
/// - cpu: `--cpu N --cpu-method sqrt`
/// - io: `--io N`; where the installed version no longer has it,
///   `--iomix N --iomix-bytes B`, else `--sync-file N --sync-file-bytes B`
///   (B bounded like the hdd bytes)
/// - vm: `--vm N --vm-bytes B`
/// - hdd: `--hdd N --hdd-bytes B`
/// - stream: `--stream N` (its buffers sized from the L3 in sysfs)
///
/// All temporary files go to `temp_dir`. A `timeout` makes stress-ng end by
/// itself even if nobody stops it.
pub fn args(
    scenario: Scenario,
    workers: usize,
    sizes: &Sizes,
    caps: &StressNgCaps,
    temp_dir: &Path,
    timeout: Option<Duration>,
) -> Result<Vec<String>, LoadError> {
    let n = workers.to_string();
    let mut a: Vec<String> = Vec::new();
    let mut push = |items: &[&str]| a.extend(items.iter().map(|s| s.to_string()));
    for stressor in scenario.stressors() {
        match stressor {
            Stressor::Cpu => push(&["--cpu", &n, "--cpu-method", "sqrt"]),
            Stressor::Io if caps.io => push(&["--io", &n]),
            Stressor::Io if caps.iomix => {
                push(&["--iomix", &n, "--iomix-bytes", &sizes.hdd_bytes.to_string()])
            }
            Stressor::Io if caps.sync_file => push(&[
                "--sync-file",
                &n,
                "--sync-file-bytes",
                &sizes.hdd_bytes.to_string(),
            ]),
            Stressor::Io => {
                return Err(LoadError::Unsupported(
                    "this stress-ng has none of --io, --iomix, --sync-file".into(),
                ))
            }
            Stressor::Vm => push(&["--vm", &n, "--vm-bytes", &sizes.vm_bytes.to_string()]),
            Stressor::Hdd => push(&["--hdd", &n, "--hdd-bytes", &sizes.hdd_bytes.to_string()]),
            // Its buffers are sized from the L3 it reads from sysfs.
            Stressor::Stream => push(&["--stream", &n]),
            Stressor::Switch => push(&["--switch", &n]),
            Stressor::Sock => push(&["--sock", &n]),
        }
    }
    if a.is_empty() {
        return Ok(a);
    }
    a.push("--temp-path".into());
    a.push(temp_dir.display().to_string());
    if caps.oom_avoid {
        a.push("--oom-avoid".into());
    }
    if let Some(t) = timeout {
        a.push("--timeout".into());
        a.push(format!("{}s", t.as_secs().max(1)));
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HELP_0_15: &str = "\
-i N, --io N                start N workers spinning on sync()
      --io-ops N            stop sync I/O after N io bogo operations
      --io-uring N          start N workers that issue io-uring I/O requests
      --iomix N             start N workers that have a mix of I/O operations
      --iomix-bytes N       write N bytes per iomix worker (default is 1GB)
      --oom-avoid           Try to avoid stressors from being OOM'd
      --sync-file N         start N workers exercise sync_file_range
";

    const HELP_NO_IO: &str = "\
      --io-uring N          start N workers that issue io-uring I/O requests
      --iomix N             start N workers that have a mix of I/O operations
";

    #[test]
    fn reads_caps_from_help() {
        let c = StressNgCaps::from_help(HELP_0_15);
        assert_eq!(
            c,
            StressNgCaps {
                io: true,
                iomix: true,
                sync_file: true,
                oom_avoid: true
            }
        );
        let c = StressNgCaps::from_help(HELP_NO_IO);
        assert!(!c.io && c.iomix && !c.sync_file && !c.oom_avoid);
        assert_eq!(StressNgCaps::from_help(""), StressNgCaps::default());
    }

    #[test]
    fn reads_version() {
        assert_eq!(
            parse_version("stress-ng, version 0.15.06 (gcc 12.2.0, x86_64 Linux 6.1.0)\n")
                .as_deref(),
            Some("0.15.06")
        );
        assert_eq!(
            parse_version("stress-ng, version 0.17.08, (gcc 13)").as_deref(),
            Some("0.17.08")
        );
        assert_eq!(parse_version("nothing here"), None);
    }

    fn sizes() -> Sizes {
        Sizes {
            vm_bytes: 1 << 20,
            hdd_bytes: 2 << 20,
        }
    }

    #[test]
    fn full_scenario_has_every_stressor_with_n_workers() {
        let caps = StressNgCaps::from_help(HELP_0_15);
        let a = args(
            Scenario::Full,
            3,
            &sizes(),
            &caps,
            Path::new("/tmp/x"),
            Some(Duration::from_secs(60)),
        )
        .unwrap();
        assert_eq!(
            a.join(" "),
            "--cpu 3 --cpu-method sqrt --io 3 --vm 3 --vm-bytes 1048576 \
             --hdd 3 --hdd-bytes 2097152 --temp-path /tmp/x --oom-avoid --timeout 60s"
        );
    }

    #[test]
    fn stream_is_stress_ngs_memory_bandwidth_stressor_and_not_part_of_full() {
        let caps = StressNgCaps::from_help(HELP_0_15);
        let a = args(Scenario::Stream, 2, &sizes(), &caps, Path::new("/t"), None).unwrap();
        assert_eq!(a.join(" "), "--stream 2 --temp-path /t --oom-avoid");
        assert!(!Scenario::Full.stressors().contains(&Stressor::Stream));
    }

    #[test]
    fn io_falls_back_when_the_io_stressor_is_gone() {
        let caps = StressNgCaps::from_help(HELP_NO_IO);
        let a = args(Scenario::Io, 2, &sizes(), &caps, Path::new("/t"), None).unwrap();
        assert_eq!(
            a.join(" "),
            "--iomix 2 --iomix-bytes 2097152 --temp-path /t"
        );
        let caps = StressNgCaps {
            sync_file: true,
            ..Default::default()
        };
        let a = args(Scenario::Io, 2, &sizes(), &caps, Path::new("/t"), None).unwrap();
        assert_eq!(a[0], "--sync-file");
        let none = StressNgCaps::default();
        assert!(args(Scenario::Io, 2, &sizes(), &none, Path::new("/t"), None).is_err());
        // The cpu scenario does not need any of them.
        assert!(args(Scenario::Cpu, 2, &sizes(), &none, Path::new("/t"), None).is_ok());
    }

    #[test]
    fn none_scenario_runs_nothing() {
        let a = args(
            Scenario::None,
            4,
            &sizes(),
            &StressNgCaps::default(),
            Path::new("/t"),
            None,
        )
        .unwrap();
        assert!(a.is_empty());
    }
}
