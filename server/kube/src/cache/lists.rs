//! How the watchers make their initial lists, decided once per replica.
//!
//! Where the API server offers it, a watcher's list is a **streaming
//! list** (`sendInitialEvents=true`, the WatchList protocol of Kubernetes
//! 1.27+): one watch that first sends every object, from the API server's
//! watch cache, then a bookmark annotated `k8s.io/initial-events-end`, and
//! then goes on as a watch. No paged list, no quorum read from etcd, no
//! second request to start watching.
//!
//! Elsewhere (before 1.27, or with the `WatchList` feature gate off, which
//! refuses such a watch with 422) a list has `resourceVersion=0`
//! (`resourceVersionMatch=NotOlderThan`): served from the API server's
//! watch cache rather than read from etcd, as client-go's reflectors ask.
//! Those API servers answer it whole, `limit` or not (the watch cache
//! pages only from 1.33, where streaming lists are on), so it is asked
//! unpaged: one request per watcher instead of one per 500. Why that is
//! consistent enough: such a list may be older than the newest write (by the
//! API server watch cache's lag, milliseconds), never older than what that
//! API server has served; the watch that follows resumes from the list's
//! resourceVersion, so every later change arrives, in order, and the cache
//! converges. And the cache never answers a caller's read of their own
//! write from an older state: a write waits until the cache shows its
//! resourceVersion, else reads of that cluster go to Kubernetes
//! (`Cache::fresh`).

use std::sync::atomic::{AtomicBool, Ordering};

use kube::runtime::watcher;

/// The replica's choice of initial list, made from the API server's
/// `/version` the first time a watcher needs it, and given up for paged
/// lists when the API server refuses a streaming one.
pub(crate) struct InitialLists {
    client: kube::Client,
    decided: tokio::sync::Mutex<bool>,
    streaming: AtomicBool,
}

impl InitialLists {
    /// Undecided until the first watcher asks.
    pub(crate) fn new(client: kube::Client) -> Self {
        Self {
            client,
            decided: tokio::sync::Mutex::new(false),
            streaming: AtomicBool::new(false),
        }
    }

    /// `base` with the initial list this replica makes, and whether it
    /// streams. An API server that cannot say its version gets paged lists
    /// this once, and is asked again by the next watcher.
    pub(crate) async fn config(&self, base: &watcher::Config) -> (watcher::Config, bool) {
        let mut decided = self.decided.lock().await;
        if !*decided {
            match self.client.apiserver_version().await {
                Ok(info) => {
                    let offered = offers_streaming_lists(&info.major, &info.minor);
                    self.streaming.store(offered, Ordering::Relaxed);
                    *decided = true;
                    tracing::info!(version = %info.git_version, streaming = offered, "the watch cache's initial lists");
                    record(offered);
                }
                Err(error) => tracing::debug!(%error, "no API server version yet; a paged list this time"),
            }
        }
        drop(decided);
        let streaming = self.streaming.load(Ordering::Relaxed);
        let config = if streaming {
            base.clone().streaming_lists()
        } else {
            // kube-runtime leaves `resourceVersion=0` out of a paged list;
            // the API servers that land here answer such a list whole
            // from their watch cache whatever its `limit` (paging it is
            // newer than WatchList), so it asks unpaged.
            let mut config = base.clone().any_semantic();
            config.page_size = None;
            config
        };
        (config, streaming)
    }

    /// Whether `error`, met by a streaming watcher, is the API server
    /// refusing streaming lists; if so every watcher lists from now on.
    pub(crate) fn refused(&self, error: &watcher::Error) -> bool {
        if !refuses_streaming(error) {
            return false;
        }
        if self.streaming.swap(false, Ordering::Relaxed) {
            tracing::warn!(%error, "the API server refuses streaming lists (WatchList off); paged lists from its watch cache instead");
            record(false);
        }
        true
    }
}

fn record(streaming: bool) {
    for (strategy, on) in [("streaming", streaming), ("paged", !streaming)] {
        metrics::gauge!("krayne_cache_initial_list", "strategy" => strategy).set(f64::from(u8::from(on)));
    }
}

/// Whether an API server of this version may offer streaming lists
/// (1.27+: alpha behind a feature gate until 1.32, which a refusal tells).
/// Before 1.27 the parameter is ignored, and a watcher would wait forever
/// for the bookmark that ends the initial events.
fn offers_streaming_lists(major: &str, minor: &str) -> bool {
    let number = |s: &str| s.trim_end_matches(|c: char| !c.is_ascii_digit()).parse::<u32>().ok();
    match (number(major), number(minor)) {
        (Some(1), Some(minor)) => minor >= 27,
        (Some(major), _) => major > 1,
        _ => false,
    }
}

/// A 400 or 422 answer to a watch: the options refused.
fn refuses_streaming(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status))
        | watcher::Error::WatchError(status) => matches!(status.code, 400 | 422),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streaming_lists_are_tried_from_kubernetes_1_27() {
        assert!(!offers_streaming_lists("1", "26"));
        assert!(!offers_streaming_lists("1", "26+"));
        assert!(offers_streaming_lists("1", "27"));
        assert!(offers_streaming_lists("1", "31+"));
        assert!(offers_streaming_lists("1", "33"));
        assert!(offers_streaming_lists("2", "0"));
        assert!(!offers_streaming_lists("", ""));
    }

    #[test]
    fn only_a_refusal_of_the_options_gives_streaming_up() {
        let status = |code| {
            Box::new(kube::core::Status {
                code,
                ..kube::core::Status::default()
            })
        };
        assert!(refuses_streaming(&watcher::Error::WatchStartFailed(kube::Error::Api(
            status(422)
        ))));
        assert!(refuses_streaming(&watcher::Error::WatchError(status(400))));
        assert!(!refuses_streaming(&watcher::Error::WatchError(status(410))));
        assert!(!refuses_streaming(&watcher::Error::WatchStartFailed(kube::Error::Api(
            status(403)
        ))));
        assert!(!refuses_streaming(&watcher::Error::NoResourceVersion));
    }
}
