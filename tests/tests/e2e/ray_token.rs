//! Issue 55, item 1: Ray's token authentication on the heads krayne
//! creates, the second control beside the NetworkPolicy, which works only
//! where the network plugin enforces it. The sandbox's KubeRay gives the
//! pods the token from the cluster's Secret, and its heads answer as a real
//! Ray 2.60 head does (`../shared/reference/ray/token-auth.md`): 401
//! without a token, 403 with a wrong one.

use base64::Engine as _;
use krayne_tests::{Env, EnvOptions, register_secret};
use serde_json::{Value, json};

use crate::network_policy::{http_from_pod, pod_ips};

/// An object of the sandbox's API, `None` when it is not there.
async fn sandbox_object(env: &Env, path: &str) -> Option<Value> {
    let answer = reqwest::get(format!("{}{path}", env.sandbox.url())).await.unwrap();
    if answer.status() != 200 {
        return None;
    }
    Some(answer.json().await.unwrap())
}

/// `curl` as `nobody` (an unprivileged process of this machine, not
/// krayne's pod): the status and body.
async fn curl_as_nobody(url: &str) -> String {
    let out = tokio::process::Command::new("setpriv")
        .args([
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            "curl",
            "-sS",
            "--max-time",
            "5",
        ])
        .args(["-w", "\n%{http_code}", url])
        .output()
        .await
        .expect("setpriv and curl run");
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

#[tokio::test]
async fn heads_answer_only_the_token_krayne_derived_and_krayne_sends_it() {
    let env = Env::start().await;
    let alice = env.rest(&env.alice());
    crate::network_policy::target_and_neighbour(&env, "tok").await;

    // The cluster asks KubeRay for token auth; its Secret, made before it,
    // is owned by it; its pods get the token from there.
    let cluster = sandbox_object(&env, "/apis/ray.io/v1/namespaces/ml-team/rayclusters/tok")
        .await
        .unwrap();
    assert_eq!(cluster["spec"]["authOptions"]["mode"], "token");
    assert!(cluster["metadata"]["annotations"]["krayne.dev/ray-auth-nonce"].is_string());
    let secret_name = cluster["spec"]["authOptions"]["secretName"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(secret_name.starts_with("tok-ray-auth-"), "{secret_name}");
    let secret_path = format!("/api/v1/namespaces/ml-team/secrets/{secret_name}");
    let secret = sandbox_object(&env, &secret_path).await.unwrap();
    assert_eq!(
        secret["metadata"]["ownerReferences"][0]["uid"],
        cluster["metadata"]["uid"]
    );
    let credentials = alice
        .post("/v1/namespaces/ml-team/clusters/tok/ray-credentials", &json!({}))
        .await
        .expect(200);
    assert_eq!(credentials.headers["cache-control"], "no-store");
    assert_eq!(credentials.body["mode"], "token");
    let token = credentials.body["token"].as_str().unwrap().to_owned();
    register_secret(&token);
    let stored = base64::engine::general_purpose::STANDARD
        .decode(secret["data"]["auth_token"].as_str().unwrap())
        .unwrap();
    assert_eq!(stored, token.as_bytes(), "the token krayne derives is the Secret's");
    let pods = sandbox_object(
        &env,
        "/api/v1/namespaces/ml-team/pods?labelSelector=ray.io%2Fcluster%3Dtok",
    )
    .await
    .unwrap();
    for pod in pods["items"].as_array().unwrap() {
        let env_of = pod["spec"]["containers"][0]["env"].as_array().unwrap();
        let var = |name: &str| env_of.iter().find(|e| e["name"] == name).cloned().unwrap_or_default();
        assert_eq!(var("RAY_AUTH_MODE")["value"], "token", "{env_of:?}");
        assert_eq!(
            var("RAY_AUTH_TOKEN")["valueFrom"]["secretKeyRef"],
            json!({"name": secret_name, "key": "auth_token"}),
            "{env_of:?}"
        );
    }

    // Where no network plugin enforces NetworkPolicies (here: the policy
    // gone), a neighbour's pod and an unprivileged process reach the head,
    // and Ray refuses them. The keeper's first round comes first, or it
    // would put the policy back midway.
    env.keeper_first_round().await;
    let policy = format!(
        "{}/apis/networking.k8s.io/v1/namespaces/ml-team/networkpolicies/tok-krayne-ingress",
        env.sandbox.url()
    );
    assert_eq!(
        reqwest::Client::new().delete(&policy).send().await.unwrap().status(),
        200
    );
    let head = pod_ips(&env, "ml-team", "tok").await.remove(0);
    let stranger = pod_ips(&env, "other-team", "neighbour").await.remove(0);
    let bare = http_from_pod(&stranger, &head, 8265, "/api/jobs/", None).await.unwrap();
    assert!(
        bare.starts_with("HTTP/1.1 401") && bare.contains("Unauthorized: Missing authentication token"),
        "{bare}"
    );
    let wrong = http_from_pod(&stranger, &head, 8265, "/api/jobs/", Some("Bearer not-the-token"))
        .await
        .unwrap();
    assert!(
        wrong.starts_with("HTTP/1.1 403") && wrong.contains("Forbidden: Invalid authentication token"),
        "{wrong}"
    );
    let local = curl_as_nobody(&format!("http://{head}:8265/api/jobs/")).await;
    assert!(
        local.ends_with("401") && local.contains("Missing authentication token"),
        "{local}"
    );
    let right = http_from_pod(&stranger, &head, 8265, "/api/jobs/", Some(&format!("Bearer {token}")))
        .await
        .unwrap();
    assert!(
        right.starts_with("HTTP/1.1 200"),
        "the token is the whole of it: {right}"
    );

    // krayne sends the token wherever it calls the head, and never a
    // caller's: a client's own X-Ray-Authorization is dropped.
    let dashboard = "/v1/namespaces/ml-team/clusters/tok/services/dashboard/proxy";
    let version = reqwest::Client::new()
        .get(format!("{}{dashboard}/api/version", env.url()))
        .bearer_auth(env.alice())
        .header("x-ray-authorization", "Bearer not-the-token")
        .header("cookie", "ray-authentication-token=not-the-token")
        .send()
        .await
        .unwrap();
    assert_eq!(version.status(), 200);
    let submitted = alice
        .post(
            "/v1/namespaces/ml-team/clusters/tok/jobs",
            &json!({"entrypoint": "echo through-krayne", "submission_id": "through-krayne"}),
        )
        .await;
    assert!([200, 201].contains(&submitted.status), "{}", submitted.text);
    alice.get("/v1/namespaces/ml-team/clusters/tok/jobs").await.expect(200);
    alice
        .get("/v1/namespaces/ml-team/clusters/tok/jobs/through-krayne")
        .await
        .expect(200);
    alice
        .get("/v1/namespaces/ml-team/clusters/tok/ray-logs")
        .await
        .expect(200);

    // The credential is an editor's, audited without the token in it.
    env.rest(&env.token("olga@example.com", &["other-team"]))
        .post("/v1/namespaces/ml-team/clusters/tok/ray-credentials", &json!({}))
        .await
        .problem(403, "permission_denied");
    let rows = env
        .audit_rows_eventually("action=cluster.credentials&cluster=tok", 2)
        .await;
    let outcomes: Vec<&str> = rows.iter().map(|r| r["outcome"].as_str().unwrap()).collect();
    assert_eq!(outcomes, ["denied", "succeeded"], "{rows:?}");
    assert!(!format!("{rows:?}").contains(&token));

    // No replica reads a Secret: it derives tokens. (Every request of the
    // server's carries its request id; this test's reads above do not.)
    let server_secret_calls: Vec<_> = env
        .sandbox
        .requests()
        .into_iter()
        .filter(|r| r.uri.contains("/secrets") && r.request_id.is_some())
        .collect();
    assert!(!server_secret_calls.is_empty(), "the server applied the Secret");
    assert!(
        server_secret_calls
            .iter()
            .all(|r| r.method == "PATCH" || r.method == "DELETE"),
        "{server_secret_calls:?}"
    );

    // The Secret goes with its cluster.
    alice.delete("/v1/namespaces/ml-team/clusters/tok").await.expect(204);
    for _ in 0..100 {
        if sandbox_object(&env, &secret_path).await.is_none() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the Secret outlived its cluster");
}

/// A cluster re-created under the same name gets a new token: who kept
/// the old one holds nothing.
#[tokio::test]
async fn a_cluster_made_again_under_its_name_has_a_new_token() {
    let env = Env::start_with(EnvOptions::default()).await;
    let alice = env.rest(&env.alice());
    let mut tokens = Vec::new();
    for _ in 0..2 {
        env.ready_cluster("again").await;
        let credentials = alice
            .post("/v1/namespaces/ml-team/clusters/again/ray-credentials", &json!({}))
            .await
            .expect(200);
        let token = credentials.body["token"].as_str().unwrap().to_owned();
        register_secret(&token);
        tokens.push(token);
        alice.delete("/v1/namespaces/ml-team/clusters/again").await.expect(204);
        for _ in 0..200 {
            if alice.get("/v1/namespaces/ml-team/clusters/again").await.status == 404 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
    assert_ne!(tokens[0], tokens[1]);
}
