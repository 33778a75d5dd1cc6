//! Every site's watch cache as one [`ClusterFeed`]: live watches and lists
//! of the fleet hear each site's changes.

use std::sync::Arc;

use futures::{StreamExt as _, stream::BoxStream};

use crate::domain::{ClusterFeed, FeedChange, ObservedCluster, ObservedPod, ObservedRayJob};

/// The sites' feeds, merged. Names are unique across the fleet, so the
/// first feed holding a name holds the only such object.
pub(super) struct FleetFeed {
    feeds: Vec<Arc<dyn ClusterFeed>>,
    health: Vec<Arc<super::Health>>,
}

impl FleetFeed {
    /// Each site's feed with its health, in the sites' order.
    pub(super) fn new(sites: Vec<(Arc<dyn ClusterFeed>, Arc<super::Health>)>) -> Self {
        let (feeds, health) = sites.into_iter().unzip();
        Self { feeds, health }
    }
}

impl ClusterFeed for FleetFeed {
    fn changes(&self) -> BoxStream<'static, FeedChange> {
        futures::stream::select_all(self.feeds.iter().map(|f| f.changes())).boxed()
    }

    /// Every site that answers has listed (one that does not is served
    /// from what it last listed, or nothing): a site down when a replica
    /// starts holds up no other site's watches, line or accounting.
    fn ready(&self) -> bool {
        let mut any = false;
        for (feed, health) in self.feeds.iter().zip(&self.health) {
            match (feed.ready(), health.down().is_some()) {
                (true, _) => any = true,
                (false, true) => {}
                (false, false) => return false,
            }
        }
        any
    }

    fn clusters(&self, namespace: Option<&str>) -> Vec<Arc<ObservedCluster>> {
        self.feeds.iter().flat_map(|f| f.clusters(namespace)).collect()
    }

    fn cluster(&self, namespace: &str, name: &str) -> Option<Arc<ObservedCluster>> {
        self.feeds.iter().find_map(|f| f.cluster(namespace, name))
    }

    fn pods(&self, namespace: &str, cluster: &str) -> Vec<Arc<ObservedPod>> {
        self.feeds
            .iter()
            .find(|f| f.cluster(namespace, cluster).is_some())
            .map(|f| f.pods(namespace, cluster))
            .unwrap_or_else(|| self.feeds.iter().flat_map(|f| f.pods(namespace, cluster)).collect())
    }

    fn rayjobs(&self, namespace: Option<&str>) -> Vec<Arc<ObservedRayJob>> {
        self.feeds.iter().flat_map(|f| f.rayjobs(namespace)).collect()
    }

    fn rayjob(&self, namespace: &str, name: &str) -> Option<Arc<ObservedRayJob>> {
        self.feeds.iter().find_map(|f| f.rayjob(namespace, name))
    }
}
