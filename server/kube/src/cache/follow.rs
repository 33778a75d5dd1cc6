//! Waiters follow one cluster through the cache's change notices: no
//! sleeping and no Kubernetes watch per waiter.

use std::{collections::BTreeSet, sync::Arc};

use futures::{StreamExt as _, stream::BoxStream};
use tokio::sync::{broadcast::error::RecvError, mpsc};
use tokio_stream::wrappers::ReceiverStream;

use super::{Cache, Notice, read};
use crate::domain::{Atom, ClusterChange, Error};

type Sender = mpsc::Sender<Result<ClusterChange, Error>>;

/// The cluster `namespace/name` and its pods as they are now, then every
/// change to them, as a Kubernetes watch would deliver them.
pub(super) fn follow(
    cache: Arc<Cache>,
    namespace: String,
    name: String,
) -> BoxStream<'static, Result<ClusterChange, Error>> {
    let (tx, rx) = mpsc::channel(64);
    let mut notices = cache.notices.subscribe();
    tokio::spawn(async move {
        let mut pods = BTreeSet::new();
        if !snapshot(&cache, &namespace, &name, &mut pods, &tx).await {
            return;
        }
        loop {
            let notice = tokio::select! {
                n = notices.recv() => n,
                () = tx.closed() => return,
            };
            let delivered = match notice {
                Ok(n) => match &*n {
                    Notice::Cluster {
                        namespace: ns,
                        name: n,
                        deleted,
                    } if *ns == namespace && *n == name => {
                        // A change read after a later deletion is skipped:
                        // the deletion's own notice follows.
                        let now = (!deleted).then(|| read(&cache.clusters).get(&namespace, "", &name));
                        match now {
                            None => tx.send(Ok(ClusterChange::ClusterDeleted)).await.is_ok(),
                            Some(None) => true,
                            Some(Some(c)) => tx
                                .send(Ok(ClusterChange::Cluster(Box::new((*c).clone()))))
                                .await
                                .is_ok(),
                        }
                    }
                    Notice::Pod {
                        namespace: ns,
                        cluster,
                        name: pod,
                        deleted,
                    } if *ns == namespace && *cluster == name => {
                        let now = (!deleted).then(|| read(&cache.pods).get(&namespace, &name, pod));
                        match now {
                            None => {
                                pods.remove(pod);
                                tx.send(Ok(ClusterChange::PodDeleted(pod.clone()))).await.is_ok()
                            }
                            Some(None) => true,
                            Some(Some(p)) => {
                                pods.insert(pod.clone());
                                tx.send(Ok(ClusterChange::Pod(Box::new((*p).clone())))).await.is_ok()
                            }
                        }
                    }
                    Notice::Resync => snapshot(&cache, &namespace, &name, &mut pods, &tx).await,
                    _ => true,
                },
                // Missed notices: what is in the cache now says it all.
                Err(RecvError::Lagged(_)) => snapshot(&cache, &namespace, &name, &mut pods, &tx).await,
                Err(RecvError::Closed) => return,
            };
            if !delivered {
                return;
            }
        }
    });
    ReceiverStream::new(rx).boxed()
}

/// Sends the cluster (or its absence) and its pods, and deletions of pods
/// sent before that are gone now. `false` when the receiver is gone.
async fn snapshot(cache: &Cache, namespace: &str, name: &str, known: &mut BTreeSet<Atom>, tx: &Sender) -> bool {
    let cluster = read(&cache.clusters).get(namespace, "", name);
    let current = read(&cache.pods).bucket(namespace, name);
    let mut changes = vec![match cluster {
        Some(c) => ClusterChange::Cluster(Box::new((*c).clone())),
        None => ClusterChange::ClusterDeleted,
    }];
    let now: BTreeSet<Atom> = current.iter().map(|p| p.metadata.name.clone()).collect();
    changes.extend(known.difference(&now).cloned().map(ClusterChange::PodDeleted));
    changes.extend(current.iter().map(|p| ClusterChange::Pod(Box::new((**p).clone()))));
    *known = now;
    for change in changes {
        if tx.send(Ok(change)).await.is_err() {
            return false;
        }
    }
    true
}
