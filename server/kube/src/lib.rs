//! The only code that talks to Kubernetes: RayClusters, their pods and
//! events, through kube-rs, into the domain's observed views.
#![forbid(unsafe_code)]

use krayne_core::{domain, manifest};

mod cache;
mod errors;
mod issuer;
mod leader;
mod logs;
mod metered;
mod upstream;

pub use cache::{CacheOptions, CachedClusterStore, WHOLE_LISTS_UP_TO};
pub use issuer::{ClusterIssuerDocuments, ClusterTokenReviews};
/// A Kubernetes client (kube-rs), for wiring adapters together.
pub use kube::Client;
pub use leader::{LeaseLeadership, LeaseTerms};
pub use upstream::{DirectUpstream, PortForwardUpstream};

use std::{future::Future, sync::Arc, time::Duration};

use futures::{StreamExt as _, TryStreamExt as _, stream::BoxStream};
use http::{HeaderValue, Method, Request, header};
use kube::core::{
    WatchEvent,
    params::{DeleteParams, GetParams, ListParams, Patch, PatchParams, PostParams, WatchParams},
    request::Request as KubeRequest,
};
use serde::{Deserialize, de::DeserializeOwned};
use serde_json::Value;

use crate::{
    domain::{
        Authorized, ClusterChange, ClusterPatch, ClusterRef, ClusterStore, Error, ObservedCluster, ObservedEvent,
        ObservedPod, ObservedRayJob, PodLogOptions, Preconditions, RayJobStore, RenderedCluster, RequestId,
    },
    manifest::{KUBERAY_API_VERSION, RAYCLUSTERS, RAYJOBS},
};

/// Header carrying krayne's request id to the Kubernetes API.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// Longest a wait's watch may run before Kubernetes closes it.
const WATCH_TIMEOUT_SECONDS: u32 = 3600;

/// Kubernetes (or the sandbox) through a kube-rs client.
#[derive(Clone)]
pub struct KubeClusterStore {
    client: Client,
    timeout: Duration,
    site: domain::Site,
}

/// How long a Kubernetes call may take when no timeout is set.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Deserialize)]
struct ObjectList<T> {
    items: Vec<T>,
    /// Where the next page starts, on a paged list.
    #[serde(default)]
    metadata: ListMeta,
}

#[derive(Deserialize, Default)]
struct ListMeta {
    #[serde(default, rename = "continue")]
    continue_: Option<String>,
}

#[derive(Deserialize)]
struct Named {
    metadata: NamedMeta,
}

#[derive(Deserialize)]
struct NamedMeta {
    name: String,
}

fn rayclusters(namespace: Option<&str>) -> KubeRequest {
    KubeRequest::new(match namespace {
        Some(ns) => format!("/apis/{KUBERAY_API_VERSION}/namespaces/{ns}/{RAYCLUSTERS}"),
        None => format!("/apis/{KUBERAY_API_VERSION}/{RAYCLUSTERS}"),
    })
}

fn rayjobs(namespace: Option<&str>) -> KubeRequest {
    KubeRequest::new(match namespace {
        Some(ns) => format!("/apis/{KUBERAY_API_VERSION}/namespaces/{ns}/{RAYJOBS}"),
        None => format!("/apis/{KUBERAY_API_VERSION}/{RAYJOBS}"),
    })
}

/// The field manager of what krayne applies.
const FIELD_MANAGER: &str = "krayne";

/// Where a companion kind lives in `namespace`.
/// NetworkPolicies a page when the keeper lists a namespace's.
const POLICIES_A_PAGE: u32 = 500;

fn companions(kind: domain::Companion, namespace: &str) -> KubeRequest {
    match kind {
        domain::Companion::NetworkPolicy => KubeRequest::new(format!(
            "/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies"
        )),
        domain::Companion::Secret => core(namespace, "secrets"),
    }
}

fn core(namespace: &str, plural: &str) -> KubeRequest {
    KubeRequest::new(format!("/api/v1/namespaces/{namespace}/{plural}"))
}

/// A kube client for `config` whose every request is counted in
/// `krayne_kube_requests_total` (by verb, resource and outcome).
pub fn client(config: kube::Config) -> Result<Client, String> {
    let builder =
        kube::client::ClientBuilder::try_from(config).map_err(|e| format!("cannot build a Kubernetes client: {e}"))?;
    Ok(builder.with_layer(&metered::Metered).build())
}

/// A client of the API server at `url` with no credentials (the sandbox).
pub fn client_for_url(url: &str) -> Result<Client, String> {
    let uri = url.parse().map_err(|e| format!("{url:?} is not a URL: {e}"))?;
    client(kube::Config::new(uri))
}

/// Kubernetes behind the watch cache, or read-through when `cache` is
/// `None`.
///
/// # Errors
/// When the cache's namespaces file cannot be read.
pub fn cluster_store(api: KubeClusterStore, cache: Option<&CacheOptions>) -> Result<Arc<dyn ClusterStore>, String> {
    Ok(match cache {
        Some(options) => Arc::new(CachedClusterStore::start(api, options)?),
        None => {
            tracing::info!("watch cache off: every read goes to Kubernetes");
            Arc::new(api)
        }
    })
}

/// Connects with `kubeconfig` (and `context`), or in-cluster configuration
/// or the default kubeconfig when none is given.
pub async fn connect(kubeconfig: Option<&std::path::Path>, context: Option<&str>) -> Result<Client, String> {
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| format!("--kubeconfig {}: {e}", path.display()))?;
            let options = kube::config::KubeConfigOptions {
                context: context.map(str::to_owned),
                ..Default::default()
            };
            kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(|e| format!("--kubeconfig: {e}"))?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| format!("no Kubernetes configuration found (in-cluster or kubeconfig): {e}"))?,
    };
    client(config)
}

impl KubeClusterStore {
    /// Uses `client` for every call, each bounded by [`DEFAULT_TIMEOUT`].
    pub fn new(client: Client) -> Self {
        Self {
            client,
            timeout: DEFAULT_TIMEOUT,
            site: domain::Site::local(),
        }
    }

    /// Names the site this Kubernetes is (docs/sites.md): every cluster
    /// and RayJob read through it says so.
    #[must_use]
    pub fn with_site(mut self, site: domain::Site) -> Self {
        self.site = site;
        self
    }

    /// The site this Kubernetes is.
    pub fn site(&self) -> &domain::Site {
        &self.site
    }

    /// `cluster`, saying it was read from this site.
    fn sited(&self, mut cluster: ObservedCluster) -> ObservedCluster {
        cluster.site = self.site.clone();
        cluster
    }

    /// `rayjob`, saying it was read from this site.
    fn sited_job(&self, mut rayjob: ObservedRayJob) -> ObservedRayJob {
        rayjob.site = self.site.clone();
        rayjob
    }

    /// Bounds each call (and the start of each watch) by `timeout`: a
    /// slow API server makes requests fail with `DeadlineExceeded`
    /// rather than hang until the client gives up.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The client calls are made with.
    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    async fn bounded<T>(&self, call: impl Future<Output = Result<T, kube::Error>>) -> Result<T, Error> {
        match tokio::time::timeout(self.timeout, call).await {
            Ok(result) => result.map_err(errors::translate),
            Err(_) => Err(self.too_slow()),
        }
    }

    /// A call that took longer than the timeout.
    fn too_slow(&self) -> Error {
        Error::DeadlineExceeded(format!(
            "Kubernetes did not answer within {}s",
            self.timeout.as_secs_f64()
        ))
    }

    async fn call<T: DeserializeOwned>(
        &self,
        request: Result<Request<Vec<u8>>, kube::core::request::Error>,
        request_id: &RequestId,
    ) -> Result<T, Error> {
        let mut request = request.map_err(|e| Error::Internal(format!("building a Kubernetes request: {e}")))?;
        if let Ok(v) = HeaderValue::from_str(request_id) {
            request.headers_mut().insert(REQUEST_ID_HEADER, v);
        }
        self.bounded(self.client.request::<T>(request)).await
    }

    /// Pods of `namespace` that match `selector`.
    async fn ray_pods(
        &self,
        namespace: &str,
        selector: &str,
        request_id: &RequestId,
    ) -> Result<Vec<Arc<ObservedPod>>, Error> {
        let list: ObjectList<ObservedPod> = self
            .call(
                core(namespace, "pods").list(&ListParams::default().labels(selector)),
                request_id,
            )
            .await?;
        let site = &self.site;
        Ok(list
            .items
            .into_iter()
            .map(|mut p| {
                p.site = site.clone();
                Arc::new(p)
            })
            .collect())
    }

    async fn events_of<T: Clone + DeserializeOwned + Send + 'static>(
        &self,
        request: KubeRequest,
        selector: ListParams,
        request_id: &RequestId,
    ) -> Result<BoxStream<'static, Result<WatchEvent<T>, Error>>, Error> {
        let mut params = WatchParams::default()
            .timeout(WATCH_TIMEOUT_SECONDS)
            .disable_bookmarks();
        params.label_selector = selector.label_selector;
        params.field_selector = selector.field_selector;
        let mut req = request
            .watch(&params, "0")
            .map_err(|e| Error::Internal(format!("building a Kubernetes watch: {e}")))?;
        // "0": start with the current objects as ADDED, then follow.
        if let Ok(v) = HeaderValue::from_str(request_id) {
            req.headers_mut().insert(REQUEST_ID_HEADER, v);
        }
        let stream = self.bounded(self.client.request_events::<T>(req)).await?;
        Ok(stream.map(|r| r.map_err(errors::translate)).boxed())
    }
}

/// Kueue's Workloads in `namespace` (`kueue.x-k8s.io/v1beta2`).
fn workloads(namespace: &str) -> KubeRequest {
    KubeRequest::new(format!("/apis/kueue.x-k8s.io/v1beta2/namespaces/{namespace}/workloads"))
}

#[async_trait::async_trait]
impl domain::KueueReads for KubeClusterStore {
    async fn workloads(
        &self,
        namespace: &str,
        uids: &[String],
        request_id: &RequestId,
    ) -> Result<Vec<domain::kueue::ObservedWorkload>, Error> {
        if uids.is_empty() {
            return Ok(Vec::new());
        }
        let selector = format!("{} in ({})", domain::kueue::JOB_UID_LABEL, uids.join(","));
        let list: ObjectList<Value> = self
            .call(
                workloads(namespace).list(&ListParams::default().labels(&selector)),
                request_id,
            )
            .await?;
        Ok(list
            .items
            .iter()
            .filter_map(domain::kueue::ObservedWorkload::read)
            .collect())
    }

    async fn pending(
        &self,
        namespace: &str,
        queue: &str,
        request_id: &RequestId,
    ) -> Result<Vec<domain::kueue::PendingWorkload>, Error> {
        let path = format!(
            "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/{namespace}/localqueues/{queue}/pendingworkloads"
        );
        let request = Request::builder()
            .method(Method::GET)
            .uri(format!("{path}?limit={}", domain::kueue::MAX_PENDING_READ))
            .body(Vec::new())
            .map_err(kube::core::request::Error::BuildRequest);
        let summary: Value = self.call(request, request_id).await?;
        Ok(domain::kueue::read_pending(&summary))
    }
}

#[async_trait::async_trait]
impl RayJobStore for KubeClusterStore {
    async fn create_rayjob(
        &self,
        rayjob: &Authorized<ClusterRef>,
        manifest: &Value,
        dry_run: bool,
        request_id: &RequestId,
    ) -> Result<ObservedRayJob, Error> {
        let named = (
            manifest["metadata"]["namespace"].as_str(),
            manifest["metadata"]["name"].as_str(),
        );
        if named != (Some(rayjob.namespace()), Some(rayjob.name())) {
            return Err(Error::Internal(format!(
                "asked to create RayJob {rayjob} from a manifest of another"
            )));
        }
        let body = serde_json::to_vec(manifest).map_err(|e| Error::Internal(e.to_string()))?;
        let params = PostParams {
            dry_run,
            ..PostParams::default()
        };
        self.call(rayjobs(Some(rayjob.namespace())).create(&params, body), request_id)
            .await
            .map(|j| self.sited_job(j))
    }

    async fn get_rayjob(&self, rayjob: &ClusterRef, request_id: &RequestId) -> Result<ObservedRayJob, Error> {
        self.call(
            rayjobs(Some(rayjob.namespace())).get(rayjob.name(), &GetParams::default()),
            request_id,
        )
        .await
        .map(|j| self.sited_job(j))
    }

    async fn list_rayjobs(
        &self,
        namespace: Option<&str>,
        request_id: &RequestId,
    ) -> Result<Vec<ObservedRayJob>, Error> {
        let list: ObjectList<ObservedRayJob> = self
            .call(rayjobs(namespace).list(&ListParams::default()), request_id)
            .await?;
        Ok(list.items.into_iter().map(|j| self.sited_job(j)).collect())
    }

    async fn patch_rayjob(
        &self,
        rayjob: &Authorized<ClusterRef>,
        patch: &ClusterPatch,
        request_id: &RequestId,
    ) -> Result<ObservedRayJob, Error> {
        let (namespace, name) = (rayjob.namespace(), rayjob.name());
        let uri = format!("/apis/{KUBERAY_API_VERSION}/namespaces/{namespace}/{RAYJOBS}/{name}");
        self.call(json_patch(uri, patch), request_id)
            .await
            .map(|j| self.sited_job(j))
    }

    async fn delete_rayjob(
        &self,
        rayjob: &Authorized<ClusterRef>,
        only_if: Option<&Preconditions>,
        request_id: &RequestId,
    ) -> Result<(), Error> {
        // Kubernetes' garbage collector removes the cluster after; a RayJob
        // made again under the name gets a cluster of another name.
        let params = delete_params(only_if);
        let request = rayjobs(Some(rayjob.namespace())).delete(rayjob.name(), &params);
        self.call::<Value>(request, request_id).await.map(|_| ())
    }
}

#[async_trait::async_trait]
impl ClusterStore for KubeClusterStore {
    async fn namespaces(&self, request_id: &RequestId) -> Result<Vec<String>, Error> {
        let list: ObjectList<Named> = self
            .call(
                KubeRequest::new("/api/v1/namespaces").list(&ListParams::default()),
                request_id,
            )
            .await?;
        Ok(list.items.into_iter().map(|n| n.metadata.name).collect())
    }

    async fn create(
        &self,
        cluster: &Authorized<ClusterRef>,
        rendered: &RenderedCluster,
        dry_run: bool,
        request_id: &RequestId,
    ) -> Result<ObservedCluster, Error> {
        let namespace = rendered.namespace();
        if (namespace, rendered.name()) != (cluster.namespace(), cluster.name()) {
            return Err(Error::Internal(format!(
                "asked to create {cluster} from a manifest of another"
            )));
        }
        let body = serde_json::to_vec(rendered.manifest()).map_err(|e| Error::Internal(e.to_string()))?;
        let params = PostParams {
            dry_run,
            ..PostParams::default()
        };
        self.call(rayclusters(Some(namespace)).create(&params, body), request_id)
            .await
            .map(|c| self.sited(c))
    }

    async fn get(&self, cluster: &ClusterRef, request_id: &RequestId) -> Result<Arc<ObservedCluster>, Error> {
        self.call(
            rayclusters(Some(cluster.namespace())).get(cluster.name(), &GetParams::default()),
            request_id,
        )
        .await
        .map(|c| Arc::new(self.sited(c)))
    }

    async fn list(&self, namespace: Option<&str>, request_id: &RequestId) -> Result<Vec<Arc<ObservedCluster>>, Error> {
        let list: ObjectList<ObservedCluster> = self
            .call(rayclusters(namespace).list(&ListParams::default()), request_id)
            .await?;
        Ok(list.items.into_iter().map(|c| Arc::new(self.sited(c))).collect())
    }

    async fn pods(&self, namespace: &str, request_id: &RequestId) -> Result<Vec<Arc<ObservedPod>>, Error> {
        self.ray_pods(namespace, manifest::LABEL_CLUSTER, request_id).await
    }

    async fn cluster_pods(&self, cluster: &ClusterRef, request_id: &RequestId) -> Result<Vec<Arc<ObservedPod>>, Error> {
        let selector = format!("{}={}", manifest::LABEL_CLUSTER, cluster.name());
        self.ray_pods(cluster.namespace(), &selector, request_id).await
    }

    async fn cluster_events(
        &self,
        cluster: &ClusterRef,
        pods: &[&str],
        request_id: &RequestId,
    ) -> Result<Vec<Arc<ObservedEvent>>, Error> {
        // One list and a filter rather than a list per pod: the cache
        // serves describe, this only while it cannot.
        let list: ObjectList<ObservedEvent> = self
            .call(
                core(cluster.namespace(), "events").list(&ListParams::default()),
                request_id,
            )
            .await?;
        let about = |e: &ObservedEvent| {
            e.involved_object
                .name
                .as_deref()
                .is_some_and(|n| n == cluster.name() || pods.contains(&n))
        };
        Ok(list.items.into_iter().filter(about).map(Arc::new).collect())
    }

    async fn pod_log(
        &self,
        namespace: &str,
        pod: &str,
        options: &PodLogOptions,
        request_id: &RequestId,
    ) -> Result<String, Error> {
        let mut request = logs::request(namespace, pod, options, false)?;
        if let Ok(v) = HeaderValue::from_str(request_id) {
            request.headers_mut().insert(REQUEST_ID_HEADER, v);
        }
        match tokio::time::timeout(self.timeout, self.client.request_text(request)).await {
            Ok(result) => result.map_err(logs::translate),
            Err(_) => Err(self.too_slow()),
        }
    }

    async fn follow_pod_log(
        &self,
        namespace: &str,
        pod: &str,
        options: &PodLogOptions,
        request_id: &RequestId,
    ) -> Result<BoxStream<'static, Result<String, Error>>, Error> {
        let mut request = logs::request(namespace, pod, options, true)?;
        if let Ok(v) = HeaderValue::from_str(request_id) {
            request.headers_mut().insert(REQUEST_ID_HEADER, v);
        }
        let body = match tokio::time::timeout(self.timeout, self.client.request_stream(request)).await {
            Ok(result) => result.map_err(logs::translate)?,
            Err(_) => return Err(self.too_slow()),
        };
        Ok(logs::chunks(body))
    }

    async fn patch(
        &self,
        cluster: &Authorized<ClusterRef>,
        patch: &ClusterPatch,
        request_id: &RequestId,
    ) -> Result<ObservedCluster, Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let uri = format!("/apis/{KUBERAY_API_VERSION}/namespaces/{namespace}/{RAYCLUSTERS}/{name}");
        self.call(json_patch(uri, patch), request_id)
            .await
            .map(|c| self.sited(c))
    }

    async fn delete(
        &self,
        cluster: &Authorized<ClusterRef>,
        only_if: Option<&Preconditions>,
        request_id: &RequestId,
    ) -> Result<(), Error> {
        let params = delete_params(only_if);
        let request = rayclusters(Some(cluster.namespace())).delete(cluster.name(), &params);
        self.call::<Value>(request, request_id).await.map(|_| ())
    }

    async fn apply_companion(
        &self,
        cluster: &Authorized<ClusterRef>,
        kind: domain::Companion,
        name: &str,
        object: &Value,
        request_id: &RequestId,
    ) -> Result<(), Error> {
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let request = companions(kind, cluster.namespace()).patch(name, &params, &Patch::Apply(object));
        self.call::<Value>(request, request_id).await.map(|_| ())
    }

    async fn network_policies(
        &self,
        namespace: &str,
        request_id: &RequestId,
    ) -> Result<std::collections::HashMap<String, manifest::HeldPolicy>, Error> {
        let mut held = std::collections::HashMap::new();
        let mut token: Option<String> = None;
        loop {
            let mut params = ListParams::default().limit(POLICIES_A_PAGE);
            if let Some(token) = &token {
                params = params.continue_token(token);
            }
            let request = companions(domain::Companion::NetworkPolicy, namespace).list(&params);
            let page: ObjectList<Value> = self.call(request, request_id).await?;
            for policy in &page.items {
                if let Some(name) = policy["metadata"]["name"].as_str() {
                    held.insert(name.to_owned(), manifest::HeldPolicy::of(policy));
                }
            }
            match page.metadata.continue_.filter(|t| !t.is_empty()) {
                Some(next) => token = Some(next),
                None => return Ok(held),
            }
        }
    }

    async fn delete_companion(
        &self,
        cluster: &Authorized<ClusterRef>,
        kind: domain::Companion,
        name: &str,
        request_id: &RequestId,
    ) -> Result<(), Error> {
        let request = companions(kind, cluster.namespace()).delete(name, &DeleteParams::background());
        match self.call::<Value>(request, request_id).await {
            Ok(_) | Err(Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn create_event(
        &self,
        cluster: &Authorized<ClusterRef>,
        event: &Value,
        request_id: &RequestId,
    ) -> Result<(), Error> {
        let namespace = cluster.namespace();
        let body = serde_json::to_vec(event).map_err(|e| Error::Internal(e.to_string()))?;
        let request =
            KubeRequest::new(format!("/api/v1/namespaces/{namespace}/events")).create(&PostParams::default(), body);
        self.call::<Value>(request, request_id).await.map(|_| ())
    }

    async fn watch(
        &self,
        cluster: &ClusterRef,
        request_id: &RequestId,
    ) -> Result<BoxStream<'static, Result<ClusterChange, Error>>, Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let by_name = ListParams::default().fields(&format!("metadata.name={name}"));
        let (site, pod_site) = (self.site.clone(), self.site.clone());
        let clusters = self
            .events_of::<ObservedCluster>(rayclusters(Some(namespace)), by_name, request_id)
            .await?
            .try_filter_map(move |e| {
                let site = site.clone();
                async move {
                    Ok(match e {
                        WatchEvent::Added(mut c) | WatchEvent::Modified(mut c) => {
                            c.site = site;
                            Some(ClusterChange::Cluster(Box::new(c)))
                        }
                        WatchEvent::Deleted(_) => Some(ClusterChange::ClusterDeleted),
                        WatchEvent::Bookmark(_) => None,
                        WatchEvent::Error(s) => return Err(errors::translate(kube::Error::Api(s))),
                    })
                }
            });
        let of_cluster = ListParams::default().labels(&format!("{}={name}", manifest::LABEL_CLUSTER));
        let pods = self
            .events_of::<ObservedPod>(core(namespace, "pods"), of_cluster, request_id)
            .await?
            .try_filter_map(move |e| {
                let site = pod_site.clone();
                async move {
                    Ok(match e {
                        WatchEvent::Added(mut p) | WatchEvent::Modified(mut p) => {
                            p.site = site;
                            Some(ClusterChange::Pod(Box::new(p)))
                        }
                        WatchEvent::Deleted(p) => Some(ClusterChange::PodDeleted(p.metadata.name)),
                        WatchEvent::Bookmark(_) => None,
                        WatchEvent::Error(s) => return Err(errors::translate(kube::Error::Api(s))),
                    })
                }
            });
        Ok(futures::stream::select(clusters, pods).boxed())
    }

    async fn ping(&self) -> Result<(), Error> {
        self.bounded(self.client.apiserver_version()).await.map(|_| ())
    }

    fn problems(&self) -> Vec<String> {
        errors::rbac_problem().into_iter().collect()
    }
}

/// A JSON patch (RFC 6902) of the object at `uri`.
fn json_patch(uri: String, patch: &ClusterPatch) -> Result<Request<Vec<u8>>, kube::core::request::Error> {
    let body = serde_json::to_vec(patch.as_json()).map_err(kube::core::request::Error::SerializeBody)?;
    Request::builder()
        .method(Method::PATCH)
        .uri(uri)
        .header(header::CONTENT_TYPE, "application/json-patch+json")
        .header(header::ACCEPT, "application/json")
        .body(body)
        .map_err(kube::core::request::Error::BuildRequest)
}

/// A background delete, conditional on `only_if` when given.
fn delete_params(only_if: Option<&Preconditions>) -> DeleteParams {
    let mut params = DeleteParams::background();
    params.preconditions = only_if.map(|p| kube::api::Preconditions {
        uid: Some(p.uid.clone()),
        resource_version: Some(p.resource_version.clone()),
    });
    params
}
