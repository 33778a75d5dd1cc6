//! [`Client`]: the krayne API over gRPC.

use std::{sync::Arc, time::Duration};

use backon::{BackoffBuilder as _, ExponentialBuilder, Retryable as _};
use futures::{Stream, StreamExt as _, TryStreamExt as _, stream, stream::BoxStream};
use tonic::{
    Code, Request,
    service::interceptor::InterceptedService,
    transport::{Certificate, Channel, ClientTlsConfig, Endpoint},
};

use crate::{
    ClientError, ClusterConfig, FieldViolation,
    auth::{Bearer, TokenProvider},
    proto::{
        self, ClusterDetails, ClusterInfo, ClusterSpec, NamespaceAccess, WhoAmIResponse,
        audit_service_client::AuditServiceClient, cluster_service_client::ClusterServiceClient,
        create_cluster_request::Source, identity_service_client::IdentityServiceClient,
        job_service_client::JobServiceClient, ray_job_service_client::RayJobServiceClient,
        tunnel_service_client::TunnelServiceClient, version_service_client::VersionServiceClient,
    },
};

type Service = InterceptedService<Channel, Bearer>;

/// Calls `$method` on a fresh `$service` client, retrying while the server
/// is unavailable.
macro_rules! retrying {
    ($self:ident, $service:ident, $method:ident, $message:expr) => {
        $self
            .idempotent(|| {
                let mut client = $self.$service();
                let request = $self.request($message.clone());
                async move { client.$method(request).await }
            })
            .await
    };
}

/// How idempotent calls are retried while the server is unavailable
/// (restarting, or a load balancer between replicas): exponential backoff
/// with full jitter, so many clients do not retry in lockstep.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Retries after the first attempt; 0 turns retrying off.
    pub max_retries: usize,
    /// Delay before the first retry.
    pub min_delay: Duration,
    /// Longest delay between two attempts.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 6,
            min_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(3),
        }
    }
}

impl RetryPolicy {
    /// No retries.
    pub fn none() -> Self {
        Self {
            max_retries: 0,
            ..Self::default()
        }
    }

    pub(crate) fn backoff(&self) -> ExponentialBuilder {
        ExponentialBuilder::default()
            .with_min_delay(self.min_delay)
            .with_max_delay(self.max_delay)
            .with_max_times(self.max_retries)
            .with_jitter()
    }
}

/// Settings for a [`Client`]; [`Client::builder`] starts one.
#[must_use]
pub struct ClientBuilder {
    url: String,
    connect_timeout: Duration,
    request_timeout: Duration,
    retry: RetryPolicy,
    token: Option<Arc<dyn TokenProvider>>,
    ca_pem: Option<Vec<u8>>,
}

impl ClientBuilder {
    /// Timeout for opening the connection (default 5 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Timeout for each unary call (default 30 s); waits have their own.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Retry policy for idempotent calls.
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// A fixed bearer token.
    pub fn token(self, token: impl Into<String>) -> Self {
        let token = token.into();
        self.token_provider(move || Ok(token.clone()))
    }

    /// A token provider, asked before every call.
    pub fn token_provider(mut self, provider: impl TokenProvider) -> Self {
        self.token = Some(Arc::new(provider));
        self
    }

    /// Trusts this PEM CA for `https` URLs besides the system's roots.
    pub fn ca_certificate(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.ca_pem = Some(pem.into());
        self
    }

    fn endpoint(&self) -> Result<Endpoint, ClientError> {
        let invalid =
            |why: String| ClientError::new(Code::InvalidArgument, format!("server URL {:?}: {why}", self.url));
        let mut endpoint = Endpoint::from_shared(self.url.clone())
            .map_err(|e| invalid(e.to_string()))?
            .connect_timeout(self.connect_timeout)
            .tcp_nodelay(true)
            .user_agent(concat!("krayne-client/", env!("CARGO_PKG_VERSION")))
            .map_err(|e| invalid(e.to_string()))?;
        match endpoint.uri().scheme_str() {
            Some("http") => {}
            Some("https") => {
                let mut tls = ClientTlsConfig::new().with_native_roots();
                if let Some(pem) = &self.ca_pem {
                    tls = tls.ca_certificate(Certificate::from_pem(pem));
                }
                endpoint = endpoint.tls_config(tls).map_err(|e| invalid(e.to_string()))?;
            }
            _ => return Err(invalid("must start with http:// or https://".into())),
        }
        Ok(endpoint)
    }

    /// Connects now; fails with `Unavailable` when the server cannot be
    /// reached.
    pub async fn connect(self) -> Result<Client, ClientError> {
        let channel = self.endpoint()?.connect().await?;
        Ok(self.client(channel))
    }

    /// Connects on the first call (and reconnects after failures), so a
    /// server that is not up yet is only an error when a call is made.
    pub fn connect_lazy(self) -> Result<Client, ClientError> {
        let channel = self.endpoint()?.connect_lazy();
        Ok(self.client(channel))
    }

    fn client(self, channel: Channel) -> Client {
        Client {
            server: self.url.trim_end_matches('/').into(),
            channel,
            bearer: Bearer::new(self.token),
            request_timeout: self.request_timeout,
            retry: self.retry,
        }
    }
}

/// What [`Client::create_with`] sends: a structured spec or a Krayne config
/// document.
#[derive(Debug, Clone)]
#[expect(
    clippy::large_enum_variant,
    reason = "made once per create and moved into the request; boxing would change the SDK's variants"
)]
pub enum ClusterSource {
    /// A structured spec.
    Spec(ClusterSpec),
    /// A config document, validated by the server as a file would be.
    Config(ClusterConfig),
}

impl From<ClusterSpec> for ClusterSource {
    fn from(spec: ClusterSpec) -> Self {
        Self::Spec(spec)
    }
}

impl From<ClusterConfig> for ClusterSource {
    fn from(config: ClusterConfig) -> Self {
        Self::Config(config)
    }
}

/// Options of [`Client::create_with`].
#[derive(Debug, Clone, Copy, Default)]
pub struct CreateOptions {
    /// Validate and return the manifest; create nothing.
    pub dry_run: bool,
    /// Wait up to this long for the cluster to be ready.
    pub wait: Option<Duration>,
    /// What the server does with keys below the top level it does not know
    /// and values it converts as Krayne does (`"2"` for an integer):
    /// `Strict` refuses them, `Warn` (the default, also `Unspecified`)
    /// returns them in [`Created::warnings`], `Ignore` accepts them
    /// silently. Only a config document can hold them; a structured spec
    /// cannot.
    pub field_validation: proto::FieldValidation,
    /// Wait in the namespace's line when the cluster does not fit its
    /// quota: it is created suspended, status `queued` (with
    /// `queue_position` and `queue_reason`), and admitted in order as quota
    /// frees; with `wait`, the wait goes through the line. `None`: as the
    /// namespace's queueing policy says (by default, `ResourceExhausted`).
    pub queue: Option<bool>,
}

/// A created cluster (or, with `dry_run`, the would-be one).
#[derive(Debug, Clone)]
pub struct Created {
    /// The summary: after waiting, the ready cluster's.
    pub cluster: ClusterInfo,
    /// The RayCluster manifest sent to Kubernetes.
    pub manifest: serde_json::Value,
    /// What the server accepted but reports (mode `Warn`): each ignored
    /// key or converted value at its field path.
    pub warnings: Vec<FieldViolation>,
    /// Why it went (or, for a dry run, would go) to its site
    /// (`cluster.site`), when the server fronts several.
    pub placement: Option<String>,
}

/// How long [`Client::keep`] keeps a cluster from its lifecycle policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// For this long from now (whole seconds).
    For(Duration),
    /// Until this time (whole seconds).
    Until(std::time::SystemTime),
}

/// A worker-group resize; unset fields keep their value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scale {
    /// Worker group to resize.
    pub group: String,
    /// New desired workers.
    pub replicas: Option<u32>,
    /// New autoscaler lower bound.
    pub min_replicas: Option<u32>,
    /// New autoscaler upper bound.
    pub max_replicas: Option<u32>,
}

/// Filters of [`Client::audit_events`]; empty fields match everything.
#[derive(Debug, Clone, Default)]
pub struct AuditQuery {
    /// Namespace.
    pub namespace: String,
    /// Actor subject.
    pub actor: String,
    /// Action, e.g. `cluster.create`.
    pub action: String,
    /// `pending`, `succeeded`, `failed`, `denied`, `invalid` or `unknown`.
    pub outcome: String,
    /// Cluster name.
    pub cluster: String,
    /// The client's own request id (`x-correlation-id`).
    pub correlation_id: String,
    /// Events at or after this time.
    pub since: Option<prost_types::Timestamp>,
    /// Events before this time.
    pub until: Option<prost_types::Timestamp>,
    /// Events per page (0: the server's default).
    pub page_size: u32,
}

/// A connection to a krayne server. Cheap to clone; clones share the
/// connection.
#[derive(Clone, Debug)]
pub struct Client {
    /// The server's URL, without a trailing `/`.
    server: Arc<str>,
    channel: Channel,
    bearer: Bearer,
    request_timeout: Duration,
    pub(crate) retry: RetryPolicy,
}

impl Client {
    /// Settings for a client of the server at `url` (`http://…` or `https://…`).
    pub fn builder(url: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            url: url.into(),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
            retry: RetryPolicy::default(),
            token: None,
            ca_pem: None,
        }
    }

    /// Connects with default settings and no token; add one with
    /// [`with_token`](Self::with_token).
    pub async fn connect(url: impl Into<String>) -> Result<Self, ClientError> {
        Self::builder(url).connect().await
    }

    /// The same connection, authenticating with `token`.
    #[must_use]
    pub fn with_token(self, token: impl Into<String>) -> Self {
        let token = token.into();
        self.with_token_provider(move || Ok(token.clone()))
    }

    /// The same connection, asking `provider` for a token before each call.
    #[must_use]
    pub fn with_token_provider(mut self, provider: impl TokenProvider) -> Self {
        self.bearer = Bearer::new(Some(Arc::new(provider)));
        self
    }

    /// The server's URL, as given (without a trailing `/`).
    pub fn server(&self) -> &str {
        &self.server
    }

    pub(crate) fn clusters(&self) -> ClusterServiceClient<Service> {
        ClusterServiceClient::with_interceptor(self.channel.clone(), self.bearer.clone())
    }

    pub(crate) fn jobs_service(&self) -> JobServiceClient<Service> {
        JobServiceClient::with_interceptor(self.channel.clone(), self.bearer.clone())
    }

    pub(crate) fn rayjobs_service(&self) -> RayJobServiceClient<Service> {
        RayJobServiceClient::with_interceptor(self.channel.clone(), self.bearer.clone())
    }

    pub(crate) fn tunnels(&self) -> TunnelServiceClient<Service> {
        TunnelServiceClient::with_interceptor(self.channel.clone(), self.bearer.clone())
    }

    fn identity(&self) -> IdentityServiceClient<Service> {
        IdentityServiceClient::with_interceptor(self.channel.clone(), self.bearer.clone())
    }

    /// Without the token: the version is asked before (and without)
    /// logging in, and a broken token provider must not hide it.
    fn versions(&self) -> VersionServiceClient<Channel> {
        VersionServiceClient::new(self.channel.clone())
    }

    pub(crate) fn usages(&self) -> krayne_proto::v1::usage_service_client::UsageServiceClient<Service> {
        krayne_proto::v1::usage_service_client::UsageServiceClient::with_interceptor(
            self.channel.clone(),
            self.bearer.clone(),
        )
    }

    fn audit(&self) -> AuditServiceClient<Service> {
        AuditServiceClient::with_interceptor(self.channel.clone(), self.bearer.clone())
    }

    pub(crate) fn request<T>(&self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        request.set_timeout(self.request_timeout);
        request
    }

    /// Runs an idempotent call, retrying while the server is unavailable.
    pub(crate) async fn idempotent<T, F, Fut>(&self, call: F) -> Result<T, ClientError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, tonic::Status>>,
    {
        let mut call = call;
        (|| {
            let fut = call();
            async move { fut.await.map_err(ClientError::from) }
        })
        .retry(self.retry.backoff())
        .sleep(tokio::time::sleep)
        .when(ClientError::is_unavailable)
        .await
    }

    /// Creates a cluster from a structured spec.
    pub async fn create(&self, spec: ClusterSpec) -> Result<ClusterInfo, ClientError> {
        Ok(self.create_with(spec, CreateOptions::default()).await?.cluster)
    }

    /// Creates a cluster from a spec or config document, optionally as a dry
    /// run or waiting until it is ready. Not retried: a create that reached
    /// the server before the connection broke would fail as a duplicate.
    pub async fn create_with(
        &self,
        source: impl Into<ClusterSource>,
        options: CreateOptions,
    ) -> Result<Created, ClientError> {
        let source = match source.into() {
            ClusterSource::Spec(spec) => Source::Spec(spec),
            ClusterSource::Config(config) => Source::ConfigYaml(config.tree().to_string()),
        };
        let response = self
            .clusters()
            .create_cluster(self.request(proto::CreateClusterRequest {
                source: Some(source),
                dry_run: options.dry_run,
                field_validation: options.field_validation.into(),
                queue: options.queue,
            }))
            .await?
            .into_inner();
        let cluster = response
            .cluster
            .ok_or_else(|| ClientError::new(Code::Internal, "the server sent no cluster"))?;
        let manifest = match response.manifest {
            Some(m) => crate::json::to_json(&m)?,
            None => serde_json::Value::Null,
        };
        let cluster = match options.wait {
            Some(timeout) if !options.dry_run => {
                self.wait_until_ready(&cluster.namespace, &cluster.name, timeout)
                    .await?
            }
            _ => cluster,
        };
        let placement = response.placement;
        let warnings = response
            .warnings
            .into_iter()
            .map(|w| FieldViolation {
                field: w.field,
                description: w.description,
            })
            .collect();
        Ok(Created {
            cluster,
            manifest,
            warnings,
            placement,
        })
    }

    /// One cluster's summary.
    pub async fn get(&self, namespace: &str, name: &str) -> Result<ClusterInfo, ClientError> {
        let message = proto::GetClusterRequest {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        };
        let response = retrying!(self, clusters, get_cluster, message)?;
        Ok(response.into_inner())
    }

    /// One page of clusters; `namespace` `None` lists every namespace the
    /// caller may see.
    pub async fn list_page(
        &self,
        namespace: Option<&str>,
        page_size: u32,
        page_token: &str,
    ) -> Result<proto::ListClustersResponse, ClientError> {
        let message = proto::ListClustersRequest {
            namespace: namespace.unwrap_or_default().to_owned(),
            page_size,
            page_token: page_token.to_owned(),
        };
        let response = retrying!(self, clusters, list_clusters, message)?;
        Ok(response.into_inner())
    }

    /// Every cluster in `namespace` (or in every namespace the caller may
    /// see), fetching pages as the stream is read.
    pub fn list(&self, namespace: Option<&str>) -> impl Stream<Item = Result<ClusterInfo, ClientError>> + '_ {
        self.list_paged(namespace, 0)
    }

    /// [`list`](Self::list), asking for `page_size` clusters per call (0:
    /// the server's default).
    pub fn list_paged(
        &self,
        namespace: Option<&str>,
        page_size: u32,
    ) -> impl Stream<Item = Result<ClusterInfo, ClientError>> + '_ {
        let namespace = namespace.map(str::to_owned);
        pages(move |token| {
            let namespace = namespace.clone();
            async move {
                let page = self.list_page(namespace.as_deref(), page_size, &token).await?;
                Ok((page.clusters, page.next_page_token))
            }
        })
    }

    /// Every cluster, collected.
    pub async fn list_all(&self, namespace: Option<&str>) -> Result<Vec<ClusterInfo>, ClientError> {
        self.list(namespace).try_collect().await
    }

    /// A cluster's summary, shape, pods and recent events.
    pub async fn describe(&self, namespace: &str, name: &str) -> Result<ClusterDetails, ClientError> {
        let message = proto::DescribeClusterRequest {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        };
        let mut details = retrying!(self, clusters, describe_cluster, message)?.into_inner();
        for url in details.proxy_urls.values_mut() {
            self.on_server(url);
        }
        Ok(details)
    }

    /// Resizes one worker group. Setting a size is idempotent, so this is
    /// retried while the server is unavailable.
    pub async fn scale(&self, namespace: &str, name: &str, scale: Scale) -> Result<ClusterInfo, ClientError> {
        let message = proto::ScaleClusterRequest {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            worker_group: scale.group,
            replicas: scale.replicas,
            min_replicas: scale.min_replicas,
            max_replicas: scale.max_replicas,
        };
        let response = retrying!(self, clusters, scale_cluster, message)?;
        response
            .into_inner()
            .cluster
            .ok_or_else(|| ClientError::new(Code::Internal, "the server sent no cluster"))
    }

    /// Suspends a cluster: KubeRay deletes its pods and keeps it, holding
    /// none of the quota's CPUs, memory or GPUs. Idempotent, so retried
    /// while the server is unavailable.
    pub async fn suspend(&self, namespace: &str, name: &str) -> Result<ClusterInfo, ClientError> {
        let message = proto::SuspendClusterRequest {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        };
        let response = retrying!(self, clusters, suspend_cluster, message)?;
        response
            .into_inner()
            .cluster
            .ok_or_else(|| ClientError::new(Code::Internal, "the server sent no cluster"))
    }

    /// Resumes a suspended cluster (its pods are admitted through the
    /// quota: `ResourceExhausted` with the numbers when they would not
    /// fit); [`Self::wait`] for it to be ready. Idempotent, so retried
    /// while the server is unavailable.
    pub async fn resume(&self, namespace: &str, name: &str) -> Result<ClusterInfo, ClientError> {
        self.resume_with(namespace, name, None).await
    }

    /// [`Self::resume`], saying whether to wait in the namespace's line
    /// when its pods do not fit (`Some(true)`: status `queued`, admitted in
    /// order as quota frees; `None`: as the namespace's policy says).
    pub async fn resume_with(
        &self,
        namespace: &str,
        name: &str,
        queue: Option<bool>,
    ) -> Result<ClusterInfo, ClientError> {
        let message = proto::ResumeClusterRequest {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            queue,
        };
        let response = retrying!(self, clusters, resume_cluster, message)?;
        response
            .into_inner()
            .cluster
            .ok_or_else(|| ClientError::new(Code::Internal, "the server sent no cluster"))
    }

    /// Keeps a cluster from its namespace's lifecycle policy (idle
    /// suspension, lifetime) for a while, within the policy's `keep_max`:
    /// `InvalidArgument` past it, `FailedPrecondition` when the namespace
    /// has no policy or allows no keeping. The summary's `kept_until` says
    /// until when. Retried while the server is unavailable (a retry asks
    /// again from then).
    pub async fn keep(&self, namespace: &str, name: &str, keep: Keep) -> Result<ClusterInfo, ClientError> {
        let keep = match keep {
            Keep::For(d) => proto::keep_cluster_request::Keep::For(format!("{}s", d.as_secs().max(1))),
            Keep::Until(t) => {
                let since_epoch = t
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_err(|_| ClientError::new(Code::InvalidArgument, "keep until a time before 1970"))?;
                proto::keep_cluster_request::Keep::Until(prost_types::Timestamp {
                    seconds: i64::try_from(since_epoch.as_secs()).unwrap_or(i64::MAX),
                    nanos: 0,
                })
            }
        };
        let message = proto::KeepClusterRequest {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            keep: Some(keep),
        };
        let response = retrying!(self, clusters, keep_cluster, message)?;
        response
            .into_inner()
            .cluster
            .ok_or_else(|| ClientError::new(Code::Internal, "the server sent no cluster"))
    }

    /// Deletes a cluster. Not retried: a retry after a delete that went
    /// through would report `NotFound`.
    pub async fn delete(&self, namespace: &str, name: &str) -> Result<(), ClientError> {
        self.clusters()
            .delete_cluster(self.request(proto::DeleteClusterRequest {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            }))
            .await?;
        Ok(())
    }

    /// The cluster's summary each time its status changes, starting with
    /// the current one; ends after `ready`, or with `DeadlineExceeded` when
    /// `timeout` passes (rounded up to whole seconds, at most an hour). A
    /// watch the server ends with `Unavailable` (a replica shutting down)
    /// is resumed with the time left, as the retry policy allows.
    pub async fn watch(
        &self,
        namespace: &str,
        name: &str,
        timeout: Duration,
    ) -> Result<impl Stream<Item = Result<ClusterInfo, ClientError>> + use<>, ClientError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let first = self.open_watch(namespace, name, timeout).await?;
        let resume = crate::watch::Resume::new(self.clone(), namespace, name, deadline, first);
        Ok(resume.into_stream(self.retry.backoff().build()))
    }

    /// One `WaitCluster` stream, with `timeout` for the server.
    pub(crate) async fn open_watch(
        &self,
        namespace: &str,
        name: &str,
        timeout: Duration,
    ) -> Result<BoxStream<'static, Result<ClusterInfo, ClientError>>, ClientError> {
        let seconds = u32::try_from(timeout.as_secs() + u64::from(timeout.subsec_nanos() > 0))
            .unwrap_or(u32::MAX)
            .clamp(1, 3600);
        let message = proto::WaitClusterRequest {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            timeout_seconds: seconds,
        };
        let stream = self
            .idempotent(|| {
                let mut request = Request::new(message.clone());
                // The server ends the stream at the deadline; leave it room to say so.
                request.set_timeout(Duration::from_secs(u64::from(seconds)) + self.request_timeout);
                let mut client = self.clusters();
                async move { client.wait_cluster(request).await }
            })
            .await?
            .into_inner();
        let updates = stream.map(|item| {
            item.map_err(ClientError::from)?
                .cluster
                .ok_or_else(|| ClientError::new(Code::Internal, "the server sent no cluster"))
        });
        Ok(updates.boxed())
    }

    /// Waits until the cluster is `ready` and returns its summary; on
    /// timeout the error is `DeadlineExceeded` and names the last status.
    /// Like [`Client::watch`], it resumes a wait a server ends with
    /// `Unavailable`.
    pub async fn wait_until_ready(
        &self,
        namespace: &str,
        name: &str,
        timeout: Duration,
    ) -> Result<ClusterInfo, ClientError> {
        let mut stream = std::pin::pin!(self.watch(namespace, name, timeout).await?);
        let mut last = None;
        while let Some(info) = stream.try_next().await? {
            last = Some(info);
        }
        last.filter(|info| info.status == "ready")
            .ok_or_else(|| ClientError::new(Code::Unknown, "the wait ended before the cluster was ready"))
    }

    /// The server's version, the commit it was built from, its API version
    /// and the features it has on. Needs no token.
    pub async fn server_version(&self) -> Result<proto::GetVersionResponse, ClientError> {
        let response = retrying!(self, versions, get_version, proto::GetVersionRequest {})?;
        Ok(response.into_inner())
    }

    /// Who the server thinks the caller is, and what it may do.
    pub async fn whoami(&self) -> Result<WhoAmIResponse, ClientError> {
        let response = retrying!(self, identity, who_am_i, proto::WhoAmIRequest {})?;
        Ok(response.into_inner())
    }

    /// A namespace's team quota: each limit, usage and what remains
    /// (viewer).
    pub async fn quota(&self, namespace: &str) -> Result<proto::NamespaceQuota, ClientError> {
        let message = proto::GetQuotaRequest {
            namespace: namespace.to_owned(),
        };
        Ok(retrying!(self, identity, get_quota, message)?.into_inner())
    }

    /// Every namespace the caller may use, with its role.
    pub async fn list_namespaces(&self) -> Result<Vec<NamespaceAccess>, ClientError> {
        pages(|token| async move {
            let message = proto::ListNamespacesRequest {
                page_size: 0,
                page_token: token,
            };
            let page = retrying!(self, identity, list_namespaces, message)?.into_inner();
            Ok((page.namespaces, page.next_page_token))
        })
        .try_collect()
        .await
    }

    /// One page of audit events, newest first.
    pub async fn audit_page(
        &self,
        query: &AuditQuery,
        page_token: &str,
    ) -> Result<proto::ListAuditEventsResponse, ClientError> {
        let message = proto::ListAuditEventsRequest {
            namespace: query.namespace.clone(),
            actor: query.actor.clone(),
            action: query.action.clone(),
            outcome: query.outcome.clone(),
            cluster: query.cluster.clone(),
            correlation_id: query.correlation_id.clone(),
            since: query.since,
            until: query.until,
            page_size: query.page_size,
            page_token: page_token.to_owned(),
        };
        let response = retrying!(self, audit, list_audit_events, message)?;
        Ok(response.into_inner())
    }

    /// Audit events matching `query`, newest first, fetching pages as the
    /// stream is read.
    pub fn audit_events(&self, query: AuditQuery) -> impl Stream<Item = Result<proto::AuditEvent, ClientError>> + '_ {
        pages(move |token| {
            let query = query.clone();
            async move {
                let page = self.audit_page(&query, &token).await?;
                Ok((page.events, page.next_page_token))
            }
        })
    }
}

/// Items of every page, following `next_page_token` until it is empty.
fn pages<'a, T, F, Fut>(fetch: F) -> impl Stream<Item = Result<T, ClientError>> + 'a
where
    T: 'a,
    F: Fn(String) -> Fut + 'a,
    Fut: Future<Output = Result<(Vec<T>, String), ClientError>> + 'a,
{
    stream::try_unfold((Some(String::new()), fetch), |(token, fetch)| async move {
        let Some(token) = token else {
            return Ok::<_, ClientError>(None);
        };
        let (items, next) = fetch(token).await?;
        let next = (!next.is_empty()).then_some(next);
        Ok(Some((stream::iter(items.into_iter().map(Ok)), (next, fetch))))
    })
    .try_flatten()
}
