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

use serde_json::json;

use crate::{
    Context, ControlPlane,
    domain::{Atom, Authorized, ClusterRef, Companion, Error, ObservedCluster, RequestId, Uid, audit::AuditAction},
    manifest::{self, HeldPolicy, RayAuth},
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
/// that have not changed. Names are the cache's atoms and the uid its 16
/// bytes: the leader holds an entry for each of 20 000 clusters.
#[derive(Debug, Default)]
pub struct KeptClusters(HashMap<(Atom, Atom), (Option<Uid>, u64)>);

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

    /// After a RayJob's create: the Secret staged for it, now owned by
    /// the RayJob `created` (see [`manifest::rayjob_token_secret`]).
    pub(crate) async fn own_staged_token(
        &self,
        rayjob: &Authorized<ClusterRef>,
        created: &crate::domain::ObservedRayJob,
        nonce: &str,
        secret: &str,
        rid: &RequestId,
    ) -> Result<(), Error> {
        let (Some(key), Some(uid)) = (&self.settings.ray_auth, created.metadata.uid.as_ref()) else {
            return Ok(());
        };
        let (namespace, name) = (rayjob.namespace(), rayjob.name());
        let token = key.token(namespace, name, nonce);
        let object = manifest::rayjob_token_secret(namespace, name, secret, &token, &uid.text());
        self.store
            .apply_companion(rayjob, Companion::Secret, secret, &object, rid)
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
    /// makes them), as krayne applies them. With `held` (what the keeper
    /// listed of the namespace's policies) the policy is applied (and
    /// reported) only where it is missing or differs; a cluster just
    /// created has none to look at.
    pub(crate) async fn keep_companions(
        &self,
        target: &Authorized<ClusterRef>,
        cluster: &ObservedCluster,
        held: Option<&HashMap<String, HeldPolicy>>,
        rid: &RequestId,
    ) -> Result<Kept, Error> {
        let mut kept = Kept::default();
        let (namespace, name) = (cluster.metadata.namespace.as_str(), cluster.metadata.name.as_str());
        let uid = cluster.metadata.uid.as_ref().map(Uid::text);
        let uid = uid.as_deref();
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
            let current = held.and_then(|h| h.get(&policy_name));
            if let Some(theirs) = current.filter(|c| !c.managed_by_krayne()) {
                let owner = theirs.managed_by.as_deref().unwrap_or_default();
                tracing::warn!(%namespace, cluster = %name, policy = %policy_name, %owner,
                    "a NetworkPolicy of krayne's name that krayne did not make is left alone");
                return Ok(kept);
            }
            if current.is_none_or(|c| c.digest != manifest::policy_digest(&wanted)) {
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
        let live: HashSet<(&Atom, &Atom)> = clusters
            .iter()
            .map(|c| (&c.metadata.namespace, &c.metadata.name))
            .collect();
        seen.0.retain(|(ns, name), _| live.contains(&(ns, name)));
        drop(live);
        let pace = Duration::from_secs(1) / WRITES_PER_SECOND;
        let mut changed = 0;
        let mut policies = NamespacePolicies::default();
        for listed in clusters {
            if !made_by_krayne(&listed) {
                continue;
            }
            let key = (listed.metadata.namespace.clone(), listed.metadata.name.clone());
            let uid = listed.metadata.uid.clone();
            let fingerprint = self.fingerprint(&listed);
            if seen.0.get(&key).is_some_and(|(u, f)| *u == uid && *f == fingerprint) {
                continue;
            }
            // The list is minutes old by the end of a large round: a
            // cluster deleted (or made again) since is not acted on as it
            // was, which would own its policy to a uid that is gone.
            let Ok(cluster) = self
                .store
                .get(&ClusterRef::new(key.0.as_str(), key.1.as_str()), &rid)
                .await
            else {
                continue;
            };
            if uid.is_none() || cluster.metadata.uid != uid || cluster.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let started = Instant::now();
            let held = match policies.of(self, &key.0, &rid).await {
                Ok(held) => held,
                Err(e) => {
                    metrics::counter!("krayne_network_policy_failures_total").increment(1);
                    tracing::warn!(namespace = %key.0, error = %e, "a namespace's NetworkPolicies could not be listed; trying again next round");
                    continue;
                }
            };
            let target = crate::authz::krayne_acts_on(&cluster, AuditAction::ClusterProtect);
            match self.keep_companions(&target, &cluster, held, &rid).await {
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

    pub(crate) async fn record_kept(&self, cx: &Context, cluster: &ObservedCluster, kept: Kept) {
        let (namespace, name) = (cluster.metadata.namespace.as_str(), cluster.metadata.name.as_str());
        let reason = if kept.policy_created { "missing" } else { "replaced" };
        metrics::counter!("krayne_network_policies_backfilled_total", "reason" => reason).increment(1);
        tracing::info!(%namespace, cluster = %name, reason, "a cluster's NetworkPolicy was applied by the keeper");
        let summary = json!({"network_policy": reason, "ray_token_secret": kept.secret_applied});
        let entry = self.done_entry(cx, AuditAction::ClusterProtect, Some(namespace), Some(name), summary);
        self.audit.record(&entry).await;
    }

    /// One round of the keeper as the background driver runs it, every
    /// `companions_every` (under the lifecycle reaper's election, when
    /// there is one, so replicas do not all make the same calls): logged
    /// and measured.
    pub(crate) async fn keep_companions_round(&self, seen: &mut KeptClusters) {
        self.cache_listed_within(self.settings.companions_every).await;
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

impl ControlPlane {
    /// Waits, at most `bound`, until the watch cache (when there is one)
    /// has listed everything once: a leader's first round then reads the
    /// cache instead of listing every cluster from Kubernetes beside the
    /// cache's own first lists (at 20 000 clusters, 16 MiB more at the
    /// replica's peak). A cache not listed by then is read through, as
    /// before it had listed.
    pub(crate) async fn cache_listed_within(&self, bound: Duration) {
        let Some(feed) = self.store.feed() else {
            return;
        };
        let started = Instant::now();
        while !feed.ready() && started.elapsed() < bound {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// Whether krayne made `cluster` (its annotation says who asked, copied
/// from the RayJob to a cluster KubeRay made for krayne's RayJob): the
/// keeper leaves clusters of other tools (their RayJobs, RayServices,
/// kubectl) as they are.
fn made_by_krayne(cluster: &ObservedCluster) -> bool {
    cluster
        .metadata
        .annotations
        .get(manifest::ANNOTATION_CREATED_BY)
        .is_some()
}

/// The NetworkPolicies of the namespace the keeper is in, listed once
/// (a list a namespace, not a GET a cluster: 20 000 clusters asked 20 000
/// GETs of a starting leader) and again when the list is older than
/// [`POLICIES_FRESH_FOR`], since a round over a large namespace takes
/// minutes. A list that failed is not asked again for the namespace's
/// other clusters until then.
#[derive(Default)]
struct NamespacePolicies {
    /// The namespace, when it was listed, and what the list gave.
    listed: Option<(String, Instant, Listed)>,
}

/// One namespace's policies by name, or why they could not be listed.
type Listed = Result<HashMap<String, HeldPolicy>, Error>;

/// How long a namespace's listed policies stand for what it holds.
const POLICIES_FRESH_FOR: Duration = Duration::from_secs(30);

impl NamespacePolicies {
    /// `namespace`'s policies, when the server makes policies.
    async fn of(
        &mut self,
        plane: &ControlPlane,
        namespace: &str,
        rid: &RequestId,
    ) -> Result<Option<&HashMap<String, HeldPolicy>>, Error> {
        if plane.settings.network_policy.is_none() {
            return Ok(None);
        }
        let fresh = self
            .listed
            .as_ref()
            .is_some_and(|(ns, at, _)| ns == namespace && at.elapsed() < POLICIES_FRESH_FOR);
        if !fresh {
            let held = plane.store.network_policies(namespace, rid).await;
            self.listed = Some((namespace.to_owned(), Instant::now(), held));
        }
        match self.listed.as_ref().map(|(_, _, held)| held) {
            Some(Ok(held)) => Ok(Some(held)),
            Some(Err(e)) => Err(e.clone()),
            None => Ok(None),
        }
    }
}
