//! What machine a measurement ran on, reported with every result.
//!
//! A latency figure means nothing without the kernel, preemption model,
//! CPU, virtualisation and boot parameters behind it. Everything is read
//! through [`Sys`] (so tests use fixture roots) and parsed by pure
//! functions over `&str`. Missing files are not errors: the field is
//! `None` ("unknown").

use serde::{Deserialize, Serialize};

use crate::sys::Sys;

/// The machine a measurement ran on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// The system's product name (`/sys/class/dmi/id/product_name`).
    pub product_name: Option<String>,
    /// The firmware: DMI's BIOS vendor, version and date in one line.
    pub bios: Option<String>,
    /// The CPU's microcode revision (first `microcode` line of /proc/cpuinfo).
    pub microcode: Option<String>,
    /// Current clocksource (`tsc`, `hpet`, `kvm-clock`, ...).
    pub clocksource: Option<String>,
    /// The kernel's whole command line (`/proc/cmdline`).
    pub cmdline: Option<String>,
    /// The boot parameters that matter for latency.
    pub boot_params: BootParams,
}

/// The kernel's preemption model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
        let product_name = get("sys/class/dmi/id/product_name");
        // Xen guests; a device-tree node on ARM/RISC-V guests (NUL-separated).
        let hypervisor_type = get("sys/hypervisor/type");
        let dt_hypervisor = get("proc/device-tree/hypervisor/compatible")
            .map(|s| s.trim_matches('\0').replace('\0', ","));
        Machine {
            kernel_release,
            kernel_version,
            preemption,
            cpu_model: cpuinfo.as_deref().and_then(cpu_model),
            cpus_online: get("sys/devices/system/cpu/online"),
            virtualised: virtualised(&VirtEvidence {
                cpuinfo: cpuinfo.as_deref(),
                sys_vendor: system_vendor.as_deref(),
                product_name: product_name.as_deref(),
                hypervisor_type: hypervisor_type.as_deref(),
                dt_hypervisor: dt_hypervisor.as_deref(),
            }),
            system_vendor,
            product_name,
            bios: bios(
                get("sys/class/dmi/id/bios_vendor"),
                get("sys/class/dmi/id/bios_version"),
                get("sys/class/dmi/id/bios_date"),
            ),
            microcode: cpuinfo.as_deref().and_then(microcode),
            clocksource: get("sys/devices/system/clocksource/clocksource0/current_clocksource"),
            cmdline: get("proc/cmdline"),
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

/// DMI's firmware fields in one line, `vendor version (date)`; `None`
/// when DMI gives none of them.
pub fn bios(
    vendor: Option<String>,
    version: Option<String>,
    date: Option<String>,
) -> Option<String> {
    let mut line = [vendor, version]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ");
    if let Some(d) = date {
        line = if line.is_empty() {
            d
        } else {
            format!("{line} ({d})")
        };
    }
    (!line.is_empty()).then_some(line)
}

/// The first `microcode` revision of /proc/cpuinfo (x86).
pub fn microcode(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "microcode")
            .then(|| v.trim().to_string())
            .filter(|v| !v.is_empty())
    })
}

/// What the kernel shows that tells a virtual machine from bare metal.
#[derive(Debug, Clone, Copy, Default)]
pub struct VirtEvidence<'a> {
    /// `/proc/cpuinfo`.
    pub cpuinfo: Option<&'a str>,
    /// `/sys/class/dmi/id/sys_vendor`.
    pub sys_vendor: Option<&'a str>,
    /// `/sys/class/dmi/id/product_name`.
    pub product_name: Option<&'a str>,
    /// `/sys/hypervisor/type` (`xen`).
    pub hypervisor_type: Option<&'a str>,
    /// `/proc/device-tree/hypervisor/compatible` (ARM and RISC-V guests).
    pub dt_hypervisor: Option<&'a str>,
}

/// DMI vendors and products only virtual machines have.
const VM_DMI: [&str; 16] = [
    "QEMU",
    "KVM",
    "Bochs",
    "VMware",
    "VirtualBox",
    "innotek",
    "Xen",
    "HVM domU",
    "Parallels",
    "BHYVE",
    "Virtual Machine", // Hyper-V's product name (its vendor, Microsoft, also makes laptops)
    "Standard PC",     // QEMU's machine types
    "Google Compute Engine",
    "OpenStack",
    "Amazon EC2",
    "Firecracker",
];

/// Whether the kernel runs under a hypervisor.
///
/// A hypervisor node in sysfs or the device tree, or a DMI vendor/product
/// that only virtual machines have, says yes (EC2 `*.metal` products
/// excepted: same vendor, bare metal). On x86 the CPUID `hypervisor` flag
/// in /proc/cpuinfo says yes, and its absence says bare metal unless DMI
/// disagrees (a hypervisor can hide the flag). Other architectures have no
/// such flag: without other evidence the answer there is unknown, never
/// "bare metal".
pub fn virtualised(e: &VirtEvidence) -> Option<bool> {
    let given = |v: Option<&str>| v.is_some_and(|s| !s.trim().is_empty());
    if given(e.hypervisor_type) || given(e.dt_hypervisor) {
        return Some(true);
    }
    let metal = e.product_name.is_some_and(|p| p.contains(".metal"));
    let dmi_vm = !metal
        && [e.sys_vendor, e.product_name]
            .into_iter()
            .flatten()
            .any(|v| VM_DMI.iter().any(|h| v.contains(h)));
    let x86_flags = e.cpuinfo.and_then(|c| {
        c.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == "flags").then_some(v)
        })
    });
    match x86_flags {
        Some(flags) => Some(dmi_vm || flags.split_whitespace().any(|f| f == "hypervisor")),
        None => dmi_vm.then_some(true),
    }
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
        assert_eq!(microcode(ci), None);
        let with_mc = "model name\t: Intel\nmicrocode\t: 0xd0003a5\n";
        assert_eq!(microcode(with_mc).as_deref(), Some("0xd0003a5"));
        let ev = |cpuinfo, vendor, product| VirtEvidence {
            cpuinfo,
            sys_vendor: vendor,
            product_name: product,
            ..VirtEvidence::default()
        };
        assert_eq!(virtualised(&ev(Some(ci), None, None)), Some(true));
        let bare = "model name\t: Intel\nflags\t\t: fpu tsc\n";
        assert_eq!(
            virtualised(&ev(Some(bare), Some("Dell Inc."), None)),
            Some(false)
        );
        // a hypervisor hiding the CPUID flag is still named by DMI
        assert_eq!(virtualised(&ev(Some(bare), Some("QEMU"), None)), Some(true));
        assert_eq!(virtualised(&ev(None, None, None)), None);
    }

    #[test]
    fn virtualisation_beyond_the_x86_flag() {
        let arm = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes\nCPU implementer\t: 0x41\n";
        let ev = |vendor, product| VirtEvidence {
            cpuinfo: Some(arm),
            sys_vendor: vendor,
            product_name: product,
            ..VirtEvidence::default()
        };
        // ARM has no hypervisor flag: no evidence is "unknown", not "bare metal"
        assert_eq!(virtualised(&ev(None, None)), None);
        assert_eq!(
            virtualised(&ev(Some("Amazon EC2"), Some("m7g.large"))),
            Some(true)
        );
        assert_eq!(virtualised(&ev(Some("Amazon EC2"), Some("a1.metal"))), None);
        let dt = VirtEvidence {
            cpuinfo: Some(arm),
            dt_hypervisor: Some("linux,kvm"),
            ..VirtEvidence::default()
        };
        assert_eq!(virtualised(&dt), Some(true));
        let xen = VirtEvidence {
            hypervisor_type: Some("xen"),
            ..VirtEvidence::default()
        };
        assert_eq!(virtualised(&xen), Some(true));
        // Microsoft makes laptops too: only Hyper-V's product name counts
        let bare = "flags\t\t: fpu tsc\n";
        let ms = |product| VirtEvidence {
            cpuinfo: Some(bare),
            sys_vendor: Some("Microsoft Corporation"),
            product_name: Some(product),
            ..VirtEvidence::default()
        };
        assert_eq!(virtualised(&ms("Surface Laptop 5")), Some(false));
        assert_eq!(virtualised(&ms("Virtual Machine")), Some(true));
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
        assert_eq!(m.cmdline.as_deref(), Some("rcu_nocbs=1"));
        assert_eq!(m.bios, None);
        assert!(m.one_line().contains("PREEMPT_RT"));
        put("sys/class/dmi/id/bios_vendor", "SeaBIOS\n");
        put("sys/class/dmi/id/bios_version", "1.16.3\n");
        put("sys/class/dmi/id/bios_date", "04/01/2014\n");
        put(
            "sys/class/dmi/id/product_name",
            "Standard PC (Q35 + ICH9, 2009)\n",
        );
        let m = Machine::read(&Sys::at(dir.path()));
        assert_eq!(m.bios.as_deref(), Some("SeaBIOS 1.16.3 (04/01/2014)"));
        assert_eq!(
            m.product_name.as_deref(),
            Some("Standard PC (Q35 + ICH9, 2009)")
        );
        put("proc/device-tree/hypervisor/compatible", "linux,kvm\0");
        put("proc/cpuinfo", "Features\t: fp asimd\n");
        assert_eq!(Machine::read(&Sys::at(dir.path())).virtualised, Some(true));
    }
}
