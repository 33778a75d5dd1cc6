//! Issue 38: a NetworkPolicy beside every cluster krayne creates, so that
//! no pod but the cluster's own and krayne's reaches its head (Ray's Jobs
//! API runs whatever it is sent). The sandbox stores NetworkPolicies as
//! the API server types them and has no network plugin to enforce them:
//! these tests check what krayne asks Kubernetes for, and that it fails
//! closed.

use k8s_openapi::api::networking::v1::NetworkPolicy;
use krayne_tests::Env;
use serde_json::{Value, json};

async fn policies(env: &Env) -> Vec<Value> {
    let url = format!(
        "{}/apis/networking.k8s.io/v1/namespaces/ml-team/networkpolicies",
        env.sandbox.url()
    );
    let list: Value = reqwest::get(url).await.unwrap().json().await.unwrap();
    list["items"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn a_created_cluster_admits_only_its_own_pods_and_kraynes() {
    let env = Env::start().await;
    env.ready_cluster("fenced").await;
    let found = policies(&env).await;
    assert_eq!(found.len(), 1, "{found:?}");
    let policy: NetworkPolicy = serde_json::from_value(found[0].clone()).unwrap();
    assert_eq!(policy.metadata.name.as_deref(), Some("fenced-krayne-ingress"));
    let owner = &policy.metadata.owner_references.unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("RayCluster", "fenced"));
    let spec = policy.spec.unwrap();
    let own = [("ray.io/cluster".to_owned(), "fenced".to_owned())].into();
    assert_eq!(spec.pod_selector.unwrap().match_labels, Some(own));
    assert_eq!(spec.policy_types, Some(vec!["Ingress".to_owned()]));
    let rules = spec.ingress.unwrap();
    let from: Vec<Value> = rules
        .iter()
        .map(|r| serde_json::to_value(r.from.as_ref().unwrap()).unwrap())
        .collect();
    assert_eq!(
        from,
        [
            json!([{"podSelector": {"matchLabels": {"ray.io/cluster": "fenced"}}}]),
            json!([{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "krayne"}},
                    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "krayne"}}}]),
        ]
    );

    // It goes with its cluster.
    env.rest(&env.alice())
        .delete("/v1/namespaces/ml-team/clusters/fenced")
        .await
        .expect(204);
    for _ in 0..100 {
        if policies(&env).await.is_empty() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the policy outlived its cluster");
}

#[tokio::test]
async fn a_cluster_whose_policy_cannot_be_made_is_not_kept() {
    let env = Env::start().await;
    env.sandbox.forbid("create", "networkpolicies");
    let refused = env
        .rest(&env.alice())
        .post("/v1/namespaces/ml-team/clusters", &json!({"name": "open"}))
        .await
        .problem(503, "unavailable");
    assert!(
        refused.body["detail"].as_str().unwrap().contains("NetworkPolicy"),
        "{}",
        refused.body
    );
    let clusters = env
        .rest(&env.alice())
        .get("/v1/namespaces/ml-team/clusters")
        .await
        .expect(200)
        .body;
    assert_eq!(clusters["clusters"], json!([]), "the unprotected cluster was deleted");
    let rows = env
        .rest(&env.admin())
        .get("/v1/audit?action=cluster.create&cluster=open")
        .await
        .expect(200)
        .body;
    assert_eq!(rows["events"][0]["outcome"], "failed", "{rows}");
}
