//! `verify --nagios` for the monitoring plugins (Nagios, Icinga, Sensu,
//! Zabbix's agent), and `verify --npd` for Kubernetes' node-problem-detector
//! (a custom plugin monitor): one line of text and each one's exit codes.
//! The line carries the findings' reasons, which name what was read from
//! the machine, so it goes through [`crate::escape::nagios`]: no control
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

/// What a monitor is told of the machine, worst first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    /// The shield is broken.
    Broken,
    /// The machine differs from its config.
    Differs,
    /// The boot half takes effect at the next reboot.
    Pending,
    /// It holds and matches, but another program's settings cost the
    /// shield (`status`'s advice: kubelet's).
    Advice,
    /// It holds and matches.
    Holds,
}

/// The level of `report`, the machine checked against `config` (the config
/// file's name), and what to say of it.
fn judge(report: &VerifyReport, config: &str) -> (Level, String) {
    let reasons = |findings: &[crate::finding::Finding]| {
        let all: Vec<&str> = findings.iter().map(|f| f.reason.as_str()).collect();
        all.join("; ")
    };
    let pending = report.boot.as_ref().is_some_and(|b| b.reboot_pending);
    if !report.holds {
        let why = reasons(&report.broken);
        (Level::Broken, format!("the shield is broken: {why}"))
    } else if !report.matches {
        let why = reasons(&report.differences);
        (
            Level::Differs,
            format!("the machine differs from {config}: {why}"),
        )
    } else if pending {
        let what = "the boot half takes effect at the next reboot";
        (Level::Pending, what.to_string())
    } else if !report.advice.is_empty() {
        let why = reasons(&report.advice);
        let cpus = &report.wanted;
        let what = format!("the shield on CPUs {cpus} holds and matches {config}, but: {why}");
        (Level::Advice, what)
    } else {
        let cpus = &report.wanted;
        let what = format!("the shield on CPUs {cpus} holds and matches {config}");
        (Level::Holds, what)
    }
}

/// The exit code and line for `report`, the machine checked against
/// `config` (the config file's name).
pub fn verdict(report: &VerifyReport, config: &str) -> (u8, String) {
    let (level, text) = judge(report, config);
    let (code, word) = match level {
        Level::Broken => (CRITICAL, "CRITICAL"),
        Level::Differs | Level::Pending | Level::Advice => (WARNING, "WARNING"),
        Level::Holds => (0, "OK"),
    };
    (code, line(&format!("CPUSHIELD {word} - {text}")))
}

/// node-problem-detector's exit code for a problem (`NonOK`: the
/// condition its rule names becomes true).
pub const NPD_PROBLEM: u8 = 1;
/// node-problem-detector's exit code when the state cannot be told.
pub const NPD_UNKNOWN: u8 = 2;

/// `verify --npd`: the exit code and line for node-problem-detector's
/// custom plugin monitor: 0 OK (holds and matches, or only the boot half
/// waits for a reboot, which is no broken node), 1 a problem (broken, or
/// differs from the config). The reason comes first, as the monitor keeps
/// only the start of the line (`max_output_length`, 80 bytes by default).
pub fn npd(report: &VerifyReport, config: &str) -> (u8, String) {
    let (level, text) = judge(report, config);
    let code = match level {
        Level::Broken | Level::Differs => NPD_PROBLEM,
        Level::Pending | Level::Advice | Level::Holds => 0,
    };
    (code, line(&text))
}

/// `verify --npd` when the config or the machine could not be read.
pub fn npd_unknown(why: &str) -> (u8, String) {
    (NPD_UNKNOWN, line(why))
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

    /// The shield on 2-3 that the config asks for, matching it, with
    /// what broke and the advice.
    fn report(broken: Vec<Finding>, advice: Vec<Finding>) -> VerifyReport {
        VerifyReport {
            config: "/etc/cpushield/cpushield.toml".into(),
            wanted: CpuSet::parse_list("2-3").unwrap(),
            shield: CpuSet::parse_list("2-3").ok(),
            matches: true,
            holds: broken.is_empty(),
            differences: Vec::new(),
            broken,
            advice,
            boot: None,
        }
    }

    #[test]
    fn a_reason_cannot_start_performance_data_or_a_second_line() {
        let broken = Finding::new(
            "tasks",
            Severity::Bad,
            50,
            "task 9 x|shield_ok=1;;\nOK is on the shield",
            "cpushield move 9 --out",
        );
        let report = report(vec![broken], Vec::new());
        let (code, line) = verdict(&report, "/etc/cpushield/cpushield.toml");
        assert_eq!(code, CRITICAL);
        assert!(!line.contains('|') && !line.contains('\n'), "{line}");
        assert!(line.contains("x\\x7cshield_ok=1;;\\nOK"), "{line}");
        let (code, npd_line) = npd(&report, "/etc/cpushield/cpushield.toml");
        assert_eq!(code, NPD_PROBLEM);
        assert!(
            npd_line.starts_with("the shield is broken: task 9 x\\x7c"),
            "{npd_line}"
        );
        let (code, line) = unknown("config: a|b");
        assert_eq!(
            (code, line.as_str()),
            (UNKNOWN, "CPUSHIELD UNKNOWN - config: a\\x7cb")
        );
    }

    #[test]
    fn a_shield_that_holds_beside_kubelets_costly_settings_warns_the_monitor_but_not_the_node() {
        let advice = Finding::new(
            "kubelet",
            Severity::Warn,
            30,
            "kubelet's strict-cpu-reservation is off",
            "change kubelet's configuration",
        );
        let mut report = report(Vec::new(), vec![advice]);
        let (code, line) = verdict(&report, "c.toml");
        assert_eq!(code, WARNING, "{line}");
        assert!(
            line.contains("holds and matches c.toml, but: kubelet's strict-cpu-reservation is off"),
            "{line}"
        );
        // No node condition: the shield holds.
        assert_eq!(npd(&report, "c.toml").0, 0);
        report.advice.clear();
        assert_eq!(verdict(&report, "c.toml").0, 0);
    }
}
