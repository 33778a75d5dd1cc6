//! Long-lived streams end when their caller may no longer use them (the
//! second review's findings 3 and 5): a proxied WebSocket (bearer token or
//! browser session) within the re-check period of a mapping reload that
//! revokes the grant, at the session's or token's expiry, and when idle; a
//! followed job log when its viewer loses access; a watch at its token's
//! expiry. Each end is counted and audited (`stream.end`).

use std::time::{Duration, Instant};

use futures::{SinkExt as _, StreamExt as _};
use krayne_tests::{Env, EnvOptions, TEAMS};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::{
    MaybeTlsStream, WebSocketStream,
    tungstenite::{Message, client::IntoClientRequest as _},
};

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

const DASHBOARD: &str = "/v1/namespaces/ml-team/clusters/{c}/services/dashboard/proxy";

fn dashboard(cluster: &str) -> String {
    DASHBOARD.replace("{c}", cluster)
}

/// A WebSocket to the dashboard's echo through the proxy, with a bearer
/// token or a session cookie (sent from the service's own origin, as its
/// page would).
async fn proxied_ws(env: &Env, cluster: &str, bearer: Option<&str>, cookie: Option<&str>) -> Socket {
    let url = format!("ws://{}{}/ws", env.server.api, dashboard(cluster));
    let mut request = url.into_client_request().unwrap();
    let headers = request.headers_mut();
    if let Some(token) = bearer {
        headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
    }
    if let Some(cookie) = cookie {
        headers.insert("cookie", cookie.parse().unwrap());
        headers.insert("origin", format!("http://{}", env.server.api).parse().unwrap());
    }
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    socket.send(Message::text("hello")).await.unwrap();
    let echoed = tokio::time::timeout(Duration::from_secs(10), socket.next())
        .await
        .unwrap();
    assert_eq!(echoed.unwrap().unwrap(), Message::text("hello"));
    socket
}

/// Keeps talking through `socket` until it stops answering; returns how
/// long that took. Panics when it still echoes after `within`.
async fn talks_until_cut(socket: &mut Socket, within: Duration) -> Duration {
    let started = Instant::now();
    while started.elapsed() < within {
        if socket.send(Message::text("still there?")).await.is_err() {
            return started.elapsed();
        }
        match tokio::time::timeout(Duration::from_millis(500), socket.next()).await {
            Ok(Some(Ok(Message::Text(_)))) => tokio::time::sleep(Duration::from_millis(100)).await,
            Ok(_) => return started.elapsed(),
            Err(_) => {}
        }
    }
    panic!("the WebSocket still echoed {within:?} later");
}

/// Signs in to `cluster`'s dashboard with `token`: the cookie to send
/// back, the sign-in link's answer and the whole `Set-Cookie`.
async fn session_cookie(env: &Env, token: &str, cluster: &str) -> (String, Value, String) {
    let link = env
        .rest(token)
        .post(
            &format!("/v1/namespaces/ml-team/clusters/{cluster}/services/dashboard/sessions"),
            &json!({}),
        )
        .await
        .expect(201)
        .body;
    let opened = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(link["sign_in_url"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(opened.status(), 303);
    let set_cookie = opened.headers()["set-cookie"].to_str().unwrap().to_owned();
    (set_cookie.split(';').next().unwrap().to_owned(), link, set_cookie)
}

/// The `stream.end` rows of `cluster`, once there are `at_least`.
async fn stream_ends(env: &Env, cluster: &str, at_least: usize) -> Vec<Value> {
    let mut rows = Vec::new();
    for _ in 0..100 {
        let body = env
            .rest(&env.admin())
            .get(&format!(
                "/v1/audit?action=stream.end{}",
                if cluster.is_empty() {
                    String::new()
                } else {
                    format!("&cluster={cluster}")
                }
            ))
            .await
            .expect(200)
            .body;
        rows = body["events"].as_array().cloned().unwrap_or_default();
        if rows.len() >= at_least {
            return rows;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{} stream.end rows of {cluster}, not {at_least}: {rows:?}", rows.len());
}

#[tokio::test]
async fn proxied_websockets_end_within_the_recheck_period_once_their_grant_is_revoked() {
    let env = Env::start_with(EnvOptions::with_args(&["--tunnel-reauthorize-seconds", "1"])).await;
    env.ready_cluster("revoked").await;
    let alice = env.alice();
    let mut bearer = proxied_ws(&env, "revoked", Some(&alice), None).await;
    let (cookie, ..) = session_cookie(&env, &alice, "revoked").await;
    let mut session = proxied_ws(&env, "revoked", None, Some(&cookie)).await;

    let demoted = TEAMS.replace("ml-team: editor", "ml-team: viewer");
    std::fs::write(env.teams_file(), demoted).unwrap();
    env.server.signal("HUP");
    // The reload itself takes a moment; then one re-check period.
    let bearer_cut = talks_until_cut(&mut bearer, Duration::from_secs(10)).await;
    let session_cut = talks_until_cut(&mut session, Duration::from_secs(10)).await;
    eprintln!("revoked: bearer WebSocket cut after {bearer_cut:?}, session WebSocket {session_cut:?} later");

    let rows = stream_ends(&env, "revoked", 2).await;
    for row in &rows {
        assert_eq!(row["request_summary"]["stream"], "proxied-websocket", "{row}");
        assert_eq!(row["request_summary"]["reason"], "revoked", "{row}");
        assert_eq!(row["actor"]["subject"], "alice@example.com");
        assert_eq!(row["http_status"], 403);
        assert!(
            row["error"]
                .as_str()
                .unwrap()
                .contains("no longer an editor of namespace ml-team"),
            "{row}"
        );
    }
    let counted = env
        .metric(
            "krayne_streams_ended_total",
            "stream=\"proxied-websocket\",reason=\"revoked\"",
        )
        .await;
    assert_eq!(counted, 2.0);
}

#[tokio::test]
async fn proxied_websockets_end_with_their_session_and_their_token() {
    let env = Env::start_with(EnvOptions::with_args(&["--session-ttl-seconds", "3"])).await;
    env.ready_cluster("expiring").await;
    let alice = env.alice();
    let (cookie, ..) = session_cookie(&env, &alice, "expiring").await;
    let mut session = proxied_ws(&env, "expiring", None, Some(&cookie)).await;
    // A token of a few seconds: the WebSocket it opened ends with it, and
    // a session it asks for lasts no longer than it does.
    let short = env.token_for("alice@example.com", &["ml-research"], 4);
    let mut bearer = proxied_ws(&env, "expiring", Some(&short), None).await;

    let session_cut = talks_until_cut(&mut session, Duration::from_secs(15)).await;
    let bearer_cut = talks_until_cut(&mut bearer, Duration::from_secs(15)).await;
    eprintln!("expired: session WebSocket cut after {session_cut:?}, the token's {bearer_cut:?} later");
    assert!(
        session_cut >= Duration::from_secs(1),
        "{session_cut:?}: not before the session ends"
    );

    let rows = stream_ends(&env, "expiring", 2).await;
    assert!(
        rows.iter()
            .all(|r| r["request_summary"]["reason"] == "expired" && r["http_status"] == 401),
        "{rows:?}"
    );
}

#[tokio::test]
async fn a_session_never_outlives_the_token_that_asked_for_it() {
    let env = Env::start().await;
    env.ready_cluster("capped").await;
    let short = env.token_for("alice@example.com", &["ml-research"], 20);
    let (_, link, set_cookie) = session_cookie(&env, &short, "capped").await;
    let seconds = link["session_seconds"].as_u64().unwrap();
    assert!((1..=20).contains(&seconds), "a 20 s token's session lasts {seconds} s");
    let max_age: u64 = set_cookie
        .split(';')
        .find_map(|a| a.trim().strip_prefix("Max-Age="))
        .unwrap()
        .parse()
        .unwrap();
    assert!(max_age <= 20, "{set_cookie}");
}

#[tokio::test]
async fn a_quiet_proxied_websocket_idles_out() {
    let env = Env::start_with(EnvOptions::with_args(&["--tunnel-idle-timeout-seconds", "1"])).await;
    env.ready_cluster("quiet").await;
    let mut socket = proxied_ws(&env, "quiet", Some(&env.alice()), None).await;
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(Ok(message)) = socket.next().await {
            assert!(!matches!(message, Message::Text(_)), "nothing was sent: {message:?}");
        }
    })
    .await;
    assert!(ended.is_ok(), "a quiet WebSocket stayed open");
    let rows = stream_ends(&env, "quiet", 1).await;
    assert_eq!(rows[0]["request_summary"]["reason"], "idle");
}

/// The default mapping plus a viewer of ml-team.
fn with_a_viewer() -> String {
    format!(
        "{TEAMS}  - name: watchers\n    members: {{ subjects: [val@example.com] }}\n    namespaces: {{ ml-team: viewer }}\n"
    )
}

#[tokio::test]
async fn a_followed_log_ends_when_its_viewer_loses_access() {
    let env = Env::start_with(EnvOptions {
        teams: with_a_viewer(),
        server_args: vec!["--tunnel-reauthorize-seconds".into(), "1".into()],
        ..EnvOptions::default()
    })
    .await;
    env.ready_cluster("logs").await;
    let jobs = "/v1/namespaces/ml-team/clusters/logs/jobs";
    env.rest(&env.alice())
        .post(
            jobs,
            &json!({"entrypoint": "for i in $(seq 1 70); do echo line$i; sleep 1; done", "submission_id": "long"}),
        )
        .await
        .expect(201);
    let val = env.token("val@example.com", &[]);
    let mut events = reqwest::Client::new()
        .get(format!("{}{jobs}/long/logs?follow=true", env.url()))
        .bearer_auth(&val)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), 200);
    let mut seen = String::new();
    while !seen.contains("line2") {
        let chunk = tokio::time::timeout(Duration::from_secs(20), events.chunk())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }

    std::fs::write(env.teams_file(), TEAMS).unwrap();
    env.server.signal("HUP");
    let revoked = Instant::now();
    let rest = tokio::time::timeout(Duration::from_secs(10), async {
        let mut rest = String::new();
        while let Ok(Some(chunk)) = events.chunk().await {
            rest.push_str(&String::from_utf8_lossy(&chunk));
        }
        rest
    })
    .await
    .expect("the followed log ended");
    eprintln!("the followed log ended {:?} after the reload", revoked.elapsed());
    assert!(
        rest.contains("event: error\ndata: the caller is no longer a viewer of namespace ml-team"),
        "{rest}"
    );
    let last = rest
        .lines()
        .filter_map(|l| l.strip_prefix("data: line"))
        .filter_map(|n| n.parse::<u32>().ok())
        .max()
        .unwrap_or(2);
    assert!(last < 30, "the log kept flowing to line {last}");
    let rows = stream_ends(&env, "logs", 1).await;
    assert_eq!(rows[0]["request_summary"]["stream"], "job-log");
    assert_eq!(rows[0]["actor"]["subject"], "val@example.com");
}

#[tokio::test]
async fn a_watch_ends_when_its_token_expires() {
    let env = Env::start().await;
    let short = env.token_for("alice@example.com", &["ml-research"], 3);
    let response = reqwest::Client::new()
        .get(format!("{}/v1/namespaces/ml-team/clusters?watch=true", env.url()))
        .bearer_auth(&short)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let text = tokio::time::timeout(Duration::from_secs(20), response.text())
        .await
        .expect("the watch ended")
        .unwrap();
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "ERROR", "{text}");
    assert_eq!(last["error"]["code"], "unauthenticated", "{last}");
    let rows = stream_ends(&env, "", 1).await;
    assert_eq!(rows[0]["request_summary"]["stream"], "watch", "{rows:?}");
    assert_eq!(rows[0]["request_summary"]["reason"], "expired");
}
