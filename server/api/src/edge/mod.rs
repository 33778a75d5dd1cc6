//! What every request on the API listener passes before a transport reads
//! it, the same for REST and gRPC: the server's own request id, the
//! client's address (through trusted proxies only), limits on the declared
//! body size and on how long the body may take, and authentication from
//! headers alone — so no body is read for a caller without a valid token.

mod caller;
mod ids;
mod limits;
mod peer;

pub use caller::{Authorization, authenticate, authorization, request_meta};
pub use ids::{CORRELATION_ID, REQUEST_ID, RequestIds, assign_request_ids};
pub use limits::{BodyTimeout, DeadlineBody, DeclaredRefusal, check_declared, is_body_timeout};
pub use peer::{ForwardedHeader, Source, TrustedProxies, ViaHttps, resolve_source};
