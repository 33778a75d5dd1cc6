//! Statuses for requests refused before a handler runs. tonic answers a
//! message that does not decode with INTERNAL and one over the size limit
//! with OUT_OF_RANGE; both are the client's doing, and the gRPC status
//! table gives RESOURCE_EXHAUSTED for "message larger than configured
//! limit". Clients must not take a malformed request for a server fault
//! (and retry it), so these answers are re-coded here.

use axum::{extract::Request, middleware::Next, response::Response};
use tonic::{Code, Status};

/// Middleware on the gRPC routes: re-codes tonic's decode refusals.
pub(crate) async fn recode(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let Some(status) = Status::from_header_map(response.headers()) else {
        return response;
    };
    let message = status.message();
    let recoded = match status.code() {
        Code::Internal if message.starts_with("failed to decode Protobuf message") => Status::invalid_argument(
            format!("the request is not a valid protobuf message of this method's type: {message}"),
        ),
        Code::OutOfRange if message.contains("decoded message length too large") => Status::resource_exhausted(message),
        _ => return response,
    };
    if recoded.add_header(response.headers_mut()).is_err() {
        tracing::debug!("cannot re-code a gRPC status");
    }
    response
}
