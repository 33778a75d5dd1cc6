//! The NetworkPolicy krayne puts beside every cluster it creates: a head
//! serves code execution to whoever reaches it (Ray's Jobs API on the
//! dashboard, the Ray client), so the cluster's pods take connections only
//! from each other (Ray's own traffic, on any port) and from krayne's own
//! pods (the direct upstream). `pods/portforward` enters a pod from its
//! node, which no NetworkPolicy governs, so port-forwarded access needs no
//! rule. The platform may admit more (Prometheus scraping Ray's metrics,
//! the KubeRay operator): [`PolicyPeers::extra_ingress`]. Owned by the
//! RayCluster: it goes when the cluster goes. krayne applies it (server-side
//! apply) and re-applies it to every cluster it sees, so clusters made
//! before policies were on get theirs, and a policy left over from a
//! deleted cluster of the same name is taken over.

use std::{
    collections::BTreeMap,
    hash::{DefaultHasher, Hash as _, Hasher as _},
};

use serde_json::{Value, json};

use super::{KUBERAY_API_VERSION, LABEL_CLUSTER, RAYCLUSTER_KIND};
use crate::domain::ObservedCluster;

/// Who, besides the cluster's own pods, may reach them: krayne's pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyPeers {
    /// The namespace krayne runs in.
    pub namespace: String,
    /// Labels of krayne's pods there (the chart's selector labels).
    pub pod_labels: BTreeMap<String, String>,
    /// More ingress rules (`NetworkPolicyIngressRule`s, as the platform
    /// wrote them), after krayne's own.
    pub extra_ingress: Vec<Value>,
}

impl PolicyPeers {
    /// Reads extra ingress rules: a JSON array of objects, each with only
    /// `from` and `ports` (what a NetworkPolicyIngressRule has).
    ///
    /// # Errors
    /// What is wrong with them, for the operator.
    pub fn parse_extra_ingress(text: &str) -> Result<Vec<Value>, String> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(Vec::new());
        }
        let rules: Vec<Value> = serde_json::from_str(text)
            .map_err(|e| format!("extra ingress rules must be a JSON array of NetworkPolicyIngressRules: {e}"))?;
        for (i, rule) in rules.iter().enumerate() {
            let Some(fields) = rule.as_object() else {
                return Err(format!("extra ingress rule {i} is not an object"));
            };
            if let Some(unknown) = fields.keys().find(|k| !matches!(k.as_str(), "from" | "ports")) {
                return Err(format!(
                    "extra ingress rule {i} has {unknown:?}; a NetworkPolicyIngressRule has only `from` and `ports`"
                ));
            }
            for list in ["from", "ports"] {
                if fields.get(list).is_some_and(|v| !v.is_array()) {
                    return Err(format!("extra ingress rule {i}: `{list}` must be a list"));
                }
            }
        }
        Ok(rules)
    }
}

/// The name of the policy beside cluster `name`.
pub fn network_policy_name(name: &str) -> String {
    format!("{name}-krayne-ingress")
}

/// The NetworkPolicy for `cluster` as Kubernetes answered its create (its
/// uid owns the policy), admitting `peers` besides the cluster's pods.
pub fn network_policy(cluster: &ObservedCluster, peers: &PolicyPeers) -> Value {
    let name = cluster.metadata.name.as_str();
    let namespace = cluster.metadata.namespace.as_str();
    let own_pods = json!({"matchLabels": {LABEL_CLUSTER: name}});
    let mut ingress = vec![
        json!({"from": [{"podSelector": own_pods}]}),
        json!({"from": [{
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": peers.namespace}},
            "podSelector": {"matchLabels": peers.pod_labels},
        }]}),
    ];
    ingress.extend(peers.extra_ingress.iter().cloned());
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": network_policy_name(name),
            "namespace": namespace,
            "labels": {LABEL_CLUSTER: name, MANAGED_BY: "krayne"},
            "ownerReferences": [{
                "apiVersion": KUBERAY_API_VERSION,
                "kind": RAYCLUSTER_KIND,
                "name": name,
                "uid": cluster.metadata.uid.as_ref().map(ToString::to_string).unwrap_or_default(),
            }],
        },
        "spec": {
            "podSelector": own_pods,
            "policyTypes": ["Ingress"],
            "ingress": ingress,
        },
    })
}

/// The label saying who manages a NetworkPolicy; krayne replaces only
/// policies it manages.
const MANAGED_BY: &str = "app.kubernetes.io/managed-by";

/// A NetworkPolicy as Kubernetes holds it, reduced to what the keeper
/// compares: who manages it, and a digest of its rules and owners. A
/// namespace's policies are listed at once, so each is kept in tens of
/// bytes rather than as a JSON tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldPolicy {
    /// Its `app.kubernetes.io/managed-by` label.
    pub managed_by: Option<String>,
    /// [`policy_digest`] of it.
    pub digest: u64,
}

impl HeldPolicy {
    /// The held view of `policy`.
    pub fn of(policy: &Value) -> Self {
        Self {
            managed_by: policy["metadata"]["labels"][MANAGED_BY].as_str().map(str::to_owned),
            digest: policy_digest(policy),
        }
    }

    /// Whether krayne manages it, and so may replace it.
    pub fn managed_by_krayne(&self) -> bool {
        self.managed_by.as_deref() == Some("krayne")
    }
}

/// A digest of what makes two policies the same for krayne: the same
/// rules (`spec`), owned by the same objects (their uids). Object keys
/// count in any order, as JSON equality does (the API server writes them
/// in its own order).
pub fn policy_digest(policy: &Value) -> u64 {
    let mut hasher = DefaultHasher::new();
    canonical(&policy["spec"], &mut hasher);
    let owners = policy["metadata"]["ownerReferences"].as_array();
    for owner in owners.into_iter().flatten() {
        canonical(&owner["uid"], &mut hasher);
    }
    hasher.finish()
}

fn canonical(value: &Value, hasher: &mut DefaultHasher) {
    match value {
        Value::Null => 0u8.hash(hasher),
        Value::Bool(b) => (1u8, b).hash(hasher),
        Value::Number(n) => (2u8, n.to_string()).hash(hasher),
        Value::String(s) => (3u8, s).hash(hasher),
        Value::Array(items) => {
            (4u8, items.len()).hash(hasher);
            for item in items {
                canonical(item, hasher);
            }
        }
        Value::Object(map) => {
            (5u8, map.len()).hash(hasher);
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            for (key, item) in entries {
                key.hash(hasher);
                canonical(item, hasher);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_clusters_pods_and_kraynes_reach_it() {
        let cluster: ObservedCluster = serde_json::from_value(json!({
            "metadata": {"name": "demo", "namespace": "ml-team", "uid": "u-1"}
        }))
        .unwrap();
        let peers = PolicyPeers {
            namespace: "krayne".into(),
            pod_labels: [("app.kubernetes.io/name".to_owned(), "krayne".to_owned())].into(),
            extra_ingress: Vec::new(),
        };
        let policy = network_policy(&cluster, &peers);
        assert_eq!(policy["metadata"]["name"], "demo-krayne-ingress");
        assert_eq!(policy["metadata"]["ownerReferences"][0]["uid"], "u-1");
        assert_eq!(policy["spec"]["podSelector"]["matchLabels"]["ray.io/cluster"], "demo");
        let ingress = policy["spec"]["ingress"].as_array().unwrap();
        assert_eq!(ingress.len(), 2);
        assert_eq!(
            ingress[0]["from"][0]["podSelector"]["matchLabels"]["ray.io/cluster"],
            "demo"
        );
        assert!(ingress[0].get("ports").is_none(), "Ray's own traffic, on any port");
        let krayne = &ingress[1]["from"][0];
        assert_eq!(
            krayne["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
            "krayne"
        );
        assert_eq!(krayne["podSelector"]["matchLabels"]["app.kubernetes.io/name"], "krayne");
    }

    #[test]
    fn extra_ingress_follows_kraynes_rules() {
        let cluster: ObservedCluster =
            serde_json::from_value(json!({"metadata": {"name": "demo", "namespace": "ml", "uid": "u"}})).unwrap();
        let scrape = r#"[{"from": [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}],
                          "ports": [{"port": 8080, "protocol": "TCP"}]}]"#;
        let peers = PolicyPeers {
            namespace: "krayne".into(),
            pod_labels: BTreeMap::new(),
            extra_ingress: PolicyPeers::parse_extra_ingress(scrape).unwrap(),
        };
        let policy = network_policy(&cluster, &peers);
        let ingress = policy["spec"]["ingress"].as_array().unwrap();
        assert_eq!(ingress.len(), 3);
        assert_eq!(ingress[2]["ports"][0]["port"], 8080);
        assert_eq!(PolicyPeers::parse_extra_ingress("  ").unwrap(), Vec::<Value>::new());
        for (bad, says) in [
            ("{}", "JSON array"),
            ("[1]", "not an object"),
            (r#"[{"to": []}]"#, "only `from` and `ports`"),
            (r#"[{"from": {}}]"#, "must be a list"),
        ] {
            let e = PolicyPeers::parse_extra_ingress(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn a_held_policy_is_the_same_only_with_the_same_rules_and_owner() {
        let wanted = json!({
            "metadata": {"ownerReferences": [{"uid": "u1"}], "labels": {MANAGED_BY: "krayne"}},
            "spec": {"podSelector": {"matchLabels": {"ray.io/cluster": "demo"}}, "policyTypes": ["Ingress"]},
        });
        // As the API server writes it back: its own key order, its fields.
        let current = json!({
            "spec": {"policyTypes": ["Ingress"], "podSelector": {"matchLabels": {"ray.io/cluster": "demo"}}},
            "metadata": {"resourceVersion": "9", "labels": {MANAGED_BY: "krayne"}, "ownerReferences": [{"uid": "u1", "kind": "RayCluster"}]},
        });
        let held = HeldPolicy::of(&current);
        assert!(held.managed_by_krayne());
        assert_eq!(held.digest, policy_digest(&wanted));
        let mut orphan = current.clone();
        orphan["metadata"]["ownerReferences"][0]["uid"] = json!("u0");
        assert_ne!(
            policy_digest(&orphan),
            policy_digest(&wanted),
            "an orphan of an older cluster"
        );
        let mut widened = current.clone();
        widened["spec"]["ingress"] = json!([{}]);
        assert_ne!(policy_digest(&widened), policy_digest(&wanted));
        let theirs = HeldPolicy::of(&json!({"metadata": {"labels": {MANAGED_BY: "helm"}}}));
        assert!(!theirs.managed_by_krayne());
        assert_eq!(theirs.managed_by.as_deref(), Some("helm"));
    }
}
