//! Suspend and resume (issue 44): KubeRay's `spec.suspend` through krayne.
//! The sandbox's operator deletes a suspended cluster's pods and keeps it,
//! as KubeRay does; a suspended cluster holds none of the quota's GPUs; a
//! resume is admitted through the quota as a create is.

use krayne_proto::v1 as pb;
use krayne_tests::TEAMS;
use serde_json::{Value, json};

const NS: &str = "/v1/namespaces/ml-team/clusters";

fn gpu_cluster(name: &str, gpus: u32) -> Value {
    json!({"name": name, "worker_groups": [{"name": "gpu", "replicas": 1, "max_replicas": 1, "gpus": gpus}]})
}

async fn gpus_used(alice: &krayne_tests::Rest) -> String {
    let quota = alice.get("/v1/namespaces/ml-team/quota").await.expect(200).body;
    let gpus = quota["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "gpus")
        .cloned();
    gpus.unwrap()["used"].as_str().unwrap().to_owned()
}

/// Until the cluster's pods are all gone (the operator deletes them).
async fn pods_gone(alice: &krayne_tests::Rest, name: &str) {
    let started = std::time::Instant::now();
    loop {
        let details = alice.get(&format!("{NS}/{name}/details")).await.expect(200).body;
        if details["pods"].as_array().is_some_and(Vec::is_empty) && details["info"]["status"] == "suspended" {
            return;
        }
        assert!(started.elapsed().as_secs() < 30, "{details}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_suspended_cluster_frees_its_gpus_and_resumes_through_the_quota() {
    let env = krayne_tests::Env::start_with(krayne_tests::EnvOptions {
        teams: format!("{TEAMS}quotas:\n  ml-team: {{ gpus: 3 }}\n"),
        ..krayne_tests::EnvOptions::default()
    })
    .await;
    let alice = env.rest(&env.alice());
    alice.post(NS, &gpu_cluster("big", 2)).await.expect(201);
    alice
        .get(&format!("{NS}/big/wait?timeout_seconds=60"))
        .await
        .expect(200);
    assert_eq!(gpus_used(&alice).await, "2");

    // A body is not needed (curl -X POST …/suspend).
    let suspended = alice
        .send(reqwest::Method::POST, &format!("{NS}/big/suspend"), None, None)
        .await
        .expect(200);
    let said = suspended.body["status"].as_str().unwrap_or_default();
    assert!(["suspending", "suspended"].contains(&said), "{}", suspended.body);
    pods_gone(&alice, "big").await;
    assert_eq!(gpus_used(&alice).await, "0", "a suspended cluster holds no GPUs");
    let again = alice.post(&format!("{NS}/big/suspend"), &json!({})).await.expect(200);
    assert_eq!(again.body["status"], "suspended", "suspending twice changes nothing");

    // Its GPUs go to another cluster (a node has 2); resuming would not fit now.
    alice.post(NS, &gpu_cluster("other", 2)).await.expect(201);
    let refused = alice.post(&format!("{NS}/big/resume"), &json!({})).await.expect(429);
    assert_eq!(refused.body["code"], "quota_exceeded");
    assert_eq!(
        refused.body["quota_violations"],
        json!([{"resource": "gpus", "requested": "2", "in_use": "2", "limit": "3",
                "cluster_would_hold": "2", "namespace_would_hold": "4"}])
    );
    let mut grpc = env.grpc(&env.alice()).await;
    let status = grpc
        .clusters
        .resume_cluster(pb::ResumeClusterRequest {
            namespace: "ml-team".into(),
            name: "big".into(),
            queue: None,
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");

    // Once the other goes, it resumes and is ready again.
    alice.delete(&format!("{NS}/other")).await.expect(204);
    let resumed = grpc
        .clusters
        .resume_cluster(pb::ResumeClusterRequest {
            namespace: "ml-team".into(),
            name: "big".into(),
            queue: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_ne!(resumed.cluster.unwrap().status, "suspended");
    let ready = alice
        .get(&format!("{NS}/big/wait?timeout_seconds=60"))
        .await
        .expect(200);
    assert_eq!(ready.body["status"], "ready");
    assert_eq!(gpus_used(&alice).await, "2");

    // Editors only; each change recorded.
    let outsider = env.rest(&env.token("bob@example.com", &["other-team"]));
    outsider
        .post(&format!("{NS}/big/suspend"), &json!({}))
        .await
        .expect(403);
    alice
        .post(&format!("{NS}/nothing/resume"), &json!({}))
        .await
        .expect(404);
    // Refusals are written in the background: poll for them.
    let started = std::time::Instant::now();
    let seen = loop {
        let audit = env
            .rest(&env.admin())
            .get("/v1/audit?page_size=100&namespace=ml-team")
            .await
            .expect(200)
            .body;
        let seen: Vec<(String, String)> = audit["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| {
                e["action"]
                    .as_str()
                    .is_some_and(|a| a == "cluster.suspend" || a == "cluster.resume")
            })
            .map(|e| {
                (
                    e["action"].as_str().unwrap().to_owned(),
                    e["outcome"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect();
        if seen.len() >= 6 || started.elapsed().as_secs() > 10 {
            break seen;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    for wanted in [
        ("cluster.suspend", "succeeded"),
        ("cluster.resume", "succeeded"),
        ("cluster.resume", "invalid"),
        ("cluster.suspend", "denied"),
    ] {
        assert!(
            seen.iter().any(|(a, o)| (a.as_str(), o.as_str()) == wanted),
            "{wanted:?} in {seen:?}"
        );
    }
}
