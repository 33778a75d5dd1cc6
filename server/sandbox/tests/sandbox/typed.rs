//! A typed `RayCluster` (kube's `CustomResource`) against the sandbox.

use kube::{
    Api, CustomResource,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::{eventually, raycluster, start};

/// `ray.io/v1` RayCluster: the parts the test reads typed, the rest kept.
#[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "ray.io",
    version = "v1",
    kind = "RayCluster",
    plural = "rayclusters",
    namespaced,
    status = "RayClusterStatus"
)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RayClusterSpec {
    /// Worker groups.
    #[serde(default)]
    pub worker_group_specs: Vec<WorkerGroup>,
    /// Everything else, kept as it is.
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

/// A worker group: name and replicas typed.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WorkerGroup {
    /// Group name.
    pub group_name: String,
    /// Desired workers.
    pub replicas: i32,
    /// Everything else.
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

/// The status fields the test reads.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RayClusterStatus {
    /// `ready`, `suspended`, …
    pub state: Option<String>,
    /// Ready workers.
    pub ready_worker_replicas: Option<i32>,
}

#[tokio::test]
async fn typed_rayclusters_round_trip_through_every_verb() {
    let (_sb, client) = start().await;
    let api: Api<RayCluster> = Api::namespaced(client.clone(), "ml");
    let manifest = serde_json::to_value(raycluster(
        "name: typed\nnamespace: ml\nworker_groups: [{replicas: 1}]\n",
    ))
    .unwrap();
    let cluster: RayCluster = serde_json::from_value(manifest).unwrap();
    let created = api.create(&PostParams::default(), &cluster).await.unwrap();
    assert_eq!(created.spec.worker_group_specs[0].replicas, 1);
    assert!(
        created.spec.rest.contains_key("headGroupSpec"),
        "untyped fields survive"
    );

    let ready = eventually("ready", || async {
        let c = api.get_status("typed").await.unwrap();
        (c.status.as_ref()?.state.as_deref() == Some("ready")).then_some(c)
    })
    .await;
    assert_eq!(ready.status.unwrap().ready_worker_replicas, Some(1));

    let mut next = api.get("typed").await.unwrap();
    next.spec.worker_group_specs[0].replicas = 2;
    let replaced = api.replace("typed", &PostParams::default(), &next).await.unwrap();
    assert_eq!(replaced.spec.worker_group_specs[0].replicas, 2);
    assert_eq!(replaced.metadata.generation, Some(2));

    let patched = api
        .patch(
            "typed",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"t": "1"}}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.metadata.labels.unwrap()["t"], "1");
    assert_eq!(api.list(&ListParams::default()).await.unwrap().items.len(), 1);
    api.delete("typed", &DeleteParams::default()).await.unwrap();
    assert!(api.list(&ListParams::default()).await.unwrap().items.is_empty());
}
