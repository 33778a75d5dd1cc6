//! Head pods that serve: while a head pod is Running with every container
//! ready, small stand-ins for the services it declares (its container
//! ports and its head service's ports) listen on `podIP:port`, speaking
//! the real protocols; when the pod stops serving, is replaced or deleted,
//! they stop and their open connections close.
//!
//! Stand-ins: the Ray dashboard (8265: a page whose script reads the
//! relative `api/version` and opens the relative WebSocket `ws`, an echo;
//! `GET /api/version` as Ray answers it), the Ray client (10001: a
//! greeting, then echo), Jupyter (8888) and code-server (8443) pages on
//! every path with a WebSocket echo wherever a client upgrades, SSH (22:
//! an `SSH-2.0-` banner, then echo), and a plain echo on any other port. All on loopback addresses only; each
//! connection is recorded ([`ConnectionRecord`]).

use std::{
    collections::{BTreeSet, HashMap, VecDeque},
    net::{IpAddr, SocketAddr},
    sync::{Arc, Mutex},
};

use axum::{
    Json, Router,
    extract::{
        State,
        ws::{Message, WebSocket, WebSocketUpgrade, rejection::WebSocketUpgradeRejection},
    },
    http::Uri,
    response::{Html, IntoResponse, Response},
    routing::get,
};
use hyper_util::{
    rt::{TokioExecutor, TokioIo},
    server::conn::auto::Builder,
    service::TowerToHyperService,
};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::{TcpListener, TcpStream},
    sync::{broadcast::error::RecvError, watch},
    task::JoinSet,
};

use super::{
    Resource,
    store::{Change, ChangeKind, Store, meta_str},
};

/// Ray's version the dashboard stand-in reports.
const RAY_VERSION: &str = "2.43.0";

/// One connection a stand-in accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionRecord {
    /// The head pod's namespace.
    pub namespace: String,
    /// The head pod.
    pub pod: String,
    /// `dashboard`, `client`, `notebook`, `code-server`, `ssh` or `echo`.
    pub service: &'static str,
    /// The port connected to.
    pub port: u16,
    /// Who connected.
    pub peer: SocketAddr,
}

/// Where connections are recorded: the newest [`MAX_RECORDS`].
pub(super) type ConnectionLog = Arc<Mutex<VecDeque<ConnectionRecord>>>;

/// Connections remembered (a long-running sandbox accepts many).
const MAX_RECORDS: usize = 10_000;

/// What listens on a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dashboard,
    RayClient,
    Notebook,
    CodeServer,
    Ssh,
    Echo,
}

impl Kind {
    fn of(port: u16) -> Self {
        match port {
            8265 => Self::Dashboard,
            10001 => Self::RayClient,
            8888 => Self::Notebook,
            8443 => Self::CodeServer,
            22 => Self::Ssh,
            _ => Self::Echo,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Dashboard => "dashboard",
            Self::RayClient => "client",
            Self::Notebook => "notebook",
            Self::CodeServer => "code-server",
            Self::Ssh => "ssh",
            Self::Echo => "echo",
        }
    }
}

/// One head pod's stand-ins. Dropping it aborts the listeners and their
/// connections and, through `_stop`, ends the WebSockets (which run in
/// tasks of their own once upgraded).
struct Serving {
    _tasks: JoinSet<()>,
    _stop: watch::Sender<()>,
}

/// Keeps the stand-ins in step with head pods until `stop` changes.
pub(super) async fn run(store: Arc<Store>, log: ConnectionLog, mut stop: watch::Receiver<bool>) {
    let mut changes = store.subscribe();
    // Pod uid → its stand-ins.
    let mut serving: HashMap<String, Serving> = HashMap::new();
    resync(&store, &log, &mut serving);
    loop {
        tokio::select! {
            change = changes.recv() => match change {
                Ok(c) if c.resource == Resource::Pod => on_change(&store, &log, &mut serving, &c),
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => resync(&store, &log, &mut serving),
                Err(RecvError::Closed) => return,
            },
            _ = stop.changed() => return,
        }
    }
}

fn resync(store: &Store, log: &ConnectionLog, serving: &mut HashMap<String, Serving>) {
    let (pods, _) = store.list(Resource::Pod, None, |_| true);
    let live: BTreeSet<&str> = pods.iter().map(|p| meta_str(p, "uid")).collect();
    serving.retain(|uid, _| live.contains(uid.as_str()));
    for pod in &pods {
        reconcile(store, log, serving, pod, false);
    }
}

fn on_change(store: &Store, log: &ConnectionLog, serving: &mut HashMap<String, Serving>, change: &Change) {
    let deleted = change.kind == ChangeKind::Deleted;
    reconcile(store, log, serving, &change.object, deleted);
}

fn reconcile(store: &Store, log: &ConnectionLog, serving: &mut HashMap<String, Serving>, pod: &Value, deleted: bool) {
    let uid = meta_str(pod, "uid").to_owned();
    let wanted = !deleted && serves(pod);
    match (wanted, serving.contains_key(&uid)) {
        (true, false) => {
            if let Some(tasks) = start(store, log, pod) {
                serving.insert(uid, tasks);
            }
        }
        (false, true) => {
            serving.remove(&uid);
        }
        _ => {}
    }
}

/// A head pod serves while Running, not being deleted, every container ready.
fn serves(pod: &Value) -> bool {
    let statuses = pod["status"]["containerStatuses"].as_array();
    pod["metadata"]["labels"]["ray.io/node-type"] == "head"
        && pod["status"]["phase"] == "Running"
        && pod["metadata"]["deletionTimestamp"].is_null()
        && statuses.is_some_and(|s| !s.is_empty() && s.iter().all(|c| c["ready"] == true))
}

/// The head's declared ports: its containers' and its head service's.
fn declared_ports(store: &Store, pod: &Value) -> BTreeSet<u16> {
    let port = |v: &Value| v.as_u64().and_then(|p| u16::try_from(p).ok());
    let mut ports: BTreeSet<u16> = pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["ports"].as_array().into_iter().flatten())
        .filter_map(|p| port(&p["containerPort"]))
        .collect();
    let cluster = pod["metadata"]["labels"]["ray.io/cluster"].as_str().unwrap_or_default();
    let service = format!("{cluster}-head-svc");
    if let Ok(svc) = store.get(Resource::Service, meta_str(pod, "namespace"), &service) {
        ports.extend(
            svc["spec"]["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| port(&p["port"])),
        );
    }
    ports
}

fn start(store: &Store, log: &ConnectionLog, pod: &Value) -> Option<Serving> {
    let ip: IpAddr = pod["status"]["podIP"].as_str()?.parse().ok()?;
    if !ip.is_loopback() {
        return None;
    }
    let mut tasks = JoinSet::new();
    let (stop, stopped) = watch::channel(());
    for port in declared_ports(store, pod) {
        let at = Where {
            namespace: meta_str(pod, "namespace").to_owned(),
            pod: meta_str(pod, "name").to_owned(),
            ip,
            port,
            kind: Kind::of(port),
        };
        tasks.spawn(listen(at, log.clone(), stopped.clone()));
    }
    Some(Serving {
        _tasks: tasks,
        _stop: stop,
    })
}

/// One stand-in's address.
#[derive(Debug, Clone)]
struct Where {
    namespace: String,
    pod: String,
    ip: IpAddr,
    port: u16,
    kind: Kind,
}

async fn listen(at: Where, log: ConnectionLog, stopped: watch::Receiver<()>) {
    let listener = match TcpListener::bind((at.ip, at.port)).await {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(pod = %at.pod, port = at.port, error = %e, "a head pod's stand-in cannot listen (a port below 1024 without privilege, or one another program holds on every address): it is out of reach");
            return;
        }
    };
    // Connections live in this set: aborting the listener closes them.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, peer)) = accepted else {
                    // Out of descriptors, say: back off rather than spin.
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                };
                let mut records = log.lock().unwrap_or_else(|p| p.into_inner());
                if records.len() == MAX_RECORDS {
                    records.pop_front();
                }
                records.push_back(ConnectionRecord {
                    namespace: at.namespace.clone(),
                    pod: at.pod.clone(),
                    service: at.kind.name(),
                    port: at.port,
                    peer,
                });
                drop(records);
                connections.spawn(serve(at.kind, stream, stopped.clone()));
            }
            Some(_) = connections.join_next() => {}
        }
    }
}

async fn serve(kind: Kind, stream: TcpStream, stopped: watch::Receiver<()>) {
    match kind {
        Kind::Ssh => echo(stream, b"SSH-2.0-OpenSSH_9.6 krayne-sandbox\r\n").await,
        Kind::RayClient => echo(stream, b"krayne-sandbox ray client stand-in\n").await,
        Kind::Echo => echo(stream, b"").await,
        Kind::Dashboard | Kind::Notebook | Kind::CodeServer => {
            let service = TowerToHyperService::new(router(kind, stopped));
            let _ = Builder::new(TokioExecutor::new())
                .serve_connection_with_upgrades(TokioIo::new(stream), service)
                .await;
        }
    }
}

/// Sends `greeting`, then echoes what comes until the peer closes.
async fn echo(mut stream: TcpStream, greeting: &[u8]) {
    if stream.write_all(greeting).await.is_err() {
        return;
    }
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(n) = stream.read(&mut buf).await {
        if n == 0 || stream.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

fn router(kind: Kind, stopped: watch::Receiver<()>) -> Router {
    let router = match kind {
        Kind::Dashboard => Router::new()
            .route("/", get(dashboard_page))
            .route("/api/version", get(ray_version))
            .route("/ws", get(websocket_echo)),
        Kind::Notebook => Router::new().fallback(get(|u, ws, s| page_or_echo("Jupyter", u, ws, s))),
        _ => Router::new().fallback(get(|u, ws, s| page_or_echo("code-server", u, ws, s))),
    };
    router.with_state(stopped)
}

type Upgrade = Result<WebSocketUpgrade, WebSocketUpgradeRejection>;

/// An HTML page on every path; a WebSocket echo (a kernel channel, say)
/// where a client asks to upgrade.
async fn page_or_echo(
    title: &'static str,
    uri: Uri,
    upgrade: Upgrade,
    State(stopped): State<watch::Receiver<()>>,
) -> Response {
    match upgrade {
        Ok(ws) => ws.on_upgrade(move |socket| echo_messages(socket, stopped)),
        Err(_) => page(title, uri.path()).into_response(),
    }
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
async fn ray_version() -> Json<Value> {
    Json(json!({
        "version": "4",
        "ray_version": RAY_VERSION,
        "ray_commit": "krayne-sandbox",
        "session_name": "session_krayne_sandbox",
    }))
}

fn page(title: &str, path: &str) -> Html<String> {
    let path: String = path
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || "/-_.".contains(*c))
        .collect();
    Html(format!(
        "<!doctype html><title>{title}</title><h1>{title} (krayne sandbox stand-in)</h1><p>{path}</p>"
    ))
}
