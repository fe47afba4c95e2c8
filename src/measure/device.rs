//! The pci probe's target: which PCI function, which register, checked
//! against the machine before anything is opened for the loop.
//!
//! By default the probe times 4-byte reads of the function's
//! configuration space: `pread` of `/sys/bus/pci/devices/BDF/config` at a
//! dword offset. Config space reads have no side effects on the device
//! (the kernel may wake a runtime-suspended function to answer). A
//! register of a memory BAR is read only when the user names the BAR
//! (`--device-bar N`), through a read-only mapping of its `resourceN`
//! file: some device registers clear on read, so that is the user's
//! choice, never a default.
//!
//! Every refusal names the input and what would be valid here: the
//! functions present, the readable size of config space, the memory BARs
//! and their sizes.

use serde::{Deserialize, Serialize};

use super::MeasureError;
use crate::sys::pci::{self, Bdf};
use crate::sys::Sys;

/// `resource` flags: an I/O port range.
const IORESOURCE_IO: u64 = 0x100;
/// `resource` flags: a memory range.
const IORESOURCE_MEM: u64 = 0x200;

/// What the pci probe reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Region {
    /// The function's configuration space (`config`).
    Config,
    /// Memory BAR N (`resourceN`).
    Bar(u8),
}

impl std::fmt::Display for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Region::Config => write!(f, "config space"),
            Region::Bar(n) => write!(f, "BAR {n}"),
        }
    }
}

/// A checked pci probe target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceTarget {
    /// The function.
    pub address: Bdf,
    /// Config space or a memory BAR.
    pub region: Region,
    /// Byte offset of the 4-byte register in the region.
    pub offset: u64,
    /// The region's size as checked: config bytes readable here (256 or
    /// 4096 for root, 64 otherwise), or the BAR's length.
    pub region_bytes: u64,
    /// The file read or mapped, relative to the root.
    pub file: String,
}

impl DeviceTarget {
    /// `config space 0x00 of 0000:00:1f.0`.
    pub fn describe(&self) -> String {
        format!("{} 0x{:02x} of {}", self.region, self.offset, self.address)
    }
}

fn invalid(option: &'static str, value: String, valid: String) -> MeasureError {
    MeasureError::InvalidOption {
        option,
        value,
        valid,
    }
}

/// The functions present, for an error: `0000:00:00.0, 0000:00:01.0, ...`.
fn present(sys: &Sys) -> String {
    match pci::list(sys) {
        Ok(v) if v.is_empty() => "none here".into(),
        Ok(v) => {
            let names: Vec<String> = v.iter().map(Bdf::to_string).collect();
            crate::input::brief_to(&names.join(", "), 200)
        }
        Err(e) => format!("none: {e}"),
    }
}

/// One line of a function's `resource` file: start, end, flags.
fn resource_line(text: &str, bar: u8) -> Option<(u64, u64, u64)> {
    let line = text.lines().nth(bar as usize)?;
    let v: Vec<u64> = line
        .split_whitespace()
        .map(|w| u64::from_str_radix(w.trim_start_matches("0x"), 16).ok())
        .collect::<Option<_>>()?;
    (v.len() >= 3).then(|| (v[0], v[1], v[2]))
}

/// The memory BARs of a `resource` file: `0 (16 KiB), 4 (16 KiB)`. Pure.
pub fn memory_bars(resource: &str) -> String {
    let bars: Vec<String> = (0..6u8)
        .filter_map(|n| {
            let (start, end, flags) = resource_line(resource, n)?;
            (flags & IORESOURCE_MEM != 0 && end > start)
                .then(|| format!("{n} ({} bytes)", end - start + 1))
        })
        .collect();
    if bars.is_empty() {
        "none".into()
    } else {
        bars.join(", ")
    }
}

/// Checks `--device`, `--device-bar` and `--device-offset` against the
/// machine behind `sys` (reads only: the function's directory, its
/// `config` for the readable size, its `resource` for a BAR). Pure of
/// side effects on the device.
pub fn check(
    sys: &Sys,
    device: &str,
    bar: Option<u8>,
    offset: Option<u64>,
) -> Result<DeviceTarget, MeasureError> {
    let address = Bdf::parse(device).ok_or_else(|| {
        invalid(
            "--device",
            device.to_string(),
            "a PCI address in hex, DDDD:BB:DD.F or BB:DD.F (device 00-1f, function 0-7), e.g. 0000:00:1f.0".into(),
        )
    })?;
    let dir = format!("{}/{address}", pci::DEVICES);
    if !sys.exists(&dir) {
        return Err(invalid(
            "--device",
            device.to_string(),
            format!("a PCI function under /{}: {}", pci::DEVICES, present(sys)),
        ));
    }
    let offset = offset.unwrap_or(0);
    let (region, region_bytes, file) = match bar {
        None => {
            let file = format!("{dir}/config");
            let len = sys.read_bytes(&file)?.len() as u64;
            (Region::Config, len, file)
        }
        Some(n) => {
            if n > 5 {
                return Err(invalid("--device-bar", n.to_string(), "0..=5".into()));
            }
            let resource = sys.read(&format!("{dir}/resource"))?;
            let bars = memory_bars(&resource);
            let bad = |why: String| {
                invalid(
                    "--device-bar",
                    n.to_string(),
                    format!("{why}; memory BARs of {address}: {bars}"),
                )
            };
            let (start, end, flags) = resource_line(&resource, n)
                .ok_or_else(|| bad(format!("BAR {n} is not in /{dir}/resource")))?;
            if end <= start {
                return Err(bad(format!("BAR {n} of {address} is not implemented")));
            }
            if flags & IORESOURCE_IO != 0 || flags & IORESOURCE_MEM == 0 {
                return Err(bad(format!(
                    "BAR {n} of {address} is an I/O port range, not memory: it cannot be mapped"
                )));
            }
            let file = format!("{dir}/resource{n}");
            if !sys.exists(&file) {
                return Err(bad(format!("/{file} is absent")));
            }
            (Region::Bar(n), end - start + 1, file)
        }
    };
    if !offset.is_multiple_of(4) || offset.saturating_add(4) > region_bytes {
        let more = match region {
            Region::Config if region_bytes <= pci::HEADER_BYTES as u64 => {
                " (without root the kernel gives the first 64 bytes)"
            }
            _ => "",
        };
        return Err(invalid(
            "--device-offset",
            format!("0x{offset:x}"),
            format!(
                "a multiple of 4 from 0x0 to 0x{:x}: {region} of {address} has {region_bytes} bytes here{more}",
                region_bytes.saturating_sub(4)
            ),
        ));
    }
    Ok(DeviceTarget {
        address,
        region,
        offset,
        region_bytes,
        file,
    })
}

/// Parses `--device-offset`: hex with `0x`, or decimal.
pub fn parse_offset(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => t.parse(),
    };
    parsed.map_err(|_| {
        format!(
            "{}: give a byte offset, hex (0x10) or decimal (16)",
            crate::input::quote(text)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::pci::testing::{config, device};

    /// Two functions: an IDE controller (an I/O BAR 0 and a memory BAR
    /// 1 of 4 KiB with its resource1 file) and a host bridge.
    fn machine(config_len: usize) -> (tempfile::TempDir, Sys) {
        let dir = tempfile::tempdir().unwrap();
        let resource = "0x000000000000c000 0x000000000000c007 0x0000000000040101\n\
                        0x00000000fe000000 0x00000000fe000fff 0x0000000000040200\n\
                        0x0000000000000000 0x0000000000000000 0x0000000000000000\n";
        device(
            dir.path(),
            "0000:00:01.1",
            &[("resource", resource), ("resource0", ""), ("resource1", "")],
            &config(config_len, &[(0, 0x86), (1, 0x80)]),
        );
        device(dir.path(), "0000:00:00.0", &[], &config(256, &[]));
        let sys = Sys::at(dir.path());
        (dir, sys)
    }

    fn err(sys: &Sys, d: &str, bar: Option<u8>, off: Option<u64>) -> String {
        check(sys, d, bar, off).unwrap_err().to_string()
    }

    #[test]
    fn config_space_is_the_default_and_its_readable_size_bounds_the_offset() {
        let (_d, sys) = machine(256);
        let t = check(&sys, "00:01.1", None, None).unwrap();
        assert_eq!(t.address.to_string(), "0000:00:01.1");
        assert_eq!(
            (t.region, t.offset, t.region_bytes),
            (Region::Config, 0, 256)
        );
        assert_eq!(t.file, "sys/bus/pci/devices/0000:00:01.1/config");
        assert_eq!(t.describe(), "config space 0x00 of 0000:00:01.1");
        assert_eq!(
            check(&sys, "0000:00:01.1", None, Some(0xfc))
                .unwrap()
                .offset,
            0xfc
        );
        let e = err(&sys, "0000:00:01.1", None, Some(0x100));
        assert!(
            e.contains("--device-offset \"0x100\"")
                && e.contains("0x0 to 0xfc")
                && e.contains("256 bytes"),
            "{e}"
        );
        let e = err(&sys, "0000:00:01.1", None, Some(0x0e));
        assert!(e.contains("a multiple of 4"), "{e}");
        // Without root: 64 bytes, and the error says why.
        let (_d, sys) = machine(64);
        let e = err(&sys, "0000:00:01.1", None, Some(0x40));
        assert!(
            e.contains("0x0 to 0x3c") && e.contains("without root"),
            "{e}"
        );
    }

    #[test]
    fn a_bad_or_absent_address_names_the_functions_present() {
        let (_d, sys) = machine(256);
        let e = err(&sys, "0000:00:1f.9", None, None);
        assert!(
            e.contains("--device \"0000:00:1f.9\"") && e.contains("DDDD:BB:DD.F"),
            "{e}"
        );
        let e = err(&sys, "0000:00:1f.0", None, None);
        assert!(
            e.contains("under /sys/bus/pci/devices: 0000:00:00.0, 0000:00:01.1"),
            "{e}"
        );
    }

    #[test]
    fn a_bar_must_be_an_implemented_memory_bar_and_the_offset_within_it() {
        let (_d, sys) = machine(256);
        let t = check(&sys, "0000:00:01.1", Some(1), Some(0x10)).unwrap();
        assert_eq!((t.region, t.region_bytes), (Region::Bar(1), 4096));
        assert_eq!(t.file, "sys/bus/pci/devices/0000:00:01.1/resource1");
        assert_eq!(t.describe(), "BAR 1 0x10 of 0000:00:01.1");
        let e = err(&sys, "0000:00:01.1", Some(0), None);
        assert!(
            e.contains("I/O port range, not memory")
                && e.contains("memory BARs of 0000:00:01.1: 1 (4096 bytes)"),
            "{e}"
        );
        let e = err(&sys, "0000:00:01.1", Some(2), None);
        assert!(
            e.contains("BAR 2 of 0000:00:01.1 is not implemented"),
            "{e}"
        );
        let e = err(&sys, "0000:00:01.1", Some(4), None);
        assert!(e.contains("BAR 4 is not in"), "{e}");
        let e = err(&sys, "0000:00:01.1", Some(1), Some(0x1000));
        assert!(
            e.contains("0x0 to 0xffc: BAR 1 of 0000:00:01.1 has 4096 bytes"),
            "{e}"
        );
        let e = err(&sys, "0000:00:01.1", Some(6), None);
        assert!(e.contains("0..=5"), "{e}");
    }

    #[test]
    fn offsets_parse_in_hex_or_decimal() {
        assert_eq!(parse_offset("0x10"), Ok(16));
        assert_eq!(parse_offset("0XfC"), Ok(0xfc));
        assert_eq!(parse_offset("16"), Ok(16));
        for bad in ["", "0x", "ten", "-4", "0x1g"] {
            assert!(
                parse_offset(bad)
                    .unwrap_err()
                    .contains("hex (0x10) or decimal"),
                "{bad}"
            );
        }
    }
}
