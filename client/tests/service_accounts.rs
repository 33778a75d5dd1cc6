//! A pipeline's path: a Kubernetes ServiceAccount token from the
//! sandbox's TokenRequest (as the kubelet projects one into a pod), read
//! from its file by the SDK, authorized by team mappings that name the
//! ServiceAccount or its namespace's group; a token for another audience
//! refused; the kubelet's rotation of the file picked up.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use futures::TryStreamExt as _;
use krayne_client::{Client, Code, auth::TokenFile};
use krayne_tests::{Env, EnvOptions};
use serde_json::{Value, json};

const TEAMS: &str = r#"
admins: { groups: [platform-admins], subjects: [] }
teams:
  - name: training
    members: { subjects: ["system:serviceaccount:ml-team:trainer"] }
    namespaces: { ml-team: editor }
  - name: batch-readers
    members: { groups: ["system:serviceaccounts:batch"] }
    namespaces: { ml-team: viewer }
"#;

/// A token for `namespace/account` from the sandbox's TokenRequest.
async fn request_token(env: &Env, namespace: &str, account: &str, body: Value) -> (u16, Value) {
    let url = format!(
        "{}/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
        env.sandbox.url()
    );
    let res = reqwest::Client::new().post(url).json(&body).send().await.unwrap();
    (res.status().as_u16(), res.json().await.unwrap())
}

async fn token_for(env: &Env, namespace: &str, account: &str, audience: &str) -> String {
    let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                      "spec": {"audiences": [audience], "expirationSeconds": 3600}});
    let (status, review) = request_token(env, namespace, account, body).await;
    assert_eq!(status, 201, "{review}");
    review["status"]["token"].as_str().unwrap().to_owned()
}

async fn create_account(env: &Env, namespace: &str, name: &str) {
    let url = format!("{}/api/v1/namespaces/{namespace}/serviceaccounts", env.sandbox.url());
    let body = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}});
    let res = reqwest::Client::new().post(url).json(&body).send().await.unwrap();
    assert_eq!(res.status().as_u16(), 201);
}

/// Writes `token` as the kubelet does: a new file, then the `token`
/// symlink swapped to it in one rename.
fn project(dir: &Path, version: u32, token: &str) {
    let file = dir.join(format!("..{version}"));
    std::fs::write(&file, token).unwrap();
    let next = dir.join("token.next");
    std::os::unix::fs::symlink(&file, &next).unwrap();
    std::fs::rename(&next, dir.join("token")).unwrap();
}

async fn list(client: &Client) -> Result<Vec<krayne_client::proto::ClusterInfo>, krayne_client::ClientError> {
    client.list(Some("ml-team")).try_collect().await
}

#[tokio::test]
async fn a_pipeline_signs_in_with_its_projected_service_account_token() {
    let mut options = EnvOptions::with_args(&["--service-account-tokens", "--allow-hs256-with-jwks"]);
    options.teams = TEAMS.to_owned();
    options.sandbox.namespaces.push("batch".into());
    let env = Env::start_with(options).await;
    create_account(&env, "ml-team", "trainer").await;
    create_account(&env, "batch", "reporter").await;

    // Kubernetes' own refusals, as kubectl create token meets them.
    let (status, _) = request_token(&env, "ml-team", "nobody", json!({"spec": {}})).await;
    assert_eq!(status, 404);
    let (status, review) = request_token(&env, "ml-team", "trainer", json!({"spec": {"expirationSeconds": 60}})).await;
    assert_eq!(status, 422, "{review}");

    let secrets = tempfile::tempdir().unwrap();
    project(
        secrets.path(),
        1,
        &token_for(&env, "ml-team", "trainer", "krayne").await,
    );
    let client = Client::connect(env.url())
        .await
        .unwrap()
        .with_token_provider(TokenFile::new(secrets.path().join("token")));
    let me = client.whoami().await.unwrap();
    assert_eq!(me.subject, "system:serviceaccount:ml-team:trainer");
    assert_eq!(me.groups, ["system:serviceaccounts", "system:serviceaccounts:ml-team"]);
    assert_eq!(me.teams, ["training"]);
    // The issuer kubeadm and kind clusters have, as the sandbox does.
    assert_eq!(
        me.issuer.as_deref(),
        Some("https://kubernetes.default.svc.cluster.local")
    );
    assert!(me.expires_at.is_some());
    list(&client).await.unwrap();

    // The kubelet rotates the file: the next call sends the new token (here
    // another account's, so the change shows), matched by its group.
    project(secrets.path(), 2, &token_for(&env, "batch", "reporter", "krayne").await);
    let me = client.whoami().await.unwrap();
    assert_eq!(me.subject, "system:serviceaccount:batch:reporter");
    assert_eq!(me.teams, ["batch-readers"]);
    list(&client).await.unwrap();

    // A token requested for another audience is not krayne's.
    project(secrets.path(), 3, &token_for(&env, "ml-team", "trainer", "vault").await);
    assert_eq!(client.whoami().await.unwrap_err().code(), Code::Unauthenticated);

    // A ServiceAccount no mapping names is authenticated, and may do nothing.
    project(
        secrets.path(),
        4,
        &token_for(&env, "ml-team", "default", "krayne").await,
    );
    let me = client.whoami().await.unwrap();
    assert!(me.teams.is_empty() && me.namespaces.is_empty(), "{me:?}");
    assert_eq!(list(&client).await.unwrap_err().code(), Code::PermissionDenied);
}
