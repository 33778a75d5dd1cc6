//! The gRPC transport: `krayne.v1` services, `grpc.health.v1` and server
//! reflection, served by the same listener as REST.

mod client_faults;
mod convert;
mod services;
mod status;

use krayne_proto::v1::{
    audit_service_server::AuditServiceServer, cluster_service_server::ClusterServiceServer,
    identity_service_server::IdentityServiceServer,
};
use tonic::service::Routes;
use tonic_health::server::HealthReporter;

use crate::{auth::Authenticator, service::ClusterService};

/// The gRPC routes, and the health reporter that tracks serving state.
/// Request messages over `max_message` bytes are refused
/// (RESOURCE_EXHAUSTED, see `client_faults`), as REST refuses bodies over
/// the same limit.
pub async fn router(
    service: ClusterService,
    auth: Authenticator,
    max_message: usize,
) -> Result<(axum::Router, HealthReporter), String> {
    let grpc = services::Grpc { service, auth };
    let (reporter, health) = tonic_health::server::health_reporter();
    let health = health.max_decoding_message_size(max_message);
    reporter.set_serving::<ClusterServiceServer<services::Grpc>>().await;
    reporter.set_serving::<IdentityServiceServer<services::Grpc>>().await;
    reporter.set_serving::<AuditServiceServer<services::Grpc>>().await;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(krayne_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()
        .map_err(|e| format!("gRPC reflection: {e}"))?
        .max_decoding_message_size(max_message);
    let routes = Routes::new(health)
        .add_service(reflection)
        .add_service(ClusterServiceServer::new(grpc.clone()).max_decoding_message_size(max_message))
        .add_service(IdentityServiceServer::new(grpc.clone()).max_decoding_message_size(max_message))
        .add_service(AuditServiceServer::new(grpc).max_decoding_message_size(max_message));
    let router = routes
        .into_axum_router()
        .layer(axum::middleware::from_fn(client_faults::recode));
    Ok((router, reporter))
}
