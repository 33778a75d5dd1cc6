//! A cluster's Ray token for an editor who reaches its dashboard or Ray
//! client raw (`krayne tunnel`, `ray job submit` through a tunnel), where
//! krayne cannot add it on the way. Handing it out is audited first, as a
//! tunnel is: no durable row, no token.

use serde_json::json;

use crate::{
    Context, ControlPlane,
    domain::{ClusterRef, Error, audit::AuditAction},
    manifest::RayAuth,
};

/// How a caller authenticates to a cluster's Ray (its `Debug` leaves the
/// token out).
#[derive(Clone, PartialEq, Eq)]
pub struct RayCredentials {
    /// `token` (send [`Self::token`]) or `disabled` (send nothing).
    pub mode: &'static str,
    /// The token, for `RAY_AUTH_TOKEN` or `Authorization: Bearer …`.
    pub token: Option<String>,
}

impl std::fmt::Debug for RayCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RayCredentials")
            .field("mode", &self.mode)
            .field("token", &self.token.as_ref().map(|_| "…"))
            .finish()
    }
}

impl ControlPlane {
    /// Cluster `cluster`'s Ray credentials (editor; audited).
    pub async fn ray_credentials(&self, cx: &Context, cluster: &ClusterRef) -> Result<RayCredentials, Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let target = self.authorize_cluster(cx, AuditAction::RayCredentials, cluster).await?;
        let rid = &cx.meta.request_id;
        let found = self
            .store
            .get(&target, rid)
            .await
            .map_err(|e| e.in_namespace(namespace));
        let auth = match found {
            Ok(found) => self.ray_auth_of(&found),
            Err(e) => {
                self.record_refusal(cx, AuditAction::RayCredentials, Some(namespace), Some(name), &e)
                    .await;
                return Err(e);
            }
        };
        let mode = match auth {
            RayAuth::Open => "disabled",
            RayAuth::Token { .. } => "token",
            RayAuth::Unknown => {
                let e = Error::FailedPrecondition(format!(
                    "cluster {name} requires a Ray token that krayne did not make (its own Secret, or this server \
                     has no --ray-auth-key-file); ask whoever made it"
                ));
                self.record_refusal(cx, AuditAction::RayCredentials, Some(namespace), Some(name), &e)
                    .await;
                return Err(e);
            }
        };
        self.audited(
            cx,
            AuditAction::RayCredentials,
            namespace,
            name,
            json!({"mode": mode}),
            || async {
                Ok(RayCredentials {
                    mode,
                    token: match auth {
                        RayAuth::Token { token, .. } => Some(token.expose().to_owned()),
                        RayAuth::Open | RayAuth::Unknown => None,
                    },
                })
            },
        )
        .await
    }
}
