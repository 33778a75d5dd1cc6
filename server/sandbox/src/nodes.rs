//! The simulated nodes and the first-fit scheduler's arithmetic.

use serde_json::Value;

use crate::domain::Quantity;

/// One simulated node's allocatable resources.
#[derive(Debug, Clone)]
pub struct NodeCapacity {
    /// Node name.
    pub name: String,
    /// CPU in nano-cores.
    pub cpu_nanos: u128,
    /// Memory in nano-bytes (bytes × 10⁹).
    pub memory_nanos: u128,
    /// NVIDIA GPUs.
    pub gpus: u128,
}

impl NodeCapacity {
    /// A node with `cpus` cores, `memory` (a quantity) and `gpus`.
    pub fn new(name: impl Into<String>, cpus: u32, memory: &str, gpus: u32) -> Self {
        Self {
            name: name.into(),
            cpu_nanos: u128::from(cpus) * 1_000_000_000,
            memory_nanos: memory.parse::<Quantity>().map(|q| q.nanos()).unwrap_or(0),
            gpus: u128::from(gpus),
        }
    }

    /// `count` identical nodes `node-1`…`node-N`.
    pub fn uniform(count: usize, cpus: u32, memory: &str, gpus: u32) -> Vec<Self> {
        (1..=count)
            .map(|i| Self::new(format!("node-{i}"), cpus, memory, gpus))
            .collect()
    }
}

/// What a pod asks for: (cpu, memory, gpus), summed over its containers.
pub(super) type Request = (u128, u128, u128);

/// A quantity (`4Gi`, `500m`, `2`) in billionths of its unit.
pub(super) fn amount(v: &Value) -> u128 {
    match v {
        Value::String(s) => s.parse::<Quantity>().map(|q| q.nanos()).unwrap_or(0),
        Value::Number(n) => n.to_string().parse::<Quantity>().map(|q| q.nanos()).unwrap_or(0),
        _ => 0,
    }
}

/// The pod's resource requests (limits when no requests are given).
pub(super) fn pod_request(pod: &Value) -> Request {
    let mut total = (0, 0, 0);
    for c in pod["spec"]["containers"].as_array().into_iter().flatten() {
        let r = &c["resources"];
        let pick = |k: &str| {
            let v = &r["requests"][k];
            if v.is_null() {
                amount(&r["limits"][k])
            } else {
                amount(v)
            }
        };
        total.0 += pick("cpu");
        total.1 += pick("memory");
        total.2 += pick("nvidia.com/gpu") / 1_000_000_000;
    }
    total
}

/// The first node with room for `want`, given what `bound` pods use.
pub(super) fn first_fit<'n>(
    nodes: &'n [NodeCapacity],
    bound: &[(String, Request)],
    want: Request,
) -> Option<&'n NodeCapacity> {
    nodes.iter().find(|n| {
        let used = bound
            .iter()
            .filter(|(node, _)| *node == n.name)
            .fold((0, 0, 0), |a, (_, r)| (a.0 + r.0, a.1 + r.1, a.2 + r.2));
        used.0 + want.0 <= n.cpu_nanos && used.1 + want.1 <= n.memory_nanos && used.2 + want.2 <= n.gpus
    })
}

/// Why nothing fits, as the scheduler says it.
pub(super) fn insufficient(nodes: &[NodeCapacity], bound: &[(String, Request)], want: Request) -> String {
    let mut short = Vec::new();
    for (i, what) in ["cpu", "memory", "nvidia.com/gpu"].iter().enumerate() {
        let lacking = nodes
            .iter()
            .filter(|n| {
                let used: u128 = bound
                    .iter()
                    .filter(|(node, _)| *node == n.name)
                    .map(|(_, r)| [r.0, r.1, r.2][i])
                    .sum();
                let cap = [n.cpu_nanos, n.memory_nanos, n.gpus][i];
                used + [want.0, want.1, want.2][i] > cap
            })
            .count();
        if lacking > 0 {
            short.push(format!("{lacking} Insufficient {what}"));
        }
    }
    format!("0/{} nodes are available: {}.", nodes.len(), short.join(", "))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn first_fit_respects_every_resource() {
        let nodes = NodeCapacity::uniform(2, 4, "8Gi", 1);
        let pod = json!({"spec": {"containers": [{"resources": {"requests": {"cpu": "3", "memory": "4Gi", "nvidia.com/gpu": 1}}}]}});
        let want = pod_request(&pod);
        assert_eq!(want.2, 1);
        let mut bound = Vec::new();
        for expected in ["node-1", "node-2"] {
            let n = first_fit(&nodes, &bound, want).unwrap();
            assert_eq!(n.name, expected);
            bound.push((n.name.clone(), want));
        }
        assert!(first_fit(&nodes, &bound, want).is_none());
        assert_eq!(
            insufficient(&nodes, &bound, want),
            "0/2 nodes are available: 2 Insufficient cpu, 2 Insufficient nvidia.com/gpu."
        );
        let limits_only = json!({"spec": {"containers": [{"resources": {"limits": {"cpu": "500m"}}}]}});
        assert_eq!(pod_request(&limits_only).0, 500_000_000);
    }
}
