//! A job with a cluster of its own (`krayne run`): a KubeRay RayJob made
//! from krayne's cluster model and a job submission, read and checked as
//! `create` and `submit` check theirs.

use serde_json::Value;

use super::{ClusterSpec, Error, FieldValidation, FieldViolation, JobSubmission, Violations, check_job_id};

/// Longest RayJob name: KubeRay names its cluster `<name>-<5 characters>`
/// within a cluster name's 53.
pub const MAX_RUN_NAME_LEN: usize = 47;
/// Seconds a finished job's cluster is kept when neither the request nor
/// the team's policy says: long enough to look at Ray's dashboard, short
/// enough not to hold GPUs (the driver's log outlives it in krayne).
pub const DEFAULT_TTL_SECONDS_AFTER_FINISHED: u32 = 300;
/// Shortest `ttl_seconds_after_finished`: krayne reads the driver's log
/// and exit code from the head after the job ends, to keep them once the
/// cluster is gone.
pub const MIN_TTL_SECONDS_AFTER_FINISHED: u32 = 30;
/// Longest `ttl_seconds_after_finished` accepted (a week).
pub const MAX_TTL_SECONDS_AFTER_FINISHED: u32 = 7 * 24 * 3600;

/// A RayJob to create.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSpec {
    /// The cluster the job runs on; its name and namespace are the
    /// RayJob's.
    pub cluster: ClusterSpec,
    /// The job; its submission id is the RayJob's `jobId`.
    pub job: JobSubmission,
    /// Whether KubeRay deletes the cluster once the job has ended.
    pub shutdown_after_job_finishes: bool,
    /// Seconds from the job's end to its cluster's deletion (with
    /// [`Self::shutdown_after_job_finishes`]); `None`: the team's policy
    /// or [`DEFAULT_TTL_SECONDS_AFTER_FINISHED`].
    pub ttl_seconds_after_finished: Option<u32>,
    /// Longest the RayJob may take from its start, its cluster's creation
    /// included, before KubeRay fails it (`DeadlineExceeded`).
    pub active_deadline_seconds: Option<u64>,
}

/// A run request as read, with what mode `warn` reports.
#[derive(Debug, Clone)]
pub struct ReadRun {
    /// The request.
    pub spec: RunSpec,
    /// Ignored keys and converted values of the cluster config.
    pub warnings: Vec<FieldViolation>,
}

/// The job fields of a run request, beside `name`, `namespace` and
/// `cluster`.
const JOB_FIELDS: [&str; 6] = [
    "entrypoint",
    "submission_id",
    "runtime_env",
    "metadata",
    "entrypoint_num_cpus",
    "entrypoint_num_gpus",
];
const RUN_FIELDS: [&str; 4] = [
    "shutdown_after_job_finishes",
    "ttl_seconds_after_finished",
    "active_deadline_seconds",
    "cluster",
];

impl RunSpec {
    /// Reads a run request: `name`, `namespace`, `cluster` (a Krayne
    /// config, whose name and namespace are the run's), the job's fields
    /// as a submission has them, and the RayJob's lifecycle. Every problem
    /// is reported at once; the job id defaults to the RayJob's name.
    pub fn read(value: &Value, mode: FieldValidation) -> Result<ReadRun, Error> {
        let mut v = Violations::new();
        let Some(fields) = value.as_object() else {
            return Err(Error::invalid("", "must be an object"));
        };
        for key in fields.keys() {
            let known = ["name", "namespace"].contains(&key.as_str())
                || JOB_FIELDS.contains(&key.as_str())
                || RUN_FIELDS.contains(&key.as_str());
            if !known {
                v.push(key.clone(), "unknown field");
            }
        }
        let name = value["name"].as_str().unwrap_or_default().to_owned();
        if name.len() > MAX_RUN_NAME_LEN {
            v.push(
                "name",
                format!("must be at most {MAX_RUN_NAME_LEN} characters: KubeRay names the job's cluster <name>-<5 characters>"),
            );
        }
        let mut config = match &value["cluster"] {
            Value::Null => Value::Object(serde_json::Map::new()),
            Value::Object(c) => Value::Object(c.clone()),
            _ => {
                v.push("cluster", "must be an object: a cluster config as `create` takes");
                Value::Object(serde_json::Map::new())
            }
        };
        for key in ["name", "namespace"] {
            if config.get(key).is_some_and(|inner| *inner != value[key]) {
                v.push(format!("cluster.{key}"), format!("is the run's {key}: leave it out"));
            }
            if !value[key].is_null() {
                config[key] = value[key].clone();
            }
        }
        let cluster = match ClusterSpec::read(&config, mode) {
            Ok(read) => Some(read),
            Err(Error::InvalidArgument(found)) => {
                for f in found.as_slice() {
                    let field = match f.field.as_str() {
                        "name" | "namespace" => f.field.clone(),
                        other => format!("cluster.{other}"),
                    };
                    v.push(field, f.description.clone());
                }
                None
            }
            Err(e) => return Err(e),
        };
        let mut job_fields = serde_json::Map::new();
        for key in JOB_FIELDS {
            if let Some(field) = fields.get(key) {
                job_fields.insert(key.into(), field.clone());
            }
        }
        let job = match serde_json::from_value::<JobSubmission>(Value::Object(job_fields)) {
            Ok(mut job) => {
                job.submission_id.get_or_insert_with(|| name.clone());
                match job.validated() {
                    Ok(job) => Some(job),
                    Err(Error::InvalidArgument(found)) => {
                        found
                            .as_slice()
                            .iter()
                            .for_each(|f| v.push(f.field.clone(), f.description.clone()));
                        None
                    }
                    Err(e) => return Err(e),
                }
            }
            Err(e) => {
                v.push("", format!("the job's fields: {e}"));
                None
            }
        };
        if let Some(id) = job.as_ref().and_then(|j| j.submission_id.as_deref())
            && let Err(why) = check_job_id(id)
        {
            v.push("submission_id", why);
        }
        let shutdown = match &value["shutdown_after_job_finishes"] {
            Value::Null => true,
            Value::Bool(b) => *b,
            _ => {
                v.push("shutdown_after_job_finishes", "must be true or false");
                true
            }
        };
        let ttl = match &value["ttl_seconds_after_finished"] {
            Value::Null => None,
            n => match n.as_u64().and_then(|n| u32::try_from(n).ok()) {
                Some(n) if (MIN_TTL_SECONDS_AFTER_FINISHED..=MAX_TTL_SECONDS_AFTER_FINISHED).contains(&n) => Some(n),
                _ => {
                    v.push(
                        "ttl_seconds_after_finished",
                        format!(
                            "must be a whole number of seconds from {MIN_TTL_SECONDS_AFTER_FINISHED} (time to keep the \
                             driver's log) to {MAX_TTL_SECONDS_AFTER_FINISHED}"
                        ),
                    );
                    None
                }
            },
        };
        if ttl.is_some() && !shutdown {
            v.push(
                "ttl_seconds_after_finished",
                "needs shutdown_after_job_finishes: a cluster that is kept has no TTL (KubeRay refuses it)",
            );
        }
        let deadline = match &value["active_deadline_seconds"] {
            Value::Null => None,
            n => match n.as_u64().filter(|n| *n > 0) {
                Some(n) => Some(n),
                None => {
                    v.push("active_deadline_seconds", "must be a whole number of seconds above 0");
                    None
                }
            },
        };
        match (cluster, job) {
            (Some(read), Some(job)) if v.is_empty() => Ok(ReadRun {
                spec: Self {
                    cluster: read.spec,
                    job,
                    shutdown_after_job_finishes: shutdown,
                    ttl_seconds_after_finished: ttl,
                    active_deadline_seconds: deadline,
                },
                warnings: read.warnings,
            }),
            _ => Err(Error::InvalidArgument(v)),
        }
    }

    /// The RayJob's name (its cluster config's).
    pub fn name(&self) -> &str {
        &self.cluster.name
    }

    /// The RayJob's namespace.
    pub fn namespace(&self) -> &str {
        &self.cluster.namespace
    }

    /// The Ray job id KubeRay follows: the submission id.
    pub fn job_id(&self) -> &str {
        self.job.submission_id.as_deref().unwrap_or(&self.cluster.name)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn read(value: Value) -> Result<ReadRun, Error> {
        RunSpec::read(&value, FieldValidation::Strict)
    }

    #[test]
    fn a_run_is_a_cluster_config_and_a_job() {
        let run = read(json!({
            "name": "train-1", "namespace": "ml-team",
            "cluster": {"worker_groups": [{"replicas": 1}]},
            "entrypoint": "python train.py",
            "runtime_env": {"working_dir": "_ray_pkg_0123456789abcdef.zip", "env_vars": {"EPOCHS": "3"}},
            "ttl_seconds_after_finished": 60,
        }))
        .unwrap()
        .spec;
        assert_eq!(
            (run.name(), run.namespace(), run.job_id()),
            ("train-1", "ml-team", "train-1")
        );
        assert_eq!(run.cluster.worker_groups[0].replicas, 1);
        assert_eq!(
            run.job.runtime_env.working_dir.as_deref(),
            Some("gcs://_ray_pkg_0123456789abcdef.zip")
        );
        assert!(run.shutdown_after_job_finishes);
        assert_eq!(run.ttl_seconds_after_finished, Some(60));
        assert_eq!(run.active_deadline_seconds, None);
    }

    #[test]
    fn every_problem_is_reported_at_once_with_its_field() {
        let Err(Error::InvalidArgument(v)) = read(json!({
            "name": "a-name-that-is-far-too-long-for-kuberay-to-add-its-suffix",
            "namespace": "ml-team",
            "cluster": {"name": "other", "head": {"cpus": "lots"}},
            "entrypoint": " ",
            "submission_id": "a/b",
            "shutdown_after_job_finishes": false,
            "ttl_seconds_after_finished": 60,
            "active_deadline_seconds": 0,
            "colour": "blue",
        })) else {
            panic!("accepted");
        };
        let fields: Vec<&str> = v.as_slice().iter().map(|f| f.field.as_str()).collect();
        for field in [
            "colour",
            "name",
            "cluster.name",
            "cluster.head.cpus",
            "entrypoint",
            "submission_id",
            "ttl_seconds_after_finished",
            "active_deadline_seconds",
        ] {
            assert!(fields.contains(&field), "{field} missing from {fields:?}");
        }
    }
}
