//! A cluster's Ray log files (viewer), through its head's dashboard log
//! API: what `kubectl ray log` collects, without exec.

use super::{Context, ControlPlane};
use crate::domain::{
    ClusterRef, Error, HeadLink, LogFileRead, LogStream, RayLogFiles, RayNode, ResourceKind, audit::AuditAction,
    check_log_file_name,
};

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
        let node = self.ray_node(&head, node).await?;
        let listing = self.ray()?.log_files(&head, &node.id).await?;
        if listing.left_out > 0 {
            let left_out = listing.left_out;
            tracing::info!(%namespace, cluster = %name, left_out, "a head listed log files no read would take; left out");
        }
        self.record_read(cx, AuditAction::ClusterLogs, Some(namespace), Some(name))
            .await;
        Ok(RayLogFiles {
            node_id: node.id,
            node_ip: node.ip.to_string(),
            is_head_node: node.head,
            files: listing.groups,
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
        let (head, read) = self.ray_log_target(cx, cluster, node, file, lines).await?;
        let text = self.ray()?.log_file(&head, &read).await?;
        self.record_read(cx, AuditAction::ClusterLogs, Some(namespace), Some(name))
            .await;
        Ok(text)
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
        let (head, read) = self.ray_log_target(cx, cluster, node, file, lines).await?;
        let permit = self.follow_permit(cx, namespace, name).await?;
        let chunks = self.ray()?.follow_log_file(&head, &read).await?;
        Ok(self.followed(cx, namespace, name, permit, chunks).await)
    }

    /// The head to ask, and what to read of `file` on `node`, once the
    /// caller may read.
    async fn ray_log_target(
        &self,
        cx: &Context,
        cluster: &ClusterRef,
        node: Option<&str>,
        file: &str,
        lines: Option<u32>,
    ) -> Result<(HeadLink, LogFileRead), Error> {
        let target = self.authorize_cluster(cx, AuditAction::ClusterLogs, cluster).await?;
        check_log_file_name(file)?;
        let lines = checked_lines(lines)?;
        let head = self.ray_head(cx, &target).await?;
        let node = self.ray_node(&head, node).await?;
        let read = LogFileRead {
            node_id: node.id,
            file: file.to_owned(),
            lines,
        };
        Ok((head, read))
    }

    /// The node `wanted` names (an id or an IP), else the head node.
    async fn ray_node(&self, head: &HeadLink, wanted: Option<&str>) -> Result<RayNode, Error> {
        let nodes = self.ray()?.nodes(head).await?;
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

/// The lines asked for, else Ray's default; between 1 and [`MAX_LINES`].
fn checked_lines(lines: Option<u32>) -> Result<u32, Error> {
    let lines = lines.unwrap_or(DEFAULT_LINES);
    if lines == 0 || lines > MAX_LINES {
        return Err(Error::invalid("lines", format!("must be between 1 and {MAX_LINES}")));
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_rays_default_or_within_the_bound() {
        assert_eq!(checked_lines(None).unwrap(), DEFAULT_LINES);
        assert_eq!(checked_lines(Some(2)).unwrap(), 2);
        assert!(checked_lines(Some(0)).is_err());
        assert!(checked_lines(Some(MAX_LINES + 1)).is_err());
    }
}
