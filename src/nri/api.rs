//! The messages of containerd's node resource interface the plugin reads
//! and answers (`pkg/api/api.proto`, package `nri.pkg.api.v1alpha1`), and
//! ttrpc's envelope around them (`ttrpc/request.proto`). Only the fields
//! the plugin uses are declared; protobuf skips the others when decoding,
//! so a runtime that sends more is read all the same.

use std::collections::HashMap;

/// The package of the NRI services.
pub const PACKAGE: &str = "nri.pkg.api.v1alpha1";
/// The service the runtime serves (the plugin calls it).
pub const RUNTIME_SERVICE: &str = "nri.pkg.api.v1alpha1.Runtime";
/// The service the plugin serves (the runtime calls it).
pub const PLUGIN_SERVICE: &str = "nri.pkg.api.v1alpha1.Plugin";

/// Event numbers of `ConfigureResponse.events`: bit `1 << (event - 1)`.
pub mod event {
    /// A container starts.
    pub const START_CONTAINER: i32 = 6;
    /// A container is stopped.
    pub const STOP_CONTAINER: i32 = 10;
    /// A container is removed.
    pub const REMOVE_CONTAINER: i32 = 11;

    /// The subscription mask of `events`.
    pub fn mask(events: &[i32]) -> i32 {
        events.iter().fold(0, |m, e| m | 1 << (e - 1))
    }
}

/// ttrpc's request envelope.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Request {
    /// The service called, `package.Service`.
    #[prost(string, tag = "1")]
    pub service: String,
    /// The method called.
    #[prost(string, tag = "2")]
    pub method: String,
    /// The method's request message, encoded.
    #[prost(bytes = "vec", tag = "3")]
    pub payload: Vec<u8>,
    /// The caller's deadline, in nanoseconds (0: none).
    #[prost(int64, tag = "4")]
    pub timeout_nano: i64,
}

/// ttrpc's response envelope.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Response {
    /// gRPC's status: absent or code 0 when the call succeeded.
    #[prost(message, optional, tag = "1")]
    pub status: Option<Status>,
    /// The method's response message, encoded.
    #[prost(bytes = "vec", tag = "2")]
    pub payload: Vec<u8>,
}

/// `google.rpc.Status`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Status {
    /// gRPC's code: 0 OK, 12 Unimplemented, 13 Internal.
    #[prost(int32, tag = "1")]
    pub code: i32,
    /// What went wrong.
    #[prost(string, tag = "2")]
    pub message: String,
}

/// gRPC's code for a method the server does not have; runtimes fall back
/// to older calls on it.
pub const UNIMPLEMENTED: i32 = 12;

/// The plugin's registration with the runtime.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RegisterPluginRequest {
    /// `[A-Za-z0-9_.+-]`.
    #[prost(string, tag = "1")]
    pub plugin_name: String,
    /// Two digits; plugins are called in their order.
    #[prost(string, tag = "2")]
    pub plugin_idx: String,
}

/// A message without fields.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Empty {}

/// The runtime configures the plugin.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ConfigureRequest {
    /// The plugin's part of the runtime's configuration.
    #[prost(string, tag = "1")]
    pub config: String,
    /// The runtime's name.
    #[prost(string, tag = "2")]
    pub runtime_name: String,
    /// The runtime's version.
    #[prost(string, tag = "3")]
    pub runtime_version: String,
    /// How long the runtime waits for a request's answer, in ms.
    #[prost(int64, tag = "5")]
    pub request_timeout: i64,
}

/// The events the plugin subscribes to.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ConfigureResponse {
    /// [`event::mask`] (0 subscribes to every event).
    #[prost(int32, tag = "2")]
    pub events: i32,
}

/// The pods and containers the runtime has, maybe in parts.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SynchronizeRequest {
    /// Pods.
    #[prost(message, repeated, tag = "1")]
    pub pods: Vec<PodSandbox>,
    /// Containers.
    #[prost(message, repeated, tag = "2")]
    pub containers: Vec<Container>,
    /// More parts follow.
    #[prost(bool, tag = "3")]
    pub more: bool,
}

/// The plugin's answer to a part of the synchronisation.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SynchronizeResponse {
    /// The plugin takes more parts (answered as the runtime asked).
    #[prost(bool, tag = "2")]
    pub more: bool,
}

/// A pod.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandbox {
    /// The runtime's id of the pod.
    #[prost(string, tag = "1")]
    pub id: String,
    /// The pod's name.
    #[prost(string, tag = "2")]
    pub name: String,
    /// The pod's namespace.
    #[prost(string, tag = "4")]
    pub namespace: String,
    /// The pod's annotations (CRI-O's `*.crio.io` among them).
    #[prost(map = "string, string", tag = "6")]
    pub annotations: HashMap<String, String>,
    /// Linux details.
    #[prost(message, optional, tag = "8")]
    pub linux: Option<LinuxPodSandbox>,
}

/// A pod's Linux details.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LinuxPodSandbox {
    /// The pod's cgroup parent (its QoS class is in it).
    #[prost(string, tag = "3")]
    pub cgroup_parent: String,
}

/// A container.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Container {
    /// The runtime's id of the container.
    #[prost(string, tag = "1")]
    pub id: String,
    /// Its pod's id.
    #[prost(string, tag = "2")]
    pub pod_sandbox_id: String,
    /// The container's name in its pod.
    #[prost(string, tag = "3")]
    pub name: String,
    /// 1 created, 2 paused, 3 running, 4 stopped.
    #[prost(int32, tag = "4")]
    pub state: i32,
    /// Linux details.
    #[prost(message, optional, tag = "11")]
    pub linux: Option<LinuxContainer>,
    /// Its process (0 where the runtime does not say).
    #[prost(uint32, tag = "12")]
    pub pid: u32,
}

/// The container state a running one has.
pub const CONTAINER_RUNNING: i32 = 3;

/// A container's Linux details.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LinuxContainer {
    /// Its resources.
    #[prost(message, optional, tag = "3")]
    pub resources: Option<LinuxResources>,
    /// Its cgroup.
    #[prost(string, tag = "5")]
    pub cgroups_path: String,
}

/// A container's resources.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LinuxResources {
    /// CPU.
    #[prost(message, optional, tag = "2")]
    pub cpu: Option<LinuxCpu>,
}

/// A container's CPU resources.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LinuxCpu {
    /// CPU shares (cgroup v1 units: 1024 a CPU).
    #[prost(message, optional, tag = "1")]
    pub shares: Option<OptionalUInt64>,
    /// The cpuset's CPUs, a CPU list (kubelet's exclusive CPUs for a
    /// Guaranteed container under the static policy).
    #[prost(string, tag = "6")]
    pub cpus: String,
}

/// An optional u64.
#[derive(Clone, PartialEq, prost::Message)]
pub struct OptionalUInt64 {
    /// The value.
    #[prost(uint64, tag = "1")]
    pub value: u64,
}

/// A container event (start, stop, remove) with its pod.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerEvent {
    /// The pod.
    #[prost(message, optional, tag = "1")]
    pub pod: Option<PodSandbox>,
    /// The container.
    #[prost(message, optional, tag = "2")]
    pub container: Option<Container>,
}

/// What older runtimes send for start and remove (`StateChange`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct StateChangeEvent {
    /// The [`event`] number.
    #[prost(int32, tag = "1")]
    pub event: i32,
    /// The pod.
    #[prost(message, optional, tag = "2")]
    pub pod: Option<PodSandbox>,
    /// The container.
    #[prost(message, optional, tag = "3")]
    pub container: Option<Container>,
}
