//! resctrl, the kernel's interface to cache and memory bandwidth
//! allocation (Intel RDT, AMD PQoS): where it lives, what its `info`
//! directory says the hardware allows, and its `schemata` format
//! (`Documentation/filesystems/resctrl.rst`).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{Result, Sys, SysError};

mod bandwidth;

pub use bandwidth::Bandwidth;

/// Where resctrl is mounted, relative to the root.
pub const RESCTRL: &str = "sys/fs/resctrl";

/// A cache resource of `info/`: `L3`, or with code and data prioritisation
/// (CDP) `L3CODE` and `L3DATA`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheInfo {
    /// The resource's name in `schemata`.
    pub name: String,
    /// `cbm_mask`: every way of the cache, as bits.
    pub cbm_mask: u64,
    /// `min_cbm_bits`: the fewest ways a mask may have.
    pub min_cbm_bits: u32,
    /// `shareable_bits`: ways other agents (I/O) may also fill.
    pub shareable_bits: u64,
    /// `num_closids`: how many groups, the default one included.
    pub num_closids: u32,
    /// `sparse_masks` (Linux 6.8+): whether a mask may have holes; without
    /// it (Intel) a mask must be one run of bits.
    pub sparse_masks: bool,
}

impl CacheInfo {
    /// How many ways the cache has.
    pub fn ways(&self) -> u32 {
        self.cbm_mask.count_ones()
    }

    /// The mask of `ways` ways for the shield, and of the rest (everyone
    /// else's), each one run of bits: the shield's at the top of the cache,
    /// unless the top holds more of `shareable_bits` than the bottom (the
    /// ways I/O also fills, Intel's DDIO on Xeon SP: device DMA there would
    /// evict the real-time task's lines), then at the bottom.
    pub fn split(&self, ways: u32) -> (u64, u64) {
        let (n, low) = (self.ways(), self.cbm_mask.trailing_zeros());
        let run = 1u64.checked_shl(ways).map_or(u64::MAX, |b| b - 1);
        let top = run.checked_shl(n.saturating_sub(ways) + low).unwrap_or(0) & self.cbm_mask;
        let bottom = run.checked_shl(low).unwrap_or(0) & self.cbm_mask;
        let shared = |mask: u64| (mask & self.shareable_bits).count_ones();
        let shield = match shared(bottom) < shared(top) {
            true => bottom,
            false => top,
        };
        (shield, self.cbm_mask & !shield)
    }

    /// Where `split` puts the shield's `ways` and why, for people.
    pub fn placement(&self, ways: u32) -> String {
        let (shield, _) = self.split(ways);
        let (first, last) = (
            shield.trailing_zeros(),
            63u32.saturating_sub(shield.leading_zeros()),
        );
        let io = match (self.shareable_bits, shield & self.shareable_bits) {
            (0, _) => "no ways shared with I/O (shareable_bits 0)".to_string(),
            (io, 0) => format!("away from the ways I/O also fills (shareable_bits {io:x})"),
            (io, _) => format!(
                "overlapping the ways I/O also fills (shareable_bits {io:x}): no run of {ways} avoids them"
            ),
        };
        format!(
            "{}: ways {first}-{last} of {} (mask {shield:x}), {io}",
            self.name,
            self.ways()
        )
    }
}

/// The unit of the `MB` resource's values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MbUnit {
    /// Percent of the bandwidth (Intel MBA): rounded up to
    /// `bandwidth_gran`, at least `min_bandwidth`, 100 is no limit.
    #[default]
    Percent,
    /// Multiples of 1/8 GB/s (AMD): 2048 is no limit.
    EighthGbps,
    /// MiB/s: resctrl mounted with `mba_MBps` (the software controller).
    MiBps,
}

impl MbUnit {
    /// The value that sets no limit, as resctrl gives a new group: 100
    /// percent, 2048 eighths of a GB/s (AMD), `u32::MAX` MiB/s (the
    /// software controller's).
    pub fn unlimited(self) -> u64 {
        match self {
            MbUnit::Percent => 100,
            MbUnit::EighthGbps => 2048,
            MbUnit::MiBps => u64::from(u32::MAX),
        }
    }

    /// The unit as resctrl's documentation names it.
    pub fn name(self) -> &'static str {
        match self {
            MbUnit::Percent => "percent",
            MbUnit::EighthGbps => "1/8 GB/s (AMD)",
            MbUnit::MiBps => "MiB/s (mounted with mba_MBps)",
        }
    }
}

/// Memory bandwidth allocation (`info/MB`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MbInfo {
    /// `min_bandwidth`: the lowest percentage.
    pub min_bandwidth: u32,
    /// `bandwidth_gran`: percentages are rounded up to a multiple of it.
    pub bandwidth_gran: u32,
    /// `num_closids`.
    pub num_closids: u32,
    /// The unit of its values.
    #[serde(default)]
    pub unit: MbUnit,
}

impl MbInfo {
    /// `percent` as the kernel keeps it: rounded up to a multiple of
    /// `bandwidth_gran`, at least `min_bandwidth`, at most 100.
    pub fn rounded(&self, percent: u32) -> u32 {
        let gran = self.bandwidth_gran.max(1);
        (percent.div_ceil(gran) * gran)
            .max(self.min_bandwidth)
            .min(100)
    }
}

/// What resctrl's `info/` directory says.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Info {
    /// The L3 cache resources (none: no cache allocation).
    pub caches: Vec<CacheInfo>,
    /// Memory bandwidth allocation, when the hardware has it.
    pub mb: Option<MbInfo>,
}

impl Info {
    /// How many groups the hardware has in all (the default one included):
    /// the fewest any resource has.
    pub fn num_closids(&self) -> u32 {
        let caches = self.caches.iter().map(|c| c.num_closids);
        caches
            .chain(self.mb.iter().map(|m| m.num_closids))
            .min()
            .unwrap_or(0)
    }
}

fn unparsable(rel: &str, text: &str, what: &str) -> SysError {
    let e = std::io::Error::new(std::io::ErrorKind::InvalidData, format!("not {what}"));
    SysError::new("parse", rel, Some(text), e)
}

fn read_u64_hex(sys: &Sys, rel: &str) -> Result<u64> {
    let text = sys.read_trimmed(rel)?;
    u64::from_str_radix(&text, 16).map_err(|_| unparsable(rel, &text, "a hex mask"))
}

fn read_u32(sys: &Sys, rel: &str) -> Result<u32> {
    let text = sys.read_trimmed(rel)?;
    text.parse().map_err(|_| unparsable(rel, &text, "a number"))
}

/// Whether `/proc/cpuinfo` names an AMD (or Hygon) CPU, whose `MB` values
/// are in 1/8 GB/s.
pub fn amd(sys: &Sys) -> bool {
    let text = sys.read("proc/cpuinfo").unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("vendor_id"))
        .is_some_and(|v| v.contains("AuthenticAMD") || v.contains("HygonGenuine"))
}

/// The unit of `MB` values of resctrl mounted at `mount`: MiB/s when it
/// is mounted with `mba_MBps`, 1/8 GB/s on AMD, else percent.
fn mb_unit(sys: &Sys, mount: &str) -> MbUnit {
    let mounts = sys.read("proc/self/mounts").unwrap_or_default();
    let at = format!("/{mount}");
    let mba_mbps = super::procfs::parse_mounts(&mounts).iter().any(|m| {
        m.fstype == "resctrl" && m.target == at && m.options.split(',').any(|o| o == "mba_MBps")
    });
    match (mba_mbps, amd(sys)) {
        (true, _) => MbUnit::MiBps,
        (false, true) => MbUnit::EighthGbps,
        (false, false) => MbUnit::Percent,
    }
}

/// Reads `info/` of resctrl mounted at `mount`.
pub fn read_info(sys: &Sys, mount: &str) -> Result<Info> {
    let mut info = Info::default();
    for name in ["L3", "L3CODE", "L3DATA"] {
        let dir = format!("{mount}/info/{name}");
        if !sys.exists(&dir) {
            continue;
        }
        info.caches.push(CacheInfo {
            name: name.to_string(),
            cbm_mask: read_u64_hex(sys, &format!("{dir}/cbm_mask"))?,
            min_cbm_bits: read_u32(sys, &format!("{dir}/min_cbm_bits"))?,
            shareable_bits: read_u64_hex(sys, &format!("{dir}/shareable_bits")).unwrap_or(0),
            num_closids: read_u32(sys, &format!("{dir}/num_closids"))?,
            sparse_masks: read_u32(sys, &format!("{dir}/sparse_masks")).is_ok_and(|v| v == 1),
        });
    }
    let mb = format!("{mount}/info/MB");
    if sys.exists(&mb) {
        info.mb = Some(MbInfo {
            min_bandwidth: read_u32(sys, &format!("{mb}/min_bandwidth"))?,
            bandwidth_gran: read_u32(sys, &format!("{mb}/bandwidth_gran"))?,
            num_closids: read_u32(sys, &format!("{mb}/num_closids"))?,
            unit: mb_unit(sys, mount),
        });
    }
    Ok(info)
}

/// The id of the L3 cache `cpu` sits in: its resctrl domain
/// (`cpuN/cache/indexM/id` of the index whose `level` is 3).
pub fn l3_domain(sys: &Sys, cpu: u32) -> Option<u32> {
    let dir = format!("sys/devices/system/cpu/cpu{cpu}/cache");
    let indices = sys.list(&dir).ok()?;
    indices
        .iter()
        .filter(|i| i.starts_with("index"))
        .find(|i| {
            sys.read_trimmed(&format!("{dir}/{i}/level"))
                .ok()
                .as_deref()
                == Some("3")
        })
        .and_then(|i| sys.read_trimmed(&format!("{dir}/{i}/id")).ok())
        .and_then(|id| id.parse().ok())
}

/// The CPU features `/proc/cpuinfo` lists for the first CPU.
pub fn cpu_flags(sys: &Sys) -> BTreeSet<String> {
    let text = sys.read("proc/cpuinfo").unwrap_or_default();
    text.lines()
        .find_map(|l| {
            l.strip_prefix("flags")
                .map(|v| v.trim_start_matches([' ', '\t', ':']))
        })
        .map(|v| v.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// What one `schemata` write gives a group, in terms of the hardware's
/// ways rather than masks, so that it can be planned before resctrl is
/// mounted and its `info/` can be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CacheShare {
    /// `ways` ways of each L3 cache in `domains` (the shield's group),
    /// placed by [`CacheInfo::split`]. (The name is the journal's.)
    Top {
        /// Ways of each domain.
        ways: u32,
        /// L3 cache ids.
        domains: Vec<u32>,
    },
    /// The ways of `domains` but the shield's `ways`, and `bandwidth`
    /// percent of the memory bandwidth in every domain, rounded as the
    /// kernel rounds it (the default group).
    Rest {
        /// The shield's ways of each domain, left out.
        ways: u32,
        /// L3 cache ids.
        domains: Vec<u32>,
        /// The memory bandwidth left to the group (a number: percent, as
        /// journals before rates wrote it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bandwidth: Option<Bandwidth>,
    },
    /// Every way of every L3 cache, and all the memory bandwidth: a group
    /// as resctrl makes it.
    Full,
    /// A `schemata` as read before (given back by a change in place).
    Text {
        /// The text.
        schemata: String,
    },
}

impl CacheShare {
    /// The `schemata` lines that give the share on hardware with `info`
    /// (both halves of CDP alike), and every domain of the memory
    /// bandwidth resource in `all_domains`.
    pub fn schemata(&self, info: &Info, all_domains: &[u32]) -> String {
        let masks =
            |ways: u32, domains: &[u32], top: bool| -> Vec<(String, BTreeMap<u32, String>)> {
                info.caches
                    .iter()
                    .map(|c| {
                        let (high, low) = c.split(ways);
                        let mask = if top { high } else { low };
                        let values = domains.iter().map(|d| (*d, format!("{mask:x}"))).collect();
                        (c.name.clone(), values)
                    })
                    .collect()
            };
        let schemata: Schemata = match self {
            CacheShare::Top { ways, domains } => masks(*ways, domains, true).into_iter().collect(),
            CacheShare::Rest {
                ways,
                domains,
                bandwidth,
            } => {
                let mut s: Schemata = masks(*ways, domains, false).into_iter().collect();
                let value = (info.mb.as_ref())
                    .zip(*bandwidth)
                    .and_then(|(mb, bw)| mb.value(bw));
                if let Some(bw) = value {
                    let all = all_domains.iter().map(|d| (*d, bw.to_string())).collect();
                    s.insert("MB".into(), all);
                }
                s
            }
            CacheShare::Full => {
                let mut s: Schemata = masks(0, all_domains, false).into_iter().collect();
                if let Some(mb) = &info.mb {
                    let none = mb.unit.unlimited().to_string();
                    let all = all_domains.iter().map(|d| (*d, none.clone())).collect();
                    s.insert("MB".into(), all);
                }
                s
            }
            CacheShare::Text { schemata } => return schemata.trim().to_string(),
        };
        render_schemata(&schemata)
    }
}

/// What resctrl's monitoring counts of one group in one L3 domain
/// (`mon_data/mon_L3_NN/`): each figure where the CPUs have it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Monitored {
    /// The L3 cache id.
    pub domain: u32,
    /// `llc_occupancy`: bytes of the L3 the group's work holds now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llc_occupancy_bytes: Option<u64>,
    /// `mbm_total_bytes`: bytes the group moved to and from memory since
    /// the counter started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mbm_total_bytes: Option<u64>,
}

/// The monitoring of the group at `group` (its directory), per L3 domain;
/// empty where resctrl has no monitoring.
pub fn read_monitoring(sys: &Sys, group: &str) -> Vec<Monitored> {
    let dir = format!("{group}/mon_data");
    let mut out: Vec<Monitored> = sys
        .subdirs(&dir)
        .unwrap_or_default()
        .iter()
        .filter_map(|d| {
            let domain = d.strip_prefix("mon_L3_")?.parse().ok()?;
            let figure = |name: &str| {
                sys.read_trimmed(&format!("{dir}/{d}/{name}"))
                    .ok()
                    .and_then(|v| v.parse().ok())
            };
            Some(Monitored {
                domain,
                llc_occupancy_bytes: figure("llc_occupancy"),
                mbm_total_bytes: figure("mbm_total_bytes"),
            })
        })
        .collect();
    out.sort_by_key(|m| m.domain);
    out
}

/// A `schemata`: per resource, per domain, its value (a hex mask for a
/// cache, a percentage or MBps for `MB`).
pub type Schemata = BTreeMap<String, BTreeMap<u32, String>>;

/// Parses a `schemata` as the kernel prints it (`    L3:0=fff;1=fff`, one
/// resource a line, leading blanks) or as it is written. The error names
/// the line that does not parse.
pub fn parse_schemata(text: &str) -> std::result::Result<Schemata, String> {
    let mut out = Schemata::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (resource, domains) = line
            .split_once(':')
            .ok_or_else(|| format!("{line:?}: no RESOURCE:"))?;
        let entry = out.entry(resource.trim().to_string()).or_default();
        for part in domains.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let (id, value) = part
                .split_once('=')
                .ok_or_else(|| format!("{line:?}: {part:?} is not DOMAIN=VALUE"))?;
            let id = id
                .trim()
                .parse()
                .map_err(|_| format!("{line:?}: domain {id:?} is not a number"))?;
            entry.insert(id, value.trim().to_string());
        }
    }
    Ok(out)
}

/// A `schemata` in the form written: `L3:0=f0;1=f0`, a line a resource.
pub fn render_schemata(schemata: &Schemata) -> String {
    schemata
        .iter()
        .map(|(resource, domains)| {
            let values: Vec<String> = domains.iter().map(|(id, v)| format!("{id}={v}")).collect();
            format!("{resource}:{}", values.join(";"))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether two values of one resource are the same: masks compared as
/// numbers (the kernel prints them zero-padded), others as text.
pub fn same_value(resource: &str, a: &str, b: &str) -> bool {
    if resource.starts_with("L2") || resource.starts_with("L3") {
        let (a, b) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16));
        return a.is_ok() && a == b;
    }
    a == b
}

/// Whether the `schemata` that `read` back holds every value `wrote` set
/// (the kernel prints every resource and domain; a write may set a few).
pub fn schemata_holds(read: &str, wrote: &str) -> bool {
    let (Ok(read), Ok(wrote)) = (parse_schemata(read), parse_schemata(wrote)) else {
        return false;
    };
    wrote.iter().all(|(resource, domains)| {
        domains.iter().all(|(id, value)| {
            read.get(resource)
                .and_then(|d| d.get(id))
                .is_some_and(|now| same_value(resource, now, value))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemata_parse_as_printed_and_render_as_written() {
        let printed = "    L3:0=fff;1=0ff\n    MB:0=100;1= 50\n";
        let s = parse_schemata(printed).unwrap();
        assert_eq!(s["L3"][&1], "0ff");
        assert_eq!(s["MB"][&1], "50");
        assert_eq!(render_schemata(&s), "L3:0=fff;1=0ff\nMB:0=100;1=50");
        assert!(parse_schemata("L3 0=f").is_err());
        assert!(parse_schemata("L3:x=f").is_err());
    }

    #[test]
    fn a_write_holds_when_each_value_it_set_reads_back() {
        let read = "    L3:0=00f0;1=ffff\n    MB:0=100;1=100\n";
        assert!(schemata_holds(read, "L3:0=f0"));
        assert!(schemata_holds(read, "L3:0=f0;1=ffff\nMB:1=100"));
        assert!(!schemata_holds(read, "L3:0=f8"));
        assert!(!schemata_holds(read, "L3:2=f0"));
        assert!(!schemata_holds(read, "MB:0=50"));
    }

    #[test]
    fn the_shields_ways_are_the_top_of_the_mask_and_the_rest_below() {
        let l3 = CacheInfo {
            name: "L3".into(),
            cbm_mask: 0xfff,
            min_cbm_bits: 1,
            shareable_bits: 0,
            num_closids: 16,
            sparse_masks: false,
        };
        assert_eq!(l3.ways(), 12);
        assert_eq!(l3.split(4), (0xf00, 0x0ff));
        assert_eq!(l3.split(11), (0xffe, 0x001));
    }

    #[test]
    fn the_shields_ways_avoid_the_ways_io_fills_where_a_run_can() {
        let l3 = CacheInfo {
            name: "L3".into(),
            cbm_mask: 0x7ff,
            min_cbm_bits: 1,
            shareable_bits: 0x600,
            num_closids: 16,
            sparse_masks: false,
        };
        assert_eq!(l3.split(4), (0x00f, 0x7f0));
        assert!(l3
            .placement(4)
            .contains("ways 0-3 of 11 (mask f), away from"));
        // 10 of 11: both runs overlap; the bottom one less (one way).
        assert_eq!(l3.split(10), (0x3ff, 0x400));
        assert!(l3.placement(10).contains("overlapping"));
        // Shared ways at the bottom: the top as before.
        let low = CacheInfo {
            shareable_bits: 0x3,
            ..l3
        };
        assert_eq!(low.split(4), (0x780, 0x07f));
    }

    #[test]
    fn a_percentage_is_rounded_as_the_kernel_keeps_it() {
        let mb = MbInfo {
            min_bandwidth: 10,
            bandwidth_gran: 10,
            num_closids: 8,
            unit: MbUnit::Percent,
        };
        assert_eq!(mb.rounded(55), 60);
        assert_eq!(mb.rounded(50), 50);
        assert_eq!(mb.rounded(3), 10);
        assert_eq!(mb.rounded(100), 100);
    }
}
