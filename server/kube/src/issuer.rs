//! The cluster's service-account issuer documents (OpenID discovery and
//! its key set), read through the Kubernetes connection: the API server
//! serves them behind its own authentication, which krayne's ServiceAccount
//! passes (Kubernetes binds `system:service-account-issuer-discovery` to
//! every ServiceAccount).

use std::time::Duration;

use http::Request;

use crate::domain::{IssuerDocuments, TokenReviews};

/// [`IssuerDocuments`] from the API server krayne talks to.
#[derive(Clone)]
pub struct ClusterIssuerDocuments {
    client: kube::Client,
    timeout: Duration,
}

impl ClusterIssuerDocuments {
    /// Documents read through `client`, each given up after `timeout`.
    pub fn new(client: kube::Client, timeout: Duration) -> Self {
        Self { client, timeout }
    }
}

/// The path (and query) of `url`: the discovery document names its key
/// set by the API server's external address, which need not be the one
/// krayne reaches it at.
fn path_of(url: &str) -> String {
    match url.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or_else(|| "/".to_owned(), |i| rest[i..].to_owned()),
        None => url.to_owned(),
    }
}

#[async_trait::async_trait]
impl IssuerDocuments for ClusterIssuerDocuments {
    async fn get_json(&self, url: &str) -> Result<serde_json::Value, String> {
        let path = path_of(url);
        let request = Request::get(&path)
            .body(Vec::new())
            .map_err(|e| format!("{path}: {e}"))?;
        let text = tokio::time::timeout(self.timeout, self.client.request_text(request))
            .await
            .map_err(|_| format!("{path}: no answer from Kubernetes within {:?}", self.timeout))?
            .map_err(|e| format!("{path}: {e}"))?;
        serde_json::from_str(&text).map_err(|e| format!("{path}: not JSON: {e}"))
    }
}

/// [`TokenReviews`] by the API server krayne talks to: a `TokenReview`
/// (`authentication.k8s.io/v1`; RBAC `create` on `tokenreviews`).
#[derive(Clone)]
pub struct ClusterTokenReviews {
    client: kube::Client,
    timeout: Duration,
}

impl ClusterTokenReviews {
    /// Reviews asked through `client`, each given up after `timeout`.
    pub fn new(client: kube::Client, timeout: Duration) -> Self {
        Self { client, timeout }
    }
}

#[async_trait::async_trait]
impl TokenReviews for ClusterTokenReviews {
    async fn review(&self, token: &str, audience: &str) -> Result<bool, String> {
        use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
        let api: kube::Api<TokenReview> = kube::Api::all(self.client.clone());
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                audiences: Some(vec![audience.to_owned()]),
            },
            ..TokenReview::default()
        };
        let reviewed = tokio::time::timeout(self.timeout, api.create(&kube::api::PostParams::default(), &review))
            .await
            .map_err(|_| format!("no answer from Kubernetes within {:?}", self.timeout))?
            // The token is never in the error: kube's errors carry the
            // API server's status, not the request.
            .map_err(|e| format!("a TokenReview: {e}"))?;
        Ok(reviewed.status.and_then(|s| s.authenticated).unwrap_or(false))
    }
}

#[cfg(test)]
mod tests {
    use super::path_of;

    #[test]
    fn only_the_path_of_a_document_url_is_asked_for() {
        assert_eq!(path_of("https://10.0.0.1:6443/openid/v1/jwks"), "/openid/v1/jwks");
        assert_eq!(
            path_of("/.well-known/openid-configuration"),
            "/.well-known/openid-configuration"
        );
        assert_eq!(path_of("https://k/x?y=1"), "/x?y=1");
    }
}
