//! `--sites-file`: the Kubernetes clusters krayne fronts, each with its
//! own connection, watch cache, RayJobs and service upstream, as one
//! fleet (docs/sites.md).

use std::{path::Path, sync::Arc, time::Duration};

use crate::{
    control::fleet::{Fleet, FleetMember},
    domain::{ServiceUpstream, Site, sites::SiteEntry},
    k8s::{self, CacheOptions},
};

/// How often each site's API server is asked whether it answers.
pub(crate) const SITE_HEALTH_EVERY: Duration = Duration::from_secs(5);

/// The sites `file` names.
pub(crate) fn read_sites(file: &Path) -> Result<Vec<SiteEntry>, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("--sites-file {}: {e}", file.display()))?;
    crate::domain::sites::parse_sites(&text).map_err(|e| format!("--sites-file {}: {e}", file.display()))
}

/// One site's Kubernetes: its own kubeconfig, else `home` (krayne's own).
pub(crate) async fn site_client(entry: &SiteEntry, home: &k8s::Client) -> Result<k8s::Client, String> {
    match &entry.kubeconfig {
        Some(file) => k8s::connect(Some(file), entry.context.as_deref())
            .await
            .map_err(|e| format!("site {}: {e}", entry.spec.name)),
        None => Ok(home.clone()),
    }
}

/// The fleet of `entries`: the site without a kubeconfig uses `home` and
/// `home_upstream` (krayne's own connection and upstream mode); the others
/// their kubeconfigs, their services reached through their API servers'
/// port-forward (their pods' network is not krayne's).
pub(crate) async fn fleet(
    entries: &[SiteEntry],
    home: &k8s::Client,
    home_upstream: &Arc<dyn ServiceUpstream>,
    timeout: Duration,
    cache: Option<&CacheOptions>,
) -> Result<Arc<Fleet>, String> {
    let mut members = Vec::with_capacity(entries.len());
    for entry in entries {
        let client = site_client(entry, home).await?;
        let name = Site::new(entry.spec.name.name());
        let api = k8s::KubeClusterStore::new(client.clone())
            .with_timeout(timeout)
            .with_site(name.clone());
        let upstream: Arc<dyn ServiceUpstream> = match entry.kubeconfig {
            None => home_upstream.clone(),
            Some(_) => Arc::new(k8s::PortForwardUpstream::new(client, super::UPSTREAM_CONNECT_TIMEOUT)),
        };
        tracing::info!(site = %name, weight = entry.spec.weight, gpu_types = ?entry.spec.gpu_types, "site");
        members.push(FleetMember {
            spec: entry.spec.clone(),
            store: k8s::cluster_store(api.clone(), cache).map_err(|e| format!("site {name}: {e}"))?,
            rayjobs: Arc::new(api.clone()),
            kueue: Arc::new(api.clone()),
            api: Arc::new(api),
            upstream,
        });
    }
    let fleet = Fleet::new(members)?;
    tokio::spawn(fleet.clone().watch_health(SITE_HEALTH_EVERY));
    Ok(fleet)
}
