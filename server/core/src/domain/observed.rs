//! Minimal views of the Kubernetes objects the read side looks at, read
//! straight from their wire JSON (camelCase). Only the fields krayne uses are
//! kept, so a cache of many clusters stays small; explicit `null`s read as
//! empty, as Kubernetes clients treat them. Strings are [`Atom`]s (each
//! distinct text held once: ten thousand clusters repeat the same
//! namespaces, images, label values and amounts), and string maps are
//! `LiteMap`s (sorted vectors): they hold a handful of entries each.

use litemap::LiteMap;
use serde::{Deserialize, Deserializer};

use super::{Atom, Shared, ShortText, atom::scalar};

/// `null` or missing → `T::default()`.
pub(super) fn nullable<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A list (`null` → empty) without spare capacity: parsing grows a vector
/// to 4, 8, … slots, and a cache holds tens of thousands of them.
fn shrunk<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    let mut list: Vec<T> = nullable(d)?;
    list.shrink_to_fit();
    Ok(list)
}

/// Label and annotation keys the read side looks at: a cache of many
/// objects keeps only these.
const KEPT_KEYS: [&str; 17] = [
    crate::manifest::LABEL_CLUSTER,
    crate::manifest::LABEL_ORIGIN_CRD,
    crate::manifest::LABEL_ORIGIN_NAME,
    crate::manifest::LABEL_NODE_TYPE,
    crate::manifest::LABEL_GROUP,
    crate::manifest::ANNOTATION_CREATED_BY,
    crate::manifest::ANNOTATION_KEEP_UNTIL,
    crate::manifest::ANNOTATION_WARNED_AT,
    crate::manifest::ANNOTATION_LIFECYCLE,
    crate::manifest::ANNOTATION_IDLE_SINCE,
    crate::manifest::ANNOTATION_RAY_AUTH_NONCE,
    crate::manifest::ANNOTATION_QUEUED_SINCE,
    crate::manifest::ANNOTATION_QUEUE_POSITION,
    crate::manifest::ANNOTATION_QUEUE_REASON,
    crate::manifest::ANNOTATION_ADMITTED_AT,
    crate::manifest::ANNOTATION_QUEUE_STATE,
    crate::manifest::LABEL_KUEUE_QUEUE,
];

/// A string map (`null` → empty) keeping only [`KEPT_KEYS`]; the others'
/// values are skipped unread.
fn kept<'de, D: Deserializer<'de>>(d: D) -> Result<Shared<LiteMap<&'static str, Atom>>, D::Error> {
    struct Kept;
    impl<'de> serde::de::Visitor<'de> for Kept {
        type Value = LiteMap<&'static str, Atom>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a map of strings, or null")
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(LiteMap::new())
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(LiteMap::new())
        }
        fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
            d.deserialize_map(self)
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut kept = LiteMap::new();
            while let Some(key) = map.next_key::<String>()? {
                if let Some(key) = KEPT_KEYS.iter().find(|k| **k == key.as_str()) {
                    let value = map.next_value::<Option<Atom>>()?;
                    kept.insert(*key, value.unwrap_or_default());
                } else {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
            Ok(kept)
        }
    }
    d.deserialize_option(Kept).map(Shared::new)
}

/// A map of JSON scalars (`null` → empty), each read as its text.
fn scalars<'de, D: Deserializer<'de>>(d: D) -> Result<LiteMap<Atom, Atom>, D::Error> {
    #[derive(Deserialize)]
    struct Text(#[serde(deserialize_with = "scalar")] Atom);
    let read: Option<LiteMap<Atom, Text>> = Option::deserialize(d)?;
    Ok(read.into_iter().flatten().map(|(k, Text(v))| (k, v)).collect())
}

/// [`scalars`], shared with every object that has the same.
fn shared_scalars<'de, D: Deserializer<'de>>(d: D) -> Result<Shared<LiteMap<Atom, Atom>>, D::Error> {
    scalars(d).map(Shared::new)
}

/// A JSON scalar, or nothing, read as its text.
fn optional_scalar<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Atom>, D::Error> {
    let text = scalar(d)?;
    Ok((!text.is_empty()).then_some(text))
}

/// The object metadata krayne reads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObjectMeta {
    /// Name.
    #[serde(deserialize_with = "nullable")]
    pub name: Atom,
    /// Namespace.
    #[serde(deserialize_with = "nullable")]
    pub namespace: Atom,
    /// The object's uid (what an owner reference names); unique, so not
    /// interned.
    pub uid: Option<super::Uid>,
    /// Creation time (RFC 3339).
    pub creation_timestamp: Option<ShortText>,
    /// Resource version.
    pub resource_version: Option<ShortText>,
    /// Set once deletion began (finalizers may keep the object a while).
    pub deletion_timestamp: Option<Atom>,
    /// The labels reads use (`ray.io/cluster`, `ray.io/node-type`,
    /// `ray.io/group`); others are not kept.
    #[serde(deserialize_with = "kept")]
    pub labels: Shared<LiteMap<&'static str, Atom>>,
    /// The annotations reads use (`krayne.dev/created-by`); others (such
    /// as kubectl's last-applied configuration) are not kept.
    #[serde(deserialize_with = "kept")]
    pub annotations: Shared<LiteMap<&'static str, Atom>>,
    /// The uid of its controller (the owner reference marked `controller`):
    /// a Ray pod's RayCluster. An atom: a cluster's pods all name it.
    #[serde(rename = "ownerReferences", deserialize_with = "controller")]
    pub controller: Option<Atom>,
}

impl ObjectMeta {
    /// The RayJob a cluster was made for, as KubeRay labels the clusters
    /// of RayJobs (`ray.io/originated-from-crd: RayJob` and the RayJob's
    /// name).
    pub fn rayjob(&self) -> Option<&str> {
        let from_rayjob =
            self.labels.get(&crate::manifest::LABEL_ORIGIN_CRD).map(Atom::as_str) == Some(crate::manifest::RAYJOB_KIND);
        from_rayjob
            .then(|| self.labels.get(&crate::manifest::LABEL_ORIGIN_NAME).map(Atom::as_str))
            .flatten()
            .filter(|name| !name.is_empty())
    }

    /// The Kueue LocalQueue its object waits in or was admitted through,
    /// when the platform's Kueue admits it (docs/kueue.md): a RayCluster's
    /// or a RayJob's `kueue.x-k8s.io/queue-name` label.
    pub fn kueue_queue(&self) -> Option<&str> {
        self.labels
            .get(crate::manifest::LABEL_KUEUE_QUEUE)
            .map(Atom::as_str)
            .filter(|q| !q.is_empty())
    }
}

/// The controller's uid among owner references.
fn controller<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Atom>, D::Error> {
    #[derive(Deserialize)]
    struct Owner {
        #[serde(default)]
        uid: String,
        #[serde(default)]
        controller: Option<bool>,
    }
    let owners: Vec<Owner> = nullable(d)?;
    Ok(owners
        .into_iter()
        .find(|o| o.controller == Some(true))
        .map(|o| Atom::new(&o.uid)))
}

/// A RayCluster as observed.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ObservedCluster {
    /// Metadata.
    #[serde(deserialize_with = "nullable")]
    pub metadata: ObjectMeta,
    /// Spec.
    #[serde(deserialize_with = "nullable")]
    pub spec: RayClusterSpec,
    /// Status, filled by KubeRay.
    #[serde(deserialize_with = "nullable")]
    pub status: RayClusterStatus,
    /// The site it was read from (not Kubernetes': the store that read it
    /// says; docs/sites.md).
    #[serde(skip)]
    pub site: super::Site,
}

impl ObservedCluster {
    /// The Kueue LocalQueue it waits in or was admitted through, if Kueue
    /// admits it (its `kueue.x-k8s.io/queue-name` label).
    pub fn kueue_queue(&self) -> Option<&str> {
        self.metadata.kueue_queue()
    }

    /// When it joined its namespace's line, if it waits in one: suspended,
    /// with a readable `krayne.dev/queued-since`.
    pub fn queued_since(&self) -> Option<jiff::Timestamp> {
        if self.spec.suspend != Some(true) {
            return None;
        }
        self.metadata
            .annotations
            .get(crate::manifest::ANNOTATION_QUEUED_SINCE)
            .and_then(|t| t.as_str().parse().ok())
    }
}

/// `RayCluster.spec`, the parts krayne reads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RayClusterSpec {
    /// Head group.
    #[serde(deserialize_with = "nullable")]
    pub head_group_spec: HeadGroupSpec,
    /// Worker groups.
    #[serde(deserialize_with = "shrunk")]
    pub worker_group_specs: Vec<WorkerGroupSpec>,
    /// Whether Ray's autoscaler runs.
    pub enable_in_tree_autoscaling: Option<bool>,
    /// Whether the cluster is suspended.
    pub suspend: Option<bool>,
    /// Ray's authentication (KubeRay's `authOptions`).
    #[serde(deserialize_with = "nullable")]
    pub auth_options: AuthOptions,
}

/// `spec.authOptions`: how the cluster's Ray authenticates callers.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AuthOptions {
    /// `token` or `disabled` (none: disabled).
    pub mode: Option<Atom>,
    /// The Secret holding the token (key `auth_token`).
    pub secret_name: Option<Atom>,
}

/// `headGroupSpec`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HeadGroupSpec {
    /// `ray start` parameters (strings by the CRD; numbers and booleans
    /// read as their text).
    #[serde(deserialize_with = "shared_scalars")]
    pub ray_start_params: Shared<LiteMap<Atom, Atom>>,
    /// Head service.
    #[serde(deserialize_with = "nullable")]
    pub head_service: Shared<ServiceTemplate>,
    /// Pod template (shared: clusters made alike have the same).
    #[serde(deserialize_with = "nullable")]
    pub template: Shared<PodTemplate>,
}

/// A worker group.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WorkerGroupSpec {
    /// Group name.
    #[serde(deserialize_with = "nullable")]
    pub group_name: Atom,
    /// Desired workers.
    pub replicas: Option<i64>,
    /// Lower bound.
    pub min_replicas: Option<i64>,
    /// Upper bound.
    pub max_replicas: Option<i64>,
    /// Pod template (shared: groups made alike have the same).
    #[serde(deserialize_with = "nullable")]
    pub template: Shared<PodTemplate>,
}

/// `headService`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(default)]
pub struct ServiceTemplate {
    /// Service spec.
    #[serde(deserialize_with = "nullable")]
    pub spec: ServiceSpec,
}

/// A service spec's ports.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(default)]
pub struct ServiceSpec {
    /// Ports.
    #[serde(deserialize_with = "shrunk")]
    pub ports: Vec<NamedPort>,
}

/// A container's or a service's port.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(default)]
pub struct NamedPort {
    /// Port name.
    pub name: Option<Atom>,
    /// A container port's number.
    #[serde(rename = "containerPort")]
    pub container_port: Option<u32>,
    /// A service port's number.
    pub port: Option<u32>,
    /// A service port's target in the pod: a number, or a container
    /// port's name (a number read as its text).
    #[serde(rename = "targetPort", deserialize_with = "optional_scalar")]
    pub target_port: Option<Atom>,
}

/// A pod template.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(default)]
pub struct PodTemplate {
    /// Pod spec.
    #[serde(deserialize_with = "nullable")]
    pub spec: PodTemplateSpec,
}

/// A pod template's containers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(default)]
pub struct PodTemplateSpec {
    /// Containers; the Ray container comes first.
    #[serde(deserialize_with = "shrunk")]
    pub containers: Vec<Container>,
}

/// A container.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(default)]
pub struct Container {
    /// Image.
    pub image: Option<Atom>,
    /// Ports.
    #[serde(deserialize_with = "shrunk")]
    pub ports: Vec<NamedPort>,
    /// Resources.
    #[serde(deserialize_with = "nullable")]
    pub resources: Resources,
    /// The notebook's base URL from its environment
    /// (`KRAYNE_NOTEBOOK_BASE_URL`), the one variable the read side needs.
    #[serde(rename = "env", deserialize_with = "notebook_base")]
    pub notebook_base: Option<Atom>,
}

/// `KRAYNE_NOTEBOOK_BASE_URL`'s value in a container's `env`.
fn notebook_base<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Atom>, D::Error> {
    #[derive(Deserialize)]
    struct Var {
        name: String,
        value: Option<String>,
    }
    let vars: Vec<Var> = nullable(d)?;
    Ok(vars
        .into_iter()
        .find(|v| v.name == crate::manifest::NOTEBOOK_BASE_URL_ENV)
        .and_then(|v| v.value)
        .map(Atom::from))
}

/// Container resources; values are quantities (strings or numbers).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(default)]
pub struct Resources {
    /// Requests.
    #[serde(deserialize_with = "scalars")]
    pub requests: LiteMap<Atom, Atom>,
    /// Limits (a quota charges them where a request is missing, as
    /// Kubernetes defaults requests to limits).
    #[serde(deserialize_with = "scalars")]
    pub limits: LiteMap<Atom, Atom>,
}

/// `RayCluster.status`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RayClusterStatus {
    /// `ready`, `suspended`, … (KubeRay's state).
    pub state: Option<Atom>,
    /// Conditions.
    #[serde(deserialize_with = "shrunk")]
    pub conditions: Vec<ObservedCondition>,
    /// Head addresses.
    #[serde(deserialize_with = "nullable")]
    pub head: HeadStatus,
    /// Ready workers.
    pub ready_worker_replicas: Option<i64>,
}

/// `status.head`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HeadStatus {
    /// Head pod IP.
    #[serde(rename = "podIP")]
    pub pod_ip: Option<Atom>,
    /// Head service IP.
    #[serde(rename = "serviceIP")]
    pub service_ip: Option<Atom>,
}

/// A condition of a RayCluster or pod.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObservedCondition {
    /// Type.
    #[serde(rename = "type", deserialize_with = "nullable")]
    pub type_: Atom,
    /// `True` / `False` / `Unknown`.
    #[serde(deserialize_with = "nullable")]
    pub status: Atom,
    /// Reason.
    pub reason: Option<Atom>,
    /// Message.
    pub message: Option<Atom>,
    /// Last change.
    pub last_transition_time: Option<Atom>,
}

impl ObservedCondition {
    /// `type == t` and `status == "True"`.
    pub fn is_true(&self, t: &str) -> bool {
        self.type_ == t && self.status == "True"
    }
}

/// A pod as observed.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ObservedPod {
    /// Metadata.
    #[serde(deserialize_with = "nullable")]
    pub metadata: ObjectMeta,
    /// Spec.
    #[serde(deserialize_with = "nullable")]
    pub spec: PodSpec,
    /// Status.
    #[serde(deserialize_with = "nullable")]
    pub status: PodStatus,
    /// The site it was read from (docs/sites.md): where its services are
    /// reached.
    #[serde(skip)]
    pub site: super::Site,
}

impl ObservedPod {
    /// The cluster the pod belongs to (KubeRay's `ray.io/cluster` label).
    pub fn cluster_name(&self) -> Option<&str> {
        self.metadata
            .labels
            .get(crate::manifest::LABEL_CLUSTER)
            .map(Atom::as_str)
    }
}

/// A pod's spec, the parts krayne reads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(from = "RawPodSpec")]
pub struct PodSpec {
    /// Node it is bound to.
    pub node_name: Option<Atom>,
    /// Its containers' names, Ray's first (a log is read by container).
    pub containers: Shared<Vec<Atom>>,
    /// Its init containers' names.
    pub init_containers: Shared<Vec<Atom>>,
    /// What it holds of a node while it runs: its containers' requests
    /// (else limits) together.
    pub charge: Shared<super::PodCharge>,
}

/// A pod's spec as Kubernetes sends it, read once into [`PodSpec`].
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct RawPodSpec {
    node_name: Option<Atom>,
    #[serde(deserialize_with = "nullable")]
    containers: Vec<RawContainer>,
    #[serde(deserialize_with = "names")]
    init_containers: Vec<Atom>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawContainer {
    name: String,
    #[serde(deserialize_with = "nullable")]
    resources: Resources,
}

impl From<RawPodSpec> for PodSpec {
    fn from(raw: RawPodSpec) -> Self {
        let charge = super::PodCharge::of(raw.containers.iter().map(|c| &c.resources));
        let mut containers: Vec<Atom> = raw.containers.into_iter().map(|c| Atom::from(c.name)).collect();
        containers.shrink_to_fit();
        let (containers, charge) = (Shared::new(containers), Shared::new(charge));
        Self {
            node_name: raw.node_name,
            containers,
            init_containers: Shared::new(raw.init_containers),
            charge,
        }
    }
}

/// The `name`s of a list of containers.
fn names<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Atom>, D::Error> {
    #[derive(Deserialize)]
    struct Named {
        #[serde(default)]
        name: String,
    }
    let list: Vec<Named> = nullable(d)?;
    let mut names: Vec<Atom> = list.into_iter().map(|c| Atom::from(c.name)).collect();
    names.shrink_to_fit();
    Ok(names)
}

/// A pod's containers' and init containers' names.
pub fn container_names(pod: &ObservedPod) -> (Vec<String>, Vec<String>) {
    let owned = |names: &[Atom]| names.iter().map(|n| n.as_str().to_owned()).collect();
    (owned(&pod.spec.containers), owned(&pod.spec.init_containers))
}

/// A pod's status.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodStatus {
    /// Phase.
    pub phase: Option<Atom>,
    /// What reads need of its conditions.
    pub conditions: PodConditions,
    /// Container statuses.
    #[serde(deserialize_with = "shrunk")]
    pub container_statuses: Vec<ContainerStatus>,
    /// Pod IP.
    #[serde(rename = "podIP")]
    pub pod_ip: Option<ShortText>,
}

/// A container's status.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ContainerStatus {
    /// Current state.
    #[serde(deserialize_with = "nullable")]
    pub state: ContainerState,
    /// Restarts.
    pub restart_count: Option<i64>,
    /// Whether it passes its readiness probe.
    pub ready: Option<bool>,
}

/// A container's state; at most one part is set. Waiting and terminated
/// are boxed: most cached containers run, and a cache of 200 000 pods
/// should not carry room for their reasons inline.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ContainerState {
    /// Waiting, with why.
    pub waiting: Option<Box<StateReason>>,
    /// Running, since when.
    pub running: Option<Running>,
    /// Terminated, with why.
    pub terminated: Option<Box<StateReason>>,
}

/// Reason and message of a container state.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StateReason {
    /// Reason, e.g. `ImagePullBackOff`.
    pub reason: Option<Atom>,
    /// Message.
    pub message: Option<Atom>,
    /// When it terminated (RFC 3339).
    pub finished_at: Option<ShortText>,
}

/// A running container's state.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Running {
    /// When it started (RFC 3339).
    pub started_at: Option<ShortText>,
}

impl PodStatus {
    /// When its containers first ran: the earliest `startedAt` of those
    /// running now (RFC 3339).
    pub fn running_since(&self) -> Option<&str> {
        self.container_statuses
            .iter()
            .filter_map(|c| c.state.running.as_ref()?.started_at.as_deref())
            .min()
    }

    /// When its last container ended, if they all have (RFC 3339).
    pub fn finished_at(&self) -> Option<&str> {
        let mut latest = None;
        for status in &self.container_statuses {
            let finished = status.state.terminated.as_ref()?.finished_at.as_deref()?;
            latest = latest.max(Some(finished));
        }
        latest
    }
}

/// A Kubernetes event (`core/v1`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObservedEvent {
    /// Metadata.
    #[serde(deserialize_with = "nullable")]
    pub metadata: ObjectMeta,
    /// `Normal` / `Warning`.
    #[serde(rename = "type")]
    pub type_: Option<Atom>,
    /// Reason.
    pub reason: Option<Atom>,
    /// Message.
    pub message: Option<Atom>,
    /// The object it is about.
    #[serde(deserialize_with = "nullable")]
    pub involved_object: InvolvedObject,
    /// Occurrences.
    pub count: Option<i64>,
    /// Last occurrence.
    pub last_timestamp: Option<Atom>,
    /// Occurrence time of events that use `eventTime` instead.
    pub event_time: Option<Atom>,
}

/// An event's subject.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct InvolvedObject {
    /// Kind.
    pub kind: Option<Atom>,
    /// Name.
    pub name: Option<Atom>,
}

/// What reads need of a pod's conditions: whether it is ready, and why it
/// is not scheduled when it is not. Their other fields (times, the other
/// conditions) are read and dropped: kept, they were a third of a cached
/// pod's heap.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodConditions {
    /// `Ready` is `True`.
    pub ready: bool,
    /// `PodScheduled` is `False`: its reason and message (boxed: rare).
    pub unscheduled: Option<Box<Unscheduled>>,
}

/// Why a pod is not scheduled, in the scheduler's words.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unscheduled {
    /// E.g. `Unschedulable`.
    pub reason: Option<Atom>,
    /// E.g. `0/3 nodes are available: …`.
    pub message: Option<Atom>,
}

impl<'de> Deserialize<'de> for PodConditions {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut kept = Self::default();
        for c in Option::<Vec<ObservedCondition>>::deserialize(d)?.unwrap_or_default() {
            if c.is_true("Ready") {
                kept.ready = true;
            }
            if c.type_ == "PodScheduled" && c.status == "False" {
                kept.unscheduled = Some(Box::new(Unscheduled {
                    reason: c.reason,
                    message: c.message,
                }));
            }
        }
        Ok(kept)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn explicit_nulls_read_as_empty() {
        let pod: ObservedPod = serde_json::from_value(json!({
            "metadata": {"name": "p", "labels": null},
            "status": {"phase": "Pending", "conditions": null, "containerStatuses": null},
        }))
        .unwrap();
        assert!(pod.metadata.labels.is_empty());
        assert_eq!(pod.status.conditions, PodConditions::default());
        let c: ObservedCluster = serde_json::from_value(json!({"status": null})).unwrap();
        assert!(c.status.state.is_none());
    }

    #[test]
    fn only_the_labels_and_annotations_reads_use_are_kept() {
        let pod: ObservedPod = serde_json::from_value(json!({
            "metadata": {"name": "p",
                "labels": {"ray.io/cluster": "c", "ray.io/node-type": "head", "ray.io/group": "headgroup",
                           "app.kubernetes.io/name": "kuberay", "ray.io/is-ray-node": "yes"},
                "annotations": {"krayne.dev/created-by": "alice", "kubectl.kubernetes.io/last-applied-configuration": {"big": [1, 2]}}},
        }))
        .unwrap();
        let labels: Vec<&str> = pod.metadata.labels.keys().copied().collect();
        assert_eq!(labels, ["ray.io/cluster", "ray.io/group", "ray.io/node-type"]);
        assert_eq!(pod.cluster_name(), Some("c"));
        assert_eq!(
            pod.metadata.annotations.get("krayne.dev/created-by").map(Atom::as_str),
            Some("alice")
        );
        assert_eq!(pod.metadata.annotations.len(), 1);
    }

    #[test]
    fn a_pods_conditions_keep_readiness_and_why_it_is_unscheduled() {
        let pod: ObservedPod = serde_json::from_value(json!({"status": {"conditions": [
            {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-11-24T00:00:00Z"},
            {"type": "Ready", "status": "True"},
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1 nodes"},
        ]}}))
        .unwrap();
        let wanted = PodConditions {
            ready: true,
            unscheduled: Some(Box::new(Unscheduled {
                reason: Some("Unschedulable".into()),
                message: Some("0/1 nodes".into()),
            })),
        };
        assert_eq!(pod.status.conditions, wanted);
        let scheduled: ObservedPod = serde_json::from_value(json!({"status": {"conditions": [
            {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False"}]}}))
        .unwrap();
        assert_eq!(scheduled.status.conditions, PodConditions::default());
    }

    #[test]
    fn scalars_the_crd_types_as_strings_read_as_their_text() {
        let cluster: ObservedCluster = serde_json::from_value(json!({"spec": {"headGroupSpec": {
            "rayStartParams": {"num-cpus": 0, "dashboard-host": "0.0.0.0", "block": true, "x": null},
            "headService": {"spec": {"ports": [
                {"name": "dashboard", "port": 8265, "targetPort": 8265},
                {"name": "client", "port": 10001, "targetPort": "client"},
                {"name": "gcs", "port": 6379}]}},
            "template": {"spec": {"containers": [{"resources": {"requests": {"cpu": 2, "memory": "4Gi"}, "limits": null}}]}},
        }}}))
        .unwrap();
        let head = &cluster.spec.head_group_spec;
        let params: Vec<(&str, &str)> = head.ray_start_params.iter().map(|(k, v)| (&**k, &**v)).collect();
        assert_eq!(
            params,
            [
                ("block", "true"),
                ("dashboard-host", "0.0.0.0"),
                ("num-cpus", "0"),
                ("x", "")
            ]
        );
        let targets: Vec<Option<&str>> = head
            .head_service
            .spec
            .ports
            .iter()
            .map(|p| p.target_port.as_deref())
            .collect();
        assert_eq!(targets, [Some("8265"), Some("client"), None]);
        let resources = &head.template.spec.containers[0].resources;
        assert_eq!(resources.requests.get("cpu").map(Atom::as_str), Some("2"));
        assert_eq!(resources.requests.get("memory").map(Atom::as_str), Some("4Gi"));
        assert!(resources.limits.is_empty());
        let bad = serde_json::from_value::<ObservedCluster>(
            json!({"spec": {"headGroupSpec": {"rayStartParams": {"a": [1]}}}}),
        );
        assert!(bad.is_err(), "a list is no scalar");
    }

    #[test]
    fn parsed_lists_keep_no_spare_capacity() {
        let ports: Vec<_> = (1..=5).map(|p| json!({"containerPort": p})).collect();
        let cluster: ObservedCluster = serde_json::from_value(json!({"spec": {
            "headGroupSpec": {"template": {"spec": {"containers": [{"name": "ray-head", "ports": ports}]}}},
            "workerGroupSpecs": [{"groupName": "w"}],
        }}))
        .unwrap();
        let head = &cluster.spec.head_group_spec.template.spec.containers;
        assert_eq!((head.capacity(), head[0].ports.capacity()), (1, 5));
        assert_eq!(cluster.spec.worker_group_specs.capacity(), 1);
        let pod: ObservedPod =
            serde_json::from_value(json!({"status": {"containerStatuses": [{"ready": true}]}})).unwrap();
        assert_eq!(pod.status.container_statuses.capacity(), 1);
    }

    #[test]
    fn a_groups_pods_share_their_labels_containers_and_charge() {
        let pod = |name: &str| -> ObservedPod {
            serde_json::from_value(json!({
                "metadata": {"name": name, "uid": name, "resourceVersion": "7",
                    "labels": {"ray.io/cluster": "c", "ray.io/group": "gpu", "ray.io/node-type": "worker", "pod-template-hash": name}},
                "spec": {"containers": [{"name": "ray-worker", "resources": {"requests": {"cpu": "2"}}}],
                    "initContainers": [{"name": "wait-gcs-ready"}]},
            }))
            .unwrap()
        };
        let (a, b) = (pod("c-gpu-1"), pod("c-gpu-2"));
        assert!(std::ptr::eq(&*a.metadata.labels, &*b.metadata.labels));
        assert!(std::ptr::eq(&*a.spec.containers, &*b.spec.containers));
        assert!(std::ptr::eq(&*a.spec.init_containers, &*b.spec.init_containers));
        assert!(std::ptr::eq(&*a.spec.charge, &*b.spec.charge));
        assert_eq!(a.spec.charge.cpu_millis, 2000);
        assert_eq!(a.metadata.resource_version.as_deref(), Some("7"));
        let mut moved = a.clone();
        moved
            .metadata
            .labels
            .edit(|l| _ = l.insert(crate::manifest::LABEL_GROUP, "cpu".into()));
        assert_eq!(
            moved
                .metadata
                .labels
                .get(crate::manifest::LABEL_GROUP)
                .map(Atom::as_str),
            Some("cpu")
        );
        assert_eq!(
            a.metadata.labels.get(crate::manifest::LABEL_GROUP).map(Atom::as_str),
            Some("gpu")
        );
    }
}
