//! Kubernetes errors → the domain enum, in one place; and the refusals of
//! krayne's own RBAC, which are an operator's problem, never the caller's.

use std::{
    sync::Mutex,
    time::{Duration, Instant},
};

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
        Some("rayjobs") => ResourceKind::RayJob,
        _ => ResourceKind::Cluster,
    };
    match (s.code, s.reason.as_str()) {
        (404, _) => Error::NotFound {
            kind,
            name,
            namespace: None,
        },
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
        // RBAC refusing krayne is krayne's misconfiguration (a rule missing
        // from its Role), not the caller's lack of rights: a 500 whose
        // detail (logged, never answered) does not name the account. Other
        // 403s (an exceeded ResourceQuota, an admission webhook, a
        // namespace being deleted) are about the request: said as they are.
        (403, _) => match rbac_refusal(&s.message) {
            Some(rule) => {
                forbidden(&rule);
                Error::Internal("Kubernetes forbade krayne's own request (RBAC); see the error log".into())
            }
            None => Error::FailedPrecondition(format!("Kubernetes refused the request: {}", s.message)),
        },
        (401, _) => Error::Unavailable("Kubernetes rejected krayne's credentials".into()),
        (429, _) => Error::Unavailable("Kubernetes is throttling requests; try again shortly".into()),
        (code, _) if code >= 500 => Error::Unavailable(format!("Kubernetes answered {code}")),
        _ => Error::Internal(format!("unexpected Kubernetes answer {}: {}", s.code, s.message)),
    }
}

/// What RBAC refused, read from its message: `… User "system:…" cannot
/// patch resource "rayclusters" in API group "ray.io" in the namespace
/// "ml-team"` (or `at the cluster scope`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct RbacRule {
    verb: String,
    resource: String,
    namespace: Option<String>,
}

fn rbac_refusal(message: &str) -> Option<RbacRule> {
    let (_, rest) = message.split_once(" cannot ")?;
    let (verb, rest) = rest.split_once(" resource \"")?;
    let (resource, rest) = rest.split_once('"')?;
    let namespace = rest
        .split_once("in the namespace \"")
        .and_then(|(_, ns)| ns.split_once('"'))
        .map(|(ns, _)| ns.to_owned());
    let plain = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-._*/".contains(c));
    (plain(verb) && plain(resource)).then(|| RbacRule {
        verb: verb.to_owned(),
        resource: resource.to_owned(),
        namespace,
    })
}

/// The latest RBAC refusal of this process (one Kubernetes client).
static LAST_FORBIDDEN: Mutex<Option<(String, Instant)>> = Mutex::new(None);

/// How long `/readyz` reports an RBAC refusal.
const REPORTED_FOR: Duration = Duration::from_secs(600);

/// Logs, counts and remembers an RBAC refusal of krayne's own request.
fn forbidden(rule: &RbacRule) {
    let scope = rule
        .namespace
        .as_deref()
        .map_or_else(|| "cluster-wide".to_owned(), |ns| format!("in namespace {ns}"));
    let what = format!("{} {} {scope}", rule.verb, rule.resource);
    tracing::error!(
        verb = %rule.verb,
        resource = %rule.resource,
        namespace = rule.namespace.as_deref().unwrap_or(""),
        "Kubernetes forbade krayne's own request: its ServiceAccount's RBAC lacks a rule for {what}"
    );
    metrics::counter!(
        "krayne_kube_forbidden_total",
        "verb" => rule.verb.clone(),
        "resource" => rule.resource.clone(),
        "namespace" => rule.namespace.clone().unwrap_or_default()
    )
    .increment(1);
    *LAST_FORBIDDEN.lock().unwrap_or_else(|p| p.into_inner()) = Some((what, Instant::now()));
}

/// What `/readyz` should report about krayne's RBAC: the latest refusal in
/// the last ten minutes.
pub(super) fn rbac_problem() -> Option<String> {
    let last = LAST_FORBIDDEN.lock().unwrap_or_else(|p| p.into_inner());
    let (what, at) = last.as_ref().filter(|(_, at)| at.elapsed() < REPORTED_FOR)?;
    Some(format!(
        "Kubernetes forbade krayne's {what} {} s ago: its ServiceAccount's RBAC lacks that rule",
        at.elapsed().as_secs()
    ))
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
    fn rbac_refusals_are_told_from_other_403s() {
        let rbac = r#"rayclusters.ray.io "a" is forbidden: User "system:serviceaccount:krayne:krayne" cannot patch resource "rayclusters" in API group "ray.io" in the namespace "ml-team""#;
        assert_eq!(
            rbac_refusal(rbac),
            Some(RbacRule {
                verb: "patch".into(),
                resource: "rayclusters".into(),
                namespace: Some("ml-team".into()),
            })
        );
        let cluster_scope = r#"namespaces is forbidden: User "u" cannot list resource "namespaces" in API group "" at the cluster scope"#;
        assert_eq!(rbac_refusal(cluster_scope).unwrap().namespace, None);
        for other in [
            r#"rayclusters.ray.io "a" is forbidden: exceeded quota: compute, requested: limits.cpu=8"#,
            r#"admission webhook "validate.kyverno.svc" denied the request: images must be signed"#,
            r#"pods "p" is forbidden: unable to create new content in namespace ml because it is being terminated"#,
        ] {
            assert_eq!(rbac_refusal(other), None, "{other}");
        }
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
        assert_eq!(code(status(403, "Forbidden", "rayclusters")), "failed_precondition");
        assert_eq!(code(status(503, "ServiceUnavailable", "")), "unavailable");
        assert_eq!(code(status(429, "TooManyRequests", "")), "unavailable");
        let invalid = translate(status(422, "Invalid", "RayCluster"));
        assert_eq!(invalid.to_string(), "invalid request: manifest.metadata.name: too long");
    }
}
