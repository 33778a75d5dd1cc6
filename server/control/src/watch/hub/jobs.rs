//! RayJobs in the hub: each held with its view (built when it or its
//! cluster changes: a platform's RayJobs are few beside its clusters), and
//! a change recorded when the view moves — the RayJob's own status, or its
//! cluster's.

use std::{collections::BTreeMap, sync::Arc};

use super::{Held, Key, Snapshot};
use crate::{
    domain::{Atom, ClusterFeed, ObservedRayJob, RayJobInfo, WatchEvent, WatchEventType, Watched},
    manifest,
};

/// A RayJob as the hub holds it: the cache's object and its view.
#[derive(Clone)]
pub(in crate::watch) struct JobEntry {
    job: Arc<ObservedRayJob>,
    /// As list shows it (its cluster's status while the cluster exists).
    pub(super) info: Arc<RayJobInfo>,
}

/// RayJob `name` of `namespace` from the feed, with its view.
pub(super) fn entry(feed: &dyn ClusterFeed, namespace: &str, name: &str) -> Option<JobEntry> {
    feed.rayjob(namespace, name).map(|job| of(feed, job))
}

/// Every RayJob from the feed, with its view.
pub(super) fn entries(feed: &dyn ClusterFeed) -> impl Iterator<Item = (Key, JobEntry)> + '_ {
    feed.rayjobs(None).into_iter().map(|job| {
        let key = (job.metadata.namespace.clone(), job.metadata.name.clone());
        (key, of(feed, job))
    })
}

fn of(feed: &dyn ClusterFeed, job: Arc<ObservedRayJob>) -> JobEntry {
    let cluster = job
        .cluster_name()
        .and_then(|name| feed.cluster(job.metadata.namespace.as_str(), name));
    let status = cluster.map(|c| manifest::derive_status(&c, None));
    let info = Arc::new(RayJobInfo::of(&job, status, None));
    JobEntry { job, info }
}

impl Held {
    /// The RayJobs of namespace `only` (found by range), or of every
    /// namespace, with their namespaces.
    pub(super) fn jobs_in<'a>(&'a self, only: Option<&'a str>) -> impl Iterator<Item = (&'a str, Snapshot)> + 'a {
        let from = only.map_or_else(Atom::default, Atom::new);
        self.rayjobs
            .range((from, Atom::default())..)
            .take_while(move |((ns, _), _)| only.is_none_or(|only| ns.as_str() == only))
            .map(|((ns, _), e)| (ns.as_str(), Snapshot::RayJob(e.clone())))
    }

    /// Takes the RayJob at `key` as it is now (`None`: gone), recording
    /// the change of its view once watched.
    pub(super) fn update_rayjob(&mut self, key: Key, now: Option<JobEntry>) -> Option<Arc<WatchEvent>> {
        let (kind, info) = match (now, self.rayjobs.get_mut(&key)) {
            (None, _) => {
                let old = self.rayjobs.remove(&key)?;
                (WatchEventType::Deleted, old.info)
            }
            (Some(now), Some(held)) => {
                let moved = held.info != now.info;
                *held = now;
                if !moved {
                    return None;
                }
                (WatchEventType::Modified, held.info.clone())
            }
            (Some(now), None) => {
                let info = now.info.clone();
                self.rayjobs.insert(key, now);
                (WatchEventType::Added, info)
            }
        };
        self.watched.then(|| self.record(kind, Watched::RayJob(info)))
    }

    /// Cluster `name` of `namespace` changed: the RayJob it belongs to
    /// (KubeRay names it on the RayJob's status) shows its new status.
    pub(super) fn cluster_moved(
        &mut self,
        feed: &dyn ClusterFeed,
        namespace: &Atom,
        name: &Atom,
    ) -> Vec<Arc<WatchEvent>> {
        let owners: Vec<Key> = self
            .jobs_in(Some(namespace.as_str()))
            .filter_map(|(_, s)| match s {
                Snapshot::RayJob(e) if e.job.cluster_name() == Some(name.as_str()) => {
                    Some((namespace.clone(), e.job.metadata.name.clone()))
                }
                _ => None,
            })
            .collect();
        owners
            .into_iter()
            .filter_map(|key| {
                let now = entry(feed, &key.0, &key.1);
                self.update_rayjob(key, now)
            })
            .collect()
    }

    /// A relist: `fresh` replaces the RayJobs held, each change recorded.
    pub(super) fn resync_rayjobs(&mut self, fresh: BTreeMap<Key, JobEntry>) -> Vec<Arc<WatchEvent>> {
        let gone: Vec<Key> = self
            .rayjobs
            .keys()
            .filter(|k| !fresh.contains_key(*k))
            .cloned()
            .collect();
        let mut events: Vec<_> = gone.into_iter().filter_map(|k| self.update_rayjob(k, None)).collect();
        events.extend(
            fresh
                .into_iter()
                .filter_map(|(k, now)| self.update_rayjob(k, Some(now))),
        );
        events
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use futures::StreamExt as _;

    use super::*;
    use crate::domain::{ObservedCluster, ObservedPod, WatchFrom, WatchedKind};

    /// A feed whose objects a test sets.
    #[derive(Default)]
    struct Set {
        clusters: Mutex<Vec<Arc<ObservedCluster>>>,
        rayjobs: Mutex<Vec<Arc<ObservedRayJob>>>,
    }

    impl ClusterFeed for Set {
        fn changes(&self) -> futures::stream::BoxStream<'static, crate::domain::FeedChange> {
            futures::stream::pending().boxed()
        }
        fn ready(&self) -> bool {
            true
        }
        fn clusters(&self, _: Option<&str>) -> Vec<Arc<ObservedCluster>> {
            self.clusters.lock().unwrap().clone()
        }
        fn cluster(&self, namespace: &str, name: &str) -> Option<Arc<ObservedCluster>> {
            let m = |c: &&Arc<ObservedCluster>| c.metadata.namespace == namespace && c.metadata.name == name;
            self.clusters.lock().unwrap().iter().find(m).cloned()
        }
        fn pods(&self, _: &str, _: &str) -> Vec<Arc<ObservedPod>> {
            Vec::new()
        }
        fn rayjobs(&self, _: Option<&str>) -> Vec<Arc<ObservedRayJob>> {
            self.rayjobs.lock().unwrap().clone()
        }
        fn rayjob(&self, namespace: &str, name: &str) -> Option<Arc<ObservedRayJob>> {
            let m = |j: &&Arc<ObservedRayJob>| j.metadata.namespace == namespace && j.metadata.name == name;
            self.rayjobs.lock().unwrap().iter().find(m).cloned()
        }
    }

    fn rayjob(ns: &str, name: &str, version: &str, status: serde_json::Value) -> Arc<ObservedRayJob> {
        let job = serde_json::json!({
            "metadata": {"namespace": ns, "name": name, "resourceVersion": version},
            "spec": {"entrypoint": "python train.py", "shutdownAfterJobFinishes": true},
            "status": status,
        });
        Arc::new(serde_json::from_value(job).unwrap())
    }

    fn cluster(ns: &str, name: &str, version: &str) -> Arc<ObservedCluster> {
        let cluster = serde_json::json!({
            "metadata": {"namespace": ns, "name": name, "resourceVersion": version},
            "status": {"state": "ready"},
        });
        Arc::new(serde_json::from_value(cluster).unwrap())
    }

    fn seen(events: &[Arc<WatchEvent>]) -> Vec<(&'static str, &'static str, String)> {
        events
            .iter()
            .map(|e| match &e.object {
                Some(Watched::RayJob(j)) => (e.kind.as_str(), "rayjob", format!("{}:{}", j.name, j.state.as_str())),
                Some(Watched::Cluster(c)) => (e.kind.as_str(), "cluster", c.info.name.clone()),
                None => (e.kind.as_str(), "", String::new()),
            })
            .collect()
    }

    #[tokio::test]
    async fn a_rayjob_changes_with_its_own_status_and_its_clusters_and_each_watch_sees_its_kind() {
        let feed = Arc::new(Set::default());
        feed.rayjobs
            .lock()
            .unwrap()
            .push(rayjob("ml", "train", "1", serde_json::json!({})));
        let hub = super::super::Hub::start(feed.clone(), 64);
        let initial = WatchFrom {
            version: None,
            initial_events: true,
        };
        let start = hub.held().backlog(initial, WatchedKind::RayJobs, Some("ml"), |_| true);
        assert_eq!(
            seen(&start.unwrap().events()),
            [("ADDED", "rayjob", "train:starting".into())]
        );
        let mut live = hub.subscribe();

        let running = serde_json::json!({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING",
            "rayClusterName": "train-x7k2p", "jobId": "train"});
        *feed.rayjobs.lock().unwrap() = vec![rayjob("ml", "train", "2", running.clone())];
        hub.apply(&crate::domain::FeedChange::RayJob {
            namespace: "ml".into(),
            name: "train".into(),
        });
        // The same view again (a relist's copy): nothing to tell.
        *feed.rayjobs.lock().unwrap() = vec![rayjob("ml", "train", "2", running)];
        hub.apply(&crate::domain::FeedChange::All);
        feed.clusters.lock().unwrap().push(cluster("ml", "train-x7k2p", "1"));
        hub.apply(&crate::domain::FeedChange::Cluster {
            namespace: "ml".into(),
            name: "train-x7k2p".into(),
        });
        feed.rayjobs.lock().unwrap().clear();
        hub.apply(&crate::domain::FeedChange::RayJob {
            namespace: "ml".into(),
            name: "train".into(),
        });
        let mut events = Vec::new();
        while let Ok(event) = live.try_recv() {
            events.push(event);
        }
        assert_eq!(
            seen(&events),
            [
                ("MODIFIED", "rayjob", "train:running".into()),
                ("ADDED", "cluster", "train-x7k2p".into()),
                ("MODIFIED", "rayjob", "train:running".into()),
                ("DELETED", "rayjob", "train:running".into()),
            ]
        );
        let with_cluster = events[2].rayjob().unwrap();
        assert!(
            with_cluster.cluster_status.is_some(),
            "its cluster's status came with it"
        );
        assert!(events[0].rayjob().unwrap().cluster_status.is_none());

        let v = events[0].version;
        let from = WatchFrom {
            version: Some(crate::domain::WatchVersion { seq: v.seq - 1, ..v }),
            initial_events: false,
        };
        let resumed = hub.held().backlog(from, WatchedKind::RayJobs, None, |_| true).unwrap();
        assert_eq!(resumed.events().len(), 4, "a resume has every change after its version");
        let clusters = hub
            .held()
            .backlog(initial, WatchedKind::Clusters, None, |_| true)
            .unwrap();
        assert_eq!(seen(&clusters.events()), [("ADDED", "cluster", "train-x7k2p".into())]);
    }
}
