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

/// Lists, reads, follows or downloads a node's Ray log files. What the
/// server sends is escaped for the terminal where it is printed (`note`,
/// tables, errors).
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
        let node_dir = dir.join(node_folder(&listed.node_ip, &listed.node_id).ok_or_else(|| {
            Failure::Other(format!(
                "the server named the node {} at {}: neither an IP address nor a node id, so nothing was downloaded",
                &listed.node_id, &listed.node_ip
            ))
        })?);
        std::fs::create_dir_all(&dir).map_err(|e| Failure::Other(format!("cannot make {}: {e}", dir.display())))?;
        std::fs::create_dir(&node_dir).map_err(|e| {
            Failure::Other(format!(
                "cannot make {} ({e}); a download goes into a folder of its own: remove it or choose another --download",
                node_dir.display()
            ))
        })?;
        let (files, skipped): (Vec<&String>, Vec<&String>) = listed
            .groups
            .iter()
            .flat_map(|g| &g.files)
            .filter(|f| !f.ends_with('/'))
            .partition(|f| stays_inside(f));
        for file in skipped {
            note(&format!("skipped {}: not a file name under the log directory", file));
        }
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
            &listed.node_ip,
            node_dir.display()
        ));
        return Ok(());
    }
    if ctx.printer.structured() {
        return ctx.printer.data(&to_json(&listed)?);
    }
    note(&format!(
        "node {} ({}{})",
        &listed.node_ip,
        &listed.node_id,
        if listed.is_head_node { ", the head" } else { "" }
    ));
    let rows = listed
        .groups
        .iter()
        .flat_map(|g| g.files.iter().map(|f| vec![Cell::new(&g.component), Cell::new(f)]))
        .collect();
    ctx.printer.table(&["COMPONENT", "FILE"], rows)
}

/// The folder a node's files go into, made here from what the server
/// says only once it is checked: `node-<IP>` for an IP address (`:` as
/// `-`), else `node-<id>` for a hex node id; `None` for anything else. A
/// head names its node; its text is never a path.
fn node_folder(ip: &str, id: &str) -> Option<String> {
    if let Ok(ip) = ip.parse::<std::net::IpAddr>() {
        return Some(format!("node-{}", ip.to_string().replace(':', "-")));
    }
    let hex = (1..=128).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_hexdigit());
    hex.then(|| format!("node-{}", id.to_ascii_lowercase()))
}

/// Whether `file` is a Ray log file's name as the server's file route
/// takes it: relative, of `/`-separated parts of letters, digits and
/// `._-:@+`, none empty, `.` or `..` (a head's listing is not trusted,
/// nor is the server's).
fn stays_inside(file: &str) -> bool {
    !file.is_empty()
        && file.len() <= 255
        && file
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
        && file.chars().all(|c| c.is_ascii_alphanumeric() || "._-/:@+".contains(c))
}

/// Writes `text` to the new file `dir/file`, making the folders `file`
/// names (each a real folder, never a link); a file there already is an
/// error, never overwritten or followed.
fn write(dir: &Path, file: &str, text: &str) -> Result<(), Failure> {
    use std::io::Write as _;
    let path = dir.join(file);
    let fail = |e: std::io::Error| Failure::Other(format!("cannot write {}: {e}", path.display()));
    let mut folder = dir.to_path_buf();
    let parts: Vec<&str> = file.split('/').collect();
    for part in &parts[..parts.len() - 1] {
        folder.push(part);
        match std::fs::symlink_metadata(&folder) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(fail(std::io::Error::other(format!(
                    "{} is not a folder",
                    folder.display()
                ))));
            }
            Err(_) => std::fs::create_dir(&folder).map_err(fail)?,
        }
    }
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(fail)?;
    out.write_all(text.as_bytes()).map_err(fail)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_listing_cannot_write_outside_the_directory() {
        assert!(super::stays_inside("events/event_GCS.log"));
        for bad in [
            "../x",
            "/etc/passwd",
            "a/../../b",
            "a//b",
            "./x",
            "x\u{1b}[2J",
            "",
            "a\\..\\b",
        ] {
            assert!(!super::stays_inside(bad), "{bad}");
        }
    }

    #[test]
    fn a_nodes_folder_is_made_here_never_from_its_text() {
        use super::node_folder;
        assert_eq!(node_folder("10.0.0.7", "ab").as_deref(), Some("node-10.0.0.7"));
        assert_eq!(node_folder("fd00::1", "ab").as_deref(), Some("node-fd00--1"));
        assert_eq!(node_folder("", "AB12").as_deref(), Some("node-ab12"));
        for (ip, id) in [("/home/victim/.ssh", "ab"), ("../../x", "ab"), ("", "../x"), ("", "")] {
            let folder = node_folder(ip, id);
            assert!(
                folder.is_none() || folder.as_deref() == Some("node-ab"),
                "{ip} {id}: {folder:?}"
            );
        }
        assert_eq!(node_folder("/home/victim/.ssh", "../x"), None);
    }

    #[test]
    fn a_download_never_overwrites_nor_follows_a_link() {
        let dir = tempfile::tempdir().unwrap();
        super::write(dir.path(), "events/a.log", "one").unwrap();
        assert!(super::write(dir.path(), "events/a.log", "two").is_err());
        std::os::unix::fs::symlink("/etc", dir.path().join("etc")).unwrap();
        assert!(super::write(dir.path(), "etc/x.log", "three").is_err());
        std::os::unix::fs::symlink(dir.path().join("nowhere"), dir.path().join("b.log")).unwrap();
        assert!(super::write(dir.path(), "b.log", "four").is_err());
        assert!(!dir.path().join("nowhere").exists());
    }
}
