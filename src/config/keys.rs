//! The components' keys of the config file, read as `on` reads their
//! flags: each key is the flag's id, its value turned into the flag's
//! words (`max_idle_latency = 10` is `--max-idle-latency=10`, `irqs = ["a",
//! "b"]` is `--irq=a --irq=b`) and parsed by the parser, the defaults and
//! the checks its component declares ([`crate::shield::Options`]). So the
//! file takes exactly what the flags take, in the same units.

use std::collections::BTreeMap;

use clap::{Args, FromArgMatches};

use crate::input::{brief_to, quote};
use crate::shield::options::flags;
use crate::shield::Options;

/// A key's error: the key (for its line) and the message.
pub(super) type KeyError = (String, String);

/// The components' keys of the file, as their options.
pub(super) fn options(keys: &BTreeMap<String, toml::Value>) -> Result<Options, KeyError> {
    let args = flags::<Options>();
    let mut all = Vec::new();
    for (key, value) in keys {
        let Some(arg) = args.iter().find(|a| a.get_id().as_str() == key) else {
            return Err((key.clone(), unknown(key)));
        };
        let words = words(key, arg, value)?;
        // Each key alone first, so that an error names its own line (what
        // it requires of another key is for the whole file to say).
        match parse(&words) {
            Err(e) if e.kind() != clap::error::ErrorKind::MissingRequiredArgument => {
                return Err((key.clone(), message(key, &e)));
            }
            _ => {}
        }
        all.extend(words);
    }
    let options = parse(&all).map_err(|e| {
        let key = named_key(&as_keys(&e.to_string())).unwrap_or_default();
        (key.clone(), message(&key, &e))
    })?;
    options.check().map_err(|e| {
        let e = as_keys(&e);
        (named_key(&e).unwrap_or_default(), e)
    })?;
    Ok(options)
}

/// The keys of the file beyond the components' (`cpus`, `force`, ...),
/// then the components' keys, for a message that lists the valid ones.
pub(super) fn valid() -> String {
    let own = ["cpus (required)", "force", "allow_split_siblings", "boot"];
    let components = flags::<Options>();
    let ids = components.iter().map(|a| a.get_id().as_str());
    let all: Vec<&str> = own.into_iter().chain(ids).collect();
    format!("valid keys: {}, [certify]", all.join(", "))
}

fn unknown(key: &str) -> String {
    format!("unknown key {}; {}", quote(key), valid())
}

/// `on`'s words for `key = value`.
fn words(key: &str, arg: &clap::Arg, value: &toml::Value) -> Result<Vec<String>, KeyError> {
    let long = arg.get_long().unwrap_or(key);
    let switch = crate::shield::options::is_switch(arg);
    let bad = |what: &str| Err((key.to_string(), format!("{key}: {what}")));
    let text = |v: &toml::Value| match v {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(n) => Some(n.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        _ => None,
    };
    match value {
        toml::Value::Boolean(set) if switch => Ok(match set {
            true => vec![format!("--{long}")],
            false => Vec::new(),
        }),
        _ if switch => bad("expected true or false"),
        toml::Value::Array(items) => {
            let Some(items) = items.iter().map(text).collect::<Option<Vec<_>>>() else {
                return bad("expected a list of strings or numbers");
            };
            match (arg.get_value_delimiter(), arg.get_action()) {
                (_, _) if items.is_empty() => Ok(Vec::new()),
                (Some(d), _) => Ok(vec![format!("--{long}={}", items.join(&d.to_string()))]),
                (None, clap::ArgAction::Append) => {
                    Ok(items.iter().map(|i| format!("--{long}={i}")).collect())
                }
                _ => bad("expected one value, not a list"),
            }
        }
        other => match text(other) {
            Some(t) => Ok(vec![format!("--{long}={t}")]),
            None => bad("expected a string or a number"),
        },
    }
}

fn parse(words: &[String]) -> Result<Options, clap::Error> {
    let cmd = Options::augment_args(clap::Command::new("config").no_binary_name(true));
    let matches = cmd.try_get_matches_from(words)?;
    Options::from_arg_matches(&matches)
}

/// A parser's message as the file's: the key named, flags as keys, on one
/// line, a long value cut short.
fn message(key: &str, e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    use std::error::Error;
    let said = match (e.kind(), e.source()) {
        (ErrorKind::ValueValidation, Some(source)) => source.to_string(),
        (ErrorKind::MissingRequiredArgument, _) => {
            let missing = match e.get(ContextKind::InvalidArg) {
                Some(ContextValue::Strings(args)) => args.join(", "),
                _ => "another key".into(),
            };
            format!("needs {}", as_keys(&missing))
        }
        _ => as_keys(&crate::input::clap_said(e)),
    };
    let said = said.trim_start_matches(&format!("{key}: ")).to_string();
    brief_to(&format!("{key}: {said}"), super::MESSAGE_BYTES)
}

/// `text` with each flag (`--cache-ways`, `'--irq <IRQ>'`) named by its
/// config key instead.
fn as_keys(text: &str) -> String {
    let mut args = flags::<Options>();
    // The longest first: `--guard-engine` before `--guard`.
    args.sort_by_key(|a| std::cmp::Reverse(a.get_long().map_or(0, str::len)));
    let mut out = text.to_string();
    for arg in &args {
        let (Some(long), id) = (arg.get_long(), arg.get_id().as_str()) else {
            continue;
        };
        let names = arg.get_value_names().unwrap_or_default();
        for name in names {
            out = out.replace(&format!("'--{long} <{name}>'"), id);
            out = out.replace(&format!("--{long} <{name}>"), id);
        }
        out = out.replace(&format!("--{long}"), id);
    }
    out
}

/// The config key of the components that `text` names most precisely:
/// the longest (`guard_runtime`, not `guard`; `others_bandwidth` in
/// "others_bandwidth needs cache_ways").
fn named_key(text: &str) -> Option<String> {
    let args = flags::<Options>();
    (args.iter())
        .map(|a| a.get_id().to_string())
        .filter(|key| text.contains(key.as_str()))
        .max_by_key(String::len)
}

/// The components' keys as the config file's documentation gives them
/// (the example file, `packaging/cpushield.toml`): each key's help, from
/// its flag, as comments, then the key with its example value, commented
/// out.
pub fn documentation() -> String {
    let examples = Options::examples();
    let mut out = String::new();
    for arg in flags::<Options>() {
        let key = arg.get_id().as_str();
        let help =
            (arg.get_long_help().or(arg.get_help())).map_or_else(String::new, |h| h.to_string());
        let flag = arg.get_long().unwrap_or(key);
        let text = format!(
            "{key} (on --{flag}): {}",
            help.split_whitespace().collect::<Vec<_>>().join(" ")
        );
        for line in wrap(&text, 76) {
            out.push_str(&format!("# {line}\n"));
        }
        let example = examples
            .iter()
            .find(|(k, _)| *k == key)
            .map_or("", |(_, v)| v);
        out.push_str(&format!("#{key} = {example}\n\n"));
    }
    out
}

/// `text` in lines of at most `width` characters, broken between words.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for word in text.split(' ') {
        let line = lines.last_mut().expect("one line at least");
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(word.to_string());
        } else {
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
    }
    lines
}
