//! Validated types, the closed error enum and the rules of the cluster model.
//! Pure: no I/O.

mod apps_domain;
pub mod atom;
pub mod audit;
mod authorized;
mod cluster;
mod cluster_ref;
mod config;
mod error;
mod head_service;
mod identity;
mod job;
pub mod kueue;
mod lax;
pub mod lifecycle;
mod names;
pub mod observed;
mod paging;
mod pod_log;
mod ports;
mod principal;
mod public_url;
mod quantity;
pub mod queue;
pub mod quota;
pub mod ray_auth;
mod ray_head;
mod rayjob;
mod rendered;
mod request_id;
mod run;
#[cfg(feature = "schema")]
pub mod schema;
pub mod sites;
mod spec;
pub mod text;
mod uid;
mod usage;
mod watch;

pub use apps_domain::{AppHost, AppsDomain};
pub use atom::{Atom, Shared, ShortText};
pub use authorized::Authorized;
pub use cluster::{
    ClusterDetails, ClusterInfo, ClusterStatus, Condition, EventInfo, HeadDetails, PodInfo, Summary, WorkerGroupDetails,
};
pub use cluster_ref::{ClusterRef, Site};
pub use config::{FieldValidation, ReadConfig, check_worker_counts, defaults, limits, parse_yaml, whole_count};
pub use error::{AuthFailure, Error, FieldViolation, ResourceKind, Violations};
pub use head_service::{HeadService, ServiceState, ServiceStream, ServiceTarget, ServiceUpstream};
pub use identity::{ClientSettings, ClusterDefaults, Identity, LoginSettings, NamespaceAccess, VersionInfo};
pub use job::{
    Job, JobStatus, JobSubmission, MAX_ENTRYPOINT_LEN, MAX_SUBMISSION_ID_LEN, PACKAGE_SCHEME, RuntimeEnv, check_job_id,
    check_package_name, package_uri,
};
pub use names::{MAX_CLUSTER_NAME_LEN, check_dns1035_label, check_dns1123_label, check_dns1123_subdomain};
pub use observed::{ObjectMeta, ObservedCluster, ObservedEvent, ObservedPod};
pub use paging::{Page, PageRequest, resume_points};
pub use pod_log::{
    MAX_LOG_BYTES, MAX_TAIL_LINES, PodChoice, PodLog, PodLogOptions, PodLogParts, PodLogQuery, RayLogFiles,
    check_log_file_name,
};
pub use ports::{
    ActivityLedger, AdmissionGuard, AdmissionHold, AdmissionLock, AuditSink, ClusterChange, ClusterFeed, ClusterStore,
    ClusterUse, Companion, FeedChange, IssuerDocuments, KueueReads, Leadership, PodsOf, PolicyLedger, PolicyRecord,
    Preconditions, RayJobStore, RunLedger, TokenReviews,
};
pub use principal::{Action, Grant, Principal, Role, pattern_covers};
pub use public_url::PublicUrl;
pub use quantity::{Quantity, QuantityError};
pub use ray_head::{
    DeleteReply, DialHead, HeadLink, HeadReader, HeadUse, LogFileRead, LogStream, PackageBody, RayHeads, RayJobs,
    RayLogListing, RayNode, SubmitReply,
};
pub use rayjob::{KeptRun, MAX_KEPT_LOG, ObservedRayJob, RayJobInfo, RayJobSpec, RayJobStatus, RunState, log_tail};
pub use rendered::{ClusterPatch, RenderedCluster};
pub use request_id::RequestId;
pub use run::{
    DEFAULT_TTL_SECONDS_AFTER_FINISHED, MAX_RUN_NAME_LEN, MAX_TTL_SECONDS_AFTER_FINISHED,
    MIN_TTL_SECONDS_AFTER_FINISHED, ReadRun, RunSpec,
};
pub use spec::{AutoscalerSpec, ClusterSpec, HeadSpec, ServicesSpec, UpscalingMode, WorkerGroupSpec};
pub use uid::Uid;
pub use usage::{
    PodCharge, UsageBy, UsageClose, UsageFigures, UsageInterval, UsageKind, UsageLedger, UsageRow, UsageTotals,
    report as usage_report, row_key as usage_row_key,
};
pub use watch::{WatchEvent, WatchEventType, WatchFrom, WatchVersion, Watched, WatchedKind, watch_timeout};
