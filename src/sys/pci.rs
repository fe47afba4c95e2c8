//! PCI devices as sysfs shows them, read-only: what `audit` judges of the
//! bus and what `measure --probe pci` checks its `--device` against.
//!
//! Per device under `/sys/bus/pci/devices/<domain:bus:device.function>`:
//! `vendor`, `device`, `class`, `irq`, the names in `msi_irqs/`,
//! `numa_node`, `local_cpulist`, `link/l0s_aspm` and `link/l1_aspm`
//! (where the kernel has them), and the binary `config` file: the
//! device's configuration space. Unprivileged reads of `config` return
//! only its first 64 bytes (the standard header); the capability list
//! lies past them, so the PCI Express capability and its link registers
//! are then *unread*, said so rather than guessed ([`ConfigFacts::notes`]).
//! The active ASPM policy is the bracketed word of
//! `/sys/module/pcie_aspm/parameters/policy`.
//!
//! Decoding is pure ([`parse_config`] over bytes), so crafted
//! configuration spaces test it: a cut one, a capability list that
//! loops, a pointer out of range.

use serde::{Deserialize, Serialize};

use super::Sys;
use crate::cpulist::CpuSet;

/// Where sysfs lists the PCI devices.
pub const DEVICES: &str = "sys/bus/pci/devices";
/// The kernel's ASPM policy (`[default] performance powersave powersupersave`).
pub const ASPM_POLICY: &str = "sys/module/pcie_aspm/parameters/policy";

/// Config space offsets of the standard header (PCI Local Bus 3.0, 6.1).
mod reg {
    pub const COMMAND: usize = 0x04;
    pub const STATUS: usize = 0x06;
    pub const LATENCY_TIMER: usize = 0x0D;
    pub const HEADER_TYPE: usize = 0x0E;
    pub const SECONDARY_BUS: usize = 0x19;
    pub const SUBORDINATE_BUS: usize = 0x1A;
    pub const SECONDARY_LATENCY_TIMER: usize = 0x1B;
    pub const CAPABILITIES: usize = 0x34;
    /// Command register bit 2: the device may master the bus.
    pub const COMMAND_MASTER: u16 = 1 << 2;
    /// Status register bit 4: the capability list at 0x34 is valid.
    pub const STATUS_CAP_LIST: u16 = 1 << 4;
    /// Capability ID of PCI Express.
    pub const CAP_ID_EXP: u8 = 0x10;
    /// PCI Express capability: capabilities register (port type in 7:4).
    pub const EXP_FLAGS: usize = 0x02;
    /// PCI Express capability: Link Capabilities.
    pub const EXP_LNKCAP: usize = 0x0C;
    /// PCI Express capability: Link Control.
    pub const EXP_LNKCTL: usize = 0x10;
}

/// The size of the header every function has, and of an unprivileged read.
pub const HEADER_BYTES: usize = 64;

/// A PCI function's address, `domain:bus:device.function`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bdf {
    /// PCI domain (segment).
    pub domain: u32,
    /// Bus number.
    pub bus: u8,
    /// Device number, 0..=31.
    pub device: u8,
    /// Function number, 0..=7.
    pub function: u8,
}

impl Bdf {
    /// Parses `0000:00:1f.0` (sysfs's form) or `00:1f.0` (lspci's,
    /// domain 0), hexadecimal, either case; `None` for anything else.
    pub fn parse(text: &str) -> Option<Bdf> {
        let t = text.trim();
        let (domain, rest) = match t.matches(':').count() {
            2 => {
                let (d, r) = t.split_once(':')?;
                (d, r)
            }
            1 => ("0", t),
            _ => return None,
        };
        let (bus, rest) = rest.split_once(':')?;
        let (device, function) = rest.split_once('.')?;
        let hex = |s: &str, max_len: usize| {
            (!s.is_empty() && s.len() <= max_len && s.bytes().all(|b| b.is_ascii_hexdigit()))
                .then(|| u32::from_str_radix(s, 16).ok())
                .flatten()
        };
        let bdf = Bdf {
            domain: hex(domain, 8)?,
            bus: hex(bus, 2)? as u8,
            device: u8::try_from(hex(device, 2)?).ok().filter(|&d| d < 32)?,
            function: u8::try_from(hex(function, 1)?).ok().filter(|&f| f < 8)?,
        };
        Some(bdf)
    }

    /// The bus as `domain:bus` (`0000:00`).
    pub fn bus_name(&self) -> String {
        format!("{:04x}:{:02x}", self.domain, self.bus)
    }
}

impl std::fmt::Display for Bdf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

impl Serialize for Bdf {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Bdf {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Bdf::parse(&s).ok_or_else(|| serde::de::Error::custom(format!("not a PCI address: {s}")))
    }
}

/// An ASPM exit latency as Link Capabilities encodes it (3 bits), with
/// the range the PCI Express Base Specification (7.5.3.6) gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitLatency {
    /// The 3-bit code.
    pub code: u8,
    /// Lower bound of the range, ns.
    pub min_ns: u64,
    /// Upper bound, ns (`None`: "more than" the lower bound).
    pub max_ns: Option<u64>,
}

impl ExitLatency {
    /// L0s exit latency, Link Capabilities bits 14:12: below 64 ns, then
    /// doubling ranges to 2-4 µs, then more than 4 µs.
    pub fn l0s(code: u8) -> ExitLatency {
        Self::doubling(code & 7, 64)
    }

    /// L1 exit latency, Link Capabilities bits 17:15: below 1 µs, then
    /// doubling ranges to 32-64 µs, then more than 64 µs.
    pub fn l1(code: u8) -> ExitLatency {
        Self::doubling(code & 7, 1000)
    }

    fn doubling(code: u8, base_ns: u64) -> ExitLatency {
        match code {
            0 => ExitLatency {
                code,
                min_ns: 0,
                max_ns: Some(base_ns),
            },
            7 => ExitLatency {
                code,
                min_ns: base_ns << 6,
                max_ns: None,
            },
            c => ExitLatency {
                code,
                min_ns: base_ns << (c - 1),
                max_ns: Some(base_ns << c),
            },
        }
    }

    /// The worst case the range allows, ns (its upper bound; "more than
    /// X" counts as X).
    pub fn worst_ns(&self) -> u64 {
        self.max_ns.unwrap_or(self.min_ns)
    }
}

impl std::fmt::Display for ExitLatency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = |ns: u64| {
            if ns >= 1000 {
                format!("{}µs", ns / 1000)
            } else {
                format!("{ns}ns")
            }
        };
        match self.max_ns {
            Some(max) if self.min_ns == 0 => write!(f, "<{}", t(max)),
            Some(max) => write!(f, "{}-{}", t(self.min_ns), t(max)),
            None => write!(f, ">{}", t(self.min_ns)),
        }
    }
}

/// ASPM link states, as a pair of flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AspmStates {
    /// L0s.
    pub l0s: bool,
    /// L1.
    pub l1: bool,
}

impl AspmStates {
    fn of_bits(bits: u32) -> AspmStates {
        AspmStates {
            l0s: bits & 1 != 0,
            l1: bits & 2 != 0,
        }
    }

    /// `L0s L1`, `L1`, ... or `off`.
    pub fn describe(&self) -> String {
        match (self.l0s, self.l1) {
            (true, true) => "L0s L1".into(),
            (true, false) => "L0s".into(),
            (false, true) => "L1".into(),
            (false, false) => "off".into(),
        }
    }

    /// Whether any state is set.
    pub fn any(&self) -> bool {
        self.l0s || self.l1
    }
}

/// The link of a PCI Express function, from its PCI Express capability.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PcieLink {
    /// Offset of the PCI Express capability in config space.
    pub cap_offset: u8,
    /// Device/port type (capabilities register bits 7:4): 0 endpoint,
    /// 1 legacy endpoint, 4 root port, 5 upstream port, 6 downstream
    /// port, 7 PCIe-to-PCI bridge, 8 PCI-to-PCIe bridge, 9 root complex
    /// integrated endpoint, 10 root complex event collector.
    pub port_type: u8,
    /// Whether the type has a link (9 and 10 have none: the rest is `None`).
    pub has_link: bool,
    /// ASPM support, Link Capabilities bits 11:10.
    pub aspm_support: Option<AspmStates>,
    /// L0s exit latency, Link Capabilities bits 14:12.
    pub l0s_exit: Option<ExitLatency>,
    /// L1 exit latency, Link Capabilities bits 17:15.
    pub l1_exit: Option<ExitLatency>,
    /// ASPM enabled, Link Control bits 1:0.
    pub aspm_enabled: Option<AspmStates>,
}

impl PcieLink {
    /// The port type's name.
    pub fn port_name(&self) -> &'static str {
        match self.port_type {
            0 => "endpoint",
            1 => "legacy endpoint",
            4 => "root port",
            5 => "upstream port",
            6 => "downstream port",
            7 => "PCIe-to-PCI bridge",
            8 => "PCI-to-PCIe bridge",
            9 => "integrated endpoint",
            10 => "event collector",
            _ => "unknown type",
        }
    }
}

/// What reading the capability list found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum CapList {
    /// Status bit 4 is clear: the function has no capability list.
    None,
    /// Every capability, by ID, in list order.
    Read {
        /// Capability IDs.
        ids: Vec<u8>,
    },
    /// The list goes past the bytes read (not root: 64 bytes): the
    /// capabilities from `at` on are unread.
    Cut {
        /// IDs read before the cut.
        ids: Vec<u8>,
        /// The first pointer past the bytes read.
        at: u8,
    },
    /// The list is broken: a pointer below 0x40 or one seen before (a loop).
    Broken {
        /// IDs read before the break.
        ids: Vec<u8>,
        /// What is wrong.
        why: String,
    },
}

/// What a function's configuration space says, as far as it was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigFacts {
    /// Bytes read (`config`'s size for root: 256 or 4096; 64 otherwise).
    pub bytes_read: usize,
    /// Header type, bits 6:0 (0 endpoint, 1 PCI-to-PCI bridge, 2 CardBus).
    pub header_type: Option<u8>,
    /// Latency Timer (0x0D), in bus clocks.
    pub latency_timer: Option<u8>,
    /// Bus master enable, command register bit 2.
    pub bus_master: Option<bool>,
    /// Bridges: the secondary bus number (0x19).
    pub secondary_bus: Option<u8>,
    /// Bridges: the subordinate (highest) bus number (0x1A).
    pub subordinate_bus: Option<u8>,
    /// Bridges: the secondary Latency Timer (0x1B), in bus clocks.
    pub secondary_latency_timer: Option<u8>,
    /// The capability list.
    pub capabilities: CapList,
    /// The PCI Express capability and its link, when found.
    pub pcie: Option<PcieLink>,
    /// What could not be read or decoded, in words.
    pub notes: Vec<String>,
}

impl ConfigFacts {
    /// Whether the function is a PCI-to-PCI bridge (header type 1).
    pub fn is_bridge(&self) -> bool {
        self.header_type == Some(1)
    }

    /// Whether it has a PCI Express capability: `Some(false)` only when
    /// the whole capability list was read without finding one.
    pub fn is_pcie(&self) -> Option<bool> {
        match (&self.pcie, &self.capabilities) {
            (Some(_), _) => Some(true),
            (None, CapList::None | CapList::Read { .. }) => Some(false),
            (None, _) => None,
        }
    }
}

fn byte(b: &[u8], at: usize) -> Option<u8> {
    b.get(at).copied()
}

fn word(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

fn dword(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes([
        *b.get(at)?,
        *b.get(at + 1)?,
        *b.get(at + 2)?,
        *b.get(at + 3)?,
    ]))
}

/// Decodes a configuration space as far as `bytes` go (little endian, as
/// sysfs's `config` gives it). Pure.
pub fn parse_config(bytes: &[u8]) -> ConfigFacts {
    let mut notes = Vec::new();
    let len = bytes.len();
    if len < HEADER_BYTES {
        notes.push(format!(
            "config space cut at {len} bytes: the header has {HEADER_BYTES}"
        ));
    }
    let header_type = byte(bytes, reg::HEADER_TYPE).map(|h| h & 0x7f);
    let bridge = header_type == Some(1);
    let command = word(bytes, reg::COMMAND);
    let status = word(bytes, reg::STATUS);
    let capabilities = match status {
        Some(s) if s & reg::STATUS_CAP_LIST != 0 => walk_capabilities(bytes),
        Some(_) => CapList::None,
        None => CapList::Cut {
            ids: Vec::new(),
            at: reg::STATUS as u8,
        },
    };
    match &capabilities {
        CapList::Cut { at, .. } if len == HEADER_BYTES => notes.push(format!(
            "config space read: {HEADER_BYTES} bytes only (the kernel gives the rest to root): the capability list at 0x{at:02x} is unread"
        )),
        CapList::Cut { at, ids } if len > HEADER_BYTES => notes.push(format!(
            "capability list continues at 0x{at:02x}, past the {len} bytes read ({} read before)",
            ids.len()
        )),
        CapList::Broken { why, .. } => notes.push(format!("capability list broken: {why}")),
        _ => {}
    }
    let pcie = cap_offset(bytes, &capabilities, reg::CAP_ID_EXP)
        .map(|at| pcie_link(bytes, at, &mut notes));
    ConfigFacts {
        bytes_read: len,
        header_type,
        latency_timer: byte(bytes, reg::LATENCY_TIMER),
        bus_master: command.map(|c| c & reg::COMMAND_MASTER != 0),
        secondary_bus: bridge.then(|| byte(bytes, reg::SECONDARY_BUS)).flatten(),
        subordinate_bus: bridge.then(|| byte(bytes, reg::SUBORDINATE_BUS)).flatten(),
        secondary_latency_timer: bridge
            .then(|| byte(bytes, reg::SECONDARY_LATENCY_TIMER))
            .flatten(),
        capabilities,
        pcie,
        notes,
    }
}

/// Walks the capability list from the pointer at 0x34: each entry's ID
/// at its offset and the next pointer after it (low two bits ignored, as
/// the spec reserves them). Stops at a 0 pointer, at a pointer into the
/// header (below 0x40), at one seen before, or where the bytes end.
fn walk_capabilities(bytes: &[u8]) -> CapList {
    let mut ids = Vec::new();
    let Some(mut at) = byte(bytes, reg::CAPABILITIES).map(|p| p & 0xfc) else {
        return CapList::Cut {
            ids,
            at: reg::CAPABILITIES as u8,
        };
    };
    let mut seen = [false; 64];
    while at != 0 {
        if (at as usize) < HEADER_BYTES {
            return CapList::Broken {
                ids,
                why: format!("pointer 0x{at:02x} points into the header (below 0x40)"),
            };
        }
        if std::mem::replace(&mut seen[at as usize / 4], true) {
            return CapList::Broken {
                ids,
                why: format!("the list loops back to 0x{at:02x}"),
            };
        }
        let (Some(id), Some(next)) = (byte(bytes, at as usize), byte(bytes, at as usize + 1))
        else {
            return CapList::Cut { ids, at };
        };
        ids.push(id);
        at = next & 0xfc;
    }
    CapList::Read { ids }
}

/// The offset of the first capability `id` in a list that was walked.
fn cap_offset(bytes: &[u8], caps: &CapList, id: u8) -> Option<u8> {
    let ids = match caps {
        CapList::Read { ids } | CapList::Cut { ids, .. } | CapList::Broken { ids, .. } => ids,
        CapList::None => return None,
    };
    let index = ids.iter().position(|&i| i == id)?;
    // Walk again to the index-th entry: the list was already checked.
    let mut at = byte(bytes, reg::CAPABILITIES)? & 0xfc;
    for _ in 0..index {
        at = byte(bytes, at as usize + 1)? & 0xfc;
    }
    Some(at)
}

fn pcie_link(bytes: &[u8], at: u8, notes: &mut Vec<String>) -> PcieLink {
    let base = at as usize;
    let port_type = word(bytes, base + reg::EXP_FLAGS).map_or(0xff, |f| ((f >> 4) & 0xf) as u8);
    let has_link = !matches!(port_type, 9 | 10);
    let lnkcap = has_link
        .then(|| dword(bytes, base + reg::EXP_LNKCAP))
        .flatten();
    let lnkctl = has_link
        .then(|| word(bytes, base + reg::EXP_LNKCTL))
        .flatten();
    if has_link && (lnkcap.is_none() || lnkctl.is_none()) {
        notes.push(format!(
            "PCI Express link registers at 0x{:02x}-0x{:02x} lie past the {} bytes read",
            base + reg::EXP_LNKCAP,
            base + reg::EXP_LNKCTL + 1,
            bytes.len()
        ));
    }
    PcieLink {
        cap_offset: at,
        port_type,
        has_link,
        aspm_support: lnkcap.map(|c| AspmStates::of_bits(c >> 10)),
        l0s_exit: lnkcap.map(|c| ExitLatency::l0s(((c >> 12) & 7) as u8)),
        l1_exit: lnkcap.map(|c| ExitLatency::l1(((c >> 15) & 7) as u8)),
        aspm_enabled: lnkctl.map(|c| AspmStates::of_bits(u32::from(c))),
    }
}

/// The active policy in the text of `pcie_aspm/parameters/policy`: the
/// bracketed word. Pure.
pub fn active_policy(text: &str) -> Option<String> {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'))
        .map(str::to_string)
}

/// One PCI function as sysfs shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PciDevice {
    /// Its address.
    pub address: Bdf,
    /// `vendor` (`0x8086`).
    pub vendor: Option<u16>,
    /// `device`.
    pub device: Option<u16>,
    /// `class` (`0x060100`: base class, subclass, programming interface).
    pub class: Option<u32>,
    /// `irq`: the legacy (INTx) or first IRQ; `None` when 0 or unreadable.
    pub irq: Option<u32>,
    /// The IRQs in `msi_irqs/` (MSI and MSI-X vectors), ascending.
    pub msi_irqs: Vec<u32>,
    /// `numa_node` (`None`: -1, no node, or unreadable).
    pub numa_node: Option<u32>,
    /// `local_cpulist`: the CPUs near the device.
    pub local_cpus: Option<CpuSet>,
    /// `link/l0s_aspm` and `link/l1_aspm` where the kernel has them
    /// (`None`: absent): ASPM as the kernel enabled it on the link.
    pub link_l0s_aspm: Option<bool>,
    /// See `link_l0s_aspm`.
    pub link_l1_aspm: Option<bool>,
    /// The decoded configuration space (`None`: `config` unreadable).
    pub config: Option<ConfigFacts>,
    /// Why `config` could not be read.
    pub config_error: Option<String>,
}

impl PciDevice {
    /// Every IRQ of the device: MSI vectors, else the legacy IRQ.
    pub fn irqs(&self) -> Vec<u32> {
        if self.msi_irqs.is_empty() {
            self.irq.into_iter().collect()
        } else {
            self.msi_irqs.clone()
        }
    }

    /// The class as `0x0601`-style base class and subclass, for tables.
    pub fn class_code(&self) -> String {
        self.class.map_or("-".into(), |c| format!("{:04x}", c >> 8))
    }

    /// ASPM enabled on its link: Link Control when read, else the kernel's
    /// `link/*_aspm` files; `None` when neither says.
    pub fn aspm_enabled(&self) -> Option<AspmStates> {
        let ctl = self
            .config
            .as_ref()
            .and_then(|c| c.pcie.as_ref())
            .and_then(|p| p.aspm_enabled);
        ctl.or(match (self.link_l0s_aspm, self.link_l1_aspm) {
            (None, None) => None,
            (a, b) => Some(AspmStates {
                l0s: a.unwrap_or(false),
                l1: b.unwrap_or(false),
            }),
        })
    }
}

/// Every PCI function on the machine, and the ASPM policy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PciFacts {
    /// The functions, by address.
    pub devices: Vec<PciDevice>,
    /// The active ASPM policy (`None`: the kernel has no `pcie_aspm`).
    pub aspm_policy: Option<String>,
    /// Why the device list could not be read (no sysfs PCI bus).
    pub error: Option<String>,
}

fn hex_u32(text: &str) -> Option<u32> {
    let t = text.trim();
    u32::from_str_radix(t.strip_prefix("0x").unwrap_or(t), 16).ok()
}

/// Reads one function under [`DEVICES`]. Only reads.
pub fn read_device(sys: &Sys, address: Bdf) -> PciDevice {
    let dir = format!("{DEVICES}/{address}");
    let text = |f: &str| sys.read_trimmed(&format!("{dir}/{f}")).ok();
    let flag = |f: &str| text(f).map(|v| v == "1");
    let mut msi_irqs: Vec<u32> = sys
        .list(&format!("{dir}/msi_irqs"))
        .unwrap_or_default()
        .iter()
        .filter_map(|n| n.parse().ok())
        .collect();
    msi_irqs.sort_unstable();
    let (config, config_error) = match sys.read_bytes(&format!("{dir}/config")) {
        Ok(b) => (Some(parse_config(&b)), None),
        Err(e) => (None, Some(e.to_string())),
    };
    PciDevice {
        address,
        vendor: text("vendor").and_then(|v| hex_u32(&v)).map(|v| v as u16),
        device: text("device").and_then(|v| hex_u32(&v)).map(|v| v as u16),
        class: text("class").and_then(|v| hex_u32(&v)),
        irq: text("irq").and_then(|v| v.parse().ok()).filter(|&i| i != 0),
        msi_irqs,
        numa_node: text("numa_node")
            .and_then(|v| v.parse::<i64>().ok())
            .and_then(|n| u32::try_from(n).ok()),
        local_cpus: text("local_cpulist").and_then(|v| CpuSet::parse_list(&v).ok()),
        link_l0s_aspm: flag("link/l0s_aspm"),
        link_l1_aspm: flag("link/l1_aspm"),
        config,
        config_error,
    }
}

/// The addresses listed under [`DEVICES`], sorted; entries that are not
/// PCI addresses are left out.
pub fn list(sys: &Sys) -> super::Result<Vec<Bdf>> {
    let mut v: Vec<Bdf> = sys
        .list(DEVICES)?
        .iter()
        .filter_map(|n| Bdf::parse(n).filter(|b| b.to_string() == *n))
        .collect();
    v.sort();
    Ok(v)
}

/// Reads every PCI function and the ASPM policy. Only reads; a machine
/// without a PCI bus in sysfs gives no devices and says why.
pub fn read(sys: &Sys) -> PciFacts {
    let aspm_policy = sys.read(ASPM_POLICY).ok().and_then(|t| active_policy(&t));
    match list(sys) {
        Ok(addresses) => PciFacts {
            devices: addresses.into_iter().map(|a| read_device(sys, a)).collect(),
            aspm_policy,
            error: None,
        },
        Err(e) => PciFacts {
            devices: Vec::new(),
            aspm_policy,
            error: Some(e.to_string()),
        },
    }
}

/// Writes a PCI function into a fixture root for tests: its sysfs files
/// and `config` bytes. Test builds only.
#[cfg(test)]
pub(crate) mod testing {
    use std::path::Path;

    /// A crafted configuration space: `len` bytes of zeros with the
    /// vendor, device, class and the given bytes set.
    pub fn config(len: usize, set: &[(usize, u8)]) -> Vec<u8> {
        let mut b = vec![0u8; len];
        for &(at, v) in set {
            if at < len {
                b[at] = v;
            }
        }
        b
    }

    /// Creates `sys/bus/pci/devices/ADDR` under `root` with `files`
    /// (name, text) and the binary `config`.
    pub fn device(root: &Path, addr: &str, files: &[(&str, &str)], config: &[u8]) {
        let dir = root.join(super::DEVICES).join(addr);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text) in files {
            let p = dir.join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, format!("{text}\n")).unwrap();
        }
        std::fs::write(dir.join("config"), config).unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::testing::config;
    use super::*;

    /// A PCIe endpoint: 256 bytes, capability list 0x40 (power management)
    /// → 0x50 (PCI Express, endpoint) with LnkCap and LnkCtl as given.
    fn pcie_endpoint(lnkcap: u32, lnkctl: u16) -> Vec<u8> {
        let mut b = config(
            256,
            &[
                (0x04, 0x06),
                (0x06, 0x10),
                (0x0d, 0x00),
                (0x34, 0x40),
                (0x40, 0x01),
                (0x41, 0x50),
                (0x50, 0x10),
                (0x51, 0x00),
                (0x52, 0x02),
                (0x53, 0x00),
            ],
        );
        b[0x5c..0x60].copy_from_slice(&lnkcap.to_le_bytes());
        b[0x60..0x62].copy_from_slice(&lnkctl.to_le_bytes());
        b
    }

    #[test]
    fn addresses_parse_in_sysfs_and_lspci_form_only() {
        let b = Bdf::parse("0000:00:1f.0").unwrap();
        assert_eq!((b.domain, b.bus, b.device, b.function), (0, 0, 0x1f, 0));
        assert_eq!(Bdf::parse("03:00.1").unwrap().to_string(), "0000:03:00.1");
        assert_eq!(
            Bdf::parse("10000:0A:1F.7").unwrap().to_string(),
            "10000:0a:1f.7"
        );
        assert_eq!(b.bus_name(), "0000:00");
        for bad in [
            "",
            "0000:00:1f",
            "0000:00:20.0",
            "0000:00:1f.8",
            "0000:100:00.0",
            "x:00:00.0",
            "0000:00:00.0:1",
            "00:00.",
            " :00.0",
            "0000:00:-1.0",
            "0000:+0:00.0",
        ] {
            assert_eq!(Bdf::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn exit_latencies_decode_to_the_spec_ranges() {
        let l1: Vec<String> = (0..8).map(|c| ExitLatency::l1(c).to_string()).collect();
        assert_eq!(
            l1,
            [
                "<1µs",
                "1µs-2µs",
                "2µs-4µs",
                "4µs-8µs",
                "8µs-16µs",
                "16µs-32µs",
                "32µs-64µs",
                ">64µs"
            ]
        );
        let l0s: Vec<String> = (0..8).map(|c| ExitLatency::l0s(c).to_string()).collect();
        assert_eq!(
            l0s,
            [
                "<64ns",
                "64ns-128ns",
                "128ns-256ns",
                "256ns-512ns",
                "512ns-1µs",
                "1µs-2µs",
                "2µs-4µs",
                ">4µs"
            ]
        );
        assert_eq!(ExitLatency::l1(4).worst_ns(), 16_000);
        assert_eq!(ExitLatency::l1(7).worst_ns(), 64_000);
    }

    #[test]
    fn a_pcie_link_decodes_support_exit_latencies_and_what_is_enabled() {
        // LnkCap: ASPM L0s and L1 supported (11:10 = 11), L0s exit code 6
        // (2-4 µs), L1 exit code 4 (8-16 µs); LnkCtl: L1 enabled (1:0 = 10).
        let cap = (0b11 << 10) | (6 << 12) | (4 << 15);
        let c = parse_config(&pcie_endpoint(cap, 0b10));
        assert_eq!(
            c.capabilities,
            CapList::Read {
                ids: vec![0x01, 0x10]
            }
        );
        let p = c.pcie.as_ref().unwrap();
        assert_eq!((p.cap_offset, p.port_type, p.has_link), (0x50, 0, true));
        assert_eq!(
            p.aspm_support,
            Some(AspmStates {
                l0s: true,
                l1: true
            })
        );
        assert_eq!(p.l0s_exit.unwrap().to_string(), "2µs-4µs");
        assert_eq!(p.l1_exit.unwrap().to_string(), "8µs-16µs");
        assert_eq!(
            p.aspm_enabled,
            Some(AspmStates {
                l0s: false,
                l1: true
            })
        );
        assert_eq!(c.is_pcie(), Some(true));
        assert_eq!(c.bus_master, Some(true));
        assert!(c.notes.is_empty(), "{:?}", c.notes);
        // Nothing enabled.
        let c = parse_config(&pcie_endpoint(cap, 0b00));
        assert_eq!(c.pcie.unwrap().aspm_enabled, Some(AspmStates::default()));
    }

    #[test]
    fn an_unprivileged_64_byte_read_says_the_capabilities_are_unread() {
        let full = pcie_endpoint(3 << 10, 0b11);
        let c = parse_config(&full[..64]);
        assert_eq!(c.bytes_read, 64);
        assert_eq!(
            c.capabilities,
            CapList::Cut {
                ids: vec![],
                at: 0x40
            }
        );
        assert_eq!(c.pcie, None);
        assert_eq!(c.is_pcie(), None, "unknown, not 'no'");
        // The header itself is read.
        assert_eq!(
            (c.latency_timer, c.bus_master, c.header_type),
            (Some(0), Some(true), Some(0))
        );
        assert!(
            c.notes.iter().any(|n| n.contains("64 bytes only")),
            "{:?}",
            c.notes
        );
        // Cut inside the PCIe capability: found, its link registers unread.
        let c = parse_config(&full[..0x58]);
        let p = c.pcie.unwrap();
        assert_eq!((p.aspm_support, p.aspm_enabled), (None, None));
        assert!(
            c.notes
                .iter()
                .any(|n| n.contains("0x5c-0x61 lie past the 88 bytes")),
            "{:?}",
            c.notes
        );
        // Shorter than the header.
        let c = parse_config(&full[..5]);
        assert_eq!((c.latency_timer, c.bus_master), (None, None));
        assert!(c.notes[0].contains("cut at 5 bytes"), "{:?}", c.notes);
    }

    #[test]
    fn a_looping_list_and_a_pointer_into_the_header_are_broken_not_followed() {
        // 0x40 → 0x50 → 0x40: a loop.
        let b = config(
            256,
            &[
                (0x06, 0x10),
                (0x34, 0x40),
                (0x40, 0x05),
                (0x41, 0x50),
                (0x50, 0x09),
                (0x51, 0x40),
            ],
        );
        let c = parse_config(&b);
        match &c.capabilities {
            CapList::Broken { ids, why } => {
                assert_eq!(ids, &[0x05, 0x09]);
                assert!(why.contains("loops back to 0x40"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        assert!(
            c.notes.iter().any(|n| n.contains("broken")),
            "{:?}",
            c.notes
        );
        assert_eq!(c.is_pcie(), None);
        // A pointer into the header.
        let b = config(
            256,
            &[(0x06, 0x10), (0x34, 0x40), (0x40, 0x05), (0x41, 0x10)],
        );
        match parse_config(&b).capabilities {
            CapList::Broken { why, .. } => {
                assert!(why.contains("0x10 points into the header"), "{why}")
            }
            other => panic!("{other:?}"),
        }
        // A self-loop, and the low two bits of pointers ignored.
        let b = config(
            256,
            &[(0x06, 0x10), (0x34, 0x43), (0x40, 0x10), (0x41, 0x42)],
        );
        let c = parse_config(&b);
        assert!(
            matches!(c.capabilities, CapList::Broken { .. }),
            "{:?}",
            c.capabilities
        );
        assert_eq!(
            c.pcie.unwrap().cap_offset,
            0x40,
            "the capability before the loop is used"
        );
        // Status bit 4 clear: no list, whatever 0x34 holds.
        let b = config(256, &[(0x34, 0x40), (0x40, 0x10)]);
        let c = parse_config(&b);
        assert_eq!(c.capabilities, CapList::None);
        assert_eq!(c.is_pcie(), Some(false));
    }

    #[test]
    fn a_bridge_has_its_secondary_bus_and_latency_timer() {
        let b = config(
            256,
            &[
                (0x04, 0x07),
                (0x0d, 0x20),
                (0x0e, 0x81),
                (0x19, 0x02),
                (0x1a, 0x04),
                (0x1b, 0x40),
            ],
        );
        let c = parse_config(&b);
        assert!(c.is_bridge());
        assert_eq!(
            c.header_type,
            Some(1),
            "the multi-function bit is not the type"
        );
        assert_eq!(
            (
                c.latency_timer,
                c.secondary_bus,
                c.subordinate_bus,
                c.secondary_latency_timer
            ),
            (Some(0x20), Some(2), Some(4), Some(0x40))
        );
        // An endpoint has none of the bridge's fields.
        let c = parse_config(&config(64, &[(0x19, 0x02)]));
        assert_eq!(c.secondary_bus, None);
    }

    #[test]
    fn the_active_policy_is_the_bracketed_word() {
        assert_eq!(
            active_policy("[default] performance powersave powersupersave\n").as_deref(),
            Some("default")
        );
        assert_eq!(
            active_policy("default [performance] powersave").as_deref(),
            Some("performance")
        );
        assert_eq!(active_policy("default performance"), None);
    }

    #[test]
    fn devices_are_read_from_a_fixture_tree() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        super::testing::device(
            root,
            "0000:00:01.1",
            &[
                ("vendor", "0x8086"),
                ("device", "0x7010"),
                ("class", "0x010180"),
                ("irq", "14"),
                ("numa_node", "-1"),
                ("local_cpulist", "0-3"),
            ],
            &config(64, &[(0x04, 0x07), (0x0d, 0x40)]),
        );
        super::testing::device(
            root,
            "0000:00:03.0",
            &[
                ("irq", "11"),
                ("numa_node", "1"),
                ("msi_irqs/25", "msix"),
                ("msi_irqs/24", "msix"),
                ("link/l1_aspm", "1"),
            ],
            &pcie_endpoint(3 << 10, 0),
        );
        std::fs::create_dir_all(root.join(DEVICES).join("not-a-device")).unwrap();
        std::fs::create_dir_all(root.join("sys/module/pcie_aspm/parameters")).unwrap();
        std::fs::write(root.join(ASPM_POLICY), "default [powersave] performance\n").unwrap();
        let f = read(&Sys::at(root));
        assert_eq!(f.aspm_policy.as_deref(), Some("powersave"));
        assert_eq!(f.devices.len(), 2);
        let ide = &f.devices[0];
        assert_eq!(
            (ide.vendor, ide.device, ide.class),
            (Some(0x8086), Some(0x7010), Some(0x010180))
        );
        assert_eq!((ide.irq, ide.numa_node), (Some(14), None));
        assert_eq!(ide.irqs(), vec![14]);
        assert_eq!(ide.class_code(), "0101");
        assert_eq!(ide.local_cpus.as_ref().unwrap().to_string(), "0-3");
        assert_eq!(ide.config.as_ref().unwrap().latency_timer, Some(0x40));
        assert_eq!(ide.aspm_enabled(), None);
        let net = &f.devices[1];
        assert_eq!(net.irqs(), vec![24, 25], "MSI vectors, not the legacy IRQ");
        assert_eq!(net.numa_node, Some(1));
        // Link Control was read: it wins over the kernel's file.
        assert_eq!(net.aspm_enabled(), Some(AspmStates::default()));
        assert_eq!(net.link_l1_aspm, Some(true));
        // No PCI bus at all.
        let empty = tempfile::tempdir().unwrap();
        let f = read(&Sys::at(empty.path()));
        assert!(f.devices.is_empty());
        assert!(
            f.error.as_deref().unwrap().contains("sys/bus/pci/devices"),
            "{f:?}"
        );
    }
}
