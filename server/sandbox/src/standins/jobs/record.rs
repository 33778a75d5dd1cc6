//! A Ray job's record, as Ray's job manager keeps and reports it.

use std::{path::PathBuf, sync::Arc};

use serde_json::{Value, json};
use tokio::sync::Notify;

/// Ray's job statuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Status {
    Pending,
    Running,
    Stopped,
    Succeeded,
    Failed,
}

impl Status {
    pub(super) fn name(self) -> &'static str {
        match self {
            Self::Pending => "PENDING",
            Self::Running => "RUNNING",
            Self::Stopped => "STOPPED",
            Self::Succeeded => "SUCCEEDED",
            Self::Failed => "FAILED",
        }
    }

    /// STOPPED, SUCCEEDED and FAILED.
    pub(super) fn is_terminal(self) -> bool {
        matches!(self, Self::Stopped | Self::Succeeded | Self::Failed)
    }
}

/// How a job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Outcome {
    /// The entrypoint exited with this code (negative: killed by that
    /// signal, as Python's `returncode`).
    Exited { code: i32, last_lines: String },
    /// Stopped through the API.
    Stopped,
    /// The runtime environment (the working dir) could not be set up.
    RuntimeEnvFailed(String),
    /// `sh` could not be started.
    StartFailed(String),
}

/// One submitted job.
#[derive(Debug)]
pub(super) struct Job {
    /// Which submission this is (ids can be reused after a delete).
    pub seq: u64,
    pub submission_id: String,
    pub status: Status,
    pub entrypoint: String,
    /// `entrypoint_num_cpus`, `entrypoint_num_gpus`: held while it runs.
    pub entrypoint_resources: (f64, f64),
    pub message: String,
    pub error_type: Option<&'static str>,
    /// Milliseconds since the epoch.
    pub start_time: i64,
    pub end_time: Option<i64>,
    pub metadata: Value,
    pub runtime_env: Value,
    /// Set once the entrypoint runs.
    pub driver: Option<Driver>,
    pub driver_exit_code: Option<i32>,
    /// The driver's log file (absent until the entrypoint starts).
    pub log: PathBuf,
    /// The job's directory (its unpacked working dir, say).
    pub dir: PathBuf,
    /// Notified by `POST …/stop`.
    pub stop: Arc<Notify>,
}

/// Where the driver runs.
#[derive(Debug, Clone)]
pub(super) struct Driver {
    pub agent_http_address: String,
    pub node_id: String,
}

impl Job {
    pub(super) fn running(&mut self, driver: Driver) {
        self.status = Status::Running;
        self.message = "Job is currently running.".to_owned();
        self.driver = Some(driver);
    }

    pub(super) fn end(&mut self, outcome: Outcome, now: i64) {
        self.end_time = Some(now);
        let (status, message, error_type, code) = match outcome {
            Outcome::Exited { code: 0, .. } => (
                Status::Succeeded,
                "Job finished successfully.".to_owned(),
                None,
                Some(0),
            ),
            Outcome::Exited { code, last_lines } => (
                Status::Failed,
                format!(
                    "Job entrypoint command failed with exit code {code}, last available logs (truncated to 20,000 chars):\n{last_lines}"
                ),
                Some("JOB_ENTRYPOINT_COMMAND_ERROR"),
                Some(code),
            ),
            Outcome::Stopped => (Status::Stopped, "Job was intentionally stopped.".to_owned(), None, None),
            Outcome::RuntimeEnvFailed(why) => (
                Status::Failed,
                format!("runtime_env setup failed: Failed to set up runtime environment.\n{why}"),
                Some("RUNTIME_ENV_SETUP_FAILURE"),
                None,
            ),
            Outcome::StartFailed(why) => (
                Status::Failed,
                format!("Job entrypoint command failed to start: {why}"),
                Some("JOB_ENTRYPOINT_COMMAND_START_ERROR"),
                None,
            ),
        };
        self.status = status;
        self.message = message;
        self.error_type = error_type;
        self.driver_exit_code = code;
    }

    /// The job as `GET /api/jobs/{id}` shows it, keys in Ray's order;
    /// `redact` replaces every env var's value (what Ray shows a browser).
    pub(super) fn view(&self, redact: bool) -> Value {
        let mut runtime_env = self.runtime_env.clone();
        if redact && let Some(vars) = runtime_env.get_mut("env_vars").and_then(Value::as_object_mut) {
            for value in vars.values_mut() {
                *value = json!("<redacted>");
            }
        }
        json!({
            "type": "SUBMISSION",
            "job_id": null,
            "submission_id": self.submission_id,
            "driver_info": null,
            "status": self.status.name(),
            "entrypoint": self.entrypoint,
            "message": self.message,
            "error_type": self.error_type,
            "start_time": self.start_time,
            "end_time": self.end_time,
            "metadata": self.metadata,
            "runtime_env": runtime_env,
            "driver_agent_http_address": self.driver.as_ref().map(|d| d.agent_http_address.clone()),
            "driver_node_id": self.driver.as_ref().map(|d| d.node_id.clone()),
            "driver_exit_code": self.driver_exit_code,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> Job {
        Job {
            seq: 0,
            submission_id: "s".into(),
            status: Status::Pending,
            entrypoint: "exit 3".into(),
            entrypoint_resources: (0.0, 0.0),
            message: "Job has not started yet.".into(),
            error_type: None,
            start_time: 1,
            end_time: None,
            metadata: Value::Null,
            runtime_env: json!({"env_vars": {"A": "1"}}),
            driver: None,
            driver_exit_code: None,
            log: PathBuf::new(),
            dir: PathBuf::new(),
            stop: Arc::default(),
        }
    }

    #[test]
    fn the_view_has_rays_keys_in_rays_order() {
        let keys: Vec<String> = job().view(false).as_object().unwrap().keys().cloned().collect();
        assert_eq!(
            keys,
            [
                "type",
                "job_id",
                "submission_id",
                "driver_info",
                "status",
                "entrypoint",
                "message",
                "error_type",
                "start_time",
                "end_time",
                "metadata",
                "runtime_env",
                "driver_agent_http_address",
                "driver_node_id",
                "driver_exit_code"
            ]
        );
    }

    #[test]
    fn a_failed_exit_names_the_code_and_the_last_lines() {
        let mut j = job();
        j.end(
            Outcome::Exited {
                code: 3,
                last_lines: "about-to-fail\n".into(),
            },
            2,
        );
        let v = j.view(false);
        assert_eq!(v["status"], "FAILED");
        assert_eq!(v["driver_exit_code"], 3);
        assert_eq!(v["error_type"], "JOB_ENTRYPOINT_COMMAND_ERROR");
        assert!(
            v["message"]
                .as_str()
                .unwrap()
                .starts_with("Job entrypoint command failed with exit code 3,")
        );
        assert!(v["message"].as_str().unwrap().ends_with("\nabout-to-fail\n"));
        assert_eq!(v["end_time"], 2);
    }

    #[test]
    fn a_stopped_job_has_no_exit_code_and_browsers_see_no_env_values() {
        let mut j = job();
        j.end(Outcome::Stopped, 2);
        let v = j.view(true);
        assert_eq!(
            (v["status"].as_str(), v["driver_exit_code"].is_null()),
            (Some("STOPPED"), true)
        );
        assert_eq!(v["runtime_env"]["env_vars"]["A"], "<redacted>");
        assert_eq!(j.view(false)["runtime_env"]["env_vars"]["A"], "1");
    }
}
