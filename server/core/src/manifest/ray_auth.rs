//! The objects of Ray's token authentication: the RayCluster's
//! `authOptions` and the Secret KubeRay gives its pods the token from,
//! owned by the cluster (it goes when the cluster goes). See
//! [`crate::domain::ray_auth`].

use base64::Engine as _;
use serde_json::{Value, json};

use super::{ANNOTATION_RAY_AUTH_NONCE, KUBERAY_API_VERSION, LABEL_CLUSTER, RAYCLUSTER_KIND};
use crate::domain::{
    ObservedCluster,
    ray_auth::{RayAuthKey, RayToken, SECRET_TOKEN_KEY},
};

/// The nonce of a dry run: nothing is created, so none is chosen.
pub const DRY_RUN_NONCE: &str = "dry-run";

/// The Secret holding the token of cluster `name` created with `nonce`:
/// each create its own name, so a create never touches the Secret of a
/// cluster that exists (two creates of one name, say).
pub fn ray_auth_secret_name(name: &str, nonce: &str) -> String {
    let short = nonce.get(..10).unwrap_or(nonce);
    format!("{name}-ray-auth-{short}")
}

/// `spec.authOptions` of a cluster krayne creates with token auth.
pub fn auth_options(name: &str, nonce: &str) -> Value {
    json!({"mode": "token", "secretName": ray_auth_secret_name(name, nonce)})
}

/// The Secret holding `token` for cluster `namespace/name` created with
/// `nonce`; owned by the cluster once its uid is known (`owner_uid`).
pub fn ray_auth_secret(namespace: &str, name: &str, nonce: &str, token: &RayToken, owner_uid: Option<&str>) -> Value {
    let mut metadata = json!({
        "name": ray_auth_secret_name(name, nonce),
        "namespace": namespace,
        "labels": {LABEL_CLUSTER: name, "app.kubernetes.io/managed-by": "krayne"},
    });
    if let Some(uid) = owner_uid {
        metadata["ownerReferences"] = json!([{
            "apiVersion": KUBERAY_API_VERSION,
            "kind": RAYCLUSTER_KIND,
            "name": name,
            "uid": uid,
        }]);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "type": "Opaque",
        "data": {SECRET_TOKEN_KEY: base64::engine::general_purpose::STANDARD.encode(token.expose())},
    })
}

/// How a cluster's Ray authenticates, as krayne can meet it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RayAuth {
    /// No token required.
    Open,
    /// krayne's token for it, and the Secret that holds it.
    Token {
        /// The token.
        token: RayToken,
        /// Its Secret's name.
        secret: String,
    },
    /// A token krayne cannot know: a cluster made elsewhere with its own
    /// Secret, or this server has no key.
    Unknown,
}

/// How `cluster` authenticates, and its token when krayne made it
/// (token mode, krayne's Secret and a nonce) and has `key`.
pub fn ray_auth_of(cluster: &ObservedCluster, key: Option<&RayAuthKey>) -> RayAuth {
    let options = &cluster.spec.auth_options;
    if options.mode.as_deref() != Some("token") {
        return RayAuth::Open;
    }
    let meta = &cluster.metadata;
    let (Some(key), Some(nonce)) = (key, meta.annotations.get(ANNOTATION_RAY_AUTH_NONCE)) else {
        return RayAuth::Unknown;
    };
    let secret = ray_auth_secret_name(&meta.name, nonce);
    if options.secret_name.as_deref() != Some(secret.as_str()) {
        return RayAuth::Unknown;
    }
    RayAuth::Token {
        token: key.token(&meta.namespace, &meta.name, nonce),
        secret,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> RayAuthKey {
        RayAuthKey::new(&[7; 32]).unwrap()
    }

    fn cluster(spec: Value, nonce: Option<&str>) -> ObservedCluster {
        let annotations = nonce
            .map(|n| json!({ANNOTATION_RAY_AUTH_NONCE: n}))
            .unwrap_or(Value::Null);
        serde_json::from_value(json!({
            "metadata": {"name": "demo", "namespace": "ml", "uid": "u-1", "annotations": annotations},
            "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn krayne_knows_the_token_of_the_clusters_it_made() {
        let made = cluster(json!({"authOptions": auth_options("demo", "n1")}), Some("n1"));
        assert_eq!(
            ray_auth_of(&made, Some(&key())),
            RayAuth::Token {
                token: key().token("ml", "demo", "n1"),
                secret: "demo-ray-auth-n1".into()
            }
        );
        assert_eq!(ray_auth_of(&made, None), RayAuth::Unknown, "no key");
        let foreign = cluster(
            json!({"authOptions": {"mode": "token", "secretName": "theirs"}}),
            Some("n1"),
        );
        assert_eq!(ray_auth_of(&foreign, Some(&key())), RayAuth::Unknown);
        let no_nonce = cluster(json!({"authOptions": auth_options("demo", "n1")}), None);
        assert_eq!(ray_auth_of(&no_nonce, Some(&key())), RayAuth::Unknown);
        let other_nonce = cluster(json!({"authOptions": auth_options("demo", "n1")}), Some("n2"));
        assert_eq!(
            ray_auth_of(&other_nonce, Some(&key())),
            RayAuth::Unknown,
            "its Secret is another's"
        );
        assert_eq!(
            ray_auth_secret_name("demo", "0123456789abcdef"),
            "demo-ray-auth-0123456789"
        );
        for open in [json!({}), json!({"authOptions": {"mode": "disabled"}})] {
            assert_eq!(ray_auth_of(&cluster(open, None), Some(&key())), RayAuth::Open);
        }
    }

    #[test]
    fn the_secret_holds_the_token_for_kuberay_and_is_owned_by_the_cluster() {
        let token = key().token("ml", "demo", "n1");
        let secret = ray_auth_secret("ml", "demo", "n1", &token, Some("u-1"));
        assert_eq!(secret["metadata"]["name"], "demo-ray-auth-n1");
        assert_eq!(secret["metadata"]["ownerReferences"][0]["uid"], "u-1");
        let data = secret["data"][SECRET_TOKEN_KEY].as_str().unwrap();
        let decoded = base64::engine::general_purpose::STANDARD.decode(data).unwrap();
        assert_eq!(decoded, token.expose().as_bytes());
        let before = ray_auth_secret("ml", "demo", "n1", &token, None);
        assert!(before["metadata"].get("ownerReferences").is_none());
    }
}
