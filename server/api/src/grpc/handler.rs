//! The value every `krayne.v1` service is implemented on: the control
//! plane, and what the gRPC transport adds to it.

use std::time::Duration;

use tonic::{Request, Status};

use super::status::to_status;
use crate::{
    control::{Context, ControlPlane},
    domain::{Error, PageRequest},
};

/// The gRPC services over the use cases.
#[derive(Clone)]
pub(crate) struct Grpc {
    pub(crate) plane: ControlPlane,
    /// How long a tunnel's opening message may take.
    pub(crate) body_timeout: Duration,
}

impl Grpc {
    /// The caller, authenticated by the gate from metadata before the
    /// message was read.
    pub(super) fn context<T>(&self, req: &Request<T>) -> Result<Context, Status> {
        req.extensions()
            .get::<Context>()
            .cloned()
            .ok_or_else(|| to_status(Error::Internal("a krayne.v1 call passed no gate".into())))
    }
}

/// A page request from a message's size and token.
pub(super) fn page(size: u32, token: &str) -> Result<PageRequest, Status> {
    PageRequest::new(size, token).map_err(to_status)
}
