//! kubelet on this node, as it runs: its CPU manager's policy, policy
//! options and reserved CPUs, from its command line and the
//! KubeletConfiguration file that names (a flag wins over the file, as in
//! kubelet), and which CPUs pods hold exclusively, from its checkpoint
//! (`cpu_manager_state`). Read-only: nothing here writes.
//!
//! A Kubernetes node gives its CPUs to kubelet: with the static policy,
//! kubelet keeps the reserved CPUs (`reservedSystemCPUs`) for the OS and
//! the pods' shared pool, and hands the others whole to Guaranteed pods.
//! Those are the CPUs a shield on such a node protects.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::cpulist::CpuSet;
use crate::sys::{procfs, Sys};

/// kubelet's settings when neither its flags nor its file give them.
const DEFAULT_POLICY: &str = "none";
/// kubelet's `--root-dir` default, where `cpu_manager_state` is.
const DEFAULT_ROOT_DIR: &str = "/var/lib/kubelet";

/// kubelet as it runs on this node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Kubelet {
    /// Its process id.
    pub pid: i32,
    /// The KubeletConfiguration file its `--config` names.
    pub config_file: Option<String>,
    /// Why that file could not be read or parsed (its settings then come
    /// from the flags and kubelet's defaults only).
    pub config_error: Option<String>,
    /// `cpuManagerPolicy` (`--cpu-manager-policy`): `none` or `static`.
    pub policy: String,
    /// `cpuManagerPolicyOptions` (`--cpu-manager-policy-options`):
    /// `full-pcpus-only`, `strict-cpu-reservation`, ... → their values.
    pub policy_options: BTreeMap<String, String>,
    /// `reservedSystemCPUs` (`--reserved-cpus`): the CPUs kubelet keeps for
    /// the OS and never gives a pod exclusively. None when not given
    /// (kubelet then picks them itself from the reserved CPU quantity).
    pub reserved: Option<CpuSet>,
    /// What the reserved list reads that is no CPU list.
    pub reserved_error: Option<String>,
    /// `--root-dir`.
    pub root_dir: String,
    /// Its CPU manager's checkpoint, when there is one.
    pub state: Option<CpuManagerState>,
    /// KEP-5894's node system partition (`systemPartition`, alpha in
    /// 1.37), when it is set: the CPUs of the pods of its namespaces.
    #[serde(default)]
    pub system_partition: Option<SystemPartition>,
}

/// KEP-5894's `systemPartition` of a KubeletConfiguration: kubelet puts
/// the pods of `namespaces` (`kube-system`) in a cgroup of their own on
/// `cpus`, which "should typically match" `reservedSystemCPUs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SystemPartition {
    /// `cpuset`.
    pub cpus: CpuSet,
    /// `namespaces`.
    pub namespaces: Vec<String>,
}

impl Kubelet {
    /// Whether `option` of the CPU manager's policy is on (`"true"`).
    pub fn option_on(&self, option: &str) -> bool {
        self.policy_options.get(option).is_some_and(|v| v == "true")
    }
}

/// kubelet's CPU manager checkpoint (`ROOT_DIR/cpu_manager_state`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuManagerState {
    /// The policy that wrote it.
    pub policy: String,
    /// `defaultCpuSet`: the shared pool, where every container without
    /// exclusive CPUs runs.
    pub shared: CpuSet,
    /// The CPUs each container holds exclusively.
    pub exclusive: Vec<Exclusive>,
}

/// CPUs one container holds exclusively.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exclusive {
    /// Its pod's UID.
    pub pod: String,
    /// The container's name.
    pub container: String,
    /// Its CPUs.
    pub cpus: CpuSet,
}

impl CpuManagerState {
    /// Every CPU a container holds exclusively.
    pub fn held(&self) -> CpuSet {
        (self.exclusive.iter()).fold(CpuSet::new(), |all, e| all.union(&e.cpus))
    }
}

/// The parts of a KubeletConfiguration file that matter here. A value is
/// read whatever YAML type it was written as (`reservedSystemCPUs: 0`).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConfigFile {
    cpu_manager_policy: Option<yaml_serde::Value>,
    #[serde(default)]
    cpu_manager_policy_options: BTreeMap<String, yaml_serde::Value>,
    #[serde(rename = "reservedSystemCPUs")]
    reserved_system_cpus: Option<yaml_serde::Value>,
    system_partition: Option<SystemPartitionFile>,
}

/// `systemPartition` as written (KEP-5894).
#[derive(Debug, Default, Deserialize)]
struct SystemPartitionFile {
    cpuset: Option<yaml_serde::Value>,
    #[serde(default)]
    namespaces: Vec<String>,
}

impl SystemPartitionFile {
    /// The partition kubelet makes of it: none without namespaces (kubelet
    /// then keeps today's placement) or without a CPU list that parses.
    fn partition(&self) -> Option<SystemPartition> {
        let text = self.cpuset.as_ref().map(scalar)?;
        let cpus = CpuSet::parse_list(text.trim()).ok()?;
        (!self.namespaces.is_empty()).then(|| SystemPartition {
            cpus,
            namespaces: self.namespaces.clone(),
        })
    }
}

/// A YAML scalar as the text kubelet would read.
fn scalar(v: &yaml_serde::Value) -> String {
    match v {
        yaml_serde::Value::String(s) => s.clone(),
        yaml_serde::Value::Bool(b) => b.to_string(),
        yaml_serde::Value::Number(n) => n.to_string(),
        yaml_serde::Value::Null => String::new(),
        other => yaml_serde::to_string(other)
            .unwrap_or_default()
            .trim()
            .to_string(),
    }
}

/// The checkpoint as kubelet writes it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StateFile {
    policy_name: String,
    #[serde(default)]
    default_cpu_set: String,
    #[serde(default)]
    entries: BTreeMap<String, BTreeMap<String, String>>,
}

/// kubelet's flags that matter here, from its command line (pflag's
/// `--name=value` and `--name value`).
#[derive(Debug, Default, PartialEq)]
struct Flags {
    config: Option<String>,
    policy: Option<String>,
    policy_options: Option<String>,
    reserved: Option<String>,
    root_dir: Option<String>,
}

fn flags(args: &[String]) -> Flags {
    let mut out = Flags::default();
    let mut i = 0;
    while i < args.len() {
        let (name, inline) = match args[i].split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (args[i].as_str(), None),
        };
        let slot = match name {
            "--config" => &mut out.config,
            "--cpu-manager-policy" => &mut out.policy,
            "--cpu-manager-policy-options" => &mut out.policy_options,
            "--reserved-cpus" => &mut out.reserved,
            "--root-dir" => &mut out.root_dir,
            _ => {
                i += 1;
                continue;
            }
        };
        *slot = match inline {
            Some(v) => Some(v),
            None => {
                i += 1;
                args.get(i).cloned()
            }
        };
        i += 1;
    }
    out
}

/// An absolute path of kubelet's, relative to `sys`'s root.
fn rooted(path: &str) -> String {
    path.trim_start_matches('/').to_string()
}

/// The kubelet that runs on this node, among `threads`: a process named
/// `kubelet` outside the users' sessions (where anyone may name a process
/// `kubelet`, and no node's runs).
pub fn pid_among(threads: &[procfs::Thread]) -> Option<i32> {
    (threads.iter())
        .find(|t| t.tid == t.pid && t.name == "kubelet" && !t.cgroup.starts_with("/user.slice"))
        .map(|t| t.pid)
}

/// The cgroups kubelet makes for pods: `/kubepods.slice/...` (systemd
/// driver) or `/kubepods/...` (cgroupfs driver).
pub const POD_CGROUPS: [&str; 2] = ["kubepods.slice", "kubepods"];

/// Whether a thread in cgroup `cgroup` (as `/proc/PID/cgroup` names it)
/// belongs to one of kubelet's pods.
pub fn in_pod_cgroup(cgroup: &str) -> bool {
    under_any(cgroup, &POD_CGROUPS)
}

/// Whether `cgroup` is one of `names` (top-level) or below one.
pub fn under_any(cgroup: &str, names: &[&str]) -> bool {
    names.iter().any(|name| {
        cgroup
            .strip_prefix('/')
            .and_then(|c| c.strip_prefix(name))
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    })
}

/// What among `threads` shows a Kubernetes node, said: kubelet runs
/// ([`pid_among`]), or threads are in the cgroups kubelet makes for pods,
/// which only root makes. `None` on any other machine.
pub fn node_seen(threads: &[procfs::Thread]) -> Option<String> {
    let pid = pid_among(threads);
    let pods = threads.iter().filter(|t| in_pod_cgroup(&t.cgroup)).count();
    match (pid, pods) {
        (None, 0) => None,
        (Some(pid), 0) => Some(format!("kubelet runs, pid {pid}")),
        (None, n) => Some(format!("{n} threads in kubelet's pod cgroups")),
        (Some(pid), n) => Some(format!(
            "kubelet runs, pid {pid}; {n} threads in its pod cgroups"
        )),
    }
}

/// Whether this machine is a Kubernetes node ([`node_seen`]).
pub fn node_here(sys: &Sys) -> bool {
    let source = procfs::CgroupSource::per_thread(procfs::Hierarchy::Unified);
    let threads = procfs::read_all_threads(sys, source).unwrap_or_default();
    node_seen(&threads).is_some()
}

/// kubelet as it runs, when one of `threads` is kubelet ([`pid_among`]).
pub fn read(sys: &Sys, threads: &[procfs::Thread]) -> Option<Kubelet> {
    let pid = pid_among(threads)?;
    let raw = sys.read(&format!("proc/{pid}/cmdline")).ok()?;
    let args: Vec<String> = (raw.split('\0'))
        .filter(|a| !a.is_empty())
        .map(str::to_string)
        .collect();
    Some(from_command_line(sys, pid, &args))
}

/// kubelet's settings from its command line `args` and the files it names.
fn from_command_line(sys: &Sys, pid: i32, args: &[String]) -> Kubelet {
    let flags = flags(args.get(1..).unwrap_or_default());
    let mut config_error = None;
    let file = match &flags.config {
        None => ConfigFile::default(),
        Some(path) => match sys.read(&rooted(path)) {
            Err(e) => {
                config_error = Some(format!("cannot read {path}: {e}"));
                ConfigFile::default()
            }
            Ok(text) => yaml_serde::from_str::<ConfigFile>(&text).unwrap_or_else(|e| {
                config_error = Some(format!(
                    "{path} is no KubeletConfiguration kubelet reads: {e}"
                ));
                ConfigFile::default()
            }),
        },
    };
    let policy = (flags.policy.clone())
        .or_else(|| file.cpu_manager_policy.as_ref().map(scalar))
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| DEFAULT_POLICY.to_string());
    let policy_options = match &flags.policy_options {
        Some(list) => (list.split(','))
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect(),
        None => (file.cpu_manager_policy_options.iter())
            .map(|(k, v)| (k.clone(), scalar(v)))
            .collect(),
    };
    let reserved_text = (flags.reserved.clone())
        .or_else(|| file.reserved_system_cpus.as_ref().map(scalar))
        .filter(|r| !r.trim().is_empty());
    let (reserved, reserved_error) = match reserved_text {
        None => (None, None),
        Some(text) => match CpuSet::parse_list(text.trim()) {
            Ok(cpus) => (Some(cpus), None),
            Err(e) => (None, Some(format!("reservedSystemCPUs '{text}': {e}"))),
        },
    };
    let root_dir = flags
        .root_dir
        .unwrap_or_else(|| DEFAULT_ROOT_DIR.to_string());
    let state = read_state(sys, &root_dir);
    let system_partition = file.system_partition.as_ref().and_then(|p| p.partition());
    Kubelet {
        pid,
        config_file: flags.config,
        config_error,
        policy,
        policy_options,
        reserved,
        reserved_error,
        root_dir,
        state,
        system_partition,
    }
}

/// The CPU manager's checkpoint under `root_dir`, when it reads.
fn read_state(sys: &Sys, root_dir: &str) -> Option<CpuManagerState> {
    let text = sys
        .read(&rooted(&format!("{root_dir}/cpu_manager_state")))
        .ok()?;
    let file: StateFile = serde_json::from_str(&text).ok()?;
    let cpus = |s: &str| CpuSet::parse_list(s.trim()).ok();
    let mut exclusive = Vec::new();
    for (pod, containers) in &file.entries {
        for (container, list) in containers {
            exclusive.push(Exclusive {
                pod: pod.clone(),
                container: container.clone(),
                cpus: cpus(list)?,
            });
        }
    }
    Some(CpuManagerState {
        policy: file.policy_name,
        shared: cpus(&file.default_cpu_set).unwrap_or_default(),
        exclusive,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_cgroups_are_kubelets_with_either_driver_and_nothing_named_alike() {
        assert!(in_pod_cgroup(
            "/kubepods.slice/kubepods-pod1.slice/cri-containerd-a.scope"
        ));
        assert!(in_pod_cgroup("/kubepods/besteffort/pod1/abc"));
        assert!(in_pod_cgroup("/kubepods.slice"));
        assert!(!in_pod_cgroup("/kubepods-not.slice"));
        assert!(!in_pod_cgroup("/system.slice/kubepods.slice"));
        assert!(!in_pod_cgroup("/"));
    }

    fn args(line: &str) -> Vec<String> {
        line.split(' ').map(str::to_string).collect()
    }

    fn node(files: &[(&str, &str)]) -> (tempfile::TempDir, Sys) {
        let root = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = root.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let sys = Sys::at(root.path());
        (root, sys)
    }

    const CONFIG: &str = "apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
cpuManagerPolicy: static
cpuManagerPolicyOptions:
  full-pcpus-only: \"true\"
  strict-cpu-reservation: true
reservedSystemCPUs: \"0-1\"
";

    const STATE: &str = r#"{"policyName":"static","defaultCpuSet":"0-1,3","entries":{"6f1c":{"rt":"2"}},"checksum":1464582716}"#;

    #[test]
    fn the_settings_come_from_the_file_its_config_flag_names_and_the_checkpoint() {
        let (_root, sys) = node(&[
            ("etc/kubernetes/kubelet-config.yaml", CONFIG),
            ("var/lib/kubelet/cpu_manager_state", STATE),
        ]);
        let k = from_command_line(
            &sys,
            700,
            &args("/usr/bin/kubelet --config=/etc/kubernetes/kubelet-config.yaml --v=2"),
        );
        assert_eq!(k.config_error, None);
        assert_eq!(k.policy, "static");
        assert_eq!(k.reserved, Some(CpuSet::parse_list("0-1").unwrap()));
        assert!(k.option_on("full-pcpus-only"));
        // a YAML bool reads as kubelet reads it
        assert!(k.option_on("strict-cpu-reservation"));
        let state = k.state.expect("the checkpoint reads");
        assert_eq!(state.shared.to_string(), "0-1,3");
        assert_eq!(state.held().to_string(), "2");
        assert_eq!(state.exclusive[0].container, "rt");
    }

    #[test]
    fn a_flag_wins_over_the_file_and_kubelets_defaults_fill_the_rest() {
        let (_root, sys) = node(&[
            ("etc/k/config.yaml", CONFIG),
            ("srv/kubelet/cpu_manager_state", STATE),
        ]);
        let k = from_command_line(
            &sys,
            700,
            &args("kubelet --config /etc/k/config.yaml --reserved-cpus=0,4 --cpu-manager-policy-options full-pcpus-only=false --root-dir /srv/kubelet"),
        );
        assert_eq!(k.reserved.as_ref().unwrap().to_string(), "0,4");
        assert!(!k.option_on("full-pcpus-only"));
        // the flag's list replaces the file's map whole
        assert!(!k.option_on("strict-cpu-reservation"));
        assert!(k.state.is_some(), "the checkpoint under --root-dir");
        let bare = from_command_line(&sys, 700, &args("kubelet --v=2"));
        assert_eq!((bare.policy.as_str(), bare.reserved), ("none", None));
        assert_eq!(bare.root_dir, "/var/lib/kubelet");
    }

    #[test]
    fn kep_5894s_system_partition_is_read_only_with_namespaces_to_place() {
        let partition = |yaml: &str| {
            let (_root, sys) = node(&[("etc/k.yaml", yaml)]);
            from_command_line(&sys, 700, &args("kubelet --config=/etc/k.yaml")).system_partition
        };
        let set = partition(
            "reservedSystemCPUs: \"0-1\"\nsystemPartition:\n  memoryLimit: 4Gi\n  cpuset: \"0-2\"\n  namespaces: [kube-system]\n",
        )
        .expect("a partition with a namespace");
        assert_eq!(set.cpus.to_string(), "0-2");
        assert_eq!(set.namespaces, ["kube-system"]);
        // kubelet keeps today's placement without namespaces; a list that
        // does not parse stops kubelet, which then is not this one.
        assert_eq!(partition("systemPartition:\n  cpuset: \"0-1\"\n"), None);
        let bad = "systemPartition:\n  cpuset: \"0-x\"\n  namespaces: [kube-system]\n";
        assert_eq!(partition(bad), None);
        assert_eq!(partition(CONFIG), None);
    }

    #[test]
    fn a_file_that_does_not_read_is_said_and_its_settings_are_kubelets_defaults() {
        let (_root, sys) = node(&[("etc/k.yaml", "cpuManagerPolicy: [static\n")]);
        let k = from_command_line(&sys, 700, &args("kubelet --config=/etc/k.yaml"));
        assert!(k.config_error.unwrap().contains("/etc/k.yaml"));
        assert_eq!(k.policy, "none");
        let missing = from_command_line(&sys, 700, &args("kubelet --config=/etc/none.yaml"));
        assert!(missing
            .config_error
            .unwrap()
            .starts_with("cannot read /etc/none.yaml"));
        let (_root, sys) = node(&[("etc/k.yaml", "reservedSystemCPUs: \"0-x\"\n")]);
        let bad = from_command_line(&sys, 700, &args("kubelet --config=/etc/k.yaml"));
        assert_eq!(bad.reserved, None);
        assert!(bad.reserved_error.unwrap().contains("'0-x'"));
    }

    #[test]
    fn kubelet_is_found_by_its_name_outside_the_users_sessions() {
        let thread = |pid: i32, name: &str, cgroup: &str| procfs::Thread {
            pid,
            tid: pid,
            name: name.into(),
            flags: 0,
            cpus_allowed: CpuSet::parse_list("0-3").unwrap(),
            cgroup: cgroup.into(),
            stat_read: true,
        };
        let users = [
            thread(40, "kubelet", "/user.slice/user-1000.slice/session-3.scope"),
            thread(41, "bash", "/system.slice/ssh.service"),
        ];
        assert_eq!(pid_among(&users), None, "a user's own kubelet is no node's");
        let (_root, sys) = node(&[("proc/52/cmdline", "/usr/bin/kubelet\0--reserved-cpus=0\0")]);
        let node_threads = [thread(52, "kubelet", "/system.slice/kubelet.service")];
        let k = read(&sys, &node_threads).expect("the node's kubelet");
        assert_eq!(
            (k.pid, k.reserved.unwrap().to_string()),
            (52, "0".to_string())
        );
    }
}
