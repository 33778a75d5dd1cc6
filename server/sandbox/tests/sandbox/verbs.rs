//! Every verb krayne needs, through kube-rs.

use k8s_openapi::api::core::v1::{Event, Namespace, Pod, Service};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::{api_error, eventually, raycluster, rayclusters, start};

#[tokio::test]
async fn discovery_and_version() {
    let (sb, client) = start().await;
    assert!(sb.addr().ip().is_loopback(), "the sandbox must listen on loopback only");
    let version = client.apiserver_version().await.unwrap();
    assert_eq!((version.major.as_str(), version.minor.as_str()), ("1", "33"));
    let groups = client.list_api_groups().await.unwrap();
    assert!(groups.groups.iter().any(|g| g.name == "ray.io"));
    let core = client.list_core_api_resources("v1").await.unwrap();
    let names: Vec<&str> = core.resources.iter().map(|r| r.name.as_str()).collect();
    for want in ["namespaces", "pods", "services", "events"] {
        assert!(names.contains(&want), "{names:?}");
    }
    let ray = client.list_api_group_resources("ray.io/v1").await.unwrap();
    assert!(ray.resources.iter().any(|r| r.name == "rayclusters/status"));
}

/// Every namespace's name, in the list's order.
async fn namespace_names(namespaces: &kube::Api<Namespace>) -> Vec<String> {
    let list = namespaces.list(&ListParams::default()).await.unwrap();
    list.items.into_iter().filter_map(|n| n.metadata.name).collect()
}

#[tokio::test]
async fn namespaces_create_get_list_delete_cascades() {
    let (_sb, client) = start().await;
    let namespaces: kube::Api<Namespace> = kube::Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "team-a"}})).unwrap();
    namespaces.create(&PostParams::default(), &ns).await.unwrap();
    let got = namespaces.get("team-a").await.unwrap();
    assert!(got.metadata.uid.is_some() && got.metadata.creation_timestamp.is_some());
    assert_eq!(namespace_names(&namespaces).await, ["default", "ml", "team-a"]);

    let rc = rayclusters(&client, "team-a");
    rc.create(&PostParams::default(), &raycluster("name: doomed\nnamespace: team-a\n"))
        .await
        .unwrap();
    let pods: kube::Api<Pod> = kube::Api::namespaced(client.clone(), "team-a");
    eventually("pods", || async {
        (!pods.list(&ListParams::default()).await.unwrap().items.is_empty()).then_some(())
    })
    .await;

    namespaces.delete("team-a", &DeleteParams::default()).await.unwrap();
    let (reason, code, _) = api_error(namespaces.get("team-a").await.unwrap_err());
    assert_eq!((reason.as_str(), code), ("NotFound", 404));
    assert!(rc.list(&ListParams::default()).await.unwrap().items.is_empty());
    assert!(pods.list(&ListParams::default()).await.unwrap().items.is_empty());
}

#[tokio::test]
async fn rayclusters_crud_with_metadata_semantics() {
    let (_sb, client) = start().await;
    let rc = rayclusters(&client, "ml");
    let created = rc
        .create(&PostParams::default(), &raycluster("name: c1\nnamespace: ml\n"))
        .await
        .unwrap();
    let meta = &created.metadata;
    assert_eq!(meta.generation, Some(1));
    assert!(meta.uid.is_some() && meta.creation_timestamp.is_some());
    let rv1: u64 = meta.resource_version.as_deref().unwrap().parse().unwrap();

    let got = rc.get("c1").await.unwrap();
    assert_eq!(got.metadata.uid, meta.uid);

    rayclusters(&client, "default")
        .create(&PostParams::default(), &raycluster("name: c2\n"))
        .await
        .unwrap();
    let all = crate::all_rayclusters(&client);
    let names: Vec<String> = all
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect();
    assert!(
        names.contains(&"c1".to_owned()) && names.contains(&"c2".to_owned()),
        "{names:?}"
    );
    assert_eq!(rc.list(&ListParams::default()).await.unwrap().items.len(), 1);

    // Merge patch of the spec bumps generation and resourceVersion.
    let patch = json!({"spec": {"workerGroupSpecs": [{"groupName": "worker", "replicas": 2, "minReplicas": 0, "maxReplicas": 2,
        "rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.43.0-py312"}]}}}]}});
    let patched = rc
        .patch("c1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(patched.metadata.generation, Some(2));
    let rv2: u64 = patched.metadata.resource_version.as_deref().unwrap().parse().unwrap();
    assert!(rv2 > rv1, "resourceVersion must grow: {rv1} → {rv2}");
    assert_eq!(patched.data["spec"]["workerGroupSpecs"][0]["replicas"], 2);

    // Labels only: generation stays.
    let labelled = rc
        .patch(
            "c1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(labelled.metadata.generation, Some(2));

    // JSON patch (RFC 6902) works too.
    let ops = r#"[{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 1}]"#;
    let uri = "/apis/ray.io/v1/namespaces/ml/rayclusters/c1";
    let jp = crate::raw(&client, "PATCH", uri, "application/json-patch+json", ops)
        .await
        .unwrap();
    assert_eq!(jp["spec"]["workerGroupSpecs"][0]["replicas"], 1);

    rc.delete("c1", &DeleteParams::default()).await.unwrap();
    let (reason, ..) = api_error(rc.get("c1").await.unwrap_err());
    assert_eq!(reason, "NotFound");
}

#[tokio::test]
async fn replace_with_a_stale_resource_version_conflicts() {
    let (_sb, client) = start().await;
    let rc = rayclusters(&client, "ml");
    let created = rc
        .create(&PostParams::default(), &raycluster("name: c\nnamespace: ml\n"))
        .await
        .unwrap();
    let mut stale = created.clone();
    rc.patch(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
    )
    .await
    .unwrap();
    stale.data["spec"]["workerGroupSpecs"][0]["replicas"] = json!(3);
    let (reason, code, _) = api_error(rc.replace("c", &PostParams::default(), &stale).await.unwrap_err());
    assert_eq!((reason.as_str(), code), ("Conflict", 409));

    let mut fresh = rc.get("c").await.unwrap();
    fresh.data["spec"]["workerGroupSpecs"][0]["replicas"] = json!(3);
    let replaced = rc.replace("c", &PostParams::default(), &fresh).await.unwrap();
    assert_eq!(replaced.data["spec"]["workerGroupSpecs"][0]["replicas"], 3);

    // A merge patch carrying a stale resourceVersion conflicts as well.
    let rv = created.metadata.resource_version.clone().unwrap();
    let p = json!({"metadata": {"resourceVersion": rv}, "spec": {"suspend": true}});
    let (reason, ..) = api_error(
        rc.patch("c", &PatchParams::default(), &Patch::Merge(&p))
            .await
            .unwrap_err(),
    );
    assert_eq!(reason, "Conflict");
}

#[tokio::test]
async fn status_is_a_subresource() {
    let (_sb, client) = start_paused().await;
    let rc = rayclusters(&client, "ml");
    let mut obj = raycluster("name: s\nnamespace: ml\n");
    obj.data["status"] = json!({"state": "ready"});
    let created = rc.create(&PostParams::default(), &obj).await.unwrap();
    assert!(created.data.get("status").is_none(), "create ignores status");

    let after = rc
        .patch_status(
            "s",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"state": "custom"}})),
        )
        .await
        .unwrap();
    assert_eq!(after.data["status"]["state"], "custom");
    assert_eq!(after.metadata.generation, Some(1), "status writes keep generation");

    // A main-resource write cannot change status, and a status write cannot change spec.
    let p = json!({"status": {"state": "hacked"}, "spec": {"suspend": true}});
    let main = rc.patch("s", &PatchParams::default(), &Patch::Merge(&p)).await.unwrap();
    assert_eq!(main.data["status"]["state"], "custom");
    assert_eq!(main.data["spec"]["suspend"], true);
    let p = json!({"status": {"state": "again"}, "spec": {"suspend": false}});
    let st = rc
        .patch_status("s", &PatchParams::default(), &Patch::Merge(&p))
        .await
        .unwrap();
    assert_eq!(
        (
            st.data["status"]["state"].as_str(),
            st.data["spec"]["suspend"].as_bool()
        ),
        (Some("again"), Some(true))
    );

    let mut whole = rc.get_status("s").await.unwrap();
    whole.data["status"] = json!({"state": "replaced"});
    let replaced = rc.replace_status("s", &PostParams::default(), &whole).await.unwrap();
    assert_eq!(replaced.data["status"]["state"], "replaced");
}

/// A sandbox without the operator, for tests of API semantics that must
/// see only their own writes.
async fn start_paused() -> (krayne_sandbox::Sandbox, kube::Client) {
    let options = krayne_sandbox::SandboxOptions {
        run_operator: false,
        ..krayne_sandbox::SandboxOptions::fast()
    };
    crate::start_with(options).await
}

#[tokio::test]
async fn pods_services_and_events_with_selectors() {
    let (_sb, client) = start().await;
    let rc = rayclusters(&client, "ml");
    rc.create(
        &PostParams::default(),
        &raycluster("name: sel\nnamespace: ml\nworker_groups: [{name: w, replicas: 2}]\n"),
    )
    .await
    .unwrap();
    let pods: kube::Api<Pod> = kube::Api::namespaced(client.clone(), "ml");
    let head_sel = ListParams::default().labels("ray.io/cluster=sel,ray.io/node-type=head");
    let head = eventually("head pod", || async {
        pods.list(&head_sel).await.unwrap().items.into_iter().next()
    })
    .await;
    let head_name = head.metadata.name.clone().unwrap();
    assert!(head_name.starts_with("sel-head-"), "{head_name}");
    let owner = &head.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("RayCluster", "sel"));
    let workers = eventually("2 workers", || async {
        let l = pods
            .list(&ListParams::default().labels("ray.io/node-type in (worker),ray.io/group=w"))
            .await
            .unwrap();
        (l.items.len() == 2).then_some(l.items)
    })
    .await;
    assert!(
        workers
            .iter()
            .all(|p| { p.metadata.name.as_deref().unwrap().starts_with("sel-w-worker-") })
    );
    let by_name = pods
        .list(&ListParams::default().fields(&format!("metadata.name={head_name}")))
        .await
        .unwrap();
    assert_eq!(by_name.items.len(), 1);
    let not_head = pods
        .list(&ListParams::default().labels("ray.io/cluster=sel,ray.io/node-type!=head"))
        .await
        .unwrap();
    assert_eq!(not_head.items.len(), 2);
    assert!(
        pods.list(&ListParams::default().labels("!ray.io/cluster"))
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert_eq!(
        pods.list(&ListParams::default().labels("ray.io/is-ray-node"))
            .await
            .unwrap()
            .items
            .len(),
        3
    );

    let services: kube::Api<Service> = kube::Api::namespaced(client.clone(), "ml");
    let svc = services.get("sel-head-svc").await.unwrap();
    let ports: Vec<String> = svc
        .spec
        .unwrap()
        .ports
        .unwrap()
        .into_iter()
        .filter_map(|p| p.name)
        .collect();
    for want in ["gcs-server", "dashboard", "client", "notebook", "ssh", "code-server"] {
        assert!(ports.contains(&want.to_owned()), "{ports:?}");
    }

    let events: kube::Api<Event> = kube::Api::namespaced(client.clone(), "ml");
    let about_head = ListParams::default().fields(&format!("involvedObject.name={head_name}"));
    let evs = eventually("events about the head", || async {
        let l = events.list(&about_head).await.unwrap();
        (l.items.iter().any(|e| e.reason.as_deref() == Some("Started"))).then_some(l.items)
    })
    .await;
    assert!(evs.iter().any(|e| e.reason.as_deref() == Some("Scheduled")));
    let all_events: kube::Api<Event> = kube::Api::all(client.clone());
    assert!(!all_events.list(&ListParams::default()).await.unwrap().items.is_empty());
}

#[tokio::test]
async fn dry_run_creates_nothing() {
    let (_sb, client) = start().await;
    let rc = rayclusters(&client, "ml");
    let answer = rc
        .create(
            &PostParams {
                dry_run: true,
                ..PostParams::default()
            },
            &raycluster("name: dry\nnamespace: ml\n"),
        )
        .await
        .unwrap();
    assert_eq!(answer.metadata.name.as_deref(), Some("dry"));
    let (reason, ..) = api_error(rc.get("dry").await.unwrap_err());
    assert_eq!(reason, "NotFound");
}

#[tokio::test]
async fn deleting_a_cluster_cascades_to_pods_and_service() {
    let (_sb, client) = start().await;
    let rc = rayclusters(&client, "ml");
    rc.create(
        &PostParams::default(),
        &raycluster("name: gone\nnamespace: ml\nworker_groups: [{replicas: 1}]\n"),
    )
    .await
    .unwrap();
    let pods: kube::Api<Pod> = kube::Api::namespaced(client.clone(), "ml");
    let sel = ListParams::default().labels("ray.io/cluster=gone");
    eventually("2 pods", || async {
        (pods.list(&sel).await.unwrap().items.len() == 2).then_some(())
    })
    .await;
    rc.delete("gone", &DeleteParams::default()).await.unwrap();
    assert!(pods.list(&sel).await.unwrap().items.is_empty());
    let services: kube::Api<Service> = kube::Api::namespaced(client.clone(), "ml");
    let (reason, ..) = api_error(services.get("gone-head-svc").await.unwrap_err());
    assert_eq!(reason, "NotFound");
}

#[tokio::test]
async fn lists_page_with_limit_and_continue_at_the_first_pages_version() {
    let (_sb, client) = start().await;
    let namespaces: kube::Api<Namespace> = kube::Api::all(client.clone());
    for i in 0..5 {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": format!("page-{i}")}})).unwrap();
        namespaces.create(&PostParams::default(), &ns).await.unwrap();
    }
    let whole = namespace_names(&namespaces).await;
    assert_eq!(whole.len(), 7, "{whole:?}");

    let first = namespaces.list(&ListParams::default().limit(3)).await.unwrap();
    let version = first.metadata.resource_version.clone().unwrap();
    let mut token = first.metadata.continue_.clone().expect("a continue token");
    let mut paged: Vec<String> = first.items.into_iter().filter_map(|n| n.metadata.name).collect();
    assert_eq!(paged.len(), 3);
    // A change between pages: it is after the first page's version.
    let late: Namespace = serde_json::from_value(json!({"metadata": {"name": "zz-late"}})).unwrap();
    namespaces.create(&PostParams::default(), &late).await.unwrap();
    loop {
        let page = namespaces
            .list(&ListParams::default().limit(3).continue_token(&token))
            .await
            .unwrap();
        assert_eq!(page.metadata.resource_version.as_deref(), Some(version.as_str()));
        paged.extend(page.items.into_iter().filter_map(|n| n.metadata.name));
        match page.metadata.continue_.filter(|t| !t.is_empty()) {
            Some(next) => token = next,
            None => break,
        }
    }
    let mut expected = whole;
    expected.push("zz-late".into());
    assert_eq!(paged, expected, "every object once, in order");

    let bad = namespaces
        .list(&ListParams::default().limit(3).continue_token("nonsense"))
        .await
        .unwrap_err();
    assert_eq!(api_error(bad).1, 400);
}
