//! Limits a shared server needs: on body and header size, on how slowly a
//! client may send, and on how fast one principal may call.

use std::time::{Duration, Instant};

use krayne_proto::v1 as pb;
use krayne_tests::{Env, EnvOptions, Rest};
use reqwest::Method;
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::TcpStream,
};

const NS: &str = "/v1/namespaces/ml-team/clusters";

#[tokio::test]
async fn oversized_bodies_headers_and_tokens_are_refused() {
    let env = Env::start().await;
    let alice = env.rest(&env.alice());
    let big = format!(r#"{{"name": "big", "pad": "{}"}}"#, "x".repeat(2 * 1024 * 1024));
    alice
        .send(Method::POST, NS, Some("application/json"), Some(big.into_bytes()))
        .await
        .problem(413, "payload_too_large");

    // Past the 64 KiB request-head limit: hyper answers 431 itself.
    let padded = reqwest::Client::new()
        .get(format!("{}/v1/whoami", env.url()))
        .bearer_auth(env.alice())
        .header("x-padding", "p".repeat(100 * 1024))
        .send()
        .await
        .unwrap();
    assert_eq!(padded.status().as_u16(), 431);

    // A token over 8 KiB (but under the head limit) is not parsed at all.
    let huge_token = format!("eyJ{}", "A".repeat(12 * 1024));
    Rest::new(&env.url(), Some(huge_token))
        .get("/v1/whoami")
        .await
        .problem(401, "unauthenticated");
    // The server is unharmed.
    alice.get("/v1/whoami").await.expect(200);
}

#[tokio::test]
async fn slow_loris_clients_are_cut_off_and_do_not_pin_the_server() {
    let env = Env::start_with(EnvOptions::with_args(&["--header-read-timeout-seconds", "2"])).await;
    let mut slow = Vec::new();
    for _ in 0..100 {
        let mut tcp = TcpStream::connect(env.server.api).await.unwrap();
        tcp.write_all(b"GET /v1/whoami HTTP/1.1\r\nHost: krayne\r\n")
            .await
            .unwrap();
        slow.push(tcp);
    }
    let opened = Instant::now();
    // Trickle a header line now and then, never finishing the request.
    let trickle = tokio::spawn(async move {
        let mut closed_after = Vec::new();
        let mut open: Vec<Option<TcpStream>> = slow.into_iter().map(Some).collect();
        while open.iter().any(Option::is_some) && opened.elapsed() < Duration::from_secs(15) {
            for slot in &mut open {
                let Some(tcp) = slot else { continue };
                let mut byte = [0u8; 1];
                let gone = match tokio::time::timeout(Duration::from_millis(1), tcp.read(&mut byte)).await {
                    Ok(Ok(0) | Err(_)) => true,
                    Ok(Ok(_)) => false, // a 408 or similar, then the close
                    Err(_) => tcp.write_all(b"X-Slow: 1\r\n").await.is_err(),
                };
                if gone {
                    closed_after.push(opened.elapsed());
                    *slot = None;
                }
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        (closed_after, open.iter().filter(|s| s.is_some()).count())
    });
    // Meanwhile everyone else is served promptly.
    let alice = env.rest(&env.alice());
    for _ in 0..20 {
        let started = Instant::now();
        alice.get("/v1/whoami").await.expect(200);
        assert!(started.elapsed() < Duration::from_secs(1));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (closed_after, still_open) = trickle.await.unwrap();
    assert_eq!(still_open, 0, "slow connections the server did not close");
    let latest = closed_after.iter().max().unwrap();
    assert!(
        *latest < Duration::from_secs(6),
        "a slow client kept its connection for {latest:?} (timeout 2 s)"
    );
}

#[tokio::test]
async fn silent_clients_and_half_prefaces_are_cut_off() {
    let env = Env::start_with(EnvOptions::with_args(&["--header-read-timeout-seconds", "2"])).await;
    // Connected, nothing sent; or half of the HTTP/2 preface, then nothing.
    let mut idle = Vec::new();
    for i in 0..20 {
        let mut tcp = TcpStream::connect(env.server.api).await.unwrap();
        if i % 2 == 1 {
            tcp.write_all(b"PRI * HTTP/2.0\r\n").await.unwrap();
        }
        idle.push(tcp);
    }
    let opened = Instant::now();
    for mut tcp in idle {
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(6), tcp.read(&mut byte)).await;
        assert!(
            matches!(read, Ok(Ok(0) | Err(_))),
            "a silent connection stayed open for {:?}",
            opened.elapsed()
        );
    }
    env.rest(&env.alice()).get("/v1/whoami").await.expect(200);
}

#[tokio::test]
async fn a_principal_over_its_rate_gets_429_and_others_are_unaffected() {
    let env = Env::start_with(EnvOptions::with_args(&[
        "--rate-limit-per-second",
        "1",
        "--rate-limit-burst",
        "10",
    ]))
    .await;
    let (alice, other) = (
        env.rest(&env.alice()),
        env.rest(&env.token("olga@example.com", &["other-team"])),
    );
    let mut grpc = env.grpc(&env.alice()).await;
    let mut limited = None;
    for _ in 0..30 {
        let reply = alice.get("/v1/whoami").await;
        if reply.status == 429 {
            limited = Some(reply.problem(429, "rate_limited"));
            break;
        }
        reply.expect(200);
    }
    let limited = limited.expect("30 requests at once exceed a burst of 10");
    // The limit is the principal's, whatever the transport.
    let status = grpc.identity.who_am_i(pb::WhoAmIRequest {}).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    let info = tonic_types::StatusExt::get_details_retry_info(&status).expect("retry info");
    assert!(info.retry_delay.is_some_and(|d| d > Duration::ZERO));
    let retry_after: u64 = limited.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=2).contains(&retry_after), "Retry-After: {retry_after}");

    // Another principal still has its whole burst.
    for _ in 0..10 {
        other.get("/v1/whoami").await.expect(200);
    }

    tokio::time::sleep(Duration::from_secs(retry_after)).await;
    alice.get("/v1/whoami").await.expect(200);
}
