//! The fleet as one [`ClusterStore`]: reads merge every site (a site that
//! does not answer gives its cache's last state), writes go to the
//! cluster's own site.

use std::{collections::BTreeSet, sync::Arc};

use futures::stream::BoxStream;

use super::Fleet;
use crate::domain::{
    Authorized, ClusterChange, ClusterFeed, ClusterPatch, ClusterRef, ClusterStore, Companion, Error, ObservedCluster,
    ObservedEvent, ObservedPod, PodLogOptions, PodsOf, Preconditions, RenderedCluster, RequestId, Site,
    sites::{SiteFacts, SiteSpec},
};

/// Every site's answer to `$call` (with `$m` the site), asked at once; a
/// site that does not answer is not asked.
macro_rules! ask_each {
    ($fleet:expr, $m:ident => $call:expr) => {
        futures::future::join_all($fleet.members.iter().map(|$m| async move {
            match $m.down() {
                Some(since) => Err($m.unavailable(since)),
                None => $call.await,
            }
        }))
        .await
    };
}
pub(super) use ask_each;

impl Fleet {
    /// Every site's answer (in `answers`, in the sites' order), or, for one
    /// that does not answer or fails, `cached` of its feed; an error only
    /// when no site gave an answer of either kind.
    pub(super) fn merged<T>(
        &self,
        answers: Vec<Result<Vec<T>, Error>>,
        cached: impl Fn(&dyn ClusterFeed) -> Vec<T>,
    ) -> Result<Vec<T>, Error> {
        let mut all = Vec::new();
        let mut failed = None;
        for (m, answered) in self.members.iter().zip(answers) {
            match (answered, &m.feed) {
                (Ok(items), _) => all.extend(items),
                (Err(e), Some(feed)) => {
                    tracing::debug!(site = %m.name(), error = %e, "serving a site's last known state");
                    all.extend(cached(feed.as_ref()));
                }
                (Err(e), None) => failed = Some(e),
            }
        }
        match failed {
            Some(e) if all.is_empty() => Err(e),
            _ => Ok(all),
        }
    }

    /// The names every answering site gives (in `answers`), each once,
    /// sorted.
    fn names(answers: Vec<Result<Vec<String>, Error>>) -> Result<Vec<String>, Error> {
        let names: BTreeSet<String> = super::any_answer(answers)?.into_iter().collect();
        Ok(names.into_iter().collect())
    }
}

fn by_namespace_and_name(a: &Arc<ObservedCluster>, b: &Arc<ObservedCluster>) -> std::cmp::Ordering {
    (a.metadata.namespace.as_str(), a.metadata.name.as_str())
        .cmp(&(b.metadata.namespace.as_str(), b.metadata.name.as_str()))
}

#[async_trait::async_trait]
impl ClusterStore for Fleet {
    async fn namespaces(&self, request_id: &RequestId) -> Result<Vec<String>, Error> {
        Self::names(ask_each!(self, m => m.store.namespaces(request_id)))
    }

    async fn namespaces_matching(&self, patterns: &[&str], request_id: &RequestId) -> Result<Vec<String>, Error> {
        Self::names(ask_each!(self, m => m.store.namespaces_matching(patterns, request_id)))
    }

    async fn namespace_count(&self, request_id: &RequestId) -> Result<usize, Error> {
        Ok(self.namespaces(request_id).await?.len())
    }

    async fn create(
        &self,
        cluster: &Authorized<ClusterRef>,
        rendered: &RenderedCluster,
        dry_run: bool,
        request_id: &RequestId,
    ) -> Result<ObservedCluster, Error> {
        let m = match cluster.site() {
            Some(site) => self.member(site)?,
            None => self.default_member(),
        };
        m.answering()?;
        m.store.create(cluster, rendered, dry_run, request_id).await
    }

    async fn get(&self, cluster: &ClusterRef, request_id: &RequestId) -> Result<Arc<ObservedCluster>, Error> {
        let m = self.locate(cluster, request_id).await?;
        if m.down().is_some()
            && let Some(found) = m
                .feed
                .as_ref()
                .and_then(|f| f.cluster(cluster.namespace(), cluster.name()))
        {
            return Ok(found);
        }
        m.store.get(cluster, request_id).await
    }

    async fn get_latest(&self, cluster: &ClusterRef, request_id: &RequestId) -> Result<Arc<ObservedCluster>, Error> {
        let m = self.locate(cluster, request_id).await?;
        m.answering()?;
        m.store.get_latest(cluster, request_id).await
    }

    async fn list(&self, namespace: Option<&str>, request_id: &RequestId) -> Result<Vec<Arc<ObservedCluster>>, Error> {
        self.merged(ask_each!(self, m => m.store.list(namespace, request_id)), |f| {
            f.clusters(namespace)
        })
    }

    async fn list_page(
        &self,
        namespaces: &[String],
        after: Option<(&str, &str)>,
        limit: usize,
        request_id: &RequestId,
    ) -> Result<Vec<Arc<ObservedCluster>>, Error> {
        // Each site's first `limit` after `after`, merged: the fleet's
        // first `limit` are among them.
        let cached = |f: &dyn ClusterFeed| {
            let mut page: Vec<Arc<ObservedCluster>> = namespaces
                .iter()
                .flat_map(|ns| f.clusters(Some(ns)))
                .filter(|c| {
                    after
                        .is_none_or(|(ns, name)| (c.metadata.namespace.as_str(), c.metadata.name.as_str()) > (ns, name))
                })
                .collect();
            page.sort_by(by_namespace_and_name);
            page.truncate(limit);
            page
        };
        let mut page = self.merged(
            ask_each!(self, m => m.store.list_page(namespaces, after, limit, request_id)),
            cached,
        )?;
        page.sort_by(by_namespace_and_name);
        page.truncate(limit);
        Ok(page)
    }

    async fn pods_of(&self, namespace: &str, clusters: &[&str], request_id: &RequestId) -> Result<PodsOf, Error> {
        let mut groups: Vec<Vec<Arc<ObservedPod>>> = vec![Vec::new(); clusters.len()];
        let answers = ask_each!(self, m => m.store.pods_of(namespace, clusters, request_id));
        let mut failed = None;
        for (m, answer) in self.members.iter().zip(answers) {
            let of = match (answer, &m.feed) {
                (Ok(of), _) => Some(of),
                (Err(_), Some(_)) => None,
                (Err(e), None) => {
                    failed = Some(e);
                    continue;
                }
            };
            for (i, group) in groups.iter_mut().enumerate() {
                match (&of, &m.feed) {
                    (Some(of), _) => group.extend(of.of(i).iter().cloned()),
                    (None, Some(feed)) => {
                        if let Some(name) = clusters.get(i) {
                            group.extend(feed.pods(namespace, name));
                        }
                    }
                    (None, None) => {}
                }
            }
        }
        if let Some(e) = failed
            && groups.iter().all(Vec::is_empty)
        {
            return Err(e);
        }
        let mut of = PodsOf::with_capacity(clusters.len());
        for mut group in groups {
            group.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
            of.push_cluster(group);
        }
        Ok(of)
    }

    fn feed(&self) -> Option<Arc<dyn ClusterFeed>> {
        let sites: Option<Vec<_>> = self
            .members
            .iter()
            .map(|m| Some((m.name().clone(), m.feed.clone()?, m.health.clone())))
            .collect();
        sites.map(|sites| {
            Arc::new(super::feed::FleetFeed::new(sites, self.site_changes.clone())) as Arc<dyn ClusterFeed>
        })
    }

    async fn list_latest(&self, namespace: &str, request_id: &RequestId) -> Result<Vec<Arc<ObservedCluster>>, Error> {
        self.merged(ask_each!(self, m => m.store.list_latest(namespace, request_id)), |f| {
            f.clusters(Some(namespace))
        })
    }

    async fn pods(&self, namespace: &str, request_id: &RequestId) -> Result<Vec<Arc<ObservedPod>>, Error> {
        self.merged(ask_each!(self, m => m.store.pods(namespace, request_id)), |f| {
            f.clusters(Some(namespace))
                .iter()
                .flat_map(|c| f.pods(namespace, &c.metadata.name))
                .collect()
        })
    }

    async fn cluster_pods(&self, cluster: &ClusterRef, request_id: &RequestId) -> Result<Vec<Arc<ObservedPod>>, Error> {
        let m = self.locate(cluster, request_id).await?;
        if m.down().is_some()
            && let Some(feed) = &m.feed
        {
            return Ok(feed.pods(cluster.namespace(), cluster.name()));
        }
        m.store.cluster_pods(cluster, request_id).await
    }

    async fn cluster_events(
        &self,
        cluster: &ClusterRef,
        pods: &[&str],
        request_id: &RequestId,
    ) -> Result<Vec<Arc<ObservedEvent>>, Error> {
        let m = self.locate(cluster, request_id).await?;
        if m.down().is_some() {
            return Ok(Vec::new());
        }
        m.store.cluster_events(cluster, pods, request_id).await
    }

    async fn patch(
        &self,
        cluster: &Authorized<ClusterRef>,
        patch: &ClusterPatch,
        request_id: &RequestId,
    ) -> Result<ObservedCluster, Error> {
        let m = self.locate(cluster, request_id).await?;
        m.answering()?;
        m.store.patch(cluster, patch, request_id).await
    }

    async fn pod_log(
        &self,
        namespace: &str,
        pod: &str,
        options: &PodLogOptions,
        request_id: &RequestId,
    ) -> Result<String, Error> {
        if let Some(site) = &options.site {
            let m = self.member(site)?;
            m.answering()?;
            return m.store.pod_log(namespace, pod, options, request_id).await;
        }
        let mut last = None;
        for m in self.members.iter().filter(|m| m.down().is_none()) {
            match m.store.pod_log(namespace, pod, options, request_id).await {
                Err(e @ Error::NotFound { .. }) => last = Some(e),
                other => return other,
            }
        }
        Err(last.unwrap_or_else(|| Error::Unavailable("no site answers".into())))
    }

    async fn follow_pod_log(
        &self,
        namespace: &str,
        pod: &str,
        options: &PodLogOptions,
        request_id: &RequestId,
    ) -> Result<BoxStream<'static, Result<String, Error>>, Error> {
        if let Some(site) = &options.site {
            let m = self.member(site)?;
            m.answering()?;
            return m.store.follow_pod_log(namespace, pod, options, request_id).await;
        }
        let mut last = None;
        for m in self.members.iter().filter(|m| m.down().is_none()) {
            match m.store.follow_pod_log(namespace, pod, options, request_id).await {
                Err(e @ Error::NotFound { .. }) => last = Some(e),
                other => return other,
            }
        }
        Err(last.unwrap_or_else(|| Error::Unavailable("no site answers".into())))
    }

    async fn delete(
        &self,
        cluster: &Authorized<ClusterRef>,
        only_if: Option<&Preconditions>,
        request_id: &RequestId,
    ) -> Result<(), Error> {
        let m = self.locate(cluster, request_id).await?;
        m.answering()?;
        m.store.delete(cluster, only_if, request_id).await
    }

    async fn apply_companion(
        &self,
        cluster: &Authorized<ClusterRef>,
        kind: Companion,
        name: &str,
        object: &serde_json::Value,
        request_id: &RequestId,
    ) -> Result<(), Error> {
        let m = self.locate(cluster, request_id).await?;
        m.answering()?;
        m.store.apply_companion(cluster, kind, name, object, request_id).await
    }

    async fn network_policies(
        &self,
        namespace: &str,
        request_id: &RequestId,
    ) -> Result<std::collections::HashMap<String, crate::manifest::HeldPolicy>, Error> {
        // A site that cannot answer for this namespace (no Role there, an
        // error) keeps no other site's policies from being kept.
        let answers = ask_each!(self, m => m.store.network_policies(namespace, request_id));
        let mut all = std::collections::HashMap::new();
        let mut failed = None;
        let mut answered = false;
        for (m, answer) in self.members.iter().zip(answers) {
            match answer {
                Ok(policies) => {
                    answered = true;
                    all.extend(policies);
                }
                Err(e) => {
                    tracing::debug!(site = %m.name(), %namespace, error = %e, "a site's NetworkPolicies were not read");
                    failed = Some(e);
                }
            }
        }
        match failed {
            Some(e) if !answered => Err(e),
            _ => Ok(all),
        }
    }

    async fn delete_companion(
        &self,
        cluster: &Authorized<ClusterRef>,
        kind: Companion,
        name: &str,
        request_id: &RequestId,
    ) -> Result<(), Error> {
        // A companion staged before its cluster was made: in the site the
        // create named.
        let m = match cluster.site() {
            Some(site) => self.member(site)?,
            None => self.locate(cluster, request_id).await?,
        };
        m.answering()?;
        m.store.delete_companion(cluster, kind, name, request_id).await
    }

    async fn create_event(
        &self,
        cluster: &Authorized<ClusterRef>,
        event: &serde_json::Value,
        request_id: &RequestId,
    ) -> Result<(), Error> {
        let m = self.locate(cluster, request_id).await?;
        m.answering()?;
        m.store.create_event(cluster, event, request_id).await
    }

    async fn watch(
        &self,
        cluster: &ClusterRef,
        request_id: &RequestId,
    ) -> Result<BoxStream<'static, Result<ClusterChange, Error>>, Error> {
        let m = self.locate(cluster, request_id).await?;
        m.answering()?;
        m.store.watch(cluster, request_id).await
    }

    /// Ready once every site has been checked, one answers, and every
    /// site that answers has listed (its cache is complete). The health
    /// task checks the sites; this reads what it found.
    async fn ping(&self) -> Result<(), Error> {
        if !self.checked_all() {
            return Err(Error::Unavailable("the sites' health is not known yet".into()));
        }
        let answering: Vec<&super::Member> = self.members.iter().filter(|m| m.down().is_none()).collect();
        if answering.is_empty() {
            return Err(Error::Unavailable("no site's Kubernetes API answers".into()));
        }
        let listed = futures::future::join_all(answering.iter().map(|m| m.store.ping())).await;
        listed.into_iter().collect()
    }

    fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for m in &self.members {
            problems.extend(
                m.store
                    .problems()
                    .into_iter()
                    .map(|p| format!("site {}: {p}", m.name())),
            );
            if let Some(since) = m.down() {
                problems.push(format!(
                    "site {}: unavailable since {since}: its Kubernetes API does not answer",
                    m.name()
                ));
            }
        }
        problems
    }

    async fn sites_for(&self, namespace: &str, request_id: &RequestId) -> Vec<(SiteSpec, SiteFacts)> {
        let facts = self.members.iter().map(|m| async move {
            let up = m.down().is_none();
            let namespace_exists = up
                && matches!(
                    m.store.namespaces_matching(&[namespace], request_id).await,
                    Ok(found) if found.iter().any(|n| n == namespace)
                );
            (m.spec.clone(), SiteFacts { up, namespace_exists })
        });
        futures::future::join_all(facts).await
    }

    fn site_health(&self) -> Vec<(Site, Option<jiff::Timestamp>)> {
        self.members.iter().map(|m| (m.name().clone(), m.down())).collect()
    }
}
