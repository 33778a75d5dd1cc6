//! Ray's Jobs REST API as a Ray 2.60 head speaks it
//! (`shared/reference/ray/jobs-api.md`): the bodies krayne sends, the job
//! objects it reads, and Ray's answers mapped to krayne's errors. Pure.

use std::collections::BTreeMap;

use serde::{Deserialize, de::DeserializeOwned};
use serde_json::{Map, Value, json};

use krayne_core::domain::{
    Error, HeadUse, Job, JobStatus, JobSubmission, RayLogListing, RayNode, ResourceKind, check_log_file_name,
};

use crate::bounded::{Bounded, BoundedMap};

/// Ray's answer to one request, read within its limit; it holds its share
/// of the replica's budget for heads' answers until dropped.
#[derive(Debug)]
pub(crate) struct Answer {
    /// HTTP status.
    pub(crate) status: u16,
    /// The body (JSON on success; text, often a traceback, on error).
    pub(crate) body: bytes::Bytes,
    _held: Option<crate::budget::Held>,
}

impl Answer {
    /// An answer holding `held` of the budget.
    pub(crate) fn held(status: u16, body: bytes::Bytes, held: Option<crate::budget::Held>) -> Self {
        Self {
            status,
            body,
            _held: held,
        }
    }

    /// An answer that holds no budget (tests).
    #[cfg(test)]
    pub(crate) fn new(status: u16, body: &str) -> Self {
        Self::held(status, bytes::Bytes::copy_from_slice(body.as_bytes()), None)
    }

    /// The body as the typed, bounded `T`; a body that is not is the
    /// head's fault (`BadGateway`).
    pub(crate) fn parse<T: DeserializeOwned>(&self) -> Result<T, Error> {
        serde_json::from_slice(&self.body).map_err(|e| {
            Error::BadGateway(format!(
                "the cluster's Ray head answered something that is not what Ray's API sends: {e}"
            ))
        })
    }

    /// The last line of a text body: a traceback's exception, or Ray's
    /// one-line 404; at most 500 characters, with no control characters.
    pub(crate) fn last_line(&self) -> String {
        let text = String::from_utf8_lossy(&self.body);
        let line = text.lines().rev().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
        let line = line.strip_prefix("RuntimeError: ").unwrap_or(line);
        printable(line, 500)
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
            status @ 500..=599 => Error::Unavailable(format!(
                "the cluster's Ray head answered {status}: {}",
                self.last_line()
            )),
            status => Error::BadGateway(format!(
                "the cluster's Ray head answered {status}, which Ray's API does not: {}",
                self.last_line()
            )),
        }
    }
}

/// `text`, at most `max` characters, its control characters (a terminal's
/// escapes, newlines) each shown as `\u{…}`: text from a head that krayne
/// puts in its own messages.
pub(crate) fn printable(text: &str, max: usize) -> String {
    let mut out = String::new();
    for c in text.chars().take(max) {
        if c.is_control() {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
    }
    out
}

/// A job object as a Ray head sends it (`jobs-api.md`): the fields krayne
/// reads, each bounded by the answer's size, metadata by count.
#[derive(Debug, Deserialize)]
pub(crate) struct WireJob {
    #[serde(rename = "type")]
    kind: Option<String>,
    job_id: Option<String>,
    submission_id: Option<String>,
    status: Option<String>,
    entrypoint: Option<String>,
    message: Option<String>,
    error_type: Option<String>,
    start_time: Option<serde_json::Number>,
    end_time: Option<serde_json::Number>,
    driver_exit_code: Option<serde_json::Number>,
    metadata: Option<BoundedMap<String, MAX_METADATA>>,
}

/// Most metadata entries read of a job (Ray's clients send a handful).
const MAX_METADATA: usize = 64;
/// Most jobs read of a head's list.
pub(crate) const MAX_JOBS: usize = 1000;

/// A head's `GET /api/jobs/`.
pub(crate) type WireJobs = Bounded<WireJob, MAX_JOBS>;

/// A head's `GET /api/jobs/{id}/logs`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireJobLog {
    #[serde(default)]
    pub(crate) logs: Option<String>,
}

/// A head's answer to `POST /api/jobs/`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireSubmitted {
    #[serde(default)]
    pub(crate) submission_id: Option<String>,
}

/// A head's answer to `POST /api/jobs/{id}/stop`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireStopped {
    #[serde(default)]
    pub(crate) stopped: Option<bool>,
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
pub(crate) fn job(wire: WireJob) -> Result<Job, Error> {
    let unexpected = |what: &str| Error::BadGateway(format!("the cluster's Ray head sent a job without {what}"));
    let status = wire
        .status
        .as_deref()
        .and_then(|s| JobStatus::deserialize(serde::de::value::StrDeserializer::<serde::de::value::Error>::new(s)).ok())
        .ok_or_else(|| unexpected("a known status"))?;
    let id = wire
        .submission_id
        .clone()
        .or_else(|| wire.job_id.clone())
        .ok_or_else(|| unexpected("an id"))?;
    let time = |n: Option<serde_json::Number>| {
        n.and_then(|n| n.as_i64())
            .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
            .map(|t| t.to_string())
    };
    let metadata: BTreeMap<String, String> = wire
        .metadata
        .map(|m| m.entries.into_iter().collect())
        .unwrap_or_default();
    Ok(Job {
        id,
        submission_id: wire.submission_id,
        ray_job_id: wire.job_id,
        kind: wire.kind.unwrap_or_else(|| "SUBMISSION".into()),
        entrypoint: wire.entrypoint.unwrap_or_default(),
        status,
        message: wire.message,
        error_type: wire.error_type,
        start_time: time(wire.start_time),
        end_time: time(wire.end_time),
        driver_exit_code: wire.driver_exit_code.and_then(|n| n.as_i64()),
        metadata,
    })
}

/// A head's `GET /api/cluster_status` (JSON format): what krayne reads.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireClusterStatus {
    #[serde(default)]
    data: StatusData,
}

#[derive(Debug, Default, Deserialize)]
struct StatusData {
    #[serde(default, rename = "autoscalingStatus")]
    autoscaling_status: Option<String>,
    #[serde(default, rename = "clusterStatus")]
    cluster_status: Option<ClusterStatusPart>,
}

#[derive(Debug, Default, Deserialize)]
struct ClusterStatusPart {
    #[serde(default, rename = "loadMetricsReport")]
    load_metrics_report: Option<LoadMetrics>,
}

#[derive(Debug, Default, Deserialize)]
struct LoadMetrics {
    usage: Option<BoundedMap<(f64, f64), MAX_RESOURCES>>,
}

/// Most resources read of a head's usage (Ray's own are ~5 plus a
/// `node:` marker per node).
const MAX_RESOURCES: usize = 4096;

/// Reads `loadMetricsReport.usage` (resource → [used, total]) and the
/// `NodeIdleSeconds` line of `autoscalingStatus`. Object-store memory and
/// the `node:*` markers are not use: objects stay stored when nothing runs.
/// A usage cut short says nothing.
pub(crate) fn head_use(answer: &WireClusterStatus) -> HeadUse {
    let data = &answer.data;
    let Some(usage) = data
        .cluster_status
        .as_ref()
        .and_then(|c| c.load_metrics_report.as_ref())
        .and_then(|l| l.usage.as_ref())
    else {
        return HeadUse::Unknown;
    };
    let counts =
        |name: &str| !name.starts_with("node:") && !matches!(name, "objectStoreMemory" | "object_store_memory");
    if usage
        .entries
        .iter()
        .any(|(name, (used, _))| counts(name) && *used > 0.0)
    {
        return HeadUse::InUse;
    }
    if usage.truncated {
        return HeadUse::Unknown;
    }
    let idle = data.autoscaling_status.as_deref().and_then(|text| {
        let (_, rest) = text.split_once("NodeIdleSeconds: Min=")?;
        let digits: String = rest.chars().take(20).take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    });
    idle.map_or(HeadUse::Unknown, HeadUse::IdleFor)
}

/// A node as a head's `GET /api/v0/nodes` lists it.
#[derive(Debug, Deserialize)]
pub(crate) struct WireNode {
    #[serde(default)]
    node_id: String,
    #[serde(default)]
    node_ip: String,
    #[serde(default)]
    is_head_node: bool,
    #[serde(default)]
    state: String,
}

/// A head's `GET /api/v0/nodes`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireNodes {
    data: NodesData,
}

#[derive(Debug, Deserialize)]
struct NodesData {
    result: NodesResult,
}

#[derive(Debug, Deserialize)]
struct NodesResult {
    result: Bounded<WireNode, MAX_NODES>,
}

/// Most nodes read (the most krayne asks for).
pub(crate) const MAX_NODES: usize = 1000;

/// The live nodes of a head's answer; a node whose id is not hex or whose
/// IP is no address makes the answer the head's fault.
pub(crate) fn alive_nodes(answer: WireNodes) -> Result<Vec<RayNode>, Error> {
    let mut nodes = Vec::new();
    for node in answer.data.result.result.items {
        if node.state != "ALIVE" {
            continue;
        }
        let id_ok = (1..=128).contains(&node.node_id.len()) && node.node_id.bytes().all(|b| b.is_ascii_hexdigit());
        let ip = node.node_ip.parse::<std::net::IpAddr>();
        let (true, Ok(ip)) = (id_ok, ip) else {
            return Err(Error::BadGateway(format!(
                "the cluster's Ray head named a node {:?} at {:?}: not a node id and an IP address",
                printable(&node.node_id, 64),
                printable(&node.node_ip, 64)
            )));
        };
        nodes.push(RayNode {
            id: node.node_id.to_ascii_lowercase(),
            ip,
            head: node.is_head_node,
        });
    }
    Ok(nodes)
}

/// A head's `GET /api/v0/logs`: files grouped by component.
#[derive(Debug, Deserialize)]
pub(crate) struct WireLogFiles {
    data: LogFilesData,
}

#[derive(Debug, Deserialize)]
struct LogFilesData {
    result: BoundedMap<Bounded<String, MAX_FILES>, MAX_GROUPS>,
}

/// Most component groups read of a node's log files.
const MAX_GROUPS: usize = 256;
/// Most files read of one group.
const MAX_FILES: usize = 10_000;

/// A node's log files by group, only the names a file read would accept
/// (relative, inside the log directory: `check_log_file_name`); groups
/// named with control characters or slashes are left out too. The second
/// value counts the names left out.
pub(crate) fn log_files(answer: WireLogFiles) -> RayLogListing {
    let mut left_out = 0;
    let mut groups = BTreeMap::new();
    for (group, names) in answer.data.result.entries {
        if group.is_empty() || group.len() > 128 || group.chars().any(|c| c.is_control() || c == '/' || c == '\\') {
            left_out += names.items.len();
            continue;
        }
        let total = names.items.len();
        let kept: Vec<String> = names
            .items
            .into_iter()
            .filter(|name| check_log_file_name(name.strip_suffix('/').unwrap_or(name)).is_ok())
            .collect();
        left_out += total - kept.len();
        groups.insert(group, kept);
    }
    RayLogListing { groups, left_out }
}

#[cfg(test)]
mod tests {
    use super::*;
    use krayne_core::domain::RuntimeEnv;

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
        let used = |v: &Value| head_use(&serde_json::from_value(v.clone()).unwrap());
        assert_eq!(used(&status(4, 0.0)), HeadUse::IdleFor(4));
        assert_eq!(used(&status(0, 1.0)), HeadUse::InUse);
        let mut gpu = status(30, 0.0);
        gpu["data"]["clusterStatus"]["loadMetricsReport"]["usage"]["GPU"] = json!([1.0, 8.0]);
        assert_eq!(used(&gpu), HeadUse::InUse);
        let mut silent = status(30, 0.0);
        silent["data"]["autoscalingStatus"] = json!("Cluster status: 0 nodes");
        assert_eq!(used(&silent), HeadUse::Unknown, "idle since when? not said: not idle");
        assert_eq!(used(&json!({"result": false})), HeadUse::Unknown);
    }

    fn answer(status: u16, body: &str) -> Answer {
        Answer::new(status, body)
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
        let job = job(serde_json::from_value(recorded).unwrap()).unwrap();
        assert_eq!(job.id, "rec-exit3");
        assert_eq!(job.ray_job_id, None);
        assert_eq!(job.status, JobStatus::Failed);
        assert_eq!(job.driver_exit_code, Some(3));
        assert_eq!(job.start_time.as_deref(), Some("2026-11-23T11:42:38.24Z"));
        assert!(job.metadata.is_empty());

        let driver = json!({"type": "DRIVER", "job_id": "02000000", "submission_id": null, "status": "RUNNING",
            "entrypoint": "python x.py", "metadata": {}, "start_time": 1795434158240_i64});
        let read = |v: Value| super::job(serde_json::from_value(v).unwrap());
        assert_eq!(read(driver).unwrap().id, "02000000");
        assert!(read(json!({"status": "LOST"})).is_err());
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

#[cfg(test)]
mod hostile {
    use super::*;

    #[test]
    fn a_heads_text_in_krayne_s_messages_carries_no_terminal_escapes() {
        let answer = Answer::new(500, "Traceback\nValueError: \u{1b}]0;pwned\u{7}\u{1b}[2Jgone");
        let line = answer.last_line();
        assert!(!line.chars().any(char::is_control), "{line:?}");
        assert!(line.contains("pwned"), "{line:?}");
        assert_eq!(printable("ab\u{1b}c", 2), "ab");
    }

    #[test]
    fn a_redirect_is_not_rays_and_says_so() {
        let moved = Answer::new(302, "").error(ResourceKind::Job, "x");
        assert_eq!(moved.code(), "bad_gateway");
    }

    #[test]
    fn nodes_named_as_paths_make_the_answer_the_heads_fault() {
        let nodes = |id: &str, ip: &str| -> WireNodes {
            serde_json::from_value(json!({"data": {"result": {"result": [
                {"node_id": id, "node_ip": ip, "is_head_node": true, "state": "ALIVE"}]}}}))
            .unwrap()
        };
        let fine = alive_nodes(nodes("AB12cd", "10.0.0.7")).unwrap();
        assert_eq!(fine[0].id, "ab12cd");
        for (id, ip) in [
            ("ab12", "/home/victim/.ssh"),
            ("ab12", "../../x"),
            ("../../x", "10.0.0.7"),
            ("", "10.0.0.7"),
            ("ab12", ""),
        ] {
            let e = alive_nodes(nodes(id, ip)).unwrap_err();
            assert_eq!(e.code(), "bad_gateway", "{id:?} {ip:?}");
        }
        let dead: WireNodes = serde_json::from_value(json!({"data": {"result": {"result": [
            {"node_id": "../x", "node_ip": "/etc", "state": "DEAD"}]}}}))
        .unwrap();
        assert!(alive_nodes(dead).unwrap().is_empty(), "dead nodes are not read");
    }

    #[test]
    fn listed_files_are_only_names_a_read_would_take() {
        let listed: WireLogFiles = serde_json::from_value(json!({"data": {"result": {
            "internal": ["raylet.out", "events/", "../escape-try", "/abs-try", "a//b", "x\u{1b}[2J"],
            "../group": ["fine.log"],
        }}}))
        .unwrap();
        let RayLogListing { groups, left_out } = log_files(listed);
        assert_eq!(groups.len(), 1);
        assert_eq!(groups["internal"], ["raylet.out", "events/"]);
        assert_eq!(left_out, 5);
    }

    #[test]
    fn a_job_list_of_millions_of_empty_objects_parses_to_at_most_the_bound() {
        let body = format!("[{}{{}}]", "{},".repeat(200_000));
        let jobs: WireJobs = serde_json::from_str(&body).unwrap();
        assert_eq!(jobs.items.len(), MAX_JOBS);
        assert!(jobs.truncated);
        let numbers: Result<WireJobs, _> = serde_json::from_str(&format!("[{}0]", "0,".repeat(1000)));
        assert!(numbers.is_err(), "a job is an object");
    }
}
