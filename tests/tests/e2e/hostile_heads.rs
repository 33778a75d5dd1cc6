//! A tenant's head is hostile input (issue 53): heads that answer every
//! Ray endpoint krayne calls with oversized, deeply nested,
//! path-traversing, escape-laden, slow, endless and redirecting bodies
//! (the sandbox's fault `hostile-head:<behaviour>`), through every route
//! that reads a head and through the reaper; the sandbox's jobs and heads'
//! ports against the machine's other users; the reaper's deletes against a
//! cluster made again under its name; ServiceAccount tokens after their
//! account is gone.

use std::time::{Duration, Instant};

use krayne_tests::{Env, EnvOptions, TEAMS};
use serde_json::{Value, json};

const NS: &str = "/v1/namespaces/ml-team/clusters";

/// The server's metrics.
async fn metrics(env: &Env) -> String {
    reqwest::get(format!("http://{}/metrics", env.server.ops))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// Every route that reads a head, as a viewer reads it (the editor's
/// submit too).
fn head_routes(name: &str) -> Vec<(&'static str, String)> {
    vec![
        ("GET", format!("{NS}/{name}/jobs")),
        ("GET", format!("{NS}/{name}/jobs/raysubmit_x")),
        ("GET", format!("{NS}/{name}/jobs/raysubmit_x/logs")),
        ("GET", format!("{NS}/{name}/ray-logs")),
        ("GET", format!("{NS}/{name}/ray-logs/file?file=raylet.out")),
        ("POST", format!("{NS}/{name}/jobs")),
    ]
}

/// Reliability 29a/29b (issue 53, items 1 and 2): an oversized, nested,
/// endless, redirecting or path-naming head is answered 502 with krayne's
/// words on every route; the replica goes on serving, and counts them.
#[tokio::test]
async fn every_route_refuses_what_a_hostile_head_sends() {
    let env = Env::start().await;
    let alice = env.rest(&env.alice());
    for behaviour in ["oversized", "nested", "endless", "redirect", "paths"] {
        let name = format!("h-{behaviour}");
        env.hostile_cluster(&name, behaviour).await;
        for (method, path) in head_routes(&name) {
            // The paths head names its node by a path; its Jobs API
            // answers as Ray's (no jobs): only the log routes read nodes.
            if behaviour == "paths" && path.contains("/jobs") {
                continue;
            }
            let started = Instant::now();
            let reply = match method {
                "GET" => alice.get(&path).await,
                _ => alice.post(&path, &json!({"entrypoint": "echo hi"})).await,
            };
            let took = started.elapsed();
            assert_eq!(reply.status, 502, "{behaviour} {method} {path}: {}", reply.text);
            assert_eq!(reply.body["code"], "bad_gateway", "{behaviour} {path}: {}", reply.text);
            assert!(took < Duration::from_secs(35), "{behaviour} {path} took {took:?}");
        }
        alice.get("/v1/whoami").await.expect(200);
    }
    let metrics = metrics(&env).await;
    assert!(
        metrics.contains("krayne_head_answers_refused_total{read=\"jobs\",reason=\"too_large\"}"),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("head_answers"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Reliability 29c (issue 53, item 7): a head's escapes never reach a
/// terminal through krayne's JSON unescaped, and its error text is cut
/// to printable characters.
#[tokio::test]
async fn a_heads_escapes_stay_data() {
    let env = Env::start().await;
    env.hostile_cluster("escapes", "escapes").await;
    let alice = env.rest(&env.alice());
    let jobs = alice.get(&format!("{NS}/escapes/jobs")).await.expect(200);
    let entrypoint = jobs.body["jobs"][0]["entrypoint"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", jobs.text));
    assert!(
        entrypoint.contains('\u{1b}'),
        "JSON carries the data as it is: {entrypoint:?}"
    );
    assert!(!jobs.text.contains('\u{1b}'), "…escaped in the JSON text");
    let refused = alice.get(&format!("{NS}/escapes/ray-logs")).await;
    assert_eq!(refused.status, 503, "{}", refused.text);
    let detail = refused.body["detail"].as_str().unwrap();
    assert!(!detail.chars().any(char::is_control), "{detail:?}");
}

/// Reliability 29b (issue 53, item 2): the reaper asks hostile heads, finds
/// none of them idle (fail safe) and stays the leader; a quiet, honest
/// cluster beside them is warned.
#[tokio::test]
async fn the_reaper_finds_no_hostile_head_idle() {
    let env = Env::start_with(EnvOptions {
        teams: format!("{TEAMS}lifecycle:\n  ml-team: {{ idle_after: 1h, warn_before: 59m58s }}\n"),
        server_args: [
            "--lifecycle-policy-settle",
            "0s",
            "--lifecycle",
            "act",
            "--lifecycle-interval-seconds",
            "1",
            "--usage-record-seconds",
            "1",
        ]
        .map(str::to_owned)
        .to_vec(),
        ..EnvOptions::default()
    })
    .await;
    let behaviours = ["oversized", "nested", "endless", "redirect", "escapes"];
    for behaviour in behaviours {
        env.hostile_cluster(&format!("r-{behaviour}"), behaviour).await;
    }
    env.ready_cluster("quiet").await;
    let alice = env.rest(&env.alice());
    let started = Instant::now();
    loop {
        let quiet = alice.get(&format!("{NS}/quiet")).await.expect(200).body;
        if quiet["lifecycle_warned_at"].is_string() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the quiet one is never warned: {quiet}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Two more passes over the hostile ones.
    tokio::time::sleep(Duration::from_secs(3)).await;
    for behaviour in behaviours {
        let cluster: Value = alice.get(&format!("{NS}/r-{behaviour}")).await.expect(200).body;
        assert!(
            cluster["lifecycle_warned_at"].is_null() && cluster["idle_since"].is_null(),
            "{behaviour}: {cluster}"
        );
    }
    let metrics = metrics(&env).await;
    assert!(
        metrics.contains("krayne_lifecycle_head_requests_total{outcome=\"invalid\"}"),
        "{metrics}"
    );
}

/// The IP of `cluster`'s head pod in ml-team.
async fn head_ip(env: &Env, cluster: &str) -> String {
    let url = format!(
        "{}/api/v1/namespaces/ml-team/pods?labelSelector=ray.io%2Fnode-type%3Dhead,ray.io%2Fcluster%3D{cluster}",
        env.sandbox.url()
    );
    let list: Value = reqwest::get(url).await.unwrap().json().await.unwrap();
    list["items"][0]["status"]["podIP"].as_str().unwrap().to_owned()
}

/// What `curl` run as `nobody` reads (empty when refused), and its exit
/// code (56: the connection was closed unanswered).
async fn curl_as_nobody(args: &[&str]) -> (String, Option<i32>) {
    // Not blocking: the sandbox answering it runs on this runtime.
    let out = tokio::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "curl",
            "-s",
            "--max-time",
            "5",
        ])
        .args(args)
        .output()
        .await
        .expect("setpriv and curl");
    (String::from_utf8_lossy(&out.stdout).into_owned(), out.status.code())
}

/// Reliability 29c (issue 53, item 3): on a machine others share, the
/// sandbox runs a tenant's job as nobody (never root: no shadow file),
/// and a head's Jobs API at its pod IP answers krayne — this user's
/// sockets — but not another local user, who cannot run code on it.
#[tokio::test]
async fn the_sandbox_runs_jobs_as_nobody_and_heads_refuse_other_local_users() {
    if krayne_server::sandbox::local_uid() != 0 {
        eprintln!("not root: jobs run as this user, and no other user can be played; nothing to check");
        return;
    }
    let env = Env::start_with(EnvOptions::with_args(&["--service-upstream", "direct"])).await;
    let alice = env.rest(&env.alice());
    env.ready_cluster("shared").await;
    let job = alice
        .post(
            &format!("{NS}/shared/jobs"),
            &json!({"entrypoint": "id -u; head -c 8 /etc/shadow || echo no-shadow"}),
        )
        .await
        .expect(201)
        .body;
    let id = job["id"].as_str().unwrap();
    let started = Instant::now();
    let log = loop {
        let job = alice.get(&format!("{NS}/shared/jobs/{id}")).await.expect(200).body;
        if job["status"] == "SUCCEEDED" || job["status"] == "FAILED" {
            break alice.get(&format!("{NS}/shared/jobs/{id}/logs")).await.expect(200).text;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{job}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(log.contains("65534") && log.contains("no-shadow"), "{log}");

    let ip = head_ip(&env, "shared").await;
    let proof = std::env::temp_dir().join(format!("krayne-proof-{}", std::process::id()));
    let body = format!("{{\"entrypoint\": \"touch {}\"}}", proof.display());
    let url = format!("http://{ip}:8265/api/jobs/");
    let posted = curl_as_nobody(&["-X", "POST", "-H", "content-type: application/json", "-d", &body, &url]).await;
    assert_eq!(posted, (String::new(), Some(56)), "closed unanswered");
    let read = curl_as_nobody(&[&format!("http://{ip}:8265/api/version")]).await;
    assert_eq!(read, (String::new(), Some(56)));
    // Krayne's own connections (this user's) are still admitted.
    let version = alice
        .get(&format!("{NS}/shared/services/dashboard/proxy/api/version"))
        .await
        .expect(200);
    assert!(version.text.contains("ray_version"), "{}", version.text);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!proof.exists(), "another local user ran a job");
}

/// Reliability 29d (issue 53, item 4): an identity provider's token cannot
/// pass as a ServiceAccount through its e-mail, nor as a person whose
/// e-mail it does not vouch for.
#[tokio::test]
async fn an_email_claim_passes_as_nobody_else() {
    let teams = format!(
        "{TEAMS}  - name: pipelines\n    members: {{ subjects: [\"system:serviceaccount:ml-team:default\"] }}\n    namespaces: {{ ml-team: editor }}\n"
    );
    let env = Env::start_with(EnvOptions {
        teams,
        ..EnvOptions::default()
    })
    .await;
    let posing = env
        .signed(&json!({"sub": "mallory", "email": "system:serviceaccount:ml-team:default", "email_verified": true}));
    env.rest(&posing).get("/v1/whoami").await.expect(401);
    let unverified = env.signed(&json!({"sub": "mallory", "email": "alice@example.com"}));
    env.rest(&unverified).get(NS).await.expect(403);
    let whoami = env.rest(&unverified).get("/v1/whoami").await.expect(200).body;
    assert!(whoami["email"].is_null(), "{whoami}");
    let verified = env.signed(&json!({"sub": "alice-at-idp", "email": "alice@example.com", "email_verified": true}));
    env.rest(&verified).get(NS).await.expect(200);
}

/// Makes (or deletes) ServiceAccount `name` in ml-team.
async fn account(env: &Env, name: &str, exists: bool) {
    let client = reqwest::Client::new();
    let base = format!("{}/api/v1/namespaces/ml-team/serviceaccounts", env.sandbox.url());
    let answer = if exists {
        client
            .post(&base)
            .json(&json!({"metadata": {"name": name}}))
            .send()
            .await
            .unwrap()
    } else {
        client.delete(format!("{base}/{name}")).send().await.unwrap()
    };
    assert!(
        answer.status().is_success(),
        "{}",
        answer.text().await.unwrap_or_default()
    );
}

/// Reliability 29f (issue 53, item 6): a deleted ServiceAccount's tokens
/// stop working, a ServiceAccount made again under the name does not
/// inherit them, and a token living past the server's bound is refused.
#[tokio::test]
async fn a_deleted_service_accounts_tokens_stop_working() {
    let teams = format!(
        "{TEAMS}  - name: pipelines\n    members: {{ subjects: [\"system:serviceaccount:ml-team:pipeline\"] }}\n    namespaces: {{ ml-team: editor }}\n"
    );
    let env = Env::start_with(EnvOptions {
        teams,
        server_args: ["--service-account-tokens", "--allow-hs256-with-jwks"]
            .map(str::to_owned)
            .to_vec(),
        ..EnvOptions::default()
    })
    .await;
    account(&env, "pipeline", true).await;
    let token = env.service_account_token("ml-team", "pipeline", Some(3600)).await;
    env.rest(&token).get(NS).await.expect(200);
    let long = env.service_account_token("ml-team", "pipeline", Some(48 * 3600)).await;
    let refused = env.rest(&long).get(NS).await.expect(401);
    assert_eq!(refused.body["code"], "unauthenticated");

    account(&env, "pipeline", false).await;
    // The verdict is kept 30 s at most.
    let started = Instant::now();
    while env.rest(&token).get(NS).await.status != 401 {
        assert!(
            started.elapsed() < Duration::from_secs(40),
            "the deleted account's token still works"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    account(&env, "pipeline", true).await;
    env.rest(&token).get(NS).await.expect(401);
    let fresh = env.service_account_token("ml-team", "pipeline", Some(3600)).await;
    env.rest(&fresh).get(NS).await.expect(200);
}
