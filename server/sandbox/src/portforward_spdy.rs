//! `pods/portforward` as kubectl speaks it: SPDY/3.1 (subprotocol
//! `portforward.k8s.io`), over an HTTP upgrade or tunnelled through a
//! WebSocket (`SPDY/3.1+portforward.k8s.io`, KEP-4006, kubectl ≥ 1.31's
//! first try). Each forwarded connection is a pair of streams sharing a
//! `requestID`, `error` and `data`, each naming its `port`; the server
//! accepts every stream with an empty SYN_REPLY, as the kubelet does, then
//! copies between the data stream and the pod's port, and writes why on the
//! error stream when the port cannot be reached. Both streams are closed
//! when the pod side closes.

use std::collections::HashMap;

use bytes::Bytes;
use futures::{Sink, SinkExt as _, Stream, StreamExt as _};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    sync::mpsc,
    task::JoinSet,
};

use super::{
    portforward::{Target, connect},
    spdy::{self, Decoder, Encoder, Frame, REFUSED_STREAM},
};

/// The WebSocket subprotocol of SPDY tunnelled through a WebSocket.
pub(super) const TUNNEL_PROTOCOL: &str = "SPDY/3.1+portforward.k8s.io";
/// The SPDY subprotocol (`X-Stream-Protocol-Version`).
pub(super) const PROTOCOL: &str = "portforward.k8s.io";
/// Forwarded connections one SPDY connection may hold at once (kubectl
/// opens one per local connection); more are refused stream by stream.
const MAX_PAIRS: usize = 128;
/// How long a pair waits for its other stream, as the kubelet's
/// `streamCreationTimeout`; checked whenever a new stream arrives.
const STREAM_CREATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// Data frames queued for one pod connection before the connection's
/// reader waits for it (spdystream, too, hands data on one frame at a time).
const INBOUND_QUEUE: usize = 16;

/// What the session asks the writer to send, in order.
enum Out {
    Reply(u32),
    Data { stream: u32, fin: bool, data: Bytes },
    Ping(u32),
    Refuse(u32),
}

/// One forwarded connection's streams, gathered as they arrive.
#[derive(Default)]
struct Pair {
    port: u16,
    error: Option<u32>,
    data: Option<u32>,
    /// The client's data for the pod, until the forwarding task takes it.
    inbound: Option<mpsc::Receiver<Bytes>>,
    /// When its first stream came.
    since: Option<tokio::time::Instant>,
}

/// Serves one SPDY connection: `input` is its bytes as they arrive,
/// `output` takes the server's frames. Returns when the client goes.
pub(super) async fn serve<I, O>(mut input: I, mut output: O, target: Target)
where
    I: Stream<Item = Bytes> + Unpin,
    O: Sink<Bytes> + Unpin,
{
    let (out, mut to_write) = mpsc::channel::<Out>(64);
    let writer = async move {
        let mut encoder = Encoder::default();
        while let Some(next) = to_write.recv().await {
            let frame = match next {
                Out::Reply(stream) => encoder.syn_reply(stream),
                Out::Data { stream, fin, data } => spdy::data(stream, fin, &data),
                Out::Ping(id) => spdy::ping(id),
                Out::Refuse(stream) => spdy::rst_stream(stream, REFUSED_STREAM),
            };
            if output.send(frame).await.is_err() {
                return;
            }
        }
    };
    let reader = async {
        let mut decoder = Decoder::default();
        let mut pairs: HashMap<String, Pair> = HashMap::new();
        // Where each data stream's bytes go while its pod connection lives.
        let mut inbound: HashMap<u32, mpsc::Sender<Bytes>> = HashMap::new();
        let mut forwarding = JoinSet::new();
        while let Some(bytes) = input.next().await {
            decoder.extend(&bytes);
            loop {
                let frame = match decoder.next_frame() {
                    Ok(Some(frame)) => frame,
                    Ok(None) => break,
                    Err(e) => {
                        tracing::debug!(error = %e, "port-forward: not SPDY/3.1; closing");
                        return;
                    }
                };
                match frame {
                    Frame::SynStream { stream, headers, .. } => {
                        for (id, stale) in expired(&mut pairs) {
                            tracing::debug!(request = %id, "port-forward: timed out waiting for streams");
                            if let Some(s) = stale.data {
                                inbound.remove(&s);
                                let _ = out
                                    .send(Out::Data {
                                        stream: s,
                                        fin: true,
                                        data: Bytes::new(),
                                    })
                                    .await;
                            }
                            if let Some(s) = stale.error {
                                let why = format!("timed out waiting for the other stream of request {id}");
                                let _ = out
                                    .send(Out::Data {
                                        stream: s,
                                        fin: true,
                                        data: Bytes::from(why),
                                    })
                                    .await;
                            }
                        }
                        let pending = pairs.len() + forwarding.len();
                        match accept(&mut pairs, &mut inbound, stream, &headers, pending) {
                            Ok(Some(id)) => {
                                let _ = out.send(Out::Reply(stream)).await;
                                if let Some(pair) = pairs.remove(&id) {
                                    forwarding.spawn(forward(pair, target.clone(), out.clone()));
                                }
                            }
                            Ok(None) => {
                                let _ = out.send(Out::Reply(stream)).await;
                            }
                            Err(why) => {
                                tracing::debug!(stream, %why, "port-forward: stream refused");
                                let _ = out.send(Out::Refuse(stream)).await;
                            }
                        }
                    }
                    Frame::Data { stream, fin, data } => {
                        if let Some(to_pod) = inbound.get(&stream)
                            && !data.is_empty()
                            && to_pod.send(data).await.is_err()
                        {
                            inbound.remove(&stream);
                        }
                        if fin {
                            inbound.remove(&stream);
                        }
                    }
                    Frame::RstStream { stream } => {
                        inbound.remove(&stream);
                    }
                    Frame::Ping(id) => {
                        let _ = out.send(Out::Ping(id)).await;
                    }
                    Frame::GoAway => return,
                    Frame::Ignored => {}
                }
            }
            while forwarding.try_join_next().is_some() {}
        }
    };
    // The reader holds the forwarding tasks: when the client goes, they go.
    tokio::select! {
        () = reader => {}
        () = writer => {}
    }
}

/// Takes a new stream into its pair. `Ok(Some(id))` when the pair is
/// whole and ready to forward, `Ok(None)` when it waits for its other
/// stream, `Err` for a stream the kubelet would refuse.
fn accept(
    pairs: &mut HashMap<String, Pair>,
    inbound: &mut HashMap<u32, mpsc::Sender<Bytes>>,
    stream: u32,
    headers: &[(String, String)],
    pending: usize,
) -> Result<Option<String>, String> {
    let header = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
    let port = header("port")
        .ok_or("\"port\" header is required")?
        .parse::<u16>()
        .ok()
        .filter(|p| *p > 0)
        .ok_or("the port must be 1–65535")?;
    let kind = header("streamtype").ok_or("\"streamType\" header is required")?;
    // kubectl has sent a requestID since 1.4; without one, the stream's
    // own id pairs them as the kubelet guesses (error n, data n + 2).
    let id = match (header("requestid"), kind) {
        (Some(id), _) => id.to_owned(),
        (None, "data") => stream.saturating_sub(2).to_string(),
        (None, _) => stream.to_string(),
    };
    if !pairs.contains_key(&id) && pending >= MAX_PAIRS {
        return Err(format!("more than {MAX_PAIRS} forwarded connections at once"));
    }
    let pair = pairs.entry(id.clone()).or_default();
    pair.since.get_or_insert_with(tokio::time::Instant::now);
    pair.port = port;
    match kind {
        "error" if pair.error.is_none() => pair.error = Some(stream),
        "data" if pair.data.is_none() => {
            let (to_pod, from_client) = mpsc::channel(INBOUND_QUEUE);
            inbound.insert(stream, to_pod);
            pair.data = Some(stream);
            pair.inbound = Some(from_client);
        }
        "error" | "data" => return Err(format!("{kind} stream already assigned")),
        other => return Err(format!("invalid stream type {other:?}")),
    }
    Ok((pair.error.is_some() && pair.data.is_some()).then_some(id))
}

/// Takes out the pairs whose other stream has not come in time.
fn expired(pairs: &mut HashMap<String, Pair>) -> Vec<(String, Pair)> {
    let stale: Vec<String> = pairs
        .iter()
        .filter(|(_, p)| p.since.is_some_and(|t| t.elapsed() >= STREAM_CREATION_TIMEOUT))
        .map(|(id, _)| id.clone())
        .collect();
    stale.into_iter().filter_map(|id| pairs.remove_entry(&id)).collect()
}

/// Forwards one connection: the pod's port to and from the data stream.
async fn forward(pair: Pair, target: Target, out: mpsc::Sender<Out>) {
    let (Some(error), Some(data), Some(mut from_client)) = (pair.error, pair.data, pair.inbound) else {
        return;
    };
    let close = |stream| Out::Data {
        stream,
        fin: true,
        data: Bytes::new(),
    };
    let Some(pod) = connect(&target, pair.port).await else {
        let message = format!(
            "error forwarding port {} to pod {}, uid {}: connection refused: nothing listens on port {}",
            pair.port, target.name, target.uid, pair.port
        );
        let _ = out
            .send(Out::Data {
                stream: error,
                fin: true,
                data: Bytes::from(message),
            })
            .await;
        let _ = out.send(close(data)).await;
        return;
    };
    let (mut read, mut write) = tokio::io::split(pod);
    let to_pod = async move {
        while let Some(bytes) = from_client.recv().await {
            if write.write_all(&bytes).await.is_err() {
                break;
            }
        }
        // The client half-closed: so does the pod's side; its answer may
        // still come.
        let _ = write.shutdown().await;
        std::future::pending::<()>().await;
    };
    let from_pod = async {
        let mut buf = vec![0u8; 32 * 1024];
        while let Ok(n) = read.read(&mut buf).await {
            if n == 0 {
                break;
            }
            let chunk = Out::Data {
                stream: data,
                fin: false,
                data: Bytes::copy_from_slice(&buf[..n]),
            };
            if out.send(chunk).await.is_err() {
                return;
            }
        }
        let _ = out.send(close(data)).await;
        let _ = out.send(close(error)).await;
    };
    tokio::select! {
        () = to_pod => {}
        () = from_pod => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(kind: &str, port: &str, id: Option<&str>) -> Vec<(String, String)> {
        let mut h = vec![
            ("streamtype".to_owned(), kind.to_owned()),
            ("port".to_owned(), port.to_owned()),
        ];
        if let Some(id) = id {
            h.push(("requestid".to_owned(), id.to_owned()));
        }
        h
    }

    #[test]
    fn streams_pair_by_request_id_and_bad_ones_are_refused() {
        let (mut pairs, mut inbound) = (HashMap::new(), HashMap::new());
        let mut take = |stream, h: Vec<(String, String)>| accept(&mut pairs, &mut inbound, stream, &h, 0);
        assert_eq!(take(1, headers("error", "8265", Some("0"))), Ok(None));
        assert_eq!(take(5, headers("error", "22", Some("1"))), Ok(None));
        assert_eq!(take(3, headers("data", "8265", Some("0"))), Ok(Some("0".into())));
        assert!(
            take(7, headers("error", "22", Some("1")))
                .unwrap_err()
                .contains("already assigned")
        );
        assert!(
            take(9, headers("stdout", "22", Some("2")))
                .unwrap_err()
                .contains("invalid stream type")
        );
        assert!(
            take(11, headers("data", "0", Some("3")))
                .unwrap_err()
                .contains("1–65535")
        );
        assert!(take(13, headers("data", "http", Some("3"))).is_err());
        assert!(
            take(15, vec![("port".into(), "22".into())])
                .unwrap_err()
                .contains("streamType")
        );
        // An old client's streams, without requestID: error n, data n + 2.
        assert_eq!(take(17, headers("error", "22", None)), Ok(None));
        assert_eq!(take(19, headers("data", "22", None)), Ok(Some("17".into())));
        assert!(inbound.contains_key(&3) && inbound.contains_key(&19));
    }

    #[tokio::test(start_paused = true)]
    async fn a_pair_missing_its_other_stream_times_out() {
        let (mut pairs, mut inbound) = (HashMap::new(), HashMap::new());
        accept(&mut pairs, &mut inbound, 1, &headers("error", "22", Some("0")), 0).unwrap();
        tokio::time::advance(STREAM_CREATION_TIMEOUT / 2).await;
        accept(&mut pairs, &mut inbound, 5, &headers("data", "22", Some("1")), 0).unwrap();
        assert!(expired(&mut pairs).is_empty());
        tokio::time::advance(STREAM_CREATION_TIMEOUT / 2).await;
        let gone = expired(&mut pairs);
        assert_eq!(gone.len(), 1);
        assert_eq!((gone[0].0.as_str(), gone[0].1.error), ("0", Some(1)));
        assert!(pairs.contains_key("1"), "the younger one waits on");
    }

    #[test]
    fn too_many_connections_at_once_are_refused() {
        let (mut pairs, mut inbound) = (HashMap::new(), HashMap::new());
        let refused = accept(
            &mut pairs,
            &mut inbound,
            1,
            &headers("error", "22", Some("9")),
            MAX_PAIRS,
        );
        assert!(refused.unwrap_err().contains("at once"));
    }
}
