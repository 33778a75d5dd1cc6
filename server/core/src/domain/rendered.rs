//! KubeRay objects as the ports carry them: made only by this crate's
//! `manifest` module (the one place that knows a RayCluster's shape), and
//! handed to Kubernetes by the adapter without looking inside.

use serde_json::Value;

/// A RayCluster manifest rendered from a validated spec.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedCluster {
    namespace: String,
    name: String,
    manifest: Value,
}

impl RenderedCluster {
    pub(crate) fn new(namespace: String, name: String, manifest: Value) -> Self {
        Self {
            namespace,
            name,
            manifest,
        }
    }

    /// The namespace it goes into.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The manifest, as Kubernetes takes it.
    pub fn manifest(&self) -> &Value {
        &self.manifest
    }

    /// The manifest, owned.
    pub fn into_manifest(self) -> Value {
        self.manifest
    }
}

/// A patch of a RayCluster (a scale): a JSON patch (RFC 6902) whose first
/// operation pins `metadata.resourceVersion`, so a stale one is refused
/// with `Conflict`.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterPatch(Value);

impl ClusterPatch {
    pub(crate) fn new(patch: Value) -> Self {
        Self(patch)
    }

    /// The JSON patch, as Kubernetes takes it.
    pub fn as_json(&self) -> &Value {
        &self.0
    }
}
