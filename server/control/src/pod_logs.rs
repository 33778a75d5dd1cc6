//! A cluster's pod logs (viewer): the head's, a worker's or a named pod's
//! container output, from the Kubernetes API's `pods/log` — only of that
//! cluster's pods, recorded as reads, bounded in bytes, and followed within
//! a per-caller limit, ended as every long-lived stream is.

use futures::StreamExt as _;

use super::{
    Context, ControlPlane, LogStream,
    streams::{StreamKind, kit::Permit},
};
use crate::domain::{
    Action, ClusterRef, Error, MAX_LOG_BYTES, ObservedPod, PodLog, PodLogOptions, PodLogQuery, audit::AuditAction,
};

/// How many logs (pod or Ray) one caller may follow at once.
pub(crate) const MAX_FOLLOWS_PER_PRINCIPAL: usize = 8;
/// Logs (pod and Ray) all callers together may follow in one namespace at
/// once: a team's ServiceAccounts share it.
pub(crate) const MAX_FOLLOWS_PER_NAMESPACE: usize = 32;

impl ControlPlane {
    /// A container's log of one of the cluster's pods, at most
    /// [`MAX_LOG_BYTES`] of it (viewer).
    pub async fn cluster_logs(&self, cx: &Context, cluster: &ClusterRef, query: PodLogQuery) -> Result<PodLog, Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let target = self.authorize_cluster(cx, AuditAction::ClusterLogs, cluster).await?;
        let (pod, options) = self.log_target(cx, &target, query).await?;
        let text = self
            .store
            .pod_log(namespace, &pod, &options, &cx.meta.request_id)
            .await?;
        self.record_read(cx, AuditAction::ClusterLogs, Some(namespace), Some(name))
            .await;
        Ok(PodLog {
            pod,
            container: options.container,
            text,
        })
    }

    /// The same log, then as it is written, until the container ends
    /// (viewer); with the pod and container read. Within
    /// [`MAX_FOLLOWS_PER_PRINCIPAL`] per caller; ended early, with an error
    /// saying why, on revocation, expiry, idleness and shutdown.
    pub async fn follow_cluster_logs(
        &self,
        cx: &Context,
        cluster: &ClusterRef,
        query: PodLogQuery,
    ) -> Result<(String, String, LogStream), Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let target = self.authorize_cluster(cx, AuditAction::ClusterLogs, cluster).await?;
        let (pod, options) = self.log_target(cx, &target, query).await?;
        let permit = self.follow_permit(cx, namespace, name).await?;
        let chunks = self
            .store
            .follow_pod_log(namespace, &pod, &options, &cx.meta.request_id)
            .await?;
        let followed = self.followed(cx, namespace, name, permit, chunks).await;
        Ok((pod, options.container, followed))
    }

    /// A place for one more of the caller's followed logs (pod or Ray), or
    /// `RateLimited` (recorded) past [`MAX_FOLLOWS_PER_PRINCIPAL`].
    pub(crate) async fn follow_permit(&self, cx: &Context, namespace: &str, name: &str) -> Result<Permit, Error> {
        let holders = super::streams::kit::Holders {
            subject: (&cx.principal.subject, MAX_FOLLOWS_PER_PRINCIPAL),
            namespace: Some((namespace, MAX_FOLLOWS_PER_NAMESPACE)),
        };
        if let Ok(permit) = self.open_log_follows.take_for(holders) {
            return Ok(permit);
        }
        let e = Error::RateLimited {
            retry_after: std::time::Duration::from_secs(1),
        };
        self.record_refusal(cx, AuditAction::ClusterLogs, Some(namespace), Some(name), &e)
            .await;
        Err(e)
    }

    /// A followed log's chunks, recorded as a read, holding `permit`, and
    /// ended as every long-lived stream is.
    pub(crate) async fn followed(
        &self,
        cx: &Context,
        namespace: &str,
        name: &str,
        permit: Permit,
        chunks: impl futures::Stream<Item = Result<String, Error>> + Send + 'static,
    ) -> LogStream {
        self.record_read(cx, AuditAction::ClusterLogs, Some(namespace), Some(name))
            .await;
        let guard = self.stream_guard(
            StreamKind::PodLog,
            cx,
            Some(namespace),
            Some(name),
            Some(Action::Read),
            Some(self.settings.tunnels.idle_timeout),
        );
        let chunks = chunks.map(move |chunk| {
            let _held = &permit;
            chunk
        });
        Box::pin(guard.guard_items(self.clone(), chunks))
    }

    /// The pod and container `query` names among the cluster's own pods.
    async fn log_target(
        &self,
        cx: &Context,
        target: &ClusterRef,
        query: PodLogQuery,
    ) -> Result<(String, PodLogOptions), Error> {
        let query = query.validated()?;
        let rid = &cx.meta.request_id;
        let (namespace, name) = (target.namespace(), target.name());
        let cluster = self
            .store
            .get(target, rid)
            .await
            .map_err(|e| e.in_namespace(namespace))?;
        let pods = self.store.cluster_pods(target, rid).await?;
        let views: Vec<&ObservedPod> = pods.iter().map(|p| &**p).collect();
        let owner = cluster.metadata.uid.as_ref().map(crate::domain::Uid::text);
        let (pod, container) = query.resolve(name, owner.as_deref(), &views)?;
        let options = PodLogOptions {
            container,
            tail_lines: query.tail_lines,
            since_seconds: query.since_seconds,
            previous: query.previous,
            limit_bytes: MAX_LOG_BYTES,
            site: Some(pod.site.clone()),
        };
        Ok((pod.metadata.name.to_string(), options))
    }
}
