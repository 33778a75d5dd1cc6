//! Waiting for readiness: driven by a watch of the cluster and its pods, so
//! waiters cost no polling.

use std::{collections::BTreeMap, time::Duration};

use futures::{StreamExt as _, stream::BoxStream};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::{Context, ControlPlane};
use crate::domain::audit::AuditAction;
use crate::{
    domain::{
        Atom, ClusterChange, ClusterInfo, ClusterRef, ClusterStatus, Error, ObservedCluster, ObservedPod, ResourceKind,
    },
    manifest::{self, HeadStuck},
};

impl ControlPlane {
    /// The cluster's summary now and at each status change after, ending
    /// after `ready`; `DeadlineExceeded` (naming the last status) when
    /// `timeout` passes first; `FailedPrecondition` (naming the reason, the
    /// image) as soon as the head is stuck in a state it does not leave
    /// by itself (see [`manifest::head_stuck`]; an unschedulable head
    /// after `wait_unschedulable_grace`). `None` means the default timeout.
    pub async fn wait(
        &self,
        cx: &Context,
        cluster: &ClusterRef,
        timeout: Option<Duration>,
    ) -> Result<BoxStream<'static, Result<ClusterInfo, Error>>, Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let target = self.authorize_cluster(cx, AuditAction::ClusterWait, cluster).await?;
        let timeout = timeout.unwrap_or(self.settings.default_wait);
        if timeout.is_zero() || timeout > self.settings.max_wait {
            let max = self.settings.max_wait.as_secs();
            return Err(Error::invalid(
                "timeout_seconds",
                format!("must be between 1 and {max}"),
            ));
        }
        let rid = &cx.meta.request_id;
        // Fail fast on a missing cluster rather than wait for it.
        self.store
            .get(&target, rid)
            .await
            .map_err(|e| e.in_namespace(namespace))?;
        let changes = self.store.watch(&target, rid).await?;
        let (tx, rx) = mpsc::channel(16);
        let what = Waited {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        };
        let stopping = self.stopping.clone();
        let unschedulable_grace = self.settings.wait_unschedulable_grace;
        tokio::spawn(async move {
            let open = metrics::gauge!("krayne_waits_open");
            open.increment(1);
            let limits = Limits {
                timeout,
                unschedulable_grace,
            };
            follow(changes, tx, limits, what, stopping).await;
            open.decrement(1);
        });
        Ok(ReceiverStream::new(rx).boxed())
    }
}

/// The cluster a wait follows.
struct Waited {
    namespace: String,
    name: String,
}

/// When a wait gives up.
#[derive(Clone, Copy)]
struct Limits {
    timeout: Duration,
    /// How long a head may stay unschedulable (zero: as long as the wait).
    unschedulable_grace: Duration,
}

async fn follow(
    mut changes: BoxStream<'static, Result<ClusterChange, Error>>,
    tx: mpsc::Sender<Result<ClusterInfo, Error>>,
    limits: Limits,
    what: Waited,
    stopping: tokio_util::sync::CancellationToken,
) {
    let timeout = limits.timeout;
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    // Set while the head is unschedulable: when that becomes final.
    let mut unschedulable_until: Option<tokio::time::Instant> = None;
    let mut stuck: Option<HeadStuck> = None;
    let mut cluster: Option<ObservedCluster> = None;
    let mut pods: BTreeMap<Atom, ObservedPod> = BTreeMap::new();
    // The status last sent, and the place in line with it: a waiter in
    // line hears each step forward.
    let mut last: Option<(ClusterStatus, Option<u32>)> = None;
    let mut seen: Option<ClusterInfo> = None;
    let mut suspended_until: Option<tokio::time::Instant> = None;
    loop {
        let change = tokio::select! {
            change = changes.next() => change,
            () = &mut deadline => {
                let message = format!(
                    "cluster {}/{} not ready after {}s ({})",
                    what.namespace,
                    what.name,
                    timeout.as_secs(),
                    last_seen(seen.as_ref())
                );
                let _ = tx.send(Err(Error::DeadlineExceeded(message))).await;
                return;
            }
            () = until(suspended_until) => {
                let message = format!(
                    "cluster {}/{} is suspended: it will not get ready until it is resumed (krayne resume)",
                    what.namespace, what.name
                );
                let _ = tx.send(Err(Error::FailedPrecondition(message))).await;
                return;
            }
            () = until(unschedulable_until) => {
                if let Some(why) = &stuck {
                    let _ = tx.send(Err(cannot_get_ready(&what, why))).await;
                }
                return;
            }
            () = tx.closed() => return,
            () = stopping.cancelled() => {
                let message = "the server is shutting down; wait again (another replica will answer)";
                let _ = tx.send(Err(Error::Unavailable(message.into()))).await;
                return;
            }
        };
        match change {
            None => {
                let _ = tx
                    .send(Err(Error::Unavailable(
                        "the watch on Kubernetes ended; wait again".into(),
                    )))
                    .await;
                return;
            }
            Some(Err(e)) => {
                let _ = tx.send(Err(e)).await;
                return;
            }
            Some(Ok(ClusterChange::ClusterDeleted)) => {
                let _ = tx
                    .send(Err(Error::NotFound {
                        kind: ResourceKind::Cluster,
                        name: what.name.clone(),
                        namespace: Some(what.namespace.clone()),
                    }))
                    .await;
                return;
            }
            Some(Ok(ClusterChange::Cluster(c))) => cluster = Some(*c),
            Some(Ok(ClusterChange::Pod(p))) => {
                pods.insert(p.metadata.name.clone(), *p);
            }
            Some(Ok(ClusterChange::PodDeleted(name))) => {
                pods.remove(&name);
            }
        }
        let Some(c) = &cluster else { continue };
        let current: Vec<&ObservedPod> = pods.values().collect();
        let info = manifest::cluster_info(c, Some(&current));
        seen = Some(info.clone());
        stuck = manifest::head_stuck(&current);
        let hopeless = match &stuck {
            Some(HeadStuck::Unschedulable(_)) if !limits.unschedulable_grace.is_zero() => {
                unschedulable_until.get_or_insert_with(|| tokio::time::Instant::now() + limits.unschedulable_grace);
                None
            }
            Some(why @ (HeadStuck::ImagePull(_) | HeadStuck::CrashLoop { .. })) => Some(why),
            Some(HeadStuck::Unschedulable(_)) | None => {
                unschedulable_until = None;
                None
            }
        };
        // KubeRay stays `ready` while a scale-up's new workers start: wait
        // for them too, and report `ready` once, when it is all there.
        let done = info.status == ClusterStatus::Ready && info.ready_workers >= info.num_workers;
        let now = (info.status.clone(), info.queue_position);
        let news = (done || info.status != ClusterStatus::Ready) && last.as_ref() != Some(&now);
        let left_line = info.status == ClusterStatus::Suspended
            && last
                .as_ref()
                .is_some_and(|(status, _)| *status == ClusterStatus::Queued);
        // Suspended, and in no line (krayne's or Kueue's): nothing but a
        // resume makes it ready, so the wait ends after a grace (a resume
        // just made may not have reached the cache yet) rather than at its
        // timeout.
        let suspended = c.spec.suspend == Some(true) && c.queued_since().is_none() && c.kueue_queue().is_none();
        suspended_until = match (suspended, suspended_until) {
            (true, None) => Some(tokio::time::Instant::now() + SUSPENDED_GRACE),
            (true, until) => until,
            (false, _) => None,
        };
        if left_line {
            let _ = tx
                .send(Err(Error::FailedPrecondition(format!(
                    "cluster {}/{} left its namespace's line without being admitted (it waited past max_wait, or was \
                     suspended); it is kept, suspended",
                    what.namespace, what.name
                ))))
                .await;
            return;
        }
        if news {
            last = Some(now);
            if tx.send(Ok(info)).await.is_err() || done {
                return;
            }
        }
        if let Some(why) = hopeless {
            let _ = tx.send(Err(cannot_get_ready(&what, why))).await;
            return;
        }
    }
}

/// How long a wait goes on while its cluster is suspended (and in no line)
/// before it ends: a resume just made reaches the cache well within it.
const SUSPENDED_GRACE: Duration = Duration::from_secs(5);

/// Resolves at `when`, or never.
async fn until(when: Option<tokio::time::Instant>) {
    match when {
        Some(when) => tokio::time::sleep_until(when).await,
        None => std::future::pending().await,
    }
}

/// The end of a wait on a head that will not get ready by itself.
fn cannot_get_ready(what: &Waited, why: &HeadStuck) -> Error {
    Error::FailedPrecondition(format!(
        "cluster {}/{} cannot get ready: {}",
        what.namespace,
        what.name,
        why.describe()
    ))
}

/// What a wait that timed out last saw. KubeRay reports `ready` while a
/// scale-up's new workers start: that is said, not a bare "ready".
fn last_seen(seen: Option<&ClusterInfo>) -> String {
    match seen {
        None => "last status: unknown".to_owned(),
        Some(info) if info.status == ClusterStatus::Ready => format!(
            "last status: ready, but {} of {} workers ready: the new workers are still starting",
            info.ready_workers, info.num_workers
        ),
        Some(info) if info.status.is_head_down() => {
            format!("last status: {}; the head is not running", info.status.as_str())
        }
        Some(info) => format!(
            "last status: {}, {} of {} workers ready",
            info.status.as_str(),
            info.ready_workers,
            info.num_workers
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(status: ClusterStatus, ready: u32, of: u32) -> ClusterInfo {
        ClusterInfo {
            name: "demo".into(),
            namespace: "ml-team".into(),
            status,
            head_ip: None,
            dashboard_url: None,
            client_url: None,
            notebook_url: None,
            code_server_url: None,
            ssh_url: None,
            num_workers: of,
            autoscaling_enabled: false,
            created_at: None,
            ready_workers: ready,
            suspended: false,
            created_by: None,
            lifecycle: None,
            lifecycle_warned_at: None,
            idle_since: None,
            suspends_at: None,
            expires_at: None,
            kept_until: None,
            queue_position: None,
            queued_since: None,
            queue_reason: None,
            site: "local".into(),
            site_unavailable_since: None,
            resource_version: None,
        }
    }

    #[test]
    fn a_timed_out_wait_after_a_scale_up_says_the_workers_are_still_starting() {
        let said = last_seen(Some(&info(ClusterStatus::Ready, 2, 4)));
        assert_eq!(
            said,
            "last status: ready, but 2 of 4 workers ready: the new workers are still starting"
        );
        let said = last_seen(Some(&info(ClusterStatus::PodsPending, 0, 2)));
        assert_eq!(said, "last status: pods-pending, 0 of 2 workers ready");
        let said = last_seen(Some(&info(ClusterStatus::Unschedulable, 1, 1)));
        assert_eq!(said, "last status: unschedulable; the head is not running");
        assert_eq!(last_seen(None), "last status: unknown");
    }
}
