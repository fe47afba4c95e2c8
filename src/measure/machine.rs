//! What machine a measurement ran on, reported with every result.
//!
//! A latency figure means nothing without the kernel, preemption model,
//! CPU, virtualisation and boot parameters behind it. Everything is read
//! through [`Sys`] (so tests use fixture roots) and parsed by pure
//! functions over `&str`. Missing files are not errors: the field is
//! `None` ("unknown").

use serde::Serialize;

use crate::sys::Sys;

/// The machine a measurement ran on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Machine {
    /// `uname -r` (`/proc/sys/kernel/osrelease`).
    pub kernel_release: Option<String>,
    /// `uname -v` (`/proc/sys/kernel/version`).
    pub kernel_version: Option<String>,
    /// Preemption model and, for PREEMPT_DYNAMIC, its current mode.
    pub preemption: Preemption,
    /// First `model name` of /proc/cpuinfo.
    pub cpu_model: Option<String>,
    /// Online CPUs (`/sys/devices/system/cpu/online`), as a cpulist.
    pub cpus_online: Option<String>,
    /// Whether the kernel runs under a hypervisor (`None`: unknown).
    pub virtualised: Option<bool>,
    /// Hypervisor or system vendor, when known (`/sys/class/dmi/id/sys_vendor`).
    pub system_vendor: Option<String>,
    /// Current clocksource (`tsc`, `hpet`, `kvm-clock`, ...).
    pub clocksource: Option<String>,
    /// The boot parameters that matter for latency.
    pub boot_params: BootParams,
}

/// The kernel's preemption model.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Preemption {
    /// `PREEMPT_RT`, `PREEMPT_DYNAMIC`, `PREEMPT`, `PREEMPT_VOLUNTARY`,
    /// `PREEMPT_NONE`, or `None` when unknown.
    pub model: Option<String>,
    /// PREEMPT_DYNAMIC's current mode (`none`, `voluntary`, `full`, `lazy`),
    /// from /sys/kernel/debug/sched/preempt when readable.
    pub dynamic_mode: Option<String>,
    /// Where the model was read: `debugfs`, `uname`, `config`.
    pub source: Option<String>,
}

/// Latency-relevant kernel command-line parameters (`None`: not given).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BootParams {
    /// `isolcpus=`.
    pub isolcpus: Option<String>,
    /// `nohz_full=`.
    pub nohz_full: Option<String>,
    /// `rcu_nocbs=`.
    pub rcu_nocbs: Option<String>,
    /// `irqaffinity=`.
    pub irqaffinity: Option<String>,
}

impl Machine {
    /// Reads the description from the kernel behind `sys`.
    pub fn read(sys: &Sys) -> Machine {
        let get = |p: &str| sys.read_trimmed(p).ok().filter(|s| !s.is_empty());
        let kernel_release = get("proc/sys/kernel/osrelease");
        let kernel_version = get("proc/sys/kernel/version");
        let config = kernel_release
            .as_ref()
            .and_then(|r| sys.read(&format!("boot/config-{r}")).ok());
        let preemption = preemption(
            get("sys/kernel/debug/sched/preempt").as_deref(),
            kernel_version.as_deref(),
            config.as_deref(),
        );
        let cpuinfo = sys.read("proc/cpuinfo").ok();
        let system_vendor = get("sys/class/dmi/id/sys_vendor");
        Machine {
            kernel_release,
            kernel_version,
            preemption,
            cpu_model: cpuinfo.as_deref().and_then(cpu_model),
            cpus_online: get("sys/devices/system/cpu/online"),
            virtualised: virtualised(cpuinfo.as_deref(), system_vendor.as_deref()),
            system_vendor,
            clocksource: get("sys/devices/system/clocksource/clocksource0/current_clocksource"),
            boot_params: sys
                .read("proc/cmdline")
                .map(|c| boot_params(&c))
                .unwrap_or_default(),
        }
    }

    /// One line: `6.1.0-rt PREEMPT_RT, AMD EPYC, virtualised, clocksource tsc`.
    pub fn one_line(&self) -> String {
        let unknown = || "unknown".to_string();
        let mut preempt = self.preemption.model.clone().unwrap_or_else(unknown);
        if let Some(m) = &self.preemption.dynamic_mode {
            preempt.push_str(&format!(" ({m})"));
        }
        let virt = match self.virtualised {
            Some(true) => "virtualised",
            Some(false) => "bare metal",
            None => "virtualisation unknown",
        };
        format!(
            "kernel {} {}, {}, {}, clocksource {}",
            self.kernel_release.clone().unwrap_or_else(unknown),
            preempt,
            self.cpu_model.clone().unwrap_or_else(unknown),
            virt,
            self.clocksource.clone().unwrap_or_else(unknown),
        )
    }
}

/// Preemption model from, in order of trust: debugfs's
/// `sched/preempt` (`none voluntary (full) lazy`: the current mode is in
/// parentheses, and its presence proves PREEMPT_DYNAMIC), `uname -v`
/// (`PREEMPT_RT`, `PREEMPT_DYNAMIC`, `PREEMPT`), and the kernel config.
pub fn preemption(
    debugfs: Option<&str>,
    uname_v: Option<&str>,
    config: Option<&str>,
) -> Preemption {
    let dynamic_mode = debugfs.and_then(|s| {
        let open = s.find('(')?;
        let close = s[open..].find(')')? + open;
        Some(s[open + 1..close].trim().to_string())
    });
    let from_uname = uname_v.and_then(|v| {
        let words: Vec<&str> = v.split_whitespace().collect();
        ["PREEMPT_RT", "PREEMPT_DYNAMIC", "PREEMPT"]
            .into_iter()
            .find(|m| words.contains(m))
            .map(str::to_string)
    });
    let from_config = config.and_then(|c| {
        let set = |k: &str| c.lines().any(|l| l.trim() == format!("CONFIG_{k}=y"));
        [
            "PREEMPT_RT",
            "PREEMPT_DYNAMIC",
            "PREEMPT",
            "PREEMPT_VOLUNTARY",
            "PREEMPT_NONE",
        ]
        .into_iter()
        .find(|k| set(k))
        .map(str::to_string)
    });
    // uname's plain "PREEMPT" is also printed for PREEMPT_DYNAMIC kernels on
    // some versions; the config, when present, is more precise.
    let (model, source) = match (&dynamic_mode, from_uname, from_config) {
        (_, Some(rt), _) if rt == "PREEMPT_RT" => (Some(rt), "uname"),
        (_, _, Some(c)) => (Some(c), "config"),
        (_, Some(u), None) => (Some(u), "uname"),
        (Some(_), None, None) => (Some("PREEMPT_DYNAMIC".to_string()), "debugfs"),
        (None, None, None) => (None, ""),
    };
    Preemption {
        source: model.as_ref().map(|_| source.to_string()),
        model,
        dynamic_mode,
    }
}

/// First `model name` line of /proc/cpuinfo (x86); `Processor`/`cpu model`
/// on other architectures.
pub fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        let k = k.trim();
        (k == "model name" || k == "Processor" || k == "cpu model")
            .then(|| v.trim().to_string())
            .filter(|v| !v.is_empty())
    })
}

/// Virtualised when /proc/cpuinfo has the `hypervisor` flag or the DMI
/// system vendor names a known hypervisor; bare metal when the flags are
/// readable and neither says so; unknown otherwise.
pub fn virtualised(cpuinfo: Option<&str>, sys_vendor: Option<&str>) -> Option<bool> {
    const VENDORS: [&str; 8] = [
        "QEMU",
        "KVM",
        "VMware",
        "Microsoft Corporation",
        "Xen",
        "innotek",
        "Amazon EC2",
        "Google",
    ];
    if let Some(v) = sys_vendor {
        if VENDORS.iter().any(|h| v.contains(h)) {
            return Some(true);
        }
    }
    let flags = cpuinfo?.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        matches!(k.trim(), "flags" | "Features").then_some(v)
    })?;
    Some(flags.split_whitespace().any(|f| f == "hypervisor"))
}

/// The latency-relevant parameters of a kernel command line. Everything
/// after a bare `--` goes to init, not the kernel, and is ignored.
pub fn boot_params(cmdline: &str) -> BootParams {
    let mut p = BootParams::default();
    for word in cmdline.split_whitespace() {
        if word == "--" {
            break;
        }
        let Some((k, v)) = word.split_once('=') else {
            continue;
        };
        let slot = match k {
            "isolcpus" => &mut p.isolcpus,
            "nohz_full" => &mut p.nohz_full,
            "rcu_nocbs" => &mut p.rcu_nocbs,
            "irqaffinity" => &mut p.irqaffinity,
            _ => continue,
        };
        *slot = Some(v.to_string());
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preemption_from_debugfs_and_uname() {
        let p = preemption(
            Some("none voluntary (full) lazy\n"),
            Some("#1 SMP PREEMPT_DYNAMIC Debian"),
            None,
        );
        assert_eq!(p.model.as_deref(), Some("PREEMPT_DYNAMIC"));
        assert_eq!(p.dynamic_mode.as_deref(), Some("full"));
        assert_eq!(p.source.as_deref(), Some("uname"));
    }

    #[test]
    fn preemption_rt_wins() {
        let p = preemption(None, Some("#1 SMP PREEMPT_RT Debian 6.1"), None);
        assert_eq!(p.model.as_deref(), Some("PREEMPT_RT"));
        assert_eq!(p.dynamic_mode, None);
    }

    #[test]
    fn preemption_from_config_and_unknown() {
        let cfg = "# CONFIG_PREEMPT_NONE is not set\nCONFIG_PREEMPT_VOLUNTARY=y\n";
        let p = preemption(None, Some("#1 SMP"), Some(cfg));
        assert_eq!(p.model.as_deref(), Some("PREEMPT_VOLUNTARY"));
        assert_eq!(p.source.as_deref(), Some("config"));
        assert_eq!(
            preemption(None, Some("#1 SMP"), None),
            Preemption::default()
        );
    }

    #[test]
    fn cpu_model_and_virtualisation() {
        let ci = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu tsc hypervisor\n";
        assert_eq!(cpu_model(ci).as_deref(), Some("AMD EPYC 7B13"));
        assert_eq!(virtualised(Some(ci), None), Some(true));
        let bare = "model name\t: Intel\nflags\t\t: fpu tsc\n";
        assert_eq!(virtualised(Some(bare), Some("Dell Inc.")), Some(false));
        assert_eq!(virtualised(Some(bare), Some("QEMU")), Some(true));
        assert_eq!(virtualised(None, None), None);
    }

    #[test]
    fn boot_params_stop_at_init_args() {
        let p = boot_params(
            "BOOT_IMAGE=/vmlinuz isolcpus=domain,2-3 nohz_full=2-3 quiet -- irqaffinity=0\n",
        );
        assert_eq!(p.isolcpus.as_deref(), Some("domain,2-3"));
        assert_eq!(p.nohz_full.as_deref(), Some("2-3"));
        assert_eq!(p.rcu_nocbs, None);
        assert_eq!(p.irqaffinity, None);
    }

    #[test]
    fn read_from_fixture_root() {
        let dir = tempfile::tempdir().unwrap();
        let put = |rel: &str, text: &str| {
            let p = dir.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        put("proc/sys/kernel/osrelease", "6.1.0-rt\n");
        put("proc/sys/kernel/version", "#1 SMP PREEMPT_RT\n");
        put("proc/cpuinfo", "model name\t: Xeon\nflags\t: fpu\n");
        put("proc/cmdline", "rcu_nocbs=1\n");
        put(
            "sys/devices/system/clocksource/clocksource0/current_clocksource",
            "tsc\n",
        );
        let m = Machine::read(&Sys::at(dir.path()));
        assert_eq!(m.kernel_release.as_deref(), Some("6.1.0-rt"));
        assert_eq!(m.preemption.model.as_deref(), Some("PREEMPT_RT"));
        assert_eq!(m.virtualised, Some(false));
        assert_eq!(m.clocksource.as_deref(), Some("tsc"));
        assert_eq!(m.boot_params.rcu_nocbs.as_deref(), Some("1"));
        assert_eq!(m.cpus_online, None);
        assert!(m.one_line().contains("PREEMPT_RT"));
    }
}
