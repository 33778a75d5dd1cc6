//! The watch cache: kube-runtime watchers keep RayClusters, Ray pods,
//! RayJobs, events and namespaces in memory, so reads cost Kubernetes nothing.
//!
//! kube-runtime's own reflector store has no secondary index, and `get`
//! needs a cluster's pods without scanning every pod, so the watchers feed
//! [`state::Collection`]s indexed by namespace and cluster instead.

mod changes;
mod feed;
mod follow;
mod lists;
mod state;
mod store;
mod watched;

use std::{
    collections::{BTreeSet, HashMap},
    sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard},
    time::Duration,
};

use tokio::sync::{broadcast, watch};

pub use self::{
    lists::WHOLE_LISTS_UP_TO,
    store::{CacheOptions, CachedClusterStore},
};
use self::{
    state::{Collection, reached},
    watched::{NamespaceView, View},
};
use crate::domain::{Atom, ObservedCluster, ObservedEvent, ObservedPod, ObservedRayJob};

/// The kinds of object the cache holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    Clusters,
    Pods,
    RayJobs,
    Events,
    Namespaces,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Clusters => krayne_core::manifest::RAYCLUSTERS,
            Self::Pods => "pods",
            Self::RayJobs => krayne_core::manifest::RAYJOBS,
            Self::Events => "events",
            Self::Namespaces => "namespaces",
        }
    }
}

/// A change waiters may care about; for a change (not a deletion) they
/// read the object from the cache. Notices name objects rather than hold
/// them: the channel keeps its last `NOTICES` values, and holding objects
/// would keep thousands of stale versions alive.
#[derive(Debug)]
pub(crate) enum Notice {
    /// A RayCluster changed, or was deleted.
    Cluster { namespace: Atom, name: Atom, deleted: bool },
    /// A pod of a cluster changed, or was deleted.
    Pod {
        namespace: Atom,
        cluster: Atom,
        name: Atom,
        deleted: bool,
    },
    /// A RayJob changed, or was deleted.
    RayJob { namespace: Atom, name: Atom },
    /// A relist replaced clusters, pods or RayJobs: re-read what you
    /// follow.
    Resync,
}

/// What a write must be visible as before reads of it use the cache.
#[derive(Debug, Clone)]
pub(crate) enum Expect {
    /// The cluster at this resourceVersion or later.
    Version(String),
    /// The cluster gone, or its deletion begun.
    Gone,
}

/// Notices kept for waiters that fall behind; past that they re-read.
const NOTICES: usize = 4096;

/// Where a watcher looks: every namespace, or one.
type Scope = Option<String>;

#[derive(Debug, Clone, Copy, Default)]
struct Health {
    /// Listed completely at least once.
    synced: bool,
    /// Watching without an error since its last list.
    serving: bool,
}

/// The cached objects and the state of the watchers feeding them.
pub(crate) struct Cache {
    clusters: RwLock<Collection<ObservedCluster>>,
    pods: RwLock<Collection<ObservedPod>>,
    rayjobs: RwLock<Collection<ObservedRayJob>>,
    events: RwLock<Collection<ObservedEvent>>,
    namespaces: RwLock<Collection<NamespaceView>>,
    /// `None`: every namespace; else only these (which may change while
    /// the cache runs: [`Cache::cover`]).
    covered: RwLock<Option<BTreeSet<String>>>,
    health: Mutex<HashMap<(Kind, Scope), Health>>,
    /// Every watcher had listed once: readiness stays, however many
    /// namespaces are added later.
    ever_synced: std::sync::atomic::AtomicBool,
    notices: broadcast::Sender<Arc<Notice>>,
    progress: watch::Sender<u64>,
    expected: Mutex<HashMap<(String, String), Expect>>,
    /// The site this cache's Kubernetes is: what clusters and RayJobs read
    /// into it say of themselves (docs/sites.md).
    site: crate::domain::Site,
}

/// A view the cache stores, and where.
pub(crate) trait Slot: View + Sized {
    /// Its kind.
    const CACHE_KIND: Kind;
    /// Its collection.
    fn collection(cache: &Cache) -> &RwLock<Collection<Self>>;
    /// What waiters hear when it changes (or is deleted).
    fn notice(_object: &Self, _deleted: bool) -> Option<Notice> {
        None
    }
    /// `object`, saying it was read from `site` (clusters and RayJobs).
    fn sited(object: Arc<Self>, _site: &crate::domain::Site) -> Arc<Self> {
        object
    }
    /// Whether the cache keeps it (every object of the kind, unless the
    /// kind says otherwise).
    fn kept(_object: &Self, _cache: &Cache) -> bool {
        true
    }
}

impl Slot for ObservedCluster {
    const CACHE_KIND: Kind = Kind::Clusters;
    fn collection(cache: &Cache) -> &RwLock<Collection<Self>> {
        &cache.clusters
    }
    fn sited(mut object: Arc<Self>, site: &crate::domain::Site) -> Arc<Self> {
        if object.site != *site {
            Arc::make_mut(&mut object).site = site.clone();
        }
        object
    }
    fn notice(object: &Self, deleted: bool) -> Option<Notice> {
        Some(Notice::Cluster {
            namespace: object.metadata.namespace.clone(),
            name: object.metadata.name.clone(),
            deleted,
        })
    }
}

impl Slot for ObservedPod {
    const CACHE_KIND: Kind = Kind::Pods;
    fn collection(cache: &Cache) -> &RwLock<Collection<Self>> {
        &cache.pods
    }
    fn sited(mut object: Arc<Self>, site: &crate::domain::Site) -> Arc<Self> {
        if object.site != *site {
            Arc::make_mut(&mut object).site = site.clone();
        }
        object
    }
    fn notice(object: &Self, deleted: bool) -> Option<Notice> {
        use state::Indexed as _;
        Some(Notice::Pod {
            namespace: object.metadata.namespace.clone(),
            cluster: object.bucket().cloned().unwrap_or_default(),
            name: object.metadata.name.clone(),
            deleted,
        })
    }
}

impl Slot for ObservedRayJob {
    const CACHE_KIND: Kind = Kind::RayJobs;
    fn collection(cache: &Cache) -> &RwLock<Collection<Self>> {
        &cache.rayjobs
    }
    fn sited(mut object: Arc<Self>, site: &crate::domain::Site) -> Arc<Self> {
        if object.site != *site {
            Arc::make_mut(&mut object).site = site.clone();
        }
        object
    }
    fn notice(object: &Self, _deleted: bool) -> Option<Notice> {
        Some(Notice::RayJob {
            namespace: object.metadata.namespace.clone(),
            name: object.metadata.name.clone(),
        })
    }
}

impl Slot for ObservedEvent {
    const CACHE_KIND: Kind = Kind::Events;
    fn collection(cache: &Cache) -> &RwLock<Collection<Self>> {
        &cache.events
    }
    /// Only events about Ray objects: on a shared Kubernetes most events
    /// concern other workloads, which describe never shows.
    fn kept(event: &Self, cache: &Cache) -> bool {
        let kept = about_ray(event, &read(&cache.clusters));
        if !kept {
            metrics::counter!("krayne_cache_events_dropped_total").increment(1);
        }
        kept
    }
}

/// Whether `event` is about a RayCluster, or about a pod named as KubeRay
/// names a cached cluster's pods (`<cluster>-head-…`, `<cluster>-<group>-
/// worker-…`: the cluster's name and a dash begin it). A pod's events can
/// come before the pod itself, so its name, not the pod cache, decides.
fn about_ray(event: &ObservedEvent, clusters: &Collection<ObservedCluster>) -> bool {
    let subject = &event.involved_object;
    let namespace = event.metadata.namespace.as_str();
    match (subject.kind.as_deref(), subject.name.as_deref()) {
        (Some(manifest_kind), _) if manifest_kind == krayne_core::manifest::RAYCLUSTER_KIND => true,
        (Some("Pod"), Some(pod)) => pod
            .match_indices('-')
            .any(|(at, _)| clusters.get(namespace, "", &pod[..at]).is_some()),
        _ => false,
    }
}

impl Slot for NamespaceView {
    const CACHE_KIND: Kind = Kind::Namespaces;
    fn collection(cache: &Cache) -> &RwLock<Collection<Self>> {
        &cache.namespaces
    }
}

// A panic while holding a lock cannot leave a collection half-updated in a
// way reads would mind (each update is one map operation), so poisoned
// locks are used as they are.
fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The labels of a cache metric: `kind` when given, and `site` when the
/// cache is one site of several (with one Kubernetes, `local`, the series
/// stay as they were).
fn metric_labels(site: &crate::domain::Site, kind: Option<&'static str>) -> Vec<metrics::Label> {
    let mut labels: Vec<metrics::Label> = kind.map(|k| metrics::Label::new("kind", k)).into_iter().collect();
    if site.name() != crate::domain::Site::LOCAL {
        labels.push(metrics::Label::new("site", site.to_string()));
    }
    labels
}

impl Cache {
    /// A cache metric's labels (see [`metric_labels`]).
    fn labels(&self, kind: Option<&'static str>) -> Vec<metrics::Label> {
        metric_labels(&self.site, kind)
    }

    /// A cache whose objects say they were read from `site`.
    fn of_site(namespaces: Option<BTreeSet<String>>, site: crate::domain::Site) -> Self {
        Self {
            site,
            ..Self::new(namespaces)
        }
    }

    /// An empty cache covering `namespaces` (`None`: all of them).
    fn new(namespaces: Option<BTreeSet<String>>) -> Self {
        let cache = Self {
            clusters: RwLock::default(),
            pods: RwLock::default(),
            rayjobs: RwLock::default(),
            events: RwLock::default(),
            namespaces: RwLock::default(),
            covered: RwLock::new(namespaces),
            health: Mutex::new(HashMap::new()),
            ever_synced: std::sync::atomic::AtomicBool::new(false),
            notices: broadcast::channel(NOTICES).0,
            progress: watch::channel(0).0,
            expected: Mutex::new(HashMap::new()),
            site: crate::domain::Site::local(),
        };
        // Every watcher starts unsynced, so readiness waits for all of them.
        let kinds = [
            Kind::Clusters,
            Kind::Pods,
            Kind::RayJobs,
            Kind::Events,
            Kind::Namespaces,
        ];
        let unsynced = kinds
            .into_iter()
            .flat_map(|k| cache.scopes(k).into_iter().map(move |s| ((k, s), Health::default())));
        let unsynced: HashMap<_, _> = unsynced.collect();
        *lock(&cache.health) = unsynced;
        cache
    }

    /// The namespaces covered (`None`: every one).
    pub(crate) fn covered(&self) -> Option<BTreeSet<String>> {
        read(&self.covered).clone()
    }

    /// Covers `namespaces` from now on (a cache of every namespace stays
    /// so): what it no longer covers is forgotten, what it newly covers
    /// reads from Kubernetes until its watchers have listed. Returns the
    /// namespaces added and removed.
    pub(crate) fn cover(&self, namespaces: &BTreeSet<String>) -> (Vec<String>, Vec<String>) {
        let mut covered = write(&self.covered);
        let Some(old) = covered.as_mut() else {
            return (Vec::new(), Vec::new());
        };
        let added: Vec<String> = namespaces.difference(old).cloned().collect();
        let removed: Vec<String> = old.difference(namespaces).cloned().collect();
        old.clone_from(namespaces);
        drop(covered);
        {
            let mut health = lock(&self.health);
            for ns in &removed {
                health.retain(|(_, scope), _| scope.as_deref() != Some(ns.as_str()));
            }
            for ns in &added {
                for kind in [Kind::Clusters, Kind::Pods, Kind::RayJobs, Kind::Events] {
                    health.insert((kind, Some(ns.clone())), Health::default());
                }
            }
        }
        for ns in &removed {
            write(&self.clusters).replace(Some(ns), Vec::new());
            write(&self.pods).replace(Some(ns), Vec::new());
            write(&self.rayjobs).replace(Some(ns), Vec::new());
            write(&self.events).replace(Some(ns), Vec::new());
        }
        #[expect(clippy::cast_precision_loss, reason = "a gauge")]
        metrics::gauge!("krayne_cache_namespaces", self.labels(None)).set(namespaces.len() as f64);
        (added, removed)
    }

    /// The scopes watchers run for, per kind.
    fn scopes(&self, kind: Kind) -> Vec<Scope> {
        match (&*read(&self.covered), kind) {
            (_, Kind::Namespaces) | (None, _) => vec![None],
            (Some(set), _) => set.iter().cloned().map(Some).collect(),
        }
    }

    /// Whether reads of `kind` in `namespace` (`None`: every namespace) can
    /// come from the cache: covered, listed, and watching without errors.
    pub(crate) fn serving(&self, kind: Kind, namespace: Option<&str>) -> bool {
        let scope = match (&*read(&self.covered), kind, namespace) {
            (None, ..) | (_, Kind::Namespaces, _) => None,
            (Some(set), _, Some(ns)) if set.contains(ns) => Some(ns.to_owned()),
            _ => return false,
        };
        lock(&self.health).get(&(kind, scope)).is_some_and(|h| h.serving)
    }

    /// Every watcher has listed once (a namespace covered later does not
    /// take readiness back: its reads go to Kubernetes meanwhile).
    pub(crate) fn synced(&self) -> bool {
        use std::sync::atomic::Ordering;
        if self.ever_synced.load(Ordering::Relaxed) {
            return true;
        }
        let all = lock(&self.health).values().all(|h| h.synced);
        self.ever_synced.fetch_or(all, Ordering::Relaxed);
        all
    }

    /// The events about `cluster` and its `pods`, in `namespace`: a
    /// bucket per object, so the namespace's other events cost nothing.
    pub(crate) fn events_about(&self, namespace: &str, cluster: &str, pods: &[&str]) -> Vec<Arc<ObservedEvent>> {
        let events = read(&self.events);
        std::iter::once(cluster)
            .chain(pods.iter().copied())
            .flat_map(|subject| events.in_bucket(namespace, subject).cloned())
            .collect()
    }

    /// Waits until `kind` in `scope` has listed once: events are kept by
    /// the clusters they concern, so their watcher waits for the clusters'.
    pub(crate) async fn listed(&self, kind: Kind, scope: Option<&str>) {
        let mut progress = self.progress.subscribe();
        loop {
            let key = (kind, scope.map(str::to_owned));
            if lock(&self.health).get(&key).is_some_and(|h| h.synced) {
                return;
            }
            if progress.changed().await.is_err() {
                return;
            }
        }
    }

    fn set_health(&self, kind: Kind, scope: Scope, serving: bool) {
        let mut health = lock(&self.health);
        let entry = health.entry((kind, scope)).or_default();
        entry.serving = serving;
        entry.synced |= serving;
        let all = health.iter().filter(|((k, _), _)| *k == kind).all(|(_, h)| h.serving);
        metrics::gauge!("krayne_cache_synced", self.labels(Some(kind.as_str()))).set(f64::from(u8::from(all)));
    }

    fn changed<T: Slot>(&self, notice: Option<Notice>) {
        let len = read(T::collection(self)).len();
        #[expect(clippy::cast_precision_loss)] // counts stay far below 2^52
        metrics::gauge!("krayne_cache_objects", self.labels(Some(T::CACHE_KIND.as_str()))).set(len as f64);
        if let Some(n) = notice {
            let _ = self.notices.send(Arc::new(n));
        }
        self.progress.send_modify(|p| *p += 1);
    }

    /// Whether objects of `namespace` belong in the cache: a watcher of a
    /// namespace just uncovered may still deliver a last change.
    fn covers(&self, namespace: &str) -> bool {
        read(&self.covered).as_ref().is_none_or(|set| set.contains(namespace))
    }

    /// A watcher (re)listed `scope`: its objects replace what was there.
    pub(crate) fn relisted<T: Slot>(&self, scope: Option<&str>, objects: Vec<Arc<T>>) {
        if scope.is_some_and(|ns| !self.covers(ns)) {
            return;
        }
        let objects: Vec<Arc<T>> = objects
            .into_iter()
            .filter(|o| T::kept(o, self))
            .map(|o| T::sited(o, &self.site))
            .collect();
        write(T::collection(self)).replace(scope, objects);
        self.set_health(T::CACHE_KIND, scope.map(str::to_owned), true);
        metrics::counter!("krayne_cache_relists_total", self.labels(Some(T::CACHE_KIND.as_str()))).increment(1);
        let resync = matches!(T::CACHE_KIND, Kind::Clusters | Kind::Pods | Kind::RayJobs).then_some(Notice::Resync);
        self.changed::<T>(resync);
    }

    /// An object was added or changed.
    pub(crate) fn applied<T: Slot>(&self, object: Arc<T>) {
        if (T::CACHE_KIND != Kind::Namespaces && !self.covers(&object.meta().namespace)) || !T::kept(&object, self) {
            return;
        }
        let object = T::sited(object, &self.site);
        write(T::collection(self)).apply(object.clone());
        self.changed::<T>(T::notice(&object, false));
    }

    /// An object was deleted.
    pub(crate) fn deleted<T: Slot>(&self, object: &Arc<T>) {
        write(T::collection(self)).delete(object);
        self.changed::<T>(T::notice(object, true));
    }

    /// A watcher failed: until it has listed again, reads go to Kubernetes.
    pub(crate) fn failed<T: Slot>(&self, scope: Option<&str>, error: &dyn std::fmt::Display) {
        if scope.is_some_and(|ns| !self.covers(ns)) {
            return;
        }
        self.set_health(T::CACHE_KIND, scope.map(str::to_owned), false);
        metrics::counter!(
            "krayne_cache_watch_errors_total",
            self.labels(Some(T::CACHE_KIND.as_str()))
        )
        .increment(1);
        tracing::warn!(kind = T::CACHE_KIND.as_str(), scope = scope.unwrap_or("*"), %error, "watch failed; relisting");
    }

    fn satisfied(&self, namespace: &str, name: &str, expect: &Expect) -> bool {
        let cluster = read(&self.clusters).get(namespace, "", name);
        match expect {
            Expect::Version(v) => cluster.is_some_and(|c| reached(c.metadata.resource_version.as_deref(), v)),
            Expect::Gone => cluster.is_none_or(|c| c.metadata.deletion_timestamp.is_some()),
        }
    }

    /// Waits (at most `timeout`) until the cache shows the caller's write;
    /// past that, reads of the cluster go to Kubernetes until it does.
    pub(crate) async fn await_write(&self, namespace: &str, name: &str, expect: Expect, timeout: Duration) {
        let started = tokio::time::Instant::now();
        let mut progress = self.progress.subscribe();
        loop {
            if self.satisfied(namespace, name, &expect) {
                metrics::histogram!("krayne_cache_write_visible_seconds").record(started.elapsed().as_secs_f64());
                return;
            }
            match tokio::time::timeout_at(started + timeout, progress.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => break,
            }
        }
        metrics::counter!("krayne_cache_write_wait_timeouts_total").increment(1);
        lock(&self.expected).insert((namespace.to_owned(), name.to_owned()), expect);
    }

    /// Whether no write is still missing from the cache: to `name` (any
    /// cluster when `None`) in `namespace` (any namespace when `None`).
    pub(crate) fn fresh(&self, namespace: Option<&str>, name: Option<&str>) -> bool {
        let mut expected = lock(&self.expected);
        if expected.is_empty() {
            return true;
        }
        expected.retain(|(ns, n), e| !self.satisfied(ns, n, e));
        !expected
            .keys()
            .any(|(ns, n)| namespace.is_none_or(|x| x == ns) && name.is_none_or(|x| x == n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(namespace: &str, name: &str) -> Arc<ObservedCluster> {
        let mut c = ObservedCluster::default();
        c.metadata.namespace = namespace.into();
        c.metadata.name = name.into();
        Arc::new(c)
    }

    fn event(namespace: &str, name: &str, kind: &str, subject: &str) -> Arc<ObservedEvent> {
        let mut e = ObservedEvent::default();
        e.metadata.namespace = namespace.into();
        e.metadata.name = name.into();
        e.involved_object.kind = Some(kind.into());
        e.involved_object.name = Some(subject.into());
        Arc::new(e)
    }

    fn names(events: &[Arc<ObservedEvent>]) -> Vec<&str> {
        events.iter().map(|e| e.metadata.name.as_str()).collect()
    }

    #[test]
    fn only_events_about_ray_objects_are_kept() {
        let cache = Cache::new(None);
        cache.relisted::<ObservedCluster>(None, vec![cluster("ml", "train")]);
        cache.relisted::<ObservedEvent>(
            None,
            vec![
                event("ml", "cluster", "RayCluster", "train"),
                event("ml", "head", "Pod", "train-head-x7k2p"),
                event("ml", "worker", "Pod", "train-gpu-worker-9fz4q"),
                event("ml", "web", "Pod", "web-7d9f8-abcde"),
                event("ml", "deployment", "Deployment", "train"),
                event("ml", "unnamed", "Pod", ""),
                event("other", "elsewhere", "Pod", "train-head-x7k2p"),
            ],
        );
        cache.applied(event("ml", "nginx", "Pod", "nginx-1"));
        cache.applied(event("ml", "later", "Pod", "train-head-x7k2p"));
        let kept = read(&cache.events).all();
        let mut kept = names(&kept);
        kept.sort_unstable();
        assert_eq!(kept, ["cluster", "head", "later", "worker"]);
    }

    #[test]
    fn a_clusters_events_are_found_by_their_subjects_alone() {
        let cache = Cache::new(None);
        cache.relisted::<ObservedCluster>(None, vec![cluster("ml", "a"), cluster("ml", "ab")]);
        let mut events = vec![
            event("ml", "a-1", "RayCluster", "a"),
            event("ml", "a-2", "Pod", "a-head-1"),
            event("ml", "ab-1", "RayCluster", "ab"),
            event("ml", "ab-2", "Pod", "ab-head-1"),
        ];
        // Thousands of another cluster's events in the same namespace.
        events.extend((0..5000).map(|i| event("ml", &format!("ab-pod-{i}"), "Pod", &format!("ab-w-{i}"))));
        cache.relisted::<ObservedEvent>(None, events);
        let found = cache.events_about("ml", "a", &["a-head-1"]);
        assert_eq!(names(&found), ["a-1", "a-2"]);
        let found = cache.events_about("ml", "ab", &["ab-head-1", "ab-gone"]);
        assert_eq!(names(&found), ["ab-1", "ab-2"]);
        assert!(cache.events_about("other", "a", &[]).is_empty());
    }
}
