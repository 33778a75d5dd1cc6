//! Ray job routes: submit, list, read, follow logs, stop, delete, and
//! working-dir packages, all through the cluster's head.

use std::time::Duration;

use axum::{
    Json,
    body::Body,
    extract::{Path, Request, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{
        IntoResponse, Response,
        sse::{Event, KeepAlive, Sse},
    },
};
use futures::{StreamExt as _, TryStreamExt as _};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{
    AppState,
    extract::{Caller, ClusterPath, JobSegment, JsonBody, PackageSegment, QueryOf},
    problem::{ApiError, Problem},
    responses::{Bodies, Editor, EditorOfCluster, KubernetesReads, Refusals, Viewer, ViewerOfCluster},
};
use crate::{
    control::LogStream,
    domain::{Error, Job, JobSubmission},
    edge::{self, DeadlineBody, DeclaredRefusal},
};

/// A cluster's Ray jobs.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct JobList {
    /// As Ray lists them.
    pub jobs: Vec<Job>,
}

/// What a stop did.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct StopResult {
    /// Whether the job was running and was told to stop (false: it had
    /// ended already; not an error).
    pub stopped: bool,
    /// The job as it is now (a stopped job turns `STOPPED` shortly).
    pub job: Job,
}

/// An uploaded working-dir package.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct UploadedPackage {
    /// Its name.
    pub package: String,
    /// Bytes uploaded.
    pub bytes: u64,
    /// What to give as `runtime_env.working_dir`.
    pub working_dir: String,
}

/// How to read a job's log.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct LogsQuery {
    /// Stream the log as it grows until the job ends: chunked
    /// `text/plain`, or Server-Sent Events when the request accepts
    /// `text/event-stream`.
    #[serde(default)]
    pub follow: bool,
}

/// List a cluster's Ray jobs.
///
/// From the head's Jobs API. Needs the viewer role.
#[utoipa::path(get, path = "/v1/namespaces/{namespace}/clusters/{name}/jobs", tag = "jobs",
    params(("namespace" = String, Path, description = "Kubernetes namespace"), ("name" = String, Path, description = "Cluster name")),
    responses(
        Refusals, KubernetesReads, ViewerOfCluster,
        (status = 200, description = "The cluster's jobs", body = JobList),
        (status = 400, description = "Not a namespace or cluster name Kubernetes could hold", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The cluster is not ready, or has no dashboard", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The cluster's Ray head does not answer", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "The cluster's Ray head answered what krayne does not read: larger than it reads of that answer, not the shape Ray's API has, or a redirect", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn list_jobs(
    State(s): State<AppState>,
    Caller(cx): Caller,
    ClusterPath(cluster): ClusterPath,
) -> Result<Json<JobList>, ApiError> {
    let jobs = s.plane.jobs(&cx, &cluster).await?;
    Ok(Json(JobList { jobs }))
}

/// Submit a Ray job.
///
/// Runs `entrypoint` on the cluster through Ray's Jobs API. A
/// `submission_id` makes it idempotent: submitting the same id again
/// returns the first job (200) instead of a second one (201). For a
/// working dir, upload its package first (`PUT …/packages/{package}`) and
/// name it in `runtime_env.working_dir`. Needs the editor role; audited
/// as `job.submit` (env var names, never their values).
#[utoipa::path(post, path = "/v1/namespaces/{namespace}/clusters/{name}/jobs", tag = "jobs",
    params(("namespace" = String, Path, description = "Kubernetes namespace"), ("name" = String, Path, description = "Cluster name")),
    request_body = JobSubmission,
    responses(
        Refusals, Bodies, KubernetesReads, EditorOfCluster,
        (status = 201, description = "Submitted", body = Job),
        (status = 200, description = "A job with this submission id was there already: that job", body = Job),
        (status = 400, description = "An invalid submission (every problem listed)", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The cluster is not ready, or has no dashboard", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The cluster's Ray head, or the audit log, is unavailable", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "The cluster's Ray head answered what krayne does not read: larger than it reads of that answer, not the shape Ray's API has, or a redirect", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn submit_job(
    State(s): State<AppState>,
    Caller(cx): Caller,
    ClusterPath(cluster): ClusterPath,
    JsonBody(submission): JsonBody<JobSubmission>,
) -> Result<Response, ApiError> {
    let submitted = s.plane.submit_job(&cx, &cluster, submission).await?;
    let status = if submitted.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(submitted.job)).into_response())
}

/// Read a Ray job.
#[utoipa::path(get, path = "/v1/namespaces/{namespace}/clusters/{name}/jobs/{id}", tag = "jobs",
    params(("namespace" = String, Path, description = "Kubernetes namespace"), ("name" = String, Path, description = "Cluster name"),
           ("id" = String, Path, description = "The job's id (its submission id)")),
    responses(
        Refusals, KubernetesReads, Viewer,
        (status = 200, description = "The job", body = Job),
        (status = 400, description = "Not an id a job could have", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such cluster or job", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The cluster is not ready, or has no dashboard", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The cluster's Ray head does not answer", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "The cluster's Ray head answered what krayne does not read: larger than it reads of that answer, not the shape Ray's API has, or a redirect", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn get_job(
    State(s): State<AppState>,
    Caller(cx): Caller,
    ClusterPath(cluster): ClusterPath,
    Path(JobSegment { id }): Path<JobSegment>,
) -> Result<Json<Job>, ApiError> {
    Ok(Json(s.plane.job(&cx, &cluster, &id).await?))
}

/// Stop a Ray job.
///
/// Ray stops it (SIGTERM, then SIGKILL); it shows `STOPPED` shortly
/// after. A job that has ended already is not an error (`stopped:
/// false`). Needs the editor role; audited as `job.stop`.
#[utoipa::path(post, path = "/v1/namespaces/{namespace}/clusters/{name}/jobs/{id}/stop", tag = "jobs",
    params(("namespace" = String, Path, description = "Kubernetes namespace"), ("name" = String, Path, description = "Cluster name"),
           ("id" = String, Path, description = "The job's id")),
    responses(
        Refusals, KubernetesReads, Editor,
        (status = 200, description = "What the stop did", body = StopResult),
        (status = 400, description = "Not an id a job could have", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such cluster or job", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The cluster is not ready, or has no dashboard", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The cluster's Ray head, or the audit log, is unavailable", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "The cluster's Ray head answered what krayne does not read: larger than it reads of that answer, not the shape Ray's API has, or a redirect", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn stop_job(
    State(s): State<AppState>,
    Caller(cx): Caller,
    ClusterPath(cluster): ClusterPath,
    Path(JobSegment { id }): Path<JobSegment>,
) -> Result<Json<StopResult>, ApiError> {
    let stopped = s.plane.stop_job(&cx, &cluster, &id).await?;
    Ok(Json(StopResult {
        stopped: stopped.stopped,
        job: stopped.job,
    }))
}

/// Delete a Ray job that has ended, with its log.
///
/// A job still pending or running is refused (409): stop it first.
/// Needs the editor role; audited as `job.delete`.
#[utoipa::path(delete, path = "/v1/namespaces/{namespace}/clusters/{name}/jobs/{id}", tag = "jobs",
    params(("namespace" = String, Path, description = "Kubernetes namespace"), ("name" = String, Path, description = "Cluster name"),
           ("id" = String, Path, description = "The job's id")),
    responses(
        Refusals, KubernetesReads, Editor,
        (status = 204, description = "Deleted"),
        (status = 400, description = "Not an id a job could have", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such cluster or job", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The job has not ended, or the cluster is not ready or has no dashboard", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The cluster's Ray head, or the audit log, is unavailable", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "The cluster's Ray head answered what krayne does not read: larger than it reads of that answer, not the shape Ray's API has, or a redirect", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn delete_job(
    State(s): State<AppState>,
    Caller(cx): Caller,
    ClusterPath(cluster): ClusterPath,
    Path(JobSegment { id }): Path<JobSegment>,
) -> Result<StatusCode, ApiError> {
    s.plane.delete_job(&cx, &cluster, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Read a Ray job's log.
///
/// The whole log so far as `text/plain`; with `follow=true`, from the
/// start and as it grows until the job ends (chunked `text/plain`, or
/// Server-Sent Events — `log` events, then one `end` event — when the
/// request accepts `text/event-stream`). Needs the viewer role.
#[utoipa::path(get, path = "/v1/namespaces/{namespace}/clusters/{name}/jobs/{id}/logs", tag = "jobs",
    params(("namespace" = String, Path, description = "Kubernetes namespace"), ("name" = String, Path, description = "Cluster name"),
           ("id" = String, Path, description = "The job's id"), LogsQuery),
    responses(
        Refusals, KubernetesReads, Viewer,
        (status = 200, description = "The log", body = String, content_type = "text/plain"),
        (status = 400, description = "Not an id a job could have", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such cluster or job", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The cluster is not ready, or has no dashboard", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The cluster's Ray head does not answer", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "The cluster's Ray head answered what krayne does not read: larger than it reads of that answer, not the shape Ray's API has, or a redirect", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn job_logs(
    State(s): State<AppState>,
    Caller(cx): Caller,
    ClusterPath(cluster): ClusterPath,
    Path(JobSegment { id }): Path<JobSegment>,
    QueryOf(query): QueryOf<LogsQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let plain = [(header::CONTENT_TYPE, "text/plain; charset=utf-8")];
    if !query.follow {
        let logs = s.plane.job_logs(&cx, &cluster, &id).await?;
        return Ok((plain, logs).into_response());
    }
    let lines = s.plane.follow_job_logs(&cx, &cluster, &id).await?;
    Ok(followed(lines, &headers))
}

/// A followed log's answer: Server-Sent Events when the request accepts
/// them, else chunked `text/plain`.
pub(super) fn followed(lines: LogStream, headers: &HeaderMap) -> Response {
    let wants_events = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/event-stream"));
    if wants_events {
        return as_events(lines).into_response();
    }
    // A broken stream ends the body with an error: curl says the
    // transfer was cut short rather than showing a truncated log as whole.
    let body = Body::from_stream(lines.map_err(|e| std::io::Error::other(e.to_string())));
    let plain = [(header::CONTENT_TYPE, "text/plain; charset=utf-8")];
    let mut response = (plain, body).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// A log as Server-Sent Events: `log` events (their data the lines), then
/// `end`, or `error` with the reason.
fn as_events(lines: LogStream) -> Sse<impl futures::Stream<Item = Result<Event, std::convert::Infallible>>> {
    let events = lines
        .map(|chunk| {
            Ok(match chunk {
                Ok(text) => Event::default().event("log").data(text.trim_end_matches('\n')),
                Err(e) => Event::default().event("error").data(e.to_string()),
            })
        })
        .chain(futures::stream::once(async {
            Ok(Event::default().event("end").data(""))
        }));
    Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

/// Whether a working-dir package is on the cluster's head.
///
/// 204 when it is (no need to upload it again), 404 when not. Needs the
/// editor role (part of uploading).
#[utoipa::path(get, path = "/v1/namespaces/{namespace}/clusters/{name}/packages/{package}", tag = "jobs",
    params(("namespace" = String, Path, description = "Kubernetes namespace"), ("name" = String, Path, description = "Cluster name"),
           ("package" = String, Path, description = "`_ray_pkg_<16 hex>.zip`, named as Ray names working dirs")),
    responses(
        Refusals, KubernetesReads, Editor,
        (status = 204, description = "The head has it"),
        (status = 400, description = "Not a package name", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such cluster, or the head does not have the package", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The cluster is not ready, or has no dashboard", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The cluster's Ray head does not answer", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "The cluster's Ray head answered what krayne does not read: larger than it reads of that answer, not the shape Ray's API has, or a redirect", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn has_package(
    State(s): State<AppState>,
    Caller(cx): Caller,
    ClusterPath(cluster): ClusterPath,
    Path(PackageSegment { package }): Path<PackageSegment>,
) -> Result<StatusCode, ApiError> {
    if s.plane.has_package(&cx, &cluster, &package).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(Error::NotFound {
            kind: crate::domain::ResourceKind::Package,
            name: package,
            namespace: None,
        }
        .into())
    }
}

/// Upload a working-dir package to the cluster's head.
///
/// The body is the zip (any content type), streamed to the head
/// as it arrives. Bodies over the package limit (100 MiB by default) are
/// refused with 413: from `Content-Length` before the head sees a byte,
/// or when the stream passes it (the head then keeps nothing). Needs the
/// editor role; audited as `package.upload`.
#[utoipa::path(put, path = "/v1/namespaces/{namespace}/clusters/{name}/packages/{package}", tag = "jobs",
    params(("namespace" = String, Path, description = "Kubernetes namespace"), ("name" = String, Path, description = "Cluster name"),
           ("package" = String, Path, description = "`_ray_pkg_<16 hex>.zip`")),
    request_body(content = Vec<u8>, description = "The package: a zip", content_type = "application/octet-stream"),
    responses(
        Refusals, KubernetesReads, EditorOfCluster,
        (status = 200, description = "Uploaded", body = UploadedPackage),
        (status = 400, description = "Not a package name", body = Problem, content_type = "application/problem+json"),
        (status = 408, description = "The body stalled", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The cluster is not ready, or has no dashboard", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Over the package limit", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The cluster's Ray head, or the audit log, is unavailable", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "The cluster's Ray head answered what krayne does not read: larger than it reads of that answer, not the shape Ray's API has, or a redirect", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn upload_package(
    State(s): State<AppState>,
    Caller(cx): Caller,
    ClusterPath(cluster): ClusterPath,
    Path(PackageSegment { package }): Path<PackageSegment>,
    request: Request,
) -> Result<Json<UploadedPackage>, ApiError> {
    // The package limit is the use case's (it also cuts a stream that
    // passes it); a declared size over it is refused here too, before the
    // head sees a byte, while the edge drains the body so that the client
    // reads the 413 rather than a reset connection.
    let limit = s.plane.package_limit();
    let idle = s.proxy_body_idle;
    let on_timeout = |d| -> axum::BoxError { Box::new(edge::BodyTimeout(d)) };
    let request = match edge::check_declared(request, Some(limit), idle, on_timeout) {
        Ok(request) => request,
        Err(DeclaredRefusal::TooLarge(_)) => {
            return Err(Error::PayloadTooLarge {
                what: "package",
                limit_bytes: limit,
            }
            .into());
        }
        Err(DeclaredRefusal::Unreadable) => {
            return Err(Problem::new(StatusCode::BAD_REQUEST, "invalid_argument", "unreadable Content-Length").into());
        }
    };
    let size = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse().ok());
    let body = DeadlineBody::idle(request.into_body(), idle, on_timeout);
    let chunks = Body::new(body)
        .into_data_stream()
        .map_err(std::io::Error::other)
        .boxed();
    let uploaded = s.plane.upload_package(&cx, &cluster, &package, size, chunks).await?;
    Ok(Json(UploadedPackage {
        working_dir: uploaded.working_dir,
        package: uploaded.package,
        bytes: uploaded.bytes,
    }))
}
