//! A cluster's pod logs: read, or followed.

use futures::{Stream, StreamExt as _};

use crate::{Client, ClientError, proto};

/// A followed pod log: the pod and container read, and the text as it
/// comes.
pub struct FollowedLog<S> {
    /// The pod read.
    pub pod: String,
    /// The container read.
    pub container: String,
    /// Chunks of whole lines, until the container ends.
    pub text: S,
}

impl Client {
    /// A container's log of one of a cluster's pods (viewer): the head's by
    /// default; `request` names the cluster and, optionally, a pod, a node
    /// type and group, a container, `tail_lines`, `since_seconds`,
    /// `previous`.
    pub async fn cluster_logs(&self, request: proto::ClusterLogsRequest) -> Result<proto::ClusterLogs, ClientError> {
        Ok(retrying!(self, clusters, get_cluster_logs, request)?.into_inner())
    }

    /// The same log, then as it is written, until the container ends
    /// (viewer). Not resumed when a server ends it: the caller asks again
    /// (with `since_seconds`, say).
    pub async fn tail_cluster_logs(
        &self,
        request: proto::ClusterLogsRequest,
    ) -> Result<FollowedLog<impl Stream<Item = Result<String, ClientError>> + Unpin + use<>>, ClientError> {
        let mut stream = self
            .clusters()
            .tail_cluster_logs(self.request(request))
            .await?
            .into_inner();
        let first = stream.message().await?.unwrap_or_default();
        let text = stream.map(|chunk| chunk.map(|c| c.text).map_err(ClientError::from));
        Ok(FollowedLog {
            pod: first.pod,
            container: first.container,
            text,
        })
    }

    /// A Ray node's log files by component (viewer): the head node's
    /// unless `request.node` names another (an id or IP).
    pub async fn list_ray_logs(&self, request: proto::RayLogsRequest) -> Result<proto::RayLogFiles, ClientError> {
        Ok(retrying!(self, clusters, list_ray_logs, request)?.into_inner())
    }

    /// The last lines of a Ray log file on a node (viewer).
    pub async fn ray_log(&self, request: proto::RayLogRequest) -> Result<String, ClientError> {
        Ok(retrying!(self, clusters, get_ray_log, request)?.into_inner().text)
    }

    /// The same, then what is written to the file, until the stream is
    /// dropped (viewer).
    pub async fn tail_ray_log(
        &self,
        request: proto::RayLogRequest,
    ) -> Result<impl Stream<Item = Result<String, ClientError>> + Unpin + use<>, ClientError> {
        let stream = self.clusters().tail_ray_log(self.request(request)).await?.into_inner();
        Ok(stream.map(|chunk| chunk.map(|c| c.text).map_err(ClientError::from)))
    }

    /// The head's last `lines` of a cluster that is not ready, and whether
    /// they are the crashed container's (a crash loop), which are read
    /// first, else the running one's (viewer).
    pub async fn head_last_lines(
        &self,
        namespace: &str,
        name: &str,
        lines: u32,
    ) -> Result<(proto::ClusterLogs, bool), ClientError> {
        let ask = |previous| proto::ClusterLogsRequest {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            tail_lines: Some(lines),
            previous,
            ..Default::default()
        };
        match self.cluster_logs(ask(true)).await {
            Ok(log) if !log.text.trim().is_empty() => Ok((log, true)),
            _ => Ok((self.cluster_logs(ask(false)).await?, false)),
        }
    }
}
