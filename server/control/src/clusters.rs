//! Create, get, list, describe, scale, delete.

use std::{collections::BTreeMap, sync::Arc};

use serde_json::{Value, json};

use super::{
    Context, ControlPlane,
    queue::{Admission, LinePlace},
};
use crate::domain::{audit::AuditAction, quota};
use crate::{
    domain::{
        Action, AdmissionGuard, Authorized, ClusterDetails, ClusterInfo, ClusterRef, ClusterSpec, Error,
        FieldValidation, FieldViolation, ObservedCluster, Page, PageRequest, RequestId, Site, Summary,
        check_dns1123_label,
        sites::{Placement, PlacementAsk, SiteFacts, SiteSpec, place},
    },
    manifest::{self, Provenance, ScaleInput, check_scale_input, plan_scale},
};

/// A create request: a Krayne config tree, and the namespace of the URL
/// (REST) if there is one.
#[derive(Debug, Clone)]
pub struct CreateInput {
    /// Krayne `ClusterConfig` as JSON.
    pub config: Value,
    /// Namespace from the path; the config may omit it or must agree.
    pub namespace: Option<String>,
    /// Check and return the manifest only.
    pub dry_run: bool,
    /// What to do with unknown nested keys and converted scalars.
    pub field_validation: FieldValidation,
    /// Wait in the namespace's line when it does not fit its quota
    /// (`None`: as the namespace's queueing policy says). The config may
    /// say it too, as a top-level `queue`.
    pub queue: Option<bool>,
}

/// What create returns.
#[derive(Debug, Clone)]
pub struct Created {
    /// The cluster (for a dry run, as it would be).
    pub cluster: ClusterInfo,
    /// The RayCluster manifest sent to Kubernetes.
    pub manifest: Value,
    /// Ignored keys and converted values of the config (mode `warn`).
    pub warnings: Vec<FieldViolation>,
    /// Where it was put and why, when the server fronts several sites.
    pub placement: Option<Placement>,
}

/// The team a create in `namespace` is labelled with: the caller's first
/// team there whose name a label can hold.
pub(super) fn creator_team(cx: &Context, namespace: &str) -> Option<String> {
    cx.principal
        .teams_for(namespace)
        .into_iter()
        .find(|t| check_dns1123_label(t).is_ok())
}

/// Borrowed views of shared objects, as the manifest rules take them.
pub(super) fn views<T>(shared: &[Arc<T>]) -> Vec<&T> {
    shared.iter().map(|s| &**s).collect()
}

impl ControlPlane {
    /// Creates a cluster (or, with `dry_run`, returns its checked manifest).
    pub async fn create(&self, cx: &Context, input: CreateInput) -> Result<Created, Error> {
        let mut config = input.config;
        let queue = match take_queue_flag(&mut config) {
            Ok(in_body) => input.queue.or(in_body),
            Err(e) => {
                self.record_refusal(cx, AuditAction::ClusterCreate, input.namespace.as_deref(), None, &e)
                    .await;
                return Err(e);
            }
        };
        let body_ns = config.get("namespace").and_then(Value::as_str).map(str::to_owned);
        let namespace = match (&input.namespace, body_ns) {
            (Some(url), Some(body)) if *url != body => {
                let e = Error::invalid(
                    "namespace",
                    format!("must match the namespace in the URL ({url:?}), or be left out"),
                );
                self.record_refusal(cx, AuditAction::ClusterCreate, Some(url), None, &e)
                    .await;
                return Err(e);
            }
            (Some(url), _) => {
                if let Some(map) = config.as_object_mut() {
                    map.insert("namespace".into(), json!(url));
                }
                url.clone()
            }
            (None, Some(body)) => body,
            (None, None) => crate::domain::defaults::NAMESPACE.to_owned(),
        };
        let name = config.get("name").and_then(Value::as_str).map(str::to_owned);
        let granted = self
            .authorize(cx, AuditAction::ClusterCreate, &namespace, name.as_deref())
            .await?;
        let (spec, warnings) = match ClusterSpec::read(&config, input.field_validation) {
            Ok(read) => (read.spec, read.warnings),
            Err(e) => {
                self.record_refusal(cx, AuditAction::ClusterCreate, Some(&namespace), name.as_deref(), &e)
                    .await;
                return Err(e);
            }
        };
        let team = creator_team(cx, &namespace);
        let token = self.ray_token_names(&namespace, &spec.name, input.dry_run);
        let who = Provenance {
            created_by: Some(&cx.principal.subject),
            team: team.as_deref(),
            ray_auth: token
                .as_ref()
                .map(|(nonce, secret)| manifest::RayAuthNames { nonce, secret }),
        };
        let rendered = manifest::render(&spec, &self.settings.manifest, &who);
        let waits = self.queue_policy(&namespace).waits(queue);
        let charge = quota::charge_of_manifest(rendered.manifest());
        let placement = match self.place(cx, &namespace, &spec, charge).await {
            Ok(placement) => placement,
            Err(e) => {
                self.record_refusal(cx, AuditAction::ClusterCreate, Some(&namespace), Some(&spec.name), &e)
                    .await;
                return Err(e);
            }
        };
        let target = granted.cluster_in(&spec.name, placement.as_ref().map(|p| p.site.clone()));
        let rid = &cx.meta.request_id;
        // Where the platform's Kueue admits, krayne's quota is
        // informational: Kueue's ClusterQueue holds.
        let kueue = self.kueue_queue(&namespace);
        // Held until the create has landed: the next admission counts it.
        let admitted = match kueue {
            Some(_) => Admission::Unlimited,
            None => {
                self.admit_or_queue(
                    cx,
                    AuditAction::ClusterCreate,
                    &namespace,
                    &spec.name,
                    waits,
                    async || {
                        let site = target.site().cloned().unwrap_or_default();
                        Ok((quota::Request::new_cluster(charge).at(Some(site)), ()))
                    },
                )
                .await?
            }
        };
        // Across sites a name is the fleet's: checked under the
        // namespace's admission lock (the quota's, or taken for this), so
        // two replicas creating it in two sites never both succeed.
        let fleet_lock = match (&placement, &admitted) {
            (Some(_), Admission::Unlimited) if !input.dry_run => Some(self.quota_lock.lock(&namespace).await?),
            _ => None,
        };
        if placement.is_some()
            && let Err(e) = self.name_free_in_fleet(&namespace, &spec.name, rid).await
        {
            self.record_refusal(cx, AuditAction::ClusterCreate, Some(&namespace), Some(&spec.name), &e)
                .await;
            return Err(e);
        }
        let fleet_hold = fleet_lock.as_ref().map(AdmissionGuard::hold);
        let hold = admitted.hold();
        let rendered = match admitted.place() {
            Some(place) => place.put(rendered, manifest::queued),
            None => rendered,
        };
        let place = admitted.place().map(LinePlace::summary);
        // Where the platform's Kueue admits, the cluster waits in its
        // LocalQueue: Kueue suspends it until its Workload is admitted.
        let rendered = match &kueue {
            Some(queue) => manifest::for_kueue(rendered, queue, &jiff::Timestamp::now().to_string()),
            None => rendered,
        };
        let observed = if input.dry_run {
            self.store.create(&target, &rendered, true, rid).await?
        } else {
            let summary = json!({
                "spec": spec.to_value(),
                "field_validation": input.field_validation.as_str(),
                "warnings": warnings.len(),
                "queue": place,
                "site": placement.as_ref().map(|p| p.site.name()),
                "placement": placement.as_ref().map(|p| &p.why),
            });
            let status = if place.is_some() || kueue.is_some() { 202 } else { 201 };
            self.audited_with_status(
                cx,
                AuditAction::ClusterCreate,
                &namespace,
                &spec.name,
                summary,
                |_| status,
                || async {
                    hold.check()?;
                    if let Some(fleet) = &fleet_hold {
                        fleet.check()?;
                    }
                    let staged = token.as_ref().map(|(nonce, secret)| (nonce.as_str(), secret.as_str()));
                    if let Some((nonce, secret)) = staged {
                        self.stage_ray_token(&target, nonce, secret, rid).await?;
                    }
                    let created = match self.store.create(&target, &rendered, false, rid).await {
                        Ok(created) => created,
                        Err(e) => {
                            // A timeout or a broken connection may have
                            // made the cluster after all: its Secret stays
                            // (the keeper owns it to the cluster, or it is
                            // the token of none).
                            let ambiguous = matches!(e, Error::DeadlineExceeded(_) | Error::Unavailable(_));
                            if let Some((_, secret)) = staged.filter(|_| !ambiguous) {
                                self.unstage_ray_token(&target, secret, rid).await;
                            }
                            return Err(e);
                        }
                    };
                    if let Err(e) = self.protect(&target, &created, rid).await {
                        if let Some((_, secret)) = staged {
                            self.unstage_ray_token(&target, secret, rid).await;
                        }
                        return Err(e);
                    }
                    Ok(created)
                },
            )
            .await?
        };
        drop(fleet_lock);
        Ok(Created {
            cluster: manifest::cluster_info(&observed, Some(&[])),
            manifest: rendered.into_manifest(),
            warnings,
            placement,
        })
    }

    /// Where a new cluster of `spec` in `namespace`, charged `charge`,
    /// goes, when the store spans several sites (`None`: one Kubernetes,
    /// where only `local` may be named). A site whose quota cap is full is
    /// passed over; when no cap has room, admission judges it at the first
    /// that takes it but for its cap.
    pub(super) async fn place(
        &self,
        cx: &Context,
        namespace: &str,
        spec: &ClusterSpec,
        charge: quota::Usage,
    ) -> Result<Option<Placement>, Error> {
        let sites = self.store.sites_for(namespace, &cx.meta.request_id).await;
        if sites.is_empty() {
            return match spec.site.as_deref() {
                None | Some(Site::LOCAL) => Ok(None),
                Some(other) => Err(Error::invalid(
                    "site",
                    format!("no site {other:?}: this server fronts one Kubernetes, site \"local\""),
                )),
            };
        }
        let mut gpu_types: Vec<String> = spec.worker_groups.iter().filter_map(|g| g.gpu_type.clone()).collect();
        gpu_types.sort();
        gpu_types.dedup();
        let ask = PlacementAsk {
            site: spec.site.clone(),
            gpu_types,
            allowed: cx.principal.sites_for(namespace),
            // A site asked for is admission's alone to judge.
            caps_full: match spec.site {
                Some(_) => BTreeMap::new(),
                None => self.caps_full(namespace, charge, &cx.meta.request_id).await?,
            },
        };
        let specs: Vec<SiteSpec> = sites.iter().map(|(s, _)| s.clone()).collect();
        let facts = |site: &Site| {
            sites.iter().find(|(s, _)| s.name == *site).map_or(
                SiteFacts {
                    up: false,
                    namespace_exists: false,
                },
                |(_, f)| *f,
            )
        };
        place(&specs, &ask, facts).map(Some)
    }

    /// Since when `site` has not answered (RFC 3339), if it has not: what
    /// is shown of its clusters is their last known state.
    pub(super) fn site_down_since(&self, site: &Site) -> Option<String> {
        self.sites_down_since().remove(site)
    }

    /// The sites that do not answer, each since when (RFC 3339).
    pub(super) fn sites_down_since(&self) -> BTreeMap<Site, String> {
        self.store
            .site_health()
            .into_iter()
            .filter_map(|(site, since)| Some((site, since?.to_string())))
            .collect()
    }

    /// Marks the summaries of clusters whose site does not answer (their
    /// last known state), each a copy of its own: the shared summaries stay
    /// as their sites last said.
    fn mark_unavailable_sites(&self, infos: &mut [Arc<Summary>]) {
        let down = self.sites_down_since();
        if down.is_empty() {
            return;
        }
        for summary in infos.iter_mut() {
            if let Some((_, since)) = down.iter().find(|(site, _)| site.name() == summary.info.site) {
                *summary = summary.site_unavailable(since);
            }
        }
    }

    /// Refuses a name some site already holds in `namespace` (call it
    /// holding the namespace's admission lock).
    async fn name_free_in_fleet(&self, namespace: &str, name: &str, rid: &RequestId) -> Result<(), Error> {
        let clusters = self.store.list_latest(namespace, rid).await?;
        match clusters.iter().find(|c| c.metadata.name.as_str() == name) {
            Some(held) => {
                tracing::info!(%namespace, cluster = %name, site = %held.site, "the name is another site's cluster");
                Err(Error::AlreadyExists {
                    kind: crate::domain::ResourceKind::Cluster,
                    name: name.to_owned(),
                })
            }
            None => Ok(()),
        }
    }

    /// The nonce and Secret of the Ray token of a cluster (or RayJob) to
    /// create under `name`, when clusters require one. A fresh nonce per
    /// create: one made again under the same name gets a new token.
    pub(super) fn ray_token_names(&self, namespace: &str, name: &str, dry_run: bool) -> Option<(String, String)> {
        self.settings.ray_auth.as_ref().map(|key| {
            let nonce = if dry_run {
                manifest::DRY_RUN_NONCE.to_owned()
            } else {
                uuid::Uuid::new_v4().simple().to_string()
            };
            let secret = manifest::ray_auth_secret_name(key, namespace, name, &nonce);
            (nonce, secret)
        })
    }

    /// Puts the cluster's companions beside it: its Ray token's Secret,
    /// now owned by it, and its NetworkPolicy (when the server makes them).
    /// Fail closed: a cluster whose policy cannot be made would run open
    /// to every pod, so it is deleted again and the create fails.
    async fn protect(
        &self,
        target: &Authorized<ClusterRef>,
        created: &ObservedCluster,
        rid: &RequestId,
    ) -> Result<(), Error> {
        let Err(why) = self.keep_companions(target, created, None, rid).await else {
            return Ok(());
        };
        let (namespace, name) = (created.metadata.namespace.as_str(), created.metadata.name.as_str());
        tracing::error!(request_id = %rid, %namespace, cluster = %name, error = %why, "a cluster's NetworkPolicy or Ray token could not be applied; deleting the cluster");
        metrics::counter!("krayne_network_policy_failures_total").increment(1);
        if let Err(e) = self.store.delete(target, None, rid).await {
            tracing::error!(request_id = %rid, %namespace, cluster = %name, error = %e, "the unprotected cluster could not be deleted");
        }
        Err(Error::Unavailable(format!(
            "cluster {name} was not kept: its NetworkPolicy or Ray token could not be applied ({why}), and without \
             them other pods could reach its head; try again shortly"
        )))
    }

    /// One cluster's summary.
    pub async fn get(&self, cx: &Context, cluster: &ClusterRef) -> Result<ClusterInfo, Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let target = self.authorize_cluster(cx, AuditAction::ClusterGet, cluster).await?;
        let rid = &cx.meta.request_id;
        let cluster = self
            .store
            .get(&target, rid)
            .await
            .map_err(|e| e.in_namespace(namespace))?;
        let pods = self.store.cluster_pods(&target, rid).await?;
        self.record_read(cx, AuditAction::ClusterGet, Some(namespace), Some(name))
            .await;
        let mut info = manifest::cluster_info(&cluster, Some(&views(&pods)));
        info.site_unavailable_since = self.site_down_since(&cluster.site);
        Ok(info)
    }

    /// Clusters of one namespace, or of every namespace the caller may see,
    /// ordered by namespace and name.
    pub async fn list(
        &self,
        cx: &Context,
        namespace: Option<&str>,
        page: &PageRequest,
    ) -> Result<Page<Arc<Summary>>, Error> {
        let rid = &cx.meta.request_id;
        let namespaces = match namespace {
            Some(ns) => {
                self.authorize(cx, AuditAction::ClusterList, ns, None).await?;
                vec![ns.to_owned()]
            }
            None => self.namespaces_where(cx, Action::Read).await?,
        };
        let after = page.after.as_deref().map(|k| k.split_once('/').unwrap_or((k, "")));
        let mut clusters = self.store.list_page(&namespaces, after, page.size + 1, rid).await?;
        let more = clusters.len() > page.size;
        clusters.truncate(page.size);
        let summaries = self.summaries();
        let mut infos = Vec::with_capacity(clusters.len());
        for same_ns in clusters.chunk_by(|a, b| a.metadata.namespace == b.metadata.namespace) {
            let Some(ns) = same_ns.first().map(|c| &c.metadata.namespace) else {
                continue;
            };
            let names: Vec<&str> = same_ns.iter().map(|c| c.metadata.name.as_str()).collect();
            let pods = self.store.pods_of(ns, &names, rid).await?;
            let page: Vec<_> = same_ns.iter().enumerate().map(|(i, c)| (&**c, pods.of(i))).collect();
            infos.extend(summaries.page(&page));
        }
        self.mark_unavailable_sites(&mut infos);
        self.record_read(cx, AuditAction::ClusterList, namespace, None).await;
        let next_page_token = more
            .then(|| {
                infos
                    .last()
                    .map(|i| PageRequest::token_for(&format!("{}/{}", i.info.namespace, i.info.name)))
            })
            .flatten();
        Ok(Page {
            items: infos,
            next_page_token,
        })
    }

    /// A cluster's full picture: shape, pods and recent events.
    pub async fn describe(&self, cx: &Context, cluster: &ClusterRef) -> Result<ClusterDetails, Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let target = self
            .authorize_cluster(cx, AuditAction::ClusterDescribe, cluster)
            .await?;
        let rid = &cx.meta.request_id;
        let cluster = self
            .store
            .get(&target, rid)
            .await
            .map_err(|e| e.in_namespace(namespace))?;
        let pods = self.store.cluster_pods(&target, rid).await?;
        let pod_names: Vec<&str> = pods.iter().map(|p| p.metadata.name.as_str()).collect();
        let events = self.store.cluster_events(&target, &pod_names, rid).await?;
        self.record_read(cx, AuditAction::ClusterDescribe, Some(namespace), Some(name))
            .await;
        let mut details = manifest::cluster_details(&cluster, &views(&pods), &views(&events), &self.settings.manifest);
        details.info.site_unavailable_since = self.site_down_since(&cluster.site);
        details.proxy_urls = manifest::declared_services(&cluster)
            .iter()
            .filter(|s| s.protocol == "http")
            .map(|s| (s.name.to_owned(), self.proxy_url(&target, s.name)))
            .collect();
        Ok(details)
    }

    /// Resizes one worker group. A cluster with autoscaling changes only
    /// the counts given; a fixed-size one pins min and max to replicas, as
    /// Krayne does. The result obeys create's rules. Under a quota, the
    /// plan admitted is the plan written (conditional on the version it
    /// was made from); a concurrent change is retried a bounded number of
    /// times, each retry planning (and, under a quota, admitting) again
    /// from the cluster as Kubernetes has it (the cache may not show the
    /// newer version yet).
    pub async fn scale(&self, cx: &Context, cluster: &ClusterRef, input: ScaleInput) -> Result<ClusterInfo, Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let target = self.authorize_cluster(cx, AuditAction::ClusterScale, cluster).await?;
        if let Err(e) = check_scale_input(&input) {
            self.record_refusal(cx, AuditAction::ClusterScale, Some(namespace), Some(name), &e)
                .await;
            return Err(e);
        }
        let summary = json!({"worker_group": input.worker_group, "replicas": input.replicas,
                             "min_replicas": input.min_replicas, "max_replicas": input.max_replicas});
        let rid = &cx.meta.request_id;
        let admitted = self
            .admit_charge(cx, AuditAction::ClusterScale, namespace, name, async || {
                let cluster = self
                    .store
                    .get_latest(&target, rid)
                    .await
                    .map_err(|e| e.in_namespace(namespace))?;
                let plan = plan_scale(&cluster, &input)?;
                Ok((plan.request(&cluster), (cluster, plan)))
            })
            .await?;
        let (admission, mut planned) = admitted.map_or((None, None), |(guard, planned)| (Some(guard), Some(planned)));
        let quota = admission.as_ref().and_then(|_| self.quota_of(namespace));
        let hold = admission.as_ref().map(AdmissionGuard::hold).unwrap_or_default();
        let updated = self
            .audited(cx, AuditAction::ClusterScale, namespace, name, summary, || async {
                let mut attempt = 0;
                loop {
                    attempt += 1;
                    let (cluster, plan) = match planned.take() {
                        Some(admitted) => admitted,
                        None => {
                            let cluster = if attempt == 1 {
                                self.store
                                    .get(&target, rid)
                                    .await
                                    .map_err(|e| e.in_namespace(namespace))?
                            } else {
                                self.store
                                    .get_latest(&target, rid)
                                    .await
                                    .map_err(|e| e.in_namespace(namespace))?
                            };
                            let plan = plan_scale(&cluster, &input)?;
                            if let Some(quota) = &quota {
                                self.fits(quota, namespace, &plan.request(&cluster), rid).await?;
                            }
                            (cluster, plan)
                        }
                    };
                    hold.check()?;
                    match self.store.patch(&target, &plan.patch(&cluster), rid).await {
                        Err(Error::Conflict(_)) if attempt < self.settings.conflict_retries => {
                            // Jittered, growing pauses (as client-go's
                            // RetryOnConflict): writers that collided do
                            // not collide again in lockstep.
                            let pause = fastrand::u64(5..=20) * attempt as u64;
                            tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
                        }
                        other => return other.map_err(|e| e.in_namespace(namespace)),
                    }
                }
            })
            .await?;
        let pods = self.store.cluster_pods(&target, rid).await?;
        Ok(manifest::cluster_info(&updated, Some(&views(&pods))))
    }

    /// Deletes a cluster; Kubernetes removes its pods.
    pub async fn delete(&self, cx: &Context, cluster: &ClusterRef) -> Result<(), Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let target = self.authorize_cluster(cx, AuditAction::ClusterDelete, cluster).await?;
        let rid = &cx.meta.request_id;
        let target = &target;
        self.audited(
            cx,
            AuditAction::ClusterDelete,
            namespace,
            name,
            Value::Null,
            || async move {
                self.store
                    .delete(target, None, rid)
                    .await
                    .map_err(|e| e.in_namespace(namespace))
            },
        )
        .await
    }
}

/// Takes a top-level `queue` out of a create's config (it says how to
/// admit, not what to make): a boolean, or absent.
pub(super) fn take_queue_flag(config: &mut Value) -> Result<Option<bool>, Error> {
    let Some(map) = config.as_object_mut() else {
        return Ok(None);
    };
    match map.remove("queue") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(b)),
        Some(other) => Err(Error::invalid("queue", format!("must be true or false, not {other}"))),
    }
}
