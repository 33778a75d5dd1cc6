//! `krayne audit`.

use comfy_table::Cell;
use futures::{StreamExt as _, TryStreamExt as _};
use krayne_client::{AuditQuery, json::to_json};
use serde_json::Value;

use crate::{
    context::Context,
    failure::Failure,
    output::{note, or_dash, time},
    parse,
};

/// Query the audit log, newest first. You see the namespaces you have a
/// role in; platform admins see everything.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  krayne audit -n ml-team --since 1h
  krayne audit --actor alice@example.com --action cluster.delete -o json")]
pub(crate) struct Args {
    /// Only this namespace.
    #[arg(short, long)]
    namespace: Option<String>,
    /// Only this actor (token subject).
    #[arg(long)]
    actor: Option<String>,
    /// Only this action, e.g. cluster.create.
    #[arg(long)]
    action: Option<String>,
    /// Only this outcome.
    #[arg(long, value_parser = ["pending", "succeeded", "failed", "denied", "invalid", "unknown"])]
    outcome: Option<String>,
    /// Only this cluster.
    #[arg(long)]
    cluster: Option<String>,
    /// Only requests whose client sent this id (x-correlation-id or
    /// x-request-id); the server's own request id is another column.
    #[arg(long, value_name = "ID")]
    correlation_id: Option<String>,
    /// Since a time (RFC 3339) or for a duration back (1h, 7d).
    #[arg(long, value_parser = parse::since, value_name = "TIME|AGO")]
    since: Option<jiff::Timestamp>,
    /// Before a time (RFC 3339) or a duration ago.
    #[arg(long, value_parser = parse::since, value_name = "TIME|AGO")]
    until: Option<jiff::Timestamp>,
    /// Show at most this many events.
    #[arg(long, default_value_t = 50, value_name = "N")]
    limit: usize,
}

fn timestamp(t: Option<jiff::Timestamp>) -> Option<prost_types::Timestamp> {
    t.map(|t| prost_types::Timestamp {
        seconds: t.as_second(),
        nanos: t.subsec_nanosecond(),
    })
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    let client = ctx.client()?;
    let query = AuditQuery {
        namespace: args.namespace.unwrap_or_default(),
        actor: args.actor.unwrap_or_default(),
        action: args.action.unwrap_or_default(),
        outcome: args.outcome.unwrap_or_default(),
        cluster: args.cluster.unwrap_or_default(),
        correlation_id: args.correlation_id.unwrap_or_default(),
        since: timestamp(args.since),
        until: timestamp(args.until),
        page_size: u32::try_from(args.limit.clamp(1, 500)).unwrap_or(500),
    };
    let events: Vec<_> = client.audit_events(query).take(args.limit).try_collect().await?;
    let p = &ctx.printer;
    if p.structured() {
        let items = events.iter().map(to_json).collect::<Result<Vec<_>, _>>()?;
        return p.data(&Value::Array(items));
    }
    if events.is_empty() {
        note("No audit events match.");
        return Ok(());
    }
    let mut header = vec!["TIME", "ACTOR", "ACTION", "NAMESPACE", "CLUSTER", "OUTCOME"];
    if p.wide() {
        header.extend(["STATUS", "TRANSPORT", "REQUEST-ID", "ERROR"]);
    }
    let rows = events
        .iter()
        .map(|e| {
            let mut row = vec![
                Cell::new(time(e.occurred_at.as_ref())),
                Cell::new(e.actor.as_ref().map_or("-", |a| a.subject.as_str())),
                Cell::new(&e.action),
                Cell::new(or_dash(e.namespace.as_deref())),
                Cell::new(or_dash(e.cluster.as_deref())),
                Cell::new(&e.outcome),
            ];
            if p.wide() {
                row.extend([
                    Cell::new(
                        e.http_status
                            .map_or_else(|| or_dash(e.grpc_code.as_deref()), |s| s.to_string()),
                    ),
                    Cell::new(&e.transport),
                    Cell::new(&e.request_id),
                    Cell::new(or_dash(e.error.as_deref())),
                ]);
            }
            row
        })
        .collect();
    p.table(&header, rows)
}
