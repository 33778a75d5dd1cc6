//! Issue 38: a NetworkPolicy beside every cluster krayne creates, so that
//! no pod but the cluster's own and krayne's reaches its head (Ray's Jobs
//! API runs whatever it is sent): what krayne asks Kubernetes for, that it
//! fails closed, and — with the sandbox enforcing policies on its pod-IP
//! listeners as a network plugin does — a neighbour's view.

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

/// A connection to `ip:port` made from `from` (a pod's IP): what the first
/// request reads back, `None` when the connection is closed unanswered.
async fn from_pod(from: &str, ip: &str, port: u16) -> Option<String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind((from.parse::<std::net::IpAddr>().unwrap(), 0).into())
        .unwrap();
    let mut stream = socket
        .connect((ip.parse::<std::net::IpAddr>().unwrap(), port).into())
        .await
        .ok()?;
    let request = format!("GET /api/version HTTP/1.1\r\nHost: {ip}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut answer = Vec::new();
    let read = tokio::time::timeout(std::time::Duration::from_secs(5), stream.read_to_end(&mut answer)).await;
    (read.is_ok() && !answer.is_empty()).then(|| String::from_utf8_lossy(&answer).into_owned())
}

/// The IPs of `cluster`'s pods in `namespace` of the sandbox, head first.
async fn pod_ips(env: &Env, namespace: &str, cluster: &str) -> Vec<String> {
    let url = format!(
        "{}/api/v1/namespaces/{namespace}/pods?labelSelector=ray.io%2Fcluster%3D{cluster}",
        env.sandbox.url()
    );
    let list: Value = reqwest::get(url).await.unwrap().json().await.unwrap();
    let mut pods: Vec<(bool, String)> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| {
            let head = p["metadata"]["labels"]["ray.io/node-type"] == "head";
            Some((!head, p["status"]["podIP"].as_str()?.to_owned()))
        })
        .collect();
    pods.sort();
    pods.into_iter().map(|(_, ip)| ip).collect()
}

/// The sandbox enforces the policies on its pod-IP listeners as a network
/// plugin does: another team's pod cannot reach the head's Jobs API or
/// Ray client; the cluster's own pods and krayne (the direct upstream)
/// can; the notebook and SSH answer nobody at the pod's IP at all.
#[tokio::test]
async fn a_neighbours_pod_reaches_nothing_of_the_head_and_krayne_reaches_all_five() {
    let env = Env::start_with(krayne_tests::EnvOptions::with_args(&["--service-upstream", "direct"])).await;
    let alice = env.rest(&env.alice());
    for (rest, namespace, name) in [
        (&alice, "ml-team", "target"),
        (
            &env.rest(&env.token("olga@example.com", &["other-team"])),
            "other-team",
            "neighbour",
        ),
    ] {
        rest.post(
            &format!("/v1/namespaces/{namespace}/clusters"),
            &json!({"name": name, "worker_groups": [{"name": "cpu", "replicas": 1}]}),
        )
        .await
        .expect(201);
        rest.get(&format!(
            "/v1/namespaces/{namespace}/clusters/{name}/wait?timeout_seconds=60"
        ))
        .await
        .expect(200);
    }
    let target = pod_ips(&env, "ml-team", "target").await;
    let neighbour = pod_ips(&env, "other-team", "neighbour").await;
    let (head, own_worker, stranger) = (&target[0], &target[1], &neighbour[0]);

    for port in [8265, 10001] {
        assert_eq!(
            from_pod(stranger, head, port).await,
            None,
            "another team's pod reached {port}"
        );
    }
    let answered = from_pod(own_worker, head, 8265).await.unwrap();
    assert!(answered.contains("ray_version"), "the cluster's own pod: {answered}");
    for port in [8888, 22] {
        assert_eq!(
            from_pod(own_worker, head, port).await,
            None,
            "{port} answered at the pod's IP"
        );
    }

    // Through krayne, an editor reaches all five.
    let services = alice
        .get("/v1/namespaces/ml-team/clusters/target/services")
        .await
        .expect(200)
        .body;
    let states: Vec<(&str, &str)> = services["services"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), s["state"].as_str().unwrap()))
        .collect();
    assert_eq!(
        states,
        [
            ("dashboard", "available"),
            ("client", "available"),
            ("notebook", "available"),
            ("code-server", "available"),
            ("ssh", "available")
        ]
    );
    let version = alice
        .get("/v1/namespaces/ml-team/clusters/target/services/dashboard/proxy/api/version")
        .await
        .expect(200);
    assert!(version.text.contains("ray_version"));
}
