//! The resource types the sandbox serves.

/// A resource type of the simulated API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Resource {
    /// `core/v1` namespaces (cluster-scoped).
    Namespace,
    /// `core/v1` pods.
    Pod,
    /// `core/v1` services.
    Service,
    /// `core/v1` events.
    Event,
    /// `core/v1` serviceaccounts (tokens through `serviceaccounts/token`).
    ServiceAccount,
    /// `ray.io/v1` rayclusters.
    RayCluster,
    /// `ray.io/v1` rayjobs: a job with a cluster of its own.
    RayJob,
    /// `networking.k8s.io/v1` networkpolicies: stored and served, not
    /// enforced (the sandbox has no network plugin).
    NetworkPolicy,
    /// `coordination.k8s.io/v1` leases: leader election, with
    /// server-side apply's field ownership (what lease managers rely on).
    Lease,
    /// `core/v1` secrets: Ray token Secrets the simulated KubeRay hands
    /// its pods.
    Secret,
    /// `kueue.x-k8s.io/v1beta2` resourceflavors (cluster-scoped).
    ResourceFlavor,
    /// `kueue.x-k8s.io/v1beta2` clusterqueues (cluster-scoped).
    ClusterQueue,
    /// `kueue.x-k8s.io/v1beta2` localqueues.
    LocalQueue,
    /// `kueue.x-k8s.io/v1beta2` workloads: one per RayCluster Kueue
    /// manages.
    Workload,
}

impl Resource {
    /// Every resource, in discovery order.
    pub const ALL: [Self; 14] = [
        Self::Namespace,
        Self::Pod,
        Self::Service,
        Self::Event,
        Self::ServiceAccount,
        Self::RayCluster,
        Self::RayJob,
        Self::NetworkPolicy,
        Self::Lease,
        Self::Secret,
        Self::ResourceFlavor,
        Self::ClusterQueue,
        Self::LocalQueue,
        Self::Workload,
    ];

    /// API group; empty for core.
    pub fn group(self) -> &'static str {
        match self {
            Self::RayCluster | Self::RayJob => "ray.io",
            Self::NetworkPolicy => "networking.k8s.io",
            Self::Lease => "coordination.k8s.io",
            Self::ResourceFlavor | Self::ClusterQueue | Self::LocalQueue | Self::Workload => "kueue.x-k8s.io",
            Self::Namespace | Self::Pod | Self::Service | Self::Event | Self::ServiceAccount | Self::Secret => "",
        }
    }

    /// `apiVersion` of its objects.
    pub fn api_version(self) -> &'static str {
        match self {
            Self::RayCluster | Self::RayJob => "ray.io/v1",
            Self::NetworkPolicy => "networking.k8s.io/v1",
            Self::Lease => "coordination.k8s.io/v1",
            Self::ResourceFlavor | Self::ClusterQueue | Self::LocalQueue | Self::Workload => "kueue.x-k8s.io/v1beta2",
            Self::Namespace | Self::Pod | Self::Service | Self::Event | Self::ServiceAccount | Self::Secret => "v1",
        }
    }

    /// Plural name in URLs.
    pub fn plural(self) -> &'static str {
        match self {
            Self::Namespace => "namespaces",
            Self::Pod => "pods",
            Self::Service => "services",
            Self::Event => "events",
            Self::ServiceAccount => "serviceaccounts",
            Self::RayCluster => "rayclusters",
            Self::RayJob => "rayjobs",
            Self::NetworkPolicy => "networkpolicies",
            Self::Lease => "leases",
            Self::Secret => "secrets",
            Self::ResourceFlavor => "resourceflavors",
            Self::ClusterQueue => "clusterqueues",
            Self::LocalQueue => "localqueues",
            Self::Workload => "workloads",
        }
    }

    /// `kind` of its objects.
    pub fn kind(self) -> &'static str {
        match self {
            Self::Namespace => "Namespace",
            Self::Pod => "Pod",
            Self::Service => "Service",
            Self::Event => "Event",
            Self::ServiceAccount => "ServiceAccount",
            Self::RayCluster => "RayCluster",
            Self::RayJob => "RayJob",
            Self::NetworkPolicy => "NetworkPolicy",
            Self::Lease => "Lease",
            Self::Secret => "Secret",
            Self::ResourceFlavor => "ResourceFlavor",
            Self::ClusterQueue => "ClusterQueue",
            Self::LocalQueue => "LocalQueue",
            Self::Workload => "Workload",
        }
    }

    /// Short names kubectl accepts.
    pub fn short_names(self) -> &'static [&'static str] {
        match self {
            Self::Namespace => &["ns"],
            Self::Pod => &["po"],
            Self::Service => &["svc"],
            Self::Event => &["ev"],
            Self::ServiceAccount => &["sa"],
            Self::RayCluster | Self::RayJob => &[],
            Self::NetworkPolicy => &["netpol"],
            Self::Lease | Self::Secret => &[],
            Self::ResourceFlavor => &["rf"],
            Self::ClusterQueue => &["cq"],
            Self::LocalQueue => &["lq", "queue", "queues"],
            Self::Workload => &["wl"],
        }
    }

    /// Whether objects live in a namespace.
    pub fn namespaced(self) -> bool {
        !matches!(self, Self::Namespace | Self::ResourceFlavor | Self::ClusterQueue)
    }

    /// Whether writes to the main resource ignore `status` (it has a
    /// `status` subresource).
    pub fn has_status_subresource(self) -> bool {
        matches!(
            self,
            Self::RayCluster | Self::RayJob | Self::Pod | Self::ClusterQueue | Self::LocalQueue | Self::Workload
        )
    }

    /// Whether a CustomResourceDefinition defines it (KubeRay's): no
    /// strategic merge patch, and an update must name its resourceVersion.
    pub fn is_custom(self) -> bool {
        matches!(
            self,
            Self::RayCluster
                | Self::RayJob
                | Self::ResourceFlavor
                | Self::ClusterQueue
                | Self::LocalQueue
                | Self::Workload
        )
    }

    /// Looks a plural up within a group.
    pub fn from_plural(group: &str, plural: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|r| r.group() == group && r.plural() == plural)
    }
}
