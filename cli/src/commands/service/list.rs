//! `krayne services NAME`.

use comfy_table::Cell;
use krayne_client::json::to_json;

use crate::{context::Context, failure::Failure};

/// List a cluster's services and whether each answers.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Cluster name.
    name: String,
    /// Namespace [default: KRAYNE_NAMESPACE, the config file's, or the one you may use].
    #[arg(short, long)]
    namespace: Option<String>,
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    let client = ctx.client()?;
    let namespace = ctx.namespace(args.namespace.as_deref()).await?;
    let services = client.list_services(&namespace, &args.name).await?;
    if ctx.printer.structured() {
        let list = services.iter().map(to_json).collect::<Result<Vec<_>, _>>()?;
        return ctx.printer.data(&serde_json::Value::Array(list));
    }
    let server = ctx.server()?;
    let rows = services
        .iter()
        .map(|s| {
            let state = super::state_name(s);
            let reach = super::access(&server, &namespace, &args.name, &s.name, Some(&s.proxy_url));
            vec![
                Cell::new(&s.name),
                Cell::new(s.port),
                Cell::new(&s.protocol),
                ctx.printer.status(state),
                Cell::new(reach),
            ]
        })
        .collect();
    ctx.printer
        .table(&["SERVICE", "PORT", "PROTOCOL", "STATE", "REACH IT WITH"], rows)
}
