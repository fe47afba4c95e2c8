//! The trace instance `measure --explain` records into, and its record.
//!
//! All tracing happens in an instance of our own
//! (`TRACEFS/instances/cpushield`): its buffers, clock, CPU mask and events
//! are its own, so the top-level tracefs files are never written and the
//! instance's removal (`rmdir`) takes back everything it held. Before the
//! instance is made, `/run/cpushield/explain.json` records it and the
//! owner's pid: a run killed with SIGKILL leaves both, and the next run (or
//! `measure --clean-up`) removes the instance once its owner is gone. A
//! reboot removes both: the record lives on tmpfs like the instance.
//!
//! tracefs already in use (a tracer other than `nop`, events enabled at the
//! top level, another instance: rtla, trace-cmd, perf's ftrace) is refused
//! before anything is written.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;
use crate::sys::{procfs, Sys};

use super::trace::EVENTS;
use super::ExplainError;

/// The instance's name under `instances/`.
pub const INSTANCE: &str = "cpushield";
/// The record of a live instance, relative to the root.
pub const RECORD: &str = "run/cpushield/explain.json";
/// Ring buffer of every other CPU, KiB (the tracing cpumask keeps them
/// empty; the kernel allocates one for every possible CPU).
const IDLE_BUFFER_KB: u32 = 16;

/// What the record says: which instance, made by which process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// tracefs's directory, relative to the root.
    pub tracefs: String,
    /// The instance's name.
    pub instance: String,
    /// The process that made it.
    pub pid: u32,
}

/// A live trace instance; dropping it stops tracing and removes it.
#[derive(Debug)]
pub struct Session {
    sys: Sys,
    /// The instance's directory, relative to the root.
    dir: String,
    /// Events this kernel lacks (skipped).
    pub missing_events: Vec<String>,
    /// What a run killed earlier had left and this one removed.
    pub cleaned: Option<String>,
}

/// Where tracefs is mounted, relative to the root, or why it cannot be used.
pub fn locate(sys: &Sys) -> Result<String, ExplainError> {
    let filesystems = sys.read("proc/filesystems").unwrap_or_default();
    if !filesystems.split_whitespace().any(|w| w == "tracefs") {
        return Err(ExplainError::NoTracefs);
    }
    let mounts = procfs::parse_mounts(&sys.read("proc/mounts").unwrap_or_default());
    let mut found: Vec<String> = mounts
        .iter()
        .filter_map(|m| {
            let dir = m.target.trim_start_matches('/');
            match m.fstype.as_str() {
                "tracefs" => Some(dir.to_string()),
                "debugfs" => Some(format!("{dir}/tracing")),
                _ => None,
            }
        })
        .collect();
    found.sort_by_key(|d| d != "sys/kernel/tracing");
    found
        .into_iter()
        .find(|d| sys.exists(&format!("{d}/instances")))
        .ok_or(ExplainError::NotMounted)
}

/// Who else is using tracefs, if anyone (ignoring our own instance).
pub fn in_use(sys: &Sys, tracefs: &str) -> Option<String> {
    let tracer = sys
        .read_trimmed(&format!("{tracefs}/current_tracer"))
        .unwrap_or_default();
    if !tracer.is_empty() && tracer != "nop" {
        return Some(format!(
            "the {tracer} tracer is on ({tracefs}/current_tracer)"
        ));
    }
    let events = sys
        .read(&format!("{tracefs}/set_event"))
        .unwrap_or_default();
    let enabled: Vec<&str> = events.lines().filter(|l| !l.trim().is_empty()).collect();
    if !enabled.is_empty() {
        return Some(format!(
            "{} event(s) are enabled at the top level ({}{}, {tracefs}/set_event)",
            enabled.len(),
            enabled[..enabled.len().min(3)].join(", "),
            if enabled.len() > 3 { ", ..." } else { "" }
        ));
    }
    let others: Vec<String> = sys
        .subdirs(&format!("{tracefs}/instances"))
        .unwrap_or_default()
        .into_iter()
        .filter(|n| n != INSTANCE)
        .collect();
    if !others.is_empty() {
        return Some(format!(
            "trace instance(s) {} exist ({tracefs}/instances)",
            others.join(", ")
        ));
    }
    None
}

fn pid_alive(sys: &Sys, pid: u32) -> bool {
    sys.exists(&format!("proc/{pid}"))
}

fn read_record(sys: &Sys) -> Option<Record> {
    serde_json::from_str(&sys.read(RECORD).ok()?).ok()
}

fn write_record(sys: &Sys, r: &Record) -> Result<(), ExplainError> {
    let path = sys.path(RECORD);
    let io = |source| ExplainError::Io {
        what: format!("write {}", path.display()),
        source,
    };
    sys.run_dir()
        .map_err(|e| io(std::io::Error::other(e.to_string())))?;
    let text = serde_json::to_string_pretty(r).expect("a record serialises");
    crate::durable::write_atomic(&path, text.as_bytes()).map_err(|e| io(e.source))
}

/// Removes the instance a killed run left (its owner is gone) and its
/// record. `Ok(None)`: nothing was left. Refuses while the owner lives.
pub fn clean_up(sys: &Sys) -> Result<Option<String>, ExplainError> {
    match locate(sys) {
        Ok(tracefs) => clean_up_in(sys, &tracefs),
        // Without tracefs there is no instance; a record may still be left.
        Err(_) => clean_up_in(sys, ""),
    }
}

/// [`clean_up`] with tracefs at `tracefs` (the record's own path wins).
fn clean_up_in(sys: &Sys, tracefs: &str) -> Result<Option<String>, ExplainError> {
    let record = read_record(sys);
    if let Some(r) = &record {
        if r.pid != std::process::id() && pid_alive(sys, r.pid) {
            return Err(ExplainError::InUse(format!(
                "cpushield (pid {}) is tracing into {}/instances/{}",
                r.pid, r.tracefs, r.instance
            )));
        }
    }
    let tracefs = record.as_ref().map_or(tracefs, |r| r.tracefs.as_str());
    let dir = format!("{tracefs}/instances/{INSTANCE}");
    let mut what = None;
    if !tracefs.is_empty() && sys.exists(&dir) {
        remove_instance(sys, &dir)?;
        what = Some(format!(
            "removed the trace instance {} that a killed run left",
            sys.path(&dir).display()
        ));
    }
    if record.is_some() {
        remove_record(sys)?;
        what.get_or_insert_with(|| "removed a stale record".to_string());
    }
    Ok(what)
}

fn remove_record(sys: &Sys) -> Result<(), ExplainError> {
    std::fs::remove_file(sys.path(RECORD)).map_err(|source| ExplainError::Io {
        what: format!("remove {}", sys.path(RECORD).display()),
        source,
    })
}

/// Stops tracing into the instance at `dir` and removes it. `rmdir` of an
/// instance fails with EBUSY while a reader still holds its `trace_pipe`;
/// the reader is gone within milliseconds.
fn remove_instance(sys: &Sys, dir: &str) -> Result<(), ExplainError> {
    let _ = sys.write(&format!("{dir}/tracing_on"), "0");
    let mut tries = 0;
    loop {
        match sys.rmdir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.errno() == Some(libc::EBUSY) && tries < 50 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(ExplainError::Sys(e)),
        }
    }
}

impl Session {
    /// Checks tracefs is there and free, removes what a killed run left,
    /// records the instance, makes it and starts tracing `cpus`. Nothing
    /// is written before every check has passed; a failure after the
    /// instance exists removes it again.
    pub fn start(
        sys: &Sys,
        cpus: &CpuSet,
        ncpus: u32,
        buffer_kb: u64,
    ) -> Result<Session, ExplainError> {
        let tracefs = locate(sys)?;
        if let Some(who) = in_use(sys, &tracefs) {
            return Err(ExplainError::InUse(who));
        }
        let cleaned = clean_up_in(sys, &tracefs)?;
        let dir = format!("{tracefs}/instances/{INSTANCE}");
        write_record(
            sys,
            &Record {
                tracefs: tracefs.clone(),
                instance: INSTANCE.into(),
                pid: std::process::id(),
            },
        )?;
        if let Err(e) = sys.mkdir(&dir) {
            let _ = remove_record(sys);
            return Err(ExplainError::Sys(e));
        }
        let mut session = Session {
            sys: sys.clone(),
            dir,
            missing_events: Vec::new(),
            cleaned,
        };
        session.configure(cpus, ncpus, buffer_kb)?;
        Ok(session)
    }

    fn configure(&mut self, cpus: &CpuSet, ncpus: u32, buffer_kb: u64) -> Result<(), ExplainError> {
        let d = &self.dir;
        let sys = &self.sys;
        sys.write(&format!("{d}/tracing_on"), "0")?;
        sys.write(&format!("{d}/buffer_size_kb"), &IDLE_BUFFER_KB.to_string())?;
        for cpu in cpus.iter() {
            sys.write(
                &format!("{d}/per_cpu/cpu{cpu}/buffer_size_kb"),
                &buffer_kb.to_string(),
            )?;
        }
        sys.write(&format!("{d}/trace_clock"), "mono")?;
        sys.write(&format!("{d}/tracing_cpumask"), &cpus.to_mask(ncpus))?;
        for ev in EVENTS {
            let (system, name) = ev.split_once(':').expect("system:event");
            let enable = format!("{d}/events/{system}/{name}/enable");
            if sys.exists(&enable) {
                sys.write(&enable, "1")?;
            } else {
                self.missing_events.push((*ev).to_string());
            }
        }
        sys.write(&format!("{d}/tracing_on"), "1")?;
        Ok(())
    }

    /// The instance's `trace_pipe`.
    pub fn pipe(&self) -> PathBuf {
        self.sys.path(&format!("{}/trace_pipe", self.dir))
    }

    /// Stops writing events (what was written stays to be read).
    pub fn stop(&self) {
        let _ = self.sys.write(&format!("{}/tracing_on", self.dir), "0");
    }

    /// Removes the instance and the record.
    pub fn close(self) -> Result<(), ExplainError> {
        let r = self.remove();
        std::mem::forget(self);
        r
    }

    fn remove(&self) -> Result<(), ExplainError> {
        remove_instance(&self.sys, &self.dir)?;
        remove_record(&self.sys)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.remove();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root_with(mounts: &str) -> (tempfile::TempDir, Sys) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::create_dir_all(p.join("proc")).unwrap();
        std::fs::write(
            p.join("proc/filesystems"),
            "nodev\ttracefs\nnodev\tdebugfs\n",
        )
        .unwrap();
        std::fs::write(p.join("proc/mounts"), mounts).unwrap();
        let t = p.join("sys/kernel/tracing");
        std::fs::create_dir_all(t.join("instances")).unwrap();
        std::fs::write(t.join("current_tracer"), "nop\n").unwrap();
        std::fs::write(t.join("set_event"), "").unwrap();
        let sys = Sys::at(p);
        (dir, sys)
    }

    #[test]
    fn locate_and_refusals() {
        let (_d, sys) = root_with("tracefs /sys/kernel/tracing tracefs rw 0 0\n");
        assert_eq!(locate(&sys).unwrap(), "sys/kernel/tracing");
        assert_eq!(in_use(&sys, "sys/kernel/tracing"), None);
        let t = sys.path("sys/kernel/tracing");
        std::fs::write(t.join("set_event"), "sched:sched_switch\n").unwrap();
        let why = in_use(&sys, "sys/kernel/tracing").unwrap();
        assert!(why.contains("sched:sched_switch"), "{why}");
        std::fs::write(t.join("set_event"), "").unwrap();
        std::fs::create_dir(t.join("instances/timerlat_top")).unwrap();
        let why = in_use(&sys, "sys/kernel/tracing").unwrap();
        assert!(why.contains("timerlat_top"), "{why}");
        std::fs::write(t.join("current_tracer"), "function\n").unwrap();
        assert!(in_use(&sys, "sys/kernel/tracing")
            .unwrap()
            .contains("function tracer"));

        let (_d, sys) = root_with("proc /proc proc rw 0 0\n");
        assert!(matches!(locate(&sys), Err(ExplainError::NotMounted)));
        std::fs::write(sys.path("proc/filesystems"), "nodev\tproc\n").unwrap();
        assert!(matches!(locate(&sys), Err(ExplainError::NoTracefs)));
    }

    #[test]
    fn clean_up_removes_what_a_dead_owner_left_and_spares_a_live_one() {
        let (_d, sys) = root_with("tracefs /sys/kernel/tracing tracefs rw 0 0\n");
        let inst = sys.path("sys/kernel/tracing/instances/cpushield");
        std::fs::create_dir(&inst).unwrap();
        // A live owner (this test's parent shares our pid namespace: pid 1 exists in /proc? not in
        // the fixture root, so make it exist).
        std::fs::create_dir_all(sys.path("proc/4242")).unwrap();
        let rec = Record {
            tracefs: "sys/kernel/tracing".into(),
            instance: INSTANCE.into(),
            pid: 4242,
        };
        write_record(&sys, &rec).unwrap();
        assert!(matches!(clean_up(&sys), Err(ExplainError::InUse(_))));
        assert!(inst.exists());
        std::fs::remove_dir(sys.path("proc/4242")).unwrap();
        let what = clean_up(&sys).unwrap().unwrap();
        assert!(what.contains("killed run"), "{what}");
        assert!(!inst.exists());
        assert!(!sys.path(RECORD).exists());
        assert_eq!(clean_up(&sys).unwrap(), None);
    }
}
