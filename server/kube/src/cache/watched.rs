//! kube-runtime watches typed objects; these wrappers let it watch krayne's
//! lean views (only the fields krayne reads) instead of whole objects, which
//! keeps 10 000 cached clusters small.

use std::{borrow::Cow, fmt::Debug, sync::Arc};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::DynamicResourceScope;
use serde::{Deserialize, Deserializer, de::DeserializeOwned};

use super::state::Indexed;
use crate::{
    domain::{ObservedCluster, ObservedEvent, ObservedPod},
    manifest,
};

/// A view kube-runtime can watch: its API coordinates.
pub(crate) trait View: Indexed + DeserializeOwned + Debug + Send + Sync + 'static {
    /// API group (`""` for core).
    const GROUP: &'static str;
    /// Kind.
    const KIND: &'static str;
    /// Plural resource name.
    const PLURAL: &'static str;
}

impl View for ObservedCluster {
    const GROUP: &'static str = manifest::KUBERAY_GROUP;
    const KIND: &'static str = manifest::RAYCLUSTER_KIND;
    const PLURAL: &'static str = manifest::RAYCLUSTERS;
}

impl View for crate::domain::ObservedRayJob {
    const GROUP: &'static str = manifest::KUBERAY_GROUP;
    const KIND: &'static str = manifest::RAYJOB_KIND;
    const PLURAL: &'static str = manifest::RAYJOBS;
}

impl View for ObservedPod {
    const GROUP: &'static str = "";
    const KIND: &'static str = "Pod";
    const PLURAL: &'static str = "pods";
}

impl View for ObservedEvent {
    const GROUP: &'static str = "";
    const KIND: &'static str = "Event";
    const PLURAL: &'static str = "events";
}

/// A namespace: only its name matters.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct NamespaceView {
    /// Metadata.
    #[serde(default)]
    pub metadata: crate::domain::ObjectMeta,
}

impl Indexed for NamespaceView {
    fn meta(&self) -> &crate::domain::ObjectMeta {
        &self.metadata
    }
}

impl View for NamespaceView {
    const GROUP: &'static str = "";
    const KIND: &'static str = "Namespace";
    const PLURAL: &'static str = "namespaces";
}

/// A watched object: the view, shared, and the metadata kube-runtime needs
/// to resume watches.
#[derive(Debug)]
pub(crate) struct Watched<T> {
    meta: ObjectMeta,
    /// The view.
    pub view: Arc<T>,
}

// By hand: derived, it would need `T: Clone`, and only the Arc is cloned.
impl<T> Clone for Watched<T> {
    fn clone(&self) -> Self {
        Self {
            meta: self.meta.clone(),
            view: self.view.clone(),
        }
    }
}

impl<'de, T: View> Deserialize<'de> for Watched<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let view = T::deserialize(d)?;
        let m = view.meta();
        let meta = ObjectMeta {
            name: Some(m.name.to_string()),
            namespace: (!m.namespace.is_empty()).then(|| m.namespace.to_string()),
            resource_version: m.resource_version.as_ref().map(ToString::to_string),
            ..ObjectMeta::default()
        };
        Ok(Self {
            meta,
            view: Arc::new(view),
        })
    }
}

impl<T: View> kube::Resource for Watched<T> {
    type DynamicType = ();
    // Dynamic: one wrapper serves namespaced and cluster-scoped kinds, and
    // the cache picks `Api::all_with` or `Api::namespaced_with` itself.
    type Scope = DynamicResourceScope;

    fn kind((): &()) -> Cow<'_, str> {
        T::KIND.into()
    }
    fn group((): &()) -> Cow<'_, str> {
        T::GROUP.into()
    }
    fn version((): &()) -> Cow<'_, str> {
        // KubeRay's and core's (pods, events, namespaces) are both `v1`.
        manifest::KUBERAY_VERSION.into()
    }
    fn plural((): &()) -> Cow<'_, str> {
        T::PLURAL.into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.meta
    }
}

#[cfg(test)]
mod tests {
    use kube::Resource as _;
    use serde_json::json;

    use super::*;

    #[test]
    fn a_watched_view_keeps_what_resuming_needs() {
        let w: Watched<ObservedPod> = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ml", "resourceVersion": "42", "uid": "u"},
            "spec": {"nodeName": "n1", "containers": [{"name": "big", "image": "x"}]},
        }))
        .unwrap();
        assert_eq!(w.meta().resource_version.as_deref(), Some("42"));
        assert_eq!(w.view.spec.node_name.as_deref(), Some("n1"));
        assert_eq!(
            Watched::<ObservedCluster>::url_path(&(), Some("ml")),
            "/apis/ray.io/v1/namespaces/ml/rayclusters"
        );
        assert_eq!(Watched::<NamespaceView>::url_path(&(), None), "/api/v1/namespaces");
    }
}
