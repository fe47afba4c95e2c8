//! `measure --explain`'s findings for people: the causes over all slow
//! samples, then the slowest samples' chains.

use std::fmt::Write;

use crate::measure::explain::{Chain, Explained};

use super::table::align;

fn us(ns: u64) -> String {
    if ns >= 10_000 {
        format!("{} µs", (ns + 500) / 1000)
    } else {
        format!("{:.1} µs", ns as f64 / 1000.0)
    }
}

/// `312 µs on CPU 3: timer delivery (idle exit) 40 µs, IRQ 45 nvme0q3 180 µs, ...`
pub fn chain_line(c: &Chain) -> String {
    let parts: Vec<String> = c
        .pieces
        .iter()
        .map(|p| format!("{} {}", p.label, us(p.ns)))
        .collect();
    format!(
        "{} on CPU {}: {}",
        us(c.latency_ns),
        c.cpu,
        parts.join(", ")
    )
}

/// How many causes and chains a report shows.
const SHOWN: usize = 8;

/// The explanation of one probe's slow samples.
pub fn explained(out: &mut String, e: &Explained) {
    let _ = writeln!(
        out,
        "  explained: {} of {} samples over {} ({} events traced, {} lost{})",
        e.explained,
        e.over_threshold,
        us(e.threshold_ns),
        e.events,
        e.lost_events,
        if e.not_queued > 0 {
            format!(", {} came too fast to queue", e.not_queued)
        } else {
            String::new()
        }
    );
    if let Some(c) = &e.cleaned {
        let _ = writeln!(out, "  note: {c}");
    }
    if !e.missing_events.is_empty() {
        let _ = writeln!(
            out,
            "  note: this kernel has no {} (not traced)",
            e.missing_events.join(", ")
        );
    }
    if e.causes.is_empty() {
        return;
    }
    let header: Vec<String> = ["cause", "main in", "in", "total", "max", ""]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let rows: Vec<Vec<String>> = e
        .causes
        .iter()
        .take(SHOWN)
        .map(|c| {
            vec![
                c.cause.clone(),
                c.main_in.to_string(),
                c.samples.to_string(),
                us(c.total_ns),
                us(c.max_ns),
                if c.path {
                    "(every wake-up's path)".into()
                } else {
                    String::new()
                },
            ]
        })
        .collect();
    for line in align(&header, &rows).lines() {
        let _ = writeln!(out, "  {}", line.trim_end());
    }
    if e.causes.len() > SHOWN {
        let _ = writeln!(out, "  ... {} more causes (--json)", e.causes.len() - SHOWN);
    }
    let _ = writeln!(out, "  slowest samples:");
    for c in e.worst.iter().take(SHOWN) {
        let _ = writeln!(out, "    {}", chain_line(c));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::explain::{Cause, Piece};

    #[test]
    fn a_chain_reads_as_one_line_in_time_order() {
        let piece = |cause: Cause, ns| Piece {
            label: cause.to_string(),
            cause,
            ns,
        };
        let c = Chain {
            cpu: 3,
            latency_ns: 312_000,
            deadline_ns: 1,
            pieces: vec![
                piece(Cause::TimerDelivery { busy: None }, 40_000),
                piece(
                    Cause::Irq {
                        irq: 45,
                        name: "nvme0q3".into(),
                    },
                    180_000,
                ),
                piece(Cause::Return, 2_400),
            ],
            trace: vec![],
        };
        assert_eq!(
            chain_line(&c),
            "312 µs on CPU 3: timer delivery (idle exit) 40 µs, IRQ 45 nvme0q3 180 µs, return to user 2.4 µs"
        );
    }
}
