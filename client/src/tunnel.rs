//! Tunnels to a cluster's services through krayne: a byte stream
//! ([`TunnelStream`], `AsyncRead + AsyncWrite`) and a local-port forwarder
//! ([`Forwarder`]), both over `krayne.v1.TunnelService/Open`.

use std::{
    io,
    net::SocketAddr,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    task::{Context, Poll},
};

use bytes::BytesMut;
use tokio::{
    io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, DuplexStream, ReadBuf},
    net::TcpListener,
    sync::{mpsc, oneshot},
    task::JoinHandle,
};

use crate::{
    Client, ClientError,
    base_path::{FirstRequest, first_request},
    proto::{self, tunnel_request, tunnel_response},
};

/// Bytes the stream buffers each way before a writer waits.
const BUFFER: usize = 64 * 1024;
/// Largest data message sent (well under the server's message limit).
const CHUNK: usize = 32 * 1024;

/// A TCP connection to one of a cluster's services, through krayne.
/// Shutting down its write side half-closes the connection (where the
/// server's upstream can: not through Kubernetes' port-forward, where the
/// service never sees it; drop the stream to end the tunnel); reads end
/// when the service closes. [`TunnelStream::closed`] says how it ended.
#[derive(Debug)]
pub struct TunnelStream {
    io: DuplexStream,
    service: String,
    port: u16,
    ended: oneshot::Receiver<Result<(), ClientError>>,
}

impl TunnelStream {
    /// The service's name.
    pub fn service(&self) -> &str {
        &self.service
    }

    /// The service's port in the head pod.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Waits for the tunnel to end: `Ok` when the service closed it, the
    /// server's reason otherwise (idle timeout, shutdown, …).
    pub async fn closed(self) -> Result<(), ClientError> {
        drop(self.io);
        self.ended.await.unwrap_or(Ok(()))
    }
}

impl AsyncRead for TunnelStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for TunnelStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

impl Client {
    /// The URL of cluster `name`'s HTTP service (`dashboard`, `notebook`,
    /// `code-server`) through this server's proxy: what a pipeline outside
    /// the cluster can reach, sending the same bearer token (the server
    /// gives the same URL in [`proto::HeadService::proxy_url`] and
    /// [`proto::ClusterDetails::proxy_urls`]). The addresses in
    /// [`proto::ClusterInfo`] (`dashboard_url` and the like) are pod IPs,
    /// reachable only from inside the cluster. TCP services (`client`,
    /// `ssh`) go through [`open_tunnel`](Self::open_tunnel) or
    /// [`forward`](Self::forward).
    pub fn proxy_url(&self, namespace: &str, name: &str, service: &str) -> String {
        proxy_url(self.server(), namespace, name, service)
    }

    /// The services of cluster `name` (viewer), each probed by the server.
    pub async fn list_services(&self, namespace: &str, name: &str) -> Result<Vec<proto::HeadService>, ClientError> {
        let message = proto::ListServicesRequest {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        };
        let mut services = retrying!(self, tunnels, list_services, message)?.into_inner().services;
        for service in &mut services {
            self.on_server(&mut service.proxy_url);
        }
        Ok(services)
    }

    /// The Ray credentials of cluster `name` (editor; audited by the
    /// server): for Ray's own clients through a raw tunnel, which need
    /// `RAY_AUTH_MODE=token` and `RAY_AUTH_TOKEN` when `mode` is `token`.
    pub async fn ray_credentials(&self, namespace: &str, name: &str) -> Result<proto::RayCredentials, ClientError> {
        let message = proto::GetRayCredentialsRequest {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        };
        Ok(retrying!(self, tunnels, get_ray_credentials, message)?.into_inner())
    }

    /// A URL the server gave as a path on itself (it was not told its
    /// public URL), made absolute against the URL this client uses.
    pub(crate) fn on_server(&self, url: &mut String) {
        if url.starts_with('/') {
            *url = format!("{}{url}", self.server().trim_end_matches('/'));
        }
    }

    /// A sign-in link for a browser to HTTP service `service` of cluster
    /// `name` (editor): valid about a minute, usable once; it sets a
    /// session cookie for that service only and leads to it.
    pub async fn create_browser_session(
        &self,
        namespace: &str,
        name: &str,
        service: &str,
    ) -> Result<proto::BrowserSession, ClientError> {
        let message = proto::CreateBrowserSessionRequest {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            service: service.to_owned(),
        };
        let response = retrying!(self, tunnels, create_browser_session, message)?;
        Ok(response.into_inner())
    }

    /// Opens a tunnel to `service` of cluster `cluster` (editor).
    pub async fn open_tunnel(
        &self,
        namespace: &str,
        cluster: &str,
        service: &str,
    ) -> Result<TunnelStream, ClientError> {
        let Raw {
            requests,
            mut responses,
            opened,
        } = self.open_raw(namespace, cluster, service).await?;
        let (ours, theirs) = tokio::io::duplex(BUFFER);
        let (ended_tx, ended) = oneshot::channel();
        tokio::spawn(async move {
            let (mut from_user, mut to_user) = tokio::io::split(ours);
            let up = async move {
                let mut buf = BytesMut::new();
                while let Ok(n) = read_chunk(&mut from_user, &mut buf).await {
                    if n == 0 || requests.send(data_message(&mut buf)).await.is_err() {
                        break;
                    }
                }
                // Dropping `requests` ends the stream: a half-close.
            };
            let down = async move {
                loop {
                    match responses.message().await {
                        Ok(Some(proto::TunnelResponse {
                            kind: Some(tunnel_response::Kind::Data(data)),
                        })) => {
                            if to_user.write_all(&data).await.is_err() {
                                return Ok(());
                            }
                        }
                        Ok(Some(_)) => {}
                        Ok(None) => {
                            let _ = to_user.shutdown().await;
                            return Ok(());
                        }
                        Err(status) => {
                            let _ = to_user.shutdown().await;
                            return Err(ClientError::from(status));
                        }
                    }
                }
            };
            tokio::pin!(up, down);
            let result = tokio::select! {
                result = &mut down => result,
                () = &mut up => down.await,
            };
            let _ = ended_tx.send(result);
        });
        Ok(TunnelStream {
            io: theirs,
            service: opened.service,
            port: u16::try_from(opened.port).unwrap_or_default(),
            ended,
        })
    }

    /// Opens the gRPC stream and waits for the server's `opened`.
    async fn open_raw(&self, namespace: &str, cluster: &str, service: &str) -> Result<Raw, ClientError> {
        let (requests, outbound) = mpsc::channel::<proto::TunnelRequest>(8);
        let open = proto::TunnelRequest {
            kind: Some(tunnel_request::Kind::Open(proto::TunnelTarget {
                namespace: namespace.to_owned(),
                cluster: cluster.to_owned(),
                service: service.to_owned(),
            })),
        };
        requests
            .send(open)
            .await
            .map_err(|_| ClientError::new(tonic::Code::Internal, "the tunnel's request stream closed"))?;
        let mut responses = self
            .tunnels()
            .open(tokio_stream::wrappers::ReceiverStream::new(outbound))
            .await?
            .into_inner();
        match responses.message().await? {
            Some(proto::TunnelResponse {
                kind: Some(tunnel_response::Kind::Opened(opened)),
            }) => Ok(Raw {
                requests,
                responses,
                opened,
            }),
            _ => Err(ClientError::new(
                tonic::Code::Internal,
                "the server did not open the tunnel",
            )),
        }
    }

    /// Forwards every connection to `listener` through its own tunnel to
    /// `service` of cluster `cluster`, until the returned handle is
    /// stopped or dropped.
    pub fn forward(&self, namespace: &str, cluster: &str, service: &str, listener: TcpListener) -> Forwarder {
        self.forward_under(namespace, cluster, service, None, listener)
    }

    /// [`Client::forward`] for one of [`Client::list_services`]' services:
    /// an HTTP service that serves under a base path (the notebook) has a
    /// GET outside it answered with a redirect into it, so the local
    /// port's root opens the service.
    pub fn forward_service(
        &self,
        namespace: &str,
        cluster: &str,
        service: &proto::HeadService,
        listener: TcpListener,
    ) -> Forwarder {
        let base = (service.protocol == "http" && service.base_path.len() > 1).then(|| service.base_path.clone());
        self.forward_under(namespace, cluster, &service.name, base, listener)
    }

    fn forward_under(
        &self,
        namespace: &str,
        cluster: &str,
        service: &str,
        base: Option<String>,
        listener: TcpListener,
    ) -> Forwarder {
        let counts = Arc::new(Counts::default());
        let local_addr = listener.local_addr().ok();
        let (client, counted) = (self.clone(), counts.clone());
        let (namespace, cluster, service) = (namespace.to_owned(), cluster.to_owned(), service.to_owned());
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut local, _)) = listener.accept().await else {
                    // Out of descriptors, say: back off rather than spin.
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                };
                let (client, counted) = (client.clone(), counted.clone());
                let (namespace, cluster, service) = (namespace.clone(), cluster.clone(), service.clone());
                let base = base.clone();
                tokio::spawn(async move {
                    let first = match &base {
                        Some(base) => match first_request(&mut local, base).await {
                            FirstRequest::Redirected => return,
                            FirstRequest::Forward(bytes) => bytes,
                        },
                        None => Vec::new(),
                    };
                    counted.opened.fetch_add(1, Ordering::Relaxed);
                    counted.open.fetch_add(1, Ordering::Relaxed);
                    match client.open_raw(&namespace, &cluster, &service).await {
                        Ok(raw) => {
                            carry(&mut local, first, raw, &counted, QUIET_AFTER_CLIENT_END).await;
                        }
                        Err(e) => {
                            counted.failed.fetch_add(1, Ordering::Relaxed);
                            if let Ok(mut last) = counted.last_error.lock() {
                                *last = Some(e.to_string());
                            }
                        }
                    }
                    counted.open.fetch_sub(1, Ordering::Relaxed);
                });
            }
        });
        Forwarder {
            local_addr,
            counts,
            task,
        }
    }
}

/// How long a connection whose local client has ended its side waits for
/// more from the service. Kubernetes' port-forward cannot pass that end
/// on, so a service may never close: an HTTP client that hung up would
/// otherwise keep its connection (and the forwarder's count) open.
const QUIET_AFTER_CLIENT_END: std::time::Duration = std::time::Duration::from_secs(10);

/// Carries one local connection through the tunnel `raw` (after `first`,
/// bytes already read from it), counting bytes as they pass, until the
/// service ends it, or the local client ended its side and the service
/// then stays quiet for `quiet`. The local socket's reads go into the
/// gRPC messages and the messages' bytes to the socket, with no copy
/// between.
async fn carry(
    local: &mut tokio::net::TcpStream,
    first: Vec<u8>,
    raw: Raw,
    counts: &Counts,
    quiet: std::time::Duration,
) {
    let (mut local_in, mut local_out) = local.split();
    let Raw {
        requests,
        mut responses,
        ..
    } = raw;
    let (client_ended, mut ended) = tokio::sync::watch::channel(false);
    let up = async {
        let mut buf = BytesMut::from(&first[..]);
        let sent = buf.is_empty() || requests.send(data_message(&mut buf)).await.is_ok();
        if sent {
            while let Ok(n) = read_chunk(&mut local_in, &mut buf).await {
                if n == 0 || requests.send(data_message(&mut buf)).await.is_err() {
                    break;
                }
                counts.to_service.fetch_add(n as u64, Ordering::Relaxed);
            }
        }
        // Dropping `requests` ends the stream: a half-close.
        drop(requests);
        let _ = client_ended.send(true);
        std::future::pending::<()>().await;
    };
    let down = async {
        loop {
            let waiting = *ended.borrow();
            let message = tokio::select! {
                message = responses.message() => message,
                _ = ended.changed(), if !waiting => continue,
                () = tokio::time::sleep(quiet), if waiting => break,
            };
            match message {
                Ok(Some(proto::TunnelResponse {
                    kind: Some(tunnel_response::Kind::Data(data)),
                })) => {
                    if local_out.write_all(&data).await.is_err() {
                        break;
                    }
                    counts.to_client.fetch_add(data.len() as u64, Ordering::Relaxed);
                }
                Ok(Some(_)) => {}
                _ => break,
            }
        }
        let _ = local_out.shutdown().await;
    };
    tokio::select! {
        () = up => {}
        () = down => {}
    }
}

/// An opened tunnel's gRPC halves.
struct Raw {
    requests: mpsc::Sender<proto::TunnelRequest>,
    responses: tonic::Streaming<proto::TunnelResponse>,
    opened: proto::TunnelOpened,
}

/// Reads what `from` has (at most [`CHUNK`]) onto `buf`'s end.
async fn read_chunk(from: &mut (impl AsyncRead + Unpin), buf: &mut BytesMut) -> io::Result<usize> {
    buf.reserve(CHUNK);
    let mut limited = (&mut *from).take(CHUNK as u64);
    limited.read_buf(buf).await
}

/// A data message of everything in `buf`, which is left empty (its spare
/// room is kept for the next read).
fn data_message(buf: &mut BytesMut) -> proto::TunnelRequest {
    proto::TunnelRequest {
        kind: Some(tunnel_request::Kind::Data(buf.split().freeze())),
    }
}

/// What a [`Forwarder`] has carried.
#[derive(Debug, Default)]
pub struct Counts {
    /// Connections accepted.
    pub opened: AtomicU64,
    /// Connections open now.
    pub open: AtomicU64,
    /// Connections whose tunnel could not be opened.
    pub failed: AtomicU64,
    /// Bytes to the service, counted as they pass.
    pub to_service: AtomicU64,
    /// Bytes from the service, counted as they pass.
    pub to_client: AtomicU64,
    /// Why the last tunnel could not be opened.
    pub last_error: std::sync::Mutex<Option<String>>,
}

/// A local port forwarding to a service; stops when dropped.
#[derive(Debug)]
pub struct Forwarder {
    local_addr: Option<SocketAddr>,
    counts: Arc<Counts>,
    task: JoinHandle<()>,
}

impl Forwarder {
    /// Where it listens.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local_addr
    }

    /// What it has carried so far.
    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// Stops accepting (open connections end with their tunnels).
    pub fn stop(&self) {
        self.task.abort();
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// [`Client::proxy_url`] for the server at `server`.
pub fn proxy_url(server: &str, namespace: &str, name: &str, service: &str) -> String {
    format!(
        "{}/v1/namespaces/{namespace}/clusters/{name}/services/{service}/proxy/",
        server.trim_end_matches('/')
    )
}
