//! Usage: GPU-, CPU- and memory-hours, cluster- and suspended-hours.

use axum::{
    Json,
    extract::{Path, State},
    http::Uri,
};
use serde::Serialize;
use utoipa::ToSchema;

use super::{
    AppState,
    extract::Caller,
    problem::ApiError,
    responses::{Refusals, Viewer},
};
use crate::{
    control::{UsageQuery, UsageReport},
    domain::{Error, PageRequest, UsageBy, UsageFigures, UsageRow},
};

/// Hours used within a window.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct UsageView {
    /// The window's start (RFC 3339).
    pub from: String,
    /// Its end (RFC 3339).
    pub to: String,
    /// Every interval's hours within the window, each counted once.
    pub totals: UsageFigures,
    /// Rows, grouped as asked (`by`), sorted by what they are grouped by.
    pub rows: Vec<UsageRow>,
    /// Token for the next page of rows; absent on the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_page_token: Option<String>,
}

impl From<UsageReport> for UsageView {
    fn from(r: UsageReport) -> Self {
        Self {
            from: r.from.to_string(),
            to: r.to.to_string(),
            totals: r.totals,
            rows: r.rows,
            next_page_token: r.next_page_token,
        }
    }
}

/// A namespace's usage.
///
/// Every Ray pod's requests (else limits) of CPU, memory and GPUs from
/// when it ran to when it stopped, and each cluster's existence and
/// suspensions, as the leader recorded them (docs/usage.md), within
/// `from`..`to` (default: this calendar month, UTC). Rows are grouped by
/// `by` (repeatable or comma-separated: `cluster`, `creator`, `team`,
/// `worker_group`, `day`; none: one row for the namespace). Needs the
/// viewer role.
#[utoipa::path(get, path = "/v1/namespaces/{namespace}/usage", tag = "usage",
    params(
        ("namespace" = String, Path, description = "Kubernetes namespace"),
        ("from" = Option<String>, Query, description = "Start, RFC 3339 (default: this month's first day, UTC)"),
        ("to" = Option<String>, Query, description = "End, RFC 3339 (default: now)"),
        ("by" = Option<Vec<String>>, Query, description = "Group rows by cluster, creator, team, worker_group, day"),
        ("page_size" = Option<u32>, Query, description = "Rows per page (default 100, at most 1000)"),
        ("page_token" = Option<String>, Query, description = "The previous page's next_page_token"),
    ),
    responses(
        Refusals, Viewer,
        (status = 200, description = "The namespace's usage", body = UsageView),
        (status = 503, description = "The store database does not answer", body = super::problem::Problem),
    ))]
pub(super) async fn namespace_usage(
    State(s): State<AppState>,
    Caller(cx): Caller,
    Path(namespace): Path<String>,
    uri: Uri,
) -> Result<Json<UsageView>, ApiError> {
    let query = usage_query(&uri)?;
    Ok(Json(s.plane.namespace_usage(&cx, &namespace, query).await?.into()))
}

/// Usage of every namespace the caller may read.
///
/// As a namespace's usage, over every namespace the caller has a role in
/// (an admin's: all); without `by`, one row per namespace.
#[utoipa::path(get, path = "/v1/usage", tag = "usage",
    params(
        ("from" = Option<String>, Query, description = "Start, RFC 3339 (default: this month's first day, UTC)"),
        ("to" = Option<String>, Query, description = "End, RFC 3339 (default: now)"),
        ("by" = Option<Vec<String>>, Query, description = "Group rows by cluster, creator, team, worker_group, day"),
        ("page_size" = Option<u32>, Query, description = "Rows per page (default 100, at most 1000)"),
        ("page_token" = Option<String>, Query, description = "The previous page's next_page_token"),
    ),
    responses(
        Refusals,
        (status = 200, description = "The caller's namespaces' usage", body = UsageView),
        (status = 503, description = "The store database does not answer", body = super::problem::Problem),
    ))]
pub(super) async fn usage(
    State(s): State<AppState>,
    Caller(cx): Caller,
    uri: Uri,
) -> Result<Json<UsageView>, ApiError> {
    let query = usage_query(&uri)?;
    Ok(Json(s.plane.usage(&cx, query).await?.into()))
}

/// The query string as a [`UsageQuery`]; `by` may repeat.
fn usage_query(uri: &Uri) -> Result<UsageQuery, Error> {
    let mut query = UsageQuery::default();
    let (mut page_size, mut page_token) = (0_u32, String::new());
    let time = |field: &'static str, value: &str| {
        value
            .parse::<jiff::Timestamp>()
            .map_err(|_| Error::invalid(field, "must be an RFC 3339 time, such as 2026-11-01T00:00:00Z"))
    };
    for (key, value) in url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes()) {
        match &*key {
            "from" => query.from = Some(time("from", &value)?),
            "to" => query.to = Some(time("to", &value)?),
            "by" => {
                for by in value.split(',').filter(|b| !b.is_empty()) {
                    query.by.push(UsageBy::parse(by.trim())?);
                }
            }
            "page_size" => {
                page_size = value
                    .parse()
                    .map_err(|_| Error::invalid("page_size", "must be a whole number"))?;
            }
            "page_token" => page_token = value.into_owned(),
            other => {
                return Err(Error::invalid(
                    other.to_owned(),
                    "is not a parameter of usage (from, to, by, page_size, page_token)",
                ));
            }
        }
    }
    query.page = PageRequest::new(page_size, &page_token)?;
    Ok(query)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_repeats_or_lists_and_unknown_parameters_are_refused() {
        let q = |s: &str| usage_query(&s.parse::<Uri>().unwrap());
        let both = q("/v1/usage?by=cluster&by=day,team&from=2026-11-01T00:00:00Z").unwrap();
        assert_eq!(both.by, [UsageBy::Cluster, UsageBy::Day, UsageBy::Team]);
        assert_eq!(both.from.unwrap().to_string(), "2026-11-01T00:00:00Z");
        assert_eq!(q("/v1/usage?by=month").unwrap_err().code(), "invalid_argument");
        assert_eq!(q("/v1/usage?from=yesterday").unwrap_err().code(), "invalid_argument");
        assert_eq!(q("/v1/usage?window=7d").unwrap_err().code(), "invalid_argument");
        assert_eq!(q("/v1/usage?page_size=5000").unwrap_err().code(), "invalid_argument");
    }
}
