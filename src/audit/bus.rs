//! The audit of the bus: per PCI function, what adds latency to a
//! real-time path through it. Pure, as [`super::rules`]: the facts are
//! [`crate::sys::pci::PciFacts`], read once with the rest.
//!
//! - **ASPM**: a PCI Express link allowed into L0s or L1 (Link Control
//!   bits 1:0, or the kernel's `link/l0s_aspm`, `link/l1_aspm`) makes
//!   every access that finds it asleep wait its exit latency (Link
//!   Capabilities); the kernel's policy decides what it enables.
//! - **IRQs**: functions whose IRQs (MSI vectors, else the legacy IRQ)
//!   are served on, or allowed on, the audited CPUs.
//! - **NUMA**: functions on another node than the audited CPUs: their
//!   DMA and register accesses cross the interconnect.
//! - **The conventional PCI bound** (PCI 2.1, as the CPU-shielding course
//!   report computes it): a transfer of `n` data phases holds the bus at
//!   most `latency_max = 32 + 8·(n − 1)` clocks; each bus master's Latency
//!   Timer (config 0x0D; a bridge's secondary one, 0x1B, on its secondary
//!   bus) is mapped up to the next such step, at least 32 ([`tenure_clocks`]);
//!   an access may wait for every bus master's tenure, so the bound of a
//!   bus is their sum, at 33 MHz. The report's table (21 functions, though
//!   its text says 17) sums to 1160 cycles = 35.2 µs; with every timer at
//!   0 it gives 17 × 32 = 544 cycles = 16.5 µs (there its "17" is used).
//!   With its two cores asking at once it takes 2 × 1160 + 80 = 2400
//!   cycles = 72.7 µs ([`two_masters`]). More CPUs are our extrapolation,
//!   said as such. PCI Express has no such shared bus and no latency timer.

use serde::{Deserialize, Serialize};

use super::facts::Facts;
use super::{Findings, Severity};
use crate::cpulist::CpuSet;
use crate::sys::pci::{AspmStates, Bdf, PciDevice, PciFacts};

/// The conventional PCI clock the bound is given at, MHz.
pub const PCI_MHZ: f64 = 33.0;

/// A bus bound at or above this (µs) is a warning.
pub const BOUND_WARN_US: f64 = 10.0;

/// The runtime ASPM policy file, absolute, for next steps.
const POLICY_FILE: &str = "/sys/module/pcie_aspm/parameters/policy";

/// Clocks a master may hold a conventional PCI bus, as the report maps
/// its Latency Timer `lt`: up to the next step of PCI 2.1's
/// `latency_max = 32 + 8·(n − 1)` (n data transfers: 32, 40, 48, ...)
/// at or above it, and at least 32 (00 → 32, 01 → 32, 80 → 80, 81 → 88).
pub fn tenure_clocks(lt: u8) -> u64 {
    let lt = u64::from(lt);
    if lt <= 32 {
        32
    } else {
        32 + 8 * (lt - 32).div_ceil(8)
    }
}

/// The CPU's own worst bus cycle the report adds to its two-master
/// figure: the PCI bridge's tenure, 80 clocks.
pub const CPU_CYCLE: u64 = 80;

/// The report's figure for two bus masters asking at once (its two
/// cores): each may wait a whole round of the bus, `2 × bound`, plus the
/// CPU's own worst bus cycle ([`CPU_CYCLE`]): 2 × 1160 + 80 = 2400.
pub fn two_masters(bound: u64) -> u64 {
    2 * bound + CPU_CYCLE
}

/// One bus master counted in a bus's bound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Master {
    /// The function.
    pub address: Bdf,
    /// `device` (a function on the bus, its Latency Timer) or `bridge`
    /// (the bridge to the bus, its secondary Latency Timer).
    pub side: String,
    /// The Latency Timer counted, bus clocks.
    pub latency_timer: u8,
    /// Its tenure, bus clocks ([`tenure_clocks`]).
    pub cycles: u64,
}

/// What kind of bus a bus number is, as its bridge and functions say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BusKind {
    /// Conventional PCI: a shared bus with latency timers.
    Conventional,
    /// PCI Express (a link, or the root complex's own bus with PCI
    /// Express functions on it).
    Express,
    /// Not known: capability lists unread (not root).
    Unknown,
}

/// The worst-case bound of one bus.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BusBound {
    /// `domain:bus`.
    pub bus: String,
    /// Its kind.
    pub kind: BusKind,
    /// Why it is judged that kind, in words.
    pub why: String,
    /// Its bus masters (bus master enable set; the bridge to it).
    pub masters: Vec<Master>,
    /// The sum of their tenures, bus clocks.
    pub cycles: u64,
    /// The same at [`PCI_MHZ`], µs.
    pub us: f64,
}

/// What `audit --json` carries of the bus, besides its findings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BusReport {
    /// The active ASPM policy (`null`: no `pcie_aspm`).
    pub aspm_policy: Option<String>,
    /// Every PCI function as read.
    pub devices: Vec<PciDevice>,
    /// The bound of every bus that is, or may be, conventional PCI.
    pub buses: Vec<BusBound>,
    /// Why nothing could be read (no PCI bus in sysfs).
    pub error: Option<String>,
}

/// The bound of every bus with a function on it or a bridge to it that
/// is conventional PCI or may be (kind unknown); PCI Express buses have
/// none. Pure.
pub fn bus_bounds(devices: &[PciDevice]) -> Vec<BusBound> {
    let mut buses: Vec<(u32, u8)> = devices
        .iter()
        .map(|d| (d.address.domain, d.address.bus))
        .chain(devices.iter().filter_map(|d| {
            let c = d.config.as_ref()?;
            c.is_bridge()
                .then_some((d.address.domain, c.secondary_bus?))
        }))
        .collect();
    buses.sort_unstable();
    buses.dedup();
    let mut out = Vec::new();
    for (domain, bus) in buses {
        let bridge = devices.iter().find(|d| {
            d.address.domain == domain
                && d.config
                    .as_ref()
                    .is_some_and(|c| c.is_bridge() && c.secondary_bus == Some(bus))
        });
        let on_bus: Vec<&PciDevice> = devices
            .iter()
            .filter(|d| d.address.domain == domain && d.address.bus == bus)
            .collect();
        let (kind, why) = bus_kind(bridge, &on_bus);
        if kind == BusKind::Express {
            continue;
        }
        let mut masters: Vec<Master> = Vec::new();
        if let Some(b) = bridge {
            if let Some(lt) = b.config.as_ref().and_then(|c| c.secondary_latency_timer) {
                masters.push(Master {
                    address: b.address,
                    side: "bridge".into(),
                    latency_timer: lt,
                    cycles: tenure_clocks(lt),
                });
            }
        }
        for d in &on_bus {
            let Some(c) = &d.config else { continue };
            if let (Some(true), Some(lt)) = (c.bus_master, c.latency_timer) {
                masters.push(Master {
                    address: d.address,
                    side: "device".into(),
                    latency_timer: lt,
                    cycles: tenure_clocks(lt),
                });
            }
        }
        let cycles: u64 = masters.iter().map(|m| m.cycles).sum();
        out.push(BusBound {
            bus: format!("{domain:04x}:{bus:02x}"),
            kind,
            why,
            masters,
            cycles,
            us: cycles as f64 / PCI_MHZ,
        });
    }
    out
}

fn bus_kind(bridge: Option<&PciDevice>, on_bus: &[&PciDevice]) -> (BusKind, String) {
    if let Some(b) = bridge {
        let c = b.config.as_ref();
        let port = c.and_then(|c| c.pcie.as_ref()).map(|p| p.port_type);
        return match (c.and_then(|c| c.is_pcie()), port) {
            (Some(true), Some(7)) => (
                BusKind::Conventional,
                format!("behind PCIe-to-PCI bridge {}", b.address),
            ),
            (Some(true), _) => (
                BusKind::Express,
                format!("behind PCI Express port {}", b.address),
            ),
            (Some(false), _) => (
                BusKind::Conventional,
                format!(
                    "behind PCI bridge {} (no PCI Express capability)",
                    b.address
                ),
            ),
            (None, _) => (
                BusKind::Unknown,
                format!("behind bridge {}, whose capabilities are unread", b.address),
            ),
        };
    }
    let kinds: Vec<Option<bool>> = on_bus
        .iter()
        .map(|d| d.config.as_ref().and_then(|c| c.is_pcie()))
        .collect();
    if kinds.contains(&Some(true)) {
        (
            BusKind::Express,
            "root bus with PCI Express functions".into(),
        )
    } else if kinds.iter().all(|k| *k == Some(false)) {
        (
            BusKind::Conventional,
            "root bus: no function on it has a PCI Express capability".into(),
        )
    } else {
        (
            BusKind::Unknown,
            "root bus whose functions' capabilities are unread".into(),
        )
    }
}

/// The bus's report part: the facts and the bounds.
pub fn report(pci: &PciFacts) -> BusReport {
    BusReport {
        aspm_policy: pci.aspm_policy.clone(),
        devices: pci.devices.clone(),
        buses: bus_bounds(&pci.devices),
        error: pci.error.clone(),
    }
}

fn more(list: &mut Vec<String>, max: usize) -> String {
    let n = list.len();
    list.truncate(max);
    let rest = if n > max {
        format!(", ... ({n} in all)")
    } else {
        String::new()
    };
    format!("{}{rest}", list.join(", "))
}

/// The bus findings: `pci.aspm`, `pci.irq`, `pci.numa`, `pci.bound`,
/// `pci.config` (capabilities unread).
pub(super) fn findings(f: &Facts, out: &mut Findings) {
    let pci = &f.pci;
    if pci.devices.is_empty() {
        out.add(
            "pci",
            Severity::Ok,
            10,
            format!(
                "no PCI function in sysfs{}: nothing on a PCI bus to judge",
                pci.error
                    .as_ref()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            ),
            String::new(),
        );
        return;
    }
    aspm(f, out);
    irqs(f, out);
    numa(f, out);
    bound(f, out);
    unread(f, out);
}

fn aspm(f: &Facts, out: &mut Findings) {
    let pci = &f.pci;
    let policy = match &pci.aspm_policy {
        Some(p) => format!("policy {p}"),
        None => "no pcie_aspm policy (kernel without ASPM support)".into(),
    };
    let booted_off = f
        .cmdline
        .get("pcie_aspm")
        .is_some_and(|v| v.as_deref() == Some("off"));
    let boot_note = if booted_off {
        "; booted with pcie_aspm=off: the kernel leaves ASPM as the firmware set it"
    } else {
        ""
    };
    let links: Vec<&PciDevice> = pci
        .devices
        .iter()
        .filter(|d| {
            d.config
                .as_ref()
                .and_then(|c| c.pcie.as_ref())
                .is_some_and(|p| p.has_link)
                || d.link_l0s_aspm.is_some()
                || d.link_l1_aspm.is_some()
        })
        .collect();
    let mut enabled: Vec<String> = Vec::new();
    let mut l1 = false;
    for d in &links {
        if let Some(s) = d.aspm_enabled().filter(|s| s.any()) {
            l1 |= s.l1;
            enabled.push(format!("{} {}{}", d.address, s.describe(), exits(d, s)));
        }
    }
    // Functions that may have a link nobody could read: capabilities
    // unread and no link/*_aspm file of the kernel's.
    let unknown = pci
        .devices
        .iter()
        .filter(|d| {
            d.aspm_enabled().is_none() && d.config.as_ref().is_none_or(|c| c.is_pcie().is_none())
        })
        .count();
    let next = aspm_next(f);
    if !enabled.is_empty() {
        let n = enabled.len();
        out.add(
            "pci.aspm",
            Severity::Warn,
            if l1 { 50 } else { 35 },
            format!(
                "ASPM enabled on {n} PCI Express link ends ({policy}{boot_note}): {}; an access that finds the link asleep waits its exit latency",
                more(&mut enabled, 6)
            ),
            next,
        );
    } else if unknown > 0 {
        out.add(
            "pci.aspm",
            Severity::Warn,
            30,
            format!("ASPM state of {unknown} PCI functions unread: their capabilities lie past the 64 bytes of config space given without root, and the kernel has no link/*_aspm file for them ({policy})"),
            "run cpushield audit as root".into(),
        );
    } else if links.is_empty() {
        out.add(
            "pci.aspm",
            Severity::Ok,
            35,
            format!("no PCI Express link ({policy})"),
            String::new(),
        );
    } else {
        out.add(
            "pci.aspm",
            Severity::Ok,
            35,
            format!(
                "ASPM off on all {} PCI Express link ends ({policy}{boot_note})",
                links.len()
            ),
            String::new(),
        );
    }
}

/// The next step for ASPM enabled: a reboot when the boot half already
/// asks for the performance policy, else how to ask for it.
fn aspm_next(f: &Facts) -> String {
    let pending = f.boot.as_ref().is_some_and(|b| {
        b.reboot_pending
            && b.written.as_ref().is_some_and(|w| {
                w.options
                    .iter()
                    .any(|o| o == "pcie_aspm.policy=performance")
            })
    });
    if pending {
        "reboot: the boot half has pcie_aspm.policy=performance, the running kernel not yet"
            .to_string()
    } else {
        format!(
            "echo performance > {POLICY_FILE} (until reboot), or at boot pcie_aspm.policy=performance (config key boot = [\"pcie_aspm.policy=performance\"], then cpushield apply); pcie_aspm=off alone keeps what the firmware enabled"
        )
    }
}

/// ` (L0s exit 2µs-4µs, L1 exit 8µs-16µs)` for the states enabled.
fn exits(d: &PciDevice, s: AspmStates) -> String {
    let Some(p) = d.config.as_ref().and_then(|c| c.pcie.as_ref()) else {
        return String::new();
    };
    let mut parts = Vec::new();
    if let (true, Some(e)) = (s.l0s, p.l0s_exit) {
        parts.push(format!("L0s exit {e}"));
    }
    if let (true, Some(e)) = (s.l1, p.l1_exit) {
        parts.push(format!("L1 exit {e}"));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join(", "))
    }
}

/// A function's IRQs on the targets: (served there now, allowed there).
fn irqs_on(f: &Facts, d: &PciDevice) -> (Vec<u32>, Vec<u32>) {
    let mut served = Vec::new();
    let mut allowed = Vec::new();
    for n in d.irqs() {
        let Some(i) = f.irqs.iter().find(|i| i.irq == n) else {
            continue;
        };
        if i.effective
            .as_ref()
            .is_some_and(|e| e.intersects(&f.targets))
        {
            served.push(n);
        } else if i.affinity.intersects(&f.targets) {
            allowed.push(n);
        }
    }
    (served, allowed)
}

fn label(d: &PciDevice, irqs: &[u32]) -> String {
    let list: Vec<String> = irqs.iter().map(u32::to_string).collect();
    format!(
        "{} (class {}, IRQ {})",
        d.address,
        d.class_code(),
        list.join(",")
    )
}

fn irqs(f: &Facts, out: &mut Findings) {
    let list = f.list();
    let (mut served, mut allowed, mut wanted) = (Vec::new(), Vec::new(), Vec::new());
    let bound = f.wanted_irqs();
    for d in &f.pci.devices {
        let (s, a) = irqs_on(f, d);
        let (w, s): (Vec<u32>, Vec<u32>) = s.into_iter().partition(|n| bound.contains(n));
        if !w.is_empty() {
            wanted.push(label(d, &w));
        }
        if !s.is_empty() {
            served.push(label(d, &s));
        } else if !a.is_empty() {
            allowed.push(label(d, &a));
        }
    }
    let wanted_note = if wanted.is_empty() {
        String::new()
    } else {
        format!("; bound there on request: {}", wanted.join(", "))
    };
    if !served.is_empty() {
        out.add(
            "pci.irq",
            Severity::Bad,
            80,
            format!(
                "PCI functions whose IRQs are served on {list}: {}{wanted_note}",
                more(&mut served, 6)
            ),
            format!("cpushield on {list} moves them away; a function the real-time task uses: cpushield on {list} --irq N"),
        );
    } else if !allowed.is_empty() {
        out.add(
            "pci.irq",
            Severity::Warn,
            55,
            format!(
                "PCI functions whose IRQs may be served on {list}: {}{wanted_note}",
                more(&mut allowed, 6)
            ),
            format!("cpushield on {list}"),
        );
    } else {
        out.add(
            "pci.irq",
            Severity::Ok,
            55,
            format!("no PCI function's IRQ is served on {list}{wanted_note}"),
            String::new(),
        );
    }
}

fn numa(f: &Facts, out: &mut Findings) {
    let list = f.list();
    let home: Vec<u32> = f
        .numa_nodes
        .iter()
        .filter(|(_, c)| c.intersects(&f.targets))
        .filter_map(|(n, _)| n.strip_prefix("node")?.parse().ok())
        .collect();
    let placed: Vec<&PciDevice> = f
        .pci
        .devices
        .iter()
        .filter(|d| d.numa_node.is_some())
        .collect();
    if placed.is_empty() || home.is_empty() {
        out.add(
            "pci.numa",
            Severity::Ok,
            15,
            "no PCI function reports a NUMA node (numa_node -1: one node, or the firmware gives none)".into(),
            String::new(),
        );
        return;
    }
    let mut away: Vec<String> = Vec::new();
    let mut wanted_away = false;
    let bound = f.wanted_irqs();
    let mut local = CpuSet::new();
    for d in placed {
        let node = d.numa_node.unwrap_or(0);
        if home.contains(&node) {
            continue;
        }
        wanted_away |= d.irqs().iter().any(|n| bound.contains(n));
        if let Some(c) = &d.local_cpus {
            local = local.union(c);
        }
        away.push(format!("{} (node {node})", d.address));
    }
    let homes: Vec<String> = home.iter().map(|n| n.to_string()).collect();
    if away.is_empty() {
        out.add(
            "pci.numa",
            Severity::Ok,
            15,
            format!(
                "every PCI function with a NUMA node is on node {} of {list}",
                homes.join(",")
            ),
            String::new(),
        );
    } else {
        out.add(
            "pci.numa",
            Severity::Warn,
            if wanted_away { 50 } else { 20 },
            format!(
                "PCI functions on another NUMA node than {list} (node {}): {}{}; their DMA and register accesses cross the interconnect",
                homes.join(","),
                more(&mut away, 6),
                if wanted_away { "; among them a function whose IRQ is bound to the shield" } else { "" }
            ),
            format!("use a function on node {} for the real-time path, or shield CPUs near the function (its local_cpulist: {local})", homes.join(",")),
        );
    }
}

fn bound(f: &Facts, out: &mut Findings) {
    let buses = bus_bounds(&f.pci.devices);
    if buses.is_empty() {
        out.add(
            "pci.bound",
            Severity::Ok,
            40,
            "no conventional PCI bus: no shared bus to wait for (PCI Express only)".into(),
            String::new(),
        );
        return;
    }
    let worst = buses.iter().map(|b| b.us).fold(0.0, f64::max);
    let cpus = f.online.len().max(1) as u64;
    let us = |cycles: u64| cycles as f64 / PCI_MHZ;
    let parts: Vec<String> = buses
        .iter()
        .map(|b| {
            let kind = match b.kind {
                BusKind::Conventional => "",
                _ => "kind unknown, if conventional: ",
            };
            let two = two_masters(b.cycles);
            // Our extrapolation, not the report's: its reasoning (each
            // master asking at once may cost a whole round) carried from
            // its two cores to every online CPU.
            let more = match cpus {
                0..=2 => String::new(),
                n => format!(
                    "; our extrapolation to the {n} online CPUs, each with an access waiting: {n} × {} + {CPU_CYCLE} = {} cycles = {:.1} µs (the report's reasoning carried further, unconfirmed as it says of its own doubling)",
                    b.cycles,
                    n * b.cycles + CPU_CYCLE,
                    us(n * b.cycles + CPU_CYCLE)
                ),
            };
            format!(
                "bus {} ({kind}{} bus masters) {} cycles = {:.1} µs; two masters at once, as the report takes its two cores: 2 × {} + {CPU_CYCLE} = {} cycles = {:.1} µs{more}",
                b.bus,
                b.masters.len(),
                b.cycles,
                b.us,
                b.cycles,
                two,
                us(two)
            )
        })
        .collect();
    let (severity, next) = if worst >= BOUND_WARN_US {
        (
            Severity::Warn,
            "keep the real-time device's accesses off the shared bus (a PCI Express slot), or lower the bus masters' Latency Timers (setpci -s BDF latency_timer=N; a driver or the BIOS may set it back)".to_string(),
        )
    } else {
        (Severity::Ok, String::new())
    };
    out.add(
        "pci.bound",
        severity,
        40,
        format!(
            "worst-case wait for a conventional PCI bus at {PCI_MHZ:.0} MHz, as the CPU-shielding course report computes it: each bus master's Latency Timer mapped up to the next 32 + 8·(n−1) clocks (n data transfers), at least 32, summed: {}",
            parts.join("; ")
        ),
        next,
    );
}

fn unread(f: &Facts, out: &mut Findings) {
    let cut: Vec<String> = f
        .pci
        .devices
        .iter()
        .filter(|d| {
            d.config
                .as_ref()
                .is_some_and(|c| matches!(c.capabilities, crate::sys::pci::CapList::Cut { .. }))
                || d.config.is_none()
        })
        .map(|d| d.address.to_string())
        .collect();
    if !cut.is_empty() {
        out.add(
            "pci.config",
            Severity::Warn,
            25,
            format!(
                "configuration space partly unread for {} of {} PCI functions (without root the kernel gives the first 64 bytes): their capabilities, PCI Express links and ASPM state are unknown",
                cut.len(),
                f.pci.devices.len()
            ),
            "run cpushield audit as root".into(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shield::snapshot::Irq;
    use crate::sys::pci::{parse_config, testing::config};
    use crate::sys::Sys;

    fn cpus(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    fn dev(addr: &str, cfg: Vec<u8>) -> PciDevice {
        PciDevice {
            address: Bdf::parse(addr).unwrap(),
            vendor: None,
            device: None,
            class: Some(0x010180),
            irq: None,
            msi_irqs: Vec::new(),
            numa_node: None,
            local_cpus: None,
            link_l0s_aspm: None,
            link_l1_aspm: None,
            config: Some(parse_config(&cfg)),
            config_error: None,
        }
    }

    /// A conventional function: bus master as given, Latency Timer `lt`.
    fn conventional(addr: &str, master: bool, lt: u8) -> PciDevice {
        dev(
            addr,
            config(256, &[(0x04, if master { 0x07 } else { 0x03 }), (0x0d, lt)]),
        )
    }

    /// A PCI Express function of `port_type` with LnkCap/LnkCtl as given;
    /// a bridge header (secondary bus `sec`) for ports.
    fn express(addr: &str, port_type: u8, sec: Option<u8>, lnkcap: u32, lnkctl: u16) -> PciDevice {
        let mut b = config(
            256,
            &[
                (0x04, 0x07),
                (0x06, 0x10),
                (0x34, 0x40),
                (0x40, 0x10),
                (0x42, port_type << 4),
            ],
        );
        if let Some(s) = sec {
            b[0x0e] = 1;
            b[0x19] = s;
        }
        b[0x4c..0x50].copy_from_slice(&lnkcap.to_le_bytes());
        b[0x50..0x52].copy_from_slice(&lnkctl.to_le_bytes());
        dev(addr, b)
    }

    fn find<'a>(v: &'a [crate::finding::Finding], id: &str) -> &'a crate::finding::Finding {
        v.iter()
            .find(|f| f.id == id)
            .unwrap_or_else(|| panic!("no finding {id}: {v:?}"))
    }

    fn judge(f: &Facts) -> Vec<crate::finding::Finding> {
        let mut out = Findings::default();
        findings(f, &mut out);
        out.0
    }

    fn facts(devices: Vec<PciDevice>) -> Facts {
        Facts {
            targets: cpus("2-3"),
            online: cpus("0-3"),
            pci: PciFacts {
                devices,
                aspm_policy: Some("default".into()),
                error: None,
            },
            ..Facts::default()
        }
    }

    #[test]
    fn tenure_is_the_latency_timer_up_to_the_next_data_phase_step() {
        assert_eq!(tenure_clocks(0), 32);
        assert_eq!(tenure_clocks(1), 32);
        assert_eq!(tenure_clocks(32), 32);
        assert_eq!(tenure_clocks(33), 40);
        assert_eq!(tenure_clocks(80), 80);
        assert_eq!(tenure_clocks(81), 88);
        assert_eq!(tenure_clocks(0xf8), 248);
        assert_eq!(tenure_clocks(0xff), 256);
    }

    /// The report's table, function: Latency Timer as it lists it.
    const REPORT_TABLE: [(&str, u8); 21] = [
        ("0000:00:00.0", 0),
        ("0000:00:02.0", 1),
        ("0000:00:05.0", 1),
        ("0000:00:12.0", 0),
        ("0000:00:13.0", 80),
        ("0000:00:13.1", 0),
        ("0000:00:13.2", 0),
        ("0000:00:14.0", 80),
        ("0000:00:14.1", 0),
        ("0000:00:14.3", 80),
        ("0000:00:14.4", 81),
        ("0000:00:14.5", 80),
        ("0000:00:18.0", 80),
        ("0000:00:18.1", 80),
        ("0000:00:18.2", 80),
        ("0000:00:18.3", 80),
        ("0000:01:00.0", 0),
        ("0000:02:00.0", 0),
        ("0000:03:0b.0", 80),
        ("0000:03:0b.1", 0),
        ("0000:03:0b.2", 0),
    ];

    #[test]
    fn the_reports_table_gives_its_1160_cycles_and_2400_for_two_masters() {
        let tenures: Vec<u64> = REPORT_TABLE
            .iter()
            .map(|(_, lt)| tenure_clocks(*lt))
            .collect();
        assert_eq!(
            tenures,
            [32, 32, 32, 32, 80, 32, 32, 80, 32, 80, 88, 80, 80, 80, 80, 80, 32, 32, 80, 32, 32]
        );
        let bound: u64 = tenures.iter().sum();
        assert_eq!(
            (bound, format!("{:.1}", bound as f64 / PCI_MHZ)),
            (1160, "35.2".into())
        );
        let two = two_masters(bound);
        assert_eq!(
            (two, format!("{:.1}", two as f64 / PCI_MHZ)),
            (2400, "72.7".into())
        );
        // Every timer at 0: the "17" of its text, 17 × 32.
        let devices: Vec<PciDevice> = (0..17)
            .map(|i| conventional(&format!("0000:00:{i:02x}.0"), true, 0))
            .collect();
        let b = bus_bounds(&devices);
        assert_eq!(b.len(), 1);
        assert_eq!(
            (b[0].cycles, format!("{:.1}", b[0].us)),
            (544, "16.5".into())
        );
        assert_eq!(b[0].kind, BusKind::Conventional);
        // The same table as bus masters on one conventional bus.
        let devices: Vec<PciDevice> = REPORT_TABLE
            .iter()
            .enumerate()
            .map(|(i, (_, lt))| conventional(&format!("0000:00:{i:02x}.0"), true, *lt))
            .collect();
        let b = bus_bounds(&devices);
        assert_eq!(b[0].cycles, 1160);
    }

    #[test]
    fn the_bound_sums_the_bus_masters_of_each_conventional_bus() {
        let mut bridge = conventional("0000:00:1e.0", true, 0x20);
        let mut cfg = config(
            256,
            &[
                (0x04, 0x07),
                (0x0d, 0x20),
                (0x0e, 1),
                (0x19, 5),
                (0x1b, 0x40),
            ],
        );
        cfg[0x1a] = 5;
        bridge.config = Some(parse_config(&cfg));
        let devices = vec![
            conventional("0000:00:00.0", false, 0),
            conventional("0000:00:01.1", true, 0x40),
            bridge,
            conventional("0000:05:00.0", true, 0xf8),
            conventional("0000:05:01.0", true, 0x00),
            conventional("0000:05:02.0", false, 0xff),
        ];
        let b = bus_bounds(&devices);
        assert_eq!(
            b.iter().map(|b| b.bus.as_str()).collect::<Vec<_>>(),
            ["0000:00", "0000:05"]
        );
        // Bus 0: 01.1 (LT 64: 64) and the bridge as a device (LT 32: 32);
        // 00.0 is no bus master.
        assert_eq!(b[0].masters.len(), 2);
        assert_eq!(b[0].cycles, 64 + 32);
        // Bus 5: the bridge's secondary side (LT 64: 64), 00.0 (LT 248:
        // 248), 01.0 (LT 0: 32); 02.0 masters nothing.
        let m: Vec<(String, &str, u64)> = b[1]
            .masters
            .iter()
            .map(|m| (m.address.to_string(), m.side.as_str(), m.cycles))
            .collect();
        assert_eq!(
            m,
            [
                ("0000:00:1e.0".to_string(), "bridge", 64),
                ("0000:05:00.0".to_string(), "device", 248),
                ("0000:05:01.0".to_string(), "device", 32)
            ]
        );
        assert_eq!(b[1].cycles, 344);
        assert!(
            b[1].why.contains("behind PCI bridge 0000:00:1e.0"),
            "{}",
            b[1].why
        );
        let v = judge(&facts(devices));
        let bound = find(&v, "pci.bound");
        assert_eq!(bound.severity, Severity::Warn, "344 cycles = 10.4 µs");
        assert!(
            bound.reason.contains(
                "bus 0000:05 (3 bus masters) 344 cycles = 10.4 µs; two masters at once, as the report takes its two cores: 2 × 344 + 80 = 768 cycles = 23.3 µs; our extrapolation to the 4 online CPUs, each with an access waiting: 4 × 344 + 80 = 1456 cycles = 44.1 µs"
            ),
            "{}",
            bound.reason
        );
        assert!(
            bound
                .reason
                .contains("bus 0000:00 (2 bus masters) 96 cycles = 2.9 µs"),
            "{}",
            bound.reason
        );
    }

    #[test]
    fn pci_express_buses_have_no_bound_and_a_pcie_to_pci_bridge_makes_one() {
        let devices = vec![
            express("0000:00:1c.0", 4, Some(1), 0, 0),
            express("0000:01:00.0", 0, None, 0, 0),
            express("0000:00:1d.0", 7, Some(2), 0, 0),
            conventional("0000:02:00.0", true, 0x40),
            conventional("0000:00:1f.0", false, 0),
        ];
        let b = bus_bounds(&devices);
        assert_eq!(b.len(), 1, "{b:?}");
        assert_eq!(b[0].bus, "0000:02");
        assert!(b[0].why.contains("PCIe-to-PCI bridge 0000:00:1d.0"));
        // Without the conventional part: no bound at all.
        let v = judge(&facts(devices[..2].to_vec()));
        assert_eq!(find(&v, "pci.bound").severity, Severity::Ok);
        assert!(find(&v, "pci.bound")
            .reason
            .contains("no conventional PCI bus"));
    }

    #[test]
    fn aspm_enabled_links_are_named_with_their_exit_latencies_and_the_policy() {
        let cap = (3 << 10) | (6 << 12) | (4 << 15);
        let devices = vec![
            express("0000:00:1c.0", 4, Some(1), cap, 0b10),
            express("0000:01:00.0", 0, None, cap, 0b11),
            express("0000:02:00.0", 0, None, cap, 0b00),
        ];
        let v = judge(&facts(devices.clone()));
        let a = find(&v, "pci.aspm");
        assert_eq!((a.severity, a.impact), (Severity::Warn, 50));
        assert!(
            a.reason
                .contains("on 2 PCI Express link ends (policy default)"),
            "{}",
            a.reason
        );
        assert!(
            a.reason.contains("0000:00:1c.0 L1 (L1 exit 8µs-16µs)"),
            "{}",
            a.reason
        );
        assert!(
            a.reason
                .contains("0000:01:00.0 L0s L1 (L0s exit 2µs-4µs, L1 exit 8µs-16µs)"),
            "{}",
            a.reason
        );
        assert!(!a.reason.contains("0000:02:00.0"));
        assert!(a
            .next
            .contains("echo performance > /sys/module/pcie_aspm/parameters/policy"));
        assert!(a.next.contains("pcie_aspm.policy=performance"));
        // All off: fine.
        let off: Vec<PciDevice> = [("0000:00:1c.0", 4, Some(1)), ("0000:01:00.0", 0, None)]
            .into_iter()
            .map(|(a, t, s)| express(a, t, s, cap, 0))
            .collect();
        let v = judge(&facts(off));
        let a = find(&v, "pci.aspm");
        assert_eq!(a.severity, Severity::Ok);
        assert!(a.reason.contains("ASPM off on all 2"), "{}", a.reason);
        // Unprivileged: Link Control unread, the kernel's files say.
        let mut cut = express("0000:01:00.0", 0, None, cap, 0b10);
        cut.config = Some(parse_config(&config(64, &[(0x06, 0x10), (0x34, 0x40)])));
        let mut unknown = cut.clone();
        cut.link_l1_aspm = Some(true);
        let v = judge(&facts(vec![cut]));
        assert!(find(&v, "pci.aspm").reason.contains("0000:01:00.0 L1"));
        assert_eq!(find(&v, "pci.config").severity, Severity::Warn);
        unknown.link_l1_aspm = None;
        let v = judge(&facts(vec![unknown]));
        // No link/*_aspm file and nothing read: unknown, not "no link".
        let a = find(&v, "pci.aspm");
        assert_eq!(a.severity, Severity::Warn);
        assert!(
            a.reason.contains("ASPM state of 1 PCI functions unread"),
            "{}",
            a.reason
        );
        assert_eq!(a.next, "run cpushield audit as root");
    }

    #[test]
    fn a_boot_half_with_the_policy_waiting_for_a_reboot_says_reboot() {
        let cap = (3 << 10) | (4 << 15);
        let mut f = facts(vec![express("0000:01:00.0", 0, None, cap, 0b10)]);
        let extra = vec!["pcie_aspm.policy=performance".to_string()];
        let want = crate::boot::want(&cpus("2-3"), &[], (&cpus("0-3"), false), &extra).unwrap();
        let record = crate::boot::Record::debian_grub(want, true);
        let booted = crate::boot::BootFacts {
            cmdline: "ro quiet pcie_aspm=off".into(),
            ..Default::default()
        };
        f.boot = Some(crate::boot::judge(Some(&record), None, &booted));
        f.cmdline = super::super::parse::parse_cmdline(&booted.cmdline);
        let v = judge(&f);
        let a = find(&v, "pci.aspm");
        assert_eq!(a.severity, Severity::Warn);
        assert!(
            a.next
                .starts_with("reboot: the boot half has pcie_aspm.policy=performance"),
            "{}",
            a.next
        );
        assert!(
            a.reason.contains(
                "booted with pcie_aspm=off: the kernel leaves ASPM as the firmware set it"
            ),
            "{}",
            a.reason
        );
        // Without the boot half: the run-time tunable and the boot option.
        f.boot = None;
        let a = find(&judge(&f), "pci.aspm").next.clone();
        assert!(
            a.starts_with("echo performance > /sys/module/pcie_aspm/parameters/policy"),
            "{a}"
        );
    }

    #[test]
    fn irqs_on_the_targets_are_named_by_device_and_a_bound_one_is_said_apart() {
        let mut nic = conventional("0000:00:03.0", true, 0);
        nic.msi_irqs = vec![24, 25];
        nic.irq = Some(11);
        let mut disk = conventional("0000:00:04.0", true, 0);
        disk.irq = Some(10);
        let mut f = facts(vec![nic, disk]);
        let irq = |n, aff: &str, eff: &str| Irq {
            irq: n,
            name: String::new(),
            affinity: cpus(aff),
            effective: Some(cpus(eff)),
        };
        f.irqs = vec![
            irq(24, "0-3", "2"),
            irq(25, "0-1", "0"),
            irq(10, "0-3", "0"),
            irq(11, "2", "2"),
        ];
        let v = judge(&f);
        let p = find(&v, "pci.irq");
        assert_eq!(p.severity, Severity::Bad);
        assert!(
            p.reason.contains("0000:00:03.0 (class 0101, IRQ 24)"),
            "MSI vectors, not the legacy 11: {}",
            p.reason
        );
        assert!(!p.reason.contains("0000:00:04.0"), "{}", p.reason);
        f.own.publish(&crate::shield::facts::BoundIrqs(vec![24]));
        let v = judge(&f);
        let p = find(&v, "pci.irq");
        assert_eq!(p.severity, Severity::Warn, "10 may still be served there");
        assert!(p.reason.contains("0000:00:04.0 (class 0101, IRQ 10)"));
        assert!(
            p.reason.contains("bound there on request: 0000:00:03.0"),
            "{}",
            p.reason
        );
    }

    #[test]
    fn functions_on_another_node_are_named_with_their_local_cpus() {
        let mut near = conventional("0000:00:03.0", true, 0);
        near.numa_node = Some(0);
        let mut far = conventional("0000:80:03.0", true, 0);
        far.numa_node = Some(1);
        far.local_cpus = Some(cpus("4-7"));
        far.msi_irqs = vec![40];
        let mut f = facts(vec![near.clone(), far]);
        f.numa_nodes = [
            ("node0".to_string(), cpus("0-3")),
            ("node1".to_string(), cpus("4-7")),
        ]
        .into_iter()
        .collect();
        let v = judge(&f);
        let n = find(&v, "pci.numa");
        assert_eq!((n.severity, n.impact), (Severity::Warn, 20));
        assert!(
            n.reason.contains("0000:80:03.0 (node 1)") && !n.reason.contains("0000:00:03.0"),
            "{}",
            n.reason
        );
        assert!(n.next.contains("local_cpulist: 4-7"), "{}", n.next);
        f.own.publish(&crate::shield::facts::BoundIrqs(vec![40]));
        assert_eq!(find(&judge(&f), "pci.numa").impact, 50);
        // numa_node -1 everywhere: nothing to say.
        let v = judge(&facts(vec![conventional("0000:00:03.0", true, 0)]));
        assert_eq!(find(&v, "pci.numa").severity, Severity::Ok);
    }

    #[test]
    fn a_fixture_tree_is_read_and_judged_end_to_end() {
        // i440fx-like: host bridge (no master), PIIX3 IDE (master, LT 64)
        // and a PIIX4 ACPI function, all conventional, on bus 0.
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        use crate::sys::pci::testing::device;
        device(
            root,
            "0000:00:00.0",
            &[("class", "0x060000")],
            &config(256, &[(0x04, 0x00)]),
        );
        device(
            root,
            "0000:00:01.1",
            &[("class", "0x010180"), ("irq", "14")],
            &config(256, &[(0x04, 0x07), (0x0d, 0x40)]),
        );
        device(
            root,
            "0000:00:01.3",
            &[("class", "0x068000"), ("irq", "9")],
            &config(256, &[(0x04, 0x07), (0x0d, 0x00)]),
        );
        let pci = crate::sys::pci::read(&Sys::at(root));
        let r = report(&pci);
        assert_eq!(r.buses.len(), 1);
        assert_eq!((r.buses[0].cycles, r.buses[0].masters.len()), (64 + 32, 2));
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["buses"][0]["bus"], "0000:00");
        assert_eq!(json["buses"][0]["kind"], "conventional");
        assert_eq!(json["devices"][1]["address"], "0000:00:01.1");
        assert_eq!(json["devices"][1]["config"]["latency_timer"], 64);
        let mut f = facts(pci.devices);
        f.pci.aspm_policy = None;
        let v = judge(&f);
        let b = find(&v, "pci.bound");
        assert_eq!(b.severity, Severity::Ok, "96 cycles = 2.9 µs");
        assert!(b.reason.contains("96 cycles = 2.9 µs"), "{}", b.reason);
        assert!(find(&v, "pci.aspm")
            .reason
            .contains("no PCI Express link (no pcie_aspm policy"));
        assert!(
            v.iter().all(|f| f.id != "pci.config"),
            "root reads: nothing unread"
        );
    }
}
