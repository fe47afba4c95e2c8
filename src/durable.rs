//! Files that must survive a crash or a power cut: written whole or not at
//! all. A new temporary file beside the target (O_EXCL, O_NOFOLLOW, mode
//! 0600), fsync, rename over the target, fsync of the directory: after a
//! crash the target holds either its old content or the new one.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

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

/// Replaces `path` with `data` atomically and durably (see the module).
pub fn write_atomic(path: &Path, data: &[u8]) -> Result<(), DurableError> {
    let at = |p: &Path| {
        let path = p.to_path_buf();
        move |source| DurableError { path, source }
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let tmp = dir.join(format!(
        ".{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file")
    ));
    let _ = fs::remove_file(&tmp);
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .map_err(at(&tmp))?;
    f.write_all(data).map_err(at(&tmp))?;
    f.sync_all().map_err(at(&tmp))?;
    fs::rename(&tmp, path).map_err(at(path))?;
    File::open(dir).and_then(|d| d.sync_all()).map_err(at(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("checkpoint.json");
        write_atomic(&p, b"first").unwrap();
        write_atomic(&p, b"second").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"second");
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "only the target is left");
    }

    #[test]
    fn a_missing_directory_names_the_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("gone/checkpoint.json");
        let e = write_atomic(&p, b"x").unwrap_err();
        assert!(e.path.ends_with("gone/.checkpoint.json.tmp"), "{e}");
    }
}
