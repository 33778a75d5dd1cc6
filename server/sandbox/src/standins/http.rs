//! The HTTP stand-ins: the Ray dashboard's page (with Ray's Jobs API from
//! [`super::jobs`]), Jupyter under its base URL, code-server; each with a
//! WebSocket echo.

use axum::{
    Json, Router,
    extract::{
        State,
        ws::{Message, WebSocket, WebSocketUpgrade, rejection::WebSocketUpgradeRejection},
    },
    http::{StatusCode, Uri, header},
    response::{Html, IntoResponse, Response},
    routing::get,
};
use serde_json::json;
use tokio::sync::watch;

use super::{Head, Kind, jobs};

/// Ray's version the dashboard stand-in reports (Krayne's default image's).
pub(super) const RAY_VERSION: &str = "2.43.0";
/// The Jupyter server version the notebook stand-in reports.
const JUPYTER_SERVER_VERSION: &str = "2.14.2";

pub(super) fn router(kind: Kind, head: &Head) -> Router {
    let stopped = head.stopped.clone();
    match kind {
        Kind::Dashboard => Router::new()
            .route("/", get(dashboard_page))
            .route("/api/version", get(ray_version))
            .route("/ws", get(websocket_echo))
            .with_state(stopped)
            .merge(jobs::router(head.jobs.clone())),
        Kind::Notebook => {
            let base = head.notebook_base.clone();
            Router::new()
                .fallback(get(move |uri, ws, state| notebook(base, uri, ws, state)))
                .with_state(stopped)
        }
        _ => Router::new().fallback(get(code_server)).with_state(stopped),
    }
}

/// A base URL as Jupyter normalizes `base_url`: `/` around it.
pub(super) fn base_url(configured: Option<&str>) -> String {
    let trimmed = configured.unwrap_or("/").trim_matches('/');
    if trimmed.is_empty() {
        "/".to_owned()
    } else {
        format!("/{trimmed}/")
    }
}

type Upgrade = Result<WebSocketUpgrade, WebSocketUpgradeRejection>;

/// Jupyter under `base`: the bare base redirects to `{base}tree`, `{base}api`
/// answers the server's version, a WebSocket (a kernel channel, say) echoes
/// anywhere under the base, other paths under it get a page whose script
/// builds its URLs from the base (as Jupyter's does, which is why it needs
/// `base_url` behind a proxy); anything outside it is 404.
async fn notebook(base: String, uri: Uri, upgrade: Upgrade, State(stopped): State<watch::Receiver<()>>) -> Response {
    let path = uri.path();
    if path == base || path == base.trim_end_matches('/') {
        return (StatusCode::FOUND, [(header::LOCATION, format!("{base}tree"))]).into_response();
    }
    let Some(rest) = path.strip_prefix(base.as_str()) else {
        return (
            StatusCode::NOT_FOUND,
            Html("<!doctype html><title>404 : Not Found</title><h1>404 : Not Found</h1>"),
        )
            .into_response();
    };
    if let Ok(ws) = upgrade {
        return ws.on_upgrade(move |socket| echo_messages(socket, stopped));
    }
    if rest == "api" {
        return Json(json!({"version": JUPYTER_SERVER_VERSION})).into_response();
    }
    let config = json!({"baseUrl": base, "appVersion": JUPYTER_SERVER_VERSION}).to_string();
    Html(format!(
        "<!doctype html><title>Jupyter</title>\
         <script id=\"jupyter-config-data\" type=\"application/json\">{config}</script>\
         <h1>Jupyter (krayne sandbox stand-in)</h1><p>{}</p>\
         <p>Server <span id=\"version\">…</span></p><p>Kernel: <span id=\"kernel\">…</span></p>\
         <script>const c = JSON.parse(document.getElementById(\"jupyter-config-data\").textContent);\
         fetch(c.baseUrl + \"api\").then(r => r.json()).then(v => \
         document.getElementById(\"version\").textContent = v.version);\
         const ws = new WebSocket(location.origin.replace(/^http/, \"ws\") + c.baseUrl + \"api/kernels/sandbox/channels\");\
         ws.onopen = () => ws.send(\"kernel\");\
         ws.onmessage = (e) => document.getElementById(\"kernel\").textContent = e.data;</script>",
        sanitized(path)
    ))
    .into_response()
}

/// code-server: a page on every path listing the request's header names
/// (so a test can see what a proxy forwarded), a WebSocket echo where a
/// client upgrades.
async fn code_server(
    uri: Uri,
    headers: axum::http::HeaderMap,
    upgrade: Upgrade,
    State(stopped): State<watch::Receiver<()>>,
) -> Response {
    if let Ok(ws) = upgrade {
        return ws.on_upgrade(move |socket| echo_messages(socket, stopped));
    }
    let names: String = headers
        .keys()
        .map(|k| format!("<li>{}</li>", sanitized(k.as_str())))
        .collect();
    Html(format!(
        "<!doctype html><title>code-server</title><h1>code-server (krayne sandbox stand-in)</h1><p>{}</p>\
         <ul id=\"headers\">{names}</ul>",
        sanitized(uri.path())
    ))
    .into_response()
}

async fn websocket_echo(upgrade: WebSocketUpgrade, State(stopped): State<watch::Receiver<()>>) -> Response {
    upgrade.on_upgrade(move |socket| echo_messages(socket, stopped))
}

/// Sends back every text and binary message until the peer closes or the
/// pod stops serving (then closes).
async fn echo_messages(mut socket: WebSocket, mut stopped: watch::Receiver<()>) {
    loop {
        tokio::select! {
            incoming = socket.recv() => match incoming {
                Some(Ok(message @ (Message::Text(_) | Message::Binary(_)))) => {
                    // A peer that does not read must not hold the socket
                    // open past the pod.
                    tokio::select! {
                        sent = socket.send(message) => if sent.is_err() { return },
                        _ = stopped.changed() => return,
                    }
                }
                Some(Ok(Message::Close(_)) | Err(_)) | None => return,
                Some(Ok(_)) => {}
            },
            _ = stopped.changed() => {
                let _ = socket.send(Message::Close(None)).await;
                return;
            }
        }
    }
}

async fn dashboard_page() -> Html<String> {
    Html(format!(
        "<!doctype html><title>Ray Dashboard</title><h1>Ray Dashboard (krayne sandbox)</h1>\
         <p>Ray <span id=\"version\">…</span></p>\
         <p>WebSocket: <span id=\"ws\">…</span></p>\
         <script>fetch(\"api/version\").then(r => r.json()).then(v => \
         document.getElementById(\"version\").textContent = v.ray_version);\
         const ws = new WebSocket(new URL(\"ws\", location.href.replace(/^http/, \"ws\")));\
         ws.onopen = () => ws.send(\"echo\");\
         ws.onmessage = (e) => document.getElementById(\"ws\").textContent = e.data;</script>\
         <!-- ray {RAY_VERSION} -->"
    ))
}

/// `GET /api/version`, in Ray's shape.
async fn ray_version() -> Response {
    jobs::python_json(
        StatusCode::OK,
        &json!({
            "version": "4",
            "ray_version": RAY_VERSION,
            "ray_commit": "krayne-sandbox",
            "session_name": "session_krayne_sandbox",
        }),
    )
}

/// A request path, safe to put in a page.
fn sanitized(path: &str) -> String {
    path.chars()
        .filter(|c| c.is_ascii_alphanumeric() || "/-_.".contains(*c))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::base_url;

    #[test]
    fn base_urls_are_normalized_as_jupyter_does() {
        assert_eq!(base_url(None), "/");
        assert_eq!(base_url(Some("")), "/");
        assert_eq!(base_url(Some("/")), "/");
        assert_eq!(base_url(Some("a/b")), "/a/b/");
        assert_eq!(base_url(Some("/a/b/")), "/a/b/");
    }
}
