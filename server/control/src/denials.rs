//! Refused authentications, bounded. A caller without a valid token costs
//! the audit log at most two rows per source address per window: the
//! first denial is written at once (so an attack shows up immediately),
//! the rest are counted and written as one summary row when the window
//! closes. Past a per-source rate, denials are answered 429 instead of 401.

use std::{
    collections::{HashMap, hash_map::Entry},
    sync::Mutex,
    time::{Duration, Instant},
};

use serde_json::json;

use super::{RateLimit, admission::KeyedRate};
use crate::domain::audit::AuditEntry;

/// How denials are limited and aggregated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DenialSettings {
    /// Failed authentications each source address may make before it is
    /// answered 429 (`None`: no limit).
    pub rate: Option<RateLimit>,
    /// How long repeated denials from one source are counted into one row.
    pub window: Duration,
}

impl Default for DenialSettings {
    fn default() -> Self {
        Self {
            rate: RateLimit::new(10, 30),
            window: Duration::from_secs(60),
        }
    }
}

/// Sources tracked at once; past it, new sources share one window, so a
/// spray from many addresses still costs one row per window.
const MAX_SOURCES: usize = 10_000;
const OVERFLOW: &str = "*";

struct Window {
    opened: Instant,
    repeats: u64,
    rate_limited: u64,
    first_repeat_at: Option<String>,
    /// The latest denial counted in this window, for its circumstances.
    last: Option<AuditEntry>,
}

impl Window {
    fn new() -> Self {
        Self {
            opened: Instant::now(),
            repeats: 0,
            rate_limited: 0,
            first_repeat_at: None,
            last: None,
        }
    }

    /// The summary row of the denials counted after the first, if any.
    fn summary(self, window: Duration) -> Option<AuditEntry> {
        let mut row = self.last?;
        let last_at = row.occurred_at.clone();
        row.summary = json!({
            "repeated": self.repeats,
            "rate_limited": self.rate_limited,
            "first_at": self.first_repeat_at,
            "last_at": last_at,
            "window_seconds": window.as_secs(),
        });
        row.id = uuid::Uuid::now_v7().to_string();
        if let Some(first) = self.first_repeat_at {
            row.occurred_at = first;
        }
        row.completed_at = Some(last_at);
        Some(row)
    }
}

/// The limiter and the open windows.
pub(super) struct Denials {
    settings: DenialSettings,
    rate: KeyedRate,
    windows: Mutex<HashMap<String, Window>>,
}

impl Denials {
    pub(super) fn new(settings: DenialSettings) -> Self {
        Self {
            settings,
            rate: KeyedRate::new(settings.rate),
            windows: Mutex::new(HashMap::new()),
        }
    }

    pub(super) fn window(&self) -> Duration {
        self.settings.window
    }

    /// How long `source` must wait when it is over its rate of denials.
    pub(super) fn over_rate(&self, source: &str) -> Option<Duration> {
        self.rate.over(source)
    }

    /// Notes the denial `row` from `source`; returns the rows to write now:
    /// the denial itself when it opens a window, and the summary of the
    /// window it closes, if any.
    pub(super) fn note(&self, source: &str, row: AuditEntry, rate_limited: bool) -> Vec<AuditEntry> {
        let mut windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        let key = if windows.len() >= MAX_SOURCES && !windows.contains_key(source) {
            OVERFLOW
        } else {
            source
        };
        let mut out = Vec::new();
        let window = match windows.entry(key.to_owned()) {
            Entry::Occupied(mut open) if open.get().opened.elapsed() >= self.settings.window => {
                out.extend(std::mem::replace(open.get_mut(), Window::new()).summary(self.settings.window));
                out.push(row);
                return out;
            }
            Entry::Occupied(open) => open.into_mut(),
            Entry::Vacant(vacant) => {
                vacant.insert(Window::new());
                out.push(row);
                return out;
            }
        };
        window.repeats += 1;
        window.rate_limited += u64::from(rate_limited);
        window.first_repeat_at.get_or_insert_with(|| row.occurred_at.clone());
        window.last = Some(row);
        out
    }

    /// Closes windows older than the window length (all of them when
    /// `all`, at shutdown) and returns their summary rows.
    pub(super) fn close(&self, all: bool) -> Vec<AuditEntry> {
        let mut windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        let expired: Vec<String> = windows
            .iter()
            .filter(|(_, w)| all || w.opened.elapsed() >= self.settings.window)
            .map(|(k, _)| k.clone())
            .collect();
        expired
            .into_iter()
            .filter_map(|k| windows.remove(&k))
            .filter_map(|w| w.summary(self.settings.window))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::audit::{Outcome, RequestMeta, Transport};

    fn row(at: &str) -> AuditEntry {
        AuditEntry {
            id: uuid::Uuid::now_v7().to_string(),
            occurred_at: at.into(),
            meta: RequestMeta {
                request_id: "r".into(),
                correlation_id: None,
                transport: Transport::Rest,
                source_ip: Some("10.0.0.1".into()),
                user_agent: None,
            },
            subject: String::new(),
            email: None,
            groups: Vec::new(),
            teams: Vec::new(),
            action: "auth.denied".into(),
            namespace: None,
            cluster: None,
            summary: serde_json::Value::Null,
            outcome: Outcome::Denied,
            completed_at: None,
            http_status: Some(401),
            grpc_code: None,
            error: Some("missing bearer token".into()),
            duration_ms: None,
        }
    }

    fn denials(window: Duration) -> Denials {
        Denials::new(DenialSettings {
            rate: RateLimit::new(1, 2),
            window,
        })
    }

    #[test]
    fn the_first_denial_is_written_at_once_and_repeats_are_counted() {
        let d = denials(Duration::from_secs(3600));
        assert_eq!(d.note("a", row("t0"), false).len(), 1);
        for i in 1..=5 {
            assert!(d.note("a", row(&format!("t{i}")), i > 3).is_empty());
        }
        // Another source has a window of its own.
        assert_eq!(d.note("b", row("t9"), false).len(), 1);
        assert!(d.close(false).is_empty(), "windows still open");
        let mut rows = d.close(true);
        assert_eq!(rows.len(), 1, "b had no repeats");
        let summary = rows.remove(0);
        assert_eq!(summary.summary["repeated"], 5);
        assert_eq!(summary.summary["rate_limited"], 2);
        assert_eq!(summary.summary["first_at"], "t1");
        assert_eq!(summary.summary["last_at"], "t5");
        assert_eq!(summary.occurred_at, "t1");
    }

    #[test]
    fn a_closed_window_is_summarised_by_the_next_denial() {
        let d = denials(Duration::ZERO);
        assert_eq!(d.note("a", row("t0"), false).len(), 1);
        // Zero-length windows: every denial opens a new one.
        assert_eq!(d.note("a", row("t1"), false).len(), 1);
    }

    #[test]
    fn the_rate_is_per_source() {
        let d = denials(Duration::from_secs(60));
        assert!(d.over_rate("a").is_none());
        assert!(d.over_rate("a").is_none());
        assert!(d.over_rate("a").is_some());
        assert!(d.over_rate("b").is_none());
    }

    #[test]
    fn sources_past_the_bound_share_one_window() {
        let d = denials(Duration::from_secs(3600));
        for i in 0..MAX_SOURCES {
            d.note(&format!("s{i}"), row("t"), false);
        }
        assert_eq!(d.note("new-1", row("t"), false).len(), 1);
        assert!(d.note("new-2", row("t"), false).is_empty());
    }
}
