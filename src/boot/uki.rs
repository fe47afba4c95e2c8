//! Unified kernel images: systemd-stub (254 and later) appends the
//! `.cmdline` of every `*.addon.efi` in the ESP's `loader/addons/` to the
//! command line of each UKI it starts. cpushield makes one such addon with
//! `ukify build --cmdline=...` and never touches the UKIs themselves.
//!
//! An addon is a PE file: its `.cmdline` section is read back here. Under
//! Secure Boot the stub skips an addon that does not verify (with a log
//! line only), so cpushield refuses there instead of writing one that
//! would be silently ignored.

use object::{Object, ObjectSection};
use sha2::{Digest, Sha256};

use crate::sys::Sys;

/// cpushield's addon, relative to the ESP.
pub const ADDON: &str = "loader/addons/cpushield.addon.efi";
/// The stub `ukify` builds addons from (x86-64).
pub const ADDON_STUB: &str = "usr/lib/systemd/boot/efi/addonx64.efi.stub";

/// The ESP, relative to the root: the first of `/efi`, `/boot/efi`,
/// `/boot` holding an `EFI` directory.
pub fn esp(sys: &Sys) -> Option<String> {
    ["efi", "boot/efi", "boot"]
        .iter()
        .find(|d| sys.path(&format!("{d}/EFI")).is_dir())
        .map(|d| d.to_string())
}

/// The `ukify` program, if installed (Debian's `systemd-ukify`, Fedora's
/// `systemd-ukify`: `/usr/bin/ukify`; older layouts `/usr/lib/systemd/ukify`).
pub fn ukify(sys: &Sys) -> Option<&'static str> {
    ["usr/bin/ukify", "usr/lib/systemd/ukify"]
        .into_iter()
        .find(|p| sys.exists(p))
}

/// The text of a PE file's section (NUL padding and surrounding whitespace
/// trimmed), if it has one.
pub fn section_text(data: &[u8], name: &str) -> Option<String> {
    let file = object::read::pe::PeFile64::parse(data).ok()?;
    let section = file.section_by_name(name)?;
    let bytes = section.data().ok()?;
    let text = String::from_utf8_lossy(bytes);
    Some(
        text.trim_matches(|c: char| c == '\0' || c.is_whitespace())
            .to_string(),
    )
}

/// The hex SHA-256 of `data`.
pub fn sha256(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The UKI that booted, from `LoaderEntrySelected` (its file name in the
/// ESP's `EFI/Linux/`), relative to the root.
pub fn booted_uki(sys: &Sys, esp: &str, entry: Option<&str>) -> Option<String> {
    let name = entry?;
    let path = format!("{esp}/EFI/Linux/{name}");
    sys.exists(&path).then_some(path)
}

/// What an addon at `path` lacks: its `.cmdline` must be exactly `options`.
pub fn addon_lacks(sys: &Sys, path: &str, options: &[String]) -> Vec<String> {
    let Ok(data) = std::fs::read(sys.path(path)) else {
        return vec![format!("/{path} was not made")];
    };
    match section_text(&data, ".cmdline") {
        Some(cmdline) if cmdline == options.join(" ") => Vec::new(),
        Some(cmdline) => vec![format!(
            "/{path} has the command line '{cmdline}', not '{}'",
            options.join(" ")
        )],
        None => vec![format!("/{path} is not a PE file with a .cmdline section")],
    }
}
