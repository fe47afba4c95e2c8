//! System Management Interrupts: the firmware takes the CPU for each, the
//! kernel sees nothing (no interrupt counted, no thread ran: the clock
//! just jumps), and no shield keeps them off. Counted over the audit's
//! window by the processor's own counter (`MSR_SMI_COUNT`, Intel).

use super::facts::Facts;
use crate::finding::Findings;
use crate::finding::Severity;

/// The SMIs the audited CPUs took in the window, when they were counted.
pub fn findings(f: &Facts, out: &mut Findings) {
    if f.window_s <= 0.0 {
        return;
    }
    let taken: Vec<String> = (f.smis.counted.iter())
        .filter(|(_, n)| *n > 0)
        .map(|(cpu, n)| format!("CPU {cpu} {n}"))
        .collect();
    let (severity, reason, next) = if !taken.is_empty() {
        (
            Severity::Warn,
            format!(
                "System Management Interrupts in {:.0} s: {} (the firmware stopped the CPU for each; the kernel saw nothing)",
                f.window_s,
                taken.join(", ")
            ),
            "find the firmware's reason: BIOS settings for power and thermal management, USB legacy emulation, memory error reporting (the vendor's real-time or low-latency profile turns most off)".to_string(),
        )
    } else if f.smis.counted.is_empty() {
        let why = f.smis.unreadable.as_deref().unwrap_or("not read");
        (
            Severity::Ok,
            format!("SMIs not counted: {why}"),
            "modprobe msr, then audit again as root, to count them (Intel processors)".to_string(),
        )
    } else {
        (
            Severity::Ok,
            format!(
                "no System Management Interrupt on the CPUs in {:.0} s",
                f.window_s
            ),
            String::new(),
        )
    };
    out.add("smi", severity, 40, reason, next);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::facts::Smis;

    fn judged(smis: Smis, window_s: f64) -> Vec<crate::finding::Finding> {
        let f = Facts {
            window_s,
            smis,
            ..Facts::default()
        };
        let mut out = Findings::default();
        findings(&f, &mut out);
        out.0
    }

    #[test]
    fn smis_in_the_window_warn_and_none_or_unreadable_say_so() {
        let taken = judged(
            Smis {
                counted: vec![(2, 0), (3, 4)],
                unreadable: None,
            },
            5.0,
        );
        assert_eq!(taken[0].severity, Severity::Warn);
        assert!(
            taken[0].reason.contains("in 5 s: CPU 3 4 "),
            "{}",
            taken[0].reason
        );
        let none = judged(
            Smis {
                counted: vec![(2, 0)],
                unreadable: None,
            },
            5.0,
        );
        assert_eq!(none[0].severity, Severity::Ok);
        let unread = judged(
            Smis {
                counted: vec![],
                unreadable: Some("no /dev/cpu/N/msr".into()),
            },
            5.0,
        );
        assert!(unread[0].reason.contains("not counted: no /dev/cpu/N/msr"));
        assert!(judged(Smis::default(), 0.0).is_empty());
    }
}
