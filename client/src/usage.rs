//! Usage reports: GPU-, CPU- and memory-hours (`UsageService`).

use crate::{Client, ClientError, proto};

/// What a usage report covers.
#[derive(Debug, Clone, Default)]
pub struct UsageQuery {
    /// Only this namespace; empty: every namespace the caller may read.
    pub namespace: String,
    /// The window's start (unset: this month's first day, UTC).
    pub from: Option<prost_types::Timestamp>,
    /// Its end (unset: now).
    pub to: Option<prost_types::Timestamp>,
    /// What rows are grouped by: `cluster`, `creator`, `team`,
    /// `worker_group`, `day`.
    pub by: Vec<String>,
}

impl Client {
    /// The usage `query` asks for, every page of its rows fetched.
    pub async fn usage(&self, query: &UsageQuery) -> Result<proto::UsageReport, ClientError> {
        let mut report: Option<proto::UsageReport> = None;
        let mut token = String::new();
        loop {
            let message = proto::GetUsageRequest {
                namespace: query.namespace.clone(),
                from: query.from,
                to: query.to,
                by: query.by.clone(),
                page_size: 1000,
                page_token: token,
            };
            let page = self
                .idempotent(|| {
                    let mut client = self.usages();
                    let request = self.request(message.clone());
                    async move { client.get_usage(request).await }
                })
                .await?
                .into_inner();
            token = page.next_page_token.clone();
            match &mut report {
                Some(all) => all.rows.extend(page.rows),
                None => report = Some(page),
            }
            if token.is_empty() {
                break;
            }
        }
        let mut report = report.unwrap_or_default();
        report.next_page_token.clear();
        Ok(report)
    }
}
