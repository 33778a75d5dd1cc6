//! Tokens over both transports: only the valid ones pass.

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use krayne_proto::v1 as pb;
use krayne_tests::{Env, EnvOptions};
use serde_json::json;
use tonic::Code;

use crate::keys::{EcKey, JwksServer, claims};

const ISSUER: &str = "https://issuer.test";

/// Expects `token` to pass (`ok`) or be refused with 401 / UNAUTHENTICATED
/// on both transports.
pub(crate) async fn check(env: &Env, case: &str, token: Option<&str>, header: Option<&str>, ok: bool) {
    let http = reqwest::Client::new();
    let mut req = http.get(format!("{}/v1/whoami", env.url()));
    let value = header
        .map(str::to_owned)
        .or_else(|| token.map(|t| format!("Bearer {t}")));
    if let Some(v) = &value {
        req = req.header("authorization", v);
    }
    let res = req.send().await.unwrap();
    let want = if ok { 200 } else { 401 };
    assert_eq!(res.status().as_u16(), want, "{case} over REST");
    if !ok {
        let www = res
            .headers()
            .get("www-authenticate")
            .map(|v| v.to_str().unwrap().to_owned());
        assert!(www.is_some_and(|w| w.starts_with("Bearer")), "{case}: WWW-Authenticate");
        let body: serde_json::Value = res.json().await.unwrap();
        let detail = body["detail"].as_str().unwrap();
        assert!(
            ["invalid token", "token expired", "missing bearer token"].contains(&detail),
            "{case}: {detail}"
        );
    }
    let channel = tonic::transport::Channel::from_shared(env.url())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = pb::identity_service_client::IdentityServiceClient::new(channel);
    let mut request = tonic::Request::new(pb::WhoAmIRequest {});
    if let Some(v) = value.as_deref().and_then(|v| v.parse().ok()) {
        request.metadata_mut().insert("authorization", v);
    }
    match client.who_am_i(request).await {
        Ok(_) => assert!(ok, "{case} passed over gRPC"),
        Err(s) => {
            assert!(!ok, "{case} refused over gRPC: {s:?}");
            assert_eq!(s.code(), Code::Unauthenticated, "{case}");
        }
    }
}

fn files(key: &EcKey) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("es256.pem");
    std::fs::write(&path, key.public_pem()).unwrap();
    let path = path.to_str().unwrap().to_owned();
    (dir, path)
}

#[tokio::test]
async fn only_valid_tokens_pass_on_both_transports() {
    let key = EcKey::generate("k1");
    let (_dir, pem) = files(&key);
    let jwt = vec![
        "--jwt-public-key".into(),
        format!("ES256:{pem}"),
        "--jwt-issuer".into(),
        ISSUER.into(),
    ];
    // Some 30 refusals from one address in a second: past the default
    // rate of denials (429, see hardening::token_less_floods), which is not
    // what this test is about.
    let env = Env::start_with(EnvOptions {
        jwt_args: Some(jwt),
        server_args: vec!["--unauthenticated-rate-per-second".into(), "0".into()],
        ..EnvOptions::default()
    })
    .await;
    let now = jiff::Timestamp::now().as_second();
    let sign = |overrides| key.sign(&claims(ISSUER, overrides), false);

    check(&env, "valid", Some(&sign(json!({}))), None, true).await;
    check(
        &env,
        "groups as one string",
        Some(&sign(json!({"groups": "ml-research"}))),
        None,
        true,
    )
    .await;
    check(&env, "expired", Some(&sign(json!({"exp": now - 120}))), None, false).await;
    check(
        &env,
        "not yet valid",
        Some(&sign(json!({"nbf": now + 600}))),
        None,
        false,
    )
    .await;
    check(
        &env,
        "issued in the future",
        Some(&sign(json!({"iat": now + 600}))),
        None,
        false,
    )
    .await;
    check(
        &env,
        "no exp",
        Some(&key.sign(&json!({"sub": "a", "iss": ISSUER, "aud": "krayne"}), false)),
        None,
        false,
    )
    .await;
    check(
        &env,
        "wrong issuer",
        Some(&sign(json!({"iss": "https://evil.test"}))),
        None,
        false,
    )
    .await;
    check(
        &env,
        "wrong audience",
        Some(&sign(json!({"aud": "someone-else"}))),
        None,
        false,
    )
    .await;
    check(
        &env,
        "audience list without krayne",
        Some(&sign(json!({"aud": ["a", "b"]}))),
        None,
        false,
    )
    .await;
    check(
        &env,
        "audience list with krayne",
        Some(&sign(json!({"aud": ["a", "krayne"]}))),
        None,
        true,
    )
    .await;
    check(&env, "no subject", Some(&sign(json!({"sub": ""}))), None, false).await;
    let other = EcKey::generate("k1");
    check(
        &env,
        "bad signature",
        Some(&other.sign(&claims(ISSUER, json!({})), false)),
        None,
        false,
    )
    .await;
    let none = format!(
        "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.{}.",
        base64_json(&claims(ISSUER, json!({})))
    );
    check(&env, "alg none", Some(&none), None, false).await;
    // Key confusion: HS256 "signed" with the server's public key as the secret.
    let confused = jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &claims(ISSUER, json!({})),
        &EncodingKey::from_secret(key.public_pem().as_bytes()),
    )
    .unwrap();
    check(&env, "HS256 against an ES256 server", Some(&confused), None, false).await;
    // Over krayne's 8 KiB limit, under HTTP/2's 16 KiB header limit.
    let oversize = sign(json!({"pad": "x".repeat(9_000)}));
    check(&env, "oversize token", Some(&oversize), None, false).await;
    check(&env, "missing header", None, None, false).await;
    check(&env, "not bearer", None, Some("Basic YWxpY2U6c2VjcmV0"), false).await;
    check(&env, "empty bearer", None, Some("Bearer "), false).await;
    check(&env, "garbage", None, Some("Bearer not.a.jwt"), false).await;

    let log = env.server.log.lock().unwrap().clone();
    assert!(
        !log.contains(&sign(json!({})).split('.').nth(2).unwrap().to_owned()),
        "a token's signature reached the log"
    );
}

fn base64_json(v: &serde_json::Value) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).unwrap())
}

fn jwks_env(url_flag: &str, url: String, ttl: u64, cooldown: u64) -> EnvOptions {
    let jwt = vec![
        url_flag.into(),
        url,
        "--jwt-algorithms".into(),
        "ES256".into(),
        "--jwt-issuer".into(),
        ISSUER.into(),
        "--jwks-ttl-seconds".into(),
        ttl.to_string(),
        "--jwks-cooldown-seconds".into(),
        cooldown.to_string(),
    ];
    EnvOptions {
        jwt_args: Some(jwt),
        ..EnvOptions::default()
    }
}

#[tokio::test]
async fn an_unknown_kid_refetches_the_jwks_once_per_cooldown() {
    let jwks = JwksServer::start().await;
    let (k1, k2) = (EcKey::generate("k1"), EcKey::generate("k2"));
    jwks.publish(Some(&[&k1]));
    let env = Env::start_with(jwks_env("--jwks-url", format!("{}/jwks", jwks.base), 3600, 1)).await;
    let token = |k: &EcKey| k.sign(&claims(ISSUER, json!({})), true);
    check(&env, "k1", Some(&token(&k1)), None, true).await;
    let before = jwks.fetches();

    // The issuer rotates to k2; the first k2 token triggers one refetch.
    jwks.publish(Some(&[&k1, &k2]));
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    check(&env, "k2 after rotation", Some(&token(&k2)), None, true).await;
    // REST's k2 token fetched the new set once; gRPC's found k2 cached.
    assert_eq!(jwks.fetches(), before + 1);

    // Unknown kids within the cooldown do not hammer the issuer.
    let k3 = EcKey::generate("k3");
    let after = jwks.fetches();
    for _ in 0..5 {
        check(&env, "k3 unpublished", Some(&token(&k3)), None, false).await;
    }
    assert!(
        jwks.fetches() <= after + 1,
        "refetched {} times within the cooldown",
        jwks.fetches() - after
    );
}

#[tokio::test]
async fn a_down_issuer_keeps_the_last_good_keys() {
    let jwks = JwksServer::start().await;
    let k1 = EcKey::generate("k1");
    jwks.publish(Some(&[&k1]));
    let env = Env::start_with(jwks_env("--jwks-url", format!("{}/jwks", jwks.base), 1, 0)).await;
    let token = k1.sign(&claims(ISSUER, json!({})), true);
    check(&env, "k1", Some(&token), None, true).await;
    jwks.publish(None);
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let before = jwks.fetches();
    check(&env, "k1 with the issuer down", Some(&token), None, true).await;
    assert!(jwks.fetches() > before, "the stale set was refetched (and failed)");
}

#[tokio::test]
async fn oidc_discovery_finds_the_jwks() {
    let jwks = JwksServer::start().await;
    let k1 = EcKey::generate("k1");
    jwks.publish(Some(&[&k1]));
    let env = Env::start_with(jwks_env("--oidc-issuer-url", jwks.base.clone(), 300, 1)).await;
    check(
        &env,
        "k1 via discovery",
        Some(&k1.sign(&claims(ISSUER, json!({})), true)),
        None,
        true,
    )
    .await;
}

#[tokio::test]
async fn ops_and_docs_need_no_token_everything_else_does() {
    let env = Env::start().await;
    let ops = krayne_tests::Rest::new(&format!("http://{}", env.server.ops), None);
    for path in ["/healthz", "/readyz", "/metrics"] {
        ops.get(path).await.expect(200);
    }
    let anon = env.anonymous();
    anon.get("/openapi.json").await.expect(200);
    anon.get("/docs/").await.expect(200);
    for path in [
        "/v1/whoami",
        "/v1/namespaces",
        "/v1/clusters",
        "/v1/namespaces/ml-team/clusters",
        "/v1/namespaces/ml-team/clusters/x",
        "/v1/namespaces/ml-team/clusters/x/details",
        "/v1/namespaces/ml-team/clusters/x/wait",
    ] {
        anon.get(path).await.problem(401, "unauthenticated");
    }
    anon.post("/v1/namespaces/ml-team/clusters", &json!({"name": "x"}))
        .await
        .problem(401, "unauthenticated");
    anon.post("/v1/namespaces/ml-team/clusters/x/scale", &json!({}))
        .await
        .problem(401, "unauthenticated");
    anon.delete("/v1/namespaces/ml-team/clusters/x")
        .await
        .problem(401, "unauthenticated");
}

/// The development HS256 secret beside a real issuer would let whoever
/// holds it sign in as anyone: the server refuses to start with both
/// unless told it is meant.
#[tokio::test]
async fn the_development_secret_beside_an_issuer_must_be_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let (teams, secret) = (dir.path().join("teams.yaml"), dir.path().join("secret"));
    std::fs::write(&teams, krayne_tests::TEAMS).unwrap();
    std::fs::write(&secret, "a development secret of at least 32 bytes").unwrap();
    let refused = std::process::Command::new(krayne_tests::server_binary())
        .args(["serve", "--teams-file", teams.to_str().unwrap()])
        .args(["--jwt-hs256-secret-file", secret.to_str().unwrap()])
        .args(["--jwks-url", "http://127.0.0.1:9/jwks"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("--allow-hs256-with-jwks"), "{stderr}");

    let env = Env::start_with(EnvOptions::with_args(&[
        "--jwks-url",
        "http://127.0.0.1:9/jwks",
        "--allow-hs256-with-jwks",
    ]))
    .await;
    env.rest(&env.alice()).get("/v1/whoami").await.expect(200);
}
