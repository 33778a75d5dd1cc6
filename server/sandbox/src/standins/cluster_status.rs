//! Ray's `GET /api/cluster_status` on the dashboard stand-in, shaped as a
//! Ray 2.60 head answers it (`shared/reference/ray/cluster-status.md`):
//! `loadMetricsReport.usage` (resource → [used, total]) and the
//! autoscaler's text with `NodeIdleSeconds`. The head is the one node; its
//! CPUs, GPUs and memory are its container's; in use are the running
//! jobs' entrypoint resources (`entrypoint_num_cpus`, `…_gpus`), as Ray
//! reserves them for a driver.

use std::sync::Arc;

use axum::{Json, Router, extract::State, response::IntoResponse as _, response::Response, routing::get};
use krayne_core::domain::Quantity;
use serde_json::{Value, json};

use super::jobs::Jobs;

/// What the head node has: CPUs, GPUs, memory in bytes.
#[derive(Debug, Clone, Copy)]
pub(super) struct NodeTotals {
    cpus: f64,
    gpus: f64,
    memory: f64,
}

impl NodeTotals {
    /// The head container's limits (else requests); a CPU at least.
    pub(super) fn of(pod: &Value) -> Self {
        let resources = &pod["spec"]["containers"][0]["resources"];
        #[expect(clippy::cast_precision_loss, reason = "Ray reports resources as floats")]
        let amount = |name: &str| {
            [&resources["limits"][name], &resources["requests"][name]]
                .into_iter()
                .find_map(|v| v.as_str().and_then(|q| q.parse::<Quantity>().ok()))
                .map_or(0.0, |q| q.nanos() as f64 / 1e9)
        };
        Self {
            cpus: amount("cpu").max(1.0),
            gpus: amount("nvidia.com/gpu"),
            memory: amount("memory").max(1_073_741_824.0),
        }
    }
}

pub(super) fn router(jobs: Arc<Jobs>, totals: NodeTotals) -> Router {
    Router::new()
        .route("/api/cluster_status", get(cluster_status))
        .with_state((jobs, totals))
}

async fn cluster_status(State((jobs, totals)): State<(Arc<Jobs>, NodeTotals)>) -> Response {
    let (cpus, gpus, idle_since_ms) = jobs.usage();
    let now_ms = jiff::Timestamp::now().as_millisecond();
    let idle = idle_since_ms.map_or(0, |since| (now_ms - since).max(0) / 1000);
    let (id, ip) = jobs.node();
    let object_store = (totals.memory * 0.3).floor();
    let mut usage = json!({
        "memory": [0.0, totals.memory],
        format!("node:{ip}"): [0.0, 1.0],
        "CPU": [cpus, totals.cpus],
        "node:InternalHead": [0.0, 1.0],
        "objectStoreMemory": [0.0, object_store],
    });
    let mut summary = format!("{cpus:.1}/{:.1} CPU", totals.cpus);
    if totals.gpus > 0.0 {
        usage["GPU"] = json!([gpus, totals.gpus]);
        summary.push_str(&format!(", {gpus:.1}/{:.1} GPU", totals.gpus));
    }
    let gib = |bytes: f64| bytes / 1_073_741_824.0;
    let text = format!(
        "Cluster status: 0 nodes\n - MostDelayedHeartbeats: {{'{id}': 0.0014042854309082031}}\n - NodeIdleSeconds: Min={idle} Mean={idle} Max={idle}\n - ResourceUsage: {summary}, 0.0 GiB/{:.2} GiB memory, 0.0 GiB/{:.2} GiB object_store_memory\n - TimeSinceLastHeartbeat: Min=0 Mean=0 Max=0\nWorker node types:",
        gib(totals.memory),
        gib(object_store),
    );
    #[expect(clippy::cast_precision_loss, reason = "Ray's float seconds")]
    let time = now_ms as f64 / 1000.0;
    Json(json!({
        "result": true,
        "msg": "Got cluster status.",
        "data": {
            "autoscalingStatus": text,
            "autoscalingError": null,
            "clusterStatus": {
                "time": time,
                "autoscalerReport": {
                    "activeNodes": {format!("node{id}"): 1},
                    "idleNodes": null, "pendingNodes": [], "pendingLaunches": {}, "failedNodes": [],
                    "legacy": true
                },
                "loadMetricsReport": {
                    "usage": usage.clone(),
                    "resourceDemand": [], "pgDemand": [], "requestDemand": [],
                    "headIp": null,
                    "usageByNode": {id: usage},
                    "nodeTypeMapping": null,
                    "idleTimeMap": null
                }
            }
        }
    }))
    .into_response()
}
