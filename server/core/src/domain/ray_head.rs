//! A cluster's Ray head as the use cases ask it: Ray's Jobs API, its log
//! API and its cluster status, each a typed call of the [`RayHeads`] port.
//! The use cases decide who may ask and which head; the adapter
//! (`krayne-ray`) speaks HTTP to the head's dashboard, on a connection
//! per request that the control plane opens ([`HeadLink::dial`]: counted,
//! audited, within the caller's caps), and reads every answer as hostile
//! input (bounded, typed, never a path).

use std::{collections::BTreeMap, fmt, net::IpAddr, pin::Pin, sync::Arc};

use futures::Stream;

use super::{ClusterRef, Error, Job, JobSubmission, ServiceStream};

/// A log as it grows: chunks of text, in order; an error, if any, is the
/// stream's last item.
pub type LogStream = Pin<Box<dyn Stream<Item = Result<String, Error>> + Send>>;

/// A package's bytes as they arrive.
pub type PackageBody = Pin<Box<dyn Stream<Item = Result<bytes::Bytes, std::io::Error>> + Send>>;

/// Opens one connection to a head's dashboard.
#[async_trait::async_trait]
pub trait DialHead: Send + Sync {
    /// A new connection (`Unavailable` when nothing answers; refused past
    /// the caller's caps).
    async fn dial(&self) -> Result<Box<dyn ServiceStream>, Error>;
}

/// Whose share of a replica's memory for heads' answers a read counts
/// against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadReader {
    /// A caller's: the share of the namespace the cluster is in.
    Caller,
    /// krayne's own (the lifecycle reaper's): bounded by its concurrency,
    /// it waits for krayne's half of the budget rather than being refused.
    Krayne,
}

/// One head, as a use case hands it to the [`RayHeads`] port.
#[derive(Clone)]
pub struct HeadLink {
    cluster: ClusterRef,
    pod: String,
    reader: HeadReader,
    authorization: Option<String>,
    dial: Arc<dyn DialHead>,
}

impl HeadLink {
    /// Head pod `pod` of `cluster`, read for `reader`, sending
    /// `authorization` (Ray's token, as its header's value) when there is
    /// one, reached through `dial`.
    pub fn new(
        cluster: ClusterRef,
        pod: impl Into<String>,
        reader: HeadReader,
        authorization: Option<String>,
        dial: Arc<dyn DialHead>,
    ) -> Self {
        Self {
            cluster,
            pod: pod.into(),
            reader,
            authorization,
            dial,
        }
    }

    /// The cluster whose head it is.
    pub fn cluster(&self) -> &ClusterRef {
        &self.cluster
    }

    /// The head pod serving it now.
    pub fn pod(&self) -> &str {
        &self.pod
    }

    /// Whose share its answers count against.
    pub fn reader(&self) -> HeadReader {
        self.reader
    }

    /// Ray's token as its header's value, if the cluster has one.
    pub fn authorization(&self) -> Option<&str> {
        self.authorization.as_deref()
    }

    /// A new connection to the head's dashboard.
    pub async fn dial(&self) -> Result<Box<dyn ServiceStream>, Error> {
        self.dial.dial().await
    }
}

impl fmt::Debug for HeadLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeadLink")
            .field("cluster", &self.cluster)
            .field("pod", &self.pod)
            .field("reader", &self.reader)
            .field("authorization", &self.authorization.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

/// What a head said to a submission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubmitReply {
    /// It took the job, under this id.
    Accepted(String),
    /// Its submission id names a job already there.
    Taken,
}

/// What a head said to a delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteReply {
    /// The job and its log are gone.
    Deleted,
    /// The job has not ended.
    NotEnded,
}

/// A head's jobs, newest first as Ray lists them.
#[derive(Debug, Clone, Default)]
pub struct RayJobs {
    /// The jobs read.
    pub jobs: Vec<Job>,
    /// Whether the head listed more than krayne reads.
    pub truncated: bool,
}

/// What a head's cluster status says of its use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadUse {
    /// A resource is in use (a task, an actor, a job's entrypoint holds it).
    InUse,
    /// Nothing in use; its least idle node has been idle this many seconds.
    IdleFor(u64),
    /// The answer does not say.
    Unknown,
}

/// A live Ray node, its id and IP checked: an id is hex (Ray's are 56 hex
/// digits), an IP an IP address. Neither is ever a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RayNode {
    /// Its id, 1 to 128 hex digits, lower case.
    pub id: String,
    /// Its IP address.
    pub ip: IpAddr,
    /// Whether it is the head node.
    pub head: bool,
}

/// A node's log files, only names a file read would take.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RayLogListing {
    /// File names by component.
    pub groups: BTreeMap<String, Vec<String>>,
    /// Names the head listed that were left out (paths, control
    /// characters, too many).
    pub left_out: usize,
}

/// One read of a Ray log file: the last `lines` of `file` on node
/// `node_id` (a checked [`RayNode`] id; `file` checked by
/// `check_log_file_name`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFileRead {
    /// The node's id.
    pub node_id: String,
    /// The file, relative to the node's log directory.
    pub file: String,
    /// How many lines from its end.
    pub lines: u32,
}

/// A cluster's Ray head: its Jobs API, log API and cluster status. Every
/// answer is read within a bound and parsed into these types; Ray's
/// failures come back as krayne's errors (an unknown job `NotFound`, a
/// refused body `InvalidArgument`, Ray's 5xx `Unavailable`, anything Ray
/// would not send `BadGateway`).
#[async_trait::async_trait]
pub trait RayHeads: Send + Sync + 'static {
    /// The head's jobs.
    async fn jobs(&self, head: &HeadLink) -> Result<RayJobs, Error>;

    /// One job (`NotFound` when the head has none of that id).
    async fn job(&self, head: &HeadLink, id: &str) -> Result<Job, Error>;

    /// Submits `job` (validated).
    async fn submit(&self, head: &HeadLink, job: &JobSubmission) -> Result<SubmitReply, Error>;

    /// Asks job `id` to stop: whether it was running and was told to.
    async fn stop_job(&self, head: &HeadLink, id: &str) -> Result<bool, Error>;

    /// Deletes job `id` and its log.
    async fn delete_job(&self, head: &HeadLink, id: &str) -> Result<DeleteReply, Error>;

    /// Job `id`'s whole log so far.
    async fn job_log(&self, head: &HeadLink, id: &str) -> Result<String, Error>;

    /// Job `id`'s log from its start as it grows, until the job ends.
    async fn follow_job_log(&self, head: &HeadLink, id: &str) -> Result<LogStream, Error>;

    /// Whether the head holds working-dir package `package`.
    async fn has_package(&self, head: &HeadLink, package: &str) -> Result<bool, Error>;

    /// Uploads working-dir package `package`, `size` bytes if known,
    /// streamed as `body` arrives; a body that fails leaves nothing kept.
    async fn upload_package(
        &self,
        head: &HeadLink,
        package: &str,
        size: Option<u64>,
        body: PackageBody,
    ) -> Result<(), Error>;

    /// What the head's cluster status says of its use.
    async fn cluster_use(&self, head: &HeadLink) -> Result<HeadUse, Error>;

    /// The cluster's live nodes.
    async fn nodes(&self, head: &HeadLink) -> Result<Vec<RayNode>, Error>;

    /// Node `node_id`'s log files.
    async fn log_files(&self, head: &HeadLink, node_id: &str) -> Result<RayLogListing, Error>;

    /// The last lines of a log file (`NotFound` when there is none).
    async fn log_file(&self, head: &HeadLink, read: &LogFileRead) -> Result<String, Error>;

    /// The last lines of a log file, then what is written to it.
    async fn follow_log_file(&self, head: &HeadLink, read: &LogFileRead) -> Result<LogStream, Error>;
}
