//! The cache probe's working sets: how large the measured CPU's caches
//! are (read from sysfs), and the pointer-chasing walks through buffers of
//! those sizes.
//!
//! Each level's working set is a buffer of 64-byte lines linked into one
//! random cycle ([`Walk`]): every line holds the index of the next, the
//! order is a random cyclic permutation (Sattolo's algorithm), so each load
//! depends on the one before (no two overlap) and no prefetcher can guess
//! the next line. Sizes come from
//! `/sys/devices/system/cpu/cpuN/cache/index*/{level,type,size,shared_cpu_list}`:
//! L1d and L2 whole, L3 divided by the CPUs that share it (the CPU's fair
//! share of the last-level cache). A level sysfs does not describe is
//! walked at an assumed size, said so in the set's `note`.

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;
use crate::sys::{syscalls, Sys};

/// Bytes in a cache line as the walks lay them out (one link per line).
pub const LINE_BYTES: u64 = 64;

/// The largest working set walked (a larger L3 share is cut to this and
/// said so): one untimed pass over it must stay well under a second.
pub const MAX_SET_BYTES: u64 = 64 << 20;

/// The kind of a cache, as sysfs's `type` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheType {
    /// `Data`.
    Data,
    /// `Instruction`.
    Instruction,
    /// `Unified`.
    Unified,
}

/// One `cache/indexN` directory of a CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheIndex {
    /// `level`: 1, 2, 3.
    pub level: u32,
    /// `type`.
    pub kind: CacheType,
    /// `size` in bytes.
    pub size_bytes: u64,
    /// `shared_cpu_list`: the CPUs sharing this cache.
    pub shared_cpus: CpuSet,
}

/// Parses sysfs's cache `size`: a number of bytes with an optional `K`,
/// `M` or `G` suffix (binary multiples: `48K`, `2048K`, `32M`). `None` for
/// anything else, zero included.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (digits, shift) = match t.as_bytes().last()? {
        b'K' | b'k' => (&t[..t.len() - 1], 10),
        b'M' | b'm' => (&t[..t.len() - 1], 20),
        b'G' | b'g' => (&t[..t.len() - 1], 30),
        _ => (t, 0),
    };
    let n: u64 = digits.parse().ok()?;
    n.checked_mul(1 << shift).filter(|&b| b > 0)
}

fn parse_type(text: &str) -> Option<CacheType> {
    match text.trim() {
        "Data" => Some(CacheType::Data),
        "Instruction" => Some(CacheType::Instruction),
        "Unified" => Some(CacheType::Unified),
        _ => None,
    }
}

/// The caches sysfs lists for `cpu`, by index; an index whose files are
/// missing or do not parse is left out and named in the second list.
pub fn read_indices(sys: &Sys, cpu: u32) -> (Vec<CacheIndex>, Vec<String>) {
    let dir = format!("sys/devices/system/cpu/cpu{cpu}/cache");
    let mut names: Vec<String> = match sys.subdirs(&dir) {
        Ok(n) => n.into_iter().filter(|n| n.starts_with("index")).collect(),
        Err(_) => return (Vec::new(), Vec::new()),
    };
    names.sort_by_key(|n| n["index".len()..].parse::<u32>().unwrap_or(u32::MAX));
    let mut found = Vec::new();
    let mut unread = Vec::new();
    for name in names {
        let at = |f: &str| sys.read_trimmed(&format!("{dir}/{name}/{f}")).ok();
        let index = (|| {
            Some(CacheIndex {
                level: at("level")?.parse().ok()?,
                kind: parse_type(&at("type")?)?,
                size_bytes: parse_size(&at("size")?)?,
                shared_cpus: at("shared_cpu_list")?.parse().ok()?,
            })
        })();
        match index {
            Some(i) => found.push(i),
            None => unread.push(format!("/{dir}/{name}")),
        }
    }
    (found, unread)
}

/// Where a working set's size came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SizeSource {
    /// The cache's size in sysfs (L3: divided by the CPUs sharing it).
    Sysfs,
    /// sysfs does not describe the level: a typical size was assumed.
    Assumed,
    /// The user gave the size (`--working-set`).
    Given,
}

/// One level's working set on one CPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkingSet {
    /// `L1d`, `L2` or `L3`.
    pub level: String,
    /// The cache's size in bytes as sysfs gives it (`null` when assumed).
    pub cache_bytes: Option<u64>,
    /// CPUs sharing the cache (its `shared_cpu_list`; `null` when assumed).
    pub shared_by: Option<u32>,
    /// The working set walked, bytes: the cache's size (L3: its share).
    pub bytes: u64,
    /// 64-byte lines in the walk (`bytes / 64`).
    pub lines: u64,
    /// `sysfs` or `assumed`.
    pub source: SizeSource,
    /// What the reader should know (an assumed size, a cut, an L3 share
    /// no larger than L2).
    pub note: Option<String>,
}

/// The three levels walked and the size assumed for each when sysfs does
/// not describe it (typical of current x86 server cores).
const LEVELS: [(u32, &str, u64); 3] =
    [(1, "L1d", 32 << 10), (2, "L2", 1 << 20), (3, "L3", 2 << 20)];

/// `b` bytes for people: `48 KiB`, `2 MiB`, `1.9 MiB`.
pub fn human_bytes(b: u64) -> String {
    match b {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1 << 20) as f64),
        b if b >= 1 << 10 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// The working sets of `cpu` from its cache indices: L1d (a data or
/// unified level-1 cache), L2 and the L3 share (size ÷ CPUs in its
/// `shared_cpu_list`), each cut to whole lines within
/// [`LINE_BYTES`]·2..=[`MAX_SET_BYTES`]. A level not among `indices` gets
/// its assumed size and a note naming `cpu`. Pure.
pub fn working_sets(cpu: u32, indices: &[CacheIndex]) -> Vec<WorkingSet> {
    let mut sets: Vec<WorkingSet> = Vec::new();
    for (level, name, assumed) in LEVELS {
        let found = indices
            .iter()
            .find(|i| i.level == level && i.kind != CacheType::Instruction);
        let mut set = match found {
            Some(i) => {
                let shared = i.shared_cpus.len().max(1) as u32;
                let bytes = if level == 3 {
                    i.size_bytes / shared as u64
                } else {
                    i.size_bytes
                };
                WorkingSet {
                    level: name.into(),
                    cache_bytes: Some(i.size_bytes),
                    shared_by: Some(shared),
                    bytes,
                    lines: 0,
                    source: SizeSource::Sysfs,
                    note: None,
                }
            }
            None => WorkingSet {
                level: name.into(),
                cache_bytes: None,
                shared_by: None,
                bytes: assumed,
                lines: 0,
                source: SizeSource::Assumed,
                note: Some(format!(
                    "no level-{level} data cache in /sys/devices/system/cpu/cpu{cpu}/cache: assumed {}",
                    human_bytes(assumed)
                )),
            },
        };
        if set.bytes > MAX_SET_BYTES {
            set.note = Some(format!(
                "{} cut to {} (one untimed pass must stay short)",
                human_bytes(set.bytes),
                human_bytes(MAX_SET_BYTES)
            ));
            set.bytes = MAX_SET_BYTES;
        }
        set.bytes = (set.bytes / LINE_BYTES).max(2) * LINE_BYTES;
        set.lines = set.bytes / LINE_BYTES;
        if level == 3 && set.note.is_none() {
            if let Some(l2) = sets.iter().find(|s| s.level == "L2") {
                if set.bytes <= l2.bytes {
                    set.note = Some(format!(
                        "the L3 share ({}) is no larger than L2 ({}): its walk mostly hits L2",
                        human_bytes(set.bytes),
                        human_bytes(l2.bytes)
                    ));
                }
            }
        }
        sets.push(set);
    }
    sets
}

/// The one working set of `bytes` the user gave (`--working-set`), cut to
/// whole lines.
pub fn given(bytes: u64) -> WorkingSet {
    let bytes = (bytes / LINE_BYTES).max(2) * LINE_BYTES;
    WorkingSet {
        level: human_bytes(bytes).replace(' ', ""),
        cache_bytes: None,
        shared_by: None,
        bytes,
        lines: bytes / LINE_BYTES,
        source: SizeSource::Given,
        note: None,
    }
}

/// The working sets of `cpu` on the machine behind `sys`, with a note for
/// each index sysfs lists but that could not be read.
pub fn plan(sys: &Sys, cpu: u32) -> Vec<WorkingSet> {
    let (indices, unread) = read_indices(sys, cpu);
    let mut sets = working_sets(cpu, &indices);
    if !unread.is_empty() {
        for s in sets.iter_mut().filter(|s| s.source == SizeSource::Assumed) {
            let more = format!("; unreadable: {}", unread.join(", "));
            if let Some(n) = s.note.as_mut() {
                n.push_str(&more);
            }
        }
    }
    sets
}

/// One cache line of a walk: the index of the next line, padded to 64
/// bytes and aligned to them, so each link sits alone on its line.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
pub struct Line {
    next: usize,
    _pad: [usize; 7],
}

/// A buffer of lines linked into one random cycle through all of them.
#[derive(Debug, Default)]
pub struct Walk {
    lines: Vec<Line>,
    /// The first line of the cycle (lines before it only align the rest
    /// to a huge page).
    start: usize,
    /// Lines in the cycle.
    len: usize,
}

impl Walk {
    /// `lines` lines (at least 2) linked in a random cyclic order drawn
    /// from `seed` (Sattolo's algorithm: every cyclic order equally likely,
    /// never a shorter cycle). Allocates and writes every line: call it on
    /// the measuring thread, before its loop (first touch places the pages
    /// on that CPU's memory node).
    ///
    /// A set of a huge page or more starts on a huge-page boundary and is
    /// put into transparent huge pages once written (`MADV_COLLAPSE`), so
    /// that TLB misses do not add to its loads where the kernel has huge
    /// pages to give ([`huge_pages_kib`] says whether it did).
    pub fn new(lines: usize, seed: u64) -> Walk {
        let n = lines.max(2);
        let mut order: Vec<usize> = (0..n).collect();
        let mut rng = fastrand::Rng::with_seed(seed);
        for i in (1..n).rev() {
            order.swap(i, rng.usize(..i));
        }
        let huge = syscalls::HUGE_PAGE_BYTES;
        let bytes = n * LINE_BYTES as usize;
        let pad = if bytes >= huge {
            huge / LINE_BYTES as usize
        } else {
            0
        };
        let mut buf: Vec<Line> = Vec::with_capacity(n + pad);
        let addr = buf.as_ptr() as usize;
        let start = match pad {
            0 => 0,
            _ => (addr.next_multiple_of(huge) - addr) / LINE_BYTES as usize,
        };
        let line = |next| Line { next, _pad: [0; 7] };
        buf.extend((0..start).map(|_| line(0)));
        // Sattolo's permutation read as i → order[i] is one n-cycle.
        buf.extend(order.into_iter().map(|next| line(start + next)));
        if pad > 0 {
            // Now, not by advice before the first touch: a locked process's
            // pages are faulted in small at allocation, and advice would
            // also have khugepaged scan this memory while it is measured.
            // Refused (a kernel before 6.1, no huge page free): small pages.
            let first = buf[start..].as_ptr() as usize;
            let _ = syscalls::collapse_huge_pages(first, bytes);
        }
        Walk {
            lines: buf,
            start,
            len: n,
        }
    }

    /// Number of lines in the cycle.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the walk has no line (a default, unprepared walk).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The line a walk starts from (any line of the cycle would do).
    pub fn start(&self) -> usize {
        self.start
    }

    /// Where the cycle's lines are: address and bytes.
    pub fn span(&self) -> (usize, usize) {
        let first = self
            .lines
            .get(self.start)
            .map_or(0, |l| l as *const Line as usize);
        (first, self.len * LINE_BYTES as usize)
    }

    /// The line after `i`: one load from line `i`.
    #[inline(always)]
    pub fn next(&self, i: usize) -> usize {
        self.lines[i].next
    }
}

/// KiB of transparent huge pages in the mappings of this process that
/// hold `[addr, addr + len)`, from `/proc/self/smaps` (`AnonHugePages`);
/// `None` when it cannot be read.
pub fn huge_pages_kib((addr, len): (usize, usize)) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/smaps").ok()?;
    Some(huge_pages_in(&text, addr, addr + len))
}

/// `AnonHugePages` of the mappings in `smaps` that overlap `[from, to)`.
fn huge_pages_in(smaps: &str, from: usize, to: usize) -> u64 {
    let hex = |t: &str| usize::from_str_radix(t, 16).ok();
    let mut total = 0;
    let mut inside = false;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        // A mapping's header: `start-end perms offset dev inode [path]`.
        let header = first
            .split_once('-')
            .and_then(|(a, b)| Some((hex(a)?, hex(b)?)));
        if let Some((start, end)) = header {
            inside = start < to && from < end;
            continue;
        }
        if let (true, Some(kb)) = (inside, line.strip_prefix("AnonHugePages:")) {
            let kb = kb.trim().trim_end_matches("kB").trim();
            total += kb.parse::<u64>().unwrap_or(0);
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(level: u32, kind: CacheType, size: &str, shared: &str) -> CacheIndex {
        CacheIndex {
            level,
            kind,
            size_bytes: parse_size(size).unwrap(),
            shared_cpus: shared.parse().unwrap(),
        }
    }

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_size("48K"), Some(48 << 10));
        assert_eq!(parse_size("2048K\n"), Some(2 << 20));
        assert_eq!(parse_size("32M"), Some(32 << 20));
        assert_eq!(parse_size("1G"), Some(1 << 30));
        assert_eq!(parse_size("512"), Some(512));
        for bad in ["", "K", "0K", "-1K", "12X", "1.5M", "99999999999999999999G"] {
            assert_eq!(parse_size(bad), None, "{bad:?}");
        }
    }

    /// A fixture CPU with sysfs cache directories (the host's layout:
    /// level, type, size, shared_cpu_list per index).
    fn fixture(cpu: u32, indices: &[(&str, &str, &str, &str)]) -> (tempfile::TempDir, Sys) {
        let dir = tempfile::tempdir().unwrap();
        for (i, (level, kind, size, shared)) in indices.iter().enumerate() {
            let p = dir
                .path()
                .join(format!("sys/devices/system/cpu/cpu{cpu}/cache/index{i}"));
            std::fs::create_dir_all(&p).unwrap();
            for (f, v) in [
                ("level", level),
                ("type", kind),
                ("size", size),
                ("shared_cpu_list", shared),
            ] {
                std::fs::write(p.join(f), format!("{v}\n")).unwrap();
            }
        }
        let sys = Sys::at(dir.path());
        (dir, sys)
    }

    #[test]
    fn sysfs_indices_give_l1d_l2_and_the_l3_share() {
        // An Intel-like core: 48K L1d, 32K L1i, 2M L2 shared with its
        // hyper-thread sibling, 30M L3 over 16 CPUs.
        let (_d, sys) = fixture(
            3,
            &[
                ("1", "Data", "48K", "3,11"),
                ("1", "Instruction", "32K", "3,11"),
                ("2", "Unified", "2048K", "3,11"),
                ("3", "Unified", "30720K", "0-15"),
            ],
        );
        let (indices, unread) = read_indices(&sys, 3);
        assert!(unread.is_empty());
        assert_eq!(indices.len(), 4);
        assert_eq!(indices[1].kind, CacheType::Instruction);
        assert_eq!(indices[3].shared_cpus.len(), 16);
        let sets = plan(&sys, 3);
        let got: Vec<(&str, u64, u64, Option<u32>)> = sets
            .iter()
            .map(|s| (s.level.as_str(), s.bytes, s.lines, s.shared_by))
            .collect();
        assert_eq!(
            got,
            vec![
                ("L1d", 48 << 10, 768, Some(2)),
                ("L2", 2 << 20, 32768, Some(2)),
                ("L3", 1920 << 10, 30720, Some(16)),
            ]
        );
        assert!(sets.iter().all(|s| s.source == SizeSource::Sysfs));
        assert_eq!(sets[2].cache_bytes, Some(30 << 20));
        let note = sets[2].note.as_deref().unwrap();
        assert!(note.contains("no larger than L2"), "{note}");
        assert_eq!(sets[0].note, None);
    }

    #[test]
    fn missing_levels_are_assumed_and_said() {
        // An ARM-like CPU with L1 and L2 only; an index that does not parse.
        let (_d, sys) = fixture(
            0,
            &[
                ("1", "Data", "64K", "0"),
                ("2", "Unified", "1M", "0-3"),
                ("3", "Unified", "lots", "0-3"),
            ],
        );
        let sets = plan(&sys, 0);
        assert_eq!(sets[0].bytes, 64 << 10);
        assert_eq!(sets[1].bytes, 1 << 20);
        assert_eq!(sets[2].source, SizeSource::Assumed);
        assert_eq!(sets[2].bytes, 2 << 20);
        assert_eq!(sets[2].cache_bytes, None);
        let note = sets[2].note.as_deref().unwrap();
        assert!(
            note.contains("no level-3 data cache in /sys/devices/system/cpu/cpu0/cache")
                && note.contains("assumed 2 MiB")
                && note.contains("unreadable: /sys/devices/system/cpu/cpu0/cache/index2"),
            "{note}"
        );
        // No cache directory at all: every level assumed.
        let (_d, empty) = fixture(1, &[]);
        let sets = plan(&empty, 1);
        assert!(sets.iter().all(|s| s.source == SizeSource::Assumed));
        assert_eq!(
            sets.iter().map(|s| s.bytes).collect::<Vec<_>>(),
            vec![32 << 10, 1 << 20, 2 << 20]
        );
    }

    #[test]
    fn huge_and_odd_sizes_are_cut_to_whole_lines() {
        let sets = working_sets(
            0,
            &[
                index(1, CacheType::Unified, "100", "0"),
                index(2, CacheType::Unified, "1000", "0"),
                index(3, CacheType::Unified, "1G", "0"),
            ],
        );
        assert_eq!((sets[0].bytes, sets[0].lines), (128, 2), "at least 2 lines");
        assert_eq!((sets[1].bytes, sets[1].lines), (960, 15));
        assert_eq!(sets[2].bytes, MAX_SET_BYTES);
        assert!(sets[2].note.as_deref().unwrap().contains("cut to 64 MiB"));
    }

    #[test]
    fn huge_pages_are_counted_in_the_mappings_that_hold_the_set() {
        let smaps = "\
00400000-00452000 r-xp 00000000 08:02 173521 /usr/bin/x
AnonHugePages:      9999 kB
7f0000000000-7f0000800000 rw-p 00000000 00:00 0
Size:               8192 kB
AnonHugePages:      6144 kB
7f0000800000-7f0000a00000 rw-p 00000000 00:00 0
AnonHugePages:      2048 kB
";
        assert_eq!(huge_pages_in(smaps, 0x7f0000100000, 0x7f0000900000), 8192);
        assert_eq!(huge_pages_in(smaps, 0x7f0000100000, 0x7f0000200000), 6144);
        assert_eq!(huge_pages_in(smaps, 0x10, 0x20), 0);
    }

    #[test]
    fn a_walk_is_one_cycle_through_every_line() {
        for (lines, seed) in [(2, 1), (3, 7), (768, 42), (32768, 9), (65536, 5)] {
            let w = Walk::new(lines, seed);
            assert_eq!(w.len(), lines);
            let mut seen = vec![false; lines];
            let mut i = w.start();
            for step in 0..lines {
                assert!(
                    !seen[i - w.start()],
                    "line {i} visited twice by step {step}"
                );
                seen[i - w.start()] = true;
                i = w.next(i);
            }
            assert_eq!(i, w.start(), "back at the start after {lines} steps");
            assert!(seen.iter().all(|&s| s));
            // A set of a huge page or more starts on a huge-page boundary.
            let (addr, bytes) = w.span();
            assert_eq!(bytes, lines * 64);
            if bytes >= syscalls::HUGE_PAGE_BYTES {
                assert_eq!(addr % syscalls::HUGE_PAGE_BYTES, 0, "{lines} lines");
            }
        }
        // Random, not sequential: few links go to the neighbouring line.
        let w = Walk::new(4096, 3);
        assert_eq!(w.start(), 0, "a small set is not padded");
        let sequential = (0..4096).filter(|&i| w.next(i) == (i + 1) % 4096).count();
        assert!(sequential < 16, "{sequential} sequential links");
        assert_eq!(std::mem::size_of::<Line>(), 64);
        assert_eq!(std::mem::align_of::<Line>(), 64);
    }
}
