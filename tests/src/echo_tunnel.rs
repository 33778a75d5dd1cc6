//! A WebSocket tunnel to a cluster's Ray client stand-in (a greeting, then
//! echo), as alice opens it: for tests about how long tunnels live.

use std::time::Duration;

use futures::{SinkExt as _, StreamExt as _};
use tokio_tungstenite::{
    MaybeTlsStream, WebSocketStream,
    tungstenite::{Message, client::IntoClientRequest as _},
};

use crate::Env;

/// An open WebSocket tunnel.
pub type Socket = WebSocketStream<MaybeTlsStream<tokio::net::TcpStream>>;

/// Opens alice's tunnel to the Ray client stand-in of `cluster` in
/// `ml-team` through `env`'s server, and reads its greeting.
///
/// # Panics
/// When the tunnel is refused or the greeting does not come.
pub async fn open(env: &Env, cluster: &str) -> Socket {
    let url = format!(
        "ws://{}/v1/namespaces/ml-team/clusters/{cluster}/services/client/tunnel",
        env.server.api
    );
    let mut request = url.into_client_request().unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {}", env.alice()).parse().unwrap());
    let (mut tunnel, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    match tokio::time::timeout(Duration::from_secs(10), tunnel.next())
        .await
        .unwrap()
    {
        Some(Ok(Message::Binary(greeting))) => {
            assert!(greeting.starts_with(b"krayne-sandbox ray client"), "{greeting:?}")
        }
        other => panic!("{other:?}"),
    }
    tunnel
}

/// Sends `ping\n` through the tunnel and returns what came back, or why
/// nothing did.
pub async fn echo(tunnel: &mut Socket) -> Result<Vec<u8>, String> {
    tunnel
        .send(Message::binary(b"ping\n".to_vec()))
        .await
        .map_err(|e| e.to_string())?;
    loop {
        match tokio::time::timeout(Duration::from_secs(10), tunnel.next()).await {
            Ok(Some(Ok(Message::Binary(bytes)))) => return Ok(bytes.to_vec()),
            Ok(Some(Ok(Message::Ping(_) | Message::Pong(_)))) => {}
            other => return Err(format!("{other:?}")),
        }
    }
}
