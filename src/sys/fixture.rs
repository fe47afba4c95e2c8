//! Fixture roots: a temporary directory laid out like `/proc` and `/sys`
//! that stands in for the kernel in tests.
//!
//! Emulation of the kernel's side effects is filled in below.

use std::path::Path;

use super::{Result, Sys};
use crate::cpulist::CpuSet;

/// Marker file whose presence makes a root a fixture root.
pub const MARKER: &str = ".cpushield-fixture";

/// Kernel emulation for a fixture root.
#[derive(Debug, Clone, Default)]
pub struct Fixture {}

impl Fixture {
    /// A fixture when `root` holds the marker file.
    pub fn detect(root: &Path) -> Option<Fixture> {
        root.join(MARKER).exists().then(Fixture::default)
    }

    pub(super) fn write(&self, sys: &Sys, rel: &str, data: &str) -> Result<()> {
        super::write_existing(&sys.path(rel), data)
            .map_err(|e| super::SysError::new("write", rel, Some(data), e))
    }

    pub(super) fn mkdir(&self, sys: &Sys, rel: &str) -> Result<()> {
        std::fs::create_dir(sys.path(rel)).map_err(|e| super::SysError::new("mkdir", rel, None, e))
    }

    pub(super) fn rmdir(&self, sys: &Sys, rel: &str) -> Result<()> {
        std::fs::remove_dir(sys.path(rel)).map_err(|e| super::SysError::new("rmdir", rel, None, e))
    }

    pub(super) fn affinity(&self, sys: &Sys, tid: i32) -> Result<CpuSet> {
        let _ = (sys, tid);
        Ok(CpuSet::new())
    }

    pub(super) fn set_affinity(&self, sys: &Sys, tid: i32, cpus: &CpuSet) -> Result<()> {
        let _ = (sys, tid, cpus);
        Ok(())
    }
}
