//! What the user asks of a shield: the input of the plan, recorded in the
//! journal's state so that `status`, `verify` and `apply` know it.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;

/// What the user asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// CPUs to shield.
    pub cpus: CpuSet,
    /// Move tasks whose own affinity lies wholly inside the shield.
    pub force: bool,
    /// Allow shielding one hyper-thread sibling but not the other.
    pub allow_split_siblings: bool,
    /// The boot half (config key `boot`): `None` none; `Some(extra)` the
    /// boot options for these CPUs plus `extra` ones (the boot half's module).
    /// Not part of `on`: `apply` writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot: Option<Vec<String>>,
    /// The options of the components that read their own, each under its
    /// config key (`max_idle_latency`: the idle states' bound in µs, ...),
    /// its `on` option the same words with dashes: the engine carries them
    /// without knowing them. In the journal they sit at the request's top
    /// level, as the fields they were.
    #[serde(flatten)]
    pub options: BTreeMap<String, serde_json::Value>,
}

impl Request {
    /// The option `key` a component reads, when given (and of its type).
    pub fn option<T: DeserializeOwned>(&self, key: &str) -> Option<T> {
        serde_json::from_value(self.options.get(key)?.clone()).ok()
    }

    /// The request with the option `key` (its config key) given `value`,
    /// or without it when `None`.
    pub fn with_option<T: Serialize>(mut self, key: &str, value: Option<T>) -> Request {
        match value.and_then(|v| serde_json::to_value(v).ok()) {
            Some(v) => self.options.insert(key.to_string(), v),
            None => self.options.remove(key),
        };
        self
    }

    /// Whether the flag option `key` is given and set.
    pub fn flag(&self, key: &str) -> bool {
        self.option::<bool>(key).unwrap_or(false)
    }

    /// The `cpushield on` command line that makes this request, each
    /// option in the words of its own (` --key=value` where `own` has none
    /// for it).
    pub fn command_line_with(
        &self,
        own: &dyn Fn(&str, &serde_json::Value) -> Option<String>,
    ) -> String {
        let mut out = format!("cpushield on {}", self.cpus);
        for (key, value) in &self.options {
            if let Some(arg) = own(key, value).or_else(|| option_arg(key, value)) {
                out.push_str(&arg);
            }
        }
        for (set, flag) in [
            (self.force, " --force"),
            (self.allow_split_siblings, " --allow-split-siblings"),
        ] {
            if set {
                out.push_str(flag);
            }
        }
        out
    }
}

/// `text` as one word of a command line: as it is when a plain word of up
/// to 40 bytes, else bounded and quoted (a damaged journal's bytes are
/// never printed as written).
pub fn arg_word(text: &str) -> String {
    let plain = (1..=40).contains(&text.len())
        && (text.bytes()).all(|b| b.is_ascii_alphanumeric() || b".,:/%-_".contains(&b));
    match plain {
        true => text.to_string(),
        false => crate::input::quote(text),
    }
}

/// ` --key-name=value` for the option `key`, its value bounded and quoted
/// where it is not a plain word; `None` for a key that is no option's
/// (a damaged journal's), which the command line must not carry.
fn option_arg(key: &str, value: &serde_json::Value) -> Option<String> {
    let is_key =
        (1..=40).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
    if !is_key {
        return None;
    }
    let flag = format!(" --{}", key.replace('_', "-"));
    let text = match value {
        // A flag: given when set, never `=true`.
        serde_json::Value::Bool(set) => return set.then_some(flag),
        serde_json::Value::String(s) => s.clone(),
        // A list (`--tune=a,b`): its words, none when empty.
        serde_json::Value::Array(items) if items.is_empty() => return None,
        serde_json::Value::Array(items) => (items.iter())
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
            .collect::<Vec<_>>()
            .join(","),
        other => other.to_string(),
    };
    Some(format!("{flag}={}", arg_word(&text)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command line with every option as ` --key=value`.
    fn generic(req: &Request) -> String {
        req.command_line_with(&|_, _| None)
    }

    #[test]
    fn a_components_option_sits_at_the_top_of_the_request_as_the_field_it_was() {
        let req = Request {
            cpus: CpuSet::parse_list("2-3").unwrap(),
            ..Default::default()
        }
        .with_option("max_idle_latency", Some(10u32));
        let json = serde_json::to_value(&req).unwrap();
        assert_eq!(json["max_idle_latency"], 10, "{json}");
        // As a journal of an older cpushield wrote it, field and all.
        let back: Request = serde_json::from_value(json).unwrap();
        assert_eq!(back, req);
        assert_eq!(back.option::<u32>("max_idle_latency"), Some(10));
        assert_eq!(back.option::<u32>("cache_ways"), None);
        assert_eq!(generic(&back), "cpushield on 2-3 --max-idle-latency=10");
        let none = back.with_option::<u32>("max_idle_latency", None);
        assert!(none.options.is_empty());
    }

    #[test]
    fn the_fields_an_older_journal_wrote_are_options_and_its_flags_flags() {
        let json = serde_json::json!({
            "cpus": "2-3", "irqs": [], "force": false, "allow_split_siblings": false,
            "tune": [], "hotplug_restart": false, "kthreads_above": 80,
            "cache_ways": 4, "others_bandwidth": 50,
        });
        let req: Request = serde_json::from_value(json).unwrap();
        assert!(!req.flag("hotplug_restart"));
        assert_eq!(req.option::<u32>("kthreads_above"), Some(80));
        assert_eq!(
            generic(&req),
            "cpushield on 2-3 --cache-ways=4 --kthreads-above=80 --others-bandwidth=50"
        );
        let restart = req.with_option("hotplug_restart", Some(true));
        assert!(restart.flag("hotplug_restart"));
        assert!(generic(&restart)
            .ends_with(" --hotplug-restart --kthreads-above=80 --others-bandwidth=50"));
    }

    #[test]
    fn a_damaged_option_never_reaches_the_command_line_as_it_was_written() {
        let json = serde_json::json!({
            "cpus": "3", "irqs": [], "force": false, "allow_split_siblings": false,
            "bad\nkey": 1, "note": "a\u{1b}[2Jb; rm -rf /", "long": "x".repeat(5000),
        });
        let req: Request = serde_json::from_value(json).unwrap();
        let line = generic(&req);
        assert!(!line.contains("bad"), "{line}");
        assert!(!line.contains('\u{1b}') && !line.contains('\n'), "{line}");
        assert!(line.contains("--note=\"a\\u{1b}[2Jb; rm -rf /\""), "{line}");
        assert!(line.len() < 300, "{} bytes", line.len());
    }
}
