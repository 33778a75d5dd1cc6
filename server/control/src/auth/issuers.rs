//! The issuers a server trusts, each pinned to its own keys, audience and
//! claim mapping: a token is checked only by the issuer its `iss` names.

use std::{collections::HashSet, sync::Arc};

use jsonwebtoken::{Validation, decode};
use serde_json::Value;

use super::{
    Reviewer,
    jwks::JwksSource,
    tokens::{TokenError, TokenIdentity, TokenRules, VerifyingKey, why},
};

/// Whose identities an issuer vouches for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IssuerKind {
    /// People (or anything else an identity provider signs in). Subjects,
    /// e-mails and groups starting with `system:` are Kubernetes' and
    /// refused (groups dropped), so nobody at the identity provider can
    /// pass as a ServiceAccount; an e-mail counts only when the provider
    /// says it is verified (`email_verified: true`), unless the issuer is
    /// configured to assume so.
    Accounts,
    /// The Kubernetes API server's service-account issuer: the subject is
    /// `system:serviceaccount:<namespace>:<name>`, and the groups are the
    /// ones Kubernetes gives every ServiceAccount (`system:serviceaccounts`
    /// and `system:serviceaccounts:<namespace>`).
    ServiceAccounts,
}

/// The prefix of identities only Kubernetes' issuer may vouch for.
const RESERVED_PREFIX: &str = "system:";

/// One trusted issuer.
#[derive(Clone)]
pub struct Issuer {
    kind: IssuerKind,
    keys: Vec<VerifyingKey>,
    jwks: Option<Arc<JwksSource>>,
    rules: TokenRules,
    /// Kubernetes' word on each token (ServiceAccounts of the cluster
    /// krayne runs in).
    reviewer: Option<Arc<Reviewer>>,
}

impl Issuer {
    /// An issuer whose tokens carry `rules.issuer` as `iss` and are signed
    /// by one of `keys`. An empty `rules.issuer` is learned from the
    /// discovery document of a JWKS source added with [`Issuer::with_jwks`].
    pub fn new(kind: IssuerKind, keys: Vec<VerifyingKey>, rules: TokenRules) -> Self {
        Self {
            kind,
            keys,
            jwks: None,
            rules,
            reviewer: None,
        }
    }

    /// Also asks `reviewer` whether Kubernetes still takes each token
    /// (a deleted ServiceAccount's tokens are then refused).
    pub fn with_reviewer(mut self, reviewer: Reviewer) -> Self {
        self.reviewer = Some(Arc::new(reviewer));
        self
    }

    /// Also accepts keys from `jwks`.
    pub fn with_jwks(mut self, jwks: JwksSource) -> Self {
        self.jwks = Some(Arc::new(jwks));
        self
    }

    /// Whose identities it vouches for.
    pub fn kind(&self) -> IssuerKind {
        self.kind
    }

    /// Its `iss`, as configured or (for one learned by discovery) as its
    /// discovery document names it; `None` while that cannot be read.
    pub async fn name(&self) -> Option<String> {
        if !self.rules.issuer.is_empty() {
            return Some(self.rules.issuer.clone());
        }
        self.jwks.as_ref()?.discovered_issuer().await
    }

    /// Whether its `iss` is fixed by configuration.
    pub fn named(&self) -> Option<&str> {
        Some(self.rules.issuer.as_str()).filter(|i| !i.is_empty())
    }

    /// Verifies `token` (whose unverified `iss` is `iss`) with this
    /// issuer's keys only.
    pub(super) async fn verify(
        &self,
        token: &str,
        iss: &str,
        header: &jsonwebtoken::Header,
    ) -> Result<TokenIdentity, TokenError> {
        let mut keys = self.keys.clone();
        if let Some(jwks) = &self.jwks {
            keys.extend(jwks.keys(header.kid.as_deref()).await);
        }
        // The token's `alg` only selects among configured keys; it never
        // chooses how a key is used.
        let candidates: Vec<&VerifyingKey> = keys
            .iter()
            .filter(|k| k.algorithm == header.alg)
            .filter(|k| match (&k.kid, &header.kid) {
                (Some(want), Some(got)) => want == got,
                _ => true,
            })
            .collect();
        if candidates.is_empty() {
            // The kid is the token's text: never echoed (finding 3).
            return Err(TokenError::Invalid(format!(
                "no key of its issuer for alg {:?} and the token's kid",
                header.alg
            )));
        }
        let mut last = TokenError::Invalid("no key verified the token".into());
        for key in candidates {
            let mut v = Validation::new(key.algorithm);
            v.leeway = self.rules.leeway_seconds.min(60);
            v.validate_nbf = true;
            v.set_issuer(&[iss]);
            v.set_audience(&[&self.rules.audience]);
            v.set_required_spec_claims(&["exp", "iss", "aud"]);
            match decode::<Value>(token, &key.key, &v) {
                Ok(data) => {
                    let identity = self.identity(&data.claims, iss)?;
                    if let Some(reviewer) = &self.reviewer {
                        reviewer.check(token, &self.rules.audience).await?;
                    }
                    return Ok(identity);
                }
                Err(e) if matches!(e.kind(), jsonwebtoken::errors::ErrorKind::ExpiredSignature) => {
                    return Err(TokenError::Expired);
                }
                Err(e) => last = TokenError::Invalid(why(&e).to_owned()),
            }
        }
        Err(last)
    }

    fn identity(&self, claims: &Value, iss: &str) -> Result<TokenIdentity, TokenError> {
        if let Some(iat) = claims.get("iat").and_then(Value::as_i64) {
            let now = jiff::Timestamp::now().as_second();
            if iat > now + i64::try_from(self.rules.leeway_seconds.min(60)).unwrap_or(60) {
                return Err(TokenError::Invalid("issued in the future".into()));
            }
        }
        let expires_at = claims.get("exp").and_then(Value::as_i64);
        let (subject, email, groups) = match self.kind {
            IssuerKind::Accounts => self.account(claims)?,
            IssuerKind::ServiceAccounts => {
                self.lifetime_within_bounds(claims)?;
                service_account(claims)?
            }
        };
        let mut seen = HashSet::new();
        let groups = groups.into_iter().filter(|g| seen.insert(g.clone())).collect();
        Ok(TokenIdentity {
            subject,
            email,
            groups,
            expires_at,
            issuer: iss.to_owned(),
        })
    }

    /// A ServiceAccount token lives at most the issuer's longest lifetime:
    /// its `exp` less its `iat`, or — for a projected token the API server
    /// extends (`kubernetes.io.warnafter`) — until its holder should have
    /// rotated it.
    fn lifetime_within_bounds(&self, claims: &Value) -> Result<(), TokenError> {
        let Some(most) = self.rules.max_lifetime_seconds else {
            return Ok(());
        };
        let at = |claim: &str| claims.get(claim).and_then(Value::as_i64);
        let until = claims
            .pointer("/kubernetes.io/warnafter")
            .and_then(Value::as_i64)
            .or_else(|| at("exp"));
        let (Some(iat), Some(until)) = (at("iat"), until) else {
            return Err(TokenError::Invalid("a ServiceAccount token without iat and exp".into()));
        };
        if until.saturating_sub(iat) > i64::try_from(most).unwrap_or(i64::MAX) {
            return Err(TokenError::Invalid(format!(
                "a ServiceAccount token living longer than this server takes ({most} s)"
            )));
        }
        Ok(())
    }

    fn account(&self, claims: &Value) -> Result<(String, Option<String>, Vec<String>), TokenError> {
        let subject = claims
            .get(&self.rules.subject_claim)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| TokenError::Invalid(format!("no {:?} claim", self.rules.subject_claim)))?
            .to_owned();
        if subject.starts_with(RESERVED_PREFIX) {
            return Err(TokenError::Invalid(format!(
                "a {RESERVED_PREFIX:?} subject from an issuer that is not Kubernetes'"
            )));
        }
        let email = claims
            .get(&self.rules.email_claim)
            .and_then(Value::as_str)
            .map(str::to_owned);
        if email.as_deref().is_some_and(|e| e.starts_with(RESERVED_PREFIX)) {
            return Err(TokenError::Invalid(format!(
                "a {RESERVED_PREFIX:?} e-mail from an issuer that is not Kubernetes'"
            )));
        }
        let verified = self.rules.assume_email_verified || claims.get("email_verified") == Some(&Value::Bool(true));
        let email = email.filter(|_| verified);
        let groups = match claims.get(&self.rules.groups_claim) {
            Some(Value::String(g)) => vec![g.clone()],
            Some(Value::Array(gs)) => gs.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
            _ => Vec::new(),
        };
        let groups = groups.into_iter().filter(|g| !g.starts_with(RESERVED_PREFIX)).collect();
        Ok((subject, email, groups))
    }
}

/// A ServiceAccount token's identity, as the API server derives it: the
/// subject names the namespace and account its `kubernetes.io` claim names.
fn service_account(claims: &Value) -> Result<(String, Option<String>, Vec<String>), TokenError> {
    let subject = claims.get("sub").and_then(Value::as_str).unwrap_or_default();
    let k8s = claims.get("kubernetes.io");
    let namespace = k8s
        .and_then(|k| k.get("namespace"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let name = k8s
        .and_then(|k| k.pointer("/serviceaccount/name"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    if namespace.is_empty() || name.is_empty() || subject != format!("system:serviceaccount:{namespace}:{name}") {
        return Err(TokenError::Invalid(
            "not a ServiceAccount token (its subject and kubernetes.io claim disagree)".into(),
        ));
    }
    let groups = vec![
        "system:serviceaccounts".to_owned(),
        format!("system:serviceaccounts:{namespace}"),
    ];
    Ok((subject.to_owned(), None, groups))
}

#[cfg(test)]
mod tests {
    use jsonwebtoken::{EncodingKey, Header, encode};
    use serde_json::json;

    use super::*;
    use crate::auth::Verifier;

    const PEOPLE_KEY: &[u8] = b"people-people-people-people-people";
    const CLUSTER_KEY: &[u8] = b"cluster-cluster-cluster-cluster-cl";

    fn rules(issuer: &str) -> TokenRules {
        TokenRules {
            issuer: issuer.into(),
            ..TokenRules::default()
        }
    }

    fn verifier() -> Verifier {
        Verifier::with_issuers(vec![
            Issuer::new(
                IssuerKind::Accounts,
                vec![VerifyingKey::hs256(PEOPLE_KEY)],
                rules("https://idp"),
            ),
            Issuer::new(
                IssuerKind::ServiceAccounts,
                vec![VerifyingKey::hs256(CLUSTER_KEY)],
                rules("https://k8s"),
            ),
        ])
    }

    fn sign(key: &[u8], claims: Value) -> String {
        let now = jiff::Timestamp::now().as_second();
        let mut c = json!({"aud": "krayne", "iat": now, "exp": now + 60});
        for (k, v) in claims.as_object().into_iter().flatten() {
            c[k] = v.clone();
        }
        encode(&Header::default(), &c, &EncodingKey::from_secret(key)).unwrap()
    }

    fn account(ns: &str, name: &str) -> Value {
        json!({"iss": "https://k8s", "sub": format!("system:serviceaccount:{ns}:{name}"),
               "kubernetes.io": {"namespace": ns, "serviceaccount": {"name": name, "uid": "u"}}})
    }

    #[tokio::test]
    async fn each_issuer_checks_only_its_own_tokens_with_its_own_keys() {
        let v = verifier();
        let person = v
            .verify(&sign(
                PEOPLE_KEY,
                json!({"iss": "https://idp", "sub": "alice", "groups": ["ml"]}),
            ))
            .await
            .unwrap();
        assert_eq!(
            (person.subject.as_str(), person.issuer.as_str()),
            ("alice", "https://idp")
        );
        let pipeline = v.verify(&sign(CLUSTER_KEY, account("batch", "trainer"))).await.unwrap();
        assert_eq!(pipeline.subject, "system:serviceaccount:batch:trainer");
        assert_eq!(
            pipeline.groups,
            ["system:serviceaccounts", "system:serviceaccounts:batch"]
        );
        assert_eq!(pipeline.email, None);
        // The people's key cannot sign for the cluster's issuer, nor the
        // reverse; an unknown issuer is nobody's.
        assert!(v.verify(&sign(PEOPLE_KEY, account("batch", "trainer"))).await.is_err());
        assert!(
            v.verify(&sign(CLUSTER_KEY, json!({"iss": "https://idp", "sub": "alice"})))
                .await
                .is_err()
        );
        assert!(
            v.verify(&sign(PEOPLE_KEY, json!({"iss": "https://else", "sub": "alice"})))
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn only_kubernetes_vouches_for_system_identities() {
        let v = verifier();
        let forged = sign(
            PEOPLE_KEY,
            json!({"iss": "https://idp", "sub": "system:serviceaccount:batch:trainer"}),
        );
        assert!(v.verify(&forged).await.is_err());
        let grouped = sign(
            PEOPLE_KEY,
            json!({"iss": "https://idp", "sub": "bob", "groups": ["system:masters", "ml"]}),
        );
        assert_eq!(v.verify(&grouped).await.unwrap().groups, ["ml"]);
        // A ServiceAccount token whose subject and kubernetes.io claim disagree.
        let mut odd = account("batch", "trainer");
        odd["sub"] = json!("system:serviceaccount:other:trainer");
        assert!(v.verify(&sign(CLUSTER_KEY, odd)).await.is_err());
    }

    /// Reliability 29d (issue 53, item 4).
    #[tokio::test]
    async fn an_email_is_an_identity_only_when_verified_and_never_kubernetes() {
        let v = verifier();
        let posing = sign(
            PEOPLE_KEY,
            json!({"iss": "https://idp", "sub": "mallory", "email": "system:serviceaccount:ml-team:default",
                   "email_verified": true}),
        );
        assert!(v.verify(&posing).await.is_err(), "a system: e-mail");
        let unverified = sign(
            PEOPLE_KEY,
            json!({"iss": "https://idp", "sub": "mallory", "email": "alice@example.com"}),
        );
        assert_eq!(v.verify(&unverified).await.unwrap().email, None);
        let said_false = sign(
            PEOPLE_KEY,
            json!({"iss": "https://idp", "sub": "mallory", "email": "alice@example.com", "email_verified": "true"}),
        );
        assert_eq!(v.verify(&said_false).await.unwrap().email, None, "a string is not true");
        let verified = sign(
            PEOPLE_KEY,
            json!({"iss": "https://idp", "sub": "alice", "email": "alice@example.com", "email_verified": true}),
        );
        assert_eq!(
            v.verify(&verified).await.unwrap().email.as_deref(),
            Some("alice@example.com")
        );
        let assumed = Verifier::with_issuers(vec![Issuer::new(
            IssuerKind::Accounts,
            vec![VerifyingKey::hs256(PEOPLE_KEY)],
            TokenRules {
                assume_email_verified: true,
                ..rules("https://idp")
            },
        )]);
        assert_eq!(
            assumed.verify(&unverified).await.unwrap().email.as_deref(),
            Some("alice@example.com")
        );
    }
}
