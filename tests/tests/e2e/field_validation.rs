//! `field_validation` on create and dry run, over REST and gRPC: a file
//! written for an older Krayne (an unknown key in a worker group, numbers
//! and booleans as strings) builds the clean file's cluster with one
//! warning per lenient field (`warn`, the default), is refused at those
//! paths (`strict`), or passes silently (`ignore`).

use krayne_proto::v1::{self as pb, create_cluster_request::Source};
use krayne_tests::{Env, Grpc};
use reqwest::Method;
use tonic::Code;

const NS: &str = "/v1/namespaces/ml-team/clusters";

/// Krayne 0.3.8 accepts this file. `notebook: yes` is a YAML 1.1 boolean
/// to PyYAML, so it is no conversion.
const LEGACY: &str = "\
name: legacy
namespace: ml-team
worker_groups:
  - name: cpu
    replicas: \"2\"
    max_replicas: 4.0
    accelerator: t4
services:
  notebook: yes
  ssh: \"no\"
autoscaler:
  enabled: 1
";

/// The same cluster, as a clean file says it.
const CLEAN: &str = "\
name: legacy
namespace: ml-team
worker_groups:
  - {name: cpu, replicas: 2, max_replicas: 4}
services: {notebook: true, ssh: false}
autoscaler: {enabled: true}
";

const LENIENT_PATHS: [&str; 5] = [
    "worker_groups[0].accelerator",
    "worker_groups[0].replicas",
    "worker_groups[0].max_replicas",
    "services.ssh",
    "autoscaler.enabled",
];

const WARNINGS: [&str; 5] = [
    "worker_groups[0].accelerator: unknown field, ignored",
    "worker_groups[0].replicas: the string \"2\" read as 2",
    "worker_groups[0].max_replicas: 4.0 read as 4",
    "services.ssh: the string \"no\" read as false",
    "autoscaler.enabled: 1 read as true",
];

async fn post_yaml(env: &Env, query: &str, body: &str) -> krayne_tests::Reply {
    env.rest(&env.alice())
        .send(
            Method::POST,
            &format!("{NS}?{query}"),
            Some("application/yaml"),
            Some(body.as_bytes().to_vec()),
        )
        .await
}

#[tokio::test]
async fn rest_warns_by_default_refuses_when_strict_and_is_silent_when_ignoring() {
    let env = Env::start().await;
    let clean = post_yaml(&env, "dry_run=true", CLEAN).await.expect(200);
    assert_eq!(clean.headers.get_all("warning").iter().count(), 0);
    assert_eq!(clean.body["warnings"], serde_json::json!([]));

    for query in [
        "dry_run=true",
        "dry_run=true&field_validation=warn",
        "dry_run=true&field_validation=Warn",
    ] {
        let warned = post_yaml(&env, query, LEGACY).await.expect(200);
        let headers: Vec<&str> = warned
            .headers
            .get_all("warning")
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect();
        let want: Vec<String> = WARNINGS
            .iter()
            .map(|w| format!("299 - \"{}\"", w.replace('"', "\\\"")))
            .collect();
        assert_eq!(headers, want, "{query}");
        let body: Vec<String> = warned.body["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| {
                format!(
                    "{}: {}",
                    w["field"].as_str().unwrap(),
                    w["description"].as_str().unwrap()
                )
            })
            .collect();
        assert_eq!(body, WARNINGS, "{query}");
        assert_eq!(
            warned.body["manifest"], clean.body["manifest"],
            "{query}: the clean file's cluster"
        );
    }

    let strict = post_yaml(&env, "dry_run=true&field_validation=strict", LEGACY)
        .await
        .problem(400, "invalid_argument");
    assert_eq!(strict.violation_fields(), LENIENT_PATHS);
    assert!(
        strict.body["violations"][1]["description"]
            .as_str()
            .unwrap()
            .contains("field_validation=strict"),
        "{}",
        strict.text
    );

    let ignored = post_yaml(&env, "dry_run=true&field_validation=ignore", LEGACY)
        .await
        .expect(200);
    assert_eq!(ignored.headers.get_all("warning").iter().count(), 0);
    assert_eq!(ignored.body["warnings"], serde_json::json!([]));
    assert_eq!(ignored.body["manifest"], clean.body["manifest"]);

    let bad_mode = post_yaml(&env, "field_validation=lenient", LEGACY)
        .await
        .problem(400, "invalid_argument");
    assert_eq!(bad_mode.violation_fields(), ["field_validation"]);

    // An unknown top-level key is Krayne's error in every mode.
    for mode in ["strict", "warn", "ignore"] {
        let r = post_yaml(
            &env,
            &format!("field_validation={mode}"),
            &format!("{CLEAN}workers: 3\n"),
        )
        .await
        .problem(400, "invalid_argument");
        assert_eq!(r.violation_fields(), ["workers"], "{mode}");
    }

    // A real create warns the same way.
    let created = post_yaml(&env, "", LEGACY).await.expect(201);
    assert_eq!(created.headers.get_all("warning").iter().count(), 5);
    assert_eq!(created.body["cluster"]["num_workers"], 2);
}

/// A gRPC dry run of `yaml` with `field_validation` as given (an `i32`, so
/// a value no enum has can be sent).
async fn dry_run(g: &mut Grpc, yaml: &str, mode: i32) -> Result<pb::CreateClusterResponse, tonic::Status> {
    let request = pb::CreateClusterRequest {
        source: Some(Source::ConfigYaml(yaml.into())),
        dry_run: true,
        field_validation: mode,
        queue: None,
    };
    g.clusters
        .create_cluster(request)
        .await
        .map(tonic::Response::into_inner)
}

#[tokio::test]
async fn grpc_carries_the_mode_and_the_warnings() {
    let env = Env::start().await;
    let mut g = env.grpc(&env.alice()).await;
    let clean = dry_run(&mut g, CLEAN, pb::FieldValidation::Strict.into())
        .await
        .unwrap();
    assert!(clean.warnings.is_empty());

    for mode in [pb::FieldValidation::Unspecified, pb::FieldValidation::Warn] {
        let warned = dry_run(&mut g, LEGACY, mode.into()).await.unwrap();
        let got: Vec<String> = warned
            .warnings
            .iter()
            .map(|w| format!("{}: {}", w.field, w.description))
            .collect();
        assert_eq!(got, WARNINGS, "{mode:?}");
        assert_eq!(warned.manifest, clean.manifest, "{mode:?}");
    }

    let status = dry_run(&mut g, LEGACY, pb::FieldValidation::Strict.into())
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(krayne_tests::bad_request_fields(&status), LENIENT_PATHS);

    let ignored = dry_run(&mut g, LEGACY, pb::FieldValidation::Ignore.into())
        .await
        .unwrap();
    assert!(ignored.warnings.is_empty());
    assert_eq!(ignored.manifest, clean.manifest);

    let status = dry_run(&mut g, LEGACY, 9).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().contains("field_validation"), "{}", status.message());
}
