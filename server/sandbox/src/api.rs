//! The simulated Kubernetes REST API over the [`Store`].

use std::{collections::HashMap, convert::Infallible, sync::Arc, time::Duration};

use axum::{
    Json, Router,
    body::{Body, Bytes},
    extract::{Path, Query, Request, State},
    http::{HeaderMap, Method, StatusCode, header},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::{any, get},
};
use futures::StreamExt as _;
use serde_json::{Value, json};
use tokio::sync::{broadcast::error::RecvError, mpsc};
use tokio_stream::wrappers::ReceiverStream;

use super::{
    ApiError, Resource, discovery,
    selector::{FieldSelector, LabelSelector},
    state::{ApiState, RequestRecord, SERVICE_ACCOUNT_USER, Shared},
    store::{Change, Patch, Store, WriteOpts, packed_text},
};

/// The API's routes.
pub(super) fn router(state: Shared) -> Router {
    Router::new()
        .route(
            "/version",
            get(|State(s): State<Shared>| async move { Json(discovery::version(s.watch_list)) }),
        )
        .route(
            "/api",
            get(|State(s): State<Shared>| async move { Json(discovery::core_versions(&s.address)) }),
        )
        .route("/api/v1", get(|| async { Json(discovery::resources("")) }))
        .route("/apis", get(|| async { Json(discovery::groups()) }))
        .route("/apis/ray.io", get(|| async { Json(discovery::ray_group_doc()) }))
        .route(
            "/apis/ray.io/v1",
            get(|| async { Json(discovery::resources("ray.io")) }),
        )
        .route("/api/v1/{plural}", any(resource))
        .route("/api/v1/namespaces/{name}", any(resource))
        .route("/api/v1/namespaces/{ns}/{plural}", any(resource))
        .route("/api/v1/namespaces/{ns}/{plural}/{name}", any(resource))
        .route("/api/v1/namespaces/{ns}/pods/{name}/log", get(crate::pod_logs::handle))
        .route(
            "/api/v1/namespaces/{ns}/serviceaccounts/{name}/token",
            axum::routing::post(crate::service_account_tokens::token_request),
        )
        .route(
            "/.well-known/openid-configuration",
            get(crate::service_account_tokens::discovery),
        )
        .route("/openid/v1/jwks", get(crate::service_account_tokens::jwks))
        .route(
            "/api/v1/namespaces/{ns}/pods/{name}/portforward",
            get(crate::portforward::handle).post(crate::portforward::handle),
        )
        .route("/api/v1/namespaces/{ns}/{plural}/{name}/{sub}", any(resource))
        .route(
            "/apis/kueue.x-k8s.io",
            get(|| async { Json(discovery::kueue_group_doc()) }),
        )
        .route(
            "/apis/kueue.x-k8s.io/v1beta2",
            get(|| async { Json(discovery::resources("kueue.x-k8s.io")) }),
        )
        .route(
            "/apis/visibility.kueue.x-k8s.io/{version}/namespaces/{ns}/localqueues/{name}/pendingworkloads",
            get(crate::kueue::pending_workloads),
        )
        .route("/apis/{group}/{version}/{plural}", any(resource))
        .route("/apis/{group}/{version}/{plural}/{name}", any(resource))
        .route("/apis/{group}/{version}/namespaces/{ns}/{plural}", any(resource))
        .route("/apis/{group}/{version}/namespaces/{ns}/{plural}/{name}", any(resource))
        .route(
            "/apis/{group}/{version}/namespaces/{ns}/{plural}/{name}/{sub}",
            any(resource),
        )
        .route(
            "/apis/authentication.k8s.io/v1/tokenreviews",
            axum::routing::post(crate::service_account_tokens::token_review),
        )
        .route(
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            axum::routing::post(crate::access_review::review),
        )
        .merge(crate::crds::router())
        .fallback(|| async { ApiError::not_found_path() })
        .layer(middleware::from_fn_with_state(state.clone(), record))
        .with_state(state)
}

async fn record(State(s): State<Shared>, req: Request, next: Next) -> Response {
    let entry = RequestRecord {
        method: req.method().to_string(),
        uri: req.uri().to_string(),
        request_id: req
            .headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        creates: false,
    };
    let applies = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/apply-patch"));
    let mut entry = entry;
    entry.creates = applies && entry.method == "PATCH" && !exists(&s.store, &entry);
    let accesses = entry.accesses();
    s.requests.lock().unwrap_or_else(|p| p.into_inner()).push(entry);
    let latency = *s.latency.borrow();
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    for access in accesses {
        if let Some(grants) = &s.grants
            && !grants.allows(&access)
        {
            return match access {
                crate::Access::Resource {
                    group,
                    resource,
                    subresource,
                    verb,
                    namespace,
                } => {
                    let rbac_name = subresource.map_or(resource.clone(), |sub| format!("{resource}/{sub}"));
                    ApiError::forbidden(SERVICE_ACCOUNT_USER, &verb, &group, &rbac_name, namespace.as_deref())
                }
                crate::Access::NonResource { path, verb } => {
                    ApiError::forbidden(SERVICE_ACCOUNT_USER, &verb, "", &path, None)
                }
            }
            .into_response();
        }
        let crate::Access::Resource {
            group,
            resource,
            subresource,
            verb,
            namespace,
        } = access
        else {
            continue;
        };
        // RBAC names a subresource `pods/portforward`; a rule for `pods`
        // does not cover it.
        let rbac_name = match subresource {
            Some(sub) => format!("{resource}/{sub}"),
            None => resource,
        };
        let refused = s
            .forbidden
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .any(|(v, r)| *v == verb && *r == rbac_name);
        if refused {
            return ApiError::forbidden(SERVICE_ACCOUNT_USER, &verb, &group, &rbac_name, namespace.as_deref())
                .into_response();
        }
    }
    counted(next.run(req).await, &s.bytes_served)
}

/// `response` with its body's bytes added to `total` as they are sent.
/// Upgrades (port-forward, exec) carry their bytes outside the body.
fn counted(response: Response, total: &Arc<std::sync::atomic::AtomicU64>) -> Response {
    if response.status() == StatusCode::SWITCHING_PROTOCOLS {
        return response;
    }
    let total = total.clone();
    let (parts, body) = response.into_parts();
    let body = body.into_data_stream().inspect(move |chunk| {
        if let Ok(bytes) = chunk {
            total.fetch_add(
                u64::try_from(bytes.len()).unwrap_or(u64::MAX),
                std::sync::atomic::Ordering::Relaxed,
            );
        }
    });
    Response::from_parts(parts, Body::from_stream(body))
}

/// Whether the object a named request addresses is there.
fn exists(store: &Store, entry: &RequestRecord) -> bool {
    let crate::Access::Resource {
        group,
        resource,
        namespace,
        subresource: None,
        ..
    } = entry.access()
    else {
        return true;
    };
    let path = entry.uri.split('?').next().unwrap_or("");
    let name = path.rsplit('/').next().unwrap_or("");
    Resource::from_plural(&group, &resource)
        .is_none_or(|r| store.get(r, namespace.as_deref().unwrap_or(""), name).is_ok())
}

/// What a request addresses.
struct Target {
    resource: Resource,
    /// Namespace; `None` for cluster-scoped or all-namespace requests.
    ns: Option<String>,
    name: Option<String>,
    status: bool,
}

fn resolve(group: &str, version: &str, plural: &str) -> Result<Resource, ApiError> {
    match Resource::from_plural(group, plural) {
        Some(r) if r.api_version().rsplit('/').next() == Some(version) => Ok(r),
        _ => Err(ApiError::not_found_path()),
    }
}

fn subresource(r: Resource, sub: &str) -> Result<bool, ApiError> {
    if sub == "status" && r.has_status_subresource() {
        Ok(true)
    } else {
        Err(ApiError::not_found_path())
    }
}

type Q = Query<HashMap<String, String>>;

/// Every resource route: the path parameters say what is addressed.
async fn resource(
    State(s): State<Shared>,
    Path(params): Path<HashMap<String, String>>,
    method: Method,
    query: Q,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    dispatch(s, target(&params), method, query, headers, body).await
}

fn target(params: &HashMap<String, String>) -> Result<Target, ApiError> {
    let get = |k: &str| params.get(k).cloned();
    let group = get("group").unwrap_or_default();
    let version = get("version").unwrap_or_else(|| "v1".to_owned());
    // `/api/v1/namespaces/{name}` is the one route without `{plural}`.
    let plural = get("plural").unwrap_or_else(|| "namespaces".to_owned());
    let resource = resolve(&group, &version, &plural)?;
    let status = match params.get("sub") {
        Some(sub) => subresource(resource, sub)?,
        None => false,
    };
    Ok(Target {
        resource,
        ns: get("ns"),
        name: get("name"),
        status,
    })
}

async fn dispatch(
    s: Shared,
    target: Result<Target, ApiError>,
    method: Method,
    Query(q): Q,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match target.and_then(|t| handle(&s, t, &method, &q, &headers, &body)) {
        Ok(Reply::Object(code, v)) => (code, Json(v)).into_response(),
        Ok(Reply::Encoded(body)) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Ok(Reply::Watch(w)) => watch_response(&s, w),
        Err(e) => e.into_response(),
    }
}

enum Reply {
    Object(StatusCode, Value),
    /// A 200 whose JSON is written already (a list).
    Encoded(Vec<u8>),
    Watch(WatchRequest),
}

struct WatchRequest {
    resource: Resource,
    ns: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
    from: Option<u64>,
    bookmarks: bool,
    /// Stream the current objects first, then a bookmark annotated
    /// `k8s.io/initial-events-end` (`sendInitialEvents=true`).
    initial_events: bool,
    timeout: Option<Duration>,
}

fn parse_json(body: &Bytes) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}")))
}

fn handle(
    s: &ApiState,
    t: Target,
    method: &Method,
    q: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Reply, ApiError> {
    let store = &s.store;
    let r = t.resource;
    let ns_key = if r.namespaced() {
        t.ns.clone().unwrap_or_default()
    } else {
        String::new()
    };
    let flag = |k: &str| q.get(k).is_some_and(|v| v == "true" || v == "1");
    let ok = |v: &Value| Ok(Reply::Object(StatusCode::OK, v.clone()));
    match (t.name.as_deref(), method) {
        (None, &Method::GET) => {
            let labels = LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str))
                .map_err(ApiError::bad_request)?;
            let fields = FieldSelector::parse(q.get("fieldSelector").map_or("", String::as_str))
                .map_err(ApiError::bad_request)?;
            let ns = t.ns.filter(|_| r.namespaced());
            if flag("watch") {
                let from = match q.get("resourceVersion").map(String::as_str) {
                    None | Some("") => None,
                    Some(v) => Some(
                        v.parse()
                            .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {v:?}")))?,
                    ),
                };
                let timeout = q
                    .get("timeoutSeconds")
                    .and_then(|v| v.parse().ok())
                    .map(Duration::from_secs);
                let initial_events = flag("sendInitialEvents");
                if initial_events {
                    check_initial_events(s.watch_list, q, from)?;
                }
                return Ok(Reply::Watch(WatchRequest {
                    resource: r,
                    ns,
                    labels,
                    fields,
                    // "Not older than" a version the sandbox always has.
                    from: if initial_events { None } else { from },
                    bookmarks: flag("allowWatchBookmarks"),
                    initial_events,
                    timeout,
                }));
            }
            // An API server before Kubernetes 1.33 serves a list at
            // `resourceVersion=0` from its watch cache, whole, whatever the
            // `limit` (the sandbox without WatchList says it is 1.31).
            let from_watch_cache = !s.watch_list && q.get("resourceVersion").is_some_and(|v| v == "0");
            let limit = match q.get("limit").map(String::as_str) {
                _ if from_watch_cache => None,
                None | Some("" | "0") => None,
                Some(v) => Some(
                    v.parse::<usize>()
                        .map_err(|_| ApiError::bad_request(format!("invalid limit {v:?}")))?,
                ),
            };
            let from = match q.get("continue").map(String::as_str) {
                None | Some("") => None,
                Some(token) => Some(Continue::parse(token)?),
            };
            let after = from.as_ref().map(|c| (c.namespace.as_str(), c.name.as_str()));
            let unselective = labels.is_empty() && fields.is_empty();
            let page = store.page(
                r,
                ns.as_deref(),
                |o| selected(o, &labels, &fields),
                after,
                limit,
                unselective,
            );
            // Every page carries the first page's version, as the API server's
            // do: a watch from it replays what changed while paging.
            let rv = from.as_ref().map_or(page.rv, |c| c.rv);
            let mut metadata = json!({"resourceVersion": rv.to_string()});
            if let Some((namespace, name)) = page.more {
                metadata["continue"] = json!(Continue { rv, namespace, name }.to_string());
            }
            if let Some(remaining) = page.remaining {
                metadata["remainingItemCount"] = json!(remaining);
            }
            Ok(Reply::Encoded(list_body(r, &metadata, &page.items)))
        }
        (None, &Method::POST) if t.ns.is_some() || !r.namespaced() => {
            let opts = WriteOpts {
                dry_run: q.get("dryRun").is_some_and(|v| v == "All"),
                keep_status: false,
                packed: false,
            };
            let mut object = parse_json(body)?;
            // Kueue's webhook: a RayCluster for a queue starts suspended.
            crate::kueue::default_on_create(r, &mut object);
            let created = store.create(r, &ns_key, object, opts)?;
            Ok(Reply::Object(StatusCode::CREATED, (*created).clone()))
        }
        (Some(name), &Method::GET) => ok(&*store.get(r, &ns_key, name)?),
        (Some(name), &Method::PUT) => ok(&*store.replace(r, &ns_key, name, parse_json(body)?, t.status)?),
        (Some(name), &Method::PATCH) => {
            let content_type = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            let media = content_type.split(';').next().unwrap_or("").trim();
            let manager = q.get("fieldManager").filter(|m| !m.is_empty()).cloned();
            let merge = |patch: Value| match manager.clone() {
                Some(manager) => Patch::MergeBy { patch, manager },
                None => Patch::Merge(patch),
            };
            let patch = match media {
                "application/merge-patch+json" => merge(parse_json(body)?),
                // Built-in types take strategic merge patches; for the fields
                // the sandbox has, a merge patch does the same.
                "application/strategic-merge-patch+json" if !r.is_custom() => merge(parse_json(body)?),
                // Server-side apply for what needs it: Leases (leader
                // election), the NetworkPolicies and Secrets krayne keeps
                // beside clusters. JSON is YAML: kube sends its applies as
                // JSON.
                "application/apply-patch+yaml"
                    if matches!(r, Resource::Lease | Resource::NetworkPolicy | Resource::Secret) =>
                {
                    Patch::Apply {
                        patch: serde_saphyr::from_slice(body)
                            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?,
                        manager: manager.ok_or_else(|| {
                            ApiError::bad_request("PATCH with apply requires a fieldManager query parameter")
                        })?,
                        force: q.get("force").is_some_and(|f| f == "true"),
                    }
                }
                "application/json-patch+json" => Patch::Json(
                    serde_json::from_slice(body)
                        .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?,
                ),
                other => return Err(ApiError::unsupported_media_type(other)),
            };
            ok(&*store.patch(r, &ns_key, name, &patch, t.status)?)
        }
        (Some(name), &Method::DELETE) if !t.status => {
            let options = if body.is_empty() {
                Value::Null
            } else {
                parse_json(body)?
            };
            ok(&*store.delete_if(r, &ns_key, name, &options)?)
        }
        _ => Err(ApiError::method_not_allowed(format!("{method} is not supported here"))),
    }
}

/// What kube-apiserver's `ValidateListOptions` requires of a watch with
/// `sendInitialEvents=true`, or its refusal where WatchList is off.
fn check_initial_events(watch_list: bool, q: &HashMap<String, String>, from: Option<u64>) -> Result<(), ApiError> {
    if !watch_list {
        return Err(ApiError::invalid_options(&[
            "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled".into(),
        ]));
    }
    let mut problems = Vec::new();
    if q.get("resourceVersionMatch").map(String::as_str) != Some("NotOlderThan") {
        problems.push(
            "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
                .into(),
        );
    }
    if q.get("allowWatchBookmarks").map(String::as_str) != Some("true") {
        problems.push(
            "allowWatchBookmarks: Forbidden: sendInitialEvents requires setting allowWatchBookmarks to true".into(),
        );
    }
    if from.is_some_and(|v| v != 0) {
        problems.push("resourceVersion: Invalid value: the sandbox streams its current objects only (resourceVersion \"\" or \"0\")".into());
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid_options(&problems))
    }
}

/// A list's `continue` token: the first page's version and the last
/// object sent. Opaque to clients; namespaces and names never hold `/`.
struct Continue {
    rv: u64,
    namespace: String,
    name: String,
}

impl Continue {
    fn parse(token: &str) -> Result<Self, ApiError> {
        let invalid = || ApiError::bad_request(format!("invalid continue token {token:?}"));
        let mut parts = token.splitn(3, '/');
        let (Some(rv), Some(namespace), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(invalid());
        };
        Ok(Self {
            rv: rv.parse().map_err(|_| invalid())?,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        })
    }
}

impl std::fmt::Display for Continue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.rv, self.namespace, self.name)
    }
}

fn selected(o: &Value, labels: &LabelSelector, fields: &FieldSelector) -> bool {
    let l: std::collections::BTreeMap<String, String> =
        serde_json::from_value(o["metadata"]["labels"].clone()).unwrap_or_default();
    labels.matches(&l) && fields.matches(o)
}

fn event_line(kind: &str, object: &Value) -> Bytes {
    let mut line = format!("{{\"type\":\"{kind}\",\"object\":").into_bytes();
    write_object(&mut line, object);
    line.extend_from_slice(b"}\n");
    Bytes::from(line)
}

/// `object`'s JSON (a packed object's own text) appended to `out`.
fn write_object(out: &mut Vec<u8>, object: &Value) {
    match packed_text(object) {
        Some(text) => out.extend_from_slice(text.as_bytes()),
        None => {
            let _ = serde_json::to_writer(&mut *out, object);
        }
    }
}

/// A list's body, written object by object rather than copied into one
/// tree first.
fn list_body(r: Resource, metadata: &Value, items: &[Arc<Value>]) -> Vec<u8> {
    let mut out = format!(
        "{{\"kind\":\"{}List\",\"apiVersion\":\"{}\",\"metadata\":{metadata},\"items\":[",
        r.kind(),
        r.api_version()
    )
    .into_bytes();
    for (i, o) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_object(&mut out, o);
    }
    out.extend_from_slice(b"]}");
    out
}

fn watch_response(s: &ApiState, w: WatchRequest) -> Response {
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    // A streamed initial list: the objects as of `now`, then what changed
    // after (replayed from the history), as one consistent stream.
    let mut w = w;
    let mut initial = Vec::new();
    if w.initial_events {
        let (items, now) = s
            .store
            .list(w.resource, w.ns.as_deref(), |o| selected(o, &w.labels, &w.fields));
        initial = items;
        w.from = Some(now);
    }
    match s.store.watch(w.resource, w.from) {
        Err(gone) => {
            // As the real API server: 200, then one ERROR event.
            let _ = tx.try_send(event_line("ERROR", &gone.to_status()));
        }
        Ok((first, receiver)) => {
            let store = s.store.clone();
            let interval = s.bookmark_interval;
            let disconnect = s.disconnect.subscribe();
            tokio::spawn(async move {
                if send_initial_events(&w, initial, &tx).await {
                    stream_changes(store, w, (first, receiver), tx, interval, disconnect).await;
                }
            });
        }
    }
    let stream = ReceiverStream::new(rx).map(Ok::<_, Infallible>);
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// Sends `objects` as ADDED, then the bookmark that ends them (at the
/// watch's starting version), when the watch asked for initial events.
/// `false` when the client went away.
async fn send_initial_events(w: &WatchRequest, objects: Vec<Arc<Value>>, tx: &mpsc::Sender<Bytes>) -> bool {
    if !w.initial_events {
        return true;
    }
    for object in objects {
        if tx.send(event_line("ADDED", &object)).await.is_err() {
            return false;
        }
    }
    let rv = w.from.unwrap_or(0).to_string();
    let bookmark = json!({"kind": w.resource.kind(), "apiVersion": w.resource.api_version(),
                          "metadata": {"resourceVersion": rv,
                                       "annotations": {"k8s.io/initial-events-end": "true"}}});
    tx.send(event_line("BOOKMARK", &bookmark)).await.is_ok()
}

async fn stream_changes(
    store: Arc<Store>,
    w: WatchRequest,
    (first, mut receiver): (Vec<Arc<Change>>, tokio::sync::broadcast::Receiver<Arc<Change>>),
    tx: mpsc::Sender<Bytes>,
    bookmark_every: Duration,
    mut disconnect: tokio::sync::watch::Receiver<u64>,
) {
    let wanted = |c: &Change| {
        c.resource == w.resource
            && w.ns.as_deref().is_none_or(|ns| ns == c.namespace())
            && selected(&c.object, &w.labels, &w.fields)
    };
    let mut last_rv = w.from.unwrap_or(0);
    for c in first.iter().filter(|c| wanted(c)) {
        last_rv = last_rv.max(c.rv);
        if tx.send(event_line(c.kind.as_str(), &c.object)).await.is_err() {
            return;
        }
    }
    let deadline = tokio::time::sleep(w.timeout.unwrap_or(Duration::from_secs(1800)));
    tokio::pin!(deadline);
    let mut bookmark = tokio::time::interval(bookmark_every);
    bookmark.reset();
    loop {
        tokio::select! {
            change = receiver.recv() => match change {
                Ok(c) if c.rv <= last_rv => {}
                Ok(c) if wanted(&c) => {
                    last_rv = c.rv;
                    if tx.send(event_line(c.kind.as_str(), &c.object)).await.is_err() {
                        return;
                    }
                }
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => {
                    let _ = tx.send(event_line("ERROR", &ApiError::gone(last_rv).to_status())).await;
                    return;
                }
                Err(RecvError::Closed) => return,
            },
            _ = bookmark.tick(), if w.bookmarks => {
                let rv = store.resource_version();
                let object = json!({"kind": w.resource.kind(), "apiVersion": w.resource.api_version(),
                                    "metadata": {"resourceVersion": rv.to_string()}});
                if tx.send(event_line("BOOKMARK", &object)).await.is_err() {
                    return;
                }
            }
            () = &mut deadline => return,
            () = tx.closed() => return,
            _ = disconnect.changed() => return,
        }
    }
}
