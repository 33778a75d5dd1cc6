//! Idle culling (issue 44) with short policies: a cluster nothing uses is
//! seen idle (its head's cluster status and Jobs API, and every replica's
//! recorded uses), warned, suspended, resumed by its owner and works
//! again; `keep` postpones within `keep_max`; a cluster with an open
//! tunnel, a running job or a browser session through another replica is
//! never suspended, and neither is one whose head does not answer.

use std::time::{Duration, Instant};

use krayne_tests::{Env, EnvOptions, TEAMS, echo_tunnel, test_database};
use serde_json::{Value, json};

use crate::lifecycle::{reaper_rows, until};

const NS: &str = "/v1/namespaces/ml-team/clusters";
/// The reaper acting on settled policies.
const REAPER: [&str; 8] = krayne_tests::FAST_REAPER;

fn teams(policy: &str) -> String {
    format!("{TEAMS}lifecycle:\n  ml-team: {policy}\n")
}

/// Waits (at most 60 s) until job `id` of `cluster` has ended; returns it.
async fn job_ended(env: &Env, cluster: &str, id: &str) -> Value {
    let path = format!("{NS}/{cluster}/jobs/{id}");
    until(env, &env.alice(), &path, Duration::from_secs(60), |s, b| {
        s == 200 && ["SUCCEEDED", "FAILED", "STOPPED"].contains(&b["status"].as_str().unwrap_or_default())
    })
    .await
}

#[tokio::test]
async fn an_idle_cluster_is_warned_suspended_resumed_and_kept() {
    let mut server_args: Vec<String> = REAPER.map(str::to_owned).to_vec();
    server_args.extend(["--usage-record-seconds", "1"].map(str::to_owned));
    let env = Env::start_with(EnvOptions {
        teams: teams("{ idle_after: 6s, warn_before: 3s, keep_max: 2m }"),
        server_args,
        ..EnvOptions::default()
    })
    .await;
    let alice = env.alice();
    env.ready_cluster("idle").await;
    let path = format!("{NS}/idle");

    // Seen idle: since when, and what will happen, when and why.
    let seen = until(&env, &alice, &path, Duration::from_secs(30), |_, b| {
        b["idle_since"].is_string()
    })
    .await;
    let suspends_at: jiff::Timestamp = seen["suspends_at"].as_str().unwrap().parse().unwrap();
    let idle_since: jiff::Timestamp = seen["idle_since"].as_str().unwrap().parse().unwrap();
    assert_eq!(suspends_at.duration_since(idle_since).as_secs(), 6, "{seen}");
    let plan = seen["lifecycle"].as_str().unwrap();
    assert!(plan.starts_with("suspend at ") && plan.ends_with(": idle 6s"), "{plan}");
    assert!(seen["expires_at"].is_null());

    // Warned, then suspended no sooner than warn_before later.
    let warned = until(&env, &alice, &path, Duration::from_secs(30), |_, b| {
        b["lifecycle_warned_at"].is_string()
    })
    .await;
    assert_eq!(warned["suspended"], false, "warned, not yet acted on: {warned}");
    let warned_at = Instant::now();
    let suspended = until(&env, &alice, &path, Duration::from_secs(30), |_, b| {
        b["suspended"] == true
    })
    .await;
    assert!(warned_at.elapsed() >= Duration::from_secs(2), "acted too soon");
    assert!(
        suspended["idle_since"].is_null() && suspended["lifecycle"].is_null(),
        "{suspended}"
    );
    let rows = reaper_rows(&env).await;
    let suspend = rows
        .iter()
        .find(|r| r["action"] == "cluster.suspend" && r["cluster"] == "idle")
        .unwrap_or_else(|| panic!("{rows:#?}"));
    let reason = suspend["request_summary"]["reason"].as_str().unwrap();
    assert!(reason.starts_with("idle "), "{reason}");
    let plans = rows.iter().filter(|r| r["action"] == "lifecycle.plan").count();
    assert!(plans >= 1, "the idle time and plan are recorded, audited: {rows:#?}");
    let gauge = env.metric("krayne_lifecycle_idle_gpu_clusters", "").await;
    assert_eq!(gauge, 0.0, "no GPU cluster here");

    // Its owner resumes it, and it works again: a job runs.
    env.rest(&alice)
        .post(&format!("{path}/resume"), &json!({}))
        .await
        .expect(200);
    env.rest(&alice)
        .get(&format!("{path}/wait?timeout_seconds=60"))
        .await
        .expect(200);
    let submitted = env
        .rest(&alice)
        .post(&format!("{path}/jobs"), &json!({"entrypoint": "echo back again"}))
        .await
        .expect(201)
        .body;
    let job = job_ended(&env, "idle", submitted["id"].as_str().unwrap()).await;
    assert_eq!(job["status"], "SUCCEEDED", "{job}");

    // Kept: past keep_max is refused with the limit; within it, the plan
    // waits for the keep, and nothing happens before then.
    let refused = env
        .rest(&alice)
        .post(&format!("{path}/keep"), &json!({"for": "3h"}))
        .await
        .expect(400)
        .body;
    assert!(
        refused.to_string().contains("longest keep the policy allows"),
        "{refused}"
    );
    env.rest(&alice)
        .post(&format!("{path}/keep"), &json!({"until": "2020-01-01T00:00:00Z"}))
        .await
        .expect(400);
    let kept = env
        .rest(&alice)
        .post(&format!("{path}/keep"), &json!({"for": "40s"}))
        .await
        .expect(200)
        .body;
    let kept_until: jiff::Timestamp = kept["kept_until"].as_str().unwrap().parse().unwrap();
    let planned = until(&env, &alice, &path, Duration::from_secs(30), |_, b| {
        b["suspends_at"].is_string() && b["idle_since"].is_string()
    })
    .await;
    let at: jiff::Timestamp = planned["suspends_at"].as_str().unwrap().parse().unwrap();
    assert!(at >= kept_until, "the plan waits for the keep: {planned}");
    // Idle for longer than idle_after + warn_before: still running.
    tokio::time::sleep(Duration::from_secs(12)).await;
    let still = env.rest(&alice).get(&path).await.expect(200).body;
    assert_eq!(still["suspended"], false, "{still}");
    assert!(still["lifecycle_warned_at"].is_null(), "{still}");
    let owner_rows = env
        .rest(&env.admin())
        .get("/v1/audit?action=cluster.keep&cluster=idle")
        .await
        .expect(200)
        .body;
    let outcomes: Vec<&str> = owner_rows["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["outcome"].as_str().unwrap())
        .collect();
    assert!(
        outcomes.contains(&"succeeded") && outcomes.contains(&"invalid"),
        "{owner_rows}"
    );
}

/// A cluster created as another tool would, with the sandbox's fault whose
/// head's dashboard never answers (and krayne's annotation, so the policy
/// would apply to it).
async fn hung(env: &Env, name: &str) {
    let mut manifest = env
        .rest(&env.alice())
        .post(&format!("{NS}?dry_run=true"), &json!({"name": name}))
        .await
        .expect(200)
        .body["manifest"]
        .clone();
    let annotations = manifest["metadata"]["annotations"].as_object_mut();
    let annotations = match annotations {
        Some(a) => a,
        None => {
            manifest["metadata"]["annotations"] = json!({});
            manifest["metadata"]["annotations"].as_object_mut().unwrap()
        }
    };
    annotations.insert("krayne.dev/created-by".into(), json!("alice@example.com"));
    annotations.insert(
        "sandbox.krayne.dev/fault".into(),
        json!(krayne_server::sandbox::DASHBOARD_HANGS),
    );
    let manifest = krayne_tests::made_elsewhere(manifest);
    let created = reqwest::Client::new()
        .post(format!(
            "{}/apis/ray.io/v1/namespaces/ml-team/rayclusters",
            env.sandbox.url()
        ))
        .json(&manifest)
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201, "{}", created.text().await.unwrap_or_default());
    env.rest(&env.alice())
        .get(&format!("{NS}/{name}/wait?timeout_seconds=60"))
        .await
        .expect(200);
}

#[tokio::test]
async fn nothing_in_use_through_another_replica_is_suspended_nor_a_silent_head() {
    let db = test_database().await;
    let env = Env::start_with(EnvOptions {
        teams: teams("{ idle_after: 6s, warn_before: 2s }"),
        // Standing for no Lease (no reaper, no usage accounting), so the
        // second replica leads.
        server_args: ["--usage-record-seconds", "1", "--usage-accounting", "false"]
            .map(str::to_owned)
            .to_vec(),
        database_url: Some(db.url.clone()),
        ..EnvOptions::default()
    })
    .await;
    // The reaper runs in the second replica only (with the first's flags
    // and its own); every use goes through the first.
    let reaper = env.spawn_server(&REAPER).await;
    for name in ["tunnel", "job", "session", "quiet"] {
        env.ready_cluster(name).await;
    }
    hung(&env, "hung").await;
    let alice = env.alice();

    let mut tunnel = echo_tunnel::open(&env, "tunnel").await;
    env.rest(&alice)
        .post(&format!("{NS}/job/jobs"), &json!({"entrypoint": "sleep 120"}))
        .await
        .expect(201);
    let link = env
        .rest(&alice)
        .post(&format!("{NS}/session/services/dashboard/sessions"), &json!({}))
        .await
        .expect(201)
        .body;
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let opened = browser.get(link["sign_in_url"].as_str().unwrap()).send().await.unwrap();
    assert_eq!(opened.status(), 303);
    let cookie = opened.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    // The dashboard page polls, as Ray's does.
    let page = format!("{}{NS}/session/services/dashboard/proxy/api/version", env.url());
    let polling = tokio::spawn(async move {
        loop {
            let r = browser.get(&page).header("cookie", &cookie).send().await.unwrap();
            assert_eq!(r.status(), 200);
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    });

    // The one nothing uses is suspended…
    until(&env, &alice, &format!("{NS}/quiet"), Duration::from_secs(60), |_, b| {
        b["suspended"] == true
    })
    .await;
    // …and, a full idle_after + warn_before later, none of the others.
    tokio::time::sleep(Duration::from_secs(10)).await;
    for name in ["tunnel", "job", "session", "hung"] {
        let c = env.rest(&alice).get(&format!("{NS}/{name}")).await.expect(200).body;
        assert_eq!(c["suspended"], false, "{name}: {c}");
        assert!(
            c["idle_since"].is_null() && c["lifecycle_warned_at"].is_null(),
            "{name}: {c}"
        );
    }
    assert_eq!(
        echo_tunnel::echo(&mut tunnel).await.unwrap(),
        b"ping\n",
        "the tunnel still works"
    );
    polling.abort();
    // The silent head was asked, and left alone when it did not answer.
    let metrics = reqwest::get(format!("http://{}/metrics", reaper.ops))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let timeouts = krayne_tests::metric(&metrics, "krayne_lifecycle_head_requests_total", "outcome=\"timeout\"");
    assert!(timeouts >= 1.0, "{metrics}");
}
