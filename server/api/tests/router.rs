//! The REST router in process (crates.io's `TestApp`): the real routes,
//! extractors, middleware and problem rendering over the use cases and
//! their in-memory ports (`krayne_control::fakes`). No listener, no
//! sandbox, no database: status codes, problem documents and headers in
//! milliseconds. The e2e suites keep what needs the real binary.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::{sync::Arc, time::Duration};

use axum::{
    Router,
    body::Body,
    http::{Method, Request, StatusCode, header},
    middleware,
};
use krayne_api::{
    edge,
    rest::{self, AppState, RestSettings},
};
use krayne_control::{
    ControlPlane, ControlSettings,
    auth::{Authenticator, MintRequest, TeamMapping, TokenRules, Verifier, VerifyingKey, mint},
    fakes::{MemoryAudit, MemoryStore},
};
use serde_json::{Value, json};
use tower::ServiceExt as _;

const SECRET: &[u8] = b"a router test's secret, 32 bytes or more";

const TEAMS: &str = r#"
admins: { groups: [platform-admins], subjects: [] }
teams:
  - name: ml-research
    members: { groups: [ml-research] }
    namespaces: { ml-team: editor, "shared-*": viewer }
  - name: other
    members: { groups: [other-team] }
    namespaces: { other-team: editor }
"#;

const NS: &str = "/v1/namespaces/ml-team/clusters";

/// The REST API as the server mounts it (request ids first), over
/// in-memory ports.
struct TestApp {
    router: Router,
    store: Arc<MemoryStore>,
    audit: Arc<MemoryAudit>,
}

/// One answer, read whole.
struct Answer {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    text: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("{e}: {}", self.text))
    }

    /// The problem document of a refusal with `status` and `code`.
    fn problem(&self, status: u16, code: &str) -> Value {
        assert_eq!(self.status.as_u16(), status, "{}", self.text);
        let content_type = self.headers.get(header::CONTENT_TYPE).unwrap();
        assert_eq!(content_type, "application/problem+json", "{}", self.text);
        let body = self.json();
        assert_eq!(
            (body["code"].as_str(), body["status"].as_u64()),
            (Some(code), Some(status.into()))
        );
        let request_id = self.headers.get("x-request-id").unwrap().to_str().unwrap();
        assert_eq!(body["request_id"], request_id, "the problem names the request");
        body
    }
}

impl TestApp {
    fn new() -> Self {
        let store = MemoryStore::with_namespaces(&["ml-team", "other-team", "shared-data"]);
        let audit = MemoryAudit::new();
        let verifier = Verifier::new(vec![VerifyingKey::hs256(SECRET)], TokenRules::default());
        let auth = Authenticator::new(verifier, TeamMapping::parse(TEAMS).unwrap());
        let plane = ControlPlane::new(store.clone(), audit.clone(), ControlSettings::default())
            .with_authenticator(auth.clone());
        let state = AppState::new(plane, auth, Duration::from_secs(10));
        let router = rest::router(state, &RestSettings::default()).layer(middleware::from_fn(edge::assign_request_ids));
        Self { router, store, audit }
    }

    fn token(subject: &str, groups: &[&str]) -> String {
        let request = MintRequest {
            subject: subject.to_owned(),
            email: Some(subject.to_owned()),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            ttl_seconds: 3600,
            issuer: "krayne".to_owned(),
            audience: "krayne".to_owned(),
        };
        mint(&request, jsonwebtoken::Algorithm::HS256, SECRET).unwrap()
    }

    fn alice() -> String {
        Self::token("alice@example.com", &["ml-research"])
    }

    async fn send(&self, method: Method, path: &str, token: Option<&str>, body: Option<(&str, Vec<u8>)>) -> Answer {
        let mut request = Request::builder().method(method).uri(path);
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let body = match body {
            Some((content_type, bytes)) => {
                request = request.header(header::CONTENT_TYPE, content_type);
                Body::from(bytes)
            }
            None => Body::empty(),
        };
        let response = self.router.clone().oneshot(request.body(body).unwrap()).await.unwrap();
        let (parts, body) = response.into_parts();
        let bytes = axum::body::to_bytes(body, 16 * 1024 * 1024).await.unwrap();
        Answer {
            status: parts.status,
            headers: parts.headers,
            text: String::from_utf8_lossy(&bytes).into_owned(),
        }
    }

    async fn get(&self, path: &str, token: &str) -> Answer {
        self.send(Method::GET, path, Some(token), None).await
    }

    async fn post_json(&self, path: &str, token: &str, body: &Value) -> Answer {
        let bytes = serde_json::to_vec(body).unwrap();
        self.send(Method::POST, path, Some(token), Some(("application/json", bytes)))
            .await
    }
}

/// Moved from the e2e suite (`errors::limits_media_types_and_routes`):
/// each is decided by the router, not by Kubernetes.
#[tokio::test]
async fn limits_media_types_and_routes() {
    let app = TestApp::new();
    let alice = TestApp::alice();
    let huge = vec![b' '; 1024 * 1024 + 1];
    app.send(Method::POST, NS, Some(&alice), Some(("application/json", huge)))
        .await
        .problem(413, "payload_too_large");
    app.send(
        Method::POST,
        NS,
        Some(&alice),
        Some(("text/plain", b"name: x".to_vec())),
    )
    .await
    .problem(415, "unsupported_media_type");
    app.send(
        Method::POST,
        NS,
        Some(&alice),
        Some(("application/json", b"{\"name\": ".to_vec())),
    )
    .await
    .problem(400, "invalid_argument");
    app.get("/v1/nothing-here", &alice).await.problem(404, "not_found");
    app.send(Method::PUT, NS, Some(&alice), None)
        .await
        .problem(405, "method_not_allowed");
    app.get("/v1/clusters?page_size=5000", &alice)
        .await
        .problem(400, "invalid_argument");
    app.get(&format!("{NS}/x/wait?timeout_seconds=0"), &alice)
        .await
        .problem(400, "invalid_argument");
}

#[tokio::test]
async fn refusals_come_in_order_role_then_name_each_audited() {
    let app = TestApp::new();
    let bob = TestApp::token("bob@example.com", &["other-team"]);
    let refused = app
        .get(&format!("{NS}/Not_A_Name"), &bob)
        .await
        .problem(403, "permission_denied");
    assert!(refused["detail"].as_str().unwrap().contains("viewer"), "{refused}");
    let bad = app
        .get(&format!("{NS}/Not_A_Name"), &TestApp::alice())
        .await
        .problem(400, "invalid_argument");
    assert_eq!(bad["violations"][0]["field"], "name", "{bad}");
    app.get(&format!("{NS}/missing"), &TestApp::alice())
        .await
        .problem(404, "not_found");
    let outcomes: Vec<String> = app
        .audit
        .of("cluster.get")
        .iter()
        .map(|r| r.outcome.as_str().to_owned())
        .collect();
    assert_eq!(outcomes, ["denied", "invalid"], "the 403 and the 400 are on record");
    app.send(Method::GET, NS, None, None)
        .await
        .problem(401, "unauthenticated");
}

#[tokio::test]
async fn a_cluster_is_created_read_and_deleted_through_the_routes() {
    let app = TestApp::new();
    let alice = TestApp::alice();
    let created = app.post_json(NS, &alice, &json!({"name": "routed"})).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    assert_eq!(created.json()["cluster"]["name"], "routed");
    assert!(app.store.object("ml-team", "routed").is_some());
    let read = app.get(&format!("{NS}/routed"), &alice).await;
    assert_eq!(
        (read.status, read.json()["namespace"].as_str()),
        (StatusCode::OK, Some("ml-team"))
    );
    let jobs = app.get(&format!("{NS}/routed/jobs/raysubmit_1"), &alice).await;
    assert_eq!(
        jobs.status.as_u16(),
        409,
        "a cluster not ready has no Jobs API: {}",
        jobs.text
    );
    let deleted = app
        .send(Method::DELETE, &format!("{NS}/routed"), Some(&alice), None)
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.text);
    app.get(&format!("{NS}/routed"), &alice).await.problem(404, "not_found");
}
