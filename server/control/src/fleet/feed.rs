//! Every site's watch cache as one [`ClusterFeed`]: live watches and lists
//! of the fleet hear each site's changes.

use std::sync::Arc;

use futures::{StreamExt as _, stream::BoxStream};
use tokio::sync::broadcast;
use tokio_stream::wrappers::BroadcastStream;

use crate::domain::{ClusterFeed, FeedChange, ObservedCluster, ObservedPod, ObservedRayJob, Site};

/// The sites' feeds, merged. Names are unique across the fleet, so the
/// first feed holding a name holds the only such object.
pub(super) struct FleetFeed {
    feeds: Vec<Arc<dyn ClusterFeed>>,
    health: Vec<(Site, Arc<super::Health>)>,
    site_changes: broadcast::Sender<FeedChange>,
}

impl FleetFeed {
    /// Each site's feed with its health, in the sites' order, and where
    /// the health task tells sites going down and coming back.
    pub(super) fn new(
        sites: Vec<(Site, Arc<dyn ClusterFeed>, Arc<super::Health>)>,
        site_changes: broadcast::Sender<FeedChange>,
    ) -> Self {
        let (feeds, health) = sites
            .into_iter()
            .map(|(site, feed, health)| (feed, (site, health)))
            .unzip();
        Self {
            feeds,
            health,
            site_changes,
        }
    }
}

impl ClusterFeed for FleetFeed {
    /// Every site's changes, and sites going down and coming back (a
    /// reader too slow for those is told everything may have changed).
    fn changes(&self) -> BoxStream<'static, FeedChange> {
        let sites = BroadcastStream::new(self.site_changes.subscribe()).map(|c| c.unwrap_or(FeedChange::All));
        futures::stream::select_all(self.feeds.iter().map(|f| f.changes()).chain([sites.boxed()])).boxed()
    }

    /// Every site that answers has listed (one that does not is served
    /// from what it last listed, or nothing): a site down when a replica
    /// starts holds up no other site's watches, line or accounting.
    fn ready(&self) -> bool {
        let mut any = false;
        for (feed, (_, health)) in self.feeds.iter().zip(&self.health) {
            match (feed.ready(), health.down().is_some()) {
                (true, _) => any = true,
                (false, true) => {}
                (false, false) => return false,
            }
        }
        any
    }

    fn sites_down(&self) -> Vec<(Site, jiff::Timestamp)> {
        self.health
            .iter()
            .filter_map(|(site, health)| Some((site.clone(), health.down()?)))
            .collect()
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
