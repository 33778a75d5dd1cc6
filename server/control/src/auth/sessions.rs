//! Browser sessions' signed tickets: the single-use sign-in link's (about
//! a minute) and the session cookie's (short-lived), both HS256 JWTs under
//! the server's session secret. Their issuer and audience are no API
//! token's, and the secret is its own, so neither ever passes as a bearer
//! token (nor a bearer token as either).

use std::fmt;

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation, decode, encode, errors::ErrorKind};
use serde::{Deserialize, Serialize};

/// The issuer and audience of every ticket.
const TICKET_PARTY: &str = "krayne-browser-session";
/// Clock skew allowed between replicas, in seconds.
const LEEWAY_SECONDS: u64 = 5;
/// The shortest session secret taken.
pub const MIN_SECRET_BYTES: usize = 32;

/// What a ticket is good for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TicketUse {
    /// Exchanged once for a session cookie.
    SignIn,
    /// The session itself (the cookie's value).
    Session,
}

/// A ticket's claims: who, for which service of which cluster, until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ticket {
    /// What it is good for.
    #[serde(rename = "use")]
    pub usage: TicketUse,
    /// The session's id (a UUID v7; the sign-in's audit row has it).
    pub sid: String,
    /// The caller's subject.
    pub sub: String,
    /// The caller's e-mail, when their token had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// The caller's groups (the team mapping may grant by group).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Namespace.
    pub ns: String,
    /// Cluster.
    pub cluster: String,
    /// Service.
    pub svc: String,
    /// Issued at (Unix seconds).
    pub iat: i64,
    /// Expires at (Unix seconds).
    pub exp: i64,
    /// A sign-in link's: the latest its session may last, the expiry of
    /// the token that asked for the link (a session never outlives it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<i64>,
    /// `krayne-browser-session`.
    pub iss: String,
    /// `krayne-browser-session`.
    pub aud: String,
}

impl Ticket {
    /// The party every ticket names as issuer and audience.
    pub fn party() -> String {
        TICKET_PARTY.to_owned()
    }
}

/// Why a ticket was refused (for logs; the caller is told less).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TicketError {
    /// Past `exp`.
    #[error("expired")]
    Expired,
    /// Anything else.
    #[error("{0}")]
    Invalid(String),
}

/// The session secret, as signing and verifying keys.
#[derive(Clone)]
pub struct SessionKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
}

impl fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SessionKeys(***)")
    }
}

impl SessionKeys {
    /// Keys from a shared secret (every replica needs the same one).
    pub fn from_secret(secret: &[u8]) -> Result<Self, String> {
        if secret.len() < MIN_SECRET_BYTES {
            return Err(format!("the session secret must be at least {MIN_SECRET_BYTES} bytes"));
        }
        Ok(Self {
            encoding: EncodingKey::from_secret(secret),
            decoding: DecodingKey::from_secret(secret),
        })
    }

    /// Keys from a random secret: sessions then hold on this process only
    /// (the sandbox, a single replica).
    pub fn random() -> Result<Self, String> {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(|e| format!("no randomness for the session secret: {e}"))?;
        Self::from_secret(&secret)
    }

    /// The ticket, signed.
    pub fn sign(&self, ticket: &Ticket) -> Result<String, String> {
        encode(&Header::new(Algorithm::HS256), ticket, &self.encoding).map_err(|e| e.to_string())
    }

    /// The ticket `token` carries, when this server signed it for `usage`
    /// and it has not expired.
    pub fn verify(&self, token: &str, usage: TicketUse) -> Result<Ticket, TicketError> {
        if token.len() > super::MAX_TOKEN_BYTES {
            return Err(TicketError::Invalid("longer than a ticket can be".into()));
        }
        let mut v = Validation::new(Algorithm::HS256);
        v.leeway = LEEWAY_SECONDS;
        v.set_issuer(&[TICKET_PARTY]);
        v.set_audience(&[TICKET_PARTY]);
        v.set_required_spec_claims(&["exp", "iss", "aud"]);
        let ticket = decode::<Ticket>(token, &self.decoding, &v)
            .map_err(|e| match e.kind() {
                ErrorKind::ExpiredSignature => TicketError::Expired,
                other => TicketError::Invalid(format!("{other:?}")),
            })?
            .claims;
        if ticket.usage != usage {
            return Err(TicketError::Invalid(format!(
                "a {:?} ticket, not a {usage:?} one",
                ticket.usage
            )));
        }
        Ok(ticket)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticket(usage: TicketUse, exp_in: i64) -> Ticket {
        let now = jiff::Timestamp::now().as_second();
        Ticket {
            usage,
            sid: "0190d9a8-0000-7000-8000-000000000000".into(),
            sub: "alice".into(),
            email: None,
            groups: vec!["ml".into()],
            ns: "ml-team".into(),
            cluster: "demo".into(),
            svc: "dashboard".into(),
            iat: now,
            exp: now + exp_in,
            until: None,
            iss: Ticket::party(),
            aud: Ticket::party(),
        }
    }

    #[test]
    fn a_ticket_verifies_for_its_own_use_only() {
        let keys = SessionKeys::random().unwrap();
        let signed = keys.sign(&ticket(TicketUse::SignIn, 60)).unwrap();
        assert_eq!(keys.verify(&signed, TicketUse::SignIn).unwrap().sub, "alice");
        assert!(matches!(
            keys.verify(&signed, TicketUse::Session),
            Err(TicketError::Invalid(_))
        ));
    }

    #[test]
    fn expired_foreign_and_short_secrets_are_refused() {
        let keys = SessionKeys::random().unwrap();
        let old = keys.sign(&ticket(TicketUse::Session, -60)).unwrap();
        assert_eq!(keys.verify(&old, TicketUse::Session), Err(TicketError::Expired));
        let other = SessionKeys::random().unwrap();
        let foreign = other.sign(&ticket(TicketUse::Session, 60)).unwrap();
        assert!(matches!(
            keys.verify(&foreign, TicketUse::Session),
            Err(TicketError::Invalid(_))
        ));
        let mut api_like = ticket(TicketUse::Session, 60);
        api_like.aud = "krayne".into();
        let api_like = keys.sign(&api_like).unwrap();
        assert!(keys.verify(&api_like, TicketUse::Session).is_err());
        assert!(SessionKeys::from_secret(b"short").is_err());
        assert_eq!(format!("{keys:?}"), "SessionKeys(***)");
    }
}
