//! What krayne reports about a cluster: Krayne's `ClusterInfo` and
//! `ClusterDetails`, plus pods, events and KubeRay's conditions.

use std::fmt;

use serde::{Serialize, Serializer};

/// A cluster's derived status (Krayne 0.3.8's pod-aware rules).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterStatus {
    /// Accepted; no pods yet.
    Creating,
    /// Pods are running but Ray is not known to be ready.
    Running,
    /// Ray is up.
    Ready,
    /// Suspended: pods deleted, object kept.
    Suspended,
    /// Waiting in its namespace's line for quota (docs/quotas.md), or in
    /// its Kueue LocalQueue (docs/kueue.md): suspended until admitted.
    Queued,
    /// Kueue took its quota back for another workload (a higher priority,
    /// or a lender reclaiming): suspended, waiting to be admitted again.
    Preempted,
    /// Kueue evicted it for another reason (its reason says which):
    /// suspended, waiting to be admitted again.
    Evicted,
    /// Asked to suspend; KubeRay is deleting its pods.
    Suspending,
    /// The head pod does not fit on any node.
    Unschedulable,
    /// The head image cannot be pulled.
    ImagePullError,
    /// The head container keeps crashing.
    CrashLoop,
    /// The head's containers are being created.
    ContainersCreating,
    /// Pods wait to start.
    PodsPending,
    /// Pods failed.
    PodsFailed,
    /// Nothing tells.
    Unknown,
    /// KubeRay's `status.state`, lowercased, when it is none of the above.
    Other(String),
}

impl ClusterStatus {
    /// Every status krayne derives itself (all but `Other`).
    pub const KNOWN: [Self; 15] = [
        Self::Creating,
        Self::Running,
        Self::Ready,
        Self::Suspended,
        Self::Queued,
        Self::Preempted,
        Self::Evicted,
        Self::Suspending,
        Self::Unschedulable,
        Self::ImagePullError,
        Self::CrashLoop,
        Self::ContainersCreating,
        Self::PodsPending,
        Self::PodsFailed,
        Self::Unknown,
    ];

    /// Whether the status says the head is not running (it cannot pull
    /// its image, keeps crashing, has no room, or failed): its workers'
    /// count says nothing then, they wait for it.
    pub fn is_head_down(&self) -> bool {
        matches!(
            self,
            Self::ImagePullError | Self::CrashLoop | Self::Unschedulable | Self::PodsFailed
        )
    }

    /// The status string Krayne uses.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Creating => "creating",
            Self::Running => "running",
            Self::Ready => "ready",
            Self::Suspended => "suspended",
            Self::Queued => "queued",
            Self::Preempted => "preempted",
            Self::Evicted => "evicted",
            Self::Suspending => "suspending",
            Self::Unschedulable => "unschedulable",
            Self::ImagePullError => "image-pull-error",
            Self::CrashLoop => "crash-loop",
            Self::ContainersCreating => "containers-creating",
            Self::PodsPending => "pods-pending",
            Self::PodsFailed => "pods-failed",
            Self::Unknown => "unknown",
            Self::Other(s) => s,
        }
    }

    /// Parses a status string; anything unknown is kept as `Other`.
    pub fn parse(s: &str) -> Self {
        Self::KNOWN
            .into_iter()
            .find(|k| k.as_str() == s)
            .unwrap_or_else(|| Self::Other(s.to_owned()))
    }
}

impl fmt::Display for ClusterStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ClusterStatus {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A cluster's summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct ClusterInfo {
    /// Cluster name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// `creating`, `running`, `ready`, `suspending`, `suspended`, `queued`,
    /// `preempted`, `evicted`, `unschedulable`,
    /// `image-pull-error`, `crash-loop`, `containers-creating`,
    /// `pods-pending`, `pods-failed`, `unknown`, or KubeRay's own state.
    pub status: ClusterStatus,
    /// Head pod IP, else head service IP.
    pub head_ip: Option<String>,
    /// Ray dashboard, in-cluster (`http://<head_ip>:8265`, as Krayne
    /// reports it): through krayne, see `ClusterDetails.proxy_urls`.
    pub dashboard_url: Option<String>,
    /// Ray client address.
    pub client_url: Option<String>,
    /// Jupyter, when on.
    pub notebook_url: Option<String>,
    /// code-server, when on.
    pub code_server_url: Option<String>,
    /// SSH, when on.
    pub ssh_url: Option<String>,
    /// Desired workers over all groups.
    pub num_workers: u32,
    /// Whether Ray's autoscaler runs.
    pub autoscaling_enabled: bool,
    /// Creation time (RFC 3339).
    #[cfg_attr(feature = "schema", schema(format = DateTime))]
    pub created_at: Option<String>,
    /// Workers KubeRay reports ready.
    pub ready_workers: u32,
    /// Whether suspended.
    pub suspended: bool,
    /// Subject that created it through krayne.
    pub created_by: Option<String>,
    /// Kubernetes resourceVersion this summary was read at.
    pub resource_version: Option<String>,
    /// What the namespace's lifecycle policy will do to it next, when and
    /// why, as the reaper last planned (`suspend at 2026-11-27T09:00:00Z:
    /// idle 2h`); docs/lifecycle.md.
    pub lifecycle: Option<String>,
    /// When its owner was warned of `lifecycle` (RFC 3339): the action
    /// comes no sooner than the policy's `warn_before` after it.
    #[cfg_attr(feature = "schema", schema(format = DateTime))]
    pub lifecycle_warned_at: Option<String>,
    /// Since when nothing has used it (RFC 3339): no job, tunnel, proxied
    /// connection, browser session or followed log, and no Ray resource
    /// in use. Null while in use, or when its use cannot be told.
    #[cfg_attr(feature = "schema", schema(format = DateTime))]
    pub idle_since: Option<String>,
    /// When the lifecycle policy will suspend it (RFC 3339).
    #[cfg_attr(feature = "schema", schema(format = DateTime))]
    pub suspends_at: Option<String>,
    /// When the lifecycle policy will delete it (RFC 3339).
    #[cfg_attr(feature = "schema", schema(format = DateTime))]
    pub expires_at: Option<String>,
    /// Until when its owner keeps it from the lifecycle policy (`krayne
    /// keep`; RFC 3339).
    #[cfg_attr(feature = "schema", schema(format = DateTime))]
    pub kept_until: Option<String>,
    /// Its place in its namespace's line (1-based) while `queued`.
    pub queue_position: Option<u32>,
    /// When it joined the line (RFC 3339), while `queued`.
    #[cfg_attr(feature = "schema", schema(format = DateTime))]
    pub queued_since: Option<String>,
    /// Why it waits, while `queued`: which resource is short and by how
    /// much (`gpus: needs 4, 0 of 8 free`), or the cluster ahead of it.
    pub queue_reason: Option<String>,
    /// The site (Kubernetes cluster) it lives in (docs/sites.md); `local`
    /// when the server fronts one.
    #[cfg_attr(feature = "schema", schema(example = "local"))]
    pub site: String,
    /// Since when its site's Kubernetes has not answered (RFC 3339), when
    /// it has not: the rest is the cluster's last known state
    /// (docs/sites.md). Said by get, describe and lists.
    #[cfg_attr(feature = "schema", schema(format = DateTime))]
    pub site_unavailable_since: Option<String>,
}

/// A cluster's summary as reads share it: built from the cluster and its
/// pods, and encoded to JSON at most once, however many lists and watches
/// send it.
#[derive(Debug)]
pub struct Summary {
    /// The summary.
    pub info: ClusterInfo,
    json: std::sync::OnceLock<Box<str>>,
    /// This summary marked by [`Summary::site_unavailable`], for the
    /// outage that began at the time it holds.
    marked: std::sync::OnceLock<(Box<str>, std::sync::Arc<Summary>)>,
}

impl Summary {
    /// A summary to share.
    pub fn new(info: ClusterInfo) -> Self {
        Self {
            info,
            json: std::sync::OnceLock::new(),
            marked: std::sync::OnceLock::new(),
        }
    }

    /// The summary as JSON (as REST sends a `ClusterInfo`).
    pub fn json(&self) -> &str {
        self.json
            .get_or_init(|| serde_json::to_string(&self.info).unwrap_or_default().into_boxed_str())
    }

    /// The same summary, its site unavailable since `since` (RFC 3339):
    /// made once per summary and outage, its JSON this one's with the last
    /// field set. A list marks every cluster of a site that does not
    /// answer, on every request while the outage lasts.
    pub fn site_unavailable(&self, since: &str) -> std::sync::Arc<Self> {
        if let Some((at, marked)) = self.marked.get()
            && **at == *since
        {
            return marked.clone();
        }
        const UNMARKED: &str = "\"site_unavailable_since\":null}";
        let mut info = self.info.clone();
        info.site_unavailable_since = Some(since.to_owned());
        let json = std::sync::OnceLock::new();
        if let (Some(head), Ok(quoted)) = (self.json().strip_suffix(UNMARKED), serde_json::to_string(since)) {
            let _ = json.set(format!("{head}\"site_unavailable_since\":{quoted}}}").into_boxed_str());
        }
        let marked = std::sync::Arc::new(Self {
            info,
            json,
            marked: std::sync::OnceLock::new(),
        });
        let _ = self.marked.set((since.into(), marked.clone()));
        marked
    }
}

#[cfg(test)]
mod summary_tests {
    use super::*;

    #[test]
    fn a_marked_summary_says_what_encoding_it_again_would() {
        let mut info = crate::manifest::cluster_info(&super::super::ObservedCluster::default(), Some(&[]));
        info.site = "us-2".into();
        let summary = Summary::new(info);
        let marked = summary.site_unavailable("2026-11-29T12:00:00Z");
        let again = serde_json::to_string(&marked.info).unwrap();
        assert_eq!(marked.json(), again);
        let same = summary.site_unavailable("2026-11-29T12:00:00Z");
        assert!(std::sync::Arc::ptr_eq(&marked, &same), "made once per outage");
        let later = summary.site_unavailable("2026-11-29T13:00:00Z");
        assert_eq!(
            later.info.site_unavailable_since.as_deref(),
            Some("2026-11-29T13:00:00Z")
        );
        assert!(again.ends_with(r#""site_unavailable_since":"2026-11-29T12:00:00Z"}"#));
    }
}

impl PartialEq for Summary {
    fn eq(&self, other: &Self) -> bool {
        self.info == other.info
    }
}

/// A cluster's full picture.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct ClusterDetails {
    /// The summary.
    pub info: ClusterInfo,
    /// The head as deployed.
    pub head: HeadDetails,
    /// Worker groups as deployed.
    pub worker_groups: Vec<WorkerGroupDetails>,
    /// Ray version from the head image tag.
    pub ray_version: String,
    /// Python version (`unknown`, as Krayne reports it).
    pub python_version: String,
    /// Services on the head.
    #[cfg_attr(feature = "schema", schema(schema_with = super::schema::service_names))]
    pub services: Vec<String>,
    /// KubeRay's conditions.
    pub conditions: Vec<Condition>,
    /// Pods, head first.
    pub pods: Vec<PodInfo>,
    /// Recent events, oldest first.
    pub events: Vec<EventInfo>,
    /// Each HTTP service's URL through this server (its proxy), by
    /// service name: absolute when the server knows its public URL, else
    /// a path on this server. The `*_url` fields of `info` are in-cluster
    /// addresses.
    pub proxy_urls: std::collections::BTreeMap<String, String>,
}

/// The head as deployed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct HeadDetails {
    /// CPU.
    pub cpus: String,
    /// Memory.
    pub memory: String,
    /// GPUs.
    pub gpus: u32,
    /// Image.
    pub image: String,
    /// Whether Ray schedules tasks on the head.
    pub runs_tasks: bool,
}

/// A worker group as deployed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct WorkerGroupDetails {
    /// Name.
    pub name: String,
    /// Desired workers.
    pub replicas: u32,
    /// Lower bound.
    pub min_replicas: u32,
    /// Upper bound.
    pub max_replicas: u32,
    /// CPU per worker.
    pub cpus: String,
    /// Memory per worker.
    pub memory: String,
    /// GPUs per worker.
    pub gpus: u32,
    /// Image.
    pub image: String,
}

/// A Kubernetes-style condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct Condition {
    /// Type.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False`, `Unknown`.
    #[cfg_attr(feature = "schema", schema(schema_with = super::schema::condition_status))]
    pub status: String,
    /// Reason.
    pub reason: Option<String>,
    /// Message.
    pub message: Option<String>,
    /// Last change.
    #[cfg_attr(feature = "schema", schema(format = DateTime))]
    pub last_transition_time: Option<String>,
}

/// A pod of the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct PodInfo {
    /// Name.
    pub name: String,
    /// `head` or `worker`.
    pub node_type: String,
    /// Worker group; empty for the head.
    pub group: String,
    /// Kubernetes' pod phase.
    #[cfg_attr(feature = "schema", schema(schema_with = super::schema::pod_phase))]
    pub phase: String,
    /// Ready.
    pub ready: bool,
    /// What is wrong, if anything.
    pub reason: Option<String>,
    /// Detail.
    pub message: Option<String>,
    /// Pod IP.
    pub pod_ip: Option<String>,
    /// Node.
    pub node_name: Option<String>,
    /// Container restarts.
    pub restarts: u32,
    /// Creation time.
    #[cfg_attr(feature = "schema", schema(format = DateTime))]
    pub created_at: Option<String>,
}

/// A Kubernetes event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct EventInfo {
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    #[cfg_attr(feature = "schema", schema(schema_with = super::schema::event_type))]
    pub type_: String,
    /// Reason.
    pub reason: String,
    /// Message.
    pub message: String,
    /// Kind of the object.
    pub object_kind: String,
    /// Name of the object.
    pub object_name: String,
    /// Occurrences.
    pub count: u32,
    /// Last occurrence.
    #[cfg_attr(feature = "schema", schema(format = DateTime))]
    pub last_seen: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::ClusterStatus;

    /// The CLI (which sees statuses as strings) keeps the same list in
    /// `cli/src/commands/cluster/mod.rs` (`HEAD_DOWN`).
    #[test]
    fn the_head_is_down_when_it_cannot_pull_crashes_has_no_room_or_failed() {
        let down: Vec<&str> = ClusterStatus::KNOWN
            .iter()
            .filter(|s| s.is_head_down())
            .map(ClusterStatus::as_str)
            .collect();
        assert_eq!(down, ["unschedulable", "image-pull-error", "crash-loop", "pods-failed"]);
    }

    #[test]
    fn status_strings_round_trip() {
        for s in [
            "creating",
            "running",
            "ready",
            "suspended",
            "queued",
            "preempted",
            "evicted",
            "suspending",
            "unschedulable",
            "image-pull-error",
            "crash-loop",
            "containers-creating",
            "pods-pending",
            "pods-failed",
            "unknown",
            "failed",
        ] {
            assert_eq!(ClusterStatus::parse(s).as_str(), s);
        }
        assert_eq!(ClusterStatus::parse("failed"), ClusterStatus::Other("failed".into()));
    }
}
