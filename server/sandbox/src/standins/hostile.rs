//! A hostile head: the dashboard of a cluster whose tenant answers every
//! Ray endpoint krayne calls as it likes (a tenant controls its head's
//! image and every process in it). The fault `hostile-head:<behaviour>`
//! (`sandbox.krayne.dev/fault` on the RayCluster) picks the answer:
//!
//! - `oversized`: 60 MiB of `[0,0,…]`, generated as it is sent;
//! - `nested`: arrays nested 200 000 deep;
//! - `paths`: a node named by a path (`node_ip: "/home/victim/.ssh"`,
//!   `node_id: "../../x"`);
//! - `names`: a real node whose log files are named `../escape-try`,
//!   `/abs-try`, `authorized_keys`;
//! - `escapes`: well-formed jobs and errors full of terminal escapes;
//! - `slow`: a valid answer, one byte a second;
//! - `endless`: `[0,0,…` that never ends;
//! - `redirect`: `302` to a metadata address (never to be followed).
//!
//! For krayne's reliability tests and benchmarks; a real head is just as
//! able to send each of these.

use std::{convert::Infallible, time::Duration};

use axum::{
    Router,
    body::{Body, Bytes},
    http::{StatusCode, Uri, header},
    response::{IntoResponse as _, Response},
};
use futures::StreamExt as _;
use serde_json::json;

/// The fault's prefix; the behaviour follows it.
pub const HOSTILE_HEAD: &str = "hostile-head:";

/// How a hostile head answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Behaviour {
    Oversized,
    Nested,
    Paths,
    Names,
    Escapes,
    Slow,
    Endless,
    Redirect,
}

impl Behaviour {
    /// The behaviour a fault names, if it names one.
    pub(super) fn of(fault: &str) -> Option<Self> {
        Some(match fault.strip_prefix(HOSTILE_HEAD)? {
            "oversized" => Self::Oversized,
            "nested" => Self::Nested,
            "paths" => Self::Paths,
            "names" => Self::Names,
            "escapes" => Self::Escapes,
            "slow" => Self::Slow,
            "endless" => Self::Endless,
            "redirect" => Self::Redirect,
            _ => return None,
        })
    }
}

/// Every path answered as `behaviour` says.
pub(super) fn router(behaviour: Behaviour) -> Router {
    Router::new().fallback(move |uri: Uri| async move { answer(behaviour, &uri) })
}

/// A node id as Ray makes them (56 hex digits).
const NODE_ID: &str = "0123456789abcdef0123456789abcdef0123456789abcdef01234567";
/// Text a terminal would act on: a title, a bell, a screen clear, a
/// hyperlink, a carriage return over the line.
const ESCAPES: &str = "\u{1b}]0;owned\u{7}\u{1b}[2J\u{1b}]8;;https://evil.example/\u{7}click\u{1b}]8;;\u{7}\rgone";

fn answer(behaviour: Behaviour, uri: &Uri) -> Response {
    let path = uri.path();
    match behaviour {
        Behaviour::Oversized => streamed(repeated(b"[", b"0,", 30 * 1024 * 1024, Some(b"0]"))),
        Behaviour::Nested => {
            let depth = 200_000;
            let mut text = "[".repeat(depth);
            text.push_str(&"]".repeat(depth));
            json_text(text)
        }
        Behaviour::Endless => streamed(repeated(b"[", b"0,", usize::MAX, None)),
        Behaviour::Slow => {
            let body = futures::stream::iter(b"[]".to_vec()).then(|b| async move {
                tokio::time::sleep(Duration::from_secs(1)).await;
                Ok::<_, Infallible>(Bytes::from(vec![b]))
            });
            streamed(body.boxed())
        }
        Behaviour::Redirect => (
            StatusCode::FOUND,
            [(header::LOCATION, "http://169.254.169.254/latest/meta-data/")],
        )
            .into_response(),
        Behaviour::Paths => shaped(path, "/home/victim/.ssh", "../../x", &["authorized_keys"]),
        Behaviour::Names => shaped(
            path,
            "10.244.0.9",
            NODE_ID,
            &[
                "raylet.out",
                "../escape-try",
                "/abs-try",
                "events/../../x",
                "authorized_keys",
            ],
        ),
        Behaviour::Escapes => escapes(path),
    }
}

/// Answers shaped as Ray's, naming the node `ip`/`id` and its files.
fn shaped(path: &str, ip: &str, id: &str, files: &[&str]) -> Response {
    match path {
        "/api/v0/nodes" => json_text(
            json!({"result": true, "msg": "", "data": {"result": {"total": 1, "result": [
                {"node_id": id, "node_ip": ip, "is_head_node": true, "state": "ALIVE"}]}}})
            .to_string(),
        ),
        "/api/v0/logs" => {
            json_text(json!({"result": true, "msg": "", "data": {"result": {"internal": files}}}).to_string())
        }
        "/api/v0/logs/file" | "/api/v0/logs/stream" => {
            (StatusCode::OK, "ssh-ed25519 AAAAC3Nza attacker@evil\n").into_response()
        }
        "/api/jobs/" => json_text("[]".into()),
        _ => (StatusCode::NOT_FOUND, "not found").into_response(),
    }
}

/// Well-formed answers whose text is escapes.
fn escapes(path: &str) -> Response {
    let job = json!({"type": "SUBMISSION", "job_id": null, "submission_id": "raysubmit_esc",
        "status": "FAILED", "entrypoint": format!("python train.py {ESCAPES}"),
        "message": format!("failed {ESCAPES}"), "error_type": ESCAPES,
        "start_time": 1_795_434_158_240_i64, "end_time": 1_795_434_160_914_i64,
        "metadata": {"note": ESCAPES}, "driver_exit_code": 1});
    match path {
        "/api/jobs/" => json_text(json!([job]).to_string()),
        p if p.starts_with("/api/jobs/") && p.ends_with("/logs") => {
            json_text(json!({"logs": format!("log {ESCAPES}\n")}).to_string())
        }
        p if p.starts_with("/api/jobs/") => json_text(job.to_string()),
        _ => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("Traceback\nRuntimeError: {ESCAPES}"),
        )
            .into_response(),
    }
}

fn json_text(text: String) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], text).into_response()
}

fn streamed(body: futures::stream::BoxStream<'static, Result<Bytes, Infallible>>) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], Body::from_stream(body)).into_response()
}

/// `open`, then `unit` until `bytes` are sent, then `close` (never, for
/// `None`), in 64 KiB chunks made once.
fn repeated(
    open: &'static [u8],
    unit: &'static [u8],
    bytes: usize,
    close: Option<&'static [u8]>,
) -> futures::stream::BoxStream<'static, Result<Bytes, Infallible>> {
    let chunk = Bytes::from(unit.repeat(64 * 1024 / unit.len()));
    let chunks = bytes / chunk.len();
    let body = futures::stream::iter(std::iter::once(Bytes::from_static(open)))
        .chain(futures::stream::iter(std::iter::repeat_n(chunk, chunks)))
        .chain(futures::stream::iter(close.map(Bytes::from_static)));
    body.map(Ok).boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_behaviour_is_named_by_its_fault() {
        for name in [
            "oversized",
            "nested",
            "paths",
            "names",
            "escapes",
            "slow",
            "endless",
            "redirect",
        ] {
            assert!(Behaviour::of(&format!("{HOSTILE_HEAD}{name}")).is_some(), "{name}");
        }
        assert_eq!(Behaviour::of("hostile-head:kind"), None);
        assert_eq!(Behaviour::of("crash-loop"), None);
    }
}
