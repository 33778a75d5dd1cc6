//! Where the bearer token of each call comes from: a fixed token, a file
//! (a projected ServiceAccount token the kubelet rotates), a command that
//! prints one (kubectl's exec-credential pattern), or a person's sign-in
//! through the company's OpenID provider, refreshed before it expires.

mod bearer;
mod exec;
mod file;
mod oidc;
mod session;
mod store;

pub(crate) use bearer::Bearer;
pub use bearer::TokenProvider;
pub use exec::ExecToken;
pub use file::TokenFile;
pub use oidc::{Advertised, DeviceCode, Provider, SignInError, advertised};
pub use session::SignedIn;
pub use store::{Credential, CredentialStore, write_private};

/// Seconds since the Unix epoch, now.
fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}
