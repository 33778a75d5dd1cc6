//! Pure translation between krayne's model and KubeRay objects:
//! `ClusterSpec` → RayCluster manifest, and RayCluster (+ pods, events) →
//! status, `ClusterInfo` and `ClusterDetails`. No I/O.

mod bootstrap;
mod build;
mod describe;
pub mod head_ports;
mod lifecycle_event;
mod network_policy;
mod queue;
mod ray_auth;
mod rayjob;
mod scale;
mod services;
mod status;
mod stuck;
mod suspend;

pub use crate::domain::{ObservedCluster, ObservedEvent, ObservedPod};
pub use bootstrap::bootstrap_script;
pub use build::{
    DEFAULT_RAY_IMAGE, KRAYNE_REFERENCE_IMAGE, ManifestSettings, NOTEBOOK_BASE_URL_ENV, PodSecurity, Provenance,
    RayAuthNames, build_manifest, render,
};
pub use describe::{SERVICE_NAMES, cluster_details, cluster_info, ray_version};
pub use lifecycle_event::{LIFECYCLE_COMPONENT, lifecycle_event, rayjob_event};
pub use network_policy::{HeldPolicy, PolicyPeers, network_policy, network_policy_name, policy_digest};
pub use queue::{
    Place, admit_patch, enqueue_patch, for_kueue, leave_line_patch, place_patch, queued, queued_rayjob,
    rayjob_for_kueue,
};
pub use ray_auth::{
    DRY_RUN_NONCE, RayAuth, auth_options, ray_auth_of, ray_auth_secret, ray_auth_secret_name, rayjob_token_secret,
};
pub use rayjob::{LABEL_ORIGIN_CRD, LABEL_ORIGIN_NAME, RAYJOB_KIND, RAYJOBS, SUBMISSION_MODE, build_rayjob};
pub use scale::{ScaleInput, ScalePlan, check_scale_input, plan_scale, scale_patch};
pub use services::{DeclaredService, declared_services, proxy_path, serving_head, tunnel_path};
pub use status::derive_status;
pub use stuck::{CRASH_LOOP_RESTARTS, HeadStuck, head_stuck};
pub use suspend::{annotations_patch, annotations_patch_of, keep_patch, suspend_patch};

/// KubeRay's API group.
pub const KUBERAY_GROUP: &str = "ray.io";
/// The version of KubeRay's API krayne speaks.
pub const KUBERAY_VERSION: &str = "v1";
/// `apiVersion` of a RayCluster.
pub const KUBERAY_API_VERSION: &str = "ray.io/v1";
/// Kind of a RayCluster.
pub const RAYCLUSTER_KIND: &str = "RayCluster";
/// Plural resource name of RayClusters (RBAC, URLs).
pub const RAYCLUSTERS: &str = "rayclusters";

/// Label KubeRay puts on every pod of a cluster (value: cluster name).
pub const LABEL_CLUSTER: &str = "ray.io/cluster";
/// Label KubeRay puts on pods: `head` or `worker`.
pub const LABEL_NODE_TYPE: &str = "ray.io/node-type";
/// Label KubeRay puts on pods: the worker group name (`headgroup` for the head).
pub const LABEL_GROUP: &str = "ray.io/group";
/// Annotation krayne adds: the subject that created the cluster.
pub const ANNOTATION_CREATED_BY: &str = "krayne.dev/created-by";
/// Until when the owner keeps the cluster from its lifecycle policy
/// (RFC 3339).
pub const ANNOTATION_KEEP_UNTIL: &str = "krayne.dev/keep-until";
/// When the lifecycle reaper warned the owner (RFC 3339).
pub const ANNOTATION_WARNED_AT: &str = "krayne.dev/lifecycle-warned-at";
/// What the lifecycle reaper will do next, when and why, as it last
/// decided (`suspend at 2026-11-27T09:00:00Z: lifetime 7d reached`).
pub const ANNOTATION_LIFECYCLE: &str = "krayne.dev/lifecycle";
/// Since when nothing has used the cluster, as the lifecycle reaper last
/// found (RFC 3339; absent while it is in use or its use cannot be told).
pub const ANNOTATION_IDLE_SINCE: &str = "krayne.dev/idle-since";
/// When a cluster joined its namespace's line (RFC 3339; docs/quotas.md):
/// set on a suspended cluster waiting for quota, removed when admitted.
/// The line is ordered by it, then by name.
pub const ANNOTATION_QUEUED_SINCE: &str = "krayne.dev/queued-since";
/// A waiting cluster's place in its namespace's line (1-based), as the
/// admitter last counted it.
pub const ANNOTATION_QUEUE_POSITION: &str = "krayne.dev/queue-position";
/// Why a waiting cluster waits (`gpus: needs 4, 0 of 8 free`), as the
/// admitter last found.
pub const ANNOTATION_QUEUE_REASON: &str = "krayne.dev/queue-reason";
/// When a cluster that waited in line was admitted (RFC 3339): its
/// lifetime counts from then.
pub const ANNOTATION_ADMITTED_AT: &str = "krayne.dev/admitted-at";
/// What ended a waiting cluster's last admission, when Kueue took it back:
/// `preempted` or `evicted` (docs/kueue.md).
pub const ANNOTATION_QUEUE_STATE: &str = "krayne.dev/queue-state";
/// Kueue's label naming the LocalQueue a RayCluster waits in: with it,
/// Kueue admits the cluster (docs/kueue.md).
pub const LABEL_KUEUE_QUEUE: &str = "kueue.x-k8s.io/queue-name";
/// Label krayne adds: the team the creator acted for.
pub const LABEL_TEAM: &str = "krayne.dev/team";
/// On a worker group's pods: the GPU type the group asked for (its
/// `gpu_type`), which placed the cluster in a site offering it.
pub const LABEL_GPU_TYPE: &str = "krayne.dev/gpu-type";
/// Annotation holding the nonce a cluster's Ray token is derived with
/// (chosen when krayne creates it; not a secret without the key).
pub const ANNOTATION_RAY_AUTH_NONCE: &str = "krayne.dev/ray-auth-nonce";
