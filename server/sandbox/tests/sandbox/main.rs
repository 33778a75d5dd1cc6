//! The sandbox against real clients: kube-rs for every verb, kubectl, and
//! a simulated KubeRay lifecycle driven by manifests of the cluster model.
// Test helpers outside #[test] fns: failing loudly is their job.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod errors;
mod kubectl;
mod kuberay_rayjobs;
mod kueue;
mod lifecycle;
mod load;
mod portforward;
mod python_client;
mod rayjobs;
mod service_account_tokens;
mod standins;
mod typed;
mod verbs;
mod watch;

use std::time::Duration;

use krayne_core::{
    domain::ClusterSpec,
    manifest::{ManifestSettings, Provenance, build_manifest},
};
use krayne_sandbox::{Sandbox, SandboxOptions};
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, GroupVersionKind},
};
use serde_json::Value;

/// A fast sandbox with namespaces `default` and `ml`, and a client for it.
pub async fn start() -> (Sandbox, Client) {
    start_with(SandboxOptions::fast()).await
}

/// A sandbox with `options` (plus namespace `ml`) and a client for it.
pub async fn start_with(mut options: SandboxOptions) -> (Sandbox, Client) {
    options.namespaces.push("ml".into());
    let sandbox = Sandbox::start(options).await.unwrap();
    let client = Client::try_from(kube::Config::new(sandbox.url().parse().unwrap())).unwrap();
    (sandbox, client)
}

/// `ray.io/v1` RayClusters in `ns`.
pub fn rayclusters(client: &Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("ray.io", "v1", "RayCluster");
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(&gvk, "rayclusters"),
    )
}

/// `ray.io/v1` RayClusters in every namespace.
pub fn all_rayclusters(client: &Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("ray.io", "v1", "RayCluster");
    Api::all_with(client.clone(), &ApiResource::from_gvk_with_plural(&gvk, "rayclusters"))
}

/// Sends a raw request (for what kube-rs has no typed call for).
pub async fn raw(
    client: &Client,
    method: &str,
    uri: &str,
    content_type: &str,
    body: &str,
) -> Result<Value, kube::Error> {
    let request = axum::http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", content_type)
        .body(body.as_bytes().to_vec())
        .unwrap();
    client.request::<Value>(request).await
}

/// A RayCluster built by the cluster model from a Krayne config.
pub fn raycluster(yaml: &str) -> DynamicObject {
    let spec = ClusterSpec::from_yaml_str(yaml).unwrap();
    let manifest = build_manifest(&spec, &ManifestSettings::default(), &Provenance::default());
    serde_json::from_value(manifest).unwrap()
}

/// A byte stream a WebSocket client can run over: a TCP connection or a
/// port-forward's.
pub trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

/// Retries `check` until it gives `Some`, for up to 20 s.
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    for _ in 0..1000 {
        if let Some(v) = check().await {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for {what}");
}

/// The `reason` and `code` of a kube API error.
pub fn api_error(e: kube::Error) -> (String, u16, Box<kube::core::Status>) {
    match e {
        kube::Error::Api(s) => (s.reason.clone(), s.code, s),
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// `object.status.<path>` of a dynamic object.
pub fn status_of(o: &DynamicObject) -> &Value {
    &o.data["status"]
}
