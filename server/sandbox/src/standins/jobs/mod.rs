//! Ray's Jobs REST API on the dashboard stand-in, answering as a Ray 2.60
//! head does (`shared/reference/ray/jobs-api.md`) so that a client written
//! against it (Ray's `JobSubmissionClient`, `ray job submit`, krayne's own)
//! works against a real Ray head: `POST /api/jobs/` (200), `GET
//! /api/jobs/` (in submission order), `GET /api/jobs/{id}`, `GET
//! …/logs`, the WebSocket `…/logs/tail` (text frames of raw lines, close
//! 1000 at the end), `POST …/stop`, `DELETE` (terminal jobs only, else
//! 500), and `GET`/`PUT /api/packages/gcs/{name}` for working dirs.
//! Errors are Ray's: plain-text 404s, tracebacks for 400 and 500, 405 for
//! a browser's mutations.
//!
//! Jobs run for real: `sh -c <entrypoint>` in the unpacked working dir
//! with the job's `env_vars`, in a process group of its own that is
//! killed with the job, the pod or the sandbox. Like a real Ray head's
//! unauthenticated dashboard, this runs any command anyone who reaches the
//! port sends: the stand-ins bind loopback only.

mod packages;
mod process;
mod record;
mod reply;

use std::{
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use axum::{
    Router,
    body::Body,
    extract::{
        Path as UrlPath, State,
        ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code},
    },
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::get,
};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha224};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    sync::watch,
};

use self::{
    packages::Packages,
    record::{Job, Status},
    reply::{BodyError, Capped, from_browser, no_such_job, text, traceback, trouble},
};
pub(super) use reply::python_json;

/// Jobs one head keeps (Ray keeps every one; the sandbox bounds it).
const MAX_JOBS: usize = 10_000;
/// Lines in one frame of the log tail, and the characters that end a frame early.
const TAIL_LINES: usize = 10;
const TAIL_CHARS: usize = 20_000;
/// How often the tail looks for new lines.
const TAIL_POLL: Duration = Duration::from_millis(100);

/// One head's jobs and packages.
pub(super) struct Jobs {
    node_ip: String,
    /// The head's Ray node id (56 hex characters).
    node_id: String,
    /// Changes (or closes) when the pod stops serving.
    stopped: watch::Receiver<()>,
    table: Mutex<Vec<Job>>,
    packages: Mutex<Packages>,
    /// Packages, logs and working dirs; made on first use, removed with
    /// the head.
    root: Mutex<Option<tempfile::TempDir>>,
    seq: AtomicU64,
    /// When the head started (Ray counts a node idle from its start).
    started_ms: i64,
}

impl Jobs {
    pub(super) fn new(pod_uid: &str, node_ip: &str, stopped: watch::Receiver<()>) -> Arc<Self> {
        let node_id = Sha224::digest(pod_uid.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Arc::new(Self {
            node_ip: node_ip.to_owned(),
            node_id,
            stopped,
            table: Mutex::default(),
            packages: Mutex::default(),
            root: Mutex::default(),
            seq: AtomicU64::new(0),
            started_ms: now_ms(),
        })
    }

    fn root(&self) -> std::io::Result<PathBuf> {
        let mut root = super::lock(&self.root);
        if root.is_none() {
            *root = Some(tempfile::Builder::new().prefix("krayne-sandbox-ray-").tempdir()?);
        }
        root.as_ref()
            .map(|r| r.path().to_owned())
            .ok_or_else(|| std::io::Error::other("no directory"))
    }

    /// Changes (or closes) when the head stops serving.
    pub(super) fn stopped(&self) -> watch::Receiver<()> {
        self.stopped.clone()
    }

    /// The head's Ray node: its id and IP.
    pub(super) fn node(&self) -> (&str, &str) {
        (&self.node_id, &self.node_ip)
    }

    /// CPUs and GPUs in use now (running jobs' entrypoint resources), and
    /// since when (milliseconds since the epoch) none has been: Ray's
    /// `NodeIdleSeconds` counts from the node's start or the last moment
    /// a resource was held.
    pub(super) fn usage(&self) -> (f64, f64, Option<i64>) {
        let table = super::lock(&self.table);
        let (mut cpus, mut gpus, mut last_held) = (0.0, 0.0, self.started_ms);
        for job in table.iter().filter(|j| j.entrypoint_resources != (0.0, 0.0)) {
            match job.end_time {
                None if job.status == Status::Running => {
                    cpus += job.entrypoint_resources.0;
                    gpus += job.entrypoint_resources.1;
                }
                Some(end) => last_held = last_held.max(end),
                None => {}
            }
        }
        let idle_since = (cpus == 0.0 && gpus == 0.0).then_some(last_held);
        (cpus, gpus, idle_since)
    }

    /// Each job's driver log: `job-driver-<id>.log` and where it is.
    pub(super) fn driver_logs(&self) -> Vec<(String, PathBuf)> {
        super::lock(&self.table)
            .iter()
            .map(|j| (format!("job-driver-{}.log", j.submission_id), j.log.clone()))
            .collect()
    }

    /// Runs `f` on job `id`, if there is one.
    fn with<T>(&self, id: &str, f: impl FnOnce(&mut Job) -> T) -> Option<T> {
        super::lock(&self.table)
            .iter_mut()
            .find(|j| j.submission_id == id)
            .map(f)
    }

    /// Runs `f` on submission number `seq`, if it is still kept.
    fn with_seq<T>(&self, seq: u64, f: impl FnOnce(&mut Job) -> T) -> Option<T> {
        super::lock(&self.table).iter_mut().find(|j| j.seq == seq).map(f)
    }

    /// Sets up the job's working dir in `dir`: its `gcs://` package
    /// unpacked, or empty.
    async fn working_dir(&self, runtime_env: &Value, dir: &Path) -> Result<(), String> {
        packages::ensure_dir(dir).map_err(|e| format!("OSError: {e}"))?;
        let uri = match &runtime_env["working_dir"] {
            Value::Null => return Ok(()),
            Value::String(uri) => uri.clone(),
            other => {
                return Err(format!(
                    "TypeError: working_dir must be a string, got {}",
                    py_type(other)
                ));
            }
        };
        let Some(name) = uri.strip_prefix("gcs://") else {
            return Err(format!(
                "ValueError: the sandbox's Ray stand-in takes working dirs from gcs:// packages only (PUT /api/packages/gcs/<name>), not {uri}"
            ));
        };
        let Some(zip) = super::lock(&self.packages).get(name) else {
            return Err(format!("RuntimeEnvSetupError: Package {uri} does not exist"));
        };
        let into = dir.to_owned();
        tokio::task::spawn_blocking(move || packages::unpack(&zip, &into))
            .await
            .map_err(|e| format!("RuntimeError: {e}"))?
    }
}

/// Milliseconds since the epoch.
fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// Python's name for a JSON value's type.
fn py_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<class 'NoneType'>",
        Value::Bool(_) => "<class 'bool'>",
        Value::Number(n) if n.is_f64() => "<class 'float'>",
        Value::Number(_) => "<class 'int'>",
        Value::String(_) => "<class 'str'>",
        Value::Array(_) => "<class 'list'>",
        Value::Object(_) => "<class 'dict'>",
    }
}

/// The Jobs API's routes, behind Ray's browser guard.
pub(super) fn router(jobs: Arc<Jobs>) -> Router {
    Router::new()
        .route("/api/jobs/", get(list).post(submit))
        .route("/api/jobs/{id}", get(job).delete(delete))
        .route("/api/jobs/{id}/logs", get(logs))
        .route("/api/jobs/{id}/logs/tail", get(tail))
        .route("/api/jobs/{id}/stop", axum::routing::post(stop))
        .route("/api/packages/{protocol}/{name}", get(has_package).put(put_package))
        .fallback(|| async { text(StatusCode::NOT_FOUND, "404: Not Found") })
        .method_not_allowed_fallback(|| async { text(StatusCode::METHOD_NOT_ALLOWED, "405: Method Not Allowed") })
        .layer(axum::middleware::from_fn(reply::browser_guard))
        .with_state(jobs)
}

type JobsState = State<Arc<Jobs>>;

/// A submission, as Ray's `JobSubmitRequest` takes it.
struct Submission {
    entrypoint: String,
    /// The entrypoint's CPUs and GPUs, reserved while it runs.
    entrypoint_resources: (f64, f64),
    submission_id: Option<String>,
    runtime_env: Value,
    metadata: Value,
}

/// Reads a `JobSubmitRequest`; the error is the exception Ray raises.
fn submission(body: &Value) -> Result<Submission, String> {
    const KEYS: [&str; 10] = [
        "entrypoint",
        "submission_id",
        "job_id",
        "runtime_env",
        "metadata",
        "entrypoint_num_cpus",
        "entrypoint_num_gpus",
        "entrypoint_memory",
        "entrypoint_resources",
        "entrypoint_label_selector",
    ];
    let Some(fields) = body.as_object() else {
        let kind = py_type(body).trim_start_matches("<class '").trim_end_matches("'>");
        return Err(format!(
            "TypeError: ray.dashboard.modules.job.common.JobSubmitRequest() argument after ** must be a mapping, not {kind}"
        ));
    };
    if let Some(bogus) = fields.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(format!(
            "TypeError: JobSubmitRequest.__init__() got an unexpected keyword argument '{bogus}'"
        ));
    }
    let entrypoint = match fields.get("entrypoint") {
        None => {
            return Err(
                "TypeError: JobSubmitRequest.__init__() missing 1 required positional argument: 'entrypoint'".into(),
            );
        }
        Some(Value::String(e)) => e.clone(),
        Some(other) => {
            return Err(format!(
                "TypeError: entrypoint must be a string, got {}",
                py_type(other)
            ));
        }
    };
    let optional_string = |key: &str| match fields.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!(
            "TypeError: {key} must be a string if provided, got {}",
            py_type(other)
        )),
    };
    let submission_id = optional_string("submission_id")?.or(optional_string("job_id")?);
    let string_map = |key: &str| -> Result<(), String> {
        match fields.get(key) {
            None | Some(Value::Null) => Ok(()),
            Some(Value::Object(m)) => match m.values().find(|v| !v.is_string()) {
                Some(v) => Err(format!("TypeError: {key} values must be strings, got {}", py_type(v))),
                None => Ok(()),
            },
            Some(other) => Err(format!("TypeError: {key} must be a dict, got {}", py_type(other))),
        }
    };
    string_map("metadata")?;
    string_map("entrypoint_label_selector")?;
    for key in ["entrypoint_num_cpus", "entrypoint_num_gpus"] {
        match fields.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Number(n)) if n.as_f64().is_some_and(|n| n >= 0.0) => {}
            Some(Value::Number(n)) => return Err(format!("ValueError: {key} must be non-negative, got {n}")),
            Some(other) => return Err(format!("TypeError: {key} must be a number, got {}", py_type(other))),
        }
    }
    match fields.get("entrypoint_memory") {
        None | Some(Value::Null) => {}
        Some(Value::Number(n)) if n.as_u64().is_some() => {}
        Some(other) => {
            return Err(format!(
                "TypeError: entrypoint_memory must be an int, got {}",
                py_type(other)
            ));
        }
    }
    match fields.get("entrypoint_resources") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            if let Some(v) = m.values().find(|v| !v.is_number()) {
                return Err(format!(
                    "TypeError: entrypoint_resources values must be numbers, got {}",
                    py_type(v)
                ));
            }
        }
        Some(other) => {
            return Err(format!(
                "TypeError: entrypoint_resources must be a dict, got {}",
                py_type(other)
            ));
        }
    }
    let runtime_env = fields.get("runtime_env").cloned().unwrap_or(Value::Null);
    match &runtime_env {
        Value::Null => {}
        Value::Object(env) => match env.get("env_vars") {
            None | Some(Value::Null) => {}
            Some(Value::Object(vars)) if vars.values().all(Value::is_string) => {}
            Some(other) => {
                return Err(format!(
                    "TypeError: env_vars must be of type Dict[str, str], got {}",
                    py_type(other)
                ));
            }
        },
        other => return Err(format!("TypeError: runtime_env must be a dict, got {}", py_type(other))),
    }
    let amount = |key: &str| fields.get(key).and_then(Value::as_f64).unwrap_or(0.0);
    Ok(Submission {
        entrypoint_resources: (amount("entrypoint_num_cpus"), amount("entrypoint_num_gpus")),
        entrypoint,
        submission_id: submission_id.filter(|id| !id.is_empty()),
        runtime_env,
        metadata: fields.get("metadata").cloned().unwrap_or(Value::Null),
    })
}

/// `raysubmit_` and 16 characters, as Ray generates submission ids.
fn generated_id() -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnpqrstuvwxyz123456789";
    let suffix: String = (0..16)
        .map(|_| char::from(ALPHABET[fastrand::usize(..ALPHABET.len())]))
        .collect();
    format!("raysubmit_{suffix}")
}

/// `POST /api/jobs/`: 200 with the id; the job runs in the background.
async fn submit(State(jobs): JobsState, body: Body) -> Response {
    let mut body = Capped::new(body);
    let mut bytes = Vec::new();
    loop {
        match body.next().await {
            Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
            Ok(None) => break,
            Err(e) => return e.into_response("submit_job"),
        }
    }
    let Ok(body) = serde_json::from_slice::<Value>(&bytes) else {
        return trouble();
    };
    let request = match submission(&body) {
        Ok(r) => r,
        Err(exception) => return traceback(StatusCode::BAD_REQUEST, "submit_job", &exception),
    };
    let root = match jobs.root() {
        Ok(r) => r,
        Err(e) => {
            return traceback(
                StatusCode::INTERNAL_SERVER_ERROR,
                "submit_job",
                &format!("OSError: {e}"),
            );
        }
    };
    let id = request.submission_id.unwrap_or_else(generated_id);
    let seq = {
        let mut table = super::lock(&jobs.table);
        if table.iter().any(|j| j.submission_id == id) {
            return traceback(
                StatusCode::INTERNAL_SERVER_ERROR,
                "submit_job",
                &format!(
                    "ValueError: Job with submission_id {id} already exists. Please use a different submission_id."
                ),
            );
        }
        if table.len() >= MAX_JOBS {
            return traceback(
                StatusCode::INTERNAL_SERVER_ERROR,
                "submit_job",
                &format!("RuntimeError: this sandbox head keeps at most {MAX_JOBS} jobs: delete finished ones"),
            );
        }
        let n = jobs.seq.fetch_add(1, Ordering::Relaxed);
        table.push(Job {
            seq: n,
            submission_id: id.clone(),
            status: Status::Pending,
            entrypoint: request.entrypoint,
            entrypoint_resources: request.entrypoint_resources,
            message: "Job has not started yet.".to_owned(),
            error_type: None,
            start_time: now_ms(),
            end_time: None,
            metadata: request.metadata,
            runtime_env: request.runtime_env,
            driver: None,
            driver_exit_code: None,
            log: root.join(format!("job-driver-{n}.log")),
            dir: root.join(format!("job-{n}")),
            stop: Arc::default(),
        });
        n
    };
    tokio::spawn(process::supervise(jobs.clone(), seq));
    python_json(StatusCode::OK, &json!({"job_id": id, "submission_id": id}))
}

/// `GET /api/jobs/`: every job, in submission order.
async fn list(State(jobs): JobsState, headers: HeaderMap) -> Response {
    let redact = from_browser(&headers);
    let views: Vec<Value> = super::lock(&jobs.table).iter().map(|j| j.view(redact)).collect();
    python_json(StatusCode::OK, &Value::Array(views))
}

async fn job(State(jobs): JobsState, UrlPath(id): UrlPath<String>, headers: HeaderMap) -> Response {
    let redact = from_browser(&headers);
    match jobs.with(&id, |j| j.view(redact)) {
        Some(view) => python_json(StatusCode::OK, &view),
        None => no_such_job(&id),
    }
}

/// `GET /api/jobs/{id}/logs`: the whole log (empty before the entrypoint runs).
async fn logs(State(jobs): JobsState, UrlPath(id): UrlPath<String>) -> Response {
    let Some(log) = jobs.with(&id, |j| j.log.clone()) else {
        return no_such_job(&id);
    };
    let text = tokio::fs::read(&log).await.unwrap_or_default();
    python_json(StatusCode::OK, &json!({"logs": String::from_utf8_lossy(&text)}))
}

/// `POST /api/jobs/{id}/stop`: `true` when the job was still going.
async fn stop(State(jobs): JobsState, UrlPath(id): UrlPath<String>) -> Response {
    let stopped = jobs.with(&id, |j| {
        let going = !j.status.is_terminal();
        if going {
            j.stop.notify_one();
        }
        going
    });
    match stopped {
        Some(stopped) => python_json(StatusCode::OK, &json!({"stopped": stopped})),
        None => no_such_job(&id),
    }
}

/// `DELETE /api/jobs/{id}`: terminal jobs only; the log and working dir go too.
async fn delete(State(jobs): JobsState, UrlPath(id): UrlPath<String>) -> Response {
    let removed = {
        let mut table = super::lock(&jobs.table);
        match table.iter().position(|j| j.submission_id == id) {
            None => return no_such_job(&id),
            Some(i) if !table[i].status.is_terminal() => {
                let status = table[i].status.name();
                drop(table);
                return traceback(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "delete_job",
                    &format!(
                        "RuntimeError: Attempted to delete job '{id}', but it is in a non-terminal state {status}."
                    ),
                );
            }
            Some(i) => table.remove(i),
        }
    };
    let _ = tokio::fs::remove_file(&removed.log).await;
    let _ = tokio::fs::remove_dir_all(&removed.dir).await;
    python_json(StatusCode::OK, &json!({"deleted": true}))
}

/// `GET /api/jobs/{id}/logs/tail`: the log as text frames of up to ten
/// lines, then a normal close once the job has ended and all is sent.
async fn tail(
    State(jobs): JobsState,
    UrlPath(id): UrlPath<String>,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    let Some((seq, log)) = jobs.with(&id, |j| (j.seq, j.log.clone())) else {
        return no_such_job(&id);
    };
    match upgrade {
        Ok(ws) => ws.on_upgrade(move |socket| follow(jobs, seq, log, socket)),
        Err(_) => text(StatusCode::INTERNAL_SERVER_ERROR, "500: WebSocket proxy error"),
    }
}

/// Sends submission `seq`'s log as it grows. The file, once open, is
/// read to its end even if the job is deleted meanwhile.
async fn follow(jobs: Arc<Jobs>, seq: u64, log: PathBuf, mut socket: WebSocket) {
    let mut stopped = jobs.stopped.clone();
    let mut file: Option<tokio::fs::File> = None;
    let mut partial: Vec<u8> = Vec::new();
    loop {
        // Whether the job has ended (or gone) is read before the file,
        // so nothing written before the end is missed.
        let done = jobs.with_seq(seq, |j| j.status.is_terminal()).unwrap_or(true);
        if file.is_none() {
            file = tokio::fs::File::open(&log).await.ok();
        }
        let mut fresh = Vec::new();
        if let Some(f) = file.as_mut() {
            let _ = f.take(1024 * 1024).read_to_end(&mut fresh).await;
        }
        partial.extend_from_slice(&fresh);
        let at_end = fresh.is_empty() && done;
        let complete = if at_end || partial.len() > TAIL_CHARS {
            partial.len()
        } else {
            partial.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1)
        };
        let lines: Vec<u8> = partial.drain(..complete).collect();
        for frame in frames(&String::from_utf8_lossy(&lines)) {
            if socket.send(Message::Text(frame.into())).await.is_err() {
                return;
            }
        }
        if at_end {
            break;
        }
        if fresh.is_empty() {
            tokio::select! {
                () = tokio::time::sleep(TAIL_POLL) => {}
                incoming = socket.recv() => match incoming {
                    Some(Ok(Message::Close(_)) | Err(_)) | None => return,
                    Some(Ok(_)) => {}
                },
                _ = stopped.changed() => return,
            }
        }
    }
    let close = CloseFrame {
        code: close_code::NORMAL,
        reason: "".into(),
    };
    let _ = socket.send(Message::Close(Some(close))).await;
}

/// Lines in frames of up to [`TAIL_LINES`]; a frame ends early at
/// [`TAIL_CHARS`] bytes, cutting a longer line.
fn frames(text: &str) -> Vec<String> {
    let mut frames = Vec::new();
    let mut frame = String::new();
    let mut count = 0;
    for line in text.split_inclusive('\n') {
        let mut rest = line;
        while !rest.is_empty() {
            let room = TAIL_CHARS.saturating_sub(frame.len()).max(1);
            let cut = if rest.len() <= room {
                rest.len()
            } else {
                (1..=room)
                    .rev()
                    .find(|i| rest.is_char_boundary(*i))
                    .unwrap_or(rest.len())
            };
            let (piece, tail) = rest.split_at(cut);
            frame.push_str(piece);
            rest = tail;
            if rest.is_empty() && piece.ends_with('\n') {
                count += 1;
            }
            if count == TAIL_LINES || frame.len() >= TAIL_CHARS {
                frames.push(std::mem::take(&mut frame));
                count = 0;
            }
        }
    }
    if !frame.is_empty() {
        frames.push(frame);
    }
    frames
}

/// `GET /api/packages/{protocol}/{name}`: 200, empty, when it is there.
async fn has_package(State(jobs): JobsState, UrlPath((protocol, name)): UrlPath<(String, String)>) -> Response {
    if protocol != "gcs" {
        return trouble();
    }
    if super::lock(&jobs.packages).get(&name).is_some() {
        StatusCode::OK.into_response()
    } else {
        text(StatusCode::NOT_FOUND, format!("Package gcs://{name} does not exist"))
    }
}

/// `PUT /api/packages/{protocol}/{name}`: keeps any bytes (Ray checks
/// nothing until a job unpacks them).
async fn put_package(
    State(jobs): JobsState,
    UrlPath((protocol, name)): UrlPath<(String, String)>,
    body: Body,
) -> Response {
    const FUNCTION: &str = "upload_package";
    if protocol != "gcs" {
        return traceback(
            StatusCode::INTERNAL_SERVER_ERROR,
            FUNCTION,
            "ValueError: upload_package_to_gcs should not be called with a remote path.",
        );
    }
    let dir = match jobs.root().map(|r| r.join("packages")) {
        Ok(d) => d,
        Err(e) => return BodyError::Io(e).into_response(FUNCTION),
    };
    if let Err(e) = packages::ensure_dir(&dir) {
        return BodyError::Io(e).into_response(FUNCTION);
    }
    let upload = Upload(super::lock(&jobs.packages).new_file(&dir));
    let size = match save(Capped::new(body), &upload.0).await {
        Ok(n) => n,
        Err(e) => return e.into_response(FUNCTION),
    };
    match super::lock(&jobs.packages).keep(&name, upload.keep(), size) {
        Ok(()) => StatusCode::OK.into_response(),
        Err(why) => traceback(
            StatusCode::INTERNAL_SERVER_ERROR,
            FUNCTION,
            &format!("RuntimeError: {why}"),
        ),
    }
}

/// An upload's file, removed unless kept (a client that goes away
/// mid-upload drops the handler, and with it this).
struct Upload(PathBuf);

impl Upload {
    fn keep(mut self) -> PathBuf {
        std::mem::take(&mut self.0)
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        if !self.0.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

/// Writes the body to `path`; its size.
async fn save(mut body: Capped, path: &Path) -> Result<u64, BodyError> {
    let mut file = tokio::fs::File::create(path).await.map_err(BodyError::Io)?;
    let mut size = 0u64;
    while let Some(chunk) = body.next().await? {
        file.write_all(&chunk).await.map_err(BodyError::Io)?;
        size += chunk.len() as u64;
    }
    file.flush().await.map_err(BodyError::Io)?;
    Ok(size)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn submissions_are_checked_as_ray_checks_them() {
        let ok = submission(&json!({"entrypoint": "echo", "metadata": {}, "runtime_env": {}})).unwrap();
        assert_eq!((ok.entrypoint.as_str(), ok.submission_id), ("echo", None));
        let err = |v: Value| submission(&v).err().unwrap();
        assert_eq!(
            err(json!({"entrypoint": "x", "bogus": 1})),
            "TypeError: JobSubmitRequest.__init__() got an unexpected keyword argument 'bogus'"
        );
        assert!(err(json!({})).contains("missing 1 required positional argument: 'entrypoint'"));
        assert_eq!(
            err(json!({"entrypoint": 123})),
            "TypeError: entrypoint must be a string, got <class 'int'>"
        );
        assert!(err(json!({"entrypoint": "x", "runtime_env": {"env_vars": {"A": 1}}})).contains("env_vars"));
        assert!(err(json!({"entrypoint": "x", "entrypoint_num_cpus": -1})).starts_with("ValueError"));
        assert!(err(json!([])).contains("must be a mapping, not list"));
        let blank = submission(&json!({"entrypoint": "x", "submission_id": ""})).unwrap();
        assert_eq!(blank.submission_id, None, "an empty id gets a generated one");
    }

    #[test]
    fn generated_ids_look_like_rays() {
        let id = generated_id();
        assert!(id.starts_with("raysubmit_") && id.len() == 26, "{id}");
        assert!(!id[10..].contains(['I', 'l', 'O', 'o', '0']), "{id}");
    }

    #[test]
    fn the_tail_sends_ten_lines_a_frame() {
        let text: String = (0..25).map(|i| format!("l{i}\n")).collect();
        let f = frames(&text);
        assert_eq!(f.len(), 3);
        assert!(f[0].starts_with("l0\n") && f[0].ends_with("l9\n"));
        let long = frames(&format!("{}\nshort\n", "x".repeat(45_000)));
        assert!(long.iter().all(|f| f.len() <= TAIL_CHARS), "a long line is cut");
        assert_eq!(long.concat(), format!("{}\nshort\n", "x".repeat(45_000)));
        assert_eq!(frames("no newline"), ["no newline"]);
    }
}
