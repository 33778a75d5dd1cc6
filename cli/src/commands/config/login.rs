//! `krayne login`.

use crate::{
    context::Context,
    failure::Failure,
    output::note,
    settings::{self, Settings},
};

/// Save the server URL and token (from --server and --token, or
/// KRAYNE_SERVER and KRAYNE_TOKEN) to the config file, readable only by
/// you. The token is checked with the server first.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  krayne login --server http://127.0.0.1:8080 --token \"$TOKEN\"")]
pub(crate) struct Args {
    /// Namespace to use when -n is not given.
    #[arg(short, long)]
    namespace: Option<String>,
    /// Save without checking the token with the server.
    #[arg(long)]
    no_verify: bool,
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    let server = ctx
        .global
        .server
        .clone()
        .ok_or_else(|| Failure::Usage("login needs --server URL (or KRAYNE_SERVER)".into()))?;
    let token = ctx
        .global
        .token
        .clone()
        .ok_or_else(|| Failure::Usage("login needs --token JWT (or KRAYNE_TOKEN)".into()))?;
    let subject = if args.no_verify {
        None
    } else {
        let me = ctx.client()?.whoami().await?;
        note(&format!("authenticated as {}", me.subject));
        Some(me.subject)
    };
    let saved = Settings {
        server: Some(server.clone()),
        token: Some(token),
        namespace: args.namespace.or_else(|| ctx.settings.namespace.clone()),
    };
    settings::save(&ctx.settings_path, &saved)?;
    note(&format!(
        "saved the server {server} and your token to {}",
        ctx.settings_path.display()
    ));
    if ctx.printer.structured() {
        return ctx.printer.data(&serde_json::json!({
            "server": server,
            "subject": subject,
            "namespace": saved.namespace,
            "config_file": ctx.settings_path.display().to_string(),
        }));
    }
    Ok(())
}
