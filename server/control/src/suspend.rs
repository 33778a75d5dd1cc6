//! Suspend and resume: a suspended cluster keeps its RayCluster (its
//! config, its name, its place in the namespace's `clusters` quota) and
//! holds no pods, so no CPUs, memory or GPUs. Resuming is admitted through
//! the quota as a create is.

use serde_json::Value;

use super::{Context, ControlPlane, clusters::views};
use crate::{
    domain::{ClusterInfo, ClusterRef, Error, audit::AuditAction, quota},
    manifest::{self, suspend_patch},
};

impl ControlPlane {
    /// Suspends a cluster (editor): KubeRay deletes its pods and keeps it.
    /// Suspending a suspended cluster changes nothing.
    pub async fn suspend(&self, cx: &Context, cluster: &ClusterRef) -> Result<ClusterInfo, Error> {
        self.set_suspend(cx, cluster, true, AuditAction::ClusterSuspend).await
    }

    /// Resumes a suspended cluster (editor): KubeRay creates its pods
    /// again. Under a quota, its pods are admitted as a create's are (429
    /// with the numbers when they would not fit). Resuming a running
    /// cluster changes nothing.
    pub async fn resume(&self, cx: &Context, cluster: &ClusterRef) -> Result<ClusterInfo, Error> {
        self.set_suspend(cx, cluster, false, AuditAction::ClusterResume).await
    }

    async fn set_suspend(
        &self,
        cx: &Context,
        cluster: &ClusterRef,
        suspend: bool,
        action: AuditAction,
    ) -> Result<ClusterInfo, Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let target = self.authorize_cluster(cx, action, cluster).await?;
        let rid = &cx.meta.request_id;
        let latest = async || {
            self.store
                .get_latest(&target, rid)
                .await
                .map_err(|e| e.in_namespace(namespace))
        };
        // Only a resume grows what the namespace holds.
        let admitted = if suspend {
            None
        } else {
            self.admit_charge(cx, action, namespace, name, async || {
                let cluster = latest().await?;
                Ok((quota::Request::resume(&cluster), cluster))
            })
            .await?
        };
        let (admission, mut read) = admitted.map_or((None, None), |(guard, cluster)| (Some(guard), Some(cluster)));
        let retry = if admission.is_some() {
            1
        } else {
            self.settings.conflict_retries
        };
        let updated = self
            .audited(cx, action, namespace, name, Value::Null, || async {
                let mut attempt = 0;
                loop {
                    attempt += 1;
                    // Under a quota the version admitted is the one
                    // written; a concurrent change makes the caller retry.
                    let cluster = match read.take() {
                        Some(admitted) => admitted,
                        None => latest().await?,
                    };
                    let patch = suspend_patch(&cluster, suspend);
                    match self.store.patch(&target, &patch, rid).await {
                        Err(Error::Conflict(_)) if attempt < retry => {}
                        other => return other.map_err(|e| e.in_namespace(namespace)),
                    }
                }
            })
            .await?;
        drop(admission);
        let pods = self.store.cluster_pods(&target, rid).await?;
        Ok(manifest::cluster_info(&updated, Some(&views(&pods))))
    }
}
