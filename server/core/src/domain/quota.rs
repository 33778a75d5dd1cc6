//! Team quotas: what a namespace may hold (clusters, CPUs, memory, GPUs),
//! what a cluster is charged (its upper bound: the head plus every worker
//! group at `max_replicas` when autoscaling, else at `replicas`), and the
//! check a create or scale must pass. Pure.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{ObservedCluster, Quantity, Site};

/// The GPU resource name Krayne's manifests request.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

const NANOS: u128 = 1_000_000_000;

/// A namespace's limits; an absent one is unlimited.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quota {
    /// RayClusters.
    #[serde(default)]
    pub clusters: Option<u64>,
    /// CPUs (a quantity: `64`, `1500m`).
    #[serde(default, deserialize_with = "quantity")]
    pub cpus: Option<Quantity>,
    /// Memory (a quantity: `256Gi`).
    #[serde(default, deserialize_with = "quantity")]
    pub memory: Option<Quantity>,
    /// GPUs (a quantity: `8`).
    #[serde(default, deserialize_with = "quantity")]
    pub gpus: Option<Quantity>,
    /// Caps at single sites (docs/sites.md), each under the namespace's
    /// total across the fleet: site name → limits (no `sites` of their
    /// own).
    #[serde(default)]
    pub sites: BTreeMap<String, Quota>,
}

impl Quota {
    /// Checks what serde cannot: a site's cap has no caps of its own.
    pub fn check(&self) -> Result<(), String> {
        match self.sites.iter().find(|(_, cap)| !cap.sites.is_empty()) {
            Some((site, _)) => Err(format!("sites.{site}: a site's cap has no sites of its own")),
            None => Ok(()),
        }
    }
}

fn quantity<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Quantity>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Text(String),
        Int(u64),
        Float(f64),
    }
    let text = match Option::<Raw>::deserialize(d)? {
        None => return Ok(None),
        Some(Raw::Text(t)) => t,
        Some(Raw::Int(n)) => n.to_string(),
        Some(Raw::Float(f)) => f.to_string(),
    };
    text.parse()
        .map(Some)
        .map_err(|e| serde::de::Error::custom(format!("{text:?} {e}")))
}

/// What a namespace's clusters are charged: in all across the fleet, and
/// at each site (for the sites' caps).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Held {
    /// Across the fleet.
    pub total: Usage,
    /// At each site that holds any.
    pub by_site: BTreeMap<Site, Usage>,
}

impl Held {
    /// What `charges` (each at its site) add up to.
    pub fn of(charges: impl IntoIterator<Item = (Site, Usage)>) -> Self {
        let mut held = Self::default();
        for (site, usage) in charges {
            held.add(Some(&site), usage);
        }
        held
    }

    /// `usage` more, at `site` when it is known.
    pub fn add(&mut self, site: Option<&Site>, usage: Usage) {
        self.total = self.total + usage;
        if let Some(site) = site {
            let at = self.by_site.entry(site.clone()).or_default();
            *at = *at + usage;
        }
    }

    /// What is held at `site`.
    pub fn at(&self, site: &Site) -> Usage {
        self.by_site.get(site).copied().unwrap_or_default()
    }
}

/// What clusters hold, or may come to hold: exact, in nano-units (memory
/// in nano-bytes) so that `1500m` and `1.5` agree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// RayClusters.
    pub clusters: u64,
    /// CPUs, in nano-CPUs.
    pub cpu_nanos: u128,
    /// Memory, in nano-bytes.
    pub memory_nanos: u128,
    /// GPUs, in nano-GPUs.
    pub gpu_nanos: u128,
}

impl std::ops::Add for Usage {
    type Output = Self;

    fn add(self, o: Self) -> Self {
        Self {
            clusters: self.clusters + o.clusters,
            cpu_nanos: self.cpu_nanos + o.cpu_nanos,
            memory_nanos: self.memory_nanos + o.memory_nanos,
            gpu_nanos: self.gpu_nanos + o.gpu_nanos,
        }
    }
}

impl std::iter::Sum for Usage {
    fn sum<I: Iterator<Item = Self>>(iter: I) -> Self {
        iter.fold(Self::default(), |a, b| a + b)
    }
}

impl Usage {
    /// Clusters, CPUs, bytes of memory and GPUs, as numbers (for gauges).
    #[expect(clippy::cast_precision_loss, reason = "gauges are approximate")]
    pub fn amounts(&self) -> [f64; 4] {
        let units = |nanos: u128| nanos as f64 / NANOS as f64;
        [
            self.clusters as f64,
            units(self.cpu_nanos),
            units(self.memory_nanos),
            units(self.gpu_nanos),
        ]
    }

    /// `self` without `o` (never below zero).
    pub fn minus(self, o: Self) -> Self {
        Self {
            clusters: self.clusters.saturating_sub(o.clusters),
            cpu_nanos: self.cpu_nanos.saturating_sub(o.cpu_nanos),
            memory_nanos: self.memory_nanos.saturating_sub(o.memory_nanos),
            gpu_nanos: self.gpu_nanos.saturating_sub(o.gpu_nanos),
        }
    }
}

/// A container's amount of `resource`: its request, else its limit.
fn amount(resources: &super::observed::Resources, resource: &str) -> u128 {
    let value = resources
        .requests
        .get(resource)
        .or_else(|| resources.limits.get(resource));
    value.and_then(|v| v.parse::<Quantity>().ok()).map_or(0, |q| q.nanos())
}

fn pod_usage(template: &super::observed::PodTemplate, pods: u128) -> Usage {
    let (mut cpu, mut memory, mut gpu) = (0, 0, 0);
    for c in &template.spec.containers {
        cpu += amount(&c.resources, "cpu");
        memory += amount(&c.resources, "memory");
        gpu += amount(&c.resources, GPU_RESOURCE);
    }
    Usage {
        clusters: 0,
        cpu_nanos: cpu * pods,
        memory_nanos: memory * pods,
        gpu_nanos: gpu * pods,
    }
}

/// A cluster's charge: the most it may come to hold. The head, plus each
/// worker group's pods × `max_replicas` when autoscaling is on, ×
/// `replicas` when it is off. A suspended cluster holds no pods: it counts
/// only toward `clusters`.
pub fn charge(cluster: &ObservedCluster) -> Usage {
    if cluster.queued_since().is_some() {
        // Waiting in line (docs/quotas.md): it holds nothing yet.
        return Usage::default();
    }
    if cluster.spec.suspend == Some(true) {
        return Usage {
            clusters: 1,
            ..Usage::default()
        };
    }
    running_charge(cluster)
}

/// What resuming `cluster` adds to its namespace's usage: its pods' charge
/// if it is suspended (its `clusters` count it already), else nothing.
pub fn resume_growth(cluster: &ObservedCluster) -> Usage {
    if cluster.spec.suspend == Some(true) {
        Usage {
            clusters: 0,
            ..running_charge(cluster)
        }
    } else {
        Usage::default()
    }
}

fn running_charge(cluster: &ObservedCluster) -> Usage {
    let autoscaling = cluster.spec.enable_in_tree_autoscaling.unwrap_or(false);
    let head = pod_usage(&cluster.spec.head_group_spec.template, 1);
    let workers: Usage = cluster
        .spec
        .worker_group_specs
        .iter()
        .map(|g| {
            let count = if autoscaling {
                g.max_replicas.or(g.replicas)
            } else {
                g.replicas
            };
            pod_usage(&g.template, u128::try_from(count.unwrap_or(0).max(0)).unwrap_or(0))
        })
        .sum();
    Usage {
        clusters: 1,
        ..head + workers
    }
}

/// The charge of a cluster about to be created, from its manifest.
pub fn charge_of_manifest(manifest: &serde_json::Value) -> Usage {
    serde_json::from_value::<ObservedCluster>(manifest.clone()).map_or(
        Usage {
            clusters: 1,
            ..Usage::default()
        },
        |c| charge(&c),
    )
}

/// A resource a quota limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum QuotaResource {
    /// RayClusters.
    Clusters,
    /// CPUs.
    Cpus,
    /// Memory.
    Memory,
    /// GPUs.
    Gpus,
}

impl QuotaResource {
    /// Every resource, in the order answers list them.
    pub const ALL: [Self; 4] = [Self::Clusters, Self::Cpus, Self::Memory, Self::Gpus];

    /// `clusters`, `cpus`, `memory`, `gpus`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Clusters => "clusters",
            Self::Cpus => "cpus",
            Self::Memory => "memory",
            Self::Gpus => "gpus",
        }
    }

    fn of(self, u: &Usage) -> u128 {
        match self {
            Self::Clusters => u128::from(u.clusters) * NANOS,
            Self::Cpus => u.cpu_nanos,
            Self::Memory => u.memory_nanos,
            Self::Gpus => u.gpu_nanos,
        }
    }

    fn limit(self, q: &Quota) -> Option<u128> {
        match self {
            Self::Clusters => q.clusters.map(|n| u128::from(n) * NANOS),
            Self::Cpus => q.cpus.as_ref().map(Quantity::nanos),
            Self::Memory => q.memory.as_ref().map(Quantity::nanos),
            Self::Gpus => q.gpus.as_ref().map(Quantity::nanos),
        }
    }
}

/// A quota's limits as numbers, in [`QuotaResource::ALL`]'s order (bytes
/// for memory; none: unlimited), for gauges.
#[expect(clippy::cast_precision_loss, reason = "gauges are approximate")]
pub fn limits(quota: &Quota) -> [Option<f64>; 4] {
    QuotaResource::ALL.map(|r| r.limit(quota).map(|nanos| nanos as f64 / NANOS as f64))
}

/// An amount as people read it: `3`, `1.5`, memory in bytes as a
/// quantity (`4Gi` when whole gibibytes, else bytes).
pub fn display(resource: QuotaResource, nanos: u128) -> String {
    let whole = nanos / NANOS;
    let frac = nanos % NANOS;
    if resource == QuotaResource::Memory && frac == 0 {
        const GI: u128 = 1024 * 1024 * 1024;
        const MI: u128 = 1024 * 1024;
        if whole > 0 && whole.is_multiple_of(GI) {
            return format!("{}Gi", whole / GI);
        }
        if whole > 0 && whole.is_multiple_of(MI) {
            return format!("{}Mi", whole / MI);
        }
    }
    super::quantity::decimal(nanos)
}

/// One limit a request would pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct QuotaViolation {
    /// `clusters`, `cpus`, `memory` or `gpus`.
    pub resource: QuotaResource,
    /// The site whose cap it would pass; absent: the namespace's total
    /// across the fleet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
    /// What the request adds.
    pub requested: String,
    /// What the namespace's clusters are charged now.
    pub in_use: String,
    /// The limit.
    pub limit: String,
    /// What the cluster would hold after the change (a scale from 3 to
    /// 10 workers of one GPU: 10, where `requested` is 7).
    pub cluster_would_hold: String,
    /// What the namespace would hold after it (`in_use` + `requested`).
    pub namespace_would_hold: String,
}

/// What a change asks of a namespace's quota: what it adds, and what its
/// cluster holds after it (for the message, which says both), and where.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    /// What the namespace's charge grows by.
    pub growth: Usage,
    /// The cluster's whole charge after the change.
    pub cluster_after: Usage,
    /// The cluster's site, when the store spans several (its cap there
    /// holds too).
    pub site: Option<Site>,
}

impl Request {
    /// A new cluster: it adds all it holds.
    pub fn new_cluster(charge: Usage) -> Self {
        Self {
            growth: charge,
            cluster_after: charge,
            site: None,
        }
    }

    /// Resuming `cluster`: it adds its running charge (not its count).
    pub fn resume(cluster: &ObservedCluster) -> Self {
        let cluster_after = Usage {
            clusters: 1,
            ..running_charge(cluster)
        };
        Self {
            growth: resume_growth(cluster),
            cluster_after,
            site: Some(cluster.site.clone()),
        }
    }

    /// Admitting a cluster waiting in line: it adds all it would hold
    /// running, its count too (waiting, it held nothing).
    pub fn admit(cluster: &ObservedCluster) -> Self {
        Self::new_cluster(running_charge(cluster)).at(Some(cluster.site.clone()))
    }

    /// The same request, for a cluster at `site`.
    #[must_use]
    pub fn at(self, site: Option<Site>) -> Self {
        Self { site, ..self }
    }

    /// The limits it answers to: the namespace's total (against all it
    /// holds), then its site's cap (against what it holds there).
    fn bounds<'q>(&self, quota: &'q Quota, used: &Held) -> Vec<(Option<&'q str>, &'q Quota, Usage)> {
        let mut bounds = vec![(None, quota, used.total)];
        if let Some(site) = &self.site
            && let Some((name, cap)) = quota.sites.get_key_value(site.name())
        {
            bounds.push((Some(name.as_str()), cap, used.at(site)));
        }
        bounds
    }
}

/// One limit `requested` would pass: where (a site's cap, or the total),
/// which, what it asks, what is held and the limit (in nano-units).
struct Over<'q> {
    site: Option<&'q str>,
    resource: QuotaResource,
    asked: u128,
    now: u128,
    limit: u128,
}

/// The limits of `quota` (its total, and its cap at the request's site)
/// that `used` plus `requested` would pass. Only growth is judged.
fn overs<'q>(quota: &'q Quota, used: &Held, requested: &Request) -> Vec<Over<'q>> {
    requested
        .bounds(quota, used)
        .into_iter()
        .flat_map(|(site, limits, used)| {
            QuotaResource::ALL.iter().filter_map(move |&resource| {
                let limit = resource.limit(limits)?;
                let (asked, now) = (resource.of(&requested.growth), resource.of(&used));
                (asked > 0 && now + asked > limit).then_some(Over {
                    site,
                    resource,
                    asked,
                    now,
                    limit,
                })
            })
        })
        .collect()
}

/// What `requested` lacks under `quota` beside `used`, as people read it
/// (`gpus: needs 4, 0 of 8 free`; several joined by `; `): `None` when it
/// fits.
pub fn shortage(quota: &Quota, used: &Held, requested: &Request) -> Option<String> {
    let short: Vec<String> = overs(quota, used, requested)
        .into_iter()
        .map(|o| {
            let r = o.resource;
            format!(
                "{}{}: needs {}, {} of {} free",
                r.as_str(),
                o.site.map(|s| format!(" in site {s}")).unwrap_or_default(),
                display(r, o.asked),
                display(r, o.limit.saturating_sub(o.now)),
                display(r, o.limit)
            )
        })
        .collect();
    (!short.is_empty()).then(|| short.join("; "))
}

/// One resource of a namespace's quota as it stands.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct QuotaLine {
    /// `clusters`, `cpus`, `memory` or `gpus`.
    pub resource: QuotaResource,
    /// The site whose cap this line is; absent: the namespace's total
    /// across the fleet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
    /// The limit; none: unlimited.
    pub limit: Option<String>,
    /// What the namespace's clusters are charged.
    pub used: String,
    /// What is left (none: unlimited; `0` when over).
    pub remaining: Option<String>,
    /// Used ÷ limit (none: unlimited; above 1 when over a lowered limit).
    pub used_fraction: Option<f64>,
}

#[expect(clippy::cast_precision_loss, reason = "a fraction to show")]
fn fraction(used: u128, limit: u128) -> f64 {
    if limit == 0 {
        if used == 0 { 0.0 } else { f64::INFINITY }
    } else {
        used as f64 / limit as f64
    }
}

/// Where a namespace stands against `quota`: its total across the fleet
/// (every resource), then each site's cap (the resources it caps).
pub fn standing(quota: &Quota, used: &Held) -> Vec<QuotaLine> {
    let line = |site: Option<&str>, r: QuotaResource, limit: Option<u128>, used: &Usage| QuotaLine {
        resource: r,
        site: site.map(str::to_owned),
        limit: limit.map(|l| display(r, l)),
        used: display(r, r.of(used)),
        remaining: limit.map(|l| display(r, l.saturating_sub(r.of(used)))),
        used_fraction: limit.map(|l| fraction(r.of(used), l)),
    };
    let total = QuotaResource::ALL
        .iter()
        .map(|&r| line(None, r, r.limit(quota), &used.total));
    let caps = quota.sites.iter().flat_map(|(site, cap)| {
        let at = used.at(&Site::new(site));
        QuotaResource::ALL
            .iter()
            .filter_map(move |&r| r.limit(cap).map(|limit| line(Some(site), r, Some(limit), &at)))
    });
    total.chain(caps).collect()
}

/// The limits of `quota` (its total, and its cap at the request's site)
/// that `used` plus `requested` would pass. Only growth is judged: a
/// resource the request does not add to never fails, even over a lowered
/// limit (scale-downs always pass).
pub fn check(quota: &Quota, used: &Held, requested: &Request) -> Vec<QuotaViolation> {
    overs(quota, used, requested)
        .into_iter()
        .map(|o| {
            let r = o.resource;
            QuotaViolation {
                resource: r,
                site: o.site.map(str::to_owned),
                requested: display(r, o.asked),
                in_use: display(r, o.now),
                limit: display(r, o.limit),
                cluster_would_hold: display(r, r.of(&requested.cluster_after)),
                namespace_would_hold: display(r, o.now + o.asked),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn cluster(autoscaling: bool, head: serde_json::Value, groups: serde_json::Value) -> ObservedCluster {
        serde_json::from_value(json!({
            "metadata": {"name": "c", "namespace": "ml"},
            "spec": {
                "enableInTreeAutoscaling": autoscaling,
                "headGroupSpec": {"template": {"spec": {"containers": [{"resources": {"requests": head}}]}}},
                "workerGroupSpecs": groups,
            }
        }))
        .unwrap()
    }

    fn group(replicas: i64, max: i64, requests: serde_json::Value) -> serde_json::Value {
        json!({"groupName": "g", "replicas": replicas, "minReplicas": 0, "maxReplicas": max,
               "template": {"spec": {"containers": [{"resources": {"requests": requests}}]}}})
    }

    #[test]
    fn a_cluster_is_charged_its_upper_bound() {
        let workers = json!([group(
            1,
            4,
            json!({"cpu": "1500m", "memory": "4Gi", "nvidia.com/gpu": 1})
        )]);
        let head = json!({"cpu": "2", "memory": "8Gi"});
        let on = charge(&cluster(true, head.clone(), workers.clone()));
        assert_eq!(on.clusters, 1);
        assert_eq!(display(QuotaResource::Cpus, on.cpu_nanos), "8", "2 + 4 × 1.5");
        assert_eq!(display(QuotaResource::Memory, on.memory_nanos), "24Gi", "8Gi + 4 × 4Gi");
        assert_eq!(display(QuotaResource::Gpus, on.gpu_nanos), "4");
        let off = charge(&cluster(false, head, workers));
        assert_eq!(display(QuotaResource::Cpus, off.cpu_nanos), "3.5", "2 + 1 × 1.5");
        assert_eq!(display(QuotaResource::Gpus, off.gpu_nanos), "1");
    }

    #[test]
    fn a_suspended_cluster_holds_only_its_place_and_resuming_charges_its_pods() {
        let workers = json!([group(2, 2, json!({"cpu": "1", "nvidia.com/gpu": 1}))]);
        let mut c = cluster(false, json!({"cpu": "2"}), workers);
        assert_eq!(resume_growth(&c), Usage::default(), "running: nothing to add");
        c.spec.suspend = Some(true);
        assert_eq!(
            charge(&c),
            Usage {
                clusters: 1,
                ..Usage::default()
            }
        );
        let growth = resume_growth(&c);
        assert_eq!(growth.clusters, 0, "its place is held already");
        assert_eq!(display(QuotaResource::Cpus, growth.cpu_nanos), "4");
        assert_eq!(display(QuotaResource::Gpus, growth.gpu_nanos), "2");
    }

    #[test]
    fn gpus_in_the_head_count_and_limits_stand_in_for_requests() {
        let c: ObservedCluster = serde_json::from_value(json!({
            "metadata": {"name": "c", "namespace": "ml"},
            "spec": {"headGroupSpec": {"template": {"spec": {"containers": [
                {"resources": {"limits": {"cpu": 4, "memory": "512Mi", "nvidia.com/gpu": "2"}}}
            ]}}}}
        }))
        .unwrap();
        let u = charge(&c);
        assert_eq!(display(QuotaResource::Gpus, u.gpu_nanos), "2");
        assert_eq!(display(QuotaResource::Cpus, u.cpu_nanos), "4");
        assert_eq!(display(QuotaResource::Memory, u.memory_nanos), "512Mi");
    }

    #[test]
    fn only_growth_past_a_limit_is_refused_with_the_numbers() {
        let quota: Quota = serde_saphyr::from_str("gpus: 4\nmemory: 256Gi\nclusters: 10\n").unwrap();
        let used = Held {
            total: Usage {
                clusters: 1,
                gpu_nanos: 2 * NANOS,
                ..Usage::default()
            },
            ..Held::default()
        };
        let asked = Usage {
            clusters: 1,
            gpu_nanos: 3 * NANOS,
            ..Usage::default()
        };
        // A scale of a cluster holding 1 GPU to 4: 3 more.
        let scale = Request {
            growth: asked,
            cluster_after: Usage {
                clusters: 1,
                gpu_nanos: 4 * NANOS,
                ..Usage::default()
            },
            site: None,
        };
        assert_eq!(
            check(&quota, &used, &scale),
            [QuotaViolation {
                resource: QuotaResource::Gpus,
                site: None,
                requested: "3".into(),
                in_use: "2".into(),
                limit: "4".into(),
                cluster_would_hold: "4".into(),
                namespace_would_hold: "5".into(),
            }]
        );
        let fits = Usage {
            gpu_nanos: 2 * NANOS,
            ..Usage::default()
        };
        assert!(check(&quota, &used, &Request::new_cluster(fits)).is_empty());
        // Over a lowered limit, a request that adds nothing passes.
        let lowered: Quota = serde_saphyr::from_str("gpus: 1\n").unwrap();
        assert!(check(&lowered, &used, &Request::default()).is_empty());
        let lines = standing(&lowered, &used);
        assert_eq!(lines[3].remaining.as_deref(), Some("0"));
        assert_eq!(lines[0].limit, None, "clusters unlimited");
    }

    #[test]
    fn a_sites_cap_holds_beside_the_namespaces_total() {
        let quota: Quota = serde_saphyr::from_str("gpus: 8\nsites: { us-2: { gpus: 2 } }\n").unwrap();
        quota.check().unwrap();
        let gpus = |n: u128| Usage {
            clusters: 1,
            gpu_nanos: n * NANOS,
            ..Usage::default()
        };
        let (eu, us) = (Site::new("eu-1"), Site::new("us-2"));
        let used = Held::of([(eu.clone(), gpus(3)), (us.clone(), gpus(1))]);
        assert_eq!(
            used.total,
            gpus(4)
                + Usage {
                    clusters: 1,
                    ..Usage::default()
                }
        );
        // Two more GPUs fit the total, and eu-1 has no cap…
        assert!(check(&quota, &used, &Request::new_cluster(gpus(2)).at(Some(eu))).is_empty());
        // …but us-2 holds 1 of its 2.
        let at_us = Request::new_cluster(gpus(2)).at(Some(us));
        let refused = check(&quota, &used, &at_us);
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert_eq!(refused[0].site.as_deref(), Some("us-2"));
        assert_eq!((refused[0].in_use.as_str(), refused[0].limit.as_str()), ("1", "2"));
        assert_eq!(
            shortage(&quota, &used, &at_us).as_deref(),
            Some("gpus in site us-2: needs 2, 1 of 2 free")
        );
        // The total binds too, wherever the cluster goes.
        let big = Request::new_cluster(gpus(5)).at(Some(Site::new("eu-1")));
        assert_eq!(check(&quota, &used, &big)[0].site, None);
        let lines = standing(&quota, &used);
        assert_eq!(lines.len(), 5, "four totals and us-2's GPUs: {lines:?}");
        assert_eq!(
            (
                lines[4].site.as_deref(),
                lines[4].used.as_str(),
                lines[4].remaining.as_deref()
            ),
            (Some("us-2"), "1", Some("1"))
        );
        let nested: Quota = serde_saphyr::from_str("sites: { a: { sites: { b: { gpus: 1 } } } }\n").unwrap();
        assert!(nested.check().unwrap_err().contains("sites.a"));
    }

    #[test]
    fn bad_quantities_are_refused_on_load() {
        let bad = serde_saphyr::from_str::<Quota>("gpus: lots\n").unwrap_err();
        assert!(bad.to_string().contains("lots"), "{bad}");
        assert!(serde_saphyr::from_str::<Quota>("gpu: 1\n").is_err(), "unknown key");
        let q: Quota = serde_saphyr::from_str("cpus: 1500m\nmemory: 4Gi\n").unwrap();
        assert_eq!(q.cpus.unwrap().nanos(), 1_500_000_000);
    }
}
