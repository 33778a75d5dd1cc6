//! ServiceAccount tokens as the API server issues them: `TokenRequest`
//! (`POST …/serviceaccounts/{name}/token`), signed by the cluster's
//! service-account issuer, whose OpenID discovery document and key set the
//! API server serves (`/.well-known/openid-configuration`,
//! `/openid/v1/jwks`). The key is made per sandbox. A `TokenReview`
//! (`POST /apis/authentication.k8s.io/v1/tokenreviews`) says whether the
//! API server still takes a token: signed here, not expired, for one of
//! the audiences asked, and its ServiceAccount still the one it was issued
//! for (a deleted account's tokens, and those of an account deleted and
//! made again under its name, are refused), as kube-apiserver checks.

use aws_lc_rs::{
    rand::SystemRandom,
    signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _},
};
use axum::{
    Json,
    extract::{Path, State},
    http::StatusCode,
    response::{IntoResponse, Response},
};
use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use super::{ApiError, Resource, state::Shared};

/// The issuer kubeadm and kind give a cluster's ServiceAccount tokens.
pub const SERVICE_ACCOUNT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// Shortest and longest lifetimes a TokenRequest may ask for, and the
/// default, as kube-apiserver has them.
const MIN_SECONDS: i64 = 600;
const MAX_SECONDS: i64 = 48 * 3600;
const DEFAULT_SECONDS: i64 = 3600;

/// The issuer's signing key (ES256).
pub(crate) struct TokenSigner {
    pkcs8: Vec<u8>,
    public_point: Vec<u8>,
    kid: String,
}

impl TokenSigner {
    /// A fresh key.
    pub(crate) fn generate() -> Result<Self, String> {
        let doc = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
            .map_err(|e| format!("service-account key: {e}"))?;
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, doc.as_ref())
            .map_err(|e| format!("service-account key: {e}"))?;
        let public_point = pair.public_key().as_ref().to_vec();
        // As kube-apiserver names its keys: a hash of the public key.
        let kid = URL_SAFE_NO_PAD.encode(Sha256::digest(&public_point));
        Ok(Self {
            pkcs8: doc.as_ref().to_vec(),
            public_point,
            kid,
        })
    }

    fn jwk(&self) -> Value {
        let (x, y) = self.public_point[1..].split_at(32);
        json!({"use": "sig", "kty": "EC", "kid": self.kid, "crv": "P-256", "alg": "ES256",
               "x": URL_SAFE_NO_PAD.encode(x), "y": URL_SAFE_NO_PAD.encode(y)})
    }

    fn verify(&self, token: &str) -> Result<Value, String> {
        let (x, y) = self.public_point[1..].split_at(32);
        let key = jsonwebtoken::DecodingKey::from_ec_components(&URL_SAFE_NO_PAD.encode(x), &URL_SAFE_NO_PAD.encode(y))
            .map_err(|e| e.to_string())?;
        let mut validation = jsonwebtoken::Validation::new(Algorithm::ES256);
        validation.validate_aud = false;
        validation.set_issuer(&[SERVICE_ACCOUNT_ISSUER]);
        jsonwebtoken::decode::<Value>(token, &key, &validation)
            .map(|data| data.claims)
            .map_err(|e| e.to_string())
    }

    fn sign(&self, claims: &Value) -> Result<String, ApiError> {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &EncodingKey::from_ec_der(&self.pkcs8))
            .map_err(|e| ApiError::internal(format!("signing the token: {e}")))
    }
}

/// `GET /.well-known/openid-configuration`.
pub(super) async fn discovery(State(s): State<Shared>) -> Json<Value> {
    Json(json!({
        "issuer": SERVICE_ACCOUNT_ISSUER,
        "jwks_uri": format!("http://{}/openid/v1/jwks", s.address),
        "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["ES256"],
    }))
}

/// `GET /openid/v1/jwks`.
pub(super) async fn jwks(State(s): State<Shared>) -> Json<Value> {
    Json(json!({"keys": [s.signer.jwk()]}))
}

/// The parts of `authentication.k8s.io/v1` `TokenRequestSpec` a request
/// sets, as protobuf (kubectl and client-go send built-in types so).
#[derive(Clone, PartialEq, prost::Message)]
struct SpecMessage {
    #[prost(string, repeated, tag = "1")]
    audiences: Vec<String>,
    #[prost(int64, optional, tag = "4")]
    expiration_seconds: Option<i64>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct RequestMessage {
    #[prost(message, optional, tag = "2")]
    spec: Option<SpecMessage>,
}

/// `POST /api/v1/namespaces/{ns}/serviceaccounts/{name}/token`: JSON or
/// protobuf in, JSON out (which clients accept).
pub(super) async fn token_request(
    State(s): State<Shared>,
    Path((ns, name)): Path<(String, String)>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let protobuf = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/vnd.kubernetes.protobuf"));
    let request = if protobuf {
        from_protobuf(&body)
    } else {
        from_json(&body)
    };
    match request.and_then(|r| issue(&s, &ns, &name, r)) {
        Ok(review) => (StatusCode::CREATED, Json(review)).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `POST /apis/authentication.k8s.io/v1/tokenreviews`: JSON in and out.
pub(super) async fn token_review(State(s): State<Shared>, body: axum::body::Bytes) -> Response {
    let mut review: Value = match serde_json::from_slice(&body) {
        Ok(review) => review,
        Err(e) => return ApiError::bad_request(format!("not a TokenReview: {e}")).into_response(),
    };
    let token = review["spec"]["token"].as_str().unwrap_or_default().to_owned();
    let asked: Vec<String> = review["spec"]["audiences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect();
    review["apiVersion"] = json!("authentication.k8s.io/v1");
    review["kind"] = json!("TokenReview");
    review["status"] = match reviewed(&s, &token, &asked) {
        Ok((user, audiences)) => json!({"authenticated": true, "user": user, "audiences": audiences}),
        Err(why) => json!({"authenticated": false, "error": why}),
    };
    (StatusCode::CREATED, Json(review)).into_response()
}

/// The user a token authenticates, and the audiences it was asked for
/// and holds; or why it does not.
fn reviewed(s: &Shared, token: &str, asked: &[String]) -> Result<(Value, Vec<String>), String> {
    let claims = s
        .signer
        .verify(token)
        .map_err(|e| format!("invalid bearer token: {e}"))?;
    let held: Vec<String> = match &claims["aud"] {
        Value::String(one) => vec![one.clone()],
        Value::Array(many) => many.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        _ => Vec::new(),
    };
    let audiences: Vec<String> = if asked.is_empty() {
        held.clone()
    } else {
        asked.iter().filter(|a| held.contains(a)).cloned().collect()
    };
    if audiences.is_empty() {
        return Err("token audiences do not match the ones asked".into());
    }
    let ns = claims["kubernetes.io"]["namespace"].as_str().unwrap_or_default();
    let name = claims["kubernetes.io"]["serviceaccount"]["name"]
        .as_str()
        .unwrap_or_default();
    let uid = claims["kubernetes.io"]["serviceaccount"]["uid"]
        .as_str()
        .unwrap_or_default();
    let current = account_uid(s, ns, name).map_err(|_| format!("serviceaccounts \"{name}\" not found"))?;
    if current != uid {
        return Err(format!(
            "the ServiceAccount {name} has UID {current}, not the token's {uid} (it was deleted and made again)"
        ));
    }
    let user = json!({
        "username": format!("system:serviceaccount:{ns}:{name}"),
        "uid": uid,
        "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{ns}"), "system:authenticated"],
    });
    Ok((user, audiences))
}

/// The uid of ServiceAccount `name` in `ns` (every namespace has its
/// `default` one).
fn account_uid(s: &Shared, ns: &str, name: &str) -> Result<String, ApiError> {
    match s.store.get(Resource::ServiceAccount, ns, name) {
        Ok(account) => Ok(account["metadata"]["uid"].as_str().unwrap_or_default().to_owned()),
        Err(_) if name == "default" => {
            s.store.get(Resource::Namespace, "", ns)?;
            let digest = Sha256::digest(format!("{ns}/default").as_bytes());
            Ok(
                uuid::Builder::from_random_bytes(digest[..16].try_into().unwrap_or_default())
                    .into_uuid()
                    .to_string(),
            )
        }
        Err(e) => Err(e),
    }
}

fn from_json(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("not a TokenRequest: {e}")))
}

fn from_protobuf(body: &[u8]) -> Result<Value, ApiError> {
    use prost::Message as _;
    let refused = || ApiError::bad_request("not a TokenRequest");
    let raw = crate::access_review::unwrap_envelope(body).ok_or_else(refused)?;
    let spec = RequestMessage::decode(raw.as_slice())
        .map_err(|_| refused())?
        .spec
        .unwrap_or_default();
    let mut request = json!({"spec": {"audiences": spec.audiences}});
    if let Some(seconds) = spec.expiration_seconds {
        request["spec"]["expirationSeconds"] = json!(seconds);
    }
    Ok(request)
}

fn issue(s: &Shared, ns: &str, name: &str, mut request: Value) -> Result<Value, ApiError> {
    if request["kind"].as_str().is_some_and(|k| k != "TokenRequest") {
        return Err(ApiError::bad_request("the body must be a TokenRequest"));
    }
    let account = account_uid(s, ns, name)?;
    let seconds = match request["spec"]["expirationSeconds"].as_i64() {
        None => DEFAULT_SECONDS,
        Some(n) if n < MIN_SECONDS => {
            return Err(ApiError::invalid(
                Resource::ServiceAccount,
                name,
                &[(
                    "spec.expirationSeconds".into(),
                    "Invalid value: may not specify a duration less than 10 minutes".into(),
                )],
            ));
        }
        Some(n) => n.min(MAX_SECONDS),
    };
    let audiences: Vec<String> = match request["spec"]["audiences"].as_array() {
        Some(list) if !list.is_empty() => list.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        _ => vec![SERVICE_ACCOUNT_ISSUER.to_owned()],
    };
    let now = jiff::Timestamp::now().as_second();
    let claims = json!({
        "aud": audiences, "exp": now + seconds, "iat": now, "nbf": now,
        "iss": SERVICE_ACCOUNT_ISSUER, "jti": uuid::Uuid::new_v4().to_string(),
        "sub": format!("system:serviceaccount:{ns}:{name}"),
        "kubernetes.io": {"namespace": ns, "serviceaccount": {"name": name, "uid": account}},
    });
    let token = s.signer.sign(&claims)?;
    let expires = jiff::Timestamp::from_second(now + seconds)
        .map(|t| t.to_string())
        .unwrap_or_default();
    request["apiVersion"] = json!("authentication.k8s.io/v1");
    request["kind"] = json!("TokenRequest");
    request["metadata"] =
        json!({"name": name, "namespace": ns, "creationTimestamp": jiff::Timestamp::now().to_string()});
    request["spec"]["audiences"] = json!(audiences);
    request["spec"]["expirationSeconds"] = json!(seconds);
    request["status"] = json!({"token": token, "expirationTimestamp": expires});
    Ok(request)
}
