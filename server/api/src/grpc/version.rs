//! `krayne.v1.VersionService`.

use krayne_proto::v1::{self as pb, version_service_server};
use tonic::{Request, Response, Status};

use super::handler::Grpc;

#[tonic::async_trait]
impl version_service_server::VersionService for Grpc {
    async fn get_version(&self, _: Request<pb::GetVersionRequest>) -> Result<Response<pb::GetVersionResponse>, Status> {
        let v = self.plane.version();
        Ok(Response::new(pb::GetVersionResponse {
            server_version: v.server_version,
            commit: v.commit,
            api_version: v.api_version,
            features: v.features,
        }))
    }
}
