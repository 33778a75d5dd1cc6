//! Ray's Jobs REST API as a Ray 2.60 head speaks it
//! (`shared/reference/ray/jobs-api.md`): the bodies krayne sends, the job
//! objects it reads, and Ray's answers mapped to krayne's errors. Pure.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::domain::{Error, Job, JobStatus, JobSubmission, ResourceKind};

/// Ray's answer to one request.
#[derive(Debug)]
pub(crate) struct Answer {
    /// HTTP status.
    pub(crate) status: u16,
    /// The body (JSON on success; text, often a traceback, on error).
    pub(crate) body: bytes::Bytes,
}

impl Answer {
    /// The body as JSON.
    pub(crate) fn json(&self) -> Result<Value, Error> {
        serde_json::from_slice(&self.body).map_err(|e| {
            Error::Unavailable(format!(
                "the cluster's Ray head answered something that is not JSON: {e}"
            ))
        })
    }

    /// The last line of a text body: a traceback's exception, or Ray's
    /// one-line 404.
    pub(crate) fn last_line(&self) -> String {
        let text = String::from_utf8_lossy(&self.body);
        let line = text.lines().rev().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
        let line = line.strip_prefix("RuntimeError: ").unwrap_or(line);
        line.chars().take(500).collect()
    }

    /// Ray's error as krayne's, for something of `kind` named `id`.
    pub(crate) fn error(&self, kind: ResourceKind, id: &str) -> Error {
        match self.status {
            404 => Error::NotFound {
                kind,
                name: id.to_owned(),
                namespace: None,
            },
            400 => Error::invalid(kind.to_string(), self.last_line()),
            413 => Error::invalid(
                kind.to_string(),
                "the cluster's Ray head refused the body as too large (its limit is 100 MiB)",
            ),
            status => Error::Unavailable(format!(
                "the cluster's Ray head answered {status}: {}",
                self.last_line()
            )),
        }
    }
}

/// `POST /api/jobs/`'s body for `job`, as `JobSubmissionClient` sends it:
/// keys whose value is none left out, `runtime_env` and `metadata` always
/// there.
pub(crate) fn submit_body(job: &JobSubmission) -> Value {
    let mut runtime_env = Map::new();
    if let Some(dir) = &job.runtime_env.working_dir {
        runtime_env.insert("working_dir".into(), json!(dir));
    }
    if !job.runtime_env.env_vars.is_empty() {
        runtime_env.insert("env_vars".into(), json!(job.runtime_env.env_vars));
    }
    if !job.runtime_env.pip.is_empty() {
        runtime_env.insert("pip".into(), json!(job.runtime_env.pip));
    }
    let mut body = Map::new();
    body.insert("entrypoint".into(), json!(job.entrypoint));
    if let Some(id) = &job.submission_id {
        body.insert("submission_id".into(), json!(id));
    }
    body.insert("runtime_env".into(), Value::Object(runtime_env));
    body.insert("metadata".into(), json!(job.metadata));
    let optional = [
        ("entrypoint_num_cpus", job.entrypoint_num_cpus.map(|n| json!(n))),
        ("entrypoint_num_gpus", job.entrypoint_num_gpus.map(|n| json!(n))),
        ("entrypoint_memory", job.entrypoint_memory.map(|n| json!(n))),
    ];
    for (key, value) in optional {
        if let Some(value) = value {
            body.insert(key.into(), value);
        }
    }
    Value::Object(body)
}

/// Whether Ray's 500 says the submission id is taken.
pub(crate) fn is_duplicate(answer: &Answer) -> bool {
    answer.status == 500 && answer.last_line().contains("already exists")
}

/// Whether Ray's 500 says the job is still running (a DELETE).
pub(crate) fn is_not_terminal(answer: &Answer) -> bool {
    answer.status == 500 && answer.last_line().contains("non-terminal state")
}

/// A job object of Ray's as krayne's [`Job`].
pub(crate) fn job(value: &Value) -> Result<Job, Error> {
    let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
    let unexpected = |what: &str| Error::Unavailable(format!("the cluster's Ray head sent a job without {what}"));
    let status: JobStatus = value
        .get("status")
        .and_then(|s| serde_json::from_value(s.clone()).ok())
        .ok_or_else(|| unexpected("a known status"))?;
    let submission_id = text("submission_id");
    let ray_job_id = text("job_id");
    let id = submission_id
        .clone()
        .or_else(|| ray_job_id.clone())
        .ok_or_else(|| unexpected("an id"))?;
    let time = |key: &str| {
        value
            .get(key)
            .and_then(Value::as_i64)
            .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
            .map(|t| t.to_string())
    };
    let metadata: BTreeMap<String, String> = value
        .get("metadata")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().map_or_else(|| v.to_string(), str::to_owned)))
                .collect()
        })
        .unwrap_or_default();
    Ok(Job {
        id,
        submission_id,
        ray_job_id,
        kind: text("type").unwrap_or_else(|| "SUBMISSION".into()),
        entrypoint: text("entrypoint").unwrap_or_default(),
        status,
        message: text("message"),
        error_type: text("error_type"),
        start_time: time("start_time"),
        end_time: time("end_time"),
        driver_exit_code: value.get("driver_exit_code").and_then(Value::as_i64),
        metadata,
    })
}

/// What a head's `GET /api/cluster_status` says of its use
/// (`shared/reference/ray/cluster-status.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeadUse {
    /// A resource is in use (a task, an actor, a job's entrypoint holds it).
    InUse,
    /// Nothing in use; its least idle node has been idle this many seconds
    /// (`NodeIdleSeconds: Min=`).
    IdleFor(u64),
    /// The answer does not say.
    Unknown,
}

/// Reads `loadMetricsReport.usage` (resource → [used, total]) and the
/// `NodeIdleSeconds` line of `autoscalingStatus`. Object-store memory and
/// the `node:*` markers are not use: objects stay stored when nothing runs.
pub(crate) fn head_use(answer: &Value) -> HeadUse {
    let data = &answer["data"];
    let Some(usage) = data["clusterStatus"]["loadMetricsReport"]["usage"].as_object() else {
        return HeadUse::Unknown;
    };
    let counts =
        |name: &str| !name.starts_with("node:") && !matches!(name, "objectStoreMemory" | "object_store_memory");
    let used = |v: &Value| v.get(0).and_then(Value::as_f64).is_some_and(|used| used > 0.0);
    if usage.iter().any(|(name, v)| counts(name) && used(v)) {
        return HeadUse::InUse;
    }
    let idle = data["autoscalingStatus"].as_str().and_then(|text| {
        let (_, rest) = text.split_once("NodeIdleSeconds: Min=")?;
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    });
    idle.map_or(HeadUse::Unknown, HeadUse::IdleFor)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::RuntimeEnv;

    /// `autoscalingStatus` and the usage as a Ray 2.60 head answered
    /// (cluster-status.md).
    fn status(idle_min: u64, cpu_used: f64) -> Value {
        json!({"result": true, "data": {
            "autoscalingStatus": format!("Cluster status: 0 nodes\n - MostDelayedHeartbeats: {{'3054': 0.0014}}\n - NodeIdleSeconds: Min={idle_min} Mean={idle_min} Max={idle_min}\n - ResourceUsage: {cpu_used}/1.0 CPU\n"),
            "clusterStatus": {"loadMetricsReport": {"usage": {
                "memory": [0.0, 14596204135.0], "node:192.0.2.2": [0.0, 1.0], "CPU": [cpu_used, 1.0],
                "node:InternalHead": [0.0, 1.0], "objectStoreMemory": [1024.0, 6255516057.0]
            }}}
        }})
    }

    #[test]
    fn a_heads_use_reads_as_ray_reports_it() {
        assert_eq!(head_use(&status(4, 0.0)), HeadUse::IdleFor(4));
        assert_eq!(head_use(&status(0, 1.0)), HeadUse::InUse);
        let mut gpu = status(30, 0.0);
        gpu["data"]["clusterStatus"]["loadMetricsReport"]["usage"]["GPU"] = json!([1.0, 8.0]);
        assert_eq!(head_use(&gpu), HeadUse::InUse);
        let mut silent = status(30, 0.0);
        silent["data"]["autoscalingStatus"] = json!("Cluster status: 0 nodes");
        assert_eq!(
            head_use(&silent),
            HeadUse::Unknown,
            "idle since when? not said: not idle"
        );
        assert_eq!(head_use(&json!({"result": false})), HeadUse::Unknown);
    }

    fn answer(status: u16, body: &str) -> Answer {
        Answer {
            status,
            body: bytes::Bytes::copy_from_slice(body.as_bytes()),
        }
    }

    #[test]
    fn a_submission_is_sent_as_rays_client_sends_it() {
        let job = JobSubmission {
            entrypoint: "python train.py".into(),
            submission_id: Some("sdk-py".into()),
            runtime_env: RuntimeEnv {
                env_vars: [("A".to_owned(), "1".to_owned())].into(),
                ..Default::default()
            },
            entrypoint_num_cpus: Some(0.5),
            ..Default::default()
        };
        assert_eq!(
            submit_body(&job),
            json!({"entrypoint": "python train.py", "submission_id": "sdk-py",
                   "runtime_env": {"env_vars": {"A": "1"}}, "metadata": {}, "entrypoint_num_cpus": 0.5})
        );
        let bare = submit_body(&JobSubmission {
            entrypoint: "echo hi".into(),
            ..Default::default()
        });
        assert_eq!(
            bare,
            json!({"entrypoint": "echo hi", "runtime_env": {}, "metadata": {}})
        );
    }

    #[test]
    fn rays_job_objects_are_read_with_the_submission_id_as_the_id() {
        let recorded = json!({"type": "SUBMISSION", "job_id": null, "submission_id": "rec-exit3", "driver_info": null,
            "status": "FAILED", "entrypoint": "echo about-to-fail; exit 3",
            "message": "Job entrypoint command failed with exit code 3, last available logs (truncated to 20,000 chars):\nabout-to-fail",
            "error_type": "JOB_ENTRYPOINT_COMMAND_ERROR", "start_time": 1795434158240_i64, "end_time": 1795434160914_i64,
            "metadata": null, "runtime_env": null, "driver_agent_http_address": "http://10.0.0.1:52365",
            "driver_node_id": "81754e20", "driver_exit_code": 3});
        let job = job(&recorded).unwrap();
        assert_eq!(job.id, "rec-exit3");
        assert_eq!(job.ray_job_id, None);
        assert_eq!(job.status, JobStatus::Failed);
        assert_eq!(job.driver_exit_code, Some(3));
        assert_eq!(job.start_time.as_deref(), Some("2026-11-23T11:42:38.24Z"));
        assert!(job.metadata.is_empty());

        let driver = json!({"type": "DRIVER", "job_id": "02000000", "submission_id": null, "status": "RUNNING",
            "entrypoint": "python x.py", "metadata": {}, "start_time": 1795434158240_i64});
        assert_eq!(super::job(&driver).unwrap().id, "02000000");
        assert!(super::job(&json!({"status": "LOST"})).is_err());
    }

    #[test]
    fn rays_errors_become_krayne_answers() {
        let missing = answer(404, "Job nope-xyz does not exist");
        assert!(matches!(
            missing.error(ResourceKind::Job, "nope-xyz"),
            Error::NotFound { .. }
        ));
        let traceback = "Traceback (most recent call last):\n  File \"x.py\"\nTypeError: JobSubmitRequest.__init__() got an unexpected keyword argument 'bogus'\n";
        let bad = answer(400, traceback).error(ResourceKind::Job, "x");
        assert!(bad.to_string().contains("unexpected keyword argument 'bogus'"), "{bad}");
        let duplicate = answer(
            500,
            "Traceback …\nValueError: Job with submission_id rec-sid-1 already exists. Please use a different submission_id.\n",
        );
        assert!(is_duplicate(&duplicate));
        let running = answer(
            500,
            "Traceback …\nRuntimeError: Attempted to delete job 'lc-del', but it is in a non-terminal state RUNNING.\n",
        );
        assert!(is_not_terminal(&running) && !is_duplicate(&running));
        assert_eq!(
            running.error(ResourceKind::Job, "lc-del").code(),
            "unavailable",
            "an unexpected 500 is the head's trouble"
        );
    }
}
