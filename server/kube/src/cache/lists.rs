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
//! refuses such a watch with 422) a watcher lists, and how depends on how
//! much there is. Those API servers answer a list at `resourceVersion=0`
//! (`resourceVersionMatch=NotOlderThan`) from their watch cache rather than
//! from etcd, as client-go's reflectors ask, but **whole**, `limit` or not
//! (the watch cache pages only from 1.33, where streaming lists are on): at
//! 200 000 KubeRay pods that is a 3 GB answer, read whole before it is
//! parsed. So a watcher first asks how many objects it would list (a
//! quorum list with `limit=1`, whose `remainingItemCount` says it), and
//!
//! - up to `whole_up_to` (2 000 unless set), lists at `resourceVersion=0`,
//!   unpaged: one request, served from the API server's memory;
//! - above that, or when the count is not given (a list with a label
//!   selector, such as Ray's pods, has none), lists in pages of 500 from
//!   etcd (quorum reads): more requests and more work for the API server,
//!   but a replica's memory bounded by a page, not by the platform.
//!
//! Why a list at `resourceVersion=0` is consistent enough: such a list may
//! be older than the newest write (by the API server watch cache's lag,
//! milliseconds), never older than what that API server has served; the
//! watch that follows resumes from the list's resourceVersion, so every
//! later change arrives, in order, and the cache converges. And the cache
//! never answers a caller's read of their own write from an older state: a
//! write waits until the cache shows its resourceVersion, else reads of
//! that cluster go to Kubernetes (`Cache::fresh`).

use std::sync::atomic::{AtomicBool, Ordering};

use kube::{
    Api,
    api::ListParams,
    runtime::watcher::{self, ListSemantic},
};

use super::watched::{View, Watched};

/// The most objects a list asks whole from the API server's watch cache
/// unless told otherwise: about 30 MB of KubeRay pods.
pub const WHOLE_LISTS_UP_TO: u32 = 2_000;

/// The replica's choice of initial list, made from the API server's
/// `/version` the first time a watcher needs it, and given up for lists
/// when the API server refuses a streaming one.
pub(crate) struct InitialLists {
    client: kube::Client,
    decided: tokio::sync::Mutex<bool>,
    streaming: AtomicBool,
    whole_up_to: u32,
}

/// How a watcher without streaming lists makes its list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listing {
    /// At `resourceVersion=0`, unpaged, from the API server's watch cache.
    Whole,
    /// In pages of 500 from etcd.
    Pages,
}

impl Listing {
    /// For a list of `count` objects (`None`: not known).
    fn of(count: Option<u64>, whole_up_to: u32) -> Self {
        match count {
            Some(n) if n <= u64::from(whole_up_to) => Self::Whole,
            _ => Self::Pages,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Whole => "watch_cache",
            Self::Pages => "etcd_pages",
        }
    }
}

impl InitialLists {
    /// Undecided until the first watcher asks; lists of up to
    /// `whole_up_to` objects are asked whole.
    pub(crate) fn new(client: kube::Client, whole_up_to: u32) -> Self {
        Self {
            client,
            decided: tokio::sync::Mutex::new(false),
            streaming: AtomicBool::new(false),
            whole_up_to,
        }
    }

    /// `base` with the initial list this replica makes for `api`, and
    /// whether it streams. An API server that cannot say its version gets
    /// lists this once, and is asked again by the next watcher.
    pub(crate) async fn config<T: View>(
        &self,
        base: &watcher::Config,
        api: &Api<Watched<T>>,
    ) -> (watcher::Config, bool) {
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
                Err(error) => tracing::debug!(%error, "no API server version yet; a list this time"),
            }
        }
        drop(decided);
        if self.streaming.load(Ordering::Relaxed) {
            return (base.clone().streaming_lists(), true);
        }
        let listing = Listing::of(count(base, api).await, self.whole_up_to);
        metrics::counter!("krayne_cache_lists_total", "kind" => T::PLURAL, "read" => listing.name()).increment(1);
        let mut config = base.clone();
        match listing {
            // kube-runtime leaves `resourceVersion=0` out of a paged list.
            Listing::Whole => {
                config.list_semantic = ListSemantic::Any;
                config.page_size = None;
            }
            Listing::Pages => {
                config.list_semantic = ListSemantic::MostRecent;
                config.page_size = Some(PAGE);
            }
        }
        (config, false)
    }

    /// Whether `error`, met by a streaming watcher, is the API server
    /// refusing streaming lists; if so every watcher lists from now on.
    pub(crate) fn refused(&self, error: &watcher::Error) -> bool {
        if !refuses_streaming(error) {
            return false;
        }
        if self.streaming.swap(false, Ordering::Relaxed) {
            tracing::warn!(%error, "the API server refuses streaming lists (WatchList off); lists instead");
            record(false);
        }
        true
    }
}

fn record(streaming: bool) {
    for (strategy, on) in [("streaming", streaming), ("lists", !streaming)] {
        metrics::gauge!("krayne_cache_initial_list", "strategy" => strategy).set(f64::from(u8::from(on)));
    }
}

/// A page of a list from etcd.
const PAGE: u32 = 500;

/// How many objects `base` would list from `api`, where the API server
/// says (a list without selectors): a quorum list of one object, whose
/// `remainingItemCount` counts the rest. `None` when it does not say, or
/// the question fails (a list in pages then is the safe answer).
async fn count<T: View>(base: &watcher::Config, api: &Api<Watched<T>>) -> Option<u64> {
    if base.label_selector.is_some() || base.field_selector.is_some() {
        return None;
    }
    let one = api.list(&ListParams::default().limit(1)).await;
    match one {
        Ok(list) => counted(
            list.items.len(),
            list.metadata.continue_.is_some(),
            list.metadata.remaining_item_count,
        ),
        Err(error) => {
            tracing::debug!(%error, kind = T::PLURAL, "a list's size could not be asked; listing in pages");
            None
        }
    }
}

/// The size of a list whose first page held `items`, with `more` to
/// come, of which the API server counted `remaining`.
fn counted(items: usize, more: bool, remaining: Option<i64>) -> Option<u64> {
    let items = u64::try_from(items).ok()?;
    if !more {
        return Some(items);
    }
    let remaining = u64::try_from(remaining?).ok()?;
    Some(items.saturating_add(remaining))
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
    fn a_list_is_asked_whole_only_when_it_is_known_to_be_small() {
        assert_eq!(counted(0, false, None), Some(0));
        assert_eq!(counted(1, false, None), Some(1));
        assert_eq!(counted(1, true, Some(1_999)), Some(2_000));
        assert_eq!(counted(1, true, None), None, "a selector's list is not counted");
        assert_eq!(counted(1, true, Some(-1)), None);
        assert_eq!(Listing::of(Some(2_000), WHOLE_LISTS_UP_TO), Listing::Whole);
        assert_eq!(Listing::of(Some(2_001), WHOLE_LISTS_UP_TO), Listing::Pages);
        assert_eq!(Listing::of(None, WHOLE_LISTS_UP_TO), Listing::Pages);
        assert_eq!(Listing::of(Some(0), 0), Listing::Whole);
    }

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
