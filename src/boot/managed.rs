//! What the boot half manages, checked before its record (`boot.json`) is
//! acted on: a removal writes back each file's content from the record,
//! deletes the files it made and runs the bootloader's tool again; a new
//! write starts by taking the old one out. The record lives in a
//! directory only root may write (`/var/lib/cpushield`, 0700); this is
//! defence in depth behind that. A record that names a file the boot half
//! does not manage, a path with `..` or through a symbolic link, or a
//! command it does not run, is refused whole, by name, before anything is
//! changed.

use super::record::{Record, RECORD};
use super::{bls, grub, uki, BootError};
use crate::shield::journal::JournalError;
use crate::sys::Sys;

/// Where the ESP and BLS entries may be, relative to the root (as
/// `uki::esp` and `bls::entry_dirs` look for them).
const BOOT_DIRS: [&str; 3] = ["efi", "boot", "boot/efi"];

/// The configurations GRUB's tools generate (`backend`'s generators).
const GENERATED: [&str; 2] = [grub::GENERATED, "boot/grub2/grub.cfg"];

/// A file whose content the boot half writes and gives back: GRUB's
/// drop-in and defaults, `/etc/kernel/cmdline`, a BLS entry.
fn edited(path: &str) -> bool {
    [grub::DROPIN, grub::DEFAULTS, bls::KERNEL_CMDLINE].contains(&path)
        || BOOT_DIRS.iter().any(|b| {
            path.strip_prefix(&format!("{b}/loader/entries/"))
                .is_some_and(|name| !name.contains('/') && name.ends_with(".conf"))
        })
}

/// A file the bootloader's tool makes for the boot half: the addon.
fn made(path: &str) -> bool {
    BOOT_DIRS
        .iter()
        .any(|b| path == format!("{b}/{}", uki::ADDON))
}

/// A command the boot half runs: GRUB's generators (removal runs one
/// again), or `ukify` making the addon.
fn command(argv: &[String]) -> bool {
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    match argv.as_slice() {
        [] | ["update-grub"] => true,
        ["grub-mkconfig" | "grub2-mkconfig", "-o", out] => {
            GENERATED.iter().any(|g| out.strip_prefix('/') == Some(g))
        }
        [ukify, "build", cmdline, output] => {
            ["/usr/bin/ukify", "/usr/lib/systemd/ukify", "ukify"].contains(ukify)
                && cmdline.starts_with("--cmdline=")
                && output.strip_prefix("--output=/").is_some_and(made)
        }
        _ => false,
    }
}

/// Whether everything `record` names is what the boot half manages, each
/// path plain and resolved beneath the root through no symbolic link; a
/// refusal names the record and every path or command outside.
pub(super) fn check(sys: &Sys, record: &Record) -> Result<(), BootError> {
    let beneath = sys.beneath().map_err(|source| JournalError::Io {
        path: sys.path(RECORD),
        source,
    })?;
    let mut outside = Vec::new();
    let mut path = |p: &str, managed: bool, what: &str| {
        if !managed {
            outside.push(format!("/{p}: no {what} the boot half manages"));
        } else if let Err(why) = beneath.check(p) {
            outside.push(format!("/{p}: {why}"));
        }
    };
    for f in &record.files {
        path(&f.path, edited(&f.path), "file");
    }
    for m in &record.made {
        path(&m.path, made(&m.path), "file made for it");
    }
    if let Some(g) = &record.generated {
        path(
            &g.path,
            GENERATED.contains(&g.path.as_str()),
            "generated configuration",
        );
    }
    if !command(&record.command) {
        outside.push(format!(
            "the command {}: none the boot half runs",
            crate::input::quote_to(&record.command.join(" "), 120)
        ));
    }
    if outside.is_empty() {
        return Ok(());
    }
    Err(JournalError::Damaged {
        path: sys.path(RECORD),
        reason: format!(
            "it names what the boot half does not manage, and nothing was changed: {}",
            outside.join("; ")
        ),
    }
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::boot::record::Made;
    use crate::boot::BootWant;

    fn record() -> Record {
        let want = BootWant {
            cpus: crate::cpulist::CpuSet::parse_list("2-3").unwrap(),
            housekeeping: crate::cpulist::CpuSet::parse_list("0-1").unwrap(),
            options: vec!["nohz_full=2-3".into()],
        };
        Record::debian_grub(want, true)
    }

    #[test]
    fn a_record_of_the_boot_half_passes_and_one_naming_other_files_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let sys = Sys::at(dir.path());
        assert!(check(&sys, &record()).is_ok());
        let mut r = record();
        r.made.push(Made {
            path: format!("boot/efi/{}", uki::ADDON),
            sha256: String::new(),
            made_dir: false,
        });
        r.files[0].path = "boot/loader/entries/fedora-6.8.conf".into();
        assert!(check(&sys, &r).is_ok());
        for (forge, named) in [
            (
                (|r: &mut Record| r.files[0].path = "etc/shadow".into()) as fn(&mut Record),
                "/etc/shadow: no file the boot half manages",
            ),
            (
                |r: &mut Record| r.files[0].path = "etc/default/grub.d/../../shadow".into(),
                "no file the boot half manages",
            ),
            (
                |r: &mut Record| {
                    r.made.push(Made {
                        path: "etc/passwd".into(),
                        sha256: String::new(),
                        made_dir: true,
                    })
                },
                "/etc/passwd: no file made for it the boot half manages",
            ),
            (
                |r: &mut Record| r.command = vec!["sh".into(), "-c".into(), "id".into()],
                "the command \"sh -c id\": none the boot half runs",
            ),
        ] {
            let mut r = record();
            forge(&mut r);
            let err = check(&sys, &r).unwrap_err().to_string();
            assert!(err.contains(named) && err.contains("boot.json"), "{err}");
        }
    }

    #[test]
    fn a_managed_file_reached_through_a_planted_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("etc/default")).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), dir.path().join("etc/default/grub.d"))
            .unwrap();
        let err = check(&Sys::at(dir.path()), &record())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/etc/default/grub.d is a symbolic link"),
            "{err}"
        );
    }
}
