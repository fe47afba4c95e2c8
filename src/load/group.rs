//! Finding the processes of a load: who is in a process group, who descends
//! from whom. Reads `/proc/PID/stat` through [`crate::sys::Sys`] only, so the
//! parsing is tested from literal strings and the scan from fixture roots.

use crate::sys::{procfs, Sys};

/// One process as `/proc/PID/stat` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcEntry {
    /// Process id.
    pub pid: i32,
    /// The command name (`comm`, at most 15 bytes, as the kernel keeps it).
    pub comm: String,
    /// State letter: `R`, `S`, `D`, `Z` (zombie: exited, not yet reaped), ...
    pub state: char,
    /// Parent process id.
    pub ppid: i32,
    /// Process group id.
    pub pgrp: i32,
}

impl ProcEntry {
    /// Whether the process has exited and only waits to be reaped.
    pub fn is_zombie(&self) -> bool {
        self.state == 'Z' || self.state == 'X'
    }
}

/// Parses the contents of `/proc/PID/stat`.
///
/// The command name is in parentheses and may itself contain spaces and
/// parentheses, so the fields are counted from the *last* `)`.
pub fn parse_stat(content: &str) -> Option<ProcEntry> {
    let pid = content[..content.find('(')?].trim().parse().ok()?;
    let (comm, fields) = procfs::split_stat(content)?;
    Some(ProcEntry {
        pid,
        comm: comm.to_string(),
        state: fields.first()?.chars().next()?,
        ppid: procfs::stat_field(&fields, 4)?,
        pgrp: procfs::stat_field(&fields, 5)?,
    })
}

/// Every process visible under `proc/`. Processes that exit during the scan
/// are skipped (their files vanish between listing and reading).
pub fn scan(sys: &Sys) -> Vec<ProcEntry> {
    let Ok(names) = sys.list("proc") else {
        return Vec::new();
    };
    names
        .iter()
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|n| sys.read(&format!("proc/{n}/stat")).ok())
        .filter_map(|s| parse_stat(&s))
        .collect()
}

/// The processes whose process group is `pgid`, zombies included.
pub fn group_members(sys: &Sys, pgid: i32) -> Vec<ProcEntry> {
    scan(sys).into_iter().filter(|p| p.pgrp == pgid).collect()
}

/// The processes descending from `root` (not `root` itself), in `entries`.
pub fn descendants(entries: &[ProcEntry], root: i32) -> Vec<ProcEntry> {
    let mut found: Vec<ProcEntry> = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for e in entries.iter().filter(|e| e.ppid == parent) {
            if e.pid != root && !found.iter().any(|f| f.pid == e.pid) {
                found.push(e.clone());
                frontier.push(e.pid);
            }
        }
    }
    found.sort_by_key(|e| e.pid);
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_odd_comm() {
        let e = parse_stat("4242 (stress-ng (cpu)) S 4200 4200 100 0 -1 4194624 96 0 0 0")
            .expect("parses");
        assert_eq!(e.pid, 4242);
        assert_eq!(e.comm, "stress-ng (cpu)");
        assert_eq!(e.state, 'S');
        assert_eq!(e.ppid, 4200);
        assert_eq!(e.pgrp, 4200);
        assert!(!e.is_zombie());
        let z = parse_stat("7 (a b) Z 1 7 7 0").expect("parses");
        assert!(z.is_zombie());
    }

    #[test]
    fn rejects_garbage() {
        assert_eq!(parse_stat(""), None);
        assert_eq!(parse_stat("12 (x"), None);
        assert_eq!(parse_stat("12 (x) S"), None);
        assert_eq!(parse_stat("x (y) S 1 1"), None);
    }

    #[test]
    fn finds_descendants_transitively() {
        let e = |pid, ppid| ProcEntry {
            pid,
            comm: "x".into(),
            state: 'S',
            ppid,
            pgrp: 10,
        };
        let all = vec![e(10, 1), e(11, 10), e(12, 11), e(13, 1), e(14, 12)];
        let d: Vec<i32> = descendants(&all, 10).iter().map(|p| p.pid).collect();
        assert_eq!(d, vec![11, 12, 14]);
        assert!(descendants(&all, 13).is_empty());
    }

    #[test]
    fn scans_a_fixture_proc() {
        let dir = tempfile::tempdir().unwrap();
        for (pid, stat) in [
            ("1", "1 (init) S 0 1 1 0"),
            ("20", "20 (w) R 1 20 20 0"),
            ("21", "21 (w) Z 20 20 20 0"),
        ] {
            std::fs::create_dir_all(dir.path().join("proc").join(pid)).unwrap();
            std::fs::write(dir.path().join("proc").join(pid).join("stat"), stat).unwrap();
        }
        std::fs::create_dir_all(dir.path().join("proc/self")).unwrap();
        let sys = Sys::at(dir.path());
        let g: Vec<i32> = group_members(&sys, 20).iter().map(|p| p.pid).collect();
        assert_eq!(g, vec![20, 21]);
    }
}
