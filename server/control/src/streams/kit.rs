//! The kit every long-lived stream uses — tunnels, proxied WebSockets,
//! followed logs, watches: how many are open per caller and namespace
//! ([`OpenStreams`], [`Permit`]), what flowed ([`Flowed`]), and how a
//! stream's audit row ends ([`completed`]).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use crate::domain::{
    AuditSink,
    audit::{AuditEntry, Outcome},
};

/// What flowed through a tunnel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flowed {
    /// Bytes from the client to the service.
    pub to_service: u64,
    /// Bytes from the service to the client.
    pub to_client: u64,
}

/// Open long-lived streams of one kind (tunnels, watches): per principal,
/// and in all (which shutdown waits on).
pub(crate) struct OpenStreams {
    /// Open streams per holder: a subject (`s:…`) or a namespace (`n:…`).
    by_holder: Mutex<HashMap<String, usize>>,
    total: tokio::sync::watch::Sender<usize>,
    /// The gauge counting them.
    gauge: &'static str,
}

impl OpenStreams {
    /// Waits until none is open, at most `within`; whether none is.
    pub(crate) async fn all_closed(&self, within: Duration) -> bool {
        let mut total = self.total.subscribe();
        tokio::time::timeout(within, total.wait_for(|n| *n == 0)).await.is_ok()
    }

    /// None open yet; `gauge` counts them.
    pub(crate) fn counted_by(gauge: &'static str) -> Self {
        Self {
            by_holder: Mutex::default(),
            total: tokio::sync::watch::Sender::new(0),
            gauge,
        }
    }
}

/// One open stream's place in [`OpenStreams`], given back when dropped.
pub(crate) struct Permit {
    open: Arc<OpenStreams>,
    holders: Vec<String>,
}

/// Who a stream counts against, each with its most: the caller, and the
/// namespace (team) it opens into — so a team that makes ServiceAccounts
/// does not multiply its share.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Holders<'a> {
    /// The caller's subject, and the most it may hold.
    pub(crate) subject: (&'a str, usize),
    /// The namespace, and the most all its callers together may hold.
    pub(crate) namespace: Option<(&'a str, usize)>,
}

/// Which of a stream's holders is at its most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Full {
    /// The caller.
    Subject,
    /// The namespace.
    Namespace,
}

impl OpenStreams {
    /// A place for one more stream of every holder's, unless one of them
    /// has its most.
    pub(crate) fn take_for(self: &Arc<Self>, holders: Holders<'_>) -> Result<Permit, Full> {
        let (subject, most) = holders.subject;
        let mut wanted = vec![(format!("s:{subject}"), most, Full::Subject)];
        if let Some((namespace, most)) = holders.namespace {
            wanted.push((format!("n:{namespace}"), most, Full::Namespace));
        }
        let mut open = self.by_holder.lock().unwrap_or_else(|p| p.into_inner());
        for (key, most, full) in &wanted {
            if open.get(key).copied().unwrap_or(0) >= *most {
                return Err(*full);
            }
        }
        for (key, _, _) in &wanted {
            *open.entry(key.clone()).or_default() += 1;
        }
        self.total.send_modify(|t| *t += 1);
        metrics::gauge!(self.gauge).increment(1.0);
        Ok(Permit {
            open: self.clone(),
            holders: wanted.into_iter().map(|(key, _, _)| key).collect(),
        })
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut open = self.open.by_holder.lock().unwrap_or_else(|p| p.into_inner());
        for holder in &self.holders {
            if let Some(n) = open.get_mut(holder) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    open.remove(holder);
                }
            }
        }
        self.open.total.send_modify(|t| *t = t.saturating_sub(1));
        metrics::gauge!(self.open.gauge).decrement(1.0);
    }
}

/// A tunnel's audit row, where it goes and when the tunnel began.
pub(crate) type Row = (Arc<dyn AuditSink>, AuditEntry, Instant);

/// A tunnel's row as it ends well: what flowed and why it ended (counted
/// in the metrics too).
pub(crate) fn completed(entry: &mut AuditEntry, started: Instant, flowed: Flowed, ended: &str) {
    counted(flowed);
    if let Value::Object(summary) = &mut entry.summary {
        summary.insert("bytes_to_service".into(), json!(flowed.to_service));
        summary.insert("bytes_to_client".into(), json!(flowed.to_client));
        summary.insert("ended".into(), json!(ended));
    }
    entry.outcome = Outcome::Succeeded;
    entry.http_status = Some(200);
    entry.grpc_code = Some("OK".to_owned());
    entry.completed_at = Some(jiff::Timestamp::now().to_string());
    entry.duration_ms = Some(millis(started.elapsed()));
}

/// What flowed, in the metrics.
pub(crate) fn counted(flowed: Flowed) {
    metrics::counter!("krayne_tunnel_bytes_total", "direction" => "to_service").increment(flowed.to_service);
    metrics::counter!("krayne_tunnel_bytes_total", "direction" => "to_client").increment(flowed.to_client);
}

/// Milliseconds, saturating.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reliability 29i (issue 53, item 9): a team's ServiceAccounts share
    /// its namespace's limit.
    #[test]
    fn many_subjects_of_one_team_share_its_namespaces_limit() {
        let open = Arc::new(OpenStreams::counted_by("krayne_test_streams_open"));
        let holders = |subject: &'static str, namespace: &'static str| Holders {
            subject: (subject, 2),
            namespace: Some((namespace, 3)),
        };
        let mut held = Vec::new();
        for subject in ["sa-1", "sa-2", "sa-3"] {
            held.push(open.take_for(holders(subject, "ml-team")).unwrap());
        }
        assert_eq!(open.take_for(holders("sa-4", "ml-team")).err(), Some(Full::Namespace));
        assert!(
            open.take_for(holders("sa-4", "other-team")).is_ok(),
            "another team's share"
        );
        let first = open.take_for(holders("sa-1", "other-team")).unwrap();
        assert_eq!(open.take_for(holders("sa-1", "third-team")).err(), Some(Full::Subject));
        drop(first);
        drop(held.pop());
        assert!(
            open.take_for(holders("sa-4", "ml-team")).is_ok(),
            "a place again once one ends"
        );
    }
}
