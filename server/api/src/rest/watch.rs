//! `?watch=true` on the list routes: the clusters' (or RayJobs') changes
//! as NDJSON
//! (`application/x-ndjson`, one event per line) or Server-Sent Events
//! (`text/event-stream`, each event's version as its `id`, so an
//! `EventSource` resumes with `Last-Event-ID`).

use std::{convert::Infallible, sync::Arc, time::Duration};

use axum::{
    body::{Body, Bytes},
    http::{HeaderMap, HeaderValue, header},
    response::{
        IntoResponse, Response,
        sse::{Event, KeepAlive, Sse},
    },
};
use futures::{Stream, StreamExt as _};
use serde::Serialize;
use utoipa::ToSchema;

use super::{
    dto::{ListQuery, RayJobListQuery},
    problem::Problem,
};
use crate::{
    control::{ClusterWatch, Context, ControlPlane},
    domain::{ClusterInfo, Error, RayJobInfo, WatchEvent, WatchFrom, Watched, WatchedKind, watch_timeout},
};

/// NDJSON's media type.
const NDJSON: &str = "application/x-ndjson";

/// One line (NDJSON) or one event's data (SSE) of a watch.
#[derive(Debug, Serialize, ToSchema)]
#[allow(dead_code)] // Documents the wire; frames are written by `frame`.
pub(super) struct ClusterWatchEvent {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`, or `ERROR` (the last
    /// event of a watch the server ends: it says why).
    #[serde(rename = "type")]
    pub type_: String,
    /// Resume after this event by passing it as `resource_version` (or
    /// `Last-Event-ID`); absent on `ERROR`.
    pub resource_version: Option<String>,
    /// The cluster's summary, as list gives it; absent on `BOOKMARK` and
    /// `ERROR`.
    pub cluster: Option<ClusterInfo>,
    /// Why the server ended the watch (`ERROR` only): `gone` (list
    /// again), `permission_denied` (access revoked), `unavailable` (the
    /// server is stopping, or the client read too slowly: resume).
    pub error: Option<Problem>,
}

/// One line (NDJSON) or one event's data (SSE) of a watch of RayJobs.
#[derive(Debug, Serialize, ToSchema)]
#[allow(dead_code)] // Documents the wire; frames are written by `frame`.
pub(super) struct RayJobWatchEvent {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`, or `ERROR` (the last
    /// event of a watch the server ends: it says why).
    #[serde(rename = "type")]
    pub type_: String,
    /// Resume after this event by passing it as `resource_version` (or
    /// `Last-Event-ID`); absent on `ERROR`.
    pub resource_version: Option<String>,
    /// The RayJob as list gives it (its `exit_code` is read by a get);
    /// absent on `BOOKMARK` and `ERROR`.
    pub rayjob: Option<RayJobInfo>,
    /// Why the server ended the watch (`ERROR` only), as for clusters.
    pub error: Option<Problem>,
}

/// A watch request's parameters, as a list route's query has them.
pub(super) struct WatchParams<'a> {
    /// A page was asked for too (`page_size`, `page_token`).
    paged: bool,
    resource_version: Option<&'a str>,
    send_initial_events: Option<bool>,
    timeout_seconds: Option<u64>,
}

impl<'a> From<&'a ListQuery> for WatchParams<'a> {
    fn from(q: &'a ListQuery) -> Self {
        Self {
            paged: q.page_size.is_some() || q.page_token.is_some(),
            resource_version: q.resource_version.as_deref(),
            send_initial_events: q.send_initial_events,
            timeout_seconds: q.timeout_seconds,
        }
    }
}

impl<'a> From<&'a RayJobListQuery> for WatchParams<'a> {
    fn from(q: &'a RayJobListQuery) -> Self {
        Self {
            paged: false,
            resource_version: q.resource_version.as_deref(),
            send_initial_events: q.send_initial_events,
            timeout_seconds: q.timeout_seconds,
        }
    }
}

/// One frame's JSON and SSE name and id. A cluster's JSON is the shared
/// summary's, encoded once for every watcher and list.
fn frame(item: &Result<Arc<WatchEvent>, Error>, request_id: &str) -> (String, &'static str, Option<String>) {
    match item {
        Ok(e) => {
            let version = e.version.to_string();
            let kind = e.kind.as_str();
            let json = match &e.object {
                Some(Watched::Cluster(c)) => format!(
                    r#"{{"type":"{kind}","resource_version":"{version}","cluster":{}}}"#,
                    c.json()
                ),
                Some(Watched::RayJob(j)) => format!(
                    r#"{{"type":"{kind}","resource_version":"{version}","rayjob":{}}}"#,
                    serde_json::to_string(j).unwrap_or_else(|_| "null".into())
                ),
                None => format!(r#"{{"type":"{kind}","resource_version":"{version}"}}"#),
            };
            (json, e.kind.as_str(), Some(version))
        }
        Err(why) => {
            let mut problem = Problem::from(why.clone());
            request_id.clone_into(&mut problem.request_id);
            let json = serde_json::to_string(&serde_json::json!({"type": "ERROR", "error": problem}))
                .unwrap_or_else(|_| r#"{"type":"ERROR"}"#.to_owned());
            (json, "ERROR", None)
        }
    }
}

/// Whether the request asks for Server-Sent Events.
fn wants_events(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/event-stream"))
}

/// Where the watch starts: an `EventSource`'s `Last-Event-ID` (a
/// reconnect) wins over the query, which its URL repeats.
fn start(query: &WatchParams<'_>, headers: &HeaderMap) -> Result<WatchFrom, Error> {
    if query.paged {
        return Err(Error::invalid(
            "page_size",
            "a watch is not paged: leave out page_size and page_token",
        ));
    }
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty());
    if let Some(last) = last {
        return WatchFrom::read(Some(last), false)
            .map_err(|_| Error::invalid("Last-Event-ID", "is not a version this API gave out"));
    }
    WatchFrom::read(query.resource_version, query.send_initial_events.unwrap_or(false))
}

/// Checks a list query's watch parameters without `watch=true`.
pub(super) fn not_watching(query: &WatchParams<'_>) -> Result<(), Error> {
    if query.resource_version.is_some() || query.send_initial_events.is_some() || query.timeout_seconds.is_some() {
        return Err(Error::invalid(
            "watch",
            "resource_version, send_initial_events and timeout_seconds need watch=true",
        ));
    }
    Ok(())
}

/// Starts the watch of `what` and answers with its stream.
pub(super) async fn respond(
    plane: &ControlPlane,
    cx: &Context,
    what: WatchedKind,
    namespace: Option<&str>,
    query: &WatchParams<'_>,
    headers: &HeaderMap,
) -> Result<Response, Error> {
    let from = start(query, headers)?;
    let timeout = watch_timeout(query.timeout_seconds.unwrap_or(0))?;
    let watch = match what {
        WatchedKind::Clusters => plane.watch_clusters(cx, namespace, from, timeout).await?,
        WatchedKind::RayJobs => plane.watch_rayjobs(cx, namespace, from, timeout).await?,
    };
    let request_id = String::from(cx.meta.request_id.clone());
    let mut response = if wants_events(headers) {
        as_events(watch, request_id).into_response()
    } else {
        let lines = watch.map(move |item| {
            let mut line = frame(&item, &request_id).0;
            line.push('\n');
            Ok::<_, Infallible>(Bytes::from(line))
        });
        let mut r = Body::from_stream(lines).into_response();
        r.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(NDJSON));
        r
    };
    let h = response.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Reverse proxies (nginx) must pass events on as they come.
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(response)
}

fn as_events(watch: ClusterWatch, request_id: String) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let events = watch.map(move |item| {
        let (json, kind, version) = frame(&item, &request_id);
        let mut event = Event::default().event(kind.to_ascii_lowercase()).data(json);
        if let Some(v) = version {
            event = event.id(v);
        }
        Ok(event)
    });
    Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}
