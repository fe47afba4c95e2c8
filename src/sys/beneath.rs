//! Whether a path read from a record (the journal, the boot half's
//! `boot.json`) names what it seems to: a plain relative path (no `..`,
//! not absolute), resolved beneath the root through no symbolic link but
//! the kernel's own in sysfs. `off` and the boot half's removal ask this
//! before they act on such a path; paths the code makes itself need not.
//!
//! Resolution is `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`
//! where the kernel has it (5.6 and later), else a walk component by
//! component with `O_PATH | O_NOFOLLOW`. The walk also runs where `openat2`
//! met a link: sysfs's class and bus directories are the kernel's links
//! into `/sys/devices` (`/sys/class/net/eth0`,
//! `/sys/bus/workqueue/devices/writeback`), which a shield writes through;
//! a link on sysfs (where only the kernel makes them) whose target stays
//! under `/sys` is followed, any other link refuses the path.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use super::{syscalls, Sys};

/// At most this many of sysfs's links are followed in one path.
const MAX_LINKS: usize = 8;

/// Why `rel` is not a plain relative path, if it is not: empty, absolute,
/// a `.` or `..` component, an empty one (`a//b`, a trailing `/`), a NUL.
pub fn plain(rel: &str) -> Result<(), String> {
    if rel.is_empty() {
        return Err("an empty path".into());
    }
    if rel.starts_with('/') {
        return Err("an absolute path (a record holds paths relative to the root)".into());
    }
    if rel.contains('\0') {
        return Err("a NUL byte in the path".into());
    }
    for part in rel.split('/') {
        match part {
            "" => return Err("an empty component in the path".into()),
            "." | ".." => return Err(format!("a `{part}` component in the path")),
            _ => {}
        }
    }
    Ok(())
}

/// The root, opened once to resolve many paths beneath it.
#[derive(Debug)]
pub struct Beneath {
    root: OwnedFd,
}

impl Sys {
    /// The root opened to resolve record paths beneath it ([`Beneath::check`]).
    pub fn beneath(&self) -> io::Result<Beneath> {
        Ok(Beneath {
            root: syscalls::open_dir_path(self.root())?,
        })
    }
}

impl Beneath {
    /// Whether `rel` is a plain relative path that resolves beneath the
    /// root through no symbolic link but sysfs's own (see the module).
    /// A path that does not exist (a component missing) is fine: there is
    /// nothing there to act on, and a write never creates a file. The
    /// error says why, without the path.
    pub fn check(&self, rel: &str) -> Result<(), String> {
        plain(rel)?;
        match syscalls::open_beneath(self.root.as_fd(), rel) {
            Ok(_) => return Ok(()),
            Err(e) if missing(&e) => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
                return Err("it resolves out of the root".into())
            }
            // A link (ELOOP), an older kernel (ENOSYS), a filter (EPERM),
            // a rename under way (EAGAIN): walked.
            Err(_) => {}
        }
        self.walk(rel)
    }

    /// Resolves `rel` one component at a time, following only sysfs's
    /// links that stay under `/sys`.
    fn walk(&self, rel: &str) -> Result<(), String> {
        let mut path: Vec<String> = rel.split('/').map(str::to_string).collect();
        let mut links = 0;
        'resolve: loop {
            let mut dir: Option<OwnedFd> = None;
            for i in 0..path.len() {
                let at = dir.as_ref().map_or(self.root.as_fd(), |d| d.as_fd());
                let here = || format!("/{}", path[..=i].join("/"));
                let fd = match syscalls::open_nofollow(at, &path[i]) {
                    Ok(fd) => fd,
                    Err(e) if missing(&e) => return Ok(()),
                    Err(e) => return Err(format!("{} cannot be resolved: {e}", here())),
                };
                let link = syscalls::is_symlink(fd.as_fd())
                    .map_err(|e| format!("{} cannot be resolved: {e}", here()))?;
                if !link {
                    dir = Some(fd);
                    continue;
                }
                links += 1;
                let target =
                    kernel_link(at, &path[i]).map_err(|why| format!("{} {why}", here()))?;
                let within = followed(&path[..i], &target)
                    .filter(|p| p.first().is_some_and(|c| c == "sys") && links <= MAX_LINKS);
                let Some(mut next) = within else {
                    return Err(format!(
                        "{} is a symbolic link that leads out of /sys ({target})",
                        here()
                    ));
                };
                next.extend(path[i + 1..].iter().cloned());
                path = next;
                continue 'resolve;
            }
            return Ok(());
        }
    }
}

/// The target of the link `name` in `dir`, when it is one of sysfs's.
fn kernel_link(dir: BorrowedFd, name: &str) -> Result<String, String> {
    if !syscalls::on_sysfs(dir) {
        return Err("is a symbolic link".into());
    }
    syscalls::read_link(dir, name).map_err(|e| format!("is a link that cannot be read: {e}"))
}

/// The components of the relative link `target` followed from the
/// directory `dir` (components from the root); `None` for an absolute
/// target or one that climbs above the root.
fn followed(dir: &[String], target: &str) -> Option<Vec<String>> {
    if target.starts_with('/') {
        return None;
    }
    let mut out = dir.to_vec();
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                out.pop()?;
            }
            name => out.push(name.to_string()),
        }
    }
    Some(out)
}

/// A component is missing, or a file stands where a directory would.
fn missing(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_path_is_relative_with_no_dot_components() {
        assert_eq!(plain("proc/irq/9/smp_affinity_list"), Ok(()));
        for bad in [
            "",
            "/etc/shadow",
            "proc/irq/../../etc/shadow",
            "proc/./irq",
            "proc//irq",
            "proc/irq/",
            "proc/\0irq",
        ] {
            assert!(plain(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_planted_link_is_refused_wherever_it_stands_and_missing_is_fine() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let secret = tempfile::NamedTempFile::new().unwrap();
        std::fs::create_dir_all(root.join("proc/irq/9")).unwrap();
        std::fs::write(root.join("proc/irq/9/smp_affinity_list"), "0-3\n").unwrap();
        std::os::unix::fs::symlink(secret.path(), root.join("proc/irq/9/link")).unwrap();
        std::os::unix::fs::symlink("9", root.join("proc/irq/10")).unwrap();
        let b = Sys::at(root).beneath().unwrap();
        assert_eq!(b.check("proc/irq/9/smp_affinity_list"), Ok(()));
        assert_eq!(b.check("proc/irq/11/smp_affinity_list"), Ok(()), "missing");
        let e = b.check("proc/irq/9/link").unwrap_err();
        assert_eq!(e, "/proc/irq/9/link is a symbolic link");
        let e = b.check("proc/irq/10/smp_affinity_list").unwrap_err();
        assert_eq!(e, "/proc/irq/10 is a symbolic link", "a link in the middle");
        assert!(b.check("proc/irq/../../etc").is_err());
    }

    #[test]
    fn sysfs_links_are_followed_under_sys_only() {
        assert_eq!(
            followed(
                &["sys".into(), "class".into(), "net".into()],
                "../../devices/pci0/net/eth0"
            ),
            Some(vec![
                "sys".into(),
                "devices".into(),
                "pci0".into(),
                "net".into(),
                "eth0".into()
            ])
        );
        assert_eq!(followed(&["sys".into()], "../../etc"), None);
        assert_eq!(followed(&["sys".into()], "/etc"), None);
        // The running kernel's own links (read only): the writeback
        // workqueue's and a network interface's, as a shield writes them.
        let live = Sys::live().beneath().unwrap();
        for rel in [
            "sys/bus/workqueue/devices/writeback/cpumask",
            "sys/class/net/lo/queues/rx-0/rps_cpus",
        ] {
            if Sys::live().exists(rel) {
                assert_eq!(live.check(rel), Ok(()), "{rel}");
            }
        }
        assert!(
            live.check("proc/self/root/etc/passwd").is_err(),
            "procfs's links are not sysfs's"
        );
    }
}
