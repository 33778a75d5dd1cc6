//! REST wire types: JSON shapes and their OpenAPI schemas, converted from
//! the domain at the edge.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::{
    domain::{self, Page},
    service::Created,
};

/// A cluster's summary.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ClusterInfo {
    /// Cluster name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// `creating`, `running`, `ready`, `suspended`, `unschedulable`,
    /// `image-pull-error`, `crash-loop`, `containers-creating`,
    /// `pods-pending`, `pods-failed`, `unknown`, or KubeRay's own state.
    pub status: String,
    /// Head pod IP, else head service IP.
    pub head_ip: Option<String>,
    /// Ray dashboard.
    pub dashboard_url: Option<String>,
    /// Ray client address.
    pub client_url: Option<String>,
    /// Jupyter, when on.
    pub notebook_url: Option<String>,
    /// code-server, when on.
    pub code_server_url: Option<String>,
    /// SSH, when on.
    pub ssh_url: Option<String>,
    /// Desired workers over all groups.
    pub num_workers: u32,
    /// Whether Ray's autoscaler runs.
    pub autoscaling_enabled: bool,
    /// Creation time (RFC 3339).
    pub created_at: Option<String>,
    /// Workers KubeRay reports ready.
    pub ready_workers: u32,
    /// Whether suspended.
    pub suspended: bool,
    /// Subject that created it through krayne.
    pub created_by: Option<String>,
    /// Kubernetes resourceVersion this summary was read at.
    pub resource_version: Option<String>,
}

impl From<domain::ClusterInfo> for ClusterInfo {
    fn from(i: domain::ClusterInfo) -> Self {
        Self {
            name: i.name,
            namespace: i.namespace,
            status: i.status.as_str().to_owned(),
            head_ip: i.head_ip,
            dashboard_url: i.dashboard_url,
            client_url: i.client_url,
            notebook_url: i.notebook_url,
            code_server_url: i.code_server_url,
            ssh_url: i.ssh_url,
            num_workers: i.num_workers,
            autoscaling_enabled: i.autoscaling_enabled,
            created_at: i.created_at,
            ready_workers: i.ready_workers,
            suspended: i.suspended,
            created_by: i.created_by,
            resource_version: i.resource_version,
        }
    }
}

/// A cluster's full picture.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ClusterDetails {
    /// The summary.
    pub info: ClusterInfo,
    /// The head as deployed.
    pub head: HeadDetails,
    /// Worker groups as deployed.
    pub worker_groups: Vec<WorkerGroupDetails>,
    /// Ray version from the head image tag.
    pub ray_version: String,
    /// Python version (`unknown`, as Krayne reports it).
    pub python_version: String,
    /// Services on the head.
    pub services: Vec<String>,
    /// KubeRay's conditions.
    pub conditions: Vec<Condition>,
    /// Pods, head first.
    pub pods: Vec<PodInfo>,
    /// Recent events, oldest first.
    pub events: Vec<EventInfo>,
}

/// The head as deployed.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct HeadDetails {
    /// CPU.
    pub cpus: String,
    /// Memory.
    pub memory: String,
    /// GPUs.
    pub gpus: u32,
    /// Image.
    pub image: String,
    /// Whether Ray schedules tasks on the head.
    pub runs_tasks: bool,
}

/// A worker group as deployed.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct WorkerGroupDetails {
    /// Name.
    pub name: String,
    /// Desired workers.
    pub replicas: u32,
    /// Lower bound.
    pub min_replicas: u32,
    /// Upper bound.
    pub max_replicas: u32,
    /// CPU per worker.
    pub cpus: String,
    /// Memory per worker.
    pub memory: String,
    /// GPUs per worker.
    pub gpus: u32,
    /// Image.
    pub image: String,
}

/// A Kubernetes-style condition.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Condition {
    /// Type.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False`, `Unknown`.
    pub status: String,
    /// Reason.
    pub reason: Option<String>,
    /// Message.
    pub message: Option<String>,
    /// Last change.
    pub last_transition_time: Option<String>,
}

/// A pod of the cluster.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct PodInfo {
    /// Name.
    pub name: String,
    /// `head` or `worker`.
    pub node_type: String,
    /// Worker group; empty for the head.
    pub group: String,
    /// Phase.
    pub phase: String,
    /// Ready.
    pub ready: bool,
    /// What is wrong, if anything.
    pub reason: Option<String>,
    /// Detail.
    pub message: Option<String>,
    /// Pod IP.
    pub pod_ip: Option<String>,
    /// Node.
    pub node_name: Option<String>,
    /// Container restarts.
    pub restarts: u32,
    /// Creation time.
    pub created_at: Option<String>,
}

/// A Kubernetes event.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct EventInfo {
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Reason.
    pub reason: String,
    /// Message.
    pub message: String,
    /// Kind of the object.
    pub object_kind: String,
    /// Name of the object.
    pub object_name: String,
    /// Occurrences.
    pub count: u32,
    /// Last occurrence.
    pub last_seen: Option<String>,
}

impl From<domain::ClusterDetails> for ClusterDetails {
    fn from(d: domain::ClusterDetails) -> Self {
        Self {
            info: d.info.into(),
            head: HeadDetails {
                cpus: d.head.cpus,
                memory: d.head.memory,
                gpus: d.head.gpus,
                image: d.head.image,
                runs_tasks: d.head.runs_tasks,
            },
            worker_groups: d
                .worker_groups
                .into_iter()
                .map(|g| WorkerGroupDetails {
                    name: g.name,
                    replicas: g.replicas,
                    min_replicas: g.min_replicas,
                    max_replicas: g.max_replicas,
                    cpus: g.cpus,
                    memory: g.memory,
                    gpus: g.gpus,
                    image: g.image,
                })
                .collect(),
            ray_version: d.ray_version,
            python_version: d.python_version,
            services: d.services,
            conditions: d
                .conditions
                .into_iter()
                .map(|c| Condition {
                    type_: c.type_,
                    status: c.status,
                    reason: c.reason,
                    message: c.message,
                    last_transition_time: c.last_transition_time,
                })
                .collect(),
            pods: d
                .pods
                .into_iter()
                .map(|p| PodInfo {
                    name: p.name,
                    node_type: p.node_type,
                    group: p.group,
                    phase: p.phase,
                    ready: p.ready,
                    reason: p.reason,
                    message: p.message,
                    pod_ip: p.pod_ip,
                    node_name: p.node_name,
                    restarts: p.restarts,
                    created_at: p.created_at,
                })
                .collect(),
            events: d
                .events
                .into_iter()
                .map(|e| EventInfo {
                    type_: e.type_,
                    reason: e.reason,
                    message: e.message,
                    object_kind: e.object_kind,
                    object_name: e.object_name,
                    count: e.count,
                    last_seen: e.last_seen,
                })
                .collect(),
        }
    }
}

/// One page of clusters.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ClusterList {
    /// The clusters, by namespace then name.
    pub clusters: Vec<ClusterInfo>,
    /// Pass as `page_token` for the next page; absent on the last.
    pub next_page_token: Option<String>,
}

impl From<Page<domain::ClusterInfo>> for ClusterList {
    fn from(p: Page<domain::ClusterInfo>) -> Self {
        Self {
            clusters: p.items.into_iter().map(Into::into).collect(),
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
            cluster: c.cluster.into(),
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

/// A namespace and the caller's role on it.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct NamespaceAccess {
    /// Namespace.
    pub namespace: String,
    /// `viewer`, `editor` or `admin`.
    pub role: String,
    /// Teams whose grants match it.
    pub via_teams: Vec<String>,
}

impl From<domain::NamespaceAccess> for NamespaceAccess {
    fn from(n: domain::NamespaceAccess) -> Self {
        Self {
            namespace: n.namespace,
            role: n.role.as_str().to_owned(),
            via_teams: n.via_teams,
        }
    }
}

/// One page of namespaces.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct NamespaceList {
    /// The namespaces, by name.
    pub namespaces: Vec<NamespaceAccess>,
    /// Pass as `page_token` for the next page; absent on the last.
    pub next_page_token: Option<String>,
}

/// A grant of the team mapping.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Grant {
    /// Team.
    pub team: String,
    /// Namespace or `prefix*`.
    pub pattern: String,
    /// Role.
    pub role: String,
}

/// The caller as the server sees them.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct WhoAmI {
    /// Subject.
    pub subject: String,
    /// E-mail.
    pub email: Option<String>,
    /// Groups from the token.
    pub groups: Vec<String>,
    /// Teams from the mapping.
    pub teams: Vec<String>,
    /// Whether a global admin.
    pub global_admin: bool,
    /// Effective role per existing namespace.
    pub namespaces: Vec<NamespaceAccess>,
    /// Every grant that applies, including patterns matching nothing yet.
    pub grants: Vec<Grant>,
}

impl From<domain::Identity> for WhoAmI {
    fn from(i: domain::Identity) -> Self {
        Self {
            subject: i.subject,
            email: i.email,
            groups: i.groups,
            teams: i.teams,
            global_admin: i.global_admin,
            namespaces: i.namespaces.into_iter().map(Into::into).collect(),
            grants: i
                .grants
                .into_iter()
                .map(|g| Grant {
                    team: g.team,
                    pattern: g.pattern,
                    role: g.role.as_str().to_owned(),
                })
                .collect(),
        }
    }
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

/// Who made an audited request.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Actor {
    /// Token subject (empty when the token was refused).
    pub subject: String,
    /// E-mail.
    pub email: Option<String>,
    /// Groups.
    pub groups: Vec<String>,
    /// Teams.
    pub teams: Vec<String>,
}

/// One audited request.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct AuditEvent {
    /// Event id (UUID v7, time-ordered).
    pub id: String,
    /// When the request arrived.
    pub occurred_at: String,
    /// When its outcome was recorded.
    pub completed_at: Option<String>,
    /// The server's request id (UUID v7), as answered in `x-request-id`
    /// and sent to Kubernetes; never chosen by the client.
    pub request_id: String,
    /// The id the client sent (`x-correlation-id` or `x-request-id`),
    /// echoed back in `x-correlation-id`.
    pub correlation_id: Option<String>,
    /// The caller.
    pub actor: Actor,
    /// Client address.
    pub source_ip: Option<String>,
    /// Client user agent.
    pub user_agent: Option<String>,
    /// `rest` or `grpc`.
    pub transport: String,
    /// `cluster.create`, `cluster.scale`, `cluster.delete`, `auth.denied`, …
    pub action: String,
    /// Namespace acted on.
    pub namespace: Option<String>,
    /// Cluster acted on.
    pub cluster: Option<String>,
    /// What was asked, without secrets.
    #[schema(value_type = Object)]
    pub request_summary: Value,
    /// `pending`, `succeeded`, `failed`, `denied`, `invalid` or `unknown`.
    pub outcome: String,
    /// HTTP status of the answer.
    pub http_status: Option<u16>,
    /// gRPC code of the answer.
    pub grpc_code: Option<String>,
    /// Error message given to the caller.
    pub error: Option<String>,
    /// Duration in milliseconds.
    pub duration_ms: Option<u64>,
}

impl From<domain::audit::AuditEntry> for AuditEvent {
    fn from(e: domain::audit::AuditEntry) -> Self {
        Self {
            id: e.id,
            occurred_at: e.occurred_at,
            completed_at: e.completed_at,
            request_id: e.meta.request_id,
            correlation_id: e.meta.correlation_id,
            actor: Actor {
                subject: e.subject,
                email: e.email,
                groups: e.groups,
                teams: e.teams,
            },
            source_ip: e.meta.source_ip,
            user_agent: e.meta.user_agent,
            transport: e.meta.transport.as_str().to_owned(),
            action: e.action,
            namespace: e.namespace,
            cluster: e.cluster,
            request_summary: e.summary,
            outcome: e.outcome.as_str().to_owned(),
            http_status: e.http_status,
            grpc_code: e.grpc_code,
            error: e.error,
            duration_ms: e.duration_ms,
        }
    }
}

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
