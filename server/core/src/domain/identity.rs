//! What a caller may use, as `whoami` and `namespaces` report it.

use super::{Grant, Role};

/// A namespace and the caller's role on it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct NamespaceAccess {
    /// Namespace.
    pub namespace: String,
    /// `viewer`, `editor` or `admin`.
    pub role: Role,
    /// Teams whose grants match it.
    pub via_teams: Vec<String>,
    /// Its team quota as it stands (clusters, CPUs, memory, GPUs); empty
    /// when it has none.
    pub quota: Vec<super::quota::QuotaLine>,
}

/// The caller as the server sees them.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema), schema(as = WhoAmI))]
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
    /// Effective role per existing namespace the caller's grants reach
    /// (a global admin's: their teams', not every namespace).
    pub namespaces: Vec<NamespaceAccess>,
    /// How many namespaces the caller may use: those above, or every one
    /// for a global admin (`GET /v1/namespaces` pages through them).
    pub namespace_count: usize,
    /// Every grant that applies, including patterns matching nothing yet.
    pub grants: Vec<Grant>,
    /// The issuer that vouched for the caller (the token's `iss`); none
    /// for a browser session.
    pub issuer: Option<String>,
    /// When the caller's credential expires (RFC 3339).
    pub expires_at: Option<String>,
}

/// The server's version, as `GET /v1/version` and `GetVersion` answer it.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct VersionInfo {
    /// krayne-server's version (semver), e.g. `0.1.0`.
    pub server_version: String,
    /// The commit it was built from, or `unknown`.
    pub commit: String,
    /// The API version both transports speak: `v1`.
    pub api_version: String,
    /// Features switched on, e.g. `watch-cache`, `audit-reads`, `trusted-proxies`.
    pub features: Vec<String>,
}

/// Where people sign in, as `/.well-known/krayne` tells `krayne login`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct LoginSettings {
    /// The OpenID provider's issuer URL (its discovery document is under
    /// `/.well-known/openid-configuration`).
    pub issuer: String,
    /// The public OAuth client `krayne login` signs in as.
    pub client_id: String,
    /// Scopes to ask for.
    pub scopes: Vec<String>,
}

/// What a client needs to know before it signs in (`/.well-known/krayne`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct ClientSettings {
    /// Where people sign in; null when this server names no identity
    /// provider (tokens are then handed out some other way).
    pub login: Option<LoginSettings>,
    /// What clusters get that their config does not say.
    pub clusters: ClusterDefaults,
}

/// The platform's choices for clusters, set on the server.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct ClusterDefaults {
    /// The Ray image of pods whose config names none (`-gpu` appended for
    /// GPU pods); a Krayne YAML that names an image keeps it.
    #[cfg_attr(feature = "schema", schema(example = "rayproject/ray:2.60.0-py312"))]
    pub ray_image: String,
    /// Whether new clusters require Ray's token authentication (Ray ≥ 2.52;
    /// `krayne tunnel` prints the token for Ray's own clients).
    pub ray_token_auth: bool,
}
