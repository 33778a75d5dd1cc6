//! Cluster routes.

use std::time::Duration;

use axum::{
    Json,
    extract::{Path, State},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
};
use futures::StreamExt as _;

use super::{
    AppState,
    dto::{
        ClusterDetails, ClusterInfo, ClusterList, CreateClusterResponse, CreateQuery, KeepRequest, ListQuery,
        ResumeQuery, ScaleRequest, WaitQuery,
    },
    extract::{Caller, ClusterPath, ConfigBody, JsonBody, ListCaller, QueryOf},
    problem::{ApiError, Problem},
    responses::{Bodies, Editor, EditorOfCluster, KubernetesReads, Refusals, Viewer, ViewerOfCluster},
    warnings::warning_headers,
    watch::ClusterWatchEvent,
};
use serde_json::Value;

use crate::{
    control::{Context, CreateInput, KeepInput, ResumeInput, ScaleInput},
    domain::{ClusterSpec, ClusterStatus, Error, PageRequest, Violations, limits, whole_count},
};

/// A scale body read as JSON numbers are (`1.0` is 1, `-0` is 0, `1.5` and
/// `"2"` are refused with the field). Scale is not a Krayne document, so
/// `field_validation`'s conversions of create do not apply.
fn scale_request(body: &Value) -> Result<ScaleRequest, Error> {
    let Some(map) = body.as_object() else {
        return Err(Error::invalid("", "the body must be a JSON object"));
    };
    let mut v = Violations::new();
    const FIELDS: [&str; 4] = ["worker_group", "replicas", "min_replicas", "max_replicas"];
    for key in map.keys().filter(|k| !FIELDS.contains(&k.as_str())) {
        v.push(
            key.as_str(),
            format!("unknown field; expected one of: {}", FIELDS.join(", ")),
        );
    }
    let worker_group = match map.get("worker_group") {
        Some(Value::String(g)) => g.clone(),
        None | Some(Value::Null) => {
            v.push("worker_group", "is required");
            String::new()
        }
        Some(_) => {
            v.push("worker_group", "must be a string");
            String::new()
        }
    };
    let mut count = |field: &str| match map.get(field) {
        None | Some(Value::Null) => None,
        Some(value) => whole_count(value, limits::MAX_REPLICAS)
            .map_err(|why| v.push(field, why))
            .ok(),
    };
    let (replicas, min_replicas, max_replicas) = (count("replicas"), count("min_replicas"), count("max_replicas"));
    v.into_result(ScaleRequest {
        worker_group,
        replicas,
        min_replicas,
        max_replicas,
    })
}

fn page(q: &ListQuery) -> Result<PageRequest, Error> {
    super::watch::not_watching(&q.into())?;
    PageRequest::new(q.page_size.unwrap_or(0), q.page_token.as_deref().unwrap_or(""))
}

/// A page of clusters, or with `watch=true` the stream of their changes.
async fn list_or_watch(
    s: &AppState,
    cx: &Context,
    namespace: Option<&str>,
    q: &ListQuery,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    if q.watch == Some(true) {
        let what = crate::domain::WatchedKind::Clusters;
        return Ok(super::watch::respond(&s.plane, cx, what, namespace, &q.into(), headers).await?);
    }
    let page = s.plane.list(cx, namespace, &page(q)?).await?;
    // A `ClusterList`, written from the summaries' shared JSON.
    let mut body = String::with_capacity(64 + page.items.iter().map(|c| c.json().len() + 1).sum::<usize>());
    body.push_str(r#"{"clusters":["#);
    for (i, c) in page.items.iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        body.push_str(c.json());
    }
    body.push_str(r#"],"next_page_token":"#);
    body.push_str(&serde_json::to_string(&page.next_page_token).unwrap_or_else(|_| "null".into()));
    body.push('}');
    Ok(([(axum::http::header::CONTENT_TYPE, "application/json")], body).into_response())
}

/// List (or watch) clusters in every namespace the caller may see.
///
/// Ordered by namespace, then name; namespaces without the viewer role are
/// left out rather than refused. With `watch=true`, a live stream of
/// every change instead (see the namespaced route); events of a namespace
/// whose viewer role is revoked stop, and the stream ends with an `ERROR`.
#[utoipa::path(get, path = "/v1/clusters", tag = "clusters", params(ListQuery),
    responses(
        Refusals, KubernetesReads,
        (status = 200, description = "One page of clusters; with `watch=true`, the stream of changes", content(
            (ClusterList = "application/json"),
            (ClusterWatchEvent = "application/x-ndjson"),
            (ClusterWatchEvent = "text/event-stream"),
        )),
        (status = 400, description = "Bad page size or token, or bad watch parameters", body = Problem, content_type = "application/problem+json"),
        (status = 410, description = "The watch's resource_version is no longer held: list again", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn list_all(
    State(s): State<AppState>,
    ListCaller(cx): ListCaller,
    QueryOf(q): QueryOf<ListQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    list_or_watch(&s, &cx, None, &q, &headers).await
}

/// List (or watch) the clusters of one namespace.
///
/// With `watch=true`, instead of a page: every change from now on, as
/// Kubernetes' watches give them (`ADDED`, `MODIFIED`, `DELETED` with the
/// list's summary, and a `BOOKMARK` after the start and every 30 s), as
/// NDJSON, or as Server-Sent Events when the request accepts
/// `text/event-stream` (event names in lower case, each event's version as
/// its `id`). Each event's `resource_version` resumes the watch after it;
/// a version no longer held answers 410. Served from the watch cache; too
/// many watches open answers 429, and a client that reads too slowly is
/// cut with an `ERROR` event saying so.
#[utoipa::path(get, path = "/v1/namespaces/{namespace}/clusters", tag = "clusters",
    params(("namespace" = String, Path, description = "Kubernetes namespace"), ListQuery),
    responses(
        Refusals, KubernetesReads, Viewer,
        (status = 200, description = "One page of clusters; with `watch=true`, the stream of changes", content(
            (ClusterList = "application/json"),
            (ClusterWatchEvent = "application/x-ndjson"),
            (ClusterWatchEvent = "text/event-stream"),
        )),
        (status = 400, description = "Bad page size or token, or bad watch parameters", body = Problem, content_type = "application/problem+json"),
        (status = 410, description = "The watch's resource_version is no longer held: list again", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn list(
    State(s): State<AppState>,
    ListCaller(cx): ListCaller,
    Path(namespace): Path<String>,
    QueryOf(q): QueryOf<ListQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    list_or_watch(&s, &cx, Some(&namespace), &q, &headers).await
}

/// Create a cluster from a Krayne config (JSON or YAML).
///
/// Under a quota, one that does not fit is refused (429, with the
/// numbers), or — with `queue=true`, a top-level `queue: true` in the
/// config, or a namespace that queues by default — accepted (202) to wait
/// in the namespace's line: created suspended, status `queued`, admitted
/// in order as quota frees (docs/quotas.md).
///
/// Every problem with the config is reported at once, with its field path.
/// With `dry_run=true` Kubernetes checks the manifest, nothing is created,
/// and the answer is 200 with the manifest. What `field_validation=warn`
/// accepts but reports comes back as `Warning: 299 - "<field>: <what>"`
/// headers and in the body's `warnings`.
#[utoipa::path(post, path = "/v1/namespaces/{namespace}/clusters", tag = "clusters",
    params(("namespace" = String, Path, description = "Kubernetes namespace"), CreateQuery),
    request_body(content(
        (inline(ClusterSpec) = "application/json"),
        (inline(ClusterSpec) = "application/yaml"),
    )),
    responses(
        Refusals, Bodies, Editor,
        (status = 202, description = "Accepted to wait in the namespace's line (`queue`): created suspended, status `queued`, with `queue_position` and `queue_reason`", body = CreateClusterResponse),
        (status = 201, description = "Created", body = CreateClusterResponse, headers(
            ("Warning" = String, description = "One per ignored key or converted value (`field_validation=warn`): `299 - \"<field>: <what>\"`"),
        )),
        (status = 200, description = "Dry run: checked, nothing created", body = CreateClusterResponse, headers(
            ("Warning" = String, description = "One per ignored key or converted value (`field_validation=warn`): `299 - \"<field>: <what>\"`"),
        )),
        (status = 400, description = "Invalid config or query, with every violation", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "The namespace does not exist", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "A cluster of that name exists", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Body neither JSON nor YAML", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Kubernetes or the audit log unavailable; nothing created", body = Problem, content_type = "application/problem+json"),
        (status = 504, description = "Kubernetes did not answer in time; the change may still land", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn create(
    State(s): State<AppState>,
    Caller(cx): Caller,
    Path(namespace): Path<String>,
    QueryOf(q): QueryOf<CreateQuery>,
    ConfigBody(config): ConfigBody,
) -> Result<impl IntoResponse, ApiError> {
    let dry_run = q.dry_run.unwrap_or(false);
    let field_validation = q.field_validation()?;
    let created = s
        .plane
        .create(
            &cx,
            CreateInput {
                config,
                namespace: Some(namespace),
                dry_run,
                field_validation,
                queue: q.queue,
            },
        )
        .await?;
    let status = match (dry_run, &created.cluster.status) {
        (true, _) => StatusCode::OK,
        (false, ClusterStatus::Queued) => StatusCode::ACCEPTED,
        (false, _) => StatusCode::CREATED,
    };
    let headers = warning_headers(&created.warnings);
    Ok((status, headers, Json(CreateClusterResponse::from(created))))
}

/// Get one cluster's summary.
#[utoipa::path(get, path = "/v1/namespaces/{namespace}/clusters/{name}", tag = "clusters",
    params(("namespace" = String, Path, description = "Kubernetes namespace"), ("name" = String, Path, description = "Cluster name")),
    responses(
        Refusals, KubernetesReads, ViewerOfCluster,
        (status = 400, description = "Not a namespace or cluster name Kubernetes could hold", body = Problem, content_type = "application/problem+json"),
        (status = 200, description = "The cluster", body = ClusterInfo),
    ))]
pub(super) async fn get(
    State(s): State<AppState>,
    Caller(cx): Caller,
    ClusterPath(cluster): ClusterPath,
) -> Result<Json<ClusterInfo>, ApiError> {
    Ok(Json(s.plane.get(&cx, &cluster).await?))
}

/// Delete a cluster; Kubernetes removes its pods shortly after.
#[utoipa::path(delete, path = "/v1/namespaces/{namespace}/clusters/{name}", tag = "clusters",
    params(("namespace" = String, Path, description = "Kubernetes namespace"), ("name" = String, Path, description = "Cluster name")),
    responses(
        Refusals, EditorOfCluster,
        (status = 400, description = "Not a namespace or cluster name Kubernetes could hold", body = Problem, content_type = "application/problem+json"),
        (status = 204, description = "Deleted"),
        (status = 503, description = "Kubernetes or the audit log unavailable; nothing deleted", body = Problem, content_type = "application/problem+json"),
        (status = 504, description = "Kubernetes did not answer in time; the change may still land", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn delete(
    State(s): State<AppState>,
    Caller(cx): Caller,
    ClusterPath(cluster): ClusterPath,
) -> Result<StatusCode, ApiError> {
    s.plane.delete(&cx, &cluster).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Describe a cluster: shape, services, conditions, pods and recent events.
#[utoipa::path(get, path = "/v1/namespaces/{namespace}/clusters/{name}/details", tag = "clusters",
    params(("namespace" = String, Path, description = "Kubernetes namespace"), ("name" = String, Path, description = "Cluster name")),
    responses(
        Refusals, KubernetesReads, ViewerOfCluster,
        (status = 400, description = "Not a namespace or cluster name Kubernetes could hold", body = Problem, content_type = "application/problem+json"),
        (status = 200, description = "The cluster in full", body = ClusterDetails),
    ))]
pub(super) async fn describe(
    State(s): State<AppState>,
    Caller(cx): Caller,
    ClusterPath(cluster): ClusterPath,
) -> Result<Json<ClusterDetails>, ApiError> {
    Ok(Json(s.plane.describe(&cx, &cluster).await?))
}

/// Resize one worker group.
///
/// A cluster with autoscaling changes only the counts given; one without
/// pins `min_replicas` and `max_replicas` to `replicas`, as Krayne does.
#[utoipa::path(post, path = "/v1/namespaces/{namespace}/clusters/{name}/scale", tag = "clusters",
    params(("namespace" = String, Path, description = "Kubernetes namespace"), ("name" = String, Path, description = "Cluster name")),
    request_body = ScaleRequest,
    responses(
        Refusals, Bodies, EditorOfCluster,
        (status = 200, description = "The cluster after scaling", body = ClusterInfo),
        (status = 400, description = "Invalid counts, or no such worker group (the message names the cluster's groups)", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Changed concurrently too often; retry", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Body not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Kubernetes or the audit log unavailable; nothing changed", body = Problem, content_type = "application/problem+json"),
        (status = 504, description = "Kubernetes did not answer in time; the change may still land", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn scale(
    State(s): State<AppState>,
    Caller(cx): Caller,
    ClusterPath(cluster): ClusterPath,
    JsonBody(body): JsonBody<Value>,
) -> Result<Json<ClusterInfo>, ApiError> {
    let body = scale_request(&body)?;
    let input = ScaleInput {
        worker_group: body.worker_group,
        replicas: body.replicas,
        min_replicas: body.min_replicas,
        max_replicas: body.max_replicas,
    };
    Ok(Json(s.plane.scale(&cx, &cluster, input).await?))
}

/// Suspend a cluster.
///
/// KubeRay deletes the cluster's pods and keeps the RayCluster (its state
/// turns `suspended`); a suspended cluster holds no CPUs, memory or GPUs of
/// the namespace's quota. Suspending a suspended cluster changes nothing.
#[utoipa::path(post, path = "/v1/namespaces/{namespace}/clusters/{name}/suspend", tag = "clusters",
    params(("namespace" = String, Path, description = "Kubernetes namespace"), ("name" = String, Path, description = "Cluster name")),
    responses(
        Refusals, EditorOfCluster,
        (status = 200, description = "The cluster, suspending", body = ClusterInfo),
        (status = 409, description = "Changed concurrently too often; retry", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Kubernetes or the audit log unavailable; nothing changed", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn suspend(
    State(s): State<AppState>,
    Caller(cx): Caller,
    ClusterPath(cluster): ClusterPath,
) -> Result<Json<ClusterInfo>, ApiError> {
    Ok(Json(s.plane.suspend(&cx, &cluster).await?))
}

/// Keep a cluster from its lifecycle policy.
///
/// Postpones what the namespace's lifecycle policy (`idle_after`,
/// `max_lifetime`) would do to the cluster until the time asked, at most
/// the policy's `keep_max` from now; its warning goes, and `kept_until`
/// says until when. Body: `{"for": "4h"}` or `{"until": "<RFC 3339>"}`.
#[utoipa::path(post, path = "/v1/namespaces/{namespace}/clusters/{name}/keep", tag = "clusters",
    params(("namespace" = String, Path, description = "Kubernetes namespace"), ("name" = String, Path, description = "Cluster name")),
    request_body = KeepRequest,
    responses(
        Refusals, EditorOfCluster,
        (status = 200, description = "The cluster, kept", body = ClusterInfo),
        (status = 400, description = "Neither or both of `for` and `until`, a bad duration or time, one in the past, or past the policy's `keep_max`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The namespace has no lifecycle policy, or its policy lets no one keep clusters (no `keep_max`)", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Body not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Kubernetes or the audit log unavailable; nothing changed", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn keep(
    State(s): State<AppState>,
    Caller(cx): Caller,
    ClusterPath(cluster): ClusterPath,
    JsonBody(body): JsonBody<Value>,
) -> Result<Json<ClusterInfo>, ApiError> {
    let body = keep_request(&body)?;
    let input = KeepInput {
        for_: body.for_,
        until: body.until,
    };
    Ok(Json(s.plane.keep(&cx, &cluster, &input).await?))
}

/// The keep body, each field checked.
fn keep_request(body: &Value) -> Result<KeepRequest, Error> {
    let Some(map) = body.as_object() else {
        return Err(Error::invalid("", "the body must be a JSON object"));
    };
    let mut v = Violations::new();
    for key in map.keys().filter(|k| !matches!(k.as_str(), "for" | "until")) {
        v.push(key.as_str(), "unknown field; expected one of: for, until");
    }
    let mut text = |field: &str| match map.get(field) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            v.push(field, "must be a string");
            None
        }
    };
    let keep = KeepRequest {
        for_: text("for"),
        until: text("until"),
    };
    v.into_result(keep)
}

/// Resume a suspended cluster.
///
/// KubeRay creates the cluster's pods again; wait for `ready` with
/// `…/wait`. Under a quota its pods are admitted as a create's are: 429
/// with the numbers when they would not fit, or, with `queue=true` (or a
/// namespace that queues by default), 202 and a place in the namespace's
/// line (status `queued`). Resuming a running cluster, or one already in
/// line with `queue=true`, changes nothing; resuming one in line without
/// it admits it at once if it fits.
#[utoipa::path(post, path = "/v1/namespaces/{namespace}/clusters/{name}/resume", tag = "clusters",
    params(("namespace" = String, Path, description = "Kubernetes namespace"), ("name" = String, Path, description = "Cluster name"), ResumeQuery),
    responses(
        Refusals, EditorOfCluster,
        (status = 200, description = "The cluster, resuming", body = ClusterInfo),
        (status = 202, description = "The cluster, waiting in its namespace's line (`queue_position`, `queue_reason`)", body = ClusterInfo),
        (status = 409, description = "Changed while being admitted; retry", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Its pods would not fit the namespace's quota (`quota_violations` names the numbers), or over the caller's rate", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Kubernetes or the audit log unavailable; nothing changed", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn resume(
    State(s): State<AppState>,
    Caller(cx): Caller,
    ClusterPath(cluster): ClusterPath,
    QueryOf(q): QueryOf<ResumeQuery>,
) -> Result<(StatusCode, Json<ClusterInfo>), ApiError> {
    let resumed = s.plane.resume(&cx, &cluster, ResumeInput { queue: q.queue }).await?;
    let status = if resumed.status == ClusterStatus::Queued {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(resumed)))
}

/// Wait until a cluster is ready (long poll).
///
/// Answers 200 with the cluster once its status is `ready` and every desired
/// worker is ready (so also after a scale-up), 504 naming the last status
/// seen when the timeout passes first, or 409 as soon as the head is stuck
/// where it does not get out by itself (its image cannot be pulled, it
/// crashed three times, no node has had room for it for a while), naming
/// the reason.
#[utoipa::path(get, path = "/v1/namespaces/{namespace}/clusters/{name}/wait", tag = "clusters",
    params(("namespace" = String, Path, description = "Kubernetes namespace"), ("name" = String, Path, description = "Cluster name"), WaitQuery),
    responses(
        Refusals, Viewer,
        (status = 200, description = "The cluster, ready", body = ClusterInfo),
        (status = 400, description = "Bad timeout", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such cluster (or it was deleted while waiting)", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The head will not get ready by itself: why (the image, the crashes, the room)", body = Problem, content_type = "application/problem+json"),
        (status = 504, description = "Not ready in time", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Kubernetes unreachable", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn wait(
    State(s): State<AppState>,
    Caller(cx): Caller,
    ClusterPath(cluster): ClusterPath,
    QueryOf(q): QueryOf<WaitQuery>,
) -> Result<Json<ClusterInfo>, ApiError> {
    let timeout = q.timeout_seconds.map(Duration::from_secs);
    let mut updates = s.plane.wait(&cx, &cluster, timeout).await?;
    let mut last = None;
    while let Some(update) = updates.next().await {
        last = Some(update?);
    }
    last.map(Json)
        .ok_or_else(|| Error::Internal("the wait ended without a status".into()).into())
}
