//! Model-specific registers, read through the kernel's msr driver
//! (`/dev/cpu/N/msr`, the `msr` module, CAP_SYS_RAWIO). Read-only: the
//! kernel reads the register on that CPU (an IPI to it), so callers read
//! before and after a measurement, never during one. cpushield never
//! loads the module itself.

use std::os::unix::fs::FileExt;

use super::{Result, Sys, SysError};

/// `MSR_SMI_COUNT` (Intel, since Nehalem): the System Management
/// Interrupts the CPU has taken since reset, in its low 32 bits. AMD
/// processors have no such register (the read fails with EIO).
pub const SMI_COUNT: u64 = 0x34;

impl Sys {
    /// Register `reg` of CPU `cpu`, read through `/dev/cpu/{cpu}/msr`.
    pub fn read_msr(&self, cpu: u32, reg: u64) -> Result<u64> {
        let rel = format!("dev/cpu/{cpu}/msr");
        let err = |e| SysError::new("read", format!("{rel} register {reg:#x}"), None, e);
        let file = std::fs::File::open(self.path(&rel)).map_err(err)?;
        let mut bytes = [0u8; 8];
        file.read_exact_at(&mut bytes, reg).map_err(err)?;
        Ok(u64::from_le_bytes(bytes))
    }

    /// The SMIs CPU `cpu` has taken since reset ([`SMI_COUNT`]), or why
    /// they cannot be read here.
    pub fn smi_count(&self, cpu: u32) -> std::result::Result<u32, String> {
        match self.read_msr(cpu, SMI_COUNT) {
            Ok(value) => Ok(value as u32),
            Err(e) if e.kind == super::ErrorKind::NotFound => {
                Err("no /dev/cpu/N/msr (the msr module is not loaded)".into())
            }
            Err(e) if e.errno() == Some(libc::EIO) => {
                Err("this processor has no SMI counter (MSR 0x34)".into())
            }
            Err(e) => Err(format!("MSR 0x34 not readable: {}", e.errno_name())),
        }
    }
}

/// Each CPU's SMI count where it could be read, and why one could not
/// (the first such): read before and after a run, [`SmiCounts::taken`]
/// gives what each CPU took between.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SmiCounts {
    /// CPU -> its count.
    pub counts: std::collections::BTreeMap<u32, u32>,
    /// Why a CPU's count could not be read.
    pub unreadable: Option<String>,
}

impl SmiCounts {
    /// The SMIs `cpu` took since `before` (the 32-bit counter may wrap);
    /// `None` where either read failed.
    pub fn taken(&self, before: &SmiCounts, cpu: u32) -> Option<u64> {
        let (b, a) = (before.counts.get(&cpu)?, self.counts.get(&cpu)?);
        Some(u64::from(a.wrapping_sub(*b)))
    }
}

impl Sys {
    /// The SMI counts of `cpus` ([`Sys::smi_count`]).
    pub fn smi_counts(&self, cpus: impl IntoIterator<Item = u32>) -> SmiCounts {
        let mut out = SmiCounts::default();
        for cpu in cpus {
            match self.smi_count(cpu) {
                Ok(n) => {
                    out.counts.insert(cpu, n);
                }
                Err(why) => {
                    out.unreadable.get_or_insert(why);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_smi_count_is_the_low_32_bits_of_msr_0x34() {
        let dir = tempfile::tempdir().unwrap();
        let sys = Sys::at(dir.path());
        assert!(sys.smi_count(2).unwrap_err().contains("msr module"));
        std::fs::create_dir_all(dir.path().join("dev/cpu/2")).unwrap();
        let mut file = vec![0u8; 0x40];
        file[0x34..0x3c].copy_from_slice(&0x1_0000_0007u64.to_le_bytes());
        std::fs::write(dir.path().join("dev/cpu/2/msr"), &file).unwrap();
        assert_eq!(sys.read_msr(2, SMI_COUNT).unwrap(), 0x1_0000_0007);
        assert_eq!(sys.smi_count(2), Ok(7));
        let before = sys.smi_counts([2, 3]);
        assert!(before.unreadable.as_deref().unwrap().contains("msr module"));
        let after = SmiCounts {
            counts: [(2, 2)].into(),
            unreadable: None,
        };
        assert_eq!(
            after.taken(&before, 2),
            Some(u64::from(2u32.wrapping_sub(7)))
        );
        assert_eq!(after.taken(&before, 3), None);
    }
}
