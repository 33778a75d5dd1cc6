//! Usage in OpenCost's allocation shape (`/allocation`), so dashboards
//! and scripts that read OpenCost read krayne's exact, attributed hours
//! too. Costs are zero: krayne knows hours, not prices.

use axum::{Json, extract::State, http::Uri};
use jiff::{Timestamp, ToSpan as _, civil::Date, tz::TimeZone};
use serde_json::{Map, Value, json};

use super::{AppState, extract::Caller, problem::ApiError, responses::Refusals};
use crate::{
    control::UsageQuery,
    domain::{Error, PageRequest, UsageBy, UsageRow},
};

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Usage as OpenCost's allocation API answers.
///
/// `window`: `today`, `yesterday`, `week`, `month`, `lastmonth`, a
/// duration back (`30m`, `12h`, `7d`, `2w`), or two RFC 3339 times or
/// Unix seconds, comma-separated. `aggregate`: `namespace` (default),
/// `cluster`, `team`, `creator`, `worker_group`, or the labels they come
/// from (`label:krayne.dev/team`, `label:ray.io/cluster`,
/// `label:ray.io/group`). Over every namespace the caller may read; the
/// answer is `{"code": 200, "data": [{name: allocation}]}` with
/// `cpuCoreHours`, `ramByteHours`, `gpuHours`, their averages over the
/// window, `minutes`, and costs of zero.
#[utoipa::path(get, path = "/v1/usage/allocation", tag = "usage",
    params(
        ("window" = String, Query, description = "today, yesterday, week, month, lastmonth, 7d, or `start,end`"),
        ("aggregate" = Option<String>, Query, description = "namespace, cluster, team, creator, worker_group, or label:<key>"),
    ),
    responses(
        Refusals,
        (status = 200, description = "Allocations, as OpenCost's API answers", body = Object),
        (status = 503, description = "The store database does not answer", body = super::problem::Problem),
    ))]
pub(super) async fn allocation(
    State(s): State<AppState>,
    Caller(cx): Caller,
    uri: Uri,
) -> Result<Json<Value>, ApiError> {
    let (mut window, mut aggregate) = (None, "namespace".to_owned());
    for (key, value) in url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes()) {
        match &*key {
            "window" => window = Some(value.into_owned()),
            "aggregate" => aggregate = value.into_owned(),
            // OpenCost's knobs that change nothing here.
            "step" | "resolution" | "accumulate" | "includeIdle" | "shareIdle" | "idleByNode" => {}
            other => {
                return Err(
                    Error::invalid(other.to_owned(), "is not a parameter of allocation (window, aggregate)").into(),
                );
            }
        }
    }
    let window = window.ok_or_else(|| Error::invalid("window", "is required (e.g. 7d, month, or start,end)"))?;
    let (from, to) = parse_window(&window, Timestamp::now())?;
    let by = aggregate_by(&aggregate)?;
    let mut rows: Vec<UsageRow> = Vec::new();
    let mut token = String::new();
    loop {
        let query = UsageQuery {
            from: Some(from),
            to: Some(to),
            by: by.clone(),
            page: PageRequest::new(1000, &token)?,
        };
        let page = s.plane.usage(&cx, query).await?;
        rows.extend(page.rows);
        match page.next_page_token {
            Some(next) => token = next,
            None => break,
        }
    }
    let minutes = to.duration_since(from).as_secs_f64() / 60.0;
    let hours = minutes / 60.0;
    let mut set = Map::new();
    for row in rows {
        let name = row_name(&row, by.first().copied());
        let f = row.figures;
        let mut properties = Map::new();
        if let Some(namespace) = &row.namespace {
            properties.insert("namespace".into(), json!(namespace));
        }
        if let Some(cluster) = &row.cluster {
            properties.insert("labels".into(), json!({"ray.io/cluster": cluster}));
        }
        set.insert(
            name.clone(),
            json!({
                "name": name,
                "properties": properties,
                "window": {"start": from.to_string(), "end": to.to_string()},
                "start": from.to_string(),
                "end": to.to_string(),
                "minutes": minutes,
                "cpuCoreHours": f.cpu_hours,
                "cpuCoreRequestAverage": f.cpu_hours / hours,
                "ramByteHours": f.memory_gib_hours * GIB,
                "ramByteRequestAverage": f.memory_gib_hours * GIB / hours,
                "gpuHours": f.gpu_hours,
                "gpuCount": f.gpu_hours / hours,
                "cpuCost": 0.0, "gpuCost": 0.0, "ramCost": 0.0, "pvCost": 0.0,
                "networkCost": 0.0, "sharedCost": 0.0, "externalCost": 0.0, "totalCost": 0.0,
            }),
        );
    }
    Ok(Json(json!({"code": 200, "data": [set]})))
}

/// What an OpenCost `aggregate` groups krayne's rows by.
fn aggregate_by(aggregate: &str) -> Result<Vec<UsageBy>, Error> {
    Ok(match aggregate {
        "namespace" => Vec::new(),
        "cluster" | "label:ray.io/cluster" => vec![UsageBy::Cluster],
        "team" | "label:krayne.dev/team" => vec![UsageBy::Team],
        "creator" => vec![UsageBy::Creator],
        "worker_group" | "label:ray.io/group" => vec![UsageBy::WorkerGroup],
        other => {
            return Err(Error::invalid(
                "aggregate",
                format!(
                    "{other:?} is not one of namespace, cluster, team, creator, worker_group, \
                     label:krayne.dev/team, label:ray.io/cluster, label:ray.io/group"
                ),
            ));
        }
    })
}

/// A row's name in the set: what it is grouped by (`namespace/cluster`
/// for clusters); OpenCost names what has none `__unallocated__`.
fn row_name(row: &UsageRow, by: Option<UsageBy>) -> String {
    let value = match by {
        None => row.namespace.clone(),
        Some(UsageBy::Cluster) => Some(format!(
            "{}/{}",
            row.namespace.as_deref().unwrap_or(""),
            row.cluster.as_deref().unwrap_or("")
        )),
        Some(UsageBy::Team) => row.team.clone(),
        Some(UsageBy::Creator) => row.creator.clone(),
        Some(UsageBy::WorkerGroup) => row.worker_group.clone(),
        Some(UsageBy::Day) => row.day.clone(),
    };
    value
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "__unallocated__".into())
}

/// OpenCost's `window` as a time range ending no later than `now`.
fn parse_window(window: &str, now: Timestamp) -> Result<(Timestamp, Timestamp), Error> {
    let bad = || {
        Error::invalid(
            "window",
            "must be today, yesterday, week, month, lastmonth, a duration (30m, 12h, 7d, 2w), or start,end",
        )
    };
    let today = now.to_zoned(TimeZone::UTC).date();
    let midnight = |d: Date| d.to_zoned(TimeZone::UTC).map(|z| z.timestamp()).map_err(|_| bad());
    let month_start = |d: Date| Date::new(d.year(), d.month(), 1).map_err(|_| bad());
    match window {
        "today" => return Ok((midnight(today)?, now)),
        "yesterday" => {
            let start = today.checked_sub(1.day()).map_err(|_| bad())?;
            return Ok((midnight(start)?, midnight(today)?));
        }
        "week" => {
            let back = i64::from(today.weekday().to_monday_zero_offset());
            let monday = today.checked_sub(back.days()).map_err(|_| bad())?;
            return Ok((midnight(monday)?, now));
        }
        "month" => return Ok((midnight(month_start(today)?)?, now)),
        "lastmonth" => {
            let this = month_start(today)?;
            let last = this.checked_sub(1.month()).map_err(|_| bad())?;
            return Ok((midnight(last)?, midnight(this)?));
        }
        _ => {}
    }
    if let Some((start, end)) = window.split_once(',') {
        let time = |t: &str| {
            t.parse::<Timestamp>()
                .ok()
                .or_else(|| t.parse::<i64>().ok().and_then(|s| Timestamp::from_second(s).ok()))
                .ok_or_else(bad)
        };
        return Ok((time(start.trim())?, time(end.trim())?));
    }
    let split = window.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (count, unit) = window.split_at(split);
    let count: i64 = count.parse().map_err(|_| bad())?;
    let seconds = match unit {
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 604_800,
        _ => return Err(bad()),
    };
    let back = jiff::SignedDuration::from_secs(count.checked_mul(seconds).ok_or_else(bad)?);
    Ok((now.checked_sub(back).map_err(|_| bad())?, now))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opencost_windows_are_read_as_opencost_reads_them() {
        let now: Timestamp = "2026-11-27T22:30:00Z".parse().unwrap();
        let w = |s: &str| {
            parse_window(s, now)
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .unwrap()
        };
        assert_eq!(w("7d").0, "2026-11-20T22:30:00Z");
        assert_eq!(w("today").0, "2026-11-27T00:00:00Z");
        assert_eq!(w("week").0, "2026-11-23T00:00:00Z", "a Monday");
        assert_eq!(w("month").0, "2026-11-01T00:00:00Z");
        assert_eq!(
            w("lastmonth"),
            ("2026-10-01T00:00:00Z".into(), "2026-11-01T00:00:00Z".into())
        );
        assert_eq!(
            w("2026-11-01T00:00:00Z,1796083200"),
            ("2026-11-01T00:00:00Z".into(), "2026-12-01T00:00:00Z".into())
        );
        for bad in ["7x", "forever", "", "d"] {
            assert_eq!(parse_window(bad, now).unwrap_err().code(), "invalid_argument", "{bad}");
        }
        assert!(aggregate_by("label:app").is_err());
        assert_eq!(aggregate_by("label:krayne.dev/team").unwrap(), [UsageBy::Team]);
    }
}
