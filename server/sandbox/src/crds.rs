//! `apiextensions.k8s.io/v1` CustomResourceDefinitions, read-only: the CRDs
//! of what the sandbox's operator serves (KubeRay's `rayclusters.ray.io`
//! and `rayjobs.ray.io`),
//! as an API server with KubeRay installed answers it — so that clients
//! that check for KubeRay before anything else (Krayne, kubectl-ray,
//! helm) accept the sandbox.

use std::sync::OnceLock;

use axum::{
    Json, Router,
    extract::Path,
    response::{IntoResponse as _, Response},
    routing::get,
};
use serde_json::{Value, json};

use super::ApiError;

const GROUP: &str = "apiextensions.k8s.io";

/// The routes, under `/apis/apiextensions.k8s.io`.
pub(super) fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/apis/apiextensions.k8s.io", get(|| async { Json(group_doc()) }))
        .route("/apis/apiextensions.k8s.io/v1", get(|| async { Json(resources()) }))
        .route("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", get(list))
        .route(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}",
            get(one),
        )
}

/// The group, as `/apis` lists it.
pub(super) fn group() -> Value {
    json!({
        "name": GROUP,
        "versions": [{"groupVersion": "apiextensions.k8s.io/v1", "version": "v1"}],
        "preferredVersion": {"groupVersion": "apiextensions.k8s.io/v1", "version": "v1"},
    })
}

fn group_doc() -> Value {
    let mut g = group();
    g["kind"] = json!("APIGroup");
    g["apiVersion"] = json!("v1");
    g
}

fn resources() -> Value {
    json!({
        "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "apiextensions.k8s.io/v1",
        "resources": [{
            "name": "customresourcedefinitions", "singularName": "customresourcedefinition",
            "namespaced": false, "kind": "CustomResourceDefinition", "shortNames": ["crd", "crds"],
            "verbs": ["get", "list"],
        }],
    })
}

async fn list() -> Response {
    match crds() {
        Ok(crds) => Json(json!({
            "kind": "CustomResourceDefinitionList", "apiVersion": "apiextensions.k8s.io/v1",
            "metadata": {"resourceVersion": "1"}, "items": crds,
        }))
        .into_response(),
        Err(e) => e.into_response(),
    }
}

async fn one(Path(name): Path<String>) -> Response {
    match crds() {
        Ok(crds) => match crds.iter().find(|crd| crd["metadata"]["name"] == name.as_str()) {
            Some(crd) => Json(crd.clone()).into_response(),
            None => ApiError::not_found_named("customresourcedefinitions", GROUP, &name).into_response(),
        },
        Err(e) => e.into_response(),
    }
}

/// KubeRay's RayCluster and RayJob CRDs as the API server stores them: with
/// the metadata it adds, and established.
fn crds() -> Result<&'static [Value], ApiError> {
    static CRDS: OnceLock<Result<Vec<Value>, String>> = OnceLock::new();
    CRDS.get_or_init(|| {
        [
            (super::validate::RAYCLUSTER_CRD, "6f1c0c8e-1d2b-4c3a-9e4f-5a6b7c8d9e0f"),
            (super::validate::RAYJOB_CRD, "0b7d5e2a-3c4f-4a1b-8d6e-7f8091a2b3c4"),
        ]
        .into_iter()
        .map(|(text, uid)| established(text, uid))
        .collect()
    })
    .as_deref()
    .map_err(|e| ApiError::internal(format!("KubeRay's CRDs cannot be read: {e}")))
}

fn established(text: &str, uid: &str) -> Result<Value, String> {
    let mut crd: Value = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
    let names = crd["spec"]["names"].clone();
    let versions: Vec<Value> = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["storage"] == true)
        .map(|v| v["name"].clone())
        .collect();
    crd["metadata"]["uid"] = json!(uid);
    crd["metadata"]["resourceVersion"] = json!("1");
    crd["metadata"]["generation"] = json!(1);
    crd["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
    crd["status"] = json!({
        "acceptedNames": names,
        "storedVersions": versions,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        ],
    });
    Ok(crd)
}

#[cfg(test)]
mod tests {
    #[test]
    fn kuberays_crds_are_established_under_their_names() {
        let crds = super::crds().unwrap();
        let names: Vec<_> = crds.iter().map(|c| c["metadata"]["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["rayclusters.ray.io", "rayjobs.ray.io"]);
        assert_eq!(crds[1]["status"]["acceptedNames"]["kind"], "RayJob");
        for crd in crds {
            assert_eq!(crd["status"]["storedVersions"], serde_json::json!(["v1"]));
            assert_eq!(crd["status"]["conditions"][1]["type"], "Established");
        }
    }
}
