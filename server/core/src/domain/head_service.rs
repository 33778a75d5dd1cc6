//! A cluster's services (on its head pod), as krayne lets its users reach
//! them, and the port through which krayne reaches them.

use serde::Serialize;

use super::Error;

/// Whether a service can be used now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ServiceState {
    /// The head is not serving yet (pending, starting, crash-looping).
    Pending,
    /// The head serves and the service answered a connection.
    Available,
    /// The head serves but nothing answered on the service's port.
    Unreachable,
}

impl ServiceState {
    /// `pending`, `available` or `unreachable`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Available => "available",
            Self::Unreachable => "unreachable",
        }
    }
}

/// A service a cluster's head declares, and how to use it through krayne.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct HeadService {
    /// `dashboard`, `client`, `notebook`, `code-server` or `ssh`.
    pub name: String,
    /// The port it listens on in the head pod.
    pub port: u16,
    /// `http` (dashboard, notebook, code-server) or `tcp`.
    pub protocol: String,
    /// Whether it can be used now.
    pub state: ServiceState,
    /// Path of the WebSocket that carries a TCP tunnel to it (binary
    /// frames), on this server.
    pub tunnel_path: String,
    /// Its address inside the cluster (the head pod's IP), which only
    /// in-cluster clients can reach; absent until the head has an IP.
    pub in_cluster_url: Option<String>,
    /// Its URL through this server (the HTTP proxy), for an HTTP service:
    /// absolute when the server knows its public URL, else a path on this
    /// server; absent for a TCP service (reach it through `tunnel_path`).
    pub proxy_url: Option<String>,
    /// The path it serves under on its port (`/`, or the notebook's base
    /// URL): a tunnel's local URL ends with it.
    pub base_path: String,
}

/// Where a service is: the serving head pod and the port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceTarget {
    /// The site the head pod is in (docs/sites.md): whose Kubernetes and
    /// network reach it.
    pub site: super::Site,
    /// The head pod's namespace.
    pub namespace: String,
    /// The head pod.
    pub pod: String,
    /// The head pod's IP.
    pub pod_ip: Option<String>,
    /// The port in the pod.
    pub port: u16,
    /// The service listens on the pod's loopback only: only a
    /// `pods/portforward` (which enters the pod's network namespace)
    /// reaches it, never the pod's IP.
    pub on_loopback: bool,
}

/// A byte stream to a service.
pub trait ServiceStream: futures::io::AsyncRead + futures::io::AsyncWrite + Send + Unpin {}

impl<T: futures::io::AsyncRead + futures::io::AsyncWrite + Send + Unpin> ServiceStream for T {}

/// How krayne reaches a head's services: dialling the pod's IP, or
/// through Kubernetes' `pods/portforward`.
#[async_trait::async_trait]
pub trait ServiceUpstream: Send + Sync + 'static {
    /// Connects to `target` (`Unavailable` when nothing answers).
    async fn connect(&self, target: &ServiceTarget) -> Result<Box<dyn ServiceStream>, Error>;

    /// Whether a service answers on `target` (for the services list).
    async fn probe(&self, target: &ServiceTarget) -> bool {
        match self.connect(target).await {
            Ok(mut stream) => {
                let _ = futures::AsyncWriteExt::close(&mut stream).await;
                true
            }
            Err(_) => false,
        }
    }

    /// Whether a connection to `target` can be closed in one direction
    /// only (a client's half-close passed on, the answer still coming
    /// back).
    fn half_close(&self, target: &ServiceTarget) -> bool;

    /// How `target` is reached: `direct` or `port-forward`.
    fn mode(&self, target: &ServiceTarget) -> &'static str;
}
