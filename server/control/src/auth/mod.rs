//! Authentication (JWTs) and the team mapping that turns a token into a
//! [`Principal`]. Transport-neutral: the REST extractor and the gRPC
//! services both call [`Authenticator::authenticate`].

mod issuer_file;
mod issuers;
mod jwks;
mod reload;
mod review;
mod sessions;
mod teams;
mod tokens;

use std::sync::{Arc, RwLock};

pub use issuer_file::{ClaimNames, IssuerSpec, KeyRefresh, SpecKind, asymmetric_algorithms, parse_issuers};
pub use issuers::{Issuer, IssuerKind};
pub use jwks::{HttpDocuments, JwksOptions, JwksSource};
pub use reload::{load_mapping, watch_mapping};
pub use review::Reviewer;
pub use sessions::{MIN_SECRET_BYTES, SessionKeys, Ticket, TicketError, TicketUse};
pub use teams::{EXAMPLE_MAPPING, Members, Membership, Team, TeamMapping};
pub use tokens::{MAX_TOKEN_BYTES, MintRequest, TokenError, TokenIdentity, TokenRules, Verifier, VerifyingKey, mint};

use crate::domain::{Error, Principal};

/// A refused authentication: what the client may see, and why (for logs
/// and the audit trail; never the token).
#[derive(Debug, Clone)]
pub struct Rejection {
    /// The generic error for the client.
    pub error: Error,
    /// The reason.
    pub detail: String,
}

/// Verifies tokens and resolves callers through the current team mapping.
#[derive(Clone)]
pub struct Authenticator {
    verifier: Verifier,
    mapping: Arc<RwLock<TeamMapping>>,
    /// Counts reloads, so long-lived streams re-check their caller.
    reloads: Arc<tokio::sync::watch::Sender<u64>>,
}

impl Authenticator {
    /// An authenticator with `verifier` and the team `mapping`.
    pub fn new(verifier: Verifier, mapping: TeamMapping) -> Self {
        Self {
            verifier,
            mapping: Arc::new(RwLock::new(mapping)),
            reloads: Arc::new(tokio::sync::watch::Sender::new(0)),
        }
    }

    /// Replaces the team mapping (a reload).
    pub fn set_mapping(&self, mapping: TeamMapping) {
        *self.mapping.write().unwrap_or_else(|p| p.into_inner()) = mapping;
        self.reloads.send_modify(|n| *n += 1);
    }

    /// Changes each time the mapping is replaced.
    pub fn reloads(&self) -> tokio::sync::watch::Receiver<u64> {
        self.reloads.subscribe()
    }

    /// The quota the current team mapping gives `namespace`, if any.
    pub fn quota(&self, namespace: &str) -> Option<crate::domain::quota::Quota> {
        self.mapping
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .quota(namespace)
            .cloned()
    }

    /// The teams with an editor's role in `namespace`, whose its usage is.
    pub fn editors_of(&self, namespace: &str) -> Vec<String> {
        self.mapping
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .editors_of(namespace)
    }

    /// The lifecycle policy the mapping gives `namespace`, if any.
    pub fn lifecycle(&self, namespace: &str) -> Option<crate::domain::lifecycle::LifecyclePolicy> {
        self.mapping
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .lifecycle(namespace)
            .cloned()
    }

    /// The Kueue LocalQueue the mapping gives `namespace`, if any.
    pub fn kueue_queue(&self, namespace: &str) -> Option<String> {
        self.mapping
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .kueue_queue(namespace)
            .map(str::to_owned)
    }

    /// The queueing policy the mapping gives `namespace`.
    pub fn queueing(&self, namespace: &str) -> crate::domain::queue::QueuePolicy {
        self.mapping
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .queueing(namespace)
    }

    /// `principal` as the current team mapping sees it (its token is not
    /// checked again): a long-lived tunnel re-asks this, so a revoked
    /// mapping ends it.
    pub fn refresh(&self, principal: &Principal) -> Principal {
        let m = self.mapping.read().unwrap_or_else(|p| p.into_inner()).membership(
            &principal.subject,
            principal.email.as_deref(),
            &principal.groups,
        );
        Principal {
            teams: m.teams,
            global_admin: m.global_admin,
            grants: m.grants,
            ..principal.clone()
        }
    }

    /// The caller of a request with this `Authorization` header.
    pub async fn authenticate(&self, authorization: Option<&str>) -> Result<Principal, Rejection> {
        let id = self.verifier.verify_header(authorization).await.map_err(|e| {
            // Debug, not info: a token-less flood must not become a log
            // flood (the audit log aggregates refusals per source).
            tracing::debug!(reason = %e, "authentication failed");
            Rejection {
                error: Error::Unauthenticated(e.public()),
                detail: e.to_string(),
            }
        })?;
        let m = self.mapping.read().unwrap_or_else(|p| p.into_inner()).membership(
            &id.subject,
            id.email.as_deref(),
            &id.groups,
        );
        Ok(Principal {
            subject: id.subject,
            email: id.email,
            groups: id.groups,
            teams: m.teams,
            global_admin: m.global_admin,
            grants: m.grants,
            expires_at: id.expires_at,
            issuer: Some(id.issuer),
        })
    }
}
