//! The hub: one per server. It follows the store's feed, numbers the
//! changes of clusters' summaries and of RayJobs (one sequence for both),
//! keeps the last of them for resumes, and broadcasts them to the
//! watchers, each of which passes on the kind it follows.
//!
//! It holds each cluster as the watch cache's own objects (pointers to
//! what the cache holds anyway), not as its summary: at 20 000 clusters a
//! summary each cost a replica 15–20 MiB. Summaries are built when a
//! change, a list or a watch's start needs them; the last [`KEPT`] built
//! are kept with their cluster, so lists of what callers look at, and the
//! watchers of what changes, build and encode each summary once.

use std::{
    collections::{BTreeMap, BTreeSet, VecDeque},
    sync::{Arc, Mutex, MutexGuard},
};

use futures::StreamExt as _;
use tokio::sync::broadcast;

use self::jobs::JobEntry;
use crate::{
    domain::{
        Atom, ClusterFeed, Error, FeedChange, ObjectMeta, ObservedCluster, ObservedPod, Site, Summary, WatchEvent,
        WatchEventType, WatchFrom, WatchVersion, Watched, WatchedKind,
    },
    manifest,
};

mod jobs;

/// A cluster's place: namespace, name.
pub(super) type Key = (Atom, Atom);

/// A cluster of a list's page with its pods.
pub(crate) type PageItem<'a> = (&'a ObservedCluster, &'a [Arc<ObservedPod>]);

/// Summaries the hub keeps besides those of its history: enough for the
/// clusters a platform's portals and watchers look at, a few MiB at most.
pub(super) const KEPT: usize = 2048;

/// A cluster as the hub holds it: the cache's objects, and its summary
/// while it is among the last [`KEPT`] built.
#[derive(Clone)]
pub(super) struct Entry {
    cluster: Arc<ObservedCluster>,
    pods: Arc<[Arc<ObservedPod>]>,
    summary: Option<(Arc<Summary>, u64)>,
    /// Since when its site has not answered (RFC 3339), while it has not.
    site_down: Option<Arc<str>>,
}

impl Entry {
    fn new(cluster: Arc<ObservedCluster>, pods: Vec<Arc<ObservedPod>>) -> Self {
        Self {
            cluster,
            pods: pods.into(),
            summary: None,
            site_down: None,
        }
    }

    /// The namespace.
    pub(super) fn namespace(&self) -> &Atom {
        &self.cluster.metadata.namespace
    }

    /// Whether `cluster` and `pods` are this entry's objects at the same
    /// versions (the same objects, or copies of them a relist made).
    fn is_of(&self, cluster: &ObservedCluster, pods: &[Arc<ObservedPod>]) -> bool {
        same_version(&self.cluster.metadata, &cluster.metadata)
            && self.pods.len() == pods.len()
            && self
                .pods
                .iter()
                .zip(pods)
                .all(|(a, b)| same_version(&a.metadata, &b.metadata))
    }

    /// Its summary as its site last said it: the one kept, else built.
    fn plain_summary(&self) -> Arc<Summary> {
        match &self.summary {
            Some((summary, _)) => summary.clone(),
            None => Arc::new(summarize(&self.cluster, &self.pods)),
        }
    }

    /// Its summary as watches show it: marked while its site does not
    /// answer.
    pub(super) fn summary(&self) -> Arc<Summary> {
        let plain = self.plain_summary();
        match &self.site_down {
            Some(since) => plain.site_unavailable(since),
            None => plain,
        }
    }
}

/// An object as a watch's start or a newly granted namespace shows it:
/// a cluster (whose summary is built after the hub's lock is let go) or
/// a RayJob.
#[derive(Clone)]
pub(super) enum Snapshot {
    Cluster(Entry),
    RayJob(JobEntry),
}

impl Snapshot {
    /// The watch event of it `ADDED` at `version`.
    pub(super) fn added(&self, version: WatchVersion) -> Arc<WatchEvent> {
        let object = match self {
            Self::Cluster(entry) => Watched::Cluster(entry.summary()),
            Self::RayJob(entry) => Watched::RayJob(entry.info.clone()),
        };
        Arc::new(WatchEvent {
            kind: WatchEventType::Added,
            version,
            object: Some(object),
        })
    }
}

/// Whether two objects' metadata are of the same object at the same
/// version: the same memory, or the same name and resourceVersion (an
/// object without one is the same only as itself).
fn same_version(a: &ObjectMeta, b: &ObjectMeta) -> bool {
    std::ptr::eq(a, b) || (a.name == b.name && a.resource_version.is_some() && a.resource_version == b.resource_version)
}

/// What a watch gets before the live changes: the changes after its
/// version, then its objects `ADDED` (clusters' summaries are built by
/// [`Self::events`], after the hub's lock is let go).
pub(super) struct Backlog {
    changes: Vec<Arc<WatchEvent>>,
    added: Vec<Snapshot>,
    version: WatchVersion,
}

impl Backlog {
    /// The events, oldest first.
    pub(super) fn events(self) -> Vec<Arc<WatchEvent>> {
        let version = self.version;
        let mut events = self.changes;
        events.extend(self.added.iter().map(|e| e.added(version)));
        events
    }
}

/// What the hub holds, under one lock so a watcher's start (backlog or
/// snapshot, then the live channel) has no gap.
pub(super) struct Held {
    /// This run's id in versions.
    boot: u32,
    /// Changes numbered so far.
    seq: u64,
    /// The last changes, oldest first.
    history: VecDeque<Arc<WatchEvent>>,
    /// Every cluster as of `seq`.
    pub(super) current: BTreeMap<Key, Entry>,
    /// Every RayJob as of `seq`.
    rayjobs: BTreeMap<Key, JobEntry>,
    /// How many changes `history` keeps.
    keep: usize,
    /// The entries given a summary, oldest first, each with the mark it
    /// was given under (an entry given a newer one since is passed over).
    kept: VecDeque<(Key, u64)>,
    /// Marks given so far.
    marks: u64,
    /// How many summaries `kept` holds at most.
    kept_max: usize,
    /// Whether a watch has started: until one has, no one holds a version
    /// or a summary to be told about, so changes are taken in without
    /// building or recording anything (a replica's start then builds no
    /// summary of its 20 000 clusters).
    watched: bool,
    /// The sites that do not answer, each since when (RFC 3339).
    sites_down: BTreeMap<Site, Arc<str>>,
}

impl Held {
    fn new(boot: u32, current: BTreeMap<Key, Entry>, keep: usize, kept_max: usize) -> Self {
        Self {
            boot,
            seq: 0,
            history: VecDeque::with_capacity(keep.min(1024)),
            current,
            rayjobs: BTreeMap::new(),
            keep: keep.max(1),
            kept: VecDeque::new(),
            marks: 0,
            kept_max,
            watched: false,
            sites_down: BTreeMap::new(),
        }
    }

    /// The version after the last change.
    pub(super) fn version(&self) -> WatchVersion {
        WatchVersion {
            boot: self.boot,
            seq: self.seq,
        }
    }

    /// What a watch of `what` starting `from` sees before the live
    /// changes: the changes after its version (the watcher passes on
    /// those of its kind), or every object of its kind as `ADDED` — of
    /// namespace `only` when given (found by range: a watch of one
    /// namespace costs what it holds, not the platform), of the namespaces
    /// `may_see` otherwise (asked once per namespace); a version this run
    /// no longer holds (or never gave out) is `Gone`.
    pub(super) fn backlog(
        &mut self,
        from: WatchFrom,
        what: WatchedKind,
        only: Option<&str>,
        mut may_see: impl FnMut(&str) -> bool,
    ) -> Result<Backlog, Error> {
        self.watched = true;
        let now = self.version();
        let mut changes = Vec::new();
        if let Some(v) = from.version {
            let oldest = self.history.front().map_or(self.seq, |e| e.version.seq - 1);
            if v.boot != self.boot || v.seq > self.seq {
                return Err(Error::Gone(format!(
                    "resource_version {v} was not given out by this server since it started \
                     (it is {now} now); list again, then watch from the list"
                )));
            }
            if v.seq < oldest {
                return Err(Error::Gone(format!(
                    "resource_version {v} is too old: this server keeps changes after {} only; \
                     list again, then watch from the list",
                    WatchVersion { seq: oldest, ..now }
                )));
            }
            let skip = usize::try_from(v.seq - oldest).unwrap_or(usize::MAX);
            changes.extend(self.history.iter().skip(skip).cloned());
        }
        let mut added = Vec::new();
        if from.initial_events {
            let objects: Box<dyn Iterator<Item = (&str, Snapshot)>> = match (what, only) {
                (WatchedKind::Clusters, Some(ns)) => {
                    Box::new(self.of(ns).map(move |c| (ns, Snapshot::Cluster(c.clone()))))
                }
                (WatchedKind::Clusters, None) => Box::new(
                    self.current
                        .values()
                        .map(|c| (c.namespace().as_str(), Snapshot::Cluster(c.clone()))),
                ),
                (WatchedKind::RayJobs, only) => Box::new(self.jobs_in(only)),
            };
            let mut seen: Option<(&str, bool)> = None;
            for (ns, object) in objects {
                let visible = match seen {
                    Some((last, visible)) if last == ns => visible,
                    _ => may_see(ns),
                };
                seen = Some((ns, visible));
                if visible {
                    added.push(object);
                }
            }
        }
        Ok(Backlog {
            changes,
            added,
            version: now,
        })
    }

    /// The clusters of namespace `ns`, found by range.
    pub(super) fn of<'a>(&'a self, ns: &'a str) -> impl Iterator<Item = &'a Entry> + 'a {
        self.current
            .range((Atom::new(ns), Atom::default())..)
            .take_while(move |((n, _), _)| n.as_str() == ns)
            .map(|(_, c)| c)
    }

    /// The objects of `what` in namespace `ns`, as `ADDED` would show them.
    pub(super) fn snapshot_of(&self, ns: &str, what: WatchedKind) -> Vec<Snapshot> {
        match what {
            WatchedKind::Clusters => self.of(ns).cloned().map(Snapshot::Cluster).collect(),
            WatchedKind::RayJobs => self.jobs_in(Some(ns)).map(|(_, s)| s).collect(),
        }
    }

    /// The namespaces that hold clusters or RayJobs.
    pub(super) fn namespaces(&self) -> BTreeSet<&str> {
        self.current
            .keys()
            .chain(self.rayjobs.keys())
            .map(|(ns, _)| ns.as_str())
            .collect()
    }

    fn record(&mut self, kind: WatchEventType, object: Watched) -> Arc<WatchEvent> {
        self.seq += 1;
        let event = Arc::new(WatchEvent {
            kind,
            version: self.version(),
            object: Some(object),
        });
        if self.history.len() >= self.keep {
            self.history.pop_front();
        }
        self.history.push_back(event.clone());
        event
    }

    /// Keeps `summary` with the entry at `key`, letting go of the oldest
    /// kept beyond `kept_max`.
    fn keep_summary(&mut self, key: &Key, summary: Arc<Summary>) {
        let Some(entry) = self.current.get_mut(key) else {
            return;
        };
        self.marks += 1;
        entry.summary = Some((summary, self.marks));
        self.kept.push_back((key.clone(), self.marks));
        while self.kept.len() > self.kept_max {
            let Some((key, mark)) = self.kept.pop_front() else {
                break;
            };
            if let Some(entry) = self.current.get_mut(&key)
                && entry.summary.as_ref().is_some_and(|(_, m)| *m == mark)
            {
                entry.summary = None;
            }
        }
    }

    /// Takes the cluster at `key` as it is `now` (`None`: gone), and
    /// records the change of its summary, if any (once watched). Objects
    /// at the versions held are only taken in (they may be a relist's
    /// copies: the old ones are let go); summaries are built only for what
    /// moved.
    fn update(&mut self, key: Key, now: Option<Entry>) -> Option<Arc<WatchEvent>> {
        let now = now.map(|mut now| {
            now.site_down = self.sites_down.get(&now.cluster.site).cloned();
            now
        });
        if !self.watched {
            match (now, self.current.get_mut(&key)) {
                (None, _) => _ = self.current.remove(&key),
                (Some(now), Some(entry)) if entry.is_of(&now.cluster, &now.pods) => {
                    entry.cluster = now.cluster;
                    entry.pods = now.pods;
                }
                (Some(now), _) => _ = self.current.insert(key, now),
            }
            return None;
        }
        let Some(now) = now else {
            let old = self.current.remove(&key)?;
            return Some(self.record(WatchEventType::Deleted, Watched::Cluster(old.summary())));
        };
        let Some(entry) = self.current.get_mut(&key) else {
            let plain = now.plain_summary();
            let shown = now.summary();
            self.current.insert(key.clone(), now);
            self.keep_summary(&key, plain);
            return Some(self.record(WatchEventType::Added, Watched::Cluster(shown)));
        };
        if entry.is_of(&now.cluster, &now.pods) {
            entry.cluster = now.cluster;
            entry.pods = now.pods;
            return None;
        }
        let old = entry.summary();
        let plain = now.plain_summary();
        let new = now.summary();
        *entry = now;
        self.keep_summary(&key, plain);
        (old != new).then(|| self.record(WatchEventType::Modified, Watched::Cluster(new)))
    }

    /// Takes the sites that do not answer `now`: each cluster of a site
    /// that went down or came back is `MODIFIED`, marked with since when
    /// its site has not answered, or no longer (once watched).
    fn sites_changed(&mut self, now: BTreeMap<Site, Arc<str>>) -> Vec<Arc<WatchEvent>> {
        if now == self.sites_down {
            return Vec::new();
        }
        let changed: BTreeSet<Site> = now
            .iter()
            .chain(&self.sites_down)
            .filter(|(site, since)| now.get(*site) != Some(*since) || self.sites_down.get(*site) != Some(*since))
            .map(|(site, _)| site.clone())
            .collect();
        self.sites_down = now;
        let mut moved = Vec::new();
        for entry in self.current.values_mut() {
            if !changed.contains(&entry.cluster.site) {
                continue;
            }
            entry.site_down = self.sites_down.get(&entry.cluster.site).cloned();
            // Its mark changed (or came or went), so its summary did: one
            // is built only for those a watch is told about.
            if self.watched {
                moved.push(entry.summary());
            }
        }
        moved
            .into_iter()
            .map(|summary| self.record(WatchEventType::Modified, Watched::Cluster(summary)))
            .collect()
    }
}

/// The sites `feed` says do not answer, each since when (RFC 3339).
fn sites_down(feed: &dyn ClusterFeed) -> BTreeMap<Site, Arc<str>> {
    feed.sites_down()
        .into_iter()
        .map(|(site, since)| (site, Arc::from(since.to_string())))
        .collect()
}

/// The hub of one server.
pub(super) struct Hub {
    feed: Arc<dyn ClusterFeed>,
    held: Mutex<Held>,
    events: broadcast::Sender<Arc<WatchEvent>>,
}

impl Hub {
    /// A hub over `feed`, keeping `keep` changes; it follows the feed
    /// until the process ends.
    pub(super) fn start(feed: Arc<dyn ClusterFeed>, keep: usize) -> Arc<Self> {
        let changes = feed.changes();
        let current = entries(feed.as_ref()).collect();
        let mut held = Held::new(fastrand::u32(..), current, keep, KEPT);
        held.rayjobs = jobs::entries(feed.as_ref()).collect();
        held.sites_changed(sites_down(feed.as_ref()));
        let hub = Arc::new(Self {
            feed,
            held: Mutex::new(held),
            events: broadcast::channel(keep.max(16)).0,
        });
        let weak = Arc::downgrade(&hub);
        tokio::spawn(async move {
            let mut changes = changes;
            while let Some(change) = changes.next().await {
                let Some(hub) = weak.upgrade() else { return };
                hub.apply(&change);
            }
        });
        hub
    }

    /// Whether its feed has listed everything once.
    pub(super) fn ready(&self) -> bool {
        self.feed.ready()
    }

    /// The held state, locked.
    pub(super) fn held(&self) -> MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The summaries of one page of clusters (each with its pods), the
    /// page in (namespace, name) order: the hub's kept one where its
    /// objects are at the same versions (a list then builds and encodes
    /// nothing), else built, and kept where they are the hub's objects.
    /// The hub's entries are walked alongside the page from the page's
    /// first key, not looked up one by one; summaries are built outside
    /// the hub's lock.
    pub(crate) fn summaries_of(&self, page: &[PageItem<'_>]) -> Vec<Arc<Summary>> {
        let Some((first, _)) = page.first() else {
            return Vec::new();
        };
        // For each item: its kept summary, or whether the hub holds it.
        let mut found: Vec<Result<Arc<Summary>, bool>> = Vec::with_capacity(page.len());
        {
            let held = self.held();
            let from = (first.metadata.namespace.clone(), first.metadata.name.clone());
            let mut current = held.current.range(from..).peekable();
            for (cluster, pods) in page {
                let m = &cluster.metadata;
                let mut this = Err(false);
                // Atoms compare equal by pointer: the usual step is one
                // pointer comparison; text is compared only to skip.
                while let Some(((ns, name), entry)) = current.peek() {
                    if *ns == m.namespace && *name == m.name {
                        if entry.is_of(cluster, pods) {
                            this = entry.summary.as_ref().map(|(s, _)| s.clone()).ok_or(true);
                        }
                        current.next();
                        break;
                    }
                    if (ns.as_str(), name.as_str()) > (m.namespace.as_str(), m.name.as_str()) {
                        break;
                    }
                    current.next();
                }
                found.push(this);
            }
        }
        let mut to_keep = Vec::new();
        let summaries: Vec<Arc<Summary>> = page
            .iter()
            .zip(found)
            .map(|((cluster, pods), found)| match found {
                Ok(summary) => summary,
                Err(held) => {
                    let summary = Arc::new(summarize(cluster, pods));
                    if held {
                        to_keep.push((*cluster, *pods, summary.clone()));
                    }
                    summary
                }
            })
            .collect();
        if !to_keep.is_empty() {
            let mut held = self.held();
            for (cluster, pods, summary) in to_keep {
                let key = (cluster.metadata.namespace.clone(), cluster.metadata.name.clone());
                if held.current.get(&key).is_some_and(|e| e.is_of(cluster, pods)) {
                    held.keep_summary(&key, summary);
                }
            }
        }
        summaries
    }

    /// The live changes from now on (subscribe while holding [`Self::held`]).
    pub(super) fn subscribe(&self) -> broadcast::Receiver<Arc<WatchEvent>> {
        self.events.subscribe()
    }

    /// Records the change and broadcasts its events before letting go of
    /// [`Self::held`]: a watcher starting meanwhile (backlog, position and
    /// subscription under that lock) then gets each event exactly once,
    /// from its backlog or from the channel.
    fn apply(&self, change: &FeedChange) {
        let feed = self.feed.as_ref();
        let (held, now) = match change {
            FeedChange::Cluster { namespace, name } => {
                let now = entry(feed, namespace, name);
                let mut held = self.held();
                let event = held.update((namespace.clone(), name.clone()), now);
                let mut events: Vec<_> = event.into_iter().collect();
                events.extend(held.cluster_moved(feed, namespace, name));
                (held, events)
            }
            FeedChange::RayJob { namespace, name } => {
                let now = jobs::entry(feed, namespace, name);
                let mut held = self.held();
                let event = held.update_rayjob((namespace.clone(), name.clone()), now);
                (held, event.into_iter().collect())
            }
            FeedChange::Sites => {
                let now = sites_down(feed);
                let mut held = self.held();
                let events = held.sites_changed(now);
                (held, events)
            }
            FeedChange::All => {
                let fresh: BTreeMap<Key, Entry> = entries(feed).collect();
                let down = sites_down(feed);
                let mut held = self.held();
                let mut events = held.sites_changed(down);
                let gone: Vec<Key> = held
                    .current
                    .keys()
                    .filter(|k| !fresh.contains_key(*k))
                    .cloned()
                    .collect();
                events.extend(gone.into_iter().filter_map(|key| held.update(key, None)));
                events.extend(fresh.into_iter().filter_map(|(key, now)| held.update(key, Some(now))));
                events.extend(held.resync_rayjobs(jobs::entries(feed).collect()));
                (held, events)
            }
        };
        for event in now {
            metrics::counter!("krayne_watch_changes_total", "type" => event.kind.as_str()).increment(1);
            let _ = self.events.send(event);
        }
        drop(held);
    }
}

/// A cluster's summary, as list and watch send it.
pub(crate) fn summarize<P: std::borrow::Borrow<ObservedPod>>(cluster: &ObservedCluster, pods: &[P]) -> Summary {
    let pods: Vec<&ObservedPod> = pods.iter().map(std::borrow::Borrow::borrow).collect();
    Summary::new(manifest::cluster_info(cluster, Some(&pods)))
}

/// One cluster from the feed, with its pods.
fn entry(feed: &dyn ClusterFeed, namespace: &str, name: &str) -> Option<Entry> {
    let cluster = feed.cluster(namespace, name)?;
    Some(Entry::new(cluster, feed.pods(namespace, name)))
}

/// Every cluster from the feed, with its pods.
fn entries(feed: &dyn ClusterFeed) -> impl Iterator<Item = (Key, Entry)> + '_ {
    feed.clusters(None).into_iter().map(|c| {
        let key = (c.metadata.namespace.clone(), c.metadata.name.clone());
        let pods = feed.pods(&key.0, &key.1);
        (key, Entry::new(c, pods))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(ns: &str, name: &str) -> Entry {
        Entry::new(cluster(ns, name, "1"), Vec::new())
    }

    fn held(keep: usize, changes: u64) -> Held {
        let mut h = Held::new(
            7,
            BTreeMap::from([(("ml".into(), "a".into()), entry("ml", "a"))]),
            keep,
            KEPT,
        );
        h.watched = true;
        for _ in 0..changes {
            let summary = h.current[&("ml".into(), "a".into())].summary();
            h.record(WatchEventType::Modified, Watched::Cluster(summary));
        }
        h
    }

    fn at(seq: u64) -> WatchFrom {
        WatchFrom {
            version: Some(WatchVersion { boot: 7, seq }),
            initial_events: false,
        }
    }

    fn seqs(events: &[Arc<WatchEvent>]) -> Vec<u64> {
        events.iter().map(|e| e.version.seq).collect()
    }

    #[test]
    fn a_resume_gets_exactly_what_came_after_its_version() {
        let mut h = held(4, 10);
        assert_eq!(
            seqs(
                &h.backlog(at(6), WatchedKind::Clusters, None, |_| true)
                    .unwrap()
                    .events()
            ),
            [7, 8, 9, 10]
        );
        assert_eq!(
            seqs(
                &h.backlog(at(9), WatchedKind::Clusters, None, |_| true)
                    .unwrap()
                    .events()
            ),
            [10]
        );
        assert!(
            h.backlog(at(10), WatchedKind::Clusters, None, |_| true)
                .unwrap()
                .events()
                .is_empty()
        );
        assert!(
            h.backlog(WatchFrom::default(), WatchedKind::Clusters, None, |_| true)
                .unwrap()
                .events()
                .is_empty()
        );
    }

    #[test]
    fn versions_not_held_are_gone() {
        let mut h = held(4, 10);
        for from in [
            at(5),
            at(11),
            WatchFrom {
                version: Some(WatchVersion { boot: 8, seq: 9 }),
                initial_events: false,
            },
        ] {
            let Err(e) = h.backlog(from, WatchedKind::Clusters, None, |_| true) else {
                panic!("{from:?} held")
            };
            assert_eq!(e.code(), "gone", "{from:?}");
            assert!(e.to_string().contains("list again"), "{e}");
        }
        // Nothing recorded yet: only now is held.
        let mut fresh = held(4, 0);
        assert!(
            fresh
                .backlog(at(0), WatchedKind::Clusters, None, |_| true)
                .unwrap()
                .events()
                .is_empty()
        );
        assert!(matches!(
            fresh.backlog(at(1), WatchedKind::Clusters, None, |_| true),
            Err(Error::Gone(_))
        ));
    }

    /// A feed that holds what it is given and never changes.
    struct Fixed(Vec<Arc<ObservedCluster>>, Vec<Arc<ObservedPod>>);

    impl ClusterFeed for Fixed {
        fn changes(&self) -> futures::stream::BoxStream<'static, FeedChange> {
            futures::stream::pending().boxed()
        }
        fn ready(&self) -> bool {
            true
        }
        fn clusters(&self, namespace: Option<&str>) -> Vec<Arc<ObservedCluster>> {
            let wanted = |c: &&Arc<ObservedCluster>| namespace.is_none_or(|ns| c.metadata.namespace == ns);
            self.0.iter().filter(wanted).cloned().collect()
        }
        fn cluster(&self, namespace: &str, name: &str) -> Option<Arc<ObservedCluster>> {
            let m = |c: &&Arc<ObservedCluster>| c.metadata.namespace == namespace && c.metadata.name == name;
            self.0.iter().find(m).cloned()
        }
        fn pods(&self, namespace: &str, cluster: &str) -> Vec<Arc<ObservedPod>> {
            let m = |p: &&Arc<ObservedPod>| p.metadata.namespace == namespace && p.cluster_name() == Some(cluster);
            self.1.iter().filter(m).cloned().collect()
        }
        fn rayjobs(&self, _: Option<&str>) -> Vec<Arc<crate::domain::ObservedRayJob>> {
            Vec::new()
        }
        fn rayjob(&self, _: &str, _: &str) -> Option<Arc<crate::domain::ObservedRayJob>> {
            None
        }
    }

    fn cluster(ns: &str, name: &str, version: &str) -> Arc<ObservedCluster> {
        let mut c = ObservedCluster::default();
        c.metadata.namespace = ns.into();
        c.metadata.name = name.into();
        c.metadata.resource_version = Some(version.into());
        Arc::new(c)
    }

    fn pod(ns: &str, cluster: &str, version: &str) -> Arc<ObservedPod> {
        let mut p = ObservedPod::default();
        p.metadata.namespace = ns.into();
        p.metadata.name = format!("{cluster}-head").into();
        p.metadata.resource_version = Some(version.into());
        p.metadata
            .labels
            .edit(|l| _ = l.insert(manifest::LABEL_CLUSTER, cluster.into()));
        Arc::new(p)
    }

    #[tokio::test]
    async fn a_page_reuses_the_hubs_summaries_only_where_nothing_changed() {
        let clusters = ["ml/a", "ml/b", "ml/d", "xy/c"].map(|k| {
            let (ns, name) = k.split_once('/').unwrap();
            cluster(ns, name, "1")
        });
        let hub = Hub::start(Arc::new(Fixed(clusters.to_vec(), vec![pod("ml", "a", "5")])), 8);
        let kept = |ns: &str, name: &str| {
            let held = hub.held();
            held.current[&(Atom::new(ns), Atom::new(name))]
                .summary
                .as_ref()
                .map(|(s, _)| s.clone())
        };
        assert!(kept("ml", "a").is_none(), "nothing is built before it is asked for");
        let (a, d, c) = (&clusters[0], &clusters[2], &clusters[3]);
        let (pods_a, none) = (vec![pod("ml", "a", "5")], Vec::new());
        let (b2, new_c) = (cluster("ml", "b", "2"), cluster("ml", "c", "1"));
        let page: Vec<PageItem<'_>> = vec![
            (a, &pods_a[..]),
            (&b2, &none[..]),
            (&new_c, &none[..]),
            (d, &none[..]),
            (c, &none[..]),
        ];
        let got = hub.summaries_of(&page);
        let names: Vec<_> = got.iter().map(|s| s.info.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c", "d", "c"]);
        assert!(
            Arc::ptr_eq(&got[0], &kept("ml", "a").unwrap()),
            "same versions (a copy of the pod): kept"
        );
        assert!(
            kept("ml", "b").is_none(),
            "a newer cluster than the hub's: built, not kept"
        );
        assert_eq!(got[1].info.resource_version.as_deref(), Some("2"));
        assert!(
            Arc::ptr_eq(&got[3], &kept("ml", "d").unwrap()),
            "found after a key the hub lacks"
        );
        assert!(Arc::ptr_eq(&got[4], &kept("xy", "c").unwrap()), "and across namespaces");
        let again = hub.summaries_of(&page);
        for i in [0, 3, 4] {
            assert!(Arc::ptr_eq(&got[i], &again[i]), "{i}: the kept summary again");
        }
        assert!(!Arc::ptr_eq(&got[1], &again[1]), "not the hub's: built each time");
        let pod_moved = [pod("ml", "a", "6")];
        let moved = hub.summaries_of(&[(a, &pod_moved[..])]);
        assert!(!Arc::ptr_eq(&moved[0], &got[0]), "a pod's newer version: built anew");
        assert!(
            Arc::ptr_eq(&got[0], &kept("ml", "a").unwrap()),
            "and not kept over the hub's"
        );
        assert!(hub.summaries_of(&[]).is_empty());
    }

    #[test]
    fn the_hub_keeps_a_bounded_number_of_summaries_and_drops_the_oldest() {
        let names: Vec<String> = (0..10).map(|i| format!("c{i}")).collect();
        let current = names
            .iter()
            .map(|n| (("ml".into(), n.as_str().into()), entry("ml", n)))
            .collect();
        let mut h = Held::new(7, current, 4, 3);
        for n in &names {
            let key = ("ml".into(), n.as_str().into());
            let summary = h.current[&key].summary();
            h.keep_summary(&key, summary);
        }
        // Kept again: its older mark in the queue is passed over.
        let last = ("ml".into(), "c9".into());
        let summary = h.current[&last].summary();
        h.keep_summary(&last, summary);
        let kept: Vec<&str> = h
            .current
            .iter()
            .filter(|(_, e)| e.summary.is_some())
            .map(|((_, n), _)| n.as_str())
            .collect();
        assert_eq!(kept, ["c8", "c9"]);
        assert!(h.kept.len() <= 3);
    }

    #[test]
    fn a_change_is_recorded_only_when_the_summary_moves_and_a_relists_copies_are_taken_in() {
        let mut h = Held::new(7, BTreeMap::new(), 16, KEPT);
        let key: Key = ("ml".into(), "a".into());
        let of = |version: &str, pod_version: &str| {
            Some(Entry::new(
                cluster("ml", "a", version),
                vec![pod("ml", "a", pod_version)],
            ))
        };
        let kind = |e: Option<Arc<WatchEvent>>| e.map(|e| e.kind);
        assert_eq!(kind(h.update(key.clone(), of("0", "0"))), None, "unwatched: taken in");
        assert!(
            h.current[&key].summary.is_none() && h.version().seq == 0,
            "nothing built or recorded"
        );
        assert_eq!(kind(h.update(key.clone(), None)), None);
        assert!(h.current.is_empty());
        assert!(
            h.backlog(WatchFrom::default(), WatchedKind::Clusters, None, |_| true)
                .is_ok()
        );
        assert_eq!(kind(h.update(key.clone(), of("1", "1"))), Some(WatchEventType::Added));
        let copy = of("1", "1").unwrap();
        let copied = Arc::as_ptr(&copy.cluster);
        assert_eq!(kind(h.update(key.clone(), Some(copy))), None, "same versions");
        assert_eq!(
            Arc::as_ptr(&h.current[&key].cluster),
            copied,
            "the copy is held, the old let go"
        );
        assert!(h.current[&key].summary.is_some(), "and the summary kept");
        assert_eq!(
            kind(h.update(key.clone(), of("1", "2"))),
            None,
            "a pod's newer version with the same summary"
        );
        assert_eq!(
            kind(h.update(key.clone(), of("2", "2"))),
            Some(WatchEventType::Modified)
        );
        assert_eq!(kind(h.update(key.clone(), None)), Some(WatchEventType::Deleted));
        assert_eq!(kind(h.update(key.clone(), None)), None);
        assert_eq!(h.version().seq, 3);
    }

    /// A feed of one cluster whose version moves on each time it is read.
    struct Moving(std::sync::atomic::AtomicU64);

    impl ClusterFeed for Moving {
        fn changes(&self) -> futures::stream::BoxStream<'static, FeedChange> {
            futures::stream::pending().boxed()
        }
        fn ready(&self) -> bool {
            true
        }
        fn clusters(&self, _: Option<&str>) -> Vec<Arc<ObservedCluster>> {
            vec![cluster("ml", "a", "0")]
        }
        fn cluster(&self, _: &str, _: &str) -> Option<Arc<ObservedCluster>> {
            let version = self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            Some(cluster("ml", "a", &version.to_string()))
        }
        fn pods(&self, _: &str, _: &str) -> Vec<Arc<ObservedPod>> {
            Vec::new()
        }
        fn rayjobs(&self, _: Option<&str>) -> Vec<Arc<crate::domain::ObservedRayJob>> {
            Vec::new()
        }
        fn rayjob(&self, _: &str, _: &str) -> Option<Arc<crate::domain::ObservedRayJob>> {
            None
        }
    }

    /// A watcher starts (position and subscription under the lock) while
    /// another thread applies changes: the first change it receives live
    /// is always one after its position, never one it started from.
    #[tokio::test]
    async fn a_watcher_starting_while_changes_land_never_receives_one_it_started_from() {
        use std::sync::atomic::{AtomicBool, Ordering};
        const STARTS: usize = 20_000;
        let hub = Hub::start(Arc::new(Moving(0.into())), 64);
        assert!(
            hub.held()
                .backlog(WatchFrom::default(), WatchedKind::Clusters, None, |_| true)
                .is_ok(),
            "watched"
        );
        let enough = Arc::new(AtomicBool::new(false));
        let writer = {
            let (hub, enough) = (hub.clone(), enough.clone());
            std::thread::spawn(move || {
                let change = FeedChange::Cluster {
                    namespace: "ml".into(),
                    name: "a".into(),
                };
                for _ in 0..5_000_000 {
                    if enough.load(Ordering::Acquire) {
                        return;
                    }
                    hub.apply(&change);
                }
            })
        };
        let mut starts = 0;
        while starts < STARTS && !writer.is_finished() {
            let (position, mut live) = {
                let held = hub.held();
                (held.version(), hub.subscribe())
            };
            loop {
                match live.try_recv() {
                    Ok(event) => {
                        assert!(event.version > position, "{:?} again after {position:?}", event.version);
                        starts += 1;
                        break;
                    }
                    // What is left is still newer than the position.
                    Err(broadcast::error::TryRecvError::Lagged(_)) => {}
                    Err(broadcast::error::TryRecvError::Empty) if !writer.is_finished() => std::thread::yield_now(),
                    Err(_) => break,
                }
            }
        }
        enough.store(true, Ordering::Release);
        writer.join().unwrap();
        assert_eq!(starts, STARTS, "the writer stopped before enough watchers started");
    }

    #[test]
    fn initial_events_are_every_cluster_added_at_the_current_version() {
        let mut h = held(4, 3);
        let initial = h
            .backlog(
                WatchFrom {
                    version: None,
                    initial_events: true,
                },
                WatchedKind::Clusters,
                None,
                |_| true,
            )
            .unwrap()
            .events();
        assert_eq!(initial.len(), 1);
        assert_eq!(initial[0].kind, WatchEventType::Added);
        assert_eq!(initial[0].version, WatchVersion { boot: 7, seq: 3 });
    }

    #[test]
    fn initial_events_are_of_the_watched_namespace_or_those_the_caller_may_see() {
        let mut h = held(4, 0);
        for (ns, name) in [("ml", "b"), ("ml-2", "c"), ("ml-2", "d"), ("other", "e"), ("m", "f")] {
            h.current.insert((ns.into(), name.into()), entry(ns, name));
        }
        let initial = WatchFrom {
            version: None,
            initial_events: true,
        };
        let names = |backlog: Backlog| -> Vec<String> {
            backlog
                .events()
                .iter()
                .filter_map(|e| e.cluster().map(|c| c.info.name.clone()))
                .collect()
        };
        let mut asked = Vec::new();
        let one = h
            .backlog(initial, WatchedKind::Clusters, Some("ml"), |ns| {
                asked.push(ns.to_owned());
                true
            })
            .unwrap();
        assert_eq!(names(one), ["a", "b"]);
        let viewable = h
            .backlog(initial, WatchedKind::Clusters, None, |ns| {
                asked.push(ns.to_owned());
                ns.starts_with("ml")
            })
            .unwrap();
        assert_eq!(names(viewable), ["a", "b", "c", "d"]);
        assert_eq!(asked, ["ml", "m", "ml", "ml-2", "other"], "asked once per namespace");
    }

    #[test]
    fn a_site_going_down_marks_its_clusters_in_a_watch_and_coming_back_unmarks_them() {
        let mut us = cluster("ml", "far", "1");
        Arc::make_mut(&mut us).site = Site::new("us-2");
        let mut h = held(16, 0);
        let far = ("ml".into(), "far".into());
        assert!(h.update(far, Some(Entry::new(us, Vec::new()))).is_some(), "ADDED");
        let since: Arc<str> = Arc::from("2026-11-29T16:00:00Z");
        let down = h.sites_changed(BTreeMap::from([(Site::new("us-2"), since.clone())]));
        assert_eq!(down.len(), 1, "its one cluster, not local's");
        let Some(Watched::Cluster(marked)) = &down[0].object else {
            panic!("{down:?}")
        };
        assert_eq!(
            (marked.info.name.as_str(), marked.info.site_unavailable_since.as_deref()),
            ("far", Some(&*since))
        );
        assert!(
            h.sites_changed(BTreeMap::from([(Site::new("us-2"), since)])).is_empty(),
            "no change"
        );
        // A watch starting now sees it marked; a list is marked by the use case.
        let all = WatchFrom {
            version: None,
            initial_events: true,
        };
        let start = h.backlog(all, WatchedKind::Clusters, None, |_| true).unwrap();
        let added = start.events();
        let shown = |e: &Arc<WatchEvent>| match &e.object {
            Some(Watched::Cluster(s)) => (s.info.name.clone(), s.info.site_unavailable_since.is_some()),
            _ => (String::new(), false),
        };
        let mut seen: Vec<_> = added.iter().map(shown).collect();
        seen.sort();
        assert_eq!(seen, [("a".to_owned(), false), ("far".to_owned(), true)]);
        let back = h.sites_changed(BTreeMap::new());
        assert_eq!(back.iter().map(shown).collect::<Vec<_>>(), [("far".to_owned(), false)]);
    }
}
