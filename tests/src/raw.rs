//! Requests no well-behaved client sends, for the hardening tests: raw
//! HTTP/1.1 over TCP, and raw HTTP/2 streams (the `h2` crate) whose bodies
//! never come, whose frames are broken or whose headers lie.

use std::{
    net::SocketAddr,
    time::{Duration, Instant},
};

use bytes::Bytes;
use h2::{RecvStream, SendStream, client::ResponseFuture};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::TcpStream,
};

/// An HTTP/1.1 connection that sent a request and may get an answer.
pub struct Http1 {
    tcp: TcpStream,
    sent: Instant,
}

impl Http1 {
    /// Connects to `addr` and writes `head` (the request line and headers;
    /// the blank line is added), then `body`, as it is.
    pub async fn send(addr: SocketAddr, head: &str, body: &[u8]) -> Self {
        let mut tcp = TcpStream::connect(addr).await.expect("connect");
        tcp.write_all(format!("{head}\r\n\r\n").as_bytes())
            .await
            .expect("write head");
        // The server may answer (and close) before it has read a body.
        let _ = tcp.write_all(body).await;
        Self {
            tcp,
            sent: Instant::now(),
        }
    }

    /// The answer's head (status line and headers) if one comes within
    /// `within`, with the time since the request was sent.
    pub async fn answer(&mut self, within: Duration) -> Option<(String, Duration)> {
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        let read = tokio::time::timeout(within, async {
            loop {
                match self.tcp.read(&mut buf).await {
                    Ok(0) | Err(_) => return !seen.is_empty(),
                    Ok(n) => {
                        seen.extend_from_slice(&buf[..n]);
                        if seen.windows(4).any(|w| w == b"\r\n\r\n") {
                            return true;
                        }
                    }
                }
            }
        })
        .await;
        matches!(read, Ok(true)).then(|| (String::from_utf8_lossy(&seen).into_owned(), self.sent.elapsed()))
    }
}

/// A gRPC answer: its status code and message, from the headers of a
/// trailers-only answer or from the trailers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrpcAnswer {
    /// `grpc-status`.
    pub code: i32,
    /// `grpc-message`.
    pub message: String,
}

fn grpc_answer(headers: &http::HeaderMap) -> Option<GrpcAnswer> {
    let code = headers.get("grpc-status")?.to_str().ok()?.parse().ok()?;
    let message = headers
        .get("grpc-message")
        .and_then(|m| m.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    Some(GrpcAnswer { code, message })
}

/// An open HTTP/2 stream: the answer to come, and the way to send more.
pub struct Stream {
    /// The answer.
    pub response: ResponseFuture,
    /// The request body's sender (keep it to keep the stream open).
    pub body: SendStream<Bytes>,
    /// When the stream was opened.
    pub opened: Instant,
}

impl Stream {
    /// The gRPC answer, if it comes within `within`.
    pub async fn grpc_answer(self, within: Duration) -> Option<GrpcAnswer> {
        let body = self.body;
        let answer = tokio::time::timeout(within, async move {
            let response = self.response.await.ok()?;
            if let Some(answer) = grpc_answer(response.headers()) {
                return Some(answer);
            }
            let mut recv: RecvStream = response.into_body();
            while let Some(chunk) = recv.data().await {
                let chunk = chunk.ok()?;
                let _ = recv.flow_control().release_capacity(chunk.len());
            }
            let trailers = recv.trailers().await.ok()??;
            grpc_answer(&trailers)
        })
        .await;
        drop(body);
        answer.ok().flatten()
    }
}

/// One HTTP/2 connection (prior knowledge, as gRPC clients speak it).
pub struct H2 {
    send: h2::client::SendRequest<Bytes>,
    authority: String,
}

impl H2 {
    /// Connects to `addr`.
    pub async fn connect(addr: SocketAddr) -> Self {
        let tcp = TcpStream::connect(addr).await.expect("connect");
        let (send, connection) = h2::client::handshake(tcp).await.expect("HTTP/2 handshake");
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Self {
            send,
            authority: addr.to_string(),
        }
    }

    /// Opens a gRPC stream to `path` with `headers` (and `te`, and the
    /// content type `application/grpc` unless `headers` name one), sends
    /// `body` if any, and ends the request when `end`.
    pub async fn open(&mut self, path: &str, headers: &[(&str, &str)], body: Option<Bytes>, end: bool) -> Stream {
        let mut request = http::Request::post(format!("http://{}{path}", self.authority)).header("te", "trailers");
        if !headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("content-type"))
        {
            request = request.header("content-type", "application/grpc");
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(()).expect("request");
        let mut send = self.send.clone().ready().await.expect("stream capacity");
        let end_now = end && body.is_none();
        let (response, mut stream) = send.send_request(request, end_now).expect("send request");
        if let Some(body) = body {
            stream.send_data(body, end).expect("send data");
        }
        self.send = send;
        Stream {
            response,
            body: stream,
            opened: Instant::now(),
        }
    }

    /// A whole unary exchange: `body` sent and the request ended.
    pub async fn unary(&mut self, path: &str, headers: &[(&str, &str)], body: Bytes) -> GrpcAnswer {
        self.open(path, headers, Some(body), true)
            .await
            .grpc_answer(Duration::from_secs(10))
            .await
            .expect("a gRPC answer")
    }
}

/// A gRPC frame: the compression flag, the length and the message.
pub fn frame(message: &[u8]) -> Bytes {
    let mut framed = vec![0u8];
    framed.extend_from_slice(&u32::try_from(message.len()).expect("small message").to_be_bytes());
    framed.extend_from_slice(message);
    Bytes::from(framed)
}
