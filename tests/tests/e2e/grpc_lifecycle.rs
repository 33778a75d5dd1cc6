//! The whole life of a cluster over gRPC, with the same semantics as REST.

use futures::StreamExt as _;
use krayne_proto::v1::{self as pb, create_cluster_request::Source};
use krayne_tests::Env;

fn spec(name: &str) -> pb::ClusterSpec {
    pb::ClusterSpec {
        name: name.into(),
        namespace: Some("ml-team".into()),
        worker_groups: vec![pb::WorkerGroupSpec {
            name: Some("cpu".into()),
            replicas: Some(1),
            max_replicas: Some(4),
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[tokio::test]
async fn create_wait_describe_scale_delete() {
    let env = Env::start().await;
    let mut g = env.grpc(&env.alice()).await;

    let created = g
        .clusters
        .create_cluster(pb::CreateClusterRequest {
            source: Some(Source::Spec(spec("life"))),
            dry_run: false,
            field_validation: 0,
            queue: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        created.cluster.unwrap().created_by.as_deref(),
        Some("alice@example.com")
    );
    assert!(created.manifest.unwrap().fields.contains_key("spec"));

    let mut stream = g
        .clusters
        .wait_cluster(pb::WaitClusterRequest {
            namespace: "ml-team".into(),
            name: "life".into(),
            timeout_seconds: 60,
        })
        .await
        .unwrap()
        .into_inner();
    let mut statuses = Vec::new();
    while let Some(update) = stream.next().await {
        statuses.push(update.unwrap().cluster.unwrap().status);
    }
    assert_eq!(statuses.last().map(String::as_str), Some("ready"), "{statuses:?}");
    let mut deduped = statuses.clone();
    deduped.dedup();
    assert_eq!(deduped, statuses, "every update is a change");

    let got = g
        .clusters
        .get_cluster(pb::GetClusterRequest {
            namespace: "ml-team".into(),
            name: "life".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((got.status.as_str(), got.num_workers), ("ready", 1));
    assert!(got.created_at.is_some());
    let list = g
        .clusters
        .list_clusters(pb::ListClustersRequest {
            namespace: String::new(),
            page_size: 0,
            page_token: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.clusters.len(), 1);
    assert!(list.next_page_token.is_empty());

    let details = g
        .clusters
        .describe_cluster(pb::DescribeClusterRequest {
            namespace: "ml-team".into(),
            name: "life".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(details.pods.len(), 2);
    assert_eq!(details.ray_version, "2.60.0");

    let scaled = g
        .clusters
        .scale_cluster(pb::ScaleClusterRequest {
            namespace: "ml-team".into(),
            name: "life".into(),
            worker_group: "cpu".into(),
            replicas: Some(2),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(scaled.cluster.unwrap().num_workers, 2);

    g.clusters
        .delete_cluster(pb::DeleteClusterRequest {
            namespace: "ml-team".into(),
            name: "life".into(),
        })
        .await
        .unwrap();
    let gone = g
        .clusters
        .get_cluster(pb::GetClusterRequest {
            namespace: "ml-team".into(),
            name: "life".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(gone.code(), tonic::Code::NotFound);
}

#[tokio::test]
async fn config_yaml_dry_run_and_identity() {
    let env = Env::start().await;
    let mut g = env.grpc(&env.alice()).await;
    let dry = g
        .clusters
        .create_cluster(pb::CreateClusterRequest {
            source: Some(Source::ConfigYaml("name: dry\nnamespace: ml-team\n".into())),
            dry_run: true,
            field_validation: 0,
            queue: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(dry.manifest.is_some());
    let missing = g
        .clusters
        .get_cluster(pb::GetClusterRequest {
            namespace: "ml-team".into(),
            name: "dry".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), tonic::Code::NotFound);

    let me = g.identity.who_am_i(pb::WhoAmIRequest {}).await.unwrap().into_inner();
    assert_eq!(me.subject, "alice@example.com");
    assert_eq!(me.teams, ["ml-research"]);
    let roles: Vec<(String, i32)> = me.namespaces.iter().map(|n| (n.namespace.clone(), n.role)).collect();
    assert_eq!(
        roles,
        [
            ("ml-team".to_owned(), pb::Role::Editor as i32),
            ("shared-data".to_owned(), pb::Role::Viewer as i32)
        ]
    );
    let ns = g
        .identity
        .list_namespaces(pb::ListNamespacesRequest {
            page_size: 1,
            page_token: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ns.namespaces.len(), 1);
    let next = g
        .identity
        .list_namespaces(pb::ListNamespacesRequest {
            page_size: 1,
            page_token: ns.next_page_token,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(next.namespaces[0].namespace, "shared-data");
}
