//! The simulated KubeRay operator, driven by manifests of the cluster model
//! and read back through the cluster model's status rules.

use k8s_openapi::api::core::v1::{Event, Pod};
use krayne_core::{
    domain::ClusterStatus,
    manifest::{ObservedCluster, ObservedPod, derive_status},
};
use krayne_sandbox::{FAULT_ANNOTATION, NodeCapacity, SandboxOptions};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;

use crate::{eventually, raycluster, rayclusters, start, start_with};

/// The cluster's status as krayne derives it from the sandbox's objects.
async fn krayne_status(client: &Client, ns: &str, name: &str) -> Option<ClusterStatus> {
    let rc = rayclusters(client, ns).get(name).await.ok()?;
    let cluster: ObservedCluster = serde_json::from_value(serde_json::to_value(&rc).ok()?).ok()?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let listed = pods
        .list(&ListParams::default().labels(&format!("ray.io/cluster={name}")))
        .await
        .ok()?;
    let observed: Vec<ObservedPod> = serde_json::from_value(serde_json::to_value(&listed.items).ok()?).ok()?;
    Some(derive_status(&cluster, Some(&observed.iter().collect::<Vec<_>>())))
}

async fn wait_status(client: &Client, ns: &str, name: &str, want: ClusterStatus) {
    eventually(&format!("{name} to be {want}"), || async {
        (krayne_status(client, ns, name).await == Some(want.clone())).then_some(())
    })
    .await;
}

async fn warnings(client: &Client, ns: &str, reason: &str) -> Vec<Event> {
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .collect()
}

#[tokio::test]
async fn a_cluster_becomes_ready_then_scales_and_goes() {
    let (_sb, client) = start().await;
    let rc = rayclusters(&client, "ml");
    let yaml = "name: life\nnamespace: ml\nworker_groups: [{name: cpu, replicas: 2, max_replicas: 5}]\n";
    rc.create(&PostParams::default(), &raycluster(yaml)).await.unwrap();
    wait_status(&client, "ml", "life", ClusterStatus::Ready).await;

    let ready = rc.get("life").await.unwrap();
    let status = &ready.data["status"];
    assert_eq!(status["state"], "ready");
    assert_eq!(
        (
            status["readyWorkerReplicas"].as_i64(),
            status["desiredWorkerReplicas"].as_i64()
        ),
        (Some(2), Some(2))
    );
    assert!(status["head"]["podIP"].is_string() && status["head"]["serviceIP"].is_string());
    assert_eq!(status["endpoints"]["dashboard"], "8265");
    assert_eq!(status["observedGeneration"], 1);
    let condition = |t: &str| {
        status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == t)
            .unwrap()["status"]
            .clone()
    };
    assert_eq!(
        (condition("HeadPodReady"), condition("RayClusterProvisioned")),
        (json!("True"), json!("True"))
    );
    let schema = krayne_sandbox::raycluster_schema(false).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let as_json = serde_json::to_value(&ready).unwrap();
    let errors: Vec<String> = validator.iter_errors(&as_json).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "status must satisfy the CRD: {errors:?}");

    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let workers = ListParams::default().labels("ray.io/cluster=life,ray.io/group=cpu");
    let scale = |n: i64| {
        json!({"spec": {"workerGroupSpecs": [{"groupName": "cpu", "replicas": n, "minReplicas": 0, "maxReplicas": 5,
        "rayStartParams": {}, "template": ready.data["spec"]["workerGroupSpecs"][0]["template"].clone()}]}})
    };
    rc.patch("life", &PatchParams::default(), &Patch::Merge(scale(4)))
        .await
        .unwrap();
    eventually("4 workers", || async {
        (pods.list(&workers).await.unwrap().items.len() == 4).then_some(())
    })
    .await;
    wait_status(&client, "ml", "life", ClusterStatus::Ready).await;
    eventually("4 ready workers", || async {
        (rc.get("life").await.unwrap().data["status"]["readyWorkerReplicas"] == 4).then_some(())
    })
    .await;
    rc.patch("life", &PatchParams::default(), &Patch::Merge(scale(1)))
        .await
        .unwrap();
    eventually("1 worker", || async {
        (pods.list(&workers).await.unwrap().items.len() == 1).then_some(())
    })
    .await;

    rc.patch(
        "life",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"suspend": true}})),
    )
    .await
    .unwrap();
    eventually("suspended", || async {
        let o = rc.get("life").await.unwrap();
        (o.data["status"]["state"] == "suspended"
            && pods
                .list(&ListParams::default().labels("ray.io/cluster=life"))
                .await
                .unwrap()
                .items
                .is_empty())
        .then_some(())
    })
    .await;
    wait_status(&client, "ml", "life", ClusterStatus::Suspended).await;

    rc.delete("life", &DeleteParams::default()).await.unwrap();
    assert!(
        pods.list(&ListParams::default().labels("ray.io/cluster=life"))
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

fn small_cluster() -> SandboxOptions {
    let mut o = SandboxOptions::fast();
    o.operator.nodes = vec![NodeCapacity::new("only-node", 8, "32Gi", 0)];
    o
}

#[tokio::test]
async fn over_capacity_pods_wait_unschedulable_until_room_frees() {
    let (_sb, client) = start_with(small_cluster()).await;
    let rc = rayclusters(&client, "ml");
    rc.create(
        &PostParams::default(),
        &raycluster("name: big\nnamespace: ml\nworker_groups: [{name: w, replicas: 1, cpus: 4, memory: 8Gi}]\n"),
    )
    .await
    .unwrap();
    wait_status(&client, "ml", "big", ClusterStatus::Ready).await;

    // 1 (head) + 4 uses 5 of 8 CPUs: a second 4-CPU worker does not fit.
    let spec = rc.get("big").await.unwrap().data["spec"]["workerGroupSpecs"].clone();
    let mut groups = spec;
    groups[0]["replicas"] = json!(3);
    rc.patch(
        "big",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"workerGroupSpecs": groups}})),
    )
    .await
    .unwrap();
    let failed = eventually("FailedScheduling", || async {
        let w = warnings(&client, "ml", "FailedScheduling").await;
        (!w.is_empty()).then_some(w)
    })
    .await;
    assert_eq!(failed[0].type_.as_deref(), Some("Warning"));
    assert!(
        failed[0].message.as_deref().unwrap().contains("Insufficient cpu"),
        "{:?}",
        failed[0].message
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let pending = pods
        .list(
            &ListParams::default()
                .fields("status.phase=Pending")
                .labels("ray.io/cluster=big"),
        )
        .await
        .unwrap()
        .items;
    assert_eq!(pending.len(), 2);
    let condition = &pending[0].status.as_ref().unwrap().conditions.as_ref().unwrap()[0];
    assert_eq!(
        (condition.type_.as_str(), condition.reason.as_deref()),
        ("PodScheduled", Some("Unschedulable"))
    );
    // Workers waiting for room do not make the cluster unhealthy (Krayne's rule).
    assert_eq!(krayne_status(&client, "ml", "big").await, Some(ClusterStatus::Ready));

    // A second cluster's head does not fit either: it is unschedulable…
    rc.create(
        &PostParams::default(),
        &raycluster("name: next\nnamespace: ml\nhead: {cpus: 4}\nworker_groups: []\n"),
    )
    .await
    .unwrap();
    wait_status(&client, "ml", "next", ClusterStatus::Unschedulable).await;
    // …until the first one goes and its capacity frees up.
    rc.delete("big", &DeleteParams::default()).await.unwrap();
    wait_status(&client, "ml", "next", ClusterStatus::Ready).await;
}

#[tokio::test]
async fn a_bad_image_ends_in_image_pull_back_off() {
    let (_sb, client) = start().await;
    let rc = rayclusters(&client, "ml");
    rc.create(
        &PostParams::default(),
        &raycluster("name: img\nnamespace: ml\nhead: {image: \"rayproject/ray:doesnotexist\"}\n"),
    )
    .await
    .unwrap();
    wait_status(&client, "ml", "img", ClusterStatus::ImagePullError).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let waiting = eventually("ImagePullBackOff", || async {
        let head = pods
            .list(&ListParams::default().labels("ray.io/cluster=img,ray.io/node-type=head"))
            .await
            .unwrap()
            .items
            .pop()?;
        let state = head.status?.container_statuses?.pop()?.state?.waiting?;
        (state.reason.as_deref() == Some("ImagePullBackOff")).then_some(state)
    })
    .await;
    assert!(waiting.message.unwrap().contains("doesnotexist"));
    assert!(!warnings(&client, "ml", "Failed").await.is_empty());
    assert!(!warnings(&client, "ml", "BackOff").await.is_empty());
}

#[tokio::test]
async fn the_fault_annotation_makes_pods_crash_loop() {
    let (_sb, client) = start().await;
    let rc = rayclusters(&client, "ml");
    let mut obj = raycluster("name: crashy\nnamespace: ml\n");
    obj.metadata.annotations = Some([(FAULT_ANNOTATION.to_owned(), "crash-loop".to_owned())].into());
    rc.create(&PostParams::default(), &obj).await.unwrap();
    wait_status(&client, "ml", "crashy", ClusterStatus::CrashLoop).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    eventually("restarts", || async {
        let head = pods
            .list(&ListParams::default().labels("ray.io/cluster=crashy,ray.io/node-type=head"))
            .await
            .unwrap()
            .items
            .pop()?;
        (head.status?.container_statuses?.first()?.restart_count >= 2).then_some(())
    })
    .await;
}
