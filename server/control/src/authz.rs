//! Authorization: the one place an [`Authorized`] proof is made, for a
//! caller by the team mapping, or for krayne's own automation.

use krayne_core::domain::{
    Action, Authorized, ClusterRef, Error, ObjectMeta, ObservedCluster, Site, audit::AuditAction, check_dns1123_label,
    check_dns1123_subdomain,
};

use crate::{Context, ControlPlane};

/// A namespace the caller was found allowed an action in: a grant is per
/// namespace, so it covers each cluster of it ([`Self::cluster_in`]).
#[derive(Debug)]
pub(crate) struct InNamespace {
    namespace: String,
    action: Action,
}

impl InNamespace {
    /// Cluster `name` of the namespace in `site` (where a create placed
    /// it), under the same grant.
    pub(crate) fn cluster_in(&self, name: &str, site: Option<Site>) -> Authorized<ClusterRef> {
        let cluster = ClusterRef::new(self.namespace.clone(), name);
        let cluster = match site {
            Some(site) => cluster.placed(site),
            None => cluster,
        };
        Authorized::vouched(cluster, self.action)
    }
}

/// krayne's own automation (the lifecycle reaper, the companion keeper)
/// acting on `cluster` for `audit_action`: it is fenced by its own rules
/// (the clusters its policies name, as its RBAC lets it see them), not by
/// a caller's grants.
pub(crate) fn krayne_acts_on(cluster: &ObservedCluster, audit_action: AuditAction) -> Authorized<ClusterRef> {
    krayne_acts_on_object(&cluster.metadata, &cluster.site, audit_action)
}

/// As [`krayne_acts_on`], on any object named as a cluster is (a RayJob
/// in the queue's line), in the site it was read from: never another
/// site's object of the same name.
pub(crate) fn krayne_acts_on_object(
    meta: &ObjectMeta,
    site: &Site,
    audit_action: AuditAction,
) -> Authorized<ClusterRef> {
    let at = ClusterRef::at(site.clone(), meta.namespace.as_str(), meta.name.as_str());
    Authorized::vouched(at, audit_action.needs())
}

impl ControlPlane {
    /// Refuses (and audits) a namespace that cannot exist, and `action` on
    /// `namespace` unless the caller may.
    pub(crate) async fn authorize(
        &self,
        cx: &Context,
        audit_action: AuditAction,
        namespace: &str,
        cluster: Option<&str>,
    ) -> Result<InNamespace, Error> {
        let action = audit_action.needs();
        let error = match check_dns1123_label(namespace) {
            Err(why) => Error::invalid("namespace", why),
            Ok(()) if cx.principal.may(action, namespace) => {
                return Ok(InNamespace {
                    namespace: namespace.to_owned(),
                    action,
                });
            }
            Ok(()) => Error::PermissionDenied(format!(
                "{} needs the {} role on namespace {namespace:?}",
                cx.principal.subject,
                action.needs()
            )),
        };
        self.record_refusal(cx, audit_action, Some(namespace), cluster, &error)
            .await;
        Err(error)
    }

    /// [`Self::authorize`] for a cluster named by the request (a path, not a
    /// config), whose name must also be one Kubernetes could hold: a name
    /// that cannot exist is the caller's mistake (400), whatever the
    /// audit log's state. The proof names the cluster as asked (its site
    /// included).
    pub(crate) async fn authorize_cluster(
        &self,
        cx: &Context,
        audit_action: AuditAction,
        cluster: &ClusterRef,
    ) -> Result<Authorized<ClusterRef>, Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let granted = self.authorize(cx, audit_action, namespace, Some(name)).await?;
        let Err(why) = check_dns1123_subdomain(name) else {
            return Ok(Authorized::vouched(cluster.clone(), granted.action));
        };
        let error = Error::invalid("name", why);
        self.record_refusal(cx, audit_action, Some(namespace), Some(name), &error)
            .await;
        Err(error)
    }
}
