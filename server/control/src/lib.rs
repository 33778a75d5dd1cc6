//! krayne's use cases, written once for both transports: authorize →
//! validate → audit → act → audit, and who the caller is (`auth`). Sees
//! Kubernetes and the audit log only through the core's ports, and knows no
//! transport: no axum, tonic, utoipa or tower-http in its tree
//! (`server/tests/layering.rs`).
#![forbid(unsafe_code)]

mod activity;
mod admission;
mod audit_log;
mod audit_trail;
pub mod auth;
mod authz;
pub mod background;
mod clusters;
mod companions;
mod connection;
mod denials;
#[cfg(feature = "test-util")]
pub mod fakes;
pub mod fleet;
mod heads;
mod identity;
mod idleness;
mod jobs;
mod keep;
mod lifecycle;
mod pod_logs;
mod queue;
mod quotas;
mod ray_credentials;
mod ray_logs;
mod rayjob_runner;
mod rayjobs;
mod reaper;
mod sessions;
mod streams;
mod suspend;
mod tunnels;
mod usage;
mod wait;
mod watch;

use std::{sync::Arc, time::Duration};

pub use admission::RateLimit;
pub use clusters::{CreateInput, Created};
pub use companions::KeptClusters;
pub use connection::ServiceConnection;
pub use denials::DenialSettings;
pub use jobs::{Stopped, Submitted, Uploaded};
pub use keep::KeepInput;
pub use krayne_core::domain::{LogStream, PackageBody};
pub use krayne_core::manifest::ScaleInput;
pub use queue::QUEUE_SUBJECT;
pub use quotas::NamespaceQuota;
pub use ray_credentials::RayCredentials;
pub use rayjobs::{Run, RunInput};
pub use reaper::{LIFECYCLE_SUBJECT, LifecycleMode, Reaped, ReaperLimits};
pub use sessions::{SessionSettings, SignInLink, SignedIn};
pub use streams::kit::Flowed;
pub use streams::{Activity, Ended, StreamGuard, StreamKind, Touching};
pub use suspend::ResumeInput;
use tokio_util::sync::CancellationToken;
pub use tunnels::{Finished, Reachable, Tunnel, TunnelSettings, TunnelVia};
pub use usage::{UsageQuery, UsageRecorder, UsageReport};
pub use watch::{ClusterWatch, WatchSettings};

use krayne_core::{domain, manifest};

use crate::{
    domain::{AuditSink, ClusterStore, Error, Principal, ServiceUpstream, VersionInfo, audit::RequestMeta},
    manifest::ManifestSettings,
};

/// One request's caller and circumstances.
#[derive(Debug, Clone)]
pub struct Context {
    /// The authenticated caller.
    pub principal: Principal,
    /// Request id, transport, client.
    pub meta: RequestMeta,
}

impl Context {
    /// Whether krayne itself acts (the lifecycle reaper), not a caller:
    /// its reads and connections are bounded by its own concurrency, not
    /// by callers' shares and caps.
    pub fn is_system(&self) -> bool {
        self.meta.transport == domain::audit::Transport::System
    }
}

/// Limits the use cases enforce.
#[derive(Debug, Clone)]
pub struct ControlSettings {
    /// Manifest defaults (the Ray image).
    pub manifest: ManifestSettings,
    /// Wait timeout when none is given.
    pub default_wait: Duration,
    /// Longest wait allowed.
    pub max_wait: Duration,
    /// How long a cluster's head may stay unschedulable before a wait
    /// gives up on it; zero waits the whole timeout (for platforms whose
    /// node autoscaler adds room).
    pub wait_unschedulable_grace: Duration,
    /// Attempts at a write that meets a conflict.
    pub conflict_retries: usize,
    /// Whether reads (get, list, describe, wait) are audited too.
    pub audit_reads: bool,
    /// Requests each principal may make (`None`: unlimited).
    pub rate_limit: Option<RateLimit>,
    /// Refused authentications: their rate per source and how they are
    /// aggregated in the audit log.
    pub denials: DenialSettings,
    /// What `version` answers.
    pub version: VersionInfo,
    /// Limits of tunnels to clusters' services.
    pub tunnels: TunnelSettings,
    /// Limits of live watches.
    pub watches: WatchSettings,
    /// Browser sessions to clusters' HTTP services.
    pub sessions: SessionSettings,
    /// Where users reach this server (`--public-url`), when it was said.
    pub public_url: Option<domain::PublicUrl>,
    /// Per-service hosts (`--apps-domain`), when on.
    pub apps_domain: Option<domain::AppsDomain>,
    /// Krayne's own pods, which the NetworkPolicy put beside every cluster
    /// it creates admits besides the cluster's pods; `None`: no policies.
    pub network_policy: Option<manifest::PolicyPeers>,
    /// Largest working-dir package uploaded to a head, in bytes.
    pub package_limit: u64,
    /// Where people sign in, as `/.well-known/krayne` advertises it.
    pub login: Option<domain::LoginSettings>,
    /// What bounds the lifecycle reaper's actions.
    pub reaper: ReaperLimits,
    /// The key clusters' Ray tokens are derived with; with it, clusters
    /// krayne creates require Ray's token authentication
    /// (`manifest.ray_token_auth`), and krayne sends theirs to them.
    pub ray_auth: Option<domain::ray_auth::RayAuthKey>,
    /// How often the companion keeper goes over every cluster (its
    /// NetworkPolicy and Ray token Secret).
    pub companions_every: Duration,
    /// How often the RayJob runner goes over krayne's RayJobs (submitting
    /// jobs whose heads serve, keeping the logs of those that ended).
    pub rayjobs_every: Duration,
    /// How long a RayJob krayne made stays once its job has ended (its
    /// cluster went after its TTL) before the runner deletes it; `None`:
    /// kept until someone deletes it.
    pub rayjob_retention: Option<Duration>,
}

impl Default for ControlSettings {
    fn default() -> Self {
        Self {
            manifest: ManifestSettings::default(),
            default_wait: Duration::from_secs(300),
            max_wait: Duration::from_secs(3600),
            wait_unschedulable_grace: Duration::from_secs(60),
            conflict_retries: 5,
            audit_reads: false,
            rate_limit: RateLimit::new(50, 100),
            denials: DenialSettings::default(),
            version: VersionInfo {
                server_version: env!("CARGO_PKG_VERSION").to_owned(),
                commit: "unknown".to_owned(),
                api_version: "v1".to_owned(),
                features: Vec::new(),
            },
            tunnels: TunnelSettings::default(),
            watches: WatchSettings::default(),
            sessions: SessionSettings::default(),
            public_url: None,
            apps_domain: None,
            network_policy: None,
            package_limit: 100 * 1024 * 1024,
            login: None,
            reaper: ReaperLimits::default(),
            ray_auth: None,
            companions_every: Duration::from_secs(600),
            rayjobs_every: Duration::from_secs(3),
            rayjob_retention: Some(Duration::from_secs(7 * 24 * 3600)),
        }
    }
}

/// krayne's use cases, over the ports: the one value both transports
/// hold and call (clusters, identity, quotas, jobs, tunnels, sessions,
/// watches, the audit log).
#[derive(Clone)]
pub struct ControlPlane {
    store: Arc<dyn ClusterStore>,
    audit: Arc<dyn AuditSink>,
    settings: Arc<ControlSettings>,
    admission: Arc<admission::Admission>,
    denials: Arc<denials::Denials>,
    /// How clusters' services are reached (`None`: they are not).
    upstream: Option<Arc<dyn ServiceUpstream>>,
    /// Open tunnels per principal.
    open_tunnels: Arc<streams::kit::OpenStreams>,
    /// Pod logs followed now, per caller.
    open_log_follows: Arc<streams::kit::OpenStreams>,
    /// Live watches: their hub (started by the first) and how many each
    /// principal has open.
    watches: Arc<watch::Watches>,
    /// The team mapping's current view of a caller, for open tunnels.
    authenticator: Option<auth::Authenticator>,
    /// Cancelled when the server stops accepting connections: waits,
    /// watches and followed logs end cleanly (their clients resume).
    stopping: CancellationToken,
    /// Draining, and the tunnels' end.
    lifecycle: lifecycle::Shared,
    /// Serializes quota admission per namespace.
    quota_lock: Arc<dyn domain::AdmissionLock>,
    /// Uses of clusters through this replica, until recorded.
    uses: Arc<activity::UseBook>,
    /// Every replica's recorded uses, and how often this one records
    /// (`None`: none are recorded, and the reaper sees no cluster in use
    /// through krayne).
    activity_ledger: Option<(Arc<dyn domain::ActivityLedger>, Duration)>,
    /// The lifecycle policies the reaper has seen (`None`: every policy is
    /// taken as settled).
    policy_ledger: Option<Arc<dyn domain::PolicyLedger>>,
    /// Where usage intervals are recorded and read (`None`: no usage is
    /// recorded).
    usage_ledger: Option<Arc<dyn domain::UsageLedger>>,
    /// Clusters' Ray heads (`None`: they are not asked).
    ray: Option<Arc<dyn domain::RayHeads>>,
    /// Which heads the reaper asks, and when.
    head_schedule: Arc<reaper::HeadSchedule>,
    /// Where RayJobs live (`None`: this server runs none).
    rayjobs: Option<Arc<dyn domain::RayJobStore>>,
    /// What is kept of RayJobs' ended jobs (`None`: nothing is).
    run_ledger: Option<Arc<dyn domain::RunLedger>>,
    /// What Kueue says of the clusters it admits (`None`: nothing is
    /// read; docs/kueue.md).
    kueue: Option<Arc<dyn domain::KueueReads>>,
}

impl ControlPlane {
    /// A service over `store`, auditing to `audit`.
    pub fn new(store: Arc<dyn ClusterStore>, audit: Arc<dyn AuditSink>, mut settings: ControlSettings) -> Self {
        // Clusters require a token exactly when krayne can derive theirs.
        settings.manifest.ray_token_auth = settings.ray_auth.is_some();
        let admission = Arc::new(admission::Admission::new(settings.rate_limit));
        let denials = Arc::new(denials::Denials::new(settings.denials));
        Self {
            store,
            audit,
            settings: Arc::new(settings),
            admission,
            denials,
            upstream: None,
            open_tunnels: Arc::new(streams::kit::OpenStreams::counted_by("krayne_tunnels_open")),
            open_log_follows: Arc::new(streams::kit::OpenStreams::counted_by("krayne_pod_log_follows_open")),
            watches: Arc::default(),
            authenticator: None,
            stopping: CancellationToken::new(),
            lifecycle: lifecycle::Shared::default(),
            quota_lock: Arc::new(quotas::LocalAdmissionLock::default()),
            uses: Arc::default(),
            activity_ledger: None,
            policy_ledger: None,
            ray: None,
            usage_ledger: None,
            head_schedule: Arc::default(),
            rayjobs: None,
            run_ledger: None,
            kueue: None,
        }
    }

    /// Reads Kueue's Workloads and visibility API through `reads`, for the
    /// namespaces the team mapping gives a LocalQueue.
    #[must_use]
    pub fn with_kueue(mut self, reads: Arc<dyn domain::KueueReads>) -> Self {
        self.kueue = Some(reads);
        self
    }

    /// Runs jobs with a cluster of their own as KubeRay RayJobs in
    /// `store`.
    #[must_use]
    pub fn with_rayjobs(mut self, store: Arc<dyn domain::RayJobStore>) -> Self {
        self.rayjobs = Some(store);
        self
    }

    /// Keeps what RayJobs' ended jobs leave (their driver log's tail, exit
    /// code) in `ledger`, for after their clusters are gone.
    #[must_use]
    pub fn with_run_ledger(mut self, ledger: Arc<dyn domain::RunLedger>) -> Self {
        self.run_ledger = Some(ledger);
        self
    }

    /// Reaches clusters' services through `upstream`.
    #[must_use]
    pub fn with_upstream(mut self, upstream: Arc<dyn ServiceUpstream>) -> Self {
        self.upstream = Some(upstream);
        self
    }

    /// Records usage in `ledger` (shared by every replica; the leader's
    /// recorder writes) and reads reports from it.
    #[must_use]
    pub fn with_usage_ledger(mut self, ledger: Arc<dyn domain::UsageLedger>) -> Self {
        self.usage_ledger = Some(ledger);
        self
    }

    /// Asks clusters' Ray heads (jobs, Ray logs, idleness) through `ray`,
    /// on connections made as [`Self::with_upstream`]'s.
    #[must_use]
    pub fn with_ray(mut self, ray: Arc<dyn domain::RayHeads>) -> Self {
        self.ray = Some(ray);
        self
    }

    /// Serializes quota admission with `lock` (shared by every replica)
    /// instead of within this process.
    #[must_use]
    pub fn with_quota_lock(mut self, lock: Arc<dyn domain::AdmissionLock>) -> Self {
        self.quota_lock = lock;
        self
    }

    /// Records uses of clusters in `ledger` (shared by every replica) every
    /// `every` (the background driver's activity recorder), and has the
    /// lifecycle reaper read every replica's there.
    #[must_use]
    pub fn with_activity_ledger(mut self, ledger: Arc<dyn domain::ActivityLedger>, every: Duration) -> Self {
        self.activity_ledger = Some((ledger, every));
        self
    }

    /// Has the lifecycle reaper record policies in `ledger` (shared by
    /// every replica), so a new or changed one only reports until it has
    /// settled.
    #[must_use]
    pub fn with_policy_ledger(mut self, ledger: Arc<dyn domain::PolicyLedger>) -> Self {
        self.policy_ledger = Some(ledger);
        self
    }

    /// Re-checks open tunnels' callers against `auth`'s current mapping.
    #[must_use]
    pub fn with_authenticator(mut self, auth: auth::Authenticator) -> Self {
        self.authenticator = Some(auth);
        self
    }

    /// Largest working-dir package uploaded to a head, in bytes.
    pub fn package_limit(&self) -> u64 {
        self.settings.package_limit
    }

    /// Where users reach this server, when it was configured.
    pub fn public_url(&self) -> Option<&domain::PublicUrl> {
        self.settings.public_url.as_ref()
    }

    /// Per-service hosts, when on.
    pub fn apps_domain(&self) -> Option<&domain::AppsDomain> {
        self.settings.apps_domain.as_ref()
    }

    /// Refuses the request (`RateLimited`) when its caller is over the
    /// per-principal rate. Transports call it right after authenticating.
    pub fn admit(&self, cx: &Context) -> Result<(), Error> {
        self.admission.admit(&cx.principal)
    }

    /// The server stops accepting connections: open waits, watches and
    /// followed logs end now, with `Unavailable`, so clients reconnect (to
    /// another replica) instead of being cut off when the grace period
    /// ends. Tunnels go on until [`ControlPlane::close_tunnels`].
    pub fn begin_shutdown(&self) {
        self.stopping.cancel();
    }

    /// Writes audit rows still queued in memory (and the counts of denials
    /// not yet summarised), waiting at most `within`.
    pub async fn flush_audit(&self, within: Duration) {
        for row in self.denials.close(true) {
            self.audit.record(&row).await;
        }
        if tokio::time::timeout(within, self.audit.flush()).await.is_err() {
            tracing::warn!("audit rows still queued at shutdown were not all written");
        }
    }

    /// The server's version, build and switched-on features (no caller
    /// needed: clients ask before they authenticate).
    pub fn version(&self) -> VersionInfo {
        self.settings.version.clone()
    }

    /// What a client needs before it signs in (no caller needed).
    pub fn client_settings(&self) -> domain::ClientSettings {
        domain::ClientSettings {
            login: self.settings.login.clone(),
            clusters: domain::ClusterDefaults {
                ray_image: self.settings.manifest.default_image.clone(),
                ray_token_auth: self.settings.ray_auth.is_some(),
            },
        }
    }
}
