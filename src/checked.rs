//! The command line checked in one step: each command's arguments become
//! the request its library call takes, or are refused with an error that
//! names the argument and what would be valid. Checking only reads (the
//! config file, the machine's CPUs, the user database, the bootloader):
//! nothing on the system has changed when it fails.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use cpushield::boot::{self, BootWant};
use cpushield::compare::Options as CompareOptions;
use cpushield::config::AtLine;
use cpushield::cpulist::CpuSet;
use cpushield::input::quote;
use cpushield::measure::args::Config as MeasureConfig;
use cpushield::shield::{request::Request, Direction, RunPolicy};
use cpushield::sys::Sys;

use crate::cli::*;

mod certify;
use certify::certify;

/// A request refused before anything was changed, outside the library's
/// own errors (an argument checked here).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

/// What `metrics` exports, and where it writes.
#[derive(Debug)]
pub struct MetricsOut {
    /// A `compare` results.json to export.
    pub results: Option<PathBuf>,
    /// The textfile directory to write to (else stdout).
    pub textfile: Option<PathBuf>,
    /// node-feature-discovery's features directory to write to too.
    pub nfd: Option<PathBuf>,
}

/// The monitor `verify` speaks to, one line and its exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plugin {
    /// Nagios, Icinga and the other monitoring plugins' runners.
    Nagios,
    /// Kubernetes' node-problem-detector, as a custom plugin.
    Npd,
}

/// A command and its checked request.
#[derive(Debug)]
pub enum Checked {
    /// `repair`.
    Repair {
        /// Why.
        reason: String,
        /// JSON output.
        json: bool,
    },
    /// `heal`.
    Heal,
    /// `nri`.
    Nri {
        /// The runtime's socket, relative to the root.
        socket: String,
        /// Give everything back and end.
        undo: bool,
    },
    /// `on`.
    On {
        /// The shield asked for.
        request: Request,
        /// Plan only.
        dry_run: bool,
        /// Report as JSON.
        json: bool,
    },
    /// `off`.
    Off {
        /// `--set`: the named set taken away alone.
        set: Option<String>,
        /// Say what would be undone only.
        dry_run: bool,
        /// Report as JSON.
        json: bool,
    },
    /// `apply`: the config's shield and boot half.
    Apply {
        /// The config's request.
        request: Request,
        /// Its boot half, checked against the bootloader.
        boot: Option<BootWant>,
        /// Plan only.
        dry_run: bool,
        /// Report as JSON.
        json: bool,
    },
    /// `verify`.
    Verify {
        /// The config file.
        config: PathBuf,
        /// Its request.
        request: Request,
        /// Report as JSON.
        json: bool,
        /// One line and a monitor's exit codes.
        plugin: Option<Plugin>,
    },
    /// `verify --nagios` or `--npd` whose config could not be read: UNKNOWN.
    PluginUnknown(Plugin, String),
    /// `metrics`.
    Metrics(MetricsOut),
    /// `status`.
    Status {
        /// Report as JSON.
        json: bool,
    },
    /// `move`.
    Move {
        /// Process (or thread) ids.
        pids: Vec<i32>,
        /// Into or out of the shield.
        direction: Direction,
        /// The CPU to pin to, the named set to place in.
        place: cpushield::shield::Place,
        /// Single threads rather than processes.
        thread: bool,
        /// Say what would move only.
        dry_run: bool,
        /// Report as JSON.
        json: bool,
    },
    /// `measure`, its configuration checked against the machine.
    Measure {
        /// The checked configuration.
        config: Box<MeasureConfig>,
        /// Write histogram files with this prefix.
        histfile: Option<PathBuf>,
        /// Report as JSON.
        json: bool,
    },
    /// `measure --clean-up`.
    MeasureCleanUp,
    /// `tune --list`.
    Tune {
        /// Report as JSON.
        json: bool,
    },
    /// `boot-args`.
    BootArgs {
        /// The CPUs to isolate at boot.
        cpus: CpuSet,
        /// Report as JSON.
        json: bool,
    },
    /// `boot` (state) or `boot --remove`.
    Boot {
        /// Take the boot half out.
        remove: bool,
        /// Say what would be done only.
        dry_run: bool,
        /// Report as JSON.
        json: bool,
    },
    /// `audit`.
    Audit {
        /// The CPUs to audit (default: the shield's).
        cpus: Option<CpuSet>,
        /// How long interrupts are counted.
        window: Duration,
        /// `--fail-on`: the least severity that makes the audit exit 9.
        fail_on: Option<cpushield::finding::Severity>,
        /// Report as JSON.
        json: bool,
    },
    /// `run`.
    Run {
        /// The shielded CPU to pin to, the named set to run in.
        place: cpushield::shield::Place,
        /// The scheduling policy.
        policy: RunPolicy,
        /// The user to run as.
        user: Option<nix::unistd::User>,
        /// What of root's environment the command keeps as that user.
        preserve: cpushield::run_user::Preserve,
        /// The command and its arguments (at least the command).
        command: Vec<String>,
        /// Say where and how it would run only.
        dry_run: bool,
    },
    /// `guard`.
    Guard {
        /// The CPUs to watch.
        cpus: CpuSet,
        /// Its settings.
        settings: cpushield::guard::Settings,
    },
    /// `certify`.
    Certify {
        /// The budget and its measurement.
        options: cpushield::certify::Options,
        /// Say what would run only.
        dry_run: bool,
        /// Report as JSON.
        json: bool,
        /// The output directory is the default one, to be made new.
        new_out: bool,
    },
    /// `compare`.
    Compare {
        /// The experiment; the library checks it against the machine
        /// before its first phase.
        options: CompareOptions,
        /// Say what would run only.
        dry_run: bool,
        /// Report as JSON.
        json: bool,
        /// The output directory is the default one, to be made new.
        new_out: bool,
    },
}

/// `--out DIR` of a run that writes its files at the end: a directory that
/// exists, or one that can be made in an existing directory, checked
/// before the run rather than after it.
pub(crate) fn output_dir(path: PathBuf) -> Result<PathBuf, Refusal> {
    if path.is_dir() {
        return Ok(path);
    }
    let shown = quote(&path.to_string_lossy());
    if path.exists() {
        return Err(Refusal(format!(
            "--out {shown}: not a directory; give a directory, or a new name in an existing one"
        )));
    }
    let parent = directory_of(&path);
    if parent.is_dir() {
        return Ok(path);
    }
    Err(Refusal(format!(
        "--out {shown}: no directory {} to make it in; give a directory, or a new name in an existing one",
        quote(&parent.to_string_lossy())
    )))
}

/// The directory `path` names its file or directory in (`.` for a bare name).
fn directory_of(path: &std::path::Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// `--histfile`: a file in a directory that exists, checked before the
/// measurement rather than after it.
fn writable_place(path: PathBuf) -> Result<PathBuf, Refusal> {
    let dir = directory_of(&path);
    match std::fs::metadata(&dir) {
        Ok(m) if m.is_dir() => Ok(path),
        _ => Err(Refusal(format!(
            "--histfile {}: no directory {} to write it in; give a file in an existing directory",
            quote(&path.to_string_lossy()),
            quote(&dir.to_string_lossy())
        ))),
    }
}

/// `boot-args`: CPUs of this machine that leave one online CPU for
/// housekeeping, as `on` asks (advice that cannot boot a usable machine
/// is refused).
fn bootable(sys: &Sys, cpus: CpuSet) -> Result<CpuSet> {
    use cpushield::shield::plan::PlanError;
    use cpushield::sys::procfs::{online_cpus, present_cpus};
    let present = present_cpus(sys)?;
    let missing = cpus.difference(&present);
    let online = online_cpus(sys)?;
    // The planner's own refusals, so that both say the same.
    let refusal = if !missing.is_empty() {
        Some(PlanError::NotPresent {
            cpus: cpus.clone(),
            missing,
            present,
        })
    } else if online.difference(&cpus).is_empty() {
        Some(PlanError::NoHousekeeping {
            cpus: cpus.clone(),
            online,
        })
    } else {
        None
    };
    if let Some(refused) = refusal {
        return Err(Refusal(refused.to_string()).into());
    }
    Ok(cpus)
}

/// The guard's settings, each in its range.
fn checked_guard_settings(
    a: &cpushield::guard::SettingsArgs,
) -> Result<cpushield::guard::Settings> {
    let settings = a.settings();
    settings.check().map_err(|e| Refusal(e.to_string()))?;
    Ok(settings)
}

/// `move`, checked: its words as the command says them.
fn moving(a: crate::cli::MoveArgs) -> Checked {
    Checked::Move {
        pids: a.pids,
        direction: if a.into {
            Direction::In
        } else {
            Direction::Out
        },
        place: cpushield::shield::Place::at(a.cpu, a.set),
        thread: a.thread,
        dry_run: a.dry_run,
        json: a.json,
    }
}

/// Checks the command line (no command: `status`). Only reads.
pub fn check(sys: &Sys, command: Option<Command>) -> Result<Checked> {
    Ok(
        match command.unwrap_or(Command::Status(JsonArg { json: false })) {
            Command::On(a) => on(a)?,
            Command::Off(a) => Checked::Off {
                set: a.set,
                dry_run: a.dry_run,
                json: a.json,
            },
            Command::Apply(a) => {
                let request = cpushield::config::load(&config_path(sys, a.config))?;
                // A bootloader cpushield cannot drive refuses the whole apply.
                let boot = match &request.boot {
                    Some(extra) => {
                        let want = boot::want_here(sys, &request.cpus, extra)?;
                        boot::check(sys, &want)?;
                        Some(want)
                    }
                    None => None,
                };
                Checked::Apply {
                    request,
                    boot,
                    dry_run: a.dry_run,
                    json: a.json,
                }
            }
            Command::Verify(a) => verify(sys, a)?,
            Command::Metrics(a) if a.nfd.as_ref().is_some_and(|d| !d.is_dir()) => {
                return Err(Refusal(format!(
                    "--nfd {}: no such directory (node-feature-discovery's is /etc/kubernetes/node-feature-discovery/features.d)",
                    a.nfd.unwrap_or_default().display()
                ))
                .into())
            }
            Command::Metrics(a) if a.textfile.as_ref().is_some_and(|d| !d.is_dir()) => {
                return Err(Refusal(format!(
                    "--textfile {}: no such directory (node_exporter's textfile collector directory, e.g. /var/lib/prometheus/node-exporter)",
                    quote(&a.textfile.unwrap_or_default().to_string_lossy())
                ))
                .into())
            }
            Command::Metrics(a) => Checked::Metrics(MetricsOut {
                results: a.results,
                textfile: a.textfile,
                nfd: a.nfd,
            }),
            Command::Status(a) => Checked::Status { json: a.json },
            Command::Move(a) => moving(a),
            Command::Measure(a) if a.clean_up => Checked::MeasureCleanUp,
            Command::Measure(a) => Checked::Measure {
                config: Box::new(MeasureConfig::from_args(&a, sys)?),
                histfile: a.histfile.map(writable_place).transpose()?,
                json: a.json,
            },
            Command::Tune(a) => Checked::Tune { json: a.json },
            Command::BootArgs(a) => Checked::BootArgs {
                cpus: bootable(sys, a.cpus)?,
                json: a.json,
            },
            Command::Boot(a) => Checked::Boot {
                remove: a.remove,
                dry_run: a.dry_run,
                json: a.json,
            },
            Command::Audit(a) => audit(a)?,
            Command::Run(a) => Checked::Run {
                place: cpushield::shield::Place::at(a.cpu, a.set),
                policy: match (a.fifo, a.rr) {
                    (Some(p), _) => RunPolicy::Fifo(p),
                    (_, Some(p)) => RunPolicy::RoundRobin(p),
                    _ => RunPolicy::Inherit,
                },
                user: a.user.as_deref().map(user).transpose()?,
                preserve: cpushield::run_user::Preserve::from_option(a.preserve_env.as_deref()),
                command: a.command,
                dry_run: a.dry_run,
            },
            Command::Compare(a) => compare(a)?,
            Command::Certify(a) => certify(sys, a)?,
            Command::Guard(a) => Checked::Guard {
                cpus: a.cpus,
                settings: checked_guard_settings(&a.settings)?,
            },
            Command::Repair(a) => Checked::Repair {
                reason: a.reason,
                json: a.json,
            },
            Command::Heal => Checked::Heal,
            Command::Nri(a) => Checked::Nri {
                socket: a.socket.to_string_lossy().trim_start_matches('/').to_string(),
                undo: a.undo,
            },
        },
    )
}

/// `on`: the request, each component's options checked by its
/// declaration (ranges, one option against another).
fn on(a: OnArgs) -> Result<Checked> {
    a.options
        .check()
        .map_err(|e| Refusal(format!("{e}; nothing was changed")))?;
    Ok(Checked::On {
        request: Request {
            cpus: a.cpus,
            force: a.force,
            allow_split_siblings: a.allow_split_siblings,
            boot: None,
            options: Default::default(),
        }
        .with_declared(&a.options),
        dry_run: a.dry_run,
        json: a.json,
    })
}

/// `audit`: the window in its range, `--fail-on` as a severity.
fn audit(a: AuditArgs) -> Result<Checked, Refusal> {
    Ok(Checked::Audit {
        cpus: a.cpus,
        window: window(a.window)?,
        fail_on: a.fail_on.as_deref().map(|s| match s {
            "warn" => cpushield::finding::Severity::Warn,
            _ => cpushield::finding::Severity::Bad,
        }),
        json: a.json,
    })
}

/// The config file: the one given, else the default under the root.
fn config_path(sys: &Sys, given: Option<PathBuf>) -> PathBuf {
    given.unwrap_or_else(|| sys.path(cpushield::config::DEFAULT_PATH))
}

/// `audit --window`: seconds between 0 and an hour.
fn window(seconds: f64) -> Result<Duration, Refusal> {
    if (0.0..=3600.0).contains(&seconds) {
        Ok(Duration::from_secs_f64(seconds))
    } else {
        Err(Refusal(format!(
            "--window {seconds}: give seconds between 0 and 3600"
        )))
    }
}

/// `run --user`: a user of the user database.
fn user(name: &str) -> Result<nix::unistd::User> {
    nix::unistd::User::from_name(name)
        .with_context(|| format!("looking up user {}", quote(name)))?
        .ok_or_else(|| {
            Refusal(format!(
                "--user {}: no such user (give a name from /etc/passwd)",
                quote(name)
            ))
            .into()
        })
}

/// `compare`: `--cpus` is required; the results go to `--out`, else a
/// directory named by the time.
fn compare(a: CompareArgs) -> Result<Checked, Refusal> {
    let Some(cpus) = a.cpus else {
        return Err(Refusal(
            "compare: --cpus is required (the CPUs to measure and shield, e.g. --cpus 2-3)".into(),
        ));
    };
    let cache_only = [
        ("--cache-gap", a.cache_gap.is_some()),
        ("--working-set", a.working_set.is_some()),
    ];
    if let Some((flag, _)) = (cache_only.iter()).find(|(_, given)| *given) {
        if a.probe != cpushield::measure::ProbeKind::Cache {
            return Err(Refusal(format!(
                "compare: {flag} is the cache probe's: add --probe cache"
            )));
        }
    }
    let new_out = a.out.is_none();
    let out = a.out.map(output_dir).transpose()?;
    let out = out.unwrap_or_else(|| named_by_time("cpushield-compare"));
    Ok(Checked::Compare {
        new_out,
        options: CompareOptions {
            cpus,
            // The cache probe's neighbours stream through memory by default.
            load: a.load.unwrap_or(match a.probe {
                cpushield::measure::ProbeKind::Cache => cpushield::load::Scenario::Mix,
                _ => cpushield::load::Scenario::Full,
            }),
            probe: a.probe,
            duration_s: a.duration,
            thresholds_us: a.threshold,
            phases: a.phases.unwrap_or_else(|| {
                let mut all = cpushield::compare::Phase::ALL.to_vec();
                all.extend(a.cache_ways.map(|_| cpushield::compare::Phase::CacheShare));
                all
            }),
            out,
            explain_us: a.explain,
            cache_ways: a.cache_ways,
            cache: cpushield::compare::CacheOptions {
                gap_ms: a.cache_gap,
                working_set: a.working_set,
            },
            watch_every_s: None,
            checkpoint: false,
            shield: None,
            existing_shield: None,
            timing: Default::default(),
        },
        dry_run: a.dry_run,
        json: a.json,
    })
}

/// `certify`: `--cpus` and `--budget` are required; the duration and the
/// confidence in their ranges; the results go to `--out`, else a
/// directory named by the time.
/// A value of `certify` from its flag, else from the config's `[certify]`
/// table, with the name an error gives it: `--flag`, or `FILE:LINE: key`.
fn flag_or_key<T>(
    flag: Option<T>,
    flag_name: &str,
    key: Option<AtLine<T>>,
    config: Option<&std::path::Path>,
) -> Option<(T, String)> {
    match (flag, key, config) {
        (Some(v), _, _) => Some((v, flag_name.to_string())),
        (None, Some(k), Some(path)) => {
            let name = flag_name.trim_start_matches("--").replace('-', "_");
            Some((k.value, format!("{}:{}: {name}", path.display(), k.line)))
        }
        _ => None,
    }
}

/// The active shield `certify` measures inside, when there is one: it
/// must hold (`status`'s checks), take the CPUs measured, and with
/// `--config` be what the config asks for (`verify`'s comparison). Reads
/// only.
fn active_shield(
    sys: &Sys,
    (active, cpus): (bool, &CpuSet),
    config: Option<(&std::path::Path, &Request)>,
) -> Result<Option<CpuSet>> {
    if !active {
        return Ok(None);
    }
    let status = cpushield::shield::status(sys)?;
    let shield = status.shield.clone().unwrap_or_default();
    let reasons = |f: &[cpushield::finding::Finding]| {
        f.iter()
            .map(|f| f.reason.clone())
            .collect::<Vec<_>>()
            .join("; ")
    };
    if !status.holds {
        return Err(Refusal(format!(
            "certify: the active shield on CPUs {shield} does not hold ({}): repair it first (cpushield apply, or on), or take it down (cpushield off)",
            reasons(&status.broken)
        ))
        .into());
    }
    if !cpus.is_subset(&shield) {
        return Err(Refusal(format!(
            "certify: CPUs {cpus} are not all in the active shield (CPUs {shield}): certify its CPUs, or take it down first (cpushield off)"
        ))
        .into());
    }
    if let Some((path, want)) = config {
        let v = cpushield::fleet::verify(sys, want, &path.display().to_string())?;
        if !v.matches {
            return Err(Refusal(format!(
                "certify --config {}: the active shield is not what it asks for ({}): cpushield apply first",
                path.display(),
                reasons(&v.differences)
            ))
            .into());
        }
    }
    Ok(Some(shield))
}

/// `PREFIX-<unix time>`: an output directory of its own for each run.
fn named_by_time(prefix: &str) -> PathBuf {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    PathBuf::from(format!("{prefix}-{t}"))
}

/// `certify --duration` (or the key `from` names): seconds, or a number
/// with s, m, h or d; from 1 s to a day (compare's longest phase).
fn duration(text: &str, from: &str) -> Result<f64, Refusal> {
    let bad = || {
        Refusal(format!(
            "{from} {}: give seconds or a number with s, m, h or d (90, 90s, 10m, 2h, 1d), from 1 s to 1 day",
            quote(text)
        ))
    };
    let seconds = cpushield::input::seconds(text).ok_or_else(bad)?;
    if (1.0..=86_400.0).contains(&seconds) {
        Ok(seconds)
    } else {
        Err(bad())
    }
}

/// `verify`: its config read now; one that does not read is an error, or
/// unknown to the monitor `--nagios` or `--npd` asks for.
fn verify(sys: &Sys, a: crate::cli::VerifyArgs) -> Result<Checked> {
    let config = config_path(sys, a.config);
    let plugin = match (a.nagios, a.npd) {
        (true, _) => Some(Plugin::Nagios),
        (_, true) => Some(Plugin::Npd),
        _ => None,
    };
    Ok(match (cpushield::config::load(&config), plugin) {
        (Ok(request), _) => Checked::Verify {
            request,
            config,
            json: a.json,
            plugin,
        },
        (Err(e), Some(plugin)) => Checked::PluginUnknown(plugin, e.to_string()),
        (Err(e), None) => return Err(e.into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_is_read_in_seconds_or_with_a_unit_and_refused_naming_it() {
        for (text, want) in [
            ("90", 90.0),
            ("90s", 90.0),
            ("10m", 600.0),
            ("2h", 7200.0),
            ("1d", 86_400.0),
            ("1.5m", 90.0),
        ] {
            assert_eq!(duration(text, "--duration").unwrap(), want, "{text}");
        }
        for bad in ["", "0", "10x", "m", "-5m", "2d", "25h", "NaN"] {
            let e = duration(bad, "--duration").unwrap_err().to_string();
            assert!(
                e.starts_with("--duration ") && e.contains("10m"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn a_window_outside_an_hour_is_refused_naming_it() {
        assert_eq!(window(2.5).unwrap(), Duration::from_millis(2500));
        assert_eq!(window(0.0).unwrap(), Duration::ZERO);
        for bad in [-1.0, 3600.5, f64::NAN] {
            let e = window(bad).unwrap_err().to_string();
            assert!(
                e.starts_with("--window ") && e.contains("0 and 3600"),
                "{e}"
            );
        }
    }

    #[test]
    fn an_unknown_user_is_refused_naming_it() {
        let e = user("no-such-user-cpushield").unwrap_err();
        assert!(e.downcast_ref::<Refusal>().is_some(), "{e}");
        assert!(e.to_string().contains("\"no-such-user-cpushield\""), "{e}");
        assert_eq!(user("root").unwrap().uid.as_raw(), 0);
    }
}
