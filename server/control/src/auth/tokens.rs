//! JWT verification with keys and algorithms from configuration only.

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, decode_header, encode};
use serde::Serialize;
use serde_json::Value;

use super::issuers::{Issuer, IssuerKind};
use crate::domain::AuthFailure;

/// Tokens larger than this are refused before any parsing. 8 KiB is what
/// common proxies allow for a header; HTTP/2 itself refuses header blocks
/// over 16 KiB before they reach krayne.
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;

/// One key the server accepts tokens from.
#[derive(Clone)]
pub struct VerifyingKey {
    /// Key id, when the key has one (`kid`).
    pub kid: Option<String>,
    /// Algorithm the key is used with.
    pub algorithm: Algorithm,
    /// The key.
    pub key: DecodingKey,
}

impl VerifyingKey {
    /// A shared secret for HS256 (development only).
    pub fn hs256(secret: &[u8]) -> Self {
        Self {
            kid: None,
            algorithm: Algorithm::HS256,
            key: DecodingKey::from_secret(secret),
        }
    }

    /// A PEM public key; the algorithm says how to read it.
    pub fn from_pem(algorithm: Algorithm, pem: &[u8]) -> Result<Self, String> {
        let key = match algorithm {
            Algorithm::RS256
            | Algorithm::RS384
            | Algorithm::RS512
            | Algorithm::PS256
            | Algorithm::PS384
            | Algorithm::PS512 => DecodingKey::from_rsa_pem(pem),
            Algorithm::ES256 | Algorithm::ES384 => DecodingKey::from_ec_pem(pem),
            Algorithm::EdDSA => DecodingKey::from_ed_pem(pem),
            other => return Err(format!("{other:?} keys are not read from PEM files")),
        }
        .map_err(|e| format!("not a usable {algorithm:?} public key: {e}"))?;
        Ok(Self {
            kid: None,
            algorithm,
            key,
        })
    }
}

/// What the verifier checks besides the signature.
#[derive(Debug, Clone)]
pub struct TokenRules {
    /// Required `iss` (empty: learned from the issuer's discovery document).
    pub issuer: String,
    /// `aud` must contain this.
    pub audience: String,
    /// Clock skew allowed for `exp`/`nbf`/`iat`, in seconds (≤ 60).
    pub leeway_seconds: u64,
    /// Claim holding the subject.
    pub subject_claim: String,
    /// Claim holding the e-mail.
    pub email_claim: String,
    /// Claim holding the groups (a string or a list).
    pub groups_claim: String,
    /// Whether an e-mail counts without `email_verified: true` (a
    /// provider that verifies every address it issues). An e-mail that
    /// does not count is dropped: the team mapping never matches it.
    pub assume_email_verified: bool,
    /// The longest a ServiceAccount token may live (`exp − iat`, or
    /// `warnafter − iat` for an extended projected token); `None`: any.
    pub max_lifetime_seconds: Option<u64>,
}

impl Default for TokenRules {
    fn default() -> Self {
        Self {
            issuer: "krayne".into(),
            audience: "krayne".into(),
            leeway_seconds: 30,
            subject_claim: "sub".into(),
            email_claim: "email".into(),
            groups_claim: "groups".into(),
            assume_email_verified: false,
            max_lifetime_seconds: None,
        }
    }
}

/// The identity a valid token carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenIdentity {
    /// Subject.
    pub subject: String,
    /// E-mail.
    pub email: Option<String>,
    /// Groups.
    pub groups: Vec<String>,
    /// When the token expires (Unix seconds, its `exp`).
    pub expires_at: Option<i64>,
    /// The issuer that signed it (its `iss`).
    pub issuer: String,
}

/// Why a token was refused; the client only ever sees `public()`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// No usable `Authorization: Bearer` header.
    #[error("missing bearer token")]
    Missing,
    /// Past `exp`.
    #[error("token expired")]
    Expired,
    /// Anything else, with the detail for logs.
    #[error("invalid token: {0}")]
    Invalid(String),
}

impl TokenError {
    /// What a client may be told.
    pub fn public(&self) -> AuthFailure {
        match self {
            Self::Missing => AuthFailure::MissingToken,
            Self::Expired => AuthFailure::ExpiredToken,
            Self::Invalid(_) => AuthFailure::InvalidToken,
        }
    }
}

/// Checks tokens against the trusted issuers: the token's `iss` picks the
/// issuer, and only that issuer's keys, audience and claim mapping apply.
#[derive(Clone)]
pub struct Verifier {
    issuers: Vec<Issuer>,
}

impl Verifier {
    /// A verifier trusting one issuer of accounts: `keys` under `rules`.
    pub fn new(keys: Vec<VerifyingKey>, rules: TokenRules) -> Self {
        Self::with_issuers(vec![Issuer::new(IssuerKind::Accounts, keys, rules)])
    }

    /// A verifier trusting each of `issuers`.
    pub fn with_issuers(issuers: Vec<Issuer>) -> Self {
        Self { issuers }
    }

    /// Also trusts `issuer`.
    pub fn and(mut self, issuer: Issuer) -> Self {
        self.issuers.push(issuer);
        self
    }

    /// The trusted issuers.
    pub fn issuers(&self) -> &[Issuer] {
        &self.issuers
    }

    /// Verifies `Authorization` header text (`Bearer <jwt>`). The scheme
    /// is case-insensitive and may be followed by any run of spaces or
    /// tabs (RFC 9110 §11.1, §11.6.2).
    pub async fn verify_header(&self, header: Option<&str>) -> Result<TokenIdentity, TokenError> {
        let value = header.ok_or(TokenError::Missing)?;
        if value.len() > MAX_TOKEN_BYTES + 16 {
            return Err(TokenError::Invalid(format!(
                "authorization longer than {MAX_TOKEN_BYTES} bytes"
            )));
        }
        let token =
            bearer_token(value).ok_or_else(|| TokenError::Invalid("authorization is not a bearer token".into()))?;
        self.verify(token).await
    }

    /// Verifies a compact JWT.
    pub async fn verify(&self, token: &str) -> Result<TokenIdentity, TokenError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(TokenError::Invalid(format!(
                "token longer than {MAX_TOKEN_BYTES} bytes"
            )));
        }
        let header = decode_header(token).map_err(|e| TokenError::Invalid(format!("header: {}", why(&e))))?;
        // Only to pick the issuer: the chosen issuer's keys check it all.
        let claims: Value = jsonwebtoken::dangerous::insecure_decode_claims(token)
            .map_err(|e| TokenError::Invalid(format!("claims: {}", why(&e))))?;
        let iss = claims
            .get("iss")
            .and_then(Value::as_str)
            .ok_or_else(|| TokenError::Invalid("a required claim (exp, iss, aud) is missing".into()))?;
        let issuer = self
            .issuer(iss)
            .await
            .ok_or_else(|| TokenError::Invalid("not from a trusted issuer".into()))?;
        issuer.verify(token, iss, &header).await
    }

    /// The issuer whose `iss` is `iss`: a configured name first, then a
    /// name learned by discovery (asked only when no configured one fits,
    /// so an unreachable issuer never delays another's tokens).
    async fn issuer(&self, iss: &str) -> Option<&Issuer> {
        if let Some(found) = self.issuers.iter().find(|i| i.named() == Some(iss)) {
            return Some(found);
        }
        for issuer in self.issuers.iter().filter(|i| i.named().is_none()) {
            if issuer.name().await.as_deref() == Some(iss) {
                return Some(issuer);
            }
        }
        None
    }
}

/// The token of a `Bearer` authorization value: the scheme in any case,
/// then one or more spaces or tabs, then a non-empty token without
/// whitespace.
fn bearer_token(value: &str) -> Option<&str> {
    let value = value.trim_matches([' ', '\t']);
    let split = value.find([' ', '\t'])?;
    let (scheme, rest) = value.split_at(split);
    let token = rest.trim_start_matches([' ', '\t']);
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty() && !token.contains([' ', '\t'])).then_some(token)
}

/// Why jsonwebtoken refused a token, in words of our own: its messages
/// quote the token (an unknown `alg` value, a JSON error's input), and a
/// token's text must never reach a log line or an audit row.
pub(super) fn why(e: &jsonwebtoken::errors::Error) -> &'static str {
    use jsonwebtoken::errors::ErrorKind as K;
    match e.kind() {
        K::InvalidToken => "not three base64url parts",
        K::InvalidSignature => "bad signature",
        K::InvalidAlgorithmName | K::UnsupportedAlgorithm | K::InvalidAlgorithm | K::MissingAlgorithm => {
            "algorithm not accepted"
        }
        K::MissingRequiredClaim(_) => "a required claim (exp, iss, aud) is missing",
        K::InvalidClaimFormat(_) => "a claim has the wrong type",
        K::ExpiredSignature => "expired",
        K::InvalidIssuer => "wrong issuer",
        K::InvalidAudience => "wrong audience",
        K::InvalidSubject => "wrong subject",
        K::ImmatureSignature => "not valid yet (nbf)",
        K::Base64(_) => "not base64url",
        K::Json(_) => "not JSON of a JWT's shape",
        K::Utf8(_) => "not UTF-8",
        _ => "not verifiable with the configured keys",
    }
}

/// Claims of a minted development token.
#[derive(Debug, Serialize)]
struct MintClaims<'a> {
    sub: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    email: Option<&'a str>,
    /// krayne vouches for the e-mails of the tokens it mints.
    #[serde(skip_serializing_if = "Option::is_none")]
    email_verified: Option<bool>,
    groups: &'a [String],
    iss: &'a str,
    aud: &'a str,
    iat: i64,
    nbf: i64,
    exp: i64,
}

/// What to put in a development token.
#[derive(Debug, Clone)]
pub struct MintRequest {
    /// Subject.
    pub subject: String,
    /// E-mail.
    pub email: Option<String>,
    /// Groups.
    pub groups: Vec<String>,
    /// Lifetime in seconds.
    pub ttl_seconds: i64,
    /// Issuer.
    pub issuer: String,
    /// Audience.
    pub audience: String,
}

/// Signs a development token with an HS256 secret or a PEM private key.
pub fn mint(request: &MintRequest, algorithm: Algorithm, key: &[u8]) -> Result<String, String> {
    let encoding = match algorithm {
        Algorithm::HS256 => EncodingKey::from_secret(key),
        Algorithm::RS256 | Algorithm::PS256 => EncodingKey::from_rsa_pem(key).map_err(|e| e.to_string())?,
        Algorithm::ES256 | Algorithm::ES384 => EncodingKey::from_ec_pem(key).map_err(|e| e.to_string())?,
        Algorithm::EdDSA => EncodingKey::from_ed_pem(key).map_err(|e| e.to_string())?,
        other => return Err(format!("minting with {other:?} is not supported")),
    };
    let now = jiff::Timestamp::now().as_second();
    let claims = MintClaims {
        sub: &request.subject,
        email: request.email.as_deref(),
        email_verified: request.email.as_ref().map(|_| true),
        groups: &request.groups,
        iss: &request.issuer,
        aud: &request.audience,
        iat: now,
        nbf: now,
        exp: now + request.ttl_seconds,
    };
    encode(&Header::new(algorithm), &claims, &encoding).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn request(ttl: i64) -> MintRequest {
        MintRequest {
            subject: "alice".into(),
            email: Some("alice@example.com".into()),
            groups: vec!["ml".into(), "ml".into()],
            ttl_seconds: ttl,
            issuer: "krayne".into(),
            audience: "krayne".into(),
        }
    }

    fn verifier() -> Verifier {
        Verifier::new(vec![VerifyingKey::hs256(SECRET)], TokenRules::default())
    }

    #[tokio::test]
    async fn a_minted_token_verifies() {
        let token = mint(&request(60), Algorithm::HS256, SECRET).unwrap();
        let id = verifier()
            .verify_header(Some(&format!("Bearer {token}")))
            .await
            .unwrap();
        assert_eq!(id.subject, "alice");
        assert_eq!(id.email.as_deref(), Some("alice@example.com"));
        assert_eq!(id.groups, ["ml"]);
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive_and_spaces_may_repeat() {
        for ok in [
            "Bearer t",
            "bearer t",
            "BEARER t",
            "BeArEr   t",
            "Bearer\tt",
            " Bearer t ",
        ] {
            assert_eq!(bearer_token(ok), Some("t"), "{ok:?}");
        }
        for bad in ["Bearer", "Bearer ", "Basic t", "Bearert", "Bearer a b", "Bearer: t", ""] {
            assert_eq!(bearer_token(bad), None, "{bad:?}");
        }
    }

    #[tokio::test]
    async fn bad_tokens_are_refused_generically() {
        let v = verifier();
        assert_eq!(v.verify_header(None).await, Err(TokenError::Missing));
        assert_eq!(
            v.verify_header(Some("Basic abc")).await.unwrap_err().public(),
            AuthFailure::InvalidToken
        );
        let expired = mint(&request(-120), Algorithm::HS256, SECRET).unwrap();
        assert_eq!(v.verify(&expired).await, Err(TokenError::Expired));
        let other = mint(&request(60), Algorithm::HS256, b"another-secret-another-secret-xx").unwrap();
        assert_eq!(v.verify(&other).await.unwrap_err().public(), AuthFailure::InvalidToken);
        let mut wrong_aud = request(60);
        wrong_aud.audience = "else".into();
        assert!(
            v.verify(&mint(&wrong_aud, Algorithm::HS256, SECRET).unwrap())
                .await
                .is_err()
        );
        assert!(v.verify(&"x".repeat(MAX_TOKEN_BYTES + 1)).await.is_err());
        // Header parse errors never quote the token: an `alg` with a newline
        // and ESC (base64url of {"alg":"x\n\u001b[31mFORGED"}).
        let forged = "eyJhbGciOiJ4XG5cdTAwMWJbMzFtRk9SR0VEIn0.e30.c2ln";
        let e = v.verify(forged).await.unwrap_err().to_string();
        assert!(
            !e.contains("FORGED") && !e.contains('\n') && !e.contains('\u{1b}'),
            "{e}"
        );
        // alg "none": header {"alg":"none"}, no signature.
        let none = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJtYWxsb3J5In0.";
        assert!(v.verify(none).await.is_err());
    }
}
