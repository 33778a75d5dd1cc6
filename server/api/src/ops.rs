//! The ops listener (`/healthz`, `/readyz`, `/metrics`, no authentication)
//! and the request metrics it reports.

use std::{sync::OnceLock, time::Instant};

use axum::{
    Json, Router,
    extract::{MatchedPath, Request, State},
    http::StatusCode,
    middleware::Next,
    response::{IntoResponse, Response},
    routing::get,
};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use serde_json::json;

use crate::control::ControlPlane;

/// The process's Prometheus recorder, installed on first use.
pub fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new().build_recorder();
            let handle = recorder.handle();
            // Fails only if another recorder is installed; ours still renders.
            let _ = metrics::set_global_recorder(recorder);
            handle
        })
        .clone()
}

/// Middleware: counts requests by route, method and status, with latency.
pub async fn track_http(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let method = request.method().to_string();
    let response = next.run(request).await;
    let labels = [
        ("route", route),
        ("method", method),
        ("code", response.status().as_u16().to_string()),
    ];
    metrics::counter!("krayne_http_requests_total", &labels).increment(1);
    metrics::histogram!("krayne_http_request_duration_seconds", &labels).record(started.elapsed().as_secs_f64());
    response
}

/// Ready while the replica can serve: `503` while it starts (until
/// Kubernetes has answered and the watch cache has listed once) and while
/// it drains after a shutdown signal. Its dependencies are reported, as last probed in the
/// background (the probe never waits on a slow one), but do not decide:
/// with Postgres or the API server away, cached reads, watches and tunnels
/// go on, and mutations are refused fail-closed by the use cases. Problems
/// an operator must fix (a rule missing from krayne's RBAC, a schema older
/// than this binary) are listed too.
async fn readyz(State(service): State<ControlPlane>) -> Response {
    let readiness = service.readiness().await;
    let dependencies: serde_json::Map<String, serde_json::Value> = readiness
        .dependencies
        .iter()
        .map(|d| {
            let state = match (d.up, &d.error) {
                (None, _) => json!({"status": "unknown"}),
                (Some(true), _) => json!({"status": "up"}),
                (Some(false), error) => json!({"status": "down", "error": error}),
            };
            (d.name.to_owned(), state)
        })
        .collect();
    let mut body = json!({
        "status": match (readiness.draining, readiness.starting) {
            (true, _) => "draining",
            (false, true) => "starting",
            (false, false) => "ready",
        },
        "dependencies": dependencies,
    });
    if !readiness.problems.is_empty() {
        body["problems"] = json!(readiness.problems);
    }
    if !readiness.sites.is_empty() {
        let sites: serde_json::Map<String, serde_json::Value> = readiness
            .sites
            .iter()
            .map(|(site, down)| {
                let state = match down {
                    None => json!({"status": "up"}),
                    Some(since) => json!({"status": "unavailable", "since": since}),
                };
                (site.clone(), state)
            })
            .collect();
        body["sites"] = serde_json::Value::Object(sites);
    }
    let status = if readiness.ready() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

/// Runtime gauges, read when scraped: a task count that only grows is a
/// leak (waits, connections or watchers that never end).
fn record_runtime() {
    let runtime = tokio::runtime::Handle::current().metrics();
    #[expect(clippy::cast_precision_loss)] // task counts stay far below 2^52
    metrics::gauge!("krayne_runtime_alive_tasks").set(runtime.num_alive_tasks() as f64);
}

/// `/healthz` (the process is up), `/readyz` (the replica takes traffic;
/// its dependencies reported) and `/metrics` (Prometheus text).
pub fn router(plane: ControlPlane) -> Router {
    let handle = metrics_handle();
    Router::new()
        .route("/healthz", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/readyz", get(readyz))
        .route(
            "/metrics",
            get(move || async move {
                record_runtime();
                handle.render()
            }),
        )
        .with_state(plane)
}
