//! What the API server checks before storing an object: names, and for
//! KubeRay's RayClusters and RayJobs their CRD's schema (types, required
//! fields, enums).

use std::sync::OnceLock;

use serde_json::{Value, json};

use super::{ApiError, Resource};
use crate::domain::{MAX_CLUSTER_NAME_LEN, check_dns1035_label, check_dns1123_label, check_dns1123_subdomain};

/// KubeRay v1.7.0's `rayclusters.ray.io` CRD.
pub(super) const RAYCLUSTER_CRD: &str = include_str!("../../../testdata/kuberay/ray.io_rayclusters.yaml");
/// KubeRay v1.7.0's `rayjobs.ray.io` CRD.
pub(super) const RAYJOB_CRD: &str = include_str!("../../../testdata/kuberay/ray.io_rayjobs.yaml");
/// Kueue v0.19.2's CRDs (`v1beta2`): ResourceFlavor, ClusterQueue,
/// LocalQueue, Workload.
pub(super) const KUEUE_CRDS: [(Resource, &str); 4] = [
    (
        Resource::ResourceFlavor,
        include_str!("../../../testdata/kueue/kueue.x-k8s.io_resourceflavors.yaml"),
    ),
    (
        Resource::ClusterQueue,
        include_str!("../../../testdata/kueue/kueue.x-k8s.io_clusterqueues.yaml"),
    ),
    (
        Resource::LocalQueue,
        include_str!("../../../testdata/kueue/kueue.x-k8s.io_localqueues.yaml"),
    ),
    (
        Resource::Workload,
        include_str!("../../../testdata/kueue/kueue.x-k8s.io_workloads.yaml"),
    ),
];

/// The RayCluster CRD's `v1` `openAPIV3Schema` as a JSON Schema. With
/// `strict`, objects with declared properties also reject unknown ones (the
/// API server would prune them instead, which hides a misspelt field from
/// tests).
pub fn raycluster_schema(strict: bool) -> Result<Value, String> {
    crd_schema(RAYCLUSTER_CRD, "v1", strict)
}

/// The RayJob CRD's `v1` schema, as [`raycluster_schema`] gives the
/// RayCluster's.
pub fn rayjob_schema(strict: bool) -> Result<Value, String> {
    crd_schema(RAYJOB_CRD, "v1", strict)
}

/// The `v1beta2` schema of Kueue's CRD for `r` (a ResourceFlavor,
/// ClusterQueue, LocalQueue or Workload), as [`raycluster_schema`] gives
/// the RayCluster's.
pub fn kueue_schema(r: Resource, strict: bool) -> Result<Value, String> {
    let (_, crd) = KUEUE_CRDS
        .iter()
        .find(|(of, _)| *of == r)
        .ok_or_else(|| format!("{} is not Kueue's", r.kind()))?;
    crd_schema(crd, "v1beta2", strict)
}

fn crd_schema(crd: &str, version: &str, strict: bool) -> Result<Value, String> {
    let crd: Value = serde_saphyr::from_str(crd).map_err(|e| e.to_string())?;
    let mut schema = crd["spec"]["versions"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["name"] == version))
        .map(|v| v["schema"]["openAPIV3Schema"].clone())
        .ok_or_else(|| format!("the CRD has no {version} schema"))?;
    to_json_schema(&mut schema, strict);
    Ok(schema)
}

/// OpenAPI's `nullable: true` becomes a null-allowing JSON Schema type.
fn to_json_schema(schema: &mut Value, strict: bool) {
    let Some(node) = schema.as_object_mut() else {
        return;
    };
    if node.get("nullable") == Some(&Value::Bool(true)) {
        node.remove("nullable");
        if let Some(Value::String(t)) = node.get("type").cloned() {
            node.insert("type".into(), json!([t, "null"]));
        }
    }
    let preserves = node.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    if strict && node.contains_key("properties") && !node.contains_key("additionalProperties") && !preserves {
        node.insert("additionalProperties".into(), Value::Bool(false));
    }
    if let Some(Value::Object(props)) = node.get_mut("properties") {
        props.values_mut().for_each(|p| to_json_schema(p, strict));
    }
    for key in ["items", "additionalProperties"] {
        if let Some(sub) = node.get_mut(key) {
            to_json_schema(sub, strict);
        }
    }
    for key in ["anyOf", "allOf", "oneOf"] {
        if let Some(Value::Array(subs)) = node.get_mut(key) {
            subs.iter_mut().for_each(|s| to_json_schema(s, strict));
        }
    }
}

/// The validator of a custom resource's CRD (`None`: not custom, or its
/// schema could not be loaded).
fn validator(r: Resource) -> Option<&'static jsonschema::Validator> {
    static RAYCLUSTER: OnceLock<Option<jsonschema::Validator>> = OnceLock::new();
    static RAYJOB: OnceLock<Option<jsonschema::Validator>> = OnceLock::new();
    static KUEUE: [OnceLock<Option<jsonschema::Validator>>; 4] =
        [OnceLock::new(), OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let (cell, schema): (_, Box<dyn Fn() -> Result<Value, String>>) = match r {
        Resource::RayCluster => (&RAYCLUSTER, Box::new(|| raycluster_schema(false))),
        Resource::RayJob => (&RAYJOB, Box::new(|| rayjob_schema(false))),
        _ => {
            let at = KUEUE_CRDS.iter().position(|(of, _)| *of == r)?;
            (&KUEUE[at], Box::new(move || kueue_schema(r, false)))
        }
    };
    cell.get_or_init(|| jsonschema::validator_for(&schema().ok()?).ok())
        .as_ref()
}

/// Loads the CRD schemas now rather than on the first write.
pub(super) fn warm_up() {
    let _ = validator(Resource::RayCluster);
    let _ = validator(Resource::RayJob);
}

/// `/spec/workerGroupSpecs/0/replicas` → `spec.workerGroupSpecs[0].replicas`.
fn field_path(pointer: &str) -> String {
    let mut out = String::new();
    for seg in pointer.split('/').skip(1) {
        if seg.parse::<usize>().is_ok() {
            out.push_str(&format!("[{seg}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&seg.replace("~1", "/").replace("~0", "~"));
        }
    }
    out
}

/// Checks an object before it is stored.
pub(super) fn object(r: Resource, name: &str, object: &Value) -> Result<(), ApiError> {
    let mut causes: Vec<(String, String)> = Vec::new();
    if name.is_empty() {
        causes.push((
            "metadata.name".into(),
            "Required value: name or generateName is required".into(),
        ));
    } else {
        let checked = match r {
            Resource::Namespace => check_dns1123_label(name),
            // KubeRay derives pod and service names from it.
            Resource::RayCluster => check_dns1035_label(name, MAX_CLUSTER_NAME_LEN),
            Resource::Pod
            | Resource::Service
            | Resource::Event
            | Resource::ServiceAccount
            | Resource::NetworkPolicy
            | Resource::Lease
            | Resource::Secret
            // KubeRay checks its shorter limit as it reconciles (status
            // `ValidationFailed`), not the API server.
            | Resource::RayJob
            | Resource::ResourceFlavor
            | Resource::ClusterQueue
            | Resource::LocalQueue
            | Resource::Workload => check_dns1123_subdomain(name),
        };
        if let Err(why) = checked {
            causes.push(("metadata.name".into(), format!("Invalid value: {name:?}: {why}")));
        }
    }
    if r == Resource::NetworkPolicy {
        // What kube-apiserver's types take: every field of its type, and
        // the one the API requires.
        if let Err(e) = serde_json::from_value::<k8s_openapi::api::networking::v1::NetworkPolicy>(object.clone()) {
            causes.push(("spec".into(), format!("Invalid value: {e}")));
        }
        if object["spec"]["podSelector"].is_null() {
            causes.push(("spec.podSelector".into(), "Required value".into()));
        }
    }
    if r == Resource::Secret {
        // kube-apiserver's type: `data` values are base64.
        if let Err(e) = serde_json::from_value::<k8s_openapi::api::core::v1::Secret>(object.clone()) {
            causes.push(("data".into(), format!("Invalid value: {e}")));
        }
    }
    if r.is_custom() {
        match validator(r) {
            Some(v) => causes.extend(v.iter_errors(object).map(|e| {
                let field = field_path(&e.instance_path().to_string());
                (field, e.to_string())
            })),
            None => causes.push((String::new(), format!("the {} schema could not be loaded", r.kind()))),
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(r, name, &causes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_become_field_paths() {
        assert_eq!(
            field_path("/spec/workerGroupSpecs/0/replicas"),
            "spec.workerGroupSpecs[0].replicas"
        );
        assert_eq!(
            field_path("/metadata/labels/ray.io~1cluster"),
            "metadata.labels.ray.io/cluster"
        );
        assert_eq!(field_path(""), "");
    }

    #[test]
    fn names_follow_each_resources_rule() {
        let obj = json!({"metadata": {}});
        assert!(object(Resource::Pod, "c1-head-x.y", &obj).is_ok());
        assert!(object(Resource::Namespace, "a.b", &obj).is_err());
        let e = object(Resource::Pod, "", &obj).unwrap_err();
        assert_eq!((e.code, e.reason), (422, "Invalid"));
    }

    #[test]
    fn rayclusters_are_checked_against_the_crd() {
        let long = "a".repeat(54);
        let e = object(
            Resource::RayCluster,
            &long,
            &json!({"spec": {"headGroupSpec": {"template": {}}}}),
        )
        .unwrap_err();
        assert!(e.message.contains("no more than 53"), "{}", e.message);
        let e = object(
            Resource::RayCluster,
            "c",
            &json!({"spec": {"workerGroupSpecs": [{"groupName": "w", "replicas": "2", "template": {}}]}}),
        )
        .unwrap_err();
        let fields: Vec<String> = e.details.unwrap()["causes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["field"].as_str().unwrap().to_owned())
            .collect();
        assert!(
            fields.contains(&"spec".to_owned()),
            "headGroupSpec is required: {fields:?}"
        );
        assert!(
            fields.contains(&"spec.workerGroupSpecs[0].replicas".to_owned()),
            "{fields:?}"
        );
    }
}
