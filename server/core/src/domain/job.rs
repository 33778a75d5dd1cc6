//! Ray jobs as krayne shows them, and what a submission may ask for:
//! Ray's Jobs API's fields (`shared/reference/ray/jobs-api.md`), checked
//! up front so Ray's quirks (a `/` in an id leaves a job PENDING forever,
//! a bad field is a traceback) never reach the head.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Error, Violations};

/// Longest submission id accepted.
pub const MAX_SUBMISSION_ID_LEN: usize = 128;
/// Longest entrypoint accepted.
pub const MAX_ENTRYPOINT_LEN: usize = 16 * 1024;

/// A Ray job's status, as Ray names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum JobStatus {
    /// Submitted, not started (waiting for resources or its runtime env).
    Pending,
    /// Its entrypoint runs.
    Running,
    /// Stopped on request.
    Stopped,
    /// Its entrypoint exited 0.
    Succeeded,
    /// Its entrypoint failed, or its runtime env could not be set up.
    Failed,
}

impl JobStatus {
    /// `PENDING`, `RUNNING`, …
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "PENDING",
            Self::Running => "RUNNING",
            Self::Stopped => "STOPPED",
            Self::Succeeded => "SUCCEEDED",
            Self::Failed => "FAILED",
        }
    }

    /// Whether the job has ended (stopped, succeeded or failed).
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Stopped | Self::Succeeded | Self::Failed)
    }
}

/// A Ray job on a cluster.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct Job {
    /// The id to use in krayne's paths: the submission id (Ray's `job_id`
    /// stays null for entrypoints that never call `ray.init()`), or Ray's
    /// job id for a driver started outside the Jobs API.
    pub id: String,
    /// The submission id (none for a driver started outside the Jobs API).
    pub submission_id: Option<String>,
    /// Ray's job id, once the entrypoint has called `ray.init()`.
    pub ray_job_id: Option<String>,
    /// `SUBMISSION`, or `DRIVER` for a `ray.init()` script run outside
    /// the Jobs API.
    pub kind: String,
    /// The command it runs.
    pub entrypoint: String,
    /// Where it is.
    pub status: JobStatus,
    /// Ray's account of the status.
    pub message: Option<String>,
    /// Why it failed, in Ray's words (`JOB_ENTRYPOINT_COMMAND_ERROR`, …).
    pub error_type: Option<String>,
    /// When it was submitted (RFC 3339).
    pub start_time: Option<String>,
    /// When it ended (RFC 3339).
    pub end_time: Option<String>,
    /// The entrypoint's exit code, once it has exited (none when stopped).
    pub driver_exit_code: Option<i64>,
    /// What the submitter attached.
    pub metadata: BTreeMap<String, String>,
}

/// What a job's runtime needs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RuntimeEnv {
    /// The working dir: a package uploaded with `PUT …/packages/{package}`
    /// (`_ray_pkg_<16 hex>.zip`, or `gcs://` and that name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
    /// Environment variables of the entrypoint.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env_vars: BTreeMap<String, String>,
    /// Python packages to install first (pip requirement strings).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pip: Vec<String>,
}

/// A job to submit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct JobSubmission {
    /// The shell command to run on the head.
    pub entrypoint: String,
    /// An id of the caller's choosing; submitting it again returns the
    /// first job instead of a second one. Ray makes one up when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submission_id: Option<String>,
    /// Its runtime environment.
    #[serde(default)]
    pub runtime_env: RuntimeEnv,
    /// Free-form labels kept with the job.
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// CPUs reserved for the entrypoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint_num_cpus: Option<f64>,
    /// GPUs reserved for the entrypoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint_num_gpus: Option<f64>,
    /// Memory reserved for the entrypoint, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint_memory: Option<u64>,
}

/// `name` if it is a working-dir package name as Ray's client makes them
/// (`_ray_pkg_<16 hex>.zip`), else why not.
pub fn check_package_name(name: &str) -> Result<(), String> {
    let hex = name
        .strip_prefix("_ray_pkg_")
        .and_then(|rest| rest.strip_suffix(".zip"))
        .ok_or_else(|| format!("{name:?} is not a package name: expected _ray_pkg_<16 hex digits>.zip"))?;
    if hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()) {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a package name: expected _ray_pkg_<16 lowercase hex digits>.zip"
        ))
    }
}

/// Whether `id` may name a job: what Ray stores and finds again (no `/`,
/// which leaves Ray's job PENDING forever; no control characters).
pub fn check_job_id(id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err("must not be empty".into());
    }
    if id.len() > MAX_SUBMISSION_ID_LEN {
        return Err(format!("must be at most {MAX_SUBMISSION_ID_LEN} characters"));
    }
    if let Some(c) = id.chars().find(|c| !(c.is_ascii_alphanumeric() || "-_.".contains(*c))) {
        return Err(format!("may hold letters, digits, '-', '_' and '.' only, not {c:?}"));
    }
    // A path segment of its own to every HTTP client on the way to Ray:
    // `/api/jobs/..` is `/api`.
    if id.chars().all(|c| c == '.') && id.len() <= 2 {
        return Err(format!("{id:?} is a path segment, not an id"));
    }
    Ok(())
}

/// An environment variable's name as a shell takes it.
fn check_env_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a variable name (letters, digits and '_', not starting with a digit)"
        ))
    }
}

impl JobSubmission {
    /// Checks every field (all problems at once) and normalizes the
    /// working dir to the `gcs://` URI Ray takes.
    pub fn validated(mut self) -> Result<Self, Error> {
        let mut v = Violations::new();
        let entrypoint = self.entrypoint.trim();
        if entrypoint.is_empty() {
            v.push("entrypoint", "must not be empty: the command to run on the cluster");
        } else if self.entrypoint.len() > MAX_ENTRYPOINT_LEN {
            v.push("entrypoint", format!("must be at most {MAX_ENTRYPOINT_LEN} bytes"));
        }
        if let Some(id) = &self.submission_id
            && let Err(why) = check_job_id(id)
        {
            v.push("submission_id", why);
        }
        if let Some(dir) = &self.runtime_env.working_dir {
            let name = dir.strip_prefix(PACKAGE_SCHEME).unwrap_or(dir);
            match check_package_name(name) {
                Ok(()) => self.runtime_env.working_dir = Some(package_uri(name)),
                Err(why) => v.push("runtime_env.working_dir", why),
            }
        }
        for name in self.runtime_env.env_vars.keys() {
            if let Err(why) = check_env_name(name) {
                v.push(format!("runtime_env.env_vars.{name}"), why);
            }
        }
        for (i, requirement) in self.runtime_env.pip.iter().enumerate() {
            if requirement.trim().is_empty() || requirement.starts_with('-') {
                v.push(
                    format!("runtime_env.pip[{i}]"),
                    "must be a requirement (name and version), not empty or an option",
                );
            }
        }
        for (field, value) in [
            ("entrypoint_num_cpus", self.entrypoint_num_cpus),
            ("entrypoint_num_gpus", self.entrypoint_num_gpus),
        ] {
            if value.is_some_and(|n| !n.is_finite() || n < 0.0) {
                v.push(field, "must be a number >= 0");
            }
        }
        v.into_result(self)
    }

    /// The package of its working dir (`_ray_pkg_….zip`), if any.
    pub fn package(&self) -> Option<&str> {
        let dir = self.runtime_env.working_dir.as_deref()?;
        Some(dir.strip_prefix(PACKAGE_SCHEME).unwrap_or(dir))
    }
}

/// How Ray names a package kept in its GCS: `gcs://` + the package.
pub const PACKAGE_SCHEME: &str = "gcs://";

/// The `working_dir` URI of `package` (`gcs://_ray_pkg_….zip`), as Ray's
/// client writes it.
pub fn package_uri(package: &str) -> String {
    format!("{PACKAGE_SCHEME}{package}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_names_are_rays() {
        assert!(check_package_name("_ray_pkg_6bb64f4d946aae18.zip").is_ok());
        for bad in [
            "_ray_pkg_6bb64f4d946aae1.zip",
            "_ray_pkg_6BB64F4D946AAE18.zip",
            "_ray_pkg_6bb64f4d946aae18.tar",
            "../_ray_pkg_6bb64f4d946aae18.zip",
            "anything.zip",
        ] {
            assert!(check_package_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_submission_is_checked_whole_and_its_working_dir_made_a_uri() {
        let ok = JobSubmission {
            entrypoint: "python train.py".into(),
            submission_id: Some("train-1".into()),
            runtime_env: RuntimeEnv {
                working_dir: Some("_ray_pkg_6bb64f4d946aae18.zip".into()),
                env_vars: [("EPOCHS".to_owned(), "3".to_owned())].into(),
                pip: vec!["numpy==2.1".into()],
            },
            ..Default::default()
        }
        .validated()
        .unwrap();
        assert_eq!(
            ok.runtime_env.working_dir.as_deref(),
            Some("gcs://_ray_pkg_6bb64f4d946aae18.zip")
        );
        assert_eq!(ok.package(), Some("_ray_pkg_6bb64f4d946aae18.zip"));

        let refused = JobSubmission {
            entrypoint: "  ".into(),
            submission_id: Some("a/b".into()),
            runtime_env: RuntimeEnv {
                working_dir: Some("s3://bucket/x.zip".into()),
                env_vars: [("1BAD".to_owned(), String::new())].into(),
                pip: vec!["--index-url=http://evil".into()],
            },
            entrypoint_num_gpus: Some(-1.0),
            ..Default::default()
        }
        .validated();
        let Err(Error::InvalidArgument(v)) = refused else {
            panic!("refused");
        };
        let fields: Vec<&str> = v.as_slice().iter().map(|f| f.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "entrypoint",
                "submission_id",
                "runtime_env.working_dir",
                "runtime_env.env_vars.1BAD",
                "runtime_env.pip[0]",
                "entrypoint_num_gpus"
            ]
        );
    }

    #[test]
    fn ids_that_are_path_segments_are_refused() {
        for id in [".", ".."] {
            assert!(check_job_id(id).unwrap_err().contains("path segment"), "{id}");
        }
        for id in ["...", "a.b", ".hidden", "v1.2"] {
            assert_eq!(check_job_id(id), Ok(()), "{id}");
        }
    }

    #[test]
    fn statuses_know_when_they_are_over() {
        assert!(!JobStatus::Running.is_terminal());
        assert!(JobStatus::Stopped.is_terminal());
        assert_eq!(JobStatus::Failed.as_str(), "FAILED");
    }
}
