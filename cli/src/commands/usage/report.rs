//! `krayne usage`.

use comfy_table::Cell;
use krayne_client::{UsageQuery, json::to_json, proto};

use crate::{context::Context, failure::Failure, output::note, parse};

/// Show the hours used: every Ray pod's CPU, memory and GPUs for as long
/// as it ran, and the hours clusters existed and were suspended. The
/// window is this calendar month (UTC) unless --since or --from/--to say
/// otherwise; a row marked `*` includes a pod whose end was estimated.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  krayne usage                          this month, your namespace
  krayne usage -A --by team             every namespace you may see, per team
  krayne usage --by cluster --since 7d
  krayne usage --by creator -o csv > usage.csv
  krayne usage --chart                  GPU-hours per day, as a bar chart")]
pub(crate) struct Args {
    /// Namespace [default: KRAYNE_NAMESPACE, the config file's, or the one you may use].
    #[arg(short, long, conflicts_with = "all_namespaces")]
    namespace: Option<String>,
    /// Every namespace you may see (an admin's: all).
    #[arg(short = 'A', long)]
    all_namespaces: bool,
    /// Group rows by these (repeat, or separate with commas).
    #[arg(long, value_delimiter = ',', value_parser = ["cluster", "creator", "team", "worker_group", "day"])]
    by: Vec<String>,
    /// From a time (RFC 3339) or a duration back (7d, 12h).
    #[arg(long, value_parser = parse::since, value_name = "TIME|AGO", conflicts_with = "from")]
    since: Option<jiff::Timestamp>,
    /// From this time (RFC 3339 or a duration back).
    #[arg(long, value_parser = parse::since, value_name = "TIME|AGO")]
    from: Option<jiff::Timestamp>,
    /// Up to this time (RFC 3339 or a duration back) [default: now].
    #[arg(long, value_parser = parse::since, value_name = "TIME|AGO")]
    to: Option<jiff::Timestamp>,
    /// Draw GPU-hours per day as a bar chart instead of a table.
    #[arg(long)]
    chart: bool,
}

fn timestamp(t: Option<jiff::Timestamp>) -> Option<prost_types::Timestamp> {
    t.map(|t| prost_types::Timestamp {
        seconds: t.as_second(),
        nanos: t.subsec_nanosecond(),
    })
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    let namespace = if args.all_namespaces {
        String::new()
    } else {
        ctx.namespace(args.namespace.as_deref()).await?
    };
    let by = if args.chart { vec!["day".to_owned()] } else { args.by };
    let query = UsageQuery {
        namespace,
        from: timestamp(args.since.or(args.from)),
        to: timestamp(args.to),
        by: by.clone(),
    };
    let report = ctx.client()?.usage(&query).await?;
    let p = &ctx.printer;
    if p.structured() {
        return p.data(&to_json(&report)?);
    }
    if args.chart {
        let days: Vec<(String, f64)> = report
            .rows
            .iter()
            .map(|r| (r.day.clone(), r.figures.as_ref().map_or(0.0, |f| f.gpu_hours)))
            .collect();
        note(&format!(
            "GPU-hours per day, {} to {}",
            window_end(report.from.as_ref()),
            window_end(report.to.as_ref())
        ));
        return crate::output::out(&super::chart::gpu_hours_per_day(&days, chart_width()));
    }
    let (header, rows) = table(&report, &by, p.csv());
    p.table(&header.iter().map(String::as_str).collect::<Vec<_>>(), rows)
}

/// The terminal's width, else 80 columns.
fn chart_width() -> u16 {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(80)
        .clamp(20, 400)
}

fn window_end(t: Option<&prost_types::Timestamp>) -> String {
    t.and_then(|t| jiff::Timestamp::new(t.seconds, t.nanos).ok())
        .map_or_else(|| "-".to_owned(), |t| t.strftime("%Y-%m-%d %H:%M UTC").to_string())
}

/// The report's rows under a header of what they are grouped by and the
/// hours, then the totals (not in CSV, whose rows are data only).
fn table(report: &proto::UsageReport, by: &[String], csv: bool) -> (Vec<String>, Vec<Vec<Cell>>) {
    let mut by: Vec<&str> = by.iter().map(String::as_str).collect();
    if by.is_empty() || by.contains(&"cluster") {
        by.insert(0, "namespace");
    }
    by.dedup();
    let mut header: Vec<String> = by.iter().map(|b| b.to_uppercase().replace('_', " ")).collect();
    header.extend(
        [
            "CPU-HOURS",
            "MEMORY GIB-HOURS",
            "GPU-HOURS",
            "CLUSTER-HOURS",
            "SUSPENDED-HOURS",
            "ESTIMATED",
        ]
        .map(str::to_owned),
    );
    let hours = |f: Option<&proto::UsageFigures>| {
        let f = f.cloned().unwrap_or_default();
        [
            f.cpu_hours,
            f.memory_gib_hours,
            f.gpu_hours,
            f.cluster_hours,
            f.suspended_hours,
        ]
        .map(|h| Cell::new(figure(h, csv)))
    };
    let mut rows: Vec<Vec<Cell>> = report
        .rows
        .iter()
        .map(|r| {
            let mut row: Vec<Cell> = by
                .iter()
                .map(|b| {
                    let value = match *b {
                        "namespace" => &r.namespace,
                        "cluster" => &r.cluster,
                        "creator" => &r.creator,
                        "team" => &r.team,
                        "worker_group" => &r.worker_group,
                        _ => &r.day,
                    };
                    Cell::new(if value.is_empty() && !csv { "-" } else { value })
                })
                .collect();
            row.extend(hours(r.figures.as_ref()));
            row.push(Cell::new(if r.estimated { "*" } else { "" }));
            row
        })
        .collect();
    if !csv {
        let mut total: Vec<Cell> = by
            .iter()
            .enumerate()
            .map(|(i, _)| Cell::new(if i == 0 { "TOTAL" } else { "" }))
            .collect();
        total.extend(hours(report.totals.as_ref()));
        total.push(Cell::new(""));
        rows.push(total);
    }
    (header, rows)
}

/// Hours as a table shows them (two decimals; a trace as `<0.01`), or
/// whole for CSV, which spreadsheets sum.
fn figure(hours: f64, csv: bool) -> String {
    match hours {
        _ if csv => format!("{hours}"),
        h if h > 0.0 && h < 0.005 => "<0.01".to_owned(),
        h => format!("{h:.2}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> proto::UsageReport {
        let figures = |gpu: f64| proto::UsageFigures {
            cpu_hours: gpu * 8.0,
            memory_gib_hours: gpu * 32.0,
            gpu_hours: gpu,
            cluster_hours: 1.5,
            suspended_hours: 0.0,
        };
        proto::UsageReport {
            totals: Some(figures(3.0)),
            rows: vec![
                proto::UsageRow {
                    namespace: "ml-team".into(),
                    cluster: "train".into(),
                    figures: Some(figures(2.0)),
                    ..Default::default()
                },
                proto::UsageRow {
                    namespace: "ml-team".into(),
                    cluster: "eval".into(),
                    figures: Some(figures(1.0)),
                    estimated: true,
                    ..Default::default()
                },
            ],
            ..Default::default()
        }
    }

    #[test]
    fn a_table_names_its_groups_and_ends_with_the_totals() {
        let (header, rows) = table(&report(), &["cluster".to_owned()], false);
        assert_eq!(header[..3], ["NAMESPACE", "CLUSTER", "CPU-HOURS"]);
        assert_eq!(rows.len(), 3);
        let last: Vec<String> = rows[2].iter().map(|c| c.content()).collect();
        assert_eq!(last[0], "TOTAL");
        assert_eq!(last[4], "3.00");
        let (_, csv_rows) = table(&report(), &["cluster".to_owned()], true);
        assert_eq!(csv_rows.len(), 2, "CSV has no totals row");
        assert_eq!(csv_rows[1].last().map(Cell::content).as_deref(), Some("*"));
        assert_eq!(figure(0.0008, false), "<0.01");
        assert_eq!(figure(0.0, false), "0.00");
        assert_eq!(figure(0.0008, true), "0.0008");
    }
}
