//! Command line and environment (`KRAYNE_*`) of `krayne-server`.

use std::{net::SocketAddr, path::PathBuf};

use clap::{Args, Parser, Subcommand};

/// krayne: a multi-tenant control plane for Ray clusters on Kubernetes.
#[derive(Debug, Parser)]
#[command(name = "krayne-server", version, about, propagate_version = true)]
pub struct Cli {
    /// Log filter, e.g. `info` or `krayne_server=debug` (RUST_LOG syntax).
    #[arg(long, global = true, env = "KRAYNE_LOG", default_value = "info")]
    pub log: String,
    /// Log as JSON lines instead of text.
    #[arg(long, global = true, env = "KRAYNE_LOG_JSON")]
    pub log_json: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the API against a Kubernetes cluster.
    Serve(Box<ServeArgs>),
    /// Try krayne with nothing installed: a simulated Kubernetes, the
    /// server, development tokens, and ready-to-paste commands.
    #[cfg(feature = "sandbox")]
    Sandbox(SandboxArgs),
    /// Print the OpenAPI document of the REST API.
    Openapi,
    /// Development tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Apply the audit database's migrations and exit (run it as the
    /// schema's owner, before `serve` starts with a role that may only
    /// append to the audit log).
    Migrate(MigrateArgs),
    /// Audit log maintenance.
    #[command(subcommand)]
    Audit(AuditCommand),
}

/// The audit database.
#[derive(Debug, Clone, Args)]
pub struct DatabaseArgs {
    /// Audit database: `postgres://user:password@host/db`, or `sqlite://path`
    /// (a file, created if missing).
    #[arg(
        long,
        env = "KRAYNE_DATABASE_URL",
        default_value = "sqlite://krayne-audit.db",
        hide_env_values = true
    )]
    pub database_url: String,
    /// File holding the database URL, read instead of `--database-url` and
    /// re-read every few seconds: a rotated password (a Secret mounted as a
    /// volume) is used by new connections without a restart.
    #[arg(long, env = "KRAYNE_DATABASE_URL_FILE")]
    pub database_url_file: Option<PathBuf>,
    /// CA certificate file (PEM) to verify the Postgres server's
    /// certificate and host name against (`sslmode=verify-full`).
    /// `sslmode=require` alone encrypts but verifies nothing.
    #[arg(long, env = "KRAYNE_DATABASE_CA_FILE")]
    pub database_ca_file: Option<PathBuf>,
    /// Largest connection pool.
    #[arg(long, env = "KRAYNE_DATABASE_MAX_CONNECTIONS", default_value_t = 10)]
    pub database_max_connections: u32,
    /// Longest a statement may run, in seconds.
    #[arg(long, env = "KRAYNE_DATABASE_STATEMENT_TIMEOUT_SECONDS", default_value_t = 5)]
    pub database_statement_timeout_seconds: u64,
    /// Longest to wait for a connection, in seconds; past it a mutation is
    /// refused (503) rather than made without its audit row.
    #[arg(long, env = "KRAYNE_DATABASE_ACQUIRE_TIMEOUT_SECONDS", default_value_t = 1)]
    pub database_acquire_timeout_seconds: u64,
}

/// `krayne-server migrate`.
#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// The database, reached as the owner of its schema.
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// Grant this Postgres role what `serve` needs and no more: read and
    /// append audit rows, write their outcomes, keep heartbeats and
    /// admission leases (no DELETE, TRUNCATE or DDL on the audit log).
    #[arg(long, env = "KRAYNE_MIGRATE_GRANT_TO", value_name = "ROLE")]
    pub grant_to: Option<String>,
}

/// `krayne-server audit …`.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Delete audit rows older than a duration (the retention job).
    Prune(PruneArgs),
}

/// `krayne-server audit prune`.
#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Age of the rows to delete, e.g. `90d`, `2160h`.
    #[arg(long)]
    pub older_than: String,
    /// Rows deleted per statement, oldest first: each statement stays
    /// short (within the statement timeout), however large the backlog.
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub batch_size: u32,
    /// The database.
    #[command(flatten)]
    pub database: DatabaseArgs,
}

/// Listeners, limits and browser access.
#[derive(Debug, Clone, Args)]
pub struct HttpArgs {
    /// Address of the API (REST and gRPC).
    #[arg(long, env = "KRAYNE_LISTEN", default_value = "0.0.0.0:8080")]
    pub listen: SocketAddr,
    /// Address of /healthz, /readyz and /metrics (no authentication).
    #[arg(long, env = "KRAYNE_OPS_LISTEN", default_value = "0.0.0.0:9090")]
    pub ops_listen: SocketAddr,
    /// Browser origins allowed to call the API (CORS), exact, comma-separated.
    #[arg(long = "cors-origin", env = "KRAYNE_CORS_ORIGINS", value_delimiter = ',')]
    pub cors_origins: Vec<String>,
    /// Largest request body in bytes.
    #[arg(long, env = "KRAYNE_BODY_LIMIT_BYTES", default_value_t = 1024 * 1024)]
    pub body_limit_bytes: usize,
    /// Longest a unary request may take, in seconds.
    #[arg(long, env = "KRAYNE_REQUEST_TIMEOUT_SECONDS", default_value_t = 30)]
    pub request_timeout_seconds: u64,
    /// Longest a client may take to send a request's headers, in seconds
    /// (HTTP/1; a slow sender's connection is closed).
    #[arg(long, env = "KRAYNE_HEADER_READ_TIMEOUT_SECONDS", default_value_t = 10)]
    pub header_read_timeout_seconds: u64,
    /// Largest request head (request line and headers) in bytes; larger
    /// ones are answered 431.
    #[arg(long, env = "KRAYNE_MAX_HEADER_BYTES", default_value_t = 64 * 1024)]
    pub max_header_bytes: usize,
    /// Requests per second each caller (token subject) may make, sustained;
    /// past it requests get 429 / RESOURCE_EXHAUSTED with a retry time.
    /// 0 turns the limit off.
    #[arg(long, env = "KRAYNE_RATE_LIMIT_PER_SECOND", default_value_t = 50)]
    pub rate_limit_per_second: u32,
    /// Requests a caller may make at once above the sustained rate.
    #[arg(long, env = "KRAYNE_RATE_LIMIT_BURST", default_value_t = 100)]
    pub rate_limit_burst: u32,
    /// Longest a request body (or gRPC request message) may take to
    /// arrive, in seconds; a body declared and never sent is cut off then.
    #[arg(long, env = "KRAYNE_REQUEST_BODY_TIMEOUT_SECONDS", default_value_t = 10)]
    pub request_body_timeout_seconds: u64,
    /// Refused authentications each source address may make per second,
    /// sustained; past it they are answered 429 / RESOURCE_EXHAUSTED.
    /// 0 turns the limit off.
    #[arg(long, env = "KRAYNE_UNAUTHENTICATED_RATE_PER_SECOND", default_value_t = 10)]
    pub unauthenticated_rate_per_second: u32,
    /// Refused authentications a source may make at once above that rate.
    #[arg(long, env = "KRAYNE_UNAUTHENTICATED_BURST", default_value_t = 30)]
    pub unauthenticated_burst: u32,
    /// Repeated refused authentications from one source within this many
    /// seconds are audited as one row with a count (the first at once).
    #[arg(long, env = "KRAYNE_AUDIT_DENIAL_WINDOW_SECONDS", default_value_t = 60)]
    pub audit_denial_window_seconds: u64,
    /// Proxies (addresses or CIDRs, comma-separated) whose
    /// `X-Forwarded-For` / `Forwarded` headers name the client; from any
    /// other peer those headers are ignored and the source is the peer.
    #[arg(long, env = "KRAYNE_TRUSTED_PROXIES", value_delimiter = ',')]
    pub trusted_proxies: Vec<String>,
    /// The forwarding header the trusted proxies write, `x-forwarded-for`
    /// or `forwarded`; the other is ignored (a client could write it).
    #[arg(long, env = "KRAYNE_TRUSTED_PROXY_HEADER", default_value = "x-forwarded-for")]
    pub trusted_proxy_header: String,
    /// Require a valid token for gRPC server reflection (health checks
    /// never need one).
    #[arg(long, env = "KRAYNE_GRPC_REFLECTION_REQUIRES_TOKEN")]
    pub grpc_reflection_requires_token: bool,
    /// On SIGTERM/SIGINT, how long to go on serving while `/readyz`
    /// answers 503 (draining), so that load balancers and endpoints stop
    /// sending new connections here first, in seconds. Behind a Kubernetes
    /// Service, a few seconds more than endpoint propagation takes.
    #[arg(long, env = "KRAYNE_SHUTDOWN_DELAY_SECONDS", default_value_t = 0)]
    pub shutdown_delay_seconds: u64,
    /// Then, how long in-flight requests and open tunnels may go on, in
    /// seconds (watches, waits and followed logs end at once, telling
    /// clients to reconnect).
    #[arg(long, env = "KRAYNE_SHUTDOWN_GRACE_SECONDS", default_value_t = 20)]
    pub shutdown_grace_seconds: u64,
    /// Largest working-dir package a job may upload to a cluster's head,
    /// in MiB (Ray's dashboard takes at most 100).
    #[arg(long, env = "KRAYNE_MAX_PACKAGE_MIB", default_value_t = 100)]
    pub max_package_mib: u64,
    /// Memory this replica gives to the answers of clusters' Ray heads
    /// being read at once, in MiB, at least 8 (one namespace's heads a
    /// quarter of it, or what one read may hold, about 5 MiB):
    /// a head is its tenant's, and what it sends is capped per endpoint
    /// (64 KiB to 4 MiB) and, all heads together, by this. A read that
    /// would pass it is refused (503; 429 past the namespace's quarter).
    #[arg(long, env = "KRAYNE_HEAD_ANSWER_BUDGET_MIB", default_value_t = crate::commands::DEFAULT_HEAD_ANSWER_BUDGET_MIB)]
    pub head_answer_budget_mib: u64,
    /// Live watches (`?watch=true`, `WatchClusters`) one caller may hold
    /// open at once.
    #[arg(long, env = "KRAYNE_MAX_WATCHES_PER_CALLER", default_value_t = 16)]
    pub max_watches_per_caller: usize,
    /// Live watches of one namespace all callers together may hold open
    /// (a team that makes ServiceAccounts shares it).
    #[arg(long, env = "KRAYNE_MAX_WATCHES_PER_NAMESPACE", default_value_t = 64)]
    pub max_watches_per_namespace: usize,
    /// Cluster changes kept so that watches can resume; a watch resuming
    /// from an older version is told to list again (410).
    #[arg(long, env = "KRAYNE_WATCH_HISTORY", default_value_t = 4096)]
    pub watch_history: usize,
    /// Events queued for one watch; a watch whose queue stays full for
    /// `--watch-stall-seconds` (its client reads too slowly) is ended.
    #[arg(long, env = "KRAYNE_WATCH_QUEUE", default_value_t = 256)]
    pub watch_queue: usize,
    /// How long a watch's full queue may wait for its client, in seconds.
    #[arg(long, env = "KRAYNE_WATCH_STALL_SECONDS", default_value_t = 10)]
    pub watch_stall_seconds: u64,
    /// How often an idle watch gets a bookmark, in seconds.
    #[arg(long, env = "KRAYNE_WATCH_BOOKMARK_SECONDS", default_value_t = 30)]
    pub watch_bookmark_seconds: u64,
    /// Tunnels (to clusters' services) one caller may hold open at once.
    #[arg(long, env = "KRAYNE_MAX_TUNNELS_PER_CALLER", default_value_t = 32)]
    pub max_tunnels_per_caller: usize,
    /// Tunnels all callers together may hold open into one namespace (a
    /// team that makes ServiceAccounts shares it).
    #[arg(long, env = "KRAYNE_MAX_TUNNELS_PER_NAMESPACE", default_value_t = 128)]
    pub max_tunnels_per_namespace: usize,
    /// Close a tunnel, a proxied WebSocket or a followed job log after this
    /// many seconds with nothing flowing either way.
    #[arg(long, env = "KRAYNE_TUNNEL_IDLE_TIMEOUT_SECONDS", default_value_t = 3600)]
    pub tunnel_idle_timeout_seconds: u64,
    /// How often the caller of an open tunnel, proxied WebSocket or
    /// followed job log is checked against the current team mapping, in
    /// seconds (a revoked grant ends the stream).
    #[arg(long, env = "KRAYNE_TUNNEL_REAUTHORIZE_SECONDS", default_value_t = 30)]
    pub tunnel_reauthorize_seconds: u64,
    /// The URL users reach this server at, e.g.
    /// `https://ml.example.com/krayne` behind an ingress that adds a path
    /// prefix: sign-in links are made from it, session cookies are
    /// `Secure` when it is https, and clusters' notebooks serve under its
    /// path. Default: the host each request was sent to, at the root.
    #[arg(long, env = "KRAYNE_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Serve each HTTP service of each cluster at a host of its own,
    /// `{service}--{cluster}--{namespace}.DOMAIN` (a wildcard DNS name
    /// and certificate pointing at krayne), so no cluster's pages share an
    /// origin with another's or with the API; browser sessions then live
    /// there. Without it every service is under the API's origin (path
    /// mode, `…/services/{service}/proxy/`), which also keeps working for
    /// bearer tokens.
    #[arg(long, env = "KRAYNE_APPS_DOMAIN")]
    pub apps_domain: Option<String>,
    /// Put a NetworkPolicy beside every cluster krayne creates, admitting
    /// connections to its pods only from each other and from krayne's own
    /// pods, which run in this namespace (with the labels of
    /// `--cluster-network-policy-pod-labels`). A head serves code
    /// execution (Ray's Jobs API) to whoever reaches it. A cluster whose
    /// policy cannot be created is deleted again (fail closed). Without
    /// it no policies are made. Policies are applied (server-side apply)
    /// and kept: clusters made before policies were on get theirs, a
    /// leftover policy of a deleted cluster of the same name is taken over.
    #[arg(long, env = "KRAYNE_CLUSTER_NETWORK_POLICY_NAMESPACE")]
    pub cluster_network_policy_namespace: Option<String>,
    /// More ingress rules for the clusters' NetworkPolicies, as a JSON
    /// array of NetworkPolicyIngressRules (`from`, `ports`), e.g. to let
    /// Prometheus scrape Ray's metrics port or the KubeRay operator reach
    /// the dashboard. Write each port's `protocol`: Kubernetes fills it in,
    /// and a rule without it reads as changed.
    #[arg(long, env = "KRAYNE_CLUSTER_NETWORK_POLICY_EXTRA_INGRESS", default_value = "[]")]
    pub cluster_network_policy_extra_ingress: String,
    /// How often every cluster's NetworkPolicy and Ray token Secret are
    /// checked and applied where missing or different, in seconds (and
    /// once at start).
    #[arg(long, env = "KRAYNE_COMPANIONS_INTERVAL_SECONDS", default_value_t = 600)]
    pub companions_interval_seconds: u64,
    /// How often the RayJobs krayne made (`krayne run`) are gone over, in
    /// seconds: a job is submitted to its cluster's head once it serves
    /// (and holds the job's working dir), and an ended job's driver log
    /// and exit code are kept before KubeRay deletes its cluster.
    #[arg(long, env = "KRAYNE_RAYJOBS_INTERVAL_SECONDS", default_value_t = 3)]
    pub rayjobs_interval_seconds: u64,
    /// How long a RayJob krayne made stays once its job has ended, in
    /// seconds (7 days by default), before it is deleted, audited as
    /// `rayjob.delete` by krayne (its cluster went after its TTL; its
    /// kept log goes with `krayne-server audit prune`); 0 keeps them until
    /// someone deletes them.
    #[arg(long, env = "KRAYNE_RAYJOB_RETENTION_SECONDS", default_value_t = 604_800)]
    pub rayjob_retention_seconds: u64,
    /// How long a cluster's head may stay unschedulable (no node has room)
    /// before a wait stops with that reason rather than run out its
    /// timeout, in seconds; 0 waits the whole timeout, for platforms whose
    /// node autoscaler adds nodes. Image pull back-offs and heads that
    /// crashed three times stop a wait at once.
    #[arg(long, env = "KRAYNE_WAIT_UNSCHEDULABLE_SECONDS", default_value_t = 60)]
    pub wait_unschedulable_seconds: u64,
    /// File holding the key (at least 32 bytes) clusters' Ray tokens are
    /// derived from; every replica needs the same one, and a changed key
    /// changes every cluster's token. With it, clusters krayne creates
    /// require Ray's token authentication (Ray ≥ 2.52; KubeRay ≥ 1.6) and
    /// krayne sends each its token; without it, they do not.
    #[arg(long, env = "KRAYNE_RAY_AUTH_KEY_FILE")]
    pub ray_auth_key_file: Option<PathBuf>,
    /// Labels of krayne's own pods (`key=value,…`) for the clusters'
    /// NetworkPolicies.
    #[arg(
        long,
        env = "KRAYNE_CLUSTER_NETWORK_POLICY_POD_LABELS",
        default_value = "app.kubernetes.io/name=krayne"
    )]
    pub cluster_network_policy_pod_labels: String,
    /// File holding the secret (at least 32 bytes) that signs browser
    /// sessions to clusters' services; every replica needs the same one.
    /// Without it this server issues no browser sessions (bearer tokens
    /// and tunnels still work).
    #[arg(long, env = "KRAYNE_SESSION_SECRET_FILE")]
    pub session_secret_file: Option<PathBuf>,
    /// How long a browser session lasts once its sign-in link is opened,
    /// in seconds (each request in it is still re-checked against the
    /// team mapping).
    #[arg(long, env = "KRAYNE_SESSION_TTL_SECONDS", default_value_t = 3600)]
    pub session_ttl_seconds: u64,
    /// How clusters' pods are secured: `krayne` as Krayne builds them (the
    /// image's user; the head's bootstrap installs what the image lacks
    /// with sudo, apt-get, pip and a download: passes the `baseline` Pod
    /// Security Standard and needs internet egress), or `restricted`
    /// (passes the `restricted` standard: uid 1000, no privilege
    /// escalation, all capabilities dropped, RuntimeDefault seccomp; the
    /// bootstrap installs nothing and needs no network, so use images with
    /// the services preinstalled; no SSH, which needs root).
    #[arg(long, env = "KRAYNE_CLUSTER_POD_SECURITY", value_enum, default_value = "krayne")]
    pub cluster_pod_security: ClusterPodSecurity,
    /// Ray image of pods that name none (`-gpu` is added for GPU pods); a
    /// config that names an image keeps it. Shown at `/.well-known/krayne`.
    /// Pin it by digest in production (`…@sha256:…`).
    #[arg(
        long,
        env = "KRAYNE_DEFAULT_RAY_IMAGE",
        default_value = krayne_core::manifest::DEFAULT_RAY_IMAGE
    )]
    pub default_ray_image: String,
    /// Ray image of GPU pods that name none; without it they get
    /// `--default-ray-image` with `-gpu` appended, which a digest-pinned
    /// image cannot take (so pin this one too).
    #[arg(long, env = "KRAYNE_DEFAULT_RAY_GPU_IMAGE")]
    pub default_ray_gpu_image: Option<String>,
}

/// `krayne-server serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Listeners and limits.
    #[command(flatten)]
    pub http: HttpArgs,
    /// Kubeconfig file; without it, in-cluster configuration or the default
    /// kubeconfig is used.
    #[arg(long, env = "KRAYNE_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context.
    #[arg(long, env = "KRAYNE_KUBE_CONTEXT")]
    pub kube_context: Option<String>,
    /// Longest a Kubernetes request may take, in seconds; past it the
    /// caller gets 504 / DEADLINE_EXCEEDED instead of waiting on a slow
    /// API server.
    #[arg(long, env = "KRAYNE_KUBE_TIMEOUT_SECONDS", default_value_t = 10)]
    pub kube_timeout_seconds: u64,
    /// Team mapping YAML file; reloaded when it changes and on SIGHUP.
    #[arg(long, env = "KRAYNE_TEAMS_FILE")]
    pub teams_file: PathBuf,
    /// Watch the team mapping file for changes (SIGHUP always reloads).
    #[arg(long, env = "KRAYNE_TEAMS_WATCH", default_value_t = true, action = clap::ArgAction::Set)]
    pub teams_watch: bool,
    /// Token checks.
    #[command(flatten)]
    pub jwt: JwtArgs,
    /// The audit database.
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// Apply the audit database's migrations at start (once it answers).
    /// `false` when they run as a separate step (`krayne-server migrate`,
    /// the chart's hook Job): the server then only checks that the schema
    /// is new enough, and reports it in `/readyz` when it is not.
    #[arg(long, env = "KRAYNE_MIGRATE_ON_START", default_value_t = true, action = clap::ArgAction::Set)]
    pub migrate_on_start: bool,
    /// Audit reads (get, list, describe) too, not only changes.
    #[arg(long, env = "KRAYNE_AUDIT_READS")]
    pub audit_reads: bool,
    /// The watch cache.
    #[command(flatten)]
    pub cache: CacheArgs,
    /// How clusters' services (dashboard, notebook, SSH, …) are reached:
    /// `direct` dials the head pod's IP (no load on the Kubernetes API;
    /// needs a NetworkPolicy letting krayne reach head pods), `port-forward`
    /// goes through the API server's `pods/portforward` (works from
    /// anywhere the API is reachable; needs `create` on pods/portforward).
    /// Default: `direct` inside a cluster, `port-forward` outside.
    #[arg(long, env = "KRAYNE_SERVICE_UPSTREAM", value_enum)]
    pub service_upstream: Option<UpstreamMode>,
    /// The Kubernetes clusters ("sites") krayne fronts, as one API
    /// (docs/sites.md): each with a name, a kubeconfig (none for the one
    /// krayne runs in, or `--kubeconfig`), a weight and labels (`region`,
    /// `gpu-types`). Without it, the one Kubernetes is the only site,
    /// `local`. Other sites' services are reached through their API
    /// servers' port-forward.
    #[arg(long, env = "KRAYNE_SITES_FILE", value_name = "FILE")]
    pub sites_file: Option<PathBuf>,
    /// The lifecycle reaper.
    #[command(flatten)]
    pub lifecycle: LifecycleArgs,
}

/// The lifecycle reaper: carries out the team mapping's `lifecycle:`
/// policies (docs/lifecycle.md), one replica at a time.
#[derive(Debug, Args)]
pub struct LifecycleArgs {
    /// `off`; `report` logs and counts what it would do and changes
    /// nothing; `act` warns and acts.
    #[arg(long, env = "KRAYNE_LIFECYCLE", value_enum, default_value = "off")]
    pub lifecycle: LifecycleFlag,
    /// Seconds between passes over the clusters.
    #[arg(long, env = "KRAYNE_LIFECYCLE_INTERVAL_SECONDS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub lifecycle_interval_seconds: u64,
    /// Namespace of the Lease that elects the acting replica (the
    /// server's own; in a pod, its namespace).
    #[arg(long, env = "KRAYNE_LIFECYCLE_LEASE_NAMESPACE", default_value = "default")]
    pub lifecycle_lease_namespace: String,
    /// Name of that Lease.
    #[arg(long, env = "KRAYNE_LIFECYCLE_LEASE_NAME", default_value = "krayne-lifecycle")]
    pub lifecycle_lease_name: String,
    /// Seconds the Lease holds without renewal: a dead leader is replaced
    /// within about this long.
    #[arg(long, env = "KRAYNE_LIFECYCLE_LEASE_SECONDS", default_value_t = 15, value_parser = clap::value_parser!(u64).range(2..=600))]
    pub lifecycle_lease_seconds: u64,
    /// The most this replica's clock may differ from the API server's
    /// (read from its `Date`) for it to lead the reaper: due times are the
    /// API server's, and a replica whose clock strays refuses to lead,
    /// saying so in `krayne_clock_skew_seconds` and the log.
    #[arg(long, env = "KRAYNE_LIFECYCLE_MAX_CLOCK_SKEW_SECONDS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(2..=300))]
    pub lifecycle_max_clock_skew_seconds: u64,
    /// The most clusters one pass suspends or deletes, all namespaces
    /// together: past it, acting pauses until the next pass (warnings go
    /// on), the log says so and `krayne_lifecycle_caps_reached_total`
    /// counts it (alerted on).
    #[arg(long, env = "KRAYNE_LIFECYCLE_MAX_ACTIONS_PER_PASS", default_value_t = 20, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub lifecycle_max_actions_per_pass: usize,
    /// The most clusters of one namespace one pass suspends or deletes.
    #[arg(long, env = "KRAYNE_LIFECYCLE_MAX_ACTIONS_PER_NAMESPACE", default_value_t = 5, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub lifecycle_max_actions_per_namespace: usize,
    /// How long a new or changed policy (a mapping edit) only reports what
    /// it alone would suspend or delete — in the log, in
    /// `krayne_lifecycle_actions_total{mode="settling"}` and on the
    /// cluster ("would …") — before it warns and acts (`30m`, `1h`, `0s`
    /// to act at once).
    #[arg(long, env = "KRAYNE_LIFECYCLE_POLICY_SETTLE", default_value = "1h")]
    pub lifecycle_policy_settle: String,
    /// This replica's name in the Lease (default: the pod's name from
    /// `POD_NAME`, else the host name).
    #[arg(long, env = "POD_NAME")]
    pub lifecycle_identity: Option<String>,
    /// Seconds between records of which clusters are in use through this
    /// replica (tunnels, proxied connections, browser sessions, followed
    /// logs), which the acting replica reads: every replica records,
    /// whatever its `--lifecycle`.
    #[arg(long, env = "KRAYNE_USAGE_RECORD_SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=300))]
    pub usage_record_seconds: u64,
    /// Usage accounting (docs/usage.md): the replica holding the Lease
    /// above records every Ray pod's running life and each cluster's
    /// existence and suspensions in the store database, whatever its
    /// `--lifecycle`. `false`: nothing is recorded (reports show what was)
    /// and, with `--lifecycle off`, no Lease is asked for.
    #[arg(long, env = "KRAYNE_USAGE_ACCOUNTING", default_value_t = true, action = clap::ArgAction::Set)]
    pub usage_accounting: bool,
}

/// `--lifecycle`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LifecycleFlag {
    /// Nothing.
    Off,
    /// Log and count what it would do.
    Report,
    /// Warn and act.
    Act,
}

/// How clusters' pods are secured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ClusterPodSecurity {
    /// As Krayne builds them (Pod Security `baseline`).
    Krayne,
    /// Pod Security `restricted`.
    Restricted,
}

/// How clusters' services are reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum UpstreamMode {
    /// Dial the head pod's IP.
    Direct,
    /// Through the Kubernetes API's `pods/portforward`.
    PortForward,
}

/// The watch cache of RayClusters, pods, events and namespaces.
#[derive(Debug, Clone, Args)]
pub struct CacheArgs {
    /// Serve reads from a watch cache (`false`: every read goes to
    /// Kubernetes).
    #[arg(long, env = "KRAYNE_CACHE", default_value_t = true, action = clap::ArgAction::Set)]
    pub cache: bool,
    /// Namespaces to cache, comma-separated; empty caches every namespace
    /// (cluster-wide watches). Reads elsewhere go to Kubernetes.
    #[arg(long, env = "KRAYNE_CACHE_NAMESPACES", value_delimiter = ',')]
    pub cache_namespaces: Vec<String>,
    /// A file naming the namespaces to cache instead (one a line, or
    /// comma-separated; `#` comments), read again every 5 s: a namespace
    /// added there is watched, one removed forgotten, without a restart.
    /// The chart mounts it from a ConfigMap, so onboarding a team rolls no
    /// pod.
    #[arg(long, env = "KRAYNE_CACHE_NAMESPACES_FILE", conflicts_with = "cache_namespaces")]
    pub cache_namespaces_file: Option<PathBuf>,
    /// Longest a write waits for the cache to show it, in milliseconds;
    /// reads of that cluster go to Kubernetes until it does.
    #[arg(long, env = "KRAYNE_CACHE_WRITE_WAIT_MS", default_value_t = 3000)]
    pub cache_write_wait_ms: u64,
    /// Where the API server cannot stream lists (before Kubernetes 1.27,
    /// or WatchList off): the most objects a watcher lists whole from the
    /// API server's watch cache (`resourceVersion=0`, which such API
    /// servers answer unpaged). Bigger lists, and lists by label such as
    /// Ray's pods, are read from etcd in pages of 500, so a replica's
    /// memory at start is bounded by a page, not by the platform.
    #[arg(long, env = "KRAYNE_CACHE_WHOLE_LISTS_UP_TO", default_value_t = krayne_kube::WHOLE_LISTS_UP_TO)]
    pub cache_whole_lists_up_to: u32,
}

/// How tokens are checked.
#[derive(Debug, Clone, Args)]
pub struct JwtArgs {
    /// Required `iss`.
    #[arg(long, env = "KRAYNE_JWT_ISSUER", default_value = "krayne")]
    pub jwt_issuer: String,
    /// Required audience (`aud` must contain it).
    #[arg(long, env = "KRAYNE_JWT_AUDIENCE", default_value = "krayne")]
    pub jwt_audience: String,
    /// Public key as `ALG:PATH` (RS256, PS256, ES256, ES384, EdDSA); repeatable.
    #[arg(long = "jwt-public-key", env = "KRAYNE_JWT_PUBLIC_KEYS", value_delimiter = ',')]
    pub jwt_public_keys: Vec<String>,
    /// HS256 shared-secret file: development only.
    #[arg(long, env = "KRAYNE_JWT_HS256_SECRET_FILE")]
    pub jwt_hs256_secret_file: Option<PathBuf>,
    /// Accept the HS256 development secret beside a JWKS or OIDC issuer
    /// (refused otherwise: whoever holds the secret could mint any
    /// identity the issuer vouches for).
    #[arg(long, env = "KRAYNE_ALLOW_HS256_WITH_JWKS")]
    pub allow_hs256_with_jwks: bool,
    /// Clock skew allowed, in seconds (at most 60).
    #[arg(long, env = "KRAYNE_JWT_LEEWAY_SECONDS", default_value_t = 30)]
    pub jwt_leeway_seconds: u64,
    /// JWKS URL of the token issuer.
    #[arg(long, env = "KRAYNE_JWKS_URL", conflicts_with = "oidc_issuer_url")]
    pub jwks_url: Option<String>,
    /// OIDC issuer URL: its discovery document names the JWKS URL.
    #[arg(long, env = "KRAYNE_OIDC_ISSUER_URL")]
    pub oidc_issuer_url: Option<String>,
    /// Algorithms accepted from the JWKS, comma-separated.
    #[arg(
        long,
        env = "KRAYNE_JWT_ALGORITHMS",
        value_delimiter = ',',
        default_value = "RS256,ES256"
    )]
    pub jwt_algorithms: Vec<String>,
    /// Seconds a fetched key set stays fresh.
    #[arg(long, env = "KRAYNE_JWKS_TTL_SECONDS", default_value_t = 300)]
    pub jwks_ttl_seconds: u64,
    /// Least seconds between two key-set fetches (an unknown `kid` refetches).
    #[arg(long, env = "KRAYNE_JWKS_COOLDOWN_SECONDS", default_value_t = 10)]
    pub jwks_cooldown_seconds: u64,
    /// Claim holding the subject.
    #[arg(long, env = "KRAYNE_JWT_SUBJECT_CLAIM", default_value = "sub")]
    pub jwt_subject_claim: String,
    /// Claim holding the e-mail.
    #[arg(long, env = "KRAYNE_JWT_EMAIL_CLAIM", default_value = "email")]
    pub jwt_email_claim: String,
    /// Take the e-mail as verified without `email_verified: true` in the
    /// token: only for a provider that verifies every address it issues.
    /// An unverified e-mail is never used to match the team mapping.
    #[arg(long, env = "KRAYNE_JWT_ASSUME_EMAIL_VERIFIED", default_value_t = false)]
    pub jwt_assume_email_verified: bool,
    /// Claim holding the groups (a string or a list).
    #[arg(long, env = "KRAYNE_JWT_GROUPS_CLAIM", default_value = "groups")]
    pub jwt_groups_claim: String,
    /// More issuers to trust beside the one above: a YAML list, each with
    /// its `issuer`, `audience`, keys (OIDC discovery of the issuer, or
    /// `jwks_url`), `algorithms` and claim mapping (docs/auth.md).
    #[arg(long, env = "KRAYNE_ISSUERS_FILE", value_name = "FILE")]
    pub issuers_file: Option<PathBuf>,
    /// Trust Kubernetes ServiceAccount tokens: the API server's
    /// service-account issuer, found by OIDC discovery through the
    /// Kubernetes connection. Their subject is
    /// `system:serviceaccount:<namespace>:<name>`.
    #[arg(long, env = "KRAYNE_SERVICE_ACCOUNT_TOKENS")]
    pub service_account_tokens: bool,
    /// The audience a ServiceAccount token must be requested for.
    #[arg(long, env = "KRAYNE_SERVICE_ACCOUNT_AUDIENCE", default_value = "krayne")]
    pub service_account_audience: String,
    /// The service-account issuer's `iss`, pinned (default: as the API
    /// server's discovery document names it).
    #[arg(long, env = "KRAYNE_SERVICE_ACCOUNT_ISSUER")]
    pub service_account_issuer: Option<String>,
    /// The longest a ServiceAccount token may live, in seconds (`exp −
    /// iat`; for a projected token the API server extends, until it should
    /// have been rotated): `kubectl create token --duration 48h` is
    /// refused by default.
    #[arg(long, env = "KRAYNE_SERVICE_ACCOUNT_MAX_TOKEN_SECONDS", default_value_t = 24 * 3600)]
    pub service_account_max_token_seconds: u64,
    /// Ask the API server whether it still takes each ServiceAccount token
    /// (a TokenReview, kept 30 s; RBAC `create` on `tokenreviews`), so a
    /// deleted ServiceAccount's tokens stop working at once. `false` only
    /// where that grant cannot be had.
    #[arg(long, env = "KRAYNE_SERVICE_ACCOUNT_TOKEN_REVIEW", default_value_t = true, action = clap::ArgAction::Set)]
    pub service_account_token_review: bool,
    /// Where people sign in, advertised to `krayne login` at
    /// `/.well-known/krayne`: one of the trusted issuers (default: the
    /// `--oidc-issuer-url`, when a client id is given).
    #[arg(long, env = "KRAYNE_LOGIN_ISSUER")]
    pub login_issuer: Option<String>,
    /// The OAuth client id `krayne login` uses (a public client: no secret,
    /// PKCE, loopback redirect, device grant).
    #[arg(long, env = "KRAYNE_LOGIN_CLIENT_ID")]
    pub login_client_id: Option<String>,
    /// Scopes `krayne login` asks for.
    #[arg(
        long,
        env = "KRAYNE_LOGIN_SCOPES",
        value_delimiter = ',',
        default_value = "openid,email,profile,offline_access"
    )]
    pub login_scopes: Vec<String>,
}

/// `krayne-server sandbox`.
#[cfg(feature = "sandbox")]
#[derive(Debug, Args)]
#[command(
    after_help = "Faults, to learn how krayne says why a cluster fails (docs/sandbox.md, \"Fault injection\"):
  an image containing `doesnotexist` or `:invalid`   the image cannot be pulled (ErrImagePull, then ImagePullBackOff)
      krayne create bad --set head.image=rayproject/ray:doesnotexist
  an image containing `crash-loop`                   the head starts and crashes, again and again (CrashLoopBackOff)
      krayne create crashy --set head.image=example.com/crash-loop:1
  a head larger than any node (16 CPUs, 64Gi, 2 GPUs) it stays Pending: Unschedulable
      krayne create huge --set head.cpus=32
  annotation sandbox.krayne.dev/fault on the RayCluster (kubectl annotate; see the banner's kubeconfig):
      crash-loop, dashboard-hangs, hostile-head:<oversized|nested|paths|names|escapes|slow|endless|redirect>
Then `krayne describe NAME` shows the events, `krayne logs NAME --previous` what a crashed head said."
)]
pub struct SandboxArgs {
    /// Port of the API on 127.0.0.1 (0 picks a free one).
    #[arg(long, env = "KRAYNE_SANDBOX_PORT", default_value_t = 8080)]
    pub port: u16,
    /// Port of /healthz, /readyz and /metrics on 127.0.0.1; by default a
    /// free one (printed), so sandboxes can run side by side.
    #[arg(long, env = "KRAYNE_SANDBOX_OPS_PORT", default_value_t = 0)]
    pub ops_port: u16,
    /// Where to write a kubeconfig for kubectl (default: a temp file).
    #[arg(long)]
    pub kubeconfig_out: Option<PathBuf>,
    /// Multiply the simulated operator's delays (0 = instant).
    #[arg(long, default_value_t = 1.0)]
    pub time_scale: f64,
    /// The watch cache.
    #[command(flatten)]
    pub cache: CacheArgs,
    /// How clusters' services are reached: through the sandbox's
    /// `pods/portforward` (default), or `direct` to the pods' loopback IPs.
    #[arg(long, env = "KRAYNE_SERVICE_UPSTREAM", value_enum, default_value = "port-forward")]
    pub service_upstream: UpstreamMode,
    /// A team mapping of your own (teams, grants, quotas) instead of the
    /// built-in one (ml-research, editor on ml-team with a quota of 10
    /// clusters, 64 CPUs, 256Gi and 8 GPUs). It is reloaded on SIGHUP.
    #[arg(long, value_name = "FILE")]
    pub teams: Option<PathBuf>,
    /// Simulated Kubernetes clusters ("sites") behind the one API, each
    /// with its own KubeRay and heads (docs/sites.md): `site-1` offers
    /// `a100` GPUs, `site-2` `h100`, and so on.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=4))]
    pub sites: u8,
}

/// `krayne-server token …`.
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Sign a development token.
    Mint(MintArgs),
}

/// `krayne-server token mint`.
#[derive(Debug, Args)]
pub struct MintArgs {
    /// HS256 secret file, or a PEM private key for `--alg`.
    #[arg(long)]
    pub key: PathBuf,
    /// Signing algorithm.
    #[arg(long, default_value = "HS256")]
    pub alg: String,
    /// Subject.
    #[arg(long)]
    pub sub: String,
    /// E-mail claim.
    #[arg(long)]
    pub email: Option<String>,
    /// Groups, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub groups: Vec<String>,
    /// Lifetime, e.g. `1h`, `30m`, `2d`.
    #[arg(long, default_value = "1h")]
    pub ttl: String,
    /// Issuer.
    #[arg(long, default_value = "krayne")]
    pub issuer: String,
    /// Audience.
    #[arg(long, default_value = "krayne")]
    pub audience: String,
}
