//! The boot half of a shield: the kernel command line options that only a
//! boot applies (`nohz_full=` stops the tick, `rcu_nocbs=` moves RCU
//! callbacks, `isolcpus=managed_irq` keeps kernel-managed queue interrupts
//! off), written the bootloader's own way and judged against what the
//! running kernel booted with.
//!
//! It outlives reboots, so its record does too: `/var/lib/cpushield/boot.json`
//! holds what was written and what the bootloader's files held before, and
//! is written (atomically, fsync'd) before each change. `off` never touches
//! it (`cpushield.service` runs `off` at every shutdown); only `apply` with a
//! config without `boot`, `cpushield boot --remove` and the package's purge
//! take it out, and they put the files back as they were.
//!
//! Reads and writes go through [`Sys`] (the root), the bootloader's tool
//! through [`Sys::run_tool`]. Judging is a pure function of read facts.

mod apply;
pub mod args;
pub mod backend;
pub mod bls;
mod change;
pub mod edit;
mod files;
pub mod grub;
pub mod loader;
mod managed;
mod record;
mod remove;
mod status;
pub mod uki;
mod want;

use crate::shield::journal;
use crate::sys::Sys;

pub use apply::check;
pub use backend::{Backend, Loader};
pub use change::{BootAction, BootChange, FileAction, FileOutcome};
pub use record::{read_record, Generated, Made, Record, Removed, RECORD, RECORD_VERSION, REMOVED};
pub use remove::remove;
pub use status::{judge, status, BootFacts, BootState, BootStatus};
pub use want::{check_extra, want, want_here, BootWant, OWN_KEYS};

/// Writes the boot half `want` asks for into the bootloader's files, or,
/// with no `want` (a config without `boot`), takes it out (see [`remove`]).
pub fn apply(sys: &Sys, want: Option<&BootWant>, dry_run: bool) -> Result<BootChange, BootError> {
    match want {
        Some(want) => apply::apply(sys, want, dry_run),
        None => remove(sys, dry_run),
    }
}

/// A boot-half problem; nothing was left half-written.
#[derive(Debug, thiserror::Error)]
pub enum BootError {
    /// The request is not valid; nothing was changed.
    #[error("{0}")]
    Invalid(String),
    /// The machine's bootloader is not one cpushield drives; nothing was changed.
    #[error("the boot half cannot be written here: {bootloader}; {instructions}")]
    Unsupported {
        /// What was found.
        bootloader: String,
        /// What to do by hand.
        instructions: String,
    },
    /// Reading or writing a file, or the bootloader's tool, failed; what
    /// had been written was put back (see `restored`).
    #[error("{what}: {source}{}", if *restored { "; the bootloader's files were put back as before" } else { "" })]
    Failed {
        /// What was being done.
        what: String,
        /// Whether the previous files were restored.
        restored: bool,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The boot half written earlier cannot be taken out as it was
    /// written (a file changed beyond cpushield's part); nothing was changed.
    #[error("the boot half cannot be taken out exactly: {0}; put cpushield's part back as it was written, or take it out by hand and delete /var/lib/cpushield/boot.json")]
    Stranded(String),
    /// The record cannot be read or written.
    #[error(transparent)]
    Journal(#[from] journal::JournalError),
    /// Not root; nothing was changed.
    #[error(transparent)]
    NotRoot(#[from] crate::shield::ShieldError),
}

#[cfg(test)]
mod tests {
    use super::record::OnDisk;
    use super::*;
    use crate::cpulist::CpuSet;

    fn cpus(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    fn want_23() -> BootWant {
        want(
            &cpus("2-3"),
            &[cpus("2"), cpus("3")],
            (&cpus("0-3"), false),
            &[],
        )
        .unwrap()
    }

    fn facts(cmdline: &str) -> BootFacts {
        BootFacts {
            cmdline: cmdline.into(),
            boot_id: "b1".into(),
            ..Default::default()
        }
    }

    fn record(complete: bool) -> Record {
        Record::debian_grub(want_23(), complete)
    }

    #[test]
    fn a_first_release_record_reads_as_debian_grub() {
        let v1 = serde_json::json!({
            "want": want_23(),
            "dropin": "etc/default/grub.d/zz-cpushield.cfg",
            "dropin_before": null,
            "generated": "boot/grub/grub.cfg",
            "generated_before": "menuentry\n",
            "complete": true
        });
        let OnDisk::V1(v1) = serde_json::from_value::<OnDisk>(v1).unwrap() else {
            panic!("a version 1 record was taken for version 2")
        };
        let r: Record = v1.into();
        assert_eq!(r.backend, Backend::DebianGrub);
        assert_eq!(r.files.len(), 1);
        assert_eq!(r.files[0].path, grub::DROPIN);
        assert_eq!(r.files[0].before, None);
        assert_eq!(r.files[0].edit, edit::Edit::Whole);
        assert_eq!(
            r.generated.as_ref().unwrap().before.as_deref(),
            Some("menuentry\n")
        );
        assert_eq!(r.command, vec!["update-grub".to_string()]);
        // Version 2 round-trips as itself.
        let text = serde_json::to_string(&r).unwrap();
        assert!(
            matches!(serde_json::from_str::<OnDisk>(&text).unwrap(), OnDisk::V2(back) if back == r)
        );
    }

    #[test]
    fn want_adds_extra_options_and_refuses_bad_ones() {
        let w = want(
            &cpus("2-3"),
            &[cpus("2"), cpus("3")],
            (&cpus("0-3"), false),
            &["skew_tick=1".into(), "rcu_nocb_poll".into()],
        )
        .unwrap();
        assert_eq!(
            w.options.join(" "),
            "isolcpus=managed_irq,2-3 nohz_full=2-3 rcu_nocbs=2-3 irqaffinity=0-1 skew_tick=1 rcu_nocb_poll"
        );
        assert_eq!(w.housekeeping, cpus("0-1"));
        for bad in ["nohz_full=1", "a b", "x=\"$(reboot)\"", ""] {
            let e = want(&cpus("2-3"), &[], (&cpus("0-3"), false), &[bad.into()]).unwrap_err();
            assert!(e.to_string().contains("boot: option"), "{bad}: {e}");
        }
        let e = want(&cpus("0-3"), &[], (&cpus("0-3"), false), &[]).unwrap_err();
        assert!(e.to_string().contains("no CPU for housekeeping"), "{e}");
    }

    #[test]
    fn on_a_kubernetes_node_systemd_and_its_services_start_on_the_housekeeping_cpus() {
        let w = want(&cpus("2-3"), &[], (&cpus("0-3"), true), &[]).unwrap();
        assert_eq!(
            w.options.join(" "),
            "isolcpus=managed_irq,2-3 nohz_full=2-3 rcu_nocbs=2-3 irqaffinity=0-1 systemd.cpu_affinity=0-1"
        );
        assert!(
            !w.options.iter().any(|o| o.contains("domain")),
            "kubelet's shared pool needs load balancing"
        );
        // The user's own setting wins, once.
        let own = want(
            &cpus("2-3"),
            &[],
            (&cpus("0-3"), true),
            &["systemd.cpu_affinity=0".into()],
        )
        .unwrap();
        let set: Vec<&String> = (own.options.iter())
            .filter(|o| o.starts_with("systemd.cpu_affinity="))
            .collect();
        assert_eq!(set, ["systemd.cpu_affinity=0"]);
    }

    #[test]
    fn want_isolates_hyper_thread_siblings_too() {
        let w = want(&cpus("2"), &[cpus("2,6")], (&cpus("0-7"), false), &[]).unwrap();
        assert_eq!(w.cpus, cpus("2,6"));
        assert!(w.options.contains(&"nohz_full=2,6".to_string()));
        assert!(w.options.contains(&"irqaffinity=0-1,3-5,7".to_string()));
    }

    #[test]
    fn judged_pending_until_the_kernel_booted_with_every_option() {
        let r = record(true);
        let s = judge(Some(&r), None, &facts("ro quiet nohz_full=2-3"));
        assert_eq!(s.state, BootState::PendingReboot);
        assert!(s.reboot_pending);
        assert_eq!(s.missing.len(), 3, "{:?}", s.missing);
        let line = format!("BOOT_IMAGE=/vmlinuz ro {}", r.want.options.join(" "));
        let s = judge(Some(&r), None, &facts(&line));
        assert_eq!(s.state, BootState::Active);
        assert!(!s.reboot_pending && s.missing.is_empty());
        // A different value of the same key is not the option.
        let s = judge(
            Some(&r),
            None,
            &facts(&line.replace("nohz_full=2-3", "nohz_full=3")),
        );
        assert_eq!(s.state, BootState::PendingReboot);
        assert_eq!(s.missing, vec!["nohz_full=2-3".to_string()]);
        assert_eq!(
            judge(Some(&record(false)), None, &facts(&line)).state,
            BootState::Interrupted
        );
    }

    #[test]
    fn judged_removal_pending_until_the_next_boot_then_absent() {
        let removed = Removed {
            options: want_23().options,
            boot_id: "b1".into(),
        };
        let line = format!("ro {}", removed.options.join(" "));
        let s = judge(None, Some(&removed), &facts(&line));
        assert_eq!(s.state, BootState::RemovalPending);
        assert!(s.reboot_pending);
        assert_eq!(
            judge(None, Some(&removed), &facts("ro quiet")).state,
            BootState::Absent
        );
        // Another boot with the same options: someone else's isolation now.
        let mut next = facts(&line);
        next.boot_id = "b2".into();
        assert_eq!(
            judge(None, Some(&removed), &next).state,
            BootState::External
        );
        assert_eq!(
            judge(None, None, &facts("ro quiet")).state,
            BootState::Absent
        );
    }
}
