//! `pods/portforward` over WebSocket, framed as kube-apiserver frames it
//! (subprotocol `v4.channel.k8s.io`): for the
//! n-th requested port, channel `2n` carries data and `2n + 1` errors; the
//! first frame on each channel is its port number (two bytes, little
//! endian); every frame starts with its channel byte. Each port enters the
//! pod as the kubelet does (its network namespace, whatever the pod IP):
//! here, the stand-in's in-process door ([`Standins::open`]), so it never
//! dials an address of the client's choosing and reaches stand-ins that
//! could not bind. A port nothing serves gets a message on its error
//! channel. When every pod-side connection has closed, the WebSocket
//! closes.

use std::sync::Arc;

use axum::{
    extract::{
        FromRequestParts as _, Path, Query, Request, State,
        ws::{Message, WebSocket, WebSocketUpgrade},
    },
    http::{HeaderMap, HeaderName, StatusCode, header},
    response::{IntoResponse, Response},
};
use bytes::Bytes;
use futures::{SinkExt as _, StreamExt as _};
use tokio::{
    io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _, DuplexStream},
    sync::mpsc,
    task::JoinSet,
};

use super::{ApiError, Resource, portforward_spdy, standins::Standins, state::ApiState, store::meta_str};

/// The subprotocol it speaks (the kubelet's binary channel protocol).
const PROTOCOLS: [&str; 1] = ["v4.channel.k8s.io"];
/// How long a port waits for its stand-in: a head pod's stand-ins start
/// just after the pod turns ready.
const CONNECT_RETRY: std::time::Duration = std::time::Duration::from_secs(2);
/// Ports one request may forward.
const MAX_PORTS: usize = 16;

/// `GET`/`POST /api/v1/namespaces/{ns}/pods/{name}/portforward`: the
/// channel protocol (`?ports=…`), or kubectl's SPDY ([`portforward_spdy`]),
/// upgraded to directly or tunnelled through a WebSocket.
pub(super) async fn handle(
    State(s): State<Arc<ApiState>>,
    Path((ns, name)): Path<(String, String)>,
    Query(query): Query<Vec<(String, String)>>,
    request: Request,
) -> Response {
    let spdy = Spdy::asked(request.headers());
    let ports = match spdy {
        // SPDY names each stream's port in its headers.
        Some(_) => Vec::new(),
        None => match ports(&query) {
            Ok(p) => p,
            Err(e) => return e.into_response(),
        },
    };
    let pod = match s.store.get(Resource::Pod, &ns, &name) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    if pod["status"]["phase"] != "Running" {
        let phase = pod["status"]["phase"].as_str().unwrap_or("Pending");
        return ApiError::bad_request(format!(
            "unable to upgrade connection: pod {name} is not running (phase {phase})"
        ))
        .into_response();
    }
    let target = Target {
        standins: s.standins.clone(),
        uid: meta_str(&pod, "uid").to_owned(),
        name,
        head: pod["metadata"]["labels"]["ray.io/node-type"] == "head",
    };
    if spdy == Some(Spdy::Upgrade) {
        return spdy_upgrade(request, target);
    }
    let (mut parts, _) = request.into_parts();
    let Ok(upgrade) = WebSocketUpgrade::from_request_parts(&mut parts, &()).await else {
        return ApiError::bad_request("Upgrade request required").into_response();
    };
    if spdy == Some(Spdy::Tunnel) {
        return upgrade
            .protocols([portforward_spdy::TUNNEL_PROTOCOL])
            .on_upgrade(move |socket| {
                let (sink, stream) = socket.split();
                let input = stream
                    .take_while(|m| {
                        std::future::ready(matches!(
                            m,
                            Ok(Message::Binary(_) | Message::Ping(_) | Message::Pong(_))
                        ))
                    })
                    .filter_map(|m| {
                        std::future::ready(match m {
                            Ok(Message::Binary(bytes)) => Some(bytes),
                            _ => None,
                        })
                    });
                let output = sink.with(|bytes: Bytes| std::future::ready(Ok::<_, axum::Error>(Message::Binary(bytes))));
                portforward_spdy::serve(input, Box::pin(output), target)
            });
    }
    upgrade
        .protocols(PROTOCOLS)
        .on_upgrade(move |socket| forward(socket, target, ports))
}

/// Which SPDY a request asks for, if any.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Spdy {
    /// `Upgrade: SPDY/3.1`.
    Upgrade,
    /// A WebSocket offering `SPDY/3.1+portforward.k8s.io`.
    Tunnel,
}

impl Spdy {
    fn asked(headers: &HeaderMap) -> Option<Self> {
        let listed = |name, wanted: &str| {
            headers
                .get_all(name)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(','))
                .any(|v| v.trim().eq_ignore_ascii_case(wanted))
        };
        if listed(header::UPGRADE, "SPDY/3.1") {
            Some(Self::Upgrade)
        } else if listed(header::SEC_WEBSOCKET_PROTOCOL, portforward_spdy::TUNNEL_PROTOCOL) {
            Some(Self::Tunnel)
        } else {
            None
        }
    }
}

/// Answers `Upgrade: SPDY/3.1` with 101 and serves SPDY on the connection.
fn spdy_upgrade(mut request: Request, target: Target) -> Response {
    let upgraded = hyper::upgrade::on(&mut request);
    tokio::spawn(async move {
        let Ok(upgraded) = upgraded.await else {
            return;
        };
        let (read, write) = tokio::io::split(hyper_util::rt::TokioIo::new(upgraded));
        let input = tokio_util::io::ReaderStream::new(read)
            .take_while(|r| std::future::ready(r.is_ok()))
            .filter_map(|r| std::future::ready(r.ok()));
        let output = tokio_util::codec::FramedWrite::new(write, tokio_util::codec::BytesCodec::new());
        portforward_spdy::serve(input, output, target).await;
    });
    (
        StatusCode::SWITCHING_PROTOCOLS,
        [
            (header::CONNECTION, "Upgrade"),
            (header::UPGRADE, "SPDY/3.1"),
            (
                HeaderName::from_static("x-stream-protocol-version"),
                portforward_spdy::PROTOCOL,
            ),
        ],
    )
        .into_response()
}

/// The `ports` query: repeated and/or comma-separated, 1–16 of them.
fn ports(query: &[(String, String)]) -> Result<Vec<u16>, ApiError> {
    let mut ports = Vec::new();
    for (_, value) in query.iter().filter(|(k, _)| k == "ports") {
        for p in value.split(',').filter(|p| !p.is_empty()) {
            match p.trim().parse::<u16>() {
                Ok(port) if port > 0 => ports.push(port),
                _ => return Err(ApiError::bad_request(format!("invalid port {p:?}"))),
            }
        }
    }
    match ports.len() {
        0 => Err(ApiError::bad_request("at least one port must be given (ports=…)")),
        n if n > MAX_PORTS => Err(ApiError::bad_request(format!("at most {MAX_PORTS} ports"))),
        _ => Ok(ports),
    }
}

fn frame(channel: u8, data: &[u8]) -> Message {
    let mut bytes = Vec::with_capacity(data.len() + 1);
    bytes.push(channel);
    bytes.extend_from_slice(data);
    Message::Binary(bytes.into())
}

/// The pod a port-forward enters.
#[derive(Clone)]
pub(super) struct Target {
    standins: Arc<Standins>,
    pub(super) uid: String,
    pub(super) name: String,
    /// Only head pods serve; only they are worth waiting for.
    head: bool,
}

async fn forward(socket: WebSocket, target: Target, ports: Vec<u16>) {
    let (mut sink, mut from_client) = socket.split();
    for (i, port) in (0u8..).zip(&ports) {
        for channel in [2 * i, 2 * i + 1] {
            if sink.send(frame(channel, &port.to_le_bytes())).await.is_err() {
                return;
            }
        }
    }
    let (to_client, mut from_pod) = mpsc::channel::<Message>(16);
    let mut pumps = JoinSet::new();
    let mut writers = Vec::with_capacity(ports.len());
    let streams = futures::future::join_all(ports.iter().map(|port| connect(&target, *port))).await;
    for ((i, port), stream) in (0u8..).zip(&ports).zip(streams) {
        match stream {
            Some(stream) => {
                let (read, write) = tokio::io::split(stream);
                pumps.spawn(pump(read, 2 * i, to_client.clone()));
                writers.push(Some(write));
            }
            None => {
                let message = format!(
                    "error forwarding port {port} to pod {}, uid {}: connection refused: nothing listens on port {port}",
                    target.name, target.uid
                );
                let _ = sink.send(frame(2 * i + 1, message.as_bytes())).await;
                writers.push(None);
            }
        }
    }
    drop(to_client);
    // Two independent directions: a client pushing faster than the pod
    // reads must not stop the pod's answers from draining (the pod would
    // stall writing, stop reading, and both sides would wait forever).
    let to_client = async {
        while let Some(message) = from_pod.recv().await {
            if sink.send(message).await.is_err() {
                return;
            }
        }
        let _ = sink.send(Message::Close(None)).await;
    };
    let to_pod = async {
        while let Some(incoming) = from_client.next().await {
            match incoming {
                Ok(Message::Binary(bytes)) => {
                    let Some((&channel, data)) = bytes.split_first() else {
                        continue;
                    };
                    let writer = writers.get_mut(usize::from(channel / 2)).and_then(Option::as_mut);
                    // A port whose pod side has gone stops taking data;
                    // the others go on, as the kubelet's do.
                    if let (0, Some(w)) = (channel % 2, writer)
                        && !data.is_empty()
                        && w.write_all(data).await.is_err()
                    {
                        writers[usize::from(channel / 2)] = None;
                    }
                }
                Ok(Message::Close(_)) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::select! {
        () = to_client => {}
        () = to_pod => {}
    }
    pumps.abort_all();
    // Answer the client's Close (or close first); a second Close is ignored.
    let _ = sink.send(Message::Close(None)).await;
}

/// Enters the pod on `port`, waiting briefly for its stand-in.
pub(super) async fn connect(target: &Target, port: u16) -> Option<DuplexStream> {
    let deadline = tokio::time::Instant::now() + CONNECT_RETRY;
    loop {
        if let Some(stream) = target.standins.open(&target.uid, port).await {
            return Some(stream);
        }
        if !target.head || tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Copies what the pod side sends to the client, framed on `channel`.
async fn pump(mut read: impl AsyncRead + Unpin, channel: u8, to_client: mpsc::Sender<Message>) {
    let mut buf = vec![0u8; 32 * 1024];
    while let Ok(n) = read.read(&mut buf).await {
        if n == 0 || to_client.send(frame(channel, &buf[..n])).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ports as parse;

    fn ports(query: &str) -> Result<Vec<u16>, super::ApiError> {
        let pairs: Vec<(String, String)> = query
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        parse(&pairs)
    }

    #[test]
    fn ports_come_repeated_or_comma_separated() {
        assert_eq!(ports("ports=80").unwrap(), [80]);
        assert_eq!(ports("ports=80,1234").unwrap(), [80, 1234]);
        assert_eq!(ports("ports=22&ports=8265").unwrap(), [22, 8265]);
        assert!(ports("").is_err());
        assert!(ports("ports=0").is_err());
        assert!(ports("ports=http").is_err());
        assert!(ports("ports=70000").is_err());
    }
}
