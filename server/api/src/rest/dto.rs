//! REST wire types: JSON shapes and their OpenAPI schemas, converted from
//! the domain at the edge.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::{
    control::{Created, Run},
    domain::{self, FieldValidation, FieldViolation, RayJobInfo, RuntimeEnv},
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

/// The created cluster, and the manifest sent to Kubernetes.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct CreateClusterResponse {
    /// The cluster (for a dry run, as it would be).
    pub cluster: ClusterInfo,
    /// The RayCluster manifest (`ray.io/v1` `RayCluster`): free-form here
    /// because its schema is KubeRay's CRD, not krayne's.
    #[schema(schema_with = domain::schema::free_form_object)]
    pub manifest: Value,
    /// What `field_validation=warn` accepted but reports: ignored keys and
    /// converted values, each at its field path; also sent as `Warning: 299`
    /// headers. Empty for a clean config.
    pub warnings: Vec<FieldViolation>,
    /// Why the cluster went (or, for a dry run, would go) to its site
    /// (`cluster.site`), when the server fronts several (docs/sites.md).
    #[schema(example = "the first site by weight (100)")]
    pub placement: Option<String>,
}

impl From<Created> for CreateClusterResponse {
    fn from(c: Created) -> Self {
        Self {
            cluster: c.cluster,
            manifest: c.manifest,
            warnings: c.warnings,
            placement: c.placement.map(|p| p.why),
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

/// How long to keep a cluster from its lifecycle policy: give `for` or
/// `until`, one of them.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct KeepRequest {
    /// For this long from now: `30s`, `90m`, `4h`, `1d`, `1h30m`.
    #[serde(rename = "for")]
    #[schema(example = "4h")]
    pub for_: Option<String>,
    /// Until this time (RFC 3339).
    #[schema(format = DateTime)]
    pub until: Option<String>,
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

/// Query of the RayJob list route: every RayJob, or with `watch=true` a
/// live stream of their changes, as the cluster list routes give them.
/// (No `Debug`: it may carry a token.)
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct RayJobListQuery {
    /// Instead of the list, stream every change from now on: NDJSON, or
    /// Server-Sent Events when the request accepts `text/event-stream`.
    pub watch: Option<bool>,
    /// With `watch`: resume after this version (an earlier event's or
    /// bookmark's); one the server no longer holds answers 410 `gone`.
    /// `Last-Event-ID` takes precedence.
    pub resource_version: Option<String>,
    /// With `watch`: begin with an `ADDED` event for every RayJob there is
    /// now, then a `BOOKMARK`; not together with `resource_version`.
    pub send_initial_events: Option<bool>,
    /// With `watch`: end the stream after this many seconds (1–86400),
    /// after a last `BOOKMARK`; `0` or absent: no limit.
    #[param(maximum = 86_400)]
    pub timeout_seconds: Option<u64>,
    /// With `watch` and `Accept: text/event-stream` only, for a browser's
    /// `EventSource`: the bearer token. Use the `Authorization` header
    /// wherever you can.
    #[expect(
        dead_code,
        reason = "read from the URI by the `ListCaller` extractor; here for the docs"
    )]
    pub access_token: Option<String>,
}

/// Query of the cluster list routes: a page, or with `watch=true` a
/// live stream of changes. (No `Debug`: it may carry a token.)
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct ListQuery {
    /// Items per page (1–1000, default 100); not with `watch`.
    pub page_size: Option<u32>,
    /// `next_page_token` of the previous page; not with `watch`.
    pub page_token: Option<String>,
    /// Instead of a page, stream every change from now on: NDJSON, or
    /// Server-Sent Events when the request accepts `text/event-stream`.
    pub watch: Option<bool>,
    /// With `watch`: resume after this version (an earlier event's or
    /// bookmark's). A version the server no longer holds answers 410
    /// `gone`: list again, then watch from the list. `Last-Event-ID`
    /// takes precedence (an `EventSource` reconnecting).
    pub resource_version: Option<String>,
    /// With `watch`: begin with an `ADDED` event for every cluster there is
    /// now, then a `BOOKMARK`; not together with `resource_version`.
    pub send_initial_events: Option<bool>,
    /// With `watch`: end the stream after this many seconds (1–86400, as
    /// Kubernetes' `timeoutSeconds`), after a last `BOOKMARK` to resume
    /// from; `0` or absent: no limit.
    // utoipa takes a literal: the domain's MAX_WATCH_TIMEOUT_SECONDS.
    #[param(maximum = 86_400)]
    pub timeout_seconds: Option<u64>,
    /// With `watch` and `Accept: text/event-stream` only, for a browser's
    /// `EventSource`, which cannot send headers: the bearer token. Proxies
    /// may log URLs; use the `Authorization` header wherever you can.
    #[expect(
        dead_code,
        reason = "read from the URI by the `ListCaller` extractor; here for the docs"
    )]
    pub access_token: Option<String>,
}

/// Query of create.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct CreateQuery {
    /// Check the cluster with Kubernetes and return its manifest; create nothing.
    pub dry_run: Option<bool>,
    /// What to do with what Krayne accepts but a clean config would not
    /// say — keys below the top level that the model does not know, and
    /// values converted as pydantic's lax mode converts them (`"2"` for an
    /// integer, `"yes"` for a boolean): `strict` refuses them (400, each
    /// at its field path), `warn` (the default) accepts them and reports
    /// each in `Warning: 299` headers and the body's `warnings`, `ignore`
    /// accepts them silently. Unknown top-level keys are always refused.
    #[param(value_type = Option<FieldValidation>)]
    pub field_validation: Option<String>,
    /// Wait in the namespace's line when the cluster does not fit its
    /// quota: 202, status `queued`, with its place and why (the body may
    /// say `queue: true` instead). Unset: as the namespace's queueing
    /// policy says (docs/quotas.md).
    pub queue: Option<bool>,
}

/// Query of resume.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct ResumeQuery {
    /// Wait in the namespace's line when its pods do not fit the quota:
    /// 202, status `queued`, with its place and why. Unset: as the
    /// namespace's queueing policy says (docs/quotas.md).
    pub queue: Option<bool>,
}

impl CreateQuery {
    /// The mode asked for, `warn` when none.
    pub(super) fn field_validation(&self) -> Result<FieldValidation, domain::Error> {
        match self.field_validation.as_deref() {
            None => Ok(FieldValidation::default()),
            Some(text) => FieldValidation::parse(text)
                .ok_or_else(|| domain::Error::invalid("field_validation", "must be strict, warn or ignore")),
        }
    }
}

/// Query of wait.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct WaitQuery {
    /// Give up after this many seconds (1–3600, default 300).
    pub timeout_seconds: Option<u64>,
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

/// A job with a cluster of its own (a KubeRay RayJob): the cluster as
/// `create` takes it, the job as `submit` takes it, and how long the
/// cluster outlives the job.
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code, reason = "documents the body RunSpec::read reads")]
pub(super) struct RunRequest {
    /// The RayJob's name: a DNS-1035 label of at most 47 characters
    /// (KubeRay names its cluster `<name>-<5 characters>`).
    #[schema(example = "train-1")]
    pub name: String,
    /// The cluster, as `create` takes it, without `name` and `namespace`
    /// (the run's).
    #[schema(schema_with = domain::schema::free_form_object)]
    pub cluster: Option<Value>,
    /// The shell command to run on the head.
    #[schema(example = "python train.py")]
    pub entrypoint: String,
    /// The Ray job id (default: the RayJob's name).
    pub submission_id: Option<String>,
    /// Its runtime environment; a working dir is a package uploaded to the
    /// job's cluster once its head serves (`krayne run` does it).
    pub runtime_env: Option<RuntimeEnv>,
    /// CPUs reserved for the entrypoint.
    pub entrypoint_num_cpus: Option<f64>,
    /// GPUs reserved for the entrypoint.
    pub entrypoint_num_gpus: Option<f64>,
    /// Delete the cluster once the job has ended (default true).
    pub shutdown_after_job_finishes: Option<bool>,
    /// Seconds from the job's end to its cluster's deletion (default: the
    /// team's `job_ttl`, else 300).
    pub ttl_seconds_after_finished: Option<u32>,
    /// Longest the RayJob may take from its start, its cluster's creation
    /// included (capped by the team's `max_lifetime`).
    pub active_deadline_seconds: Option<u64>,
}

/// The created RayJob, and the manifest sent to Kubernetes.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct CreateRayJobResponse {
    /// The RayJob (for a dry run, as it would be).
    pub rayjob: RayJobInfo,
    /// The RayJob manifest (`ray.io/v1` `RayJob`): free-form here because
    /// its schema is KubeRay's CRD, not krayne's.
    #[schema(schema_with = domain::schema::free_form_object)]
    pub manifest: Value,
    /// What `field_validation=warn` accepted but reports in the cluster
    /// config.
    pub warnings: Vec<FieldViolation>,
}

impl From<Run> for CreateRayJobResponse {
    fn from(r: Run) -> Self {
        Self {
            rayjob: r.rayjob,
            manifest: r.manifest,
            warnings: r.warnings,
        }
    }
}

/// A namespace's RayJobs.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct RayJobList {
    /// The RayJobs, by name.
    pub rayjobs: Vec<RayJobInfo>,
}
