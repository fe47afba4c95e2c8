//! An exclusive lock that names its holder: a file opened without
//! following a symbolic link (`O_NOFOLLOW`, mode 0600, never truncated by
//! the open), a non-blocking `flock` on it, and once held the holder's pid
//! written in it, so that another process can say who holds it.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use nix::fcntl::{Flock, FlockArg};

/// A held lock; released when dropped (or when its process ends).
#[derive(Debug)]
pub struct PidLock {
    _flock: Flock<File>,
}

/// Takes the lock on `path` without waiting: `Ok(None)` when another
/// process holds it. Once held, the file says this process's pid followed
/// by `says` (`"\n"` for nothing more), over whatever it said before.
pub fn try_take(path: &Path, says: &str) -> io::Result<Option<PidLock>> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(flock) => {
            flock.set_len(0)?;
            (&*flock).write_all(format!("{}{says}", std::process::id()).as_bytes())?;
            Ok(Some(PidLock { _flock: flock }))
        }
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, e)) => Err(io::Error::from_raw_os_error(e as i32)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_taker_is_refused_until_the_first_lets_go_and_the_file_names_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        std::fs::write(&path, "an older holder's longer words\n").unwrap();
        let first = try_take(&path, " repair\n").unwrap().expect("free");
        let said = std::fs::read_to_string(&path).unwrap();
        assert_eq!(said, format!("{} repair\n", std::process::id()));
        assert!(
            try_take(&path, "\n").unwrap().is_none(),
            "held by the first"
        );
        drop(first);
        assert!(try_take(&path, "\n").unwrap().is_some(), "free again");
    }

    #[test]
    fn a_symbolic_link_in_its_place_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "keep").unwrap();
        let path = dir.path().join("lock");
        std::os::unix::fs::symlink(&target, &path).unwrap();
        assert!(try_take(&path, "\n").is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    }
}
