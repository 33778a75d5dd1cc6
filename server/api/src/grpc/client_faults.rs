//! Statuses for requests refused before a handler runs. tonic answers a
//! message that does not decode with INTERNAL and one over the size limit
//! with OUT_OF_RANGE; both are the client's doing, and the gRPC status
//! table gives RESOURCE_EXHAUSTED for "message larger than configured
//! limit". Broken framing is the client's doing as well: a compressed
//! flag without `grpc-encoding`, a flag other than 0 or 1, a cut-off
//! prefix or message, or no message at all. (The gRPC compression spec
//! asks for INTERNAL on the first; our contract, docs/api.md, promises
//! INVALID_ARGUMENT for any request that does not decode, and clients
//! retry INTERNAL.) Clients must not take a malformed request for a
//! server fault (and retry it), so these answers are re-coded here.

use axum::{extract::Request, middleware::Next, response::Response};
use tonic::{Code, Status};

/// tonic's words for a request whose frames are broken.
fn is_framing_fault(message: &str) -> bool {
    [
        "protocol error: received message with",
        "Unexpected EOF decoding stream",
        "Missing request message",
        "Error decompressing",
    ]
    .iter()
    .any(|m| message.starts_with(m))
}

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
        Code::Internal if is_framing_fault(message) => {
            Status::invalid_argument(format!("the request is not a valid gRPC message frame: {message}"))
        }
        Code::OutOfRange if message.contains("decoded message length too large") => Status::resource_exhausted(message),
        _ => return response,
    };
    if recoded.add_header(response.headers_mut()).is_err() {
        tracing::debug!("cannot re-code a gRPC status");
    }
    response
}
