//! The one rule for every long-lived stream — TCP tunnels, proxied
//! WebSockets, followed job logs, watches: it lasts only while its caller
//! still may use it. A [`StreamGuard`] ends it when the caller's
//! credential (token or browser session) expires, when the team mapping
//! no longer gives the caller the role (re-checked every
//! `reauthorize_every`, and on every mapping reload for watches), when
//! nothing has flowed for the idle timeout, and when the server shuts
//! down. Every end is counted (`krayne_streams_ended_total{stream,reason}`);
//! an end the server chose for the caller (revoked, expired, idle) is also
//! an audit row (`stream.end`), whatever the stream's own rows say.

use std::{
    future::Future,
    io,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    task::{Context as TaskContext, Poll},
    time::{Duration, Instant},
};

use futures::{Stream, StreamExt as _, stream::BoxStream};
use serde_json::json;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::sync::CancellationToken;

pub(crate) mod kit;

use super::{Context, ControlPlane};
use crate::domain::{
    Action, AuthFailure, ClusterRef, Error, Role,
    audit::{AuditAction, Outcome},
};
use kit::millis;

/// The long-lived streams krayne serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    /// A TCP tunnel (WebSocket or gRPC).
    Tunnel,
    /// A WebSocket through the HTTP proxy (bearer token or browser session).
    ProxiedWebSocket,
    /// An answer through the HTTP proxy, as long as it flows (a log
    /// followed in the dashboard, a stream of events).
    ProxiedResponse,
    /// A job's log, followed.
    JobLog,
    /// A pod's log, followed.
    PodLog,
    /// A live watch of clusters.
    Watch,
}

impl StreamKind {
    /// `tunnel`, `proxied-websocket`, `job-log`, `watch`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tunnel => "tunnel",
            Self::ProxiedWebSocket => "proxied-websocket",
            Self::ProxiedResponse => "proxied-response",
            Self::JobLog => "job-log",
            Self::PodLog => "pod-log",
            Self::Watch => "watch",
        }
    }
}

/// Why a stream ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// The service closed the connection (a replaced or deleted head pod
    /// does too).
    ServiceClosed,
    /// The client closed (or went away).
    ClientClosed,
    /// No byte either way for the idle timeout.
    IdleTimeout(Duration),
    /// The server is shutting down.
    ShuttingDown,
    /// The caller lost the role the stream needs on the namespace.
    Revoked {
        /// The namespace.
        namespace: String,
        /// The role the stream needs there.
        role: Role,
    },
    /// The caller's token or browser session expired.
    CredentialExpired,
    /// The connection to the service failed.
    ServiceError(String),
}

impl Ended {
    /// A short reason, for audit rows and close frames.
    pub fn reason(&self) -> String {
        match self {
            Self::ServiceClosed => "the service closed the connection".into(),
            Self::ClientClosed => "the client closed the stream".into(),
            Self::IdleTimeout(d) => format!("idle for {} s", d.as_secs()),
            Self::ShuttingDown => "the server is shutting down; reconnect (another replica serves)".into(),
            Self::Revoked { namespace, role } => {
                let article = match role {
                    Role::Viewer => "a",
                    Role::Editor | Role::Admin => "an",
                };
                format!("the caller is no longer {article} {role} of namespace {namespace}")
            }
            Self::CredentialExpired => {
                "the caller's credential (token or browser session) expired: sign in again".into()
            }
            Self::ServiceError(e) => format!("the connection to the service failed: {e}"),
        }
    }

    /// The reason as a metric label.
    pub fn label(&self) -> &'static str {
        match self {
            Self::ServiceClosed => "service_closed",
            Self::ClientClosed => "client_closed",
            Self::IdleTimeout(_) => "idle",
            Self::ShuttingDown => "shutdown",
            Self::Revoked { .. } => "revoked",
            Self::CredentialExpired => "expired",
            Self::ServiceError(_) => "service_error",
        }
    }

    /// Whether the server ended the stream for its caller's sake (and so
    /// audits it).
    fn chosen_for_the_caller(&self) -> bool {
        matches!(
            self,
            Self::IdleTimeout(_) | Self::Revoked { .. } | Self::CredentialExpired
        )
    }

    /// The error a stream that speaks in errors ends with.
    pub fn as_error(&self) -> Error {
        match self {
            Self::Revoked { .. } => Error::PermissionDenied(self.reason()),
            Self::CredentialExpired => Error::Unauthenticated(AuthFailure::ExpiredToken),
            Self::IdleTimeout(_) | Self::ShuttingDown | Self::ServiceClosed | Self::ServiceError(_) => {
                Error::Unavailable(format!("stream ended: {}", self.reason()))
            }
            Self::ClientClosed => Error::Unavailable(self.reason()),
        }
    }
}

/// When a stream last carried something.
#[derive(Debug, Clone)]
pub struct Activity(Arc<(Instant, AtomicU64)>);

impl Activity {
    fn new() -> Self {
        Self(Arc::new((Instant::now(), AtomicU64::new(0))))
    }

    /// Something flowed now.
    pub fn touch(&self) {
        let (started, last) = &*self.0;
        last.store(millis(started.elapsed()), Ordering::Relaxed);
    }

    /// How long nothing has flowed.
    fn quiet(&self) -> Duration {
        let (started, last) = &*self.0;
        started
            .elapsed()
            .saturating_sub(Duration::from_millis(last.load(Ordering::Relaxed)))
    }
}

/// Whether a stream's caller still may use it.
type StillAllowed = Arc<dyn Fn() -> bool + Send + Sync>;

/// What ends one long-lived stream (see the module's docs).
#[derive(Clone)]
pub struct StreamGuard {
    kind: StreamKind,
    cx: Context,
    namespace: Option<String>,
    cluster: Option<String>,
    /// The credential's expiry, as an instant of this process.
    expires: Option<tokio::time::Instant>,
    idle: Option<Duration>,
    every: Duration,
    /// The role the stream needs all along, when it is re-checked here.
    needs: Option<Role>,
    still_allowed: Option<StillAllowed>,
    stopping: CancellationToken,
    activity: Activity,
    started: Instant,
    /// The stream's use of its cluster, for the lifecycle reaper.
    _use: Option<Arc<crate::activity::UseHold>>,
}

impl StreamGuard {
    /// The stream's activity, to touch as things flow.
    pub fn activity(&self) -> Activity {
        self.activity.clone()
    }

    /// Resolves when the stream must end: the credential expires, the
    /// caller loses the role, the stream idles out, or the server shuts
    /// down. Never otherwise.
    pub async fn ended(&self) -> Ended {
        let expired = async {
            match self.expires {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let idle = async {
            let Some(limit) = self.idle else {
                return std::future::pending().await;
            };
            loop {
                let quiet = self.activity.quiet();
                if quiet >= limit {
                    return;
                }
                tokio::time::sleep(limit - quiet).await;
            }
        };
        let revoked = async {
            let Some(still_allowed) = &self.still_allowed else {
                return std::future::pending().await;
            };
            let mut every = tokio::time::interval(self.every);
            every.tick().await;
            loop {
                every.tick().await;
                if !still_allowed() {
                    return;
                }
            }
        };
        tokio::select! {
            biased;
            () = self.stopping.cancelled() => Ended::ShuttingDown,
            () = expired => Ended::CredentialExpired,
            () = revoked => Ended::Revoked {
                namespace: self.namespace.clone().unwrap_or_default(),
                role: self.needs.unwrap_or(Role::Viewer),
            },
            () = idle => Ended::IdleTimeout(self.idle.unwrap_or_default()),
        }
    }

    /// Guards `items`: each one touches the activity; when the guard ends
    /// the stream, one last item says why (`Ended::as_error`), and the end
    /// is counted and audited through `service`.
    pub fn guard_items<T: Send + 'static>(
        self,
        service: ControlPlane,
        items: impl Stream<Item = Result<T, Error>> + Send + 'static,
    ) -> BoxStream<'static, Result<T, Error>> {
        struct State<T> {
            items: BoxStream<'static, Result<T, Error>>,
            ended: Pin<Box<dyn Future<Output = Ended> + Send>>,
            guard: StreamGuard,
            service: ControlPlane,
            done: bool,
        }
        // Dropped before its end: the client went away.
        impl<T> Drop for State<T> {
            fn drop(&mut self) {
                if !self.done && self.guard.kind != StreamKind::ProxiedResponse {
                    let stream = self.guard.kind.as_str();
                    let reason = Ended::ClientClosed.label();
                    metrics::counter!("krayne_streams_ended_total", "stream" => stream, "reason" => reason)
                        .increment(1);
                }
            }
        }
        let ending = self.clone();
        let state = State {
            items: items.boxed(),
            ended: Box::pin(async move { ending.ended().await }),
            guard: self,
            service,
            done: false,
        };
        futures::stream::unfold(state, |mut st| async move {
            if st.done {
                return None;
            }
            tokio::select! {
                item = st.items.next() => match item {
                    Some(item) => {
                        st.guard.activity.touch();
                        Some((item, st))
                    }
                    None => {
                        st.done = true;
                        st.service.stream_ended(&st.guard, &Ended::ServiceClosed).await;
                        None
                    }
                },
                ended = &mut st.ended => {
                    st.done = true;
                    st.service.stream_ended(&st.guard, &ended).await;
                    Some((Err(ended.as_error()), st))
                }
            }
        })
        .boxed()
    }
}

impl ControlPlane {
    /// The guard of a stream `cx` opens on `namespace` (and `cluster`;
    /// `None`: every namespace the caller may view), which needs `action`
    /// there all along (`None`: the stream re-checks its caller itself, as
    /// a watch does on every mapping reload), and
    /// ends after `idle` without traffic (`None`: never idle, as a watch
    /// whose bookmarks flow).
    pub(super) fn stream_guard(
        &self,
        kind: StreamKind,
        cx: &Context,
        namespace: Option<&str>,
        cluster: Option<&str>,
        action: Option<Action>,
        idle: Option<Duration>,
    ) -> StreamGuard {
        let expires = cx.principal.expires_at.and_then(|at| {
            let left = at.saturating_sub(jiff::Timestamp::now().as_second());
            tokio::time::Instant::now().checked_add(Duration::from_secs(u64::try_from(left).unwrap_or(0)))
        });
        let still_allowed = match (action, namespace, self.authenticator.clone()) {
            (Some(action), Some(namespace), Some(auth)) => {
                let (principal, namespace) = (cx.principal.clone(), namespace.to_owned());
                Some(Arc::new(move || auth.refresh(&principal).may(action, &namespace)) as StillAllowed)
            }
            _ => None,
        };
        StreamGuard {
            kind,
            cx: cx.clone(),
            namespace: namespace.map(str::to_owned),
            cluster: cluster.map(str::to_owned),
            expires,
            idle,
            every: self.settings.tunnels.reauthorize_every,
            needs: action.map(Action::needs),
            still_allowed,
            // A tunnel cannot be resumed: it keeps its connection until
            // the grace period is over. Everything else is resumed.
            stopping: match kind {
                StreamKind::Tunnel | StreamKind::ProxiedWebSocket => self.lifecycle.closing.clone(),
                StreamKind::ProxiedResponse | StreamKind::JobLog | StreamKind::PodLog | StreamKind::Watch => {
                    self.stopping.clone()
                }
            },
            activity: Activity::new(),
            started: Instant::now(),
            // A watch uses no cluster; the reaper's own calls are not use,
            // nor is a viewer's (or another team's viewer's) reading: only
            // those who may edit a cluster keep it from being culled.
            _use: match (namespace, cluster) {
                (Some(namespace), Some(cluster))
                    if kind != StreamKind::Watch && !cx.is_system() && cx.principal.may(Action::Mutate, namespace) =>
                {
                    Some(Arc::new(self.uses.hold(namespace, cluster)))
                }
                _ => None,
            },
        }
    }

    /// The guard of a WebSocket `cx` opened through the HTTP proxy to a
    /// service of cluster `name`: it needs the editor role all along, and
    /// idles out as a tunnel does.
    pub fn proxied_websocket_guard(&self, cx: &Context, cluster: &ClusterRef) -> StreamGuard {
        self.stream_guard(
            StreamKind::ProxiedWebSocket,
            cx,
            Some(cluster.namespace()),
            Some(cluster.name()),
            Some(Action::Mutate),
            Some(self.settings.tunnels.idle_timeout),
        )
    }

    /// The guard of an answer to `cx`'s request through the HTTP proxy to a
    /// service of cluster `name`, for as long as its body flows.
    pub fn proxied_response_guard(&self, cx: &Context, cluster: &ClusterRef) -> StreamGuard {
        self.stream_guard(
            StreamKind::ProxiedResponse,
            cx,
            Some(cluster.namespace()),
            Some(cluster.name()),
            Some(Action::Mutate),
            Some(self.settings.tunnels.idle_timeout),
        )
    }

    /// Counts how a stream ended; an end chosen for the caller (revoked,
    /// expired, idle) is written to the audit log as `stream.end`.
    pub async fn stream_ended(&self, guard: &StreamGuard, ended: &Ended) {
        let stream = guard.kind.as_str();
        // Every proxied answer ends: only the ends chosen for the caller
        // are worth a count there.
        if guard.kind == StreamKind::ProxiedResponse && !ended.chosen_for_the_caller() {
            return;
        }
        metrics::counter!("krayne_streams_ended_total", "stream" => stream, "reason" => ended.label()).increment(1);
        if !ended.chosen_for_the_caller() {
            return;
        }
        tracing::info!(
            subject = %guard.cx.principal.subject,
            stream,
            namespace = guard.namespace.as_deref().unwrap_or("*"),
            reason = %ended.reason(),
            "stream ended by the server"
        );
        let summary = json!({
            "stream": stream,
            "reason": ended.label(),
            "ended": ended.reason(),
            "open_seconds": guard.started.elapsed().as_secs(),
        });
        let mut entry = self.entry(
            &guard.cx,
            AuditAction::StreamEnd,
            guard.namespace.as_deref(),
            guard.cluster.as_deref(),
            summary,
        );
        let error = ended.as_error();
        entry.outcome = Outcome::Succeeded;
        entry.http_status = Some(error.http_status());
        entry.grpc_code = Some(error.grpc_code().1.to_owned());
        entry.error = Some(ended.reason());
        entry.completed_at = Some(jiff::Timestamp::now().to_string());
        entry.duration_ms = Some(millis(guard.started.elapsed()));
        self.audit.record(&entry).await;
    }
}

/// I/O that touches an [`Activity`] whenever bytes move either way (a
/// proxied WebSocket's client side).
pub struct Touching<T> {
    io: T,
    activity: Activity,
}

impl<T> Touching<T> {
    /// `io`, touching `activity`.
    pub fn new(io: T, activity: Activity) -> Self {
        Self { io, activity }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Touching<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Touching<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
