//! The validated shape of a Ray cluster: Krayne's `ClusterConfig`.
//!
//! Values of these types come only from [`ClusterSpec::from_value`] (see
//! `config.rs`), so they always satisfy every rule there.

use serde::Serialize;

use super::Quantity;

/// A validated cluster request. Serializes back to Krayne's format.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterSpec {
    /// DNS-1035 label, at most 53 characters.
    pub name: String,
    /// Kubernetes namespace (DNS-1123 label).
    pub namespace: String,
    /// The head node.
    pub head: HeadSpec,
    /// Worker groups with unique names; may be empty.
    pub worker_groups: Vec<WorkerGroupSpec>,
    /// Services started on the head.
    pub services: ServicesSpec,
    /// Ray's in-tree autoscaler.
    pub autoscaler: AutoscalerSpec,
}

/// The head node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeadSpec {
    /// CPU, > 0.
    pub cpus: Quantity,
    /// Memory, > 0.
    pub memory: Quantity,
    /// NVIDIA GPUs.
    pub gpus: u32,
    /// Container image; `None` means the server's default Ray image.
    pub image: Option<String>,
    /// Whether Ray schedules tasks on the head.
    pub runs_tasks: bool,
}

/// A group of identical workers; `min_replicas <= replicas <= max_replicas`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkerGroupSpec {
    /// DNS-1123 label, unique in the cluster.
    pub name: String,
    /// Desired workers.
    pub replicas: u32,
    /// Autoscaler lower bound.
    pub min_replicas: u32,
    /// Autoscaler upper bound.
    pub max_replicas: u32,
    /// CPU per worker, > 0.
    pub cpus: Quantity,
    /// Memory per worker, > 0.
    pub memory: Quantity,
    /// NVIDIA GPUs per worker.
    pub gpus: u32,
    /// Container image; `None` means the server's default Ray image.
    pub image: Option<String>,
}

/// Services started on the head node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ServicesSpec {
    /// Jupyter on 8888.
    pub notebook: bool,
    /// code-server on 8443.
    pub code_server: bool,
    /// sshd on 22, pod loopback only.
    pub ssh: bool,
}

impl ServicesSpec {
    /// Whether any service is on.
    pub fn any(&self) -> bool {
        self.notebook || self.code_server || self.ssh
    }
}

/// Ray's in-tree autoscaler.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AutoscalerSpec {
    /// Whether it runs.
    pub enabled: bool,
    /// Seconds a worker may idle before removal.
    pub idle_timeout_seconds: u32,
    /// How eagerly it adds workers.
    pub upscaling_mode: UpscalingMode,
    /// CPU of the autoscaler container, > 0.
    pub cpu: Quantity,
    /// Memory of the autoscaler container, > 0.
    pub memory: Quantity,
}

/// KubeRay's `autoscalerOptions.upscalingMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum UpscalingMode {
    /// Scale up as needed.
    Default,
    /// Scale up without limits on the rate.
    Aggressive,
    /// Scale up one step at a time.
    Conservative,
}

impl UpscalingMode {
    /// Every mode, in documentation order.
    pub const ALL: [Self; 3] = [Self::Default, Self::Aggressive, Self::Conservative];

    /// The name KubeRay and Krayne use.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Default => "Default",
            Self::Aggressive => "Aggressive",
            Self::Conservative => "Conservative",
        }
    }

    /// Parses the exact, case-sensitive name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == s)
    }
}

impl ClusterSpec {
    /// The spec in Krayne's format, as JSON: `from_value(spec.to_value())`
    /// gives the spec back.
    pub fn to_value(&self) -> serde_json::Value {
        // Serializing plain strings, numbers and booleans cannot fail.
        serde_json::to_value(self).unwrap_or_default()
    }
}
