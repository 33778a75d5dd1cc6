//! Ray's token authentication for the clusters krayne creates.
//!
//! A head's dashboard (Jobs API: code execution) listens on every address
//! of its pod; where the network plugin does not enforce NetworkPolicies,
//! every pod could reach it. Ray ≥ 2.52 can require a static token
//! (`RAY_AUTH_MODE=token`), which KubeRay sets up from a RayCluster's
//! `spec.authOptions` and a Secret. krayne derives each cluster's token
//! from a key every replica shares and the cluster's identity (namespace,
//! name and a nonce chosen at creation, kept in an annotation), so no
//! replica ever reads a Secret, and a cluster re-created under the same
//! name gets a new token.

use std::fmt;

use hmac::{Hmac, KeyInit as _, Mac as _};
use sha2::Sha256;

/// The fewest bytes a key may have.
pub const MIN_KEY_BYTES: usize = 32;
/// The key of the Secret's data KubeRay reads the token from.
pub const SECRET_TOKEN_KEY: &str = "auth_token";
/// The header krayne sends a head its token in (meant for proxies; the
/// `Authorization` header stays the caller's business and is dropped).
pub const RAY_AUTH_HEADER: &str = "x-ray-authorization";
/// The cookie a browser may carry a Ray token in (the dashboard's login
/// page sets it); never forwarded from a caller.
pub const RAY_AUTH_COOKIE: &str = "ray-authentication-token";

/// The key tokens are derived with (as HMAC-SHA256 keyed with it); never
/// printed.
#[derive(Clone)]
pub struct RayAuthKey(Hmac<Sha256>);

impl RayAuthKey {
    /// A key from its bytes (a file's contents, trimmed of surrounding
    /// whitespace).
    ///
    /// # Errors
    /// When it has fewer than [`MIN_KEY_BYTES`] bytes.
    pub fn new(bytes: &[u8]) -> Result<Self, String> {
        let trimmed = bytes.trim_ascii();
        if trimmed.len() < MIN_KEY_BYTES {
            return Err(format!(
                "the Ray token key has {} bytes; it needs at least {MIN_KEY_BYTES}",
                trimmed.len()
            ));
        }
        Hmac::<Sha256>::new_from_slice(trimmed)
            .map(Self)
            .map_err(|e| format!("the Ray token key: {e}"))
    }

    /// The token of cluster `namespace/name` created with `nonce`.
    pub fn token(&self, namespace: &str, name: &str, nonce: &str) -> RayToken {
        RayToken(self.mac("krayne-ray-token/v1", namespace, name, nonce))
    }

    /// What the name of that cluster's token Secret ends with: derived
    /// too, so whoever may edit a cluster (its nonce annotation) cannot
    /// point krayne's writes at a Secret of their choosing.
    pub fn secret_suffix(&self, namespace: &str, name: &str, nonce: &str) -> String {
        let mut mac = self.mac("krayne-ray-token-secret/v1", namespace, name, nonce);
        mac.truncate(10);
        mac
    }

    /// HMAC over `label` and the cluster's identity, each part framed by
    /// its length (no two identities share a message), as hex.
    fn mac(&self, label: &str, namespace: &str, name: &str, nonce: &str) -> String {
        let mut mac = self.0.clone();
        for part in [label, namespace, name, nonce] {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part.as_bytes());
        }
        hex::encode(mac.finalize().into_bytes())
    }
}

impl fmt::Debug for RayAuthKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RayAuthKey(…)")
    }
}

/// One cluster's Ray token; never printed, logged or audited.
#[derive(Clone, PartialEq, Eq)]
pub struct RayToken(String);

impl RayToken {
    /// The token itself, for the header, the Secret and the credentials
    /// answer.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The header value a head takes it in.
    pub fn bearer(&self) -> String {
        format!("Bearer {}", self.0)
    }
}

impl fmt::Debug for RayToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RayToken(…)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> RayAuthKey {
        RayAuthKey::new(b"0123456789abcdef0123456789abcdef\n").unwrap()
    }

    #[test]
    fn short_keys_are_refused() {
        assert!(RayAuthKey::new(b"  short  ").unwrap_err().contains("5 bytes"));
    }

    #[test]
    fn a_token_is_bound_to_the_clusters_identity() {
        let k = key();
        let t = k.token("ml", "demo", "n1");
        assert_eq!(t, k.token("ml", "demo", "n1"), "every replica derives the same");
        assert_eq!(t.expose().len(), 64);
        for other in [
            k.token("ml", "demo", "n2"),
            k.token("ml", "demo2", "n1"),
            k.token("ml2", "demo", "n1"),
            // Lengths are framed: no two identities share a message.
            k.token("mld", "emo", "n1"),
        ] {
            assert_ne!(t, other);
        }
        let other_key = RayAuthKey::new(b"fedcba9876543210fedcba9876543210").unwrap();
        assert_ne!(t, other_key.token("ml", "demo", "n1"));
        let suffix = k.secret_suffix("ml", "demo", "n1");
        assert_eq!(suffix.len(), 10);
        assert!(
            !t.expose().starts_with(&suffix),
            "the Secret's name tells nothing of the token"
        );
        assert_ne!(suffix, k.secret_suffix("ml", "demo", "n2"));
    }

    #[test]
    fn neither_key_nor_token_is_printed() {
        let k = key();
        let t = k.token("ml", "demo", "n1");
        assert_eq!(format!("{k:?} {t:?}"), "RayAuthKey(…) RayToken(…)");
        assert_eq!(t.bearer(), format!("Bearer {}", t.expose()));
    }
}
