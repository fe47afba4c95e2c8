//! The IRQs as `/proc/irq` and `/proc/interrupts` show them: what the
//! audit reads and the IRQ component of the shield plans from.

use serde::{Deserialize, Serialize};

use super::procfs;
use super::{ErrorKind, Sys, SysError};
use crate::cpulist::CpuSet;

/// The affinity file of IRQ `irq` (`proc/irq/N/smp_affinity_list`),
/// relative to the root.
pub fn irq_affinity_file(irq: u32) -> String {
    format!("proc/irq/{irq}/smp_affinity_list")
}

/// The IRQ whose affinity file `path` is, relative to the root or
/// absolute (as reports name targets); `None` for any other path.
pub fn irq_of_affinity_file(path: &str) -> Option<u32> {
    path.trim_start_matches('/')
        .strip_prefix("proc/irq/")?
        .strip_suffix("/smp_affinity_list")?
        .parse()
        .ok()
}

/// The default affinity of new IRQs.
pub const DEFAULT_IRQ_AFFINITY: &str = "proc/irq/default_smp_affinity";

/// One IRQ as `/proc/irq/N` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Irq {
    /// IRQ number.
    pub irq: u32,
    /// Device name from `/proc/interrupts` (empty when it has no line there).
    pub name: String,
    /// `smp_affinity_list`.
    pub affinity: CpuSet,
    /// `effective_affinity_list`, when the kernel has it.
    pub effective: Option<CpuSet>,
}

/// Reads every IRQ directory under `/proc/irq`, named from `/proc/interrupts`.
pub fn read(sys: &Sys) -> Result<Vec<Irq>, SysError> {
    let names: std::collections::HashMap<u32, String> = match sys.read("proc/interrupts") {
        Ok(text) => procfs::parse_interrupts(&text)
            .1
            .into_iter()
            .filter_map(|l| {
                Some((
                    l.label.parse().ok()?,
                    procfs::irq_device_name(&l.description),
                ))
            })
            .collect(),
        Err(_) => Default::default(),
    };
    let mut irqs = Vec::new();
    let entries = match sys.list("proc/irq") {
        Ok(e) => e,
        Err(e) if e.kind == ErrorKind::NotFound => return Ok(irqs),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let Ok(irq) = entry.parse::<u32>() else {
            continue;
        };
        let affinity = match sys.read_cpulist(&irq_affinity_file(irq)) {
            Ok(a) => a,
            Err(e) if e.kind == ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let effective = sys
            .read_cpulist(&format!("proc/irq/{irq}/effective_affinity_list"))
            .ok();
        irqs.push(Irq {
            irq,
            name: names.get(&irq).cloned().unwrap_or_default(),
            affinity,
            effective,
        });
    }
    irqs.sort_by_key(|i| i.irq);
    Ok(irqs)
}
