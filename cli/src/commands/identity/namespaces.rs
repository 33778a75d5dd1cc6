//! `krayne namespaces`.

use comfy_table::Cell;
use krayne_client::json::to_json;
use serde_json::Value;

use crate::{context::Context, failure::Failure, output::note};

/// List the namespaces you may use, with your role in each.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

pub(crate) async fn run(ctx: &Context, _: Args) -> Result<(), Failure> {
    let namespaces = ctx.client()?.list_namespaces().await?;
    if ctx.printer.structured() {
        let items = namespaces.iter().map(to_json).collect::<Result<Vec<_>, _>>()?;
        return ctx.printer.data(&Value::Array(items));
    }
    if namespaces.is_empty() {
        note("You may not use any namespace; ask a platform admin to add your team to one.");
        return Ok(());
    }
    let usage = namespaces.iter().map(|n| {
        let limited: Vec<String> = n
            .quota
            .iter()
            .filter_map(|line| Some(format!("{} {}/{}", line.resource, line.used, line.limit.as_ref()?)))
            .collect();
        if limited.is_empty() {
            "-".to_owned()
        } else {
            limited.join(", ")
        }
    });
    let rows = namespaces
        .iter()
        .zip(usage)
        .map(|(n, usage)| {
            vec![
                Cell::new(&n.namespace),
                Cell::new(super::role(n.role)),
                Cell::new(n.via_teams.join(",")),
                Cell::new(usage),
            ]
        })
        .collect();
    ctx.printer
        .table(&["NAMESPACE", "ROLE", "VIA TEAMS", "QUOTA USED"], rows)
}
