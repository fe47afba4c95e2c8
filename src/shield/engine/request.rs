//! What the user asks of a shield: the input of the plan, recorded in the
//! journal's state so that `status`, `verify` and `apply` know it.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::options::arg_word;
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
    /// The options a component declares (its [`Declared`] struct), read
    /// from the request; an option of the wrong type (a damaged journal's)
    /// is an error naming it, not an option not given.
    pub fn declared<T: DeserializeOwned>(&self) -> Result<T, String> {
        let of = |keys: &mut dyn Iterator<Item = (&String, &serde_json::Value)>| {
            let map = keys.map(|(k, v)| (k.clone(), v.clone())).collect();
            serde_json::from_value::<T>(serde_json::Value::Object(map))
        };
        of(&mut self.options.iter()).map_err(|e| {
            // The option at fault, tried alone.
            let bad = (self.options.iter()).find(|kv| of(&mut std::iter::once(*kv)).is_err());
            match bad {
                Some((key, _)) => format!("the request's option {}: {e}", arg_word(key)),
                None => format!("the request's options: {e}"),
            }
        })
    }

    /// The request with the options of `declared` as given there: every
    /// key the struct declares is replaced (left out when not given).
    pub fn with_declared<T: clap::Args + Serialize>(mut self, declared: &T) -> Request {
        for arg in super::options::flags::<T>() {
            self.options.remove(arg.get_id().as_str());
        }
        self.options.extend(super::options::to_map(declared));
        self
    }

    /// The `cpushield on` command line that makes this request, its
    /// options in the `words` their declarations give.
    pub fn command_line_with(&self, words: &[String]) -> String {
        let mut out = format!("cpushield on {}", self.cpus);
        for word in words {
            out.push(' ');
            out.push_str(word);
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

#[cfg(test)]
mod tests {
    use super::super::options::{is_false, Declared};
    use super::*;

    /// Options as a component declares them.
    #[derive(clap::Args, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    #[group(skip)]
    struct Sample {
        /// A bound.
        #[arg(long)]
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bound: Option<u32>,
        /// A switch.
        #[arg(long)]
        #[serde(default, skip_serializing_if = "is_false")]
        restart: bool,
        /// Names, repeated.
        #[arg(long = "name")]
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        names: Vec<String>,
        /// Knobs, a list.
        #[arg(long, value_delimiter = ',')]
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        knobs: Vec<String>,
    }

    impl Declared for Sample {
        const EXAMPLES: &'static [(&'static str, &'static str)] = &[];
    }

    fn line(req: &Request) -> String {
        req.command_line_with(&req.declared::<Sample>().unwrap().words())
    }

    #[test]
    fn a_components_option_sits_at_the_top_of_the_request_as_the_field_it_was() {
        let given = Sample {
            bound: Some(10),
            ..Default::default()
        };
        let req = Request {
            cpus: CpuSet::parse_list("2-3").unwrap(),
            ..Default::default()
        }
        .with_declared(&given);
        let json = serde_json::to_value(&req).unwrap();
        assert_eq!(json["bound"], 10, "{json}");
        assert!(
            json.get("restart").is_none(),
            "a switch not set is left out: {json}"
        );
        // As a journal of an older cpushield wrote it, field and all.
        let back: Request = serde_json::from_value(json).unwrap();
        assert_eq!(back, req);
        assert_eq!(back.declared::<Sample>().unwrap(), given);
        assert_eq!(line(&back), "cpushield on 2-3 --bound=10");
        let none = back.with_declared(&Sample::default());
        assert!(none.options.is_empty());
    }

    #[test]
    fn the_fields_an_older_journal_wrote_are_options_and_a_wrong_type_is_named() {
        let json = serde_json::json!({
            "cpus": "2-3", "names": [], "force": true, "allow_split_siblings": false,
            "knobs": ["b", "a"], "restart": false, "bound": 80, "other": 4,
        });
        let req: Request = serde_json::from_value(json).unwrap();
        let s = req.declared::<Sample>().unwrap();
        assert_eq!((s.bound, s.restart, s.knobs.len()), (Some(80), false, 2));
        assert_eq!(
            line(&req),
            "cpushield on 2-3 --bound=80 --knobs=b,a --force"
        );
        let restart = req.with_declared(&Sample {
            restart: true,
            names: vec!["eth0".into(), "25".into()],
            ..s
        });
        assert_eq!(
            line(&restart),
            "cpushield on 2-3 --bound=80 --restart --name eth0 --name 25 --knobs=b,a --force"
        );
        let compared = restart.declared::<Sample>().unwrap().compared();
        assert_eq!(
            compared,
            [
                ("bound".to_string(), "80".to_string()),
                ("restart".into(), "true".into()),
                ("names".into(), "25, eth0".into()),
                ("knobs".into(), "a, b".into()),
            ]
        );
        let damaged: Request = serde_json::from_value(serde_json::json!({
            "cpus": "2", "force": false, "allow_split_siblings": false, "bound": "ten",
        }))
        .unwrap();
        let e = damaged.declared::<Sample>().unwrap_err();
        assert!(e.starts_with("the request's option bound: "), "{e}");
    }

    #[test]
    fn a_damaged_option_never_reaches_the_command_line_as_it_was_written() {
        let json = serde_json::json!({
            "cpus": "3", "force": false, "allow_split_siblings": false,
            "bad\nkey": 1, "names": ["a\u{1b}[2Jb; rm -rf /"], "knobs": ["x".repeat(5000)],
        });
        let req: Request = serde_json::from_value(json).unwrap();
        let line = line(&req);
        assert!(!line.contains("bad"), "{line}");
        assert!(!line.contains('\u{1b}') && !line.contains('\n'), "{line}");
        assert!(line.contains("--name \"a\\u{1b}[2Jb; rm -rf /\""), "{line}");
        assert!(line.len() < 300, "{} bytes", line.len());
    }
}
