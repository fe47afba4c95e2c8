//! The IRQs' option: `--irq`, repeated (config key `irqs`).

use serde::{Deserialize, Serialize};

/// Its option, as `on` and the config file take it.
#[derive(clap::Args, Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[group(skip)]
pub struct Options {
    /// IRQ to bind to the shield (number, or name as in /proc/interrupts); repeatable.
    #[arg(long = "irq", value_name = "IRQ")]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub irqs: Vec<String>,
    /// Spread the IRQs bound with --irq over the shielded CPUs, one CPU
    /// each in turn in IRQ order (tuna's --spread: a NIC queue per CPU),
    /// rather than each allowed on every shielded CPU.
    #[arg(long = "irq-spread", requires = "irqs")]
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub irq_spread: bool,
    /// The shielded CPUs the IRQs bound with --irq go to, and --irq-spread
    /// spreads them over (tuna's --cpus with --spread); all the shield's
    /// CPUs by default.
    #[arg(long = "irq-cpus", value_name = "CPUS", requires = "irqs")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irq_cpus: Option<crate::cpulist::CpuSet>,
}

impl crate::shield::options::Declared for Options {
    const EXAMPLES: &'static [(&'static str, &'static str)] =
        &[
            ("irqs", r#"["eth0-TxRx-0", "45"]"#),
            ("irq_spread", "true"),
            ("irq_cpus", r#""2-3""#),
        ];
}

/// The IRQs `req` asks to bind to the shield, and whether spread.
pub(super) fn asked(req: &crate::shield::request::Request) -> Options {
    req.declared::<Options>().unwrap_or_default()
}
