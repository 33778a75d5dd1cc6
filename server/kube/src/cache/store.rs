//! [`ClusterStore`] over the watch cache: reads from memory, writes to
//! Kubernetes, and each write waits until the cache shows it.

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use futures::stream::BoxStream;
use kube::{Api, runtime::watcher};
use tokio::task::JoinHandle;

use super::{Cache, Expect, Kind, Slot, feed::feed, follow::follow, lists::InitialLists, read, watched::Watched};
use crate::{
    KubeClusterStore,
    domain::{
        Authorized, ClusterChange, ClusterFeed, ClusterPatch, ClusterRef, ClusterStore, Companion, Error,
        ObservedCluster, ObservedEvent, ObservedPod, PodLogOptions, PodsOf, Preconditions, RenderedCluster, RequestId,
        ResourceKind,
    },
    manifest::LABEL_CLUSTER,
};

/// How the cache runs.
#[derive(Debug, Clone)]
pub struct CacheOptions {
    /// Namespaces to cache; empty means every namespace (cluster-wide
    /// watches, which need a ClusterRole) unless `namespaces_file` names
    /// them.
    pub namespaces: Vec<String>,
    /// A file naming the namespaces to cache (one a line, or
    /// comma-separated; `#` starts a comment), re-read while the server
    /// runs: a namespace added there is watched, one removed forgotten,
    /// without a restart (a mounted ConfigMap the kubelet updates).
    pub namespaces_file: Option<std::path::PathBuf>,
    /// Longest a write waits for the cache to show it; reads of that
    /// cluster go to Kubernetes until it does.
    pub write_wait: Duration,
    /// Where the API server cannot stream lists: the most objects a
    /// watcher lists whole from its watch cache; bigger lists are paged
    /// from etcd (`cache::lists`).
    pub whole_lists_up_to: u32,
}

impl Default for CacheOptions {
    fn default() -> Self {
        Self {
            namespaces: Vec::new(),
            namespaces_file: None,
            write_wait: Duration::from_secs(3),
            whole_lists_up_to: super::lists::WHOLE_LISTS_UP_TO,
        }
    }
}

/// How often the namespaces file is read again.
const NAMESPACES_FILE_EVERY: Duration = Duration::from_secs(5);

/// Kubernetes behind a watch cache.
pub struct CachedClusterStore {
    api: KubeClusterStore,
    cache: Arc<Cache>,
    write_wait: Duration,
    /// The watchers of each scope (`None`: cluster-wide).
    feeds: Arc<std::sync::Mutex<Feeds>>,
    /// Re-reads the namespaces file, when there is one.
    file_watch: Option<JoinHandle<()>>,
}

/// The watchers feeding the cache, by scope.
type Feeds = std::collections::HashMap<Option<String>, Vec<JoinHandle<()>>>;

impl Drop for CachedClusterStore {
    fn drop(&mut self) {
        if let Some(watch) = &self.file_watch {
            watch.abort();
        }
        for feed in lock_feeds(&self.feeds).values().flatten() {
            feed.abort();
        }
    }
}

fn lock_feeds(feeds: &std::sync::Mutex<Feeds>) -> std::sync::MutexGuard<'_, Feeds> {
    feeds.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn source(kind: Kind, cached: bool) {
    let source = if cached { "cache" } else { "kubernetes" };
    metrics::counter!("krayne_cache_reads_total", "kind" => kind.as_str(), "source" => source).increment(1);
}

/// Namespaces as a namespaces file lists them.
///
/// # Errors
/// A name that cannot be a namespace.
pub(super) fn parse_namespaces(text: &str) -> Result<BTreeSet<String>, String> {
    let mut found = BTreeSet::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("");
        for name in line.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            crate::domain::check_dns1123_label(name).map_err(|why| format!("{name:?} is no namespace: {why}"))?;
            found.insert(name.to_owned());
        }
    }
    Ok(found)
}

/// The namespaces `file` names; naming none is an error (a file emptied
/// by mistake must not drop every namespace).
fn read_namespaces(file: &std::path::Path) -> Result<BTreeSet<String>, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let namespaces = parse_namespaces(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    if namespaces.is_empty() {
        return Err(format!("{}: names no namespace", file.display()));
    }
    Ok(namespaces)
}

/// Where watchers read from: the client, and the replica's choice of
/// initial list.
#[derive(Clone)]
struct Source {
    client: kube::Client,
    lists: Arc<InitialLists>,
}

/// The watchers of one namespace's clusters, pods, RayJobs and events.
fn spawn_scope(cache: &Arc<Cache>, source: &Source, scope: Option<String>) -> Vec<JoinHandle<()>> {
    let every = watcher::Config::default();
    let ray_pods = watcher::Config::default().labels(LABEL_CLUSTER);
    // Events are kept by the clusters they concern: their watcher starts
    // once the clusters are listed.
    let events = {
        let (cache, api) = (cache.clone(), api_of::<ObservedEvent>(&source.client, scope.as_ref()));
        let (every, scope, lists) = (every.clone(), scope.clone(), source.lists.clone());
        tokio::spawn(async move {
            cache.listed(Kind::Clusters, scope.as_deref()).await;
            feed::<ObservedEvent>(cache, api, every, scope, lists).await;
        })
    };
    vec![
        spawn::<ObservedCluster>(cache, source, every.clone(), scope.clone()),
        spawn::<ObservedPod>(cache, source, ray_pods, scope.clone()),
        spawn::<crate::domain::ObservedRayJob>(cache, source, every, scope),
        events,
    ]
}

/// Makes the cache cover `namespaces`: watchers of namespaces no longer
/// named stop (then the cache forgets them), new ones start.
fn cover(cache: &Arc<Cache>, source: &Source, feeds: &std::sync::Mutex<Feeds>, namespaces: &BTreeSet<String>) {
    let Some(before) = cache.covered() else {
        return;
    };
    let mut feeds = lock_feeds(feeds);
    for gone in before.difference(namespaces) {
        for feed in feeds.remove(&Some(gone.clone())).into_iter().flatten() {
            feed.abort();
        }
    }
    let (added, removed) = cache.cover(namespaces);
    for ns in &added {
        feeds.insert(Some(ns.clone()), spawn_scope(cache, source, Some(ns.clone())));
    }
    if !added.is_empty() || !removed.is_empty() {
        tracing::info!(
            ?added,
            ?removed,
            covered = namespaces.len(),
            "the watch cache covers other namespaces now"
        );
    }
}

impl CachedClusterStore {
    /// Starts the watchers. Reads use the cache once it has listed; until
    /// then (and while a watcher recovers) they go to Kubernetes.
    ///
    /// # Errors
    /// When the namespaces file cannot be read or names no namespace.
    pub fn start(api: KubeClusterStore, options: &CacheOptions) -> Result<Self, String> {
        let source = Source {
            client: api.client().clone(),
            lists: Arc::new(InitialLists::new(api.client().clone(), options.whole_lists_up_to)),
        };
        let covered = match &options.namespaces_file {
            Some(file) => Some(read_namespaces(file).map_err(|e| format!("--cache-namespaces-file {e}"))?),
            None => (!options.namespaces.is_empty()).then(|| options.namespaces.iter().cloned().collect()),
        };
        if let Some(covered) = &covered {
            #[expect(clippy::cast_precision_loss, reason = "a gauge")]
            metrics::gauge!("krayne_cache_namespaces", super::metric_labels(api.site(), None))
                .set(covered.len() as f64);
        }
        let cache = Arc::new(Cache::of_site(covered, api.site().clone()));
        let mut feeds = Feeds::new();
        for scope in cache.scopes(Kind::Clusters) {
            feeds.insert(scope.clone(), spawn_scope(&cache, &source, scope));
        }
        feeds.entry(None).or_default().push(spawn::<super::NamespaceView>(
            &cache,
            &source,
            watcher::Config::default(),
            None,
        ));
        let feeds = Arc::new(std::sync::Mutex::new(feeds));
        let file_watch = options.namespaces_file.clone().map(|file| {
            let (cache, feeds) = (cache.clone(), feeds.clone());
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(NAMESPACES_FILE_EVERY);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    match read_namespaces(&file) {
                        Ok(namespaces) => cover(&cache, &source, &feeds, &namespaces),
                        Err(e) => {
                            metrics::counter!("krayne_cache_namespaces_file_errors_total").increment(1);
                            tracing::warn!(error = %e, "the namespaces file cannot be used; the namespaces covered stay as they were");
                        }
                    }
                }
            })
        });
        Ok(Self {
            api,
            cache,
            write_wait: options.write_wait,
            feeds,
            file_watch,
        })
    }

    fn not_found(&self, namespace: &str, name: &str) -> Error {
        let namespace_gone =
            self.cache.serving(Kind::Namespaces, None) && read(&self.cache.namespaces).get("", "", namespace).is_none();
        if namespace_gone {
            Error::NotFound {
                kind: ResourceKind::Namespace,
                name: namespace.to_owned(),
                namespace: None,
            }
        } else {
            Error::NotFound {
                kind: ResourceKind::Cluster,
                name: name.to_owned(),
                namespace: None,
            }
        }
    }

    async fn written(&self, cluster: &ObservedCluster) {
        if let Some(version) = &cluster.metadata.resource_version {
            let m = &cluster.metadata;
            let expect = Expect::Version(version.to_string());
            self.cache
                .await_write(&m.namespace, &m.name, expect, self.write_wait)
                .await;
        }
    }
}

fn spawn<T: Slot>(
    cache: &Arc<Cache>,
    source: &Source,
    config: watcher::Config,
    scope: Option<String>,
) -> JoinHandle<()> {
    tokio::spawn(feed::<T>(
        cache.clone(),
        api_of::<T>(&source.client, scope.as_ref()),
        config,
        scope,
        source.lists.clone(),
    ))
}

/// The API of `T` in `scope` (`None`: every namespace).
fn api_of<T: Slot>(client: &kube::Client, scope: Option<&String>) -> Api<Watched<T>> {
    match scope {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &()),
        None => Api::all_with(client.clone(), &()),
    }
}

#[async_trait::async_trait]
impl ClusterStore for CachedClusterStore {
    async fn namespaces(&self, request_id: &RequestId) -> Result<Vec<String>, Error> {
        let cached = self.cache.serving(Kind::Namespaces, None);
        source(Kind::Namespaces, cached);
        if !cached {
            return self.api.namespaces(request_id).await;
        }
        Ok(read(&self.cache.namespaces)
            .all()
            .iter()
            .map(|n| n.metadata.name.to_string())
            .collect())
    }

    async fn namespaces_matching(&self, patterns: &[&str], request_id: &RequestId) -> Result<Vec<String>, Error> {
        let cached = self.cache.serving(Kind::Namespaces, None);
        source(Kind::Namespaces, cached);
        if !cached {
            let mut names = self.api.namespaces(request_id).await?;
            names.retain(|n| patterns.iter().any(|p| krayne_core::domain::pattern_covers(p, n)));
            names.sort_unstable();
            return Ok(names);
        }
        let namespaces = read(&self.cache.namespaces);
        let mut found = BTreeSet::new();
        for pattern in patterns {
            match pattern.strip_suffix('*') {
                Some(prefix) => found.extend(namespaces.names_with_prefix("", "", prefix).map(ToString::to_string)),
                None => {
                    if namespaces.get("", "", pattern).is_some() {
                        found.insert((*pattern).to_owned());
                    }
                }
            }
        }
        Ok(found.into_iter().collect())
    }

    async fn namespace_count(&self, request_id: &RequestId) -> Result<usize, Error> {
        let cached = self.cache.serving(Kind::Namespaces, None);
        source(Kind::Namespaces, cached);
        if !cached {
            return Ok(self.api.namespaces(request_id).await?.len());
        }
        Ok(read(&self.cache.namespaces).len())
    }

    async fn create(
        &self,
        cluster: &Authorized<ClusterRef>,
        rendered: &RenderedCluster,
        dry_run: bool,
        request_id: &RequestId,
    ) -> Result<ObservedCluster, Error> {
        let created = self.api.create(cluster, rendered, dry_run, request_id).await?;
        if !dry_run {
            self.written(&created).await;
        }
        Ok(created)
    }

    async fn get(&self, cluster: &ClusterRef, request_id: &RequestId) -> Result<Arc<ObservedCluster>, Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let cached =
            self.cache.serving(Kind::Clusters, Some(namespace)) && self.cache.fresh(Some(namespace), Some(name));
        source(Kind::Clusters, cached);
        if !cached {
            return self.api.get(cluster, request_id).await;
        }
        let found = read(&self.cache.clusters).get(namespace, "", name);
        found.ok_or_else(|| self.not_found(namespace, name))
    }

    async fn get_latest(&self, cluster: &ClusterRef, request_id: &RequestId) -> Result<Arc<ObservedCluster>, Error> {
        source(Kind::Clusters, false);
        self.api.get(cluster, request_id).await
    }

    async fn list_latest(&self, namespace: &str, request_id: &RequestId) -> Result<Vec<Arc<ObservedCluster>>, Error> {
        source(Kind::Clusters, false);
        self.api.list(Some(namespace), request_id).await
    }

    async fn list(&self, namespace: Option<&str>, request_id: &RequestId) -> Result<Vec<Arc<ObservedCluster>>, Error> {
        if namespace.is_none()
            && let Some(covered) = self.cache.covered()
        {
            // Role mode: every namespace is every one the Roles cover, and
            // Kubernetes allows only a list within each.
            // A namespace named before its Role (or the namespace itself)
            // exists is left out, not every namespace's list failed.
            let mut all = Vec::new();
            for ns in &covered {
                match self.list(Some(ns), request_id).await {
                    Ok(clusters) => all.extend(clusters),
                    Err(e @ (Error::PermissionDenied(_) | Error::NotFound { .. })) => {
                        tracing::warn!(namespace = %ns, error = %e, "a covered namespace cannot be listed; left out");
                    }
                    Err(e) => return Err(e),
                }
            }
            return Ok(all);
        }
        let cached = self.cache.serving(Kind::Clusters, namespace) && self.cache.fresh(namespace, None);
        source(Kind::Clusters, cached);
        if !cached {
            return self.api.list(namespace, request_id).await;
        }
        let clusters = read(&self.cache.clusters);
        let found = match namespace {
            Some(ns) => clusters.bucket(ns, ""),
            None => clusters.all(),
        };
        Ok(found)
    }

    async fn list_page(
        &self,
        namespaces: &[String],
        after: Option<(&str, &str)>,
        limit: usize,
        request_id: &RequestId,
    ) -> Result<Vec<Arc<ObservedCluster>>, Error> {
        let cached = namespaces
            .iter()
            .all(|ns| self.cache.serving(Kind::Clusters, Some(ns)) && self.cache.fresh(Some(ns), None));
        source(Kind::Clusters, cached);
        if !cached {
            return self.api.list_page(namespaces, after, limit, request_id).await;
        }
        let clusters = read(&self.cache.clusters);
        let mut page = Vec::new();
        for (ns, from) in crate::domain::resume_points(namespaces, after) {
            if page.len() >= limit {
                break;
            }
            page.extend(clusters.bucket_after(ns, "", from, limit - page.len()));
        }
        Ok(page)
    }

    async fn pods_of(&self, namespace: &str, clusters: &[&str], request_id: &RequestId) -> Result<PodsOf, Error> {
        let cached = self.cache.serving(Kind::Pods, Some(namespace));
        source(Kind::Pods, cached);
        if !cached {
            return self.api.pods_of(namespace, clusters, request_id).await;
        }
        let pods = read(&self.cache.pods);
        let mut of = PodsOf::with_capacity(clusters.len());
        for cluster in clusters {
            of.push_cluster(pods.in_bucket(namespace, cluster).cloned());
        }
        Ok(of)
    }

    fn feed(&self) -> Option<Arc<dyn ClusterFeed>> {
        Some(Arc::new(super::changes::CacheFeed(self.cache.clone())))
    }

    async fn pods(&self, namespace: &str, request_id: &RequestId) -> Result<Vec<Arc<ObservedPod>>, Error> {
        let cached = self.cache.serving(Kind::Pods, Some(namespace));
        source(Kind::Pods, cached);
        if !cached {
            return self.api.pods(namespace, request_id).await;
        }
        Ok(read(&self.cache.pods).namespace(namespace))
    }

    async fn cluster_pods(&self, cluster: &ClusterRef, request_id: &RequestId) -> Result<Vec<Arc<ObservedPod>>, Error> {
        let cached = self.cache.serving(Kind::Pods, Some(cluster.namespace()));
        source(Kind::Pods, cached);
        if !cached {
            return self.api.cluster_pods(cluster, request_id).await;
        }
        Ok(read(&self.cache.pods).bucket(cluster.namespace(), cluster.name()))
    }

    async fn cluster_events(
        &self,
        cluster: &ClusterRef,
        pods: &[&str],
        request_id: &RequestId,
    ) -> Result<Vec<Arc<ObservedEvent>>, Error> {
        let cached = self.cache.serving(Kind::Events, Some(cluster.namespace()));
        source(Kind::Events, cached);
        if !cached {
            return self.api.cluster_events(cluster, pods, request_id).await;
        }
        Ok(self.cache.events_about(cluster.namespace(), cluster.name(), pods))
    }

    async fn patch(
        &self,
        cluster: &Authorized<ClusterRef>,
        patch: &ClusterPatch,
        request_id: &RequestId,
    ) -> Result<ObservedCluster, Error> {
        let patched = self.api.patch(cluster, patch, request_id).await?;
        self.written(&patched).await;
        Ok(patched)
    }

    async fn pod_log(
        &self,
        namespace: &str,
        pod: &str,
        options: &PodLogOptions,
        request_id: &RequestId,
    ) -> Result<String, Error> {
        self.api.pod_log(namespace, pod, options, request_id).await
    }

    async fn follow_pod_log(
        &self,
        namespace: &str,
        pod: &str,
        options: &PodLogOptions,
        request_id: &RequestId,
    ) -> Result<BoxStream<'static, Result<String, Error>>, Error> {
        self.api.follow_pod_log(namespace, pod, options, request_id).await
    }

    async fn delete(
        &self,
        cluster: &Authorized<ClusterRef>,
        only_if: Option<&Preconditions>,
        request_id: &RequestId,
    ) -> Result<(), Error> {
        self.api.delete(cluster, only_if, request_id).await?;
        self.cache
            .await_write(cluster.namespace(), cluster.name(), Expect::Gone, self.write_wait)
            .await;
        Ok(())
    }

    async fn apply_companion(
        &self,
        cluster: &Authorized<ClusterRef>,
        kind: Companion,
        name: &str,
        object: &serde_json::Value,
        request_id: &RequestId,
    ) -> Result<(), Error> {
        self.api.apply_companion(cluster, kind, name, object, request_id).await
    }

    async fn network_policies(
        &self,
        namespace: &str,
        request_id: &RequestId,
    ) -> Result<std::collections::HashMap<String, crate::manifest::HeldPolicy>, Error> {
        self.api.network_policies(namespace, request_id).await
    }

    async fn delete_companion(
        &self,
        cluster: &Authorized<ClusterRef>,
        kind: Companion,
        name: &str,
        request_id: &RequestId,
    ) -> Result<(), Error> {
        self.api.delete_companion(cluster, kind, name, request_id).await
    }

    async fn create_event(
        &self,
        cluster: &Authorized<ClusterRef>,
        event: &serde_json::Value,
        request_id: &RequestId,
    ) -> Result<(), Error> {
        self.api.create_event(cluster, event, request_id).await
    }

    async fn watch(
        &self,
        cluster: &ClusterRef,
        request_id: &RequestId,
    ) -> Result<BoxStream<'static, Result<ClusterChange, Error>>, Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let cached =
            self.cache.serving(Kind::Clusters, Some(namespace)) && self.cache.serving(Kind::Pods, Some(namespace));
        source(Kind::Clusters, cached);
        if !cached {
            return self.api.watch(cluster, request_id).await;
        }
        Ok(follow(self.cache.clone(), namespace.to_owned(), name.to_owned()))
    }

    async fn ping(&self) -> Result<(), Error> {
        if !self.cache.synced() {
            return Err(Error::Unavailable(
                "the watch cache has not finished its first list".into(),
            ));
        }
        self.api.ping().await
    }

    fn problems(&self) -> Vec<String> {
        self.api.problems()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn not_ready_until_the_first_list_completes() {
        // Nothing listens on port 9 here: every list fails.
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let store = CachedClusterStore::start(
            KubeClusterStore::new(crate::client(config).unwrap()),
            &CacheOptions::default(),
        )
        .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let error = store.ping().await.unwrap_err();
        assert!(
            matches!(&error, Error::Unavailable(m) if m.contains("first list")),
            "{error:?}"
        );
        assert!(!store.cache.serving(Kind::Clusters, Some("ml-team")));
    }

    #[test]
    fn a_namespaces_file_lists_namespaces() {
        let listed = parse_namespaces("ml-team\n# onboarding next week\nvision, nlp  # two teams\n\n").unwrap();
        assert_eq!(listed, ["ml-team", "nlp", "vision"].map(str::to_owned).into());
        assert!(parse_namespaces("ML_Team").unwrap_err().contains("no namespace"));
        assert!(parse_namespaces("").unwrap().is_empty());
    }
}
