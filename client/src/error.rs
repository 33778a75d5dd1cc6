//! [`ClientError`]: every failure of an SDK call, with its gRPC code.

use std::fmt;

use tonic::Code;
use tonic_types::StatusExt as _;

/// One invalid field, as the server reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldViolation {
    /// Path of the field, e.g. `worker_groups[0].min_replicas`.
    pub field: String,
    /// What is wrong with it.
    pub description: String,
}

/// A failed call: the gRPC code, the server's message and, for invalid
/// input, each field that is wrong. Errors found before anything is sent
/// (a bad URL, an unreadable config file) use the same type and codes, so
/// callers handle one error everywhere.
#[derive(Debug, Clone)]
pub struct ClientError {
    code: Code,
    message: String,
    violations: Vec<FieldViolation>,
    request_id: Option<String>,
}

impl ClientError {
    /// An error found on the client side.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            violations: Vec::new(),
            request_id: None,
        }
    }

    /// Invalid input found on the client side, at `field`.
    pub fn invalid_field(field: impl Into<String>, description: impl Into<String>) -> Self {
        let (field, description) = (field.into(), description.into());
        Self {
            code: Code::InvalidArgument,
            message: format!("{field}: {description}"),
            violations: vec![FieldViolation { field, description }],
            request_id: None,
        }
    }

    /// The gRPC status code.
    pub fn code(&self) -> Code {
        self.code
    }

    /// The message, as the server wrote it.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Each invalid field, for `InvalidArgument`; empty otherwise.
    pub fn violations(&self) -> &[FieldViolation] {
        &self.violations
    }

    /// The server's `x-request-id` for this call, when it sent one; quote it
    /// when asking an operator to look at the audit log.
    pub fn request_id(&self) -> Option<&str> {
        self.request_id.as_deref()
    }

    /// Whether retrying the same call may succeed (the server was
    /// unreachable or restarting).
    pub fn is_unavailable(&self) -> bool {
        self.code == Code::Unavailable
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for ClientError {}

impl From<tonic::Status> for ClientError {
    fn from(status: tonic::Status) -> Self {
        let violations = status
            .get_details_bad_request()
            .map(|bad| {
                bad.field_violations
                    .into_iter()
                    .map(|v| FieldViolation {
                        field: v.field,
                        description: v.description,
                    })
                    .collect()
            })
            .unwrap_or_default();
        let request_id = status
            .metadata()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut message = match status.message() {
            "" => status.code().description().to_owned(),
            m => m.to_owned(),
        };
        // Transport failures ("tcp connect error") say what went wrong only
        // in their sources ("Connection refused").
        let mut source = std::error::Error::source(&status);
        while let Some(cause) = source {
            let cause_text = cause.to_string();
            if !message.contains(&cause_text) {
                message = format!("{message}: {cause_text}");
            }
            source = cause.source();
        }
        // A stream cut by its connection (a replica stopping, a proxy
        // between) is no cancellation of the caller's: the server is
        // unavailable, and the call may be made again.
        let code = match status.code() {
            Code::Cancelled => cut_off(&status),
            code => code,
        };
        // tonic's words for an answer that is no gRPC at all.
        if let Some(http) = status
            .message()
            .strip_prefix("grpc-status header missing, mapped from HTTP status code ")
        {
            return Self {
                code: Code::Unavailable,
                message: format!(
                    "the server answered a gRPC call with HTTP {http}: it is not a krayne server \
                     (the ops port?), or a proxy in front of it does not pass gRPC"
                ),
                violations,
                request_id,
            };
        }
        Self {
            code,
            message,
            violations,
            request_id,
        }
    }
}

/// What a `Cancelled` the client's own stack made means: its deadline
/// (`DeadlineExceeded`), a connection lost under the call
/// (`Unavailable`), or a cancellation indeed.
fn cut_off(status: &tonic::Status) -> Code {
    let mut source = std::error::Error::source(status);
    let mut transport = false;
    while let Some(cause) = source {
        if cause.is::<tonic::TimeoutExpired>() {
            return Code::DeadlineExceeded;
        }
        transport = true;
        source = cause.source();
    }
    if transport { Code::Unavailable } else { Code::Cancelled }
}

impl From<tonic::transport::Error> for ClientError {
    fn from(e: tonic::transport::Error) -> Self {
        use std::error::Error as _;
        let mut message = e.to_string();
        let mut source = e.source();
        while let Some(cause) = source {
            message = format!("{message}: {cause}");
            source = cause.source();
        }
        Self::new(Code::Unavailable, message)
    }
}

impl From<krayne_proto::config::ConfigError> for ClientError {
    fn from(e: krayne_proto::config::ConfigError) -> Self {
        use krayne_proto::config::ConfigError;
        match e {
            ConfigError::Field { path, reason } => Self::invalid_field(path, reason),
            ConfigError::Override { assignment, reason } => {
                Self::invalid_field("overrides", format!("{assignment:?}: {reason}"))
            }
            ConfigError::Syntax(_) => Self::new(Code::InvalidArgument, e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use tonic_types::{ErrorDetails, StatusExt as _};

    use super::*;

    #[test]
    fn field_violations_come_from_the_status_details() {
        let details = ErrorDetails::with_bad_request(vec![tonic_types::FieldViolation::new(
            "worker_groups[0].min_replicas",
            "must be <= replicas (1)",
        )]);
        let status = tonic::Status::with_error_details(Code::InvalidArgument, "invalid cluster config", details);
        let e = ClientError::from(status);
        assert_eq!(e.code(), Code::InvalidArgument);
        assert_eq!(e.message(), "invalid cluster config");
        assert_eq!(e.violations()[0].field, "worker_groups[0].min_replicas");
    }

    #[test]
    fn local_config_errors_keep_their_path() {
        let e = ClientError::from(krayne_proto::config::ConfigError::Field {
            path: "head.cpus".into(),
            reason: "must be a string".into(),
        });
        assert_eq!(e.code(), Code::InvalidArgument);
        assert_eq!(e.violations()[0].field, "head.cpus");
        assert!(!e.is_unavailable());
    }
}
