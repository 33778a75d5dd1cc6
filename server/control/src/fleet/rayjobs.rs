//! The fleet as one [`RayJobStore`]: a RayJob lives in one site, found as
//! a cluster is.

use super::{Fleet, store::ask_each};
use crate::domain::{
    Authorized, ClusterPatch, ClusterRef, Error, ObservedRayJob, Preconditions, RayJobStore, RequestId,
};

#[async_trait::async_trait]
impl RayJobStore for Fleet {
    async fn create_rayjob(
        &self,
        rayjob: &Authorized<ClusterRef>,
        manifest: &serde_json::Value,
        dry_run: bool,
        request_id: &RequestId,
    ) -> Result<ObservedRayJob, Error> {
        let m = match rayjob.site() {
            Some(site) => self.member(site)?,
            None => self.default_member(),
        };
        m.answering()?;
        m.rayjobs.create_rayjob(rayjob, manifest, dry_run, request_id).await
    }

    async fn get_rayjob(&self, rayjob: &ClusterRef, request_id: &RequestId) -> Result<ObservedRayJob, Error> {
        let m = self.locate_rayjob(rayjob, request_id).await?;
        if m.down().is_some()
            && let Some(found) = m
                .feed
                .as_ref()
                .and_then(|f| f.rayjob(rayjob.namespace(), rayjob.name()))
        {
            return Ok((*found).clone());
        }
        m.rayjobs.get_rayjob(rayjob, request_id).await
    }

    async fn list_rayjobs(
        &self,
        namespace: Option<&str>,
        request_id: &RequestId,
    ) -> Result<Vec<ObservedRayJob>, Error> {
        self.merged(
            ask_each!(self, m => m.rayjobs.list_rayjobs(namespace, request_id)),
            |f| f.rayjobs(namespace).iter().map(|j| (**j).clone()).collect(),
        )
    }

    async fn patch_rayjob(
        &self,
        rayjob: &Authorized<ClusterRef>,
        patch: &ClusterPatch,
        request_id: &RequestId,
    ) -> Result<ObservedRayJob, Error> {
        let m = self.locate_rayjob(rayjob, request_id).await?;
        m.answering()?;
        m.rayjobs.patch_rayjob(rayjob, patch, request_id).await
    }

    async fn delete_rayjob(
        &self,
        rayjob: &Authorized<ClusterRef>,
        only_if: Option<&Preconditions>,
        request_id: &RequestId,
    ) -> Result<(), Error> {
        let m = self.locate_rayjob(rayjob, request_id).await?;
        m.answering()?;
        m.rayjobs.delete_rayjob(rayjob, only_if, request_id).await
    }
}
