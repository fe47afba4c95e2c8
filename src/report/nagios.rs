//! `verify --nagios` for the monitoring plugins (Nagios, Icinga, Sensu,
//! Zabbix's agent): one line of text and their exit codes. The line
//! carries the findings' reasons, which name what was read from the
//! machine, so it goes through [`crate::escape::nagios`]: no control
//! character and no `|`, which would start forged performance data.

use crate::fleet::VerifyReport;

/// The plugins' exit code for a warning.
pub const WARNING: u8 = 1;
/// The plugins' exit code for a critical state.
pub const CRITICAL: u8 = 2;
/// The plugins' exit code when the state cannot be told.
pub const UNKNOWN: u8 = 3;

/// The longest line printed (bytes of escaped text); a longer one is cut
/// and its length said.
const LINE_BYTES: usize = 400;

/// UNKNOWN, with why (the config or the machine could not be read).
pub fn unknown(why: &str) -> (u8, String) {
    (UNKNOWN, line(&format!("CPUSHIELD UNKNOWN - {why}")))
}

/// The exit code and line for `report`, the machine checked against
/// `config` (the config file's name).
pub fn verdict(report: &VerifyReport, config: &str) -> (u8, String) {
    let reasons = |findings: &[crate::finding::Finding]| {
        let all: Vec<&str> = findings.iter().map(|f| f.reason.as_str()).collect();
        all.join("; ")
    };
    let pending = report.boot.as_ref().is_some_and(|b| b.reboot_pending);
    let (code, text) = if !report.holds {
        (
            CRITICAL,
            format!(
                "CPUSHIELD CRITICAL - the shield is broken: {}",
                reasons(&report.broken)
            ),
        )
    } else if !report.matches {
        (
            WARNING,
            format!(
                "CPUSHIELD WARNING - the machine differs from {config}: {}",
                reasons(&report.differences)
            ),
        )
    } else if pending {
        (
            WARNING,
            "CPUSHIELD WARNING - the boot half takes effect at the next reboot".to_string(),
        )
    } else {
        (
            0,
            format!(
                "CPUSHIELD OK - the shield on CPUs {} holds and matches {config}",
                report.wanted
            ),
        )
    };
    (code, line(&text))
}

/// `text` escaped for the plugins and cut to [`LINE_BYTES`].
fn line(text: &str) -> String {
    crate::input::brief_to(&crate::escape::nagios(text), LINE_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpulist::CpuSet;
    use crate::finding::{Finding, Severity};

    #[test]
    fn a_reason_cannot_start_performance_data_or_a_second_line() {
        let broken = Finding::new(
            "tasks",
            Severity::Bad,
            50,
            "task 9 x|shield_ok=1;;\nOK is on the shield",
            "cpushield move 9 --out",
        );
        let report = VerifyReport {
            config: "/etc/cpushield/cpushield.toml".into(),
            wanted: CpuSet::parse_list("2-3").unwrap(),
            shield: CpuSet::parse_list("2-3").ok(),
            matches: true,
            holds: false,
            differences: Vec::new(),
            broken: vec![broken],
            boot: None,
        };
        let (code, line) = verdict(&report, "/etc/cpushield/cpushield.toml");
        assert_eq!(code, CRITICAL);
        assert!(!line.contains('|') && !line.contains('\n'), "{line}");
        assert!(line.contains("x\\x7cshield_ok=1;;\\nOK"), "{line}");
        let (code, line) = unknown("config: a|b");
        assert_eq!(
            (code, line.as_str()),
            (UNKNOWN, "CPUSHIELD UNKNOWN - config: a\\x7cb")
        );
    }
}
