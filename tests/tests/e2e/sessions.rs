//! Browser sessions to a cluster's HTTP services (issue 22): a sign-in
//! link works once (on any replica), its cookie only for its own service's
//! proxy, re-checked against the team mapping on every request; Jupyter
//! under its proxy path, also behind a public URL's prefix.

use std::time::Duration;

use futures::{SinkExt as _, StreamExt as _};
use krayne_server::auth::{SessionKeys, Ticket, TicketUse};
use krayne_tests::{E2E_SESSION_SECRET, Env, EnvOptions};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::{Message, client::IntoClientRequest as _};

fn proxy_path(cluster: &str, service: &str) -> String {
    format!("/v1/namespaces/ml-team/clusters/{cluster}/services/{service}/proxy")
}

fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// Asks for a sign-in link as `token`'s caller.
async fn sign_in_link(env: &Env, token: &str, cluster: &str, service: &str) -> Value {
    env.rest(token)
        .post(
            &format!("/v1/namespaces/ml-team/clusters/{cluster}/services/{service}/sessions"),
            &json!({}),
        )
        .await
        .expect(201)
        .body
}

/// What opening a sign-in link answered.
struct Opened {
    status: u16,
    set_cookie: String,
    location: String,
    headers: reqwest::header::HeaderMap,
    body: String,
}

impl Opened {
    /// `krayne_session=…`, as a browser sends it back.
    fn cookie(&self) -> String {
        self.set_cookie.split(';').next().unwrap().to_owned()
    }
}

async fn open(url: &str) -> Opened {
    let response = browser().get(url).send().await.unwrap();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    let (set_cookie, location) = (header("set-cookie"), header("location"));
    let (status, headers) = (response.status().as_u16(), response.headers().clone());
    Opened {
        status,
        set_cookie,
        location,
        headers,
        body: response.text().await.unwrap(),
    }
}

/// A GET with a cookie (and no bearer token) on `base`.
async fn get_with_cookie(base: &str, path: &str, cookie: &str) -> (u16, String) {
    let response = browser()
        .get(format!("{base}{path}"))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// A session ticket signed with the test servers' session secret.
fn forged(usage: TicketUse, cluster: &str, service: &str, exp_in: i64) -> String {
    let now = jiff::Timestamp::now().as_second();
    let ticket = Ticket {
        usage,
        sid: uuid::Uuid::now_v7().to_string(),
        sub: "alice@example.com".into(),
        email: Some("alice@example.com".into()),
        groups: vec!["ml-research".into()],
        ns: "ml-team".into(),
        cluster: cluster.into(),
        svc: service.into(),
        iat: now,
        exp: now + exp_in,
        until: None,
        iss: Ticket::party(),
        aud: Ticket::party(),
    };
    SessionKeys::from_secret(E2E_SESSION_SECRET.as_bytes())
        .unwrap()
        .sign(&ticket)
        .unwrap()
}

async fn session_rows(env: &Env, cluster: &str) -> Vec<Value> {
    let rows = env
        .rest(&env.admin())
        .get(&format!("/v1/audit?action=service.connect&cluster={cluster}"))
        .await
        .expect(200);
    rows.body["events"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn a_sign_in_link_works_once_and_its_cookie_only_for_its_service() {
    let env = Env::start().await;
    env.ready_cluster("web").await;
    env.ready_cluster("other").await;
    let alice = env.alice();
    let base = env.url();
    let dashboard = proxy_path("web", "dashboard");

    let link = sign_in_link(&env, &alice, "web", "dashboard").await;
    let url = link["sign_in_url"].as_str().unwrap();
    assert!(
        url.starts_with(&format!(
            "{base}/v1/namespaces/ml-team/clusters/web/services/dashboard/sessions/sign-in?ticket="
        )),
        "{link}"
    );
    assert_eq!(link["service_url"], format!("{base}{dashboard}/"));
    // An hour, never past the token that asked for it (minted an hour
    // before it ends, when the test began: a second may have passed).
    let seconds = link["session_seconds"].as_u64().unwrap();
    assert!((3590..=3600).contains(&seconds), "{link}");
    let expires: jiff::Timestamp = link["expires_at"].as_str().unwrap().parse().unwrap();
    let left = expires.as_second() - jiff::Timestamp::now().as_second();
    assert!((50..=61).contains(&left), "the link lasts about a minute: {left} s");

    let first = open(url).await;
    assert_eq!(first.status, 303, "{}", first.body);
    assert_eq!(first.location, format!("{dashboard}/"));
    for part in [
        "krayne_session=",
        "HttpOnly",
        "SameSite=Lax",
        "Path=/v1/namespaces/ml-team/clusters/web/services;",
    ] {
        assert!(first.set_cookie.contains(part), "{part} in {}", first.set_cookie);
    }
    // The cookie lasts as long as the session, counted from when it is set:
    // never longer, and at most the seconds since the link was made shorter.
    let max_age: u64 = first
        .set_cookie
        .split("Max-Age=")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("a Max-Age in {}", first.set_cookie));
    assert!(
        (seconds.saturating_sub(5)..=seconds).contains(&max_age),
        "Max-Age {max_age} for a session of {seconds} s: {}",
        first.set_cookie
    );
    assert!(!first.set_cookie.contains("Secure"), "plain http: {}", first.set_cookie);
    assert_eq!(first.headers["cache-control"], "no-store");
    assert_eq!(first.headers["referrer-policy"], "no-referrer");
    let again = open(url).await;
    assert_eq!(again.status, 401, "a link works once: {}", again.body);
    assert!(again.body.contains("already used"), "{}", again.body);
    // A browser reloading it gets a page: go on if signed in, else how to
    // get a new link (issue 56).
    let reloaded = browser()
        .get(url)
        .header("accept", "text/html,application/xhtml+xml")
        .send()
        .await
        .unwrap();
    assert_eq!(reloaded.status().as_u16(), 401);
    let page = reloaded.text().await.unwrap();
    assert!(page.contains("<h1>This sign-in link was used</h1>"), "{page}");
    assert!(page.contains(&format!(r#"href="{dashboard}/""#)), "{page}");
    assert!(page.contains("krayne open web dashboard -n ml-team"), "{page}");
    let cookie = first.cookie();

    let (status, page) = get_with_cookie(&base, &format!("{dashboard}/"), &cookie).await;
    assert_eq!(status, 200);
    assert!(page.contains("Ray Dashboard"));
    let (status, version) = get_with_cookie(&base, &format!("{dashboard}/api/version"), &cookie).await;
    assert_eq!((status, version.contains("\"ray_version\"")), (200, true), "{version}");
    let mut request = format!("ws://{}{dashboard}/ws", env.server.api)
        .into_client_request()
        .unwrap();
    request.headers_mut().insert("cookie", cookie.parse().unwrap());
    // A browser's handshake names the page's origin: the dashboard's own.
    request.headers_mut().insert("origin", base.parse().unwrap());
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    socket.send(Message::text("in a session")).await.unwrap();
    let echoed = tokio::time::timeout(Duration::from_secs(10), socket.next())
        .await
        .unwrap();
    assert_eq!(echoed.unwrap().unwrap(), Message::text("in a session"));
    drop(socket);

    // The cookie is good for this cluster's services (issue 56: signed in
    // to the dashboard, the notebook opens too), nothing else.
    for elsewhere in [
        "/v1/namespaces/ml-team/clusters/web".to_owned(),
        "/v1/whoami".to_owned(),
        format!("{}/", proxy_path("other", "dashboard")),
    ] {
        let (status, body) = get_with_cookie(&base, &elsewhere, &cookie).await;
        assert_eq!(status, 401, "{elsewhere}: {body}");
    }
    let (status, body) = get_with_cookie(&base, &format!("{}/api", proxy_path("web", "notebook")), &cookie).await;
    assert_eq!(
        (status, body.contains("\"version\"")),
        (200, true),
        "the cluster's notebook: {body}"
    );
    // Nor is a forged, expired or misused ticket.
    let keys = SessionKeys::random().unwrap();
    let mut foreign: Ticket = serde_json::from_value(json!({
        "use": "session", "sid": "x", "sub": "alice@example.com", "ns": "ml-team", "cluster": "web",
        "svc": "dashboard", "iat": 0, "exp": jiff::Timestamp::now().as_second() + 600,
        "iss": Ticket::party(), "aud": Ticket::party()}))
    .unwrap();
    foreign.groups = vec!["ml-research".into()];
    for (what, value) in [
        ("another secret", keys.sign(&foreign).unwrap()),
        ("expired", forged(TicketUse::Session, "web", "dashboard", -120)),
        ("a sign-in ticket", forged(TicketUse::SignIn, "web", "dashboard", 60)),
    ] {
        let (status, body) = get_with_cookie(&base, &format!("{dashboard}/"), &format!("krayne_session={value}")).await;
        assert_eq!(status, 401, "{what}: {body}");
    }
    let valid = forged(TicketUse::Session, "web", "dashboard", 600);
    assert_eq!(
        get_with_cookie(&base, &format!("{dashboard}/"), &format!("krayne_session={valid}"))
            .await
            .0,
        200,
        "a session this server's secret signed"
    );
    env.rest(&valid).get("/v1/whoami").await.problem(401, "unauthenticated");

    // TCP services and unknown ones get no session.
    let rest = env.rest(&alice);
    rest.post("/v1/namespaces/ml-team/clusters/web/services/ssh/sessions", &json!({}))
        .await
        .problem(400, "invalid_argument");
    rest.post(
        "/v1/namespaces/ml-team/clusters/web/services/jupyterlab/sessions",
        &json!({}),
    )
    .await
    .problem(404, "not_found");
    env.anonymous()
        .post(
            "/v1/namespaces/ml-team/clusters/web/services/dashboard/sessions",
            &json!({}),
        )
        .await
        .problem(401, "unauthenticated");
    env.rest(&env.token("olga@example.com", &["other-team"]))
        .post(
            "/v1/namespaces/ml-team/clusters/web/services/dashboard/sessions",
            &json!({}),
        )
        .await
        .problem(403, "permission_denied");

    // The notebook's session, and Jupyter under its proxy path.
    let notebook = proxy_path("web", "notebook");
    let link = sign_in_link(&env, &alice, "web", "notebook").await;
    let opened = open(link["sign_in_url"].as_str().unwrap()).await;
    assert_eq!(opened.status, 303);
    assert!(
        opened
            .set_cookie
            .contains("Path=/v1/namespaces/ml-team/clusters/web/services;"),
        "{}",
        opened.set_cookie
    );
    let (status, api) = get_with_cookie(&base, &format!("{notebook}/api"), &opened.cookie()).await;
    assert_eq!((status, api.contains("\"version\"")), (200, true), "{api}");
    let tree = browser()
        .get(format!("{base}{notebook}/"))
        .header("cookie", opened.cookie())
        .send()
        .await
        .unwrap();
    assert_eq!(tree.status().as_u16(), 302);
    assert_eq!(tree.headers()["location"], format!("{notebook}/tree").as_str());

    // One audit row per session, none per request.
    let rows = session_rows(&env, "web").await;
    let sessions: Vec<&Value> = rows
        .iter()
        .filter(|r| r["request_summary"]["via"] == "browser-session")
        .collect();
    assert_eq!(sessions.len(), 2, "{rows:?}");
    assert!(sessions.iter().all(|r| r["outcome"] == "succeeded"), "{sessions:?}");
    assert!(
        rows.iter().all(|r| r["request_summary"]["via"] != "proxy"),
        "session requests are not audited one by one: {rows:?}"
    );

    // A revoked grant cuts the session's next request, and new links.
    let demoted = krayne_tests::TEAMS.replace("ml-team: editor", "ml-team: viewer");
    std::fs::write(env.teams_file(), demoted).unwrap();
    env.server.signal("HUP");
    let mut status = 0;
    for _ in 0..100 {
        status = get_with_cookie(&base, &format!("{dashboard}/api/version"), &cookie)
            .await
            .0;
        if status == 403 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status, 403, "the session outlived its grant");
    rest.post(
        "/v1/namespaces/ml-team/clusters/web/services/dashboard/sessions",
        &json!({}),
    )
    .await
    .problem(403, "permission_denied");
}

#[tokio::test]
async fn a_sign_in_link_works_once_across_replicas_and_sessions_on_every_replica() {
    let db = krayne_tests::test_database().await;
    let env = Env::start_with(EnvOptions::with_database(&db.url)).await;
    env.ready_cluster("shared").await;
    let second = env.spawn_server(&[]).await;
    let second_url = format!("http://{}", second.api);
    let link = sign_in_link(&env, &env.alice(), "shared", "dashboard").await;
    let url = link["sign_in_url"].as_str().unwrap();
    let on_second = url.replace(&env.url(), &second_url);
    let opened = open(&on_second).await;
    assert_eq!(opened.status, 303, "{}", opened.body);
    let replayed = open(url).await;
    assert_eq!(replayed.status, 401, "replayed on the first replica: {}", replayed.body);
    let path = format!("{}/api/version", proxy_path("shared", "dashboard"));
    for base in [env.url(), second_url] {
        assert_eq!(get_with_cookie(&base, &path, &opened.cookie()).await.0, 200, "{base}");
    }
}

#[tokio::test]
async fn behind_a_public_urls_prefix_links_cookies_and_the_notebook_follow_it() {
    let public = "http://gateway.example:8443/krayne";
    let env = Env::start_with(EnvOptions::with_args(&["--public-url", public])).await;
    env.ready_cluster("nb").await;
    let alice = env.alice();
    let notebook = proxy_path("nb", "notebook");
    let dashboard = proxy_path("nb", "dashboard");

    // The ingress strips /krayne; Jupyter, told its base URL, wants it back.
    let tree = browser()
        .get(format!("{}{notebook}/", env.url()))
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap();
    assert_eq!(tree.status().as_u16(), 302);
    assert_eq!(tree.headers()["location"], format!("/krayne{notebook}/tree").as_str());
    let api = env.rest(&alice).get(&format!("{notebook}/api")).await.expect(200);
    assert!(api.body["version"].is_string(), "{:?}", api.body);
    let bare = browser()
        .get(format!("{}{dashboard}", env.url()))
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap();
    assert_eq!(bare.headers()["location"], format!("/krayne{dashboard}/").as_str());

    let link = sign_in_link(&env, &alice, "nb", "dashboard").await;
    let url = link["sign_in_url"].as_str().unwrap();
    assert!(
        url.starts_with(&format!("{public}/v1/namespaces/ml-team/clusters/nb/")),
        "{url}"
    );
    assert_eq!(link["service_url"], format!("{public}{dashboard}/"));
    let opened = open(&url.replace(public, &env.url())).await;
    assert_eq!(opened.status, 303);
    assert_eq!(opened.location, format!("/krayne{dashboard}/"));
    assert!(
        opened
            .set_cookie
            .contains("Path=/krayne/v1/namespaces/ml-team/clusters/nb/services;"),
        "{}",
        opened.set_cookie
    );
}

/// A request to the server with `host` as its `Host` header.
fn at_host(env: &Env, host: &str, path: &str) -> reqwest::RequestBuilder {
    browser().get(format!("{}{path}", env.url())).header("host", host)
}

#[tokio::test]
async fn with_an_apps_domain_each_service_has_a_host_of_its_own() {
    let env = Env::start_with(EnvOptions::with_args(&["--apps-domain", "apps.example.test"])).await;
    env.ready_cluster("own").await;
    env.ready_cluster("next").await;
    let alice = env.alice();
    let host = "dashboard--own--ml-team.apps.example.test";

    let link = sign_in_link(&env, &alice, "own", "dashboard").await;
    let url = link["sign_in_url"].as_str().unwrap();
    let prefix = format!("http://{host}/_krayne/sign-in?ticket=");
    assert!(url.starts_with(&prefix), "{link}");
    assert_eq!(link["service_url"], format!("http://{host}/"));
    let ticket = url.strip_prefix(&prefix).unwrap();

    // The path-mode sign-in refuses a service that has a host of its own.
    let path_mode = open(&format!(
        "{}/v1/namespaces/ml-team/clusters/own/services/dashboard/sessions/sign-in?ticket={ticket}",
        env.url()
    ))
    .await;
    assert_eq!(path_mode.status, 400, "{}", path_mode.body);

    let opened = at_host(&env, host, &format!("/_krayne/sign-in?ticket={ticket}"))
        .send()
        .await
        .unwrap();
    assert_eq!(opened.status().as_u16(), 303);
    assert_eq!(opened.headers()["location"], "/");
    let set_cookie = opened.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        set_cookie.contains("Path=/;") && !set_cookie.contains("Domain"),
        "host-only: {set_cookie}"
    );
    let cookie = set_cookie.split(';').next().unwrap().to_owned();

    // The service's own paths, as they are, on the cookie.
    let version = at_host(&env, host, "/api/version")
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(version.status().as_u16(), 200);
    assert!(version.text().await.unwrap().contains("ray_version"));
    let page = at_host(&env, host, "/").header("cookie", &cookie).send().await.unwrap();
    assert!(page.text().await.unwrap().contains("Ray Dashboard"));
    // Bearer tokens work there too; the cookie works nowhere else.
    let bearer = at_host(&env, host, "/api/version")
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap();
    assert_eq!(bearer.status().as_u16(), 200);
    for (other, path) in [
        ("dashboard--next--ml-team.apps.example.test", "/api/version"),
        ("notebook--own--ml-team.apps.example.test", "/api"),
    ] {
        let refused = at_host(&env, other, path)
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status().as_u16(), 401, "{other}");
    }
    let api = browser()
        .get(format!("{}/v1/whoami", env.url()))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(api.status().as_u16(), 401);
    let unknown = at_host(&env, "nothing.apps.example.test", "/").send().await.unwrap();
    assert_eq!(unknown.status().as_u16(), 404);

    // Jupyter on its host: its base URL goes under the host's paths.
    let notebook = at_host(&env, "notebook--own--ml-team.apps.example.test", "/api")
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap();
    assert_eq!(notebook.status().as_u16(), 200);
    assert!(notebook.text().await.unwrap().contains("\"version\""));
    // The API itself is where it was.
    env.rest(&alice).get("/v1/whoami").await.expect(200);
}

/// A browser session's requests, in both upstream modes: they reuse the
/// session's connection to the service (one opened for ten requests, a
/// POST's body included), and once the head pod is replaced the next
/// requests reach the new pod on a new connection.
async fn a_sessions_requests_share_a_connection_and_follow_a_replaced_head(mode: &str) {
    use k8s_openapi::api::core::v1::Pod;
    let env = Env::start_with(EnvOptions::with_args(&["--service-upstream", mode])).await;
    env.ready_cluster("reuse").await;
    let link = sign_in_link(&env, &env.alice(), "reuse", "dashboard").await;
    let cookie = open(link["sign_in_url"].as_str().unwrap()).await.cookie();
    let version = format!("{}{}/api/version", env.url(), proxy_path("reuse", "dashboard"));
    let jobs = format!("{}{}/api/jobs/", env.url(), proxy_path("reuse", "dashboard"));
    let opened = || env.metric("krayne_tunnels_opened_total", "via=\"browser-session\"");
    // A keep-alive client, as a browser is.
    let page = reqwest::Client::new();
    for _ in 0..9 {
        let response = page.get(&version).header("cookie", &cookie).send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert!(response.text().await.unwrap().contains("ray_version"));
    }
    // A POST with a body from the dashboard's own page, as a browser sends
    // it (its `Origin` is what a session's POST needs): Ray's own browser
    // guard answers it, on the same connection.
    let submitted = page
        .post(&jobs)
        .header("cookie", &cookie)
        .header("origin", env.url())
        .json(&json!({"entrypoint": "echo reused"}))
        .send()
        .await
        .unwrap();
    assert_eq!(submitted.status(), 405);
    assert!(
        submitted
            .text()
            .await
            .unwrap()
            .contains("not allowed for browser traffic"),
        "Ray's guard answered"
    );
    assert_eq!(opened().await, 1.0, "ten requests, one connection ({mode})");

    let client = krayne_server::k8s::client_for_url(&env.sandbox.url()).unwrap();
    let pods: kube::Api<Pod> = kube::Api::namespaced(client, "ml-team");
    let heads = kube::api::ListParams::default().labels("ray.io/cluster=reuse,ray.io/node-type=head");
    let old = pods.list(&heads).await.unwrap().items[0].metadata.name.clone().unwrap();
    pods.delete(&old, &Default::default()).await.unwrap();
    let started = std::time::Instant::now();
    loop {
        let response = page.get(&version).header("cookie", &cookie).send().await.unwrap();
        let status = response.status().as_u16();
        let now: Vec<String> = pods
            .list(&heads)
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
        if status == 200 && !now.contains(&old) {
            break;
        }
        assert!(
            [200, 409, 502, 503].contains(&status),
            "{status}: {}",
            response.text().await.unwrap()
        );
        assert!(started.elapsed() < Duration::from_secs(30), "no new head ({status})");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(opened().await >= 2.0, "the new pod, a new connection ({mode})");
    // The session is one row; requests refused while no head served
    // are rows of their own.
    let rows = session_rows(&env, "reuse").await;
    let (sessions, others): (Vec<_>, Vec<_>) = rows.iter().partition(|r| r["outcome"] == "succeeded");
    assert_eq!(sessions.len(), 1, "{rows:?}");
    assert!(others.iter().all(|r| r["http_status"] == 409), "{others:?}");
}

#[tokio::test]
async fn a_sessions_requests_share_a_connection_and_follow_a_replaced_head_port_forward() {
    a_sessions_requests_share_a_connection_and_follow_a_replaced_head("port-forward").await;
}

#[tokio::test]
async fn a_sessions_requests_share_a_connection_and_follow_a_replaced_head_direct() {
    a_sessions_requests_share_a_connection_and_follow_a_replaced_head("direct").await;
}
