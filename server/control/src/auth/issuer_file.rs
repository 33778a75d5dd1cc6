//! `--issuers-file`: more issuers to trust, each with its own audience,
//! keys, algorithms and claim mapping.

use std::time::Duration;

use jsonwebtoken::Algorithm;
use serde::Deserialize;

use super::{
    issuers::{Issuer, IssuerKind},
    jwks::{JwksOptions, JwksSource},
    tokens::TokenRules,
};

/// One entry of the file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IssuerSpec {
    /// The tokens' `iss`; its discovery document names the key set unless
    /// `jwks_url` does.
    pub issuer: String,
    /// What `aud` must contain: for an identity provider's ID tokens, the
    /// client id `krayne login` uses.
    pub audience: String,
    /// The key set's URL, when the issuer publishes no discovery document.
    #[serde(default)]
    pub jwks_url: Option<String>,
    /// Algorithms accepted (asymmetric only).
    #[serde(default = "default_algorithms")]
    pub algorithms: Vec<String>,
    /// Where the identity is in the token.
    #[serde(default)]
    pub claims: ClaimNames,
    /// Clock skew allowed, in seconds (at most 60).
    #[serde(default = "default_leeway")]
    pub leeway_seconds: u64,
    /// Whose identities it vouches for.
    #[serde(default)]
    pub kind: SpecKind,
    /// Take its e-mails as verified without `email_verified: true`: only
    /// for a provider that verifies every address it issues.
    #[serde(default)]
    pub assume_email_verified: bool,
    /// For `kind: service-accounts`: the longest a token may live, in
    /// seconds (default 24 h).
    #[serde(default = "default_max_token_seconds")]
    pub max_token_seconds: u64,
}

fn default_max_token_seconds() -> u64 {
    24 * 3600
}

/// Whose identities an issuer of the file vouches for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SpecKind {
    /// People and other accounts of an identity provider.
    #[default]
    Accounts,
    /// A Kubernetes cluster's ServiceAccounts, by an issuer reachable on
    /// its own (a managed cluster's public one, or another cluster's).
    ServiceAccounts,
}

/// The claims holding the subject, e-mail and groups.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClaimNames {
    /// Subject claim (default `sub`).
    pub subject: String,
    /// E-mail claim (default `email`).
    pub email: String,
    /// Groups claim, a string or a list (default `groups`).
    pub groups: String,
}

impl Default for ClaimNames {
    fn default() -> Self {
        Self {
            subject: "sub".into(),
            email: "email".into(),
            groups: "groups".into(),
        }
    }
}

fn default_algorithms() -> Vec<String> {
    vec!["RS256".into(), "ES256".into()]
}

fn default_leeway() -> u64 {
    30
}

/// How often key sets are fetched.
#[derive(Debug, Clone, Copy)]
pub struct KeyRefresh {
    /// How long a fetched set is fresh.
    pub ttl: Duration,
    /// Least time between two fetches.
    pub cooldown: Duration,
    /// Timeout of one fetch.
    pub timeout: Duration,
}

/// Reads the file's text: a YAML list of [`IssuerSpec`]s.
pub fn parse_issuers(text: &str) -> Result<Vec<IssuerSpec>, String> {
    let specs: Vec<IssuerSpec> = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
    for spec in &specs {
        if spec.issuer.trim().is_empty() || spec.audience.trim().is_empty() {
            return Err("every issuer needs an `issuer` and an `audience`".into());
        }
    }
    Ok(specs)
}

/// Asymmetric algorithms by name: a shared secret never comes from a key set.
pub fn asymmetric_algorithms(names: &[String]) -> Result<Vec<Algorithm>, String> {
    names
        .iter()
        .map(|name| {
            let alg: Algorithm = name.parse().map_err(|_| format!("unknown algorithm {name:?}"))?;
            if matches!(alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512) {
                return Err("shared-secret (HS*) algorithms cannot come from a JWKS".to_owned());
            }
            Ok(alg)
        })
        .collect()
}

impl IssuerSpec {
    /// The issuer it describes; its keys are fetched on first use.
    pub fn build(&self, refresh: KeyRefresh) -> Result<Issuer, String> {
        let what = |e: String| format!("issuer {}: {e}", self.issuer);
        let (url, discover) = match &self.jwks_url {
            Some(url) => (url.clone(), false),
            None => (self.issuer.clone(), true),
        };
        let source = JwksSource::new(JwksOptions {
            url,
            discover,
            algorithms: asymmetric_algorithms(&self.algorithms).map_err(what)?,
            ttl: refresh.ttl,
            cooldown: refresh.cooldown,
            timeout: refresh.timeout,
        })
        .map_err(what)?;
        let rules = TokenRules {
            issuer: self.issuer.clone(),
            audience: self.audience.clone(),
            leeway_seconds: self.leeway_seconds.min(60),
            subject_claim: self.claims.subject.clone(),
            email_claim: self.claims.email.clone(),
            groups_claim: self.claims.groups.clone(),
            assume_email_verified: self.assume_email_verified,
            max_lifetime_seconds: (self.kind == SpecKind::ServiceAccounts).then_some(self.max_token_seconds),
        };
        let kind = match self.kind {
            SpecKind::Accounts => IssuerKind::Accounts,
            SpecKind::ServiceAccounts => IssuerKind::ServiceAccounts,
        };
        Ok(Issuer::new(kind, Vec::new(), rules).with_jwks(source))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_issuers_file_reads_with_defaults_and_refuses_mistakes() {
        let specs = parse_issuers(
            "- issuer: https://login.example.com\n  audience: krayne-cli\n\
             - issuer: https://dex.example.com\n  audience: krayne\n  jwks_url: https://dex.example.com/keys\n  \
             claims: {subject: email, groups: roles}\n",
        )
        .unwrap();
        assert_eq!(specs.len(), 2);
        assert_eq!(specs[0].algorithms, ["RS256", "ES256"]);
        assert_eq!(specs[0].claims, ClaimNames::default());
        assert_eq!(specs[1].claims.subject, "email");
        assert_eq!(specs[1].claims.email, "email");
        assert_eq!(specs[0].kind, SpecKind::Accounts);
        let cluster = parse_issuers(
            "- issuer: https://oidc.eks.example.com/id/1\n  audience: krayne\n  kind: service-accounts\n",
        )
        .unwrap();
        assert_eq!(cluster[0].kind, SpecKind::ServiceAccounts);
        assert!(parse_issuers("- issuer: x\n  audience: y\n  kind: robots\n").is_err());
        assert!(parse_issuers("- issuer: x\n  audience: y\n  audiense: z\n").is_err());
        assert!(parse_issuers("- issuer: ''\n  audience: y\n").is_err());
        assert!(asymmetric_algorithms(&["HS256".into()]).is_err());
        assert!(asymmetric_algorithms(&["RS257".into()]).is_err());
    }
}
