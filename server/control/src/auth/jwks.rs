//! Keys from a JWKS URL (or an OIDC issuer's discovery document): fetched
//! with a timeout, cached for a TTL, refetched when a token names an
//! unknown `kid` (at most once per cooldown), and kept when the issuer is
//! down, so a brief outage does not lock everyone out.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use jsonwebtoken::{
    Algorithm, DecodingKey,
    jwk::{AlgorithmParameters, EllipticCurve, JwkSet},
};

use super::VerifyingKey;
use crate::domain::IssuerDocuments;

/// Where keys come from and how often to look.
#[derive(Debug, Clone)]
pub struct JwksOptions {
    /// The JWKS URL, or the issuer URL when `discover` is set.
    pub url: String,
    /// Find the JWKS URL through `<url>/.well-known/openid-configuration`.
    pub discover: bool,
    /// Algorithms accepted from this source.
    pub algorithms: Vec<Algorithm>,
    /// How long a fetched set is fresh.
    pub ttl: Duration,
    /// Least time between two fetches.
    pub cooldown: Duration,
    /// Timeout of one fetch.
    pub timeout: Duration,
}

#[derive(Default)]
struct Cache {
    keys: Vec<VerifyingKey>,
    /// The `issuer` of the discovery document, once read.
    issuer: Option<String>,
    fetched: Option<Instant>,
    attempted: Option<Instant>,
}

/// Documents fetched over HTTP(S) with a timeout.
pub struct HttpDocuments {
    http: reqwest::Client,
}

impl HttpDocuments {
    /// A fetcher giving up on a document after `timeout`.
    pub fn new(timeout: Duration) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| format!("JWKS client: {e}"))?;
        Ok(Self { http })
    }
}

#[async_trait::async_trait]
impl IssuerDocuments for HttpDocuments {
    async fn get_json(&self, url: &str) -> Result<serde_json::Value, String> {
        let res = self.http.get(url).send().await.map_err(|e| format!("{url}: {e}"))?;
        if !res.status().is_success() {
            return Err(format!("{url}: HTTP {}", res.status()));
        }
        res.json().await.map_err(|e| format!("{url}: {e}"))
    }
}

/// A JWKS endpoint and its cached keys.
pub struct JwksSource {
    options: JwksOptions,
    documents: Arc<dyn IssuerDocuments>,
    cache: Mutex<Cache>,
}

impl JwksSource {
    /// A source that fetches over HTTP(S) on first use.
    pub fn new(options: JwksOptions) -> Result<Self, String> {
        let documents = Arc::new(HttpDocuments::new(options.timeout)?);
        Ok(Self::with_documents(options, documents))
    }

    /// A source that fetches through `documents` on first use.
    pub fn with_documents(options: JwksOptions, documents: Arc<dyn IssuerDocuments>) -> Self {
        Self {
            options,
            documents,
            cache: Mutex::new(Cache::default()),
        }
    }

    /// The `issuer` its discovery document names (fetched when not yet
    /// known, within the cooldown); `None` without discovery or while the
    /// issuer cannot be reached.
    pub async fn discovered_issuer(&self) -> Option<String> {
        if !self.options.discover {
            return None;
        }
        if let Some(issuer) = self.cache().issuer.clone() {
            return Some(issuer);
        }
        self.keys(None).await;
        self.cache().issuer.clone()
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keys that may verify a token with this `kid`: refreshed first when
    /// the set is stale or lacks the `kid`, unless fetched too recently.
    pub async fn keys(&self, kid: Option<&str>) -> Vec<VerifyingKey> {
        let refresh = {
            let c = self.cache();
            let stale = c.fetched.is_none_or(|t| t.elapsed() >= self.options.ttl);
            let unknown = kid.is_some_and(|k| !c.keys.iter().any(|key| key.kid.as_deref() == Some(k)));
            let cooled = c.attempted.is_none_or(|t| t.elapsed() >= self.options.cooldown);
            (stale || unknown) && cooled
        };
        if refresh {
            self.cache().attempted = Some(Instant::now());
            match self.fetch().await {
                Ok((keys, issuer)) => {
                    tracing::info!(url = %self.options.url, keys = keys.len(), "fetched signing keys");
                    metrics::counter!("krayne_jwks_fetches_total", "outcome" => "ok").increment(1);
                    let mut c = self.cache();
                    c.keys = keys;
                    c.issuer = issuer.or(c.issuer.take());
                    c.fetched = Some(Instant::now());
                }
                Err(e) => {
                    metrics::counter!("krayne_jwks_fetches_total", "outcome" => "error").increment(1);
                    tracing::warn!(url = %self.options.url, error = %e, "could not fetch signing keys; keeping the last good set");
                }
            }
        }
        self.cache().keys.clone()
    }

    /// The usable keys, and the discovery document's `issuer` when one
    /// was read.
    async fn fetch(&self) -> Result<(Vec<VerifyingKey>, Option<String>), String> {
        let (url, issuer) = if self.options.discover {
            let doc = format!(
                "{}/.well-known/openid-configuration",
                self.options.url.trim_end_matches('/')
            );
            let discovery = self.documents.get_json(&doc).await?;
            let jwks_uri = discovery["jwks_uri"]
                .as_str()
                .ok_or("the discovery document has no jwks_uri")?
                .to_owned();
            let issuer = discovery["issuer"]
                .as_str()
                .filter(|i| !i.is_empty())
                .ok_or("the discovery document has no issuer")?
                .to_owned();
            (jwks_uri, Some(issuer))
        } else {
            (self.options.url.clone(), None)
        };
        let set: JwkSet =
            serde_json::from_value(self.documents.get_json(&url).await?).map_err(|e| format!("not a JWK set: {e}"))?;
        Ok((set.keys.iter().flat_map(|jwk| self.usable(jwk)).collect(), issuer))
    }

    /// The (key, algorithm) pairs a JWK may be used as: its own `alg` when
    /// it names one, else every configured algorithm its key type fits.
    fn usable(&self, jwk: &jsonwebtoken::jwk::Jwk) -> Vec<VerifyingKey> {
        let Ok(key) = DecodingKey::from_jwk(jwk) else {
            return Vec::new();
        };
        let fits = |alg: &Algorithm| match (&jwk.algorithm, alg) {
            (AlgorithmParameters::RSA(_), a) => {
                matches!(
                    a,
                    Algorithm::RS256
                        | Algorithm::RS384
                        | Algorithm::RS512
                        | Algorithm::PS256
                        | Algorithm::PS384
                        | Algorithm::PS512
                )
            }
            (AlgorithmParameters::EllipticCurve(p), Algorithm::ES256) => p.curve == EllipticCurve::P256,
            (AlgorithmParameters::EllipticCurve(p), Algorithm::ES384) => p.curve == EllipticCurve::P384,
            (AlgorithmParameters::OctetKeyPair(_), Algorithm::EdDSA) => true,
            _ => false,
        };
        let declared = jwk
            .common
            .key_algorithm
            .and_then(|a| a.to_string().parse::<Algorithm>().ok());
        self.options
            .algorithms
            .iter()
            .filter(|a| fits(a) && declared.is_none_or(|d| d == **a))
            .map(|a| VerifyingKey {
                kid: jwk.common.key_id.clone(),
                algorithm: *a,
                key: key.clone(),
            })
            .collect()
    }
}
