//! tuned's active profile, read as tuned reads it: each profile named in
//! `/etc/tuned/active_profile`, then every profile its `include=` names,
//! depth first (the included profile's settings come first, the includer
//! overrides them). Each setting that pins CPUs or IRQs, or writes what a
//! cpushield knob writes, is named with the profile that sets it.

use crate::input::{brief, brief_to, read_file, FileError, CONFIG_LIMIT};
use crate::sys::Sys;

/// Where tuned looks for a profile, in its order: the administrator's
/// before the distribution's.
const PROFILE_DIRS: [&str; 4] = [
    "etc/tuned/profiles",
    "etc/tuned",
    "usr/lib/tuned/profiles",
    "usr/lib/tuned",
];

/// How deep an `include=` chain is followed (tuned's own profiles nest
/// three deep at most; a loop stops here too).
const MAX_DEPTH: usize = 8;

/// Settings (section, key) that pin CPUs or IRQs: tuned moves threads and
/// IRQs where they say whenever it re-applies the profile.
const PINS: [(&str, &str); 4] = [
    ("variables", "isolated_cores"),
    ("scheduler", "isolated_cores"),
    ("irqbalance", "banned_cpus"),
    ("scheduler", "cpu_affinity"),
];

/// Which of cpushield's options writes what tuned's `[section] key` (its
/// `/` spelt `.`) writes, if one does: each component declares its own
/// (`Component::tuned_overlaps`).
pub type Ours<'a> = &'a dyn Fn(&str, &str) -> Option<String>;

/// One setting of the profile chain that matters to a shield.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// The profile whose file sets it.
    pub profile: String,
    /// `[section] key=value`, as written.
    pub text: String,
    /// What of cpushield's it pins against or writes too; `None` for a pin.
    pub ours: Option<String>,
}

/// The profiles read, in the order tuned applies them, and the settings
/// that matter, each with the profile that sets it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Chain {
    /// Every profile read (`name (included by parent)` for an included one).
    pub profiles: Vec<String>,
    /// Profiles named but not read, each with why: in no profile
    /// directory, not a profile name, or not a regular text file of at
    /// most 1 MiB.
    pub unread: Vec<String>,
    /// The settings that pin CPUs or IRQs or overlap cpushield's.
    pub settings: Vec<Setting>,
}

/// Follows `active` (tuned's active profile line) through every include.
pub fn read_chain(sys: &Sys, active: &str, ours: Ours) -> Chain {
    let mut chain = Chain::default();
    for name in active.split_whitespace() {
        follow(sys, name, &mut Vec::new(), &mut chain, ours);
    }
    chain
}

/// Reads profile `name`, included by the last of `stack` (the profiles
/// being read, outermost first), its includes first.
fn follow(sys: &Sys, name: &str, stack: &mut Vec<String>, chain: &mut Chain, ours: Ours) {
    let done = chain
        .profiles
        .iter()
        .any(|p| p.split(' ').next() == Some(name));
    if stack.len() > MAX_DEPTH || done || stack.iter().any(|s| s == name) {
        return;
    }
    let conf = match read_profile(sys, name) {
        Ok(conf) => conf,
        Err(why) => {
            chain.unread.push(format!("{} ({why})", brief(name)));
            return;
        }
    };
    let entries = parse(&conf);
    stack.push(name.to_string());
    for (section, key, value) in &entries {
        if section == "main" && key == "include" {
            for inc in value.split([',', ' ']).filter(|s| !s.is_empty()) {
                // `${...}` is a variable or a function tuned expands: not a name.
                if !inc.contains('$') {
                    follow(sys, inc.trim(), stack, chain, ours);
                }
            }
        }
    }
    stack.pop();
    chain.profiles.push(match stack.last() {
        Some(p) => format!("{name} (included by {p})"),
        None => name.to_string(),
    });
    for (section, key, value) in entries {
        let norm = key.replace('/', ".");
        let which = if PINS.contains(&(section.as_str(), norm.as_str())) {
            Some(None)
        } else if section == "bootloader" && key.starts_with("cmdline") {
            Some(Some("the boot half (config key boot)".to_string()))
        } else {
            ours(&section, &norm).map(Some)
        };
        if let Some(ours) = which {
            chain.settings.push(Setting {
                profile: name.to_string(),
                // the profile's own text, escaped and cut short
                text: brief_to(&format!("[{section}] {key}={value}"), 160),
                ours,
            });
        }
    }
}

/// Profile `name`'s tuned.conf from the first profile directory that has
/// it, read as a regular text file of at most 1 MiB (a FIFO or a huge file
/// there is not read); why not, otherwise.
fn read_profile(sys: &Sys, name: &str) -> Result<String, String> {
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return Err("not a profile name".into());
    }
    for dir in PROFILE_DIRS {
        let path = sys.path(&format!("{dir}/{name}/tuned.conf"));
        match read_file(&path, CONFIG_LIMIT) {
            Ok(conf) => return Ok(conf),
            Err(FileError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
    }
    Err("in no profile directory".into())
}

/// The `(section, key, value)` entries of a tuned.conf: an ini file whose
/// comments start with `#`; keys outside a section are dropped.
fn parse(conf: &str) -> Vec<(String, String, String)> {
    let mut section = None;
    let mut out = Vec::new();
    for line in conf.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = Some(name.trim().to_string());
            continue;
        }
        let (Some(section), Some((key, value))) = (&section, line.split_once('=')) else {
            continue;
        };
        out.push((
            section.clone(),
            key.trim().to_string(),
            value.trim().to_string(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ours, as a registry might say it: the option named after the key.
    fn ours(section: &str, key: &str) -> Option<String> {
        let option = match (section, key) {
            ("cpu", "governor") => "governor",
            ("sysctl", "kernel.numa_balancing") => "numa-balancing",
            ("vm", "transparent_hugepages") => "thp",
            ("sysctl", "kernel.hung_task_timeout_secs") => "hung-task",
            ("sysctl", "kernel.nmi_watchdog") => "nmi-watchdog",
            _ => return None,
        };
        Some(format!("--tune={option}"))
    }

    fn put(root: &std::path::Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn the_include_chain_is_followed_and_each_setting_named_by_its_profile() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        // Red Hat's layout: realtime-virtual-host includes realtime, which
        // includes network-latency, which includes latency-performance.
        put(
            r,
            "usr/lib/tuned/profiles/realtime-virtual-host/tuned.conf",
            "[main]\ninclude=realtime\n\n[variables]\nisolated_cores=${f:calc_isolated_cores:1}\n",
        );
        put(r, "usr/lib/tuned/profiles/realtime/tuned.conf",
            "[main]\ninclude = network-latency\n[sysctl]\nkernel.hung_task_timeout_secs = 600\nkernel.nmi_watchdog = 0\n# kernel.timer_migration = 0\n[bootloader]\ncmdline_realtime=+isolcpus=${managed_irq}\n");
        put(r, "usr/lib/tuned/profiles/network-latency/tuned.conf",
            "[main]\ninclude=latency-performance,${f:virt_check:virtual-guest:}\n[sysctl]\nkernel.numa_balancing=0\n[vm]\ntransparent_hugepages=never\n");
        put(
            r,
            "usr/lib/tuned/profiles/latency-performance/tuned.conf",
            "[cpu]\nforce_latency=cstate.id_no_zero:1|3\ngovernor=performance\n",
        );
        // the administrator's copy wins over the distribution's
        put(
            r,
            "etc/tuned/profiles/latency-performance/tuned.conf",
            "[cpu]\ngovernor=performance\n",
        );
        let c = read_chain(&Sys::at(r), "realtime-virtual-host", &ours);
        assert_eq!(
            c.profiles,
            [
                "latency-performance (included by network-latency)",
                "network-latency (included by realtime)",
                "realtime (included by realtime-virtual-host)",
                "realtime-virtual-host"
            ]
        );
        let named: Vec<(&str, &str, Option<&str>)> = c
            .settings
            .iter()
            .map(|s| (s.profile.as_str(), s.text.as_str(), s.ours.as_deref()))
            .collect();
        assert_eq!(
            named,
            [
                (
                    "latency-performance",
                    "[cpu] governor=performance",
                    Some("--tune=governor")
                ),
                (
                    "network-latency",
                    "[sysctl] kernel.numa_balancing=0",
                    Some("--tune=numa-balancing")
                ),
                (
                    "network-latency",
                    "[vm] transparent_hugepages=never",
                    Some("--tune=thp")
                ),
                (
                    "realtime",
                    "[sysctl] kernel.hung_task_timeout_secs=600",
                    Some("--tune=hung-task")
                ),
                (
                    "realtime",
                    "[sysctl] kernel.nmi_watchdog=0",
                    Some("--tune=nmi-watchdog")
                ),
                (
                    "realtime",
                    "[bootloader] cmdline_realtime=+isolcpus=${managed_irq}",
                    Some("the boot half (config key boot)")
                ),
                (
                    "realtime-virtual-host",
                    "[variables] isolated_cores=${f:calc_isolated_cores:1}",
                    None
                ),
            ]
        );
        assert!(c.unread.is_empty());
    }

    #[test]
    fn a_loop_and_a_missing_profile_end_the_chain() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        put(r, "etc/tuned/a/tuned.conf", "[main]\ninclude=b\n");
        put(
            r,
            "etc/tuned/b/tuned.conf",
            "[main]\ninclude=a, gone\n[irqbalance]\nbanned_cpus=2-3\n",
        );
        let c = read_chain(&Sys::at(r), "a", &ours);
        assert_eq!(c.profiles, ["b (included by a)", "a"]);
        assert_eq!(c.unread, ["gone (in no profile directory)"]);
        assert_eq!(c.settings[0].text, "[irqbalance] banned_cpus=2-3");
    }

    #[test]
    fn a_fifo_a_huge_value_or_a_path_for_a_name_is_not_followed_as_is() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        // a FIFO where a profile should be: not opened (it would block)
        std::fs::create_dir_all(r.join("etc/tuned/stuck")).unwrap();
        nix::unistd::mkfifo(
            &r.join("etc/tuned/stuck/tuned.conf"),
            nix::sys::stat::Mode::S_IRWXU,
        )
        .unwrap();
        let long = "9".repeat(100_000);
        put(
            r,
            "etc/tuned/big/tuned.conf",
            &format!("[main]\ninclude=stuck,../../secret\n[sysctl]\nkernel.numa_balancing={long}\x1b[2J\n"),
        );
        let c = read_chain(&Sys::at(r), "big", &ours);
        assert_eq!(c.profiles, ["big"]);
        assert!(
            c.unread[0].starts_with("stuck (") && c.unread[0].contains("FIFO"),
            "{:?}",
            c.unread
        );
        assert_eq!(c.unread[1], "../../secret (not a profile name)");
        let text = &c.settings[0].text;
        let whole = "[sysctl] kernel.numa_balancing=".len() + long.len() + "\x1b[2J".len();
        assert!(
            text.len() < 250 && text.contains(&format!("({whole} bytes)")),
            "{text}"
        );
        assert!(!text.contains('\x1b'), "control characters escaped: {text}");
    }
}
