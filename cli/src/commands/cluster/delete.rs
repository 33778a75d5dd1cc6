//! `krayne delete NAME`.

use std::io::IsTerminal as _;

use serde_json::json;

use crate::{context::Context, failure::Failure, output::note};

/// Delete a cluster; Kubernetes removes its pods and services.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Cluster name.
    name: String,
    /// Namespace [default: KRAYNE_NAMESPACE, the config file's, or the one you may use].
    #[arg(short, long)]
    namespace: Option<String>,
    /// Do not ask for confirmation (needed when stdin is not a terminal).
    #[arg(short, long)]
    yes: bool,
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    let namespace = ctx.namespace(args.namespace.as_deref()).await?;
    let target = format!("{namespace}/{}", args.name);
    if !args.yes {
        if !std::io::stdin().is_terminal() {
            return Err(Failure::Usage(format!(
                "refusing to delete {target} without confirmation: stdin is not a terminal; pass --yes"
            )));
        }
        let confirmed = dialoguer::Confirm::new()
            .with_prompt(format!("Delete cluster {target}?"))
            .default(false)
            .interact_opt()
            .map_err(|e| Failure::Other(format!("cannot ask for confirmation: {e}")))?;
        if confirmed != Some(true) {
            return Err(Failure::Declined(format!("not deleted: {target}")));
        }
    }
    let client = ctx.client()?;
    client.delete(&namespace, &args.name).await?;
    note(&format!("cluster {target} deleted"));
    if ctx.printer.structured() {
        return ctx
            .printer
            .data(&json!({"namespace": namespace, "name": args.name, "deleted": true}));
    }
    Ok(())
}
