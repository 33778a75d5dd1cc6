//! Several Kubernetes clusters behind one API (issue 62, docs/sites.md):
//! two sandboxes as two sites behind one `serve` (and a second replica on
//! the same Postgres): placement by an explicit site, GPU type, weight and
//! the team's sites; a name unique across the fleet, also when two
//! replicas race for it in two sites; reads, lists and watches merging
//! both; services and jobs reached in the cluster's own site; a quota
//! across sites and a site's cap; and a site killed mid-test.

use std::time::Duration;

use krayne_server::sandbox::Sandbox;
use krayne_tests::{
    Env, Reply, Rest,
    sites::two_sites,
    watch::{Framing, Watch},
};
use serde_json::{Value, json};

const NS: &str = "/v1/namespaces/ml-team/clusters";

/// The RayClusters Kubernetes holds in `namespace` of a sandbox, by name.
async fn held(sandbox: &Sandbox, namespace: &str) -> Vec<String> {
    let list: Value = reqwest::get(format!(
        "{}/apis/ray.io/v1/namespaces/{namespace}/rayclusters",
        sandbox.url()
    ))
    .await
    .expect("sandbox")
    .json()
    .await
    .expect("JSON");
    let mut names: Vec<String> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    names.sort();
    names
}

/// `path`'s reply once `done` holds for it, asked every 100 ms for at
/// most `within`.
async fn until(rest: &Rest, path: &str, within: Duration, done: impl Fn(&Reply) -> bool) -> Reply {
    let started = std::time::Instant::now();
    loop {
        let reply = rest.get(path).await;
        if done(&reply) {
            return reply;
        }
        assert!(started.elapsed() < within, "{path} never got there: {}", reply.text);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A watch of ml-team's clusters through the server at `base`, as alice.
async fn watch_clusters(env: &Env, base: &str) -> Watch {
    let bearer = format!("Bearer {}", env.alice());
    Watch::open(
        &format!("{base}{NS}?watch=true"),
        &[("authorization", &bearer)],
        Framing::Ndjson,
    )
    .await
    .unwrap_or_else(|(status, body)| panic!("watch refused: {status} {body}"))
}

fn gpu_cluster(name: &str, gpu_type: &str) -> Value {
    json!({"name": name, "worker_groups": [{"name": "gpu", "replicas": 0, "max_replicas": 1, "gpus": 1, "gpu_type": gpu_type}]})
}

#[tokio::test]
async fn clusters_are_placed_by_site_gpu_type_weight_and_team_and_read_as_one_fleet() {
    let (env, second, _dir) = two_sites(None, None, &[]).await;
    let alice = env.rest(&env.alice());
    let mut watch = watch_clusters(&env, &env.url()).await;

    // Without a site or GPU type: the heaviest site.
    let a = alice.post(NS, &json!({"name": "a"})).await.expect(201);
    assert_eq!(a.body["cluster"]["site"], "eu-1", "{}", a.text);
    assert!(
        a.body["placement"].as_str().is_some_and(|p| p.contains("weight")),
        "{}",
        a.text
    );
    // A GPU type only the lighter site offers: there.
    let b = alice.post(NS, &gpu_cluster("b", "h100")).await.expect(201);
    assert_eq!(b.body["cluster"]["site"], "us-2", "{}", b.text);
    assert!(
        b.body["placement"]
            .as_str()
            .is_some_and(|p| p.contains("eu-1: offers no h100 GPUs")),
        "{}",
        b.text
    );
    // A site named: there, though it is lighter.
    let c = alice.post(NS, &json!({"name": "c", "site": "us-2"})).await.expect(201);
    assert_eq!(c.body["cluster"]["site"], "us-2", "{}", c.text);
    assert_eq!(held(&env.sandbox, "ml-team").await, ["a"]);
    assert_eq!(held(&second, "ml-team").await, ["b", "c"]);
    // One watch hears both sites, each cluster saying its own.
    let heard = watch
        .until(Duration::from_secs(20), |f| {
            f.kind() == "ADDED" && f.cluster() == Some("c")
        })
        .await;
    let added: Vec<(&str, &str)> = heard
        .iter()
        .filter(|f| f.kind() == "ADDED")
        .map(|f| (f.cluster().unwrap(), f.json["cluster"]["site"].as_str().unwrap()))
        .collect();
    assert_eq!(added, [("a", "eu-1"), ("b", "us-2"), ("c", "us-2")]);

    // A dry run says where it would go, and makes nothing.
    let dry = alice
        .post(&format!("{NS}?dry_run=true"), &gpu_cluster("d", "h100"))
        .await
        .expect(200);
    assert_eq!(dry.body["cluster"]["site"], "us-2", "{}", dry.text);
    assert_eq!(held(&second, "ml-team").await, ["b", "c"]);

    // What cannot be placed is refused, with each site's reason.
    let nowhere = alice
        .post(NS, &gpu_cluster("e", "v100"))
        .await
        .problem(409, "failed_precondition");
    for why in ["eu-1: offers no v100 GPUs (offers: a100)", "us-2: offers no v100 GPUs"] {
        assert!(nowhere.text.contains(why), "{}", nowhere.text);
    }
    let unknown = alice
        .post(NS, &json!({"name": "e", "site": "mars"}))
        .await
        .problem(400, "invalid_argument");
    assert_eq!(unknown.violation_fields(), ["site"], "{}", unknown.text);

    // A name is the fleet's: taken in one site, refused in the other.
    alice
        .post(NS, &json!({"name": "a", "site": "us-2"}))
        .await
        .problem(409, "already_exists");
    assert_eq!(held(&second, "ml-team").await, ["b", "c"]);

    // A team's sites: `other` may use us-2 only, so goes there by default,
    // and is refused eu-1.
    let other = env.rest(&env.token("bob@example.com", &["other-team"]));
    let o = other
        .post("/v1/namespaces/other-team/clusters", &json!({"name": "o"}))
        .await
        .expect(201);
    assert_eq!(o.body["cluster"]["site"], "us-2", "{}", o.text);
    other
        .post(
            "/v1/namespaces/other-team/clusters",
            &json!({"name": "o2", "site": "eu-1"}),
        )
        .await
        .problem(403, "permission_denied");

    // gRPC names and answers the site too.
    let mut grpc = env.grpc(&env.alice()).await;
    let via_grpc = grpc
        .clusters
        .create_cluster(krayne_proto::v1::CreateClusterRequest {
            source: Some(krayne_proto::v1::create_cluster_request::Source::Spec(
                krayne_proto::v1::ClusterSpec {
                    name: "g".into(),
                    namespace: Some("ml-team".into()),
                    site: Some("us-2".into()),
                    ..Default::default()
                },
            )),
            dry_run: true,
            field_validation: 0,
            queue: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(via_grpc.cluster.unwrap().site, "us-2");
    assert_eq!(via_grpc.placement.as_deref(), Some("the site asked for"));
    let got = grpc
        .clusters
        .get_cluster(krayne_proto::v1::GetClusterRequest {
            namespace: "ml-team".into(),
            name: "b".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.site, "us-2");
    let other_grants = env
        .grpc(&env.token("bob@example.com", &["other-team"]))
        .await
        .identity
        .who_am_i(krayne_proto::v1::WhoAmIRequest {})
        .await
        .unwrap()
        .into_inner()
        .grants;
    assert_eq!(other_grants[0].sites, ["us-2"]);

    // Reads: each cluster from its own site, lists merging both, in order.
    let got = alice.get(&format!("{NS}/b")).await.expect(200);
    assert_eq!(
        (got.body["site"].as_str(), got.body["site_unavailable_since"].as_str()),
        (Some("us-2"), None)
    );
    let listed = alice.get(NS).await.expect(200);
    assert_eq!(listed.names(), ["a", "b", "c"], "{}", listed.text);
    let sites: Vec<&str> = listed.body["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["site"].as_str().unwrap())
        .collect();
    assert_eq!(sites, ["eu-1", "us-2", "us-2"]);
    let admin = env.rest(&env.admin());
    let everywhere = admin.get("/v1/clusters").await.expect(200);
    assert_eq!(everywhere.names(), ["a", "b", "c", "o"], "{}", everywhere.text);
    let page = admin.get("/v1/clusters?page_size=2").await.expect(200);
    assert_eq!(page.names(), ["a", "b"], "{}", page.text);
    let token = page.body["next_page_token"].as_str().expect("a next page").to_owned();
    let rest = admin
        .get(&format!("/v1/clusters?page_size=2&page_token={token}"))
        .await
        .expect(200);
    assert_eq!(rest.names(), ["c", "o"], "{}", rest.text);

    // Services and jobs reach the cluster's own site: b's head is in us-2.
    let ready = alice.get(&format!("{NS}/b/wait?timeout_seconds=60")).await.expect(200);
    assert_eq!(ready.body["status"], "ready", "{}", ready.text);
    assert_eq!(ready.body["site"], "us-2", "{}", ready.text);
    let version = alice
        .get(&format!("{NS}/b/services/dashboard/proxy/api/version"))
        .await
        .expect(200);
    assert!(version.text.contains("ray_version"), "{}", version.text);
    let submitted = alice
        .post(
            &format!("{NS}/b/jobs"),
            &json!({"entrypoint": "echo from-us-2", "submission_id": "where"}),
        )
        .await
        .expect(201);
    assert_eq!(submitted.body["id"], "where", "{}", submitted.text);
    until(&alice, &format!("{NS}/b/jobs/where"), Duration::from_secs(30), |job| {
        job.body["status"] == "SUCCEEDED"
    })
    .await;
    let logs = alice.get(&format!("{NS}/b/jobs/where/logs")).await.expect(200);
    assert!(logs.text.contains("from-us-2"), "{}", logs.text);
    let head_log = alice.get(&format!("{NS}/b/logs")).await.expect(200);
    assert!(!head_log.text.is_empty());
    let described = alice.get(&format!("{NS}/b/details")).await.expect(200);
    assert_eq!(described.body["info"]["site"], "us-2", "{}", described.text);
    assert!(
        described.body["pods"].as_array().is_some_and(|p| !p.is_empty()),
        "{}",
        described.text
    );

    // Deletes reach the right site too.
    alice.delete(&format!("{NS}/c")).await.expect(204);
    let started = std::time::Instant::now();
    while held(&second, "ml-team").await.contains(&"c".to_owned()) {
        assert!(started.elapsed() < Duration::from_secs(20), "c was not deleted in us-2");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Each action's audit row says its site.
    let deleted = env.audit_rows_eventually("action=cluster.delete&cluster=c", 1).await;
    assert_eq!(deleted[0]["request_summary"]["site"], "us-2", "{:?}", deleted[0]);
    let created = env.audit_rows_eventually("action=cluster.create&cluster=a", 1).await;
    assert_eq!(created[0]["request_summary"]["site"], "eu-1", "{:?}", created[0]);

    // A RayJob and its cluster are placed as a cluster is.
    let run = alice
        .post(
            "/v1/namespaces/ml-team/rayjobs",
            &json!({"name": "train", "entrypoint": "python -c 'print(1)'", "cluster": {"worker_groups": [{"name": "gpu", "replicas": 0, "gpus": 1, "gpu_type": "h100"}]}}),
        )
        .await
        .expect(201);
    assert_eq!(run.body["rayjob"]["site"], "us-2", "{}", run.text);
    let jobs: Value = reqwest::get(format!("{}/apis/ray.io/v1/namespaces/ml-team/rayjobs", second.url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(jobs["items"][0]["metadata"]["name"], "train", "{jobs}");
    let got = alice.get("/v1/namespaces/ml-team/rayjobs/train").await.expect(200);
    assert_eq!(got.body["site"], "us-2", "{}", got.text);
    alice
        .post(
            "/v1/namespaces/ml-team/rayjobs",
            &json!({"name": "train", "entrypoint": "true", "cluster": {"site": "eu-1"}}),
        )
        .await
        .expect(409);

    let readyz = env.ops().get("/readyz").await.expect(200);
    assert_eq!(readyz.body["sites"]["us-2"]["status"], "up", "{}", readyz.text);
    assert_eq!(readyz.body["sites"]["eu-1"]["status"], "up", "{}", readyz.text);
}

/// The automation that acts on others' clusters covers every site: usage
/// accounting counts a cluster in us-2, and the lifecycle reaper warns and
/// deletes it there, each row saying its site.
#[tokio::test]
async fn the_reaper_and_usage_accounting_cover_every_site_and_say_it() {
    let reaper: Vec<&str> = krayne_tests::FAST_REAPER
        .into_iter()
        .chain(["--usage-record-seconds", "1"])
        .collect();
    let (env, second, _dir) = two_sites(None, None, &reaper).await;
    let alice = env.rest(&env.alice());
    alice
        .post(NS, &json!({"name": "far", "site": "us-2"}))
        .await
        .expect(201);
    alice
        .get(&format!("{NS}/far/wait?timeout_seconds=60"))
        .await
        .expect(200);
    // Its head's CPU is counted while it runs in us-2.
    until(&alice, "/v1/namespaces/ml-team/usage", Duration::from_secs(30), |u| {
        u.body["totals"]["cpu_hours"].as_f64().is_some_and(|h| h > 0.0)
    })
    .await;

    // A lifetime policy: the reaper warns it, then deletes it in us-2.
    let teams = std::fs::read_to_string(env.teams_file()).unwrap();
    std::fs::write(
        env.teams_file(),
        format!("{teams}lifecycle:\n  ml-team: {{ max_lifetime: 8s, warn_before: 4s, on_expiry: delete }}\n"),
    )
    .unwrap();
    until(&alice, &format!("{NS}/far"), Duration::from_secs(60), |r| {
        r.status == 404
    })
    .await;
    assert!(held(&second, "ml-team").await.is_empty(), "deleted in us-2");
    for action in ["lifecycle.warn", "cluster.delete"] {
        let rows = env
            .audit_rows_eventually(&format!("action={action}&cluster=far&actor=system:krayne-lifecycle"), 1)
            .await;
        assert_eq!(rows[0]["request_summary"]["site"], "us-2", "{action}: {:?}", rows[0]);
    }
}

#[tokio::test]
async fn a_name_raced_for_in_two_sites_by_two_replicas_is_made_once_and_quotas_span_sites() {
    let db = krayne_tests::test_database().await;
    let (env, second, _dir) = two_sites(Some("{ clusters: 3 }"), Some(db.url.clone()), &[]).await;
    let replica = env.spawn_server(&[]).await;
    let token = env.alice();
    let http = reqwest::Client::new();
    for round in 0..5 {
        let name = format!("race-{round}");
        let creates = [(env.url(), "eu-1"), (format!("http://{}", replica.api), "us-2")].map(|(base, site)| {
            let (http, token, name) = (http.clone(), token.clone(), name.clone());
            async move {
                let reply = http
                    .post(format!("{base}{NS}"))
                    .bearer_auth(token)
                    .json(&json!({"name": name, "site": site}))
                    .send()
                    .await
                    .unwrap();
                (reply.status().as_u16(), reply.text().await.unwrap())
            }
        });
        let mut replies = futures::future::join_all(creates).await;
        replies.sort_unstable();
        let statuses: Vec<u16> = replies.iter().map(|(s, _)| *s).collect();
        assert_eq!(statuses, [201, 409], "round {round}: {replies:?}");
        assert!(replies[1].1.contains("already_exists"), "round {round}: {replies:?}");
        let mut everywhere = held(&env.sandbox, "ml-team").await;
        everywhere.extend(held(&second, "ml-team").await);
        assert_eq!(
            everywhere,
            std::slice::from_ref(&name),
            "round {round}: made in both sites"
        );
        env.rest(&token).delete(&format!("{NS}/{name}")).await.expect(204);
        let started = std::time::Instant::now();
        while !held(&env.sandbox, "ml-team").await.is_empty() || !held(&second, "ml-team").await.is_empty() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "round {round}: not deleted"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    // The namespace's quota is the team's total across sites.
    let alice = env.rest(&token);
    alice.post(NS, &json!({"name": "q1", "site": "eu-1"})).await.expect(201);
    alice.post(NS, &json!({"name": "q2", "site": "us-2"})).await.expect(201);
    alice.post(NS, &json!({"name": "q3"})).await.expect(201);
    alice
        .post(NS, &json!({"name": "q4", "site": "us-2"}))
        .await
        .problem(429, "quota_exceeded");
    let quota = alice.get("/v1/namespaces/ml-team/quota").await.expect(200);
    let clusters = quota.body["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "clusters")
        .cloned()
        .unwrap();
    assert_eq!(clusters["used"], "3", "{}", quota.text);
}

#[tokio::test]
async fn a_sites_cap_sends_clusters_on_refuses_naming_its_site_and_admits_from_its_line() {
    let (env, second, _dir) = two_sites(Some("{ clusters: 10, sites: { eu-1: { clusters: 1 } } }"), None, &[]).await;
    let alice = env.rest(&env.alice());
    let first = alice.post(NS, &json!({"name": "c1"})).await.expect(201);
    assert_eq!(first.body["cluster"]["site"], "eu-1", "{}", first.text);
    // eu-1, the heavier, is full: the next goes on to us-2, saying why.
    let next = alice.post(NS, &json!({"name": "c2"})).await.expect(201);
    assert_eq!(next.body["cluster"]["site"], "us-2", "{}", next.text);
    assert!(
        next.body["placement"]
            .as_str()
            .is_some_and(|p| p.contains("eu-1: the namespace's cap here is full (clusters: needs 1, 0 of 1 free)")),
        "{}",
        next.text
    );
    // Asked for by name, it is refused with the site's numbers.
    let refused = alice
        .post(NS, &json!({"name": "c3", "site": "eu-1"}))
        .await
        .problem(429, "quota_exceeded");
    let violation = &refused.body["quota_violations"][0];
    assert_eq!(
        (&violation["site"], &violation["limit"], &violation["in_use"]),
        (&json!("eu-1"), &json!("1"), &json!("1")),
        "{}",
        refused.text
    );
    assert!(
        refused.body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("clusters in site eu-1")),
        "{}",
        refused.text
    );
    // gRPC names the site in its QuotaFailure.
    let mut grpc = env.grpc(&env.alice()).await;
    let status = grpc
        .clusters
        .create_cluster(krayne_proto::v1::CreateClusterRequest {
            source: Some(krayne_proto::v1::create_cluster_request::Source::Spec(
                krayne_proto::v1::ClusterSpec {
                    name: "c3".into(),
                    namespace: Some("ml-team".into()),
                    site: Some("eu-1".into()),
                    ..Default::default()
                },
            )),
            dry_run: false,
            field_validation: 0,
            queue: None,
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    let failure = tonic_types::StatusExt::get_details_quota_failure(&status).expect("a QuotaFailure");
    assert_eq!(
        failure.violations[0].subject, "namespace:ml-team/site:eu-1/clusters",
        "{failure:?}"
    );
    let quota = alice.get("/v1/namespaces/ml-team/quota").await.expect(200);
    let lines = quota.body["resources"].as_array().unwrap();
    let cap = lines.iter().find(|l| l["site"] == "eu-1").unwrap();
    assert_eq!(
        (&cap["resource"], &cap["used"], &cap["remaining"]),
        (&json!("clusters"), &json!("1"), &json!("0")),
        "{}",
        quota.text
    );
    let total = lines
        .iter()
        .find(|l| l["resource"] == "clusters" && l["site"].is_null())
        .unwrap();
    assert_eq!(total["used"], "2", "{}", quota.text);

    // One that may wait, waits in eu-1's line, and is admitted there
    // once its cap has room.
    let waits = alice
        .post(&format!("{NS}?queue=true"), &json!({"name": "c4", "site": "eu-1"}))
        .await
        .expect(202);
    assert_eq!(waits.body["cluster"]["site"], "eu-1", "{}", waits.text);
    assert_eq!(
        waits.body["cluster"]["queue_reason"], "clusters in site eu-1: needs 1, 0 of 1 free",
        "{}",
        waits.text
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let still = alice.get(&format!("{NS}/c4")).await.expect(200);
    assert_eq!(
        still.body["status"], "queued",
        "the total has room, eu-1 has none: {}",
        still.text
    );
    alice.delete(&format!("{NS}/c1")).await.expect(204);
    let c4 = until(&alice, &format!("{NS}/c4"), Duration::from_secs(30), |c4| {
        c4.body["status"] != "queued" && c4.body["suspended"] == false
    })
    .await;
    assert_eq!(c4.body["site"], "eu-1", "{}", c4.text);
    assert_eq!(held(&env.sandbox, "ml-team").await, ["c4"]);
    assert_eq!(held(&second, "ml-team").await, ["c2"]);
    // Each site's cache is a series of its own.
    let metrics = env.ops().get("/metrics").await.expect(200).text;
    for site in ["eu-1", "us-2"] {
        let series = format!("krayne_cache_synced{{kind=\"rayclusters\",site=\"{site}\"}} 1");
        assert!(metrics.contains(&series), "{series}: {metrics}");
        let objects = krayne_tests::metric(
            &metrics,
            "krayne_cache_objects",
            &format!("kind=\"rayclusters\",site=\"{site}\""),
        );
        assert!(objects >= 1.0, "{site}: {metrics}");
    }

    // An edit capping a site the sites file lacks is refused: the last
    // good mapping, and its cap, stay.
    let good = std::fs::read_to_string(env.teams_file()).unwrap();
    std::fs::write(
        env.teams_file(),
        good.replace("eu-1: { clusters: 1 }", "eu1: { clusters: 1 }"),
    )
    .unwrap();
    let started = std::time::Instant::now();
    while !env
        .server
        .log
        .lock()
        .unwrap()
        .contains("no site \"eu1\" in the sites file")
    {
        assert!(started.elapsed() < Duration::from_secs(10), "the edit was not refused");
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    alice
        .post(NS, &json!({"name": "c5", "site": "eu-1"}))
        .await
        .problem(429, "quota_exceeded");
}

#[tokio::test]
async fn a_mapping_naming_a_site_the_sites_file_lacks_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let sites = dir.path().join("sites.yaml");
    std::fs::write(
        &sites,
        "sites:\n  - name: eu-1\n  - name: us-2\n    kubeconfig: /nowhere\n",
    )
    .unwrap();
    let stderr = krayne_tests::serve_refusal(
        "teams:\n  - name: a\n    namespaces: {x: editor}\n    sites: [eu-1, us2]\n",
        &["--sites-file".as_ref(), sites.as_os_str()],
    );
    assert!(
        stderr.contains("teams[0].sites: no site \"us2\" in the sites file; its sites are: eu-1, us-2"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_site_killed_mid_test_shows_its_clusters_last_state_and_the_other_site_goes_on() {
    let (env, mut second, _dir) =
        two_sites(Some("{ clusters: 20, sites: { us-2: { clusters: 2 } } }"), None, &[]).await;
    let alice = env.rest(&env.alice());
    alice.post(NS, &json!({"name": "here"})).await.expect(201);
    let mut there = gpu_cluster("there", "a100");
    there["site"] = json!("us-2");
    alice.post(NS, &there).await.expect(201);
    let ready = alice
        .get(&format!("{NS}/there/wait?timeout_seconds=60"))
        .await
        .expect(200);
    assert_eq!(ready.body["status"], "ready", "{}", ready.text);
    alice
        .post(
            "/v1/namespaces/ml-team/rayjobs",
            &json!({"name": "far-run", "entrypoint": "sleep 600", "cluster": {"site": "us-2"}}),
        )
        .await
        .expect(201);
    // us-2 holds its cap (there, far-run's cluster): one more waits for
    // it, and in strict order one for eu-1 waits behind that.
    let queued = format!("{NS}?queue=true");
    let waiting = alice
        .post(&queued, &json!({"name": "waiting", "site": "us-2"}))
        .await
        .expect(202);
    assert_eq!(
        waiting.body["cluster"]["queue_reason"], "clusters in site us-2: needs 1, 0 of 2 free",
        "{}",
        waiting.text
    );
    let behind = alice.post(&queued, &json!({"name": "behind"})).await.expect(202);
    assert_eq!(behind.body["cluster"]["site"], "eu-1", "{}", behind.text);
    assert_eq!(
        behind.body["cluster"]["queue_reason"], "waits for waiting, ahead of it in line (order: strict)",
        "{}",
        behind.text
    );
    let mut watch = watch_clusters(&env, &env.url()).await;

    second.stop_api().await;
    let readyz = until(&env.ops(), "/readyz", Duration::from_secs(30), |r| {
        r.body["sites"]["us-2"]["status"] == "unavailable"
    })
    .await;
    // One site down does not make the replica unready.
    assert_eq!(readyz.status, 200, "{}", readyz.text);
    assert!(readyz.text.contains("site us-2: unavailable since"), "{}", readyz.text);
    // One waiting in the down site holds no one back.
    until(&alice, &format!("{NS}/behind"), Duration::from_secs(30), |b| {
        b.body["status"] != "queued" && b.body["suspended"] == false
    })
    .await;

    // Its clusters: their last state, said to be so, with since when.
    let there = alice.get(&format!("{NS}/there")).await.expect(200);
    assert_eq!(there.body["status"], "ready", "{}", there.text);
    assert_eq!(there.body["site"], "us-2", "{}", there.text);
    assert!(
        there.body["site_unavailable_since"].as_str().is_some(),
        "{}",
        there.text
    );
    // A watch hears it too: its clusters MODIFIED, marked since when.
    let heard = watch
        .until(Duration::from_secs(30), |f| {
            f.kind() == "MODIFIED"
                && f.cluster() == Some("there")
                && f.json["cluster"]["site_unavailable_since"].is_string()
        })
        .await;
    let marked = heard.last().unwrap();
    assert_eq!(
        marked.json["cluster"]["site_unavailable_since"], there.body["site_unavailable_since"],
        "{marked:?}"
    );
    assert_eq!(marked.json["cluster"]["status"], "ready", "its last state: {marked:?}");
    assert!(
        heard
            .iter()
            .all(|f| f.cluster() != Some("here") || f.json["cluster"]["site_unavailable_since"].is_null()),
        "eu-1's clusters are not marked: {heard:?}"
    );
    let listed = alice.get(NS).await.expect(200);
    // The run's cluster (us-2) is listed once KubeRay made it.
    let names: Vec<&str> = listed
        .names()
        .into_iter()
        .filter(|n| !n.starts_with("far-run"))
        .collect();
    assert_eq!(names, ["behind", "here", "there", "waiting"], "{}", listed.text);
    assert!(
        listed.body["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["site_unavailable_since"].is_string() == (c["site"] == "us-2")),
        "{}",
        listed.text
    );
    // Its RayJobs too.
    let run = alice.get("/v1/namespaces/ml-team/rayjobs/far-run").await.expect(200);
    assert_eq!(
        run.body["site_unavailable_since"], there.body["site_unavailable_since"],
        "{}",
        run.text
    );
    let runs = alice.get("/v1/namespaces/ml-team/rayjobs").await.expect(200);
    assert!(
        runs.body["rayjobs"][0]["site_unavailable_since"].is_string(),
        "{}",
        runs.text
    );
    // Changing them waits for the site; creating there is refused, saying why.
    let refused = alice.delete(&format!("{NS}/there")).await.expect(503);
    assert!(refused.text.contains("site unavailable"), "{}", refused.text);
    let named = alice
        .post(NS, &json!({"name": "n1", "site": "us-2"}))
        .await
        .problem(503, "unavailable");
    assert!(named.text.contains("site unavailable"), "{}", named.text);
    let h100 = alice.post(NS, &gpu_cluster("n2", "h100")).await.expect(409);
    assert!(h100.text.contains("us-2: site unavailable"), "{}", h100.text);
    // Creates go to the site that answers.
    let placed = alice.post(NS, &json!({"name": "n3"})).await.expect(201);
    assert_eq!(placed.body["cluster"]["site"], "eu-1", "{}", placed.text);
    let a100 = alice.post(NS, &gpu_cluster("n4", "a100")).await.expect(201);
    assert_eq!(a100.body["cluster"]["site"], "eu-1", "{}", a100.text);
    let here = alice.get(&format!("{NS}/here")).await.expect(200);
    assert_eq!(here.body["site_unavailable_since"], Value::Null, "{}", here.text);

    // Back: its clusters are live again.
    second.start_api().await.expect("us-2 back");
    until(&alice, &format!("{NS}/there"), Duration::from_secs(30), |there| {
        there.status == 200 && there.body["site_unavailable_since"].is_null()
    })
    .await;
    watch
        .until(Duration::from_secs(30), |f| {
            f.kind() == "MODIFIED"
                && f.cluster() == Some("there")
                && f.json["cluster"]["site_unavailable_since"].is_null()
        })
        .await;
    let run = alice.get("/v1/namespaces/ml-team/rayjobs/far-run").await.expect(200);
    assert!(run.body["site_unavailable_since"].is_null(), "{}", run.text);
    alice.delete(&format!("{NS}/there")).await.expect(204);
}

/// A site down when a replica starts holds nothing of the other site up:
/// the replica gets ready, lists, watches and places there.
#[tokio::test]
async fn a_site_down_when_a_replica_starts_holds_up_nothing_else() {
    let (env, mut second, _dir) = two_sites(None, None, &[]).await;
    second.stop_api().await;
    let replica = env.spawn_server(&[]).await;
    let base = format!("http://{}", replica.api);
    let alice = Rest::new(&base, Some(env.alice()));
    let readyz = Rest::new(&format!("http://{}", replica.ops), None)
        .get("/readyz")
        .await
        .expect(200);
    assert_eq!(readyz.body["sites"]["us-2"]["status"], "unavailable", "{}", readyz.text);
    let mut watch = watch_clusters(&env, &base).await;
    let made = alice.post(NS, &json!({"name": "early"})).await.expect(201);
    assert_eq!(made.body["cluster"]["site"], "eu-1", "{}", made.text);
    let heard = watch
        .until(Duration::from_secs(20), |f| {
            f.kind() == "ADDED" && f.cluster() == Some("early")
        })
        .await;
    assert!(heard.iter().any(|f| f.cluster() == Some("early")), "{heard:?}");
    assert_eq!(alice.get(NS).await.expect(200).names(), ["early"]);
}
