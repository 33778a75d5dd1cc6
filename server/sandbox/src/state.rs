//! The simulated API server's shared state: what its handlers (the
//! REST API, port-forwards, logs, tokens) read and the tests inspect.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use super::store::Store;

/// One request the sandbox answered, for tests that check what krayne sent.
#[derive(Debug, Clone)]
pub struct RequestRecord {
    /// HTTP method.
    pub method: String,
    /// Path and query.
    pub uri: String,
    /// `x-request-id` header, when sent.
    pub request_id: Option<String>,
    /// A server-side apply of an object not there yet: the API server then
    /// also authorizes `create`.
    pub creates: bool,
}

/// Shared state of the API handlers.
pub(super) struct ApiState {
    /// The objects.
    pub store: Arc<Store>,
    /// Every request answered.
    pub requests: Mutex<Vec<RequestRecord>>,
    /// Bytes of response bodies sent, counted as they flow.
    pub bytes_served: Arc<std::sync::atomic::AtomicU64>,
    /// How often watches with `allowWatchBookmarks` get a bookmark.
    pub bookmark_interval: Duration,
    /// Whether watches may stream the initial list (`sendInitialEvents`,
    /// the WatchList feature of Kubernetes 1.27+).
    pub watch_list: bool,
    /// `host:port` clients reach the API at.
    pub address: String,
    /// Bumped to end every open watch (a dropped connection, as clients
    /// see when an API server restarts).
    pub disconnect: tokio::sync::watch::Sender<u64>,
    /// Added before every answer (fault injection).
    pub latency: tokio::sync::watch::Sender<Duration>,
    /// `(verb, resource)` pairs RBAC refuses (fault injection: a missing
    /// rule in the caller's Role).
    pub forbidden: Mutex<Vec<(String, String)>>,
    /// What RBAC grants, when the sandbox was told.
    pub grants: Option<crate::Grants>,
    /// Head pods' stand-ins, which port-forwards reach.
    pub standins: Arc<super::standins::Standins>,
    /// Containers' output (`pods/log`).
    pub pod_logs: Arc<super::pod_logs::PodLogs>,
    /// The service-account issuer's key.
    pub signer: super::service_account_tokens::TokenSigner,
}

/// The identity the sandbox's RBAC names in a refusal: the ServiceAccount
/// krayne's chart creates.
pub const SERVICE_ACCOUNT_USER: &str = "system:serviceaccount:krayne:krayne";

pub(super) type Shared = Arc<ApiState>;
