//! Requests to a head's dashboard, one HTTP/1 request per connection the
//! control plane opens ([`HeadLink::dial`]), and the job log's WebSocket.

use bytes::Bytes;
use futures::StreamExt as _;
use http_body_util::{BodyExt as _, StreamBody};
use hyper::{
    Method, Request,
    body::{Frame, Incoming},
    client::conn::http1::SendRequest,
};
use hyper_util::rt::TokioIo;
use krayne_core::domain::{
    Error, HeadLink, HeadReader, Job, LogStream, PackageBody, ResourceKind, ray_auth::RAY_AUTH_HEADER,
};
use serde_json::Value;
use tokio_util::compat::FuturesAsyncReadCompatExt as _;

use super::{
    HttpRayHeads,
    budget::{self, Held, Spent},
    reads::{ERROR_ANSWER_LIMIT, HeadRead, job_path},
    wire::{self, Answer},
};

/// How krayne introduces itself to Ray (never as a browser: Ray refuses a
/// browser's mutations).
const USER_AGENT: &str = concat!("krayne-server/", env!("CARGO_PKG_VERSION"));
/// The most hyper buffers of a head's answer before krayne reads it (its
/// default, ~400 KiB, would be per connection on top of the budget).
const READ_BUFFER: usize = 64 * 1024;
/// What one connection to a head buffers besides the answer krayne
/// holds: a port-forward's pipe (kube-rs's, 1 MiB) and the HTTP reader's
/// ([`READ_BUFFER`]).
const CONNECTION_BUFFERS: usize = 1024 * 1024 + READ_BUFFER;
/// The most one read of a head holds: its connection's buffers and the
/// largest answer read whole.
pub const LARGEST_HEAD_READ: usize = CONNECTION_BUFFERS + HeadRead::LogFile.limit();
/// Longest krayne waits for a head's answer to start, then to end (one
/// request's, not a followed stream's).
const ANSWER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// The largest WebSocket message or frame read from a head's log tail:
/// Ray sends a batch of lines per message, far smaller.
const MAX_TAIL_MESSAGE: usize = 1024 * 1024;

impl HttpRayHeads {
    /// A job as the head has it.
    pub(crate) async fn read_job(&self, head: &HeadLink, id: &str) -> Result<Job, Error> {
        let answer = self
            .request(head, Method::GET, &job_path(id), None, HeadRead::Job)
            .await?;
        if answer.status != 200 {
            return Err(answer.error(ResourceKind::Job, id));
        }
        wire::job(answer.parse()?)
    }

    /// One request to the head, with a JSON body or none; its answer read
    /// as `read`.
    pub(crate) async fn request(
        &self,
        head: &HeadLink,
        method: Method,
        path: &str,
        json: Option<Value>,
        read: HeadRead,
    ) -> Result<Answer, Error> {
        let (body, size) = match json {
            Some(json) => {
                let bytes = Bytes::from(json.to_string());
                let size = bytes.len() as u64;
                (futures::stream::once(async move { Ok(bytes) }).boxed(), Some(size))
            }
            None => (futures::stream::empty().boxed(), None),
        };
        self.request_streamed(head, method, path, size, body, read).await
    }

    /// One request to the head on a connection of its own, its body
    /// streamed.
    pub(crate) async fn request_streamed(
        &self,
        head: &HeadLink,
        method: Method,
        path: &str,
        size: Option<u64>,
        body: PackageBody,
        read: HeadRead,
    ) -> Result<Answer, Error> {
        // The connection goes with this call: an answer read whole, or
        // given up on, needs it no more.
        let (mut sender, _connection) = open(head).await?;
        let has_body = size.is_some() || method == Method::PUT;
        // An upload's answer comes once the head has its body.
        let headers_within = if method == Method::PUT {
            None
        } else {
            Some(ANSWER_TIMEOUT)
        };
        let mut request = request_to(head, method, path);
        if let Some(size) = size {
            request = request.header(hyper::header::CONTENT_LENGTH, size);
        }
        if has_body && path.starts_with("/api/jobs") {
            request = request.header(hyper::header::CONTENT_TYPE, "application/json");
        }
        let request = request
            .body(StreamBody::new(body.map(|chunk| chunk.map(Frame::data)).boxed()))
            .map_err(|e| Error::Internal(format!("a request to Ray: {e}")))?;
        let sent = sender.send_request(request);
        let response = match headers_within {
            Some(within) => tokio::time::timeout(within, sent).await.map_err(|_| late(read))?,
            None => sent.await,
        };
        let response = response.map_err(|e| unavailable(&e))?;
        let status = response.status().as_u16();
        tokio::time::timeout(
            ANSWER_TIMEOUT,
            self.read_answer(share_of(head), status, response.into_body(), read),
        )
        .await
        .map_err(|_| late(read))?
    }

    /// A head's answer, read within `read`'s limit (an error's within
    /// [`ERROR_ANSWER_LIMIT`], its rest not waited for) and the replica's
    /// budget, which the answer holds until it is dropped.
    async fn read_answer(
        &self,
        share: Option<&str>,
        status: u16,
        mut body: Incoming,
        read: HeadRead,
    ) -> Result<Answer, Error> {
        let limit = if status == 200 {
            read.limit()
        } else {
            ERROR_ANSWER_LIMIT
        };
        // Kept as the frames came (no copy while reading, none at all for
        // an answer refused as too large), joined once complete.
        let mut frames: Vec<Bytes> = Vec::new();
        let mut read_so_far = 0;
        let mut held: Option<Held> = None;
        // The connection's own buffers first (a port-forward's pipe, the
        // HTTP reader's): what reading a head costs besides its answer.
        // krayne's own reads, which wait for their budget, take the whole
        // answer's worth at once: one waiting to grow behind others waiting
        // to start would wait for ever.
        let up_front = match share {
            Some(_) => CONNECTION_BUFFERS,
            None => CONNECTION_BUFFERS + limit,
        };
        self.reserve_head_bytes(share, read, &mut held, up_front).await?;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| {
                Error::Unavailable(format!("the cluster's Ray head (dashboard) broke off its answer: {e}"))
            })?;
            let Ok(data) = frame.into_data() else { continue };
            let take = data.len().min(limit - read_so_far);
            if share.is_some() {
                self.reserve_head_bytes(share, read, &mut held, budget::growth(read_so_far, read_so_far + take))
                    .await?;
            }
            read_so_far += take;
            // A copy of its own: a slice would keep hyper's whole read buffer
            // alive, more than the budget holds.
            frames.push(Bytes::copy_from_slice(&data[..take]));
            if take < data.len() {
                if status == 200 {
                    refused(read, "too_large");
                    return Err(Error::BadGateway(format!(
                        "the cluster's Ray head sent more than krayne reads of its {} ({} KiB){}",
                        read.as_str().replace('_', " "),
                        limit / 1024,
                        read.instead()
                    )));
                }
                break;
            }
        }
        let body = match frames.len() {
            1 => frames.swap_remove(0),
            _ => {
                let mut joined = Vec::with_capacity(read_so_far);
                for frame in &frames {
                    joined.extend_from_slice(frame);
                }
                Bytes::from(joined)
            }
        };
        Ok(Answer::held(status, body, held))
    }

    /// `more` bytes of the budget for an answer of `head`'s, or the
    /// refusal: 503 past the replica's budget, 429 past the namespace's
    /// share. krayne's own reads (no share) wait for their half.
    async fn reserve_head_bytes(
        &self,
        share: Option<&str>,
        read: HeadRead,
        held: &mut Option<Held>,
        more: usize,
    ) -> Result<(), Error> {
        let reserved = match share {
            Some(_) => self.budget.reserve(share, held, more),
            None => self.budget.reserve_system(held, more).await,
        };
        match reserved {
            Ok(()) => Ok(()),
            Err(Spent::All) => {
                refused(read, "budget");
                Err(Error::Unavailable(
                    "this server is reading as much from clusters' Ray heads as it may at once; try again shortly"
                        .into(),
                ))
            }
            Err(Spent::Namespace) => {
                refused(read, "namespace_share");
                Err(Error::RateLimited {
                    retry_after: std::time::Duration::from_secs(1),
                })
            }
        }
    }

    /// A `GET` whose answer streams (a followed log file): its status and,
    /// on 200, its body as text chunks; any other status's body read whole.
    pub(crate) async fn get_streamed(&self, head: &HeadLink, path: &str) -> Result<Result<LogStream, Answer>, Error> {
        let (mut sender, connection) = open(head).await?;
        let request = request_to(head, Method::GET, path)
            .body(StreamBody::new(futures::stream::empty().boxed()))
            .map_err(|e| Error::Internal(format!("a request to Ray: {e}")))?;
        let response = sender.send_request(request).await.map_err(|e| unavailable(&e))?;
        let status = response.status().as_u16();
        if status != 200 {
            return Ok(Err(self
                .read_answer(share_of(head), status, response.into_body(), HeadRead::Reply)
                .await?));
        }
        let chunks = http_body_util::BodyStream::new(response.into_body()).filter_map(|frame| async move {
            match frame {
                Ok(frame) => frame
                    .into_data()
                    .ok()
                    .map(|data| Ok(String::from_utf8_lossy(&data).into_owned())),
                Err(e) => Some(Err(Error::Unavailable(format!(
                    "the log stream from the cluster's Ray head broke: {e}"
                )))),
            }
        });
        // The connection's task goes with the stream.
        Ok(Ok(chunks
            .map(move |chunk| {
                let _held = &connection;
                chunk
            })
            .boxed()))
    }

    /// A job's log as Ray's `/logs/tail` WebSocket sends it, line chunks
    /// in order; an abnormal close or a broken socket is the stream's
    /// last item, an error.
    pub(crate) async fn log_tail(&self, head: &HeadLink, id: &str) -> Result<LogStream, Error> {
        use tokio_tungstenite::tungstenite::{Message, protocol::frame::coding::CloseCode};

        use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

        let token = head.authorization();
        let connection = head.dial().await?.compat();
        let mut url = format!("ws://ray-head{}/logs/tail", job_path(id))
            .into_client_request()
            .map_err(|e| Error::Internal(format!("a request to Ray: {e}")))?;
        if let Some(token) = token.and_then(|t| hyper::header::HeaderValue::from_str(t).ok()) {
            url.headers_mut().insert(RAY_AUTH_HEADER, token);
        }
        let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
            .max_message_size(Some(MAX_TAIL_MESSAGE))
            .max_frame_size(Some(MAX_TAIL_MESSAGE));
        let (socket, _) = tokio_tungstenite::client_async_with_config(url, connection, Some(config))
            .await
            .map_err(|e| Error::Unavailable(format!("the cluster's Ray head did not stream the log: {e}")))?;
        let lines = socket.filter_map(|frame| async move {
            match frame {
                Ok(Message::Text(text)) => Some(Ok(text.as_str().to_owned())),
                Ok(Message::Binary(bytes)) => Some(Ok(String::from_utf8_lossy(&bytes).into_owned())),
                Ok(Message::Close(Some(close))) if close.code != CloseCode::Normal => Some(Err(Error::Unavailable(
                    format!("the cluster's Ray head ended the log early: {}", close.reason),
                ))),
                Ok(_) => None,
                Err(e) => Some(Err(Error::Unavailable(format!(
                    "the log stream from the cluster's Ray head broke: {e}"
                )))),
            }
        });
        Ok(lines.boxed())
    }
}

/// A request's body: frames as they come.
type RequestBody = StreamBody<futures::stream::BoxStream<'static, Result<Frame<Bytes>, std::io::Error>>>;

/// A new HTTP/1 connection to `head`'s dashboard, and its driver's task
/// (ended when dropped).
async fn open(head: &HeadLink) -> Result<(SendRequest<RequestBody>, AbortOnDrop), Error> {
    let connection = head.dial().await?.compat();
    let (sender, conn) = hyper::client::conn::http1::Builder::new()
        .max_buf_size(READ_BUFFER)
        .handshake(TokioIo::new(connection))
        .await
        .map_err(|e| unavailable(&e))?;
    Ok((sender, AbortOnDrop(tokio::spawn(conn))))
}

/// A request to `head` as krayne sends every one: its own user agent,
/// and the cluster's Ray token when it has one.
fn request_to(head: &HeadLink, method: Method, path: &str) -> hyper::http::request::Builder {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header(hyper::header::HOST, "ray-head")
        .header(hyper::header::USER_AGENT, USER_AGENT);
    match head.authorization() {
        Some(token) => request.header(RAY_AUTH_HEADER, token),
        None => request,
    }
}

/// A head that could not be reached, or broke off.
fn unavailable(e: &dyn std::fmt::Display) -> Error {
    Error::Unavailable(format!("the cluster's Ray head (dashboard) did not answer: {e}"))
}

/// A head that did not answer within [`ANSWER_TIMEOUT`].
fn late(read: HeadRead) -> Error {
    metrics::counter!("krayne_head_answers_refused_total", "read" => read.as_str(), "reason" => "timeout").increment(1);
    Error::DeadlineExceeded(format!(
        "the cluster's Ray head did not answer ({}) within {} s",
        read.as_str().replace('_', " "),
        ANSWER_TIMEOUT.as_secs()
    ))
}

/// The namespace whose share of the budget a read of `head` counts
/// against: its cluster's, but for krayne's own reads (the reaper's,
/// bounded by its concurrency and timeout), which count against the
/// replica's budget only.
fn share_of(head: &HeadLink) -> Option<&str> {
    match head.reader() {
        HeadReader::Caller => Some(head.cluster().namespace()),
        HeadReader::Krayne => None,
    }
}

/// Counts a head's answer krayne would not read.
fn refused(read: HeadRead, reason: &'static str) {
    metrics::counter!("krayne_head_answers_refused_total", "read" => read.as_str(), "reason" => reason).increment(1);
    tracing::info!(
        read = read.as_str(),
        reason,
        "a cluster's Ray head answered more than krayne reads"
    );
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<Result<(), hyper::Error>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn krayne_never_calls_ray_as_a_browser() {
        assert!(!USER_AGENT.starts_with("Mozilla"));
    }
}
