//! A service connection handed to a transport whole (the HTTP proxy): it
//! counts the bytes each way and completes its `service.connect` audit
//! row when dropped, whenever the transport is done with it.

use std::{
    io,
    pin::Pin,
    sync::atomic::{AtomicU64, Ordering},
    task::{Context, Poll},
};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::compat::{Compat, FuturesAsyncReadCompatExt as _};

use super::streams::kit::{Flowed, Permit, Row, completed, counted};
use crate::domain::ServiceStream;

/// A counted, audited connection to a service (tokio I/O).
pub struct ServiceConnection {
    io: Compat<Box<dyn ServiceStream>>,
    to_service: AtomicU64,
    to_client: AtomicU64,
    done: Option<Done>,
}

/// What completes the audit row (none in a browser session, audited
/// when it began).
struct Done {
    row: Option<Row>,
    _permit: Permit,
}

impl ServiceConnection {
    pub(super) fn new(stream: Box<dyn ServiceStream>, row: Option<Row>, permit: Permit) -> Self {
        Self {
            io: stream.compat(),
            to_service: AtomicU64::new(0),
            to_client: AtomicU64::new(0),
            done: Some(Done { row, _permit: permit }),
        }
    }
}

impl Drop for ServiceConnection {
    fn drop(&mut self) {
        let Some(Done { row, _permit }) = self.done.take() else {
            return;
        };
        let flowed = Flowed {
            to_service: self.to_service.load(Ordering::Relaxed),
            to_client: self.to_client.load(Ordering::Relaxed),
        };
        let Some((audit, mut entry, started)) = row else {
            counted(flowed);
            return;
        };
        completed(&mut entry, started, flowed, "the proxied exchange ended");
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            // The permit goes with the row, so a shutdown waits for both.
            runtime.spawn(async move {
                audit.finish(&entry).await;
                drop(_permit);
            });
        }
    }
}

impl AsyncRead for ServiceConnection {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        let n = buf.filled().len().saturating_sub(before);
        self.to_client.fetch_add(n as u64, Ordering::Relaxed);
        polled
    }
}

impl AsyncWrite for ServiceConnection {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &polled {
            self.to_service.fetch_add(*n as u64, Ordering::Relaxed);
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
