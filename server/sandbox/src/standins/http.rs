//! The HTTP stand-ins: the Ray dashboard's page (with Ray's Jobs API from
//! [`super::jobs`]), Jupyter under its base URL (with its kernels API),
//! code-server; each with a WebSocket echo.

use std::sync::{Arc, Mutex};

use axum::{
    Json, Router,
    extract::{
        Query, State,
        ws::{Message, WebSocket, WebSocketUpgrade, rejection::WebSocketUpgradeRejection},
    },
    http::{HeaderName, HeaderValue, Method, StatusCode, Uri, header},
    response::{Html, IntoResponse, Response},
    routing::get,
};
use serde_json::json;
use tokio::sync::watch;

use super::{Head, Kind, jobs};
use crate::operator::FAULT_ANNOTATION;

/// The Ray version a head reports: its image's tag.
pub(super) fn ray_version_of(pod: &serde_json::Value) -> String {
    krayne_core::manifest::ray_version(pod["spec"]["containers"][0]["image"].as_str().unwrap_or(""))
}
/// The Jupyter server version the notebook stand-in reports.
const JUPYTER_SERVER_VERSION: &str = "2.14.2";

pub(super) fn router(kind: Kind, head: &Head) -> Router {
    let stopped = head.stopped.clone();
    let hostile = head.object["metadata"]["annotations"][FAULT_ANNOTATION]
        .as_str()
        .and_then(super::hostile::Behaviour::of);
    if let (Kind::Dashboard, Some(behaviour)) = (kind, hostile) {
        return super::hostile::router(behaviour);
    }
    match kind {
        Kind::Dashboard if head.object["metadata"]["annotations"][FAULT_ANNOTATION] == DASHBOARD_HANGS => {
            Router::new().fallback(hang).with_state(stopped)
        }
        Kind::Dashboard => {
            let version: Arc<str> = ray_version_of(&head.object).into();
            let page_version = version.clone();
            let api = Router::new()
                .route("/api/version", get(move || ray_version(version.clone())))
                .route("/ws", get(websocket_echo))
                .with_state(stopped.clone())
                .merge(super::ray_logs::router(head.jobs.clone()))
                .merge(super::cluster_status::router(
                    head.jobs.clone(),
                    super::cluster_status::NodeTotals::of(&head.object),
                ))
                .merge(jobs::router(head.jobs.clone()));
            let api = match head.ray_token.clone() {
                Some(token) => api.layer(axum::middleware::from_fn(move |request, next| {
                    super::ray_auth::require(token.clone(), request, next)
                })),
                None => api,
            };
            // The page itself is served to anyone, as Ray's is (its script
            // asks for the token).
            Router::new()
                .route("/", get(move || dashboard_page(page_version.clone())))
                .with_state(stopped)
                .merge(api)
        }
        Kind::Notebook => {
            let (base, kernels) = (head.notebook_base.clone(), head.kernels.clone());
            Router::new()
                .fallback(move |method, uri, ws, state| notebook(base, kernels, method, uri, ws, state))
                .with_state(stopped)
        }
        _ => Router::new()
            .route(ANSWER_AS_ASKED, get(answer_as_asked))
            .fallback(get(code_server))
            .with_state(stopped),
    }
}

/// The fault (`sandbox.krayne.dev/fault` on the RayCluster) whose head's
/// dashboard accepts connections and never answers: a hung head.
pub const DASHBOARD_HANGS: &str = "dashboard-hangs";

/// Answers nothing until the head stops serving.
async fn hang(State(mut stopped): State<watch::Receiver<()>>) -> Response {
    let _ = stopped.changed().await;
    StatusCode::SERVICE_UNAVAILABLE.into_response()
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
/// answers the server's version, `{base}api/kernels` lists kernels and a
/// POST there starts one (201, as Jupyter's REST API), a WebSocket (a
/// kernel channel, say) echoes anywhere under the base, other GETs under
/// it get a page whose script builds its URLs from the base (as
/// Jupyter's does, which is why it needs `base_url` behind a proxy);
/// anything outside it is 404, any other method 405.
async fn notebook(
    base: String,
    kernels: Arc<Mutex<Vec<String>>>,
    method: Method,
    uri: Uri,
    upgrade: Upgrade,
    State(stopped): State<watch::Receiver<()>>,
) -> Response {
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
    let mut kernels = kernels.lock().unwrap_or_else(|p| p.into_inner());
    match (&method, rest) {
        (&Method::GET, "api") => return Json(json!({"version": JUPYTER_SERVER_VERSION})).into_response(),
        (&Method::GET, "api/kernels") => {
            let listed: Vec<_> = kernels.iter().map(|id| kernel(id)).collect();
            return Json(json!(listed)).into_response();
        }
        (&Method::POST, "api/kernels") => {
            let id = format!(
                "{:08x}-0000-4000-8000-{:012x}",
                kernels.len() + 1,
                fastrand::u64(..1 << 48)
            );
            kernels.push(id.clone());
            return (StatusCode::CREATED, Json(kernel(&id))).into_response();
        }
        (&Method::GET, _) => {}
        _ => return StatusCode::METHOD_NOT_ALLOWED.into_response(),
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

/// A kernel as Jupyter's REST API describes one.
fn kernel(id: &str) -> serde_json::Value {
    json!({"id": id, "name": "python3", "execution_state": "idle", "connections": 0})
}

/// Where the code-server stand-in answers with what the query asks for:
/// its status (`status`), and every other pair as a header of the answer
/// (`set-cookie`, repeated; `location`; …). A test sees what a proxy lets
/// through of a service's answer, as it sees what it forwards of a
/// request.
pub(super) const ANSWER_AS_ASKED: &str = "/_sandbox/answer";

async fn answer_as_asked(Query(asked): Query<Vec<(String, String)>>) -> Response {
    let mut response = StatusCode::OK.into_response();
    for (key, value) in asked {
        let Ok(header_value) = HeaderValue::from_str(&value) else {
            return (StatusCode::BAD_REQUEST, format!("not a header value: {value:?}")).into_response();
        };
        if key == "status" {
            *response.status_mut() = value.parse().unwrap_or(StatusCode::BAD_REQUEST);
        } else if let Ok(name) = HeaderName::try_from(key.as_str()) {
            response.headers_mut().append(name, header_value);
        }
    }
    response
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

async fn dashboard_page(version: Arc<str>) -> Html<String> {
    Html(format!(
        "<!doctype html><title>Ray Dashboard</title><h1>Ray Dashboard (krayne sandbox)</h1>\
         <p>Ray <span id=\"version\">…</span></p>\
         <p>WebSocket: <span id=\"ws\">…</span></p>\
         <script>fetch(\"api/version\").then(r => r.json()).then(v => \
         document.getElementById(\"version\").textContent = v.ray_version);\
         const ws = new WebSocket(new URL(\"ws\", location.href.replace(/^http/, \"ws\")));\
         ws.onopen = () => ws.send(\"echo\");\
         ws.onmessage = (e) => document.getElementById(\"ws\").textContent = e.data;</script>\
         <!-- ray {version} -->"
    ))
}

/// `GET /api/version`, in Ray's shape.
async fn ray_version(version: Arc<str>) -> Response {
    jobs::python_json(
        StatusCode::OK,
        &json!({
            "version": "4",
            "ray_version": &*version,
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
