//! Live watches (issue 25): NDJSON and SSE see a cluster's whole life in
//! order; a resumed watch has no gap and no duplicate; a version no
//! longer held is 410 (OUT_OF_RANGE over gRPC); tenancy per event and
//! per mapping reload; a stalled consumer is cut while others keep
//! flowing; per-caller limits.

use std::time::Duration;

use futures::StreamExt as _;
use krayne_proto::v1 as pb;
use krayne_tests::{
    EnvOptions, TEAMS,
    watch::{Framing, Watch},
};
use serde_json::{Value, json};

const NS: &str = "/v1/namespaces/ml-team/clusters";
const SOON: Duration = Duration::from_secs(30);

fn cluster(name: &str) -> Value {
    json!({"name": name, "worker_groups": [{"name": "cpu", "replicas": 1}]})
}

async fn open(env: &krayne_tests::Env, path: &str, token: &str, framing: Framing) -> Watch {
    let bearer = format!("Bearer {token}");
    Watch::open(&format!("{}{path}", env.url()), &[("authorization", &bearer)], framing)
        .await
        .unwrap_or_else(|(status, body)| panic!("watch refused: {status} {body}"))
}

/// Sequence number of a version (`<boot>.<seq>`).
fn seq(version: &str) -> u64 {
    version.split_once('.').and_then(|(_, s)| s.parse().ok()).unwrap()
}

#[tokio::test]
async fn ndjson_and_sse_see_create_status_changes_scale_and_delete_in_order() {
    let env = krayne_tests::Env::start().await;
    let alice = env.rest(&env.alice());
    let mut ndjson = open(&env, &format!("{NS}?watch=true"), &env.alice(), Framing::Ndjson).await;
    // A browser's EventSource cannot send headers: its token rides in the query.
    let sse_url = format!("{}{NS}?watch=true&access_token={}", env.url(), env.alice());
    let mut sse = Watch::open(&sse_url, &[], Framing::Sse).await.unwrap();
    for w in [&mut ndjson, &mut sse] {
        assert_eq!(
            w.next(SOON).await.unwrap().kind(),
            "BOOKMARK",
            "a watch starts with where it is"
        );
    }

    alice.post(NS, &cluster("life")).await.expect(201);
    alice
        .get(&format!("{NS}/life/wait?timeout_seconds=60"))
        .await
        .expect(200);
    alice
        .post(
            &format!("{NS}/life/scale"),
            &json!({"worker_group": "cpu", "replicas": 2}),
        )
        .await
        .expect(200);
    alice.delete(&format!("{NS}/life")).await.expect(204);

    for (framing, w) in [("ndjson", &mut ndjson), ("sse", &mut sse)] {
        let frames = w.until(SOON, |f| f.kind() == "DELETED").await;
        let kinds: Vec<&str> = frames.iter().map(|f| f.kind()).collect();
        let statuses: Vec<&str> = frames
            .iter()
            .filter_map(|f| f.json["cluster"]["status"].as_str())
            .collect();
        assert_eq!(kinds.first(), Some(&"ADDED"), "{framing}: {kinds:?}");
        assert!(frames.iter().all(|f| f.cluster() == Some("life")), "{framing}");
        assert!(statuses.contains(&"ready"), "{framing}: {statuses:?}");
        let first_ready = statuses.iter().position(|s| *s == "ready").unwrap();
        assert!(first_ready > 0, "status changes arrive before ready: {statuses:?}");
        let workers: Vec<u64> = frames
            .iter()
            .filter_map(|f| f.json["cluster"]["num_workers"].as_u64())
            .collect();
        assert_eq!(workers.first(), Some(&1), "{framing}");
        assert!(workers.contains(&2), "{framing}: the scale arrives: {workers:?}");
        let versions: Vec<u64> = frames.iter().map(|f| seq(f.version())).collect();
        assert!(
            versions.windows(2).all(|w| w[0] < w[1]),
            "{framing}: in order: {versions:?}"
        );
        if framing == "sse" {
            for f in &frames {
                assert_eq!(f.id.as_deref(), Some(f.version()), "the SSE id is the version");
                assert_eq!(f.event.as_deref(), Some(f.kind().to_ascii_lowercase().as_str()));
            }
        }
    }
    // The same summary as list.
    alice.post(NS, &cluster("same")).await.expect(201);
    let added = ndjson.until(SOON, |f| f.cluster() == Some("same")).await;
    let listed = alice.get(&format!("{NS}/same")).await.expect(200).body;
    assert_eq!(added.last().unwrap().json["cluster"]["name"], listed["name"]);
    let audited = env.metric("krayne_watches_open", "").await;
    assert!(audited >= 2.0, "open watches are counted: {audited}");
}

#[tokio::test]
async fn a_resumed_watch_has_no_gap_nor_duplicate_and_a_version_too_old_is_gone() {
    let env = krayne_tests::Env::start_with(EnvOptions::with_args(&["--watch-history", "16"])).await;
    let alice = env.rest(&env.alice());
    // A reference watch open all along, and one that disconnects.
    let mut reference = open(&env, &format!("{NS}?watch=true"), &env.alice(), Framing::Ndjson).await;
    let start = reference.next(SOON).await.unwrap().version().to_owned();
    let mut first = open(&env, &format!("{NS}?watch=true"), &env.alice(), Framing::Ndjson).await;
    first.next(SOON).await.unwrap();
    alice.post(NS, &cluster("one")).await.expect(201);
    let seen = first.until(SOON, |f| f.kind() == "ADDED").await;
    let left_at = seen.last().unwrap().version().to_owned();
    drop(first);

    alice.post(NS, &cluster("two")).await.expect(201);
    let all = reference.until(SOON, |f| f.cluster() == Some("two")).await;
    let mut resumed = open(
        &env,
        &format!("{NS}?watch=true&resource_version={left_at}"),
        &env.alice(),
        Framing::Ndjson,
    )
    .await;
    let after: Vec<(String, String)> = all
        .iter()
        .filter(|f| seq(f.version()) > seq(&left_at))
        .map(|f| (f.kind().to_owned(), f.version().to_owned()))
        .collect();
    let mut got = Vec::new();
    while got.len() < after.len() {
        let f = resumed.next(SOON).await.expect("the resumed watch goes on");
        if f.kind() != "BOOKMARK" {
            got.push((f.kind().to_owned(), f.version().to_owned()));
        }
    }
    assert_eq!(got, after, "exactly what came after, once each");

    // SSE resumes from Last-Event-ID, which wins over the URL's version.
    let sse_url = format!("{}{NS}?watch=true&resource_version={start}", env.url());
    let bearer = format!("Bearer {}", env.alice());
    let mut sse = Watch::open(
        &sse_url,
        &[("authorization", &bearer), ("last-event-id", &left_at)],
        Framing::Sse,
    )
    .await
    .unwrap();
    assert_eq!(sse.next(SOON).await.unwrap().version(), after[0].1);

    // Push the start out of the 16 changes kept: 410 gone, over REST and gRPC.
    for name in ["three", "four", "five", "six"] {
        alice.post(NS, &cluster(name)).await.expect(201);
    }
    reference
        .until(SOON, |f| {
            f.cluster() == Some("six") && seq(f.version()) > seq(&start) + 17
        })
        .await;
    let gone = Watch::open(
        &format!("{}{NS}?watch=true&resource_version={start}", env.url()),
        &[("authorization", &bearer)],
        Framing::Ndjson,
    )
    .await
    .err()
    .expect("too old");
    assert_eq!(gone.0, 410, "{}", gone.1);
    assert_eq!(gone.1["code"], "gone");
    assert!(gone.1["detail"].as_str().unwrap().contains("list again"), "{}", gone.1);
    let mut grpc = env.grpc(&env.alice()).await;
    let status = grpc
        .clusters
        .watch_clusters(pb::WatchClustersRequest {
            namespace: "ml-team".into(),
            resource_version: start.clone(),
            send_initial_events: false,
            timeout_seconds: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::OutOfRange, "{status:?}");
    // Not a version at all: 400.
    let bad = alice.get(&format!("{NS}?watch=true&resource_version=7")).await;
    bad.problem(400, "invalid_argument");

    // gRPC from now, with the initial state: every cluster ADDED, then a
    // bookmark, then the live change.
    let mut stream = grpc
        .clusters
        .watch_clusters(pb::WatchClustersRequest {
            namespace: "ml-team".into(),
            resource_version: String::new(),
            send_initial_events: true,
            timeout_seconds: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let mut initial = Vec::new();
    loop {
        let e = stream.next().await.unwrap().unwrap();
        if e.r#type == pb::WatchEventType::Bookmark as i32 {
            break;
        }
        assert_eq!(e.r#type, pb::WatchEventType::Added as i32);
        initial.push(e.cluster.unwrap().name);
    }
    assert_eq!(initial, ["five", "four", "one", "six", "three", "two"]);
    alice.delete(&format!("{NS}/one")).await.expect(204);
    loop {
        let e = stream.next().await.unwrap().unwrap();
        if e.r#type == pb::WatchEventType::Deleted as i32 {
            assert_eq!(e.cluster.unwrap().name, "one");
            break;
        }
    }
}

#[tokio::test]
async fn a_viewer_of_one_namespace_never_sees_another_namespaces_events() {
    let env = krayne_tests::Env::start().await;
    let bob = env.token("bob@example.com", &["other-team"]);
    let mut bobs = open(&env, "/v1/clusters?watch=true", &bob, Framing::Ndjson).await;
    let mut alices = open(&env, "/v1/clusters?watch=true", &env.alice(), Framing::Ndjson).await;
    env.rest(&env.alice()).post(NS, &cluster("alices")).await.expect(201);
    env.rest(&bob)
        .post("/v1/namespaces/other-team/clusters", &cluster("bobs"))
        .await
        .expect(201);
    env.rest(&env.alice())
        .post(NS, &cluster("alices-last"))
        .await
        .expect(201);
    env.rest(&bob)
        .post("/v1/namespaces/other-team/clusters", &cluster("bobs-last"))
        .await
        .expect(201);
    let seen_by_bob = bobs.until(SOON, |f| f.cluster() == Some("bobs-last")).await;
    let seen_by_alice = alices.until(SOON, |f| f.cluster() == Some("alices-last")).await;
    let namespaces = |frames: &[krayne_tests::watch::Frame]| {
        frames
            .iter()
            .filter_map(|f| f.json["cluster"]["namespace"].as_str().map(str::to_owned))
            .collect::<std::collections::BTreeSet<_>>()
    };
    assert_eq!(namespaces(&seen_by_bob), ["other-team".to_owned()].into());
    assert_eq!(namespaces(&seen_by_alice), ["ml-team".to_owned()].into());
    // A namespace without the viewer role is refused before anything flows.
    let refused = Watch::open(
        &format!("{}/v1/namespaces/other-team/clusters?watch=true", env.url()),
        &[("authorization", &format!("Bearer {}", env.alice()))],
        Framing::Ndjson,
    )
    .await
    .err()
    .unwrap();
    assert_eq!(
        (refused.0, refused.1["code"].as_str()),
        (403, Some("permission_denied"))
    );
}

#[tokio::test]
async fn a_mapping_reload_ends_revoked_watches_and_starts_granted_namespaces() {
    let late =
        "  - name: late\n    members: { subjects: [carol@example.com] }\n    namespaces: { nothing-yet: viewer }\n";
    let env = krayne_tests::Env::start_with(EnvOptions {
        teams: format!("{TEAMS}{late}"),
        server_args: vec!["--teams-watch".into(), "false".into()],
        ..EnvOptions::default()
    })
    .await;
    let bob = env.token("bob@example.com", &["other-team"]);
    let carol = env.token("carol@example.com", &[]);
    env.rest(&bob)
        .post("/v1/namespaces/other-team/clusters", &cluster("bobs"))
        .await
        .expect(201);
    env.rest(&env.alice())
        .post(NS, &cluster("shown-later"))
        .await
        .expect(201);
    let mut bob_ns = open(
        &env,
        "/v1/namespaces/other-team/clusters?watch=true",
        &bob,
        Framing::Ndjson,
    )
    .await;
    let mut bob_all = open(&env, "/v1/clusters?watch=true", &bob, Framing::Sse).await;
    let mut carols = open(&env, "/v1/clusters?watch=true", &carol, Framing::Ndjson).await;
    for w in [&mut bob_ns, &mut bob_all, &mut carols] {
        w.next(SOON).await.unwrap();
    }

    let moved = TEAMS.replace(
        "namespaces: { other-team: editor }",
        "namespaces: { shared-data: viewer }",
    );
    let granted = late.replace("nothing-yet: viewer", "ml-team: viewer");
    std::fs::write(env.teams_file(), format!("{moved}{granted}")).unwrap();
    env.server.signal("HUP");

    for (what, w) in [("namespaced", &mut bob_ns), ("all namespaces", &mut bob_all)] {
        let end = w.until(SOON, |f| f.kind() == "ERROR").await;
        let error = &end.last().unwrap().json["error"];
        assert_eq!(error["code"], "permission_denied", "{what}: {error}");
        assert!(
            error["detail"].as_str().unwrap().contains("other-team"),
            "{what}: {error}"
        );
        assert!(
            w.next(Duration::from_secs(2)).await.is_none(),
            "{what}: the watch ended"
        );
    }
    let added = carols.until(SOON, |f| f.cluster() == Some("shown-later")).await;
    assert_eq!(
        added.last().unwrap().kind(),
        "ADDED",
        "a granted namespace's clusters arrive"
    );
    env.rest(&env.alice())
        .post(
            &format!("{NS}/shown-later/scale"),
            &json!({"worker_group": "cpu", "replicas": 3}),
        )
        .await
        .expect(200);
    carols.until(SOON, |f| f.json["cluster"]["num_workers"] == 3).await;
    assert!(env.metric("krayne_watches_ended_total", "reason=\"revoked\"").await >= 2.0);
}

#[tokio::test]
async fn a_stalled_consumer_is_cut_while_others_keep_flowing_and_watches_are_limited_per_caller() {
    let env = krayne_tests::Env::start_with(EnvOptions::with_args(&[
        "--watch-queue",
        "4",
        "--watch-stall-seconds",
        "1",
        "--max-watches-per-caller",
        "3",
    ]))
    .await;
    let alice = env.rest(&env.alice());
    // A client that asks and stops reading: HTTP/2 with a 1 KiB window it
    // does not reopen, so the server can send it almost nothing.
    let tcp = tokio::net::TcpStream::connect(env.server.api).await.unwrap();
    let (send, connection) = h2::client::Builder::new()
        .initial_window_size(1024)
        .handshake::<_, bytes::Bytes>(tcp)
        .await
        .unwrap();
    tokio::spawn(connection);
    let mut send = send.ready().await.unwrap();
    let request = http::Request::get(format!("http://krayne{NS}?watch=true"))
        .header("authorization", format!("Bearer {}", env.alice()))
        .body(())
        .unwrap();
    let (response, _) = send.send_request(request, true).unwrap();
    let mut stalled = response.await.unwrap().into_body();
    let mut flowing = open(&env, &format!("{NS}?watch=true"), &env.alice(), Framing::Ndjson).await;
    flowing.next(SOON).await.unwrap();
    env.await_metric("krayne_watches_open", 2.0).await;

    let mut made = 0;
    while env
        .metric("krayne_watches_ended_total", "reason=\"slow_consumer\"")
        .await
        < 1.0
    {
        assert!(made < 50, "50 clusters and the stalled watch was never cut");
        let name = format!("burst-{made}");
        alice.post(NS, &json!({"name": name})).await.expect(201);
        flowing.until(SOON, |f| f.cluster() == Some(name.as_str())).await;
        made += 1;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // Its place is given back, and the others keep flowing after the cut.
    assert_eq!(env.metric("krayne_watches_open", "").await, 1.0);
    alice.post(NS, &json!({"name": "after-the-cut"})).await.expect(201);
    flowing.until(SOON, |f| f.cluster() == Some("after-the-cut")).await;

    // The stalled client, reading at last, gets what was queued and why
    // it was cut, then the end.
    let mut text = Vec::new();
    while let Some(chunk) = tokio::time::timeout(SOON, stalled.data()).await.expect("the body ends") {
        let chunk = chunk.unwrap();
        let _ = stalled.flow_control().release_capacity(chunk.len());
        text.extend_from_slice(&chunk);
    }
    let text = String::from_utf8(text).unwrap();
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "ERROR", "{text}");
    assert_eq!(last["error"]["code"], "unavailable");
    assert!(
        last["error"]["detail"].as_str().unwrap().contains("read too slowly"),
        "{last}"
    );

    // Limits: the caller's third and fourth watches, with one still open.
    let mut more = vec![open(&env, &format!("{NS}?watch=true"), &env.alice(), Framing::Ndjson).await];
    more.push(open(&env, "/v1/clusters?watch=true", &env.alice(), Framing::Ndjson).await);
    let bearer = format!("Bearer {}", env.alice());
    let refused = Watch::open(
        &format!("{}{NS}?watch=true", env.url()),
        &[("authorization", &bearer)],
        Framing::Ndjson,
    )
    .await
    .err()
    .unwrap();
    assert_eq!((refused.0, refused.1["code"].as_str()), (429, Some("rate_limited")));
    drop(more);
    let started = std::time::Instant::now();
    while env.metric("krayne_watches_open", "").await > 1.0 {
        assert!(started.elapsed() < SOON, "closed watches give their places back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    open(&env, &format!("{NS}?watch=true"), &env.alice(), Framing::Ndjson).await;
}

#[tokio::test]
async fn a_watch_asked_to_last_a_while_ends_cleanly_on_a_bookmark_to_resume_from() {
    let env = krayne_tests::Env::start().await;
    let alice = env.rest(&env.alice());
    let mut probe = open(&env, &format!("{NS}?watch=true"), &env.alice(), Framing::Ndjson).await;
    let start = probe.next(SOON).await.unwrap().version().to_owned();
    drop(probe);
    alice.post(NS, &cluster("before")).await.expect(201);
    let mut last = String::new();
    for framing in [Framing::Ndjson, Framing::Sse] {
        let url = format!("{NS}?watch=true&timeout_seconds=1&resource_version={start}");
        let began = std::time::Instant::now();
        let mut watch = open(&env, &url, &env.alice(), framing).await;
        let frames = watch.to_end(SOON).await.expect("the watch ends by itself");
        assert!(began.elapsed() >= Duration::from_secs(1), "ended early: {frames:#?}");
        assert!(frames.iter().all(|f| f.kind() != "ERROR"), "{frames:#?}");
        assert!(
            frames
                .iter()
                .any(|f| f.kind() == "ADDED" && f.cluster() == Some("before")),
            "{frames:#?}"
        );
        let end = frames.last().unwrap();
        assert_eq!(end.kind(), "BOOKMARK", "{frames:#?}");
        assert!(frames.iter().all(|f| seq(f.version()) <= seq(end.version())));
        if framing == Framing::Sse {
            assert_eq!(end.id.as_deref(), Some(end.version()));
        }
        last = end.version().to_owned();
    }
    // An EventSource reconnecting sends the last id: nothing again from
    // before it, and what follows it.
    let bearer = format!("Bearer {}", env.alice());
    let mut resumed = Watch::open(
        &format!("{}{NS}?watch=true", env.url()),
        &[("authorization", &bearer), ("last-event-id", &last)],
        Framing::Sse,
    )
    .await
    .unwrap();
    alice.post(NS, &cluster("after")).await.expect(201);
    let seen = resumed
        .until(SOON, |f| f.kind() == "ADDED" && f.cluster() == Some("after"))
        .await;
    assert!(
        seen.iter()
            .all(|f| seq(f.version()) > seq(&last) || f.kind() == "BOOKMARK"),
        "{seen:#?}"
    );
    assert!(
        !seen
            .iter()
            .any(|f| f.kind() == "ADDED" && f.cluster() == Some("before")),
        "{seen:#?}"
    );

    let mut grpc = env.grpc(&env.alice()).await;
    let ask = |timeout_seconds| pb::WatchClustersRequest {
        namespace: "ml-team".into(),
        resource_version: String::new(),
        send_initial_events: true,
        timeout_seconds,
    };
    let stream = grpc.clusters.watch_clusters(ask(1)).await.unwrap().into_inner();
    let events: Vec<_> = tokio::time::timeout(SOON, stream.collect::<Vec<_>>())
        .await
        .expect("the gRPC watch ends by itself")
        .into_iter()
        .map(|e| e.expect("no error at the end"))
        .collect();
    assert_eq!(events.first().map(|e| e.r#type), Some(pb::WatchEventType::Added as i32));
    assert_eq!(
        events.last().map(|e| e.r#type),
        Some(pb::WatchEventType::Bookmark as i32)
    );
    let status = grpc.clusters.watch_clusters(ask(86_401)).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("timeout_seconds"), "{status:?}");
    assert!(env.metric("krayne_watches_ended_total", "reason=\"timeout\"").await >= 3.0);
}

#[tokio::test]
async fn bad_watch_requests_are_refused_with_the_field_and_watches_are_audited() {
    let env = krayne_tests::Env::start_with(EnvOptions::with_args(&["--audit-reads"])).await;
    let alice = env.rest(&env.alice());
    let field =
        |reply: krayne_tests::Reply| reply.problem(400, "invalid_argument").body["violations"][0]["field"].clone();
    assert_eq!(
        field(alice.get(&format!("{NS}?watch=true&page_size=10")).await),
        "page_size"
    );
    assert_eq!(
        field(alice.get(&format!("{NS}?resource_version=00000000.1")).await),
        "watch"
    );
    assert_eq!(
        field(alice.get(&format!("{NS}?send_initial_events=true")).await),
        "watch"
    );
    assert_eq!(field(alice.get(&format!("{NS}?timeout_seconds=5")).await), "watch");
    assert_eq!(
        field(alice.get(&format!("{NS}?watch=true&timeout_seconds=86401")).await),
        "timeout_seconds"
    );
    alice
        .get(&format!("{NS}?watch=true&timeout_seconds=-1"))
        .await
        .problem(400, "invalid_argument");
    let both = format!("{NS}?watch=true&resource_version=00000000.0&send_initial_events=true");
    assert_eq!(field(alice.get(&both).await), "send_initial_events");
    assert_eq!(
        field(alice.get(&format!("{NS}?watch=true&resource_version=x.y")).await),
        "resource_version"
    );
    let bearer = format!("Bearer {}", env.alice());
    let bad_id = Watch::open(
        &format!("{}{NS}?watch=true", env.url()),
        &[("authorization", &bearer), ("last-event-id", "not-a-version")],
        Framing::Sse,
    )
    .await
    .err()
    .unwrap();
    assert_eq!(
        (bad_id.0, bad_id.1["violations"][0]["field"].as_str()),
        (400, Some("Last-Event-ID"))
    );

    // The query token: only for an event stream, and never beside a header.
    let query_token = format!("{}{NS}?watch=true&access_token={}", env.url(), env.alice());
    let not_sse = Watch::open(&query_token, &[], Framing::Ndjson).await.err().unwrap();
    assert_eq!((not_sse.0, not_sse.1["code"].as_str()), (401, Some("unauthenticated")));
    let twice = Watch::open(&query_token, &[("authorization", &bearer)], Framing::Sse)
        .await
        .err()
        .unwrap();
    assert_eq!(
        (twice.0, twice.1["violations"][0]["field"].as_str()),
        (400, Some("authorization"))
    );
    let forged = format!("{}{NS}?watch=true&access_token=forged.token.here", env.url());
    let forged = Watch::open(&forged, &[], Framing::Sse).await.err().unwrap();
    assert_eq!(forged.0, 401);

    // A watch is a read, audited when reads are; a refused one is denied.
    let mut ok = open(&env, &format!("{NS}?watch=true"), &env.alice(), Framing::Ndjson).await;
    ok.next(SOON).await.unwrap();
    Watch::open(
        &format!("{}/v1/namespaces/other-team/clusters?watch=true", env.url()),
        &[("authorization", &bearer)],
        Framing::Ndjson,
    )
    .await
    .err()
    .unwrap();
    // Rows of reads are written in the background: wait for both.
    let wanted = [("ml-team", "succeeded"), ("other-team", "denied")];
    let started = std::time::Instant::now();
    loop {
        let rows = env
            .rest(&env.admin())
            .get("/v1/audit?action=cluster.watch&page_size=100")
            .await
            .expect(200)
            .body;
        let found = |(ns, outcome): (&str, &str)| {
            rows["events"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["namespace"] == ns && r["outcome"] == outcome)
        };
        if wanted.into_iter().all(found) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{rows}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
