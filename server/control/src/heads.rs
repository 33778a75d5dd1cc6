//! The head a use case asks Ray through ([`domain::RayHeads`]): the
//! cluster must be ready and serve a dashboard; each request the adapter
//! makes is a connection opened here as every service connection is
//! (within the caller's caps, counted and audited as `service.connect`
//! via the Jobs API).

use std::sync::Arc;

use tokio_util::compat::TokioAsyncReadCompatExt as _;

use super::{Context, ControlPlane, Reachable, TunnelVia, tunnels::find_service};
use crate::{
    domain::{
        self, ClusterRef, ClusterStatus, Error, HeadLink, HeadReader, ServiceStream, audit::AuditAction, check_job_id,
    },
    manifest,
};

/// Opens connections to one head's dashboard for one caller.
struct Dialer {
    control: ControlPlane,
    cx: Context,
    head: Reachable,
}

#[async_trait::async_trait]
impl domain::DialHead for Dialer {
    async fn dial(&self) -> Result<Box<dyn ServiceStream>, Error> {
        let tunnel = self.control.connect(&self.cx, self.head.clone()).await?;
        Ok(Box::new(tunnel.into_connection().compat()))
    }
}

impl ControlPlane {
    /// The Ray port (`Unavailable` when this server has none).
    pub(crate) fn ray(&self) -> Result<&Arc<dyn domain::RayHeads>, Error> {
        self.ray
            .as_ref()
            .ok_or_else(|| Error::Unavailable("this server asks no Ray heads (no Ray client set)".into()))
    }

    /// The cluster's head as Ray's Jobs API server: the cluster must be
    /// ready and have a dashboard.
    pub(crate) async fn ray_head(&self, cx: &Context, target: &ClusterRef) -> Result<HeadLink, Error> {
        let rid = &cx.meta.request_id;
        let (namespace, name) = (target.namespace(), target.name());
        let cluster = self
            .store
            .get(target, rid)
            .await
            .map_err(|e| e.in_namespace(namespace))?;
        let pods = self.store.cluster_pods(target, rid).await?;
        let views: Vec<_> = pods.iter().map(|p| &**p).collect();
        let info = manifest::cluster_info(&cluster, Some(&views));
        if info.status != ClusterStatus::Ready {
            // Krayne's words.
            return Err(Error::FailedPrecondition(format!(
                "cluster '{name}' is not ready (status: {})",
                info.status
            )));
        }
        let declared = manifest::declared_services(&cluster);
        let dashboard = find_service(&declared, "dashboard", true).map_err(|_| {
            Error::FailedPrecondition(format!(
                "cluster '{name}' has no dashboard, which serves Ray's Jobs API: create it with the dashboard on"
            ))
        })?;
        let (_, head, ray_token) = self.head_of(cx, target).await?;
        let head = head.ok_or_else(|| {
            Error::FailedPrecondition(format!("cluster '{name}' is not ready (status: no serving head pod)"))
        })?;
        let reachable = Reachable::new(namespace, name, dashboard, head, TunnelVia::JobsApi, ray_token);
        let reader = if cx.is_system() {
            HeadReader::Krayne
        } else {
            HeadReader::Caller
        };
        let (pod, authorization) = (reachable.pod().to_owned(), reachable.ray_authorization());
        Ok(HeadLink::new(
            target.clone(),
            pod,
            reader,
            authorization,
            Arc::new(Dialer {
                control: self.clone(),
                cx: cx.clone(),
                head: reachable,
            }),
        ))
    }

    /// [`Self::ray_head`] for a mutation of job `id`, refusals audited.
    pub(crate) async fn job_head(
        &self,
        cx: &Context,
        action: AuditAction,
        target: &ClusterRef,
        id: &str,
    ) -> Result<HeadLink, Error> {
        let (namespace, name) = (target.namespace(), target.name());
        let head = match check_id(id) {
            Ok(()) => self.ray_head(cx, target).await,
            Err(e) => Err(e),
        };
        if let Err(e) = &head {
            self.record_refusal(cx, action, Some(namespace), Some(name), e).await;
        }
        head
    }
}

/// A job id Ray would keep, else `InvalidArgument`.
pub(crate) fn check_id(id: &str) -> Result<(), Error> {
    check_job_id(id).map_err(|why| Error::invalid("job", why))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_that_ray_would_lose_are_refused() {
        assert!(check_id("train-1").is_ok());
        assert_eq!(check_id("a/b").unwrap_err().code(), "invalid_argument");
        assert!(check_id("").is_err());
    }
}
