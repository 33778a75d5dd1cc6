//! Containers' output, as a kubelet keeps it and the API's `pods/log`
//! serves it: what a Ray head or worker prints when it starts
//! (`ray start … --block`), a crash-looping container's last words, the
//! previous container's log after a restart; and `GET …/pods/{name}/log`
//! with `container`, `tailLines`, `sinceSeconds`, `limitBytes`,
//! `previous` and `follow`, answering as the API server does when there is
//! no log (a container waiting to start, no previous container).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use axum::{
    body::Body,
    extract::{Path, Query, State},
    http::header,
    response::{IntoResponse as _, Response},
};
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::{broadcast, watch};

use super::{
    ApiError, Resource,
    operator::FAULT_ANNOTATION,
    state::Shared,
    store::{ChangeKind, Store, meta_str},
};

/// One container's output: its lines (with when each was written), and
/// the previous container's.
#[derive(Default)]
struct ContainerLog {
    current: Vec<(jiff::Timestamp, String)>,
    previous: Option<Vec<(jiff::Timestamp, String)>>,
    /// Whether the current container runs (a follow ends when it stops).
    running: bool,
    /// The `startedAt` of the container the lines are of.
    started_at: String,
}

/// Every container's output, by (pod uid, container name).
pub(super) struct PodLogs {
    logs: Mutex<HashMap<(String, String), ContainerLog>>,
    /// Something was written or a container stopped.
    written: Option<broadcast::Sender<()>>,
}

impl PodLogs {
    pub(super) fn new() -> Self {
        Self {
            logs: Mutex::default(),
            written: Some(broadcast::channel(1024).0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), ContainerLog>> {
        self.logs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn notify(&self) {
        if let Some(w) = &self.written {
            let _ = w.send(());
        }
    }

    /// Brings the logs in step with `pod`'s containers.
    fn on_pod(&self, pod: &Value) {
        let uid = meta_str(pod, "uid").to_owned();
        let crashes = pod["metadata"]["annotations"][FAULT_ANNOTATION] == "crash-loop";
        let head = pod["metadata"]["labels"]["ray.io/node-type"] == "head";
        let ip = pod["status"]["podIP"].as_str().unwrap_or("").to_owned();
        let mut logs = self.lock();
        for status in pod["status"]["containerStatuses"].as_array().into_iter().flatten() {
            let name = status["name"].as_str().unwrap_or("").to_owned();
            let log = logs.entry((uid.clone(), name.clone())).or_default();
            match status["state"]["running"]["startedAt"].as_str() {
                Some(started) if started != log.started_at => {
                    if !log.started_at.is_empty() {
                        log.previous = Some(std::mem::take(&mut log.current));
                    }
                    log.started_at = started.to_owned();
                    log.running = true;
                    log.current = output(&name, head, &ip, crashes);
                }
                Some(_) => {}
                None => log.running = false,
            }
        }
        drop(logs);
        self.notify();
    }

    fn forget(&self, pod: &Value) {
        let uid = meta_str(pod, "uid");
        self.lock().retain(|(u, _), _| u != uid);
        self.notify();
    }
}

/// What a container prints: Ray starting (`ray start … --block`), or, in
/// a pod made to crash-loop, its command failing.
fn output(container: &str, head: bool, ip: &str, crashes: bool) -> Vec<(jiff::Timestamp, String)> {
    let now = jiff::Timestamp::now();
    let stamp = now.strftime("%Y-%m-%d %H:%M:%S,%3f").to_string();
    let lines: Vec<String> = if crashes {
        vec![
            "Traceback (most recent call last):".into(),
            "  File \"/home/ray/anaconda3/bin/ray\", line 5, in <module>".into(),
            "    from ray.scripts.scripts import main".into(),
            "ModuleNotFoundError: No module named 'ray.scripts'".into(),
        ]
    } else if container == "autoscaler" {
        vec![format!(
            "{stamp}\tINFO monitor.py:690 -- Starting monitor using ray installation"
        )]
    } else {
        let mut lines = vec![
            format!(
                "{stamp}\tINFO usage_lib.py:441 -- Usage stats collection is enabled by default without user confirmation because this terminal is detected to be non-interactive."
            ),
            format!("{stamp}\tINFO scripts.py:865 -- Local node IP: {ip}"),
            format!("{stamp}\tSUCC scripts.py:902 -- --------------------"),
            format!("{stamp}\tSUCC scripts.py:903 -- Ray runtime started."),
            format!("{stamp}\tSUCC scripts.py:904 -- --------------------"),
        ];
        if head {
            lines.push(format!(
                "{stamp}\tINFO scripts.py:936 -- To connect to this Ray cluster, run `ray.init()` on this node"
            ));
        }
        lines.push(format!("{stamp}\tINFO scripts.py:1048 -- --block"));
        lines.push(format!(
            "{stamp}\tINFO scripts.py:1049 -- This command will now block forever until terminated by a signal."
        ));
        lines
    };
    lines.into_iter().map(|l| (now, l)).collect()
}

/// Keeps the logs in step with the pods until `stop` changes.
pub(super) async fn run(store: Arc<Store>, logs: Arc<PodLogs>, mut stop: watch::Receiver<bool>) {
    let mut changes = store.subscribe();
    loop {
        tokio::select! {
            change = changes.recv() => match change {
                Ok(c) if c.resource == Resource::Pod && c.kind == ChangeKind::Deleted => logs.forget(&c.object),
                Ok(c) if c.resource == Resource::Pod => logs.on_pod(&c.object),
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = stop.changed() => return,
        }
    }
}

/// `pods/log`'s query.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct LogQuery {
    container: Option<String>,
    tail_lines: Option<usize>,
    since_seconds: Option<i64>,
    limit_bytes: Option<usize>,
    previous: Option<bool>,
    follow: Option<bool>,
}

/// `GET /api/v1/namespaces/{ns}/pods/{name}/log`.
pub(super) async fn handle(
    State(s): State<Shared>,
    Path((ns, name)): Path<(String, String)>,
    Query(q): Query<LogQuery>,
) -> Response {
    match answer(&s, &ns, &name, &q) {
        Ok(response) => response,
        Err(e) => e.into_response(),
    }
}

fn answer(s: &Shared, ns: &str, name: &str, q: &LogQuery) -> Result<Response, ApiError> {
    let pod = s.store.get(Resource::Pod, ns, name)?;
    let containers: Vec<String> = ["initContainers", "containers"]
        .iter()
        .flat_map(|k| pod["spec"][*k].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect();
    let main: Vec<&Value> = pod["spec"]["containers"]
        .as_array()
        .map(|c| c.iter().collect())
        .unwrap_or_default();
    let container = match &q.container {
        Some(c) if containers.contains(c) => c.clone(),
        Some(c) => {
            return Err(ApiError::bad_request(format!(
                "container {c} is not valid for pod {name}"
            )));
        }
        None if main.len() == 1 => main[0]["name"].as_str().unwrap_or("").to_owned(),
        None => {
            let names: Vec<&str> = main.iter().filter_map(|c| c["name"].as_str()).collect();
            return Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                names.join(" ")
            )));
        }
    };
    let uid = meta_str(&pod, "uid").to_owned();
    let key = (uid, container.clone());
    let previous = q.previous == Some(true);
    let (lines, started_at) = {
        let logs = s.pod_logs.lock();
        let log = logs.get(&key);
        let started_at = log.map(|l| l.started_at.clone()).unwrap_or_default();
        let lines = match (log, previous) {
            (Some(log), true) => log.previous.clone(),
            (Some(log), false) if !log.started_at.is_empty() => Some(log.current.clone()),
            _ => None,
        };
        match lines {
            Some(lines) => (lines, started_at),
            None if previous => {
                return Err(ApiError::bad_request(format!(
                    "previous terminated container \"{container}\" in pod \"{name}\" not found"
                )));
            }
            None => {
                let waiting = pod["status"]["containerStatuses"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|c| c["name"] == container.as_str())
                    .and_then(|c| c["state"]["waiting"]["reason"].as_str().map(str::to_owned))
                    .unwrap_or_else(|| "ContainerCreating".to_owned());
                let why = match waiting.as_str() {
                    "ErrImagePull" | "ImagePullBackOff" => "trying and failing to pull image".to_owned(),
                    other => other.to_owned(),
                };
                return Err(ApiError::bad_request(format!(
                    "container \"{container}\" in pod \"{name}\" is waiting to start: {why}"
                )));
            }
        }
    };
    let text = select(&lines, q);
    if q.follow != Some(true) || previous {
        return Ok(([(header::CONTENT_TYPE, "text/plain")], text).into_response());
    }
    let written = s.pod_logs.written.as_ref().map(broadcast::Sender::subscribe);
    let follower = Follower {
        logs: s.pod_logs.clone(),
        key,
        sent: lines.len(),
        started: started_at,
        written,
    };
    let first = futures::stream::once(async move { Ok::<_, std::io::Error>(text) });
    let rest = futures::stream::unfold(follower, |mut f| async move {
        let text = f.next().await?;
        Some((Ok(text), f))
    });
    let body = Body::from_stream(futures::StreamExt::chain(first, rest));
    Ok(([(header::CONTENT_TYPE, "text/plain")], body).into_response())
}

/// `lines` as `q` asks for them: since, tail, at most `limitBytes`.
fn select(lines: &[(jiff::Timestamp, String)], q: &LogQuery) -> String {
    let since = q
        .since_seconds
        .map(|s| jiff::Timestamp::now() - jiff::SignedDuration::from_secs(s));
    let kept: Vec<&String> = lines
        .iter()
        .filter(|(at, _)| since.is_none_or(|since| *at >= since))
        .map(|(_, l)| l)
        .collect();
    let from = q.tail_lines.map_or(0, |n| kept.len().saturating_sub(n));
    let mut text: String = kept[from..].iter().map(|l| format!("{l}\n")).collect();
    if let Some(limit) = q.limit_bytes
        && text.len() > limit
    {
        let mut cut = limit;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    text
}

/// A followed log: new lines as they are written, until the container
/// stops or the pod goes.
struct Follower {
    logs: Arc<PodLogs>,
    key: (String, String),
    sent: usize,
    /// The container followed: a restart is another.
    started: String,
    written: Option<broadcast::Receiver<()>>,
}

impl Follower {
    async fn next(&mut self) -> Option<String> {
        loop {
            {
                let logs = self.logs.lock();
                let log = logs.get(&self.key)?;
                if self.started != log.started_at || !log.running {
                    return None;
                }
                if log.current.len() > self.sent {
                    let text: String = log.current[self.sent..].iter().map(|(_, l)| format!("{l}\n")).collect();
                    self.sent = log.current.len();
                    return Some(text);
                }
            }
            match self.written.as_mut()?.recv().await {
                Ok(()) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_and_limit_cut_as_kubernetes_does() {
        let lines = output("ray-head", true, "127.0.0.9", false);
        let q = LogQuery {
            tail_lines: Some(2),
            ..LogQuery::default()
        };
        let text = select(&lines, &q);
        assert_eq!(text.lines().count(), 2);
        assert!(text.ends_with("terminated by a signal.\n"), "{text}");
        let q = LogQuery {
            limit_bytes: Some(10),
            ..LogQuery::default()
        };
        assert_eq!(select(&lines, &q).len(), 10);
    }
}
