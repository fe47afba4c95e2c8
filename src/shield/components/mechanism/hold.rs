//! Whether the cgroups of the shield still hold, as the kernel reads them
//! back (`status`).

use super::*;

/// What `status` reads of the cgroup mechanism to judge whether it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::shield) enum Hold {
    /// cgroup v2 (a partition of cpushield's own or a systemd slice).
    V2 {
        /// The cgroup2 mount, relative to the root.
        mount: String,
        /// Whether the root's `cgroup.subtree_control` enables cpuset.
        cpuset_enabled: bool,
        /// The shield's cgroup directory.
        dir: String,
        /// Its `cpuset.cpus.partition` as read (`None`: gone).
        partition: Option<String>,
        /// The partition type the shield was made with.
        wanted: Option<String>,
        /// The root's `cpuset.cpus.effective`: the CPUs the kernel leaves to
        /// everything outside the shield (`None`: unreadable).
        outside: Option<CpuSet>,
    },
    /// cgroup v1: the system cpuset everything else runs in.
    V1 {
        /// Its `cpuset.cpus` file, relative to the root.
        file: String,
        /// The CPUs it reads (`None`: gone).
        cpus: Option<CpuSet>,
    },
    /// No cpuset hierarchy is mounted any more.
    Unmounted,
}

impl Hold {
    /// The shield cgroup's partition as read (v2).
    pub(in crate::shield) fn partition(&self) -> Option<&str> {
        match self {
            Hold::V2 { partition, .. } => partition.as_deref(),
            _ => None,
        }
    }
}

/// Reads what the mechanism's [`Hold`] judges: the cpuset controller, the
/// shield's partition and the CPUs the kernel leaves to everything outside.
pub(in crate::shield) fn read_hold(sys: &Sys, state: &State, cgroup: &CgroupSetup) -> Hold {
    match cgroup {
        CgroupSetup::V2 {
            mount,
            subtree_control,
            ..
        } => Hold::V2 {
            mount: mount.clone(),
            cpuset_enabled: subtree_control.iter().any(|c| c == "cpuset"),
            dir: state.shield_dir.clone(),
            partition: sys
                .read_trimmed(&format!("{}/cpuset.cpus.partition", state.shield_dir))
                .ok(),
            wanted: state.partition.clone(),
            outside: sys
                .read_cpulist(&format!("{mount}/cpuset.cpus.effective"))
                .ok(),
        },
        CgroupSetup::V1 { mount, .. } => {
            let file = format!("{mount}/{SYSTEM_CGROUP_V1}/cpuset.cpus");
            Hold::V1 {
                cpus: sys.read_cpulist(&file).ok(),
                file,
            }
        }
        _ => Hold::Unmounted,
    }
}

impl Holds for Hold {
    /// The cpuset controller (`cpuset-controller`), the partition as the
    /// kernel reads it (`partition`), and the CPUs left to everything
    /// outside (`enforcement`).
    fn lost(&self, state: &State, repair: &str) -> Vec<Finding> {
        lost(self, &state.shield)
            .into_iter()
            .map(|(id, reason)| Finding::new(id, Severity::Bad, 100, reason, repair))
            .collect()
    }
}

/// What of the cgroup mechanism no longer holds for shield `shield`, by
/// check.
fn lost(hold: &Hold, shield: &CpuSet) -> Vec<(&'static str, String)> {
    let mut lost = Vec::new();
    match hold {
        Hold::V2 {
            mount,
            cpuset_enabled,
            dir,
            partition,
            wanted,
            outside,
        } => {
            if !cpuset_enabled {
                lost.push((
                    "cpuset-controller",
                    format!("the cpuset controller is no longer enabled in /{mount}/cgroup.subtree_control: nothing enforces the shield")
                ));
            }
            match partition {
                None => lost.push((
                    "partition",
                    format!("the shield's cgroup /{dir} or its partition file is gone"),
                )),
                Some(p)
                    if p.contains("invalid")
                        || wanted.as_deref().is_some_and(|want| !p.starts_with(want)) =>
                {
                    lost.push((
                        "partition",
                        format!("/{dir}/cpuset.cpus.partition reads {p:?}"),
                    ))
                }
                Some(_) => {}
            }
            if let Some(eff) = outside {
                let open = eff.intersection(shield);
                if !open.is_empty() {
                    lost.push((
                        "enforcement",
                        format!("the kernel lets tasks outside the shield run on CPUs {open} (/{mount}/cpuset.cpus.effective is {eff})")
                    ));
                }
            }
        }
        Hold::V1 { file, cpus } => match cpus {
            Some(c) if !c.intersects(shield) => {}
            Some(c) => lost.push((
                "enforcement",
                format!("/{file} reads {c}, which includes shielded CPUs"),
            )),
            None => lost.push(("enforcement", format!("/{file} is gone"))),
        },
        Hold::Unmounted => lost.push((
            "cpuset-controller",
            "no cpuset hierarchy is mounted any more".into(),
        )),
    }
    lost
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2(partition: &str, outside: &str) -> Hold {
        Hold::V2 {
            mount: "sys/fs/cgroup".into(),
            cpuset_enabled: true,
            dir: "sys/fs/cgroup/cpushield".into(),
            partition: Some(partition.into()),
            wanted: Some("isolated".into()),
            outside: Some(CpuSet::parse_list(outside).unwrap()),
        }
    }

    #[test]
    fn a_valid_partition_that_leaves_the_shield_alone_holds() {
        assert_eq!(
            v2("isolated", "0-1").lost(&State::example(), "again"),
            vec![]
        );
    }

    #[test]
    fn an_invalid_partition_and_the_cpus_it_gives_back_are_two_findings() {
        let why = "isolated invalid (Cpu list in cpuset.cpus not exclusive)";
        let found = v2(why, "0-3").lost(&State::example(), "run it again");
        let ids: Vec<&str> = found.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["partition", "enforcement"]);
        assert!(found[1].reason.contains("CPUs 2-3"), "{found:?}");
        assert!(found.iter().all(|f| f.next == "run it again"));
        assert!(found.iter().all(|f| f.severity == Severity::Bad));
    }
}
