//! What krayne reads from a head, each read with the most of its answer
//! krayne takes.

/// Ray's path of one job.
pub(crate) fn job_path(id: &str) -> String {
    format!("/api/jobs/{id}")
}

/// What krayne reads from a head, each with the most of its answer it
/// reads (docs/security.md lists them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeadRead {
    /// `GET /api/cluster_status`: resource usage, idle time.
    ClusterStatus,
    /// `GET /api/jobs/`: every job of the head's.
    Jobs,
    /// `GET /api/jobs/{id}`: one job.
    Job,
    /// `GET /api/jobs/{id}/logs`: a job's whole log, as JSON.
    JobLog,
    /// `GET /api/v0/nodes`: the cluster's nodes.
    Nodes,
    /// `GET /api/v0/logs`: a node's log files.
    LogFiles,
    /// `GET /api/v0/logs/file`: the last lines of one file.
    LogFile,
    /// A reply to a submit, stop, delete or upload.
    Reply,
}

impl HeadRead {
    /// The most bytes of a 200 answer read.
    pub(crate) const fn limit(self) -> usize {
        const KIB: usize = 1024;
        const MIB: usize = 1024 * KIB;
        match self {
            Self::ClusterStatus | Self::Nodes | Self::LogFiles => MIB,
            Self::Jobs => 2 * MIB,
            Self::Job => 256 * KIB,
            // As much as a pod log's answer (`limitBytes`); a longer log
            // is followed, which streams.
            Self::JobLog | Self::LogFile => 4 * MIB,
            Self::Reply => 64 * KIB,
        }
    }

    /// What a caller can do instead when an honest answer is larger than
    /// krayne reads.
    pub(crate) const fn instead(self) -> &'static str {
        match self {
            Self::JobLog => "; follow the log (`krayne jobs logs -f`, `follow=true`), which streams it",
            Self::LogFile => "; ask for fewer lines (`--tail`, `lines=`) or follow the file (`-f`)",
            Self::ClusterStatus | Self::Jobs | Self::Job | Self::Nodes | Self::LogFiles | Self::Reply => "",
        }
    }

    /// What it is, in words and in metrics.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Self::ClusterStatus => "cluster_status",
            Self::Jobs => "jobs",
            Self::Job => "job",
            Self::JobLog => "job_log",
            Self::Nodes => "nodes",
            Self::LogFiles => "log_files",
            Self::LogFile => "log_file",
            Self::Reply => "reply",
        }
    }
}

/// The most bytes of an error answer read (a traceback's last line is
/// what krayne shows of it); the rest is not waited for.
pub(crate) const ERROR_ANSWER_LIMIT: usize = 64 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_read_is_capped_well_below_a_replicas_memory() {
        let all = [
            HeadRead::ClusterStatus,
            HeadRead::Jobs,
            HeadRead::Job,
            HeadRead::JobLog,
            HeadRead::Nodes,
            HeadRead::LogFiles,
            HeadRead::LogFile,
            HeadRead::Reply,
        ];
        for read in all {
            assert!(read.limit() <= 4 * 1024 * 1024, "{read:?}");
        }
    }
}
