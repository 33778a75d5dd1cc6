//! One kube-runtime watcher per kind and scope, feeding the cache.

use std::{mem, sync::Arc, time::Duration};

use futures::StreamExt as _;
use kube::{
    Api,
    runtime::watcher::{self, Event, watcher},
};

use super::{Cache, Slot, lists::InitialLists, watched::Watched};

const FIRST_RETRY: Duration = Duration::from_millis(100);
const LAST_RETRY: Duration = Duration::from_secs(30);

/// Keeps `cache` in step with `api` until the task is dropped, listing
/// as `lists` decides (a streaming list where the API server offers one).
/// A watcher error (Kubernetes unreachable, `410 Gone`, a broken stream)
/// marks the scope as not serving and starts over with a fresh list,
/// retrying with exponential backoff; a completed list serves again. A
/// streaming list the API server refuses is retried at once as a list.
pub(super) async fn feed<T: Slot>(
    cache: Arc<Cache>,
    api: Api<Watched<T>>,
    base: watcher::Config,
    scope: Option<String>,
    lists: Arc<InitialLists>,
) {
    let mut retry = FIRST_RETRY;
    loop {
        let (config, streaming) = lists.config(&base, &api).await;
        let mut events = std::pin::pin!(watcher(api.clone(), config));
        let mut listing: Vec<Arc<T>> = Vec::new();
        let mut refused = false;
        while let Some(event) = events.next().await {
            match event {
                Ok(Event::Init) => listing.clear(),
                Ok(Event::InitApply(object)) => listing.push(object.view),
                Ok(Event::InitDone) => {
                    cache.relisted::<T>(scope.as_deref(), mem::take(&mut listing));
                    retry = FIRST_RETRY;
                }
                Ok(Event::Apply(object)) => cache.applied::<T>(object.view),
                Ok(Event::Delete(object)) => cache.deleted::<T>(&object.view),
                Err(error) => {
                    refused = streaming && lists.refused(&error);
                    if !refused {
                        cache.failed::<T>(scope.as_deref(), &error);
                    }
                    break;
                }
            }
        }
        if !refused {
            tokio::time::sleep(retry).await;
            retry = (retry * 2).min(LAST_RETRY);
        }
    }
}
