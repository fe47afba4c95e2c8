//! What the user asks of a shield: the input of the plan, recorded in the
//! journal's state so that `status`, `verify` and `apply` know it.

use crate::sys::resctrl::Bandwidth;
use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;

/// What the user asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// CPUs to shield.
    pub cpus: CpuSet,
    /// IRQs (numbers or names as in /proc/interrupts) to bind to the shield.
    pub irqs: Vec<String>,
    /// Move tasks whose own affinity lies wholly inside the shield.
    pub force: bool,
    /// Allow shielding one hyper-thread sibling but not the other.
    pub allow_split_siblings: bool,
    /// Tuning knobs to apply (`--tune`: `all` or knob names, see [`crate::shield::knobs`]).
    #[serde(default)]
    pub tune: Vec<String>,
    /// Take each shielded CPU offline and online again (CPU hotplug) before
    /// the cpusets are created, to push per-CPU timers and work off it.
    #[serde(default)]
    pub hotplug_restart: bool,
    /// The boot half (config key `boot`): `None` none; `Some(extra)` the
    /// boot options for these CPUs plus `extra` ones (the boot half's module).
    /// Not part of `on`: `apply` writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot: Option<Vec<String>>,
    /// The starvation guard (`--guard`, config key `guard`).
    #[serde(default)]
    pub guard: crate::guard::GuardRequest,
    /// Raise the shielded CPUs' softirq, timer and RCU threads above this
    /// real-time priority (`--kthreads-above`, see [`crate::shield::rt_kthreads`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kthreads_above: Option<u32>,
    /// Ways of each L3 cache the shield sits in, for the shielded CPUs
    /// alone (`--cache-ways`, config key `cache_ways`; resctrl's CAT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_ways: Option<u32>,
    /// The memory bandwidth left to everything outside the shield, a
    /// percentage or a rate (`--others-bandwidth`, config key
    /// `others_bandwidth`; a number is a percentage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub others_bandwidth: Option<Bandwidth>,
    /// Keep the shielded CPUs out of idle states whose exit latency is
    /// over this many µs (`--max-idle-latency`, config key
    /// `max_idle_latency`; see [`crate::shield::idle_states`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_idle_latency: Option<u32>,
}

impl Request {
    /// The request, its cache share checked for what needs no machine:
    /// ways from 1 to 64, a bandwidth from 1 to 100 percent and only with
    /// ways. The error names the option.
    pub fn with_cache_checked(self) -> Result<Request, String> {
        if let Some(ways) = self.cache_ways.filter(|w| !(1..=64).contains(w)) {
            return Err(format!(
                "--cache-ways {ways}: must be 1 to 64 (ways of the L3 cache)"
            ));
        }
        match (self.others_bandwidth, self.cache_ways) {
            (Some(Bandwidth::Percent(bw)), _) if !(1..=100).contains(&bw) => Err(format!(
                "--others-bandwidth {bw}: must be 1 to 100 (percent of the memory bandwidth), \
                 or a rate (6GB/s, 4000MiB/s) where the machine takes one"
            )),
            (Some(_), None) => Err("--others-bandwidth needs --cache-ways".into()),
            _ => Ok(self),
        }
    }

    /// The `cpushield on` command line that makes this request.
    pub fn command_line(&self) -> String {
        let mut out = format!("cpushield on {}", self.cpus);
        for irq in &self.irqs {
            out.push_str(&format!(" --irq {irq}"));
        }
        if !self.tune.is_empty() {
            out.push_str(&format!(" --tune={}", self.tune.join(",")));
        }
        if self.guard.mode != crate::guard::GuardMode::Auto {
            out.push_str(&format!(" --guard={}", self.guard.mode));
        }
        if let Some(above) = self.kthreads_above {
            out.push_str(&format!(" --kthreads-above={above}"));
        }
        if let Some(ways) = self.cache_ways {
            out.push_str(&format!(" --cache-ways={ways}"));
        }
        if let Some(bw) = self.others_bandwidth {
            out.push_str(&format!(" --others-bandwidth={bw}"));
        }
        if let Some(us) = self.max_idle_latency {
            out.push_str(&format!(" --max-idle-latency={us}us"));
        }
        let defaults = crate::guard::Settings::default();
        if self.guard.settings != defaults {
            let default_args = defaults.args();
            for arg in self.guard.settings.args() {
                if !default_args.contains(&arg) {
                    out.push(' ');
                    out.push_str(&arg);
                }
            }
        }
        for (set, flag) in [
            (self.hotplug_restart, " --hotplug-restart"),
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
