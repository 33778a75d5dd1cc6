//! The fleet as one [`KueueReads`]: each site's Kueue holds the Workloads
//! of the jobs in that site. Workloads are found by their owners' uids and
//! pending ones carry their own place in their site's LocalQueue, so the
//! sites' answers are merged as they come.

use super::{Fleet, store::ask_each};
use crate::domain::{
    Error, KueueReads, RequestId,
    kueue::{ObservedWorkload, PendingWorkload},
};

/// Every answering site's answer, or the last error when none answered.
fn merged<T>(answers: Vec<Result<Vec<T>, Error>>) -> Result<Vec<T>, Error> {
    let mut all = Vec::new();
    let mut failed = None;
    let mut answered = false;
    for answer in answers {
        match answer {
            Ok(items) => {
                answered = true;
                all.extend(items);
            }
            Err(e) => failed = Some(e),
        }
    }
    match failed {
        Some(e) if !answered => Err(e),
        _ => Ok(all),
    }
}

#[async_trait::async_trait]
impl KueueReads for Fleet {
    async fn workloads(
        &self,
        namespace: &str,
        uids: &[String],
        request_id: &RequestId,
    ) -> Result<Vec<ObservedWorkload>, Error> {
        merged(ask_each!(self, m => m.kueue.workloads(namespace, uids, request_id)))
    }

    async fn pending(
        &self,
        namespace: &str,
        queue: &str,
        request_id: &RequestId,
    ) -> Result<Vec<PendingWorkload>, Error> {
        merged(ask_each!(self, m => m.kueue.pending(namespace, queue, request_id)))
    }
}
