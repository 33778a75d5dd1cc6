//! `krayne.v1.TunnelService`: a cluster's services, and TCP tunnels to
//! them as bidirectional streams.

use std::{pin::Pin, time::Duration};

use bytes::Bytes;
use futures::{SinkExt as _, Stream, StreamExt as _, future};
use krayne_proto::v1::{self as pb, tunnel_request, tunnel_response, tunnel_service_server};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::PollSender;
use tonic::{Request, Response, Status, Streaming};

use super::{gate::Authority, handler::Grpc, status::to_status};
use crate::{
    control::{Ended, TunnelVia},
    domain::{ClusterRef, Error, HeadService, ServiceState},
};

/// Messages to the client a tunnel may hold before it waits for the
/// client to read (backpressure).
const QUEUED: usize = 8;

fn service_message(s: HeadService) -> pb::HeadService {
    let state = match s.state {
        ServiceState::Pending => pb::ServiceState::Pending,
        ServiceState::Available => pb::ServiceState::Available,
        ServiceState::Unreachable => pb::ServiceState::Unreachable,
    };
    pb::HeadService {
        name: s.name,
        port: u32::from(s.port),
        protocol: s.protocol,
        state: state.into(),
        tunnel_path: s.tunnel_path,
        in_cluster_url: s.in_cluster_url.unwrap_or_default(),
        proxy_url: s.proxy_url.unwrap_or_default(),
        base_path: s.base_path,
    }
}

/// How a tunnel's end reaches its client: OK, or a status saying why.
fn closing_status(ended: &Ended) -> Option<Status> {
    match ended {
        Ended::ServiceClosed | Ended::ClientClosed => None,
        Ended::IdleTimeout(_) => Some(Status::deadline_exceeded(ended.reason())),
        Ended::ShuttingDown | Ended::ServiceError(_) => Some(Status::unavailable(ended.reason())),
        Ended::Revoked { .. } => Some(Status::permission_denied(ended.reason())),
        Ended::CredentialExpired => Some(Status::unauthenticated(ended.reason())),
    }
}

type TunnelStream = Pin<Box<dyn Stream<Item = Result<pb::TunnelResponse, Status>> + Send>>;

#[tonic::async_trait]
impl tunnel_service_server::TunnelService for Grpc {
    async fn list_services(
        &self,
        req: Request<pb::ListServicesRequest>,
    ) -> Result<Response<pb::ListServicesResponse>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let services = self
            .plane
            .services(&cx, &ClusterRef::new(&r.namespace, &r.name))
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::ListServicesResponse {
            services: services.into_iter().map(service_message).collect(),
        }))
    }

    async fn create_browser_session(
        &self,
        req: Request<pb::CreateBrowserSessionRequest>,
    ) -> Result<Response<pb::BrowserSession>, Status> {
        let cx = self.context(&req)?;
        let authority = req.extensions().get::<Authority>().map(|a| a.0.clone());
        let https = req.extensions().get::<crate::edge::ViaHttps>().is_some();
        let r = req.into_inner();
        let link = self
            .plane
            .sign_in_link(&cx, &ClusterRef::new(&r.namespace, &r.name), &r.service)
            .await
            .map_err(to_status)?;
        let (sign_in_url, service_url) =
            crate::rest::paths::link_urls(&link, self.plane.public_url(), authority.as_deref(), https)
                .map_err(to_status)?;
        Ok(Response::new(pb::BrowserSession {
            sign_in_url,
            expires_at: Some(prost_types::Timestamp {
                seconds: link.expires_at.as_second(),
                nanos: link.expires_at.subsec_nanosecond(),
            }),
            service_url,
            session_seconds: link.session_seconds,
        }))
    }

    async fn get_ray_credentials(
        &self,
        req: Request<pb::GetRayCredentialsRequest>,
    ) -> Result<Response<pb::RayCredentials>, Status> {
        let cx = self.context(&req)?;
        let r = req.into_inner();
        let credentials = self
            .plane
            .ray_credentials(&cx, &ClusterRef::new(&r.namespace, &r.name))
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::RayCredentials {
            mode: credentials.mode.to_owned(),
            token: credentials.token.unwrap_or_default(),
        }))
    }

    type OpenStream = TunnelStream;

    async fn open(&self, req: Request<Streaming<pb::TunnelRequest>>) -> Result<Response<Self::OpenStream>, Status> {
        let cx = self.context(&req)?;
        let mut inbound = req.into_inner();
        let first = tokio::time::timeout(self.body_timeout, inbound.message()).await;
        let target = match first {
            Ok(Ok(Some(pb::TunnelRequest {
                kind: Some(tunnel_request::Kind::Open(target)),
            }))) => target,
            Ok(Ok(_)) => {
                return Err(to_status(Error::invalid(
                    "open",
                    "the first message must name the service (open)",
                )));
            }
            Ok(Err(status)) => return Err(status),
            Err(_) => {
                return Err(Status::deadline_exceeded(format!(
                    "no opening message within {} s",
                    self.body_timeout.as_secs()
                )));
            }
        };
        let tunnel = self
            .plane
            .open_tunnel(
                &cx,
                &ClusterRef::new(&target.namespace, &target.cluster),
                &target.service,
                TunnelVia::Grpc,
            )
            .await
            .map_err(to_status)?;
        let (tx, rx) = mpsc::channel(QUEUED);
        let opened = pb::TunnelResponse {
            kind: Some(tunnel_response::Kind::Opened(pb::TunnelOpened {
                service: tunnel.service.clone(),
                port: u32::from(tunnel.port),
            })),
        };
        let _ = tx.send(Ok(opened)).await;
        tokio::spawn(async move {
            // Later `open` messages are ignored; a broken stream ends the tunnel.
            let incoming = inbound.filter_map(|m| {
                future::ready(match m {
                    Ok(pb::TunnelRequest {
                        kind: Some(tunnel_request::Kind::Data(data)),
                    }) => Some(Ok(data)),
                    Ok(_) => None,
                    Err(status) => Some(Err(status.message().to_owned())),
                })
            });
            let outgoing = PollSender::new(tx.clone()).with(|data: Bytes| {
                future::ready(Ok::<_, tokio_util::sync::PollSendError<_>>(Ok(pb::TunnelResponse {
                    kind: Some(tunnel_response::Kind::Data(data)),
                })))
            });
            let gone = {
                let tx = tx.clone();
                async move { tx.closed().await }
            };
            let finished = tunnel.run(Box::pin(incoming), Box::pin(outgoing), true, gone).await;
            if let Some(status) = closing_status(&finished.ended) {
                let _ = tokio::time::timeout(Duration::from_secs(1), tx.send(Err(status))).await;
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}
