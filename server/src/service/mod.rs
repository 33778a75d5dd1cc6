//! The use cases, written once for both transports: authorize → validate →
//! audit → act → audit. Sees Kubernetes and the audit log only through the
//! domain's ports.

mod audit_log;
mod audit_trail;
mod clusters;
mod identity;
mod wait;

use std::{sync::Arc, time::Duration};

pub use clusters::{CreateInput, Created, ScaleInput};

use crate::{
    domain::{Action, AuditSink, ClusterStore, Error, Principal, audit::RequestMeta},
    manifest::ManifestSettings,
};

/// One request's caller and circumstances.
#[derive(Debug, Clone)]
pub struct Context {
    /// The authenticated caller.
    pub principal: Principal,
    /// Request id, transport, client.
    pub meta: RequestMeta,
}

/// Limits the use cases enforce.
#[derive(Debug, Clone)]
pub struct ServiceSettings {
    /// Manifest defaults (the Ray image).
    pub manifest: ManifestSettings,
    /// Wait timeout when none is given.
    pub default_wait: Duration,
    /// Longest wait allowed.
    pub max_wait: Duration,
    /// Attempts at a write that meets a conflict.
    pub conflict_retries: usize,
    /// Whether reads (get, list, describe, wait) are audited too.
    pub audit_reads: bool,
}

impl Default for ServiceSettings {
    fn default() -> Self {
        Self {
            manifest: ManifestSettings::default(),
            default_wait: Duration::from_secs(300),
            max_wait: Duration::from_secs(3600),
            conflict_retries: 5,
            audit_reads: false,
        }
    }
}

/// Cluster lifecycle and identity, over the ports.
#[derive(Clone)]
pub struct ClusterService {
    store: Arc<dyn ClusterStore>,
    audit: Arc<dyn AuditSink>,
    settings: Arc<ServiceSettings>,
}

impl ClusterService {
    /// A service over `store`, auditing to `audit`.
    pub fn new(store: Arc<dyn ClusterStore>, audit: Arc<dyn AuditSink>, settings: ServiceSettings) -> Self {
        Self {
            store,
            audit,
            settings: Arc::new(settings),
        }
    }

    /// Whether Kubernetes and the audit log both answer.
    pub async fn ready(&self) -> Result<(), Error> {
        self.store.ping().await?;
        self.audit.ping().await
    }

    /// Refuses (and audits) `action` on `namespace` unless the caller may.
    async fn authorize(
        &self,
        cx: &Context,
        action: Action,
        audit_action: &str,
        namespace: &str,
        cluster: Option<&str>,
    ) -> Result<(), Error> {
        if cx.principal.may(action, namespace) {
            return Ok(());
        }
        let error = Error::PermissionDenied(format!(
            "{} needs the {} role on namespace {namespace:?}",
            cx.principal.subject,
            action.needs()
        ));
        self.record_refusal(cx, audit_action, Some(namespace), cluster, &error)
            .await;
        Err(error)
    }
}
