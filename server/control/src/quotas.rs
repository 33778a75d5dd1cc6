//! Team quotas, enforced at create (dry runs too) and scale: a cluster is
//! charged its upper bound; a namespace's usage is every RayCluster in it
//! as Kubernetes has it now (clusters made with kubectl count). Admission
//! holds the namespace's lock (across replicas: see `krayne-store`'s
//! `SqlAdmissionLock`) from the count until the create or patch has
//! landed, so two replicas cannot both pass a limit only one fits; a lock
//! that cannot be had is `unavailable` (fail closed). Scale-downs always
//! pass; a lowered quota touches no cluster but refuses growth.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex},
};

use serde_json::json;

use super::{
    Context, ControlPlane,
    queue::{Admission, LinePlace, line_of},
    rayjobs::rayjobs_not_yet_made,
};
use crate::domain::{
    AdmissionGuard, AdmissionLock, Error, ObservedCluster, ObservedRayJob, RequestId, Site,
    audit::AuditAction,
    queue::{self, QueueOrder},
    quota::{self, Held, Quota, QuotaLine, Usage},
    sites::CapFull,
};

/// Admission serialized within this process (one server, or tests).
#[derive(Default)]
pub(super) struct LocalAdmissionLock(Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>);

#[async_trait::async_trait]
impl AdmissionLock for LocalAdmissionLock {
    async fn lock(&self, namespace: &str) -> Result<AdmissionGuard, Error> {
        let lock = self
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(namespace.to_owned())
            .or_default()
            .clone();
        Ok(AdmissionGuard::new(lock.lock_owned().await))
    }
}

/// What a namespace holds, as Kubernetes has it now (read under its
/// admission lock).
pub(super) struct Standing {
    /// Its clusters.
    pub(super) clusters: Vec<Arc<ObservedCluster>>,
    /// Its RayJobs.
    pub(super) rayjobs: Vec<ObservedRayJob>,
    /// What they are charged, in all and at each site.
    pub(super) used: Held,
}

/// A namespace's quota as it stands.
#[derive(Debug, Clone)]
pub struct NamespaceQuota {
    /// The namespace.
    pub namespace: String,
    /// Each resource: limit, used, remaining (no quota: every line
    /// unlimited).
    pub lines: Vec<QuotaLine>,
    /// The Kueue LocalQueue that admits its clusters, when the platform's
    /// Kueue does: `lines` are then informational (docs/kueue.md).
    pub kueue_local_queue: Option<String>,
}

impl ControlPlane {
    /// The quota the team mapping gives `namespace`, if any.
    pub(super) fn quota_of(&self, namespace: &str) -> Option<Quota> {
        self.authenticator.as_ref()?.quota(namespace)
    }

    /// `namespace`'s clusters and RayJobs as Kubernetes has them now, and
    /// what they are charged (its RayJobs' clusters not made yet too).
    pub(super) async fn standing_now(&self, namespace: &str, request_id: &RequestId) -> Result<Standing, Error> {
        let clusters = self.store.list_latest(namespace, request_id).await?;
        let rayjobs = self.rayjobs_now(namespace, request_id).await?;
        let used = held(&clusters, &rayjobs);
        Ok(Standing {
            clusters,
            rayjobs,
            used,
        })
    }

    /// What `namespace`'s clusters are charged, from the watch cache, with
    /// its RayJobs' clusters not made yet.
    pub(super) async fn usage_cached(&self, namespace: &str, request_id: &RequestId) -> Result<Held, Error> {
        let clusters = self.store.list(Some(namespace), request_id).await?;
        let rayjobs = self.rayjobs_now(namespace, request_id).await?;
        Ok(held(&clusters, &rayjobs))
    }

    /// Admits what `requested` computes into `namespace` under its quota:
    /// `None` when it has none; else the held admission, to keep until the
    /// change has landed, and what `requested` computed beside the charge
    /// (the write carries out exactly what was charged). Refusals are
    /// audited with their violations.
    pub(super) async fn admit_charge<T>(
        &self,
        cx: &Context,
        action: AuditAction,
        namespace: &str,
        name: &str,
        requested: impl AsyncFnOnce() -> Result<(quota::Request, T), Error>,
    ) -> Result<Option<(AdmissionGuard, T)>, Error> {
        match self
            .admit_or_queue(cx, action, namespace, name, false, requested)
            .await?
        {
            Admission::Unlimited => Ok(None),
            Admission::Fits(guard, computed) => Ok(Some((guard, computed))),
            Admission::Waits(..) => Err(Error::Internal("a request that may not wait was put in line".into())),
        }
    }

    /// As [`Self::admit_charge`], but a request that `waits` and does not
    /// fit (or, in a line served in strict order, would pass those already
    /// waiting) is given its place in the namespace's line instead of
    /// being refused.
    pub(super) async fn admit_or_queue<T>(
        &self,
        cx: &Context,
        action: AuditAction,
        namespace: &str,
        name: &str,
        waits: bool,
        requested: impl AsyncFnOnce() -> Result<(quota::Request, T), Error>,
    ) -> Result<Admission<T>, Error> {
        let Some(quota) = self.quota_of(namespace) else {
            return Ok(Admission::Unlimited);
        };
        let admitted = async {
            let guard = self.quota_lock.lock(namespace).await?;
            let (requested, computed) = requested().await?;
            let Standing {
                clusters,
                rayjobs,
                used,
            } = self.standing_now(namespace, &cx.meta.request_id).await?;
            let violations = quota::check(&quota, &used, &requested);
            let refused = |violations| Error::QuotaExceeded {
                namespace: namespace.to_owned(),
                violations,
            };
            // Nothing to admit (a resume of a running cluster) never waits.
            if violations.is_empty() && (!waits || requested.growth == Usage::default()) {
                return Ok(Admission::Fits(guard, computed));
            }
            if !waits {
                return Err(refused(violations));
            }
            // One the quota could never hold waits for nothing.
            let never = quota::check(&quota, &Held::default(), &requested);
            if !never.is_empty() {
                return Err(refused(never));
            }
            // A RayJob has a name of its own in line (its cluster is not made).
            let asking = match action {
                AuditAction::RayJobCreate => queue::rayjob_in_line(name),
                _ => name.to_owned(),
            };
            let line = line_of(&clusters, &rayjobs, &asking);
            if line.len() >= queue::MAX_LINE && !violations.is_empty() {
                return Err(refused(violations));
            }
            let strict = self.queue_policy(namespace).order == QueueOrder::Strict;
            let ahead = line.first().filter(|_| strict).map(|w| w.name.clone());
            let reason = match (quota::shortage(&quota, &used, &requested), ahead) {
                (None, None) => return Ok(Admission::Fits(guard, computed)),
                (Some(short), _) => short,
                (None, Some(first)) => format!("waits for {first}, ahead of it in line (order: strict)"),
            };
            let place = LinePlace {
                since: queue::joined_at(jiff::Timestamp::now(), &line),
                position: u32::try_from(line.len() + 1).unwrap_or(u32::MAX),
                reason,
            };
            Ok(Admission::Waits(guard, computed, place))
        };
        match admitted.await {
            Ok(admitted) => Ok(admitted),
            Err(e) => {
                let summary = match &e {
                    Error::QuotaExceeded { violations, .. } => json!({"quota_violations": violations}),
                    _ => serde_json::Value::Null,
                };
                metrics::counter!("krayne_quota_refusals_total").increment(1);
                self.record_refusal_with(cx, action, Some(namespace), Some(name), &e, summary)
                    .await;
                Err(e)
            }
        }
    }

    /// Whether `requested` fits `namespace`'s `quota` beside what its
    /// clusters are charged now (call it holding the admission).
    pub(super) async fn fits(
        &self,
        quota: &Quota,
        namespace: &str,
        requested: &quota::Request,
        request_id: &RequestId,
    ) -> Result<(), Error> {
        let used = self.standing_now(namespace, request_id).await?.used;
        let violations = quota::check(quota, &used, requested);
        if violations.is_empty() {
            Ok(())
        } else {
            Err(Error::QuotaExceeded {
                namespace: namespace.to_owned(),
                violations,
            })
        }
    }

    /// The sites whose cap of `namespace`'s quota cannot take a cluster
    /// charged `charge` now (from the watch cache; admission checks again
    /// under the lock), each with why. Where Kueue admits, none.
    pub(super) async fn caps_full(
        &self,
        namespace: &str,
        charge: Usage,
        request_id: &RequestId,
    ) -> Result<BTreeMap<String, CapFull>, Error> {
        let Some(quota) = self.quota_of(namespace).filter(|q| !q.sites.is_empty()) else {
            return Ok(BTreeMap::new());
        };
        if self.kueue_queue(namespace).is_some() {
            return Ok(BTreeMap::new());
        }
        let used = self.usage_cached(namespace, request_id).await?;
        let asked = quota::Request::new_cluster(charge);
        Ok(quota
            .sites
            .iter()
            .filter_map(|(site, cap)| {
                let here = Held {
                    total: used.at(&Site::new(site)),
                    ..Held::default()
                };
                let why = quota::shortage(cap, &here, &asked)?;
                let never = quota::shortage(cap, &Held::default(), &asked);
                let full = match never {
                    Some(why) => CapFull { why, never: true },
                    None => CapFull { why, never: false },
                };
                Some((site.clone(), full))
            })
            .collect())
    }

    /// `namespace`'s quota: limits, what its clusters are charged (from
    /// the watch cache) and what remains (viewer).
    pub async fn quota(&self, cx: &Context, namespace: &str) -> Result<NamespaceQuota, Error> {
        self.authorize(cx, AuditAction::QuotaGet, namespace, None).await?;
        let used = self.usage_cached(namespace, &cx.meta.request_id).await?;
        let limits = self.quota_of(namespace);
        if let Some(limits) = &limits {
            set_gauges(namespace, limits, &used);
        }
        let lines = quota::standing(&limits.unwrap_or_default(), &used);
        Ok(NamespaceQuota {
            kueue_local_queue: self.kueue_queue(namespace),
            namespace: namespace.to_owned(),
            lines,
        })
    }
}

impl ControlPlane {
    /// Sets `krayne_quota_used` and `krayne_quota_limit` (per namespace
    /// and resource) for every namespace with a quota, from the watch
    /// cache (a background task's round).
    pub(crate) async fn quota_gauges(&self) {
        let rid = RequestId::from("quota-gauges");
        let Ok(namespaces) = self.store.namespaces(&rid).await else {
            return;
        };
        for namespace in namespaces {
            let Some(quota) = self.quota_of(&namespace) else {
                continue;
            };
            let Ok(used) = self.usage_cached(&namespace, &rid).await else {
                continue;
            };
            set_gauges(&namespace, &quota, &used);
        }
    }
}

/// What `clusters` and the clusters of `rayjobs` not made yet are
/// charged, in all and at each site.
fn held(clusters: &[Arc<ObservedCluster>], rayjobs: &[ObservedRayJob]) -> Held {
    let made = clusters.iter().map(|c| (c.site.clone(), quota::charge(c)));
    Held::of(made.chain(rayjobs_not_yet_made(rayjobs, clusters)))
}

/// `krayne_quota_used` and `krayne_quota_limit` of `namespace`: its
/// totals, and each site's cap (labelled `site`, the resources it caps).
fn set_gauges(namespace: &str, quota: &Quota, used: &Held) {
    let caps = quota
        .sites
        .iter()
        .map(|(site, cap)| (Some(site.as_str()), cap, used.at(&Site::new(site))));
    for (site, limits, used) in std::iter::once((None, quota, used.total)).chain(caps) {
        let limits = quota::limits(limits);
        for ((resource, value), limit) in quota::QuotaResource::ALL.iter().zip(used.amounts()).zip(limits) {
            let mut labels = vec![
                ("namespace", namespace.to_owned()),
                ("resource", resource.as_str().to_owned()),
            ];
            if let Some(site) = site {
                if limit.is_none() {
                    continue;
                }
                labels.push(("site", site.to_owned()));
            }
            metrics::gauge!("krayne_quota_used", &labels).set(value);
            if let Some(limit) = limit {
                metrics::gauge!("krayne_quota_limit", &labels).set(limit);
            }
        }
    }
}
