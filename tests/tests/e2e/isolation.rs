//! Tenant isolation on every route and RPC: a team's token gets 403 on
//! another team's namespace, and never sees that team's clusters in a
//! list, an audit query or an error message.

use futures::StreamExt as _;
use krayne_proto::v1::{self as pb, create_cluster_request::Source};
use krayne_tests::{Env, EnvOptions, Grpc, Rest};
use reqwest::Method;
use serde_json::{Value, json};

const TEAMS: &str = r#"
admins: { groups: [platform-admins], subjects: [] }
teams:
  - name: ml-research
    members: { groups: [ml-research] }
    namespaces: { ml-team: admin, "shared-*": viewer }
  - name: other
    members: { groups: [other-team] }
    namespaces: { other-team: admin }
"#;

/// One team's view: its token, and the other team's namespace and cluster.
struct Probe {
    token: String,
    foreign_ns: &'static str,
    foreign_cluster: &'static str,
}

fn assert_hidden(what: &str, text: &str, cluster: &str) {
    assert!(!text.contains(cluster), "{what} reveals {cluster}: {text}");
}

async fn probe_rest(env: &Env, p: &Probe) {
    let rest = Rest::new(&env.url(), Some(p.token.clone()));
    let (ns, c) = (p.foreign_ns, p.foreign_cluster);
    let base = format!("/v1/namespaces/{ns}/clusters");
    let scale = json!({"worker_group": "worker", "replicas": 3});
    let mut forbidden: Vec<(Method, String, Option<Value>)> = vec![
        (Method::GET, base.clone(), None),
        (Method::POST, base.clone(), Some(json!({"name": "intruder"}))),
        (Method::GET, format!("/v1/audit?namespace={ns}"), None),
    ];
    // An existing cluster and a missing one get the same answer: no
    // existence oracle.
    for name in [c, "no-such-cluster"] {
        forbidden.extend([
            (Method::GET, format!("{base}/{name}"), None),
            (Method::DELETE, format!("{base}/{name}"), None),
            (Method::GET, format!("{base}/{name}/details"), None),
            (Method::POST, format!("{base}/{name}/scale"), Some(scale.clone())),
            (Method::POST, format!("{base}/{name}/suspend"), None),
            (Method::POST, format!("{base}/{name}/resume"), None),
            (Method::POST, format!("{base}/{name}/keep"), Some(json!({"for": "1h"}))),
            (Method::GET, format!("{base}/{name}/wait?timeout_seconds=1"), None),
        ]);
    }
    for (method, path, body) in forbidden {
        let bytes = body.map(|b| serde_json::to_vec(&b).unwrap());
        let reply = rest
            .send(method.clone(), &path, Some("application/json"), bytes)
            .await
            .problem(403, "permission_denied");
        assert_hidden(&format!("{method} {path}"), &reply.text, c);
    }
    // A namespace in the body cannot smuggle a create past the URL's.
    let own = if ns == "ml-team" { "other-team" } else { "ml-team" };
    let reply = rest
        .post(
            &format!("/v1/namespaces/{own}/clusters"),
            &json!({"name": "smuggled", "namespace": ns}),
        )
        .await
        .problem(400, "invalid_argument");
    assert_hidden("create with a foreign namespace in the body", &reply.text, c);

    for path in ["/v1/clusters", "/v1/namespaces", "/v1/whoami"] {
        let reply = rest.get(path).await.expect(200);
        assert_hidden(path, &reply.text, c);
        assert!(
            !reply.text.contains(&format!("\"{ns}\"")),
            "{path} names {ns}: {}",
            reply.text
        );
    }
    // A namespace admin's audit view: their namespace's rows only (which
    // may show the other team's attempts on it, but not its clusters).
    for path in ["/v1/audit".to_owned(), format!("/v1/audit?cluster={c}")] {
        let reply = rest.get(&path).await.expect(200);
        assert_hidden(&path, &reply.text, c);
        let events = reply.body["events"].as_array().unwrap();
        assert!(events.iter().all(|e| e["namespace"] != ns), "{path}: {}", reply.text);
    }
}

async fn probe_grpc(env: &Env, p: &Probe) {
    let mut g: Grpc = env.grpc(&p.token).await;
    let (ns, c) = (p.foreign_ns.to_owned(), p.foreign_cluster.to_owned());
    let denied = |what: &str, status: tonic::Status| {
        assert_eq!(status.code(), tonic::Code::PermissionDenied, "{what}: {status:?}");
        assert_hidden(what, status.message(), &c);
    };
    let create = g
        .clusters
        .create_cluster(pb::CreateClusterRequest {
            source: Some(Source::ConfigYaml(format!("name: intruder\nnamespace: {ns}\n"))),
            dry_run: false,
            field_validation: 0,
            queue: None,
        })
        .await;
    denied("CreateCluster", create.unwrap_err());
    for name in [c.as_str(), "no-such-cluster"] {
        let get = pb::GetClusterRequest {
            namespace: ns.clone(),
            name: name.into(),
        };
        denied("GetCluster", g.clusters.get_cluster(get).await.unwrap_err());
        let describe = pb::DescribeClusterRequest {
            namespace: ns.clone(),
            name: name.into(),
        };
        denied(
            "DescribeCluster",
            g.clusters.describe_cluster(describe).await.unwrap_err(),
        );
        let delete = pb::DeleteClusterRequest {
            namespace: ns.clone(),
            name: name.into(),
        };
        denied("DeleteCluster", g.clusters.delete_cluster(delete).await.unwrap_err());
        let scale = pb::ScaleClusterRequest {
            namespace: ns.clone(),
            name: name.into(),
            worker_group: "worker".into(),
            replicas: Some(3),
            ..Default::default()
        };
        denied("ScaleCluster", g.clusters.scale_cluster(scale).await.unwrap_err());
        let suspend = pb::SuspendClusterRequest {
            namespace: ns.clone(),
            name: name.into(),
        };
        denied("SuspendCluster", g.clusters.suspend_cluster(suspend).await.unwrap_err());
        let resume = pb::ResumeClusterRequest {
            namespace: ns.clone(),
            name: name.into(),
            queue: None,
        };
        denied("ResumeCluster", g.clusters.resume_cluster(resume).await.unwrap_err());
        let keep = pb::KeepClusterRequest {
            namespace: ns.clone(),
            name: name.into(),
            keep: Some(pb::keep_cluster_request::Keep::For("1h".into())),
        };
        denied("KeepCluster", g.clusters.keep_cluster(keep).await.unwrap_err());
        let wait = pb::WaitClusterRequest {
            namespace: ns.clone(),
            name: name.into(),
            timeout_seconds: 1,
        };
        match g.clusters.wait_cluster(wait).await {
            Err(status) => denied("WaitCluster", status),
            Ok(stream) => {
                let first = stream.into_inner().next().await.expect("an answer");
                denied("WaitCluster", first.unwrap_err());
            }
        }
    }
    let list = pb::ListClustersRequest {
        namespace: ns.clone(),
        ..Default::default()
    };
    denied("ListClusters", g.clusters.list_clusters(list).await.unwrap_err());
    let audit = pb::ListAuditEventsRequest {
        namespace: ns.clone(),
        ..Default::default()
    };
    denied("ListAuditEvents", g.audit.list_audit_events(audit).await.unwrap_err());

    let all = g
        .clusters
        .list_clusters(pb::ListClustersRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(all.clusters.iter().all(|x| x.namespace != ns), "{all:?}");
    let events = g
        .audit
        .list_audit_events(pb::ListAuditEventsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .events;
    assert!(!events.is_empty(), "a namespace admin sees their own rows");
    assert!(
        events
            .iter()
            .all(|e| e.namespace.as_deref() != Some(ns.as_str()) && e.cluster.as_deref() != Some(c.as_str())),
        "{events:?}"
    );
    let by_cluster = pb::ListAuditEventsRequest {
        cluster: c.clone(),
        ..Default::default()
    };
    let events = g.audit.list_audit_events(by_cluster).await.unwrap().into_inner().events;
    assert!(events.is_empty(), "{events:?}");
    let namespaces = g
        .identity
        .list_namespaces(pb::ListNamespacesRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(namespaces.namespaces.iter().all(|n| n.namespace != ns));
}

#[tokio::test]
async fn teams_cannot_reach_or_see_each_others_clusters() {
    let env = Env::start_with(EnvOptions {
        teams: TEAMS.to_owned(),
        ..EnvOptions::default()
    })
    .await;
    let alice = env.token("alice@example.com", &["ml-research"]);
    let olga = env.token("olga@example.com", &["other-team"]);
    let a = env.rest(&alice);
    let b = env.rest(&olga);
    a.post("/v1/namespaces/ml-team/clusters", &json!({"name": "alpha-secret"}))
        .await
        .expect(201);
    a.post(
        "/v1/namespaces/ml-team/clusters/alpha-secret/scale",
        &json!({"worker_group": "worker", "replicas": 2}),
    )
    .await
    .expect(200);
    b.post("/v1/namespaces/other-team/clusters", &json!({"name": "beta-secret"}))
        .await
        .expect(201);
    // Audit rows on both sides (a success and a refusal each).
    b.post("/v1/namespaces/other-team/clusters", &json!({"name": "Bad Name"}))
        .await
        .expect(400);
    a.post("/v1/namespaces/ml-team/clusters", &json!({"name": "Bad Name"}))
        .await
        .expect(400);

    let probes = [
        Probe {
            token: olga.clone(),
            foreign_ns: "ml-team",
            foreign_cluster: "alpha-secret",
        },
        Probe {
            token: alice.clone(),
            foreign_ns: "other-team",
            foreign_cluster: "beta-secret",
        },
    ];
    for p in &probes {
        probe_rest(&env, p).await;
        probe_grpc(&env, p).await;
    }

    // Nothing the intruders tried changed anything.
    let alpha = a.get("/v1/namespaces/ml-team/clusters/alpha-secret").await.expect(200);
    assert_eq!(alpha.body["num_workers"], 2);
    b.get("/v1/namespaces/other-team/clusters/beta-secret")
        .await
        .expect(200);
    let admin = env.rest(&env.admin());
    let listed = admin.get("/v1/clusters").await.expect(200);
    assert_eq!(listed.names(), ["alpha-secret", "beta-secret"]);
}
