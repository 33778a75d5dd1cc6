//! The sandbox: a simulated Kubernetes API server with a simulated KubeRay
//! operator, for tests and for `krayne-server sandbox`.
//!
//! It speaks the real Kubernetes REST API for what krayne touches —
//! discovery, namespaces, pods, services, events and `ray.io/v1`
//! rayclusters and rayjobs with the status subresource (KubeRay's RayJob
//! controller runs them: see `rayjob_controller`), merge and JSON patches, label
//! and field selectors, resourceVersion conflicts, resumable watches with
//! bookmarks and 410 Gone — with real `Status` errors. `kube::Client` and
//! `kubectl` use it as they would a real cluster. It listens on 127.0.0.1
//! only.
//!
//! Fault injection: [`Sandbox::set_latency`] delays every API request,
//! [`Sandbox::stop_api`] takes the API server away (objects and operator
//! stay) until [`Sandbox::start_api`]; images containing `doesnotexist` or `:invalid` (see
//! [`OperatorOptions::bad_image_patterns`]) fail with `ErrImagePull`, then
//! `ImagePullBackOff`; the annotation `sandbox.krayne.dev/fault: crash-loop`
//! on a RayCluster makes its pods crash-loop, and `dashboard-hangs` makes
//! its head's dashboard accept connections and never answer. Pods that fit on no simulated
//! node stay `Pending`/`Unschedulable` until capacity frees up.
#![forbid(unsafe_code)]

use krayne_core::domain;

mod access;
mod access_review;
mod addresses;
mod api;
mod api_error;
mod crds;
mod discovery;
mod event_ttl;
mod field_managers;
pub mod kuberay_pod;
mod kuberay_status;
mod kueue;
mod nodes;
mod operator;
mod pod_logs;
mod portforward;
mod portforward_spdy;
mod rayjob_controller;
mod resources;
mod selector;
mod service_account_tokens;
mod spdy;
mod standins;
mod state;
mod store;
mod validate;

use std::{
    net::SocketAddr,
    path::Path,
    sync::{Arc, Mutex},
    time::Duration,
};

pub use access::{Access, Grants};
pub use api_error::ApiError;
pub use nodes::NodeCapacity;
pub use operator::{FAULT_ANNOTATION, OperatorOptions};
pub use resources::Resource;
pub use selector::{FieldSelector, LabelSelector};
pub use service_account_tokens::SERVICE_ACCOUNT_ISSUER;
pub use standins::{ConnectionRecord, DASHBOARD_HANGS, HOSTILE_HEAD, RealDaemons};
pub use state::{RequestRecord, SERVICE_ACCOUNT_USER};

/// The user this sandbox runs as (its effective uid): the one whose
/// sockets are krayne's pod's, and, when root, the one that runs tenants'
/// jobs and SSH sessions as `nobody`.
pub fn local_uid() -> u32 {
    nix::unistd::geteuid().as_raw()
}
use tokio::{sync::watch, task::JoinHandle};
pub use validate::{kueue_schema, raycluster_schema, rayjob_schema};

/// The namespace of krayne's own pod ([`Sandbox::add_krayne_pod`]).
pub const KRAYNE_NAMESPACE: &str = "krayne";
/// The label of krayne's own pod, as the chart's selector labels it.
pub const KRAYNE_POD_LABEL: (&str, &str) = ("app.kubernetes.io/name", "krayne");

/// How to run a sandbox.
#[derive(Debug, Clone)]
pub struct SandboxOptions {
    /// The simulated operator, scheduler and kubelet.
    pub operator: OperatorOptions,
    /// Whether the operator runs; without it the sandbox is a bare API
    /// server (for tests of API semantics that must see only their writes).
    pub run_operator: bool,
    /// Namespaces that exist from the start.
    pub namespaces: Vec<String>,
    /// Changes kept for watches to resume from; older versions get 410.
    pub history_limit: usize,
    /// How often watches that allow bookmarks receive one.
    pub bookmark_interval: Duration,
    /// Whether watches may stream the initial list (`sendInitialEvents`
    /// with a bookmark annotated `k8s.io/initial-events-end`), as an API
    /// server with the WatchList feature does. `false`: the sandbox says it
    /// is Kubernetes 1.31 with the feature gate off and refuses such a
    /// watch with 422, as that API server does.
    pub watch_list: bool,
    /// Port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// Events not seen again for this long are deleted (kube-apiserver's
    /// `--event-ttl`, 1 hour by default).
    pub event_ttl: Duration,
    /// Heads run their own `postStart` script for real, each in a network
    /// namespace of its own, instead of stand-ins for what it binds to the
    /// pod's loopback (root only; see [`RealDaemons`]).
    pub real_daemons: Option<RealDaemons>,
    /// RBAC as bound to a ServiceAccount: `None` grants everything.
    pub grants: Option<Grants>,
}

impl Default for SandboxOptions {
    fn default() -> Self {
        Self {
            operator: OperatorOptions::default(),
            run_operator: true,
            namespaces: vec!["default".into()],
            history_limit: 10_000,
            bookmark_interval: Duration::from_secs(10),
            watch_list: true,
            port: 0,
            event_ttl: Duration::from_secs(3600),
            real_daemons: None,
            grants: None,
        }
    }
}

impl SandboxOptions {
    /// Short delays for tests: pods run within a fraction of a second.
    pub fn fast() -> Self {
        let mut o = Self::default();
        o.operator.schedule_delay = Duration::from_millis(10);
        o.operator.start_delay = Duration::from_millis(50);
        o.operator.backoff_delay = Duration::from_millis(100);
        o.bookmark_interval = Duration::from_millis(200);
        o
    }
}

/// A running sandbox; stops when dropped.
pub struct Sandbox {
    addr: SocketAddr,
    api: Arc<state::ApiState>,
    stop: watch::Sender<bool>,
    server: Option<ApiServer>,
    tasks: Vec<JoinHandle<()>>,
    standins: Arc<standins::Standins>,
}

/// The API server's task, stoppable on its own.
struct ApiServer {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl ApiServer {
    fn spawn(listener: tokio::net::TcpListener, api: Arc<state::ApiState>) -> Self {
        let (stop, mut stopped) = watch::channel(false);
        let app = api::router(api);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.changed().await;
                })
                .await;
        });
        Self { stop, task }
    }
}

impl Sandbox {
    /// Starts the API server on 127.0.0.1 and the simulated operator.
    pub async fn start(options: SandboxOptions) -> std::io::Result<Self> {
        validate::warm_up();
        let store = Arc::new(store::Store::new(options.history_limit));
        for ns in &options.namespaces {
            let object = serde_json::json!({"metadata": {"name": ns}});
            store
                .create(Resource::Namespace, "", object, store::WriteOpts::default())
                .map_err(|e| std::io::Error::other(e.message))?;
        }
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", options.port)).await?;
        let addr = listener.local_addr()?;
        let standins = Arc::new(standins::Standins::new(options.real_daemons.clone(), store.clone()));
        let pod_logs = Arc::new(pod_logs::PodLogs::new());
        let api = Arc::new(state::ApiState {
            store: store.clone(),
            requests: Mutex::new(Vec::new()),
            bytes_served: Arc::default(),
            bookmark_interval: options.bookmark_interval,
            watch_list: options.watch_list,
            address: addr.to_string(),
            disconnect: watch::channel(0).0,
            latency: watch::channel(Duration::ZERO).0,
            forbidden: Mutex::new(Vec::new()),
            grants: options.grants.clone(),
            standins: standins.clone(),
            pod_logs: pod_logs.clone(),
            signer: service_account_tokens::TokenSigner::generate().map_err(std::io::Error::other)?,
        });
        let (stop, stopped) = watch::channel(false);
        let server = Some(ApiServer::spawn(listener, api.clone()));
        let mut tasks = vec![tokio::spawn(event_ttl::expire(
            store.clone(),
            options.event_ttl,
            stopped.clone(),
        ))];
        if options.run_operator {
            tasks.push(tokio::spawn(pod_logs::run(store.clone(), pod_logs, stopped.clone())));
            tasks.push(tokio::spawn(standins::run(
                store.clone(),
                standins.clone(),
                stopped.clone(),
            )));
            // KubeRay requeues a RayJob every 3 s; the sandbox looks sooner.
            let poll = Duration::from_millis(500).mul_f64(options.operator.time_scale.clamp(0.1, 1.0));
            tasks.push(tokio::spawn(rayjob_controller::run(
                store.clone(),
                standins.clone(),
                poll,
                stopped.clone(),
            )));
            tasks.push(tokio::spawn(kueue::run(store.clone(), poll, stopped.clone())));
            tasks.push(tokio::spawn(operator::run(store, options.operator, stopped)));
        }
        Ok(Self {
            addr,
            api,
            stop,
            server,
            tasks,
            standins,
        })
    }

    /// Registers krayne's own pod, `krayne/krayne-0` labelled
    /// [`KRAYNE_POD_LABEL`] at 127.0.0.1: the server runs on this machine,
    /// where its connections come from, and the clusters' NetworkPolicies
    /// admit it by that label as on a cluster.
    pub fn add_krayne_pod(&self) -> std::io::Result<()> {
        self.add_pod(KRAYNE_NAMESPACE, "krayne-0", &[KRAYNE_POD_LABEL], "127.0.0.1")
    }

    /// Registers a pod that no operator runs — krayne's own, whose
    /// connections come from `ip` — Running in `namespace` (made when
    /// missing) with `labels`, so that NetworkPolicies can admit it by its
    /// labels as they would on a cluster.
    pub fn add_pod(&self, namespace: &str, name: &str, labels: &[(&str, &str)], ip: &str) -> std::io::Result<()> {
        let store = &self.api.store;
        if store.get(Resource::Namespace, "", namespace).is_err() {
            let object = serde_json::json!({"metadata": {"name": namespace}});
            store
                .create(Resource::Namespace, "", object, store::WriteOpts::default())
                .map_err(|e| std::io::Error::other(e.message))?;
        }
        let labels: serde_json::Map<String, serde_json::Value> =
            labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).into())).collect();
        // Its address is every local program's: only its user's sockets
        // are this pod's (see `standins::ingress`).
        let uid = nix::unistd::geteuid().as_raw().to_string();
        let pod = serde_json::json!({
            "metadata": {"name": name, "namespace": namespace, "labels": labels,
                         "annotations": {standins::RUNS_AS_UID: uid}},
            "spec": {"containers": [{"name": "main", "image": "krayne"}]},
        });
        store
            .create(Resource::Pod, namespace, pod, store::WriteOpts::default())
            .map_err(|e| std::io::Error::other(e.message))?;
        // A create leaves a pod's status to its kubelet.
        store.update(Resource::Pod, namespace, name, |p| {
            p["status"] = serde_json::json!({"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]});
        });
        Ok(())
    }

    /// Stores `object` of kind `resource` in `namespace` ("" for
    /// cluster-scoped kinds) as the API server would on a create, keeping
    /// its `status`, without going through HTTP: how a benchmark fills the
    /// sandbox with hundreds of thousands of objects in seconds. The object
    /// is kept encoded (its JSON text and a skeleton for selectors), about
    /// a seventh of its parsed size; every read answers it whole. Answers
    /// the stored object's uid.
    pub fn insert(&self, resource: Resource, namespace: &str, object: serde_json::Value) -> std::io::Result<String> {
        let opts = store::WriteOpts {
            dry_run: false,
            keep_status: true,
            packed: true,
        };
        let stored = self
            .api
            .store
            .create(resource, namespace, object, opts)
            .map_err(|e| std::io::Error::other(e.message))?;
        Ok(store::meta_str(&stored, "uid").to_owned())
    }

    /// Bytes of response bodies the API has sent so far (watch streams
    /// counted as they flow).
    pub fn bytes_served(&self) -> u64 {
        self.api.bytes_served.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Delays every API request by `latency` before it is answered (zero:
    /// none), as an overloaded API server would.
    pub fn set_latency(&self, latency: Duration) {
        self.api.latency.send_replace(latency);
    }

    /// Makes RBAC refuse `verb` on `resource` (e.g. `patch`, `rayclusters`)
    /// to every caller, with 403 `Forbidden` naming the ServiceAccount, as
    /// when a rule is missing from krayne's Role.
    pub fn forbid(&self, verb: &str, resource: &str) {
        self.api
            .forbidden
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((verb.to_owned(), resource.to_owned()));
    }

    /// Takes the API server away, as when kube-apiserver is down: open
    /// connections and watches end, new ones are refused. The objects and
    /// the operator stay; [`Sandbox::start_api`] brings it back.
    pub async fn stop_api(&mut self) {
        if let Some(server) = self.server.take() {
            self.disconnect_watches();
            let _ = server.stop.send(true);
            // In-flight requests (a delayed one, say) do not hold the stop.
            let mut task = server.task;
            if tokio::time::timeout(Duration::from_secs(2), &mut task).await.is_err() {
                task.abort();
            }
        }
    }

    /// Serves the API again, on the same address.
    pub async fn start_api(&mut self) -> std::io::Result<()> {
        if self.server.is_none() {
            let listener = tokio::net::TcpListener::bind(self.addr).await?;
            self.server = Some(ApiServer::spawn(listener, self.api.clone()));
        }
        Ok(())
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Writes a kubeconfig (context `krayne-sandbox`) for `kubectl` and
    /// other tools.
    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        let config = serde_json::json!({
            "apiVersion": "v1", "kind": "Config", "current-context": "krayne-sandbox",
            "clusters": [{"name": "krayne-sandbox", "cluster": {"server": self.url()}}],
            "users": [{"name": "krayne-sandbox", "user": {}}],
            "contexts": [{"name": "krayne-sandbox",
                          "context": {"cluster": "krayne-sandbox", "user": "krayne-sandbox", "namespace": "default"}}],
        });
        let text = serde_json::to_string_pretty(&config).map_err(std::io::Error::other)?;
        std::fs::write(path, text)
    }

    /// The connections head pods' stand-ins accepted (the newest 10 000).
    pub fn connections(&self) -> Vec<ConnectionRecord> {
        self.standins.connections()
    }

    /// Every request the API answered so far.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.api.requests.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Ends every open watch, as a restarting API server or a broken
    /// connection would; clients resume from their last resourceVersion.
    pub fn disconnect_watches(&self) {
        self.api.disconnect.send_modify(|n| *n += 1);
    }

    /// Forgets the change history, as etcd compaction does: a watch
    /// resuming from any earlier resourceVersion gets `410 Gone` and must
    /// list again.
    pub fn compact(&self) {
        self.api.store.compact();
    }

    /// Stops serving and waits for the tasks to end.
    pub async fn shutdown(mut self) {
        // Open watches would hold graceful shutdown until they time out.
        self.stop_api().await;
        let _ = self.stop.send(true);
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.disconnect_watches();
        let _ = self.stop.send(true);
        if let Some(server) = &self.server {
            let _ = server.stop.send(true);
        }
    }
}
