//! Head pods that serve: while a head pod is Running with every container
//! ready, small stand-ins for the services it declares (its container
//! ports and its head service's ports) listen on `podIP:port`, speaking
//! the real protocols; when the pod stops serving, is replaced or deleted,
//! they stop and their open connections close.
//!
//! Stand-ins: the Ray dashboard (8265: a page whose script reads the
//! relative `api/version` and opens the relative WebSocket `ws`, an echo;
//! `GET /api/version` and Ray's Jobs REST API as a Ray head answers them,
//! see [`jobs`]), the Ray client (10001: a greeting, then echo), Jupyter
//! (8888, under the pod's `KRAYNE_NOTEBOOK_BASE_URL`) and code-server
//! (8443) pages with a WebSocket echo wherever a client upgrades, SSH (22:
//! a real SSH server letting `ray` in without a password and running
//! commands, see [`ssh`]; through `pods/portforward` only), and a plain
//! echo on any other port.
//!
//! They bind loopback addresses only. Every stand-in also has a door
//! inside the process ([`Standins::open`]), which `pods/portforward` uses
//! as the kubelet enters the pod's network namespace: so a port that
//! cannot be bound (22 without privilege, a port another program holds, a
//! sandbox whose pod IPs are not loopback) is still reachable. A service
//! the head's `postStart` script binds to the pod's own loopback (Krayne's
//! notebook, code-server and sshd: see [`binding`]) is served through that
//! door only, never at the pod's IP, as on a real node. Each connection is
//! recorded ([`ConnectionRecord`]).

mod binding;
mod cluster_status;
mod daemons;
mod hostile;
mod http;
mod ingress;
mod jobs;
mod ray_auth;
mod ray_logs;
mod ssh;
mod ssh_pty;

pub(crate) use ingress::RUNS_AS_UID;

pub use daemons::RealDaemons;
pub use hostile::HOSTILE_HEAD;
pub use http::DASHBOARD_HANGS;

use std::{
    collections::{BTreeSet, HashMap, HashSet, VecDeque},
    net::{IpAddr, SocketAddr},
    sync::{Arc, Mutex},
    time::Duration,
};

use hyper_util::{
    rt::{TokioExecutor, TokioIo},
    server::conn::auto::Builder,
    service::TowerToHyperService,
};
use serde_json::Value;
use tokio::{
    io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, DuplexStream},
    net::TcpListener,
    sync::{broadcast::error::RecvError, mpsc, watch},
    task::JoinSet,
};

use super::{
    Resource,
    store::{Change, ChangeKind, Store, meta_str},
};

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
    /// Who connected over TCP; `None` through `pods/portforward`.
    pub peer: Option<SocketAddr>,
}

/// Connections remembered (a long-running sandbox accepts many).
const MAX_RECORDS: usize = 10_000;
/// Buffer of one in-process connection, each way.
const DOOR_BUFFER: usize = 64 * 1024;

/// The stand-ins' shared state: the connection log and the in-process
/// doors of every stand-in that serves.
pub(super) struct Standins {
    log: Mutex<VecDeque<ConnectionRecord>>,
    /// (pod uid, port) → the stand-in taking in-process connections.
    doors: Mutex<HashMap<(String, u16), mpsc::Sender<DuplexStream>>>,
    /// Ports whose failed bind was already reported.
    unbound: Mutex<HashSet<u16>>,
    /// Heads' own daemons instead of stand-ins for what their script
    /// binds to the pod's loopback, when asked for.
    real: Option<RealDaemons>,
    /// The API's objects: the NetworkPolicies the pod-IP listeners enforce.
    store: Arc<Store>,
}

impl Standins {
    /// Stand-ins over `store`'s pods, or real daemons where `real` says.
    pub(super) fn new(real: Option<RealDaemons>, store: Arc<Store>) -> Self {
        Self {
            log: Mutex::default(),
            doors: Mutex::default(),
            unbound: Mutex::default(),
            real,
            store,
        }
    }

    /// The newest connections, oldest first.
    pub(super) fn connections(&self) -> Vec<ConnectionRecord> {
        lock(&self.log).iter().cloned().collect()
    }

    /// Connects to the stand-in on `port` of the pod with `uid`, inside
    /// the process; `None` when nothing serves there.
    pub(super) async fn open(&self, uid: &str, port: u16) -> Option<DuplexStream> {
        let door = lock(&self.doors).get(&(uid.to_owned(), port)).cloned()?;
        let (ours, theirs) = tokio::io::duplex(DOOR_BUFFER);
        door.send(theirs).await.ok()?;
        Some(ours)
    }

    fn record(&self, record: ConnectionRecord) {
        let mut records = lock(&self.log);
        if records.len() == MAX_RECORDS {
            records.pop_front();
        }
        records.push_back(record);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

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

/// One head pod's stand-ins. Dropping it closes their doors, aborts the
/// listeners and their connections, and, through `_stop`, ends the
/// WebSockets (which run in tasks of their own once upgraded) and the
/// Ray jobs' processes.
struct Serving {
    standins: Arc<Standins>,
    uid: String,
    ports: BTreeSet<u16>,
    _tasks: JoinSet<()>,
    _stop: watch::Sender<()>,
    /// The head's own daemons, ended with it.
    _daemons: Option<daemons::Daemons>,
}

/// How a port of a head is reached.
enum Reached {
    /// At the pod's IP, and through its door.
    PodIp,
    /// Through its door only: the daemon binds the pod's loopback.
    Door,
    /// Through its door, relayed to the real daemon inside the pod's
    /// network namespace (the relay's socket).
    Relay(std::path::PathBuf),
}

impl Drop for Serving {
    fn drop(&mut self) {
        let mut doors = lock(&self.standins.doors);
        for port in &self.ports {
            doors.remove(&(self.uid.clone(), *port));
        }
    }
}

/// Keeps the stand-ins in step with head pods until `stop` changes.
pub(super) async fn run(store: Arc<Store>, standins: Arc<Standins>, mut stop: watch::Receiver<bool>) {
    let mut changes = store.subscribe();
    // Pod uid → its stand-ins.
    let mut serving: HashMap<String, Serving> = HashMap::new();
    resync(&store, &standins, &mut serving);
    loop {
        tokio::select! {
            change = changes.recv() => match change {
                Ok(c) if c.resource == Resource::Pod => on_change(&store, &standins, &mut serving, &c),
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => resync(&store, &standins, &mut serving),
                Err(RecvError::Closed) => return,
            },
            _ = stop.changed() => return,
        }
    }
}

fn resync(store: &Store, standins: &Arc<Standins>, serving: &mut HashMap<String, Serving>) {
    let (pods, _) = store.list(Resource::Pod, None, |_| true);
    let live: BTreeSet<&str> = pods.iter().map(|p| meta_str(p, "uid")).collect();
    serving.retain(|uid, _| live.contains(uid.as_str()));
    for pod in &pods {
        reconcile(store, standins, serving, pod, false);
    }
}

fn on_change(store: &Store, standins: &Arc<Standins>, serving: &mut HashMap<String, Serving>, change: &Change) {
    let deleted = change.kind == ChangeKind::Deleted;
    reconcile(store, standins, serving, &change.object, deleted);
}

fn reconcile(
    store: &Store,
    standins: &Arc<Standins>,
    serving: &mut HashMap<String, Serving>,
    pod: &Value,
    deleted: bool,
) {
    let uid = meta_str(pod, "uid").to_owned();
    let wanted = !deleted && serves(pod);
    match (wanted, serving.contains_key(&uid)) {
        (true, false) => {
            serving.insert(uid, start(store, standins, pod));
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

/// A value of the head container's environment.
fn head_env(pod: &Value, name: &str) -> Option<String> {
    pod["spec"]["containers"][0]["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == name)?["value"]
        .as_str()
        .map(str::to_owned)
}

/// The Ray token the head container's environment requires, its
/// `RAY_AUTH_TOKEN` resolved as the kubelet does (a value, or a Secret's
/// key); `None` unless `RAY_AUTH_MODE` is `token`.
pub(super) fn ray_token(store: &Store, pod: &Value) -> Option<String> {
    use base64::Engine as _;
    if head_env(pod, "RAY_AUTH_MODE").as_deref() != Some("token") {
        return None;
    }
    let env = pod["spec"]["containers"][0]["env"].as_array()?;
    let token = env.iter().find(|e| e["name"] == "RAY_AUTH_TOKEN")?;
    if let Some(value) = token["value"].as_str() {
        return Some(value.to_owned());
    }
    let from = &token["valueFrom"]["secretKeyRef"];
    let secret = store
        .get(Resource::Secret, meta_str(pod, "namespace"), from["name"].as_str()?)
        .ok()?;
    let data = secret["data"][from["key"].as_str()?].as_str()?;
    let bytes = base64::engine::general_purpose::STANDARD.decode(data).ok()?;
    String::from_utf8(bytes).ok()
}

/// Where a head pod's stand-ins are, and what they share.
#[derive(Clone)]
struct Head {
    namespace: String,
    pod: String,
    /// Where to bind: the pod's IP when it is loopback.
    ip: Option<IpAddr>,
    /// The notebook's base URL (`/…/`).
    notebook_base: String,
    /// Ray's Jobs, shared by the dashboard's connections.
    jobs: Arc<jobs::Jobs>,
    /// The notebook's kernels (their ids), shared by its connections.
    kernels: Arc<Mutex<Vec<String>>>,
    /// Changes (or is dropped) when the pod stops serving.
    stopped: watch::Receiver<()>,
    /// The pod as it started serving (its namespace and labels, which
    /// NetworkPolicies select).
    object: Arc<Value>,
    /// Its SSH server's settings, when it declares SSH.
    ssh: Option<Arc<ssh::SshHead>>,
    /// The Ray token its dashboard requires (`RAY_AUTH_MODE=token`), as
    /// the pod's environment had it when it started.
    ray_token: Option<Arc<str>>,
}

fn start(store: &Store, standins: &Arc<Standins>, pod: &Value) -> Serving {
    let uid = meta_str(pod, "uid").to_owned();
    let ip = pod["status"]["podIP"]
        .as_str()
        .and_then(|ip| ip.parse::<IpAddr>().ok())
        .filter(IpAddr::is_loopback);
    let (stop, stopped) = watch::channel(());
    let node = pod["status"]["podIP"].as_str().unwrap_or("127.0.0.1");
    let ports = declared_ports(store, pod);
    let ssh = ports
        .iter()
        .any(|p| Kind::of(*p) == Kind::Ssh)
        .then(|| ssh::SshHead::new(meta_str(pod, "name")))
        .flatten()
        .map(Arc::new);
    let head = Head {
        namespace: meta_str(pod, "namespace").to_owned(),
        pod: meta_str(pod, "name").to_owned(),
        ip,
        notebook_base: http::base_url(head_env(pod, krayne_core::manifest::NOTEBOOK_BASE_URL_ENV).as_deref()),
        jobs: jobs::Jobs::new(&uid, node, stopped.clone()),
        kernels: Arc::default(),
        stopped,
        object: Arc::new(pod.clone()),
        ssh,
        ray_token: ray_token(store, pod).map(Arc::from),
    };
    let on_loopback = binding::loopback_ports(pod);
    let daemons = standins
        .real
        .as_ref()
        .and_then(|real| daemons::Daemons::start(real, pod, &on_loopback));
    let mut tasks = JoinSet::new();
    for &port in &ports {
        let (door, visitors) = mpsc::channel(16);
        lock(&standins.doors).insert((uid.clone(), port), door);
        let reached = if on_loopback.contains(&port) {
            match &daemons {
                Some(d) => Reached::Relay(d.socket(port)),
                None => Reached::Door,
            }
        } else if Kind::of(port) == Kind::Ssh {
            // It runs commands on this machine: only the API's
            // authorization (pods/portforward) lets anyone at it.
            Reached::Door
        } else {
            Reached::PodIp
        };
        tasks.spawn(listen(head.clone(), port, reached, visitors, standins.clone()));
    }
    Serving {
        standins: standins.clone(),
        uid,
        ports,
        _tasks: tasks,
        _stop: stop,
        _daemons: daemons,
    }
}

/// Serves `port` through its in-process door, and on the pod's IP too
/// (when it can be bound) unless the daemon binds the pod's loopback; a
/// real daemon's port is relayed to it.
async fn listen(
    head: Head,
    port: u16,
    reached: Reached,
    mut visitors: mpsc::Receiver<DuplexStream>,
    standins: Arc<Standins>,
) {
    let kind = Kind::of(port);
    let listener = match head.ip.filter(|_| matches!(reached, Reached::PodIp)) {
        Some(ip) => match TcpListener::bind((ip, port)).await {
            Ok(l) => Some(l),
            Err(e) => {
                if lock(&standins.unbound).insert(port) {
                    tracing::warn!(port, error = %e, "head pods' stand-ins cannot listen on this port (below 1024 without privilege, or held by another program on every address): they are reached through pods/portforward only");
                }
                None
            }
        },
        None => None,
    };
    let record = |peer| ConnectionRecord {
        namespace: head.namespace.clone(),
        pod: head.pod.clone(),
        service: kind.name(),
        port,
        peer,
    };
    // Connections live in this set: aborting the listener closes them.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = accept(listener.as_ref()) => {
                let Ok((stream, peer)) = accepted else {
                    // Out of descriptors, say: back off rather than spin.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let uid = stream.local_addr().ok().and_then(|local| ingress::peer_uid(peer, local));
                if !ingress::admits(&standins.store, &head.object, peer.ip(), uid, port) {
                    // What a network plugin drops never reaches the pod.
                    drop(stream);
                    continue;
                }
                standins.record(record(Some(peer)));
                connections.spawn(serve(kind, stream, head.clone()));
            }
            Some(stream) = visitors.recv() => {
                standins.record(record(None));
                match &reached {
                    Reached::Relay(socket) => connections.spawn(relay(stream, socket.clone())),
                    Reached::PodIp | Reached::Door => connections.spawn(serve(kind, stream, head.clone())),
                };
            }
            Some(_) = connections.join_next() => {}
        }
    }
}

/// Carries a port-forward's connection to a real daemon through its
/// relay (which may still be starting, as the daemon may).
async fn relay(mut stream: DuplexStream, socket: std::path::PathBuf) {
    for _ in 0..100 {
        if let Ok(mut relay) = tokio::net::UnixStream::connect(&socket).await {
            let _ = tokio::io::copy_bidirectional(&mut stream, &mut relay).await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tracing::warn!(socket = %socket.display(), "no relay into the head's namespace after 10 s: its daemons did not start");
}

/// The next TCP connection; never, without a listener.
async fn accept(listener: Option<&TcpListener>) -> std::io::Result<(tokio::net::TcpStream, SocketAddr)> {
    match listener {
        Some(l) => l.accept().await,
        None => std::future::pending().await,
    }
}

async fn serve<S>(kind: Kind, stream: S, head: Head)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    match kind {
        Kind::Ssh => {
            if let Some(settings) = head.ssh.clone() {
                ssh::serve(stream, settings, head.stopped.clone()).await;
            }
        }
        Kind::RayClient => echo(stream, b"krayne-sandbox ray client stand-in\n").await,
        Kind::Echo => echo(stream, b"").await,
        Kind::Dashboard | Kind::Notebook | Kind::CodeServer => {
            let service = TowerToHyperService::new(http::router(kind, &head));
            let _ = Builder::new(TokioExecutor::new())
                .serve_connection_with_upgrades(TokioIo::new(stream), service)
                .await;
        }
    }
}

/// Sends `greeting`, then echoes what comes until the peer closes.
async fn echo<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, greeting: &[u8]) {
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
