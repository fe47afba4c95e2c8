//! The cgroups' options: `--balance` (config key `balance`), how the
//! scheduler balances load on the shielded CPUs, and `--kubernetes`
//! (`kubernetes`), that this must be a Kubernetes node, and `--set`
//! (`sets`), the named sets within the shield ([`super::sets`]).

use serde::{Deserialize, Serialize};

/// How the scheduler balances load on the shielded CPUs.
#[derive(clap::ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Balance {
    /// Not at all: each task stays on the CPU it was placed on (an
    /// `isolated` partition on cgroup v2; on v1 the shield's cpuset with
    /// `sched_load_balance` 0). One real-time thread per CPU.
    #[default]
    Off,
    /// Among the shielded CPUs only (a `root` partition on cgroup v2; on
    /// v1 the shield's cpuset with `sched_load_balance` 1): a
    /// multi-threaded real-time application on a shared set, as tuned's
    /// `isolated_cores` beside `no_balance_cores`. Nothing else runs there.
    Within,
}

impl Balance {
    /// The cgroup v2 partition type that gives it.
    pub fn partition(self) -> &'static str {
        match self {
            Balance::Off => "isolated",
            Balance::Within => "root",
        }
    }

    /// The v1 shield cpuset's `cpuset.sched_load_balance` that gives it.
    pub fn v1_load_balance(self) -> &'static str {
        match self {
            Balance::Off => "0",
            Balance::Within => "1",
        }
    }
}

impl std::fmt::Display for Balance {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(match self {
            Balance::Off => "off",
            Balance::Within => "within",
        })
    }
}

/// Its option, as `on` and the config file take it.
#[derive(clap::Args, Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[group(skip)]
pub struct Options {
    /// How the scheduler balances load on the shielded CPUs: off (each
    /// task stays where it is placed: one real-time thread per CPU) or
    /// within (among the shielded CPUs only: a multi-threaded real-time
    /// application on a shared set, like tuned's isolated_cores beside
    /// no_balance_cores). Nothing from outside runs there either way.
    #[arg(long, value_name = "MODE", default_value = "off")]
    #[serde(default, skip_serializing_if = "is_off")]
    pub balance: Balance,
    /// Require the Kubernetes mode, which a node where kubelet runs gets
    /// anyway: the shielded CPUs are those kubelet's static CPU manager does
    /// not reserve (reservedSystemCPUs), system.slice, user.slice and
    /// init.scope are confined to the reserved ones, and kubelet's pod
    /// cgroups are left to it. With this flag a machine where no kubelet
    /// is found is refused.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "crate::shield::options::is_false")]
    pub kubernetes: bool,
    /// A named set of the shielded CPUs, NAME=CPUS (repeat it: --set
    /// app1=2-3 --set app2=4-5), as cset's sets: each its own cpuset inside
    /// the shield, whose tasks the kernel keeps on its CPUs; run --set NAME
    /// places a task in one, off --set NAME takes one away with its CPUs
    /// and leaves the others. With sets every shielded CPU is in one.
    #[arg(long = "set", id = "sets", value_name = "NAME=CPUS", value_parser = super::sets::parse)]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sets: Vec<super::sets::NamedSet>,
}

fn is_off(balance: &Balance) -> bool {
    *balance == Balance::Off
}

impl crate::shield::options::Declared for Options {
    const EXAMPLES: &'static [(&'static str, &'static str)] =
        &[("balance", "\"within\""), ("kubernetes", "true"), ("sets", "[\"app1=2-3\", \"app2=4-5\"]")];
}

/// The balance `req` asks for.
pub(super) fn asked(req: &crate::shield::request::Request) -> Balance {
    req.declared::<Options>().unwrap_or_default().balance
}

/// Whether `req` requires the Kubernetes mode.
pub(super) fn kubernetes_required(req: &crate::shield::request::Request) -> bool {
    req.declared::<Options>().unwrap_or_default().kubernetes
}

/// The named sets `req` asks for.
pub fn sets(req: &crate::shield::request::Request) -> Vec<super::sets::NamedSet> {
    req.declared::<Options>().unwrap_or_default().sets
}

/// The request that takes set `name` away from the shield's request `req`,
/// with its CPUs (`off --set NAME`); `None` when it is the shield's last
/// set (all of it goes: `off`).
pub fn without(req: &crate::shield::request::Request, name: &str) -> Result<Option<crate::shield::request::Request>, String> {
    let mut options = req.declared::<Options>()?;
    let Some(i) = options.sets.iter().position(|s| s.name == name) else {
        let names: Vec<String> = options.sets.iter().map(|s| s.name.clone()).collect();
        return Err(match names.is_empty() {
            true => format!("--set {name}: the shield has no named sets; 'cpushield off' takes it all away"),
            false => format!("--set {name}: the shield has no set {name} (its sets: {})", names.join(", ")),
        });
    };
    let gone = options.sets.remove(i);
    if options.sets.is_empty() {
        return Ok(None);
    }
    let mut out = req.clone().with_declared(&options);
    out.cpus = req.cpus.difference(&gone.cpus);
    Ok(Some(out))
}
