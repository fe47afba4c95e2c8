//! Which bootloader booted this machine, from what the firmware and the
//! loaders leave behind: the Boot Loader Interface's EFI variables
//! (`LoaderInfo`, `LoaderEntrySelected`, `StubInfo`), Secure Boot, and the
//! `BOOT_IMAGE=` that GRUB puts first on the kernel command line.
//!
//! `LoaderInfo` alone does not say systemd-boot: GRUB 2.12's `bli` module
//! sets it to "GRUB 2.12" too, so only a value starting with `systemd-boot`
//! counts as systemd-boot.

use serde::{Deserialize, Serialize};

use crate::sys::Sys;

/// The vendor GUID of the Boot Loader Interface's variables.
pub const LOADER_GUID: &str = "4a67b082-0a4c-41cf-b6c7-440b29bb8c4f";
/// The EFI global variables' GUID (`SecureBoot`).
const GLOBAL_GUID: &str = "8be4df61-93ca-11d2-aa0d-00e098032b8c";
const EFIVARS: &str = "sys/firmware/efi/efivars";

/// What the firmware and the loader say about this boot. Read only.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoaderFacts {
    /// Booted through UEFI (`/sys/firmware/efi` exists).
    pub efi: bool,
    /// `LoaderInfo`: the loader's name and version, e.g. "systemd-boot 257.9".
    pub loader_info: Option<String>,
    /// `LoaderEntrySelected`: the entry systemd-boot booted (file name
    /// without `.conf`; a UKI's ends in `.efi`).
    pub entry_selected: Option<String>,
    /// `StubInfo`: a unified kernel image ran through systemd-stub.
    pub stub_info: Option<String>,
    /// Secure Boot is on (`None`: not an EFI boot, or unknown).
    pub secure_boot: Option<bool>,
    /// The kernel command line starts with `BOOT_IMAGE=` (GRUB, syslinux).
    pub boot_image: bool,
}

/// The loader that booted this machine, as far as the facts tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BootedBy {
    /// systemd-boot started a type #1 entry (a kernel and its initrd).
    SystemdBoot,
    /// A unified kernel image ran through systemd-stub (started by
    /// systemd-boot or by the firmware).
    UnifiedKernelImage,
    /// GRUB (its `BOOT_IMAGE=`, or its `bli` module's `LoaderInfo`).
    Grub,
    /// Nothing tells (a BIOS boot by another loader, or QEMU's `-kernel`).
    Unknown,
}

impl BootedBy {
    /// Name for reports.
    pub fn describe(self) -> &'static str {
        match self {
            BootedBy::SystemdBoot => "systemd-boot",
            BootedBy::UnifiedKernelImage => "a unified kernel image (systemd-stub)",
            BootedBy::Grub => "GRUB",
            BootedBy::Unknown => "unknown",
        }
    }
}

impl LoaderFacts {
    /// Reads the facts through `sys` (efivarfs and `/proc/cmdline`).
    pub fn read(sys: &Sys) -> LoaderFacts {
        let var = |name: &str, guid: &str| -> Option<Vec<u8>> {
            let bytes = std::fs::read(sys.path(&format!("{EFIVARS}/{name}-{guid}"))).ok()?;
            // efivarfs: 4 bytes of attributes, then the data
            (bytes.len() > 4).then(|| bytes[4..].to_vec())
        };
        let text = |name: &str| var(name, LOADER_GUID).and_then(|d| utf16_string(&d));
        let cmdline = sys.read_trimmed("proc/cmdline").unwrap_or_default();
        LoaderFacts {
            efi: sys.exists("sys/firmware/efi"),
            loader_info: text("LoaderInfo"),
            entry_selected: text("LoaderEntrySelected"),
            stub_info: text("StubInfo"),
            secure_boot: var("SecureBoot", GLOBAL_GUID).map(|d| d.last() == Some(&1)),
            boot_image: cmdline.starts_with("BOOT_IMAGE="),
        }
    }

    /// The loader that booted, by the rules in the module doc.
    pub fn booted_by(&self) -> BootedBy {
        let entry_is_uki = self
            .entry_selected
            .as_deref()
            .is_some_and(|e| e.ends_with(".efi"));
        if self.stub_info.is_some() || entry_is_uki {
            BootedBy::UnifiedKernelImage
        } else if self
            .loader_info
            .as_deref()
            .is_some_and(|i| i.starts_with("systemd-boot"))
        {
            BootedBy::SystemdBoot
        } else if self.boot_image
            || self
                .loader_info
                .as_deref()
                .is_some_and(|i| i.starts_with("GRUB"))
        {
            BootedBy::Grub
        } else {
            BootedBy::Unknown
        }
    }
}

/// A NUL-terminated UTF-16LE string, as the Boot Loader Interface stores them.
pub fn utf16_string(data: &[u8]) -> Option<String> {
    let units: Vec<u16> = data
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .take_while(|&u| u != 0)
        .collect();
    String::from_utf16(&units).ok().filter(|s| !s.is_empty())
}

/// [`utf16_string`]'s inverse with the efivarfs attribute bytes in front:
/// the file a loader leaves in `/sys/firmware/efi/efivars` (for fixtures).
pub fn efivar_file(text: &str) -> Vec<u8> {
    let mut out = vec![0x06, 0, 0, 0];
    for u in text.encode_utf16().chain([0]) {
        out.extend_from_slice(&u.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(info: Option<&str>, entry: Option<&str>, stub: Option<&str>, bi: bool) -> LoaderFacts {
        LoaderFacts {
            efi: true,
            loader_info: info.map(str::to_string),
            entry_selected: entry.map(str::to_string),
            stub_info: stub.map(str::to_string),
            secure_boot: Some(false),
            boot_image: bi,
        }
    }

    #[test]
    fn the_booting_loader_is_told_from_its_variables() {
        let cases = [
            (
                facts(
                    Some("systemd-boot 257.9-1"),
                    Some("abc-6.12.conf"),
                    None,
                    false,
                ),
                BootedBy::SystemdBoot,
            ),
            // Older systemd-boot: the entry id without ".conf".
            (
                facts(Some("systemd-boot 252"), Some("abc-6.1"), None, false),
                BootedBy::SystemdBoot,
            ),
            (
                facts(Some("systemd-boot 257"), Some("abc-6.12.efi"), None, false),
                BootedBy::UnifiedKernelImage,
            ),
            (
                facts(
                    Some("systemd-boot 257"),
                    None,
                    Some("systemd-stub 257"),
                    false,
                ),
                BootedBy::UnifiedKernelImage,
            ),
            // GRUB 2.12's bli module sets LoaderInfo too.
            (facts(Some("GRUB 2.12"), None, None, true), BootedBy::Grub),
            (facts(Some("GRUB 2.12"), None, None, false), BootedBy::Grub),
            (facts(None, None, None, true), BootedBy::Grub),
            (facts(None, None, None, false), BootedBy::Unknown),
        ];
        for (f, want) in cases {
            assert_eq!(f.booted_by(), want, "{f:?}");
        }
    }

    #[test]
    fn efivar_strings_round_trip_and_empty_ones_are_none() {
        let file = efivar_file("systemd-boot 257.9");
        assert_eq!(
            utf16_string(&file[4..]).as_deref(),
            Some("systemd-boot 257.9")
        );
        assert_eq!(utf16_string(&[0, 0]), None);
        assert_eq!(utf16_string(&[]), None);
    }
}
