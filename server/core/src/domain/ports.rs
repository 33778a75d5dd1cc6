//! The ports the use cases need: where clusters live and where the audit
//! trail goes. `k8s` and `audit` implement them; `service` uses only these.

use std::sync::Arc;

use futures::stream::BoxStream;

use super::{
    Authorized, ClusterPatch, ClusterRef, Error, KeptRun, ObjectMeta, ObservedCluster, ObservedEvent, ObservedPod,
    ObservedRayJob, PodLogOptions, RenderedCluster, RequestId, Site,
    audit::{AuditEntry, AuditFilter},
    sites::{SiteFacts, SiteSpec},
};

/// What a delete requires of the object it deletes, as Kubernetes'
/// `DeleteOptions.preconditions`: the very object a decision was made on,
/// not one deleted and created again under its name since, nor one
/// changed since.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preconditions {
    /// The object's `metadata.uid`.
    pub uid: String,
    /// Its `metadata.resourceVersion`.
    pub resource_version: String,
}

impl Preconditions {
    /// `cluster` as it was observed; `None` when it lacks a uid or a
    /// version (then nothing can be required of it).
    pub fn of(cluster: &ObservedCluster) -> Option<Self> {
        Self::of_object(&cluster.metadata)
    }

    /// As [`Self::of`], for any object (a RayJob).
    pub fn of_object(meta: &ObjectMeta) -> Option<Self> {
        Some(Self {
            uid: meta.uid.as_ref()?.to_string(),
            resource_version: meta.resource_version.as_deref()?.to_owned(),
        })
    }
}

/// The pods of several clusters, grouped by cluster in the order asked
/// for, each group by pod name: one list for a page of clusters rather
/// than one per cluster.
#[derive(Debug, Default)]
pub struct PodsOf {
    pods: Vec<Arc<ObservedPod>>,
    ends: Vec<usize>,
}

impl PodsOf {
    /// Room for `clusters` groups.
    pub fn with_capacity(clusters: usize) -> Self {
        Self {
            pods: Vec::with_capacity(clusters * 2),
            ends: Vec::with_capacity(clusters),
        }
    }

    /// Appends the next cluster's pods.
    pub fn push_cluster(&mut self, pods: impl IntoIterator<Item = Arc<ObservedPod>>) {
        self.pods.extend(pods);
        self.ends.push(self.pods.len());
    }

    /// The pods of the `i`th cluster asked for; none past the last.
    pub fn of(&self, i: usize) -> &[Arc<ObservedPod>] {
        let start = i.checked_sub(1).and_then(|p| self.ends.get(p)).copied().unwrap_or(0);
        let end = self.ends.get(i).copied().unwrap_or(start);
        self.pods.get(start..end).unwrap_or_default()
    }
}

/// A change seen while watching one cluster and its pods.
#[derive(Debug, Clone)]
pub enum ClusterChange {
    /// The RayCluster as it now is.
    Cluster(Box<ObservedCluster>),
    /// The RayCluster is gone.
    ClusterDeleted,
    /// One of its pods as it now is.
    Pod(Box<ObservedPod>),
    /// One of its pods (by name) is gone.
    PodDeleted(super::Atom),
}

/// Which clusters a [`ClusterFeed`] says to read again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FeedChange {
    /// This cluster, or one of its pods, changed (or is gone).
    Cluster {
        /// Namespace.
        namespace: super::Atom,
        /// Cluster name.
        name: super::Atom,
    },
    /// This RayJob changed (or is gone).
    RayJob {
        /// Namespace.
        namespace: super::Atom,
        /// RayJob name.
        name: super::Atom,
    },
    /// Any may have: a relist replaced what the feed holds, or changes
    /// were missed.
    All,
    /// A site stopped answering or answers again ([`ClusterFeed::sites_down`]
    /// says which are down now): its clusters are shown as their last
    /// known state, marked, while it does not (docs/sites.md).
    Sites,
}

/// A store's own copy of every cluster with its pods, and of every
/// RayJob, kept current by
/// Kubernetes' watches: live watches of clusters are served from it, so a
/// watcher costs Kubernetes nothing.
pub trait ClusterFeed: Send + Sync + 'static {
    /// Changes from now on, as they reach the copy.
    fn changes(&self) -> BoxStream<'static, FeedChange>;
    /// Whether everything has been listed once (before that the copy is
    /// incomplete).
    fn ready(&self) -> bool;
    /// The clusters of `namespace` (of every namespace when `None`).
    fn clusters(&self, namespace: Option<&str>) -> Vec<Arc<ObservedCluster>>;
    /// One cluster.
    fn cluster(&self, namespace: &str, name: &str) -> Option<Arc<ObservedCluster>>;
    /// One cluster's pods.
    fn pods(&self, namespace: &str, cluster: &str) -> Vec<Arc<ObservedPod>>;
    /// The RayJobs of `namespace` (of every namespace when `None`).
    fn rayjobs(&self, namespace: Option<&str>) -> Vec<Arc<ObservedRayJob>>;
    /// One RayJob.
    fn rayjob(&self, namespace: &str, name: &str) -> Option<Arc<ObservedRayJob>>;
    /// The sites that do not answer now, each since when (its clusters
    /// are their last known state); a feed of one Kubernetes has none.
    fn sites_down(&self) -> Vec<(Site, jiff::Timestamp)> {
        Vec::new()
    }
}

/// Kubernetes as the use cases see it. A cluster is named by one
/// [`ClusterRef`]; every write takes the [`Authorized`] proof that the
/// caller (or krayne's own automation) was allowed it. Every call carries
/// the request id, which implementations pass on so the two audit trails
/// can be joined.
#[async_trait::async_trait]
pub trait ClusterStore: Send + Sync + 'static {
    /// Names of every namespace.
    async fn namespaces(&self, request_id: &RequestId) -> Result<Vec<String>, Error>;
    /// Names of the namespaces that `patterns` cover (a name, or a prefix
    /// ending in `*`), sorted: what a caller's grants reach. A store that
    /// keeps namespaces by name looks the patterns up, so the answer costs
    /// what it returns, not the platform's namespace count.
    async fn namespaces_matching(&self, patterns: &[&str], request_id: &RequestId) -> Result<Vec<String>, Error> {
        let mut names: Vec<String> = self
            .namespaces(request_id)
            .await?
            .into_iter()
            .filter(|n| patterns.iter().any(|p| super::principal::pattern_covers(p, n)))
            .collect();
        names.sort_unstable();
        Ok(names)
    }
    /// How many namespaces exist.
    async fn namespace_count(&self, request_id: &RequestId) -> Result<usize, Error> {
        Ok(self.namespaces(request_id).await?.len())
    }
    /// Creates a RayCluster; with `dry_run`, Kubernetes checks it and
    /// stores nothing.
    /// `cluster` names what `rendered` is (a store refuses a mismatch).
    async fn create(
        &self,
        cluster: &Authorized<ClusterRef>,
        rendered: &RenderedCluster,
        dry_run: bool,
        request_id: &RequestId,
    ) -> Result<ObservedCluster, Error>;
    /// One RayCluster. Reads hand out shared objects: a cache serves the
    /// same ones to every reader without copying them.
    async fn get(&self, cluster: &ClusterRef, request_id: &RequestId) -> Result<Arc<ObservedCluster>, Error>;
    /// One RayCluster as Kubernetes has it now, bypassing any cache: for a
    /// write that must retry after a conflict with a newer version.
    async fn get_latest(&self, cluster: &ClusterRef, request_id: &RequestId) -> Result<Arc<ObservedCluster>, Error> {
        self.get(cluster, request_id).await
    }
    /// RayClusters of one namespace, or of all when `None` (all that
    /// krayne covers: with namespaced RBAC, those of its Roles' namespaces,
    /// each listed in its own namespace).
    async fn list(&self, namespace: Option<&str>, request_id: &RequestId) -> Result<Vec<Arc<ObservedCluster>>, Error>;
    /// Up to `limit` RayClusters of `namespaces` (sorted) that come after
    /// `after` (namespace, name), in namespace then name order: one page
    /// costs what the page holds, not what the namespaces hold, where the
    /// store can seek (a cache); this default lists and skips.
    async fn list_page(
        &self,
        namespaces: &[String],
        after: Option<(&str, &str)>,
        limit: usize,
        request_id: &RequestId,
    ) -> Result<Vec<Arc<ObservedCluster>>, Error> {
        let mut page = Vec::new();
        for (ns, from) in super::resume_points(namespaces, after) {
            if page.len() >= limit {
                break;
            }
            let mut clusters = self.list(Some(ns), request_id).await?;
            clusters.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
            let later = |c: &Arc<ObservedCluster>| from.is_none_or(|f| c.metadata.name.as_str() > f);
            page.extend(clusters.into_iter().filter(later).take(limit - page.len()));
        }
        Ok(page)
    }
    /// Ray pods of the named clusters of one namespace, grouped by
    /// cluster in the order of `clusters`.
    async fn pods_of(&self, namespace: &str, clusters: &[&str], request_id: &RequestId) -> Result<PodsOf, Error> {
        let index: std::collections::HashMap<&str, usize> = clusters.iter().enumerate().map(|(i, c)| (*c, i)).collect();
        let mut grouped: Vec<Vec<Arc<ObservedPod>>> = vec![Vec::new(); clusters.len()];
        for pod in self.pods(namespace, request_id).await? {
            let at = pod.cluster_name().and_then(|c| index.get(c).copied());
            if let Some(pods) = at.and_then(|i| grouped.get_mut(i)) {
                pods.push(pod);
            }
        }
        let mut of = PodsOf::with_capacity(clusters.len());
        for mut pods in grouped {
            pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
            of.push_cluster(pods);
        }
        Ok(of)
    }
    /// The store's own copy of the clusters, when it keeps one (a watch
    /// cache); live watches need it.
    fn feed(&self) -> Option<Arc<dyn ClusterFeed>> {
        None
    }
    /// RayClusters of one namespace as Kubernetes has them now, bypassing
    /// any cache: quota admission must count a cluster another replica
    /// created a moment ago.
    async fn list_latest(&self, namespace: &str, request_id: &RequestId) -> Result<Vec<Arc<ObservedCluster>>, Error> {
        self.list(Some(namespace), request_id).await
    }
    /// Ray pods of one namespace, of every cluster.
    async fn pods(&self, namespace: &str, request_id: &RequestId) -> Result<Vec<Arc<ObservedPod>>, Error>;
    /// Ray pods of one cluster.
    async fn cluster_pods(&self, cluster: &ClusterRef, request_id: &RequestId) -> Result<Vec<Arc<ObservedPod>>, Error>;
    /// Events about one cluster and about its pods named `pods`.
    async fn cluster_events(
        &self,
        cluster: &ClusterRef,
        pods: &[&str],
        request_id: &RequestId,
    ) -> Result<Vec<Arc<ObservedEvent>>, Error>;
    /// Applies a patch the core made (a scale); it names the version it
    /// was made from, so a stale one fails with `Conflict`.
    async fn patch(
        &self,
        cluster: &Authorized<ClusterRef>,
        patch: &ClusterPatch,
        request_id: &RequestId,
    ) -> Result<ObservedCluster, Error>;
    /// One container's log of pod `pod` (`pods/log`), at most
    /// `options.limit_bytes` of it.
    async fn pod_log(
        &self,
        namespace: &str,
        pod: &str,
        options: &PodLogOptions,
        request_id: &RequestId,
    ) -> Result<String, Error> {
        let _ = (namespace, pod, options, request_id);
        Err(Error::Unavailable("this store reads no pod logs".into()))
    }
    /// The same log from `options`' start, then as it is written, until
    /// the container ends; chunks of text.
    async fn follow_pod_log(
        &self,
        namespace: &str,
        pod: &str,
        options: &PodLogOptions,
        request_id: &RequestId,
    ) -> Result<BoxStream<'static, Result<String, Error>>, Error> {
        let _ = (namespace, pod, options, request_id);
        Err(Error::Unavailable("this store reads no pod logs".into()))
    }
    /// Deletes a RayCluster (Kubernetes removes its pods and service);
    /// with `only_if`, only while it is still that object (else
    /// `Conflict`).
    async fn delete(
        &self,
        cluster: &Authorized<ClusterRef>,
        only_if: Option<&Preconditions>,
        request_id: &RequestId,
    ) -> Result<(), Error>;
    /// Makes `object` (a companion the core built for `cluster`) what
    /// Kubernetes holds under `name` in the cluster's namespace: server-side apply as krayne's field
    /// manager, forced (krayne owns these objects; one left over from a
    /// deleted cluster of the same name is taken over).
    async fn apply_companion(
        &self,
        cluster: &Authorized<ClusterRef>,
        kind: Companion,
        name: &str,
        object: &serde_json::Value,
        request_id: &RequestId,
    ) -> Result<(), Error>;
    /// The NetworkPolicies of `namespace` as Kubernetes holds them, by
    /// name, each reduced to what krayne compares (krayne never reads
    /// Secrets).
    async fn network_policies(
        &self,
        namespace: &str,
        request_id: &RequestId,
    ) -> Result<std::collections::HashMap<String, crate::manifest::HeldPolicy>, Error>;
    /// Deletes a companion (a token Secret staged for a cluster that was
    /// not made); gone already is success.
    async fn delete_companion(
        &self,
        cluster: &Authorized<ClusterRef>,
        kind: Companion,
        name: &str,
        request_id: &RequestId,
    ) -> Result<(), Error>;
    /// Creates a core/v1 Event (the object the core built) about
    /// `cluster`, in its namespace.
    async fn create_event(
        &self,
        cluster: &Authorized<ClusterRef>,
        event: &serde_json::Value,
        request_id: &RequestId,
    ) -> Result<(), Error>;
    /// Every change to the cluster and its pods from now on, starting with
    /// their current state.
    async fn watch(
        &self,
        cluster: &ClusterRef,
        request_id: &RequestId,
    ) -> Result<BoxStream<'static, Result<ClusterChange, Error>>, Error>;
    /// Whether Kubernetes answers (for readiness). A store over several
    /// sites answers while any one does; each site's own health is in
    /// [`Self::site_health`].
    async fn ping(&self) -> Result<(), Error>;
    /// The sites this store spans, each with what placement needs to know
    /// of `namespace` there (docs/sites.md); empty: one Kubernetes, the
    /// `local` site.
    async fn sites_for(&self, namespace: &str, request_id: &RequestId) -> Vec<(SiteSpec, SiteFacts)> {
        let _ = (namespace, request_id);
        Vec::new()
    }
    /// Each site's name and, when it does not answer, since when; empty:
    /// one Kubernetes.
    fn site_health(&self) -> Vec<(Site, Option<jiff::Timestamp>)> {
        Vec::new()
    }
    /// Problems an operator must fix that do not stop the server from
    /// serving (reported by `/readyz`), e.g. a rule missing from its RBAC.
    fn problems(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Objects krayne puts beside a cluster it manages, owned by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Companion {
    /// `networking.k8s.io/v1` NetworkPolicy: who may reach its pods.
    NetworkPolicy,
    /// `v1` Secret: its Ray token, for KubeRay to give its pods.
    Secret,
}

impl Companion {
    /// The kind's name, for logs and errors.
    pub fn kind(self) -> &'static str {
        match self {
            Self::NetworkPolicy => "NetworkPolicy",
            Self::Secret => "Secret",
        }
    }
}

/// What krayne reads of Kueue, where the platform runs it (docs/kueue.md):
/// read only, in the namespaces the team mapping gives a LocalQueue.
#[async_trait::async_trait]
pub trait KueueReads: Send + Sync + 'static {
    /// The Workloads of `namespace` for the jobs (RayClusters) of `uids`.
    async fn workloads(
        &self,
        namespace: &str,
        uids: &[String],
        request_id: &RequestId,
    ) -> Result<Vec<super::kueue::ObservedWorkload>, Error>;
    /// The pending Workloads of LocalQueue `queue` in `namespace`, in the
    /// order Kueue serves them (its visibility API); an error when that
    /// API does not answer.
    async fn pending(
        &self,
        namespace: &str,
        queue: &str,
        request_id: &RequestId,
    ) -> Result<Vec<super::kueue::PendingWorkload>, Error>;
}

/// Where RayJobs live: KubeRay's, in Kubernetes, each named by its
/// namespace and name (a [`ClusterRef`]).
#[async_trait::async_trait]
pub trait RayJobStore: Send + Sync + 'static {
    /// Creates the RayJob `manifest` (the core built it for `rayjob`);
    /// with `dry_run`, Kubernetes checks it and stores nothing.
    async fn create_rayjob(
        &self,
        rayjob: &Authorized<ClusterRef>,
        manifest: &serde_json::Value,
        dry_run: bool,
        request_id: &RequestId,
    ) -> Result<ObservedRayJob, Error>;
    /// One RayJob.
    async fn get_rayjob(&self, rayjob: &ClusterRef, request_id: &RequestId) -> Result<ObservedRayJob, Error>;
    /// The RayJobs of one namespace, or of all when `None`.
    async fn list_rayjobs(&self, namespace: Option<&str>, request_id: &RequestId)
    -> Result<Vec<ObservedRayJob>, Error>;
    /// Applies `patch` (a JSON patch pinned to the version it was decided
    /// on: a stale one is `Conflict`) to a RayJob: the queue's admission.
    async fn patch_rayjob(
        &self,
        rayjob: &Authorized<ClusterRef>,
        patch: &ClusterPatch,
        request_id: &RequestId,
    ) -> Result<ObservedRayJob, Error>;
    /// Deletes a RayJob (with `only_if`, only while it is still that
    /// object: krayne's own automation deletes what it decided on, never a
    /// RayJob made again under the name); KubeRay stops its job and
    /// Kubernetes removes its cluster (owned by it).
    async fn delete_rayjob(
        &self,
        rayjob: &Authorized<ClusterRef>,
        only_if: Option<&Preconditions>,
        request_id: &RequestId,
    ) -> Result<(), Error>;
}

/// What krayne keeps of RayJobs' ended jobs (their driver log's tail and
/// exit code), in the audit database, for after their clusters are gone.
#[async_trait::async_trait]
pub trait RunLedger: Send + Sync + 'static {
    /// Keeps `run`; a run kept already (same uid) stays as it was.
    async fn keep(&self, run: &KeptRun) -> Result<(), Error>;
    /// What was kept of RayJob `namespace/name` with `uid`.
    async fn kept(&self, namespace: &str, name: &str, uid: &str) -> Result<Option<KeptRun>, Error>;
}

/// Where the audit trail goes.
#[async_trait::async_trait]
pub trait AuditSink: Send + Sync + 'static {
    /// Durably records a mutation about to reach Kubernetes (outcome
    /// `pending`). An error means the mutation must not happen; a row the
    /// failed write may have stored all the same is the implementation's
    /// to settle as failed, not left pending.
    async fn begin(&self, entry: &AuditEntry) -> Result<(), Error>;
    /// Durably records a row whose id must be new, as [`Self::begin`]:
    /// `false` when a row with that id is already stored (on any replica:
    /// a browser session's sign-in link is spent this way, once).
    async fn begin_unique(&self, entry: &AuditEntry) -> Result<bool, Error>;
    /// Records how a begun mutation ended. Never fails the request: an
    /// implementation retries or reports on its own.
    async fn finish(&self, entry: &AuditEntry);
    /// Records a request that changed nothing (denied, invalid, reads).
    async fn record(&self, entry: &AuditEntry);
    /// Whether the sink can write now (for readiness).
    async fn ping(&self) -> Result<(), Error>;
    /// Problems an operator must fix that do not stop serving (reported by
    /// `/readyz`), e.g. a schema older than this binary needs.
    fn problems(&self) -> Vec<String> {
        Vec::new()
    }
    /// Resolves when rows queued in memory so far are written (shutdown).
    async fn flush(&self) {}
    /// Rows matching `filter`, newest first, at most `limit`, older than
    /// the row `before` (an id from a previous page) when given.
    async fn query(&self, filter: &AuditFilter, limit: usize, before: Option<&str>) -> Result<Vec<AuditEntry>, Error>;
}

/// A namespace's quota admission, held: no other admission of that
/// namespace runs (on any replica sharing the lock) until it is dropped.
pub struct AdmissionGuard {
    #[allow(dead_code, reason = "held for its Drop")]
    held: Box<dyn Send>,
    /// Set when the lease the guard stands for lapsed or was taken.
    lost: Option<Arc<std::sync::atomic::AtomicBool>>,
}

impl AdmissionGuard {
    /// A guard that releases when `held` is dropped.
    pub fn new(held: impl Send + 'static) -> Self {
        Self {
            held: Box::new(held),
            lost: None,
        }
    }

    /// A guard standing for a lease that may be lost while held (another
    /// replica could then admit): `lost` says so.
    pub fn with_lease(held: impl Send + 'static, lost: Arc<std::sync::atomic::AtomicBool>) -> Self {
        Self {
            held: Box::new(held),
            lost: Some(lost),
        }
    }

    /// What tells whether the admission is still serialized, to ask
    /// before each write it admits (shareable across an `await`, which the
    /// guard is not).
    pub fn hold(&self) -> AdmissionHold {
        AdmissionHold(self.lost.clone())
    }

    /// [`AdmissionHold::check`] of this guard.
    pub fn held(&self) -> Result<(), Error> {
        self.hold().check()
    }
}

/// Whether an admission still holds its lease.
#[derive(Debug, Clone, Default)]
pub struct AdmissionHold(Option<Arc<std::sync::atomic::AtomicBool>>);

impl AdmissionHold {
    /// `Unavailable` once the admission is no longer serialized (its lease
    /// could not be renewed in time, or another replica took it).
    pub fn check(&self) -> Result<(), Error> {
        match &self.0 {
            Some(lost) if lost.load(std::sync::atomic::Ordering::Acquire) => Err(Error::Unavailable(
                "quota admission lost its lease in the audit database before it was written; nothing was \
                 changed, try again"
                    .into(),
            )),
            _ => Ok(()),
        }
    }
}

impl std::fmt::Debug for AdmissionGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdmissionGuard")
    }
}

/// Serializes quota admission per namespace, across every replica that
/// shares it (an advisory lock in the audit database): two creates on two
/// replicas cannot both pass a limit only one of them fits.
#[async_trait::async_trait]
pub trait AdmissionLock: Send + Sync + 'static {
    /// Waits for `namespace`'s admission; an error (the lock's backend is
    /// down or too slow) means nothing may be admitted.
    async fn lock(&self, namespace: &str) -> Result<AdmissionGuard, Error>;
}

/// Whether this replica may act for all of them: one replica at a time
/// runs the lifecycle reaper (leader election across replicas).
#[async_trait::async_trait]
pub trait Leadership: Send + Sync + 'static {
    /// Waits until this replica leads.
    async fn leading(&self);
    /// Whether this replica holds the lease now, as Kubernetes has it (not
    /// as remembered): the fence before each action, so that a replica cut
    /// off from the API server, whose lease another has taken, acts no more.
    async fn holds(&self) -> bool;
    /// The time by the clock every replica shares (the API server's, for
    /// a Lease): what due times are judged by.
    fn now(&self) -> jiff::Timestamp {
        jiff::Timestamp::now()
    }
}

/// When something last used a cluster through krayne.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterUse {
    /// The cluster's namespace.
    pub namespace: String,
    /// The cluster.
    pub name: String,
    /// When.
    pub at: jiff::Timestamp,
}

/// Uses of clusters (tunnels, proxied connections, browser sessions,
/// followed logs) that every replica records and the lifecycle reaper
/// reads: replicas share no memory, so a cluster used through one is seen
/// in use by the leader wherever it runs.
#[async_trait::async_trait]
pub trait ActivityLedger: Send + Sync + 'static {
    /// Records `uses`; of two uses of a cluster the later is kept.
    async fn record(&self, uses: &[ClusterUse]) -> Result<(), Error>;
    /// Each cluster's last recorded use.
    async fn last_uses(&self) -> Result<Vec<ClusterUse>, Error>;
    /// Forgets uses before `before` (clusters long gone).
    async fn forget(&self, before: jiff::Timestamp) -> Result<u64, Error>;
}

/// A namespace's lifecycle policy as the reaper last saw it in force, the
/// one before it, and since when it has been in force: kept in the audit
/// database, so every replica (and a restarted one) knows a new or changed
/// policy from a settled one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyRecord {
    /// The namespace.
    pub namespace: String,
    /// The policy before the last change (its JSON); `None` when the
    /// namespace had none.
    pub previous: Option<String>,
    /// When the current policy was first seen.
    pub since: jiff::Timestamp,
}

/// The lifecycle policies the reaper has seen, per namespace.
#[async_trait::async_trait]
pub trait PolicyLedger: Send + Sync + 'static {
    /// Records that `policies` (namespace, policy JSON) are in force at
    /// `now` — a namespace whose policy differs from the one recorded
    /// starts anew, one no longer listed is forgotten — and returns each
    /// listed namespace's record.
    async fn observe(&self, policies: &[(String, String)], now: jiff::Timestamp) -> Result<Vec<PolicyRecord>, Error>;
}

/// The documents a token issuer publishes: its OpenID discovery document
/// and its key set. Fetched over plain HTTPS for an identity provider, or
/// through the Kubernetes connection for the cluster's service-account
/// issuer (whose documents sit behind the API server's authentication).
#[async_trait::async_trait]
pub trait IssuerDocuments: Send + Sync + 'static {
    /// The JSON document at `url` (absolute, or a path on the API server).
    async fn get_json(&self, url: &str) -> Result<serde_json::Value, String>;
}

/// Kubernetes' own word on a ServiceAccount token (a `TokenReview`):
/// whether the API server still takes it — its ServiceAccount (and pod)
/// still the ones it was issued for, not revoked.
#[async_trait::async_trait]
pub trait TokenReviews: Send + Sync + 'static {
    /// Whether the API server authenticates `token` for `audience`;
    /// `Err` when it could not be asked (unreachable, refused).
    async fn review(&self, token: &str, audience: &str) -> Result<bool, String>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str) -> Arc<ObservedPod> {
        let mut p = ObservedPod::default();
        p.metadata.name = name.into();
        Arc::new(p)
    }

    #[test]
    fn pods_of_several_clusters_come_back_by_cluster() {
        let mut of = PodsOf::with_capacity(3);
        of.push_cluster([pod("a-head"), pod("a-w")]);
        of.push_cluster([]);
        of.push_cluster([pod("c-head")]);
        let names = |i| of.of(i).iter().map(|p| p.metadata.name.to_string()).collect::<Vec<_>>();
        assert_eq!(names(0), ["a-head", "a-w"]);
        assert!(names(1).is_empty());
        assert_eq!(names(2), ["c-head"]);
        assert!(names(3).is_empty(), "past the last cluster: none");
        assert!(PodsOf::default().of(0).is_empty());
    }
}
