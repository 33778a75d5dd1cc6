//! Domain errors → gRPC statuses, exhaustively, with rich details.

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt as _};

use crate::domain::Error;

/// The status a domain error answers with: the code from the domain's one
/// table, with rich details where they help.
#[deny(clippy::wildcard_enum_match_arm)]
pub(crate) fn to_status(e: Error) -> Status {
    let code = Code::from_i32(e.grpc_code().0);
    let message = e.to_string();
    match e {
        Error::InvalidArgument(v) => {
            let violations: Vec<tonic_types::FieldViolation> = v
                .as_slice()
                .iter()
                .map(|f| tonic_types::FieldViolation::new(f.field.clone(), f.description.clone()))
                .collect();
            Status::with_error_details(code, message, ErrorDetails::with_bad_request(violations))
        }
        Error::QuotaExceeded { namespace, violations } => {
            let each = violations
                .iter()
                .map(|v| {
                    tonic_types::QuotaViolation::new(
                        match &v.site {
                            Some(site) => format!("namespace:{namespace}/site:{site}/{}", v.resource.as_str()),
                            None => format!("namespace:{namespace}/{}", v.resource.as_str()),
                        },
                        format!(
                            "the cluster would hold {} ({} more), the namespace{} {} of its {} {} ({} in use)",
                            v.cluster_would_hold,
                            v.requested,
                            if v.site.is_some() { " there" } else { "" },
                            v.namespace_would_hold,
                            if v.site.is_some() { "cap" } else { "limit" },
                            v.limit,
                            v.in_use
                        ),
                    )
                })
                .collect::<Vec<_>>();
            Status::with_error_details(code, message, ErrorDetails::with_quota_failure(each))
        }
        Error::RateLimited { retry_after } => {
            Status::with_error_details(code, message, ErrorDetails::with_retry_info(Some(retry_after)))
        }
        Error::Internal(detail) => {
            tracing::error!(%detail, "internal error");
            Status::new(code, message)
        }
        Error::Unauthenticated(_)
        | Error::PermissionDenied(_)
        | Error::NotFound { .. }
        | Error::AlreadyExists { .. }
        | Error::Conflict(_)
        | Error::FailedPrecondition(_)
        | Error::Unavailable(_)
        | Error::BadGateway(_)
        | Error::Gone(_)
        | Error::DeadlineExceeded(_)
        | Error::PayloadTooLarge { .. } => Status::new(code, message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ResourceKind, Violations};

    #[test]
    fn invalid_arguments_carry_field_violations() {
        let mut v = Violations::new();
        v.push("worker_groups[0].min_replicas", "must be <= replicas (1)");
        let status = to_status(Error::InvalidArgument(v));
        assert_eq!(status.code(), Code::InvalidArgument);
        let details = status.get_error_details();
        let bad = details.bad_request().unwrap();
        assert_eq!(bad.field_violations[0].field, "worker_groups[0].min_replicas");
    }

    #[test]
    fn every_kind_has_its_code() {
        let nf = Error::NotFound {
            kind: ResourceKind::Cluster,
            name: "x".into(),
            namespace: None,
        };
        assert_eq!(to_status(nf).code(), Code::NotFound);
        assert_eq!(to_status(Error::Conflict("c".into())).code(), Code::Aborted);
        assert_eq!(
            to_status(Error::Internal("secret detail".into())).message(),
            "internal error"
        );
        assert_eq!(
            to_status(Error::DeadlineExceeded("late".into())).code(),
            Code::DeadlineExceeded
        );
    }
}
