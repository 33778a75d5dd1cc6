//! A cluster's services, and WebSocket tunnels to them.

use axum::{
    Json,
    extract::{
        Path, State,
        ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, rejection::WebSocketUpgradeRejection},
    },
    http::StatusCode,
    response::{IntoResponse, Response},
};
use bytes::Bytes;
use futures::{SinkExt as _, StreamExt as _, future};
use serde::Serialize;
use utoipa::ToSchema;

use super::{
    AppState,
    extract::{Caller, ClusterPath, ServiceSegment},
    problem::{ApiError, Problem},
    responses::{Editor, EditorOfCluster, KubernetesReads, Refusals, ViewerOfCluster},
};
use crate::{
    control::{Ended, Tunnel, TunnelVia},
    domain::HeadService,
};

/// A cluster's services.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ServiceList {
    /// In Krayne's order: dashboard, client, notebook, code-server, ssh.
    pub services: Vec<HeadService>,
}

/// List a cluster's services, each probed with a short connection.
///
/// The services its head declares (Krayne's detection: the head
/// container's ports and the head service's), their port and state
/// (`pending` until the head serves, then `available` or `unreachable`),
/// and the path of the tunnel that reaches each through this server.
#[utoipa::path(get, path = "/v1/namespaces/{namespace}/clusters/{name}/services", tag = "services",
    params(("namespace" = String, Path, description = "Kubernetes namespace"), ("name" = String, Path, description = "Cluster name")),
    responses(
        Refusals, KubernetesReads, ViewerOfCluster,
        (status = 400, description = "Not a namespace or cluster name Kubernetes could hold", body = Problem, content_type = "application/problem+json"),
        (status = 200, description = "The cluster's services", body = ServiceList),
    ))]
pub(super) async fn list_services(
    State(s): State<AppState>,
    Caller(cx): Caller,
    ClusterPath(cluster): ClusterPath,
) -> Result<Json<ServiceList>, ApiError> {
    let services = s.plane.services(&cx, &cluster).await?;
    Ok(Json(ServiceList { services }))
}

/// How to authenticate to a cluster's Ray.
#[derive(Serialize, ToSchema)]
pub(super) struct RayCredentials {
    /// `token`: send `token` (`RAY_AUTH_MODE=token RAY_AUTH_TOKEN=<token>`
    /// for Ray's own clients, or `Authorization: Bearer <token>`);
    /// `disabled`: the cluster needs none.
    #[schema(example = "token")]
    pub mode: &'static str,
    /// The token (absent when `mode` is `disabled`). A credential: do not
    /// share or log it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// Get a cluster's Ray credentials, for a raw tunnel.
///
/// Clusters krayne creates require Ray's token authentication; krayne's
/// proxy, jobs, logs and lifecycle reads send the token themselves. Who
/// reaches the dashboard or the Ray client through a raw tunnel
/// (`krayne tunnel`, then `ray job submit`) needs it: this returns it.
/// Needs the editor role; audited as `cluster.credentials` before the
/// token is returned. Never cached (`Cache-Control: no-store`).
#[utoipa::path(post, path = "/v1/namespaces/{namespace}/clusters/{name}/ray-credentials", tag = "services",
    params(("namespace" = String, Path, description = "Kubernetes namespace"), ("name" = String, Path, description = "Cluster name")),
    responses(
        Refusals, KubernetesReads, EditorOfCluster,
        (status = 200, description = "The cluster's Ray credentials", body = RayCredentials),
        (status = 400, description = "Not a namespace or cluster name Kubernetes could hold", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The cluster requires a token krayne did not make", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The audit log cannot be written", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn ray_credentials(
    State(s): State<AppState>,
    Caller(cx): Caller,
    ClusterPath(cluster): ClusterPath,
) -> Result<Response, ApiError> {
    let credentials = s.plane.ray_credentials(&cx, &cluster).await?;
    let body = RayCredentials {
        mode: credentials.mode,
        token: credentials.token,
    };
    Ok(([(axum::http::header::CACHE_CONTROL, "no-store")], Json(body)).into_response())
}

/// Open a TCP tunnel to a service over a WebSocket.
///
/// Upgrades to a WebSocket whose binary frames carry the connection's bytes
/// both ways. Needs the editor role (each service lets its user run code
/// on the cluster); audited as `service.connect` before any byte flows,
/// completed with the bytes each way. The server closes with 1000 when the
/// service closes, 1001 when it shuts down, 1011 when the connection to
/// the service fails, 4403 when the caller is no longer an editor (the
/// team mapping is re-checked every 30 s) and 4408 after the idle
/// timeout; each with a reason.
#[utoipa::path(get, path = "/v1/namespaces/{namespace}/clusters/{name}/services/{service}/tunnel", tag = "services",
    params(
        ("namespace" = String, Path, description = "Kubernetes namespace"),
        ("name" = String, Path, description = "Cluster name"),
        ("service" = String, Path, description = "`dashboard`, `client`, `notebook`, `code-server` or `ssh`"),
    ),
    responses(
        Refusals, KubernetesReads, Editor,
        (status = 101, description = "The tunnel is open: binary WebSocket frames carry its bytes"),
        (status = 400, description = "Not a WebSocket request, or not a namespace or cluster name Kubernetes could hold", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such cluster, or the cluster declares no such service", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The cluster's head is not serving yet", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "The caller has too many tunnels open", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The service does not answer, or the audit log cannot be written", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn tunnel(
    State(s): State<AppState>,
    Caller(cx): Caller,
    ClusterPath(cluster): ClusterPath,
    Path(ServiceSegment { service }): Path<ServiceSegment>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let Ok(upgrade) = upgrade else {
        return Err(Problem::new(
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            "a tunnel is a WebSocket: send a WebSocket upgrade request (krayne tunnel does)",
        )
        .into());
    };
    let tunnel = s
        .plane
        .open_tunnel(&cx, &cluster, &service, TunnelVia::WebSocket)
        .await?;
    // A frame or message is held whole before it is written on: bound both.
    Ok(upgrade
        .max_frame_size(MAX_MESSAGE)
        .max_message_size(MAX_MESSAGE)
        .on_upgrade(move |socket| carry(socket, tunnel))
        .into_response())
}

/// The largest WebSocket frame or message a tunnel takes.
const MAX_MESSAGE: usize = 256 * 1024;
/// How long the close handshake may take (a client that stopped reading
/// must not hold the tunnel).
const CLOSE_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);

/// The close frame that says why a tunnel ended.
fn close_frame(ended: &Ended) -> Option<CloseFrame> {
    let code = match ended {
        Ended::ClientClosed => return None,
        Ended::ServiceClosed => 1000,
        Ended::ShuttingDown => 1001,
        Ended::ServiceError(_) => 1011,
        Ended::IdleTimeout(_) => 4408,
        Ended::Revoked { .. } => 4403,
        Ended::CredentialExpired => 4401,
    };
    let mut reason = ended.reason();
    // A close frame's reason holds at most 123 bytes.
    while reason.len() > 123 {
        reason.pop();
    }
    Some(CloseFrame {
        code,
        reason: reason.into(),
    })
}

async fn carry(socket: WebSocket, tunnel: Tunnel) {
    let (mut sink, stream) = socket.split();
    let incoming = stream
        .take_while(|m| future::ready(!matches!(m, Ok(Message::Close(_)))))
        .filter_map(|m| {
            future::ready(match m {
                Ok(Message::Binary(bytes)) => Some(Ok(bytes)),
                Ok(Message::Text(text)) => Some(Ok(Bytes::from(text.as_str().to_owned()))),
                Ok(_) => None,
                Err(e) => Some(Err(e)),
            })
        });
    let outgoing = (&mut sink).with(|bytes: Bytes| future::ready(Ok::<_, axum::Error>(Message::Binary(bytes))));
    let finished = tunnel
        .run(Box::pin(incoming), Box::pin(outgoing), false, std::future::pending())
        .await;
    // Our close frame (or the reply to the client's), then the socket's end.
    if let Some(frame) = close_frame(&finished.ended) {
        let _ = tokio::time::timeout(CLOSE_WITHIN, sink.send(Message::Close(Some(frame)))).await;
    }
    let _ = tokio::time::timeout(CLOSE_WITHIN, sink.close()).await;
}
