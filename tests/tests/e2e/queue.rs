//! Queued admission (issue 61): a create or resume that does not fit its
//! namespace's quota waits in line, suspended, and is admitted in order as
//! quota frees — a delete, a quota raised on reload — by the admitter,
//! audited and with an Event; across two replicas, one killed mid-way,
//! nothing is admitted twice and no place is lost.

use std::time::{Duration, Instant};

use krayne_tests::{EnvOptions, Rest, TEAMS};
use serde_json::{Value, json};

const NS: &str = "/v1/namespaces/ml-team/clusters";

fn with_quota(quota: &str, queueing: &str) -> String {
    format!("{TEAMS}quotas:\n  ml-team: {quota}\n{queueing}")
}

/// A cluster whose one worker asks for `gpus` GPUs (its charge is exactly
/// that worker's GPUs).
fn gpu_cluster(name: &str, gpus: u32) -> Value {
    json!({"name": name, "worker_groups": [{"name": "gpu", "replicas": 1, "max_replicas": 1, "gpus": gpus}]})
}

/// `name`'s summary once `done` holds for it, within `limit`.
async fn until(rest: &Rest, name: &str, limit: Duration, done: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let got = rest.get(&format!("{NS}/{name}")).await;
        if got.status == 200 && done(&got.body) {
            return got.body;
        }
        assert!(started.elapsed() < limit, "{name} never got there: {}", got.text);
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

fn admitted(c: &Value) -> bool {
    c["status"] != "queued" && c["suspended"] == false
}

/// The GPUs the namespace's clusters are charged, from Kubernetes itself.
async fn gpus_in_kubernetes(env: &krayne_tests::Env) -> u64 {
    let listed = env.kube_get("/apis/ray.io/v1/namespaces/ml-team/rayclusters").await;
    listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["spec"]["suspend"] != true && c["metadata"]["deletionTimestamp"].is_null())
        .map(|c| {
            let gpus = &c["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]
                ["nvidia.com/gpu"];
            gpus.as_str()
                .and_then(|g| g.parse().ok())
                .or(gpus.as_u64())
                .unwrap_or(0)
        })
        .sum()
}

#[tokio::test]
async fn four_creates_in_eight_gpus_two_run_two_wait_and_are_admitted_in_order() {
    let env = krayne_tests::Env::start_with(EnvOptions {
        teams: with_quota("{ gpus: 8 }", ""),
        server_args: vec!["--teams-watch".into(), "false".into()],
        ..EnvOptions::default()
    })
    .await;
    let alice = env.rest(&env.alice());
    let queued = format!("{NS}?queue=true");
    alice.post(&queued, &gpu_cluster("c1", 4)).await.expect(201);
    alice.post(&queued, &gpu_cluster("c2", 4)).await.expect(201);
    let third = alice.post(&queued, &gpu_cluster("c3", 4)).await.expect(202);
    let fourth = alice.post(&queued, &gpu_cluster("c4", 4)).await.expect(202);
    for (answer, place) in [(&third, 1), (&fourth, 2)] {
        let c = &answer.body["cluster"];
        assert_eq!(c["status"], "queued", "{c}");
        assert_eq!(c["suspended"], true);
        assert_eq!(c["queue_position"], place, "{c}");
        assert!(c["queued_since"].is_string(), "{c}");
    }
    assert_eq!(third.body["cluster"]["queue_reason"], "gpus: needs 4, 0 of 8 free");
    assert_eq!(fourth.body["cluster"]["queue_reason"], "gpus: needs 4, 0 of 8 free");
    // A waiting cluster holds no quota: the namespace holds two clusters.
    let quota = alice.get("/v1/namespaces/ml-team/quota").await.expect(200).body;
    assert_eq!(quota["resources"][0]["used"], "2", "{quota}");
    // Without `queue` it is refused as before.
    alice.post(NS, &gpu_cluster("c5", 4)).await.expect(429);
    // Reads, lists and describe carry the place.
    let listed = alice.get(NS).await.expect(200).body;
    let c4 = listed["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "c4")
        .cloned()
        .unwrap();
    assert_eq!(
        (c4["status"].clone(), c4["queue_position"].clone()),
        (json!("queued"), json!(2))
    );
    let described = alice.get(&format!("{NS}/c3/details")).await.expect(200).body;
    assert_eq!(described["info"]["queue_position"], 1);

    // A delete frees 4 GPUs: the first in line is admitted, the second
    // moves up.
    alice.delete(&format!("{NS}/c1")).await.expect(204);
    let freed = Instant::now();
    let c3 = until(&alice, "c3", Duration::from_secs(10), admitted).await;
    eprintln!("admitted {:?} after the delete", freed.elapsed());
    assert!(c3["queue_position"].is_null() && c3["queue_reason"].is_null(), "{c3}");
    let c4 = until(&alice, "c4", Duration::from_secs(10), |c| c["queue_position"] == 1).await;
    assert_eq!(c4["status"], "queued");
    assert_eq!(gpus_in_kubernetes(&env).await, 8, "never past the quota");
    // Its head starts (the sandbox's nodes have no GPUs for its worker).
    until(&alice, "c3", Duration::from_secs(60), |c| c["status"] == "running").await;

    // A quota raised on reload admits the rest.
    std::fs::write(env.teams_file(), with_quota("{ gpus: 16 }", "")).unwrap();
    env.server.signal("HUP");
    until(&alice, "c4", Duration::from_secs(10), admitted).await;
    assert_eq!(gpus_in_kubernetes(&env).await, 12);

    // Every step audited: two creates, two accepted to wait, two
    // admissions by krayne's own principal, each with an Event.
    let creates = env
        .audit_rows_eventually("action=cluster.create&outcome=succeeded", 4)
        .await;
    let mut statuses: Vec<u64> = creates.iter().map(|r| r["http_status"].as_u64().unwrap()).collect();
    statuses.sort_unstable();
    assert_eq!(statuses, [201, 201, 202, 202]);
    let waited = creates.iter().find(|r| r["cluster"] == "c4").unwrap();
    assert_eq!(waited["request_summary"]["queue"]["queue_position"], 2, "{waited}");
    let admits = env.audit_rows_eventually("action=queue.admit", 2).await;
    let mut names: Vec<&str> = admits.iter().map(|r| r["cluster"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(names, ["c3", "c4"], "each admitted once: {admits:?}");
    assert!(
        admits
            .iter()
            .all(|r| r["actor"]["subject"] == "system:krayne-queue" && r["outcome"] == "succeeded"),
        "{admits:?}"
    );
    let events = alice.get(&format!("{NS}/c4/details")).await.expect(200).body["events"].clone();
    assert!(
        events
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["reason"] == "QueueAdmitted"),
        "{events}"
    );
}

#[tokio::test]
async fn a_waiting_cluster_can_leave_be_kept_and_resume_in_line_and_max_wait_ends_a_wait() {
    let env = krayne_tests::Env::start_with(EnvOptions {
        teams: with_quota(
            "{ gpus: 4 }",
            "queueing:\n  ml-team: { queue: default, max_wait: 5s, on_max_wait: keep }\n",
        ),
        server_args: vec!["--teams-watch".into(), "false".into()],
        ..EnvOptions::default()
    })
    .await;
    let alice = env.rest(&env.alice());
    // The namespace queues by default: no flag needed; `queue: false` in
    // the body still refuses.
    alice.post(NS, &gpu_cluster("first", 4)).await.expect(201);
    let mut refused = gpu_cluster("no-wait", 4);
    refused["queue"] = json!(false);
    alice.post(NS, &refused).await.expect(429);
    let mut bad = gpu_cluster("bad", 4);
    bad["queue"] = json!("yes");
    let bad = alice.post(NS, &bad).await.expect(400);
    assert!(bad.text.contains("queue"), "{}", bad.text);
    // One the quota could never hold is refused, not put in line; a
    // resume of a running cluster never waits (nor is marked waiting).
    let huge = alice.post(NS, &gpu_cluster("huge", 8)).await.expect(429);
    assert_eq!(huge.body["quota_violations"][0]["limit"], "4", "{}", huge.text);
    alice.post(NS, &gpu_cluster("second", 4)).await.expect(202);
    let resumed = alice
        .post(&format!("{NS}/first/resume?queue=true"), &json!({}))
        .await
        .expect(200);
    assert!(
        resumed.body["queue_position"].is_null() && resumed.body["suspended"] == false,
        "{}",
        resumed.text
    );

    // Past max_wait (5 s) it leaves the line, kept suspended, said so.
    let kept = until(&alice, "second", Duration::from_secs(20), |c| {
        c["status"] == "suspended"
    })
    .await;
    assert!(kept["queue_position"].is_null(), "{kept}");
    let expired = env.audit_rows_eventually("action=queue.expire", 1).await;
    assert_eq!(
        expired[0]["request_summary"]["outcome"], "kept suspended",
        "{expired:?}"
    );
    let events = alice.get(&format!("{NS}/second/details")).await.expect(200).body["events"].clone();
    assert!(
        events
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["reason"] == "QueueWaitExpired"),
        "{events}"
    );

    // Resumed with queue, it waits again at the end of the line; a
    // suspend takes it out; a delete of what runs admits what waits.
    let again = alice
        .post(&format!("{NS}/second/resume?queue=true"), &json!({}))
        .await
        .expect(202);
    assert_eq!(again.body["status"], "queued", "{}", again.text);
    assert_eq!(again.body["queue_position"], 1);
    let out = alice
        .post(&format!("{NS}/second/suspend"), &json!({}))
        .await
        .expect(200);
    assert_eq!(out.body["status"], "suspended", "{}", out.text);
    alice
        .post(&format!("{NS}/second/resume?queue=true"), &json!({}))
        .await
        .expect(202);
    alice.delete(&format!("{NS}/first")).await.expect(204);
    until(&alice, "second", Duration::from_secs(10), admitted).await;
}

#[tokio::test]
async fn two_replicas_one_killed_admit_each_once_in_order_and_lose_no_place() {
    let db = krayne_tests::test_database().await;
    let env = krayne_tests::Env::start_with(EnvOptions {
        teams: with_quota("{ gpus: 8 }", ""),
        database_url: Some(db.url.clone()),
        server_args: [
            "--teams-watch",
            "false",
            "--lifecycle",
            "report",
            "--lifecycle-lease-seconds",
            "3",
        ]
        .map(String::from)
        .to_vec(),
        ..EnvOptions::default()
    })
    .await;
    let second = env.spawn_server(&[]).await;
    let token = env.alice();
    let replicas = [
        env.rest(&token),
        Rest::new(&format!("http://{}", second.api), Some(token.clone())),
    ];
    // Six 4-GPU creates spread over both replicas: two run, four wait in
    // the order they came.
    for (i, name) in ["c1", "c2", "c3", "c4", "c5", "c6"].into_iter().enumerate() {
        let answer = replicas[i % 2]
            .post(&format!("{NS}?queue=true"), &gpu_cluster(name, 4))
            .await;
        let expected = if i < 2 { 201 } else { 202 };
        assert_eq!(answer.status, expected, "{name}: {}", answer.text);
        if i >= 2 {
            assert_eq!(answer.body["cluster"]["queue_position"], i - 1, "{name}");
        }
    }
    while env.lease_holder().await.is_empty() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A delete, and at once the admitting replica is killed: whoever
    // admits c3 (the dying leader or its successor) does so once.
    replicas[0].delete(&format!("{NS}/c1")).await.expect(204);
    let survivor = env.kill_lease_holder(&second).await;
    let alice = Rest::new(&format!("http://{survivor}"), Some(token.clone()));
    let t0 = Instant::now();
    loop {
        let got = alice.get(&format!("{NS}/c3")).await;
        if got.status == 200 && admitted(&got.body) {
            break;
        }
        if t0.elapsed() > Duration::from_secs(20) {
            let listed = env.kube_get("/apis/ray.io/v1/namespaces/ml-team/rayclusters").await;
            let names: Vec<_> = listed["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| {
                    (
                        c["metadata"]["name"].clone(),
                        c["spec"]["suspend"].clone(),
                        c["metadata"]["annotations"]["krayne.dev/queue-reason"].clone(),
                    )
                })
                .collect();
            let lease = env
                .kube_get("/apis/coordination.k8s.io/v1/namespaces/default/leases/krayne-lifecycle")
                .await;
            let ops = if survivor == second.api {
                second.ops.to_string()
            } else {
                env.server.ops.to_string()
            };
            let metrics = reqwest::get(format!("http://{ops}/metrics"))
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            let server = if survivor == second.api { &second } else { &env.server };
            eprintln!("DEBUG LOG\n{}", server.log_lines("", 80).join("\n"));
            panic!(
                "DEBUG survivor={survivor} second={} lease={} items={names:?}\n{}",
                second.api,
                lease["spec"],
                metrics
                    .lines()
                    .filter(|l| l.contains("queue")
                        || l.contains("background")
                        || l.contains("lease")
                        || l.contains("leader"))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    until(&alice, "c3", Duration::from_secs(30), admitted).await;
    let c4 = until(&alice, "c4", Duration::from_secs(30), |c| c["queue_position"] == 1).await;
    assert_eq!(c4["status"], "queued");
    let c6 = until(&alice, "c6", Duration::from_secs(30), |c| c["queue_position"] == 3).await;
    assert_eq!(c6["status"], "queued", "no place lost");
    assert_eq!(gpus_in_kubernetes(&env).await, 8);
    alice.delete(&format!("{NS}/c2")).await.expect(204);
    until(&alice, "c4", Duration::from_secs(30), admitted).await;
    let c5 = until(&alice, "c5", Duration::from_secs(30), |c| c["queue_position"] == 1).await;
    assert_eq!(c5["status"], "queued");
    assert_eq!(gpus_in_kubernetes(&env).await, 8, "never past the quota");

    let admin = Rest::new(&format!("http://{survivor}"), Some(env.admin()));
    let rows = admin.get("/v1/audit?action=queue.admit").await.expect(200).body;
    let mut names: Vec<&str> = rows["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["outcome"] == "succeeded")
        .map(|r| r["cluster"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["c3", "c4"], "each admitted exactly once: {rows}");
}
