//! What operators and tools rely on: the OpenAPI document and docs UI,
//! reflection and health, CORS, the ops endpoints.

use krayne_tests::{Env, EnvOptions, server_binary};
use tonic_health::pb::{HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient};
use tonic_reflection::pb::v1::{
    ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
    server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
};

#[tokio::test]
async fn the_openapi_document_is_stable_and_valid() {
    let env = Env::start().await;
    let served = env.anonymous().get("/openapi.json").await.expect(200);
    assert_eq!(served.body["openapi"], "3.1.0");
    let printed = std::process::Command::new(server_binary())
        .arg("openapi")
        .output()
        .unwrap();
    assert!(printed.status.success());
    let printed: serde_json::Value = serde_json::from_slice(&printed.stdout).unwrap();
    assert_eq!(printed, served.body, "`krayne-server openapi` prints what is served");
    let mut doc = served.body.clone();
    doc["info"]["version"] = "<version>".into();
    insta::assert_json_snapshot!("openapi", doc);

    let paths = served.body["paths"].as_object().unwrap();
    for path in [
        "/v1/whoami",
        "/v1/namespaces",
        "/v1/clusters",
        "/v1/namespaces/{namespace}/clusters",
        "/v1/namespaces/{namespace}/clusters/{name}",
        "/v1/namespaces/{namespace}/clusters/{name}/details",
        "/v1/namespaces/{namespace}/clusters/{name}/scale",
        "/v1/namespaces/{namespace}/clusters/{name}/wait",
        "/v1/audit",
        "/v1/version",
    ] {
        assert!(paths.contains_key(path), "{path} is not documented");
    }
    let mut operation_ids = std::collections::HashSet::new();
    for (path, ops) in paths {
        for (method, op) in ops.as_object().unwrap() {
            assert!(
                operation_ids.insert(op["operationId"].as_str().unwrap().to_owned()),
                "{method} {path}: duplicate operationId"
            );
            assert!(op["summary"].is_string(), "{method} {path} has no summary");
            // Only the version, where to sign in, and a sign-in link (its
            // ticket is the credential) need no token (`security: [{}]`);
            // every other operation documents its 401.
            let open = op["security"] == serde_json::json!([{}]);
            assert_eq!(
                open,
                path == "/v1/version" || path == "/.well-known/krayne" || path.ends_with("/sessions/sign-in"),
                "{method} {path}: security {}",
                op["security"]
            );
            assert!(
                open || op["responses"]["401"].is_object(),
                "{method} {path} does not document 401"
            );
        }
    }

    match krayne_tests::which("openapi-spec-validator") {
        Some(validator) => {
            let file = std::env::temp_dir().join(format!("krayne-openapi-{}.json", std::process::id()));
            std::fs::write(&file, served.text.as_bytes()).unwrap();
            let out = std::process::Command::new(validator).arg(&file).output().unwrap();
            let _ = std::fs::remove_file(&file);
            assert!(
                out.status.success(),
                "invalid OpenAPI 3.1: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        None if std::env::var_os("CI").is_some() => {
            panic!("openapi-spec-validator must be installed in CI (.ci/run does it)")
        }
        None => eprintln!("SKIPPED: openapi-spec-validator not installed; the document was not validated"),
    }
}

#[tokio::test]
async fn swagger_ui_is_served_without_network() {
    let env = Env::start().await;
    let page = env.anonymous().get("/docs/").await.expect(200);
    assert!(
        page.text.contains("swagger-ui"),
        "{}",
        &page.text[..page.text.len().min(300)]
    );
    // The UI's assets come from this server (vendored), not a CDN.
    assert!(
        !page.text.contains("unpkg.com") && !page.text.contains("cdn."),
        "the docs page loads from a CDN"
    );
    let css = env.anonymous().get("/docs/swagger-ui.css").await.expect(200);
    assert!(css.text.len() > 1000);
    let init = env.anonymous().get("/docs/swagger-initializer.js").await.expect(200);
    assert!(init.text.contains("/openapi.json"), "{}", init.text);
}

#[tokio::test]
async fn reflection_lists_services_and_health_is_serving() {
    let env = Env::start().await;
    let g = env.grpc(&env.alice()).await;
    let mut reflection = ServerReflectionClient::new(g.channel.clone());
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = reflection
        .server_reflection_info(futures::stream::iter([request]))
        .await
        .unwrap()
        .into_inner();
    let response = responses.message().await.unwrap().unwrap();
    let Some(MessageResponse::ListServicesResponse(list)) = response.message_response else {
        panic!("unexpected reflection answer {response:?}");
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    for want in [
        "krayne.v1.ClusterService",
        "krayne.v1.IdentityService",
        "krayne.v1.AuditService",
        "grpc.health.v1.Health",
    ] {
        assert!(names.contains(&want.to_owned()), "{names:?}");
    }
    let mut health = HealthClient::new(g.channel.clone());
    for service in ["", "krayne.v1.ClusterService"] {
        let answer = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(answer.status, ServingStatus::Serving as i32, "{service:?}");
    }
}

#[tokio::test]
async fn cors_allows_configured_origins_only() {
    let options = EnvOptions {
        server_args: vec!["--cors-origin".into(), "https://portal.example.com".into()],
        ..EnvOptions::default()
    };
    let env = Env::start_with(options).await;
    let http = reqwest::Client::new();
    let preflight = |origin: &'static str| {
        http.request(reqwest::Method::OPTIONS, format!("{}/v1/clusters", env.url()))
            .header("origin", origin)
            .header("access-control-request-method", "GET")
            .header("access-control-request-headers", "authorization")
            .send()
    };
    let allowed = preflight("https://portal.example.com").await.unwrap();
    assert!(allowed.status().is_success());
    let headers = allowed.headers();
    assert_eq!(headers["access-control-allow-origin"], "https://portal.example.com");
    assert!(
        headers["access-control-allow-headers"]
            .to_str()
            .unwrap()
            .contains("authorization")
    );
    let refused = preflight("https://evil.example.com").await.unwrap();
    assert!(
        refused.headers().get("access-control-allow-origin").is_none(),
        "{:?}",
        refused.headers()
    );
}

#[tokio::test]
async fn ops_endpoints_need_no_token_and_report() {
    let env = Env::start().await;
    let ops = krayne_tests::Rest::new(&format!("http://{}", env.server.ops), None);
    ops.get("/healthz").await.expect(200);
    let ready = ops.get("/readyz").await.expect(200);
    assert_eq!(ready.body["status"], "ready");
    env.rest(&env.alice()).get("/v1/whoami").await.expect(200);
    let create = serde_json::json!({"name": "counted"});
    env.rest(&env.alice())
        .post("/v1/namespaces/ml-team/clusters", &create)
        .await
        .expect(201);
    let metrics = ops.get("/metrics").await.expect(200);
    assert!(
        metrics.text.contains("krayne_audit_write_duration_seconds"),
        "{}",
        metrics.text
    );
    assert!(
        metrics
            .text
            .contains("krayne_http_requests_total{route=\"/v1/whoami\",method=\"GET\",code=\"200\"}"),
        "{}",
        metrics.text
    );
    assert!(
        metrics.text.contains("krayne_http_request_duration_seconds"),
        "{}",
        metrics.text
    );
    for kube_metric in [
        "krayne_kube_requests_total{verb=\"list\",resource=\"namespaces\",outcome=\"ok\"}",
        "krayne_kube_requests_total{verb=\"watch\",resource=\"rayclusters\",outcome=\"ok\"}",
        "krayne_kube_requests_total{verb=\"create\",resource=\"rayclusters\",outcome=\"ok\"}",
        "krayne_kube_request_duration_seconds",
        "krayne_cache_objects{kind=\"rayclusters\"} 1",
        "krayne_cache_synced{kind=\"pods\"} 1",
        "krayne_cache_reads_total{kind=\"namespaces\",source=\"cache\"}",
        "krayne_cache_write_visible_seconds",
    ] {
        assert!(
            metrics.text.contains(kube_metric),
            "{kube_metric} missing:\n{}",
            metrics.text
        );
    }
    env.anonymous().get("/v1/whoami").await.problem(401, "unauthenticated");

    krayne_tests::dependency_becomes(&ops, "audit_database", "up", std::time::Duration::from_secs(10)).await;
    krayne_tests::dependency_becomes(&ops, "kubernetes", "up", std::time::Duration::from_secs(10)).await;

    // With Kubernetes gone, the server is alive and still ready (the
    // cache serves reads, mutations are refused), and says what is down.
    let Env { server, sandbox, .. } = env;
    sandbox.shutdown().await;
    let ops = krayne_tests::Rest::new(&format!("http://{}", server.ops), None);
    ops.get("/healthz").await.expect(200);
    let body = krayne_tests::dependency_becomes(&ops, "kubernetes", "down", std::time::Duration::from_secs(10)).await;
    assert!(
        body["dependencies"]["kubernetes"]["error"]
            .as_str()
            .unwrap()
            .contains("unreachable"),
        "{body}"
    );
    let metrics = ops.get("/metrics").await.expect(200);
    assert_eq!(
        krayne_tests::metric(&metrics.text, "krayne_dependency_up", "dependency=\"kubernetes\""),
        0.0
    );
}

/// `GET /v1/version` and `VersionService/GetVersion` answer without a
/// token, alike: the build, the API version and the features switched on.
#[tokio::test]
async fn the_version_needs_no_token() {
    let env = Env::start_with(EnvOptions::with_args(&["--audit-reads"])).await;
    let rest = env.anonymous().get("/v1/version").await.expect(200).body;
    assert_eq!(rest["server_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(rest["api_version"], "v1");
    assert!(rest["commit"].as_str().is_some_and(|c| !c.is_empty()));
    let features: Vec<&str> = rest["features"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f.as_str())
        .collect();
    assert_eq!(
        features,
        ["watch-cache", "audit-reads", "service-tunnels", "browser-sessions"]
    );
    let channel = tonic::transport::Channel::from_shared(env.url())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let grpc = krayne_proto::v1::version_service_client::VersionServiceClient::new(channel)
        .get_version(krayne_proto::v1::GetVersionRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(grpc.server_version, rest["server_version"].as_str().unwrap());
    assert_eq!(grpc.commit, rest["commit"].as_str().unwrap());
    assert_eq!(grpc.features, features);
}

/// `--cluster-pod-security restricted`: every pod template of a created
/// RayCluster carries what the `restricted` Pod Security Standard needs,
/// and the head's bootstrap installs nothing.
#[tokio::test]
async fn restricted_pod_security_secures_every_pod_krayne_creates() {
    let env = Env::start_with(EnvOptions::with_args(&["--cluster-pod-security", "restricted"])).await;
    let version = env.anonymous().get("/v1/version").await.expect(200);
    assert!(version.text.contains("restricted-pods"), "{}", version.text);
    env.rest(&env.alice())
        .post(
            "/v1/namespaces/ml-team/clusters",
            &serde_json::json!({"name": "locked"}),
        )
        .await
        .expect(201);
    let object: serde_json::Value = reqwest::get(format!(
        "{}/apis/ray.io/v1/namespaces/ml-team/rayclusters/locked",
        env.sandbox.url()
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let spec = &object["spec"];
    let mut pods = vec![&spec["headGroupSpec"]["template"]["spec"]];
    pods.extend(
        spec["workerGroupSpecs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| &g["template"]["spec"]),
    );
    assert!(pods.len() >= 2, "{object}");
    for pod in pods {
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{pod}");
        assert_eq!(pod["securityContext"]["runAsUser"], 1000, "{pod}");
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault",
            "{pod}"
        );
        for container in pod["containers"].as_array().unwrap() {
            let context = &container["securityContext"];
            assert_eq!(context["allowPrivilegeEscalation"], false, "{container}");
            assert_eq!(
                context["capabilities"]["drop"],
                serde_json::json!(["ALL"]),
                "{container}"
            );
        }
    }
    let script =
        spec["headGroupSpec"]["template"]["spec"]["containers"][0]["lifecycle"]["postStart"]["exec"]["command"][2]
            .as_str()
            .unwrap();
    assert!(
        !script.contains("sudo") && !script.contains("apt-get") && !script.contains("https://"),
        "{script}"
    );
}
