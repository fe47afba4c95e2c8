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
}

impl crate::shield::options::Declared for Options {
    const EXAMPLES: &'static [(&'static str, &'static str)] =
        &[("irqs", r#"["eth0-TxRx-0", "45"]"#)];
}

/// The IRQs `req` asks to bind to the shield.
pub(super) fn asked(req: &crate::shield::request::Request) -> Vec<String> {
    req.declared::<Options>().unwrap_or_default().irqs
}
