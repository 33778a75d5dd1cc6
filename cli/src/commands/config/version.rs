//! `krayne version`.

use krayne_client::json::to_json;
use serde_json::json;

use crate::{
    context::Context,
    failure::Failure,
    output::{Format, Printer, note, out},
};

const CLIENT: &str = env!("CARGO_PKG_VERSION");

/// Print the client's version and, when a server is configured, the
/// server's (its commit, API version and features), warning on stderr when
/// their major versions differ.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  krayne version
  krayne version --client
  krayne version -o json")]
pub(crate) struct Args {
    /// Only the client's version: read no config, ask no server.
    #[arg(long)]
    pub(crate) client: bool,
}

/// The client's version alone.
pub(crate) fn client_only(format: Format) -> Result<(), Failure> {
    let printer = Printer::new(format);
    if printer.structured() {
        return printer.data(&json!({ "client": CLIENT }));
    }
    out(&format!("krayne {}\n", crate::cli::VERSION))
}

pub(crate) async fn run(ctx: &Context, _: Args) -> Result<(), Failure> {
    // No server configured: nothing to compare with.
    if ctx.server().is_err() {
        return client_only(ctx.printer.format);
    }
    let server = ctx.client()?.server_version().await?;
    if let Some(why) = skew(CLIENT, &server.server_version) {
        note(&format!("Warning: {why}"));
    }
    if ctx.printer.structured() {
        return ctx
            .printer
            .data(&json!({ "client": CLIENT, "server": to_json(&server)? }));
    }
    let features = if server.features.is_empty() {
        String::new()
    } else {
        format!("; features: {}", server.features.join(", "))
    };
    out(&format!(
        "Client: krayne {CLIENT}\nServer: krayne-server {} (API {}, commit {}{features})\n",
        server.server_version, server.api_version, server.commit
    ))
}

/// The major part of a semver version: `1` of `1.4.2`, and for `0.x`
/// releases (where minor versions break) `0.3` of `0.3.1`.
fn major(version: &str) -> Option<String> {
    let mut parts = version.trim_start_matches('v').split('.');
    let first = parts.next().filter(|p| !p.is_empty())?;
    match first {
        "0" => Some(format!("0.{}", parts.next()?)),
        other => Some(other.to_owned()),
    }
}

/// Why the two versions should not be used together, if they should not.
fn skew(client: &str, server: &str) -> Option<String> {
    let (c, s) = (major(client)?, major(server)?);
    (c != s).then(|| {
        format!("krayne {client} and krayne-server {server} differ in their major version; use a client of {s}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn major_versions_and_skew() {
        assert_eq!(major("1.4.2").as_deref(), Some("1"));
        assert_eq!(major("0.3.1").as_deref(), Some("0.3"));
        assert_eq!(major("v2.0.0").as_deref(), Some("2"));
        assert_eq!(major(""), None);
        assert_eq!(skew("1.2.0", "1.9.3"), None);
        assert_eq!(skew("0.1.0", "0.1.7"), None);
        assert!(skew("0.1.0", "0.2.0").is_some());
        assert!(skew("1.0.0", "2.0.0").unwrap().contains("use a client of 2"));
        assert!(skew("1.0.0", "").is_none(), "an unreadable version is not a skew");
    }
}
