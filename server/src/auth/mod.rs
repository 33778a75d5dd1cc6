//! Authentication (JWTs) and the team mapping that turns a token into a
//! [`Principal`]. Transport-neutral: the REST extractor and the gRPC layer
//! both call [`Authenticator::authenticate`].

mod teams;
mod tokens;

use std::sync::{Arc, RwLock};

pub use teams::{Members, Membership, Team, TeamMapping};
pub use tokens::{
    MAX_TOKEN_BYTES, MintRequest, TokenError, TokenIdentity, TokenRules, Verifier, VerifyingKey,
    mint,
};

use crate::domain::{Error, Principal};

/// Verifies tokens and resolves callers through the current team mapping.
#[derive(Clone)]
pub struct Authenticator {
    verifier: Verifier,
    mapping: Arc<RwLock<TeamMapping>>,
}

impl Authenticator {
    /// An authenticator with `verifier` and the team `mapping`.
    pub fn new(verifier: Verifier, mapping: TeamMapping) -> Self {
        Self {
            verifier,
            mapping: Arc::new(RwLock::new(mapping)),
        }
    }

    /// Replaces the team mapping (a reload).
    pub fn set_mapping(&self, mapping: TeamMapping) {
        *self.mapping.write().unwrap_or_else(|p| p.into_inner()) = mapping;
    }

    /// The caller of a request with this `Authorization` header. Errors
    /// are generic for the client; the detail goes to the log.
    pub fn authenticate(&self, authorization: Option<&str>) -> Result<Principal, Error> {
        let id = self.verifier.verify_header(authorization).map_err(|e| {
            tracing::info!(reason = %e, "authentication failed");
            Error::Unauthenticated(e.public().to_owned())
        })?;
        let m = self
            .mapping
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .membership(&id.subject, id.email.as_deref(), &id.groups);
        Ok(Principal {
            subject: id.subject,
            email: id.email,
            groups: id.groups,
            teams: m.teams,
            global_admin: m.global_admin,
            grants: m.grants,
        })
    }
}
