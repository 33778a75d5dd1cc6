//! Idle HTTP/1 connections to services, kept between a browser session's
//! requests: a page's next request goes out on the connection its last
//! one used instead of dialling (or port-forwarding) anew.
//!
//! Kept per caller, service and head pod, so a connection serves only the
//! principal it was opened for (it holds that principal's tunnel permit)
//! and a replaced head gets new connections. Bearer-token requests are not
//! pooled: each is its own audited connection. Why not hyper-util's legacy
//! `Client`: its connector sees only a URI, while each connection here is
//! opened for a caller, within its limits.

use std::{
    collections::HashMap,
    pin::Pin,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    task::{Context, Poll},
    time::Duration,
};

use axum::body::Body;
use bytes::Bytes;
use http_body::{Body as _, Frame, SizeHint};
use hyper::{body::Incoming, client::conn::http1::SendRequest};
use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;

/// Whose connection to which service on which pod.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    /// The caller's subject.
    pub(super) subject: String,
    /// Namespace.
    pub(super) namespace: String,
    /// Cluster.
    pub(super) name: String,
    /// Service.
    pub(super) service: String,
    /// The head pod serving it.
    pub(super) pod: String,
}

/// An HTTP/1 connection to a service: where requests go, and its task.
pub(crate) struct Upstream {
    /// Sends requests on it.
    pub(super) sender: SendRequest<Body>,
    /// Its connection task (aborted to cut a stalled upload).
    pub(super) task: AbortHandle,
}

struct Idle {
    since: std::time::Instant,
    upstream: Upstream,
}

/// The pool of idle connections.
pub(crate) struct Upstreams {
    idle: Mutex<HashMap<Key, Vec<Idle>>>,
    /// Whether the reaper of idle connections runs.
    reaping: AtomicBool,
    /// How long a connection stays idle before it is closed.
    keep: Duration,
    /// Idle connections kept per key (a browser opens up to 6 per host).
    per_key: usize,
    stopping: CancellationToken,
}

impl Upstreams {
    /// A pool that closes connections idle for `keep`, and all of them
    /// once `stopping` is cancelled.
    pub(crate) fn new(keep: Duration, stopping: CancellationToken) -> Arc<Self> {
        Arc::new(Self {
            idle: Mutex::default(),
            reaping: false.into(),
            keep,
            per_key: 6,
            stopping,
        })
    }

    /// An idle connection for `key`, if any (it may still be finishing
    /// its last exchange: wait until it is `ready`).
    pub(super) fn take(&self, key: &Key) -> Option<Upstream> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let kept = idle.get_mut(key)?;
        let found = std::iter::from_fn(|| kept.pop()).find(|i| !i.upstream.sender.is_closed());
        if kept.is_empty() {
            idle.remove(key);
        }
        found.map(|i| i.upstream)
    }

    /// Keeps `upstream` for `key`'s next request (its last response has
    /// been read through), until it has idled for the pool's keep time or
    /// the server stops. It is kept at once, not once hyper has marked it
    /// ready: a page's next request often follows at once.
    pub(super) fn put(self: &Arc<Self>, key: Key, upstream: Upstream) {
        if self.stopping.is_cancelled() || upstream.sender.is_closed() {
            return;
        }
        {
            let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
            let kept = idle.entry(key).or_default();
            if kept.len() >= self.per_key {
                return;
            }
            kept.push(Idle {
                since: std::time::Instant::now(),
                upstream,
            });
        }
        if !self.reaping.swap(true, Ordering::Relaxed) {
            self.reap();
        }
    }

    /// One task for the whole pool closes connections idle for the keep
    /// time (a few times per keep time), and all of them when the server
    /// stops: dropping the last sender closes a connection.
    fn reap(self: &Arc<Self>) {
        let pool = Arc::downgrade(self);
        let (every, stopping) = ((self.keep / 4).max(Duration::from_millis(250)), self.stopping.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = tokio::time::sleep(every) => {}
                    () = stopping.cancelled() => {}
                }
                let Some(pool) = pool.upgrade() else { return };
                let mut idle = pool.idle.lock().unwrap_or_else(|p| p.into_inner());
                if stopping.is_cancelled() {
                    idle.clear();
                    return;
                }
                for kept in idle.values_mut() {
                    kept.retain(|i| i.since.elapsed() < pool.keep && !i.upstream.sender.is_closed());
                }
                idle.retain(|_, kept| !kept.is_empty());
            }
        });
    }
}

/// A response body that calls `on_end` once it has been read through
/// (the connection can then take the next request), keeping its size.
pub(crate) struct ReturnsAtEnd {
    inner: Incoming,
    on_end: Option<Box<dyn FnOnce() + Send>>,
}

impl ReturnsAtEnd {
    /// `inner`, calling `on_end` at its end (at once if it has none).
    pub(super) fn new(inner: Incoming, on_end: impl FnOnce() + Send + 'static) -> Self {
        let mut body = Self {
            inner,
            on_end: Some(Box::new(on_end)),
        };
        if body.inner.is_end_stream() {
            body.ended();
        }
        body
    }

    fn ended(&mut self) {
        if let Some(on_end) = self.on_end.take() {
            on_end();
        }
    }
}

impl http_body::Body for ReturnsAtEnd {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(None) => self.ended(),
            Poll::Ready(Some(Ok(_))) if self.inner.is_end_stream() => self.ended(),
            // A body that failed leaves its connection unusable: it is
            // not returned.
            Poll::Ready(Some(Err(_))) => self.on_end = None,
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
