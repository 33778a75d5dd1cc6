//! Usage accounting: the leader's recorder (`recorder`) and the reports
//! read from what it recorded (viewers of a namespace; a caller's every
//! namespace; admins all).

mod key;
mod recorder;

use jiff::{Timestamp, civil::Date, tz::TimeZone};

pub use recorder::UsageRecorder;

use super::{Context, ControlPlane};
use crate::domain::{
    Action, Error, PageRequest, UsageBy, UsageFigures, UsageRow, audit::AuditAction, usage_report, usage_row_key,
};

/// The longest window a report covers.
const MAX_WINDOW_DAYS: i64 = 400;

/// What a report asks for.
#[derive(Debug, Clone, Default)]
pub struct UsageQuery {
    /// From (default: the start of this calendar month, UTC).
    pub from: Option<Timestamp>,
    /// To (default: now).
    pub to: Option<Timestamp>,
    /// What rows are grouped by (none: one row per namespace).
    pub by: Vec<UsageBy>,
    /// Which page of rows.
    pub page: PageRequest,
}

/// Hours used within a window: the totals and a page of rows.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageReport {
    /// The window's start.
    pub from: Timestamp,
    /// Its end.
    pub to: Timestamp,
    /// Every interval's hours, each counted once.
    pub totals: UsageFigures,
    /// This page's rows.
    pub rows: Vec<UsageRow>,
    /// The next page's token, if there is one.
    pub next_page_token: Option<String>,
}

impl ControlPlane {
    /// Usage of `namespace` (viewer).
    pub async fn namespace_usage(
        &self,
        cx: &Context,
        namespace: &str,
        query: UsageQuery,
    ) -> Result<UsageReport, Error> {
        self.authorize(cx, AuditAction::UsageGet, namespace, None).await?;
        let report = self.usage_report(vec![namespace.to_owned()], query).await?;
        self.record_read(cx, AuditAction::UsageGet, Some(namespace), None).await;
        Ok(report)
    }

    /// Usage of every namespace the caller may read (an admin's: all).
    pub async fn usage(&self, cx: &Context, query: UsageQuery) -> Result<UsageReport, Error> {
        let mine = self.namespaces_where(cx, Action::Read).await?;
        let report = self.usage_report(mine, query).await?;
        self.record_read(cx, AuditAction::UsageGet, None, None).await;
        Ok(report)
    }

    async fn usage_report(&self, namespaces: Vec<String>, query: UsageQuery) -> Result<UsageReport, Error> {
        let now = Timestamp::now();
        let (from, to) = window(query.from, query.to, now)?;
        let ledger = self
            .usage_ledger
            .as_ref()
            .ok_or_else(|| Error::Unavailable("this server records no usage (no store database)".into()))?;
        let intervals = ledger.intervals(Some(&namespaces), from, to).await?;
        let mut by = query.by;
        by.sort_unstable();
        by.dedup();
        let counted = usage_report(&intervals, from, to, &by, now);
        let page = query.page.apply(counted.rows, usage_row_key);
        Ok(UsageReport {
            from,
            to,
            totals: counted.totals,
            rows: page.items,
            next_page_token: page.next_page_token,
        })
    }
}

/// The window asked for: `from` defaults to this calendar month's start
/// (UTC), `to` to now; `from` must come before `to`, within
/// [`MAX_WINDOW_DAYS`].
fn window(from: Option<Timestamp>, to: Option<Timestamp>, now: Timestamp) -> Result<(Timestamp, Timestamp), Error> {
    let to = to.unwrap_or(now);
    let from = match from {
        Some(from) => from,
        None => month_start(now)?,
    };
    if from >= to {
        return Err(Error::invalid("from", "must be before `to`"));
    }
    if to.duration_since(from).as_secs() > MAX_WINDOW_DAYS * 86_400 {
        return Err(Error::invalid(
            "to",
            format!("a report covers at most {MAX_WINDOW_DAYS} days"),
        ));
    }
    Ok((from, to))
}

fn month_start(now: Timestamp) -> Result<Timestamp, Error> {
    let today = now.to_zoned(TimeZone::UTC).date();
    Date::new(today.year(), today.month(), 1)
        .and_then(|d| d.to_zoned(TimeZone::UTC))
        .map(|z| z.timestamp())
        .map_err(|e| Error::Internal(format!("this month's start: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_defaults_to_this_month_and_must_be_forward() {
        let now: Timestamp = "2026-11-27T22:00:00Z".parse().unwrap();
        let (from, to) = window(None, None, now).unwrap();
        assert_eq!(from.to_string(), "2026-11-01T00:00:00Z");
        assert_eq!(to, now);
        assert!(window(Some(now), Some(now), now).is_err());
        let long_ago: Timestamp = "2020-01-01T00:00:00Z".parse().unwrap();
        assert_eq!(
            window(Some(long_ago), None, now).unwrap_err().code(),
            "invalid_argument"
        );
    }
}
