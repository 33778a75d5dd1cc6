//! Wiring: the one place that names concrete adapters and starts listeners.

use std::{future::Future, net::SocketAddr, sync::Arc, time::Duration};

use axum::{Router, middleware};
use tokio::{net::TcpListener, sync::watch, task::JoinHandle};

use crate::{
    auth::Authenticator,
    control::{
        ControlPlane, ControlSettings,
        background::{BackgroundWork, ReaperWork},
    },
    domain::{AuditSink, ClusterStore, ServiceUpstream},
    edge::{self, TrustedProxies},
    grpc::{self, GrpcSettings},
    ops,
    rest::{self, AppState, RestSettings},
    serve::{ConnectionLimits, serve},
};

/// Everything a running server needs, with adapters chosen.
pub struct Parts {
    /// Kubernetes.
    pub store: Arc<dyn ClusterStore>,
    /// The audit trail.
    pub audit: Arc<dyn AuditSink>,
    /// Token verification and team mapping.
    pub auth: Authenticator,
    /// Use-case limits and the default image.
    pub control: ControlSettings,
    /// HTTP limits and CORS.
    pub rest: RestSettings,
    /// What a connection may do before the application sees it.
    pub connections: ConnectionLimits,
    /// Proxies whose forwarding headers name the client.
    pub trusted_proxies: TrustedProxies,
    /// Whether gRPC server reflection needs a valid token.
    pub reflection_needs_token: bool,
    /// After a shutdown signal, how long the server keeps serving while it
    /// reports not ready (endpoints take that long to forget it).
    pub drain_delay: Duration,
    /// Then, how long in-flight requests and open tunnels may go on.
    pub grace: Duration,
    /// How clusters' services are reached (`None`: they are not).
    pub upstream: Option<Arc<dyn ServiceUpstream>>,
    /// How clusters' Ray heads are asked, through `upstream` (`None`: they
    /// are not).
    pub ray: Option<Arc<dyn crate::domain::RayHeads>>,
    /// Serializes quota admission across replicas (`None`: within this
    /// process only).
    pub quota_lock: Option<Arc<dyn crate::domain::AdmissionLock>>,
    /// The lifecycle reaper (`None`: off).
    pub lifecycle: Option<Lifecycle>,
    /// Where uses of clusters are recorded for every replica's reaper, and
    /// how often (`None`: nowhere, and no cluster is ever seen idle).
    pub activity: Option<(Arc<dyn crate::domain::ActivityLedger>, Duration)>,
    /// Where usage is recorded and read (`None`: no usage accounting).
    pub usage_ledger: Option<Arc<dyn crate::domain::UsageLedger>>,
    /// The election usage is recorded under (`None`: none is recorded).
    pub usage_leadership: Option<Arc<dyn crate::domain::Leadership>>,
    /// Keeps the team mapping current from its file (`None`: it is not
    /// reloaded).
    pub mapping_reload: Option<crate::control::background::MappingReload>,
    /// Where KubeRay's RayJobs live (`None`: no `krayne run`).
    pub rayjobs: Option<Arc<dyn crate::domain::RayJobStore>>,
    /// What is kept of RayJobs' ended jobs (`None`: nothing is).
    pub run_ledger: Option<Arc<dyn crate::domain::RunLedger>>,
    /// What krayne reads of Kueue (`None`: nothing; docs/kueue.md).
    pub kueue: Option<Arc<dyn crate::domain::KueueReads>>,
}

/// The lifecycle reaper's wiring.
pub struct Lifecycle {
    /// `report` or `act`.
    pub mode: crate::control::LifecycleMode,
    /// The leader election it acts under.
    pub leadership: Arc<dyn crate::domain::Leadership>,
    /// Time between passes.
    pub every: Duration,
    /// Where it records the policies it has seen, to tell new and changed
    /// ones (`None`: every policy is taken as settled).
    pub policies: Option<Arc<dyn crate::domain::PolicyLedger>>,
}

impl Parts {
    /// Parts over `store`, `audit` and `auth`, every limit at its default
    /// (each subcommand then sets what its flags say).
    pub fn new(store: Arc<dyn ClusterStore>, audit: Arc<dyn AuditSink>, auth: Authenticator) -> Self {
        Self {
            store,
            audit,
            auth,
            control: ControlSettings::default(),
            rest: RestSettings::default(),
            connections: ConnectionLimits::default(),
            trusted_proxies: TrustedProxies::default(),
            reflection_needs_token: false,
            drain_delay: Duration::ZERO,
            grace: Duration::from_secs(20),
            upstream: None,
            ray: None,
            quota_lock: None,
            lifecycle: None,
            activity: None,
            usage_ledger: None,
            usage_leadership: None,
            mapping_reload: None,
            rayjobs: None,
            kueue: None,
            run_ledger: None,
        }
    }
}

/// A server whose listeners are bound and serving.
pub struct Running {
    /// Address of the API.
    pub api_addr: SocketAddr,
    /// Address of the ops endpoints.
    pub ops_addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Running {
    /// Asks the server to stop (as SIGTERM does) and waits until it has.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }

    /// Waits until the server stops on its own (after a signal).
    pub async fn wait(self) {
        let _ = self.task.await;
    }
}

/// Binds both listeners and serves until `shutdown` resolves or `stop` is
/// called; then drains (not ready, still serving, for the drain delay),
/// stops accepting and ends resumable streams, lets in-flight requests and
/// tunnels go on within the grace period, closes what is left, and
/// returns.
pub async fn start(
    parts: Parts,
    api: SocketAddr,
    ops: SocketAddr,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<Running, String> {
    let mut service = ControlPlane::new(parts.store, parts.audit, parts.control).with_authenticator(parts.auth.clone());
    if let Some(upstream) = parts.upstream {
        service = service.with_upstream(upstream);
    }
    if let Some(ray) = parts.ray {
        service = service.with_ray(ray);
    }
    if let Some(rayjobs) = parts.rayjobs {
        service = service.with_rayjobs(rayjobs);
    }
    if let Some(ledger) = parts.run_ledger {
        service = service.with_run_ledger(ledger);
    }
    if let Some(kueue) = parts.kueue {
        service = service.with_kueue(kueue);
    }
    if let Some(ledger) = parts.usage_ledger {
        service = service.with_usage_ledger(ledger);
    }
    if let Some(lock) = parts.quota_lock {
        service = service.with_quota_lock(lock);
    }
    if let Some((ledger, every)) = parts.activity {
        service = service.with_activity_ledger(ledger, every);
    }
    let mut work = BackgroundWork {
        keeper_leadership: parts.lifecycle.as_ref().map(|l| l.leadership.clone()),
        usage_leadership: parts.usage_leadership,
        mapping_reload: parts.mapping_reload,
        ..BackgroundWork::default()
    };
    if let Some(l) = parts.lifecycle {
        if let Some(ledger) = l.policies {
            service = service.with_policy_ledger(ledger);
        }
        work.reaper = Some(ReaperWork {
            mode: l.mode,
            leadership: l.leadership,
            every: l.every,
        });
    }
    let background = service.start_background(work);
    tracing::debug!(tasks = ?background.tasks(), "background work started");
    let state = AppState::new(service.clone(), parts.auth.clone(), parts.rest.body_timeout);
    let grpc_settings = GrpcSettings {
        max_message: parts.rest.body_limit,
        request_timeout: parts.rest.request_timeout,
        body_timeout: parts.rest.body_timeout,
        reflection_needs_token: parts.reflection_needs_token,
    };
    let hosts = rest::AppHosts::of(&state);
    let grpc = grpc::router(service.clone(), parts.auth, &grpc_settings).await?;
    let health = grpc.health;
    let grpc_routes = grpc.routes.route_layer(middleware::from_fn(ops::track_http));
    // gRPC services own their paths; every other request is REST's. Every
    // request first gets its ids and source; gRPC ones then pass the gate
    // (method, size, deadline, token) before tonic reads a byte of them.
    let mut app: Router = grpc_routes
        .fallback_service(rest::router(state, &parts.rest))
        .layer(middleware::from_fn_with_state(grpc.gate, grpc::gate));
    // With an apps domain, a service's host is that service's, whole.
    if let Some(hosts) = hosts {
        app = app.layer(middleware::from_fn_with_state(hosts, rest::by_host));
    }
    let app = app
        .layer(middleware::from_fn_with_state(
            parts.trusted_proxies,
            edge::resolve_source,
        ))
        .layer(middleware::from_fn(edge::assign_request_ids));
    let api_listener = TcpListener::bind(api)
        .await
        .map_err(|e| format!("cannot listen on {api}: {e}"))?;
    let ops_listener = TcpListener::bind(ops)
        .await
        .map_err(|e| format!("cannot listen on {ops}: {e}"))?;
    let api_addr = api_listener.local_addr().map_err(|e| e.to_string())?;
    let ops_addr = ops_listener.local_addr().map_err(|e| e.to_string())?;
    let (stop, stopping) = watch::channel(false);
    let (grace, limits, drain_delay) = (parts.grace, parts.connections, parts.drain_delay);
    let ops_app = ops::router(service.clone());
    let task = tokio::spawn(async move {
        let mut by_stop = stopping.clone();
        let stopping_service = service.clone();
        let signal = async move {
            tokio::select! {
                () = shutdown => {}
                _ = by_stop.changed() => {}
            }
            grpc::not_serving(&health).await;
            stopping_service.begin_drain();
            if !drain_delay.is_zero() {
                tracing::info!(
                    seconds = drain_delay.as_secs(),
                    "draining: not ready, still serving while endpoints forget this replica"
                );
                tokio::time::sleep(drain_delay).await;
            }
            tracing::info!("shutting down: no new connections; finishing requests in flight");
            stopping_service.begin_shutdown();
        };
        let mut ops_stop = stopping;
        let ops_limits = limits.clone();
        let ops_task = tokio::spawn(async move {
            let stopped = async move {
                let _ = ops_stop.changed().await;
            };
            serve("ops", ops_listener, ops_app, &ops_limits, stopped).await.await;
        });
        let drained = serve("api", api_listener, app, &limits, signal).await;
        let started = tokio::time::Instant::now();
        // In flight when the signal came: finish within the grace period.
        if tokio::time::timeout(grace, drained).await.is_err() {
            tracing::warn!(
                grace_seconds = grace.as_secs(),
                "requests still in flight after the grace period; stopping anyway"
            );
        }
        // Tunnels cannot be resumed: they may go on until the grace period
        // ends, then close (saying why, and finishing their audit rows).
        if !service.tunnels_closed(grace.saturating_sub(started.elapsed())).await {
            tracing::warn!("tunnels still open at the end of the grace period: closing them");
        }
        service.close_tunnels();
        if !service.tunnels_closed(Duration::from_secs(2)).await {
            tracing::warn!("tunnels did not close in time");
        }
        let left = grace.saturating_sub(started.elapsed()).max(Duration::from_secs(1));
        background.stop(left).await;
        let left = grace.saturating_sub(started.elapsed()).max(Duration::from_secs(1));
        service.flush_audit(left).await;
        ops_task.abort();
    });
    Ok(Running {
        api_addr,
        ops_addr,
        stop,
        task,
    })
}

/// Resolves on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
