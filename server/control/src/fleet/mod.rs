//! Several Kubernetes clusters ("sites") behind one API (docs/sites.md):
//! each site's adapters — its cluster store with its watch cache, its
//! RayJobs, its service upstream — presented to the use cases as one set
//! of ports.
//!
//! A cluster's identity stays `(namespace, name)`, unique across the
//! fleet: a request names no site, and the fleet finds the cluster in its
//! sites' caches (asking each site only when no cache has it). A create
//! names its site (the use case placed it), and every read says the site
//! an object came from. A site that does not answer is served from its
//! cache's last state, marked unavailable, and refuses writes, while every
//! other site goes on.

mod feed;
mod health;
mod kueue;
mod rayjobs;
mod store;
mod upstream;

use std::{sync::Arc, time::Duration};

use health::{Change, Health};
use tokio::sync::broadcast;

use crate::domain::{
    ClusterFeed, ClusterRef, ClusterStore, Error, FeedChange, RayJobStore, RequestId, ResourceKind, ServiceUpstream,
    Site, sites::SiteSpec,
};

/// How long a site's health check may take before it counts as failed:
/// below readiness' own probe timeout (3 s), so one silent site never
/// makes a replica unready.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(2);

/// One site's adapters, as the server builds them.
pub struct FleetMember {
    /// Its name, weight and labels.
    pub spec: SiteSpec,
    /// Its clusters (with its watch cache).
    pub store: Arc<dyn ClusterStore>,
    /// Its RayJobs.
    pub rayjobs: Arc<dyn RayJobStore>,
    /// How its heads' services are reached.
    pub upstream: Arc<dyn ServiceUpstream>,
    /// Its Kubernetes without a cache, asked whether it answers (a cache
    /// still listing is no outage).
    pub api: Arc<dyn ClusterStore>,
    /// Its Kueue, where the platform runs one.
    pub kueue: Arc<dyn crate::domain::KueueReads>,
}

struct Member {
    spec: SiteSpec,
    store: Arc<dyn ClusterStore>,
    feed: Option<Arc<dyn ClusterFeed>>,
    rayjobs: Arc<dyn RayJobStore>,
    upstream: Arc<dyn ServiceUpstream>,
    api: Arc<dyn ClusterStore>,
    kueue: Arc<dyn crate::domain::KueueReads>,
    health: Arc<Health>,
}

impl Member {
    fn name(&self) -> &Site {
        &self.spec.name
    }

    /// Since when it has not answered, if it has not.
    fn down(&self) -> Option<jiff::Timestamp> {
        self.health.down()
    }

    /// Records one health check's answer; a change is told to `changes`
    /// (the fleet's feed passes it to watches).
    fn checked(&self, up: bool, changes: &broadcast::Sender<FeedChange>) {
        let change = self.health.checked(up);
        match change {
            Change::Up => tracing::info!(site = %self.name(), "site answers again"),
            Change::Down => {
                tracing::warn!(site = %self.name(), "site does not answer; serving its clusters' last state");
            }
            Change::None => {}
        }
        if change != Change::None {
            // No watch listening is no loss: a watch's start reads health.
            let _ = changes.send(FeedChange::Sites);
        }
        let gauge = if self.down().is_some() { 0.0 } else { 1.0 };
        metrics::gauge!("krayne_site_up", "site" => self.name().to_string()).set(gauge);
    }

    /// The refusal of a write (or a read only Kubernetes can answer) while
    /// it is down.
    fn unavailable(&self, since: jiff::Timestamp) -> Error {
        Error::Unavailable(format!(
            "site unavailable: site {} has not answered since {since}; its clusters show their last known state \
             and cannot be changed until it answers",
            self.name()
        ))
    }

    /// `Ok` while it answers, else its refusal.
    fn answering(&self) -> Result<(), Error> {
        match self.down() {
            Some(since) => Err(self.unavailable(since)),
            None => Ok(()),
        }
    }
}

/// The sites krayne fronts, as one store, RayJob store and upstream.
pub struct Fleet {
    members: Vec<Member>,
    /// Sites going down and coming back, for the fleet's feed.
    site_changes: broadcast::Sender<FeedChange>,
}

/// Site changes held for a slow feed reader: a handful of sites, each
/// changing at most every health period.
const SITE_CHANGES: usize = 64;

impl Fleet {
    /// The fleet of `members` (in the sites file's order).
    ///
    /// # Errors
    /// When there is no member, or two share a name.
    pub fn new(members: Vec<FleetMember>) -> Result<Arc<Self>, String> {
        if members.is_empty() {
            return Err("a fleet needs at least one site".into());
        }
        let mut seen = std::collections::HashSet::new();
        let members = members
            .into_iter()
            .map(|m| {
                if !seen.insert(m.spec.name.clone()) {
                    return Err(format!("two sites are named {}", m.spec.name));
                }
                Ok(Member {
                    feed: m.store.feed(),
                    spec: m.spec,
                    store: m.store,
                    rayjobs: m.rayjobs,
                    upstream: m.upstream,
                    api: m.api,
                    kueue: m.kueue,
                    health: Arc::default(),
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Arc::new(Self {
            members,
            site_changes: broadcast::channel(SITE_CHANGES).0,
        }))
    }

    /// Checks every site's health now, then every `every`, until the task
    /// is dropped.
    pub async fn watch_health(self: Arc<Self>, every: Duration) {
        loop {
            self.check_health().await;
            tokio::time::sleep(every).await;
        }
    }

    /// Asks every site at once whether it answers (only the health task
    /// does, so answers are recorded in order).
    async fn check_health(&self) {
        let checks = self.members.iter().map(|m| async move {
            let up = matches!(tokio::time::timeout(HEALTH_TIMEOUT, m.api.ping()).await, Ok(Ok(())));
            m.checked(up, &self.site_changes);
        });
        futures::future::join_all(checks).await;
    }

    /// Whether every site has been checked at least once.
    fn checked_all(&self) -> bool {
        self.members.iter().all(|m| m.health.known())
    }

    fn member(&self, site: &Site) -> Result<&Member, Error> {
        self.members.iter().find(|m| m.name() == site).ok_or_else(|| {
            let known: Vec<String> = self.members.iter().map(|m| m.name().to_string()).collect();
            Error::invalid("site", format!("no site {site:?}; the sites are: {}", known.join(", ")))
        })
    }

    /// The site that holds `cluster`: the one it names, else the one whose
    /// cache has it, else the first that answers with it.
    async fn locate(&self, cluster: &ClusterRef, request_id: &RequestId) -> Result<&Member, Error> {
        self.locate_kind(Held::Cluster, cluster, request_id).await
    }

    /// The site that holds RayJob `rayjob`, as [`Self::locate`] finds a
    /// cluster.
    async fn locate_rayjob(&self, rayjob: &ClusterRef, request_id: &RequestId) -> Result<&Member, Error> {
        self.locate_kind(Held::RayJob, rayjob, request_id).await
    }

    async fn locate_kind(&self, kind: Held, named: &ClusterRef, request_id: &RequestId) -> Result<&Member, Error> {
        if let Some(site) = named.site() {
            return self.member(site);
        }
        if let [only] = self.members.as_slice() {
            return Ok(only);
        }
        let (namespace, name) = (named.namespace(), named.name());
        let cached = |feed: &Arc<dyn ClusterFeed>| match kind {
            Held::Cluster => feed.cluster(namespace, name).is_some(),
            Held::RayJob => feed.rayjob(namespace, name).is_some(),
        };
        if let Some(m) = self.members.iter().find(|m| m.feed.as_ref().is_some_and(cached)) {
            return Ok(m);
        }
        let mut unanswered = None;
        for m in &self.members {
            if let Some(since) = m.down() {
                unanswered = Some(m.unavailable(since));
                continue;
            }
            let found = match kind {
                Held::Cluster => m.store.get(named, request_id).await.map(drop),
                Held::RayJob => m.rayjobs.get_rayjob(named, request_id).await.map(drop),
            };
            match found {
                Ok(()) => return Ok(m),
                Err(Error::NotFound { .. }) => {}
                Err(e) => unanswered = Some(e),
            }
        }
        let kind = match kind {
            Held::Cluster => ResourceKind::Cluster,
            Held::RayJob => ResourceKind::RayJob,
        };
        Err(unanswered.unwrap_or_else(|| not_found(kind, named)))
    }

    /// The site new RayJobs go to when none is named: the heaviest that
    /// answers.
    fn default_member(&self) -> &Member {
        let mut by_weight: Vec<&Member> = self.members.iter().collect();
        by_weight.sort_by_key(|m| std::cmp::Reverse(m.spec.weight));
        by_weight
            .iter()
            .find(|m| m.down().is_none())
            .or_else(|| by_weight.first())
            .copied()
            .unwrap_or(&self.members[0])
    }
}

/// What a site is asked to hold.
#[derive(Clone, Copy)]
enum Held {
    Cluster,
    RayJob,
}

/// Every answering site's answer, or the last error when none answered.
pub(super) fn any_answer<T>(answers: Vec<Result<Vec<T>, Error>>) -> Result<Vec<T>, Error> {
    let mut all = Vec::new();
    let mut failed = None;
    let mut answered = false;
    for answer in answers {
        match answer {
            Ok(items) => {
                answered = true;
                all.extend(items);
            }
            Err(e) => failed = Some(e),
        }
    }
    match failed {
        Some(e) if !answered => Err(e),
        _ => Ok(all),
    }
}

fn not_found(kind: ResourceKind, what: &ClusterRef) -> Error {
    Error::NotFound {
        kind,
        name: what.name().to_owned(),
        namespace: Some(what.namespace().to_owned()),
    }
}
