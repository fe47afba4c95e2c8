//! A component's options as it declares them: one typed struct, whose
//! clap attributes give the `on` flags, their parsers, defaults and help
//! (and through them the man pages and the config file, which is parsed
//! by the same parsers), whose serde form is what the request keeps in the
//! journal, each option under its config key (the struct's field name, the
//! flag's id). The registry flattens every component's struct into one
//! ([`crate::shield::Options`]); nothing else spells a component's keys.

use std::collections::BTreeMap;
use std::fmt::Debug;

use serde::de::DeserializeOwned;
use serde::Serialize;

/// What a component's options struct declares beyond its clap and serde
/// derives. Its serde form must leave out what was not given, so that the
/// journal holds only what the user asked for.
pub trait Declared:
    clap::Args + clap::FromArgMatches + Serialize + DeserializeOwned + Default + Clone + Debug
{
    /// Each option's config key with an example value as TOML writes it,
    /// for the config file's documentation; every key the struct declares
    /// has one (a test holds it).
    const EXAMPLES: &'static [(&'static str, &'static str)];

    /// Checks what the parsers alone cannot (a range, one option against
    /// another): the message names each option as the command line spells it.
    fn check(&self) -> Result<(), String> {
        Ok(())
    }

    /// The options as `verify` compares the shield's with a config's, each
    /// as `(config key, text)`; by default every key the struct declares,
    /// `none` when not given, a list compared as a set.
    fn compared(&self) -> Vec<(String, String)> {
        compared_from_serde::<Self>(self)
    }

    /// The `cpushield on` words that give these options (` --irq 24`):
    /// by default from the flags' definitions and the serde form.
    fn words(&self) -> Vec<String> {
        words_from_serde::<Self>(self)
    }
}

/// The flags a declared struct defines, with their config keys.
pub fn flags<T: clap::Args>() -> Vec<clap::Arg> {
    T::augment_args(clap::Command::new("options"))
        .get_arguments()
        .filter(|a| a.get_long().is_some())
        .cloned()
        .collect()
}

/// The options of `value` as a map of config key to JSON value.
pub fn to_map<T: Serialize>(value: &T) -> BTreeMap<String, serde_json::Value> {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::Object(map)) => map.into_iter().collect(),
        _ => BTreeMap::new(),
    }
}

/// How `verify` words one value: a flag `true`/`false`, a list sorted and
/// joined (`none` when empty), text as written, `none` when absent.
pub fn value_text(value: Option<&serde_json::Value>) -> String {
    use serde_json::Value;
    match value {
        None | Some(Value::Null) => "none".into(),
        Some(Value::Bool(set)) => set.to_string(),
        Some(Value::String(s)) => crate::input::brief_to(s, 60),
        Some(Value::Array(items)) if items.is_empty() => "none".into(),
        Some(Value::Array(items)) => {
            let mut words: Vec<String> = items.iter().map(word_of).collect();
            words.sort();
            crate::input::brief_to(&words.join(", "), 60)
        }
        Some(other) => crate::input::brief_to(&other.to_string(), 60),
    }
}

fn word_of(v: &serde_json::Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_string)
}

/// [`Declared::compared`]'s default.
pub fn compared_from_serde<T: Declared>(value: &T) -> Vec<(String, String)> {
    let map = to_map(value);
    flags::<T>()
        .iter()
        .map(|arg| {
            let key = arg.get_id().as_str();
            let text = match (map.get(key), is_switch(arg)) {
                // A flag not given is a flag not set.
                (None, true) => "false".into(),
                (v, _) => value_text(v),
            };
            (key.to_string(), text)
        })
        .collect()
}

/// Whether `arg` is a flag that takes no value.
pub fn is_switch(arg: &clap::Arg) -> bool {
    matches!(
        arg.get_action(),
        clap::ArgAction::SetTrue | clap::ArgAction::SetFalse
    )
}

/// [`Declared::words`]'s default: each flag given a value, in the order
/// declared: a switch alone, a repeated flag once per item, a list joined
/// by its delimiter, else `--flag=value`; each value a plain word or quoted.
pub fn words_from_serde<T: Declared>(value: &T) -> Vec<String> {
    let map = to_map(value);
    let mut out = Vec::new();
    for arg in flags::<T>() {
        let (Some(long), Some(v)) = (arg.get_long(), map.get(arg.get_id().as_str())) else {
            continue;
        };
        match v {
            serde_json::Value::Bool(set) => {
                if *set {
                    out.push(format!("--{long}"));
                }
            }
            serde_json::Value::Array(items) => match arg.get_value_delimiter() {
                Some(d) if !items.is_empty() => {
                    let joined = items.iter().map(word_of).collect::<Vec<_>>();
                    out.push(format!(
                        "--{long}={}",
                        arg_word(&joined.join(&d.to_string()))
                    ));
                }
                _ => {
                    for item in items {
                        out.push(format!("--{long}"));
                        out.push(arg_word(&word_of(item)));
                    }
                }
            },
            serde_json::Value::Null => {}
            other => out.push(format!("--{long}={}", arg_word(&word_of(other)))),
        }
    }
    out
}

/// Whether a value is absent in the serde form: for
/// `skip_serializing_if` on a flag.
pub fn is_false(set: &bool) -> bool {
    !*set
}

/// `text` as one word of a command line: as it is when a plain word of up
/// to 40 bytes, else bounded and quoted (a damaged journal's bytes are
/// never printed as written).
pub fn arg_word(text: &str) -> String {
    let plain = (1..=40).contains(&text.len())
        && (text.bytes()).all(|b| b.is_ascii_alphanumeric() || b".,:/%-_=".contains(&b));
    match plain {
        true => text.to_string(),
        false => crate::input::quote(text),
    }
}
