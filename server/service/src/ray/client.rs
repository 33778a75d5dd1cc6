//! Requests to a head's Jobs API, on connections krayne opens to its
//! dashboard (direct or port-forward, as every service is reached).

use bytes::Bytes;
use futures::StreamExt as _;
use http_body_util::{BodyExt as _, Limited, StreamBody};
use hyper::{Method, Request, body::Frame};
use hyper_util::rt::TokioIo;
use serde_json::Value;

use super::{
    job_path,
    wire::{self, Answer},
};
use crate::{
    Context, ControlPlane, LogStream, PackageBody, Reachable,
    domain::{Error, Job, ResourceKind},
};

/// How krayne introduces itself to Ray (never as a browser: Ray refuses a
/// browser's mutations).
const USER_AGENT: &str = concat!("krayne-server/", env!("CARGO_PKG_VERSION"));
/// Largest answer read whole from the head (a job's log).
const MAX_ANSWER: usize = 64 * 1024 * 1024;

impl ControlPlane {
    /// A job as the head has it.
    pub(crate) async fn ray_job(&self, cx: &Context, head: &Reachable, id: &str) -> Result<Job, Error> {
        let answer = self.ray(cx, head, Method::GET, &job_path(id), None).await?;
        if answer.status != 200 {
            return Err(answer.error(ResourceKind::Job, id));
        }
        wire::job(&answer.json()?)
    }

    /// One request to the head, with a JSON body or none.
    pub(crate) async fn ray(
        &self,
        cx: &Context,
        head: &Reachable,
        method: Method,
        path: &str,
        json: Option<Value>,
    ) -> Result<Answer, Error> {
        let (body, size) = match json {
            Some(json) => {
                let bytes = Bytes::from(json.to_string());
                let size = bytes.len() as u64;
                (futures::stream::once(async move { Ok(bytes) }).boxed(), Some(size))
            }
            None => (futures::stream::empty().boxed(), None),
        };
        self.ray_streamed(cx, head, method, path, size, body).await
    }

    /// One request to the head on a connection of its own, its body
    /// streamed.
    pub(crate) async fn ray_streamed(
        &self,
        cx: &Context,
        head: &Reachable,
        method: Method,
        path: &str,
        size: Option<u64>,
        body: PackageBody,
    ) -> Result<Answer, Error> {
        let unavailable = |e: &dyn std::fmt::Display| {
            Error::Unavailable(format!("the cluster's Ray head (dashboard) did not answer: {e}"))
        };
        let connection = self.connect(cx, head.clone()).await?.into_connection();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(connection))
            .await
            .map_err(|e| unavailable(&e))?;
        let task = tokio::spawn(conn);
        let has_body = size.is_some() || method == Method::PUT;
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header(hyper::header::HOST, "ray-head")
            .header(hyper::header::USER_AGENT, USER_AGENT);
        if let Some(size) = size {
            request = request.header(hyper::header::CONTENT_LENGTH, size);
        }
        if has_body && path.starts_with("/api/jobs") {
            request = request.header(hyper::header::CONTENT_TYPE, "application/json");
        }
        let request = request
            .body(StreamBody::new(body.map(|chunk| chunk.map(Frame::data))))
            .map_err(|e| Error::Internal(format!("a request to Ray: {e}")))?;
        let response = sender.send_request(request).await;
        let response = match response {
            Ok(response) => response,
            Err(e) => {
                task.abort();
                return Err(unavailable(&e));
            }
        };
        let status = response.status().as_u16();
        let body = Limited::new(response.into_body(), MAX_ANSWER)
            .collect()
            .await
            .map_err(|e| unavailable(&e))?
            .to_bytes();
        Ok(Answer { status, body })
    }

    /// A `GET` whose answer streams (a followed log file): its status and,
    /// on 200, its body as text chunks; any other status's body read whole.
    pub(crate) async fn ray_get_streamed(
        &self,
        cx: &Context,
        head: &Reachable,
        path: &str,
    ) -> Result<Result<LogStream, Answer>, Error> {
        let unavailable = |e: &dyn std::fmt::Display| {
            Error::Unavailable(format!("the cluster's Ray head (dashboard) did not answer: {e}"))
        };
        let connection = self.connect(cx, head.clone()).await?.into_connection();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(connection))
            .await
            .map_err(|e| unavailable(&e))?;
        let task = tokio::spawn(conn);
        let request = Request::builder()
            .method(Method::GET)
            .uri(path)
            .header(hyper::header::HOST, "ray-head")
            .header(hyper::header::USER_AGENT, USER_AGENT)
            .body(http_body_util::Empty::<Bytes>::new())
            .map_err(|e| Error::Internal(format!("a request to Ray: {e}")))?;
        let response = match sender.send_request(request).await {
            Ok(response) => response,
            Err(e) => {
                task.abort();
                return Err(unavailable(&e));
            }
        };
        let status = response.status().as_u16();
        if status != 200 {
            let body = Limited::new(response.into_body(), MAX_ANSWER)
                .collect()
                .await
                .map_err(|e| unavailable(&e))?
                .to_bytes();
            return Ok(Err(Answer { status, body }));
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
        let guard = AbortOnDrop(task);
        Ok(Ok(chunks
            .map(move |chunk| {
                let _held = &guard;
                chunk
            })
            .boxed()))
    }

    /// A job's log as Ray's `/logs/tail` WebSocket sends it, line chunks
    /// in order; an abnormal close or a broken socket is the stream's
    /// last item, an error.
    pub(crate) async fn ray_log_tail(&self, cx: &Context, head: Reachable, id: &str) -> Result<LogStream, Error> {
        use tokio_tungstenite::tungstenite::{Message, protocol::frame::coding::CloseCode};

        let connection = self.connect(cx, head).await?.into_connection();
        let url = format!("ws://ray-head{}/logs/tail", job_path(id));
        let (socket, _) = tokio_tungstenite::client_async(url, connection)
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
