//! The whole life of a cluster over REST.

use krayne_tests::{Env, EnvOptions};
use serde_json::json;

const NS: &str = "/v1/namespaces/ml-team/clusters";

#[tokio::test]
async fn create_wait_describe_scale_delete() {
    let env = Env::start().await;
    let alice = env.rest(&env.alice());

    let created = alice
        .post(
            NS,
            &json!({"name": "life", "worker_groups": [{"name": "cpu", "replicas": 1, "max_replicas": 4}]}),
        )
        .await
        .expect(201);
    assert_eq!(created.body["cluster"]["name"], "life");
    assert_eq!(created.body["cluster"]["created_by"], "alice@example.com");
    assert_eq!(
        created.body["manifest"]["metadata"]["labels"]["krayne.dev/team"],
        "ml-research"
    );
    assert!(created.header("x-request-id").is_some());

    let ready = alice
        .get(&format!("{NS}/life/wait?timeout_seconds=60"))
        .await
        .expect(200);
    assert_eq!(ready.body["status"], "ready");
    assert!(ready.body["dashboard_url"].as_str().unwrap().ends_with(":8265"));

    let got = alice.get(&format!("{NS}/life")).await.expect(200);
    assert_eq!(got.body["num_workers"], 1);
    let listed = alice.get(NS).await.expect(200);
    assert_eq!(listed.body["clusters"][0]["name"], "life");
    let everywhere = alice.get("/v1/clusters").await.expect(200);
    assert_eq!(everywhere.body["clusters"].as_array().unwrap().len(), 1);

    let details = alice.get(&format!("{NS}/life/details")).await.expect(200);
    let pods = details.body["pods"].as_array().unwrap();
    assert_eq!(pods.len(), 2, "{}", details.text);
    assert_eq!(pods[0]["node_type"], "head");
    assert_eq!(details.body["worker_groups"][0]["name"], "cpu");
    assert_eq!(
        details.body["services"],
        json!(["dashboard", "client", "notebook", "code-server", "ssh"])
    );
    assert!(
        details.body["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["reason"] == "Scheduled")
    );
    assert!(
        details.body["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "HeadPodReady")
    );

    let up = alice
        .post(
            &format!("{NS}/life/scale"),
            &json!({"worker_group": "cpu", "replicas": 3}),
        )
        .await
        .expect(200);
    assert_eq!(up.body["num_workers"], 3);
    let pods_for = |n: usize| {
        let alice = alice.clone();
        async move {
            for _ in 0..500 {
                let d = alice.get(&format!("{NS}/life/details")).await.expect(200);
                if d.body["pods"].as_array().unwrap().len() == n {
                    return d;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            panic!("never saw {n} pods");
        }
    };
    pods_for(4).await;
    let down = alice
        .post(
            &format!("{NS}/life/scale"),
            &json!({"worker_group": "cpu", "replicas": 0}),
        )
        .await
        .expect(200);
    assert_eq!(down.body["num_workers"], 0);
    pods_for(1).await;

    alice.delete(&format!("{NS}/life")).await.expect(204);
    alice.get(&format!("{NS}/life")).await.problem(404, "not_found");
}

#[tokio::test]
async fn yaml_bodies_and_dry_runs() {
    let env = Env::start().await;
    let alice = env.rest(&env.alice());
    let dry = alice
        .post_yaml(&format!("{NS}?dry_run=true"), "name: dry\nhead:\n  cpus: 2\n")
        .await
        .expect(200);
    assert_eq!(dry.body["manifest"]["kind"], "RayCluster");
    assert_eq!(
        dry.body["manifest"]["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"],
        "2"
    );
    alice.get(&format!("{NS}/dry")).await.problem(404, "not_found");
    alice
        .post_yaml(NS, "name: from-yaml\nservices: {ssh: no}\n")
        .await
        .expect(201);
    alice.get(&format!("{NS}/from-yaml")).await.expect(200);
}

#[tokio::test]
async fn bad_images_and_missing_capacity_show_in_the_status() {
    let mut options = EnvOptions::default();
    options.sandbox.operator.nodes = krayne_server::sandbox::NodeCapacity::uniform(1, 8, "32Gi", 0);
    let env = Env::start_with(options).await;
    let alice = env.rest(&env.alice());
    alice
        .post(
            NS,
            &json!({"name": "img", "head": {"image": "rayproject/ray:doesnotexist"}}),
        )
        .await
        .expect(201);
    alice
        .post(
            NS,
            &json!({"name": "huge", "head": {"cpus": "64"}, "worker_groups": []}),
        )
        .await
        .expect(201);
    let status_of = |name: &'static str, want: &'static str| {
        let alice = alice.clone();
        async move {
            for _ in 0..500 {
                let r = alice.get(&format!("{NS}/{name}")).await.expect(200);
                if r.body["status"] == want {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            panic!("{name} never became {want}");
        }
    };
    status_of("img", "image-pull-error").await;
    status_of("huge", "unschedulable").await;
    // An image that cannot be pulled ends a wait at once, naming it.
    let stuck = alice
        .get(&format!("{NS}/img/wait?timeout_seconds=60"))
        .await
        .problem(409, "failed_precondition");
    let detail = stuck.body["detail"].as_str().unwrap();
    assert!(detail.contains("cannot get ready"), "{detail}");
    assert!(detail.contains("\"rayproject/ray:doesnotexist\""), "{detail}");
    // A head without room is waited for a while (room may come).
    let timeout = alice
        .get(&format!("{NS}/huge/wait?timeout_seconds=1"))
        .await
        .problem(504, "deadline_exceeded");
    assert!(
        timeout.body["detail"]
            .as_str()
            .unwrap()
            .contains("last status: unschedulable; the head is not running"),
        "{}",
        timeout.text
    );
}

/// Issue 56 item 2: a head no node has room for ends a wait once that has
/// lasted `--wait-unschedulable-seconds`, naming the scheduler's reason.
#[tokio::test]
async fn a_head_without_room_ends_a_wait_after_the_grace() {
    let env = Env::start_with(EnvOptions {
        server_args: vec!["--wait-unschedulable-seconds".into(), "1".into()],
        ..EnvOptions::default()
    })
    .await;
    let alice = env.rest(&env.alice());
    alice
        .post(
            NS,
            &json!({"name": "huge", "head": {"cpus": "64"}, "worker_groups": []}),
        )
        .await
        .expect(201);
    let stuck = alice
        .get(&format!("{NS}/huge/wait?timeout_seconds=600"))
        .await
        .problem(409, "failed_precondition");
    let detail = stuck.body["detail"].as_str().unwrap();
    assert!(
        detail.contains("cluster ml-team/huge cannot get ready: its head fits on no node ("),
        "{detail}"
    );
    assert!(detail.contains("Insufficient cpu"), "{detail}");
}

#[tokio::test]
async fn request_ids_reach_kubernetes_and_come_back() {
    let env = Env::start().await;
    let alice = env.rest(&env.alice());
    let body = serde_json::to_vec(&json!({"name": "traced"})).unwrap();
    let http = reqwest::Client::new();
    let res = http
        .post(format!("{}{NS}", env.url()))
        .bearer_auth(env.alice())
        .header("content-type", "application/json")
        .header("x-request-id", "trace-me-42")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    // The client's id comes back as its correlation id; the request id is
    // the server's own, and that is the one Kubernetes sees.
    assert_eq!(res.headers()["x-correlation-id"], "trace-me-42");
    let request_id = res.headers()["x-request-id"].to_str().unwrap().to_owned();
    assert!(uuid::Uuid::parse_str(&request_id).is_ok(), "{request_id}");
    let seen = env.sandbox.requests();
    let create = seen
        .iter()
        .find(|r| r.method == "POST" && r.uri.contains("/rayclusters"))
        .expect("the create reached the sandbox");
    assert_eq!(create.request_id.as_deref(), Some(request_id.as_str()));

    // Without one, the server makes one, echoes it and puts it in problems.
    let missing = alice.get(&format!("{NS}/nope")).await.problem(404, "not_found");
    assert_eq!(
        missing.header("x-request-id").as_deref(),
        missing.body["request_id"].as_str()
    );
    assert_eq!(missing.header("x-correlation-id"), None);
}

#[tokio::test]
async fn namespaces_and_gzip() {
    let env = Env::start().await;
    let listed = env
        .rest(&env.alice())
        .get("/v1/namespaces?page_size=1")
        .await
        .expect(200);
    assert_eq!(
        listed.body["namespaces"][0],
        json!({"namespace": "ml-team", "role": "editor", "via_teams": ["ml-research"], "quota": []})
    );
    assert!(listed.body["next_page_token"].is_string());
    let admin = env.rest(&env.admin()).get("/v1/namespaces").await.expect(200);
    let names: Vec<&str> = admin.body["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["namespace"].as_str().unwrap())
        .collect();
    // `krayne` holds the server's own pod, as on a cluster.
    assert_eq!(names, ["default", "krayne", "ml-team", "other-team", "shared-data"]);

    let res = reqwest::Client::new()
        .get(format!("{}/openapi.json", env.url()))
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["content-encoding"], "gzip");
}
