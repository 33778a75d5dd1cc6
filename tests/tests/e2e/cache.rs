//! The watch cache: correct under churn, through watch disconnects and
//! `410 Gone`, reads after one's own writes, waits without Kubernetes
//! watches, no Kubernetes request per cached read, and read-through mode.

use std::{collections::BTreeMap, time::Duration};

use krayne_tests::{Env, EnvOptions, Rest};
use serde_json::{Value, json};

const NS: &str = "/v1/namespaces/ml-team/clusters";

fn spec(name: &str, replicas: u32) -> Value {
    json!({"name": name, "worker_groups": [{"name": "cpu", "replicas": replicas, "max_replicas": 8}]})
}

/// The sandbox's own API, for writes that bypass krayne.
fn sandbox_url(env: &Env, path: &str) -> String {
    format!(
        "{}/apis/ray.io/v1/namespaces/ml-team/rayclusters{path}",
        env.sandbox.url()
    )
}

/// Name → (workers wanted, status) of every cluster in ml-team, as krayne
/// reports them.
async fn krayne_view(admin: &Rest) -> BTreeMap<String, (i64, String)> {
    let list = admin.get(&format!("{NS}?page_size=500")).await.expect(200);
    list.body["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let wanted = c["num_workers"].as_i64().unwrap_or(-1);
            (
                c["name"].as_str().unwrap().to_owned(),
                (wanted, c["status"].as_str().unwrap_or("").to_owned()),
            )
        })
        .collect()
}

/// The same, straight from the sandbox (status through krayne's own rules
/// is not needed here: names and replicas say whether the cache is right).
async fn sandbox_names(env: &Env) -> BTreeMap<String, i64> {
    let list: Value = reqwest::get(sandbox_url(env, "")).await.unwrap().json().await.unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let replicas = c["spec"]["workerGroupSpecs"][0]["replicas"].as_i64().unwrap_or(-1);
            (c["metadata"]["name"].as_str().unwrap().to_owned(), replicas)
        })
        .collect()
}

/// Waits until krayne's view of names and replicas equals the sandbox's.
async fn converges(env: &Env, admin: &Rest) -> BTreeMap<String, (i64, String)> {
    let mut last = (BTreeMap::new(), BTreeMap::new());
    for _ in 0..200 {
        let truth = sandbox_names(env).await;
        let seen = krayne_view(admin).await;
        let names: BTreeMap<String, i64> = seen.iter().map(|(n, (r, _))| (n.clone(), *r)).collect();
        if names == truth {
            return seen;
        }
        last = (names, truth);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "krayne's cache never matched the sandbox: krayne {:?}, sandbox {:?}",
        last.0, last.1
    );
}

fn kube_reads(env: &Env) -> usize {
    env.sandbox
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && !r.uri.contains("watch=") && r.uri != "/version")
        .count()
}

#[tokio::test]
async fn the_cache_stays_correct_under_churn() {
    // One admin token drives all the churn: no rate limit.
    let env = Env::start_with(EnvOptions::with_args(&["--rate-limit-per-second", "0"])).await;
    let admin = env.rest(&env.admin());
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let admin = admin.clone();
            tokio::spawn(async move {
                let mut reads = 0;
                for _ in 0..150 {
                    let list = admin.get(NS).await;
                    assert_eq!(list.status, 200, "{}", list.text);
                    for c in list.body["clusters"].as_array().unwrap() {
                        let one = admin.get(&format!("{NS}/{}", c["name"].as_str().unwrap())).await;
                        assert!(one.status == 200 || one.status == 404, "{}", one.text);
                        reads += 1;
                    }
                }
                reads
            })
        })
        .collect();
    let http = reqwest::Client::new();
    for round in 0..12 {
        let name = format!("churn-{round}");
        admin.post(NS, &spec(&name, 1)).await.expect(201);
        if round % 2 == 0 {
            admin
                .post(
                    &format!("{NS}/{name}/scale"),
                    &json!({"worker_group": "cpu", "replicas": 3}),
                )
                .await
                .expect(200);
        }
        if round % 3 == 0 {
            admin.delete(&format!("{NS}/{name}")).await.expect(204);
        }
        if round % 4 == 1 && round % 3 != 0 {
            // Behind krayne's back: the cache learns it from the watch.
            let gone = http
                .delete(sandbox_url(&env, &format!("/{name}")))
                .send()
                .await
                .unwrap();
            assert!(gone.status().is_success());
        }
    }
    for reader in readers {
        assert!(reader.await.unwrap() > 0);
    }
    let view = converges(&env, &admin).await;
    assert_eq!(
        view.keys().cloned().collect::<Vec<_>>(),
        ["churn-10", "churn-11", "churn-2", "churn-4", "churn-7", "churn-8"]
    );
    assert_eq!(view["churn-2"].0, 3);
    assert_eq!(view["churn-7"].0, 1);
}

#[tokio::test]
async fn the_cache_survives_a_watch_disconnect_and_410_gone() {
    let env = Env::start().await;
    let admin = env.rest(&env.admin());
    admin.post(NS, &spec("before", 1)).await.expect(201);
    let manifest = admin
        .post(&format!("{NS}?dry_run=true"), &spec("direct", 1))
        .await
        .expect(200)
        .body["manifest"]
        .clone();
    let manifest = krayne_tests::made_elsewhere(manifest);
    let http = reqwest::Client::new();

    env.sandbox.disconnect_watches();
    let created = http.post(sandbox_url(&env, "")).json(&manifest).send().await.unwrap();
    assert!(created.status().is_success(), "{}", created.text().await.unwrap());
    converges(&env, &admin).await;

    // Compaction, then a broken watch: resuming gets 410 Gone, so the
    // watchers list again; a deletion made meanwhile must show.
    env.sandbox.compact();
    env.sandbox.disconnect_watches();
    let gone = http.delete(sandbox_url(&env, "/before")).send().await.unwrap();
    assert!(gone.status().is_success());
    let view = converges(&env, &admin).await;
    assert_eq!(view.keys().collect::<Vec<_>>(), ["direct"]);

    // Meanwhile reads went to Kubernetes; once the list is done, the cache
    // serves again.
    let ops = Rest::new(&format!("http://{}", env.server.ops), None);
    let relists = "krayne_cache_relists_total{kind=\"rayclusters\"}";
    let mut metrics = String::new();
    for _ in 0..100 {
        metrics = ops.get("/metrics").await.expect(200).text;
        if counter(&metrics, relists) >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        counter(&metrics, relists) >= 2,
        "the first list and the one after 410: {metrics}"
    );
    assert!(counter(&metrics, "krayne_cache_watch_errors_total{kind=\"rayclusters\"}") >= 1);
    assert!(metrics.contains("krayne_cache_synced{kind=\"rayclusters\"} 1"));
    // A get reads the cluster and its pods: once the pods' watchers have
    // listed again too (every kind relists after the disconnect, each in
    // its own time), neither goes to Kubernetes. Other kinds' relists and
    // the background's reads (the Lease) are not the get's.
    for _ in 0..100 {
        metrics = ops.get("/metrics").await.expect(200).text;
        if metrics.contains("krayne_cache_synced{kind=\"pods\"} 1") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cluster_reads = |env: &Env| {
        env.sandbox
            .requests()
            .iter()
            .filter(|r| {
                r.method == "GET"
                    && !r.uri.contains("watch=")
                    && (r.uri.contains("/rayclusters") || r.uri.contains("/pods"))
            })
            .count()
    };
    let before = cluster_reads(&env);
    admin.get(&format!("{NS}/direct")).await.expect(200);
    assert_eq!(cluster_reads(&env), before, "served from the cache again");
}

/// A counter's value; `series` is its name with its labels.
fn counter(metrics: &str, series: &str) -> u64 {
    krayne_tests::metric(metrics, series, "") as u64
}

#[tokio::test]
async fn reads_see_the_callers_own_writes_at_once_without_calling_kubernetes() {
    // 121 requests as fast as the server answers: past the per-principal
    // burst (100) on a quick run, and rate limits are not this test's subject.
    let env = Env::start_with(EnvOptions::with_args(&["--rate-limit-per-second", "0"])).await;
    // The companion keeper's first round (once the cache has listed) reads
    // Kubernetes for its own sake: let it end before counting the caller's.
    env.keeper_first_round().await;
    let alice = env.rest(&env.alice());
    alice.get(NS).await.expect(200);
    let before = kube_reads(&env);
    for i in 0..15 {
        let name = format!("ryw-{i}");
        alice.post(NS, &spec(&name, 1)).await.expect(201);
        alice.get(&format!("{NS}/{name}")).await.expect(200);
        let listed = alice.get(NS).await.expect(200);
        assert!(listed.text.contains(&format!("\"{name}\"")));
        alice
            .post(
                &format!("{NS}/{name}/scale"),
                &json!({"worker_group": "cpu", "replicas": 2}),
            )
            .await
            .expect(200);
        let got = alice.get(&format!("{NS}/{name}")).await.expect(200);
        assert_eq!(got.body["num_workers"], 2, "{}", got.text);
        alice.delete(&format!("{NS}/{name}")).await.expect(204);
        alice.get(&format!("{NS}/{name}")).await.problem(404, "not_found");
        alice
            .get(&format!("{NS}/{name}/details"))
            .await
            .problem(404, "not_found");
    }
    assert_eq!(kube_reads(&env), before, "every read came from the cache");
}

#[tokio::test]
async fn waits_follow_the_cache_not_a_kubernetes_watch_each() {
    let env = Env::start().await;
    let alice = env.rest(&env.alice());
    alice.post(NS, &spec("waited", 1)).await.expect(201);
    let waits: Vec<_> = (0..5)
        .map(|_| {
            let alice = alice.clone();
            tokio::spawn(async move { alice.get(&format!("{NS}/waited/wait?timeout_seconds=30")).await })
        })
        .collect();
    for wait in waits {
        let ready = wait.await.unwrap().expect(200);
        assert_eq!(ready.body["status"], "ready");
    }
    let per_waiter = env
        .sandbox
        .requests()
        .iter()
        .filter(|r| r.uri.contains("watch=") && r.uri.contains("metadata.name"))
        .count();
    assert_eq!(per_waiter, 0, "no Kubernetes watch per waiter");
}

#[tokio::test]
async fn with_the_cache_off_every_read_goes_to_kubernetes() {
    let env = Env::start_with(EnvOptions::with_args(&["--cache", "false"])).await;
    let alice = env.rest(&env.alice());
    alice.post(NS, &spec("through", 1)).await.expect(201);
    let ready = alice
        .get(&format!("{NS}/through/wait?timeout_seconds=30"))
        .await
        .expect(200);
    assert_eq!(ready.body["status"], "ready");
    let before = kube_reads(&env);
    alice.get(&format!("{NS}/through")).await.expect(200);
    alice.get(&format!("{NS}/through/details")).await.expect(200);
    assert!(kube_reads(&env) >= before + 2);
    assert!(
        !env.sandbox
            .requests()
            .iter()
            .any(|r| r.uri.starts_with("/api/v1/namespaces?") && r.uri.contains("watch=")),
        "no cache watches"
    );
    alice.delete(&format!("{NS}/through")).await.expect(204);
    alice.get(&format!("{NS}/through")).await.problem(404, "not_found");
}

/// Issue 55, item 5: onboarding a team restarts nothing. The namespaces
/// the cache covers come from a file (the chart's ConfigMap, outside the
/// pods' checksum) read again while the server runs: a namespace added
/// there is watched and served from the cache; one removed is forgotten.
#[tokio::test]
async fn a_namespace_added_to_the_file_is_cached_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("namespaces");
    std::fs::write(&file, "ml-team\n").unwrap();
    let env = Env::start_with(EnvOptions::with_args(&[
        "--cache-namespaces-file",
        file.to_str().unwrap(),
    ]))
    .await;
    let ops = env.ops();
    let metrics = || async { ops.get("/metrics").await.expect(200).text };
    assert_eq!(
        krayne_tests::metric(&metrics().await, "krayne_cache_namespaces", ""),
        1.0
    );
    let olga = env.rest(&env.token("olga@example.com", &["other-team"]));
    let from_cache = |text: &str| {
        krayne_tests::metric(
            text,
            "krayne_cache_reads_total",
            "kind=\"rayclusters\",source=\"cache\"",
        )
    };
    let before = from_cache(&metrics().await);
    olga.get("/v1/namespaces/other-team/clusters").await.expect(200);
    assert_eq!(
        from_cache(&metrics().await),
        before,
        "other-team is not covered yet: read from Kubernetes"
    );

    // The kubelet writes the ConfigMap's new contents; no pod restarts.
    std::fs::write(&file, "ml-team\nother-team  # onboarded today\n").unwrap();
    let started = std::time::Instant::now();
    loop {
        let before = from_cache(&metrics().await);
        olga.get("/v1/namespaces/other-team/clusters").await.expect(200);
        let text = metrics().await;
        if krayne_tests::metric(&text, "krayne_cache_namespaces", "") == 2.0 && from_cache(&text) > before {
            break;
        }
        let relevant: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("krayne_cache_namespaces") || l.starts_with("krayne_cache_reads_total"))
            .collect();
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "never covered: {relevant:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    olga.post("/v1/namespaces/other-team/clusters", &json!({"name": "onboarded"}))
        .await
        .expect(201);
    olga.get("/v1/namespaces/other-team/clusters/onboarded")
        .await
        .expect(200);

    // A file that names no namespace properly is not used: coverage stays.
    std::fs::write(&file, "ml-team\nNot_A_Namespace\n").unwrap();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let text = metrics().await;
    assert_eq!(
        krayne_tests::metric(&text, "krayne_cache_namespaces", ""),
        2.0,
        "{text}"
    );
    assert!(krayne_tests::metric_total(&text, "krayne_cache_namespaces_file_errors_total") >= 1.0);
}
