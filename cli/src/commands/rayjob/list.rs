//! `krayne rayjobs`.

use futures::StreamExt as _;
use krayne_client::{json::to_json, proto::RayJob};

use crate::{
    context::Context,
    failure::Failure,
    output::{note, out},
};

/// List a namespace's RayJobs.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Namespace [default: KRAYNE_NAMESPACE, the config file's, or the one you may use].
    #[arg(short, long)]
    pub(crate) namespace: Option<String>,
    /// After the list, print each change as it happens (a row led by its
    /// event; with -o json, one event a line) until Ctrl-C.
    #[arg(short, long)]
    pub(crate) watch: bool,
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    let namespace = ctx.namespace(args.namespace.as_deref()).await?;
    if args.watch {
        return watch(ctx, &namespace).await;
    }
    let rayjobs = ctx.client()?.rayjobs(&namespace).await?;
    if rayjobs.is_empty() && !ctx.printer.structured() {
        note(&format!("No rayjobs in namespace {namespace}."));
        return Ok(());
    }
    super::print_rayjobs(ctx, &rayjobs)
}

/// The RayJobs now, then each change, kubectl style.
async fn watch(ctx: &Context, namespace: &str) -> Result<(), Failure> {
    let from = krayne_client::WatchFrom {
        send_initial_events: true,
        ..Default::default()
    };
    let client = ctx.client()?;
    let mut events = std::pin::pin!(client.watch_rayjobs(Some(namespace), from).await?);
    let mut initial = Vec::new();
    let mut listed = false;
    let mut widths = Vec::new();
    while let Some(event) = events.next().await {
        let event = event?;
        let kind = krayne_client::watch_event_type_name(event.r#type);
        if ctx.printer.structured() {
            if kind != "BOOKMARK" {
                let rayjob = event.rayjob.as_ref().map(to_json).transpose()?;
                let line = serde_json::json!({
                    "type": kind,
                    "resource_version": event.resource_version,
                    "rayjob": rayjob,
                });
                out(&(line.to_string() + "\n"))?;
            }
            continue;
        }
        match (kind, event.rayjob) {
            ("BOOKMARK", _) if !listed => {
                listed = true;
                if initial.is_empty() {
                    note(&format!(
                        "No rayjobs in namespace {namespace} yet; watching for changes."
                    ));
                } else {
                    print_changes(ctx, &initial, &mut widths)?;
                }
                initial.clear();
            }
            (_, Some(rayjob)) if !listed => initial.push((kind, rayjob)),
            (_, Some(rayjob)) => print_changes(ctx, &[(kind, rayjob)], &mut widths)?,
            (_, None) => {}
        }
    }
    Ok(())
}

/// Changes, each row led by its event, in the columns of the rows before;
/// the header with the first rows.
fn print_changes(ctx: &Context, changes: &[(&str, RayJob)], widths: &mut Vec<u16>) -> Result<(), Failure> {
    let header = widths
        .is_empty()
        .then_some([["EVENT"].as_slice(), super::COLUMNS.as_slice()].concat());
    let rows = changes
        .iter()
        .map(|(kind, j)| {
            let mut row = vec![comfy_table::Cell::new(kind)];
            row.extend(super::row(j));
            row
        })
        .collect();
    if widths.is_empty() {
        // Room from the start for the longest event and state.
        *widths = vec![8, 0, 10];
    }
    ctx.printer.rows_in(header.as_deref(), rows, widths)
}
