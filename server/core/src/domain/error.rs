//! The one closed error enum every layer speaks, and field violations.

use std::{fmt, time::Duration};

/// One problem with one field of a request; in a create's `warnings`,
/// what was ignored or converted there.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema), schema(as = Violation))]
pub struct FieldViolation {
    /// Path of the field, e.g. `worker_groups[1].min_replicas`.
    pub field: String,
    /// What is wrong with it, e.g. `must be <= replicas (2)`.
    pub description: String,
}

impl fmt::Display for FieldViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.description)
        } else {
            write!(f, "{}: {}", self.field, self.description)
        }
    }
}

/// Every problem found in a request, in the order they were found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Violations(Vec<FieldViolation>);

impl Violations {
    /// No violations yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A single violation.
    pub fn one(field: impl Into<String>, description: impl Into<String>) -> Self {
        let mut v = Self::new();
        v.push(field, description);
        v
    }

    /// Records a violation.
    pub fn push(&mut self, field: impl Into<String>, description: impl Into<String>) {
        self.0.push(FieldViolation {
            field: field.into(),
            description: description.into(),
        });
    }

    /// Whether nothing was found.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The violations found.
    pub fn as_slice(&self) -> &[FieldViolation] {
        &self.0
    }

    /// `Ok(value)` when nothing was found, else `InvalidArgument`.
    pub fn into_result<T>(self, value: T) -> Result<T, Error> {
        if self.is_empty() {
            Ok(value)
        } else {
            Err(Error::InvalidArgument(self))
        }
    }
}

impl fmt::Display for Violations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, v) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{v}")?;
        }
        Ok(())
    }
}

/// The kinds of thing a request can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceKind {
    /// A Ray cluster.
    Cluster,
    /// A Kubernetes namespace.
    Namespace,
    /// A service a cluster's head declares.
    Service,
    /// A Ray job on a cluster.
    Job,
    /// A job with a cluster of its own (a KubeRay RayJob).
    RayJob,
    /// A working-dir package on a cluster's head.
    Package,
    /// A Ray node of a cluster.
    RayNode,
    /// A Ray log file on a node.
    LogFile,
}

impl fmt::Display for ResourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Cluster => "cluster",
            Self::Namespace => "namespace",
            Self::Service => "service",
            Self::Job => "job",
            Self::RayJob => "rayjob",
            Self::Package => "package",
            Self::RayNode => "Ray node",
            Self::LogFile => "log file",
        })
    }
}

/// Why a caller is not authenticated, in the words it may be told (never
/// the reason in detail: that goes to logs and the audit trail).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthFailure {
    /// No credentials at all.
    MissingToken,
    /// A token past its `exp`.
    ExpiredToken,
    /// Any other token that does not verify.
    InvalidToken,
    /// More than one `Authorization`: which is the caller's is unknown.
    SeveralCredentials,
    /// A browser session's sign-in link that is past its minute, already
    /// used, or not one this server signed.
    SignInLink,
    /// A browser session cookie that expired, or is not for this service.
    BrowserSession,
    /// A token in the URL (`access_token`) where only a header is taken:
    /// URLs leak through history, proxies' logs and referrers.
    TokenInQuery,
}

impl AuthFailure {
    /// The text the caller sees.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MissingToken => "missing bearer token",
            Self::ExpiredToken => "token expired",
            Self::InvalidToken => "invalid token",
            Self::SeveralCredentials => "send one authorization header, not several",
            Self::SignInLink => {
                "this sign-in link has expired, was already used or is not valid: ask for a new one (krayne open)"
            }
            Self::BrowserSession => {
                "no valid browser session for this service: open it again (krayne open), or send a bearer token"
            }
            Self::TokenInQuery => {
                "a token in the URL (access_token) is taken only by a GET watch asking for text/event-stream \
                 (a browser's EventSource); send it as Authorization: Bearer <token>"
            }
        }
    }
}

impl fmt::Display for AuthFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything that can go wrong, closed so that each transport maps every
/// case exhaustively. `Display` is the message a caller may see: it never
/// carries tokens, SQL or internal detail.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The request is malformed; every problem is listed with its field.
    #[error("invalid request: {0}")]
    InvalidArgument(Violations),
    /// No valid credentials, and in general terms why.
    #[error("{0}")]
    Unauthenticated(AuthFailure),
    /// Authenticated but not allowed.
    #[error("{0}")]
    PermissionDenied(String),
    /// The named thing does not exist.
    #[error("{kind} {name:?} not found{}", in_namespace(namespace.as_deref()))]
    NotFound {
        /// What was looked for.
        kind: ResourceKind,
        /// Its name.
        name: String,
        /// Where it was looked for, when that is worth saying (a cluster's
        /// namespace: the usual mistake).
        namespace: Option<String>,
    },
    /// The named thing exists already.
    #[error("{kind} {name:?} already exists")]
    AlreadyExists {
        /// What was to be created.
        kind: ResourceKind,
        /// Its name.
        name: String,
    },
    /// A concurrent write won; read again and retry.
    #[error("{0}")]
    Conflict(String),
    /// The request is valid but the current state does not allow it.
    #[error("{0}")]
    FailedPrecondition(String),
    /// The request would take a namespace past its team quota.
    #[error("{}", quota_message(namespace, violations))]
    QuotaExceeded {
        /// The namespace.
        namespace: String,
        /// One per limit the request would pass.
        violations: Vec<super::quota::QuotaViolation>,
    },
    /// An upload is larger than this server accepts; nothing of it was
    /// kept.
    #[error(
        "the {what} is larger than this server's limit of {} MiB; nothing was uploaded",
        limit_bytes / (1024 * 1024)
    )]
    PayloadTooLarge {
        /// What was uploaded (`package`).
        what: &'static str,
        /// The limit, in bytes.
        limit_bytes: u64,
    },
    /// Too many requests from this caller.
    #[error("rate limit exceeded; retry in {}s", retry_after.as_secs().max(1))]
    RateLimited {
        /// When to try again.
        retry_after: Duration,
    },
    /// A dependency (Kubernetes, the audit store) cannot be reached.
    #[error("{0}")]
    Unavailable(String),
    /// What krayne reached on the caller's behalf — a cluster's Ray head —
    /// answered something krayne does not accept: larger than what it
    /// reads of that answer, or not the shape Ray's API has. The head is
    /// the tenant's, so its answer is never trusted.
    #[error("{0}")]
    BadGateway(String),
    /// What the request resumes from is no longer held (a watch version
    /// too old, or from another server): list again, then watch from
    /// the list's version, as Kubernetes' `410 Gone` asks.
    #[error("{0}")]
    Gone(String),
    /// The operation did not finish in time (e.g. waiting for readiness).
    #[error("{0}")]
    DeadlineExceeded(String),
    /// A bug or an unexpected answer; the detail is for logs only.
    #[error("internal error")]
    Internal(String),
}

fn quota_message(namespace: &str, violations: &[super::quota::QuotaViolation]) -> String {
    let each: Vec<String> = violations
        .iter()
        .map(|v| {
            let (site, there, limit) = match &v.site {
                Some(site) => (format!(" in site {site}"), " there", "cap"),
                None => (String::new(), "", "limit"),
            };
            format!(
                "{}{site}: the cluster would hold {} ({} more), the namespace{there} {} of its {limit} {} ({} in use)",
                v.resource.as_str(),
                v.cluster_would_hold,
                v.requested,
                v.namespace_would_hold,
                v.limit,
                v.in_use,
            )
        })
        .collect();
    format!("quota exceeded in namespace {namespace}: {}", each.join("; "))
}

/// ` in namespace "ml-team"`, or nothing.
fn in_namespace(namespace: Option<&str>) -> String {
    namespace.map(|n| format!(" in namespace {n:?}")).unwrap_or_default()
}

impl Error {
    /// This error, naming `namespace` when it is a cluster that was not
    /// found there (the store does not know where it looked).
    #[must_use]
    pub fn in_namespace(self, namespace: &str) -> Self {
        match self {
            Self::NotFound {
                kind: ResourceKind::Cluster,
                name,
                namespace: None,
            } => Self::NotFound {
                kind: ResourceKind::Cluster,
                name,
                namespace: Some(namespace.to_owned()),
            },
            other => other,
        }
    }

    /// Stable snake_case code for clients to branch on.
    #[deny(clippy::wildcard_enum_match_arm)]
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidArgument(_) => "invalid_argument",
            Self::Unauthenticated(_) => "unauthenticated",
            Self::PermissionDenied(_) => "permission_denied",
            Self::NotFound { .. } => "not_found",
            Self::AlreadyExists { .. } => "already_exists",
            Self::Conflict(_) => "conflict",
            Self::FailedPrecondition(_) => "failed_precondition",
            Self::RateLimited { .. } => "rate_limited",
            Self::QuotaExceeded { .. } => "quota_exceeded",
            Self::PayloadTooLarge { .. } => "payload_too_large",
            Self::Unavailable(_) => "unavailable",
            Self::BadGateway(_) => "bad_gateway",
            Self::Gone(_) => "gone",
            Self::DeadlineExceeded(_) => "deadline_exceeded",
            Self::Internal(_) => "internal",
        }
    }

    /// The HTTP status this error answers with (the one table both the REST
    /// edge and the audit log use).
    #[deny(clippy::wildcard_enum_match_arm)]
    pub fn http_status(&self) -> u16 {
        match self {
            Self::InvalidArgument(_) => 400,
            Self::Unauthenticated(_) => 401,
            Self::PermissionDenied(_) => 403,
            Self::NotFound { .. } => 404,
            Self::Gone(_) => 410,
            Self::AlreadyExists { .. } | Self::Conflict(_) | Self::FailedPrecondition(_) => 409,
            Self::PayloadTooLarge { .. } => 413,
            Self::RateLimited { .. } | Self::QuotaExceeded { .. } => 429,
            Self::Internal(_) => 500,
            Self::BadGateway(_) => 502,
            Self::Unavailable(_) => 503,
            Self::DeadlineExceeded(_) => 504,
        }
    }

    /// The gRPC status code (number, name) this error answers with.
    #[deny(clippy::wildcard_enum_match_arm)]
    pub fn grpc_code(&self) -> (i32, &'static str) {
        match self {
            Self::InvalidArgument(_) => (3, "INVALID_ARGUMENT"),
            Self::Unauthenticated(_) => (16, "UNAUTHENTICATED"),
            Self::PermissionDenied(_) => (7, "PERMISSION_DENIED"),
            Self::NotFound { .. } => (5, "NOT_FOUND"),
            Self::AlreadyExists { .. } => (6, "ALREADY_EXISTS"),
            Self::Conflict(_) => (10, "ABORTED"),
            Self::FailedPrecondition(_) => (9, "FAILED_PRECONDITION"),
            Self::RateLimited { .. } | Self::QuotaExceeded { .. } | Self::PayloadTooLarge { .. } => {
                (8, "RESOURCE_EXHAUSTED")
            }
            // HTTP's 502 is gRPC's UNAVAILABLE (gRPC's own status mapping).
            Self::Unavailable(_) | Self::BadGateway(_) => (14, "UNAVAILABLE"),
            // Out of the range of versions this server holds.
            Self::Gone(_) => (11, "OUT_OF_RANGE"),
            Self::DeadlineExceeded(_) => (4, "DEADLINE_EXCEEDED"),
            Self::Internal(_) => (13, "INTERNAL"),
        }
    }

    /// Shorthand for a one-field `InvalidArgument`.
    pub fn invalid(field: impl Into<String>, description: impl Into<String>) -> Self {
        Self::InvalidArgument(Violations::one(field, description))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_detail_never_reaches_the_message() {
        let e = Error::Internal("pool timed out: postgres://u:secret@db".into());
        assert_eq!(e.to_string(), "internal error");
        assert_eq!(e.code(), "internal");
    }

    #[test]
    fn violations_render_with_their_paths() {
        let mut v = Violations::new();
        v.push("worker_groups[1].min_replicas", "must be <= replicas (2)");
        v.push("name", "must not be empty");
        let e = Error::InvalidArgument(v);
        assert_eq!(
            e.to_string(),
            "invalid request: worker_groups[1].min_replicas: must be <= replicas (2); name: must not be empty"
        );
    }

    #[test]
    fn not_found_names_the_kind() {
        let e = Error::NotFound {
            kind: ResourceKind::Namespace,
            name: "ml-team".into(),
            namespace: None,
        };
        assert_eq!(e.to_string(), "namespace \"ml-team\" not found");
        assert_eq!(
            e.in_namespace("elsewhere").to_string(),
            "namespace \"ml-team\" not found",
            "only a cluster is said to be in a namespace"
        );
        let cluster = Error::NotFound {
            kind: ResourceKind::Cluster,
            name: "x".into(),
            namespace: None,
        };
        assert_eq!(
            cluster.in_namespace("ml-team").to_string(),
            "cluster \"x\" not found in namespace \"ml-team\""
        );
        let e = Error::RateLimited {
            retry_after: Duration::from_millis(10),
        };
        assert_eq!(e.to_string(), "rate limit exceeded; retry in 1s");
    }
}
