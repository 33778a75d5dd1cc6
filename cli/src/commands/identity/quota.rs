//! `krayne quota [-n NS]`.

use comfy_table::Cell;
use krayne_client::{json::to_json, proto::QuotaLine};

use crate::{context::Context, failure::Failure};

/// Cells of the usage bar.
const BAR: usize = 20;

/// Show a namespace's team quota: each limit, what its clusters are
/// charged (each its upper bound) and what remains; across the fleet,
/// then at each site the quota caps.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Namespace [default: KRAYNE_NAMESPACE, the config file's, or the one you may use].
    #[arg(short, long)]
    namespace: Option<String>,
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    let namespace = ctx.namespace(args.namespace.as_deref()).await?;
    let quota = ctx.client()?.quota(&namespace).await?;
    if ctx.printer.structured() {
        return ctx.printer.data(&to_json(&quota)?);
    }
    let rows = quota
        .resources
        .iter()
        .map(|line| {
            let resource = match &line.site {
                Some(site) => format!("{} in site {}", line.resource, crate::output::printable(site, false)),
                None => line.resource.clone(),
            };
            vec![
                Cell::new(resource),
                Cell::new(usage(line)),
                Cell::new(line.remaining.as_deref().unwrap_or("unlimited")),
            ]
        })
        .collect();
    ctx.printer.table(&["RESOURCE", "USED", "REMAINING"], rows)?;
    if let Some(queue) = &quota.kueue_local_queue {
        crate::output::note(&format!(
            "Not enforced by krayne: the platform's Kueue admits this namespace's clusters (LocalQueue {}); \
             its ClusterQueue's quota is what holds.",
            crate::output::printable(queue, false)
        ));
    }
    let query = krayne_client::UsageQuery {
        namespace,
        ..Default::default()
    };
    // A server that records no usage says nothing here.
    if let Ok(report) = ctx.client()?.usage(&query).await
        && let Some(totals) = report.totals
    {
        crate::output::note(&month_line(&totals));
    }
    Ok(())
}

/// This month's hours, in one line (`krayne usage` shows more).
fn month_line(t: &krayne_client::proto::UsageFigures) -> String {
    format!(
        "This month: {:.1} GPU-hours, {:.1} CPU-hours, {:.1} GiB-hours of memory (krayne usage shows more).",
        t.gpu_hours, t.cpu_hours, t.memory_gib_hours
    )
}

/// `[########............] 12/16 gpus`, or `3 (no limit)`.
pub(crate) fn usage(line: &QuotaLine) -> String {
    match (&line.limit, line.used_fraction) {
        (Some(limit), Some(fraction)) => format!("[{}] {}/{limit} {}", bar(fraction), line.used, line.resource),
        _ => format!("{} (no limit)", line.used),
    }
}

/// A text bar `fraction` full (capped at full; `!` marks over the limit).
fn bar(fraction: f64) -> String {
    let cells = (fraction.clamp(0.0, 1.0) * BAR as f64).round() as usize;
    let mut bar = "#".repeat(cells) + &".".repeat(BAR - cells);
    if fraction > 1.0 {
        bar.replace_range(BAR - 1.., "!");
    }
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_show_how_full_a_quota_is() {
        let line = QuotaLine {
            resource: "gpus".into(),
            limit: Some("16".into()),
            used: "12".into(),
            remaining: Some("4".into()),
            used_fraction: Some(0.75),
            site: None,
        };
        assert_eq!(usage(&line), "[###############.....] 12/16 gpus");
        assert_eq!(bar(1.5), format!("{}!", "#".repeat(19)));
        let free = QuotaLine {
            limit: None,
            used_fraction: None,
            ..line
        };
        assert_eq!(usage(&free), "12 (no limit)");
    }

    #[test]
    fn the_months_usage_reads_as_one_line() {
        let totals = krayne_client::proto::UsageFigures {
            gpu_hours: 12.25,
            cpu_hours: 100.0,
            memory_gib_hours: 400.04,
            ..Default::default()
        };
        assert_eq!(
            month_line(&totals),
            "This month: 12.2 GPU-hours, 100.0 CPU-hours, 400.0 GiB-hours of memory (krayne usage shows more)."
        );
    }
}
