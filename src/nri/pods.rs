//! What a container asks of its CPUs, read as CRI-O's high-performance
//! hooks read it, so that a pod spec moves between runtimes unchanged: a
//! Guaranteed container (its pod's cgroup parent neither `burstable` nor
//! `besteffort`, its CPU shares whole CPUs) with exclusive CPUs (its
//! cpuset), and the pod's annotations.

use super::api::{Container, PodSandbox};
use crate::cpulist::CpuSet;

/// IRQs moved off the container's CPUs (and irqbalance banned from them):
/// `disable` (or `true`).
pub const IRQ_LOAD_BALANCING: &str = "irq-load-balancing.crio.io";
/// The container's CPUs' idle states: `enable`, `disable`, or
/// `max_latency:MICROSECONDS` (the deeper ones disabled).
pub const CPU_C_STATES: &str = "cpu-c-states.crio.io";
/// The container's CPUs' frequency governor, by name.
pub const CPU_FREQ_GOVERNOR: &str = "cpu-freq-governor.crio.io";
/// No CFS quota on the container's and its pod's cgroups: `disable`.
/// kubelet 1.33 and later sets none for a container with exclusive CPUs
/// (feature gate `DisableCPUQuotaWithExclusiveCPUs`, on by default); the
/// plugin reads the kernel's `cpu.max` back and says what it found, and
/// leaves kubelet's cgroups to kubelet.
pub const CPU_QUOTA: &str = "cpu-quota.crio.io";
/// CRI-O's annotations this plugin does not carry out (they change the
/// container's own cgroup, which the runtime owns); a container that has
/// one is told in the log.
pub const NOT_DONE: [&str; 2] = ["cpu-load-balancing.crio.io", "cpu-shared.crio.io"];

/// What the idle states of a container's CPUs are to be.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CStates {
    /// Every state enabled.
    Enable,
    /// Every state but polling disabled.
    Disable,
    /// The states that take longer than this many µs to leave disabled.
    MaxLatency(u32),
}

/// What a container asks of its exclusive CPUs.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Wants {
    /// The pod, `namespace/name`, and the container's name, for the log.
    pub who: String,
    /// Its exclusive CPUs.
    pub cpus: CpuSet,
    /// IRQs off them, irqbalance banned from them.
    pub irqs_off: bool,
    /// Their idle states.
    pub c_states: Option<CStates>,
    /// Their governor.
    pub governor: Option<String>,
    /// The container's process as the runtime named it at start, and its
    /// start time in clock ticks (`/proc/PID/stat`): the kernel's word on
    /// whether the container still runs when the runtime does not list it
    /// (containerd, restarted, lists no container before it has recovered
    /// them).
    #[serde(default)]
    pub process: Option<(u32, u64)>,
}

/// What `container` of `pod` asks, with what the log should say of it (an
/// annotation not understood, or not carried out); None for a container
/// that is not Guaranteed with exclusive CPUs, or that asks for nothing.
pub fn wants(pod: &PodSandbox, container: &Container) -> (Option<Wants>, Vec<String>) {
    let mut said = Vec::new();
    let who = format!("{}/{}/{}", pod.namespace, pod.name, container.name);
    let ours = [IRQ_LOAD_BALANCING, CPU_C_STATES, CPU_FREQ_GOVERNOR];
    let asks = |key: &str| pod.annotations.get(key).map(|v| v.trim());
    if ours.iter().all(|k| asks(k).is_none()) {
        return (None, said);
    }
    for key in NOT_DONE.iter().filter(|k| asks(k).is_some()) {
        said.push(format!("{who}: {key} is not carried out by cpushield nri"));
    }
    let Some(cpus) = exclusive_cpus(pod, container) else {
        said.push(format!(
            "{who}: asks {} but is not a Guaranteed container with whole CPUs of its own: left alone",
            ours.iter().filter(|k| asks(k).is_some()).cloned().collect::<Vec<_>>().join(", ")
        ));
        return (None, said);
    };
    let mut w = Wants {
        who: who.clone(),
        cpus,
        ..Wants::default()
    };
    match asks(IRQ_LOAD_BALANCING) {
        None | Some("enable") | Some("false") => {}
        Some("disable") | Some("true") => w.irqs_off = true,
        Some(other) => said.push(format!(
            "{who}: {IRQ_LOAD_BALANCING}: '{other}' is not understood (disable or true): left alone"
        )),
    }
    match asks(CPU_C_STATES).map(parse_c_states) {
        None => {}
        Some(Ok(c)) => w.c_states = Some(c),
        Some(Err(why)) => said.push(format!("{who}: {CPU_C_STATES}: {why}: left alone")),
    }
    match asks(CPU_FREQ_GOVERNOR) {
        None => {}
        Some(g) if !g.is_empty() && g.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => {
            w.governor = Some(g.to_string())
        }
        Some(other) => said.push(format!(
            "{who}: {CPU_FREQ_GOVERNOR}: '{other}' is not a governor's name: left alone"
        )),
    }
    let asks_any = w.irqs_off || w.c_states.is_some() || w.governor.is_some();
    (asks_any.then_some(w), said)
}

/// What the log says of a container whose pod asks [`CPU_QUOTA`]
/// `disable`, from the kernel's `cpu.max` of its cgroup and its pod's
/// (`read` reads a file below the root: `proc/PID/cgroup`, then
/// `sys/fs/cgroup/...`): no quota, or the quota that is there and whose it
/// is. None when the pod does not ask, or the process has no cgroup v2
/// path to read.
pub fn quota_said(
    read: &dyn Fn(&str) -> Option<String>,
    pod: &PodSandbox,
    container: &Container,
) -> Option<String> {
    let asks = pod.annotations.get(CPU_QUOTA).map(|v| v.trim())?;
    let who = format!("{}/{}/{}", pod.namespace, pod.name, container.name);
    if !matches!(asks, "disable" | "true") {
        return Some(format!(
            "{who}: {CPU_QUOTA}: '{}' is not understood (disable or true): left alone",
            crate::escape::terminal(&crate::input::brief_to(asks, 40))
        ));
    }
    let cgroups = read(&format!("proc/{}/cgroup", container.pid))?;
    let path = cgroups.lines().find_map(|l| l.strip_prefix("0::"))?.trim();
    let path = path.trim_start_matches('/');
    if path.is_empty() || path.split('/').any(|p| p == "..") {
        return None;
    }
    let pod_path = path.rsplit_once('/').map_or("", |(parent, _)| parent);
    let max =
        |dir: &str| read(&format!("sys/fs/cgroup/{dir}/cpu.max")).map(|t| t.trim().to_string());
    let (own, parent) = (max(path)?, max(pod_path).unwrap_or_else(|| "max".into()));
    let quota = |m: &str| m.split_whitespace().next().is_some_and(|q| q != "max");
    let shown = |m: &str| crate::escape::terminal(&crate::input::brief_to(m, 40)).into_owned();
    Some(if quota(&own) || quota(&parent) {
        format!(
            "{who}: {CPU_QUOTA}: disable: the kernel has a CFS quota on it (cpu.max '{}', its pod's '{}'), which throttles it: kubelet sets it and keeps it (DisableCPUQuotaWithExclusiveCPUs off, or kubelet before 1.33): left to kubelet",
            shown(&own),
            shown(&parent)
        )
    } else {
        format!(
            "{who}: {CPU_QUOTA}: disable: no CFS quota on it or its pod (cpu.max '{}', '{}', as kubelet set them): nothing to do",
            shown(&own),
            shown(&parent)
        )
    })
}

/// The container's exclusive CPUs when it is Guaranteed with whole CPUs,
/// as CRI-O decides it.
fn exclusive_cpus(pod: &PodSandbox, container: &Container) -> Option<CpuSet> {
    let parent = pod
        .linux
        .as_ref()
        .map(|l| l.cgroup_parent.to_ascii_lowercase())?;
    if parent.contains("burstable") || parent.contains("besteffort") {
        return None;
    }
    let cpu = container.linux.as_ref()?.resources.as_ref()?.cpu.as_ref()?;
    let shares = cpu.shares.as_ref()?.value;
    if shares == 0 || shares % 1024 != 0 {
        return None;
    }
    CpuSet::parse_list(cpu.cpus.trim())
        .ok()
        .filter(|c| !c.is_empty())
}

/// `enable`, `disable` or `max_latency:N`.
fn parse_c_states(value: &str) -> Result<CStates, String> {
    match value {
        "enable" => Ok(CStates::Enable),
        "disable" => Ok(CStates::Disable),
        _ => value
            .strip_prefix("max_latency:")
            .and_then(|n| n.parse().ok())
            .map(CStates::MaxLatency)
            .ok_or_else(|| {
                format!("'{value}' is not understood (enable, disable or max_latency:MICROSECONDS)")
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::super::api::{
        LinuxContainer, LinuxCpu, LinuxPodSandbox, LinuxResources, OptionalUInt64,
    };
    use super::*;

    pub(crate) fn pod(parent: &str, annotations: &[(&str, &str)]) -> PodSandbox {
        PodSandbox {
            id: "pod1".into(),
            name: "rt".into(),
            namespace: "default".into(),
            annotations: annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            linux: Some(LinuxPodSandbox {
                cgroup_parent: parent.into(),
            }),
        }
    }

    pub(crate) fn container(shares: u64, cpus: &str) -> Container {
        Container {
            id: "c1".into(),
            pod_sandbox_id: "pod1".into(),
            name: "loop".into(),
            state: 3,
            linux: Some(LinuxContainer {
                resources: Some(LinuxResources {
                    cpu: Some(LinuxCpu {
                        shares: Some(OptionalUInt64 { value: shares }),
                        cpus: cpus.into(),
                    }),
                }),
                cgroups_path: String::new(),
            }),
            pid: 0,
        }
    }

    const GUARANTEED: &str = "/kubepods.slice/kubepods-pod1.slice";

    #[test]
    fn a_guaranteed_container_with_the_annotations_asks_what_they_say() {
        let p = pod(
            GUARANTEED,
            &[
                (IRQ_LOAD_BALANCING, "disable"),
                (CPU_C_STATES, "max_latency:10"),
                (CPU_FREQ_GOVERNOR, "performance"),
                ("cpu-load-balancing.crio.io", "disable"),
            ],
        );
        let (w, said) = wants(&p, &container(2048, "2-3"));
        let w = w.unwrap();
        assert_eq!(w.cpus.to_string(), "2-3");
        assert!(w.irqs_off);
        assert_eq!(w.c_states, Some(CStates::MaxLatency(10)));
        assert_eq!(w.governor.as_deref(), Some("performance"));
        assert_eq!(w.who, "default/rt/loop");
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].contains("cpu-load-balancing.crio.io is not carried out"),
            "{said:?}"
        );
    }

    #[test]
    fn burstable_fractional_or_cpuless_containers_and_bad_values_are_left_alone() {
        let irq = [(IRQ_LOAD_BALANCING, "disable")];
        for (parent, shares, cpus) in [
            ("/kubepods.slice/kubepods-burstable.slice/x", 2048, "2-3"),
            ("/kubepods.slice/kubepods-besteffort.slice/x", 2048, "2-3"),
            (GUARANTEED, 1536, "2-3"),
            (GUARANTEED, 0, "2-3"),
            (GUARANTEED, 2048, ""),
        ] {
            let (w, said) = wants(&pod(parent, &irq), &container(shares, cpus));
            assert_eq!(w, None, "{parent} {shares} {cpus}");
            assert!(said[0].contains("not a Guaranteed container"), "{said:?}");
        }
        // no annotation of ours: nothing asked, nothing said
        assert_eq!(
            wants(&pod(GUARANTEED, &[]), &container(2048, "2-3")),
            (None, vec![])
        );
        for (key, value) in [
            (IRQ_LOAD_BALANCING, "off"),
            (CPU_C_STATES, "max_latency:ten"),
            (CPU_FREQ_GOVERNOR, "../x"),
        ] {
            let (w, said) = wants(&pod(GUARANTEED, &[(key, value)]), &container(2048, "2-3"));
            assert_eq!(w, None, "{key}={value}");
            assert!(
                said[0].contains(key) && said[0].contains("left alone"),
                "{said:?}"
            );
        }
    }

    #[test]
    fn a_quota_asked_away_is_read_back_from_the_kernel_and_left_to_kubelet() {
        let files = |own: &'static str, pod: &'static str| {
            move |rel: &str| {
                match rel {
                "proc/42/cgroup" => Some("0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-c1.scope\n".to_string()),
                "sys/fs/cgroup/kubepods.slice/kubepods-pod1.slice/cri-containerd-c1.scope/cpu.max" => Some(own.to_string()),
                "sys/fs/cgroup/kubepods.slice/kubepods-pod1.slice/cpu.max" => Some(pod.to_string()),
                _ => None,
            }
            }
        };
        let mut c = container(2048, "2-3");
        c.pid = 42;
        let p = pod(GUARANTEED, &[(CPU_QUOTA, "disable")]);
        let said = quota_said(&files("max 100000\n", "max 100000\n"), &p, &c).unwrap();
        assert!(said.contains("no CFS quota on it or its pod"), "{said}");
        let said = quota_said(&files("max 100000\n", "200000 100000\n"), &p, &c).unwrap();
        assert!(said.contains("the kernel has a CFS quota on it (cpu.max 'max 100000', its pod's '200000 100000')") && said.contains("left to kubelet"), "{said}");
        let said = quota_said(&files("200000 100000", "max 100000"), &p, &c).unwrap();
        assert!(said.contains("left to kubelet"), "{said}");
        // Not asked: nothing said; a value not understood: said.
        let none = pod(GUARANTEED, &[]);
        assert_eq!(quota_said(&files("1 2", "3 4"), &none, &c), None);
        let odd = pod(GUARANTEED, &[(CPU_QUOTA, "maybe")]);
        let said = quota_said(&files("1 2", "3 4"), &odd, &c).unwrap();
        assert!(said.contains("'maybe' is not understood"), "{said}");
        // A process with no cgroup v2 path: nothing to read, nothing said.
        c.pid = 7;
        assert_eq!(quota_said(&files("1 2", "3 4"), &p, &c), None);
    }
}
