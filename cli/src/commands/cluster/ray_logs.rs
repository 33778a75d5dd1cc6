//! `krayne logs NAME --ray`: Ray's own log files, from the head's
//! dashboard: listed, read, followed, or fetched into a directory.

use std::path::{Path, PathBuf};

use comfy_table::Cell;
use futures::StreamExt as _;
use krayne_client::{
    Client,
    json::to_json,
    proto::{RayLogRequest, RayLogsRequest},
};

use crate::{
    context::Context,
    failure::Failure,
    output::{note, out},
};

/// The most lines a download asks for of each file.
const DOWNLOAD_LINES: u32 = 100_000;

/// Lists, reads, follows or downloads a node's Ray log files.
#[expect(clippy::too_many_arguments, reason = "the command's options, passed on as they are")]
pub(crate) async fn run(
    ctx: &Context,
    client: &Client,
    namespace: &str,
    name: &str,
    node: Option<String>,
    file: Option<String>,
    download: Option<PathBuf>,
    tail: Option<u32>,
    follow: bool,
) -> Result<(), Failure> {
    let node = node.unwrap_or_default();
    if let Some(file) = file {
        let request = RayLogRequest {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            node,
            file,
            lines: tail,
        };
        if !follow {
            return out(&client.ray_log(request).await?);
        }
        let mut text = std::pin::pin!(client.tail_ray_log(request).await?);
        loop {
            tokio::select! {
                chunk = text.next() => match chunk {
                    Some(chunk) => out(&chunk?)?,
                    None => return Ok(()),
                },
                _ = tokio::signal::ctrl_c() => return Err(Failure::Interrupted("stopped following".into())),
            }
        }
    }
    let listed = client
        .list_ray_logs(RayLogsRequest {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            node: node.clone(),
        })
        .await?;
    if let Some(dir) = download {
        let node_dir = dir.join(if listed.node_ip.is_empty() {
            &listed.node_id
        } else {
            &listed.node_ip
        });
        let files: Vec<&String> = listed
            .groups
            .iter()
            .flat_map(|g| &g.files)
            .filter(|f| !f.ends_with('/') && stays_inside(f))
            .collect();
        let mut bytes = 0;
        for file in &files {
            let text = client
                .ray_log(RayLogRequest {
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                    node: listed.node_id.clone(),
                    file: (*file).clone(),
                    lines: Some(DOWNLOAD_LINES),
                })
                .await?;
            bytes += text.len();
            write(&node_dir, file, &text)?;
        }
        note(&format!(
            "wrote {} files ({}) of node {} to {}",
            files.len(),
            indicatif::HumanBytes(bytes as u64),
            listed.node_ip,
            node_dir.display()
        ));
        return Ok(());
    }
    if ctx.printer.structured() {
        return ctx.printer.data(&to_json(&listed)?);
    }
    note(&format!(
        "node {} ({}{})",
        listed.node_ip,
        listed.node_id,
        if listed.is_head_node { ", the head" } else { "" }
    ));
    let rows = listed
        .groups
        .iter()
        .flat_map(|g| g.files.iter().map(|f| vec![Cell::new(&g.component), Cell::new(f)]))
        .collect();
    ctx.printer.table(&["COMPONENT", "FILE"], rows)
}

/// Whether `file` is a relative path with nothing that leaves the
/// directory it is written under (a head's listing is not trusted).
fn stays_inside(file: &str) -> bool {
    Path::new(file)
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_)))
}

/// Writes `text` to `dir/file`, making the directories `file` names.
fn write(dir: &Path, file: &str, text: &str) -> Result<(), Failure> {
    let path = dir.join(file);
    let fail = |e: std::io::Error| Failure::Other(format!("cannot write {}: {e}", path.display()));
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(fail)?;
    }
    std::fs::write(&path, text).map_err(fail)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_listing_cannot_write_outside_the_directory() {
        assert!(super::stays_inside("events/event_GCS.log"));
        for bad in ["../x", "/etc/passwd", "a/../../b"] {
            assert!(!super::stays_inside(bad), "{bad}");
        }
    }
}
