//! RayJob routes: a job with a cluster of its own (`krayne run`).

use axum::{
    Json,
    extract::{Path, State},
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
};

use super::{
    AppState,
    dto::{CreateQuery, CreateRayJobResponse, RayJobList, RayJobListQuery, RunRequest},
    extract::{Caller, ClusterPath, ConfigBody, ListCaller, QueryOf},
    jobs::LogsQuery,
    problem::{ApiError, Problem},
    responses::{Bodies, Editor, EditorOfCluster, KubernetesReads, Refusals, Viewer, ViewerOfCluster},
    warnings::warning_headers,
    watch::RayJobWatchEvent,
};
use crate::{
    control::RunInput,
    domain::{RayJobInfo, RunState, WatchedKind},
};

/// List (or watch) a namespace's RayJobs, by name.
///
/// With `watch=true`, instead of the list: every change from now on, as
/// the cluster list routes give clusters' (`ADDED`, `MODIFIED`, `DELETED`
/// with the RayJob as list shows it, a `BOOKMARK` after the start and
/// every 30 s; NDJSON, or Server-Sent Events when the request accepts
/// `text/event-stream`). A RayJob changes when its own status or its
/// cluster's does. Resume after an event with its `resource_version`; a
/// version no longer held answers 410. Served from the watch cache.
#[utoipa::path(get, path = "/v1/namespaces/{namespace}/rayjobs", tag = "rayjobs",
    params(("namespace" = String, Path, description = "Kubernetes namespace"), RayJobListQuery),
    responses(
        Refusals, KubernetesReads, Viewer,
        (status = 200, description = "The RayJobs; with `watch=true`, the stream of changes", content(
            (RayJobList = "application/json"),
            (RayJobWatchEvent = "application/x-ndjson"),
            (RayJobWatchEvent = "text/event-stream"),
        )),
        (status = 400, description = "Bad watch parameters", body = Problem, content_type = "application/problem+json"),
        (status = 410, description = "The watch's resource_version is no longer held: list again", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn list_rayjobs(
    State(s): State<AppState>,
    ListCaller(cx): ListCaller,
    Path(namespace): Path<String>,
    QueryOf(q): QueryOf<RayJobListQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let params = (&q).into();
    if q.watch == Some(true) {
        let what = WatchedKind::RayJobs;
        return Ok(super::watch::respond(&s.plane, &cx, what, Some(&namespace), &params, &headers).await?);
    }
    super::watch::not_watching(&params)?;
    let rayjobs = s.plane.rayjobs(&cx, &namespace).await?;
    Ok(Json(RayJobList { rayjobs }).into_response())
}

/// Run a job on a cluster of its own (a KubeRay RayJob, JSON or YAML).
///
/// The cluster is checked as `create` checks one, and charged to the
/// namespace's quota from now until it is gone; KubeRay makes it, the job
/// is submitted to its head, and the cluster is deleted
/// `ttl_seconds_after_finished` after the job ends. Every problem is
/// reported at once. With `dry_run=true` Kubernetes checks the RayJob and
/// nothing is created (200). With `queue=true` (or `queue: true` in the
/// body, or the namespace's `queueing:` policy) a run whose cluster does
/// not fit the quota waits in the namespace's line, a suspended RayJob
/// with state `queued` (202), and KubeRay makes its cluster once the
/// admitter admits it (docs/quotas.md).
#[utoipa::path(post, path = "/v1/namespaces/{namespace}/rayjobs", tag = "rayjobs",
    params(("namespace" = String, Path, description = "Kubernetes namespace"), CreateQuery),
    request_body(content(
        (RunRequest = "application/json"),
        (RunRequest = "application/yaml"),
    )),
    responses(
        Refusals, Bodies, Editor,
        (status = 201, description = "Created", body = CreateRayJobResponse),
        (status = 202, description = "Accepted: waits in the namespace's line (state `queued`)", body = CreateRayJobResponse),
        (status = 200, description = "Dry run: checked, nothing created", body = CreateRayJobResponse),
        (status = 400, description = "Invalid request, with every violation", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "A RayJob of that name exists", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Body neither JSON nor YAML", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Kubernetes or the audit log unavailable; nothing created", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn create_rayjob(
    State(s): State<AppState>,
    Caller(cx): Caller,
    Path(namespace): Path<String>,
    QueryOf(q): QueryOf<CreateQuery>,
    ConfigBody(request): ConfigBody,
) -> Result<impl IntoResponse, ApiError> {
    let dry_run = q.dry_run.unwrap_or(false);
    let field_validation = q.field_validation()?;
    let run = s
        .plane
        .create_rayjob(
            &cx,
            RunInput {
                request,
                namespace,
                dry_run,
                field_validation,
                queue: q.queue,
            },
        )
        .await?;
    let status = match (dry_run, run.rayjob.state) {
        (true, _) => StatusCode::OK,
        (false, RunState::Queued) => StatusCode::ACCEPTED,
        (false, _) => StatusCode::CREATED,
    };
    let headers = warning_headers(&run.warnings);
    Ok((status, headers, Json(CreateRayJobResponse::from(run))))
}

/// Get one RayJob: its state, its job's and its cluster's.
#[utoipa::path(get, path = "/v1/namespaces/{namespace}/rayjobs/{name}", tag = "rayjobs",
    params(("namespace" = String, Path, description = "Kubernetes namespace"), ("name" = String, Path, description = "RayJob name")),
    responses(
        Refusals, KubernetesReads, ViewerOfCluster,
        (status = 200, description = "The RayJob", body = RayJobInfo),
    ))]
pub(super) async fn get_rayjob(
    State(s): State<AppState>,
    Caller(cx): Caller,
    ClusterPath(rayjob): ClusterPath,
) -> Result<Json<RayJobInfo>, ApiError> {
    Ok(Json(s.plane.rayjob(&cx, &rayjob).await?))
}

/// Delete a RayJob: KubeRay stops its job and its cluster goes with it.
#[utoipa::path(delete, path = "/v1/namespaces/{namespace}/rayjobs/{name}", tag = "rayjobs",
    params(("namespace" = String, Path, description = "Kubernetes namespace"), ("name" = String, Path, description = "RayJob name")),
    responses(
        Refusals, EditorOfCluster,
        (status = 204, description = "Deleted"),
        (status = 503, description = "Kubernetes or the audit log unavailable; nothing deleted", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn delete_rayjob(
    State(s): State<AppState>,
    Caller(cx): Caller,
    ClusterPath(rayjob): ClusterPath,
) -> Result<StatusCode, ApiError> {
    s.plane.delete_rayjob(&cx, &rayjob).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Read a RayJob's driver log.
///
/// Its head's while the job's cluster lives; once the job has ended,
/// the last MiB krayne kept, also after KubeRay has deleted the cluster.
/// With `follow=true`, from the start and as it grows until the job ends
/// (chunked `text/plain`, or Server-Sent Events when the request accepts
/// `text/event-stream`). Needs the viewer role.
#[utoipa::path(get, path = "/v1/namespaces/{namespace}/rayjobs/{name}/logs", tag = "rayjobs",
    params(("namespace" = String, Path, description = "Kubernetes namespace"), ("name" = String, Path, description = "RayJob name"), LogsQuery),
    responses(
        Refusals, KubernetesReads, ViewerOfCluster,
        (status = 200, description = "The log", body = String, content_type = "text/plain"),
        (status = 409, description = "The job has not started yet, or never ran", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The job's Ray head does not answer", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn rayjob_logs(
    State(s): State<AppState>,
    Caller(cx): Caller,
    ClusterPath(rayjob): ClusterPath,
    QueryOf(query): QueryOf<LogsQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    if !query.follow {
        let log = s.plane.rayjob_logs(&cx, &rayjob).await?;
        return Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], log).into_response());
    }
    let lines = s.plane.follow_rayjob_logs(&cx, &rayjob).await?;
    Ok(super::jobs::followed(lines, &headers))
}
