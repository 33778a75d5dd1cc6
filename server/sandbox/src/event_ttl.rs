//! Event expiry, as kube-apiserver's `--event-ttl` does: events not seen
//! again for the TTL are deleted, so a long-running sandbox (and the
//! caches that mirror it) does not grow without bound.

use std::{sync::Arc, time::Duration};

use tokio::sync::watch;

use super::{
    Resource,
    store::{Store, meta_str},
};

/// Deletes events whose `lastTimestamp` is older than `ttl`, checking a few
/// times per TTL, until `stop` changes.
pub(super) async fn expire(store: Arc<Store>, ttl: Duration, mut stop: watch::Receiver<bool>) {
    let every = (ttl / 4).clamp(Duration::from_millis(500), Duration::from_secs(60));
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            _ = stop.changed() => return,
        }
        let Ok(cutoff) = jiff::Timestamp::now().checked_sub(jiff::SignedDuration::try_from(ttl).unwrap_or_default())
        else {
            continue;
        };
        let (old, _) = store.list(Resource::Event, None, |e| {
            e["lastTimestamp"]
                .as_str()
                .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                .is_some_and(|t| t < cutoff)
        });
        for event in old {
            let _ = store.delete(Resource::Event, meta_str(&event, "namespace"), meta_str(&event, "name"));
        }
    }
}
