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

/// The Secret holding the token of cluster `namespace/name` created with
/// `nonce`: each create its own name (two creates of one name never touch
/// each other's Secret), derived with `key` (an edited nonce cannot name a
/// Secret of the editor's choosing).
pub fn ray_auth_secret_name(key: &RayAuthKey, namespace: &str, name: &str, nonce: &str) -> String {
    format!("{name}-ray-auth-{}", key.secret_suffix(namespace, name, nonce))
}

/// `spec.authOptions` of a cluster krayne creates with token auth, its
/// token in Secret `secret`.
pub fn auth_options(secret: &str) -> Value {
    json!({"mode": "token", "secretName": secret})
}

/// The Secret `secret` holding `token` for cluster `namespace/name`; owned
/// by the cluster once its uid is known (`owner_uid`).
pub fn ray_auth_secret(namespace: &str, name: &str, secret: &str, token: &RayToken, owner_uid: Option<&str>) -> Value {
    let mut metadata = json!({
        "name": secret,
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

/// The token Secret of RayJob `name` (uid `rayjob_uid`), staged before
/// the RayJob was created, now owned by it: a RayJob whose cluster KubeRay
/// never makes (it refused the spec, or the RayJob is deleted first)
/// takes its Secret with it; once the cluster exists, its companions own
/// the Secret to the cluster instead.
pub fn rayjob_token_secret(namespace: &str, name: &str, secret: &str, token: &RayToken, rayjob_uid: &str) -> Value {
    let mut object = ray_auth_secret(namespace, name, secret, token, None);
    object["metadata"]["ownerReferences"] = json!([{
        "apiVersion": KUBERAY_API_VERSION,
        "kind": super::RAYJOB_KIND,
        "name": name,
        "uid": rayjob_uid,
    }]);
    object
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
    // A RayJob's cluster carries the RayJob's token: krayne derived it
    // with the name it knew, the RayJob's, before KubeRay named the
    // cluster.
    let name = meta.rayjob().unwrap_or(&meta.name);
    let secret = ray_auth_secret_name(key, &meta.namespace, name, nonce);
    if options.secret_name.as_deref() != Some(secret.as_str()) {
        return RayAuth::Unknown;
    }
    RayAuth::Token {
        token: key.token(&meta.namespace, name, nonce),
        secret,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{LABEL_ORIGIN_CRD, LABEL_ORIGIN_NAME};

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
        let secret = ray_auth_secret_name(&key(), "ml", "demo", "n1");
        let made = cluster(json!({"authOptions": auth_options(&secret)}), Some("n1"));
        assert_eq!(
            ray_auth_of(&made, Some(&key())),
            RayAuth::Token {
                token: key().token("ml", "demo", "n1"),
                secret: secret.clone()
            }
        );
        assert_eq!(ray_auth_of(&made, None), RayAuth::Unknown, "no key");
        let foreign = cluster(
            json!({"authOptions": {"mode": "token", "secretName": "theirs"}}),
            Some("n1"),
        );
        assert_eq!(ray_auth_of(&foreign, Some(&key())), RayAuth::Unknown);
        let no_nonce = cluster(json!({"authOptions": auth_options(&secret)}), None);
        assert_eq!(ray_auth_of(&no_nonce, Some(&key())), RayAuth::Unknown);
        let other_nonce = cluster(json!({"authOptions": auth_options(&secret)}), Some("n2"));
        assert_eq!(
            ray_auth_of(&other_nonce, Some(&key())),
            RayAuth::Unknown,
            "its Secret is another's"
        );
        let chosen = cluster(json!({"authOptions": auth_options("someone-elses")}), Some("n1"));
        assert_eq!(
            ray_auth_of(&chosen, Some(&key())),
            RayAuth::Unknown,
            "no Secret of the editor's choosing"
        );
        assert!(secret.starts_with("demo-ray-auth-") && secret.len() == "demo-ray-auth-".len() + 10);
        for open in [json!({}), json!({"authOptions": {"mode": "disabled"}})] {
            assert_eq!(ray_auth_of(&cluster(open, None), Some(&key())), RayAuth::Open);
        }
    }

    #[test]
    fn a_rayjobs_cluster_has_the_token_made_for_the_rayjob() {
        let secret = ray_auth_secret_name(&key(), "ml", "train", "n1");
        let mut made = cluster(json!({"authOptions": auth_options(&secret)}), Some("n1"));
        made.metadata.name = "train-x7k2p".into();
        assert_eq!(ray_auth_of(&made, Some(&key())), RayAuth::Unknown, "not a RayJob's");
        let labels = json!({LABEL_ORIGIN_CRD: "RayJob", LABEL_ORIGIN_NAME: "train"});
        made.metadata.labels = serde_json::from_value::<crate::domain::ObjectMeta>(json!({"labels": labels}))
            .unwrap()
            .labels;
        assert_eq!(
            ray_auth_of(&made, Some(&key())),
            RayAuth::Token {
                token: key().token("ml", "train", "n1"),
                secret
            }
        );
    }

    #[test]
    fn the_secret_holds_the_token_for_kuberay_and_is_owned_by_the_cluster() {
        let token = key().token("ml", "demo", "n1");
        let secret = ray_auth_secret("ml", "demo", "demo-ray-auth-x", &token, Some("u-1"));
        assert_eq!(secret["metadata"]["name"], "demo-ray-auth-x");
        assert_eq!(secret["metadata"]["ownerReferences"][0]["uid"], "u-1");
        let data = secret["data"][SECRET_TOKEN_KEY].as_str().unwrap();
        let decoded = base64::engine::general_purpose::STANDARD.decode(data).unwrap();
        assert_eq!(decoded, token.expose().as_bytes());
        let before = ray_auth_secret("ml", "demo", "demo-ray-auth-x", &token, None);
        assert!(before["metadata"].get("ownerReferences").is_none());
    }

    #[test]
    fn a_rayjobs_staged_secret_is_owned_by_the_rayjob_and_holds_the_same_token() {
        let token = key().token("ml", "train", "n1");
        let owned = rayjob_token_secret("ml", "train", "train-ray-auth-x", &token, "job-uid");
        let owner = &owned["metadata"]["ownerReferences"][0];
        assert_eq!(
            (&owner["kind"], &owner["name"], &owner["uid"]),
            (&json!("RayJob"), &json!("train"), &json!("job-uid"))
        );
        let staged = ray_auth_secret("ml", "train", "train-ray-auth-x", &token, None);
        assert_eq!(owned["data"], staged["data"]);
        assert_eq!(owned["metadata"]["labels"], staged["metadata"]["labels"]);
    }
}
