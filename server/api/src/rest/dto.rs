//! REST wire types: JSON shapes and their OpenAPI schemas, converted from
//! the domain at the edge.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::{
    domain::{self, Page},
    service::Created,
};

pub(super) use crate::domain::{ClusterDetails, ClusterInfo, NamespaceAccess};

/// The caller as the server sees them (the schema is named `WhoAmI`).
pub(super) type WhoAmI = domain::Identity;

/// One page of clusters.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ClusterList {
    /// The clusters, by namespace then name.
    pub clusters: Vec<ClusterInfo>,
    /// Pass as `page_token` for the next page; absent on the last.
    pub next_page_token: Option<String>,
}

impl From<Page<ClusterInfo>> for ClusterList {
    fn from(p: Page<ClusterInfo>) -> Self {
        Self {
            clusters: p.items,
            next_page_token: p.next_page_token,
        }
    }
}

/// The created cluster, and the manifest sent to Kubernetes.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct CreateClusterResponse {
    /// The cluster (for a dry run, as it would be).
    pub cluster: ClusterInfo,
    /// The RayCluster manifest.
    #[schema(value_type = Object)]
    pub manifest: Value,
}

impl From<Created> for CreateClusterResponse {
    fn from(c: Created) -> Self {
        Self {
            cluster: c.cluster,
            manifest: c.manifest,
        }
    }
}

/// Resize one worker group; give at least one count. A cluster without
/// autoscaling pins min and max to `replicas`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ScaleRequest {
    /// Worker group name.
    pub worker_group: String,
    /// New desired workers.
    pub replicas: Option<u32>,
    /// New lower bound.
    pub min_replicas: Option<u32>,
    /// New upper bound.
    pub max_replicas: Option<u32>,
}

/// One page of namespaces.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct NamespaceList {
    /// The namespaces, by name.
    pub namespaces: Vec<NamespaceAccess>,
    /// Pass as `page_token` for the next page; absent on the last.
    pub next_page_token: Option<String>,
}

/// Query of list routes.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct PageQuery {
    /// Items per page (1–1000, default 100).
    pub page_size: Option<u32>,
    /// `next_page_token` of the previous page.
    pub page_token: Option<String>,
}

/// Query of create.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct CreateQuery {
    /// Check the cluster with Kubernetes and return its manifest; create nothing.
    pub dry_run: Option<bool>,
}

/// Query of wait.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct WaitQuery {
    /// Give up after this many seconds (1–3600, default 300).
    pub timeout_seconds: Option<u64>,
}

/// Krayne's cluster config (JSON, or YAML with `Content-Type:
/// application/yaml`). Only `name` is required; unknown keys are refused.
/// Documents the request body only: the body is read as a tree and checked
/// by the cluster model, which reports every problem at once.
#[derive(Debug, ToSchema)]
#[expect(dead_code, reason = "a schema for OpenAPI; bodies are read as config trees")]
pub(super) struct ClusterConfig {
    /// DNS-1035 label, at most 53 characters.
    pub name: String,
    /// Must match the namespace in the URL when given.
    pub namespace: Option<String>,
    /// `{cpus: "1", memory: "4Gi", gpus: 0, image, runs_tasks: false}`.
    #[schema(value_type = Object)]
    pub head: Option<Value>,
    /// List of `{name: worker, replicas: 0, min_replicas: 0, max_replicas: 1,
    /// cpus: "1", memory: "2Gi", gpus: 0, image}`; absent = one default group.
    #[schema(value_type = Vec<Object>)]
    pub worker_groups: Option<Vec<Value>>,
    /// `{notebook: true, code_server: true, ssh: true}`.
    #[schema(value_type = Object)]
    pub services: Option<Value>,
    /// `{enabled: true, idle_timeout_seconds: 60, upscaling_mode: Default,
    /// cpu: "500m", memory: "512Mi"}`.
    #[schema(value_type = Object)]
    pub autoscaler: Option<Value>,
}

pub(super) use crate::domain::audit::AuditEvent;

/// One page of audit events, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct AuditEventList {
    /// The events.
    pub events: Vec<AuditEvent>,
    /// Pass as `page_token` for the next page; absent on the last.
    pub next_page_token: Option<String>,
}

/// Filters of the audit query; all optional.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct AuditQuery {
    /// Only this namespace.
    pub namespace: Option<String>,
    /// Only this actor subject.
    pub actor: Option<String>,
    /// Only this action, e.g. `cluster.create`.
    pub action: Option<String>,
    /// Only this outcome, e.g. `denied`.
    pub outcome: Option<String>,
    /// Only this cluster.
    pub cluster: Option<String>,
    /// At or after this time (RFC 3339).
    pub since: Option<String>,
    /// Before this time (RFC 3339).
    pub until: Option<String>,
    /// Only requests whose client sent this id (`x-correlation-id` or
    /// `x-request-id`).
    pub correlation_id: Option<String>,
    /// Items per page (1–1000, default 100).
    pub page_size: Option<u32>,
    /// `next_page_token` of the previous page.
    pub page_token: Option<String>,
}
