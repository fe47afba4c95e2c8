//! What the cache share reads back: `on`'s outcome, `status`'s share and
//! monitoring (as lines, data and metrics), whether it still holds, and
//! what other programs' groups do against it.

use super::*;

/// Each of other programs' groups that holds some of the shield's `ways`
/// in a cache the shield's CPUs sit in, said for people.
pub(super) fn overlaps(facts: &Facts, info: &Info, ways: u32, shield: &CpuSet) -> Vec<String> {
    let domains = facts.domains(shield);
    let mut found = Vec::new();
    for (group, text) in &facts.others {
        let Ok(schemata) = kernel::parse_schemata(text) else {
            continue;
        };
        for cache in &info.caches {
            let (mine, _) = cache.split(ways);
            let theirs = schemata.get(&cache.name).into_iter().flatten();
            let overlap = theirs
                .filter(|(d, _)| domains.contains(d))
                .find_map(|(d, v)| {
                    let v = u64::from_str_radix(v, 16).ok()?;
                    (v & mine != 0).then_some((*d, v))
                });
            if let Some((domain, mask)) = overlap {
                found.push(format!(
                    "the resctrl group {}, made by another program, holds ways {mask:x} of \
                     {} cache {domain}, where the shield's {ways} ways are {mine:x}",
                    group_name(group),
                    cache.name
                ));
            }
        }
    }
    found
}

/// The threads of the shield (its cgroup's, at `shield_dir`) that another
/// group's `tasks` file names: a task's group overrides its CPU's, so
/// their cache use is that group's, not the shield's.
pub(super) fn assigned_elsewhere(sys: &Sys, facts: &Facts, shield_dir: &str) -> Vec<String> {
    let read_ids = |path: &str| -> BTreeSet<i32> {
        let text = sys.read(path).unwrap_or_default();
        text.split_whitespace()
            .filter_map(|t| t.parse().ok())
            .collect()
    };
    let mut inside = read_ids(&format!("{shield_dir}/cgroup.threads"));
    inside.extend(read_ids(&format!("{shield_dir}/tasks")));
    let mut found = Vec::new();
    for group in facts.others.keys() {
        let theirs = read_ids(&format!("{group}/tasks"));
        let ids: Vec<String> = inside.intersection(&theirs).map(i32::to_string).collect();
        if !ids.is_empty() {
            found.push(format!(
                "threads {} of the shield are assigned to the resctrl group {} (its tasks \
                 file), which overrides the shield's group: their cache is not the shield's",
                ids.join(","),
                group_name(group)
            ));
        }
    }
    found
}

/// What `on`'s report says of the cache share, read back.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// The group's `schemata`, as it reads back (one line a resource).
    pub shield: String,
    /// The default group's, as it reads back.
    pub others: String,
    /// The CPUs of the group, as they read back.
    pub cpus: CpuSet,
    /// Which ways the shield has of each cache resource, and why there.
    #[serde(default)]
    pub placement: Vec<String>,
    /// The group's `mode` as it reads: `exclusive` (no other group may
    /// be given its ways) or `shareable`.
    #[serde(default)]
    pub mode: String,
}

/// The share as the kernel holds it after `on` (none when the plan had
/// none).
pub(super) fn outcome(sys: &Sys, steps: &[Step]) -> Option<Outcome> {
    let planned = steps
        .iter()
        .any(|s| matches!(own_of(&s.action), Some(Own::ResctrlSchemata { .. })));
    let ways = steps.iter().find_map(|s| match own_of(&s.action) {
        Some(Own::ResctrlSchemata {
            share: CacheShare::Top { ways, .. },
            ..
        }) => Some(ways),
        _ => None,
    })?;
    (planned && sys.exists(GROUP)).then(|| read_outcome(sys, ways))
}

/// Both groups' `schemata` and the group's CPUs as they read now, and
/// where the shield's `ways` are.
pub(super) fn read_outcome(sys: &Sys, ways: u32) -> Outcome {
    let tidy = |path: &str| {
        let text = sys.read(path).unwrap_or_default();
        text.lines().map(str::trim).collect::<Vec<_>>().join("; ")
    };
    Outcome {
        shield: tidy(&format!("{GROUP}/schemata")),
        others: tidy(&format!("{RESCTRL}/schemata")),
        cpus: sys
            .read_cpulist(&format!("{GROUP}/cpus_list"))
            .unwrap_or_default(),
        mode: sys
            .read_trimmed(&format!("{GROUP}/mode"))
            .unwrap_or_default(),
        placement: kernel::read_info(sys, RESCTRL)
            .map(|info| info.caches.iter().map(|c| c.placement(ways)).collect())
            .unwrap_or_default(),
    }
}

/// What `status` shows of the cache share: the share as it reads, and what
/// resctrl's monitoring counts of the shield's group (L3 occupancy, memory
/// traffic), where the CPUs have it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// The share as it reads now.
    #[serde(flatten)]
    pub share: Outcome,
    /// The group's monitoring, per L3 domain (empty: none).
    #[serde(default)]
    pub monitored: Vec<kernel::Monitored>,
    /// The default group's (everything outside the shield): the
    /// neighbours whose cache use and memory traffic the share holds off.
    #[serde(default)]
    pub others_monitored: Vec<kernel::Monitored>,
}

/// The cache share of the shield `state` for `status`, when it has one
/// and its group exists.
pub(super) fn status(sys: &Sys, state: &State) -> Option<Status> {
    let ways = state.request.as_ref().and_then(super::ask)?.ways;
    sys.exists(GROUP).then(|| Status {
        share: read_outcome(sys, ways),
        monitored: kernel::read_monitoring(sys, GROUP),
        others_monitored: kernel::read_monitoring(sys, RESCTRL),
    })
}

/// The lines for people of the share as it reads back.
pub(super) fn share_lines(s: &Outcome) -> Vec<String> {
    let mut lines = vec![
        format!("L3 of the shield, CPUs {}: {}", s.cpus, s.shield),
        format!("L3 of the others: {}", s.others),
    ];
    lines.extend(s.placement.iter().cloned());
    lines.push(match s.mode.as_str() {
        "exclusive" => "mode exclusive: the kernel gives no other group the shield's ways".into(),
        mode => format!(
            "mode {mode}: a group made later may be given the shield's ways (exclusive only where the share covers every L3 and avoids the ways I/O fills)"
        ),
    });
    lines
}

/// `status`'s lines: the share, then the monitoring per L3 of both groups.
pub(super) fn status_lines(c: &Status) -> Vec<String> {
    let kib = |b: Option<u64>| b.map_or("-".into(), |b| format!("{} KiB", b / 1024));
    let mib = |b: Option<u64>| b.map_or("-".into(), |b| format!("{} MiB", b >> 20));
    let mut lines = share_lines(&c.share);
    for (whose, monitored) in [
        ("the shield", &c.monitored),
        ("the others", &c.others_monitored),
    ] {
        lines.extend(monitored.iter().map(|m| {
            format!(
                "L3 {} of {whose}: {} held, {} to and from memory so far",
                m.domain,
                kib(m.llc_occupancy_bytes),
                mib(m.mbm_total_bytes)
            )
        }));
    }
    lines
}

/// What resctrl's monitoring counts of both groups, per L3 domain, as
/// metrics.
pub(super) fn metrics(c: &Status) -> Vec<Metric> {
    let per = |f: fn(&kernel::Monitored) -> Option<u64>| {
        (c.monitored.iter().map(|m| ("shield", m)))
            .chain(c.others_monitored.iter().map(|m| ("others", m)))
            .filter_map(|(group, m)| {
                let labels = vec![("group", group.to_string()), ("l3", m.domain.to_string())];
                f(m).map(|v| (labels, v as f64))
            })
            .collect::<Vec<_>>()
    };
    let occupancy = Metric {
        name: "shield_l3_occupancy_bytes",
        kind: "gauge",
        help: "Bytes of each L3 cache the shield's resctrl group (group=\"shield\") and the default group of everything else (group=\"others\") hold (llc_occupancy).",
        samples: per(|m| m.llc_occupancy_bytes),
    };
    let traffic = Metric {
        name: "shield_memory_bytes_total",
        kind: "counter",
        help: "Bytes the shield's resctrl group (group=\"shield\") and the default group (group=\"others\") moved to and from memory, per L3 domain (mbm_total_bytes).",
        samples: per(|m| m.mbm_total_bytes),
    };
    [occupancy, traffic]
        .into_iter()
        .filter(|m| !m.samples.is_empty())
        .collect()
}

/// What `status` reads back of the cache share.
#[derive(Debug, Clone, Default)]
pub struct Hold {
    /// What the shield asked (none: no cache share).
    pub(super) ask: Option<Ask>,
    /// What no longer holds, as read.
    lost: Vec<String>,
    /// What other programs' groups do against the share: ways they hold
    /// of the shield's, threads of the shield they took.
    conflicts: Vec<String>,
}

/// Reads back whether the cache share of the shield `state` holds.
pub(super) fn read_hold(sys: &Sys, state: &State) -> Hold {
    let ask = state.request.as_ref().and_then(super::ask);
    let Some(ask) = ask else {
        return Hold::default();
    };
    let facts = read(sys, &state.shield.union(&state.housekeeping));
    let mut lost = Vec::new();
    let Some(info) = facts.info.as_ref().filter(|_| sys.exists(GROUP)) else {
        lost.push(format!("the resctrl group /{GROUP} is gone"));
        return Hold {
            ask: Some(ask),
            lost,
            conflicts: Vec::new(),
        };
    };
    let cpus = sys
        .read_cpulist(&format!("{GROUP}/cpus_list"))
        .unwrap_or_default();
    if cpus != state.shield {
        lost.push(format!(
            "/{GROUP}/cpus_list reads {cpus}, not the shield's CPUs {}",
            state.shield
        ));
    }
    let steps = plan(&facts, ask, &state.shield);
    for step in &steps {
        if let Some(Own::ResctrlSchemata { path, share }) = own_of(&step.action) {
            let want = share.schemata(info, &facts.all_domains());
            let now = sys.read_trimmed(&path).unwrap_or_default();
            if !kernel::schemata_holds(&now, &want) {
                lost.push(format!(
                    "/{path} reads {} where the shield set {}",
                    now.lines().map(str::trim).collect::<Vec<_>>().join("; "),
                    want.replace('\n', "; ")
                ));
            }
        }
    }
    let mut conflicts = overlaps(&facts, info, ask.ways, &state.shield);
    conflicts.extend(assigned_elsewhere(sys, &facts, &state.shield_dir));
    Hold {
        ask: Some(ask),
        lost,
        conflicts,
    }
}

impl Holds for Hold {
    fn lost(&self, _: &State, repair: &str) -> Vec<Finding> {
        let theirs = "the other program's group is not cpushield's to change: narrow its L3 \
                      mask, or take the shield's threads out of its tasks file";
        let lost = (self.lost.iter()).map(|why| (why, repair));
        let conflicts = (self.conflicts.iter()).map(|why| (why, theirs));
        lost.chain(conflicts)
            .map(|(why, next)| Finding::new("resctrl", Severity::Bad, 90, why, next))
            .collect()
    }
}

/// Another program's group as reports name it: its path, quoted and cut
/// short (a directory name can hold any byte).
pub(super) fn group_name(group: &str) -> String {
    crate::input::quote(&format!("/{group}"))
}
