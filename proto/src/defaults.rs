//! Krayne's cluster defaults: what a config leaves out becomes these. The
//! one source the server's model, the SDK's builders, the CLI and the
//! TUI's create form read (issue 56: the TUI's form once had its own).

/// Namespace when none is given.
pub const NAMESPACE: &str = "default";
/// Head CPU.
pub const HEAD_CPUS: &str = "1";
/// Head memory.
pub const HEAD_MEMORY: &str = "4Gi";
/// Worker group name.
pub const GROUP_NAME: &str = "worker";
/// Workers a group starts with.
pub const REPLICAS: u32 = 0;
/// Worker group lower bound.
pub const MIN_REPLICAS: u32 = 0;
/// Worker group upper bound.
pub const MAX_REPLICAS: u32 = 1;
/// Worker CPU.
pub const WORKER_CPUS: &str = "1";
/// Worker memory.
pub const WORKER_MEMORY: &str = "2Gi";
/// GPUs per worker (and in the head).
pub const GPUS: u32 = 0;
/// Whether Ray's autoscaler runs.
pub const AUTOSCALING: bool = true;
/// Whether each of the head's services (notebook, code-server, ssh) runs.
pub const SERVICE_ON: bool = true;
/// Autoscaler idle timeout.
pub const IDLE_TIMEOUT_SECONDS: u32 = 60;
/// Autoscaler container CPU.
pub const AUTOSCALER_CPU: &str = "500m";
/// Autoscaler container memory.
pub const AUTOSCALER_MEMORY: &str = "512Mi";
