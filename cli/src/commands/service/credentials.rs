//! `krayne ray-credentials NAME`: what Ray's own clients need to reach a
//! cluster through a raw tunnel.

use serde_json::json;

use crate::{context::Context, failure::Failure, output::note};

/// Print a cluster's Ray credentials for Ray's own clients.
///
/// Clusters the server creates require Ray's token authentication;
/// krayne's proxy, jobs and logs send the token themselves. Ray's own
/// clients through `krayne tunnel` (`ray job submit --address
/// http://127.0.0.1:PORT`, `ray.init("ray://127.0.0.1:PORT")`) need it in
/// their environment: `eval "$(krayne ray-credentials NAME)"` sets
/// `RAY_AUTH_MODE` and `RAY_AUTH_TOKEN`. Needs the editor role; the
/// server audits every ask. The token is a credential: do not share it.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Cluster name.
    name: String,
    /// Namespace [default: KRAYNE_NAMESPACE, the config file's, or the one you may use].
    #[arg(short, long)]
    namespace: Option<String>,
}

/// The shell lines that give Ray's clients `token`.
pub(crate) fn exports(token: &str) -> [String; 2] {
    [
        "export RAY_AUTH_MODE=token".to_owned(),
        format!("export RAY_AUTH_TOKEN={token}"),
    ]
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    let client = ctx.client()?;
    let namespace = ctx.namespace(args.namespace.as_deref()).await?;
    let credentials = client.ray_credentials(&namespace, &args.name).await?;
    if ctx.printer.structured() {
        let token = (credentials.mode == "token").then_some(credentials.token.as_str());
        return ctx.printer.data(&json!({"mode": credentials.mode, "token": token}));
    }
    if credentials.mode != "token" {
        note(&format!("Cluster {} requires no Ray token.", args.name));
        return Ok(());
    }
    crate::output::out(&format!("{}\n", exports(&credentials.token).join("\n")))
}
