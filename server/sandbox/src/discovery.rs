//! Discovery documents, enough for kube-rs and `kubectl`.

use serde_json::{Value, json};

use super::Resource;

/// `GET /version`: 1.33, or 1.31 (whose WatchList is off by default)
/// without `watch_list`.
pub(super) fn version(watch_list: bool) -> Value {
    let minor = if watch_list { "33" } else { "31" };
    json!({
        "major": "1", "minor": minor, "gitVersion": format!("v1.{minor}.0+krayne-sandbox"),
        "gitCommit": "", "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "none", "compiler": "rustc", "platform": "linux/amd64",
    })
}

/// `GET /api`.
pub(super) fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions", "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

fn ray_group() -> Value {
    json!({
        "name": "ray.io",
        "versions": [{"groupVersion": "ray.io/v1", "version": "v1"}],
        "preferredVersion": {"groupVersion": "ray.io/v1", "version": "v1"},
    })
}

fn kueue_group() -> Value {
    json!({
        "name": "kueue.x-k8s.io",
        "versions": [{"groupVersion": "kueue.x-k8s.io/v1beta2", "version": "v1beta2"}],
        "preferredVersion": {"groupVersion": "kueue.x-k8s.io/v1beta2", "version": "v1beta2"},
    })
}

/// `GET /apis`.
pub(super) fn groups() -> Value {
    json!({"kind": "APIGroupList", "apiVersion": "v1",
           "groups": [ray_group(), kueue_group(), crate::crds::group()]})
}

/// `GET /apis/kueue.x-k8s.io`.
pub(super) fn kueue_group_doc() -> Value {
    let mut g = kueue_group();
    g["kind"] = json!("APIGroup");
    g["apiVersion"] = json!("v1");
    g
}

/// `GET /apis/ray.io`.
pub(super) fn ray_group_doc() -> Value {
    let mut g = ray_group();
    g["kind"] = json!("APIGroup");
    g["apiVersion"] = json!("v1");
    g
}

/// `GET /api/v1` (group ""), `GET /apis/ray.io/v1` or
/// `GET /apis/kueue.x-k8s.io/v1beta2`.
pub(super) fn resources(group: &str) -> Value {
    let group_version = Resource::ALL
        .into_iter()
        .find(|r| r.group() == group)
        .map_or("v1", Resource::api_version);
    let mut list = Vec::new();
    for r in Resource::ALL.into_iter().filter(|r| r.group() == group) {
        list.push(json!({
            "name": r.plural(), "singularName": r.kind().to_lowercase(), "namespaced": r.namespaced(),
            "kind": r.kind(), "shortNames": r.short_names(),
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
        }));
        if r == Resource::ServiceAccount {
            list.push(json!({
                "name": "serviceaccounts/token", "singularName": "", "namespaced": true,
                "group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest", "verbs": ["create"],
            }));
        }
        if r.has_status_subresource() {
            list.push(json!({
                "name": format!("{}/status", r.plural()), "singularName": "", "namespaced": true,
                "kind": r.kind(), "verbs": ["get", "patch", "update"],
            }));
        }
    }
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": list})
}
