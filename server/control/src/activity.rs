//! Uses of clusters through this replica — tunnels, proxied connections
//! (bearer or browser session), followed logs, Jobs API calls of users —
//! and their record in the shared [`ActivityLedger`](crate::domain::ActivityLedger), so that the lifecycle
//! reaper, on whichever replica leads, never takes a cluster in use here
//! for idle.
//!
//! Each use holds a [`UseHold`] while it is open. The recorder writes, every
//! `usage_every` (and soon after a cluster's first use here), "used now"
//! for every cluster with an open hold, and the time its last hold closed
//! for the others, then forgets those. So the ledger's time of a cluster
//! in use is never older than `usage_every` (plus a write), and the reaper
//! counts a cluster used within two of those as in use now.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use jiff::Timestamp;
use tokio::sync::Notify;

use super::ControlPlane;
use crate::domain::ClusterUse;

/// The shortest time between two writes to the ledger.
pub(crate) const MIN_GAP: Duration = Duration::from_millis(500);

#[derive(Debug, Default)]
struct Entry {
    open: usize,
    /// When its last hold closed.
    closed_at: Option<Timestamp>,
}

/// This replica's uses of clusters, not yet all recorded.
#[derive(Debug, Default)]
pub(crate) struct UseBook {
    entries: Mutex<HashMap<(String, String), Entry>>,
    /// A cluster's first open use: record soon.
    first_use: Arc<Notify>,
}

impl UseBook {
    /// Fires on a cluster's first open use.
    pub(crate) fn first_use(&self) -> Arc<Notify> {
        self.first_use.clone()
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Entry>> {
        self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A use of cluster `name` in `namespace`, open until the hold drops.
    pub(crate) fn hold(self: &Arc<Self>, namespace: &str, name: &str) -> UseHold {
        let key = (namespace.to_owned(), name.to_owned());
        let first = {
            let mut entries = self.entries();
            let entry = entries.entry(key.clone()).or_default();
            entry.open += 1;
            entry.open == 1
        };
        if first {
            self.first_use.notify_one();
        }
        UseHold {
            book: self.clone(),
            key,
        }
    }

    /// What to record now: clusters in use now, and when the others were
    /// last used (those are forgotten here).
    fn take(&self, now: Timestamp) -> Vec<ClusterUse> {
        let mut entries = self.entries();
        let uses = entries
            .iter()
            .filter_map(|((namespace, name), e)| {
                let at = if e.open > 0 { Some(now) } else { e.closed_at }?;
                Some(ClusterUse {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    at,
                })
            })
            .collect();
        entries.retain(|_, e| e.open > 0);
        uses
    }

    /// Uses that could not be recorded, kept for the next round.
    fn put_back(&self, uses: Vec<ClusterUse>) {
        let mut entries = self.entries();
        for u in uses {
            let entry = entries.entry((u.namespace, u.name)).or_default();
            entry.closed_at = entry.closed_at.max(Some(u.at));
        }
    }
}

/// One open use of a cluster.
#[derive(Debug)]
pub(crate) struct UseHold {
    book: Arc<UseBook>,
    key: (String, String),
}

impl Drop for UseHold {
    fn drop(&mut self) {
        let mut entries = self.book.entries();
        if let Some(entry) = entries.get_mut(&self.key) {
            entry.open = entry.open.saturating_sub(1);
            entry.closed_at = Some(Timestamp::now());
        }
    }
}

impl ControlPlane {
    /// Writes this replica's uses of clusters to the shared ledger (a
    /// background task's round); what cannot be written is kept for the
    /// next.
    pub(crate) async fn record_uses(&self) {
        let Some((ledger, _)) = &self.activity_ledger else {
            return;
        };
        let uses = self.uses.take(Timestamp::now());
        if let Err(e) = ledger.record(&uses).await {
            tracing::warn!(error = %e, clusters = uses.len(), "uses of clusters not recorded; retrying");
            metrics::counter!("krayne_usage_record_failures_total").increment(1);
            self.uses.put_back(uses);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_uses_are_recorded_as_now_and_closed_ones_once() {
        let book = Arc::new(UseBook::default());
        let open = book.hold("ml", "a");
        let closed = book.hold("ml", "b");
        drop(closed);
        let now = Timestamp::now();
        let first = book.take(now);
        assert_eq!(first.len(), 2);
        let of = |uses: &[ClusterUse], name: &str| uses.iter().find(|u| u.name == name).map(|u| u.at);
        assert_eq!(of(&first, "a"), Some(now));
        assert!(of(&first, "b").is_some_and(|at| at <= now));
        let second = book.take(now);
        assert_eq!(second.len(), 1, "b was recorded and forgotten: {second:?}");
        drop(open);
        let third = book.take(now);
        assert!(of(&third, "a").is_some_and(|at| at >= now));
        assert!(book.take(now).is_empty());
        book.put_back(third);
        assert_eq!(book.take(now).len(), 1, "a failed write is kept");
    }
}
