//! The HTTP proxy to a cluster's HTTP services (dashboard, notebook,
//! code-server) under `/v1/namespaces/{ns}/clusters/{name}/services/{svc}/proxy/`:
//! any method, bodies streamed both ways, WebSocket upgrades passed
//! through, hop-by-hop headers dropped, the caller's `Authorization` and
//! krayne's cookies never forwarded, `X-Forwarded-*` set, and the
//! service's redirects kept under the prefix. For editors only: with a
//! bearer token each request is its own audited connection
//! (`service.connect`, via `proxy`); in a browser session (a cookie for
//! this service, see `sessions`) the session was audited when it began,
//! each request re-checks its caller against the current mapping, and
//! requests reuse the caller's idle connections to the service
//! (`upstreams`).

use std::{collections::HashMap, time::Duration};

use axum::{
    Router,
    body::Body,
    extract::{Path, Request, State},
    http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Uri, header, request::Parts},
    response::{IntoResponse, Redirect, Response},
    routing::any,
};
use futures::StreamExt as _;
use hyper_util::rt::TokioIo;

use hyper::body::Incoming;
use tokio::task::AbortHandle;

use super::{
    AppState,
    problem::{ApiError, Problem},
    sessions::session_cookies,
    upstreams::{Key, ReturnsAtEnd, Upstream},
};
use crate::{
    domain::{Error, PublicUrl, audit::Transport},
    edge,
    service::{Context, Reachable, TunnelVia, proxy_path},
};

/// The proxy's path, without the trailing slash.
const PREFIX: &str = "/v1/namespaces/{namespace}/clusters/{name}/services/{service}/proxy";

/// Headers that belong to one connection, never forwarded (RFC 9110 §7.6.1).
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// The proxy's routes (outside the API's body limits, timeouts and
/// compression: bodies stream through as they are).
pub(super) fn router(state: AppState) -> Router {
    Router::new()
        .route(PREFIX, any(add_slash))
        .route(&format!("{PREFIX}/"), any(proxy))
        .route(&format!("{PREFIX}/{{*path}}"), any(proxy))
        .with_state(state)
}

/// `…/proxy` → `…/proxy/`: pages with relative links (the Ray dashboard's)
/// need the slash.
async fn add_slash(State(s): State<AppState>, uri: Uri) -> Redirect {
    let query = uri.query().map(|q| format!("?{q}")).unwrap_or_default();
    let public = s.service.public_url().map_or("", PublicUrl::prefix);
    Redirect::permanent(&format!("{public}{}/{query}", uri.path()))
}

/// Whether a client asks to upgrade the connection (a WebSocket).
fn wants_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE)
        && headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("upgrade")))
}

/// Drops hop-by-hop headers (and those `Connection` names); keeps the
/// upgrade pair when `upgrade`.
fn drop_hop_by_hop(headers: &mut HeaderMap, upgrade: bool) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|t| HeaderName::try_from(t.trim()).ok())
        .collect();
    let upgrade_value = headers.get(header::UPGRADE).cloned();
    for name in named.iter().chain(&HOP_BY_HOP.map(HeaderName::from_static)) {
        headers.remove(name);
    }
    if let (true, Some(value)) = (upgrade, upgrade_value) {
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        headers.insert(header::UPGRADE, value);
    }
}

/// The `Cookie` header without krayne's own cookies.
fn foreign_cookies(headers: &HeaderMap) -> Option<HeaderValue> {
    let kept: Vec<&str> = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .map(str::trim)
        .filter(|c| !c.is_empty() && !c.to_ascii_lowercase().starts_with("krayne"))
        .collect();
    (!kept.is_empty())
        .then(|| HeaderValue::from_str(&kept.join("; ")).ok())
        .flatten()
}

/// A service's redirect, kept under the proxy's prefix.
fn rewrite_location(location: &str, prefix: &str) -> String {
    if location.starts_with('/') && !location.starts_with("//") && !location.starts_with(prefix) {
        format!("{prefix}{location}")
    } else {
        location.to_owned()
    }
}

/// The caller of a proxied request: its bearer token when it sends one
/// (`curl`, scripts), else its session cookie for this very service (a
/// browser). A session's requests are not audited one by one.
async fn caller(
    s: &AppState,
    namespace: &str,
    name: &str,
    service: &str,
    parts: &Parts,
) -> Result<(Context, TunnelVia), Error> {
    let sessions = session_cookies(&parts.headers);
    if parts.headers.contains_key(header::AUTHORIZATION) || sessions.is_empty() {
        let several = Error::invalid("authorization", "send one Authorization header, not several");
        let cx = edge::authenticate(
            &s.service,
            &s.auth,
            &parts.headers,
            &parts.extensions,
            Transport::Rest,
            several,
        )
        .await?;
        return Ok((cx, TunnelVia::Proxy));
    }
    let meta = edge::request_meta(&parts.headers, &parts.extensions, Transport::Rest);
    let values: Vec<&str> = sessions.iter().map(String::as_str).collect();
    let cx = s
        .service
        .session_caller(&meta, namespace, name, service, &values)
        .await?;
    Ok((cx, TunnelVia::Session))
}

/// Where a proxied request goes, and how its browser sees the service.
pub(super) struct Target {
    /// Namespace.
    pub namespace: String,
    /// Cluster.
    pub name: String,
    /// Service.
    pub service: String,
    /// The path and query to ask the service for.
    pub upstream: String,
    /// What the browser sees in front of the service's paths
    /// (`X-Forwarded-Prefix`); none on a service's own host.
    pub browser_prefix: Option<String>,
    /// Prefix the service's redirects to absolute paths get (a service
    /// that serves at `/` behind the path prefix); none when the service
    /// already knows where it is (Jupyter's base URL, its own host).
    pub redirect_prefix: Option<String>,
}

/// How a proxied request's body is coming along.
struct Upload {
    started: std::time::Instant,
    /// Milliseconds after `started` of the last frame.
    last: std::sync::atomic::AtomicU64,
    finished: std::sync::atomic::AtomicBool,
}

impl Upload {
    fn millis(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Resolves once the body has paused for `idle` without finishing;
    /// never once it has finished.
    async fn stalled(&self, idle: Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        let idle_ms = u64::try_from(idle.as_millis()).unwrap_or(u64::MAX);
        while !self.finished.load(Relaxed) {
            let quiet = self.millis().saturating_sub(self.last.load(Relaxed));
            if quiet >= idle_ms {
                return;
            }
            tokio::time::sleep(Duration::from_millis((idle_ms - quiet).max(10))).await;
        }
        std::future::pending().await
    }
}

/// `body`, watched: each frame and its end are noted (the proxy cuts an
/// upload that stalls, whatever the service does meanwhile).
fn watched(body: Body) -> (Body, std::sync::Arc<Upload>) {
    use std::sync::atomic::Ordering::Relaxed;
    let upload = std::sync::Arc::new(Upload {
        started: std::time::Instant::now(),
        last: 0.into(),
        finished: false.into(),
    });
    // No body stays no body (a GET must not grow a chunked one).
    if http_body::Body::is_end_stream(&body) {
        upload.finished.store(true, Relaxed);
        return (body, upload);
    }
    let (seen, ended) = (upload.clone(), upload.clone());
    let frames = body
        .into_data_stream()
        .inspect(move |_| seen.last.store(seen.millis(), Relaxed));
    let end = futures::stream::once(async move {
        ended.finished.store(true, Relaxed);
        None
    })
    .filter_map(std::future::ready);
    (Body::from_stream(frames.chain(end)), upload)
}

/// The path-mode proxy: `…/services/{svc}/proxy/{path}`.
async fn proxy(
    State(s): State<AppState>,
    Path(params): Path<HashMap<String, String>>,
    request: Request,
) -> Result<Response, ApiError> {
    let param = |k: &str| params.get(k).cloned().unwrap_or_default();
    let (namespace, name, service) = (param("namespace"), param("name"), param("service"));
    let prefix = proxy_path(&namespace, &name, &service);
    // Behind an ingress's prefix the browser sees more path than we do.
    let public = s.service.public_url().map_or("", PublicUrl::prefix);
    let browser_prefix = format!("{public}{prefix}");
    let path_and_query = request.uri().path_and_query().map_or("/", |p| p.as_str());
    // Jupyter serves under its base URL (the proxy's path as the browser
    // sees it): the whole path goes through. The others serve at `/`:
    // the prefix comes off.
    let keeps_prefix = service == "notebook";
    let upstream = if keeps_prefix {
        format!("{public}{path_and_query}")
    } else {
        let rest = path_and_query.strip_prefix(prefix.as_str()).unwrap_or(path_and_query);
        if rest.starts_with('/') {
            rest.to_owned()
        } else {
            format!("/{rest}")
        }
    };
    let target = Target {
        namespace,
        name,
        service,
        upstream,
        redirect_prefix: (!keeps_prefix).then(|| browser_prefix.clone()),
        browser_prefix: Some(browser_prefix),
    };
    forward(&s, target, request).await
}

/// Opens a new HTTP/1 connection to a reachable service for `cx`.
async fn dial(s: &AppState, cx: &Context, reachable: Reachable) -> Result<Upstream, Error> {
    let service = reachable.service().to_owned();
    let connection = s.service.connect(cx, reachable).await?.into_connection();
    let (sender, conn) = hyper::client::conn::http1::Builder::new()
        .handshake(TokioIo::new(connection))
        .await
        .map_err(|e| did_not_answer(&service, &e))?;
    let task = tokio::spawn(conn.with_upgrades()).abort_handle();
    Ok(Upstream { sender, task })
}

fn did_not_answer(service: &str, e: &hyper::Error) -> Error {
    Error::Unavailable(format!("service {service} did not answer: {e}"))
}

/// Sends `request` to the service: in a browser session (`pool` set) on
/// an idle connection of the caller's to the same pod when there is one
/// (once more on a new connection if that one closed before taking it),
/// else on a new connection. `task` holds the connection's task while the
/// exchange runs.
async fn exchange(
    s: &AppState,
    cx: &Context,
    reachable: Reachable,
    pool: Option<&Key>,
    request: hyper::Request<Body>,
    task: &std::sync::Mutex<Option<AbortHandle>>,
) -> Result<(hyper::Response<Incoming>, Upstream), Error> {
    let service = reachable.service().to_owned();
    let hold = |upstream: &Upstream| {
        *task.lock().unwrap_or_else(|p| p.into_inner()) = Some(upstream.task.clone());
    };
    let mut request = request;
    if let Some(mut idle) = pool.and_then(|key| s.upstreams.take(key)) {
        hold(&idle);
        // It may still be winding up its last exchange.
        let ready = tokio::time::timeout(Duration::from_secs(1), idle.sender.ready()).await;
        if !matches!(ready, Ok(Ok(()))) {
            return fresh(s, cx, reachable, request, &hold, &service).await;
        }
        match idle.sender.try_send_request(request).await {
            Ok(response) => return Ok((response, idle)),
            Err(mut e) => match e.take_message() {
                // It closed before taking the request: a new one takes it.
                Some(unsent) => request = unsent,
                None => return Err(did_not_answer(&service, e.error())),
            },
        }
    }
    fresh(s, cx, reachable, request, &hold, &service).await
}

/// Sends `request` on a new connection.
async fn fresh(
    s: &AppState,
    cx: &Context,
    reachable: Reachable,
    request: hyper::Request<Body>,
    hold: &impl Fn(&Upstream),
    service: &str,
) -> Result<(hyper::Response<Incoming>, Upstream), Error> {
    let mut upstream = dial(s, cx, reachable).await?;
    hold(&upstream);
    let response = upstream
        .sender
        .send_request(request)
        .await
        .map_err(|e| did_not_answer(service, &e))?;
    Ok((response, upstream))
}

/// Proxies `request` to `target`'s service for its caller (bearer token
/// or session cookie).
pub(super) async fn forward(s: &AppState, target: Target, request: Request) -> Result<Response, ApiError> {
    let Target {
        namespace,
        name,
        service,
        upstream,
        browser_prefix,
        redirect_prefix,
    } = target;
    let (mut parts, body) = request.into_parts();
    let (cx, via) = caller(s, &namespace, &name, &service, &parts).await?;
    let upgrade = wants_upgrade(&parts.headers);
    let reachable = s.service.reach(&cx, &namespace, &name, &service, via).await?;
    // A browser session's requests reuse its connections; a bearer
    // token's request is its own audited connection, and an upgrade takes
    // its connection for good.
    let pool = (via == TunnelVia::Session && !upgrade).then(|| Key {
        subject: cx.principal.subject.clone(),
        namespace: namespace.clone(),
        name: name.clone(),
        service: service.clone(),
        pod: reachable.pod().to_owned(),
    });
    let client_upgrade = parts.extensions.remove::<hyper::upgrade::OnUpgrade>();
    let cookies = foreign_cookies(&parts.headers);
    let mut headers = std::mem::take(&mut parts.headers);
    drop_hop_by_hop(&mut headers, upgrade);
    headers.remove(header::AUTHORIZATION);
    headers.remove(header::COOKIE);
    if let Some(cookies) = cookies {
        headers.insert(header::COOKIE, cookies);
    }
    let host = headers.get(header::HOST).cloned();
    let forwarded_headers = [
        ("x-forwarded-for", cx.meta.source_ip.clone()),
        ("x-forwarded-proto", Some("http".to_owned())),
        (
            "x-forwarded-host",
            host.and_then(|h| h.to_str().ok().map(str::to_owned)),
        ),
        ("x-forwarded-prefix", browser_prefix),
    ];
    for (name, value) in forwarded_headers {
        if let Some(value) = value.and_then(|v| HeaderValue::from_str(&v).ok()) {
            headers.insert(name, value);
        }
    }
    let (body, upload) = watched(body);
    let mut request = hyper::Request::builder()
        .method(parts.method)
        .uri(upstream)
        .body(body)
        .map_err(|e| Error::invalid("path", e.to_string()))?;
    *request.headers_mut() = headers;
    let task = std::sync::Mutex::new(None);
    let sent = tokio::select! {
        sent = exchange(s, &cx, reachable, pool.as_ref(), request, &task) => sent,
        () = upload.stalled(s.proxy_body_idle) => {
            // The service waits for the rest of the body: the exchange and
            // its connection end here.
            if let Some(task) = task.lock().unwrap_or_else(|p| p.into_inner()).take() {
                task.abort();
            }
            return Err(Problem::new(
                StatusCode::REQUEST_TIMEOUT,
                "request_timeout",
                format!(
                    "the request body paused for more than {} s; the upload was cut off",
                    s.proxy_body_idle.as_secs()
                ),
            )
            .into());
        }
    };
    let (mut response, connection) = sent?;

    if response.status() == StatusCode::SWITCHING_PROTOCOLS
        && let Some(client_upgrade) = client_upgrade
    {
        let service_upgrade = hyper::upgrade::on(&mut response);
        let stopping = s.service.stopping();
        tokio::spawn(async move {
            let (Ok(client), Ok(service)) = (client_upgrade.await, service_upgrade.await) else {
                return;
            };
            let (mut client, mut service) = (TokioIo::new(client), TokioIo::new(service));
            tokio::select! {
                _ = tokio::io::copy_bidirectional(&mut client, &mut service) => {}
                () = stopping.cancelled() => {}
            }
        });
    }
    let (mut parts, body) = response.into_parts();
    let switching = parts.status == StatusCode::SWITCHING_PROTOCOLS;
    drop_hop_by_hop(&mut parts.headers, switching);
    if let Some(prefix) = &redirect_prefix
        && let Some(location) = parts.headers.get(header::LOCATION).and_then(|l| l.to_str().ok())
    {
        let rewritten = rewrite_location(location, prefix);
        if let Ok(value) = HeaderValue::from_str(&rewritten) {
            parts.headers.insert(header::LOCATION, value);
        }
    }
    let body = match pool {
        Some(key) if !switching => {
            let upstreams = s.upstreams.clone();
            Body::new(ReturnsAtEnd::new(body, move || upstreams.put(key, connection)))
        }
        _ => Body::new(body),
    };
    Ok(Response::from_parts(parts, body).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_and_those_connection_names_are_dropped() {
        let mut h = HeaderMap::new();
        h.insert(header::CONNECTION, HeaderValue::from_static("keep-alive, x-secret"));
        h.insert("x-secret", HeaderValue::from_static("1"));
        h.insert(header::TRANSFER_ENCODING, HeaderValue::from_static("chunked"));
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        drop_hop_by_hop(&mut h, false);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key(header::CONTENT_TYPE));

        let mut ws = HeaderMap::new();
        ws.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        ws.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        assert!(wants_upgrade(&ws));
        drop_hop_by_hop(&mut ws, true);
        assert_eq!(ws.get(header::UPGRADE).unwrap(), "websocket");
        assert_eq!(ws.get(header::CONNECTION).unwrap(), "upgrade");
    }

    #[test]
    fn krayne_cookies_stay_here() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("krayne_session=abc; _xsrf=1; theme=dark"),
        );
        assert_eq!(foreign_cookies(&h).unwrap(), "_xsrf=1; theme=dark");
        h.insert(header::COOKIE, HeaderValue::from_static("krayne_session=abc"));
        assert!(foreign_cookies(&h).is_none());
    }

    #[test]
    fn redirects_stay_under_the_prefix() {
        let p = "/v1/namespaces/ml/clusters/c/services/dashboard/proxy";
        assert_eq!(rewrite_location("/jobs", p), format!("{p}/jobs"));
        assert_eq!(rewrite_location(&format!("{p}/x"), p), format!("{p}/x"));
        assert_eq!(rewrite_location("https://example.com/", p), "https://example.com/");
        assert_eq!(rewrite_location("//evil.example/", p), "//evil.example/");
    }
}
