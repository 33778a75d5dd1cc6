//! Building and writing audit rows for the use cases.

use std::{future::Future, time::Instant};

use serde_json::Value;

use super::{Context, ControlPlane};
use crate::domain::audit::AuditAction;
use crate::domain::{
    Error,
    audit::{AuditEntry, Outcome, RequestMeta},
};

/// The key refused authentications are limited and aggregated by: the
/// address, or for IPv6 its /64 (one host commonly holds a whole /64, and
/// could otherwise pick a fresh address for every request).
fn source_key(source: Option<&str>) -> String {
    match source.and_then(|s| s.parse::<std::net::IpAddr>().ok()) {
        Some(std::net::IpAddr::V6(v6)) if v6.to_ipv4_mapped().is_none() => {
            let s = v6.segments();
            format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
        }
        Some(ip) => ip.to_canonical().to_string(),
        None => source.unwrap_or("unknown").to_owned(),
    }
}

impl ControlPlane {
    pub(super) fn entry(
        &self,
        cx: &Context,
        action: AuditAction,
        namespace: Option<&str>,
        cluster: Option<&str>,
        summary: Value,
    ) -> AuditEntry {
        let p = &cx.principal;
        let summary = self.with_site(namespace, cluster, summary);
        AuditEntry {
            id: uuid::Uuid::now_v7().to_string(),
            occurred_at: jiff::Timestamp::now().to_string(),
            meta: cx.meta.clone(),
            subject: p.subject.clone(),
            email: p.email.clone(),
            groups: p.groups.clone(),
            teams: p.teams.clone(),
            action: action.as_str().to_owned(),
            namespace: namespace.map(str::to_owned),
            cluster: cluster.map(str::to_owned),
            summary,
            outcome: Outcome::Pending,
            completed_at: None,
            http_status: None,
            grpc_code: None,
            error: None,
            duration_ms: None,
        }
    }

    /// `summary` saying the site of the cluster (or RayJob) it is about,
    /// when the store spans several sites and the summary does not say
    /// already (a create says where it placed it).
    fn with_site(&self, namespace: Option<&str>, cluster: Option<&str>, summary: Value) -> Value {
        let (Some(namespace), Some(name)) = (namespace, cluster) else {
            return summary;
        };
        if self.store.site_health().is_empty() {
            return summary;
        }
        let Some(site) = self.store.feed().and_then(|feed| {
            feed.cluster(namespace, name)
                .map(|c| c.site.clone())
                .or_else(|| feed.rayjob(namespace, name).map(|j| j.site.clone()))
        }) else {
            return summary;
        };
        let mut summary = match summary {
            Value::Null => Value::Object(serde_json::Map::new()),
            other => other,
        };
        if let Some(map) = summary.as_object_mut() {
            map.entry("site").or_insert_with(|| Value::String(site.to_string()));
        }
        summary
    }

    /// Refuses a request whose token was refused: audits it as
    /// `auth.denied` (the first from its source at once, repeats as one
    /// summary row per window) and answers `rejected`, or `RateLimited`
    /// when its source is over the rate of denials. `detail` says why,
    /// never the token.
    pub async fn refuse_unauthenticated(&self, meta: &RequestMeta, rejected: Error, detail: &str) -> Error {
        let source = source_key(meta.source_ip.as_deref());
        let source = source.as_str();
        let error = match self.denials.over_rate(source) {
            Some(retry_after) => {
                metrics::counter!("krayne_auth_denials_rate_limited_total").increment(1);
                Error::RateLimited { retry_after }
            }
            None => rejected,
        };
        let cx = Context {
            principal: crate::domain::Principal {
                subject: String::new(),
                email: None,
                groups: Vec::new(),
                teams: Vec::new(),
                global_admin: false,
                grants: Vec::new(),
                expires_at: None,
                issuer: None,
            },
            meta: meta.clone(),
        };
        let mut e = self.entry(&cx, AuditAction::AuthDenied, None, None, Value::Null);
        e.outcome = Outcome::Denied;
        e.http_status = Some(error.http_status());
        e.grpc_code = Some(error.grpc_code().1.to_owned());
        e.error = Some(detail.to_owned());
        e.completed_at = e.occurred_at.clone().into();
        e.duration_ms = Some(0);
        let limited = matches!(error, Error::RateLimited { .. });
        for row in self.denials.note(source, e, limited) {
            self.audit.record(&row).await;
        }
        error
    }

    /// Writes the summary rows of denial windows that have closed (a
    /// background task's round).
    pub(crate) async fn close_denial_windows(&self) {
        for row in self.denials.close(false) {
            self.audit.record(&row).await;
        }
    }

    /// Audits a successful read when reads are audited.
    pub(super) async fn record_read(
        &self,
        cx: &Context,
        action: AuditAction,
        namespace: Option<&str>,
        cluster: Option<&str>,
    ) {
        if !self.settings.audit_reads {
            return;
        }
        let e = self.done_entry(cx, action, namespace, cluster, Value::Null);
        self.audit.record(&e).await;
    }

    /// An [`Self::entry`] for what was done as it was recorded (a read, an
    /// act of krayne's own): succeeded, never `pending`.
    pub(super) fn done_entry(
        &self,
        cx: &Context,
        action: AuditAction,
        namespace: Option<&str>,
        cluster: Option<&str>,
        summary: Value,
    ) -> AuditEntry {
        let mut e = self.entry(cx, action, namespace, cluster, summary);
        e.outcome = Outcome::Succeeded;
        e.http_status = Some(200);
        e.grpc_code = Some("OK".to_owned());
        e.completed_at = Some(e.occurred_at.clone());
        e.duration_ms = Some(0);
        e
    }

    /// Audits a request refused before it could act (denied or invalid).
    pub(super) async fn record_refusal(
        &self,
        cx: &Context,
        action: AuditAction,
        namespace: Option<&str>,
        cluster: Option<&str>,
        error: &Error,
    ) {
        self.record_refusal_with(cx, action, namespace, cluster, error, Value::Null)
            .await;
    }

    /// [`Self::record_refusal`] with a summary (a quota's violations).
    pub(super) async fn record_refusal_with(
        &self,
        cx: &Context,
        action: AuditAction,
        namespace: Option<&str>,
        cluster: Option<&str>,
        error: &Error,
        summary: Value,
    ) {
        let mut e = self.entry(cx, action, namespace, cluster, summary);
        e.outcome = match error {
            Error::PermissionDenied(_) => Outcome::Denied,
            _ => Outcome::Invalid,
        };
        e.http_status = Some(error.http_status());
        e.grpc_code = Some(error.grpc_code().1.to_owned());
        e.error = Some(error.to_string());
        e.completed_at = e.occurred_at.clone().into();
        e.duration_ms = Some(0);
        self.audit.record(&e).await;
    }

    /// Runs a mutation between a durable `pending` row and its outcome. If
    /// the row cannot be written, the mutation does not run (fail closed).
    pub(super) async fn audited<T, F, Fut>(
        &self,
        cx: &Context,
        action: AuditAction,
        namespace: &str,
        cluster: &str,
        summary: Value,
        mutation: F,
    ) -> Result<T, Error>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        let status = |_: &T| action.success_status();
        self.audited_with_status(cx, action, namespace, cluster, summary, status, mutation)
            .await
    }

    /// [`Self::audited`] for a mutation whose success answers with a
    /// status of its own (an idempotent submit that found its job: 200).
    #[expect(clippy::too_many_arguments, reason = "audited's, plus the status")]
    pub(super) async fn audited_with_status<T, F, Fut>(
        &self,
        cx: &Context,
        action: AuditAction,
        namespace: &str,
        cluster: &str,
        summary: Value,
        status: impl Fn(&T) -> u16,
        mutation: F,
    ) -> Result<T, Error>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        let started = Instant::now();
        let mut e = self.entry(cx, action, Some(namespace), Some(cluster), summary);
        let written = self.audit.begin(&e).await;
        metrics::histogram!("krayne_audit_write_duration_seconds").record(started.elapsed().as_secs_f64());
        if let Err(why) = written {
            metrics::counter!("krayne_audit_write_failures_total").increment(1);
            tracing::error!(request_id = %cx.meta.request_id, error = %why, "audit write failed; refusing the mutation");
            return Err(Error::Unavailable(
                "the audit log cannot be written, so nothing was changed; try again shortly".into(),
            ));
        }
        let result = mutation().await;
        e.outcome = match &result {
            Ok(_) => Outcome::Succeeded,
            Err(Error::InvalidArgument(_)) => Outcome::Invalid,
            // Kubernetes did not answer in time: the change may still land.
            Err(Error::DeadlineExceeded(_)) => Outcome::Unknown,
            Err(_) => Outcome::Failed,
        };
        match &result {
            Ok(done) => {
                e.http_status = Some(status(done));
                e.grpc_code = Some("OK".to_owned());
            }
            Err(error) => {
                e.http_status = Some(error.http_status());
                e.grpc_code = Some(error.grpc_code().1.to_owned());
                e.error = Some(error.to_string());
            }
        }
        e.completed_at = Some(jiff::Timestamp::now().to_string());
        e.duration_ms = Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
        self.audit.finish(&e).await;
        result
    }
}

#[cfg(test)]
mod tests {
    use super::source_key;

    #[test]
    fn ipv6_sources_are_keyed_by_their_64() {
        assert_eq!(source_key(Some("2001:db8:1:2:aaaa::1")), "2001:db8:1:2::/64");
        assert_eq!(source_key(Some("2001:db8:1:2:bbbb::9")), "2001:db8:1:2::/64");
        assert_eq!(source_key(Some("203.0.113.7")), "203.0.113.7");
        assert_eq!(source_key(Some("::ffff:203.0.113.7")), "203.0.113.7");
        assert_eq!(source_key(None), "unknown");
    }
}
