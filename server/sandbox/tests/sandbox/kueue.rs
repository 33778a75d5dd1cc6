//! The simulated Kueue (v0.19.2) against kube-rs: a labelled RayCluster is
//! suspended and gets a Workload checked against Kueue's own CRD schema;
//! two ClusterQueues of one cohort lend each other idle quota; StrictFIFO
//! holds what is behind; reclaim within the cohort preempts the borrower;
//! the visibility API gives positions.

use krayne_sandbox::{Resource, kueue_schema};
use kube::{
    Api, Client,
    api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams},
};
use serde_json::{Value, json};

use super::{eventually, raw, raycluster, rayclusters, start};

fn kueue(client: &Client, ns: Option<&str>, kind: &str, plural: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", kind);
    let ar = ApiResource::from_gvk_with_plural(&gvk, plural);
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

fn object(v: Value) -> DynamicObject {
    serde_json::from_value(v).unwrap()
}

/// A flavor, two 4-GPU ClusterQueues in cohort `ml` (`team-a` borrows,
/// `reclaim` says whether `team-b` takes its quota back), a LocalQueue for
/// each in `ml`.
async fn queues(client: &Client, reclaim: &str) {
    kueue(client, None, "ResourceFlavor", "resourceflavors")
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": "gpu"}, "spec": {}})),
        )
        .await
        .unwrap();
    for (cq, strategy) in [("team-a", "BestEffortFIFO"), ("team-b", "StrictFIFO")] {
        let spec = json!({
            "cohortName": "ml",
            "queueingStrategy": strategy,
            "preemption": {"reclaimWithinCohort": reclaim},
            "resourceGroups": [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": [{
                "name": "gpu",
                "resources": [{"name": "cpu", "nominalQuota": "64"}, {"name": "memory", "nominalQuota": "256Gi"},
                              {"name": "nvidia.com/gpu", "nominalQuota": "4"}],
            }]}],
        });
        kueue(client, None, "ClusterQueue", "clusterqueues")
            .create(
                &PostParams::default(),
                &object(json!({"metadata": {"name": cq}, "spec": spec})),
            )
            .await
            .unwrap();
        kueue(client, Some("ml"), "LocalQueue", "localqueues")
            .create(
                &PostParams::default(),
                &object(json!({"metadata": {"name": cq}, "spec": {"clusterQueue": cq}})),
            )
            .await
            .unwrap();
    }
}

/// A RayCluster for LocalQueue `queue` whose worker asks for `gpus`.
async fn cluster(client: &Client, name: &str, queue: &str, gpus: u32) {
    let mut rc = raycluster(&format!(
        "name: {name}\nnamespace: ml\nworker_groups:\n  - name: gpu\n    replicas: 1\n    min_replicas: 1\n    max_replicas: 1\n    gpus: {gpus}\n"
    ));
    rc.metadata
        .labels
        .get_or_insert_default()
        .insert("kueue.x-k8s.io/queue-name".into(), queue.into());
    rayclusters(client, "ml")
        .create(&PostParams::default(), &rc)
        .await
        .unwrap();
}

/// `name`'s Workload, once `done` holds for it.
async fn workload(client: &Client, name: &str, done: impl Fn(&Value) -> bool) -> Value {
    let api = kueue(client, Some("ml"), "Workload", "workloads");
    eventually(&format!("the workload of {name}"), || async {
        let list = api.list(&ListParams::default()).await.ok()?;
        let w = list
            .items
            .into_iter()
            .find(|w| w.metadata.owner_references.as_ref().is_some_and(|o| o[0].name == name))?;
        let w = serde_json::to_value(w).ok()?;
        done(&w).then_some(w)
    })
    .await
}

fn condition<'a>(w: &'a Value, kind: &str) -> Option<&'a Value> {
    w["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == kind)
}

fn holds(w: &Value, kind: &str) -> bool {
    condition(w, kind).is_some_and(|c| c["status"] == "True")
}

async fn suspended(client: &Client, name: &str) -> bool {
    let rc = rayclusters(client, "ml").get(name).await.unwrap();
    rc.data["spec"]["suspend"] == true
}

#[tokio::test]
async fn a_cohort_lends_idle_quota_and_the_lender_waits_its_turn_with_its_place() {
    let (_sandbox, client) = start().await;
    queues(&client, "Never").await;
    // team-a borrows team-b's idle 4 GPUs.
    cluster(&client, "a1", "team-a", 4).await;
    cluster(&client, "a2", "team-a", 4).await;
    let a2 = workload(&client, "a2", |w| holds(w, "Admitted")).await;
    assert_eq!(a2["status"]["admission"]["clusterQueue"], "team-a");
    assert_eq!(a2["spec"]["queueName"], "team-a");
    assert!(
        a2["metadata"]["name"].as_str().unwrap().starts_with("raycluster-a2-"),
        "{a2}"
    );
    let pod_sets: Vec<&str> = a2["spec"]["podSets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(pod_sets, ["head", "gpu"]);
    eventually("a2 running", || async {
        (!suspended(&client, "a2").await).then_some(())
    })
    .await;

    // The lender's own workloads now wait: quota it lent is in use.
    cluster(&client, "b1", "team-b", 4).await;
    cluster(&client, "b2", "team-b", 1).await;
    let b1 = workload(&client, "b1", |w| condition(w, "QuotaReserved").is_some()).await;
    let reason = &condition(&b1, "QuotaReserved").unwrap()["message"];
    assert_eq!(
        reason,
        "couldn't assign flavors to pod set head: insufficient quota for nvidia.com/gpu in flavor gpu, 4 more needed"
    );
    assert!(suspended(&client, "b1").await);
    // StrictFIFO: b2 (1 GPU) would not fit either; it waits behind b1.
    let pending = raw(
        &client,
        "GET",
        "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/ml/localqueues/team-b/pendingworkloads",
        "application/json",
        "",
    )
    .await
    .unwrap();
    let places: Vec<(String, i64)> = pending["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["metadata"]["ownerReferences"][0]["name"].as_str().unwrap().to_owned(),
                i["positionInLocalQueue"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(places, [("b1".to_owned(), 0), ("b2".to_owned(), 1)], "{pending}");

    // The borrower ends: the lender is admitted in order.
    rayclusters(&client, "ml")
        .delete("a2", &DeleteParams::default())
        .await
        .unwrap();
    workload(&client, "b1", |w| holds(w, "Admitted")).await;
    eventually("b1 running", || async {
        (!suspended(&client, "b1").await).then_some(())
    })
    .await;

    // Every object the simulator wrote is valid under Kueue's own schema.
    for (kind, plural, r) in [
        ("Workload", "workloads", Resource::Workload),
        ("LocalQueue", "localqueues", Resource::LocalQueue),
    ] {
        let schema = kueue_schema(r, true).unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        for o in kueue(&client, Some("ml"), kind, plural)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
        {
            let v = serde_json::to_value(&o).unwrap();
            let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "{kind} {v}: {errors:?}");
        }
    }
}

#[tokio::test]
async fn reclaim_within_the_cohort_preempts_the_borrower() {
    let (_sandbox, client) = start().await;
    queues(&client, "Any").await;
    cluster(&client, "a1", "team-a", 4).await;
    cluster(&client, "a2", "team-a", 4).await;
    workload(&client, "a2", |w| holds(w, "Admitted")).await;
    cluster(&client, "b1", "team-b", 4).await;
    let a2 = workload(&client, "a2", |w| holds(w, "Evicted")).await;
    let evicted = condition(&a2, "Evicted").unwrap();
    assert_eq!(evicted["reason"], "Preempted");
    assert!(
        evicted["message"]
            .as_str()
            .unwrap()
            .contains("reclamation within the cohort"),
        "{a2}"
    );
    eventually("a2 suspended again", || async {
        suspended(&client, "a2").await.then_some(())
    })
    .await;
    workload(&client, "b1", |w| holds(w, "Admitted")).await;
    // The preempted one waits again, saying why.
    let a2 = workload(&client, "a2", |w| {
        condition(w, "QuotaReserved").is_some_and(|c| c["status"] == "False")
    })
    .await;
    assert!(a2["status"]["admission"].is_null());
}
