//! A live watch of clusters (`WatchClusters`) or of RayJobs
//! (`WatchRayJobs`) that survives a server
//! ending it with `Unavailable` (a replica shutting down, a client read too
//! slowly, the connection lost): it reopens after the last version it
//! delivered, so nothing is missed and nothing repeats. Versions are a
//! replica's own: when the reopened watch lands on another replica (after
//! a rollout, behind a load balancer) or the version is no longer held
//! (`OutOfRange`), it lists again, as an informer does — the list comes as
//! initial events, and only the difference from what was delivered is
//! passed on (`ADDED` for clusters not seen, `MODIFIED` for those that
//! changed, `DELETED` for those gone), so the caller's view stays whole
//! without repeats (a watch that did not start with initial events has no
//! list to compare with: after a relist, the clusters it never mentioned
//! come as `ADDED`). It ends instead while its own initial events are
//! still coming (before their bookmark), since a resumed watch would not
//! finish the list.

use std::collections::{BTreeMap, VecDeque};

use backon::{BackoffBuilder as _, ExponentialBackoff};
use futures::{FutureExt as _, Stream, StreamExt as _, future::BoxFuture, stream::BoxStream};
use tonic::Request;

use crate::{
    Client, ClientError,
    proto::{
        ClusterInfo, RayJob, WatchClustersRequest, WatchClustersResponse, WatchEventType, WatchRayJobsRequest,
        WatchRayJobsResponse,
    },
};

/// Where a watch starts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchFrom {
    /// After this version (an earlier event's or bookmark's); `None`: now.
    pub resource_version: Option<String>,
    /// Begin with an `ADDED` event for every cluster there is now (not
    /// with `resource_version`).
    pub send_initial_events: bool,
}

type Events<E> = BoxStream<'static, Result<E, tonic::Status>>;

/// The events of a watch the client keeps alive: clusters' or RayJobs'.
trait LiveEvent: Sized + Send + 'static {
    /// What an event is about.
    type Object: Clone + PartialEq + Send + 'static;
    fn kind(&self) -> WatchEventType;
    fn version(&self) -> &str;
    fn object(&self) -> Option<&Self::Object>;
    fn new(kind: WatchEventType, version: &str, object: Self::Object) -> Self;
    /// The object's namespace and name.
    fn key(object: &Self::Object) -> (String, String);
    /// Opens a watch of `namespace` from `from`.
    fn open(
        client: Client,
        namespace: String,
        from: WatchFrom,
    ) -> BoxFuture<'static, Result<Events<Self>, ClientError>>;
}

impl LiveEvent for WatchClustersResponse {
    type Object = ClusterInfo;
    fn kind(&self) -> WatchEventType {
        self.r#type()
    }
    fn version(&self) -> &str {
        &self.resource_version
    }
    fn object(&self) -> Option<&ClusterInfo> {
        self.cluster.as_ref()
    }
    fn new(kind: WatchEventType, version: &str, cluster: ClusterInfo) -> Self {
        Self {
            r#type: kind.into(),
            resource_version: version.to_owned(),
            cluster: Some(cluster),
        }
    }
    fn key(cluster: &ClusterInfo) -> (String, String) {
        (cluster.namespace.clone(), cluster.name.clone())
    }
    fn open(
        client: Client,
        namespace: String,
        from: WatchFrom,
    ) -> BoxFuture<'static, Result<Events<Self>, ClientError>> {
        async move {
            let message = WatchClustersRequest {
                namespace,
                resource_version: from.resource_version.unwrap_or_default(),
                send_initial_events: from.send_initial_events,
                // The caller ends the stream by dropping it.
                timeout_seconds: 0,
            };
            opened(
                &client,
                message,
                |c, r| async move { c.clusters().watch_clusters(r).await },
            )
            .await
        }
        .boxed()
    }
}

impl LiveEvent for WatchRayJobsResponse {
    type Object = RayJob;
    fn kind(&self) -> WatchEventType {
        self.r#type()
    }
    fn version(&self) -> &str {
        &self.resource_version
    }
    fn object(&self) -> Option<&RayJob> {
        self.rayjob.as_ref()
    }
    fn new(kind: WatchEventType, version: &str, rayjob: RayJob) -> Self {
        Self {
            r#type: kind.into(),
            resource_version: version.to_owned(),
            rayjob: Some(rayjob),
        }
    }
    fn key(rayjob: &RayJob) -> (String, String) {
        (rayjob.namespace.clone(), rayjob.name.clone())
    }
    fn open(
        client: Client,
        namespace: String,
        from: WatchFrom,
    ) -> BoxFuture<'static, Result<Events<Self>, ClientError>> {
        async move {
            let message = WatchRayJobsRequest {
                namespace,
                resource_version: from.resource_version.unwrap_or_default(),
                send_initial_events: from.send_initial_events,
                timeout_seconds: 0,
            };
            opened(&client, message, |c, r| async move {
                c.rayjobs_service().watch_ray_jobs(r).await
            })
            .await
        }
        .boxed()
    }
}

/// The stream a watch method (`call`) answers `message` with, the call
/// retried as an idempotent one.
async fn opened<M, E, F, Fut>(client: &Client, message: M, call: F) -> Result<Events<E>, ClientError>
where
    M: Clone,
    E: Send + 'static,
    F: Fn(Client, Request<M>) -> Fut,
    Fut: Future<Output = Result<tonic::Response<tonic::Streaming<E>>, tonic::Status>>,
{
    let stream = client
        .idempotent(|| call(client.clone(), Request::new(message.clone())))
        .await?
        .into_inner();
    Ok(stream.boxed())
}

struct Live<E: LiveEvent> {
    client: Client,
    namespace: String,
    last: Option<String>,
    current: Option<Events<E>>,
    backoff: ExponentialBackoff,
    /// Initial events were asked for and their closing bookmark has not
    /// come: resuming now would leave the initial list short.
    initial_pending: bool,
    /// Every object as last delivered, by namespace and name.
    known: BTreeMap<(String, String), E::Object>,
    /// Listing again: the list so far (until its bookmark).
    relisting: Option<Vec<E::Object>>,
    /// Events of a finished relist, still to deliver.
    ready: VecDeque<E>,
    finished: bool,
}

impl Client {
    /// Every change to the clusters of `namespace` (of every namespace the
    /// caller may see when `None`) from `from` on: `ADDED`, `MODIFIED`,
    /// `DELETED` with the cluster's summary, and `BOOKMARK`s. Resumed
    /// after the last event when a server ends it with `Unavailable`, as
    /// the retry policy allows; other errors end it.
    pub async fn watch_clusters(
        &self,
        namespace: Option<&str>,
        from: WatchFrom,
    ) -> Result<impl Stream<Item = Result<WatchClustersResponse, ClientError>> + use<>, ClientError> {
        self.live(namespace, from).await
    }

    /// Every change to the RayJobs of `namespace` (of every namespace the
    /// caller may see when `None`) from `from` on, as
    /// [`Client::watch_clusters`] gives clusters': `ADDED`, `MODIFIED` (its
    /// own status or its cluster's moved), `DELETED`, and `BOOKMARK`s,
    /// resumed the same way.
    pub async fn watch_rayjobs(
        &self,
        namespace: Option<&str>,
        from: WatchFrom,
    ) -> Result<impl Stream<Item = Result<WatchRayJobsResponse, ClientError>> + use<>, ClientError> {
        self.live(namespace, from).await
    }

    async fn live<E: LiveEvent>(
        &self,
        namespace: Option<&str>,
        from: WatchFrom,
    ) -> Result<impl Stream<Item = Result<E, ClientError>> + use<E>, ClientError> {
        let namespace = namespace.unwrap_or_default().to_owned();
        let first = E::open(self.clone(), namespace.clone(), from.clone()).await?;
        let live = Live {
            client: self.clone(),
            namespace,
            last: from.resource_version,
            current: Some(first),
            backoff: self.retry.backoff().build(),
            initial_pending: from.send_initial_events,
            known: BTreeMap::new(),
            relisting: None,
            ready: VecDeque::new(),
            finished: false,
        };
        Ok(futures::stream::unfold(live, |mut live| async move {
            let item = live.next().await?;
            Some((item, live))
        }))
    }
}

impl<E: LiveEvent> Live<E> {
    async fn next(&mut self) -> Option<Result<E, ClientError>> {
        while !self.finished {
            if let Some(event) = self.ready.pop_front() {
                return Some(Ok(event));
            }
            let Some(current) = self.current.as_mut() else {
                let from = WatchFrom {
                    resource_version: if self.relisting.is_some() {
                        None
                    } else {
                        self.last.clone()
                    },
                    send_initial_events: self.relisting.is_some(),
                };
                match E::open(self.client.clone(), self.namespace.clone(), from).await {
                    Ok(events) => self.current = Some(events),
                    Err(e) if e.code() == tonic::Code::OutOfRange && self.relisting.is_none() => {
                        self.relisting = Some(Vec::new());
                    }
                    Err(e) => {
                        self.finished = true;
                        return Some(Err(e));
                    }
                }
                continue;
            };
            match current.next().await.map(|r| r.map_err(ClientError::from)) {
                Some(Ok(event)) => {
                    if let Some(event) = self.took(event) {
                        // Only what is delivered is progress: a server
                        // cutting every relist short is not retried forever.
                        self.backoff = self.client.retry.backoff().build();
                        return Some(Ok(event));
                    }
                }
                Some(Err(e)) if e.code() == tonic::Code::OutOfRange && self.resumable() => match self.backoff.next() {
                    Some(pause) => {
                        self.current = None;
                        self.relisting = Some(Vec::new());
                        tokio::time::sleep(pause).await;
                    }
                    None => {
                        self.finished = true;
                        return Some(Err(e));
                    }
                },
                Some(Err(e)) if e.is_unavailable() && self.resumable() => match self.backoff.next() {
                    Some(pause) => {
                        self.current = None;
                        // A relist cut short starts over.
                        self.relisting = self.relisting.take().map(|_| Vec::new());
                        tokio::time::sleep(pause).await;
                    }
                    None => {
                        self.finished = true;
                        return Some(Err(e));
                    }
                },
                Some(Err(e)) => {
                    self.finished = true;
                    return Some(Err(e));
                }
                None => self.finished = true,
            }
        }
        None
    }

    /// Whether the watch can go on after its stream broke: it has
    /// somewhere to resume from, and is not in its own initial list.
    fn resumable(&self) -> bool {
        (self.last.is_some() || self.relisting.is_some()) && !self.initial_pending
    }

    /// Takes in `event`; returns what to deliver now.
    fn took(&mut self, event: E) -> Option<E> {
        let kind = event.kind();
        if let Some(listed) = self.relisting.as_mut() {
            if kind != WatchEventType::Bookmark {
                listed.extend(event.object().cloned());
                return None;
            }
            self.relisted(event.version());
        }
        if kind == WatchEventType::Bookmark {
            self.initial_pending = false;
        }
        self.last = Some(event.version().to_owned());
        if let Some(object) = event.object() {
            match kind {
                WatchEventType::Deleted => {
                    self.known.remove(&E::key(object));
                }
                WatchEventType::Added | WatchEventType::Modified => {
                    self.known.insert(E::key(object), object.clone());
                }
                WatchEventType::Bookmark | WatchEventType::Unspecified => {}
            }
        }
        match self.ready.pop_front() {
            Some(first) => {
                self.ready.push_back(event);
                Some(first)
            }
            None => Some(event),
        }
    }

    /// The relist is complete at `version`: queues the difference between
    /// it and what was delivered, and makes it what was delivered.
    fn relisted(&mut self, version: &str) {
        let listed = self.relisting.take().unwrap_or_default();
        self.ready.extend(difference(&mut self.known, listed, version));
    }
}

/// The events that take a watcher from `known` to `listed` (a list made
/// at `version`); `known` becomes `listed`.
fn difference<E: LiveEvent>(
    known: &mut BTreeMap<(String, String), E::Object>,
    listed: Vec<E::Object>,
    version: &str,
) -> Vec<E> {
    let mut events = Vec::new();
    let mut gone = std::mem::take(known);
    for object in listed {
        let kind = match gone.remove(&E::key(&object)) {
            Some(before) if before == object => None,
            Some(_) => Some(WatchEventType::Modified),
            None => Some(WatchEventType::Added),
        };
        if let Some(kind) = kind {
            events.push(E::new(kind, version, object.clone()));
        }
        known.insert(E::key(&object), object);
    }
    events.extend(
        gone.into_values()
            .map(|object| E::new(WatchEventType::Deleted, version, object)),
    );
    events
}

/// `ADDED`, `MODIFIED`, … as `krayne get -w` prints them.
pub fn event_type_name(event: &WatchClustersResponse) -> &'static str {
    watch_event_type_name(event.r#type)
}

/// A watch event's type (`WatchEventType` as the wire has it) as
/// `ADDED`, `MODIFIED`, … (`UNKNOWN` for one this client does not know).
pub fn watch_event_type_name(kind: i32) -> &'static str {
    match WatchEventType::try_from(kind) {
        Ok(WatchEventType::Added) => "ADDED",
        Ok(WatchEventType::Modified) => "MODIFIED",
        Ok(WatchEventType::Deleted) => "DELETED",
        Ok(WatchEventType::Bookmark) => "BOOKMARK",
        Ok(WatchEventType::Unspecified) | Err(_) => "UNKNOWN",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(name: &str, status: &str) -> ClusterInfo {
        ClusterInfo {
            namespace: "ml-team".into(),
            name: name.into(),
            status: status.into(),
            ..ClusterInfo::default()
        }
    }

    #[test]
    fn a_relist_passes_on_only_what_changed() {
        let mut known: BTreeMap<_, _> = [
            cluster("same", "ready"),
            cluster("changed", "pending"),
            cluster("gone", "ready"),
        ]
        .into_iter()
        .map(|c| (WatchClustersResponse::key(&c), c))
        .collect();
        let listed = vec![
            cluster("same", "ready"),
            cluster("changed", "ready"),
            cluster("new", "pending"),
        ];
        let events: Vec<WatchClustersResponse> = difference::<WatchClustersResponse>(&mut known, listed.clone(), "v9");
        let seen: Vec<(&str, &str, &str)> = events
            .iter()
            .map(|e| {
                let name = e.cluster.as_ref().map_or("", |c| c.name.as_str());
                (event_type_name(e), name, e.resource_version.as_str())
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("MODIFIED", "changed", "v9"),
                ("ADDED", "new", "v9"),
                ("DELETED", "gone", "v9")
            ]
        );
        assert_eq!(known.into_values().collect::<Vec<_>>(), {
            let mut sorted = listed;
            sorted.sort_by(|a, b| a.name.cmp(&b.name));
            sorted
        });
    }
}
