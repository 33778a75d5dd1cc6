//! Issue 18, the REST and cross-transport findings of the outside review,
//! each as it was found (raw sockets where a polite client would not
//! reproduce it).

use std::time::{Duration, Instant};

use base64::Engine as _;
use futures::StreamExt as _;
use krayne_proto::v1 as pb;
use krayne_tests::{Env, EnvOptions, Rest, raw::Http1};
use reqwest::Method;
use serde_json::{Value, json};

const NS: &str = "/v1/namespaces/ml-team/clusters";

fn sqlite_path(url: &str) -> std::path::PathBuf {
    url.strip_prefix("sqlite://").expect("a SQLite audit database").into()
}

fn file_bytes(db: &std::path::Path) -> u64 {
    let size = |p: std::path::PathBuf| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let wal = db.with_extension("db-wal");
    size(db.to_owned()) + size(wal)
}

async fn audit_rows(env: &Env, query: &str) -> Vec<Value> {
    let admin = env.rest(&env.admin());
    let page = admin.get(&format!("/v1/audit?{query}")).await.expect(200);
    page.body["events"].as_array().unwrap().clone()
}

/// Polls the audit log until `query` finds `n` rows (rows are batched).
async fn await_rows(env: &Env, query: &str, n: usize) -> Vec<Value> {
    for _ in 0..50 {
        let rows = audit_rows(env, query).await;
        if rows.len() >= n {
            return rows;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("fewer than {n} audit rows for {query}");
}

/// Finding 2: every token-less request wrote a row with its full user
/// agent, unthrottled. Now: free text is cut to 512 bytes, denials past a
/// per-source rate are answered 429, and one source costs one row at once
/// plus one summary row per window, with nothing uncounted.
#[tokio::test]
async fn token_less_floods_cost_two_audit_rows_per_window() {
    let mut env = Env::start().await;
    const FLOOD: usize = 10_000;
    let agent = format!("flood/{}", "A".repeat(60 * 1024));
    let http = reqwest::Client::new();
    let url = format!("{}/v1/whoami", env.url());
    // The first denial is on record at once.
    let first = http.get(&url).header("user-agent", &agent).send().await.unwrap();
    assert_eq!(first.status(), 401);
    let rows = await_rows(&env, "action=auth.denied", 1).await;
    let ua = rows[0]["user_agent"].as_str().unwrap();
    assert!(ua.len() <= 512 && ua.ends_with('…'), "{} bytes stored", ua.len());
    // The file's size with its write-ahead log checkpointed (at stop).
    let db = sqlite_path(&env.database);
    env.stop_server().await;
    let before = file_bytes(&db);
    env.start_server().await;

    let started = Instant::now();
    let statuses: Vec<(u16, bool)> = futures::stream::iter(1..FLOOD)
        .map(|_| {
            let (http, url, agent) = (http.clone(), url.clone(), agent.clone());
            async move {
                let r = http.get(&url).header("user-agent", agent).send().await.unwrap();
                (r.status().as_u16(), r.headers().contains_key("retry-after"))
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    let flood_time = started.elapsed();
    // A valid token from the same address is served throughout.
    env.rest(&env.alice()).get("/v1/whoami").await.expect(200);
    let limited = statuses.iter().filter(|(s, _)| *s == 429).count();
    assert!(statuses.iter().all(|(s, _)| *s == 401 || *s == 429));
    assert!(statuses.iter().filter(|(s, _)| *s == 429).all(|(_, retry)| *retry));
    assert!(limited > FLOOD / 2, "only {limited} of {FLOOD} rate limited");

    // Stopping writes the open window's summary.
    env.stop_server().await;
    let after = file_bytes(&db);
    let pool = sqlx::SqlitePool::connect(&env.database).await.unwrap();
    let rows: Vec<(Option<String>, String, Option<i64>)> = sqlx::query_as(
        "SELECT user_agent, request_summary, http_status FROM audit_events WHERE action = 'auth.denied'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let row_bytes: i64 = sqlx::query_scalar(
        "SELECT SUM(LENGTH(id) + LENGTH(occurred_at) + LENGTH(COALESCE(completed_at, '')) + LENGTH(request_id) \
         + LENGTH(COALESCE(source_ip, '')) + LENGTH(COALESCE(user_agent, '')) + LENGTH(action) \
         + LENGTH(request_summary) + LENGTH(outcome) + LENGTH(COALESCE(error, '')) + 16) \
         FROM audit_events WHERE action = 'auth.denied'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    let repeats: u64 = rows
        .iter()
        .map(|(_, summary, _)| serde_json::from_str::<Value>(summary).unwrap())
        .map(|s| s["repeated"].as_u64().map_or(1, |n| n))
        .sum();
    eprintln!(
        "token-less flood: {FLOOD} requests with 60 KB user agents in {flood_time:?}, {limited} answered 429; \
         {} audit rows holding {row_bytes} bytes ({:.2} bytes per request); audit file {before} -> {after} bytes",
        rows.len(),
        row_bytes as f64 / FLOOD as f64
    );
    assert_eq!(repeats, FLOOD as u64, "every denial is counted in some row");
    assert!(rows.len() <= 4, "{} rows for one source within one window", rows.len());
    assert!(
        rows.iter()
            .all(|(ua, _, _)| ua.as_ref().is_some_and(|u| u.len() <= 512))
    );
    // The file's size moves with its write-ahead log; the rows are the cost.
    assert!(row_bytes < 10 * 1024, "{row_bytes} bytes of denial rows");
}

fn forged_token(header: &Value) -> String {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    format!("{}.e30.c2ln", b64.encode(serde_json::to_vec(header).unwrap()))
}

/// Finding 3: an invalid `alg` was echoed into the INFO log line and the
/// audit row, newlines and ESC included: anyone could write log lines.
#[tokio::test]
async fn token_text_never_reaches_logs_or_the_audit_log() {
    let env = Env::start().await;
    let forged_line = "2026-11-23T13:00:00.000000Z  INFO krayne_server: FORGED admin logged in";
    let tokens = [
        forged_token(&json!({"alg": format!("HS256\n{forged_line}\u{1b}[2J"), "typ": "JWT"})),
        forged_token(&json!({"alg": "HS256", "kid": format!("k\r\n{forged_line}")})),
        forged_token(&json!({"alg": "ES256", "kid": format!("FORGED{}", "x".repeat(8_000))})),
    ];
    for token in &tokens {
        Rest::new(&env.url(), Some(token.clone()))
            .get("/v1/whoami")
            .await
            .problem(401, "unauthenticated");
        let mut g = env.grpc(token).await;
        let refused = g.identity.who_am_i(pb::WhoAmIRequest {}).await.unwrap_err();
        assert_eq!(refused.code(), tonic::Code::Unauthenticated);
    }
    let rows = await_rows(&env, "action=auth.denied", 1).await;
    let log = env.server.log.lock().unwrap().clone();
    assert!(!log.contains('\u{1b}'), "an ESC reached the log");
    assert!(!log.contains("FORGED"), "token text reached the log");
    assert!(!log.lines().any(|l| l.contains("FORGED admin")));
    for row in rows {
        let error = row["error"].as_str().unwrap_or_default();
        assert!(!error.contains("FORGED") && !error.contains('\n'), "{error}");
    }
}

/// Finding 4: a client's `x-request-id` became the audit row's request id
/// and went to Kubernetes, so one principal could reuse another's id.
#[tokio::test]
async fn client_request_ids_are_only_correlation_ids() {
    let env = Env::start().await;
    let http = reqwest::Client::new();
    let create = |token: String, ns: &'static str, name: &'static str, header: &'static str| {
        let http = http.clone();
        let url = format!("{}/v1/namespaces/{ns}/clusters", env.url());
        async move {
            http.post(url)
                .bearer_auth(token)
                .header(header, "shared-id-1")
                .json(&json!({"name": name}))
                .send()
                .await
                .unwrap()
        }
    };
    let mut request_ids = Vec::new();
    for r in [
        create(env.alice(), "ml-team", "mine", "x-request-id").await,
        create(
            env.token("mallory@example.com", &["other-team"]),
            "other-team",
            "theirs",
            "x-request-id",
        )
        .await,
        create(env.alice(), "ml-team", "again", "x-correlation-id").await,
    ] {
        assert_eq!(r.status(), 201);
        assert_eq!(r.headers()["x-correlation-id"], "shared-id-1");
        request_ids.push(r.headers()["x-request-id"].to_str().unwrap().to_owned());
    }
    // gRPC: the same in metadata.
    let mut g = env.grpc(&env.alice()).await;
    let mut request = tonic::Request::new(pb::CreateClusterRequest {
        source: Some(pb::create_cluster_request::Source::ConfigYaml(
            "name: viagrpc\nnamespace: ml-team\n".into(),
        )),
        dry_run: false,
        field_validation: 0,
        queue: None,
    });
    request
        .metadata_mut()
        .insert("x-request-id", "shared-id-1".parse().unwrap());
    let answer = g.clusters.create_cluster(request).await.unwrap();
    assert_eq!(answer.metadata().get("x-correlation-id").unwrap(), "shared-id-1");
    request_ids.push(
        answer
            .metadata()
            .get("x-request-id")
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned(),
    );

    let unique: std::collections::HashSet<_> = request_ids.iter().collect();
    assert_eq!(unique.len(), 4, "{request_ids:?}");
    assert!(request_ids.iter().all(|id| uuid::Uuid::parse_str(id).is_ok()));
    let rows = await_rows(&env, "correlation_id=shared-id-1", 4).await;
    assert_eq!(rows.len(), 4);
    for row in &rows {
        assert_eq!(row["correlation_id"], "shared-id-1");
        assert!(request_ids.contains(&row["request_id"].as_str().unwrap().to_owned()));
    }
    // Kubernetes saw the server's ids only.
    let sent: Vec<String> = env
        .sandbox
        .requests()
        .into_iter()
        .filter_map(|r| r.request_id)
        .collect();
    assert!(!sent.iter().any(|id| id == "shared-id-1"));
    for id in &request_ids {
        assert!(sent.contains(id), "{id} did not reach Kubernetes");
    }
    // An unusable id (8 KB) is ignored, not echoed.
    let r = http
        .get(format!("{}/v1/whoami", env.url()))
        .bearer_auth(env.alice())
        .header("x-request-id", "r".repeat(8_000))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(!r.headers().contains_key("x-correlation-id"));
}

/// Finding 6, and finding 1 for REST: a declared body over the limit
/// waited 30 s for a 504; a declared body never sent held the request for
/// the whole request timeout.
#[tokio::test]
async fn declared_bodies_are_refused_or_cut_off_at_once() {
    let env = Env::start_with(EnvOptions::with_args(&["--request-body-timeout-seconds", "2"])).await;
    let token = env.alice();
    let head = |length: &str, auth: bool| {
        let auth = if auth {
            format!("\r\nAuthorization: Bearer {token}")
        } else {
            String::new()
        };
        format!(
            "POST {NS} HTTP/1.1\r\nHost: krayne\r\nContent-Type: application/json\r\nContent-Length: {length}{auth}"
        )
    };
    for (length, auth) in [("2097152", true), ("9223372036854775808", true), ("2097152", false)] {
        let mut conn = Http1::send(env.server.api, &head(length, auth), b"").await;
        let (answer, after) = conn.answer(Duration::from_secs(5)).await.expect("an answer");
        assert!(answer.starts_with("HTTP/1.1 413"), "{length}: {answer}");
        assert!(after < Duration::from_secs(1), "{after:?}");
    }
    // Within the limit but never sent: no token is refused at once, a
    // caller with one is cut off when the body deadline passes.
    let mut anonymous = Http1::send(env.server.api, &head("1000", false), b"").await;
    let (answer, after) = anonymous.answer(Duration::from_secs(5)).await.expect("an answer");
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    assert!(after < Duration::from_secs(1), "{after:?}");
    let mut silent = Http1::send(env.server.api, &head("1000", true), b"{\"na").await;
    let (answer, after) = silent.answer(Duration::from_secs(8)).await.expect("an answer");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(after < Duration::from_secs(6), "{after:?}");
    // A client that does send an over-limit body reads the 413.
    let big = vec![b' '; 2 * 1024 * 1024];
    env.rest(&token)
        .send(Method::POST, NS, Some("application/json"), Some(big))
        .await
        .problem(413, "payload_too_large");
}

/// Smaller findings: `Bearer` in any case with repeated spaces; two
/// `Authorization` headers are refused, not "first wins".
#[tokio::test]
async fn authorization_headers_are_read_strictly() {
    let env = Env::start().await;
    let http = reqwest::Client::new();
    let url = format!("{}/v1/whoami", env.url());
    for scheme in ["BEARER", "bearer", "Bearer  ", "bEaReR\t"] {
        let r = http
            .get(&url)
            .header("authorization", format!("{scheme} {}", env.alice()))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{scheme:?}");
    }
    let r = http
        .get(&url)
        .header("authorization", format!("Bearer {}", env.alice()))
        .header("authorization", format!("Bearer {}", env.admin()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["code"], "invalid_argument");
    assert_eq!(body["violations"][0]["field"], "authorization", "{body}");
}

/// Smaller finding: create took `1.0` and `-0` for counts, scale refused
/// them; both now read counts alike.
#[tokio::test]
async fn create_and_scale_read_numbers_alike() {
    let env = Env::start().await;
    let alice = env.rest(&env.alice());
    for (name, replicas) in [("float-one", "1.0"), ("minus-zero", "-0")] {
        let body = format!(
            r#"{{"name": "{name}", "worker_groups": [{{"name": "cpu", "replicas": {replicas}, "max_replicas": 4}}]}}"#
        );
        alice
            .send(Method::POST, NS, Some("application/json"), Some(body.into_bytes()))
            .await
            .expect(201);
        let scale = format!(r#"{{"worker_group": "cpu", "replicas": {replicas}, "max_replicas": 2.0}}"#);
        alice
            .send(
                Method::POST,
                &format!("{NS}/{name}/scale"),
                Some("application/json"),
                Some(scale.into_bytes()),
            )
            .await
            .expect(200);
    }
    // `"2"` is a Krayne document's lax conversion (a warning, refused only
    // with field_validation=strict); a scale body is typed JSON and refuses it.
    let lax = r#"{"name": "lax", "worker_groups": [{"name": "cpu", "replicas": "2"}]}"#;
    let warned = alice
        .send(Method::POST, NS, Some("application/json"), Some(lax.into()))
        .await
        .expect(201);
    assert_eq!(warned.body["warnings"][0]["field"], "worker_groups[0].replicas");
    let strict = alice
        .send(
            Method::POST,
            &format!("{NS}?field_validation=strict"),
            Some("application/json"),
            Some(lax.replace("\"lax\"", "\"strict\"").into()),
        )
        .await
        .problem(400, "invalid_argument");
    assert_eq!(strict.violation_fields(), ["worker_groups[0].replicas"]);
    let scale = r#"{"worker_group": "cpu", "replicas": "2"}"#;
    let refused = alice
        .send(
            Method::POST,
            &format!("{NS}/lax/scale"),
            Some("application/json"),
            Some(scale.into()),
        )
        .await
        .problem(400, "invalid_argument");
    assert_eq!(refused.violation_fields(), ["replicas"]);
    for bad in ["1.5", "-1", "1e20"] {
        let create = format!(r#"{{"name": "bad", "worker_groups": [{{"name": "cpu", "replicas": {bad}}}]}}"#);
        let refused = alice
            .send(Method::POST, NS, Some("application/json"), Some(create.into_bytes()))
            .await
            .problem(400, "invalid_argument");
        assert_eq!(refused.violation_fields(), ["worker_groups[0].replicas"], "{bad}");
        let scale = format!(r#"{{"worker_group": "cpu", "replicas": {bad}}}"#);
        let refused = alice
            .send(
                Method::POST,
                &format!("{NS}/float-one/scale"),
                Some("application/json"),
                Some(scale.into_bytes()),
            )
            .await
            .problem(400, "invalid_argument");
        assert_eq!(refused.violation_fields(), ["replicas"], "{bad}: {}", refused.text);
    }
}

/// Smaller finding: `source_ip` came from `X-Forwarded-For` from anyone.
#[tokio::test]
async fn source_addresses_come_from_trusted_proxies_only() {
    let send = |env: &Env, name: &'static str, header: (&'static str, &'static str)| {
        let url = format!("{}{NS}", env.url());
        let token = env.alice();
        async move {
            let r = reqwest::Client::new()
                .post(url)
                .bearer_auth(token)
                .header(header.0, header.1)
                .json(&json!({"name": name}))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 201);
        }
    };
    let direct = Env::start().await;
    send(&direct, "direct", ("x-forwarded-for", "203.0.113.7")).await;
    let rows = await_rows(&direct, "action=cluster.create", 1).await;
    assert_eq!(
        rows[0]["source_ip"], "127.0.0.1",
        "a header from an untrusted peer was believed"
    );

    let proxied = Env::start_with(EnvOptions::with_args(&["--trusted-proxies", "127.0.0.1/32,10.0.0.0/8"])).await;
    send(
        &proxied,
        "via-xff",
        ("x-forwarded-for", "198.51.100.1, 203.0.113.7, 10.1.1.1"),
    )
    .await;
    // The proxy writes X-Forwarded-For: a client's own `Forwarded` (passed
    // through untouched by such proxies) names nobody.
    send(&proxied, "spoofed", ("forwarded", "for=8.8.8.8")).await;
    let rows = await_rows(&proxied, "action=cluster.create", 2).await;
    let source = |rows: &[Value], name: &str| {
        rows.iter()
            .find(|r| r["cluster"] == name)
            .map(|r| r["source_ip"].clone())
            .unwrap()
    };
    assert_eq!(source(&rows, "via-xff"), "203.0.113.7");
    assert_eq!(source(&rows, "spoofed"), "127.0.0.1");

    let rfc = Env::start_with(EnvOptions::with_args(&[
        "--trusted-proxies",
        "127.0.0.1",
        "--trusted-proxy-header",
        "forwarded",
    ]))
    .await;
    send(
        &rfc,
        "via-forwarded",
        ("forwarded", "for=\"[2001:db8::7]:443\";proto=https"),
    )
    .await;
    send(&rfc, "xff-ignored", ("x-forwarded-for", "8.8.8.8")).await;
    let rows = await_rows(&rfc, "action=cluster.create", 2).await;
    assert_eq!(source(&rows, "via-forwarded"), "2001:db8::7");
    assert_eq!(source(&rows, "xff-ignored"), "127.0.0.1");
}
