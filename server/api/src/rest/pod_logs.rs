//! A cluster's pod logs over REST.

use axum::{
    Json,
    extract::State,
    http::{HeaderMap, HeaderName, HeaderValue, header},
    response::{IntoResponse, Response},
};
use serde::Deserialize;

use super::{
    AppState,
    extract::{Caller, ClusterPath, QueryOf},
    jobs::followed,
    problem::{ApiError, Problem},
    responses::{KubernetesReads, Refusals, Viewer, ViewerOfCluster},
};
use crate::domain::{PodLogParts, PodLogQuery, RayLogFiles};

/// Which of a cluster's pod logs, and how much of it.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct ClusterLogsQuery {
    /// A pod of the cluster, by name; else `node_type`.
    pub pod: Option<String>,
    /// `head` (the default) or `worker`.
    pub node_type: Option<String>,
    /// With `node_type=worker`: the worker group.
    pub group: Option<String>,
    /// The container [default: the pod's first, Ray's]; an init container
    /// or the autoscaler sidecar by name.
    pub container: Option<String>,
    /// Only the last lines (at most 100000).
    pub tail_lines: Option<u32>,
    /// Only what was written this many seconds back.
    pub since_seconds: Option<u32>,
    /// The previous (crashed) container's log: what a crash loop needs.
    #[serde(default)]
    pub previous: bool,
    /// Stream the log as it is written until the container ends: chunked
    /// `text/plain`, or Server-Sent Events when the request accepts
    /// `text/event-stream`.
    #[serde(default)]
    pub follow: bool,
}

/// The response headers naming what was read.
const POD: HeaderName = HeaderName::from_static("x-krayne-pod");
const CONTAINER: HeaderName = HeaderName::from_static("x-krayne-container");

/// Read a cluster's pod log.
///
/// A container's output, from Kubernetes' `pods/log`: the head's by
/// default, a worker's (`node_type=worker`, `group`), or a pod of the
/// cluster by name; at most 4 MiB, as `text/plain`, with the pod and
/// container read in `X-Krayne-Pod` and `X-Krayne-Container`. With
/// `previous=true`, the crashed container's output. With `follow=true`,
/// then as it is written until the container ends (chunked, or
/// Server-Sent Events: `log` events, then `end`). Needs the viewer role.
#[utoipa::path(get, path = "/v1/namespaces/{namespace}/clusters/{name}/logs", tag = "clusters",
    params(("namespace" = String, Path, description = "Kubernetes namespace"), ("name" = String, Path, description = "Cluster name"),
           ClusterLogsQuery),
    responses(
        Refusals, KubernetesReads, ViewerOfCluster,
        (status = 200, description = "The log", body = String, content_type = "text/plain"),
        (status = 400, description = "No such pod or container in the cluster, or a bad parameter", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "No log to read yet (the container is waiting to start), or no previous container", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Too many followed logs of this caller", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn cluster_logs(
    State(s): State<AppState>,
    Caller(cx): Caller,
    ClusterPath(cluster): ClusterPath,
    QueryOf(q): QueryOf<ClusterLogsQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let text = |s: &Option<String>| s.clone().unwrap_or_default();
    let (pod, node_type, group, container) = (text(&q.pod), text(&q.node_type), text(&q.group), text(&q.container));
    let query = PodLogQuery::from_parts(&PodLogParts {
        pod: &pod,
        node_type: &node_type,
        group: &group,
        container: &container,
        tail_lines: q.tail_lines,
        since_seconds: q.since_seconds,
        previous: q.previous,
    })?;
    let named = |mut response: Response, pod: &str, container: &str| {
        let headers = response.headers_mut();
        for (name, value) in [(POD, pod), (CONTAINER, container)] {
            if let Ok(value) = HeaderValue::from_str(value) {
                headers.insert(name, value);
            }
        }
        response
    };
    let plain = [(header::CONTENT_TYPE, "text/plain; charset=utf-8")];
    if !q.follow {
        let log = s.plane.cluster_logs(&cx, &cluster, query).await?;
        return Ok(named((plain, log.text).into_response(), &log.pod, &log.container));
    }
    let (pod, container, lines) = s.plane.follow_cluster_logs(&cx, &cluster, query).await?;
    Ok(named(followed(lines, &headers), &pod, &container))
}

/// Which node's Ray logs.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct RayLogsQuery {
    /// A node id or IP [default: the head node].
    pub node: Option<String>,
}

/// List a Ray node's log files.
///
/// From the head's dashboard log API, by component (`raylet`,
/// `gcs_server`, `worker`…; directories end with `/`): the head node's
/// unless `node` names another. Needs the viewer role.
#[utoipa::path(get, path = "/v1/namespaces/{namespace}/clusters/{name}/ray-logs", tag = "clusters",
    params(("namespace" = String, Path, description = "Kubernetes namespace"), ("name" = String, Path, description = "Cluster name"),
           RayLogsQuery),
    responses(
        Refusals, KubernetesReads, Viewer,
        (status = 200, description = "The node's log files", body = RayLogFiles),
        (status = 404, description = "No such cluster or node", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The cluster is not ready, or has no dashboard", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The cluster's Ray head does not answer", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "The cluster's Ray head answered what krayne does not read: larger than it reads of that answer, not the shape Ray's API has, or a redirect", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn ray_logs(
    State(s): State<AppState>,
    Caller(cx): Caller,
    ClusterPath(cluster): ClusterPath,
    QueryOf(q): QueryOf<RayLogsQuery>,
) -> Result<Json<RayLogFiles>, ApiError> {
    let files = s.plane.ray_log_files(&cx, &cluster, q.node.as_deref()).await?;
    Ok(Json(files))
}

/// Which Ray log file, and how much of it.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct RayLogFileQuery {
    /// A node id or IP [default: the head node].
    pub node: Option<String>,
    /// The file, as listed (`raylet.out`, `events/event_GCS.log`).
    pub file: String,
    /// The last lines [default: 1000, at most 100000].
    pub lines: Option<u32>,
    /// Then what is written to it, until the client goes: chunked
    /// `text/plain`, or Server-Sent Events when the request accepts
    /// `text/event-stream`.
    #[serde(default)]
    pub follow: bool,
}

/// Read a Ray log file.
///
/// The last lines of a file on a node (the head's unless `node` names
/// another), from the head's dashboard log API, as `text/plain`; a file
/// the node does not have is 404 (Ray's 500 "A file is not found"). With
/// `follow=true`, then as it is written. Needs the viewer role.
#[utoipa::path(get, path = "/v1/namespaces/{namespace}/clusters/{name}/ray-logs/file", tag = "clusters",
    params(("namespace" = String, Path, description = "Kubernetes namespace"), ("name" = String, Path, description = "Cluster name"),
           RayLogFileQuery),
    responses(
        Refusals, KubernetesReads, Viewer,
        (status = 200, description = "The file's last lines", body = String, content_type = "text/plain"),
        (status = 400, description = "Not a log file's name, or lines out of range", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such cluster, node or file", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The cluster is not ready, or has no dashboard", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The cluster's Ray head does not answer", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "The cluster's Ray head answered what krayne does not read: larger than it reads of that answer, not the shape Ray's API has, or a redirect", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn ray_log_file(
    State(s): State<AppState>,
    Caller(cx): Caller,
    ClusterPath(cluster): ClusterPath,
    QueryOf(q): QueryOf<RayLogFileQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    if q.follow {
        let lines = s
            .plane
            .follow_ray_log_file(&cx, &cluster, q.node.as_deref(), &q.file, q.lines)
            .await?;
        return Ok(followed(lines, &headers));
    }
    let text = s
        .plane
        .ray_log_file(&cx, &cluster, q.node.as_deref(), &q.file, q.lines)
        .await?;
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response())
}
