//! Limits on what a request may declare and on how long its body may take.
//! A body that is declared and never sent must not hold a stream or a
//! connection: it is cut off after the body deadline, on every path.

use std::{
    error::Error as StdError,
    pin::Pin,
    task::{Context, Poll, ready},
    time::Duration,
};

use axum::{
    BoxError,
    body::{Body, Bytes},
    http::{HeaderMap, header},
};
use http_body::{Frame, SizeHint};
use tokio::time::{Instant, Sleep};

/// A request body that did not arrive in time.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the request body did not arrive within {} s", .0.as_secs())]
pub struct BodyTimeout(pub Duration);

/// Whether `error` (or what caused it) is a [`BodyTimeout`].
pub fn is_body_timeout(error: &(dyn StdError + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if e.is::<BodyTimeout>() {
            return true;
        }
        next = e.source();
    }
    false
}

/// The `Content-Length` a request declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Declared {
    /// None (no body, or a chunked one).
    Nothing,
    /// This many bytes.
    Length(u64),
    /// Not a number, or several that differ.
    Unreadable,
}

/// What `headers` declare of the body's length.
fn declared_length(headers: &HeaderMap) -> Declared {
    let mut values = headers.get_all(header::CONTENT_LENGTH).iter();
    let Some(first) = values.next() else {
        return Declared::Nothing;
    };
    let parse = |v: &axum::http::HeaderValue| v.to_str().ok().and_then(|s| s.trim().parse::<u64>().ok());
    match parse(first) {
        Some(n) if values.all(|v| parse(v) == Some(n)) => Declared::Length(n),
        _ => Declared::Unreadable,
    }
}

/// Why a request's declared body is refused before it is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeclaredRefusal {
    /// It declares more bytes than the limit.
    TooLarge(u64),
    /// Its `Content-Length` is not one number.
    Unreadable,
}

/// Checks what `request` declares of its body against `limit` (`None`:
/// no limit, for streams of messages). A body declared over the limit is
/// drained in the background under `deadline`, and the request refused;
/// both transports answer the refusal in their own words.
pub fn check_declared(
    request: axum::extract::Request,
    limit: Option<u64>,
    deadline: Duration,
    on_timeout: fn(Duration) -> BoxError,
) -> Result<axum::extract::Request, DeclaredRefusal> {
    match declared_length(request.headers()) {
        Declared::Length(n) if limit.is_some_and(|limit| n > limit) => {
            drain(Body::new(DeadlineBody::total(
                request.into_body(),
                deadline,
                on_timeout,
            )));
            Err(DeclaredRefusal::TooLarge(n))
        }
        Declared::Length(_) | Declared::Nothing => Ok(request),
        Declared::Unreadable => Err(DeclaredRefusal::Unreadable),
    }
}

/// Most of a refused body read (and thrown away) after the answer.
const DRAIN_BYTES: usize = 8 * 1024 * 1024;

/// Reads and discards `body` (at most [`DRAIN_BYTES`]; give it a deadline)
/// in the background. An HTTP/1.1 client that sends its body while the
/// server has already answered (an early 413) gets to finish writing and
/// reads the answer, instead of a reset connection and a broken pipe.
fn drain(body: Body) {
    tokio::spawn(async move {
        let mut data = body.into_data_stream();
        let mut read = 0;
        while let Some(Ok(chunk)) = futures::StreamExt::next(&mut data).await {
            read += chunk.len();
            if read > DRAIN_BYTES {
                break;
            }
        }
    });
}

/// A body that fails with the error `on_timeout` makes when it has not
/// ended by its deadline (`Total`) or when no frame came for a while
/// (`Idle`, for streams of messages).
pub struct DeadlineBody {
    inner: Body,
    sleep: Pin<Box<Sleep>>,
    idle: Option<Duration>,
    on_timeout: fn(Duration) -> BoxError,
    limit: Duration,
    failed: bool,
}

impl DeadlineBody {
    /// `inner` must end within `limit` from now.
    pub fn total(inner: Body, limit: Duration, on_timeout: fn(Duration) -> BoxError) -> Self {
        Self::new(inner, limit, None, on_timeout)
    }

    /// `inner` must send a frame (or end) at least every `limit`.
    pub fn idle(inner: Body, limit: Duration, on_timeout: fn(Duration) -> BoxError) -> Self {
        Self::new(inner, limit, Some(limit), on_timeout)
    }

    fn new(inner: Body, limit: Duration, idle: Option<Duration>, on_timeout: fn(Duration) -> BoxError) -> Self {
        Self {
            inner,
            sleep: Box::pin(tokio::time::sleep(limit)),
            idle,
            on_timeout,
            limit,
            failed: false,
        }
    }
}

impl http_body::Body for DeadlineBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        if this.failed {
            return Poll::Ready(None);
        }
        // A total deadline holds even for a sender that always has data
        // ready (the inner body would never be Pending).
        if this.idle.is_none() && this.sleep.as_mut().poll(cx).is_ready() {
            this.failed = true;
            return Poll::Ready(Some(Err((this.on_timeout)(this.limit))));
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(idle) = this.idle {
                    this.sleep.as_mut().reset(Instant::now() + idle);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => {
                ready!(this.sleep.as_mut().poll(cx));
                this.failed = true;
                Poll::Ready(Some(Err((this.on_timeout)(this.limit))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;
    use futures::StreamExt as _;

    use super::*;

    fn timeout(limit: Duration) -> BoxError {
        Box::new(BodyTimeout(limit))
    }

    #[test]
    fn declared_lengths() {
        let mut h = HeaderMap::new();
        assert_eq!(declared_length(&h), Declared::Nothing);
        h.insert(header::CONTENT_LENGTH, HeaderValue::from_static("9223372036854775808"));
        assert_eq!(declared_length(&h), Declared::Length(1 << 63));
        h.append(header::CONTENT_LENGTH, HeaderValue::from_static("3"));
        assert_eq!(declared_length(&h), Declared::Unreadable);
        h.insert(header::CONTENT_LENGTH, HeaderValue::from_static("-1"));
        assert_eq!(declared_length(&h), Declared::Unreadable);
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_never_comes_fails_with_the_timeout() {
        let (_tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(1);
        let never = Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx));
        let body = DeadlineBody::total(never, Duration::from_secs(10), timeout);
        let err = axum::body::to_bytes(Body::new(body), 1024).await.unwrap_err();
        assert!(is_body_timeout(&err), "{err}");
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_deadline_restarts_with_every_frame() {
        let stream = futures::stream::iter(0..5)
            .then(|_| async {
                tokio::time::sleep(Duration::from_secs(8)).await;
                Ok::<_, std::io::Error>(Bytes::from_static(b"x"))
            })
            .boxed();
        let idle = DeadlineBody::idle(Body::from_stream(stream), Duration::from_secs(10), timeout);
        let all = axum::body::to_bytes(Body::new(idle), 1024).await.unwrap();
        assert_eq!(all.len(), 5, "40 s in all, never 10 s without a frame");
    }

    #[tokio::test(start_paused = true)]
    async fn a_total_deadline_holds_for_a_sender_that_never_pauses() {
        let endless = futures::stream::repeat_with(|| Ok::<_, std::io::Error>(Bytes::from_static(b"x")))
            .then(|chunk| async move {
                tokio::time::advance(Duration::from_millis(1)).await;
                chunk
            })
            .boxed();
        let body = DeadlineBody::total(Body::from_stream(endless), Duration::from_secs(1), timeout);
        let err = axum::body::to_bytes(Body::new(body), usize::MAX).await.unwrap_err();
        assert!(is_body_timeout(&err), "{err}");
    }

    #[tokio::test]
    async fn a_complete_body_passes() {
        let body = DeadlineBody::total(Body::from("hello"), Duration::from_secs(10), timeout);
        assert_eq!(axum::body::to_bytes(Body::new(body), 1024).await.unwrap(), "hello");
    }
}
