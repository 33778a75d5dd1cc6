//! Service access through krayne: throughput (64 KiB writes, echoed back
//! at full duplex, Ray client port's echo) and small round trips over the WebSocket tunnel, the
//! gRPC tunnel and the HTTP proxy, each beside a direct loopback
//! connection to the same sandbox stand-in and a bare Kubernetes
//! port-forward (kube-rs), measured in the same run. Two servers: one
//! reaching services through port-forward (the default outside a cluster),
//! one `--service-upstream direct`.
//!
//! ```sh
//! cargo build --release -p krayne-server
//! cargo bench -p krayne-tests --bench tunnels [-- --mib 64 --round-trips 2000 --requests 300]
//! ```
//!
//! Uses `TEST_DATABASE_URL` for the audit log (else a throwaway Postgres).
//! Prints a table and one JSON line.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::panic,
    missing_docs
)]

use std::{
    pin::Pin,
    time::{Duration, Instant},
};

use clap::Parser;
use comfy_table::{Table, presets::ASCII_MARKDOWN};
use futures::{SinkExt as _, StreamExt as _};
use k8s_openapi::api::core::v1::Pod;
use krayne_proto::v1::{self as pb, tunnel_request, tunnel_response};
use krayne_tests::load::{BenchEnv, percentile};
use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, DuplexStream};
use tokio_tungstenite::tungstenite::{Message, client::IntoClientRequest as _};

#[derive(Parser)]
#[command(about = "Tunnel and proxy throughput and latency against direct and port-forward")]
struct Args {
    /// MiB echoed through each path for throughput.
    #[arg(long, default_value_t = 64)]
    mib: usize,
    /// Small round trips timed on each path.
    #[arg(long, default_value_t = 2000)]
    round_trips: usize,
    /// HTTP requests timed on each path.
    #[arg(long, default_value_t = 300)]
    requests: usize,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

/// The head's echo every path reaches: Ray's client port, whose stand-in
/// sends a banner and echoes. (The head's SSH now listens on the pod's
/// own loopback, as Krayne's bootstrap binds it, so only a port-forward
/// reaches it and a direct connection cannot be the baseline.)
const SERVICE: &str = "client";
const PORT: u16 = 10001;

type Stream = Pin<Box<dyn Io>>;
trait Io: AsyncRead + AsyncWrite + Send {}
impl<T: AsyncRead + AsyncWrite + Send> Io for T {}

/// A WebSocket or gRPC tunnel as a byte stream, bridged through a duplex.
fn bridge<F>(run: impl FnOnce(DuplexStream) -> F) -> Stream
where
    F: Future<Output = ()> + Send + 'static,
{
    let (ours, theirs) = tokio::io::duplex(256 * 1024);
    tokio::spawn(run(theirs));
    Box::pin(ours)
}

async fn ws_tunnel(api: &str, token: &str, service: &str) -> Stream {
    let url = format!("ws://{api}/v1/namespaces/bench-00/clusters/tun/services/{service}/tunnel");
    let mut request = url.into_client_request().unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    let (socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    bridge(|io| async move {
        let (mut sink, mut stream) = socket.split();
        let (mut r, mut w) = tokio::io::split(io);
        let up = async move {
            let mut buf = vec![0u8; 64 * 1024];
            while let Ok(n) = r.read(&mut buf).await {
                if n == 0 || sink.send(Message::binary(buf[..n].to_vec())).await.is_err() {
                    return;
                }
            }
        };
        let down = async move {
            while let Some(Ok(m)) = stream.next().await {
                if let Message::Binary(b) = m
                    && w.write_all(&b).await.is_err()
                {
                    return;
                }
            }
        };
        tokio::join!(up, down);
    })
}

async fn grpc_tunnel(api: &str, token: &str, service: &str) -> Stream {
    let mut client = krayne_tests::Grpc::connect(&format!("http://{api}"), token)
        .await
        .tunnels;
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    tx.send(pb::TunnelRequest {
        kind: Some(tunnel_request::Kind::Open(pb::TunnelTarget {
            namespace: "bench-00".into(),
            cluster: "tun".into(),
            service: service.into(),
        })),
    })
    .await
    .unwrap();
    let mut responses = client
        .open(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let _opened = responses.message().await.unwrap();
    bridge(|io| async move {
        let (mut r, mut w) = tokio::io::split(io);
        let up = async move {
            let mut buf = vec![0u8; 32 * 1024];
            while let Ok(n) = r.read(&mut buf).await {
                let data = pb::TunnelRequest {
                    kind: Some(tunnel_request::Kind::Data(bytes::Bytes::copy_from_slice(&buf[..n]))),
                };
                if n == 0 || tx.send(data).await.is_err() {
                    return;
                }
            }
        };
        let down = async move {
            while let Ok(Some(m)) = responses.message().await {
                if let Some(tunnel_response::Kind::Data(d)) = m.kind
                    && w.write_all(&d).await.is_err()
                {
                    return;
                }
            }
        };
        tokio::join!(up, down);
    })
}

/// A plain TCP relay on a local port to `target`: bytes copied each way
/// by `tokio::io::copy_bidirectional`, no framing, no checks. Two in a
/// row have the hops of `krayne tunnel` with a direct upstream (the
/// caller's forwarder, then the server), so they measure what those hops
/// alone allow on this machine.
async fn relay(target: std::net::SocketAddr) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let local = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    local
}

/// MiB/s of `mib` MiB written in 64 KiB writes while the echo is read back.
async fn throughput(stream: Stream, banner: bool, mib: usize) -> f64 {
    let (mut r, mut w) = tokio::io::split(stream);
    if banner {
        let mut b = [0u8; 64];
        let _ = r.read(&mut b).await.unwrap();
    }
    let total = mib * 1024 * 1024;
    let started = Instant::now();
    let writer = tokio::spawn(async move {
        let chunk = vec![7u8; 64 * 1024];
        for _ in 0..total / chunk.len() {
            w.write_all(&chunk).await.unwrap();
        }
        w
    });
    let mut buf = vec![0u8; 256 * 1024];
    let mut read = 0;
    while read < total {
        let n = r.read(&mut buf).await.unwrap();
        assert!(n > 0, "the echo ended early");
        read += n;
    }
    let seconds = started.elapsed().as_secs_f64();
    drop(writer.await.unwrap());
    mib as f64 / seconds
}

/// p50 and p99 of 16-byte round trips.
async fn round_trips(mut stream: Stream, banner: bool, n: usize) -> (Duration, Duration) {
    if banner {
        let mut b = [0u8; 64];
        let _ = stream.read(&mut b).await.unwrap();
    }
    let mut times = Vec::with_capacity(n);
    let (ping, mut pong) = ([1u8; 16], [0u8; 16]);
    for _ in 0..n {
        let t = Instant::now();
        stream.write_all(&ping).await.unwrap();
        stream.read_exact(&mut pong).await.unwrap();
        times.push(t.elapsed());
    }
    times.sort();
    (percentile(&times, 0.5), percentile(&times, 0.99))
}

/// A browser session's cookie for the dashboard, signed in on `api`.
async fn session_cookie(api: &str, token: &str) -> String {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let link: serde_json::Value = http
        .post(format!(
            "http://{api}/v1/namespaces/bench-00/clusters/tun/services/dashboard/sessions"
        ))
        .bearer_auth(token)
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let signed_in = http.get(link["sign_in_url"].as_str().unwrap()).send().await.unwrap();
    assert_eq!(signed_in.status(), 303);
    let set_cookie = signed_in.headers()["set-cookie"].to_str().unwrap();
    set_cookie.split(';').next().unwrap().to_owned()
}

/// p50 and p99 of `n` requests made by `get`, one after another.
async fn http_latency(n: usize, get: impl Fn() -> reqwest::RequestBuilder) -> (Duration, Duration) {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let r = get().send().await.unwrap();
        assert!(r.status().is_success(), "{}", r.status());
        let _ = r.bytes().await.unwrap();
        times.push(t.elapsed());
    }
    times.sort();
    (percentile(&times, 0.5), percentile(&times, 0.99))
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let bench = BenchEnv::start(1, |_| {}).await;
    let env = &bench.env;
    let direct_server = env.spawn_server(&["--service-upstream", "direct"]).await;
    let (pf_api, direct_api) = (env.server.api.to_string(), direct_server.api.to_string());
    bench.ready_cluster("tun").await;
    let kube = krayne_server::k8s::client_for_url(&env.sandbox.url()).unwrap();
    let pods: kube::Api<Pod> = kube::Api::namespaced(kube, "bench-00");
    let head = pods
        .list(&kube::api::ListParams::default().labels("ray.io/cluster=tun,ray.io/node-type=head"))
        .await
        .unwrap()
        .items
        .remove(0);
    // The head asks for Ray's token (round 4): the direct HTTP rows send it.
    let token_secret = head.spec.as_ref().and_then(|s| {
        s.containers[0]
            .env
            .iter()
            .flatten()
            .find(|e| e.name == "RAY_AUTH_TOKEN")
            .and_then(|e| {
                e.value_from
                    .as_ref()
                    .and_then(|v| v.secret_key_ref.as_ref())
                    .map(|r| r.name.clone())
            })
    });
    let ray_token = match token_secret {
        Some(name) => {
            let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> = kube::Api::namespaced(
                krayne_server::k8s::client_for_url(&env.sandbox.url()).unwrap(),
                "bench-00",
            );
            let secret = secrets.get(&name).await.unwrap();
            let bytes = secret.data.unwrap().remove("auth_token").unwrap().0;
            String::from_utf8(bytes).unwrap()
        }
        None => String::new(),
    };
    let (pod, ip) = (
        head.metadata.name.clone().unwrap(),
        head.status.and_then(|s| s.pod_ip).unwrap(),
    );
    let token = bench.token.clone();
    // `krayne tunnel`'s own path: the SDK's forwarder on a local port.
    let forwarder = |api: String| {
        let token = token.clone();
        async move {
            let client = krayne_client::Client::builder(format!("http://{api}"))
                .token(token)
                .connect()
                .await
                .unwrap();
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            client.forward("bench-00", "tun", SERVICE, listener)
        }
    };
    let (pf_forwarder, direct_forwarder) = (forwarder(pf_api.clone()).await, forwarder(direct_api.clone()).await);
    let (pf_local, direct_local) = (
        pf_forwarder.local_addr().unwrap(),
        direct_forwarder.local_addr().unwrap(),
    );
    let echo: std::net::SocketAddr = format!("{ip}:{PORT}").parse().unwrap();
    let two_relays = relay(relay(echo).await).await;
    let local = |addr: std::net::SocketAddr| async move {
        Box::pin(tokio::net::TcpStream::connect(addr).await.unwrap()) as Stream
    };

    // Ray's client stand-in: a banner, then an echo.
    type Opener<'a> = Box<dyn Fn() -> Pin<Box<dyn Future<Output = Stream> + 'a>> + 'a>;
    let paths: Vec<(&str, Opener)> = vec![
        (
            "direct loopback",
            Box::new(|| {
                Box::pin(async {
                    Box::pin(tokio::net::TcpStream::connect((ip.as_str(), PORT)).await.unwrap()) as Stream
                })
            }),
        ),
        (
            "two plain TCP relays (the tunnel's hops, nothing else)",
            Box::new(|| Box::pin(local(two_relays))),
        ),
        (
            "bare port-forward (kube-rs)",
            Box::new(|| {
                Box::pin(async {
                    let mut f = pods.portforward(&pod, &[PORT]).await.unwrap();
                    Box::pin(f.take_stream(PORT).unwrap()) as Stream
                })
            }),
        ),
        (
            "WebSocket tunnel, port-forward upstream",
            Box::new(|| Box::pin(ws_tunnel(&pf_api, &token, SERVICE))),
        ),
        (
            "gRPC tunnel, port-forward upstream",
            Box::new(|| Box::pin(grpc_tunnel(&pf_api, &token, SERVICE))),
        ),
        (
            "krayne tunnel (local port), port-forward upstream",
            Box::new(|| Box::pin(local(pf_local))),
        ),
        (
            "WebSocket tunnel, direct upstream",
            Box::new(|| Box::pin(ws_tunnel(&direct_api, &token, SERVICE))),
        ),
        (
            "gRPC tunnel, direct upstream",
            Box::new(|| Box::pin(grpc_tunnel(&direct_api, &token, SERVICE))),
        ),
        (
            "krayne tunnel (local port), direct upstream",
            Box::new(|| Box::pin(local(direct_local))),
        ),
    ];
    let mut results = Vec::new();
    for (name, open) in &paths {
        eprintln!("{name}…");
        let mibs = throughput(open().await, true, args.mib).await;
        let (p50, p99) = round_trips(open().await, true, args.round_trips).await;
        results.push((*name, mibs, p50, p99));
    }
    let base_direct = results[0].1;
    let base_pf = results[2].1;

    let dashboard =
        |api: &str| format!("http://{api}/v1/namespaces/bench-00/clusters/tun/services/dashboard/proxy/api/version");
    let (pf_url, direct_url) = (dashboard(&pf_api), dashboard(&direct_api));
    let fresh = || reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    let plain = fresh();
    let kept = reqwest::Client::new();
    let (pf_cookie, direct_cookie) = (
        session_cookie(&pf_api, &token).await,
        session_cookie(&direct_api, &token).await,
    );
    let pod_url = format!("http://{ip}:8265/api/version");
    let n = args.requests;
    eprintln!("HTTP…");
    let direct_http = http_latency(n, || plain.get(&pod_url).bearer_auth(&ray_token)).await;
    let proxy_pf = http_latency(n, || plain.get(&pf_url).bearer_auth(&token)).await;
    let proxy_direct = http_latency(n, || plain.get(&direct_url).bearer_auth(&token)).await;
    let session_pf = http_latency(n, || plain.get(&pf_url).header("cookie", &pf_cookie)).await;
    let session_direct = http_latency(n, || plain.get(&direct_url).header("cookie", &direct_cookie)).await;
    let kept_direct = http_latency(n, || kept.get(&pod_url).bearer_auth(&ray_token)).await;
    let kept_session_pf = http_latency(n, || kept.get(&pf_url).header("cookie", &pf_cookie)).await;
    let kept_session_direct = http_latency(n, || kept.get(&direct_url).header("cookie", &direct_cookie)).await;

    let ms = |d: Duration| format!("{:.2}", d.as_secs_f64() * 1000.0);
    let mut table = Table::new();
    table.load_style(ASCII_MARKDOWN).set_header([
        "path (Ray client echo stand-in)",
        "MiB/s",
        "× direct",
        "× port-forward",
        "round trip p50 ms",
        "p99 ms",
    ]);
    for (name, mibs, p50, p99) in &results {
        table.add_row([
            (*name).to_owned(),
            format!("{mibs:.0}"),
            format!("{:.2}", mibs / base_direct),
            format!("{:.2}", mibs / base_pf),
            ms(*p50),
            ms(*p99),
        ]);
    }
    println!("{table}\n");
    let mut table = Table::new();
    table.load_style(ASCII_MARKDOWN).set_header([
        "GET /api/version (dashboard stand-in)",
        "client connection",
        "p50 ms",
        "p99 ms",
        "p50 added ms",
    ]);
    let (new_each, keep_alive) = ("new each request", "kept alive");
    let rows = [
        ("direct to the pod IP", new_each, direct_http, direct_http),
        (
            "proxy, bearer token, port-forward upstream",
            new_each,
            proxy_pf,
            direct_http,
        ),
        (
            "proxy, bearer token, direct upstream",
            new_each,
            proxy_direct,
            direct_http,
        ),
        (
            "proxy, browser session, port-forward upstream",
            new_each,
            session_pf,
            direct_http,
        ),
        (
            "proxy, browser session, direct upstream",
            new_each,
            session_direct,
            direct_http,
        ),
        ("direct to the pod IP", keep_alive, kept_direct, kept_direct),
        (
            "proxy, browser session, port-forward upstream",
            keep_alive,
            kept_session_pf,
            kept_direct,
        ),
        (
            "proxy, browser session, direct upstream",
            keep_alive,
            kept_session_direct,
            kept_direct,
        ),
    ];
    for (name, connection, (p50, p99), (base, _)) in rows {
        let added = p50.as_secs_f64() - base.as_secs_f64();
        table.add_row([
            name.to_owned(),
            connection.to_owned(),
            ms(p50),
            ms(p99),
            format!("{:.2}", added * 1000.0),
        ]);
    }
    println!("{table}\n");
    let p50 = |(p50, _): (Duration, Duration)| p50.as_secs_f64() * 1e3;
    let json = json!({
        "mib": args.mib,
        "throughput_mib_s": results.iter().map(|(n, m, _, _)| json!({"path": n, "mib_s": m})).collect::<Vec<_>>(),
        "proxy_p50_ms": {
            "direct": p50(direct_http),
            "bearer_port_forward": p50(proxy_pf),
            "bearer_direct_upstream": p50(proxy_direct),
            "session_port_forward": p50(session_pf),
            "session_direct_upstream": p50(session_direct),
            "kept_alive_direct": p50(kept_direct),
            "kept_alive_session_port_forward": p50(kept_session_pf),
            "kept_alive_session_direct_upstream": p50(kept_session_direct),
        },
    });
    println!("{json}");
    drop(direct_server);
}
