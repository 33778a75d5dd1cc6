//! The hub: one per server. It turns the store's feed into cluster
//! summaries once (however many watch), numbers the changes, keeps the
//! last of them for resumes, and broadcasts them to the watchers.

use std::{
    collections::{BTreeMap, VecDeque},
    sync::{Arc, Mutex, MutexGuard},
};

use futures::StreamExt as _;
use tokio::sync::broadcast;

use crate::{
    domain::{
        Atom, BuiltFrom, ClusterFeed, Error, FeedChange, ObservedCluster, ObservedPod, Summary, WatchEvent,
        WatchEventType, WatchFrom, WatchVersion,
    },
    manifest,
};

/// A cluster's place: namespace, name.
pub(super) type Key = (Atom, Atom);

/// A cluster of a list's page with its pods.
pub(crate) type PageItem<'a> = (&'a ObservedCluster, &'a [Arc<ObservedPod>]);

/// What the hub holds, under one lock so a watcher's start (backlog or
/// snapshot, then the live channel) has no gap.
pub(super) struct Held {
    /// This run's id in versions.
    boot: u32,
    /// Changes numbered so far.
    seq: u64,
    /// The last changes, oldest first.
    history: VecDeque<Arc<WatchEvent>>,
    /// Every cluster's summary as of `seq`.
    pub(super) current: BTreeMap<Key, Arc<Summary>>,
    /// How many changes `history` keeps.
    keep: usize,
}

impl Held {
    /// The version after the last change.
    pub(super) fn version(&self) -> WatchVersion {
        WatchVersion {
            boot: self.boot,
            seq: self.seq,
        }
    }

    /// What a watch starting `from` sees before the live changes: the
    /// changes after its version, or every cluster as `ADDED` — of
    /// namespace `only` when given (found by range: a watch of one
    /// namespace costs what it holds, not the platform), of the namespaces
    /// `may_see` otherwise (asked once per namespace); a version this run
    /// no longer holds (or never gave out) is `Gone`.
    pub(super) fn backlog(
        &self,
        from: WatchFrom,
        only: Option<&str>,
        mut may_see: impl FnMut(&str) -> bool,
    ) -> Result<Vec<Arc<WatchEvent>>, Error> {
        let now = self.version();
        let mut backlog = Vec::new();
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
            backlog.extend(self.history.iter().skip(skip).cloned());
        }
        if from.initial_events {
            let clusters: Box<dyn Iterator<Item = &Arc<Summary>>> = match only {
                Some(ns) => Box::new(
                    self.current
                        .range((Atom::new(ns), Atom::default())..)
                        .take_while(move |((n, _), _)| n.as_str() == ns)
                        .map(|(_, c)| c),
                ),
                None => Box::new(self.current.values()),
            };
            let mut seen: Option<(&str, bool)> = None;
            for c in clusters {
                let ns = c.info.namespace.as_str();
                let visible = match seen {
                    Some((last, visible)) if last == ns => visible,
                    _ => may_see(ns),
                };
                seen = Some((ns, visible));
                if visible {
                    backlog.push(Arc::new(WatchEvent {
                        kind: WatchEventType::Added,
                        version: now,
                        cluster: Some(c.clone()),
                    }));
                }
            }
        }
        Ok(backlog)
    }

    fn record(&mut self, kind: WatchEventType, cluster: Arc<Summary>) -> Arc<WatchEvent> {
        self.seq += 1;
        let event = Arc::new(WatchEvent {
            kind,
            version: self.version(),
            cluster: Some(cluster),
        });
        if self.history.len() >= self.keep {
            self.history.pop_front();
        }
        self.history.push_back(event.clone());
        event
    }
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
        let current = summaries(feed.as_ref(), None);
        let hub = Arc::new(Self {
            feed,
            held: Mutex::new(Held {
                boot: fastrand::u32(..),
                seq: 0,
                history: VecDeque::with_capacity(keep.min(1024)),
                current,
                keep: keep.max(1),
            }),
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
    /// page in (namespace, name) order: the hub's own where built from the
    /// same versions (a list then builds and encodes nothing), else new
    /// ones. The hub's entries change only with its events, so a list never
    /// makes one. One lock per page: the hub's entries are walked alongside
    /// the page from the page's first key, not looked up one by one.
    pub(crate) fn summaries_of(&self, page: &[PageItem<'_>]) -> Vec<Arc<Summary>> {
        let Some((first, _)) = page.first() else {
            return Vec::new();
        };
        let mut held_ones = Vec::with_capacity(page.len());
        {
            let held = self.held();
            let from = (first.metadata.namespace.clone(), first.metadata.name.clone());
            let mut current = held.current.range(from..).peekable();
            for (cluster, pods) in page {
                let m = &cluster.metadata;
                let mut found = None;
                // Atoms compare equal by pointer: the usual step is one
                // pointer comparison; text is compared only to skip.
                while let Some(((ns, name), summary)) = current.peek() {
                    if *ns == m.namespace && *name == m.name {
                        found = Some(*summary).filter(|s| s.built_from.matches(cluster, pods)).cloned();
                        current.next();
                        break;
                    }
                    if (ns.as_str(), name.as_str()) > (m.namespace.as_str(), m.name.as_str()) {
                        break;
                    }
                    current.next();
                }
                held_ones.push(found);
            }
        }
        page.iter()
            .zip(held_ones)
            .map(|((cluster, pods), held)| {
                held.unwrap_or_else(|| {
                    let pods: Vec<&ObservedPod> = pods.iter().map(|p| &**p).collect();
                    Arc::new(summarize(cluster, &pods))
                })
            })
            .collect()
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
        let (held, now) = match change {
            FeedChange::Cluster { namespace, name } => {
                let key = (namespace.clone(), name.clone());
                let summary = summary(self.feed.as_ref(), namespace, name);
                let mut held = self.held();
                let before = held.current.get(&key).cloned();
                let event = match (before, summary) {
                    (None, None) => None,
                    (Some(old), None) => {
                        held.current.remove(&key);
                        Some(held.record(WatchEventType::Deleted, old))
                    }
                    (None, Some(new)) => {
                        held.current.insert(key, new.clone());
                        Some(held.record(WatchEventType::Added, new))
                    }
                    // The same summary from newer versions: kept (lists
                    // reuse it by its versions), but nothing happened.
                    (Some(old), Some(new)) if old == new => {
                        held.current.insert(key, new);
                        None
                    }
                    (Some(_), Some(new)) => {
                        held.current.insert(key, new.clone());
                        Some(held.record(WatchEventType::Modified, new))
                    }
                };
                (held, event.into_iter().collect::<Vec<_>>())
            }
            FeedChange::All => {
                let fresh = summaries(self.feed.as_ref(), None);
                let mut held = self.held();
                let gone: Vec<Key> = held
                    .current
                    .keys()
                    .filter(|k| !fresh.contains_key(*k))
                    .cloned()
                    .collect();
                let mut events = Vec::new();
                for key in gone {
                    if let Some(old) = held.current.remove(&key) {
                        events.push(held.record(WatchEventType::Deleted, old));
                    }
                }
                for (key, new) in fresh {
                    let kind = match held.current.get(&key) {
                        None => WatchEventType::Added,
                        Some(old) if *old == new => {
                            held.current.insert(key, new);
                            continue;
                        }
                        Some(_) => WatchEventType::Modified,
                    };
                    held.current.insert(key, new.clone());
                    events.push(held.record(kind, new));
                }
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
pub(crate) fn summarize(cluster: &ObservedCluster, pods: &[&ObservedPod]) -> Summary {
    Summary::new(
        manifest::cluster_info(cluster, Some(pods)),
        BuiltFrom::of(cluster, pods),
    )
}

/// One cluster's summary from the feed.
fn summary(feed: &dyn ClusterFeed, namespace: &str, name: &str) -> Option<Arc<Summary>> {
    let cluster = feed.cluster(namespace, name)?;
    let pods = feed.pods(namespace, name);
    let pods: Vec<_> = pods.iter().map(|p| &**p).collect();
    Some(Arc::new(summarize(&cluster, &pods)))
}

/// Every cluster's summary from the feed.
fn summaries(feed: &dyn ClusterFeed, namespace: Option<&str>) -> BTreeMap<Key, Arc<Summary>> {
    feed.clusters(namespace)
        .iter()
        .filter_map(|c| {
            let (ns, name) = (&c.metadata.namespace, &c.metadata.name);
            Some(((ns.clone(), name.clone()), summary(feed, ns, name)?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ClusterStatus;

    fn info(name: &str) -> Arc<Summary> {
        Arc::new(Summary::new(
            crate::domain::ClusterInfo {
                name: name.into(),
                namespace: "ml".into(),
                status: ClusterStatus::Creating,
                head_ip: None,
                dashboard_url: None,
                client_url: None,
                notebook_url: None,
                code_server_url: None,
                ssh_url: None,
                num_workers: 1,
                autoscaling_enabled: false,
                created_at: None,
                ready_workers: 0,
                suspended: false,
                created_by: None,
                lifecycle: None,
                lifecycle_warned_at: None,
                idle_since: None,
                suspends_at: None,
                expires_at: None,
                kept_until: None,
                resource_version: None,
            },
            BuiltFrom::default(),
        ))
    }

    fn held(keep: usize, changes: u64) -> Held {
        let mut h = Held {
            boot: 7,
            seq: 0,
            history: VecDeque::new(),
            current: BTreeMap::from([(("ml".into(), "a".into()), info("a"))]),
            keep,
        };
        for _ in 0..changes {
            h.record(WatchEventType::Modified, info("a"));
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
        let h = held(4, 10);
        assert_eq!(seqs(&h.backlog(at(6), None, |_| true).unwrap()), [7, 8, 9, 10]);
        assert_eq!(seqs(&h.backlog(at(9), None, |_| true).unwrap()), [10]);
        assert!(h.backlog(at(10), None, |_| true).unwrap().is_empty());
        assert!(h.backlog(WatchFrom::default(), None, |_| true).unwrap().is_empty());
    }

    #[test]
    fn versions_not_held_are_gone() {
        let h = held(4, 10);
        for from in [
            at(5),
            at(11),
            WatchFrom {
                version: Some(WatchVersion { boot: 8, seq: 9 }),
                initial_events: false,
            },
        ] {
            let e = h.backlog(from, None, |_| true).unwrap_err();
            assert_eq!(e.code(), "gone", "{from:?}");
            assert!(e.to_string().contains("list again"), "{e}");
        }
        // Nothing recorded yet: only now is held.
        let fresh = held(4, 0);
        assert!(fresh.backlog(at(0), None, |_| true).unwrap().is_empty());
        assert_eq!(fresh.backlog(at(1), None, |_| true).unwrap_err().code(), "gone");
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
        let held = |ns: &str, name: &str| hub.held().current[&(Atom::new(ns), Atom::new(name))].clone();
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
        assert!(Arc::ptr_eq(&got[0], &held("ml", "a")), "same versions: the hub's own");
        assert!(!Arc::ptr_eq(&got[1], &held("ml", "b")), "a newer cluster: built anew");
        assert_eq!(got[1].info.resource_version.as_deref(), Some("2"));
        assert!(
            Arc::ptr_eq(&got[3], &held("ml", "d")),
            "found after a key the hub lacks"
        );
        assert!(Arc::ptr_eq(&got[4], &held("xy", "c")), "and across namespaces");
        let pod_moved = [pod("ml", "a", "6")];
        let again = hub.summaries_of(&[(a, &pod_moved[..])]);
        assert!(
            !Arc::ptr_eq(&again[0], &held("ml", "a")),
            "a pod's newer version: built anew"
        );
        assert!(hub.summaries_of(&[]).is_empty());
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
    }

    /// A watcher starts (position and subscription under the lock) while
    /// another thread applies changes: the first change it receives live
    /// is always one after its position, never one it started from.
    #[tokio::test]
    async fn a_watcher_starting_while_changes_land_never_receives_one_it_started_from() {
        use std::sync::atomic::{AtomicBool, Ordering};
        const STARTS: usize = 20_000;
        let hub = Hub::start(Arc::new(Moving(0.into())), 64);
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
        let h = held(4, 3);
        let initial = h
            .backlog(
                WatchFrom {
                    version: None,
                    initial_events: true,
                },
                None,
                |_| true,
            )
            .unwrap();
        assert_eq!(initial.len(), 1);
        assert_eq!(initial[0].kind, WatchEventType::Added);
        assert_eq!(initial[0].version, WatchVersion { boot: 7, seq: 3 });
    }

    #[test]
    fn initial_events_are_of_the_watched_namespace_or_those_the_caller_may_see() {
        let mut h = held(4, 0);
        for (ns, name) in [("ml", "b"), ("ml-2", "c"), ("ml-2", "d"), ("other", "e"), ("m", "f")] {
            let mut summary = info(name);
            if let Some(s) = Arc::get_mut(&mut summary) {
                s.info.namespace = ns.into();
            }
            h.current.insert((ns.into(), name.into()), summary);
        }
        let initial = WatchFrom {
            version: None,
            initial_events: true,
        };
        let names = |events: Vec<Arc<WatchEvent>>| -> Vec<String> {
            events
                .iter()
                .filter_map(|e| e.cluster.as_ref().map(|c| c.info.name.clone()))
                .collect()
        };
        let mut asked = Vec::new();
        let one = h
            .backlog(initial, Some("ml"), |ns| {
                asked.push(ns.to_owned());
                true
            })
            .unwrap();
        assert_eq!(names(one), ["a", "b"]);
        let viewable = h
            .backlog(initial, None, |ns| {
                asked.push(ns.to_owned());
                ns.starts_with("ml")
            })
            .unwrap();
        assert_eq!(names(viewable), ["a", "b", "c", "d"]);
        assert_eq!(asked, ["ml", "m", "ml", "ml-2", "other"], "asked once per namespace");
    }
}
