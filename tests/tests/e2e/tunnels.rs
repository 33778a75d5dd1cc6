//! Service access through krayne (issue 22, first part): the services
//! list, TCP tunnels over a WebSocket and over gRPC to the sandbox's head
//! stand-ins, in both upstream modes; authorization, audit, limits, a
//! replaced head and shutdown.

use std::time::Duration;

use futures::{SinkExt as _, StreamExt as _};
use krayne_proto::v1::{self as pb, tunnel_request, tunnel_response};
use krayne_tests::{Env, EnvOptions};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use tokio::net::TcpStream;
use tokio_tungstenite::{
    MaybeTlsStream, WebSocketStream,
    tungstenite::{Message, client::IntoClientRequest as _, protocol::frame::coding::CloseCode},
};

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

const DIRECT: &[&str] = &["--service-upstream", "direct"];
const PORT_FORWARD: &[&str] = &["--service-upstream", "port-forward"];

/// A server (with `args`) and a ready cluster `name` in `ml-team` with
/// every service on.
async fn ready(args: &[&str], name: &str) -> Env {
    let env = Env::start_with(EnvOptions::with_args(args)).await;
    env.ready_cluster(name).await;
    env
}

fn ws_url(env: &Env, cluster: &str, service: &str) -> String {
    format!(
        "ws://{}/v1/namespaces/ml-team/clusters/{cluster}/services/{service}/tunnel",
        env.server.api
    )
}

/// Opens a WebSocket tunnel, or returns the HTTP status that refused it.
async fn open_ws(url: &str, token: Option<&str>) -> Result<Socket, u16> {
    let mut request = url.into_client_request().unwrap();
    if let Some(token) = token {
        request
            .headers_mut()
            .insert("authorization", format!("Bearer {token}").parse().unwrap());
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((socket, _)) => Ok(socket),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => Err(response.status().as_u16()),
        Err(e) => panic!("{e}"),
    }
}

/// The next binary payload (text if the server sent text), within 10 s.
async fn next_bytes(socket: &mut Socket) -> Vec<u8> {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), socket.next())
            .await
            .expect("a frame within 10 s")
        {
            Some(Ok(Message::Binary(b))) => return b.to_vec(),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            other => panic!("expected data, got {other:?}"),
        }
    }
}

/// The close frame that ends the socket, within `within`.
async fn closed(socket: &mut Socket, within: Duration) -> (CloseCode, String) {
    loop {
        match tokio::time::timeout(within, socket.next())
            .await
            .expect("closed in time")
        {
            Some(Ok(Message::Close(Some(frame)))) => return (frame.code, frame.reason.to_string()),
            Some(Ok(Message::Binary(_) | Message::Ping(_) | Message::Pong(_))) => {}
            other => panic!("expected a close frame, got {other:?}"),
        }
    }
}

/// Sends `payload` through the tunnel while reading the echo back (full
/// duplex); the echo's sha256 must equal the payload's.
async fn echo_round_trip(socket: Socket, payload: Vec<u8>) -> Socket {
    let (mut sink, mut stream) = socket.split();
    let sent = payload.clone();
    let writer = tokio::spawn(async move {
        for chunk in sent.chunks(64 * 1024) {
            sink.send(Message::binary(chunk.to_vec())).await.unwrap();
        }
        sink
    });
    let mut echoed = Vec::with_capacity(payload.len());
    while echoed.len() < payload.len() {
        match tokio::time::timeout(Duration::from_secs(30), stream.next())
            .await
            .expect("echo keeps coming")
        {
            Some(Ok(Message::Binary(b))) => echoed.extend_from_slice(&b),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(Sha256::digest(&echoed), Sha256::digest(&payload), "the echo differs");
    let sink = writer.await.unwrap();
    sink.reunite(stream).unwrap()
}

fn payload(mib: usize) -> Vec<u8> {
    (0..mib * 1024 * 1024)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[0])
        .collect()
}

async fn audit_rows(env: &Env, cluster: &str) -> Vec<Value> {
    let rows = env
        .rest(&env.admin())
        .get(&format!("/v1/audit?action=service.connect&cluster={cluster}"))
        .await
        .expect(200);
    rows.body["events"].as_array().cloned().unwrap_or_default()
}

async fn services_are_listed_and_tunnels_carry_bytes(args: &[&str], mib: usize) {
    let env = ready(args, "tun").await;
    let rest = env.rest(&env.alice());
    let list = rest
        .get("/v1/namespaces/ml-team/clusters/tun/services")
        .await
        .expect(200);
    let names: Vec<&str> = list.body["services"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["dashboard", "client", "notebook", "code-server", "ssh"]);
    for s in list.body["services"].as_array().unwrap() {
        assert_eq!(s["state"], "available", "{s}");
        let name = s["name"].as_str().unwrap();
        assert_eq!(
            s["tunnel_path"],
            format!("/v1/namespaces/ml-team/clusters/tun/services/{name}/tunnel")
        );
        // Krayne's bootstrap binds the notebook, code-server and sshd to
        // the pod's loopback: the cluster network has no way to them.
        if ["notebook", "code-server", "ssh"].contains(&name) {
            assert!(s["in_cluster_url"].is_null(), "{s}");
        } else {
            assert!(s["in_cluster_url"].as_str().unwrap().contains("://127."), "{s}");
        }
    }

    // The head's SSH server speaks first; the Ray client stand-in echoes.
    let mut ssh = open_ws(&ws_url(&env, "tun", "ssh"), Some(&env.alice())).await.unwrap();
    assert!(String::from_utf8_lossy(&next_bytes(&mut ssh).await).starts_with("SSH-2.0-"));
    ssh.close(None).await.unwrap();
    let mut ray = open_ws(&ws_url(&env, "tun", "client"), Some(&env.alice()))
        .await
        .unwrap();
    assert!(String::from_utf8_lossy(&next_bytes(&mut ray).await).contains("ray client"));
    let mut ray = echo_round_trip(ray, payload(mib)).await;
    ray.close(None).await.unwrap();

    // A raw tunnel carries the caller's bytes as they are: Ray's token,
    // from the credentials call, goes in them.
    let credentials = env
        .rest(&env.alice())
        .post("/v1/namespaces/ml-team/clusters/tun/ray-credentials", &json!({}))
        .await
        .expect(200);
    let token = credentials.body["token"].as_str().unwrap().to_owned();
    krayne_tests::register_secret(&token);
    let mut dashboard = open_ws(&ws_url(&env, "tun", "dashboard"), Some(&env.alice()))
        .await
        .unwrap();
    let request =
        format!("GET /api/version HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n");
    dashboard.send(Message::binary(request.into_bytes())).await.unwrap();
    let mut answer = Vec::new();
    let (code, reason) = loop {
        match tokio::time::timeout(Duration::from_secs(10), dashboard.next())
            .await
            .unwrap()
        {
            Some(Ok(Message::Binary(b))) => answer.extend_from_slice(&b),
            Some(Ok(Message::Close(Some(f)))) => break (f.code, f.reason.to_string()),
            other => panic!("{other:?}"),
        }
    };
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.contains("ray_version"),
        "{answer}"
    );
    assert_eq!(
        code,
        CloseCode::Normal,
        "the service closing ends the tunnel normally: {reason}"
    );

    let rows = eventually_rows(&env, "tun", 3).await;
    let row = |service: &str| {
        rows.iter()
            .find(|r| r["request_summary"]["service"] == service)
            .unwrap_or_else(|| panic!("a {service} row in {rows:?}"))
            .clone()
    };
    let (ssh_row, echo_row, dashboard_row) = (row("ssh"), row("client"), row("dashboard"));
    for r in [&ssh_row, &echo_row, &dashboard_row] {
        assert_eq!(r["outcome"], "succeeded", "{r}");
        assert_eq!(r["actor"]["subject"], "alice@example.com", "{r}");
        assert_eq!(r["request_summary"]["via"], "websocket", "{r}");
    }
    let sent = (mib * 1024 * 1024) as u64;
    assert_eq!(echo_row["request_summary"]["bytes_to_service"], sent, "{echo_row}");
    assert!(
        echo_row["request_summary"]["bytes_to_client"].as_u64().unwrap() >= sent,
        "{echo_row}"
    );
    // sshd listens on the pod's loopback: only a port-forward reaches it,
    // in either mode; the Ray client and the dashboard are dialled at the
    // pod's IP in direct mode.
    assert_eq!(ssh_row["request_summary"]["upstream"], "port-forward");
    let mode = if args == DIRECT { "direct" } else { "port-forward" };
    assert_eq!(echo_row["request_summary"]["upstream"], mode);
    assert_eq!(dashboard_row["request_summary"]["upstream"], mode);
}

/// The `service.connect` rows of `cluster` once there are `n` completed ones.
async fn eventually_rows(env: &Env, cluster: &str, n: usize) -> Vec<Value> {
    for _ in 0..200 {
        let rows = audit_rows(env, cluster).await;
        if rows.iter().filter(|r| r["outcome"] != "pending").count() >= n {
            return rows;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "{n} completed service.connect rows never came: {:?}",
        audit_rows(env, cluster).await
    );
}

#[tokio::test]
async fn port_forward_tunnels_carry_100_mib_and_are_audited() {
    services_are_listed_and_tunnels_carry_bytes(PORT_FORWARD, 100).await;
}

#[tokio::test]
async fn direct_tunnels_carry_bytes_and_are_audited() {
    services_are_listed_and_tunnels_carry_bytes(DIRECT, 10).await;
}

/// The message that opens a gRPC tunnel to `service` of `cluster` in `ml-team`.
fn open_message(cluster: &str, service: &str) -> pb::TunnelRequest {
    pb::TunnelRequest {
        kind: Some(tunnel_request::Kind::Open(pb::TunnelTarget {
            namespace: "ml-team".into(),
            cluster: cluster.into(),
            service: service.into(),
        })),
    }
}

async fn grpc_tunnel(args: &[&str]) {
    let env = ready(args, "gtun").await;
    let mut g = env.grpc(&env.alice()).await;
    let listed = g
        .tunnels
        .list_services(pb::ListServicesRequest {
            namespace: "ml-team".into(),
            name: "gtun".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.services.len(), 5);
    assert!(listed.services.iter().all(|s| s.state() == pb::ServiceState::Available));

    let (tx, rx) = tokio::sync::mpsc::channel(8);
    tx.send(open_message("gtun", "client")).await.unwrap();
    let mut responses = g
        .tunnels
        .open(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let first = responses.next().await.unwrap().unwrap();
    assert!(
        matches!(first.kind, Some(tunnel_response::Kind::Opened(ref o)) if o.service == "client" && o.port == 10001)
    );
    let mut received = Vec::new();
    let data = |kind| match kind {
        Some(tunnel_response::Kind::Data(d)) => d,
        other => panic!("{other:?}"),
    };
    while !String::from_utf8_lossy(&received).contains("ray client") {
        received.extend(data(responses.next().await.unwrap().unwrap().kind));
    }
    // Data, then a half-close at once: the echo of what came before it
    // still arrives.
    tx.send(pb::TunnelRequest {
        kind: Some(tunnel_request::Kind::Data(bytes::Bytes::from_static(b"ping"))),
    })
    .await
    .unwrap();
    drop(tx);
    let mut echo = Vec::new();
    while echo.len() < 4 {
        echo.extend(data(responses.next().await.unwrap().unwrap().kind));
    }
    assert_eq!(echo, b"ping");
    if args == DIRECT {
        // The half-close reaches the echo server, which closes: the
        // response stream ends with OK.
        let end = tokio::time::timeout(Duration::from_secs(10), responses.next())
            .await
            .unwrap();
        assert!(end.is_none(), "{end:?}");
    } else {
        // Kubernetes' WebSocket port-forward cannot close one direction:
        // the tunnel stays open until the client leaves, which the server
        // sees and completes the row.
        drop(responses);
    }
    let rows = eventually_rows(&env, "gtun", 1).await;
    assert_eq!(rows[0]["request_summary"]["via"], "grpc");
    assert_eq!(rows[0]["request_summary"]["bytes_to_service"], 4);
}

#[tokio::test]
async fn grpc_tunnels_work_through_port_forward() {
    grpc_tunnel(PORT_FORWARD).await;
}

#[tokio::test]
async fn grpc_tunnels_work_direct() {
    grpc_tunnel(DIRECT).await;
}

#[tokio::test]
async fn only_editors_of_the_namespace_open_tunnels() {
    let env = ready(PORT_FORWARD, "authz").await;
    let url = ws_url(&env, "authz", "ssh");
    assert_eq!(open_ws(&url, None).await.err(), Some(401), "no token");
    let other = env.token("olga@example.com", &["other-team"]);
    assert_eq!(open_ws(&url, Some(&other)).await.err(), Some(403), "another team");
    env.rest(&other)
        .get("/v1/namespaces/ml-team/clusters/authz/services")
        .await
        .problem(403, "permission_denied");
    assert_eq!(
        open_ws(&ws_url(&env, "authz", "nope"), Some(&env.alice())).await.err(),
        Some(404),
        "unknown service"
    );
    assert_eq!(
        open_ws(&ws_url(&env, "missing", "ssh"), Some(&env.alice())).await.err(),
        Some(404),
        "unknown cluster"
    );
    env.rest(&env.alice())
        .get("/v1/namespaces/ml-team/clusters/authz/services/ssh/tunnel")
        .await
        .problem(400, "invalid_argument");

    // Over gRPC too: the opening message is authorized like the WebSocket.
    let mut g = env.grpc(&other).await;
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tx.send(open_message("authz", "ssh")).await.unwrap();
    let refused = g
        .tunnels
        .open(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .expect_err("another team may not open a tunnel");
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused}");
    let mut g = env.grpc(&env.alice()).await;
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tx.send(pb::TunnelRequest {
        kind: Some(tunnel_request::Kind::Data(bytes::Bytes::from_static(b"no open first"))),
    })
    .await
    .unwrap();
    let refused = g
        .tunnels
        .open(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .expect_err("the first message must open");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused}");

    // Viewers see the services, not the traffic.
    let admin = env.rest(&env.admin());
    admin
        .post("/v1/namespaces/shared-data/clusters", &json!({"name": "shared"}))
        .await
        .expect(201);
    admin
        .get("/v1/namespaces/shared-data/clusters/shared/wait?timeout_seconds=60")
        .await
        .expect(200);
    env.rest(&env.alice())
        .get("/v1/namespaces/shared-data/clusters/shared/services")
        .await
        .expect(200);
    let shared = format!(
        "ws://{}/v1/namespaces/shared-data/clusters/shared/services/ssh/tunnel",
        env.server.api
    );
    assert_eq!(open_ws(&shared, Some(&env.alice())).await.err(), Some(403), "viewer");
    let denied = eventually_rows(&env, "shared", 1).await;
    assert!(denied.iter().any(|r| r["outcome"] == "denied"), "{denied:?}");
}

#[tokio::test]
async fn a_replaced_head_ends_the_tunnel_and_the_next_reaches_the_new_pod() {
    use k8s_openapi::api::core::v1::Pod;
    let env = ready(PORT_FORWARD, "moving").await;
    let mut ssh = open_ws(&ws_url(&env, "moving", "ssh"), Some(&env.alice()))
        .await
        .unwrap();
    assert!(String::from_utf8_lossy(&next_bytes(&mut ssh).await).starts_with("SSH-2.0-"));
    let client = krayne_server::k8s::client_for_url(&env.sandbox.url()).unwrap();
    let pods: kube::Api<Pod> = kube::Api::namespaced(client, "ml-team");
    let heads = pods
        .list(&kube::api::ListParams::default().labels("ray.io/cluster=moving,ray.io/node-type=head"))
        .await
        .unwrap();
    let old = heads.items[0].metadata.name.clone().unwrap();
    pods.delete(&old, &Default::default()).await.unwrap();
    let (code, reason) = closed(&mut ssh, Duration::from_secs(10)).await;
    assert_eq!(code, CloseCode::Normal, "{reason}");
    assert!(reason.contains("service closed"), "{reason}");

    let again = loop {
        match open_ws(&ws_url(&env, "moving", "ssh"), Some(&env.alice())).await {
            Ok(socket) => break socket,
            Err(409 | 503) => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(other) => panic!("{other}"),
        }
    };
    let mut again = again;
    assert!(String::from_utf8_lossy(&next_bytes(&mut again).await).starts_with("SSH-2.0-"));
    let rows = eventually_rows(&env, "moving", 1).await;
    let pods_seen: Vec<&str> = rows
        .iter()
        .filter_map(|r| r["request_summary"]["pod"].as_str())
        .collect();
    assert!(
        pods_seen.contains(&old.as_str()) && pods_seen.iter().any(|p| *p != old),
        "{pods_seen:?}"
    );
}

#[tokio::test]
async fn limits_idle_timeouts_and_shutdown_close_tunnels_with_a_reason() {
    let mut env = ready(
        &[
            "--max-tunnels-per-caller",
            "2",
            "--tunnel-idle-timeout-seconds",
            "1",
            "--shutdown-grace-seconds",
            "5",
        ],
        "limits",
    )
    .await;
    let url = ws_url(&env, "limits", "client");
    let alice = env.alice();
    let mut first = open_ws(&url, Some(&alice)).await.unwrap();
    let _second = open_ws(&url, Some(&alice)).await.unwrap();
    assert_eq!(open_ws(&url, Some(&alice)).await.err(), Some(429), "a third tunnel");
    let admin = open_ws(&url, Some(&env.admin())).await;
    assert!(admin.is_ok(), "the limit is per caller");

    // Idle: no byte either way for a second.
    let _greeting = next_bytes(&mut first).await;
    let (code, reason) = closed(&mut first, Duration::from_secs(10)).await;
    assert_eq!(u16::from(code), 4408, "{reason}");
    assert!(reason.contains("idle"), "{reason}");
    drop(first);

    let mut busy = loop {
        match open_ws(&url, Some(&alice)).await {
            Ok(s) => break s,
            Err(429) => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(other) => panic!("{other}"),
        }
    };
    let _greeting = next_bytes(&mut busy).await;
    env.server.terminate();
    // Kept busy, the tunnel outlives the signal; when the grace period
    // ends it is closed, saying why.
    let (mut sink, mut stream) = busy.split();
    let keep_busy = tokio::spawn(async move {
        while sink.send(Message::binary(b".".to_vec())).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    });
    let signalled = std::time::Instant::now();
    let (code, reason) = loop {
        match tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("closed in time")
        {
            Some(Ok(Message::Close(Some(frame)))) => break (frame.code, frame.reason.to_string()),
            Some(Ok(_)) => {}
            other => panic!("expected a close frame, got {other:?}"),
        }
    };
    keep_busy.abort();
    assert!(
        signalled.elapsed() >= Duration::from_secs(4),
        "closed before the grace period ended"
    );
    assert_eq!(code, CloseCode::Away, "{reason}");
    assert!(reason.contains("shutting down"), "{reason}");
    assert_eq!(env.server.exit_code().await, Some(0));
    // The rows were completed before the server exited.
    env.start_server().await;
    let rows = audit_rows(&env, "limits").await;
    let last = rows
        .iter()
        .find(|r| {
            r["request_summary"]["ended"]
                .as_str()
                .is_some_and(|e| e.starts_with("the server is shutting down"))
        })
        .unwrap_or_else(|| panic!("no row ended by the shutdown: {rows:?}"));
    assert_eq!(last["outcome"], "succeeded");
    assert!(
        last["request_summary"]["bytes_to_client"].as_u64().unwrap() > 0,
        "{last}"
    );
    let idle = rows.iter().find(|r| r["request_summary"]["ended"] == "idle for 1 s");
    assert!(idle.is_some(), "{rows:?}");
}

/// `…/services/{svc}/proxy` of cluster `cluster` in `ml-team`.
fn proxy_path(cluster: &str, service: &str) -> String {
    format!("/v1/namespaces/ml-team/clusters/{cluster}/services/{service}/proxy")
}

async fn the_http_proxy_reaches_the_services(args: &[&str]) {
    let env = ready(args, "web").await;
    let alice = env.alice();
    let rest = env.rest(&alice);
    let dashboard = proxy_path("web", "dashboard");

    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let bare = no_redirects
        .get(format!("{}{dashboard}?x=1", env.url()))
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap();
    assert_eq!(bare.status().as_u16(), 308);
    assert_eq!(bare.headers()["location"], format!("{dashboard}/?x=1").as_str());
    let page = rest.get(&format!("{dashboard}/")).await.expect(200);
    assert!(page.text.contains("Ray Dashboard") && page.text.contains("fetch(\"api/version\")"));
    let version = rest.get(&format!("{dashboard}/api/version")).await.expect(200);
    assert_eq!(version.body["ray_version"], "2.60.0");

    // Ray's Jobs API through the proxy, and Ray's own browser guard, which
    // sees the browser's headers unchanged.
    let submitted = rest
        .post(
            &format!("{dashboard}/api/jobs/"),
            &json!({"entrypoint": "echo proxied", "submission_id": "p1"}),
        )
        .await
        .expect(200);
    assert_eq!(submitted.body["submission_id"], "p1");
    let guarded = reqwest::Client::new()
        .post(format!("{}{dashboard}/api/jobs/", env.url()))
        .bearer_auth(&alice)
        .header("origin", "http://portal.example")
        .body(r#"{"entrypoint": "true"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(guarded.status().as_u16(), 405);
    assert_eq!(
        guarded.text().await.unwrap(),
        "'POST' method not allowed for browser traffic."
    );

    // What reaches the service: no Authorization, krayne's cookies kept
    // here, X-Forwarded-* set.
    let seen = reqwest::Client::new()
        .get(format!("{}{}/some/page", env.url(), proxy_path("web", "code-server")))
        .bearer_auth(&alice)
        .header("cookie", "krayne_session=secret; theme=dark")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(seen.contains("<p>/some/page</p>"), "the prefix comes off: {seen}");
    for want in [
        "<li>x-forwarded-prefix</li>",
        "<li>x-forwarded-for</li>",
        "<li>cookie</li>",
    ] {
        assert!(seen.contains(want), "{want} in {seen}");
    }
    assert!(
        !seen.contains("<li>authorization</li>"),
        "the bearer token reached the service: {seen}"
    );

    // A WebSocket through the proxy.
    let url = format!("ws://{}{dashboard}/ws", env.server.api);
    let mut socket = open_ws(&url, Some(&alice)).await.unwrap();
    socket.send(Message::text("through the proxy")).await.unwrap();
    let echoed = tokio::time::timeout(Duration::from_secs(10), socket.next())
        .await
        .unwrap();
    assert_eq!(echoed.unwrap().unwrap(), Message::text("through the proxy"));

    // TCP services have no HTTP proxy; viewers and strangers get nothing.
    rest.get(&format!("{}/", proxy_path("web", "ssh")))
        .await
        .problem(400, "invalid_argument");
    env.anonymous()
        .get(&format!("{dashboard}/"))
        .await
        .problem(401, "unauthenticated");
    let other = env.token("olga@example.com", &["other-team"]);
    env.rest(&other)
        .get(&format!("{dashboard}/"))
        .await
        .problem(403, "permission_denied");

    let rows = eventually_rows(&env, "web", 3).await;
    assert!(
        rows.iter()
            .any(|r| r["request_summary"]["via"] == "proxy" && r["outcome"] == "succeeded")
    );
}

#[tokio::test]
async fn the_http_proxy_works_through_port_forward() {
    the_http_proxy_reaches_the_services(PORT_FORWARD).await;
}

#[tokio::test]
async fn the_http_proxy_works_direct() {
    the_http_proxy_reaches_the_services(DIRECT).await;
}

#[tokio::test]
async fn a_revoked_grant_closes_open_tunnels() {
    let env = ready(&["--tunnel-reauthorize-seconds", "1"], "revoked").await;
    let mut socket = open_ws(&ws_url(&env, "revoked", "client"), Some(&env.alice()))
        .await
        .unwrap();
    let _greeting = next_bytes(&mut socket).await;
    let demoted = krayne_tests::TEAMS.replace("ml-team: editor", "ml-team: viewer");
    assert_ne!(demoted, krayne_tests::TEAMS);
    std::fs::write(env.teams_file(), demoted).unwrap();
    env.server.signal("HUP");
    let (code, reason) = closed(&mut socket, Duration::from_secs(10)).await;
    assert_eq!(u16::from(code), 4403, "{reason}");
    assert!(reason.contains("no longer an editor of namespace ml-team"), "{reason}");
    let rows = eventually_rows(&env, "revoked", 1).await;
    assert!(
        rows.iter().any(|r| r["request_summary"]["ended"] == reason.as_str()),
        "{rows:?}"
    );
}

/// Reads until the socket ends (a close frame, an error or its end),
/// within `within`.
async fn ends(socket: &mut Socket, within: Duration) {
    tokio::time::timeout(within, async {
        while let Some(Ok(message)) = socket.next().await {
            if matches!(message, Message::Close(_)) {
                return;
            }
        }
    })
    .await
    .expect("the socket ended in time");
}

#[tokio::test]
async fn hostile_tunnel_and_proxy_clients_are_cut_and_leave_nothing_open() {
    let env = ready(
        &["--request-body-timeout-seconds", "1", "--max-tunnels-per-caller", "2"],
        "hostile",
    )
    .await;
    let alice = env.alice();

    // A WebSocket frame over the 256 KiB limit ends the tunnel.
    let mut socket = open_ws(&ws_url(&env, "hostile", "client"), Some(&alice)).await.unwrap();
    let _greeting = next_bytes(&mut socket).await;
    let _ = socket.send(Message::binary(vec![7u8; 300 * 1024])).await;
    ends(&mut socket, Duration::from_secs(5)).await;

    // A proxied upload that stalls is cut after the body timeout (408),
    // and its connection to the service goes with it.
    let head = format!(
        "POST {}/api/jobs/ HTTP/1.1\r\nHost: krayne\r\nAuthorization: Bearer {alice}\r\n\
         Content-Type: application/json\r\nContent-Length: 100000",
        proxy_path("hostile", "dashboard")
    );
    let mut stalled = krayne_tests::raw::Http1::send(env.server.api, &head, b"{\"entrypoint\": \"tr").await;
    let (answer, after) = stalled
        .answer(Duration::from_secs(15))
        .await
        .expect("an answer to a stalled upload");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(after < Duration::from_secs(10), "cut after {after:?}");

    // Nothing stayed open: both of the caller's two tunnels are free, and
    // every audit row is complete.
    let first = open_ws(&ws_url(&env, "hostile", "ssh"), Some(&alice)).await.unwrap();
    let second = open_ws(&ws_url(&env, "hostile", "ssh"), Some(&alice)).await.unwrap();
    drop((first, second));
    let mut pending = Vec::new();
    for _ in 0..100 {
        pending = audit_rows(&env, "hostile")
            .await
            .into_iter()
            .filter(|r| r["outcome"] == "pending")
            .collect();
        if pending.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(pending.is_empty(), "rows left pending: {pending:?}");
}
