//! The cache as a [`ClusterFeed`]: live watches of clusters and RayJobs read its copy
//! and hear its change notices, so they cost Kubernetes nothing.

use std::sync::Arc;

use futures::{StreamExt as _, stream::BoxStream};
use tokio::sync::broadcast::error::RecvError;

use super::{Cache, Notice, read};
use crate::domain::{ClusterFeed, FeedChange, ObservedCluster, ObservedPod, ObservedRayJob};

/// The cache, seen as a feed.
pub(super) struct CacheFeed(pub(super) Arc<Cache>);

impl ClusterFeed for CacheFeed {
    fn changes(&self) -> BoxStream<'static, FeedChange> {
        let notices = self.0.notices.subscribe();
        futures::stream::unfold(notices, |mut notices| async move {
            loop {
                let change = match notices.recv().await {
                    Ok(n) => match &*n {
                        Notice::Cluster { namespace, name, .. } => FeedChange::Cluster {
                            namespace: namespace.clone(),
                            name: name.clone(),
                        },
                        Notice::Pod { namespace, cluster, .. } if !cluster.is_empty() => FeedChange::Cluster {
                            namespace: namespace.clone(),
                            name: cluster.clone(),
                        },
                        Notice::Pod { .. } => continue,
                        Notice::RayJob { namespace, name } => FeedChange::RayJob {
                            namespace: namespace.clone(),
                            name: name.clone(),
                        },
                        Notice::Resync => FeedChange::All,
                    },
                    Err(RecvError::Lagged(_)) => FeedChange::All,
                    Err(RecvError::Closed) => return None,
                };
                return Some((change, notices));
            }
        })
        .boxed()
    }

    fn ready(&self) -> bool {
        self.0.synced()
    }

    fn clusters(&self, namespace: Option<&str>) -> Vec<Arc<ObservedCluster>> {
        let clusters = read(&self.0.clusters);
        match namespace {
            Some(ns) => clusters.bucket(ns, ""),
            None => clusters.all(),
        }
    }

    fn cluster(&self, namespace: &str, name: &str) -> Option<Arc<ObservedCluster>> {
        read(&self.0.clusters).get(namespace, "", name)
    }

    fn pods(&self, namespace: &str, cluster: &str) -> Vec<Arc<ObservedPod>> {
        read(&self.0.pods).bucket(namespace, cluster)
    }

    fn rayjobs(&self, namespace: Option<&str>) -> Vec<Arc<ObservedRayJob>> {
        let rayjobs = read(&self.0.rayjobs);
        match namespace {
            Some(ns) => rayjobs.bucket(ns, ""),
            None => rayjobs.all(),
        }
    }

    fn rayjob(&self, namespace: &str, name: &str) -> Option<Arc<ObservedRayJob>> {
        read(&self.0.rayjobs).get(namespace, "", name)
    }
}
