//! The guard's options: `--guard` and its settings (`--guard-*`), kept
//! in the request as one `guard` key.

use serde::{Deserialize, Serialize};

use crate::guard::{self, GuardMode, GuardRequest, Settings};

/// Its options, as `on` and the config file take them. The request keeps
/// them as one `guard` key (a [`GuardRequest`]), left out when all are
/// the defaults, as journals have since the guard came.
#[derive(clap::Args, Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[group(skip)]
#[serde(from = "Kept", into = "Kept")]
pub struct Options {
    /// The starvation guard: `auto` starts it where a real-time task that
    /// never sleeps can starve the shielded CPUs' kernel work (PREEMPT_RT;
    /// RT throttling off on a kernel without the fair server), `on` always,
    /// `off` never (the shield then warns where that work can starve).
    #[arg(long, value_name = "MODE", default_value = "auto", value_parser = clap::value_parser!(GuardMode))]
    pub guard: GuardMode,
    /// Its settings.
    #[command(flatten)]
    pub settings: guard::SettingsArgs,
}

/// [`Options`] as the request keeps them.
#[derive(Default, Serialize, Deserialize)]
struct Kept {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    guard: Option<GuardRequest>,
}

impl From<Kept> for Options {
    fn from(kept: Kept) -> Options {
        let asked = kept.guard.unwrap_or_default();
        Options {
            guard: asked.mode,
            settings: asked.settings.into(),
        }
    }
}

impl From<Options> for Kept {
    fn from(o: Options) -> Kept {
        let asked = o.request();
        Kept {
            guard: (asked != GuardRequest::default()).then_some(asked),
        }
    }
}

impl Options {
    /// What they ask of the guard.
    pub fn request(&self) -> GuardRequest {
        GuardRequest {
            mode: self.guard,
            settings: self.settings.settings(),
        }
    }
}

impl crate::shield::options::Declared for Options {
    const EXAMPLES: &'static [(&'static str, &'static str)] = &[
        ("guard", r#""auto""#),
        ("guard_engine", r#""auto""#),
        ("guard_threshold", r#""1s""#),
        ("guard_runtime", r#""50us""#),
        ("guard_period", r#""100ms""#),
        ("guard_duration", r#""1s""#),
    ];

    fn check(&self) -> Result<(), String> {
        self.settings.settings().check().map_err(|e| e.to_string())
    }

    /// The mode and each setting, in the units of the flags.
    fn compared(&self) -> Vec<(String, String)> {
        let s = self.settings;
        [
            ("guard", self.guard.to_string()),
            ("guard_threshold", format!("{} ms", s.guard_threshold)),
            ("guard_runtime", format!("{} µs", s.guard_runtime)),
            ("guard_period", format!("{} µs", s.guard_period)),
            ("guard_duration", format!("{} ms", s.guard_duration)),
            ("guard_engine", s.guard_engine.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// `--guard=MODE` unless `auto`, and each setting not the default.
    fn words(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.guard != GuardMode::Auto {
            out.push(format!("--guard={}", self.guard));
        }
        let default_args = Settings::default().args();
        let args = self.settings.settings().args();
        out.extend(args.into_iter().filter(|a| !default_args.contains(a)));
        out
    }
}
