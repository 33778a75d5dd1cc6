//! The fleet as one [`KueueReads`]: each site's Kueue holds the Workloads
//! of the jobs in that site. Workloads are found by their owners' uids and
//! pending ones carry their own place in their site's LocalQueue, so the
//! sites' answers are merged as they come.

use super::{Fleet, any_answer as merged, store::ask_each};
use crate::domain::{
    Error, KueueReads, RequestId,
    kueue::{ObservedWorkload, PendingWorkload},
};

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
