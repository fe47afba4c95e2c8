//! Per-CPU interrupt and softirq counts, to attribute noise.
//!
//! `/proc/interrupts` and `/proc/softirqs` are read before and after a run
//! (never inside a measuring loop); the per-CPU deltas show which
//! interrupts still reached a measured CPU. Parsing is a pure function of
//! the file's text.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Counts of one file: source name → (per-CPU counts, description).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counts {
    /// CPU numbers of the columns, from the header (`CPU0 CPU1 ...`).
    pub cpus: Vec<u32>,
    /// Source (`0`, `LOC`, `TIMER`, ...) → its row.
    pub rows: BTreeMap<String, Row>,
}

/// One row of /proc/interrupts or /proc/softirqs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Row {
    /// Count per column of [`Counts::cpus`] (short rows like `ERR:` have fewer).
    pub counts: Vec<u64>,
    /// The rest of the line: chip, hwirq, handler names (may be empty).
    pub description: String,
}

/// A non-zero change of one source on one CPU over a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delta {
    /// Source name (`LOC`, `RES`, `24`, `TIMER`, ...).
    pub source: String,
    /// How many more than at the start.
    pub count: u64,
    /// Description from the file (e.g. `Local timer interrupts`).
    #[serde(default)]
    pub description: String,
}

/// Parses /proc/interrupts or /proc/softirqs.
pub fn parse(text: &str) -> Counts {
    let (cpus, lines) = crate::sys::procfs::parse_interrupts(text);
    let rows = lines
        .into_iter()
        .map(|l| {
            let row = Row {
                counts: l.counts,
                description: l
                    .description
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" "),
            };
            (l.label, row)
        })
        .collect();
    Counts { cpus, rows }
}

/// Non-zero per-source increases on `cpu` from `before` to `after`,
/// largest first. Sources that appeared during the run count from zero.
pub fn deltas(before: &Counts, after: &Counts, cpu: u32) -> Vec<Delta> {
    let col = |c: &Counts| c.cpus.iter().position(|&x| x == cpu);
    let (Some(ca), Some(cb)) = (col(after), col(before)) else {
        return Vec::new();
    };
    let mut out: Vec<Delta> = after
        .rows
        .iter()
        .filter_map(|(name, row)| {
            let now = *row.counts.get(ca)?;
            let then = before
                .rows
                .get(name)
                .and_then(|r| r.counts.get(cb).copied())
                .unwrap_or(0);
            let count = now.saturating_sub(then);
            (count > 0).then(|| Delta {
                source: name.clone(),
                count,
                description: row.description.clone(),
            })
        })
        .collect();
    out.sort_by(|a, b| b.count.cmp(&a.count).then(a.source.cmp(&b.source)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/proc/interrupts` of two CPUs; between the two readings of the
    /// tests IRQ 24 fires 3 times on CPU 1 and the local timer 100 and 500 times.
    fn table(irq24_cpu1: u64, loc: [u64; 2]) -> String {
        format!(
            "           CPU0       CPU1       \n  \
  0:         25          0   IO-APIC   2-edge      timer\n \
 24:          1 {irq24_cpu1:>10}  IO-APIC   5-edge      ACPI:Ged\n\
LOC: {:>10} {:>10}   Local timer interrupts\n\
RES:         10         20   Rescheduling interrupts\n\
ERR:          0\n",
            loc[0], loc[1]
        )
    }

    fn before() -> String {
        table(0, [1000, 2000])
    }

    fn after() -> String {
        table(3, [1100, 2500])
    }

    #[test]
    fn parses_interrupts() {
        let c = parse(&before());
        assert_eq!(c.cpus, vec![0, 1]);
        assert_eq!(c.rows["LOC"].counts, vec![1000, 2000]);
        assert_eq!(c.rows["LOC"].description, "Local timer interrupts");
        assert_eq!(c.rows["24"].description, "IO-APIC 5-edge ACPI:Ged");
        assert_eq!(c.rows["ERR"].counts, vec![0]);
    }

    #[test]
    fn deltas_per_cpu_largest_first() {
        let d = deltas(&parse(&before()), &parse(&after()), 1);
        let names: Vec<_> = d.iter().map(|d| (d.source.as_str(), d.count)).collect();
        assert_eq!(names, vec![("LOC", 500), ("24", 3)]);
        let d0 = deltas(&parse(&before()), &parse(&after()), 0);
        assert_eq!(d0.len(), 1);
        assert!(deltas(&parse(&before()), &parse(&after()), 7).is_empty());
    }

    #[test]
    fn parses_softirqs() {
        let text = "                    CPU0       CPU1       \n          HI:          0          0\n       TIMER:       7203       8232\n";
        let c = parse(text);
        assert_eq!(c.rows["TIMER"].counts, vec![7203, 8232]);
        assert_eq!(c.rows["TIMER"].description, "");
    }
}
