//! The dashboard stand-in's node and log API, as a Ray 2.60 head answers
//! it (recorded in `shared/reference/ray/logs-api.md`): `GET
//! /api/v0/nodes` (the head node, ALIVE), `GET /api/v0/logs?node_id=`
//! (files by component; each job's `job-driver-<id>.log` under `driver`),
//! `GET /api/v0/logs/file?node_id=&filename=&lines=` (the last lines,
//! chunked text; 500 "A file is not found at: …" for another name, 500
//! "Server got itself in trouble" without a node) and `…/logs/stream`
//! (the same, then open until the client or the head goes).

use std::{collections::BTreeMap, sync::Arc};

use axum::{
    Json, Router,
    body::Body,
    extract::{Query, State},
    http::{StatusCode, header},
    response::{IntoResponse as _, Response},
    routing::get,
};
use serde::Deserialize;
use serde_json::json;

use super::jobs::Jobs;

/// Where a Ray node's logs are, as an unknown file's error names it.
const LOG_DIR: &str = "/tmp/ray/session_2026-01-01_00-00-00_000000_1/logs";

/// The routes, on the dashboard's port.
pub(super) fn router(jobs: Arc<Jobs>) -> Router {
    Router::new()
        .route("/api/v0/nodes", get(nodes))
        .route("/api/v0/logs", get(list))
        .route("/api/v0/logs/file", get(file))
        .route("/api/v0/logs/stream", get(stream))
        .with_state(jobs)
}

/// The head node's own log files and their lines (what `ray start`
/// writes on a head), by component.
fn files(ip: &str) -> BTreeMap<&'static str, Vec<(&'static str, Vec<String>)>> {
    let at = "[2026-01-01 00:00:01,010 I 18917 18917]";
    BTreeMap::from([
        ("gcs_server", vec![
            ("gcs_server.out", vec![
                format!("{at} (gcs_server) gcs_server.cc:303: GCS server started on {ip}:6379"),
                format!("{at} (gcs_server) gcs_server.cc:1359: Metrics exporter initialized with port 33719"),
                format!("{at} (gcs_server) metrics_agent_client.cc:59: Exporter initialized."),
            ]),
            ("gcs_server.err", Vec::new()),
        ]),
        ("raylet", vec![
            ("raylet.out", vec![
                format!("{at} (raylet) main.cc:407: Setting cluster ID to: 2b5b6c0f"),
                format!("{at} (raylet) node_manager.cc:335: Initializing NodeManager node_id={ip}"),
                format!("{at} (raylet) raylet.cc:129: Raylet of id started. Raylet consists of node_manager and object_manager."),
            ]),
            ("raylet.err", Vec::new()),
        ]),
        ("dashboard", vec![
            ("dashboard.log", vec![format!("2026-01-01 00:00:02,000\tINFO head.py:283 -- Dashboard head started at {ip}:8265")]),
            ("dashboard.out", Vec::new()),
            ("dashboard.err", Vec::new()),
        ]),
        ("autoscaler", vec![
            ("monitor.log", vec!["2026-01-01 00:00:03,000\tINFO monitor.py:690 -- Starting monitor using ray installation".into()]),
            ("monitor.out", Vec::new()),
            ("monitor.err", Vec::new()),
        ]),
        ("agent", vec![
            ("dashboard_agent.log", vec!["2026-01-01 00:00:02,500\tINFO agent.py:151 -- Dashboard agent grpc address: 0.0.0.0:52365".into()]),
            ("runtime_env_agent.log", vec!["2026-01-01 00:00:02,600\tINFO main.py:213 -- Starting runtime env agent".into()]),
        ]),
        ("internal", vec![
            ("log_monitor.log", vec!["2026-01-01 00:00:02,100\tINFO log_monitor.py:254 -- Starting log monitor with [max open files=200]".into()]),
            ("ray_client_server.out", vec!["2026-01-01 00:00:02,200\tINFO server.py:881 -- Starting Ray Client server on 0.0.0.0:10001".into()]),
            ("debug_state.txt", vec!["NodeManager:".into(), format!("Node ID: {ip}")]),
            ("events/", Vec::new()),
            ("old/", Vec::new()),
        ]),
    ])
}

/// `GET /api/v0/nodes`: the head node, as the state API lists it.
async fn nodes(State(jobs): State<Arc<Jobs>>) -> Response {
    let (id, ip) = jobs.node();
    let node = json!({
        "node_id": id, "node_ip": ip, "is_head_node": true, "state": "ALIVE", "state_message": null,
        "node_name": ip, "resources_total": {"CPU": 1.0, "memory": 2147483648.0, "object_store_memory": 536870912.0},
        "labels": {"ray.io/node_id": id}, "start_time_ms": 1_767_225_600_000_i64, "end_time_ms": 0,
    });
    envelope(json!({
        "total": 1, "num_after_truncation": 1, "num_filtered": 1, "result": [node],
        "partial_failure_warning": "", "warnings": null,
    }))
}

/// Ray's success envelope.
fn envelope(result: serde_json::Value) -> Response {
    Json(json!({"result": true, "msg": "", "data": {"result": result}})).into_response()
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct FileQuery {
    node_id: Option<String>,
    filename: Option<String>,
    lines: Option<usize>,
}

/// aiohttp's answer to a handler that raised.
fn trouble() -> Response {
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "500 Internal Server Error\n\nServer got itself in trouble",
    )
        .into_response()
}

/// `GET /api/v0/logs?node_id=`: files by component.
async fn list(State(jobs): State<Arc<Jobs>>, Query(q): Query<FileQuery>) -> Response {
    let (id, ip) = jobs.node();
    if q.node_id.as_deref() != Some(id) {
        return trouble();
    }
    let mut groups: BTreeMap<String, Vec<String>> = files(ip)
        .into_iter()
        .map(|(group, files)| (group.to_owned(), files.into_iter().map(|(f, _)| f.to_owned()).collect()))
        .collect();
    let drivers: Vec<String> = jobs.driver_logs().into_iter().map(|(name, _)| name).collect();
    if !drivers.is_empty() {
        groups.insert("driver".into(), drivers);
    }
    envelope(json!(groups))
}

/// A file's text, or why there is none.
async fn read(jobs: &Jobs, q: &FileQuery) -> Result<String, Response> {
    let (id, ip) = jobs.node();
    let (Some(node), Some(name)) = (&q.node_id, &q.filename) else {
        return Err(trouble());
    };
    if node != id {
        return Err(trouble());
    }
    let lines: Option<Vec<String>> = match files(ip)
        .into_values()
        .flatten()
        .find(|(f, _)| *f == name.as_str() && !f.ends_with('/'))
    {
        Some((_, lines)) => Some(lines),
        None => match jobs.driver_logs().into_iter().find(|(f, _)| f == name) {
            Some((_, path)) => {
                let text = tokio::fs::read(&path).await.unwrap_or_default();
                Some(String::from_utf8_lossy(&text).lines().map(str::to_owned).collect())
            }
            None => None,
        },
    };
    let Some(lines) = lines else {
        return Err((
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("A file is not found at: {LOG_DIR}/{name}"),
        )
            .into_response());
    };
    let from = q.lines.map_or(0, |n| lines.len().saturating_sub(n));
    Ok(lines[from..].iter().map(|l| format!("{l}\n")).collect())
}

/// `GET /api/v0/logs/file`.
async fn file(State(jobs): State<Arc<Jobs>>, Query(q): Query<FileQuery>) -> Response {
    match read(&jobs, &q).await {
        Ok(text) => text_answer(Body::from(text)),
        Err(e) => e,
    }
}

/// `GET /api/v0/logs/stream`: the last lines, then open until the client
/// or the head goes (the stand-in's files do not grow).
async fn stream(State(jobs): State<Arc<Jobs>>, Query(q): Query<FileQuery>) -> Response {
    let text = match read(&jobs, &q).await {
        Ok(text) => text,
        Err(e) => return e,
    };
    let mut stopped = jobs.stopped();
    let first = futures::stream::once(async move { Ok::<_, std::io::Error>(text) });
    let open = futures::stream::once(async move {
        let _ = stopped.changed().await;
        Ok::<_, std::io::Error>(String::new())
    });
    text_answer(Body::from_stream(futures::StreamExt::chain(first, open)))
}

fn text_answer(body: Body) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/plain"),
            (header::CONTENT_DISPOSITION, "attachment; filename=\"file.txt\""),
        ],
        body,
    )
        .into_response()
}
