//! The config file of a shield that lives for months:
//! `/etc/cpushield/cpushield.toml`, read by `apply` and `verify`. Its keys
//! are `on`'s arguments; an error names the file, the line and what would
//! be valid.
//!
//! ```toml
//! cpus = "2-3"                 # required: cpulist or hex mask
//! irqs = ["eth0-rx-0", "45"]   # IRQs bound to the shield
//! tune = ["all"]               # or knob names such as "timer-migration" (cpushield tune --list), or "all"
//! hotplug_restart = false
//! force = false
//! allow_split_siblings = false
//! boot = true                  # or extra options: ["skew_tick=1"]; the boot half (see cpushield::boot)
//! guard = "auto"               # the starvation guard: "auto", "on" or "off" (see cpushield::guard)
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::cpulist::CpuSet;
use crate::shield::request::Request;

/// Where `apply` and `verify` look by default, relative to the root.
pub const DEFAULT_PATH: &str = "etc/cpushield/cpushield.toml";

/// A config file that cannot be used; nothing was changed.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("config {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid: syntax, a key, a value.
    #[error("config {}:{line}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line of the offending key or value.
        line: usize,
        /// What is wrong and what would be valid.
        message: String,
    },
}

/// The keys of the file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    cpus: Spanned<String>,
    #[serde(default)]
    irqs: Vec<String>,
    #[serde(default)]
    tune: Option<Spanned<Tune>>,
    #[serde(default)]
    hotplug_restart: bool,
    #[serde(default)]
    force: bool,
    #[serde(default)]
    allow_split_siblings: bool,
    #[serde(default)]
    boot: Option<Spanned<Boot>>,
    #[serde(default)]
    guard: Option<Spanned<String>>,
}

/// `boot = true|false` or `boot = ["option", ...]` (extra options).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Boot {
    On(bool),
    Extra(Vec<String>),
}

/// `tune = "all"` or `tune = ["knob", ...]`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Tune {
    One(String),
    Many(Vec<String>),
}

const KEYS: &str =
    "valid keys: cpus (required), irqs, tune, hotplug_restart, force, allow_split_siblings, boot, guard";

/// Reads and validates the config file at `path`.
pub fn load(path: &Path) -> Result<Request, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text, path)
}

/// Validates config text (`path` names it in errors).
pub fn parse(text: &str, path: &Path) -> Result<Request, ConfigError> {
    let invalid = |offset: usize, message: String| ConfigError::Invalid {
        path: path.to_path_buf(),
        line: line_of(text, offset),
        message,
    };
    let file: File = toml::from_str(text).map_err(|e| {
        let offset = e.span().map_or(0, |s| s.start);
        let mut message = e.message().trim().to_string();
        if message.starts_with("unknown field") || message.starts_with("missing field") {
            message = format!("{message}; {KEYS}");
        }
        invalid(offset, message)
    })?;
    let cpus = CpuSet::parse_user(file.cpus.get_ref()).map_err(|e| {
        invalid(
            file.cpus.span().start,
            format!("cpus = {:?}: {e}", file.cpus.get_ref()),
        )
    })?;
    if cpus.is_empty() {
        return Err(invalid(
            file.cpus.span().start,
            "cpus is empty: give a cpulist such as \"2-3\" or a hex mask such as \"0xc\"".into(),
        ));
    }
    let tune = match file.tune {
        None => Vec::new(),
        Some(t) => {
            let start = t.span().start;
            let names = match t.into_inner() {
                Tune::One(name) => vec![name],
                Tune::Many(names) => names,
            };
            if !names.is_empty() {
                crate::shield::knobs::resolve(&names)
                    .map_err(|e| invalid(start, format!("tune: {e}")))?;
            }
            names
        }
    };
    let boot = match file.boot {
        None => None,
        Some(b) => {
            let start = b.span().start;
            match b.into_inner() {
                Boot::On(false) => None,
                Boot::On(true) => Some(Vec::new()),
                Boot::Extra(extra) => {
                    // The words are checked here, the CPUs when applied.
                    crate::boot::check_extra(&extra).map_err(|e| invalid(start, e.to_string()))?;
                    Some(extra)
                }
            }
        }
    };
    Ok(Request {
        boot,
        cpus,
        irqs: file.irqs,
        force: file.force,
        allow_split_siblings: file.allow_split_siblings,
        tune,
        hotplug_restart: file.hotplug_restart,
        guard: crate::guard::GuardRequest {
            mode: match file.guard {
                None => crate::guard::GuardMode::Auto,
                Some(g) => {
                    let start = g.span().start;
                    g.into_inner().parse().map_err(|e| invalid(start, e))?
                }
            },
            settings: Default::default(),
        },
    })
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn err(text: &str) -> (usize, String) {
        match parse(text, Path::new("/etc/cpushield/cpushield.toml")) {
            Err(ConfigError::Invalid { line, message, .. }) => (line, message),
            other => panic!("expected an invalid config, got {other:?}"),
        }
    }

    #[test]
    fn every_key_reaches_the_request() {
        let r = parse(
            "# shield\ncpus = \"2-3\"\nirqs = [\"eth0\", \"45\"]\ntune = \"all\"\nhotplug_restart = true\nforce = true\nallow_split_siblings = true\n",
            Path::new("c.toml"),
        )
        .unwrap();
        assert_eq!(r.cpus, CpuSet::parse_list("2-3").unwrap());
        assert_eq!(r.irqs, ["eth0", "45"]);
        assert_eq!(r.tune, ["all"]);
        assert!(r.hotplug_restart && r.force && r.allow_split_siblings);
        let r = parse(
            "cpus = \"0xc\"\ntune = [\"timer-migration\"]\n",
            Path::new("c"),
        )
        .unwrap();
        assert_eq!(r.cpus, CpuSet::parse_list("2-3").unwrap());
        assert!(!r.force && r.irqs.is_empty());
    }

    #[test]
    fn errors_name_the_line_and_what_is_valid() {
        let (line, msg) = err("cpus = \"2-3\"\n\ncpu_list = \"4\"\n");
        assert_eq!(line, 3, "{msg}");
        assert!(
            msg.contains("cpu_list") && msg.contains("valid keys"),
            "{msg}"
        );

        let (line, msg) = err("# no cpus\nforce = true\n");
        assert!(
            msg.contains("cpus") && msg.contains("valid keys"),
            "{line}: {msg}"
        );

        let (line, msg) = err("force = true\ncpus = \"2-x\"\n");
        assert_eq!(line, 2, "{msg}");
        assert!(msg.contains("2-x"), "{msg}");

        let (line, msg) = err("cpus = \"2\"\ntune = [\"no_such_knob\"]\n");
        assert_eq!(line, 2, "{msg}");
        assert!(msg.contains("no_such_knob"), "{msg}");

        let (line, msg) = err("cpus = \"2\"\nforce = \"yes\"\n");
        assert_eq!(line, 2, "{msg}");

        let (line, _) = err("cpus = \"2\"\n[section\n");
        assert_eq!(line, 2);
    }

    #[test]
    fn a_missing_file_is_named() {
        let e = load(Path::new("/nonexistent/cpushield.toml")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/cpushield.toml"), "{e}");
    }

    proptest! {
        /// Any text, and any mangling of a valid file: no panic, and an
        /// error always names the file and a line of it.
        #[test]
        fn malformed_input_gives_an_error_with_a_line(text in "\\PC{0,200}") {
            check_no_panic(&text);
        }

        #[test]
        fn mangled_valid_files_give_an_error_with_a_line(
            cut in 0usize..120,
            insert in "[\\[\\]=\"a-z0-9,\\n #.-]{0,8}",
        ) {
            let valid = "cpus = \"2-3\"\nirqs = [\"eth0\"]\ntune = [\"all\"]\nforce = false\n";
            let at = cut.min(valid.len());
            let text = format!("{}{}{}", &valid[..at], insert, &valid[at..]);
            check_no_panic(&text);
        }
    }

    fn check_no_panic(text: &str) {
        match parse(text, Path::new("f.toml")) {
            Ok(r) => assert!(!r.cpus.is_empty()),
            Err(ConfigError::Invalid { line, .. }) => {
                assert!(
                    line >= 1 && line <= text.lines().count().max(1) + 1,
                    "line {line}"
                )
            }
            Err(e) => panic!("unexpected {e}"),
        }
    }
}
