//! The lifecycle reaper (issue 44) with short policies: a cluster past its
//! `max_lifetime` is warned (its summary says what will happen, when and
//! why), then, `warn_before` later, suspended — or deleted with
//! `on_expiry: delete` — each step audited as `system:krayne-lifecycle`;
//! `report` mode changes nothing; of two replicas exactly one acts, and
//! when it is killed the other carries on, nothing done twice.

use std::time::{Duration, Instant};

use krayne_tests::{Env, EnvOptions, TEAMS, test_database};
use serde_json::{Value, json};

const NS: &str = "/v1/namespaces/ml-team/clusters";

fn options(mode: &str, policies: &str) -> EnvOptions {
    EnvOptions {
        teams: format!("{TEAMS}lifecycle:\n{policies}"),
        server_args: [
            "--lifecycle-policy-settle",
            "0s",
            "--lifecycle",
            mode,
            "--lifecycle-interval-seconds",
            "1",
            "--lifecycle-lease-seconds",
            "3",
        ]
        .map(str::to_owned)
        .to_vec(),
        ..EnvOptions::default()
    }
}

/// Polls `path` (as `token`) until `done` holds of its answer, within `limit`.
pub(crate) async fn until(
    env: &Env,
    token: &str,
    path: &str,
    limit: Duration,
    done: impl Fn(u16, &Value) -> bool,
) -> Value {
    let started = Instant::now();
    loop {
        let r = env.rest(token).get(path).await;
        if done(r.status, &r.body) {
            return r.body;
        }
        assert!(started.elapsed() < limit, "{path}: {} {}", r.status, r.body);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The reaper's audit rows, oldest first.
pub(crate) async fn reaper_rows(env: &Env) -> Vec<Value> {
    let rows = env
        .rest(&env.admin())
        .get("/v1/audit?page_size=1000&actor=system:krayne-lifecycle")
        .await
        .expect(200)
        .body;
    let mut rows = rows["events"].as_array().unwrap().clone();
    rows.reverse();
    rows
}

#[tokio::test]
async fn a_cluster_past_its_lifetime_is_warned_then_suspended_or_deleted() {
    let env = Env::start_with(options(
        "act",
        "  ml-team: { max_lifetime: 8s, warn_before: 4s }\n  other-team: { max_lifetime: 8s, warn_before: 4s, on_expiry: delete }\n",
    ))
    .await;
    let alice = env.alice();
    env.rest(&alice).post(NS, &json!({"name": "short"})).await.expect(201);
    let admin = env.admin();
    env.rest(&admin)
        .post("/v1/namespaces/other-team/clusters", &json!({"name": "gone"}))
        .await
        .expect(201);
    let created = Instant::now();

    // Warned first: the summary names what, when and why.
    let warned = until(&env, &alice, &format!("{NS}/short"), Duration::from_secs(30), |_, b| {
        b["lifecycle_warned_at"].is_string()
    })
    .await;
    let warned_after = created.elapsed();
    let text = warned["lifecycle"].as_str().unwrap();
    assert!(
        text.starts_with("suspend at ") && text.ends_with(": lifetime 8s reached"),
        "{text}"
    );
    assert_ne!(warned["status"], "suspended", "warned, not yet acted on");

    // Then suspended, no sooner than warn_before after the warning.
    let suspended = until(&env, &alice, &format!("{NS}/short"), Duration::from_secs(30), |_, b| {
        b["suspended"] == true
    })
    .await;
    assert!(
        created.elapsed() >= warned_after + Duration::from_secs(3),
        "acted too soon"
    );
    assert!(
        suspended["lifecycle"].is_null() && suspended["lifecycle_warned_at"].is_null(),
        "the warning goes with the action: {suspended}"
    );
    until(
        &env,
        &admin,
        "/v1/namespaces/other-team/clusters/gone",
        Duration::from_secs(30),
        |s, _| s == 404,
    )
    .await;

    let rows = reaper_rows(&env).await;
    // Besides its plan (recorded once, before the warning when a pass
    // comes that early): one warning, one action.
    let of = |cluster: &str| -> Vec<(String, String)> {
        rows.iter()
            .filter(|r| r["cluster"] == cluster && r["action"] != "lifecycle.plan")
            .map(|r| {
                (
                    r["action"].as_str().unwrap().to_owned(),
                    r["outcome"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let succeeded = |action: &str| (action.to_owned(), "succeeded".to_owned());
    assert_eq!(
        of("short"),
        [succeeded("lifecycle.warn"), succeeded("cluster.suspend")],
        "{rows:#?}"
    );
    assert_eq!(
        of("gone"),
        [succeeded("lifecycle.warn"), succeeded("cluster.delete")],
        "{rows:#?}"
    );
    let suspend = rows.iter().find(|r| r["action"] == "cluster.suspend").unwrap();
    assert_eq!(suspend["transport"], "system");
    assert_eq!(suspend["request_summary"]["reason"], "lifetime 8s reached");
    let acted = env
        .metric(
            "krayne_lifecycle_actions_total",
            "action=\"suspend\",reason=\"lifetime\",mode=\"act\"",
        )
        .await;
    assert!(acted >= 1.0, "{acted}");
}

#[tokio::test]
async fn report_mode_counts_what_it_would_do_and_changes_nothing() {
    let env = Env::start_with(options("report", "  ml-team: { max_lifetime: 3s, warn_before: 1s }\n")).await;
    let alice = env.alice();
    env.rest(&alice).post(NS, &json!({"name": "kept"})).await.expect(201);
    let started = Instant::now();
    while env
        .metric(
            "krayne_lifecycle_actions_total",
            "action=\"suspend\",reason=\"lifetime\",mode=\"report\"",
        )
        .await
        < 1.0
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "report mode never counted a suspend"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let cluster = env.rest(&alice).get(&format!("{NS}/kept")).await.expect(200).body;
    assert_eq!(cluster["suspended"], false);
    assert!(cluster["lifecycle"].is_null());
    assert!(reaper_rows(&env).await.is_empty(), "nothing written");
}

#[tokio::test]
async fn of_two_replicas_one_acts_and_the_other_takes_over_when_it_is_killed() {
    let db = test_database().await;
    let mut opts = options("act", "  ml-team: { max_lifetime: 10s, warn_before: 5s }\n");
    opts.database_url = Some(db.url.clone());
    let env = Env::start_with(opts).await;
    let second = env.spawn_server(&[]).await;
    let alice = env.alice();
    for name in ["one", "two"] {
        env.rest(&alice).post(NS, &json!({"name": name})).await.expect(201);
    }
    // Once both are warned, kill whichever replica leads (mid-cycle:
    // warned, not yet suspended).
    for name in ["one", "two"] {
        until(
            &env,
            &alice,
            &format!("{NS}/{name}"),
            Duration::from_secs(30),
            |_, b| b["lifecycle_warned_at"].is_string(),
        )
        .await;
    }
    let survivor_api = env.kill_lease_holder(&second).await;
    let survivor = krayne_tests::Rest::new(&format!("http://{survivor_api}"), Some(alice.clone()));
    for name in ["one", "two"] {
        let started = Instant::now();
        loop {
            let b = survivor.get(&format!("{NS}/{name}")).await.expect(200).body;
            if b["suspended"] == true {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(40),
                "{name} never suspended: {b}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let rows = {
        let admin = krayne_tests::Rest::new(&format!("http://{survivor_api}"), Some(env.admin()));
        let body = admin
            .get("/v1/audit?page_size=1000&actor=system:krayne-lifecycle")
            .await
            .expect(200)
            .body;
        body["events"].as_array().unwrap().clone()
    };
    for name in ["one", "two"] {
        for action in ["lifecycle.warn", "cluster.suspend"] {
            let n = rows
                .iter()
                .filter(|r| r["cluster"] == name && r["action"] == action && r["outcome"] == "succeeded")
                .count();
            assert_eq!(n, 1, "{name} {action}: done once, not {n} times: {rows:#?}");
        }
    }
}

#[tokio::test]
async fn with_the_audit_database_down_the_reaper_does_nothing_until_it_is_back() {
    let db = test_database().await;
    let (proxy, url) = db.behind_proxy().await;
    let mut opts = options("act", "  ml-team: { max_lifetime: 8s, warn_before: 3s }\n");
    opts.database_url = Some(url);
    let env = Env::start_with(opts).await;
    let alice = env.alice();
    env.rest(&alice).post(NS, &json!({"name": "audited"})).await.expect(201);
    let path = format!("{NS}/audited");
    // Planned (an audited write) while the database is up…
    until(&env, &alice, &path, Duration::from_secs(30), |_, b| {
        b["lifecycle"].is_string()
    })
    .await;
    proxy.down();
    // …then, past its warning time and its lifetime, with no way to write
    // the audit row: neither warned nor suspended.
    tokio::time::sleep(Duration::from_secs(12)).await;
    let during = env.rest(&alice).get(&path).await.expect(200).body;
    assert!(
        during["lifecycle_warned_at"].is_null() && during["suspended"] == false,
        "acted without its audit row: {during}"
    );
    // Back: warned, then suspended warn_before later, each audited.
    proxy.up();
    let suspended = until(&env, &alice, &path, Duration::from_secs(60), |_, b| {
        b["suspended"] == true
    })
    .await;
    assert!(suspended["lifecycle_warned_at"].is_null(), "{suspended}");
    // An outcome is written after the write it records (and retried after
    // the outage): the suspend's row may still be pending for a moment.
    let succeeded = |rows: &[Value], action: &str| {
        rows.iter()
            .filter(|r| r["cluster"] == "audited" && r["action"] == action && r["outcome"] == "succeeded")
            .count()
    };
    let mut rows = reaper_rows(&env).await;
    for _ in 0..50 {
        if succeeded(&rows, "cluster.suspend") > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        rows = reaper_rows(&env).await;
    }
    for action in ["lifecycle.warn", "cluster.suspend"] {
        assert_eq!(succeeded(&rows, action), 1, "{action}: {rows:#?}");
    }
}

/// The metrics of the replica whose ops listener is `ops`.
async fn metrics_of(ops: std::net::SocketAddr) -> String {
    reqwest::get(format!("http://{ops}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// Issue 54, item 2: a replica whose clock is a minute ahead (libfaketime)
/// beside a healthy leader. It does not take the live leader's Lease (a
/// lease expires by time observed, never by another machine's
/// `renewTime` against its own clock); it finds its clock off the API
/// server's and refuses to lead, even once the leader is gone; and the
/// leader acts on a cluster no sooner than its due time by the shared
/// clock.
#[tokio::test]
async fn a_replica_whose_clock_is_ahead_neither_takes_the_lease_nor_acts_early() {
    if krayne_tests::which("faketime").is_none() {
        panic!("faketime is missing: apt-get install faketime (.ci/run does)");
    }
    let db = test_database().await;
    let mut opts = options("act", "  ml-team: { max_lifetime: 12s, warn_before: 6s }\n");
    opts.database_url = Some(db.url.clone());
    let env = Env::start_with(opts).await;
    let started = Instant::now();
    while env.lease_holder().await.is_empty() {
        assert!(started.elapsed() < Duration::from_secs(20), "nobody took the lease");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let leader = env.lease_holder().await;
    assert!(leader.ends_with(&format!("-{}", env.server.pid())), "{leader}");

    let ahead = env.spawn_server_under(&["faketime", "-f", "+60s"], &[]).await;
    let alice = env.alice();
    env.rest(&alice).post(NS, &json!({"name": "due"})).await.expect(201);
    let created = Instant::now();
    let path = format!("{NS}/due");
    let warned = until(&env, &alice, &path, Duration::from_secs(30), |_, b| {
        b["lifecycle_warned_at"].is_string()
    })
    .await;
    assert!(
        created.elapsed() >= Duration::from_secs(5),
        "warned {:?} after its creation, before its due time: {warned}",
        created.elapsed()
    );
    let warned_at: jiff::Timestamp = warned["lifecycle_warned_at"].as_str().unwrap().parse().unwrap();
    // The API server's `Date` is whole seconds: the shared clock is known
    // to within about one.
    let shared_now = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(2);
    assert!(
        warned_at <= shared_now,
        "the warning's time is the shared clock's, not a minute ahead: {warned_at}"
    );
    until(&env, &alice, &path, Duration::from_secs(30), |_, b| {
        b["suspended"] == true
    })
    .await;
    assert!(
        created.elapsed() >= Duration::from_secs(11),
        "suspended {:?} after its creation, before its lifetime",
        created.elapsed()
    );
    assert_eq!(env.lease_holder().await, leader, "the live leader kept its lease");

    let metrics = metrics_of(ahead.ops).await;
    let skew = krayne_tests::metric(&metrics, "krayne_clock_skew_seconds", "");
    assert!((55.0..=65.0).contains(&skew), "skew {skew}");
    assert_eq!(
        krayne_tests::metric(&metrics, "krayne_lifecycle_clock_trusted", ""),
        0.0
    );

    // The leader gone, the replica a minute ahead still does not lead.
    env.server.signal("KILL");
    let ahead_rest = krayne_tests::Rest::new(&format!("http://{}", ahead.api), Some(alice.clone()));
    ahead_rest.post(NS, &json!({"name": "later"})).await.expect(201);
    tokio::time::sleep(Duration::from_secs(15)).await;
    assert_eq!(env.lease_holder().await, leader, "the skewed replica took the lease");
    let later = ahead_rest.get(&format!("{NS}/later")).await.expect(200).body;
    assert!(
        later["lifecycle_warned_at"].is_null(),
        "acted while refusing to lead: {later}"
    );
}

/// Issue 54, item 3: one bad line in a mapping — every namespace's
/// clusters deleted five seconds after their creation — reloaded over a
/// hundred clusters in four namespaces. While the new policy settles,
/// nothing is warned or deleted: each cluster says what the policy would
/// do. Then warnings go out to all, and deletions come at most twenty a
/// pass and five per namespace a pass, the caps counted for the alert.
#[tokio::test]
async fn a_mapping_edit_that_would_delete_a_hundred_clusters_reports_then_acts_within_the_caps() {
    let settle = Duration::from_secs(20);
    let env = Env::start_with(EnvOptions {
        server_args: [
            "--lifecycle",
            "act",
            "--lifecycle-interval-seconds",
            "1",
            "--lifecycle-lease-seconds",
            "3",
            "--lifecycle-policy-settle",
            "20s",
            "--rate-limit-per-second",
            "0",
        ]
        .map(str::to_owned)
        .to_vec(),
        ..EnvOptions::default()
    })
    .await;
    let admin = env.rest(&env.admin());
    let namespaces = ["default", "ml-team", "shared-data", "other-team"];
    for ns in namespaces {
        for i in 0..25 {
            admin
                .post(
                    &format!("/v1/namespaces/{ns}/clusters"),
                    &json!({"name": format!("c-{i}")}),
                )
                .await
                .expect(201);
        }
    }
    let clusters = || async {
        let mut all = Vec::new();
        for ns in namespaces {
            let page = admin
                .get(&format!("/v1/namespaces/{ns}/clusters?page_size=100"))
                .await
                .expect(200)
                .body;
            all.extend(page["clusters"].as_array().unwrap().clone());
        }
        all
    };
    assert_eq!(clusters().await.len(), 100);

    std::fs::write(
        env.teams_file(),
        format!("{TEAMS}lifecycle:\n  \"*\": {{ max_lifetime: 5s, warn_before: 2s, on_expiry: delete }}\n"),
    )
    .unwrap();
    // Reported on the clusters first, nothing warned or deleted.
    let started = Instant::now();
    loop {
        let all = clusters().await;
        let reported = all
            .iter()
            .filter(|c| {
                c["lifecycle"]
                    .as_str()
                    .is_some_and(|l| l.starts_with("would delete at "))
            })
            .count();
        assert_eq!(all.len(), 100, "deleted while the new policy settles");
        assert!(
            all.iter().all(|c| c["lifecycle_warned_at"].is_null()),
            "warned while it settles"
        );
        if reported == 100 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{reported} of 100 reported"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let reported_at = Instant::now();
    while reported_at.elapsed() < settle - Duration::from_secs(8) {
        let all = clusters().await;
        assert_eq!(all.len(), 100, "deleted while the new policy settles");
        assert!(
            all.iter().all(|c| c["lifecycle_warned_at"].is_null()),
            "warned while it settles"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    // Then acted on, within the caps.
    let started = Instant::now();
    while !clusters().await.is_empty() {
        assert!(started.elapsed() < Duration::from_secs(120), "not all deleted");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let rows = reaper_rows(&env).await;
    let deletes: Vec<&Value> = rows
        .iter()
        .filter(|r| r["action"] == "cluster.delete" && r["outcome"] == "succeeded")
        .collect();
    assert_eq!(deletes.len(), 100);
    let mut per_pass: std::collections::HashMap<String, Vec<String>> = std::collections::HashMap::new();
    for row in &deletes {
        per_pass
            .entry(row["request_summary"]["pass"].as_str().unwrap().to_owned())
            .or_default()
            .push(row["namespace"].as_str().unwrap().to_owned());
    }
    assert!(per_pass.len() >= 5, "{} passes", per_pass.len());
    for (pass, done) in &per_pass {
        assert!(done.len() <= 20, "pass {pass} deleted {}", done.len());
        for ns in namespaces {
            let n = done.iter().filter(|d| *d == ns).count();
            assert!(n <= 5, "pass {pass} deleted {n} in {ns}");
        }
    }
    let warned = rows.iter().filter(|r| r["action"] == "lifecycle.warn").count();
    assert_eq!(warned, 100, "every cluster warned before its deletion");
    let metrics = metrics_of(env.server.ops).await;
    assert!(krayne_tests::metric_total(&metrics, "krayne_lifecycle_caps_reached_total") > 0.0);
    assert!(
        krayne_tests::metric(&metrics, "krayne_lifecycle_actions_total", "mode=\"settling\"") > 0.0,
        "the settle time's reports are counted"
    );
}
