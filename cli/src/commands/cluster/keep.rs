//! `krayne keep NAME --for 4h | --until TIME`.

use std::time::{Duration, SystemTime};

use krayne_client::Keep;

use crate::{context::Context, failure::Failure, output::note};

/// Keep a cluster from its namespace's lifecycle policy (suspension when
/// idle, the end of its lifetime) for a while: at most the policy's
/// `keep_max` from now. `krayne describe` shows until when.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("how_long").required(true).args(["for_", "until"])))]
pub(crate) struct Args {
    /// Cluster name.
    name: String,
    /// Namespace [default: KRAYNE_NAMESPACE, the config file's, or the one you may use].
    #[arg(short, long)]
    namespace: Option<String>,
    /// For this long from now: 30m, 4h, 1d, 1h30m.
    #[arg(long = "for", id = "for_", value_parser = parse_for, value_name = "DURATION")]
    for_: Option<Duration>,
    /// Until this time (RFC 3339: 2026-11-27T18:00:00Z).
    #[arg(long, value_parser = parse_until, value_name = "TIME")]
    until: Option<SystemTime>,
}

/// `30m`, `4h`, `1d`, `1h30m` (a day is 24 hours).
fn parse_for(text: &str) -> Result<Duration, String> {
    let bad = || format!("{text:?} is not a duration; try 30m, 4h or 1d");
    let span: jiff::Span = text.trim().parse().map_err(|_| bad())?;
    let d = span
        .to_duration(jiff::SpanRelativeTo::days_are_24_hours())
        .map_err(|_| bad())?;
    Duration::try_from(d)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("{text:?} must be more than zero"))
}

fn parse_until(text: &str) -> Result<SystemTime, String> {
    let t: jiff::Timestamp = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a time; give RFC 3339, e.g. 2026-11-27T18:00:00Z"))?;
    Ok(SystemTime::from(t))
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    let client = ctx.client()?;
    let namespace = ctx.namespace(args.namespace.as_deref()).await?;
    let keep = match (args.for_, args.until) {
        (Some(d), _) => Keep::For(d),
        (None, Some(t)) => Keep::Until(t),
        (None, None) => return Err(Failure::Usage("give --for or --until".into())),
    };
    let cluster = client.keep(&namespace, &args.name, keep).await?;
    let until = cluster
        .kept_until
        .as_ref()
        .and_then(|t| jiff::Timestamp::new(t.seconds, 0).ok())
        .map_or_else(|| "the time asked".to_owned(), |t| t.to_string());
    note(&format!(
        "cluster {namespace}/{} kept until {until}: its lifecycle policy does nothing to it before then",
        args.name
    ));
    super::print_cluster(ctx, &cluster)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_times_read_as_the_server_reads_them() {
        assert_eq!(parse_for("4h").unwrap(), Duration::from_secs(4 * 3600));
        assert_eq!(parse_for("1d").unwrap(), Duration::from_secs(86_400));
        assert_eq!(parse_for("1h30m").unwrap(), Duration::from_secs(5400));
        assert!(parse_for("0s").unwrap_err().contains("more than zero"));
        assert!(parse_for("later").unwrap_err().contains("try 30m"));
        assert!(parse_until("2026-11-27T18:00:00Z").is_ok());
        assert!(parse_until("tomorrow").unwrap_err().contains("RFC 3339"));
    }
}
