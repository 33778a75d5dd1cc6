//! Watching RayJobs as clusters are watched (issue 60): NDJSON, SSE and the
//! SDK's gRPC stream see a run from its start to its end and deletion, in
//! order and never a cluster; its cluster's status moves it; another team
//! is refused; bad parameters name their field; each watch is audited.

use std::time::Duration;

use futures::StreamExt as _;
use krayne_tests::{
    Env, EnvOptions,
    watch::{Framing, Watch},
};
use serde_json::{Value, json};

const RUNS: &str = "/v1/namespaces/ml-team/rayjobs";
const SOON: Duration = Duration::from_secs(60);

fn seq(version: &str) -> u64 {
    version.split_once('.').and_then(|(_, s)| s.parse().ok()).unwrap()
}

async fn open(env: &Env, path: &str, token: &str) -> Result<Watch, (u16, Value)> {
    let bearer = format!("Bearer {token}");
    Watch::open(
        &format!("{}{path}", env.url()),
        &[("authorization", &bearer)],
        Framing::Ndjson,
    )
    .await
}

#[tokio::test]
async fn ndjson_sse_and_the_sdk_see_a_run_from_its_start_to_its_deletion() {
    let env = Env::start_with(EnvOptions {
        server_args: vec!["--rayjobs-interval-seconds".into(), "1".into()],
        ..EnvOptions::default()
    })
    .await;
    let alice = env.rest(&env.alice());
    let mut ndjson = open(&env, &format!("{RUNS}?watch=true"), &env.alice()).await.unwrap();
    let sse_url = format!("{}{RUNS}?watch=true&access_token={}", env.url(), env.alice());
    let mut sse = Watch::open(&sse_url, &[], Framing::Sse).await.unwrap();
    for w in [&mut ndjson, &mut sse] {
        assert_eq!(w.next(SOON).await.unwrap().kind(), "BOOKMARK");
    }
    let sdk = krayne_client::Client::builder(env.url())
        .token(env.alice())
        .connect()
        .await
        .unwrap();
    let mut grpc = std::pin::pin!(
        sdk.watch_rayjobs(Some("ml-team"), krayne_client::WatchFrom::default())
            .await
            .unwrap()
    );

    let run = json!({"name": "watched", "entrypoint": "sh -c 'echo hi'", "ttl_seconds_after_finished": 30});
    alice.post(RUNS, &run).await.expect(201);
    let done = |f: &krayne_tests::watch::Frame| f.json["rayjob"]["state"] == "succeeded";
    for (framing, w) in [("ndjson", &mut ndjson), ("sse", &mut sse)] {
        let frames = w.until(SOON, done).await;
        let kinds: Vec<&str> = frames.iter().map(|f| f.kind()).collect();
        assert_eq!(kinds.first(), Some(&"ADDED"), "{framing}: {kinds:?}");
        assert!(
            frames
                .iter()
                .all(|f| f.json["rayjob"]["name"] == "watched" && f.json.get("cluster").is_none()),
            "{framing}: only the RayJob, never a cluster: {frames:?}"
        );
        let states: Vec<&str> = frames
            .iter()
            .filter_map(|f| f.json["rayjob"]["state"].as_str())
            .collect();
        assert_eq!(states.first(), Some(&"starting"), "{framing}: {states:?}");
        let cluster_ready = frames.iter().any(|f| f.json["rayjob"]["cluster_status"] == "ready");
        assert!(cluster_ready, "{framing}: its cluster's status moves it: {frames:?}");
        let versions: Vec<u64> = frames.iter().map(|f| seq(f.version())).collect();
        assert!(
            versions.windows(2).all(|w| w[0] < w[1]),
            "{framing}: in order: {versions:?}"
        );
        if framing == "sse" {
            let last = frames.last().unwrap();
            assert_eq!(last.id.as_deref(), Some(last.version()), "the SSE id is the version");
            assert_eq!(last.event.as_deref(), Some("modified"));
        }
    }
    let mut seen = Vec::new();
    while seen
        .last()
        .is_none_or(|(_, state): &(String, String)| state != "RUN_STATE_SUCCEEDED")
    {
        let event = tokio::time::timeout(SOON, grpc.next()).await.unwrap().unwrap().unwrap();
        let kind = krayne_client::watch_event_type_name(event.r#type).to_owned();
        if let Some(job) = event.rayjob {
            assert_eq!(job.name, "watched");
            seen.push((
                kind,
                krayne_client::proto::RunState::try_from(job.state)
                    .unwrap()
                    .as_str_name()
                    .to_owned(),
            ));
        }
    }
    assert_eq!(
        seen[0],
        ("ADDED".to_owned(), "RUN_STATE_STARTING".to_owned()),
        "{seen:?}"
    );

    alice.delete(&format!("{RUNS}/watched")).await.expect(204);
    let gone = ndjson.until(SOON, |f| f.kind() == "DELETED").await;
    assert_eq!(gone.last().unwrap().json["rayjob"]["name"], "watched");
    loop {
        let event = tokio::time::timeout(SOON, grpc.next()).await.unwrap().unwrap().unwrap();
        if krayne_client::watch_event_type_name(event.r#type) == "DELETED" {
            assert_eq!(event.rayjob.unwrap().name, "watched");
            break;
        }
    }
    // A cluster watch sees the run's cluster, never the RayJob.
    let mut clusters = open(
        &env,
        "/v1/namespaces/ml-team/clusters?watch=true&send_initial_events=true",
        &env.alice(),
    )
    .await
    .unwrap();
    let first = clusters.next(SOON).await.unwrap();
    assert!(first.json.get("rayjob").is_none(), "{:?}", first.json);
}

#[tokio::test]
async fn a_rayjob_watch_is_authorized_checked_resumable_and_audited() {
    let env = Env::start_with(EnvOptions::with_args(&["--audit-reads"])).await;
    let alice = env.rest(&env.alice());
    alice
        .post(RUNS, &json!({"name": "before", "entrypoint": "sleep 600"}))
        .await
        .expect(201);
    let mut initial = open(
        &env,
        &format!("{RUNS}?watch=true&send_initial_events=true"),
        &env.alice(),
    )
    .await
    .unwrap();
    let frames = initial.until(SOON, |f| f.kind() == "BOOKMARK").await;
    assert_eq!(frames[0].kind(), "ADDED");
    assert_eq!(frames[0].json["rayjob"]["name"], "before");
    let bookmark = frames.last().unwrap().version().to_owned();

    // Resumed from the bookmark: what came after it, nothing before.
    alice
        .post(RUNS, &json!({"name": "after", "entrypoint": "sleep 600"}))
        .await
        .expect(201);
    let mut resumed = open(
        &env,
        &format!("{RUNS}?watch=true&resource_version={bookmark}"),
        &env.alice(),
    )
    .await
    .unwrap();
    let first = resumed.next(SOON).await.unwrap();
    assert_eq!(
        (first.kind(), &first.json["rayjob"]["name"]),
        ("ADDED", &json!("after"))
    );

    let bob = env.token("bob@example.com", &["other-team"]);
    let (status, body) = open(&env, &format!("{RUNS}?watch=true"), &bob).await.err().unwrap();
    assert_eq!((status, body["code"].as_str()), (403, Some("permission_denied")));
    let viewer = env.token("carol@example.com", &["ml-research"]);
    open(&env, "/v1/namespaces/shared-data/rayjobs?watch=true", &viewer)
        .await
        .unwrap();

    for (query, field) in [
        ("watch=true&resource_version=nonsense", "resource_version"),
        ("watch=true&timeout_seconds=86401", "timeout_seconds"),
        ("resource_version=0000.1", "watch"),
        (
            "watch=true&resource_version=00000001.1&send_initial_events=true",
            "send_initial_events",
        ),
    ] {
        let refused = alice.get(&format!("{RUNS}?{query}")).await.expect(400);
        assert!(refused.text.contains(field), "{query}: {}", refused.text);
    }
    let gone = alice
        .get(&format!("{RUNS}?watch=true&resource_version=00000001.1"))
        .await
        .expect(410);
    assert_eq!(gone.body["code"], "gone");
    let rows = env
        .audit_rows_eventually("action=rayjob.watch&outcome=succeeded", 3)
        .await;
    assert!(rows.iter().any(|r| r["namespace"] == "shared-data"), "{rows:?}");
    env.audit_rows_eventually("action=rayjob.watch&outcome=denied", 1).await;
}
