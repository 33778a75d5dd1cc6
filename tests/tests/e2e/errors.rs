//! Each error status, over REST and gRPC, with the same meaning.

use krayne_proto::v1::{self as pb, create_cluster_request::Source};
use krayne_tests::Env;
use serde_json::json;
use tonic::Code;

const NS: &str = "/v1/namespaces/ml-team/clusters";

fn create(spec_yaml: &str) -> pb::CreateClusterRequest {
    pb::CreateClusterRequest {
        source: Some(Source::ConfigYaml(spec_yaml.into())),
        dry_run: false,
        field_validation: 0,
        queue: None,
    }
}

#[tokio::test]
async fn invalid_configs_list_every_field_on_both_transports() {
    let env = Env::start().await;
    let alice = env.rest(&env.alice());
    let bad = json!({"name": "Bad_Name", "workers": 3, "worker_groups": [{"replicas": 1, "min_replicas": 2}]});
    let r = alice.post(NS, &bad).await.problem(400, "invalid_argument");
    let want = ["workers", "name", "worker_groups[0].min_replicas"];
    assert_eq!(r.violation_fields(), want);

    let mut g = env.grpc(&env.alice()).await;
    let yaml = "name: Bad_Name\nnamespace: ml-team\nworkers: 3\nworker_groups: [{replicas: 1, min_replicas: 2}]\n";
    let status = g.clusters.create_cluster(create(yaml)).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(krayne_tests::bad_request_fields(&status), want);
}

#[tokio::test]
async fn not_found_exists_and_missing_namespace() {
    let env = Env::start().await;
    let admin = env.rest(&env.admin());
    admin.get(&format!("{NS}/nope")).await.problem(404, "not_found");
    let r = admin
        .post("/v1/namespaces/ghost/clusters", &json!({"name": "c"}))
        .await
        .problem(404, "not_found");
    assert!(
        r.body["detail"].as_str().unwrap().contains("namespace \"ghost\""),
        "{}",
        r.text
    );
    admin.post(NS, &json!({"name": "twice"})).await.expect(201);
    admin
        .post(NS, &json!({"name": "twice"}))
        .await
        .problem(409, "already_exists");
    admin
        .post(
            &format!("{NS}/twice/scale"),
            &json!({"worker_group": "nope", "replicas": 1}),
        )
        .await
        .problem(400, "invalid_argument");

    let mut g = env.grpc(&env.admin()).await;
    let get = |name: &str| pb::GetClusterRequest {
        namespace: "ml-team".into(),
        name: name.into(),
    };
    assert_eq!(
        g.clusters.get_cluster(get("nope")).await.unwrap_err().code(),
        Code::NotFound
    );
    let ghost = g
        .clusters
        .create_cluster(create("name: c\nnamespace: ghost\n"))
        .await
        .unwrap_err();
    assert_eq!(ghost.code(), Code::NotFound);
    assert!(ghost.message().contains("namespace \"ghost\""), "{}", ghost.message());
    let again = g
        .clusters
        .create_cluster(create("name: twice\nnamespace: ml-team\n"))
        .await
        .unwrap_err();
    assert_eq!(again.code(), Code::AlreadyExists);
}

// Limits, media types and unknown routes are the router's own answers:
// `server/api/tests/router.rs` (`limits_media_types_and_routes`) checks
// them in process.

#[tokio::test]
async fn authentication_and_tenancy() {
    let env = Env::start().await;
    let r = env.anonymous().get("/v1/whoami").await.problem(401, "unauthenticated");
    assert_eq!(r.header("www-authenticate").as_deref(), Some("Bearer realm=\"krayne\""));
    let r = env
        .rest("not.a.jwt")
        .get("/v1/whoami")
        .await
        .problem(401, "unauthenticated");
    assert!(
        r.header("www-authenticate")
            .unwrap()
            .contains("error=\"invalid_token\"")
    );
    assert_eq!(r.body["detail"], "invalid token");

    let alice = env.rest(&env.alice());
    let denied = alice
        .post("/v1/namespaces/other-team/clusters", &json!({"name": "c"}))
        .await
        .problem(403, "permission_denied");
    assert!(
        denied.body["detail"]
            .as_str()
            .unwrap()
            .contains("editor role on namespace \"other-team\""),
        "{}",
        denied.text
    );
    alice
        .post("/v1/namespaces/shared-data/clusters", &json!({"name": "c"}))
        .await
        .problem(403, "permission_denied");
    alice.get("/v1/namespaces/shared-data/clusters").await.expect(200);

    let other = env.rest(&env.token("bob@example.com", &["other-team"]));
    other
        .post("/v1/namespaces/other-team/clusters", &json!({"name": "theirs"}))
        .await
        .expect(201);
    let mine = alice.get("/v1/clusters").await.expect(200);
    assert!(
        mine.body["clusters"].as_array().unwrap().is_empty(),
        "alice must not see other-team: {}",
        mine.text
    );

    let mut g = env.grpc("not.a.jwt").await;
    let status = g.identity.who_am_i(pb::WhoAmIRequest {}).await.unwrap_err();
    assert_eq!(
        (status.code(), status.message()),
        (Code::Unauthenticated, "invalid token")
    );
    let mut g = env.grpc(&env.alice()).await;
    let denied = g
        .clusters
        .create_cluster(create("name: c\nnamespace: other-team\n"))
        .await
        .unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied);
}

#[tokio::test]
async fn wait_times_out_with_the_last_status_on_both_transports() {
    let env = Env::start().await;
    let alice = env.rest(&env.alice());
    alice
        .post(
            NS,
            &json!({"name": "stuck", "head": {"cpus": "64"}, "worker_groups": []}),
        )
        .await
        .expect(201);
    let r = alice
        .get(&format!("{NS}/stuck/wait?timeout_seconds=2"))
        .await
        .problem(504, "deadline_exceeded");
    assert!(r.body["detail"].as_str().unwrap().contains("last status"), "{}", r.text);

    let mut g = env.grpc(&env.alice()).await;
    let request = pb::WaitClusterRequest {
        namespace: "ml-team".into(),
        name: "stuck".into(),
        timeout_seconds: 1,
    };
    let mut stream = g.clusters.wait_cluster(request).await.unwrap().into_inner();
    let mut last = None;
    while let Some(item) = futures::StreamExt::next(&mut stream).await {
        last = Some(item);
    }
    let status = last.unwrap().unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded);
    let missing = pb::WaitClusterRequest {
        namespace: "ml-team".into(),
        name: "nope".into(),
        timeout_seconds: 1,
    };
    assert_eq!(
        g.clusters.wait_cluster(missing).await.unwrap_err().code(),
        Code::NotFound
    );
}
