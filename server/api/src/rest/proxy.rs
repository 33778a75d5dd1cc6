//! The HTTP proxy to a cluster's HTTP services (dashboard, notebook,
//! code-server) under `/v1/namespaces/{ns}/clusters/{name}/services/{svc}/proxy/`:
//! any method, bodies streamed both ways, WebSocket upgrades passed
//! through, hop-by-hop headers dropped, the caller's `Authorization` and
//! krayne's cookies never forwarded, `X-Forwarded-*` set, and the
//! service's redirects kept under the prefix. Each request is its own
//! audited connection (`service.connect`, via `proxy`), for editors only.

use std::collections::HashMap;

use axum::{
    Router,
    body::Body,
    extract::{Path, Request, State},
    http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Uri, header},
    response::{IntoResponse, Redirect, Response},
    routing::any,
};
use hyper_util::rt::TokioIo;

use super::{AppState, extract::Caller, problem::ApiError};
use crate::{domain::Error, service::TunnelVia};

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
async fn add_slash(uri: Uri) -> Redirect {
    let query = uri.query().map(|q| format!("?{q}")).unwrap_or_default();
    Redirect::permanent(&format!("{}/{query}", uri.path()))
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
fn rewrite_location(location: &str, prefix: &str, keeps_prefix: bool) -> String {
    if !keeps_prefix && location.starts_with('/') && !location.starts_with("//") && !location.starts_with(prefix) {
        format!("{prefix}{location}")
    } else {
        location.to_owned()
    }
}

async fn proxy(
    State(s): State<AppState>,
    Caller(cx): Caller,
    Path(params): Path<HashMap<String, String>>,
    request: Request,
) -> Result<Response, ApiError> {
    let param = |k: &str| params.get(k).cloned().unwrap_or_default();
    let (namespace, name, service) = (param("namespace"), param("name"), param("service"));
    let prefix = format!("/v1/namespaces/{namespace}/clusters/{name}/services/{service}/proxy");
    let tunnel = s
        .service
        .open_tunnel(&cx, &namespace, &name, &service, TunnelVia::Proxy)
        .await?;
    // Jupyter serves under its base URL (the proxy's path): the whole
    // path goes through. The others serve at `/`: the prefix comes off.
    let keeps_prefix = service == "notebook";
    let connection = tunnel
        .into_connection()
        .ok_or_else(|| Error::Internal("the tunnel had no connection".into()))?;
    let unavailable = |e: hyper::Error| Error::Unavailable(format!("service {service} did not answer: {e}"));
    let (mut sender, conn) = hyper::client::conn::http1::Builder::new()
        .handshake(TokioIo::new(connection))
        .await
        .map_err(unavailable)?;
    tokio::spawn(conn.with_upgrades());

    let (mut parts, body) = request.into_parts();
    let upgrade = wants_upgrade(&parts.headers);
    let client_upgrade = parts.extensions.remove::<hyper::upgrade::OnUpgrade>();
    let path_and_query = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let forwarded = if keeps_prefix {
        path_and_query.to_owned()
    } else {
        let rest = path_and_query.strip_prefix(prefix.as_str()).unwrap_or(path_and_query);
        if rest.starts_with('/') {
            rest.to_owned()
        } else {
            format!("/{rest}")
        }
    };
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
        ("x-forwarded-prefix", Some(prefix.clone())),
    ];
    for (name, value) in forwarded_headers {
        if let Some(value) = value.and_then(|v| HeaderValue::from_str(&v).ok()) {
            headers.insert(name, value);
        }
    }
    let mut upstream = hyper::Request::builder()
        .method(parts.method)
        .uri(forwarded)
        .body(body)
        .map_err(|e| Error::invalid("path", e.to_string()))?;
    *upstream.headers_mut() = headers;
    let mut response = sender.send_request(upstream).await.map_err(unavailable)?;

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
    if let Some(location) = parts.headers.get(header::LOCATION).and_then(|l| l.to_str().ok()) {
        let rewritten = rewrite_location(location, &prefix, keeps_prefix);
        if let Ok(value) = HeaderValue::from_str(&rewritten) {
            parts.headers.insert(header::LOCATION, value);
        }
    }
    Ok(Response::from_parts(parts, Body::new(body)).into_response())
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
        assert_eq!(rewrite_location("/jobs", p, false), format!("{p}/jobs"));
        assert_eq!(rewrite_location(&format!("{p}/x"), p, false), format!("{p}/x"));
        assert_eq!(
            rewrite_location("https://example.com/", p, false),
            "https://example.com/"
        );
        assert_eq!(rewrite_location("//evil.example/", p, false), "//evil.example/");
        assert_eq!(rewrite_location("/v1/x/tree", p, true), "/v1/x/tree");
    }
}
