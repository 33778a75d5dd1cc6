//! The HTTP proxy to a cluster's HTTP services (dashboard, notebook,
//! code-server) under `/v1/namespaces/{ns}/clusters/{name}/services/{svc}/proxy/`:
//! any method, bodies streamed both ways, WebSocket upgrades passed
//! through (and ended as every long-lived stream is: expiry, revocation,
//! idleness), hop-by-hop headers dropped, the caller's `Authorization`,
//! `X-Ray-Authorization`, Ray token cookie, krayne's cookies and the
//! client's forwarding headers never forwarded (the cluster's Ray token is
//! sent to its dashboard instead),
//! `X-Forwarded-*` set, and the service's cookies and redirects kept on
//! the service (`proxy_edge`). For editors only: with a bearer token each
//! request is its own audited connection (`service.connect`, via
//! `proxy`); in a browser session (a cookie for this service, see
//! `sessions`) the session was audited when it began, each request
//! re-checks its caller against the current mapping, unsafe requests and
//! upgrades must come from the service's own origin, and requests reuse
//! the caller's idle connections to the service (`upstreams`).

use std::{collections::HashMap, time::Duration};

use axum::{
    Router,
    body::Body,
    extract::{Path, Request, State},
    http::{HeaderValue, StatusCode, Uri, header, request::Parts},
    response::{IntoResponse, Redirect, Response},
    routing::any,
};
use futures::StreamExt as _;
use hyper_util::rt::TokioIo;

use hyper::body::Incoming;
use tokio::task::AbortHandle;

use super::{
    proxy_edge::{
        Seen, confine_response, cross_origin, drop_client_forwarding, drop_hop_by_hop, foreign_cookies, wants_upgrade,
    },
    sessions::session_cookies,
    sign_in_page,
    upstreams::{Key, ReturnsAtEnd, Upstream},
};
use crate::rest::{
    AppState,
    paths::proxy_path,
    problem::{ApiError, Problem},
};
use crate::{
    control::{Context, Ended, Reachable, Touching, TunnelVia},
    domain::{ClusterRef, Error, PublicUrl, audit::Transport, ray_auth::RAY_AUTH_HEADER},
    edge::{self, ViaHttps},
};

/// The proxy's path, without the trailing slash.
const PREFIX: &str = "/v1/namespaces/{namespace}/clusters/{name}/services/{service}/proxy";

/// The proxy's routes (outside the API's body limits, timeouts and
/// compression: bodies stream through as they are).
pub(crate) fn router(state: AppState) -> Router {
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
    let public = s.plane.public_url().map_or("", PublicUrl::prefix);
    Redirect::permanent(&format!("{public}{}/{query}", uri.path()))
}

/// The caller of a proxied request: its bearer token when it sends one
/// (`curl`, scripts), else its session cookie for this cluster (a
/// browser), or only for `service` when one is named. A session's
/// requests are not audited one by one.
async fn caller(
    s: &AppState,
    cluster: &ClusterRef,
    service: Option<&str>,
    parts: &Parts,
) -> Result<(Context, TunnelVia), Error> {
    let sessions = session_cookies(&parts.headers);
    if parts.headers.contains_key(header::AUTHORIZATION) || sessions.is_empty() {
        let several = Error::invalid("authorization", "send one Authorization header, not several");
        let cx = edge::authenticate(
            &s.plane,
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
    let cx = s.plane.session_caller(&meta, cluster, service, &values).await?;
    Ok((cx, TunnelVia::Session))
}

/// Where a proxied request goes, and how its browser sees the service.
pub(crate) struct Target {
    /// The cluster.
    pub cluster: ClusterRef,
    /// Service.
    pub service: String,
    /// The path and query to ask the service for.
    pub upstream: String,
    /// What the browser sees in front of the service's paths
    /// (`X-Forwarded-Prefix`); none on a service's own host.
    pub browser_prefix: Option<String>,
    /// The path the browser asked for, as it sees it (redirects are
    /// resolved against it).
    pub browser_path: String,
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
    let public = s.plane.public_url().map_or("", PublicUrl::prefix);
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
        cluster: ClusterRef::new(namespace, name),
        service,
        upstream,
        browser_path: format!("{public}{}", request.uri().path()),
        browser_prefix: Some(browser_prefix),
    };
    forward(&s, target, request).await
}

/// How the browser sees the service of this request: its origin (the
/// public URL's in path mode when there is one, else the `Host` it sent),
/// https when the public URL is or a trusted proxy says so.
fn seen(s: &AppState, parts: &Parts, browser_prefix: Option<String>) -> Result<Seen, Error> {
    let public = s.plane.public_url().filter(|_| browser_prefix.is_some());
    let https = parts.extensions.get::<ViaHttps>().is_some() || public.is_some_and(PublicUrl::is_https);
    let host = parts
        .headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
        .or_else(|| parts.uri.authority().map(ToString::to_string));
    let authority = match public {
        Some(url) => url.origin().split_once("://").map(|(_, a)| a.to_owned()),
        None => host,
    };
    authority
        .and_then(|a| Seen::new(https, &a, browser_prefix))
        .ok_or_else(|| Error::invalid("host", "a proxied request names the host it is for"))
}

/// Opens a new HTTP/1 connection to a reachable service for `cx`.
async fn dial(s: &AppState, cx: &Context, reachable: Reachable) -> Result<Upstream, Error> {
    let service = reachable.service().to_owned();
    let connection = s.plane.connect(cx, reachable).await?.into_connection();
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
pub(crate) async fn forward(s: &AppState, target: Target, request: Request) -> Result<Response, ApiError> {
    let Target {
        cluster,
        service,
        upstream,
        browser_prefix,
        browser_path,
    } = target;
    let (mut parts, body) = request.into_parts();
    // On a service's own host a session is that service's alone (its
    // cookie is the host's); in path mode one covers the cluster's services.
    let session_for = browser_prefix.is_none().then_some(service.as_str());
    let (cx, via) = match caller(s, &cluster, session_for, &parts).await {
        Ok(found) => found,
        Err(e) if sign_in_page::wants_page(&parts.method, &parts.headers, &e) => {
            return Ok(sign_in_page::page(cluster.namespace(), cluster.name(), &service, &e));
        }
        Err(e) => return Err(e.into()),
    };
    let upgrade = wants_upgrade(&parts.headers);
    let seen = seen(s, &parts, browser_prefix.clone())?;
    if via == TunnelVia::Session
        && let Some(why) = cross_origin(&parts.method, upgrade, &parts.headers, &seen)
    {
        return Err(s.plane.refuse_cross_origin(&cx, &cluster, &why).await.into());
    }
    let reachable = s.plane.reach(&cx, &cluster, &service, via).await?;
    // A browser session's requests reuse its connections; a bearer
    // token's request is its own audited connection, and an upgrade takes
    // its connection for good.
    let pool = (via == TunnelVia::Session && !upgrade).then(|| Key {
        subject: cx.principal.subject.clone(),
        namespace: cluster.namespace().to_owned(),
        name: cluster.name().to_owned(),
        service: service.clone(),
        pod: reachable.pod().to_owned(),
    });
    let client_upgrade = parts.extensions.remove::<hyper::upgrade::OnUpgrade>();
    let cookies = foreign_cookies(&parts.headers);
    let mut headers = std::mem::take(&mut parts.headers);
    drop_hop_by_hop(&mut headers, upgrade);
    drop_client_forwarding(&mut headers);
    headers.remove(header::AUTHORIZATION);
    headers.remove(header::COOKIE);
    headers.remove(RAY_AUTH_HEADER);
    if let Some(cookies) = cookies {
        headers.insert(header::COOKIE, cookies);
    }
    if let Some(token) = reachable
        .ray_authorization()
        .and_then(|t| HeaderValue::from_str(&t).ok())
    {
        headers.insert(RAY_AUTH_HEADER, token);
    }
    let host = headers.get(header::HOST).cloned();
    let forwarded_headers = [
        ("x-forwarded-for", cx.meta.source_ip.clone()),
        (
            "x-forwarded-proto",
            Some(if seen.https() { "https" } else { "http" }.to_owned()),
        ),
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
    let (response, connection) = sent?;

    let (mut head, body) = response.into_parts();
    let switching = head.status == StatusCode::SWITCHING_PROTOCOLS;
    drop_hop_by_hop(&mut head.headers, switching);
    // A redirect off the service is an open redirect only for a browser
    // that carries a session; a bearer caller (curl, a script) gets it as
    // the service sent it.
    if let Err(why) = confine_response(&mut head.headers, &seen, &browser_path)
        && via == TunnelVia::Session
    {
        tracing::info!(request_id = %cx.meta.request_id, %why, "a service's answer refused");
        return Err(Problem::new(StatusCode::BAD_GATEWAY, "bad_gateway", why).into());
    }
    let mut response = hyper::Response::from_parts(head, body);
    if switching && let Some(client_upgrade) = client_upgrade {
        let service_upgrade = hyper::upgrade::on(&mut response);
        let guard = s.plane.proxied_websocket_guard(&cx, &cluster);
        let control = s.plane.clone();
        tokio::spawn(async move {
            let (Ok(client), Ok(service)) = (client_upgrade.await, service_upgrade.await) else {
                return;
            };
            let mut client = Touching::new(TokioIo::new(client), guard.activity());
            let mut service = TokioIo::new(service);
            let ended = tokio::select! {
                copied = tokio::io::copy_bidirectional(&mut client, &mut service) => match copied {
                    Ok(_) => Ended::ClientClosed,
                    Err(e) => Ended::ServiceError(e.to_string()),
                },
                ended = guard.ended() => ended,
            };
            control.stream_ended(&guard, &ended).await;
        });
    }
    let (parts, body) = response.into_parts();
    let body = match pool {
        Some(key) if !switching => {
            let upstreams = s.upstreams.clone();
            Body::new(ReturnsAtEnd::new(body, move || upstreams.put(key, connection)))
        }
        _ => Body::new(body),
    };
    // A long answer (a followed log, a stream of events) ends as every
    // long-lived stream does: expiry, revocation, idleness, shutdown.
    let guard = s.plane.proxied_response_guard(&cx, &cluster);
    let frames = body
        .into_data_stream()
        .map(|frame| frame.map_err(|e| Error::Unavailable(format!("the service's answer broke off: {e}"))));
    let body = Body::from_stream(
        guard
            .guard_items(s.plane.clone(), frames)
            .map(|frame| frame.map_err(|e| std::io::Error::other(e.to_string()))),
    );
    Ok(Response::from_parts(parts, body).into_response())
}
