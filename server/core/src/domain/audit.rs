//! What one audit row says.

use serde::Serialize;
use serde_json::Value;

/// How a request ended, as the audit log records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Written before the Kubernetes call; not finished yet.
    Pending,
    /// Done.
    Succeeded,
    /// Kubernetes or krayne failed it.
    Failed,
    /// Authorization refused it.
    Denied,
    /// The request was malformed.
    Invalid,
    /// Left pending by a crash and resolved without knowing the result.
    Unknown,
}

impl Outcome {
    /// Every outcome.
    pub const ALL: [Self; 6] = [
        Self::Pending,
        Self::Succeeded,
        Self::Failed,
        Self::Denied,
        Self::Invalid,
        Self::Unknown,
    ];

    /// `pending`, `succeeded`, …
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Denied => "denied",
            Self::Invalid => "invalid",
            Self::Unknown => "unknown",
        }
    }
}

/// What an audited request did, as stored in a row's `action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditAction {
    /// Create a cluster.
    ClusterCreate,
    /// Read one cluster.
    ClusterGet,
    /// List clusters.
    ClusterList,
    /// Describe one cluster.
    ClusterDescribe,
    /// Resize a worker group.
    ClusterScale,
    /// Delete a cluster.
    ClusterDelete,
    /// Suspend a cluster (KubeRay deletes its pods, keeps the cluster).
    ClusterSuspend,
    /// Resume a suspended cluster.
    ClusterResume,
    /// Wait for a cluster to be ready.
    ClusterWait,
    /// Watch clusters change, live.
    ClusterWatch,
    /// Read the audit log.
    AuditList,
    /// A request whose token was refused.
    AuthDenied,
    /// A tunnel or proxy session to a cluster's service.
    ServiceConnect,
    /// Hand a cluster's Ray token to an editor (for raw tunnels).
    RayCredentials,
    /// krayne applied a cluster's NetworkPolicy it lacked (or had wrong).
    ClusterProtect,
    /// List a cluster's Ray jobs.
    JobList,
    /// Read one Ray job.
    JobGet,
    /// Read (or follow) a Ray job's log.
    JobLogs,
    /// Read (or follow) a cluster's pod log.
    ClusterLogs,
    /// Submit a Ray job.
    JobSubmit,
    /// Stop a Ray job.
    JobStop,
    /// Delete a Ray job.
    JobDelete,
    /// Upload a working-dir package to a cluster's head.
    PackageUpload,
    /// Read a namespace's quota.
    QuotaGet,
    /// Read usage (GPU-, CPU-, memory-hours).
    UsageGet,
    /// The lifecycle reaper warned a cluster's owner of what it will do.
    LifecycleWarn,
    /// The lifecycle reaper recorded on a cluster what it plans and since
    /// when the cluster is idle (or took back a warning that no longer
    /// holds).
    LifecyclePlan,
    /// An owner kept a cluster from its lifecycle policy for a while.
    ClusterKeep,
    /// The server ended a long-lived stream (tunnel, proxied WebSocket,
    /// followed log, watch) for its caller: revoked, expired or idle.
    StreamEnd,
    /// Create a job with a cluster of its own (a RayJob).
    RayJobCreate,
    /// List RayJobs.
    RayJobList,
    /// Read one RayJob.
    RayJobGet,
    /// Read (or follow) a RayJob's driver log.
    RayJobLogs,
    /// Delete a RayJob: stop its job, remove its cluster.
    RayJobDelete,
    /// Watch RayJobs.
    RayJobWatch,
    /// krayne admitted a cluster that waited in its namespace's line.
    QueueAdmit,
    /// krayne ended a wait longer than the namespace's `max_wait`.
    QueueExpire,
}

impl AuditAction {
    /// Every action.
    pub const ALL: [Self; 37] = [
        Self::ClusterCreate,
        Self::ClusterGet,
        Self::ClusterList,
        Self::ClusterDescribe,
        Self::ClusterScale,
        Self::ClusterDelete,
        Self::ClusterSuspend,
        Self::ClusterResume,
        Self::ClusterWait,
        Self::ClusterWatch,
        Self::AuditList,
        Self::AuthDenied,
        Self::ServiceConnect,
        Self::RayCredentials,
        Self::ClusterProtect,
        Self::JobList,
        Self::JobGet,
        Self::JobLogs,
        Self::ClusterLogs,
        Self::JobSubmit,
        Self::JobStop,
        Self::JobDelete,
        Self::PackageUpload,
        Self::QuotaGet,
        Self::UsageGet,
        Self::LifecycleWarn,
        Self::LifecyclePlan,
        Self::ClusterKeep,
        Self::StreamEnd,
        Self::RayJobCreate,
        Self::RayJobList,
        Self::RayJobGet,
        Self::RayJobLogs,
        Self::RayJobDelete,
        Self::RayJobWatch,
        Self::QueueAdmit,
        Self::QueueExpire,
    ];

    /// What a caller must be allowed to do to take this action: one
    /// place, so that a use case names its audit action and the role
    /// follows. Actions krayne takes itself (the reaper's, the keeper's,
    /// a refused token's, a stream's end) are never a caller's: they
    /// need the strictest tenant role, were they asked for.
    pub fn needs(self) -> super::Action {
        use super::Action::{Mutate, Read, ReadAudit};
        match self {
            Self::ClusterGet
            | Self::ClusterList
            | Self::ClusterDescribe
            | Self::ClusterWait
            | Self::ClusterWatch
            | Self::ClusterLogs
            | Self::JobList
            | Self::JobGet
            | Self::JobLogs
            | Self::QuotaGet
            | Self::UsageGet
            | Self::RayJobList
            | Self::RayJobGet
            | Self::RayJobLogs
            | Self::RayJobWatch => Read,
            Self::AuditList => ReadAudit,
            Self::ClusterCreate
            | Self::ClusterScale
            | Self::ClusterDelete
            | Self::ClusterSuspend
            | Self::ClusterResume
            | Self::ClusterKeep
            | Self::ServiceConnect
            | Self::RayCredentials
            | Self::JobSubmit
            | Self::JobStop
            | Self::JobDelete
            | Self::PackageUpload
            | Self::AuthDenied
            | Self::ClusterProtect
            | Self::LifecycleWarn
            | Self::LifecyclePlan
            | Self::StreamEnd
            | Self::RayJobCreate
            | Self::RayJobDelete
            | Self::QueueAdmit
            | Self::QueueExpire => Mutate,
        }
    }

    /// `cluster.create`, `auth.denied`, …
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ClusterCreate => "cluster.create",
            Self::ClusterGet => "cluster.get",
            Self::ClusterList => "cluster.list",
            Self::ClusterDescribe => "cluster.describe",
            Self::ClusterScale => "cluster.scale",
            Self::ClusterDelete => "cluster.delete",
            Self::ClusterSuspend => "cluster.suspend",
            Self::ClusterResume => "cluster.resume",
            Self::ClusterWait => "cluster.wait",
            Self::ClusterWatch => "cluster.watch",
            Self::AuditList => "audit.list",
            Self::AuthDenied => "auth.denied",
            Self::ServiceConnect => "service.connect",
            Self::RayCredentials => "cluster.credentials",
            Self::ClusterProtect => "cluster.protect",
            Self::JobList => "job.list",
            Self::JobGet => "job.get",
            Self::JobLogs => "job.logs",
            Self::ClusterLogs => "cluster.logs",
            Self::JobSubmit => "job.submit",
            Self::JobStop => "job.stop",
            Self::JobDelete => "job.delete",
            Self::PackageUpload => "package.upload",
            Self::QuotaGet => "quota.get",
            Self::UsageGet => "usage.get",
            Self::LifecycleWarn => "lifecycle.warn",
            Self::LifecyclePlan => "lifecycle.plan",
            Self::ClusterKeep => "cluster.keep",
            Self::StreamEnd => "stream.end",
            Self::RayJobCreate => "rayjob.create",
            Self::RayJobList => "rayjob.list",
            Self::RayJobGet => "rayjob.get",
            Self::RayJobLogs => "rayjob.logs",
            Self::RayJobDelete => "rayjob.delete",
            Self::RayJobWatch => "rayjob.watch",
            Self::QueueAdmit => "queue.admit",
            Self::QueueExpire => "queue.expire",
        }
    }

    /// The REST status of a success.
    pub fn success_status(self) -> u16 {
        match self {
            Self::ClusterCreate | Self::JobSubmit | Self::RayJobCreate => 201,
            Self::ClusterDelete | Self::JobDelete | Self::RayJobDelete => 204,
            _ => 200,
        }
    }
}

/// The transport a request came by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// REST/JSON.
    Rest,
    /// gRPC.
    Grpc,
    /// No request: krayne acting on its own (the lifecycle reaper).
    System,
}

impl Transport {
    /// Every transport.
    pub const ALL: [Self; 3] = [Self::Rest, Self::Grpc, Self::System];

    /// `rest`, `grpc` or `system`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rest => "rest",
            Self::Grpc => "grpc",
            Self::System => "system",
        }
    }
}

/// Who asked, from where: everything about a request but its payload.
#[derive(Debug, Clone)]
pub struct RequestMeta {
    /// The server's id of the request (UUID v7), unique: it is never taken
    /// from the client, so no caller can reuse another's.
    pub request_id: super::RequestId,
    /// The id the client sent (`x-correlation-id` or `x-request-id`), kept
    /// apart from the request id: echoed back, stored, searchable.
    pub correlation_id: Option<String>,
    /// Transport.
    pub transport: Transport,
    /// Client address.
    pub source_ip: Option<String>,
    /// Client user agent.
    pub user_agent: Option<String>,
}

/// One audit row.
#[derive(Debug, Clone)]
pub struct AuditEntry {
    /// Time-ordered id (UUID v7).
    pub id: String,
    /// When the request arrived (RFC 3339).
    pub occurred_at: String,
    /// The request.
    pub meta: RequestMeta,
    /// Caller subject.
    pub subject: String,
    /// Caller e-mail.
    pub email: Option<String>,
    /// Caller groups.
    pub groups: Vec<String>,
    /// Caller teams.
    pub teams: Vec<String>,
    /// `cluster.create`, `cluster.scale`, `cluster.delete`, `auth.denied`, …
    pub action: String,
    /// Namespace acted on.
    pub namespace: Option<String>,
    /// Cluster acted on.
    pub cluster: Option<String>,
    /// What was asked, without secrets.
    pub summary: Value,
    /// How it ended.
    pub outcome: Outcome,
    /// When the outcome was recorded (RFC 3339).
    pub completed_at: Option<String>,
    /// The HTTP status of the answer (the REST equivalent for gRPC).
    pub http_status: Option<u16>,
    /// The gRPC status code name of the answer (the equivalent for REST).
    pub grpc_code: Option<String>,
    /// The answer's message, when it failed.
    pub error: Option<String>,
    /// How long it took, once finished.
    pub duration_ms: Option<u64>,
}

impl Outcome {
    /// Parses `pending`, `succeeded`, …
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.as_str() == s)
    }
}

impl Transport {
    /// Parses `rest`, `grpc` or `system`.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// What an audit query asks for; empty fields match everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Only rows of these namespaces (the caller's scope); `None` = all.
    pub scope: Option<Vec<String>>,
    /// Only this namespace.
    pub namespace: Option<String>,
    /// Only this actor subject.
    pub actor: Option<String>,
    /// Only this action.
    pub action: Option<String>,
    /// Only this outcome.
    pub outcome: Option<String>,
    /// Only this cluster.
    pub cluster: Option<String>,
    /// Only requests with this client correlation id.
    pub correlation_id: Option<String>,
    /// At or after this time (RFC 3339).
    pub since: Option<String>,
    /// Before this time (RFC 3339).
    pub until: Option<String>,
}

/// Who made an audited request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct Actor {
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
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct AuditEvent {
    /// Event id (UUID v7, time-ordered).
    #[cfg_attr(feature = "schema", schema(format = "uuid"))]
    pub id: String,
    /// When the request arrived.
    #[cfg_attr(feature = "schema", schema(format = DateTime))]
    pub occurred_at: String,
    /// When its outcome was recorded.
    #[cfg_attr(feature = "schema", schema(format = DateTime))]
    pub completed_at: Option<String>,
    /// The server's request id (UUID v7), as answered in `x-request-id`
    /// and sent to Kubernetes; never chosen by the client.
    #[cfg_attr(feature = "schema", schema(format = "uuid"))]
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
    #[cfg_attr(feature = "schema", schema(schema_with = super::schema::transport))]
    pub transport: String,
    /// `cluster.create`, `cluster.scale`, `cluster.delete`, `auth.denied`, …
    #[cfg_attr(feature = "schema", schema(schema_with = super::schema::audit_action))]
    pub action: String,
    /// Namespace acted on.
    pub namespace: Option<String>,
    /// Cluster acted on.
    pub cluster: Option<String>,
    /// What was asked, without secrets: free-form because its keys depend
    /// on the action (a create's config, a scale's counts, a denial's
    /// reason).
    #[cfg_attr(feature = "schema", schema(schema_with = super::schema::free_form_object))]
    pub request_summary: Value,
    /// `pending`, `succeeded`, `failed`, `denied`, `invalid` or `unknown`.
    #[cfg_attr(feature = "schema", schema(schema_with = super::schema::outcome))]
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

impl From<AuditEntry> for AuditEvent {
    fn from(e: AuditEntry) -> Self {
        Self {
            id: e.id,
            occurred_at: e.occurred_at,
            completed_at: e.completed_at,
            request_id: e.meta.request_id.into(),
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

#[cfg(test)]
mod tests {
    use super::{super::Action, AuditAction};

    /// Issue 57: the role an action needs follows from its name: reads
    /// need a viewer, the audit log its readers, everything else an editor.
    #[test]
    fn the_role_an_action_needs_follows_from_what_it_does() {
        for action in AuditAction::ALL {
            let verb = action.as_str().rsplit('.').next().unwrap_or_default();
            let want = match (action.as_str(), verb) {
                ("audit.list", _) => Action::ReadAudit,
                (_, "get" | "list" | "describe" | "wait" | "watch" | "logs") => Action::Read,
                _ => Action::Mutate,
            };
            assert_eq!(action.needs(), want, "{}", action.as_str());
        }
    }
}
