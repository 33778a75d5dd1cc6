//! Keeping the team mapping current: on changes to its file (watching the
//! directory, as Kubernetes swaps ConfigMap mounts through symlinks) and on
//! SIGHUP. A file that does not parse keeps the last good mapping.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use notify::{RecursiveMode, Watcher as _};
use sha2::{Digest as _, Sha256};
use tokio::sync::mpsc;

use super::{Authenticator, TeamMapping};
use crate::background::MappingReload;

/// Reads and checks a mapping file; returns it with the file's SHA-256.
/// With a sites file, `sites` are its names: a mapping naming another
/// site is refused (a typo would otherwise leave a team no site, or a cap
/// that caps nothing).
pub fn load_mapping(path: &Path, sites: &[String]) -> Result<(TeamMapping, String), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let hash = hex::encode(Sha256::digest(text.as_bytes()));
    let mapping = TeamMapping::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    mapping
        .check_sites(sites)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((mapping, hash))
}

/// Reloads `path` into `auth` whenever it changes (when `watch`) or the
/// process gets SIGHUP, once the background driver runs what this returns
/// (the watch and the signal handler are in place already, so a failure
/// to install them stops the start). `hash` is the SHA-256 of the mapping
/// in use; `sites` the sites file's names, as [`load_mapping`] takes them.
pub fn watch_mapping(
    auth: Authenticator,
    path: PathBuf,
    hash: String,
    watch: bool,
    sites: Vec<String>,
) -> Result<MappingReload, String> {
    // The caller loaded the file: it is good now.
    metrics::gauge!("krayne_team_mapping_file_ok").set(1.0);
    let (tx, mut rx) = mpsc::unbounded_channel::<()>();
    let watcher = if watch {
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_owned();
        let events = tx.clone();
        let mut w = notify::recommended_watcher(move |_: notify::Result<notify::Event>| {
            let _ = events.send(());
        })
        .map_err(|e| format!("cannot watch {}: {e}", dir.display()))?;
        w.watch(&dir, RecursiveMode::NonRecursive)
            .map_err(|e| format!("cannot watch {}: {e}", dir.display()))?;
        Some(w)
    } else {
        None
    };
    #[cfg(unix)]
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .map_err(|e| format!("cannot handle SIGHUP: {e}"))?;
    Ok(MappingReload(Box::pin(async move {
        // Both live as long as the task: the watcher feeds `tx`, and `tx`
        // keeps the channel open when there is no watcher (SIGHUP only).
        let _keep_watching = watcher;
        let _keep_open = tx;
        let mut current = hash;
        loop {
            #[cfg(unix)]
            let why = tokio::select! {
                event = rx.recv() => if event.is_some() { "file change" } else { return },
                _ = hangup.recv() => "SIGHUP",
            };
            #[cfg(not(unix))]
            let why = if rx.recv().await.is_some() {
                "file change"
            } else {
                return;
            };
            // Editors and ConfigMap updates write in several steps.
            tokio::time::sleep(Duration::from_millis(100)).await;
            while rx.try_recv().is_ok() {}
            match load_mapping(&path, &sites) {
                Ok((_, hash)) if hash == current && why != "SIGHUP" => {
                    metrics::gauge!("krayne_team_mapping_file_ok").set(1.0);
                }
                Ok((mapping, hash)) => {
                    auth.set_mapping(mapping);
                    tracing::info!(file = %path.display(), sha256 = %hash, trigger = why, "team mapping reloaded");
                    metrics::counter!("krayne_team_mapping_reloads_total", "outcome" => "ok").increment(1);
                    metrics::gauge!("krayne_team_mapping_file_ok").set(1.0);
                    current = hash;
                }
                Err(e) => {
                    tracing::error!(error = %e, trigger = why, "team mapping not reloaded; keeping the last good one");
                    metrics::counter!("krayne_team_mapping_reloads_total", "outcome" => "error").increment(1);
                    // Stays 0 until the file is fixed: a replica that
                    // restarts meanwhile refuses to start.
                    metrics::gauge!("krayne_team_mapping_file_ok").set(0.0);
                }
            }
        }
    })))
}
