//! What the shield plans for the IRQs: the writes of their affinities,
//! and the IRQs `--irq` names.

use super::*;

/// The IRQ writes, in IRQ order, each marked whether it binds an IRQ to
/// the shield (`--irq`): the default affinity and every IRQ allowed on the
/// shield go to the housekeeping CPUs. Those bound to the shield get its
/// CPUs `over` (all of them unless `--irq-cpus` says which), or with
/// `spread` one of those each, in turn.
pub(in crate::shield) fn plan(
    (irqs, default_affinity, mask_bits): (&[Irq], Option<&CpuSet>, u32),
    (shield, housekeeping): (&CpuSet, &CpuSet),
    irqs_to_shield: &[u32],
    (spread, over): (bool, &CpuSet),
) -> Vec<(bool, Step)> {
    let shield_cpus: Vec<u32> = over.iter().collect();
    let mut bound = 0;
    let mut irq_steps = Vec::new();
    if let Some(default) = default_affinity {
        let target = default.away_from(shield, housekeeping);
        if &target != default {
            irq_steps.push((
                false,
                Step::fatal(
                    OWNER,
                    Action::Write {
                        path: DEFAULT_IRQ_AFFINITY.into(),
                        value: target.to_mask(mask_bits),
                        check: Check::CpuMask,
                        undo: Undo::Previous,
                    },
                ),
            ));
        }
    }
    for irq in irqs {
        let to_shield = irqs_to_shield.contains(&irq.irq);
        let target = if to_shield && spread && !shield_cpus.is_empty() {
            bound += 1;
            CpuSet::from_iter([shield_cpus[(bound - 1) % shield_cpus.len()]])
        } else if to_shield {
            over.clone()
        } else {
            irq.affinity.away_from(shield, housekeeping)
        };
        if target != irq.affinity {
            irq_steps.push((
                to_shield,
                Step::optional(
                    OWNER,
                    Action::Write {
                        path: irq_affinity_file(irq.irq),
                        value: target.to_string(),
                        check: Check::CpuList,
                        undo: Undo::Previous,
                    },
                )
                .on_irq(irq.irq),
            ));
        }
    }
    irq_steps
}

/// Resolves `--irq` arguments (numbers, or device names as in /proc/interrupts).
pub(in crate::shield) fn resolve(irqs: &[Irq], wanted: &[String]) -> Result<Vec<u32>, PlanError> {
    let mut out = Vec::new();
    for w in wanted {
        let hits: Vec<u32> = match w.parse::<u32>() {
            Ok(n) => irqs.iter().filter(|i| i.irq == n).map(|i| i.irq).collect(),
            Err(_) => irqs
                .iter()
                .filter(|i| i.name == *w)
                .map(|i| i.irq)
                .collect(),
        };
        if hits.is_empty() {
            return Err(unknown_irq(w));
        }
        out.extend(hits);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

