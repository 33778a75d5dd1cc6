//! A live watch of clusters (`WatchClusters`) that survives a server
//! ending it with `Unavailable` (a replica shutting down, a client read too
//! slowly): it reopens after the last version it delivered, so nothing is
//! missed and nothing repeats. It ends instead while initial events are
//! still coming (before their bookmark), since a resumed watch would not
//! finish the list. `OutOfRange` (the version is no longer held) ends it:
//! list again, then watch from the list.

use backon::{BackoffBuilder as _, ExponentialBackoff};
use futures::{Stream, StreamExt as _, stream::BoxStream};
use tonic::Request;

use crate::{
    Client, ClientError,
    proto::{WatchClustersRequest, WatchClustersResponse, WatchEventType},
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

type Events = BoxStream<'static, Result<WatchClustersResponse, tonic::Status>>;

struct Live {
    client: Client,
    namespace: String,
    last: Option<String>,
    current: Option<Events>,
    backoff: ExponentialBackoff,
    /// Initial events were asked for and their closing bookmark has not
    /// come: resuming now would leave the initial list short.
    initial_pending: bool,
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
        let namespace = namespace.unwrap_or_default().to_owned();
        let first = self.open_cluster_watch(&namespace, &from).await?;
        let live = Live {
            client: self.clone(),
            namespace,
            last: from.resource_version,
            current: Some(first),
            backoff: self.retry.backoff().build(),
            initial_pending: from.send_initial_events,
            finished: false,
        };
        Ok(futures::stream::unfold(live, |mut live| async move {
            let item = live.next().await?;
            Some((item, live))
        }))
    }

    async fn open_cluster_watch(&self, namespace: &str, from: &WatchFrom) -> Result<Events, ClientError> {
        let message = WatchClustersRequest {
            namespace: namespace.to_owned(),
            resource_version: from.resource_version.clone().unwrap_or_default(),
            send_initial_events: from.send_initial_events,
            // The caller ends the stream by dropping it.
            timeout_seconds: 0,
        };
        let stream = self
            .idempotent(|| {
                let mut client = self.clusters();
                let request = Request::new(message.clone());
                async move { client.watch_clusters(request).await }
            })
            .await?
            .into_inner();
        Ok(stream.boxed())
    }
}

impl Live {
    async fn next(&mut self) -> Option<Result<WatchClustersResponse, ClientError>> {
        while !self.finished {
            let Some(current) = self.current.as_mut() else {
                let from = WatchFrom {
                    resource_version: self.last.clone(),
                    send_initial_events: false,
                };
                match self.client.open_cluster_watch(&self.namespace, &from).await {
                    Ok(events) => self.current = Some(events),
                    Err(e) => {
                        self.finished = true;
                        return Some(Err(e));
                    }
                }
                continue;
            };
            match current.next().await.map(|r| r.map_err(ClientError::from)) {
                Some(Ok(event)) => {
                    if event.r#type() == WatchEventType::Bookmark {
                        self.initial_pending = false;
                    }
                    self.last = Some(event.resource_version.clone());
                    self.backoff = self.client.retry.backoff().build();
                    return Some(Ok(event));
                }
                Some(Err(e)) if e.is_unavailable() && self.last.is_some() && !self.initial_pending => {
                    match self.backoff.next() {
                        Some(pause) => {
                            self.current = None;
                            tokio::time::sleep(pause).await;
                        }
                        None => {
                            self.finished = true;
                            return Some(Err(e));
                        }
                    }
                }
                Some(Err(e)) => {
                    self.finished = true;
                    return Some(Err(e));
                }
                None => self.finished = true,
            }
        }
        None
    }
}

/// `ADDED`, `MODIFIED`, … as `krayne get -w` prints them.
pub fn event_type_name(event: &WatchClustersResponse) -> &'static str {
    match WatchEventType::try_from(event.r#type) {
        Ok(WatchEventType::Added) => "ADDED",
        Ok(WatchEventType::Modified) => "MODIFIED",
        Ok(WatchEventType::Deleted) => "DELETED",
        Ok(WatchEventType::Bookmark) => "BOOKMARK",
        Ok(WatchEventType::Unspecified) | Err(_) => "UNKNOWN",
    }
}
