//! Every SDK method against the real server binary and the sandbox, and
//! `examples/pipeline.rs` run as a pipeline would run it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::TryStreamExt as _;
use krayne_client::{
    AuditQuery, Client, ClusterConfig, ClusterSpecBuilder, Code, CreateOptions, RetryPolicy, Scale, WorkerGroupBuilder,
};
use krayne_tests::Env;

async fn client(env: &Env, token: &str) -> Client {
    Client::connect(env.url()).await.unwrap().with_token(token)
}

#[tokio::test]
async fn every_cluster_method_round_trips() {
    let env = Env::start().await;
    let c = client(&env, &env.alice()).await;

    let spec = ClusterSpecBuilder::new("sdk")
        .namespace("ml-team")
        .head_cpus("2")
        .worker_group(WorkerGroupBuilder::new("cpu").replicas(1).max_replicas(3))
        .build();
    let dry = c
        .create_with(
            spec.clone(),
            CreateOptions {
                dry_run: true,
                ..CreateOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(dry.manifest["kind"], "RayCluster");
    assert_eq!(
        dry.manifest["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"],
        "2"
    );
    assert_eq!(c.get("ml-team", "sdk").await.unwrap_err().code(), Code::NotFound);

    let created = c
        .create_with(
            spec,
            CreateOptions {
                wait: Some(Duration::from_secs(60)),
                ..CreateOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(created.cluster.status, "ready");
    assert_eq!(created.cluster.created_by.as_deref(), Some("alice@example.com"));

    let got = c.get("ml-team", "sdk").await.unwrap();
    assert_eq!(got.num_workers, 1);
    let details = c.describe("ml-team", "sdk").await.unwrap();
    assert_eq!(details.worker_groups[0].name, "cpu");
    assert_eq!(details.pods.len(), 2, "{:?}", details.pods);

    let scaled = c
        .scale(
            "ml-team",
            "sdk",
            Scale {
                group: "cpu".into(),
                replicas: Some(3),
                ..Scale::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(scaled.num_workers, 3);
    // Scaling up keeps a ready cluster ready (KubeRay's state does not
    // change); the wait returns its current summary.
    let ready = c
        .wait_until_ready("ml-team", "sdk", Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!((ready.status.as_str(), ready.num_workers), ("ready", 3));

    let all = c.list_all(None).await.unwrap();
    assert_eq!(all.iter().map(|i| i.name.as_str()).collect::<Vec<_>>(), ["sdk"]);

    c.delete("ml-team", "sdk").await.unwrap();
    assert_eq!(c.delete("ml-team", "sdk").await.unwrap_err().code(), Code::NotFound);
}

#[tokio::test]
async fn identity_and_audit_methods() {
    let env = Env::start().await;
    let alice = client(&env, &env.alice()).await;
    let me = alice.whoami().await.unwrap();
    assert_eq!(me.subject, "alice@example.com");
    assert_eq!(me.teams, ["ml-research"]);
    let namespaces = alice.list_namespaces().await.unwrap();
    let names: Vec<_> = namespaces.iter().map(|n| n.namespace.as_str()).collect();
    assert_eq!(names, ["ml-team", "shared-data"]);

    alice
        .create(ClusterSpecBuilder::new("audited").namespace("ml-team").build())
        .await
        .unwrap();
    let admin = client(&env, &env.admin()).await;
    let query = AuditQuery {
        namespace: "ml-team".into(),
        action: "cluster.create".into(),
        ..AuditQuery::default()
    };
    let events: Vec<_> = admin.audit_events(query.clone()).try_collect().await.unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].actor.as_ref().unwrap().subject, "alice@example.com");
    assert_eq!(events[0].outcome, "succeeded");
    let denied = alice.audit_page(&query, "").await.unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied);
}

#[tokio::test]
async fn list_follows_page_tokens() {
    let env = Env::start().await;
    let c = client(&env, &env.admin()).await;
    for (ns, name) in [
        ("ml-team", "a"),
        ("ml-team", "b"),
        ("ml-team", "c"),
        ("other-team", "d"),
        ("shared-data", "e"),
    ] {
        c.create(ClusterSpecBuilder::new(name).namespace(ns).build())
            .await
            .unwrap();
    }
    let first = c.list_page(None, 2, "").await.unwrap();
    assert_eq!(first.clusters.len(), 2);
    assert!(!first.next_page_token.is_empty());
    let all: Vec<_> = c.list_paged(None, 2).try_collect().await.unwrap();
    let names: Vec<_> = all.iter().map(|i| format!("{}/{}", i.namespace, i.name)).collect();
    assert_eq!(
        names,
        ["ml-team/a", "ml-team/b", "ml-team/c", "other-team/d", "shared-data/e"]
    );
    let team: Vec<_> = c.list_paged(Some("ml-team"), 1).try_collect().await.unwrap();
    assert_eq!(team.len(), 3);
}

#[tokio::test]
async fn errors_carry_the_code_and_field_violations() {
    let env = Env::start().await;
    let c = client(&env, &env.alice()).await;
    let bad = ClusterConfig::from_yaml("name: Bad_Name\nworker_groups: [{replicas: 1, min_replicas: 2}]\n")
        .unwrap()
        .namespace("ml-team");
    let e = c.create_with(bad, CreateOptions::default()).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    let fields: Vec<_> = e.violations().iter().map(|v| v.field.as_str()).collect();
    assert_eq!(fields, ["name", "worker_groups[0].min_replicas"]);
    assert!(e.request_id().is_some());

    let other = c.get("other-team", "x").await.unwrap_err();
    assert_eq!(other.code(), Code::PermissionDenied);
    let anonymous = Client::connect(env.url()).await.unwrap();
    assert_eq!(anonymous.whoami().await.unwrap_err().code(), Code::Unauthenticated);

    c.create(ClusterSpecBuilder::new("twice").namespace("ml-team").build())
        .await
        .unwrap();
    let again = c
        .create(ClusterSpecBuilder::new("twice").namespace("ml-team").build())
        .await
        .unwrap_err();
    assert_eq!(again.code(), Code::AlreadyExists);

    // A head with no room is waited for (room may come): the timeout ends it.
    let stuck = ClusterSpecBuilder::new("stuck")
        .namespace("ml-team")
        .head_cpus("64")
        .build();
    c.create(stuck).await.unwrap();
    let timeout = c
        .wait_until_ready("ml-team", "stuck", Duration::from_secs(1))
        .await
        .unwrap_err();
    assert_eq!(timeout.code(), Code::DeadlineExceeded);
    assert!(timeout.message().contains("unschedulable"), "{timeout}");
    // An image that cannot be pulled ends the wait at once, naming it.
    let bad = ClusterSpecBuilder::new("bad-image")
        .namespace("ml-team")
        .head_image("rayproject/ray:doesnotexist")
        .build();
    c.create(bad).await.unwrap();
    let refused = c
        .wait_until_ready("ml-team", "bad-image", Duration::from_secs(600))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition);
    assert!(refused.message().contains("rayproject/ray:doesnotexist"), "{refused}");

    let unreachable = Client::connect("http://127.0.0.1:1").await.unwrap_err();
    assert_eq!(unreachable.code(), Code::Unavailable);
    assert!(unreachable.message().contains("refused"), "{unreachable}");
    let bad_url = Client::connect("ftp://example.com").await.unwrap_err();
    assert_eq!(bad_url.code(), Code::InvalidArgument);
}

/// Alice's client, retrying for as long as a server restart takes.
async fn patient_client(env: &Env) -> Client {
    Client::builder(env.url())
        .token(env.alice())
        .retry(RetryPolicy {
            max_retries: 100,
            min_delay: Duration::from_millis(50),
            max_delay: Duration::from_millis(200),
        })
        .connect()
        .await
        .unwrap()
}

#[tokio::test]
async fn idempotent_calls_are_retried_across_a_server_restart() {
    let mut env = Env::start().await;
    let c = patient_client(&env).await;
    c.create(ClusterSpecBuilder::new("survivor").namespace("ml-team").build())
        .await
        .unwrap();

    env.stop_server().await;
    // Not idempotent, so not retried: the error comes back at once.
    let create = c
        .create(ClusterSpecBuilder::new("second").namespace("ml-team").build())
        .await
        .unwrap_err();
    assert_eq!(create.code(), Code::Unavailable);

    let reader = c.clone();
    let get = tokio::spawn(async move { reader.get("ml-team", "survivor").await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!get.is_finished(), "the get should still be retrying");
    env.start_server().await;
    let got = get.await.unwrap().unwrap();
    assert_eq!(got.name, "survivor");

    let none = Client::builder(env.url()).token(env.alice()).retry(RetryPolicy::none());
    let none = none.connect().await.unwrap();
    env.stop_server().await;
    assert_eq!(
        none.get("ml-team", "survivor").await.unwrap_err().code(),
        Code::Unavailable
    );
}

#[tokio::test]
async fn a_token_provider_is_asked_on_every_call() {
    let env = Env::start().await;
    let current = Arc::new(Mutex::new("expired-token".to_owned()));
    let asked = Arc::new(Mutex::new(0_u32));
    let (token, count) = (current.clone(), asked.clone());
    let c = Client::builder(env.url())
        .token_provider(move || {
            *count.lock().unwrap() += 1;
            Ok(token.lock().unwrap().clone())
        })
        .connect()
        .await
        .unwrap();
    assert_eq!(c.whoami().await.unwrap_err().code(), Code::Unauthenticated);
    *current.lock().unwrap() = env.alice();
    assert_eq!(c.whoami().await.unwrap().subject, "alice@example.com");
    *current.lock().unwrap() = env.admin();
    assert!(c.whoami().await.unwrap().global_admin);
    assert_eq!(*asked.lock().unwrap(), 3);

    let failing = c.with_token_provider(|| Err::<String, _>("the identity provider is down".to_owned()));
    let e = failing.whoami().await.unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated);
    assert!(e.message().contains("identity provider is down"), "{e}");
}

#[tokio::test]
async fn the_pipeline_example_runs() {
    let env = Env::start().await;
    // target/<profile>/deps/sdk-… → target/<profile>/examples/pipeline
    let exe = std::env::current_exe().unwrap();
    let example = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join("pipeline");
    assert!(
        example.exists(),
        "{} is missing: cargo test builds examples",
        example.display()
    );
    // No KRAYNE_NAMESPACE, as the README says to run it (issue 56): it
    // picks the namespace alice may edit.
    let mut cmd = std::process::Command::new(example);
    cmd.env("KRAYNE_SERVER", env.url())
        .env("KRAYNE_TOKEN", env.alice())
        .env_remove("KRAYNE_NAMESPACE");
    let output = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for line in [
        "ready; its dashboard: ",
        "/v1/namespaces/ml-team/clusters/",
        "/services/dashboard/proxy/",
        "epoch 2: loss 0.33",
        "trained",
        " Succeeded",
        "deleted ml-team/pipeline-",
        "-run ended Succeeded, exit code Some(0)",
    ] {
        assert!(stdout.contains(line), "{line:?} missing:\n{stdout}");
    }
    // The cluster it made is gone; its run's cluster is KubeRay's to delete
    // a minute after the job ended, owned by the run.
    let c = client(&env, &env.alice()).await;
    let runs = c.rayjobs("ml-team").await.unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].ttl_seconds_after_finished, Some(60));
    let left = c.list_all(Some("ml-team")).await.unwrap();
    assert!(
        left.iter()
            .all(|cluster| cluster.name.starts_with(&format!("{}-", runs[0].name))),
        "the example deletes its cluster: {left:?}"
    );
}

#[tokio::test]
async fn a_wait_resumes_when_its_server_shuts_down() {
    let mut options = krayne_tests::EnvOptions::default();
    // Pods start slowly: the wait is open when the server stops.
    options.sandbox.operator.start_delay = Duration::from_secs(3);
    let mut env = Env::start_with(options).await;
    let c = patient_client(&env).await;
    c.create(ClusterSpecBuilder::new("patient").namespace("ml-team").build())
        .await
        .unwrap();
    let waiter = c.clone();
    let wait = tokio::spawn(async move {
        waiter
            .wait_until_ready("ml-team", "patient", Duration::from_secs(60))
            .await
    });
    env.await_metric("krayne_waits_open", 1.0).await;
    // The server ends the wait with UNAVAILABLE as it stops; the SDK
    // waits again once a server answers on the address.
    env.stop_server().await;
    assert!(!wait.is_finished(), "the wait should be resuming");
    env.start_server().await;
    let ready = wait.await.unwrap().unwrap();
    assert_eq!(ready.status, "ready");
}

/// Issue 56 item 16: client/README.md can be pasted as it reads: every
/// Rust block is a whole `main.rs` (no hidden `# ` lines, `#[tokio::main]`
/// shown), no rustdoc-only link brackets, and the dependency lines are
/// commands that work from a checkout.
#[test]
fn the_readme_reads_as_it_pastes() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let mut blocks = Vec::new();
    let mut current: Option<(String, Vec<&str>)> = None;
    for line in readme.lines() {
        match (&mut current, line.strip_prefix("```")) {
            (None, Some(lang)) => current = Some((lang.to_owned(), Vec::new())),
            (Some(_), Some(_)) => blocks.extend(current.take()),
            (Some((_, lines)), None) => lines.push(line),
            (None, None) => assert!(!line.contains("[`"), "a rustdoc link in prose: {line}"),
        }
    }
    let rust: Vec<&Vec<&str>> = blocks
        .iter()
        .filter(|(l, _)| l.starts_with("rust"))
        .map(|(_, b)| b)
        .collect();
    assert!(rust.len() >= 3, "{blocks:?}");
    for block in rust {
        assert!(
            !block.iter().any(|l| l.starts_with("# ") || *l == "#"),
            "hidden lines: {block:#?}"
        );
        assert!(block.iter().any(|l| l.trim() == "#[tokio::main]"), "{block:#?}");
        assert!(block.iter().any(|l| l.starts_with("async fn main()")), "{block:#?}");
    }
    assert!(readme.contains("cargo add krayne-client --path ../krayne/client"));
    assert!(!readme.contains("git = \"https://…"), "no placeholder URL");
}
