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
        ClusterFeed, Error, FeedChange, ObservedCluster, ObservedPod, Summary, WatchEvent, WatchEventType, WatchFrom,
        WatchVersion,
    },
    manifest,
};

/// A cluster's place: namespace, name.
pub(super) type Key = (String, String);

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
    /// changes after its version, or every cluster as `ADDED`; a version
    /// this run no longer holds (or never gave out) is `Gone`.
    pub(super) fn backlog(&self, from: WatchFrom) -> Result<Vec<Arc<WatchEvent>>, Error> {
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
            backlog.extend(self.current.values().map(|c| {
                Arc::new(WatchEvent {
                    kind: WatchEventType::Added,
                    version: now,
                    cluster: Some(c.clone()),
                })
            }));
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

    /// The summary of `cluster` with `pods`: the hub's own when it was
    /// built from the same versions (a list then builds and encodes
    /// nothing), else a new one. The hub's entries change only with its
    /// events, so a list never makes one.
    pub(in crate::service) fn summary_of(&self, cluster: &ObservedCluster, pods: &[&ObservedPod]) -> Arc<Summary> {
        let signature = signature(cluster, pods);
        let key = (cluster.metadata.namespace.clone(), cluster.metadata.name.clone());
        if let Some(held) = self.held().current.get(&key).filter(|s| s.signature == signature) {
            return held.clone();
        }
        Arc::new(summarize(cluster, pods))
    }

    /// The live changes from now on (subscribe while holding [`Self::held`]).
    pub(super) fn subscribe(&self) -> broadcast::Receiver<Arc<WatchEvent>> {
        self.events.subscribe()
    }

    fn apply(&self, change: &FeedChange) {
        let now = match change {
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
                    // reuse it by its signature), but nothing happened.
                    (Some(old), Some(new)) if old == new => {
                        held.current.insert(key, new);
                        None
                    }
                    (Some(_), Some(new)) => {
                        held.current.insert(key, new.clone());
                        Some(held.record(WatchEventType::Modified, new))
                    }
                };
                event.into_iter().collect::<Vec<_>>()
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
                events
            }
        };
        for event in now {
            metrics::counter!("krayne_watch_changes_total", "type" => event.kind.as_str()).increment(1);
            let _ = self.events.send(event);
        }
    }
}

/// Which versions of a cluster and its pods a summary is built from.
fn signature(cluster: &ObservedCluster, pods: &[&ObservedPod]) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    let mut h = std::hash::DefaultHasher::new();
    cluster.metadata.resource_version.hash(&mut h);
    for pod in pods {
        (&pod.metadata.name, &pod.metadata.resource_version).hash(&mut h);
    }
    h.finish()
}

/// A cluster's summary, as list and watch send it.
pub(in crate::service) fn summarize(cluster: &ObservedCluster, pods: &[&ObservedPod]) -> Summary {
    Summary::new(manifest::cluster_info(cluster, Some(pods)), signature(cluster, pods))
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
                resource_version: None,
            },
            0,
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
        assert_eq!(seqs(&h.backlog(at(6)).unwrap()), [7, 8, 9, 10]);
        assert_eq!(seqs(&h.backlog(at(9)).unwrap()), [10]);
        assert!(h.backlog(at(10)).unwrap().is_empty());
        assert!(h.backlog(WatchFrom::default()).unwrap().is_empty());
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
            let e = h.backlog(from).unwrap_err();
            assert_eq!(e.code(), "gone", "{from:?}");
            assert!(e.to_string().contains("list again"), "{e}");
        }
        // Nothing recorded yet: only now is held.
        let fresh = held(4, 0);
        assert!(fresh.backlog(at(0)).unwrap().is_empty());
        assert_eq!(fresh.backlog(at(1)).unwrap_err().code(), "gone");
    }

    #[test]
    fn initial_events_are_every_cluster_added_at_the_current_version() {
        let h = held(4, 3);
        let initial = h
            .backlog(WatchFrom {
                version: None,
                initial_events: true,
            })
            .unwrap();
        assert_eq!(initial.len(), 1);
        assert_eq!(initial[0].kind, WatchEventType::Added);
        assert_eq!(initial[0].version, WatchVersion { boot: 7, seq: 3 });
    }
}
