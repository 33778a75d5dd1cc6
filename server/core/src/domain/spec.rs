//! The validated shape of a Ray cluster: Krayne's `ClusterConfig`.
//!
//! Values of these types come only from [`ClusterSpec::from_value`] (see
//! `config.rs`), so they always satisfy every rule there.

use serde::Serialize;

use super::Quantity;

/// A validated cluster request. Serializes back to Krayne's format.
///
/// Its OpenAPI schema is the request body of create: only `name` is
/// required, every other field shows Krayne's default. The body and its
/// sections are inlined there, not components: generators such as
/// openapi-typescript read a default in a shared component as "always
/// present" (true of an answer) and would make every defaulted field of
/// a request required.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(
    feature = "schema",
    derive(utoipa::ToSchema),
    schema(
        as = ClusterConfig,
        description = "Krayne's `ClusterConfig`, as JSON or (with `Content-Type: application/yaml`) a Krayne YAML file. Only `name` is required; every other field has Krayne's default. Unknown top-level keys are refused; unknown keys below it and values Krayne converts (`\"2\"` for an integer) follow `field_validation`."
    )
)]
// Krayne refuses unknown top-level keys; the schema says so
// (`additionalProperties: false`). Nested sections take unknown keys
// (`field_validation`), so they say nothing.
#[serde(deny_unknown_fields)]
pub struct ClusterSpec {
    /// DNS-1035 label (lower-case letters, digits and `-`, starting with a
    /// letter), at most 53 characters (KubeRay's limit).
    #[cfg_attr(
        feature = "schema",
        schema(
            pattern = r"^[a-z]([-a-z0-9]*[a-z0-9])?$",
            min_length = 1,
            max_length = 53,
            example = "train"
        )
    )]
    pub name: String,
    /// Kubernetes namespace (DNS-1123 label); must equal the namespace in
    /// the URL when both are given.
    #[cfg_attr(
        feature = "schema",
        schema(
            required = false,
            default = "default",
            pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
            min_length = 1,
            max_length = 63
        )
    )]
    pub namespace: String,
    /// The head node.
    #[cfg_attr(feature = "schema", schema(required = false, schema_with = super::schema::head_config))]
    pub head: HeadSpec,
    /// Worker groups with unique names; may be empty. Absent: one group
    /// `worker` with Krayne's defaults.
    #[cfg_attr(feature = "schema", schema(required = false, schema_with = super::schema::worker_groups_config))]
    pub worker_groups: Vec<WorkerGroupSpec>,
    /// Services started on the head.
    #[cfg_attr(feature = "schema", schema(required = false, schema_with = super::schema::services_config))]
    pub services: ServicesSpec,
    /// Ray's in-tree autoscaler.
    #[cfg_attr(feature = "schema", schema(required = false, schema_with = super::schema::autoscaler_config))]
    pub autoscaler: AutoscalerSpec,
    /// The site (Kubernetes cluster) to create it in, when the server
    /// fronts several (docs/sites.md); absent: placed by weight, the
    /// team's sites, the namespace and the worker groups' GPU types. Where
    /// it is put, not part of the cluster.
    #[cfg_attr(
        feature = "schema",
        schema(
            required = false,
            pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
            max_length = 63,
            example = "eu-1"
        )
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
}

/// The head node.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema), schema(as = HeadConfig))]
pub struct HeadSpec {
    /// CPU, > 0, at most 1024; raised to 1 in the pod when lower (Krayne).
    #[cfg_attr(feature = "schema", schema(required = false, default = "1"))]
    pub cpus: Quantity,
    /// Memory, > 0, at most 16Ti; raised to 4Gi in the pod when lower.
    #[cfg_attr(feature = "schema", schema(required = false, default = "4Gi"))]
    pub memory: Quantity,
    /// NVIDIA GPUs.
    #[cfg_attr(feature = "schema", schema(required = false, default = 0, maximum = 16))]
    pub gpus: u32,
    /// Container image; absent means the server's default Ray image.
    #[cfg_attr(
        feature = "schema",
        schema(
            required = false,
            pattern = r"^\S+$",
            max_length = 512,
            example = "rayproject/ray:2.43.0-py312"
        )
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Whether Ray schedules tasks on the head.
    #[cfg_attr(feature = "schema", schema(required = false, default = false))]
    pub runs_tasks: bool,
}

/// A group of identical workers; `min_replicas <= replicas <= max_replicas`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema), schema(as = WorkerGroupConfig))]
pub struct WorkerGroupSpec {
    /// DNS-1123 label, unique in the cluster.
    #[cfg_attr(
        feature = "schema",
        schema(
            required = false,
            default = "worker",
            pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
            min_length = 1,
            max_length = 63
        )
    )]
    pub name: String,
    /// Desired workers.
    #[cfg_attr(feature = "schema", schema(required = false, default = 0, maximum = 10000))]
    pub replicas: u32,
    /// Autoscaler lower bound; at most `replicas`.
    #[cfg_attr(feature = "schema", schema(required = false, default = 0, maximum = 10000))]
    pub min_replicas: u32,
    /// Autoscaler upper bound; raised to `replicas` when lower (Krayne).
    #[cfg_attr(feature = "schema", schema(required = false, default = 1, maximum = 10000))]
    pub max_replicas: u32,
    /// CPU per worker, > 0, at most 1024.
    #[cfg_attr(feature = "schema", schema(required = false, default = "1"))]
    pub cpus: Quantity,
    /// Memory per worker, > 0, at most 16Ti.
    #[cfg_attr(feature = "schema", schema(required = false, default = "2Gi"))]
    pub memory: Quantity,
    /// NVIDIA GPUs per worker; a GPU group gets the `-gpu` image.
    #[cfg_attr(feature = "schema", schema(required = false, default = 0, maximum = 16))]
    pub gpus: u32,
    /// Container image; absent means the server's default Ray image.
    #[cfg_attr(feature = "schema", schema(required = false, pattern = r"^\S+$", max_length = 512))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The GPU type its workers need (`a100`, `h100`; a DNS-1123 label):
    /// the cluster goes to a site that offers it (docs/sites.md), and its
    /// worker pods carry the label `krayne.dev/gpu-type`.
    #[cfg_attr(
        feature = "schema",
        schema(
            required = false,
            pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
            max_length = 63,
            example = "a100"
        )
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_type: Option<String>,
}

/// Services started on the head node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema), schema(as = ServicesConfig))]
pub struct ServicesSpec {
    /// Jupyter on 8888.
    #[cfg_attr(feature = "schema", schema(required = false, default = true))]
    pub notebook: bool,
    /// code-server on 8443.
    #[cfg_attr(feature = "schema", schema(required = false, default = true))]
    pub code_server: bool,
    /// sshd on 22, pod loopback only.
    #[cfg_attr(feature = "schema", schema(required = false, default = true))]
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
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema), schema(as = AutoscalerConfig))]
pub struct AutoscalerSpec {
    /// Whether it runs.
    #[cfg_attr(feature = "schema", schema(required = false, default = true))]
    pub enabled: bool,
    /// Seconds a worker may idle before removal (at most 7 days).
    #[cfg_attr(feature = "schema", schema(required = false, default = 60, maximum = 604800))]
    pub idle_timeout_seconds: u32,
    /// How eagerly it adds workers.
    #[cfg_attr(feature = "schema", schema(required = false, default = "Default"))]
    pub upscaling_mode: UpscalingMode,
    /// CPU of the autoscaler container, > 0.
    #[cfg_attr(feature = "schema", schema(required = false, default = "500m"))]
    pub cpu: Quantity,
    /// Memory of the autoscaler container, > 0.
    #[cfg_attr(feature = "schema", schema(required = false, default = "512Mi"))]
    pub memory: Quantity,
}

/// KubeRay's `autoscalerOptions.upscalingMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
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
