//! krayne's Ray adapter: the [`RayHeads`] port over HTTP to a head's
//! dashboard, as a Ray 2.60 head speaks it (`shared/reference/ray/`):
//! the Jobs API, the log API and the cluster status. The only crate that
//! knows Ray's paths and wire.
//!
//! A head is its tenant's: every process in it, its dashboard included,
//! answers whatever the tenant wants. So every answer is capped by what it
//! is ([`reads::HeadRead`]) before it is read, all heads' answers together
//! by the replica's budget (a quarter of it per namespace), and parsed
//! into typed, bounded values; nothing a head sends is ever used as a path.
#![forbid(unsafe_code)]

mod bounded;
mod budget;
mod client;
mod reads;
mod wire;

use hyper::Method;
use krayne_core::domain::{
    DeleteReply, Error, HeadLink, HeadUse, Job, JobSubmission, LogFileRead, LogStream, PackageBody, RayHeads, RayJobs,
    RayLogListing, RayNode, ResourceKind, SubmitReply, check_job_id,
};

pub use client::LARGEST_HEAD_READ;
use reads::{HeadRead, job_path};
use wire::Answer;

/// Ray's heads over HTTP, their answers read within one replica-wide
/// budget.
#[derive(Debug)]
pub struct HttpRayHeads {
    budget: budget::HeadBudget,
}

impl HttpRayHeads {
    /// Heads whose answers being read together hold at most `budget`
    /// bytes (never less than [`LARGEST_HEAD_READ`]: every read can be
    /// had).
    pub fn new(budget: usize) -> Self {
        Self {
            budget: budget::HeadBudget::new(budget, LARGEST_HEAD_READ),
        }
    }

    /// A `GET` of `path`, its 200 answer parsed as `T`; any other status
    /// is Ray's error about `kind` `id`.
    async fn get_parsed<T: serde::de::DeserializeOwned>(
        &self,
        head: &HeadLink,
        path: &str,
        read: HeadRead,
        kind: ResourceKind,
        id: &str,
    ) -> Result<T, Error> {
        let answer = self.request(head, Method::GET, path, None, read).await?;
        if answer.status != 200 {
            return Err(answer.error(kind, id));
        }
        answer.parse()
    }
}

#[async_trait::async_trait]
impl RayHeads for HttpRayHeads {
    async fn jobs(&self, head: &HeadLink) -> Result<RayJobs, Error> {
        let listed: wire::WireJobs = self
            .get_parsed(head, "/api/jobs/", HeadRead::Jobs, ResourceKind::Job, "")
            .await?;
        Ok(RayJobs {
            truncated: listed.truncated,
            jobs: listed.items.into_iter().map(wire::job).collect::<Result<_, _>>()?,
        })
    }

    async fn job(&self, head: &HeadLink, id: &str) -> Result<Job, Error> {
        self.read_job(head, id).await
    }

    async fn submit(&self, head: &HeadLink, job: &JobSubmission) -> Result<SubmitReply, Error> {
        let body = wire::submit_body(job);
        let answer = self
            .request(head, Method::POST, "/api/jobs/", Some(body), HeadRead::Reply)
            .await?;
        match answer.status {
            200 => {
                let id = answer.parse::<wire::WireSubmitted>()?.submission_id.unwrap_or_default();
                check_job_id(&id).map_err(|_| {
                    Error::BadGateway(format!(
                        "the cluster's Ray head named the submitted job {:?}, which is no job id",
                        wire::printable(&id, 64)
                    ))
                })?;
                Ok(SubmitReply::Accepted(id))
            }
            _ if wire::is_duplicate(&answer) => Ok(SubmitReply::Taken),
            _ => Err(answer.error(ResourceKind::Job, "")),
        }
    }

    async fn stop_job(&self, head: &HeadLink, id: &str) -> Result<bool, Error> {
        let path = format!("{}/stop", job_path(id));
        let answer = self.request(head, Method::POST, &path, None, HeadRead::Reply).await?;
        if answer.status != 200 {
            return Err(answer.error(ResourceKind::Job, id));
        }
        Ok(answer.parse::<wire::WireStopped>()?.stopped.unwrap_or(false))
    }

    async fn delete_job(&self, head: &HeadLink, id: &str) -> Result<DeleteReply, Error> {
        let answer = self
            .request(head, Method::DELETE, &job_path(id), None, HeadRead::Reply)
            .await?;
        match answer.status {
            200 => Ok(DeleteReply::Deleted),
            _ if wire::is_not_terminal(&answer) => Ok(DeleteReply::NotEnded),
            _ => Err(answer.error(ResourceKind::Job, id)),
        }
    }

    async fn job_log(&self, head: &HeadLink, id: &str) -> Result<String, Error> {
        let path = format!("{}/logs", job_path(id));
        let log: wire::WireJobLog = self
            .get_parsed(head, &path, HeadRead::JobLog, ResourceKind::Job, id)
            .await?;
        Ok(log.logs.unwrap_or_default())
    }

    async fn follow_job_log(&self, head: &HeadLink, id: &str) -> Result<LogStream, Error> {
        self.log_tail(head, id).await
    }

    async fn has_package(&self, head: &HeadLink, package: &str) -> Result<bool, Error> {
        let answer = self
            .request(head, Method::GET, &package_path(package), None, HeadRead::Reply)
            .await?;
        match answer.status {
            200 => Ok(true),
            404 => Ok(false),
            _ => Err(answer.error(ResourceKind::Package, package)),
        }
    }

    async fn upload_package(
        &self,
        head: &HeadLink,
        package: &str,
        size: Option<u64>,
        body: PackageBody,
    ) -> Result<(), Error> {
        let answer = self
            .request_streamed(head, Method::PUT, &package_path(package), size, body, HeadRead::Reply)
            .await?;
        match answer.status {
            200 => Ok(()),
            _ => Err(answer.error(ResourceKind::Package, package)),
        }
    }

    async fn cluster_use(&self, head: &HeadLink) -> Result<HeadUse, Error> {
        let status: wire::WireClusterStatus = self
            .get_parsed(
                head,
                "/api/cluster_status",
                HeadRead::ClusterStatus,
                ResourceKind::RayNode,
                "head",
            )
            .await?;
        Ok(wire::head_use(&status))
    }

    async fn nodes(&self, head: &HeadLink) -> Result<Vec<RayNode>, Error> {
        let path = format!("/api/v0/nodes?limit={}", wire::MAX_NODES);
        let nodes = self
            .get_parsed(head, &path, HeadRead::Nodes, ResourceKind::RayNode, "head")
            .await?;
        wire::alive_nodes(nodes)
    }

    async fn log_files(&self, head: &HeadLink, node_id: &str) -> Result<RayLogListing, Error> {
        let path = format!("/api/v0/logs?{}", query(&[("node_id", node_id)]));
        let answer = self.request(head, Method::GET, &path, None, HeadRead::LogFiles).await?;
        if answer.status != 200 {
            return Err(log_error(&answer, node_id));
        }
        Ok(wire::log_files(answer.parse()?))
    }

    async fn log_file(&self, head: &HeadLink, read: &LogFileRead) -> Result<String, Error> {
        let answer = self
            .request(head, Method::GET, &file_path("file", read), None, HeadRead::LogFile)
            .await?;
        if answer.status != 200 {
            return Err(log_error(&answer, &read.file));
        }
        Ok(String::from_utf8_lossy(&answer.body).into_owned())
    }

    async fn follow_log_file(&self, head: &HeadLink, read: &LogFileRead) -> Result<LogStream, Error> {
        match self.get_streamed(head, &file_path("stream", read)).await? {
            Ok(chunks) => Ok(chunks),
            Err(answer) => Err(log_error(&answer, &read.file)),
        }
    }
}

/// Ray's path of a working-dir package.
fn package_path(package: &str) -> String {
    format!("/api/packages/gcs/{package}")
}

/// `pairs` as a URL query, encoded.
fn query(pairs: &[(&str, &str)]) -> String {
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    for (key, value) in pairs {
        query.append_pair(key, value);
    }
    query.finish()
}

/// `/api/v0/logs/{what}?node_id=…&filename=…&lines=…`, encoded.
fn file_path(what: &str, read: &LogFileRead) -> String {
    let lines = read.lines.to_string();
    let query = query(&[("node_id", &read.node_id), ("filename", &read.file), ("lines", &lines)]);
    format!("/api/v0/logs/{what}?{query}")
}

/// Ray's failures of its log API, as its Jobs API's are mapped: its 500
/// "A file is not found at …" is a missing file.
fn log_error(answer: &Answer, file: &str) -> Error {
    let text = String::from_utf8_lossy(&answer.body);
    if text.contains("A file is not found at") || text.contains("doesn't exist") {
        return Error::NotFound {
            kind: ResourceKind::LogFile,
            name: file.to_owned(),
            namespace: None,
        };
    }
    answer.error(ResourceKind::LogFile, file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_is_a_404_and_other_failures_say_what_ray_said() {
        let answer = Answer::new;
        let missing = log_error(
            &answer(500, "A file is not found at: /tmp/ray/session_x/logs/nope.log"),
            "nope.log",
        );
        assert_eq!(missing.to_string(), "log file \"nope.log\" not found");
        let other = log_error(&answer(500, "Server got itself in trouble"), "x");
        assert!(matches!(other, Error::Unavailable(_)), "{other}");
        let read = LogFileRead {
            node_id: "abc".into(),
            file: "events/x y.log".into(),
            lines: 2,
        };
        assert_eq!(
            file_path("file", &read),
            "/api/v0/logs/file?node_id=abc&filename=events%2Fx+y.log&lines=2"
        );
    }
}
