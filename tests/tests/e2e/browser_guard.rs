//! What a browser session and the proxy let through, after the second
//! outside review (findings 2, 4, 6 and 7): a session's unsafe requests
//! and WebSocket upgrades only from the service's own origin (path mode
//! and per-service hosts); the query-string token only on event-stream
//! watches; a service's cookies and redirects kept on the service; the
//! client's forwarding headers kept from services; path-segment job ids;
//! sign-in links never built from a foreign `Host`; `Secure` cookies
//! behind a TLS proxy. The same in real Chromium: `portal::a_page_on_another_origin_*`.

use futures::{SinkExt as _, StreamExt as _};
use krayne_tests::{Env, EnvOptions};
use reqwest::Method;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::{Message, client::IntoClientRequest as _};

fn proxy_path(cluster: &str, service: &str) -> String {
    format!("/v1/namespaces/ml-team/clusters/{cluster}/services/{service}/proxy")
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// Signs in to `service` of `cluster` (as alice): the cookie to send back.
async fn signed_in(env: &Env, cluster: &str, service: &str, host: Option<&str>) -> String {
    let link = env
        .rest(&env.alice())
        .post(
            &format!("/v1/namespaces/ml-team/clusters/{cluster}/services/{service}/sessions"),
            &json!({}),
        )
        .await
        .expect(201)
        .body;
    let url = link["sign_in_url"].as_str().unwrap();
    let request = match host {
        // A service host: the same server, that `Host`.
        Some(host) => {
            let path = url.split_once(host).unwrap().1;
            client().get(format!("{}{path}", env.url())).header("host", host)
        }
        None => client().get(url),
    };
    let opened = request.send().await.unwrap();
    assert_eq!(opened.status(), 303);
    opened.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned()
}

/// A request with a session cookie and the browser's headers given.
async fn with_cookie(env: &Env, method: Method, path: &str, cookie: &str, headers: &[(&str, &str)]) -> (u16, Value) {
    let mut request = client()
        .request(method, format!("{}{path}", env.url()))
        .header("cookie", cookie);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Opens a WebSocket through the proxy with a cookie, `Origin` and
/// `Host`: the echo's first message, or the HTTP status that refused it.
async fn websocket(env: &Env, path: &str, cookie: &str, origin: &str, host: Option<&str>) -> Result<String, u16> {
    let mut request = format!("ws://{}{path}", env.server.api).into_client_request().unwrap();
    let headers = request.headers_mut();
    headers.insert("cookie", cookie.parse().unwrap());
    headers.insert("origin", origin.parse().unwrap());
    if let Some(host) = host {
        headers.insert("host", host.parse().unwrap());
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((mut socket, _)) => {
            socket.send(Message::text("mine")).await.unwrap();
            let echoed = socket.next().await.unwrap().unwrap();
            Ok(echoed.into_text().unwrap().to_string())
        }
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => Err(response.status().as_u16()),
        Err(e) => panic!("{e}"),
    }
}

/// The audit rows `query` finds, once there are `count` (rows are written
/// behind the answers).
async fn audit_rows(env: &Env, query: &str, count: usize) -> Vec<Value> {
    let mut rows = Vec::new();
    for _ in 0..100 {
        let body = env
            .rest(&env.admin())
            .get(&format!("/v1/audit?{query}"))
            .await
            .expect(200)
            .body;
        rows = body["events"].as_array().cloned().unwrap_or_default();
        if rows.len() >= count {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(rows.len(), count, "{query}: {rows:?}");
    rows
}

async fn kernels(env: &Env, cluster: &str) -> usize {
    env.rest(&env.alice())
        .get(&format!("{}/api/kernels", proxy_path(cluster, "notebook")))
        .await
        .expect(200)
        .body
        .as_array()
        .unwrap()
        .len()
}

#[tokio::test]
async fn a_sessions_unsafe_requests_and_websockets_come_only_from_the_services_own_origin() {
    let env = Env::start().await;
    env.ready_cluster("web").await;
    let cookie = signed_in(&env, "web", "notebook", None).await;
    let notebook = proxy_path("web", "notebook");
    let kernels_path = format!("{notebook}/api/kernels");
    let own = format!("http://{}", env.server.api);
    let other_port = "http://127.0.0.1:1";

    // The service's own page: a POST and a WebSocket work.
    let (status, started) = with_cookie(
        &env,
        Method::POST,
        &kernels_path,
        &cookie,
        &[("origin", &own), ("sec-fetch-site", "same-origin")],
    )
    .await;
    assert_eq!(status, 201, "{started}");
    let channels = format!("{notebook}/api/kernels/{}/channels", started["id"].as_str().unwrap());
    assert_eq!(websocket(&env, &channels, &cookie, &own, None).await, Ok("mine".into()));

    // Another port of the same host (same site, not same origin), no
    // Origin at all, or fetch metadata saying so: refused, nothing started.
    for headers in [
        vec![("origin", other_port)],
        vec![],
        vec![("origin", own.as_str()), ("sec-fetch-site", "same-site")],
        vec![("origin", "null")],
    ] {
        let (status, problem) = with_cookie(&env, Method::POST, &kernels_path, &cookie, &headers).await;
        assert_eq!(
            (status, problem["code"].as_str()),
            (403, Some("permission_denied")),
            "{headers:?}"
        );
    }
    let (status, problem) = with_cookie(&env, Method::DELETE, &kernels_path, &cookie, &[("origin", other_port)]).await;
    assert_eq!(status, 403, "{problem}");
    assert!(
        problem["detail"].as_str().unwrap().contains("the service's own page"),
        "{problem}"
    );
    assert_eq!(websocket(&env, &channels, &cookie, other_port, None).await, Err(403));
    assert_eq!(
        kernels(&env, "web").await,
        1,
        "only the own page's POST started a kernel"
    );

    // Reads need no Origin (a link from anywhere may lead to the service);
    // a bearer token is no ambient credential and needs none either.
    let (status, _) = with_cookie(&env, Method::GET, &kernels_path, &cookie, &[]).await;
    assert_eq!(status, 200);
    env.rest(&env.alice()).post(&kernels_path, &json!({})).await.expect(201);

    let refusals = audit_rows(&env, "action=service.connect&cluster=web&outcome=denied", 6).await;
    assert!(
        refusals
            .iter()
            .all(|r| r["error"].as_str().unwrap().contains("of a browser session must")),
        "{refusals:?}"
    );
    assert_eq!(env.metric("krayne_proxy_cross_origin_refusals_total", "").await, 6.0);
}

#[tokio::test]
async fn on_service_hosts_a_sibling_hosts_page_cannot_use_the_session() {
    let env = Env::start_with(EnvOptions::with_args(&["--apps-domain", "apps.example.test"])).await;
    env.ready_cluster("own").await;
    let host = "dashboard--own--ml-team.apps.example.test";
    let cookie = signed_in(&env, "own", "dashboard", Some(host)).await;
    let own = format!("http://{host}");
    assert_eq!(
        websocket(&env, "/ws", &cookie, &own, Some(host)).await,
        Ok("mine".into())
    );
    for sibling in [
        "http://notebook--evil--other-team.apps.example.test",
        "http://notebook--own--ml-team.apps.example.test",
        &format!("http://{}", env.server.api),
    ] {
        assert_eq!(
            websocket(&env, "/ws", &cookie, sibling, Some(host)).await,
            Err(403),
            "{sibling}"
        );
    }
    let submitted = client()
        .post(format!("{}/api/jobs/", env.url()))
        .header("host", host)
        .header("cookie", &cookie)
        .header("origin", "http://notebook--evil--other-team.apps.example.test")
        .json(&json!({"entrypoint": "echo pwned"}))
        .send()
        .await
        .unwrap();
    assert_eq!(submitted.status(), 403);
    let jobs = env
        .rest(&env.alice())
        .get("/v1/namespaces/ml-team/clusters/own/jobs")
        .await
        .expect(200)
        .body;
    assert_eq!(jobs["jobs"], json!([]), "{jobs}");
}

#[tokio::test]
async fn a_token_in_the_url_is_taken_by_event_stream_watches_only() {
    let env = Env::start().await;
    env.ready_cluster("kept").await;
    let token = env.alice();
    let query = format!("watch=true&access_token={token}");
    let sse = |method: Method, path: &str| {
        client()
            .request(method, format!("{}{path}?{query}", env.url()))
            .header("accept", "text/event-stream")
    };
    for (method, path, body) in [
        (
            Method::POST,
            "/v1/namespaces/ml-team/clusters".to_owned(),
            json!({"name": "sneaky"}),
        ),
        (
            Method::DELETE,
            "/v1/namespaces/ml-team/clusters/kept".to_owned(),
            Value::Null,
        ),
        (
            Method::POST,
            "/v1/namespaces/ml-team/clusters/kept/jobs".to_owned(),
            json!({"entrypoint": "echo pwned"}),
        ),
        (
            Method::POST,
            "/v1/namespaces/ml-team/clusters/kept/services/dashboard/sessions".to_owned(),
            json!({}),
        ),
        (Method::GET, "/v1/whoami".to_owned(), Value::Null),
        (
            Method::POST,
            "/v1/namespaces/ml-team/clusters/kept/scale".to_owned(),
            json!({"worker_group": "worker", "replicas": 1}),
        ),
    ] {
        let response = sse(method.clone(), &path).json(&body).send().await.unwrap();
        assert_eq!(response.status(), 401, "{method} {path}");
        let problem: Value = response.json().await.unwrap();
        assert_eq!(problem["code"], "unauthenticated");
        assert!(
            problem["detail"].as_str().unwrap().contains("Authorization: Bearer"),
            "{problem}"
        );
    }
    let clusters = env
        .rest(&env.alice())
        .get("/v1/namespaces/ml-team/clusters")
        .await
        .expect(200)
        .body;
    let names: Vec<&str> = clusters["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["kept"], "nothing created, nothing deleted");

    // The watch an EventSource opens still takes it.
    let mut watch = sse(Method::GET, "/v1/namespaces/ml-team/clusters")
        .send()
        .await
        .unwrap();
    assert_eq!(watch.status(), 200);
    let first = tokio::time::timeout(std::time::Duration::from_secs(10), watch.chunk())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&first).contains("event: "), "{first:?}");
}

/// How a request to the proxy is authenticated.
enum As<'a> {
    Bearer(&'a str),
    Session(&'a str),
}

/// Asks the code-server stand-in to answer with `query` (its status,
/// `Set-Cookie`s and `Location`), through the proxy at `base` (`host`).
async fn answered(
    env: &Env,
    base: &str,
    host: Option<&str>,
    caller: &As<'_>,
    query: &[(&str, &str)],
) -> reqwest::Response {
    let mut url = reqwest::Url::parse(&format!("{}{base}/_sandbox/answer", env.url())).unwrap();
    url.query_pairs_mut().extend_pairs(query);
    let mut request = match caller {
        As::Bearer(token) => client().get(url).bearer_auth(token),
        As::Session(cookie) => client().get(url).header("cookie", *cookie),
    };
    if let Some(host) = host {
        request = request.header("host", host);
    }
    request.send().await.unwrap()
}

fn set_cookies(response: &reqwest::Response) -> Vec<String> {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_services_cookies_and_redirects_stay_on_the_service() {
    let env = Env::start().await;
    env.ready_cluster("echo").await;
    let code = proxy_path("echo", "code-server");
    let cookie = signed_in(&env, "echo", "code-server", None).await;
    let session = As::Session(&cookie);
    let cookies = answered(
        &env,
        &code,
        None,
        &session,
        &[
            ("set-cookie", "krayne_session=forged; Path=/"),
            ("set-cookie", "%6Brayne_session=forged; Path=/"),
            ("set-cookie", "evil=1; Path=/v1"),
            ("set-cookie", "wide=1; Domain=127.0.0.1; Path=/"),
            ("set-cookie", "theme=dark"),
        ],
    )
    .await;
    assert_eq!(cookies.status(), 200);
    assert_eq!(
        set_cookies(&cookies),
        [format!("evil=1; Path={code}/v1"), format!("theme=dark; Path={code}")]
    );
    let whole_origin = answered(
        &env,
        &code,
        None,
        &session,
        &[("service-worker-allowed", "/"), ("status", "200")],
    )
    .await;
    assert!(whole_origin.headers().get("service-worker-allowed").is_none());

    for leaves in [
        "//evil.example/",
        "\\\\evil.example",
        "/\\evil.example",
        "https://evil.example/",
        "http://127.0.0.1:1/v1/whoami",
    ] {
        let refused = answered(&env, &code, None, &session, &[("status", "302"), ("location", leaves)]).await;
        assert_eq!(refused.status(), 502, "{leaves}");
        let problem: Value = refused.json().await.unwrap();
        assert_eq!(problem["code"], "bad_gateway", "{leaves}");
        // A bearer caller is no browser: it gets the redirect as sent.
        let alice = env.alice();
        let sent = answered(
            &env,
            &code,
            None,
            &As::Bearer(&alice),
            &[("status", "302"), ("location", leaves)],
        )
        .await;
        assert_eq!(
            (sent.status().as_u16(), sent.headers()["location"].to_str().unwrap()),
            (302, leaves)
        );
    }
    for (location, kept) in [
        ("/login", format!("{code}/login")),
        ("http:evil.example", format!("{code}/_sandbox/evil.example")),
        (
            &format!("http://{}/v1/whoami", env.server.api),
            format!("{code}/v1/whoami"),
        ),
    ] {
        let redirect = answered(
            &env,
            &code,
            None,
            &session,
            &[("status", "302"), ("location", location)],
        )
        .await;
        assert_eq!(redirect.status(), 302, "{location}");
        assert_eq!(redirect.headers()["location"], kept.as_str(), "{location}");
    }

    // A page of another site fetching from the service (an <img>, a
    // script): refused, as a GET may act; a link to it is followed.
    let from = async |site: &str, mode: &str| {
        client()
            .get(format!("{}{code}/", env.url()))
            .header("cookie", &cookie)
            .header("sec-fetch-site", site)
            .header("sec-fetch-mode", mode)
            .send()
            .await
            .unwrap()
            .status()
    };
    assert_eq!(from("same-site", "no-cors").await, 403);
    assert_eq!(from("cross-site", "navigate").await, 200);
}

#[tokio::test]
async fn on_a_service_host_cookies_are_host_only_and_redirects_stay_on_the_host() {
    let env = Env::start_with(EnvOptions::with_args(&["--apps-domain", "apps.example.test"])).await;
    env.ready_cluster("echo").await;
    let host = "code-server--echo--ml-team.apps.example.test";
    let cookie = signed_in(&env, "echo", "code-server", Some(host)).await;
    let session = As::Session(&cookie);
    let own = answered(
        &env,
        "",
        Some(host),
        &session,
        &[
            ("set-cookie", "a=1; Path=/"),
            ("set-cookie", "b=2; Domain=.apps.example.test"),
            ("set-cookie", "KRAYNE_x=1"),
            ("service-worker-allowed", "/"),
            ("status", "302"),
            ("location", "/tree"),
        ],
    )
    .await;
    assert_eq!(set_cookies(&own), ["a=1; Path=/"]);
    assert_eq!(own.headers()["location"], "/tree");
    assert_eq!(own.headers()["service-worker-allowed"], "/", "its own origin");
    // `/.//evil.example` is a path on this host; as a path it must not
    // turn scheme-relative.
    let dotted = answered(
        &env,
        "",
        Some(host),
        &session,
        &[("status", "302"), ("location", "/.//evil.example")],
    )
    .await;
    assert_eq!(dotted.headers()["location"], "/.//evil.example");
    let sibling = answered(
        &env,
        "",
        Some(host),
        &session,
        &[
            ("status", "302"),
            ("location", "http://dashboard--echo--ml-team.apps.example.test/"),
        ],
    )
    .await;
    assert_eq!(sibling.status(), 502);
}

#[tokio::test]
async fn the_smaller_findings() {
    let env = Env::start_with(EnvOptions::with_args(&["--trusted-proxies", "127.0.0.1"])).await;
    env.ready_cluster("small").await;
    let alice = env.alice();

    // The client's own forwarding headers never reach a service.
    let page = client()
        .get(format!("{}{}/", env.url(), proxy_path("small", "code-server")))
        .bearer_auth(&alice)
        .header("forwarded", "for=203.0.113.9;host=evil.example")
        .header("x-real-ip", "203.0.113.9")
        .header("x-forwarded-port", "1")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for name in ["forwarded", "x-real-ip", "x-forwarded-port"] {
        assert!(
            !page.contains(&format!("<li>{name}</li>")),
            "{name} reached the service: {page}"
        );
    }
    assert!(page.contains("<li>x-forwarded-for</li>"), "{page}");

    // Job ids that are path segments.
    for id in [".", ".."] {
        let refused = env
            .rest(&alice)
            .post(
                "/v1/namespaces/ml-team/clusters/small/jobs",
                &json!({"entrypoint": "echo hi", "submission_id": id}),
            )
            .await
            .problem(400, "invalid_argument");
        assert_eq!(refused.violation_fields(), ["submission_id"], "{id}");
    }

    // A sign-in link is never built from a `Host` that is not this
    // machine's, without --public-url.
    let sessions = format!(
        "{}/v1/namespaces/ml-team/clusters/small/services/dashboard/sessions",
        env.url()
    );
    let foreign = client()
        .post(&sessions)
        .bearer_auth(&alice)
        .header("host", "evil.example")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 409);
    let problem: Value = foreign.json().await.unwrap();
    assert!(
        problem["detail"].as_str().unwrap().contains("--public-url"),
        "{problem}"
    );
    assert!(!problem.to_string().contains("ticket"), "{problem}");

    // Behind a trusted TLS proxy the link is https and the cookie Secure.
    let link: Value = client()
        .post(&sessions)
        .bearer_auth(&alice)
        .header("x-forwarded-proto", "https")
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let url = link["sign_in_url"].as_str().unwrap();
    assert!(url.starts_with("https://127.0.0.1:"), "{link}");
    let opened = client()
        .get(url.replacen("https://", "http://", 1))
        .header("x-forwarded-proto", "https")
        .send()
        .await
        .unwrap();
    let set_cookie = opened.headers()["set-cookie"].to_str().unwrap();
    assert!(set_cookie.contains("; Secure"), "{set_cookie}");
}
