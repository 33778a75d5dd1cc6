//! Suspend and resume: a suspended cluster keeps its RayCluster (its
//! config, its name, its place in the namespace's `clusters` quota) and
//! holds no pods, so no CPUs, memory or GPUs. Resuming is admitted through
//! the quota as a create is, and may wait in the namespace's line
//! (docs/quotas.md); suspending a cluster that waits takes it out of line.

use serde_json::Value;

use super::{Context, ControlPlane, clusters::views, queue::Admission};
use crate::{
    domain::{
        AdmissionGuard, ClusterInfo, ClusterPatch, ClusterRef, Error, ObservedCluster, audit::AuditAction, quota,
    },
    manifest::{self, admit_patch, enqueue_patch, leave_line_patch, suspend_patch},
};

/// What a resume asks.
#[derive(Debug, Clone, Copy, Default)]
pub struct ResumeInput {
    /// Wait in the namespace's line when it does not fit (`None`: as the
    /// namespace's queueing policy says).
    pub queue: Option<bool>,
}

impl ControlPlane {
    /// Suspends a cluster (editor): KubeRay deletes its pods and keeps it.
    /// Suspending a suspended cluster changes nothing; one waiting in line
    /// leaves it and stays.
    pub async fn suspend(&self, cx: &Context, cluster: &ClusterRef) -> Result<ClusterInfo, Error> {
        self.set_suspend(cx, cluster, None, AuditAction::ClusterSuspend).await
    }

    /// Resumes a suspended cluster (editor): KubeRay creates its pods
    /// again. Under a quota, its pods are admitted as a create's are (429
    /// with the numbers when they would not fit, or a place in line when
    /// it waits: status `queued`). Resuming a running cluster, or one
    /// already in line with `queue`, changes nothing.
    pub async fn resume(&self, cx: &Context, cluster: &ClusterRef, input: ResumeInput) -> Result<ClusterInfo, Error> {
        self.set_suspend(cx, cluster, Some(input), AuditAction::ClusterResume)
            .await
    }

    /// Suspends (`resume` none) or resumes.
    async fn set_suspend(
        &self,
        cx: &Context,
        cluster: &ClusterRef,
        resume: Option<ResumeInput>,
        action: AuditAction,
    ) -> Result<ClusterInfo, Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let target = self.authorize_cluster(cx, action, cluster).await?;
        let rid = &cx.meta.request_id;
        // Kueue suspends and resumes the clusters it admits: a suspend or
        // resume of krayne's would be undone by it, or run a cluster
        // Kueue has not admitted.
        let current = self
            .store
            .get(&target, rid)
            .await
            .map_err(|e| e.in_namespace(namespace))?;
        if let Some(queue) = current.kueue_queue() {
            let e = Error::FailedPrecondition(format!(
                "cluster {name} is admitted by Kueue (LocalQueue {queue}): Kueue suspends and resumes it; \
                 delete it, or deactivate its Workload through Kueue"
            ));
            self.record_refusal(cx, action, Some(namespace), Some(name), &e).await;
            return Err(e);
        }
        let latest = async || {
            self.store
                .get_latest(&target, rid)
                .await
                .map_err(|e| e.in_namespace(namespace))
        };
        // Only a resume grows what the namespace holds.
        let admitted = match resume {
            None => Admission::Unlimited,
            Some(input) => {
                let waits = self.queue_policy(namespace).waits(input.queue);
                self.admit_or_queue(cx, action, namespace, name, waits, async || {
                    let cluster = latest().await?;
                    let request = if cluster.queued_since().is_some() {
                        quota::Request::admit(&cluster)
                    } else {
                        quota::Request::resume(&cluster)
                    };
                    Ok((request, cluster))
                })
                .await?
            }
        };
        let (admission, mut read, place) = match admitted {
            Admission::Unlimited => (None, None, None),
            Admission::Fits(guard, cluster) => (Some(guard), Some(cluster), None),
            Admission::Waits(guard, cluster, place) => (Some(guard), Some(cluster), Some(place)),
        };
        if let (Some(_), Some(cluster)) = (&place, &read)
            && cluster.queued_since().is_some()
        {
            // In line already: it keeps its place.
            let pods = self.store.cluster_pods(&target, rid).await?;
            return Ok(manifest::cluster_info(cluster, Some(&views(&pods))));
        }
        let hold = admission.as_ref().map(AdmissionGuard::hold).unwrap_or_default();
        let retry = if admission.is_some() {
            1
        } else {
            self.settings.conflict_retries
        };
        let summary = place.as_ref().map_or(Value::Null, |p| p.summary());
        let status = if place.is_some() { 202 } else { action.success_status() };
        let updated = self
            .audited_with_status(
                cx,
                action,
                namespace,
                name,
                summary,
                |_| status,
                || async {
                    let mut attempt = 0;
                    loop {
                        attempt += 1;
                        // Under a quota the version admitted is the one
                        // written; a concurrent change makes the caller retry.
                        let cluster = match read.take() {
                            Some(admitted) => admitted,
                            None => latest().await?,
                        };
                        let patch = match &place {
                            Some(place) => {
                                let since = place.since.to_string();
                                let at = manifest::Place {
                                    since: &since,
                                    position: place.position,
                                    reason: &place.reason,
                                };
                                enqueue_patch(&cluster, at).ok_or_else(|| {
                                    Error::invalid(
                                        "queue",
                                        format!(
                                            "cluster {name} was not made through krayne, so it cannot wait in line; \
                                         resume it without queue"
                                        ),
                                    )
                                })?
                            }
                            None => change(&cluster, resume.is_none()),
                        };
                        hold.check()?;
                        match self.store.patch(&target, &patch, rid).await {
                            Err(Error::Conflict(_)) if attempt < retry => {}
                            other => return other.map_err(|e| e.in_namespace(namespace)),
                        }
                    }
                },
            )
            .await?;
        drop(admission);
        let pods = self.store.cluster_pods(&target, rid).await?;
        Ok(manifest::cluster_info(&updated, Some(&views(&pods))))
    }
}

/// The patch that suspends or resumes `cluster`: one waiting in line
/// leaves it when suspended, and is admitted out of it when resumed.
fn change(cluster: &ObservedCluster, suspend: bool) -> ClusterPatch {
    match (cluster.queued_since().is_some(), suspend) {
        (true, true) => leave_line_patch(&cluster.metadata),
        (true, false) => admit_patch(&cluster.metadata, &jiff::Timestamp::now().to_string()),
        (false, suspend) => suspend_patch(cluster, suspend),
    }
}
