//! The gRPC transport: `krayne.v1` services, `grpc.health.v1` and server
//! reflection, served by the same listener as REST.

mod audit;
mod client_faults;
mod clusters;
mod convert;
mod gate;
mod handler;
mod identity;
mod jobs;
mod rayjobs;
mod status;
mod tunnels;
mod usage;
mod version;

use std::{sync::Arc, time::Duration};

pub(crate) use gate::{Gate, gate};
use krayne_proto::v1::{
    audit_service_server::AuditServiceServer, cluster_service_server::ClusterServiceServer,
    identity_service_server::IdentityServiceServer, job_service_server::JobServiceServer,
    ray_job_service_server::RayJobServiceServer, tunnel_service_server::TunnelServiceServer,
    usage_service_server::UsageServiceServer, version_service_server::VersionServiceServer,
};
use tonic::service::Routes;
use tonic_health::server::HealthReporter;

use crate::{auth::Authenticator, control::ControlPlane};

/// Limits and switches of the gRPC transport.
#[derive(Debug, Clone)]
pub struct GrpcSettings {
    /// Largest request message, in bytes (the REST body limit).
    pub max_message: usize,
    /// Longest a unary call may take (a client's `grpc-timeout` may
    /// shorten it).
    pub request_timeout: Duration,
    /// Longest a request message may take to arrive.
    pub body_timeout: Duration,
    /// Whether server reflection needs a valid token (health never does).
    pub reflection_needs_token: bool,
}

/// The gRPC routes, the health reporter that tracks serving state, and the
/// gate every gRPC request passes first (see [`gate`]).
pub(crate) struct GrpcParts {
    pub(crate) routes: axum::Router,
    pub(crate) health: HealthReporter,
    pub(crate) gate: Gate,
}

/// Reports every service (and the server as a whole) NOT_SERVING, as the
/// server starts shutting down.
pub(crate) async fn not_serving(health: &HealthReporter) {
    health
        .set_service_status("", tonic_health::ServingStatus::NotServing)
        .await;
    health.set_not_serving::<ClusterServiceServer<handler::Grpc>>().await;
    health.set_not_serving::<IdentityServiceServer<handler::Grpc>>().await;
    health.set_not_serving::<AuditServiceServer<handler::Grpc>>().await;
    health.set_not_serving::<VersionServiceServer<handler::Grpc>>().await;
    health.set_not_serving::<TunnelServiceServer<handler::Grpc>>().await;
    health.set_not_serving::<JobServiceServer<handler::Grpc>>().await;
    health.set_not_serving::<RayJobServiceServer<handler::Grpc>>().await;
    health.set_not_serving::<UsageServiceServer<handler::Grpc>>().await;
}

/// Request messages over `max_message` bytes are refused
/// (RESOURCE_EXHAUSTED, see `client_faults`), as REST refuses bodies over
/// the same limit.
pub(crate) async fn router(
    plane: ControlPlane,
    auth: Authenticator,
    settings: &GrpcSettings,
) -> Result<GrpcParts, String> {
    let max_message = settings.max_message;
    let grpc = handler::Grpc {
        plane: plane.clone(),
        body_timeout: settings.body_timeout,
    };
    let (reporter, health) = tonic_health::server::health_reporter();
    let health = health.max_decoding_message_size(max_message);
    reporter.set_serving::<ClusterServiceServer<handler::Grpc>>().await;
    reporter.set_serving::<IdentityServiceServer<handler::Grpc>>().await;
    reporter.set_serving::<AuditServiceServer<handler::Grpc>>().await;
    reporter.set_serving::<VersionServiceServer<handler::Grpc>>().await;
    reporter.set_serving::<TunnelServiceServer<handler::Grpc>>().await;
    reporter.set_serving::<JobServiceServer<handler::Grpc>>().await;
    reporter.set_serving::<RayJobServiceServer<handler::Grpc>>().await;
    reporter.set_serving::<UsageServiceServer<handler::Grpc>>().await;
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
        .add_service(AuditServiceServer::new(grpc.clone()).max_decoding_message_size(max_message))
        .add_service(TunnelServiceServer::new(grpc.clone()).max_decoding_message_size(max_message))
        .add_service(JobServiceServer::new(grpc.clone()).max_decoding_message_size(max_message))
        .add_service(RayJobServiceServer::new(grpc.clone()).max_decoding_message_size(max_message))
        .add_service(UsageServiceServer::new(grpc.clone()).max_decoding_message_size(max_message))
        .add_service(VersionServiceServer::new(grpc).max_decoding_message_size(max_message));
    let routes = routes
        .into_axum_router()
        .layer(axum::middleware::from_fn(client_faults::recode));
    let mut protected = vec!["krayne.v1"];
    if settings.reflection_needs_token {
        protected.push("grpc.reflection.v1");
    }
    let methods = gate::Methods::from_descriptor_sets(
        &[
            krayne_proto::FILE_DESCRIPTOR_SET,
            tonic_health::pb::FILE_DESCRIPTOR_SET,
            tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET,
        ],
        &protected,
        // Clients ask the version before they log in, as `/v1/version`.
        &["/krayne.v1.VersionService/GetVersion"],
    )?;
    let gate = Gate {
        plane,
        auth,
        methods: Arc::new(methods),
        max_message,
        request_timeout: settings.request_timeout,
        body_timeout: settings.body_timeout,
    };
    Ok(GrpcParts {
        routes,
        health: reporter,
        gate,
    })
}
