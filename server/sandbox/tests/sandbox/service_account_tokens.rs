//! ServiceAccount tokens as Kubernetes issues them: TokenRequest through
//! kube-rs's typed call, `kubectl create token` and the official Python
//! client, each token verified against the keys the issuer's OpenID
//! discovery document names, with the claims kube-apiserver writes.

use std::path::Path;

use jsonwebtoken::{DecodingKey, Validation, jwk::JwkSet};
use k8s_openapi::api::{
    authentication::v1::{TokenRequest, TokenRequestSpec},
    core::v1::ServiceAccount,
};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use crate::start;

/// The token's claims, verified with the issuer's published keys.
async fn verify(sandbox_url: &str, token: &str) -> Value {
    let http = reqwest::Client::new();
    let discovery: Value = http
        .get(format!("{sandbox_url}/.well-known/openid-configuration"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let issuer = discovery["issuer"].as_str().unwrap();
    assert_eq!(issuer, krayne_sandbox::SERVICE_ACCOUNT_ISSUER);
    let keys: JwkSet = http
        .get(discovery["jwks_uri"].as_str().unwrap())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let header = jsonwebtoken::decode_header(token).unwrap();
    let jwk = keys
        .find(header.kid.as_deref().unwrap())
        .expect("the token's kid is published");
    let mut validation = Validation::new(header.alg);
    validation.set_issuer(&[issuer]);
    validation.set_audience(&["krayne"]);
    jsonwebtoken::decode::<Value>(token, &DecodingKey::from_jwk(jwk).unwrap(), &validation)
        .unwrap()
        .claims
}

#[tokio::test]
async fn kube_rs_gets_a_token_kubernetes_would_issue() {
    let (sb, client) = start().await;
    let accounts: Api<ServiceAccount> = Api::namespaced(client, "ml");
    let account: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": "trainer"}})).unwrap();
    let created = accounts.create(&PostParams::default(), &account).await.unwrap();
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec!["krayne".into()],
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let review = accounts
        .create_token_request("trainer", &PostParams::default(), &request)
        .await
        .unwrap();
    let status = review.status.unwrap();
    let claims = verify(&sb.url(), &status.token).await;
    assert_eq!(claims["sub"], "system:serviceaccount:ml:trainer");
    assert_eq!(claims["aud"], json!(["krayne"]));
    assert_eq!(claims["kubernetes.io"]["namespace"], "ml");
    assert_eq!(claims["kubernetes.io"]["serviceaccount"]["name"], "trainer");
    assert_eq!(
        claims["kubernetes.io"]["serviceaccount"]["uid"].as_str(),
        created.metadata.uid.as_deref()
    );
    assert_eq!(claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(), 3600);
    assert_eq!(
        status.expiration_timestamp.0.as_second(),
        claims["exp"].as_i64().unwrap()
    );

    // What kube-apiserver refuses: an unknown account, under ten minutes.
    let missing = accounts
        .create_token_request("nobody", &PostParams::default(), &request)
        .await
        .unwrap_err();
    assert!(
        matches!(missing, kube::Error::Api(ref s) if s.code == 404),
        "{missing:?}"
    );
    let mut short = request.clone();
    short.spec.expiration_seconds = Some(60);
    let refused = accounts
        .create_token_request("trainer", &PostParams::default(), &short)
        .await
        .unwrap_err();
    assert!(
        matches!(refused, kube::Error::Api(ref s) if s.code == 422),
        "{refused:?}"
    );
    // Every namespace has its `default` account.
    let review = accounts
        .create_token_request("default", &PostParams::default(), &request)
        .await
        .unwrap();
    let claims = verify(&sb.url(), &review.status.unwrap().token).await;
    assert_eq!(claims["sub"], "system:serviceaccount:ml:default");
}

#[tokio::test]
async fn kubectl_create_token_and_the_python_client_get_tokens() {
    let (sb, _client) = start().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    sb.write_kubeconfig(&kubeconfig).unwrap();
    match crate::kubectl::which_kubectl() {
        Ok(kubectl) => {
            let out = tokio::process::Command::new(kubectl)
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args([
                    "create",
                    "token",
                    "default",
                    "-n",
                    "ml",
                    "--audience",
                    "krayne",
                    "--duration",
                    "20m",
                ])
                .env("HOME", dir.path())
                .output()
                .await
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            let claims = verify(&sb.url(), String::from_utf8_lossy(&out.stdout).trim()).await;
            assert_eq!(claims["sub"], "system:serviceaccount:ml:default");
            assert_eq!(claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(), 1200);
        }
        Err(()) => eprintln!("SKIPPED: kubectl is not installed, so `kubectl create token` was not tried"),
    }
    let Some(python) = crate::python_client::python_with_client() else {
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sandbox/k8s_python_token.py");
    // Asynchronously: the sandbox answers on this test's runtime.
    let out = tokio::process::Command::new(python)
        .arg(&script)
        .arg(&kubeconfig)
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let read: Value = serde_json::from_slice(&out.stdout).unwrap();
    let claims = verify(&sb.url(), read["token"].as_str().unwrap()).await;
    assert_eq!(claims["sub"], "system:serviceaccount:ml:py-pipeline");
    assert_eq!(read["audiences"], json!(["krayne"]));
}
