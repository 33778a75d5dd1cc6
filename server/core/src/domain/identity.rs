//! What a caller may use, as `whoami` and `namespaces` report it.

use super::{Grant, Role};

/// A namespace and the caller's effective role on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceAccess {
    /// Namespace.
    pub namespace: String,
    /// Highest role any grant gives.
    pub role: Role,
    /// Teams whose grants match it.
    pub via_teams: Vec<String>,
}

/// The caller as the server sees them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Subject.
    pub subject: String,
    /// E-mail.
    pub email: Option<String>,
    /// Groups from the token.
    pub groups: Vec<String>,
    /// Teams from the mapping.
    pub teams: Vec<String>,
    /// Whether a global admin.
    pub global_admin: bool,
    /// Effective role per existing namespace.
    pub namespaces: Vec<NamespaceAccess>,
    /// Every grant that applies, as written.
    pub grants: Vec<Grant>,
}
