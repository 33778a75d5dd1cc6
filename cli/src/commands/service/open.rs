//! `krayne open NAME [SERVICE]`: a service in the browser, signed in.

use krayne_client::json::to_json;

use crate::{
    context::Context,
    failure::Failure,
    output::{note, out},
};

/// Open a cluster's HTTP service in the browser through the server: asks
/// for a sign-in link (valid about a minute, usable once) and opens it;
/// the browser then holds a session for that service only. Without a
/// display (or with --print) the link is printed instead: open it within
/// the minute, and do not share it.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Cluster name.
    name: String,
    /// `dashboard`, `notebook` or `code-server`.
    #[arg(default_value = "dashboard")]
    service: String,
    /// Namespace [default: KRAYNE_NAMESPACE, the config file's, or the one you may use].
    #[arg(short, long)]
    namespace: Option<String>,
    /// Print the sign-in link instead of opening a browser.
    #[arg(long)]
    print: bool,
}

/// Whether a browser could show up here: a desktop session on Linux and
/// the BSDs; always elsewhere (macOS, Windows).
pub(crate) fn has_display() -> bool {
    if cfg!(any(target_os = "macos", target_os = "windows")) {
        return true;
    }
    ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|d| !d.is_empty()))
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    let client = ctx.client()?;
    let namespace = ctx.namespace(args.namespace.as_deref()).await?;
    let session = client
        .create_browser_session(&namespace, &args.name, &args.service)
        .await?;
    if ctx.printer.structured() {
        return ctx.printer.data(&to_json(&session)?);
    }
    if !args.print && has_display() {
        match open::that_detached(&session.sign_in_url) {
            Ok(()) => {
                note(&format!(
                    "Opened {} of {}/{} in your browser: {}",
                    args.service, namespace, args.name, session.service_url
                ));
                return Ok(());
            }
            Err(e) => note(&format!("cannot open a browser ({e}); open this link instead:")),
        }
    } else {
        note(&format!(
            "Open this link in your browser within a minute (it works once; do not share it). \
             It signs you in to {} of {}/{} for {} min:",
            args.service,
            namespace,
            args.name,
            session.session_seconds / 60
        ));
    }
    out(&format!("{}\n", session.sign_in_url))
}
