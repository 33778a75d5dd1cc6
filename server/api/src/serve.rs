//! The connection loop of both listeners: hyper-util's server with the
//! limits `axum::serve` does not expose (it sets no timer, so hyper's
//! header-read timeout never fires and a slow-loris client keeps its
//! connection forever), graceful shutdown, and connection metrics.

use std::{future::Future, net::SocketAddr, time::Duration};

use axum::{Router, body::Body, extract::ConnectInfo};
use hyper::body::Incoming;
use hyper_util::{
    rt::{TokioExecutor, TokioIo, TokioTimer},
    server::conn::auto,
    service::TowerToHyperService,
};
use tokio::{
    net::{TcpListener, TcpStream},
    sync::watch,
};
use tokio_util::task::TaskTracker;
use tower::ServiceExt as _;

/// Limits on what a connection may do before the application sees it.
#[derive(Debug, Clone)]
pub struct ConnectionLimits {
    /// Longest a client may take to send a request's headers (HTTP/1).
    pub header_read_timeout: Duration,
    /// Largest request head (request line and headers) in bytes; larger
    /// ones are answered `431`.
    pub max_header_bytes: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            max_header_bytes: 64 * 1024,
        }
    }
}

/// hyper refuses a read buffer under 8 KiB.
const MIN_BUF: usize = 8 * 1024;

fn builder(limits: &ConnectionLimits) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(limits.max_header_bytes.max(MIN_BUF));
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX))
        // A peer that stops answering pings is gone: free its streams.
        .keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(20));
    builder
}

/// The HTTP/2 connection preface; hyper-util reads this much (or until
/// the bytes differ) to choose the protocol.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Waits, at most `limit`, until the client has sent enough to tell
/// HTTP/1 from HTTP/2. hyper-util's protocol sniffing has no timer, and
/// hyper's header-read timeout starts only after it: without this a
/// client that connects and sends nothing (or half a preface) would keep
/// its connection forever.
async fn protocol_chosen(tcp: &TcpStream, limit: Duration) -> bool {
    let mut seen = [0u8; PREFACE.len()];
    let sniff = async {
        loop {
            match tcp.peek(&mut seen).await {
                Ok(0) | Err(_) => return false,
                Ok(n) if n >= PREFACE.len() || seen[..n] != PREFACE[..n] => return true,
                // Part of a preface: peek answers at once, so pause.
                Ok(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    };
    tokio::time::timeout(limit, sniff).await.unwrap_or(false)
}

/// Serves `app` on `listener` (named `name` in metrics) until `shutdown`
/// resolves; then stops accepting and returns a future that asks every
/// connection to finish what it has in flight and resolves when they all
/// have. Callers bound that with their grace period.
pub async fn serve(
    name: &'static str,
    listener: TcpListener,
    app: Router,
    limits: &ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) -> impl Future<Output = ()> {
    let builder = builder(limits);
    let (stop, stopping) = watch::channel(false);
    let connections = TaskTracker::new();
    tokio::pin!(shutdown);
    loop {
        let (tcp, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Out of file descriptors and the like: back off, go on.
                    tracing::warn!(listener = name, error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // HTTP/2 writes headers, data and trailers as separate small frames;
        // with Nagle's algorithm each waits for the peer's delayed ACK (40 ms).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        let service = app.clone().map_request(move |mut r: hyper::Request<Incoming>| {
            r.extensions_mut().insert(ConnectInfo::<SocketAddr>(remote));
            r.map(Body::new)
        });
        let (builder, mut stopping, limit) = (builder.clone(), stopping.clone(), limits.header_read_timeout);
        connections.spawn(async move {
            let open = metrics::gauge!("krayne_http_connections_open", "listener" => name);
            open.increment(1);
            let chosen = tokio::select! {
                chosen = protocol_chosen(&tcp, limit) => chosen,
                _ = stopping.changed() => false,
            };
            if chosen {
                let connection =
                    builder.serve_connection_with_upgrades(TokioIo::new(tcp), TowerToHyperService::new(service));
                tokio::pin!(connection);
                let ended = tokio::select! {
                    ended = connection.as_mut() => ended,
                    _ = stopping.changed() => {
                        connection.as_mut().graceful_shutdown();
                        connection.await
                    }
                };
                if let Err(e) = ended {
                    tracing::debug!(listener = name, %remote, error = %e, "connection ended with an error");
                }
            } else {
                tracing::debug!(listener = name, %remote, "closed: no request in time");
            }
            open.decrement(1);
        });
    }
    drop(listener);
    async move {
        let _ = stop.send(true);
        connections.close();
        connections.wait().await;
    }
}
