//! Create, get, list, describe, scale, delete.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::Arc,
};

use serde_json::{Value, json};

use super::{ClusterService, Context};
use crate::{
    domain::{
        Action, ClusterDetails, ClusterInfo, ClusterSpec, Error, ObservedCluster, ObservedPod, Page, PageRequest,
        ResourceKind, check_dns1123_label, check_worker_counts, limits,
    },
    manifest::{self, LABEL_CLUSTER, Provenance},
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
}

/// What create returns.
#[derive(Debug, Clone)]
pub struct Created {
    /// The cluster (for a dry run, as it would be).
    pub cluster: ClusterInfo,
    /// The RayCluster manifest sent to Kubernetes.
    pub manifest: Value,
}

/// A scale request: one worker group, any of three counts.
#[derive(Debug, Clone, Default)]
pub struct ScaleInput {
    /// Worker group name.
    pub worker_group: String,
    /// New replicas.
    pub replicas: Option<u32>,
    /// New lower bound.
    pub min_replicas: Option<u32>,
    /// New upper bound.
    pub max_replicas: Option<u32>,
}

/// Summaries of one namespace's clusters, each with its own pods (grouped
/// in one pass: a namespace may hold thousands).
fn infos_with_pods(clusters: &[Arc<ObservedCluster>], pods: &[Arc<ObservedPod>]) -> Vec<ClusterInfo> {
    let mut by_cluster: HashMap<&str, Vec<&ObservedPod>> = HashMap::new();
    for pod in pods {
        if let Some(cluster) = pod.metadata.labels.get(LABEL_CLUSTER) {
            by_cluster.entry(cluster).or_default().push(pod);
        }
    }
    clusters
        .iter()
        .map(|c| {
            let mine = by_cluster.get(c.metadata.name.as_str()).map_or(&[][..], Vec::as_slice);
            manifest::cluster_info(c, Some(mine))
        })
        .collect()
}

/// Borrowed views of shared objects, as the manifest rules take them.
fn views<T>(shared: &[Arc<T>]) -> Vec<&T> {
    shared.iter().map(|s| &**s).collect()
}

impl ClusterService {
    /// Creates a cluster (or, with `dry_run`, returns its checked manifest).
    pub async fn create(&self, cx: &Context, input: CreateInput) -> Result<Created, Error> {
        let mut config = input.config;
        let body_ns = config.get("namespace").and_then(Value::as_str).map(str::to_owned);
        let namespace = match (&input.namespace, body_ns) {
            (Some(url), Some(body)) if *url != body => {
                let e = Error::invalid(
                    "namespace",
                    format!("must match the namespace in the URL ({url:?}), or be left out"),
                );
                self.record_refusal(cx, "cluster.create", Some(url), None, &e).await;
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
        self.authorize(cx, Action::Mutate, "cluster.create", &namespace, name.as_deref())
            .await?;
        let spec = match ClusterSpec::from_value(&config) {
            Ok(spec) => spec,
            Err(e) => {
                self.record_refusal(cx, "cluster.create", Some(&namespace), name.as_deref(), &e)
                    .await;
                return Err(e);
            }
        };
        let team = cx
            .principal
            .teams_for(&namespace)
            .into_iter()
            .find(|t| check_dns1123_label(t).is_ok());
        let who = Provenance {
            created_by: Some(&cx.principal.subject),
            team: team.as_deref(),
        };
        let manifest = manifest::build_manifest(&spec, &self.settings.manifest, &who);
        let rid = cx.meta.request_id.as_str();
        let observed = if input.dry_run {
            self.store.create(&manifest, true, rid).await?
        } else {
            let summary = json!({"spec": spec.to_value()});
            self.audited(cx, "cluster.create", &namespace, &spec.name, summary, || {
                self.store.create(&manifest, false, rid)
            })
            .await?
        };
        Ok(Created {
            cluster: manifest::cluster_info(&observed, Some(&[])),
            manifest,
        })
    }

    /// One cluster's summary.
    pub async fn get(&self, cx: &Context, namespace: &str, name: &str) -> Result<ClusterInfo, Error> {
        self.authorize_cluster(cx, Action::Read, "cluster.get", namespace, name)
            .await?;
        let rid = &cx.meta.request_id;
        let cluster = self.store.get(namespace, name, rid).await?;
        let pods = self.store.pods(namespace, Some(name), rid).await?;
        self.record_read(cx, "cluster.get", Some(namespace), Some(name)).await;
        Ok(manifest::cluster_info(&cluster, Some(&views(&pods))))
    }

    /// Clusters of one namespace, or of every namespace the caller may see,
    /// ordered by namespace and name.
    pub async fn list(
        &self,
        cx: &Context,
        namespace: Option<&str>,
        page: &PageRequest,
    ) -> Result<Page<ClusterInfo>, Error> {
        let rid = &cx.meta.request_id;
        let namespaces = match namespace {
            Some(ns) => {
                self.authorize(cx, Action::Read, "cluster.list", ns, None).await?;
                vec![ns.to_owned()]
            }
            None => self
                .store
                .namespaces(rid)
                .await?
                .into_iter()
                .filter(|ns| cx.principal.may(Action::Read, ns))
                .collect(),
        };
        let mut infos = Vec::new();
        for ns in &namespaces {
            let clusters = self.store.list(Some(ns), rid).await?;
            if clusters.is_empty() {
                continue;
            }
            let pods = self.store.pods(ns, None, rid).await?;
            infos.extend(infos_with_pods(&clusters, &pods));
        }
        infos.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        self.record_read(cx, "cluster.list", namespace, None).await;
        Ok(page.apply(infos, |i| format!("{}/{}", i.namespace, i.name)))
    }

    /// A cluster's full picture: shape, pods and recent events.
    pub async fn describe(&self, cx: &Context, namespace: &str, name: &str) -> Result<ClusterDetails, Error> {
        self.authorize_cluster(cx, Action::Read, "cluster.describe", namespace, name)
            .await?;
        let rid = &cx.meta.request_id;
        let cluster = self.store.get(namespace, name, rid).await?;
        let pods = self.store.pods(namespace, Some(name), rid).await?;
        let about: HashSet<&str> = pods
            .iter()
            .map(|p| p.metadata.name.as_str())
            .chain(std::iter::once(name))
            .collect();
        let events: Vec<_> = self
            .store
            .events(namespace, rid)
            .await?
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref().is_some_and(|n| about.contains(n)))
            .collect();
        self.record_read(cx, "cluster.describe", Some(namespace), Some(name))
            .await;
        Ok(manifest::cluster_details(
            &cluster,
            &views(&pods),
            &views(&events),
            &self.settings.manifest,
        ))
    }

    /// Resizes one worker group. A cluster with autoscaling changes only
    /// the counts given; a fixed-size one pins min and max to replicas, as
    /// Krayne does. The result obeys create's rules; a concurrent change is
    /// retried a bounded number of times, each retry reading the cluster
    /// from Kubernetes (the cache may not show the newer version yet).
    pub async fn scale(
        &self,
        cx: &Context,
        namespace: &str,
        name: &str,
        input: ScaleInput,
    ) -> Result<ClusterInfo, Error> {
        self.authorize_cluster(cx, Action::Mutate, "cluster.scale", namespace, name)
            .await?;
        if let Err(e) = check_scale_input(&input) {
            self.record_refusal(cx, "cluster.scale", Some(namespace), Some(name), &e)
                .await;
            return Err(e);
        }
        let summary = json!({"worker_group": input.worker_group, "replicas": input.replicas,
                             "min_replicas": input.min_replicas, "max_replicas": input.max_replicas});
        let rid = cx.meta.request_id.as_str();
        let updated = self
            .audited(cx, "cluster.scale", namespace, name, summary, || async {
                let mut attempt = 0;
                loop {
                    attempt += 1;
                    let cluster = if attempt == 1 {
                        self.store.get(namespace, name, rid).await?
                    } else {
                        self.store.get_latest(namespace, name, rid).await?
                    };
                    let patch = scale_patch(&cluster, &input)?;
                    match self.store.patch(namespace, name, &patch, rid).await {
                        Err(Error::Conflict(_)) if attempt < self.settings.conflict_retries => {
                            // Jittered, growing pauses (as client-go's
                            // RetryOnConflict): writers that collided do
                            // not collide again in lockstep.
                            let pause = fastrand::u64(5..=20) * attempt as u64;
                            tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
                        }
                        other => return other,
                    }
                }
            })
            .await?;
        let pods = self.store.pods(namespace, Some(name), rid).await?;
        Ok(manifest::cluster_info(&updated, Some(&views(&pods))))
    }

    /// Deletes a cluster; Kubernetes removes its pods.
    pub async fn delete(&self, cx: &Context, namespace: &str, name: &str) -> Result<(), Error> {
        self.authorize_cluster(cx, Action::Mutate, "cluster.delete", namespace, name)
            .await?;
        let rid = cx.meta.request_id.as_str();
        self.audited(cx, "cluster.delete", namespace, name, Value::Null, || {
            self.store.delete(namespace, name, rid)
        })
        .await
    }
}

fn check_scale_input(input: &ScaleInput) -> Result<(), Error> {
    let mut v = crate::domain::Violations::new();
    if input.worker_group.is_empty() {
        v.push("worker_group", "is required");
    }
    if input.replicas.is_none() && input.min_replicas.is_none() && input.max_replicas.is_none() {
        v.push(
            "replicas",
            "at least one of replicas, min_replicas or max_replicas is required",
        );
    }
    for (field, value) in [
        ("replicas", input.replicas),
        ("min_replicas", input.min_replicas),
        ("max_replicas", input.max_replicas),
    ] {
        if value.is_some_and(|n| n > limits::MAX_REPLICAS) {
            v.push(field, format!("must be at most {}", limits::MAX_REPLICAS));
        }
    }
    v.into_result(())
}

/// The conditional JSON patch that scales one group of `cluster`.
fn scale_patch(cluster: &ObservedCluster, input: &ScaleInput) -> Result<Value, Error> {
    let groups = &cluster.spec.worker_group_specs;
    let (index, group) = groups
        .iter()
        .enumerate()
        .find(|(_, g)| g.group_name == input.worker_group)
        .ok_or_else(|| Error::NotFound {
            kind: ResourceKind::WorkerGroup,
            name: input.worker_group.clone(),
        })?;
    let current = |n: Option<i64>| n.and_then(|n| u32::try_from(n).ok()).unwrap_or(0);
    let (mut replicas, mut min, mut max) = (
        current(group.replicas),
        current(group.min_replicas),
        current(group.max_replicas),
    );
    if cluster.spec.enable_in_tree_autoscaling == Some(true) {
        replicas = input.replicas.unwrap_or(replicas);
        min = input.min_replicas.unwrap_or(min);
        max = input.max_replicas.unwrap_or(max);
    } else {
        replicas = input.replicas.unwrap_or(replicas);
        (min, max) = (replicas, replicas);
    }
    let (replicas, min, max) = check_worker_counts(index, replicas, min, max)?;
    let rv = cluster.metadata.resource_version.clone().unwrap_or_default();
    let path = |f: &str| format!("/spec/workerGroupSpecs/{index}/{f}");
    let mut ops = BTreeMap::new();
    ops.insert("replicas", replicas);
    ops.insert("minReplicas", min);
    ops.insert("maxReplicas", max);
    let mut patch = vec![json!({"op": "replace", "path": "/metadata/resourceVersion", "value": rv})];
    patch.extend(
        ops.into_iter()
            .map(|(f, v)| json!({"op": "add", "path": path(f), "value": v})),
    );
    Ok(Value::Array(patch))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(autoscaling: bool) -> ObservedCluster {
        serde_json::from_value(json!({
            "metadata": {"name": "c", "resourceVersion": "7"},
            "spec": {"enableInTreeAutoscaling": autoscaling, "workerGroupSpecs": [
                {"groupName": "a", "replicas": 1, "minReplicas": 0, "maxReplicas": 3},
                {"groupName": "b", "replicas": 2, "minReplicas": 1, "maxReplicas": 4},
            ]},
        }))
        .unwrap()
    }

    fn values(patch: &Value) -> Vec<(String, Value)> {
        patch
            .as_array()
            .unwrap()
            .iter()
            .map(|op| (op["path"].as_str().unwrap().to_owned(), op["value"].clone()))
            .collect()
    }

    #[test]
    fn autoscaling_clusters_change_only_what_is_given() {
        let input = ScaleInput {
            worker_group: "b".into(),
            replicas: Some(3),
            ..ScaleInput::default()
        };
        let p = values(&scale_patch(&cluster(true), &input).unwrap());
        assert_eq!(p[0], ("/metadata/resourceVersion".into(), json!("7")));
        assert!(p.contains(&("/spec/workerGroupSpecs/1/replicas".into(), json!(3))));
        assert!(p.contains(&("/spec/workerGroupSpecs/1/minReplicas".into(), json!(1))));
        assert!(p.contains(&("/spec/workerGroupSpecs/1/maxReplicas".into(), json!(4))));
    }

    #[test]
    fn fixed_size_clusters_pin_min_and_max() {
        let input = ScaleInput {
            worker_group: "a".into(),
            replicas: Some(5),
            min_replicas: Some(1),
            ..ScaleInput::default()
        };
        let p = values(&scale_patch(&cluster(false), &input).unwrap());
        for f in ["replicas", "minReplicas", "maxReplicas"] {
            assert!(
                p.contains(&(format!("/spec/workerGroupSpecs/0/{f}"), json!(5))),
                "{f}: {p:?}"
            );
        }
    }

    #[test]
    fn the_result_obeys_creates_rules() {
        let input = ScaleInput {
            worker_group: "b".into(),
            replicas: Some(0),
            ..ScaleInput::default()
        };
        let e = scale_patch(&cluster(true), &input).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid request: worker_groups[1].min_replicas: must be <= replicas (0)"
        );
        let raised = ScaleInput {
            worker_group: "a".into(),
            replicas: Some(9),
            ..ScaleInput::default()
        };
        let p = values(&scale_patch(&cluster(true), &raised).unwrap());
        assert!(p.contains(&("/spec/workerGroupSpecs/0/maxReplicas".into(), json!(9))));
        let missing = ScaleInput {
            worker_group: "zz".into(),
            replicas: Some(1),
            ..ScaleInput::default()
        };
        assert!(matches!(
            scale_patch(&cluster(true), &missing),
            Err(Error::NotFound {
                kind: ResourceKind::WorkerGroup,
                ..
            })
        ));
    }

    #[test]
    fn scale_needs_a_group_and_a_count() {
        assert!(
            check_scale_input(&ScaleInput {
                worker_group: "a".into(),
                ..ScaleInput::default()
            })
            .is_err()
        );
        assert!(
            check_scale_input(&ScaleInput {
                replicas: Some(1),
                ..ScaleInput::default()
            })
            .is_err()
        );
        assert!(
            check_scale_input(&ScaleInput {
                worker_group: "a".into(),
                replicas: Some(10_001),
                ..ScaleInput::default()
            })
            .is_err()
        );
    }
}
