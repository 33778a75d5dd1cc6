//! Test signing keys (P-256, generated per run) and a tiny JWKS server.

use std::sync::{
    Arc, Mutex,
    atomic::{AtomicUsize, Ordering},
};

use aws_lc_rs::{
    encoding::AsDer as _,
    rand::SystemRandom,
    signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _},
};
use axum::{Json, Router, extract::State, http::StatusCode, response::IntoResponse, routing::get};
use base64::{Engine as _, engine::general_purpose::STANDARD, engine::general_purpose::URL_SAFE_NO_PAD};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

/// An ES256 key pair.
pub(crate) struct EcKey {
    pkcs8: Vec<u8>,
    public_point: Vec<u8>,
    spki: Vec<u8>,
    pub(crate) kid: String,
}

impl EcKey {
    pub(crate) fn generate(kid: &str) -> Self {
        let doc = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new()).unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, doc.as_ref()).unwrap();
        let public_point = pair.public_key().as_ref().to_vec();
        let spki = pair.public_key().as_der().unwrap().as_ref().to_vec();
        Self {
            pkcs8: doc.as_ref().to_vec(),
            public_point,
            spki,
            kid: kid.to_owned(),
        }
    }

    /// The public key as a PEM file's text.
    pub(crate) fn public_pem(&self) -> String {
        let b64 = STANDARD.encode(&self.spki);
        let lines: Vec<&str> = b64
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        format!(
            "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
            lines.join("\n")
        )
    }

    /// The public key as a JWK.
    pub(crate) fn jwk(&self) -> Value {
        let (x, y) = self.public_point[1..].split_at(32);
        json!({"kty": "EC", "crv": "P-256", "x": URL_SAFE_NO_PAD.encode(x), "y": URL_SAFE_NO_PAD.encode(y),
               "kid": self.kid, "use": "sig", "alg": "ES256"})
    }

    /// Signs `claims` (with this key's `kid` when `with_kid`).
    pub(crate) fn sign(&self, claims: &Value, with_kid: bool) -> String {
        let mut header = Header::new(Algorithm::ES256);
        if with_kid {
            header.kid = Some(self.kid.clone());
        }
        jsonwebtoken::encode(&header, claims, &EncodingKey::from_ec_der(&self.pkcs8)).unwrap()
    }
}

/// Claims valid now for `issuer` and audience `krayne`, with overrides.
pub(crate) fn claims(issuer: &str, overrides: Value) -> Value {
    let now = jiff::Timestamp::now().as_second();
    let mut c = json!({"sub": "alice@example.com", "groups": ["ml-research"], "iss": issuer, "aud": "krayne",
                       "iat": now, "nbf": now, "exp": now + 600});
    for (k, v) in overrides.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

#[derive(Clone, Default)]
struct Published {
    keys: Arc<Mutex<Option<Value>>>,
    fetches: Arc<AtomicUsize>,
    base: Arc<Mutex<String>>,
}

/// A JWKS endpoint (and OIDC discovery) the test controls.
pub(crate) struct JwksServer {
    published: Published,
    pub(crate) base: String,
}

impl JwksServer {
    pub(crate) async fn start() -> Self {
        let published = Published::default();
        let app = Router::new()
            .route("/jwks", get(jwks))
            .route("/.well-known/openid-configuration", get(discovery))
            .with_state(published.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        *published.base.lock().unwrap() = base.clone();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { published, base }
    }

    /// Publishes these keys; `None` makes the endpoint fail (issuer down).
    pub(crate) fn publish(&self, keys: Option<&[&EcKey]>) {
        *self.published.keys.lock().unwrap() =
            keys.map(|ks| json!({"keys": ks.iter().map(|k| k.jwk()).collect::<Vec<_>>()}));
    }

    /// How many times the key set was fetched.
    pub(crate) fn fetches(&self) -> usize {
        self.published.fetches.load(Ordering::SeqCst)
    }
}

async fn jwks(State(p): State<Published>) -> impl IntoResponse {
    p.fetches.fetch_add(1, Ordering::SeqCst);
    match p.keys.lock().unwrap().clone() {
        Some(keys) => Json(keys).into_response(),
        None => StatusCode::SERVICE_UNAVAILABLE.into_response(),
    }
}

async fn discovery(State(p): State<Published>) -> Json<Value> {
    let base = p.base.lock().unwrap().clone();
    Json(json!({"issuer": base, "jwks_uri": format!("{base}/jwks")}))
}
