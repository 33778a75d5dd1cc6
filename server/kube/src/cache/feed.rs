//! One kube-runtime watcher per kind and scope, feeding the cache.

use std::{mem, sync::Arc, time::Duration};

use futures::StreamExt as _;
use kube::{
    Api,
    runtime::watcher::{self, Event, watcher},
};

use super::{Cache, Slot, watched::Watched};

const FIRST_RETRY: Duration = Duration::from_millis(100);
const LAST_RETRY: Duration = Duration::from_secs(30);

/// Keeps `cache` in step with `api` until the task is dropped. A watcher
/// error (Kubernetes unreachable, `410 Gone`, a broken stream) marks the
/// scope as not serving and starts over with a fresh list, retrying with
/// exponential backoff; a completed list serves again.
pub(super) async fn feed<T: Slot>(
    cache: Arc<Cache>,
    api: Api<Watched<T>>,
    config: watcher::Config,
    scope: Option<String>,
) {
    let mut retry = FIRST_RETRY;
    loop {
        let mut events = std::pin::pin!(watcher(api.clone(), config.clone()));
        let mut listing: Vec<Arc<T>> = Vec::new();
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
                    cache.failed::<T>(scope.as_deref(), &error);
                    break;
                }
            }
        }
        tokio::time::sleep(retry).await;
        retry = (retry * 2).min(LAST_RETRY);
    }
}
