//! Kubernetes errors → the domain enum, in one place.

use kube::core::Status;

use crate::domain::{Error, ResourceKind, Violations};

/// Translates a kube-rs error; the message never carries credentials.
pub(super) fn translate(e: kube::Error) -> Error {
    match e {
        kube::Error::Api(status) => from_status(&status),
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => {
            Error::Unavailable("Kubernetes is unreachable".into())
        }
        other => Error::Internal(format!("kubernetes client: {other}")),
    }
}

fn from_status(s: &Status) -> Error {
    let details = s.details.as_ref();
    let name = details.map(|d| d.name.clone()).unwrap_or_default();
    let kind = match details.map(|d| d.kind.as_str()) {
        Some("namespaces") => ResourceKind::Namespace,
        _ => ResourceKind::Cluster,
    };
    match (s.code, s.reason.as_str()) {
        (404, _) => Error::NotFound { kind, name },
        (409, "AlreadyExists") => Error::AlreadyExists { kind, name },
        (409, _) => Error::Conflict("the cluster changed meanwhile; read it again and retry".into()),
        (400 | 422, _) => {
            let mut v = Violations::new();
            for cause in details.map(|d| d.causes.as_slice()).unwrap_or_default() {
                v.push(format!("manifest.{}", cause.field), cause.message.clone());
            }
            if v.is_empty() {
                v.push("manifest", s.message.clone());
            }
            Error::InvalidArgument(v)
        }
        // Kubernetes refusing krayne is krayne's misconfiguration (a rule
        // missing from its Role), not the caller's lack of rights: a 500,
        // whose detail (logged, never answered) does not name the account.
        (403, _) => Error::Internal("Kubernetes forbade krayne's own request (RBAC); see the error log".into()),
        (401, _) => Error::Unavailable("Kubernetes rejected krayne's credentials".into()),
        (429, _) => Error::Unavailable("Kubernetes is throttling requests; try again shortly".into()),
        (code, _) if code >= 500 => Error::Unavailable(format!("Kubernetes answered {code}")),
        _ => Error::Internal(format!("unexpected Kubernetes answer {}: {}", s.code, s.message)),
    }
}

#[cfg(test)]
mod tests {
    use kube::core::response::{StatusCause, StatusDetails};

    use super::*;

    fn status(code: u16, reason: &str, kind: &str) -> kube::Error {
        let mut s = Status::failure("msg", reason);
        s.code = code;
        s.details = Some(StatusDetails {
            name: "x".into(),
            kind: kind.into(),
            causes: vec![StatusCause {
                field: "metadata.name".into(),
                message: "too long".into(),
                reason: String::new(),
            }],
            group: String::new(),
            uid: String::new(),
            retry_after_seconds: 0,
        });
        kube::Error::Api(Box::new(s))
    }

    #[test]
    fn statuses_map_to_the_domain() {
        let code = |e: kube::Error| translate(e).code();
        assert!(matches!(
            translate(status(404, "NotFound", "namespaces")),
            Error::NotFound {
                kind: ResourceKind::Namespace,
                ..
            }
        ));
        assert!(matches!(
            translate(status(404, "NotFound", "rayclusters")),
            Error::NotFound {
                kind: ResourceKind::Cluster,
                ..
            }
        ));
        assert_eq!(code(status(409, "AlreadyExists", "rayclusters")), "already_exists");
        assert_eq!(code(status(409, "Conflict", "rayclusters")), "conflict");
        assert_eq!(code(status(403, "Forbidden", "rayclusters")), "internal");
        assert_eq!(code(status(503, "ServiceUnavailable", "")), "unavailable");
        assert_eq!(code(status(429, "TooManyRequests", "")), "unavailable");
        let invalid = translate(status(422, "Invalid", "RayCluster"));
        assert_eq!(invalid.to_string(), "invalid request: manifest.metadata.name: too long");
    }
}
