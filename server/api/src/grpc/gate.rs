//! What a gRPC request passes before tonic reads its message: a known
//! method (else UNIMPLEMENTED), a declared size within the limit (else
//! RESOURCE_EXHAUSTED), a readable `grpc-timeout` (else INVALID_ARGUMENT),
//! a caller authenticated from metadata alone (else UNAUTHENTICATED, before
//! any byte of the body is read), a deadline on receiving the request
//! message, and for unary calls a deadline on the answer: the client's
//! `grpc-timeout` or the server's request timeout, whichever is sooner.

use std::{collections::HashMap, sync::Arc, time::Duration};

use axum::{
    BoxError,
    body::Body,
    extract::{Request, State},
    http::header,
    middleware::Next,
    response::{IntoResponse as _, Response},
};
use prost::Message as _;
use tonic::Status;

use super::status::to_status;
use crate::{
    auth::Authenticator,
    control::ControlPlane,
    domain::{AuthFailure, Error, audit::Transport},
    edge::{self, DeadlineBody, DeclaredRefusal},
};

/// The tunnel method, whose request stream has no idle deadline.
pub(crate) const TUNNEL_OPEN: &str = "/krayne.v1.TunnelService/Open";

/// How a method exchanges messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Method {
    /// The client sends a stream of messages (reflection).
    pub(crate) client_streaming: bool,
    /// The server answers with a stream (waits, health watches).
    pub(crate) server_streaming: bool,
    /// Only callers with a valid token may call it.
    pub(crate) needs_token: bool,
}

/// Every method this server serves, by path (`/package.Service/Method`),
/// read from the descriptor sets the services are generated from.
#[derive(Debug, Default)]
pub(crate) struct Methods(HashMap<String, Method>);

impl Methods {
    /// The methods in `sets` (encoded `FileDescriptorSet`s); those of
    /// packages in `protected` need a token, but for the `public` paths.
    pub(crate) fn from_descriptor_sets(sets: &[&[u8]], protected: &[&str], public: &[&str]) -> Result<Self, String> {
        let mut methods = HashMap::new();
        for set in sets {
            let set = prost_types::FileDescriptorSet::decode(*set).map_err(|e| format!("descriptor set: {e}"))?;
            for file in set.file {
                let package = file.package().to_owned();
                for service in &file.service {
                    for m in &service.method {
                        let path = format!("/{package}.{}/{}", service.name(), m.name());
                        let method = Method {
                            client_streaming: m.client_streaming(),
                            server_streaming: m.server_streaming(),
                            needs_token: protected.contains(&package.as_str()) && !public.contains(&path.as_str()),
                        };
                        methods.insert(path, method);
                    }
                }
            }
        }
        Ok(Self(methods))
    }

    fn get(&self, path: &str) -> Option<Method> {
        self.0.get(path).copied()
    }
}

/// What the gate needs.
#[derive(Clone)]
pub(crate) struct Gate {
    pub(crate) plane: ControlPlane,
    pub(crate) auth: Authenticator,
    pub(crate) methods: Arc<Methods>,
    /// Largest request message (the 5-byte frame prefix comes on top).
    pub(crate) max_message: usize,
    /// Longest a unary call may take.
    pub(crate) request_timeout: Duration,
    /// Longest the request message may take to arrive.
    pub(crate) body_timeout: Duration,
}

/// The client's deadline of a server-streaming call, in its extensions;
/// the handler bounds its stream by it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClientDeadline(pub(crate) tokio::time::Instant);

/// Whether a request speaks gRPC (by its content type).
pub(crate) fn is_grpc(request: &Request) -> bool {
    request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.as_bytes().get(..16))
        .is_some_and(|prefix| prefix.eq_ignore_ascii_case(b"application/grpc"))
}

/// A trailers-only answer with `status`.
fn answer(status: Status) -> Response {
    status.into_http::<Body>().into_response()
}

/// Parses `grpc-timeout`: 1 to 8 digits and a unit (H, M, S, m, u, n).
pub(crate) fn parse_grpc_timeout(value: &str) -> Option<Duration> {
    if !value.is_ascii() {
        return None;
    }
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

fn message_timeout(limit: Duration) -> BoxError {
    Box::new(Status::deadline_exceeded(format!(
        "the request message did not arrive within {} s",
        limit.as_secs()
    )))
}

/// The host a gRPC call was sent to (`:authority`).
#[derive(Debug, Clone)]
pub(crate) struct Authority(pub(crate) String);

/// Middleware in front of every route: requests for a gRPC method pass the
/// gate, other gRPC-typed requests are UNIMPLEMENTED, the rest (REST) go on
/// untouched.
pub(crate) async fn gate(State(gate): State<Gate>, request: Request, next: Next) -> Response {
    // A served method's path passes the gate whatever its content type
    // says (tonic routes by path), so no spelling of the content type
    // reaches a handler ungated; other paths are gRPC's only if typed so.
    let Some(method) = gate.methods.get(request.uri().path()) else {
        if is_grpc(&request) {
            let path = request.uri().path();
            return answer(Status::unimplemented(format!("no method {path} on this server")));
        }
        return next.run(request).await;
    };
    // The 5-byte frame prefix comes on top of the message; a stream of
    // messages (reflection) has no total to declare.
    let frame_limit = (!method.client_streaming).then(|| (gate.max_message as u64).saturating_add(5));
    let mut request = match edge::check_declared(request, frame_limit, gate.body_timeout, message_timeout) {
        Ok(request) => request,
        Err(DeclaredRefusal::TooLarge(n)) => {
            return answer(Status::resource_exhausted(format!(
                "the request declares {n} bytes; messages are limited to {} bytes",
                gate.max_message
            )));
        }
        Err(DeclaredRefusal::Unreadable) => return answer(Status::invalid_argument("unreadable content-length")),
    };
    let client_deadline = match request.headers().get("grpc-timeout") {
        None => None,
        Some(v) => match v.to_str().ok().and_then(parse_grpc_timeout) {
            Some(d) => Some(d),
            None => {
                return answer(Status::invalid_argument(
                    "malformed grpc-timeout: expected 1 to 8 digits and a unit (H, M, S, m, u, n)",
                ));
            }
        },
    };
    if method.needs_token {
        let several = Error::Unauthenticated(AuthFailure::SeveralCredentials);
        match edge::authenticate(
            &gate.plane,
            &gate.auth,
            request.headers(),
            request.extensions(),
            Transport::Grpc,
            several,
        )
        .await
        {
            Ok(cx) => {
                request.extensions_mut().insert(cx);
            }
            Err(e) => return answer(to_status(e)),
        }
    }
    // Links handed out (browser sessions) name the host the call was
    // sent to when the server has no public URL.
    let authority = request.uri().authority().map(ToString::to_string).or_else(|| {
        request
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .map(str::to_owned)
    });
    if let Some(authority) = authority {
        request.extensions_mut().insert(Authority(authority));
    }
    // A tunnel's messages come when its user types: its own idle timeout
    // governs it, and its handler times the opening message.
    let tunnel = request.uri().path() == TUNNEL_OPEN;
    let request = request.map(|body| {
        if tunnel {
            body
        } else if method.client_streaming {
            Body::new(DeadlineBody::idle(body, gate.body_timeout, message_timeout))
        } else {
            Body::new(DeadlineBody::total(body, gate.body_timeout, message_timeout))
        }
    });
    if method.server_streaming {
        let mut request = request;
        if let Some(d) = client_deadline {
            request
                .extensions_mut()
                .insert(ClientDeadline(tokio::time::Instant::now() + d));
        }
        return next.run(request).await;
    }
    let limit = client_deadline.map_or(gate.request_timeout, |d| d.min(gate.request_timeout));
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => answer(Status::deadline_exceeded(format!(
            "no answer within {} ms",
            limit.as_millis()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeouts() {
        assert_eq!(parse_grpc_timeout("5S"), Some(Duration::from_secs(5)));
        assert_eq!(parse_grpc_timeout("100m"), Some(Duration::from_millis(100)));
        assert_eq!(parse_grpc_timeout("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_grpc_timeout("99999999n"), Some(Duration::from_nanos(99_999_999)));
        for bad in ["", "S", "5", "5s", "123456789S", "-1S", "1.5S", "5 S", "５S", "S５"] {
            assert_eq!(parse_grpc_timeout(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn methods_come_from_the_descriptors() {
        let m = Methods::from_descriptor_sets(
            &[
                krayne_proto::FILE_DESCRIPTOR_SET,
                tonic_health::pb::FILE_DESCRIPTOR_SET,
                tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET,
            ],
            &["krayne.v1"],
            &["/krayne.v1.VersionService/GetVersion"],
        )
        .unwrap();
        let get = m.get("/krayne.v1.ClusterService/GetCluster").unwrap();
        assert!(get.needs_token && !get.server_streaming && !get.client_streaming);
        assert!(m.get("/krayne.v1.ClusterService/WaitCluster").unwrap().server_streaming);
        assert!(!m.get("/grpc.health.v1.Health/Check").unwrap().needs_token);
        let reflection = m
            .get("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo")
            .unwrap();
        assert!(reflection.client_streaming && !reflection.needs_token);
        assert!(m.get("/krayne.v1.ClusterService/Nope").is_none());
        assert!(!m.get("/krayne.v1.VersionService/GetVersion").unwrap().needs_token);
    }
}
