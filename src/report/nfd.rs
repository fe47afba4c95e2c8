//! node-feature-discovery's local feature file (`metrics --nfd DIR`): the
//! shield as node labels a scheduler can select on, read back like
//! `status`. nfd-worker (v0.14 and later) reads every file of
//! `/etc/kubernetes/node-feature-discovery/features.d/`, one `name=value`
//! a line, and labels the node `feature.node.kubernetes.io/NAME=VALUE`.
//!
//! The file expires ([`EXPIRY`] after it was written, its `# +expiry-time`
//! directive): labels from a cpushield that stopped refreshing them
//! (its timer runs every minute) go away rather than lie.

use std::time::{Duration, SystemTime};

use crate::fleet::MachineStatus;

/// How long the labels hold after the file was written.
pub const EXPIRY: Duration = Duration::from_secs(600);

/// The file's name in the features directory.
pub const FILE: &str = "cpushield";

/// The longest label value Kubernetes takes.
const VALUE_MAX: usize = 63;

/// The feature file for `status`, written at `now`.
pub fn features(status: &MachineStatus, now: SystemTime) -> String {
    let s = &status.shield;
    let expiry = humantime::format_rfc3339_seconds(now + EXPIRY);
    let mut out = format!(
        "# cpushield's shield, read back like `cpushield status`\n# +expiry-time={expiry}\n"
    );
    let mut label =
        |name: &str, value: String| out.push_str(&format!("cpushield-{name}={value}\n"));
    let active = s.shield.as_ref().filter(|_| s.complete);
    label("shield", active.is_some().to_string());
    if let Some(cpus) = active {
        label("holds", s.holds.to_string());
        // kubelet's settings that cost the shield (`status`'s advice), so
        // that a real-time pod can keep off such nodes
        label("advice", (!s.advice.is_empty()).to_string());
        label("shielded-count", cpus.len().to_string());
        // A label value has no comma: `2-3,6` reads `2-3_6`.
        let list = cpus.to_string().replace(',', "_");
        if list.len() <= VALUE_MAX {
            label("shielded-cpus", list);
        }
    }
    if let Some(boot) = &status.boot {
        label("boot-pending", boot.reboot_pending.to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shield_reads_as_labels_kubernetes_takes_and_the_file_expires() {
        let shield = serde_json::json!({
            "online": "0-7", "mechanism": "cgroup v2", "shield": null,
            "housekeeping": null, "complete": true, "boot_isolated": null,
            "irqs_total": 30, "holds": true,
        });
        let mut status = crate::fleet::MachineStatus {
            shield: serde_json::from_value(shield).unwrap(),
            boot: None,
        };
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_000_000);
        let none = features(&status, at);
        assert!(
            none.contains("\n# +expiry-time=2026-11-30T01:03:20Z\n"),
            "{none}"
        );
        assert!(none.contains("\ncpushield-shield=false\n"), "{none}");
        assert!(!none.contains("holds"), "no shield, no more: {none}");
        status.shield.shield = crate::cpulist::CpuSet::parse_list("2-3,6").ok();
        status.shield.complete = true;
        status.shield.holds = false;
        status.shield.advice = vec![crate::finding::Finding::new(
            "kubelet",
            crate::finding::Severity::Warn,
            30,
            "kubelet's strict-cpu-reservation is off",
            "",
        )];
        let text = features(&status, at);
        for line in [
            "cpushield-shield=true",
            "cpushield-holds=false",
            "cpushield-advice=true",
            "cpushield-shielded-count=3",
            "cpushield-shielded-cpus=2-3_6",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in {text}");
        }
        // every label is a valid Kubernetes label value
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (_, value) = line.split_once('=').unwrap();
            assert!(value.len() <= VALUE_MAX, "{line}");
            assert!(
                value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)),
                "{line}"
            );
        }
    }
}
