//! Files root writes, also in directories it does not own alone (the
//! node_exporter textfile directory, a report directory under `/tmp`, the
//! directory of `--histfile`): written whole or not at all, and never
//! through a link someone planted.
//!
//! The directory is opened once ([`Dir::open`]) and every step is made
//! relative to its descriptor, so that renaming or replacing the path
//! meanwhile changes nothing: a fresh temporary file of a random name
//! (`O_CREAT|O_EXCL|O_NOFOLLOW`, mode 0600, another name tried when one
//! exists), its content, its mode, fsync, `renameat` onto the final name
//! (which replaces a symlink there, never follows it), fsync of the
//! directory. After a crash the target holds either its old content or
//! the new one; a leftover temporary file is `.NAME.RANDOM.tmp`.
//!
//! A directory cpushield names itself (`./cpushield-compare-<unix time>`)
//! is made new ([`new_dir`]): never one that exists, which someone could
//! have made first.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags, CWD};

/// A durable write that failed: the file it was at, and why.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct DurableError {
    /// The file (the temporary one, the target or its directory).
    pub path: PathBuf,
    /// The system's error.
    #[source]
    pub source: io::Error,
}

/// How many random names are tried before giving up (each taken already).
const TRIES: usize = 32;

/// A directory held open, to write files in it safely.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

impl Dir {
    /// Opens the directory `path` (a symlink to a directory is followed:
    /// the caller named it).
    pub fn open(path: &Path) -> Result<Dir, DurableError> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = rustix::fs::open(path, flags, Mode::empty()).map_err(at(path))?;
        Ok(Dir {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// The directory's path, as opened.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Replaces the file `name` of this directory with `data`, of mode
    /// `mode` (see the module). `name` is one file name, no `/`.
    pub fn write(&self, name: &str, data: &[u8], mode: u32) -> Result<PathBuf, DurableError> {
        self.write_with(name, data, &|file| {
            rustix::fs::fchmod(file, Mode::from_raw_mode(mode))?;
            Ok(())
        })
    }

    /// Replaces the file `name` of this directory with `data` as
    /// [`Dir::write`] does, the new file taking the replaced one's mode,
    /// owner and extended attributes (its ACLs, its SELinux label): a
    /// configuration file of the system's (the bootloader's) stays as its
    /// owner made it. A file that was not there is made 0644.
    pub fn replace(&self, name: &str, data: &[u8]) -> Result<PathBuf, DurableError> {
        let old = rustix::fs::openat(
            &self.fd,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok();
        self.write_with(name, data, &|file| match &old {
            None => Ok(rustix::fs::fchmod(file, Mode::from_raw_mode(0o644))?),
            Some(old) => copy_metadata(old, file),
        })
    }

    /// Swaps the entries `a` and `b` of this directory in one step
    /// (`renameat2` with `RENAME_EXCHANGE`), then syncs the directory:
    /// after a crash each name holds either what it held or what the
    /// other held, never neither. Both must exist; file systems without
    /// the exchange (EINVAL) say so in the error.
    pub fn exchange(&self, a: &str, b: &str) -> Result<(), DurableError> {
        rustix::fs::renameat_with(&self.fd, a, &self.fd, b, rustix::fs::RenameFlags::EXCHANGE)
            .map_err(at(&self.path.join(b)))?;
        rustix::fs::fsync(&self.fd).map_err(at(&self.path))
    }

    /// [`Dir::write`] with `setup` making the temporary file's metadata.
    fn write_with(
        &self,
        name: &str,
        data: &[u8],
        setup: &dyn Fn(&File) -> io::Result<()>,
    ) -> Result<PathBuf, DurableError> {
        let target = self.path.join(name);
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            let e = io::Error::new(io::ErrorKind::InvalidInput, "not a file name");
            return Err(at(&target)(e));
        }
        let (tmp, file) = self.fresh(name)?;
        let tmp_path = self.path.join(&tmp);
        let written = write_whole(file, data, setup).map_err(at(&tmp_path));
        let renamed = written.and_then(|()| {
            rustix::fs::renameat(&self.fd, &tmp, &self.fd, name).map_err(at(&target))
        });
        if let Err(e) = renamed {
            let _ = rustix::fs::unlinkat(&self.fd, &tmp, rustix::fs::AtFlags::empty());
            return Err(e);
        }
        rustix::fs::fsync(&self.fd).map_err(at(&self.path))?;
        Ok(target)
    }

    /// A new temporary file beside `name`, of a name no one had.
    fn fresh(&self, name: &str) -> Result<(String, File), DurableError> {
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mut last = None;
        for _ in 0..TRIES {
            let tmp = format!(".{name}.{:016x}.tmp", fastrand::u64(..));
            match rustix::fs::openat(&self.fd, &tmp, flags, Mode::from_raw_mode(0o600)) {
                Ok(fd) => return Ok((tmp, File::from(fd))),
                Err(rustix::io::Errno::EXIST) => last = Some(tmp),
                Err(e) => return Err(at(&self.path.join(&tmp))(e)),
            }
        }
        let tmp = self.path.join(last.unwrap_or_default());
        Err(at(&tmp)(io::ErrorKind::AlreadyExists))
    }
}

/// Writes `data` to `file`, makes its metadata with `setup`, and syncs it.
fn write_whole(
    mut file: File,
    data: &[u8],
    setup: &dyn Fn(&File) -> io::Result<()>,
) -> io::Result<()> {
    file.write_all(data)?;
    setup(&file)?;
    file.sync_all()
}

/// Gives `to` the owner, mode and extended attributes of `from`.
fn copy_metadata(from: &OwnedFd, to: &File) -> io::Result<()> {
    let st = rustix::fs::fstat(from)?;
    use std::os::fd::AsRawFd;
    nix::unistd::fchown(
        to.as_raw_fd(),
        Some(nix::unistd::Uid::from_raw(st.st_uid)),
        Some(nix::unistd::Gid::from_raw(st.st_gid)),
    )?;
    rustix::fs::fchmod(to, Mode::from_raw_mode(st.st_mode & 0o7777))?;
    let mut names = vec![0u8; 4096];
    let n = match rustix::fs::flistxattr(from, &mut names) {
        Ok(n) => n,
        // A file system without extended attributes has none to copy.
        Err(rustix::io::Errno::OPNOTSUPP) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    for name in names[..n].split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let name = std::ffi::CString::new(name).map_err(io::Error::other)?;
        let mut value = vec![0u8; 65536];
        let len = rustix::fs::fgetxattr(from, &name, &mut value)?;
        rustix::fs::fsetxattr(to, &name, &value[..len], rustix::fs::XattrFlags::empty())?;
    }
    Ok(())
}

/// The error of an operation on `p`.
fn at<E: Into<io::Error>>(p: &Path) -> impl FnOnce(E) -> DurableError {
    let path = p.to_path_buf();
    move |e| DurableError {
        path,
        source: e.into(),
    }
}

/// The directory and the file name of `path`.
fn split(path: &Path) -> Result<(&Path, &str), DurableError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().and_then(|n| n.to_str());
    let e = || {
        at(path)(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a file name",
        ))
    };
    Ok((dir, name.ok_or_else(e)?))
}

/// Replaces `path` with `data`, mode 0600 (see the module): the journal,
/// the checkpoints, records only root reads.
pub fn write_atomic(path: &Path, data: &[u8]) -> Result<(), DurableError> {
    write_file(path, data, 0o600).map(|_| ())
}

/// Replaces `path` with `data`, of mode `mode` (0644 for a report or
/// the textfile that others read); see the module.
pub fn write_file(path: &Path, data: &[u8], mode: u32) -> Result<PathBuf, DurableError> {
    let (dir, name) = split(path)?;
    Dir::open(dir)?.write(name, data, mode)
}

/// Makes the directory `path` new, mode 0755, and gives its path: when
/// something is there already (a directory someone made first, a
/// symlink), `path-RANDOM` instead, never what was there.
pub fn new_dir(path: &Path) -> Result<PathBuf, DurableError> {
    let mut candidate = path.to_path_buf();
    for _ in 0..TRIES {
        match rustix::fs::mkdirat(CWD, &candidate, Mode::from_raw_mode(0o755)) {
            Ok(()) => return Ok(candidate),
            Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(at(&candidate)(e)),
        }
        let mut name = path.as_os_str().to_owned();
        name.push(format!("-{:08x}", fastrand::u32(..)));
        candidate = name.into();
    }
    Err(at(path)(io::ErrorKind::AlreadyExists))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{symlink, PermissionsExt};

    #[test]
    fn replaces_whole_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("checkpoint.json");
        write_atomic(&p, b"first").unwrap();
        write_atomic(&p, b"second").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"second");
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "only the target is left");
        let mode = fs::metadata(&p).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        write_file(&p, b"third", 0o644).unwrap();
        let mode = fs::metadata(&p).unwrap().permissions().mode();
        assert_eq!(
            mode & 0o777,
            0o644,
            "the mode asked for, whatever the umask"
        );
    }

    #[test]
    fn a_missing_directory_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("gone/checkpoint.json");
        let e = write_atomic(&p, b"x").unwrap_err();
        assert!(e.path.ends_with("gone"), "{e}");
    }

    #[test]
    fn a_symlink_at_the_final_name_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        fs::write(&secret, "root's").unwrap();
        let out = dir.path().join("out");
        fs::create_dir(&out).unwrap();
        symlink(&secret, out.join("cpushield.prom")).unwrap();
        // The temporary names of the old writers, planted too.
        symlink(&secret, out.join(".cpushield.prom.tmp")).unwrap();
        write_file(&out.join("cpushield.prom"), b"new", 0o644).unwrap();
        assert_eq!(fs::read_to_string(&secret).unwrap(), "root's");
        let meta = fs::symlink_metadata(out.join("cpushield.prom")).unwrap();
        assert!(meta.is_file(), "the link itself was replaced");
        assert_eq!(fs::read(out.join("cpushield.prom")).unwrap(), b"new");
    }

    /// A bootloader's file keeps its owner, mode and extended attributes
    /// through `replace`, and nothing is left beside it.
    #[test]
    fn replace_keeps_the_owner_mode_and_extended_attributes() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("grub");
        fs::write(&file, "old").unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o640)).unwrap();
        let chowned =
            nix::unistd::chown(&file, Some(nix::unistd::Uid::from_raw(65534)), None).is_ok();
        let attr = c"user.cpushield-test";
        let xattr =
            rustix::fs::setxattr(&file, attr, b"kept", rustix::fs::XattrFlags::empty()).is_ok();
        let d = Dir::open(dir.path()).unwrap();
        d.replace("grub", b"new").unwrap();
        let meta = fs::metadata(&file).unwrap();
        assert_eq!(fs::read_to_string(&file).unwrap(), "new");
        assert_eq!(meta.mode() & 0o7777, 0o640);
        if chowned {
            assert_eq!(meta.uid(), 65534);
        }
        if xattr {
            let mut value = [0u8; 16];
            let n = rustix::fs::getxattr(&file, attr, &mut value).unwrap();
            assert_eq!(&value[..n], b"kept");
        }
        d.replace("new-entry", b"x").unwrap();
        let new = fs::metadata(dir.path().join("new-entry")).unwrap();
        assert_eq!(new.mode() & 0o7777, 0o644);
        let left: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left.len(), 2, "{left:?}");
    }

    #[test]
    fn a_new_directory_is_never_one_that_was_there() {
        let dir = tempfile::tempdir().unwrap();
        let want = dir.path().join("cpushield-compare-1700000000");
        fs::create_dir(&want).unwrap();
        let made = new_dir(&want).unwrap();
        assert_ne!(made, want);
        assert!(made.to_str().unwrap().starts_with(want.to_str().unwrap()));
        assert!(fs::symlink_metadata(&made).unwrap().is_dir());
        // A symlink at the name is not taken either.
        let link = dir.path().join("cpushield-certify-1700000000");
        symlink(dir.path(), &link).unwrap();
        assert_ne!(new_dir(&link).unwrap(), link);
        let fresh = dir.path().join("fresh");
        assert_eq!(new_dir(&fresh).unwrap(), fresh);
    }
}
