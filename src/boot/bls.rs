//! Boot Loader Specification type #1 entries (`loader/entries/*.conf`) and
//! `/etc/kernel/cmdline`: what systemd-boot boots, and what GRUB boots on
//! Fedora and RHEL (its `blscfg`), where `grubby` edits the same places.
//!
//! cpushield edits them as `grubby --update-kernel=ALL --args` does, but
//! byte-exactly undoable: the first `options` line of each entry (GRUB's
//! `blscfg` reads only the first), and `/etc/kernel/cmdline`, from which
//! `kernel-install` writes the entries of kernels installed later. Where
//! that file is absent, `kernel-install` copies `/proc/cmdline`; cpushield
//! creates it, so a kernel installed after a removal does not copy options
//! that are still running, and removal deletes it again.

use crate::sys::Sys;

use super::edit::{self, own_key, Edit, FileChange};
use super::BootError;

/// `kernel-install`'s command line for new entries, relative to the root.
pub const KERNEL_CMDLINE: &str = "etc/kernel/cmdline";

/// The directories holding `loader/entries` among those `kernel-install`
/// and `bootctl` look at (`/efi`, `/boot`, `/boot/efi`), relative to the root.
pub fn entry_dirs(sys: &Sys) -> Vec<String> {
    ["efi", "boot", "boot/efi"]
        .iter()
        .map(|b| format!("{b}/loader/entries"))
        .filter(|d| sys.path(d).is_dir())
        .collect()
}

/// An entry's id: its file name without `.conf` and without the boot
/// counter (`+LEFT[-DONE]`) that systemd-boot renames while counting.
pub fn entry_id(name: &str) -> &str {
    let stem = name.strip_suffix(".conf").unwrap_or(name);
    match stem.rsplit_once('+') {
        Some((id, counter))
            if !counter.is_empty()
                && counter
                    .split('-')
                    .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) =>
        {
            id
        }
        _ => stem,
    }
}

/// The entry files cpushield edits in `dir`: `*.conf` with a `linux` key
/// (type #1 kernels), not a rescue entry, and (`token`) this machine's.
pub fn entries(sys: &Sys, dir: &str, token: Option<&str>) -> Vec<String> {
    sys.list(dir)
        .unwrap_or_default()
        .into_iter()
        .filter(|n| n.ends_with(".conf") && !n.contains("rescue"))
        .filter(|n| token.is_none_or(|t| n.starts_with(&format!("{t}-"))))
        .map(|n| format!("{dir}/{n}"))
        .filter(|p| {
            sys.read(p).is_ok_and(|t| {
                t.lines()
                    .any(|l| l.split_whitespace().next() == Some("linux"))
            })
        })
        .collect()
}

/// The file of entry `id` in `dir` now (its boot counter may have changed).
pub fn find_entry(sys: &Sys, path: &str) -> Option<String> {
    if sys.exists(path) {
        return Some(path.to_string());
    }
    let (dir, name) = path.rsplit_once('/')?;
    let id = entry_id(name);
    sys.list(dir)
        .ok()?
        .into_iter()
        .find(|n| n.ends_with(".conf") && entry_id(n) == id)
        .map(|n| format!("{dir}/{n}"))
}

/// This machine's entry token: `/etc/kernel/entry-token`, else the machine id.
pub fn token(sys: &Sys) -> Option<String> {
    ["etc/kernel/entry-token", "etc/machine-id"]
        .iter()
        .find_map(|f| sys.read_trimmed(f).ok().filter(|t| !t.is_empty()))
}

/// The edits for `options`: every entry, then `/etc/kernel/cmdline`.
/// `base` gives a file's content as the plan starts from (the previous
/// boot half taken out). `/proc/cmdline` (without `BOOT_IMAGE=` and
/// `initrd=`) seeds a created `/etc/kernel/cmdline`.
pub fn plan(
    sys: &Sys,
    entry_files: &[String],
    options: &[String],
    base: &dyn Fn(&str) -> Option<String>,
    proc_cmdline: &str,
) -> Result<Vec<FileChange>, BootError> {
    let mut out = Vec::new();
    for path in entry_files {
        let text = base(path).unwrap_or_default();
        if text.contains("$kernelopts") {
            return Err(BootError::Unsupported {
                bootloader: format!(
                    "BLS entries that take their options from GRUB's environment ($kernelopts in /{path}, RHEL 8)"
                ),
                instructions: format!(
                    "run: grub2-editenv - set \"kernelopts=$(grub2-editenv - list | sed -n 's/^kernelopts=//p') {}\"; then reboot",
                    options.join(" ")
                ),
            });
        }
        let (written, edit) = match edit::words_edit(&text, "options", options) {
            Some(done) => done,
            None => edit::block_edit(&text, &format!("options {}\n", options.join(" "))),
        };
        out.push(FileChange {
            path: path.clone(),
            before: Some(text),
            written,
            edit,
            made_dir: false,
        });
    }
    let cmdline = base(KERNEL_CMDLINE);
    let change = match cmdline {
        Some(text) => {
            let (written, edit) = match edit::words_edit(&text, "", options) {
                Some(done) => done,
                None => edit::block_edit(&text, &format!("{}\n", options.join(" "))),
            };
            FileChange {
                path: KERNEL_CMDLINE.into(),
                before: Some(text),
                written,
                edit,
                made_dir: false,
            }
        }
        None => {
            let mut words: Vec<&str> = proc_cmdline
                .split_whitespace()
                .filter(|w| !w.starts_with("BOOT_IMAGE=") && !w.starts_with("initrd="))
                .filter(|w| !own_key(w))
                .collect();
            words.extend(options.iter().map(String::as_str));
            FileChange {
                path: KERNEL_CMDLINE.into(),
                before: None,
                written: format!("{}\n", words.join(" ")),
                edit: Edit::Whole,
                made_dir: !sys.path("etc/kernel").is_dir(),
            }
        }
    };
    out.push(change);
    Ok(out)
}

/// What `file` lacks: the options missing from its line (an entry's first
/// `options`, the command line file's first line), or a key set twice.
pub fn lacks(sys: &Sys, path: &str, options: &[String]) -> Vec<String> {
    let Some(found) = find_entry(sys, path) else {
        return vec![format!("/{path} is gone")];
    };
    let text = sys.read(&found).unwrap_or_default();
    let key = if found == KERNEL_CMDLINE {
        ""
    } else {
        "options"
    };
    let words: Vec<String> = if key.is_empty() {
        text.split_whitespace().map(str::to_string).collect()
    } else {
        // The spec combines every options line; GRUB reads the first only.
        edit::line_words(&text, key).unwrap_or_default()
    };
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    edit::line_problems(&words, options, &format!("/{found}"))
}

/// Entries in `dirs` not among `known` whose options carry `options` as
/// cpushield appends them: written by `kernel-install` from
/// `/etc/kernel/cmdline` since. Their undo cuts those words and puts
/// back `lost`, the user's words that file lost to them.
pub fn later_entries(
    sys: &Sys,
    dirs: &[String],
    known: &[String],
    options: &[String],
    lost: &[String],
) -> Vec<FileChange> {
    let ours = options.iter().fold(String::new(), |s, w| s + " " + w);
    let known_ids: Vec<(&str, &str)> = known
        .iter()
        .filter_map(|p| p.rsplit_once('/'))
        .map(|(d, n)| (d, entry_id(n)))
        .collect();
    let mut out = Vec::new();
    for dir in dirs {
        for name in sys.list(dir).unwrap_or_default() {
            if !name.ends_with(".conf") || known_ids.contains(&(dir.as_str(), entry_id(&name))) {
                continue;
            }
            let path = format!("{dir}/{name}");
            let Ok(text) = sys.read(&path) else { continue };
            let has = text
                .lines()
                .any(|l| l.split_whitespace().next() == Some("options") && l.contains(&ours));
            if has {
                out.push(FileChange {
                    path,
                    before: None,
                    written: String::new(),
                    edit: Edit::Words {
                        key: "options".into(),
                        added: options.to_vec(),
                        removed: lost.to_vec(),
                    },
                    made_dir: false,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_ids_drop_the_boot_counter() {
        assert_eq!(entry_id("abc-6.12.conf"), "abc-6.12");
        assert_eq!(entry_id("abc-6.12+3.conf"), "abc-6.12");
        assert_eq!(entry_id("abc-6.12+2-1.conf"), "abc-6.12");
        assert_eq!(entry_id("abc-6.12+rt.conf"), "abc-6.12+rt");
        assert_eq!(entry_id("abc-6.12+.conf"), "abc-6.12+");
    }
}
