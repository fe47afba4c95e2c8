//! CRI-O on this node, as a shield lives beside it: whether it runs, and
//! the per-CPU files its high-performance hooks hold for running pods.
//!
//! For a pod annotated `cpu-c-states.crio.io` or `cpu-freq-governor.crio.io`
//! CRI-O's hooks save each of the pod's CPUs' file under [`SAVE_DIRS`]
//! (`cpuN/power/pm_qos_resume_latency_us`, `cpuN/cpufreq/scaling_governor`)
//! before they write it at the container's start, and write the saved
//! value back, removing the saved file, at its stop. While the saved file
//! exists the CPU's file is the hook's: a shield neither counts it as
//! drift nor writes over it, and the value a shield would give back at
//! `off` goes into the saved file, which CRI-O then writes back itself.
//!
//! For a pod annotated `irq-load-balancing.crio.io: disable` the hooks
//! clear the pod's CPUs from `/proc/irq/default_smp_affinity` at its start
//! and set them again at its stop, then have irqbalance place the IRQs
//! once with the CPUs that mask leaves out banned: on a shield's CPUs that
//! gives the shield's CPUs back to IRQs. The healer repairs that (see
//! [`crate::shield::heal_drift`]).
//!
//! Read from CRI-O v1.34's `internal/runtimehandlerhooks`.

use crate::sys::Sys;

/// CRI-O's socket, relative to the root (`/var/run` is `/run`).
pub const SOCKETS: [&str; 2] = ["run/crio/crio.sock", "var/run/crio/crio.sock"];
/// Where CRI-O's hooks save a CPU's file before writing it, relative to
/// the root (CRI-O names it `/var/run/crio/cpu`).
pub const SAVE_DIRS: [&str; 2] = ["run/crio/cpu", "var/run/crio/cpu"];
/// The per-CPU files (below `cpuN/`) the hooks save and write.
pub const HOOK_FILES: [&str; 2] = ["power/pm_qos_resume_latency_us", "cpufreq/scaling_governor"];

/// Whether CRI-O runs on this node (its socket is there).
pub fn runs(sys: &Sys) -> bool {
    SOCKETS.iter().any(|s| sys.exists(s))
}

/// Where CRI-O's hook saved `path`'s value (a CPU's file, relative to the
/// root), when it holds the file for a running pod.
pub fn saved(sys: &Sys, path: &str) -> Option<String> {
    saved_where(path, &|save| sys.exists(save))
}

/// [`saved`], with `exists` telling whether a file (relative to the root)
/// is there.
pub fn saved_where(path: &str, exists: &dyn Fn(&str) -> bool) -> Option<String> {
    let rest = path.strip_prefix("sys/devices/system/cpu/cpu")?;
    let (n, file) = rest.split_once('/')?;
    n.parse::<u32>().ok()?;
    if !HOOK_FILES.contains(&file) {
        return None;
    }
    (SAVE_DIRS.iter())
        .map(|dir| format!("{dir}/cpu{n}/{file}"))
        .find(|save| exists(save))
}

/// What happened to a shield's write of a file CRI-O's hook holds, at
/// `off`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandedOver {
    /// The hook saved the shield's value: the value from before the shield
    /// is now in the saved file (its path), for CRI-O to write back when
    /// the pod stops; the CPU's file is left to the hook.
    Saved(String),
    /// The hook saved another value (the pod started before the shield):
    /// the saved file is left, and the CPU's file is undone as any other.
    NotOurs,
    /// The value from before the shield was written into the saved file
    /// (its path), but it reads back as this.
    ReadsOtherwise(String, String),
}

/// At `off`, the undo of the shield's write of `path` (`written`, over
/// `previous`) when CRI-O's hook holds it; None when it does not.
pub fn hand_over(
    sys: &Sys,
    path: &str,
    written: &str,
    previous: &str,
) -> Option<Result<HandedOver, crate::sys::SysError>> {
    let save = saved(sys, path)?;
    let held = sys.read_trimmed(&save).ok()?;
    if held != written.trim() {
        return Some(Ok(HandedOver::NotOurs));
    }
    if let Err(e) = sys.write_config(&save, &format!("{}\n", previous.trim()), false) {
        return Some(Err(e));
    }
    Some(Ok(match sys.read_trimmed(&save) {
        Ok(now) if now == previous.trim() => HandedOver::Saved(save),
        Ok(now) => HandedOver::ReadsOtherwise(save, now),
        Err(e) => return Some(Err(e)),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_value_makes_the_file_the_hooks_and_off_hands_the_old_value_over() {
        let dir = tempfile::tempdir().unwrap();
        let sys = Sys::at(dir.path());
        let qos = "sys/devices/system/cpu/cpu2/power/pm_qos_resume_latency_us";
        assert!(!runs(&sys));
        assert_eq!(saved(&sys, qos), None);
        let save = dir.path().join("run/crio/cpu/cpu2/power");
        std::fs::create_dir_all(&save).unwrap();
        std::fs::write(save.join("pm_qos_resume_latency_us"), "n/a\n").unwrap();
        assert_eq!(
            saved(&sys, qos).as_deref(),
            Some("run/crio/cpu/cpu2/power/pm_qos_resume_latency_us")
        );
        // another CPU, another file: not the hook's
        assert_eq!(
            saved(
                &sys,
                "sys/devices/system/cpu/cpu3/power/pm_qos_resume_latency_us"
            ),
            None
        );
        assert_eq!(saved(&sys, "sys/devices/system/cpu/cpu2/online"), None);
        let gov = dir.path().join("run/crio/cpu/cpu3/cpufreq");
        std::fs::create_dir_all(&gov).unwrap();
        std::fs::write(gov.join("scaling_governor"), "performance\n").unwrap();
        assert_eq!(
            saved(&sys, "sys/devices/system/cpu/cpu3/cpufreq/scaling_governor").as_deref(),
            Some("run/crio/cpu/cpu3/cpufreq/scaling_governor")
        );
        // the hook saved another value than the shield's: left
        assert_eq!(
            hand_over(&sys, qos, "20", "0").unwrap().unwrap(),
            HandedOver::NotOurs
        );
        assert_eq!(
            std::fs::read_to_string(save.join("pm_qos_resume_latency_us")).unwrap(),
            "n/a\n"
        );
        // it saved the shield's: the value before the shield goes there
        let handed = hand_over(&sys, qos, "n/a", "0").unwrap().unwrap();
        assert_eq!(
            handed,
            HandedOver::Saved("run/crio/cpu/cpu2/power/pm_qos_resume_latency_us".into())
        );
        assert_eq!(
            std::fs::read_to_string(save.join("pm_qos_resume_latency_us")).unwrap(),
            "0\n"
        );
    }
}
