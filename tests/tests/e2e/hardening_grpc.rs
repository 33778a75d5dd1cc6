//! Issue 18, gRPC findings of the outside review, each as it was found:
//! raw HTTP/1.1 and HTTP/2 (the `h2` crate), not a well-behaved client.

use std::time::{Duration, Instant};

use bytes::Bytes;
use krayne_proto::v1 as pb;
use krayne_tests::{
    Env, EnvOptions,
    raw::{H2, Http1, frame},
};
use prost::Message as _;
use tonic::Code;
use tonic_reflection::pb::v1::{
    ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
    server_reflection_request::MessageRequest,
};

const WHOAMI: &str = "/krayne.v1.IdentityService/WhoAmI";
const GET: &str = "/krayne.v1.ClusterService/GetCluster";
const HEALTH: &str = "/grpc.health.v1.Health/Check";

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// Finding 1: a request that declares a body and never sends it was never
/// answered (no auth before the message, no deadline on it). Now a
/// krayne.v1 call without a token is refused from its headers at once, and
/// every other one is answered when the body deadline (2 s here) passes.
#[tokio::test]
async fn grpc_requests_whose_message_never_comes_are_answered_and_let_go() {
    let env = Env::start_with(EnvOptions::with_args(&["--request-body-timeout-seconds", "2"])).await;
    let head = |path: &str| {
        format!("POST {path} HTTP/1.1\r\nHost: krayne\r\nContent-Type: application/grpc\r\nContent-Length: 1000")
    };
    // HTTP/1.1, as the review's curl: 100 connections, half without a token
    // on krayne.v1, half on health (no token needed).
    let mut conns = Vec::new();
    for i in 0..100 {
        let path = if i % 2 == 0 { WHOAMI } else { HEALTH };
        let mut conn = Http1::send(env.server.api, &head(path), b"").await;
        conns.push((
            path,
            tokio::spawn(async move { conn.answer(Duration::from_secs(8)).await }),
        ));
    }
    // HTTP/2: 150 silent streams on one connection (health, and GetCluster
    // with a valid token: authenticated, then silent), and 50 without a token.
    let mut h2 = H2::connect(env.server.api).await;
    let token = bearer(&env.alice());
    let mut streams = Vec::new();
    for i in 0..200 {
        let (path, headers): (&str, Vec<(&str, &str)>) = match i % 4 {
            0 => (WHOAMI, vec![("content-length", "1000")]),
            1 => (GET, vec![("content-length", "1000"), ("authorization", &token)]),
            _ => (HEALTH, vec![("content-length", "1000")]),
        };
        let stream = h2.open(path, &headers, None, false).await;
        let opened = stream.opened;
        let answer = tokio::spawn(async move { (stream.grpc_answer(Duration::from_secs(8)).await, opened.elapsed()) });
        streams.push((path, i % 4 == 0, answer));
    }
    let mut unanswered = 0;
    let mut slowest = Duration::ZERO;
    for (path, answer) in conns {
        let Some((head, after)) = answer.await.unwrap() else {
            unanswered += 1;
            continue;
        };
        slowest = slowest.max(after);
        if path == WHOAMI {
            // 16 UNAUTHENTICATED, or 8 once this address is past its rate
            // of refused authentications (the flood defence): both at once.
            assert!(
                head.contains("grpc-status: 16") || head.contains("grpc-status: 8"),
                "{head}"
            );
            assert!(
                after < Duration::from_secs(1),
                "refused from headers, not after {after:?}"
            );
        } else {
            assert!(head.contains("grpc-status: 4"), "{head}");
        }
    }
    for (path, token_less, answer) in streams {
        let (Some(answer), after) = answer.await.unwrap() else {
            unanswered += 1;
            continue;
        };
        slowest = slowest.max(after);
        let want: &[i32] = if token_less { &[16, 8] } else { &[4] };
        assert!(want.contains(&answer.code), "{path}: {answer:?}");
        if token_less {
            assert!(
                after < Duration::from_secs(1),
                "refused from headers, not after {after:?}"
            );
        }
    }
    eprintln!("silent bodies: {unanswered} of 300 unanswered; slowest answer {slowest:?}");
    assert_eq!(unanswered, 0, "requests still held after the 2 s body deadline");
    assert!(slowest < Duration::from_secs(6), "{slowest:?}");
    // The connection and the server are fine.
    let answer = h2
        .unary(
            WHOAMI,
            &[("authorization", &token)],
            frame(&pb::WhoAmIRequest {}.encode_to_vec()),
        )
        .await;
    assert_eq!(answer.code, 0, "{answer:?}");
}

/// Finding 5: broken framing answered INTERNAL (13); clients retry that.
#[tokio::test]
async fn broken_grpc_framing_is_invalid_argument() {
    let env = Env::start().await;
    let mut h2 = H2::connect(env.server.api).await;
    let token = bearer(&env.alice());
    let cases: [(&str, &[u8]); 5] = [
        ("compressed flag without grpc-encoding", &[1, 0, 0, 0, 0]),
        ("compression flag 2", &[2, 0, 0, 0, 0]),
        ("a 3-byte prefix", &[0, 0, 0]),
        ("a length prefix with no data", &[0, 0, 0, 0, 10]),
        ("an empty request", &[]),
    ];
    for (case, body) in cases {
        let answer = h2
            .unary(WHOAMI, &[("authorization", &token)], Bytes::copy_from_slice(body))
            .await;
        assert_eq!(answer.code, Code::InvalidArgument as i32, "{case}: {answer:?}");
    }
}

/// Smaller finding: an unknown method got a REST 404, not UNIMPLEMENTED.
#[tokio::test]
async fn unknown_grpc_methods_are_unimplemented() {
    let env = Env::start().await;
    let mut h2 = H2::connect(env.server.api).await;
    let token = bearer(&env.alice());
    for path in [
        "/krayne.v1.ClusterService/Nope",
        "/krayne.v1.Nope/GetCluster",
        "/foo.Bar/Baz",
        "/v1/whoami",
    ] {
        for headers in [vec![], vec![("authorization", token.as_str())]] {
            let answer = h2.unary(path, &headers, frame(b"")).await;
            assert_eq!(answer.code, Code::Unimplemented as i32, "{path}: {answer:?}");
        }
    }
}

/// A served method's path is gated whatever the content type says: no
/// spelling of it reaches a handler without a token (found in review).
#[tokio::test]
async fn every_content_type_on_a_method_path_passes_the_gate() {
    let env = Env::start().await;
    let mut h2 = H2::connect(env.server.api).await;
    let whoami = frame(&pb::WhoAmIRequest {}.encode_to_vec());
    for content_type in [
        "Application/GRPC",
        "application/grpc-web",
        "application/json",
        "text/plain",
    ] {
        let answer = h2
            .unary(WHOAMI, &[("content-type", content_type)], whoami.clone())
            .await;
        assert_eq!(answer.code, Code::Unauthenticated as i32, "{content_type}: {answer:?}");
    }
    let token = bearer(&env.alice());
    let answer = h2
        .unary(
            WHOAMI,
            &[("content-type", "Application/GRPC+proto"), ("authorization", &token)],
            whoami,
        )
        .await;
    assert_eq!(answer.code, 0, "{answer:?}");

    // Closed reflection stays closed, and a silent body on health is still
    // cut off at the deadline, whatever the content type.
    let closed = Env::start_with(EnvOptions::with_args(&[
        "--grpc-reflection-requires-token",
        "--request-body-timeout-seconds",
        "2",
    ]))
    .await;
    let mut h2 = H2::connect(closed.server.api).await;
    let list = frame(
        &ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        }
        .encode_to_vec(),
    );
    let reflection = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo";
    let answer = h2.unary(reflection, &[("content-type", "text/plain")], list).await;
    assert_eq!(answer.code, Code::Unauthenticated as i32, "{answer:?}");
    let silent = h2
        .open(
            HEALTH,
            &[("content-type", "text/plain"), ("content-length", "100")],
            None,
            false,
        )
        .await;
    let answer = silent.grpc_answer(Duration::from_secs(8)).await.expect("an answer");
    assert_eq!(answer.code, Code::DeadlineExceeded as i32, "{answer:?}");
}

/// Findings 1 and 6 for gRPC: a declared size over the message limit is
/// refused at once, whatever comes after.
#[tokio::test]
async fn grpc_bodies_declared_over_the_limit_are_refused_at_once() {
    let env = Env::start().await;
    let mut h2 = H2::connect(env.server.api).await;
    let token = bearer(&env.alice());
    for length in ["2097152", "9223372036854775808"] {
        let stream = h2
            .open(
                WHOAMI,
                &[("authorization", &token), ("content-length", length)],
                None,
                false,
            )
            .await;
        let started = Instant::now();
        let answer = stream.grpc_answer(Duration::from_secs(5)).await.unwrap();
        assert_eq!(answer.code, Code::ResourceExhausted as i32, "{answer:?}");
        assert!(started.elapsed() < Duration::from_secs(1));
    }
}

/// Smaller finding: `grpc-timeout` was ignored, and a malformed one too.
#[tokio::test]
async fn grpc_timeout_is_honoured_and_checked() {
    let env = Env::start_with(EnvOptions::with_args(&["--cache", "false"])).await;
    let mut h2 = H2::connect(env.server.api).await;
    let token = bearer(&env.alice());
    let get = frame(
        &pb::GetClusterRequest {
            namespace: "ml-team".into(),
            name: "slow".into(),
        }
        .encode_to_vec(),
    );
    for bad in ["5s", "123456789S", "S", "1.5S"] {
        let answer = h2
            .unary(GET, &[("authorization", &token), ("grpc-timeout", bad)], get.clone())
            .await;
        assert_eq!(answer.code, Code::InvalidArgument as i32, "{bad}: {answer:?}");
    }
    // A unary call: Kubernetes answers in 3 s, the client gives 500 ms.
    env.sandbox.set_latency(Duration::from_secs(3));
    let started = Instant::now();
    let answer = h2
        .unary(GET, &[("authorization", &token), ("grpc-timeout", "500m")], get.clone())
        .await;
    assert_eq!(answer.code, Code::DeadlineExceeded as i32, "{answer:?}");
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    env.sandbox.set_latency(Duration::ZERO);

    // A wait (server streaming) on a cluster that never gets ready (its
    // head fits on no node): the client's 1 s bounds it, not the wait's
    // own 60 s.
    let alice = env.rest(&env.alice());
    let body = serde_json::json!({"name": "stuck", "head": {"cpus": "64"}, "worker_groups": []});
    alice.post("/v1/namespaces/ml-team/clusters", &body).await.expect(201);
    let wait = frame(
        &pb::WaitClusterRequest {
            namespace: "ml-team".into(),
            name: "stuck".into(),
            timeout_seconds: 60,
        }
        .encode_to_vec(),
    );
    let started = Instant::now();
    let stream = h2
        .open(
            "/krayne.v1.ClusterService/WaitCluster",
            &[("authorization", &token), ("grpc-timeout", "1S")],
            Some(wait),
            true,
        )
        .await;
    let answer = stream.grpc_answer(Duration::from_secs(10)).await.unwrap();
    assert_eq!(answer.code, Code::DeadlineExceeded as i32, "{answer:?}");
    assert!(started.elapsed() < Duration::from_secs(4), "{:?}", started.elapsed());
}

async fn list_services(env: &Env, token: Option<&str>) -> Result<(), tonic::Status> {
    let channel = tonic::transport::Channel::from_shared(env.url())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = ServerReflectionClient::new(channel);
    let mut request = tonic::Request::new(futures::stream::iter([ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    }]));
    if let Some(t) = token {
        request
            .metadata_mut()
            .insert("authorization", bearer(t).parse().unwrap());
    }
    let mut answers = client.server_reflection_info(request).await?.into_inner();
    answers
        .message()
        .await?
        .map(|_| ())
        .ok_or_else(|| tonic::Status::unknown("no answer"))
}

/// Smaller finding: health and reflection answer without a token (as
/// documented); `--grpc-reflection-requires-token` closes reflection.
#[tokio::test]
async fn reflection_needs_a_token_only_when_configured() {
    let open = Env::start().await;
    list_services(&open, None).await.unwrap();
    let closed = Env::start_with(EnvOptions::with_args(&["--grpc-reflection-requires-token"])).await;
    let refused = list_services(&closed, None).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    list_services(&closed, Some(&closed.alice())).await.unwrap();
    let mut h2 = H2::connect(closed.server.api).await;
    let check = frame(&tonic_health::pb::HealthCheckRequest { service: String::new() }.encode_to_vec());
    assert_eq!(h2.unary(HEALTH, &[], check).await.code, 0, "health needs no token");
}

/// Smaller findings: two `authorization` entries are refused, not "first
/// wins"; the scheme is case-insensitive and spaces may repeat.
#[tokio::test]
async fn authorization_metadata_is_read_strictly() {
    let env = Env::start().await;
    let mut h2 = H2::connect(env.server.api).await;
    let (alice, admin) = (env.alice(), env.admin());
    let whoami = frame(&pb::WhoAmIRequest {}.encode_to_vec());
    let two = [("authorization", bearer(&alice)), ("authorization", bearer(&admin))];
    let two: Vec<(&str, &str)> = two.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let answer = h2.unary(WHOAMI, &two, whoami.clone()).await;
    assert_eq!(answer.code, Code::Unauthenticated as i32, "{answer:?}");
    for scheme in ["bearer", "BEARER", "Bearer  ", "bEaReR\t"] {
        let value = format!("{scheme} {alice}");
        let answer = h2.unary(WHOAMI, &[("authorization", &value)], whoami.clone()).await;
        assert_eq!(answer.code, 0, "{scheme:?}: {answer:?}");
    }
}
