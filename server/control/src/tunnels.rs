//! A cluster's services, and tunnels to them: listed to viewers (with a
//! short probe of each), opened for editors only (each service lets its
//! user run code on the cluster), audited as `service.connect` before a
//! byte flows and completed with what flowed, limited per principal, cut
//! when idle or when the server shuts down.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use bytes::Bytes;
use futures::{
    AsyncReadExt as _, AsyncWriteExt as _, Sink, SinkExt as _, Stream, StreamExt as _,
    future::{BoxFuture, join_all},
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{
    Context, ControlPlane,
    streams::{
        Ended, StreamGuard, StreamKind,
        kit::{Flowed, Holders, Permit, Row, completed, millis},
    },
};
use crate::{
    domain::{
        Action, ClusterRef, Error, HeadService, ObservedPod, ServiceState, ServiceStream, ServiceTarget,
        audit::{AuditAction, AuditEntry, Outcome},
        ray_auth::RayToken,
    },
    manifest::{self, DeclaredService},
};

/// Limits of service access.
#[derive(Debug, Clone)]
pub struct TunnelSettings {
    /// Tunnels one principal may hold open at once.
    pub max_per_principal: usize,
    /// Tunnels all callers together may hold open into one namespace.
    pub max_per_namespace: usize,
    /// A tunnel with no byte either way for this long is closed.
    pub idle_timeout: Duration,
    /// How long the services list waits for each service to answer.
    pub probe_timeout: Duration,
    /// Bytes read from the service at a time (and so held per tunnel).
    pub buffer: usize,
    /// How often an open tunnel's caller is checked against the current
    /// team mapping (a revoked grant ends the tunnel).
    pub reauthorize_every: Duration,
}

impl Default for TunnelSettings {
    fn default() -> Self {
        Self {
            max_per_principal: 32,
            max_per_namespace: 128,
            idle_timeout: Duration::from_secs(3600),
            probe_timeout: Duration::from_secs(1),
            buffer: 64 * 1024,
            reauthorize_every: Duration::from_secs(30),
        }
    }
}

/// What carries a tunnel to its client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TunnelVia {
    /// A WebSocket of binary frames.
    WebSocket,
    /// A gRPC bidirectional stream.
    Grpc,
    /// The HTTP proxy with a bearer token (one audited connection per
    /// proxied request).
    Proxy,
    /// The HTTP proxy in a browser session: audited once, when the
    /// session began, not per request.
    Session,
    /// Krayne's own calls to Ray's Jobs API (the job actions are audited,
    /// not their connections).
    JobsApi,
}

impl TunnelVia {
    fn as_str(self) -> &'static str {
        match self {
            Self::WebSocket => "websocket",
            Self::Grpc => "grpc",
            Self::Proxy => "proxy",
            Self::Session => "browser-session",
            Self::JobsApi => "jobs-api",
        }
    }

    /// Whether each connection is audited (`service.connect`).
    fn audited(self) -> bool {
        matches!(self, Self::WebSocket | Self::Grpc | Self::Proxy)
    }
}

/// A tunnel's `pending` audit row until a transport takes it; a tunnel
/// dropped before it carried anything (its client left during the
/// upgrade) completes the row as failed.
struct PendingRow(Option<Row>);

impl Drop for PendingRow {
    fn drop(&mut self) {
        let Some((audit, mut entry, started)) = self.0.take() else {
            return;
        };
        failed(
            &mut entry,
            started,
            "the client left before the tunnel opened".into(),
            None,
        );
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { audit.finish(&entry).await });
        }
    }
}

/// How a tunnel ended. It counts as open until this is dropped, so a
/// shutdown waits for the transport to say why it closed.
pub struct Finished {
    /// Why.
    pub ended: Ended,
    /// What flowed.
    pub flowed: Flowed,
    _permit: Permit,
}

/// An open connection to a service, audited, ready to carry bytes.
pub struct Tunnel {
    /// The service's name.
    pub service: String,
    /// Its port in the head pod.
    pub port: u16,
    /// `http` or `tcp`.
    pub protocol: &'static str,
    stream: Box<dyn ServiceStream>,
    /// Whether the upstream can shut one direction only.
    can_half_close: bool,
    row: PendingRow,
    settings: TunnelSettings,
    /// What ends it (expiry, revocation, idleness, shutdown).
    guard: StreamGuard,
    /// Where its end is counted and audited.
    control: ControlPlane,
    _permit: Permit,
}

/// A service its caller may reach, and the head pod serving it now
/// ([`ControlPlane::reach`]); [`ControlPlane::connect`] connects.
#[derive(Clone)]
pub struct Reachable {
    namespace: String,
    name: String,
    service: DeclaredService,
    head: Arc<ObservedPod>,
    via: TunnelVia,
    /// The cluster's Ray token, sent to its dashboard (never to its other
    /// services).
    ray_token: Option<RayToken>,
}

impl Reachable {
    /// `service` on `head` of cluster `namespace/name`, reached `via`.
    pub(super) fn new(
        namespace: &str,
        name: &str,
        service: DeclaredService,
        head: Arc<ObservedPod>,
        via: TunnelVia,
        ray_token: Option<RayToken>,
    ) -> Self {
        Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            service,
            head,
            via,
            ray_token,
        }
    }

    /// What krayne sends in [`RAY_AUTH_HEADER`] to the service: the
    /// cluster's token, to its dashboard only.
    pub fn ray_authorization(&self) -> Option<String> {
        self.ray_token
            .as_ref()
            .filter(|_| self.service.name == "dashboard")
            .map(RayToken::bearer)
    }

    /// The head pod serving the service now (a replaced head has a new
    /// name).
    pub fn pod(&self) -> &str {
        &self.head.metadata.name
    }

    /// The service's name.
    pub fn service(&self) -> &str {
        self.service.name
    }
}

impl ControlPlane {
    /// Service `service`'s URL through this server's proxy: under the
    /// public URL when there is one, else the path on this server.
    pub fn proxy_url(&self, cluster: &ClusterRef, service: &str) -> String {
        let public = self.public_url().map(ToString::to_string).unwrap_or_default();
        let path = manifest::proxy_path(cluster.namespace(), cluster.name(), service);
        format!("{public}{path}/")
    }

    /// The cluster's services, each probed with a short connection
    /// (viewer).
    pub async fn services(&self, cx: &Context, cluster: &ClusterRef) -> Result<Vec<HeadService>, Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let target = self
            .authorize_cluster(cx, AuditAction::ClusterDescribe, cluster)
            .await?;
        let (declared, head, _) = self.head_of(cx, &target).await?;
        let probes = declared.iter().map(|s| self.probe(head.as_deref(), namespace, s));
        let states = join_all(probes).await;
        Ok(declared
            .iter()
            .zip(states)
            .map(|(s, state)| HeadService {
                name: s.name.to_owned(),
                port: s.port,
                protocol: s.protocol.to_owned(),
                state,
                tunnel_path: manifest::tunnel_path(namespace, name, s.name),
                // A service on the pod's loopback has no address on the
                // cluster network.
                proxy_url: (s.protocol == "http").then(|| self.proxy_url(&target, s.name)),
                base_path: s.base_path.clone(),
                in_cluster_url: head
                    .as_ref()
                    .and_then(|h| h.status.pod_ip.as_ref())
                    .filter(|_| !s.on_loopback)
                    .map(|ip| {
                        let scheme = if s.protocol == "http" { "http" } else { "tcp" };
                        format!("{scheme}://{ip}:{}", s.port)
                    }),
            })
            .collect())
    }

    /// Opens a tunnel to service `service` of cluster `name` (editor):
    /// audited (a durable `service.connect` row first, or nothing opens),
    /// within the caller's limit of open tunnels.
    pub async fn open_tunnel(
        &self,
        cx: &Context,
        cluster: &ClusterRef,
        service: &str,
        via: TunnelVia,
    ) -> Result<Tunnel, Error> {
        let reachable = self.reach(cx, cluster, service, via).await?;
        self.connect(cx, reachable).await
    }

    /// Service `service` of cluster `name` as the caller may reach it now
    /// (editor): the service and the head pod serving it, not yet
    /// connected (the proxy reuses a browser session's idle connection to
    /// that very pod). Refusals are audited.
    pub async fn reach(
        &self,
        cx: &Context,
        cluster: &ClusterRef,
        service: &str,
        via: TunnelVia,
    ) -> Result<Reachable, Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let target = self.authorize_cluster(cx, AuditAction::ServiceConnect, cluster).await?;
        let found = async {
            let (declared, head, ray_token) = self.head_of(cx, &target).await?;
            let http_only = matches!(via, TunnelVia::Proxy | TunnelVia::Session);
            let wanted = find_service(&declared, service, http_only)?;
            let Some(head) = head else {
                let status = self.get(cx, cluster).await.map(|c| c.status.to_string());
                return Err(Error::FailedPrecondition(format!(
                    "cluster {name} has no serving head pod yet (status {}); try again once it is ready",
                    status.unwrap_or_else(|_| "unknown".into())
                )));
            };
            Ok((wanted, head, ray_token))
        };
        match found.await {
            Ok((service, head, ray_token)) => Ok(Reachable {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                service,
                head,
                via,
                ray_token,
            }),
            Err(e) => {
                self.record_refusal(cx, AuditAction::ServiceConnect, Some(namespace), Some(name), &e)
                    .await;
                Err(e)
            }
        }
    }

    /// Connects to a reachable service: within the caller's limit of open
    /// tunnels, audited first (a durable `service.connect` row, or nothing
    /// opens) unless in a browser session.
    pub async fn connect(&self, cx: &Context, reachable: Reachable) -> Result<Tunnel, Error> {
        let Reachable {
            namespace,
            name,
            service: wanted,
            head,
            via,
            ray_token: _,
        } = reachable;
        let (namespace, name) = (namespace.as_str(), name.as_str());
        let tunnels = &self.settings.tunnels;
        // krayne's own connections (the reaper's reads of heads) are bounded
        // by the reaper's concurrency, not by callers' caps, which they
        // would otherwise eat into.
        let system = cx.is_system();
        let holders = Holders {
            subject: (
                &cx.principal.subject,
                if system { usize::MAX } else { tunnels.max_per_principal },
            ),
            namespace: (!system).then_some((namespace, tunnels.max_per_namespace)),
        };
        let permit = self.open_tunnels.take_for(holders);
        let Ok(permit) = permit else {
            let e = Error::RateLimited {
                retry_after: Duration::from_secs(1),
            };
            tracing::info!(subject = %cx.principal.subject, %namespace, full = ?permit.err(), "tunnel refused: too many open");
            self.record_refusal(cx, AuditAction::ServiceConnect, Some(namespace), Some(name), &e)
                .await;
            return Err(e);
        };
        let upstream = self.upstream()?;
        let target = target_of(namespace, &head, &wanted);
        let summary = json!({
            "service": wanted.name,
            "port": wanted.port,
            "via": via.as_str(),
            "upstream": upstream.mode(&target),
            "pod": head.metadata.name,
        });
        let mut entry = self.entry(cx, AuditAction::ServiceConnect, Some(namespace), Some(name), summary);
        let audited = via.audited();
        if audited && let Err(why) = self.audit.begin(&entry).await {
            metrics::counter!("krayne_audit_write_failures_total").increment(1);
            tracing::error!(request_id = %cx.meta.request_id, error = %why, "audit write failed; refusing the tunnel");
            return Err(Error::Unavailable(
                "the audit log cannot be written, so no tunnel was opened; try again shortly".into(),
            ));
        }
        let started = Instant::now();
        let stream = match upstream.connect(&target).await {
            Ok(s) => s,
            Err(e) => {
                if audited {
                    failed(&mut entry, started, e.to_string(), Some(&e));
                    self.audit.finish(&entry).await;
                }
                return Err(e);
            }
        };
        metrics::counter!("krayne_tunnels_opened_total", "via" => via.as_str()).increment(1);
        Ok(Tunnel {
            service: wanted.name.to_owned(),
            port: wanted.port,
            protocol: wanted.protocol,
            stream,
            can_half_close: upstream.half_close(&target),
            row: PendingRow(audited.then(|| (self.audit.clone(), entry, started))),
            settings: tunnels.clone(),
            guard: self.stream_guard(
                StreamKind::Tunnel,
                cx,
                Some(namespace),
                Some(name),
                Some(Action::Mutate),
                Some(tunnels.idle_timeout),
            ),
            control: self.clone(),
            _permit: permit,
        })
    }

    /// Cancelled when the server starts shutting down (proxied WebSockets
    /// end then).
    pub fn stopping(&self) -> CancellationToken {
        self.stopping.clone()
    }

    /// Waits until every tunnel has closed, at most `within`; returns
    /// whether they all have.
    pub async fn tunnels_closed(&self, within: Duration) -> bool {
        self.open_tunnels.all_closed(within).await
    }

    fn upstream(&self) -> Result<&Arc<dyn crate::domain::ServiceUpstream>, Error> {
        self.upstream
            .as_ref()
            .ok_or_else(|| Error::Unavailable("this server reaches no cluster services (no upstream set)".into()))
    }

    /// The services the cluster's head declares, and its serving head pod.
    pub(super) async fn head_of(
        &self,
        cx: &Context,
        target: &ClusterRef,
    ) -> Result<(Vec<DeclaredService>, Option<Arc<ObservedPod>>, Option<RayToken>), Error> {
        let rid = &cx.meta.request_id;
        let namespace = target.namespace();
        let cluster = self
            .store
            .get(target, rid)
            .await
            .map_err(|e| e.in_namespace(namespace))?;
        let pods = self.store.cluster_pods(target, rid).await?;
        let views: Vec<&ObservedPod> = pods.iter().map(|p| &**p).collect();
        let head = manifest::serving_head(&views).map(|h| h.metadata.name.clone());
        let head = head.and_then(|n| pods.iter().find(|p| p.metadata.name == n).cloned());
        let ray_token = match self.ray_auth_of(&cluster) {
            manifest::RayAuth::Token { token, .. } => Some(token),
            manifest::RayAuth::Open | manifest::RayAuth::Unknown => None,
        };
        Ok((manifest::declared_services(&cluster), head, ray_token))
    }

    fn probe<'a>(
        &'a self,
        head: Option<&'a ObservedPod>,
        namespace: &'a str,
        service: &'a DeclaredService,
    ) -> BoxFuture<'a, ServiceState> {
        Box::pin(async move {
            let (Some(head), Ok(upstream)) = (head, self.upstream()) else {
                return ServiceState::Pending;
            };
            let target = target_of(namespace, head, service);
            match tokio::time::timeout(self.settings.tunnels.probe_timeout, upstream.probe(&target)).await {
                Ok(true) => ServiceState::Available,
                _ => ServiceState::Unreachable,
            }
        })
    }
}

/// Where `service` of `head` is reached.
fn target_of(namespace: &str, head: &ObservedPod, service: &DeclaredService) -> ServiceTarget {
    ServiceTarget {
        site: head.site.clone(),
        namespace: namespace.to_owned(),
        pod: head.metadata.name.to_string(),
        pod_ip: head.status.pod_ip.as_ref().map(ToString::to_string),
        port: service.port,
        on_loopback: service.on_loopback,
    }
}

/// Service `service` among those a cluster declares (`NotFound` if it
/// declares none such); with `http_only`, one that speaks HTTP.
pub(super) fn find_service(
    declared: &[DeclaredService],
    service: &str,
    http_only: bool,
) -> Result<DeclaredService, Error> {
    let Some(wanted) = declared.iter().find(|s| s.name == service).cloned() else {
        return Err(not_declared(declared, service));
    };
    if http_only && wanted.protocol != "http" {
        return Err(Error::invalid(
            "service",
            format!("{service} speaks TCP, not HTTP: reach it through a tunnel (krayne tunnel)"),
        ));
    }
    Ok(wanted)
}

/// Why a cluster has no service `service`: one of krayne's own that this
/// cluster was created without is said to be off (and how clusters get
/// it); any other name is not found.
fn not_declared(declared: &[DeclaredService], service: &str) -> Error {
    let key = match service {
        "notebook" => "notebook",
        "code-server" => "code_server",
        "ssh" => "ssh",
        _ => {
            return Error::NotFound {
                kind: crate::domain::ResourceKind::Service,
                name: service.to_owned(),
                namespace: None,
            };
        }
    };
    let has: Vec<&str> = declared.iter().map(|s| s.name).collect();
    Error::FailedPrecondition(format!(
        "{service} is not enabled on this cluster (it has {}): clusters have it unless created with \
         services.{key}: false",
        if has.is_empty() {
            "none".to_owned()
        } else {
            has.join(", ")
        }
    ))
}

/// A tunnel's row as it fails before carrying anything: why, and the
/// caller's answer when there was one.
fn failed(entry: &mut AuditEntry, started: Instant, why: String, answered: Option<&Error>) {
    entry.outcome = Outcome::Failed;
    entry.http_status = answered.map(Error::http_status);
    entry.grpc_code = answered.map(|e| e.grpc_code().1.to_owned());
    entry.error = Some(why);
    entry.completed_at = Some(jiff::Timestamp::now().to_string());
    entry.duration_ms = Some(millis(started.elapsed()));
}

impl Tunnel {
    /// The connection itself, for a transport that speaks a protocol over
    /// it (the HTTP proxy): it counts what flows and completes the audit
    /// row when dropped.
    pub fn into_connection(self) -> super::connection::ServiceConnection {
        let Self {
            stream,
            mut row,
            _permit,
            ..
        } = self;
        super::connection::ServiceConnection::new(stream, row.0.take(), _permit)
    }

    /// Carries bytes both ways until one side closes, the tunnel idles
    /// out or the server shuts down, then completes its audit row with
    /// what flowed. `incoming` ending closes the tunnel, unless
    /// `half_close` (then only the service's side of it is shut, where the
    /// upstream can, and the service's answer still flows until it
    /// closes). `gone` resolving means the client has left (a transport
    /// that cannot see it from `incoming` after a half-close says so).
    pub async fn run<I, O, E, G>(self, mut incoming: I, mut outgoing: O, half_close: bool, gone: G) -> Finished
    where
        I: Stream<Item = Result<Bytes, E>> + Unpin + Send,
        O: Sink<Bytes> + Unpin + Send,
        E: std::fmt::Display,
        G: Future<Output = ()> + Send,
    {
        let Self {
            stream,
            mut row,
            settings,
            guard,
            control,
            _permit,
            can_half_close,
            ..
        } = self;
        let Some((audit, mut entry, started)) = row.0.take() else {
            return Finished {
                ended: Ended::ClientClosed,
                flowed: Flowed::default(),
                _permit,
            };
        };
        let (mut from_service, mut to_service) = stream.split();
        let (up, down) = (AtomicU64::new(0), AtomicU64::new(0));
        let activity = guard.activity();
        let client_side = async {
            while let Some(chunk) = incoming.next().await {
                let Ok(bytes) = chunk else {
                    return Ended::ClientClosed;
                };
                if let Err(e) = to_service.write_all(&bytes).await {
                    return Ended::ServiceError(e.to_string());
                }
                up.fetch_add(bytes.len() as u64, Ordering::Relaxed);
                activity.touch();
            }
            if !half_close {
                return Ended::ClientClosed;
            }
            // Kubernetes' WebSocket port-forward cannot close one
            // direction: closing would lose the answer, so the service is
            // left to end the connection.
            if can_half_close {
                let _ = to_service.close().await;
            }
            gone.await;
            Ended::ClientClosed
        };
        let service_side = async {
            let mut buf = vec![0u8; settings.buffer];
            loop {
                match from_service.read(&mut buf).await {
                    Ok(0) => return Ended::ServiceClosed,
                    Ok(n) => {
                        if outgoing.send(Bytes::copy_from_slice(&buf[..n])).await.is_err() {
                            return Ended::ClientClosed;
                        }
                        down.fetch_add(n as u64, Ordering::Relaxed);
                        activity.touch();
                    }
                    Err(e) => return Ended::ServiceError(e.to_string()),
                }
            }
        };
        let ended = tokio::select! {
            e = client_side => e,
            e = service_side => e,
            e = guard.ended() => e,
        };
        let flowed = Flowed {
            to_service: up.load(Ordering::Relaxed),
            to_client: down.load(Ordering::Relaxed),
        };
        completed(&mut entry, started, flowed, &ended.reason());
        audit.finish(&entry).await;
        control.stream_ended(&guard, &ended).await;
        Finished { ended, flowed, _permit }
    }
}
