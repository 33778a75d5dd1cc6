//! Issue 59: the watch cache keeps only events about Ray objects (a
//! RayCluster, a pod of one), indexed by the object they concern; an
//! event about another workload never reaches its memory, and a Ray
//! pod's event appears in describe.

use std::time::{Duration, Instant};

use krayne_tests::Env;
use serde_json::{Value, json};

const NS: &str = "/v1/namespaces/ml-team/clusters";

/// Posts an event about `kind`/`name` in ml-team straight to the API
/// server, as a kubelet or controller would.
async fn post_event(env: &Env, event: &str, kind: &str, name: &str, reason: &str) {
    let body = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": event, "namespace": "ml-team"},
        "involvedObject": {"kind": kind, "name": name, "namespace": "ml-team"},
        "reason": reason, "message": format!("{reason} of {name}"), "type": "Normal",
        "count": 1, "lastTimestamp": jiff::Timestamp::now().to_string(),
    });
    let answer = reqwest::Client::new()
        .post(format!("{}/api/v1/namespaces/ml-team/events", env.sandbox.url()))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(answer.status().is_success(), "{}", answer.text().await.unwrap());
}

#[tokio::test]
async fn only_events_about_ray_objects_are_cached_and_a_pods_event_shows_in_describe() {
    let env = Env::start().await;
    env.ready_cluster("evt").await;
    let alice = env.rest(&env.alice());
    let details = alice.get(&format!("{NS}/evt/details")).await.expect(200).body;
    let head = details["pods"][0]["name"].as_str().unwrap().to_owned();
    let dropped_before = env.metric("krayne_cache_events_dropped_total", "").await;

    for i in 0..20 {
        post_event(&env, &format!("web-{i}"), "Pod", &format!("web-7d9f8-{i}"), "Pulled").await;
    }
    post_event(&env, "deploy", "Deployment", "evt", "ScalingReplicaSet").await;
    post_event(&env, "ray-pod", "Pod", &head, "KrayneProbe").await;

    let started = Instant::now();
    loop {
        let d = alice.get(&format!("{NS}/evt/details")).await.expect(200).body;
        let reasons: Vec<&str> = d["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e["reason"].as_str())
            .collect();
        if reasons.contains(&"KrayneProbe") {
            assert!(!reasons.contains(&"ScalingReplicaSet"), "another kind's event: {d}");
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{d}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let dropped = env.metric("krayne_cache_events_dropped_total", "").await - dropped_before;
    assert!(
        dropped >= 21.0,
        "{dropped} events dropped, 21 were about other workloads"
    );
    // What the cache holds is what the API server holds minus those.
    let all: Value = reqwest::get(format!("{}/api/v1/events", env.sandbox.url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let total = all["items"].as_array().unwrap().len();
    let cached = env.metric("krayne_cache_objects", "kind=\"events\"").await;
    assert!(
        cached <= (total - 21) as f64,
        "{cached} events cached of {total}, 21 of them not Ray's"
    );
}
