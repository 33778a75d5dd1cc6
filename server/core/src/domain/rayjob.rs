//! RayJobs as krayne reads them from Kubernetes, and as it shows them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ClusterStatus, ObjectMeta, observed::nullable};

/// A RayJob as observed: what krayne reads of it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ObservedRayJob {
    /// Metadata.
    #[serde(deserialize_with = "nullable")]
    pub metadata: ObjectMeta,
    /// Spec.
    #[serde(deserialize_with = "nullable")]
    pub spec: RayJobSpec,
    /// Status, filled by KubeRay.
    #[serde(deserialize_with = "nullable")]
    pub status: RayJobStatus,
    /// The site it was read from (the store that read it says;
    /// docs/sites.md).
    #[serde(skip)]
    pub site: super::Site,
}

/// `RayJob.spec`, the parts krayne reads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RayJobSpec {
    /// The command the job runs.
    pub entrypoint: String,
    /// The Ray job id KubeRay follows.
    pub job_id: Option<String>,
    /// `InteractiveMode`, `K8sJobMode`, …
    pub submission_mode: Option<String>,
    /// Whether the cluster goes once the job has ended.
    pub shutdown_after_job_finishes: Option<bool>,
    /// Seconds from the job's end to the cluster's deletion.
    pub ttl_seconds_after_finished: Option<i64>,
    /// Longest the RayJob may take from its start.
    pub active_deadline_seconds: Option<i64>,
    /// The job's runtime env, as YAML.
    #[serde(rename = "runtimeEnvYAML")]
    pub runtime_env_yaml: Option<String>,
    /// The cluster KubeRay makes (a RayCluster's `spec`), kept whole: the
    /// quota charges it before the cluster exists.
    pub ray_cluster_spec: Option<Value>,
    /// Whether it is suspended (Kueue's admission).
    pub suspend: Option<bool>,
    /// CPUs reserved for the entrypoint.
    pub entrypoint_num_cpus: Option<f64>,
    /// GPUs reserved for the entrypoint.
    pub entrypoint_num_gpus: Option<f64>,
}

/// `RayJob.status`, the parts krayne reads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RayJobStatus {
    /// KubeRay's stage: `Initializing`, `Waiting`, `Running`, `Complete`,
    /// `Failed`, `ValidationFailed`, `Suspended`, …
    pub job_deployment_status: Option<String>,
    /// Ray's job status: `PENDING`, `RUNNING`, `SUCCEEDED`, `FAILED`,
    /// `STOPPED` (empty until the job is seen).
    pub job_status: Option<String>,
    /// The job's cluster.
    pub ray_cluster_name: Option<String>,
    /// The Ray job id KubeRay follows.
    pub job_id: Option<String>,
    /// When KubeRay started on it (RFC 3339).
    pub start_time: Option<String>,
    /// When it ended (RFC 3339).
    pub end_time: Option<String>,
    /// Why it failed (`AppFailed`, `DeadlineExceeded`, …).
    pub reason: Option<String>,
    /// KubeRay's or Ray's account.
    pub message: Option<String>,
}

/// Where a RayJob is, in krayne's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum RunState {
    /// Its cluster is being made.
    Starting,
    /// Its cluster is ready; the job is being submitted.
    Submitting,
    /// The job runs.
    Running,
    /// The job ended with exit code 0.
    Succeeded,
    /// The job failed, or KubeRay ended it (a deadline).
    Failed,
    /// The job was stopped.
    Stopped,
    /// KubeRay refused its spec.
    Invalid,
    /// Held by an admission queue.
    Suspended,
    /// Waiting in its namespace's line for quota (docs/quotas.md): no
    /// cluster yet.
    Queued,
}

impl RunState {
    /// `starting`, `running`, …
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Submitting => "submitting",
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Stopped => "stopped",
            Self::Invalid => "invalid",
            Self::Suspended => "suspended",
            Self::Queued => "queued",
        }
    }

    /// Whether the job has ended (it will not run again).
    pub fn is_over(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Stopped | Self::Invalid)
    }
}

impl ObservedRayJob {
    /// Its state, from KubeRay's stage and Ray's status; an ended one is
    /// ended whatever place it had, and one suspended in a line (krayne's,
    /// or Kueue's, which suspends it to take it back) is `Queued`.
    pub fn state(&self) -> RunState {
        let s = &self.status;
        let ray = s.job_status.as_deref().unwrap_or("");
        let waits = self.queued_since().is_some() || (self.spec.suspend == Some(true) && self.kueue_queue().is_some());
        match s.job_deployment_status.as_deref().unwrap_or("") {
            "Complete" if ray == "STOPPED" => RunState::Stopped,
            "Complete" => RunState::Succeeded,
            "Failed" => RunState::Failed,
            "ValidationFailed" => RunState::Invalid,
            _ if waits => RunState::Queued,
            // Resumed, KubeRay moves it on from there: it starts again.
            "Suspended" | "Suspending" if self.spec.suspend == Some(true) => RunState::Suspended,
            "Waiting" => RunState::Submitting,
            "Running" if ray.is_empty() || ray == "PENDING" => RunState::Submitting,
            "Running" => RunState::Running,
            _ => RunState::Starting,
        }
    }

    /// When it joined its namespace's line, while it waits there
    /// (suspended, with krayne's place): it holds no quota.
    pub fn queued_since(&self) -> Option<jiff::Timestamp> {
        if self.spec.suspend != Some(true) {
            return None;
        }
        self.annotation(crate::manifest::ANNOTATION_QUEUED_SINCE)
            .and_then(|t| t.parse().ok())
    }

    /// The Kueue LocalQueue it waits in or was admitted through, when
    /// the platform's Kueue admits it (docs/kueue.md).
    pub fn kueue_queue(&self) -> Option<&str> {
        self.metadata.kueue_queue()
    }

    /// One of its annotations.
    fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata.annotations.get(key).map(|a| a.as_str())
    }

    /// The cluster KubeRay made for it, while the RayJob names one.
    pub fn cluster_name(&self) -> Option<&str> {
        self.status.ray_cluster_name.as_deref().filter(|n| !n.is_empty())
    }

    /// The Ray job id: KubeRay's once it follows one, else the spec's.
    pub fn job_id(&self) -> Option<&str> {
        self.status
            .job_id
            .as_deref()
            .filter(|id| !id.is_empty())
            .or(self.spec.job_id.as_deref())
    }
}

/// A RayJob as krayne shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct RayJobInfo {
    /// Its name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// Where it is.
    pub state: RunState,
    /// The command it runs.
    pub entrypoint: String,
    /// The Ray job id (for `…/clusters/{cluster}/jobs/{id}` while its
    /// cluster lives).
    pub job_id: Option<String>,
    /// Its cluster's name (KubeRay's `<name>-<5 characters>`), once made.
    pub cluster: Option<String>,
    /// Its cluster's status while the cluster exists; `null` before it is
    /// made and after it is gone.
    pub cluster_status: Option<ClusterStatus>,
    /// The job's exit code, once it has exited and krayne has read it.
    pub exit_code: Option<i64>,
    /// KubeRay's stage (`Initializing`, `Waiting`, `Running`, `Complete`,
    /// `Failed`, `ValidationFailed`, …).
    pub deployment_status: Option<String>,
    /// Ray's status of the job (`PENDING`, `RUNNING`, `SUCCEEDED`, …).
    pub job_status: Option<String>,
    /// Why it failed (`AppFailed`, `DeadlineExceeded`, …).
    pub reason: Option<String>,
    /// KubeRay's or Ray's account.
    pub message: Option<String>,
    /// Whether the cluster goes once the job has ended.
    pub shutdown_after_job_finishes: bool,
    /// Seconds from the job's end to the cluster's deletion.
    pub ttl_seconds_after_finished: Option<i64>,
    /// Longest it may take from its start (the team's lifetime).
    pub active_deadline_seconds: Option<i64>,
    /// When it was created (RFC 3339).
    #[cfg_attr(feature = "schema", schema(format = DateTime))]
    pub created_at: Option<String>,
    /// When KubeRay started on it (RFC 3339).
    #[cfg_attr(feature = "schema", schema(format = DateTime))]
    pub started_at: Option<String>,
    /// When it ended (RFC 3339).
    #[cfg_attr(feature = "schema", schema(format = DateTime))]
    pub ended_at: Option<String>,
    /// Subject that created it through krayne.
    pub created_by: Option<String>,
    /// Its place in its namespace's line (1-based), while `queued`.
    pub queue_position: Option<u32>,
    /// When it joined the line (RFC 3339), while `queued`.
    #[cfg_attr(feature = "schema", schema(format = DateTime))]
    pub queued_since: Option<String>,
    /// Why it waits, while `queued`: which resource is short and by how
    /// much, or who is ahead of it.
    pub queue_reason: Option<String>,
    /// The site (Kubernetes cluster) it and its cluster live in
    /// (docs/sites.md); `local` when the server fronts one.
    #[cfg_attr(feature = "schema", schema(example = "local"))]
    pub site: String,
    /// Since when its site's Kubernetes has not answered (RFC 3339), when
    /// it has not: the rest is its last known state (docs/sites.md). Said
    /// by get and list.
    #[cfg_attr(feature = "schema", schema(format = DateTime))]
    pub site_unavailable_since: Option<String>,
}

impl RayJobInfo {
    /// The view of `job`, with its cluster's status while it exists and
    /// the exit code krayne knows.
    pub fn of(job: &ObservedRayJob, cluster_status: Option<ClusterStatus>, exit_code: Option<i64>) -> Self {
        let (m, s) = (&job.metadata, &job.status);
        let text = |v: &Option<String>| v.clone().filter(|t| !t.is_empty());
        let queued = job.queued_since();
        Self {
            name: m.name.to_string(),
            namespace: m.namespace.to_string(),
            state: job.state(),
            entrypoint: job.spec.entrypoint.clone(),
            job_id: job.job_id().map(str::to_owned),
            cluster: job.cluster_name().map(str::to_owned),
            cluster_status,
            exit_code,
            deployment_status: text(&s.job_deployment_status),
            job_status: text(&s.job_status),
            reason: text(&s.reason),
            message: text(&s.message),
            shutdown_after_job_finishes: job.spec.shutdown_after_job_finishes.unwrap_or(false),
            ttl_seconds_after_finished: job.spec.ttl_seconds_after_finished,
            active_deadline_seconds: job.spec.active_deadline_seconds,
            created_at: m.creation_timestamp.as_ref().map(ToString::to_string),
            started_at: text(&s.start_time),
            ended_at: text(&s.end_time),
            created_by: m
                .annotations
                .get(&crate::manifest::ANNOTATION_CREATED_BY)
                .map(ToString::to_string),
            queue_position: queued
                .and(job.annotation(crate::manifest::ANNOTATION_QUEUE_POSITION))
                .and_then(|p| p.parse().ok()),
            queued_since: queued.map(|t| t.to_string()),
            queue_reason: queued
                .and(job.annotation(crate::manifest::ANNOTATION_QUEUE_REASON))
                .map(str::to_owned),
            site: job.site.name().to_owned(),
            site_unavailable_since: None,
        }
    }
}

/// The most of a driver's log krayne keeps once its job has ended: its
/// last 1 MiB.
pub const MAX_KEPT_LOG: usize = 1 << 20;

/// What krayne kept of a RayJob's job once it ended, for after its cluster
/// is gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptRun {
    /// The RayJob's namespace.
    pub namespace: String,
    /// The RayJob's name.
    pub name: String,
    /// The RayJob's uid (a RayJob made again under the name is another).
    pub uid: String,
    /// The Ray job id.
    pub job_id: String,
    /// Ray's status of the job at its end.
    pub status: String,
    /// The entrypoint's exit code (none when it was stopped).
    pub exit_code: Option<i64>,
    /// The last [`MAX_KEPT_LOG`] bytes of the driver's log (`None`: the
    /// cluster was gone before it could be read).
    pub log_tail: Option<String>,
    /// Whether the log was longer than what is kept.
    pub truncated: bool,
    /// When it was kept (RFC 3339).
    pub kept_at: String,
}

/// The last [`MAX_KEPT_LOG`] bytes of `log` (from a character's start),
/// and whether anything was cut.
pub fn log_tail(log: &str) -> (&str, bool) {
    if log.len() <= MAX_KEPT_LOG {
        return (log, false);
    }
    let mut start = log.len() - MAX_KEPT_LOG;
    while !log.is_char_boundary(start) {
        start += 1;
    }
    (&log[start..], true)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn observed(status: Value) -> ObservedRayJob {
        serde_json::from_value(json!({
            "metadata": {"name": "train", "namespace": "ml", "annotations": {"krayne.dev/created-by": "alice"}},
            "spec": {"entrypoint": "python train.py", "jobId": "train", "shutdownAfterJobFinishes": true,
                     "ttlSecondsAfterFinished": 60, "rayClusterSpec": {"headGroupSpec": {}}},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn the_tail_is_the_last_mebibyte_from_a_characters_start() {
        assert_eq!(log_tail("short"), ("short", false));
        let long = format!("{}é{}", "a".repeat(10), "b".repeat(MAX_KEPT_LOG - 1));
        let (tail, cut) = log_tail(&long);
        assert!(cut);
        assert_eq!(tail.len(), MAX_KEPT_LOG - 1, "the cut é is left out whole");
        assert!(tail.chars().all(|c| c == 'b'));
    }

    #[test]
    fn states_follow_kuberay_and_ray() {
        for (deployment, ray, state) in [
            ("", "", RunState::Starting),
            ("Initializing", "", RunState::Starting),
            ("Waiting", "", RunState::Submitting),
            ("Running", "", RunState::Submitting),
            ("Running", "PENDING", RunState::Submitting),
            ("Running", "RUNNING", RunState::Running),
            ("Complete", "SUCCEEDED", RunState::Succeeded),
            ("Complete", "STOPPED", RunState::Stopped),
            ("Failed", "FAILED", RunState::Failed),
            ("Failed", "", RunState::Failed),
            ("ValidationFailed", "", RunState::Invalid),
        ] {
            let job = observed(json!({"jobDeploymentStatus": deployment, "jobStatus": ray}));
            assert_eq!(job.state(), state, "{deployment}/{ray}");
        }
    }

    #[test]
    fn a_suspended_rayjob_is_queued_while_in_line_and_starts_once_resumed() {
        let at = |suspend: bool, annotations: Value| -> ObservedRayJob {
            serde_json::from_value(json!({
                "metadata": {"name": "train", "namespace": "ml", "annotations": annotations},
                "spec": {"entrypoint": "python train.py", "suspend": suspend},
                "status": {"jobDeploymentStatus": "Suspended"},
            }))
            .unwrap()
        };
        let place = json!({"krayne.dev/queued-since": "2026-11-29T06:00:00Z", "krayne.dev/queue-position": "3",
                           "krayne.dev/queue-reason": "gpus: needs 4, 0 of 8 free"});
        let waiting = at(true, place.clone());
        assert_eq!(waiting.state(), RunState::Queued);
        let info = RayJobInfo::of(&waiting, None, None);
        assert_eq!(info.queue_position, Some(3));
        assert_eq!(info.queued_since.as_deref(), Some("2026-11-29T06:00:00Z"));
        assert_eq!(at(true, json!({})).state(), RunState::Suspended, "out of line, held");
        let mut refused = at(true, place.clone());
        refused.status.job_deployment_status = Some("ValidationFailed".into());
        assert_eq!(
            refused.state(),
            RunState::Invalid,
            "refused by KubeRay: no longer waits"
        );
        let mut taken_back: ObservedRayJob = serde_json::from_value(json!({
            "metadata": {"name": "train", "namespace": "ml", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"entrypoint": "python train.py", "suspend": true},
            "status": {"jobDeploymentStatus": "Running"},
        }))
        .unwrap();
        assert_eq!(
            taken_back.state(),
            RunState::Queued,
            "Kueue took it back: it waits again"
        );
        taken_back.status.job_deployment_status = Some("Complete".into());
        assert_eq!(taken_back.state(), RunState::Succeeded);
        assert_eq!(
            at(false, json!({})).state(),
            RunState::Starting,
            "resumed: KubeRay starts it again"
        );
        let admitted = RayJobInfo::of(&at(false, place), None, None);
        assert_eq!(
            (admitted.queue_position, admitted.queued_since),
            (None, None),
            "a place counts only while suspended"
        );
    }

    #[test]
    fn the_view_names_its_cluster_and_the_creator() {
        let job = observed(json!({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING",
                                  "rayClusterName": "train-x7k2p", "jobId": "train", "message": ""}));
        let info = RayJobInfo::of(&job, Some(ClusterStatus::Ready), None);
        assert_eq!(info.cluster.as_deref(), Some("train-x7k2p"));
        assert_eq!(info.created_by.as_deref(), Some("alice"));
        assert_eq!((info.state, info.message), (RunState::Running, None));
        assert_eq!(info.ttl_seconds_after_finished, Some(60));
        let fresh = RayJobInfo::of(&observed(Value::Null), None, None);
        assert_eq!((fresh.cluster, fresh.job_id.as_deref()), (None, Some("train")));
    }
}
