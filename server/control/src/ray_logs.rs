//! A cluster's Ray log files (viewer), through its head's dashboard log
//! API (`/api/v0/nodes`, `/api/v0/logs`, `/api/v0/logs/file`,
//! `/api/v0/logs/stream`): what `kubectl ray log` collects, without exec.

use hyper::Method;

use super::{
    Context, ControlPlane, LogStream, Reachable,
    ray::{
        HeadRead,
        wire::{self, Answer, RayNode},
    },
};
use crate::domain::{ClusterRef, Error, RayLogFiles, ResourceKind, audit::AuditAction, check_log_file_name};

/// Lines of a file read when none are asked for (Ray's own default).
const DEFAULT_LINES: u32 = 1000;
/// The most lines one read asks Ray for.
const MAX_LINES: u32 = 100_000;

impl ControlPlane {
    /// A Ray node's log files (the head's by default; `node` is a node id
    /// or IP).
    pub async fn ray_log_files(
        &self,
        cx: &Context,
        cluster: &ClusterRef,
        node: Option<&str>,
    ) -> Result<RayLogFiles, Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let target = self.authorize_cluster(cx, AuditAction::ClusterLogs, cluster).await?;
        let head = self.ray_head(cx, &target).await?;
        let node = self.ray_node(cx, &head, node).await?;
        let answer = self
            .ray(
                cx,
                &head,
                Method::GET,
                &format!("/api/v0/logs?node_id={}", node.id),
                None,
                HeadRead::LogFiles,
            )
            .await?;
        if answer.status != 200 {
            return Err(log_error(&answer, &node.id));
        }
        let (files, left_out) = wire::log_files(answer.parse()?);
        if left_out > 0 {
            tracing::info!(%namespace, cluster = %name, left_out, "a head listed log files no read would take; left out");
        }
        self.record_read(cx, AuditAction::ClusterLogs, Some(namespace), Some(name))
            .await;
        Ok(RayLogFiles {
            node_id: node.id,
            node_ip: node.ip.to_string(),
            is_head_node: node.head,
            files,
        })
    }

    /// The last `lines` of a Ray log file on a node (viewer).
    pub async fn ray_log_file(
        &self,
        cx: &Context,
        cluster: &ClusterRef,
        node: Option<&str>,
        file: &str,
        lines: Option<u32>,
    ) -> Result<String, Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let (head, path) = self.ray_log_target(cx, cluster, node, file, lines, "file").await?;
        let answer = self.ray(cx, &head, Method::GET, &path, None, HeadRead::LogFile).await?;
        if answer.status != 200 {
            return Err(log_error(&answer, file));
        }
        self.record_read(cx, AuditAction::ClusterLogs, Some(namespace), Some(name))
            .await;
        Ok(String::from_utf8_lossy(&answer.body).into_owned())
    }

    /// The last `lines` of a Ray log file, then what is written to it, as
    /// long as the caller reads (viewer); within the caller's limit of
    /// followed logs, ended as every stream is.
    pub async fn follow_ray_log_file(
        &self,
        cx: &Context,
        cluster: &ClusterRef,
        node: Option<&str>,
        file: &str,
        lines: Option<u32>,
    ) -> Result<LogStream, Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let (head, path) = self.ray_log_target(cx, cluster, node, file, lines, "stream").await?;
        let permit = self.follow_permit(cx, namespace, name).await?;
        let chunks = match self.ray_get_streamed(cx, &head, &path).await? {
            Ok(chunks) => chunks,
            Err(answer) => return Err(log_error(&answer, file)),
        };
        Ok(self.followed(cx, namespace, name, permit, chunks).await)
    }

    /// The head to ask, and the path of `/api/v0/logs/{what}` for `file`
    /// on `node`, once the caller may read.
    async fn ray_log_target(
        &self,
        cx: &Context,
        cluster: &ClusterRef,
        node: Option<&str>,
        file: &str,
        lines: Option<u32>,
        what: &str,
    ) -> Result<(Reachable, String), Error> {
        let target = self.authorize_cluster(cx, AuditAction::ClusterLogs, cluster).await?;
        check_log_file_name(file)?;
        let head = self.ray_head(cx, &target).await?;
        let node = self.ray_node(cx, &head, node).await?;
        let path = file_path(what, &node.id, file, lines)?;
        Ok((head, path))
    }

    /// The node `wanted` names (an id or an IP), else the head node.
    async fn ray_node(&self, cx: &Context, head: &Reachable, wanted: Option<&str>) -> Result<RayNode, Error> {
        let answer = self
            .ray(
                cx,
                head,
                Method::GET,
                &format!("/api/v0/nodes?limit={}", wire::MAX_NODES),
                None,
                HeadRead::Nodes,
            )
            .await?;
        if answer.status != 200 {
            return Err(answer.error(ResourceKind::RayNode, wanted.unwrap_or("head")));
        }
        let nodes = wire::alive_nodes(answer.parse()?)?;
        let wanted_ip = wanted.and_then(|w| w.parse::<std::net::IpAddr>().ok());
        let found = match wanted {
            Some(w) => nodes
                .into_iter()
                .find(|n| n.id.eq_ignore_ascii_case(w) || Some(n.ip) == wanted_ip),
            None => nodes.into_iter().find(|n| n.head),
        };
        found.ok_or_else(|| Error::NotFound {
            kind: ResourceKind::RayNode,
            name: wanted.unwrap_or("head").to_owned(),
            namespace: None,
        })
    }
}

/// `/api/v0/logs/{what}?node_id=…&filename=…&lines=…`, encoded.
fn file_path(what: &str, node: &str, file: &str, lines: Option<u32>) -> Result<String, Error> {
    let lines = lines.unwrap_or(DEFAULT_LINES);
    if lines == 0 || lines > MAX_LINES {
        return Err(Error::invalid("lines", format!("must be between 1 and {MAX_LINES}")));
    }
    let query = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("node_id", node)
        .append_pair("filename", file)
        .append_pair("lines", &lines.to_string())
        .finish();
    Ok(format!("/api/v0/logs/{what}?{query}"))
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
        assert_eq!(
            file_path("file", "abc", "events/x y.log", Some(2)).unwrap(),
            "/api/v0/logs/file?node_id=abc&filename=events%2Fx+y.log&lines=2"
        );
        assert!(file_path("file", "abc", "x", Some(0)).is_err());
    }
}
