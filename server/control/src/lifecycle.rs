//! A replica's life as the platform sees it. It is ready while it can
//! serve, whatever its dependencies say: reads come from the watch cache,
//! watches and tunnels go on while Postgres or the API server is away, and
//! each mutation is refused fail-closed by its use case (no audit row, no
//! change). Taking every replica out of service because one dependency
//! blinked would turn a partial outage into a whole one.
//!
//! On SIGTERM it first drains (not ready, still serving, while endpoints
//! forget it), then ends the streams a client resumes (watches, waits,
//! followed logs: the client reconnects to another replica, missing
//! nothing), and last, when the grace period is over, the tunnels.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use tokio_util::sync::CancellationToken;

use super::ControlPlane;

/// What a dependency answered when last probed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependency {
    /// `kubernetes` or `audit_database`.
    pub name: &'static str,
    /// `None` until first probed.
    pub up: Option<bool>,
    /// Why it is down.
    pub error: Option<String>,
}

/// What `/readyz` reports.
#[derive(Debug, Clone)]
pub struct Readiness {
    /// Kubernetes has not answered yet (nor the watch cache listed): not
    /// ready. Once it has, its outages no longer decide.
    pub starting: bool,
    /// Draining after a shutdown signal: not ready.
    pub draining: bool,
    /// The dependencies, as last probed (they do not decide readiness).
    pub dependencies: Vec<Dependency>,
    /// Problems an operator must fix that do not stop serving.
    pub problems: Vec<String>,
    /// Each site and, when its Kubernetes does not answer, since when
    /// (docs/sites.md); empty with one Kubernetes.
    pub sites: Vec<(String, Option<String>)>,
}

impl Readiness {
    /// Whether the replica should receive traffic.
    pub fn ready(&self) -> bool {
        !self.starting && !self.draining
    }
}

/// The replica's shutdown stages and its dependencies' last answers.
pub(crate) struct Lifecycle {
    draining: CancellationToken,
    /// Cancelled at the end of the grace period: tunnels end.
    pub(crate) closing: CancellationToken,
    dependencies: Mutex<Vec<Dependency>>,
    /// When the dependencies were last probed; held while a probe runs.
    probed_at: tokio::sync::Mutex<Option<Instant>>,
    /// Kubernetes (and the watch cache) answered once.
    started: AtomicBool,
}

impl Default for Lifecycle {
    fn default() -> Self {
        let unprobed = |name| Dependency {
            name,
            up: None,
            error: None,
        };
        Self {
            draining: CancellationToken::new(),
            closing: CancellationToken::new(),
            dependencies: Mutex::new(vec![unprobed(KUBERNETES), unprobed(AUDIT_DATABASE)]),
            probed_at: tokio::sync::Mutex::new(None),
            started: AtomicBool::new(false),
        }
    }
}

const KUBERNETES: &str = "kubernetes";
const AUDIT_DATABASE: &str = "audit_database";

/// Longest one probe may take: a slow dependency is a down one.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// Answers older than this are refreshed (in the background) when
/// readiness is asked for.
const FRESH: Duration = Duration::from_secs(2);

impl ControlPlane {
    /// A shutdown signal came: report not ready (so endpoints stop sending
    /// new connections here) but go on serving.
    pub fn begin_drain(&self) {
        self.lifecycle.draining.cancel();
        metrics::gauge!("krayne_shutting_down").set(1.0);
    }

    /// The grace period is over: open tunnels and proxied WebSockets end
    /// (with a close that says why, and their audit rows).
    pub fn close_tunnels(&self) {
        self.lifecycle.closing.cancel();
    }

    /// Whether this replica is ready for traffic, and why not. Until
    /// Kubernetes has answered once it is asked now (at most three
    /// seconds); the dependencies are as last probed, answers older than
    /// two seconds refreshed in the background, never waited for.
    pub async fn readiness(&self) -> Readiness {
        if !self.lifecycle.started.load(Ordering::Acquire)
            && matches!(tokio::time::timeout(PROBE_TIMEOUT, self.store.ping()).await, Ok(Ok(())))
        {
            self.lifecycle.started.store(true, Ordering::Release);
        }
        let stale = self
            .lifecycle
            .probed_at
            .try_lock()
            .is_ok_and(|at| at.is_none_or(|at| at.elapsed() > FRESH));
        if stale && let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let service = self.clone();
            runtime.spawn(async move {
                if let Ok(probed_at) = service.lifecycle.probed_at.try_lock() {
                    service.probe_dependencies(probed_at).await;
                }
            });
        }
        let mut problems = self.store.problems();
        problems.extend(self.audit.problems());
        Readiness {
            starting: !self.lifecycle.started.load(Ordering::Acquire),
            draining: self.lifecycle.draining.is_cancelled(),
            dependencies: self
                .lifecycle
                .dependencies
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
            problems,
            sites: self
                .store
                .site_health()
                .into_iter()
                .map(|(site, down)| (site.to_string(), down.map(|t| t.to_string())))
                .collect(),
        }
    }

    /// Probes Kubernetes and the audit database now, for
    /// [`ControlPlane::readiness`] and the gauge
    /// `krayne_dependency_up{dependency}` (a background task's round).
    pub(crate) async fn probe_dependencies_now(&self) {
        let probed_at = self.lifecycle.probed_at.lock().await;
        self.probe_dependencies(probed_at).await;
    }

    /// Probes both dependencies, holding `probed_at` (the probe lock).
    async fn probe_dependencies(&self, mut probed_at: tokio::sync::MutexGuard<'_, Option<Instant>>) {
        let timed = |probe| async move {
            match tokio::time::timeout(PROBE_TIMEOUT, probe).await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(format!("{e}")),
                Err(_) => Err(format!("no answer within {} s", PROBE_TIMEOUT.as_secs())),
            }
        };
        let (kube, audit) = tokio::join!(timed(self.store.ping()), timed(self.audit.ping()));
        if kube.is_ok() {
            self.lifecycle.started.store(true, Ordering::Release);
        }
        let answers = [(KUBERNETES, kube), (AUDIT_DATABASE, audit)];
        let mut dependencies = Vec::with_capacity(answers.len());
        for (name, answer) in answers {
            metrics::gauge!("krayne_dependency_up", "dependency" => name).set(if answer.is_ok() { 1.0 } else { 0.0 });
            dependencies.push(Dependency {
                name,
                up: Some(answer.is_ok()),
                error: answer.err(),
            });
        }
        *self.lifecycle.dependencies.lock().unwrap_or_else(|p| p.into_inner()) = dependencies;
        *probed_at = Some(Instant::now());
    }
}

/// Shared by every clone of a [`ControlPlane`].
pub(crate) type Shared = Arc<Lifecycle>;
