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
    env.sandbox.forbid("patch", "networkpolicies");
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
    http_from_pod(from, ip, port, "/api/version", None).await
}

/// `GET path` on `ip:port` from `from` (a pod's IP), with `authorization`
/// when given: the answer, `None` when the connection is closed unanswered.
pub(crate) async fn http_from_pod(
    from: &str,
    ip: &str,
    port: u16,
    path: &str,
    authorization: Option<&str>,
) -> Option<String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind((from.parse::<std::net::IpAddr>().unwrap(), 0).into())
        .unwrap();
    let mut stream = socket
        .connect((ip.parse::<std::net::IpAddr>().unwrap(), port).into())
        .await
        .ok()?;
    let auth = authorization
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {ip}\r\n{auth}Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut answer = Vec::new();
    let read = tokio::time::timeout(std::time::Duration::from_secs(5), stream.read_to_end(&mut answer)).await;
    (read.is_ok() && !answer.is_empty()).then(|| String::from_utf8_lossy(&answer).into_owned())
}

/// Ready clusters `target` (alice's, in ml-team) and `neighbour` (another
/// team's, in other-team), each with a worker.
pub(crate) async fn target_and_neighbour(env: &Env, target: &str) {
    let alice = env.rest(&env.alice());
    for (rest, namespace, name) in [
        (&alice, "ml-team", target),
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
}

/// The IPs of `cluster`'s pods in `namespace` of the sandbox, head first.
pub(crate) async fn pod_ips(env: &Env, namespace: &str, cluster: &str) -> Vec<String> {
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
    target_and_neighbour(&env, "target").await;
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
    // The cluster's own pod gets through the policy, to Ray's token check
    // (its real processes carry the token; this bare request does not).
    let answered = from_pod(own_worker, head, 8265).await.unwrap();
    assert!(
        answered.starts_with("HTTP/1.1 401") && answered.contains("Missing authentication token"),
        "the cluster's own pod: {answered}"
    );
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

/// POSTs `object` to the sandbox's `path` (as kubectl or an older krayne
/// would), returning what it stored.
async fn sandbox_create(env: &Env, path: &str, object: &Value) -> Value {
    let answer = reqwest::Client::new()
        .post(format!("{}{path}", env.sandbox.url()))
        .json(object)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 201, "{path}");
    answer.json().await.unwrap()
}

/// The policy beside `cluster` once it is owned by `uid`, within 20 s.
async fn policy_owned_by(env: &Env, cluster: &str, uid: &Value) -> Value {
    for _ in 0..400 {
        let found = policies(env).await;
        if let Some(p) = found
            .iter()
            .find(|p| p["metadata"]["name"] == format!("{cluster}-krayne-ingress"))
            .filter(|p| p["metadata"]["ownerReferences"][0]["uid"] == *uid)
        {
            return p.clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("{cluster} never got its policy: {:?}", policies(env).await);
}

/// Issue 55, item 2: the policy is kept, not only created. A cluster made
/// while policies were off (here: straight to Kubernetes, as before an
/// upgrade) gets its policy from the keeper without its pods restarting;
/// the keeper says so in a metric and an audit row; a changed
/// `--cluster-network-policy-extra-ingress` reaches clusters already there.
#[tokio::test]
async fn clusters_made_before_policies_get_theirs_without_a_restart() {
    let env = Env::start().await;
    // The running server's keeper makes its first round once its cache has
    // listed; the cluster below is made after it, as after an upgrade.
    env.keeper_first_round().await;
    let alice = env.rest(&env.alice());
    let manifest = alice
        .post(
            "/v1/namespaces/ml-team/clusters?dry_run=true",
            &json!({"name": "older"}),
        )
        .await
        .expect(200)
        .body["manifest"]
        .clone();
    let manifest = krayne_tests::made_elsewhere(manifest);
    let created = sandbox_create(&env, "/apis/ray.io/v1/namespaces/ml-team/rayclusters", &manifest).await;
    let mut waited = alice
        .get("/v1/namespaces/ml-team/clusters/older/wait?timeout_seconds=60")
        .await;
    for _ in 0..100 {
        if waited.status != 404 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        waited = alice
            .get("/v1/namespaces/ml-team/clusters/older/wait?timeout_seconds=60")
            .await;
    }
    waited.expect(200);
    let head_before = pod_ips(&env, "ml-team", "older").await;
    assert!(policies(&env).await.is_empty(), "made without krayne: no policy yet");

    let scrape = r#"[{"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
                      "ports": [{"port": 8080, "protocol": "TCP"}]}]"#;
    let keeper = env
        .spawn_server(&[
            "--companions-interval-seconds",
            "1",
            "--cluster-network-policy-extra-ingress",
            scrape,
        ])
        .await;
    let policy = policy_owned_by(&env, "older", &created["metadata"]["uid"]).await;
    let rules = policy["spec"]["ingress"].as_array().unwrap();
    assert_eq!(rules.len(), 3, "krayne's two rules and the platform's: {policy}");
    assert_eq!(rules[2]["ports"][0]["port"], 8080);
    assert_eq!(
        pod_ips(&env, "ml-team", "older").await,
        head_before,
        "the cluster's pods were not restarted"
    );
    let metrics = krayne_tests::Rest::new(&format!("http://{}", keeper.ops), None)
        .get("/metrics")
        .await
        .expect(200)
        .text;
    assert!(
        krayne_tests::metric(
            &metrics,
            "krayne_network_policies_backfilled_total",
            "reason=\"missing\""
        ) >= 1.0,
        "{metrics}"
    );
    let rows = env
        .audit_rows_eventually("action=cluster.protect&cluster=older", 1)
        .await;
    let row = &rows[0];
    assert_eq!(
        row["actor"]["subject"],
        krayne_server::control::LIFECYCLE_SUBJECT,
        "{row}"
    );
    assert_eq!(row["transport"], "system", "{row}");
    assert_eq!(row["outcome"], "succeeded", "{row}");
    assert_eq!(row["request_summary"]["network_policy"], "missing", "{row}");
}

/// Issue 55, item 2: a policy left over from an older cluster of the same
/// name (its owner gone, its rules wide open) no longer blocks a create
/// (it was `503 cluster "x-krayne-ingress" already exists`): krayne takes
/// it over with its own rules and the new cluster as its owner.
#[tokio::test]
async fn a_leftover_policy_of_the_same_name_is_taken_over() {
    let env = Env::start().await;
    let orphan = json!({
        "metadata": {"name": "reborn-krayne-ingress", "labels": {"app.kubernetes.io/managed-by": "krayne"},
                     "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "reborn",
                                          "uid": "a-cluster-long-gone"}]},
        "spec": {"podSelector": {}, "ingress": [{}], "policyTypes": ["Ingress"]},
    });
    sandbox_create(
        &env,
        "/apis/networking.k8s.io/v1/namespaces/ml-team/networkpolicies",
        &orphan,
    )
    .await;
    env.ready_cluster("reborn").await;
    let cluster = env
        .rest(&env.alice())
        .get("/v1/namespaces/ml-team/clusters/reborn")
        .await
        .expect(200);
    assert_eq!(cluster.body["name"], "reborn");
    let found = policies(&env).await;
    assert_eq!(found.len(), 1, "{found:?}");
    let policy = &found[0];
    assert_ne!(policy["metadata"]["ownerReferences"][0]["uid"], "a-cluster-long-gone");
    assert_eq!(
        policy["spec"]["podSelector"]["matchLabels"]["ray.io/cluster"], "reborn",
        "krayne's rules replaced the open ones: {policy}"
    );
    assert_eq!(policy["spec"]["ingress"].as_array().unwrap().len(), 2, "{policy}");
}
