//! What krayne keeps beside every cluster it manages: the NetworkPolicy
//! admitting only the cluster's pods and krayne's (and the platform's
//! extra peers), and the Secret holding the cluster's Ray token.
//!
//! Both are server-side applied and owned by the cluster. A create puts
//! them there (the Secret before the RayCluster, so no pod starts without
//! its token; then owned by it); the keeper goes over every cluster it
//! sees, at start and then every interval, and applies what is missing or
//! different: a cluster made before policies were on (or before an
//! upgrade) gets its policy without a restart, a policy of a deleted
//! cluster of the same name is taken over, a changed `extraIngress`
//! reaches every cluster.

use std::{
    collections::{HashMap, HashSet},
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use crate::{
    Context, ControlPlane,
    domain::{Authorized, ClusterRef, Companion, Error, ObservedCluster, RequestId, audit::AuditAction},
    manifest::{self, RayAuth},
};

/// The most writes the keeper makes a second: a replica starting beside
/// 20 000 clusters spreads its first round over minutes rather than
/// bursting at the API server.
const WRITES_PER_SECOND: u32 = 50;

/// What one cluster's companions needed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Kept {
    /// Its policy was missing (backfilled).
    pub policy_created: bool,
    /// Its policy differed (another owner, older rules): replaced.
    pub policy_replaced: bool,
    /// Its token's Secret was applied.
    pub secret_applied: bool,
}

/// What the keeper has already seen right: cluster (namespace, name) →
/// (uid, a hash of what it applied), so a round costs nothing for clusters
/// that have not changed.
#[derive(Debug, Default)]
pub struct KeptClusters(HashMap<(String, String), (String, u64)>);

impl ControlPlane {
    /// How `cluster`'s Ray authenticates, with its token when krayne
    /// made it.
    pub(crate) fn ray_auth_of(&self, cluster: &ObservedCluster) -> RayAuth {
        manifest::ray_auth_of(cluster, self.settings.ray_auth.as_ref())
    }

    /// Before creating `cluster` with token `nonce`: its Secret `secret`
    /// (a name of this create's own), not yet owned (no uid exists yet).
    pub(crate) async fn stage_ray_token(
        &self,
        cluster: &Authorized<ClusterRef>,
        nonce: &str,
        secret: &str,
        rid: &RequestId,
    ) -> Result<(), Error> {
        let Some(key) = &self.settings.ray_auth else {
            return Ok(());
        };
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let token = key.token(namespace, name, nonce);
        let object = manifest::ray_auth_secret(namespace, name, secret, &token, None);
        self.store
            .apply_companion(cluster, Companion::Secret, secret, &object, rid)
            .await
    }

    /// After a create that failed: the Secret staged for it goes again
    /// (its name was this create's alone).
    pub(crate) async fn unstage_ray_token(&self, cluster: &Authorized<ClusterRef>, secret: &str, rid: &RequestId) {
        if let Err(e) = self
            .store
            .delete_companion(cluster, Companion::Secret, secret, rid)
            .await
        {
            tracing::warn!(request_id = %rid, namespace = %cluster.namespace(), cluster = %cluster.name(), error = %e, "a staged Ray token Secret could not be deleted");
        }
    }

    /// Puts `cluster`'s companions in place: its token's Secret (when it
    /// has one krayne knows), then its NetworkPolicy (when the server
    /// makes them), as krayne applies them. With `look_first` the policy is
    /// read first, to apply (and report) it only where it is missing or
    /// differs; a cluster just created has none to look at.
    pub(crate) async fn keep_companions(
        &self,
        target: &Authorized<ClusterRef>,
        cluster: &ObservedCluster,
        look_first: bool,
        rid: &RequestId,
    ) -> Result<Kept, Error> {
        let mut kept = Kept::default();
        let (namespace, name) = (cluster.metadata.namespace.as_str(), cluster.metadata.name.as_str());
        let uid = cluster.metadata.uid.as_deref();
        if let RayAuth::Token { token, secret } = self.ray_auth_of(cluster) {
            let object = manifest::ray_auth_secret(namespace, name, &secret, &token, uid);
            self.store
                .apply_companion(target, Companion::Secret, &secret, &object, rid)
                .await?;
            kept.secret_applied = true;
        }
        if let Some(peers) = &self.settings.network_policy {
            let wanted = manifest::network_policy(cluster, peers);
            let policy_name = manifest::network_policy_name(name);
            let current = if look_first {
                self.store.get_network_policy(target, &policy_name, rid).await?
            } else {
                None
            };
            if let Some(theirs) = current.as_ref().filter(|c| !managed_by_krayne(c)) {
                let owner = &theirs["metadata"]["labels"]["app.kubernetes.io/managed-by"];
                tracing::warn!(%namespace, cluster = %name, policy = %policy_name, %owner,
                    "a NetworkPolicy of krayne's name that krayne did not make is left alone");
                return Ok(kept);
            }
            if current.as_ref().is_none_or(|c| !same_policy(c, &wanted)) {
                self.store
                    .apply_companion(target, Companion::NetworkPolicy, &policy_name, &wanted, rid)
                    .await?;
                kept.policy_created = current.is_none();
                kept.policy_replaced = current.is_some();
            }
        }
        Ok(kept)
    }

    /// One round of the keeper over every cluster it sees: what changed
    /// is logged, counted and audited (as krayne's own action); a cluster
    /// whose companions could not be applied is tried again next round.
    pub async fn keep_all_companions(&self, seen: &mut KeptClusters) -> Result<usize, Error> {
        let cx = crate::reaper::system_context();
        let rid = cx.meta.request_id.clone();
        // Every cluster this replica may see: with namespaced Roles, those
        // of the namespaces they cover.
        let clusters = self.store.list(None, &rid).await?;
        let live: HashSet<(String, String)> = clusters
            .iter()
            .map(|c| (c.metadata.namespace.to_string(), c.metadata.name.to_string()))
            .collect();
        seen.0.retain(|k, _| live.contains(k));
        let pace = Duration::from_secs(1) / WRITES_PER_SECOND;
        let mut changed = 0;
        for listed in clusters {
            if !made_by_krayne(&listed) {
                continue;
            }
            let key = (listed.metadata.namespace.to_string(), listed.metadata.name.to_string());
            let uid = listed.metadata.uid.as_deref().unwrap_or_default().to_owned();
            let fingerprint = self.fingerprint(&listed);
            if seen.0.get(&key).is_some_and(|(u, f)| *u == uid && *f == fingerprint) {
                continue;
            }
            // The list is minutes old by the end of a large round: a
            // cluster deleted (or made again) since is not acted on as it
            // was, which would own its policy to a uid that is gone.
            let Ok(cluster) = self.store.get(&ClusterRef::new(&*key.0, &*key.1), &rid).await else {
                continue;
            };
            if cluster.metadata.uid.as_deref() != Some(uid.as_str()) || cluster.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let started = Instant::now();
            let target = crate::authz::krayne_acts_on(&cluster, AuditAction::ClusterProtect);
            match self.keep_companions(&target, &cluster, true, &rid).await {
                Ok(kept) => {
                    seen.0.insert(key, (uid, fingerprint));
                    if kept.policy_created || kept.policy_replaced {
                        changed += 1;
                        self.record_kept(&cx, &cluster, kept).await;
                    }
                }
                Err(e) => {
                    metrics::counter!("krayne_network_policy_failures_total").increment(1);
                    tracing::warn!(namespace = %key.0, cluster = %key.1, error = %e, "a cluster's companions could not be applied; trying again next round");
                }
            }
            tokio::time::sleep(pace.saturating_sub(started.elapsed())).await;
        }
        Ok(changed)
    }

    /// A hash of what the keeper applies to `cluster`, to tell a change.
    fn fingerprint(&self, cluster: &ObservedCluster) -> u64 {
        use std::hash::{Hash as _, Hasher as _};
        let policy = self
            .settings
            .network_policy
            .as_ref()
            .map(|peers| manifest::network_policy(cluster, peers));
        let token = matches!(self.ray_auth_of(cluster), RayAuth::Token { .. });
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        json!({"policy": policy, "token": token}).to_string().hash(&mut hasher);
        hasher.finish()
    }

    async fn record_kept(&self, cx: &Context, cluster: &ObservedCluster, kept: Kept) {
        let (namespace, name) = (cluster.metadata.namespace.as_str(), cluster.metadata.name.as_str());
        let reason = if kept.policy_created { "missing" } else { "replaced" };
        metrics::counter!("krayne_network_policies_backfilled_total", "reason" => reason).increment(1);
        tracing::info!(%namespace, cluster = %name, reason, "a cluster's NetworkPolicy was applied by the keeper");
        let summary = json!({"network_policy": reason, "ray_token_secret": kept.secret_applied});
        let entry = self.entry(cx, AuditAction::ClusterProtect, Some(namespace), Some(name), summary);
        self.audit.record(&entry).await;
    }

    /// One round of the keeper as the background driver runs it, every
    /// `companions_every` (under the lifecycle reaper's election, when
    /// there is one, so replicas do not all make the same calls): logged
    /// and measured.
    pub(crate) async fn keep_companions_round(&self, seen: &mut KeptClusters) {
        match self.keep_all_companions(seen).await {
            Ok(changed) => {
                #[expect(clippy::cast_precision_loss, reason = "a gauge")]
                metrics::gauge!("krayne_companions_kept_clusters").set(seen.0.len() as f64);
                if changed > 0 {
                    tracing::info!(
                        changed,
                        "the companion keeper applied NetworkPolicies to clusters that lacked theirs"
                    );
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "the companion keeper could not list clusters; trying again next round")
            }
        }
    }
}

/// Whether krayne made `cluster` (its annotation says who asked): the
/// keeper leaves clusters of other tools (RayJobs, RayServices, kubectl)
/// as they are.
fn made_by_krayne(cluster: &ObservedCluster) -> bool {
    cluster
        .metadata
        .annotations
        .get(manifest::ANNOTATION_CREATED_BY)
        .is_some()
}

/// Whether a NetworkPolicy is krayne's (its label), so krayne may replace it.
fn managed_by_krayne(policy: &Value) -> bool {
    policy["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "krayne"
}

/// Whether the policy Kubernetes holds is the one krayne wants: the same
/// rules, owned by the same cluster.
fn same_policy(current: &Value, wanted: &Value) -> bool {
    let owner = |p: &Value| {
        p["metadata"]["ownerReferences"]
            .as_array()
            .map(|refs| refs.iter().map(|r| r["uid"].clone()).collect::<Vec<_>>())
            .unwrap_or_default()
    };
    current["spec"] == wanted["spec"] && owner(current) == owner(wanted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_is_the_same_only_with_the_same_rules_and_owner() {
        let wanted = json!({"metadata": {"ownerReferences": [{"uid": "u1"}]}, "spec": {"podSelector": {}}});
        let mut current = wanted.clone();
        current["metadata"]["resourceVersion"] = json!("9");
        assert!(same_policy(&current, &wanted));
        current["metadata"]["ownerReferences"][0]["uid"] = json!("u0");
        assert!(!same_policy(&current, &wanted), "an orphan of an older cluster");
        let mut widened = wanted.clone();
        widened["spec"]["ingress"] = json!([{}]);
        assert!(!same_policy(&widened, &wanted));
    }
}
