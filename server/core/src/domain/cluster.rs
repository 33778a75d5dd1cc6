//! What krayne reports about a cluster: Krayne's `ClusterInfo` and
//! `ClusterDetails`, plus pods, events and KubeRay's conditions.

use std::fmt;

use serde::{Serialize, Serializer};

/// A cluster's derived status (Krayne 0.3.8's pod-aware rules).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterStatus {
    /// Accepted; no pods yet.
    Creating,
    /// Pods are running but Ray is not known to be ready.
    Running,
    /// Ray is up.
    Ready,
    /// Suspended: pods deleted, object kept.
    Suspended,
    /// The head pod does not fit on any node.
    Unschedulable,
    /// The head image cannot be pulled.
    ImagePullError,
    /// The head container keeps crashing.
    CrashLoop,
    /// The head's containers are being created.
    ContainersCreating,
    /// Pods wait to start.
    PodsPending,
    /// Pods failed.
    PodsFailed,
    /// Nothing tells.
    Unknown,
    /// KubeRay's `status.state`, lowercased, when it is none of the above.
    Other(String),
}

impl ClusterStatus {
    /// The status string Krayne uses.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Creating => "creating",
            Self::Running => "running",
            Self::Ready => "ready",
            Self::Suspended => "suspended",
            Self::Unschedulable => "unschedulable",
            Self::ImagePullError => "image-pull-error",
            Self::CrashLoop => "crash-loop",
            Self::ContainersCreating => "containers-creating",
            Self::PodsPending => "pods-pending",
            Self::PodsFailed => "pods-failed",
            Self::Unknown => "unknown",
            Self::Other(s) => s,
        }
    }

    /// Parses a status string; anything unknown is kept as `Other`.
    pub fn parse(s: &str) -> Self {
        let known = [
            Self::Creating,
            Self::Running,
            Self::Ready,
            Self::Suspended,
            Self::Unschedulable,
            Self::ImagePullError,
            Self::CrashLoop,
            Self::ContainersCreating,
            Self::PodsPending,
            Self::PodsFailed,
            Self::Unknown,
        ];
        known
            .into_iter()
            .find(|k| k.as_str() == s)
            .unwrap_or_else(|| Self::Other(s.to_owned()))
    }
}

impl fmt::Display for ClusterStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ClusterStatus {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A cluster's summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterInfo {
    /// Name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// Derived status.
    pub status: ClusterStatus,
    /// Head pod IP, else head service IP.
    pub head_ip: Option<String>,
    /// `http://<head_ip>:8265`.
    pub dashboard_url: Option<String>,
    /// `ray://<head_ip>:10001`.
    pub client_url: Option<String>,
    /// `http://<head_ip>:8888` when the notebook is on.
    pub notebook_url: Option<String>,
    /// `http://<head_ip>:8443` when code-server is on.
    pub code_server_url: Option<String>,
    /// `ssh://<head_ip>:22` when ssh is on.
    pub ssh_url: Option<String>,
    /// Desired workers over all groups.
    pub num_workers: u32,
    /// Whether Ray's autoscaler is on.
    pub autoscaling_enabled: bool,
    /// Creation time (RFC 3339), as Kubernetes reports it.
    pub created_at: Option<String>,
    /// Workers KubeRay reports ready.
    pub ready_workers: u32,
    /// `spec.suspend`.
    pub suspended: bool,
    /// Subject that created it through krayne.
    pub created_by: Option<String>,
    /// Kubernetes `resourceVersion`, for read-your-writes and conflicts.
    pub resource_version: Option<String>,
}

/// A cluster's full picture.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterDetails {
    /// The summary.
    pub info: ClusterInfo,
    /// The head as deployed.
    pub head: HeadDetails,
    /// Worker groups as deployed.
    pub worker_groups: Vec<WorkerGroupDetails>,
    /// Ray version from the head image tag, or `unknown`.
    pub ray_version: String,
    /// Python version; Krayne 0.3.8 always reports `unknown`.
    pub python_version: String,
    /// Services on the head: `dashboard`, `client`, then enabled extras.
    pub services: Vec<String>,
    /// KubeRay's conditions.
    pub conditions: Vec<Condition>,
    /// The cluster's pods, head first.
    pub pods: Vec<PodInfo>,
    /// Recent events about the cluster and its pods, oldest first.
    pub events: Vec<EventInfo>,
}

/// The head as deployed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeadDetails {
    /// CPU request.
    pub cpus: String,
    /// Memory request.
    pub memory: String,
    /// GPU request.
    pub gpus: u32,
    /// Image.
    pub image: String,
    /// Whether Ray schedules tasks on the head.
    pub runs_tasks: bool,
}

/// A worker group as deployed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkerGroupDetails {
    /// Group name.
    pub name: String,
    /// Desired workers.
    pub replicas: u32,
    /// Autoscaler lower bound.
    pub min_replicas: u32,
    /// Autoscaler upper bound.
    pub max_replicas: u32,
    /// CPU request per worker.
    pub cpus: String,
    /// Memory request per worker.
    pub memory: String,
    /// GPU request per worker.
    pub gpus: u32,
    /// Image.
    pub image: String,
}

/// A Kubernetes-style condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Condition {
    /// Type, e.g. `HeadPodReady`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Machine-readable reason.
    pub reason: Option<String>,
    /// Human-readable message.
    pub message: Option<String>,
    /// Last change (RFC 3339).
    pub last_transition_time: Option<String>,
}

/// One pod of a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PodInfo {
    /// Pod name.
    pub name: String,
    /// `head` or `worker`.
    pub node_type: String,
    /// Worker group; empty for the head.
    pub group: String,
    /// Pod phase.
    pub phase: String,
    /// Ready condition.
    pub ready: bool,
    /// What is wrong, e.g. `Unschedulable`, `ImagePullBackOff`.
    pub reason: Option<String>,
    /// Detail for `reason`.
    pub message: Option<String>,
    /// Pod IP.
    pub pod_ip: Option<String>,
    /// Node.
    pub node_name: Option<String>,
    /// Container restarts.
    pub restarts: u32,
    /// Creation time (RFC 3339).
    pub created_at: Option<String>,
}

/// A Kubernetes event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventInfo {
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Reason, e.g. `FailedScheduling`.
    pub reason: String,
    /// Message.
    pub message: String,
    /// Kind of the object it is about.
    pub object_kind: String,
    /// Name of the object it is about.
    pub object_name: String,
    /// Occurrences.
    pub count: u32,
    /// Last occurrence (RFC 3339).
    pub last_seen: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::ClusterStatus;

    #[test]
    fn status_strings_round_trip() {
        for s in [
            "creating",
            "running",
            "ready",
            "suspended",
            "unschedulable",
            "image-pull-error",
            "crash-loop",
            "containers-creating",
            "pods-pending",
            "pods-failed",
            "unknown",
            "failed",
        ] {
            assert_eq!(ClusterStatus::parse(s).as_str(), s);
        }
        assert_eq!(ClusterStatus::parse("failed"), ClusterStatus::Other("failed".into()));
    }
}
