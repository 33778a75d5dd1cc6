//! Browser sessions to a cluster's HTTP services. A browser cannot send a
//! bearer token, so an editor asks for a sign-in link (valid about a
//! minute, usable once on any replica: its first use writes the session's
//! `service.connect` audit row, whose id is the session's, and a second
//! insert of that id finds it there); opening it yields a signed session,
//! bound to the caller and one service of one cluster, that the proxy
//! checks on every request against the current team mapping. No session
//! is stored anywhere: any replica with the same secret verifies it.

use std::time::Duration;

use serde_json::json;

use super::{Context, ControlPlane, streams::kit::millis, tunnels::find_service};
use crate::{
    auth::{SessionKeys, Ticket, TicketError, TicketUse},
    domain::{
        AuthFailure, ClusterRef, Error, Principal,
        audit::{AuditAction, Outcome, RequestMeta},
    },
    manifest,
};

/// Browser sessions' secret and lifetimes.
#[derive(Debug, Clone)]
pub struct SessionSettings {
    /// The session secret; `None`: this server issues no sessions.
    pub keys: Option<SessionKeys>,
    /// How long a sign-in link may wait to be opened.
    pub sign_in_within: Duration,
    /// How long a session lasts once signed in.
    pub lifetime: Duration,
}

impl Default for SessionSettings {
    fn default() -> Self {
        Self {
            keys: None,
            sign_in_within: Duration::from_secs(60),
            lifetime: Duration::from_secs(3600),
        }
    }
}

/// A sign-in link: its ticket, and what it is for (the transport names
/// it in its own URLs).
#[derive(Debug, Clone)]
pub struct SignInLink {
    /// The cluster's namespace.
    pub namespace: String,
    /// The cluster.
    pub cluster: String,
    /// The service it leads to.
    pub service: String,
    /// The link's ticket, its query (a credential: never log it).
    pub ticket: String,
    /// The service's own host, when it has one (`--apps-domain`): the
    /// link and the service are there.
    pub app_host: Option<String>,
    /// Until when it can be opened.
    pub expires_at: jiff::Timestamp,
    /// How long the session lasts once the link is opened.
    pub session_seconds: u64,
}

/// An opened sign-in link: the session to set (the transport scopes its
/// cookie to the service).
#[derive(Debug, Clone)]
pub struct SignedIn {
    /// The session cookie's value (the signed session).
    pub session: String,
    /// The session's lifetime.
    pub max_age: Duration,
}

fn now_seconds() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// Tickets the browser carries must fit in a cookie (4096 bytes, name
/// and attributes included).
const MAX_SESSION_BYTES: usize = 3800;

impl ControlPlane {
    /// A sign-in link to service `service` of cluster `name` (editor), for
    /// a browser: the cluster must declare it, and it must speak HTTP.
    pub async fn sign_in_link(&self, cx: &Context, cluster: &ClusterRef, service: &str) -> Result<SignInLink, Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let target = self.authorize_cluster(cx, AuditAction::ServiceConnect, cluster).await?;
        if let Err(e) = self.http_service(cx, &target, service).await {
            self.record_refusal(cx, AuditAction::ServiceConnect, Some(namespace), Some(name), &e)
                .await;
            return Err(e);
        }
        let keys = self.session_keys()?;
        let settings = &self.settings.sessions;
        let p = &cx.principal;
        let now = now_seconds();
        let seconds = |d: Duration| i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
        // A session lasts its lifetime, but never past the token that
        // asked for it.
        let session_seconds = p
            .expires_at
            .map_or(seconds(settings.lifetime), |until| {
                seconds(settings.lifetime).min(until.saturating_sub(now))
            })
            .max(0);
        let ticket = |usage, lasts| Ticket {
            usage,
            sid: uuid::Uuid::now_v7().to_string(),
            sub: p.subject.clone(),
            email: p.email.clone(),
            groups: p.groups.clone(),
            ns: namespace.to_owned(),
            cluster: name.to_owned(),
            svc: service.to_owned(),
            iat: now,
            exp: now.saturating_add(lasts),
            until: p.expires_at,
            iss: Ticket::party(),
            aud: Ticket::party(),
        };
        let sign = |t: &Ticket| {
            keys.sign(t)
                .map_err(|e| Error::Internal(format!("signing a session: {e}")))
        };
        // The session that will be set must fit in a cookie.
        if sign(&ticket(TicketUse::Session, session_seconds))?.len() > MAX_SESSION_BYTES {
            return Err(Error::FailedPrecondition(
                "your token carries too many groups to fit in a browser session; use a bearer token or a tunnel".into(),
            ));
        }
        let link = ticket(TicketUse::SignIn, seconds(settings.sign_in_within));
        let expires_at = jiff::Timestamp::from_second(link.exp).unwrap_or_else(|_| jiff::Timestamp::now());
        let signed = sign(&link)?;
        Ok(SignInLink {
            namespace: namespace.to_owned(),
            cluster: name.to_owned(),
            service: service.to_owned(),
            app_host: self.apps_domain().and_then(|d| d.host(namespace, name, service)),
            ticket: signed,
            expires_at,
            session_seconds: u64::try_from(session_seconds).unwrap_or(0),
        })
    }

    /// Opens a sign-in link: checks its ticket (this server's, for this
    /// path, not expired), the caller against the current mapping and the
    /// cluster, then spends the link by writing the session's audit row
    /// (fail closed; a second use finds the row and is refused).
    pub async fn sign_in(
        &self,
        meta: &RequestMeta,
        cluster: &ClusterRef,
        service: &str,
        ticket: &str,
    ) -> Result<SignedIn, Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let keys = self.session_keys()?;
        let refuse = async |detail: &str| {
            self.refuse_unauthenticated(meta, Error::Unauthenticated(AuthFailure::SignInLink), detail)
                .await
        };
        let link = match keys.verify(ticket, TicketUse::SignIn) {
            Ok(t) if (t.ns.as_str(), t.cluster.as_str(), t.svc.as_str()) == (namespace, name, service) => t,
            Ok(_) => return Err(refuse("a sign-in link for another service").await),
            Err(TicketError::Expired) => return Err(refuse("sign-in link expired").await),
            Err(TicketError::Invalid(why)) => return Err(refuse(&format!("sign-in link: {why}")).await),
        };
        let cx = self.session_context(&link, meta)?;
        let target = self
            .authorize_cluster(&cx, AuditAction::ServiceConnect, cluster)
            .await?;
        self.http_service(&cx, &target, service).await?;
        let now = now_seconds();
        let lifetime = i64::try_from(self.settings.sessions.lifetime.as_secs()).unwrap_or(i64::MAX);
        let exp = now.saturating_add(lifetime).min(link.until.unwrap_or(i64::MAX));
        if exp <= now {
            return Err(refuse("the token that asked for this link has expired").await);
        }
        let lifetime = Duration::from_secs(u64::try_from(exp - now).unwrap_or(0));
        let until = jiff::Timestamp::from_second(exp).map_or_else(|_| String::new(), |t| t.to_string());
        let summary = json!({
            "service": service,
            "via": "browser-session",
            "session": link.sid,
            "session_expires_at": until,
        });
        let mut entry = self.entry(&cx, AuditAction::ServiceConnect, Some(namespace), Some(name), summary);
        entry.id.clone_from(&link.sid);
        entry.outcome = Outcome::Succeeded;
        entry.http_status = Some(303);
        entry.grpc_code = Some("OK".into());
        entry.completed_at = Some(jiff::Timestamp::now().to_string());
        entry.duration_ms = Some(millis(Duration::ZERO));
        match self.audit.begin_unique(&entry).await {
            Ok(true) => {}
            Ok(false) => return Err(refuse("sign-in link opened a second time").await),
            Err(why) => {
                metrics::counter!("krayne_audit_write_failures_total").increment(1);
                tracing::error!(request_id = %meta.request_id, error = %why, "audit write failed; refusing the session");
                return Err(Error::Unavailable(
                    "the audit log cannot be written, so no session was started; try again shortly".into(),
                ));
            }
        }
        metrics::counter!("krayne_browser_sessions_total").increment(1);
        let session = Ticket {
            usage: TicketUse::Session,
            iat: now,
            exp,
            until: None,
            ..link
        };
        let signed = keys
            .sign(&session)
            .map_err(|e| Error::Internal(format!("signing a session: {e}")))?;
        Ok(SignedIn {
            session: signed,
            max_age: lifetime,
        })
    }

    /// The caller of a proxied request that carries session cookies
    /// (`sessions`: their values) instead of a bearer token: a session for
    /// this cluster (signed in through any of its services: one sign-in
    /// covers the cluster's services, which its cookie's path reaches), or,
    /// when `service` is named (a service on a host of its own), for that
    /// service alone; its principal as the current team mapping sees it,
    /// admitted under its rate. Every other session is ignored.
    pub async fn session_caller(
        &self,
        meta: &RequestMeta,
        cluster: &ClusterRef,
        service: Option<&str>,
        sessions: &[&str],
    ) -> Result<Context, Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let mut why = "no session cookie";
        if let Ok(keys) = self.session_keys() {
            for value in sessions {
                match keys.verify(value, TicketUse::Session) {
                    Ok(t)
                        if (t.ns.as_str(), t.cluster.as_str()) == (namespace, name)
                            && service.is_none_or(|svc| svc == t.svc.as_str()) =>
                    {
                        let cx = self.session_context(&t, meta)?;
                        self.admit(&cx)?;
                        return Ok(cx);
                    }
                    Ok(_) => why = "a session for another cluster or service",
                    Err(TicketError::Expired) => why = "session expired",
                    Err(TicketError::Invalid(_)) => why = "session not valid",
                }
            }
        }
        Err(self
            .refuse_unauthenticated(meta, Error::Unauthenticated(AuthFailure::BrowserSession), why)
            .await)
    }

    /// Refuses (and audits) a browser session's request that did not come
    /// from the service's own page (`why`, the transport's words).
    pub async fn refuse_cross_origin(&self, cx: &Context, cluster: &ClusterRef, why: &str) -> Error {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        metrics::counter!("krayne_proxy_cross_origin_refusals_total").increment(1);
        let e = Error::PermissionDenied(why.to_owned());
        self.record_refusal(cx, AuditAction::ServiceConnect, Some(namespace), Some(name), &e)
            .await;
        e
    }

    /// A request context for a ticket's caller, as the current team
    /// mapping sees them.
    fn session_context(&self, t: &Ticket, meta: &RequestMeta) -> Result<Context, Error> {
        let auth = self
            .authenticator
            .as_ref()
            .ok_or_else(|| Error::Unavailable("this server has no team mapping for browser sessions".into()))?;
        let principal = auth.refresh(&Principal {
            subject: t.sub.clone(),
            email: t.email.clone(),
            groups: t.groups.clone(),
            teams: Vec::new(),
            global_admin: false,
            grants: Vec::new(),
            expires_at: Some(t.exp),
            issuer: None,
        });
        Ok(Context {
            principal,
            meta: meta.clone(),
        })
    }

    fn session_keys(&self) -> Result<&SessionKeys, Error> {
        self.settings.sessions.keys.as_ref().ok_or_else(|| {
            Error::Unavailable(
                "this server issues no browser sessions (it was started without --session-secret-file); \
                 use a bearer token or krayne tunnel"
                    .into(),
            )
        })
    }

    /// Checks that the cluster exists and declares `service`, speaking
    /// HTTP.
    async fn http_service(&self, cx: &Context, target: &ClusterRef, service: &str) -> Result<(), Error> {
        let namespace = target.namespace();
        let cluster = self
            .store
            .get(target, &cx.meta.request_id)
            .await
            .map_err(|e| e.in_namespace(namespace))?;
        find_service(&manifest::declared_services(&cluster), service, true).map(|_| ())
    }
}
