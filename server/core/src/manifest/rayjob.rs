//! `RunSpec` → RayJob (`ray.io/v1`): the cluster as `create` builds it,
//! and the job KubeRay follows on it.
//!
//! Submission mode `InteractiveMode`: KubeRay makes the cluster and waits
//! for the job to be submitted under the RayJob's `jobId`, which krayne
//! does once the head serves — after uploading the working dir, which only
//! a submission through the head's Jobs API can carry (`K8sJobMode`'s
//! submitter pod and `HTTPMode` submit as soon as the cluster is ready,
//! before any package could be there). KubeRay then follows the job and
//! deletes the cluster `ttlSecondsAfterFinished` after it ends.

use serde_json::{Map, Value, json};

use super::{KUBERAY_API_VERSION, ManifestSettings, Provenance, build_manifest};
use crate::domain::{RunSpec, RuntimeEnv};

/// Kind of a RayJob.
pub const RAYJOB_KIND: &str = "RayJob";
/// Plural resource name of RayJobs (RBAC, URLs).
pub const RAYJOBS: &str = "rayjobs";
/// The submission mode krayne's RayJobs use (see the module's comment).
pub const SUBMISSION_MODE: &str = "InteractiveMode";
/// Label KubeRay puts on a RayJob's cluster: the RayJob's name.
pub const LABEL_ORIGIN_NAME: &str = "ray.io/originated-from-cr-name";
/// Label KubeRay puts on a RayJob's cluster: `RayJob`.
pub const LABEL_ORIGIN_CRD: &str = "ray.io/originated-from-crd";

/// The RayJob of `run`, with `ttl` the seconds its cluster outlives the
/// job (the request's, else the team's or the default, decided by the
/// caller) and `deadline` its `activeDeadlineSeconds` (the request's,
/// capped by the team's `max_lifetime`).
pub fn build_rayjob(
    run: &RunSpec,
    ttl: u32,
    deadline: Option<u64>,
    settings: &ManifestSettings,
    who: &Provenance,
) -> Value {
    let cluster = build_manifest(&run.cluster, settings, who);
    let job = &run.job;
    let mut spec = Map::new();
    spec.insert("entrypoint".into(), json!(job.entrypoint));
    spec.insert("submissionMode".into(), json!(SUBMISSION_MODE));
    spec.insert("jobId".into(), json!(run.job_id()));
    spec.insert(
        "shutdownAfterJobFinishes".into(),
        json!(run.shutdown_after_job_finishes),
    );
    if run.shutdown_after_job_finishes {
        spec.insert("ttlSecondsAfterFinished".into(), json!(ttl));
    }
    if let Some(seconds) = deadline {
        spec.insert("activeDeadlineSeconds".into(), json!(seconds));
    }
    if let Some(yaml) = runtime_env_yaml(&job.runtime_env) {
        spec.insert("runtimeEnvYAML".into(), json!(yaml));
    }
    for (field, value) in [
        ("entrypointNumCpus", job.entrypoint_num_cpus),
        ("entrypointNumGpus", job.entrypoint_num_gpus),
    ] {
        if let Some(n) = value {
            spec.insert(field.into(), json!(n));
        }
    }
    if !job.metadata.is_empty() {
        spec.insert("metadata".into(), json!(job.metadata));
    }
    spec.insert("rayClusterSpec".into(), cluster["spec"].clone());
    json!({
        "apiVersion": KUBERAY_API_VERSION,
        "kind": RAYJOB_KIND,
        "metadata": cluster["metadata"],
        "spec": spec,
    })
}

/// The runtime env as the YAML KubeRay takes (`None` when empty).
fn runtime_env_yaml(env: &RuntimeEnv) -> Option<String> {
    if *env == RuntimeEnv::default() {
        return None;
    }
    serde_saphyr::to_string(env).ok()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::domain::FieldValidation;

    fn run(extra: Value) -> RunSpec {
        let mut request = json!({
            "name": "train-1", "namespace": "ml-team",
            "entrypoint": "python train.py",
        });
        for (k, v) in extra.as_object().unwrap() {
            request[k] = v.clone();
        }
        RunSpec::read(&request, FieldValidation::Strict).unwrap().spec
    }

    #[test]
    fn the_rayjob_carries_the_cluster_create_would_make() {
        let r = run(json!({"cluster": {"worker_groups": [{"replicas": 2, "gpus": 1}]}}));
        let who = Provenance {
            created_by: Some("alice"),
            team: Some("ml"),
            ray_auth: None,
        };
        let settings = ManifestSettings::default();
        let job = build_rayjob(&r, 300, Some(3600), &settings, &who);
        let cluster = build_manifest(&r.cluster, &settings, &who);
        assert_eq!(job["kind"], "RayJob");
        assert_eq!(job["metadata"], cluster["metadata"]);
        assert_eq!(job["spec"]["rayClusterSpec"], cluster["spec"]);
        assert_eq!(
            (&job["spec"]["submissionMode"], &job["spec"]["jobId"]),
            (&json!("InteractiveMode"), &json!("train-1"))
        );
        assert_eq!(job["spec"]["shutdownAfterJobFinishes"], true);
        assert_eq!(job["spec"]["ttlSecondsAfterFinished"], 300);
        assert_eq!(job["spec"]["activeDeadlineSeconds"], 3600);
        assert!(job["spec"]["runtimeEnvYAML"].is_null());
    }

    #[test]
    fn the_runtime_env_is_yaml_kuberay_reads_back() {
        let r = run(json!({"runtime_env": {"working_dir": "_ray_pkg_0123456789abcdef.zip",
                                            "env_vars": {"EPOCHS": "3", "Q": "a: 'b'"}, "pip": ["numpy==2.1.3"]},
                           "shutdown_after_job_finishes": false}));
        let job = build_rayjob(&r, 300, None, &ManifestSettings::default(), &Provenance::default());
        let yaml = job["spec"]["runtimeEnvYAML"].as_str().unwrap();
        let back: Value = serde_saphyr::from_str(yaml).unwrap();
        assert_eq!(
            back,
            json!({"working_dir": "gcs://_ray_pkg_0123456789abcdef.zip",
                   "env_vars": {"EPOCHS": "3", "Q": "a: 'b'"}, "pip": ["numpy==2.1.3"]})
        );
        assert_eq!(job["spec"]["shutdownAfterJobFinishes"], false);
        assert!(
            job["spec"]["ttlSecondsAfterFinished"].is_null(),
            "KubeRay refuses a TTL on a kept cluster"
        );
    }
}
