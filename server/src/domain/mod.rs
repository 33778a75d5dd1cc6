//! Validated types, the closed error enum and the rules of the cluster model.
//! Pure: no I/O.

mod cluster;
mod config;
mod error;
mod names;
mod overrides;
mod quantity;
mod spec;

pub use cluster::{
    ClusterDetails, ClusterInfo, ClusterStatus, Condition, EventInfo, HeadDetails, PodInfo,
    WorkerGroupDetails,
};
pub use config::{defaults, limits, parse_yaml};
pub use error::{Error, FieldViolation, ResourceKind, Violations};
pub use names::{MAX_CLUSTER_NAME_LEN, check_dns1035_label, check_dns1123_label};
pub use overrides::{apply_override, apply_overrides};
pub use quantity::{Quantity, QuantityError};
pub use spec::{
    AutoscalerSpec, ClusterSpec, HeadSpec, ServicesSpec, UpscalingMode, WorkerGroupSpec,
};
