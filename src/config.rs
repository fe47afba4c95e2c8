//! The config file of a shield that lives for months:
//! `/etc/cpushield/cpushield.toml`, read by `apply` and `verify`. Its keys
//! are `on`'s arguments; an error names the file, the line and what would
//! be valid, quoting at most a short prefix of a long value. The file must
//! be a regular file of at most 1 MiB ([`crate::input::read_file`]).
//!
//! The file's own keys are `cpus` (required: a cpulist or a hex mask),
//! `force`, `allow_split_siblings` and `boot` (`true`, or extra options
//! such as `["skew_tick=1"]`: the boot half, see [`crate::boot`]); every
//! other key is a component's option, declared with it (its flag's id, its
//! parser, its help) and documented from that declaration
//! (`keys::documentation`, which writes the packaged example
//! `packaging/cpushield.toml`). Certify's own table:
//!
//! ```toml
//! [certify]                    # `certify --config`: what its flags do not say
//! budget = "max<=100us,p99.99<=50us"
//! duration = "2h"              # or seconds
//! load = "mix"
//! probe = "timer"
//! confidence = 95
//! explain = 50                 # µs
//! baseline = "/var/lib/cpushield/certify-2026-11"
//! regression = 20
//! out = "/var/lib/cpushield/certify"
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::cpulist::CpuSet;
use crate::input::{brief_to, quote, read_file, FileError, CONFIG_LIMIT};
use crate::shield::request::Request;

mod keys;
pub use keys::documentation as components_documentation;

/// Where `apply` and `verify` look by default, relative to the root.
pub const DEFAULT_PATH: &str = "etc/cpushield/cpushield.toml";

/// A config file that cannot be used; nothing was changed.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read, is not a regular file, or is over 1 MiB.
    #[error("config {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: FileError,
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

/// The keys of the file: its own, and the components' (each read as
/// its flag is: [`keys`]).
#[derive(Debug, Deserialize)]
struct File {
    cpus: Spanned<String>,
    #[serde(default)]
    force: bool,
    #[serde(default)]
    allow_split_siblings: bool,
    #[serde(default)]
    boot: Option<Spanned<Boot>>,
    #[serde(default)]
    certify: Option<CertifyKeys>,
    /// Every other key: the components'.
    #[serde(flatten)]
    components: BTreeMap<String, toml::Value>,
}

/// The keys of the `[certify]` table, as read.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CertifyKeys {
    budget: Option<Spanned<String>>,
    duration: Option<Spanned<Duration>>,
    load: Option<Spanned<String>>,
    probe: Option<Spanned<String>>,
    confidence: Option<Spanned<f64>>,
    explain: Option<Spanned<u64>>,
    baseline: Option<Spanned<PathBuf>>,
    regression: Option<Spanned<f64>>,
    out: Option<Spanned<PathBuf>>,
}

/// A value of the `[certify]` table and the line it is on, for errors.
#[derive(Debug, Clone, PartialEq)]
pub struct AtLine<T> {
    /// The value as written.
    pub value: T,
    /// Its 1-based line in the file.
    pub line: usize,
}

/// The `[certify]` table: what `certify --config` takes from the file
/// where its own flags say nothing. Checked where the flags are, so that an
/// error names the key and its line the way a flag's names the flag.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CertifySection {
    /// `budget`: the terms, as `--budget`.
    pub budget: Option<AtLine<String>>,
    /// `duration`: seconds, or text such as "2h", as `--duration`.
    pub duration: Option<AtLine<String>>,
    /// `load`: a scenario name, as `--load`.
    pub load: Option<AtLine<String>>,
    /// `probe`: a probe name, as `--probe`.
    pub probe: Option<AtLine<String>>,
    /// `confidence`, percent.
    pub confidence: Option<AtLine<f64>>,
    /// `explain`, µs.
    pub explain: Option<AtLine<u64>>,
    /// `baseline`: an earlier certify's directory.
    pub baseline: Option<AtLine<PathBuf>>,
    /// `regression`, percent.
    pub regression: Option<AtLine<f64>>,
    /// `out`: the output directory.
    pub out: Option<AtLine<PathBuf>>,
}

impl CertifySection {
    fn read(keys: CertifyKeys, text: &str) -> CertifySection {
        fn at<T, U>(v: Option<Spanned<T>>, text: &str, f: impl Fn(T) -> U) -> Option<AtLine<U>> {
            v.map(|v| AtLine {
                line: line_of(text, v.span().start),
                value: f(v.into_inner()),
            })
        }
        let same = |v| v;
        CertifySection {
            budget: at(keys.budget, text, same),
            duration: at(keys.duration, text, Duration::into_text),
            load: at(keys.load, text, same),
            probe: at(keys.probe, text, same),
            confidence: at(keys.confidence, text, |v| v),
            explain: at(keys.explain, text, |v| v),
            baseline: at(keys.baseline, text, |v| v),
            regression: at(keys.regression, text, |v| v),
            out: at(keys.out, text, |v| v),
        }
    }
}

/// A duration key: a bare number in the key's own unit
/// (`max_idle_latency = 10`: µs; `duration = 600`: s) or text with a unit
/// (`"10us"`, `"10m"`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Duration {
    Number(u64),
    Text(String),
}

impl Duration {
    /// As the option's parser takes it: the number as written, or the text.
    fn into_text(self) -> String {
        match self {
            Duration::Number(n) => n.to_string(),
            Duration::Text(t) => t,
        }
    }
}

/// `boot = true|false` or `boot = ["option", ...]` (extra options).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Boot {
    On(bool),
    Extra(Vec<String>),
}

const CERTIFY_KEYS: &str =
    "valid keys of [certify]: budget, duration, load, probe, confidence, explain, baseline, regression, out";

/// Reads and validates the config file at `path`: a regular file of at
/// most 1 MiB, else refused before it is read whole.
pub fn load(path: &Path) -> Result<Request, ConfigError> {
    load_with_certify(path).map(|(request, _)| request)
}

/// [`load`], and the file's `[certify]` table (empty when it has none).
pub fn load_with_certify(path: &Path) -> Result<(Request, CertifySection), ConfigError> {
    let text = read_file(path, CONFIG_LIMIT).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse_with_certify(&text, path)
}

/// Validates config text (`path` names it in errors).
pub fn parse(text: &str, path: &Path) -> Result<Request, ConfigError> {
    parse_with_certify(text, path).map(|(request, _)| request)
}

/// The file's keys, as TOML gives them; an unknown or missing key is
/// named with the valid ones.
fn keys(text: &str, path: &Path) -> Result<File, ConfigError> {
    toml::from_str(text).map_err(|e| {
        let offset = e.span().map_or(0, |s| s.start);
        // The parser's message can hold a key or value of any length.
        let mut message = brief_to(e.message().trim(), MESSAGE_BYTES);
        let in_certify = text
            .get(..offset)
            .unwrap_or(text)
            .lines()
            .any(|l| l.trim() == "[certify]");
        let keys = if in_certify {
            CERTIFY_KEYS.to_string()
        } else {
            keys::valid()
        };
        if message.starts_with("unknown field") {
            // The parser lists the keys after the key; said once, below.
            let key = e.span().and_then(|s| text.get(s)).unwrap_or_default();
            message = format!("unknown key {}; {keys}", quote(key));
        } else if message.starts_with("missing field") {
            message = format!("{message}; {keys}");
        }
        ConfigError::Invalid {
            path: path.to_path_buf(),
            line: line_of(text, offset),
            message,
        }
    })
}

/// [`parse`], and the `[certify]` table.
pub fn parse_with_certify(
    text: &str,
    path: &Path,
) -> Result<(Request, CertifySection), ConfigError> {
    let invalid = |offset: usize, message: String| ConfigError::Invalid {
        path: path.to_path_buf(),
        line: line_of(text, offset),
        message,
    };
    let file = keys(text, path)?;
    let cpus = CpuSet::parse_user(file.cpus.get_ref())
        .map_err(|e| invalid(file.cpus.span().start, format!("cpus: {e}")))?;
    if cpus.is_empty() {
        return Err(invalid(
            file.cpus.span().start,
            "cpus is empty: give a cpulist such as \"2-3\" or a hex mask such as \"0xc\"".into(),
        ));
    }
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
    let options = keys::options(&file.components)
        .map_err(|(key, message)| invalid(key_offset(text, &key), message))?;
    let request = Request {
        boot,
        options: Default::default(),
        cpus,
        force: file.force,
        allow_split_siblings: file.allow_split_siblings,
    }
    .with_declared(&options);
    let certify = file
        .certify
        .map(|keys| CertifySection::read(keys, text))
        .unwrap_or_default();
    Ok((request, certify))
}

/// Where the top-level `key` (or the table `[key]`) is written in `text`,
/// as an offset; 0 when not found.
fn key_offset(text: &str, key: &str) -> usize {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let l = line.trim_start();
        if l.starts_with('[') && l.trim_end() != format!("[{key}]") {
            break;
        }
        let name = l
            .split('=')
            .next()
            .unwrap_or_default()
            .trim()
            .trim_matches('"');
        if name == key || l.trim_end() == format!("[{key}]") {
            return offset;
        }
        offset += line.len();
    }
    0
}

/// At most this many bytes of a parser's message are shown: it may quote
/// a key or a value of any length.
const MESSAGE_BYTES: usize = 160;

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The components' options of `r`, typed.
    fn opts(r: &Request) -> crate::shield::Options {
        r.declared().unwrap()
    }

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
        assert_eq!(opts(&r).irqs.irqs, ["eth0", "45"]);
        assert_eq!(opts(&r).knobs.tune.unwrap(), ["all"]);
        assert!(opts(&r).hotplug.hotplug_restart && r.force && r.allow_split_siblings);
        assert_eq!(opts(&r).rt_kthreads.kthreads_above, None);
        let r = parse("cpus = \"3\"\nkthreads_above = 80\n", Path::new("c")).unwrap();
        assert_eq!(opts(&r).rt_kthreads.kthreads_above, Some(80));
        let (line, msg) = err("cpus = \"3\"\nkthreads_above = 97\n");
        assert_eq!(line, 2, "{msg}");
        assert!(
            msg.contains("kthreads_above") && msg.contains("1 to 95"),
            "{msg}"
        );
        let r = parse("cpus = \"3\"\nguard_engine = \"stalld\"\n", Path::new("c")).unwrap();
        let guard = opts(&r).guard.request();
        assert_eq!(guard.settings.engine, crate::guard::Engine::Stalld);
        assert_eq!(guard.settings.threshold_ms, 1_000);
        let r = parse(
            "cpus = \"3\"\nguard_threshold = \"2s\"\nguard_runtime = 20\nguard_period = \"1ms\"\nguard_duration = 3000\n",
            Path::new("c"),
        )
        .unwrap();
        let g = opts(&r).guard.request().settings;
        assert_eq!(
            (g.threshold_ms, g.runtime_us, g.period_us, g.duration_ms),
            (2_000, 20, 1_000, 3_000)
        );
        let (line, msg) = err("cpus = \"3\"\n\nguard_runtime = \"5 parsecs\"\n");
        assert_eq!(line, 3, "{msg}");
        assert!(msg.starts_with("guard_runtime: "), "{msg}");
        let (line, msg) = err("cpus = \"3\"\nguard_runtime = \"2ms\"\nguard_period = \"1ms\"\n");
        assert_eq!(line, 2, "{msg}");
        assert!(
            msg.contains("guard_runtime"),
            "a runtime past its period: {msg}"
        );
        let (line, msg) = err("cpus = \"3\"\nguard_engine = \"tuned\"\n");
        assert_eq!(line, 2, "{msg}");
        assert!(msg.contains("auto, cpushield, stalld"), "{msg}");
        let r = parse(
            "cpus = \"0xc\"\ntune = [\"timer-migration\"]\n",
            Path::new("c"),
        )
        .unwrap();
        assert_eq!(r.cpus, CpuSet::parse_list("2-3").unwrap());
        assert!(!r.force && opts(&r).irqs.irqs.is_empty());
        assert_eq!(opts(&r).idle_states.max_idle_latency, None);
        for (value, us) in [("10", 10), ("\"10us\"", 10), ("\"1ms\"", 1000), ("0", 0)] {
            let text = format!("cpus = \"3\"\nmax_idle_latency = {value}\n");
            let r = parse(&text, Path::new("c")).unwrap();
            assert_eq!(opts(&r).idle_states.max_idle_latency, Some(us), "{value}");
        }
        let (line, msg) = err("cpus = \"3\"\nmax_idle_latency = \"fast\"\n");
        assert_eq!(line, 2, "{msg}");
        assert!(
            msg.contains("max_idle_latency") && msg.contains("0 to 1000000 µs"),
            "{msg}"
        );
    }

    #[test]
    fn the_certify_table_reaches_its_section_with_each_line() {
        let text = "cpus = \"2-3\"\ntune = \"all\"\n\n[certify]\nbudget = \"max<=100us\"\nduration = 7200\nload = \"cpu\"\nprobe = \"rtc\"\nconfidence = 99\nexplain = 50\nbaseline = \"/b\"\nregression = 10.5\nout = \"/o\"\n";
        let (request, c) = parse_with_certify(text, Path::new("c.toml")).unwrap();
        assert_eq!(opts(&request).knobs.tune, Some(vec!["all".to_string()]));
        assert_eq!(
            c.budget,
            Some(AtLine {
                value: "max<=100us".into(),
                line: 5
            })
        );
        assert_eq!(
            c.duration.as_ref().map(|d| (d.value.as_str(), d.line)),
            Some(("7200", 6))
        );
        assert_eq!(c.load.unwrap().value, "cpu");
        assert_eq!(c.probe.unwrap().value, "rtc");
        assert_eq!(
            c.confidence.unwrap().value,
            99.0,
            "an integer is a percentage too"
        );
        assert_eq!(c.explain.unwrap().value, 50);
        assert_eq!(c.baseline.unwrap().value, PathBuf::from("/b"));
        assert_eq!(c.regression.map(|r| (r.value, r.line)), Some((10.5, 12)));
        assert_eq!(c.out.unwrap().line, 13);
        let (_, none) = parse_with_certify("cpus = \"2\"\n", Path::new("c.toml")).unwrap();
        assert_eq!(none, CertifySection::default());
        // an unknown key in [certify] is named with [certify]'s keys
        let e = parse(
            "cpus = \"2\"\n[certify]\nbudgets = \"x\"\n",
            Path::new("c.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("config c.toml:3: unknown key \"budgets\""),
            "{e}"
        );
        assert!(e.contains("valid keys of [certify]: budget,"), "{e}");
        let e = parse("cpus = \"2\"\nbudget = \"x\"\n", Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("max_idle_latency, ") && e.ends_with(", [certify]"),
            "{e}"
        );
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
    fn errors_quote_a_short_prefix_of_a_long_value_with_its_length() {
        let cpus: String = (0..50_000)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(",");
        let long = "x".repeat(5000);
        for text in [
            format!("cpus = \"{cpus}\"\n"),
            format!("cpus = \"2\"\n{long} = 1\n"),
            format!("cpus = \"2\"\ntune = [\"{long}\"]\n"),
            format!("cpus = \"2\"\nboot = [\"{long} \"]\n"),
            format!("cpus = \"2\"\nguard = \"{long}\"\n"),
            format!("cpus = \"2\"\nforce = \"{long}\"\n"),
            format!("cpus = \"{long}\"\n"),
        ] {
            let e = parse(&text, Path::new("/etc/cpushield/cpushield.toml"))
                .unwrap_err()
                .to_string();
            // the long value is cut to a short prefix; the rest is at most
            // the list of valid keys
            assert!(
                e.len() < 160 + keys::valid().len(),
                "{} bytes: {e}",
                e.len()
            );
            assert!(!e.contains(&long[..200]), "{e}");
            assert!(
                e.starts_with("config /etc/cpushield/cpushield.toml:"),
                "{e}"
            );
        }
        let e = parse(&format!("cpus = \"{cpus}\"\n"), Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!(
                "\"0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16…\" ({} bytes)",
                cpus.len()
            )),
            "the list is quoted once, cut, with its length: {e}"
        );
        assert_eq!(e.matches("0,1,2,3").count(), 1, "{e}");
    }

    #[test]
    fn only_a_regular_file_of_at_most_1_mib_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.toml");
        let mut text = "cpus = \"2\"\n".to_string();
        text.push_str(&"#\n".repeat(1 << 20));
        std::fs::write(&big, &text).unwrap();
        let fifo = dir.path().join("fifo.toml");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        for (path, says) in [
            (
                Path::new("/dev/zero"),
                "it is a character device, not a regular file",
            ),
            (fifo.as_path(), "it is a FIFO, not a regular file"),
            (dir.path(), "it is a directory, not a regular file"),
            (
                big.as_path(),
                "it is 2.0 MiB (2097163 bytes), over the limit of 1 MiB",
            ),
        ] {
            let e = load(path).unwrap_err();
            assert!(matches!(e, ConfigError::Read { .. }), "{e}");
            let e = e.to_string();
            assert!(
                e.starts_with(&format!("config {}: {says}", path.display())),
                "{e}"
            );
            assert!(e.contains("give a regular file of at most 1 MiB"), "{e}");
        }
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
